//! Invoice refunds over HTTP against `rebill serve`, on SQLite and on PostgreSQL, on a site
//! without Credit Memos (legacy refund invoices, read at 2.9) and with them (credit invoices,
//! read at 2.11): open amounts and line items to the cent, each `refund_method`, the credit a
//! refund leaves paying the account's next invoice, refunds the sandbox declines, and the exact
//! refusal documents.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

fn serve(db: &str) -> Server {
    start_with(db, Options { clock: Some(T0), ..Options::default() })
}

#[track_caller]
fn status(reply: &Reply, code: u16) {
    assert_eq!(reply.status, code, "{}\n{}", reply.head, reply.body);
}

#[track_caller]
fn has(reply: &Reply, text: &str) {
    assert!(reply.body.contains(text), "expected {text} in\n{}", reply.body);
}

fn post(s: &Server, version: &str, path: &str, body: &str) -> Reply {
    authed(s, "POST", path, &xml_at(version), body)
}

fn get(s: &Server, version: &str, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", version)], "")
}

/// An account paying with `card`.
fn customer(s: &Server, code: &str, card: &str) {
    let body = format!("<account><account_code>{code}</account_code><email>{code}@example.com</email></account>");
    status(&post(s, "2.11", "/v2/accounts", &body), 201);
    let body = format!("<billing_info><token_id>{}</token_id></billing_info>", card_token(s, card));
    status(&authed(s, "PUT", &format!("/v2/accounts/{code}/billing_info"), &xml_at("2.11"), &body), 200);
}

/// Charges `lines` (unit cents, quantity, description) on one invoice, paid by the card; answers
/// its number.
fn paid_invoice(s: &Server, code: &str, lines: &[(i64, i64, &str)]) -> String {
    for (unit, quantity, description) in lines {
        let body = format!(
            "<adjustment><description>{description}</description><unit_amount_in_cents>{unit}</unit_amount_in_cents>\
             <quantity>{quantity}</quantity><currency>USD</currency></adjustment>"
        );
        status(&post(s, "2.11", &format!("/v2/accounts/{code}/adjustments"), &body), 201);
    }
    let r = post(s, "2.9", &format!("/v2/accounts/{code}/invoices"), "");
    status(&r, 201);
    has(&r, "<state>collected</state>");
    field(&r.body, "invoice_number")
}

fn refund(s: &Server, version: &str, number: &str, body: &str) -> Reply {
    post(s, version, &format!("/v2/invoices/{number}/refund"), body)
}

/// Every `<name>` value in `body`, in order.
fn all(body: &str, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(value) = tag(rest, name) {
        out.push(value);
        let close = rest.find(&format!("</{name}>")).expect("close tag");
        rest = &rest[close + name.len() + 3..];
    }
    out
}

fn uuids_of_lines(body: &str) -> Vec<String> {
    let lines = &body[body.find("<line_items").expect("line items")..];
    all(lines, "uuid")
}

