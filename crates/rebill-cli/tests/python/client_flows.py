"""A merchant's ordinary flows through the official Python v2 client (`recurly==2.10.20`,
unmodified) against a running `rebill serve`.

Run by crates/rebill-cli/tests/python_client.rs, which passes the server in the environment:

    REBILL_URL         http://127.0.0.1:PORT (the listening socket)
    REBILL_API_KEY     the sandbox site's private key
    REBILL_PUBLIC_KEY  the site's public key (the token endpoint, as a browser would call it)

The client is configured with exactly three settings: ``recurly.BASE_URI``, ``recurly.API_KEY`` and
``recurly.API_VERSION``. Every flow below uses only the client's public API: its methods, and the
links and ``<a name>`` anchors of the documents it reads. Each flow is one function; each runs
even when another failed, and a failure prints the exception with the last requests and responses.
The program exits non-zero when any flow failed.

Two things belong to this harness, not to the client:

* Name resolution. Every 2.x release of the client refuses to send a request to a host outside
  ``recurly.VALID_DOMAINS`` (``.recurly.com``), and a ``BASE_URI`` must contain ``%s`` (the
  client fills in ``recurly.SUBDOMAIN``). So ``BASE_URI`` names the host ``api.rebill.recurly.com``
  on port 80, and this program resolves exactly that name, in its own process, to the server's
  socket, as a hosts file would. The server sees ``Host: api.rebill.recurly.com`` and writes its
  hrefs with it, so every link the client follows comes back here too.
* A recorder of the last HTTP exchanges (at ``http.client``, below the client), for failure
  reports only.
"""

import collections
import datetime
import http.client
import io
import json
import os
import socket
import sys
import traceback
import urllib.parse
import urllib.request

import recurly

HOST = "api.rebill.recurly.com"


# ---- harness: name resolution and the exchange recorder ---------------------------------------


