//! Subscriptions: the billing engine's value as a document plus the columns lists filter on, the
//! domain events of every change (appended with it, [`crate::events`]), the charges each change
//! produced (invoiced after the change is saved) and a claim that serialises changes across every
//! process on the database.
//!
//! The store does not know the engine's types: the service hands it JSON documents (`value`,
//! `creation`, `details`, event payloads, charge lines) and the few facts it filters on. The
//! documents are stored with their layout version and read back as given (the `document` module).
//!
//! A change goes: [`Store::claim_subscription`] (refused while another unexpired claim holds the
//! row: the service answers `simultaneous_request`), read, compute, [`Store::save_subscription`]
//! (value, events and charges in one transaction, only while the claim is still held), invoice
//! the charges ([`Store::unbilled_charges`], [`Store::mark_charge_billed`]), then
//! [`Store::release_subscription`]. Claims have a lease on the service's clock, so a process that
//! dies holding one blocks the subscription for the lease only.
//!
//! The scheduler renews many subscriptions at once in a [`Work`]: one database transaction in
//! which the same steps run for a whole batch with one statement each (claims, saves, charges,
//! billing marks, the next jobs), instead of a few statements per subscription.

use crate::db::DbRow;
use crate::dialect::Locking;
use crate::document;
use crate::events::NewEvent;
use crate::list::{Arg, Conditions, Page, PageRequest, Position, Sort, Within, into_page, order_and_limit};
use crate::work::Work;
use crate::{Store, StoreError, flag, get_flag, keys};

/// A stored subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionRecord {
    pub id: i64,
    pub site_id: i64,
    pub account_id: i64,
    pub plan_id: i64,
    pub uuid: String,
    /// The state's schema name (`active`, `paused`, …).
    pub state: String,
    pub past_due: bool,
    pub trial_started_at: Option<i64>,
    pub trial_ends_at: Option<i64>,
    /// The engine's subscription value (JSON).
    pub value: String,
    /// The creation request (JSON).
    pub creation: String,
    /// Settings beside the engine's value: notes, collection method, … (JSON).
    pub details: String,
    /// The invoice that created or last changed the subscription (as the billing code names it).
    pub last_invoice: Option<String>,
    /// Bumped by every save.
    pub version: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl SubscriptionRecord {
    /// The subscription's place in a list sorted by `sort`.
    pub fn position(&self, sort: Sort) -> Position {
        let value = match sort {
            Sort::CreatedAt => self.created_at,
            Sort::UpdatedAt => self.updated_at,
        };
        Position { value, id: self.id }
    }
}

/// The facts lists filter on, copied from the engine's value at every save.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Indexed {
    pub state: String,
    pub past_due: bool,
    pub trial_started_at: Option<i64>,
    pub trial_ends_at: Option<i64>,
}

/// What [`Store::create_subscription`] stores.
#[derive(Debug, Clone)]
pub struct NewSubscriptionRecord {
    pub site_id: i64,
    pub account_id: i64,
    pub plan_id: i64,
    pub uuid: String,
    pub indexed: Indexed,
    pub value: String,
    pub creation: String,
    pub details: String,
}

/// One change to save with [`Store::save_subscription`].
#[derive(Debug, Clone, Default)]
pub struct SubscriptionChange {
    /// A new plan (after a plan change).
    pub plan_id: Option<i64>,
    pub indexed: Indexed,
    pub value: String,
    pub details: String,
    /// Events of the change (subject: the subscription's uuid).
    pub events: Vec<NewEvent>,
    /// Charges to invoice after the save, in order.
    pub charges: Vec<NewCharge>,
}

/// The lines of one invoice to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCharge {
    /// The invoice origin's schema name (`purchase`, `renewal`, …).
    pub origin: String,
    /// Site time of the transition that produced the lines.
    pub at: i64,
    /// The line items (JSON array).
    pub lines: String,
}

/// A stored charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub id: i64,
    pub subscription_id: i64,
    pub origin: String,
    pub at: i64,
    pub lines: String,
    pub invoice_ref: Option<String>,
    pub billed_at: Option<i64>,
}

/// A held claim on a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionClaim {
    pub subscription_id: i64,
    pub token: String,
}

