//! The request boundary over HTTP against `rebill serve`, on SQLite and on PostgreSQL: characters
//! XML forbids (raw, as references, in attributes, in path parameters and query values) are
//! refused before anything is stored; every request string is bounded (codes 50 characters of a
//! path-safe set, free text 255, notes 4,000) with its exact 422 document at the boundary;
//! accepted codes are percent-encoded in `Location` and hrefs; a successful transaction carries
//! no `transaction_error` (nor `fraud`/`fraud_info`); single-error descriptions carry
//! `lang="en-US"`.

use rebill_testkit::*;

const DECL: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";

fn post(s: &Server, path: &str, body: &str) -> Reply {
    authed(s, "POST", path, &xml_at("2.11"), body)
}

fn get(s: &Server, version: &str, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", version)], "")
}

/// The exact 400 `invalid_xml` document with these details.
fn invalid_xml(details: &str) -> String {
    format!(
        "{DECL}<error>\n  <symbol>invalid_xml</symbol>\n  <description lang=\"en-US\">The provided XML was invalid.</description>\n  <details>{details}</details>\n</error>\n"
    )
}

/// The exact 422 document of one field error.
fn field_error(field: &str, symbol: &str, message: &str) -> String {
    format!(
        "{DECL}<errors>\n  <error field=\"{field}\" symbol=\"{symbol}\" lang=\"en-US\">{message}</error>\n</errors>\n"
    )
}

/// The exact single-error document (no details: the element is left out).
fn single_error(symbol: &str, description: &str) -> String {
    format!(
        "{DECL}<error>\n  <symbol>{symbol}</symbol>\n  <description lang=\"en-US\">{description}</description>\n</error>\n"
    )
}

#[track_caller]
fn exactly(reply: &Reply, status: u16, body: &str) {
    assert_eq!((reply.status, reply.body.as_str()), (status, body), "{}", reply.head);
    assert_eq!(reply.header("content-type").as_deref(), Some("application/xml; charset=utf-8"));
}

/// The account codes the service lists (first page, 200 per page).
fn listed_codes(s: &Server) -> Vec<String> {
    let r = get(s, "2.11", "/v2/accounts?per_page=200");
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
        .split("<account_code>")
        .skip(1)
        .filter_map(|rest| rest.split_once("</account_code>").map(|(code, _)| code.to_owned()))
        .collect()
}

const FORBIDDEN: [char; 9] = ['\u{0}', '\u{1}', '\u{8}', '\u{B}', '\u{C}', '\u{E}', '\u{1F}', '\u{FFFE}', '\u{FFFF}'];

fn forbidden_characters(db: &str) {
    let s = start(db);
    for c in FORBIDDEN {
        let code = u32::from(c);
        // Raw, in an element's text.
        let r = post(
            &s,
            "/v2/accounts",
            &format!("<account><account_code>f1</account_code><first_name>a{c}b</first_name></account>"),
        );
        exactly(
            &r,
            400,
            &invalid_xml(&format!("character U+{code:04X} is not allowed in XML at `account.first_name`")),
        );
        // As decimal and hexadecimal references, nested deeper.
        for reference in [format!("&#{code};"), format!("&#x{code:X};")] {
            let body = format!(
                "<account><account_code>f1</account_code><address><city>x{reference}</city></address></account>"
            );
            let r = post(&s, "/v2/accounts", &body);
            let shown = reference.replace('&', "&amp;");
            exactly(&r, 400, &invalid_xml(&format!("invalid character reference `{shown}` at `account.address.city`")));
        }
        // In the code itself, and in an attribute value.
        let r = post(&s, "/v2/accounts", &format!("<account><account_code>f{c}1</account_code></account>"));
        exactly(
            &r,
            400,
            &invalid_xml(&format!("character U+{code:04X} is not allowed in XML at `account.account_code`")),
        );
        let r = post(
            &s,
            "/v2/accounts",
            &format!(
                "<account><account_code>f1</account_code><tax_exempt type=\"boolean{c}\">true</tax_exempt></account>"
            ),
        );
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.body.contains("<symbol>invalid_xml</symbol>"), "{}", r.body);
        // Anywhere else in the document (a comment): refused as well.
        let r = post(&s, "/v2/accounts", &format!("<account><!-- {c} --><account_code>f1</account_code></account>"));
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.body.contains("<symbol>invalid_xml</symbol>"), "{}", r.body);
    }
    // Nothing of it was stored.
    assert_eq!(listed_codes(&s), Vec::<String>::new());
    exactly(
        &get(&s, "2.11", "/v2/accounts/f1"),
        404,
        &single_error("not_found", "Couldn't find Account with account_code = f1"),
    );

    // Path parameters: a 404 before any store is asked (PostgreSQL refuses a NUL outright).
    for path in ["/v2/accounts/%00x", "/v2/accounts/a%01", "/v2/plans/%EF%BF%BF", "/v2/accounts/%00x/billing_info"] {
        exactly(&get(&s, "2.11", path), 404, &single_error("not_found", &format!("Couldn't find anything at {path}.")));
    }
    let r = authed(&s, "PUT", "/v2/accounts/%00x", &xml_at("2.11"), "<account><first_name>x</first_name></account>");
    exactly(&r, 404, &single_error("not_found", "Couldn't find anything at /v2/accounts/%00x."));
    // Query values: a 400 naming the parameter.
    for query in ["state=%00", "cursor=%1F", "begin_time=2024%EF%BF%BE"] {
        let name = query.split('=').next().unwrap_or_default();
        exactly(
            &get(&s, "2.11", &format!("/v2/accounts?{query}")),
            400,
            &single_error(
                "invalid_parameter",
                &format!("The query parameter `{name}` holds a character that is not allowed (a control character)."),
            ),
        );
    }
    // The allowed neighbours pass: tab and line breaks, U+FFFD.
    let r = post(
        &s,
        "/v2/accounts",
        "<account><account_code>ok1</account_code><first_name>a&#9;b&#10;c\u{FFFD}</first_name></account>",
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body.contains("<first_name>a\tb\nc\u{FFFD}</first_name>"), "{}", r.body);
}

