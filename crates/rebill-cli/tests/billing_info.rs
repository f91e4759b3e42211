//! Billing info over HTTP against `rebill serve`, on SQLite and on PostgreSQL: get, update with a
//! token or with card or bank fields (checked, then verified through the sandbox gateway), the
//! 422 transaction error document of declining cards and accounts, delete, 404s, and that no
//! card number, CVV or bank account number reaches the database files or the service's log.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rebill_testkit::*;
use serde_json::Value;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "rebill-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    dir
}

/// A server on `db` with the clock at T0 and its own vault key file.
fn serve(db: &str) -> Server {
    let key_file = temp_dir("vault").join("vault.key").display().to_string();
    start_with(db, Options { clock: Some(T0), args: &["--vault-key-file", &key_file], ..Options::default() })
}

/// Where requests go: a server of the shared helpers or one started here.
struct Target {
    addr: String,
    key: String,
    public_key: String,
}

impl Target {
    fn of(s: &Server) -> Target {
        Target { addr: s.addr.clone(), key: s.key.clone(), public_key: s.public_key.clone() }
    }
}

/// A request with the given headers (Host, `Connection: close` and Content-Length added).
fn send(t: &Target, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", t.addr);
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    raw(&t.addr, &req)
}

/// A request with the private key and `Accept: application/xml`, plus `extra` headers.
fn api(t: &Target, method: &str, path: &str, extra: &[(&str, &str)], body: &str) -> Reply {
    let auth = format!("Basic {}", basic(&t.key));
    let mut headers = vec![("Authorization", auth.as_str()), ("Accept", "application/xml")];
    headers.extend_from_slice(extra);
    send(t, method, path, &headers, body)
}

fn path(code: &str) -> String {
    format!("/v2/accounts/{code}/billing_info")
}

fn put(s: &Target, version: &str, code: &str, body: &str) -> Reply {
    api(s, "PUT", &path(code), &xml_at(version), body)
}

fn get(s: &Target, code: &str) -> Reply {
    api(s, "GET", &path(code), &[("X-Api-Version", "2.11")], "")
}

fn delete(s: &Target, code: &str) -> Reply {
    api(s, "DELETE", &path(code), &[], "")
}

fn create_account(s: &Target, code: &str) {
    let body = format!(
        "<account><account_code>{code}</account_code><email>{code}@example.com</email>\
         <first_name>Ada</first_name><last_name>Lovelace</last_name><company_name>Engines</company_name></account>"
    );
    let reply = api(s, "POST", "/v2/accounts", &xml_at("2.11"), &body);
    assert_eq!(reply.status, 201, "{}", reply.body);
}

/// A card billing info document (number, CVV, expiry 12/2030, names and address).
fn card(number: &str, cvv: &str) -> String {
    format!(
        "<billing_info><first_name>Verena</first_name><last_name>Example</last_name>\
         <address1>123 Main St.</address1><city>San Francisco</city><state>CA</state><zip>94105</zip>\
         <country>US</country><number>{number}</number><verification_value>{cvv}</verification_value>\
         <month type=\"integer\">12</month><year type=\"integer\">2030</year></billing_info>"
    )
}

fn bank(account_number: &str) -> String {
    format!(
        "<billing_info><name_on_account>Verena Example</name_on_account><account_type>savings</account_type>\
         <routing_number>123456780</routing_number><account_number>{account_number}</account_number>\
         <country>US</country></billing_info>"
    )
}

/// Makes a token through the token endpoint.
fn token(s: &Target, pairs: &[(&str, &str)]) -> String {
    let mut body = format!("key={}", s.public_key);
    for (k, v) in pairs {
        body.push_str(&format!("&{k}={}", v.replace(' ', "+")));
    }
    let reply = send(s, "POST", "/js/v1/token", &[("Content-Type", "application/x-www-form-urlencoded")], &body);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let value: Value = serde_json::from_str(&reply.body).expect("json");
    value["id"].as_str().expect("id").to_owned()
}

fn card_token(s: &Target, number: &str) -> String {
    token(
        s,
        &[
            ("number", number),
            ("month", "11"),
            ("year", "2029"),
            ("cvv", "321"),
            ("first_name", "Grace"),
            ("last_name", "Hopper"),
            ("address1", "1 Navy Way"),
            ("postal_code", "20001"),
            ("country", "US"),
            ("vat_number", "US123"),
        ],
    )
}

