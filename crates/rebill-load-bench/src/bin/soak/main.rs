//! Soak: a real `rebill serve` under mixed traffic for a long time, watched for server errors
//! and for growth of its memory and open file descriptors.
//!
//! `soak [--minutes 10 | --seconds N] [--database URL] [--rate-limit 3000] [--rebill PATH] …`,
//! normally through `cargo xtask soak`, which builds the release binaries first.
//!
//! 1. A fresh database: an SQLite file in a new temporary directory, or with `--database
//!    postgres://…` a new database on that server (dropped at the end). `rebill serve` starts on
//!    it (its log, at `warn`, goes to `rebill.log` in the temporary directory); the sandbox site's
//!    rate limit is set to `--rate-limit` requests a minute (`rebill site update`), a webhook
//!    endpoint pointing at a receiver in this process is added (`rebill webhooks add`), and
//!    three plans renewing every 1, 2 and 7 days and 20 accounts are made through the API.
//! 2. Traffic: `--connections` workers, each with its own keep-alive connection, take tickets a
//!    pacer hands out at exactly the rate limit (a sliding five-minute window of the per-minute
//!    limit, so a run at the limit sits at it without going over). Of every 20 API requests:
//!    9 reads (one account, a page of 50 accounts, an account's subscriptions, its invoices),
//!    3 new accounts, 3 account updates, 3 new subscriptions (each with a card token from
//!    `/js/v1/token` made just before) and 2 refunds (taking turns: `PUT
//!    /v2/subscriptions/:uuid/terminate?refund=full|partial` and a part of a subscription's
//!    purchase invoice, `POST /v2/invoices/:n/refund`). Once `--subscriptions` (default 1,000)
//!    of the driver's subscriptions are live, a new-subscription slot terminates the oldest
//!    instead: the population, and with it the renewals and notifications per clock move, stays
//!    level, so that the run is a steady state (a growing load grows every working set).
//!    Meanwhile the sandbox clock moves on by `--clock-step` every `--clock-every` seconds
//!    (`POST /sandbox/clock`), so renewals keep falling due, and the webhook worker posts every
//!    notification to the receiver.
//! 3. `--warm-up` seconds of traffic (longer if needed, until the population is reached), a
//!    pause until every request has its answer, the first sample of the service's resident set
//!    (`VmRSS`) and open file descriptors
//!    (`/proc/PID/fd`); the measured run with a sample every few seconds; the same pause and the
//!    last sample. Then the webhook backlog is awaited, the database counted (renewals,
//!    subscriptions, deliveries, jobs with an error) and the service stopped with SIGTERM.
//!
//! The report (Markdown; with `--json FILE` also as JSON): requests, statuses and p50/p99
//! latency per kind and overall, the samples, renewals and deliveries. The run fails on any
//! 5xx (the documented "try again" answers are counted apart: the clock's 503
//! `clock_catching_up`, and 422 `simultaneous_request` for a refund of a subscription being
//! renewed at that moment), a request without an answer, 429s on more than half the requests,
//! a resident set or a descriptor count that moved by more than `--tolerance` percent between
//! the two samples, a kind of request that never succeeded, no renewal or no delivery.

mod traffic;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::Parser;
use rebill_load_bench::process::{Running, open_fds, rebill_cli_with, release_binary, rss, rss_parts, spawn};
use rebill_load_bench::receiver::Receiver;
use rebill_load_bench::stats::{latency, percentile};
use sqlx::{AnyConnection, Connection, Row};
use traffic::{Kind, KindStats, Pacer, Recorded, Sample, Traffic};