#[test]
fn characters_xml_forbids_are_refused_on_both_backends() {
    on_both_backends("boundary_chars", forbidden_characters);
}

const TOO_LONG_50: &str = "is too long (maximum is 50 characters)";
const TOO_LONG_255: &str = "is too long (maximum is 255 characters)";
const BAD_CODE: &str = "is invalid (use only letters, digits and -_.+@, without ..)";

fn lengths_and_codes(db: &str) {
    let s = start(db);
    let account = |code: &str| format!("<account><account_code>{code}</account_code></account>");

    // Codes: 50 characters accepted, 51 refused, a million refused (just under the body limit).
    let longest = "c".repeat(50);
    let r = post(&s, "/v2/accounts", &account(&longest));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.header("location"), Some(format!("http://{}/v2/accounts/{longest}", s.addr)));
    for n in [51, 1_000_000] {
        let r = post(&s, "/v2/accounts", &account(&"c".repeat(n)));
        exactly(&r, 422, &field_error("account.account_code", "too_long", TOO_LONG_50));
    }
    for bad in ["a/b", "..", ".", "a..b", "a b", "a%2Fb", "a?b", "ü"] {
        let r = post(&s, "/v2/accounts", &account(bad));
        exactly(&r, 422, &field_error("account.account_code", "invalid", BAD_CODE));
    }
    // The same rules on a nested account and on plan codes.
    let r = post(
        &s,
        "/v2/transactions",
        "<transaction><amount_in_cents>100</amount_in_cents><currency>USD</currency>\
         <account><account_code>../x</account_code></account></transaction>",
    );
    exactly(&r, 422, &field_error("transaction.account.account_code", "invalid", BAD_CODE));
    let r = post(
        &s,
        "/v2/plans",
        &format!(
            "<plan><plan_code>{}</plan_code><name>P</name><unit_amount_in_cents><USD>100</USD></unit_amount_in_cents></plan>",
            "p".repeat(51)
        ),
    );
    exactly(&r, 422, &field_error("plan.plan_code", "too_long", TOO_LONG_50));

    // Real merchant codes pass; the ones that need escapes are percent-encoded in Location and
    // every href, and found again through either spelling.
    for code in ["a1", "gold-plan", "abc_123", "user@example.com"] {
        let r = post(&s, "/v2/accounts", &account(code));
        assert_eq!(r.status, 201, "{code}: {}", r.body);
    }
    let r = post(&s, "/v2/accounts", &account("user+tag@example.com"));
    assert_eq!(r.status, 201, "{}", r.body);
    let location = format!("http://{}/v2/accounts/user%2Btag%40example.com", s.addr);
    assert_eq!(r.header("location").as_deref(), Some(location.as_str()));
    assert!(r.body.contains(&format!("<account href=\"{location}\">")), "{}", r.body);
    assert!(r.body.contains(&format!("<billing_info href=\"{location}/billing_info\"/>")), "{}", r.body);
    let listed = get(&s, "2.11", "/v2/accounts?per_page=200");
    assert!(listed.body.contains(&format!("<account href=\"{location}\">")), "{}", listed.body);
    for path in ["/v2/accounts/user%2Btag%40example.com", "/v2/accounts/user+tag@example.com"] {
        let r = get(&s, "2.11", path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert!(r.body.contains("<account_code>user+tag@example.com</account_code>"), "{}", r.body);
    }

    // Free text: 255 characters accepted (counted as characters, not bytes), 256 refused, and
    // a first name of a million characters too.
    let named = |code: &str, name: &str| {
        format!("<account><account_code>{code}</account_code><first_name>{name}</first_name></account>")
    };
    let r = post(&s, "/v2/accounts", &named("n1", &"ü".repeat(255)));
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body.contains(&format!("<first_name>{}</first_name>", "ü".repeat(255))), "{}", r.body);
    for n in [256, 1_000_000] {
        let r = post(&s, "/v2/accounts", &named("n2", &"n".repeat(n)));
        exactly(&r, 422, &field_error("account.first_name", "too_long", TOO_LONG_255));
    }
    let r = authed(
        &s,
        "PUT",
        "/v2/accounts/n1",
        &xml_at("2.11"),
        &format!("<account><last_name>{}</last_name></account>", "l".repeat(256)),
    );
    exactly(&r, 422, &field_error("account.last_name", "too_long", TOO_LONG_255));
    // A body over the service's limit is refused before it is read (1 MiB).
    let r = post(&s, "/v2/accounts", &named("n3", &"n".repeat(1 << 20)));
    assert_eq!(r.status, 413, "{}", r.body);

    // Nothing refused was stored.
    let mut codes = listed_codes(&s);
    codes.sort();
    let mut expected: Vec<String> =
        ["a1", "abc_123", "gold-plan", "n1", "user+tag@example.com", "user@example.com", longest.as_str()]
            .iter()
            .map(|c| (*c).to_owned())
            .collect();
    expected.sort();
    assert_eq!(codes, expected);
}

