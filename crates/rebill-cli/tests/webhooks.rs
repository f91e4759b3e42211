//! `rebill webhooks add/list/remove` on both backends: an endpoint's signing secret is printed
//! once and stored sealed, its HTTP password is read from a file and sealed, kinds are checked
//! against the catalogue, a site has at most ten live endpoints, and removing one makes room.

use std::process::{Command, Output};

use rebill_testkit::*;
use serde_json::Value;

fn rebill(db: &str, key_file: &str, args: &[&str]) -> Output {
    Command::new(bin())
        .args(["--database", db])
        .args(args)
        .env("REBILL_VAULT_KEY_FILE", key_file)
        .output()
        .expect("run rebill")
}

#[track_caller]
fn json(db: &str, key_file: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = rebill(db, key_file, &all);
    assert!(out.status.success(), "rebill {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("json")
}

#[track_caller]
fn refused(db: &str, key_file: &str, args: &[&str], message: &str) {
    let out = rebill(db, key_file, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "rebill {args:?} succeeded");
    assert!(stderr.contains(message), "rebill {args:?}: {stderr}");
}

fn endpoints(db: &str) {
    let key_file = vault_key_file();
    let k = key_file.as_str();
    json(db, k, &["site", "create", "--name", "acme"]);
    json(db, k, &["site", "create", "--name", "globex"]);
    let dir = std::path::Path::new(&key_file).parent().expect("key directory").to_path_buf();
    let password_file = dir.join("hook-password");
    std::fs::write(&password_file, "s3cret-pa55\n").expect("password file");
    let password = password_file.display().to_string();

    let added = json(
        db,
        k,
        &[
            "webhooks",
            "add",
            "--site",
            "acme",
            "--url",
            "https://hooks.example.com/rebill",
            "--http-user",
            "hooks",
            "--http-password-file",
            &password,
            "--kinds",
            "new_account,paid_charge_invoice_notification",
        ],
    );
    let secret = added["secret"].as_str().expect("a secret").to_owned();
    assert!(secret.starts_with("whsec_") && secret.len() > 40, "{secret}");
    assert_eq!(added["site"], "acme");
    assert_eq!(added["http_user"], "hooks");
    assert_eq!(added["kinds"], serde_json::json!(["new_account_notification", "paid_charge_invoice_notification"]));
    let id = added["id"].as_i64().expect("an id");

    // Listed without its secret or password; sealed in the database.
    let listed = json(db, k, &["webhooks", "list", "--site", "acme"]);
    assert_eq!(listed["endpoints"].as_array().map(Vec::len), Some(1));
    let text = listed.to_string();
    assert!(!text.contains(&secret) && !text.contains("s3cret"), "{text}");
    let stored = sql(db, "SELECT secret_sealed || ' ' || http_password_sealed FROM webhook_endpoints");
    assert!(!stored[0].contains(&secret[6..]) && !stored[0].contains("s3cret"), "{stored:?}");

    // Refusals: kinds, URLs, a password without a user.
    refused(
        db,
        k,
        &["webhooks", "add", "--site", "acme", "--url", "https://e.com", "--kinds", "nope"],
        "unknown notification kind `nope`",
    );
    refused(db, k, &["webhooks", "add", "--site", "acme", "--url", "e.com/hooks"], "http:// or https://");
    refused(db, k, &["webhooks", "add", "--site", "acme", "--url", "ftp://e.com/"], "http:// or https://");
    refused(db, k, &["webhooks", "add", "--site", "nowhere", "--url", "https://e.com"], "no site named `nowhere`");

    // Ten live endpoints per site; the other site counts apart; a removal makes room.
    for n in 1..10 {
        json(db, k, &["webhooks", "add", "--site", "acme", "--url", &format!("http://127.0.0.1:9/{n}")]);
    }
    refused(
        db,
        k,
        &["webhooks", "add", "--site", "acme", "--url", "http://127.0.0.1:9/x"],
        "already has 10 webhook endpoints",
    );
    json(db, k, &["webhooks", "add", "--site", "globex", "--url", "http://127.0.0.1:9/g"]);
    assert_eq!(json(db, k, &["webhooks", "list"])["endpoints"].as_array().map(Vec::len), Some(11));
    let removed = json(db, k, &["webhooks", "remove", &id.to_string()]);
    assert_eq!((removed["id"].as_i64(), removed["removed"].as_bool()), (Some(id), Some(true)));
    refused(db, k, &["webhooks", "remove", &id.to_string()], &format!("no webhook endpoint {id}"));
    json(db, k, &["webhooks", "add", "--site", "acme", "--url", "http://127.0.0.1:9/again"]);
    let text = String::from_utf8(rebill(db, k, &["webhooks", "list", "--site", "acme"]).stdout).expect("utf-8");
    assert_eq!(text.lines().count(), 10, "{text}");
    assert!(text.contains("every kind"), "{text}");
}

#[test]
fn webhook_endpoints_are_managed_from_the_cli() {
    on_both_backends("webhook_cli", endpoints);
}

// ---------------------------------------------------------------------------------------------
// Delivery, against a real HTTP receiver

use rebill_testkit::receiver::{Received, Receiver};
use std::time::{Duration, Instant};

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

/// A service with the retry schedule scaled by `scale`, its vault key file, and an endpoint at
/// `receiver` (HTTP user `hooks`); answers the service, the key file and the endpoint's secret.
fn serve_with_endpoint(db: &str, receiver: &Receiver, scale: &str) -> (Server, String, String) {
    let key_file = vault_key_file();
    let args = ["--vault-key-file", key_file.as_str(), "--webhook-retry-scale", scale];
    let s = start_with(db, Options { clock: Some(T0), args: &args, ..Options::default() });
    let dir = std::path::Path::new(&key_file).parent().expect("key directory").to_path_buf();
    let password_file = dir.join("hook-password");
    std::fs::write(&password_file, "pa55\n").expect("password file");
    let password = password_file.display().to_string();
    let added = json(
        db,
        &key_file,
        &[
            "webhooks",
            "add",
            "--site",
            "sandbox",
            "--url",
            &receiver.url,
            "--http-user",
            "hooks",
            "--http-password-file",
            &password,
        ],
    );
    let secret = added["secret"].as_str().expect("a secret").to_owned();
    (s, key_file, secret)
}

#[track_caller]
fn expect(reply: Reply, status: u16) -> Reply {
    assert_eq!(reply.status, status, "{}\n{}", reply.head, reply.body);
    reply
}

/// The account operations' notifications, in order, signed, parsed by the Python client.
fn account_notifications(db: &str) {
    let receiver = Receiver::start(Vec::new(), None);
    let (s, key_file, secret) = serve_with_endpoint(db, &receiver, "0.01");
    let xml = xml_at("2.11");
    let body = "<account><account_code>c1</account_code><email>verena@example.com</email>\
                <first_name>Verena</first_name><last_name>Example</last_name></account>";
    expect(authed(&s, "POST", "/v2/accounts", &xml, body), 201);
    expect(
        authed(&s, "PUT", "/v2/accounts/c1", &xml, "<account><company_name>Acme &amp; Co</company_name></account>"),
        200,
    );
    let token = card_token(&s, "4111111111111111");
    let body = format!("<billing_info><token_id>{token}</token_id></billing_info>");
    expect(authed(&s, "PUT", "/v2/accounts/c1/billing_info", &xml, &body), 200);
    expect(authed(&s, "DELETE", "/v2/accounts/c1", &xml, ""), 204);
    expect(authed(&s, "PUT", "/v2/accounts/c1/reopen", &xml, ""), 200);

    let got = receiver.wait_for(5);
    let kinds: Vec<String> = got.iter().map(Received::kind).collect();
    assert_eq!(
        kinds,
        [
            "new_account_notification",
            "updated_account_notification",
            "billing_info_updated_notification",
            "canceled_account_notification",
            "new_account_notification"
        ],
        "in event order"
    );
    let secret = rebill_webhooks::signing::Secret::parse(&secret).expect("secret");
    let mut ids = std::collections::BTreeSet::new();
    for r in &got {
        assert_eq!(r.header("content-type"), Some("application/xml; charset=utf-8"));
        let expected_auth =
            format!("Basic {}", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "hooks:pa55"));
        assert_eq!(r.header("authorization"), Some(expected_auth.as_str()));
        let id = r.header("webhook-id").expect("webhook-id");
        assert!(id.starts_with("msg_") && ids.insert(id.to_owned()), "{id}");
        let timestamp: i64 = r.header("webhook-timestamp").expect("timestamp").parse().expect("seconds");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("time").as_secs() as i64;
        assert!((now - timestamp).abs() < 120, "real time, not the site clock: {timestamp}");
        let signature = r.header("webhook-signature").expect("signature");
        secret.verify(id, timestamp, signature, r.body.as_bytes(), now).expect("the signature verifies");
        assert!(r.body.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<"), "{}", r.body);
        assert!(!r.body.contains("href"), "{}", r.body);
        assert!(r.body.contains("<account_code>c1</account_code>"), "{}", r.body);
    }
    assert!(got[1].body.contains("<company_name>Acme &amp; Co</company_name>"), "{}", got[1].body);
    assert!(got[0].body.contains("<username nil=\"true\"/>"), "{}", got[0].body);
    // Attempts are recorded once they are answered: the record may follow the last POST.
    await_first(db, "SELECT CAST(COUNT(*) AS TEXT) FROM webhook_deliveries WHERE state = 'delivered'", "5");

    // The released Python client parses every body.
    let python = python_client();
    let dir = std::path::Path::new(&key_file).parent().expect("directory").join("bodies");
    std::fs::create_dir_all(&dir).expect("bodies");
    for (n, r) in got.iter().enumerate() {
        std::fs::write(dir.join(format!("{n}.xml")), &r.body).expect("body");
    }
    let program = "import sys, glob, recurly\n\
                   for path in sorted(glob.glob(sys.argv[1] + '/*.xml')):\n\
                   \x20   n = recurly.objects_for_push_notification(open(path, 'rb').read())\n\
                   \x20   a = n['account']\n\
                   \x20   print(n['type'], a.account_code, a.email, a.username)\n";
    let out = Command::new(&python).args(["-c", program]).arg(&dir).output().expect("python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert!(lines.iter().all(|l| l.ends_with("c1 verena@example.com None")), "{lines:?}");
    assert!(lines[0].starts_with("new_account_notification "), "{lines:?}");
}

/// The interpreter of the suite's virtualenv with the released Python client.
fn python_client() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("python");
    let requirements = std::fs::read_to_string(dir.join("requirements.txt")).expect("requirements");
    // The same virtualenv as the real-client suite (same name, same requirements).
    let text: &'static str = Box::leak(requirements.into_boxed_str());
    python_venv("python-venv", &dir.join("requirements.txt"), text, &["import recurly"])
}

#[test]
fn account_operations_send_signed_notifications_in_order() {
    on_both_backends("webhook_accounts", account_notifications);
}

/// A receiver failing twice gets three attempts on the scaled schedule; one that hangs is cut
/// at 5 s and tried again.
fn retries(db: &str) {
    let receiver = Receiver::start(vec![500, 503], None);
    let (s, _, _) = serve_with_endpoint(db, &receiver, "0.01");
    let xml = xml_at("2.11");
    expect(authed(&s, "POST", "/v2/accounts", &xml, "<account><account_code>r1</account_code></account>"), 201);
    let got = receiver.wait_for(3);
    let ids: Vec<&str> = got.iter().map(|r| r.header("webhook-id").expect("id")).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "the same webhook-id on every attempt: {ids:?}");
    wait_for_state(db, "delivered");
    let attempts = sql(
        db,
        "SELECT CAST(at AS TEXT) || ' ' || COALESCE(CAST(status_code AS TEXT), '-') FROM webhook_attempts ORDER BY id",
    );
    let parsed: Vec<(i64, String)> = attempts
        .iter()
        .map(|a| {
            let (at, code) = a.split_once(' ').expect("at and code");
            (at.parse().expect("ms"), code.to_owned())
        })
        .collect();
    assert_eq!(parsed.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>(), ["500", "503", "200"]);
    // Retry 0 comes 10 s × 0.01 after the first failure, retry 1 74 s × 0.01 after the second.
    assert!(parsed[1].0 - parsed[0].0 >= 100, "{parsed:?}");
    assert!(parsed[2].0 - parsed[1].0 >= 740, "{parsed:?}");
    assert_eq!(sql(db, "SELECT CAST(attempts AS TEXT) FROM webhook_deliveries")[0], "3");
    drop(s);

    // A receiver that hangs is cut at 5 s: the attempt is recorded as timed out.
    let hanging = Receiver::start(Vec::new(), Some(Duration::from_secs(8)));
    let (db, _kept) = fresh(db);
    let (s, _, _) = serve_with_endpoint(&db, &hanging, "0.01");
    expect(authed(&s, "POST", "/v2/accounts", &xml, "<account><account_code>h1</account_code></account>"), 201);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let attempts = sql(&db, "SELECT COALESCE(error, '') || ' ' || CAST(duration_ms AS TEXT) FROM webhook_attempts");
        if let Some(first) = attempts.first() {
            let (error, ms) = first.rsplit_once(' ').expect("error and duration");
            assert_eq!(error, "timed out");
            let ms: i64 = ms.parse().expect("ms");
            assert!((5_000..7_000).contains(&ms), "cut at 5 s: {ms} ms");
            break;
        }
        assert!(Instant::now() < deadline, "no attempt recorded");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(sql(&db, "SELECT state FROM webhook_deliveries")[0], "retrying");
}

