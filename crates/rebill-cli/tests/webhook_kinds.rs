//! Which notifications each operation sends, with their payloads, on both backends against a
//! real receiver; the released Python client parses every body. The kinds table of
//! `docs/webhooks.md` says the same.

use std::process::Command;
use std::time::{Duration, Instant};

use rebill_testkit::receiver::{Received, Receiver};
use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;

#[track_caller]
fn expect(reply: Reply, status: u16) -> Reply {
    assert_eq!(reply.status, status, "{}\n{}", reply.head, reply.body);
    reply
}

/// A service on `db` (clock at T0) with one endpoint at `receiver`.
fn serve(db: &str, receiver: &Receiver) -> Server {
    let key_file = vault_key_file();
    let args = ["--vault-key-file", key_file.as_str(), "--webhook-retry-scale", "0.01"];
    let s = start_with(db, Options { clock: Some(T0), args: &args, ..Options::default() });
    let out = Command::new(bin())
        .args(["--database", db, "webhooks", "add", "--site", "sandbox", "--url", &receiver.url])
        .env("REBILL_VAULT_KEY_FILE", &key_file)
        .output()
        .expect("run rebill");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    s
}

/// Every notification of what the service did so far, once it is delivered: no event is left to
/// turn into notifications and no delivery waits (a delivery is recorded only after the receiver
/// answered it).
fn settled(receiver: &Receiver, s: &Server) -> Vec<Received> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let waiting = sql(
            &s.database,
            "SELECT CAST((SELECT COUNT(*) FROM domain_events WHERE notified = 0) \
             + (SELECT COUNT(*) FROM webhook_deliveries WHERE state IN ('pending', 'retrying')) AS TEXT)",
        );
        if waiting.first().map(String::as_str) == Some("0") {
            return receiver.got();
        }
        assert!(Instant::now() < deadline, "notifications still waiting: {waiting:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A monthly plan of `cents` USD.
fn plan(s: &Server, code: &str, name: &str, cents: i64) {
    let body = format!(
        "<plan><plan_code>{code}</plan_code><name>{name}</name><unit_amount_in_cents><USD>{cents}</USD>\
         </unit_amount_in_cents><plan_interval_length>1</plan_interval_length>\
         <plan_interval_unit>months</plan_interval_unit></plan>"
    );
    expect(authed(s, "POST", "/v2/plans", &xml_at("2.11"), &body), 201);
}

/// Turns Credit Memos on for the sandbox site.
fn credit_memos(db: &str) {
    let out = Command::new(bin())
        .args(["--database", db, "site", "update", "--name", "sandbox", "--credit-memos", "true"])
        .output()
        .expect("run rebill");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The subscription notifications of a subscription's life.
fn subscription_life(db: &str) {
    let receiver = Receiver::start(Vec::new(), None);
    let s = serve(db, &receiver);
    let xml = xml_at("2.11");
    let post = |path: &str, body: &str| authed(&s, "POST", path, &xml, body);
    let put = |path: &str, body: &str| authed(&s, "PUT", path, &xml, body);
    plan(&s, "gold", "Gold", 1000);
    let token = card_token(&s, "4111111111111111");
    let body = format!(
        "<subscription><plan_code>gold</plan_code><currency>USD</currency><account><account_code>c1</account_code>\
         <email>c1@example.com</email><billing_info><token_id>{token}</token_id></billing_info></account></subscription>"
    );
    let created = expect(post("/v2/subscriptions", &body), 201);
    let uuid = field(&created.body, "uuid");
    let all = settled(&receiver, &s);
    let kinds: Vec<String> = all.iter().map(Received::kind).collect();
    for kind in ["new_account_notification", "billing_info_updated_notification", "new_subscription_notification"] {
        assert!(kinds.contains(&kind.to_owned()), "{kind} in {kinds:?}");
    }
    let new = all.iter().find(|r| r.kind() == "new_subscription_notification").expect("new subscription");
    assert!(new.body.contains(&format!("<uuid>{uuid}</uuid>")), "{}", new.body);
    assert!(new.body.contains("<state>active</state>"), "{}", new.body);
    assert!(new.body.contains("<plan_code>gold</plan_code>\n      <name>Gold</name>"), "{}", new.body);
    assert!(new.body.contains("<total_amount_in_cents type=\"integer\">1000</total_amount_in_cents>"), "{}", new.body);
    assert!(new.body.contains("<collection_method>automatic</collection_method>"), "{}", new.body);

    let path = format!("/v2/subscriptions/{uuid}");
    let mut from = all.len();
    // Each step's subscription notifications, once every notification of the step arrived (a
    // change now also sends its invoice's and payment's).
    let mut step = |what: &str, reply: Reply, status: u16, expected: &[&str]| {
        expect(reply, status);
        let subscription_kinds = |all: &[Received]| -> Vec<String> {
            all[from..]
                .iter()
                .map(Received::kind)
                .filter(|k| k.contains("subscription") || k.contains("reactivated"))
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while subscription_kinds(&receiver.got()).len() < expected.len() {
            assert!(Instant::now() < deadline, "{what}: {:?}", subscription_kinds(&receiver.got()));
            std::thread::sleep(Duration::from_millis(20));
        }
        let all = settled(&receiver, &s);
        assert_eq!(subscription_kinds(&all), expected, "{what}");
        from = all.len();
    };
    step("cancel", put(&format!("{path}/cancel"), ""), 200, &["canceled_subscription_notification"]);
    step("reactivate", put(&format!("{path}/reactivate"), ""), 200, &["reactivated_account_notification"]);
    step(
        "change now",
        put(&path, "<subscription><quantity>2</quantity><timeframe>now</timeframe></subscription>"),
        200,
        &["updated_subscription_notification"],
    );
    step(
        "schedule a pause",
        put(
            &format!("{path}/pause"),
            "<subscription><remaining_pause_cycles>1</remaining_pause_cycles></subscription>",
        ),
        200,
        &["scheduled_subscription_pause_notification"],
    );
    step("drop the pause", put(&format!("{path}/resume"), ""), 200, &["subscription_pause_canceled_notification"]);
    step("terminate", put(&format!("{path}/terminate?refund=none"), ""), 200, &["expired_subscription_notification"]);

    let all = settled(&receiver, &s);
    let pause = all.iter().find(|r| r.kind() == "scheduled_subscription_pause_notification").expect("pause");
    assert!(pause.body.contains("<phone nil=\"true\"/>"), "the pause family carries A1: {}", pause.body);
    assert!(
        pause.body.contains("<remaining_pause_cycles type=\"integer\">1</remaining_pause_cycles>"),
        "{}",
        pause.body
    );
    assert!(!pause.body.contains("collection_method"), "{}", pause.body);
    let changed = all.iter().find(|r| r.kind() == "updated_subscription_notification").expect("change");
    assert!(changed.body.contains("<quantity type=\"integer\">2</quantity>"), "{}", changed.body);
    let expired = all.iter().find(|r| r.kind() == "expired_subscription_notification").expect("expired");
    assert!(expired.body.contains("<state>expired</state>"), "{}", expired.body);

    // The released Python client reads them.
    parse_with_python(&all, &uuid);
}

/// Renewals through the scheduler send `renewed_subscription`.
fn renewal(db: &str) {
    let receiver = Receiver::start(Vec::new(), None);
    let s = serve(db, &receiver);
    let xml = xml_at("2.11");
    plan(&s, "m", "M", 500);
    let token = card_token(&s, "4111111111111111");
    let body = format!(
        "<subscription><plan_code>m</plan_code><currency>USD</currency><account><account_code>r1</account_code>\
         <billing_info><token_id>{token}</token_id></billing_info></account></subscription>"
    );
    let uuid = field(&expect(authed(&s, "POST", "/v2/subscriptions", &xml, &body), 201).body, "uuid");
    let before = settled(&receiver, &s).len();
    s.set_clock(T0 + 32 * DAY);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = receiver.got();
        if let Some(r) = got[before..].iter().find(|r| r.kind() == "renewed_subscription_notification") {
            assert!(r.body.contains(&format!("<uuid>{uuid}</uuid>")), "{}", r.body);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no renewal notification: {:?}",
            got.iter().map(Received::kind).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn parse_with_python(all: &[Received], uuid: &str) {
    let dir = std::env::temp_dir().join(format!("rebill-webhook-bodies-{}-{}", std::process::id(), uuid));
    std::fs::create_dir_all(&dir).expect("bodies");
    for (n, r) in all.iter().enumerate() {
        std::fs::write(dir.join(format!("{n:03}.xml")), &r.body).expect("body");
    }
    let program = "import sys, glob, recurly\n\
                   for path in sorted(glob.glob(sys.argv[1] + '/*.xml')):\n\
                   \x20   n = recurly.objects_for_push_notification(open(path, 'rb').read())\n\
                   \x20   s = n.get('subscription')\n\
                   \x20   print(n['type'], n['account'].account_code, s.uuid if s is not None else '-', s.state if s is not None else '-')\n";
    let out = Command::new(python_client()).args(["-c", program]).arg(&dir).output().expect("python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), all.len(), "{text}");
    for (line, r) in lines.iter().zip(all) {
        assert!(line.starts_with(&format!("{} c1 ", r.kind())), "{line}");
        if r.kind().contains("subscription") || r.kind() == "reactivated_account_notification" {
            assert!(line.contains(uuid), "{line}");
        }
    }
    assert!(text.contains(&format!("expired_subscription_notification c1 {uuid} expired")), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The interpreter of the suite's virtualenv with the released Python client.
fn python_client() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("python");
    let requirements = std::fs::read_to_string(dir.join("requirements.txt")).expect("requirements");
    let text: &'static str = Box::leak(requirements.into_boxed_str());
    python_venv("python-venv", &dir.join("requirements.txt"), text, &["import recurly"])
}

#[test]
fn a_subscription_life_sends_its_notifications() {
    on_both_backends("webhook_subscriptions", subscription_life);
}

#[test]
fn a_renewal_sends_renewed_subscription() {
    on_both_backends("webhook_renewal", renewal);
}

/// Invoices and payments: the legacy family without Credit Memos, the charge family with them,
/// payments approved and declined, a refund; every body parsed by the Python client.
fn invoices_and_payments(db: &str) {
    let receiver = Receiver::start(Vec::new(), None);
    let s = serve(db, &receiver);
    let xml = xml_at("2.11");
    plan(&s, "gold", "Gold", 1000);
    let subscribe = |code: &str, card: &str, status: u16| {
        let token = card_token(&s, card);
        let body = format!(
            "<subscription><plan_code>gold</plan_code><currency>USD</currency><account><account_code>{code}\
             </account_code><billing_info><token_id>{token}</token_id></billing_info></account></subscription>"
        );
        expect(authed(&s, "POST", "/v2/subscriptions", &xml, &body), status)
    };

    // Without Credit Memos: the legacy invoice family.
    subscribe("legacy", "4111111111111111", 201);
    let all = settled(&receiver, &s);
    let kinds: Vec<String> = all.iter().map(Received::kind).collect();
    for kind in ["new_invoice_notification", "closed_invoice_notification", "successful_payment_notification"] {
        assert!(kinds.contains(&kind.to_owned()), "{kind} in {kinds:?}");
    }
    let closed = all.iter().find(|r| r.kind() == "closed_invoice_notification").expect("closed");
    assert!(closed.body.contains("<state>collected</state>"), "{}", closed.body);
    assert!(closed.body.contains("<total_in_cents type=\"integer\">1000</total_in_cents>"), "{}", closed.body);
    let paid = all.iter().find(|r| r.kind() == "successful_payment_notification").expect("payment");
    assert!(
        paid.body.contains("<action>purchase</action>") && paid.body.contains("<status>success</status>"),
        "{}",
        paid.body
    );
    let number = field(&closed.body, "invoice_number");

    // A refund of the invoice.
    let from = all.len();
    let r = authed(
        &s,
        "POST",
        &format!("/v2/invoices/{number}/refund"),
        &xml_at("2.9"),
        "<invoice><amount_in_cents>400</amount_in_cents></invoice>",
    );
    expect(r, 201);
    let deadline = Instant::now() + Duration::from_secs(30);
    let refund = loop {
        let got = receiver.got();
        if let Some(r) = got[from..].iter().find(|r| r.kind() == "successful_refund_notification") {
            break r.clone();
        }
        assert!(Instant::now() < deadline, "no refund notification");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(refund.body.contains("<action>credit</action>"), "{}", refund.body);
    assert!(refund.body.contains("<amount_in_cents type=\"integer\">400</amount_in_cents>"), "{}", refund.body);

    // A declined renewal: the payment fails and the invoice falls past due. (A refused signup
    // leaves nothing behind, notifications included.)
    subscribe("declined", "4000000000000002", 422);
    subscribe("renewal", "4111111111111111", 201);
    let token = card_token(&s, "4000000000000341");
    let body = format!("<billing_info><token_id>{token}</token_id></billing_info>");
    // Declined but stored (declined_saveable): the renewal charges it.
    expect(authed(&s, "PUT", "/v2/accounts/renewal/billing_info", &xml, &body), 422);
    let from = settled(&receiver, &s).len();
    s.set_clock(T0 + 32 * DAY);
    let deadline = Instant::now() + Duration::from_secs(60);
    let kinds = loop {
        let kinds: Vec<String> = receiver.got()[from..].iter().map(Received::kind).collect();
        if kinds.contains(&"past_due_invoice_notification".to_owned()) {
            break kinds;
        }
        assert!(Instant::now() < deadline, "no past-due notification: {kinds:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for kind in ["renewed_subscription_notification", "new_invoice_notification", "failed_payment_notification"] {
        assert!(kinds.contains(&kind.to_owned()), "{kind} in {kinds:?}");
    }
    let all = settled(&receiver, &s);
    // Entering dunning without Credit Memos: A0, the invoice (IDL), the subscription and the
    // declined transaction.
    let dunning = all[from..].iter().find(|r| r.kind() == "new_dunning_event_notification").expect("dunning");
    for part in [
        "<state>past_due</state>",
        "<due_at type=\"datetime\">",
        "<dunning_events_count type=\"integer\">1</dunning_events_count>",
        "<final_dunning_event type=\"boolean\">false</final_dunning_event>",
        "<subscription>",
        "<status>declined</status>",
    ] {
        assert!(dunning.body.contains(part), "{part} in {}", dunning.body);
    }
    assert!(!dunning.body.contains("<phone"), "A0: {}", dunning.body);
    assert!(
        !all.iter().any(|r| r.body.contains("<account_code>declined</account_code>")),
        "a refused signup sends nothing"
    );

    // With Credit Memos: the charge invoice family.
    credit_memos(db);
    let from = all.len();
    subscribe("memos", "4111111111111111", 201);
    let all = settled(&receiver, &s);
    let kinds: Vec<String> = all[from..].iter().map(Received::kind).collect();
    for kind in
        ["new_charge_invoice_notification", "paid_charge_invoice_notification", "successful_payment_notification"]
    {
        assert!(kinds.contains(&kind.to_owned()), "{kind} in {kinds:?}");
    }
    assert!(!kinds.iter().any(|k| k == "new_invoice_notification"), "{kinds:?}");
    let charge = all[from..].iter().find(|r| r.kind() == "paid_charge_invoice_notification").expect("paid");
    assert!(charge.body.contains("<state>paid</state>"), "{}", charge.body);
    assert!(charge.body.contains("<origin type=\"symbol\">"), "{}", charge.body);
    assert!(charge.body.contains("<phone nil=\"true\"/>"), "charge invoices carry A1: {}", charge.body);
    assert!(
        charge.body.contains("<invoice_number type=\"integer\">")
            && charge.body.contains("</invoice_number>\n    <address>\n      <address1"),
        "IC carries the address after the number: {}",
        charge.body
    );

    // The released Python client parses every one.
    let dir = std::env::temp_dir().join(format!("rebill-webhook-invoices-{}-{}", std::process::id(), from));
    std::fs::create_dir_all(&dir).expect("bodies");
    for (n, r) in all.iter().enumerate() {
        std::fs::write(dir.join(format!("{n:03}.xml")), &r.body).expect("body");
    }
    let program = "import sys, glob, recurly\n\
                   for path in sorted(glob.glob(sys.argv[1] + '/*.xml')):\n\
                   \x20   n = recurly.objects_for_push_notification(open(path, 'rb').read())\n\
                   \x20   i, t = n.get('invoice'), n.get('transaction')\n\
                   \x20   print(n['type'], n['account'].account_code,\n\
                   \x20         i.invoice_number if i is not None else '-', i.total_in_cents if i is not None else '-',\n\
                   \x20         t.amount_in_cents if t is not None else '-', t.status if t is not None else '-')\n";
    let out = Command::new(python_client()).args(["-c", program]).arg(&dir).output().expect("python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(text.lines().count(), all.len(), "{text}");
    assert!(text.contains(&format!("closed_invoice_notification legacy {number} 1000 - -")), "{text}");
    assert!(text.contains("successful_payment_notification legacy - - 1000 success"), "{text}");
    assert!(text.contains("successful_refund_notification legacy - - 400 success"), "{text}");
    assert!(text.contains("failed_payment_notification renewal - - 1000 declined"), "{text}");
    assert!(text.contains("paid_charge_invoice_notification memos"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn invoices_and_payments_send_their_notifications() {
    on_both_backends("webhook_invoices", invoices_and_payments);
}

/// On a Credit Memos site: a pause taking effect, a paused renewal, a resume; a declined renewal
/// past due and then failed at the end of dunning; a refund's credit invoice; a same-day void.
fn pauses_dunning_and_money_back(db: &str) {
    let receiver = Receiver::start(Vec::new(), None);
    let s = serve(db, &receiver);
    credit_memos(db);
    let xml = xml_at("2.11");
    plan(&s, "gold", "Gold", 1000);
    let subscribe = |code: &str| {
        let token = card_token(&s, "4111111111111111");
        let body = format!(
            "<subscription><plan_code>gold</plan_code><currency>USD</currency><account><account_code>{code}\
             </account_code><billing_info><token_id>{token}</token_id></billing_info></account></subscription>"
        );
        field(&expect(authed(&s, "POST", "/v2/subscriptions", &xml, &body), 201).body, "uuid")
    };
    let wait_for_kinds = |kinds: &[&str]| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let got: Vec<String> = receiver.got().iter().map(Received::kind).collect();
            if kinds.iter().all(|k| got.contains(&(*k).to_owned())) {
                return;
            }
            assert!(Instant::now() < deadline, "waiting for {kinds:?}: {got:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };

    // A pause of two cycles from the next renewal; the renewal after is skipped; then a resume.
    let paused = subscribe("p1");
    let body = "<subscription><remaining_pause_cycles>2</remaining_pause_cycles></subscription>";
    expect(authed(&s, "PUT", &format!("/v2/subscriptions/{paused}/pause"), &xml, body), 200);
    // The other customer's card will decline its renewal.
    subscribe("d1");
    let token = card_token(&s, "4000000000000341");
    let body = format!("<billing_info><token_id>{token}</token_id></billing_info>");
    expect(authed(&s, "PUT", "/v2/accounts/d1/billing_info", &xml, &body), 422);
    // A posted credit of 300 pays part of its renewal invoice.
    let body = "<adjustment><description>Goodwill</description><unit_amount_in_cents>-300</unit_amount_in_cents>\
                <currency>USD</currency></adjustment>";
    expect(authed(&s, "POST", "/v2/accounts/d1/adjustments", &xml, body), 201);
    let posted = field(&expect(authed(&s, "POST", "/v2/accounts/d1/invoices", &xml, ""), 201).body, "invoice_number");
    s.set_clock(T0 + 32 * DAY);
    wait_for_kinds(&[
        "subscription_paused_notification",
        "past_due_charge_invoice_notification",
        "new_dunning_event_notification",
        "closed_credit_invoice_notification",
    ]);
    // Dunning retries 1, 3, 5 and 7 days after the invoice: the last fails it.
    s.set_clock(T0 + 41 * DAY);
    // The failed invoice is written off: the credit that paid part of it goes back (its credit
    // payment voided, the posted credit invoice reopened), then a write-off credit invoice.
    wait_for_kinds(&[
        "failed_charge_invoice_notification",
        "voided_credit_payment_notification",
        "reopened_credit_invoice_notification",
    ]);
    let all = settled(&receiver, &s);
    let d1: Vec<&Received> = all.iter().filter(|r| r.body.contains("<account_code>d1</account_code>")).collect();
    let written_off = d1
        .iter()
        .find(|r| r.kind() == "new_credit_payment_notification" && r.body.contains(">write_off</action>"))
        .expect("the write-off's credit payment");
    assert!(
        written_off.body.contains("<amount_in_cents type=\"integer\">1000</amount_in_cents>"),
        "{}",
        written_off.body
    );
    let voided = d1.iter().find(|r| r.kind() == "voided_credit_payment_notification").expect("voided");
    assert!(voided.body.contains("<amount_in_cents type=\"integer\">300</amount_in_cents>"), "{}", voided.body);
    assert!(!voided.body.contains("<voided_at type=\"datetime\" nil=\"true\"/>"), "{}", voided.body);
    let reopened = d1.iter().find(|r| r.kind() == "reopened_credit_invoice_notification").expect("reopened");
    assert!(reopened.body.contains(&format!("<invoice_number type=\"integer\">{posted}</invoice_number>")));
    assert!(reopened.body.contains("<state>open</state>"), "{}", reopened.body);
    // One dunning event per declined collection: the first and four retries, the last final;
    // on a Credit Memos site A1, the invoice with its counters, and the subscription.
    let dunning: Vec<(String, String)> = d1
        .iter()
        .filter(|r| r.kind() == "new_dunning_event_notification")
        .map(|r| (field(&r.body, "dunning_events_count"), field(&r.body, "final_dunning_event")))
        .collect();
    let expected: Vec<(String, String)> = (1..=5).map(|n| (n.to_string(), (n == 5).to_string())).collect();
    assert_eq!(dunning, expected);
    let first = d1.iter().find(|r| r.kind() == "new_dunning_event_notification").expect("a dunning event");
    assert!(first.body.contains("<phone nil=\"true\"/>") && first.body.contains("<subscription>"), "{}", first.body);
    assert!(!first.body.contains("<transaction>"), "{}", first.body);
    let order: Vec<String> = d1.iter().map(|r| r.kind()).collect();
    let last_dunning = order.iter().rposition(|k| k == "new_dunning_event_notification").expect("dunning");
    let failed = order.iter().position(|k| k == "failed_charge_invoice_notification").expect("failed");
    assert!(last_dunning < failed, "the final dunning event comes before the failure: {order:?}");
    s.set_clock(T0 + 60 * DAY);
    wait_for_kinds(&["paused_subscription_renewal_notification"]);
    expect(authed(&s, "PUT", &format!("/v2/subscriptions/{paused}/resume"), &xml, ""), 200);
    wait_for_kinds(&["subscription_resumed_notification"]);

    // A refund makes a credit invoice; a one-off charge voided the same day.
    subscribe("r1");
    let invoices = authed(&s, "GET", "/v2/accounts/r1/invoices", &xml, "");
    let number = field(&expect(invoices, 200).body, "invoice_number");
    let r = authed(
        &s,
        "POST",
        &format!("/v2/invoices/{number}/refund"),
        &xml,
        "<invoice><amount_in_cents>300</amount_in_cents></invoice>",
    );
    expect(r, 201);
    let body = "<transaction><amount_in_cents>700</amount_in_cents><currency>USD</currency>\
                <account><account_code>r1</account_code></account></transaction>";
    let charge = field(&expect(authed(&s, "POST", "/v2/transactions", &xml, body), 201).body, "uuid");
    expect(authed(&s, "DELETE", &format!("/v2/transactions/{charge}"), &xml, ""), 202);
    wait_for_kinds(&["new_credit_invoice_notification", "successful_refund_notification", "void_payment_notification"]);
    let all = settled(&receiver, &s);
    let void = all.iter().find(|r| r.kind() == "void_payment_notification").expect("void");
    assert!(void.body.contains("<status>void</status>"), "{}", void.body);
    let credit = all
        .iter()
        .find(|r| r.kind() == "new_credit_invoice_notification" && r.body.contains("<account_code>r1</account_code>"))
        .expect("the refund's credit invoice");
    assert!(credit.body.contains("<total_in_cents type=\"integer\">-300</total_in_cents>"), "{}", credit.body);
    assert!(!credit.body.contains("collection_method"), "ICR stops at closed_at: {}", credit.body);
    let resumed = all.iter().find(|r| r.kind() == "subscription_resumed_notification").expect("resumed");
    assert!(resumed.body.contains("<state>active</state>"), "{}", resumed.body);
}

#[test]
fn pauses_dunning_and_money_back_send_their_notifications() {
    on_both_backends("webhook_cm", pauses_dunning_and_money_back);
}

/// On a Credit Memos site: a shipping address added, changed and deleted; credit kept from a
/// refund and paid out to the card; a posted credit voided unused; a gift card bought, redeemed
/// and drawn on. Every body parsed by the Python client.
fn addresses_credit_and_gift_cards(db: &str) {
    let receiver = Receiver::start(Vec::new(), None);
    let s = serve(db, &receiver);
    credit_memos(db);
    let xml = xml_at("2.11");
    let send = |method: &str, path: &str, body: &str, status: u16| expect(authed(&s, method, path, &xml, body), status);
    let since = |from: usize| -> Vec<Received> { settled(&receiver, &s)[from..].to_vec() };
    let kinds = |got: &[Received]| -> Vec<String> { got.iter().map(Received::kind).collect() };
    plan(&s, "gold", "Gold", 1000);

    // A shipping address added, changed, deleted: A1 and the address as it was.
    send("POST", "/v2/accounts", "<account><account_code>c1</account_code></account>", 201);
    let address = "<shipping_address><first_name>Verena</first_name><last_name>Example</last_name>\
                   <address1>1 Main St</address1><city>San Francisco</city><state>CA</state><zip>94105</zip>\
                   <country>US</country></shipping_address>";
    let from = settled(&receiver, &s).len();
    let id = field(&send("POST", "/v2/accounts/c1/shipping_addresses", address, 201).body, "id");
    let one = format!("/v2/accounts/c1/shipping_addresses/{id}");
    send("PUT", &one, "<shipping_address><nickname>Home</nickname></shipping_address>", 200);
    send("DELETE", &one, "", 204);
    let got = since(from);
    assert_eq!(
        kinds(&got),
        [
            "new_shipping_address_notification",
            "updated_shipping_address_notification",
            "deleted_shipping_address_notification"
        ]
    );
    for r in &got {
        assert!(r.body.contains(&format!("<id type=\"integer\">{id}</id>")), "{}", r.body);
        assert!(
            r.body.contains("<street1>1 Main St</street1>") && r.body.contains("<phone nil=\"true\"/>"),
            "{}",
            r.body
        );
        assert!(r.body.contains("<account_code>c1</account_code>"), "{}", r.body);
    }
    // (Resources as they are when the notification is made: the change may show already.)
    assert!(got[2].body.contains("<nickname>Home</nickname>"), "{}", got[2].body);

    // A refund kept as credit, then paid out to the card: processing, then closed.
    let token = card_token(&s, "4111111111111111");
    let body = format!(
        "<subscription><plan_code>gold</plan_code><currency>USD</currency><account><account_code>c2</account_code>\
         <billing_info><token_id>{token}</token_id></billing_info></account></subscription>"
    );
    send("POST", "/v2/subscriptions", &body, 201);
    let number = field(&send("GET", "/v2/accounts/c2/invoices", "", 200).body, "invoice_number");
    let body = "<invoice><refund_method>all_credit</refund_method><amount_in_cents>400</amount_in_cents></invoice>";
    let credit = field(&send("POST", &format!("/v2/invoices/{number}/refund"), body, 201).body, "invoice_number");
    let from = settled(&receiver, &s).len();
    send("POST", &format!("/v2/invoices/{credit}/refund"), "<invoice/>", 201);
    let got = since(from);
    let states: Vec<String> = got
        .iter()
        .filter(|r| r.kind().ends_with("_credit_invoice_notification"))
        .map(|r| format!("{} {}", r.kind(), field(&r.body, "state")))
        .collect();
    assert_eq!(
        states,
        ["processing_credit_invoice_notification processing", "closed_credit_invoice_notification closed"],
        "{:?}",
        kinds(&got)
    );
    for kind in ["processing_credit_invoice_notification", "successful_refund_notification"] {
        assert!(kinds(&got).contains(&kind.to_owned()), "{kind} in {:?}", kinds(&got));
    }

    // A posted credit voided while unused.
    let body = "<adjustment><description>Goodwill</description><unit_amount_in_cents>-700</unit_amount_in_cents>\
                <currency>USD</currency></adjustment>";
    send("POST", "/v2/accounts/c2/adjustments", body, 201);
    let posted = field(&send("POST", "/v2/accounts/c2/invoices", "", 201).body, "invoice_number");
    let from = settled(&receiver, &s).len();
    send("PUT", &format!("/v2/invoices/{posted}/void"), "", 200);
    let got = since(from);
    assert_eq!(kinds(&got), ["new_credit_payment_notification", "voided_credit_invoice_notification"]);
    assert!(got[1].body.contains("<state>voided</state>"), "{}", got[1].body);
    assert!(got[1].body.contains(&format!("<invoice_number type=\"integer\">{posted}</invoice_number>")));

    // A gift card bought by c3, redeemed by c4, then drawn on by c4's next invoice.
    s.cli_json(&[
        "gift-cards",
        "products",
        "add",
        "--site",
        "sandbox",
        "--product-code",
        "gift_card",
        "--currency",
        "usd",
        "2000",
    ]);
    let token = card_token(&s, "4111111111111111");
    let body = format!(
        "<gift_card><product_code>gift_card</product_code><unit_amount_in_cents>2000</unit_amount_in_cents>\
         <currency>USD</currency><delivery><method>email</method><email_address>friend@example.com</email_address>\
         <first_name>Fran</first_name><gifter_name>Gus</gifter_name></delivery><gifter_account>\
         <account_code>c3</account_code><billing_info><token_id>{token}</token_id></billing_info></gifter_account>\
         </gift_card>"
    );
    let code = field(&send("POST", "/v2/gift_cards", &body, 201).body, "redemption_code");
    send("POST", "/v2/accounts", "<account><account_code>c4</account_code></account>", 201);
    let from = settled(&receiver, &s).len();
    let body = "<recipient_account><account_code>c4</account_code></recipient_account>";
    send("POST", &format!("/v2/gift_cards/{code}/redeem"), body, 200);
    let body = "<adjustment><description>Order</description><unit_amount_in_cents>500</unit_amount_in_cents>\
                <currency>USD</currency></adjustment>";
    send("POST", "/v2/accounts/c4/adjustments", body, 201);
    send("POST", "/v2/accounts/c4/invoices", "", 201);
    let got = since(from);
    let all = settled(&receiver, &s);
    let purchased = all.iter().find(|r| r.kind() == "purchased_gift_card_notification").expect("purchased");
    assert!(purchased.body.contains(&format!("<redemption_code>{code}</redemption_code>")), "{}", purchased.body);
    assert!(purchased.body.contains("<recipient_account_code nil=\"true\"/>"), "{}", purchased.body);
    assert!(!purchased.body.contains("<account>"), "gift card notifications carry the card alone");
    let redeemed = got.iter().find(|r| r.kind() == "redeemed_gift_card_notification").expect("redeemed");
    assert!(redeemed.body.contains("<recipient_account_code>c4</recipient_account_code>"), "{}", redeemed.body);
    let balance = got.iter().find(|r| r.kind() == "updated_balance_gift_card_notification").expect("balance");
    assert!(balance.body.contains("<balance_in_cents type=\"integer\">1500</balance_in_cents>"), "{}", balance.body);
    let order = kinds(&got);
    let at = |k: &str| order.iter().position(|o| o == k).unwrap_or_else(|| panic!("{k} in {order:?}"));
    assert!(at("redeemed_gift_card_notification") < at("new_credit_payment_notification"), "{order:?}");
    assert!(at("new_credit_payment_notification") < at("updated_balance_gift_card_notification"), "{order:?}");

    // The released Python client reads every one.
    let dir = std::env::temp_dir().join(format!("rebill-webhook-credit-{}-{}", std::process::id(), all.len()));
    std::fs::create_dir_all(&dir).expect("bodies");
    for (n, r) in all.iter().enumerate() {
        std::fs::write(dir.join(format!("{n:03}.xml")), &r.body).expect("body");
    }
    let program = "import sys, glob, recurly\n\
                   for path in sorted(glob.glob(sys.argv[1] + '/*.xml')):\n\
                   \x20   n = recurly.objects_for_push_notification(open(path, 'rb').read())\n\
                   \x20   g, a, i = n.get('gift_card'), n.get('shipping_address'), n.get('invoice')\n\
                   \x20   print(n['type'], n['account'].account_code if 'account' in n else '-',\n\
                   \x20         g.redemption_code if g is not None else '-',\n\
                   \x20         getattr(g, 'balance_in_cents', '-') if g is not None else '-',\n\
                   \x20         a.street1 if a is not None else '-', i.state if i is not None else '-')\n";
    let out = Command::new(python_client()).args(["-c", program]).arg(&dir).output().expect("python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(text.lines().count(), all.len(), "{text}");
    assert!(text.contains("deleted_shipping_address_notification c1 - - 1 Main St -"), "{text}");
    assert!(text.contains(&format!("purchased_gift_card_notification - {code} - - -")), "{text}");
    assert!(text.contains(&format!("updated_balance_gift_card_notification - {code} 1500 - -")), "{text}");
    assert!(text.contains("voided_credit_invoice_notification c2 - - - voided"), "{text}");
    assert!(text.contains("processing_credit_invoice_notification c2 - - - processing"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn addresses_credit_and_gift_cards_send_their_notifications() {
    on_both_backends("webhook_credit", addresses_credit_and_gift_cards);
}

/// The kinds table of `docs/webhooks.md` lists exactly the kinds rebill sends, and each of them
/// is asserted by a test of the webhook suites.
#[test]
fn the_kinds_table_is_what_is_sent_and_tested() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/webhooks.md")).expect("docs/webhooks.md");
    let start = doc.find("## Kinds").expect("a Kinds section");
    let table: std::collections::BTreeSet<String> = doc[start..]
        .lines()
        .skip_while(|l| !l.starts_with("| `"))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('`').nth(1).map(str::to_owned))
        .collect();
    let emitted: std::collections::BTreeSet<String> =
        rebill_app::operations::notifications::EMITTED.iter().map(|k| (*k).to_owned()).collect();
    assert_eq!(table, emitted, "the table and the kinds sent");
    let tests = ["webhook_kinds.rs", "webhooks.rs"]
        .iter()
        .map(|f| std::fs::read_to_string(root.join("crates/rebill-cli/tests").join(f)).expect("a test file"))
        .collect::<String>();
    for kind in &emitted {
        assert!(tests.contains(&format!("\"{kind}\"")), "{kind} is asserted by no test");
    }
}
