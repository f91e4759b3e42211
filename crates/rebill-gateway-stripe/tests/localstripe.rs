//! The Stripe gateway against a real Stripe peer (`localstripe`, started per test), with a
//! proxy that loses answers where a test needs it.
//!
//! localstripe's test cards: 4242424242424242 charges; 4000000000000002 is refused when it is
//! attached (stored); 4000000000000341 is stored but every charge of it is declined;
//! 4000000000003220 needs 3-D Secure.

use std::time::{Duration, Instant};

use rebill_billing::card::{AccountType, BankAccount, Brand, Card, Expiry};
use rebill_billing::gateway::{
    Approval, AvsAddress, Decline, Gateway, Outcome, PaymentMethod, PaymentRequest, RefundRequest, VoidRequest,
};
use rebill_gateway_stripe::reference::StoredMethod;
use rebill_gateway_stripe::{StripeConfig, StripeGateway};
use rebill_testkit::localstripe::{API_KEY, LocalStripe, StripeProxy};
use serde_json::Value;

fn gateway(base: &str) -> StripeGateway {
    gateway_with(base, API_KEY, Duration::from_secs(10))
}

fn gateway_with(base: &str, key: &str, timeout: Duration) -> StripeGateway {
    StripeGateway::new(StripeConfig::new(key, base).with_timeout(timeout)).expect("a gateway")
}

fn card(number: &str) -> Card {
    Card {
        number: number.to_owned(),
        brand: Brand::Visa,
        expiry: Expiry { month: 12, year: 2030 },
        cvv: Some("123".to_owned()),
    }
}

fn request<'a>(method: PaymentMethod<'a>, amount_in_cents: i64, key: Option<&'a str>) -> PaymentRequest<'a> {
    PaymentRequest {
        amount_in_cents,
        currency: "USD",
        method,
        address: AvsAddress::default(),
        recurring: true,
        idempotency_key: key,
        resumed: false,
        may_resend: false,
        invoice: None,
        replacing: None,
    }
}

fn approved(outcome: Outcome) -> Approval {
    match outcome {
        Outcome::Approved(a) => a,
        other => panic!("not approved: {other:?}"),
    }
}

fn declined(outcome: Outcome) -> Decline {
    match outcome {
        Outcome::Declined(d) => d,
        other => panic!("not declined: {other:?}"),
    }
}

fn pending(outcome: Outcome) -> rebill_billing::gateway::Pending {
    match outcome {
        Outcome::Pending(p) => p,
        other => panic!("not pending: {other:?}"),
    }
}

async fn store(gateway: &StripeGateway, number: &str) -> String {
    gateway.store_payment_method(PaymentMethod::Card(&card(number)), None).await.expect("the card is stored")
}

/// Every object of a localstripe list endpoint (it lists oldest first).
fn list_all(stripe: &LocalStripe, path: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let separator = if path.contains('?') { '&' } else { '?' };
        let page = stripe.get_json(&format!("{path}{separator}limit=100{after}"));
        let data = page["data"].as_array().cloned().unwrap_or_default();
        let last = data.last().and_then(|o| o["id"].as_str()).map(str::to_owned);
        all.extend(data);
        match last {
            Some(id) if page["has_more"] == true => after = format!("&starting_after={id}"),
            _ => return all,
        }
    }
}

/// The PaymentIntents made under an attempt key.
fn intents_of(stripe: &LocalStripe, key: &str) -> Vec<Value> {
    list_all(stripe, "/v1/payment_intents").into_iter().filter(|pi| pi["metadata"]["rebill_attempt"] == key).collect()
}

fn refunds_of(stripe: &LocalStripe, intent: &str) -> Vec<Value> {
    list_all(stripe, &format!("/v1/refunds?payment_intent={intent}"))
}

