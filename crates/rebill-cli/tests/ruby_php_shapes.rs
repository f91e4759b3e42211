//! The wire shapes the released v2 Ruby (2.15.3) and PHP (2.10.1) clients depend on, end to end
//! against `rebill serve` on SQLite and on PostgreSQL. Requests are written as those clients
//! write them, and every update, delete and action goes where they send it: to the root `href`
//! of the resource the service answered (both clients keep it as the object's URL, and send the
//! absolute URL as the request target) or to the `<a name href method>` anchor they look up.
//!
//! - An add-on and a shipping address carry their own `href`: both clients PUT and DELETE there.
//! - A bulk coupon's unique codes are listed under `<unique_coupon_codes type="array">`, the root
//!   the PHP client's pager reads (and the Ruby client reaches by the `generate` anchor).
//! - An empty element of a typed value is nil: the PHP client sends every updatable coupon field
//!   on update and restore, the unset ones empty (`<max_redemptions></max_redemptions>`).
//! - The action anchors the Ruby client follows (`reopen` of an account; the subscription,
//!   invoice, transaction and coupon actions) are there exactly when the action is allowed.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
/// The API version of the Ruby-shaped requests.
const RUBY: &str = "2.11";
/// The API version of the PHP-shaped requests.
const PHP: &str = "2.10";

fn serve(db: &str) -> Server {
    serve_at(db, T0, &[])
}

/// A request as the clients send it: `target` is a path or, when following an href or anchor,
/// the absolute URL itself.
fn send(s: &Server, version: &str, method: &str, target: &str, body: &str) -> Reply {
    authed(s, method, target, &xml_at(version), body)
}

fn get(s: &Server, target: &str) -> Reply {
    authed(s, "GET", target, &[("X-Api-Version", RUBY)], "")
}

/// The `href` attribute of the first `<element href="…"` of `body`.
#[track_caller]
fn href_of(body: &str, element: &str) -> String {
    let open = format!("<{element} href=\"");
    let start = body.find(&open).unwrap_or_else(|| panic!("no <{element} href> in {body}")) + open.len();
    body[start..].split('"').next().unwrap_or_default().to_owned()
}

/// The `(href, method)` of the anchor `name` of the document's root element, if it offers it.
fn anchor(body: &str, name: &str) -> Option<(String, String)> {
    anchor_at(body, name, ROOT)
}

/// The indentation of the root element's children.
const ROOT: &str = "\n  ";
/// The indentation of the children of a list's items.
const ITEM: &str = "\n    ";

/// The `(href, method)` of the anchor `name` written at `indent` (the root's or a list item's).
fn anchor_at(body: &str, name: &str, indent: &str) -> Option<(String, String)> {
    let open = format!("{indent}<a name=\"{name}\" href=\"");
    let start = body.find(&open)? + open.len();
    let rest = &body[start..];
    let href = rest.split('"').next()?.to_owned();
    let method = rest.split("method=\"").nth(1)?.split('"').next()?.to_owned();
    Some((href, method))
}

/// The names of the anchors the document's root offers, in order.
fn anchors(body: &str) -> Vec<String> {
    body.split(&format!("{ROOT}<a name=\"")).skip(1).filter_map(|a| a.split('"').next()).map(str::to_owned).collect()
}

/// Follows the anchor `name` as the Ruby client does (`follow_link`): its method, its href, the
/// query parameters appended and the body (if any).
#[track_caller]
fn follow(s: &Server, body: &str, name: &str, query: &str, request: &str) -> Reply {
    let (href, method) = anchor_at(body, name, ROOT)
        .or_else(|| anchor_at(body, name, ITEM))
        .unwrap_or_else(|| panic!("no `{name}` anchor in {body}"));
    send(s, RUBY, &method.to_uppercase(), &format!("{href}{query}"), request)
}

/// The root element name of an XML document.
fn root(body: &str) -> &str {
    let rest = body.trim_start().strip_prefix("<?xml").map_or(body, |r| r.split_once("?>").map_or(r, |(_, b)| b));
    rest.trim_start().trim_start_matches('<').split([' ', '>', '/']).next().unwrap_or_default()
}

