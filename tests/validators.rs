//! Every validator rule with its exact error document, on both sides of its version boundary.

use rebill_models::validate::Validate;
use rebill_models::validate::{Operation, Rejection, refusals, reject_decode, validate};
use rebill_models::{Account, BillingInfo, GiftCard, InvoiceRefund, Purchase, Subscription};
use rebill_tests::ctx;
use rebill_xml::{ApiVersion, Features, Mode, XmlResource, from_xml};

/// Decodes a request body and validates it, as the service will: `Ok` or the refusal.
fn check<T: XmlResource + Validate>(doc: &str, version: &str, features: &str, op: Operation) -> Result<T, Rejection> {
    let c = ctx(ApiVersion::parse(version).expect("version"), &Features::parse(features).expect("features"));
    let value: T = from_xml(doc.as_bytes(), &c, Mode::Request).map_err(|e| reject_decode(&e))?;
    validate(&value, &c, op).map_err(Rejection::Invalid)?;
    Ok(value)
}

/// The refusal's status and body.
fn refusal(r: Rejection) -> (u16, String) {
    let c = rebill_tests::example_ctx();
    let body = r.to_xml(&c);
    (r.status(), body.trim_start_matches("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n").to_owned())
}

fn errors(items: &[(&str, &str, &str)]) -> (u16, String) {
    let mut body = String::from("<errors>\n");
    for (field, symbol, text) in items {
        body.push_str(&format!("  <error field=\"{field}\" symbol=\"{symbol}\" lang=\"en-US\">{text}</error>\n"));
    }
    body.push_str("</errors>\n");
    (422, body)
}

const BAD_COUNTRY: &str = "is not a valid 2-letter ISO 3166-1 country code";

#[test]
fn country_is_validated_from_2_8_at_every_path() {
    let account = "<account><account_code>a</account_code><address><country>USA</country></address></account>";
    check::<Account>(account, "2.7", "", Operation::Create).expect("not validated before 2.8");
    let r = check::<Account>(account, "2.8", "", Operation::Create).expect_err("2.8");
    assert_eq!(refusal(r), errors(&[("account.address.country", "invalid", BAD_COUNTRY)]));
    check::<Account>(&account.replace("USA", "US"), "2.8", "", Operation::Create).expect("valid code");

    let subscription = "<subscription><plan_code>gold</plan_code><currency>USD</currency><account><account_code>a</account_code>\
        <address><country>XX</country></address><billing_info><country>ZZ</country></billing_info>\
        <shipping_addresses><shipping_address><country>Narnia</country></shipping_address></shipping_addresses></account>\
        <shipping_address><country>QQ</country></shipping_address></subscription>";
    let subscription = &with_required_address_fields(subscription);
    check::<Subscription>(subscription, "2.7", "", Operation::Create).expect("not validated before 2.8");
    let r = check::<Subscription>(subscription, "2.8", "", Operation::Create).expect_err("2.8");
    assert_eq!(
        refusal(r),
        errors(&[
            ("subscription.account.address.country", "invalid", BAD_COUNTRY),
            ("subscription.account.billing_info.country", "invalid", BAD_COUNTRY),
            ("subscription.account.shipping_addresses[0].country", "invalid", BAD_COUNTRY),
            ("subscription.shipping_address.country", "invalid", BAD_COUNTRY),
        ])
    );

    let billing = "<billing_info><country>U1</country></billing_info>";
    let r = check::<BillingInfo>(billing, "2.11", "", Operation::Update).expect_err("billing info");
    assert_eq!(refusal(r), errors(&[("billing_info.country", "invalid", BAD_COUNTRY)]));

    let gift = "<gift_card><gifter_account><account_code>g</account_code><address><country>Atlantis</country></address>\
        <billing_info><country>DE</country></billing_info></gifter_account></gift_card>";
    let r = check::<GiftCard>(gift, "2.8", "", Operation::Create).expect_err("gift card");
    assert_eq!(refusal(r), errors(&[("gift_card.gifter_account.address.country", "invalid", BAD_COUNTRY)]));
}

