//! Stripe's faults, end to end: the `rebill` binary on a sandbox site put on Stripe, with
//! [`StripeProxy`] (Stripe's idempotency rules, held and failed calls) between rebill and
//! `localstripe` (started from a virtualenv under the target directory; a missing PyPI or
//! PostgreSQL fails the run), on SQLite and on PostgreSQL at once (one thread each, so the waits
//! past rebill's time-outs overlap).
//!
//! - Charges (a renewal, a one-off transaction, a signup, a purchase, a collect) and a refund
//!   held past the gateway's time-out before the peer: answered as pending (`processing`), never
//!   declined, no credit kept, no dunning, no second attempt by another collect; the settle jobs
//!   and the refund's recovery job meet the first requests still in flight (409) and leave the
//!   outcome pending; once the calls land every invoice is paid and the refund made, each
//!   exactly once. A charge and a refund the peer made at once whose answers are held past the
//!   time-out are found by the look-up at once.
//! - A saved 500 (`fail_after`: the peer charged, the key replays a 500): found by the look-up,
//!   paid, never charged twice; a saved 500 whose request never reached the peer
//!   (`fail_before`) stays pending, then is declined once the key may be forgotten.
//! - `kill -9` while the gateway call of each money operation is held (one-off transaction,
//!   signup, purchase, collect, refund, void), once with the request held before the peer and
//!   once with the peer's answer held: after a restart the settle and recovery jobs finish each
//!   one, and nothing is charged or refunded twice.
//! - PostgreSQL with two `rebill serve` processes: concurrent charges, raced refunds and raced
//!   collects of one invoice through both, with faults mixed in (the first create and the first
//!   refund the proxy reads each meet a held answer, a saved 500 and a lost connection at once:
//!   a request takes one rule of each kind, and that way no fault can land on a capture).
//!
//! After each scenario [`assert_ledger_matches`] compares, invoice by invoice, what the peer
//! shows with what rebill recorded.
//!
//! rebill's own bound on a gateway call cannot be shortened for a test: the Stripe gateway's
//! per-call time-out is 20 s (`rebill_gateway_stripe::DEFAULT_TIMEOUT`, no flag or variable of
//! `rebill serve` sets it) and `Services::gateway_timeout` is 60 s, so the calls held past the
//! time-out are held [`PAST_TIMEOUT`].

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rebill_testkit::localstripe::{LocalStripe, StripeProxy};
use rebill_testkit::*;
use serde_json::Value;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
/// The site's Stripe key (localstripe takes any test key).
const SECRET: &str = "sk_test_rebillFaults0123456789abcdef";
/// A card Stripe charges.
const GOOD: &str = "4242424242424242";
/// A card Stripe attaches and then declines when it is charged.
const DECLINED_AT_CHARGE: &str = "4000000000000341";
/// Longer than the Stripe gateway's time-out of each HTTP call (20 s), with room for the settle
/// jobs to run while the first call is still held.
const PAST_TIMEOUT: Duration = Duration::from_secs(35);
/// Long enough for a `kill -9` to land while the calls are held.
const HOLD_FOR_KILL: Duration = Duration::from_secs(10);
/// How long a condition is waited for.
const PATIENCE: Duration = Duration::from_secs(90);

const INTENTS: &str = "/v1/payment_intents";
/// Steps on one intent (a confirm, a capture, a cancel): targets under [`INTENTS`] that are not
/// creates.
const INTENT_STEPS: &str = "/v1/payment_intents/";
const REFUNDS: &str = "/v1/refunds";

// ---------------------------------------------------------------------------------------------
// The ledger.

/// What moved for one invoice: the payments that collected money (PaymentIntent id → cents) and
/// the cents given back.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Moved {
    charged: BTreeMap<String, i64>,
    refunded: i64,
}

/// Every object of a localstripe list, read from localstripe itself (no fault of the proxy
/// applies), by id.
fn peer_objects(stripe: &LocalStripe, path: &str) -> BTreeMap<String, Value> {
    let mut objects = BTreeMap::new();
    let mut after: Option<String> = None;
    for _ in 0..1000 {
        let page = match &after {
            Some(id) => stripe.get_json(&format!("{path}?limit=100&starting_after={id}")),
            None => stripe.get_json(&format!("{path}?limit=100")),
        };
        let data = page["data"].as_array().cloned().unwrap_or_default();
        after = data.last().and_then(|o| o["id"].as_str()).map(str::to_owned);
        for object in data {
            let id = object["id"].as_str().unwrap_or_default().to_owned();
            objects.insert(id, object);
        }
        if page["has_more"] != Value::Bool(true) || after.is_none() {
            return objects;
        }
    }
    panic!("{path}: more than 1000 pages");
}

/// What a PaymentIntent collected: Stripe's `amount_received`; localstripe leaves it out, and
/// collects the whole amount once `succeeded`.
fn amount_received(intent: &Value) -> i64 {
    intent["amount_received"].as_i64().unwrap_or_else(|| {
        if intent["status"] == "succeeded" { intent["amount"].as_i64().unwrap_or_default() } else { 0 }
    })
}