fn create_account(s: &Server, code: &str) -> Reply {
    ok(send(s, RUBY, "POST", "/v2/accounts", &format!("<account><account_code>{code}</account_code></account>")), 201)
}

/// Plan `code`: 1000 cents a month in USD.
fn create_plan(s: &Server, code: &str) {
    let body = format!(
        "<plan><plan_code>{code}</plan_code><name>Plan {code}</name>\
         <unit_amount_in_cents><USD>1000</USD></unit_amount_in_cents></plan>"
    );
    ok(send(s, RUBY, "POST", "/v2/plans", &body), 201);
}

// ---------------------------------------------------------------------------------------------
// Item hrefs: add-ons and shipping addresses

fn add_ons_are_updated_and_deleted_at_their_href(db: &str) {
    let s = serve(db);
    let base = format!("http://{}", s.addr);
    // A plan code that is written percent-encoded in hrefs.
    for plan in ["gold", "gold+plus"] {
        create_plan(&s, plan);
        let path = format!("/v2/plans/{}/add_ons", plan.replace('+', "%2B"));
        let expected = format!("{base}{path}/seat");
        // Ruby: `plan.add_ons.create(add_on_code: 'seat', …)`.
        let body = "<add_on><add_on_code>seat</add_on_code><name>Seat</name>\
                    <unit_amount_in_cents><USD>200</USD></unit_amount_in_cents></add_on>";
        let created = ok(send(&s, RUBY, "POST", &path, body), 201);
        assert_eq!(href_of(&created.body, "add_on"), expected, "{}", created.body);
        assert_eq!(created.header("location"), Some(expected.clone()));
        let listed = ok(get(&s, &path), 200);
        assert!(listed.body.contains(&format!("<add_on href=\"{expected}\">")), "{}", listed.body);
        let one = ok(get(&s, &expected), 200);
        assert_eq!(href_of(&one.body, "add_on"), expected);

        // Ruby `add_on.save` and PHP `$addon->update()`: PUT the changed attributes to the href.
        let r = ok(send(&s, RUBY, "PUT", &expected, "<add_on><name>Seat plus</name></add_on>"), 200);
        assert_eq!((href_of(&r.body, "add_on"), field(&r.body, "name")), (expected.clone(), "Seat plus".to_owned()));
        let body = "<add_on><unit_amount_in_cents><USD>300</USD></unit_amount_in_cents></add_on>";
        let r = ok(send(&s, PHP, "PUT", &expected, body), 200);
        assert!(r.body.contains("<USD type=\"integer\">300</USD>"), "{}", r.body);
        assert_eq!(field(&ok(get(&s, &expected), 200).body, "name"), "Seat plus");

        // `destroy` / `delete()`: DELETE the href.
        ok(send(&s, RUBY, "DELETE", &expected, ""), 204);
        assert_error(&get(&s, &expected), 404, "not_found");
    }
}

#[test]
fn add_ons_carry_their_href() {
    on_both_backends("shapes_add_on", add_ons_are_updated_and_deleted_at_their_href);
}

/// A shipping address as the PHP client writes one (`populateXmlDoc`, writable attributes).
const SHIPPING_ADDRESS: &str = "<shipping_address><address1>123 Main St.</address1><city>San Francisco</city>\
     <state>CA</state><zip>94110</zip><country>US</country><phone>555-555-5555</phone>\
     <email>verena@example.com</email><nickname>Home</nickname><first_name>Verena</first_name>\
     <last_name>Example</last_name></shipping_address>";

