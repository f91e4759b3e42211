//! Purchases end to end over HTTP against `rebill serve`, on SQLite and on PostgreSQL: two
//! subscriptions (one in a trial, one with an add-on and a setup fee), two one-off charges and a
//! gift card on one invoice paid by one transaction, its preview first (the same invoice,
//! nothing written); the invoice read at 2.9 and at 2.11; a purchase answered at 2.9 (an
//! `<invoice>`); a declined purchase leaving no subscription, no redemption and no pending
//! charge; manual collection and an authorization (a pending invoice without a transaction);
//! the shipping address precedence of §1.5; a purchase of credits only; the refusals with
//! their field paths. Decisions: docs/purchases.md.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;

#[track_caller]
fn status(reply: &Reply, code: u16) {
    assert_eq!(reply.status, code, "{}\n{}", reply.head, reply.body);
}

#[track_caller]
fn has(reply: &Reply, text: &str) {
    assert!(reply.body.contains(text), "expected {text} in\n{}", reply.body);
}

#[track_caller]
fn lacks(reply: &Reply, text: &str) {
    assert!(!reply.body.contains(text), "did not expect {text} in\n{}", reply.body);
}

#[track_caller]
fn refused(reply: &Reply, field: &str, symbol: &str) {
    status(reply, 422);
    has(reply, &format!("field=\"{field}\" symbol=\"{symbol}\""));
}

fn cents(name: &str, value: i64) -> String {
    format!("<{name} type=\"integer\">{value}</{name}>")
}

fn send(s: &Server, version: &str, path: &str, body: &str) -> Reply {
    authed(s, "POST", path, &xml_at(version), body)
}

fn get(s: &Server, version: &str, path: &str) -> Reply {
    let r = authed(s, "GET", path, &[("X-Api-Version", version)], "");
    status(&r, 200);
    r
}

fn count(s: &Server, path: &str) -> i64 {
    let r = authed(s, "HEAD", path, &[("X-Api-Version", "2.11")], "");
    status(&r, 200);
    r.header("x-records").and_then(|v| v.parse().ok()).expect("X-Records")
}

fn address(nickname: &str, city: &str) -> String {
    format!(
        "<shipping_address><nickname>{nickname}</nickname><first_name>Verena</first_name><last_name>Example</last_name>\
         <address1>1 {city} St</address1><city>{city}</city><state>CA</state><zip>94105</zip><country>US</country>\
         </shipping_address>"
    )
}

fn adjustment(description: &str, unit: i64, quantity: i64, extra: &str) -> String {
    format!(
        "<adjustment><description>{description}</description><unit_amount_in_cents>{unit}</unit_amount_in_cents>\
         <quantity>{quantity}</quantity>{extra}</adjustment>"
    )
}

/// The lines of invoice `number` as `description-or-origin:nickname shipped to`, in order.
fn shipped(db: &str, number: &str) -> Vec<String> {
    sql(
        db,
        &format!(
            "SELECT COALESCE(a.description, a.origin) || ':' || COALESCE(s.nickname, '-') FROM adjustments a \
             LEFT JOIN shipping_addresses s ON s.id = a.shipping_address_id \
             JOIN invoices i ON i.id = a.invoice_id WHERE i.invoice_number = {number} ORDER BY a.id"
        ),
    )
}

/// The number of the invoice a `Location` names.
fn location_number(reply: &Reply) -> String {
    let location = reply.header("location").expect("Location");
    location.rsplit('/').next().expect("number").to_owned()
}

fn buy_gift_card(s: &Server) -> String {
    let token = card_token(s, "4111111111111111");
    let body = format!(
        "<gift_card><product_code>gift_card</product_code><unit_amount_in_cents>2000</unit_amount_in_cents>\
         <currency>USD</currency><delivery><method>email</method><email_address>f@example.com</email_address>\
         </delivery><gifter_account><account_code>giver</account_code><billing_info><token_id>{token}</token_id>\
         </billing_info></gifter_account></gift_card>"
    );
    let r = send(s, "2.11", "/v2/gift_cards", &body);
    status(&r, 201);
    field(&r.body, "redemption_code")
}

