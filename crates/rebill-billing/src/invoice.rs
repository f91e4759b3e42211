//! What should be billed for a subscription, the difference to what was billed, and invoice
//! totals.
//!
//! Billing is *recompute and diff*: the line items a subscription should have produced (from the
//! transitions of [`crate::lifecycle`]) are compared with the items already billed, and only the
//! difference is billed ([`diff`]). Billing the result and running again adds nothing; a changed
//! expectation (a backdated plan change, a termination with refund) yields the prorated repair
//! charges and credits.
//!
//! # Line items and coverage
//!
//! Every recurring [`LineItem`] pays (or, as a credit, takes back) one *rate* — an item of a
//! subscription at a unit amount and quantity — for a span `[start, end)` of one billing period.
//! Items are identified by their [`OriginKey`] (subscription, item, period) and rate. The
//! diff works on coverage, not on money: per key and rate it counts, for every instant of the
//! period, how many charges minus credits cover it on each side, and bills the difference as
//! charges (missing coverage) or credits (coverage that should not be there). Amounts are then
//! computed with [`crate::proration::span_amount`] over the period, so the pieces of a period
//! always add up to its price exactly.
//!
//! A span that reaches its period's end is read as "to the end of the period", so moving a
//! renewal date (postpone) does not turn the stretched period into a new charge: a billed item
//! whose period end is one the expected items of its key carry belongs to that period, whose end
//! is the one of the last expected item for the key. A billed item with a period end the expected
//! items do not know belongs to another period that happens to start at the same instant (a
//! history edit changed the schedule): it is repaired over its own period, so a credit gives back
//! exactly what was charged. One-time items (setup fees) are counted.
//!
//! Money is exact (billing the difference and the expected items cost the same to the cent) as
//! long as no period changed length after it was billed; when a postponed period is re-billed
//! after a history edit, the repairs are priced over the stretched period.
//!
//! # How to use
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use rebill_billing::invoice::{self, InvoiceTotals};
//! use rebill_billing::lifecycle::{self, NewSubscription, SubscriptionTerms, Timeframe};
//! use rebill_billing::period::Interval;
//!
//! let jan1 = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
//! let terms = SubscriptionTerms::new("basic", "USD", Interval::months(1), 3000);
//! let created = lifecycle::create(NewSubscription::new("sub-1", terms), jan1).unwrap();
//!
//! // January is billed when the subscription starts.
//! let billed = invoice::diff(&created.lines, &[]).unwrap();
//! assert_eq!(billed.iter().map(|l| l.total_in_cents).sum::<i64>(), 3000);
//! // Billing the same lines again bills nothing.
//! assert!(invoice::diff(&created.lines, &billed).unwrap().is_empty());
//!
//! // A change to a $60 plan on Jan 16: a credit for the unused 16/31 of the old price and a
//! // charge for 16/31 of the new one.
//! let jan16 = Utc.with_ymd_and_hms(2025, 1, 16, 0, 0, 0).unwrap();
//! let pro = SubscriptionTerms::new("pro", "USD", Interval::months(1), 6000);
//! let changed = lifecycle::change(&created.subscription, pro, Timeframe::Now, jan16).unwrap();
//! let expected: Vec<_> = created.lines.iter().chain(&changed.lines).cloned().collect();
//! let repair = invoice::diff(&expected, &billed).unwrap();
//! let amounts: Vec<i64> = repair.iter().map(|l| l.total_in_cents).collect();
//! assert_eq!(amounts, vec![-1548, 3097]);
//!
//! let totals = InvoiceTotals::of_lines(&repair, 0, None, 0).unwrap();
//! assert_eq!(totals.total_in_cents, 1549);
//! ```

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::lifecycle::SubscriptionTerms;
use crate::period::Period;
use crate::proration::{self, Proration, ProrationError};

/// Why an invoice computation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvoiceError {
    /// An amount or span could not be prorated (a span outside its period, an amount overflow).
    #[error(transparent)]
    Proration(#[from] ProrationError),
    /// A tax rate is not a non-negative decimal with at most six decimal places.
    #[error("invalid tax rate {0:?}")]
    InvalidTaxRate(String),
    /// A discount must not be negative.
    #[error("a discount must not be negative")]
    NegativeDiscount,
    /// A total does not fit in 64-bit cents.
    #[error("amount out of range")]
    Overflow,
    /// An invoice needs at least one line.
    #[error("nothing to invoice")]
    NothingToInvoice,
    /// Lines in more than one currency cannot share an invoice.
    #[error("line items in several currencies ({0}, {1})")]
    MixedCurrencies(String, String),
}

