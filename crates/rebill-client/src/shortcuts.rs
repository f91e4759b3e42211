//! Hand-written shortcuts over generated endpoint methods, for requests whose document holds a
//! single value.

use rebill_models::Subscription;

use crate::{Error, Subscriptions};

impl Subscriptions {
    /// Pauses the subscription for `cycles` billing cycles from its next renewal (0 cancels a
    /// scheduled pause): [`Subscriptions::pause`] with `<remaining_pause_cycles>` (API 2.11).
    pub async fn pause_cycles(&self, uuid: &str, cycles: i64) -> Result<Subscription, Error> {
        let body = Subscription { remaining_pause_cycles: Some(cycles), ..Subscription::default() };
        self.pause(uuid, &body).await
    }
}