/// Without Credit Memos: legacy refund invoices, to the card, read at 2.9.
fn legacy(db: &str) {
    let s = serve(db);
    customer(&s, "l1", "4111111111111111");
    let number = paid_invoice(&s, "l1", &[(2000, 3, "Seats"), (4000, 1, "Setup")]);
    // $30 of $100 as an open amount: spread 600/1000 and 400/1000 over the lines.
    let r = refund(&s, "2.9", &number, "<invoice><amount_in_cents>3000</amount_in_cents></invoice>");
    status(&r, 201);
    assert!(
        r.header("location")
            .expect("Location")
            .ends_with(&format!("/v2/invoices/{}", field(&r.body, "invoice_number")))
    );
    has(&r, "<total_in_cents type=\"integer\">-3000</total_in_cents>");
    has(&r, "<state>collected</state>");
    has(&r, "<description>Refund for Seats</description>");
    has(&r, "<description>Refund for Setup</description>");
    assert_eq!(r.body.matches("<quantity type=\"integer\">-1</quantity>").count(), 2);
    has(&r, "<total_in_cents type=\"integer\">-1800</total_in_cents>");
    has(&r, "<total_in_cents type=\"integer\">-1200</total_in_cents>");
    has(&r, "<action>refund</action>");
    has(&r, "<amount_in_cents type=\"integer\">3000</amount_in_cents>");
    // Line items after an amount: one seat (2000) is left refundable on Seats (6000 - 1800).
    let original = get(&s, "2.9", &format!("/v2/invoices/{number}"));
    let seats = uuids_of_lines(&original.body)[0].clone();
    let body = format!(
        "<invoice><line_items><adjustment><uuid>{seats}</uuid><quantity>1</quantity></adjustment></line_items></invoice>"
    );
    let r = refund(&s, "2.9", &number, &body);
    status(&r, 201);
    has(&r, "<total_in_cents type=\"integer\">-2000</total_in_cents>");
    // An open amount after a line item refund is refused, and so is more than what is left.
    let r = refund(&s, "2.9", &number, "<invoice><amount_in_cents>100</amount_in_cents></invoice>");
    status(&r, 422);
    has(&r, "field=\"invoice.amount_in_cents\" symbol=\"invalid\"");
    let body = format!(
        "<invoice><line_items><adjustment><uuid>{seats}</uuid><quantity>3</quantity></adjustment></line_items></invoice>"
    );
    let r = refund(&s, "2.9", &number, &body);
    status(&r, 422);
    has(&r, "field=\"invoice.line_items.adjustment.quantity\" symbol=\"less_than_or_equal_to\"");
    // The rest, with neither amount nor lines: 10000 - 3000 - 2000.
    let r = refund(&s, "2.9", &number, "<invoice/>");
    status(&r, 201);
    has(&r, "<total_in_cents type=\"integer\">-5000</total_in_cents>");
    let r = refund(&s, "2.9", &number, "<invoice/>");
    status(&r, 422);
    has(&r, "field=\"invoice.base\" symbol=\"not_refundable\"");
    let txns =
        sql(db, "SELECT CAST(SUM(amount) AS TEXT) FROM transactions WHERE action = 'refund' AND status = 'success'");
    assert_eq!(txns, vec!["10000"]);

    // Refusals of the request itself.
    let number = paid_invoice(&s, "l1", &[(1000, 1, "Widget")]);
    let r = refund(&s, "2.9", &number, "<invoice><amount_in_cents>1001</amount_in_cents></invoice>");
    status(&r, 422);
    has(&r, "field=\"invoice.amount_in_cents\" symbol=\"less_than_or_equal_to\"");
    let r = refund(&s, "2.9", &number, "<invoice><amount_in_cents>0</amount_in_cents></invoice>");
    status(&r, 422);
    has(&r, "field=\"invoice.amount_in_cents\" symbol=\"greater_than\"");
    let r = refund(
        &s,
        "2.9",
        &number,
        "<invoice><amount_in_cents>100</amount_in_cents><line_items><adjustment><uuid>x</uuid></adjustment></line_items></invoice>",
    );
    status(&r, 422);
    has(&r, "field=\"invoice.amount_in_cents\" symbol=\"invalid\"");
    let r = refund(&s, "2.9", "999999", "<invoice/>");
    status(&r, 404);

    // The sandbox declines refunds of 4000000000002024: nothing is refunded, the refund invoice
    // failed, and the answer is the transaction error document.
    customer(&s, "l2", "4000000000002024");
    let number = paid_invoice(&s, "l2", &[(1500, 1, "Gadget")]);
    let r = refund(&s, "2.9", &number, "<invoice><amount_in_cents>500</amount_in_cents></invoice>");
    status(&r, 422);
    has(&r, "<error_code>transaction_cannot_be_refunded</error_code>");
    has(&r, "field=\"invoice.base\" symbol=\"declined\"");
    has(&r, "<action>refund</action>");
    // Still all refundable: the failed refund took nothing back.
    let r = refund(&s, "2.9", &number, "<invoice><amount_in_cents>1501</amount_in_cents></invoice>");
    has(&r, "Amount in cents must be less than or equal to 1500");
}

/// The stored kind, origin, state and balance of the invoice `r` answers.
fn stored(db: &str, r: &Reply) -> String {
    let number = field(&r.body, "invoice_number");
    sql(
        db,
        &format!(
            "SELECT kind || ':' || origin || ':' || state || ':' || CAST(balance AS TEXT) FROM invoices \
         WHERE invoice_number = {number}"
        ),
    )
    .join(",")
}

