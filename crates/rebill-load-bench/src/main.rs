//! Load benchmark (not a test): the release `rebill` binary on a fresh database versus a bare
//! axum handler serving the same bytes, both measured with `wrk` on this machine, then a
//! closed-loop Rust driver for the requests wrk cannot make.
//!
//! `rebill-load-bench [--database URL] [--duration 10s] [--connections 32] [--processes 1]`,
//! normally through `cargo xtask load-bench`, which builds the release binaries first.
//!
//! It starts `--processes` `rebill serve` processes on the database (the first on the empty
//! database prints the sandbox site's keys, the others start on the existing one; all share one
//! vault key file), raises the site's rate limit out of the way, creates 200 accounts through
//! `rebill-client` (on PostgreSQL then `ANALYZE`, see `analyze`), then measures (API 2.11):
//!
//! - with wrk, against the baseline (`bare-axum`, always one process with every connection):
//!   `GET /v2/accounts/:code`, `GET /v2/accounts?per_page=200`, and `POST /v2/accounts` with a
//!   new account each request (a Lua script written to the work directory gives every request
//!   an `account_code` unique to the run, the wrk instance, its thread and the request; the
//!   baseline's `POST /one` answers 201 with the one-account body). With N processes, N wrk
//!   instances run at once, one per process with `connections / N` connections each: their
//!   requests per second are summed and their mean latencies averaged. Printed as a Markdown
//!   table with requests per second, mean latency and the ratio to the baseline.
//! - with a closed-loop driver (tokio tasks, each with its own keep-alive connection, spread
//!   over the processes, for the same duration and connection count as wrk):
//!   `POST /v2/subscriptions` creating a new account with `<billing_info><token_id>` and one
//!   subscription to plan `bench`. Tokens are single use, so they are made ahead through
//!   `POST /js/v1/token` (the site's public key): a one-second warm-up gives the rate, and the
//!   pool holds 1.5 times what that rate needs for the run. Should the pool run out anyway, the
//!   driver stops early and says so. Every reply must be 201. Printed as a second table with
//!   requests per second and p50 and p99 latency.
//!
//! Below the tables: the peak RSS (`VmHWM`) of every rebill process. With more than one process,
//! last, the rate limit's error across processes: a second site `ratebench` at 40 requests a
//! minute (a five-minute window of 200), one account, then 400 GETs of it at once spread evenly
//! over the processes (threads with keep-alive connections). The window's room before the burst
//! is read from `rate_buckets`; the error is admitted − room, which the design allows from
//! −(N − 1) × share (a process's reservation, 5 % of the window) to 0.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rebill_client::models::{Account, Address};
use rebill_load_bench::http::{api_headers, basic, call, http_client, post_card_token, token_id};
use rebill_load_bench::process::{peak_rss, rebill_cli, release_binary, spawn};
use rebill_load_bench::stats::{latency, percentile};
use sqlx::{AnyConnection, Connection, Row};

/// A keep-alive HTTP/1.1 connection for GET requests (reconnecting when the server closes it).
struct KeepAlive {
    addr: String,
    auth: String,
    stream: Option<TcpStream>,
}

