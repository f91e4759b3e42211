//! Plan and add-on endpoints over HTTP against `rebill serve`, on SQLite and on PostgreSQL:
//! create (201, `Location`, duplicates and racing duplicates 422 `taken`), multi-currency
//! amounts, get (404), partial update, delete (204, then 404 and left out of lists, code still
//! taken), validation (422 with field and symbol, 400 for foreign elements), and lists with
//! keyset pages, `Link`, `X-Records` and HEAD.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

fn start_at(db: &str, now: i64) -> Server {
    start_with(db, Options { clock: Some(now), ..Options::default() })
}

fn post(s: &Server, path: &str, body: &str) -> Reply {
    authed(s, "POST", path, &xml_at("2.11"), body)
}

fn put(s: &Server, path: &str, body: &str) -> Reply {
    authed(s, "PUT", path, &xml_at("2.11"), body)
}

fn get(s: &Server, version: &str, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", version)], "")
}

fn delete(s: &Server, path: &str) -> Reply {
    authed(s, "DELETE", path, &[("X-Api-Version", "2.11")], "")
}

#[track_caller]
fn has(reply: &Reply, element: &str) {
    assert!(reply.body.contains(element), "expected {element} in\n{}", reply.body);
}

#[track_caller]
fn lacks(reply: &Reply, text: &str) {
    assert!(!reply.body.contains(text), "did not expect {text} in\n{}", reply.body);
}

/// Asserts a 422 whose `<errors>` document holds exactly these `(field, symbol, message)`.
#[track_caller]
fn errors(reply: &Reply, expected: &[(&str, &str, &str)]) {
    assert_eq!(reply.status, 422, "{}\n{}", reply.head, reply.body);
    assert_eq!(reply.header("content-type").as_deref(), Some("application/xml; charset=utf-8"));
    let mut body = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<errors>\n");
    for (field, symbol, message) in expected {
        body.push_str(&format!("  <error field=\"{field}\" symbol=\"{symbol}\" lang=\"en-US\">{message}</error>\n"));
    }
    body.push_str("</errors>\n");
    assert_eq!(reply.body, body);
}

/// Asserts a 404 `not_found` with this description.
#[track_caller]
fn not_found(reply: &Reply, description: &str) {
    assert_error(reply, 404, "not_found");
    has(reply, &format!("<description lang=\"en-US\">{description}</description>"));
}

const GOLD: &str = "<plan>\
<plan_code>gold</plan_code>\
<name>Gold &amp; Co</name>\
<description>The gold plan</description>\
<success_url>https://example.com/ok</success_url>\
<cancel_url>https://example.com/cancel</cancel_url>\
<display_donation_amounts type=\"boolean\">true</display_donation_amounts>\
<display_quantity type=\"boolean\">true</display_quantity>\
<display_phone_number type=\"boolean\">false</display_phone_number>\
<bypass_hosted_confirmation type=\"boolean\">true</bypass_hosted_confirmation>\
<unit_name>seat</unit_name>\
<payment_page_tos_link>https://example.com/tos</payment_page_tos_link>\
<payment_page_css></payment_page_css>\
<plan_interval_length type=\"integer\">3</plan_interval_length>\
<plan_interval_unit>months</plan_interval_unit>\
<trial_interval_length type=\"integer\">14</trial_interval_length>\
<trial_interval_unit>days</trial_interval_unit>\
<total_billing_cycles type=\"integer\">12</total_billing_cycles>\
<accounting_code>gold-acc</accounting_code>\
<setup_fee_accounting_code>gold-setup</setup_fee_accounting_code>\
<revenue_schedule_type>at_range_end</revenue_schedule_type>\
<setup_fee_revenue_schedule_type>never</setup_fee_revenue_schedule_type>\
<trial_requires_billing_info type=\"boolean\">false</trial_requires_billing_info>\
<tax_exempt type=\"boolean\">true</tax_exempt>\
<tax_code>SW052000</tax_code>\
<unit_amount_in_cents><USD type=\"integer\">1000</USD><EUR type=\"integer\">800</EUR><JPY>0</JPY></unit_amount_in_cents>\
<setup_fee_in_cents><USD type=\"integer\">500</USD></setup_fee_in_cents>\
</plan>";

