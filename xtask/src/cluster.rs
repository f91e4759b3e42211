//! `cargo xtask cluster up|down|status`: a PostgreSQL 15 high-availability cluster on this
//! machine, from Debian's packages, for running rebill through poolers and for failover drills.
//!
//! `up` installs what is missing (`apt-get`), then starts one etcd, two (or three) PostgreSQL
//! servers under Patroni with synchronous replication, HAProxy routing to the current primary by
//! Patroni's `/primary` health check, and pgBouncer in transaction pooling mode in front of
//! HAProxy — each on ports of its own (from `--port-base`, default [`DEFAULT_PORT_BASE`]), with
//! its data, configuration and log under `<target>/cluster/`, and, when run as root, as the
//! `postgres` OS user. It waits until a primary is elected, a synchronous standby streams, and
//! a write succeeds through HAProxy and through pgBouncer, then prints the connection URLs and
//! writes them to `<target>/cluster/urls.env` (shell syntax, `set -a; . urls.env`). Run again,
//! it starts only what is not running and prints the URLs. `down` stops every process it
//! started (by the process ids it recorded) and removes `<target>/cluster/`; `status` prints
//! what runs and `patronictl list`.
//!
//! The configuration templates are `deploy/*`: `{{NAME}}` placeholders are filled in here.
//! Topology, settings and measured failover times: `docs/deploy.md`.

use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

/// The first of the cluster's ports (see [`Layout`] for the rest).
pub(crate) const DEFAULT_PORT_BASE: u16 = 25400;

/// PostgreSQL 15's programs (Debian's layout).
const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// The programs the cluster runs, and the Debian package of each.
const PROGRAMS: &[(&str, &str)] = &[
    ("/usr/bin/etcd", "etcd-server"),
    ("/usr/bin/patroni", "patroni"),
    ("/usr/bin/patronictl", "patroni"),
    ("/usr/sbin/haproxy", "haproxy"),
    ("/usr/sbin/pgbouncer", "pgbouncer"),
    ("/usr/lib/postgresql/15/bin/postgres", "postgresql-15"),
    ("/usr/lib/postgresql/15/bin/psql", "postgresql-client-15"),
];

/// The application's role and database, created on the primary by `up`.
const APP_USER: &str = "rebill";
const APP_DATABASE: &str = "rebill";

#[derive(Args)]
pub(crate) struct ClusterArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Start the cluster (installing missing Debian packages), wait until it takes writes, print
    /// its URLs and write them to <target>/cluster/urls.env. Starts only what is not running.
    Up {
        /// PostgreSQL servers under Patroni (2 or 3); fixed once the cluster exists.
        #[arg(long, value_parser = clap::value_parser!(u8).range(2..=3))]
        nodes: Option<u8>,
        /// The first of the cluster's ports (the cluster uses this one up to +23); fixed once the
        /// cluster exists.
        #[arg(long)]
        port_base: Option<u16>,
    },
    /// Stop every process of the cluster and remove <target>/cluster/ (data and logs).
    Down,
    /// Print which processes run, `patronictl list` and the URLs; fails if a process is down.
    Status,
}

/// Runs `cargo xtask cluster …`.
pub(crate) fn run(args: &ClusterArgs) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let root = crate::target_dir(&cargo)?.join("cluster");
    match &args.action {
        Action::Up { nodes, port_base } => up(&root, *nodes, *port_base),
        Action::Down => down(&root),
        Action::Status => status(&root),
    }
}

// ---------------------------------------------------------------------------------------------
// Layout: ports, paths, passwords

/// Where everything of one cluster is: its ports (from one base), its paths under `root`, and
/// its generated passwords. Kept in `root/cluster.env` so that `down`, `status` and a second
/// `up` find the same cluster.
struct Layout {
    root: PathBuf,
    nodes: u8,
    base: u16,
    superuser_password: String,
    replication_password: String,
    rewind_password: String,
    app_password: String,
}