def resolve_to(name, address):
    """Resolves `name` (any port) to `address` = (host, port); every other name as before."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host == name:
            return real(address[0], address[1], *args, **kwargs)
        return real(host, port, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo


EXCHANGES = collections.deque(maxlen=4)


def record_exchanges():
    """Keeps the last requests and responses made through `http.client` (the key redacted)."""
    request = http.client.HTTPConnection.request
    getresponse = http.client.HTTPConnection.getresponse

    def recording_request(self, method, url, body=None, headers=None, **kwargs):
        shown = {k: ("<redacted>" if k.lower() == "authorization" else v) for k, v in (headers or {}).items()}
        # Decoded for the report only: the request goes out with the bytes the client made.
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        EXCHANGES.append({"request": "%s %s" % (method, url), "headers": shown, "body": text, "response": None})
        return request(self, method, url, body, headers or {}, **kwargs)

    def recording_getresponse(self):
        response = getresponse(self)
        data = response.read()
        response.read = io.BytesIO(data).read
        if EXCHANGES:
            EXCHANGES[-1]["response"] = "%d %s\n%s\n\n%s" % (
                response.status,
                response.reason,
                "\n".join("%s: %s" % h for h in response.getheaders()),
                data.decode("utf-8", "replace"),
            )
        return response

    http.client.HTTPConnection.request = recording_request
    http.client.HTTPConnection.getresponse = recording_getresponse


def last_exchanges():
    out = []
    for e in EXCHANGES:
        out.append(">>> %s" % e["request"])
        out.extend("    %s: %s" % h for h in e["headers"].items())
        if e["body"]:
            out.append("    " + str(e["body"]).replace("\n", "\n    "))
        out.append("<<< " + (e["response"] or "(no response)").replace("\n", "\n    "))
    return "\n".join(out)


# ---- helpers -------------------------------------------------------------------------------------


class Check(AssertionError):
    pass


def expect(actual, expected, what):
    if actual != expected:
        raise Check("%s: expected %r, got %r" % (what, expected, actual))


def expect_true(value, what):
    if not value:
        raise Check("%s: expected a true value, got %r" % (what, value))


def absent(resource, name):
    """Whether the document the resource was read from has no `name` element (nor anchor)."""
    try:
        value = getattr(resource, name)
    except AttributeError:
        return True
    raise Check("%s: expected no <%s>, got %r" % (type(resource).__name__, name, value))


def raises(error_class, call, what):
    try:
        call()
    except error_class as e:
        return e
    raise Check("%s: expected %s" % (what, error_class.__name__))


def card_token(number):
    """A token from the token endpoint, requested as the browser library does (form-encoded)."""
    form = urllib.parse.urlencode(
        {
            "key": os.environ["REBILL_PUBLIC_KEY"],
            "number": number,
            "month": "12",
            "year": "2031",
            "cvv": "123",
            "first_name": "Verena",
            "last_name": "Example",
            "address1": "123 Main St.",
            "city": "San Francisco",
            "state": "CA",
            "postal_code": "94105",
            "country": "US",
        }
    ).encode()
    request = urllib.request.Request(
        os.environ["REBILL_URL"] + "/js/v1/token",
        data=form,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    with urllib.request.urlopen(request) as response:
        answer = json.loads(response.read())
    expect_true(answer.get("id"), "token id in %r" % answer)
    return answer["id"]


def advance_sandbox_clock(amount):
    """Moves the sandbox site's clock on (rebill's sandbox endpoint; test setup, not the client)."""
    import base64

    key = base64.b64encode(("%s:" % os.environ["REBILL_API_KEY"]).encode()).decode()
    request = urllib.request.Request(
        os.environ["REBILL_URL"] + "/sandbox/clock",
        data=("<clock><advance>%s</advance></clock>" % amount).encode(),
        headers={"Content-Type": "application/xml; charset=utf-8", "Authorization": "Basic " + key},
        method="POST",
    )
    with urllib.request.urlopen(request) as response:
        expect(response.status, 200, "sandbox clock")


def new_plan(code, unit_amount=1000):
    plan = recurly.Plan(
        plan_code=code,
        name="Plan %s" % code,
        unit_amount_in_cents=recurly.Money(USD=unit_amount),
        plan_interval_length=1,
        plan_interval_unit="months",
    )
    plan.save()
    return plan


def new_account(code, **fields):
    account = recurly.Account(account_code=code, email="%s@example.com" % code, first_name="Ada", last_name="Lovelace", **fields)
    account.save()
    return account


def account_with_card(code, number="4111111111111111"):
    return new_account(code, billing_info=recurly.BillingInfo(token_id=card_token(number)))


def subscribe(plan_code, account_code, number="4111111111111111"):
    subscription = recurly.Subscription(
        plan_code=plan_code,
        currency="USD",
        account=recurly.Account(
            account_code=account_code,
            email="%s@example.com" % account_code,
            billing_info=recurly.BillingInfo(token_id=card_token(number)),
        ),
    )
    subscription.save()
    return subscription


# ---- flows -----------------------------------------------------------------------------------------


def plans_and_add_ons():
    plan = new_plan("py-gold", 1000)
    expect(plan.plan_code, "py-gold", "created plan code")
    expect(plan.unit_amount_in_cents["USD"], 1000, "created plan price")
    expect(plan.plan_interval_unit, "months", "interval unit")
    expect(plan.plan_interval_length, 1, "interval length")

    fetched = recurly.Plan.get("py-gold")
    expect(fetched.name, "Plan py-gold", "fetched plan name")
    fetched.name = "Gold, renamed"
    fetched.save()
    expect(recurly.Plan.get("py-gold").name, "Gold, renamed", "renamed plan")

    fetched.create_add_on(recurly.AddOn(add_on_code="seats", name="Extra seats", unit_amount_in_cents=recurly.Money(USD=250)))
    add_on = fetched.get_add_on("seats")
    expect(add_on.add_on_code, "seats", "add-on code")
    expect(add_on.name, "Extra seats", "add-on name")
    expect(add_on.unit_amount_in_cents["USD"], 250, "add-on price")
    listed = [a.add_on_code for a in recurly.Plan.get("py-gold").add_ons()]
    expect(listed, ["seats"], "the plan's add_ons link")

    codes = [p.plan_code for p in recurly.Plan.all()]
    expect_true("py-gold" in codes, "py-gold in Plan.all() %r" % codes)
    expect_true(recurly.Plan.count() >= 1, "Plan.count()")


def accounts():
    created = new_account("py-acct-1", company_name="Analytical Engines")
    expect(created.account_code, "py-acct-1", "created account code")
    expect(created.state, "active", "created account state")
    expect(created.company_name, "Analytical Engines", "company name")
    expect_true(isinstance(created.created_at, datetime.datetime), "created_at is a datetime")

    account = recurly.Account.get("py-acct-1")
    expect(account.email, "py-acct-1@example.com", "fetched email")
    account.first_name = "Augusta"
    account.save()  # PUT to the account's href
    expect(account.first_name, "Augusta", "updated first name (the PUT answer)")
    expect(recurly.Account.get("py-acct-1").first_name, "Augusta", "updated first name (read again)")

    new_account("py-acct-2")
    new_account("py-acct-3")

    total = recurly.Account.count()  # HEAD, X-Records
    expect_true(total >= 3, "Account.count() = %r" % total)
    page = recurly.Account.all(per_page=1)
    expect(len(page), 1, "accounts on the first page at per_page=1")
    second = page.next_page()
    expect(len(second), 1, "accounts on the second page")
    expect_true(page[0].account_code != second[0].account_code, "two pages, two accounts")
    every = [a.account_code for a in recurly.Account.all(per_page=1)]  # follows every next link
    expect(len(every), total, "accounts reached by paging")
    expect(len(set(every)), total, "no account twice across pages")
    for code in ("py-acct-1", "py-acct-2", "py-acct-3"):
        expect_true(code in every, "%s listed" % code)

    account.delete()  # close
    expect(recurly.Account.get("py-acct-1").state, "closed", "state after close")
    expect_true("py-acct-1" in [a.account_code for a in recurly.Account.all_closed()], "listed as closed")
    expect(recurly.Account.count(state="closed"), 1, "count of closed accounts")
    account.reopen()
    expect(account.state, "active", "state after reopen (the PUT answer)")
    expect(recurly.Account.get("py-acct-1").state, "active", "state after reopen (read again)")
    expect(recurly.Account.count(state="closed"), 0, "count of closed accounts after reopen")


def billing_info_from_token():
    account = new_account("py-billing")
    account.update_billing_info(recurly.BillingInfo(token_id=card_token("4111111111111111")))
    info = recurly.Account.get("py-billing").billing_info  # follows the billing_info link
    expect(info.first_name, "Verena", "billing first name (from the token)")
    expect(info.last_name, "Example", "billing last name")
    expect(info.card_type, "Visa", "card type")
    expect(info.first_six, "411111", "first six")
    expect(info.last_four, "1111", "last four")
    expect(info.month, 12, "expiry month")
    expect(info.year, 2031, "expiry year")
    expect(info.zip, "94105", "postal code")
    expect(info.country, "US", "country")
    expect(info.type, "credit_card", "billing info type")
    absent(info, "number")

    # Storing a card verifies it; the verification is listed and is neither refundable nor voidable.
    transactions = list(recurly.Account.get("py-billing").transactions())
    verifications = [t for t in transactions if t.action == "verify"]
    expect(len(verifications), 1, "verification transactions of %r" % [t.action for t in transactions])
    verification = verifications[0]
    expect(verification.status, "success", "verification status")
    expect(verification.refundable, False, "verification refundable")
    expect(verification.voidable, False, "verification voidable")
    absent(verification, "transaction_error")
    # The client's refund() looks for the <a name="refund"> anchor and raises AttributeError
    # without one (with one, it would send the refund).
    try:
        verification.refund()
    except AttributeError:
        pass
    else:
        raise Check("a verification has no refund anchor")


def subscriptions():
    new_plan("py-sub-plan", 1000)
    subscription = subscribe("py-sub-plan", "py-subscriber")
    expect(subscription.state, "active", "created subscription state")
    expect(subscription.plan_code, "py-sub-plan", "plan code")
    expect(subscription.unit_amount_in_cents, 1000, "unit amount")
    expect(subscription.quantity, 1, "quantity")
    expect(subscription.currency, "USD", "currency")
    expect(subscription.account().account_code, "py-subscriber", "the subscription's account link")
    subscriber = recurly.Account.get("py-subscriber")
    expect(subscriber.billing_info.last_four, "1111", "the nested token became the account's billing info")
    first = [(i.state, i.total_in_cents) for i in subscriber.invoices()]
    expect(first, [("paid", 1000)], "the subscription's first invoice, paid with the card")

    fetched = recurly.Subscription.get(subscription.uuid)
    expect(fetched.uuid, subscription.uuid, "fetched uuid")
    expect(fetched.state, "active", "fetched state")
    ends = fetched.current_period_ends_at
    expect_true(isinstance(ends, datetime.datetime), "current_period_ends_at is a datetime")

    fetched.quantity = 2
    fetched.save()  # PUT with timeframe=now
    expect(fetched.quantity, 2, "changed quantity (the PUT answer)")
    expect(recurly.Subscription.get(subscription.uuid).quantity, 2, "changed quantity (read again)")

    fetched.cancel()
    expect(fetched.state, "canceled", "state after cancel")
    expect_true(isinstance(fetched.canceled_at, datetime.datetime), "canceled_at after cancel")
    expect(fetched.expires_at, ends, "a canceled subscription expires at the period end")
    fetched.reactivate()
    expect(fetched.state, "active", "state after reactivate")
    expect(fetched.canceled_at, None, "canceled_at after reactivate")
    expect(fetched.expires_at, None, "expires_at after reactivate")

    later = (ends + datetime.timedelta(days=10)).replace(microsecond=0)
    fetched.postpone(later.replace(tzinfo=None))  # the client formats it with isoformat()
    expect(fetched.current_period_ends_at, later, "period end after postpone")
    expect(recurly.Subscription.get(subscription.uuid).current_period_ends_at, later, "period end read again")

    fetched.terminate(refund="none")
    expect(fetched.state, "expired", "state after terminate")
    expect_true(isinstance(fetched.expires_at, datetime.datetime), "expires_at after terminate")
    expect_true(isinstance(fetched.canceled_at, datetime.datetime), "canceled_at after terminate")
    listed = [s.uuid for s in recurly.Subscription.all(state="expired")]
    expect_true(subscription.uuid in listed, "listed as expired")


def subscription_pause_and_resume():
    new_plan("py-pause-plan", 1500)
    subscription = subscribe("py-pause-plan", "py-pauser")
    ends = subscription.current_period_ends_at
    subscription.pause(1)
    expect(subscription.state, "active", "a pause waits for the period end")
    expect(subscription.remaining_pause_cycles, 1, "remaining pause cycles")
    expect(subscription.paused_at, ends, "paused_at = the period end")

    advance_sandbox_clock("1month")
    paused = recurly.Subscription.get(subscription.uuid)
    expect(paused.state, "paused", "state once the pause has started")
    paused.resume()
    expect(paused.state, "active", "state after resume")
    expect(recurly.Subscription.get(subscription.uuid).state, "active", "state after resume (read again)")


def invoices():
    account = account_with_card("py-invoicer")
    account.charge(recurly.Adjustment(description="Consulting", unit_amount_in_cents=500, currency="USD", quantity=2))
    collection = account.invoice()  # automatic: charged to the card now
    paid = collection.charge_invoice
    expect(paid.state, "paid", "automatically collected invoice")
    expect(paid.total_in_cents, 1000, "invoice total")
    expect(paid.currency, "USD", "invoice currency")
    lines = paid.line_items
    expect(len(lines), 1, "line items")
    expect(lines[0].description, "Consulting", "line item description")
    expect(lines[0].unit_amount_in_cents, 500, "line item unit amount")
    expect(lines[0].quantity, 2, "line item quantity")
    expect([t.status for t in paid.transactions], ["success"], "the invoice's transactions")

    fetched = recurly.Invoice.get(paid.invoice_number)
    expect(fetched.invoice_number, paid.invoice_number, "fetched invoice number")
    expect(fetched.total_in_cents, 1000, "fetched total")
    expect(fetched.account().account_code, "py-invoicer", "the invoice's account link")

    # Manual invoices with net terms stay pending until something settles them (with net terms 0
    # they would be due, and become past due, at once).
    def manual_invoice(amount):
        account.charge(recurly.Adjustment(description="Manual", unit_amount_in_cents=amount, currency="USD"))
        invoice = account.invoice(collection_method="manual", net_terms=30).charge_invoice
        expect(invoice.state, "pending", "a manual invoice")
        expect(invoice.total_in_cents, amount, "manual invoice total")
        expect(invoice.net_terms, 30, "net terms")
        return invoice

    to_collect = manual_invoice(300)
    to_mark_paid = manual_invoice(400)
    to_fail = manual_invoice(500)

    pending = [i.invoice_number for i in recurly.Invoice.all_pending()]
    expect(sorted(pending), sorted([to_collect.invoice_number, to_mark_paid.invoice_number, to_fail.invoice_number]), "pending invoices")
    expect(recurly.Invoice.count(state="pending"), 3, "count of pending invoices")

    collection = to_collect.force_collect()  # the client reads the answer as an invoice_collection
    try:
        collected = collection.charge_invoice
    except AttributeError:
        raise Check("force_collect: no <charge_invoice> in the answer (the client expects <invoice_collection>)")
    expect(collected.invoice_number, to_collect.invoice_number, "collected invoice")
    expect(collected.state, "paid", "state after collect")

    to_mark_paid.mark_successful()  # the invoice's anchor
    expect(to_mark_paid.state, "paid", "state after mark_successful")

    failed = to_fail.mark_failed().charge_invoice
    expect(failed.state, "failed", "state after mark_failed")

    expect(recurly.Invoice.count(state="pending"), 0, "no pending invoice left")
    expect(
        sorted(i.invoice_number for i in recurly.Invoice.all_failed()),
        [to_fail.invoice_number],
        "failed invoices",
    )
    paid_numbers = [i.invoice_number for i in recurly.Invoice.all_paid()]
    for number in (paid.invoice_number, to_collect.invoice_number, to_mark_paid.invoice_number):
        expect_true(number in paid_numbers, "invoice %s listed as paid" % number)
    mine = [i.invoice_number for i in recurly.Account.get("py-invoicer").invoices()]
    expect(len(mine), 4, "the account's invoices link")


def invoice_pdf():
    account = account_with_card("py-pdf")
    account.charge(recurly.Adjustment(description="Café crème", unit_amount_in_cents=1234, currency="USD"))
    number = account.invoice().charge_invoice.invoice_number

    pdf = recurly.Invoice.pdf(number)  # the client's own download: Accept: application/pdf
    expect(pdf[:5], b"%PDF-", "the start of the invoice's PDF")
    expect_true(b"%%EOF" in pdf[-32:], "the PDF ends with its trailer")
    expect_true(b"(Invoice %d)" % number in pdf, "the English title in the PDF's page")

    # Invoice.pdf sends no language; the client's request method carries one, as other
    # released clients send theirs (PHP: the client's locale).
    url = urllib.parse.urljoin(recurly.base_uri(), recurly.Invoice.member_path % (number,))
    response = recurly.Invoice.http_request(url, headers={"accept": "application/pdf", "accept-language": "de-DE"})
    expect(response.status, 200, "status of the German PDF")
    expect(response.getheader("Content-Type"), "application/pdf", "Content-Type of the German PDF")
    expect(response.getheader("Content-Language"), "de-DE", "Content-Language of the German PDF")
    german = response.read()
    expect(german[:5], b"%PDF-", "the start of the German PDF")
    expect_true(b"(Rechnung %d)" % number in german, "the German title in the PDF's page")
    # Text with letters beyond ASCII is written as a hex string of its WinAnsi bytes.
    accented = b"<" + "Café crème".encode("cp1252").hex().upper().encode() + b">"
    expect_true(accented in german, "the line's description, accents included (%r)" % accented)

    # The client reads whatever comes back: a missing invoice's answer is the XML error.
    missing = recurly.Invoice.pdf(999999)
    expect_true(b"<symbol>not_found</symbol>" in missing, "the error document of a missing invoice: %r" % missing[:200])


def transactions():
    transaction = recurly.Transaction(
        amount_in_cents=1500,
        currency="USD",
        description="One-off consulting",
        account=recurly.Account(
            account_code="py-payer",
            email="py-payer@example.com",
            billing_info=recurly.BillingInfo(token_id=card_token("4111111111111111")),
        ),
    )
    transaction.save()
    expect(transaction.status, "success", "one-off transaction status")
    expect(transaction.action, "purchase", "action")
    expect(transaction.amount_in_cents, 1500, "amount")
    expect(transaction.currency, "USD", "currency")
    expect(transaction.refundable, True, "a purchase is refundable")
    absent(transaction, "transaction_error")
    expect(transaction.details.account.account_code, "py-payer", "the transaction's account details")

    fetched = recurly.Transaction.get(transaction.uuid)
    expect(fetched.uuid, transaction.uuid, "fetched uuid")
    expect(fetched.amount_in_cents, 1500, "fetched amount")
    absent(fetched, "transaction_error")
    expect(fetched.invoice().total_in_cents, 1500, "the transaction's invoice link")

    uuids = [t.uuid for t in recurly.Transaction.all(state="successful", type="purchase")]
    expect_true(transaction.uuid in uuids, "listed as a successful purchase")
    mine = [t.uuid for t in recurly.Account.get("py-payer").transactions() if t.action == "purchase"]
    expect(mine, [transaction.uuid], "the account's purchases")


def declined_card():
    def charge():
        recurly.Transaction(
            amount_in_cents=2000,
            currency="USD",
            account=recurly.Account(
                account_code="py-declined",
                email="py-declined@example.com",
                billing_info=recurly.BillingInfo(token_id=card_token("4000000000000002")),
            ),
        ).save()

    error = raises(recurly.ValidationError, charge, "a declined card")
    expect(error.transaction_error_code, "declined", "transaction error code")
    expect(error.transaction_error.error_code, "declined", "transaction_error.error_code")
    expect(error.transaction_error.error_category, "soft", "transaction_error.error_category")
    expect_true(error.transaction_error.customer_message, "customer message")
    expect_true(error.transaction_error.merchant_message, "merchant message")
    expect_true("transaction.base" in error.errors, "a field error on transaction.base: %r" % list(error.errors))
    expect(error.errors["transaction.base"].symbol, "declined", "field error symbol")
    declined = error.response_doc.find("transaction")
    expect(declined.find("status").text, "declined", "the declined transaction in the error document")

    def subscribe_declined():
        new_plan("py-declined-plan", 900)
        subscribe("py-declined-plan", "py-declined-sub", number="4000000000000002")

    error = raises(recurly.ValidationError, subscribe_declined, "a subscription with a declined card")
    expect(error.transaction_error_code, "declined", "subscription decline code")
    raises(recurly.NotFoundError, lambda: recurly.Account.get("py-declined-sub"), "no account is left by a declined subscription")


def missing_account():
    error = raises(recurly.NotFoundError, lambda: recurly.Account.get("py-nobody"), "a missing account")
    expect(error.symbol, "not_found", "error symbol")
    expect_true(error.message and "py-nobody" in error.message, "the message names the account: %r" % error.message)
    description = error.response_doc.find("description")
    expect(description.attrib.get("lang"), "en-US", "lang of <description>")


def account_balance():
    account = account_with_card("py-balance")
    balance = account.account_balance()  # follows the account_balance link
    expect(balance.balance_in_cents["USD"] if "USD" in balance.balance_in_cents else 0, 0, "balance of a new account")
    expect(balance.past_due, False, "past_due of a new account")

    account.charge(recurly.Adjustment(description="Open", unit_amount_in_cents=700, currency="USD"))
    account.invoice(collection_method="manual", net_terms=30)
    balance = recurly.Account.get("py-balance").account_balance()
    expect(balance.balance_in_cents["USD"], 700, "balance with an open invoice")
    expect(balance.past_due, False, "an invoice that is not due yet is not past due")



def refunds():
    """Money back through the client: an open amount and a line item of a paid invoice refunded
    (``Invoice.refund_amount``, ``Invoice.refund``), part of its purchase refunded through the
    transaction's ``refund`` anchor (202 and the refund transaction's ``Location``), a one-off
    charge given back whole the same day (a void: no refund transaction), a refund the sandbox
    declines, and the account's balance after it all."""
    account = account_with_card("py-refunds")
    account.charge(recurly.Adjustment(description="Seats", unit_amount_in_cents=2000, currency="USD", quantity=3))
    invoice = account.invoice().charge_invoice
    expect(invoice.refundable_total_in_cents, 6000, "refundable total of the paid invoice")

    refund = invoice.refund_amount(1500)  # credit_first: nothing was paid by credit, so the card
    expect(refund.total_in_cents, -1500, "total of the refund invoice")
    expect(
        [(t.action, t.amount_in_cents, t.status) for t in refund.transactions],
        [("refund", 1500, "success")],
        "the refund invoice's transactions",
    )
    original = recurly.Invoice.get(invoice.invoice_number)
    expect(original.refundable_total_in_cents, 4500, "refundable after 1500")

    seats = original.line_items[0]
    refund = original.refund([{"adjustment": seats, "quantity": 1, "prorate": False}], "transaction_first")
    expect(refund.total_in_cents, -2000, "one seat refunded")
    expect([l.quantity for l in refund.line_items], [-1], "the refund line's quantity")
    expect(recurly.Invoice.get(invoice.invoice_number).refundable_total_in_cents, 2500, "refundable after a seat")

    purchase = [t for t in recurly.Invoice.get(invoice.invoice_number).transactions if t.action == "purchase"][0]
    expect((purchase.refundable, purchase.voidable), (True, False), "a purchase refunded in part: refunds only")
    purchase.refund(amount_in_cents=500)
    given = purchase.get_refund_transaction()
    expect((given.action, given.amount_in_cents, given.status), ("refund", 500, "success"), "the refund transaction")
    expect(given.original_transaction().uuid, purchase.uuid, "the refund's original transaction")
    expect(recurly.Invoice.get(invoice.invoice_number).refundable_total_in_cents, 2000, "refundable after 500")

    charge = recurly.Transaction(amount_in_cents=800, currency="USD", account=recurly.Account(account_code="py-refunds"))
    charge.save()
    expect((charge.voidable, charge.refundable), (True, True), "a charge that has not settled")
    charge.refund()  # 202 without Location: there is no refund transaction to fetch
    refunds_of_charge = [
        t for t in recurly.Account.get("py-refunds").transactions() if t.action == "refund" and t.amount_in_cents == 800
    ]
    expect(refunds_of_charge, [], "a void makes no refund transaction")
    voided = recurly.Transaction.get(charge.uuid)
    expect((voided.status, voided.voidable, voided.refundable), ("void", False, False), "the voided charge")

    balance = recurly.Account.get("py-refunds").account_balance()
    expect(balance.balance_in_cents["USD"], 0, "nothing owed either way after the refunds")
    expect(balance.past_due, False, "not past due")

    declining = account_with_card("py-refund-declined", number="4000000000002024")
    declining.charge(recurly.Adjustment(description="Kept", unit_amount_in_cents=900, currency="USD"))
    paid = declining.invoice().charge_invoice
    error = raises(recurly.ValidationError, lambda: paid.refund_amount(900), "a refund the sandbox declines")
    expect_true(error.transaction_error_code, "a transaction error code")
    expect(error.errors["invoice.base"].symbol, "declined", "field error symbol")
    expect(recurly.Invoice.get(paid.invoice_number).refundable_total_in_cents, 900, "nothing was refunded")