/// What created an invoice; the names are the schema's `invoice_origin` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvoiceOrigin {
    /// A new subscription or purchase.
    Purchase,
    /// A renewal, the end of a trial or a pause, or a resume.
    Renewal,
    /// A plan change with `timeframe=now`.
    ImmediateChange,
    /// A termination with a refund.
    Termination,
    /// An invoice refund.
    Refund,
    /// A write-off.
    WriteOff,
    /// A credit.
    Credit,
    /// A gift card.
    GiftCard,
}

impl InvoiceOrigin {
    /// The schema name, e.g. `immediate_change`.
    pub fn name(self) -> &'static str {
        match self {
            InvoiceOrigin::Purchase => "purchase",
            InvoiceOrigin::Renewal => "renewal",
            InvoiceOrigin::ImmediateChange => "immediate_change",
            InvoiceOrigin::Termination => "termination",
            InvoiceOrigin::Refund => "refund",
            InvoiceOrigin::WriteOff => "write_off",
            InvoiceOrigin::Credit => "credit",
            InvoiceOrigin::GiftCard => "gift_card",
        }
    }
}

/// Which part of a subscription an item bills.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "item", rename_all = "snake_case")]
pub enum ItemRef {
    /// The plan itself.
    Plan {
        /// The plan's code.
        plan_code: String,
    },
    /// One add-on.
    AddOn {
        /// The add-on's code.
        add_on_code: String,
    },
    /// The one-time setup fee of a plan, charged at activation.
    SetupFee {
        /// The plan's code.
        plan_code: String,
    },
}

impl ItemRef {
    /// Whether the item is billed once rather than per period.
    pub fn is_one_time(&self) -> bool {
        matches!(self, ItemRef::SetupFee { .. })
    }

    /// The line kind of a charge for this item.
    pub fn charge_kind(&self) -> LineKind {
        match self {
            ItemRef::Plan { .. } => LineKind::Plan,
            ItemRef::AddOn { .. } => LineKind::AddOn,
            ItemRef::SetupFee { .. } => LineKind::SetupFee,
        }
    }

    /// The code of the plan or add-on.
    pub fn code(&self) -> &str {
        match self {
            ItemRef::Plan { plan_code } | ItemRef::SetupFee { plan_code } => plan_code,
            ItemRef::AddOn { add_on_code } => add_on_code,
        }
    }
}

/// Identity of a billed item: which subscription, which item, which period (its start and the
/// end it had when it opened; the activation instant for a setup fee). A credit carries the key
/// of the item it takes back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OriginKey {
    /// The subscription's uuid.
    pub subscription: String,
    /// The item billed.
    pub item: ItemRef,
    /// Start of the billing period the item belongs to.
    pub period_start: DateTime<Utc>,
    /// End of that period as scheduled when it opened. It names the period (two periods of
    /// different schedules may start at the same instant) and does not move when the renewal is
    /// postponed; [`LineItem::period_end`] has the end in force when the line was made.
    pub period_end: DateTime<Utc>,
}

/// Kind of a line item; [`LineKind::origin_name`] gives the adjustment `origin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineKind {
    /// A charge for the plan.
    Plan,
    /// A charge for an add-on.
    AddOn,
    /// A setup fee.
    SetupFee,
    /// A credit taking back (part of) an earlier charge; the key says which.
    Credit,
}

impl LineKind {
    /// The adjustment `origin` value (`plan`, `add_on`, `setup_fee`, `credit`).
    pub fn origin_name(self) -> &'static str {
        match self {
            LineKind::Plan => "plan",
            LineKind::AddOn => "add_on",
            LineKind::SetupFee => "setup_fee",
            LineKind::Credit => "credit",
        }
    }

    /// The adjustment type (`charge` or `credit`).
    pub fn adjustment_type(self) -> &'static str {
        if self == LineKind::Credit { "credit" } else { "charge" }
    }
}

