//! Payment tokens of the client-side library: the site of a public key, a card or bank account
//! checked (with the same rules as billing info, `rebill_billing::card`) and sealed with the
//! vault into a token that lives 20 minutes on the service clock, expired tokens purged, and the
//! vault's key file.
//!
//! A card's expiry is checked on the site's clock; the token's lifetime runs on the service's
//! clock. Tokenizing contacts no gateway (declines surface when the token is used), except to
//! name the bank of a routing number.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rebill_billing::card::{
    BankInput, CardInput, Field, FieldError, Problem, is_valid_routing_number, validate_bank_account, validate_card,
};
use rebill_billing::vault::{Secret, Vault};
use rebill_store::billing_info::{BillingFields, PaymentKind};
use rebill_store::tokens::{NewToken, generate_token_id};
use rebill_store::{Site, Store, StoreError};

use crate::{Clock, Services};

/// The payment details of a token request.
#[derive(Debug, Clone, Copy)]
pub enum TokenPayment<'a> {
    Card(CardInput<'a>),
    Bank(BankInput<'a>),
}

/// A token request: the card or bank account and the names and address that go with it.
#[derive(Debug, Clone)]
pub struct TokenRequest<'a> {
    pub payment: TokenPayment<'a>,
    /// Names and address as sent (the country upper case); the card's or account's own fields
    /// (brand, first six and last four, expiry, routing number, …) are filled in here.
    pub fields: BillingFields,
}

/// A token made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    /// The id the client uses (only its hash is stored).
    pub id: String,
    pub kind: PaymentKind,
}

