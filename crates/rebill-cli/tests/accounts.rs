//! Account endpoints over HTTP against `rebill serve`, on SQLite and on PostgreSQL: create (201,
//! `Location`, duplicates and racing duplicates 422 `taken`), get (404), partial update, close,
//! reopen, request decoding and validation per API version, nested billing info (all or nothing
//! with its account) and nested shipping addresses (on create only).

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

fn start_at(db: &str, now: i64) -> Server {
    start_with(db, Options { clock: Some(now), ..Options::default() })
}

fn post(s: &Server, version: &str, body: &str) -> Reply {
    authed(s, "POST", "/v2/accounts", &xml_at(version), body)
}

fn put(s: &Server, version: &str, path: &str, body: &str) -> Reply {
    authed(s, "PUT", path, &xml_at(version), body)
}

fn get(s: &Server, version: &str, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", version)], "")
}

/// The body's hosted login token (32 hexadecimal characters), and the body with it replaced by
/// `TOKEN` so that the rest can be compared exactly.
fn without_token(body: &str) -> (String, String) {
    let start = body.find("<hosted_login_token>").expect("a hosted_login_token") + "<hosted_login_token>".len();
    let end = start + body[start..].find('<').expect("end of the token");
    let token = body[start..end].to_owned();
    assert_eq!(token.len(), 32, "{token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    (token.clone(), body.replacen(&token, "TOKEN", 1))
}

/// Asserts that the body holds `element` (one whole element, exactly as written).
#[track_caller]
fn has(reply: &Reply, element: &str) {
    assert!(reply.body.contains(element), "expected {element} in\n{}", reply.body);
}

#[track_caller]
fn lacks(reply: &Reply, text: &str) {
    assert!(!reply.body.contains(text), "did not expect {text} in\n{}", reply.body);
}

const FULL: &str = "<account>\
<account_code>verena</account_code>\
<username>verena</username>\
<email>verena@example.com</email>\
<cc_emails>billing@example.com,finance@example.com</cc_emails>\
<first_name>Verena</first_name>\
<last_name>Example</last_name>\
<company_name>Example &amp; Sons</company_name>\
<vat_number></vat_number>\
<tax_exempt type=\"boolean\">true</tax_exempt>\
<entity_use_code>E</entity_use_code>\
<address><address1>123 Main St.</address1><address2>Suite 4</address2><city>San Francisco</city>\
<state>CA</state><zip>94105</zip><country>US</country><phone>+1-415-555-0100</phone></address>\
<accept_language>en-US</accept_language>\
<preferred_locale>en-US</preferred_locale>\
<has_paused_subscription>true</has_paused_subscription>\
</account>";

fn full_body(addr: &str) -> String {
    let base = format!("http://{addr}/v2/accounts/verena");
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<account href="{base}">
  <adjustments href="{base}/adjustments"/>
  <account_balance href="{base}/balance"/>
  <billing_info href="{base}/billing_info"/>
  <invoices href="{base}/invoices"/>
  <redemption href="{base}/redemption"/>
  <redemptions href="{base}/redemptions"/>
  <subscriptions href="{base}/subscriptions"/>
  <transactions href="{base}/transactions"/>
  <shipping_addresses href="{base}/shipping_addresses"/>
  <credit_payments href="{base}/credit_payments"/>
  <account_code>verena</account_code>
  <state>active</state>
  <username>verena</username>
  <email>verena@example.com</email>
  <cc_emails>billing@example.com,finance@example.com</cc_emails>
  <first_name>Verena</first_name>
  <last_name>Example</last_name>
  <company_name>Example &amp; Sons</company_name>
  <vat_number></vat_number>
  <tax_exempt type="boolean">true</tax_exempt>
  <entity_use_code>E</entity_use_code>
  <address>
    <address1>123 Main St.</address1>
    <address2>Suite 4</address2>
    <city>San Francisco</city>
    <state>CA</state>
    <zip>94105</zip>
    <country>US</country>
    <phone>+1-415-555-0100</phone>
  </address>
  <accept_language>en-US</accept_language>
  <preferred_locale>en-US</preferred_locale>
  <hosted_login_token>TOKEN</hosted_login_token>
  <vat_location_valid type="boolean" nil="nil"></vat_location_valid>
  <created_at type="datetime">2027-01-15T08:00:00Z</created_at>
  <updated_at type="datetime">2027-01-15T08:00:00Z</updated_at>
  <closed_at type="datetime" nil="nil"></closed_at>
  <has_live_subscription type="boolean">false</has_live_subscription>
  <has_active_subscription type="boolean">false</has_active_subscription>
  <has_future_subscription type="boolean">false</has_future_subscription>
  <has_canceled_subscription type="boolean">false</has_canceled_subscription>
  <has_paused_subscription type="boolean">false</has_paused_subscription>
  <has_past_due_invoice type="boolean">false</has_past_due_invoice>
</account>
"#
    )
}