/// The outcome of [`Store::claim_subscription`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The claim is ours, with the record as read after claiming it.
    Held(SubscriptionClaim, Box<SubscriptionRecord>),
    /// Another unexpired claim holds the subscription.
    Busy,
    /// No such subscription on the site.
    NotFound,
}

/// The list filter on state: a state name, or one of the derived filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateFilter {
    /// Exactly this state.
    State(String),
    /// `active`, `canceled` or `paused`.
    Live,
    /// `active` or `canceled` and in the trial at the given site time.
    InTrial(i64),
    /// `active` or `canceled` with a failed renewal not yet recovered.
    PastDue,
}

/// Which subscriptions to list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscriptionFilter {
    pub account_id: Option<i64>,
    pub state: Option<StateFilter>,
}

const COLUMNS: &str = "id, site_id, account_id, plan_id, uuid, state, past_due, trial_started_at, trial_ends_at, \
                       value, creation, details, last_invoice, version, created_at, updated_at";
const CHARGE_COLUMNS: &str = "id, subscription_id, origin, at, lines, invoice_ref, billed_at";

fn record_from_row(row: &DbRow) -> Result<SubscriptionRecord, StoreError> {
    Ok(SubscriptionRecord {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        account_id: row.try_get("account_id")?,
        plan_id: row.try_get("plan_id")?,
        uuid: row.try_get("uuid")?,
        state: row.try_get("state")?,
        past_due: get_flag(row, "past_due")?,
        trial_started_at: row.try_get("trial_started_at")?,
        trial_ends_at: row.try_get("trial_ends_at")?,
        value: document::read(row.try_get("value")?)?,
        creation: document::read(row.try_get("creation")?)?,
        details: document::read(row.try_get("details")?)?,
        last_invoice: row.try_get("last_invoice")?,
        version: row.try_get("version")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn charge_from_row(row: &DbRow) -> Result<Charge, StoreError> {
    Ok(Charge {
        id: row.try_get("id")?,
        subscription_id: row.try_get("subscription_id")?,
        origin: row.try_get("origin")?,
        at: row.try_get("at")?,
        lines: document::read(row.try_get("lines")?)?,
        invoice_ref: row.try_get("invoice_ref")?,
        billed_at: row.try_get("billed_at")?,
    })
}

/// One subscription's change in [`Work::save_subscriptions`].
#[derive(Debug, Clone, Copy)]
pub struct SubscriptionSave<'a> {
    pub claim: &'a SubscriptionClaim,
    pub change: &'a SubscriptionChange,
    /// Site time of the change (`updated_at`).
    pub now: i64,
}

/// What [`Work::save`] did.
enum Saved {
    /// Every change was saved; the charges inserted, oldest first.
    All(Vec<Charge>),
    /// Only `saved` of the claims still held their subscriptions; nothing else was written.
    Lost { saved: usize },
}

/// One subscription's scheduled job in [`Work::reschedule_subscriptions`] (see
/// [`Store::reschedule_subscription`]).
#[derive(Debug, Clone, Copy)]
pub struct Reschedule<'a> {
    pub uuid: &'a str,
    /// The one pending job to keep or make: kind and due time (site clock); `None` leaves none.
    pub next: Option<(&'a str, i64)>,
    /// The job being run (its runner completes it).
    pub running: Option<i64>,
}

impl Store {
    /// Stores a new subscription with its first charges and the events of its creation (subject:
    /// its uuid), claimed by the caller until it calls [`Store::release_subscription`] (lease
    /// until `locked_until`, service clock). `now` is the site time of the creation.
    pub async fn create_subscription(
        &self,
        new: &NewSubscriptionRecord,
        charges: &[NewCharge],
        events: &[NewEvent],
        now: i64,
        locked_until: i64,
    ) -> Result<(SubscriptionClaim, SubscriptionRecord), StoreError> {
        let token = keys::generate_private_key();
        let mut work = self.begin_work().await?;
        let row = crate::db::query(
            "INSERT INTO subscriptions (site_id, account_id, plan_id, uuid, state, past_due, trial_started_at, \
             trial_ends_at, value, creation, details, lock_token, locked_until, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING id",
        )
        .bind(new.site_id)
        .bind(new.account_id)
        .bind(new.plan_id)
        .bind(&new.uuid)
        .bind(&new.indexed.state)
        .bind(flag(new.indexed.past_due))
        .bind(new.indexed.trial_started_at)
        .bind(new.indexed.trial_ends_at)
        .bind(document::seal(&new.value))
        .bind(document::seal(&new.creation))
        .bind(document::seal(&new.details))
        .bind(&token)
        .bind(locked_until)
        .bind(now)
        .bind(now)
        .fetch_one(work.tx.exec())
        .await?;
        let id: i64 = row.try_get("id")?;
        let charges: Vec<(i64, &NewCharge)> = charges.iter().map(|c| (id, c)).collect();
        work.insert_charges(&charges).await?;
        work.append_item_events(new.site_id, &new.uuid, events).await?;
        work.commit().await?;
        let record =
            self.subscription_by_id(id).await?.ok_or_else(|| StoreError::Invalid("lost subscription".into()))?;
        Ok((SubscriptionClaim { subscription_id: id, token }, record))
    }

    /// Removes a subscription that was never confirmed (its first payment was declined), with
    /// its charges and its events (the refused creation changed nothing), while the caller holds
    /// its claim. Pending jobs of its uuid go too.
    pub async fn discard_subscription(&self, claim: &SubscriptionClaim) -> Result<bool, StoreError> {
        let mut tx = crate::db::begin(&self.pool).await?;
        let Some(row) = crate::db::query("SELECT site_id, uuid FROM subscriptions WHERE id = $1 AND lock_token = $2")
            .bind(claim.subscription_id)
            .bind(&claim.token)
            .fetch_optional(tx.exec())
            .await?
        else {
            return Ok(false);
        };
        let uuid: String = row.try_get("uuid")?;
        let site_id: i64 = row.try_get("site_id")?;
        crate::db::query("DELETE FROM subscription_charges WHERE subscription_id = $1")
            .bind(claim.subscription_id)
            .execute(tx.exec())
            .await?;
        crate::db::query(
            "DELETE FROM domain_events WHERE site_id = $1 AND subject = $2 AND kind LIKE 'subscription.%'",
        )
        .bind(site_id)
        .bind(&uuid)
        .execute(tx.exec())
        .await?;
        crate::db::query("DELETE FROM subscriptions WHERE id = $1")
            .bind(claim.subscription_id)
            .execute(tx.exec())
            .await?;
        crate::db::query("DELETE FROM jobs WHERE subject = $1 AND done_at IS NULL AND kind <> 'dunning'")
            .bind(&uuid)
            .execute(tx.exec())
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The subscription with `uuid` on the site.
    pub async fn subscription(&self, site_id: i64, uuid: &str) -> Result<Option<SubscriptionRecord>, StoreError> {
        let row = crate::db::query(&format!("SELECT {COLUMNS} FROM subscriptions WHERE site_id = $1 AND uuid = $2"))
            .bind(site_id)
            .bind(uuid)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(record_from_row).transpose()
    }

    /// The site's subscriptions with these uuids (one statement per 500; a uuid with no
    /// subscription has none), in no particular order.
    pub async fn subscriptions_by_uuids(
        &self,
        site_id: i64,
        uuids: &[impl AsRef<str>],
    ) -> Result<Vec<SubscriptionRecord>, StoreError> {
        let select = format!("SELECT {COLUMNS} FROM subscriptions");
        let rows =
            crate::list::rows_with_keys(self, &select, Within::SiteOfUniqueKey(site_id), "uuid", &Arg::texts(uuids))
                .await?;
        rows.iter().map(record_from_row).collect()
    }

    /// The subscription with this row id.
    pub async fn subscription_by_id(&self, id: i64) -> Result<Option<SubscriptionRecord>, StoreError> {
        let row = crate::db::query(&format!("SELECT {COLUMNS} FROM subscriptions WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(record_from_row).transpose()
    }

    /// Claims the subscription for one change until `locked_until` (service clock); refused
    /// ([`Claimed::Busy`]) while another claim that has not expired at `service_now` holds it.
    pub async fn claim_subscription(
        &self,
        site_id: i64,
        uuid: &str,
        service_now: i64,
        locked_until: i64,
    ) -> Result<Claimed, StoreError> {
        let mut work = self.begin_work().await?;
        let mut claimed = work.claim(Locking::Wait, site_id, &[uuid], service_now, locked_until).await?;
        work.commit().await?;
        let Some((claim, record)) = claimed.pop() else {
            return Ok(match self.subscription(site_id, uuid).await? {
                Some(_) => Claimed::Busy,
                None => Claimed::NotFound,
            });
        };
        Ok(Claimed::Held(claim, Box::new(record)))
    }

    /// Whether `claim` still holds its subscription (checked before each step that has effects
    /// outside the subscription's row, such as invoicing a charge).
    pub async fn holds_subscription_claim(&self, claim: &SubscriptionClaim) -> Result<bool, StoreError> {
        Ok(crate::db::query("SELECT id FROM subscriptions WHERE id = $1 AND lock_token = $2")
            .bind(claim.subscription_id)
            .bind(&claim.token)
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// Ends a claim (a no-op when it is no longer the subscription's claim).
    pub async fn release_subscription(&self, claim: &SubscriptionClaim) -> Result<(), StoreError> {
        let mut work = self.begin_work().await?;
        work.release_subscriptions(std::slice::from_ref(claim)).await?;
        work.commit().await
    }

    /// Saves a change while `claim` holds the subscription: the value and its indexed facts,
    /// the events and the charges, in one transaction. `None` when the claim was lost
    /// (its lease ran out and another change claimed the subscription): nothing is written.
    pub async fn save_subscription(
        &self,
        claim: &SubscriptionClaim,
        change: &SubscriptionChange,
        now: i64,
    ) -> Result<Option<SubscriptionRecord>, StoreError> {
        let mut work = self.begin_work().await?;
        let save = SubscriptionSave { claim, change, now };
        if let Saved::Lost { .. } = work.save(&[save]).await? {
            // Dropping the work rolls it back: nothing was written.
            return Ok(None);
        }
        let record = work.subscription_by_id(claim.subscription_id).await?;
        work.commit().await?;
        Ok(record)
    }

    /// Charges of a subscription not invoiced yet, oldest first.
    pub async fn unbilled_charges(&self, subscription_id: i64) -> Result<Vec<Charge>, StoreError> {
        let rows = crate::db::query(&format!(
            "SELECT {CHARGE_COLUMNS} FROM subscription_charges WHERE subscription_id = $1 AND billed_at IS NULL \
             ORDER BY id"
        ))
        .bind(subscription_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(charge_from_row).collect()
    }

    /// Every charge of a subscription, oldest first.
    pub async fn subscription_charges(&self, subscription_id: i64) -> Result<Vec<Charge>, StoreError> {
        let mut work = self.begin_work().await?;
        let charges = work.subscriptions_charges(&[subscription_id]).await?;
        work.commit().await?;
        Ok(charges)
    }

    /// Records the invoice of a charge (`None` when its lines needed no invoice) and makes it
    /// the subscription's last invoice.
    pub async fn mark_charge_billed(
        &self,
        charge: &Charge,
        invoice_ref: Option<&str>,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut work = self.begin_work().await?;
        work.mark_charges_billed(&[(charge, invoice_ref, now)]).await?;
        work.commit().await
    }

    /// Makes `(kind, due_at)` the one pending scheduled job of the subscription `uuid`: other
    /// pending jobs of the subject (dunning aside, and except the job `running`, which its runner
    /// completes) are dropped. `None` leaves no job.
    pub async fn reschedule_subscription(
        &self,
        site_id: i64,
        uuid: &str,
        next: Option<(&str, i64)>,
        running: Option<i64>,
    ) -> Result<(), StoreError> {
        let mut work = self.begin_work().await?;
        work.reschedule_subscriptions(site_id, &[Reschedule { uuid, next, running }]).await?;
        work.commit().await
    }

    /// A page of the site's subscriptions matching `filter`, with the number matching it and
    /// the page's time range.
    pub async fn list_subscriptions(
        &self,
        site_id: i64,
        filter: &SubscriptionFilter,
        page: &PageRequest,
    ) -> Result<Page<SubscriptionRecord>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("site_id", Arg::Int(site_id));
        if let Some(account) = filter.account_id {
            conditions.eq("account_id", Arg::Int(account));
        }
        match &filter.state {
            None => {}
            Some(StateFilter::State(state)) => {
                conditions.eq("state", Arg::Text(state.clone()));
            }
            Some(StateFilter::Live) => conditions.push("state IN ('active', 'canceled', 'paused')".into()),
            Some(StateFilter::InTrial(now)) => {
                let a = conditions.arg(Arg::Int(*now));
                let b = conditions.arg(Arg::Int(*now));
                conditions.push(format!(
                    "state IN ('active', 'canceled') AND trial_started_at <= {a} AND trial_ends_at > {b}"
                ));
            }
            Some(StateFilter::PastDue) => conditions.push("state IN ('active', 'canceled') AND past_due = 1".into()),
        }
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM subscriptions{}", conditions.sql());
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!("SELECT {COLUMNS} FROM subscriptions{}{}", conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(crate::db::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(record_from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page, total, |s| s.position(page.sort)))
    }
}

impl Work {
    /// Claims those of the site's subscriptions with these uuids that no unexpired claim holds at
    /// `service_now`, until `locked_until` (service clock), with one claim token; answers each
    /// claim with the record as read after claiming it. Subscriptions not answered are busy or
    /// do not exist. On PostgreSQL a row another transaction is changing counts as busy
    /// (`SKIP LOCKED`) instead of being waited for.
    pub async fn claim_subscriptions(
        &mut self,
        site_id: i64,
        uuids: &[&str],
        service_now: i64,
        locked_until: i64,
    ) -> Result<Vec<(SubscriptionClaim, SubscriptionRecord)>, StoreError> {
        self.claim(Locking::SkipLocked, site_id, uuids, service_now, locked_until).await
    }

    /// The one claim statement ([`Work::claim_subscriptions`], [`Store::claim_subscription`]):
    /// with [`Locking::Wait`] a row another transaction is changing is waited for and checked
    /// again once that transaction ends, so two claims never both hold a subscription.
    async fn claim(
        &mut self,
        locking: Locking,
        site_id: i64,
        uuids: &[&str],
        service_now: i64,
        locked_until: i64,
    ) -> Result<Vec<(SubscriptionClaim, SubscriptionRecord)>, StoreError> {
        if uuids.is_empty() {
            return Ok(Vec::new());
        }
        let token = keys::generate_private_key();
        let b = self.backend;
        // SQLite would otherwise walk the site's index, every subscription of the site, instead
        // of looking the uuids up.
        let free = format!(
            "{} = {} AND (locked_until IS NULL OR locked_until <= {}) AND uuid IN ({})",
            b.unindexed("site_id"),
            b.params(1, 3),
            b.params(1, 4),
            b.params(uuids.len(), 5)
        );
        let lock = b.locked_in_order(locking, "id");
        let rows =
            if lock.is_empty() { free } else { format!("id IN (SELECT id FROM subscriptions WHERE {free}{lock})") };
        let sql = format!(
            "UPDATE subscriptions SET lock_token = {}, locked_until = {} WHERE {rows} RETURNING {COLUMNS}",
            b.params(1, 1),
            b.params(1, 2)
        );
        let mut query =
            crate::db::counted(&sql, uuids.len()).bind(&token).bind(locked_until).bind(site_id).bind(service_now);
        for uuid in uuids {
            query = query.bind(*uuid);
        }
        let rows = query.fetch_all(self.tx.exec()).await?;
        rows.iter()
            .map(|row| {
                let record = record_from_row(row)?;
                Ok((SubscriptionClaim { subscription_id: record.id, token: token.clone() }, record))
            })
            .collect()
    }

    /// The subscription with this row id, as the work sees it.
    async fn subscription_by_id(&mut self, id: i64) -> Result<Option<SubscriptionRecord>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM subscriptions WHERE id = {}", self.backend.params(1, 1));
        let row = crate::db::query(&sql).bind(id).fetch_optional(self.tx.exec()).await?;
        row.as_ref().map(record_from_row).transpose()
    }

    /// Ends claims (those still held).
    pub async fn release_subscriptions(&mut self, claims: &[SubscriptionClaim]) -> Result<(), StoreError> {
        let mut tokens: Vec<&str> = claims.iter().map(|c| c.token.as_str()).collect();
        tokens.sort_unstable();
        tokens.dedup();
        for token in tokens {
            let ids: Vec<i64> = claims.iter().filter(|c| c.token == token).map(|c| c.subscription_id).collect();
            let sql = format!(
                "UPDATE subscriptions SET lock_token = NULL, locked_until = NULL WHERE lock_token = {} AND id IN ({})",
                self.backend.params(1, 1),
                self.backend.params(ids.len(), 2)
            );
            let mut query = crate::db::counted(&sql, ids.len()).bind(token);
            for id in ids {
                query = query.bind(id);
            }
            query.execute(self.tx.exec()).await?;
        }
        Ok(())
    }

    /// Every charge of these subscriptions, by subscription and then oldest first.
    pub async fn subscriptions_charges(&mut self, subscription_ids: &[i64]) -> Result<Vec<Charge>, StoreError> {
        if subscription_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {CHARGE_COLUMNS} FROM subscription_charges WHERE subscription_id IN ({}) \
             ORDER BY subscription_id, id",
            self.backend.params(subscription_ids.len(), 1)
        );
        let mut query = crate::db::counted(&sql, subscription_ids.len());
        for id in subscription_ids {
            query = query.bind(*id);
        }
        query.fetch_all(self.tx.exec()).await?.iter().map(charge_from_row).collect()
    }

    /// Saves changes as [`Store::save_subscription`] does, all or none: when a claim no longer
    /// holds its subscription, nothing of the work may be committed
    /// ([`StoreError::Conflict`]). Answers the charges inserted, oldest first.
    pub async fn save_subscriptions(&mut self, saves: &[SubscriptionSave<'_>]) -> Result<Vec<Charge>, StoreError> {
        match self.save(saves).await? {
            Saved::All(charges) => Ok(charges),
            Saved::Lost { saved } => Err(StoreError::Conflict(format!(
                "{} of {} subscriptions are no longer held by their claims",
                saves.len() - saved,
                saves.len()
            ))),
        }
    }

    /// The one save statement set ([`Work::save_subscriptions`], [`Store::save_subscription`]):
    /// the values, then (only when every claim still held its subscription) the events and the
    /// charges. After [`Saved::Lost`] the work must not be committed.
    async fn save(&mut self, saves: &[SubscriptionSave<'_>]) -> Result<Saved, StoreError> {
        if saves.is_empty() {
            return Ok(Saved::All(Vec::new()));
        }
        let sql = format!(
            "UPDATE subscriptions SET plan_id = COALESCE(v.column3, subscriptions.plan_id), state = v.column4, \
             past_due = v.column5, trial_started_at = v.column6, trial_ends_at = v.column7, value = v.column8, \
             details = v.column9, version = subscriptions.version + 1, updated_at = v.column10 \
             FROM (VALUES {}) AS v WHERE subscriptions.id = v.column1 AND subscriptions.lock_token = v.column2 \
             RETURNING subscriptions.id, subscriptions.site_id, subscriptions.uuid",
            self.backend.rows(saves.len(), 10, 1)
        );
        let mut query = crate::db::counted(&sql, saves.len());
        for s in saves {
            let c = s.change;
            query = query
                .bind(s.claim.subscription_id)
                .bind(&s.claim.token)
                .bind(c.plan_id)
                .bind(&c.indexed.state)
                .bind(flag(c.indexed.past_due))
                .bind(c.indexed.trial_started_at)
                .bind(c.indexed.trial_ends_at)
                .bind(document::seal(&c.value))
                .bind(document::seal(&c.details))
                .bind(s.now);
        }
        let rows = query.fetch_all(self.tx.exec()).await?;
        if rows.len() != saves.len() {
            return Ok(Saved::Lost { saved: rows.len() });
        }
        let mut subjects: Vec<(i64, i64, String)> = Vec::with_capacity(rows.len());
        for row in &rows {
            subjects.push((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?));
        }
        let events: Vec<(i64, &str, &NewEvent)> = saves
            .iter()
            .filter_map(|s| {
                subjects
                    .iter()
                    .find(|(id, _, _)| *id == s.claim.subscription_id)
                    .map(|(_, site, uuid)| (*site, uuid.as_str(), &s.change.events))
            })
            .flat_map(|(site, uuid, events)| events.iter().map(move |e| (site, uuid, e)))
            .collect();
        self.append_events(&events).await?;
        let charges: Vec<(i64, &NewCharge)> =
            saves.iter().flat_map(|s| s.change.charges.iter().map(|c| (s.claim.subscription_id, c))).collect();
        Ok(Saved::All(self.insert_charges(&charges).await?))
    }

    /// Inserts charges (subscription id, charge); answers them oldest first.
    async fn insert_charges(&mut self, charges: &[(i64, &NewCharge)]) -> Result<Vec<Charge>, StoreError> {
        if charges.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "INSERT INTO subscription_charges (subscription_id, origin, at, lines) VALUES {} RETURNING {CHARGE_COLUMNS}",
            self.backend.rows(charges.len(), 4, 1)
        );
        let mut query = crate::db::counted(&sql, charges.len());
        for (id, c) in charges {
            query = query.bind(*id).bind(&c.origin).bind(c.at).bind(document::seal(&c.lines));
        }
        let mut inserted =
            query.fetch_all(self.tx.exec()).await?.iter().map(charge_from_row).collect::<Result<Vec<_>, _>>()?;
        inserted.sort_by_key(|c| c.id);
        Ok(inserted)
    }

    /// [`Store::mark_charge_billed`] for several charges.
    pub async fn mark_charges_billed(&mut self, billed: &[(&Charge, Option<&str>, i64)]) -> Result<(), StoreError> {
        if billed.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "UPDATE subscription_charges SET invoice_ref = v.column2, billed_at = v.column3 FROM (VALUES {}) AS v \
             WHERE subscription_charges.id = v.column1 AND subscription_charges.billed_at IS NULL",
            self.backend.rows(billed.len(), 3, 1)
        );
        let mut query = crate::db::counted(&sql, billed.len());
        for (charge, invoice, now) in billed {
            query = query.bind(charge.id).bind(invoice.map(str::to_owned)).bind(*now);
        }
        query.execute(self.tx.exec()).await?;
        // A subscription's last invoice is the one of its last charge marked.
        let mut last: Vec<(i64, &str)> = Vec::new();
        for (charge, invoice, _) in billed {
            if let Some(invoice) = invoice {
                last.retain(|(id, _)| *id != charge.subscription_id);
                last.push((charge.subscription_id, invoice));
            }
        }
        if last.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "UPDATE subscriptions SET last_invoice = v.column2 FROM (VALUES {}) AS v WHERE subscriptions.id = v.column1",
            self.backend.rows(last.len(), 2, 1)
        );
        let mut query = crate::db::counted(&sql, last.len());
        for (id, invoice) in last {
            query = query.bind(id).bind(invoice);
        }
        query.execute(self.tx.exec()).await?;
        Ok(())
    }

    /// [`Store::reschedule_subscription`] for several subscriptions of the site (distinct uuids).
    pub async fn reschedule_subscriptions(&mut self, site_id: i64, jobs: &[Reschedule<'_>]) -> Result<(), StoreError> {
        if jobs.is_empty() {
            return Ok(());
        }
        // The uuid list lets the pending-subject index find the rows; the VALUES list says which
        // job of each subject stays.
        let sql = format!(
            "DELETE FROM jobs WHERE subject IN ({}) AND done_at IS NULL AND kind <> 'dunning' AND EXISTS \
             (SELECT 1 FROM (VALUES {}) AS v WHERE v.column1 = jobs.subject AND v.column2 <> jobs.id \
             AND NOT (v.column3 = jobs.kind AND v.column4 = jobs.due_at))",
            self.backend.params(jobs.len(), 1),
            self.backend.rows(jobs.len(), 4, jobs.len() + 1)
        );
        let mut query = crate::db::counted(&sql, jobs.len());
        for j in jobs {
            query = query.bind(j.uuid);
        }
        for j in jobs {
            query = query
                .bind(j.uuid)
                .bind(j.running.unwrap_or(-1))
                .bind(j.next.map(|(k, _)| k).unwrap_or(""))
                .bind(j.next.map(|(_, t)| t).unwrap_or(i64::MIN));
        }
        query.execute(self.tx.exec()).await?;
        let next: Vec<(&str, &str, i64)> =
            jobs.iter().filter_map(|j| j.next.map(|(kind, due_at)| (j.uuid, kind, due_at))).collect();
        if next.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "INSERT INTO jobs (site_id, kind, subject, due_at) VALUES {} ON CONFLICT (kind, subject, due_at) DO NOTHING",
            self.backend.rows(next.len(), 4, 1)
        );
        let mut query = crate::db::counted(&sql, next.len());
        for (uuid, kind, due_at) in next {
            query = query.bind(site_id).bind(kind).bind(uuid).bind(due_at);
        }
        query.execute(self.tx.exec()).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