/// One charge or credit to put on an invoice (an adjustment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineItem {
    /// Plan, add-on, setup fee or credit.
    pub kind: LineKind,
    /// Subscription, item and period start; for a credit, those of the item credited.
    pub key: OriginKey,
    /// End of the item's period when the line was made (later than `key.period_end` after a
    /// postponement; equal to the start for a setup fee).
    pub period_end: DateTime<Utc>,
    /// First instant paid for (the adjustment's `start_date`).
    pub start: DateTime<Utc>,
    /// First instant no longer paid for (the adjustment's `end_date`; equal to `start` for a
    /// setup fee).
    pub end: DateTime<Utc>,
    /// ISO 4217 currency of the amounts.
    pub currency: String,
    /// Full-period price per unit; negative on credits.
    pub unit_amount_in_cents: i64,
    /// Number of units.
    pub quantity: u32,
    /// Amount of the line: the prorated `unit × quantity`, negative on credits.
    pub total_in_cents: i64,
    /// Fraction of the period paid for, when not the whole period.
    pub proration: Option<Proration>,
    /// Human description, e.g. `Plan gold` or `Credit: Add-on seats`.
    pub description: String,
}

impl LineItem {
    /// The billing period the item belongs to (`None` for one-time items).
    pub fn period(&self) -> Option<Period> {
        Period::new(self.key.period_start, self.period_end).ok()
    }

    /// Whether this is a credit.
    pub fn is_credit(&self) -> bool {
        self.kind == LineKind::Credit
    }
}

/// A recurring line for `span` of `period`, priced `unit × quantity` for the whole period.
pub(crate) fn recurring_line(
    key: OriginKey,
    period: Period,
    span: Period,
    currency: &str,
    unit: i64,
    quantity: u32,
    credit: bool,
) -> Result<LineItem, ProrationError> {
    let full = unit.checked_mul(i64::from(quantity)).ok_or(ProrationError::Overflow)?;
    let amount = proration::span_amount(full, period, span)?;
    let proration =
        (span != period).then_some(Proration { part_seconds: span.seconds(), whole_seconds: period.seconds() });
    Ok(LineItem {
        kind: if credit { LineKind::Credit } else { key.item.charge_kind() },
        description: describe(&key.item, credit),
        key,
        period_end: period.end,
        start: span.start,
        end: span.end,
        currency: currency.to_owned(),
        unit_amount_in_cents: signed(unit, credit)?,
        quantity,
        total_in_cents: signed(amount, credit)?,
        proration,
    })
}

/// A one-time line (setup fee) at `key.period_start`.
pub(crate) fn one_time_line(
    key: OriginKey,
    currency: &str,
    unit: i64,
    quantity: u32,
    credit: bool,
) -> Result<LineItem, ProrationError> {
    let full = unit.checked_mul(i64::from(quantity)).ok_or(ProrationError::Overflow)?;
    Ok(LineItem {
        kind: if credit { LineKind::Credit } else { key.item.charge_kind() },
        description: describe(&key.item, credit),
        period_end: key.period_start,
        start: key.period_start,
        end: key.period_start,
        key,
        currency: currency.to_owned(),
        unit_amount_in_cents: signed(unit, credit)?,
        quantity,
        total_in_cents: signed(full, credit)?,
        proration: None,
    })
}

/// The setup fee line of `terms`, charged at `at`.
pub(crate) fn setup_fee_line(
    subscription: &str,
    terms: &SubscriptionTerms,
    at: DateTime<Utc>,
) -> Result<LineItem, ProrationError> {
    let key = OriginKey {
        subscription: subscription.to_owned(),
        item: ItemRef::SetupFee { plan_code: terms.plan_code.clone() },
        period_start: at,
        period_end: at,
    };
    one_time_line(key, &terms.currency, terms.setup_fee_in_cents, 1, false)
}

/// Charges (or credits) for `span` of `period` (the period as it is now, named by its start and
/// `key_end`) at `terms`: one line for the plan and one per add-on; items whose full-period
/// amount is zero are left out.
pub(crate) fn segment_lines(
    subscription: &str,
    period: Period,
    key_end: DateTime<Utc>,
    span: Period,
    terms: &SubscriptionTerms,
    credit: bool,
) -> Result<Vec<LineItem>, ProrationError> {
    let key = |item| OriginKey {
        subscription: subscription.to_owned(),
        item,
        period_start: period.start,
        period_end: key_end,
    };
    let mut lines = Vec::new();
    if terms.unit_amount_in_cents != 0 && terms.quantity != 0 {
        let item = ItemRef::Plan { plan_code: terms.plan_code.clone() };
        lines.push(recurring_line(
            key(item),
            period,
            span,
            &terms.currency,
            terms.unit_amount_in_cents,
            terms.quantity,
            credit,
        )?);
    }
    for add_on in &terms.add_ons {
        if add_on.unit_amount_in_cents == 0 || add_on.quantity == 0 {
            continue;
        }
        let item = ItemRef::AddOn { add_on_code: add_on.add_on_code.clone() };
        lines.push(recurring_line(
            key(item),
            period,
            span,
            &terms.currency,
            add_on.unit_amount_in_cents,
            add_on.quantity,
            credit,
        )?);
    }
    Ok(lines)
}