fn lifecycle(s: &Server) {
    // Create at 2.11 with every request field: 201, Location, the whole document.
    let r = post(s, "2.11", FULL);
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.header("location").as_deref(), Some(format!("http://{}/v2/accounts/verena", s.addr).as_str()));
    assert_eq!(r.header("content-type").as_deref(), Some("application/xml; charset=utf-8"));
    let (token, body) = without_token(&r.body);
    assert_eq!(body.trim_end(), full_body(&s.addr).trim_end());

    // GET answers the same document; the token stays.
    let r = get(s, "2.11", "/v2/accounts/verena");
    assert_eq!(r.status, 200);
    assert_eq!(without_token(&r.body), (token.clone(), full_body(&s.addr)));

    // Older versions see less: no preferred_locale and has_paused_subscription below 2.11, no
    // credit_payments link below 2.10, no has_*_subscription flags below 2.5.
    let r = get(s, "2.10", "/v2/accounts/verena");
    has(&r, &format!("<credit_payments href=\"http://{}/v2/accounts/verena/credit_payments\"/>", s.addr));
    has(&r, "<has_live_subscription type=\"boolean\">false</has_live_subscription>");
    lacks(&r, "preferred_locale");
    lacks(&r, "has_paused_subscription");
    let r = get(s, "2.0", "/v2/accounts/verena");
    assert_eq!(r.status, 200);
    lacks(&r, "credit_payments");
    lacks(&r, "has_live_subscription");
    has(&r, "<has_past_due_invoice type=\"boolean\">false</has_past_due_invoice>");
    has(&r, "<first_name>Verena</first_name>");

    // The same code again: 422 taken; nothing changed.
    let r = post(s, "2.11", "<account><account_code>verena</account_code><first_name>Other</first_name></account>");
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(
        r.body,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<errors>\n  <error field=\"account.account_code\" symbol=\"taken\" lang=\"en-US\">has already been taken</error>\n</errors>\n"
    );
    has(&get(s, "2.11", "/v2/accounts/verena"), "<first_name>Verena</first_name>");

    // Unknown codes: 404 on every account endpoint.
    let r = get(s, "2.11", "/v2/accounts/abc");
    assert_error(&r, 404, "not_found");
    has(&r, "<description lang=\"en-US\">Couldn't find Account with account_code = abc</description>");
    assert_error(
        &put(s, "2.11", "/v2/accounts/abc", "<account><first_name>x</first_name></account>"),
        404,
        "not_found",
    );
    assert_error(&authed(s, "DELETE", "/v2/accounts/abc", &[], ""), 404, "not_found");
    assert_error(&authed(s, "PUT", "/v2/accounts/abc/reopen", &[], ""), 404, "not_found");

    // A partial update: only the elements sent change, updated_at moves.
    s.set_clock(T0 + 90);
    let r = put(
        s,
        "2.11",
        "/v2/accounts/verena",
        "<account><last_name>Updated</last_name><tax_exempt>false</tax_exempt><address><city>Oakland</city></address>\
         <preferred_locale>fr-FR</preferred_locale></account>",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    for element in [
        "<first_name>Verena</first_name>",
        "<last_name>Updated</last_name>",
        "<email>verena@example.com</email>",
        "<tax_exempt type=\"boolean\">false</tax_exempt>",
        "<address1>123 Main St.</address1>",
        "<city>Oakland</city>",
        "<zip>94105</zip>",
        "<preferred_locale>fr-FR</preferred_locale>",
        "<created_at type=\"datetime\">2027-01-15T08:00:00Z</created_at>",
        "<updated_at type=\"datetime\">2027-01-15T08:01:30Z</updated_at>",
        "<state>active</state>",
    ] {
        has(&r, element);
    }
    assert_eq!(without_token(&r.body).0, token);
    assert_eq!(get(s, "2.11", "/v2/accounts/verena").body, r.body);

    // account_code may be repeated but not changed.
    let r = put(s, "2.11", "/v2/accounts/verena", "<account><account_code>verena</account_code></account>");
    assert_eq!(r.status, 200, "{}", r.body);
    let r = put(s, "2.11", "/v2/accounts/verena", "<account><account_code>other</account_code></account>");
    assert_eq!(r.status, 422, "{}", r.body);
    has(&r, "<error field=\"account.account_code\" symbol=\"invalid\" lang=\"en-US\">can't be changed</error>");
    assert_error(&get(s, "2.11", "/v2/accounts/other"), 404, "not_found");

    // Close: 204 without a body, then state closed with closed_at; closing again changes nothing.
    s.set_clock(T0 + 120);
    let r = authed(s, "DELETE", "/v2/accounts/verena", &[("X-Api-Version", "2.11")], "");
    assert_eq!((r.status, r.body.as_str()), (204, ""));
    let r = get(s, "2.11", "/v2/accounts/verena");
    has(&r, "<state>closed</state>");
    has(&r, "<closed_at type=\"datetime\">2027-01-15T08:02:00Z</closed_at>");
    has(&r, "<updated_at type=\"datetime\">2027-01-15T08:02:00Z</updated_at>");
    s.set_clock(T0 + 180);
    let r = authed(s, "DELETE", "/v2/accounts/verena", &[("X-Api-Version", "2.11")], "");
    assert_eq!((r.status, r.body.as_str()), (204, ""));
    has(&get(s, "2.11", "/v2/accounts/verena"), "<closed_at type=\"datetime\">2027-01-15T08:02:00Z</closed_at>");

    // A closed account can still be updated.
    let r = put(s, "2.11", "/v2/accounts/verena", "<account><company_name>Closed Co</company_name></account>");
    assert_eq!(r.status, 200, "{}", r.body);
    has(&r, "<state>closed</state>");
    has(&r, "<company_name>Closed Co</company_name>");

    // Reopen (an empty PUT): 200 with the active account; reopening again changes nothing.
    s.set_clock(T0 + 240);
    let r = authed(s, "PUT", "/v2/accounts/verena/reopen", &[("X-Api-Version", "2.11")], "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type").as_deref(), Some("application/xml; charset=utf-8"));
    has(&r, &format!("<account href=\"http://{}/v2/accounts/verena\">", s.addr));
    has(&r, "<state>active</state>");
    has(&r, "<closed_at type=\"datetime\" nil=\"nil\"></closed_at>");
    has(&r, "<updated_at type=\"datetime\">2027-01-15T08:04:00Z</updated_at>");
    s.set_clock(T0 + 300);
    let again = authed(s, "PUT", "/v2/accounts/verena/reopen", &[("X-Api-Version", "2.11")], "");
    assert_eq!((again.status, again.body), (200, r.body));
}

