//! Renewal benchmark (not a test): renewals per second with every subscription of a sandbox site
//! due at the same instant, on SQLite and on PostgreSQL.
//!
//! `renewal-bench [--subscriptions 100000] [--backend sqlite|postgres|both] [--keep]`, normally
//! through `cargo xtask renewal-bench`, which builds it in release mode first. For each backend:
//!
//! 1. A fresh database: an SQLite file in the temporary directory, or a new database on the
//!    PostgreSQL test server (`REBILL_TEST_POSTGRES`, by default `127.0.0.1:5432` with trust
//!    authentication), and a sandbox site.
//! 2. One subscription made through the API (`rebill_server::router`): a monthly plan and
//!    `POST /v2/subscriptions` creating the account inline through `rebill-client`, with a card
//!    token from `/js/v1/token` for a sandbox card that approves. Its account, billing info with the
//!    gateway's stored reference, purchase invoice and line item, transactions, charge and renewal
//!    job are exactly what the service writes.
//! 3. Those rows copied N − 1 times with set-based SQL in one database transaction (new account
//!    codes, identifiers and invoice numbers), so that every renewal falls due at the same
//!    instant. Seeding is timed but is not the figure.
//! 4. **The measurement**: `POST /sandbox/clock` moving the site's clock a minute past that
//!    instant, through the service's router. The endpoint runs every due job
//!    (`scheduler::run_due`) before it answers, exactly as `rebill serve` does.
//! 5. Checks of the outcome: N renewal invoices, all paid, N approved renewal transactions and no
//!    other, no line item billed twice, every subscription one period further on with its next
//!    renewal scheduled, no claim left and no failed job.
//!
//! With `--stripe-api-base URL` the site is put on the Stripe gateway at that URL (a local
//! `localstripe`, see `docs/benchmarks.md`) before the template subscription is made, so every
//! renewal is a PaymentIntent confirmed by that server: a row reported without a target.
//!
//! Prints a Markdown table with seconds and renewals per second for each backend.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Parser, ValueEnum};
use rebill_billing::lifecycle::{Subscription, SubscriptionState};
use rebill_client::models::{Account, BillingInfo, Plan as PlanDoc, Subscription as SubscriptionDoc};
use rebill_client::{Client, Money};
use rebill_server::{AppState, Clock, Config, SystemClock};
use rebill_store::testing::{drop_postgres_database, fresh_postgres_url, fresh_sqlite_url};
use rebill_store::{Mode, NewSite, Plan, Store};
use rebill_xml::{Features, WireContext};
use sqlx::{AnyConnection, Column, Connection, Row};
use tower::ServiceExt;

/// The account code of the subscription every other one is copied from.
const TEMPLATE_ACCOUNT: &str = "renewal-bench-template";
/// The plan's price (cents a month).
const PRICE: i64 = 1000;
/// The target with the sandbox gateway, on each backend (renewals a second, 100,000 due at once).
const TARGET: f64 = 10_000.0;
/// Rows of the sequence table written per statement while seeding.
const SEQ_CHUNK: u32 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Which {
    Sqlite,
    Postgres,
    Both,
}

#[derive(Debug, Parser)]
#[command(name = "renewal-bench", about = "Renewals per second with every subscription due at once")]
struct Args {
    /// Subscriptions due at the same instant.
    #[arg(long, short = 'n', default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    subscriptions: u32,
    /// Which database to measure.
    #[arg(long, value_enum, default_value_t = Which::Both)]
    backend: Which,
    /// Keep the databases (their URLs are printed) instead of deleting them.
    #[arg(long)]
    keep: bool,
    /// Charge through the Stripe gateway at this API root (e.g. a local `localstripe`).
    #[arg(long, value_name = "URL")]
    stripe_api_base: Option<String>,
    /// Configure one webhook endpoint (a local receiver answering 200) and run the webhook worker
    /// while the renewals run; report how fast their notifications are delivered.
    #[arg(long)]
    webhook: bool,
}

/// Builds the Stripe gateway of a site put on Stripe.
struct StripeBuilder;