fn describe(item: &ItemRef, credit: bool) -> String {
    let what = match item {
        ItemRef::Plan { plan_code } => format!("Plan {plan_code}"),
        ItemRef::AddOn { add_on_code } => format!("Add-on {add_on_code}"),
        ItemRef::SetupFee { plan_code } => format!("Setup fee for {plan_code}"),
    };
    if credit { format!("Credit: {what}") } else { what }
}

fn signed(amount: i64, credit: bool) -> Result<i64, ProrationError> {
    if credit { amount.checked_neg().ok_or(ProrationError::Overflow) } else { Ok(amount) }
}

/// Items that, added to `billed`, give the same coverage as `expected`: charges for what is
/// expected but not billed, credits for what is billed but not expected. Both slices may mix
/// subscriptions (an account's run) and come in any order. The result is ordered
/// by period start, credits before charges, then as the items first appear.
pub fn diff(expected: &[LineItem], billed: &[LineItem]) -> Result<Vec<LineItem>, InvoiceError> {
    // The period ends each key's expected items know, the last one being the period's end now.
    let mut known_ends: HashMap<&OriginKey, Vec<DateTime<Utc>>> = HashMap::new();
    for line in expected {
        known_ends.entry(&line.key).or_default().push(line.period_end);
    }
    // A line belongs to the expected period of its key when that period has known its end;
    // otherwise (a period of another schedule starting at the same instant) to its own period.
    let period_end_of = |line: &LineItem| match known_ends.get(&line.key) {
        Some(ends) if ends.contains(&line.period_end) => ends.last().copied().unwrap_or(line.period_end),
        _ => line.period_end,
    };

    // Group by key, period and rate, remembering the order of first appearance.
    let mut order: Vec<GroupKey<'_>> = Vec::new();
    let mut groups: HashMap<GroupKey<'_>, Vec<(i64, &LineItem)>> = HashMap::new();
    let sides = expected.iter().map(|l| (1i64, l)).chain(billed.iter().map(|l| (-1i64, l)));
    for (side, line) in sides {
        let group = GroupKey {
            key: &line.key,
            period_end: if line.key.item.is_one_time() { line.key.period_start } else { period_end_of(line) },
            unit: line.unit_amount_in_cents.unsigned_abs(),
            quantity: line.quantity,
            currency: &line.currency,
        };
        let sign = if line.is_credit() { -1 } else { 1 };
        let entry = groups.entry(group.clone()).or_default();
        if entry.is_empty() {
            order.push(group);
        }
        entry.push((side * sign, line));
    }

    let mut out = Vec::new();
    for group in order {
        let lines = groups.get(&group).map(Vec::as_slice).unwrap_or_default();
        let unit = i64::try_from(group.unit).map_err(|_| InvoiceError::Overflow)?;
        if group.key.item.is_one_time() {
            let net: i64 = lines.iter().map(|(weight, _)| weight).sum();
            for _ in 0..net.unsigned_abs() {
                out.push(one_time_line(group.key.clone(), group.currency, unit, group.quantity, net < 0)?);
            }
            continue;
        }
        let period_end = group.period_end;
        let period = Period::new(group.key.period_start, period_end).map_err(|_| ProrationError::EmptyPeriod)?;
        // Signed coverage spans, open ends stretched to the key's period end.
        let spans: Vec<(i64, DateTime<Utc>, DateTime<Utc>)> = lines
            .iter()
            .map(|(weight, line)| {
                let end = if line.end >= line.period_end { period.end } else { line.end };
                (*weight, line.start, end)
            })
            .filter(|(_, start, end)| start < end)
            .collect();
        let mut points: Vec<DateTime<Utc>> = spans.iter().flat_map(|(_, s, e)| [*s, *e]).collect();
        points.sort();
        points.dedup();
        // Runs of elementary intervals with the same non-zero difference.
        let mut run: Option<(i64, DateTime<Utc>, DateTime<Utc>)> = None;
        let mut runs = Vec::new();
        for pair in points.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let d: i64 = spans.iter().filter(|(_, s, e)| *s <= a && b <= *e).map(|(w, _, _)| w).sum();
            match &mut run {
                Some((rd, _, re)) if *rd == d && *re == a => *re = b,
                _ => {
                    if let Some(done) = run.take() {
                        runs.push(done);
                    }
                    run = Some((d, a, b));
                }
            }
        }
        runs.extend(run);
        for (d, start, end) in runs {
            for _ in 0..d.unsigned_abs() {
                out.push(recurring_line(
                    group.key.clone(),
                    period,
                    Period { start, end },
                    group.currency,
                    unit,
                    group.quantity,
                    d < 0,
                )?);
            }
        }
    }
    out.sort_by_key(|line| (line.key.period_start, !line.is_credit()));
    Ok(out)
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupKey<'a> {
    key: &'a OriginKey,
    period_end: DateTime<Utc>,
    unit: u64,
    quantity: u32,
    currency: &'a str,
}