fn gold_body(addr: &str) -> String {
    let base = format!("http://{addr}/v2/plans/gold");
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<plan href="{base}">
  <add_ons href="{base}/add_ons"/>
  <plan_code>gold</plan_code>
  <name>Gold &amp; Co</name>
  <description>The gold plan</description>
  <success_url>https://example.com/ok</success_url>
  <cancel_url>https://example.com/cancel</cancel_url>
  <display_donation_amounts type="boolean">true</display_donation_amounts>
  <display_quantity type="boolean">true</display_quantity>
  <display_phone_number type="boolean">false</display_phone_number>
  <bypass_hosted_confirmation type="boolean">true</bypass_hosted_confirmation>
  <unit_name>seat</unit_name>
  <payment_page_tos_link>https://example.com/tos</payment_page_tos_link>
  <payment_page_css></payment_page_css>
  <plan_interval_length type="integer">3</plan_interval_length>
  <plan_interval_unit>months</plan_interval_unit>
  <trial_interval_length type="integer">14</trial_interval_length>
  <trial_interval_unit>days</trial_interval_unit>
  <total_billing_cycles type="integer">12</total_billing_cycles>
  <accounting_code>gold-acc</accounting_code>
  <setup_fee_accounting_code>gold-setup</setup_fee_accounting_code>
  <revenue_schedule_type>at_range_end</revenue_schedule_type>
  <setup_fee_revenue_schedule_type>never</setup_fee_revenue_schedule_type>
  <trial_requires_billing_info type="boolean">false</trial_requires_billing_info>
  <tax_exempt type="boolean">true</tax_exempt>
  <tax_code>SW052000</tax_code>
  <created_at type="datetime">2027-01-15T08:00:00Z</created_at>
  <updated_at type="datetime">2027-01-15T08:00:00Z</updated_at>
  <unit_amount_in_cents>
    <EUR type="integer">800</EUR>
    <JPY type="integer">0</JPY>
    <USD type="integer">1000</USD>
  </unit_amount_in_cents>
  <setup_fee_in_cents>
    <USD type="integer">500</USD>
  </setup_fee_in_cents>
</plan>
"#
    )
}

/// The smallest plan: defaults for everything else.
fn minimal_body(addr: &str) -> String {
    let base = format!("http://{addr}/v2/plans/basic");
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<plan href="{base}">
  <add_ons href="{base}/add_ons"/>
  <plan_code>basic</plan_code>
  <name>Basic</name>
  <description nil="nil"></description>
  <success_url nil="nil"></success_url>
  <cancel_url nil="nil"></cancel_url>
  <display_donation_amounts type="boolean">false</display_donation_amounts>
  <display_quantity type="boolean">false</display_quantity>
  <display_phone_number type="boolean">false</display_phone_number>
  <bypass_hosted_confirmation type="boolean">false</bypass_hosted_confirmation>
  <unit_name nil="nil"></unit_name>
  <payment_page_tos_link nil="nil"></payment_page_tos_link>
  <payment_page_css nil="nil"></payment_page_css>
  <plan_interval_length type="integer">1</plan_interval_length>
  <plan_interval_unit>months</plan_interval_unit>
  <trial_interval_length type="integer">0</trial_interval_length>
  <trial_interval_unit>days</trial_interval_unit>
  <total_billing_cycles type="integer" nil="nil"></total_billing_cycles>
  <accounting_code nil="nil"></accounting_code>
  <setup_fee_accounting_code nil="nil"></setup_fee_accounting_code>
  <revenue_schedule_type>evenly</revenue_schedule_type>
  <setup_fee_revenue_schedule_type>evenly</setup_fee_revenue_schedule_type>
  <trial_requires_billing_info type="boolean">true</trial_requires_billing_info>
  <tax_exempt type="boolean">false</tax_exempt>
  <tax_code nil="nil"></tax_code>
  <created_at type="datetime">2027-01-15T08:00:00Z</created_at>
  <updated_at type="datetime">2027-01-15T08:00:00Z</updated_at>
  <unit_amount_in_cents>
    <USD type="integer">1500</USD>
  </unit_amount_in_cents>
  <setup_fee_in_cents></setup_fee_in_cents>
</plan>
"#
    )
}