/// With Credit Memos at 2.11: credit invoices, each refund method, the credit paying the next
/// invoice.
fn credit_memos(db: &str) {
    let s = serve(db);
    s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    customer(&s, "c1", "4111111111111111");
    let number = paid_invoice(&s, "c1", &[(10000, 1, "Plan year")]);
    // All to credit: a credit invoice with the whole refund as balance.
    let r = refund(
        &s,
        "2.11",
        &number,
        "<invoice><refund_method>all_credit</refund_method><amount_in_cents>2000</amount_in_cents></invoice>",
    );
    status(&r, 201);
    assert_eq!(stored(db, &r), "credit:refund:open:-2000");
    has(&r, "<credit_reason_code>refund</credit_reason_code>");
    has(&r, "<unit_amount_in_cents type=\"integer\">-2000</unit_amount_in_cents>");
    // transaction_first: 3000 to the card, a closed credit invoice.
    let r = refund(
        &s,
        "2.11",
        &number,
        "<invoice><refund_method>transaction_first</refund_method><amount_in_cents>3000</amount_in_cents></invoice>",
    );
    status(&r, 201);
    assert_eq!(stored(db, &r), "credit:refund:closed:0");
    has(&r, "<action>refund</action>");
    // The next invoice (2500) takes the 2000 of credit and charges 500 to the card.
    let next = paid_invoice(&s, "c1", &[(2500, 1, "Extra")]);
    let r = get(&s, "2.11", &format!("/v2/invoices/{next}"));
    has(&r, "<state>paid</state>");
    let charged = sql(
        db,
        &format!(
            "SELECT CAST(t.amount AS TEXT) FROM transactions t JOIN invoices i ON i.id = t.invoice_id \
         WHERE i.invoice_number = {next} AND t.action = 'purchase'"
        ),
    );
    assert_eq!(charged, vec!["500"]);
    let used = sql(db, "SELECT action || ':' || CAST(amount AS TEXT) FROM credit_payments ORDER BY id");
    assert_eq!(used, vec!["payment:2000"]);
    // The credit invoice is closed now.
    let credit =
        sql(db, "SELECT state || ':' || CAST(balance AS TEXT) FROM invoices WHERE kind = 'credit' ORDER BY id");
    assert_eq!(credit, vec!["closed:0", "closed:0"]);
    // credit_first on the invoice paid 2000 by credit: 2000 back as credit, 500 to the card.
    let r = refund(&s, "2.11", &next, "<invoice><refund_method>credit_first</refund_method></invoice>");
    status(&r, 201);
    has(&r, "<total_in_cents type=\"integer\">-2500</total_in_cents>");
    assert_eq!(stored(db, &r), "credit:refund:open:-2000");
    has(&r, "<amount_in_cents type=\"integer\">500</amount_in_cents>");
    // A declined refund keeps the amount as credit on the credit invoice.
    customer(&s, "c2", "4000000000002024");
    let number = paid_invoice(&s, "c2", &[(1500, 1, "Gadget")]);
    let r = refund(
        &s,
        "2.11",
        &number,
        "<invoice><refund_method>transaction_first</refund_method><amount_in_cents>500</amount_in_cents></invoice>",
    );
    status(&r, 201);
    assert_eq!(stored(db, &r), "credit:refund:open:-500");
    has(&r, "<status>declined</status>");
    // 1000 of the 1500 is left (the declined 500 was given back as credit all the same): asking
    // 1100 is refused on the amount and writes nothing, whatever the method.
    for method in ["credit_first", "transaction_first", "all_credit"] {
        let body = format!(
            "<invoice><refund_method>{method}</refund_method><amount_in_cents>1100</amount_in_cents></invoice>"
        );
        let r = refund(&s, "2.11", &number, &body);
        status(&r, 422);
        has(&r, "field=\"invoice.amount_in_cents\" symbol=\"less_than_or_equal_to\"");
        has(&r, "1000");
    }
    let r = get(&s, "2.11", &format!("/v2/invoices/{number}"));
    has(&r, "<refundable_total_in_cents type=\"integer\">1000</refundable_total_in_cents>");
    // Nothing is left of it to refund, whatever the method.
    let r = refund(&s, "2.11", &next, "<invoice><refund_method>all_transaction</refund_method></invoice>");
    status(&r, 422);
    has(&r, "field=\"invoice.base\" symbol=\"not_refundable\"");
}

/// The one row of `statement`.
fn one(db: &str, statement: &str) -> String {
    let rows = sql(db, statement);
    assert_eq!(rows.len(), 1, "{statement}: {rows:?}");
    rows[0].clone()
}

