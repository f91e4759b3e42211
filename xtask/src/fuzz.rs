//! `cargo xtask fuzz`: the fuzz targets of `fuzz/` under libFuzzer (through cargo-fuzz).
//!
//! - `cargo xtask fuzz --smoke` runs every target for [`SMOKE_SECONDS`] (CI), built unoptimised
//!   (`--dev`) to keep a clean checkout's build short; any crash, timeout or out-of-memory fails
//!   it.
//! - `cargo xtask fuzz TARGET [--runs N] [--seconds S] [-- LIBFUZZER_OPTIONS]` runs one target
//!   (a long run: `--runs 10000000`).
//! - `cargo xtask fuzz seed` rebuilds the seed corpus (`fuzz/corpus/<target>/seed-*`) from the
//!   golden snapshots, the schema's examples and the endpoint table, and the dictionaries
//!   (`fuzz/dict/<target>.dict`) from the schema. Other files in a corpus directory (inputs that
//!   once failed) are kept.
//!
//! cargo-fuzz is installed from crates.io when missing; a failed install fails the command. The
//! targets are built without a sanitizer (rebill forbids `unsafe`), with debug assertions and
//! overflow checks. New inputs a run finds go to `fuzz/target/corpus/<target>/`, crashes to
//! `fuzz/artifacts/<target>/`; both are ignored by git. Details: `docs/fuzzing.md`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

/// One fuzz target and its libFuzzer limits.
pub struct Target {
    pub name: &'static str,
    /// Longest input (`-max_len`), in bytes.
    pub max_len: usize,
    /// Longest time one input may take (`-timeout`), in seconds.
    pub timeout: u64,
}

/// Every target of `fuzz/Cargo.toml`.
pub const TARGETS: &[Target] = &[
    // Documents up to the largest golden snapshot (an invoice collection, ~15 KiB).
    Target { name: "request_body", max_len: 20_480, timeout: 10 },
    Target { name: "token_form", max_len: 4096, timeout: 10 },
    Target { name: "list_query", max_len: 1024, timeout: 10 },
    Target { name: "protocol_headers", max_len: 4096, timeout: 10 },
    Target { name: "invoice_pdf", max_len: 4096, timeout: 10 },
];

/// Seconds each target runs in the smoke.
pub const SMOKE_SECONDS: u64 = 20;

/// libFuzzer's memory limit (`-rss_limit_mb`, and `-malloc_limit_mb` with it).
const RSS_LIMIT_MB: u64 = 1024;

#[derive(clap::Args)]
pub struct FuzzArgs {
    /// A target to run, or `seed` to rebuild the seed corpus and dictionaries (none with
    /// --smoke).
    target: Option<String>,
    /// Run every target for a short time (the CI smoke).
    #[arg(long, conflicts_with_all = ["runs", "seconds"])]
    smoke: bool,
    /// Stop after this many executions.
    #[arg(long)]
    runs: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    seconds: Option<u64>,
    /// More libFuzzer options, after `--` (e.g. `-- -jobs=2`).
    #[arg(last = true)]
    libfuzzer: Vec<String>,
}

pub fn run(args: &FuzzArgs, root: &Path) -> anyhow::Result<()> {
    match (args.smoke, args.target.as_deref()) {
        (true, None) => smoke(root),
        (true, Some(_)) => bail!("--smoke runs every target: name none"),
        (false, Some("seed")) => seed(root),
        (false, Some(name)) => {
            let target = target(name)?;
            let stop = match (args.runs, args.seconds) {
                (Some(runs), _) => Stop::Runs(runs),
                (None, Some(seconds)) => Stop::Seconds(seconds),
                (None, None) => Stop::Never,
            };
            ensure_cargo_fuzz()?;
            let stats = fuzz(root, target, Build::Release, stop, &args.libfuzzer, true)?;
            println!("{}: {}", target.name, stats.summary());
            Ok(())
        }
        (false, None) => bail!("name a target ({}), `seed`, or pass --smoke", names()),
    }
}

