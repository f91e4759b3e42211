//! The add-ons of plans: created with their defaults, read with their amounts in one statement,
//! updated, deleted (kept for their codes) and listed. The add-on type itself and the plans are
//! [`crate::plans`].

use crate::db::{DbRow, Tx, is_unique_violation};
use crate::list::{Arg, Conditions, Page, PageRequest, into_page, order_and_limit};
use crate::plans::{
    AddOn, AddOnFields, AddOnType, Amounts, Percentage, RevenueScheduleType, Settable, UNIT, UsageType, bind_settable,
    by_id, check_amounts, fold, get_bool, outer_order, stored, text,
};
use crate::{Store, StoreError};

const ADD_ON_COLUMNS: &str = "id, plan_id, add_on_code, name, default_quantity, display_quantity_on_hosted_page, \
     display_quantity, add_on_type, measured_unit_id, usage_type, usage_percentage, optional, accounting_code, \
     revenue_schedule_type, tax_code, created_at, updated_at, deleted_at";

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

/// The add-ons chosen by `conditions` (and `tail`), each with its amounts, in one statement.
async fn fetch_add_ons<'e, E>(
    exec: E,
    conditions: &Conditions,
    tail: &str,
    order: &str,
) -> Result<Vec<AddOn>, StoreError>
where
    E: Into<crate::db::Exec<'e>>,
{
    let sql = format!(
        "SELECT r.*, '{UNIT}' AS amount_kind, a.currency AS amount_currency, a.amount_in_cents AS amount_cents \
         FROM (SELECT {ADD_ON_COLUMNS} FROM add_ons{}{tail}) r LEFT JOIN add_on_amounts a ON a.add_on_id = r.id{order}",
        conditions.sql()
    );
    let rows = conditions.bind(crate::db::query(&sql)).fetch_all(exec).await?;
    fold(
        &rows,
        add_on_from_row,
        |a| a.id,
        |a, _, currency, cents| {
            a.unit_amounts.insert(currency, cents);
        },
    )
}

/// Replaces the amounts of an add-on.
async fn write_add_on_amounts(tx: &mut Tx, add_on_id: i64, amounts: &Amounts) -> Result<(), StoreError> {
    crate::db::query("DELETE FROM add_on_amounts WHERE add_on_id = $1").bind(add_on_id).execute(tx.exec()).await?;
    for (currency, cents) in amounts {
        crate::db::query("INSERT INTO add_on_amounts (add_on_id, currency, amount_in_cents) VALUES ($1, $2, $3)")
            .bind(add_on_id)
            .bind(currency)
            .bind(*cents)
            .execute(tx.exec())
            .await?;
    }
    Ok(())
}

impl Store {
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
        let mut tx = crate::db::begin(&self.pool).await?;
        let query = crate::db::query(&sql).bind(plan_id).bind(add_on_code).bind(now);
        let id: i64 = match bind_settable(query, values).fetch_one(tx.exec()).await {
            Ok(row) => row.try_get("id")?,
            Err(e) if is_unique_violation(&e) => return Err(StoreError::DuplicateAddOn(add_on_code.to_owned())),
            Err(e) => return Err(e.into()),
        };
        write_add_on_amounts(&mut tx, id, fields.unit_amount_in_cents.as_ref().unwrap_or(&Amounts::new())).await?;
        let add_on = fetch_add_ons(tx.exec(), &by_id(id), "", "").await?.pop();
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
        let mut tx = crate::db::begin(&self.pool).await?;
        let query = crate::db::query(&sql).bind(now).bind(plan_id).bind(add_on_code);
        let Some(row) = bind_settable(query, values).fetch_optional(tx.exec()).await? else {
            return Ok(None);
        };
        let id: i64 = row.try_get("id")?;
        if let Some(amounts) = &changes.unit_amount_in_cents {
            write_add_on_amounts(&mut tx, id, amounts).await?;
        }
        let add_on = fetch_add_ons(tx.exec(), &by_id(id), "", "").await?.pop();
        tx.commit().await?;
        Ok(add_on)
    }

    /// Deletes a live add-on: sets `deleted_at` and keeps the record. `None` when the plan has
    /// no such live add-on.
    pub async fn delete_add_on(&self, plan_id: i64, add_on_code: &str, now: i64) -> Result<Option<AddOn>, StoreError> {
        let row = crate::db::query(
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
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let items = fetch_add_ons(&self.reads, &conditions, &order_and_limit(page), &outer_order(page)).await?;
        Ok(into_page(items, page, total, |a| a.position(page.sort)))
    }
}
