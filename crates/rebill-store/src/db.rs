//! The one module that runs statements: the pool, connection, transaction, row and query types
//! every other module of the store goes through. PostgreSQL runs on sqlx's driver
//! (`sqlx-postgres`), SQLite on connections of the store's own that step a statement where it
//! is called ([`crate::sqlite`], on `rusqlite` over the SQLite sqlx bundles; sqlx's SQLite
//! driver only migrates the database when the store opens). A statement is written once
//! ([`query`]), its values kept as [`Value`]s until it runs, and then bound and run on the
//! connection it is given ([`Exec`]). A row stays its driver's own row ([`DbRow`]) and is
//! decoded from it directly: nothing is converted into a third, common form (the cost
//! `sqlx::Any` had on every row). SQL text that differs between the backends lives in
//! [`crate::dialect`].

use std::borrow::Cow;
use std::sync::Arc;

use sqlx::Postgres;
#[cfg(test)]
use sqlx::pool::PoolConnection;
use sqlx::pool::PoolOptions;
use sqlx::postgres::{PgArguments, PgConnection, PgPool, PgRow};
use tokio::sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard};

use crate::sqlite::{READ_BOUND, Row, SqliteConn, SqliteError, WRITE_BOUND};
pub(crate) use crate::values::Value;

/// Counts of values up to which every statement built from the count stays in the connection's
/// statement cache ([`counted`]): the request path's one-row writes and short lists.
const SMALL_COUNT: usize = 4;
/// The largest power of two that [`counted`] keeps in the cache beyond [`SMALL_COUNT`].
const LARGEST_CACHED_COUNT: usize = 256;

/// Whether a statement built from `count` values stays in the connection's statement cache:
/// counts up to [`SMALL_COUNT`], and powers of two up to [`LARGEST_CACHED_COUNT`]. A batch
/// that fills its size (the scheduler claims a power of two of jobs at a time) runs its
/// multi-row statements prepared, and a statement takes at most 10 places in the cache.
pub(crate) fn cached_count(count: usize) -> bool {
    count <= SMALL_COUNT || (count.is_power_of_two() && count <= LARGEST_CACHED_COUNT)
}

/// A statement, kept in the connection's statement cache (as sqlx keeps every statement by
/// default).
pub(crate) fn query(sql: &str) -> DbQuery<'_> {
    DbQuery { sql, values: Vec::new(), persistent: true }
}

/// A statement whose text is built from a count of values (an `IN` list, a multi-row `VALUES`
/// list): kept in the connection's statement cache only for the counts [`cached_count`]
/// answers, and otherwise prepared for this one execution. Every count is a statement of its
/// own, and the caches (100 statements per connection, each holding its parameter and column
/// types) would otherwise fill with the batch sizes of the day and push out the fixed
/// statements.
pub(crate) fn counted(sql: &str, count: usize) -> DbQuery<'_> {
    query(sql).persistent(cached_count(count))
}

/// A statement whose text is new on each call (values written into it, such as a list of
/// ids): prepared for this one execution and never kept in the connection's statement cache.
pub(crate) fn uncached(sql: &str) -> DbQuery<'_> {
    query(sql).persistent(false)
}

// ---------------------------------------------------------------------------------------------
// Statements and their values

/// A statement with its values, run on whichever backend's connection it is given.
#[derive(Debug, Clone)]
#[must_use = "a statement does nothing until it is run"]
pub(crate) struct DbQuery<'q> {
    sql: &'q str,
    values: Vec<Value<'q>>,
    persistent: bool,
}

/// What a statement that returns no rows did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Done {
    rows_affected: u64,
}

impl Done {
    /// Rows the statement inserted, changed or deleted.
    pub(crate) fn rows_affected(&self) -> u64 {
        self.rows_affected
    }
}

impl<'q> DbQuery<'q> {
    /// The statement with one more value bound (to the next placeholder).
    pub(crate) fn bind(mut self, value: impl Into<Value<'q>>) -> Self {
        self.values.push(value.into());
        self
    }

    /// Whether the statement is kept in the connection's statement cache.
    pub(crate) fn persistent(mut self, persistent: bool) -> Self {
        self.persistent = persistent;
        self
    }