#[tokio::test]
async fn a_stored_card_is_charged_with_its_attempt_and_invoice_in_the_metadata() {
    let stripe = LocalStripe::start();
    // Through a proxy that keeps Stripe's documented behaviour (idempotency, the list's customer filter).
    let front = StripeProxy::start(&stripe.base);
    let gateway = gateway(&front.base);
    let reference = store(&gateway, "4242424242424242").await;
    let stored = StoredMethod::parse(&reference).expect("cus_…/pm_…");
    assert!(!reference.contains("4242"), "{reference}");
    let method = stripe.get_json(&format!("/v1/payment_methods/{}", stored.payment_method));
    assert_eq!(method["customer"], stored.customer.as_str());

    let r = PaymentRequest {
        invoice: Some("1001"),
        ..request(PaymentMethod::Stored { reference: &reference }, 2500, Some("a-1"))
    };
    let calls = |method| front.received(method, "/v1/");
    let before = (calls("POST"), calls("GET"));
    let approval = approved(gateway.purchase(&r).await);
    // The calls per charge of a stored card (docs/gateways.md): one, confirmed and captured.
    assert_eq!((calls("POST") - before.0, calls("GET") - before.1), (1, 0), "one call per charge");
    assert!(approval.reference.starts_with("pi_"), "{approval:?}");
    assert_eq!(approval.code, "approved");
    let intents = intents_of(&stripe, "a-1");
    assert_eq!(intents.len(), 1, "{intents:?}");
    let intent = &intents[0];
    assert_eq!(intent["id"], approval.reference.as_str());
    assert_eq!(intent["status"], "succeeded");
    assert_eq!(intent["amount"], 2500);
    assert_eq!(intent["currency"], "usd");
    assert_eq!(intent["customer"], stored.customer.as_str());
    assert_eq!(intent["payment_method"], stored.payment_method.as_str());
    assert_eq!(intent["metadata"]["rebill_invoice"], "1001");

    // Storing the stored reference answers it; a reference of another gateway is not Stripe's.
    let again = gateway.store_payment_method(PaymentMethod::Stored { reference: &reference }, None).await;
    assert_eq!(again.as_deref(), Ok(reference.as_str()));
    let foreign = "sbx_0123456789abcdef01234567_approved";
    let d =
        gateway.store_payment_method(PaymentMethod::Stored { reference: foreign }, None).await.expect_err("foreign");
    assert_eq!(d.code, "gateway_token_not_found");
    let d = declined(gateway.purchase(&request(PaymentMethod::Stored { reference: foreign }, 100, Some("a-2"))).await);
    assert_eq!(d.code, "gateway_token_not_found");
    assert!(intents_of(&stripe, "a-2").is_empty());
}

#[tokio::test]
async fn a_card_purchase_stores_the_card_first() {
    let stripe = LocalStripe::start();
    // Through a proxy that keeps Stripe's documented behaviour (idempotency, the list's customer filter).
    let front = StripeProxy::start(&stripe.base);
    let gateway = gateway(&front.base);
    let c = card("4242424242424242");
    let calls = |method| front.received(method, "/v1/");
    let approval = approved(gateway.purchase(&request(PaymentMethod::Card(&c), 1200, Some("c-1"))).await);
    // The calls per charge of a new card (docs/gateways.md): the customer, the payment method,
    // its attach, the charge.
    assert_eq!((calls("POST"), calls("GET")), (4, 0), "four calls for a charge of a new card");
    let stored = StoredMethod::parse(approval.stored.as_deref().expect("the stored card")).expect("a reference");
    let intents = intents_of(&stripe, "c-1");
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0]["customer"], stored.customer.as_str());

    // Resumed while Stripe keeps its keys, the attempt stores the card again under them (Stripe
    // answers what the first calls made) and finds its charge by that customer: nothing new is
    // made, and the account's intents are not paged through.
    let customers = list_all(&stripe, "/v1/customers").len();
    let resumed =
        PaymentRequest { resumed: true, may_resend: true, ..request(PaymentMethod::Card(&c), 1200, Some("c-1")) };
    let before = (calls("POST"), front.replayed("POST", "/v1/"));
    assert_eq!(approved(gateway.purchase(&resumed).await).reference, approval.reference);
    assert_eq!(list_all(&stripe, "/v1/customers").len(), customers);
    assert_eq!(intents_of(&stripe, "c-1").len(), 1);
    assert_eq!(front.replayed("POST", "/v1/") - before.1, 3, "the customer, method and attach replayed");
    assert_eq!(calls("POST") - before.0, 3, "no charge sent: the look-up found it");
    assert!(front.received("GET", "/v1/payment_intents?customer=") >= 1, "looked up by its customer");
    // Once the keys may be forgotten, the customer cannot be learnt: not known.
    let late = PaymentRequest { resumed: true, ..request(PaymentMethod::Card(&c), 1200, Some("c-1")) };
    assert_eq!(pending(gateway.purchase(&late).await).code, "gateway_error");
}

