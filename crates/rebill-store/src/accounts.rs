//! Customer accounts of a site.
//!
//! An account is identified on the API by its `account_code`, unique per site (a second create
//! with the same code, even a concurrent one, is [`StoreError::DuplicateAccount`]). Closing keeps
//! the record (state `closed`, `closed_at` set); reopening makes it active again.
//!
//! Lists of accounts are read with the keyset paging of [`crate::list`].

use rebill_billing::states::InvoiceState;

use crate::db::{DbQuery, DbRow, is_unique_violation};
use crate::events::NewEvent;
use crate::list::{Arg, Conditions, Page, PageRequest, Position, Sort, Within, into_page, order_and_limit};
use crate::{Store, StoreError, flag, get_flag};

/// State of an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccountState {
    Active,
    Closed,
}

impl AccountState {
    pub fn as_str(self) -> &'static str {
        match self {
            AccountState::Active => "active",
            AccountState::Closed => "closed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "active" => Some(AccountState::Active),
            "closed" => Some(AccountState::Closed),
            _ => None,
        }
    }
}

/// A postal address; `None` is an unset part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressFields {
    pub address1: Option<String>,
    pub address2: Option<String>,
    pub city: Option<String>,
    pub state: Option<String>,
    pub zip: Option<String>,
    pub country: Option<String>,
    pub phone: Option<String>,
}

/// The properties of an account a merchant sets. On create `None` is unset; on update `None`
/// leaves the stored value as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountFields {
    pub username: Option<String>,
    pub email: Option<String>,
    pub cc_emails: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub company_name: Option<String>,
    pub vat_number: Option<String>,
    pub tax_exempt: Option<bool>,
    pub entity_use_code: Option<String>,
    pub address: AddressFields,
    pub accept_language: Option<String>,
    pub preferred_locale: Option<String>,
}

/// A stored account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub id: i64,
    pub site_id: i64,
    pub account_code: String,
    pub state: AccountState,
    pub fields: AccountFields,
    /// Random token for the hosted account pages (made at create).
    pub hosted_login_token: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub closed_at: Option<i64>,
}

impl Account {
    /// The account's place in a list sorted by `sort`.
    pub fn position(&self, sort: Sort) -> Position {
        let value = match sort {
            Sort::CreatedAt => self.created_at,
            Sort::UpdatedAt => self.updated_at,
        };
        Position { value, id: self.id }
    }
}

/// What an account's subscriptions and invoices say about it. Derived from other records when
/// read, never stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccountActivity {
    pub has_live_subscription: bool,
    pub has_active_subscription: bool,
    pub has_future_subscription: bool,
    pub has_canceled_subscription: bool,
    pub has_paused_subscription: bool,
    pub has_past_due_invoice: bool,
}

/// An account with its activity, read together ([`Store::account_with_activity`],
/// [`Store::list_accounts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountWithActivity {
    pub account: Account,
    pub activity: AccountActivity,
}

/// Narrows an account list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccountFilter {
    pub state: Option<AccountState>,
}

const ACCOUNT_COLUMNS: &str = "id, site_id, account_code, state, username, email, cc_emails, first_name, last_name, \
     company_name, vat_number, tax_exempt, entity_use_code, address1, address2, address_city, address_state, \
     address_zip, address_country, address_phone, accept_language, preferred_locale, hosted_login_token, \
     created_at, updated_at, closed_at";

/// The activity of each row's account, as columns beside its own (`FROM accounts`): whether
/// it has a subscription in each state that has a flag, and a past-due invoice. Each is an
/// index probe of the account's subscriptions or invoices; read by [`activity_from_row`].
static ACTIVITY_COLUMNS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let exists = |table: &str, state: &str, name: &str| {
        format!(
            "CAST(CASE WHEN EXISTS (SELECT 1 FROM {table} t WHERE t.account_id = accounts.id AND t.state = '{state}') \
             THEN 1 ELSE 0 END AS BIGINT) AS {name}"
        )
    };
    [
        exists("subscriptions", "active", "activity_active"),
        exists("subscriptions", "future", "activity_future"),
        exists("subscriptions", "canceled", "activity_canceled"),
        exists("subscriptions", "paused", "activity_paused"),
        exists("invoices", InvoiceState::PastDue.as_str(), "activity_past_due"),
    ]
    .join(", ")
});