fn names() -> String {
    TARGETS.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
}

fn target(name: &str) -> anyhow::Result<&'static Target> {
    TARGETS
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| anyhow::anyhow!("no fuzz target `{name}`; targets: {}", names()))
}

/// How the targets are compiled.
#[derive(Clone, Copy)]
enum Build {
    /// Optimised (cargo-fuzz's default): for long runs, several times more executions a second.
    Release,
    /// Unoptimised (`--dev`): compiles in a fraction of the time from nothing, which is what a
    /// short smoke on a clean checkout spends most of its time on.
    Dev,
}

impl Build {
    /// The `cargo fuzz build|run` arguments that select it (no sanitizer in either).
    fn args(self) -> &'static [&'static str] {
        match self {
            Build::Release => &["-s", "none"],
            Build::Dev => &["--dev", "-s", "none"],
        }
    }
}

/// Every target for [`SMOKE_SECONDS`]: builds them all first (unoptimised), then runs each; the
/// first failure stops the smoke with its reproduction.
pub fn smoke(root: &Path) -> anyhow::Result<()> {
    ensure_cargo_fuzz()?;
    let started = Instant::now();
    let build = Build::Dev;
    println!("==> cargo fuzz build {} (every target)", build.args().join(" "));
    let status = cargo_fuzz(root).arg("build").args(build.args()).status().context("running `cargo fuzz build`")?;
    if !status.success() {
        bail!("building the fuzz targets failed");
    }
    println!("    built in {} s", started.elapsed().as_secs());
    for target in TARGETS {
        println!("==> fuzz {} for {SMOKE_SECONDS} s", target.name);
        let stats = fuzz(root, target, build, Stop::Seconds(SMOKE_SECONDS), &[], false)?;
        println!("    {}", stats.summary());
    }
    println!("fuzz smoke: {} targets passed in {} s", TARGETS.len(), started.elapsed().as_secs());
    Ok(())
}

/// `cargo fuzz …` from the workspace root, on a stable toolchain too (cargo-fuzz needs
/// nightly flags).
fn cargo_fuzz(root: &Path) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    // The targets always build in fuzz/target (their own workspace's), whatever the caller's
    // target directory.
    cmd.current_dir(root).env("RUSTC_BOOTSTRAP", "1").env_remove("CARGO_TARGET_DIR").arg("fuzz");
    cmd
}

