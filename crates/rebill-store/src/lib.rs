//! rebill storage: every table of the service behind one [`Store`], on SQLite (the embedded
//! default, `sqlite://./rebill.db`, WAL) or PostgreSQL (`postgres://…`, the scale-out store),
//! chosen by the database URL. Each backend runs its own migrations on connect
//! (`migrations/sqlite`, `migrations/postgres`); a test checks that the two trees are the same
//! once the dialect's token pairs are normalised.
//!
//! The store knows neither HTTP nor XML nor the use cases above it (`rebill-app`): it takes and
//! answers plain rows, and the documents the service hands it (a subscription's engine value,
//! event payloads, charge lines) as text, stored with their layout version and read back as given.
//!
//! # Rules every module keeps
//!
//! - **One SQL text for both backends.** The `sqlx` `Any` types are named only in `db.rs`; every
//!   difference between SQLite and PostgreSQL (URL, connections and durability, `SKIP LOCKED`,
//!   `synchronous_commit`, placeholders of long statements, index hints) is in `dialect.rs`.
//! - **One write path per operation.** A single-item write ([`Store::create_invoice`],
//!   [`Store::set_invoice_state`], [`Store::begin_transaction`], [`Store::claim_subscription`],
//!   …) is its batch twin on a [`Work`](work::Work) (`Work::create_invoices`,
//!   `Work::set_invoice_states`, `Work::payers`, …) with one item, in a database transaction of
//!   its own; the scheduler's batches of renewals call the twins with many.
//! - **Events go with the change.** Every write of a business change takes the domain events to
//!   record and appends them in its own database transaction, adding the site and the subject of
//!   the item it wrote, and only when the change was made ([`events`]).
//! - **Decisions are made under the locks.** A money write decides on amounts read after it locked
//!   the rows it changes, or writes by compare-and-set on the stored totals and states; when the
//!   check fails it writes nothing and answers what it found. An invoice is locked by a statement
//!   of its own and read after it (`Work::lock_invoice`, then `Work::invoice`), because PostgreSQL
//!   evaluates a `FOR UPDATE` query's sub-selects on the snapshot taken before the wait. Rows and
//!   order: `docs/concurrency.md`.
//! - **Claims are leases.** Jobs, subscription changes, outbox alerts and webhook deliveries are
//!   claimed with a lease in the database (`FOR UPDATE SKIP LOCKED` on PostgreSQL; SQLite has one
//!   writer), so any number of service processes share one database, and a dead process's
//!   claims come back when their leases end.
//! - **No secret in clear.** Private and public keys come from the CSPRNG and are stored only as
//!   SHA-256 hashes, compared in constant time; token ids are stored hashed; card data, gateway
//!   keys and webhook secrets arrive sealed by the caller.
//! - **Time is passed in.** Times are UTC epoch seconds given by the caller (an injectable clock,
//!   so tests move time); money is integer cents, booleans 0/1.
//!
//! # Modules, by layer
//!
//! Top to bottom; a module names only its own layer or lower ones (checked by
//! `tests/modules.rs`).
//!
//! **Across aggregates** — writes that span several aggregates in one database transaction:
//! [`invoicing`] (invoices numbered per site with their lines, transactions recorded before the
//! gateway is called, the credit a new invoice takes and the redemptions that discount it),
//! [`refunds`] (the recovery job of a refund, its invoice settled once the gateway answered),
//! [`payments`] (offline payments), [`gift_cards`] (a card written with its purchase invoice,
//! redeemed with the invoice holding its credit), [`shipped_lines`] (the shipping address of each
//! invoiced line).
//!
//! **Aggregates** — each owns its tables: types, rows, reads and writes. [`accounts`], [`plans`]
//! and [`add_ons`] (and the site's currencies), [`billing_info`] (never a card number; the
//! gateway's reference), [`invoices`] (the rows of invoices, lines and transactions), [`credits`]
//! (credit balances and credit payments), [`coupons`] (coupons, unique codes, redemptions with
//! their limits), [`subscriptions`] (the engine's value, change claims, charges), [`jobs`] (the
//! schedule of due work), [`tokens`] (the client-side library's tokens), [`shipping_addresses`]
//! (and CVV checks per card), [`gateways`] (a site's real gateway), [`webhooks`] (endpoints and
//! deliveries), [`rate`] (rate-limit buckets and the shares each process reserves of them),
//! [`settings`] (the sites and keys a serving process keeps in memory, and the generation that
//! tells every process they changed), [`outbox`] (the alert outbox), [`gauges`] (the work still
//! to do and the pools' use, read for the metrics).
//!
//! **Events** — [`events`]: one table of domain events in global id order, a subject's events,
//! and the events awaiting a reaction with their handled mark.
//!
//! **Foundation** — [`work`] (the shared [`Work`](work::Work) transaction every module adds its
//! writes to), [`list`] (keyset paging), `document` (versioned JSON documents), `dialect` (the
//! SQL that differs), `keys` (key generation and hashing), `testing` (feature `testing`: fresh
//! databases for test suites, dropped when the suite ends).
//!
//! **Root** — this file: [`Store`] and [`StoreError`], sites ([`Site`]: mode, plan limits,
//! standing, rate limit, sandbox clock offset), private keys ([`ApiKey`]: numbered per site, at
//! most the plan's number; a regenerated key is blocked at once or kept for
//! [`KEY_GRACE_SECONDS`]), public keys and queuing alerts ([`Store::alert`]); then `db`, the
//! connection types.

