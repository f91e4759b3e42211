//! The transport against a scripted server: what goes on the wire (form encoding, headers, the
//! same idempotency key on every try), and the answers localstripe never gives (5xx, 429,
//! `Stripe-Should-Retry`, 409 `idempotency_key_in_use`) with the retries and look-ups they lead
//! to.

use std::sync::{Arc, Mutex};

use rebill_billing::card::{Brand, Card, Expiry};
use rebill_billing::gateway::{
    AvsAddress, Gateway, Outcome, PaymentMethod, PaymentRequest, RefundRequest, VoidRequest,
};
use rebill_gateway_stripe::{API_VERSION, StripeConfig, StripeGateway};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const KEY: &str = "sk_test_scripted0123456789";

/// One scripted answer: for the next `times` requests of `method` whose path starts with
/// `prefix`.
struct Rule {
    method: &'static str,
    prefix: &'static str,
    times: usize,
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
}

fn rule(method: &'static str, prefix: &'static str, times: usize, status: u16, body: &str) -> Rule {
    Rule { method, prefix, times, status, headers: Vec::new(), body: body.to_owned() }
}

/// A request as the server read it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    rules: Mutex<Vec<Rule>>,
    seen: Mutex<Vec<Seen>>,
}

struct Server {
    base: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    async fn start(rules: Vec<Rule>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let state = Arc::new(State { rules: Mutex::new(rules), seen: Mutex::default() });
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, shared.clone()));
            }
        });
        Server { base, state, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().expect("the log").clone()
    }

    /// Method and path (without the query) of each request, in order.
    fn calls(&self) -> Vec<String> {
        self.seen().iter().map(|s| format!("{} {}", s.method, s.target.split('?').next().unwrap_or_default())).collect()
    }
}

async fn serve(mut stream: TcpStream, state: Arc<State>) {
    let mut buffer = Vec::new();
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let target = first.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned())).collect();
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    while buffer.len() < head_end + 4 + length {
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
    let body = String::from_utf8_lossy(&buffer[head_end + 4..head_end + 4 + length]).into_owned();
    let path = target.split('?').next().unwrap_or_default().to_owned();
    let answer = {
        let mut rules = state.rules.lock().expect("the rules");
        match rules.iter_mut().find(|r| r.times > 0 && r.method == method && path.starts_with(r.prefix)) {
            Some(rule) => {
                rule.times -= 1;
                (rule.status, rule.headers.clone(), rule.body.clone())
            }
            None => {
                (404, Vec::new(), r#"{"error":{"type":"invalid_request_error","message":"unscripted"}}"#.to_owned())
            }
        }
    };
    state.seen.lock().expect("the log").push(Seen { method, target, headers, body });
    let (status, extra, body) = answer;
    let mut out = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in extra {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&body);
    let _ = stream.write_all(out.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn gateway(base: &str) -> StripeGateway {
    StripeGateway::new(StripeConfig::new(KEY, format!("{base}/"))).expect("a gateway")
}

fn purchase_request(key: Option<&str>) -> PaymentRequest<'_> {
    PaymentRequest {
        amount_in_cents: 1999,
        currency: "EUR",
        method: PaymentMethod::Stored { reference: "cus_A1/pm_B2" },
        address: AvsAddress::default(),
        recurring: true,
        idempotency_key: key,
        resumed: false,
        may_resend: false,
        invoice: Some("1042"),
        replacing: None,
    }
}

const EMPTY_LIST: &str = r#"{"object":"list","data":[],"has_more":false,"url":"/v1/payment_intents"}"#;
const SUCCEEDED: &str = r#"{"id":"pi_OK1","object":"payment_intent","status":"succeeded","customer":"cus_A1",
  "metadata":{"rebill_attempt":"k-1"},
  "latest_charge":{"id":"ch_1","payment_method_details":{"card":{"checks":{"cvc_check":"pass",
  "address_line1_check":"fail","address_postal_code_check":"pass"}}}}}"#;

fn form_pairs(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("ascii");
                out.push(u8::from_str_radix(hex, 16).expect("hex"));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).expect("utf-8")
}