    /// The statement for PostgreSQL's driver.
    fn postgres(self) -> sqlx::query::Query<'q, Postgres, PgArguments> {
        bound(sqlx::query::<Postgres>(self.sql).persistent(self.persistent), self.values)
    }

    /// Runs the statement on SQLite's writer connection `conn` (where it is called: the
    /// statements of the request path take microseconds, and a hand-off to another thread and
    /// back would cost more than they do).
    fn on_writer(&self, conn: &mut SqliteConn, limit: Option<usize>) -> Result<(Vec<Row>, u64), sqlx::Error> {
        conn.run(self.sql, &self.values, self.persistent, limit, WRITE_BOUND)
    }

    /// Runs the statement on SQLite's writer: borrowed for it (waiting, asleep, while another
    /// process holds the database's write lock), in a transaction, or held by the caller.
    async fn on_sqlite(&self, on: SqliteWrite<'_>, limit: Option<usize>) -> Result<(Vec<Row>, u64), sqlx::Error> {
        match on {
            SqliteWrite::Lent(writer) => {
                let mut conn = writer.lend().await?;
                unless_busy(|| self.on_writer(&mut conn, limit)).await
            }
            SqliteWrite::Tx(conn) => {
                // SQLite ends a transaction by itself when a statement of it fails badly (an
                // I/O error, a full disk, a statement interrupted at its bound): what follows
                // must not run on its own, outside it.
                if !conn.in_transaction() {
                    return Err(sqlx::Error::Protocol(
                        "the SQLite transaction was rolled back by a failed statement".into(),
                    ));
                }
                self.on_writer(conn, limit)
            }
            #[cfg(test)]
            SqliteWrite::Held(conn) => self.on_writer(conn, limit),
        }
    }

    /// Runs the statement and answers what it did.
    pub(crate) async fn execute<'e>(self, on: impl Into<Exec<'e>>) -> Result<Done, sqlx::Error> {
        let rows_affected = match on.into() {
            Exec::Sqlite(on) => self.on_sqlite(on, None).await?.1,
            // Read-only: a statement run there changes no row.
            Exec::Readers(readers) => readers.read(&self, None).await.map(|_| 0)?,
            Exec::PgPool(pool) => self.postgres().execute(pool).await?.rows_affected(),
            Exec::Postgres(conn) => self.postgres().execute(conn).await?.rows_affected(),
        };
        Ok(Done { rows_affected })
    }

    /// Runs the statement and answers every row it returned.
    pub(crate) async fn fetch_all<'e>(self, on: impl Into<Exec<'e>>) -> Result<Vec<DbRow>, sqlx::Error> {
        Ok(match on.into() {
            Exec::Sqlite(on) => self.on_sqlite(on, None).await?.0.into_iter().map(DbRow::Sqlite).collect(),
            Exec::Readers(readers) => readers.read(&self, None).await?.into_iter().map(DbRow::Sqlite).collect(),
            Exec::PgPool(pool) => self.postgres().fetch_all(pool).await?.into_iter().map(DbRow::Postgres).collect(),
            Exec::Postgres(conn) => self.postgres().fetch_all(conn).await?.into_iter().map(DbRow::Postgres).collect(),
        })
    }

    /// Runs the statement and answers its first row, if it returned one.
    pub(crate) async fn fetch_optional<'e>(self, on: impl Into<Exec<'e>>) -> Result<Option<DbRow>, sqlx::Error> {
        Ok(match on.into() {
            // A write is stepped to its end all the same (`sqlite::SqliteConn::run`).
            Exec::Sqlite(on) => self.on_sqlite(on, Some(1)).await?.0.pop().map(DbRow::Sqlite),
            Exec::Readers(readers) => readers.read(&self, Some(1)).await?.pop().map(DbRow::Sqlite),
            Exec::PgPool(pool) => self.postgres().fetch_optional(pool).await?.map(DbRow::Postgres),
            Exec::Postgres(conn) => self.postgres().fetch_optional(conn).await?.map(DbRow::Postgres),
        })
    }

    /// Runs the statement and answers its first row; no row is [`sqlx::Error::RowNotFound`].
    pub(crate) async fn fetch_one<'e>(self, on: impl Into<Exec<'e>>) -> Result<DbRow, sqlx::Error> {
        self.fetch_optional(on).await?.ok_or(sqlx::Error::RowNotFound)
    }
}

/// `query` with `values` bound, in order, by the driver of `DB` (PostgreSQL's).
fn bound<'q, DB: sqlx::Database>(
    mut query: sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments<'q>>,
    values: Vec<Value<'q>>,
) -> sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments<'q>>
where
    Option<i64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<i32>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<f64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<bool>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<Cow<'q, str>>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<Vec<u8>>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    for value in values {
        query = match value {
            Value::Int(v) => query.bind(v),
            Value::Int4(v) => query.bind(v),
            Value::Real(v) => query.bind(v),
            Value::Bool(v) => query.bind(v),
            Value::Text(v) => query.bind(v),
            Value::Bytes(v) => query.bind(v),
        };
    }
    query
}

/// A row as its backend's driver read it.
pub(crate) enum DbRow {
    /// Read from SQLite ([`crate::sqlite`]).
    Sqlite(Row),
    /// Read from PostgreSQL.
    Postgres(PgRow),
}

impl std::fmt::Debug for DbRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (backend, columns) = match self {
            DbRow::Sqlite(row) => ("SQLite", row.len()),
            DbRow::Postgres(row) => ("PostgreSQL", sqlx::Row::len(row)),
        };
        write!(f, "a {backend} row of {columns} columns")
    }
}

impl DbRow {
    /// The value of column `index` (a name or a position), decoded by the row's own driver.
    pub(crate) fn try_get<'r, T, I>(&'r self, index: I) -> Result<T, sqlx::Error>
    where
        T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres> + rusqlite::types::FromSql,
        I: sqlx::ColumnIndex<PgRow> + sqlx::ColumnIndex<Row>,
    {
        match self {
            DbRow::Sqlite(row) => row.get(index.index(row)?),
            DbRow::Postgres(row) => sqlx::Row::try_get(row, index),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Where statements run

/// Where a statement runs: a pool, a connection (a transaction's, a pooled one, one of its own)
/// or SQLite's read-only connections.
pub(crate) enum Exec<'e> {
    /// SQLite's writer.
    Sqlite(SqliteWrite<'e>),
    /// One of SQLite's read-only connections.
    Readers(&'e SqliteReaders),
    /// A connection of PostgreSQL's pool.
    PgPool(&'e PgPool),
    /// A PostgreSQL connection.
    Postgres(&'e mut PgConnection),
}

impl<'e> From<&'e Pool> for Exec<'e> {
    fn from(pool: &'e Pool) -> Self {
        match pool {
            Pool::Sqlite(writer) => Exec::Sqlite(SqliteWrite::Lent(writer)),
            Pool::Postgres(pool) => Exec::PgPool(pool),
        }
    }
}

impl<'e> From<&'e Readers> for Exec<'e> {
    fn from(readers: &'e Readers) -> Self {
        match readers {
            Readers::Shared(pool) => Exec::PgPool(pool),
            Readers::Sqlite(readers) => Exec::Readers(readers),
        }
    }
}

impl<'e> From<&'e mut Tx> for Exec<'e> {
    fn from(tx: &'e mut Tx) -> Self {
        match tx {
            Tx::Sqlite(tx) => Exec::Sqlite(SqliteWrite::Tx(&mut tx.conn)),
            Tx::Postgres(tx) => Exec::Postgres(tx),
        }
    }
}

#[cfg(any(test, feature = "testing"))]
impl<'e> From<&'e mut Conn> for Exec<'e> {
    fn from(conn: &'e mut Conn) -> Self {
        Exec::Postgres(&mut conn.0)
    }
}

#[cfg(test)]
impl<'e> From<&'e mut PooledConn> for Exec<'e> {
    fn from(conn: &'e mut PooledConn) -> Self {
        match conn {
            PooledConn::Sqlite(conn) => Exec::Sqlite(SqliteWrite::Held(conn)),
            PooledConn::Postgres(conn) => Exec::Postgres(conn),
        }
    }
}