/// The site's account with a code (`$1`, `$2`), with its activity.
static ACCOUNT_WITH_ACTIVITY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {ACCOUNT_COLUMNS}, {} FROM accounts WHERE site_id = $1 AND account_code = $2", *ACTIVITY_COLUMNS)
});

/// What [`ACTIVITY_COLUMNS`] read: live is active, canceled or paused.
fn activity_from_row(row: &DbRow) -> Result<AccountActivity, StoreError> {
    let active = get_flag(row, "activity_active")?;
    let canceled = get_flag(row, "activity_canceled")?;
    let paused = get_flag(row, "activity_paused")?;
    Ok(AccountActivity {
        has_live_subscription: active || canceled || paused,
        has_active_subscription: active,
        has_future_subscription: get_flag(row, "activity_future")?,
        has_canceled_subscription: canceled,
        has_paused_subscription: paused,
        has_past_due_invoice: get_flag(row, "activity_past_due")?,
    })
}

fn account_with_activity_from_row(row: &DbRow) -> Result<AccountWithActivity, StoreError> {
    Ok(AccountWithActivity { account: account_from_row(row)?, activity: activity_from_row(row)? })
}

fn account_from_row(row: &DbRow) -> Result<Account, StoreError> {
    let state: String = row.try_get("state")?;
    let tax_exempt: Option<i64> = row.try_get("tax_exempt")?;
    Ok(Account {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        account_code: row.try_get("account_code")?,
        state: AccountState::parse(&state)
            .ok_or_else(|| StoreError::Invalid(format!("stored account state `{state}`")))?,
        fields: AccountFields {
            username: row.try_get("username")?,
            email: row.try_get("email")?,
            cc_emails: row.try_get("cc_emails")?,
            first_name: row.try_get("first_name")?,
            last_name: row.try_get("last_name")?,
            company_name: row.try_get("company_name")?,
            vat_number: row.try_get("vat_number")?,
            tax_exempt: tax_exempt.map(|v| v != 0),
            entity_use_code: row.try_get("entity_use_code")?,
            address: AddressFields {
                address1: row.try_get("address1")?,
                address2: row.try_get("address2")?,
                city: row.try_get("address_city")?,
                state: row.try_get("address_state")?,
                zip: row.try_get("address_zip")?,
                country: row.try_get("address_country")?,
                phone: row.try_get("address_phone")?,
            },
            accept_language: row.try_get("accept_language")?,
            preferred_locale: row.try_get("preferred_locale")?,
        },
        hosted_login_token: row.try_get("hosted_login_token")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        closed_at: row.try_get("closed_at")?,
    })
}

/// A value of a settable column (`None`: unset on create, unchanged on update).
enum Settable {
    Text(Option<String>),
    Flag(Option<bool>),
}