/// The peer agrees with rebill, invoice by invoice, once the peer is healthy and the jobs have
/// run:
///
/// - nothing is left half-done in rebill (no transaction and no invoice `processing`), and no
///   PaymentIntent is left `requires_capture` at the peer;
/// - for every invoice (the database holds one site: invoice numbers are rebill's
///   `metadata.rebill_invoice`), the PaymentIntents that collected money and what each
///   collected are exactly rebill's purchases through Stripe that succeeded (or were voided
///   since), by reference and amount;
/// - what the peer refunded of those intents (Refunds neither failed nor canceled) is what
///   rebill shows given back: its successful refund transactions of the invoice's purchases and
///   its voided purchases;
/// - nobody is charged twice (at most one payment collected per invoice), and no invoice
///   collected more than its total or gave back more than it collected.
///
/// Then `rebill reconcile` (on the service's clock, the window from long before the service's
/// time, which runs ahead of the peer's) must find the same: no difference, nothing pending, and
/// every payment and refund of the peer compared.
#[track_caller]
fn assert_ledger_matches(b: &Bench) {
    let (db, stripe) = (b.db.as_str(), &b.stripe);
    let processing = sql(
        db,
        "SELECT uuid || ' ' || action || ' ' || account_code || ' ' || COALESCE(reference, '-') \
         FROM transactions WHERE status = 'processing'",
    );
    assert!(processing.is_empty(), "transactions still processing: {processing:?}");
    let open = sql(db, "SELECT CAST(invoice_number AS TEXT) FROM invoices WHERE state = 'processing'");
    assert!(open.is_empty(), "invoices still processing: {open:?}");
    assert_eq!(sql(db, "SELECT COUNT(*) FROM sites"), ["1"], "the ledger is kept for a database of one site");

    // rebill's side.
    let mut ours: BTreeMap<String, Moved> = BTreeMap::new();
    let purchases = sql(
        db,
        "SELECT CAST(i.invoice_number AS TEXT) || '|' || t.status || '|' || CAST(t.amount AS TEXT) || '|' \
         || COALESCE(t.reference, '') FROM transactions t JOIN invoices i ON i.id = t.invoice_id \
         WHERE t.action = 'purchase' AND t.gateway_type = 'stripe' AND t.status IN ('success', 'void')",
    );
    for row in &purchases {
        let [number, status, amount, reference] = split4(row);
        let amount: i64 = amount.parse().expect("amount");
        let moved = ours.entry(number.to_owned()).or_default();
        assert!(
            moved.charged.insert(reference.to_owned(), amount).is_none(),
            "invoice {number}: two of rebill's purchases name {reference}"
        );
        if status == "void" {
            moved.refunded += amount;
        }
    }
    let refunds = sql(
        db,
        "SELECT CAST(i.invoice_number AS TEXT) || '|' || t.status || '|' || CAST(t.amount AS TEXT) || '|' \
         || COALESCE(p.reference, '') FROM transactions t JOIN transactions p ON p.id = t.original_transaction_id \
         JOIN invoices i ON i.id = p.invoice_id \
         WHERE t.action = 'refund' AND t.gateway_type = 'stripe' AND t.status = 'success'",
    );
    for row in &refunds {
        let [number, _, amount, _] = split4(row);
        ours.entry(number.to_owned()).or_default().refunded += amount.parse::<i64>().expect("amount");
    }

    // The peer's side.
    let intents = peer_objects(stripe, INTENTS);
    let uncaptured: Vec<&String> =
        intents.iter().filter(|(_, pi)| pi["status"] == "requires_capture").map(|(id, _)| id).collect();
    assert!(uncaptured.is_empty(), "PaymentIntents left requires_capture at the peer: {uncaptured:?}");
    let invoice_of = |pi: &Value| pi["metadata"]["rebill_invoice"].as_str().unwrap_or("(no rebill_invoice)").to_owned();
    let mut theirs: BTreeMap<String, Moved> = BTreeMap::new();
    for (id, pi) in &intents {
        let received = amount_received(pi);
        if received > 0 {
            theirs.entry(invoice_of(pi)).or_default().charged.insert(id.clone(), received);
        }
    }
    for (id, refund) in peer_objects(stripe, REFUNDS) {
        if matches!(refund["status"].as_str(), Some("failed" | "canceled")) {
            continue;
        }
        let amount = refund["amount"].as_i64().unwrap_or_default();
        let invoice = match refund["payment_intent"].as_str().and_then(|pi| intents.get(pi)) {
            Some(pi) => invoice_of(pi),
            None => format!("(refund {id} of no known PaymentIntent)"),
        };
        theirs.entry(invoice).or_default().refunded += amount;
    }

    assert!(!ours.is_empty(), "nothing was charged: a ledger of nothing proves nothing");
    if ours != theirs {
        let numbers: BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
        let differences: Vec<String> = numbers
            .into_iter()
            .filter(|n| ours.get(*n) != theirs.get(*n))
            .map(|n| format!("invoice {n}: rebill {:?}, peer {:?}", ours.get(n), theirs.get(n)))
            .collect();
        panic!("the peer and rebill disagree:\n  {}", differences.join("\n  "));
    }
    let totals: BTreeMap<String, i64> =
        sql(db, "SELECT CAST(invoice_number AS TEXT) || '|' || CAST(total AS TEXT) FROM invoices")
            .iter()
            .map(|row| {
                let (number, total) = row.split_once('|').expect("number|total");
                (number.to_owned(), total.parse().expect("total"))
            })
            .collect();
    for (number, moved) in &ours {
        assert!(moved.charged.len() <= 1, "invoice {number} was charged more than once: {moved:?}");
        let collected: i64 = moved.charged.values().sum();
        let total = totals.get(number).copied().unwrap_or_default();
        assert!(collected <= total, "invoice {number} collected {collected} of a total of {total}");
        assert!(moved.refunded <= collected, "invoice {number} gave back {} of {collected}", moved.refunded);
    }

    let out = std::process::Command::new(bin())
        .args(["--database", db, "reconcile", "--site", "sandbox", "--since", "2020-01-01", "--json"])
        .args(["--vault-key-file", &b.key_file])
        .env("REBILL_CLOCK_FILE", &b.clock)
        .output()
        .expect("run rebill reconcile");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "rebill reconcile: {text}{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(report["differences"], serde_json::json!([]), "{report}");
    assert_eq!(report["pending"], 0, "{report}");
    let records = intents.len() + peer_objects(stripe, REFUNDS).len();
    assert_eq!(report["gateway_records"].as_u64(), Some(records as u64), "every record of the peer read: {report}");
}

fn split4(row: &str) -> [&str; 4] {
    let mut parts = row.splitn(4, '|');
    let mut next = || parts.next().unwrap_or_else(|| panic!("four fields in {row:?}"));
    [next(), next(), next(), next()]
}

// ---------------------------------------------------------------------------------------------
// The bench: localstripe, the proxy, and the service on one database.

/// Runs `scenario` on a fresh SQLite database and on a fresh PostgreSQL database at the same
/// time, each on a thread of its own named after the backend; the test fails when either does.
fn on_both_backends_at_once(tag: &str, scenario: fn(&str)) {
    let sqlite = rebill_store::testing::fresh_sqlite_url(tag);
    let postgres = postgres_database(tag);
    let runs: Vec<(&str, std::thread::JoinHandle<()>)> = [("sqlite", sqlite), ("postgres", postgres.url().to_owned())]
        .into_iter()
        .map(|(backend, db)| {
            let thread = std::thread::Builder::new()
                .name(format!("{tag}-{backend}"))
                .spawn(move || scenario(&db))
                .expect("start a backend's thread");
            (backend, thread)
        })
        .collect();
    let failed: Vec<&str> =
        runs.into_iter().filter_map(|(backend, run)| run.join().is_err().then_some(backend)).collect();
    assert!(failed.is_empty(), "{tag} failed on {failed:?} (the panics above say why)");
}

/// Waits until `done` holds, at most [`PATIENCE`].
#[track_caller]
fn await_that(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// PaymentIntents created through the proxy so far (forwarded and answered by the peer): a
/// step on an intent (a capture, a confirm) is not a create.
fn creates(proxy: &StripeProxy) -> usize {
    proxy.count("POST", INTENTS) - proxy.count("POST", INTENT_STEPS)
}

/// Creates of PaymentIntents the proxy received (held ones included).
fn creates_received(proxy: &StripeProxy) -> usize {
    proxy.received("POST", INTENTS) - proxy.received("POST", INTENT_STEPS)
}

/// Creates of PaymentIntents refused 409 because their key was in flight.
fn create_conflicts(proxy: &StripeProxy) -> usize {
    proxy.conflicts("POST", INTENTS) - proxy.conflicts("POST", INTENT_STEPS)
}

fn refunds_made(proxy: &StripeProxy) -> usize {
    proxy.count("POST", REFUNDS)
}

/// A request sent raw, whose connection may break (the service killed meanwhile): `None` then.
fn try_send(addr: &str, key: &str, method: &str, path: &str, body: &str) -> Option<Reply> {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Basic {}\r\n\
         Accept: application/xml\r\nX-Api-Version: 2.11\r\nContent-Type: application/xml; charset=utf-8\r\n\
         Content-Length: {}\r\n\r\n{body}",
        basic(key),
        body.len()
    );
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some(Reply { status, head: head.to_owned(), body: body.to_owned() })
}