fn token_body(token: &str) -> String {
    format!("<billing_info><token_id>{token}</token_id></billing_info>")
}

#[track_caller]
fn has(reply: &Reply, text: &str) {
    assert!(reply.body.contains(text), "expected {text} in\n{}", reply.body);
}

#[track_caller]
fn lacks(reply: &Reply, text: &str) {
    assert!(!reply.body.contains(text), "did not expect {text} in\n{}", reply.body);
}

/// The one `<error field symbol>` of a 422 document.
#[track_caller]
fn field_error(reply: &Reply, field: &str, symbol: &str, message: &str) {
    assert_eq!(reply.status, 422, "{}", reply.body);
    has(reply, &format!("<error field=\"{field}\" symbol=\"{symbol}\" lang=\"en-US\">{message}</error>"));
}

#[test]
fn billing_info_is_set_with_a_token_read_and_deleted() {
    on_both_backends("billing_token", |db| {
        let server = serve(db);
        let s = &Target::of(&server);
        create_account(s, "a1");
        assert_error(&get(s, "a1"), 404, "not_found");
        assert_error(&get(s, "nobody"), 404, "not_found");
        assert_error(&delete(s, "a1"), 404, "not_found");
        assert_error(&delete(s, "nobody"), 404, "not_found");
        assert_error(&put(s, "2.11", "nobody", &token_body("x")), 404, "not_found");

        let t = card_token(s, "4111111111111111");
        let reply = put(s, "2.11", "a1", &token_body(&t));
        assert_eq!(reply.status, 200, "{}", reply.body);
        let expected = [
            "/v2/accounts/a1/billing_info\" type=\"credit_card\">",
            "<account href=\"http://",
            "/v2/accounts/a1\"/>",
            "<first_name>Grace</first_name>",
            "<last_name>Hopper</last_name>",
            "<address1>1 Navy Way</address1>",
            "<zip>20001</zip>",
            "<country>US</country>",
            "<vat_number>US123</vat_number>",
            "<card_type>Visa</card_type>",
            "<year type=\"integer\">2029</year>",
            "<month type=\"integer\">11</month>",
            "<first_six>411111</first_six>",
            "<last_four>1111</last_four>",
            "<name_on_account nil=\"nil\"></name_on_account>",
            "<updated_at type=\"datetime\">2027-01-15T08:00:00Z</updated_at>",
        ];
        for e in expected {
            has(&reply, e);
        }
        for secret in ["4111111111111111", "321", "<number", "verification_value", "token_id"] {
            lacks(&reply, secret);
        }
        let read = get(s, "a1");
        assert_eq!((read.status, &read.body), (200, &reply.body));

        // The token worked once.
        assert_error(&put(s, "2.11", "a1", &token_body(&t)), 422, "token_invalid");

        // No payment data may accompany a token (currency may: client_compat.rs).
        let t2 = card_token(s, "5555555555554444");
        let body = format!("<billing_info><token_id>{t2}</token_id><first_name>X</first_name></billing_info>");
        field_error(
            &put(s, "2.11", "a1", &body),
            "billing_info.first_name",
            "invalid",
            "is not allowed together with token_id",
        );

        // A bank-account token.
        let b = token(
            s,
            &[
                ("routing_number", "123456780"),
                ("account_number", "111111111"),
                ("account_number_confirmation", "111111111"),
                ("account_type", "checking"),
                ("name_on_account", "Grace Hopper"),
            ],
        );
        let reply = put(s, "2.11", "a1", &token_body(&b));
        assert_eq!(reply.status, 200, "{}", reply.body);
        for e in [
            "/v2/accounts/a1/billing_info\" type=\"bank_account\">",
            "<name_on_account>Grace Hopper</name_on_account>",
            "<account_type>checking</account_type>",
            "<last_four>1111</last_four>",
            "<card_type nil=\"nil\"></card_type>",
            "<first_six nil=\"nil\"></first_six>",
            // Names and address not in the token are kept.
            "<first_name>Grace</first_name>",
            "<address1>1 Navy Way</address1>",
        ] {
            has(&reply, e);
        }
        // The routing number is returned (it names the bank); the account number never is.
        has(&reply, "<routing_number>123456780</routing_number>");
        lacks(&reply, "111111111");

        let deleted = delete(s, "a1");
        assert_eq!(deleted.status, 204, "{}", deleted.body);
        assert_error(&get(s, "a1"), 404, "not_found");
    });
}

