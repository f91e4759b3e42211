//! Shipping addresses and verify_cvv end to end over HTTP against `rebill serve`, on SQLite and
//! on PostgreSQL (decisions in docs/shipping-addresses.md): an account's addresses (create with
//! `Location`, the nickname default, duplicates answered, lists with cursors, update, delete,
//! the limit of 20, validation per version), subscriptions shipping to a new or an existing
//! address (2.11) with every invoice line showing it, renewals keeping it, a change moving it, a
//! one-off adjustment's address, the refusals; and checking a stored card's security code (2.10).

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

fn serve(db: &str) -> Server {
    serve_at(db, T0, &[])
}

fn post_at(s: &Server, version: &str, path: &str, body: &str) -> Reply {
    authed(s, "POST", path, &xml_at(version), body)
}

fn put_at(s: &Server, version: &str, path: &str, body: &str) -> Reply {
    authed(s, "PUT", path, &xml_at(version), body)
}

fn get_at(s: &Server, version: &str, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", version)], "")
}

fn delete(s: &Server, path: &str) -> Reply {
    authed(s, "DELETE", path, &[("X-Api-Version", "2.11")], "")
}

#[track_caller]
fn has(reply: &Reply, text: &str) {
    assert!(reply.body.contains(text), "expected {text} in\n{}", reply.body);
}

#[track_caller]
fn lacks(reply: &Reply, text: &str) {
    assert!(!reply.body.contains(text), "unexpected {text} in\n{}", reply.body);
}

#[track_caller]
fn refused(reply: &Reply, field: &str, symbol: &str) {
    assert_eq!(reply.status, 422, "{}", reply.body);
    has(reply, &format!("<error field=\"{field}\" symbol=\"{symbol}\" lang=\"en-US\">"));
}

/// A complete address whose first line is `street`.
fn address(street: &str) -> String {
    format!(
        "<shipping_address><first_name>Verena</first_name><last_name>Example</last_name>\
         <address1>{street}</address1><city>San Francisco</city><state>CA</state><zip>94105</zip>\
         <country>US</country></shipping_address>"
    )
}

fn account(s: &Server, code: &str) {
    ok(post_at(s, "2.11", "/v2/accounts", &format!("<account><account_code>{code}</account_code></account>")), 201);
}

fn records(reply: &Reply) -> String {
    reply.header("X-Records").unwrap_or_default()
}

