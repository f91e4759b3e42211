//! Sites on Stripe, end to end, against a real Stripe peer: `localstripe` (a stateful fake of
//! Stripe's API from PyPI, started from a virtualenv under the target directory; a missing
//! PyPI fails the run), on SQLite and on PostgreSQL.
//!
//! - A production site put on Stripe with `rebill gateway set`: a token → billing info →
//!   subscription → renewals → refunds (partial and whole) → the void of an unsettled one-off
//!   charge; afterwards Stripe's own records (payment intents, refunds) agree with rebill's
//!   transactions to the cent.
//! - Declines: a card Stripe refuses when it is attached, one it refuses when it is charged,
//!   dunning retries charged through Stripe; bank accounts and `verify_cvv` refused by name.
//! - A production site without a gateway declines charges and refunds with `no_gateway`.
//! - Nobody is charged twice: a proxy that drops Stripe's answer after Stripe charged, and a
//!   `kill -9` of `rebill serve` in the middle of a batch of renewals: afterwards each invoice
//!   is paid by exactly one payment intent.
//! - The secret key is in no log line, no reply, no `--json` output, and not in clear in the
//!   database.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use rebill_testkit::localstripe::{LocalStripe, StripeProxy};
use rebill_testkit::*;
use serde_json::Value;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;
/// The site's Stripe key: a test key, so transactions are `test`.
const SECRET: &str = "sk_test_rebillSecretKey0123456789abcdef";

fn xml() -> [(&'static str, &'static str); 2] {
    xml_at("2.11")
}

#[track_caller]
fn post(s: &Server, path: &str, body: &str) -> Reply {
    authed(s, "POST", path, &xml(), body)
}

#[track_caller]
fn put(s: &Server, path: &str, body: &str) -> Reply {
    authed(s, "PUT", path, &xml(), body)
}

#[track_caller]
fn get(s: &Server, path: &str) -> Reply {
    authed(s, "GET", path, &xml(), "")
}

/// A temporary directory of this test.
fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "rebill-stripe-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    dir
}

/// A service and the files it shares with the CLI and with a restarted service.
struct Site {
    s: Server,
    key_file: String,
    secret_file: PathBuf,
    /// The metrics listener's address, when the service has one.
    metrics_addr: Option<String>,
    /// Every reply body and CLI output seen, checked for the secret at the end.
    seen: Vec<String>,
}

impl Site {
    /// `rebill serve` on `db` with the clock at `now`, its log captured.
    fn serve(db: &str, key_file: &str, clock: Option<PathBuf>, existing: bool) -> Server {
        let args = ["--vault-key-file", key_file];
        start_with(
            db,
            Options {
                clock: clock.is_none().then_some(T0),
                clock_file: clock,
                args: &args,
                existing_database: existing,
                capture_stderr: true,
                ..Options::default()
            },
        )
    }

    /// `rebill serve` on a new database `db` on the real clock, with a metrics listener.
    fn serve_real_time(db: &str, key_file: &str) -> Server {
        let args = ["--vault-key-file", key_file, "--metrics-listen", "127.0.0.1:0"];
        start_with(db, Options { args: &args, capture_stderr: true, ..Options::default() })
    }

    /// `rebill serve` on the existing database `db` on the real clock.
    fn serve_real_time_on(db: &str, key_file: &str) -> Server {
        let args = ["--vault-key-file", key_file];
        start_with(db, Options { args: &args, existing_database: true, ..Options::default() })
    }

    /// The sandbox site of a new database, switched to production and put on Stripe at
    /// `api_base`.
    fn on_stripe(db: &str, api_base: &str) -> Site {
        let mut site = Site::sandbox_on_stripe(db, api_base);
        // Production with a gateway: no warning.
        let value: Value = serde_json::from_str(
            &site.cli(&["site", "update", "--name", "sandbox", "--mode", "production", "--json"]).0,
        )
        .expect("json");
        assert!(value.get("warning").is_none(), "{value}");
        site
    }

    /// The sandbox site of a new database put on Stripe at `api_base` (after a look at what
    /// production without a gateway says), left in sandbox mode.
    fn sandbox_on_stripe(db: &str, api_base: &str) -> Site {
        Site::sandbox_on_stripe_with(db, api_base, false)
    }