fn plan_lifecycle(s: &Server) {
    // Create with every request field: 201, Location, the whole document; currencies in order.
    let r = post(s, "/v2/plans", GOLD);
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.header("location").as_deref(), Some(format!("http://{}/v2/plans/gold", s.addr).as_str()));
    assert_eq!(r.header("content-type").as_deref(), Some("application/xml; charset=utf-8"));
    assert_eq!(r.body, gold_body(&s.addr));
    let r = get(s, "2.11", "/v2/plans/gold");
    assert_eq!((r.status, r.body), (200, gold_body(&s.addr)));
    // Plans read the same at every version.
    for version in ["2.0", "2.5", "2.10"] {
        assert_eq!(get(s, version, "/v2/plans/gold").body, gold_body(&s.addr), "{version}");
    }

    // The minimal plan, written at 2.0.
    let minimal = "<plan><plan_code>basic</plan_code><name>Basic</name>\
                   <unit_amount_in_cents><USD>1500</USD></unit_amount_in_cents></plan>";
    let r = authed(s, "POST", "/v2/plans", &xml_at("2.0"), minimal);
    assert_eq!((r.status, r.body.as_str()), (201, minimal_body(&s.addr).as_str()));

    // The same code again: 422 taken; nothing changed.
    let r = post(
        s,
        "/v2/plans",
        "<plan><plan_code>gold</plan_code><name>Other</name><unit_amount_in_cents><USD>1</USD></unit_amount_in_cents></plan>",
    );
    assert_eq!(
        r.body,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<errors>\n  <error field=\"plan.plan_code\" symbol=\"taken\" lang=\"en-US\">has already been taken</error>\n</errors>\n"
    );
    assert_eq!(r.status, 422);
    assert_eq!(get(s, "2.11", "/v2/plans/gold").body, gold_body(&s.addr));

    // Unknown codes: 404 on every plan endpoint.
    not_found(&get(s, "2.11", "/v2/plans/silver"), "Couldn't find Plan with plan_code = silver");
    not_found(&put(s, "/v2/plans/silver", "<plan><name>x</name></plan>"), "Couldn't find Plan with plan_code = silver");
    not_found(&delete(s, "/v2/plans/silver"), "Couldn't find Plan with plan_code = silver");

    // A partial update: only the elements sent change; a money element replaces its whole set.
    s.set_clock(T0 + 90);
    let r = put(
        s,
        "/v2/plans/gold",
        "<plan><name>Gold 2</name><plan_interval_length>1</plan_interval_length>\
         <plan_interval_unit>days</plan_interval_unit><tax_exempt>false</tax_exempt><description></description>\
         <unit_amount_in_cents><GBP>700</GBP><USD>1200</USD></unit_amount_in_cents></plan>",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let expected = gold_body(&s.addr)
        .replace("<name>Gold &amp; Co</name>", "<name>Gold 2</name>")
        .replace("<description>The gold plan</description>", "<description></description>")
        .replace(
            "<plan_interval_length type=\"integer\">3</plan_interval_length>",
            "<plan_interval_length type=\"integer\">1</plan_interval_length>",
        )
        .replace("<plan_interval_unit>months</plan_interval_unit>", "<plan_interval_unit>days</plan_interval_unit>")
        .replace("<tax_exempt type=\"boolean\">true</tax_exempt>", "<tax_exempt type=\"boolean\">false</tax_exempt>")
        .replace(
            "<updated_at type=\"datetime\">2027-01-15T08:00:00Z</updated_at>",
            "<updated_at type=\"datetime\">2027-01-15T08:01:30Z</updated_at>",
        )
        .replace(
            "<EUR type=\"integer\">800</EUR>\n    <JPY type=\"integer\">0</JPY>\n    <USD type=\"integer\">1000</USD>",
            "<GBP type=\"integer\">700</GBP>\n    <USD type=\"integer\">1200</USD>",
        );
    assert_eq!(r.body, expected);
    assert_eq!(get(s, "2.11", "/v2/plans/gold").body, expected);
    // An empty setup fee set removes the setup fees; an empty body changes nothing but the time.
    let r = put(s, "/v2/plans/gold", "<plan><setup_fee_in_cents></setup_fee_in_cents></plan>");
    assert_eq!(r.status, 200, "{}", r.body);
    has(&r, "<setup_fee_in_cents></setup_fee_in_cents>");
    has(&r, "<USD type=\"integer\">1200</USD>");
    let r = put(s, "/v2/plans/gold", "<plan/>");
    assert_eq!(r.status, 200, "{}", r.body);
    has(&r, "<name>Gold 2</name>");

    // plan_code may be repeated but not changed.
    assert_eq!(put(s, "/v2/plans/gold", "<plan><plan_code>gold</plan_code></plan>").status, 200);
    let r = put(s, "/v2/plans/gold", "<plan><plan_code>platinum</plan_code></plan>");
    errors(&r, &[("plan.plan_code", "invalid", "can't be changed")]);
    not_found(&get(s, "2.11", "/v2/plans/platinum"), "Couldn't find Plan with plan_code = platinum");

    // Delete: 204 without a body; afterwards the plan is gone from the API, its code taken.
    let r = delete(s, "/v2/plans/gold");
    assert_eq!((r.status, r.body.as_str()), (204, ""));
    not_found(&get(s, "2.11", "/v2/plans/gold"), "Couldn't find Plan with plan_code = gold");
    not_found(&put(s, "/v2/plans/gold", "<plan><name>x</name></plan>"), "Couldn't find Plan with plan_code = gold");
    not_found(&delete(s, "/v2/plans/gold"), "Couldn't find Plan with plan_code = gold");
    not_found(&get(s, "2.11", "/v2/plans/gold/add_ons"), "Couldn't find Plan with plan_code = gold");
    let list = get(s, "2.11", "/v2/plans");
    assert_eq!(list.header("x-records").as_deref(), Some("1"));
    lacks(&list, "<plan_code>gold</plan_code>");
    has(&list, "<plan_code>basic</plan_code>");
    let r = post(s, "/v2/plans", GOLD);
    errors(&r, &[("plan.plan_code", "taken", "has already been taken")]);
}