fn addresses_of_an_account(db: &str) {
    let s = serve(db);
    account(&s, "a1");
    let base = "/v2/accounts/a1/shipping_addresses";

    // Create: 201 with Location; the nickname defaults to the names.
    let created = post_at(&s, "2.10", base, &address("1 Main St."));
    assert_eq!(created.status, 201, "{}", created.body);
    let id = field(&created.body, "id");
    assert!(id.parse::<i64>().is_ok(), "{id}");
    assert_eq!(
        created.header("location").as_deref(),
        Some(format!("http://{}{base}/{id}", s.addr).as_str()),
        "{}",
        created.head
    );
    has(&created, &format!("<account href=\"http://{}/v2/accounts/a1\"/>", s.addr));
    has(&created, &format!("<subscriptions href=\"http://{}{base}/{id}/subscriptions\"/>", s.addr));
    has(&created, "<nickname>Verena Example</nickname>");
    has(&created, "<address1>1 Main St.</address1>");
    has(&created, "<address2 nil=\"nil\"></address2>");
    has(&created, "<created_at type=\"datetime\">2027-01-15T08:00:00Z</created_at>");
    let got = ok(get_at(&s, "2.10", &format!("{base}/{id}")), 200);
    assert_eq!(got.body, created.body);

    // An exact duplicate is not added again: the existing address is answered.
    let again = post_at(&s, "2.11", base, &address("1 Main St."));
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(field(&again.body, "id"), id);
    assert_eq!(again.header("location"), created.header("location"));
    // Another nickname is another address.
    let work = address("1 Main St.").replace("<first_name>", "<nickname>Work</nickname><first_name>");
    let second = ok(post_at(&s, "2.11", base, &work), 201);
    let second_id = field(&second.body, "id");
    assert_ne!(second_id, id);
    has(&second, "<nickname>Work</nickname>");

    // Lists: newest first, with cursors.
    let list = ok(get_at(&s, "2.11", base), 200);
    assert_eq!(records(&list), "2");
    let ids: Vec<&str> = list.body.match_indices("<id type=\"integer\">").map(|(i, _)| &list.body[i + 19..]).collect();
    assert_eq!(ids.len(), 2, "{}", list.body);
    let page = ok(get_at(&s, "2.11", &format!("{base}?per_page=1&order=asc")), 200);
    assert_eq!(field(&page.body, "id"), id);
    let link = page.header("link").expect("a Link header");
    assert!(link.contains("rel=\"next\""), "{link}");
    let next = link.split(',').find(|l| l.contains("rel=\"next\"")).expect("next");
    let next = &next[next.find('<').expect("<") + 1..next.find('>').expect(">")];
    let next_path = &next[next.find("/v2/").expect("path")..];
    let page2 = ok(get_at(&s, "2.11", next_path), 200);
    assert_eq!(field(&page2.body, "id"), second_id);
    assert!(page2.header("link").is_none_or(|l| !l.contains("rel=\"next\"")));

    // Update: 200, only the elements sent change.
    let updated = ok(
        put_at(&s, "2.11", &format!("{base}/{id}"), "<shipping_address><nickname>Home</nickname></shipping_address>"),
        200,
    );
    has(&updated, "<nickname>Home</nickname>");
    has(&updated, "<address1>1 Main St.</address1>");

    // Validation: the required values, lengths and (from 2.8) the country.
    let r = post_at(&s, "2.11", base, "<shipping_address><first_name>x</first_name></shipping_address>");
    refused(&r, "shipping_address.last_name", "blank");
    refused(&r, "shipping_address.country", "blank");
    let long = address("2 Main St.").replace("<city>", &format!("<company>{}</company><city>", "c".repeat(51)));
    refused(&post_at(&s, "2.11", base, &long), "shipping_address.company", "too_long");
    let zz = address("3 Main St.").replace(">US<", ">ZZ<");
    refused(&post_at(&s, "2.8", base, &zz), "shipping_address.country", "invalid");
    refused(
        &put_at(&s, "2.8", &format!("{base}/{id}"), "<shipping_address><country>ZZ</country></shipping_address>"),
        "shipping_address.country",
        "invalid",
    );
    let old = ok(post_at(&s, "2.7", base, &zz), 201);
    has(&old, "<country>ZZ</country>");
    let unknown = post_at(&s, "2.11", base, "<shipping_address><shoe_size>9</shoe_size></shipping_address>");
    assert_error(&unknown, 400, "invalid_xml");

    // Unknown addresses and accounts.
    assert_error(&get_at(&s, "2.11", &format!("{base}/999999")), 404, "not_found");
    assert_error(&get_at(&s, "2.11", &format!("{base}/abc")), 404, "not_found");
    assert_error(&get_at(&s, "2.11", "/v2/accounts/nobody/shipping_addresses"), 404, "not_found");
    assert_error(&post_at(&s, "2.11", "/v2/accounts/nobody/shipping_addresses", &address("x")), 404, "not_found");
    // Another account's address is not found through this one.
    account(&s, "a2");
    assert_error(&get_at(&s, "2.11", &format!("/v2/accounts/a2/shipping_addresses/{id}")), 404, "not_found");

    // At most 20 per account: three are held, seventeen more fit, the next is refused.
    for i in 0..17 {
        ok(post_at(&s, "2.11", base, &address(&format!("{i} Side St."))), 201);
    }
    assert_eq!(records(&ok(get_at(&s, "2.11", base), 200)), "20");
    refused(&post_at(&s, "2.11", base, &address("21 Side St.")), "shipping_address.base", "too_many");
    // A duplicate of a held one is still answered.
    assert_eq!(post_at(&s, "2.11", base, &address("0 Side St.")).status, 201);

    // Delete: 204, then gone; the twenty-first fits again.
    assert_eq!(delete(&s, &format!("{base}/{second_id}")).status, 204);
    assert_error(&get_at(&s, "2.11", &format!("{base}/{second_id}")), 404, "not_found");
    assert_error(&delete(&s, &format!("{base}/{second_id}")), 404, "not_found");
    assert_eq!(records(&ok(get_at(&s, "2.11", base), 200)), "19");
    ok(post_at(&s, "2.11", base, &address("21 Side St.")), 201);

    // Every change left its event.
    let kinds =
        sql(db, "SELECT kind FROM domain_events WHERE subject = 'a1' AND kind LIKE 'shipping_address.%' ORDER BY id");
    let count = |k: &str| kinds.iter().filter(|x| x.as_str() == k).count();
    assert_eq!(
        (count("shipping_address.created"), count("shipping_address.updated"), count("shipping_address.deleted")),
        (21, 1, 1),
        "{kinds:?}"
    );
}