#[test]
fn billing_info_is_set_with_card_or_bank_fields() {
    on_both_backends("billing_direct", |db| {
        let server = serve(db);
        let s = &Target::of(&server);
        create_account(s, "a1");
        let reply = put(s, "2.11", "a1", &card("3782-822463-10005", "1234"));
        assert_eq!(reply.status, 200, "{}", reply.body);
        for e in [
            "<card_type>American Express</card_type>",
            "<first_six>378282</first_six>",
            "<last_four>0005</last_four>",
            "<first_name>Verena</first_name>",
            "<city>San Francisco</city>",
        ] {
            has(&reply, e);
        }
        lacks(&reply, "378282246310005");

        // Names and address only: the card stays, nothing is verified.
        let reply = put(s, "2.11", "a1", "<billing_info><city>Oakland</city></billing_info>");
        assert_eq!(reply.status, 200, "{}", reply.body);
        has(&reply, "<city>Oakland</city>");
        has(&reply, "<last_four>0005</last_four>");
        has(&reply, "<address1>123 Main St.</address1>");

        let reply = put(s, "2.11", "a1", &bank("987654321"));
        assert_eq!(reply.status, 200, "{}", reply.body);
        has(&reply, "/v2/accounts/a1/billing_info\" type=\"bank_account\">");
        has(&reply, "<account_type>savings</account_type>");
        has(&reply, "<last_four>4321</last_four>");
        has(&reply, "<month type=\"integer\" nil=\"nil\"></month>");
        assert_eq!(get(s, "a1").body, reply.body);

        // Without billing info, names alone are not enough.
        create_account(s, "a2");
        field_error(
            &put(s, "2.11", "a2", "<billing_info><first_name>X</first_name></billing_info>"),
            "billing_info.number",
            "blank",
            "can't be blank",
        );
    });
}

#[test]
fn card_and_bank_fields_are_checked_like_tokens() {
    on_both_backends("billing_checks", |db| {
        let server = serve(db);
        let s = &Target::of(&server);
        create_account(s, "a1");
        field_error(
            &put(s, "2.11", "a1", &card("4222222222222222", "123")),
            "billing_info.number",
            "invalid",
            "is invalid",
        );
        let expired = card("4111111111111111", "123").replace(">2030<", ">2026<");
        let reply = put(s, "2.11", "a1", &expired);
        field_error(&reply, "billing_info.month", "expired", "is expired");
        field_error(&reply, "billing_info.year", "expired", "is expired");
        field_error(
            &put(s, "2.11", "a1", &card("4111111111111111", "12345")),
            "billing_info.verification_value",
            "invalid",
            "is invalid",
        );
        field_error(
            &put(s, "2.11", "a1", &card("4111111111111111", "1234")),
            "billing_info.verification_value",
            "invalid",
            "must be three digits",
        );
        let nameless = card("4111111111111111", "123").replace("<first_name>Verena</first_name>", "");
        field_error(&put(s, "2.11", "a1", &nameless), "billing_info.first_name", "blank", "can't be blank");
        field_error(
            &put(s, "2.11", "a1", &bank("987654321").replace("123456780", "123456789")),
            "billing_info.routing_number",
            "invalid",
            "is invalid",
        );
        field_error(
            &put(s, "2.11", "a1", &bank("987654321").replace("123456780", "021000021")),
            "billing_info.routing_number",
            "invalid",
            "is invalid",
        );
        let reply = put(s, "2.11", "a1", &bank("98x"));
        field_error(&reply, "billing_info.account_number", "invalid", "is invalid");
        // Enum values are checked when the document is read.
        let reply = put(s, "2.11", "a1", &bank("987654321").replace("savings", "business"));
        assert_eq!(reply.status, 422, "{}", reply.body);
        has(&reply, "field=\"billing_info.account_type\"");
        // Countries are validated from 2.8.
        let foreign = card("4111111111111111", "123").replace("<country>US</country>", "<country>XX</country>");
        field_error(
            &put(s, "2.8", "a1", &foreign),
            "billing_info.country",
            "invalid",
            "is not a valid 2-letter ISO 3166-1 country code",
        );
        assert_error(&get(s, "a1"), 404, "not_found");
        let reply = put(s, "2.7", "a1", &foreign);
        assert_eq!(reply.status, 200, "{}", reply.body);
        has(&reply, "<country>XX</country>");
    });
}