impl KeepAlive {
    fn connect(addr: &str, key: &str) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(KeepAlive { addr: addr.to_owned(), auth: basic(key), stream: Some(stream) })
    }

    /// `GET path` at API 2.11; returns status and body.
    fn get(&mut self, path: &str) -> anyhow::Result<(u16, String)> {
        if self.stream.is_none() {
            let stream = TcpStream::connect(&self.addr)?;
            stream.set_nodelay(true)?;
            self.stream = Some(stream);
        }
        let stream = self.stream.as_mut().context("a connection")?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Basic {}\r\nAccept: application/xml\r\n\
             X-Api-Version: 2.11\r\n\r\n",
            self.addr, self.auth
        )?;
        let mut bytes = Vec::with_capacity(8192);
        let mut chunk = [0_u8; 8192];
        let (status, head_len, length, close) = loop {
            let n = stream.read(&mut chunk)?;
            ensure!(n > 0, "{} closed the connection before its reply was complete", self.addr);
            bytes.extend_from_slice(&chunk[..n]);
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut reply = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(head_len) = reply.parse(&bytes)? {
                let header = |name: &str| {
                    reply
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .map(|h| h.value.to_ascii_lowercase())
                };
                let length = header("content-length").context("a reply without Content-Length")?;
                let length: usize = std::str::from_utf8(&length)?.trim().parse()?;
                let close = header("connection").is_some_and(|v| v == b"close");
                break (reply.code.context("a status")?, head_len, length, close);
            }
        };
        while bytes.len() < head_len + length {
            let n = stream.read(&mut chunk)?;
            ensure!(n > 0, "{} closed the connection before its reply was complete", self.addr);
            bytes.extend_from_slice(&chunk[..n]);
        }
        if close {
            self.stream = None;
        }
        Ok((status, String::from_utf8_lossy(&bytes[head_len..head_len + length]).into_owned()))
    }
}

/// Creates the 200 accounts the cases read, through the Rust client at API 2.11.
fn seed(addr: &str, key: &str) -> anyhow::Result<()> {
    let client = rebill_client::Client::builder().base_url(format!("http://{addr}")).api_key(key).build()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        for i in 0..200 {
            let account = Account {
                account_code: Some(format!("acct-{i:04}")),
                email: Some(format!("customer{i}@example.com")),
                first_name: Some("Ada".into()),
                last_name: Some("Lovelace".into()),
                company_name: Some("Analytical Engines".into()),
                address: Some(Box::new(Address {
                    address1: Some("12 Loop Street".into()),
                    city: Some("London".into()),
                    zip: Some("N1 9GU".into()),
                    country: Some("GB".into()),
                    ..Address::default()
                })),
                preferred_locale: Some("en-GB".into()),
                ..Account::default()
            };
            client.accounts().create(&account).await.with_context(|| format!("creating account {i}"))?;
        }
        Ok(())
    })
}

/// On PostgreSQL, has the server gather statistics on the seeded tables, as autovacuum does
/// within a minute of such a change on a running system. Without them the first plans of the
/// run are made for tables of unknown size: PostgreSQL's generic plan for an account read by
/// its code then scans the site's accounts through a list index instead of the unique one,
/// and keeps that plan while the POST case adds thousands of accounts.
fn analyze(database: &str) -> anyhow::Result<()> {
    if !database.starts_with("postgres") {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    sqlx::any::install_default_drivers();
    runtime.block_on(async {
        let mut db = AnyConnection::connect(database).await.context("opening the database")?;
        sqlx::query("ANALYZE").execute(&mut db).await.context("ANALYZE")?;
        db.close().await.context("closing the database")
    })
}

/// The script of the `POST /v2/accounts` case: every request a new account. `setup` numbers
/// wrk's threads (one Lua state each), each thread counts its requests, and the prefix (the
/// script's argument) names the run and the wrk instance, so codes never repeat.
const NEW_ACCOUNT_SCRIPT: &str = r#"local threads = 0
function setup(thread)
   thread:set("thread_id", threads)
   threads = threads + 1
end

local prefix = "x"
local counter = 0
function init(args)
   prefix = args[1]
end

function request()
   counter = counter + 1
   local code = string.format("%s-%d-%d", prefix, thread_id, counter)
   return wrk.format("POST", nil, nil, "<account><account_code>" .. code .. "</account_code></account>")
end
"#;

/// A Lua script for wrk and the prefix of each instance's argument.
struct Script<'a> {
    file: &'a Path,
    prefix: &'a str,
}

struct Measure {
    requests_per_second: f64,
    /// Mean latency in microseconds.
    latency: f64,
}

/// wrk's time (`612.34us`, `1.23ms`, `1.02s`, `1.50m`) in microseconds.
fn wrk_micros(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    Some(number.parse::<f64>().ok()? * scale)
}

