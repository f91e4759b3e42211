//! Shipping addresses of accounts: list, get, create, update, delete, the addresses nested in a
//! new account, and the address a subscription or a one-off adjustment names (a new one or an
//! existing one of its account). Decisions in `docs/shipping-addresses.md`:
//!
//! - a new address needs `first_name`, `last_name`, `address1`, `city`, `state`, `zip` and
//!   `country`; its nickname defaults to "first_name last_name";
//! - an account holds at most [`MAX_PER_ACCOUNT`] addresses: one more is refused (`too_many`);
//! - an exact duplicate of an address the account holds (every value, blanks and surrounding
//!   spaces aside, after the nickname default) is not added again: the existing one is answered;
//! - an address a live subscription of the account ships to cannot be deleted (`InUse`); a
//!   deleted address stays shown on the line items shipped to it.

use rebill_store::accounts::Account;
use rebill_store::shipping_addresses::{ShippingAddress, ShippingFields, details_shipping_address, same_address};
use rebill_store::{Page, PageRequest, StoreError};
use serde_json::json;

use crate::platform::error::{AppError, FieldRefusal, Missing};
use crate::platform::events;
use crate::{Context, Services};

/// Most addresses an account holds.
pub const MAX_PER_ACCOUNT: usize = 20;

pub const SHIPPING_ADDRESS_CREATED: &str = "shipping_address.created";
pub const SHIPPING_ADDRESS_UPDATED: &str = "shipping_address.updated";
pub const SHIPPING_ADDRESS_DELETED: &str = "shipping_address.deleted";

/// The fields a new address must have.
const REQUIRED: [&str; 7] = ["first_name", "last_name", "address1", "city", "state", "zip", "country"];

/// Why a shipping-address operation changed or found nothing.
#[derive(Debug, thiserror::Error)]
pub enum ShippingError {
    #[error("no account with code {0}")]
    AccountNotFound(String),
    /// The account has no live address with this id.
    #[error("no shipping address with id {0}")]
    NotFound(i64),
    /// A new address misses required values (the fields, below the address).
    #[error("the shipping address misses {0:?}")]
    Blank(Vec<&'static str>),
    /// The account already holds [`MAX_PER_ACCOUNT`] addresses.
    #[error("an account can't have more than {MAX_PER_ACCOUNT} shipping addresses")]
    TooMany,
    /// A live subscription of the account ships to the address.
    #[error("the shipping address is used by subscription {0}")]
    InUse(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<ShippingError> for AppError {
    fn from(e: ShippingError) -> Self {
        match e {
            ShippingError::AccountNotFound(code) => Self::NotFound(Missing::account(&code)),
            ShippingError::NotFound(id) => {
                Self::NotFound(Missing { resource: "ShippingAddress", key: "id", value: id.to_string() })
            }
            ShippingError::Blank(fields) => {
                Self::Refused(fields.into_iter().map(|f| FieldRefusal::new(f, "blank", "can't be blank")).collect())
            }
            ShippingError::TooMany => Self::Refused(vec![FieldRefusal::new("base", "too_many", e.to_string())]),
            ShippingError::InUse(_) => Self::Conflict(e.to_string()),
            ShippingError::Store(e) => e.into(),
        }
    }
}

/// What a subscription or an adjustment is shipped to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShippingChoice {
    /// An address the account holds, by id.
    Existing(i64),
    /// A new address for the account (or the one it holds with exactly these values).
    New(Box<ShippingFields>),
}

/// An address a request named, and whether the request added it to the account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub address: ShippingAddress,
    pub added: bool,
}

fn filled(v: &Option<String>) -> bool {
    v.as_deref().is_some_and(|s| !s.trim().is_empty())
}

/// `fields` as a new address is stored: the nickname defaults to "first_name last_name".
pub fn with_default_nickname(fields: &ShippingFields) -> ShippingFields {
    let mut f = fields.clone();
    if !filled(&f.nickname) {
        let name = [&f.first_name, &f.last_name]
            .into_iter()
            .filter_map(|v| v.as_deref().map(str::trim).filter(|s| !s.is_empty()))
            .collect::<Vec<_>>()
            .join(" ");
        f.nickname = (!name.is_empty()).then_some(name);
    }
    f
}

/// The required fields a new address misses.
pub fn missing(fields: &ShippingFields) -> Vec<&'static str> {
    let f = fields;
    let values = [&f.first_name, &f.last_name, &f.address1, &f.city, &f.state, &f.zip, &f.country];
    REQUIRED.iter().zip(values).filter(|(_, v)| !filled(v)).map(|(name, _)| *name).collect()
}

