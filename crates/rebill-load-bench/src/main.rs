//! Load benchmark (not a test): the release `rebill` binary on a fresh database versus a bare
//! axum handler serving the same bytes, both measured with `wrk` on this machine.
//!
//! `rebill-load-bench [--database URL] [--duration 10s] [--connections 32]`, normally through
//! `cargo xtask load-bench`, which builds the release binaries first. It creates 200 accounts
//! through `rebill-client`, then measures `GET /v2/accounts/:code` and
//! `GET /v2/accounts?per_page=200` (API 2.11) and prints a Markdown table with requests per
//! second and the ratio to the baseline.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};
use base64::Engine;
use rebill_client::models::{Account, Address};

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a server and returns it with the lines it printed up to `listening on http://ADDR`.
fn spawn(command: &mut Command) -> anyhow::Result<(Running, Vec<String>, String)> {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().context("starting a server")?;
    let stdout = child.stdout.take().context("stdout")?;
    let running = Running(child);
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    loop {
        let line = lines.next().context("the server stopped before listening")??;
        if let Some(addr) = line.strip_prefix("listening on http://") {
            let addr = addr.trim().to_owned();
            std::thread::spawn(move || for _ in lines {});
            return Ok((running, seen, addr));
        }
        seen.push(line);
    }
}

/// One request over a fresh connection; returns status and body.
fn call(addr: &str, key: &str, method: &str, path: &str, body: &str) -> anyhow::Result<(u16, String)> {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{key}:"));
    let mut stream = TcpStream::connect(addr)?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Basic {auth}\r\n\
         Accept: application/xml\r\nX-Api-Version: 2.11\r\nContent-Type: application/xml; charset=utf-8\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    let (head, body) = reply.split_once("\r\n\r\n").context("an HTTP reply")?;
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).context("a status")?;
    Ok((status, body.to_owned()))
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

struct Measure {
    requests_per_second: f64,
    latency: String,
}

/// Runs wrk against `url` and reads its requests per second and mean latency.
fn wrk(url: &str, headers: &[String], duration: &str, connections: u32) -> anyhow::Result<Measure> {
    let mut command = Command::new("wrk");
    command.args(["-t2", &format!("-c{connections}"), &format!("-d{duration}"), "--latency"]);
    for h in headers {
        command.args(["-H", h]);
    }
    let out = command.arg(url).output().context("running wrk (install it: apt-get install -y wrk)")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() || text.contains("Non-2xx") {
        bail!("wrk against {url} failed or saw errors:\n{text}{}", String::from_utf8_lossy(&out.stderr));
    }
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .context("wrk's Requests/sec")?;
    let latency = text
        .lines()
        .find(|l| l.trim_start().starts_with("Latency"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?")
        .to_owned();
    Ok(Measure { requests_per_second: rps, latency })
}

/// A release binary: in `REBILL_BENCH_BINARIES` (set by `cargo xtask load-bench`), or else
/// beside this benchmark's own executable (the same target directory).
fn release_binary(name: &str) -> PathBuf {
    let dir = std::env::var_os("REBILL_BENCH_BINARIES")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok().and_then(|exe| exe.parent().map(Path::to_path_buf)));
    dir.unwrap_or_else(|| PathBuf::from("target/release")).join(name)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let option = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let duration = option("--duration").unwrap_or_else(|| "10s".into());
    let connections: u32 = option("--connections").map(|c| c.parse()).transpose()?.unwrap_or(32);
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

    // Without the per-request log lines (REBILL_LOG=warn): the figures measure serving, and stay
    // comparable with earlier runs.
    let (_server, lines, addr) = spawn(Command::new(&rebill).env("REBILL_LOG", "warn").args([
        "--database",
        &database,
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]))
    .with_context(|| format!("starting {}", rebill.display()))?;
    let key = lines
        .iter()
        .find_map(|l| l.strip_prefix("private key: "))
        .context("a fresh database (the service prints the sandbox site's key)")?
        .trim()
        .to_owned();
    // The load far exceeds the sandbox limit; the limit is still checked on every request.
    let status = Command::new(&rebill)
        .args(["--database", &database, "site", "update", "--name", "sandbox", "--rate-limit", "1000000000"])
        .status()?;
    if !status.success() {
        bail!("could not raise the benchmark site's rate limit");
    }
    seed(&addr, &key)?;
    let one_path = "/v2/accounts/acct-0100";
    let page_path = "/v2/accounts?per_page=200";
    let (s1, one) = call(&addr, &key, "GET", one_path, "")?;
    let (s2, page) = call(&addr, &key, "GET", page_path, "")?;
    if s1 != 200 || s2 != 200 || page.matches("<account ").count() != 200 {
        bail!("unexpected replies: {s1} / {s2}");
    }
    std::fs::write(work.join("one.xml"), &one)?;
    std::fs::write(work.join("page.xml"), &page)?;
    let (_baseline, _, bare_addr) = spawn(Command::new(&bare).args([
        "127.0.0.1:0",
        &work.join("one.xml").display().to_string(),
        &work.join("page.xml").display().to_string(),
    ]))?;

    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{key}:"));
    let headers = vec![
        format!("Authorization: Basic {auth}"),
        "Accept: application/xml".to_owned(),
        "X-Api-Version: 2.11".to_owned(),
    ];
    let cases = [
        ("GET one account", format!("http://{addr}{one_path}"), format!("http://{bare_addr}/one"), one.len(), 0.3),
        (
            "GET a page of 200 accounts",
            format!("http://{addr}{page_path}"),
            format!("http://{bare_addr}/page"),
            page.len(),
            0.1,
        ),
    ];
    println!("database: {}", if database.starts_with("sqlite") { "SQLite" } else { "PostgreSQL" });
    println!("wrk -t2 -c{connections} -d{duration}\n");
    println!(
        "| case | body bytes | rebill req/s | rebill mean latency | bare axum req/s | bare axum mean latency | ratio | target |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, url, base_url, bytes, target) in cases {
        let ours = wrk(&url, &headers, &duration, connections)?;
        let base = wrk(&base_url, &headers, &duration, connections)?;
        let ratio = ours.requests_per_second / base.requests_per_second;
        let verdict = if ratio >= target { "met" } else { "not met" };
        println!(
            "| {name} | {bytes} | {:.0} | {} | {:.0} | {} | {ratio:.2}× | ≥ {target}× ({verdict}) |",
            ours.requests_per_second, ours.latency, base.requests_per_second, base.latency
        );
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
