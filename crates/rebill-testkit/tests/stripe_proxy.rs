//! The Stripe proxy in front of localstripe, over raw HTTP: idempotency keys saved, replayed,
//! refused while in flight and refused for another request; faults before and after the
//! upstream's work; and the intents list filtered by customer and `created`, newest first.

use std::time::{Duration, Instant};

use rebill_testkit::localstripe::{LocalStripe, StripeAnswer, StripeProxy, form_encode, stripe_send};
use serde_json::Value;

/// `POST path` with `fields` through `addr`, with `Idempotency-Key: key` when given.
#[track_caller]
fn post(addr: &str, path: &str, fields: &[(&str, &str)], key: Option<&str>) -> StripeAnswer {
    let headers: Vec<(&str, &str)> = key.map(|key| ("Idempotency-Key", key)).into_iter().collect();
    stripe_send(addr, "POST", path, &form_encode(fields), &headers).unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

/// `GET path_and_query` through `addr`.
#[track_caller]
fn get(addr: &str, path_and_query: &str) -> StripeAnswer {
    stripe_send(addr, "GET", path_and_query, "", &[]).unwrap_or_else(|e| panic!("GET {path_and_query}: {e}"))
}

/// Waits until `done` holds (polling), at most 30 seconds.
#[track_caller]
fn await_until(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(30), "{what} never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The ids of a list's `data`, in order.
fn ids(list: &Value) -> Vec<String> {
    let data = list["data"].as_array().unwrap_or_else(|| panic!("a list: {list}"));
    data.iter().map(|o| o["id"].as_str().expect("an id").to_owned()).collect()
}

/// Every object localstripe holds at `path` (its own list, asked directly).
fn upstream_ids(stripe: &LocalStripe, path: &str) -> Vec<String> {
    ids(&stripe.get_json(&format!("{path}?limit=100")))
}

#[test]
fn a_key_replays_its_first_answer_and_refuses_other_requests() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let first = post(&proxy.addr, "/v1/customers", &[("email", "ada@example.com")], Some("k-1"));
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.header("Idempotent-Replayed"), None);
    let id = first.json()["id"].as_str().expect("an id").to_owned();

    let again = post(&proxy.addr, "/v1/customers", &[("email", "ada@example.com")], Some("k-1"));
    assert_eq!((again.status, again.body.as_str()), (200, first.body.as_str()), "the same answer");
    assert_eq!(again.header("Idempotent-Replayed"), Some("true"));
    assert_eq!(again.header("Content-Type"), first.header("Content-Type"));
    assert_eq!(upstream_ids(&stripe, "/v1/customers"), [id.as_str()], "one customer made");
    assert_eq!((proxy.count("POST", "/v1/customers"), proxy.replayed("POST", "/v1/customers")), (1, 1));

    // The same key with another body, or on another path: refused, nothing made.
    let other = post(&proxy.addr, "/v1/customers", &[("email", "bob@example.com")], Some("k-1"));
    assert_eq!(other.status, 400, "{}", other.body);
    let error = &other.json()["error"];
    assert_eq!(error["type"], "idempotency_error");
    assert!(error["message"].as_str().expect("a message").starts_with("Keys for idempotent requests"), "{error}");
    let elsewhere = post(&proxy.addr, "/v1/products", &[("email", "ada@example.com")], Some("k-1"));
    assert_eq!(elsewhere.status, 400, "{}", elsewhere.body);
    assert_eq!(proxy.mismatches("POST", "/v1/"), 2);
    assert_eq!(upstream_ids(&stripe, "/v1/customers"), [id.as_str()]);

    // Without a key, or with another, every request acts.
    for key in [None, None, Some("k-2")] {
        assert_eq!(post(&proxy.addr, "/v1/customers", &[("email", "ada@example.com")], key).status, 200);
    }
    assert_eq!(upstream_ids(&stripe, "/v1/customers").len(), 4);

    // Once keys expire, the same key makes a new customer.
    proxy.expire_keys();
    let later = post(&proxy.addr, "/v1/customers", &[("email", "ada@example.com")], Some("k-1"));
    assert_eq!(later.status, 200, "{}", later.body);
    assert_eq!(later.header("Idempotent-Replayed"), None);
    assert_ne!(later.json()["id"], id.as_str());
    assert_eq!(upstream_ids(&stripe, "/v1/customers").len(), 5);

    // A refusal of the upstream's (404) is not saved: the key stays free.
    let missing = post(&proxy.addr, "/v1/customers/cus_nope", &[("email", "x@example.com")], Some("k-3"));
    assert_eq!(missing.status, 404, "{}", missing.body);
    let made = post(&proxy.addr, "/v1/customers", &[("email", "x@example.com")], Some("k-3"));
    assert_eq!(made.status, 200, "the key was not spent on the 404: {}", made.body);
}

