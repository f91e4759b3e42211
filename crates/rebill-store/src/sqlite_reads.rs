//! SQLite's read-only connections, stepped on the calling thread.
//!
//! sqlx's SQLite driver runs every connection on a thread of its own: a statement is sent to
//! that thread, and each row comes back as a message of its own, every value copied out of
//! SQLite (`sqlite3_value_dup`) on the way. For a page of 200 accounts that was a third of the
//! service's time: the rows' messages, the threads waking each other for them, and the copies.
//! A read here is prepared, bound and stepped in one call, on one thread (the store hands it to
//! tokio's blocking pool: one hand-off per read instead of one per row), and each row's values
//! are read once, into the row the store decodes ([`ReadRow`]).
//!
//! Every read is bounded in time: SQLite interrupts one that has stepped for longer than
//! [`READ_BOUND`], and the read fails ([`ReadError`]). A read of the store is a page, a
//! resource or a batch of at most 500 keys: well under a millisecond to a few milliseconds.

use std::borrow::Cow;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::types::{FromSql, Value as Stored, ValueRef};
use rusqlite::{Connection, OpenFlags, Statement};

use crate::values::Value;

/// How long one read may step before SQLite interrupts it.
pub(crate) const READ_BOUND: Duration = Duration::from_secs(5);

/// How long a read waits for a lock the writer holds (in WAL mode only while the log is
/// restarted or the database recovered).
const BUSY_WAIT: Duration = Duration::from_secs(1);

/// SQLite's virtual-machine steps between two looks at the clock ([`READ_BOUND`]).
const STEPS_BETWEEN_CHECKS: i32 = 10_000;

/// Statements each connection keeps prepared (sqlx's default for its connections).
const CACHED_STATEMENTS: usize = 100;

/// One read-only connection.
pub(crate) struct Reader {
    conn: Connection,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a read-only SQLite connection")
    }
}

/// A row read by a [`Reader`]: the statement's column names (shared by its rows) and the row's
/// values.
#[derive(Debug)]
pub(crate) struct ReadRow {
    columns: Arc<[Box<str>]>,
    values: Box<[Stored]>,
}

impl ReadRow {
    /// The value at `index`, decoded as `T`.
    pub(crate) fn get<T: FromSql>(&self, index: usize) -> Result<T, sqlx::Error> {
        let value =
            self.values.get(index).ok_or(sqlx::Error::ColumnIndexOutOfBounds { index, len: self.values.len() })?;
        T::column_result(ValueRef::from(value)).map_err(|e| sqlx::Error::ColumnDecode {
            index: self.columns.get(index).map(|c| c.to_string()).unwrap_or_else(|| index.to_string()),
            source: Box::new(e),
        })
    }

    /// Columns of the row.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }
}

impl sqlx::ColumnIndex<ReadRow> for &'_ str {
    fn index(&self, row: &ReadRow) -> Result<usize, sqlx::Error> {
        row.columns.iter().position(|c| **c == **self).ok_or_else(|| sqlx::Error::ColumnNotFound(self.to_string()))
    }
}

impl sqlx::ColumnIndex<ReadRow> for usize {
    fn index(&self, row: &ReadRow) -> Result<usize, sqlx::Error> {
        if *self < row.values.len() {
            Ok(*self)
        } else {
            Err(sqlx::Error::ColumnIndexOutOfBounds { index: *self, len: row.values.len() })
        }
    }
}

/// A read that SQLite refused or that ran past its bound, as a database error of the store.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct ReadError {
    message: String,
    code: Option<String>,
    #[source]
    source: rusqlite::Error,
}

impl ReadError {
    fn of(source: rusqlite::Error) -> sqlx::Error {
        let (message, code) = match &source {
            rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::OperationInterrupted => {
                (format!("a read stepped for longer than {READ_BOUND:?} and was interrupted"), Some(e.extended_code))
            }
            rusqlite::Error::SqliteFailure(e, message) => {
                (message.clone().unwrap_or_else(|| source.to_string()), Some(e.extended_code))
            }
            other => (other.to_string(), None),
        };
        sqlx::Error::Database(Box::new(ReadError { message, code: code.map(|c| c.to_string()), source }))
    }

    /// Whether SQLite interrupted the read at its bound.
    #[cfg(test)]
    pub(crate) fn interrupted(e: &sqlx::Error) -> bool {
        matches!(e, sqlx::Error::Database(d) if d.try_downcast_ref::<ReadError>().is_some_and(|r| matches!(
            &r.source,
            rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::OperationInterrupted
        )))
    }
}

impl sqlx::error::DatabaseError for ReadError {
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

    fn kind(&self) -> sqlx::error::ErrorKind {
        sqlx::error::ErrorKind::Other
    }
}

impl Reader {
    /// Opens a read-only connection to the SQLite database of `url` (a `sqlite:` URL as the
    /// writer's).
    pub(crate) fn open(url: &str) -> Result<Self, sqlx::Error> {
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(options.get_filename(), flags).map_err(ReadError::of)?;
        conn.busy_timeout(BUSY_WAIT).map_err(ReadError::of)?;
        conn.set_prepared_statement_cache_capacity(CACHED_STATEMENTS);
        Ok(Self { conn })
    }

    /// Runs `sql` with `values` bound to its placeholders and answers its rows, at most `limit`
    /// of them; `persistent` keeps the statement prepared for the next read of it. Interrupted
    /// once it has stepped for `bound`.
    pub(crate) fn read(
        &mut self,
        sql: &str,
        values: &[Value<'_>],
        persistent: bool,
        limit: Option<usize>,
        bound: Duration,
    ) -> Result<Vec<ReadRow>, sqlx::Error> {
        let deadline = Instant::now() + bound;
        self.conn.progress_handler(STEPS_BETWEEN_CHECKS, Some(move || Instant::now() > deadline));
        let rows = if persistent {
            let mut statement = self.conn.prepare_cached(sql).map_err(ReadError::of)?;
            step(&mut statement, values, limit)
        } else {
            let mut statement = self.conn.prepare(sql).map_err(ReadError::of)?;
            step(&mut statement, values, limit)
        };
        rows.map_err(ReadError::of)
    }
}

/// Binds `values` to `statement` (`$N` and `?N` by their number, `?` in order) and steps it.
fn step(statement: &mut Statement<'_>, values: &[Value<'_>], limit: Option<usize>) -> rusqlite::Result<Vec<ReadRow>> {
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
    let columns: Arc<[Box<str>]> = statement.column_names().into_iter().map(Box::from).collect();
    let count = columns.len();
    let mut rows = statement.raw_query();
    let mut read = Vec::new();
    while limit.is_none_or(|l| read.len() < l) {
        let Some(row) = rows.next()? else { break };
        let values = (0..count).map(|i| row.get_ref(i).map(Stored::from)).collect::<Result<Box<[_]>, _>>()?;
        read.push(ReadRow { columns: columns.clone(), values });
    }
    Ok(read)
}
