//! Plans of a site and the add-ons of each plan.
//!
//! A plan is identified on the API by its `plan_code`, unique per site; an add-on by its
//! `add_on_code`, unique per plan. A second create with a taken code, even a concurrent one, is
//! [`StoreError::DuplicatePlan`] / [`StoreError::DuplicateAddOn`] (the unique index decides).
//!
//! Deleting a plan or an add-on keeps its row and sets `deleted_at`: subscriptions made before
//! the delete still refer to it, so [`Store::plan`], [`Store::plan_by_id`] and [`Store::add_on`]
//! return deleted records too ([`Plan::is_deleted`]), while lists, updates and deletes only see
//! live ones. The code of a deleted record stays taken.
//!
//! Prices are integer cents per currency ([`Amounts`]), stored one row per currency in
//! `plan_amounts` (kind `unit` or `setup_fee`) and `add_on_amounts`. Setting a plan's or an
//! add-on's amounts on update replaces that whole set (a currency left out is dropped). A record
//! and its amounts are read with one statement, so a read never mixes two writes.
//!
//! Lists are read with the keyset paging of [`crate::list`].

use crate::db::is_unique_violation;
use std::collections::BTreeMap;

use crate::db::{DbQuery, DbRow, Tx};
use crate::list::{Arg, Conditions, Order, Page, PageRequest, Position, Sort, into_page, order_and_limit};
use crate::{Store, StoreError, flag};

/// Integer cents by currency code (`USD` → 1000), ordered by currency.
pub type Amounts = BTreeMap<String, i64>;

/// Unit of a billing or trial interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalUnit {
    Days,
    Months,
}

impl IntervalUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            IntervalUnit::Days => "days",
            IntervalUnit::Months => "months",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "days" => Some(IntervalUnit::Days),
            "months" => Some(IntervalUnit::Months),
            _ => None,
        }
    }
}

/// A length of time in days or months.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    pub length: i64,
    pub unit: IntervalUnit,
}

/// Revenue recognition schedule of a charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevenueScheduleType {
    Never,
    Evenly,
    AtRangeStart,
    AtRangeEnd,
}

impl RevenueScheduleType {
    pub fn as_str(self) -> &'static str {
        match self {
            RevenueScheduleType::Never => "never",
            RevenueScheduleType::Evenly => "evenly",
            RevenueScheduleType::AtRangeStart => "at_range_start",
            RevenueScheduleType::AtRangeEnd => "at_range_end",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "never" => Some(RevenueScheduleType::Never),
            "evenly" => Some(RevenueScheduleType::Evenly),
            "at_range_start" => Some(RevenueScheduleType::AtRangeStart),
            "at_range_end" => Some(RevenueScheduleType::AtRangeEnd),
            _ => None,
        }
    }
}

/// Whether an add-on has a fixed price per unit or is billed by usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOnType {
    Fixed,
    Usage,
}

impl AddOnType {
    pub fn as_str(self) -> &'static str {
        match self {
            AddOnType::Fixed => "fixed",
            AddOnType::Usage => "usage",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "fixed" => Some(AddOnType::Fixed),
            "usage" => Some(AddOnType::Usage),
            _ => None,
        }
    }
}

/// How usage of a usage add-on is priced: a price per unit or a percentage of the usage amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageType {
    Price,
    Percentage,
}

impl UsageType {
    pub fn as_str(self) -> &'static str {
        match self {
            UsageType::Price => "price",
            UsageType::Percentage => "percentage",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "price" => Some(UsageType::Price),
            "percentage" => Some(UsageType::Percentage),
            _ => None,
        }
    }
}