#[tokio::test]
async fn a_declining_card_is_refused_when_stored_or_verified() {
    let stripe = LocalStripe::start();
    // Through a proxy that keeps Stripe's documented behaviour (idempotency, the list's customer filter).
    let front = StripeProxy::start(&stripe.base);
    let gateway = gateway(&front.base);
    let c = card("4000000000000002");
    let d = gateway.store_payment_method(PaymentMethod::Card(&c), None).await.expect_err("refused");
    assert_eq!((d.code, d.gateway_error_code.as_deref()), ("declined", Some("card_declined")));
    let d = declined(gateway.verify(&request(PaymentMethod::Card(&c), 0, Some("v-1"))).await);
    assert_eq!(d.code, "declined");
    let d = declined(gateway.purchase(&request(PaymentMethod::Card(&c), 500, Some("p-1"))).await);
    assert_eq!(d.code, "declined");
    assert!(intents_of(&stripe, "p-1").is_empty(), "nothing was charged");
}

#[tokio::test]
async fn a_card_that_stores_but_cannot_be_charged_declines_the_purchase() {
    let stripe = LocalStripe::start();
    // Through a proxy that keeps Stripe's documented behaviour (idempotency, the list's customer filter).
    let front = StripeProxy::start(&stripe.base);
    let gateway = gateway(&front.base);
    let reference = store(&gateway, "4000000000000341").await;
    let d =
        declined(gateway.purchase(&request(PaymentMethod::Stored { reference: &reference }, 900, Some("d-1"))).await);
    assert_eq!((d.code, d.gateway_error_code.as_deref()), ("declined", Some("card_declined")));
    let intents = intents_of(&stripe, "d-1");
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0]["status"], "requires_payment_method");

    // The same attempt resumed answers the same decline without a second intent.
    let r =
        PaymentRequest { resumed: true, ..request(PaymentMethod::Stored { reference: &reference }, 900, Some("d-1")) };
    let again = declined(gateway.purchase(&r).await);
    assert_eq!(again.code, "declined");
    assert_eq!(again.reference.as_deref(), intents[0]["id"].as_str());
    assert_eq!(intents_of(&stripe, "d-1").len(), 1);
}

#[tokio::test]
async fn three_d_secure_cards_need_the_customer() {
    let stripe = LocalStripe::start();
    // Through a proxy that keeps Stripe's documented behaviour (idempotency, the list's customer filter).
    let front = StripeProxy::start(&stripe.base);
    let gateway = gateway(&front.base);
    let reference = store(&gateway, "4000000000003220").await;
    let d =
        declined(gateway.purchase(&request(PaymentMethod::Stored { reference: &reference }, 700, Some("t-1"))).await);
    assert_eq!(d.code, "three_d_secure_action_required");
    let intents = intents_of(&stripe, "t-1");
    assert_eq!(d.reference.as_deref(), intents[0]["id"].as_str());
    let d = declined(gateway.verify(&request(PaymentMethod::Stored { reference: &reference }, 0, Some("t-2"))).await);
    assert_eq!(d.code, "three_d_secure_action_required");
    assert!(d.reference.as_deref().is_some_and(|r| r.starts_with("seti_")), "{d:?}");
}

