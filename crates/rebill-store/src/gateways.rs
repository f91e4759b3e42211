//! The real payment gateway configured for a site (`rebill gateway set`): its kind, its secret
//! key sealed by the caller with the vault key (this module never sees it in clear), the last
//! four characters of the key, and the gateway's API root. A site without a row has none.

use crate::{DbRow, Mode, Store, StoreError};

/// A site's gateway as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteGateway {
    pub site_id: i64,
    /// The gateway's name (`stripe`).
    pub kind: String,
    /// The secret key, sealed with the vault key.
    pub secret_sealed: String,
    /// The key's last four characters (what people are shown).
    pub key_last4: String,
    /// The gateway's API root (`https://api.stripe.com`).
    pub api_base: String,
    /// Grows with every change of the row.
    pub version: i64,
    pub updated_at: i64,
}

/// What a gateway is set to.
#[derive(Debug, Clone)]
pub struct NewSiteGateway<'a> {
    pub kind: &'a str,
    pub secret_sealed: &'a str,
    pub key_last4: &'a str,
    pub api_base: &'a str,
}

/// A site's mode with its gateway, read together (what choosing the site's gateway needs).
#[derive(Debug, Clone)]
pub struct SiteGatewayChoice {
    pub mode: Mode,
    pub gateway: Option<SiteGateway>,
}

const COLUMNS: &str = "site_id, kind, secret_sealed, key_last4, api_base, version, updated_at";

fn from_row(row: &DbRow) -> Result<SiteGateway, StoreError> {
    Ok(SiteGateway {
        site_id: row.try_get("site_id")?,
        kind: row.try_get("kind")?,
        secret_sealed: row.try_get("secret_sealed")?,
        key_last4: row.try_get("key_last4")?,
        api_base: row.try_get("api_base")?,
        version: row.try_get("version")?,
        updated_at: row.try_get("updated_at")?,
    })
}

impl Store {
    /// Sets the site's gateway (replacing the one set before); answers it.
    pub async fn set_site_gateway(
        &self,
        site_id: i64,
        new: &NewSiteGateway<'_>,
        now: i64,
    ) -> Result<SiteGateway, StoreError> {
        let row = crate::db::query(&format!(
            "INSERT INTO site_gateways ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, 1, $6) \
             ON CONFLICT (site_id) DO UPDATE SET kind = excluded.kind, secret_sealed = excluded.secret_sealed, \
             key_last4 = excluded.key_last4, api_base = excluded.api_base, \
             version = site_gateways.version + 1, updated_at = excluded.updated_at \
             RETURNING {COLUMNS}"
        ))
        .bind(site_id)
        .bind(new.kind.to_owned())
        .bind(new.secret_sealed.to_owned())
        .bind(new.key_last4.to_owned())
        .bind(new.api_base.to_owned())
        .bind(now)
        .fetch_one(&self.pool)
        .await?;
        from_row(&row)
    }

    /// The site's gateway, if one is set.
    pub async fn site_gateway(&self, site_id: i64) -> Result<Option<SiteGateway>, StoreError> {
        let row = crate::db::query(&format!("SELECT {COLUMNS} FROM site_gateways WHERE site_id = $1"))
            .bind(site_id)
            .fetch_optional(&self.reads)
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The site's mode and gateway in one read (`None`: no such site).
    pub async fn site_gateway_choice(&self, site_id: i64) -> Result<Option<SiteGatewayChoice>, StoreError> {
        let row = crate::db::query(
            "SELECT s.mode AS mode, g.site_id AS site_id, g.kind AS kind, g.secret_sealed AS secret_sealed, \
             g.key_last4 AS key_last4, g.api_base AS api_base, g.version AS version, g.updated_at AS updated_at \
             FROM sites s LEFT JOIN site_gateways g ON g.site_id = s.id WHERE s.id = $1",
        )
        .bind(site_id)
        .fetch_optional(&self.reads)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let mode = Mode::parse(&row.try_get::<String, _>("mode")?)?;
        let gateway = match row.try_get::<Option<i64>, _>("site_id")? {
            Some(_) => Some(from_row(&row)?),
            None => None,
        };
        Ok(Some(SiteGatewayChoice { mode, gateway }))
    }

    /// Removes the site's gateway; answers whether one was set.
    pub async fn remove_site_gateway(&self, site_id: i64) -> Result<bool, StoreError> {
        let done =
            crate::db::query("DELETE FROM site_gateways WHERE site_id = $1").bind(site_id).execute(&self.pool).await?;
        Ok(done.rows_affected() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::both_backends;
    use crate::{NewSite, Plan};

    #[tokio::test]
    async fn set_replace_read_and_remove() {
        for store in both_backends("site_gateways").await {
            let new = NewSite {
                name: "acme".into(),
                mode: Mode::Production,
                plan: Plan::Core,
                credit_memos: false,
                contact: None,
            };
            let (site, _) = store.create_site(&new, 100).await.expect("site");
            let choice = store.site_gateway_choice(site.id).await.expect("read").expect("site");
            assert_eq!((choice.mode, choice.gateway), (Mode::Production, None));
            let set = NewSiteGateway {
                kind: "stripe",
                secret_sealed: "sealed-1",
                key_last4: "abcd",
                api_base: "https://api.stripe.com",
            };
            let first = store.set_site_gateway(site.id, &set, 200).await.expect("set");
            assert_eq!((first.version, first.kind.as_str(), first.updated_at), (1, "stripe", 200));
            let second = store
                .set_site_gateway(site.id, &NewSiteGateway { secret_sealed: "sealed-2", key_last4: "wxyz", ..set }, 300)
                .await
                .expect("replace");
            assert_eq!(
                (second.version, second.secret_sealed.as_str(), second.key_last4.as_str()),
                (2, "sealed-2", "wxyz")
            );
            let choice = store.site_gateway_choice(site.id).await.expect("read").expect("site");
            assert_eq!(choice.gateway, Some(second.clone()));
            assert_eq!(store.site_gateway(site.id).await.expect("read"), Some(second));
            assert!(store.remove_site_gateway(site.id).await.expect("remove"));
            assert!(!store.remove_site_gateway(site.id).await.expect("remove again"));
            assert_eq!(store.site_gateway(site.id).await.expect("read"), None);
            assert!(store.site_gateway_choice(-1).await.expect("read").is_none());
        }
    }
}