#[test]
fn a_lost_answer_is_replayed_to_the_retry() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    proxy.drop_answers("POST", "/v1/customers", 1);
    let fields = [("email", "lost@example.com")];
    let lost = stripe_send(&proxy.addr, "POST", "/v1/customers", &form_encode(&fields), &[("Idempotency-Key", "k")]);
    assert!(lost.is_err(), "the answer is lost: {lost:?}");
    let retry = post(&proxy.addr, "/v1/customers", &fields, Some("k"));
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.header("Idempotent-Replayed"), Some("true"));
    assert_eq!(upstream_ids(&stripe, "/v1/customers"), [retry.json()["id"].as_str().expect("an id")]);
    assert_eq!(proxy.count("POST", "/v1/customers"), 1);
}

#[test]
fn a_key_in_flight_refuses_a_second_request() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let fields = [("email", "held@example.com")];

    // Held before forwarding: the key is in flight from the moment the request is read.
    let hold = Duration::from_secs(3);
    proxy.hold_before("POST", "/v1/customers", hold, 1);
    let started = Instant::now();
    let addr = proxy.addr.clone();
    let held = std::thread::spawn(move || post(&addr, "/v1/customers", &fields, Some("k-held")));
    await_until("the held request read", || proxy.received("POST", "/v1/customers") == 1);
    let second = post(&proxy.addr, "/v1/customers", &fields, Some("k-held"));
    assert_eq!(second.status, 409, "{}", second.body);
    let error = &second.json()["error"];
    assert_eq!(
        (error["type"].as_str(), error["code"].as_str()),
        (Some("idempotency_error"), Some("idempotency_key_in_use"))
    );
    assert_eq!(proxy.conflicts("POST", "/v1/customers"), 1);
    let first = held.join().expect("the held client");
    assert_eq!(first.status, 200, "{}", first.body);
    assert!(started.elapsed() >= hold, "held {:?}", started.elapsed());
    let third = post(&proxy.addr, "/v1/customers", &fields, Some("k-held"));
    assert_eq!((third.status, third.body.as_str()), (200, first.body.as_str()), "the 409 saved nothing");
    assert_eq!(upstream_ids(&stripe, "/v1/customers").len(), 1);

    // Held after the upstream acted: the key stays in flight until the answer is sent.
    proxy.hold_after("POST", "/v1/customers", hold, 1);
    let addr = proxy.addr.clone();
    let held = std::thread::spawn(move || post(&addr, "/v1/customers", &fields, Some("k-after")));
    await_until("the held request forwarded", || proxy.count("POST", "/v1/customers") == 2);
    assert_eq!(upstream_ids(&stripe, "/v1/customers").len(), 2, "the upstream acted before the answer came");
    let second = post(&proxy.addr, "/v1/customers", &fields, Some("k-after"));
    assert_eq!(second.status, 409, "{}", second.body);
    let first = held.join().expect("the held client");
    assert_eq!(first.status, 200, "{}", first.body);
    let third = post(&proxy.addr, "/v1/customers", &fields, Some("k-after"));
    assert_eq!((third.status, third.body.as_str()), (200, first.body.as_str()));
    assert_eq!(proxy.conflicts("POST", "/v1/customers"), 2);
    assert_eq!(upstream_ids(&stripe, "/v1/customers").len(), 2);
}

