//! Every difference between the two backends' SQL, in one place. The rest of the store writes
//! one statement for both and asks this module for the parts that differ:
//!
//! | What | SQLite | PostgreSQL |
//! |---|---|---|
//! | URL | `sqlite:PATH` (`mode=rwc` added: the file is created; not in memory: the connections share the file) | `postgres://…`, `postgresql://…` |
//! | Connections | one writer (plus read-only readers, `PRAGMA query_only`) | a pool of 16 for both |
//! | Durability | `PRAGMA journal_mode = WAL`, `synchronous = NORMAL` on every connection | `synchronous_commit` off only for counters ([`Backend::relaxed_commit`]) |
//! | Claims | the one writer serialises them | `FOR UPDATE SKIP LOCKED`: rows another transaction holds count as taken |
//! | Placeholders of long statements | anonymous `?` (sqlx looks numbered ones up one by one, quadratic in thousands of values) | `$1, $2, …` |
//! | Index hints | `+column` keeps the planner off an index | none needed |
//! | Migrations | `migrations/sqlite` | `migrations/postgres`; the trees are the same once [`MIGRATION_TOKENS`] are normalised |
//!
//! The same on both (and therefore written once, not here): `$N` placeholders in short
//! statements, `INSERT … ON CONFLICT … DO UPDATE/NOTHING`, `RETURNING`, `UPDATE … FROM (VALUES …)`
//! with `column1, column2, …` names, booleans stored as 0/1 integers and times as epoch seconds.

use crate::checkpoints::Checkpointer;
use crate::db::{Pool, Readers, pool_options};

/// How long a statement waits for a PostgreSQL connection (sqlx's default is 30 s): longer
/// than a failover (Patroni promotes a standby in a few seconds, `docs/deploy.md`), short
/// enough that a client told to retry is told soon.
pub(crate) const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
use crate::{Backend, StoreError};

/// Column types that differ between the migration trees, as (PostgreSQL, SQLite) token pairs;
/// both sides normalise to the SQLite token. SQLite's `INTEGER` is a 64-bit integer, its only
/// auto-increment key is `INTEGER PRIMARY KEY AUTOINCREMENT`; flags were declared `INTEGER` on
/// SQLite and `BIGINT` on PostgreSQL, so `INTEGER` and `BIGINT` read the same.
#[cfg(test)]
pub(crate) const MIGRATION_TOKENS: &[(&str, &str)] =
    &[("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT"), ("BIGINT", "INTEGER")];

/// How a claim treats rows another transaction is changing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Locking {
    /// Wait for the other transaction and check the row again once it ends (a request claiming
    /// one record).
    Wait,
    /// Leave them out (a batch or a worker claiming whatever is free).
    SkipLocked,
}

impl Backend {
    /// The backend of a database URL, and the URL to connect with.
    pub(crate) fn of_url(url: &str) -> Result<(Backend, String), StoreError> {
        if let Some(rest) = url.strip_prefix("sqlite:") {
            // The store's connections (the writer, the readers, the checkpointer) share one
            // database file; an in-memory database is private to the connection that made it.
            if rest.contains(":memory:") || rest.contains("mode=memory") {
                return Err(StoreError::UnsupportedUrl(url.to_owned()));
            }
            let url = if rest.contains("mode=") {
                url.to_owned()
            } else if rest.contains('?') {
                format!("{url}&mode=rwc")
            } else {
                format!("{url}?mode=rwc")
            };
            Ok((Backend::Sqlite, url))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok((Backend::Postgres, url.to_owned()))
        } else {
            Err(StoreError::UnsupportedUrl(url.to_owned()))
        }
    }

    /// Migrates the database and opens the writer pool (SQLite: one connection in WAL mode).
    pub(crate) async fn open_writer(self, url: &str) -> Result<Pool, StoreError> {
        let pool = match self {
            // Migrated on a connection of sqlx's driver, closed after; the writer itself is the
            // store's own connection ([`crate::db::SqliteWriter`]), which puts the database in
            // WAL mode.
            Backend::Sqlite => {
                let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(url).await?;
                self.migrator().run(&mut conn).await?;
                sqlx::Connection::close(conn).await?;
                Pool::Sqlite(crate::db::SqliteWriter::open(url)?)
            }
            // A connection that carried a large batch (a renewal batch's multi-row statements
            // and their returned rows) would keep buffers of that size while idle, and each of
            // the 16 would come to hold the largest it ever carried: it gives back all but the
            // driver's default (8 KB) when it returns to the pool.
            Backend::Postgres => {
                let pool = pool_options::<sqlx::Postgres>()
                    .max_connections(16)
                    // While no primary answers (a failover takes seconds), a statement waits
                    // this long for a connection, then fails as unavailable (503, retry).
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .after_release(|conn, _| {
                        Box::pin(async move {
                            sqlx::Connection::shrink_buffers(conn);
                            Ok(true)
                        })
                    })
                    .connect(url)
                    .await?;
                self.migrator().run(&pool).await?;
                Pool::Postgres(pool)
            }
        };
        Ok(pool)
    }

