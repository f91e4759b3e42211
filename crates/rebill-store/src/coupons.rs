//! Coupons, the unique codes of bulk coupons, and redemptions.
//!
//! - A **coupon** row is a single-code coupon, a bulk coupon or one generated unique code of a
//!   bulk coupon (`coupon_type` `unique_code`, [`Coupon::bulk_coupon_id`]); a unique code follows
//!   its bulk coupon's terms, which the caller reads from the bulk row. A code names its most
//!   recently created coupon ([`Store::coupon`]). Kinds and units are stored by their schema
//!   names (`percent`, `single_use`, …); what a state means is the caller's (the store gives
//!   the counts and marks: [`Coupon::redemptions_count`], `expired_at`, `redeemed_at`), except
//!   for the list filter, which asks for the state on the site clock in SQL
//!   ([`CouponStateFilter`]).
//! - A **redemption** ([`Store::redeem`]) checks the coupon's limits and counts itself in the
//!   same database transaction, so concurrent redemptions never pass `max_redemptions` or
//!   `max_redemptions_per_account`; removing one keeps it counted.
//! - A **discounted invoice** ([`Store::create_invoice`] with [`Discounted`]) is made with its
//!   redemptions' use (total discounted, used-up ones inactive, the invoice they discounted) and
//!   the discount of the pending adjustments it takes, in the invoice's database transaction.
//!
//! Every write takes its domain events and appends them in its own database transaction
//! (subject: the coupon code or the redemption uuid). Money is integer cents, times UTC epoch
//! seconds, booleans 0/1.

mod rows;

use std::collections::BTreeMap;

use crate::events::NewEvent;
use crate::invoices::new_uuid;
use crate::list::{Arg, Conditions, Page, PageRequest, into_page, order_and_limit};
use crate::work::Work;
use crate::{Store, StoreError, flag};
use rows::{COUPON_COLUMNS, REDEMPTION_COLUMNS, coupon_from_row, encode_amounts, redemption_from_row, state_condition};

/// The terms of a coupon as created (and, for the editable ones, updated).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CouponTerms {
    pub name: String,
    pub description: Option<String>,
    pub invoice_description: Option<String>,
    /// `percent`, `dollars` or `free_trial`.
    pub discount_type: String,
    pub discount_percent: Option<i64>,
    /// Amount off per currency (`dollars`).
    pub discount_amounts: BTreeMap<String, i64>,
    pub free_trial_amount: Option<i64>,
    /// `day`, `week` or `month`.
    pub free_trial_unit: Option<String>,
    /// `forever`, `single_use` or `temporal`.
    pub duration: String,
    /// `day`, `week`, `month` or `year`.
    pub temporal_unit: Option<String>,
    pub temporal_amount: Option<i64>,
    pub applies_to_all_plans: bool,
    pub plan_codes: Vec<String>,
    pub applies_to_non_plan_charges: bool,
    /// `account` or `subscription`.
    pub redemption_resource: String,
    pub max_redemptions: Option<i64>,
    pub max_redemptions_per_account: Option<i64>,
    pub redeem_by_date: Option<i64>,
    /// `single_code`, `bulk` or `unique_code`.
    pub coupon_type: String,
    pub unique_code_template: Option<String>,
}

/// The editable terms of a coupon (`PUT /coupons/:code`, restore): `None` leaves a field as it
/// is; `Some(None)` clears a nullable one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CouponEdit {
    pub name: Option<String>,
    pub description: Option<Option<String>>,
    pub invoice_description: Option<Option<String>>,
    pub redeem_by_date: Option<Option<i64>>,
    pub max_redemptions: Option<Option<i64>>,
    pub max_redemptions_per_account: Option<Option<i64>>,
}

/// A stored coupon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coupon {
    pub id: i64,
    pub site_id: i64,
    pub coupon_code: String,
    /// The bulk coupon of a unique code.
    pub bulk_coupon_id: Option<i64>,
    pub terms: CouponTerms,
    /// Redemptions ever made (removed ones too).
    pub redemptions_count: i64,
    /// Unique codes generated (bulk coupons).
    pub unique_codes_count: i64,
    /// When a unique code was redeemed.
    pub redeemed_at: Option<i64>,
    /// When the coupon was expired by DELETE.
    pub expired_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The coupon list's `state` filter, on the site clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CouponStateFilter {
    Redeemable,
    Expired,
    MaxedOut,
}