fn shipping_addresses_are_updated_and_deleted_at_their_href(db: &str) {
    let s = serve(db);
    let base = format!("http://{}", s.addr);
    for account in ["sa1", "user+tag@example.com"] {
        create_account(&s, account);
        let path = format!("/v2/accounts/{}/shipping_addresses", account.replace('+', "%2B").replace('@', "%40"));
        let created = ok(send(&s, PHP, "POST", &path, SHIPPING_ADDRESS), 201);
        let id = field(&created.body, "id");
        let expected = format!("{base}{path}/{id}");
        assert_eq!(href_of(&created.body, "shipping_address"), expected, "{}", created.body);
        assert_eq!(created.header("location"), Some(expected.clone()));
        let listed = ok(get(&s, &path), 200);
        assert!(listed.body.contains(&format!("<shipping_address href=\"{expected}\">")), "{}", listed.body);

        // PHP `$shad->update()`: `_save(PUT, $this->getHref())` with the changed attributes.
        let body = "<shipping_address><address1>123 NewStreet Ave.</address1></shipping_address>";
        let r = ok(send(&s, PHP, "PUT", &expected, body), 200);
        assert_eq!(href_of(&r.body, "shipping_address"), expected);
        assert_eq!(field(&r.body, "address1"), "123 NewStreet Ave.");
        assert_eq!(field(&ok(get(&s, &expected), 200).body, "address1"), "123 NewStreet Ave.");

        ok(send(&s, PHP, "DELETE", &expected, ""), 204);
        assert_error(&get(&s, &expected), 404, "not_found");
    }
    // Before the fix the PHP client sent its update to the API root.
    assert_eq!(send(&s, PHP, "PUT", &format!("{base}/v2"), SHIPPING_ADDRESS).status, 404);
}

#[test]
fn shipping_addresses_carry_their_href() {
    on_both_backends("shapes_shipping", shipping_addresses_are_updated_and_deleted_at_their_href);
}

// ---------------------------------------------------------------------------------------------
// Unique coupon codes

const BULK: &str = "<coupon><coupon_code>bulk</coupon_code><name>Bulk</name>\
     <discount_type>percent</discount_type><discount_percent>10</discount_percent>\
     <coupon_type>bulk</coupon_type><unique_code_template>'bulk'9999</unique_code_template></coupon>";

fn unique_codes_come_under_their_own_root(db: &str) {
    let s = serve(db);
    let base = format!("http://{}", s.addr);
    let bulk = ok(send(&s, RUBY, "POST", "/v2/coupons", BULK), 201);
    let coupon_href = href_of(&bulk.body, "coupon");

    // Ruby `coupon.generate(3)`: follows the `generate` anchor, then pages the Location.
    let made = ok(
        follow(&s, &bulk.body, "generate", "", "<coupon><number_of_unique_codes>3</number_of_unique_codes></coupon>"),
        201,
    );
    let location = made.header("location").expect("location");
    let page = ok(get(&s, &location), 200);
    assert_eq!(root(&page.body), "unique_coupon_codes", "{}", page.body);
    assert!(page.body.contains("<unique_coupon_codes type=\"array\">"), "{}", page.body);
    assert_eq!(page.body.matches("<coupon href=\"").count(), 3, "{}", page.body);

    // PHP `$coupon->generate(2)`: POST `uri() . '/generate'` (uri() is the coupon's href), then a
    // `Recurly_UniqueCouponCodeList` of the Location, which reads only a `unique_coupon_codes`
    // root: every code it holds is one `<coupon>` child.
    let made = ok(
        send(
            &s,
            PHP,
            "POST",
            &format!("{coupon_href}/generate"),
            "<coupon><number_of_unique_codes>2</number_of_unique_codes></coupon>",
        ),
        201,
    );
    let page = ok(authed(&s, "GET", &made.header("location").expect("location"), &[("X-Api-Version", PHP)], ""), 200);
    assert_eq!(root(&page.body), "unique_coupon_codes", "{}", page.body);
    let codes: Vec<String> = page.body.split("<coupon href=\"").skip(1).map(|c| field(c, "coupon_code")).collect();
    assert_eq!(codes.len(), 2, "{}", page.body);

    // The link of the bulk coupon lists all five, each code with its own href and redeem anchor.
    let all = ok(get(&s, &href_of(&bulk.body, "unique_coupon_codes")), 200);
    assert_eq!(root(&all.body), "unique_coupon_codes");
    assert_eq!(all.body.matches("<coupon href=\"").count(), 5, "{}", all.body);
    for code in &codes {
        let own = format!("{base}/v2/coupons/{code}");
        assert!(all.body.contains(&format!("<coupon href=\"{own}\">")), "{}", all.body);
        assert!(anchor(&ok(get(&s, &own), 200).body, "redeem").is_some());
    }
    // The count and the other lists keep their roots.
    let head = authed(&s, "HEAD", &href_of(&bulk.body, "unique_coupon_codes"), &[("X-Api-Version", RUBY)], "");
    assert_eq!((head.status, head.header("x-records")), (200, Some("5".to_owned())));
    assert_eq!(root(&ok(get(&s, "/v2/coupons"), 200).body), "coupons");
}