pub mod accounts;
pub mod add_ons;
pub mod billing_info;
mod checkpoints;
pub mod coupons;
pub mod credits;
mod db;
mod dialect;
mod document;
pub mod events;
pub mod gateways;
pub mod gauges;
pub mod gift_cards;
pub mod invoices;
pub mod invoicing;
pub mod jobs;
mod keys;
pub mod list;
pub mod outbox;
pub mod payments;
pub mod plans;
pub mod rate;
pub mod refunds;
pub mod settings;
pub mod shipped_lines;
pub mod shipping_addresses;
mod sqlite;
pub mod subscriptions;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tokens;
mod values;
pub mod webhooks;
pub mod work;

use crate::db::{DbRow, Pool, Readers, close_pool};

pub use keys::{generate_private_key, generate_public_key, hash_key};
pub use list::{Order, Page, PageRequest, Position, Sort};
pub use rate::RateDecision;

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL `{0}` (use sqlite://PATH or postgres://…)")]
    UnsupportedUrl(String),
    #[error("no site named `{0}`")]
    UnknownSite(String),
    #[error("a site named `{0}` already exists")]
    DuplicateSite(String),
    #[error("site `{0}` has no active private key number {1}; `rebill keys list --site {0}` shows its keys")]
    UnknownKey(String, i64),
    #[error("site `{site}` already has {limit} active private keys, its plan's limit")]
    KeyLimit { site: String, limit: usize },
    #[error("invalid value: {0}")]
    Invalid(String),
    #[error("the site already has an account with account_code `{0}`")]
    DuplicateAccount(String),
    #[error("the site already has a plan with plan_code `{0}`")]
    DuplicatePlan(String),
    #[error("the plan already has an add-on with add_on_code `{0}`")]
    DuplicateAddOn(String),
    /// A conditional write found the record changed by someone else (e.g. a pending adjustment
    /// taken by another invoice); nothing was written.
    #[error("conflicting change: {0}")]
    Conflict(String),
}

impl StoreError {
    /// Whether the database rolled the work back only because of concurrent work (a deadlock
    /// or serialization failure on PostgreSQL): nothing was written, and running the same
    /// operation again may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Database(e) if db::is_transient(e))
    }

    /// Whether the work failed because no writable database answered (see
    /// [`unavailable_in`]): it may succeed when run again once a primary answers.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Database(e) if db::is_unavailable(e))
    }
}

/// Whether `error`, or any error it was caused by, is the database being unavailable: a lost or
/// refused connection, a pool that gave none in time, a server shutting down or starting, a
/// write reaching a standby. The API answers such a failure 503 (retry), not 500.
pub fn unavailable_in(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(store) = e.downcast_ref::<StoreError>() {
            return store.is_unavailable();
        }
        if let Some(driver) = e.downcast_ref::<sqlx::Error>() {
            return db::is_unavailable(driver);
        }
        next = e.source();
    }
    false
}

