//! Coupon discounts: which charges of an invoice a redemption discounts, and by how much, to the
//! cent; when a temporal redemption lapses; the templates of a bulk coupon's unique codes.
//!
//! # Spreading a discount over an invoice
//!
//! An invoice's charges are discounted before tax ([`spread`]); credits and charges of no
//! amount are never discounted. A redemption discounts:
//!
//! - the subscription charges (plan, add-ons, setup fee) of the plans it applies to — every
//!   subscription of the account for a redemption on the account, only its own subscription for
//!   one redeemed on a subscription;
//! - the account's one-time charges when its coupon `applies_to_non_plan_charges` (account
//!   redemptions only).
//!
//! A **percent** discount takes the same rate of every eligible charge, never of a setup fee:
//! the discount is the rate of the eligible charges' sum, rounded half up once, and shared
//! among them in proportion to their amounts (largest remainders get the odd cents), so the
//! line discounts add up to the invoice's discount exactly. A **fixed** discount (an amount in
//! the invoice's currency) goes to the eligible charges in order — the subscription charges
//! first, in invoice order (the setup fee leads), then the one-time charges — each taking what
//! is left up to its amount; what the invoice cannot take is not carried over. A **free-trial**
//! coupon discounts nothing (it sets the subscription's trial).
//!
//! Several redemptions apply oldest first, each to what the earlier ones left, so together they
//! never take a charge below zero.
//!
//! ```
//! use rebill_billing::discount::{self, Charge, Discount, Redeemed, Scope};
//!
//! let charges = [
//!     Charge::subscription("sub-1", "gold", discount::ChargeKind::SetupFee, 1000),
//!     Charge::subscription("sub-1", "gold", discount::ChargeKind::Recurring, 3000),
//! ];
//! let ten_percent = Redeemed::new(Discount::Percent(10), Scope::Account);
//! let spread = discount::spread(&charges, &[ten_percent]);
//! assert_eq!(spread.per_charge, vec![0, 300]);
//! let five_dollars = Redeemed::new(Discount::Fixed(500), Scope::Account);
//! assert_eq!(discount::spread(&charges, &[five_dollars]).per_charge, vec![500, 0]);
//! ```

use chrono::{DateTime, Duration, Utc};

use crate::period::{Interval, IntervalUnit};
use crate::proration;

/// What a charge of an invoice is, for the discount rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChargeKind {
    /// A subscription's setup fee (never discounted by a percent).
    SetupFee,
    /// A subscription's plan or add-on charge.
    Recurring,
    /// A one-time charge of the account (not of a plan).
    OneTime,
}

/// One line of an invoice as the discount rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub kind: ChargeKind,
    /// The line's amount before discount (negative on credits).
    pub amount: i64,
    /// The subscription of a subscription charge.
    pub subscription: Option<String>,
    /// The plan of that subscription.
    pub plan_code: Option<String>,
}

impl Charge {
    /// A charge of subscription `uuid` on plan `plan_code`.
    pub fn subscription(uuid: &str, plan_code: &str, kind: ChargeKind, amount: i64) -> Self {
        Self { kind, amount, subscription: Some(uuid.to_owned()), plan_code: Some(plan_code.to_owned()) }
    }

    /// A one-time charge of the account.
    pub fn one_time(amount: i64) -> Self {
        Self { kind: ChargeKind::OneTime, amount, subscription: None, plan_code: None }
    }
}

/// The discount a coupon gives, in the invoice's currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discount {
    /// This percentage (0–100) of each eligible charge except setup fees.
    Percent(u32),
    /// Up to this many cents over the eligible charges.
    Fixed(i64),
    /// No discount on invoices (the coupon sets a trial).
    FreeTrial,
}

/// What a redemption is tied to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The account: every subscription, and one-time charges when the coupon says so.
    Account,
    /// One subscription (by uuid) only.
    Subscription(String),
}

/// One redemption to apply to an invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redeemed {
    pub discount: Discount,
    pub scope: Scope,
    /// The plans the coupon applies to (`None`: every plan).
    pub plans: Option<Vec<String>>,
    /// Whether one-time charges are discounted too.
    pub non_plan_charges: bool,
}