fn plan_validation(s: &Server) {
    let cents = "<unit_amount_in_cents><USD>100</USD></unit_amount_in_cents>";
    // Every missing field at once.
    errors(
        &post(s, "/v2/plans", "<plan><plan_interval_length>0</plan_interval_length></plan>"),
        &[
            ("plan.plan_code", "blank", "can't be blank"),
            ("plan.name", "blank", "can't be blank"),
            ("plan.unit_amount_in_cents", "blank", "can't be blank"),
            ("plan.plan_interval_length", "greater_than", "must be greater than 0"),
        ],
    );
    errors(
        &post(s, "/v2/plans", &format!("<plan><plan_code> </plan_code><name></name>{cents}</plan>")),
        &[("plan.plan_code", "blank", "can't be blank"), ("plan.name", "blank", "can't be blank")],
    );
    errors(
        &post(s, "/v2/plans", "<plan><plan_code>p</plan_code><name>P</name><unit_amount_in_cents/></plan>"),
        &[("plan.unit_amount_in_cents", "empty", "can't be empty")],
    );
    errors(
        &post(
            s,
            "/v2/plans",
            "<plan><plan_code>p</plan_code><name>P</name>\
             <unit_amount_in_cents><USD>-1</USD><EUR>100000001</EUR><GBP>100000000</GBP></unit_amount_in_cents>\
             <setup_fee_in_cents><USD>-5</USD></setup_fee_in_cents>\
             <trial_interval_length>-1</trial_interval_length><total_billing_cycles>0</total_billing_cycles></plan>",
        ),
        &[
            ("plan.unit_amount_in_cents.USD", "greater_than_or_equal_to", "must be greater than or equal to 0"),
            ("plan.unit_amount_in_cents.EUR", "less_than_or_equal_to", "must be less than or equal to 100000000"),
            ("plan.setup_fee_in_cents.USD", "greater_than_or_equal_to", "must be greater than or equal to 0"),
            ("plan.trial_interval_length", "greater_than_or_equal_to", "must be greater than or equal to 0"),
            ("plan.total_billing_cycles", "greater_than", "must be greater than 0"),
        ],
    );
    // Amounts are integer cents.
    errors(
        &post(
            s,
            "/v2/plans",
            "<plan><plan_code>p</plan_code><name>P</name><unit_amount_in_cents><USD>10.5</USD></unit_amount_in_cents></plan>",
        ),
        &[("plan.unit_amount_in_cents.USD", "not_a_number", "is not a number")],
    );
    errors(
        &post(
            s,
            "/v2/plans",
            &format!(
                "<plan><plan_code>p</plan_code><name>P</name>{cents}<plan_interval_length>x</plan_interval_length></plan>"
            ),
        ),
        &[("plan.plan_interval_length", "not_a_number", "is not a number")],
    );
    // Interval units are days or months.
    errors(
        &post(
            s,
            "/v2/plans",
            &format!(
                "<plan><plan_code>p</plan_code><name>P</name>{cents}<plan_interval_unit>weeks</plan_interval_unit></plan>"
            ),
        ),
        &[(
            "plan.plan_interval_unit",
            "inclusion",
            "is not included in the list (a valid interval_unit (one of: days, months))",
        )],
    );
    // Read-only elements: 422; unknown elements and non-currency money children: 400.
    errors(
        &post(
            s,
            "/v2/plans",
            &format!(
                "<plan><plan_code>p</plan_code><name>P</name>{cents}<created_at>2020-01-01T00:00:00Z</created_at></plan>"
            ),
        ),
        &[("plan.created_at", "invalid", "is read-only")],
    );
    let r =
        post(s, "/v2/plans", &format!("<plan><plan_code>p</plan_code><name>P</name>{cents}<color>red</color></plan>"));
    assert_error(&r, 400, "invalid_xml");
    has(&r, "<details>Unacceptable tags &lt;color&gt; at plan.color</details>");
    let r = post(
        s,
        "/v2/plans",
        "<plan><plan_code>p</plan_code><name>P</name><unit_amount_in_cents><usd>1</usd></unit_amount_in_cents></plan>",
    );
    assert_error(&r, 400, "invalid_xml");
    assert_error(&authed(s, "POST", "/v2/plans", &[("X-Api-Version", "2.11")], ""), 400, "invalid_xml");
    assert_error(&post(s, "/v2/plans", "<account><account_code>p</account_code></account>"), 400, "invalid_xml");
    // Nothing of the above was stored.
    not_found(&get(s, "2.11", "/v2/plans/p"), "Couldn't find Plan with plan_code = p");
    assert_eq!(get(s, "2.11", "/v2/plans").header("x-records").as_deref(), Some("0"));

    // Updates are checked the same way (the missing fields are not required).
    let r = post(s, "/v2/plans", &format!("<plan><plan_code>p</plan_code><name>P</name>{cents}</plan>"));
    assert_eq!(r.status, 201, "{}", r.body);
    errors(
        &put(s, "/v2/plans/p", "<plan><name> </name><unit_amount_in_cents></unit_amount_in_cents></plan>"),
        &[("plan.name", "blank", "can't be blank"), ("plan.unit_amount_in_cents", "empty", "can't be empty")],
    );
    errors(
        &put(s, "/v2/plans/p", "<plan><plan_interval_length>-3</plan_interval_length></plan>"),
        &[("plan.plan_interval_length", "greater_than", "must be greater than 0")],
    );
    has(&get(s, "2.11", "/v2/plans/p"), "<plan_interval_length type=\"integer\">1</plan_interval_length>");

    // Codes with reserved characters are escaped in hrefs and Location and found again.
    let r = post(s, "/v2/plans", &format!("<plan><plan_code>a+b@c</plan_code><name>x</name>{cents}</plan>"));
    assert_eq!(r.status, 201, "{}", r.body);
    let location = format!("http://{}/v2/plans/a%2Bb%40c", s.addr);
    assert_eq!(r.header("location").as_deref(), Some(location.as_str()));
    has(&r, &format!("<plan href=\"{location}\">"));
    has(&r, &format!("<add_ons href=\"{location}/add_ons\"/>"));
    has(&get(s, "2.11", "/v2/plans/a%2Bb%40c"), "<plan_code>a+b@c</plan_code>");

    // A read-only key may read plans but not write them.
    let created = s.cli_json(&["keys", "create", "--site", "sandbox", "--read-only"]);
    let ro = created["private_key"].as_str().expect("key").to_owned();
    assert_eq!(authed_with(s, &ro, "GET", "/v2/plans/p", &[], "").status, 200);
    assert_error(&authed_with(s, &ro, "DELETE", "/v2/plans/p", &[], ""), 403, "forbidden");
}