/// The properties of a plan a merchant sets. On create `None` takes the default (see
/// [`Store::create_plan`]); on update `None` leaves the stored value as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanFields {
    pub name: Option<String>,
    pub description: Option<String>,
    pub success_url: Option<String>,
    pub cancel_url: Option<String>,
    pub display_donation_amounts: Option<bool>,
    pub display_quantity: Option<bool>,
    pub display_phone_number: Option<bool>,
    pub bypass_hosted_confirmation: Option<bool>,
    pub unit_name: Option<String>,
    pub payment_page_tos_link: Option<String>,
    pub payment_page_css: Option<String>,
    pub plan_interval_length: Option<i64>,
    pub plan_interval_unit: Option<IntervalUnit>,
    pub trial_interval_length: Option<i64>,
    pub trial_interval_unit: Option<IntervalUnit>,
    pub total_billing_cycles: Option<i64>,
    pub accounting_code: Option<String>,
    pub setup_fee_accounting_code: Option<String>,
    pub revenue_schedule_type: Option<RevenueScheduleType>,
    pub setup_fee_revenue_schedule_type: Option<RevenueScheduleType>,
    pub trial_requires_billing_info: Option<bool>,
    pub tax_exempt: Option<bool>,
    pub tax_code: Option<String>,
    /// Price per billing interval; on update the whole set is replaced.
    pub unit_amount_in_cents: Option<Amounts>,
    /// One-time setup fee; on update the whole set is replaced.
    pub setup_fee_in_cents: Option<Amounts>,
}

/// A stored plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub id: i64,
    pub site_id: i64,
    pub plan_code: String,
    pub name: String,
    pub description: Option<String>,
    pub success_url: Option<String>,
    pub cancel_url: Option<String>,
    pub display_donation_amounts: bool,
    pub display_quantity: bool,
    pub display_phone_number: bool,
    pub bypass_hosted_confirmation: bool,
    pub unit_name: Option<String>,
    pub payment_page_tos_link: Option<String>,
    pub payment_page_css: Option<String>,
    /// The billing interval (length at least 1).
    pub interval: Interval,
    /// The free trial (length 0: none).
    pub trial: Interval,
    /// Billing cycles before the subscription expires (`None`: renews until canceled).
    pub total_billing_cycles: Option<i64>,
    pub accounting_code: Option<String>,
    pub setup_fee_accounting_code: Option<String>,
    pub revenue_schedule_type: RevenueScheduleType,
    pub setup_fee_revenue_schedule_type: RevenueScheduleType,
    pub trial_requires_billing_info: bool,
    pub tax_exempt: bool,
    pub tax_code: Option<String>,
    /// Price per billing interval by currency; the plan is sold in these currencies.
    pub unit_amounts: Amounts,
    /// Setup fee by currency (a currency without one has no setup fee).
    pub setup_fees: Amounts,
    pub created_at: i64,
    pub updated_at: i64,
    /// When the plan was deleted (it stays for the subscriptions that refer to it).
    pub deleted_at: Option<i64>,
}

impl Plan {
    pub fn is_deleted(&self) -> bool {
        self.deleted_at.is_some()
    }

    /// The price per billing interval in `currency`, if the plan is sold in it.
    pub fn unit_amount(&self, currency: &str) -> Option<i64> {
        self.unit_amounts.get(currency).copied()
    }

    /// The setup fee in `currency` (0 when the plan has none in it).
    pub fn setup_fee(&self, currency: &str) -> i64 {
        self.setup_fees.get(currency).copied().unwrap_or(0)
    }

    /// Whether new subscriptions start with a free trial.
    pub fn has_trial(&self) -> bool {
        self.trial.length > 0
    }

    /// The plan's place in a list sorted by `sort`.
    pub fn position(&self, sort: Sort) -> Position {
        let value = match sort {
            Sort::CreatedAt => self.created_at,
            Sort::UpdatedAt => self.updated_at,
        };
        Position { value, id: self.id }
    }
}

/// A percentage with at most four decimal places, held exactly as an integer number of
/// ten-thousandths of a percent (2.5 % is `Percentage(25_000)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Percentage(pub i64);

impl Percentage {
    /// Units per percent.
    pub const SCALE: i64 = 10_000;

    /// The percentage `value` (e.g. 2.5), if it is finite and has at most four decimal places.
    pub fn from_f64(value: f64) -> Option<Self> {
        let scaled = value * Self::SCALE as f64;
        let rounded = scaled.round();
        let exact = value.is_finite() && (scaled - rounded).abs() <= 1e-6 * rounded.abs().max(1.0);
        // Within ±2^53 the rounded value is an exact integer.
        (exact && rounded.abs() < 9_007_199_254_740_992.0).then_some(Percentage(rounded as i64))
    }