#[test]
fn an_account_holds_up_to_twenty_shipping_addresses() {
    on_both_backends("shipping_addresses", addresses_of_an_account);
}

fn plan(s: &Server) {
    ok(
        post_at(
            s,
            "2.11",
            "/v2/plans",
            "<plan><plan_code>gold</plan_code><name>Gold</name>\
             <unit_amount_in_cents><USD>1000</USD></unit_amount_in_cents></plan>",
        ),
        201,
    );
}

fn subscribe(s: &Server, version: &str, code: &str, extra: &str) -> Reply {
    let token = card_token(s, "4111111111111111");
    let body = format!(
        "<subscription><plan_code>gold</plan_code><currency>USD</currency>\
         <account><account_code>{code}</account_code><first_name>Verena</first_name><last_name>Example</last_name>\
         <billing_info><token_id>{token}</token_id></billing_info></account>{extra}</subscription>"
    );
    post_at(s, version, "/v2/subscriptions", &body)
}

/// The `<shipping_address>` element of a subscription naming address `id` of account `code`.
fn link(s: &Server, code: &str, id: &str) -> String {
    format!("<shipping_address href=\"http://{}/v2/accounts/{code}/shipping_addresses/{id}\"/>", s.addr)
}

/// The line items of the account's invoices (2.11), oldest invoice first, each as its text.
fn lines(s: &Server, code: &str) -> Vec<String> {
    let r = ok(get_at(s, "2.11", &format!("/v2/accounts/{code}/invoices?order=asc")), 200);
    r.body.split("<adjustment ").skip(1).map(str::to_owned).collect()
}