/// Checks new addresses before anything is written: their required values, and that the
/// account (holding `held` addresses) stays within [`MAX_PER_ACCOUNT`] once the duplicates are
/// left out.
pub fn check_new(held: &[ShippingAddress], new: &[ShippingFields]) -> Result<(), ShippingError> {
    let normalised: Vec<ShippingFields> = new.iter().map(with_default_nickname).collect();
    check_normalised(held, &normalised)
}

/// [`check_new`] of addresses already given their default nickname.
fn check_normalised(held: &[ShippingAddress], new: &[ShippingFields]) -> Result<(), ShippingError> {
    for fields in new {
        let blank = missing(fields);
        if !blank.is_empty() {
            return Err(ShippingError::Blank(blank));
        }
    }
    let mut kept: Vec<ShippingFields> = held.iter().map(|a| a.fields.clone()).collect();
    for fields in new {
        if !kept.iter().any(|k| same_address(k, fields)) {
            kept.push(fields.clone());
        }
    }
    if kept.len() > MAX_PER_ACCOUNT { Err(ShippingError::TooMany) } else { Ok(()) }
}

fn event(
    services: &Services,
    kind: &str,
    at: i64,
    account_code: &str,
    id: Option<i64>,
) -> rebill_store::events::NewEvent {
    events::new(services, kind, at, json!({ "account_code": account_code, "shipping_address_id": id }))
}

async fn account(services: &Services, ctx: &Context, code: &str) -> Result<Account, ShippingError> {
    services.store.account(ctx.site.id, code).await?.ok_or_else(|| ShippingError::AccountNotFound(code.to_owned()))
}

/// Adds the new addresses to `account` (checked with [`check_new`] first), leaving out those
/// it holds already: answers each address named, in order, with whether it was added.
pub async fn add(
    services: &Services,
    ctx: &Context,
    account: &Account,
    new: &[ShippingFields],
) -> Result<Vec<Resolved>, ShippingError> {
    let held = services.store.shipping_addresses(account.id).await?;
    // Each address with its default nickname, once: checked, compared and added as such.
    let new: Vec<ShippingFields> = new.iter().map(with_default_nickname).collect();
    check_normalised(&held, &new)?;
    let mut answer: Vec<Option<Resolved>> = Vec::with_capacity(new.len());
    let mut to_add: Vec<ShippingFields> = Vec::new();
    for fields in new.iter().cloned() {
        match held.iter().find(|h| same_address(&h.fields, &fields)) {
            Some(existing) => answer.push(Some(Resolved { address: existing.clone(), added: false })),
            None => {
                if !to_add.iter().any(|t| same_address(t, &fields)) {
                    to_add.push(fields);
                }
                answer.push(None);
            }
        }
    }
    let made = if to_add.is_empty() {
        Vec::new()
    } else {
        let code = account.account_code.as_str();
        let created = |a: &ShippingAddress| event(services, SHIPPING_ADDRESS_CREATED, ctx.now, code, Some(a.id));
        services
            .store
            .create_shipping_addresses(
                ctx.site.id,
                account.id,
                &account.account_code,
                &to_add,
                MAX_PER_ACCOUNT,
                ctx.now,
                &created,
            )
            .await?
            .ok_or(ShippingError::TooMany)?
    };
    new.iter()
        .zip(answer)
        .map(|(fields, found)| match found {
            Some(found) => Ok(found),
            None => made
                .iter()
                .find(|m| same_address(&m.fields, fields))
                .map(|address| Resolved { address: address.clone(), added: true })
                .ok_or_else(|| {
                    ShippingError::Store(StoreError::Invalid("an added shipping address is missing".into()))
                }),
        })
        .collect()
}

/// The address `choice` names for the account: an existing one (else `NotFound`) or a new one
/// (added unless the account holds it already).
pub async fn resolve(
    services: &Services,
    ctx: &Context,
    account: &Account,
    choice: &ShippingChoice,
) -> Result<Resolved, ShippingError> {
    match choice {
        ShippingChoice::Existing(id) => match services.store.shipping_address(account.id, *id).await? {
            Some(address) => Ok(Resolved { address, added: false }),
            None => Err(ShippingError::NotFound(*id)),
        },
        ShippingChoice::New(fields) => {
            let mut resolved = add(services, ctx, account, std::slice::from_ref(&**fields)).await?;
            resolved.pop().ok_or(ShippingError::NotFound(0))
        }
    }
}

/// [`resolve`] for the account `code`.
pub async fn for_account(
    services: &Services,
    ctx: &Context,
    code: &str,
    choice: &ShippingChoice,
) -> Result<Resolved, ShippingError> {
    let account = account(services, ctx, code).await?;
    resolve(services, ctx, &account, choice).await
}

/// Removes an address a refused request had just added (no event: the request changed nothing).
pub async fn discard(services: &Services, ctx: &Context, account: &Account, added: &Resolved) {
    if !added.added {
        return;
    }
    if let Err(e) = services
        .store
        .delete_shipping_address(ctx.site.id, account.id, &account.account_code, added.address.id, ctx.now, &[])
        .await
    {
        tracing::error!(error = %e, "removing a shipping address of a refused request");
    }
}

