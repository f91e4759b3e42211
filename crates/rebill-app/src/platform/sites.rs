//! The sites themselves, for what runs outside the API's protocol layers: authenticating a
//! private key (the sandbox clock control), and the demo checkout page's sandbox site and the
//! key it calls the API with.

use rebill_store::{ApiKey, Mode, Site, StoreError};

use crate::Services;

/// Why no site was found.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    /// The private key is unknown, or no longer valid.
    #[error("the private key is not valid")]
    UnknownKey,
    /// The service has no sandbox site.
    #[error("no sandbox site")]
    NoSandboxSite,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The site and key of the private key `key`, valid now on the service clock.
pub async fn authenticate(services: &Services, key: &str) -> Result<(Site, ApiKey), SiteError> {
    services.store.authenticate(key, services.clock.now()).await?.ok_or(SiteError::UnknownKey)
}

/// The first sandbox site (the oldest).
pub async fn first_sandbox(services: &Services) -> Result<Site, SiteError> {
    services.store.sites().await?.into_iter().find(|s| s.mode == Mode::Sandbox).ok_or(SiteError::NoSandboxSite)
}

/// A private key of `site` that is valid now and may write, if it has one.
pub async fn writing_key(services: &Services, site: &Site) -> Result<Option<ApiKey>, SiteError> {
    let now = services.clock.now();
    Ok(services.store.keys(site).await?.into_iter().find(|k| k.active_at(now) && !k.read_only))
}

impl From<SiteError> for crate::platform::error::AppError {
    fn from(e: SiteError) -> Self {
        match e {
            SiteError::UnknownKey => Self::refused("key", "invalid", e.to_string()),
            SiteError::NoSandboxSite => Self::NotFound(crate::platform::error::Missing {
                resource: "Site",
                key: "mode",
                value: "sandbox".to_owned(),
            }),
            SiteError::Store(e) => e.into(),
        }
    }
}
