//! Sites and keys kept in memory, and how every process learns that they changed.
//!
//! Authenticating a request reads its key and the key's site. A service process keeps what it
//! read ([`Store::authenticate`]) for as long as the **settings generation** stays the same:
//!
//! - every write of a site or a key (a site created or updated, a key created, regenerated or
//!   blocked, a public key regenerated, a sandbox clock moved) adds one to the generation in its
//!   own database transaction (`bump`);
//! - the process that wrote moves to the new generation at once; every serving process reads
//!   the generation every [`WATCH_EVERY`] ([`Store::watch_settings`]) and forgets what it kept
//!   when it moved on;
//! - what a process kept is used only while its last successful read of the generation is at
//!   most [`TRUST_FOR`] old, so a process that cannot reach the database, or whose watcher
//!   stalled, reads every key from the database again;
//! - each serving process records the generation it has seen with a heartbeat
//!   (`service_nodes`), and the write returns once every process heard from in the last
//!   [`ALIVE_FOR`] has seen its generation, or after [`WAIT_AT_MOST`] (`Store::settings_changed`).
//!
//! So a blocked or regenerated key stops working in the writing process at once, and in every
//! other process by the time the write returns (within [`TRUST_FOR`] whatever happens). An entry
//! is kept with the generation read before its rows were, so a row read while a write was
//! committing is never used after that write.
//!
//! Only processes that serve watch the generation; any other (the CLI) reads every key from the
//! database.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crate::{ApiKey, Site, Store, StoreError};

/// How often a serving process reads the settings generation.
pub const WATCH_EVERY: Duration = Duration::from_millis(100);
/// How long after its last successful read of the generation a process still uses what it kept.
pub const TRUST_FOR: Duration = Duration::from_millis(1000);
/// A process whose last heartbeat is older than this is not waited for.
pub const ALIVE_FOR: Duration = Duration::from_millis(2000);
/// The longest a write of a site or a key waits for the other processes.
pub const WAIT_AT_MOST: Duration = Duration::from_millis(2000);
/// The most keys a process keeps (it forgets them all when full).
const MAX_KEPT: usize = 100_000;
/// A heartbeat is written at least this often while nothing changes.
const HEARTBEAT_EVERY: Duration = Duration::from_millis(500);
/// Processes silent for an hour are forgotten, looked for this often.
const FORGET_EVERY: Duration = Duration::from_secs(60);

/// Milliseconds of real time (heartbeats and leases compare processes' clocks, never the service
/// clock).
pub(crate) fn real_millis() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// What a process keeps: the generation it knows, when it last read it, and the keys read in it.
#[derive(Debug, Default)]
pub(crate) struct Settings {
    /// The generation known (meaningful only once `read_at` is set).
    known: AtomicI64,
    /// Real time in milliseconds of the last successful read of the generation; 0: never (no
    /// process that does not watch keeps anything).
    read_at: AtomicI64,
    /// By key hash: the generation the entry was read in, the site and the key.
    keys: RwLock<HashMap<String, (i64, Site, ApiKey)>>,
}

impl Settings {
    /// The generation to read and keep entries in, while what is kept may be trusted.
    pub(crate) fn generation(&self) -> Option<i64> {
        let read_at = self.read_at.load(Ordering::Acquire);
        let trusted = read_at > 0 && real_millis() - read_at <= TRUST_FOR.as_millis() as i64;
        trusted.then(|| self.known.load(Ordering::Acquire))
    }

    /// The site and key kept for `hash` in `generation`.
    pub(crate) fn key(&self, hash: &str, generation: i64) -> Option<(Site, ApiKey)> {
        let keys = self.keys.read().ok()?;
        keys.get(hash).filter(|(g, _, _)| *g == generation).map(|(_, site, key)| (site.clone(), key.clone()))
    }

    /// Keeps the site and key read for `hash` in `generation` (unless the process moved on).
    pub(crate) fn keep(&self, hash: &str, generation: i64, site: &Site, key: &ApiKey) {
        if self.known.load(Ordering::Acquire) != generation {
            return;
        }
        if let Ok(mut keys) = self.keys.write() {
            if keys.len() >= MAX_KEPT {
                keys.clear();
            }
            keys.insert(hash.to_owned(), (generation, site.clone(), key.clone()));
        }
    }

    /// Moves on to `generation` (never back), forgetting what was kept before it.
    fn advance(&self, generation: i64) {
        if self.known.fetch_max(generation, Ordering::AcqRel) < generation
            && let Ok(mut keys) = self.keys.write()
        {
            keys.retain(|_, (g, _, _)| *g >= generation);
        }
    }

    /// Records a successful read of the generation.
    fn read(&self, generation: i64) {
        self.advance(generation);
        self.read_at.store(real_millis(), Ordering::Release);
    }
}

/// Adds one to the settings generation inside the transaction of a write of a site or a key;
/// answers the new generation (for [`Store::settings_changed`] once committed).
pub(crate) async fn bump(tx: &mut crate::db::Tx) -> Result<i64, StoreError> {
    let row = crate::db::query(
        "UPDATE settings_generation SET generation = generation + 1 WHERE id = 1 RETURNING generation",
    )
    .fetch_one(tx.exec())
    .await?;
    Ok(row.try_get("generation")?)
}

/// A new service process id: the process id and 64 random bits.
fn node_id() -> String {
    let mut bytes = [0u8; 8];
    // Without the operating system's random source the pid alone names the process.
    let suffix = getrandom::fill(&mut bytes).map(|()| hex::encode(bytes)).unwrap_or_default();
    format!("{}-{suffix}", std::process::id())
}

