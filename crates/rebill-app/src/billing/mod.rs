//! Invoices and what is charged on them: making invoices of engine lines, one-off lines and
//! pending adjustments with their discounts, charging them to the stored payment method and
//! recording the outcome ([`invoicing`]); an account's one-off charges and credits
//! ([`adjustments`]) and one-off transactions ([`transactions`]); reading accounts, invoices,
//! subscriptions and payments ([`queries`]); an invoice's PDF ([`documents`]).
//!
//! Owns: the invoice and its first collection. Must not decide what follows a settled invoice
//! (that is [`crate::collection`]) or give money back ([`crate::money_back`]), and must not
//! change a subscription. Names [`crate::customers`], [`crate::catalog`] and
//! [`crate::platform`].

pub mod adjustments;
pub mod documents;
pub mod invoicing;
pub mod queries;
pub mod transactions;