/// Installs cargo-fuzz from crates.io unless `cargo fuzz` already answers.
fn ensure_cargo_fuzz() -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let answers = || {
        Command::new(&cargo)
            .args(["fuzz", "--version"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if answers() {
        return Ok(());
    }
    println!("==> cargo install cargo-fuzz --locked");
    let status = Command::new(&cargo)
        .args(["install", "cargo-fuzz", "--locked"])
        .status()
        .context("running `cargo install cargo-fuzz`")?;
    if !status.success() || !answers() {
        bail!("cargo-fuzz is missing and `cargo install cargo-fuzz --locked` failed: the fuzz targets cannot run");
    }
    Ok(())
}

/// When a run stops.
#[derive(Clone, Copy)]
enum Stop {
    Runs(u64),
    Seconds(u64),
    Never,
}

/// What libFuzzer reported at the end of a run.
#[derive(Debug, Default, PartialEq, Eq)]
struct Stats {
    executions: u64,
    seconds: u64,
    exec_per_second: u64,
    /// Coverage counters (`cov:`) and features (`ft:`) of the last status line.
    coverage: u64,
    features: u64,
    /// Inputs in the corpus (`corp:`) of the last status line.
    corpus: u64,
    peak_rss_mb: u64,
}

impl Stats {
    fn summary(&self) -> String {
        format!(
            "{} executions in {} s ({} exec/s), cov {} ft {}, corpus {} inputs, peak RSS {} MB",
            self.executions,
            self.seconds,
            self.exec_per_second,
            self.coverage,
            self.features,
            self.corpus,
            self.peak_rss_mb
        )
    }

    /// Reads one line of libFuzzer's output.
    fn read(&mut self, line: &str) {
        let stat = |name: &str| {
            line.strip_prefix(name).and_then(|rest| rest.trim_start_matches(':').trim().parse::<u64>().ok())
        };
        if let Some(n) = stat("stat::number_of_executed_units") {
            self.executions = n;
        } else if let Some(n) = stat("stat::average_exec_per_sec") {
            self.exec_per_second = n;
        } else if let Some(n) = stat("stat::peak_rss_mb") {
            self.peak_rss_mb = n;
        } else if let Some(rest) = line.strip_prefix("Done ") {
            // `Done 10000000 runs in 308 second(s)`: the fuzzing time, without the build.
            if let Some(n) = rest.split_whitespace().nth(3).and_then(|s| s.parse().ok()) {
                self.seconds = n;
            }
        } else if line.starts_with('#') {
            let field = |name: &str| {
                line.split_whitespace()
                    .skip_while(|w| *w != name)
                    .nth(1)
                    .and_then(|v| v.trim_end_matches(|c: char| !c.is_ascii_digit()).parse::<u64>().ok())
            };
            if let Some(n) = field("cov:") {
                self.coverage = n;
            }
            if let Some(n) = field("ft:") {
                self.features = n;
            }
            // `corp: 412/96Kb`: the count before the slash.
            let corpus = line.split_whitespace().skip_while(|w| *w != "corp:").nth(1);
            if let Some(n) = corpus.and_then(|c| c.split('/').next()).and_then(|c| c.parse().ok()) {
                self.corpus = n;
            }
        }
    }
}

/// Runs `target` until `stop` over its seed corpus, with new inputs kept in
/// `fuzz/target/corpus/<target>/`. Fails on any crash, timeout or out-of-memory, naming the
/// input and how to reproduce it. `echo`: print all of libFuzzer's output, else only its last
/// lines on failure.
fn fuzz(root: &Path, target: &Target, build: Build, stop: Stop, extra: &[String], echo: bool) -> anyhow::Result<Stats> {
    let seeds = root.join("fuzz/corpus").join(target.name);
    let found = root.join("fuzz/target/corpus").join(target.name);
    let artifacts = root.join("fuzz/artifacts").join(target.name);
    for dir in [&found, &artifacts] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if !seeds.is_dir() {
        bail!("{} is missing: run `cargo xtask fuzz seed`", seeds.display());
    }
    let mut options = vec![
        format!("-max_len={}", target.max_len),
        format!("-timeout={}", target.timeout),
        format!("-rss_limit_mb={RSS_LIMIT_MB}"),
        format!("-malloc_limit_mb={RSS_LIMIT_MB}"),
        format!("-artifact_prefix={}/", artifacts.display()),
        "-print_final_stats=1".to_owned(),
    ];
    let dict = root.join("fuzz/dict").join(format!("{}.dict", target.name));
    if dict.is_file() {
        options.push(format!("-dict={}", dict.display()));
    }
    match stop {
        Stop::Runs(n) => options.push(format!("-runs={n}")),
        Stop::Seconds(s) => options.push(format!("-max_total_time={s}")),
        Stop::Never => {}
    }
    options.extend(extra.iter().cloned());
    let started = Instant::now();
    let mut child = cargo_fuzz(root)
        .arg("run")
        .args(build.args())
        .arg(target.name)
        .arg(&found)
        .arg(&seeds)
        .arg("--")
        .args(&options)
        .stderr(Stdio::piped())
        .spawn()
        .context("running `cargo fuzz run`")?;
    let stderr = child.stderr.take().ok_or_else(|| anyhow::anyhow!("no stderr from cargo fuzz"))?;
    let mut stats = Stats::default();
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.context("reading libFuzzer's output")?;
        if echo {
            eprintln!("{line}");
        }
        stats.read(&line);
        tail.push_back(line);
        if tail.len() > 60 {
            tail.pop_front();
        }
    }
    let status = child.wait().context("waiting for `cargo fuzz run`")?;
    if stats.seconds == 0 {
        stats.seconds = started.elapsed().as_secs();
    }
    if !status.success() {
        if !echo {
            for line in &tail {
                eprintln!("{line}");
            }
        }
        bail!(
            "fuzz target {} failed ({status}): the input is in {}; reproduce with \
             `RUSTC_BOOTSTRAP=1 cargo fuzz run {} {} {}/<crash-file>`",
            target.name,
            artifacts.display(),
            build.args().join(" "),
            target.name,
            artifacts.display()
        );
    }
    Ok(stats)
}

// ---------------------------------------------------------------------------------------------
// The seed corpus and the dictionaries.

/// Rebuilds `fuzz/corpus/<target>/seed-*` and `fuzz/dict/<target>.dict`.
fn seed(root: &Path) -> anyhow::Result<()> {
    let schema = rebill_schema::load_dir(&root.join("schema"))?;
    let sets: Vec<(&str, Vec<Vec<u8>>)> = vec![
        ("request_body", request_bodies(root, &schema)?),
        ("token_form", token_forms()),
        ("list_query", list_queries(&schema)),
        ("protocol_headers", request_heads(&schema)),
        ("invoice_pdf", invoice_inputs()),
    ];
    for (name, inputs) in sets {
        let dir = root.join("fuzz/corpus").join(name);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("seed-")) {
                std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            }
        }
        let mut written = BTreeSet::new();
        for input in inputs {
            let file = format!("seed-{:016x}", fnv1a(&input));
            if written.insert(file.clone()) {
                std::fs::write(dir.join(&file), &input)?;
            }
        }
        println!("fuzz/corpus/{name}: {} seeds", written.len());
    }
    let dicts = root.join("fuzz/dict");
    std::fs::create_dir_all(&dicts)?;
    for (name, entries) in [
        ("request_body", xml_dictionary(&schema)),
        ("token_form", TOKEN_PARAMS.iter().map(|p| format!("{p}=")).chain(["&".to_owned(), "%".to_owned()]).collect()),
        ("list_query", list_dictionary(&schema)),
        ("protocol_headers", header_dictionary()),
    ] {
        let path = dicts.join(format!("{name}.dict"));
        let text: String = entries.iter().map(|e| format!("\"{}\"\n", dict_escape(e))).collect();
        std::fs::write(&path, format!("# generated by `cargo xtask fuzz seed`, do not edit\n{text}"))?;
        println!("fuzz/dict/{name}.dict: {} entries", entries.len());
    }
    Ok(())
}