#[tokio::test]
async fn verifications_store_the_card_and_retire_the_replaced_one() {
    let stripe = LocalStripe::start();
    // Through a proxy that keeps Stripe's documented behaviour (idempotency, the list's customer filter).
    let front = StripeProxy::start(&stripe.base);
    let gateway = gateway(&front.base);
    let old = store(&gateway, "4242424242424242").await;
    let old_method = StoredMethod::parse(&old).expect("a reference");
    let c = card("4242424242424242");
    let r = PaymentRequest {
        replacing: Some(&old),
        address: AvsAddress { street: Some("1 Main St."), postal_code: Some("94105") },
        ..request(PaymentMethod::Card(&c), 0, Some("v-1"))
    };
    let approval = approved(gateway.verify(&r).await);
    let new = StoredMethod::parse(approval.stored.as_deref().expect("the new method")).expect("a reference");
    assert_eq!(new.customer, old_method.customer, "the customer is kept");
    assert_ne!(new.payment_method, old_method.payment_method);
    assert_eq!(approval.reference, new.payment_method);
    let retired = stripe.get_json(&format!("/v1/payment_methods/{}", old_method.payment_method));
    assert_eq!(retired["customer"], Value::Null, "the replaced method is detached");
    let kept = stripe.get_json(&format!("/v1/payment_methods/{}", new.payment_method));
    assert_eq!(kept["customer"], new.customer.as_str());
    assert_eq!(kept["billing_details"]["address"]["postal_code"], "94105");

    // A stored method is verified with a SetupIntent.
    let stored = new.reference();
    let approval =
        approved(gateway.verify(&request(PaymentMethod::Stored { reference: &stored }, 0, Some("v-2"))).await);
    assert!(approval.reference.starts_with("seti_"), "{approval:?}");
    let intent = stripe.get_json(&format!("/v1/setup_intents/{}", approval.reference));
    assert_eq!(
        (intent["status"].as_str(), intent["customer"].as_str()),
        (Some("succeeded"), Some(new.customer.as_str()))
    );

    // Replacing a reference whose customer is gone stores the card under a new customer.
    stripe.delete(&format!("/v1/customers/{}", new.customer));
    let r = PaymentRequest { replacing: Some(&stored), ..request(PaymentMethod::Card(&c), 0, Some("v-3")) };
    let approval = approved(gateway.verify(&r).await);
    let moved = StoredMethod::parse(approval.stored.as_deref().expect("stored")).expect("a reference");
    assert_ne!(moved.customer, new.customer);
}

#[tokio::test]
async fn bank_accounts_are_refused_by_name() {
    let stripe = LocalStripe::start();
    // Through a proxy that keeps Stripe's documented behaviour (idempotency, the list's customer filter).
    let front = StripeProxy::start(&stripe.base);
    let gateway = gateway(&front.base);
    let account = BankAccount {
        routing_number: "110000000".to_owned(),
        account_number: "000123456789".to_owned(),
        account_type: AccountType::Checking,
        name_on_account: "Verena Example".to_owned(),
    };
    let method = PaymentMethod::BankAccount(&account);
    let d = gateway.store_payment_method(method, None).await.expect_err("refused");
    assert_eq!(d.code, "ach_transactions_not_supported");
    assert_eq!(declined(gateway.verify(&request(method, 0, None)).await).code, "ach_transactions_not_supported");
    assert_eq!(declined(gateway.purchase(&request(method, 100, None)).await).code, "ach_transactions_not_supported");
    assert!(list_all(&stripe, "/v1/customers").is_empty(), "nothing was sent");
}