/// The site's gift card product (20.00 USD) and plans: `gold` (10.00 a month, a 5.00 setup
/// fee) and `silver` (20.00 a month after a 7-day trial).
fn catalogue(s: &Server) {
    s.cli(&[
        "gift-cards",
        "products",
        "add",
        "--site",
        "sandbox",
        "--product-code",
        "gift_card",
        "--currency",
        "USD",
        "2000",
    ]);
    let gold = "<plan><plan_code>gold</plan_code><name>Gold</name><unit_amount_in_cents><USD>1000</USD>\
                </unit_amount_in_cents><setup_fee_in_cents><USD>500</USD></setup_fee_in_cents></plan>";
    status(&send(s, "2.11", "/v2/plans", gold), 201);
    let silver = "<plan><plan_code>silver</plan_code><name>Silver</name><unit_amount_in_cents><USD>2000</USD>\
                  </unit_amount_in_cents><trial_interval_length>7</trial_interval_length>\
                  <trial_interval_unit>days</trial_interval_unit></plan>";
    status(&send(s, "2.11", "/v2/plans", silver), 201);
}

fn purchases(db: &str) {
    let s = serve_at(db, T0, &[]);
    let base = format!("http://{}", s.addr);
    catalogue(&s);
    let extra = "<add_on><add_on_code>extra</add_on_code><name>Extra</name>\
                 <unit_amount_in_cents><USD>300</USD></unit_amount_in_cents></add_on>";
    status(&send(&s, "2.11", "/v2/plans/gold/add_ons", extra), 201);
    let code = buy_gift_card(&s);

    // ---- the big purchase: preview first, then the same purchase ----
    let body = |token: &str, gift: &str| {
        format!(
            "<purchase><currency>USD</currency><po_number>PO-7</po_number><customer_notes>Thanks</customer_notes>\
             <account><account_code>buyer</account_code><email>buyer@example.com</email>\
             <billing_info><token_id>{token}</token_id></billing_info>\
             <shipping_addresses>{}{}</shipping_addresses></account>\
             <adjustments>{}{}</adjustments>\
             <subscriptions><subscription><plan_code>gold</plan_code><quantity>2</quantity>\
             <subscription_add_ons><subscription_add_on><add_on_code>extra</add_on_code><quantity>1</quantity>\
             </subscription_add_on></subscription_add_ons></subscription>\
             <subscription><plan_code>silver</plan_code></subscription></subscriptions>{gift}</purchase>",
            address("Home", "Oakland"),
            address("Work", "Berkeley"),
            adjustment("Widget", 1500, 2, ""),
            adjustment("Gadget", 250, 1, &address("Gate", "Alameda")),
        )
    };
    let gift = format!("<gift_card><redemption_code>{code}</redemption_code></gift_card>");
    // Gold: 2 x 1000 + setup fee 500 + add-on 300 = 2800; silver in its trial: 0;
    // Widget 2 x 1500 = 3000; Gadget 250. Total 6050; the card pays 2000, the card 4050.
    let preview = send(&s, "2.11", "/v2/purchases/preview", &body("unused", &gift));
    status(&preview, 200);
    has(&preview, "<invoice_collection");
    has(&preview, &cents("total_in_cents", 6050));
    has(&preview, "<state>pending</state>");
    has(&preview, "<po_number>PO-7</po_number>");
    lacks(&preview, "<transaction ");
    let invoice_number = tag(&preview.body, "invoice_number");
    assert!(invoice_number.is_none_or(|n| n.is_empty()), "{}", preview.body);
    // Nothing was written.
    status(&authed(&s, "GET", "/v2/accounts/buyer", &[("X-Api-Version", "2.11")], ""), 404);
    assert_eq!(count(&s, "/v2/subscriptions"), 0);

    let token = card_token(&s, "4111111111111111");
    let made = send(&s, "2.11", "/v2/purchases", &body(&token, &gift));
    status(&made, 201);
    let number = location_number(&made);
    assert_eq!(made.header("location"), Some(format!("{base}/v2/invoices/{number}")));
    has(&made, "<invoice_collection");
    has(&made, "<charge_invoice href=");
    has(&made, &cents("total_in_cents", 6050));
    has(&made, "<state>paid</state>");
    let origin = sql(db, &format!("SELECT origin FROM invoices WHERE invoice_number = {number}"));
    assert_eq!(origin, ["purchase"]);
    has(&made, &cents("amount_in_cents", 4050));
    assert_eq!(made.body.matches("<transaction href=").count(), 1, "{}", made.body);
    // The preview showed the same totals per line.
    for (what, cents_value) in [("Widget", 3000), ("Gadget", 250)] {
        has(&preview, &format!("<description>{what}</description>"));
        has(&made, &format!("<description>{what}</description>"));
        has(&made, &cents("total_in_cents", cents_value));
        has(&preview, &cents("total_in_cents", cents_value));
    }
    assert_eq!(
        preview.body.matches("<adjustment ").count(),
        made.body.matches("<adjustment ").count(),
        "{}\n{}",
        preview.body,
        made.body
    );
    // Two subscriptions, one in its trial; the card redeemed and spent; its billing info saved.
    assert_eq!(count(&s, "/v2/accounts/buyer/subscriptions"), 2);
    assert_eq!(count(&s, "/v2/accounts/buyer/subscriptions?state=in_trial"), 1);
    let cards = get(&s, "2.11", "/v2/gift_cards?recipient_account_code=buyer");
    has(&cards, &cents("balance_in_cents", 0));
    status(&authed(&s, "GET", "/v2/accounts/buyer/billing_info", &[("X-Api-Version", "2.11")], ""), 200);
    // Shipping: the Gadget to its own address, every other line to the last account address.
    let lines = shipped(db, &number);
    assert!(lines.contains(&"Gadget:Gate".to_owned()), "{lines:?}");
    assert!(lines.contains(&"Widget:Work".to_owned()), "{lines:?}");
    assert!(
        lines.iter().filter(|l| !l.starts_with("Gadget") && !l.starts_with("Gift card")).all(|l| l.ends_with(":Work")),
        "{lines:?}"
    );

    // Every part left its event: two subscriptions, one invoice made and paid, one charge, one
    // redemption.
    let kinds = sql(db, "SELECT kind FROM domain_events ORDER BY id");
    let n = |kind: &str| kinds.iter().filter(|k| k.as_str() == kind).count();
    assert_eq!(n("subscription.created"), 2, "{kinds:?}");
    assert_eq!(n("gift_card.redeemed"), 1, "{kinds:?}");
    assert!(n("invoice.paid") >= 2 && n("invoice.created") >= 2, "{kinds:?}");

    // ---- the same invoice read at 2.9 and at 2.11 ----
    let old = get(&s, "2.9", &format!("/v2/invoices/{number}"));
    has(&old, "<invoice href=");
    has(&old, "<state>collected</state>");
    lacks(&old, "<invoice_collection");
    has(&get(&s, "2.11", &format!("/v2/invoices/{number}")), "<state>paid</state>");

    // ---- a purchase at 2.9 (existing account, its stored card): an <invoice> ----
    let body29 = format!(
        "<purchase><currency>USD</currency><account><account_code>buyer</account_code></account>\
         <adjustments>{}</adjustments></purchase>",
        adjustment("Refill", 999, 1, "")
    );
    let r = send(&s, "2.9", "/v2/purchases", &body29);
    status(&r, 201);
    assert!(r.body.contains("<invoice href="), "{}", r.body);
    lacks(&r, "<invoice_collection");
    has(&r, "<state>collected</state>");
    has(&r, &cents("total_in_cents", 999));
    // Its preview at 2.9: an <invoice>, `open`, without a number.
    let r = send(&s, "2.9", "/v2/purchases/preview", &body29);
    status(&r, 200);
    assert!(r.body.contains("<invoice>") || r.body.contains("<invoice "), "{}", r.body);
    lacks(&r, "<invoice_collection");
    has(&r, "<state>open</state>");
    has(&r, &cents("total_in_cents", 999));

    // ---- new billing info on an existing account replaces the stored one once approved ----
    let other = card_token(&s, "4012888888881881");
    let body = format!(
        "<purchase><currency>USD</currency><account><account_code>buyer</account_code>\
         <billing_info><token_id>{other}</token_id></billing_info></account><adjustments>{}</adjustments></purchase>",
        adjustment("Refill", 5000, 1, "")
    );
    status(&send(&s, "2.11", "/v2/purchases", &body), 201);
    let info = get(&s, "2.11", "/v2/accounts/buyer/billing_info");
    assert_eq!(field(&info.body, "last_four"), "1881");
    // A declined one leaves the stored one as it was.
    let bad = card_token(&s, "4000000000000002");
    let body = body.replace(&other, &bad);
    status(&send(&s, "2.11", "/v2/purchases", &body), 422);
    assert_eq!(field(&get(&s, "2.11", "/v2/accounts/buyer/billing_info").body, "last_four"), "1881");

    // ---- a decline leaves nothing but its transaction ----
    let second = buy_gift_card(&s);
    let declining = card_token(&s, "4000000000000002");
    let body = format!(
        "<purchase><currency>USD</currency><account><account_code>decliner</account_code>\
         <billing_info><token_id>{declining}</token_id></billing_info></account>\
         <adjustments>{}</adjustments><subscriptions><subscription><plan_code>gold</plan_code></subscription>\
         </subscriptions><gift_card><redemption_code>{second}</redemption_code></gift_card></purchase>",
        adjustment("Widget", 1500, 1, "")
    );
    let r = send(&s, "2.11", "/v2/purchases", &body);
    status(&r, 422);
    has(&r, "<transaction_error>");
    has(&r, "field=\"purchase.base\" symbol=\"declined\"");
    has(&r, "<status>declined</status>");
    assert_eq!(count(&s, "/v2/accounts/decliner/subscriptions"), 0);
    assert_eq!(count(&s, "/v2/accounts/decliner/adjustments?state=pending"), 0);
    assert_eq!(count(&s, "/v2/accounts/decliner/transactions"), 1);
    // The account stays with the failed invoice holding the declined transaction (no card saved).
    assert_eq!(count(&s, "/v2/accounts/decliner/invoices?state=failed"), 1);
    assert_eq!(count(&s, "/v2/accounts/decliner/invoices"), 1);
    status(&authed(&s, "GET", "/v2/accounts/decliner/billing_info", &[("X-Api-Version", "2.11")], ""), 404);
    // The card was not kept redeemed: it redeems elsewhere, whole.
    let redeem = "<recipient_account><account_code>buyer</account_code></recipient_account>";
    let r = send(&s, "2.11", &format!("/v2/gift_cards/{second}/redeem"), redeem);
    assert!(r.status == 200 || r.status == 201, "{}", r.body);
    has(&r, &cents("balance_in_cents", 2000));

    // ---- manual collection: a pending invoice due in 30 days, nothing charged ----
    let manual = format!(
        "<purchase><currency>USD</currency><collection_method>manual</collection_method><net_terms>30</net_terms>\
         <account><account_code>payer</account_code><email>p@example.com</email></account>\
         <adjustments>{}</adjustments></purchase>",
        adjustment("Consulting", 10_000, 1, "")
    );
    let r = send(&s, "2.11", "/v2/purchases", &manual);
    status(&r, 201);
    has(&r, "<state>pending</state>");
    has(&r, &cents("total_in_cents", 10_000));
    has(&r, "<collection_method>manual</collection_method>");
    has(&r, &cents("net_terms", 30));
    lacks(&r, "<transaction ");
    let number = location_number(&r);
    let due = sql(db, &format!("SELECT due_on FROM invoices WHERE invoice_number = {number}"));
    assert_eq!(due, [(T0 + 30 * DAY).to_string()]);

    // ---- authorize (2.9+): a pending invoice without a transaction (an account without credit:
    // the buyer's credit from the second card would pay it) ----
    let body = format!(
        "<purchase><currency>USD</currency><account><account_code>payer</account_code></account>\
         <adjustments>{}</adjustments></purchase>",
        adjustment("Held", 700, 1, "")
    );
    let r = send(&s, "2.11", "/v2/purchases/authorize", &body);
    status(&r, 201);
    has(&r, "<state>pending</state>");
    has(&r, &cents("total_in_cents", 700));
    has(&r, "<collection_method>manual</collection_method>");
    lacks(&r, "<transaction ");
    assert_ne!(send(&s, "2.8", "/v2/purchases/authorize", &body).status, 201);

    // ---- shipping precedence on an existing account ----
    let id_of = |nickname: &str| -> String {
        let ids = sql(db, &format!("SELECT id FROM shipping_addresses WHERE nickname = '{nickname}'"));
        assert_eq!(ids.len(), 1, "{nickname}: {ids:?}");
        ids[0].clone()
    };
    let (home, work) = (id_of("Home"), id_of("Work"));
    // The purchase's address for items without their own; an item's own id over it.
    let body = format!(
        "<purchase><currency>USD</currency><shipping_address_id>{home}</shipping_address_id>\
         <account><account_code>buyer</account_code></account><adjustments>{}{}</adjustments>\
         <subscriptions><subscription><plan_code>silver</plan_code><shipping_address_id>{work}</shipping_address_id>\
         </subscription></subscriptions></purchase>",
        adjustment("ToHome", 100, 1, ""),
        adjustment("ToWork", 200, 1, &format!("<shipping_address_id>{work}</shipping_address_id>")),
    );
    let r = send(&s, "2.11", "/v2/purchases", &body);
    status(&r, 201);
    let lines = shipped(db, &location_number(&r));
    assert!(lines.contains(&"ToHome:Home".to_owned()), "{lines:?}");
    assert!(lines.contains(&"ToWork:Work".to_owned()), "{lines:?}");
    assert!(lines.iter().filter(|l| !l.starts_with("To")).all(|l| l.ends_with(":Work")), "{lines:?}");
    // No address anywhere: the lines ship nowhere.
    let body = format!(
        "<purchase><currency>USD</currency><account><account_code>payer</account_code></account>\
         <collection_method>manual</collection_method><adjustments>{}</adjustments></purchase>",
        adjustment("Loose", 100, 1, "")
    );
    let r = send(&s, "2.11", "/v2/purchases", &body);
    status(&r, 201);
    assert_eq!(shipped(db, &location_number(&r)), ["Loose:-"]);

    // ---- credits only: a legacy invoice of credit on a site without Credit Memos ----
    let body = format!(
        "<purchase><currency>USD</currency><account><account_code>payer</account_code></account>\
         <adjustments>{}</adjustments></purchase>",
        adjustment("Goodwill", -500, 1, "")
    );
    let r = send(&s, "2.11", "/v2/purchases", &body);
    status(&r, 201);
    has(&r, &cents("total_in_cents", -500));
    lacks(&r, "<transaction ");

    // ---- credits only on a site with Credit Memos: a credit invoice in `credit_invoices` ----
    let made = s.cli_json(&["site", "create", "--name", "memos", "--credit-memos"]);
    let memos = made["private_key"].as_str().expect("key").to_owned();
    let body = format!(
        "<purchase><currency>USD</currency><credit_customer_notes>Sorry</credit_customer_notes>\
         <account><account_code>credited</account_code></account><adjustments>{}{}</adjustments></purchase>",
        adjustment("Goodwill", -500, 2, ""),
        adjustment("Fee", 300, 1, "")
    );
    let r = authed_with(&s, &memos, "POST", "/v2/purchases", &xml_at("2.11"), &body);
    status(&r, 201);
    // -1000 + 300 = -700 owed to the account.
    has(&r, "<charge_invoice nil=\"nil\">");
    has(&r, "<type>credit</type>");
    has(&r, "<customer_notes>Sorry</customer_notes>");
    has(&r, &cents("total_in_cents", -700));
    lacks(&r, "<transaction ");
    let balance = authed_with(&s, &memos, "GET", "/v2/accounts/credited/balance", &[("X-Api-Version", "2.11")], "");
    status(&balance, 200);
    assert_eq!(tag(&balance.body, "USD").as_deref(), Some("-700"), "{}", balance.body);

    // ---- refusals: nothing written ----
    let refuse = |body: &str| send(&s, "2.11", "/v2/purchases", body);
    let account = "<account><account_code>nobody</account_code></account>";
    let one = adjustment("X", 100, 1, "");
    refused(
        &refuse(&format!(
            "<purchase><currency>USD</currency>{account}<adjustments>{one}</adjustments>\
             <coupon_codes><coupon_code>save10</coupon_code></coupon_codes></purchase>"
        )),
        "purchase.coupon_codes",
        "invalid",
    );
    refused(&refuse(&format!("<purchase><currency>USD</currency>{account}</purchase>")), "purchase.base", "blank");
    // Only a subscription in its trial: nothing to invoice now.
    refused(
        &refuse(&format!(
            "<purchase><currency>USD</currency>{account}<subscriptions><subscription><plan_code>silver</plan_code>\
             </subscription></subscriptions></purchase>"
        )),
        "purchase.base",
        "invalid",
    );
    refused(
        &refuse(&format!(
            "<purchase><currency>USD</currency>{account}<adjustments>{}</adjustments></purchase>",
            adjustment("X", 100, 1, "<currency>USD</currency>")
        )),
        "purchase.adjustments[0].currency",
        "invalid",
    );
    refused(
        &refuse(&format!(
            "<purchase><currency>USD</currency>{account}<subscriptions><subscription><plan_code>tin</plan_code>\
             </subscription></subscriptions></purchase>"
        )),
        "purchase.subscriptions[0].plan_code",
        "not_found",
    );
    refused(
        &refuse(&format!(
            "<purchase><currency>USD</currency>{account}<adjustments>{}</adjustments></purchase>",
            adjustment("X", 100, 0, "")
        )),
        "purchase.adjustments[0].quantity",
        "invalid",
    );
    refused(
        &refuse(&format!(
            "<purchase><currency>USD</currency><shipping_address_id>{home}</shipping_address_id>\
             <account><account_code>nobody</account_code><shipping_addresses>{}</shipping_addresses></account>\
             <adjustments>{one}</adjustments></purchase>",
            address("New", "Fresno")
        )),
        "purchase.shipping_address_id",
        "invalid",
    );
    refused(
        &refuse(&format!(
            "<purchase><currency>USD</currency>{account}<adjustments>{}</adjustments></purchase>",
            adjustment("X", 100, 1, &format!("<shipping_address_id>1</shipping_address_id>{}", address("A", "B")))
        )),
        "purchase.adjustments[0].shipping_address_id",
        "invalid",
    );
    refused(
        &refuse(&format!(
            "<purchase><currency>USD</currency><shipping_address_id>{home}</shipping_address_id>{account}\
             <adjustments>{one}</adjustments></purchase>"
        )),
        "purchase.shipping_address_id",
        "invalid",
    );
    refused(
        &refuse(&format!(
            "<purchase><currency>USD</currency>{account}<adjustments><adjustment><description>X</description>\
             </adjustment></adjustments></purchase>"
        )),
        "purchase.adjustments[0].unit_amount_in_cents",
        "not_a_number",
    );
    refused(
        &refuse(&format!(
            "<purchase><currency>USD</currency>{account}<subscriptions><subscription><plan_code>gold</plan_code>\
             <subscription_add_ons><subscription_add_on><add_on_code>desk</add_on_code></subscription_add_on>\
             </subscription_add_ons></subscription></subscriptions></purchase>"
        )),
        "purchase.subscriptions[0].subscription_add_ons[0].add_on_code",
        "not_found",
    );
    refused(
        &refuse(&format!(
            "<purchase><currency>GBP</currency>{account}<subscriptions><subscription><plan_code>gold</plan_code>\
             </subscription></subscriptions></purchase>"
        )),
        "purchase.subscriptions[0].plan_code",
        "invalid",
    );
    // A card redeemed already.
    let r = refuse(&format!(
        "<purchase><currency>USD</currency>{account}<adjustments>{one}</adjustments>\
         <gift_card><redemption_code>{code}</redemption_code></gift_card></purchase>"
    ));
    assert_error(&r, 400, "gift_card_already_redeemed");
    status(&authed(&s, "GET", "/v2/accounts/nobody", &[("X-Api-Version", "2.11")], ""), 404);
}