/// A tax rate in parts per million (0.0875 = 87 500 ppm); no floats touch money.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct TaxRate {
    parts_per_million: u32,
}

impl TaxRate {
    /// A rate of `parts_per_million` / 1 000 000.
    pub const fn from_parts_per_million(parts_per_million: u32) -> Self {
        Self { parts_per_million }
    }

    /// Parses a decimal such as `0.0875` (at most six decimal places, not negative).
    pub fn parse(decimal: &str) -> Result<Self, InvoiceError> {
        let invalid = || InvoiceError::InvalidTaxRate(decimal.to_owned());
        let (whole, fraction) = decimal.split_once('.').unwrap_or((decimal, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() && fraction.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 6 {
            return Err(invalid());
        }
        let whole: u64 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| invalid())? };
        let mut micro: u64 = if fraction.is_empty() { 0 } else { fraction.parse().map_err(|_| invalid())? };
        for _ in fraction.len()..6 {
            micro *= 10;
        }
        let ppm = whole.checked_mul(1_000_000).and_then(|w| w.checked_add(micro)).ok_or_else(invalid)?;
        Ok(Self { parts_per_million: u32::try_from(ppm).map_err(|_| invalid())? })
    }

    /// The rate in parts per million.
    pub fn parts_per_million(self) -> u32 {
        self.parts_per_million
    }

    /// The tax on `amount`, rounded once, half-up on the magnitude.
    pub fn tax_on(self, amount: i64) -> Result<i64, InvoiceError> {
        let n = i128::from(amount) * i128::from(self.parts_per_million);
        let q = n / 1_000_000;
        let r = n % 1_000_000;
        let q = if 2 * r.abs() >= 1_000_000 { q + n.signum() } else { q };
        i64::try_from(q).map_err(|_| InvoiceError::Overflow)
    }
}

/// The amounts of an invoice (the names follow the 2.10+ meaning; the wire renames them per
/// version).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InvoiceTotals {
    /// Sum of the line totals.
    pub subtotal_before_discount_in_cents: i64,
    /// Discount applied (0 until coupons exist), never more than a positive subtotal.
    pub discount_in_cents: i64,
    /// Subtotal minus discount.
    pub subtotal_after_discount_in_cents: i64,
    /// Tax on the subtotal after discount (0 without a rate).
    pub tax_in_cents: i64,
    /// Subtotal after discount plus tax.
    pub total_in_cents: i64,
    /// What has been paid or credited against the invoice.
    pub paid_in_cents: i64,
    /// What remains to collect (or, for a credit invoice, to use): total minus paid.
    pub balance_in_cents: i64,
}