impl Redeemed {
    /// A redemption applying to every plan, not to one-time charges.
    pub fn new(discount: Discount, scope: Scope) -> Self {
        Self { discount, scope, plans: None, non_plan_charges: false }
    }

    /// Whether this redemption discounts `charge` (whatever its kind of discount).
    pub fn applies_to(&self, charge: &Charge) -> bool {
        if charge.amount <= 0 {
            return false;
        }
        match charge.kind {
            ChargeKind::OneTime => self.non_plan_charges && self.scope == Scope::Account,
            ChargeKind::SetupFee | ChargeKind::Recurring => {
                let scoped = match &self.scope {
                    Scope::Account => true,
                    Scope::Subscription(uuid) => charge.subscription.as_deref() == Some(uuid.as_str()),
                };
                let planned = match (&self.plans, &charge.plan_code) {
                    (None, _) => true,
                    (Some(plans), Some(code)) => plans.iter().any(|p| p == code),
                    (Some(_), None) => false,
                };
                scoped && planned
            }
        }
    }
}

/// How an invoice's discount is shared.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Spread {
    /// The discount of each charge, in the order given.
    pub per_charge: Vec<i64>,
    /// What each redemption gave, in the order given.
    pub per_redemption: Vec<i64>,
}

impl Spread {
    /// The invoice's discount.
    pub fn total(&self) -> i64 {
        self.per_charge.iter().sum()
    }
}

/// Shares `target` (at most the sum of `amounts`) among `amounts` in proportion, the odd cents
/// to the largest remainders (the earlier line on a tie).
fn proportional(amounts: &[i64], target: i64) -> Vec<i64> {
    let sum: i128 = amounts.iter().map(|a| i128::from(*a)).sum();
    if sum <= 0 || target <= 0 {
        return vec![0; amounts.len()];
    }
    let mut shares = Vec::with_capacity(amounts.len());
    let mut remainders = Vec::with_capacity(amounts.len());
    for (i, a) in amounts.iter().enumerate() {
        let n = i128::from(*a) * i128::from(target);
        shares.push(i64::try_from(n / sum).unwrap_or(0));
        remainders.push((n % sum, i));
    }
    let mut left = target - shares.iter().sum::<i64>();
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, i) in remainders {
        if left <= 0 {
            break;
        }
        if shares[i] < amounts[i] {
            shares[i] += 1;
            left -= 1;
        }
    }
    shares
}

/// The discount of every charge of an invoice under `redemptions` (oldest first), as the module
/// documentation says.
pub fn spread(charges: &[Charge], redemptions: &[Redeemed]) -> Spread {
    let mut left: Vec<i64> = charges.iter().map(|c| c.amount.max(0)).collect();
    let mut per_charge = vec![0i64; charges.len()];
    let mut per_redemption = Vec::with_capacity(redemptions.len());
    for r in redemptions {
        let given = match r.discount {
            Discount::FreeTrial => vec![0; charges.len()],
            Discount::Percent(percent) => {
                let percent = i64::from(percent.min(100));
                let eligible: Vec<i64> = charges
                    .iter()
                    .zip(&left)
                    .map(|(c, l)| if c.kind != ChargeKind::SetupFee && r.applies_to(c) { *l } else { 0 })
                    .collect();
                let sum: i64 = eligible.iter().sum();
                // The percentage of the eligible sum, rounded once (half up): `share` of 100 parts.
                proportional(&eligible, proration::share(sum, percent, 100).unwrap_or(0))
            }
            Discount::Fixed(amount) => {
                let mut given = vec![0; charges.len()];
                let mut rest = amount.max(0);
                let order = charges
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.kind != ChargeKind::OneTime)
                    .chain(charges.iter().enumerate().filter(|(_, c)| c.kind == ChargeKind::OneTime));
                for (i, c) in order {
                    if rest == 0 {
                        break;
                    }
                    if r.applies_to(c) {
                        let take = rest.min(left[i]);
                        given[i] = take;
                        rest -= take;
                    }
                }
                given
            }
        };
        for (i, g) in given.iter().enumerate() {
            left[i] -= g;
            per_charge[i] += g;
        }
        per_redemption.push(given.iter().sum());
    }
    Spread { per_charge, per_redemption }
}