/// 64-bit FNV-1a: a stable file name per input.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// A dictionary entry in libFuzzer's quoting.
fn dict_escape(entry: &str) -> String {
    entry
        .bytes()
        .map(|b| match b {
            b'"' => "\\\"".to_owned(),
            b'\\' => "\\\\".to_owned(),
            0x20..=0x7e => char::from(b).to_string(),
            _ => format!("\\x{b:02X}"),
        })
        .collect()
}

/// The selector byte of `request_body` (and `fuzz/src/lib.rs`): version index in the low four
/// bits, one bit per feature from bit 4, bit 7 for an update.
fn selector(schema: &rebill_schema::Schema, version: &str, features: &[&str], update: bool) -> Option<u8> {
    let v = schema.versions.iter().position(|v| v.to_string() == version)?;
    let mut byte = u8::try_from(v).ok().filter(|v| *v < 16)?;
    for name in features {
        let f = schema.features.iter().position(|f| f.name == *name)?;
        byte |= 1u8.checked_shl(u32::try_from(f).ok()? + 4).filter(|b| *b < 0x80)?;
    }
    Some(if update { byte | 0x80 } else { byte })
}

/// The documents of the golden snapshots (`tests/snapshots/golden__<resource>__<version>__<features>.snap`),
/// each at its version and features, once per resource and document; and the schema's
/// examples at the latest version with every feature, for creation and for update. A seed is
/// the resource's index in schema-name order, the selector byte and the document.
fn request_bodies(root: &Path, schema: &rebill_schema::Schema) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut names: Vec<&str> = schema.resources.iter().map(|r| r.name.as_str()).collect();
    names.sort_unstable();
    let index = |name: &str| names.iter().position(|n| *n == name).and_then(|i| u8::try_from(i).ok());
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("tests/snapshots"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    files.sort();
    let mut seen = BTreeSet::new();
    let mut seeds = Vec::new();
    for file in files {
        let Some(stem) = file.file_stem().and_then(|s| s.to_str()) else { continue };
        let parts: Vec<&str> = stem.split("__").collect();
        let [_, resource, version, features] = parts[..] else { continue };
        let features: Vec<&str> = if features == "none" { Vec::new() } else { features.split(',').collect() };
        let (Some(resource_index), Some(selector)) = (index(resource), selector(schema, version, &features, false))
        else {
            continue;
        };
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let document = snapshot_body(&text);
        if document.trim().is_empty() || !seen.insert((resource.to_owned(), document.clone())) {
            continue;
        }
        seeds.push([&[resource_index, selector][..], document.as_bytes()].concat());
    }
    let latest = schema.latest_version().to_string();
    let all: Vec<&str> = schema.features.iter().map(|f| f.name.as_str()).collect();
    for resource in &names {
        let path = root.join("schema/examples").join(format!("{resource}.xml"));
        let Ok(document) = std::fs::read(&path) else { continue };
        let Some(resource_index) = index(resource) else { continue };
        for update in [false, true] {
            if let Some(selector) = selector(schema, &latest, &all, update) {
                seeds.push([&[resource_index, selector][..], &document].concat());
            }
        }
    }
    Ok(seeds)
}

