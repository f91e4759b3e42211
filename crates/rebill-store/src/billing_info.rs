//! Billing info of accounts: one per account, replaced whole on update.
//!
//! Never a card number, CVV or bank account number: cards keep their brand, first six and last
//! four digits and expiry; bank accounts their name, type, routing number and last four digits.
//! The same non-secret fields ([`BillingFields`]) describe what a token holds beside its
//! encrypted secret (see [`crate::tokens`]). Later charges use the gateway's opaque reference of
//! the stored payment method ([`BillingInfo::gateway_reference`]), which holds no number either.

use crate::db::{DbQuery, DbRow};
use crate::events::NewEvent;
use crate::work::Work;
use crate::{Store, StoreError};

/// What kind of payment method a billing info or token holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaymentKind {
    CreditCard,
    BankAccount,
}

impl PaymentKind {
    /// The name written as billing info's `type` and the token's `type` (`credit_card`,
    /// `bank_account`).
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentKind::CreditCard => "credit_card",
            PaymentKind::BankAccount => "bank_account",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "credit_card" => Some(PaymentKind::CreditCard),
            "bank_account" => Some(PaymentKind::BankAccount),
            _ => None,
        }
    }
}

/// The non-secret fields of a billing info or token; `None` is unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BillingFields {
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub company: Option<String>,
    pub address1: Option<String>,
    pub address2: Option<String>,
    pub city: Option<String>,
    pub state: Option<String>,
    pub zip: Option<String>,
    pub country: Option<String>,
    pub phone: Option<String>,
    pub vat_number: Option<String>,
    pub ip_address: Option<String>,
    pub ip_address_country: Option<String>,
    pub geo_code: Option<String>,
    /// Card brand code (`visa`, `master`, …).
    pub card_type: Option<String>,
    pub first_six: Option<String>,
    /// Last four digits of the card or bank account number.
    pub last_four: Option<String>,
    pub month: Option<i64>,
    pub year: Option<i64>,
    pub name_on_account: Option<String>,
    /// `checking` or `savings`.
    pub account_type: Option<String>,
    pub routing_number: Option<String>,
}

/// A stored billing info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillingInfo {
    pub account_id: i64,
    pub site_id: i64,
    pub kind: PaymentKind,
    pub fields: BillingFields,
    /// The gateway's opaque reference of the stored payment method, charged by renewals and
    /// retries (`None` for billing info saved before references were kept).
    pub gateway_reference: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The columns of [`BillingFields`], in the order [`bind_fields`] binds them.
pub(crate) const FIELD_COLUMNS: [&str; 22] = [
    "first_name",
    "last_name",
    "company",
    "address1",
    "address2",
    "address_city",
    "address_state",
    "address_zip",
    "address_country",
    "address_phone",
    "vat_number",
    "ip_address",
    "ip_address_country",
    "geo_code",
    "card_type",
    "first_six",
    "last_four",
    "exp_month",
    "exp_year",
    "name_on_account",
    "account_type",
    "routing_number",
];

/// Binds the fields in [`FIELD_COLUMNS`] order.
pub(crate) fn bind_fields<'q>(query: DbQuery<'q>, f: &BillingFields) -> DbQuery<'q> {
    query
        .bind(f.first_name.clone())
        .bind(f.last_name.clone())
        .bind(f.company.clone())
        .bind(f.address1.clone())
        .bind(f.address2.clone())
        .bind(f.city.clone())
        .bind(f.state.clone())
        .bind(f.zip.clone())
        .bind(f.country.clone())
        .bind(f.phone.clone())
        .bind(f.vat_number.clone())
        .bind(f.ip_address.clone())
        .bind(f.ip_address_country.clone())
        .bind(f.geo_code.clone())
        .bind(f.card_type.clone())
        .bind(f.first_six.clone())
        .bind(f.last_four.clone())
        .bind(f.month)
        .bind(f.year)
        .bind(f.name_on_account.clone())
        .bind(f.account_type.clone())
        .bind(f.routing_number.clone())
}

/// Reads the [`FIELD_COLUMNS`] of a row.
pub(crate) fn fields_from_row(row: &DbRow) -> Result<BillingFields, StoreError> {
    Ok(BillingFields {
        first_name: row.try_get("first_name")?,
        last_name: row.try_get("last_name")?,
        company: row.try_get("company")?,
        address1: row.try_get("address1")?,
        address2: row.try_get("address2")?,
        city: row.try_get("address_city")?,
        state: row.try_get("address_state")?,
        zip: row.try_get("address_zip")?,
        country: row.try_get("address_country")?,
        phone: row.try_get("address_phone")?,
        vat_number: row.try_get("vat_number")?,
        ip_address: row.try_get("ip_address")?,
        ip_address_country: row.try_get("ip_address_country")?,
        geo_code: row.try_get("geo_code")?,
        card_type: row.try_get("card_type")?,
        first_six: row.try_get("first_six")?,
        last_four: row.try_get("last_four")?,
        month: row.try_get("exp_month")?,
        year: row.try_get("exp_year")?,
        name_on_account: row.try_get("name_on_account")?,
        account_type: row.try_get("account_type")?,
        routing_number: row.try_get("routing_number")?,
    })
}