impl Layout {
    fn etcd_client(&self) -> u16 {
        self.base
    }
    fn etcd_peer(&self) -> u16 {
        self.base + 1
    }
    fn haproxy_primary(&self) -> u16 {
        self.base + 2
    }
    fn haproxy_replicas(&self) -> u16 {
        self.base + 3
    }
    fn haproxy_stats(&self) -> u16 {
        self.base + 4
    }
    fn pgbouncer(&self) -> u16 {
        self.base + 5
    }
    /// PostgreSQL's port of node `i` (1-based).
    fn pg(&self, i: u8) -> u16 {
        self.base + 10 + u16::from(i)
    }
    /// Patroni's REST port of node `i` (1-based).
    fn rest(&self, i: u8) -> u16 {
        self.base + 20 + u16::from(i)
    }
    fn node_names(&self) -> impl Iterator<Item = (u8, String)> {
        (1..=self.nodes).map(|i| (i, format!("node{i}")))
    }
    fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }
    fn pid_file(&self, component: &str) -> PathBuf {
        self.run_dir().join(format!("{component}.pid"))
    }
    fn node_dir(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
    fn data_dir(&self, name: &str) -> PathBuf {
        self.node_dir(name).join("data")
    }
    fn patroni_config(&self, name: &str) -> PathBuf {
        self.node_dir(name).join("patroni.yml")
    }
    fn state_file(root: &Path) -> PathBuf {
        root.join("cluster.env")
    }

    fn url(&self, user: &str, password: &str, port: u16, database: &str) -> String {
        format!("postgres://{user}:{password}@127.0.0.1:{port}/{database}")
    }
    fn admin_url(&self, port: u16) -> String {
        self.url("postgres", &self.superuser_password, port, "postgres")
    }
    fn app_url(&self, port: u16) -> String {
        self.url(APP_USER, &self.app_password, port, APP_DATABASE)
    }

    /// A new layout with fresh passwords.
    fn new(root: &Path, nodes: u8, base: u16) -> anyhow::Result<Self> {
        if base.checked_add(30).is_none() {
            bail!("--port-base {base} is too high: the cluster uses the 30 ports from it");
        }
        Ok(Self {
            root: root.to_owned(),
            nodes,
            base,
            superuser_password: random_hex()?,
            replication_password: random_hex()?,
            rewind_password: random_hex()?,
            app_password: random_hex()?,
        })
    }

    /// The layout of the cluster under `root`, if one was set up.
    fn load(root: &Path) -> anyhow::Result<Option<Self>> {
        let path = Self::state_file(root);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let get = |key: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
                .map(str::to_owned)
                .with_context(|| format!("{} has no {key}", path.display()))
        };
        Ok(Some(Self {
            root: root.to_owned(),
            nodes: get("NODES")?.parse().context("NODES")?,
            base: get("PORT_BASE")?.parse().context("PORT_BASE")?,
            superuser_password: get("SUPERUSER_PASSWORD")?,
            replication_password: get("REPLICATION_PASSWORD")?,
            rewind_password: get("REWIND_PASSWORD")?,
            app_password: get("APP_PASSWORD")?,
        }))
    }

    fn save(&self) -> anyhow::Result<()> {
        let text = format!(
            "# The cluster's layout and passwords (cargo xtask cluster); removed by `down`.\n\
             NODES={}\nPORT_BASE={}\nSUPERUSER_PASSWORD={}\nREPLICATION_PASSWORD={}\nREWIND_PASSWORD={}\nAPP_PASSWORD={}\n",
            self.nodes,
            self.base,
            self.superuser_password,
            self.replication_password,
            self.rewind_password,
            self.app_password
        );
        write_private(&Self::state_file(&self.root), &text)
    }
}

/// 16 random bytes from the kernel as hex: a password safe in URLs and configuration files.
fn random_hex() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).context("reading /dev/urandom")?;
    Ok(bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    }))
}

/// Writes `text` to `path`, readable by its owner only (it holds passwords).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// The OS user the servers run as

/// Who the cluster's processes run as: the `postgres` OS user when this runs as root
/// (PostgreSQL refuses to run as root), otherwise the current user.
#[derive(Clone, Copy)]
struct RunAs {
    ids: Option<(u32, u32)>,
}

impl RunAs {
    fn detect() -> anyhow::Result<Self> {
        if output("id", &["-u"])?.trim() != "0" {
            return Ok(Self { ids: None });
        }
        let uid = output("id", &["-u", "postgres"]).context("the postgres OS user (from the postgresql-15 package)")?;
        let gid = output("id", &["-g", "postgres"])?;
        Ok(Self { ids: Some((uid.trim().parse()?, gid.trim().parse()?)) })
    }

    fn is_root(self) -> bool {
        self.ids.is_some()
    }

