//! Shipping addresses of accounts, and the CVV checks of stored cards.
//!
//! An address belongs to one account. Deleting keeps the row (`deleted_at` set): the line items
//! shipped to it still show it, while lists, reads by id and the count of an account's addresses
//! leave it out. Ids are the table's integer keys.
//!
//! A CVV check is counted per card (`card_key`) with its time on the site clock and whether it
//! matched; the value checked is never stored.

use crate::db::DbRow;

use crate::events::NewEvent;
use crate::list::{Arg, Conditions, Page, PageRequest, Position, Sort, into_page, order_and_limit};
use crate::{Backend, Store, StoreError};

/// The properties of a shipping address a merchant sets. On create `None` is unset; on update
/// `None` leaves the stored value as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShippingFields {
    pub nickname: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub company: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub vat_number: Option<String>,
    pub address1: Option<String>,
    pub address2: Option<String>,
    pub city: Option<String>,
    pub state: Option<String>,
    pub zip: Option<String>,
    pub country: Option<String>,
    pub geo_code: Option<String>,
}

/// A stored shipping address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShippingAddress {
    pub id: i64,
    pub site_id: i64,
    pub account_id: i64,
    pub fields: ShippingFields,
    pub created_at: i64,
    pub updated_at: i64,
    pub deleted_at: Option<i64>,
}

impl ShippingAddress {
    pub fn position(&self, sort: Sort) -> Position {
        Position { value: if sort == Sort::CreatedAt { self.created_at } else { self.updated_at }, id: self.id }
    }
}

/// The settable columns, in the order of [`values`].
const SETTABLE: [&str; 14] = [
    "nickname",
    "first_name",
    "last_name",
    "company",
    "email",
    "phone",
    "vat_number",
    "address1",
    "address2",
    "city",
    "state",
    "zip",
    "country",
    "geo_code",
];

fn values(f: &ShippingFields) -> [&Option<String>; 14] {
    [
        &f.nickname,
        &f.first_name,
        &f.last_name,
        &f.company,
        &f.email,
        &f.phone,
        &f.vat_number,
        &f.address1,
        &f.address2,
        &f.city,
        &f.state,
        &f.zip,
        &f.country,
        &f.geo_code,
    ]
}

const COLUMNS: &str = "id, site_id, account_id, nickname, first_name, last_name, company, email, phone, vat_number, \
     address1, address2, city, state, zip, country, geo_code, created_at, updated_at, deleted_at";

fn fields_from_row(row: &DbRow, prefix: &str) -> Result<ShippingFields, StoreError> {
    let get = |c: &str| -> Result<Option<String>, StoreError> { Ok(row.try_get(format!("{prefix}{c}").as_str())?) };
    Ok(ShippingFields {
        nickname: get("nickname")?,
        first_name: get("first_name")?,
        last_name: get("last_name")?,
        company: get("company")?,
        email: get("email")?,
        phone: get("phone")?,
        vat_number: get("vat_number")?,
        address1: get("address1")?,
        address2: get("address2")?,
        city: get("city")?,
        state: get("state")?,
        zip: get("zip")?,
        country: get("country")?,
        geo_code: get("geo_code")?,
    })
}

fn from_row(row: &DbRow) -> Result<ShippingAddress, StoreError> {
    Ok(ShippingAddress {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        account_id: row.try_get("account_id")?,
        fields: fields_from_row(row, "")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        deleted_at: row.try_get("deleted_at")?,
    })
}

/// The addresses `ids` (live or deleted), in one query.
pub(crate) async fn addresses_by_id<'c, E>(
    executor: E,
    backend: Backend,
    ids: &[i64],
) -> Result<Vec<ShippingAddress>, StoreError>
where
    E: Into<crate::db::Exec<'c>>,
{
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!("SELECT {COLUMNS} FROM shipping_addresses WHERE id IN ({})", backend.params(ids.len(), 1));
    let mut query = crate::db::counted(&sql, ids.len());
    for id in ids {
        query = query.bind(*id);
    }
    query.fetch_all(executor).await?.iter().map(from_row).collect()
}

/// Whether a stored address holds exactly the values of `new` (unset and empty alike).
pub fn same_address(stored: &ShippingFields, new: &ShippingFields) -> bool {
    let norm = |v: &Option<String>| v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
    values(stored).iter().zip(values(new)).all(|(a, b)| norm(a) == norm(b))
}