pub(crate) fn kind_from_row(row: &DbRow) -> Result<PaymentKind, StoreError> {
    let kind: String = row.try_get("kind")?;
    PaymentKind::parse(&kind).ok_or_else(|| StoreError::Invalid(format!("stored payment kind `{kind}`")))
}

fn billing_info_from_row(row: &DbRow) -> Result<BillingInfo, StoreError> {
    Ok(BillingInfo {
        account_id: row.try_get("account_id")?,
        site_id: row.try_get("site_id")?,
        kind: kind_from_row(row)?,
        fields: fields_from_row(row)?,
        gateway_reference: row.try_get("gateway_reference")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn columns() -> String {
    format!("account_id, site_id, kind, {}, gateway_reference, created_at, updated_at", FIELD_COLUMNS.join(", "))
}

impl Store {
    /// The account's billing info.
    pub async fn billing_info(&self, account_id: i64) -> Result<Option<BillingInfo>, StoreError> {
        let row = crate::db::query(&format!("SELECT {} FROM billing_infos WHERE account_id = $1", columns()))
            .bind(account_id)
            .fetch_optional(&self.reads)
            .await?;
        row.as_ref().map(billing_info_from_row).transpose()
    }

    /// Sets the account's names, address and payment fields, replacing every field of an existing
    /// billing info (its `created_at` stays; `updated_at` becomes `now`) but keeping its gateway
    /// reference; a new billing info has none. Use [`Store::save_billing_info`] when the payment
    /// method changes.
    pub async fn set_billing_info(
        &self,
        site_id: i64,
        account_id: i64,
        kind: PaymentKind,
        fields: &BillingFields,
        now: i64,
        events: &[NewEvent],
    ) -> Result<BillingInfo, StoreError> {
        self.upsert_billing_info(site_id, account_id, kind, fields, None, now, events).await
    }

    /// Sets the account's billing info with the gateway reference of its (new) payment method,
    /// replacing every field of an existing one (its `created_at` stays; `updated_at` becomes
    /// `now`), and records `events`.
    #[allow(clippy::too_many_arguments)]
    pub async fn save_billing_info(
        &self,
        site_id: i64,
        account_id: i64,
        kind: PaymentKind,
        fields: &BillingFields,
        gateway_reference: Option<&str>,
        now: i64,
        events: &[NewEvent],
    ) -> Result<BillingInfo, StoreError> {
        self.upsert_billing_info(site_id, account_id, kind, fields, Some(gateway_reference), now, events).await
    }

    /// `reference`: `None` keeps the stored reference, `Some(r)` sets it to `r`. The events'
    /// subject is the account's code.
    #[allow(clippy::too_many_arguments)]
    async fn upsert_billing_info(
        &self,
        site_id: i64,
        account_id: i64,
        kind: PaymentKind,
        fields: &BillingFields,
        reference: Option<Option<&str>>,
        now: i64,
        events: &[NewEvent],
    ) -> Result<BillingInfo, StoreError> {
        let placeholders: Vec<String> = (0..FIELD_COLUMNS.len()).map(|i| format!("${}", i + 6)).collect();
        let updates: Vec<String> = FIELD_COLUMNS.iter().map(|c| format!("{c} = excluded.{c}")).collect();
        let keep = if reference.is_some() { "excluded.gateway_reference" } else { "billing_infos.gateway_reference" };
        let sql = format!(
            "INSERT INTO billing_infos (account_id, site_id, kind, created_at, updated_at, gateway_reference, {}) \
             VALUES ($1, $2, $3, $4, $4, $5, {}) \
             ON CONFLICT (account_id) DO UPDATE SET kind = excluded.kind, updated_at = excluded.updated_at, \
             gateway_reference = {keep}, {} \
             RETURNING {}",
            FIELD_COLUMNS.join(", "),
            placeholders.join(", "),
            updates.join(", "),
            columns()
        );
        let query = crate::db::query(&sql)
            .bind(account_id)
            .bind(site_id)
            .bind(kind.as_str())
            .bind(now)
            .bind(reference.flatten().map(str::to_owned));
        let mut work = self.begin_work().await?;
        let row = bind_fields(query, fields).fetch_one(work.tx.exec()).await?;
        let info = billing_info_from_row(&row)?;
        let code = work.account_code(account_id).await?;
        work.append_item_events(site_id, &code, events).await?;
        work.commit().await?;
        Ok(info)
    }

    /// Removes the account's billing info and records `events`; `false` (and no event) when it
    /// had none.
    pub async fn delete_billing_info(&self, account_id: i64, events: &[NewEvent]) -> Result<bool, StoreError> {
        let mut work = self.begin_work().await?;
        let Some(row) = crate::db::query("DELETE FROM billing_infos WHERE account_id = $1 RETURNING site_id")
            .bind(account_id)
            .fetch_optional(work.tx.exec())
            .await?
        else {
            return Ok(false);
        };
        let site_id: i64 = row.try_get("site_id")?;
        let code = work.account_code(account_id).await?;
        work.append_item_events(site_id, &code, events).await?;
        work.commit().await?;
        Ok(true)
    }
}

impl Work {
    /// The code of the account with this id.
    async fn account_code(&mut self, account_id: i64) -> Result<String, StoreError> {
        let sql = format!("SELECT account_code FROM accounts WHERE id = {}", self.backend.params(1, 1));
        Ok(crate::db::query(&sql).bind(account_id).fetch_one(self.tx.exec()).await?.try_get("account_code")?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::AccountFields;
    use crate::testing::both_backends;
    use crate::{Mode, NewSite, Plan};

    const NOW: i64 = 1_800_000_000;

    fn card_fields() -> BillingFields {
        BillingFields {
            first_name: Some("Verena".into()),
            last_name: Some("Example".into()),
            address1: Some("123 Main St.".into()),
            city: Some("San Francisco".into()),
            zip: Some("94105".into()),
            country: Some("US".into()),
            card_type: Some("visa".into()),
            first_six: Some("411111".into()),
            last_four: Some("1111".into()),
            month: Some(12),
            year: Some(2030),
            ..BillingFields::default()
        }
    }

    #[tokio::test]
    async fn billing_info_is_set_replaced_and_deleted() {
        for store in both_backends("billing_info").await {
            let new =
                NewSite { name: "a".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
            let site = store.create_site(&new, NOW).await.expect("site").0;
            let account =
                store.create_account(site.id, "c1", &AccountFields::default(), NOW, &[]).await.expect("account");
            assert_eq!(store.billing_info(account.id).await.expect("read"), None);

            let card = card_fields();
            let set = store
                .set_billing_info(site.id, account.id, PaymentKind::CreditCard, &card, NOW, &[])
                .await
                .expect("set");
            assert_eq!(
                (set.kind, &set.fields, set.created_at, set.updated_at),
                (PaymentKind::CreditCard, &card, NOW, NOW)
            );
            assert_eq!(store.billing_info(account.id).await.expect("read"), Some(set));

            let bank = BillingFields {
                name_on_account: Some("Verena Example".into()),
                account_type: Some("checking".into()),
                routing_number: Some("123456780".into()),
                last_four: Some("1111".into()),
                ..BillingFields::default()
            };
            let replaced = store
                .set_billing_info(site.id, account.id, PaymentKind::BankAccount, &bank, NOW + 5, &[])
                .await
                .expect("replace");
            assert_eq!(
                (replaced.kind, &replaced.fields, replaced.created_at, replaced.updated_at),
                (PaymentKind::BankAccount, &bank, NOW, NOW + 5)
            );
            assert_eq!(replaced.gateway_reference, None);
            let saved = store
                .save_billing_info(
                    site.id,
                    account.id,
                    PaymentKind::CreditCard,
                    &card,
                    Some("sbx_ref_approved"),
                    NOW + 6,
                    &[],
                )
                .await
                .expect("save");
            assert_eq!(saved.gateway_reference.as_deref(), Some("sbx_ref_approved"));
            // Names and address change; the reference stays.
            let renamed = BillingFields { first_name: Some("Vera".into()), ..card.clone() };
            let kept = store
                .set_billing_info(site.id, account.id, PaymentKind::CreditCard, &renamed, NOW + 7, &[])
                .await
                .expect("set");
            assert_eq!(
                (kept.gateway_reference.as_deref(), kept.fields.first_name.as_deref()),
                (Some("sbx_ref_approved"), Some("Vera"))
            );
            assert_eq!(store.billing_info(account.id).await.expect("read"), Some(kept));
            assert!(store.delete_billing_info(account.id, &[]).await.expect("delete"));
            assert!(!store.delete_billing_info(account.id, &[]).await.expect("delete again"));
            assert_eq!(store.billing_info(account.id).await.expect("read"), None);
        }
    }
}