    /// Gives `path` (and everything under it) to the user the servers run as.
    fn own(self, path: &Path) -> anyhow::Result<()> {
        if let Some((uid, gid)) = self.ids {
            let status = Command::new("chown").arg("-R").arg(format!("{uid}:{gid}")).arg(path).status()?;
            if !status.success() {
                bail!("chown -R postgres {} failed", path.display());
            }
        }
        Ok(())
    }

    /// `command` to run as the servers' user, in a process group of its own, with none of the
    /// caller's libpq or Python settings.
    fn command(self, program: &str, dir: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(dir).process_group(0).stdin(Stdio::null());
        for var in ["PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSERVICE", "PYTHONPATH", "PYTHONHOME"] {
            cmd.env_remove(var);
        }
        if let Some((uid, gid)) = self.ids {
            cmd.uid(uid).gid(gid).env("HOME", dir).env("USER", "postgres").env("LOGNAME", "postgres");
        }
        cmd
    }
}

/// The trimmed stdout of `program args`, or an error with its stderr.
fn output(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program).args(args).output().with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!("`{program} {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

// ---------------------------------------------------------------------------------------------
// Packages

/// Installs the Debian packages of every missing program (as root, non-interactively).
fn ensure_packages(run_as: RunAs) -> anyhow::Result<()> {
    let mut missing: Vec<&str> =
        PROGRAMS.iter().filter(|(program, _)| !Path::new(program).exists()).map(|(_, package)| *package).collect();
    missing.dedup();
    if missing.is_empty() {
        return Ok(());
    }
    let command = format!("apt-get install -y {}", missing.join(" "));
    if !run_as.is_root() {
        bail!("missing Debian packages: {} (install them as root: `{command}`)", missing.join(", "));
    }
    println!("==> {command}");
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map(|s| s.success())
    };
    if install().context("running apt-get")? {
        return Ok(());
    }
    // A stale package list is the usual reason: refresh it once and try again.
    println!("==> apt-get update");
    let updated = Command::new("apt-get").args(["update", "-q"]).status().map(|s| s.success()).unwrap_or(false);
    if updated && install().context("running apt-get")? {
        return Ok(());
    }
    bail!(
        "installing the cluster's Debian packages failed (`{command}`, DEBIAN_FRONTEND=noninteractive); see apt-get's output above"
    )
}

// ---------------------------------------------------------------------------------------------
// Configuration files from deploy/

/// `deploy/<template>` with every `{{KEY}}` replaced; a placeholder left over is an error.
fn render(template: &str, values: &[(&str, String)]) -> anyhow::Result<String> {
    let path = crate::workspace_root().join("deploy").join(template);
    let mut text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    for (key, value) in values {
        text = text.replace(&format!("{{{{{key}}}}}"), value);
    }
    if let Some(at) = text.find("{{") {
        let name: String = text[at..].chars().take_while(|c| *c != '}').collect();
        bail!("{}: no value for the placeholder {name}}}}}", path.display());
    }
    Ok(text)
}