/// localstripe, the proxy in front of it, and `rebill serve` processes on one database whose
/// sandbox site is on Stripe through the proxy (left in sandbox mode, so its clock can be moved).
struct Bench {
    stripe: LocalStripe,
    proxy: StripeProxy,
    db: String,
    servers: Vec<Server>,
    key: String,
    public_key: String,
    key_file: String,
    clock: PathBuf,
    /// What the servers killed so far had logged.
    killed_logs: Vec<String>,
    /// Expectations that did not hold, reported together when the scenario ends ([`Bench::finish`])
    /// so that one wrong answer does not hide what rebill does after it.
    failures: Mutex<Vec<String>>,
}

impl Drop for Bench {
    fn drop(&mut self) {
        let failures = self.failures.lock().map(|f| f.clone()).unwrap_or_default();
        if std::thread::panicking() && !failures.is_empty() {
            eprintln!("also failed before that:\n  {}", failures.join("\n  "));
        }
    }
}

impl Bench {
    fn new(db: &str, processes: usize) -> Bench {
        let stripe = LocalStripe::start();
        let proxy = StripeProxy::start(&stripe.base);
        let key_file = vault_key_file();
        let first = start_with(
            db,
            Options {
                clock: Some(T0),
                args: &["--vault-key-file", &key_file],
                capture_stderr: true,
                ..Options::default()
            },
        );
        let secret_file = PathBuf::from(&key_file).with_file_name("stripe.key");
        std::fs::write(&secret_file, format!("{SECRET}\n")).expect("the secret key file");
        let set = first.cli_json(&[
            "gateway",
            "set",
            "--site",
            "sandbox",
            "stripe",
            "--secret-key-file",
            &secret_file.display().to_string(),
            "--api-base",
            &proxy.base,
            "--vault-key-file",
            &key_file,
        ]);
        assert_eq!((set["gateway"].as_str(), set["api_base"].as_str()), (Some("stripe"), Some(proxy.base.as_str())));
        let mut bench = Bench {
            stripe,
            proxy,
            db: db.to_owned(),
            key: first.key.clone(),
            public_key: first.public_key.clone(),
            clock: first.clock.clone().expect("a clock file"),
            servers: vec![first],
            key_file,
            killed_logs: Vec::new(),
            failures: Mutex::new(Vec::new()),
        };
        for _ in 1..processes {
            bench.start_one();
        }
        bench
    }

    /// One more `rebill serve` on the database, its clock and its vault key.
    fn start_one(&mut self) {
        let mut s = start_with(
            &self.db,
            Options {
                clock_file: Some(self.clock.clone()),
                args: &["--vault-key-file", &self.key_file],
                existing_database: true,
                capture_stderr: true,
                ..Options::default()
            },
        );
        (s.key, s.public_key) = (self.key.clone(), self.public_key.clone());
        self.servers.push(s);
    }

    /// `kill -9` of every server (reaped before this returns).
    fn kill_all(&mut self) {
        for s in self.servers.drain(..) {
            self.killed_logs.push(s.log());
            drop(s);
        }
    }

    /// Records an expectation that did not hold (the scenario goes on; [`Bench::finish`] fails).
    #[track_caller]
    fn check<S: std::fmt::Display>(&self, holds: bool, what: impl FnOnce() -> S) {
        if !holds {
            let at = std::panic::Location::caller();
            let failure = format!("line {}: {}", at.line(), what());
            eprintln!("[{}] FAILED: {failure}", std::thread::current().name().unwrap_or("?"));
            self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(failure);
        }
    }

    /// [`Bench::check`] that `actual` is `expected`.
    #[track_caller]
    fn check_eq<T, U>(&self, actual: T, expected: U, what: &str)
    where
        T: PartialEq<U> + std::fmt::Debug,
        U: std::fmt::Debug,
    {
        let holds = actual == expected;
        self.check(holds, || format!("{what}: {actual:?}, expected {expected:?}"));
    }