/// Why no token was made.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// No site has this public key.
    #[error("the public key is not valid")]
    InvalidPublicKey,
    /// Card or bank-account fields that are missing or wrong, and whether the country is not an
    /// ISO 3166-1 alpha-2 code.
    #[error("invalid payment fields")]
    Invalid { errors: Vec<FieldError>, country: bool },
    /// The routing number alone is wrong (its check digit, or a bank the gateway does not know).
    #[error("the routing number is not valid")]
    InvalidRoutingNumber,
    /// The CVV alone is wrong: its length does not match the card's brand (the problem's
    /// message).
    #[error("the CVV does not fit the card: {0}")]
    CvvLength(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Whether a country is an ISO 3166-1 alpha-2 code (any case).
pub fn valid_country(code: &str) -> bool {
    code.len() == 2 && rust_iso3166::from_alpha2(&code.to_ascii_uppercase()).is_some()
}

/// A new random token id (also good as any unguessable code).
pub fn new_id() -> String {
    generate_token_id()
}

/// The site whose public key is `key`.
pub async fn site_for_public_key(services: &Services, key: &str) -> Result<Site, TokenError> {
    services.store.site_by_public_key(key).await?.ok_or(TokenError::InvalidPublicKey)
}

/// The bank of a routing number with a valid check digit, if the site's gateway knows it.
pub async fn bank_name(services: &Services, site: &Site, routing: &str) -> Result<Option<String>, StoreError> {
    if !is_valid_routing_number(routing) {
        return Ok(None);
    }
    Ok(services.gateway(site.id).await?.bank_name(routing))
}

/// The payment details of a request that passed [`check`].
pub enum Checked {
    Bank(rebill_billing::card::BankAccount),
    Card(rebill_billing::card::Card),
}

/// Every check of a token request that needs neither the database nor the gateway: the card
/// (with the site's time `site_now` for its expiry) or the bank account, and the country. The
/// errors are those [`issue`] answers; a bank account's bank is looked up by [`issue`] after.
pub fn check(request: &TokenRequest<'_>, site_now: i64) -> Result<Checked, TokenError> {
    let country_invalid = request.fields.country.as_deref().is_some_and(|c| !valid_country(c));
    let invalid = |errors: Vec<FieldError>| TokenError::Invalid { errors, country: country_invalid };
    match &request.payment {
        TokenPayment::Bank(input) => match validate_bank_account(input) {
            Err(errors)
                if !country_invalid
                    && errors.iter().all(|e| e.field == Field::RoutingNumber && e.problem == Problem::Invalid) =>
            {
                Err(TokenError::InvalidRoutingNumber)
            }
            Err(errors) => Err(invalid(errors)),
            Ok(_) if country_invalid => Err(invalid(Vec::new())),
            Ok(account) => Ok(Checked::Bank(account)),
        },
        TokenPayment::Card(input) => match validate_card(input, site_now) {
            Ok(card) if !country_invalid => Ok(Checked::Card(card)),
            Ok(_) => Err(invalid(Vec::new())),
            Err(errors) => {
                if !country_invalid && errors.iter().all(|e| matches!(e.problem, Problem::CvvLength(_))) {
                    let message = errors.first().map(|e| e.problem.message()).unwrap_or_default();
                    return Err(TokenError::CvvLength(message));
                }
                Err(invalid(errors))
            }
        },
    }
}

/// Checks the card or bank account of `request` for `site` ([`check`], then the bank of a bank
/// account) and stores it sealed as a token.
pub async fn issue(services: &Services, site: &Site, request: &TokenRequest<'_>) -> Result<IssuedToken, TokenError> {
    let mut fields = request.fields.clone();
    let (kind, secret) = match check(request, site.now(services.clock.now()))? {
        Checked::Bank(account) => {
            let gateway = services.gateway(site.id).await?;
            // A gateway without bank accounts refuses them by name when they are stored.
            if gateway.accepts_bank_accounts() && bank_name(services, site, &account.routing_number).await?.is_none() {
                return Err(TokenError::InvalidRoutingNumber);
            }
            fields.name_on_account = Some(account.name_on_account.clone());
            fields.account_type = Some(account.account_type.as_str().to_owned());
            fields.routing_number = Some(account.routing_number.clone());
            fields.last_four = Some(account.last_four().to_owned());
            (PaymentKind::BankAccount, Secret::BankAccount { account_number: account.account_number })
        }
        Checked::Card(card) => {
            fields.card_type = Some(card.brand.code().to_owned());
            fields.first_six = Some(card.first_six().to_owned());
            fields.last_four = Some(card.last_four().to_owned());
            fields.month = Some(i64::from(card.expiry.month));
            fields.year = Some(i64::from(card.expiry.year));
            (PaymentKind::CreditCard, Secret::Card { number: card.number, cvv: card.cvv })
        }
    };
    let id = generate_token_id();
    let sealed = services.vault.seal(&secret, id.as_bytes());
    let new = NewToken { id: &id, site_id: site.id, kind, secret: sealed, fields };
    services.store.create_token(&new, services.clock.now()).await?;
    Ok(IssuedToken { id, kind })
}

/// Deletes expired tokens every `interval`, for as long as the task runs.
pub async fn purge_expired(store: Store, clock: std::sync::Arc<dyn Clock>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match store.purge_expired_tokens(clock.now()).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(tokens = n, "expired tokens deleted"),
            Err(e) => tracing::warn!(error = %e, "purging expired tokens"),
        }
    }
}

/// File name of the vault key beside the database.
pub const VAULT_KEY_FILE_NAME: &str = "rebill-vault.key";

/// Where the vault key lives when no file is named: beside an SQLite database file (created
/// there on first start). For other databases, `./rebill-vault.key` when it exists, else `None`:
/// several processes share a PostgreSQL database and must be given one key file explicitly.
pub fn default_vault_key_file(database_url: &str) -> Option<PathBuf> {
    let sqlite_file = database_url
        .strip_prefix("sqlite://")
        .or_else(|| database_url.strip_prefix("sqlite:"))
        .map(|rest| rest.split('?').next().unwrap_or_default())
        .filter(|path| !path.is_empty() && !path.contains(":memory:"));
    let working_directory = Path::new(".").join(VAULT_KEY_FILE_NAME);
    match sqlite_file.map(Path::new).map(Path::parent) {
        Some(Some(dir)) if !dir.as_os_str().is_empty() => Some(dir.join(VAULT_KEY_FILE_NAME)),
        Some(_) => Some(working_directory),
        None => working_directory.exists().then_some(working_directory),
    }
}