#[tokio::test]
async fn a_purchase_goes_on_the_wire_as_stripe_reads_it() {
    let server = Server::start(vec![rule("POST", "/v1/payment_intents", 1, 200, SUCCEEDED)]).await;
    let outcome = gateway(&server.base).purchase(&purchase_request(Some("k-1"))).await;
    let Outcome::Approved(approval) = outcome else { panic!("{outcome:?}") };
    assert_eq!(approval.reference, "pi_OK1");
    assert_eq!(approval.cvv_result.map(|r| r.code).as_deref(), Some("M"));
    assert_eq!(approval.avs_result.map(|r| r.code).as_deref(), Some("Z"));
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let request = &seen[0];
    assert_eq!((request.method.as_str(), request.target.as_str()), ("POST", "/v1/payment_intents"));
    assert_eq!(request.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(request.header("idempotency-key"), Some("rebill-purchase-k-1"));
    assert_eq!(request.header("stripe-version"), Some(API_VERSION));
    assert_eq!(request.header("content-type"), Some("application/x-www-form-urlencoded"));
    let form = form_pairs(&request.body);
    let value = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    assert_eq!(value("amount"), Some("1999"));
    assert_eq!(value("currency"), Some("eur"));
    assert_eq!(value("customer"), Some("cus_A1"));
    assert_eq!(value("payment_method"), Some("pm_B2"));
    assert_eq!(value("confirm"), Some("true"));
    assert_eq!(value("capture_method"), Some("automatic"), "charged in the one call");
    assert_eq!(value("off_session"), Some("true"));
    assert_eq!(value("metadata[rebill_attempt]"), Some("k-1"));
    assert_eq!(value("metadata[rebill_invoice]"), Some("1042"));
    assert_eq!(value("expand[]"), Some("latest_charge"));

    // A charge with the customer present is not off-session.
    let server = Server::start(vec![rule("POST", "/v1/payment_intents", 1, 200, SUCCEEDED)]).await;
    let r = PaymentRequest { recurring: false, ..purchase_request(None) };
    assert!(gateway(&server.base).purchase(&r).await.is_approved());
    let seen = server.seen();
    assert!(!form_pairs(&seen[0].body).iter().any(|(k, _)| k == "off_session"));
    assert_eq!(seen[0].header("idempotency-key"), None);
}

#[tokio::test]
async fn a_card_is_sent_in_bracket_notation_and_its_code_only_when_it_has_one() {
    let server = Server::start(vec![
        rule("POST", "/v1/customers", 1, 200, r#"{"id":"cus_N1","object":"customer"}"#),
        rule("POST", "/v1/payment_methods/pm_N2/attach", 1, 200, r#"{"id":"pm_N2","customer":"cus_N1"}"#),
        rule("POST", "/v1/payment_methods", 1, 200, r#"{"id":"pm_N2","object":"payment_method"}"#),
    ])
    .await;
    let card = Card {
        number: "4242424242424242".into(),
        brand: Brand::Visa,
        expiry: Expiry { month: 3, year: 2031 },
        cvv: None,
    };
    let stored = gateway(&server.base).store_payment_method(PaymentMethod::Card(&card), None).await;
    assert_eq!(stored.as_deref(), Ok("cus_N1/pm_N2"));
    assert_eq!(
        server.calls(),
        ["POST /v1/customers", "POST /v1/payment_methods", "POST /v1/payment_methods/pm_N2/attach"]
    );
    let seen = server.seen();
    assert!(seen[1].body.contains("card%5Bnumber%5D=4242424242424242"), "{}", seen[1].body);
    let form = form_pairs(&seen[1].body);
    let names: Vec<&str> = form.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["type", "card[number]", "card[exp_month]", "card[exp_year]"]);
    assert_eq!(form_pairs(&seen[2].body), [("customer".to_owned(), "cus_N1".to_owned())]);
}

#[tokio::test]
async fn an_authorization_found_is_captured_and_every_call_of_a_verification_carries_a_key() {
    // An attempt resumed across an upgrade finds the authorization an earlier rebill made (it
    // authorized and captured in two steps), and captures it under that version's key.
    let authorized = SUCCEEDED.replace(r#""status":"succeeded""#, r#""status":"requires_capture""#);
    let list = format!(r#"{{"object":"list","has_more":false,"data":[{authorized}]}}"#);
    let server = Server::start(vec![
        rule("POST", "/v1/payment_intents/pi_OK1/capture", 1, 200, SUCCEEDED),
        rule("GET", "/v1/payment_intents", 1, 200, &list),
    ])
    .await;
    let resumed = PaymentRequest { resumed: true, ..purchase_request(Some("k-1")) };
    let outcome = gateway(&server.base).purchase(&resumed).await;
    assert!(outcome.is_approved(), "{outcome:?}");
    assert_eq!(server.calls(), ["GET /v1/payment_intents", "POST /v1/payment_intents/pi_OK1/capture"]);
    assert_eq!(server.seen()[1].header("idempotency-key"), Some("rebill-purchase-k-1-capture"));

    let server = Server::start(vec![
        rule("POST", "/v1/customers", 1, 200, r#"{"id":"cus_N1","object":"customer"}"#),
        rule("POST", "/v1/payment_methods/pm_N2/attach", 1, 200, r#"{"id":"pm_N2","customer":"cus_N1"}"#),
        rule("POST", "/v1/payment_methods", 1, 200, r#"{"id":"pm_N2","object":"payment_method"}"#),
    ])
    .await;
    let card = Card {
        number: "4242424242424242".into(),
        brand: Brand::Visa,
        expiry: Expiry { month: 3, year: 2031 },
        cvv: Some("123".into()),
    };
    let request = PaymentRequest { method: PaymentMethod::Card(&card), ..purchase_request(Some("v-9")) };
    let outcome = gateway(&server.base).verify(&request).await;
    assert!(outcome.is_approved(), "{outcome:?}");
    let keys: Vec<Option<String>> =
        server.seen().iter().map(|s| s.header("idempotency-key").map(str::to_owned)).collect();
    assert_eq!(
        keys,
        [
            Some("rebill-verify-v-9-customer".to_owned()),
            Some("rebill-verify-v-9-method".to_owned()),
            Some("rebill-verify-v-9-attach".to_owned())
        ]
    );
}

#[tokio::test]
async fn a_create_stripe_says_to_retry_is_looked_up_then_sent_again_with_the_same_key() {
    let server = Server::start(vec![
        rule("POST", "/v1/payment_intents", 2, 503, r#"{"error":{"type":"api_error","message":"busy"}}"#),
        rule("GET", "/v1/payment_intents", 2, 200, EMPTY_LIST),
        rule("POST", "/v1/payment_intents", 1, 200, SUCCEEDED),
    ])
    .await;
    let outcome = gateway(&server.base).purchase(&purchase_request(Some("k-1"))).await;
    assert!(outcome.is_approved(), "{outcome:?}");
    assert_eq!(
        server.calls(),
        [
            "POST /v1/payment_intents",
            "GET /v1/payment_intents",
            "POST /v1/payment_intents",
            "GET /v1/payment_intents",
            "POST /v1/payment_intents",
        ]
    );
    for request in server.seen().iter().filter(|s| s.method == "POST") {
        assert_eq!(request.header("idempotency-key"), Some("rebill-purchase-k-1"));
    }
    // The look-up reads the customer's intents (Stripe's `customer` filter), not the account's.
    let lookup = &server.seen()[1];
    assert_eq!(lookup.target, "/v1/payment_intents?customer=cus_A1&limit=100");
}

#[tokio::test]
async fn a_create_found_by_the_look_up_is_not_sent_again() {
    let found = SUCCEEDED.replace("pi_OK1", "pi_FOUND");
    let list = format!(
        r#"{{"object":"list","has_more":false,"data":[
        {{"id":"pi_other","status":"succeeded","customer":"cus_A1","metadata":{{"rebill_attempt":"k-2"}}}},
        {{"id":"pi_gone","status":"canceled","customer":"cus_A1","metadata":{{"rebill_attempt":"k-1"}}}},
        {{"id":"pi_elsewhere","status":"succeeded","customer":"cus_Z9","metadata":{{"rebill_attempt":"k-1"}}}},
        {found}]}}"#
    );
    let server = Server::start(vec![
        rule("POST", "/v1/payment_intents", 1, 500, ""),
        rule("GET", "/v1/payment_intents", 1, 200, &list),
    ])
    .await;
    let outcome = gateway(&server.base).purchase(&purchase_request(Some("k-1"))).await;
    let Outcome::Approved(approval) = outcome else { panic!("{outcome:?}") };
    assert_eq!(approval.reference, "pi_FOUND");
    assert_eq!(server.calls(), ["POST /v1/payment_intents", "GET /v1/payment_intents"]);
}

#[tokio::test]
async fn the_look_up_pages_to_the_attempts_intent() {
    let first_page = r#"{"object":"list","has_more":true,"data":[{"id":"pi_p1","status":"succeeded","customer":"cus_A1","metadata":{}}]}"#;
    let second_page = SUCCEEDED.replace("pi_OK1", "pi_FOUND");
    let second_page = format!(r#"{{"object":"list","has_more":false,"data":[{second_page}]}}"#);
    let server = Server::start(vec![
        rule("GET", "/v1/payment_intents", 1, 200, first_page),
        rule("GET", "/v1/payment_intents", 1, 200, &second_page),
    ])
    .await;
    let r = PaymentRequest { resumed: true, ..purchase_request(Some("k-1")) };
    let outcome = gateway(&server.base).purchase(&r).await;
    let Outcome::Approved(approval) = outcome else { panic!("{outcome:?}") };
    assert_eq!(approval.reference, "pi_FOUND");
    let seen = server.seen();
    assert_eq!(seen[1].target, "/v1/payment_intents?customer=cus_A1&limit=100&starting_after=pi_p1");
    assert_eq!(seen.len(), 2, "nothing was created");
}

#[tokio::test]
async fn a_post_without_a_key_is_never_retried() {
    let server = Server::start(vec![rule("POST", "/v1/payment_intents", 3, 500, "")]).await;
    let outcome = gateway(&server.base).purchase(&purchase_request(None)).await;
    // A 500 says nothing of what Stripe did: not known, and never sent again without a key.
    let Outcome::Pending(p) = outcome else { panic!("{outcome:?}") };
    assert_eq!(p.code, "gateway_error");
    assert_eq!(server.calls(), ["POST /v1/payment_intents"]);

    let server = Server::start(vec![rule("POST", "/v1/customers", 3, 503, "")]).await;
    let card = Card {
        number: "4242424242424242".into(),
        brand: Brand::Visa,
        expiry: Expiry { month: 3, year: 2031 },
        cvv: None,
    };
    let d = gateway(&server.base).store_payment_method(PaymentMethod::Card(&card), None).await.expect_err("refused");
    assert_eq!(d.code, "gateway_error");
    assert_eq!(server.calls(), ["POST /v1/customers"]);
}

#[tokio::test]
async fn gets_are_retried_when_stripe_allows_and_not_when_it_says_no() {
    let intent = r#"{"id":"pi_V","status":"requires_capture"}"#;
    let mut limited = rule(
        "GET",
        "/v1/payment_intents/pi_V",
        1,
        429,
        r#"{"error":{"type":"invalid_request_error","code":"rate_limit"}}"#,
    );
    limited.headers.push(("Stripe-Should-Retry", "true"));
    let server = Server::start(vec![
        limited,
        rule("GET", "/v1/payment_intents/pi_V", 1, 200, intent),
        rule("POST", "/v1/payment_intents/pi_V/cancel", 1, 200, r#"{"id":"pi_V","status":"canceled"}"#),
    ])
    .await;
    let void = VoidRequest { reference: "pi_V", amount_in_cents: 100, currency: "USD", idempotency_key: Some("v-1") };
    let outcome = gateway(&server.base).void(&void).await;
    let Outcome::Approved(approval) = outcome else { panic!("{outcome:?}") };
    assert_eq!(approval.reference, "pi_V");
    assert_eq!(
        server.calls(),
        ["GET /v1/payment_intents/pi_V", "GET /v1/payment_intents/pi_V", "POST /v1/payment_intents/pi_V/cancel"]
    );
    assert_eq!(server.seen()[2].header("idempotency-key"), Some("rebill-void-v-1"));

    let mut refused = rule("GET", "/v1/payment_intents/pi_V", 3, 503, "");
    refused.headers.push(("Stripe-Should-Retry", "false"));
    let server = Server::start(vec![refused]).await;
    let outcome = gateway(&server.base).void(&void).await;
    let Outcome::Declined(d) = outcome else { panic!("{outcome:?}") };
    assert_eq!(d.code, "gateway_error");
    assert_eq!(server.calls(), ["GET /v1/payment_intents/pi_V"]);
}

#[tokio::test]
async fn a_refund_in_use_elsewhere_is_looked_up_and_sent_again() {
    let in_use = r#"{"error":{"type":"invalid_request_error","code":"idempotency_key_in_use"}}"#;
    let empty = r#"{"object":"list","has_more":false,"data":[]}"#;
    let server = Server::start(vec![
        rule("GET", "/v1/refunds", 2, 200, empty),
        rule("POST", "/v1/refunds", 1, 409, in_use),
        rule("POST", "/v1/refunds", 1, 200, r#"{"id":"re_1","status":"succeeded"}"#),
    ])
    .await;
    let refund =
        RefundRequest { amount_in_cents: 500, currency: "USD", reference: "pi_R", idempotency_key: Some("rf-1") };
    let outcome = gateway(&server.base).refund(&refund).await;
    let Outcome::Approved(approval) = outcome else { panic!("{outcome:?}") };
    assert_eq!(approval.reference, "re_1");
    assert_eq!(server.calls(), ["GET /v1/refunds", "POST /v1/refunds", "GET /v1/refunds", "POST /v1/refunds"]);
    let seen = server.seen();
    assert_eq!(seen[0].target, "/v1/refunds?payment_intent=pi_R&limit=100");
    for post in seen.iter().filter(|s| s.method == "POST") {
        assert_eq!(post.header("idempotency-key"), Some("rebill-refund-rf-1"));
        let form = form_pairs(&post.body);
        assert!(form.contains(&("payment_intent".to_owned(), "pi_R".to_owned())), "{form:?}");
        assert!(form.contains(&("amount".to_owned(), "500".to_owned())), "{form:?}");
        assert!(form.contains(&("metadata[rebill_attempt]".to_owned(), "rf-1".to_owned())), "{form:?}");
    }

    // A refund Stripe refuses keeps Stripe's code.
    let server = Server::start(vec![
        rule("GET", "/v1/refunds", 1, 200, empty),
        rule(
            "POST",
            "/v1/refunds",
            1,
            400,
            r#"{"error":{"type":"invalid_request_error","code":"charge_already_refunded","message":"Charge ch_1 has already been refunded."}}"#,
        ),
    ])
    .await;
    let outcome = gateway(&server.base).refund(&refund).await;
    let Outcome::Declined(d) = outcome else { panic!("{outcome:?}") };
    assert_eq!(
        (d.code, d.gateway_error_code.as_deref()),
        ("transaction_cannot_be_refunded", Some("charge_already_refunded"))
    );
}

#[tokio::test]
async fn a_failed_refund_is_declined() {
    let empty = r#"{"object":"list","has_more":false,"data":[]}"#;
    let server = Server::start(vec![
        rule("GET", "/v1/refunds", 1, 200, empty),
        rule(
            "POST",
            "/v1/refunds",
            1,
            200,
            r#"{"id":"re_F","status":"failed","failure_reason":"lost_or_stolen_card"}"#,
        ),
    ])
    .await;
    let refund =
        RefundRequest { amount_in_cents: 500, currency: "USD", reference: "pi_R", idempotency_key: Some("rf-2") };
    let outcome = gateway(&server.base).refund(&refund).await;
    let Outcome::Declined(d) = outcome else { panic!("{outcome:?}") };
    assert_eq!(
        (d.code, d.gateway_error_code.as_deref()),
        ("transaction_cannot_be_refunded", Some("lost_or_stolen_card"))
    );
}
