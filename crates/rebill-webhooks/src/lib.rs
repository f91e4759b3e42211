//! The rules of rebill's webhooks, without I/O (the use cases and the sender share them):
//!
//! - [`kinds`]: the notification kinds rebill sends.
//! - [`payload`]: the XML body of a notification (the declaration, the bare root naming the kind,
//!   the carried resources in their notification shapes, `nil="true"` nulls, no hrefs).
//! - [`signing`]: the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`,
//!   `webhook-signature`: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body` with the endpoint's
//!   `whsec_` secret), and their verification as a receiver does it.
//! - [`schedule`]: when a failed delivery is tried again (`10 + x·2^(x+5)` seconds after retry
//!   `x`, ten retries, scaled for tests and staging).
//!
//! Decisions and the delivery rules: `docs/webhooks.md`.

pub mod kinds;
pub mod payload;
pub mod schedule;
pub mod signing;
