//! An account's balance (`GET /v2/accounts/:code/balance`): what it owes in each of the site's
//! currencies and whether any of it is past due.
//!
//! Today the balance is what the account's open charge invoices (pending, processing or past
//! due) still owe; credit invoices join it, negative, with credit memos. Every currency of the
//! site is listed, zeros included, as the original does (`<USD>3000</USD><EUR>0</EUR>`): the
//! site's currencies are those its plans are priced in, together with every currency the account
//! was invoiced in; a site without either lists [`DEFAULT_CURRENCY`] alone.

use std::collections::BTreeMap;

/// The currency listed when neither the site nor the account names one.
pub const DEFAULT_CURRENCY: &str = "USD";

/// An account's invoices in one currency, as the store sums them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrencyInvoices {
    pub currency: String,
    /// What its open invoices still owe (the sum of their balances).
    pub open_in_cents: i64,
    /// Whether one of them is past due.
    pub past_due: bool,
}

/// The account's balance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountBalance {
    /// Whether an invoice in any currency is past due.
    pub past_due: bool,
    /// Balance per currency, ordered by currency code.
    pub balance_in_cents: Vec<(String, i64)>,
}

/// The balance of an account whose invoices sum to `invoices`, on a site selling in
/// `site_currencies`. Currency codes are compared in upper case.
pub fn account_balance<'a>(
    site_currencies: impl IntoIterator<Item = &'a str>,
    invoices: &[CurrencyInvoices],
) -> AccountBalance {
    let mut balances: BTreeMap<String, i64> =
        site_currencies.into_iter().map(|c| (c.to_ascii_uppercase(), 0)).collect();
    for i in invoices {
        let entry = balances.entry(i.currency.to_ascii_uppercase()).or_insert(0);
        *entry = entry.saturating_add(i.open_in_cents);
    }
    if balances.is_empty() {
        balances.insert(DEFAULT_CURRENCY.to_owned(), 0);
    }
    AccountBalance { past_due: invoices.iter().any(|i| i.past_due), balance_in_cents: balances.into_iter().collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(currency: &str, cents: i64, past_due: bool) -> CurrencyInvoices {
        CurrencyInvoices { currency: currency.into(), open_in_cents: cents, past_due }
    }

    fn pairs(b: &AccountBalance) -> Vec<(&str, i64)> {
        b.balance_in_cents.iter().map(|(c, v)| (c.as_str(), *v)).collect()
    }

    #[test]
    fn nothing_known_lists_the_default_currency_at_zero() {
        let b = account_balance([], &[]);
        assert_eq!((b.past_due, pairs(&b)), (false, vec![("USD", 0)]));
    }

    #[test]
    fn every_site_currency_is_listed_zeros_included() {
        let b = account_balance(["USD", "EUR"], &[open("USD", 3000, false)]);
        assert_eq!((b.past_due, pairs(&b)), (false, vec![("EUR", 0), ("USD", 3000)]));
    }

    #[test]
    fn an_invoiced_currency_the_site_does_not_price_in_is_listed_too() {
        let b = account_balance(["usd"], &[open("GBP", 250, true), open("USD", 0, false)]);
        assert_eq!((b.past_due, pairs(&b)), (true, vec![("GBP", 250), ("USD", 0)]));
    }

    #[test]
    fn past_due_in_any_currency_makes_the_account_past_due() {
        let b = account_balance(["USD", "EUR"], &[open("USD", 0, false), open("EUR", 900, true)]);
        assert!(b.past_due);
        assert_eq!(pairs(&b), vec![("EUR", 900), ("USD", 0)]);
    }

    #[test]
    fn sums_saturate_instead_of_overflowing() {
        let b = account_balance([], &[open("USD", i64::MAX, false), open("usd", 1, false)]);
        assert_eq!(pairs(&b), vec![("USD", i64::MAX)]);
    }
}