def offline_payment():
    """An offline payment (a check) entered on a manual invoice, then the rest by wire transfer,
    through the client's ``Invoice.enter_offline_payment``. In this release the method posts to
    the invoice's own ``…/v2/invoices/{number}/transactions``: the ``urljoin`` it calls is the
    client module's own, which appends the path to the invoice's href (not the standard library's,
    which would replace the href's path)."""
    account = new_account("py-offline")
    account.charge(recurly.Adjustment(description="Consulting", unit_amount_in_cents=1200, currency="USD"))
    invoice = account.invoice(collection_method="manual", net_terms=30).charge_invoice
    expect(invoice.state, "pending", "a manual invoice")

    check = invoice.enter_offline_payment(
        recurly.Transaction(
            payment_method="check",
            amount_in_cents=500,
            description="Check 1234",
            collected_at=datetime.datetime(2027, 1, 2, 3, 4, 5),
        )
    )
    expect(check.type, "check", "the transaction's type (its payment method)")
    expect(check.status, "success", "offline payment status")
    expect(check.action, "purchase", "offline payment action")
    expect(check.amount_in_cents, 500, "offline payment amount")
    expect(check.payment_method, "check", "payment method")
    expect(check.description, "Check 1234", "description")
    expect(check.message, "Manually entered transaction", "message")
    expect(check.collected_at.strftime("%Y-%m-%dT%H:%M:%S"), "2027-01-02T03:04:05", "collected_at")
    expect(check.refundable, True, "an offline payment is refundable")
    absent(check, "transaction_error")
    expect(check.invoice().state, "pending", "a partly paid invoice stays pending")
    expect(recurly.Transaction.get(check.uuid).type, "check", "the transaction read again")

    wire = invoice.enter_offline_payment(recurly.Transaction(payment_method="wire_transfer"))  # the rest
    expect(wire.amount_in_cents, 700, "the rest of the balance by default")
    paid = recurly.Invoice.get(invoice.invoice_number)
    expect(paid.state, "paid", "state after the offline payments")
    expect(
        [(t.type, t.amount_in_cents) for t in paid.transactions],
        [("check", 500), ("wire_transfer", 700)],
        "the invoice's transactions",
    )

    error = raises(
        recurly.ValidationError,
        lambda: paid.enter_offline_payment(recurly.Transaction(payment_method="check")),
        "a payment on a paid invoice",
    )
    expect_true("transaction.base" in error.errors, "a field error on transaction.base: %r" % list(error.errors))
    expect(error.errors["transaction.base"].symbol, "invalid_transition", "field error symbol")