/// (number, error_code, error_category, customer_message, merchant_message, gateway code)
const DECLINES: &[(&str, &str, &str, &str, &str, &str)] = &[
    (
        "4000000000000002",
        "declined",
        "soft",
        "Your transaction was declined. Please use a different card or contact your bank.",
        "The customer's bank has declined their card. The customer will need to contact their bank to learn the cause.",
        "05",
    ),
    (
        "4000000000000077",
        "insufficient_funds",
        "soft",
        "Your transaction was declined due to insufficient funds in your account. Please use a different card or contact your bank.",
        "The card has insufficient funds to cover the cost of the transaction.",
        "51",
    ),
    (
        "4000000000000010",
        "fraud_address",
        "fraud",
        "Your billing address does not match the address on your account. Please update your address or contact your bank.",
        "The payment gateway declined the transaction because the billing address did not match.",
        "AVS",
    ),
    (
        "4000000000000069",
        "expired_card",
        "hard",
        "Your credit card is expired, please update your card.",
        "The payment gateway declined the transaction because the expiration date is expired or does not match.",
        "54",
    ),
    (
        "4000000000000309",
        "gateway_timeout",
        "communication",
        "Please contact support: the payment system did not respond in time to process your transaction.",
        "The payment gateway timed out while processing this transaction. Please verify that the transaction did not process before retrying it.",
        "91",
    ),
    (
        "4000000000000317",
        "duplicate_transaction",
        "duplicate",
        "A similar transaction was recently submitted. Please wait a few minutes and try again.",
        "A transaction was recently submitted with the same Invoice Number, or the same account/card number and amount. Wait a few minutes before trying again, or contact your payment gateway if the problem persists.",
        "94",
    ),
    (
        "4000000000000325",
        "card_type_not_accepted",
        "hard",
        "Your card type is not accepted. Please try another card.",
        "Your merchant account does not accept this card type or specific transaction.",
        "57",
    ),
];