fn add_on_body(addr: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<add_on href="http://{addr}/v2/plans/gold/add_ons/ip">
  <plan href="http://{addr}/v2/plans/gold"/>
  <add_on_code>ip</add_on_code>
  <name>Extra IP</name>
  <default_quantity type="integer">2</default_quantity>
  <display_quantity_on_hosted_page type="boolean">true</display_quantity_on_hosted_page>
  <display_quantity type="boolean">true</display_quantity>
  <add_on_type>fixed</add_on_type>
  <measured_unit_id type="integer" nil="nil"></measured_unit_id>
  <usage_type nil="nil"></usage_type>
  <usage_percentage type="float" nil="nil"></usage_percentage>
  <optional type="boolean">false</optional>
  <accounting_code>ip-acc</accounting_code>
  <revenue_schedule_type>at_range_start</revenue_schedule_type>
  <tax_code>T1</tax_code>
  <unit_amount_in_cents>
    <EUR type="integer">150</EUR>
    <USD type="integer">200</USD>
  </unit_amount_in_cents>
  <created_at type="datetime">2027-01-15T08:00:00Z</created_at>
  <updated_at type="datetime">2027-01-15T08:00:00Z</updated_at>
</add_on>
"#
    )
}

const IP: &str = "<add_on><add_on_code>ip</add_on_code><name>Extra IP</name>\
<default_quantity type=\"integer\">2</default_quantity>\
<display_quantity_on_hosted_page>true</display_quantity_on_hosted_page><display_quantity>true</display_quantity>\
<add_on_type>fixed</add_on_type><optional>false</optional><accounting_code>ip-acc</accounting_code>\
<revenue_schedule_type>at_range_start</revenue_schedule_type><tax_code>T1</tax_code>\
<unit_amount_in_cents><USD>200</USD><EUR>150</EUR></unit_amount_in_cents></add_on>";