#[test]
fn a_failure_is_saved_for_its_key() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let customer = stripe.post_form("/v1/customers", &[("email", "ada@example.com")]);
    let customer = customer["id"].as_str().expect("an id");
    let fields = [("amount", "1500"), ("currency", "usd"), ("customer", customer)];

    // Failed after the upstream acted: the intent exists, the client and its retries get 500.
    proxy.fail_after("POST", "/v1/payment_intents", 1);
    let failed = post(&proxy.addr, "/v1/payment_intents", &fields, Some("k-after"));
    assert_eq!(failed.status, 500, "{}", failed.body);
    assert_eq!(failed.json()["error"]["type"], "api_error");
    assert_eq!(upstream_ids(&stripe, "/v1/payment_intents").len(), 1, "the intent was made");
    let retry = post(&proxy.addr, "/v1/payment_intents", &fields, Some("k-after"));
    assert_eq!((retry.status, retry.body.as_str()), (500, failed.body.as_str()), "the saved 500");
    assert_eq!(retry.header("Idempotent-Replayed"), Some("true"));
    assert_eq!(proxy.count("POST", "/v1/payment_intents"), 1);
    assert_eq!(upstream_ids(&stripe, "/v1/payment_intents").len(), 1);

    // Failed before: nothing made, the 500 saved all the same.
    proxy.fail_before("POST", "/v1/payment_intents", 1);
    let failed = post(&proxy.addr, "/v1/payment_intents", &fields, Some("k-before"));
    assert_eq!(failed.status, 500, "{}", failed.body);
    let retry = post(&proxy.addr, "/v1/payment_intents", &fields, Some("k-before"));
    assert_eq!(retry.status, 500, "{}", retry.body);
    assert_eq!(proxy.count("POST", "/v1/payment_intents"), 1);
    assert_eq!(upstream_ids(&stripe, "/v1/payment_intents").len(), 1);

    // The rules are spent: a new key acts and is answered.
    let made = post(&proxy.addr, "/v1/payment_intents", &fields, Some("k-new"));
    assert_eq!(made.status, 200, "{}", made.body);
    assert_eq!(upstream_ids(&stripe, "/v1/payment_intents").len(), 2);
}

#[test]
fn the_intents_list_is_filtered_by_customer_newest_first() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let customer =
        |email: &str| stripe.post_form("/v1/customers", &[("email", email)])["id"].as_str().expect("an id").to_owned();
    let (ada, bob) = (customer("ada@example.com"), customer("bob@example.com"));
    let intent = |customer: &str, amount: &str| {
        let intent =
            stripe.post_form("/v1/payment_intents", &[("amount", amount), ("currency", "usd"), ("customer", customer)]);
        intent["id"].as_str().expect("an id").to_owned()
    };
    // Ada's three intents among more than a page of localstripe's of Bob's.
    let mut adas = Vec::new();
    for n in 0..103 {
        if n % 40 == 0 {
            adas.push(intent(&ada, "100"));
        } else {
            intent(&bob, "200");
        }
    }
    let all = stripe.get_json("/v1/payment_intents?limit=100");
    assert_eq!(all["has_more"], true, "localstripe pages by 100");
    assert_eq!(ids(&all)[0], adas[0], "localstripe lists oldest first");
    let refused = get(&stripe.addr, &format!("/v1/payment_intents?customer={ada}"));
    assert_eq!(refused.status, 400, "localstripe refuses the customer filter: {}", refused.body);
    let refused = get(&stripe.addr, "/v1/payment_intents?created%5Bgte%5D=0");
    assert_eq!(refused.status, 400, "and the created filter: {}", refused.body);

    let newest_first: Vec<String> = adas.iter().rev().cloned().collect();
    let list = get(&proxy.addr, &format!("/v1/payment_intents?customer={ada}&limit=100"));
    assert_eq!(list.status, 200, "{}", list.body);
    let list = list.json();
    assert_eq!(ids(&list), newest_first);
    assert_eq!((list["object"].as_str(), list["has_more"].as_bool()), (Some("list"), Some(false)));
    assert_eq!(list["url"], "/v1/payment_intents");
    assert!(list["data"].as_array().expect("data").iter().all(|i| i["customer"] == ada.as_str()));
    assert_eq!(proxy.count("GET", "/v1/payment_intents"), 1, "one list, however many pages it took");

    // Paged by the client.
    let page = get(&proxy.addr, &format!("/v1/payment_intents?customer={ada}&limit=2")).json();
    assert_eq!((ids(&page), page["has_more"].as_bool()), (newest_first[..2].to_vec(), Some(true)));
    let rest =
        get(&proxy.addr, &format!("/v1/payment_intents?customer={ada}&limit=2&starting_after={}", newest_first[1]));
    assert_eq!((ids(&rest.json()), rest.json()["has_more"].as_bool()), (newest_first[2..].to_vec(), Some(false)));

    // Unfiltered: newest first too, over all of localstripe's pages.
    let mut newest: Vec<String> = every_upstream_id(&stripe, "/v1/payment_intents");
    assert_eq!(newest.len(), 103);
    newest.reverse();
    let page = get(&proxy.addr, "/v1/payment_intents?limit=100").json();
    assert_eq!((ids(&page), page["has_more"].as_bool()), (newest[..100].to_vec(), Some(true)));
    let page = get(&proxy.addr, &format!("/v1/payment_intents?limit=100&starting_after={}", newest[99])).json();
    assert_eq!((ids(&page), page["has_more"].as_bool()), (newest[100..].to_vec(), Some(false)));
    let page = get(&proxy.addr, "/v1/payment_intents").json();
    assert_eq!(ids(&page), newest[..10].to_vec(), "10 by default");

    // By created.
    let created = all["data"][0]["created"].as_i64().expect("created");
    let since = get(&proxy.addr, &format!("/v1/payment_intents?created%5Bgte%5D={created}&customer={ada}&limit=100"));
    assert_eq!(ids(&since.json()), newest_first);
    let before = get(&proxy.addr, &format!("/v1/payment_intents?created[lt]={created}"));
    assert_eq!(ids(&before.json()), Vec::<String>::new());

    // Refused as Stripe refuses.
    let refused = get(&proxy.addr, "/v1/payment_intents?limit=101");
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(refused.json()["error"]["type"], "invalid_request_error");
    let refused = get(&proxy.addr, "/v1/payment_intents?email=x");
    assert_eq!(refused.status, 400, "{}", refused.body);

    // One intent is read as localstripe answers it.
    let one = get(&proxy.addr, &format!("/v1/payment_intents/{}", adas[0]));
    assert_eq!((one.status, one.json()["id"].as_str()), (200, Some(adas[0].as_str())));
}