/// Starts one wrk instance against `url`.
fn wrk_start(
    url: &str,
    headers: &[String],
    duration: &str,
    connections: usize,
    script: Option<(&Path, String)>,
) -> anyhow::Result<Child> {
    let mut command = Command::new("wrk");
    let threads = connections.min(2);
    command.args([format!("-t{threads}"), format!("-c{connections}"), format!("-d{duration}"), "--latency".into()]);
    for h in headers {
        command.args(["-H", h]);
    }
    if let Some((file, _)) = &script {
        command.arg("-s").arg(file);
    }
    command.arg(url);
    if let Some((_, argument)) = script {
        command.arg(argument);
    }
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running wrk (install it: apt-get install -y wrk)")
}

/// Waits for a wrk instance and reads its requests per second and mean latency.
fn wrk_finish(url: &str, child: Child) -> anyhow::Result<Measure> {
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() || text.contains("Non-2xx") {
        bail!("wrk against {url} failed or saw errors:\n{text}{}", String::from_utf8_lossy(&out.stderr));
    }
    let requests_per_second = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .context("wrk's Requests/sec")?;
    let latency = text
        .lines()
        .find(|l| l.trim_start().starts_with("Latency"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(wrk_micros)
        .with_context(|| format!("wrk's mean latency in:\n{text}"))?;
    Ok(Measure { requests_per_second, latency })
}

/// Runs one wrk instance per URL at once, the connections shared out among them; answers the
/// sum of their requests per second and the mean of their mean latencies.
fn wrk(
    urls: &[String],
    headers: &[String],
    duration: &str,
    connections: usize,
    script: Option<&Script>,
) -> anyhow::Result<Measure> {
    let mut running = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let share = connections / urls.len() + usize::from(i < connections % urls.len());
        let script = script.map(|s| (s.file, format!("{}-{i}", s.prefix)));
        running.push((url, wrk_start(url, headers, duration, share, script)?));
    }
    let mut measures = Vec::new();
    for (url, child) in running {
        measures.push(wrk_finish(url, child)?);
    }
    Ok(Measure {
        requests_per_second: measures.iter().map(|m| m.requests_per_second).sum(),
        latency: measures.iter().map(|m| m.latency).sum::<f64>() / measures.len() as f64,
    })
}

/// A duration as wrk takes it (`10s`, `2m`, `1h`, `500ms`, or seconds without a unit).
fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let split = text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.trim().parse().with_context(|| format!("--duration {text}"))?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" => 60.0,
        "h" => 3600.0,
        _ => bail!("--duration {text}: the unit is one of ms, s, m, h"),
    };
    Ok(Duration::from_secs_f64(number * scale))
}

/// Makes `count` card tokens through `POST /js/v1/token` with `connections` tasks spread over
/// the processes.
async fn make_tokens(
    addrs: &[String],
    public_key: &str,
    count: usize,
    connections: usize,
) -> anyhow::Result<Vec<String>> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..connections {
        let url = format!("http://{}/js/v1/token", addrs[task % addrs.len()]);
        let (next, public_key) = (next.clone(), public_key.to_owned());
        tasks.spawn(async move {
            let client = http_client(&[])?;
            let mut made = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < count {
                let (status, text) = post_card_token(&client, &url, &public_key).await?;
                made.push(token_id(status, &text)?);
            }
            anyhow::Ok(made)
        });
    }
    let mut tokens = Vec::with_capacity(count);
    while let Some(made) = tasks.join_next().await {
        tokens.extend(made??);
    }
    Ok(tokens)
}

/// What the closed-loop driver measured.
struct Driven {
    requests: usize,
    elapsed: Duration,
    /// Latencies in microseconds, sorted.
    latencies: Vec<u64>,
    /// When the token pool ran out, if it did.
    ran_out: Option<Duration>,
}

impl Driven {
    fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// The latency at `percent` (nearest rank), in microseconds.
    fn percentile(&self, percent: f64) -> f64 {
        percentile(&self.latencies, percent) as f64
    }
}