def shipping_addresses():
    account = new_account("py-ship")
    def work_address():
        return recurly.ShippingAddress(
            nickname="Work",
            first_name="Ada",
            last_name="Lovelace",
            address1="12 St James's Square",
            city="London",
            state="LDN",
            zip="SW1Y 4JH",
            country="GB",
        )

    work = work_address()
    account.create_shipping_address(work)  # the client fills in the object it sends
    expect_true(isinstance(work.id, int) and work.id > 0, "the new address's integer id %r" % work.id)
    expect(work.nickname, "Work", "created nickname")
    expect(work.country, "GB", "created country")
    home = recurly.ShippingAddress(
        first_name="Ada", last_name="Lovelace", address1="1 Main St.", city="Boston", state="MA", zip="02108", country="US"
    )
    account.create_shipping_address(home)
    expect(home.nickname, "Ada Lovelace", "the nickname defaults to the names")
    listed = sorted(a.nickname for a in recurly.Account.get("py-ship").shipping_addresses())
    expect(listed, ["Ada Lovelace", "Work"], "the account's shipping_addresses link")

    home.nickname = "Home"
    home.save()  # PUT to the Location of the create
    expect(home.nickname, "Home", "updated nickname (the PUT answer)")
    again = work_address()
    account.create_shipping_address(again)
    expect(again.id, work.id, "an exact duplicate answers the existing address")

    error = raises(
        recurly.ValidationError,
        lambda: account.create_shipping_address(recurly.ShippingAddress(first_name="Ada", country="ZZ")),
        "an incomplete address",
    )
    expect(error.errors["shipping_address.country"].symbol, "invalid", "country field error")
    expect(error.errors["shipping_address.city"].symbol, "blank", "city field error")

    # A subscription ships to an address of the account (2.11), and its invoice lines show it.
    new_plan("py-ship-plan", 1500)
    account.update_billing_info(recurly.BillingInfo(token_id=card_token("4111111111111111")))
    subscription = recurly.Subscription(plan_code="py-ship-plan", currency="USD", shipping_address_id=work.id)
    account.subscribe(subscription)
    expect(subscription.shipping_address().nickname, "Work", "the subscription's shipping_address link")
    invoice = subscription.invoice()
    expect(invoice.total_in_cents, 1500, "the first invoice")
    expect(invoice.line_items[0].shipping_address.address1, "12 St James's Square", "the line item's address")

    error = raises(recurly.ValidationError, work.delete, "deleting the address a subscription ships to")
    expect(error.symbol, "shipping_address_in_use", "refusal symbol")
    home.delete()
    listed = [a.nickname for a in recurly.Account.get("py-ship").shipping_addresses()]
    expect(listed, ["Work"], "after deleting the home address")


