//! Fresh databases for test suites (feature `testing`). A PostgreSQL server that cannot be
//! reached is a test failure, never a skip.

use sqlx::Connection;

fn unique(tag: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    format!("{tag}_{}_{nanos}", std::process::id())
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
    let name = format!("rebill_test_{}", unique(tag));
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&admin).await.unwrap_or_else(|e| panic!("PostgreSQL at {admin}: {e}"));
    drop_stale_databases(&mut conn).await;
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut conn).await.expect("create the test database");
    let base = admin.rsplit_once('/').map(|(b, _)| b.to_owned()).unwrap_or(admin);
    format!("{base}/{name}")
}

/// Test databases older than this are dropped when a new one is made.
const STALE_AFTER_NANOS: u128 = 3600 * 1_000_000_000;

/// Drops `rebill_test_*` databases left by runs that ended over an hour ago (their names end in
/// their creation time), so that machines running the suite again and again do not fill up.
async fn drop_stale_databases(conn: &mut sqlx::AnyConnection) {
    use sqlx::Row;
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    let Ok(rows) =
        sqlx::query("SELECT datname FROM pg_database WHERE datname LIKE 'rebill_test_%'").fetch_all(&mut *conn).await
    else {
        return;
    };
    for row in rows {
        let Ok(name) = row.try_get::<String, _>("datname") else { continue };
        let created = name.rsplit('_').next().and_then(|n| n.parse::<u128>().ok());
        let safe = name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if safe && created.is_some_and(|c| now.saturating_sub(c) > STALE_AFTER_NANOS) {
            // Best effort: a database still in use is left for a later run.
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name}")).execute(&mut *conn).await;
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
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&admin).await.unwrap_or_else(|e| panic!("PostgreSQL at {admin}: {e}"));
    sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .execute(&mut conn)
        .await
        .expect("drop the test database");
}