/// Closed loop: `connections` tasks spread over the processes, each with its own keep-alive
/// connection, each sending its next `POST /v2/subscriptions` (a new account `PREFIX-TASK-N`
/// with the next token of the pool) as soon as the last one answered, until `run_for` passed or
/// the pool ran out.
async fn drive(
    addrs: &[String],
    key: &str,
    connections: usize,
    run_for: Duration,
    tokens: Arc<Vec<String>>,
    prefix: &str,
) -> anyhow::Result<Driven> {
    let next = Arc::new(AtomicUsize::new(0));
    let ran_out = Arc::new(OnceLock::new());
    let start = Instant::now();
    let deadline = start + run_for;
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..connections {
        let url = format!("http://{}/v2/subscriptions", addrs[task % addrs.len()]);
        let headers = api_headers(key);
        let (next, tokens, ran_out, prefix) = (next.clone(), tokens.clone(), ran_out.clone(), prefix.to_owned());
        tasks.spawn(async move {
            let client = http_client(&headers)?;
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let Some(token) = tokens.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    let _ = ran_out.set(start.elapsed());
                    break;
                };
                let body = format!(
                    "<subscription><plan_code>bench</plan_code><currency>USD</currency><account>\
                     <account_code>{prefix}-{task}-{}</account_code><billing_info><token_id>{token}</token_id>\
                     </billing_info></account></subscription>",
                    latencies.len()
                );
                let sent = Instant::now();
                let reply = client.post(&url).body(body).send().await?;
                let status = reply.status();
                let text = reply.text().await?;
                let took = sent.elapsed();
                ensure!(status == 201, "POST /v2/subscriptions answered {status}:\n{text}");
                latencies.push(took.as_micros() as u64);
            }
            anyhow::Ok(latencies)
        });
    }
    let mut latencies = Vec::new();
    while let Some(done) = tasks.join_next().await {
        latencies.extend(done??);
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    Ok(Driven { requests: latencies.len(), elapsed, latencies, ran_out: ran_out.get().copied() })
}

/// The token case: a plan, a warm-up giving the rate, a pool of tokens for the run, the run.
fn subscriptions_with_tokens(
    addrs: &[String],
    key: &str,
    public_key: &str,
    connections: usize,
    run_for: Duration,
    run: &str,
) -> anyhow::Result<(Driven, usize, f64)> {
    let plan = "<plan><plan_code>bench</plan_code><name>Bench</name>\
                <unit_amount_in_cents><USD>1000</USD></unit_amount_in_cents></plan>";
    let (status, body) = call(&addrs[0], key, "POST", "/v2/plans", plan)?;
    ensure!(status == 201, "POST /v2/plans answered {status}:\n{body}");
    // Two worker threads, as wrk runs two.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async {
        let warm_up = Duration::from_secs(1);
        let tokens = make_tokens(addrs, public_key, connections * 20, connections).await?;
        let warm = drive(addrs, key, connections, warm_up, Arc::new(tokens), &format!("{run}-w")).await?;
        let rate = warm.per_second();
        let pool = (rate * run_for.as_secs_f64() * 1.5).ceil() as usize + 2 * connections;
        let tokens = make_tokens(addrs, public_key, pool, connections).await?;
        let driven = drive(addrs, key, connections, run_for, Arc::new(tokens), &format!("{run}-s")).await?;
        Ok((driven, pool, rate))
    })
}

/// Requests the site made in the rate-limit window as the buckets hold them: the sum over the
/// last five minutes of the system clock (the site's clock is never moved).
async fn window(db: &mut AnyConnection, site_id: i64) -> anyhow::Result<i64> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs() as i64;
    let oldest = now.div_euclid(60) - (rebill_store::rate::WINDOW_MINUTES - 1);
    let row = sqlx::query(
        "SELECT CAST(COALESCE(SUM(count), 0) AS BIGINT) FROM rate_buckets WHERE site_id = $1 AND minute >= $2",
    )
    .bind(site_id)
    .bind(oldest)
    .fetch_one(&mut *db)
    .await?;
    Ok(row.try_get(0)?)
}

