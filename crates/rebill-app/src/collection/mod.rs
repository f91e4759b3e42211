//! Getting an open invoice settled after the call that made it: dunning retries, marking paid
//! or failed and collecting now ([`settlement`]), payments made outside rebill
//! ([`offline_payments`]), and what a settled invoice sets off — its subscriptions recover or
//! expire, a failed charge invoice is written off ([`reactions`]) — and the comparison of what
//! rebill recorded with what moved at the gateway ([`reconciliation`]).
//!
//! Owns: the path from an invoice's outcome to its consequences. Must not make invoices (that
//! is [`crate::billing`]). Names [`crate::money_back`], [`crate::subscriptions`],
//! [`crate::billing`] and [`crate::platform`].

pub mod offline_payments;
pub mod reactions;
pub mod reconciliation;
pub mod settlement;