/// The snapshot of an insta `.snap` file: what follows its second `---` line.
fn snapshot_body(text: &str) -> String {
    let mut lines = text.lines();
    let mut separators = 0;
    for line in lines.by_ref() {
        if line == "---" {
            separators += 1;
            if separators == 2 {
                break;
            }
        }
    }
    let body: Vec<&str> = lines.collect();
    if body.is_empty() { String::new() } else { format!("{}\n", body.join("\n")) }
}

/// The form fields the token endpoint reads (`tokens::TOKEN_FIELDS`, with the key, the
/// callback, `_method` and `type`).
const TOKEN_PARAMS: &[&str] = &[
    "key",
    "callback",
    "_method",
    "type",
    "number",
    "month",
    "year",
    "cvv",
    "first_name",
    "last_name",
    "company",
    "address1",
    "address2",
    "city",
    "state",
    "postal_code",
    "zip",
    "country",
    "phone",
    "vat_number",
    "routing_number",
    "account_number",
    "account_number_confirmation",
    "account_type",
    "name_on_account",
];

/// Token calls as the client-side library makes them: byte 0 (bit 0 POST, bit 1 a
/// Content-Type), the query, a newline, the Content-Type, a newline and the body.
fn token_forms() -> Vec<Vec<u8>> {
    const FORM: &str = "application/x-www-form-urlencoded";
    let calls: &[(u8, &str, &str, &str)] = &[
        (
            3,
            "",
            FORM,
            "key=ewr1-public&first_name=Verena&last_name=Example&number=4111111111111111&month=12&year=2030&cvv=123\
             &address1=123+Main+St.&city=San+Francisco&state=CA&postal_code=94105&country=US&phone=555-0100",
        ),
        (
            3,
            "",
            "application/x-www-form-urlencoded; charset=UTF-8",
            "key=k&number=5555-5555-5555-4444&month=2&year=31&cvv=12",
        ),
        (1, "key=k&cvv=1234", "", "number=378282246310005&month=01&year=2029&first_name=A&last_name=B"),
        (
            3,
            "",
            FORM,
            "key=k&routing_number=123456780&account_number=111111111&account_number_confirmation=111111111\
             &account_type=checking&name_on_account=Verena+Example&country=us",
        ),
        (3, "", FORM, "key=k&type=iban_bank_account&name_on_account=X&account_number=DE89370400440532013000"),
        (3, "", FORM, "key=k&number=4111111111111111&month=13&year=1999&country=ZZ&vat_number=%00"),
        (
            0,
            "key=k&_method=post&callback=rebill.callbacks.cb_1&number=4111111111111111&month=12&year=2030&cvv=123\
             &first_name=A&last_name=B",
            "",
            "",
        ),
        (0, "key=k&callback=alert(1)", "", ""),
        (0, "key=k&number=4111111111111111", "", ""),
        (3, "", "text/plain", "key=k"),
        (3, "key=k", FORM, &format!("first_name={}&key=other", "x".repeat(300))),
    ];
    calls
        .iter()
        .map(|(flags, query, content_type, body)| {
            [&[*flags][..], query.as_bytes(), b"\n", content_type.as_bytes(), b"\n", body.as_bytes()].concat()
        })
        .collect()
}

