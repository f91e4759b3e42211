//! `cargo xtask regen [--check]`, `cargo xtask test`, `cargo xtask xml`,
//! `cargo xtask load-bench`, `cargo xtask renewal-bench`, `cargo xtask fuzz` and
//! `cargo xtask cluster up|down|status`.
//!
//! `regen` runs `rebill-codegen` over `schema/` (`--check` fails on any stale generated file);
//! `test` is the command CI runs; the others run `rebill-transcode` and the benchmarks of
//! `rebill-load-bench`. xtask depends on the schema loader and the generator only, never on
//! `rebill-models`, so that regen works while the generated code is broken.

mod cluster;
mod fuzz;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "rebill maintainer commands")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Regenerate the models and the client's endpoint methods from schema/ (with --check: fail
    /// if any generated file is stale).
    Regen {
        #[arg(long)]
        check: bool,
    },
    /// Run every check CI runs: generated-code drift, formatting, clippy, all tests and the fuzz
    /// smoke.
    Test,
    /// Rewrite one document of a resource from one API version to another (the arguments of
    /// `rebill-transcode`: --resource NAME --from A --to B [--features F] [--base-url U] [FILE]).
    Xml {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Load benchmark (needs `wrk`): the release service against a bare axum handler serving the
    /// same bytes, new accounts, subscriptions with tokens, peak RSS (arguments of
    /// `rebill-load-bench`: [--database URL] [--duration 10s] [--connections 32]
    /// [--processes 1]). Figures go into docs/benchmarks.md by hand.
    LoadBench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Renewal benchmark: renewals per second with every subscription of a sandbox site due at
    /// once, on SQLite and PostgreSQL (arguments of `renewal-bench`: [--subscriptions 100000]
    /// [--backend sqlite|postgres|both] [--keep]). Figures go into docs/benchmarks.md by hand.
    RenewalBench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Soak: the release service under mixed traffic at its site's rate limit (reads, writes,
    /// subscriptions with tokens, refunds, renewals through the sandbox clock, webhooks to a
    /// local receiver); fails on any 5xx or when its RSS or open file descriptors grow (arguments
    /// of `soak`: [--minutes 10 | --seconds N] [--database URL] [--rate-limit 3000], `--help` for
    /// the rest). Figures go into docs/benchmarks.md by hand.
    Soak {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Fuzz targets under libFuzzer: `--smoke` runs each for a short time (CI); `TARGET [--runs
    /// N] [--seconds S]` runs one; `seed` rebuilds the seed corpus and dictionaries
    /// (docs/fuzzing.md).
    Fuzz(fuzz::FuzzArgs),
    /// A local PostgreSQL high-availability cluster (etcd, Patroni, HAProxy, pgBouncer) under
    /// <target>/cluster/: `up`, `down`, `status` (docs/deploy.md).
    Cluster(cluster::ClusterArgs),
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Regen { check } => regen(check),
        Command::Test => test(),
        Command::Xml { args } => xml(&args),
        Command::LoadBench { args } => load_bench(&args),
        Command::RenewalBench { args } => renewal_bench(&args),
        Command::Soak { args } => soak(&args),
        Command::Fuzz(args) => fuzz::run(&args, &workspace_root()),
        Command::Cluster(args) => cluster::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn regen(check: bool) -> anyhow::Result<()> {
    let root = workspace_root();
    let schema = rebill_schema::load_dir(&root.join("schema"))?;
    let files = rebill_codegen::generate(&schema)?;
    if check {
        let stale = rebill_codegen::stale_files(&root, &files);
        if !stale.is_empty() {
            anyhow::bail!("{}", rebill_codegen::stale_message(&stale));
        }
        println!("generated files are up to date ({} files)", files.len());
    } else {
        let changed = rebill_codegen::write(&root, &files)?;
        for path in &changed {
            println!("wrote {}", path.display());
        }
        println!("{} generated files, {} changed", files.len(), changed.len());
    }
    Ok(())
}

/// The README's test command: every step must pass, none is skipped. Ends with one
/// `N passed, N failed` line summing every test binary's results.
fn test() -> anyhow::Result<()> {
    regen(true)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let run = |args: &[&str]| -> anyhow::Result<std::process::Command> {
        println!("==> cargo {}", args.join(" "));
        let mut cmd = std::process::Command::new(&cargo);
        cmd.current_dir(workspace_root()).args(args);
        Ok(cmd)
    };
    for step in [
        &["fmt", "--all", "--check"][..],
        &["clippy", "--workspace", "--all-targets", "--all-features", "--", "-D", "warnings"],
    ] {
        if !run(step)?.status()?.success() {
            anyhow::bail!("`cargo {}` failed", step.join(" "));
        }
    }
    // The client-side library's browser tests (a Rust test that drives headless Chromium) need
    // Chromium and playwright-core: installed here when missing, and a failure fails the run.
    let js = workspace_root().join("crates/rebill-server/js");
    println!("==> bash crates/rebill-server/js/test/setup.sh");
    if !std::process::Command::new("bash").arg(js.join("test/setup.sh")).status()?.success() {
        anyhow::bail!("installing the browser test prerequisites failed (crates/rebill-server/js/test/setup.sh)");
    }
    let mut child = run(&["test", "--workspace", "--all-features"])?.stdout(std::process::Stdio::piped()).spawn()?;
    let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout from cargo test"))?;
    let (mut passed, mut failed) = (0u64, 0u64);
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let line = line?;
        println!("{line}");
        if let Some(result) = line.strip_prefix("test result: ") {
            passed += count(result, " passed");
            failed += count(result, " failed");
        }
    }
    let ok = child.wait()?.success();
    // The library's pure parts under Node's own test runner.
    let (js_passed, js_failed, js_ok) = node_unit_tests(&js)?;
    passed += js_passed;
    failed += js_failed;
    println!("{passed} passed, {failed} failed");
    if !ok || failed > 0 {
        anyhow::bail!("`cargo test` failed");
    }
    if !js_ok || js_passed == 0 {
        anyhow::bail!("`node --test` of the client-side library failed or ran no test");
    }
    if passed == 0 {
        anyhow::bail!("`cargo test` ran no test");
    }
    // Every fuzz target for a short time over its seed corpus: a crash, timeout or
    // out-of-memory fails the run.
    fuzz::smoke(&workspace_root())
}

/// Runs `node --test` over the library's unit tests (`js/test/unit/*.test.js`), echoing its
/// report; answers (passed, failed, whether node succeeded).
fn node_unit_tests(js: &std::path::Path) -> anyhow::Result<(u64, u64, bool)> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(js.join("test/unit"))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".test.js"))
        .collect();
    files.sort();
    println!("==> node --test crates/rebill-server/js/test/unit");
    let out = std::process::Command::new("node").arg("--test").args(&files).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    let total = |label: &str| {
        stdout.lines().find_map(|l| l.strip_prefix(label)).and_then(|n| n.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    Ok((total("# pass "), total("# fail "), out.status.success()))
}

/// The number before `label` in a `test result:` line (`ok. 12 passed; 0 failed; …`).
fn count(result: &str, label: &str) -> u64 {
    result
        .split(';')
        .find_map(|part| {
            part.trim().trim_start_matches("ok. ").trim_start_matches("FAILED. ").strip_suffix(label.trim_start())
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Runs the `rebill-transcode` binary, which links the generated models. It lives in its own
/// crate so that `regen` never depends on the code it generates.
fn xml(args: &[String]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    // A relative file argument is meant from the caller's directory, not the workspace root.
    let args: Vec<String> = args
        .iter()
        .map(|a| match std::path::absolute(a) {
            Ok(path) if !a.starts_with('-') && path.is_file() => path.display().to_string(),
            _ => a.clone(),
        })
        .collect();
    let status = std::process::Command::new(cargo)
        .current_dir(workspace_root())
        .args(["run", "--quiet", "--release", "--package", "rebill-transcode", "--"])
        .args(&args)
        .status()?;
    if !status.success() {
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}

/// Builds the release binaries and runs the load benchmark from the target directory cargo
/// uses (`CARGO_TARGET_DIR`, `build.target-dir`, or `target/`), as `cargo metadata` reports it.
fn load_bench(args: &[String]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let build = std::process::Command::new(&cargo)
        .current_dir(workspace_root())
        .args(["build", "--release", "-p", "rebill-cli", "-p", "rebill-load-bench"])
        .status()
        .with_context(|| format!("running `{cargo} build`"))?;
    if !build.success() {
        anyhow::bail!("release build failed");
    }
    let release = target_dir(&cargo)?.join("release");
    let bench = release.join("rebill-load-bench");
    for binary in [&bench, &release.join("rebill"), &release.join("bare-axum")] {
        if !binary.is_file() {
            anyhow::bail!(
                "{} is missing after the release build (release directory {} from `cargo metadata`)",
                binary.display(),
                release.display()
            );
        }
    }
    let status = std::process::Command::new(&bench)
        .current_dir(workspace_root())
        .env("REBILL_BENCH_BINARIES", &release)
        .args(args)
        .status()
        .with_context(|| format!("running {}", bench.display()))?;
    if !status.success() {
        anyhow::bail!("the load benchmark failed");
    }
    Ok(())
}

/// The target directory of the workspace, from `cargo metadata`.
fn target_dir(cargo: &str) -> anyhow::Result<PathBuf> {
    let out = std::process::Command::new(cargo)
        .current_dir(workspace_root())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .with_context(|| format!("running `{cargo} metadata`"))?;
    if !out.status.success() {
        anyhow::bail!("`cargo metadata` failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    json_string(&text, "target_directory")
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("`cargo metadata` printed no target_directory"))
}

/// The string value of the first `"key":"…"` in a JSON document (escapes decoded).
fn json_string(json: &str, key: &str) -> Option<String> {
    let start = json.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = json[start..].trim_start().strip_prefix('"')?;
    let mut value = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(value),
            '\\' => match chars.next()? {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                'u' => {
                    let code: String = chars.by_ref().take(4).collect();
                    value.push(char::from_u32(u32::from_str_radix(&code, 16).ok()?)?);
                }
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

/// Builds the renewal benchmark in release mode and runs it.
fn renewal_bench(args: &[String]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = std::process::Command::new(cargo)
        .current_dir(workspace_root())
        .args(["run", "--quiet", "--release", "--package", "rebill-load-bench", "--bin", "renewal-bench", "--"])
        .args(args)
        .status()?;
    if !status.success() {
        anyhow::bail!("the renewal benchmark failed");
    }
    Ok(())
}

/// Builds the release `rebill` and `soak` and runs the soak from the target directory cargo
/// uses, as `cargo metadata` reports it.
fn soak(args: &[String]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let build = std::process::Command::new(&cargo)
        .current_dir(workspace_root())
        .args(["build", "--release", "-p", "rebill-cli", "--bin", "rebill", "-p", "rebill-load-bench", "--bin", "soak"])
        .status()
        .with_context(|| format!("running `{cargo} build`"))?;
    if !build.success() {
        anyhow::bail!("release build failed");
    }
    let release = target_dir(&cargo)?.join("release");
    let driver = release.join("soak");
    let status = std::process::Command::new(&driver)
        .current_dir(workspace_root())
        .env("REBILL_BENCH_BINARIES", &release)
        .args(args)
        .status()
        .with_context(|| format!("running {}", driver.display()))?;
    if !status.success() {
        anyhow::bail!("the soak failed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::json_string;

    #[test]
    fn strings_from_cargo_metadata() {
        let json = r#"{"packages":[],"target_directory":"/work/my \"target\"\\dir","version":1}"#;
        assert_eq!(json_string(json, "target_directory").as_deref(), Some(r#"/work/my "target"\dir"#));
        assert_eq!(json_string(r#"{"target_directory": "/t"}"#, "target_directory").as_deref(), Some("/t"));
        assert_eq!(json_string(r#"{"other":"x"}"#, "target_directory"), None);
    }
}