fn subscriptions_ship_to_addresses(db: &str) {
    let s = serve(db);
    plan(&s);

    // A new address on create: stored on the account, linked from the subscription (2.11).
    let created = subscribe(&s, "2.11", "s1", &address("1 Main St."));
    assert_eq!(created.status, 201, "{}", created.body);
    let uuid = field(&created.body, "uuid");
    let list = ok(get_at(&s, "2.11", "/v2/accounts/s1/shipping_addresses"), 200);
    assert_eq!(records(&list), "1");
    let first = field(&list.body, "id");
    has(&created, &link(&s, "s1", &first));
    let sub = format!("/v2/subscriptions/{uuid}");
    has(&ok(get_at(&s, "2.11", &sub), 200), &link(&s, "s1", &first));
    lacks(&ok(get_at(&s, "2.10", &sub), 200), "<shipping_address");
    // Its first invoice line is shipped there: 1000 cents, the address in full from 2.11.
    let l = lines(&s, "s1");
    assert_eq!(l.len(), 1, "{l:?}");
    assert!(l[0].contains("<total_in_cents type=\"integer\">1000</total_in_cents>"), "{}", l[0]);
    assert!(l[0].contains(&format!("<id type=\"integer\">{first}</id>")), "{}", l[0]);
    assert!(l[0].contains("<address1>1 Main St.</address1>"), "{}", l[0]);
    let old = ok(get_at(&s, "2.10", "/v2/accounts/s1/invoices"), 200);
    lacks(&old, "<shipping_address");

    // The renewal keeps the address.
    sandbox_clock(&s, "<advance>1month</advance>");
    let l = lines(&s, "s1");
    assert_eq!(l.len(), 2, "{l:?}");
    assert!(l[1].contains("<total_in_cents type=\"integer\">1000</total_in_cents>"), "{}", l[1]);
    assert!(l[1].contains("<address1>1 Main St.</address1>"), "{}", l[1]);

    // The address in use cannot be deleted.
    let r = delete(&s, &format!("/v2/accounts/s1/shipping_addresses/{first}"));
    assert_error(&r, 422, "shipping_address_in_use");
    has(&r, &uuid);

    // A change moves the subscription to a new address; the next renewal ships there, the
    // lines already billed keep theirs.
    let changed = ok(put_at(&s, "2.11", &sub, &format!("<subscription>{}</subscription>", address("2 Side St."))), 200);
    let list = ok(get_at(&s, "2.11", "/v2/accounts/s1/shipping_addresses?order=asc"), 200);
    assert_eq!(records(&list), "2");
    let second = list.body.rsplit("<id type=\"integer\">").next().and_then(|t| t.split('<').next()).expect("id");
    assert_ne!(second, first);
    has(&changed, &link(&s, "s1", second));
    sandbox_clock(&s, "<advance>1month</advance>");
    let l = lines(&s, "s1");
    assert_eq!(l.len(), 3, "{l:?}");
    assert!(l[1].contains("<address1>1 Main St.</address1>"), "{}", l[1]);
    assert!(l[2].contains("<address1>2 Side St.</address1>"), "{}", l[2]);
    // The first address is free again.
    assert_eq!(delete(&s, &format!("/v2/accounts/s1/shipping_addresses/{first}")).status, 204);
    // A deleted address still shows on the lines shipped to it.
    assert!(lines(&s, "s1")[0].contains("<address1>1 Main St.</address1>"));
    // A change to a new address checks it whole.
    let r = put_at(
        &s,
        "2.11",
        &sub,
        "<subscription><shipping_address><first_name>x</first_name></shipping_address></subscription>",
    );
    refused(&r, "subscription.shipping_address.last_name", "blank");
    let r = put_at(
        &s,
        "2.8",
        &sub,
        &format!("<subscription>{}</subscription>", address("3 Main St.").replace(">US<", ">ZZ<")),
    );
    refused(&r, "subscription.shipping_address.country", "invalid");

    // An existing address by id (2.11) for a second subscription of the account.
    let token = card_token(&s, "4111111111111111");
    ok(
        put_at(
            &s,
            "2.11",
            "/v2/accounts/s1/billing_info",
            &format!("<billing_info><token_id>{token}</token_id></billing_info>"),
        ),
        200,
    );
    let body = |extra: &str| {
        format!("<subscription><plan_code>gold</plan_code><currency>USD</currency>{extra}</subscription>")
    };
    let r = post_at(
        &s,
        "2.11",
        "/v2/accounts/s1/subscriptions",
        &body(&format!("<shipping_address_id>{second}</shipping_address_id>")),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    has(&r, &link(&s, "s1", second));
    // An id the account does not hold, both elements at once, and the id before 2.11.
    refused(
        &post_at(
            &s,
            "2.11",
            "/v2/accounts/s1/subscriptions",
            &body("<shipping_address_id>999999</shipping_address_id>"),
        ),
        "subscription.shipping_address_id",
        "invalid",
    );
    let both = format!("<shipping_address_id>{second}</shipping_address_id>{}", address("4 Main St."));
    refused(
        &post_at(&s, "2.11", "/v2/accounts/s1/subscriptions", &body(&both)),
        "subscription.shipping_address_id",
        "invalid",
    );
    refused(
        &post_at(
            &s,
            "2.10",
            "/v2/accounts/s1/subscriptions",
            &body(&format!("<shipping_address_id>{second}</shipping_address_id>")),
        ),
        "subscription.shipping_address_id",
        "invalid",
    );
    // Refusals added nothing.
    assert_eq!(records(&ok(get_at(&s, "2.11", "/v2/accounts/s1/shipping_addresses"), 200)), "1");
    // Another account's address is not the account's.
    account(&s, "other");
    let theirs = ok(post_at(&s, "2.11", "/v2/accounts/other/shipping_addresses", &address("9 Far Rd.")), 201);
    let theirs = field(&theirs.body, "id");
    refused(
        &post_at(
            &s,
            "2.11",
            "/v2/accounts/s1/subscriptions",
            &body(&format!("<shipping_address_id>{theirs}</shipping_address_id>")),
        ),
        "subscription.shipping_address_id",
        "invalid",
    );

    // A nested account's shipping addresses are added to it; the subscription ships to its own
    // address only.
    let token = card_token(&s, "4111111111111111");
    let nested = format!(
        "<subscription><plan_code>gold</plan_code><currency>USD</currency>\
         <account><account_code>s2</account_code><shipping_addresses>{}</shipping_addresses>\
         <billing_info><token_id>{token}</token_id></billing_info></account></subscription>",
        address("7 Nest St.")
    );
    let r = post_at(&s, "2.11", "/v2/subscriptions", &nested);
    assert_eq!(r.status, 201, "{}", r.body);
    lacks(&r, "<shipping_address");
    let list = ok(get_at(&s, "2.11", "/v2/accounts/s2/shipping_addresses"), 200);
    assert_eq!(records(&list), "1");
    has(&list, "<address1>7 Nest St.</address1>");
    let incomplete = nested.replace("<city>San Francisco</city>", "");
    let r = post_at(&s, "2.11", "/v2/subscriptions", &incomplete.replace("s2", "s3"));
    refused(&r, "subscription.account.shipping_addresses[0].city", "blank");
    assert_error(&get_at(&s, "2.11", "/v2/accounts/s3"), 404, "not_found");

    // One-off adjustments take an address from 2.11.
    let adj = |version: &str, extra: &str| {
        post_at(
            &s,
            version,
            "/v2/accounts/s1/adjustments",
            &format!(
                "<adjustment><unit_amount_in_cents>250</unit_amount_in_cents><currency>USD</currency>{extra}</adjustment>"
            ),
        )
    };
    let r = adj("2.11", &format!("<shipping_address_id>{second}</shipping_address_id>"));
    assert_eq!(r.status, 201, "{}", r.body);
    has(&r, "<address1>2 Side St.</address1>");
    let uuid = field(&r.body, "uuid");
    has(&ok(get_at(&s, "2.11", &format!("/v2/adjustments/{uuid}")), 200), "<address1>2 Side St.</address1>");
    lacks(&ok(get_at(&s, "2.10", &format!("/v2/adjustments/{uuid}")), 200), "<shipping_address");
    let r = adj("2.11", &address("5 New St."));
    assert_eq!(r.status, 201, "{}", r.body);
    has(&r, "<address1>5 New St.</address1>");
    assert_eq!(records(&ok(get_at(&s, "2.11", "/v2/accounts/s1/shipping_addresses"), 200)), "2");
    refused(
        &adj("2.11", "<shipping_address_id>999999</shipping_address_id>"),
        "adjustment.shipping_address_id",
        "invalid",
    );
    refused(
        &adj("2.10", &format!("<shipping_address_id>{second}</shipping_address_id>")),
        "adjustment.shipping_address_id",
        "invalid",
    );
    refused(&adj("2.10", &address("6 New St.")), "adjustment.shipping_address", "invalid");
    // Invoicing the pending adjustments keeps their addresses on the lines: 250 + 250 cents.
    let invoiced = post_at(&s, "2.11", "/v2/accounts/s1/invoices", "");
    assert_eq!(invoiced.status, 201, "{}", invoiced.body);
    has(&invoiced, "<total_in_cents type=\"integer\">500</total_in_cents>");
    has(&invoiced, "<address1>5 New St.</address1>");
}

#[test]
fn subscriptions_and_adjustments_ship_to_account_addresses() {
    on_both_backends("shipping_subscriptions", subscriptions_ship_to_addresses);
}

fn verify(s: &Server, version: &str, code: &str, value: &str) -> Reply {
    post_at(
        s,
        version,
        &format!("/v2/accounts/{code}/billing_info/verify_cvv"),
        &format!("<billing_info><verification_value>{value}</verification_value></billing_info>"),
    )
}

fn verifications(db: &str, code: &str) -> Vec<String> {
    sql(
        db,
        &format!(
            "SELECT t.status FROM transactions t JOIN accounts a ON a.id = t.account_id \
             WHERE a.account_code = '{code}' AND t.action = 'verify' AND t.amount = 0 ORDER BY t.id"
        ),
    )
}

fn security_codes_are_checked(db: &str) {
    let key_file = vault_key_file();
    let args = ["--vault-key-file", key_file.as_str()];
    let s = start_with(db, Options { clock: Some(T0), args: &args, capture_stderr: true, ..Options::default() });
    account(&s, "c1");
    let token = card_token(&s, "4111111111111111");
    ok(
        put_at(
            &s,
            "2.10",
            "/v2/accounts/c1/billing_info",
            &format!("<billing_info><token_id>{token}</token_id></billing_info>"),
        ),
        200,
    );

    // A match: 200 with the billing info, and a verify transaction of 0 recorded.
    let r = verify(&s, "2.10", "c1", "4321");
    assert_eq!(r.status, 200, "{}", r.body);
    has(&r, &format!("<billing_info href=\"http://{}/v2/accounts/c1/billing_info\" type=\"credit_card\">", s.addr));
    has(&r, "<last_four>1111</last_four>");
    assert_eq!(verifications(db, "c1").len(), 1);

    // A mismatch (the sandbox's 999): 422 with the transaction error.
    let r = verify(&s, "2.11", "c1", "999");
    assert_eq!(r.status, 422, "{}", r.body);
    has(&r, "<error_code>fraud_security_code</error_code>");
    has(&r, "<error_category>fraud</error_category>");
    has(
        &r,
        "<error field=\"billing_info.billing_info.credit_card_verification_value\" symbol=\"declined_bad\" lang=\"en-US\">did not match</error>",
    );
    assert_eq!(verifications(db, "c1").len(), 2);

    // Malformed values are refused before any check (not counted).
    for bad in ["12", "12a4", "12345"] {
        refused(&verify(&s, "2.10", "c1", bad), "billing_info.verification_value", "invalid");
    }
    refused(
        &post_at(&s, "2.10", "/v2/accounts/c1/billing_info/verify_cvv", "<billing_info></billing_info>"),
        "billing_info.verification_value",
        "blank",
    );
    refused(
        &post_at(
            &s,
            "2.10",
            "/v2/accounts/c1/billing_info/verify_cvv",
            "<billing_info><verification_value>123</verification_value><first_name>x</first_name></billing_info>",
        ),
        "billing_info.first_name",
        "not_supported",
    );

    // The third check in 24 hours is the last: the fourth is locked (nothing recorded).
    sandbox_clock(&s, "<advance>1hour</advance>");
    ok(verify(&s, "2.10", "c1", "123"), 200);
    let r = verify(&s, "2.10", "c1", "123");
    assert_error(&r, 400, "cvv_verify_locked");
    has(&r, "<description lang=\"en-US\">This credit card has too many cvv check attempts.</description>");
    assert_eq!(verifications(db, "c1").len(), 3);
    // The window rolls on the site clock: a day after the first two checks, two more fit.
    sandbox_clock(&s, "<advance>23hours</advance>");
    ok(verify(&s, "2.10", "c1", "123"), 200);
    ok(verify(&s, "2.10", "c1", "999"), 422);
    assert_error(&verify(&s, "2.10", "c1", "123"), 400, "cvv_verify_locked");
    assert_eq!(verifications(db, "c1"), ["success", "declined", "success", "success", "declined"]);

    // The route exists from 2.10; unknown accounts, no billing info, a bank account.
    assert_error(&verify(&s, "2.9", "c1", "123"), 404, "not_found");
    assert_error(&verify(&s, "2.10", "nobody", "123"), 404, "not_found");
    account(&s, "c2");
    assert_error(&verify(&s, "2.10", "c2", "123"), 404, "not_found");
    let bank = "<billing_info><first_name>Verena</first_name><last_name>Example</last_name>\
                <name_on_account>Verena Example</name_on_account><routing_number>123456780</routing_number>\
                <account_number>111111111</account_number><account_type>checking</account_type>\
                <address1>1 Main St.</address1><city>San Francisco</city><state>CA</state><zip>94105</zip>\
                <country>US</country><currency>USD</currency></billing_info>";
    ok(put_at(&s, "2.10", "/v2/accounts/c2/billing_info", bank), 200);
    assert_error(&verify(&s, "2.10", "c2", "123"), 400, "billing_info_type_invalid");

    // The codes checked are nowhere in the database or the log.
    let stored = sql(
        db,
        "SELECT card_key FROM cvv_checks UNION ALL SELECT COALESCE(message, '') || COALESCE(description, '') || \
         COALESCE(reference, '') FROM transactions",
    );
    assert!(stored.iter().all(|v| !v.contains("4321")), "{stored:?}");
    // As a value of its own: a uuid or a time in the log may hold the digits by chance.
    let log = s.log();
    assert!(!log.split(|c: char| !c.is_ascii_alphanumeric()).any(|token| token == "4321"), "{log}");
}

#[test]
fn verify_cvv_checks_the_stored_card() {
    on_both_backends("verify_cvv", security_codes_are_checked);
}