    pub fn as_f64(self) -> f64 {
        self.0 as f64 / Self::SCALE as f64
    }
}

/// The properties of an add-on a merchant sets. On create `None` takes the default (see
/// [`Store::create_add_on`]); on update `None` leaves the stored value as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddOnFields {
    pub name: Option<String>,
    pub default_quantity: Option<i64>,
    pub display_quantity_on_hosted_page: Option<bool>,
    pub display_quantity: Option<bool>,
    pub add_on_type: Option<AddOnType>,
    pub measured_unit_id: Option<i64>,
    pub usage_type: Option<UsageType>,
    pub usage_percentage: Option<Percentage>,
    pub optional: Option<bool>,
    pub accounting_code: Option<String>,
    pub revenue_schedule_type: Option<RevenueScheduleType>,
    pub tax_code: Option<String>,
    /// Price per unit; on update the whole set is replaced.
    pub unit_amount_in_cents: Option<Amounts>,
}

/// A stored add-on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddOn {
    pub id: i64,
    pub plan_id: i64,
    pub add_on_code: String,
    pub name: String,
    pub default_quantity: i64,
    pub display_quantity_on_hosted_page: bool,
    pub display_quantity: bool,
    pub add_on_type: AddOnType,
    pub measured_unit_id: Option<i64>,
    pub usage_type: Option<UsageType>,
    pub usage_percentage: Option<Percentage>,
    pub optional: bool,
    pub accounting_code: Option<String>,
    pub revenue_schedule_type: RevenueScheduleType,
    pub tax_code: Option<String>,
    /// Price per unit by currency.
    pub unit_amounts: Amounts,
    pub created_at: i64,
    pub updated_at: i64,
    pub deleted_at: Option<i64>,
}

impl AddOn {
    pub fn is_deleted(&self) -> bool {
        self.deleted_at.is_some()
    }

    /// The price per unit in `currency`, if the add-on has one.
    pub fn unit_amount(&self, currency: &str) -> Option<i64> {
        self.unit_amounts.get(currency).copied()
    }

    /// The add-on's place in a list sorted by `sort`.
    pub fn position(&self, sort: Sort) -> Position {
        let value = match sort {
            Sort::CreatedAt => self.created_at,
            Sort::UpdatedAt => self.updated_at,
        };
        Position { value, id: self.id }
    }
}

/// Kinds of rows in `plan_amounts`.
pub(crate) const UNIT: &str = "unit";
pub(crate) const SETUP_FEE: &str = "setup_fee";

const PLAN_COLUMNS: &str = "id, site_id, plan_code, name, description, success_url, cancel_url, \
     display_donation_amounts, display_quantity, display_phone_number, bypass_hosted_confirmation, unit_name, \
     payment_page_tos_link, payment_page_css, plan_interval_length, plan_interval_unit, trial_interval_length, \
     trial_interval_unit, total_billing_cycles, accounting_code, setup_fee_accounting_code, revenue_schedule_type, \
     setup_fee_revenue_schedule_type, trial_requires_billing_info, tax_exempt, tax_code, created_at, updated_at, \
     deleted_at";

/// A value of a settable column (`None`: unset on create, unchanged on update).
pub(crate) enum Settable {
    Text(Option<String>),
    Int(Option<i64>),
    Flag(Option<bool>),
}