fn requests(s: &Server) {
    // Codes with reserved characters are escaped in hrefs and Location and found again.
    let r = post(s, "2.0", "<account><account_code>a+b@c.d</account_code></account>");
    assert_eq!(r.status, 201, "{}", r.body);
    let location = format!("http://{}/v2/accounts/a%2Bb%40c.d", s.addr);
    assert_eq!(r.header("location").as_deref(), Some(location.as_str()));
    has(&r, &format!("<account href=\"{location}\">"));
    // The balance exists from 2.3: an account read at 2.0 does not link to it, one at 2.11 does.
    assert!(!r.body.contains("<account_balance"), "{}", r.body);
    has(&get(s, "2.11", "/v2/accounts/a%2Bb%40c.d"), &format!("<account_balance href=\"{location}/balance\"/>"));
    has(&r, "<account_code>a+b@c.d</account_code>");
    has(&get(s, "2.0", "/v2/accounts/a%2Bb%40c.d"), "<account_code>a+b@c.d</account_code>");
    has(&get(s, "2.0", "/v2/accounts/a+b@c.d"), "<account_code>a+b@c.d</account_code>");
    // The minimal account: every unset field nil, the address present with nil parts.
    has(&r, "<email nil=\"nil\"></email>");
    has(&r, "<tax_exempt type=\"boolean\">false</tax_exempt>");
    has(&r, "<address>\n    <address1 nil=\"nil\"></address1>");

    // Empty and foreign bodies: 400 invalid_xml; nothing is created.
    let r = authed(s, "POST", "/v2/accounts", &[("X-Api-Version", "2.11")], "");
    assert_error(&r, 400, "invalid_xml");
    has(&r, "<details>the document has no root element</details>");
    assert_error(&post(s, "2.11", "<plan><plan_code>x</plan_code></plan>"), 400, "invalid_xml");
    assert_error(&post(s, "2.11", "<account><account_code>x</account_code>"), 400, "invalid_xml");
    let r = post(s, "2.11", "<account><account_code>x</account_code><nickname>x</nickname></account>");
    assert_error(&r, 400, "invalid_xml");
    has(&r, "<details>Unacceptable tags &lt;nickname&gt; at account.nickname</details>");
    assert_error(&get(s, "2.11", "/v2/accounts/x"), 404, "not_found");

    // Validation: 422 documents naming the field.
    let errors = |r: &Reply, field: &str, symbol: &str| {
        assert_eq!(r.status, 422, "{}", r.body);
        assert_eq!(r.header("content-type").as_deref(), Some("application/xml; charset=utf-8"));
        has(r, &format!("<error field=\"{field}\" symbol=\"{symbol}\" lang=\"en-US\">"));
    };
    errors(&post(s, "2.11", "<account><first_name>x</first_name></account>"), "account.account_code", "blank");
    errors(&post(s, "2.11", "<account><account_code></account_code></account>"), "account.account_code", "blank");
    errors(&post(s, "2.11", "<account><account_code>  </account_code></account>"), "account.account_code", "blank");
    errors(&post(s, "2.11", "<account><account_code nil=\"nil\"/></account>"), "account.account_code", "blank");
    let r = post(s, "2.11", "<account><account_code>v1</account_code><email>not-an-email</email></account>");
    errors(&r, "account.email", "invalid_email");
    has(&r, ">is not a valid email address</error>");
    errors(
        &post(s, "2.11", "<account><account_code>v1</account_code><state>closed</state></account>"),
        "account.state",
        "invalid",
    );
    errors(
        &post(s, "2.11", "<account><account_code>v1</account_code><tax_exempt>maybe</tax_exempt></account>"),
        "account.tax_exempt",
        "invalid",
    );
    // Country codes are checked from 2.8.
    let bad_country = "<account><account_code>v2</account_code><address><country>XX</country></address></account>";
    errors(&post(s, "2.8", bad_country), "account.address.country", "invalid");
    assert_error(&get(s, "2.8", "/v2/accounts/v2"), 404, "not_found");
    let r = post(s, "2.7", bad_country);
    assert_eq!(r.status, 201, "{}", r.body);
    has(&r, "<country>XX</country>");
    errors(
        &put(s, "2.8", "/v2/accounts/v2", "<account><address><country>ZZ</country></address></account>"),
        "account.address.country",
        "invalid",
    );
    // preferred_locale exists from 2.11, in requests and in responses.
    let locale = "<account><account_code>v3</account_code><preferred_locale>fr-FR</preferred_locale></account>";
    errors(&post(s, "2.10", locale), "account.preferred_locale", "invalid");
    assert_eq!(post(s, "2.11", locale).status, 201);
    lacks(&get(s, "2.10", "/v2/accounts/v3"), "preferred_locale");
    has(&get(s, "2.11", "/v2/accounts/v3"), "<preferred_locale>fr-FR</preferred_locale>");
    // has_paused_subscription is accepted from 2.11 and ignored (it is derived).
    let paused =
        "<account><account_code>v4</account_code><has_paused_subscription>true</has_paused_subscription></account>";
    errors(&post(s, "2.10", paused), "account.has_paused_subscription", "invalid");
    let r = post(s, "2.11", paused);
    assert_eq!(r.status, 201, "{}", r.body);
    has(&r, "<has_paused_subscription type=\"boolean\">false</has_paused_subscription>");

    // Nested shipping addresses are created with the account, all or nothing
    // (docs/shipping-addresses.md).
    let address = |first: &str| {
        format!(
            "<shipping_address><first_name>{first}</first_name><last_name>Doe</last_name>\
             <address1>1 Main St.</address1><city>Lyon</city><state>ARA</state><zip>69001</zip>\
             <country>FR</country></shipping_address>"
        )
    };
    let r = post(
        s,
        "2.10",
        &format!(
            "<account><account_code>n0</account_code><shipping_addresses>{}{}</shipping_addresses></account>",
            address("Ann"),
            address("Bob")
        ),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let list = get(s, "2.10", "/v2/accounts/n0/shipping_addresses");
    assert_eq!(list.header("X-Records").as_deref(), Some("2"), "{}", list.body);
    has(&list, "<nickname>Ann Doe</nickname>");
    has(&list, "<nickname>Bob Doe</nickname>");
    // One refused address refuses the account: nothing is stored.
    let incomplete = "<shipping_address><first_name>x</first_name></shipping_address>";
    let r = post(
        s,
        "2.11",
        &format!(
            "<account><account_code>n1</account_code><shipping_addresses>{}{incomplete}</shipping_addresses></account>",
            address("Ann")
        ),
    );
    errors(&r, "account.shipping_addresses[1].last_name", "blank");
    assert_error(&get(s, "2.11", "/v2/accounts/n1"), 404, "not_found");
    // The country is checked from 2.8.
    let zz = address("Zed").replace("<country>FR</country>", "<country>ZZ</country>");
    let r = post(
        s,
        "2.8",
        &format!("<account><account_code>n1</account_code><shipping_addresses>{zz}</shipping_addresses></account>"),
    );
    errors(&r, "account.shipping_addresses[0].country", "invalid");
    assert_eq!(
        post(
            s,
            "2.7",
            &format!("<account><account_code>n1</account_code><shipping_addresses>{zz}</shipping_addresses></account>")
        )
        .status,
        201
    );
    // A bare <shipping_address> belongs to purchases (2.11); before 2.11 it is unknown.
    let bare = format!("<account><account_code>n3</account_code>{}</account>", address("Ann"));
    errors(&post(s, "2.11", &bare), "account.shipping_address", "not_supported");
    errors(&post(s, "2.10", &bare), "account.shipping_address", "invalid");
    assert_error(&get(s, "2.11", "/v2/accounts/n3"), 404, "not_found");
    // On update, nested addresses are refused whole (400 invalid_xml) and nothing changes.
    for element in [format!("<shipping_addresses>{}</shipping_addresses>", address("Cy")), address("Cy")] {
        let r =
            put(s, "2.11", "/v2/accounts/v4", &format!("<account><first_name>changed</first_name>{element}</account>"));
        assert_error(&r, 400, "invalid_xml");
        has(&r, "You can only nest shipping_addresses in your XML when creating a new record, not when updating.");
        has(&get(s, "2.11", "/v2/accounts/v4"), "<first_name nil=\"nil\"></first_name>");
    }
    let list = get(s, "2.11", "/v2/accounts/v4/shipping_addresses");
    assert_eq!(list.header("X-Records").as_deref(), Some("0"), "{}", list.body);
    // An empty list of shipping addresses asks for nothing.
    let r =
        post(s, "2.11", "<account><account_code>n2</account_code><shipping_addresses></shipping_addresses></account>");
    assert_eq!(r.status, 201, "{}", r.body);

    // A read-only key may read accounts but not write them.
    let created = s.cli_json(&["keys", "create", "--site", "sandbox", "--read-only"]);
    let ro = created["private_key"].as_str().expect("key").to_owned();
    let r = authed_with(s, &ro, "GET", "/v2/accounts/v4", &[], "");
    assert_eq!(r.status, 200, "{}", r.body);
    let r = authed_with(s, &ro, "DELETE", "/v2/accounts/v4", &[], "");
    assert_error(&r, 403, "forbidden");
}

/// Creates racing for one code: exactly one 201, every other one 422 `taken`.
fn racing_creates(s: &Server) {
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let addr = s.addr.clone();
            let key = s.key.clone();
            std::thread::spawn(move || {
                let auth = format!("Basic {}", basic(&key));
                let body = format!("<account><account_code>race</account_code><first_name>n{i}</first_name></account>");
                let request = format!(
                    "POST /v2/accounts HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: {auth}\r\n\
                     Accept: application/xml\r\nContent-Type: application/xml; charset=utf-8\r\n\
                     Content-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                raw(&addr, &request)
            })
        })
        .collect();
    let replies: Vec<Reply> = threads.into_iter().map(|t| t.join().expect("thread")).collect();
    let created = replies.iter().filter(|r| r.status == 201).count();
    let taken = replies
        .iter()
        .filter(|r| {
            r.status == 422
                && r.body.contains(
                    "<error field=\"account.account_code\" symbol=\"taken\" lang=\"en-US\">has already been taken</error>",
                )
        })
        .count();
    assert_eq!((created, taken), (1, 7), "{replies:#?}");
    let list = authed(s, "GET", "/v2/accounts", &[("X-Api-Version", "2.11")], "");
    assert_eq!(list.header("x-records").as_deref(), Some("1"));
}

