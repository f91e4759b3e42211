//! The billing domain of rebill, free of I/O: the store persists its results and the service
//! exposes them, but every rule about cards, gateway outcomes, billing periods, proration and
//! invoice amounts lives here, unit- and property-tested.
//!
//! - [`card`]: card numbers (Luhn, brand, first six / last four), expiry checks, bank accounts.
//! - [`gateway`]: the `Gateway` trait and the sandbox gateway (purchases, verifications, refunds,
//!   voids and CVV checks of stored cards, by test card and ACH number). Purchases, refunds and
//!   voids carry an idempotency key.
//! - [`errors`]: the transaction error table (code, category, messages) shipped as data.
//! - [`vault`]: encryption at rest (AES-256-GCM) of the card data a token holds, and of the other
//!   secrets the service keeps sealed (gateway keys, webhook secrets).
//! - [`period`]: billing intervals and period arithmetic.
//! - [`proration`]: prorating amounts over partial periods.
//! - [`invoice`]: what should be billed for a subscription, the difference to what was billed
//!   (recompute and diff), and drafting an invoice (one currency, totals).
//! - [`lifecycle`]: subscription states and the transitions between them (pause, resume, change
//!   now or at renewal, cancel, reactivate, terminate, postpone).
//! - [`balance`]: an account's balance per currency from its open invoices.
//! - [`states`]: the invoice and transaction state machines, whose transitions the store's
//!   compare-and-set writes use.
//! - [`collection`]: the collection policy, the dunning schedule of retries and due dates.
//! - [`settlement`]: when a transaction settles, and whether money goes back by a void or a refund.
//! - [`refund`]: the arithmetic of refunds (the split between credit, gateway and money paid
//!   outside, units, proration, amounts spread over lines, the tax share), to the cent.
//! - [`discount`]: coupon discounts (which lines a redemption discounts and by how much, when a
//!   temporal redemption lapses, unique-code templates), to the cent.
//!
//! Only what the service runs lives here: the property and story tests (`tests/`) fold whole
//! subscription histories through [`lifecycle::create`], [`lifecycle::advance_to`] and
//! [`lifecycle::apply`] and bill them with [`invoice::diff`], as the service does.

pub mod balance;
pub mod card;
pub mod collection;
pub mod discount;
pub mod errors;
pub mod gateway;
pub mod invoice;
pub mod lifecycle;
pub mod period;
pub mod proration;
pub mod reconcile;
pub mod refund;
pub mod settlement;
pub mod states;
pub mod vault;