/// SQLite's writer where a statement runs: borrowed for the statement, in a transaction, or
/// held by the caller.
pub(crate) enum SqliteWrite<'e> {
    /// The writer, borrowed for this statement.
    Lent(&'e SqliteWriter),
    /// The writer's connection, in a transaction ([`SqliteTx`]).
    Tx(&'e mut SqliteConn),
    /// The writer's connection, held by the caller outside a transaction (tests).
    #[cfg(test)]
    Held(&'e mut SqliteConn),
}

/// How long a write waits for another process's write lock on the database (an administrative
/// command beside the service; sqlx's default for its connections).
const WRITER_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `attempt` until it does not find the database locked by another process, asleep between
/// tries (1 ms, doubling up to 50 ms), for at most [`WRITER_BUSY_WAIT`]. SQLite itself never
/// waits on the writer's behalf, which would block the runtime's thread.
async fn unless_busy<T>(mut attempt: impl FnMut() -> Result<T, sqlx::Error>) -> Result<T, sqlx::Error> {
    let started = tokio::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match attempt() {
            Err(e) if SqliteError::busy(&e) && started.elapsed() < WRITER_BUSY_WAIT => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            answer => return answer,
        }
    }
}

/// How long a write waits for SQLite's writer (sqlx's pools wait as long).
const WRITER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The writer's connection while it is lent: the mutex's guard, mapped to the open connection.
type LentWriter = OwnedMappedMutexGuard<Option<SqliteConn>, SqliteConn>;

/// SQLite's one writer connection ([`SqliteConn::writer`]), lent to one transaction or
/// statement at a time; its statements run on the thread that calls them. `None` once closed.
#[derive(Debug, Clone)]
pub(crate) struct SqliteWriter {
    conn: Arc<Mutex<Option<SqliteConn>>>,
}

impl SqliteWriter {
    /// Opens the writer of the SQLite database at `url` (migrated already).
    pub(crate) fn open(url: &str) -> Result<Self, sqlx::Error> {
        let conn = SqliteConn::writer(url, crate::checkpoints::WRITER_CHECKPOINT_PAGES)?;
        Ok(Self { conn: Arc::new(Mutex::new(Some(conn))) })
    }

    /// The writer's connection, once no one else holds it, outside any transaction.
    async fn lend(&self) -> Result<LentWriter, sqlx::Error> {
        let guard = tokio::time::timeout(WRITER_WAIT, self.conn.clone().lock_owned())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?;
        let mut conn = OwnedMutexGuard::try_map(guard, Option::as_mut).map_err(|_| sqlx::Error::PoolClosed)?;
        // A transaction whose rollback failed when it was dropped is rolled back now; the
        // writer is never lent inside someone else's transaction.
        conn.roll_back()?;
        Ok(conn)
    }

    /// Whether the connection is open, and whether no one holds it.
    fn state(&self) -> (bool, bool) {
        match self.conn.try_lock() {
            Ok(conn) => (conn.is_some(), conn.is_some()),
            Err(_) => (true, false),
        }
    }

    /// Closes the connection once it is given back.
    async fn close(&self) {
        let conn = self.conn.lock().await.take();
        drop(conn);
    }
}

/// A pool of connections to one backend.
#[derive(Debug, Clone)]
pub(crate) enum Pool {
    /// SQLite: the one writer connection.
    Sqlite(SqliteWriter),
    /// PostgreSQL: the connections for writes and reads.
    Postgres(PgPool),
}

impl Pool {
    /// A connection of the pool, until the value is dropped.
    #[cfg(test)]
    pub(crate) async fn acquire(&self) -> Result<PooledConn, sqlx::Error> {
        Ok(match self {
            Pool::Sqlite(writer) => PooledConn::Sqlite(writer.lend().await?),
            Pool::Postgres(pool) => PooledConn::Postgres(pool.acquire().await?),
        })
    }

    /// Connections open now.
    pub(crate) fn size(&self) -> u32 {
        match self {
            Pool::Sqlite(writer) => u32::from(writer.state().0),
            Pool::Postgres(pool) => pool.size(),
        }
    }

    /// Connections open and not lent out.
    pub(crate) fn num_idle(&self) -> usize {
        match self {
            Pool::Sqlite(writer) => usize::from(writer.state().1),
            Pool::Postgres(pool) => pool.num_idle(),
        }
    }

    /// Closes the pool once its connections have come back (see [`close_pool`]).
    pub(crate) async fn close(&self) {
        match self {
            Pool::Sqlite(writer) => writer.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }
}

/// A connection lent by a [`Pool`].
#[cfg(test)]
#[derive(Debug)]
pub(crate) enum PooledConn {
    /// SQLite's writer.
    Sqlite(LentWriter),
    /// A PostgreSQL connection.
    Postgres(PoolConnection<Postgres>),
}

#[cfg(test)]
impl PooledConn {
    /// Where statements on this connection run.
    pub(crate) fn exec(&mut self) -> Exec<'_> {
        self.into()
    }
}

/// A PostgreSQL connection of its own, outside every pool (administration of test databases).
#[cfg(any(test, feature = "testing"))]
#[derive(Debug)]
pub(crate) struct Conn(PgConnection);

#[cfg(any(test, feature = "testing"))]
impl Conn {
    /// Connects to the PostgreSQL database at `url`.
    pub(crate) async fn postgres(url: &str) -> Result<Self, sqlx::Error> {
        Ok(Conn(<PgConnection as sqlx::Connection>::connect(url).await?))
    }

    /// Where statements on this connection run.
    pub(crate) fn exec(&mut self) -> Exec<'_> {
        self.into()
    }

    /// Closes the connection cleanly.
    pub(crate) async fn close(self) -> Result<(), sqlx::Error> {
        sqlx::Connection::close(self.0).await
    }
}

/// An open database transaction; dropped without [`Tx::commit`], it is rolled back.
#[derive(Debug)]
pub(crate) enum Tx {
    /// On SQLite's writer.
    Sqlite(SqliteTx),
    /// On a PostgreSQL connection.
    Postgres(sqlx::Transaction<'static, Postgres>),
}

impl Tx {
    /// Where statements of this transaction run.
    pub(crate) fn exec(&mut self) -> Exec<'_> {
        self.into()
    }