#[test]
fn request_strings_are_bounded_on_both_backends() {
    on_both_backends("boundary_lengths", lengths_and_codes);
}

fn error_shapes(db: &str) {
    let s = start(db);
    // A successful transaction: no transaction_error (clients read its mere presence as a
    // decline), no fraud element without a screening; at every version.
    let token = card_token(&s, "4111111111111111");
    let body = format!(
        "<transaction><amount_in_cents>1500</amount_in_cents><currency>USD</currency>\
         <account><account_code>t1</account_code><billing_info><token_id>{token}</token_id></billing_info></account>\
         </transaction>"
    );
    let r = post(&s, "/v2/transactions", &body);
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body.contains("<status>success</status>"), "{}", r.body);
    let uuid = field(&r.body, "uuid");
    for version in ["2.0", "2.9", "2.10", "2.11"] {
        for reply in [get(&s, version, &format!("/v2/transactions/{uuid}")), get(&s, version, "/v2/transactions")] {
            assert_eq!(reply.status, 200, "{}", reply.body);
            assert!(reply.body.contains(&format!("<uuid>{uuid}</uuid>")), "{}", reply.body);
            for absent in ["<transaction_error", "<fraud"] {
                assert!(!reply.body.contains(absent), "{version}: {absent} in\n{}", reply.body);
            }
        }
    }
    assert!(!r.body.contains("<transaction_error"), "{}", r.body);

    // A declined one keeps its transaction_error, inside the transaction too.
    let declined = card_token(&s, "4000000000000002");
    let body = body.replace(&token, &declined).replace("<account_code>t1<", "<account_code>t2<");
    let r = post(&s, "/v2/transactions", &body);
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body.matches("<transaction_error>").count(), 2, "{}", r.body);

    // Single-error documents: description lang="en-US".
    exactly(
        &get(&s, "2.11", "/v2/accounts/nobody"),
        404,
        &single_error("not_found", "Couldn't find Account with account_code = nobody"),
    );
    exactly(
        &get(&s, "2.11", "/v2/nothing/here"),
        404,
        &single_error("not_found", "Couldn't find anything at /v2/nothing/here."),
    );
}

#[test]
fn error_shaped_elements_follow_the_fixtures_on_both_backends() {
    on_both_backends("boundary_errors", error_shapes);
}