/// `total` GETs of `path` at once, spread evenly over the processes (four threads each, each
/// thread with its own keep-alive connection); answers the numbers admitted (2xx) and refused
/// (429).
fn burst(addrs: &[String], key: &str, path: &str, total: usize) -> anyhow::Result<(usize, usize)> {
    let threads = addrs.len() * 4;
    let barrier = Arc::new(Barrier::new(threads));
    let mut handles = Vec::new();
    for t in 0..threads {
        let count = total / threads + usize::from(t < total % threads);
        let (addr, key, path, barrier) =
            (addrs[t % addrs.len()].clone(), key.to_owned(), path.to_owned(), barrier.clone());
        handles.push(std::thread::spawn(move || -> anyhow::Result<(usize, usize)> {
            let connection = KeepAlive::connect(&addr, &key);
            barrier.wait();
            let mut connection = connection?;
            let (mut admitted, mut refused) = (0, 0);
            for _ in 0..count {
                match connection.get(&path)? {
                    (200..=299, _) => admitted += 1,
                    (429, _) => refused += 1,
                    (status, body) => bail!("GET {path} answered {status}:\n{body}"),
                }
            }
            Ok((admitted, refused))
        }));
    }
    let (mut admitted, mut refused) = (0, 0);
    for handle in handles {
        let (a, r) = handle.join().map_err(|_| anyhow::anyhow!("a burst thread panicked"))??;
        admitted += a;
        refused += r;
    }
    Ok((admitted, refused))
}