#[track_caller]
fn transaction_error(reply: &Reply, code: &str, category: &str, customer: &str, merchant: &str, gateway: &str) {
    assert_eq!(reply.status, 422, "{}", reply.body);
    let block = format!(
        "<transaction_error>\n    <error_code>{code}</error_code>\n    <error_category>{category}</error_category>\n    \
         <merchant_message>{merchant}</merchant_message>\n    <customer_message>{customer}</customer_message>\n    \
         <gateway_error_code>{gateway}</gateway_error_code>\n  </transaction_error>"
    );
    has(reply, &format!("<errors>\n  {block}"));
    // The declined transaction carries its own copy, one level deeper.
    let nested = block.replace("\n", "\n  ");
    has(reply, &nested);
    assert!(reply.body.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<errors>\n  <transaction_error>"));
}

#[test]
fn declining_cards_answer_the_transaction_error_document() {
    on_both_backends("billing_declines", |db| {
        let server = serve(db);
        let s = &Target::of(&server);
        create_account(s, "a1");
        for &(number, code, category, customer, merchant, gateway) in DECLINES {
            let reply = put(s, "2.11", "a1", &card(number, "123"));
            transaction_error(&reply, code, category, customer, merchant, gateway);
            has(
                &reply,
                &format!("<error field=\"billing_info.base\" symbol=\"declined\" lang=\"en-US\">{customer}</error>"),
            );
            for e in [
                "<transaction href=\"http://",
                "type=\"credit_card\">",
                "<action>verify</action>",
                "<amount_in_cents type=\"integer\">100</amount_in_cents>",
                "<currency>USD</currency>",
                "<status>declined</status>",
                "<source>billing_info</source>",
                "<test type=\"boolean\">true</test>",
                "<voidable type=\"boolean\">false</voidable>",
                "<refundable type=\"boolean\">false</refundable>",
                "<gateway_type>test</gateway_type>",
                "<origin>api_verify_card</origin>",
                "<failure_type>declined</failure_type>",
                "<account_code>a1</account_code>",
                "<email>a1@example.com</email>",
                "<company>Engines</company>",
                "<card_type>Visa</card_type>",
                "<first_six>400000</first_six>",
                &format!("<last_four>{}</last_four>", &number[12..]),
                &format!("<gateway_error_codes>{gateway}</gateway_error_codes>"),
            ] {
                has(&reply, e);
            }
            lacks(&reply, number);
            // Nothing was stored.
            assert_error(&get(s, "a1"), 404, "not_found");
        }
        // The AVS card reports which checks failed.
        has(
            &put(s, "2.11", "a1", &card("4000000000000010", "123")),
            "<avs_result code=\"N\">Street address and postal code do not match.</avs_result>",
        );

        // A security-code mismatch names the field.
        let reply = put(s, "2.11", "a1", &card("4000000000000101", "123"));
        transaction_error(
            &reply,
            "fraud_security_code",
            "fraud",
            "The security code you entered does not match. Please update the CVV and try again.",
            "The payment gateway declined the transaction because the security code (CVV) or expiration date did not match.",
            "N7",
        );
        has(
            &reply,
            "<error field=\"billing_info.verification_value\" symbol=\"declined_bad\" lang=\"en-US\">did not match</error>",
        );
        has(&reply, "<cvv_result code=\"N\">No Match</cvv_result>");
        let errors_order = ["<transaction_error>", "<error field=", "<transaction href="];
        let positions: Vec<usize> = errors_order.iter().map(|e| reply.body.find(e).expect(e)).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{}", reply.body);

        // A declined token is used up; the billing info stays as it was.
        let ok = put(s, "2.11", "a1", &card("4111111111111111", "123"));
        assert_eq!(ok.status, 200, "{}", ok.body);
        let t = card_token(s, "4000000000000002");
        let reply = put(s, "2.11", "a1", &token_body(&t));
        transaction_error(&reply, DECLINES[0].1, DECLINES[0].2, DECLINES[0].3, DECLINES[0].4, DECLINES[0].5);
        has(&reply, "<first_name>Grace</first_name>");
        assert_error(&put(s, "2.11", "a1", &token_body(&t)), 422, "token_invalid");
        assert_eq!(get(s, "a1").body, ok.body);

        // declined_saveable: declined, but the card is stored.
        create_account(s, "a2");
        let reply = put(s, "2.11", "a2", &card("4000000000000341", "123"));
        transaction_error(
            &reply,
            "declined_saveable",
            "soft",
            "The transaction was declined. Please use a different card or contact your bank.",
            "The transaction was declined without specific information.  Please contact your payment gateway for more details or ask the customer to contact their bank.",
            "05",
        );
        let stored = get(s, "a2");
        assert_eq!(stored.status, 200);
        has(&stored, "<last_four>0341</last_four>");

        // A bank account canceled by the bank.
        create_account(s, "a3");
        let reply = put(s, "2.11", "a3", &bank("111111112"));
        transaction_error(
            &reply,
            "ach_cancel",
            "soft",
            "Your bank canceled the payment. Please contact your bank or use a different payment method.",
            "The ACH payment was canceled by the customer's bank.",
            "R08",
        );
        has(&reply, "<transaction href=\"http://");
        has(&reply, "type=\"bank_account\">");
        assert_error(&get(s, "a3"), 404, "not_found");
    });
}

#[test]
fn approving_cards_and_accounts_are_stored() {
    on_both_backends("billing_approvals", |db| {
        let server = serve(db);
        let s = &Target::of(&server);
        for (i, (body, last_four)) in [
            (card("4111111111111111", "123"), "1111"),
            (card("4222222222222220", "123"), "2220"),
            (card("4000000000002024", "123"), "2024"),
            (card("5555555555554444", "123"), "4444"),
            (card("6011000990139424", "123"), "9424"),
            (bank("111111111"), "1111"),
            (bank("111111114"), "1114"),
        ]
        .iter()
        .enumerate()
        {
            let code = format!("ok{i}");
            create_account(s, &code);
            let reply = put(s, "2.11", &code, body);
            assert_eq!(reply.status, 200, "{}", reply.body);
            has(&reply, &format!("<last_four>{last_four}</last_four>"));
        }
    });
}

/// Every number of the sandbox gateway's list (billing-behaviour.md §1 and §2) and its outcome
/// on a billing-info verification: approved with its brand, or declined with its error code.
const SANDBOX_CARDS: &[(&str, Result<&str, &str>)] = &[
    ("4111111111111111", Ok("Visa")),
    ("4222222222222220", Ok("Visa")),
    ("4000000000002024", Ok("Visa")),
    ("4012888888881881", Ok("Visa")),
    ("4222222222222", Ok("Visa")),
    ("378282246310005", Ok("American Express")),
    ("371449635398431", Ok("American Express")),
    ("378734493671000", Ok("American Express")),
    ("30569309025904", Ok("Diners Club")),
    ("38520000023237", Ok("Diners Club")),
    ("6011000990139424", Ok("Discover")),
    ("3530111333300000", Ok("JCB")),
    ("3566002020360505", Ok("JCB")),
    ("5555555555554444", Ok("MasterCard")),
    ("5105105105105100", Ok("MasterCard")),
    ("2223000048400011", Ok("MasterCard")),
    // The 3DS2 dunning card is approved while the customer is present.
    ("4000008400001629", Ok("Visa")),
    ("4000000000000002", Err("declined")),
    ("4000000000000010", Err("fraud_address")),
    ("4000000000000028", Err("fraud_address")),
    ("4000000000000036", Err("fraud_address")),
    ("4000000000000044", Err("fraud_advanced_verification")),
    ("4000000000000051", Err("declined_card_number")),
    ("4000000000000069", Err("expired_card")),
    ("4000000000000077", Err("insufficient_funds")),
    ("4000000000000085", Err("fraud_gateway")),
    ("4000000000000093", Err("fraud_ip_address")),
    ("4000000000001190", Err("fraud_risk_check")),
    ("4000000000000101", Err("fraud_security_code")),
    ("4000000000000119", Err("call_issuer")),
    ("4000000000000200", Err("invalid_data")),
    ("4000000000000226", Err("declined_expiration_date")),
    ("4000000000000309", Err("gateway_timeout")),
    ("4000000000000317", Err("duplicate_transaction")),
    ("4000000000000325", Err("card_type_not_accepted")),
    ("4000000000000341", Err("declined_saveable")),
    ("4000000000003220", Err("three_d_secure_action_required")),
    ("4000000000003063", Err("three_d_secure_action_required")),
];

/// The sandbox's bank account numbers: settled, or canceled by the bank.
const SANDBOX_BANK_ACCOUNTS: &[(&str, Result<(), &str>)] = &[
    ("111111111", Ok(())),
    ("111111112", Err("ach_cancel")),
    ("111111113", Err("ach_cancel")),
    ("111111114", Ok(())),
    ("111111115", Ok(())),
    ("111111116", Ok(())),
];

#[test]
fn every_sandbox_card_and_bank_account_has_its_outcome() {
    on_both_backends("billing_sandbox_list", |db| {
        let server = serve(db);
        let s = &Target::of(&server);
        for (i, &(number, outcome)) in SANDBOX_CARDS.iter().enumerate() {
            let code = format!("c{i}");
            create_account(s, &code);
            // American Express cards have four-digit security codes.
            let cvv = if number.starts_with('3') && number.len() == 15 { "1234" } else { "123" };
            let reply = put(s, "2.11", &code, &card(number, cvv));
            match outcome {
                Ok(brand) => {
                    assert_eq!(reply.status, 200, "{number}: {}", reply.body);
                    has(&reply, &format!("<card_type>{brand}</card_type>"));
                    has(&reply, &format!("<last_four>{}</last_four>", &number[number.len() - 4..]));
                }
                Err(error_code) => {
                    assert_eq!(reply.status, 422, "{number}: {}", reply.body);
                    has(&reply, &format!("<error_code>{error_code}</error_code>"));
                    has(&reply, "<status>declined</status>");
                    // Only declined_saveable keeps the card.
                    let kept = get(s, &code).status == 200;
                    assert_eq!(kept, error_code == "declined_saveable", "{number}");
                }
            }
            lacks(&reply, number);
        }
        for (i, &(account_number, outcome)) in SANDBOX_BANK_ACCOUNTS.iter().enumerate() {
            let code = format!("b{i}");
            create_account(s, &code);
            let reply = put(s, "2.11", &code, &bank(account_number));
            match outcome {
                Ok(()) => {
                    assert_eq!(reply.status, 200, "{account_number}: {}", reply.body);
                    for e in [
                        format!("/v2/accounts/{code}/billing_info\" type=\"bank_account\">").as_str(),
                        "<name_on_account>Verena Example</name_on_account>",
                        "<account_type>savings</account_type>",
                        "<routing_number>123456780</routing_number>",
                        &format!("<last_four>{}</last_four>", &account_number[5..]),
                    ] {
                        has(&reply, e);
                    }
                    assert_eq!(get(s, &code).body, reply.body);
                }
                Err(error_code) => {
                    assert_eq!(reply.status, 422, "{account_number}: {}", reply.body);
                    has(&reply, &format!("<error_code>{error_code}</error_code>"));
                    assert_error(&get(s, &code), 404, "not_found");
                }
            }
            lacks(&reply, account_number);
        }
    });
}

/// A `rebill serve` whose log (stderr, at debug level) goes to a file (killed on drop).
struct LoggedServer {
    child: std::process::Child,
    target: Target,
    log: PathBuf,
}

impl Drop for LoggedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_logged(db: &str, dir: &Path) -> LoggedServer {
    let clock = dir.join("now");
    std::fs::write(&clock, T0.to_string()).expect("clock file");
    let log = dir.join("stderr.log");
    let key_file = dir.join("vault.key");
    let mut child = Command::new(bin())
        .args(["--database", db, "serve", "--listen", "127.0.0.1:0", "--vault-key-file"])
        .arg(&key_file)
        .env("REBILL_CLOCK_FILE", &clock)
        .env("REBILL_LOG", "debug,sqlx=warn")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start rebill serve");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (mut key, mut public_key) = (String::new(), String::new());
    let addr = loop {
        let line = lines.next().expect("a line from rebill serve").expect("utf-8");
        if let Some(k) = line.strip_prefix("private key: ") {
            key = k.trim().to_owned();
        }
        if let Some(k) = line.strip_prefix("public key:") {
            public_key = k.trim().to_owned();
        }
        if let Some(a) = line.strip_prefix("listening on http://") {
            break a.trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    LoggedServer { child, target: Target { addr, key, public_key }, log }
}

/// Whether `needle` occurs in `haystack` other than inside a random value, where short digit
/// strings turn up by chance: a run of at least 32 hexadecimal characters (hashes, keys) or a
/// sealed secret (`v1.` and URL-safe base64). A short number (a CVV) counts only as a whole
/// number: inside a longer run of digits (an epoch second, an id) it is a chance match.
fn leaked(haystack: &[u8], needle: &[u8]) -> bool {
    let short_number = needle.len() < 6 && needle.iter().all(u8::is_ascii_digit);
    let whole = |at: usize| {
        let before = at.checked_sub(1).map(|i| haystack[i]);
        let after = haystack.get(at + needle.len()).copied();
        !before.is_some_and(|b| b.is_ascii_digit()) && !after.is_some_and(|b| b.is_ascii_digit())
    };
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    let b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let run_start =
        |at: usize, class: &dyn Fn(u8) -> bool| haystack[..at].iter().rposition(|&b| !class(b)).map_or(0, |p| p + 1);
    let hex_run = |at: usize| {
        let start = run_start(at, &hex);
        let end = haystack[at..].iter().position(|&b| !hex(b)).map_or(haystack.len(), |p| at + p);
        end - start
    };
    let sealed = |at: usize| {
        let start = run_start(at, &b64);
        start >= 3 && &haystack[start - 3..start] == b"v1."
    };
    haystack
        .windows(needle.len())
        .enumerate()
        .any(|(at, window)| window == needle && hex_run(at) < 32 && !sealed(at) && (!short_number || whole(at)))
}

/// Every text value of every table of a PostgreSQL database.
fn postgres_rows(db: &str) -> Vec<u8> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        use sqlx::{Connection, Row};
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(db).await.expect("connect");
        let tables: Vec<String> =
            sqlx::query("SELECT table_name::text AS t FROM information_schema.tables WHERE table_schema = 'public'")
                .fetch_all(&mut conn)
                .await
                .expect("tables")
                .iter()
                .map(|r| r.try_get("t").expect("name"))
                .collect();
        let mut all = Vec::new();
        for table in tables {
            let rows = sqlx::query(&format!("SELECT CAST(t AS TEXT) AS v FROM \"{table}\" t"))
                .fetch_all(&mut conn)
                .await
                .expect("rows");
            for row in rows {
                let v: String = row.try_get("v").expect("text");
                all.extend_from_slice(v.as_bytes());
                all.push(b'\n');
            }
        }
        assert!(all.len() > 1000, "the database has rows");
        all
    })
}

