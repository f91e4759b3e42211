//! The token endpoint of the client-side library over HTTP against `rebill serve`, on SQLite and
//! on PostgreSQL: card and bank-account tokens, every validation error shape, public keys, JSONP,
//! CORS, limits, form fields refused for characters XML forbids or beyond the billing-info bound,
//! the 20-minute lifetime on the service's clock (valid at 19:59, refused and
//! deleted at 20:00), single use, and the periodic purge of expired tokens.

use rebill_testkit::*;
use serde_json::{Value, json};

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

/// A server on `db` with the clock at `now` and its own vault key file.
fn serve(db: &str, now: i64, extra: &[&str]) -> Server {
    serve_at(db, now, extra)
}

/// `application/x-www-form-urlencoded` of the pairs.
fn form(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| percent_encode(s);
    pairs.iter().map(|(k, v)| format!("{}={}", enc(k), enc(v))).collect::<Vec<_>>().join("&")
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => char::from(b).to_string(),
            b' ' => "+".to_owned(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn card<'a>(s: &'a Server, number: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("key", s.public_key.as_str()),
        ("version", "4.10.0"),
        ("deviceId", "d1"),
        ("sessionId", "s1"),
        ("instanceId", "i1"),
        ("number", number),
        ("month", "12"),
        ("year", "2030"),
        ("cvv", "123"),
        ("first_name", "Verena"),
        ("last_name", "Example"),
        ("address1", "123 Main St."),
        ("city", "San Francisco"),
        ("state", "CA"),
        ("postal_code", "94105"),
        ("country", "US"),
        ("fraud[0][processor]", "kount"),
        ("browser[userAgent]", "test"),
    ]
}

fn bank(s: &Server) -> Vec<(&str, &str)> {
    vec![
        ("key", s.public_key.as_str()),
        ("routing_number", "123456780"),
        ("account_number", "111111111"),
        ("account_number_confirmation", "111111111"),
        ("account_type", "checking"),
        ("name_on_account", "Verena Example"),
        ("country", "US"),
    ]
}

/// Replaces (or adds) one parameter.
fn with<'a>(mut pairs: Vec<(&'a str, &'a str)>, name: &'a str, value: &'a str) -> Vec<(&'a str, &'a str)> {
    match pairs.iter_mut().find(|(n, _)| *n == name) {
        Some(pair) => pair.1 = value,
        None => pairs.push((name, value)),
    }
    pairs
}

fn without<'a>(pairs: Vec<(&'a str, &'a str)>, names: &[&str]) -> Vec<(&'a str, &'a str)> {
    pairs.into_iter().filter(|(n, _)| !names.contains(n)).collect()
}

fn post(s: &Server, pairs: &[(&str, &str)]) -> Reply {
    request(s, "POST", "/js/v1/token", &[FORM], &form(pairs))
}

fn json_of(reply: &Reply) -> Value {
    assert_eq!(reply.header("content-type").as_deref(), Some("application/json; charset=utf-8"), "{}", reply.head);
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{e}: {}", reply.body))
}

/// Asserts a token answer and returns the token id.
#[track_caller]
fn assert_token(reply: &Reply, kind: &str) -> String {
    assert_eq!(reply.status, 200, "{}\n{}", reply.head, reply.body);
    let body = json_of(reply);
    assert_eq!(body["type"], kind, "{body}");
    let id = body["id"].as_str().expect("id").to_owned();
    assert!(
        (21..=23).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
        "{id}"
    );
    assert_eq!(body.as_object().map(|o| o.len()), Some(2), "{body}");
    assert_eq!(reply.header("access-control-allow-origin").as_deref(), Some("*"));
    id
}

/// Asserts an error answer (status and body).
#[track_caller]
fn assert_json_error(reply: &Reply, status: u16, expected: Value) {
    assert_eq!(reply.status, status, "{}\n{}", reply.head, reply.body);
    assert_eq!(json_of(reply), expected);
    assert_eq!(reply.header("access-control-allow-origin").as_deref(), Some("*"));
}

fn validation(details: &[(&str, &str)]) -> Value {
    json!({ "error": {
        "code": "validation",
        "message": "There was an error validating your request.",
        "fields": details.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
        "details": details.iter().map(|(f, m)| json!({ "field": f, "messages": [m] })).collect::<Vec<_>>(),
    }})
}

