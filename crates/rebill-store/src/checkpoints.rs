//! SQLite's checkpoints, beside the writer: a task with a connection of its own copies the
//! write-ahead log into the database every [`EVERY`] (`PRAGMA wal_checkpoint(PASSIVE)`, which
//! never waits for the writer or the readers and copies what no reader still needs).
//!
//! SQLite's default is that the commit which takes the log past 1,000 pages runs the checkpoint
//! itself, on the one writer connection: every write of the service then waits for the copy and
//! its `fsync` (13 % of the writer's time in the renewal benchmark). Here the writer checkpoints
//! only past [`WRITER_CHECKPOINT_PAGES`], a bound for when this task is behind or gone; a log
//! that readers hold on to keeps growing until they let go, as it would anyway.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, watch};

use crate::sqlite::SqliteConn;

/// How often the checkpointer copies the log into the database.
const EVERY: Duration = Duration::from_millis(100);

/// Pages of log after which the writer checkpoints by itself (64 MB of 4 KB pages).
pub(crate) const WRITER_CHECKPOINT_PAGES: u32 = 16_384;

/// The checkpointer of one SQLite store. It stops with [`Checkpointer::stop`], or once every
/// clone of its store is dropped.
#[derive(Debug, Clone)]
pub(crate) struct Checkpointer(Arc<Running>);

#[derive(Debug)]
struct Running {
    stop: watch::Sender<bool>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Checkpointer {
    /// Opens the checkpointer's connection to the SQLite database at `url` and starts it.
    pub(crate) async fn start(url: &str) -> Result<Self, sqlx::Error> {
        let conn = SqliteConn::checkpointer(url)?;
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run(conn, stopped));
        Ok(Self(Arc::new(Running { stop, task: Mutex::new(Some(task)) })))
    }

    /// Stops the checkpointer and closes its connection, so that the writer can be the last
    /// connection to close (the one that removes the log).
    pub(crate) async fn stop(&self) {
        self.0.stop.send_replace(true);
        if let Some(task) = self.0.task.lock().await.take()
            && let Err(error) = task.await
        {
            tracing::warn!(%error, "the SQLite checkpointer ended badly");
        }
    }
}

/// Checkpoints every [`EVERY`] until stopped; the connection is closed as it is dropped.
async fn run(mut conn: SqliteConn, mut stopped: watch::Receiver<bool>) {
    let mut failing = false;
    loop {
        // Stopped, or every handle dropped (the sender with them): done.
        if tokio::time::timeout(EVERY, stopped.wait_for(|stop| *stop)).await.is_ok() {
            break;
        }
        // A checkpoint copies pages and syncs the file: on a thread of the blocking pool.
        let copied = tokio::task::spawn_blocking(move || {
            let copied = conn.checkpoint();
            (conn, copied)
        })
        .await;
        match copied {
            Ok((back, copied)) => {
                conn = back;
                match copied {
                    Ok(_) => failing = false,
                    Err(error) => {
                        // Once per run of failures; the writer's own bound holds meanwhile.
                        if !failing {
                            tracing::warn!(%error, "checkpointing the SQLite write-ahead log");
                        }
                        failing = true;
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, "the SQLite checkpoint's thread ended badly; checkpoints stop");
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use crate::testing::fresh_sqlite_url;

    fn size(path: &PathBuf) -> u64 {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    }

    /// 8 MB written through the writer, far below the writer's own threshold, reach the
    /// database file through the checkpointer; after `close` no log is left.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_log_reaches_the_database_beside_the_writer() {
        let url = fresh_sqlite_url("checkpoints");
        let path = PathBuf::from(url.strip_prefix("sqlite://").expect("a file URL"));
        let wal = PathBuf::from(format!("{}-wal", path.display()));
        let store = crate::Store::connect(&url).await.expect("a SQLite store");
        crate::db::query("CREATE TABLE filler (x BLOB)").execute(&store.pool).await.expect("a table");
        let before = size(&path);
        for _ in 0..64 {
            crate::db::query("INSERT INTO filler (x) VALUES (zeroblob(131072))")
                .execute(&store.pool)
                .await
                .expect("128 KB");
        }
        let written = 64 * 131_072;
        assert!(size(&wal) >= written, "the writes are in the log first");
        let waited = tokio::time::Instant::now();
        while size(&path) < before + written {
            assert!(waited.elapsed() < Duration::from_secs(30), "the log never reached the database file");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        store.close().await;
        assert!(!wal.exists(), "the log is removed at close");
    }
}
