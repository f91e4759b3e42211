//! SQLite's connections, stepped on the calling thread: the read-only ones and the one writer.
//!
//! sqlx's SQLite driver runs every connection on a thread of its own: a statement is sent to
//! that thread, and each row comes back as a message of its own, every value copied out of
//! SQLite (`sqlite3_value_dup`) on the way. For a page of 200 accounts that was a third of the
//! service's time (the rows' messages, the threads waking each other for them, the copies); for
//! a write, whose transaction is several statements in a row on the one writer, the threads
//! waking each other for every statement were most of the process's time, and the writer's
//! transactions waited on them one after the other. Here a statement is prepared, bound and
//! stepped in one call, on one thread, and each row's values are read once, into the row the
//! store decodes ([`Row`]). A read runs on tokio's blocking pool (one hand-off per read, not per
//! row); the writer's statements run where they are called (the store's `db` module).
//!
//! Every statement is bounded in time: SQLite interrupts one that has stepped for longer than
//! its bound ([`READ_BOUND`], [`WRITE_BOUND`]), and it fails ([`SqliteError`]). A read of the
//! store is a page, a resource or a batch of at most 500 keys, a write one row or a renewal
//! batch's rows: well under a millisecond to a few milliseconds.

use std::borrow::Cow;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::types::{FromSql, Value as Stored, ValueRef};
use rusqlite::{Connection, OpenFlags, Statement};

use crate::values::Value;

/// How long one read may step before SQLite interrupts it.
pub(crate) const READ_BOUND: Duration = Duration::from_secs(5);

/// How long one statement of the writer may step before SQLite interrupts it (the writer's
/// statements run on the runtime's threads; the largest, a renewal batch's multi-row insert,
/// takes milliseconds).
pub(crate) const WRITE_BOUND: Duration = Duration::from_secs(5);

/// How long a read waits for a lock the writer holds (in WAL mode only while the log is
/// restarted or the database recovered).
const READ_BUSY_WAIT: Duration = Duration::from_secs(1);

/// SQLite's virtual-machine steps between two looks at the clock ([`READ_BOUND`]).
const STEPS_BETWEEN_CHECKS: i32 = 10_000;

/// Statements each connection keeps prepared (sqlx's default for its connections).
const CACHED_STATEMENTS: usize = 100;

/// One SQLite connection: read-only ([`SqliteConn::reader`]) or the writer
/// ([`SqliteConn::writer`]).
pub(crate) struct SqliteConn {
    conn: Connection,
}

impl std::fmt::Debug for SqliteConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a SQLite connection")
    }
}

/// A row a [`SqliteConn`] returned: the statement's column names (shared by its rows) and the
/// row's values.
#[derive(Debug)]
pub(crate) struct Row {
    columns: Arc<Columns>,
    values: Box<[Stored]>,
}

/// The column names of a statement's rows, in one text shared by all its rows: a row of thirty
/// columns costs one allocation for its names, not thirty.
#[derive(Debug)]
struct Columns {
    names: String,
    /// Where each name ends in `names`.
    ends: Box<[usize]>,
}

impl Columns {
    fn of(statement: &Statement<'_>) -> rusqlite::Result<Self> {
        let count = statement.column_count();
        let mut names = String::new();
        let mut ends = Vec::with_capacity(count);
        for i in 0..count {
            names.push_str(statement.column_name(i)?);
            ends.push(names.len());
        }
        Ok(Self { names, ends: ends.into() })
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn name(&self, index: usize) -> Option<&str> {
        let end = *self.ends.get(index)?;
        let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
        self.names.get(start..end)
    }

    fn position(&self, name: &str) -> Option<usize> {
        let mut start = 0;
        for (index, &end) in self.ends.iter().enumerate() {
            if end - start == name.len() && self.names.as_bytes()[start..end] == *name.as_bytes() {
                return Some(index);
            }
            start = end;
        }
        None
    }
}

impl Row {
    /// The value at `index`, decoded as `T`.
    pub(crate) fn get<T: FromSql>(&self, index: usize) -> Result<T, sqlx::Error> {
        let value =
            self.values.get(index).ok_or(sqlx::Error::ColumnIndexOutOfBounds { index, len: self.values.len() })?;
        T::column_result(ValueRef::from(value)).map_err(|e| sqlx::Error::ColumnDecode {
            index: self.columns.name(index).map(str::to_owned).unwrap_or_else(|| index.to_string()),
            source: Box::new(e),
        })
    }