#[test]
fn unique_coupon_codes_are_listed_under_unique_coupon_codes() {
    on_both_backends("shapes_unique", unique_codes_come_under_their_own_root);
}

// ---------------------------------------------------------------------------------------------
// Empty typed elements

/// The body of PHP's `Recurly_Coupon::createUpdateXML()` (every updatable field, in its order,
/// rendered with `LIBXML_NOEMPTYTAG`, so an unset one is `<x></x>`).
fn php_coupon_update(name: &str, max_redemptions: &str, description: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\n<coupon><name>{name}</name><max_redemptions>{max_redemptions}</max_redemptions>\
         <max_redemptions_per_account></max_redemptions_per_account><hosted_description></hosted_description>\
         <invoice_description></invoice_description><redeem_by_date></redeem_by_date>\
         <description>{description}</description></coupon>\n"
    )
}

fn empty_typed_elements_are_nil(db: &str) {
    let s = serve(db);
    let body = "<coupon><coupon_code>ten</coupon_code><name>Ten</name><discount_type>percent</discount_type>\
                <discount_percent>10</discount_percent><description>Ten off</description></coupon>";
    let coupon = ok(send(&s, RUBY, "POST", "/v2/coupons", body), 201);
    let href = href_of(&coupon.body, "coupon");

    // PHP `$coupon->update()`: the unset limits and dates are empty, so they stay unset.
    let r = ok(send(&s, PHP, "PUT", &href, &php_coupon_update("Ten percent", "", "Ten off")), 200);
    assert_eq!(field(&r.body, "name"), "Ten percent");
    for unset in ["max_redemptions", "max_redemptions_per_account", "redeem_by_date"] {
        assert!(tag_is_nil(&r.body, unset), "{unset}: {}", r.body);
    }
    // A value sent is set, and an empty element later leaves it as it is (nil means "not given").
    let r = ok(send(&s, PHP, "PUT", &href, &php_coupon_update("Ten percent", "100", "Ten off")), 200);
    assert_eq!(field(&r.body, "max_redemptions"), "100");
    // The Ruby client's form of an unset value: `<x/>`.
    let r = ok(send(&s, RUBY, "PUT", &href, "<coupon><max_redemptions/><redeem_by_date/></coupon>"), 200);
    assert_eq!(field(&r.body, "max_redemptions"), "100");
    // What was stored reads back as a well-formed document that gives back what was sent.
    let again = ok(get(&s, &href), 200);
    assert_eq!(field(&again.body, "description"), "Ten off");
    assert!(tag_is_nil(&again.body, "redeem_by_date"), "{}", again.body);

    // PHP `$coupon->restore()`: the same body, PUT to `uri() . '/restore'` of an expired coupon;
    // the Ruby client follows the `restore` anchor.
    ok(send(&s, PHP, "DELETE", &href, ""), 204);
    let expired = ok(get(&s, &href), 200);
    assert_eq!(field(&expired.body, "state"), "expired");
    assert_eq!(anchor(&expired.body, "restore"), Some((format!("{href}/restore"), "put".to_owned())));
    let r = ok(send(&s, PHP, "PUT", &format!("{href}/restore"), &php_coupon_update("Ten again", "", "Ten off")), 200);
    assert_eq!((field(&r.body, "state"), field(&r.body, "name")), ("redeemable".to_owned(), "Ten again".to_owned()));
    assert_eq!(anchor(&r.body, "restore"), None);

    // Text that is not a value is still refused.
    let r = send(&s, PHP, "PUT", &href, &php_coupon_update("Ten", "ten", "Ten off"));
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("field=\"coupon.max_redemptions\" symbol=\"not_a_number\""), "{}", r.body);
    let r = send(
        &s,
        RUBY,
        "PUT",
        &href,
        "<coupon><max_redemptions> </max_redemptions><redeem_by_date>soon</redeem_by_date></coupon>",
    );
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("field=\"coupon.redeem_by_date\""), "{}", r.body);
    assert!(!r.body.contains("field=\"coupon.max_redemptions\""), "{}", r.body);

    // A value that must be given cannot be given empty: the same refusal as for an absent one.
    create_account(&s, "payer");
    let token = card_token(&s, "4111111111111111");
    let ok_body = |amount: &str| {
        format!(
            "<transaction><amount_in_cents>{amount}</amount_in_cents><currency>USD</currency>\
             <account><account_code>payer</account_code><billing_info><token_id>{token}</token_id>\
             </billing_info></account></transaction>"
        )
    };
    for empty in ["<amount_in_cents></amount_in_cents>", "<amount_in_cents/>", "<amount_in_cents nil=\"nil\"/>"] {
        let body = ok_body("").replace("<amount_in_cents></amount_in_cents>", empty);
        let r = send(&s, RUBY, "POST", "/v2/transactions", &body);
        assert_eq!(r.status, 422, "{empty}: {}", r.body);
        assert!(r.body.contains("field=\"transaction.amount_in_cents\" symbol=\"blank\""), "{empty}: {}", r.body);
    }
    let bulk = ok(send(&s, RUBY, "POST", "/v2/coupons", BULK), 201);
    let r =
        follow(&s, &bulk.body, "generate", "", "<coupon><number_of_unique_codes></number_of_unique_codes></coupon>");
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("field=\"coupon.number_of_unique_codes\" symbol=\"blank\""), "{}", r.body);
}

