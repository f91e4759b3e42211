//! The customers of a site: accounts ([`accounts`]), their payment methods (billing info read,
//! verified and saved, [`payment_methods`]; the security-code check of a stored card, [`cvv`])
//! and their shipping addresses ([`shipping_addresses`]).
//!
//! Owns: who is billed and how they pay. Must not invoice or collect: a payment method is
//! verified through the site's gateway and recorded with [`crate::platform::transaction_records`],
//! never through [`crate::billing`]. Names only [`crate::platform`].

pub mod accounts;
pub mod cvv;
pub mod payment_methods;
pub mod shipping_addresses;