#[test]
fn account_lifecycle() {
    on_both_backends("accounts_lifecycle", |db| lifecycle(&start_at(db, T0)));
}

#[test]
fn account_requests_are_decoded_and_validated() {
    on_both_backends("accounts_requests", |db| requests(&start_at(db, T0)));
}

#[test]
fn racing_creates_of_one_code_make_one_account() {
    on_both_backends("accounts_race", |db| racing_creates(&start_at(db, T0)));
}

fn with_token(code: &str, extra: &str, token: &str) -> String {
    format!(
        "<account><account_code>{code}</account_code>{extra}\
         <billing_info><token_id>{token}</token_id></billing_info></account>"
    )
}

/// Transactions of the account, as (action, status) pairs, oldest first.
fn transactions(s: &Server, code: &str) -> Vec<(String, String)> {
    let r = get(s, "2.11", &format!("/v2/accounts/{code}/transactions?order=asc"));
    assert_eq!(r.status, 200, "{}", r.body);
    let mut out = Vec::new();
    for part in r.body.split("<transaction ").skip(1) {
        let value = |name: &str| {
            let open = format!("<{name}>");
            let start = part.find(&open).map(|i| i + open.len()).unwrap_or_else(|| panic!("no {name} in {part}"));
            part[start..start + part[start..].find('<').expect("end")].to_owned()
        };
        out.push((value("action"), value("status")));
    }
    out
}

