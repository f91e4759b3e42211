//! What the database holds about work still to do, and how the pools are used, read for the
//! service's metrics at scrape time: the webhook deliveries waiting to be sent, how late the
//! oldest unfinished due job is, and the connections in use. Each read uses an index of its
//! table (`webhook_deliveries_waiting`, `jobs_pending_site_due`), so a scrape costs one short
//! statement per site.

use crate::{Backend, Store, StoreError};

/// One connection pool's use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolUse {
    /// `main` (PostgreSQL: every statement; SQLite: the writer) or `reads` (SQLite's read-only
    /// connections).
    pub pool: &'static str,
    /// Connections open now.
    pub open: u32,
    /// Open connections not lent out.
    pub idle: u32,
}

impl PoolUse {
    /// Connections lent out now.
    pub fn in_use(&self) -> u32 {
        self.open.saturating_sub(self.idle)
    }
}

/// The work still to do, across every site, and the pools (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gauges {
    /// Webhook deliveries not sent yet or waiting for a retry (`pending` and `retrying`).
    pub webhook_queue: i64,
    /// Seconds by which the oldest job that is due (in its site's time) and not done is late;
    /// 0 when none is due. Jobs that failed and wait for their retry count: they are late work.
    pub scheduler_lag_seconds: i64,
    pub pools: Vec<PoolUse>,
}

impl Store {
    /// The gauges at `service_now` (epoch seconds; each site's time adds its clock offset).
    pub async fn gauges(&self, service_now: i64) -> Result<Gauges, StoreError> {
        let queue =
            crate::db::query("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE state IN ('pending', 'retrying')")
                .fetch_one(&self.reads)
                .await?;
        let oldest = crate::db::query(
            "SELECT s.clock_offset AS clock_offset, \
                    (SELECT MIN(j.due_at) FROM jobs j WHERE j.site_id = s.id AND j.done_at IS NULL) AS oldest \
             FROM sites s",
        )
        .fetch_all(&self.reads)
        .await?;
        let mut lag = 0;
        for row in &oldest {
            let offset: i64 = row.try_get("clock_offset")?;
            if let Some(due) = row.try_get::<Option<i64>, _>("oldest")? {
                lag = lag.max(service_now.saturating_add(offset).saturating_sub(due));
            }
        }
        let main = PoolUse { pool: "main", open: self.pool.size(), idle: self.pool.num_idle() as u32 };
        let pools = match self.backend {
            Backend::Sqlite => {
                let (open, idle) = self.reads.usage();
                vec![main, PoolUse { pool: "reads", open, idle }]
            }
            Backend::Postgres => vec![main],
        };
        Ok(Gauges { webhook_queue: queue.try_get("n")?, scheduler_lag_seconds: lag, pools })
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::both_backends;
    use crate::{Mode, NewSite, Plan};

    #[tokio::test]
    async fn the_oldest_due_job_and_the_pools_are_read() {
        for store in both_backends("gauges").await {
            let at = 1_800_000_000;
            let none = store.gauges(at).await.expect("gauges");
            assert_eq!((none.webhook_queue, none.scheduler_lag_seconds), (0, 0));
            assert!(!none.pools.is_empty());
            assert!(none.pools.iter().all(|p| p.in_use() <= p.open), "{:?}", none.pools);
            let new = NewSite {
                name: "gauges".into(),
                mode: Mode::Sandbox,
                plan: Plan::Core,
                credit_memos: false,
                contact: None,
            };
            let (site, _) = store.create_site(&new, at).await.expect("site");
            store.schedule_job(site.id, "renewal", "sub-1", at - 90).await.expect("job");
            store.schedule_job(site.id, "renewal", "sub-2", at - 30).await.expect("job");
            store.schedule_job(site.id, "renewal", "sub-3", at + 600).await.expect("job");
            assert_eq!(store.gauges(at).await.expect("gauges").scheduler_lag_seconds, 90);
            // A job not due yet is no lag.
            assert_eq!(store.gauges(at - 200).await.expect("gauges").scheduler_lag_seconds, 0);
        }
    }
}