/// Writes every configuration file of the cluster from the templates in `deploy/`.
fn write_configs(layout: &Layout) -> anyhow::Result<()> {
    let path = |p: PathBuf| p.display().to_string();
    let etcd = render(
        "etcd.yml",
        &[
            ("ETCD_DATA", path(layout.root.join("etcd/data"))),
            ("ETCD_CLIENT_PORT", layout.etcd_client().to_string()),
            ("ETCD_PEER_PORT", layout.etcd_peer().to_string()),
        ],
    )?;
    write_private(&layout.root.join("etcd/etcd.yml"), &etcd)?;

    for (i, name) in layout.node_names() {
        let patroni = render(
            "patroni.yml",
            &[
                ("NODE_NAME", name.clone()),
                ("REST_PORT", layout.rest(i).to_string()),
                ("ETCD_CLIENT_PORT", layout.etcd_client().to_string()),
                ("PG_PORT", layout.pg(i).to_string()),
                ("DATA_DIR", path(layout.data_dir(&name))),
                ("NODE_DIR", path(layout.node_dir(&name))),
                ("RUN_DIR", path(layout.run_dir())),
                ("LOG_DIR", path(layout.logs())),
                ("SUPERUSER_PASSWORD", layout.superuser_password.clone()),
                ("REPLICATION_PASSWORD", layout.replication_password.clone()),
                ("REWIND_PASSWORD", layout.rewind_password.clone()),
            ],
        )?;
        write_private(&layout.patroni_config(&name), &patroni)?;
    }

    let servers = |rest_check: bool| {
        layout
            .node_names()
            .map(|(i, name)| {
                let check = if rest_check { format!(" check port {}", layout.rest(i)) } else { String::new() };
                format!("    server {name} 127.0.0.1:{}{check}", layout.pg(i))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let haproxy = render(
        "haproxy.cfg",
        &[
            ("RUN_DIR", path(layout.run_dir())),
            ("HAPROXY_PRIMARY_PORT", layout.haproxy_primary().to_string()),
            ("HAPROXY_REPLICA_PORT", layout.haproxy_replicas().to_string()),
            ("HAPROXY_STATS_PORT", layout.haproxy_stats().to_string()),
            ("PRIMARY_SERVERS", servers(true)),
            ("REPLICA_SERVERS", servers(true)),
        ],
    )?;
    write_private(&layout.root.join("haproxy/haproxy.cfg"), &haproxy)?;

    let userlist = layout.root.join("pgbouncer/userlist.txt");
    let pgbouncer = render(
        "pgbouncer.ini",
        &[
            ("HAPROXY_PRIMARY_PORT", layout.haproxy_primary().to_string()),
            ("PGBOUNCER_PORT", layout.pgbouncer().to_string()),
            ("RUN_DIR", path(layout.run_dir())),
            ("PGBOUNCER_USERLIST", path(userlist.clone())),
        ],
    )?;
    write_private(&layout.root.join("pgbouncer/pgbouncer.ini"), &pgbouncer)?;
    write_private(
        &userlist,
        &format!("\"postgres\" \"{}\"\n\"{APP_USER}\" \"{}\"\n", layout.superuser_password, layout.app_password),
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Processes

/// One long-running process of the cluster: its name (pid file and log), the program, the
/// arguments, the directory it runs in, the ports it listens on, and those of them that must be
/// free before it starts (not PostgreSQL's port under Patroni: a Patroni started again takes
/// over a postmaster its killed predecessor left running).
struct Component {
    name: String,
    program: &'static str,
    args: Vec<String>,
    dir: PathBuf,
    ports: Vec<u16>,
    free_ports: Vec<u16>,
}

fn components(layout: &Layout) -> Vec<Component> {
    let file = |p: PathBuf| p.display().to_string();
    let mut all = vec![Component {
        name: "etcd".into(),
        program: "/usr/bin/etcd",
        args: vec!["--config-file".into(), file(layout.root.join("etcd/etcd.yml"))],
        dir: layout.root.join("etcd"),
        ports: vec![layout.etcd_client(), layout.etcd_peer()],
        free_ports: vec![layout.etcd_client(), layout.etcd_peer()],
    }];
    for (i, name) in layout.node_names() {
        all.push(Component {
            name: name.clone(),
            program: "/usr/bin/patroni",
            args: vec![file(layout.patroni_config(&name))],
            dir: layout.node_dir(&name),
            ports: vec![layout.pg(i), layout.rest(i)],
            free_ports: vec![layout.rest(i)],
        });
    }
    all.push(Component {
        name: "haproxy".into(),
        program: "/usr/sbin/haproxy",
        args: vec!["-db".into(), "-f".into(), file(layout.root.join("haproxy/haproxy.cfg"))],
        dir: layout.root.join("haproxy"),
        ports: vec![layout.haproxy_primary(), layout.haproxy_replicas(), layout.haproxy_stats()],
        free_ports: vec![layout.haproxy_primary(), layout.haproxy_replicas(), layout.haproxy_stats()],
    });
    all.push(Component {
        name: "pgbouncer".into(),
        program: "/usr/sbin/pgbouncer",
        args: vec![file(layout.root.join("pgbouncer/pgbouncer.ini"))],
        dir: layout.root.join("pgbouncer"),
        ports: vec![layout.pgbouncer()],
        free_ports: vec![layout.pgbouncer()],
    });
    all
}

/// The process id recorded for `component`, if that process still runs that program.
fn running_pid(layout: &Layout, component: &Component) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(layout.pid_file(&component.name)).ok()?.trim().parse().ok()?;
    alive(pid, component.program).then_some(pid)
}

/// Whether process `pid` runs (not a zombie) and its command line mentions `program` (so a
/// recycled process id is never taken for the cluster's process).
fn alive(pid: u32, program: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state follows the command name in parentheses: `pid (comm) S …`.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    if matches!(state, Some("Z" | "X") | None) {
        return false;
    }
    let base = Path::new(program).file_name().and_then(|n| n.to_str()).unwrap_or(program);
    std::fs::read(format!("/proc/{pid}/cmdline")).map(|c| String::from_utf8_lossy(&c).contains(base)).unwrap_or(false)
}

/// Starts `component` in the background, its output appended to its log, and records its pid.
fn start(layout: &Layout, run_as: RunAs, component: &Component) -> anyhow::Result<u32> {
    for port in &component.free_ports {
        if TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, *port))).is_err() {
            bail!(
                "port {port} (for {}) is taken by another process; choose other ports with `cluster down` and `cluster up --port-base N`",
                component.name
            );
        }
    }
    let log_path = layout.logs().join(format!("{}.log", component.name));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    let child = run_as
        .command(component.program, &component.dir)
        .args(&component.args)
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {}", component.program))?;
    let pid = child.id();
    std::fs::write(layout.pid_file(&component.name), format!("{pid}\n"))?;
    Ok(pid)
}

/// Sends `signal` (a `kill` signal name) to `pid`.
fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).stderr(Stdio::null()).status();
}