def verify_cvv():
    account = account_with_card("py-cvv")
    info = account.verify_cvv("123")
    expect(info.last_four, "1111", "the billing info answered")
    expect(info.card_type, "Visa", "card type")
    error = raises(recurly.ValidationError, lambda: account.verify_cvv("999"), "the sandbox's mismatching code")
    expect(error.transaction_error.error_code, "fraud_security_code", "transaction error code")
    field = "billing_info.billing_info.credit_card_verification_value"
    expect(error.errors[field].symbol, "declined_bad", "the security code's field error")
    error = raises(recurly.ValidationError, lambda: account.verify_cvv("12"), "a malformed code")
    expect(error.errors["billing_info.verification_value"].symbol, "invalid", "malformed field error")
    account.verify_cvv("4321")  # the third check in 24 hours
    error = raises(recurly.BadRequestError, lambda: account.verify_cvv("123"), "the fourth check")
    expect(error.symbol, "cvv_verify_locked", "locked symbol")
    raises(recurly.NotFoundError, lambda: new_account("py-cvv-none").verify_cvv("123"), "no billing info")

def gift_cards():
    # The products (gift_card at 20.00 and 50.00 USD) are configured by the harness with
    # `rebill gift-cards products add` before the flows run.
    account_with_card("py-gifter")

    def card(amount=2000):
        return recurly.GiftCard(
            product_code="gift_card",
            unit_amount_in_cents=amount,
            currency="USD",
            delivery=recurly.Delivery(
                method="email",
                email_address="friend@example.com",
                first_name="Fran",
                last_name="Friend",
                gifter_name="Ada",
                personal_message="Enjoy",
            ),
            gifter_account=recurly.Account(account_code="py-gifter"),
        )

    preview = card()
    preview.preview()
    expect(preview.unit_amount_in_cents, 2000, "previewed face value")
    expect(preview.id, None, "a preview has no id")
    expect(preview.redemption_code, "", "a preview has no redemption code")
    expect([c.id for c in recurly.GiftCard.all()], [], "a preview writes nothing")

    bought = card()
    bought.save()
    expect(len(bought.redemption_code), 16, "a 16-character redemption code")
    expect(bought.redemption_code, bought.redemption_code.upper(), "an upper-case redemption code")
    expect(bought.delivery.method, "email", "delivery method")
    expect(bought.delivery.personal_message, "Enjoy", "personal message")
    expect_true(bought.delivered_at, "delivered at once without deliver_at")
    expect(bought.redeemed_at, None, "not redeemed yet")
    invoice = bought.invoice()
    expect(invoice.total_in_cents, 2000, "the purchase invoice's total")
    expect(invoice.state, "paid", "the purchase invoice is paid")
    expect(bought.gifter_account().account_code, "py-gifter", "the gifter account link")

    fetched = recurly.GiftCard.get(bought.id)
    expect(fetched.redemption_code, bought.redemption_code, "fetched by id")
    raises(recurly.NotFoundError, lambda: card(3000).save(), "a face value the site does not sell")

    new_account("py-taker")
    redeemed = recurly.GiftCard(redemption_code=bought.redemption_code.lower())
    redeemed.redeem("py-taker")
    expect(redeemed.id, bought.id, "the redeemed card")
    expect(redeemed.balance_in_cents, 2000, "the whole value is credit")
    expect_true(redeemed.redeemed_at, "redeemed_at")
    expect(redeemed.recipient_account().account_code, "py-taker", "the recipient account link")
    error = raises(
        recurly.BadRequestError,
        lambda: recurly.GiftCard(redemption_code=bought.redemption_code).redeem("py-taker"),
        "a second redemption",
    )
    expect(error.symbol, "bad_request", "second redemption symbol")
    expect(recurly.Account.get("py-taker").account_balance().balance_in_cents["USD"], -2000, "the taker's credit")

    taker = recurly.Account.get("py-taker")
    taker.charge(recurly.Adjustment(description="Order", unit_amount_in_cents=1250, currency="USD"))
    taker.invoice()
    expect(recurly.GiftCard.get(bought.id).balance_in_cents, 750, "the card's balance after an invoice it paid")
    expect([c.id for c in recurly.GiftCard.all(gifter_account_code="py-gifter")], [bought.id], "the gifter's cards")
    expect([c.id for c in recurly.GiftCard.all(recipient_account_code="py-taker")], [bought.id], "the taker's cards")