impl InvoiceTotals {
    /// Totals of an invoice whose lines total `line_totals`, with a requested discount (capped at
    /// a positive subtotal), an optional tax rate and what has been paid so far.
    pub fn compute(
        line_totals: impl IntoIterator<Item = i64>,
        discount_in_cents: i64,
        tax_rate: Option<TaxRate>,
        paid_in_cents: i64,
    ) -> Result<Self, InvoiceError> {
        if discount_in_cents < 0 {
            return Err(InvoiceError::NegativeDiscount);
        }
        let subtotal =
            line_totals.into_iter().try_fold(0i64, |sum, v| sum.checked_add(v)).ok_or(InvoiceError::Overflow)?;
        let discount = discount_in_cents.min(subtotal.max(0));
        let after = subtotal - discount;
        let tax = tax_rate.map_or(Ok(0), |rate| rate.tax_on(after))?;
        let total = after.checked_add(tax).ok_or(InvoiceError::Overflow)?;
        Ok(Self {
            subtotal_before_discount_in_cents: subtotal,
            discount_in_cents: discount,
            subtotal_after_discount_in_cents: after,
            tax_in_cents: tax,
            total_in_cents: total,
            paid_in_cents,
            balance_in_cents: total.checked_sub(paid_in_cents).ok_or(InvoiceError::Overflow)?,
        })
    }

    /// [`InvoiceTotals::compute`] over line items.
    pub fn of_lines(
        lines: &[LineItem],
        discount_in_cents: i64,
        tax_rate: Option<TaxRate>,
        paid_in_cents: i64,
    ) -> Result<Self, InvoiceError> {
        Self::compute(lines.iter().map(|l| l.total_in_cents), discount_in_cents, tax_rate, paid_in_cents)
    }
}

/// An invoice drafted from its lines: its currency and its totals (no discount, tax or payment
/// yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftedInvoice {
    pub currency: String,
    pub totals: InvoiceTotals,
}