fn add_ons(s: &Server) {
    assert_eq!(post(s, "/v2/plans", GOLD).status, 201);
    let silver = "<plan><plan_code>silver</plan_code><name>Silver</name>\
                  <unit_amount_in_cents><USD>500</USD></unit_amount_in_cents></plan>";
    assert_eq!(post(s, "/v2/plans", silver).status, 201);

    // Create: 201, Location under the plan, the whole document with the plan link.
    let r = post(s, "/v2/plans/gold/add_ons", IP);
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.header("location").as_deref(), Some(format!("http://{}/v2/plans/gold/add_ons/ip", s.addr).as_str()));
    assert_eq!(r.body, add_on_body(&s.addr));
    assert_eq!(get(s, "2.11", "/v2/plans/gold/add_ons/ip").body, add_on_body(&s.addr));
    assert_eq!(get(s, "2.0", "/v2/plans/gold/add_ons/ip").body, add_on_body(&s.addr));

    // Codes are unique per plan.
    errors(&post(s, "/v2/plans/gold/add_ons", IP), &[("add_on.add_on_code", "taken", "has already been taken")]);
    let r = post(
        s,
        "/v2/plans/silver/add_ons",
        "<add_on><add_on_code>ip</add_on_code><unit_amount_in_cents><USD>100</USD></unit_amount_in_cents></add_on>",
    );
    assert_eq!(r.status, 201, "{}", r.body);
    has(&r, &format!("<plan href=\"http://{}/v2/plans/silver\"/>", s.addr));
    has(&r, "<name>ip</name>");
    has(&r, "<default_quantity type=\"integer\">1</default_quantity>");
    has(&r, "<optional type=\"boolean\">true</optional>");

    // 404s name the plan or the add-on.
    not_found(&get(s, "2.11", "/v2/plans/bronze/add_ons"), "Couldn't find Plan with plan_code = bronze");
    not_found(&post(s, "/v2/plans/bronze/add_ons", IP), "Couldn't find Plan with plan_code = bronze");
    not_found(&get(s, "2.11", "/v2/plans/bronze/add_ons/ip"), "Couldn't find Plan with plan_code = bronze");
    let missing = "Couldn't find AddOn with add_on_code = nope";
    not_found(&get(s, "2.11", "/v2/plans/gold/add_ons/nope"), missing);
    not_found(&put(s, "/v2/plans/gold/add_ons/nope", "<add_on><name>x</name></add_on>"), missing);
    not_found(&delete(s, "/v2/plans/gold/add_ons/nope"), missing);

    // Validation.
    errors(
        &post(s, "/v2/plans/gold/add_ons", "<add_on><name>x</name></add_on>"),
        &[
            ("add_on.add_on_code", "blank", "can't be blank"),
            ("add_on.unit_amount_in_cents", "blank", "can't be blank"),
        ],
    );
    errors(
        &post(
            s,
            "/v2/plans/gold/add_ons",
            "<add_on><add_on_code>x</add_on_code><default_quantity>-1</default_quantity>\
             <unit_amount_in_cents><USD>-1</USD><CHF>5</CHF></unit_amount_in_cents></add_on>",
        ),
        &[
            ("add_on.unit_amount_in_cents.USD", "greater_than_or_equal_to", "must be greater than or equal to 0"),
            ("add_on.unit_amount_in_cents.CHF", "inclusion", "is not a currency of the plan"),
            ("add_on.default_quantity", "greater_than_or_equal_to", "must be greater than or equal to 0"),
        ],
    );
    errors(
        &post(
            s,
            "/v2/plans/gold/add_ons",
            "<add_on><add_on_code>x</add_on_code><usage_type>price</usage_type>\
             <unit_amount_in_cents><USD>1</USD></unit_amount_in_cents></add_on>",
        ),
        &[("add_on.usage_type", "invalid", "is only for usage add-ons")],
    );
    errors(
        &post(
            s,
            "/v2/plans/gold/add_ons",
            "<add_on><add_on_code>x</add_on_code><add_on_type>usage</add_on_type></add_on>",
        ),
        &[("add_on.usage_type", "blank", "can't be blank"), ("add_on.unit_amount_in_cents", "blank", "can't be blank")],
    );
    errors(
        &post(
            s,
            "/v2/plans/gold/add_ons",
            "<add_on><add_on_code>x</add_on_code><add_on_type>bundle</add_on_type></add_on>",
        ),
        &[(
            "add_on.add_on_type",
            "inclusion",
            "is not included in the list (a valid add_on_type (one of: fixed, usage))",
        )],
    );
    not_found(&get(s, "2.11", "/v2/plans/gold/add_ons/x"), "Couldn't find AddOn with add_on_code = x");

    // A usage add-on charging a percentage of the usage.
    let r = post(
        s,
        "/v2/plans/gold/add_ons",
        "<add_on><add_on_code>calls</add_on_code><name>Calls</name><add_on_type>usage</add_on_type>\
         <usage_type>percentage</usage_type><usage_percentage>2.5</usage_percentage>\
         <measured_unit_id>7</measured_unit_id></add_on>",
    );
    assert_eq!(r.status, 201, "{}", r.body);
    for element in [
        "<add_on_type>usage</add_on_type>",
        "<usage_type>percentage</usage_type>",
        "<usage_percentage type=\"float\">2.5</usage_percentage>",
        "<measured_unit_id type=\"integer\">7</measured_unit_id>",
        "<unit_amount_in_cents></unit_amount_in_cents>",
    ] {
        has(&r, element);
    }
    errors(
        &put(s, "/v2/plans/gold/add_ons/calls", "<add_on><usage_percentage>101</usage_percentage></add_on>"),
        &[("add_on.usage_percentage", "less_than_or_equal_to", "must be less than or equal to 100")],
    );
    errors(
        &put(s, "/v2/plans/gold/add_ons/calls", "<add_on><usage_percentage>1.23456</usage_percentage></add_on>"),
        &[("add_on.usage_percentage", "invalid", "can have at most 4 decimal places")],
    );
    let r = put(s, "/v2/plans/gold/add_ons/calls", "<add_on><usage_percentage>33.3333</usage_percentage></add_on>");
    assert_eq!(r.status, 200, "{}", r.body);
    has(&r, "<usage_percentage type=\"float\">33.3333</usage_percentage>");
    errors(
        &put(
            s,
            "/v2/plans/gold/add_ons/calls",
            "<add_on><add_on_type>fixed</add_on_type><usage_type>price</usage_type></add_on>",
        ),
        &[("add_on.add_on_type", "invalid", "can't be changed"), ("add_on.usage_type", "invalid", "can't be changed")],
    );

    // A partial update; amounts replace the whole set; the code cannot change.
    s.set_clock(T0 + 60);
    let r = put(
        s,
        "/v2/plans/gold/add_ons/ip",
        "<add_on><name>IP v4</name><unit_amount_in_cents><USD>250</USD></unit_amount_in_cents></add_on>",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let expected = add_on_body(&s.addr)
        .replace("<name>Extra IP</name>", "<name>IP v4</name>")
        .replace(
            "<EUR type=\"integer\">150</EUR>\n    <USD type=\"integer\">200</USD>",
            "<USD type=\"integer\">250</USD>",
        )
        .replace(
            "<updated_at type=\"datetime\">2027-01-15T08:00:00Z</updated_at>",
            "<updated_at type=\"datetime\">2027-01-15T08:01:00Z</updated_at>",
        );
    assert_eq!(r.body, expected);
    assert_eq!(get(s, "2.11", "/v2/plans/gold/add_ons/ip").body, expected);
    errors(
        &put(s, "/v2/plans/gold/add_ons/ip", "<add_on><add_on_code>ip6</add_on_code></add_on>"),
        &[("add_on.add_on_code", "invalid", "can't be changed")],
    );

    // The plan's list; silver's add-on is not in it.
    let list = get(s, "2.11", "/v2/plans/gold/add_ons");
    assert_eq!(list.status, 200);
    assert_eq!(list.header("x-records").as_deref(), Some("2"));
    assert_eq!(
        list.header("link"),
        Some(format!(
            "<http://{}/v2/plans/gold/add_ons?per_page=50&sort=created_at&order=desc>; rel=\"start\"",
            s.addr
        ))
    );
    assert!(
        list.body.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<add_ons type=\"array\">\n  <add_on href=")
    );
    has(&list, "<add_on_code>calls</add_on_code>");
    has(&list, "<add_on_code>ip</add_on_code>");
    let head = authed(s, "HEAD", "/v2/plans/gold/add_ons", &[("X-Api-Version", "2.6")], "");
    assert_eq!((head.status, head.header("x-records").as_deref(), head.body.as_str()), (200, Some("2"), ""));

    // Delete an add-on: 204, then 404 and out of the list; its code stays taken.
    let r = delete(s, "/v2/plans/gold/add_ons/ip");
    assert_eq!((r.status, r.body.as_str()), (204, ""));
    not_found(&get(s, "2.11", "/v2/plans/gold/add_ons/ip"), "Couldn't find AddOn with add_on_code = ip");
    not_found(&delete(s, "/v2/plans/gold/add_ons/ip"), "Couldn't find AddOn with add_on_code = ip");
    assert_eq!(get(s, "2.11", "/v2/plans/gold/add_ons").header("x-records").as_deref(), Some("1"));
    errors(&post(s, "/v2/plans/gold/add_ons", IP), &[("add_on.add_on_code", "taken", "has already been taken")]);

    // Deleting the plan takes its add-ons off the API.
    assert_eq!(delete(s, "/v2/plans/gold").status, 204);
    let gone = "Couldn't find Plan with plan_code = gold";
    not_found(&get(s, "2.11", "/v2/plans/gold/add_ons/calls"), gone);
    not_found(&put(s, "/v2/plans/gold/add_ons/calls", "<add_on/>"), gone);
    not_found(&delete(s, "/v2/plans/gold/add_ons/calls"), gone);
    not_found(&post(s, "/v2/plans/gold/add_ons", IP), gone);
    assert_eq!(get(s, "2.11", "/v2/plans/silver/add_ons").header("x-records").as_deref(), Some("1"));
}