#[derive(Debug, Parser)]
#[command(name = "soak", about = "A real rebill serve under mixed traffic at the site's rate limit")]
struct Args {
    /// Minutes of measured traffic after the warm-up (default 10).
    #[arg(long, conflicts_with = "seconds")]
    minutes: Option<u64>,
    /// Seconds of measured traffic after the warm-up (instead of --minutes).
    #[arg(long)]
    seconds: Option<u64>,
    /// Seconds of traffic before the first sample, at least; the warm-up also lasts until
    /// `--subscriptions` are live.
    #[arg(long, default_value_t = 30)]
    warm_up: u64,
    /// The live subscriptions the traffic keeps: new ones are made up to this number, then each
    /// new-subscription slot terminates the oldest instead, so the renewals per clock move stay
    /// level and the run is a steady state rather than a growing load. 0: no cap (the
    /// population, and the load, grow through the run).
    #[arg(long, default_value_t = 1000)]
    subscriptions: u64,
    /// The database: an SQLite URL used as it is (a new file), or a PostgreSQL server URL
    /// (e.g. `postgres://postgres@127.0.0.1:5432/postgres`) on which a fresh database is made.
    /// Default: a new SQLite file in a temporary directory.
    #[arg(long)]
    database: Option<String>,
    /// The sandbox site's rate limit (requests a minute); the API traffic is paced at it.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(20..))]
    rate_limit: u64,
    /// Workers, each with its own keep-alive connection.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256))]
    connections: u64,
    /// How far each move of the sandbox clock goes (`2hours`, `1day`, …).
    #[arg(long, default_value = "2hours")]
    clock_step: String,
    /// Seconds between two moves of the sandbox clock.
    #[arg(long, default_value_t = 5.0)]
    clock_every: f64,
    /// The `rebill` binary (default: the release build beside this one).
    #[arg(long)]
    rebill: Option<PathBuf>,
    /// How far (percent) the resident set and the descriptor count may move between the first
    /// and the last sample.
    #[arg(long, default_value_t = 10.0)]
    tolerance: f64,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// One look at the service process.
#[derive(Debug, Clone, Copy)]
struct Look {
    /// Seconds since the traffic began.
    at: f64,
    rss: u64,
    /// The anonymous part of `rss` (the heap).
    anon: u64,
    /// The file-backed part of `rss`.
    file: u64,
    fds: usize,
}

fn look(pid: u32, traffic: &Traffic) -> anyhow::Result<Look> {
    let (anon, file) = rss_parts(pid)?;
    Ok(Look { at: traffic.elapsed(), rss: rss(pid)?, anon, file, fds: open_fds(pid)? })
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(soak(args))
}

fn unique() -> String {
    let millis =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or_default();
    format!("{}_{millis}", std::process::id())
}

/// The database of the run and, when this run made it on a PostgreSQL server, that server's
/// URL and the database's name (to drop it at the end).
async fn fresh_database(wanted: Option<&str>, work: &Path) -> anyhow::Result<(String, Option<(String, String)>)> {
    match wanted {
        None => Ok((format!("sqlite://{}", work.join("rebill.db").display()), None)),
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            sqlx::any::install_default_drivers();
            let mut admin = AnyConnection::connect(url).await.with_context(|| format!("connecting to {url}"))?;
            let name = format!("rebill_soak_{}", unique());
            sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut admin).await?;
            admin.close().await?;
            // The server's URL with the new database's name, keeping its connection options
            // (`?statement-cache-capacity=…`, `?sslmode=…`).
            let (server, options) = url.split_once('?').map_or((url, None), |(s, o)| (s, Some(o)));
            let base = server.rsplit_once('/').map(|(base, _)| base).unwrap_or(server);
            let fresh = match options {
                Some(options) => format!("{base}/{name}?{options}"),
                None => format!("{base}/{name}"),
            };
            Ok((fresh, Some((url.to_owned(), name))))
        }
        Some(url) => Ok((url.to_owned(), None)),
    }
}

async fn drop_database(admin_url: &str, name: &str) -> anyhow::Result<()> {
    let mut admin = AnyConnection::connect(admin_url).await?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&mut admin).await?;
    admin.close().await?;
    Ok(())
}

async fn soak(args: Args) -> anyhow::Result<()> {
    let work = std::env::temp_dir().join(format!("rebill-soak-{}", unique()));
    std::fs::create_dir_all(&work)?;
    let (database, made) = fresh_database(args.database.as_deref(), &work).await?;
    let outcome = run(&args, &work, &database).await;
    if let Some((admin, name)) = made
        && let Err(e) = drop_database(&admin, &name).await
    {
        eprintln!("could not drop the database {name}: {e:#}");
    }
    match &outcome {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&work);
        }
        Err(_) => eprintln!("the service's log and the database (if SQLite) are kept in {}", work.display()),
    }
    outcome
}