    /// [`Site::sandbox_on_stripe`], the service on the real clock with a metrics listener when
    /// `real_time`.
    fn sandbox_on_stripe_with(db: &str, api_base: &str, real_time: bool) -> Site {
        let dir = temp_dir("site");
        let key_file = dir.join("vault.key").display().to_string();
        let s = if real_time { Site::serve_real_time(db, &key_file) } else { Site::serve(db, &key_file, None, false) };
        let metrics_addr = s
            .banner
            .iter()
            .find_map(|l| l.strip_prefix("metrics on http://"))
            .and_then(|a| a.trim().strip_suffix("/metrics"))
            .map(str::to_owned);
        let secret_file = dir.join("stripe.key");
        std::fs::write(&secret_file, format!("{SECRET}\n")).expect("secret key file");
        let mut site = Site { s, key_file, secret_file, metrics_addr, seen: Vec::new() };

        // Production without a gateway: warned.
        let out = site.cli(&["site", "update", "--name", "sandbox", "--mode", "production", "--json"]);
        let value: Value = serde_json::from_str(&out.0).expect("json");
        assert!(value["warning"].as_str().is_some_and(|w| w.contains("no_gateway")), "{value}");
        assert!(out.1.contains("warning:"), "the warning is on stderr too: {}", out.1);
        let shown =
            site.cli_json(&["gateway", "show", "--site", "sandbox", "--vault-key-file", &site.key_file.clone()]);
        assert_eq!(shown["gateway"], "none", "{shown}");

        let secret_file = site.secret_file.display().to_string();
        let set = site.cli_json(&[
            "gateway",
            "set",
            "--site",
            "sandbox",
            "stripe",
            "--secret-key-file",
            &secret_file,
            "--api-base",
            api_base,
            "--vault-key-file",
            &site.key_file.clone(),
        ]);
        assert_eq!(set["gateway"], "stripe", "{set}");
        assert_eq!(set["key_last4"], "cdef", "{set}");
        assert_eq!(set["api_base"], api_base, "{set}");
        assert_eq!(set["test"], true, "{set}");
        let shown =
            site.cli_json(&["gateway", "show", "--site", "sandbox", "--vault-key-file", &site.key_file.clone()]);
        assert_eq!(shown, set, "show prints what set stored");
        // Production with a gateway: no warning any more.
        let value: Value = serde_json::from_str(
            &site.cli(&["site", "update", "--name", "sandbox", "--mode", "production", "--json"]).0,
        )
        .expect("json");
        assert!(value.get("warning").is_none(), "{value}");
        site
    }

    /// Runs the CLI on the service's database and clock: (stdout, stderr); it must succeed.
    fn cli(&mut self, args: &[&str]) -> (String, String) {
        let mut command = Command::new(bin());
        command.args(["--database", &self.s.database]).args(args);
        if let Some(file) = &self.s.clock {
            command.env("REBILL_CLOCK_FILE", file);
        }
        let out = command.output().expect("run rebill");
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
        assert!(out.status.success(), "rebill {args:?}: {stderr}");
        self.seen.push(stdout.clone());
        self.seen.push(stderr.clone());
        (stdout, stderr)
    }

    fn cli_json(&mut self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        serde_json::from_str(&self.cli(&all).0).expect("json")
    }

    /// A request whose reply must have `status`.
    #[track_caller]
    fn expect(&mut self, reply: Reply, status: u16) -> Reply {
        self.seen.push(reply.head.clone());
        self.seen.push(reply.body.clone());
        assert_eq!(reply.status, status, "{}\n{}", reply.head, reply.body);
        reply
    }

    /// An account with the billing info of a card token.
    fn customer(&mut self, code: &str, number: &str) -> Reply {
        let body = format!("<account><account_code>{code}</account_code></account>");
        let r = post(&self.s, "/v2/accounts", &body);
        self.expect(r, 201);
        self.billing_info(code, number)
    }

    /// Replaces the account's billing info with a card token (the reply is the caller's to check).
    fn billing_info(&mut self, code: &str, number: &str) -> Reply {
        let body = format!("<billing_info><token_id>{}</token_id></billing_info>", card_token(&self.s, number));
        let r = put(&self.s, &format!("/v2/accounts/{code}/billing_info"), &body);
        self.seen.push(r.body.clone());
        r
    }

    fn plan(&mut self, code: &str, cents: i64) {
        let body = format!(
            "<plan><plan_code>{code}</plan_code><name>{code}</name><unit_amount_in_cents><USD>{cents}</USD>\
             </unit_amount_in_cents><plan_interval_length>1</plan_interval_length>\
             <plan_interval_unit>months</plan_interval_unit></plan>"
        );
        let r = post(&self.s, "/v2/plans", &body);
        self.expect(r, 201);
    }

    /// A subscription of the account to the plan (the reply is the caller's to check).
    fn subscribe(&mut self, code: &str, plan: &str) -> Reply {
        let body = format!(
            "<subscription><plan_code>{plan}</plan_code><currency>USD</currency>\
             <account><account_code>{code}</account_code></account></subscription>"
        );
        let r = post(&self.s, "/v2/subscriptions", &body);
        self.seen.push(r.body.clone());
        r
    }