impl Store {
    /// After a committed write of a site or a key at `generation`: this process moves on at
    /// once, and the call returns when every other serving process has seen it (or after
    /// [`WAIT_AT_MOST`]).
    pub(crate) async fn settings_changed(&self, generation: i64) -> Result<(), StoreError> {
        self.settings.advance(generation);
        let deadline = tokio::time::Instant::now() + WAIT_AT_MOST;
        let me = self.node.get().map(String::as_str).unwrap_or("");
        loop {
            let behind: i64 = crate::db::query(
                "SELECT COUNT(*) AS n FROM service_nodes \
                 WHERE seen_generation < $1 AND heartbeat_at >= $2 AND node_id <> $3",
            )
            .bind(generation)
            .bind(real_millis() - ALIVE_FOR.as_millis() as i64)
            .bind(me)
            .fetch_one(&self.reads)
            .await?
            .try_get("n")?;
            if behind == 0 {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    processes = behind,
                    "a change of sites or keys was not seen by every service process in time; \
                     they stop using what they kept within a second"
                );
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Reads the settings generation every [`WATCH_EVERY`] for as long as the process serves:
    /// moves on when it changed, says which generation it has seen with a heartbeat (as a
    /// service process named by its process id and a random suffix), and gives back unused
    /// rate-limit reservations whose lease ended. Never returns.
    pub async fn watch_settings(self) {
        let node_id = self.node.get_or_init(node_id).clone();
        let mut beat_at = 0_i64;
        let mut beat_generation = -1_i64;
        let mut pruned_at = 0_i64;
        let mut interval = tokio::time::interval(WATCH_EVERY);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A failure is logged when it starts, not every tick while it lasts.
        let mut failing = false;
        loop {
            interval.tick().await;
            let generation = match self.settings_generation().await {
                Ok(g) => g,
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "reading the settings generation (keys are read from the database until it works again)");
                    }
                    failing = true;
                    continue;
                }
            };
            if std::mem::take(&mut failing) {
                tracing::info!("reading the settings generation works again");
            }
            self.settings.read(generation);
            if let Err(e) = self.give_back_ended().await {
                tracing::warn!(error = %e, "giving back unused rate-limit reservations");
            }
            let now = real_millis();
            if generation != beat_generation || now - beat_at >= HEARTBEAT_EVERY.as_millis() as i64 {
                match self.heartbeat(&node_id, generation, now).await {
                    Ok(()) => (beat_at, beat_generation) = (now, generation),
                    Err(e) => tracing::warn!(error = %e, "recording this process's heartbeat"),
                }
            }
            if now - pruned_at >= FORGET_EVERY.as_millis() as i64 {
                match self.forget_silent_nodes(now).await {
                    Ok(()) => pruned_at = now,
                    Err(e) => tracing::warn!(error = %e, "forgetting silent service processes"),
                }
            }
        }
    }

    /// The current settings generation.
    pub async fn settings_generation(&self) -> Result<i64, StoreError> {
        let row =
            crate::db::query("SELECT generation FROM settings_generation WHERE id = 1").fetch_one(&self.reads).await?;
        Ok(row.try_get("generation")?)
    }

    /// Records that `node_id` has seen `generation` at `now` (real milliseconds).
    async fn heartbeat(&self, node_id: &str, generation: i64, now: i64) -> Result<(), StoreError> {
        crate::db::query(
            "INSERT INTO service_nodes (node_id, seen_generation, heartbeat_at) VALUES ($1, $2, $3) \
             ON CONFLICT (node_id) DO UPDATE SET seen_generation = $2, heartbeat_at = $3",
        )
        .bind(node_id)
        .bind(generation)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Forgets the processes silent for an hour (`now` in real milliseconds).
    async fn forget_silent_nodes(&self, now: i64) -> Result<(), StoreError> {
        crate::db::query("DELETE FROM service_nodes WHERE heartbeat_at < $1")
            .bind(now - 3_600_000)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Mode, Plan};

    fn site() -> Site {
        Site {
            id: 1,
            name: "acme".into(),
            mode: Mode::Sandbox,
            plan: Plan::Core,
            credit_memos: false,
            good_standing: true,
            contact: None,
            public_key: "pk".into(),
            created_at: 0,
            rate_limit_per_minute: None,
            clock_offset: 0,
        }
    }

    fn key() -> ApiKey {
        ApiKey { id: 1, site_id: 1, number: 1, hint: "abcd".into(), read_only: false, created_at: 0, expires_at: None }
    }

    #[test]
    fn nothing_is_kept_before_the_generation_was_read() {
        let settings = Settings::default();
        assert_eq!(settings.generation(), None, "a process that does not watch keeps nothing");
        settings.read(7);
        assert_eq!(settings.generation(), Some(7));
        settings.read_at.store(real_millis() - TRUST_FOR.as_millis() as i64 - 1, Ordering::Release);
        assert_eq!(settings.generation(), None, "a generation read too long ago is not trusted");
    }

    #[test]
    fn an_entry_is_used_only_in_the_generation_it_was_read_in() {
        let settings = Settings::default();
        settings.read(3);
        settings.keep("h", 3, &site(), &key());
        assert_eq!(settings.key("h", 3), Some((site(), key())));
        // A write committed: the process moves on and what it kept is gone.
        settings.advance(4);
        assert_eq!(settings.key("h", 4), None);
        assert_eq!(settings.key("h", 3), None);
        // A row read before the write (under generation 4's predecessor) is not kept.
        settings.keep("h", 3, &site(), &key());
        assert_eq!(settings.key("h", 4), None);
        // The generation never goes back.
        settings.read(2);
        assert_eq!(settings.generation(), Some(4));
    }
}