/// The credit payments of `action`, as `amount:original invoice:applied-to invoice:original
/// credit payment:refund transaction` (0 for none, the uuids as given), oldest first.
fn credit_payments(db: &str, action: &str) -> Vec<String> {
    sql(
        db,
        &format!(
            "SELECT CAST(p.amount AS TEXT) || ':' || CAST(o.invoice_number AS TEXT) || ':' || \
             COALESCE(CAST(a.invoice_number AS TEXT), '0') || ':' || COALESCE(op.uuid, '0') || ':' || \
             COALESCE(t.uuid, '0') || ':' || CASE WHEN p.voided_at IS NULL THEN 'kept' ELSE 'voided' END \
             FROM credit_payments p JOIN invoices o ON o.id = p.original_invoice_id \
             LEFT JOIN invoices a ON a.id = p.applied_to_invoice_id \
             LEFT JOIN credit_payments op ON op.id = p.original_credit_payment_id \
             LEFT JOIN transactions t ON t.id = p.refund_transaction_id \
             WHERE p.action = '{action}' ORDER BY p.id"
        ),
    )
}

/// `all_transaction` on an invoice paid partly by credit: the credit part goes back to the card
/// that paid for the credit, through a `refund` credit payment naming the `payment` it gives
/// back and its refund transaction. Credit with no card behind it cannot go back to a card.
fn credit_back_to_the_card(db: &str) {
    let s = serve(db);
    s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    let base = format!("http://{}", s.addr);
    customer(&s, "p1", "4111111111111111");
    // 100.00 paid by card (T1); 30.00 of it refunded as credit.
    let first = paid_invoice(&s, "p1", &[(10000, 1, "Plan year")]);
    let r = refund(
        &s,
        "2.11",
        &first,
        "<invoice><refund_method>all_credit</refund_method><amount_in_cents>3000</amount_in_cents></invoice>",
    );
    status(&r, 201);
    let credit = field(&r.body, "invoice_number");
    // 50.00 more: 30.00 paid by that credit, 20.00 by the card (T2).
    let second = paid_invoice(&s, "p1", &[(5000, 1, "Extra seats")]);
    let payment = credit_payments(db, "payment");
    assert_eq!(payment.len(), 1);
    assert!(payment[0].starts_with(&format!("3000:{credit}:{second}:0:0:")), "{payment:?}");
    let payment_uuid = one(db, "SELECT uuid FROM credit_payments WHERE action = 'payment'");
    let t1 = one(
        db,
        &format!(
            "SELECT t.uuid FROM transactions t JOIN invoices i ON i.id = t.invoice_id \
             WHERE i.invoice_number = {first} AND t.action = 'purchase'"
        ),
    );
    // All of it back to the cards: 20.00 to T2, the 30.00 credit paid back to T1.
    let r = refund(&s, "2.11", &second, "<invoice><refund_method>all_transaction</refund_method></invoice>");
    status(&r, 201);
    let back = field(&r.body, "invoice_number");
    assert_eq!(stored(db, &r), "credit:refund:closed:0");
    has(&r, "<total_in_cents type=\"integer\">-5000</total_in_cents>");
    has(&r, "<balance_in_cents type=\"integer\">0</balance_in_cents>");
    has(&r, &format!("<original_transaction href=\"{base}/v2/transactions/{t1}\"/>"));
    let refunds = sql(
        db,
        &format!(
            "SELECT CAST(r.amount AS TEXT) || ':' || o.uuid || ':' || r.status FROM transactions r \
             JOIN transactions o ON o.id = r.original_transaction_id JOIN invoices i ON i.id = r.invoice_id \
             WHERE i.invoice_number = {back} ORDER BY r.id"
        ),
    );
    assert_eq!(refunds.len(), 2, "{refunds:?}");
    assert!(refunds[0].starts_with("2000:") && refunds[0].ends_with(":success"), "{refunds:?}");
    assert_eq!(refunds[1], format!("3000:{t1}:success"));
    let given = credit_payments(db, "refund");
    assert_eq!(given.len(), 1);
    let refund_t =
        one(db, "SELECT t.uuid FROM credit_payments p JOIN transactions t ON t.id = p.refund_transaction_id");
    assert_eq!(given[0], format!("3000:{back}:0:{payment_uuid}:{refund_t}:kept"));
    // The credit payment as the API shows it.
    let r = get(&s, "2.11", "/v2/credit_payments?action=refund");
    status(&r, 200);
    for expected in [
        "<action>refund</action>".to_owned(),
        "<amount_in_cents type=\"integer\">3000</amount_in_cents>".to_owned(),
        format!("<original_invoice href=\"{base}/v2/invoices/{back}\"/>"),
        format!("<original_credit_payment href=\"{base}/v2/credit_payments/{payment_uuid}\"/>"),
        format!("<refund_transaction href=\"{base}/v2/transactions/{refund_t}\"/>"),
    ] {
        has(&r, &expected);
    }
    // The refund credit invoice lists it with its own transactions.
    let r = get(&s, "2.11", &format!("/v2/invoices/{back}"));
    has(&r, &format!("<refund_transaction href=\"{base}/v2/transactions/{refund_t}\"/>"));
    // T1 gave back 3000: the first invoice still refunds its 7000 (10000 less the 3000 credited),
    // all of it to T1, which has given back everything then.
    let r = get(&s, "2.11", &format!("/v2/invoices/{first}"));
    has(&r, "<refundable_total_in_cents type=\"integer\">7000</refundable_total_in_cents>");
    let r = refund(&s, "2.11", &first, "<invoice><refund_method>transaction_first</refund_method></invoice>");
    status(&r, 201);
    assert_eq!(stored(db, &r), "credit:refund:closed:0");
    let to_t1 = one(
        db,
        &format!(
            "SELECT CAST(SUM(r.amount) AS TEXT) FROM transactions r JOIN transactions o \
             ON o.id = r.original_transaction_id WHERE o.uuid = '{t1}' AND r.status = 'success'"
        ),
    );
    assert_eq!(to_t1, "10000");
    // Every cent the customer paid (12000) came back to the cards.
    let all_back = one(db, "SELECT CAST(SUM(amount) AS TEXT) FROM transactions WHERE action = 'refund'");
    assert_eq!(all_back, "12000");

    // Credit with no card behind it (a posted credit) cannot go back to a card.
    customer(&s, "p2", "4111111111111111");
    let body = "<adjustment><description>Goodwill</description><unit_amount_in_cents>-1000</unit_amount_in_cents>\
                <currency>USD</currency></adjustment>";
    status(&post(&s, "2.11", "/v2/accounts/p2/adjustments", body), 201);
    status(&post(&s, "2.11", "/v2/accounts/p2/invoices", ""), 201);
    let paid = paid_invoice(&s, "p2", &[(2500, 1, "Gadget")]);
    let r = refund(&s, "2.11", &paid, "<invoice><refund_method>all_transaction</refund_method></invoice>");
    status(&r, 422);
    has(&r, "field=\"invoice.refund_method\" symbol=\"invalid\"");
    has(&r, "can give back only the 1500 cents");
    // What the card paid goes back to it.
    let r = refund(
        &s,
        "2.11",
        &paid,
        "<invoice><refund_method>all_transaction</refund_method><amount_in_cents>1500</amount_in_cents></invoice>",
    );
    status(&r, 201);
    assert_eq!(stored(db, &r), "credit:refund:closed:0");
    assert_eq!(credit_payments(db, "refund").len(), 1, "no credit was paid out");
}