#[cfg(test)]
mod unavailable_tests {
    use super::{StoreError, unavailable_in};

    /// An error of a use case wrapping the store's, as the service's answers see them.
    #[derive(Debug, thiserror::Error)]
    enum Wrapping {
        #[error(transparent)]
        Store(#[from] StoreError),
    }

    #[test]
    fn a_lost_database_is_told_from_a_failed_statement() {
        let refused = || StoreError::Database(sqlx::Error::Io(std::io::ErrorKind::ConnectionRefused.into()));
        assert!(refused().is_unavailable());
        assert!(StoreError::Database(sqlx::Error::PoolTimedOut).is_unavailable());
        assert!(!StoreError::Database(sqlx::Error::RowNotFound).is_unavailable());
        assert!(!StoreError::Conflict("changed".into()).is_unavailable());
        assert!(unavailable_in(&Wrapping::from(refused())), "found through the causes");
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(Wrapping::from(refused()));
        assert!(unavailable_in(boxed.as_ref()));
        assert!(!unavailable_in(&Wrapping::from(StoreError::Invalid("x".into()))));
    }
}

/// Which database a [`Store`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Sandbox,
    Production,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sandbox => "sandbox",
            Mode::Production => "production",
        }
    }

    pub fn parse(text: &str) -> Result<Self, StoreError> {
        match text {
            "sandbox" => Ok(Mode::Sandbox),
            "production" => Ok(Mode::Production),
            other => Err(StoreError::Invalid(format!("mode `{other}` (sandbox or production)"))),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    Core,
    Professional,
    Grandfathered,
}

impl Plan {
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Core => "core",
            Plan::Professional => "professional",
            Plan::Grandfathered => "grandfathered",
        }
    }

    pub fn parse(text: &str) -> Result<Self, StoreError> {
        match text {
            "core" => Ok(Plan::Core),
            "professional" => Ok(Plan::Professional),
            "grandfathered" => Ok(Plan::Grandfathered),
            other => Err(StoreError::Invalid(format!("plan `{other}` (core, professional or grandfathered)"))),
        }
    }
}

/// A merchant site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub id: i64,
    pub name: String,
    pub mode: Mode,
    pub plan: Plan,
    pub credit_memos: bool,
    pub good_standing: bool,
    /// Technical contact for alert e-mails.
    pub contact: Option<String>,
    /// The site's one public key (it may appear in browser code).
    pub public_key: String,
    pub created_at: i64,
    /// Requests per minute set by the operator instead of the mode's default.
    pub rate_limit_per_minute: Option<i64>,
    /// Seconds the site's clock runs ahead of the service's (sandbox clock control).
    pub clock_offset: i64,
}

impl Site {
    /// The site's "now" for the service's `now`: sandbox sites may have moved their clock on.
    pub fn now(&self, service_now: i64) -> i64 {
        service_now + self.clock_offset
    }
}

impl Site {
    /// Private keys the site may hold (spec: 5 for core, grandfathered and sandbox sites, 10 for
    /// the professional plan).
    pub fn key_limit(&self) -> usize {
        if self.mode == Mode::Production && self.plan == Plan::Professional { 10 } else { 5 }
    }
}

/// What `create_site` needs.
#[derive(Debug, Clone)]
pub struct NewSite {
    pub name: String,
    pub mode: Mode,
    pub plan: Plan,
    pub credit_memos: bool,
    pub contact: Option<String>,
}

/// Changes to a site; `None` leaves a property as it is.
#[derive(Debug, Clone, Default)]
pub struct SiteUpdate {
    pub mode: Option<Mode>,
    pub plan: Option<Plan>,
    pub credit_memos: Option<bool>,
    pub good_standing: Option<bool>,
    pub contact: Option<String>,
    /// `Some(None)` goes back to the mode's default rate limit.
    pub rate_limit_per_minute: Option<Option<i64>>,
}