/// Whether `<name …>` is written `nil="nil"`.
fn tag_is_nil(body: &str, name: &str) -> bool {
    body.split(&format!("<{name} "))
        .nth(1)
        .and_then(|rest| rest.split('>').next())
        .is_some_and(|a| a.contains("nil=\"nil\""))
}

#[test]
fn empty_typed_elements_in_requests_are_nil() {
    on_both_backends("shapes_empty", empty_typed_elements_are_nil);
}

// ---------------------------------------------------------------------------------------------
// Action anchors

fn accounts_offer_reopen_when_closed(db: &str) {
    let s = serve(db);
    let created = create_account(&s, "shut");
    let href = href_of(&created.body, "account");
    assert_eq!(anchor(&created.body, "reopen"), None, "{}", created.body);

    // Ruby `account.destroy` (and PHP `Recurly_Account::closeAccount`): DELETE the href.
    ok(send(&s, RUBY, "DELETE", &href, ""), 204);
    let closed = ok(get(&s, &href), 200);
    assert_eq!(field(&closed.body, "state"), "closed");
    assert_eq!(anchor(&closed.body, "reopen"), Some((format!("{href}/reopen"), "put".to_owned())));
    // Listed closed accounts carry it too.
    let listed = ok(get(&s, "/v2/accounts?state=closed"), 200);
    assert!(anchor_at(&listed.body, "reopen", ITEM).is_some(), "{}", listed.body);

    // Ruby `account.reopen`: `return false unless link? :reopen; reload follow_link :reopen`.
    let reopened = ok(follow(&s, &closed.body, "reopen", "", ""), 200);
    assert_eq!((field(&reopened.body, "state"), anchor(&reopened.body, "reopen")), ("active".to_owned(), None));
    assert_eq!(anchor(&ok(get(&s, &href), 200).body, "reopen"), None);
}

#[test]
fn a_closed_account_offers_reopen() {
    on_both_backends("shapes_reopen", accounts_offer_reopen_when_closed);
}

#[track_caller]
fn assert_anchors(body: &str, expected: &[&str]) {
    assert_eq!(anchors(body), expected, "{body}");
}