impl rebill_app::platform::gateways::GatewayBuilder for StripeBuilder {
    fn build(
        &self,
        kind: &str,
        secret_key: &str,
        api_base: &str,
    ) -> Result<Arc<dyn rebill_billing::gateway::Gateway>, String> {
        if kind != "stripe" {
            return Err(format!("unknown gateway {kind}"));
        }
        let config = rebill_gateway_stripe::StripeConfig::new(secret_key, api_base);
        Ok(Arc::new(rebill_gateway_stripe::StripeGateway::new(config).map_err(|e| e.to_string())?))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        }
    }
}

/// What one run measured.
struct Figures {
    backend: Backend,
    subscriptions: u32,
    seed_seconds: f64,
    run_seconds: f64,
    jobs_run: i64,
    /// With `--webhook`: notifications delivered and the seconds from the renewals' start until
    /// the last was delivered.
    deliveries: Option<(i64, f64)>,
}

impl Figures {
    fn per_second(&self) -> f64 {
        f64::from(self.subscriptions) / self.run_seconds
    }
}

/// The service's router with a private key of the site.
struct Api {
    app: axum::Router,
    key: String,
}

impl Api {
    async fn send(&self, method: &str, path: &str, content_type: &str, body: String) -> anyhow::Result<(u16, String)> {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("Authorization", basic(&self.key))
            .header("Accept", "application/xml")
            .header("X-Api-Version", "2.11")
            .header("Content-Type", content_type)
            .body(Body::from(body))?;
        // On a worker thread of the runtime, as `rebill serve` runs every request.
        let response = tokio::spawn(self.app.clone().oneshot(request)).await??;
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
        Ok((status.as_u16(), String::from_utf8_lossy(&bytes).into_owned()))
    }

    async fn xml(&self, path: &str, body: String, expect: StatusCode) -> anyhow::Result<String> {
        let (status, reply) = self.send("POST", path, "application/xml; charset=utf-8", body).await?;
        if status != expect.as_u16() {
            bail!("POST {path}: {status}\n{reply}");
        }
        Ok(reply)
    }
}

fn basic(key: &str) -> String {
    format!("Basic {}", rebill_load_bench::http::basic(key))
}

/// Makes the template subscription through the API: the plan and the subscription with the Rust
/// client (over a local listener serving the same router), the card token as the browser library
/// asks for it.
async fn template_subscription(api: &Api, public_key: &str) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let client = Client::builder().base_url(format!("http://{}", listener.local_addr()?)).api_key(&api.key).build()?;
    let server = tokio::spawn(axum::serve(listener, api.app.clone()).into_future());
    let plan = PlanDoc {
        plan_code: Some("monthly".into()),
        name: Some("Monthly".into()),
        unit_amount_in_cents: Some(Money::single("USD", PRICE)),
        ..PlanDoc::default()
    };
    client.plans().create(&plan).await.context("creating the plan")?;
    let form = format!(
        "key={public_key}&number=4111111111111111&month=12&year=2031&cvv=123&first_name=Verena\
         &last_name=Example&address1=123+Main+St.&city=San+Francisco&state=CA&postal_code=94105&country=US"
    );
    let (status, reply) = api.send("POST", "/js/v1/token", "application/x-www-form-urlencoded", form).await?;
    ensure!(status == 200, "POST /js/v1/token: {status}\n{reply}");
    let token: serde_json::Value = serde_json::from_str(&reply).context("the token reply")?;
    let token = token["id"].as_str().context("a token id")?;
    let account = Account {
        account_code: Some(TEMPLATE_ACCOUNT.into()),
        email: Some(format!("{TEMPLATE_ACCOUNT}@example.com")),
        first_name: Some("Verena".into()),
        last_name: Some("Example".into()),
        billing_info: Some(Box::new(BillingInfo { token_id: Some(token.into()), ..BillingInfo::default() })),
        ..Account::default()
    };
    let subscription = SubscriptionDoc {
        plan_code: Some("monthly".into()),
        currency: Some("USD".into()),
        account: Some(Box::new(account)),
        ..SubscriptionDoc::default()
    };
    client.subscriptions().create(&subscription).await.context("creating the subscription")?;
    server.abort();
    Ok(())
}

