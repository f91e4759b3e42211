//! Webhook endpoints: where a site's push notifications go (`rebill webhooks add`). Secrets and
//! HTTP passwords arrive sealed by the caller (this module never sees them in clear). At most
//! [`MAX_ENDPOINTS`] live endpoints per site, checked under the site's row lock by the write
//! that adds one. A removed endpoint keeps its row (`removed_at`).

use sqlx::Row;

use crate::db::DbRow;
use crate::{Store, StoreError};

/// Live endpoints a site may have.
pub const MAX_ENDPOINTS: usize = 10;

/// An endpoint as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub id: i64,
    pub site_id: i64,
    pub url: String,
    pub http_user: Option<String>,
    /// The HTTP Basic password, sealed with the vault key.
    pub http_password_sealed: Option<String>,
    /// The notification kinds it takes; `None`: every kind.
    pub kinds: Option<Vec<String>>,
    /// The signing secret, sealed with the vault key.
    pub secret_sealed: String,
    pub created_at: i64,
    pub removed_at: Option<i64>,
}

impl Endpoint {
    /// Whether the endpoint takes notifications of `kind`.
    pub fn takes(&self, kind: &str) -> bool {
        self.kinds.as_ref().is_none_or(|kinds| kinds.iter().any(|k| k == kind))
    }
}

/// An endpoint to add.
#[derive(Debug, Clone)]
pub struct NewEndpoint<'a> {
    pub url: &'a str,
    pub http_user: Option<&'a str>,
    pub http_password_sealed: Option<&'a str>,
    pub kinds: Option<&'a [String]>,
    pub secret_sealed: &'a str,
}

/// Why an endpoint was not added.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("the site already has {MAX_ENDPOINTS} webhook endpoints")]
    Limit,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for EndpointError {
    fn from(e: sqlx::Error) -> Self {
        EndpointError::Store(StoreError::Database(e))
    }
}

const COLUMNS: &str = "id, site_id, url, http_user, http_password_sealed, kinds, secret_sealed, created_at, removed_at";

fn from_row(row: &DbRow) -> Result<Endpoint, StoreError> {
    let kinds: Option<String> = row.try_get("kinds")?;
    Ok(Endpoint {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        url: row.try_get("url")?,
        http_user: row.try_get("http_user")?,
        http_password_sealed: row.try_get("http_password_sealed")?,
        kinds: kinds.map(|k| k.split(',').filter(|k| !k.is_empty()).map(str::to_owned).collect()),
        secret_sealed: row.try_get("secret_sealed")?,
        created_at: row.try_get("created_at")?,
        removed_at: row.try_get("removed_at")?,
    })
}

impl Store {
    /// Adds an endpoint to the site unless it has [`MAX_ENDPOINTS`] live ones already.
    pub async fn add_webhook_endpoint(
        &self,
        site_id: i64,
        new: &NewEndpoint<'_>,
        now: i64,
    ) -> Result<Endpoint, EndpointError> {
        let mut work = self.begin_work().await?;
        // Two adds at once count one after the other.
        let lock = format!("SELECT id FROM sites WHERE id = $1{}", work.backend.for_update());
        sqlx::query(&lock).bind(site_id).fetch_optional(&mut *work.tx).await?;
        let live: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM webhook_endpoints WHERE site_id = $1 AND removed_at IS NULL")
                .bind(site_id)
                .fetch_one(&mut *work.tx)
                .await?
                .try_get("n")?;
        if usize::try_from(live).unwrap_or(usize::MAX) >= MAX_ENDPOINTS {
            return Err(EndpointError::Limit);
        }
        let row = sqlx::query(&format!(
            "INSERT INTO webhook_endpoints (site_id, url, http_user, http_password_sealed, kinds, secret_sealed, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
        ))
        .bind(site_id)
        .bind(new.url.to_owned())
        .bind(new.http_user.map(str::to_owned))
        .bind(new.http_password_sealed.map(str::to_owned))
        .bind(new.kinds.map(|k| k.join(",")))
        .bind(new.secret_sealed.to_owned())
        .bind(now)
        .fetch_one(&mut *work.tx)
        .await?;
        let endpoint = from_row(&row)?;
        work.commit().await?;
        Ok(endpoint)
    }