#[test]
fn refund_method_and_refund_apply_order_by_version() {
    check::<InvoiceRefund>(
        "<invoice><refund_apply_order>credit</refund_apply_order></invoice>",
        "2.9",
        "",
        Operation::Create,
    )
    .expect("refund_apply_order before 2.10");
    let r = check::<InvoiceRefund>(
        "<invoice><refund_apply_order>credit</refund_apply_order></invoice>",
        "2.10",
        "",
        Operation::Create,
    )
    .expect_err("refund_apply_order from 2.10");
    assert_eq!(refusal(r), errors(&[("invoice.refund_apply_order", "invalid", "is not accepted at API version 2.10")]));
    let r = check::<InvoiceRefund>(
        "<invoice><refund_method>credit_first</refund_method></invoice>",
        "2.9",
        "",
        Operation::Create,
    )
    .expect_err("refund_method before 2.10");
    assert_eq!(refusal(r), errors(&[("invoice.refund_method", "invalid", "is not accepted at API version 2.9")]));
    check::<InvoiceRefund>(
        "<invoice><refund_method>transaction_first</refund_method></invoice>",
        "2.10",
        "",
        Operation::Create,
    )
    .expect("refund_method from 2.10");
}

#[test]
fn refund_credit_memo_values_and_elements_need_the_feature() {
    let all_credit = "<invoice><refund_method>all_credit</refund_method></invoice>";
    let r = check::<InvoiceRefund>(all_credit, "2.10", "", Operation::Create).expect_err("without credit memos");
    assert_eq!(
        refusal(r),
        errors(&[(
            "invoice.refund_method",
            "inclusion",
            "is not included in the list (a valid refund_method (one of: credit_first, transaction_first))"
        )])
    );
    check::<InvoiceRefund>(all_credit, "2.10", "credit_memos", Operation::Create).expect("with credit memos");
    let notes = "<invoice><credit_customer_notes>n</credit_customer_notes></invoice>";
    let r = check::<InvoiceRefund>(notes, "2.11", "", Operation::Create).expect_err("credit memo element");
    assert_eq!(
        refusal(r),
        errors(&[("invoice.credit_customer_notes", "invalid", "requires the credit_memos site feature")])
    );
}

#[test]
fn refund_external_fields_need_external_refund_true() {
    let manual = "<invoice><external_refund>true</external_refund><payment_method>check</payment_method>\
        <description>by check</description><refunded_at>2019-05-12T08:30:00Z</refunded_at></invoice>";
    check::<InvoiceRefund>(manual, "2.10", "credit_memos", Operation::Create).expect("external refund");
    let r = check::<InvoiceRefund>(&manual.replace(">true<", ">false<"), "2.10", "credit_memos", Operation::Create)
        .expect_err("not external");
    let text = "is only allowed when external_refund is true";
    assert_eq!(
        refusal(r),
        errors(&[
            ("invoice.payment_method", "invalid", text),
            ("invoice.description", "invalid", text),
            ("invoice.refunded_at", "invalid", text),
        ])
    );
    let r = check::<InvoiceRefund>(&manual.replace(">true<", ">yes<"), "2.10", "credit_memos", Operation::Create)
        .expect_err("not a boolean");
    assert_eq!(refusal(r), errors(&[("invoice.external_refund", "invalid", "is not a boolean (true or false)")]));
}

#[test]
fn token_id_stands_alone() {
    check::<BillingInfo>("<billing_info><token_id>tok</token_id></billing_info>", "2.11", "", Operation::Update)
        .expect("token only");
    let r = check::<BillingInfo>(
        "<billing_info><token_id>tok</token_id><first_name>A</first_name><number>4111111111111111</number></billing_info>",
        "2.11",
        "",
        Operation::Update,
    )
    .expect_err("token and card");
    let text = "is not allowed together with token_id";
    assert_eq!(
        refusal(r),
        errors(&[("billing_info.first_name", "invalid", text), ("billing_info.number", "invalid", text)])
    );
}