/// A stored redemption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redemption {
    pub id: i64,
    pub uuid: String,
    pub site_id: i64,
    pub coupon_id: i64,
    pub coupon_code: String,
    pub account_id: i64,
    pub account_code: String,
    pub subscription_uuid: Option<String>,
    pub currency: String,
    /// `active` or `inactive`.
    pub state: String,
    pub total_discounted: i64,
    /// When a temporal redemption lapses.
    pub expires_at: Option<i64>,
    pub removed_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A redemption to make ([`Store::redeem`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRedemption {
    /// The coupon redeemed (a unique code's own row for a unique code).
    pub coupon_id: i64,
    /// The bulk coupon of a unique code: its limits are the ones checked, over all its codes.
    pub bulk_coupon_id: Option<i64>,
    pub account_id: i64,
    pub subscription_uuid: Option<String>,
    pub currency: String,
    pub expires_at: Option<i64>,
    /// Whether the account's other active account-level redemptions go inactive (a new
    /// account coupon replaces the one it had).
    pub replace: bool,
    /// Whether it is used up as it is made (a free-trial coupon: its effect is the trial).
    pub used_up: bool,
}

/// What [`Store::redeem`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeemed {
    Made(Box<Redemption>),
    /// The coupon reached `max_redemptions` (a unique code: it was redeemed).
    MaxedOut,
    /// The account reached `max_redemptions_per_account`.
    MaxedOutForAccount,
}

/// The use an invoice makes of a redemption ([`Store::create_invoice`] with [`Discounted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedemptionUse {
    pub redemption_id: i64,
    /// Discount given on this invoice (0: only the state changes).
    pub discount: i64,
    /// Whether the redemption is used up (or lapsed) and goes inactive.
    pub inactive: bool,
}

impl Store {
    /// Creates a coupon (a single-code or bulk one) with its events (subject: its code).
    pub async fn create_coupon(
        &self,
        site_id: i64,
        code: &str,
        terms: &CouponTerms,
        now: i64,
        events: &[NewEvent],
    ) -> Result<Coupon, StoreError> {
        let mut work = self.begin_work().await?;
        let sql = format!(
            "INSERT INTO coupons (site_id, coupon_code, name, description, invoice_description, discount_type, \
             discount_percent, discount_amounts, free_trial_amount, free_trial_unit, duration, temporal_unit, \
             temporal_amount, applies_to_all_plans, plan_codes, applies_to_non_plan_charges, redemption_resource, \
             max_redemptions, max_redemptions_per_account, redeem_by_date, coupon_type, unique_code_template, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, \
             $17, $18, $19, $20, $21, $22, $23, $23) RETURNING {COUPON_COLUMNS}"
        );
        let row = crate::db::query(&sql)
            .bind(site_id)
            .bind(code)
            .bind(terms.name.clone())
            .bind(terms.description.clone())
            .bind(terms.invoice_description.clone())
            .bind(terms.discount_type.clone())
            .bind(terms.discount_percent)
            .bind(encode_amounts(&terms.discount_amounts))
            .bind(terms.free_trial_amount)
            .bind(terms.free_trial_unit.clone())
            .bind(terms.duration.clone())
            .bind(terms.temporal_unit.clone())
            .bind(terms.temporal_amount)
            .bind(flag(terms.applies_to_all_plans))
            .bind(terms.plan_codes.join(","))
            .bind(flag(terms.applies_to_non_plan_charges))
            .bind(terms.redemption_resource.clone())
            .bind(terms.max_redemptions)
            .bind(terms.max_redemptions_per_account)
            .bind(terms.redeem_by_date)
            .bind(terms.coupon_type.clone())
            .bind(terms.unique_code_template.clone())
            .bind(now)
            .fetch_one(work.tx.exec())
            .await?;
        let coupon = coupon_from_row(&row)?;
        work.coupon_events(site_id, code, events).await?;
        work.commit().await?;
        Ok(coupon)
    }

    /// The site's coupon (or unique code) with this code: the most recently created one.
    pub async fn coupon(&self, site_id: i64, code: &str) -> Result<Option<Coupon>, StoreError> {
        let sql = format!(
            "SELECT {COUPON_COLUMNS} FROM coupons WHERE site_id = $1 AND coupon_code = $2 ORDER BY id DESC LIMIT 1"
        );
        crate::db::query(&sql)
            .bind(site_id)
            .bind(code)
            .fetch_optional(&self.reads)
            .await?
            .as_ref()
            .map(coupon_from_row)
            .transpose()
    }