/// Runs one SQL count on the service's database.
fn count(db: &str, sql: &str) -> i64 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        use sqlx::{Connection, Row};
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(db).await.expect("connect to the service's database");
        let n: i64 = sqlx::query(sql).fetch_one(&mut conn).await.expect("count").try_get(0).expect("n");
        let _ = conn.close().await;
        n
    })
}

fn create_account(s: &Server, code: &str) {
    let body = format!("<account><account_code>{code}</account_code></account>");
    let reply = authed(s, "POST", "/v2/accounts", &xml_at("2.11"), &body);
    assert_eq!(reply.status, 201, "{}", reply.body);
}

fn use_token(s: &Server, code: &str, token: &str) -> Reply {
    let body = format!("<billing_info><token_id>{token}</token_id></billing_info>");
    authed(s, "PUT", &format!("/v2/accounts/{code}/billing_info"), &xml_at("2.11"), &body)
}

#[test]
fn card_and_bank_tokens_are_made() {
    on_both_backends("tokens_made", |db| {
        let s = serve(db, T0, &[]);
        let a = assert_token(&post(&s, &card(&s, "4111 1111-1111 1111")), "credit_card");
        let b = assert_token(&post(&s, &card(&s, "4111111111111111")), "credit_card");
        assert_ne!(a, b);
        // Legacy `zip`, no CVV, two-digit year, American Express.
        let amex = with(without(card(&s, "378282246310005"), &["cvv", "postal_code"]), "zip", "94105");
        assert_token(&post(&s, &with(amex, "year", "30")), "credit_card");
        assert_token(&post(&s, &with(card(&s, "378282246310005"), "cvv", "1234")), "credit_card");
        assert_token(&post(&s, &bank(&s)), "bank_account");
        assert_token(&post(&s, &with(bank(&s), "account_type", "savings")), "bank_account");
        assert_eq!(count(db, "SELECT COUNT(*) FROM tokens"), 6);
        // Parameters may also come in the query string of a POST.
        let query = form(&[("key", s.public_key.as_str())]);
        let body = form(&without(card(&s, "4111111111111111"), &["key"]));
        let reply = request(&s, "POST", &format!("/js/v1/token?{query}"), &[FORM], &body);
        assert_token(&reply, "credit_card");
        // The routing number's bank.
        let path = format!("/js/v1/bank?{}", form(&[("key", &s.public_key), ("routing_number", "123456780")]));
        let reply = request(&s, "GET", &path, &[], "");
        assert_eq!((reply.status, json_of(&reply)), (200, json!({ "bank_name": "SANDBOX TEST BANK" })));
        let path = format!("/js/v1/bank?{}", form(&[("key", &s.public_key), ("routing_number", "021000021")]));
        assert_json_error(
            &request(&s, "GET", &path, &[], ""),
            422,
            json!({ "error": { "code": "invalid-routing-number", "message": "The routing number is not valid.",
                "fields": ["routing_number"], "details": [{ "field": "routing_number", "messages": ["is invalid"] }] } }),
        );
    });
}