    /// The live endpoints of the site (of every site with `None`), oldest first.
    pub async fn webhook_endpoints(&self, site_id: Option<i64>) -> Result<Vec<Endpoint>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM webhook_endpoints WHERE ($1 IS NULL OR site_id = $1) AND removed_at IS NULL \
             ORDER BY id"
        ))
        .bind(site_id)
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// Removes the live endpoint `id` (ids are global); answers it as it was, if there was one.
    pub async fn remove_webhook_endpoint(&self, id: i64, now: i64) -> Result<Option<Endpoint>, StoreError> {
        let row = sqlx::query(&format!(
            "UPDATE webhook_endpoints SET removed_at = $1 WHERE id = $2 AND removed_at IS NULL RETURNING {COLUMNS}"
        ))
        .bind(now)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(from_row).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::both_backends;
    use crate::{Mode, NewSite, Plan};

    #[tokio::test]
    async fn endpoints_are_added_listed_limited_and_removed() {
        for store in both_backends("webhook_endpoints").await {
            let new = NewSite {
                name: "acme".into(),
                mode: Mode::Sandbox,
                plan: Plan::Core,
                credit_memos: false,
                contact: None,
            };
            let (site, _) = store.create_site(&new, 100).await.expect("site");
            let kinds = vec!["new_account_notification".to_owned(), "paid_charge_invoice_notification".to_owned()];
            let first = store
                .add_webhook_endpoint(
                    site.id,
                    &NewEndpoint {
                        url: "https://example.com/hooks",
                        http_user: Some("u"),
                        http_password_sealed: Some("sealed-p"),
                        kinds: Some(&kinds),
                        secret_sealed: "sealed-s",
                    },
                    200,
                )
                .await
                .expect("add");
            assert_eq!(first.kinds.as_deref(), Some(kinds.as_slice()));
            assert!(first.takes("new_account_notification") && !first.takes("new_subscription_notification"));
            let plain = NewEndpoint {
                url: "http://127.0.0.1:9/h",
                http_user: None,
                http_password_sealed: None,
                kinds: None,
                secret_sealed: "s",
            };
            for _ in 1..MAX_ENDPOINTS {
                let e = store.add_webhook_endpoint(site.id, &plain, 300).await.expect("add");
                assert!(e.takes("anything_notification"), "no kinds: every kind");
            }
            assert!(matches!(store.add_webhook_endpoint(site.id, &plain, 400).await, Err(EndpointError::Limit)));
            let other = NewSite { name: "globex".into(), ..new.clone() };
            let (other, _) = store.create_site(&other, 100).await.expect("another site");
            store.add_webhook_endpoint(other.id, &plain, 300).await.expect("another site's endpoints count apart");
            let listed = store.webhook_endpoints(Some(site.id)).await.expect("list");
            assert_eq!(listed.len(), MAX_ENDPOINTS);
            assert_eq!(listed[0], first);
            assert_eq!(store.webhook_endpoints(None).await.expect("all").len(), MAX_ENDPOINTS + 1);
            let removed = store.remove_webhook_endpoint(first.id, 500).await.expect("remove").expect("it was live");
            assert_eq!((removed.id, removed.removed_at), (first.id, Some(500)));
            assert!(store.remove_webhook_endpoint(first.id, 500).await.expect("again").is_none());
            assert_eq!(store.webhook_endpoints(Some(site.id)).await.expect("list").len(), MAX_ENDPOINTS - 1);
            store.add_webhook_endpoint(site.id, &plain, 600).await.expect("room again after a removal");
        }
    }
}