/// Drafts an invoice from its lines' currencies and totals: at least one line, all in one
/// currency.
pub fn draft<'a>(lines: impl IntoIterator<Item = (&'a str, i64)>) -> Result<DraftedInvoice, InvoiceError> {
    let mut currency: Option<&str> = None;
    let mut totals = Vec::new();
    for (line_currency, total) in lines {
        match currency {
            None => currency = Some(line_currency),
            Some(first) if first != line_currency => {
                return Err(InvoiceError::MixedCurrencies(first.to_owned(), line_currency.to_owned()));
            }
            Some(_) => {}
        }
        totals.push(total);
    }
    let currency = currency.ok_or(InvoiceError::NothingToInvoice)?.to_owned();
    Ok(DraftedInvoice { currency, totals: InvoiceTotals::compute(totals, 0, None, 0)? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn drafts_need_lines_in_one_currency() {
        let drafted = draft([("USD", 6000), ("USD", -2000)]).expect("draft");
        assert_eq!(drafted.currency, "USD");
        assert_eq!((drafted.totals.total_in_cents, drafted.totals.balance_in_cents), (4000, 4000));
        assert_eq!(draft([]), Err(InvoiceError::NothingToInvoice));
        assert_eq!(draft([("USD", 1), ("EUR", 1)]), Err(InvoiceError::MixedCurrencies("USD".into(), "EUR".into())));
        assert_eq!(draft([("USD", i64::MAX), ("USD", 1)]), Err(InvoiceError::Overflow));
    }

    fn t(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, 0, 0, 0).single().expect("valid date")
    }

    fn plan_key(start: DateTime<Utc>) -> OriginKey {
        OriginKey {
            subscription: "s".into(),
            item: ItemRef::Plan { plan_code: "p".into() },
            period_start: start,
            period_end: t(2025, 2, 1),
        }
    }

    fn charge(start: DateTime<Utc>, end: DateTime<Utc>, period_end: DateTime<Utc>, unit: i64) -> LineItem {
        let period = Period { start, end: period_end };
        recurring_line(plan_key(start), period, Period { start, end }, "USD", unit, 1, false).expect("valid")
    }

    #[test]
    fn tax_rates_parse_and_round() {
        assert_eq!(TaxRate::parse("0.0875").map(TaxRate::parts_per_million), Ok(87_500));
        assert_eq!(TaxRate::parse("1").map(TaxRate::parts_per_million), Ok(1_000_000));
        assert_eq!(TaxRate::parse(".5").map(TaxRate::parts_per_million), Ok(500_000));
        for bad in ["", ".", "-0.1", "0.1234567", "1e3", "0,1", "99999"] {
            assert!(TaxRate::parse(bad).is_err(), "{bad}");
        }
        let rate = TaxRate::from_parts_per_million(87_500);
        assert_eq!(rate.tax_on(1000), Ok(88)); // 87.5 → 88
        assert_eq!(rate.tax_on(-1000), Ok(-88));
    }

    #[test]
    fn totals() {
        let totals =
            InvoiceTotals::compute([1000, 2000, -500], 0, Some(TaxRate::from_parts_per_million(100_000)), 1000)
                .expect("fits");
        assert_eq!(
            totals,
            InvoiceTotals {
                subtotal_before_discount_in_cents: 2500,
                discount_in_cents: 0,
                subtotal_after_discount_in_cents: 2500,
                tax_in_cents: 250,
                total_in_cents: 2750,
                paid_in_cents: 1000,
                balance_in_cents: 1750,
            }
        );
        let capped = InvoiceTotals::compute([300], 500, None, 0).expect("fits");
        assert_eq!((capped.discount_in_cents, capped.total_in_cents), (300, 0));
        assert_eq!(InvoiceTotals::compute([1], -1, None, 0), Err(InvoiceError::NegativeDiscount));
        assert_eq!(InvoiceTotals::compute([i64::MAX, 1], 0, None, 0), Err(InvoiceError::Overflow));
        let credit = InvoiceTotals::compute([-1000], 200, None, 0).expect("fits");
        assert_eq!((credit.discount_in_cents, credit.total_in_cents), (0, -1000));
    }

    #[test]
    fn diff_bills_missing_and_credits_extra_coverage() {
        let (s, m, e) = (t(2025, 1, 1), t(2025, 1, 16), t(2025, 2, 1));
        let full = charge(s, e, e, 3100);
        // Expected only the first 15 days: credit the last 16.
        let expected = vec![charge(s, m, e, 3100)];
        let repair = diff(&expected, std::slice::from_ref(&full)).expect("valid");
        assert_eq!(repair.len(), 1);
        assert_eq!(repair[0].kind, LineKind::Credit);
        assert_eq!((repair[0].start, repair[0].end), (m, e));
        assert_eq!(repair[0].total_in_cents, -1600);
        assert_eq!(repair[0].unit_amount_in_cents, -3100);
        assert_eq!(repair[0].description, "Credit: Plan p");
        // Billed + repair now matches.
        let billed = vec![full.clone(), repair[0].clone()];
        assert!(diff(&expected, &billed).expect("valid").is_empty());
        // Nothing billed yet: the expected items themselves.
        assert_eq!(diff(&expected, &[]).expect("valid"), expected);
        // Expected nothing: everything billed is credited.
        let all = diff(&[], &billed).expect("valid");
        assert_eq!(all.iter().map(|l| l.total_in_cents).sum::<i64>(), -1500);
    }

    #[test]
    fn stretched_period_is_not_a_new_charge() {
        let (s, e, later) = (t(2025, 1, 1), t(2025, 2, 1), t(2025, 2, 10));
        let billed = vec![charge(s, e, e, 3100)];
        // The period was postponed to Feb 10; a later credit for [Feb 5, Feb 10) carries the new end.
        let stretched = Period { start: s, end: later };
        let credit =
            recurring_line(plan_key(s), stretched, Period { start: t(2025, 2, 5), end: later }, "USD", 3100, 1, true)
                .expect("valid");
        let expected = vec![billed[0].clone(), credit.clone()];
        assert_eq!(diff(&expected, &billed).expect("valid"), vec![credit]);
        assert!(diff(&billed, &billed).expect("valid").is_empty());
    }

    #[test]
    fn one_time_items_are_counted() {
        let terms = SubscriptionTerms {
            setup_fee_in_cents: 500,
            ..SubscriptionTerms::new("p", "USD", crate::period::Interval::months(1), 0)
        };
        let fee = setup_fee_line("s", &terms, t(2025, 1, 1)).expect("valid");
        assert_eq!(diff(std::slice::from_ref(&fee), &[]).expect("valid"), vec![fee.clone()]);
        assert!(diff(std::slice::from_ref(&fee), std::slice::from_ref(&fee)).expect("valid").is_empty());
        let back = diff(&[], std::slice::from_ref(&fee)).expect("valid");
        assert_eq!(back.len(), 1);
        assert_eq!((back[0].kind, back[0].total_in_cents), (LineKind::Credit, -500));
        assert_eq!(LineKind::SetupFee.origin_name(), "setup_fee");
        assert_eq!(LineKind::Credit.adjustment_type(), "credit");
        assert_eq!(InvoiceOrigin::ImmediateChange.name(), "immediate_change");
    }
}
