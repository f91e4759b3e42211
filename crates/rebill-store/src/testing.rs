//! Fresh databases for test suites (feature `testing`). A PostgreSQL server that cannot be
//! reached is a test failure, never a skip.
//!
//! Clean-up of PostgreSQL test databases (`rebill_test_<tag>_<host>_<pid>_<nanos>`):
//! - [`fresh_postgres_database`] returns a [`TestDatabase`] that drops its database when it goes
//!   out of scope, also when the test panics: suites that hold it leave nothing behind.
//!   [`both_backends`] gives a suite its SQLite and PostgreSQL stores on such a database.
//! - The first new database of each process sweeps the server first: databases whose creating
//!   process has ended (Linux: same host marker, no `/proc/<pid>`) and, as the fallback, any
//!   older than an hour are dropped. So databases made with the bare [`fresh_postgres_url`]
//!   (the renewal benchmark's, which drops its own unless kept) or left by a killed run go as
//!   soon as the next test process starts.

use crate::db::Conn;

fn unique(tag: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    format!("{tag}_{}_{nanos}", std::process::id())
}

/// A marker of this host (its UTS name), so that the sweep judges only databases made by
/// processes it can see: `h` and 6 hex digits of the host name's hash.
fn host_marker() -> String {
    use sha2::Digest;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("h{}", &hex::encode(sha2::Sha256::digest(host.trim().as_bytes()))[..6])
}

/// A URL of a new, empty SQLite database file in the temporary directory.
pub fn fresh_sqlite_url(tag: &str) -> String {
    let dir = std::env::temp_dir().join(format!("rebill-{}", unique(tag)));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    format!("sqlite://{}", dir.join("rebill.db").display())
}

/// The server used for PostgreSQL tests: `REBILL_TEST_POSTGRES`, by default the local
/// trust-auth server.
pub fn postgres_admin_url() -> String {
    std::env::var("REBILL_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// Creates a new database on the PostgreSQL test server and returns its URL.
///
/// # Panics
/// When the server cannot be reached or the database cannot be created.
pub async fn fresh_postgres_url(tag: &str) -> String {
    let admin = postgres_admin_url();
    // PostgreSQL names have at most 63 bytes: the tag is cut to 12 characters.
    let tag: String =
        tag.chars().take(12).map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    let name = format!("rebill_test_{}", unique(&format!("{tag}_{}", host_marker())));
    let mut conn = Conn::postgres(&admin).await.unwrap_or_else(|e| panic!("PostgreSQL at {admin}: {e}"));
    // One sweep per process is enough: what it looks for are databases of ended processes.
    if !SWEPT.swap(true, std::sync::atomic::Ordering::SeqCst) {
        drop_stale_databases(&mut conn).await;
    }
    crate::db::query(&format!("CREATE DATABASE {name}")).execute(&mut conn).await.expect("create the test database");
    let base = admin.rsplit_once('/').map(|(b, _)| b.to_owned()).unwrap_or(admin);
    format!("{base}/{name}")
}

/// A PostgreSQL test database that is dropped when this value goes out of scope (also when the
/// test panics). Made by [`fresh_postgres_database`].
#[derive(Debug)]
pub struct TestDatabase {
    url: String,
}

impl TestDatabase {
    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Its own thread and runtime: the drop may happen inside or outside an async context.
        let url = self.url.clone();
        let done = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            runtime.block_on(forget_database(&url));
        });
        let _ = done.join();
    }
}

/// Like [`fresh_postgres_url`], but the database is dropped with the returned value.
///
/// # Panics
/// When the server cannot be reached or the database cannot be created.
pub async fn fresh_postgres_database(tag: &str) -> TestDatabase {
    TestDatabase { url: fresh_postgres_url(tag).await }
}

