//! Gift cards end to end over HTTP against `rebill serve`, on SQLite and on PostgreSQL, on a site
//! with Credit Memos and on one without: the products configured with the CLI; every refusal of
//! a purchase (product, amount, currency, delivery, message, country, no billing info, a
//! decline) with nothing of the card kept; a preview that writes nothing; a card bought (its
//! charge invoice, line and transaction), delivered at once or by the sandbox clock at its
//! `deliver_at`; redeemed with a lower-case code into credit (a credit invoice or a legacy
//! invoice) that two later invoices use up, the card's balance falling to the cent; the refusals
//! of a redemption; the list with its filters and cursors; a subscription created with a gift
//! card (its refusals, the redemption taken back after a decline, `started_with_gift`, the first
//! invoice and the renewal paid by the card's credit). Decisions:
//! docs/gift-cards.md.

use rebill_testkit::*;
use serde_json::Value;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;

struct Site<'a> {
    s: &'a Server,
    name: String,
    key: String,
    public_key: String,
    credit_memos: bool,
}

impl Site<'_> {
    fn base(&self) -> String {
        format!("http://{}", self.s.addr)
    }

    fn send(&self, method: &str, path: &str, body: &str) -> Reply {
        authed_with(self.s, &self.key, method, path, &xml_at("2.11"), body)
    }

    fn get_at(&self, version: &str, path: &str) -> Reply {
        authed_with(self.s, &self.key, "GET", path, &[("X-Api-Version", version)], "")
    }

    fn get(&self, path: &str) -> Reply {
        let r = self.get_at("2.11", path);
        status(&r, 200);
        r
    }

    fn count(&self, path: &str) -> i64 {
        let r = authed_with(self.s, &self.key, "HEAD", path, &[("X-Api-Version", "2.11")], "");
        status(&r, 200);
        r.header("x-records").and_then(|v| v.parse().ok()).expect("X-Records")
    }

    fn card_token(&self, number: &str) -> String {
        let body = format!(
            "key={}&number={number}&month=12&year=2031&cvv=123&first_name=Verena&last_name=Example\
             &address1=123+Main+St.&city=San+Francisco&state=CA&postal_code=94105&country=US",
            self.public_key
        );
        let headers = [("Content-Type", "application/x-www-form-urlencoded")];
        let reply = request(self.s, "POST", "/js/v1/token", &headers, &body);
        status(&reply, 200);
        let value: Value = serde_json::from_str(&reply.body).expect("json");
        value["id"].as_str().expect("id").to_owned()
    }

    fn advance(&self, amount: &str) {
        let headers = [("Content-Type", "application/xml; charset=utf-8")];
        let body = format!("<clock><advance>{amount}</advance></clock>");
        status(&authed_with(self.s, &self.key, "POST", "/sandbox/clock", &headers, &body), 200);
    }

    /// `POST /v2/gift_cards` (or its preview).
    fn buy(&self, path: &str, card: &Card) -> Reply {
        self.send("POST", path, &card.xml())
    }

    fn redeem(&self, code: &str, account: &str) -> Reply {
        let body = format!("<recipient_account><account_code>{account}</account_code></recipient_account>");
        self.send("POST", &format!("/v2/gift_cards/{code}/redeem"), &body)
    }

    fn charge(&self, code: &str, cents: i64) -> Reply {
        let body = format!(
            "<adjustment><description>Order</description><unit_amount_in_cents>{cents}</unit_amount_in_cents>\
             <currency>USD</currency></adjustment>"
        );
        status(&self.send("POST", &format!("/v2/accounts/{code}/adjustments"), &body), 201);
        let r = self.send("POST", &format!("/v2/accounts/{code}/invoices"), "");
        status(&r, 201);
        r
    }

    #[track_caller]
    fn balance(&self, code: &str) -> i64 {
        let r = self.get(&format!("/v2/accounts/{code}/balance"));
        tag(&r.body, "USD").expect("USD balance").parse().expect("cents")
    }
}