/// The plan codes of a list body, in order.
fn codes(body: &str) -> Vec<String> {
    body.split("<plan_code>").skip(1).map(|p| p.split('<').next().unwrap_or_default().to_owned()).collect()
}

/// The `rel="next"` link's path and query, if any.
fn next(reply: &Reply, s: &Server) -> Option<String> {
    let header = reply.header("link")?;
    header.split(", ").find(|l| l.ends_with("rel=\"next\"")).map(|l| {
        let url = l.trim_start_matches('<').split('>').next().unwrap_or_default();
        url.strip_prefix(&format!("http://{}", s.addr)).expect("a link on the server's host").to_owned()
    })
}

fn lists(s: &Server) {
    let empty = get(s, "2.11", "/v2/plans");
    assert_eq!(empty.body, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plans type=\"array\">\n</plans>\n");
    assert_eq!(empty.header("x-records").as_deref(), Some("0"));
    for (i, at) in [0, 10, 10, 20, 30, 40].iter().enumerate() {
        s.set_clock(T0 + at);
        let body = format!(
            "<plan><plan_code>p{i}</plan_code><name>P{i}</name>\
             <unit_amount_in_cents><USD>{i}00</USD><EUR>{i}50</EUR></unit_amount_in_cents></plan>"
        );
        assert_eq!(post(s, "/v2/plans", &body).status, 201);
    }
    assert_eq!(delete(s, "/v2/plans/p4").status, 204);

    // Pages of two, newest first, followed through Link; the deleted plan is left out.
    let first = get(s, "2.11", "/v2/plans?per_page=2");
    assert_eq!(first.header("x-records").as_deref(), Some("5"));
    assert_eq!(codes(&first.body), ["p5", "p3"]);
    has(&first, "<EUR type=\"integer\">550</EUR>");
    has(&first, "<EUR type=\"integer\">350</EUR>");
    let mut pages = vec![codes(&first.body)];
    let mut link = next(&first, s);
    while let Some(path) = link {
        let r = get(s, "2.11", &path);
        assert_eq!(r.status, 200, "{}", r.body);
        pages.push(codes(&r.body));
        link = next(&r, s);
    }
    assert_eq!(pages, [vec!["p5", "p3"], vec!["p2", "p1"], vec!["p0"]]);

    // Ascending, a time range, sorting by updated_at.
    assert_eq!(codes(&get(s, "2.11", "/v2/plans?order=asc&per_page=3").body), ["p0", "p1", "p2"]);
    let range = get(s, "2.11", "/v2/plans?begin_time=2027-01-15T08:00:10Z&end_time=2027-01-15T08:00:20Z");
    assert_eq!(codes(&range.body), ["p3", "p2", "p1"]);
    assert_eq!(range.header("x-records").as_deref(), Some("3"));
    s.set_clock(T0 + 100);
    assert_eq!(put(s, "/v2/plans/p0", "<plan><name>touched</name></plan>").status, 200);
    assert_eq!(codes(&get(s, "2.11", "/v2/plans?sort=updated_at&per_page=1").body), ["p0"]);
    assert_error(&get(s, "2.11", "/v2/plans?per_page=500"), 400, "invalid_parameter");

    // HEAD counts from 2.6 (no body); below 2.6 it is not a list method.
    let head = authed(s, "HEAD", "/v2/plans", &[("X-Api-Version", "2.6")], "");
    assert_eq!((head.status, head.header("x-records").as_deref(), head.body.as_str()), (200, Some("5"), ""));
    let head = authed(s, "HEAD", "/v2/plans?begin_time=2027-01-15T08:00:30Z", &[("X-Api-Version", "2.11")], "");
    assert_eq!(head.header("x-records").as_deref(), Some("1"));
    let old = authed(s, "HEAD", "/v2/plans", &[("X-Api-Version", "2.5")], "");
    assert_eq!(old.status, 405);
    assert_eq!(old.header("allow").as_deref(), Some("GET"));

    // Add-on lists page the same way.
    for (i, at) in [0, 5, 5].iter().enumerate() {
        s.set_clock(T0 + 200 + at);
        let body = format!(
            "<add_on><add_on_code>a{i}</add_on_code><unit_amount_in_cents><USD>1</USD></unit_amount_in_cents></add_on>"
        );
        assert_eq!(post(s, "/v2/plans/p1/add_ons", &body).status, 201);
    }
    let add_on_codes = |body: &str| -> Vec<String> {
        body.split("<add_on_code>").skip(1).map(|p| p.split('<').next().unwrap_or_default().to_owned()).collect()
    };
    let r = get(s, "2.11", "/v2/plans/p1/add_ons?per_page=2&order=asc");
    assert_eq!(add_on_codes(&r.body), ["a0", "a1"]);
    assert_eq!(r.header("x-records").as_deref(), Some("3"));
    let path = next(&r, s).expect("a next page");
    assert!(path.starts_with("/v2/plans/p1/add_ons?cursor="), "{path}");
    let r = get(s, "2.11", &path);
    assert_eq!((add_on_codes(&r.body), next(&r, s)), (vec!["a2".to_owned()], None));
}