fn nested_billing_info(s: &Server) {
    // Create with a token: the account and its verified billing info.
    let token = card_token(s, "4111111111111111");
    let r = post(s, "2.11", &with_token("nb1", "<first_name>Nina</first_name>", &token));
    assert_eq!(r.status, 201, "{}", r.body);
    has(&r, "<first_name>Nina</first_name>");
    let info = get(s, "2.11", "/v2/accounts/nb1/billing_info");
    assert_eq!(info.status, 200, "{}", info.body);
    has(&info, "<first_six>411111</first_six>");
    has(&info, "<last_four>1111</last_four>");
    has(&info, "<card_type>Visa</card_type>");
    assert_eq!(transactions(s, "nb1"), [("verify".to_owned(), "success".to_owned())]);
    // The token worked once.
    let r = post(s, "2.11", &with_token("nb2", "", &token));
    assert_error(&r, 422, "token_invalid");
    assert_error(&get(s, "2.11", "/v2/accounts/nb2"), 404, "not_found");

    // Refusals found before anything is written store nothing: an unknown token, card fields
    // that fail their checks, token_id together with other elements.
    assert_error(&post(s, "2.11", &with_token("nb2", "", "no-such-token")), 422, "token_invalid");
    assert_error(&get(s, "2.11", "/v2/accounts/nb2"), 404, "not_found");
    let bad_card = "<account><account_code>nb2</account_code><billing_info><first_name>N</first_name>\
        <last_name>B</last_name><number>4222222222222222</number><month>12</month><year>2031</year>\
        <verification_value>123</verification_value></billing_info></account>";
    let r = post(s, "2.11", bad_card);
    assert_eq!(r.status, 422, "{}", r.body);
    has(&r, "field=\"billing_info.number\"");
    assert_error(&get(s, "2.11", "/v2/accounts/nb2"), 404, "not_found");
    let mixed = "<account><account_code>nb2</account_code><billing_info><token_id>t</token_id>\
        <first_name>N</first_name></billing_info></account>";
    let r = post(s, "2.11", mixed);
    assert_eq!(r.status, 422, "{}", r.body);
    has(&r, "field=\"account.billing_info.first_name\" symbol=\"invalid\"");
    assert_error(&get(s, "2.11", "/v2/accounts/nb2"), 404, "not_found");

    // A declined verification answers the transaction error and removes the new account; the
    // same create then works with another card.
    let r = post(s, "2.11", &with_token("nb2", "<email>nb2@example.com</email>", &card_token(s, "4000000000000002")));
    assert_eq!(r.status, 422, "{}", r.body);
    has(&r, "<transaction_error>");
    has(&r, "<error_code>declined</error_code>");
    has(&r, "<action>verify</action>");
    assert_error(&get(s, "2.11", "/v2/accounts/nb2"), 404, "not_found");
    let r = post(s, "2.11", &with_token("nb2", "<email>nb2@example.com</email>", &card_token(s, "5555555555554444")));
    assert_eq!(r.status, 201, "{}", r.body);
    has(&get(s, "2.11", "/v2/accounts/nb2/billing_info"), "<last_four>4444</last_four>");
    assert_eq!(transactions(s, "nb2"), [("verify".to_owned(), "success".to_owned())]);

    // declined_saveable keeps the card, so it keeps the new account too, and still answers 422.
    let r = post(s, "2.11", &with_token("nb3", "", &card_token(s, "4000000000000341")));
    assert_eq!(r.status, 422, "{}", r.body);
    has(&r, "<error_code>declined_saveable</error_code>");
    assert_eq!(get(s, "2.11", "/v2/accounts/nb3").status, 200);
    has(&get(s, "2.11", "/v2/accounts/nb3/billing_info"), "<last_four>0341</last_four>");
    assert_eq!(transactions(s, "nb3"), [("verify".to_owned(), "declined".to_owned())]);

    // Update: the billing info is replaced and the account's fields change together with it…
    let body = with_token("nb1", "<first_name>Nora</first_name>", &card_token(s, "6011000990139424"));
    let r = put(s, "2.11", "/v2/accounts/nb1", &body);
    assert_eq!(r.status, 200, "{}", r.body);
    has(&r, "<first_name>Nora</first_name>");
    has(&get(s, "2.11", "/v2/accounts/nb1/billing_info"), "<card_type>Discover</card_type>");
    // …and neither changes when the new card is declined or the token is refused.
    let body = with_token("nb1", "<first_name>Nils</first_name>", &card_token(s, "4000000000000077"));
    let r = put(s, "2.11", "/v2/accounts/nb1", &body);
    assert_eq!(r.status, 422, "{}", r.body);
    has(&r, "<error_code>insufficient_funds</error_code>");
    let r = put(s, "2.11", "/v2/accounts/nb1", &with_token("nb1", "<first_name>Nils</first_name>", "gone"));
    assert_error(&r, 422, "token_invalid");
    has(&get(s, "2.11", "/v2/accounts/nb1"), "<first_name>Nora</first_name>");
    has(&get(s, "2.11", "/v2/accounts/nb1/billing_info"), "<last_four>9424</last_four>");
    let actions: Vec<String> = transactions(s, "nb1").into_iter().map(|(a, st)| format!("{a} {st}")).collect();
    assert_eq!(actions, ["verify success", "verify success", "verify declined"]);
}

#[test]
fn nested_billing_info_is_all_or_nothing_with_its_account() {
    on_both_backends("accounts_nested_billing", |db| nested_billing_info(&start_at(db, T0)));
}
