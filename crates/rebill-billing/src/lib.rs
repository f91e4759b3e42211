//! The billing domain of rebill, free of I/O: the store persists its results and the service
//! exposes them, but every rule about cards, gateway outcomes, billing periods, proration and
//! invoice amounts lives here, unit- and property-tested.
//!
//! - [`card`]: card numbers (Luhn, brand, first six / last four), expiry checks, bank accounts.
//! - [`gateway`]: the `Gateway` trait and the sandbox gateway (purchases, refunds and voids by test card and
//!   ACH number).
//! - [`errors`]: the transaction error table (code, category, messages) shipped as data.
//! - [`vault`]: encryption at rest of card numbers held for a token.
//! - [`period`]: billing intervals and period arithmetic.
//! - [`proration`]: prorating amounts over partial periods.
//! - [`invoice`]: what should be billed for a subscription, and the difference to what was billed.
//! - [`lifecycle`]: subscription states and the transitions between them.
//! - [`balance`]: an account's balance per currency from its open invoices.
//! - [`states`]: the invoice and transaction state machines.
//! - [`collection`]: the collection policy, the dunning schedule of retries and due dates.
//! - [`settlement`]: when a transaction settles, and whether money goes back by a void or a refund.

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
pub mod refund;
pub mod settlement;
pub mod states;
pub mod vault;
