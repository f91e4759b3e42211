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

use sqlx::Row;

use crate::db::{Db, DbQuery, DbRow, Tx};
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
const UNIT: &str = "unit";
const SETUP_FEE: &str = "setup_fee";

const PLAN_COLUMNS: &str = "id, site_id, plan_code, name, description, success_url, cancel_url, \
     display_donation_amounts, display_quantity, display_phone_number, bypass_hosted_confirmation, unit_name, \
     payment_page_tos_link, payment_page_css, plan_interval_length, plan_interval_unit, trial_interval_length, \
     trial_interval_unit, total_billing_cycles, accounting_code, setup_fee_accounting_code, revenue_schedule_type, \
     setup_fee_revenue_schedule_type, trial_requires_billing_info, tax_exempt, tax_code, created_at, updated_at, \
     deleted_at";

const ADD_ON_COLUMNS: &str = "id, plan_id, add_on_code, name, default_quantity, display_quantity_on_hosted_page, \
     display_quantity, add_on_type, measured_unit_id, usage_type, usage_percentage, optional, accounting_code, \
     revenue_schedule_type, tax_code, created_at, updated_at, deleted_at";

/// A value of a settable column (`None`: unset on create, unchanged on update).
enum Settable {
    Text(Option<String>),
    Int(Option<i64>),
    Flag(Option<bool>),
}

