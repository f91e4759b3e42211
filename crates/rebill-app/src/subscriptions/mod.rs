//! Subscriptions: their lifecycle (create, preview, change, cancel, terminate, pause, resume,
//! postpone, reactivate), catching up with what became due, invoicing their charges and their
//! scheduled jobs ([`lifecycle`]), and plain renewals due together run in batches
//! ([`renewals`]).
//!
//! Owns: the subscription documents' changes and the invoices they ask for. Must not collect an
//! invoice after its first attempt or give money back; invoices are made through
//! [`crate::billing`]. Names [`crate::billing`], [`crate::customers`], [`crate::catalog`] and
//! [`crate::platform`].

pub mod lifecycle;
pub mod renewals;