fn subscription_invoice_and_transaction_anchors(db: &str) {
    let s = serve(db);
    create_plan(&s, "gold");
    let token = card_token(&s, "4111111111111111");
    let body = format!(
        "<subscription><plan_code>gold</plan_code><currency>USD</currency>\
         <account><account_code>sub1</account_code><billing_info><token_id>{token}</token_id></billing_info>\
         </account></subscription>"
    );
    let active = ok(send(&s, RUBY, "POST", "/v2/subscriptions", &body), 201);
    let href = href_of(&active.body, "subscription");
    assert_anchors(&active.body, &["cancel", "terminate", "postpone", "notes", "pause"]);
    for (name, path) in [("cancel", "cancel"), ("terminate", "terminate"), ("postpone", "postpone"), ("notes", "notes")]
    {
        assert_eq!(anchor(&active.body, name), Some((format!("{href}/{path}"), "put".to_owned())));
    }

    // Ruby `update_notes` follows `notes` with the notes.
    let body = "<subscription><customer_notes>Thanks</customer_notes></subscription>";
    let noted = ok(follow(&s, &active.body, "notes", "", body), 200);
    assert_eq!(field(&noted.body, "customer_notes"), "Thanks");
    // `postpone(time)` follows `postpone` with `next_renewal_date` (and `bulk`).
    let postponed =
        ok(follow(&s, &noted.body, "postpone", "?next_renewal_date=2027-03-01T08:00:00Z&bulk=false", ""), 200);
    assert_eq!(field(&postponed.body, "current_period_ends_at"), "2027-03-01T08:00:00Z");
    // `cancel`, then `reactivate`.
    let canceled = ok(follow(&s, &postponed.body, "cancel", "", ""), 200);
    assert_eq!(field(&canceled.body, "state"), "canceled");
    assert_anchors(&canceled.body, &["terminate", "notes", "reactivate"]);
    let reactivated = ok(follow(&s, &canceled.body, "reactivate", "", ""), 200);
    assert_eq!(field(&reactivated.body, "state"), "active");
    assert_anchors(&reactivated.body, &["cancel", "terminate", "postpone", "notes", "pause"]);
    // A pause scheduled for the period end (Ruby `pause(1)` PUTs `…/pause`) can be dropped by
    // `resume`, and is offered so; resumed, the subscription offers it no more.
    let body = "<subscription><remaining_pause_cycles>1</remaining_pause_cycles></subscription>";
    let scheduled = ok(follow(&s, &reactivated.body, "pause", "", body), 200);
    assert_eq!(field(&scheduled.body, "state"), "active");
    assert_anchors(&scheduled.body, &["cancel", "terminate", "postpone", "notes", "pause", "resume"]);
    let resumed = ok(follow(&s, &scheduled.body, "resume", "", ""), 200);
    assert!(tag_is_nil(&resumed.body, "paused_at"), "{}", resumed.body);
    assert_anchors(&resumed.body, &["cancel", "terminate", "postpone", "notes", "pause"]);
    // Before 2.11 there is no pause.
    assert_anchors(
        &ok(authed(&s, "GET", &href, &[("X-Api-Version", "2.10")], ""), 200).body,
        &["cancel", "terminate", "postpone", "notes"],
    );
    // `terminate(:none)` follows `terminate` with `refund=none`: an expired subscription offers
    // its notes only (they can still be changed), and each other action is refused.
    let expired = ok(follow(&s, &reactivated.body, "terminate", "?refund=none", ""), 200);
    assert_eq!(field(&expired.body, "state"), "expired");
    assert_anchors(&expired.body, &["notes"]);
    for action in ["cancel", "reactivate", "postpone?next_renewal_date=2027-04-01", "terminate?refund=none", "pause"] {
        let r = send(
            &s,
            RUBY,
            "PUT",
            &format!("{href}/{action}"),
            "<subscription><remaining_pause_cycles>1</remaining_pause_cycles></subscription>",
        );
        assert!(r.status >= 400, "{action}: {} {}", r.status, r.body);
    }
    let body = "<subscription><customer_notes>Late</customer_notes></subscription>";
    let noted = ok(follow(&s, &expired.body, "notes", "", body), 200);
    assert_eq!(field(&noted.body, "customer_notes"), "Late");

    // The subscription's invoice was collected: it offers `refund` only (Ruby `refund_amount`
    // follows it).
    let invoice_href = href_of(&active.body, "invoice");
    let invoice = ok(get(&s, &invoice_href), 200);
    assert_eq!(field(&invoice.body, "state"), "paid");
    assert_anchors(&invoice.body, &["refund"]);
    assert_eq!(anchor(&invoice.body, "refund"), Some((format!("{invoice_href}/refund"), "post".to_owned())));
    let body =
        "<invoice><amount_in_cents>100</amount_in_cents><refund_method>transaction_first</refund_method></invoice>";
    let refund = ok(follow(&s, &invoice.body, "refund", "", body), 201);
    assert_eq!(field(&refund.body, "total_in_cents"), "-100");
    assert_anchors(&ok(get(&s, &invoice_href), 200).body, &["refund"]);

    // The transaction that paid it: `refund` is a DELETE of its own href, while refundable.
    let transactions = ok(get(&s, "/v2/accounts/sub1/transactions"), 200);
    let purchase = transactions
        .body
        .split("<transaction href=")
        .skip(1)
        .find(|t| t.contains("<action>purchase</action>") && t.contains("<status>success</status>"))
        .unwrap_or_else(|| panic!("a purchase in {}", transactions.body))
        .to_owned();
    let uuid = field(&purchase, "uuid");
    let transaction_href = format!("http://{}/v2/transactions/{uuid}", s.addr);
    assert_eq!(anchor_at(&purchase, "refund", ITEM), Some((transaction_href.clone(), "delete".to_owned())));
    // Ruby `transaction.refund(amount)`: `follow_link :refund, params: {amount_in_cents: …}`.
    let r = follow(&s, &purchase, "refund", "?amount_in_cents=900", "");
    assert!([200, 201, 202, 204].contains(&r.status), "{} {}", r.status, r.body);
    let after = ok(get(&s, &transaction_href), 200);
    assert_eq!(anchor(&after.body, "refund"), None, "{}", after.body);
    assert_eq!(anchor(&ok(get(&s, &invoice_href), 200).body, "refund"), None);

    // A manual invoice: open, it offers mark_successful and mark_failed; paid, refund.
    create_account(&s, "manual");
    let body = "<adjustment><description>Setup</description><unit_amount_in_cents>2500</unit_amount_in_cents>\
                <currency>USD</currency></adjustment>";
    ok(send(&s, RUBY, "POST", "/v2/accounts/manual/adjustments", body), 201);
    let r = ok(
        send(
            &s,
            RUBY,
            "POST",
            "/v2/accounts/manual/invoices",
            "<invoice><collection_method>manual</collection_method></invoice>",
        ),
        201,
    );
    let open = ok(get(&s, &href_of(&r.body, "charge_invoice")), 200);
    assert_anchors(&open.body, &["mark_successful", "mark_failed"]);
    let open_href = href_of(&open.body, "invoice");
    ok(follow(&s, &open.body, "mark_successful", "", ""), 200);
    let paid = ok(get(&s, &open_href), 200);
    assert_eq!(field(&paid.body, "state"), "paid");
    assert_anchors(&paid.body, &["refund"]);
}

