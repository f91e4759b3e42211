//! Selling beyond a plan: purchases (an account, subscriptions, one-off charges and a gift card
//! on one invoice paid by one transaction, [`purchases`]) and gift cards (products, purchases,
//! delivery, redemption, [`gift_cards`]).
//!
//! Owns: the compositions a checkout makes of the capabilities below. Must not be named by any
//! of them. Names [`crate::subscriptions`], [`crate::billing`], [`crate::customers`],
//! [`crate::catalog`] and [`crate::platform`].

pub mod gift_cards;
pub mod purchases;