#[tokio::test]
async fn a_purchase_is_refunded_in_parts_once_per_key() {
    let stripe = LocalStripe::start();
    // Through a proxy that keeps Stripe's documented behaviour (idempotency, the list's customer filter).
    let front = StripeProxy::start(&stripe.base);
    let gateway = gateway(&front.base);
    let reference = store(&gateway, "4242424242424242").await;
    let purchase =
        approved(gateway.purchase(&request(PaymentMethod::Stored { reference: &reference }, 5000, Some("p-1"))).await);
    let refund = |amount, key| RefundRequest {
        amount_in_cents: amount,
        currency: "USD",
        reference: &purchase.reference,
        idempotency_key: key,
    };

    let calls = |method| front.received(method, "/v1/");
    let before = (calls("POST"), calls("GET"));
    let first = approved(gateway.refund(&refund(2000, Some("r-1"))).await);
    assert!(first.reference.starts_with("re_"), "{first:?}");
    // The calls per refund (docs/gateways.md): the look-up of one made under its key, the refund.
    assert_eq!((calls("POST") - before.0, calls("GET") - before.1), (1, 1), "two calls per refund");
    // Asked again under the same key, the refund made is answered.
    assert_eq!(approved(gateway.refund(&refund(2000, Some("r-1"))).await).reference, first.reference);
    let rest = approved(gateway.refund(&refund(3000, Some("r-2"))).await);
    assert_ne!(rest.reference, first.reference);
    let mut amounts: Vec<i64> =
        refunds_of(&stripe, &purchase.reference).iter().filter_map(|r| r["amount"].as_i64()).collect();
    amounts.sort_unstable();
    assert_eq!(amounts, [2000, 3000]);
    let made = stripe.get_json(&format!("/v1/refunds/{}", first.reference));
    assert_eq!(made["metadata"]["rebill_attempt"], "r-1");

    for amount in [0, -5] {
        assert_eq!(declined(gateway.refund(&refund(amount, Some("r-3"))).await).code, "invalid_amount");
    }
    let d = declined(
        gateway
            .refund(&RefundRequest {
                amount_in_cents: 100,
                currency: "USD",
                reference: "pi_nope",
                idempotency_key: None,
            })
            .await,
    );
    assert_eq!(d.code, "transaction_cannot_be_refunded");
    assert_eq!(refunds_of(&stripe, &purchase.reference).len(), 2);
}

#[tokio::test]
async fn a_void_refunds_the_whole_purchase_once() {
    let stripe = LocalStripe::start();
    // Through a proxy that keeps Stripe's documented behaviour (idempotency, the list's customer filter).
    let front = StripeProxy::start(&stripe.base);
    let gateway = gateway(&front.base);
    let reference = store(&gateway, "4242424242424242").await;
    let purchase =
        approved(gateway.purchase(&request(PaymentMethod::Stored { reference: &reference }, 4200, Some("p-1"))).await);
    let void = VoidRequest {
        reference: &purchase.reference,
        amount_in_cents: 4200,
        currency: "USD",
        idempotency_key: Some("v-1"),
    };
    let voided = approved(gateway.void(&void).await);
    assert_eq!(voided.reference, purchase.reference, "a void answers the voided purchase");
    assert_eq!(approved(gateway.void(&void).await).reference, purchase.reference);
    let refunds = refunds_of(&stripe, &purchase.reference);
    assert_eq!(refunds.len(), 1, "{refunds:?}");
    assert_eq!(refunds[0]["amount"], 4200);
    assert_eq!(refunds[0]["metadata"]["rebill_attempt"], "v-1");

    // An intent never charged is canceled.
    let declining = store(&gateway, "4000000000000341").await;
    let d =
        declined(gateway.purchase(&request(PaymentMethod::Stored { reference: &declining }, 300, Some("p-2"))).await);
    assert_eq!(d.code, "declined");
    let intent = intents_of(&stripe, "p-2")[0]["id"].as_str().expect("an id").to_owned();
    let void = VoidRequest { reference: &intent, amount_in_cents: 300, currency: "USD", idempotency_key: Some("v-2") };
    assert_eq!(approved(gateway.void(&void).await).reference, intent);
    assert_eq!(stripe.get_json(&format!("/v1/payment_intents/{intent}"))["status"], "canceled");
}