    /// Columns of the row.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }
}

impl sqlx::ColumnIndex<Row> for &'_ str {
    fn index(&self, row: &Row) -> Result<usize, sqlx::Error> {
        row.columns.position(self).ok_or_else(|| sqlx::Error::ColumnNotFound(self.to_string()))
    }
}

impl sqlx::ColumnIndex<Row> for usize {
    fn index(&self, row: &Row) -> Result<usize, sqlx::Error> {
        if *self < row.values.len() {
            Ok(*self)
        } else {
            Err(sqlx::Error::ColumnIndexOutOfBounds { index: *self, len: row.values.len() })
        }
    }
}

/// A statement that SQLite refused or that ran past its bound, as a database error of the
/// store.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct SqliteError {
    message: String,
    code: Option<String>,
    #[source]
    source: rusqlite::Error,
}

impl SqliteError {
    /// The error of a statement bounded by `bound`.
    fn of(source: rusqlite::Error, bound: Duration) -> sqlx::Error {
        let (message, code) = match &source {
            rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::OperationInterrupted => {
                (format!("a statement stepped for longer than {bound:?} and was interrupted"), Some(e.extended_code))
            }
            rusqlite::Error::SqliteFailure(e, message) => {
                (message.clone().unwrap_or_else(|| source.to_string()), Some(e.extended_code))
            }
            other => (other.to_string(), None),
        };
        sqlx::Error::Database(Box::new(SqliteError { message, code: code.map(|c| c.to_string()), source }))
    }

    /// Whether `e` is SQLite's failure of kind `code`.
    fn failed_with(e: &sqlx::Error, code: rusqlite::ErrorCode) -> bool {
        matches!(e, sqlx::Error::Database(d) if d.try_downcast_ref::<SqliteError>().is_some_and(|r| matches!(
            &r.source,
            rusqlite::Error::SqliteFailure(failure, _) if failure.code == code
        )))
    }

    /// Whether the statement found the database locked by another connection (another
    /// process's write).
    pub(crate) fn busy(e: &sqlx::Error) -> bool {
        Self::failed_with(e, rusqlite::ErrorCode::DatabaseBusy)
    }

    /// Whether SQLite interrupted the statement at its bound.
    #[cfg(test)]
    pub(crate) fn interrupted(e: &sqlx::Error) -> bool {
        Self::failed_with(e, rusqlite::ErrorCode::OperationInterrupted)
    }
}

impl sqlx::error::DatabaseError for SqliteError {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        self.code.as_deref().map(Cow::Borrowed)
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    /// The kind of a constraint's failure, by SQLite's extended code (as sqlx's driver tells
    /// them: a unique index, a foreign key, a `NOT NULL`, a `CHECK`).
    fn kind(&self) -> sqlx::error::ErrorKind {
        use sqlx::error::ErrorKind;
        match &self.source {
            rusqlite::Error::SqliteFailure(e, _) => match e.extended_code {
                rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                    ErrorKind::UniqueViolation
                }
                rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY => ErrorKind::ForeignKeyViolation,
                rusqlite::ffi::SQLITE_CONSTRAINT_NOTNULL => ErrorKind::NotNullViolation,
                rusqlite::ffi::SQLITE_CONSTRAINT_CHECK => ErrorKind::CheckViolation,
                _ => ErrorKind::Other,
            },
            _ => ErrorKind::Other,
        }
    }
}