/// Drops a test database, disconnecting what is still connected; failures are ignored (the
/// sweep takes it later).
async fn forget_database(url: &str) {
    let name = url.rsplit('/').next().unwrap_or_default();
    if !name.starts_with("rebill_test_") || !safe_name(name) {
        return;
    }
    if let Ok(mut conn) = Conn::postgres(&postgres_admin_url()).await {
        let _ = crate::db::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&mut conn).await;
        let _ = conn.close().await;
    }
}

fn safe_name(name: &str) -> bool {
    name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Whether this process swept the server already.
static SWEPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Test databases older than this are dropped when a new one is made, whoever made them.
const STALE_AFTER_NANOS: u128 = 3600 * 1_000_000_000;

/// Whether the process that made database `name` on this host has ended (Linux only; elsewhere
/// the age rule alone applies).
fn creator_ended(name: &str) -> bool {
    let mut parts = name.rsplit('_');
    let (_nanos, pid, host) = (parts.next(), parts.next(), parts.next());
    let Some(pid) = pid.and_then(|p| p.parse::<u32>().ok()) else { return false };
    host == Some(host_marker().as_str())
        && pid != std::process::id()
        && std::path::Path::new("/proc/self").exists()
        && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Drops `rebill_test_*` databases whose creating process on this host has ended, or that were
/// made over an hour ago (their names end in their creator's pid and creation time), so that
/// suites that do not drop their own databases do not fill the server up.
async fn drop_stale_databases(conn: &mut Conn) {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    let Ok(rows) =
        crate::db::query("SELECT CAST(datname AS TEXT) AS datname FROM pg_database WHERE datname LIKE 'rebill_test_%'")
            .fetch_all(conn.exec())
            .await
    else {
        return;
    };
    for row in rows {
        let Ok(name) = row.try_get::<String, _>("datname") else { continue };
        let created = name.rsplit('_').next().and_then(|n| n.parse::<u128>().ok());
        let stale = created.is_some_and(|c| now.saturating_sub(c) > STALE_AFTER_NANOS) || creator_ended(&name);
        if safe_name(&name) && stale {
            // Best effort: a database still in use is left for a later run.
            let _ = crate::db::query(&format!("DROP DATABASE IF EXISTS {name}")).execute(conn.exec()).await;
        }
    }
}

/// Drops a database made by [`fresh_postgres_url`] at once, disconnecting its sessions (to test
/// how the service behaves when its database goes away).
///
/// # Panics
/// When the server cannot be reached or the database cannot be dropped.
pub async fn drop_postgres_database(url: &str) {
    let name = url.rsplit('/').next().unwrap_or_default();
    assert!(name.starts_with("rebill_test_"), "only test databases are dropped");
    let admin = postgres_admin_url();
    let mut conn = Conn::postgres(&admin).await.unwrap_or_else(|e| panic!("PostgreSQL at {admin}: {e}"));
    crate::db::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .execute(&mut conn)
        .await
        .expect("drop the test database");
}

/// A store on a fresh SQLite database and one on a fresh PostgreSQL database, in that order, for
/// suites that run every case on both backends (`for store in both_backends("tag").await`). The
/// PostgreSQL database is dropped when the iteration ends (or the test panics).
pub struct BothBackends {
    stores: std::vec::IntoIter<crate::Store>,
    _postgres: TestDatabase,
}

impl Iterator for BothBackends {
    type Item = crate::Store;

    fn next(&mut self) -> Option<crate::Store> {
        self.stores.next()
    }
}

/// See [`BothBackends`].
///
/// # Panics
/// When either database cannot be made or opened.
pub async fn both_backends(tag: &str) -> BothBackends {
    let postgres = fresh_postgres_database(tag).await;
    let sqlite = crate::Store::connect(&fresh_sqlite_url(tag)).await.expect("a fresh SQLite store");
    assert_eq!(sqlite.backend(), crate::Backend::Sqlite);
    let pg = crate::Store::connect(postgres.url()).await.expect("a fresh PostgreSQL store");
    assert_eq!(pg.backend(), crate::Backend::Postgres);
    BothBackends { stores: vec![sqlite, pg].into_iter(), _postgres: postgres }
}