#[test]
fn subscription_invoice_and_transaction_anchors_follow_what_is_allowed() {
    on_both_backends("shapes_anchors", subscription_invoice_and_transaction_anchors);
}

fn redeem_while_redeemable(db: &str) {
    let s = serve(db);
    create_account(&s, "r1");
    let body = "<coupon><coupon_code>once</coupon_code><name>Once</name><discount_type>percent</discount_type>\
                <discount_percent>10</discount_percent><max_redemptions>1</max_redemptions></coupon>";
    let coupon = ok(send(&s, RUBY, "POST", "/v2/coupons", body), 201);
    let href = href_of(&coupon.body, "coupon");
    assert_anchors(&coupon.body, &["redeem"]);
    // Ruby `coupon.redeem(account)` and PHP `redeemCoupon`: the anchor's method and href.
    let body = "<redemption><account_code>r1</account_code><currency>USD</currency></redemption>";
    ok(follow(&s, &coupon.body, "redeem", "", body), 201);
    // Used up: no redeem, but restore.
    let maxed = ok(get(&s, &href), 200);
    assert_eq!(field(&maxed.body, "state"), "maxed_out");
    assert_anchors(&maxed.body, &["restore"]);
}

#[test]
fn coupons_offer_redeem_while_redeemable() {
    on_both_backends("shapes_redeem", redeem_while_redeemable);
}