#[test]
fn purchases_on_one_invoice_all_or_nothing() {
    on_both_backends("purchases", purchases);
}

/// A purchase with a percent coupon and a gift card: the discount (never on setup fees, on the
/// one-off charges as the coupon allows) before the gift card's credit, the preview equal to the
/// purchase, the redemption kept on success and taken back on a decline, refusals.
fn purchases_with_coupons(db: &str) {
    let s = serve_at(db, T0, &[]);
    catalogue(&s);
    let coupon = "<coupon><coupon_code>tenoff</coupon_code><name>Ten off</name>\
                  <discount_type>percent</discount_type><discount_percent>10</discount_percent>\
                  <applies_to_non_plan_charges>true</applies_to_non_plan_charges></coupon>";
    status(&send(&s, "2.11", "/v2/coupons", coupon), 201);
    let code = buy_gift_card(&s);
    let body = |account: &str, token: &str, coupons: &str, gift: bool| {
        let gift = if gift {
            format!("<gift_card><redemption_code>{code}</redemption_code></gift_card>")
        } else {
            String::new()
        };
        format!(
            "<purchase><currency>USD</currency>\
             <account><account_code>{account}</account_code><billing_info><token_id>{token}</token_id></billing_info></account>\
             <adjustments>{}{}</adjustments>\
             <subscriptions><subscription><plan_code>gold</plan_code><quantity>2</quantity></subscription>\
             <subscription><plan_code>silver</plan_code></subscription></subscriptions>\
             <coupon_codes>{coupons}</coupon_codes>{gift}</purchase>",
            adjustment("Widget", 1500, 2, ""),
            adjustment("Gadget", 250, 1, ""),
        )
    };
    let tenoff = "<coupon_code>tenoff</coupon_code>";
    // Gold 2 x 1000 = 2000 and its setup fee 500 (not discounted), silver in its trial 0,
    // Widget 3000, Gadget 250: 5750 before discount; 10 % of 2000 + 3000 + 250 = 525 off:
    // 5225, of which the gift card pays 2000 and the card 3225.
    let preview = send(&s, "2.11", "/v2/purchases/preview", &body("cbuyer", "unused", tenoff, true));
    status(&preview, 200);
    has(&preview, &cents("subtotal_before_discount_in_cents", 5750));
    has(&preview, &cents("discount_in_cents", 525));
    has(&preview, &cents("total_in_cents", 5225));
    assert_eq!(count(&s, "/v2/coupons/tenoff/redemptions"), 0, "a preview redeems nothing");

    let made = send(&s, "2.11", "/v2/purchases", &body("cbuyer", &card_token(&s, "4111111111111111"), tenoff, true));
    status(&made, 201);
    has(&made, &cents("subtotal_before_discount_in_cents", 5750));
    has(&made, &cents("discount_in_cents", 525));
    has(&made, &cents("total_in_cents", 5225));
    has(&made, &cents("amount_in_cents", 3225));
    for (line, discount) in [(2000, 200), (3000, 300), (250, 25)] {
        has(&made, &format!("{}\n", cents("discount_in_cents", discount)));
        has(&made, &cents("total_in_cents", line - discount));
    }
    let number = location_number(&made);
    let redemptions = get(&s, "2.11", &format!("/v2/invoices/{number}/redemptions"));
    status(&redemptions, 200);
    has(&redemptions, "<coupon_code>tenoff</coupon_code>");
    let mine = get(&s, "2.11", "/v2/accounts/cbuyer/redemptions");
    has(&mine, "<state>active</state>");
    has(&mine, &cents("total_discounted_in_cents", 525));

    // A declined purchase takes its redemption back (the account stays with its failed invoice).
    let declined =
        send(&s, "2.11", "/v2/purchases", &body("cdeclined", &card_token(&s, "4000000000000002"), tenoff, false));
    status(&declined, 422);
    has(&declined, "<transaction_error>");
    let left = get(&s, "2.11", "/v2/accounts/cdeclined/redemptions");
    assert_eq!(left.body.matches("<redemption ").count(), 0, "{}", left.body);
    assert_eq!(count(&s, "/v2/coupons/tenoff/redemptions"), 1);

    // Refusals: an unknown coupon, and a coupon on a subscription of the purchase.
    let r = send(&s, "2.11", "/v2/purchases", &body("cother", "unused", "<coupon_code>nope</coupon_code>", false));
    refused(&r, "purchase.coupon_codes", "invalid");
    status(&authed(&s, "GET", "/v2/accounts/cother", &[("X-Api-Version", "2.11")], ""), 404);
}

#[test]
fn purchases_with_a_coupon_and_a_gift_card() {
    on_both_backends("purchases_coupons", purchases_with_coupons);
}