    /// The secret is nowhere: not in the log, not in a reply or CLI output, not in clear in the
    /// database.
    fn assert_secret_kept(&self) {
        let log = self.s.log();
        assert!(!log.contains(SECRET) && !log.contains(&SECRET[8..]), "the log holds the secret key");
        for text in &self.seen {
            assert!(!text.contains(&SECRET[8..]), "a reply or CLI output holds the secret key: {text}");
        }
        let sealed = sql(&self.s.database, "SELECT secret_sealed FROM site_gateways");
        assert_eq!(sealed.len(), 1);
        assert!(!sealed[0].contains(&SECRET[8..]) && sealed[0].len() > SECRET.len(), "sealed: {}", sealed[0]);
        if let Some(path) = self.s.database.strip_prefix("sqlite://") {
            let path = path.split('?').next().unwrap_or(path);
            for file in [path.to_owned(), format!("{path}-wal")] {
                if let Ok(bytes) = std::fs::read(&file) {
                    let needle = &SECRET.as_bytes()[8..];
                    assert!(!bytes.windows(needle.len()).any(|w| w == needle), "{file} holds the key in clear");
                }
            }
        }
    }
}

/// Waits until `statement` answers `expected` (the scheduler runs once a second).
#[track_caller]
fn await_sql(db: &str, statement: &str, expected: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let rows = sql(db, statement);
        if rows.first().map(String::as_str) == Some(expected) {
            return;
        }
        assert!(Instant::now() < deadline, "{statement}: {rows:?}, expected {expected}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every object of a localstripe list (it pages oldest first).
fn all(stripe: &LocalStripe, path: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = match &after {
            Some(id) => stripe.get_json(&format!("{path}?limit=100&starting_after={id}")),
            None => stripe.get_json(&format!("{path}?limit=100")),
        };
        let data = page["data"].as_array().cloned().unwrap_or_default();
        after = data.last().and_then(|d| d["id"].as_str()).map(str::to_owned);
        items.extend(data);
        if page["has_more"] != Value::Bool(true) || after.is_none() {
            return items;
        }
    }
}

/// Stripe's succeeded payment intents: id → (amount, rebill's invoice number).
fn succeeded_intents(stripe: &LocalStripe) -> BTreeMap<String, (i64, String)> {
    all(stripe, "/v1/payment_intents")
        .iter()
        .filter(|pi| pi["status"] == "succeeded")
        .map(|pi| {
            let invoice = pi["metadata"]["rebill_invoice"].as_str().unwrap_or_default().to_owned();
            (pi["id"].as_str().unwrap_or_default().to_owned(), (pi["amount"].as_i64().unwrap_or(-1), invoice))
        })
        .collect()
}

/// rebill's transactions of `action` with `statuses`: reference → amount.
fn transactions(db: &str, action: &str, statuses: &str) -> BTreeMap<String, i64> {
    sql(
        db,
        &format!(
            "SELECT reference || ' ' || CAST(amount AS TEXT) FROM transactions \
             WHERE action = '{action}' AND status IN ({statuses}) AND gateway_type = 'stripe'"
        ),
    )
    .iter()
    .map(|row| {
        let (reference, amount) = row.rsplit_once(' ').expect("reference and amount");
        (reference.to_owned(), amount.parse().expect("amount"))
    })
    .collect()
}

/// Token → billing info → subscription → renewals → refunds → void, and Stripe's records agree.
fn subscription_life(db: &str) {
    let stripe = LocalStripe::start();
    // Through the proxy that keeps Stripe's documented behaviour (its lists' filters included).
    let proxy = StripeProxy::start(&stripe.base);
    let mut site = Site::on_stripe(db, &proxy.base);
    site.plan("gold", 1000);
    let r = site.customer("c1", "4242424242424242");
    let r = site.expect(r, 200);
    assert_eq!(field(&r.body, "last_four"), "4242");
    let reference = sql(db, "SELECT gateway_reference FROM billing_infos")[0].clone();
    let (customer, method) = reference.split_once('/').expect("cus/pm");
    assert!(customer.starts_with("cus_") && method.starts_with("pm_"), "{reference}");
    let attached = stripe.get_json(&format!("/v1/payment_methods/{method}"));
    assert_eq!(attached["customer"], customer, "the card is attached to the customer: {attached}");

    let r = site.subscribe("c1", "gold");
    let r = site.expect(r, 201);
    let uuid = field(&r.body, "uuid");

    // The first charge, then two renewals.
    let txs = site.expect(get(&site.s, "/v2/accounts/c1/transactions"), 200);
    assert_eq!(field(&txs.body, "gateway_type"), "stripe", "{}", txs.body);
    assert_eq!(field(&txs.body, "test"), "true");
    assert!(field(&txs.body, "reference").starts_with("pi_"), "{}", txs.body);
    site.s.set_clock(T0 + 32 * DAY);
    await_sql(db, "SELECT CAST(COUNT(*) AS TEXT) FROM invoices WHERE state IN ('collected', 'paid')", "2");
    site.s.set_clock(T0 + 63 * DAY);
    await_sql(db, "SELECT CAST(COUNT(*) AS TEXT) FROM invoices WHERE state IN ('collected', 'paid')", "3");
    let sub = site.expect(get(&site.s, &format!("/v2/subscriptions/{uuid}")), 200);
    assert_eq!(field(&sub.body, "state"), "active");

    // Refunds: part of the last renewal, then the rest of it; the whole first invoice.
    let numbers = sql(db, "SELECT CAST(invoice_number AS TEXT) FROM invoices ORDER BY invoice_number");
    let refund = |site: &mut Site, number: &str, body: &str| {
        let r = authed(&site.s, "POST", &format!("/v2/invoices/{number}/refund"), &xml_at("2.9"), body);
        site.expect(r, 201)
    };
    refund(&mut site, &numbers[2], "<invoice><amount_in_cents>300</amount_in_cents></invoice>");
    refund(&mut site, &numbers[2], "<invoice><amount_in_cents>700</amount_in_cents></invoice>");
    refund(&mut site, &numbers[0], "<invoice><amount_in_cents>1000</amount_in_cents></invoice>");

    // A one-off charge voided the same day (Stripe gives it back whole).
    let body = "<transaction><amount_in_cents>700</amount_in_cents><currency>USD</currency>\
                <account><account_code>c1</account_code></account></transaction>";
    let r = post(&site.s, "/v2/transactions", body);
    let r = site.expect(r, 201);
    let charge = field(&r.body, "uuid");
    let voided_pi = field(&r.body, "reference");
    let r = authed(&site.s, "DELETE", &format!("/v2/transactions/{charge}"), &xml(), "");
    site.expect(r, 202);
    assert_eq!(sql(db, &format!("SELECT status FROM transactions WHERE uuid = '{charge}'"))[0], "void");

    // Stripe agrees to the cent: every succeeded payment intent is one of rebill's purchases
    // (success or void) with its amount, and every Stripe refund one of rebill's refunds or
    // the void.
    let intents = succeeded_intents(&stripe);
    let purchases = transactions(db, "purchase", "'success', 'void'");
    let stripe_purchases: BTreeMap<String, i64> = intents.iter().map(|(id, (a, _))| (id.clone(), *a)).collect();
    assert_eq!(stripe_purchases, purchases, "Stripe's payment intents and rebill's purchases");
    assert_eq!(purchases.values().sum::<i64>(), 3 * 1000 + 700);
    let refunds: BTreeMap<String, i64> = all(&stripe, "/v1/refunds")
        .iter()
        .filter(|r| r["status"] == "succeeded")
        .map(|r| (r["id"].as_str().unwrap_or_default().to_owned(), r["amount"].as_i64().unwrap_or(-1)))
        .collect();
    let mut ours = transactions(db, "refund", "'success'");
    assert!(ours.keys().all(|r| r.starts_with("re_")), "{ours:?}");
    // The void's refund in Stripe is rebill's void of the purchase.
    let void_refund: Vec<_> = all(&stripe, "/v1/refunds")
        .iter()
        .filter(|r| r["payment_intent"] == voided_pi.as_str())
        .map(|r| (r["id"].as_str().unwrap_or_default().to_owned(), r["amount"].as_i64().unwrap_or(-1)))
        .collect();
    assert_eq!(void_refund.len(), 1, "the void is one Stripe refund: {void_refund:?}");
    ours.insert(void_refund[0].0.clone(), void_refund[0].1);
    assert_eq!(refunds, ours, "Stripe's refunds and rebill's");
    assert_eq!(refunds.values().sum::<i64>(), 300 + 700 + 1000 + 700);

    // `rebill reconcile` says the same: four payments (one voided) and four refunds (one the
    // void's) agree. The service's clock runs ahead of Stripe's here, so the window is given.
    let key_file = site.key_file.clone();
    let report =
        site.cli_json(&["reconcile", "--site", "sandbox", "--since", "2020-01-01", "--vault-key-file", &key_file]);
    assert_eq!(report["differences"], serde_json::json!([]), "{report}");
    assert_eq!((report["matched"].as_u64(), report["pending"].as_u64()), (Some(8), Some(0)), "{report}");
    assert_eq!(report["complete"], true);
    site.assert_secret_kept();
}

#[test]
fn a_subscription_lives_on_stripe() {
    on_both_backends("stripe_life", subscription_life);
}

/// Runs `rebill reconcile` on the site: (exit code, stdout, stderr).
fn reconcile(site: &mut Site, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(["--database", &site.s.database, "reconcile", "--site", "sandbox", "--vault-key-file", &site.key_file])
        .args(args)
        .output()
        .expect("run rebill reconcile");
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    site.seen.push(stdout.clone());
    site.seen.push(stderr.clone());
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// `rebill reconcile` and the hourly job: a clean site prints no difference; money moved at
/// Stripe outside rebill (a charge, a refund, an authorization left held) and a transaction
/// whose amount is not what Stripe took are each reported, by CLI (text and JSON, exit 3) and
/// by the job (a warning in the log, the count in `/metrics`). The service runs on the real
/// clock, as Stripe does.
fn reconciliation(db: &str) {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let mut site = Site::sandbox_on_stripe_with(db, &proxy.base, true);
    site.plan("gold", 1000);
    let r = site.customer("c1", "4242424242424242");
    site.expect(r, 200);
    let r = site.subscribe("c1", "gold");
    site.expect(r, 201);
    let body = "<transaction><amount_in_cents>700</amount_in_cents><currency>USD</currency>\
                <account><account_code>c1</account_code></account></transaction>";
    let r = post(&site.s, "/v2/transactions", body);
    let charge = field(&site.expect(r, 201).body, "uuid");

    let (code, out, err) = reconcile(&mut site, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("no differences"), "{out}");
    assert!(out.contains("2 agree, 0 pending, 0 not made by rebill"), "{out}");

    // Money moved at Stripe behind rebill's back, under keys of rebill's form.
    let reference = sql(db, "SELECT gateway_reference FROM billing_infos")[0].clone();
    let (customer, method) = reference.split_once('/').expect("cus/pm");
    let intent = |key: Option<&str>, capture: &str| {
        let mut fields = vec![
            ("amount", "1500"),
            ("currency", "usd"),
            ("customer", customer),
            ("payment_method", method),
            ("confirm", "true"),
            ("capture_method", capture),
        ];
        if let Some(key) = key {
            fields.push(("metadata[rebill_attempt]", key));
        }
        let made = stripe.post_form("/v1/payment_intents", &fields);
        assert!(made["id"].as_str().is_some_and(|id| id.starts_with("pi_")), "{made}");
        made
    };
    let ghost = intent(Some("ghost-attempt"), "automatic");
    let held = intent(Some("held-attempt"), "manual");
    assert_eq!(held["status"], "requires_capture");
    intent(None, "automatic");
    let first = sql(db, "SELECT reference FROM transactions WHERE action = 'purchase' AND amount = 1000")[0].clone();
    let refund = stripe.post_form(
        "/v1/refunds",
        &[("payment_intent", first.as_str()), ("amount", "100"), ("metadata[rebill_attempt]", "ghost-refund")],
    );
    assert_eq!(refund["status"], "succeeded", "{refund}");
    // rebill's record of the one-off charge says another amount than Stripe took.
    sql(db, &format!("UPDATE transactions SET amount = 650 WHERE uuid = '{charge}'"));

    let (code, out, err) = reconcile(&mut site, &["--json"]);
    assert_eq!(code, 3, "differences exit 3: {out}{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    let found: BTreeSet<(String, String)> = report["differences"]
        .as_array()
        .expect("differences")
        .iter()
        .map(|d| (d["kind"].as_str().unwrap_or("").to_owned(), d["attempt"].as_str().unwrap_or("").to_owned()))
        .collect();
    let expected: BTreeSet<(String, String)> = [
        ("payment_not_recorded", "ghost-attempt"),
        ("authorization_held", "held-attempt"),
        ("amount_differs", charge.as_str()),
        ("refund_not_recorded", "ghost-refund"),
    ]
    .iter()
    .map(|(k, a)| ((*k).to_owned(), (*a).to_owned()))
    .collect();
    assert_eq!(found, expected, "{report}");
    assert_eq!((report["matched"].as_u64(), report["foreign"].as_u64()), (Some(1), Some(1)), "{report}");
    let ghosted =
        report["differences"].as_array().expect("differences").iter().find(|d| d["attempt"] == "ghost-attempt");
    let ghosted = ghosted.expect("the charge made outside rebill");
    assert_eq!(ghosted["gateway_references"], serde_json::json!([ghost["id"]]));
    assert_eq!((ghosted["rebill_cents"].as_i64(), ghosted["gateway_cents"].as_i64()), (Some(0), Some(1500)));
    assert_eq!(ghosted["transaction"], Value::Null);
    let differs = report["differences"].as_array().expect("differences").iter().find(|d| d["kind"] == "amount_differs");
    let differs = differs.expect("the amount");
    assert_eq!((differs["rebill_cents"].as_i64(), differs["gateway_cents"].as_i64()), (Some(650), Some(700)));
    let (code, text, _) = reconcile(&mut site, &[]);
    assert_eq!(code, 3);
    assert!(
        text.contains("4 differences:") && text.contains("authorization_held  payment attempt held-attempt"),
        "{text}"
    );

    // The hourly job finds the same: its warnings in the log, the count in /metrics. (The
    // sandbox clock moves the job's hour closer.)
    site.cli(&["site", "update", "--name", "sandbox", "--mode", "sandbox"]);
    let r = authed(&site.s, "POST", "/sandbox/clock", &xml(), "<clock><advance>1hour</advance></clock>");
    site.expect(r, 200);
    let metrics = site.metrics_addr.clone().expect("a metrics listener");
    let exposition = raw(&metrics, "GET /metrics HTTP/1.1\r\nHost: metrics\r\nConnection: close\r\n\r\n").body;
    let site_label = [("site", "sandbox")];
    assert_eq!(sample(&exposition, "rebill_reconcile_differences", &site_label), Some(4.0), "{exposition}");
    let runs = [("site", "sandbox"), ("outcome", "differences")];
    assert_eq!(sample(&exposition, "rebill_reconcile_runs_total", &runs), Some(1.0), "{exposition}");
    for name in ["rebill_reconcile_differences", "rebill_reconcile_runs_total"] {
        assert!(exposition.contains(&format!("# HELP {name} ")), "{name} is described:\n{exposition}");
    }
    let log = site.s.log();
    assert!(
        log.contains("reconciliation:") && log.contains("authorization_held") && log.contains("ghost-refund"),
        "{log}"
    );
    site.assert_secret_kept();

    // The run scheduled the next one, an hour on; a restarted service schedules a site's job when
    // none is waiting (a gateway set by an earlier version), the same row on every process.
    let waiting = "SELECT CAST(COUNT(*) AS TEXT) FROM jobs WHERE kind = 'reconcile_gateway' AND done_at IS NULL";
    assert_eq!(sql(db, waiting), ["1"]);
    sql(db, "DELETE FROM jobs WHERE kind = 'reconcile_gateway'");
    let Site { s, key_file, .. } = site;
    drop(s);
    let first = Site::serve_real_time_on(db, &key_file);
    let second = Site::serve_real_time_on(db, &key_file);
    assert_eq!(sql(db, waiting), ["1"], "one job for the site, whichever process scheduled it");
    drop((first, second));
}

#[test]
fn reconciliation_finds_what_moved_outside_rebill() {
    on_both_backends("stripe_reconcile", reconciliation);
}

/// Declines at attach and at charge, dunning through Stripe, refusals by name.
fn declines(db: &str) {
    let stripe = LocalStripe::start();
    let mut site = Site::on_stripe(db, &stripe.base);
    site.plan("gold", 1000);

    // Refused when attached: a transaction error, nothing stored.
    let r = site.customer("refused", "4000000000000002");
    let r = site.expect(r, 422);
    assert_eq!(field(&r.body, "error_code"), "declined", "{}", r.body);
    assert!(r.body.contains("<transaction_error>"), "{}", r.body);
    let r = get(&site.s, "/v2/accounts/refused/billing_info");
    site.expect(r, 404);

    // Attached, refused when charged.
    let r = site.customer("charged", "4000000000000341");
    site.expect(r, 200);
    let r = site.subscribe("charged", "gold");
    let r = site.expect(r, 422);
    assert_eq!(field(&r.body, "error_code"), "declined", "{}", r.body);

    // Dunning: a renewal declined, retried through Stripe, paid after a new card.
    let r = site.customer("dunned", "4242424242424242");
    site.expect(r, 200);
    let r = site.subscribe("dunned", "gold");
    site.expect(r, 201);
    let reference = |db: &str| {
        sql(
            db,
            "SELECT b.gateway_reference FROM billing_infos b JOIN accounts a ON a.id = b.account_id \
             WHERE a.account_code = 'dunned'",
        )[0]
        .clone()
    };
    let before = reference(db);
    let r = site.billing_info("dunned", "4000000000000341");
    site.expect(r, 200);
    // The new card replaced the old one with the same Stripe customer; the old one is detached.
    let after = reference(db);
    let ((customer, old_pm), (same_customer, new_pm)) =
        (before.split_once('/').expect("cus/pm"), after.split_once('/').expect("cus/pm"));
    assert_eq!(customer, same_customer, "{before} → {after}");
    assert_ne!(old_pm, new_pm);
    assert_eq!(stripe.get_json(&format!("/v1/payment_methods/{old_pm}"))["customer"], Value::Null);
    assert_eq!(stripe.get_json(&format!("/v1/payment_methods/{new_pm}"))["customer"], customer);
    site.s.set_clock(T0 + 32 * DAY);
    await_sql(db, "SELECT CAST(COUNT(*) AS TEXT) FROM invoices WHERE state = 'past_due'", "1");
    let number = sql(db, "SELECT CAST(invoice_number AS TEXT) FROM invoices WHERE state = 'past_due'")[0].clone();
    site.s.set_clock(T0 + 33 * DAY + 3600);
    await_sql(
        db,
        "SELECT CAST(COUNT(*) AS TEXT) FROM transactions WHERE action = 'purchase' AND status = 'declined' \
         AND gateway_type = 'stripe'",
        "3",
    );
    let tried: Vec<Value> = all(&stripe, "/v1/payment_intents")
        .into_iter()
        .filter(|pi| pi["metadata"]["rebill_invoice"] == number.as_str())
        .collect();
    assert_eq!(tried.len(), 2, "the renewal and its first retry were each one payment intent: {tried:?}");
    assert!(tried.iter().all(|pi| pi["status"] != "succeeded"));
    let r = site.billing_info("dunned", "4242424242424242");
    site.expect(r, 200);
    site.s.set_clock(T0 + 36 * DAY);
    await_sql(db, &format!("SELECT state FROM invoices WHERE invoice_number = {number}"), "paid");
    let paid: Vec<Value> = all(&stripe, "/v1/payment_intents")
        .into_iter()
        .filter(|pi| pi["metadata"]["rebill_invoice"] == number.as_str() && pi["status"] == "succeeded")
        .collect();
    assert_eq!(paid.len(), 1, "{paid:?}");

    // verify_cvv is refused by name; so are bank accounts.
    let r = authed(
        &site.s,
        "POST",
        "/v2/accounts/dunned/billing_info/verify_cvv",
        &xml_at("2.10"),
        "<billing_info><verification_value>123</verification_value></billing_info>",
    );
    let r = site.expect(r, 422);
    assert!(r.body.contains("stripe"), "the refusal names the gateway: {}", r.body);
    let body = "<billing_info><first_name>B</first_name><last_name>A</last_name><routing_number>123456780</routing_number>\
                <account_number>111111111</account_number><account_type>checking</account_type>\
                <name_on_account>B A</name_on_account><address1>1 Main</address1><city>X</city><zip>94105</zip>\
                <country>US</country></billing_info>";
    let r = put(&site.s, "/v2/accounts/dunned/billing_info", body);
    let r = site.expect(r, 422);
    assert!(r.body.contains("ach_transactions_not_supported"), "{}", r.body);
    site.assert_secret_kept();
}

#[test]
fn stripe_declines_are_transaction_errors() {
    on_both_backends("stripe_declines", declines);
}

/// A production site without a gateway declines charges and refunds with `no_gateway`.
fn without_gateway(db: &str) {
    let key_file = vault_key_file();
    let mut site = Site {
        s: Site::serve(db, &key_file, None, false),
        key_file,
        secret_file: PathBuf::new(),
        metrics_addr: None,
        seen: Vec::new(),
    };
    // Paid on the sandbox gateway while the site is in sandbox mode.
    site.plan("gold", 1000);
    let r = site.customer("c1", "4111111111111111");
    site.expect(r, 200);
    let r = site.subscribe("c1", "gold");
    site.expect(r, 201);
    let number = sql(db, "SELECT CAST(invoice_number AS TEXT) FROM invoices")[0].clone();
    site.cli(&["site", "update", "--name", "sandbox", "--mode", "production"]);

    let r = site.billing_info("c1", "4111111111111111");
    let r = site.expect(r, 422);
    assert_eq!(field(&r.body, "error_code"), "no_gateway", "{}", r.body);
    let body = "<transaction><amount_in_cents>700</amount_in_cents><currency>USD</currency>\
                <account><account_code>c1</account_code></account></transaction>";
    let r = post(&site.s, "/v2/transactions", body);
    let r = site.expect(r, 422);
    assert_eq!(field(&r.body, "error_code"), "no_gateway", "{}", r.body);
    let r = authed(&site.s, "POST", &format!("/v2/invoices/{number}/refund"), &xml_at("2.9"), "<invoice></invoice>");
    let r = site.expect(r, 422);
    assert!(r.body.contains("no_gateway"), "{}", r.body);
    // Back in sandbox mode, the sandbox gateway charges again.
    site.cli(&["site", "update", "--name", "sandbox", "--mode", "sandbox"]);
    let r = site.billing_info("c1", "4111111111111111");
    site.expect(r, 200);
}

#[test]
fn production_without_a_gateway_declines_no_gateway() {
    on_both_backends("no_gateway", without_gateway);
}

/// Stripe charges, its answer is lost on the way back: rebill finds the payment intent. The
/// site stays in sandbox mode: a sandbox site with a gateway set charges through it.
fn lost_answer(db: &str) {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let mut site = Site::sandbox_on_stripe(db, &proxy.base);
    site.plan("gold", 1000);
    let r = site.customer("c1", "4242424242424242");
    site.expect(r, 200);
    proxy.drop_answers("POST", "/v1/payment_intents", 1);
    let r = site.subscribe("c1", "gold");
    let r = site.expect(r, 201);
    // One charge, whose answer was lost and which the look-up found.
    assert_eq!(proxy.count("POST", "/v1/payment_intents"), 1, "Stripe was asked to charge once");
    let intents = succeeded_intents(&stripe);
    assert_eq!(intents.len(), 1, "one payment intent: {intents:?}");
    let txs = site.expect(get(&site.s, "/v2/accounts/c1/transactions"), 200);
    assert_eq!(field(&txs.body, "status"), "success", "{}", txs.body);
    assert_eq!(field(&txs.body, "gateway_type"), "stripe", "{}", txs.body);
    assert!(intents.contains_key(&field(&txs.body, "reference")), "{}", txs.body);
    assert!(r.body.contains("<state>active</state>"), "{}", r.body);
    site.assert_secret_kept();
}

#[test]
fn a_lost_answer_charges_once() {
    on_both_backends("stripe_lost", lost_answer);
}

/// `kill -9` in the middle of a batch of renewals: after a restart each invoice is paid by
/// exactly one payment intent.
fn killed_during_renewals(db: &str) {
    const CUSTOMERS: usize = 12;
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let mut site = Site::on_stripe(db, &proxy.base);
    site.plan("gold", 1000);
    for n in 0..CUSTOMERS {
        let code = format!("c{n}");
        let r = site.customer(&code, "4242424242424242");
        site.expect(r, 200);
        let r = site.subscribe(&code, "gold");
        site.expect(r, 201);
    }
    let before = proxy.count("POST", "/v1/payment_intents");
    // Each charge takes a while, so the kill lands inside the batch.
    proxy.delay("POST", "/v1/payment_intents", Duration::from_millis(300));
    site.s.set_clock(T0 + 32 * DAY);
    let deadline = Instant::now() + Duration::from_secs(60);
    while proxy.count("POST", "/v1/payment_intents") < before + 3 {
        assert!(Instant::now() < deadline, "the renewals did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let clock = site.s.clock.clone();
    let Site { s, key_file, .. } = site;
    drop(s); // SIGKILL
    let processing = sql(db, "SELECT CAST(COUNT(*) AS TEXT) FROM transactions WHERE status = 'processing'");
    assert_ne!(processing[0], "0", "the kill landed inside the batch (charges recorded, not completed)");

    let s = Site::serve(db, &key_file, clock, true);
    // Past the claims of the killed process.
    s.set_clock(T0 + 32 * DAY + 3600);
    await_sql(
        db,
        "SELECT CAST(COUNT(*) AS TEXT) FROM invoices WHERE state IN ('collected', 'paid')",
        &(2 * CUSTOMERS).to_string(),
    );
    await_sql(db, "SELECT CAST(COUNT(*) AS TEXT) FROM transactions WHERE status = 'processing'", "0");
    let intents = succeeded_intents(&stripe);
    let mut by_invoice: BTreeMap<String, usize> = BTreeMap::new();
    for (_, invoice) in intents.values() {
        *by_invoice.entry(invoice.clone()).or_default() += 1;
    }
    let invoices: BTreeSet<String> = sql(db, "SELECT CAST(invoice_number AS TEXT) FROM invoices").into_iter().collect();
    assert_eq!(by_invoice.keys().cloned().collect::<BTreeSet<_>>(), invoices, "every invoice was charged");
    assert!(by_invoice.values().all(|n| *n == 1), "an invoice paid twice: {by_invoice:?}");
    assert_eq!(transactions(db, "purchase", "'success'").len(), 2 * CUSTOMERS);
    assert_eq!(intents.len(), 2 * CUSTOMERS);
}

#[test]
fn renewals_killed_mid_batch_charge_once() {
    on_both_backends("stripe_kill", killed_during_renewals);
}