/// List queries: byte 0 the list endpoint (its index among the table's lists), then the query.
fn list_queries(schema: &rebill_schema::Schema) -> Vec<Vec<u8>> {
    let lists = schema.endpoints.iter().filter(|e| matches!(e.response, rebill_schema::ResponseBody::List(_)));
    let mut seeds = Vec::new();
    for (i, endpoint) in lists.enumerate() {
        let Ok(i) = u8::try_from(i) else { break };
        let filters: String = endpoint.filters.iter().map(|f| format!("&{f}=active")).collect();
        for query in [
            String::new(),
            "per_page=2&sort=updated_at&order=asc&begin_time=2024-01-31&end_time=2024-02-01T10:00:00%2B02:00"
                .to_owned(),
            format!("cursor=13049586720000000000000000042&per_page=200&order=desc{filters}"),
            format!("begin_time=2026-11-26+20:49:03+UTC&end_time=2026-11-26 20:49:03 +0100&sort=created_at{filters}"),
        ] {
            seeds.push([&[i][..], query.as_bytes()].concat());
        }
    }
    seeds
}

/// Standard base64 (the Authorization header of the seeds).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The ETag of `<ok/>`, the body the `protocol_headers` target answers a GET that passes the
/// layers (the first 32 hex digits of its BLAKE3 hash).
const OK_ETAG: &str = "\"01d67ae1ac8aaad35fde958e0507714f\"";

