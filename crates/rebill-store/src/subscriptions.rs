//! Subscriptions: the billing engine's value as a document plus the columns lists filter on, an
//! append-only history of actions, the charges each change produced (invoiced after the change
//! is saved) and a claim that serialises changes across every process on the database.
//!
//! The store does not know the engine's types: the service hands it JSON documents (`value`,
//! `creation`, `details`, history actions, charge lines) and the few facts it filters on.
//!
//! A change goes: [`Store::claim_subscription`] (refused while another unexpired claim holds the
//! row: the service answers `simultaneous_request`), read, compute, [`Store::save_subscription`]
//! (value, history and charges in one transaction, only while the claim is still held), invoice
//! the charges ([`Store::unbilled_charges`], [`Store::mark_charge_billed`]), then
//! [`Store::release_subscription`]. Claims have a lease on the service's clock, so a process that
//! dies holding one blocks the subscription for the lease only.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::list::{Arg, Conditions, Page, PageRequest, Position, Sort, into_page, order_and_limit};
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
    /// History entries to append: (site time, action JSON).
    pub history: Vec<(i64, String)>,
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

fn record_from_row(row: &AnyRow) -> Result<SubscriptionRecord, StoreError> {
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
        value: row.try_get("value")?,
        creation: row.try_get("creation")?,
        details: row.try_get("details")?,
        last_invoice: row.try_get("last_invoice")?,
        version: row.try_get("version")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn charge_from_row(row: &AnyRow) -> Result<Charge, StoreError> {
    Ok(Charge {
        id: row.try_get("id")?,
        subscription_id: row.try_get("subscription_id")?,
        origin: row.try_get("origin")?,
        at: row.try_get("at")?,
        lines: row.try_get("lines")?,
        invoice_ref: row.try_get("invoice_ref")?,
        billed_at: row.try_get("billed_at")?,
    })
}

async fn insert_charges(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    subscription_id: i64,
    charges: &[NewCharge],
) -> Result<(), StoreError> {
    for charge in charges {
        sqlx::query("INSERT INTO subscription_charges (subscription_id, origin, at, lines) VALUES ($1, $2, $3, $4)")
            .bind(subscription_id)
            .bind(&charge.origin)
            .bind(charge.at)
            .bind(&charge.lines)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

async fn insert_history(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    subscription_id: i64,
    history: &[(i64, String)],
) -> Result<(), StoreError> {
    for (at, action) in history {
        sqlx::query("INSERT INTO subscription_history (subscription_id, at, action) VALUES ($1, $2, $3)")
            .bind(subscription_id)
            .bind(*at)
            .bind(action)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

impl Store {
    /// Stores a new subscription with its first charges, claimed by the caller until it calls
    /// [`Store::release_subscription`] (lease until `locked_until`, service clock). `now` is
    /// the site time of the creation.
    pub async fn create_subscription(
        &self,
        new: &NewSubscriptionRecord,
        charges: &[NewCharge],
        now: i64,
        locked_until: i64,
    ) -> Result<(SubscriptionClaim, SubscriptionRecord), StoreError> {
        let token = keys::generate_private_key();
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(
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
        .bind(&new.value)
        .bind(&new.creation)
        .bind(&new.details)
        .bind(&token)
        .bind(locked_until)
        .bind(now)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        let id: i64 = row.try_get("id")?;
        insert_charges(&mut tx, id, charges).await?;
        tx.commit().await?;
        let record =
            self.subscription_by_id(id).await?.ok_or_else(|| StoreError::Invalid("lost subscription".into()))?;
        Ok((SubscriptionClaim { subscription_id: id, token }, record))
    }

    /// Removes a subscription that was never confirmed (its first payment was declined), with
    /// its history and charges, while the caller holds its claim. Pending jobs of its uuid go too.
    pub async fn discard_subscription(&self, claim: &SubscriptionClaim) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let Some(row) = sqlx::query("SELECT uuid FROM subscriptions WHERE id = $1 AND lock_token = $2")
            .bind(claim.subscription_id)
            .bind(&claim.token)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(false);
        };
        let uuid: String = row.try_get("uuid")?;
        for table in ["subscription_charges", "subscription_history"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE subscription_id = $1"))
                .bind(claim.subscription_id)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("DELETE FROM subscriptions WHERE id = $1").bind(claim.subscription_id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM jobs WHERE subject = $1 AND done_at IS NULL AND kind <> 'dunning'")
            .bind(&uuid)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The subscription with `uuid` on the site.
    pub async fn subscription(&self, site_id: i64, uuid: &str) -> Result<Option<SubscriptionRecord>, StoreError> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM subscriptions WHERE site_id = $1 AND uuid = $2"))
            .bind(site_id)
            .bind(uuid)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(record_from_row).transpose()
    }

    /// The subscription with this row id.
    pub async fn subscription_by_id(&self, id: i64) -> Result<Option<SubscriptionRecord>, StoreError> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM subscriptions WHERE id = $1"))
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
        let token = keys::generate_private_key();
        let claimed = sqlx::query(
            "UPDATE subscriptions SET lock_token = $1, locked_until = $2 \
             WHERE site_id = $3 AND uuid = $4 AND (locked_until IS NULL OR locked_until <= $5) RETURNING id",
        )
        .bind(&token)
        .bind(locked_until)
        .bind(site_id)
        .bind(uuid)
        .bind(service_now)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = claimed else {
            return Ok(match self.subscription(site_id, uuid).await? {
                Some(_) => Claimed::Busy,
                None => Claimed::NotFound,
            });
        };
        let id: i64 = row.try_get("id")?;
        match self.subscription_by_id(id).await? {
            Some(record) => Ok(Claimed::Held(SubscriptionClaim { subscription_id: id, token }, Box::new(record))),
            None => Ok(Claimed::NotFound),
        }
    }

    /// Whether `claim` still holds its subscription (checked before each step that has effects
    /// outside the subscription's row, such as invoicing a charge).
    pub async fn holds_subscription_claim(&self, claim: &SubscriptionClaim) -> Result<bool, StoreError> {
        Ok(sqlx::query("SELECT id FROM subscriptions WHERE id = $1 AND lock_token = $2")
            .bind(claim.subscription_id)
            .bind(&claim.token)
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// Ends a claim (a no-op when it is no longer the subscription's claim).
    pub async fn release_subscription(&self, claim: &SubscriptionClaim) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE subscriptions SET lock_token = NULL, locked_until = NULL WHERE id = $1 AND lock_token = $2",
        )
        .bind(claim.subscription_id)
        .bind(&claim.token)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Saves a change while `claim` holds the subscription: the value and its indexed facts,
    /// the history entries and the charges, in one transaction. `None` when the claim was lost
    /// (its lease ran out and another change claimed the subscription): nothing is written.
    pub async fn save_subscription(
        &self,
        claim: &SubscriptionClaim,
        change: &SubscriptionChange,
        now: i64,
    ) -> Result<Option<SubscriptionRecord>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE subscriptions SET plan_id = COALESCE($1, plan_id), state = $2, past_due = $3, \
             trial_started_at = $4, trial_ends_at = $5, value = $6, details = $7, version = version + 1, \
             updated_at = $8 WHERE id = $9 AND lock_token = $10",
        )
        .bind(change.plan_id)
        .bind(&change.indexed.state)
        .bind(flag(change.indexed.past_due))
        .bind(change.indexed.trial_started_at)
        .bind(change.indexed.trial_ends_at)
        .bind(&change.value)
        .bind(&change.details)
        .bind(now)
        .bind(claim.subscription_id)
        .bind(&claim.token)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if updated != 1 {
            tx.rollback().await?;
            return Ok(None);
        }
        insert_history(&mut tx, claim.subscription_id, &change.history).await?;
        insert_charges(&mut tx, claim.subscription_id, &change.charges).await?;
        tx.commit().await?;
        self.subscription_by_id(claim.subscription_id).await
    }

    /// Appends history entries of a subscription (e.g. its creation's own entries).
    pub async fn append_subscription_history(
        &self,
        subscription_id: i64,
        history: &[(i64, String)],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        insert_history(&mut tx, subscription_id, history).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The history of a subscription, oldest first: (site time, action JSON).
    pub async fn subscription_history(&self, subscription_id: i64) -> Result<Vec<(i64, String)>, StoreError> {
        let rows = sqlx::query("SELECT at, action FROM subscription_history WHERE subscription_id = $1 ORDER BY id")
            .bind(subscription_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok((r.try_get("at")?, r.try_get("action")?))).collect()
    }

    /// Charges of a subscription not invoiced yet, oldest first.
    pub async fn unbilled_charges(&self, subscription_id: i64) -> Result<Vec<Charge>, StoreError> {
        let rows = sqlx::query(&format!(
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
        let rows = sqlx::query(&format!(
            "SELECT {CHARGE_COLUMNS} FROM subscription_charges WHERE subscription_id = $1 ORDER BY id"
        ))
        .bind(subscription_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(charge_from_row).collect()
    }

    /// Records the invoice of a charge (`None` when its lines needed no invoice) and makes it
    /// the subscription's last invoice.
    pub async fn mark_charge_billed(
        &self,
        charge: &Charge,
        invoice_ref: Option<&str>,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE subscription_charges SET invoice_ref = $1, billed_at = $2 WHERE id = $3 AND billed_at IS NULL",
        )
        .bind(invoice_ref)
        .bind(now)
        .bind(charge.id)
        .execute(&mut *tx)
        .await?;
        if let Some(invoice) = invoice_ref {
            sqlx::query("UPDATE subscriptions SET last_invoice = $1 WHERE id = $2")
                .bind(invoice)
                .bind(charge.subscription_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
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
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "DELETE FROM jobs WHERE subject = $1 AND done_at IS NULL AND kind <> 'dunning' AND id <> $2 \
             AND NOT (kind = $3 AND due_at = $4)",
        )
        .bind(uuid)
        .bind(running.unwrap_or(-1))
        .bind(next.map(|(k, _)| k).unwrap_or(""))
        .bind(next.map(|(_, t)| t).unwrap_or(i64::MIN))
        .execute(&mut *tx)
        .await?;
        if let Some((kind, due_at)) = next {
            sqlx::query(
                "INSERT INTO jobs (site_id, kind, subject, due_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (kind, subject, due_at) DO NOTHING",
            )
            .bind(site_id)
            .bind(kind)
            .bind(uuid)
            .bind(due_at)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
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
        let total: i64 = conditions.bind(sqlx::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!("SELECT {COLUMNS} FROM subscriptions{}{}", conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(sqlx::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(record_from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page, total, |s| s.position(page.sort)))
    }

    /// For each account id, the states its subscriptions are in (with `past_due` flags).
    pub(crate) async fn subscription_states(
        &self,
        account_ids: &[i64],
    ) -> Result<Vec<(i64, String, bool)>, StoreError> {
        if account_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conditions = Conditions::default();
        let placeholders: Vec<String> = account_ids.iter().map(|id| conditions.arg(Arg::Int(*id))).collect();
        conditions.push(format!("account_id IN ({})", placeholders.join(", ")));
        let sql = format!("SELECT DISTINCT account_id, state, past_due FROM subscriptions{}", conditions.sql());
        let rows = conditions.bind(sqlx::query(&sql)).fetch_all(&self.reads).await?;
        rows.iter().map(|r| Ok((r.try_get("account_id")?, r.try_get("state")?, get_flag(r, "past_due")?))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::AccountFields;
    use crate::plans::PlanFields;
    use crate::testing::{fresh_postgres_url, fresh_sqlite_url};
    use crate::{Mode, NewSite, Plan};

    const NOW: i64 = 1_800_000_000;

    async fn both(tag: &str) -> Vec<Store> {
        vec![
            Store::connect(&fresh_sqlite_url(tag)).await.expect("sqlite"),
            Store::connect(&fresh_postgres_url(tag).await).await.expect("postgres"),
        ]
    }

    async fn setup(store: &Store) -> (i64, i64, i64) {
        let new =
            NewSite { name: "s".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
        let site = store.create_site(&new, NOW).await.expect("site").0.id;
        let account = store.create_account(site, "a1", &AccountFields::default(), NOW).await.expect("account").id;
        let fields = PlanFields {
            name: Some("Gold".into()),
            unit_amount_in_cents: Some([("USD".to_owned(), 1000)].into_iter().collect()),
            ..PlanFields::default()
        };
        let plan = store.create_plan(site, "gold", &fields, NOW).await.expect("plan").id;
        (site, account, plan)
    }

    fn record(site: i64, account: i64, plan: i64, uuid: &str, state: &str) -> NewSubscriptionRecord {
        NewSubscriptionRecord {
            site_id: site,
            account_id: account,
            plan_id: plan,
            uuid: uuid.into(),
            indexed: Indexed { state: state.into(), ..Indexed::default() },
            value: "{}".into(),
            creation: "{}".into(),
            details: "{}".into(),
        }
    }

    #[tokio::test]
    async fn claims_serialise_changes_and_charges_are_billed_once() {
        for store in both("subscriptions").await {
            let (site, account, plan) = setup(&store).await;
            let charge = NewCharge { origin: "purchase".into(), at: NOW, lines: "[]".into() };
            let (claim, created) = store
                .create_subscription(&record(site, account, plan, "u1", "active"), &[charge], NOW, NOW + 60)
                .await
                .expect("create");
            assert_eq!(created.version, 0);
            // Held by the creation: another change is refused until it is released.
            assert_eq!(store.claim_subscription(site, "u1", NOW, NOW + 60).await.expect("claim"), Claimed::Busy);
            assert_eq!(store.claim_subscription(site, "nope", NOW, NOW + 60).await.expect("claim"), Claimed::NotFound);
            let unbilled = store.unbilled_charges(created.id).await.expect("charges");
            assert_eq!(unbilled.len(), 1);
            store.mark_charge_billed(&unbilled[0], Some("1001"), NOW).await.expect("billed");
            assert!(store.unbilled_charges(created.id).await.expect("charges").is_empty());
            store.release_subscription(&claim).await.expect("release");

            let Claimed::Held(claim, _) = store.claim_subscription(site, "u1", NOW, NOW + 60).await.expect("claim")
            else {
                panic!("free after release");
            };
            let change = SubscriptionChange {
                indexed: Indexed { state: "paused".into(), ..Indexed::default() },
                value: "{\"v\":2}".into(),
                details: "{}".into(),
                history: vec![(NOW + 5, "{\"action\":\"cancel\"}".into())],
                ..SubscriptionChange::default()
            };
            let saved = store.save_subscription(&claim, &change, NOW + 5).await.expect("save").expect("held");
            assert_eq!(
                (saved.version, saved.state.as_str(), saved.last_invoice.as_deref()),
                (1, "paused", Some("1001"))
            );
            // An expired claim is taken over; the old one can no longer save.
            let Claimed::Held(other, _) =
                store.claim_subscription(site, "u1", NOW + 61, NOW + 121).await.expect("claim")
            else {
                panic!("lease expired");
            };
            assert_eq!(store.save_subscription(&claim, &change, NOW + 62).await.expect("save"), None);
            store.release_subscription(&other).await.expect("release");
            assert_eq!(store.subscription_history(saved.id).await.expect("history").len(), 1);

            let page = store
                .list_subscriptions(
                    site,
                    &SubscriptionFilter { account_id: Some(account), state: Some(StateFilter::Live) },
                    &PageRequest::default(),
                )
                .await
                .expect("list");
            assert_eq!(page.total, 1);
            let activity = store.account_activity(&[store.account(site, "a1").await.expect("a").expect("a")]).await;
            assert!(activity.expect("activity")[0].has_paused_subscription);
        }
    }
}