    /// Fails the scenario with every expectation that did not hold.
    #[track_caller]
    fn finish(&self) {
        let failures = std::mem::take(&mut *self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        assert!(
            failures.is_empty(),
            "{} expectation(s) did not hold:\n  {}\n--- log\n{}",
            failures.len(),
            failures.join("\n  "),
            self.money_log()
        );
    }

    fn s(&self) -> &Server {
        self.servers.first().expect("a running server")
    }

    /// Everything every server logged, the killed ones' first.
    fn log(&self) -> String {
        let mut all = self.killed_logs.join("\n--- (killed)\n");
        for s in &self.servers {
            all.push_str("\n--- (running)\n");
            all.push_str(&s.log());
        }
        all
    }

    /// The log lines that speak of Stripe or of payments not settled (for failure messages).
    fn money_log(&self) -> String {
        self.log()
            .lines()
            .filter(|l| {
                l.contains("stripe")
                    || l.contains("outcome")
                    || l.contains("processing")
                    || l.contains("refund")
                    || l.contains("WARN")
                    || l.contains("ERROR")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn send_to(&self, server: usize, method: &str, path: &str, body: &str) -> Reply {
        let s = &self.servers[server % self.servers.len()];
        authed_with(s, &self.key, method, path, &xml_at("2.11"), body)
    }

    fn send(&self, method: &str, path: &str, body: &str) -> Reply {
        self.send_to(0, method, path, body)
    }

    fn get(&self, path: &str) -> Reply {
        ok(self.send("GET", path, ""), 200)
    }

    /// Moves the site's clock on by `amount` (`31 seconds`, `1 hour`, `1month`): the jobs that
    /// came due run before the answer.
    #[track_caller]
    fn advance(&self, amount: &str) {
        sandbox_clock(self.s(), &format!("<advance>{amount}</advance>"));
    }

    /// Lets `seconds` of real time pass: the service's own clock (the file every process reads)
    /// moves on, and every site's clock with it; then the site's due jobs run (a clock call that
    /// moves it no further). The sweep and the settle jobs may judge an attempt's age by either
    /// clock, so both move.
    #[track_caller]
    fn pass_real_time(&self, seconds: i64) {
        let text = std::fs::read_to_string(&self.clock).expect("the clock file");
        let now: i64 = text.trim().parse().unwrap_or_else(|_| panic!("the clock file holds {text:?}"));
        std::fs::write(&self.clock, (now + seconds).to_string()).expect("write the clock file");
        self.advance("0 seconds");
    }

    /// The integer one SQL statement answers.
    #[track_caller]
    fn int(&self, statement: &str) -> i64 {
        let rows = sql(&self.db, statement);
        assert_eq!(rows.len(), 1, "{statement}: {rows:?}");
        rows[0].parse().unwrap_or_else(|_| panic!("{statement}: {rows:?}"))
    }

    fn text(&self, statement: &str) -> Vec<String> {
        sql(&self.db, statement)
    }

    fn plan(&self, code: &str, cents: i64) {
        let body = format!(
            "<plan><plan_code>{code}</plan_code><name>{code}</name><unit_amount_in_cents><USD>{cents}</USD>\
             </unit_amount_in_cents><plan_interval_length>1</plan_interval_length>\
             <plan_interval_unit>months</plan_interval_unit></plan>"
        );
        ok(self.send("POST", "/v2/plans", &body), 201);
    }

    /// A new account with the billing info of `card` (its card stored at Stripe).
    fn customer(&self, code: &str, card: &str) {
        let body = format!("<account><account_code>{code}</account_code></account>");
        ok(self.send("POST", "/v2/accounts", &body), 201);
        self.card(code, card);
    }

    /// Replaces the account's billing info with `card`.
    fn card(&self, code: &str, card: &str) {
        let body = format!("<billing_info><token_id>{}</token_id></billing_info>", card_token(self.s(), card));
        ok(self.send("PUT", &format!("/v2/accounts/{code}/billing_info"), &body), 200);
    }

    /// A one-off charge of the account's card (the reply is the caller's to check).
    fn one_off(&self, code: &str, cents: i64) -> Reply {
        self.send("POST", "/v2/transactions", &one_off_body(code, cents))
    }

    /// A one-off charge that must succeed: its uuid and the invoice it paid.
    fn paid_one_off(&self, code: &str, cents: i64) -> (String, String) {
        let r = ok(self.one_off(code, cents), 201);
        assert_eq!(field(&r.body, "status"), "success", "{}", r.body);
        let uuid = field(&r.body, "uuid");
        let number = self.invoice_of(&uuid);
        (uuid, number)
    }

    /// The number of the invoice the transaction `uuid` belongs to.
    fn invoice_of(&self, uuid: &str) -> String {
        let rows = self.text(&format!(
            "SELECT CAST(i.invoice_number AS TEXT) FROM transactions t JOIN invoices i ON i.id = t.invoice_id \
             WHERE t.uuid = '{uuid}'"
        ));
        assert_eq!(rows.len(), 1, "the invoice of transaction {uuid}: {rows:?}");
        rows[0].clone()
    }

    fn transaction_status(&self, uuid: &str) -> String {
        self.text(&format!("SELECT status FROM transactions WHERE uuid = '{uuid}'")).concat()
    }

    /// The invoice's state as the API shows it at 2.11.
    fn invoice_state(&self, number: &str) -> String {
        field(&self.get(&format!("/v2/invoices/{number}")).body, "state")
    }

    /// An invoice of the account's pending adjustment of `cents`, collected at once: answers
    /// the reply.
    fn invoice_adjustment(&self, code: &str, cents: i64) -> Reply {
        let body = format!(
            "<adjustment><description>Service</description><unit_amount_in_cents>{cents}</unit_amount_in_cents>\
             <currency>USD</currency></adjustment>"
        );
        ok(self.send("POST", &format!("/v2/accounts/{code}/adjustments"), &body), 201);
        self.send("POST", &format!("/v2/accounts/{code}/invoices"), "")
    }

    /// A past-due invoice of `cents` (its charge declined), the account's card then replaced by
    /// one Stripe charges: answers the invoice's number.
    fn past_due_invoice(&self, code: &str, cents: i64) -> String {
        self.customer(code, DECLINED_AT_CHARGE);
        let r = ok(self.invoice_adjustment(code, cents), 201);
        assert_eq!(field(&r.body, "state"), "past_due", "{}", r.body);
        let number = field(&r.body, "invoice_number");
        self.card(code, GOOD);
        number
    }

    /// The account's invoices' states and its purchases' and refunds' statuses, in order:
    /// `paid paid | purchase:success refund:success`.
    fn summary(&self, code: &str) -> String {
        let invoices = self.text(&format!(
            "SELECT i.state FROM invoices i JOIN accounts a ON a.id = i.account_id \
             WHERE a.account_code = '{code}' ORDER BY i.invoice_number"
        ));
        let transactions = self.text(&format!(
            "SELECT action || ':' || status FROM transactions WHERE account_code = '{code}' \
             AND action IN ('purchase', 'refund') ORDER BY id"
        ));
        format!("{} | {}", invoices.join(" "), transactions.join(" "))
    }

    /// Whether the account has a transaction or an invoice `processing`: a money operation of
    /// it under way.
    fn under_way(&self, code: &str) -> bool {
        self.int(&format!(
            "SELECT (SELECT COUNT(*) FROM transactions WHERE account_code = '{code}' AND status = 'processing') + \
             (SELECT COUNT(*) FROM invoices i JOIN accounts a ON a.id = i.account_id \
              WHERE a.account_code = '{code}' AND i.state = 'processing')"
        )) > 0
    }

    /// Lets an hour pass at a time (the sweep, the settle jobs and the refunds' recovery jobs
    /// that came due run each time) until no transaction and no invoice is `processing`.
    #[track_caller]
    fn settle_everything(&self) {
        for _ in 0..6 {
            let open = self.int(
                "SELECT (SELECT COUNT(*) FROM transactions WHERE status = 'processing') + \
                 (SELECT COUNT(*) FROM invoices WHERE state = 'processing')",
            );
            if open == 0 {
                return;
            }
            self.pass_real_time(3600);
        }
        let left = self
            .text("SELECT uuid || ' ' || action || ' ' || account_code FROM transactions WHERE status = 'processing'");
        panic!("still processing after six hours of jobs: {left:?}\n--- log\n{}", self.money_log());
    }
}

fn one_off_body(code: &str, cents: i64) -> String {
    format!(
        "<transaction><amount_in_cents>{cents}</amount_in_cents><currency>USD</currency>\
         <account><account_code>{code}</account_code></account></transaction>"
    )
}

fn subscription_body(code: &str, plan: &str) -> String {
    format!(
        "<subscription><plan_code>{plan}</plan_code><currency>USD</currency>\
         <account><account_code>{code}</account_code></account></subscription>"
    )
}

fn purchase_body(code: &str, cents: i64) -> String {
    format!(
        "<purchase><currency>USD</currency><account><account_code>{code}</account_code></account>\
         <adjustments><adjustment><description>Widget</description><unit_amount_in_cents>{cents}\
         </unit_amount_in_cents><quantity>1</quantity></adjustment></adjustments></purchase>"
    )
}

/// A refund of `cents` of an invoice through its payment (`None`: all that is left).
fn refund_body(cents: Option<i64>) -> String {
    let amount = cents.map(|c| format!("<amount_in_cents>{c}</amount_in_cents>")).unwrap_or_default();
    format!("<invoice><refund_method>transaction_first</refund_method>{amount}</invoice>")
}

/// Whether the account's balance shows credit (a negative amount owed).
fn has_credit(b: &Bench, code: &str) -> bool {
    let r = b.get(&format!("/v2/accounts/{code}/balance"));
    r.body.contains("type=\"integer\">-")
}

// ---------------------------------------------------------------------------------------------
// 1, 2 and 4: calls held past the time-out.

/// The number of the refund invoice of the invoice `number` (the only one).
fn refund_invoice_of(b: &Bench, number: &str) -> String {
    let rows = b.text(&format!(
        "SELECT CAST(r.invoice_number AS TEXT) FROM invoices r JOIN invoices o ON o.id = r.original_invoice_id \
         WHERE o.invoice_number = {number}"
    ));
    assert_eq!(rows.len(), 1, "the refund invoices of invoice {number}: {rows:?}");
    rows[0].clone()
}

/// A renewal, a one-off charge, a signup, a purchase, a collect and a refund whose calls are held
/// past the gateway's time-out before they reach the peer; and a one-off charge and a refund the
/// peer made at once whose answers are held past it.
fn held_past_the_timeout(db: &str) {
    let b = Bench::new(db, 1);
    b.plan("gold", 1000);
    b.customer("renewer", GOOD);
    let r = ok(b.send("POST", "/v2/subscriptions", &subscription_body("renewer", "gold")), 201);
    let subscription = field(&r.body, "uuid");
    for code in ["buyer", "signer", "shopper", "refunded", "late", "late_refund"] {
        b.customer(code, GOOD);
    }
    // An hour before the renewal (a month after the signup), a past-due invoice whose first
    // dunning retry is a day later: the renewal's clock move leaves it as it is.
    b.advance("743 hours");
    let collected = b.past_due_invoice("collector", 900);
    let (_, refunded_invoice) = b.paid_one_off("refunded", 1500);
    let (_, late_refunded_invoice) = b.paid_one_off("late_refund", 1200);

    let (created, made_refunds) = (creates(&b.proxy), refunds_made(&b.proxy));
    let (received, refunds_received) = (creates_received(&b.proxy), b.proxy.received("POST", REFUNDS));
    b.proxy.hold_before("POST", INTENTS, PAST_TIMEOUT, 5);
    b.proxy.hold_before("POST", REFUNDS, PAST_TIMEOUT, 1);
    // The renewal first (the clock call runs it and answers once it ended); then, on the renewal
    // day, the one-off charge, the signup, the purchase, the collect and the refund held before
    // the peer; once those are held, the one-off charge and the refund whose answers are held.
    let [charge, signup, purchase, collect, refund, late, late_refund] = std::thread::scope(|scope| {
        let b = &b;
        let renewal = scope.spawn(move || b.advance("1 hour"));
        await_that("the renewal's charge to reach the proxy", || creates_received(&b.proxy) == received + 1);
        let held = [
            ("POST", "/v2/transactions".to_owned(), one_off_body("buyer", 700)),
            ("POST", "/v2/subscriptions".to_owned(), subscription_body("signer", "gold")),
            ("POST", "/v2/purchases".to_owned(), purchase_body("shopper", 1100)),
            ("PUT", format!("/v2/invoices/{collected}/collect"), String::new()),
            ("POST", format!("/v2/invoices/{refunded_invoice}/refund"), refund_body(None)),
        ]
        .map(|(method, path, body)| scope.spawn(move || b.send(method, &path, &body)));
        await_that("the charges and the refund to be held", || {
            creates_received(&b.proxy) == received + 5 && b.proxy.received("POST", REFUNDS) == refunds_received + 1
        });
        b.proxy.hold_after("POST", INTENTS, PAST_TIMEOUT, 1);
        b.proxy.hold_after("POST", REFUNDS, PAST_TIMEOUT, 1);
        let late = scope.spawn(move || b.one_off("late", 600));
        let path = format!("/v2/invoices/{late_refunded_invoice}/refund");
        let late_refund = scope.spawn(move || b.send("POST", &path, &refund_body(None)));
        let [charge, signup, purchase, collect, refund] = held.map(|r| r.join().expect("a request"));
        let [late, late_refund] = [late, late_refund].map(|r| r.join().expect("a request"));
        renewal.join().expect("the renewal");
        [charge, signup, purchase, collect, refund, late, late_refund]
    });
    assert_eq!(
        (creates(&b.proxy), refunds_made(&b.proxy)),
        (created + 1, made_refunds + 1),
        "only the calls whose answers are held reached the peer (the others are still held before it)"
    );

    // 1: processing, never a decline.
    b.check(charge.status == 201 && field(&charge.body, "status") == "processing", || {
        format!(
            "POST /v2/transactions past the time-out answers 201 `processing`, not:\n{}\n{}",
            charge.head, charge.body
        )
    });
    let charge_uuid = field(&charge.body, "uuid");
    let charge_invoice = b.invoice_of(&charge_uuid);
    let renewal_invoice = b.text("SELECT CAST(invoice_number AS TEXT) FROM invoices WHERE origin = 'renewal'").concat();
    assert!(!renewal_invoice.is_empty(), "the renewal was invoiced");
    let renewal_tx = b
        .text(&format!(
            "SELECT t.uuid FROM transactions t JOIN invoices i ON i.id = t.invoice_id \
             WHERE i.invoice_number = {renewal_invoice}"
        ))
        .concat();
    b.check_eq(b.transaction_status(&charge_uuid), "processing", "the one-off charge past the time-out");
    b.check_eq(b.transaction_status(&renewal_tx), "processing", "the renewal's charge past the time-out");
    b.check(signup.status == 201 && field(&signup.body, "state") == "active", || {
        format!(
            "a signup past the time-out answers 201 with the subscription active, not:\n{}\n{}",
            signup.head, signup.body
        )
    });
    b.check(purchase.status == 201 && !purchase.body.contains("<transaction_error>"), || {
        format!("a purchase past the time-out answers 201, not:\n{}\n{}", purchase.head, purchase.body)
    });
    b.check(collect.status == 200 && field(&collect.body, "state") == "past_due", || {
        format!(
            "a collect past the time-out answers the invoice as it is (past due), not:\n{}\n{}",
            collect.head, collect.body
        )
    });
    for code in ["signer", "shopper"] {
        b.check_eq(b.summary(code), "pending | purchase:processing", &format!("{code} past the time-out"));
    }
    b.check_eq(
        b.summary("collector"),
        "past_due | purchase:declined purchase:processing",
        "collector past the time-out",
    );
    b.check_eq(
        b.int("SELECT COUNT(*) FROM transactions WHERE status = 'declined'"),
        1,
        "declined transactions (the collected invoice's first)",
    );
    for number in [&charge_invoice, &renewal_invoice] {
        b.check_eq(b.invoice_state(number), "pending", &format!("invoice {number} waiting for its outcome"));
    }
    // No new attempt on an invoice while one is pending: a second collect answers the invoice as
    // it is, and charges nothing.
    let again = b.send("PUT", &format!("/v2/invoices/{collected}/collect"), "");
    b.check(again.status == 200 && field(&again.body, "state") == "past_due", || {
        format!(
            "a collect while a charge of the invoice is pending answers it as it is:\n{}\n{}",
            again.head, again.body
        )
    });
    b.check_eq(b.summary("collector"), "past_due | purchase:declined purchase:processing", "collector collected again");
    let renewal_uuid = b.text(&format!("SELECT uuid FROM invoices WHERE invoice_number = {renewal_invoice}")).concat();
    let dunning =
        format!("SELECT COUNT(*) FROM jobs WHERE kind = 'dunning' AND subject = '{renewal_uuid}' AND done_at IS NULL");
    b.check_eq(b.int(&dunning), 0, "dunning jobs of the renewal while its outcome is not known");
    let sub = b.get(&format!("/v2/subscriptions/{subscription}"));
    b.check_eq(field(&sub.body, "state"), "active", "the renewed subscription");
    // 4: the refund stays processing, nothing kept as credit.
    b.check(refund.status == 201 && field(&refund.body, "state") == "processing", || {
        format!(
            "a refund past the time-out answers 201 with the refund invoice `processing`, not:\n{}\n{}",
            refund.head, refund.body
        )
    });
    let refund_invoice = refund_invoice_of(&b, &refunded_invoice);
    b.check_eq(b.invoice_state(&refund_invoice), "processing", "the refund invoice past the time-out");
    b.check(!has_credit(&b, "refunded"), || "a refund whose outcome is not known is kept as credit");
    // The peer acted, only its answer was lost to the time-out: found by the look-up at once.
    b.check(late.status == 201 && field(&late.body, "status") == "success", || {
        format!("a charge whose answer came too late is found by the look-up:\n{}\n{}", late.head, late.body)
    });
    b.check(late_refund.status == 201 && field(&late_refund.body, "state") == "paid", || {
        format!(
            "a refund whose answer came too late is found by the look-up:\n{}\n{}",
            late_refund.head, late_refund.body
        )
    });

    // 2: the settle jobs and the refund's recovery job come due while the first calls are still
    // held: sent again under the same keys, they are refused 409 and the outcome stays pending.
    let conflicts = (create_conflicts(&b.proxy), b.proxy.conflicts("POST", REFUNDS));
    b.advance("31 seconds");
    assert_eq!(
        (creates(&b.proxy), refunds_made(&b.proxy)),
        (created + 1, made_refunds + 1),
        "the holds ended before the settle jobs ran (the machine was too slow for {PAST_TIMEOUT:?})"
    );
    b.check(create_conflicts(&b.proxy) > conflicts.0, || "the settle job's create met the first one in flight (409)");
    b.check(
        b.proxy.conflicts("POST", REFUNDS) > conflicts.1,
        || "the recovery job's refund met the first one in flight (409)",
    );
    b.check_eq(b.transaction_status(&charge_uuid), "processing", "the one-off charge after a 409");
    b.check_eq(b.transaction_status(&renewal_tx), "processing", "the renewal's charge after a 409");
    b.check_eq(b.invoice_state(&refund_invoice), "processing", "the refund invoice after a 409");
    b.check_eq(b.int("SELECT COUNT(*) FROM transactions WHERE status = 'declined'"), 1, "declined transactions");

    // The held calls land at the peer; then the jobs find them.
    await_that("the held calls to land at the peer", || {
        creates(&b.proxy) == created + 6 && refunds_made(&b.proxy) == made_refunds + 2
    });
    b.settle_everything();
    b.check_eq(b.transaction_status(&charge_uuid), "success", "the one-off charge once settled");
    b.check_eq(b.transaction_status(&renewal_tx), "success", "the renewal's charge once settled");
    for number in [&charge_invoice, &renewal_invoice, &refund_invoice] {
        b.check_eq(b.invoice_state(number), "paid", &format!("invoice {number} once settled"));
    }
    for code in ["refunded", "late_refund"] {
        b.check_eq(b.summary(code), "paid paid | purchase:success refund:success", code);
        b.check(!has_credit(&b, code), || format!("{code}: the refund went to credit, not to the card"));
    }
    b.check_eq(b.summary("late"), "paid | purchase:success", "late");
    for code in ["signer", "shopper"] {
        b.check_eq(b.summary(code), "paid | purchase:success", &format!("{code} once settled"));
    }
    b.check_eq(b.summary("collector"), "paid | purchase:declined purchase:success", "collector once settled");
    let sub = b.get(&format!("/v2/subscriptions/{subscription}"));
    b.check_eq(field(&sub.body, "state"), "active", "the renewed subscription once settled");

    // No dunning retry charges again: ten days on, each invoice still has its one purchase and
    // the peer made no other intent or refund.
    b.advance("10 days");
    for number in [&charge_invoice, &renewal_invoice] {
        let purchases = b.int(&format!(
            "SELECT COUNT(*) FROM transactions t JOIN invoices i ON i.id = t.invoice_id \
             WHERE i.invoice_number = {number} AND t.action = 'purchase'"
        ));
        b.check_eq(purchases, 1, &format!("purchases of invoice {number} ten days on"));
    }
    b.check_eq(
        (creates(&b.proxy), refunds_made(&b.proxy)),
        (created + 6, made_refunds + 2),
        "PaymentIntents and Refunds made at the peer",
    );
    assert_ledger_matches(&b);
    b.finish();
}

#[test]
fn charges_and_refunds_held_past_the_timeout_stay_processing_and_settle_once() {
    on_both_backends_at_once("sf_slow", held_past_the_timeout);
}

// ---------------------------------------------------------------------------------------------
// 3: saved 500s.

/// A 500 saved for the key after the peer charged or refunded (found by the look-up); and one
/// saved before anything reached the peer (pending, then declined once the key may be
/// forgotten).
fn saved_failures(db: &str) {
    let b = Bench::new(db, 1);
    b.plan("gold", 1000);
    for code in ["single", "signup", "failing"] {
        b.customer(code, GOOD);
    }

    // A one-off charge: the peer charged, the proxy answers (and saves) a 500.
    let created = creates(&b.proxy);
    b.proxy.fail_after("POST", INTENTS, 1);
    let r = b.one_off("single", 700);
    b.check(r.status == 201 && field(&r.body, "status") == "success", || {
        format!("a charge whose 500 was saved after the peer charged is found by the look-up:\n{}\n{}", r.head, r.body)
    });
    let single = b.invoice_of(&field(&r.body, "uuid"));
    b.check_eq(creates(&b.proxy), created + 1, "PaymentIntents made for the one-off charge");

    // A signup the same.
    b.proxy.fail_after("POST", INTENTS, 1);
    let r = b.send("POST", "/v2/subscriptions", &subscription_body("signup", "gold"));
    b.check(r.status == 201 && field(&r.body, "state") == "active", || format!("the signup:\n{}\n{}", r.head, r.body));
    b.check_eq(creates(&b.proxy), created + 2, "PaymentIntents made for the one-off charge and the signup");
    b.check_eq(b.summary("signup"), "paid | purchase:success", "the signed-up account");

    // A refund the same.
    let refunds = refunds_made(&b.proxy);
    b.proxy.fail_after("POST", REFUNDS, 1);
    let r = b.send("POST", &format!("/v2/invoices/{single}/refund"), &refund_body(Some(300)));
    b.check(r.status == 201 && field(&r.body, "state") == "paid", || {
        format!("a refund whose 500 was saved after the peer refunded is found by the look-up:\n{}\n{}", r.head, r.body)
    });
    b.check_eq(refunds_made(&b.proxy), refunds + 1, "Refunds made at the peer");
    b.check_eq(b.summary("single"), "paid paid | purchase:success refund:success", "the refunded account");

    // A 500 saved before the peer was reached: nothing was charged, and the key replays the 500.
    // Not known at first (never a decline); declined once the key may be forgotten.
    b.proxy.fail_before("POST", INTENTS, 1);
    let r = b.one_off("failing", 900);
    b.check(r.status == 201 && field(&r.body, "status") == "processing", || {
        format!("a charge answered only by a saved 500 is pending (201 `processing`), not:\n{}\n{}", r.head, r.body)
    });
    let failing = field(&r.body, "uuid");
    let failing_invoice = b.invoice_of(&failing);
    b.check_eq(b.transaction_status(&failing), "processing", "the charge answered by a saved 500");
    b.check(b.proxy.replayed("POST", INTENTS) > 0, || "the retry under the same key got the saved 500");
    b.advance("1 hour");
    b.check_eq(b.transaction_status(&failing), "processing", "the charge answered by a saved 500, an hour on");

    // The renewal of the signup a month on: a saved 500 again, found by the look-up.
    b.proxy.fail_after("POST", INTENTS, 1);
    b.advance("1month");
    let renewal = b.text("SELECT CAST(invoice_number AS TEXT) FROM invoices WHERE origin = 'renewal'").concat();
    b.check_eq(b.invoice_state(&renewal), "paid", "the renewal found by its look-up");
    b.check_eq(b.summary("signup"), "paid paid | purchase:success purchase:success", "the renewed account");
    // A day of real time on, the key of the 500 saved before the peer may be forgotten and
    // nothing was made under it: declined, its invoice failed.
    b.pass_real_time(25 * 3600);
    b.check_eq(b.transaction_status(&failing), "declined", "the charge answered by a saved 500, a day on");
    b.check_eq(b.invoice_state(&failing_invoice), "failed", "its invoice");
    b.check_eq(creates(&b.proxy), created + 3, "PaymentIntents made (none twice, none for the 500 saved before)");
    assert_ledger_matches(&b);
    b.finish();
}

#[test]
fn a_saved_500_is_found_by_the_look_up_and_charges_once() {
    on_both_backends_at_once("sf_500", saved_failures);
}

// ---------------------------------------------------------------------------------------------
// 5: kill -9 inside every money operation.

/// Where the proxy holds the calls the kill lands in.
#[derive(Clone, Copy, Debug)]
enum Hold {
    /// The request is held before it reaches the peer (it lands after the kill).
    Before,
    /// The peer acted at once; its answer is held (and never reaches the killed service).
    After,
}

/// The six money operations of one round, each on an account of its own, ready to be sent:
/// (account, method, path, body) of a one-off charge, a signup, a purchase, a collect, a refund
/// and a void.
fn prepare_operations(b: &Bench, round: usize) -> Vec<(String, &'static str, String, String)> {
    let code = |what: &str| format!("{what}{round}");
    for what in ["charge", "signup", "buyer"] {
        b.customer(&code(what), GOOD);
    }
    let collected = b.past_due_invoice(&code("collect"), 900);
    b.customer(&code("refund"), GOOD);
    let (_, refunded) = b.paid_one_off(&code("refund"), 1500);
    b.customer(&code("void"), GOOD);
    let (voided, _) = b.paid_one_off(&code("void"), 800);
    vec![
        (code("charge"), "POST", "/v2/transactions".to_owned(), one_off_body(&code("charge"), 700)),
        (code("signup"), "POST", "/v2/subscriptions".to_owned(), subscription_body(&code("signup"), "gold")),
        (code("buyer"), "POST", "/v2/purchases".to_owned(), purchase_body(&code("buyer"), 1200)),
        (code("collect"), "PUT", format!("/v2/invoices/{collected}/collect"), String::new()),
        (code("refund"), "POST", format!("/v2/invoices/{refunded}/refund"), refund_body(None)),
        (code("void"), "DELETE", format!("/v2/transactions/{voided}"), String::new()),
    ]
}

/// What each account of a round shows once its operation is finished.
fn finished_operations(round: usize) -> Vec<(String, &'static str)> {
    [
        ("charge", "paid | purchase:success"),
        ("signup", "paid | purchase:success"),
        ("buyer", "paid | purchase:success"),
        ("collect", "paid | purchase:declined purchase:success"),
        ("refund", "paid paid | purchase:success refund:success"),
        ("void", "paid paid | purchase:void"),
    ]
    .into_iter()
    .map(|(what, summary)| (format!("{what}{round}"), summary))
    .collect()
}

/// One round: the six operations sent at once, their gateway calls held, the service killed
/// while they are, restarted, and the jobs run.
fn kill_round(b: &mut Bench, round: usize, hold: Hold) {
    let operations = prepare_operations(b, round);
    let (created, refunds) = (creates(&b.proxy), refunds_made(&b.proxy));
    let (received, refunds_received) = (creates_received(&b.proxy), b.proxy.received("POST", REFUNDS));
    match hold {
        Hold::Before => {
            b.proxy.hold_before("POST", INTENTS, HOLD_FOR_KILL, 4);
            b.proxy.hold_before("POST", REFUNDS, HOLD_FOR_KILL, 2);
        }
        Hold::After => {
            b.proxy.hold_after("POST", INTENTS, HOLD_FOR_KILL, 4);
            b.proxy.hold_after("POST", REFUNDS, HOLD_FOR_KILL, 2);
        }
    }
    let (addr, key) = (b.s().addr.clone(), b.key.clone());
    let clients: Vec<_> = operations
        .iter()
        .map(|(_, method, path, body)| {
            let (addr, key, method, path, body) = (addr.clone(), key.clone(), *method, path.clone(), body.clone());
            std::thread::spawn(move || try_send(&addr, &key, method, &path, &body))
        })
        .collect();
    match hold {
        Hold::Before => {
            await_that("every gateway call to be held before the peer", || {
                creates_received(&b.proxy) == received + 4 && b.proxy.received("POST", REFUNDS) == refunds_received + 2
            });
            assert_eq!((creates(&b.proxy), refunds_made(&b.proxy)), (created, refunds), "a call was not held");
        }
        Hold::After => {
            await_that("the peer to act on every gateway call", || {
                creates(&b.proxy) == created + 4 && refunds_made(&b.proxy) == refunds + 2
            });
        }
    }
    b.kill_all();
    for client in clients {
        let reply = client.join().expect("a client");
        assert!(reply.is_none(), "an operation was answered although its call was held: {reply:?}");
    }
    for (code, _, path, _) in &operations {
        assert!(b.under_way(code), "{hold:?}: the kill landed inside {path} of {code}: {}", b.summary(code));
    }

    b.start_one();
    if let Hold::Before = hold {
        // The held requests go on to the peer although their client died.
        await_that("the held calls to land at the peer", || {
            creates(&b.proxy) == created + 4 && refunds_made(&b.proxy) == refunds + 2
        });
    }
    // Past the sweep's STALE_SECONDS (payments) and the refunds' RECOVERY_SECONDS.
    b.pass_real_time(11 * 60);
    b.settle_everything();
    for (code, summary) in finished_operations(round) {
        b.check_eq(b.summary(&code), summary, &format!("{hold:?}: {code} after the restart"));
    }
    let signup = b.get(&format!("/v2/accounts/signup{round}/subscriptions"));
    b.check_eq(field(&signup.body, "state"), "active", &format!("{hold:?}: the subscription signed up"));
    b.check_eq(
        (creates(&b.proxy), refunds_made(&b.proxy)),
        (created + 4, refunds + 2),
        &format!("{hold:?}: PaymentIntents and Refunds made at the peer"),
    );
    assert_ledger_matches(b);
}

fn killed_mid_operation(db: &str) {
    let mut b = Bench::new(db, 1);
    b.plan("gold", 1000);
    kill_round(&mut b, 1, Hold::Before);
    kill_round(&mut b, 2, Hold::After);
    b.finish();
}

#[test]
fn kill_9_inside_every_money_operation_loses_and_repeats_nothing() {
    on_both_backends_at_once("sf_kill", killed_mid_operation);
}

// ---------------------------------------------------------------------------------------------
// 6: two processes on one PostgreSQL database.

/// Sends `requests` (server, method, path, body) all at once, each on a thread of its own:
/// the replies in order.
fn at_once(b: &Bench, requests: Vec<(usize, &str, String, String)>) -> Vec<Reply> {
    std::thread::scope(|scope| {
        let runs: Vec<_> = requests
            .iter()
            .map(|(server, method, path, body)| scope.spawn(move || b.send_to(*server, method, path, body)))
            .collect();
        runs.into_iter().map(|r| r.join().expect("a request")).collect()
    })
}

fn two_processes(db: &str) {
    let mut b = Bench::new(db, 1);
    b.start_one();
    for i in 0..6 {
        b.customer(&format!("m{i}"), GOOD);
    }
    let refunded: Vec<String> = (0..3)
        .map(|i| {
            b.customer(&format!("r{i}"), GOOD);
            b.paid_one_off(&format!("r{i}"), 2000).1
        })
        .collect();
    let past_due: Vec<String> = (0..2).map(|i| b.past_due_invoice(&format!("p{i}"), 900)).collect();
    let (created, refunds) = (creates(&b.proxy), refunds_made(&b.proxy));

    // Six charges at once, through both processes; the first the proxy reads is held, answered
    // 500 (saved for its key) and its connection closed, after the peer charged.
    b.proxy.fail_after("POST", INTENTS, 1);
    b.proxy.drop_answers("POST", INTENTS, 1);
    b.proxy.hold_after("POST", INTENTS, Duration::from_secs(3), 1);
    let charges =
        (0..6).map(|i| (i, "POST", "/v2/transactions".to_owned(), one_off_body(&format!("m{i}"), 500 + i as i64)));
    for r in at_once(&b, charges.collect()) {
        b.check(r.status == 201 && ["success", "processing"].contains(&field(&r.body, "status").as_str()), || {
            format!(
                "a charge meeting a fault answers 201 `success` or `processing`, never a decline:\n{}\n{}",
                r.head, r.body
            )
        });
    }

    // Two refunds of each paid invoice at once, one through each process: 800 and 800 (both
    // fit), 1500 and 1500 (one fits), all and all (one gives everything back); the first the
    // proxy reads is answered 500 (saved) and its connection closed, after the peer refunded.
    b.proxy.fail_after("POST", REFUNDS, 1);
    b.proxy.drop_answers("POST", REFUNDS, 1);
    let asks = [Some(800), Some(1500), None];
    let requests = refunded
        .iter()
        .zip(asks)
        .flat_map(|(number, ask)| {
            [0, 1].map(|server| (server, "POST", format!("/v2/invoices/{number}/refund"), refund_body(ask)))
        })
        .collect();
    for r in at_once(&b, requests) {
        b.check(r.status == 201 || r.status == 422, || {
            format!("a raced refund answers 201 or 422:\n{}\n{}", r.head, r.body)
        });
    }

    // Each past-due invoice collected through both processes at once, the peer's answers held a
    // little so that the two collects overlap.
    b.proxy.hold_after("POST", INTENTS, Duration::from_secs(2), 2);
    let requests = past_due
        .iter()
        .flat_map(|number| {
            [0, 1].map(|server| (server, "PUT", format!("/v2/invoices/{number}/collect"), String::new()))
        })
        .collect();
    for r in at_once(&b, requests) {
        b.check(r.status < 500, || format!("a raced collect:\n{}\n{}", r.head, r.body));
    }

    b.settle_everything();
    for i in 0..6 {
        b.check_eq(b.summary(&format!("m{i}")), "paid | purchase:success", &format!("account m{i}"));
    }
    for (i, number) in past_due.iter().enumerate() {
        b.check_eq(b.invoice_state(number), "paid", &format!("the invoice of p{i} collected twice at once"));
        b.check_eq(b.summary(&format!("p{i}")), "paid | purchase:declined purchase:success", &format!("p{i}"));
    }
    b.check_eq(creates(&b.proxy), created + 8, "PaymentIntents made: six charges and one per collected invoice");
    let refund_count = b.int("SELECT COUNT(*) FROM transactions WHERE action = 'refund' AND status = 'success'");
    b.check_eq(refunds_made(&b.proxy), refunds + refund_count as usize, "Refunds made at the peer, one per refund");
    assert_ledger_matches(&b);
    b.finish();
}

#[test]
fn two_processes_on_postgres_charge_and_refund_once_under_faults() {
    let database = postgres_database("sf_two");
    two_processes(database.url());
}