/// Request heads of every endpoint of the table, at the versions in turn, with the headers the
/// protocol layers read.
fn request_heads(schema: &rebill_schema::Schema) -> Vec<Vec<u8>> {
    let auth = base64(b"0123456789abcdef0123456789abcdef:");
    let accepts = ["application/xml", "text/html, application/xml;q=0.9", "application/pdf", "*/*"];
    let mut seeds = Vec::new();
    for (i, endpoint) in schema.endpoints.iter().enumerate() {
        let path =
            endpoint.path.split('/').map(|s| if s.starts_with('{') { "a1" } else { s }).collect::<Vec<_>>().join("/");
        let version =
            schema.versions.get(i % schema.versions.len().max(1)).map(ToString::to_string).unwrap_or_default();
        let method = endpoint.method.as_str();
        let accept = accepts[i % accepts.len()];
        let mut head = format!(
            "{method} {path}?per_page=2&state=active HTTP/1.1\r\nHost: api.rebill.test:8080\r\nAccept: {accept}\r\n\
             X-Api-Version: {version}\r\nAuthorization: Basic {auth}\r\n"
        );
        let body = match endpoint.request.as_deref() {
            Some(resource) if method != "GET" => format!("<{resource}></{resource}>"),
            _ => String::new(),
        };
        if body.is_empty() {
            head.push_str(&format!("If-None-Match: W/{OK_ETAG}, \"0\"\r\n\r\n"));
        } else {
            head.push_str(&format!(
                "Content-Type: application/xml; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ));
        }
        seeds.push(head.into_bytes());
    }
    for head in [
        "GET /v2/accounts HTTP/1.1\r\nAccept: application/xml\r\nIf-None-Match: *\r\n\r\n".to_owned(),
        format!("GET /v2/plans HTTP/1.1\r\nAccept: application/xml\r\nIf-None-Match: {OK_ETAG}\r\n\r\n"),
        "GET /v2/invoices/1001 HTTP/1.1\r\nAccept: application/pdf\r\nX-Api-Version: 2.3\r\n\r\n".to_owned(),
        "GET /v2/accounts HTTP/1.1\r\nAccept: application/xml\r\nX-Api-Version: 2.2\r\n\r\n".to_owned(),
        "GET /v2/accounts HTTP/1.1\r\nAccept: application/xml\r\nX-Api-Version: 3.0\r\n\r\n".to_owned(),
        "OPTIONS /js/v1/token?callback=cb HTTP/1.1\r\nAccept: application/xml\r\nOrigin: https://shop.example\r\n\
         Access-Control-Request-Headers: content-type\r\n\r\n"
            .to_owned(),
        "POST /v2/accounts HTTP/1.1\r\nAccept: application/xml\r\nContent-Type: text/xml; charset=latin1\r\n\
         Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            .to_owned(),
        "PUT /v2/accounts/a1 HTTP/1.1\r\nAccept: application/xml\r\nContent-Length: 99999999999\r\n\r\n".to_owned(),
        "GET /v2/accounts?cursor=1&email=a%40b&callback=x.y HTTP/1.1\r\nAccept: application/xml\r\nHost: \r\n\
         Authorization: basic Og==\r\n\r\n"
            .to_owned(),
    ] {
        seeds.push(head.into_bytes());
    }
    seeds
}

/// Inputs of the PDF target: an Accept-Language line, then bytes the document is built from
/// (a fixed pseudo-random sequence, so the seeds are the same on every rebuild).
fn invoice_inputs() -> Vec<Vec<u8>> {
    let languages = [
        "en-US",
        "de-DE,de;q=0.9,en;q=0.8",
        "fr-CA",
        "es-419;q=0.5, *;q=0.1",
        "Deutsch",
        "",
        "da, en-gb;q=0.8, en;q=0.7",
        "fr;q=0, es;q=1.000",
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    languages
        .iter()
        .enumerate()
        .map(|(i, language)| {
            let len = 128 << (i % 4);
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state.to_le_bytes()[0]
                })
                .collect();
            [language.as_bytes(), b"\n", &bytes].concat()
        })
        .collect()
}

/// Tags, attributes and values of the wire: every resource root and element (renamed ones too),
/// every enum value, and the XML constructs the reader treats specially.
fn xml_dictionary(schema: &rebill_schema::Schema) -> BTreeSet<String> {
    let mut words = BTreeSet::new();
    for resource in &schema.resources {
        words.insert(format!("<{}>", resource.root));
        words.insert(format!("</{}>", resource.root));
        for field in &resource.fields {
            for element in std::iter::once(&field.element).chain(field.renames.iter().map(|r| &r.element)) {
                words.insert(format!("<{element}>"));
                words.insert(format!("</{element}>"));
            }
            if let Some(attribute) = &field.attribute {
                words.insert(format!(" {attribute}=\""));
            }
        }
    }
    for def in &schema.enums {
        for value in &def.values {
            words.insert(value.value.clone());
            words.extend(value.renames.iter().map(|r| r.value.clone()));
        }
    }
    for special in [
        " nil=\"nil\"",
        " nil=\"true\"",
        " type=\"array\"",
        " type=\"integer\"",
        " type=\"boolean\"",
        " type=\"datetime\"",
        " type=\"date\"",
        " type=\"float\"",
        " type=\"decimal\"",
        " href=\"",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
        "<!DOCTYPE",
        "<![CDATA[",
        "]]>",
        "<!--",
        "-->",
        "&amp;",
        "&lt;",
        "&#x",
        "&#",
        "USD",
        "EUR",
        "true",
        "false",
        "2026-11-26T20:49:03Z",
        "2026-11-26 20:49:03 UTC",
        "+0100",
    ] {
        words.insert(special.to_owned());
    }
    words
}

/// List parameters, their values, and the endpoints' filters.
fn list_dictionary(schema: &rebill_schema::Schema) -> BTreeSet<String> {
    let mut words: BTreeSet<String> = [
        "per_page=",
        "cursor=",
        "sort=",
        "order=",
        "begin_time=",
        "end_time=",
        "created_at",
        "updated_at",
        "asc",
        "desc",
        "&",
        "%2B",
        "T00:00:00Z",
        " UTC",
    ]
    .iter()
    .map(|w| (*w).to_owned())
    .collect();
    for endpoint in &schema.endpoints {
        words.extend(endpoint.filters.iter().map(|f| format!("{f}=")));
        words.extend(endpoint.query.iter().map(|q| format!("{q}=")));
    }
    words
}

/// Header names and values the protocol layers read.
fn header_dictionary() -> BTreeSet<String> {
    [
        "\r\nAccept: ",
        "\r\nX-Api-Version: ",
        "\r\nAuthorization: Basic ",
        "\r\nIf-None-Match: ",
        "\r\nContent-Type: ",
        "\r\nContent-Length: ",
        "\r\nTransfer-Encoding: chunked",
        "\r\nHost: ",
        "\r\nAccess-Control-Request-Headers: ",
        "application/xml",
        "application/pdf",
        "charset=utf-8",
        ";q=0.5",
        "W/",
        "2.0",
        "2.11",
        "HTTP/1.1",
        "GET ",
        "HEAD ",
        "POST ",
        "PUT ",
        "DELETE ",
        "OPTIONS ",
        "/v2/",
    ]
    .iter()
    .map(|w| (*w).to_owned())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libfuzzer_final_stats_and_status_lines_are_read() {
        let mut stats = Stats::default();
        for line in [
            "#2097152\tpulse  cov: 2519 ft: 11873 corp: 1402/262Kb lim: 4096 exec/s: 21845 rss: 312Mb",
            "#3000000\tDONE   cov: 2520 ft: 11901 corp: 1410/265Kb lim: 4096 exec/s: 22000 rss: 313Mb",
            "stat::number_of_executed_units: 3000000",
            "stat::average_exec_per_sec:     22000",
            "stat::peak_rss_mb:              313",
            "Done 3000000 runs in 136 second(s)",
        ] {
            stats.read(line);
        }
        assert_eq!((stats.executions, stats.exec_per_second, stats.peak_rss_mb), (3_000_000, 22_000, 313));
        assert_eq!(stats.seconds, 136);
        assert_eq!((stats.coverage, stats.features, stats.corpus), (2520, 11_901, 1410));
    }

    #[test]
    fn snapshots_lose_their_header() {
        let snap = "---\nsource: tests/golden.rs\nexpression: out\n---\n<a>\n  <b/>\n</a>\n";
        assert_eq!(snapshot_body(snap), "<a>\n  <b/>\n</a>\n");
        assert_eq!(snapshot_body("no header"), "");
    }

    #[test]
    fn base64_and_dictionary_quoting() {
        assert_eq!(base64(b"key:"), "a2V5Og==");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
        assert_eq!(dict_escape("<a href=\"x\">\\\u{1}"), "<a href=\\\"x\\\">\\\\\\x01");
    }

    #[test]
    fn every_target_has_a_source_file() {
        let root = crate::workspace_root();
        for target in TARGETS {
            assert!(root.join("fuzz/fuzz_targets").join(format!("{}.rs", target.name)).is_file(), "{}", target.name);
        }
    }
}