/// Creates racing for one code: exactly one 201, every other one 422 `taken`.
fn racing_creates(s: &Server, path: &'static str, body: &'static str, field: &str) {
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let addr = s.addr.clone();
            let key = s.key.clone();
            std::thread::spawn(move || {
                let auth = format!("Basic {}", basic(&key));
                let request = format!(
                    "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: {auth}\r\n\
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
                && r.body.contains(&format!(
                    "<error field=\"{field}\" symbol=\"taken\" lang=\"en-US\">has already been taken</error>"
                ))
        })
        .count();
    assert_eq!((created, taken), (1, 7), "{replies:#?}");
    let list = authed(s, "GET", path, &[("X-Api-Version", "2.11")], "");
    assert_eq!(list.header("x-records").as_deref(), Some("1"));
}

fn races(s: &Server) {
    racing_creates(
        s,
        "/v2/plans",
        "<plan><plan_code>race</plan_code><name>R</name><unit_amount_in_cents><USD>1</USD></unit_amount_in_cents></plan>",
        "plan.plan_code",
    );
    racing_creates(
        s,
        "/v2/plans/race/add_ons",
        "<add_on><add_on_code>race</add_on_code><unit_amount_in_cents><USD>1</USD></unit_amount_in_cents></add_on>",
        "add_on.add_on_code",
    );
}

#[test]
fn plan_lifecycle_on_both_backends() {
    on_both_backends("plans_lifecycle", |db| plan_lifecycle(&start_at(db, T0)));
}

#[test]
fn plan_requests_are_validated() {
    on_both_backends("plans_validation", |db| plan_validation(&start_at(db, T0)));
}

#[test]
fn add_ons_of_a_plan() {
    on_both_backends("plans_add_ons", |db| add_ons(&start_at(db, T0)));
}

#[test]
fn plan_and_add_on_lists() {
    on_both_backends("plans_lists", |db| lists(&start_at(db, T0)));
}

#[test]
fn racing_creates_of_one_code_make_one_record() {
    on_both_backends("plans_race", |db| races(&start_at(db, T0)));
}