#[test]
fn no_card_number_cvv_or_account_number_in_the_database_or_the_log() {
    on_both_backends("billing_secrets", |db| {
        let dir = temp_dir("secrets");
        let logged = start_logged(db, &dir);
        let s = &logged.target;
        create_account(s, "a1");
        create_account(s, "a2");
        let card_token = |number: &str, cvv: &str| {
            token(
                s,
                &[
                    ("number", number),
                    ("month", "12"),
                    ("year", "2030"),
                    ("cvv", cvv),
                    ("first_name", "Grace"),
                    ("last_name", "Hopper"),
                ],
            )
        };
        // A token used for billing info, and one left unused.
        let used = card_token("378282246310005", "7391");
        assert_eq!(put(s, "2.11", "a1", &token_body(&used)).status, 200);
        card_token("371449635398431", "5824");
        // A bank-account token left unused.
        token(
            s,
            &[
                ("routing_number", "123456780"),
                ("account_number", "80246813579"),
                ("account_number_confirmation", "80246813579"),
                ("account_type", "checking"),
                ("name_on_account", "Grace Hopper"),
            ],
        );
        // A refused token request (Visa takes three digits) does not echo what it refused.
        let reply = send(
            s,
            "POST",
            "/js/v1/token",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            &format!(
                "key={}&number=4012888888881881&month=1&year=2031&cvv=8264&first_name=A&last_name=B",
                s.public_key
            ),
        );
        assert_eq!(reply.status, 422);
        assert!(!reply.body.contains("8264") && !reply.body.contains("4012888888881881"), "{}", reply.body);
        // Direct card and bank fields, and a decline.
        assert_eq!(put(s, "2.11", "a2", &card("378734493671000", "9462")).status, 200);
        assert_eq!(put(s, "2.11", "a2", &bank("97531086420")).status, 200);
        let declined = put(s, "2.11", "a2", &card("4000000000000101", "618"));
        assert_eq!(declined.status, 422, "{}", declined.body);
        assert_eq!(get(s, "a1").status, 200);

        let secrets = [
            "378282246310005",
            "8224631000",
            "371449635398431",
            "378734493671000",
            "4012888888881881",
            "4000000000000101",
            "80246813579",
            "97531086420",
            "7391",
            "5824",
            "8264",
            "9462",
        ];
        let log = std::fs::read(&logged.log).expect("log");
        assert!(!log.is_empty(), "the service logged");
        let mut places = vec![("log", log)];
        match db.strip_prefix("sqlite://") {
            Some(file) => {
                for (place, suffix) in [("database file", ""), ("WAL", "-wal")] {
                    places.push((place, std::fs::read(format!("{file}{suffix}")).unwrap_or_default()));
                }
                let wal = &places.last().expect("WAL").1;
                assert!(leaked(wal, b"378282") && leaked(wal, b"Hopper"), "the WAL holds the stored fields");
            }
            None => {
                let rows = postgres_rows(db);
                assert!(leaked(&rows, b"378282") && leaked(&rows, b"Hopper"), "the rows hold the stored fields");
                places.push(("database", rows));
            }
        }
        for (place, bytes) in &places {
            for secret in secrets {
                assert!(!leaked(bytes, secret.as_bytes()), "{secret} found in the {place} ({db})");
            }
        }
    });
}

#[test]
fn a_short_number_leaks_only_as_a_whole_number() {
    assert!(leaked(b"{\"cvv\":\"5824\"}", b"5824"));
    assert!(leaked(b"5824", b"5824"));
    assert!(!leaked(b"created_at 1795485824", b"5824"), "inside an epoch second");
    assert!(!leaked(b"id 58240", b"5824"));
    assert!(leaked(b"x 4012888888881881 y", b"4012888888881881"));
    assert!(leaked(b"378282246310005", b"8224631000"), "longer needles still match inside digits");
}