    /// The coupon with this id.
    pub async fn coupon_by_id(&self, id: i64) -> Result<Option<Coupon>, StoreError> {
        let sql = format!("SELECT {COUPON_COLUMNS} FROM coupons WHERE id = $1");
        crate::db::query(&sql).bind(id).fetch_optional(&self.reads).await?.as_ref().map(coupon_from_row).transpose()
    }

    /// A page of the site's coupons (not the unique codes), optionally in one state at `now`.
    pub async fn list_coupons(
        &self,
        site_id: i64,
        state: Option<CouponStateFilter>,
        now: i64,
        page: &PageRequest,
    ) -> Result<Page<Coupon>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("site_id", Arg::Int(site_id));
        conditions.push("bulk_coupon_id IS NULL".to_owned());
        if let Some(state) = state {
            state_condition(&mut conditions, state, now);
        }
        self.coupon_page(conditions, page).await
    }

    /// A page of a bulk coupon's unique codes.
    pub async fn list_unique_codes(&self, bulk_coupon_id: i64, page: &PageRequest) -> Result<Page<Coupon>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("bulk_coupon_id", Arg::Int(bulk_coupon_id));
        self.coupon_page(conditions, page).await
    }

    async fn coupon_page(&self, mut conditions: Conditions, page: &PageRequest) -> Result<Page<Coupon>, StoreError> {
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM coupons{}", conditions.sql());
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!("SELECT {COUPON_COLUMNS} FROM coupons{}{}", conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(crate::db::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(coupon_from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page, total, |c| crate::list::Position {
            value: match page.sort {
                crate::list::Sort::CreatedAt => c.created_at,
                crate::list::Sort::UpdatedAt => c.updated_at,
            },
            id: c.id,
        }))
    }

    /// Changes the editable terms of coupon `id`; `restore` also clears its expiry (and, for a
    /// bulk coupon, that of its unique codes not redeemed). Answers the coupon as saved.
    pub async fn edit_coupon(
        &self,
        id: i64,
        edit: &CouponEdit,
        restore: bool,
        now: i64,
        events: &[NewEvent],
    ) -> Result<Coupon, StoreError> {
        let mut work = self.begin_work().await?;
        let mut sets = vec!["updated_at = $1".to_owned()];
        let mut conditions = Conditions::default();
        conditions.arg(Arg::Int(now));
        let mut set_text = |column: &str, value: &Option<String>, c: &mut Conditions| match value {
            Some(v) => {
                let p = c.arg(Arg::Text(v.clone()));
                sets.push(format!("{column} = {p}"));
            }
            None => sets.push(format!("{column} = NULL")),
        };
        if let Some(name) = &edit.name {
            set_text("name", &Some(name.clone()), &mut conditions);
        }
        if let Some(v) = &edit.description {
            set_text("description", v, &mut conditions);
        }
        if let Some(v) = &edit.invoice_description {
            set_text("invoice_description", v, &mut conditions);
        }
        for (column, value) in [
            ("redeem_by_date", edit.redeem_by_date),
            ("max_redemptions", edit.max_redemptions),
            ("max_redemptions_per_account", edit.max_redemptions_per_account),
        ] {
            match value {
                Some(Some(v)) => {
                    let p = conditions.arg(Arg::Int(v));
                    sets.push(format!("{column} = {p}"));
                }
                Some(None) => sets.push(format!("{column} = NULL")),
                None => {}
            }
        }
        if restore {
            sets.push("expired_at = NULL".to_owned());
        }
        let idp = conditions.arg(Arg::Int(id));
        let sql = format!("UPDATE coupons SET {} WHERE id = {idp} RETURNING {COUPON_COLUMNS}", sets.join(", "));
        let row = conditions.bind(crate::db::query(&sql)).fetch_one(work.tx.exec()).await?;
        let coupon = coupon_from_row(&row)?;
        if restore {
            crate::db::query(
                "UPDATE coupons SET expired_at = NULL, updated_at = $1 WHERE bulk_coupon_id = $2 AND redeemed_at IS NULL",
            )
            .bind(now)
            .bind(id)
            .execute(work.tx.exec())
            .await?;
        }
        work.coupon_events(coupon.site_id, &coupon.coupon_code, events).await?;
        work.commit().await?;
        Ok(coupon)
    }

    /// Expires coupon `id` (DELETE); for a bulk coupon also its unique codes not redeemed.
    pub async fn expire_coupon(&self, id: i64, now: i64, events: &[NewEvent]) -> Result<Coupon, StoreError> {
        let mut work = self.begin_work().await?;
        let sql =
            format!("UPDATE coupons SET expired_at = $1, updated_at = $1 WHERE id = $2 RETURNING {COUPON_COLUMNS}");
        let row = crate::db::query(&sql).bind(now).bind(id).fetch_one(work.tx.exec()).await?;
        let coupon = coupon_from_row(&row)?;
        crate::db::query(
            "UPDATE coupons SET expired_at = $1, updated_at = $1 \
             WHERE bulk_coupon_id = $2 AND redeemed_at IS NULL AND expired_at IS NULL",
        )
        .bind(now)
        .bind(id)
        .execute(work.tx.exec())
        .await?;
        work.coupon_events(coupon.site_id, &coupon.coupon_code, events).await?;
        work.commit().await?;
        Ok(coupon)
    }

    /// Which of `codes` the site's coupons already use.
    pub async fn taken_codes(&self, site_id: i64, codes: &[String]) -> Result<Vec<String>, StoreError> {
        let mut taken = Vec::new();
        for chunk in codes.chunks(200) {
            let mut conditions = Conditions::default();
            conditions.eq("site_id", Arg::Int(site_id));
            let ps: Vec<String> = chunk.iter().map(|c| conditions.arg(Arg::Text(c.clone()))).collect();
            conditions.push(format!("coupon_code IN ({})", ps.join(", ")));
            let sql = format!("SELECT coupon_code FROM coupons{}", conditions.sql());
            for row in conditions.bind(crate::db::counted(&sql, chunk.len())).fetch_all(&self.reads).await? {
                taken.push(row.try_get("coupon_code")?);
            }
        }
        Ok(taken)
    }

    /// Adds unique codes to bulk coupon `bulk` (each following its terms, one redemption
    /// each), counting them on it; answers them in the order given. A code already taken fails
    /// the whole addition with [`StoreError::Conflict`].
    pub async fn add_unique_codes(
        &self,
        bulk: &Coupon,
        codes: &[String],
        now: i64,
        events: &[NewEvent],
    ) -> Result<Vec<Coupon>, StoreError> {
        let mut work = self.begin_work().await?;
        let mut made = Vec::with_capacity(codes.len());
        for code in codes {
            let taken: i64 =
                crate::db::query("SELECT COUNT(*) AS n FROM coupons WHERE site_id = $1 AND coupon_code = $2")
                    .bind(bulk.site_id)
                    .bind(code.clone())
                    .fetch_one(work.tx.exec())
                    .await?
                    .try_get("n")?;
            if taken > 0 {
                return Err(StoreError::Conflict(format!("the coupon code {code} is taken")));
            }
            let sql = format!(
                "INSERT INTO coupons (site_id, coupon_code, bulk_coupon_id, name, description, invoice_description, \
                 discount_type, discount_percent, discount_amounts, free_trial_amount, free_trial_unit, duration, \
                 temporal_unit, temporal_amount, applies_to_all_plans, plan_codes, applies_to_non_plan_charges, \
                 redemption_resource, max_redemptions, max_redemptions_per_account, redeem_by_date, coupon_type, \
                 unique_code_template, created_at, updated_at) \
                 SELECT site_id, $1, id, name, description, invoice_description, discount_type, discount_percent, \
                 discount_amounts, free_trial_amount, free_trial_unit, duration, temporal_unit, temporal_amount, \
                 applies_to_all_plans, plan_codes, applies_to_non_plan_charges, redemption_resource, 1, 1, \
                 redeem_by_date, 'unique_code', NULL, $2, $2 FROM coupons WHERE id = $3 RETURNING {COUPON_COLUMNS}"
            );
            let row =
                crate::db::query(&sql).bind(code.clone()).bind(now).bind(bulk.id).fetch_one(work.tx.exec()).await?;
            made.push(coupon_from_row(&row)?);
        }
        crate::db::query(
            "UPDATE coupons SET unique_codes_count = unique_codes_count + $1, updated_at = $2 WHERE id = $3",
        )
        .bind(i64::try_from(codes.len()).unwrap_or(i64::MAX))
        .bind(now)
        .bind(bulk.id)
        .execute(work.tx.exec())
        .await?;
        work.coupon_events(bulk.site_id, &bulk.coupon_code, events).await?;
        work.commit().await?;
        Ok(made)
    }

    /// Redeems a coupon: checks its limits (of the bulk coupon for a unique code, whose own limit
    /// is one redemption) and counts the redemption, all in one database transaction; a new
    /// account-level redemption with `replace` makes the account's other active account-level
    /// redemptions inactive. `events` are recorded with it (subject: its uuid).
    pub async fn redeem(&self, new: &NewRedemption, now: i64, events: &[NewEvent]) -> Result<Redeemed, StoreError> {
        let mut work = self.begin_work().await?;
        // Counting first serialises concurrent redemptions of the coupon (a row write lock).
        let limits_of = new.bulk_coupon_id.unwrap_or(new.coupon_id);
        let row = crate::db::query(
            "UPDATE coupons SET redemptions_count = redemptions_count + 1, updated_at = $1 WHERE id = $2 \
             RETURNING redemptions_count, max_redemptions, max_redemptions_per_account, site_id",
        )
        .bind(now)
        .bind(limits_of)
        .fetch_one(work.tx.exec())
        .await?;
        let count: i64 = row.try_get("redemptions_count")?;
        let max: Option<i64> = row.try_get("max_redemptions")?;
        let per_account: Option<i64> = row.try_get("max_redemptions_per_account")?;
        let site_id: i64 = row.try_get("site_id")?;
        if max.is_some_and(|m| count > m) {
            return Ok(Redeemed::MaxedOut);
        }
        if new.bulk_coupon_id.is_some() {
            let done = crate::db::query(
                "UPDATE coupons SET redemptions_count = redemptions_count + 1, redeemed_at = $1, updated_at = $1 \
                 WHERE id = $2 AND redeemed_at IS NULL",
            )
            .bind(now)
            .bind(new.coupon_id)
            .execute(work.tx.exec())
            .await?;
            if done.rows_affected() != 1 {
                return Ok(Redeemed::MaxedOut);
            }
        }
        if let Some(limit) = per_account {
            let mine: i64 = crate::db::query(
                "SELECT COUNT(*) AS n FROM redemptions WHERE account_id = $1 \
                 AND coupon_id IN (SELECT id FROM coupons WHERE id = $2 OR bulk_coupon_id = $2)",
            )
            .bind(new.account_id)
            .bind(limits_of)
            .fetch_one(work.tx.exec())
            .await?
            .try_get("n")?;
            if mine >= limit {
                return Ok(Redeemed::MaxedOutForAccount);
            }
        }
        if new.replace && new.subscription_uuid.is_none() {
            crate::db::query(
                "UPDATE redemptions SET state = 'inactive', updated_at = $1 \
                 WHERE account_id = $2 AND subscription_uuid IS NULL AND state = 'active'",
            )
            .bind(now)
            .bind(new.account_id)
            .execute(work.tx.exec())
            .await?;
        }
        let uuid = new_uuid();
        let sql = format!(
            "INSERT INTO redemptions (uuid, site_id, coupon_id, account_id, subscription_uuid, currency, state, \
             total_discounted, expires_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $9, 0, $7, \
             $8, $8) RETURNING {REDEMPTION_COLUMNS}"
        );
        let row = crate::db::query(&sql)
            .bind(uuid.clone())
            .bind(site_id)
            .bind(new.coupon_id)
            .bind(new.account_id)
            .bind(new.subscription_uuid.clone())
            .bind(new.currency.clone())
            .bind(new.expires_at)
            .bind(now)
            .bind(if new.used_up { "inactive" } else { "active" })
            .fetch_one(work.tx.exec())
            .await?;
        let redemption = redemption_from_row(&row)?;
        let subjects: Vec<(i64, &str, &NewEvent)> = events.iter().map(|e| (site_id, uuid.as_str(), e)).collect();
        work.append_events(&subjects).await?;
        work.commit().await?;
        Ok(Redeemed::Made(Box::new(redemption)))
    }

    /// Takes back redemptions made for a creation that was refused (a declined first payment):
    /// they are deleted and no longer counted.
    pub async fn discard_redemptions(&self, ids: &[i64]) -> Result<(), StoreError> {
        let mut work = self.begin_work().await?;
        for id in ids {
            let row = crate::db::query("SELECT coupon_id FROM redemptions WHERE id = $1")
                .bind(*id)
                .fetch_optional(work.tx.exec())
                .await?;
            let Some(row) = row else { continue };
            let coupon_id: i64 = row.try_get("coupon_id")?;
            crate::db::query("DELETE FROM redemption_invoices WHERE redemption_id = $1")
                .bind(*id)
                .execute(work.tx.exec())
                .await?;
            crate::db::query("DELETE FROM redemptions WHERE id = $1").bind(*id).execute(work.tx.exec()).await?;
            crate::db::query(
                "UPDATE coupons SET redemptions_count = redemptions_count - 1, \
                 redeemed_at = CASE WHEN bulk_coupon_id IS NULL THEN redeemed_at ELSE NULL END \
                 WHERE id = $1 OR id = (SELECT bulk_coupon_id FROM coupons WHERE id = $1)",
            )
            .bind(coupon_id)
            .execute(work.tx.exec())
            .await?;
        }
        work.commit().await
    }

    /// The redemption with this uuid on the site.
    pub async fn redemption(&self, site_id: i64, uuid: &str) -> Result<Option<Redemption>, StoreError> {
        let sql = format!("SELECT {REDEMPTION_COLUMNS} FROM redemptions WHERE site_id = $1 AND uuid = $2");
        crate::db::query(&sql)
            .bind(site_id)
            .bind(uuid)
            .fetch_optional(&self.reads)
            .await?
            .as_ref()
            .map(redemption_from_row)
            .transpose()
    }

    /// Removes a redemption (it stays counted towards the coupon's limits).
    pub async fn remove_redemption(&self, id: i64, now: i64, events: &[NewEvent]) -> Result<(), StoreError> {
        let mut work = self.begin_work().await?;
        let row = crate::db::query(
            "UPDATE redemptions SET state = 'inactive', removed_at = $1, updated_at = $1 WHERE id = $2 \
             RETURNING site_id, uuid",
        )
        .bind(now)
        .bind(id)
        .fetch_one(work.tx.exec())
        .await?;
        let site_id: i64 = row.try_get("site_id")?;
        let uuid: String = row.try_get("uuid")?;
        let subjects: Vec<(i64, &str, &NewEvent)> = events.iter().map(|e| (site_id, uuid.as_str(), e)).collect();
        work.append_events(&subjects).await?;
        work.commit().await
    }

    async fn redemptions_where(&self, condition: &str, arg: Arg) -> Result<Vec<Redemption>, StoreError> {
        let sql = format!("SELECT {REDEMPTION_COLUMNS} FROM redemptions WHERE {condition} ORDER BY created_at, id");
        let query = crate::db::query(&sql);
        let query = match arg {
            Arg::Int(v) => query.bind(v),
            Arg::Text(v) => query.bind(v),
        };
        query.fetch_all(&self.reads).await?.iter().map(redemption_from_row).collect()
    }

    /// The account's redemptions not removed, oldest first.
    pub async fn account_redemptions(&self, account_id: i64) -> Result<Vec<Redemption>, StoreError> {
        self.redemptions_where("account_id = $1 AND removed_at IS NULL", Arg::Int(account_id)).await
    }

    /// The subscription's redemptions not removed, oldest first.
    pub async fn subscription_redemptions(&self, uuid: &str) -> Result<Vec<Redemption>, StoreError> {
        self.redemptions_where("subscription_uuid = $1 AND removed_at IS NULL", Arg::Text(uuid.to_owned())).await
    }

    /// Every redemption of a coupon (a bulk coupon: of its unique codes), oldest first.
    pub async fn coupon_redemptions(&self, coupon_id: i64) -> Result<Vec<Redemption>, StoreError> {
        self.redemptions_where(
            "coupon_id IN (SELECT id FROM coupons WHERE id = $1 OR bulk_coupon_id = $1)",
            Arg::Int(coupon_id),
        )
        .await
    }

    /// The redemptions that discounted an invoice, oldest first.
    pub async fn invoice_redemptions(&self, invoice_id: i64) -> Result<Vec<Redemption>, StoreError> {
        self.redemptions_where(
            "id IN (SELECT redemption_id FROM redemption_invoices WHERE invoice_id = $1)",
            Arg::Int(invoice_id),
        )
        .await
    }

    /// The invoices a redemption discounted, by id, oldest first.
    pub async fn redemption_invoice_ids(&self, redemption_id: i64) -> Result<Vec<i64>, StoreError> {
        let rows =
            crate::db::query("SELECT invoice_id FROM redemption_invoices WHERE redemption_id = $1 ORDER BY invoice_id")
                .bind(redemption_id)
                .fetch_all(&self.reads)
                .await?;
        rows.iter().map(|r| Ok(r.try_get("invoice_id")?)).collect()
    }

    /// The account's active redemptions, oldest first (those an invoice may use).
    pub async fn active_redemptions(&self, account_id: i64) -> Result<Vec<Redemption>, StoreError> {
        self.redemptions_where("account_id = $1 AND state = 'active' AND removed_at IS NULL", Arg::Int(account_id))
            .await
    }
}