/// Stops process `pid` (running `program`): `signal` first, then SIGKILL after `grace`.
fn stop_pid(pid: u32, program: &str, first: &str, grace: Duration) -> bool {
    if !alive(pid, program) {
        return false;
    }
    signal(pid, first);
    let started = Instant::now();
    while alive(pid, program) {
        if started.elapsed() > grace {
            println!("    {program} ({pid}) still runs after {}s: SIGKILL", grace.as_secs());
            signal(pid, "KILL");
            std::thread::sleep(Duration::from_millis(200));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

// ---------------------------------------------------------------------------------------------
// Checks over HTTP and SQL

/// `GET path` on 127.0.0.1:`port` (HTTP/1.0): the status and the body, or `None` if nothing
/// answered.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes()).ok()?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).ok()?;
    let reply = String::from_utf8_lossy(&reply);
    let status = reply.split_whitespace().nth(1)?.parse().ok()?;
    let body = reply.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Some((status, body))
}

/// Runs `sql` with psql on `url`; answers its unaligned output.
fn psql(url: &str, sql: &str) -> anyhow::Result<String> {
    let out = Command::new(format!("{PG_BIN}/psql"))
        .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .env("PGCONNECT_TIMEOUT", "3")
        .env_remove("PGPASSWORD")
        .env_remove("PGSERVICE")
        .output()
        .context("running psql")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Polls `check` every 250 ms until it answers `Ok(Some(_))`, for at most `timeout`; the last
/// error (or `what`) is the error.
fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let started = Instant::now();
    let mut last = None;
    loop {
        match check() {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last = Some(e),
        }
        if started.elapsed() > timeout {
            return Err(match last {
                Some(e) => e.context(format!("timed out after {}s waiting for {what}", timeout.as_secs())),
                None => anyhow::anyhow!("timed out after {}s waiting for {what}", timeout.as_secs()),
            });
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The node whose Patroni answers `/primary` with 200, if any.
fn current_primary(layout: &Layout) -> Option<(u8, String)> {
    layout.node_names().find(|(i, _)| matches!(http_get(layout.rest(*i), "/primary"), Some((200, _))))
}

/// The members' roles and states from Patroni's `/cluster` on any node that answers:
/// `(name, role, state)` (role `leader`, `sync_standby` or `replica`).
fn members(layout: &Layout) -> Option<Vec<(String, String, String)>> {
    let body = layout.node_names().find_map(|(i, _)| match http_get(layout.rest(i), "/cluster") {
        Some((200, body)) => Some(body),
        _ => None,
    })?;
    // One `{"name": …, "role": …, "state": …, …}` object per member inside `"members": [ … ]`.
    let list = body.split_once("\"members\"")?.1;
    let mut members = Vec::new();
    for object in list.split('{').skip(1) {
        let (Some(name), Some(role), Some(state)) =
            (json_field(object, "name"), json_field(object, "role"), json_field(object, "state"))
        else {
            continue;
        };
        members.push((name, role, state));
    }
    Some(members)
}

/// The string value of `"key": "…"` in a flat JSON object's text.
fn json_field(object: &str, key: &str) -> Option<String> {
    let rest = object.split_once(&format!("\"{key}\""))?.1.trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_owned())
}

/// A committed write on `url` (a table of its own in the `postgres` database).
fn probe_write(url: &str) -> anyhow::Result<()> {
    psql(
        url,
        "CREATE TABLE IF NOT EXISTS cluster_probe (at timestamptz NOT NULL DEFAULT now()); \
         INSERT INTO cluster_probe DEFAULT VALUES",
    )
    .map(drop)
}

// ---------------------------------------------------------------------------------------------
// up, down, status

fn up(root: &Path, nodes: Option<u8>, port_base: Option<u16>) -> anyhow::Result<()> {
    let run_as = RunAs::detect()?;
    ensure_packages(run_as)?;

    let layout = match Layout::load(root)? {
        Some(layout) => {
            if nodes.is_some_and(|n| n != layout.nodes) || port_base.is_some_and(|b| b != layout.base) {
                bail!(
                    "a cluster of {} nodes on ports from {} exists in {}: `cargo xtask cluster down` first to change them",
                    layout.nodes,
                    layout.base,
                    root.display()
                );
            }
            layout
        }
        None => {
            let layout = Layout::new(root, nodes.unwrap_or(2), port_base.unwrap_or(DEFAULT_PORT_BASE))?;
            std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
            layout.save()?;
            layout
        }
    };

    for dir in ["etcd", "haproxy", "pgbouncer", "logs", "run"] {
        std::fs::create_dir_all(root.join(dir))?;
    }
    for (_, name) in layout.node_names() {
        std::fs::create_dir_all(layout.node_dir(&name))?;
    }
    {
        use std::os::unix::fs::PermissionsExt;
        // The Unix sockets (PostgreSQL trusts local connections) are reachable by their owner only.
        std::fs::set_permissions(layout.run_dir(), std::fs::Permissions::from_mode(0o700))?;
    }
    write_configs(&layout)?;
    run_as.own(root)?;
    if run_as.is_root() {
        let status = run_as.command("test", root).args(["-w", &root.display().to_string()]).status()?;
        if !status.success() {
            bail!(
                "the postgres OS user cannot reach {} (a parent directory is not searchable by others); use a target \
                 directory it can reach (CARGO_TARGET_DIR)",
                root.display()
            );
        }
    }

    let all = components(&layout);
    let mut started = Vec::new();
    for component in &all {
        if let Some(pid) = running_pid(&layout, component) {
            println!("==> {} runs (pid {pid})", component.name);
            continue;
        }
        if component.name == "haproxy" {
            let check = Command::new(component.program)
                .args(["-c", "-q", "-f", &layout.root.join("haproxy/haproxy.cfg").display().to_string()])
                .output()?;
            if !check.status.success() {
                bail!("haproxy refuses its configuration: {}", String::from_utf8_lossy(&check.stderr).trim());
            }
        }
        let pid = start(&layout, run_as, component)?;
        println!(
            "==> started {} (pid {pid}, ports {:?}, log logs/{}.log)",
            component.name, component.ports, component.name
        );
        started.push(component.name.clone());
        if component.name == "etcd" {
            wait_for("etcd's /health", Duration::from_secs(30), || {
                Ok(matches!(http_get(layout.etcd_client(), "/health"), Some((200, body)) if body.contains("true"))
                    .then_some(()))
            })?;
        }
    }
    // A process that exits right after its start (a bad configuration) is reported with its log.
    std::thread::sleep(Duration::from_millis(500));
    for component in all.iter().filter(|c| started.contains(&c.name)) {
        if running_pid(&layout, component).is_none() {
            let log = layout.logs().join(format!("{}.log", component.name));
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
            bail!(
                "{} exited right after its start; the end of {}:\n{}",
                component.name,
                log.display(),
                tail.join("\n")
            );
        }
    }

    println!("==> waiting for Patroni to elect a primary");
    let (primary, name) = wait_for("a primary (Patroni /primary answering 200)", Duration::from_secs(180), || {
        Ok(current_primary(&layout))
    })?;
    println!("    {name} is the primary");
    wait_for("the primary to accept connections", Duration::from_secs(60), || {
        psql(&layout.admin_url(layout.pg(primary)), "SELECT 1").map(Some)
    })?;
    create_app_database(&layout, primary)?;

    println!("==> waiting for every standby to stream (and one to be the synchronous standby)");
    wait_for("the standbys", Duration::from_secs(180), || {
        let Some(members) = members(&layout) else { return Ok(None) };
        let running = members
            .iter()
            // The leader runs; a standby streams (Patroni 3.0 says `running` for a standby too).
            .filter(|(_, role, state)| state == "running" || (role != "leader" && state == "streaming"))
            .count();
        let sync = members.iter().any(|(_, role, _)| role == "sync_standby");
        Ok((running == usize::from(layout.nodes) && sync).then_some(()))
    })?;

    println!("==> checking a write through HAProxy and through pgBouncer");
    wait_for("a write through HAProxy", Duration::from_secs(30), || {
        probe_write(&layout.admin_url(layout.haproxy_primary())).map(Some)
    })?;
    wait_for("a write through pgBouncer", Duration::from_secs(30), || {
        probe_write(&layout.admin_url(layout.pgbouncer())).map(Some)
    })?;

    let urls = write_urls(&layout, primary)?;
    println!("\nThe cluster is up ({} nodes, {name} primary). Written to {}:\n", layout.nodes, urls.display());
    print!("{}", std::fs::read_to_string(&urls)?);
    Ok(())
}

/// Creates the application's role and database on the primary, unless they exist.
fn create_app_database(layout: &Layout, primary: u8) -> anyhow::Result<()> {
    let admin = layout.admin_url(layout.pg(primary));
    psql(
        &admin,
        &format!(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_USER}') THEN \
             CREATE ROLE {APP_USER} LOGIN PASSWORD '{}'; END IF; END $$",
            layout.app_password
        ),
    )?;
    if psql(&admin, &format!("SELECT 1 FROM pg_database WHERE datname = '{APP_DATABASE}'"))?.is_empty() {
        psql(&admin, &format!("CREATE DATABASE {APP_DATABASE} OWNER {APP_USER}"))?;
    }
    Ok(())
}

/// Writes `urls.env` and answers its path.
fn write_urls(layout: &Layout, primary: u8) -> anyhow::Result<PathBuf> {
    let mut text = String::from(
        "# Written by `cargo xtask cluster up`; load with `set -a; . target/cluster/urls.env; set +a`.\n\
         # The application's URLs (role and database `rebill`):\n",
    );
    let _ = writeln!(text, "REBILL_CLUSTER_HAPROXY_URL={}", layout.app_url(layout.haproxy_primary()));
    let _ = writeln!(text, "REBILL_CLUSTER_PGBOUNCER_URL={}", layout.app_url(layout.pgbouncer()));
    let _ = writeln!(text, "REBILL_CLUSTER_PRIMARY_URL={}", layout.app_url(layout.pg(primary)));
    text.push_str("# The superuser's (postgres, database postgres), e.g. to create test databases:\n");
    let _ = writeln!(text, "REBILL_CLUSTER_HAPROXY_ADMIN_URL={}", layout.admin_url(layout.haproxy_primary()));
    let _ = writeln!(text, "REBILL_CLUSTER_PGBOUNCER_ADMIN_URL={}", layout.admin_url(layout.pgbouncer()));
    let _ = writeln!(text, "REBILL_CLUSTER_PRIMARY_ADMIN_URL={}", layout.admin_url(layout.pg(primary)));
    let _ = writeln!(text, "REBILL_CLUSTER_REPLICAS_ADMIN_URL={}", layout.admin_url(layout.haproxy_replicas()));
    text.push_str("# Each node (the primary above is the one at `up`; Patroni's /primary tells the current one):\n");
    let mut nodes = Vec::new();
    for (i, name) in layout.node_names() {
        let _ = writeln!(text, "REBILL_CLUSTER_{}_ADMIN_URL={}", name.to_uppercase(), layout.admin_url(layout.pg(i)));
        let _ = writeln!(text, "REBILL_CLUSTER_{}_PATRONI=http://127.0.0.1:{}", name.to_uppercase(), layout.rest(i));
        nodes.push(name);
    }
    let _ = writeln!(text, "REBILL_CLUSTER_NODES={}", nodes.join(","));
    let _ = writeln!(text, "REBILL_CLUSTER_ETCD=http://127.0.0.1:{}", layout.etcd_client());
    let _ = writeln!(text, "REBILL_CLUSTER_HAPROXY_STATS=http://127.0.0.1:{}/", layout.haproxy_stats());
    let _ = writeln!(text, "REBILL_CLUSTER_PATRONICTL_CONFIG={}", layout.patroni_config("node1").display());
    let _ = writeln!(text, "REBILL_CLUSTER_DIR={}", layout.root.display());
    let path = layout.root.join("urls.env");
    write_private(&path, &text)?;
    Ok(path)
}

fn down(root: &Path) -> anyhow::Result<()> {
    let Some(layout) = Layout::load(root)? else {
        if root.exists() {
            bail!("{} exists but holds no cluster.env: not removing it blindly", root.display());
        }
        println!("no cluster in {}", root.display());
        return Ok(());
    };
    let all = components(&layout);
    let by_name = |name: &str| all.iter().find(|c| c.name == name);
    // The poolers first, then the standbys' Patroni, then the primary's (so that stopping the
    // cluster never fails over), then etcd.
    let primary = current_primary(&layout).map(|(_, name)| name);
    let mut order: Vec<&Component> = ["pgbouncer", "haproxy"].iter().filter_map(|n| by_name(n)).collect();
    for (_, name) in layout.node_names() {
        if Some(&name) != primary.as_ref() {
            order.extend(by_name(&name));
        }
    }
    order.extend(primary.as_deref().and_then(by_name));
    order.extend(by_name("etcd"));
    for component in order {
        if let Some(pid) = running_pid(&layout, component) {
            println!("==> stopping {} (pid {pid})", component.name);
            stop_pid(pid, component.program, "TERM", Duration::from_secs(30));
        }
    }
    // A postmaster Patroni left behind (Patroni killed hard): its pid is in postmaster.pid.
    for (_, name) in layout.node_names() {
        let pid_file = layout.data_dir(&name).join("postmaster.pid");
        let pid = std::fs::read_to_string(&pid_file).ok().and_then(|t| t.lines().next()?.trim().parse::<u32>().ok());
        if let Some(pid) = pid {
            // SIGQUIT: PostgreSQL's immediate shutdown.
            if stop_pid(pid, "postgres", "QUIT", Duration::from_secs(10)) {
                println!("==> stopped the postmaster of {name} (pid {pid})");
            }
        }
    }
    std::fs::remove_dir_all(root).with_context(|| format!("removing {}", root.display()))?;
    println!("the cluster is down and {} removed", root.display());
    Ok(())
}

fn status(root: &Path) -> anyhow::Result<()> {
    let Some(layout) = Layout::load(root)? else {
        bail!("no cluster in {} (start one with `cargo xtask cluster up`)", root.display());
    };
    let mut down = Vec::new();
    for component in components(&layout) {
        match running_pid(&layout, &component) {
            Some(pid) => println!("{:<10} running  pid {pid:<8} ports {:?}", component.name, component.ports),
            None => {
                println!("{:<10} DOWN              ports {:?}", component.name, component.ports);
                down.push(component.name);
            }
        }
    }
    println!();
    let list = Command::new("/usr/bin/patronictl")
        .args(["-c", &layout.patroni_config("node1").display().to_string(), "list"])
        .current_dir(root)
        .output()
        .context("running patronictl")?;
    print!("{}", String::from_utf8_lossy(&list.stdout));
    eprint!("{}", String::from_utf8_lossy(&list.stderr));
    match current_primary(&layout) {
        Some((_, name)) => println!("primary (Patroni /primary): {name}"),
        None => println!("primary (Patroni /primary): none"),
    }
    let urls = root.join("urls.env");
    if let Ok(text) = std::fs::read_to_string(&urls) {
        println!("\n{}:", urls.display());
        print!("{text}");
    }
    if !down.is_empty() {
        bail!("not running: {} (`cargo xtask cluster up` starts them again)", down.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{json_field, render};

    #[test]
    fn member_fields() {
        let object = r#""name": "node1", "role": "leader", "state": "running", "api_url": "http://x"}, "#;
        assert_eq!(json_field(object, "role").as_deref(), Some("leader"));
        assert_eq!(json_field(r#""state":"streaming""#, "state").as_deref(), Some("streaming"));
        assert_eq!(json_field(object, "lag"), None);
    }

    #[test]
    fn templates_fill_every_placeholder() {
        let error = render("pgbouncer.ini", &[]).expect_err("placeholders left");
        assert!(error.to_string().contains("{{"), "{error}");
    }
}