/// Refunding an open credit invoice pays its balance out: the whole of it to the card behind the
/// credit, a part (or credit with no card behind it) only as an external refund. A declined
/// payout puts the credit back and is answered as declined.
fn credit_invoice_paid_out(db: &str) {
    let s = serve(db);
    s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    let base = format!("http://{}", s.addr);
    customer(&s, "q1", "4111111111111111");
    let paid = paid_invoice(&s, "q1", &[(4000, 1, "Annual")]);
    let r = refund(&s, "2.11", &paid, "<invoice><refund_method>all_credit</refund_method></invoice>");
    status(&r, 201);
    let credit = field(&r.body, "invoice_number");
    has(&r, "<refundable_total_in_cents type=\"integer\">4000</refundable_total_in_cents>");
    has(&r, &format!("<a name=\"refund\" href=\"{base}/v2/invoices/{credit}/refund\" method=\"post\"/>"));
    // Refusals: a part without external_refund, line items, all_credit, more than is left.
    let refusals = [
        ("<invoice><amount_in_cents>1000</amount_in_cents></invoice>", "external_refund", "blank"),
        (
            "<invoice><line_items><adjustment><uuid>x</uuid></adjustment></line_items></invoice>",
            "line_items",
            "invalid",
        ),
        ("<invoice><refund_method>all_credit</refund_method></invoice>", "refund_method", "invalid"),
        ("<invoice><amount_in_cents>4001</amount_in_cents></invoice>", "amount_in_cents", "less_than_or_equal_to"),
    ];
    for (body, field_name, symbol) in refusals {
        let r = refund(&s, "2.11", &credit, body);
        status(&r, 422);
        has(&r, &format!("field=\"invoice.{field_name}\" symbol=\"{symbol}\""));
    }
    // The whole balance, as a 2.9 client asks (refund_apply_order): back to the card that paid.
    let r = refund(&s, "2.9", &credit, "<invoice><refund_apply_order>credit</refund_apply_order></invoice>");
    status(&r, 201);
    assert!(r.header("location").expect("Location").ends_with(&format!("/v2/invoices/{credit}")));
    has(&r, "<state>collected</state>");
    has(&r, "<action>refund</action>");
    let r = get(&s, "2.11", &format!("/v2/invoices/{credit}"));
    has(&r, "<state>closed</state>");
    has(&r, "<balance_in_cents type=\"integer\">0</balance_in_cents>");
    assert!(!r.body.contains("name=\"refund\"") && !r.body.contains("name=\"void\""), "{}", r.body);
    let given = credit_payments(db, "refund");
    assert_eq!(given.len(), 1);
    assert!(given[0].starts_with(&format!("4000:{credit}:0:0:")) && given[0].ends_with(":kept"), "{given:?}");
    let to_card = one(
        db,
        &format!(
            "SELECT CAST(r.amount AS TEXT) || ':' || r.status FROM transactions r JOIN transactions o \
             ON o.id = r.original_transaction_id JOIN invoices i ON i.id = o.invoice_id \
             WHERE i.invoice_number = {paid} AND r.action = 'refund'"
        ),
    );
    assert_eq!(to_card, "4000:success");
    let r = refund(&s, "2.11", &credit, "<invoice/>");
    status(&r, 422);
    has(&r, "field=\"invoice.base\" symbol=\"not_refundable\"");
    // The paid invoice has nothing left to give back either.
    let r = refund(&s, "2.11", &paid, "<invoice/>");
    status(&r, 422);

    // A part, outside the gateway: a manual refund transaction; the rest stays credit.
    customer(&s, "q2", "4111111111111111");
    let paid = paid_invoice(&s, "q2", &[(3000, 1, "Quarter")]);
    let r = refund(&s, "2.11", &paid, "<invoice><refund_method>all_credit</refund_method></invoice>");
    let credit = field(&r.body, "invoice_number");
    let body = "<invoice><amount_in_cents>1000</amount_in_cents><external_refund>true</external_refund>\
                <payment_method>check</payment_method><description>Cheque 42</description></invoice>";
    let r = refund(&s, "2.11", &credit, body);
    status(&r, 201);
    has(&r, "<state>open</state>");
    has(&r, "<balance_in_cents type=\"integer\">-2000</balance_in_cents>");
    has(&r, "<payment_method>check</payment_method>");
    has(&r, "<description>Cheque 42</description>");
    let manual = one(
        db,
        &format!(
            "SELECT CAST(t.amount AS TEXT) || ':' || t.gateway_type || ':' || t.status FROM transactions t \
             JOIN invoices i ON i.id = t.invoice_id WHERE i.invoice_number = {credit} AND t.action = 'refund'"
        ),
    );
    assert!(manual.starts_with("1000:") && manual.ends_with(":success") && !manual.contains(":test:"), "{manual}");

    // A posted credit has no card behind it: only an external refund pays it out.
    customer(&s, "q3", "4111111111111111");
    let body = "<adjustment><description>Goodwill</description><unit_amount_in_cents>-700</unit_amount_in_cents>\
                <currency>USD</currency></adjustment>";
    status(&post(&s, "2.11", "/v2/accounts/q3/adjustments", body), 201);
    let r = post(&s, "2.11", "/v2/accounts/q3/invoices", "");
    let posted = field(&r.body, "invoice_number");
    let r = refund(&s, "2.11", &posted, "<invoice/>");
    status(&r, 422);
    has(&r, "field=\"invoice.external_refund\" symbol=\"blank\"");
    has(&r, "Only 0 cents");
    let r = refund(&s, "2.11", &posted, "<invoice><external_refund>true</external_refund></invoice>");
    status(&r, 201);
    has(&r, "<state>closed</state>");

    // The sandbox declines refunds of 4000000000002024: the credit comes back, the refund
    // credit payment is voided, and the answer is the transaction error document.
    customer(&s, "q4", "4000000000002024");
    let paid = paid_invoice(&s, "q4", &[(1500, 1, "Gadget")]);
    let r = refund(&s, "2.11", &paid, "<invoice><refund_method>all_credit</refund_method></invoice>");
    let credit = field(&r.body, "invoice_number");
    let r = refund(&s, "2.11", &credit, "<invoice/>");
    status(&r, 422);
    has(&r, "<error_code>transaction_cannot_be_refunded</error_code>");
    has(&r, "field=\"invoice.base\" symbol=\"declined\"");
    let r = get(&s, "2.11", &format!("/v2/invoices/{credit}"));
    has(&r, "<state>open</state>");
    has(&r, "<balance_in_cents type=\"integer\">-1500</balance_in_cents>");
    has(&r, "<status>declined</status>");
    let given = credit_payments(db, "refund");
    let last = given.last().expect("the declined payout's credit payment");
    assert!(last.starts_with(&format!("1500:{credit}:0:0:")) && last.ends_with(":voided"), "{given:?}");
    // The balance still counts the credit.
    let r = get(&s, "2.11", "/v2/accounts/q4/balance");
    has(&r, "<USD type=\"integer\">-1500</USD>");
}