pub(crate) fn bind_settable<'q>(mut query: DbQuery<'q>, values: Vec<(&'static str, Settable)>) -> DbQuery<'q> {
    for (_, value) in values {
        query = match value {
            Settable::Text(v) => query.bind(v),
            Settable::Int(v) => query.bind(v),
            Settable::Flag(v) => query.bind(v.map(flag)),
        };
    }
    query
}

pub(crate) fn text(v: &Option<String>) -> Settable {
    Settable::Text(v.clone())
}

/// The plan columns a merchant sets, with their values in `f` (amounts are rows of their own).
fn plan_settable(f: &PlanFields) -> Vec<(&'static str, Settable)> {
    let name = |v: Option<IntervalUnit>| Settable::Text(v.map(|u| u.as_str().to_owned()));
    let schedule = |v: Option<RevenueScheduleType>| Settable::Text(v.map(|s| s.as_str().to_owned()));
    vec![
        ("name", text(&f.name)),
        ("description", text(&f.description)),
        ("success_url", text(&f.success_url)),
        ("cancel_url", text(&f.cancel_url)),
        ("display_donation_amounts", Settable::Flag(f.display_donation_amounts)),
        ("display_quantity", Settable::Flag(f.display_quantity)),
        ("display_phone_number", Settable::Flag(f.display_phone_number)),
        ("bypass_hosted_confirmation", Settable::Flag(f.bypass_hosted_confirmation)),
        ("unit_name", text(&f.unit_name)),
        ("payment_page_tos_link", text(&f.payment_page_tos_link)),
        ("payment_page_css", text(&f.payment_page_css)),
        ("plan_interval_length", Settable::Int(f.plan_interval_length)),
        ("plan_interval_unit", name(f.plan_interval_unit)),
        ("trial_interval_length", Settable::Int(f.trial_interval_length)),
        ("trial_interval_unit", name(f.trial_interval_unit)),
        ("total_billing_cycles", Settable::Int(f.total_billing_cycles)),
        ("accounting_code", text(&f.accounting_code)),
        ("setup_fee_accounting_code", text(&f.setup_fee_accounting_code)),
        ("revenue_schedule_type", schedule(f.revenue_schedule_type)),
        ("setup_fee_revenue_schedule_type", schedule(f.setup_fee_revenue_schedule_type)),
        ("trial_requires_billing_info", Settable::Flag(f.trial_requires_billing_info)),
        ("tax_exempt", Settable::Flag(f.tax_exempt)),
        ("tax_code", text(&f.tax_code)),
    ]
}

/// `fields` with the defaults of a new plan filled in.
fn plan_defaults(fields: &PlanFields) -> PlanFields {
    let f = fields.clone();
    PlanFields {
        display_donation_amounts: Some(f.display_donation_amounts.unwrap_or(false)),
        display_quantity: Some(f.display_quantity.unwrap_or(false)),
        display_phone_number: Some(f.display_phone_number.unwrap_or(false)),
        bypass_hosted_confirmation: Some(f.bypass_hosted_confirmation.unwrap_or(false)),
        plan_interval_length: Some(f.plan_interval_length.unwrap_or(1)),
        plan_interval_unit: Some(f.plan_interval_unit.unwrap_or(IntervalUnit::Months)),
        trial_interval_length: Some(f.trial_interval_length.unwrap_or(0)),
        trial_interval_unit: Some(f.trial_interval_unit.unwrap_or(IntervalUnit::Days)),
        revenue_schedule_type: Some(f.revenue_schedule_type.unwrap_or(RevenueScheduleType::Evenly)),
        setup_fee_revenue_schedule_type: Some(f.setup_fee_revenue_schedule_type.unwrap_or(RevenueScheduleType::Evenly)),
        trial_requires_billing_info: Some(f.trial_requires_billing_info.unwrap_or(true)),
        tax_exempt: Some(f.tax_exempt.unwrap_or(false)),
        ..f
    }
}

pub(crate) fn stored<T>(column: &str, text: &str, parse: impl Fn(&str) -> Option<T>) -> Result<T, StoreError> {
    parse(text).ok_or_else(|| StoreError::Invalid(format!("stored {column} `{text}`")))
}

pub(crate) fn get_bool(row: &DbRow, column: &str) -> Result<bool, StoreError> {
    Ok(row.try_get::<i64, _>(column)? != 0)
}

fn plan_from_row(row: &DbRow) -> Result<Plan, StoreError> {
    let unit = |column: &str| -> Result<IntervalUnit, StoreError> {
        stored(column, &row.try_get::<String, _>(column)?, IntervalUnit::parse)
    };
    let schedule = |column: &str| -> Result<RevenueScheduleType, StoreError> {
        stored(column, &row.try_get::<String, _>(column)?, RevenueScheduleType::parse)
    };
    Ok(Plan {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        plan_code: row.try_get("plan_code")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        success_url: row.try_get("success_url")?,
        cancel_url: row.try_get("cancel_url")?,
        display_donation_amounts: get_bool(row, "display_donation_amounts")?,
        display_quantity: get_bool(row, "display_quantity")?,
        display_phone_number: get_bool(row, "display_phone_number")?,
        bypass_hosted_confirmation: get_bool(row, "bypass_hosted_confirmation")?,
        unit_name: row.try_get("unit_name")?,
        payment_page_tos_link: row.try_get("payment_page_tos_link")?,
        payment_page_css: row.try_get("payment_page_css")?,
        interval: Interval { length: row.try_get("plan_interval_length")?, unit: unit("plan_interval_unit")? },
        trial: Interval { length: row.try_get("trial_interval_length")?, unit: unit("trial_interval_unit")? },
        total_billing_cycles: row.try_get("total_billing_cycles")?,
        accounting_code: row.try_get("accounting_code")?,
        setup_fee_accounting_code: row.try_get("setup_fee_accounting_code")?,
        revenue_schedule_type: schedule("revenue_schedule_type")?,
        setup_fee_revenue_schedule_type: schedule("setup_fee_revenue_schedule_type")?,
        trial_requires_billing_info: get_bool(row, "trial_requires_billing_info")?,
        tax_exempt: get_bool(row, "tax_exempt")?,
        tax_code: row.try_get("tax_code")?,
        unit_amounts: Amounts::new(),
        setup_fees: Amounts::new(),
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        deleted_at: row.try_get("deleted_at")?,
    })
}

/// The amount joined to a record row (`None` for a record without amounts).
pub(crate) fn joined_amount(row: &DbRow) -> Result<Option<(String, String, i64)>, StoreError> {
    let kind: Option<String> = row.try_get("amount_kind")?;
    let currency: Option<String> = row.try_get("amount_currency")?;
    let cents: Option<i64> = row.try_get("amount_cents")?;
    Ok(match (kind, currency, cents) {
        (Some(kind), Some(currency), Some(cents)) => Some((kind, currency, cents)),
        _ => None,
    })
}

/// Records of rows that hold one record per amount (consecutive rows of one record), in order.
pub(crate) fn fold<T>(
    rows: &[DbRow],
    from_row: impl Fn(&DbRow) -> Result<T, StoreError>,
    id: impl Fn(&T) -> i64,
    mut add: impl FnMut(&mut T, String, String, i64),
) -> Result<Vec<T>, StoreError> {
    let mut out: Vec<T> = Vec::new();
    for row in rows {
        let row_id: i64 = row.try_get("id")?;
        if out.last().is_none_or(|last| id(last) != row_id) {
            out.push(from_row(row)?);
        }
        if let (Some((kind, currency, cents)), Some(last)) = (joined_amount(row)?, out.last_mut()) {
            add(last, kind, currency, cents);
        }
    }
    Ok(out)
}

/// `ORDER BY` of the outer statement of a page (the inner one chose the page's rows).
pub(crate) fn outer_order(page: &PageRequest) -> String {
    let column = page.sort.as_str();
    let dir = match page.order {
        Order::Asc => "ASC",
        Order::Desc => "DESC",
    };
    format!(" ORDER BY r.{column} {dir}, r.id {dir}")
}

/// The plans chosen by `conditions` (and `tail`: order and limit), each with its amounts, in
/// one statement.
async fn fetch_plans<'e, E>(exec: E, conditions: &Conditions, tail: &str, order: &str) -> Result<Vec<Plan>, StoreError>
where
    E: Into<crate::db::Exec<'e>>,
{
    let sql = format!(
        "SELECT r.*, a.kind AS amount_kind, a.currency AS amount_currency, a.amount_in_cents AS amount_cents \
         FROM (SELECT {PLAN_COLUMNS} FROM plans{}{tail}) r LEFT JOIN plan_amounts a ON a.plan_id = r.id{order}",
        conditions.sql()
    );
    let rows = conditions.bind(crate::db::query(&sql)).fetch_all(exec).await?;
    fold(
        &rows,
        plan_from_row,
        |p| p.id,
        |p, kind, currency, cents| {
            if kind == SETUP_FEE {
                p.setup_fees.insert(currency, cents);
            } else {
                p.unit_amounts.insert(currency, cents);
            }
        },
    )
}

pub(crate) fn by_id(id: i64) -> Conditions {
    let mut conditions = Conditions::default();
    conditions.eq("id", Arg::Int(id));
    conditions
}

/// Replaces the `kind` amounts of a plan.
async fn write_plan_amounts(tx: &mut Tx, plan_id: i64, kind: &str, amounts: &Amounts) -> Result<(), StoreError> {
    crate::db::query("DELETE FROM plan_amounts WHERE plan_id = $1 AND kind = $2")
        .bind(plan_id)
        .bind(kind)
        .execute(tx.exec())
        .await?;
    for (currency, cents) in amounts {
        crate::db::query("INSERT INTO plan_amounts (plan_id, kind, currency, amount_in_cents) VALUES ($1, $2, $3, $4)")
            .bind(plan_id)
            .bind(kind)
            .bind(currency)
            .bind(*cents)
            .execute(tx.exec())
            .await?;
    }
    Ok(())
}

/// Refuses negative amounts before they reach the database's check.
pub(crate) fn check_amounts(amounts: Option<&Amounts>) -> Result<(), StoreError> {
    match amounts.into_iter().flatten().find(|(_, cents)| **cents < 0) {
        Some((currency, cents)) => Err(StoreError::Invalid(format!("amount {cents} in {currency} (at least 0)"))),
        None => Ok(()),
    }
}

impl Store {
    /// Creates a plan. `fields.name` is required; the other properties default to: intervals of
    /// 1 month with a trial of 0 days, no total billing cycles, display and tax flags false,
    /// `trial_requires_billing_info` true, revenue schedules `evenly`, no amounts.
    /// A code the site already uses (also by a deleted plan) is [`StoreError::DuplicatePlan`],
    /// also when two creates race.
    pub async fn create_plan(
        &self,
        site_id: i64,
        plan_code: &str,
        fields: &PlanFields,
        now: i64,
    ) -> Result<Plan, StoreError> {
        if fields.name.is_none() {
            return Err(StoreError::Invalid("a plan needs a name".into()));
        }
        check_amounts(fields.unit_amount_in_cents.as_ref())?;
        check_amounts(fields.setup_fee_in_cents.as_ref())?;
        let values = plan_settable(&plan_defaults(fields));
        let columns: Vec<&str> = values.iter().map(|(c, _)| *c).collect();
        let placeholders: Vec<String> = (0..columns.len()).map(|i| format!("${}", i + 4)).collect();
        let sql = format!(
            "INSERT INTO plans (site_id, plan_code, created_at, updated_at, {}) VALUES ($1, $2, $3, $3, {}) RETURNING id",
            columns.join(", "),
            placeholders.join(", ")
        );
        let mut tx = crate::db::begin(&self.pool).await?;
        let query = crate::db::query(&sql).bind(site_id).bind(plan_code).bind(now);
        let id: i64 = match bind_settable(query, values).fetch_one(tx.exec()).await {
            Ok(row) => row.try_get("id")?,
            Err(e) if is_unique_violation(&e) => return Err(StoreError::DuplicatePlan(plan_code.to_owned())),
            Err(e) => return Err(e.into()),
        };
        write_plan_amounts(&mut tx, id, UNIT, fields.unit_amount_in_cents.as_ref().unwrap_or(&Amounts::new())).await?;
        write_plan_amounts(&mut tx, id, SETUP_FEE, fields.setup_fee_in_cents.as_ref().unwrap_or(&Amounts::new()))
            .await?;
        let plan = fetch_plans(tx.exec(), &by_id(id), "", "").await?.pop();
        tx.commit().await?;
        plan.ok_or_else(|| StoreError::Invalid(format!("plan {id} vanished while it was created")))
    }

    /// The site's plan with this code, deleted or not ([`Plan::is_deleted`]).
    pub async fn plan(&self, site_id: i64, plan_code: &str) -> Result<Option<Plan>, StoreError> {
        let mut conditions = Conditions::default();
        let s = conditions.arg(Arg::Int(site_id));
        let c = conditions.arg(Arg::Text(plan_code.to_owned()));
        conditions.push(format!("site_id = {s} AND plan_code = {c}"));
        Ok(fetch_plans(&self.reads, &conditions, "", "").await?.pop())
    }

    /// The plan with this id, deleted or not (for records that refer to a plan by id).
    pub async fn plan_by_id(&self, plan_id: i64) -> Result<Option<Plan>, StoreError> {
        Ok(fetch_plans(&self.reads, &by_id(plan_id), "", "").await?.pop())
    }

    /// Changes the properties given in `changes` (the others stay; a given amount set replaces
    /// the stored one) and moves `updated_at`. `None` when the site has no such plan or it is
    /// deleted.
    pub async fn update_plan(
        &self,
        site_id: i64,
        plan_code: &str,
        changes: &PlanFields,
        now: i64,
    ) -> Result<Option<Plan>, StoreError> {
        check_amounts(changes.unit_amount_in_cents.as_ref())?;
        check_amounts(changes.setup_fee_in_cents.as_ref())?;
        let values = plan_settable(changes);
        let sets: Vec<String> =
            values.iter().enumerate().map(|(i, (c, _))| format!("{c} = COALESCE(${}, {c})", i + 4)).collect();
        let sql = format!(
            "UPDATE plans SET updated_at = $1, {} WHERE site_id = $2 AND plan_code = $3 AND deleted_at IS NULL \
             RETURNING id",
            sets.join(", ")
        );
        let mut tx = crate::db::begin(&self.pool).await?;
        let query = crate::db::query(&sql).bind(now).bind(site_id).bind(plan_code);
        let Some(row) = bind_settable(query, values).fetch_optional(tx.exec()).await? else {
            return Ok(None);
        };
        let id: i64 = row.try_get("id")?;
        if let Some(amounts) = &changes.unit_amount_in_cents {
            write_plan_amounts(&mut tx, id, UNIT, amounts).await?;
        }
        if let Some(amounts) = &changes.setup_fee_in_cents {
            write_plan_amounts(&mut tx, id, SETUP_FEE, amounts).await?;
        }
        let plan = fetch_plans(tx.exec(), &by_id(id), "", "").await?.pop();
        tx.commit().await?;
        Ok(plan)
    }

    /// Deletes a live plan: sets `deleted_at` and keeps the record (and its add-ons) for the
    /// subscriptions that refer to it. `None` when the site has no such plan or it is already
    /// deleted.
    pub async fn delete_plan(&self, site_id: i64, plan_code: &str, now: i64) -> Result<Option<Plan>, StoreError> {
        let row = crate::db::query(
            "UPDATE plans SET deleted_at = $1 WHERE site_id = $2 AND plan_code = $3 AND deleted_at IS NULL \
             RETURNING id",
        )
        .bind(now)
        .bind(site_id)
        .bind(plan_code)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(fetch_plans(&self.pool, &by_id(row.try_get("id")?), "", "").await?.pop()),
            None => Ok(None),
        }
    }

    /// The currencies the site's live plans are priced in (the site's currencies), in order.
    pub async fn site_currencies(&self, site_id: i64) -> Result<Vec<String>, StoreError> {
        let rows = crate::db::query(
            "SELECT DISTINCT a.currency AS currency FROM plan_amounts a JOIN plans p ON p.id = a.plan_id \
             WHERE p.site_id = $1 AND p.deleted_at IS NULL AND a.kind = $2 ORDER BY a.currency",
        )
        .bind(site_id)
        .bind(UNIT)
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(|r| r.try_get("currency").map_err(StoreError::from)).collect()
    }

    /// A page of the site's live plans, with the number of live plans in the page's time range.
    pub async fn list_plans(&self, site_id: i64, page: &PageRequest) -> Result<Page<Plan>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("site_id", Arg::Int(site_id));
        conditions.push("deleted_at IS NULL".to_owned());
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM plans{}", conditions.sql());
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let items = fetch_plans(&self.reads, &conditions, &order_and_limit(page), &outer_order(page)).await?;
        Ok(into_page(items, page, total, |p| p.position(page.sort)))
    }
}

#[cfg(test)]
mod tests;