def coupons_and_redemptions():
    new_plan("py-coupon-plan", 1000)
    coupon = recurly.Coupon(
        coupon_code="py-ten",
        name="Ten percent",
        discount_type="percent",
        discount_percent=10,
        hosted_description="Ten percent off",
    )
    coupon.save()
    expect(coupon.state, "redeemable", "created coupon state")
    fetched = recurly.Coupon.get("py-ten")
    expect(fetched.discount_percent, 10, "fetched discount percent")
    expect(fetched.description, "Ten percent off", "hosted_description read as the description")
    expect_true("py-ten" in [c.coupon_code for c in recurly.Coupon.all_redeemable()], "listed as redeemable")

    # A new subscription with the coupon: its first invoice is 10 % off.
    subscription = recurly.Subscription(
        plan_code="py-coupon-plan",
        currency="USD",
        coupon_code="py-ten",
        account=recurly.Account(
            account_code="py-couponed",
            email="py-couponed@example.com",
            billing_info=recurly.BillingInfo(token_id=card_token("4111111111111111")),
        ),
    )
    subscription.save()
    account = recurly.Account.get("py-couponed")
    expect([(i.state, i.total_in_cents) for i in account.invoices()], [("paid", 900)], "the discounted first invoice")
    invoice = account.invoices()[0]
    expect(invoice.discount_in_cents, 100, "the invoice's discount")
    expect(invoice.subtotal_before_discount_in_cents, 1000, "the subtotal before discount")
    redemption = account.redemption()
    expect(redemption.coupon_code, "py-ten", "the account's redemption")
    expect(redemption.total_discounted_in_cents, 100, "discounted so far")

    # Redeemed on another account through the coupon's redeem anchor, then removed.
    account_with_card("py-redeemer")
    redeemed = fetched.redeem(recurly.Redemption(account_code="py-redeemer", currency="USD"))
    expect(redeemed.currency, "USD", "the redemption made")
    expect(recurly.Account.get("py-redeemer").redemption().coupon_code, "py-ten", "the redeemer's redemption")
    redeemed.delete()
    expect(len(list(recurly.Account.get("py-redeemer").redemptions())), 0, "no redemption after removal")

    # An expired coupon is refused on a new subscription.
    fetched.delete()
    expect(recurly.Coupon.get("py-ten").state, "expired", "state after delete")
    late = recurly.Subscription(
        plan_code="py-coupon-plan",
        currency="USD",
        coupon_code="py-ten",
        account=recurly.Account(account_code="py-late", email="py-late@example.com"),
    )
    error = raises(recurly.ValidationError, late.save, "an expired coupon on a new subscription")
    expect(error.errors["subscription.coupon_code"].symbol, "invalid", "field error symbol")

    # Unique codes of a bulk coupon, generated and listed from the Location the client follows.
    bulk = recurly.Coupon(
        coupon_code="py-bulk",
        name="Bulk",
        discount_type="percent",
        discount_percent=5,
        coupon_type="bulk",
        unique_code_template="'py-bulk'9999",
    )
    bulk.save()
    codes = list(bulk.generate(3))
    expect(len(codes), 3, "the generated codes")
    expect([c.coupon_type for c in codes], ["unique_code"] * 3, "their type")
    expect_true(all(c.coupon_code.startswith("py-bulk") for c in codes), "their template")