    /// Commits the transaction. On PostgreSQL the `COMMIT` runs in a task of its own, as
    /// [`begin`]'s `BEGIN` does, so that it completes even when the caller is dropped half-way;
    /// SQLite's `COMMIT` runs where it is called, within one poll, and cannot be cut in two.
    ///
    /// sqlx's PostgreSQL `COMMIT` is not cancel-safe (sqlx 0.8.6): dropped once it has sent the
    /// `COMMIT`, the transaction still counts as open, so its drop queues a `ROLLBACK` behind it
    /// on the same connection (PostgreSQL answers `there is no transaction in progress`), and
    /// the caller never learns whether its writes were committed.
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(mut tx) => tx.conn.run("COMMIT", &[], true, None, WRITE_BOUND).map(drop),
            Tx::Postgres(tx) => to_the_end("committing a transaction", tx.commit()).await,
        }
    }

    /// Rolls the transaction back (on PostgreSQL in a task of its own, as [`Tx::commit`]: a
    /// `ROLLBACK` cut half-way would be followed by a second one).
    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(mut tx) => tx.conn.roll_back(),
            Tx::Postgres(tx) => to_the_end("rolling a transaction back", tx.rollback()).await,
        }
    }
}

/// Runs `step` (a `BEGIN`, `COMMIT` or `ROLLBACK` on PostgreSQL) in a task of its own and
/// answers its result: it runs to its end even when the caller is dropped while waiting for it.
/// A task that could not finish (it panicked, or the runtime is shutting down) is an I/O error
/// naming `what`.
async fn to_the_end<T: Send + 'static>(
    what: &'static str,
    step: impl std::future::Future<Output = Result<T, sqlx::Error>> + Send + 'static,
) -> Result<T, sqlx::Error> {
    tokio::spawn(step).await.map_err(|e| sqlx::Error::Io(std::io::Error::other(format!("{what}: {e}"))))?
}

/// A transaction on SQLite's writer (`BEGIN IMMEDIATE`: it holds the database's write lock
/// from its start, so it never fails half way for a write lock another process took), holding
/// the writer until it ends. Dropped while open (not committed, its caller gone), it is rolled
/// back there and then.
#[derive(Debug)]
pub(crate) struct SqliteTx {
    conn: LentWriter,
}

impl SqliteTx {
    /// Begins a transaction on the writer, once no one else holds it.
    async fn begin(writer: &SqliteWriter) -> Result<Self, sqlx::Error> {
        let mut conn = writer.lend().await?;
        unless_busy(|| conn.run("BEGIN IMMEDIATE", &[], true, None, WRITE_BOUND)).await?;
        Ok(Self { conn })
    }
}

impl Drop for SqliteTx {
    fn drop(&mut self) {
        // Nothing to undo once committed or rolled back (by its owner or by SQLite itself).
        if let Err(error) = self.conn.roll_back() {
            tracing::error!(%error, "rolling back an abandoned SQLite transaction");
        }
    }
}

/// How long a connection may have been idle in its pool and still be handed out without a
/// ping ([`pool_options`]).
pub(crate) const TRUSTED_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

/// Pool options for either backend's driver.
///
/// A connection is pinged when it goes back to its pool (sqlx always does) and, when taken
/// out, only if it has been idle for more than [`TRUSTED_IDLE`]: one that came back alive
/// within the last second is handed out as it is. sqlx's default pings on every acquire,
/// which made each statement outside a transaction three round trips (to the server on
/// PostgreSQL, to the connection's thread on SQLite) instead of two. A connection that died in
/// that second fails its next statement, and the ping of its return then drops it.
pub(crate) fn pool_options<DB: sqlx::Database>() -> PoolOptions<DB> {
    PoolOptions::<DB>::new().test_before_acquire(false).before_acquire(|conn, meta| {
        Box::pin(async move {
            if meta.idle_for > TRUSTED_IDLE {
                sqlx::Connection::ping(conn).await?;
            }
            Ok(true)
        })
    })
}

/// How long a read waits for one of SQLite's read-only connections (sqlx's pools wait as long).
const READER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The connections for reads that stand alone: on PostgreSQL the writer's pool, on SQLite
/// read-only connections beside the writer (WAL allows them), stepped on a thread of tokio's
/// blocking pool ([`crate::sqlite`]) and lent by `deadpool`'s unmanaged pool. `&Readers` is a place to
/// run a statement ([`Exec`]) like `&Pool`.
///
/// A read-only SQLite connection keeps nothing between statements (it never opens a
/// transaction, and a statement is reset once its rows are read), so it goes back to the pool
/// as it is, with no ping.
#[derive(Debug, Clone)]
pub(crate) enum Readers {
    /// PostgreSQL: the writer's pool.
    Shared(PgPool),
    /// SQLite: the read-only connections.
    Sqlite(SqliteReaders),
}

/// SQLite's read-only connections ([`Readers::Sqlite`]).
#[derive(Debug, Clone)]
pub(crate) struct SqliteReaders {
    connections: deadpool::unmanaged::Pool<SqliteConn>,
    /// How long one read may step ([`READ_BOUND`]; shorter in tests).
    bound: std::time::Duration,
}

impl Readers {
    /// Opens `count` read-only connections to the SQLite database at `url`.
    pub(crate) fn sqlite(url: &str, count: usize) -> Result<Self, sqlx::Error> {
        let connections = (0..count).map(|_| SqliteConn::reader(url)).collect::<Result<Vec<_>, _>>()?;
        Ok(Self::Sqlite(SqliteReaders { connections: connections.into(), bound: READ_BOUND }))
    }

    /// Connections open now and those of them not lent out.
    pub(crate) fn usage(&self) -> (u32, u32) {
        match self {
            Readers::Shared(pool) => (pool.size(), u32::try_from(pool.num_idle()).unwrap_or(u32::MAX)),
            Readers::Sqlite(readers) => {
                let status = readers.connections.status();
                let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
                (count(status.size), count(status.available))
            }
        }
    }

    /// Closes every connection once it has come back (see [`close_pool`]).
    pub(crate) async fn close(&self) {
        match self {
            Readers::Shared(pool) => close_pool(&Pool::Postgres(pool.clone())).await,
            Readers::Sqlite(readers) => {
                while readers.connections.status().size > 0 {
                    // Waits for a connection in use to come back, then takes it out for good
                    // (closed as it is dropped).
                    let Ok(conn) = readers.connections.remove().await else { break };
                    drop(conn);
                }
                readers.connections.close();
            }
        }
    }
}