#[tokio::test]
async fn a_purchase_whose_answer_is_lost_is_found_not_charged_again() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let gateway = gateway(&proxy.base);
    let reference = store(&gateway, "4242424242424242").await;
    proxy.drop_answers("POST", "/v1/payment_intents", 1);
    let approval = approved(
        gateway.purchase(&request(PaymentMethod::Stored { reference: &reference }, 1500, Some("lost-1"))).await,
    );
    let intents = intents_of(&stripe, "lost-1");
    assert_eq!(intents.len(), 1, "exactly one PaymentIntent: {intents:?}");
    assert_eq!(intents[0]["id"], approval.reference.as_str());
    assert_eq!(proxy.count("POST", "/v1/payment_intents"), 1, "the create was not sent again: the look-up found it");
    assert_eq!(intents[0]["status"], "succeeded", "charged in the one call");

    // The purchase's answer and the answers of its look-up (a GET tried three times) are lost:
    // nothing is sent again, and the attempt's outcome is not known (never a decline).
    proxy.drop_answers("POST", "/v1/payment_intents", 1);
    proxy.drop_answers("GET", "/v1/payment_intents", 3);
    let p = pending(
        gateway.purchase(&request(PaymentMethod::Stored { reference: &reference }, 1500, Some("lost-2"))).await,
    );
    assert_eq!(p.code, "gateway_unavailable");
    assert_eq!(proxy.count("POST", "/v1/payment_intents"), 2, "the create once");
    assert_eq!(proxy.count("GET", "/v1/payment_intents"), 4);
    let charged = intents_of(&stripe, "lost-2");
    assert_eq!(charged.len(), 1, "charged once");
    assert_eq!(charged[0]["status"], "succeeded", "the money moved though rebill did not hear of it");
    // A resumed run of the attempt finds that charge and answers it, making nothing.
    let resumed = PaymentRequest {
        resumed: true,
        may_resend: true,
        ..request(PaymentMethod::Stored { reference: &reference }, 1500, Some("lost-2"))
    };
    assert_eq!(approved(gateway.purchase(&resumed).await).reference, charged[0]["id"].as_str().expect("an id"));
    assert_eq!(intents_of(&stripe, "lost-2").len(), 1);
    assert_eq!(proxy.count("POST", "/v1/payment_intents"), 2, "the resumed run sent nothing");
}

#[tokio::test]
async fn a_purchase_without_a_key_whose_answer_is_lost_is_not_sent_again() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let gateway = gateway(&proxy.base);
    let reference = store(&gateway, "4242424242424242").await;
    proxy.drop_answers("POST", "/v1/payment_intents", 1);
    let p = pending(gateway.purchase(&request(PaymentMethod::Stored { reference: &reference }, 1500, None)).await);
    assert_eq!(p.code, "gateway_unavailable", "it may have charged: not known");
    assert_eq!(proxy.count("POST", "/v1/payment_intents"), 1);
}