/// Database figures at the end.
#[derive(Debug, Default)]
struct Counted {
    renewals: i64,
    subscriptions: BTreeMap<String, i64>,
    deliveries: BTreeMap<String, i64>,
    jobs_with_errors: i64,
    invoices: i64,
}

async fn count_one(db: &mut AnyConnection, sql: &str) -> anyhow::Result<i64> {
    let row = sqlx::query(sql).fetch_one(&mut *db).await.with_context(|| sql.to_owned())?;
    Ok(row.try_get(0)?)
}

async fn count_by(db: &mut AnyConnection, table: &str) -> anyhow::Result<BTreeMap<String, i64>> {
    let sql = format!("SELECT state, CAST(COUNT(*) AS BIGINT) FROM {table} GROUP BY state");
    let mut by = BTreeMap::new();
    for row in sqlx::query(&sql).fetch_all(&mut *db).await.with_context(|| sql.clone())? {
        by.insert(row.try_get::<String, _>(0)?, row.try_get::<i64, _>(1)?);
    }
    Ok(by)
}

const RENEWALS: &str = "SELECT CAST(COUNT(*) AS BIGINT) FROM invoices WHERE origin = 'renewal'";
const BACKLOG: &str = "SELECT CAST(COUNT(*) AS BIGINT) FROM webhook_deliveries WHERE state IN ('pending', 'retrying')";
const UNNOTIFIED: &str = "SELECT CAST(COUNT(*) AS BIGINT) FROM domain_events WHERE notified = 0";

async fn count(db: &mut AnyConnection) -> anyhow::Result<Counted> {
    Ok(Counted {
        renewals: count_one(db, RENEWALS).await?,
        subscriptions: count_by(db, "subscriptions").await?,
        deliveries: count_by(db, "webhook_deliveries").await?,
        jobs_with_errors: count_one(db, "SELECT CAST(COUNT(*) AS BIGINT) FROM jobs WHERE last_error IS NOT NULL")
            .await?,
        invoices: count_one(db, "SELECT CAST(COUNT(*) AS BIGINT) FROM invoices").await?,
    })
}

