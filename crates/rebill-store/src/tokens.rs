//! Tokens of the client-side library: what a customer entered, held for 20 minutes until the
//! merchant uses the token once.
//!
//! - The id is 22 URL-safe characters (132 random bits); only its SHA-256 is stored.
//! - The card number and CVV, or bank account number, are stored only as the caller's sealed
//!   secret (the service encrypts it with its vault key); the other fields are
//!   [`BillingFields`].
//! - Using a token ([`Store::consume_token`]) deletes it in the statement that reads it, so a
//!   token works once even when two requests race. An expired token is refused and deleted;
//!   [`Store::purge_expired_tokens`] deletes every expired token.

use crate::billing_info::{BillingFields, FIELD_COLUMNS, PaymentKind, bind_fields, fields_from_row, kind_from_row};
use crate::db::DbRow;
use crate::{SITE_COLUMNS, Site, Store, StoreError, hash_key, site_from_row};

/// How long a token lives.
pub const TOKEN_LIFETIME_SECONDS: i64 = 20 * 60;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A new token id: 22 characters of `[A-Za-z0-9_-]` (132 bits from the OS random source).
pub fn generate_token_id() -> String {
    let mut buf = [0u8; 22];
    // The OS random source failing is not recoverable for a token generator.
    getrandom::fill(&mut buf).expect("the operating system's random source");
    buf.iter().map(|b| char::from(ALPHABET[usize::from(b & 63)])).collect()
}

/// A token to store.
#[derive(Debug, Clone)]
pub struct NewToken<'a> {
    /// The id given to the client (see [`generate_token_id`]); only its hash is stored.
    pub id: &'a str,
    pub site_id: i64,
    pub kind: PaymentKind,
    /// The sealed card number and CVV, or bank account number.
    pub secret: String,
    pub fields: BillingFields,
}

/// A stored token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub site_id: i64,
    pub kind: PaymentKind,
    pub secret: String,
    pub fields: BillingFields,
    pub created_at: i64,
    pub expires_at: i64,
}

/// What happened when a token was used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenUse {
    /// The token, now deleted.
    Consumed(Box<Token>),
    /// It had expired (and is now deleted).
    Expired,
    /// No such token for this site: never made, already used or purged.
    Unknown,
}

fn columns() -> String {
    format!("site_id, kind, secret, {}, created_at, expires_at", FIELD_COLUMNS.join(", "))
}

fn token_from_row(row: &DbRow) -> Result<Token, StoreError> {
    Ok(Token {
        site_id: row.try_get("site_id")?,
        kind: kind_from_row(row)?,
        secret: row.try_get("secret")?,
        fields: fields_from_row(row)?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
    })
}

impl Store {
    /// Stores a token made at `now`; it expires [`TOKEN_LIFETIME_SECONDS`] later.
    pub async fn create_token(&self, new: &NewToken<'_>, now: i64) -> Result<Token, StoreError> {
        let placeholders: Vec<String> = (0..FIELD_COLUMNS.len()).map(|i| format!("${}", i + 7)).collect();
        let sql = format!(
            "INSERT INTO tokens (id_hash, site_id, kind, secret, created_at, expires_at, {}) \
             VALUES ($1, $2, $3, $4, $5, $6, {}) RETURNING {}",
            FIELD_COLUMNS.join(", "),
            placeholders.join(", "),
            columns()
        );
        let query = crate::db::query(&sql)
            .bind(hash_key(new.id))
            .bind(new.site_id)
            .bind(new.kind.as_str())
            .bind(new.secret.clone())
            .bind(now)
            .bind(now + TOKEN_LIFETIME_SECONDS);
        let row = bind_fields(query, &new.fields).fetch_one(&self.pool).await?;
        token_from_row(&row)
    }

    /// Uses the site's token `id` at `now`: it is deleted by the statement that reads it, so it
    /// is handed out once. A token is valid while `now < expires_at`.
    pub async fn consume_token(&self, site_id: i64, id: &str, now: i64) -> Result<TokenUse, StoreError> {
        let row = crate::db::query(&format!(
            "DELETE FROM tokens WHERE id_hash = $1 AND site_id = $2 RETURNING {}",
            columns()
        ))
        .bind(hash_key(id))
        .bind(site_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row.as_ref().map(token_from_row).transpose()? {
            None => TokenUse::Unknown,
            Some(token) if now >= token.expires_at => TokenUse::Expired,
            Some(token) => TokenUse::Consumed(Box::new(token)),
        })
    }

    /// Deletes every token expired at `now`; returns how many.
    pub async fn purge_expired_tokens(&self, now: i64) -> Result<u64, StoreError> {
        let done = crate::db::query("DELETE FROM tokens WHERE expires_at <= $1").bind(now).execute(&self.pool).await?;
        Ok(done.rows_affected())
    }

