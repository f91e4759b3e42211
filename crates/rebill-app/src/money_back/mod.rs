//! Money given back: refunds of paid invoices as credit, through the gateway or outside it, and
//! credit paid back to cards ([`refunds`]); write-offs of failed charge invoices
//! ([`write_offs`]); voiding a credit invoice and reading what credits what
//! ([`credit_invoices`]).
//!
//! Owns: every amount that leaves the merchant. Must not make charge invoices or collect them.
//! Names [`crate::subscriptions`] (a refund may terminate one), [`crate::billing`] and
//! [`crate::platform`].

pub mod credit_invoices;
pub mod refunds;
pub mod write_offs;