/// Runs of exactly 32 lowercase hexadecimal digits in `text` (uuids, tokens).
fn identifiers(text: &str, into: &mut BTreeSet<String>) {
    let bytes = text.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
        let len = bytes[start..].iter().take_while(|b| hex(b)).count();
        if len == 32 {
            into.insert(text[start..start + len].to_owned());
        }
        start += len.max(1);
    }
}

/// An SQL string literal of text made by this program (identifiers, codes).
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The copy `q` of a template identifier: its first 20 digits and the copy's 12-digit suffix.
fn copied(identifier: &str) -> String {
    format!("({} || q.sfx)", literal(&identifier[..20]))
}

/// Copies the template subscription's rows `copies` times, in one database transaction.
async fn copy_template(db: &mut AnyConnection, site_id: i64, copies: u32) -> anyhow::Result<()> {
    let template = sqlx::query(
        "SELECT s.id, s.uuid, s.account_id FROM subscriptions s JOIN accounts a ON a.id = s.account_id \
         WHERE a.account_code = $1",
    )
    .bind(TEMPLATE_ACCOUNT)
    .fetch_one(&mut *db)
    .await?;
    let (sub_id, sub_uuid, account_id): (i64, String, i64) =
        (template.try_get("id")?, template.try_get("uuid")?, template.try_get("account_id")?);
    let first_number: i64 = sqlx::query("SELECT invoice_number FROM invoices WHERE account_id = $1")
        .bind(account_id)
        .fetch_all(&mut *db)
        .await?
        .iter()
        .map(|r| r.try_get("invoice_number"))
        .collect::<Result<Vec<i64>, _>>()?
        .into_iter()
        .try_fold(None, |one: Option<i64>, n| match one {
            None => Ok(Some(n)),
            Some(_) => Err(anyhow::anyhow!("the template has more than one invoice")),
        })?
        .context("the template has no invoice")?;

    let mut tx = db.begin().await?;
    sqlx::query(
        "CREATE TEMPORARY TABLE bench_seq (n BIGINT PRIMARY KEY, code TEXT NOT NULL, sfx TEXT NOT NULL, \
         number BIGINT NOT NULL)",
    )
    .execute(&mut *tx)
    .await?;
    let mut n = 1;
    while n <= copies {
        let last = copies.min(n + SEQ_CHUNK - 1);
        let values: Vec<String> =
            (n..=last).map(|i| format!("({i}, 'rb-{i:07}', '{i:012x}', {})", first_number + i64::from(i))).collect();
        sqlx::query(&format!("INSERT INTO bench_seq (n, code, sfx, number) VALUES {}", values.join(", ")))
            .execute(&mut *tx)
            .await?;
        n = last + 1;
    }

    let tables = [
        ("accounts", format!("id = {account_id}")),
        ("billing_infos", format!("account_id = {account_id}")),
        ("subscriptions", format!("id = {sub_id}")),
        ("subscription_charges", format!("subscription_id = {sub_id}")),
        ("domain_events", format!("site_id = {site_id}")),
        ("invoices", format!("account_id = {account_id}")),
        ("adjustments", format!("account_id = {account_id}")),
        ("transactions", format!("account_id = {account_id}")),
        ("jobs", format!("subject = {} AND done_at IS NULL", literal(&sub_uuid))),
    ];
    let mut rows = Vec::new();
    let mut ids = BTreeSet::new();
    for (table, condition) in &tables {
        for row in sqlx::query(&format!("SELECT * FROM {table} WHERE {condition}")).fetch_all(&mut *tx).await? {
            for i in 0..row.columns().len() {
                if let Ok(Some(text)) = row.try_get::<Option<String>, _>(i) {
                    identifiers(&text, &mut ids);
                }
            }
            rows.push((*table, row));
        }
    }
    for (table, row) in rows {
        let id: i64 = row.try_get("id")?;
        let mut columns = Vec::new();
        let mut values = Vec::new();
        for (i, column) in row.columns().iter().enumerate() {
            let name = column.name();
            let value = match name {
                "id" => continue,
                "account_id" => {
                    "(SELECT a.id FROM accounts a WHERE a.site_id = t.site_id AND a.account_code = q.code)".to_owned()
                }
                "subscription_id" => {
                    format!("(SELECT s.id FROM subscriptions s WHERE s.uuid = {})", copied(&sub_uuid))
                }
                "invoice_id" => "CASE WHEN t.invoice_id IS NULL THEN NULL ELSE \
                     (SELECT i.id FROM invoices i WHERE i.site_id = t.site_id AND i.invoice_number = q.number) END"
                    .to_owned(),
                "invoice_number" => "q.number".to_owned(),
                "last_invoice" | "invoice_ref" => {
                    format!("CASE WHEN t.{name} IS NULL THEN NULL ELSE CAST(q.number AS TEXT) END")
                }
                // An invoice's events name it by its number.
                "subject" if table == "domain_events" && row.try_get::<String, _>("kind")?.starts_with("invoice.") => {
                    "CAST(q.number AS TEXT)".to_owned()
                }
                _ => match row.try_get::<Option<String>, _>(i) {
                    Ok(Some(text)) => {
                        let mut expr = format!("t.{name}");
                        for identifier in ids.iter().filter(|id| text.contains(id.as_str())) {
                            expr = format!("replace({expr}, {}, {})", literal(identifier), copied(identifier));
                        }
                        if text.contains(TEMPLATE_ACCOUNT) {
                            expr = format!("replace({expr}, {}, q.code)", literal(TEMPLATE_ACCOUNT));
                        }
                        // A transaction's event names its invoice.
                        let invoice = format!("\"invoice_number\":{first_number}");
                        if table == "domain_events" && text.contains(&invoice) {
                            expr = format!(
                                "replace({expr}, {}, {} || CAST(q.number AS TEXT))",
                                literal(&invoice),
                                literal("\"invoice_number\":")
                            );
                        }
                        expr
                    }
                    _ => format!("t.{name}"),
                },
            };
            columns.push(name.to_owned());
            values.push(value);
        }
        sqlx::query(&format!(
            "INSERT INTO {table} ({}) SELECT {} FROM {table} t CROSS JOIN bench_seq q WHERE t.id = {id}",
            columns.join(", "),
            values.join(", ")
        ))
        .execute(&mut *tx)
        .await
        .with_context(|| format!("copying {table}"))?;
    }
    sqlx::query(
        "UPDATE invoice_counters SET last_number = \
         (SELECT MAX(invoice_number) FROM invoices i WHERE i.site_id = invoice_counters.site_id) WHERE site_id = $1",
    )
    .bind(site_id)
    .execute(&mut *tx)
    .await?;
    sqlx::query("DROP TABLE bench_seq").execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

async fn count(db: &mut AnyConnection, sql: &str, site_id: i64) -> anyhow::Result<i64> {
    let row = sqlx::query(sql).bind(site_id).fetch_one(&mut *db).await.with_context(|| sql.to_owned())?;
    Ok(row.try_get(0)?)
}

/// Checks that every subscription renewed exactly once, at `due`.
async fn verify(db: &mut AnyConnection, site_id: i64, n: i64, due: i64) -> anyhow::Result<()> {
    let checks: [(&str, String, i64); 11] = [
        ("renewal invoices", "SELECT COUNT(*) FROM invoices WHERE site_id = $1 AND origin = 'renewal'".into(), n),
        (
            "paid renewal invoices of distinct accounts",
            "SELECT COUNT(DISTINCT account_id) FROM invoices WHERE site_id = $1 AND origin = 'renewal' \
             AND state = 'paid' AND total = balance + paid AND paid = total"
                .into(),
            n,
        ),
        (
            "renewal invoice totals (cents)",
            "SELECT CAST(COALESCE(SUM(total), 0) AS BIGINT) FROM invoices WHERE site_id = $1 AND origin = 'renewal'".into(),
            n * PRICE,
        ),
        (
            "transactions of renewal invoices",
            "SELECT COUNT(*) FROM transactions t JOIN invoices i ON i.id = t.invoice_id \
             WHERE t.site_id = $1 AND i.origin = 'renewal'"
                .into(),
            n,
        ),
        (
            "approved recurring purchases of renewal invoices",
            "SELECT COUNT(DISTINCT t.invoice_id) FROM transactions t JOIN invoices i ON i.id = t.invoice_id \
             WHERE t.site_id = $1 AND i.origin = 'renewal' AND t.status = 'success' AND t.action = 'purchase' \
             AND t.recurring = 1"
                .into(),
            n,
        ),
        (
            "renewal line items starting at the due time",
            format!(
                "SELECT COUNT(DISTINCT a.subscription_uuid) FROM adjustments a JOIN invoices i ON i.id = a.invoice_id \
                 WHERE a.site_id = $1 AND i.origin = 'renewal' AND a.period_start = {due}"
            ),
            n,
        ),
        (
            "line items billed twice",
            "SELECT COUNT(*) FROM (SELECT subscription_uuid FROM adjustments WHERE site_id = $1 AND origin = 'plan' \
             GROUP BY subscription_uuid, period_start HAVING COUNT(*) > 1) d"
                .into(),
            0,
        ),
        (
            "charges (two a subscription), all billed",
            "SELECT COUNT(*) FROM subscription_charges c JOIN subscriptions s ON s.id = c.subscription_id \
             WHERE s.site_id = $1 AND c.billed_at IS NOT NULL AND c.invoice_ref IS NOT NULL"
                .into(),
            2 * n,
        ),
        (
            "renewal jobs done at the due time",
            format!(
                "SELECT COUNT(DISTINCT subject) FROM jobs WHERE site_id = $1 AND kind = 'renewal' AND due_at = {due} \
                 AND done_at IS NOT NULL AND last_error IS NULL"
            ),
            n,
        ),
        (
            "pending jobs, one renewal a subscription",
            "SELECT COUNT(DISTINCT subject) FROM jobs WHERE site_id = $1 AND kind = 'renewal' AND done_at IS NULL \
             AND attempts = 0"
                .into(),
            n,
        ),
        (
            "subscriptions still claimed or with a failed job",
            "SELECT (SELECT COUNT(*) FROM subscriptions WHERE site_id = $1 AND lock_token IS NOT NULL) + \
             (SELECT COUNT(*) FROM jobs WHERE site_id = $1 AND (last_error IS NOT NULL OR (done_at IS NULL AND kind <> 'renewal')))"
                .into(),
            0,
        ),
    ];
    for (what, sql, expected) in &checks {
        let got = count(db, sql, site_id).await?;
        ensure!(got == *expected, "{what}: {got}, expected {expected}");
    }
    let pending = count(db, "SELECT COUNT(*) FROM jobs WHERE site_id = $1 AND done_at IS NULL", site_id).await?;
    ensure!(pending == n, "pending jobs: {pending}, expected {n}");
    // Every subscription one period further on, active, not past due, its next renewal scheduled.
    let rows = sqlx::query(
        "SELECT s.uuid, s.value, s.version, j.due_at FROM subscriptions s \
         LEFT JOIN jobs j ON j.subject = s.uuid AND j.done_at IS NULL WHERE s.site_id = $1",
    )
    .bind(site_id)
    .fetch_all(&mut *db)
    .await?;
    ensure!(rows.len() as i64 == n, "subscriptions: {}, expected {n}", rows.len());
    for row in rows {
        let uuid: String = row.try_get("uuid")?;
        let value: String = row.try_get("value")?;
        let sub: Subscription = serde_json::from_str(&value).with_context(|| format!("subscription {uuid}"))?;
        let started = sub.current_period_started_at.map(|t| t.timestamp());
        let ends = sub.current_period_ends_at.map(|t| t.timestamp());
        let next: Option<i64> = row.try_get("due_at")?;
        ensure!(
            sub.uuid == uuid
                && sub.state == SubscriptionState::Active
                && !sub.past_due
                && started == Some(due)
                && ends.is_some_and(|e| e > due)
                && next == ends,
            "subscription {uuid} did not advance one period from {due}: started {started:?}, ends {ends:?}, \
             next job {next:?}, state {:?}, past due {}",
            sub.state,
            sub.past_due
        );
    }
    Ok(())
}

fn rfc3339(epoch: i64) -> anyhow::Result<String> {
    Ok(DateTime::<Utc>::from_timestamp(epoch, 0)
        .context("time out of range")?
        .to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// Seeds `n` subscriptions on `url`, measures their renewal and checks it.
async fn run(backend: Backend, url: &str, n: u32, stripe: Option<&str>, webhook: bool) -> anyhow::Result<Figures> {
    let store = Store::connect(url).await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let new = NewSite {
        name: "renewal-bench".into(),
        mode: Mode::Sandbox,
        plan: Plan::Core,
        credit_memos: false,
        contact: None,
    };
    let (site, key) = store.create_site(&new, clock.now()).await?;
    let state =
        AppState::new(store.clone(), clock.clone(), Config::default()).with_gateway_builder(Arc::new(StripeBuilder));
    if let Some(base) = stripe {
        rebill_app::platform::gateways::set(
            &state,
            &site,
            "stripe",
            "sk_test_renewalbench0000",
            Some(base),
            clock.now(),
        )
        .await
        .context("putting the site on Stripe")?;
    }
    let services: rebill_app::Services = state.services.clone();
    let api = Api { app: rebill_server::router(state), key };

    let seeding = Instant::now();
    template_subscription(&api, &site.public_key).await.context("the template subscription")?;
    // The benchmark's own connection (seeding and checks) goes through sqlx's `Any` driver,
    // whatever the store uses.
    sqlx::any::install_default_drivers();
    let mut db = AnyConnection::connect(url).await?;
    copy_template(&mut db, site.id, n - 1).await.context("copying the template subscription")?;
    // The seeding's events are not notified (with or without an endpoint, so that both runs
    // start from the same rows): only what the renewals send is measured.
    sqlx::query("UPDATE domain_events SET notified = 1 WHERE notified = 0").execute(&mut db).await?;
    match backend {
        // What autovacuum would have done by the time so many subscriptions come due, and the
        // seeding's writes flushed by a checkpoint rather than during the measurement.
        Backend::Postgres => {
            sqlx::query("VACUUM ANALYZE").execute(&mut db).await?;
            sqlx::query("CHECKPOINT").execute(&mut db).await?;
        }
        // Start from a checkpointed WAL, as a service that has run for a while does.
        Backend::Sqlite => sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut db).await.map(drop)?,
    }
    let due = sqlx::query(
        "SELECT MIN(due_at) AS first, MAX(due_at) AS last, COUNT(*) AS n FROM jobs \
         WHERE site_id = $1 AND kind = 'renewal' AND done_at IS NULL",
    )
    .bind(site.id)
    .fetch_one(&mut db)
    .await?;
    let (first, last, jobs): (i64, i64, i64) = (due.try_get("first")?, due.try_get("last")?, due.try_get("n")?);
    ensure!(first == last && jobs == i64::from(n), "{jobs} renewal jobs due from {first} to {last}");
    let seed_seconds = seeding.elapsed().as_secs_f64();
    eprintln!("{}: {n} subscriptions due at {} (seeded in {seed_seconds:.1} s)", backend.name(), rfc3339(first)?);

    // The webhook worker runs beside the renewals, as in `rebill serve`.
    let hooks = if webhook {
        let received = rebill_load_bench::receiver::Receiver::start()?;
        let request = rebill_app::operations::webhooks::EndpointRequest { url: &received.url, ..Default::default() };
        rebill_app::operations::webhooks::add_endpoint(&services, &site, &request, clock.now()).await?;
        let poster = Arc::new(rebill_server::webhook_poster::HttpPoster::new()?);
        let worker = tokio::spawn(rebill_app::operations::webhooks::run(
            services.clone(),
            poster,
            1.0,
            std::time::Duration::from_millis(200),
        ));
        Some((worker, received))
    } else {
        None
    };
    let body = format!("<clock><now>{}</now></clock>", rfc3339(first + 60)?);
    let started = Instant::now();
    let reply = api.xml("/sandbox/clock", body, StatusCode::OK).await?;
    let run_seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "{}: {n} renewals in {run_seconds:.2} s = {:.0} renewals/s; checking them",
        backend.name(),
        f64::from(n) / run_seconds
    );

    let ctx = WireContext::new(rebill_xml::version::LATEST_VERSION, Features::none(), "");
    let answer: rebill_models::Clock =
        rebill_xml::from_xml(reply.as_bytes(), &ctx, rebill_xml::Mode::Response).context("the clock's answer")?;
    let jobs_run = answer.jobs_run.unwrap_or_default();
    ensure!(jobs_run == i64::from(n), "the clock ran {jobs_run} jobs, expected {n}");
    let deliveries = match hooks {
        Some((worker, received)) => {
            // Every notification of the renewals delivered: then the delivery rate over the run.
            // The database is asked only whether events wait to be made into notifications (a
            // probe of a partial index) and, once none wait, how many deliveries there are; the
            // wait for them reads the receiver's counter, so the measurement adds no load to
            // the database it measures.
            loop {
                let unnotified: i64 = sqlx::query("SELECT COUNT(*) AS n FROM domain_events WHERE notified = 0")
                    .fetch_one(&mut db)
                    .await?
                    .try_get("n")?;
                if unnotified == 0 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            let expected: i64 =
                sqlx::query("SELECT COUNT(*) AS n FROM webhook_deliveries").fetch_one(&mut db).await?.try_get("n")?;
            received.wait_for(u64::try_from(expected)?).await?;
            let seconds = started.elapsed().as_secs_f64();
            worker.abort();
            eprintln!(
                "{}: {expected} notifications delivered {seconds:.2} s after the renewals started = {:.0}/s",
                backend.name(),
                expected as f64 / seconds
            );
            Some((expected, seconds))
        }
        None => None,
    };
    verify(&mut db, site.id, i64::from(n), first).await.context("checking the renewals")?;
    db.close().await?;
    Ok(Figures { backend, subscriptions: n, seed_seconds, run_seconds, jobs_run, deliveries })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut backends = Vec::new();
    if args.backend != Which::Postgres {
        backends.push(Backend::Sqlite);
    }
    if args.backend != Which::Sqlite {
        backends.push(Backend::Postgres);
    }
    let mut figures = Vec::new();
    for backend in backends {
        let url = match backend {
            Backend::Sqlite => fresh_sqlite_url("renewal_bench"),
            Backend::Postgres => fresh_postgres_url("renewal_bench").await,
        };
        let result = run(backend, &url, args.subscriptions, args.stripe_api_base.as_deref(), args.webhook).await;
        if args.keep {
            eprintln!("{}: kept {url}", backend.name());
        } else {
            match backend {
                Backend::Sqlite => {
                    let file = url.trim_start_matches("sqlite://");
                    if let Some(dir) = std::path::Path::new(file).parent() {
                        let _ = std::fs::remove_dir_all(dir);
                    }
                }
                Backend::Postgres => drop_postgres_database(&url).await,
            }
        }
        let f = result.with_context(|| format!("{} renewal benchmark", backend.name()))?;
        eprintln!("{}: {} jobs ran, every renewal checked", f.backend.name(), f.jobs_run);
        figures.push(f);
    }
    let gateway = match (args.stripe_api_base.is_some(), args.webhook) {
        (true, _) => "stripe (localstripe)",
        (false, true) => "sandbox, one webhook endpoint",
        (false, false) => "sandbox",
    };
    println!("\n| backend | gateway | subscriptions due at once | seeding s | renewal run s | renewals/s | target |");
    println!("|---|---|---:|---:|---:|---:|---|");
    for f in &figures {
        if let Some((delivered, seconds)) = f.deliveries {
            eprintln!(
                "{}: {delivered} webhook notifications delivered in {seconds:.2} s ({:.0}/s)",
                f.backend.name(),
                delivered as f64 / seconds
            );
        }
        let target = if args.stripe_api_base.is_some() || args.webhook {
            "— (reported)".to_owned()
        } else {
            let verdict = if f.per_second() >= TARGET { "met" } else { "not met" };
            format!("≥ {TARGET:.0}/s ({verdict})")
        };
        println!(
            "| {} | {gateway} | {} | {:.1} | {:.2} | {:.0} | {target} |",
            f.backend.name(),
            f.subscriptions,
            f.seed_seconds,
            f.run_seconds,
            f.per_second()
        );
    }
    Ok(())
}