#[test]
fn purchase_rules_change_at_2_8() {
    let with_currency = "<purchase><currency>USD</currency><account><account_code>a</account_code></account>\
        <adjustments><adjustment><unit_amount_in_cents>100</unit_amount_in_cents><currency>USD</currency></adjustment></adjustments></purchase>";
    check::<Purchase>(with_currency, "2.7", "", Operation::Create).expect("currency allowed before 2.8");
    let r = check::<Purchase>(with_currency, "2.8", "", Operation::Create).expect_err("currency from 2.8");
    assert_eq!(
        refusal(r),
        errors(&[(
            "purchase.adjustments[0].currency",
            "invalid",
            "is not allowed in a purchase adjustment from API version 2.8; set the purchase currency"
        )])
    );
    let two = "<purchase><currency>USD</currency><account><account_code>a</account_code></account><subscriptions>\
        <subscription><plan_code>a</plan_code></subscription><subscription><plan_code>b</plan_code></subscription></subscriptions></purchase>";
    check::<Purchase>(two, "2.8", "", Operation::Create).expect("several subscriptions from 2.8");
    let r = check::<Purchase>(two, "2.7", "", Operation::Create).expect_err("one subscription before 2.8");
    assert_eq!(
        refusal(r),
        errors(&[("purchase.subscriptions", "invalid", "holds at most one subscription before API version 2.8")])
    );
}

#[test]
fn required_fields_on_create_only() {
    let r = check::<Subscription>(
        "<subscription><account><email>a@b.co</email></account></subscription>",
        "2.11",
        "",
        Operation::Create,
    )
    .expect_err("missing");
    assert_eq!(
        refusal(r),
        errors(&[
            ("subscription.currency", "blank", "can't be blank"),
            ("subscription.plan_code", "blank", "can't be blank"),
            ("subscription.account.account_code", "blank", "can't be blank"),
        ])
    );
    check::<Account>("<account><email>a@b.co</email></account>", "2.11", "", Operation::Update)
        .expect("update needs no code");
    let r = check::<Account>("<account><email>a@b.co</email></account>", "2.11", "", Operation::Create)
        .expect_err("create");
    assert_eq!(refusal(r), errors(&[("account.account_code", "blank", "can't be blank")]));
    let r = check::<Account>("<account><account_code nil=\"nil\"/></account>", "2.11", "", Operation::Update)
        .expect_err("nil");
    assert_eq!(refusal(r), errors(&[("account.account_code", "blank", "can't be blank")]));
}

#[test]
fn value_formats() {
    let r = check::<Account>(
        "<account><account_code>a</account_code><email>not-an-email</email></account>",
        "2.11",
        "",
        Operation::Create,
    )
    .expect_err("email");
    assert_eq!(refusal(r), errors(&[("account.email", "invalid_email", "is not a valid email address")]));
    let r = check::<Subscription>(
        "<subscription><quantity type=\"integer\">abc</quantity></subscription>",
        "2.11",
        "",
        Operation::Update,
    )
    .expect_err("integer");
    assert_eq!(refusal(r), errors(&[("subscription.quantity", "not_a_number", "is not a number")]));
    let r = check::<Subscription>(
        "<subscription><imported_trial>maybe</imported_trial></subscription>",
        "2.11",
        "",
        Operation::Update,
    )
    .expect_err("boolean");
    assert_eq!(refusal(r), errors(&[("subscription.imported_trial", "invalid", "is not a boolean (true or false)")]));
    let r = check::<Subscription>(
        "<subscription><starts_at>next tuesday</starts_at></subscription>",
        "2.11",
        "",
        Operation::Update,
    )
    .expect_err("datetime");
    assert_eq!(refusal(r), errors(&[("subscription.starts_at", "invalid", "is not an ISO 8601 date-time")]));
}

#[test]
fn broken_xml_is_a_400() {
    let r = check::<Account>("<account><colour>red</colour></account>", "2.11", "", Operation::Create)
        .expect_err("unknown");
    assert_eq!(
        refusal(r),
        (
            400,
            "<error>\n  <symbol>invalid_xml</symbol>\n  <description lang=\"en-US\">The provided XML was invalid.</description>\n  <details>Unacceptable tags &lt;colour&gt; at account.colour</details>\n</error>\n".to_owned()
        )
    );
    let r = check::<Account>("<account><company_name>A & B</company_name></account>", "2.11", "", Operation::Create)
        .expect_err("amp");
    let (status, body) = refusal(r);
    assert_eq!(status, 400);
    assert!(body.contains("<symbol>invalid_xml</symbol>"), "{body}");
}