impl SqliteConn {
    /// Opens a read-only connection to the SQLite database of `url` (a `sqlite:` URL as the
    /// writer's).
    pub(crate) fn reader(url: &str) -> Result<Self, sqlx::Error> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let this = Self::open(url, flags, READ_BUSY_WAIT)?;
        Ok(this)
    }

    /// Opens the writer's connection to the SQLite database of `url`, created and migrated
    /// already: write-ahead log, synced at checkpoints (a commit survives a crash of the
    /// process; only an operating-system crash or a power loss can lose the last ones),
    /// statement journals in memory (a multi-row statement of a renewal batch would otherwise
    /// spill its journal to a temporary file), foreign keys enforced, and checkpoints left to
    /// the checkpointer up to `checkpoint_pages` of log.
    pub(crate) fn writer(url: &str, checkpoint_pages: u32) -> Result<Self, sqlx::Error> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        // SQLite never waits for a lock on the writer's behalf (it would sleep on the runtime's
        // thread): the store waits, asleep, and tries again (`db::SqliteWriter`).
        let this = Self::open(url, flags, Duration::ZERO)?;
        let pragmas = format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY; \
             PRAGMA foreign_keys = ON; PRAGMA wal_autocheckpoint = {checkpoint_pages};"
        );
        this.conn.execute_batch(&pragmas).map_err(|e| SqliteError::of(e, WRITE_BOUND))?;
        // `journal_mode` answers the mode it set; a database that cannot be in WAL mode (on a
        // file system without shared memory) would silently stay in its old one.
        let mode: String = this
            .conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .map_err(|e| SqliteError::of(e, WRITE_BOUND))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(sqlx::Error::Configuration(format!("the SQLite database is in {mode} mode, not WAL").into()));
        }
        Ok(this)
    }

    /// Opens the checkpointer's connection to the SQLite database of `url`
    /// ([`crate::checkpoints`]).
    pub(crate) fn checkpointer(url: &str) -> Result<Self, sqlx::Error> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        Self::open(url, flags, READ_BUSY_WAIT)
    }

    fn open(url: &str, flags: OpenFlags, busy_wait: Duration) -> Result<Self, sqlx::Error> {
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)?;
        let refused = |e| SqliteError::of(e, READ_BOUND);
        let conn = Connection::open_with_flags(options.get_filename(), flags).map_err(refused)?;
        conn.busy_timeout(busy_wait).map_err(refused)?;
        conn.set_prepared_statement_cache_capacity(CACHED_STATEMENTS);
        Ok(Self { conn })
    }

    /// Runs `sql` with `values` bound to its placeholders and answers its rows, at most `limit`
    /// of them, and the rows it changed (an `INSERT`, `UPDATE` or `DELETE`; 0 for any other);
    /// `persistent` keeps the statement prepared for the next run of it. Interrupted once it
    /// has stepped for `bound`.
    pub(crate) fn run(
        &mut self,
        sql: &str,
        values: &[Value<'_>],
        persistent: bool,
        limit: Option<usize>,
        bound: Duration,
    ) -> Result<(Vec<Row>, u64), sqlx::Error> {
        let deadline = Instant::now() + bound;
        self.conn.progress_handler(STEPS_BETWEEN_CHECKS, Some(move || Instant::now() > deadline));
        let ran = if persistent {
            let mut statement = self.conn.prepare_cached(sql).map_err(|e| SqliteError::of(e, bound))?;
            step(&mut statement, values, limit)
        } else {
            let mut statement = self.conn.prepare(sql).map_err(|e| SqliteError::of(e, bound))?;
            step(&mut statement, values, limit)
        };
        let (rows, changed) = ran.map_err(|e| SqliteError::of(e, bound))?;
        Ok((rows, if changed { self.conn.changes() } else { 0 }))
    }

    /// Copies what it can of the write-ahead log into the database without waiting for the
    /// writer or the readers (`PRAGMA wal_checkpoint(PASSIVE)`; the checkpointer's connection).
    pub(crate) fn checkpoint(&mut self) -> Result<(), sqlx::Error> {
        self.run("PRAGMA wal_checkpoint(PASSIVE)", &[], true, None, WRITE_BOUND).map(drop)
    }

    /// Whether a transaction is open on the connection.
    pub(crate) fn in_transaction(&self) -> bool {
        !self.conn.is_autocommit()
    }

    /// Rolls back the transaction open on the connection, if one is (SQLite may have ended it
    /// already, when a statement of it failed badly).
    pub(crate) fn roll_back(&mut self) -> Result<(), sqlx::Error> {
        if self.in_transaction() {
            self.run("ROLLBACK", &[], true, None, WRITE_BOUND)?;
        }
        Ok(())
    }
}