impl Store {
    /// Adds addresses to the account and records the `event` of each (subject: the account
    /// code), in one transaction; answers them in the order given. `None` (nothing added) when the account
    /// would then hold more than `max_live` live addresses: the count is taken under the
    /// account's row lock, so concurrent additions cannot pass the limit together.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_shipping_addresses(
        &self,
        site_id: i64,
        account_id: i64,
        account_code: &str,
        addresses: &[ShippingFields],
        max_live: usize,
        now: i64,
        event: &(dyn Fn(&ShippingAddress) -> NewEvent + Sync),
    ) -> Result<Option<Vec<ShippingAddress>>, StoreError> {
        let placeholders: Vec<String> = (0..SETTABLE.len()).map(|i| format!("${}", i + 4)).collect();
        let sql = format!(
            "INSERT INTO shipping_addresses (site_id, account_id, created_at, updated_at, {}) \
             VALUES ($1, $2, $3, $3, {}) RETURNING {COLUMNS}",
            SETTABLE.join(", "),
            placeholders.join(", ")
        );
        let mut work = self.begin_work().await?;
        crate::db::query("UPDATE accounts SET id = id WHERE id = $1").bind(account_id).execute(work.tx.exec()).await?;
        let live: i64 = crate::db::query(
            "SELECT COUNT(*) AS n FROM shipping_addresses WHERE account_id = $1 AND deleted_at IS NULL",
        )
        .bind(account_id)
        .fetch_one(work.tx.exec())
        .await?
        .try_get("n")?;
        if usize::try_from(live).unwrap_or(usize::MAX).saturating_add(addresses.len()) > max_live {
            return Ok(None);
        }
        let mut made = Vec::with_capacity(addresses.len());
        for fields in addresses {
            let mut query = crate::db::query(&sql).bind(site_id).bind(account_id).bind(now);
            for v in values(fields) {
                query = query.bind(v.clone());
            }
            made.push(from_row(&query.fetch_one(work.tx.exec()).await?)?);
        }
        let events: Vec<NewEvent> = made.iter().map(event).collect();
        work.append_item_events(site_id, account_code, &events).await?;
        work.commit().await?;
        Ok(Some(made))
    }

    /// The account's live address `id`.
    pub async fn shipping_address(&self, account_id: i64, id: i64) -> Result<Option<ShippingAddress>, StoreError> {
        let row = crate::db::query(&format!(
            "SELECT {COLUMNS} FROM shipping_addresses WHERE account_id = $1 AND id = $2 AND deleted_at IS NULL"
        ))
        .bind(account_id)
        .bind(id)
        .fetch_optional(&self.reads)
        .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The account's address `id`, also once deleted (what a notification of its deletion shows).
    pub async fn shipping_address_ever(&self, account_id: i64, id: i64) -> Result<Option<ShippingAddress>, StoreError> {
        let row =
            crate::db::query(&format!("SELECT {COLUMNS} FROM shipping_addresses WHERE account_id = $1 AND id = $2"))
                .bind(account_id)
                .bind(id)
                .fetch_optional(&self.reads)
                .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Every live address of the account, oldest first.
    pub async fn shipping_addresses(&self, account_id: i64) -> Result<Vec<ShippingAddress>, StoreError> {
        let rows = crate::db::query(&format!(
            "SELECT {COLUMNS} FROM shipping_addresses WHERE account_id = $1 AND deleted_at IS NULL ORDER BY id"
        ))
        .bind(account_id)
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// A page of the account's live addresses.
    pub async fn list_shipping_addresses(
        &self,
        account_id: i64,
        page: &PageRequest,
    ) -> Result<Page<ShippingAddress>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("account_id", Arg::Int(account_id));
        conditions.push("deleted_at IS NULL".to_owned());
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM shipping_addresses{}", conditions.sql());
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!("SELECT {COLUMNS} FROM shipping_addresses{}{}", conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(crate::db::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page, total, |a| a.position(page.sort)))
    }

    /// Changes the values `changes` holds of the account's live address `id` and records
    /// `events`; `None` when there is no such address.
    pub async fn update_shipping_address(
        &self,
        account_id: i64,
        account_code: &str,
        id: i64,
        changes: &ShippingFields,
        now: i64,
        events: &[NewEvent],
    ) -> Result<Option<ShippingAddress>, StoreError> {
        let sets: Vec<String> =
            SETTABLE.iter().enumerate().map(|(i, c)| format!("{c} = COALESCE(${}, {c})", i + 4)).collect();
        let sql = format!(
            "UPDATE shipping_addresses SET updated_at = $1, {} WHERE account_id = $2 AND id = $3 \
             AND deleted_at IS NULL RETURNING {COLUMNS}",
            sets.join(", ")
        );
        let mut query = crate::db::query(&sql).bind(now).bind(account_id).bind(id);
        for v in values(changes) {
            query = query.bind(v.clone());
        }
        let mut work = self.begin_work().await?;
        let Some(row) = query.fetch_optional(work.tx.exec()).await? else { return Ok(None) };
        let address = from_row(&row)?;
        work.append_item_events(address.site_id, account_code, events).await?;
        work.commit().await?;
        Ok(Some(address))
    }

    /// Deletes the account's live address `id` (the row stays for the lines shipped to it) and
    /// records `events`; `false` when there is no such address.
    pub async fn delete_shipping_address(
        &self,
        site_id: i64,
        account_id: i64,
        account_code: &str,
        id: i64,
        now: i64,
        events: &[NewEvent],
    ) -> Result<bool, StoreError> {
        let mut work = self.begin_work().await?;
        let changed = crate::db::query(
            "UPDATE shipping_addresses SET deleted_at = $1, updated_at = $1 \
             WHERE account_id = $2 AND id = $3 AND deleted_at IS NULL",
        )
        .bind(now)
        .bind(account_id)
        .bind(id)
        .execute(work.tx.exec())
        .await?
        .rows_affected();
        if changed == 0 {
            return Ok(false);
        }
        work.append_item_events(site_id, account_code, events).await?;
        work.commit().await?;
        Ok(true)
    }

    /// The `details` documents of the account's subscriptions that are not expired (the
    /// shipping address a subscription uses is named in its details).
    pub async fn live_subscription_details(&self, account_id: i64) -> Result<Vec<(String, String)>, StoreError> {
        let rows =
            crate::db::query("SELECT uuid, details FROM subscriptions WHERE account_id = $1 AND state <> 'expired'")
                .bind(account_id)
                .fetch_all(&self.reads)
                .await?;
        rows.iter().map(|r| Ok((r.try_get("uuid")?, crate::document::read(r.try_get("details")?)?))).collect()
    }

    /// Counts a CVV check of the card `card_key` of the account at `at` (site clock), unless the
    /// card already had `limit` checks in the `window` seconds before `at`: answers whether it
    /// was counted. Checks of one card are serialised by the transaction.
    pub async fn count_cvv_check(
        &self,
        site_id: i64,
        account_id: i64,
        card_key: &str,
        at: i64,
        window: i64,
        limit: i64,
    ) -> Result<bool, StoreError> {
        let mut work = self.begin_work().await?;
        // Serialise concurrent checks of the account (a no-op write takes its row lock).
        crate::db::query("UPDATE accounts SET id = id WHERE id = $1").bind(account_id).execute(work.tx.exec()).await?;
        let n: i64 = crate::db::query(
            "SELECT COUNT(*) AS n FROM cvv_checks WHERE account_id = $1 AND card_key = $2 AND checked_at > $3",
        )
        .bind(account_id)
        .bind(card_key)
        .bind(at - window)
        .fetch_one(work.tx.exec())
        .await?
        .try_get("n")?;
        if n >= limit {
            return Ok(false);
        }
        crate::db::query("INSERT INTO cvv_checks (site_id, account_id, card_key, checked_at) VALUES ($1, $2, $3, $4)")
            .bind(site_id)
            .bind(account_id)
            .bind(card_key)
            .bind(at)
            .execute(work.tx.exec())
            .await?;
        work.commit().await?;
        Ok(true)
    }
}

/// The key of a subscription's details that names its shipping address (written by
/// `rebill_app::subscriptions::lifecycle::Details`).
const DETAILS_SHIPPING_KEY: &str = "shipping_address_id";

/// The shipping address id named by a subscription's `details` document (a JSON object written
/// by serde: the key with an unescaped closing quote followed by `:` can only be a member name).
pub fn details_shipping_address(details: &str) -> Option<i64> {
    let key = format!("\"{DETAILS_SHIPPING_KEY}\"");
    let rest = details[details.find(&key)? + key.len()..].trim_start().strip_prefix(':')?.trim_start();
    let end = rest
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || (*i == 0 && *c == '-')))
        .map_or(rest.len(), |(i, _)| i);
    rest[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_details_name_the_address() {
        assert_eq!(details_shipping_address(r#"{"account_code":"a","shipping_address_id":42}"#), Some(42));
        assert_eq!(details_shipping_address(r#"{"shipping_address_id" : 7 ,"po_number":null}"#), Some(7));
        assert_eq!(details_shipping_address(r#"{"shipping_address_id":null}"#), None);
        assert_eq!(details_shipping_address(r#"{"account_code":"a"}"#), None);
        // A value holding the key is not the key.
        assert_eq!(details_shipping_address(r#"{"customer_notes":"\"shipping_address_id\":5"}"#), None);
    }

    #[test]
    fn duplicates_compare_every_value_trimmed() {
        let a = ShippingFields { address1: Some("1 Main St".into()), city: Some("Lyon".into()), ..Default::default() };
        let b = ShippingFields {
            address1: Some(" 1 Main St ".into()),
            city: Some("Lyon".into()),
            zip: Some(String::new()),
            ..Default::default()
        };
        assert!(same_address(&a, &b));
        let c = ShippingFields { nickname: Some("Work".into()), ..a.clone() };
        assert!(!same_address(&a, &c));
    }
}