/// Every id of localstripe's list at `path`, in its order, over all its pages.
fn every_upstream_id(stripe: &LocalStripe, path: &str) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    loop {
        let page = match all.last() {
            Some(last) => stripe.get_json(&format!("{path}?limit=100&starting_after={last}")),
            None => stripe.get_json(&format!("{path}?limit=100")),
        };
        all.extend(ids(&page));
        if page["has_more"] != true {
            return all;
        }
    }
}

#[test]
fn the_refunds_of_an_intent_are_listed_through_the_proxy() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let customer = stripe.post_form("/v1/customers", &[("email", "ada@example.com")]);
    let customer = customer["id"].as_str().expect("an id");
    let method = stripe.post_form(
        "/v1/payment_methods",
        &[
            ("type", "card"),
            ("card[number]", "4242424242424242"),
            ("card[exp_month]", "12"),
            ("card[exp_year]", "2030"),
            ("card[cvc]", "123"),
        ],
    );
    let method = method["id"].as_str().expect("an id");
    stripe.post_form(&format!("/v1/payment_methods/{method}/attach"), &[("customer", customer)]);
    let fields = [
        ("amount", "3000"),
        ("currency", "usd"),
        ("customer", customer),
        ("payment_method", method),
        ("confirm", "true"),
    ];
    let intent = post(&proxy.addr, "/v1/payment_intents", &fields, Some("p-1")).json();
    assert_eq!(intent["status"], "succeeded", "{intent}");
    let intent = intent["id"].as_str().expect("an id");
    let mut refunds = Vec::new();
    for (amount, key) in [("1000", "r-1"), ("500", "r-2"), ("1000", "r-1")] {
        let refund = post(&proxy.addr, "/v1/refunds", &[("payment_intent", intent), ("amount", amount)], Some(key));
        assert_eq!(refund.status, 200, "{}", refund.body);
        refunds.push(refund.json()["id"].as_str().expect("an id").to_owned());
    }
    assert_eq!(refunds[0], refunds[2], "the retried refund was replayed");
    let list = get(&proxy.addr, &format!("/v1/refunds?payment_intent={intent}&limit=100"));
    assert_eq!(list.status, 200, "{}", list.body);
    let mut listed = ids(&list.json());
    listed.sort();
    let mut made = refunds[..2].to_vec();
    made.sort();
    assert_eq!(listed, made);
}