/// What coupons did to an invoice being made ([`Store::create_invoice`]): the account's pending
/// adjustments it takes re-priced by their discount (id, discount, total after discount), and
/// the use it makes of each redemption. Empty for an invoice no coupon discounts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Discounted<'a> {
    pub repriced: &'a [(i64, i64, i64)],
    pub uses: &'a [RedemptionUse],
}

impl Work {
    /// Writes `discounted` for `invoice` (made in this work): the discounts of the pending
    /// adjustments it takes, before they are attached, then each redemption's use.
    pub(crate) async fn reprice_pending(&mut self, repriced: &[(i64, i64, i64)]) -> Result<(), StoreError> {
        for (id, discount, total) in repriced {
            crate::db::query("UPDATE adjustments SET discount = $1, total = $2 WHERE id = $3 AND state = 'pending'")
                .bind(*discount)
                .bind(*total)
                .bind(*id)
                .execute(self.tx.exec())
                .await?;
        }
        Ok(())
    }

    /// Records the use `invoice_id` made of its redemptions (discount given, used up or not).
    pub(crate) async fn record_redemption_uses(
        &mut self,
        invoice_id: i64,
        uses: &[RedemptionUse],
        now: i64,
    ) -> Result<(), StoreError> {
        for u in uses {
            crate::db::query(
                "UPDATE redemptions SET total_discounted = total_discounted + $1, \
                 state = CASE WHEN $2 = 1 THEN 'inactive' ELSE state END, updated_at = $3 WHERE id = $4",
            )
            .bind(u.discount)
            .bind(flag(u.inactive))
            .bind(now)
            .bind(u.redemption_id)
            .execute(self.tx.exec())
            .await?;
            if u.discount > 0 {
                crate::db::query(
                    "INSERT INTO redemption_invoices (redemption_id, invoice_id, discount) VALUES ($1, $2, $3)",
                )
                .bind(u.redemption_id)
                .bind(invoice_id)
                .bind(u.discount)
                .execute(self.tx.exec())
                .await?;
            }
        }
        Ok(())
    }
}

impl Work {
    async fn coupon_events(&mut self, site_id: i64, code: &str, events: &[NewEvent]) -> Result<(), StoreError> {
        let subjects: Vec<(i64, &str, &NewEvent)> = events.iter().map(|e| (site_id, code, e)).collect();
        self.append_events(&subjects).await
    }

    /// Which of these accounts hold an active redemption (their invoices may be discounted), in
    /// one statement.
    pub async fn accounts_with_redemptions(&mut self, account_ids: &[i64]) -> Result<Vec<i64>, StoreError> {
        if account_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT DISTINCT account_id FROM redemptions WHERE state = 'active' AND removed_at IS NULL \
             AND account_id IN ({})",
            self.backend.params(account_ids.len(), 1)
        );
        let mut query = crate::db::counted(&sql, account_ids.len());
        for id in account_ids {
            query = query.bind(*id);
        }
        let rows = query.fetch_all(self.tx.exec()).await?;
        rows.iter().map(|r| r.try_get("account_id").map_err(StoreError::from)).collect()
    }
}

#[cfg(test)]
mod tests;