/// A fresh database of the same backend as `db`, and the PostgreSQL database to keep while it
/// is used (dropped with it).
fn fresh(db: &str) -> (String, Option<rebill_store::testing::TestDatabase>) {
    if db.starts_with("sqlite") {
        (rebill_store::testing::fresh_sqlite_url("webhook_hang"), None)
    } else {
        let database = postgres_database("webhook_hang");
        (database.url().to_owned(), Some(database))
    }
}

#[test]
fn failed_deliveries_are_retried_on_the_scaled_schedule() {
    on_both_backends("webhook_retries", retries);
}

/// The state of the database's only delivery, once it is `state` (waiting up to 60 s).
#[track_caller]
fn wait_for_state(db: &str, state: &str) {
    await_first(db, "SELECT state FROM webhook_deliveries", state);
}

/// Waits (up to a minute) until the first row `statement` answers is `expected`.
#[track_caller]
fn await_first(db: &str, statement: &str, expected: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = sql(db, statement);
        if rows.first().map(String::as_str) == Some(expected) {
            return;
        }
        assert!(Instant::now() < deadline, "{statement}: {rows:?}, expected {expected}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A receiver that always fails makes the delivery `failed` after 11 attempts, all listed by
/// `webhooks deliveries`; a redelivery gets one more attempt (failed again while the receiver
/// fails), and once the receiver is back a redelivery delivers it with its first `webhook-id`.
fn redelivery(db: &str) {
    let receiver = Receiver::start(Vec::new(), None);
    receiver.answer(500);
    // 262,308 s of retries × 0.00001: about 2.6 s.
    let (s, key_file, _) = serve_with_endpoint(db, &receiver, "0.00001");
    let k = key_file.as_str();
    let xml = xml_at("2.11");
    expect(authed(&s, "POST", "/v2/accounts", &xml, "<account><account_code>f1</account_code></account>"), 201);
    wait_for_state(db, "failed");
    let endpoint = json(db, k, &["webhooks", "list", "--site", "sandbox"])["endpoints"][0]["id"].as_i64().expect("id");

    let failed = json(db, k, &["webhooks", "deliveries", "--site", "sandbox", "--state", "failed"]);
    let listed = failed["deliveries"].as_array().expect("deliveries");
    assert_eq!(listed.len(), 1, "{failed}");
    let d = &listed[0];
    let id = d["id"].as_i64().expect("an id");
    let webhook_id = d["webhook_id"].as_str().expect("a webhook-id").to_owned();
    assert!(webhook_id.starts_with("msg_"), "{d}");
    assert_eq!((d["endpoint_id"].as_i64(), d["kind"].as_str()), (Some(endpoint), Some("new_account_notification")));
    assert_eq!((d["state"].as_str(), d["attempt_count"].as_i64()), (Some("failed"), Some(11)));
    assert!(d["delivered_at"].is_null() && d["next_attempt_at"].is_null(), "{d}");
    let attempts = d["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 11);
    for a in attempts {
        assert_eq!((a["status_code"].as_i64(), a["error"].is_null()), (Some(500), true), "{a}");
        let at = a["at"].as_str().expect("a time");
        assert!(at.len() == 24 && at.ends_with('Z') && at.as_bytes()[10] == b'T', "ISO 8601 UTC with ms: {at}");
        assert!(a["duration_ms"].as_i64().is_some_and(|ms| (0..5_000).contains(&ms)), "{a}");
    }
    let times: Vec<&str> = attempts.iter().filter_map(|a| a["at"].as_str()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "in order: {times:?}");
    assert_eq!(receiver.got().len(), 11);

    // The text: one line per delivery, one indented line per attempt.
    let out = rebill(db, k, &["webhooks", "deliveries", "--site", "sandbox", "--endpoint", &endpoint.to_string()]);
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 12, "{text}");
    assert!(lines[0].starts_with(&format!(
        "{id}  endpoint {endpoint}  new_account_notification  {webhook_id}  failed  11 attempts"
    )));
    assert!(
        lines[1..].iter().all(|l| l.starts_with("    ") && l.contains("  HTTP 500  ") && l.ends_with(" ms")),
        "{text}"
    );

    // Filters and refusals.
    let none = json(db, k, &["webhooks", "deliveries", "--site", "sandbox", "--state", "pending"]);
    assert_eq!(none["deliveries"].as_array().map(Vec::len), Some(0));
    refused(
        db,
        k,
        &["webhooks", "deliveries", "--site", "sandbox", "--state", "lost"],
        "invalid value 'lost' for '--state",
    );
    refused(db, k, &["webhooks", "deliveries", "--site", "sandbox", "--endpoint", "999"], "no webhook endpoint 999");
    refused(db, k, &["webhooks", "redeliver"], "required");
    refused(db, k, &["webhooks", "redeliver", &id.to_string(), "--failed"], "cannot be used with");

    // Redelivered while the receiver still fails: one more attempt, then failed again.
    let again = json(db, k, &["webhooks", "redeliver", &id.to_string()]);
    assert_eq!((again["redelivered"].as_i64(), again["ids"].clone()), (Some(1), serde_json::json!([id])));
    receiver.wait_for(12);
    wait_for_state(db, "failed");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(receiver.got().len(), 12, "no retry after a redelivery fails");
    assert_eq!(sql(db, "SELECT CAST(attempts AS TEXT) FROM webhook_deliveries")[0], "12");

    // The receiver is back: redelivered, delivered with the same webhook-id.
    receiver.answer(200);
    let again = json(db, k, &["webhooks", "redeliver", "--failed", "--site", "sandbox"]);
    assert_eq!((again["redelivered"].as_i64(), again["ids"].clone()), (Some(1), serde_json::json!([id])));
    let got = receiver.wait_for(13);
    wait_for_state(db, "delivered");
    assert!(got.iter().all(|r| r.header("webhook-id") == Some(webhook_id.as_str())), "the same webhook-id");
    let delivered = json(db, k, &["webhooks", "deliveries", "--site", "sandbox", "--state", "delivered"]);
    let d = &delivered["deliveries"][0];
    assert_eq!((d["id"].as_i64(), d["webhook_id"].as_str()), (Some(id), Some(webhook_id.as_str())), "{delivered}");
    assert_eq!((d["attempt_count"].as_i64(), d["attempts"].as_array().map(Vec::len)), (Some(13), Some(13)));
    assert_eq!(d["attempts"][12]["status_code"].as_i64(), Some(200));
    assert!(d["delivered_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{d}");
    let failed = json(db, k, &["webhooks", "deliveries", "--site", "sandbox", "--state", "failed"]);
    assert_eq!(failed["deliveries"].as_array().map(Vec::len), Some(0));

    // Nothing failed is left; a delivered or unknown delivery is refused.
    assert_eq!(json(db, k, &["webhooks", "redeliver", "--failed"])["redelivered"].as_i64(), Some(0));
    let out = rebill(db, k, &["webhooks", "redeliver", "--failed"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0 failed webhook deliveries are sent again now");
    refused(
        db,
        k,
        &["webhooks", "redeliver", &id.to_string()],
        &format!("webhook delivery {id} is delivered: only a failed delivery is redelivered"),
    );
    refused(db, k, &["webhooks", "redeliver", "987654"], "no webhook delivery 987654");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(receiver.got().len(), 13, "nothing more was sent");
    drop(s);
}

#[test]
fn failed_deliveries_are_listed_and_redelivered() {
    on_both_backends("webhook_redeliver", redelivery);
}