#[test]
fn stateful_refusals_have_their_documents() {
    let c = rebill_tests::example_ctx();
    let xml = rebill_xml::to_xml(&refusals::simultaneous_request(), &c, Mode::Response);
    assert_eq!(
        xml,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<error>\n  <symbol>simultaneous_request</symbol>\n  <description lang=\"en-US\">A change to this subscription is already in progress; retry shortly.</description>\n</error>\n"
    );
    assert_eq!(
        refusals::not_found("Couldn't find Account with account_code = abc").symbol.as_deref(),
        Some("not_found")
    );
    for e in [
        refusals::imported_trial_not_in_trial(),
        refusals::not_paused(),
        refusals::nothing_to_void(),
        refusals::will_not_invoice(),
    ] {
        assert!(e.symbol.is_some() && e.description.is_some());
    }
}

#[test]
fn purchase_shipping_addresses_from_2_11() {
    let doc = "<purchase><currency>USD</currency><shipping_address_id>7</shipping_address_id><account><account_code>a</account_code>\
        <shipping_address><country>US</country></shipping_address></account><subscriptions><subscription><plan_code>gold</plan_code>\
        <shipping_address_id>8</shipping_address_id></subscription></subscriptions><adjustments><adjustment>\
        <unit_amount_in_cents>100</unit_amount_in_cents><shipping_address><country>FR</country></shipping_address></adjustment>\
        </adjustments></purchase>";
    let doc = &with_required_address_fields(doc);
    let p = check::<Purchase>(doc, "2.11", "", Operation::Create).expect("2.11 purchase");
    assert_eq!(p.shipping_address_id, Some(7));
    let r = check::<Purchase>(doc, "2.10", "", Operation::Create).expect_err("2.10");
    assert_eq!(
        refusal(r),
        errors(&[("purchase.shipping_address_id", "invalid", "is not accepted at API version 2.10")])
    );
    let r = check::<Purchase>(&doc.replace(">FR<", ">France<"), "2.11", "", Operation::Create).expect_err("country");
    assert_eq!(refusal(r), errors(&[("purchase.adjustments[0].shipping_address.country", "invalid", BAD_COUNTRY)]));
}

/// `doc` with the fields a shipping address requires (names, street, city, state, zip) in each
/// `<shipping_address>`, so that only its country is judged.
fn with_required_address_fields(doc: &str) -> String {
    doc.replace(
        "<shipping_address><country>",
        "<shipping_address><first_name>Ada</first_name><last_name>Lovelace</last_name><address1>1 Main St.</address1>\
         <city>Boston</city><state>MA</state><zip>02108</zip><country>",
    )
}

const TOO_LONG_50: &str = "is too long (maximum is 50 characters)";
const TOO_LONG_255: &str = "is too long (maximum is 255 characters)";
const BAD_CODE: &str = "is invalid (use only letters, digits and -_.+@, without ..)";