    /// The backend's migrations, as built into the binary.
    pub(crate) fn migrator(self) -> sqlx::migrate::Migrator {
        match self {
            Backend::Sqlite => sqlx::migrate!("./migrations/sqlite"),
            Backend::Postgres => sqlx::migrate!("./migrations/postgres"),
        }
    }

    /// The connections for reads that stand alone ([`Readers`]): on SQLite several read-only
    /// connections beside the writer (WAL allows them), on PostgreSQL the writer's pool.
    pub(crate) async fn open_readers(self, url: &str, writer: &Pool) -> Result<Readers, StoreError> {
        Ok(match self {
            Backend::Sqlite => Readers::sqlite(url, 4)?,
            Backend::Postgres => match writer {
                Pool::Postgres(pool) => Readers::Shared(pool.clone()),
                Pool::Sqlite(_) => return Err(StoreError::Invalid("a SQLite pool for a PostgreSQL store".into())),
            },
        })
    }

    /// SQLite's checkpointer, which copies the write-ahead log into the database beside the
    /// writer ([`crate::checkpoints`]); PostgreSQL checkpoints by itself.
    pub(crate) async fn open_checkpointer(self, url: &str) -> Result<Option<Checkpointer>, StoreError> {
        Ok(match self {
            Backend::Sqlite => Some(Checkpointer::start(url).await?),
            Backend::Postgres => None,
        })
    }

    /// Lets the open transaction on `conn` commit without waiting for its write to be durable
    /// (PostgreSQL `synchronous_commit`; SQLite's `synchronous = NORMAL` already does not wait).
    /// For data whose last change may be lost in a crash, such as rate-limit counters.
    pub(crate) async fn relaxed_commit(self, tx: &mut crate::db::Tx) -> Result<(), StoreError> {
        if self == Backend::Postgres {
            crate::db::query("SET LOCAL synchronous_commit TO OFF").execute(tx.exec()).await?;
        }
        Ok(())
    }

    /// The row-locking clause closing a claim's `SELECT … LIMIT …` subquery; `of` names the
    /// table alias to lock when the subquery joins others.
    pub(crate) fn lock_clause(self, locking: Locking, of: Option<&str>) -> String {
        match (self, locking) {
            (Backend::Postgres, Locking::SkipLocked) => match of {
                Some(alias) => format!(" FOR UPDATE OF {alias} SKIP LOCKED"),
                None => " FOR UPDATE SKIP LOCKED".to_owned(),
            },
            _ => String::new(),
        }
    }