impl SqliteReaders {
    async fn lend(&self) -> Result<deadpool::unmanaged::Object<SqliteConn>, sqlx::Error> {
        match tokio::time::timeout(READER_WAIT, self.connections.get()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(_)) => Err(sqlx::Error::PoolClosed),
            Err(_) => Err(sqlx::Error::PoolTimedOut),
        }
    }

    /// Runs `query` on a lent connection and answers its rows, at most `limit` of them. The
    /// read steps on a thread of tokio's blocking pool: one hand-off there and back per read,
    /// where sqlx's driver made one per row, and the runtime's workers go on serving meanwhile.
    /// A caller that goes away leaves the read to finish (within its bound) and the connection
    /// to come back.
    async fn read(&self, query: &DbQuery<'_>, limit: Option<usize>) -> Result<Vec<Row>, sqlx::Error> {
        let mut conn = self.lend().await?;
        let sql = query.sql.to_owned();
        let values: Vec<Value<'static>> = query.values.iter().map(Value::to_static).collect();
        let (persistent, bound) = (query.persistent, self.bound);
        let (rows, _) =
            tokio::task::spawn_blocking(move || conn.run(&sql, &values, persistent, limit, bound))
                .await
                .map_err(|e| sqlx::Error::Io(std::io::Error::other(format!("a read on a blocking thread: {e}"))))??;
        Ok(rows)
    }

    /// The same connections with reads bounded by `bound` instead of [`READ_BOUND`].
    #[cfg(test)]
    pub(crate) fn bounded(&self, bound: std::time::Duration) -> Self {
        Self { connections: self.connections.clone(), bound }
    }
}

/// Begins a transaction on a connection of `pool`. On PostgreSQL it is begun in a task of its
/// own so that it completes even when the caller is dropped half-way (a client that went away,
/// a timeout); SQLite's `BEGIN` runs where it is called and cannot be cut in two.
///
/// sqlx's PostgreSQL `BEGIN` is not cancel-safe (sqlx 0.8.6 and 0.9.0): it counts the
/// transaction only once the server has answered, so a caller dropped while waiting leaves the
/// session inside a transaction that nothing rolls back, and the pool lends that connection on.
/// The next borrower's statements then run inside it, unseen by everyone else and holding
/// their locks (a token or a claim never committed). Here the `BEGIN` always completes; a
/// transaction whose caller has gone is dropped in the task, and sqlx rolls it back before the
/// connection goes back to the pool.
pub(crate) async fn begin(pool: &Pool) -> Result<Tx, sqlx::Error> {
    match pool {
        Pool::Sqlite(writer) => Ok(Tx::Sqlite(SqliteTx::begin(writer).await?)),
        Pool::Postgres(pool) => {
            let pool = pool.clone();
            to_the_end("beginning a transaction", async move { Ok(Tx::Postgres(pool.begin().await?)) }).await
        }
    }
}

/// Closes `pool` once the connections in use have come back. sqlx's close waits for them, but
/// closes only those idle before its last wait: one given back during that wait would stay
/// open. So it is closed again until none is left.
pub(crate) async fn close_pool(pool: &Pool) {
    pool.close().await;
    while pool.size() > 0 {
        pool.close().await;
    }
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

/// SQLSTATEs of a database that cannot take the work now, whatever the work: a connection
/// exception (class `08`), the server shutting down or starting (`57P01` admin_shutdown,
/// `57P02` crash_shutdown, `57P03` cannot_connect_now), and a write reaching a server that is
/// read-only (`25006`: a standby, e.g. an old primary a failover demoted before the routing
/// learnt of it).
const UNAVAILABLE_STATES: [&str; 4] = ["57P01", "57P02", "57P03", "25006"];

/// Whether the statement failed because no writable database answered (the connection was
/// lost or could not be made, the pool gave none in time, the server is going away or is a
/// standby), not because of the statement: the same work may succeed once a primary answers.
pub(crate) fn is_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(d) => {
            d.code().is_some_and(|c| c.starts_with("08") || UNAVAILABLE_STATES.contains(&c.as_ref()))
        }
        _ => false,
    }
}

