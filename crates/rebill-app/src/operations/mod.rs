//! What runs the use cases and tells the world about them: the scheduler of due jobs
//! ([`scheduler`]), a sandbox site's clock ([`clock`]), the push notifications of domain events
//! ([`notifications`]) and the webhook endpoints they go to ([`webhooks`]), the service's health
//! for operators ([`health`]), and the test harness (`testing`, feature `testing`).
//!
//! Owns: when work runs and who hears of it. Must not hold a business rule of its own: a job
//! runs a capability's use case, a notification reads what a capability wrote. Names every
//! other capability; none names it.

pub mod clock;
pub mod health;
pub mod notifications;
pub mod scheduler;
#[cfg(feature = "testing")]
pub mod testing;
pub mod webhooks;