#[tokio::test]
async fn a_resumed_purchase_answers_the_earlier_charge() {
    let stripe = LocalStripe::start();
    // Through a proxy that keeps Stripe's documented behaviour (idempotency, the list's customer filter).
    let front = StripeProxy::start(&stripe.base);
    let gateway = gateway(&front.base);
    let reference = store(&gateway, "4242424242424242").await;
    let first =
        approved(gateway.purchase(&request(PaymentMethod::Stored { reference: &reference }, 800, Some("r-1"))).await);
    let resumed =
        PaymentRequest { resumed: true, ..request(PaymentMethod::Stored { reference: &reference }, 800, Some("r-1")) };
    assert_eq!(approved(gateway.purchase(&resumed).await).reference, first.reference);
    assert_eq!(intents_of(&stripe, "r-1").len(), 1);

    // A resumed attempt that never reached Stripe charges now, while Stripe still keeps its key.
    let never = PaymentRequest {
        resumed: true,
        may_resend: true,
        ..request(PaymentMethod::Stored { reference: &reference }, 800, Some("r-2"))
    };
    // Once the key may be forgotten, nothing is sent: an attempt found nowhere is declined.
    let late = PaymentRequest { may_resend: false, idempotency_key: Some("r-3"), ..never };
    assert_eq!(declined(gateway.purchase(&late).await).gateway_error_code.as_deref(), Some("attempt_not_found"));
    assert!(intents_of(&stripe, "r-3").is_empty());
    let charged = approved(gateway.purchase(&never).await);
    assert_ne!(charged.reference, first.reference);
    assert_eq!(intents_of(&stripe, "r-2").len(), 1);
}

#[tokio::test]
async fn a_refund_whose_answer_is_lost_is_found_not_made_again() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let gateway = gateway(&proxy.base);
    let reference = store(&gateway, "4242424242424242").await;
    let purchase =
        approved(gateway.purchase(&request(PaymentMethod::Stored { reference: &reference }, 3000, Some("p-1"))).await);
    proxy.drop_answers("POST", "/v1/refunds", 1);
    let r = RefundRequest {
        amount_in_cents: 1000,
        currency: "USD",
        reference: &purchase.reference,
        idempotency_key: Some("rf-1"),
    };
    let refund = approved(gateway.refund(&r).await);
    let refunds = refunds_of(&stripe, &purchase.reference);
    assert_eq!(refunds.len(), 1, "{refunds:?}");
    assert_eq!(refunds[0]["id"], refund.reference.as_str());
    assert_eq!(proxy.count("POST", "/v1/refunds"), 1);
}

#[tokio::test]
async fn a_key_stripe_refuses_is_a_configuration_decline_without_the_key() {
    let stripe = LocalStripe::start();
    let key = "rk_test_51SecretPart0123WXYZ";
    let gateway = gateway_with(&stripe.base, key, Duration::from_secs(10));
    let d =
        gateway.store_payment_method(PaymentMethod::Card(&card("4242424242424242")), None).await.expect_err("refused");
    assert_eq!(d.code, "invalid_login");
    let shown = format!("{d:?} {gateway:?}");
    assert!(!shown.contains("SecretPart") && !shown.contains("rk_test_"), "{shown}");
}

#[tokio::test]
async fn an_unreachable_or_silent_stripe_leaves_a_purchase_unknown_and_declines_a_store() {
    // Nothing listens on the port.
    let port = rebill_testkit::localstripe::free_port();
    let gateway = gateway_with(&format!("http://127.0.0.1:{port}"), API_KEY, Duration::from_secs(2));
    let r = request(PaymentMethod::Stored { reference: "cus_1/pm_1" }, 100, Some("u-1"));
    // A purchase without an answer is never taken for a decline: its outcome is not known.
    assert_eq!(pending(gateway.purchase(&r).await).code, "gateway_unavailable");
    let d = gateway.store_payment_method(PaymentMethod::Card(&card("4242424242424242")), None).await.expect_err("down");
    assert_eq!(d.code, "gateway_unavailable");

    // A server that takes the request and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = silent.local_addr().expect("an address");
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let gateway = gateway_with(&format!("http://{addr}"), API_KEY, Duration::from_millis(300));
    let started = Instant::now();
    assert_eq!(pending(gateway.purchase(&r).await).code, "gateway_timeout");
    let without_key = request(PaymentMethod::Stored { reference: "cus_1/pm_1" }, 100, None);
    assert_eq!(pending(gateway.purchase(&without_key).await).code, "gateway_timeout");
    assert!(started.elapsed() < Duration::from_secs(10), "bounded: {:?}", started.elapsed());
    holder.abort();
}