/// The Credit Memos stories as a client of 2.9 sees them: the refund answered as a plain invoice
/// (old state names, `subtotal_in_cents` before discount, no `type`, `balance_in_cents`
/// or credit links), `refund_apply_order` instead of `refund_method`, the 2.10 routes absent,
/// and the same invoices read again at 2.11 with their Credit Memos elements.
fn credit_memos_read_at_2_9(db: &str) {
    let s = serve(db);
    s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    customer(&s, "o1", "4111111111111111");
    let number = paid_invoice(&s, "o1", &[(4000, 1, "Annual")]);
    // 1500 to credit (refund_apply_order credit: credit first, and nothing was paid by credit,
    // so all of it goes to the card) — then an all-credit refund is out of reach below 2.10.
    let body =
        "<invoice><amount_in_cents>1500</amount_in_cents><refund_apply_order>credit</refund_apply_order></invoice>";
    let r = refund(&s, "2.9", &number, body);
    status(&r, 201);
    has(&r, "<invoice href=");
    has(&r, "<state>collected</state>");
    has(&r, "<subtotal_in_cents type=\"integer\">-1500</subtotal_in_cents>");
    has(&r, "<total_in_cents type=\"integer\">-1500</total_in_cents>");
    has(&r, &format!("<original_invoice href=\"http://{}/v2/invoices/{number}\"/>", s.addr));
    // (Line items keep their own `origin`, which every version has.)
    for absent in ["<type>", "<balance_in_cents", "<original_invoices", "<credit_payments", "name=\"void\""] {
        assert!(!r.body.contains(absent), "{absent} at 2.9 in {}", r.body);
    }
    let refund_number = field(&r.body, "invoice_number");
    assert_eq!(stored(db, &r), "credit:refund:closed:0");
    let r = refund(&s, "2.9", &number, "<invoice><refund_method>all_credit</refund_method></invoice>");
    status(&r, 422);
    // A declined refund kept as credit: an open credit invoice, `open` at 2.9 too.
    customer(&s, "o2", "4000000000002024");
    let declined = paid_invoice(&s, "o2", &[(900, 1, "Gadget")]);
    let r = refund(&s, "2.9", &declined, "<invoice></invoice>");
    status(&r, 201);
    has(&r, "<state>open</state>");
    let credit_number = field(&r.body, "invoice_number");
    // The 2.10 routes do not exist at 2.9.
    status(&get(&s, "2.9", "/v2/credit_payments"), 404);
    status(&authed(&s, "PUT", &format!("/v2/invoices/{credit_number}/void"), &xml_at("2.9"), ""), 404);
    status(&get(&s, "2.9", &format!("/v2/invoices/{number}/credit_invoices")), 404);
    // The account balance (from 2.3) nets the credit at 2.9 as at 2.11.
    for version in ["2.9", "2.11"] {
        let r = get(&s, version, "/v2/accounts/o2/balance");
        has(&r, "<USD type=\"integer\">-900</USD>");
    }
    // Read at 2.11: the Credit Memos elements of the same invoices.
    let r = get(&s, "2.11", &format!("/v2/invoices/{refund_number}"));
    has(&r, "<type>credit</type>");
    has(&r, "<origin>refund</origin>");
    has(&r, "<state>closed</state>");
    has(&r, "<balance_in_cents type=\"integer\">0</balance_in_cents>");
    has(&r, "<subtotal_before_discount_in_cents type=\"integer\">-1500</subtotal_before_discount_in_cents>");
    let r = get(&s, "2.11", &format!("/v2/invoices/{credit_number}"));
    has(&r, "<state>open</state>");
    has(&r, "<balance_in_cents type=\"integer\">-900</balance_in_cents>");
    has(&r, "<a name=\"void\"");
    let r = get(&s, "2.11", &format!("/v2/invoices/{number}"));
    has(&r, "<type>charge</type>");
    has(&r, "<refundable_total_in_cents type=\"integer\">2500</refundable_total_in_cents>");
}

