//! The one module that names `sqlx::Any`: the pool, connection, transaction, row and query
//! types every other module of the store goes through. SQL text that differs between the
//! backends lives in [`crate::dialect`].

use sqlx::any::AnyPoolOptions;

/// The database driver behind every pool (chosen at run time by the URL).
pub(crate) type Db = sqlx::Any;
/// A pool of connections to either backend.
pub(crate) type Pool = sqlx::AnyPool;
/// A row read from either backend.
pub(crate) type DbRow = sqlx::any::AnyRow;
/// One connection taken from a [`Pool`].
pub(crate) type Conn = sqlx::AnyConnection;
/// An open database transaction.
pub(crate) type Tx = sqlx::Transaction<'static, Db>;
/// A statement with its bound values.
pub(crate) type DbQuery<'q> = sqlx::query::Query<'q, Db, sqlx::any::AnyArguments<'q>>;

/// Pool options for either backend (the drivers are installed on first use).
pub(crate) fn pool_options() -> AnyPoolOptions {
    sqlx::any::install_default_drivers();
    AnyPoolOptions::new()
}

/// Installs the drivers `sqlx::Any` dispatches to (needed before connecting without a pool, as
/// the test databases' administration does).
#[cfg(feature = "testing")]
pub(crate) fn install_drivers() {
    sqlx::any::install_default_drivers();
}

/// Whether a write failed on a unique index (a code or key taken, also by a racing write).
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// SQLSTATEs of a transaction the database rolled back because of concurrent ones, which may
/// succeed when run again: PostgreSQL's `serialization_failure` and `deadlock_detected`.
const TRANSIENT_STATES: [&str; 2] = ["40001", "40P01"];

/// Whether the statement failed only because of concurrent transactions (rolled back whole;
/// running the work again may succeed).
pub(crate) fn is_transient(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.code().is_some_and(|c| TRANSIENT_STATES.contains(&c.as_ref())))
}

#[cfg(test)]
mod tests {
    /// No other module of the store names the `Any` driver's types.
    #[test]
    fn only_this_module_names_sqlx_any() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut offenders = Vec::new();
        let mut read = 0;
        let mut dirs = vec![src.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("a source directory") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if path == src.join("db.rs") || path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).expect("source");
                read += 1;
                for needle in ["sqlx::Any", "sqlx::any", "AnyPool", "AnyRow", "AnyConnection", "AnyArguments"] {
                    if text.contains(needle) {
                        offenders.push(format!("{}: {needle}", path.display()));
                    }
                }
            }
        }
        assert!(read > 20, "the store's sources were found ({read} files)");
        assert!(offenders.is_empty(), "{offenders:?}");
    }
}