/// A gift card request.
#[derive(Clone)]
struct Card {
    product_code: String,
    amount: i64,
    currency: String,
    delivery: String,
    gifter: String,
}

impl Card {
    fn new(gifter: &str, amount: i64) -> Self {
        Card {
            product_code: "gift_card".into(),
            amount,
            currency: "USD".into(),
            delivery: "<delivery><method>email</method><email_address>friend@example.com</email_address>\
                       <first_name>Fran</first_name><last_name>Friend</last_name><gifter_name>Gus</gifter_name>\
                       </delivery>"
                .into(),
            gifter: format!("<gifter_account><account_code>{gifter}</account_code></gifter_account>"),
        }
    }

    fn paid_with(mut self, gifter: &str, token: &str) -> Self {
        self.gifter = format!(
            "<gifter_account><account_code>{gifter}</account_code><email>{gifter}@example.com</email>\
             <billing_info><token_id>{token}</token_id></billing_info></gifter_account>"
        );
        self
    }

    fn xml(&self) -> String {
        format!(
            "<gift_card><product_code>{}</product_code><unit_amount_in_cents>{}</unit_amount_in_cents>\
             <currency>{}</currency>{}{}</gift_card>",
            self.product_code, self.amount, self.currency, self.delivery, self.gifter
        )
    }
}

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

#[track_caller]
fn error(reply: &Reply, code: u16, symbol: &str, description: &str) {
    assert_error(reply, code, symbol);
    has(reply, &format!("<description lang=\"en-US\">{description}</description>"));
}

fn cents(name: &str, value: i64) -> String {
    format!("<{name} type=\"integer\">{value}</{name}>")
}

fn at(secs: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp(secs, 0)
        .expect("time")
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The body from the first `<name` element on.
fn from<'a>(body: &'a str, name: &str) -> &'a str {
    body.find(&format!("<{name}")).map_or("", |i| &body[i..])
}

