//! [`Work`]: one database transaction for a change that writes many rows, on the writer. Every
//! module adds the writes of its own rows to it (`impl Work` beside its reads); this module
//! names no other.

use crate::Backend;
use crate::db::Tx;
use crate::{Store, StoreError};

/// `$first, $first+1, …`: `n` numbered placeholders.
pub(crate) fn placeholders(n: usize, first: usize) -> String {
    (first..first + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// A database transaction for work on many rows at once: the scheduler's batches of renewals.
/// Its methods (in the modules of the rows they write) run on the transaction's
/// connection with one statement for the whole batch; nothing is visible to other connections
/// until [`Work::commit`], and dropping the work rolls everything back.
///
/// While a `Work` is open, the [`Store`] itself must not be used by the same task: on SQLite the
/// one writer connection belongs to the work until it ends.
pub struct Work {
    pub(crate) tx: Tx,
    pub(crate) backend: Backend,
}

impl Work {
    /// Makes every change of the work durable and visible at once.
    pub async fn commit(self) -> Result<(), StoreError> {
        self.tx.commit().await?;
        Ok(())
    }
}

impl Store {
    /// Begins a [`Work`] on the writer.
    pub async fn begin_work(&self) -> Result<Work, StoreError> {
        Ok(Work { tx: crate::db::begin(&self.pool).await?, backend: self.backend })
    }
}