/// Binds `values` to `statement` (`$N` and `?N` by their number, `?` in order) and steps it:
/// its rows (at most `limit` of a read; a write is always stepped to its end, so that the
/// failure of its last step, such as the commit of a write outside a transaction, is its
/// answer), and whether it changes rows (not read-only).
fn step(
    statement: &mut Statement<'_>,
    values: &[Value<'_>],
    limit: Option<usize>,
) -> rusqlite::Result<(Vec<Row>, bool)> {
    for at in 1..=statement.parameter_count() {
        let number = match statement.parameter_name(at) {
            Some(name) => name.get(1..).and_then(|n| n.parse::<usize>().ok()).and_then(|n| n.checked_sub(1)),
            None => Some(at - 1),
        };
        let Some(value) = number.and_then(|n| values.get(n)) else {
            return Err(rusqlite::Error::InvalidParameterCount(values.len(), statement.parameter_count()));
        };
        match value {
            Value::Int(v) => statement.raw_bind_parameter(at, v)?,
            Value::Int4(v) => statement.raw_bind_parameter(at, v)?,
            Value::Real(v) => statement.raw_bind_parameter(at, v)?,
            Value::Bool(v) => statement.raw_bind_parameter(at, v)?,
            Value::Text(v) => statement.raw_bind_parameter(at, v.as_deref())?,
            Value::Bytes(v) => statement.raw_bind_parameter(at, v.as_deref())?,
        }
    }
    let changes = !statement.readonly();
    let mut rows = statement.raw_query();
    let mut read = Vec::new();
    let mut columns: Option<Arc<Columns>> = None;
    let limit = limit.filter(|_| !changes);
    while limit.is_none_or(|l| read.len() < l) {
        let Some(row) = rows.next()? else { break };
        // The names are read once the statement has stepped: SQLite prepares a statement again
        // at its first step after a change of schema, which may change its columns (`SELECT *`).
        let columns = match &columns {
            Some(columns) => columns.clone(),
            None => columns.insert(Arc::new(Columns::of(row.as_ref())?)).clone(),
        };
        let values = (0..columns.len()).map(|i| row.get_ref(i).map(Stored::from)).collect::<Result<Box<[_]>, _>>()?;
        read.push(Row { columns, values });
    }
    Ok((read, changes))
}

#[cfg(test)]
mod tests {
    use super::Columns;

    /// Each name is found at its place and by itself, never as part of a neighbour.
    #[test]
    fn column_names_share_one_text_and_are_found_whole() {
        let conn = rusqlite::Connection::open_in_memory().expect("an in-memory database");
        let statement = conn.prepare("SELECT 1 AS a, 'x' AS bb, NULL AS ccc, 2 AS é").expect("a statement");
        let columns = Columns::of(&statement).expect("its columns");
        assert_eq!(columns.len(), 4);
        let names: Vec<Option<&str>> = (0..5).map(|i| columns.name(i)).collect();
        assert_eq!(names, [Some("a"), Some("bb"), Some("ccc"), Some("é"), None]);
        assert_eq!(columns.position("bb"), Some(1));
        assert_eq!(columns.position("é"), Some(3));
        assert_eq!(columns.position("b"), None);
        assert_eq!(columns.position("abb"), None);
    }

    /// A statement kept prepared answers the names its columns have when it runs, also after a
    /// change of schema renamed or added one.
    #[test]
    fn a_prepared_statement_answers_the_names_its_columns_have_now() {
        let conn = rusqlite::Connection::open_in_memory().expect("an in-memory database");
        let mut conn = super::SqliteConn { conn };
        let bound = std::time::Duration::from_secs(5);
        let mut run = |sql: &str| conn.run(sql, &[], true, None, bound).expect("a statement").0;
        run("CREATE TABLE t (a INTEGER)");
        run("INSERT INTO t VALUES (1)");
        let first = run("SELECT * FROM t");
        assert_eq!((first[0].columns.position("a"), first[0].get::<i64>(0).expect("a")), (Some(0), 1));
        run("ALTER TABLE t RENAME COLUMN a TO c");
        let renamed = run("SELECT * FROM t");
        assert_eq!((renamed[0].columns.position("a"), renamed[0].columns.position("c")), (None, Some(0)));
        run("ALTER TABLE t ADD COLUMN b TEXT DEFAULT 'x'");
        let added = run("SELECT * FROM t");
        assert_eq!((added[0].len(), added[0].columns.position("b")), (2, Some(1)));
        assert_eq!(added[0].get::<String>(1).expect("b"), "x");
    }
}
