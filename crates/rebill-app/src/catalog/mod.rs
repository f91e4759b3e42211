//! What a site sells and at what price: plans and their add-ons ([`plans`]) and coupons with
//! their redemptions ([`coupons`]).
//!
//! Owns: the catalogue's rows and the rules of a coupon (its terms, states, what it applies to,
//! redeeming and removing it). Must not invoice, collect or change a subscription: invoicing
//! reads coupons to discount an invoice ([`crate::billing`]), subscriptions and purchases redeem
//! them, never the other way round. Names only [`crate::platform`].

pub mod coupons;
pub mod plans;