/// Terminating with `refund=partial` and `refund=full`: the last period's charge given back on
/// its invoice, prorated by the days still to come or whole (origin `termination`).
fn terminations(db: &str) {
    let s = serve(db);
    let body = "<plan><plan_code>monthly</plan_code><name>Monthly</name>\
                <unit_amount_in_cents><USD>3000</USD></unit_amount_in_cents></plan>";
    status(&post(&s, "2.11", "/v2/plans", body), 201);
    let mut uuids = Vec::new();
    for code in ["t1", "t2"] {
        let body = format!(
            "<subscription><plan_code>monthly</plan_code><currency>USD</currency>\
             <account><account_code>{code}</account_code><email>{code}@example.com</email>\
             <billing_info><token_id>{}</token_id></billing_info></account></subscription>",
            card_token(&s, "4111111111111111")
        );
        let r = post(&s, "2.11", "/v2/subscriptions", &body);
        status(&r, 201);
        uuids.push(field(&r.body, "uuid"));
    }
    // Ten days into the 31 days from 2027-01-15 to 2027-02-15: 21 days are left.
    status(&sandbox_clock(&s, "<advance>10days</advance>"), 200);
    let terminate = |uuid: &str, how: &str| {
        authed(&s, "PUT", &format!("/v2/subscriptions/{uuid}/terminate?refund={how}"), &xml_at("2.11"), "")
    };
    let r = terminate(&uuids[0], "partial");
    status(&r, 200);
    has(&r, "<state>expired</state>");
    let r = terminate(&uuids[1], "full");
    status(&r, 200);
    let refunds = sql(
        db,
        "SELECT i.origin || ':' || CAST(i.total AS TEXT) || ':' || CAST(t.amount AS TEXT) FROM invoices i \
         JOIN transactions t ON t.invoice_id = i.id WHERE i.kind <> 'charge' ORDER BY i.id",
    );
    // 3000 × 21 / 31 = 2032.26 → 2032.
    assert_eq!(refunds, vec!["termination:-2032:2032", "termination:-3000:3000"]);
    // Terminating again is refused; nothing more is refunded.
    status(&terminate(&uuids[1], "full"), 422);
    let again = sql(db, "SELECT CAST(COUNT(*) AS TEXT) FROM invoices WHERE kind <> 'charge'");
    assert_eq!(again, vec!["2"]);
}

#[test]
fn terminations_refund_the_last_period() {
    on_both_backends("refunds_terminate", terminations);
}

#[test]
fn refunds_without_credit_memos() {
    on_both_backends("refunds_legacy", legacy);
}

#[test]
fn refunds_with_credit_memos() {
    on_both_backends("refunds_cm", credit_memos);
}

#[test]
fn all_transaction_gives_credit_back_to_the_card() {
    on_both_backends("refunds_credit_back", credit_back_to_the_card);
}

#[test]
fn open_credit_invoices_are_paid_out() {
    on_both_backends("refunds_payout", credit_invoice_paid_out);
}

#[test]
fn credit_memo_refunds_read_at_2_9() {
    on_both_backends("refunds_cm_2_9", credit_memos_read_at_2_9);
}