/// SQLite's plan of `explain` (an `EXPLAIN QUERY PLAN` statement with its values bound): the
/// steps' details joined by `; ` (tests of which index a statement uses).
#[cfg(test)]
pub(crate) async fn query_plan(pool: &Pool, explain: DbQuery<'_>) -> String {
    let rows = explain.fetch_all(pool).await.expect("the plan");
    rows.iter().map(|row| row.try_get::<String, _>("detail").expect("detail")).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::{Conn, Exec, cached_count, counted, query, uncached};
    use crate::testing::fresh_postgres_database;

    /// The statements PostgreSQL holds prepared for this connection (the server's view of the
    /// driver's statement cache).
    async fn prepared(conn: Exec<'_>) -> i64 {
        let row = query("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM pg_prepared_statements")
            .fetch_one(conn)
            .await
            .expect("the prepared statements");
        row.try_get("n").expect("n")
    }

    /// The counts kept: the small ones and the powers of two up to 256, ten in all.
    #[test]
    fn small_counts_and_powers_of_two_are_cached() {
        let kept: Vec<usize> = (0..=10_000).filter(|&n| cached_count(n)).collect();
        assert_eq!(kept, [0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 256]);
    }

    /// Statements built from counts of 1 to 300 values take 10 places among the connection's
    /// prepared statements (the small counts and the powers of two), and statements written anew
    /// on each call take none; the answers are those of cached statements. (SQLite's driver
    /// takes the same flag; its cache cannot be seen from outside.)
    #[tokio::test]
    async fn statements_built_from_counts_stay_out_of_the_statement_cache() {
        let database = fresh_postgres_database("counted").await;
        let store = crate::Store::connect(database.url()).await.expect("a PostgreSQL store");
        let mut conn = store.pool.acquire().await.expect("a connection");
        let before = prepared(conn.exec()).await;
        for n in 1..=300usize {
            let sql =
                format!("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM (VALUES {}) AS v", store.backend.rows(n, 1, 1));
            let mut query = counted(&sql, n);
            for i in 0..n {
                query = query.bind(i64::try_from(i).expect("small"));
            }
            let row = query.fetch_one(conn.exec()).await.expect("the count");
            assert_eq!(row.try_get::<i64, _>("n").expect("n"), i64::try_from(n).expect("small"));
        }
        assert_eq!(prepared(conn.exec()).await - before, 10);
        for id in 0..40 {
            let sql = format!("SELECT CAST($1 + {id} AS BIGINT) AS n");
            let row = uncached(&sql).bind(1i64).fetch_one(conn.exec()).await.expect("the sum");
            assert_eq!(row.try_get::<i64, _>("n").expect("n"), id + 1);
        }
        assert_eq!(prepared(conn.exec()).await - before, 10);
    }

    /// A connection that died while idle in the pool for longer than [`super::TRUSTED_IDLE`] is
    /// pinged when taken out, found dead and replaced: the read answers as if nothing happened.
    /// (Connections idle for less are handed out without the ping.)
    #[tokio::test]
    async fn a_connection_that_died_while_idle_is_replaced_before_use() {
        let database = fresh_postgres_database("idle_ping").await;
        let store = crate::Store::connect(database.url()).await.expect("a PostgreSQL store");
        store.sites().await.expect("a read");
        let mut admin = Conn::postgres(database.url()).await.expect("an administrative connection");
        let killed = query(
            "SELECT CAST(COUNT(pg_terminate_backend(pid)) AS BIGINT) AS n FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_one(admin.exec())
        .await
        .expect("the pool's connections ended");
        assert!(killed.try_get::<i64, _>("n").expect("n") >= 1, "the pool held a connection");
        // Idle for longer than the pool trusts a connection without a ping.
        tokio::time::sleep(super::TRUSTED_IDLE + std::time::Duration::from_millis(200)).await;
        store.sites().await.expect("a read through a new connection");
    }

    /// A transaction whose caller is dropped while PostgreSQL has not answered its `BEGIN` yet
    /// leaves no open transaction on the connection: the next borrower's writes are committed
    /// and seen by everyone. (Through sqlx's own `Pool::begin` the write is lost inside the
    /// abandoned transaction.)
    #[tokio::test]
    async fn a_begin_dropped_half_way_leaves_no_transaction_behind() {
        let database = fresh_postgres_database("cancelled_begin").await;
        // One connection, so every borrower gets the one the abandoned BEGIN ran on.
        let pool = super::Pool::Postgres(
            super::pool_options().max_connections(1).connect(database.url()).await.expect("a pool"),
        );
        query("CREATE TABLE written (n BIGINT)").execute(&pool).await.expect("a table");
        let mut admin = Conn::postgres(database.url()).await.expect("an administrative connection");
        for n in 1..=10i64 {
            {
                let mut begin = std::pin::pin!(super::begin(&pool));
                assert!(begin.as_mut().now_or_never().is_none(), "the BEGIN is under way");
            }
            query("INSERT INTO written (n) VALUES ($1)").bind(n).execute(&pool).await.expect("a write");
            let row = query("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM written")
                .fetch_one(admin.exec())
                .await
                .expect("the count");
            assert_eq!(row.try_get::<i64, _>("n").expect("n"), n, "every write is committed");
        }
        // The statistics view lags its sessions by a moment: a session left in a transaction stays
        // so, one reported a moment late is gone at the next look.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let open = query(
                "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM pg_stat_activity \
                 WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
            )
            .fetch_one(admin.exec())
            .await
            .expect("the sessions");
            let open = open.try_get::<i64, _>("n").expect("n");
            if open == 0 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no session is left in a transaction: {open} are");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        super::close_pool(&pool).await;
    }

    /// A transaction whose caller is dropped while PostgreSQL has not answered its `COMMIT` yet
    /// is committed all the same, and nothing follows the `COMMIT` on its connection before the
    /// connection goes back to the pool. (Through sqlx's own `commit` the transaction still
    /// counts as open when it is dropped, so a `ROLLBACK` follows the `COMMIT` on the same
    /// connection, answered `there is no transaction in progress`: it is then the last
    /// statement the connection ran.)
    #[tokio::test]
    async fn a_commit_dropped_half_way_commits_and_nothing_follows_it() {
        let database = fresh_postgres_database("cancelled_commit").await;
        // One connection: every transaction runs on it, and it is the only other session.
        let pool = super::Pool::Postgres(
            super::pool_options().max_connections(1).connect(database.url()).await.expect("a pool"),
        );
        query("CREATE TABLE written (n BIGINT)").execute(&pool).await.expect("a table");
        let mut admin = Conn::postgres(database.url()).await.expect("an administrative connection");
        for n in 1..=10i64 {
            let mut tx = super::begin(&pool).await.expect("a transaction");
            query("INSERT INTO written (n) VALUES ($1)").bind(n).execute(tx.exec()).await.expect("a write");
            {
                let mut commit = std::pin::pin!(tx.commit());
                assert!(commit.as_mut().now_or_never().is_none(), "the COMMIT is under way");
            }
            // The connection goes back to the pool once its COMMIT (and whatever followed it)
            // has been answered.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while pool.num_idle() != 1 {
                assert!(std::time::Instant::now() < deadline, "the connection never came back to the pool");
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            let session = query(
                "SELECT state || ': ' || query AS last FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .fetch_one(admin.exec())
            .await
            .expect("the pool's session");
            assert_eq!(session.try_get::<String, _>("last").expect("last"), "idle: COMMIT", "round {n}");
            let row = query("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM written")
                .fetch_one(admin.exec())
                .await
                .expect("the count");
            assert_eq!(row.try_get::<i64, _>("n").expect("n"), n, "every write is committed");
        }
        // The connection is sound: a transaction on it commits.
        let mut tx = super::begin(&pool).await.expect("a transaction");
        query("INSERT INTO written (n) VALUES (11)").execute(tx.exec()).await.expect("a write");
        tx.commit().await.expect("committed");
        let row = query("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM written").fetch_one(&pool).await.expect("the count");
        assert_eq!(row.try_get::<i64, _>("n").expect("n"), 11);
        super::close_pool(&pool).await;
    }

    /// The bundled SQLite is built without memory statistics (`.cargo/config.toml`), so its
    /// allocations take no mutex shared by every connection.
    #[tokio::test]
    async fn sqlite_is_built_without_memory_statistics() {
        let url = crate::testing::fresh_sqlite_url("compile_options");
        let store = crate::Store::connect(&url).await.expect("an SQLite store");
        let options: Vec<String> = query("PRAGMA compile_options")
            .fetch_all(&store.pool)
            .await
            .expect("the compile options")
            .iter()
            .map(|row| row.try_get::<String, _>(0).expect("an option"))
            .collect();
        assert!(options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"), "{options:?}");
    }

    /// Each of SQLite's read-only connections answers `SELECT n` with n, read concurrently so
    /// that every connection is lent.
    async fn every_reader_answers(store: &crate::Store) {
        let reads = (0..16i64).map(|n| {
            let store = store.clone();
            async move {
                let row = query("SELECT CAST($1 AS BIGINT) AS n").bind(n).fetch_one(&store.reads).await;
                (n, row.expect("a read").try_get::<i64, _>("n").expect("n"))
            }
        });
        for (asked, answered) in futures_util::future::join_all(reads).await {
            assert_eq!(asked, answered);
        }
    }

    /// A read that steps past its bound is interrupted by SQLite and fails; its connection
    /// goes back and answers the next read, and every other connection still answers.
    #[tokio::test]
    async fn a_read_past_its_bound_is_interrupted_and_its_connection_answers_after() {
        let url = crate::testing::fresh_sqlite_url("bounded_read");
        let store = crate::Store::connect(&url).await.expect("an SQLite store");
        let super::Readers::Sqlite(readers) = &store.reads else { panic!("SQLite has its own readers") };
        let bound = std::time::Duration::from_millis(200);
        let bounded = super::Readers::Sqlite(readers.bounded(bound));
        // A hundred million rows: far more than 200 ms of stepping.
        let endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) \
                       SELECT i FROM n";
        for _ in 0..6 {
            let started = std::time::Instant::now();
            let read = query(endless).fetch_all(&bounded).await;
            let took = started.elapsed();
            let error = read.expect_err("the read is interrupted");
            assert!(crate::sqlite::SqliteError::interrupted(&error), "{error}");
            assert!(error.to_string().contains("longer than 200ms"), "the message names the bound: {error}");
            assert!(took >= bound && took < bound * 10, "interrupted after {took:?}");
        }
        assert_eq!(store.reads.usage(), (4, 4), "every connection came back");
        // Callers that go away while their reads step (requests cut off) leave the reads to
        // end at their bound, and the connections come back.
        for _ in 0..4 {
            let mut read = std::pin::pin!(query(endless).fetch_all(&bounded));
            assert!(read.as_mut().now_or_never().is_none(), "the read is under way");
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while store.reads.usage() != (4, 4) {
            assert!(std::time::Instant::now() < deadline, "the connections came back: {:?}", store.reads.usage());
            tokio::task::yield_now().await;
        }
        every_reader_answers(&store).await;
        store.close().await;
        assert_eq!(store.reads.usage(), (0, 0), "closed");
        let after = query("SELECT 1 AS n").fetch_one(&store.reads).await;
        assert!(matches!(after, Err(sqlx::Error::PoolClosed)), "{:?}", after.err());
    }

    /// SQLite's writer: a transaction dropped without its commit (its caller gone) is rolled
    /// back where it is dropped, and the writer goes on; one that commits is seen by the readers;
    /// a second transaction waits for the writer until the first ends; a write refused by a
    /// unique index or a foreign key says so, and leaves its transaction open and usable.
    #[tokio::test]
    async fn the_sqlite_writer_rolls_back_what_is_dropped_and_lends_itself_to_one_at_a_time() {
        let url = crate::testing::fresh_sqlite_url("writer_tx");
        let store = crate::Store::connect(&url).await.expect("an SQLite store");
        let count = || async {
            let row = query("SELECT COUNT(*) AS n FROM written").fetch_one(&store.reads).await.expect("a count");
            row.try_get::<i64, _>("n").expect("n")
        };
        query("CREATE TABLE parents (id INTEGER PRIMARY KEY)").execute(&store.pool).await.expect("a table");
        query("CREATE TABLE written (n INTEGER NOT NULL UNIQUE, parent INTEGER REFERENCES parents (id))")
            .execute(&store.pool)
            .await
            .expect("a table");

        let mut dropped = super::begin(&store.pool).await.expect("a transaction");
        query("INSERT INTO written (n) VALUES (1)").execute(dropped.exec()).await.expect("a row");
        // The writer is held: a second transaction waits for it.
        let mut second = std::pin::pin!(super::begin(&store.pool));
        assert!(second.as_mut().now_or_never().is_none(), "the second waits while the first holds the writer");
        drop(dropped);
        let mut tx = second.await.expect("the writer, once the first is dropped");
        assert_eq!(count().await, 0, "the dropped transaction left nothing");

        let inserted = query("INSERT INTO written (n) VALUES (2)").execute(tx.exec()).await.expect("a row");
        assert_eq!(inserted.rows_affected(), 1);
        let taken = query("INSERT INTO written (n) VALUES (2)").execute(tx.exec()).await.expect_err("taken");
        assert!(super::is_unique_violation(&taken), "{taken}");
        let orphan = query("INSERT INTO written (n, parent) VALUES (3, 99)").execute(tx.exec()).await;
        assert!(
            matches!(&orphan, Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation()),
            "foreign keys are enforced: {orphan:?}"
        );
        let returned = query("UPDATE written SET n = n + 10 RETURNING n").fetch_all(tx.exec()).await.expect("rows");
        assert_eq!(returned.len(), 1);
        assert_eq!(returned[0].try_get::<i64, _>("n").expect("n"), 12);
        tx.commit().await.expect("committed");
        assert_eq!(count().await, 1, "the committed row is seen by the readers");
        let changed = query("DELETE FROM written").execute(&store.pool).await.expect("outside a transaction");
        assert_eq!(changed.rows_affected(), 1);
        store.close().await;
        let closed = super::begin(&store.pool).await;
        assert!(matches!(closed, Err(sqlx::Error::PoolClosed)), "{:?}", closed.err());
    }

    /// While another process holds the database's write lock, the writer's transactions and
    /// statements wait for it asleep (the runtime goes on serving), and run once it is let go.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sqlite_writer_waits_asleep_for_another_process_write_lock() {
        let url = crate::testing::fresh_sqlite_url("busy_writer");
        let store = crate::Store::connect(&url).await.expect("an SQLite store");
        query("CREATE TABLE written (n INTEGER)").execute(&store.pool).await.expect("a table");
        // Another process's connection, with the write lock.
        let mut other = crate::sqlite::SqliteConn::writer(&url, 1000).expect("another connection");
        other.run("BEGIN IMMEDIATE", &[], true, None, crate::sqlite::WRITE_BOUND).expect("the lock");
        let pool = store.pool.clone();
        let in_tx = tokio::spawn(async move {
            let mut tx = super::begin(&pool).await?;
            query("INSERT INTO written (n) VALUES (1)").execute(tx.exec()).await?;
            tx.commit().await
        });
        let pool = store.pool.clone();
        let alone = tokio::spawn(async move { query("INSERT INTO written (n) VALUES (2)").execute(&pool).await });
        // The transaction has taken the writer and is waiting for the lock (the writer is not
        // idle), and the statement waits behind it; the runtime serves other tasks meanwhile.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while store.pool.num_idle() != 0 {
            assert!(std::time::Instant::now() < deadline, "the transaction never took the writer");
            tokio::task::yield_now().await;
        }
        assert_eq!(tokio::spawn(async { 1 }).await.expect("a task runs"), 1);
        assert!(!in_tx.is_finished() && !alone.is_finished(), "the writes wait for the lock");
        other.run("COMMIT", &[], true, None, crate::sqlite::WRITE_BOUND).expect("the lock let go");
        in_tx.await.expect("the task").expect("the transaction, once the lock is let go");
        alone.await.expect("the task").expect("the statement, once the lock is let go");
        let row = query("SELECT COUNT(*) AS n FROM written").fetch_one(&store.reads).await.expect("a count");
        assert_eq!(row.try_get::<i64, _>("n").expect("n"), 2);
        drop(other);
        store.close().await;
    }

    /// On SQLite's read-only connections, as on the writer, `$N` binds the N-th value wherever it
    /// stands and however often, `?` binds values in order, and rows decode the same.
    #[tokio::test]
    async fn the_readers_bind_and_decode_as_the_writer() {
        let url = crate::testing::fresh_sqlite_url("reader_binds");
        let store = crate::Store::connect(&url).await.expect("an SQLite store");
        let numbered = "SELECT $2 AS b, $1 AS a, $2 + $1 AS sum, $3 AS text, $4 AS absent, $5 AS flag, $6 AS real";
        let anonymous = "SELECT ? AS a, ? AS b";
        for on in [super::Exec::from(&store.pool), super::Exec::from(&store.reads)] {
            let row = query(numbered)
                .bind(1i64)
                .bind(40i64)
                .bind("text")
                .bind(None::<String>)
                .bind(true)
                .bind(2.5f64)
                .fetch_one(on)
                .await
                .expect("a row");
            assert!(matches!(row, super::DbRow::Sqlite(_)));
            assert_eq!(row.try_get::<i64, _>("a").expect("a"), 1);
            assert_eq!(row.try_get::<i64, _>("b").expect("b"), 40);
            assert_eq!(row.try_get::<i64, _>("sum").expect("sum"), 41);
            assert_eq!(row.try_get::<i64, _>(2).expect("by position"), 41);
            assert_eq!(row.try_get::<String, _>("text").expect("text"), "text");
            assert_eq!(row.try_get::<Option<String>, _>("absent").expect("absent"), None);
            // A null decodes only into an option (the store reads no nullable column as a plain
            // value).
            assert!(row.try_get::<String, _>("absent").is_err(), "a null is not a string");
            assert!(row.try_get::<i64, _>("absent").is_err(), "a null is not a number");
            assert!(row.try_get::<bool, _>("flag").expect("flag"));
            assert!((row.try_get::<f64, _>("real").expect("real") - 2.5).abs() < f64::EPSILON);
            assert!(row.try_get::<i64, _>("missing").is_err(), "no such column");
            assert!(row.try_get::<i64, _>(99).is_err(), "no such position");
        }
        let on_reader = query(anonymous).bind(7i64).bind(8i64).fetch_one(&store.reads).await.expect("a row");
        assert_eq!(
            (on_reader.try_get::<i64, _>("a").expect("a"), on_reader.try_get::<i64, _>("b").expect("b")),
            (7, 8)
        );
        let none = query("SELECT 1 AS n WHERE $1 = 2").bind(1i64).fetch_optional(&store.reads).await.expect("a read");
        assert!(none.is_none());
        let short = query("SELECT $1 AS a, $2 AS b").bind(1i64).fetch_one(&store.reads).await;
        assert!(short.is_err(), "a value missing is an error, not a null");
        store.close().await;
    }

    /// No other module of the store runs a statement or begins a transaction through sqlx
    /// itself, and only `dialect.rs` (which opens each backend's pools and migrates) and
    /// `sqlite.rs` (SQLite's connections, on `rusqlite`) name a driver's types:
    /// every statement goes through [`super::query`] and runs on the driver of the connection it
    /// is given.
    #[test]
    fn only_this_module_runs_statements_through_the_drivers() {
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
                // Transactions begin through `db::begin` only (sqlx's own is not cancel-safe).
                let mut needles =
                    vec!["sqlx::query", "sqlx::Row", "sqlx::Any", "sqlx::any", "AnyPool", "AnyRow", ".begin()"];
                if path != src.join("sqlite.rs") {
                    needles.push("rusqlite");
                }
                if path != src.join("dialect.rs") && path != src.join("sqlite.rs") {
                    needles.extend([
                        "sqlx::Sqlite",
                        "sqlx::sqlite",
                        "sqlx::Postgres",
                        "sqlx::postgres",
                        "SqliteRow",
                        "PgRow",
                    ]);
                    needles.extend(["SqliteConnection", "PgConnection", "SqlitePool", "PgPool"]);
                }
                for needle in needles {
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