    /// The site whose public key this is.
    pub async fn site_by_public_key(&self, public_key: &str) -> Result<Option<Site>, StoreError> {
        let row = crate::db::query(&format!("SELECT {SITE_COLUMNS} FROM sites WHERE public_key = $1"))
            .bind(public_key)
            .fetch_optional(&self.reads)
            .await?;
        row.as_ref().map(site_from_row).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::both_backends;
    use crate::{Mode, NewSite, Plan};

    const NOW: i64 = 1_800_000_000;

    async fn site(store: &Store, name: &str) -> Site {
        let new =
            NewSite { name: name.into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
        store.create_site(&new, NOW).await.expect("site").0
    }

    fn token<'a>(id: &'a str, site: &Site) -> NewToken<'a> {
        NewToken {
            id,
            site_id: site.id,
            kind: PaymentKind::CreditCard,
            secret: "v1.sealed".into(),
            fields: BillingFields {
                first_name: Some("Verena".into()),
                last_four: Some("1111".into()),
                month: Some(12),
                year: Some(2030),
                ..BillingFields::default()
            },
        }
    }

    async fn count(store: &Store) -> i64 {
        crate::db::query("SELECT COUNT(*) AS n FROM tokens")
            .fetch_one(&store.pool)
            .await
            .expect("count")
            .try_get("n")
            .expect("n")
    }

    #[test]
    fn ids_are_url_safe_and_random() {
        let a = generate_token_id();
        assert_eq!(a.len(), 22);
        assert!(a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{a}");
        assert_ne!(a, generate_token_id());
    }

    #[tokio::test]
    async fn tokens_are_used_once_within_their_lifetime() {
        for store in both_backends("tokens").await {
            let s = site(&store, "a").await;
            let other = site(&store, "b").await;
            assert_eq!(store.site_by_public_key(&s.public_key).await.expect("lookup"), Some(s.clone()));
            assert_eq!(store.site_by_public_key("pk-nope").await.expect("lookup"), None);

            let id = generate_token_id();
            let made = store.create_token(&token(&id, &s), NOW).await.expect("create");
            assert_eq!((made.created_at, made.expires_at), (NOW, NOW + TOKEN_LIFETIME_SECONDS));
            let stored: String = crate::db::query("SELECT id_hash FROM tokens")
                .fetch_one(&store.pool)
                .await
                .expect("row")
                .try_get("id_hash")
                .expect("id_hash");
            assert_ne!(stored, id, "only the hash of the id is stored");

            assert_eq!(store.consume_token(other.id, &id, NOW).await.expect("use"), TokenUse::Unknown);
            let last_second = NOW + TOKEN_LIFETIME_SECONDS - 1;
            assert_eq!(
                store.consume_token(s.id, &id, last_second).await.expect("use"),
                TokenUse::Consumed(Box::new(made))
            );
            assert_eq!(store.consume_token(s.id, &id, last_second).await.expect("reuse"), TokenUse::Unknown);
            assert_eq!(count(&store).await, 0);

            let late = generate_token_id();
            store.create_token(&token(&late, &s), NOW).await.expect("create");
            assert_eq!(
                store.consume_token(s.id, &late, NOW + TOKEN_LIFETIME_SECONDS).await.expect("use"),
                TokenUse::Expired
            );
            assert_eq!(count(&store).await, 0, "an expired token is deleted when refused");
        }
    }

    #[tokio::test]
    async fn racing_uses_of_one_token_hand_it_out_once() {
        for store in both_backends("token_race").await {
            let s = site(&store, "a").await;
            let id = generate_token_id();
            store.create_token(&token(&id, &s), NOW).await.expect("create");
            let tasks: Vec<_> = (0..6)
                .map(|_| {
                    let (store, id) = (store.clone(), id.clone());
                    tokio::spawn(async move { store.consume_token(s.id, &id, NOW).await })
                })
                .collect();
            let mut consumed = 0;
            for t in tasks {
                if matches!(t.await.expect("task").expect("use"), TokenUse::Consumed(_)) {
                    consumed += 1;
                }
            }
            assert_eq!(consumed, 1);
        }
    }

    #[tokio::test]
    async fn expired_tokens_are_purged() {
        for store in both_backends("token_purge").await {
            let s = site(&store, "a").await;
            for created in [NOW - TOKEN_LIFETIME_SECONDS, NOW - 1, NOW] {
                store.create_token(&token(&generate_token_id(), &s), created).await.expect("create");
            }
            assert_eq!(store.purge_expired_tokens(NOW).await.expect("purge"), 1);
            assert_eq!(count(&store).await, 2);
            assert_eq!(store.purge_expired_tokens(NOW + TOKEN_LIFETIME_SECONDS).await.expect("purge"), 2);
            assert_eq!(count(&store).await, 0);
        }
    }
}