#[test]
fn card_validation_errors_name_every_field() {
    on_both_backends("tokens_card_errors", |db| {
        let s = serve(db, T0, &[]);
        let key = s.public_key.clone();
        assert_json_error(
            &post(&s, &[("key", &key)]),
            422,
            validation(&[
                ("number", "is invalid"),
                ("month", "is invalid"),
                ("year", "is invalid"),
                ("first_name", "can't be blank"),
                ("last_name", "can't be blank"),
            ]),
        );
        // Luhn failure, letters, too short.
        for number in ["4222222222222222", "4111a11111111111", "41111111111"] {
            assert_json_error(&post(&s, &card(&s, number)), 422, validation(&[("number", "is invalid")]));
        }
        // Expired (December 2026 ended before T0), unreadable, out of range: month and year.
        for (month, year) in [("12", "2026"), ("ab", "2030"), ("13", "2030"), ("0", "2030")] {
            let pairs = with(with(card(&s, "4111111111111111"), "month", month), "year", year);
            assert_json_error(&post(&s, &pairs), 422, validation(&[("month", "is invalid"), ("year", "is invalid")]));
        }
        // A blank year alone still marks both expiry fields.
        let pairs = without(card(&s, "4111111111111111"), &["year"]);
        assert_json_error(&post(&s, &pairs), 422, validation(&[("month", "is invalid"), ("year", "is invalid")]));
        // The month of the clock is still valid.
        let pairs = with(with(card(&s, "4111111111111111"), "month", "1"), "year", "2027");
        assert_token(&post(&s, &pairs), "credit_card");
        let pairs = with(card(&s, "4111111111111111"), "first_name", " ");
        assert_json_error(&post(&s, &pairs), 422, validation(&[("first_name", "can't be blank")]));
        let pairs = with(card(&s, "4111111111111111"), "cvv", "12a");
        assert_json_error(&post(&s, &pairs), 422, validation(&[("cvv", "is invalid")]));
        let pairs = with(card(&s, "4111111111111111"), "country", "XX");
        assert_json_error(&post(&s, &pairs), 422, validation(&[("country", "is invalid")]));
        // A CVV of the wrong length for the brand is an invalid parameter.
        for (number, cvv, message) in
            [("4111111111111111", "1234", "must be three digits"), ("378282246310005", "123", "must be four digits")]
        {
            assert_json_error(
                &post(&s, &with(card(&s, number), "cvv", cvv)),
                422,
                json!({ "error": { "code": "invalid-parameter", "message": format!("Cvv [\"{message}\"]"),
                    "fields": ["cvv"], "details": [{ "field": "cvv", "messages": [message] }] } }),
            );
        }
        assert_eq!(count(db, "SELECT COUNT(*) FROM tokens"), 1, "only the valid card made a token");
    });
}

#[test]
fn bank_validation_errors_name_every_field() {
    on_both_backends("tokens_bank_errors", |db| {
        let s = serve(db, T0, &[]);
        let key = s.public_key.clone();
        assert_json_error(
            &post(&s, &[("key", &key), ("account_type", "")]),
            422,
            validation(&[
                ("routing_number", "can't be blank"),
                ("account_number", "can't be blank"),
                ("account_number_confirmation", "can't be blank"),
                ("account_type", "can't be blank"),
                ("name_on_account", "can't be blank"),
            ]),
        );
        let pairs = with(bank(&s), "account_number_confirmation", "111111112");
        assert_json_error(&post(&s, &pairs), 422, validation(&[("account_number_confirmation", "does not match")]));
        let pairs = with(bank(&s), "account_type", "business");
        assert_json_error(&post(&s, &pairs), 422, validation(&[("account_type", "is invalid")]));
        let pairs = with(with(bank(&s), "account_number", "12ab"), "account_number_confirmation", "12ab");
        assert_json_error(&post(&s, &pairs), 422, validation(&[("account_number", "is invalid")]));
        let routing = json!({ "error": { "code": "invalid-routing-number", "message": "The routing number is not valid.",
            "fields": ["routing_number"], "details": [{ "field": "routing_number", "messages": ["is invalid"] }] } });
        // A bad check digit, and a valid number of a bank the sandbox does not know.
        for number in ["123456789", "021000021"] {
            assert_json_error(&post(&s, &with(bank(&s), "routing_number", number)), 422, routing.clone());
        }
        // IBAN, BACS and BECS accounts are refused by name, as `type` says (a card's `type` is
        // ignored).
        for kind in ["iban_bank_account", "bacs_bank_account", "becs_bank_account"] {
            let message = format!("Bank accounts of type {kind} are not supported.");
            let unsupported = json!({ "error": { "code": "invalid-parameter", "message": message,
                "fields": ["type"], "details": [{ "field": "type", "messages": ["is not supported"] }] } });
            assert_json_error(&post(&s, &with(bank(&s), "type", kind)), 422, unsupported);
        }
        assert_eq!(count(db, "SELECT COUNT(*) FROM tokens"), 0);
        assert_token(&post(&s, &with(bank(&s), "type", "bank_account")), "bank_account");
        assert_token(&post(&s, &with(card(&s, "4111111111111111"), "type", "credit_card")), "credit_card");
    });
}