/// The rate limit's error across processes, on a site of its own (see the module documentation).
fn rate_limit_error(rebill: &Path, database: &str, addrs: &[String]) -> anyhow::Result<()> {
    const PER_MINUTE: i64 = 40;
    const REQUESTS: usize = 400;
    let created =
        rebill_cli(rebill, database, &["site", "create", "--name", "ratebench", "--mode", "sandbox", "--json"])?;
    let created: serde_json::Value = serde_json::from_str(&created).context("the output of `site create --json`")?;
    let key = created["private_key"].as_str().context("the new site's private key")?;
    let site_id = created["id"].as_i64().context("the new site's id")?;
    rebill_cli(rebill, database, &["site", "update", "--name", "ratebench", "--rate-limit", &PER_MINUTE.to_string()])?;
    let (status, body) =
        call(&addrs[0], key, "POST", "/v2/accounts", "<account><account_code>rated</account_code></account>")?;
    ensure!(status == 201, "POST /v2/accounts on ratebench answered {status}:\n{body}");
    let limit = PER_MINUTE * rebill_store::rate::WINDOW_MINUTES;
    let share = rebill_store::rate::share(limit);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    sqlx::any::install_default_drivers();
    let mut db = runtime.block_on(AnyConnection::connect(database)).context("opening the database")?;
    // Unused reservations go back to the buckets once their lease ended (each process's watcher
    // looks every 100 ms): the window then holds exactly the requests admitted so far.
    let mut settled = |expected: i64| -> anyhow::Result<i64> {
        let deadline = std::time::Instant::now() + rebill_store::rate::LEASE + Duration::from_secs(10);
        loop {
            let held = runtime.block_on(window(&mut db, site_id))?;
            if held == expected {
                return Ok(held);
            }
            ensure!(std::time::Instant::now() < deadline, "the window holds {held} requests, not {expected}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let before = settled(1)?;
    let room = limit - before;
    let (admitted, refused) = burst(addrs, key, "/v2/accounts/rated", REQUESTS)?;
    let after = settled(before + admitted as i64)?;
    let n = addrs.len() as i64;
    let error = admitted as i64 - room;
    let allowed = -(n - 1) * share;
    let verdict = if (allowed..=0).contains(&error) { "met" } else { "not met" };
    println!(
        "\nrate limit across {n} processes: site `ratebench` at {PER_MINUTE} requests a minute (a window of {limit}, \
         share {share}), {REQUESTS} GETs at once spread evenly over the processes\n"
    );
    println!(
        "| requests | admitted (2xx) | refused (429) | window before | room | window after | error (admitted − room) | allowed |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {REQUESTS} | {admitted} | {refused} | {before} | {room} | {after} | {error} | {allowed} … 0 ({verdict}) |"
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let option = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let duration = option("--duration").unwrap_or_else(|| "10s".into());
    let run_for = parse_duration(&duration)?;
    let connections: usize = option("--connections").map(|c| c.parse()).transpose()?.unwrap_or(32);
    let processes: usize = option("--processes").map(|c| c.parse()).transpose()?.unwrap_or(1);
    ensure!(processes >= 1, "--processes must be at least 1");
    ensure!(connections >= processes, "--connections must be at least --processes (one wrk instance per process)");
    let work = std::env::temp_dir().join(format!("rebill-load-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let database = option("--database").unwrap_or_else(|| format!("sqlite://{}", work.join("rebill.db").display()));
    let rebill = release_binary("rebill");
    let bare = release_binary("bare-axum");
    for b in [&rebill, &bare] {
        if !Path::new(b).exists() {
            bail!(
                "{} is missing: build with `cargo build --release -p rebill-cli -p rebill-load-bench` (or run \
                 `cargo xtask load-bench`)",
                b.display()
            );
        }
    }
    // A run's account codes never repeat those of an earlier run on the same database.
    let run = format!("r{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis());

    // Without the per-request log lines (REBILL_LOG=warn): the figures measure serving, and stay
    // comparable with earlier runs. Every process reads the same vault key, so a token made
    // through one works on all.
    let vault_key = work.join("vault.key").display().to_string();
    let serve = || {
        let mut command = Command::new(&rebill);
        command.env("REBILL_LOG", "warn").args([
            "--database",
            &database,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--vault-key-file",
            &vault_key,
        ]);
        command
    };
    let (first, lines, addr) = spawn(&mut serve()).with_context(|| format!("starting {}", rebill.display()))?;
    let printed = |prefix: &str| lines.iter().find_map(|l| l.strip_prefix(prefix)).map(|k| k.trim().to_owned());
    let key = printed("private key:").context("a fresh database (the service prints the sandbox site's key)")?;
    let public_key = printed("public key:").context("the sandbox site's public key")?;
    let mut servers = vec![first];
    let mut addrs = vec![addr];
    // The others start on the database the first one set up (they print no key).
    for _ in 1..processes {
        let (server, _, addr) = spawn(&mut serve()).with_context(|| format!("starting {}", rebill.display()))?;
        servers.push(server);
        addrs.push(addr);
    }
    // The load far exceeds the sandbox limit; the limit is still checked on every request.
    rebill_cli(&rebill, &database, &["site", "update", "--name", "sandbox", "--rate-limit", "1000000000"])
        .context("raising the benchmark site's rate limit")?;
    seed(&addrs[0], &key)?;
    analyze(&database)?;
    let one_path = "/v2/accounts/acct-0100";
    let page_path = "/v2/accounts?per_page=200";
    let (s1, one) = call(&addrs[0], &key, "GET", one_path, "")?;
    let (s2, page) = call(&addrs[0], &key, "GET", page_path, "")?;
    if s1 != 200 || s2 != 200 || page.matches("<account ").count() != 200 {
        bail!("unexpected replies: {s1} / {s2}");
    }
    std::fs::write(work.join("one.xml"), &one)?;
    std::fs::write(work.join("page.xml"), &page)?;
    let script_file = work.join("new-account.lua");
    std::fs::write(&script_file, NEW_ACCOUNT_SCRIPT)?;
    let (_baseline, _, bare_addr) = spawn(Command::new(&bare).args([
        "127.0.0.1:0",
        &work.join("one.xml").display().to_string(),
        &work.join("page.xml").display().to_string(),
    ]))?;

    let get_headers = vec![
        format!("Authorization: Basic {}", basic(&key)),
        "Accept: application/xml".to_owned(),
        "X-Api-Version: 2.11".to_owned(),
    ];
    let mut post_headers = get_headers.clone();
    post_headers.push("Content-Type: application/xml; charset=utf-8".to_owned());
    let script = Script { file: &script_file, prefix: &run };
    let on_every = |path: &str| addrs.iter().map(|a| format!("http://{a}{path}")).collect::<Vec<_>>();
    let cases = [
        ("GET one account", on_every(one_path), format!("http://{bare_addr}/one"), Some(one.len()), 0.3, None),
        (
            "GET a page of 200 accounts",
            on_every(page_path),
            format!("http://{bare_addr}/page"),
            Some(page.len()),
            0.15,
            None,
        ),
        (
            "POST a new account",
            on_every("/v2/accounts"),
            format!("http://{bare_addr}/one"),
            // The size of rebill's reply, read when the case runs (after the page case, whose page
            // must not change).
            None,
            0.05,
            Some(&script),
        ),
    ];
    let database_name = if database.starts_with("sqlite") { "SQLite" } else { "PostgreSQL" };
    println!("database: {database_name}, rebill processes: {processes}");
    if processes == 1 {
        println!("wrk -t2 -c{connections} -d{duration}\n");
    } else {
        println!(
            "wrk -t2 -c{connections} -d{duration}; against rebill {processes} instances at once, one per process, \
             {connections} connections in all (req/s summed, mean latency averaged)\n"
        );
    }
    println!(
        "| case | body bytes | rebill req/s | rebill mean latency | bare axum req/s | bare axum mean latency | ratio | target |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, urls, base_url, bytes, target, script) in cases {
        let headers = if script.is_some() { &post_headers } else { &get_headers };
        let bytes = match bytes {
            Some(bytes) => bytes,
            None => {
                let probe = format!("<account><account_code>{run}-probe</account_code></account>");
                let (status, created) = call(&addrs[0], &key, "POST", "/v2/accounts", &probe)?;
                ensure!(status == 201, "POST /v2/accounts answered {status}:\n{created}");
                created.len()
            }
        };
        let ours = wrk(&urls, headers, &duration, connections, script)?;
        let base = wrk(&[base_url], headers, &duration, connections, script)?;
        let ratio = ours.requests_per_second / base.requests_per_second;
        let verdict = if ratio >= target { "met" } else { "not met" };
        println!(
            "| {name} | {bytes} | {:.0} | {} | {:.0} | {} | {ratio:.2}× | ≥ {target}× ({verdict}) |",
            ours.requests_per_second,
            latency(ours.latency),
            base.requests_per_second,
            latency(base.latency)
        );
    }

    let (driven, pool, warm_rate) = subscriptions_with_tokens(&addrs, &key, &public_key, connections, run_for, &run)?;
    let spread = if processes == 1 { String::new() } else { format!(" spread over {processes} processes") };
    println!(
        "\nclosed loop: {connections} connections{spread} for {duration}, each request a new account with a card token \
         and one subscription to plan `bench`; {pool} tokens made ahead (warm-up: {warm_rate:.0} req/s)\n"
    );
    println!("| case | rebill req/s | p50 latency | p99 latency | requests |");
    println!("|---|---|---|---|---|");
    println!(
        "| POST a subscription with a token | {:.0} | {} | {} | {} |",
        driven.per_second(),
        latency(driven.percentile(50.0)),
        latency(driven.percentile(99.0)),
        driven.requests
    );
    if let Some(at) = driven.ran_out {
        println!("\nthe token pool ran out after {:.1}s: the driver stopped early", at.as_secs_f64());
    }

    let peaks = servers
        .iter()
        .map(|s| peak_rss(s.id()).map(|bytes| format!("{:.1} MB", bytes as f64 / 1e6)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    println!("\npeak RSS (VmHWM) of rebill: {}", peaks.join(", "));

    if processes > 1 {
        rate_limit_error(&rebill, &database, &addrs)?;
    }
    drop(servers);
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