/// Sends SIGTERM and waits (at most 60 s) for the service to exit; answers how it exited and
/// how long it took.
fn stop(server: &mut Running) -> anyhow::Result<(String, f64)> {
    let pid = server.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().context("running kill")?;
    ensure!(status.success(), "kill -TERM {pid} failed");
    let sent = Instant::now();
    while sent.elapsed() < Duration::from_secs(60) {
        if let Some(exit) = server.0.try_wait()? {
            return Ok((exit.to_string(), sent.elapsed().as_secs_f64()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(("still running 60 s after SIGTERM (killed)".into(), sent.elapsed().as_secs_f64()))
}

async fn run(args: &Args, work: &Path, database: &str) -> anyhow::Result<()> {
    let run_for = Duration::from_secs(match (args.minutes, args.seconds) {
        (_, Some(seconds)) => seconds,
        (Some(minutes), None) => minutes * 60,
        (None, None) => 600,
    });
    ensure!(args.clock_every > 0.0, "--clock-every must be more than 0");
    let rebill = args.rebill.clone().unwrap_or_else(|| release_binary("rebill"));
    if !rebill.is_file() {
        bail!(
            "{} is missing: build it with `cargo build --release -p rebill-cli` (or run `cargo xtask soak`)",
            rebill.display()
        );
    }
    let backend = if database.starts_with("sqlite") { "SQLite" } else { "PostgreSQL" };
    let vault = work.join("vault.key").display().to_string();
    let env = [("REBILL_VAULT_KEY_FILE", vault.as_str())];
    let log_path = work.join("rebill.log");
    let log = std::fs::File::create(&log_path)?;
    let mut command = Command::new(&rebill);
    command.env("REBILL_LOG", "warn").env("REBILL_VAULT_KEY_FILE", &vault).stderr(log).args([
        "--database",
        database,
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]);
    let (mut server, lines, addr) = spawn(&mut command).with_context(|| format!("starting {}", rebill.display()))?;
    let pid = server.id();
    let printed = |prefix: &str| lines.iter().find_map(|l| l.strip_prefix(prefix)).map(|k| k.trim().to_owned());
    let key = printed("private key:").context("a fresh database (the service prints the sandbox site's key)")?;
    let public_key = printed("public key:").context("the sandbox site's public key")?;
    let limit = args.rate_limit.to_string();
    rebill_cli_with(&rebill, database, &env, &["site", "update", "--name", "sandbox", "--rate-limit", &limit])
        .context("setting the site's rate limit")?;
    let receiver = Receiver::start()?;
    rebill_cli_with(&rebill, database, &env, &["webhooks", "add", "--site", "sandbox", "--url", &receiver.url])
        .context("adding the webhook endpoint")?;
    sqlx::any::install_default_drivers();
    let mut db = AnyConnection::connect(database).await.context("opening the database")?;

    let population = usize::try_from(args.subscriptions).ok().filter(|&n| n > 0);
    let traffic = Traffic::new(&addr, &key, &public_key, "soak", population);
    traffic.prepare(20).await.context("making the plans and the first accounts")?;
    println!(
        "soak: {backend}, {} ({}), rate limit {} requests a minute, {} connections, warm-up {} s, run {} s, \
         clock +{} every {} s",
        rebill.display(),
        addr,
        args.rate_limit,
        args.connections,
        args.warm_up,
        run_for.as_secs(),
        args.clock_step,
        args.clock_every
    );
    let clock = tokio::spawn(traffic.clone().clock(args.clock_step.clone(), Duration::from_secs_f64(args.clock_every)));
    let mut pacer = Pacer::start(traffic.clone(), args.connections as usize, args.rate_limit)?;

    let mut warm_tickets = pacer.run_for(Duration::from_secs(args.warm_up)).await?;
    // On to the steady state: the live subscriptions once at the population (a new
    // subscription takes about 20 / 3 tickets, so this is bounded by the pace). Their number
    // then hovers just under it, and in the mix's fixed order it can be one short at every
    // five-second look, so the look asks whether it was reached, not where it is.
    let filling = Instant::now();
    while population.is_some() && !traffic.population_reached() {
        ensure!(
            filling.elapsed() < Duration::from_secs(1800),
            "{} live subscriptions after 30 min of warm-up, short of --subscriptions {}",
            traffic.live_subscriptions(),
            args.subscriptions
        );
        warm_tickets += pacer.run_for(Duration::from_secs(5)).await?;
    }
    let first = look(pid, &traffic)?;
    let renewals_before = count_one(&mut db, RENEWALS).await?;
    let received_before = receiver.count();
    eprintln!(
        "soak: warm-up done ({warm_tickets} requests, {} live subscriptions); RSS {:.1} MB, {} fds; running {} s",
        traffic.live_subscriptions(),
        first.rss as f64 / 1e6,
        first.fds,
        run_for.as_secs()
    );

    // Looks during the run (the service keeps working, so these move more than the two
    // samples taken with no request in flight).
    let every = (run_for / 20).clamp(Duration::from_secs(1), Duration::from_secs(30));
    let looks = Arc::new(Mutex::new(Vec::new()));
    let watcher = {
        let (traffic, looks) = (traffic.clone(), looks.clone());
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let Ok(l) = look(pid, &traffic) else { return };
                looks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(l);
            }
        })
    };
    let started = Instant::now();
    let run_tickets = pacer.run_for(run_for).await?;
    let run_seconds = started.elapsed().as_secs_f64();
    let last = look(pid, &traffic)?;
    let renewals_after = count_one(&mut db, RENEWALS).await?;
    let received_after = receiver.count();
    watcher.abort();
    let _ = watcher.await;
    let looks = looks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
    traffic.stop();
    clock.abort();
    let _ = clock.await;
    pacer.finish().await;
    let alive = server.0.try_wait()?.is_none();

    // Every notification made so far delivered (at most two minutes).
    let traffic_end = Instant::now();
    let mut drained = None;
    while traffic_end.elapsed() < Duration::from_secs(120) {
        if count_one(&mut db, UNNOTIFIED).await? == 0 && count_one(&mut db, BACKLOG).await? == 0 {
            drained = Some(traffic_end.elapsed().as_secs_f64());
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let backlog = count_one(&mut db, BACKLOG).await?;
    let counted = count(&mut db).await?;
    db.close().await?;
    let (exit, exit_seconds) = if alive { stop(&mut server)? } else { ("exited during the run".into(), 0.0) };
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    let warnings = log.lines().filter(|l| l.contains("WARN")).count();

    let recorded = traffic.recorded();
    let report = Report {
        backend,
        args,
        run_seconds,
        warm_tickets,
        run_tickets,
        recorded: &recorded,
        first,
        last,
        looks: &looks,
        renewals: (renewals_before, renewals_after, counted.renewals),
        jobs_run: traffic.jobs_run.load(std::sync::atomic::Ordering::SeqCst),
        received: (received_before, received_after, receiver.count()),
        kinds: receiver.kinds(),
        counted: &counted,
        backlog,
        drained,
        exit: (&exit, exit_seconds),
        log: (&errors, warnings, &log_path),
    };
    report.print();
    let failures = report.failures(alive);
    if let Some(file) = &args.json {
        std::fs::write(file, serde_json::to_string_pretty(&report.json(&failures))?)
            .with_context(|| format!("writing {}", file.display()))?;
    }
    if !failures.is_empty() {
        bail!("the soak failed: {}", failures.join("; "));
    }
    println!("\nsoak passed");
    Ok(())
}

struct Report<'a> {
    backend: &'a str,
    args: &'a Args,
    run_seconds: f64,
    warm_tickets: u64,
    run_tickets: u64,
    recorded: &'a Recorded,
    first: Look,
    last: Look,
    looks: &'a [Look],
    /// Renewal invoices after the warm-up, after the run, at the end.
    renewals: (i64, i64, i64),
    jobs_run: u64,
    /// Notifications received after the warm-up, after the run, at the end.
    received: (u64, u64, u64),
    kinds: BTreeMap<String, u64>,
    counted: &'a Counted,
    backlog: i64,
    drained: Option<f64>,
    exit: (&'a str, f64),
    log: (&'a [&'a str], usize, &'a Path),
}

/// The change from `a` to `b` in percent of `a`.
fn change(a: f64, b: f64) -> f64 {
    if a == 0.0 { 0.0 } else { (b - a) / a * 100.0 }
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

impl Report<'_> {
    fn stats(&self, kind: Kind) -> KindStats {
        self.recorded.kinds.get(&kind).cloned().unwrap_or_default()
    }

    /// Every API request together.
    fn api(&self) -> KindStats {
        let mut all = KindStats::default();
        for kind in Kind::API {
            let s = self.stats(kind);
            all.latencies.extend(s.latencies);
            all.ok += s.ok;
            all.too_many += s.too_many;
            all.server_errors += s.server_errors;
            all.unexpected += s.unexpected;
            all.transport_errors += s.transport_errors;
            all.try_again += s.try_again;
        }
        all
    }

    fn row(name: &str, s: &KindStats) -> String {
        let mut sorted = s.latencies.clone();
        sorted.sort_unstable();
        format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.requests(),
            latency(percentile(&sorted, 50.0) as f64),
            latency(percentile(&sorted, 99.0) as f64),
            s.too_many,
            s.try_again,
            s.unexpected,
            s.server_errors,
            s.transport_errors
        )
    }

    fn rss_flat(&self) -> bool {
        change(self.first.rss as f64, self.last.rss as f64).abs() <= self.args.tolerance
    }

    fn fds_flat(&self) -> bool {
        change(self.first.fds as f64, self.last.fds as f64).abs() <= self.args.tolerance
    }

    fn print(&self) {
        let api = self.api();
        let per_minute = self.run_tickets as f64 / self.run_seconds * 60.0;
        println!(
            "\n{} API requests in the warm-up, {} in the {:.0} s run: {per_minute:.0} a minute against a limit of {}",
            self.warm_tickets, self.run_tickets, self.run_seconds, self.args.rate_limit
        );
        println!("\nrequests by kind (warm-up and run), latency from sending to the whole answer:\n");
        println!("| request | requests | p50 | p99 | 429 | try again | other unexpected | 5xx | no answer |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for kind in Kind::API {
            println!("{}", Self::row(kind.name(), &self.stats(kind)));
        }
        println!("{}", Self::row("**all API requests**", &api));
        for kind in Kind::OTHER {
            println!("{}", Self::row(&format!("{} (not rate-limited)", kind.name()), &self.stats(kind)));
        }
        let verdict = |flat: bool| if flat { "yes" } else { "**no**" };
        println!("\nthe service process, with no request in flight:\n");
        println!("| | after the warm-up | at the end | change | flat within {} % |", self.args.tolerance);
        println!("|---|---:|---:|---:|---|");
        println!(
            "| RSS | {} | {} | {:+.1} % | {} |",
            mb(self.first.rss),
            mb(self.last.rss),
            change(self.first.rss as f64, self.last.rss as f64),
            verdict(self.rss_flat())
        );
        for (name, a, b) in [
            ("of it anonymous (heap)", self.first.anon, self.last.anon),
            ("of it file-backed", self.first.file, self.last.file),
        ] {
            println!("| {name} | {} | {} | {:+.1} % | |", mb(a), mb(b), change(a as f64, b as f64));
        }
        println!(
            "| open fds | {} | {} | {:+.1} % | {} |",
            self.first.fds,
            self.last.fds,
            change(self.first.fds as f64, self.last.fds as f64),
            verdict(self.fds_flat())
        );
        if let (Some(low), Some(high)) =
            (self.looks.iter().map(|l| l.rss).min(), self.looks.iter().map(|l| l.rss).max())
        {
            let fds_low = self.looks.iter().map(|l| l.fds).min().unwrap_or_default();
            let fds_high = self.looks.iter().map(|l| l.fds).max().unwrap_or_default();
            println!(
                "\nduring the run ({} looks with traffic going on): RSS {} – {}, open fds {fds_low} – {fds_high}",
                self.looks.len(),
                mb(low),
                mb(high)
            );
            let trail: Vec<String> = self
                .looks
                .iter()
                .map(|l| format!("{:.0}s {:.1}/{:.1}/{}", l.at, l.rss as f64 / 1e6, l.anon as f64 / 1e6, l.fds))
                .collect();
            println!("looks (s since start, RSS MB/anonymous MB/fds): {}", trail.join(", "));
        }
        let (before, after, total) = self.renewals;
        println!(
            "\nrenewals: {total} renewal invoices in all, {} during the measured run; the clock's answers reported {} \
             jobs run",
            after - before,
            self.jobs_run
        );
        println!(
            "subscriptions by state: {:?}; invoices: {}; jobs with an error: {}",
            self.counted.subscriptions, self.counted.invoices, self.counted.jobs_with_errors
        );
        let (before, after, total) = self.received;
        println!(
            "webhooks: {total} notifications received, {} during the measured run; deliveries by state: {:?}; backlog \
             after the traffic: {}",
            after - before,
            self.counted.deliveries,
            match self.drained {
                Some(seconds) => format!("delivered {seconds:.1} s after the traffic stopped"),
                None => format!("{} still waiting after 120 s", self.backlog),
            }
        );
        println!("received by kind: {:?}", self.kinds);
        let (errors, warnings, path) = self.log;
        println!(
            "service log ({}): {} ERROR lines, {warnings} WARN lines; stopped with SIGTERM: {} after {:.1} s",
            path.display(),
            errors.len(),
            self.exit.0,
            self.exit.1
        );
        for line in errors.iter().take(10) {
            println!("    {line}");
        }
        let show = |title: &str, samples: &[Sample]| {
            if samples.is_empty() {
                return;
            }
            println!("\n{title} (first {}):", samples.len());
            for s in samples {
                let status = s.status.map(|s| s.to_string()).unwrap_or_else(|| "no answer".into());
                println!("- at {:.1} s, {}: {} → {status}\n  {}", s.at, s.kind.name(), s.request, s.body.trim());
            }
        };
        show("5xx answers", &self.recorded.server_errors);
        show("requests without an answer", &self.recorded.transport_errors);
        show("other unexpected answers", &self.recorded.unexpected);
    }

    fn failures(&self, alive: bool) -> Vec<String> {
        let api = self.api();
        let mut failures = Vec::new();
        if !alive {
            failures.push("the service exited during the run".to_owned());
        }
        let server_errors: u64 = self.recorded.kinds.values().map(|s| s.server_errors).sum();
        if server_errors > 0 {
            failures.push(format!("{server_errors} 5xx answers"));
        }
        let transport: u64 = self.recorded.kinds.values().map(|s| s.transport_errors).sum();
        if transport > 0 {
            failures.push(format!("{transport} requests without an answer"));
        }
        if api.too_many * 2 > api.requests() {
            failures.push(format!("429 on {} of {} API requests", api.too_many, api.requests()));
        }
        if !self.rss_flat() {
            failures.push(format!("RSS went from {} to {}", mb(self.first.rss), mb(self.last.rss)));
        }
        if !self.fds_flat() {
            failures.push(format!("open fds went from {} to {}", self.first.fds, self.last.fds));
        }
        for kind in Kind::API.into_iter().chain(Kind::OTHER) {
            if self.stats(kind).ok == 0 {
                failures.push(format!("no {} succeeded", kind.name()));
            }
        }
        if self.renewals.2 == 0 {
            failures.push("no renewal".to_owned());
        }
        if self.received.2 == 0 {
            failures.push("no webhook notification arrived".to_owned());
        }
        failures
    }

    fn json(&self, failures: &[String]) -> serde_json::Value {
        let kind = |s: &KindStats| {
            let mut sorted = s.latencies.clone();
            sorted.sort_unstable();
            serde_json::json!({
                "requests": s.requests(),
                "ok": s.ok,
                "too_many_requests": s.too_many,
                "unexpected": s.unexpected,
                "server_errors": s.server_errors,
                "no_answer": s.transport_errors,
                "try_again": s.try_again,
                "p50_us": percentile(&sorted, 50.0),
                "p99_us": percentile(&sorted, 99.0),
            })
        };
        let mut kinds = serde_json::Map::new();
        for k in Kind::API.into_iter().chain(Kind::OTHER) {
            kinds.insert(k.key().to_owned(), kind(&self.stats(k)));
        }
        kinds.insert("api".to_owned(), kind(&self.api()));
        serde_json::json!({
            "backend": self.backend,
            "rate_limit": self.args.rate_limit,
            "run_seconds": self.run_seconds,
            "warm_up_requests": self.warm_tickets,
            "run_requests": self.run_tickets,
            "kinds": kinds,
            "rss": {
                "start": self.first.rss,
                "end": self.last.rss,
                "anon_start": self.first.anon,
                "anon_end": self.last.anon,
                "flat": self.rss_flat(),
            },
            "fds": { "start": self.first.fds, "end": self.last.fds, "flat": self.fds_flat() },
            "renewals": { "total": self.renewals.2, "during_run": self.renewals.1 - self.renewals.0 },
            "clock_jobs_run": self.jobs_run,
            "webhooks": {
                "received": self.received.2,
                "during_run": self.received.1 - self.received.0,
                "by_kind": self.kinds,
                "deliveries_by_state": self.counted.deliveries,
                "drained_seconds": self.drained,
            },
            "subscriptions_by_state": self.counted.subscriptions,
            "jobs_with_errors": self.counted.jobs_with_errors,
            "log_errors": self.log.0.len(),
            "exit": self.exit.0,
            "failures": failures,
        })
    }
}