#[test]
fn the_public_key_names_the_site() {
    on_both_backends("tokens_keys", |db| {
        let s = serve(db, T0, &[]);
        let refused = json!({ "error": { "code": "invalid-public-key", "message": "The public key is not valid." } });
        assert_json_error(&post(&s, &without(card(&s, "4111111111111111"), &["key"])), 400, refused.clone());
        assert_json_error(&post(&s, &with(card(&s, "4111111111111111"), "key", "pk-nope")), 400, refused.clone());
        // The key is checked before the card.
        assert_json_error(&post(&s, &[("key", "pk-nope")]), 400, refused.clone());
        let old = s.public_key.clone();
        let new = s.cli_json(&["public-key", "regenerate", "--site", "sandbox"])["public_key"]
            .as_str()
            .expect("new key")
            .to_owned();
        assert_json_error(&post(&s, &with(card(&s, "4111111111111111"), "key", &old)), 400, refused);
        assert_token(&post(&s, &with(card(&s, "4111111111111111"), "key", &new)), "credit_card");
        // A private key is not a public key.
        let private = s.key.clone();
        let reply = post(&s, &with(card(&s, "4111111111111111"), "key", &private));
        assert_eq!(json_of(&reply)["error"]["code"], "invalid-public-key");
    });
}

#[test]
fn jsonp_answers_200_through_the_callback() {
    on_both_backends("tokens_jsonp", |db| {
        let s = serve(db, T0, &[]);
        let mut pairs = card(&s, "4111111111111111");
        pairs.extend([("_method", "post"), ("callback", "service.jsonp.cb0")]);
        let reply = request(&s, "GET", &format!("/js/v1/token?{}", form(&pairs)), &[], "");
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(
            reply.header("content-type").as_deref(),
            Some("application/javascript; charset=utf-8"),
            "{}",
            reply.head
        );
        assert_eq!(reply.header("x-content-type-options").as_deref(), Some("nosniff"));
        assert_eq!(reply.header("access-control-allow-origin").as_deref(), Some("*"));
        let inner = reply
            .body
            .strip_prefix("service.jsonp.cb0(")
            .and_then(|b| b.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{}", reply.body));
        let token: Value = serde_json::from_str(inner).expect("json");
        assert_eq!(token["type"], "credit_card");
        assert_eq!(token["id"].as_str().map(str::len), Some(22));

        // Errors are answered 200 through the callback too.
        let mut pairs = card(&s, "4222222222222222");
        pairs.extend([("_method", "post"), ("callback", "cb")]);
        let reply = request(&s, "GET", &format!("/js/v1/token?{}", form(&pairs)), &[], "");
        assert_eq!(reply.status, 200);
        let inner = reply.body.strip_prefix("cb(").and_then(|b| b.strip_suffix(')')).expect("jsonp");
        assert_eq!(serde_json::from_str::<Value>(inner).expect("json"), validation(&[("number", "is invalid")]));
        let reply = request(&s, "GET", &format!("/js/v1/token?{}", form(&[("callback", "cb"), ("key", "x")])), &[], "");
        assert_eq!(reply.status, 200);
        assert!(reply.body.starts_with("cb({\"error\":"), "{}", reply.body);
        assert!(reply.body.contains("_method=post"), "{}", reply.body);

        // A callback that is not an identifier is never echoed.
        let mut pairs = card(&s, "4111111111111111");
        pairs.extend([("_method", "post"), ("callback", "alert(1)//")]);
        let reply = request(&s, "GET", &format!("/js/v1/token?{}", form(&pairs)), &[], "");
        assert_eq!(reply.status, 400);
        assert_eq!(json_of(&reply)["error"]["fields"], json!(["callback"]));
        assert!(!reply.body.contains("alert(1)"));
        // Plain GET without _method=post is not a token request.
        let reply = request(&s, "GET", &format!("/js/v1/token?{}", form(&card(&s, "4111111111111111"))), &[], "");
        assert_eq!(reply.status, 405);
        assert_eq!(json_of(&reply)["error"]["code"], "invalid-parameter");
    });
}

#[test]
fn cors_preflight_methods_and_limits() {
    on_both_backends("tokens_cors", |db| {
        let s = serve(db, T0, &[]);
        let reply = request(
            &s,
            "OPTIONS",
            "/js/v1/token",
            &[
                ("Origin", "https://shop.example"),
                ("Access-Control-Request-Method", "POST"),
                ("Access-Control-Request-Headers", "content-type,x-requested-with"),
            ],
            "",
        );
        assert_eq!(reply.status, 204, "{}", reply.head);
        assert_eq!(reply.header("access-control-allow-origin").as_deref(), Some("*"));
        assert_eq!(reply.header("access-control-allow-methods").as_deref(), Some("GET, POST, OPTIONS"));
        assert_eq!(reply.header("access-control-allow-headers").as_deref(), Some("content-type,x-requested-with"));
        assert_eq!(reply.header("access-control-max-age").as_deref(), Some("86400"));
        assert!(reply.has_exact_header("Access-Control-Allow-Origin"), "{}", reply.head);

        let reply = request(
            &s,
            "POST",
            "/js/v1/token",
            &[FORM, ("Origin", "https://shop.example")],
            &form(&card(&s, "4111111111111111")),
        );
        assert_token(&reply, "credit_card");
        assert_eq!(reply.header("cache-control").as_deref(), Some("no-store"));

        let reply = request(&s, "PUT", "/js/v1/token", &[FORM], "");
        assert_eq!(reply.status, 405);
        assert_eq!(reply.header("allow").as_deref(), Some("GET, POST, OPTIONS"));
        assert_eq!(reply.header("access-control-allow-origin").as_deref(), Some("*"));
        let reply = request(&s, "GET", "/js/v1/nothing", &[], "");
        assert_json_error(
            &reply,
            404,
            json!({ "error": { "code": "not-found", "message": "Nothing is at /js/v1/nothing." } }),
        );
        let reply = request(&s, "POST", "/js/v1/token", &[("Content-Type", "application/json")], "{}");
        assert_eq!((reply.status, json_of(&reply)["error"]["code"].clone()), (415, json!("invalid-parameter")));
        // Bodies are capped.
        let big = form(&with(card(&s, "4111111111111111"), "address2", &"x".repeat(40 * 1024)));
        let reply = request(&s, "POST", "/js/v1/token", &[FORM], &big);
        assert_eq!(reply.status, 413, "{}", reply.body);
        assert_eq!(json_of(&reply)["error"]["message"], "Requests are limited to 32768 bytes.");
        assert_eq!(count(db, "SELECT COUNT(*) FROM tokens"), 1);
    });
}

#[test]
fn tokens_live_twenty_minutes_on_the_clock_and_work_once() {
    on_both_backends("tokens_lifetime", |db| {
        let s = serve(db, T0, &[]);
        create_account(&s, "a1");
        let early = assert_token(&post(&s, &card(&s, "4111111111111111")), "credit_card");
        let late = assert_token(&post(&s, &card(&s, "4111111111111111")), "credit_card");
        assert_token(&post(&s, &bank(&s)), "bank_account");
        assert_eq!(count(db, "SELECT COUNT(*) FROM tokens"), 3);

        // 19:59 after creation the token still works, once.
        s.set_clock(T0 + 20 * 60 - 1);
        let reply = use_token(&s, "a1", &early);
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert!(reply.body.contains("<last_four>1111</last_four>"), "{}", reply.body);
        assert_error(&use_token(&s, "a1", &early), 422, "token_invalid");
        assert_eq!(count(db, "SELECT COUNT(*) FROM tokens"), 2);

        // At 20:00 it is refused and gone for good.
        s.set_clock(T0 + 20 * 60);
        assert_error(&use_token(&s, "a1", &late), 422, "token_invalid");
        assert_eq!(count(db, "SELECT COUNT(*) FROM tokens"), 1);
        assert_error(&use_token(&s, "a1", &late), 422, "token_invalid");
        // Unknown tokens are refused alike; the unused bank token is still there.
        assert_error(&use_token(&s, "a1", "AAAAAAAAAAAAAAAAAAAAAA"), 422, "token_invalid");
        assert_eq!(count(db, "SELECT COUNT(*) FROM tokens"), 1);
    });
}

#[test]
fn expired_tokens_are_purged_without_being_used() {
    on_both_backends("tokens_purge", |db| {
        let s = serve(db, T0, &["--token-purge-interval", "1"]);
        assert_token(&post(&s, &card(&s, "4111111111111111")), "credit_card");
        assert_token(&post(&s, &bank(&s)), "bank_account");
        s.set_clock(T0 + 20 * 60 - 1);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        assert_eq!(count(db, "SELECT COUNT(*) FROM tokens"), 2, "not expired yet");
        s.set_clock(T0 + 20 * 60);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while count(db, "SELECT COUNT(*) FROM tokens") > 0 {
            assert!(std::time::Instant::now() < deadline, "expired tokens were not purged");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    });
}

#[test]
fn tokens_of_one_site_do_not_work_on_another() {
    on_both_backends("tokens_sites", |db| {
        let s = serve(db, T0, &[]);
        let other = s.cli_json(&["site", "create", "--name", "other"]);
        let other_public = other["public_key"].as_str().expect("public key");
        let token = assert_token(&post(&s, &with(card(&s, "4111111111111111"), "key", other_public)), "credit_card");
        create_account(&s, "a1");
        assert_error(&use_token(&s, "a1", &token), 422, "token_invalid");
        assert_eq!(count(db, "SELECT COUNT(*) FROM tokens"), 1, "the other site's token is untouched");
    });
}

#[test]
fn form_fields_refuse_characters_xml_forbids_and_overlong_values() {
    on_both_backends("tokens_field_bounds", |db| {
        let s = serve(db, T0, &[]);
        let card = || card(&s, "4111111111111111");
        let not_allowed = "contains a character that is not allowed";
        // NUL (which PostgreSQL cannot store), U+0001 and U+FFFF: refused before anything is stored.
        for value in ["A\u{0}B", "A\u{1}B", "A\u{FFFF}"] {
            assert_json_error(
                &post(&s, &with(card(), "first_name", value)),
                422,
                validation(&[("first_name", not_allowed)]),
            );
        }
        // Every refused field is named, address and bank fields alike.
        assert_json_error(
            &post(&s, &with(with(card(), "address1", "\u{1b}[2J"), "postal_code", "9\u{0}")),
            422,
            validation(&[("address1", not_allowed), ("postal_code", not_allowed)]),
        );
        assert_json_error(
            &post(&s, &with(bank(&s), "name_on_account", "V\u{0}")),
            422,
            validation(&[("name_on_account", not_allowed)]),
        );
        // The billing_info bound: 255 characters (not bytes) pass, 256 do not.
        let longest = "é".repeat(255);
        let over = format!("{longest}x");
        assert_json_error(
            &post(&s, &with(card(), "city", &over)),
            422,
            validation(&[("city", "is too long (maximum is 255 characters)")]),
        );
        assert_json_error(
            &post(&s, &with(bank(&s), "name_on_account", &over)),
            422,
            validation(&[("name_on_account", "is too long (maximum is 255 characters)")]),
        );
        // JSONP answers the same error through its callback.
        let mut pairs = with(card(), "last_name", "E\u{0}");
        pairs.extend([("_method", "post"), ("callback", "cb")]);
        let reply = request(&s, "GET", &format!("/js/v1/token?{}", form(&pairs)), &[], "");
        assert_eq!(reply.status, 200, "{}", reply.body);
        let inner = reply.body.strip_prefix("cb(").and_then(|b| b.strip_suffix(')')).expect("jsonp");
        assert_eq!(serde_json::from_str::<Value>(inner).expect("json"), validation(&[("last_name", not_allowed)]));
        // A public key holding such a character is no key (and is never looked up).
        let refused = json!({ "error": { "code": "invalid-public-key", "message": "The public key is not valid." } });
        let bad_key = format!("{}\u{0}", s.public_key);
        assert_json_error(&post(&s, &with(card(), "key", &bad_key)), 400, refused.clone());
        let path = format!("/js/v1/bank?{}", form(&[("key", &bad_key), ("routing_number", "123456780")]));
        assert_json_error(&request(&s, "GET", &path, &[], ""), 400, refused);
        assert_eq!(count(db, "SELECT COUNT(*) FROM tokens"), 0, "nothing refused was stored");

        // At the bound, with a tab (which XML allows), the token is made and its values reach
        // the billing info exactly.
        let token =
            assert_token(&post(&s, &with(with(card(), "first_name", &longest), "address2", "Suite\t5")), "credit_card");
        create_account(&s, "bounded");
        let reply = use_token(&s, "bounded", &token);
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert!(reply.body.contains(&format!("<first_name>{longest}</first_name>")), "{}", reply.body);
        assert!(reply.body.contains("<address2>Suite\t5</address2>"), "{}", reply.body);
    });
}