/// A private API key as stored: never the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub id: i64,
    pub site_id: i64,
    /// The key's number within its site (1, 2, … in creation order): what `rebill keys list`
    /// shows and `rebill keys regenerate` takes.
    pub number: i64,
    /// Last four characters, to tell keys apart in listings.
    pub hint: String,
    pub read_only: bool,
    pub created_at: i64,
    /// When the key stops working (`None`: until regenerated).
    pub expires_at: Option<i64>,
}

impl ApiKey {
    pub fn active_at(&self, now: i64) -> bool {
        self.expires_at.is_none_or(|t| now < t)
    }
}

/// What happens to the old key when a key is regenerated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldKey {
    /// Refused from now on.
    Block,
    /// Keeps working for 12 hours.
    Keep12h,
}

/// Grace period of a regenerated key kept alive.
pub const KEY_GRACE_SECONDS: i64 = 12 * 3600;

/// An e-mail alert waiting in (or sent from) the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    pub id: i64,
    pub site_id: i64,
    pub kind: String,
    pub recipient: Option<String>,
    pub subject: String,
    pub body: String,
    pub created_at: i64,
    pub sent_at: Option<i64>,
}

/// The storage layer.
#[derive(Debug, Clone)]
pub struct Store {
    /// Every write, and reads that belong to a write (SQLite: the one writer connection).
    pool: Pool,
    /// Reads that stand alone (SQLite: several read-only connections beside the writer, which
    /// WAL allows; PostgreSQL: the same pool).
    reads: Readers,
    /// SQLite: the task that copies the write-ahead log into the database beside the writer.
    checkpoints: Option<checkpoints::Checkpointer>,
    backend: Backend,
    /// The sites and keys this process keeps in memory ([`settings`]).
    settings: std::sync::Arc<settings::Settings>,
    /// This process's id among the serving processes, once it watches the settings.
    node: std::sync::Arc<std::sync::OnceLock<String>>,
    /// The rate-limit budgets this process holds ([`rate`]).
    budgets: std::sync::Arc<rate::Budgets>,
}

const SITE_COLUMNS: &str = "id, name, mode, plan, credit_memos, good_standing, contact, public_key, created_at, rate_limit_per_minute, clock_offset";
const KEY_COLUMNS: &str = "id, site_id, number, key_hint, read_only, created_at, expires_at";

/// The next key number of the site bound as `$1` (inside an `INSERT … VALUES`).
const NEXT_KEY_NUMBER: &str = "(SELECT COALESCE(MAX(number), 0) + 1 FROM api_keys WHERE site_id = $1)";

/// Booleans are stored as 0/1 integers (one column type for both backends through `Any`).
fn flag(value: bool) -> i64 {
    i64::from(value)
}

fn get_flag(row: &DbRow, column: &str) -> Result<bool, StoreError> {
    Ok(row.try_get::<i64, _>(column)? != 0)
}

fn site_from_row(row: &DbRow) -> Result<Site, StoreError> {
    Ok(Site {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        mode: Mode::parse(&row.try_get::<String, _>("mode")?)?,
        plan: Plan::parse(&row.try_get::<String, _>("plan")?)?,
        credit_memos: get_flag(row, "credit_memos")?,
        good_standing: get_flag(row, "good_standing")?,
        contact: row.try_get("contact")?,
        public_key: row.try_get("public_key")?,
        created_at: row.try_get("created_at")?,
        rate_limit_per_minute: row.try_get("rate_limit_per_minute")?,
        clock_offset: row.try_get("clock_offset")?,
    })
}

fn key_from_row(row: &DbRow) -> Result<ApiKey, StoreError> {
    Ok(ApiKey {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        number: row.try_get("number")?,
        hint: row.try_get("key_hint")?,
        read_only: get_flag(row, "read_only")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
    })
}

fn alert_from_row(row: &DbRow) -> Result<Alert, StoreError> {
    Ok(Alert {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        kind: row.try_get("kind")?,
        recipient: row.try_get("recipient")?,
        subject: row.try_get("subject")?,
        body: row.try_get("body")?,
        created_at: row.try_get("created_at")?,
        sent_at: row.try_get("sent_at")?,
    })
}

