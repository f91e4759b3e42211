//! Processes: starting a server and reading what it printed up to `listening on`, running the
//! `rebill` command line, finding the release binaries, and reading a process's resident set and
//! open file descriptors from `/proc`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

/// A child process killed (and reaped) when dropped.
pub struct Running(pub Child);

impl Running {
    /// The process id.
    pub fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a server and returns it with the lines it printed up to `listening on http://ADDR`,
/// and `ADDR`. Its stdout is read to the end by a thread of its own; its stderr goes where the
/// command says (inherited unless set).
pub fn spawn(command: &mut Command) -> anyhow::Result<(Running, Vec<String>, String)> {
    let mut child = command.stdout(Stdio::piped()).spawn().context("starting a server")?;
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

/// Runs `rebill --database DATABASE ARGS…` and answers its stdout.
pub fn rebill_cli(rebill: &Path, database: &str, args: &[&str]) -> anyhow::Result<String> {
    rebill_cli_with(rebill, database, &[], args)
}

/// [`rebill_cli`] with extra environment variables (e.g. `REBILL_VAULT_KEY_FILE`).
pub fn rebill_cli_with(rebill: &Path, database: &str, env: &[(&str, &str)], args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(rebill)
        .args(["--database", database])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .with_context(|| format!("running {}", rebill.display()))?;
    if !out.status.success() {
        bail!("rebill {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// A release binary: in `REBILL_BENCH_BINARIES` (set by `cargo xtask load-bench` and `cargo
/// xtask soak`), or else beside this benchmark's own executable (the same target directory).
pub fn release_binary(name: &str) -> PathBuf {
    let dir = std::env::var_os("REBILL_BENCH_BINARIES")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok().and_then(|exe| exe.parent().map(Path::to_path_buf)));
    dir.unwrap_or_else(|| PathBuf::from("target/release")).join(name)
}

/// A `kB` line of `/proc/PID/status` (`VmHWM`, `VmRSS`) in bytes.
fn status_bytes(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|rest| rest.strip_prefix(':')))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("{field} of process {pid}"))?;
    Ok(kib * 1024)
}

/// `VmHWM` (peak resident set) of a process in bytes.
pub fn peak_rss(pid: u32) -> anyhow::Result<u64> {
    status_bytes(pid, "VmHWM")
}

/// `VmRSS` (resident set now) of a process in bytes.
pub fn rss(pid: u32) -> anyhow::Result<u64> {
    status_bytes(pid, "VmRSS")
}

/// `RssAnon` (heap and other anonymous memory) and `RssFile` (pages of mapped files: the
/// binary, libraries) of a process in bytes.
pub fn rss_parts(pid: u32) -> anyhow::Result<(u64, u64)> {
    Ok((status_bytes(pid, "RssAnon")?, status_bytes(pid, "RssFile")?))
}

/// The number of file descriptors the process has open (the entries of `/proc/PID/fd`).
pub fn open_fds(pid: u32) -> anyhow::Result<usize> {
    let entries = std::fs::read_dir(format!("/proc/{pid}/fd")).with_context(|| format!("/proc/{pid}/fd"))?;
    Ok(entries.count())
}