def purchases():
    new_plan("py-purchase-plan", 1500)

    def purchase(account_code, number="4111111111111111"):
        return recurly.Purchase(
            currency="USD",
            account=recurly.Account(
                account_code=account_code,
                email="%s@example.com" % account_code,
                billing_info=recurly.BillingInfo(token_id=card_token(number)),
            ),
            subscriptions=[recurly.Subscription(plan_code="py-purchase-plan")],
            adjustments=[recurly.Adjustment(description="Setup help", unit_amount_in_cents=500, quantity=2)],
        )

    # 1500 for the plan and 2 x 500 for the help: 2500 on one invoice.
    preview = purchase("py-purchaser").preview()
    expect(preview.charge_invoice.total_in_cents, 2500, "the previewed total")
    expect(preview.charge_invoice.state, "pending", "a preview is pending")
    raises(recurly.NotFoundError, lambda: recurly.Account.get("py-purchaser"), "a preview writes nothing")

    collection = purchase("py-purchaser").invoice()
    charge = collection.charge_invoice
    expect(charge.total_in_cents, 2500, "the purchase's total")
    expect(charge.state, "paid", "the purchase is paid")
    expect(len(charge.transactions), 1, "one transaction")
    expect(charge.transactions[0].amount_in_cents, 2500, "the transaction's amount")
    expect(len(collection.credit_invoices), 0, "no credit invoice")
    expect(len(list(recurly.Account.get("py-purchaser").subscriptions())), 1, "the purchase's subscription")

    error = raises(recurly.ValidationError, lambda: purchase("py-purchase-declined", "4000000000000002").invoice(), "a declined purchase")
    expect(error.transaction_error_code, "declined", "purchase decline code")
    expect_true("purchase.base" in error.errors, "a field error on purchase.base: %r" % list(error.errors))
    account = recurly.Account.get("py-purchase-declined")
    expect(len(list(account.subscriptions())), 0, "a declined purchase leaves no subscription")


