//! Webhook endpoints of a site (`rebill webhooks add/list/remove`): where its push
//! notifications go. An endpoint is an http or https URL (checked when it is added), optional
//! HTTP Basic credentials, the notification kinds it takes (all when none are named; names from
//! [`rebill_webhooks::kinds`]) and its Standard Webhooks signing secret, made here from 32
//! random bytes, shown once when the endpoint is added and stored sealed with the vault key
//! (context [`secret_context`]), like the HTTP password.

use rebill_store::webhooks::{Endpoint, EndpointError, NewEndpoint};
use rebill_store::{Site, StoreError};
use rebill_webhooks::kinds::kind;
use rebill_webhooks::signing::{SECRET_BYTES, Secret};

use crate::Services;

/// The vault context of a site's endpoint secrets and passwords.
pub fn secret_context(site_id: i64) -> Vec<u8> {
    format!("webhook-endpoint:{site_id}").into_bytes()
}

/// Why an endpoint was refused.
#[derive(Debug, thiserror::Error)]
pub enum WebhookEndpointError {
    #[error("the URL must be an http:// or https:// URL with a host, without credentials or a fragment: {0}")]
    InvalidUrl(String),
    #[error("unknown notification kind `{0}`")]
    UnknownKind(String),
    #[error("an HTTP password needs an HTTP user")]
    PasswordWithoutUser,
    #[error("the site already has {} webhook endpoints", rebill_store::webhooks::MAX_ENDPOINTS)]
    Limit,
    #[error("no webhook endpoint {0}")]
    NotFound(i64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<EndpointError> for WebhookEndpointError {
    fn from(e: EndpointError) -> Self {
        match e {
            EndpointError::Limit => WebhookEndpointError::Limit,
            EndpointError::Store(e) => WebhookEndpointError::Store(e),
        }
    }
}

/// An endpoint to add, as an operator gives it.
#[derive(Debug, Clone, Default)]
pub struct EndpointRequest<'a> {
    pub url: &'a str,
    pub http_user: Option<&'a str>,
    pub http_password: Option<&'a str>,
    /// Kind names, with or without their `_notification` suffix; empty: every kind.
    pub kinds: &'a [String],
}

/// The URL of an endpoint, normalised, or why it is refused.
fn checked_url(text: &str) -> Result<String, WebhookEndpointError> {
    let invalid = || WebhookEndpointError::InvalidUrl(text.trim().to_owned());
    let url = url::Url::parse(text.trim()).map_err(|_| invalid())?;
    let fine = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some_and(|h| !h.is_empty())
        && url.username().is_empty()
        && url.password().is_none()
        && url.fragment().is_none();
    if !fine {
        return Err(invalid());
    }
    Ok(url.to_string())
}

/// Adds an endpoint to the site; answers it with its signing secret (`whsec_…`), which is never
/// shown again.
pub async fn add_endpoint(
    services: &Services,
    site: &Site,
    request: &EndpointRequest<'_>,
    now: i64,
) -> Result<(Endpoint, String), WebhookEndpointError> {
    let url = checked_url(request.url)?;
    let kinds = request
        .kinds
        .iter()
        .filter(|k| !k.trim().is_empty())
        .map(|k| kind(k).map(str::to_owned).ok_or_else(|| WebhookEndpointError::UnknownKind(k.trim().to_owned())))
        .collect::<Result<Vec<_>, _>>()?;
    let user = request.http_user.map(str::trim).filter(|u| !u.is_empty());
    let password = request.http_password.map(|p| p.trim_end_matches(['\n', '\r'])).filter(|p| !p.is_empty());
    if password.is_some() && user.is_none() {
        return Err(WebhookEndpointError::PasswordWithoutUser);
    }
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Invalid(format!("no random source for a secret: {e}")))?;
    let secret = Secret::from_bytes(&bytes).reveal();
    let context = secret_context(site.id);
    let secret_sealed = services.vault.seal_text(&secret, &context);
    let password_sealed = password.map(|p| services.vault.seal_text(p, &context));
    let new = NewEndpoint {
        url: &url,
        http_user: user,
        http_password_sealed: password_sealed.as_deref(),
        kinds: (!kinds.is_empty()).then_some(kinds.as_slice()),
        secret_sealed: &secret_sealed,
    };
    let endpoint = services.store.add_webhook_endpoint(site.id, &new, now).await?;
    Ok((endpoint, secret))
}