fn bind_settable<'q>(mut query: DbQuery<'q>, values: Vec<(&'static str, Settable)>) -> DbQuery<'q> {
    for (_, value) in values {
        query = match value {
            Settable::Text(v) => query.bind(v),
            Settable::Int(v) => query.bind(v),
            Settable::Flag(v) => query.bind(v.map(flag)),
        };
    }
    query
}

fn text(v: &Option<String>) -> Settable {
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

/// The add-on columns a merchant sets, with their values in `f`.
fn add_on_settable(f: &AddOnFields) -> Vec<(&'static str, Settable)> {
    vec![
        ("name", text(&f.name)),
        ("default_quantity", Settable::Int(f.default_quantity)),
        ("display_quantity_on_hosted_page", Settable::Flag(f.display_quantity_on_hosted_page)),
        ("display_quantity", Settable::Flag(f.display_quantity)),
        ("add_on_type", Settable::Text(f.add_on_type.map(|t| t.as_str().to_owned()))),
        ("measured_unit_id", Settable::Int(f.measured_unit_id)),
        ("usage_type", Settable::Text(f.usage_type.map(|t| t.as_str().to_owned()))),
        ("usage_percentage", Settable::Int(f.usage_percentage.map(|p| p.0))),
        ("optional", Settable::Flag(f.optional)),
        ("accounting_code", text(&f.accounting_code)),
        ("revenue_schedule_type", Settable::Text(f.revenue_schedule_type.map(|s| s.as_str().to_owned()))),
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

/// `fields` with the defaults of a new add-on filled in (the name defaults to the code).
fn add_on_defaults(code: &str, fields: &AddOnFields) -> AddOnFields {
    let f = fields.clone();
    AddOnFields {
        name: Some(f.name.clone().unwrap_or_else(|| code.to_owned())),
        default_quantity: Some(f.default_quantity.unwrap_or(1)),
        display_quantity_on_hosted_page: Some(f.display_quantity_on_hosted_page.unwrap_or(false)),
        display_quantity: Some(f.display_quantity.unwrap_or(false)),
        add_on_type: Some(f.add_on_type.unwrap_or(AddOnType::Fixed)),
        optional: Some(f.optional.unwrap_or(true)),
        revenue_schedule_type: Some(f.revenue_schedule_type.unwrap_or(RevenueScheduleType::Evenly)),
        ..f
    }
}

fn stored<T>(column: &str, text: &str, parse: impl Fn(&str) -> Option<T>) -> Result<T, StoreError> {
    parse(text).ok_or_else(|| StoreError::Invalid(format!("stored {column} `{text}`")))
}

fn get_bool(row: &DbRow, column: &str) -> Result<bool, StoreError> {
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

fn add_on_from_row(row: &DbRow) -> Result<AddOn, StoreError> {
    let usage_type: Option<String> = row.try_get("usage_type")?;
    Ok(AddOn {
        id: row.try_get("id")?,
        plan_id: row.try_get("plan_id")?,
        add_on_code: row.try_get("add_on_code")?,
        name: row.try_get("name")?,
        default_quantity: row.try_get("default_quantity")?,
        display_quantity_on_hosted_page: get_bool(row, "display_quantity_on_hosted_page")?,
        display_quantity: get_bool(row, "display_quantity")?,
        add_on_type: stored("add_on_type", &row.try_get::<String, _>("add_on_type")?, AddOnType::parse)?,
        measured_unit_id: row.try_get("measured_unit_id")?,
        usage_type: usage_type.map(|t| stored("usage_type", &t, UsageType::parse)).transpose()?,
        usage_percentage: row.try_get::<Option<i64>, _>("usage_percentage")?.map(Percentage),
        optional: get_bool(row, "optional")?,
        accounting_code: row.try_get("accounting_code")?,
        revenue_schedule_type: stored(
            "revenue_schedule_type",
            &row.try_get::<String, _>("revenue_schedule_type")?,
            RevenueScheduleType::parse,
        )?,
        tax_code: row.try_get("tax_code")?,
        unit_amounts: Amounts::new(),
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        deleted_at: row.try_get("deleted_at")?,
    })
}

/// The amount joined to a record row (`None` for a record without amounts).
fn joined_amount(row: &DbRow) -> Result<Option<(String, String, i64)>, StoreError> {
    let kind: Option<String> = row.try_get("amount_kind")?;
    let currency: Option<String> = row.try_get("amount_currency")?;
    let cents: Option<i64> = row.try_get("amount_cents")?;
    Ok(match (kind, currency, cents) {
        (Some(kind), Some(currency), Some(cents)) => Some((kind, currency, cents)),
        _ => None,
    })
}

/// Records of rows that hold one record per amount (consecutive rows of one record), in order.
fn fold<T>(
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
fn outer_order(page: &PageRequest) -> String {
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
    E: sqlx::Executor<'e, Database = Db>,
{
    let sql = format!(
        "SELECT r.*, a.kind AS amount_kind, a.currency AS amount_currency, a.amount_in_cents AS amount_cents \
         FROM (SELECT {PLAN_COLUMNS} FROM plans{}{tail}) r LEFT JOIN plan_amounts a ON a.plan_id = r.id{order}",
        conditions.sql()
    );
    let rows = conditions.bind(sqlx::query(&sql)).fetch_all(exec).await?;
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

/// The add-ons chosen by `conditions` (and `tail`), each with its amounts, in one statement.
async fn fetch_add_ons<'e, E>(
    exec: E,
    conditions: &Conditions,
    tail: &str,
    order: &str,
) -> Result<Vec<AddOn>, StoreError>
where
    E: sqlx::Executor<'e, Database = Db>,
{
    let sql = format!(
        "SELECT r.*, '{UNIT}' AS amount_kind, a.currency AS amount_currency, a.amount_in_cents AS amount_cents \
         FROM (SELECT {ADD_ON_COLUMNS} FROM add_ons{}{tail}) r LEFT JOIN add_on_amounts a ON a.add_on_id = r.id{order}",
        conditions.sql()
    );
    let rows = conditions.bind(sqlx::query(&sql)).fetch_all(exec).await?;
    fold(
        &rows,
        add_on_from_row,
        |a| a.id,
        |a, _, currency, cents| {
            a.unit_amounts.insert(currency, cents);
        },
    )
}

fn by_id(id: i64) -> Conditions {
    let mut conditions = Conditions::default();
    conditions.eq("id", Arg::Int(id));
    conditions
}

/// Replaces the `kind` amounts of a plan.
async fn write_plan_amounts(tx: &mut Tx, plan_id: i64, kind: &str, amounts: &Amounts) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM plan_amounts WHERE plan_id = $1 AND kind = $2")
        .bind(plan_id)
        .bind(kind)
        .execute(&mut **tx)
        .await?;
    for (currency, cents) in amounts {
        sqlx::query("INSERT INTO plan_amounts (plan_id, kind, currency, amount_in_cents) VALUES ($1, $2, $3, $4)")
            .bind(plan_id)
            .bind(kind)
            .bind(currency)
            .bind(*cents)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Replaces the amounts of an add-on.
async fn write_add_on_amounts(tx: &mut Tx, add_on_id: i64, amounts: &Amounts) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM add_on_amounts WHERE add_on_id = $1").bind(add_on_id).execute(&mut **tx).await?;
    for (currency, cents) in amounts {
        sqlx::query("INSERT INTO add_on_amounts (add_on_id, currency, amount_in_cents) VALUES ($1, $2, $3)")
            .bind(add_on_id)
            .bind(currency)
            .bind(*cents)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Refuses negative amounts before they reach the database's check.
fn check_amounts(amounts: Option<&Amounts>) -> Result<(), StoreError> {
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
        let mut tx = self.pool.begin().await?;
        let query = sqlx::query(&sql).bind(site_id).bind(plan_code).bind(now);
        let id: i64 = match bind_settable(query, values).fetch_one(&mut *tx).await {
            Ok(row) => row.try_get("id")?,
            Err(e) if is_unique_violation(&e) => return Err(StoreError::DuplicatePlan(plan_code.to_owned())),
            Err(e) => return Err(e.into()),
        };
        write_plan_amounts(&mut tx, id, UNIT, fields.unit_amount_in_cents.as_ref().unwrap_or(&Amounts::new())).await?;
        write_plan_amounts(&mut tx, id, SETUP_FEE, fields.setup_fee_in_cents.as_ref().unwrap_or(&Amounts::new()))
            .await?;
        let plan = fetch_plans(&mut *tx, &by_id(id), "", "").await?.pop();
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
        let mut tx = self.pool.begin().await?;
        let query = sqlx::query(&sql).bind(now).bind(site_id).bind(plan_code);
        let Some(row) = bind_settable(query, values).fetch_optional(&mut *tx).await? else {
            return Ok(None);
        };
        let id: i64 = row.try_get("id")?;
        if let Some(amounts) = &changes.unit_amount_in_cents {
            write_plan_amounts(&mut tx, id, UNIT, amounts).await?;
        }
        if let Some(amounts) = &changes.setup_fee_in_cents {
            write_plan_amounts(&mut tx, id, SETUP_FEE, amounts).await?;
        }
        let plan = fetch_plans(&mut *tx, &by_id(id), "", "").await?.pop();
        tx.commit().await?;
        Ok(plan)
    }

    /// Deletes a live plan: sets `deleted_at` and keeps the record (and its add-ons) for the
    /// subscriptions that refer to it. `None` when the site has no such plan or it is already
    /// deleted.
    pub async fn delete_plan(&self, site_id: i64, plan_code: &str, now: i64) -> Result<Option<Plan>, StoreError> {
        let row = sqlx::query(
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
        let rows = sqlx::query(
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
        let total: i64 = conditions.bind(sqlx::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let items = fetch_plans(&self.reads, &conditions, &order_and_limit(page), &outer_order(page)).await?;
        Ok(into_page(items, page, total, |p| p.position(page.sort)))
    }

    /// Adds an add-on to a plan. The properties default to: name = the code, default quantity
    /// 1, display flags false, type `fixed`, optional, revenue schedule `evenly`, no amounts.
    /// A code the plan already uses (also by a deleted add-on) is [`StoreError::DuplicateAddOn`],
    /// also when two creates race.
    pub async fn create_add_on(
        &self,
        plan_id: i64,
        add_on_code: &str,
        fields: &AddOnFields,
        now: i64,
    ) -> Result<AddOn, StoreError> {
        check_amounts(fields.unit_amount_in_cents.as_ref())?;
        let values = add_on_settable(&add_on_defaults(add_on_code, fields));
        let columns: Vec<&str> = values.iter().map(|(c, _)| *c).collect();
        let placeholders: Vec<String> = (0..columns.len()).map(|i| format!("${}", i + 4)).collect();
        let sql = format!(
            "INSERT INTO add_ons (plan_id, add_on_code, created_at, updated_at, {}) VALUES ($1, $2, $3, $3, {}) \
             RETURNING id",
            columns.join(", "),
            placeholders.join(", ")
        );
        let mut tx = self.pool.begin().await?;
        let query = sqlx::query(&sql).bind(plan_id).bind(add_on_code).bind(now);
        let id: i64 = match bind_settable(query, values).fetch_one(&mut *tx).await {
            Ok(row) => row.try_get("id")?,
            Err(e) if is_unique_violation(&e) => return Err(StoreError::DuplicateAddOn(add_on_code.to_owned())),
            Err(e) => return Err(e.into()),
        };
        write_add_on_amounts(&mut tx, id, fields.unit_amount_in_cents.as_ref().unwrap_or(&Amounts::new())).await?;
        let add_on = fetch_add_ons(&mut *tx, &by_id(id), "", "").await?.pop();
        tx.commit().await?;
        add_on.ok_or_else(|| StoreError::Invalid(format!("add-on {id} vanished while it was created")))
    }

    /// The plan's add-on with this code, deleted or not ([`AddOn::is_deleted`]).
    pub async fn add_on(&self, plan_id: i64, add_on_code: &str) -> Result<Option<AddOn>, StoreError> {
        let mut conditions = Conditions::default();
        let p = conditions.arg(Arg::Int(plan_id));
        let c = conditions.arg(Arg::Text(add_on_code.to_owned()));
        conditions.push(format!("plan_id = {p} AND add_on_code = {c}"));
        Ok(fetch_add_ons(&self.reads, &conditions, "", "").await?.pop())
    }

    /// The plan's live add-ons, oldest first.
    pub async fn add_ons(&self, plan_id: i64) -> Result<Vec<AddOn>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("plan_id", Arg::Int(plan_id));
        conditions.push("deleted_at IS NULL".to_owned());
        fetch_add_ons(&self.reads, &conditions, " ORDER BY id", " ORDER BY r.id").await
    }

    /// Changes the properties given in `changes` (the others stay; given amounts replace the
    /// stored ones) and moves `updated_at`. `None` when the plan has no such live add-on.
    pub async fn update_add_on(
        &self,
        plan_id: i64,
        add_on_code: &str,
        changes: &AddOnFields,
        now: i64,
    ) -> Result<Option<AddOn>, StoreError> {
        check_amounts(changes.unit_amount_in_cents.as_ref())?;
        let values = add_on_settable(changes);
        let sets: Vec<String> =
            values.iter().enumerate().map(|(i, (c, _))| format!("{c} = COALESCE(${}, {c})", i + 4)).collect();
        let sql = format!(
            "UPDATE add_ons SET updated_at = $1, {} WHERE plan_id = $2 AND add_on_code = $3 AND deleted_at IS NULL \
             RETURNING id",
            sets.join(", ")
        );
        let mut tx = self.pool.begin().await?;
        let query = sqlx::query(&sql).bind(now).bind(plan_id).bind(add_on_code);
        let Some(row) = bind_settable(query, values).fetch_optional(&mut *tx).await? else {
            return Ok(None);
        };
        let id: i64 = row.try_get("id")?;
        if let Some(amounts) = &changes.unit_amount_in_cents {
            write_add_on_amounts(&mut tx, id, amounts).await?;
        }
        let add_on = fetch_add_ons(&mut *tx, &by_id(id), "", "").await?.pop();
        tx.commit().await?;
        Ok(add_on)
    }

    /// Deletes a live add-on: sets `deleted_at` and keeps the record. `None` when the plan has
    /// no such live add-on.
    pub async fn delete_add_on(&self, plan_id: i64, add_on_code: &str, now: i64) -> Result<Option<AddOn>, StoreError> {
        let row = sqlx::query(
            "UPDATE add_ons SET deleted_at = $1 WHERE plan_id = $2 AND add_on_code = $3 AND deleted_at IS NULL \
             RETURNING id",
        )
        .bind(now)
        .bind(plan_id)
        .bind(add_on_code)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(fetch_add_ons(&self.pool, &by_id(row.try_get("id")?), "", "").await?.pop()),
            None => Ok(None),
        }
    }

    /// A page of the plan's live add-ons, with the number of live add-ons in the page's time
    /// range.
    pub async fn list_add_ons(&self, plan_id: i64, page: &PageRequest) -> Result<Page<AddOn>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("plan_id", Arg::Int(plan_id));
        conditions.push("deleted_at IS NULL".to_owned());
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM add_ons{}", conditions.sql());
        let total: i64 = conditions.bind(sqlx::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let items = fetch_add_ons(&self.reads, &conditions, &order_and_limit(page), &outer_order(page)).await?;
        Ok(into_page(items, page, total, |a| a.position(page.sort)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::both_backends;
    use crate::{Mode, NewSite, Plan as SitePlan};

    const NOW: i64 = 1_800_000_000;

    async fn site(store: &Store, name: &str) -> i64 {
        let new = NewSite {
            name: name.into(),
            mode: Mode::Sandbox,
            plan: SitePlan::Core,
            credit_memos: false,
            contact: None,
        };
        store.create_site(&new, NOW).await.expect("site").0.id
    }

    fn amounts(pairs: &[(&str, i64)]) -> Amounts {
        pairs.iter().map(|(c, v)| ((*c).to_owned(), *v)).collect()
    }

    fn named(name: &str) -> PlanFields {
        PlanFields {
            name: Some(name.into()),
            unit_amount_in_cents: Some(amounts(&[("USD", 1000)])),
            ..PlanFields::default()
        }
    }

    #[tokio::test]
    async fn the_site_currencies_are_those_its_live_plans_are_priced_in() {
        for store in both_backends("site_currencies").await {
            let s = site(&store, "a").await;
            let other = site(&store, "b").await;
            assert!(store.site_currencies(s).await.expect("none").is_empty());
            store.create_plan(s, "basic", &named("Basic"), NOW).await.expect("create");
            let euro = PlanFields {
                unit_amount_in_cents: Some(amounts(&[("EUR", 800), ("USD", 1000)])),
                setup_fee_in_cents: Some(amounts(&[("GBP", 500)])),
                ..named("Euro")
            };
            store.create_plan(s, "euro", &euro, NOW).await.expect("create");
            let yen = PlanFields { unit_amount_in_cents: Some(amounts(&[("JPY", 100)])), ..named("Yen") };
            store.create_plan(s, "yen", &yen, NOW).await.expect("create");
            store.delete_plan(s, "yen", NOW).await.expect("delete");
            store
                .create_plan(
                    other,
                    "chf",
                    &PlanFields { unit_amount_in_cents: Some(amounts(&[("CHF", 1)])), ..named("C") },
                    NOW,
                )
                .await
                .expect("create");
            assert_eq!(store.site_currencies(s).await.expect("currencies"), ["EUR", "USD"]);
            assert_eq!(store.site_currencies(other).await.expect("currencies"), ["CHF"]);
        }
    }

    #[tokio::test]
    async fn plans_are_created_read_updated_and_deleted() {
        for store in both_backends("plans").await {
            let s = site(&store, "a").await;
            let other = site(&store, "b").await;

            // Defaults of a minimal plan.
            let p = store.create_plan(s, "basic", &named("Basic"), NOW).await.expect("create");
            assert_eq!((p.plan_code.as_str(), p.name.as_str(), p.site_id), ("basic", "Basic", s));
            assert_eq!(p.interval, Interval { length: 1, unit: IntervalUnit::Months });
            assert_eq!(p.trial, Interval { length: 0, unit: IntervalUnit::Days });
            assert!(!p.has_trial());
            assert_eq!(p.total_billing_cycles, None);
            assert_eq!(
                (p.revenue_schedule_type, p.setup_fee_revenue_schedule_type),
                (RevenueScheduleType::Evenly, RevenueScheduleType::Evenly)
            );
            assert!(p.trial_requires_billing_info && !p.tax_exempt && !p.display_quantity);
            assert_eq!((p.unit_amount("USD"), p.unit_amount("EUR"), p.setup_fee("USD")), (Some(1000), None, 0));
            assert_eq!((p.created_at, p.updated_at, p.deleted_at), (NOW, NOW, None));

            // Every property.
            let full = PlanFields {
                name: Some("Gold".into()),
                description: Some("The gold plan".into()),
                success_url: Some("https://example.com/ok".into()),
                cancel_url: Some("https://example.com/cancel".into()),
                display_donation_amounts: Some(true),
                display_quantity: Some(true),
                display_phone_number: Some(true),
                bypass_hosted_confirmation: Some(true),
                unit_name: Some("seat".into()),
                payment_page_tos_link: Some("https://example.com/tos".into()),
                payment_page_css: Some("body{}".into()),
                plan_interval_length: Some(3),
                plan_interval_unit: Some(IntervalUnit::Days),
                trial_interval_length: Some(2),
                trial_interval_unit: Some(IntervalUnit::Months),
                total_billing_cycles: Some(12),
                accounting_code: Some("acc".into()),
                setup_fee_accounting_code: Some("setup".into()),
                revenue_schedule_type: Some(RevenueScheduleType::AtRangeEnd),
                setup_fee_revenue_schedule_type: Some(RevenueScheduleType::Never),
                trial_requires_billing_info: Some(false),
                tax_exempt: Some(true),
                tax_code: Some("SW052000".into()),
                unit_amount_in_cents: Some(amounts(&[("USD", 1000), ("EUR", 800), ("JPY", 0)])),
                setup_fee_in_cents: Some(amounts(&[("USD", 500)])),
            };
            let g = store.create_plan(s, "gold", &full, NOW + 1).await.expect("create");
            assert_eq!(g.interval, Interval { length: 3, unit: IntervalUnit::Days });
            assert_eq!(g.trial, Interval { length: 2, unit: IntervalUnit::Months });
            assert!(g.has_trial());
            assert_eq!(g.unit_amounts, amounts(&[("EUR", 800), ("JPY", 0), ("USD", 1000)]));
            assert_eq!(g.setup_fees, amounts(&[("USD", 500)]));
            assert_eq!((g.setup_fee("USD"), g.setup_fee("EUR")), (500, 0));
            assert_eq!(
                (g.description.as_deref(), g.tax_code.as_deref(), g.total_billing_cycles),
                (Some("The gold plan"), Some("SW052000"), Some(12))
            );
            assert!(g.display_donation_amounts && g.bypass_hosted_confirmation && g.tax_exempt);
            assert!(!g.trial_requires_billing_info);
            assert_eq!(store.plan(s, "gold").await.expect("get"), Some(g.clone()));
            assert_eq!(store.plan_by_id(g.id).await.expect("get"), Some(g.clone()));
            assert_eq!(store.plan(other, "gold").await.expect("get"), None);
            assert_eq!(store.plan(s, "nope").await.expect("get"), None);

            // Codes are unique per site.
            assert!(matches!(
                store.create_plan(s, "gold", &named("x"), NOW).await,
                Err(StoreError::DuplicatePlan(code)) if code == "gold"
            ));
            store.create_plan(other, "gold", &named("y"), NOW).await.expect("same code, other site");
            assert!(matches!(
                store.create_plan(s, "x", &PlanFields::default(), NOW).await,
                Err(StoreError::Invalid(_))
            ));
            let negative = PlanFields { setup_fee_in_cents: Some(amounts(&[("USD", -1)])), ..named("n") };
            assert!(matches!(store.create_plan(s, "n", &negative, NOW).await, Err(StoreError::Invalid(_))));
            assert_eq!(store.plan(s, "n").await.expect("get"), None);

            // Updates change what is given; a given amount set replaces the stored one.
            let changes = PlanFields {
                name: Some("Gold 2".into()),
                plan_interval_unit: Some(IntervalUnit::Months),
                tax_exempt: Some(false),
                unit_amount_in_cents: Some(amounts(&[("GBP", 700)])),
                ..PlanFields::default()
            };
            let u = store.update_plan(s, "gold", &changes, NOW + 5).await.expect("update").expect("found");
            assert_eq!(u.name, "Gold 2");
            assert_eq!(u.interval, Interval { length: 3, unit: IntervalUnit::Months });
            assert!(!u.tax_exempt && u.display_quantity);
            assert_eq!(u.unit_amounts, amounts(&[("GBP", 700)]));
            assert_eq!(u.setup_fees, amounts(&[("USD", 500)]), "not given, not changed");
            assert_eq!((u.created_at, u.updated_at), (NOW + 1, NOW + 5));
            let cleared = PlanFields { setup_fee_in_cents: Some(Amounts::new()), ..PlanFields::default() };
            let u = store.update_plan(s, "gold", &cleared, NOW + 6).await.expect("update").expect("found");
            assert_eq!((u.setup_fees.len(), u.unit_amounts.len()), (0, 1));
            assert_eq!(store.update_plan(s, "nope", &changes, NOW).await.expect("update"), None);

            // Delete keeps the record; it can no longer be changed, and its code stays taken.
            let d = store.delete_plan(s, "gold", NOW + 10).await.expect("delete").expect("found");
            assert!(d.is_deleted());
            assert_eq!(d.deleted_at, Some(NOW + 10));
            let again = store.plan(s, "gold").await.expect("get").expect("still there");
            assert_eq!((again.deleted_at, again.name.as_str()), (Some(NOW + 10), "Gold 2"));
            assert_eq!(store.delete_plan(s, "gold", NOW + 20).await.expect("delete"), None);
            assert_eq!(store.update_plan(s, "gold", &changes, NOW + 20).await.expect("update"), None);
            assert!(matches!(
                store.create_plan(s, "gold", &named("again"), NOW + 30).await,
                Err(StoreError::DuplicatePlan(_))
            ));
            assert_eq!(store.plan_by_id(g.id).await.expect("by id").map(|p| p.is_deleted()), Some(true));
        }
    }

    #[tokio::test]
    async fn concurrent_creates_of_one_code_make_one_plan() {
        for store in both_backends("plan_race").await {
            let s = site(&store, "a").await;
            let tasks: Vec<_> = (0..6)
                .map(|_| {
                    let store = store.clone();
                    tokio::spawn(async move { store.create_plan(s, "same", &named("x"), NOW).await })
                })
                .collect();
            let mut results = Vec::new();
            for t in tasks {
                results.push(t.await.expect("task"));
            }
            let created = results.iter().filter(|r| r.is_ok()).count();
            let taken = results.iter().filter(|r| matches!(r, Err(StoreError::DuplicatePlan(_)))).count();
            assert_eq!((created, taken), (1, 5), "{results:?}");
            let plan = store.plan(s, "same").await.expect("get").expect("created");
            assert_eq!(plan.unit_amounts, amounts(&[("USD", 1000)]), "one set of amounts");
        }
    }

    #[tokio::test]
    async fn plan_pages_leave_deleted_plans_out() {
        for store in both_backends("plan_pages").await {
            let s = site(&store, "a").await;
            let other = site(&store, "b").await;
            for (i, t) in [0, 10, 10, 20, 30].iter().enumerate() {
                let fields = PlanFields {
                    unit_amount_in_cents: Some(amounts(&[("EUR", 100 + i as i64), ("USD", i as i64)])),
                    setup_fee_in_cents: Some(amounts(&[("USD", 1)])),
                    ..named("x")
                };
                store.create_plan(s, &format!("p{i}"), &fields, NOW + t).await.expect("create");
            }
            store.create_plan(other, "p9", &named("x"), NOW).await.expect("create");
            store.delete_plan(s, "p2", NOW + 40).await.expect("delete");
            let codes = |p: &Page<Plan>| p.items.iter().map(|p| p.plan_code.clone()).collect::<Vec<_>>();

            let first = PageRequest { limit: 2, ..PageRequest::default() };
            let p1 = store.list_plans(s, &first).await.expect("page");
            assert_eq!((codes(&p1), p1.total), (vec!["p4".to_owned(), "p3".to_owned()], 4));
            // Each plan of a page has its own amounts.
            assert_eq!(p1.items[0].unit_amounts, amounts(&[("EUR", 104), ("USD", 4)]));
            assert_eq!(p1.items[1].unit_amounts, amounts(&[("EUR", 103), ("USD", 3)]));
            assert_eq!(p1.items[1].setup_fees, amounts(&[("USD", 1)]));
            let p2 = store.list_plans(s, &PageRequest { after: p1.next, ..first }).await.expect("page");
            assert_eq!((codes(&p2), p2.next.is_some()), (vec!["p1".to_owned(), "p0".to_owned()], false));

            let asc = PageRequest { order: Order::Asc, limit: 3, ..PageRequest::default() };
            let p = store.list_plans(s, &asc).await.expect("page");
            assert_eq!(codes(&p), vec!["p0", "p1", "p3"]);
            assert_eq!(p.next, Some(Position { value: NOW + 20, id: p.items[2].id }));

            let range = PageRequest { begin: Some(NOW + 10), end: Some(NOW + 20), ..PageRequest::default() };
            let p = store.list_plans(s, &range).await.expect("page");
            assert_eq!((codes(&p), p.total), (vec!["p3".to_owned(), "p1".to_owned()], 2));

            store.update_plan(s, "p0", &named("touched"), NOW + 50).await.expect("update");
            let by_update = PageRequest { sort: Sort::UpdatedAt, limit: 1, ..PageRequest::default() };
            let p = store.list_plans(s, &by_update).await.expect("page");
            assert_eq!((codes(&p), p.total), (vec!["p0".to_owned()], 4));
        }
    }

    #[test]
    fn percentages_have_at_most_four_decimal_places() {
        assert_eq!(Percentage::from_f64(2.5), Some(Percentage(25_000)));
        assert_eq!(Percentage::from_f64(0.0001), Some(Percentage(1)));
        assert_eq!(Percentage::from_f64(100.0), Some(Percentage(1_000_000)));
        assert_eq!(Percentage::from_f64(33.3333), Some(Percentage(333_333)));
        assert_eq!(Percentage::from_f64(-1.5), Some(Percentage(-15_000)));
        assert_eq!(Percentage::from_f64(0.00001), None);
        assert_eq!(Percentage::from_f64(1.23456), None);
        assert_eq!(Percentage::from_f64(f64::NAN), None);
        assert_eq!(Percentage::from_f64(f64::INFINITY), None);
        assert_eq!(Percentage::from_f64(1e300), None);
        assert_eq!(Percentage(25_000).as_f64(), 2.5);
        assert_eq!(Percentage(333_333).as_f64(), 33.3333);
    }

    #[tokio::test]
    async fn add_ons_belong_to_one_plan() {
        for store in both_backends("add_ons").await {
            let s = site(&store, "a").await;
            let gold = store.create_plan(s, "gold", &named("Gold"), NOW).await.expect("plan");
            let silver = store.create_plan(s, "silver", &named("Silver"), NOW).await.expect("plan");

            let a = store.create_add_on(gold.id, "ip", &AddOnFields::default(), NOW).await.expect("create");
            assert_eq!((a.add_on_code.as_str(), a.name.as_str(), a.plan_id), ("ip", "ip", gold.id));
            assert_eq!((a.default_quantity, a.add_on_type, a.optional), (1, AddOnType::Fixed, true));
            assert_eq!((a.usage_type, a.usage_percentage, a.unit_amounts.len()), (None, None, 0));

            let usage = AddOnFields {
                name: Some("Calls".into()),
                default_quantity: Some(0),
                display_quantity_on_hosted_page: Some(true),
                display_quantity: Some(true),
                add_on_type: Some(AddOnType::Usage),
                measured_unit_id: Some(7),
                usage_type: Some(UsageType::Percentage),
                usage_percentage: Percentage::from_f64(2.5),
                optional: Some(false),
                accounting_code: Some("calls".into()),
                revenue_schedule_type: Some(RevenueScheduleType::AtRangeStart),
                tax_code: Some("T1".into()),
                unit_amount_in_cents: Some(amounts(&[("USD", 3), ("EUR", 2)])),
            };
            let u = store.create_add_on(gold.id, "calls", &usage, NOW + 1).await.expect("create");
            assert_eq!(
                (u.add_on_type, u.usage_type, u.usage_percentage),
                (AddOnType::Usage, Some(UsageType::Percentage), Some(Percentage(25_000)))
            );
            assert_eq!((u.measured_unit_id, u.optional, u.default_quantity), (Some(7), false, 0));
            assert_eq!(u.unit_amounts, amounts(&[("EUR", 2), ("USD", 3)]));
            assert_eq!((u.unit_amount("USD"), u.unit_amount("GBP")), (Some(3), None));
            assert_eq!(store.add_on(gold.id, "calls").await.expect("get"), Some(u.clone()));
            assert_eq!(store.add_on(silver.id, "calls").await.expect("get"), None);

            assert!(matches!(
                store.create_add_on(gold.id, "ip", &AddOnFields::default(), NOW).await,
                Err(StoreError::DuplicateAddOn(code)) if code == "ip"
            ));
            store.create_add_on(silver.id, "ip", &AddOnFields::default(), NOW).await.expect("other plan");

            let changes = AddOnFields {
                usage_percentage: Some(Percentage(32_500)),
                unit_amount_in_cents: Some(amounts(&[("USD", 4)])),
                ..AddOnFields::default()
            };
            let c = store.update_add_on(gold.id, "calls", &changes, NOW + 5).await.expect("update").expect("found");
            assert_eq!((c.usage_percentage, c.name.as_str()), (Some(Percentage(32_500)), "Calls"));
            assert_eq!(c.unit_amounts, amounts(&[("USD", 4)]));
            assert_eq!((c.created_at, c.updated_at), (NOW + 1, NOW + 5));
            assert_eq!(store.update_add_on(silver.id, "calls", &changes, NOW).await.expect("update"), None);

            let codes = |v: &[AddOn]| v.iter().map(|a| a.add_on_code.clone()).collect::<Vec<_>>();
            assert_eq!(codes(&store.add_ons(gold.id).await.expect("add-ons")), vec!["ip", "calls"]);
            let page = store.list_add_ons(gold.id, &PageRequest::default()).await.expect("page");
            assert_eq!((codes(&page.items), page.total), (vec!["calls".to_owned(), "ip".to_owned()], 2));
            assert_eq!(page.items[0].unit_amounts, amounts(&[("USD", 4)]));

            let d = store.delete_add_on(gold.id, "ip", NOW + 9).await.expect("delete").expect("found");
            assert_eq!(d.deleted_at, Some(NOW + 9));
            assert_eq!(store.delete_add_on(gold.id, "ip", NOW + 9).await.expect("delete"), None);
            assert!(store.add_on(gold.id, "ip").await.expect("get").is_some_and(|a| a.is_deleted()));
            assert_eq!(codes(&store.add_ons(gold.id).await.expect("add-ons")), vec!["calls"]);
            let page = store.list_add_ons(gold.id, &PageRequest::default()).await.expect("page");
            assert_eq!((codes(&page.items), page.total), (vec!["calls".to_owned()], 1));
            assert_eq!(store.update_add_on(gold.id, "ip", &changes, NOW + 10).await.expect("update"), None);
            assert!(matches!(
                store.create_add_on(gold.id, "ip", &AddOnFields::default(), NOW).await,
                Err(StoreError::DuplicateAddOn(_))
            ));
        }
    }
}
