//! The shared ground every capability stands on: typed errors and the umbrella [`AppError`]
//! ([`error`]), the [`Context`](context::Context) of an operation, ISO 8601 instants
//! ([`instant`]), the domain values adapters name ([`model`]), domain events ([`events`]) and
//! job outcomes ([`jobs`]), the catalogue of exported metrics ([`metrics`]), the payment gateway of each site ([`gateways`]) and what a gateway's
//! answer records ([`transaction_records`]), a subscription's stored documents
//! ([`subscription_documents`]), sites and keys outside the API's layers ([`sites`]) and the
//! client-side library's tokens ([`tokens`]).
//!
//! Owns: nothing a merchant would call a business operation; every module here is named by
//! several capabilities. Must not name any other capability of this crate: it is the bottom of
//! the directions in `tests/modules.rs`.
//!
//! [`AppError`]: error::AppError

pub mod context;
pub mod error;
pub mod events;
pub mod gateways;
pub mod instant;
pub mod jobs;
pub mod metrics;
pub mod model;
pub mod sites;
pub mod subscription_documents;
pub mod tokens;
pub mod transaction_records;