fn scenario(site: &Site) {
    let base = site.base();
    let cm = site.credit_memos;

    // Products, configured with the CLI.
    let added = site.s.cli_json(&[
        "gift-cards",
        "products",
        "add",
        "--site",
        &site.name,
        "--product-code",
        "gift_card",
        "--currency",
        "usd",
        "2000",
        "5000",
    ]);
    assert_eq!(added["added"].as_array().map(Vec::len), Some(2), "{added}");
    site.s.cli(&[
        "gift-cards",
        "products",
        "add",
        "--site",
        &site.name,
        "--product-code",
        "gift_card",
        "--currency",
        "EUR",
        "2000",
    ]);
    // Adding a face value again changes nothing.
    let again = site.s.cli_json(&[
        "gift-cards",
        "products",
        "add",
        "--site",
        &site.name,
        "--product-code",
        "gift_card",
        "--currency",
        "USD",
        "2000",
    ]);
    assert_eq!(again["added"].as_array().map(Vec::len), Some(0));
    site.s.cli(&[
        "gift-cards",
        "products",
        "add",
        "--site",
        &site.name,
        "--product-code",
        "gift_card",
        "--currency",
        "USD",
        "9900",
    ]);
    let removed = site.s.cli_json(&[
        "gift-cards",
        "products",
        "remove",
        "--site",
        &site.name,
        "--product-code",
        "gift_card",
        "--currency",
        "USD",
        "9900",
    ]);
    assert_eq!(removed["removed"], 1);
    let listed = site.s.cli_json(&["gift-cards", "products", "list", "--site", &site.name]);
    let amounts: Vec<(String, i64)> = listed["products"]
        .as_array()
        .expect("products")
        .iter()
        .map(|p| {
            (p["currency"].as_str().unwrap_or_default().to_owned(), p["unit_amount_in_cents"].as_i64().unwrap_or(0))
        })
        .collect();
    assert_eq!(amounts, [("EUR".to_owned(), 2000), ("USD".to_owned(), 2000), ("USD".to_owned(), 5000)]);

    let plan = "<plan><plan_code>gold</plan_code><name>Gold</name>\
                <unit_amount_in_cents><USD>1000</USD><EUR>900</EUR></unit_amount_in_cents></plan>";
    status(&site.send("POST", "/v2/plans", plan), 201);

    // ---- refusals of a purchase: nothing is written ----
    let card = Card::new("giver", 2000);
    let r = site.buy("/v2/gift_cards", &Card { product_code: "gift_cards123".into(), ..card.clone() });
    error(&r, 404, "not_found", "Gift card product with product code 'gift_cards123' not found");
    let r = site.buy("/v2/gift_cards", &Card { amount: 3000, ..card.clone() });
    error(&r, 404, "not_found", "Gift card product with unit amount in cents of '3000' and 'USD' currency not found");
    let r = site.buy("/v2/gift_cards", &Card { currency: "GBP".into(), ..card.clone() });
    error(&r, 404, "not_found", "Gift card product with unit amount in cents of '2000' and 'GBP' currency not found");
    let no_email = "<delivery><method>email</method></delivery>".to_owned();
    let r = site.buy("/v2/gift_cards", &Card { delivery: no_email, ..card.clone() });
    refused(&r, "gift_card.delivery.email_address", "blank");
    let soon = format!(
        "<delivery><method>email</method><email_address>f@example.com</email_address><deliver_at>{}</deliver_at></delivery>",
        at(T0 + 1800)
    );
    refused(
        &site.buy("/v2/gift_cards", &Card { delivery: soon, ..card.clone() }),
        "gift_card.delivery.deliver_at",
        "greater_than_or_equal_to",
    );
    let late = format!(
        "<delivery><method>email</method><email_address>f@example.com</email_address><deliver_at>{}</deliver_at></delivery>",
        at(T0 + 365 * DAY)
    );
    refused(
        &site.buy("/v2/gift_cards", &Card { delivery: late, ..card.clone() }),
        "gift_card.delivery.deliver_at",
        "less_than",
    );
    let long = format!(
        "<delivery><method>email</method><email_address>f@example.com</email_address>\
         <personal_message>{}</personal_message></delivery>",
        "x".repeat(256)
    );
    refused(
        &site.buy("/v2/gift_cards", &Card { delivery: long, ..card.clone() }),
        "gift_card.delivery.personal_message",
        "too_long",
    );
    let post = "<delivery><method>post</method><first_name>Fran</first_name></delivery>".to_owned();
    refused(
        &site.buy("/v2/gift_cards", &Card { delivery: post, ..card.clone() }),
        "gift_card.delivery.address.address1",
        "blank",
    );
    let bad_email =
        "<delivery><method>email</method><email_address>not-an-address</email_address></delivery>".to_owned();
    let r = site.buy("/v2/gift_cards", &Card { delivery: bad_email, ..card.clone() });
    status(&r, 422);
    has(&r, "field=\"gift_card.delivery.email_address\"");
    let country = Card {
        gifter: "<gifter_account><account_code>giver</account_code><address><country>ZZ</country></address></gifter_account>"
            .into(),
        ..card.clone()
    };
    let r = site.buy("/v2/gift_cards", &country);
    status(&r, 422);
    has(&r, "field=\"gift_card.gifter_account.address.country\"");
    // Before 2.8 the country is not checked: the purchase goes on to the missing billing info.
    let r = authed_with(site.s, &site.key, "POST", "/v2/gift_cards", &xml_at("2.7"), &country.xml());
    error(
        &r,
        400,
        "billing_info_required",
        "The gifter account has no billing info; send one with the gift card (gifter_account.billing_info).",
    );
    // A new gifter without billing info is not kept.
    assert_error(&site.get_at("2.11", "/v2/accounts/giver"), 404, "not_found");
    assert_eq!(site.count("/v2/gift_cards"), 0);

    // ---- preview: the card as it would be, nothing written ----
    let r = site.buy("/v2/gift_cards/preview", &card);
    status(&r, 200);
    for expected in [
        "<id type=\"integer\" nil=\"nil\"></id>".to_owned(),
        "<redemption_code></redemption_code>".to_owned(),
        "<gifter_account href=\"\"/>".to_owned(),
        cents("unit_amount_in_cents", 2000),
        "<currency>USD</currency>".to_owned(),
        "<created_at type=\"datetime\" nil=\"nil\"></created_at>".to_owned(),
        "<delivered_at type=\"datetime\" nil=\"nil\"></delivered_at>".to_owned(),
        "<email_address>friend@example.com</email_address>".to_owned(),
    ] {
        has(&r, &expected);
    }
    lacks(&r, "name=\"redeem\"");
    assert_error(&site.get_at("2.11", "/v2/accounts/giver"), 404, "not_found");
    assert_eq!(site.count("/v2/invoices"), 0);

    // ---- a declined payment: 422 with the transaction, no card ----
    let declined = card.clone().paid_with("decliner", &site.card_token("4000000000000002"));
    let r = site.buy("/v2/gift_cards", &declined);
    status(&r, 422);
    has(&r, "<transaction_error>");
    has(&r, "field=\"gift_card.base\" symbol=\"declined\"");
    has(&r, "<status>declined</status>");
    assert_eq!(site.count("/v2/gift_cards"), 0);
    // The new gifter account stays with the failed purchase invoice and its declined transaction.
    site.get("/v2/accounts/decliner");
    let failed = site.get("/v2/invoices/1001");
    has(&failed, "<state>failed</state>");
    has(&failed, &cents("total_in_cents", 2000));
    assert_eq!(site.count("/v2/accounts/decliner/transactions"), 1);
    // Its billing info was not kept (a plain decline).
    assert_error(&site.get_at("2.11", "/v2/accounts/decliner/billing_info"), 404, "not_found");

    // ---- a card bought and delivered at once ----
    let r = site.buy("/v2/gift_cards", &card.clone().paid_with("giver", &site.card_token("4111111111111111")));
    status(&r, 201);
    let id1 = field(&r.body, "id");
    assert_eq!(r.header("location"), Some(format!("{base}/v2/gift_cards/{id1}")));
    let code1 = field(&r.body, "redemption_code");
    assert_eq!(code1.len(), 16);
    assert!(code1.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()), "{code1}");
    for expected in [
        format!("<gift_card href=\"{base}/v2/gift_cards/{id1}\">"),
        format!("<gifter_account href=\"{base}/v2/accounts/giver\"/>"),
        format!("<invoice href=\"{base}/v2/invoices/1002\"/>"),
        format!("<purchase_invoice href=\"{base}/v2/invoices/1002\"/>"),
        "<balance_in_cents type=\"integer\" nil=\"nil\"></balance_in_cents>".to_owned(),
        cents("unit_amount_in_cents", 2000),
        "<product_code>gift_card</product_code>".to_owned(),
        format!("<created_at type=\"datetime\">{}</created_at>", at(T0)),
        format!("<delivered_at type=\"datetime\">{}</delivered_at>", at(T0)),
        "<redeemed_at type=\"datetime\" nil=\"nil\"></redeemed_at>".to_owned(),
        "<method>email</method>".to_owned(),
        "<gifter_name>Gus</gifter_name>".to_owned(),
        format!("<a name=\"redeem\" href=\"{base}/v2/gift_cards/{code1}/redeem\" method=\"post\"/>"),
    ] {
        has(&r, &expected);
    }
    lacks(&r, "<recipient_account");
    lacks(&r, "<redemption_invoice");
    // Its purchase invoice: one gift-card line, not taxed, paid by the approved transaction.
    let invoice = site.get("/v2/invoices/1002");
    for expected in [
        "<state>paid</state>".to_owned(),
        cents("total_in_cents", 2000),
        cents("tax_in_cents", 0),
        cents("discount_in_cents", 0),
        "<product_code>gift_card</product_code>".to_owned(),
        "<tax_exempt type=\"boolean\">true</tax_exempt>".to_owned(),
        "<status>success</status>".to_owned(),
    ] {
        has(&invoice, &expected);
    }
    // `origin` is a Credit Memos element.
    if cm {
        has(&invoice, "<origin>purchase</origin>");
    } else {
        lacks(&invoice, "<origin>purchase</origin>");
    }
    let transaction = from(&invoice.body, "transaction ");
    assert!(transaction.contains(&cents("amount_in_cents", 2000)), "{transaction}");
    // The requested billing info became the gifter's.
    site.get("/v2/accounts/giver/billing_info");
    // Below 2.10 the card has no purchase_invoice link.
    let old = site.get_at("2.9", &format!("/v2/gift_cards/{id1}"));
    status(&old, 200);
    lacks(&old, "<purchase_invoice");
    has(&old, &format!("<invoice href=\"{base}/v2/invoices/1002\"/>"));

    // ---- a card delivered later: the sandbox clock passes its deliver_at ----
    let later = Card {
        amount: 5000,
        delivery: format!(
            "<delivery><method>email</method><email_address>pal@example.com</email_address>\
             <deliver_at>{}</deliver_at><personal_message>Enjoy</personal_message></delivery>",
            at(T0 + 2 * DAY)
        ),
        ..Card::new("giver", 5000)
    };
    let r = site.buy("/v2/gift_cards", &later);
    status(&r, 201);
    let id2 = field(&r.body, "id");
    let code2 = field(&r.body, "redemption_code");
    assert_ne!(code1, code2);
    has(&r, "<delivered_at type=\"datetime\" nil=\"nil\"></delivered_at>");
    has(&r, &format!("<deliver_at type=\"datetime\">{}</deliver_at>", at(T0 + 2 * DAY)));
    has(&r, &format!("<invoice href=\"{base}/v2/invoices/1003\"/>"));
    site.advance("1day");
    has(&site.get(&format!("/v2/gift_cards/{id2}")), "<delivered_at type=\"datetime\" nil=\"nil\"></delivered_at>");
    site.advance("1day");
    let r = site.get(&format!("/v2/gift_cards/{id2}"));
    has(&r, &format!("<delivered_at type=\"datetime\">{}</delivered_at>", at(T0 + 2 * DAY)));
    let now = T0 + 2 * DAY;

    // ---- redemption ----
    let body = format!(
        "<account><account_code>taker</account_code><billing_info><token_id>{}</token_id></billing_info></account>",
        site.card_token("4111111111111111")
    );
    status(&site.send("POST", "/v2/accounts", &body), 201);
    error(
        &site.redeem("NOPENOPENOPENOPE", "taker"),
        400,
        "bad_request",
        "Gift Card with redemption code 'NOPENOPENOPENOPE' not found",
    );
    error(&site.redeem(&code1, "ghost"), 400, "bad_request", "Account with account code 'ghost' not found");
    let r = site.redeem(&code1.to_ascii_lowercase(), "taker");
    status(&r, 200);
    assert_eq!(r.header("location"), Some(format!("{base}/v2/gift_cards/{id1}")));
    for expected in [
        cents("balance_in_cents", 2000),
        format!("<recipient_account href=\"{base}/v2/accounts/taker\"/>"),
        format!("<redemption_invoice href=\"{base}/v2/invoices/1004\"/>"),
        format!("<redeemed_at type=\"datetime\">{}</redeemed_at>", at(now)),
    ] {
        has(&r, &expected);
    }
    lacks(&r, "name=\"redeem\"");
    let credit = site.get("/v2/invoices/1004");
    has(&credit, &cents("total_in_cents", -2000));
    if cm {
        for expected in ["<type>credit</type>", "<origin>gift_card</origin>", "<state>open</state>"] {
            has(&credit, expected);
        }
        has(&credit, &cents("balance_in_cents", -2000));
    } else {
        has(&credit, "<state>paid</state>");
        lacks(&credit, "<type>");
    }
    assert_eq!(site.balance("taker"), -2000);
    error(&site.redeem(&code1, "taker"), 400, "bad_request", "This gift card has already been redeemed.");

    // ---- the credit spent over two invoices: the balance falls to the cent ----
    let r = site.charge("taker", 1200);
    let paid = site.get("/v2/invoices/1005");
    has(&paid, "<state>paid</state>");
    has(&paid, &cents("total_in_cents", 1200));
    lacks(&paid, "<transaction ");
    drop(r);
    has(&site.get(&format!("/v2/gift_cards/{id1}")), &cents("balance_in_cents", 800));
    assert_eq!(site.balance("taker"), -800);
    site.charge("taker", 1500);
    let second = site.get("/v2/invoices/1006");
    has(&second, "<state>paid</state>");
    has(&second, &cents("total_in_cents", 1500));
    // 800 from the card, 700 charged.
    assert!(from(&second.body, "transaction ").contains(&cents("amount_in_cents", 700)), "{}", second.body);
    let r = site.get(&format!("/v2/gift_cards/{id1}"));
    has(&r, &cents("balance_in_cents", 0));
    assert_eq!(site.balance("taker"), 0);
    if cm {
        has(&site.get("/v2/invoices/1004"), "<state>closed</state>");
        has(&site.get("/v2/invoices/1005"), "<credit_payments type=\"array\">");
    }

    // ---- lists and reads ----
    assert_eq!(site.count("/v2/gift_cards"), 2);
    assert_eq!(site.count("/v2/gift_cards?gifter_account_code=giver"), 2);
    assert_eq!(site.count("/v2/gift_cards?recipient_account_code=taker"), 1);
    assert_eq!(site.count("/v2/gift_cards?recipient_account_code=ghost"), 0);
    assert_eq!(site.count("/v2/gift_cards?gifter_account_code=taker"), 0);
    let first = site.get("/v2/gift_cards?per_page=1");
    assert_eq!(first.header("x-records").as_deref(), Some("2"));
    has(&first, &format!("<gift_card href=\"{base}/v2/gift_cards/{id2}\">"));
    let link = first.header("link").expect("Link");
    let next = link
        .split(',')
        .find(|l| l.contains("rel=\"next\""))
        .and_then(|l| l.split(['<', '>']).nth(1))
        .expect("next link")
        .to_owned();
    let path = next.strip_prefix(&base).expect("absolute link");
    let second_page = site.get(path);
    has(&second_page, &format!("<gift_card href=\"{base}/v2/gift_cards/{id1}\">"));
    lacks(&second_page, &format!("/v2/gift_cards/{id2}\""));
    assert_error(&site.get_at("2.11", "/v2/gift_cards/999999"), 404, "not_found");
    assert_error(&site.get_at("2.11", "/v2/gift_cards/abc"), 404, "not_found");

    // ---- a subscription started with a gift ----
    let subscribe = |currency: &str, code: &str, account: &str| {
        let token = site.card_token("4111111111111111");
        format!(
            "<subscription><plan_code>gold</plan_code><currency>{currency}</currency>\
             <account><account_code>{account}</account_code>\
             <billing_info><token_id>{token}</token_id></billing_info></account>\
             <gift_card><redemption_code>{code}</redemption_code></gift_card></subscription>"
        )
    };
    let r = site.send("POST", "/v2/subscriptions", &subscribe("USD", "UNKNOWNUNKNOWN00", "subscriber"));
    error(&r, 404, "not_found", "Gift Card with redemption code UNKNOWNUNKNOWN00 not found");
    let r = site.send("POST", "/v2/subscriptions", &subscribe("USD", &code1, "subscriber"));
    error(&r, 400, "gift_card_already_redeemed", "This gift card has already been redeemed.");
    let r = site.send("POST", "/v2/subscriptions", &subscribe("EUR", &code2, "subscriber"));
    refused(&r, "subscription.gift_card.redemption_code", "invalid");
    assert_eq!(site.count("/v2/subscriptions"), 0);
    assert_error(&site.get_at("2.11", "/v2/accounts/subscriber"), 404, "not_found");
    // A declined first payment refuses the creation: the card stays unredeemed.
    let token = site.card_token("4000000000000002");
    let body = format!(
        "<subscription><plan_code>gold</plan_code><currency>USD</currency>\
         <account><account_code>unlucky</account_code><billing_info><token_id>{token}</token_id></billing_info></account>\
         <gift_card><redemption_code>{code2}</redemption_code></gift_card></subscription>"
    );
    status(&site.send("POST", "/v2/subscriptions", &body), 422);
    has(&site.get(&format!("/v2/gift_cards/{id2}")), "<redeemed_at type=\"datetime\" nil=\"nil\"></redeemed_at>");
    // The declined verification removed the account created for it, as without a gift card.
    assert_error(&site.get_at("2.11", "/v2/accounts/unlucky"), 404, "not_found");
    let r = site.send("POST", "/v2/subscriptions", &subscribe("USD", &code2.to_ascii_lowercase(), "subscriber"));
    status(&r, 201);
    has(&r, "<started_with_gift type=\"boolean\">true</started_with_gift>");
    let uuid = field(&r.body, "uuid");
    has(
        &site.get(&format!("/v2/subscriptions/{uuid}")),
        "<started_with_gift type=\"boolean\">true</started_with_gift>",
    );
    let card2 = site.get(&format!("/v2/gift_cards/{id2}"));
    has(&card2, &format!("<recipient_account href=\"{base}/v2/accounts/subscriber\"/>"));
    // The first invoice took 1000 of the card's 5000; nothing was charged to the card.
    has(&card2, &cents("balance_in_cents", 4000));
    let first = site.get("/v2/accounts/subscriber/invoices");
    has(&first, "<state>paid</state>");
    has(&first, &cents("total_in_cents", 1000));
    lacks(&first, "<transaction ");
    // The renewal a month on is paid by the card's credit too.
    site.advance("1month");
    has(&site.get(&format!("/v2/gift_cards/{id2}")), &cents("balance_in_cents", 3000));
    assert_eq!(site.balance("subscriber"), -3000);
    assert_eq!(site.count("/v2/gift_cards?recipient_account_code=subscriber"), 1);
}