/// The vault of the service: over the key in `key_file`, else in the default key file (see
/// [`default_vault_key_file`]), else over a key that lives as long as the process (logged as a
/// warning: its tokens work only on this process, until it stops).
pub fn open_vault(key_file: Option<&Path>, database_url: &str) -> std::io::Result<Vault> {
    match key_file.map(Path::to_path_buf).or_else(|| default_vault_key_file(database_url)) {
        Some(path) => vault_from_key_file(&path)
            .map_err(|e| std::io::Error::new(e.kind(), format!("vault key file {}: {e}", path.display()))),
        None => {
            tracing::warn!(
                "no vault key file (--vault-key-file): tokens are encrypted with a key of this process only, \
                 so another process cannot use them and they stop working when this one stops"
            );
            Ok(Vault::ephemeral())
        }
    }
}

/// The vault over the key in `path` (64 hexadecimal characters). A missing file is created with
/// a new random key, readable by its owner only; when several processes start at once, one key
/// wins and every process reads it.
pub fn vault_from_key_file(path: &Path) -> std::io::Result<Vault> {
    let invalid = |e: rebill_billing::vault::VaultError| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    if !path.exists() {
        create_key_file(path)?;
    }
    Vault::from_hex(&std::fs::read_to_string(path)?).map_err(invalid)
}

/// Writes a new key to a private temporary file and links it into place (linking fails when the
/// file appeared meanwhile, and then that key is kept).
fn create_key_file(path: &Path) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let temporary = dir.join(format!(".{VAULT_KEY_FILE_NAME}.{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary)?;
    file.write_all(format!("{}\n", Vault::generate_key_hex()).as_bytes())?;
    file.sync_all()?;
    drop(file);
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

impl From<TokenError> for crate::platform::error::AppError {
    fn from(e: TokenError) -> Self {
        match e {
            TokenError::InvalidPublicKey => Self::refused("key", "invalid", e.to_string()),
            TokenError::Invalid { errors, country } => {
                let mut refusals: Vec<crate::platform::error::FieldRefusal> = errors
                    .iter()
                    .map(|f| {
                        crate::platform::error::FieldRefusal::new(
                            f.field.token_param(),
                            f.problem.symbol(),
                            f.problem.message(),
                        )
                    })
                    .collect();
                if country {
                    refusals.push(crate::platform::error::FieldRefusal::new("country", "invalid", "is invalid"));
                }
                Self::Refused(refusals)
            }
            TokenError::InvalidRoutingNumber => Self::refused("routing_number", "invalid", "is invalid"),
            TokenError::CvvLength(message) => Self::refused("cvv", "invalid", message),
            TokenError::Store(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_file_sits_beside_an_sqlite_database() {
        let beside = |url| default_vault_key_file(url).map(|p| p.display().to_string());
        assert_eq!(beside("sqlite://./rebill.db").as_deref(), Some("./rebill-vault.key"));
        assert_eq!(beside("sqlite:///var/lib/x/r.db?mode=rwc").as_deref(), Some("/var/lib/x/rebill-vault.key"));
        assert_eq!(beside("sqlite:rebill.db").as_deref(), Some("./rebill-vault.key"));
        // Tests run in the package directory, which holds no key file.
        assert_eq!(beside("sqlite::memory:"), None);
        assert_eq!(beside("postgres://db/rebill"), None);
        assert!(open_vault(None, "postgres://db/rebill").is_ok(), "a process-only key");
    }

    #[test]
    fn a_missing_key_file_is_made_private_and_then_reused() {
        let dir = std::env::temp_dir().join(format!("rebill-vault-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(VAULT_KEY_FILE_NAME);
        let _ = std::fs::remove_file(&path);
        let first = vault_from_key_file(&path).expect("created");
        let sealed = first.seal(&Secret::BankAccount { account_number: "111111111".into() }, b"t");
        let again = vault_from_key_file(&path).expect("read");
        assert!(again.open(&sealed, b"t").is_ok(), "the same key is read back");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("metadata").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "not a key").expect("write");
        assert_eq!(vault_from_key_file(&path).err().map(|e| e.kind()), Some(std::io::ErrorKind::InvalidData));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn countries_are_iso_codes() {
        assert!(valid_country("us") && valid_country("DE") && !valid_country("XX") && !valid_country("USA"));
    }
}
