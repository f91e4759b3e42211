//! The service's health as operators see it: whether the database answers and holds every
//! migration this binary has, and what the metrics read from the database when scraped. What is
//! wrong goes to the log, never to the answer.

use crate::Services;

/// Whether the database answers as a primary (not a standby) with every migration applied (the
/// reason when not is logged).
pub async fn database_ready(services: &Services) -> bool {
    match services.store.ready().await {
        Ok(true) => true,
        Ok(false) => {
            tracing::warn!("not ready: the database is a standby, or lacks migrations this binary has");
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "not ready: the database does not answer");
            false
        }
    }
}

/// The work still to do and the database pools, read for the metrics when they are scraped
/// ([`rebill_store::gauges`]): webhook deliveries waiting, the scheduler's lag, connections.
pub async fn gauges(services: &Services) -> Result<rebill_store::gauges::Gauges, rebill_store::StoreError> {
    services.store.gauges(services.clock.now()).await
}