FLOWS = [
    plans_and_add_ons,
    accounts,
    billing_info_from_token,
    subscriptions,
    invoices,
    invoice_pdf,
    transactions,
    declined_card,
    missing_account,
    account_balance,
    offline_payment,
    refunds,
    shipping_addresses,
    verify_cvv,
    gift_cards,
    coupons_and_redemptions,
    purchases,
    # Moves the site's sandbox clock on by a month: keep it last.
    subscription_pause_and_resume,
]


def main():
    url = urllib.parse.urlsplit(os.environ["REBILL_URL"])
    resolve_to(HOST, (url.hostname, url.port))
    record_exchanges()

    # The client's whole configuration.
    recurly.BASE_URI = "http://%s.rebill.recurly.com/v2/"
    recurly.API_KEY = os.environ["REBILL_API_KEY"]
    recurly.API_VERSION = "2.11"

    only = set(sys.argv[1:])
    passed, failed = [], []
    for flow in FLOWS:
        if only and flow.__name__ not in only:
            continue
        EXCHANGES.clear()
        try:
            flow()
        except Exception as e:
            failed.append(flow.__name__)
            print("FAIL %s: %s: %s" % (flow.__name__, type(e).__name__, e))
            print("    " + traceback.format_exc().rstrip().replace("\n", "\n    "))
            print("    last exchanges:")
            print("    " + last_exchanges().replace("\n", "\n    "))
        else:
            passed.append(flow.__name__)
            print("PASS %s" % flow.__name__)
        sys.stdout.flush()
    print("python client, %d flows: %d passed, %d failed" % (len(passed) + len(failed), len(passed), len(failed)))
    if failed:
        print("failed flows: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