/// Unit of a temporal coupon's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemporalUnit {
    Day,
    Week,
    Month,
    Year,
}

/// `at` moved on by `amount` units (months and years keep the day of month, clamped to the
/// month's last day, as billing intervals do); `None` out of range.
pub fn add_units(at: DateTime<Utc>, unit: TemporalUnit, amount: u32) -> Option<DateTime<Utc>> {
    let (length, unit) = match unit {
        TemporalUnit::Day => (amount, IntervalUnit::Days),
        TemporalUnit::Week => (amount.checked_mul(7)?, IntervalUnit::Days),
        TemporalUnit::Month => (amount, IntervalUnit::Months),
        TemporalUnit::Year => (amount.checked_mul(12)?, IntervalUnit::Months),
    };
    if length == 0 {
        return Some(at);
    }
    Interval::new(length, unit).ok()?.add_to(at).ok()
}

/// When a temporal redemption made at `redeemed_at` lapses: one hour before the anniversary of
/// its redemption `amount` units later (so a one-month coupon redeemed at signup discounts the
/// signup invoice and not the next monthly renewal).
pub fn temporal_end(redeemed_at: DateTime<Utc>, unit: TemporalUnit, amount: u32) -> Option<DateTime<Utc>> {
    add_units(redeemed_at, unit, amount)?.checked_sub_signed(Duration::hours(1))
}

/// A bulk coupon's template of unique codes: a quoted prefix, then `9` for a digit, `x` for a
/// letter and `*` for either (`'thankyou'99999999`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeTemplate {
    prefix: String,
    slots: Vec<Slot>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Digit,
    Letter,
    Either,
}

/// Why a unique-code template was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("must start with the coupon code in single quotes")]
    NoPrefix,
    #[error("may hold only 9, x and * after the quoted prefix")]
    BadSlot,
    #[error("needs at least one 9, x or * after the prefix")]
    NoSlots,
}

const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
const DIGITS: &[u8] = b"0123456789";