#[test]
fn codes_are_bounded_path_segments() {
    let account = |code: &str| format!("<account><account_code>{code}</account_code></account>");
    for good in ["a1", "gold-plan", "user@example.com", "abc_123", "user+tag@example.com", "A.B", &"x".repeat(50)] {
        check::<Account>(&account(good), "2.11", "", Operation::Create).unwrap_or_else(|e| panic!("{good}: {e:?}"));
    }
    let r = check::<Account>(&account(&"x".repeat(51)), "2.11", "", Operation::Create).expect_err("51");
    assert_eq!(refusal(r), errors(&[("account.account_code", "too_long", TOO_LONG_50)]));
    // Characters count, not bytes: 50 two-byte letters are too many for a code only because
    // they are not ASCII.
    let r = check::<Account>(&account(&"é".repeat(50)), "2.11", "", Operation::Create).expect_err("é");
    assert_eq!(refusal(r), errors(&[("account.account_code", "invalid", BAD_CODE)]));
    for bad in ["a/b", "..", ".", "a..b", "a b", "a%2Fb", "a?b", "a#b", "ü", "a\tb", "a;b", "a&amp;b"] {
        let r = check::<Account>(&account(bad), "2.11", "", Operation::Create).expect_err(bad);
        assert_eq!(refusal(r), errors(&[("account.account_code", "invalid", BAD_CODE)]), "{bad}");
    }
    // Blank codes are the presence rules' business (the service reports them as `blank`).
    check::<Account>(&account(""), "2.11", "", Operation::Create).expect("empty");
    check::<Account>(&account("  "), "2.11", "", Operation::Create).expect("spaces");
    let r = check::<Account>(&account(" a"), "2.11", "", Operation::Create).expect_err("leading space");
    assert_eq!(refusal(r), errors(&[("account.account_code", "invalid", BAD_CODE)]));
    // Every code field, nested ones and lists of codes too.
    let subscription = "<subscription><plan_code>a/b</plan_code><currency>USD</currency>\
        <account><account_code>..</account_code></account>\
        <subscription_add_ons><subscription_add_on><add_on_code>x y</add_on_code></subscription_add_on></subscription_add_ons>\
        <coupon_codes><coupon_code>ok</coupon_code><coupon_code>no/pe</coupon_code></coupon_codes></subscription>";
    let r = check::<Subscription>(subscription, "2.11", "", Operation::Create).expect_err("codes");
    assert_eq!(
        refusal(r),
        errors(&[
            ("subscription.plan_code", "invalid", BAD_CODE),
            ("subscription.coupon_codes[1]", "invalid", BAD_CODE),
            ("subscription.account.account_code", "invalid", BAD_CODE),
            ("subscription.subscription_add_ons[0].add_on_code", "invalid", BAD_CODE),
        ])
    );
}

#[test]
fn free_text_is_bounded() {
    let account =
        |name: &str| format!("<account><account_code>a</account_code><first_name>{name}</first_name></account>");
    check::<Account>(&account(&"n".repeat(255)), "2.11", "", Operation::Create).expect("255");
    check::<Account>(&account(&"ü".repeat(255)), "2.11", "", Operation::Create).expect("255 characters, 510 bytes");
    let r = check::<Account>(&account(&"n".repeat(256)), "2.11", "", Operation::Create).expect_err("256");
    assert_eq!(refusal(r), errors(&[("account.first_name", "too_long", TOO_LONG_255)]));
    let r = check::<Account>(&account(&"n".repeat(900_000)), "2.11", "", Operation::Update).expect_err("huge");
    assert_eq!(refusal(r), errors(&[("account.first_name", "too_long", TOO_LONG_255)]));
    // Notes are longer.
    let notes = |n: usize| format!("<subscription><customer_notes>{}</customer_notes></subscription>", "c".repeat(n));
    check::<Subscription>(&notes(4000), "2.11", "", Operation::Update).expect("4000");
    let r = check::<Subscription>(&notes(4001), "2.11", "", Operation::Update).expect_err("4001");
    assert_eq!(
        refusal(r),
        errors(&[("subscription.customer_notes", "too_long", "is too long (maximum is 4000 characters)")])
    );
}

#[test]
fn code_characters_agree_with_the_schema() {
    assert_eq!(rebill_models::validate::CODE_CHARACTERS, rebill_schema::CODE_CHARACTERS);
}

#[test]
fn forbidden_characters_are_a_400_naming_the_element() {
    for (body, details) in [
        (
            "<account><first_name>a\u{1}b</first_name></account>",
            "character U+0001 is not allowed in XML at `account.first_name`",
        ),
        (
            "<account><first_name>a&#1;b</first_name></account>",
            "invalid character reference `&#1;` at `account.first_name`",
        ),
        (
            "<account><address><city>&#x0;</city></address></account>",
            "invalid character reference `&#x0;` at `account.address.city`",
        ),
        (
            "<account><last_name>\u{FFFF}</last_name></account>",
            "character U+FFFF is not allowed in XML at `account.last_name`",
        ),
    ] {
        let r = check::<Account>(body, "2.11", "", Operation::Update).expect_err(body);
        let details = details.replace('&', "&amp;");
        assert_eq!(
            refusal(r),
            (
                400,
                format!(
                    "<error>\n  <symbol>invalid_xml</symbol>\n  <description lang=\"en-US\">The provided XML was invalid.</description>\n  <details>{details}</details>\n</error>\n"
                )
            ),
            "{body:?}"
        );
    }
}