fn gift_cards(db: &str) {
    let s = serve_at(db, T0, &[]);
    let made = s.cli_json(&["site", "create", "--name", "memos", "--credit-memos"]);
    let with = Site {
        s: &s,
        name: "memos".into(),
        key: made["private_key"].as_str().expect("key").to_owned(),
        public_key: made["public_key"].as_str().expect("public key").to_owned(),
        credit_memos: true,
    };
    scenario(&with);
    let without = Site {
        s: &s,
        name: "sandbox".into(),
        key: s.key.clone(),
        public_key: s.public_key.clone(),
        credit_memos: false,
    };
    scenario(&without);
    // Every change left its event.
    let kinds = sql(db, "SELECT kind FROM domain_events WHERE kind LIKE 'gift_card%' ORDER BY id");
    let count = |kind: &str| kinds.iter().filter(|k| k.as_str() == kind).count();
    assert_eq!(
        (
            count("gift_card_product.added"),
            count("gift_card_product.removed"),
            count("gift_card.purchased"),
            count("gift_card.delivered"),
            count("gift_card.redeemed")
        ),
        (8, 2, 4, 4, 4),
        "{kinds:?}"
    );
}

#[test]
fn gift_cards_bought_delivered_redeemed_and_spent_with_and_without_credit_memos() {
    on_both_backends("gift_cards", gift_cards);
}