/// A page of the account's addresses.
pub async fn list(
    services: &Services,
    ctx: &Context,
    code: &str,
    page: &PageRequest,
) -> Result<Page<ShippingAddress>, ShippingError> {
    let account = account(services, ctx, code).await?;
    Ok(services.store.list_shipping_addresses(account.id, page).await?)
}

/// The account's address `id`.
pub async fn get(services: &Services, ctx: &Context, code: &str, id: i64) -> Result<ShippingAddress, ShippingError> {
    let account = account(services, ctx, code).await?;
    services.store.shipping_address(account.id, id).await?.ok_or(ShippingError::NotFound(id))
}

/// Adds an address to the account `code` (see [`add`]).
pub async fn create(
    services: &Services,
    ctx: &Context,
    code: &str,
    fields: &ShippingFields,
) -> Result<Resolved, ShippingError> {
    let account = account(services, ctx, code).await?;
    resolve(services, ctx, &account, &ShippingChoice::New(Box::new(fields.clone()))).await
}

/// Changes the values `changes` holds of the account's address `id`.
pub async fn update(
    services: &Services,
    ctx: &Context,
    code: &str,
    id: i64,
    changes: &ShippingFields,
) -> Result<ShippingAddress, ShippingError> {
    let account = account(services, ctx, code).await?;
    let events = [event(services, SHIPPING_ADDRESS_UPDATED, ctx.now, code, Some(id))];
    services
        .store
        .update_shipping_address(account.id, code, id, changes, ctx.now, &events)
        .await?
        .ok_or(ShippingError::NotFound(id))
}

/// Deletes the account's address `id`, unless a live subscription ships to it.
pub async fn delete(services: &Services, ctx: &Context, code: &str, id: i64) -> Result<(), ShippingError> {
    let account = account(services, ctx, code).await?;
    if services.store.shipping_address(account.id, id).await?.is_none() {
        return Err(ShippingError::NotFound(id));
    }
    for (uuid, details) in services.store.live_subscription_details(account.id).await? {
        if details_shipping_address(&details) == Some(id) {
            return Err(ShippingError::InUse(uuid));
        }
    }
    let events = [event(services, SHIPPING_ADDRESS_DELETED, ctx.now, code, Some(id))];
    if services.store.delete_shipping_address(ctx.site.id, account.id, code, id, ctx.now, &events).await? {
        Ok(())
    } else {
        Err(ShippingError::NotFound(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete() -> ShippingFields {
        ShippingFields {
            first_name: Some("Verena".into()),
            last_name: Some("Example".into()),
            address1: Some("123 Main St.".into()),
            city: Some("San Francisco".into()),
            state: Some("CA".into()),
            zip: Some("94105".into()),
            country: Some("US".into()),
            ..ShippingFields::default()
        }
    }

    fn stored(id: i64, fields: ShippingFields) -> ShippingAddress {
        ShippingAddress { id, site_id: 1, account_id: 1, fields, created_at: 0, updated_at: 0, deleted_at: None }
    }

    #[test]
    fn the_nickname_defaults_to_the_names() {
        assert_eq!(with_default_nickname(&complete()).nickname.as_deref(), Some("Verena Example"));
        let named = ShippingFields { nickname: Some("Work".into()), ..complete() };
        assert_eq!(with_default_nickname(&named).nickname.as_deref(), Some("Work"));
        let blank = ShippingFields { nickname: Some("  ".into()), last_name: None, ..complete() };
        assert_eq!(with_default_nickname(&blank).nickname.as_deref(), Some("Verena"));
    }

    #[test]
    fn a_new_address_needs_its_required_values() {
        assert!(missing(&complete()).is_empty());
        let partial = ShippingFields { first_name: None, zip: Some(" ".into()), ..complete() };
        assert_eq!(missing(&partial), vec!["first_name", "zip"]);
        assert!(matches!(check_new(&[], &[partial]), Err(ShippingError::Blank(f)) if f == vec!["first_name", "zip"]));
    }

    #[test]
    fn an_account_holds_at_most_twenty_and_duplicates_do_not_count() {
        let nth = |i: usize| ShippingFields { address1: Some(format!("{i} Main St.")), ..complete() };
        let held: Vec<ShippingAddress> = (0..19).map(|i| stored(i as i64, with_default_nickname(&nth(i)))).collect();
        assert!(check_new(&held, &[nth(19)]).is_ok());
        assert!(matches!(check_new(&held, &[nth(19), nth(20)]), Err(ShippingError::TooMany)));
        // A duplicate of a held address, or twice the same new one, adds nothing.
        assert!(check_new(&held, &[nth(3), nth(19), nth(19)]).is_ok());
    }
}