/// The live endpoints of the site (of every site with `None`), oldest first.
pub async fn endpoints(services: &Services, site: Option<&Site>) -> Result<Vec<Endpoint>, StoreError> {
    services.store.webhook_endpoints(site.map(|s| s.id)).await
}

/// Removes the endpoint `id` (notifications stop going to it); answers it.
pub async fn remove_endpoint(services: &Services, id: i64, now: i64) -> Result<Endpoint, WebhookEndpointError> {
    services.store.remove_webhook_endpoint(id, now).await?.ok_or(WebhookEndpointError::NotFound(id))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rebill_store::testing::both_backends;
    use rebill_store::{Mode, NewSite, Plan};

    use super::*;
    use crate::SystemClock;

    #[test]
    fn urls_are_checked() {
        for good in ["https://example.com/hooks", "http://127.0.0.1:8080/h?x=1", "HTTPS://Example.com"] {
            assert!(checked_url(good).is_ok(), "{good}");
        }
        for bad in
            ["", "example.com/h", "ftp://example.com", "https://user:pw@example.com/", "https://e.com/#x", "http://"]
        {
            assert!(matches!(checked_url(bad), Err(WebhookEndpointError::InvalidUrl(_))), "{bad}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn endpoints_keep_their_secrets_sealed() {
        for store in both_backends("app_webhooks").await {
            let services = Services::new(store.clone(), Arc::new(SystemClock));
            let new = NewSite {
                name: "acme".into(),
                mode: Mode::Sandbox,
                plan: Plan::Core,
                credit_memos: false,
                contact: None,
            };
            let (site, _) = store.create_site(&new, 100).await.expect("site");
            let kinds = vec!["new_account".to_owned(), "paid_charge_invoice_notification".to_owned()];
            let request = EndpointRequest {
                url: " https://example.com/hooks ",
                http_user: Some("hooks"),
                http_password: Some("pa55word\n"),
                kinds: &kinds,
            };
            let (endpoint, secret) = add_endpoint(&services, &site, &request, 200).await.expect("add");
            assert!(secret.starts_with("whsec_"), "{secret}");
            assert!(Secret::parse(&secret).is_ok());
            assert_eq!(endpoint.url, "https://example.com/hooks");
            assert_eq!(
                endpoint.kinds,
                Some(vec!["new_account_notification".to_owned(), "paid_charge_invoice_notification".to_owned()])
            );
            let context = secret_context(site.id);
            assert!(!endpoint.secret_sealed.contains(&secret[6..]));
            assert_eq!(services.vault.open_text(&endpoint.secret_sealed, &context).expect("open"), secret);
            let password = endpoint.http_password_sealed.as_deref().expect("a password");
            assert!(!password.contains("pa55word"));
            assert_eq!(services.vault.open_text(password, &context).expect("open"), "pa55word");

            let refused = |kinds: &'static [&'static str], url: &'static str, user: Option<&'static str>| {
                let kinds: Vec<String> = kinds.iter().map(|k| (*k).to_owned()).collect();
                let services = services.clone();
                let site = site.clone();
                async move {
                    let request = EndpointRequest { url, http_user: user, http_password: Some("p"), kinds: &kinds };
                    add_endpoint(&services, &site, &request, 300).await.expect_err("refused")
                }
            };
            assert!(
                matches!(refused(&["nope"], "https://e.com", Some("u")).await, WebhookEndpointError::UnknownKind(k) if k == "nope")
            );
            assert!(matches!(refused(&[], "mailto:x@e.com", Some("u")).await, WebhookEndpointError::InvalidUrl(_)));
            assert!(matches!(refused(&[], "https://e.com", None).await, WebhookEndpointError::PasswordWithoutUser));
            assert_eq!(endpoints(&services, Some(&site)).await.expect("list").len(), 1, "refusals store nothing");

            remove_endpoint(&services, endpoint.id, 400).await.expect("remove");
            assert!(matches!(
                remove_endpoint(&services, endpoint.id, 400).await,
                Err(WebhookEndpointError::NotFound(_))
            ));
            assert!(endpoints(&services, None).await.expect("list").is_empty());
        }
    }
}