impl CodeTemplate {
    /// Parses a template whose prefix must be `code` (case-insensitive).
    pub fn parse(template: &str, code: &str) -> Result<Self, TemplateError> {
        let rest = template.strip_prefix('\'').ok_or(TemplateError::NoPrefix)?;
        let (prefix, slots) = rest.split_once('\'').ok_or(TemplateError::NoPrefix)?;
        if !prefix.eq_ignore_ascii_case(code) {
            return Err(TemplateError::NoPrefix);
        }
        let slots = slots
            .chars()
            .map(|c| match c {
                '9' => Ok(Slot::Digit),
                'x' | 'X' => Ok(Slot::Letter),
                '*' => Ok(Slot::Either),
                _ => Err(TemplateError::BadSlot),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if slots.is_empty() {
            return Err(TemplateError::NoSlots);
        }
        Ok(Self { prefix: prefix.to_owned(), slots })
    }

    /// How many different codes the template can make (saturating).
    pub fn capacity(&self) -> u64 {
        self.slots.iter().fold(1u64, |n, s| {
            n.saturating_mul(match s {
                Slot::Digit => 10,
                Slot::Letter => 26,
                Slot::Either => 36,
            })
        })
    }

    /// The code made from `random` (one byte per slot).
    pub fn make(&self, random: &[u8]) -> String {
        let mut code = self.prefix.clone();
        for (slot, byte) in self.slots.iter().zip(random.iter().chain(std::iter::repeat(&0))) {
            let b = usize::from(*byte);
            let c = match slot {
                Slot::Digit => DIGITS[b % DIGITS.len()],
                Slot::Letter => LETTERS[b % LETTERS.len()],
                Slot::Either => {
                    let i = b % (DIGITS.len() + LETTERS.len());
                    if i < DIGITS.len() { DIGITS[i] } else { LETTERS[i - DIGITS.len()] }
                }
            };
            code.push(char::from(c));
        }
        code
    }

    /// Number of random bytes [`CodeTemplate::make`] reads.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn sub(kind: ChargeKind, amount: i64) -> Charge {
        Charge::subscription("s1", "gold", kind, amount)
    }

    #[test]
    fn percent_never_takes_setup_fees_and_rounds_once() {
        let charges = [sub(ChargeKind::SetupFee, 1000), sub(ChargeKind::Recurring, 999), sub(ChargeKind::Recurring, 1)];
        let s = spread(&charges, &[Redeemed::new(Discount::Percent(15), Scope::Account)]);
        // 15 % of 1000 = 150.00, shared 149.85 / 0.15: the odd cent to the larger remainder.
        assert_eq!(s.per_charge, vec![0, 150, 0]);
        assert_eq!(s.per_redemption, vec![150]);
    }

    #[test]
    fn fixed_starts_with_the_first_subscription_line_and_is_not_carried_over() {
        let charges = [Charge::one_time(500), sub(ChargeKind::SetupFee, 300), sub(ChargeKind::Recurring, 1000)];
        let mut r = Redeemed::new(Discount::Fixed(1500), Scope::Account);
        r.non_plan_charges = true;
        let s = spread(&charges, std::slice::from_ref(&r));
        assert_eq!(s.per_charge, vec![200, 300, 1000]);
        r.non_plan_charges = false;
        assert_eq!(spread(&charges, &[r]).per_charge, vec![0, 300, 1000]);
    }

    #[test]
    fn scope_and_plans_limit_the_lines() {
        let charges = [
            Charge::subscription("s1", "gold", ChargeKind::Recurring, 1000),
            Charge::subscription("s2", "silver", ChargeKind::Recurring, 1000),
            Charge::subscription("s2", "silver", ChargeKind::Recurring, -400),
        ];
        let on_s2 = Redeemed::new(Discount::Percent(50), Scope::Subscription("s2".into()));
        assert_eq!(spread(&charges, &[on_s2]).per_charge, vec![0, 500, 0]);
        let mut gold_only = Redeemed::new(Discount::Percent(50), Scope::Account);
        gold_only.plans = Some(vec!["gold".into()]);
        assert_eq!(spread(&charges, &[gold_only]).per_charge, vec![500, 0, 0]);
        assert_eq!(spread(&charges, &[Redeemed::new(Discount::FreeTrial, Scope::Account)]).total(), 0);
    }

    #[test]
    fn several_redemptions_apply_oldest_first_to_what_is_left() {
        let charges = [sub(ChargeKind::Recurring, 10000)];
        let both = [
            Redeemed::new(Discount::Percent(10), Scope::Account),
            Redeemed::new(Discount::Percent(50), Scope::Account),
        ];
        // 10 % of 100 = 10, then 50 % of the 90 left = 45: 55 in all.
        assert_eq!(spread(&charges, &both).per_redemption, vec![1000, 4500]);
        let capped = [
            Redeemed::new(Discount::Fixed(9000), Scope::Account),
            Redeemed::new(Discount::Fixed(5000), Scope::Account),
        ];
        assert_eq!(spread(&charges, &capped).per_redemption, vec![9000, 1000]);
    }

    #[test]
    fn temporal_redemptions_end_an_hour_before_the_anniversary() {
        let jan31 = Utc.with_ymd_and_hms(2025, 1, 31, 12, 0, 0).unwrap();
        assert_eq!(
            temporal_end(jan31, TemporalUnit::Month, 1),
            Some(Utc.with_ymd_and_hms(2025, 2, 28, 11, 0, 0).unwrap())
        );
        assert_eq!(
            temporal_end(jan31, TemporalUnit::Year, 1),
            Some(Utc.with_ymd_and_hms(2026, 1, 31, 11, 0, 0).unwrap())
        );
        assert_eq!(
            temporal_end(jan31, TemporalUnit::Week, 2),
            Some(Utc.with_ymd_and_hms(2025, 2, 14, 11, 0, 0).unwrap())
        );
        assert_eq!(
            temporal_end(jan31, TemporalUnit::Day, 3),
            Some(Utc.with_ymd_and_hms(2025, 2, 3, 11, 0, 0).unwrap())
        );
    }

    #[test]
    fn templates() {
        let t = CodeTemplate::parse("'thankyou'99x*", "thankyou").expect("template");
        assert_eq!(t.slots(), 4);
        assert_eq!(t.capacity(), 10 * 10 * 26 * 36);
        assert_eq!(t.make(&[3, 12, 1, 35]), "thankyou32bz");
        assert_eq!(CodeTemplate::parse("thankyou99", "thankyou"), Err(TemplateError::NoPrefix));
        assert_eq!(CodeTemplate::parse("'other'99", "thankyou"), Err(TemplateError::NoPrefix));
        assert_eq!(CodeTemplate::parse("'thankyou'9a", "thankyou"), Err(TemplateError::BadSlot));
        assert_eq!(CodeTemplate::parse("'thankyou'", "thankyou"), Err(TemplateError::NoSlots));
    }

    fn kind() -> impl Strategy<Value = ChargeKind> {
        prop_oneof![Just(ChargeKind::SetupFee), Just(ChargeKind::Recurring), Just(ChargeKind::OneTime)]
    }

    fn charges() -> impl Strategy<Value = Vec<Charge>> {
        prop::collection::vec((kind(), -5_000i64..1_000_000, 0usize..2), 0..8).prop_map(|v| {
            v.into_iter()
                .map(|(k, amount, s)| match k {
                    ChargeKind::OneTime => Charge::one_time(amount),
                    k => Charge::subscription(["s1", "s2"][s], ["gold", "silver"][s], k, amount),
                })
                .collect()
        })
    }

    fn redemption() -> impl Strategy<Value = Redeemed> {
        let discount = prop_oneof![
            (0u32..=100).prop_map(Discount::Percent),
            (0i64..2_000_000).prop_map(Discount::Fixed),
            Just(Discount::FreeTrial)
        ];
        let scope = prop_oneof![Just(Scope::Account), Just(Scope::Subscription("s2".into()))];
        (discount, scope, any::<bool>(), any::<bool>()).prop_map(|(discount, scope, gold, non_plan)| Redeemed {
            discount,
            scope,
            plans: gold.then(|| vec!["gold".to_owned()]),
            non_plan_charges: non_plan,
        })
    }

    proptest! {
        /// The line discounts add up to the redemptions' to the cent, no charge goes below zero,
        /// and a lone redemption gives exactly its rule's amount.
        #[test]
        fn discounts_add_up(charges in charges(), redemptions in prop::collection::vec(redemption(), 0..4)) {
            let s = spread(&charges, &redemptions);
            prop_assert_eq!(s.per_charge.len(), charges.len());
            prop_assert_eq!(s.per_charge.iter().sum::<i64>(), s.per_redemption.iter().sum::<i64>());
            for (c, d) in charges.iter().zip(&s.per_charge) {
                prop_assert!(*d >= 0 && *d <= c.amount.max(0));
            }
            if let [r] = redemptions.as_slice() {
                let eligible = |c: &Charge| r.applies_to(c);
                let expected = match r.discount {
                    Discount::FreeTrial => 0,
                    Discount::Percent(p) => {
                        let base: i64 = charges.iter().filter(|c| eligible(c) && c.kind != ChargeKind::SetupFee).map(|c| c.amount).sum();
                        (base * i64::from(p) * 2 + 100) / 200
                    }
                    Discount::Fixed(a) => a.min(charges.iter().filter(|c| eligible(c)).map(|c| c.amount).sum()),
                };
                prop_assert_eq!(s.total(), expected);
                for (c, d) in charges.iter().zip(&s.per_charge) {
                    if !eligible(c) {
                        prop_assert_eq!(*d, 0);
                    }
                }
            }
        }

        /// A percent is shared in proportion: no line is off its exact share by a cent or more.
        #[test]
        fn percent_shares_are_proportional(amounts in prop::collection::vec(1i64..100_000, 1..6), p in 0u32..=100) {
            let charges: Vec<Charge> = amounts.iter().map(|a| sub(ChargeKind::Recurring, *a)).collect();
            let s = spread(&charges, &[Redeemed::new(Discount::Percent(p), Scope::Account)]);
            let sum: i64 = amounts.iter().sum();
            let total = s.total();
            for (a, d) in amounts.iter().zip(&s.per_charge) {
                let exact = (*a as f64) * (total as f64) / (sum as f64);
                prop_assert!(((*d as f64) - exact).abs() < 1.0);
            }
        }
    }
}