    /// The clause locking the rows a `SELECT` reads until the transaction ends (PostgreSQL
    /// `FOR UPDATE`); SQLite has one writer and needs none.
    pub(crate) fn for_update(self) -> &'static str {
        match self {
            Backend::Postgres => " FOR UPDATE",
            Backend::Sqlite => "",
        }
    }

    /// `ORDER BY column` and the row locks of a claim's subquery without `LIMIT`: PostgreSQL
    /// takes the locks in `column` order (two claims never wait on each other in a cycle); SQLite
    /// has one writer and needs neither.
    pub(crate) fn locked_in_order(self, locking: Locking, column: &str) -> String {
        match (self, locking) {
            (Backend::Postgres, Locking::SkipLocked) => format!(" ORDER BY {column} FOR UPDATE SKIP LOCKED"),
            _ => String::new(),
        }
    }

    /// `column` in a condition that must not use the column's index (SQLite picks the index of
    /// an equality over a more selective `IN` list or partial index otherwise).
    pub(crate) fn unindexed(self, column: &str) -> String {
        match self {
            Backend::Sqlite => format!("+{column}"),
            Backend::Postgres => column.to_owned(),
        }
    }

    /// Placeholders of `n` values numbered from `first`: `$first, …` on PostgreSQL and `?, …`
    /// on SQLite. sqlx matches a numbered SQLite parameter by its name, scanning the statement's
    /// parameter list for each one, which is quadratic in a statement of thousands of values;
    /// anonymous ones are taken in order. A statement built with these therefore numbers its
    /// values in the order they appear in its text.
    pub(crate) fn params(self, n: usize, first: usize) -> String {
        match self {
            Backend::Postgres => (first..first + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", "),
            Backend::Sqlite => vec!["?"; n].join(", "),
        }
    }

    /// `(…), (…), …`: `rows` tuples of [`Backend::params`] of `columns` values each, numbered
    /// from `first`, for multi-row `VALUES` lists. A `VALUES` list in `FROM` names its columns
    /// `column1`, `column2`, … on both backends.
    pub(crate) fn rows(self, rows: usize, columns: usize, first: usize) -> String {
        (0..rows).map(|r| format!("({})", self.params(columns, first + r * columns))).collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
/// A migration file's statements with comments and layout removed and [`MIGRATION_TOKENS`]
/// replaced, one normalised statement per entry.
pub(crate) fn normalise_migration(sql: &str) -> Vec<String> {
    let text: String =
        sql.lines().map(|line| line.split("--").next().unwrap_or_default()).collect::<Vec<_>>().join(" ");
    text.split(';')
        .map(|statement| {
            let mut words = statement.split_whitespace().collect::<Vec<_>>().join(" ");
            for (postgres, sqlite) in MIGRATION_TOKENS {
                words = replace_token(&words, postgres, sqlite);
            }
            words
        })
        .filter(|statement| !statement.is_empty())
        .collect()
}

#[cfg(test)]
/// `text` with every occurrence of the whole-word `token` replaced by `by`.
fn replace_token(text: &str, token: &str, by: &str) -> String {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(token) {
        let before = rest[..at].chars().next_back().or_else(|| out.chars().next_back());
        let after = rest[at + token.len()..].chars().next();
        out.push_str(&rest[..at]);
        if word(before) || word(after) {
            out.push_str(token);
        } else {
            out.push_str(by);
        }
        rest = &rest[at + token.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn migration_tree(backend: &str) -> Vec<(String, String)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations").join(backend);
        let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
            .expect("migration directory")
            .map(|entry| {
                let path = entry.expect("entry").path();
                let name = path.file_name().and_then(|n| n.to_str()).expect("file name").to_owned();
                (name, std::fs::read_to_string(&path).expect("migration"))
            })
            .collect();
        files.sort();
        files
    }

    /// Tables with their column definitions and the indexes, from normalised statements.
    fn schema(statements: &[String]) -> (Vec<(String, Vec<String>)>, Vec<String>) {
        let mut tables = Vec::new();
        let mut indexes = Vec::new();
        for statement in statements {
            if let Some(rest) = statement.strip_prefix("CREATE TABLE ") {
                let (name, body) = rest.split_once(" (").expect("a column list");
                let body = body.strip_suffix(')').expect("a closed column list");
                // Split on commas outside parentheses.
                let (mut columns, mut depth, mut current) = (Vec::new(), 0, String::new());
                for c in body.chars() {
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        ',' if depth == 0 => {
                            columns.push(current.trim().to_owned());
                            current.clear();
                            continue;
                        }
                        _ => {}
                    }
                    current.push(c);
                }
                columns.push(current.trim().to_owned());
                tables.push((name.to_owned(), columns));
            } else if statement.contains("INDEX ") {
                indexes.push(statement.clone());
            }
        }
        (tables, indexes)
    }

    #[test]
    fn the_migration_trees_are_the_same_once_the_dialect_tokens_are_normalised() {
        let sqlite = migration_tree("sqlite");
        let postgres = migration_tree("postgres");
        let names = |tree: &[(String, String)]| tree.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&sqlite), names(&postgres), "the same migration files");
        assert!(!sqlite.is_empty());
        let mut tables = 0;
        for ((name, lite), (_, pg)) in sqlite.iter().zip(&postgres) {
            let (lite, pg) = (normalise_migration(lite), normalise_migration(pg));
            let (lite_schema, pg_schema) = (schema(&lite), schema(&pg));
            assert_eq!(lite_schema.0, pg_schema.0, "{name}: tables and columns");
            assert_eq!(lite_schema.1, pg_schema.1, "{name}: indexes");
            assert_eq!(lite, pg, "{name}: statements");
            tables += lite_schema.0.len();
        }
        assert!(tables >= 10, "the schema was read ({tables} tables)");
    }

    #[test]
    fn normalising_keeps_real_differences() {
        let lite = "CREATE TABLE t (\n  id INTEGER PRIMARY KEY AUTOINCREMENT, -- key\n  flag INTEGER NOT NULL,\n  at BIGINT\n);\nCREATE INDEX t_at ON t(at);";
        let pg = "CREATE TABLE t (\n  id BIGSERIAL PRIMARY KEY,\n  flag BIGINT NOT NULL,\n  at BIGINT\n);\nCREATE INDEX t_at ON t(at);";
        assert_eq!(normalise_migration(lite), normalise_migration(pg));
        assert_eq!(
            normalise_migration(lite)[0],
            "CREATE TABLE t ( id INTEGER PRIMARY KEY AUTOINCREMENT, flag INTEGER NOT NULL, at INTEGER )"
        );
        // A column type, a column or an index that differs is still seen.
        assert_ne!(normalise_migration(lite), normalise_migration(&pg.replace("flag BIGINT", "flag TEXT")));
        assert_ne!(
            normalise_migration(lite),
            normalise_migration(&pg.replace("  at BIGINT\n", "  at BIGINT, more TEXT\n"))
        );
        assert_ne!(normalise_migration(lite), normalise_migration(&pg.replace("ON t(at)", "ON t(flag)")));
        // Tokens are whole words: a column named like a type is left alone.
        assert_eq!(replace_token("BIGINT_AT BIGINT xBIGINT", "BIGINT", "INTEGER"), "BIGINT_AT INTEGER xBIGINT");
    }

    #[test]
    fn placeholders_follow_the_backend() {
        assert_eq!(Backend::Postgres.params(3, 2), "$2, $3, $4");
        assert_eq!(Backend::Sqlite.params(3, 2), "?, ?, ?");
        assert_eq!(Backend::Postgres.rows(2, 2, 1), "($1, $2), ($3, $4)");
        assert_eq!(Backend::Sqlite.rows(2, 2, 1), "(?, ?), (?, ?)");
        assert_eq!(Backend::Sqlite.params(0, 1), "");
    }

    #[test]
    fn claims_skip_locked_rows_on_postgres_only() {
        assert_eq!(Backend::Postgres.lock_clause(Locking::SkipLocked, None), " FOR UPDATE SKIP LOCKED");
        assert_eq!(Backend::Postgres.lock_clause(Locking::SkipLocked, Some("j")), " FOR UPDATE OF j SKIP LOCKED");
        assert_eq!(Backend::Sqlite.lock_clause(Locking::SkipLocked, Some("j")), "");
        assert_eq!(Backend::Postgres.locked_in_order(Locking::SkipLocked, "id"), " ORDER BY id FOR UPDATE SKIP LOCKED");
        assert_eq!(Backend::Sqlite.locked_in_order(Locking::SkipLocked, "id"), "");
        assert_eq!(Backend::Postgres.locked_in_order(Locking::Wait, "id"), "");
        assert_eq!(Backend::Postgres.lock_clause(Locking::Wait, None), "");
        assert_eq!(Backend::Sqlite.unindexed("site_id"), "+site_id");
        assert_eq!(Backend::Postgres.unindexed("site_id"), "site_id");
    }

    #[test]
    fn urls_name_their_backend() {
        assert_eq!(
            Backend::of_url("sqlite://./x.db").expect("sqlite"),
            (Backend::Sqlite, "sqlite://./x.db?mode=rwc".into())
        );
        assert_eq!(
            Backend::of_url("sqlite://./x.db?cache=shared").expect("sqlite"),
            (Backend::Sqlite, "sqlite://./x.db?cache=shared&mode=rwc".into())
        );
        assert!(matches!(Backend::of_url("sqlite::memory:"), Err(StoreError::UnsupportedUrl(_))));
        assert!(matches!(Backend::of_url("sqlite://x.db?mode=memory"), Err(StoreError::UnsupportedUrl(_))));
        assert_eq!(Backend::of_url("postgresql://h/db").expect("pg"), (Backend::Postgres, "postgresql://h/db".into()));
        assert!(matches!(Backend::of_url("mysql://h/db"), Err(StoreError::UnsupportedUrl(_))));
    }

    /// The SQLite writer runs in WAL mode, syncs at checkpoints, keeps statement journals in
    /// memory and leaves checkpoints to the checkpointer up to its bound.
    #[tokio::test]
    async fn the_sqlite_writer_is_set_up_for_its_batches() {
        let url = crate::testing::fresh_sqlite_url("writer_pragmas");
        let store = crate::Store::connect(&url).await.expect("a SQLite store");
        let mut conn = store.pool.acquire().await.expect("the writer");
        for (pragma, expected) in
            [("journal_mode", "wal"), ("synchronous", "1"), ("temp_store", "2"), ("foreign_keys", "1")]
        {
            let row = crate::db::query(&format!("SELECT CAST({pragma} AS TEXT) AS v FROM pragma_{pragma}"))
                .fetch_one(conn.exec())
                .await
                .expect("the pragma");
            assert_eq!(row.try_get::<String, _>("v").expect("v"), expected, "{pragma}");
        }
        let row = crate::db::query("PRAGMA wal_autocheckpoint").fetch_one(conn.exec()).await.expect("the bound");
        let pages: i64 = row.try_get(0).expect("pages");
        assert_eq!(pages, i64::from(crate::checkpoints::WRITER_CHECKPOINT_PAGES));
        drop(conn);
        store.close().await;
    }
}