/// An epoch-seconds time as ISO 8601 UTC (`2026-11-24T00:00:00Z`), for people.
pub fn iso8601(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rest = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

fn hint(key: &str) -> String {
    key.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect()
}

impl Store {
    /// Opens (creating an SQLite file if needed) and migrates the database at `url`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let (backend, url) = Backend::of_url(url)?;
        let pool = backend.open_writer(&url).await?;
        let reads = backend.open_readers(&url, &pool).await?;
        let checkpoints = backend.open_checkpointer(&url).await?;
        Ok(Self {
            pool,
            reads,
            checkpoints,
            backend,
            settings: Default::default(),
            node: Default::default(),
            budgets: Default::default(),
        })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Closes the pools once the connections in use have come back: the readers first (and
    /// SQLite's checkpointer), then the writer, so that on SQLite the last connection to close
    /// can write the write-ahead log into the database and remove it, and PostgreSQL sees each
    /// session end. Statements after this fail.
    pub async fn close(&self) {
        self.reads.close().await;
        if let Some(checkpoints) = &self.checkpoints {
            checkpoints.stop().await;
        }
        close_pool(&self.pool).await;
    }

    /// Whether the database answers and holds every migration this binary has, applied without
    /// failure (the service's readiness).
    pub async fn ready(&self) -> Result<bool, StoreError> {
        if self.backend == Backend::Postgres {
            // A standby answers reads but takes no write: not ready (a failover under way, or
            // the URL names a replica).
            let row = crate::db::query("SELECT pg_is_in_recovery() AS standby").fetch_one(&self.pool).await?;
            if row.try_get::<bool, _>("standby")? {
                tracing::warn!("not ready: the database is a standby (in recovery), not a primary");
                return Ok(false);
            }
        }
        let rows =
            crate::db::query("SELECT version FROM _sqlx_migrations WHERE success").fetch_all(&self.reads).await?;
        let applied = rows
            .iter()
            .map(|row| row.try_get::<i64, _>("version"))
            .collect::<Result<std::collections::BTreeSet<_>, _>>()?;
        Ok(self.backend.migrator().iter().all(|m| applied.contains(&m.version)))
    }

    /// Creates a site with one private key; returns the site and that key (shown once).
    pub async fn create_site(&self, new: &NewSite, now: i64) -> Result<(Site, String), StoreError> {
        if new.name.trim().is_empty() {
            return Err(StoreError::Invalid("site name is empty".into()));
        }
        if self.site(&new.name).await.is_ok() {
            return Err(StoreError::DuplicateSite(new.name.clone()));
        }
        let mut tx = crate::db::begin(&self.pool).await?;
        let row = crate::db::query(
            "INSERT INTO sites (name, mode, plan, credit_memos, good_standing, contact, public_key, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        )
        .bind(&new.name)
        .bind(new.mode.as_str())
        .bind(new.plan.as_str())
        .bind(flag(new.credit_memos))
        .bind(flag(true))
        .bind(new.contact.clone())
        .bind(generate_public_key())
        .bind(now)
        .fetch_one(tx.exec())
        .await?;
        let site_id: i64 = row.try_get("id")?;
        let key = generate_private_key();
        crate::db::query(&format!(
            "INSERT INTO api_keys (site_id, key_hash, key_hint, read_only, created_at, number) \
             VALUES ($1, $2, $3, $4, $5, {NEXT_KEY_NUMBER})"
        ))
        .bind(site_id)
        .bind(hash_key(&key))
        .bind(hint(&key))
        .bind(flag(false))
        .bind(now)
        .execute(tx.exec())
        .await?;
        let generation = settings::bump(&mut tx).await?;
        tx.commit().await?;
        self.settings_changed(generation).await?;
        Ok((self.site(&new.name).await?, key))
    }

    /// The site named `name`, or else the site whose id `name` is (as administrators see it in
    /// `rebill site list`).
    pub async fn site(&self, name: &str) -> Result<Site, StoreError> {
        let mut row = crate::db::query(&format!("SELECT {SITE_COLUMNS} FROM sites WHERE name = $1"))
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        if row.is_none()
            && let Ok(id) = name.parse::<i64>()
        {
            row = crate::db::query(&format!("SELECT {SITE_COLUMNS} FROM sites WHERE id = $1"))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        }
        site_from_row(&row.ok_or_else(|| StoreError::UnknownSite(name.to_owned()))?)
    }

    pub async fn sites(&self) -> Result<Vec<Site>, StoreError> {
        let rows =
            crate::db::query(&format!("SELECT {SITE_COLUMNS} FROM sites ORDER BY id")).fetch_all(&self.pool).await?;
        rows.iter().map(site_from_row).collect()
    }

    pub async fn update_site(&self, name: &str, update: &SiteUpdate) -> Result<Site, StoreError> {
        let site = self.site(name).await?;
        if let Some(Some(n)) = update.rate_limit_per_minute
            && n < 1
        {
            return Err(StoreError::Invalid(format!("rate limit {n} (at least 1 request per minute)")));
        }
        let mut tx = crate::db::begin(&self.pool).await?;
        crate::db::query(
            "UPDATE sites SET mode = $1, plan = $2, credit_memos = $3, good_standing = $4, contact = $5, \
             rate_limit_per_minute = $6 WHERE id = $7",
        )
        .bind(update.mode.unwrap_or(site.mode).as_str())
        .bind(update.plan.unwrap_or(site.plan).as_str())
        .bind(flag(update.credit_memos.unwrap_or(site.credit_memos)))
        .bind(flag(update.good_standing.unwrap_or(site.good_standing)))
        .bind(update.contact.clone().or(site.contact))
        .bind(update.rate_limit_per_minute.unwrap_or(site.rate_limit_per_minute))
        .bind(site.id)
        .execute(tx.exec())
        .await?;
        let generation = settings::bump(&mut tx).await?;
        tx.commit().await?;
        self.settings_changed(generation).await?;
        self.site(name).await
    }

    /// The site's private keys (including blocked and expiring ones), oldest first.
    pub async fn keys(&self, site: &Site) -> Result<Vec<ApiKey>, StoreError> {
        let rows = crate::db::query(&format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE site_id = $1 ORDER BY id"))
            .bind(site.id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(key_from_row).collect()
    }

    /// Adds a private key within the plan's limit; returns it (shown once).
    pub async fn create_key(&self, site: &Site, read_only: bool, now: i64) -> Result<(ApiKey, String), StoreError> {
        let active = self.keys(site).await?.iter().filter(|k| k.expires_at.is_none()).count();
        if active >= site.key_limit() {
            return Err(StoreError::KeyLimit { site: site.name.clone(), limit: site.key_limit() });
        }
        let key = generate_private_key();
        let mut tx = crate::db::begin(&self.pool).await?;
        let row = crate::db::query(&format!(
            "INSERT INTO api_keys (site_id, key_hash, key_hint, read_only, created_at, number) \
             VALUES ($1, $2, $3, $4, $5, {NEXT_KEY_NUMBER}) RETURNING id"
        ))
        .bind(site.id)
        .bind(hash_key(&key))
        .bind(hint(&key))
        .bind(flag(read_only))
        .bind(now)
        .fetch_one(tx.exec())
        .await?;
        let id: i64 = row.try_get("id")?;
        let generation = settings::bump(&mut tx).await?;
        tx.commit().await?;
        self.settings_changed(generation).await?;
        self.alert(
            site,
            "key_created",
            &format!("A private API key (…{}) was created for site {}.", hint(&key), site.name),
            now,
        )
        .await?;
        let created = self
            .keys(site)
            .await?
            .into_iter()
            .find(|k| k.id == id)
            .ok_or_else(|| StoreError::Invalid(format!("the new key of site {} was not stored", site.name)))?;
        Ok((created, key))
    }

    /// Replaces the site's key number `number` (see [`ApiKey::number`]) by a new one with the
    /// same privileges; the old key is blocked now or kept for 12 hours.
    pub async fn regenerate_key(
        &self,
        site: &Site,
        number: i64,
        old: OldKey,
        now: i64,
    ) -> Result<(ApiKey, String), StoreError> {
        let existing = self
            .keys(site)
            .await?
            .into_iter()
            .find(|k| k.number == number && k.active_at(now))
            .ok_or_else(|| StoreError::UnknownKey(site.name.clone(), number))?;
        let expires = match old {
            OldKey::Block => now,
            OldKey::Keep12h => now + KEY_GRACE_SECONDS,
        };
        let key = generate_private_key();
        let mut tx = crate::db::begin(&self.pool).await?;
        crate::db::query("UPDATE api_keys SET expires_at = $1 WHERE id = $2")
            .bind(expires)
            .bind(existing.id)
            .execute(tx.exec())
            .await?;
        let row = crate::db::query(&format!(
            "INSERT INTO api_keys (site_id, key_hash, key_hint, read_only, created_at, number) \
             VALUES ($1, $2, $3, $4, $5, {NEXT_KEY_NUMBER}) RETURNING id"
        ))
        .bind(site.id)
        .bind(hash_key(&key))
        .bind(hint(&key))
        .bind(flag(existing.read_only))
        .bind(now)
        .fetch_one(tx.exec())
        .await?;
        let id: i64 = row.try_get("id")?;
        let generation = settings::bump(&mut tx).await?;
        tx.commit().await?;
        self.settings_changed(generation).await?;
        let fate = match old {
            OldKey::Block => "was blocked immediately".to_owned(),
            OldKey::Keep12h => format!("stays valid for 12 hours, until {}", iso8601(expires)),
        };
        let body =
            format!("Private API key …{} of site {} was regenerated; the old key {fate}.", existing.hint, site.name);
        self.alert(site, "key_regenerated", &body, now).await?;
        let created = self
            .keys(site)
            .await?
            .into_iter()
            .find(|k| k.id == id)
            .ok_or_else(|| StoreError::Invalid(format!("the new key of site {} was not stored", site.name)))?;
        Ok((created, key))
    }

    /// The site and key a private key belongs to, if it is valid at `now`.
    pub async fn authenticate(&self, private_key: &str, now: i64) -> Result<Option<(Site, ApiKey)>, StoreError> {
        let hash = hash_key(private_key);
        let generation = self.settings.generation();
        if let Some(generation) = generation
            && let Some((site, key)) = self.settings.key(&hash, generation)
        {
            return Ok(key.active_at(now).then_some((site, key)));
        }
        // One round trip: the key and its site.
        let row = crate::db::query(
            "SELECT k.id AS key_id, k.site_id, k.number, k.key_hint, k.read_only, k.created_at AS key_created_at, \
             k.expires_at, k.key_hash, s.id, s.name, s.mode, s.plan, s.credit_memos, s.good_standing, s.contact, \
             s.public_key, s.created_at, s.rate_limit_per_minute, s.clock_offset \
             FROM api_keys k JOIN sites s ON s.id = k.site_id WHERE k.key_hash = $1",
        )
        .bind(&hash)
        .fetch_optional(&self.reads)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let stored: String = row.try_get("key_hash")?;
        if !keys::same(&stored, &hash) {
            return Ok(None);
        }
        let key = ApiKey {
            id: row.try_get("key_id")?,
            site_id: row.try_get("site_id")?,
            number: row.try_get("number")?,
            hint: row.try_get("key_hint")?,
            read_only: get_flag(&row, "read_only")?,
            created_at: row.try_get("key_created_at")?,
            expires_at: row.try_get("expires_at")?,
        };
        let site = site_from_row(&row)?;
        if let Some(generation) = generation {
            self.settings.keep(&hash, generation, &site, &key);
        }
        Ok(key.active_at(now).then_some((site, key)))
    }

    /// Gives the site a new public key (the old one stops working at once).
    pub async fn regenerate_public_key(&self, site: &Site, now: i64) -> Result<Site, StoreError> {
        let mut tx = crate::db::begin(&self.pool).await?;
        crate::db::query("UPDATE sites SET public_key = $1 WHERE id = $2")
            .bind(generate_public_key())
            .bind(site.id)
            .execute(tx.exec())
            .await?;
        let generation = settings::bump(&mut tx).await?;
        tx.commit().await?;
        self.settings_changed(generation).await?;
        self.alert(
            site,
            "public_key_regenerated",
            &format!("The public key of site {} was regenerated.", site.name),
            now,
        )
        .await?;
        self.site(&site.name).await
    }

    /// Queues an alert e-mail to the site's technical contact.
    pub async fn alert(&self, site: &Site, kind: &str, body: &str, now: i64) -> Result<(), StoreError> {
        crate::db::query(
            "INSERT INTO alerts (site_id, kind, recipient, subject, body, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(site.id)
        .bind(kind)
        .bind(site.contact.clone())
        .bind(format!("rebill: {kind} on site {}", site.name))
        .bind(body)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every alert, oldest first.
    pub async fn alerts(&self) -> Result<Vec<Alert>, StoreError> {
        let rows = crate::db::query(
            "SELECT id, site_id, kind, recipient, subject, body, created_at, sent_at FROM alerts ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(alert_from_row).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{fresh_postgres_database, fresh_sqlite_url};

    const NOW: i64 = 1_800_000_000;

    fn site(name: &str) -> NewSite {
        NewSite { name: name.into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None }
    }

    /// A migrated database is ready; one whose migration is missing or failed is not.
    #[tokio::test]
    async fn a_database_is_ready_when_every_migration_is_applied() {
        let database = fresh_postgres_database("ready").await;
        for url in [fresh_sqlite_url("ready"), database.url().to_owned()] {
            let store = Store::connect(&url).await.expect("store");
            assert!(store.ready().await.expect("ready"));
            let last = store.backend.migrator().iter().map(|m| m.version).max().expect("migrations");
            crate::db::query("UPDATE _sqlx_migrations SET success = false WHERE version = $1")
                .bind(last)
                .execute(&store.pool)
                .await
                .expect("fail one");
            assert!(!store.ready().await.expect("read"), "a failed migration is not current");
            crate::db::query("DELETE FROM _sqlx_migrations WHERE version = $1")
                .bind(last)
                .execute(&store.pool)
                .await
                .expect("forget");
            assert!(!store.ready().await.expect("read"), "a missing migration is not current");
        }
    }

    #[tokio::test]
    async fn keys_are_numbered_per_site() {
        let database = fresh_postgres_database("key_numbers").await;
        for url in [fresh_sqlite_url("key_numbers"), database.url().to_owned()] {
            let store = Store::connect(&url).await.expect("store");
            let (first, _) = store.create_site(&site("first"), NOW).await.expect("first");
            store.create_key(&first, false, NOW).await.expect("key");
            let (demo, demo_key) = store.create_site(&site("demo"), NOW).await.expect("demo");
            let (read_only, _) = store.create_key(&demo, true, NOW).await.expect("key");
            assert_eq!(read_only.number, 2);
            let numbers = |keys: Vec<ApiKey>| keys.iter().map(|k| k.number).collect::<Vec<_>>();
            assert_eq!(numbers(store.keys(&first).await.expect("keys")), [1, 2]);
            assert_eq!(numbers(store.keys(&demo).await.expect("keys")), [1, 2]);
            // Number 1 of `demo` is demo's own first key, whatever ids the other site's keys hold.
            let (new, _) = store.regenerate_key(&demo, 1, OldKey::Block, NOW).await.expect("regenerate");
            assert_eq!(new.number, 3);
            assert!(store.authenticate(&demo_key, NOW).await.expect("auth").is_none());
            assert!(store.keys(&first).await.expect("keys").iter().all(|k| k.expires_at.is_none()));
            let (_, key) = store
                .authenticate(&store.create_key(&demo, false, NOW).await.expect("key").1, NOW)
                .await
                .expect("auth")
                .expect("valid");
            assert_eq!(key.number, 4, "authentication reads the number too");
            let err = store.regenerate_key(&demo, 1, OldKey::Block, NOW).await.expect_err("blocked already");
            assert_eq!(
                err.to_string(),
                "site `demo` has no active private key number 1; `rebill keys list --site demo` shows its keys"
            );
        }
    }

    #[test]
    fn times_for_people() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_795_478_400), "2026-11-24T00:00:00Z");
        assert_eq!(iso8601(951_825_599), "2000-02-29T11:59:59Z");
        assert_eq!(iso8601(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(iso8601(-1), "1969-12-31T23:59:59Z");
    }
}