/// The columns a merchant sets, with their values in `f`.
fn settable(f: &AccountFields) -> [(&'static str, Settable); 18] {
    let a = &f.address;
    let text = |v: &Option<String>| Settable::Text(v.clone());
    [
        ("username", text(&f.username)),
        ("email", text(&f.email)),
        ("cc_emails", text(&f.cc_emails)),
        ("first_name", text(&f.first_name)),
        ("last_name", text(&f.last_name)),
        ("company_name", text(&f.company_name)),
        ("vat_number", text(&f.vat_number)),
        ("tax_exempt", Settable::Flag(f.tax_exempt)),
        ("entity_use_code", text(&f.entity_use_code)),
        ("address1", text(&a.address1)),
        ("address2", text(&a.address2)),
        ("address_city", text(&a.city)),
        ("address_state", text(&a.state)),
        ("address_zip", text(&a.zip)),
        ("address_country", text(&a.country)),
        ("address_phone", text(&a.phone)),
        ("accept_language", text(&f.accept_language)),
        ("preferred_locale", text(&f.preferred_locale)),
    ]
}

fn bind_settable<'q>(mut query: DbQuery<'q>, values: [(&'static str, Settable); 18]) -> DbQuery<'q> {
    for (_, value) in values {
        query = match value {
            Settable::Text(v) => query.bind(v),
            Settable::Flag(v) => query.bind(v.map(flag)),
        };
    }
    query
}

/// A new hosted login token: 32 hexadecimal characters (128 bits) from the OS random source.
fn login_token() -> String {
    let mut buf = [0u8; 16];
    // The OS random source failing is not recoverable for a token generator.
    getrandom::fill(&mut buf).expect("the operating system's random source");
    hex::encode(buf)
}

impl Store {
    /// Creates an active account. A code the site already uses is [`StoreError::DuplicateAccount`],
    /// also when two creates race (the unique index decides).
    pub async fn create_account(
        &self,
        site_id: i64,
        account_code: &str,
        fields: &AccountFields,
        now: i64,
        events: &[NewEvent],
    ) -> Result<Account, StoreError> {
        let values = settable(fields);
        let columns: Vec<&str> = values.iter().map(|(c, _)| *c).collect();
        let placeholders: Vec<String> = (0..columns.len()).map(|i| format!("${}", i + 6)).collect();
        let sql = format!(
            "INSERT INTO accounts (site_id, account_code, state, hosted_login_token, created_at, updated_at, {}) \
             VALUES ($1, $2, $3, $4, $5, $5, {}) RETURNING {ACCOUNT_COLUMNS}",
            columns.join(", "),
            placeholders.join(", ")
        );
        let query = crate::db::query(&sql)
            .bind(site_id)
            .bind(account_code)
            .bind(AccountState::Active.as_str())
            .bind(login_token())
            .bind(now);
        let mut work = self.begin_work().await?;
        let account = match bind_settable(query, values).fetch_one(work.tx.exec()).await {
            Ok(row) => account_from_row(&row)?,
            Err(e) if is_unique_violation(&e) => return Err(StoreError::DuplicateAccount(account_code.to_owned())),
            Err(e) => return Err(e.into()),
        };
        work.append_item_events(site_id, account_code, events).await?;
        work.commit().await?;
        Ok(account)
    }

    /// The site's account with this code.
    pub async fn account(&self, site_id: i64, account_code: &str) -> Result<Option<Account>, StoreError> {
        let row = crate::db::query(&format!(
            "SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE site_id = $1 AND account_code = $2"
        ))
        .bind(site_id)
        .bind(account_code)
        .fetch_optional(&self.reads)
        .await?;
        row.as_ref().map(account_from_row).transpose()
    }

    /// The site's account with this code and its activity, in one statement.
    pub async fn account_with_activity(
        &self,
        site_id: i64,
        account_code: &str,
    ) -> Result<Option<AccountWithActivity>, StoreError> {
        let row = crate::db::query(&ACCOUNT_WITH_ACTIVITY)
            .bind(site_id)
            .bind(account_code)
            .fetch_optional(&self.reads)
            .await?;
        row.as_ref().map(account_with_activity_from_row).transpose()
    }

    /// The site's accounts with these codes (one statement per 500; a code with no account has
    /// none), in no particular order.
    pub async fn accounts_by_codes(&self, site_id: i64, codes: &[impl AsRef<str>]) -> Result<Vec<Account>, StoreError> {
        let select = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts");
        let rows =
            crate::list::rows_with_keys(self, &select, Within::Site(site_id), "account_code", &Arg::texts(codes))
                .await?;
        rows.iter().map(account_from_row).collect()
    }

    /// Changes the properties given in `changes` (the others stay) and moves `updated_at`.
    /// `None` when the site has no such account.
    pub async fn update_account(
        &self,
        site_id: i64,
        account_code: &str,
        changes: &AccountFields,
        now: i64,
        events: &[NewEvent],
    ) -> Result<Option<Account>, StoreError> {
        let values = settable(changes);
        let sets: Vec<String> =
            values.iter().enumerate().map(|(i, (c, _))| format!("{c} = COALESCE(${}, {c})", i + 4)).collect();
        let sql = format!(
            "UPDATE accounts SET updated_at = $1, {} WHERE site_id = $2 AND account_code = $3 RETURNING {ACCOUNT_COLUMNS}",
            sets.join(", ")
        );
        let query = crate::db::query(&sql).bind(now).bind(site_id).bind(account_code);
        let mut work = self.begin_work().await?;
        let Some(row) = bind_settable(query, values).fetch_optional(work.tx.exec()).await? else { return Ok(None) };
        let account = account_from_row(&row)?;
        work.append_item_events(site_id, account_code, events).await?;
        work.commit().await?;
        Ok(Some(account))
    }

    /// Removes an account that a refused request had just created (its nested billing info was
    /// declined): the account's verification transactions, its billing info and the account, in
    /// one transaction. Nothing is removed (`Ok(false)`) once the account has a subscription, an
    /// invoice, an adjustment or a transaction that is not a verification.
    pub async fn discard_new_account(&self, site_id: i64, account_id: i64) -> Result<bool, StoreError> {
        let mut tx = crate::db::begin(&self.pool).await?;
        let held: i64 = crate::db::query(
            "SELECT (SELECT COUNT(*) FROM subscriptions WHERE account_id = $1) \
             + (SELECT COUNT(*) FROM invoices WHERE account_id = $1) \
             + (SELECT COUNT(*) FROM adjustments WHERE account_id = $1) \
             + (SELECT COUNT(*) FROM transactions WHERE account_id = $1 AND action <> 'verify') AS held",
        )
        .bind(account_id)
        .fetch_one(tx.exec())
        .await?
        .try_get("held")?;
        if held > 0 {
            return Ok(false);
        }
        // The refused request changed nothing: the events of the account, its billing info and
        // its verifications go with them.
        crate::db::query(
            "DELETE FROM domain_events WHERE site_id = $1 AND (subject IN (SELECT account_code FROM accounts \
             WHERE id = $2) AND (kind LIKE 'account.%' OR kind LIKE 'billing_info.%' OR kind LIKE 'shipping_address.%') \
             OR kind LIKE 'transaction.%' \
             AND subject IN (SELECT uuid FROM transactions WHERE account_id = $2))",
        )
        .bind(site_id)
        .bind(account_id)
        .execute(tx.exec())
        .await?;
        for table in ["transactions", "billing_infos", "shipping_addresses"] {
            crate::db::query(&format!("DELETE FROM {table} WHERE account_id = $1"))
                .bind(account_id)
                .execute(tx.exec())
                .await?;
        }
        let removed = crate::db::query("DELETE FROM accounts WHERE id = $1 AND site_id = $2")
            .bind(account_id)
            .bind(site_id)
            .execute(tx.exec())
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(removed == 1)
    }

    /// Closes an active account (state `closed`, `closed_at` and `updated_at` now) and records
    /// `events`. A closed account stays as it is (no event). `None` when the site has no such
    /// account.
    pub async fn close_account(
        &self,
        site_id: i64,
        account_code: &str,
        now: i64,
        events: &[NewEvent],
    ) -> Result<Option<Account>, StoreError> {
        self.set_account_state(site_id, account_code, AccountState::Closed, now, events).await
    }

    /// Reopens a closed account (state `active`, no `closed_at`, `updated_at` now) and records
    /// `events`. An active account stays as it is (no event). `None` when the site has no such
    /// account.
    pub async fn reopen_account(
        &self,
        site_id: i64,
        account_code: &str,
        now: i64,
        events: &[NewEvent],
    ) -> Result<Option<Account>, StoreError> {
        self.set_account_state(site_id, account_code, AccountState::Active, now, events).await
    }

    async fn set_account_state(
        &self,
        site_id: i64,
        account_code: &str,
        to: AccountState,
        now: i64,
        events: &[NewEvent],
    ) -> Result<Option<Account>, StoreError> {
        let closed_at = match to {
            AccountState::Closed => Some(now),
            AccountState::Active => None,
        };
        let mut work = self.begin_work().await?;
        let changed = crate::db::query(
            "UPDATE accounts SET state = $1, closed_at = $2, updated_at = $3 \
             WHERE site_id = $4 AND account_code = $5 AND state <> $1",
        )
        .bind(to.as_str())
        .bind(closed_at)
        .bind(now)
        .bind(site_id)
        .bind(account_code)
        .execute(work.tx.exec())
        .await?
        .rows_affected();
        if changed > 0 {
            work.append_item_events(site_id, account_code, events).await?;
        }
        work.commit().await?;
        self.account(site_id, account_code).await
    }

    /// A page of the site's accounts with their activity, with the number of accounts matching
    /// `filter` and the page's time range.
    pub async fn list_accounts(
        &self,
        site_id: i64,
        filter: &AccountFilter,
        page: &PageRequest,
    ) -> Result<Page<AccountWithActivity>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("site_id", Arg::Int(site_id));
        if let Some(state) = filter.state {
            conditions.eq("state", Arg::Text(state.as_str().to_owned()));
        }
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM accounts{}", conditions.sql());
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!(
            "SELECT {ACCOUNT_COLUMNS}, {} FROM accounts{}{}",
            *ACTIVITY_COLUMNS,
            conditions.sql(),
            order_and_limit(page)
        );
        let rows = conditions.bind(crate::db::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(account_with_activity_from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page, total, |a| a.account.position(page.sort)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::both_backends;
    use crate::{Mode, NewSite, Order, Plan};

    const NOW: i64 = 1_800_000_000;

    async fn site(store: &Store, name: &str) -> i64 {
        let new =
            NewSite { name: name.into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
        store.create_site(&new, NOW).await.expect("site").0.id
    }

    fn named(first: &str) -> AccountFields {
        AccountFields { first_name: Some(first.into()), ..AccountFields::default() }
    }

    #[tokio::test]
    async fn accounts_are_created_updated_closed_and_reopened() {
        for store in both_backends("accounts").await {
            let s = site(&store, "a").await;
            let other = site(&store, "b").await;
            let fields = AccountFields {
                email: Some("v@example.com".into()),
                tax_exempt: Some(true),
                address: AddressFields { city: Some("Lyon".into()), country: Some("FR".into()), ..Default::default() },
                preferred_locale: Some("fr-FR".into()),
                ..named("Verena")
            };
            let a = store.create_account(s, "c1", &fields, NOW, &[]).await.expect("create");
            assert_eq!(
                (a.account_code.as_str(), a.state, a.created_at, a.updated_at),
                ("c1", AccountState::Active, NOW, NOW)
            );
            assert_eq!(a.fields, fields);
            assert_eq!(a.hosted_login_token.len(), 32);
            assert!(matches!(
                store.create_account(s, "c1", &named("x"), NOW, &[]).await,
                Err(StoreError::DuplicateAccount(code)) if code == "c1"
            ));
            // Codes are per site.
            store.create_account(other, "c1", &named("y"), NOW, &[]).await.expect("same code, other site");
            assert_eq!(store.account(s, "c1").await.expect("get"), Some(a.clone()));
            assert_eq!(store.account(s, "nope").await.expect("get"), None);

            let changes = AccountFields {
                last_name: Some("Example".into()),
                address: AddressFields { zip: Some("69001".into()), ..Default::default() },
                tax_exempt: Some(false),
                ..AccountFields::default()
            };
            let u = store.update_account(s, "c1", &changes, NOW + 5, &[]).await.expect("update").expect("found");
            assert_eq!(u.fields.first_name.as_deref(), Some("Verena"));
            assert_eq!(u.fields.last_name.as_deref(), Some("Example"));
            assert_eq!(u.fields.tax_exempt, Some(false));
            assert_eq!(
                (u.fields.address.city.as_deref(), u.fields.address.zip.as_deref()),
                (Some("Lyon"), Some("69001"))
            );
            assert_eq!((u.created_at, u.updated_at), (NOW, NOW + 5));
            assert_eq!(store.update_account(s, "nope", &changes, NOW, &[]).await.expect("update"), None);

            let c = store.close_account(s, "c1", NOW + 10, &[]).await.expect("close").expect("found");
            assert_eq!((c.state, c.closed_at, c.updated_at), (AccountState::Closed, Some(NOW + 10), NOW + 10));
            let again = store.close_account(s, "c1", NOW + 20, &[]).await.expect("close").expect("found");
            assert_eq!((again.closed_at, again.updated_at), (Some(NOW + 10), NOW + 10));
            let r = store.reopen_account(s, "c1", NOW + 30, &[]).await.expect("reopen").expect("found");
            assert_eq!((r.state, r.closed_at, r.updated_at), (AccountState::Active, None, NOW + 30));
            let again = store.reopen_account(s, "c1", NOW + 40, &[]).await.expect("reopen").expect("found");
            assert_eq!(again.updated_at, NOW + 30);
            assert_eq!(store.close_account(s, "nope", NOW, &[]).await.expect("close"), None);
            let read = store.account_with_activity(s, "c1").await.expect("read").expect("found");
            assert_eq!(read, AccountWithActivity { account: r, activity: AccountActivity::default() });
        }
    }

    /// Accounts read by their codes: each found once, those of other sites and codes with no
    /// account left out, the same as read one at a time, also across statements (more than 500
    /// codes).
    #[tokio::test]
    async fn accounts_are_read_by_their_codes_in_one_statement_per_500() {
        for store in both_backends("accounts_by_codes").await {
            let s = site(&store, "a").await;
            let other = site(&store, "b").await;
            for code in ["c0", "c1", "c2"] {
                store.create_account(s, code, &named(code), NOW, &[]).await.expect("create");
            }
            store.create_account(other, "c3", &named("c3"), NOW, &[]).await.expect("create");
            // c2 comes after the first 500 codes; c3 is another site's.
            let mut codes: Vec<String> = vec!["c0".into(), "c1".into(), "c3".into()];
            codes.extend((0..600).map(|i| format!("none-{i}")));
            codes.insert(550, "c2".into());
            let mut found = store.accounts_by_codes(s, &codes).await.expect("by codes");
            found.sort_by(|a, b| a.account_code.cmp(&b.account_code));
            let mut alone = Vec::new();
            for code in ["c0", "c1", "c2"] {
                alone.push(store.account(s, code).await.expect("get").expect("found"));
            }
            assert_eq!(found, alone);
            assert!(store.accounts_by_codes(s, &[] as &[&str]).await.expect("none").is_empty());
        }
    }

    #[tokio::test]
    async fn concurrent_creates_of_one_code_make_one_account() {
        for store in both_backends("account_race").await {
            let s = site(&store, "a").await;
            let tasks: Vec<_> = (0..6)
                .map(|_| {
                    let store = store.clone();
                    tokio::spawn(async move { store.create_account(s, "same", &named("x"), NOW, &[]).await })
                })
                .collect();
            let mut results = Vec::new();
            for t in tasks {
                results.push(t.await.expect("task"));
            }
            let created = results.iter().filter(|r| r.is_ok()).count();
            let taken = results.iter().filter(|r| matches!(r, Err(StoreError::DuplicateAccount(_)))).count();
            assert_eq!((created, taken), (1, 5), "{results:?}");
        }
    }

    #[tokio::test]
    async fn pages_follow_the_sort_attribute_and_id() {
        for store in both_backends("account_pages").await {
            let s = site(&store, "a").await;
            // Five accounts, two sharing a second.
            for (i, t) in [0, 10, 10, 20, 30].iter().enumerate() {
                store.create_account(s, &format!("a{i}"), &named("x"), NOW + t, &[]).await.expect("create");
            }
            store.close_account(s, "a1", NOW + 40, &[]).await.expect("close");
            let codes = |p: &Page<AccountWithActivity>| {
                p.items.iter().map(|a| a.account.account_code.clone()).collect::<Vec<_>>()
            };
            let all = AccountFilter::default();

            let first = PageRequest { limit: 2, ..PageRequest::default() };
            let p1 = store.list_accounts(s, &all, &first).await.expect("page");
            assert_eq!((codes(&p1), p1.total), (vec!["a4".to_owned(), "a3".to_owned()], 5));
            let p2 = store.list_accounts(s, &all, &PageRequest { after: p1.next, ..first }).await.expect("page");
            assert_eq!(codes(&p2), vec!["a2", "a1"]);
            let p3 = store.list_accounts(s, &all, &PageRequest { after: p2.next, ..first }).await.expect("page");
            assert_eq!((codes(&p3), p3.next), (vec!["a0".to_owned()], None));

            let asc = PageRequest { order: Order::Asc, limit: 3, ..PageRequest::default() };
            let p = store.list_accounts(s, &all, &asc).await.expect("page");
            assert_eq!(codes(&p), vec!["a0", "a1", "a2"]);
            assert_eq!(p.next, Some(Position { value: NOW + 10, id: p.items[2].account.id }));

            let closed = AccountFilter { state: Some(AccountState::Closed) };
            let p = store.list_accounts(s, &closed, &PageRequest::default()).await.expect("page");
            assert_eq!((codes(&p), p.total), (vec!["a1".to_owned()], 1));

            let range = PageRequest { begin: Some(NOW + 10), end: Some(NOW + 20), ..PageRequest::default() };
            let p = store.list_accounts(s, &all, &range).await.expect("page");
            assert_eq!((codes(&p), p.total), (vec!["a3".to_owned(), "a2".to_owned(), "a1".to_owned()], 3));

            let by_update = PageRequest { sort: Sort::UpdatedAt, end: Some(NOW + 30), ..PageRequest::default() };
            let p = store.list_accounts(s, &all, &by_update).await.expect("page");
            assert_eq!(
                (codes(&p), p.total),
                (vec!["a4".to_owned(), "a3".to_owned(), "a2".to_owned(), "a0".to_owned()], 4)
            );
        }
    }
}
