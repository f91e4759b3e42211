//! Subscription states and the transitions between them, as pure functions.
//!
//! A [`Subscription`] is a plain value. Every transition takes the current value and "now" and
//! returns a [`Transition`]: the new value, the line items to invoice (charges and credits, with
//! their periods and descriptions) and the invoice origin; or a [`LifecycleError`] that the
//! service maps to a 422 (or 400) answer. Nothing here reads a clock or a database.
//!
//! # States
//!
//! The states are exactly the schema's `subscription_state` values: `future`, `active`,
//! `paused`, `canceled`, `expired` and `pending`. "In trial" and "past due" are not states (a
//! trial or past-due subscription is `active` or `canceled`): see [`Subscription::in_trial`],
//! [`Subscription::past_due`] and the list filter [`StateFilter`].
//!
//! | From | Transition | To |
//! |---|---|---|
//! | — | [`create`] (start now or in the past / in the future) | `active` (maybe in trial) / `future` |
//! | `future`, `pending` | [`activate`] (the scheduler at `starts_at`, or payment settled) | `active` |
//! | `active` | [`advance`] at the period end: renewal, trial end, or the last billing cycle | `active` / `expired` |
//! | `active` | [`pause`] with N > 0 | `active`, pause scheduled for the period end |
//! | `active` (pause scheduled) | [`advance`] at the period end | `paused` |
//! | `paused` | [`advance`]: paused renewal, or the end of the pause | `paused` / `active` |
//! | `paused` | [`resume`] | `active`, new period from now, charged |
//! | `active`, `paused` | [`cancel`] | `canceled` (expires at the period end) |
//! | `canceled` | [`reactivate`] before `expires_at` | `active` (or `paused`) |
//! | `canceled` | [`advance`] at `expires_at` | `expired` |
//! | any but `expired` | [`terminate`] | `expired` now, refund none / partial / full |
//!
//! [`change`], [`postpone`], [`set_remaining_billing_cycles`], [`set_imported_trial`],
//! [`fail_renewal`] and [`recover`] keep the state.
//!
//! # Rules where the spec is silent
//!
//! - Periods are billed in advance, at their start. A trial is not billed and is not a billing
//!   cycle; the setup fee is charged at activation, trial or not.
//! - `remaining_billing_cycles` counts the billed periods still to start: `total_billing_cycles`
//!   at creation, minus one at every billed period start (activation, end of trial, renewal,
//!   end of pause, resume). A billed period that would start with 0 left expires the
//!   subscription instead. Paused cycles do not count. Setting the count again
//!   ([`set_remaining_billing_cycles`]) is the manual renewal of a term.
//! - Pause (billing-behaviour §4.1): [`pause`] on an active subscription schedules the pause at
//!   the period end with `remaining_pause_cycles` = N (`paused_at` = the period end); a new N
//!   replaces it and 0 cancels it. The renewal at `paused_at` starts the pause: state `paused`,
//!   no charge, and the count goes down by one; each later paused renewal also charges nothing and
//!   counts down; the renewal that finds 0 left is billed normally and returns to `active`. So N
//!   cycles are skipped. On a paused subscription N sets the count (0 = resume at the next
//!   renewal). Pending at-renewal changes wait for the first billed renewal. A pause scheduled in
//!   the last cycle of a term still runs; the subscription expires where it would have resumed.
//!   [`resume`] on a paused subscription resumes it now (a new billed period from now); on an
//!   active one with a pause scheduled it drops the scheduled pause, without charge (the
//!   released clients' fixtures answer 200 there); otherwise `not_paused`.
//! - A change with `timeframe=now` in a billed period credits the old terms and charges the new
//!   ones for the rest of the period. When the billing interval changes, the old period is cut
//!   (rest credited) and a new period of the new interval starts now (same billing cycle); a
//!   pause scheduled at the old period end moves to the new one, as it would with [`postpone`].
//!   In a trial, a paused period or before activation the terms are simply replaced.
//! - [`postpone`] moves the current period end (and the schedule) without charge or credit; a
//!   trial end or scheduled pause at that instant moves with it.
//! - A full refund on [`terminate`] credits every billed part of the current period (the setup
//!   fee is not refunded); partial credits the part after now; none credits nothing.
//! - Scheduled transitions happen at their due instant, however late the scheduler runs, so
//!   dates never drift. Actions refuse a value that has a transition due at or before "now"
//!   ([`LifecycleError::NotAdvanced`]): call [`advance_to`] first.
//!
//! # How to use
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use rebill_billing::lifecycle::{self, NewSubscription, SubscriptionState, SubscriptionTerms};
//! use rebill_billing::period::Interval;
//!
//! let jan15 = Utc.with_ymd_and_hms(2025, 1, 15, 10, 0, 0).unwrap();
//! let terms = SubscriptionTerms::new("gold", "USD", Interval::months(1), 1000);
//!
//! // POST /subscriptions: persist `created.subscription`, invoice `created.lines`.
//! let created = lifecycle::create(NewSubscription::new("sub-1", terms), jan15).unwrap();
//! assert_eq!(created.subscription.state, SubscriptionState::Active);
//! assert_eq!(created.lines[0].total_in_cents, 1000);
//!
//! // The scheduler keeps one job per subscription at `next_due` and runs `advance` when due.
//! let due = lifecycle::next_due(&created.subscription).unwrap();
//! assert_eq!(due.at, Utc.with_ymd_and_hms(2025, 2, 15, 10, 0, 0).unwrap());
//! let renewed = lifecycle::advance(&created.subscription).unwrap();
//! assert_eq!(renewed.lines[0].total_in_cents, 1000);
//!
//! // A request handler first catches up with anything due, then applies the action.
//! let now = Utc.with_ymd_and_hms(2025, 2, 20, 0, 0, 0).unwrap();
//! let current = lifecycle::advance_to(&renewed.subscription, now).unwrap().subscription;
//! let paused = lifecycle::pause(&current, 2, now).unwrap().subscription;
//! assert_eq!(paused.paused_at, Some(Utc.with_ymd_and_hms(2025, 3, 15, 10, 0, 0).unwrap()));
//! ```

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::invoice::{self, InvoiceOrigin, LineItem};
use crate::period::{Interval, Period, PeriodError};
use crate::proration::ProrationError;

/// Why a transition was refused. Except where noted the service answers 422 (a single
/// `<error>` with [`LifecycleError::symbol`], or a field error where a field is named).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    /// Resume on a subscription that is neither paused nor has a pause scheduled.
    #[error("the subscription is not paused")]
    NotPaused,
    /// Reactivate on a subscription that is not canceled.
    #[error("the subscription is not canceled")]
    NotCanceled,
    /// Cancel on a subscription already canceled.
    #[error("the subscription is already canceled")]
    AlreadyCanceled,
    /// Any action on an expired subscription, or reactivation after `expires_at`.
    #[error("the subscription has expired")]
    AlreadyExpired,
    /// `imported_trial` changed (or set on creation) on a subscription that is not in a trial.
    #[error("imported_trial can only be changed on a trial subscription")]
    ImportedTrialNotInTrial,
    /// `remaining_pause_cycles` negative or too large.
    #[error("remaining_pause_cycles must be a whole number of cycles, 0 or more")]
    InvalidPauseCycles,
    /// The action is not possible in the subscription's state.
    #[error("cannot {action} a subscription in state {}", state.name())]
    InvalidTransition {
        /// The action refused, e.g. `pause`.
        action: &'static str,
        /// The subscription's state.
        state: SubscriptionState,
    },
    /// A field of the terms is invalid (422 field error on `subscription.<field>`).
    #[error("{field} {message}")]
    InvalidTerms {
        /// The request field, e.g. `quantity` or `subscription_add_ons.add_on_code`.
        field: &'static str,
        /// What is wrong, e.g. `must be at least 1`.
        message: &'static str,
    },
    /// A change names another currency than the subscription's.
    #[error("a subscription's currency cannot change")]
    CurrencyMismatch,
    /// `total_billing_cycles` of 0.
    #[error("total_billing_cycles must be at least 1")]
    InvalidBillingCycles,
    /// A trial end not after the start.
    #[error("trial_ends_at must be after the start of the subscription")]
    InvalidTrialEnd,
    /// A postponed renewal date not in the future.
    #[error("next_renewal_date must be in the future")]
    InvalidRenewalDate,
    /// The value has a scheduled transition due at or before "now": run [`advance_to`] first
    /// (a sequencing error in the caller, not a client error).
    #[error("a scheduled transition is due at {due}; advance the subscription first")]
    NotAdvanced {
        /// When the pending transition was due.
        due: DateTime<Utc>,
    },
    /// "Now" lies before the current period or the last change (out-of-order history).
    #[error("{at} is before the subscription's last change")]
    OutOfOrder {
        /// The instant refused.
        at: DateTime<Utc>,
    },
    /// [`advance`] on a subscription with nothing scheduled.
    #[error("nothing is scheduled for this subscription")]
    NothingDue,
    /// A date computation left the representable range or used a zero-length interval.
    #[error(transparent)]
    Period(#[from] PeriodError),
    /// An amount computation overflowed.
    #[error(transparent)]
    Proration(#[from] ProrationError),
}

impl LifecycleError {
    /// A stable snake_case symbol for error documents, e.g. `not_paused`.
    pub fn symbol(&self) -> &'static str {
        match self {
            LifecycleError::NotPaused => "not_paused",
            LifecycleError::NotCanceled => "not_canceled",
            LifecycleError::AlreadyCanceled => "already_canceled",
            LifecycleError::AlreadyExpired => "already_expired",
            LifecycleError::ImportedTrialNotInTrial => "imported_trial_not_in_trial",
            LifecycleError::InvalidPauseCycles => "invalid_pause_cycles",
            LifecycleError::InvalidTransition { .. } => "invalid_transition",
            LifecycleError::InvalidTerms { .. } => "invalid",
            LifecycleError::CurrencyMismatch => "currency_mismatch",
            LifecycleError::InvalidBillingCycles => "invalid_billing_cycles",
            LifecycleError::InvalidTrialEnd => "invalid_trial_end",
            LifecycleError::InvalidRenewalDate => "invalid_renewal_date",
            LifecycleError::NotAdvanced { .. } => "not_advanced",
            LifecycleError::OutOfOrder { .. } => "out_of_order",
            LifecycleError::NothingDue => "nothing_due",
            LifecycleError::Period(_) => "invalid_date",
            LifecycleError::Proration(_) => "invalid_amount",
        }
    }
}

/// State of a subscription; exactly the schema's `subscription_state` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionState {
    /// Running (possibly in its trial, possibly past due).
    Active,
    /// Canceled: runs to the end of the paid period (`expires_at`), then expires.
    Canceled,
    /// Ended.
    Expired,
    /// Starts at `starts_at`.
    Future,
    /// Created but waiting for its first payment to settle; [`activate`] starts it. No
    /// transition here produces it: the service creates it when it defers activation.
    Pending,
    /// In a pause (2.11; written `active` to older versions).
    Paused,
}

impl SubscriptionState {
    /// Every state.
    pub const ALL: [SubscriptionState; 6] = [
        SubscriptionState::Active,
        SubscriptionState::Canceled,
        SubscriptionState::Expired,
        SubscriptionState::Future,
        SubscriptionState::Pending,
        SubscriptionState::Paused,
    ];

    /// The schema name, e.g. `paused`.
    pub fn name(self) -> &'static str {
        match self {
            SubscriptionState::Active => "active",
            SubscriptionState::Canceled => "canceled",
            SubscriptionState::Expired => "expired",
            SubscriptionState::Future => "future",
            SubscriptionState::Pending => "pending",
            SubscriptionState::Paused => "paused",
        }
    }

    /// Parses a schema name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// The `state` filter of subscription lists: the states plus `in_trial`, `live` and `past_due`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateFilter {
    /// State `active` (trials included).
    Active,
    /// State `canceled`.
    Canceled,
    /// State `expired`.
    Expired,
    /// State `future`.
    Future,
    /// In a trial now.
    InTrial,
    /// Not ended and started: `active`, `canceled` (not yet expired) or `paused` (the default).
    Live,
    /// Past due (`active` or `canceled` with a failed renewal not yet recovered).
    PastDue,
    /// State `paused`.
    Paused,
}

impl StateFilter {
    /// Every filter value.
    pub const ALL: [StateFilter; 8] = [
        StateFilter::Active,
        StateFilter::Canceled,
        StateFilter::Expired,
        StateFilter::Future,
        StateFilter::InTrial,
        StateFilter::Live,
        StateFilter::PastDue,
        StateFilter::Paused,
    ];

    /// The query value, e.g. `in_trial`.
    pub fn name(self) -> &'static str {
        match self {
            StateFilter::Active => "active",
            StateFilter::Canceled => "canceled",
            StateFilter::Expired => "expired",
            StateFilter::Future => "future",
            StateFilter::InTrial => "in_trial",
            StateFilter::Live => "live",
            StateFilter::PastDue => "past_due",
            StateFilter::Paused => "paused",
        }
    }

    /// Parses a query value.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether `subscription` passes the filter at `now`.
    pub fn matches(self, subscription: &Subscription, now: DateTime<Utc>) -> bool {
        use SubscriptionState as S;
        let state = subscription.state;
        match self {
            StateFilter::Active => state == S::Active,
            StateFilter::Canceled => state == S::Canceled,
            StateFilter::Expired => state == S::Expired,
            StateFilter::Future => state == S::Future,
            StateFilter::Paused => state == S::Paused,
            StateFilter::InTrial => subscription.in_trial(now),
            StateFilter::Live => matches!(state, S::Active | S::Canceled | S::Paused),
            StateFilter::PastDue => subscription.past_due && matches!(state, S::Active | S::Canceled),
        }
    }
}

/// One add-on of a subscription.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AddOnTerms {
    /// The add-on's code, unique within the subscription.
    pub add_on_code: String,
    /// Price per unit per billing period.
    pub unit_amount_in_cents: i64,
    /// Number of units (0 bills nothing).
    pub quantity: u32,
}

/// What a subscription bills: plan, currency, interval, price, quantity, add-ons, setup fee.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SubscriptionTerms {
    /// The plan's code.
    pub plan_code: String,
    /// ISO 4217 currency of every amount.
    pub currency: String,
    /// The plan's billing interval.
    pub interval: Interval,
    /// Plan price per unit per billing period.
    pub unit_amount_in_cents: i64,
    /// Number of plan units, at least 1.
    pub quantity: u32,
    /// Add-ons; a change replaces the whole set.
    pub add_ons: Vec<AddOnTerms>,
    /// One-time fee charged at activation (0 for none).
    pub setup_fee_in_cents: i64,
}

impl SubscriptionTerms {
    /// Terms of one unit of a plan, without add-ons or setup fee.
    pub fn new(plan_code: &str, currency: &str, interval: Interval, unit_amount_in_cents: i64) -> Self {
        Self {
            plan_code: plan_code.to_owned(),
            currency: currency.to_owned(),
            interval,
            unit_amount_in_cents,
            quantity: 1,
            add_ons: Vec::new(),
            setup_fee_in_cents: 0,
        }
    }

    /// Checks the terms: a plan code and currency, an interval of at least 1, a quantity of at
    /// least 1, no negative amount, unique non-blank add-on codes, a period price that fits.
    pub fn validate(&self) -> Result<(), LifecycleError> {
        let invalid = |field, message| Err(LifecycleError::InvalidTerms { field, message });
        if self.plan_code.trim().is_empty() {
            return invalid("plan_code", "can't be blank");
        }
        if self.currency.trim().is_empty() {
            return invalid("currency", "can't be blank");
        }
        if self.interval.length == 0 {
            return invalid("plan_interval_length", "must be at least 1");
        }
        if self.unit_amount_in_cents < 0 {
            return invalid("unit_amount_in_cents", "must not be negative");
        }
        if self.quantity == 0 {
            return invalid("quantity", "must be at least 1");
        }
        if self.setup_fee_in_cents < 0 {
            return invalid("setup_fee_in_cents", "must not be negative");
        }
        for (i, add_on) in self.add_ons.iter().enumerate() {
            if add_on.add_on_code.trim().is_empty() {
                return invalid("subscription_add_ons.add_on_code", "can't be blank");
            }
            if self.add_ons[..i].iter().any(|other| other.add_on_code == add_on.add_on_code) {
                return invalid("subscription_add_ons.add_on_code", "has already been taken");
            }
            if add_on.unit_amount_in_cents < 0 {
                return invalid("subscription_add_ons.unit_amount_in_cents", "must not be negative");
            }
        }
        if self.recurring_amount_in_cents().is_none() {
            return invalid("unit_amount_in_cents", "is too large");
        }
        Ok(())
    }

    /// The price of one full period: plan plus add-ons (`None` on overflow).
    pub fn recurring_amount_in_cents(&self) -> Option<i64> {
        let plan = self.unit_amount_in_cents.checked_mul(i64::from(self.quantity))?;
        self.add_ons
            .iter()
            .try_fold(plan, |sum, a| sum.checked_add(a.unit_amount_in_cents.checked_mul(i64::from(a.quantity))?))
    }
}

/// How long a new subscription's trial runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trial {
    /// The plan's trial interval from the start.
    For(Interval),
    /// An explicit `trial_ends_at`.
    Until(DateTime<Utc>),
}

/// A subscription request, as [`create`] takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewSubscription {
    /// The uuid the service assigned.
    pub uuid: String,
    /// What to bill.
    pub terms: SubscriptionTerms,
    /// Start (`starts_at`); `None` = now. In the future makes a `future` subscription.
    pub starts_at: Option<DateTime<Utc>>,
    /// Trial, if any.
    pub trial: Option<Trial>,
    /// Number of billed periods before the subscription expires; `None` renews forever.
    pub total_billing_cycles: Option<u32>,
    /// `imported_trial` (2.8); only allowed with a trial.
    pub imported_trial: bool,
}

impl NewSubscription {
    /// A subscription starting now, without trial, renewing forever.
    pub fn new(uuid: &str, terms: SubscriptionTerms) -> Self {
        Self {
            uuid: uuid.to_owned(),
            terms,
            starts_at: None,
            trial: None,
            total_billing_cycles: None,
            imported_trial: false,
        }
    }
}

/// Part of the current period billed at some terms: from `from` to the next segment's `from`,
/// or to the period end for the last one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BilledSegment {
    /// First instant billed at these terms.
    pub from: DateTime<Utc>,
    /// The terms billed.
    pub terms: SubscriptionTerms,
}

/// A subscription. The store persists every field (the segments and pending change as
/// documents); the response fields of the schema map one to one, except `billing_anchor`,
/// `billed_segments` and `billed_period_key_end`, which are internal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    /// The subscription's uuid (part of every line item's origin key).
    pub uuid: String,
    /// Current state.
    pub state: SubscriptionState,
    /// The terms in force.
    pub terms: SubscriptionTerms,
    /// Boundaries of the current schedule are `billing_anchor` plus whole intervals.
    pub billing_anchor: DateTime<Utc>,
    /// When the subscription starts (or started).
    pub starts_at: DateTime<Utc>,
    /// When it was activated.
    pub activated_at: Option<DateTime<Utc>>,
    /// Start of the current period (trial, paid or paused).
    pub current_period_started_at: Option<DateTime<Utc>>,
    /// End of the current period: the next renewal.
    pub current_period_ends_at: Option<DateTime<Utc>>,
    /// Start of the trial.
    pub trial_started_at: Option<DateTime<Utc>>,
    /// End of the trial.
    pub trial_ends_at: Option<DateTime<Utc>>,
    /// Billed periods of the term; `None` renews forever.
    pub total_billing_cycles: Option<u32>,
    /// Billed periods still to start; `None` renews forever.
    pub remaining_billing_cycles: Option<u32>,
    /// When the scheduled pause starts, or the current pause started.
    pub paused_at: Option<DateTime<Utc>>,
    /// Paused renewals left (see the module documentation).
    pub remaining_pause_cycles: Option<u32>,
    /// Change waiting for the next billed renewal (`pending_subscription`).
    pub pending_change: Option<SubscriptionTerms>,
    /// When it was canceled.
    pub canceled_at: Option<DateTime<Utc>>,
    /// When a canceled subscription expires, or when it expired.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was terminated.
    pub terminated_at: Option<DateTime<Utc>>,
    /// `imported_trial` (2.8).
    pub imported_trial: bool,
    /// A renewal failed to collect and has not been recovered (dunning).
    pub past_due: bool,
    /// The billed parts of the current period, in order; empty when the current period is not
    /// billed (trial, pause, before activation, after the end).
    pub billed_segments: Vec<BilledSegment>,
    /// The end the current billed period had when it opened: with its start it names the period
    /// in line-item keys ([`invoice::OriginKey::period_end`]); postponing does not change it.
    /// `None` when the current period is not billed.
    pub billed_period_key_end: Option<DateTime<Utc>>,
}

impl Subscription {
    /// The current period, if there is one.
    pub fn current_period(&self) -> Option<Period> {
        Period::new(self.current_period_started_at?, self.current_period_ends_at?).ok()
    }

    /// Whether the subscription is in its trial at `now`.
    pub fn in_trial(&self, now: DateTime<Utc>) -> bool {
        matches!(self.state, SubscriptionState::Active | SubscriptionState::Canceled)
            && self.trial_started_at.is_some_and(|start| start <= now)
            && self.trial_ends_at.is_some_and(|end| now < end)
    }

    /// Whether a pause is scheduled but has not started.
    pub fn has_scheduled_pause(&self) -> bool {
        self.state == SubscriptionState::Active
            && self.paused_at.is_some()
            && self.paused_at == self.current_period_ends_at
    }

    /// Whether the current period has been billed (so changes to it are prorated).
    pub fn is_billed_period(&self) -> bool {
        !self.billed_segments.is_empty()
    }

    /// Whether a pause has begun (the subscription is paused, or canceled while paused): a pause
    /// is counted and the current period, which started at or after it, is not billed.
    fn pause_started(&self) -> bool {
        self.remaining_pause_cycles.is_some()
            && !self.is_billed_period()
            && self.paused_at.is_some_and(|p| self.current_period_started_at.is_some_and(|start| p <= start))
    }
}

/// The result of a transition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The subscription after the transition.
    pub subscription: Subscription,
    /// Charges and credits to invoice now (possibly none).
    pub lines: Vec<LineItem>,
    /// The invoice origin for `lines` (`None` when there are none).
    pub origin: Option<InvoiceOrigin>,
}

impl Transition {
    fn new(subscription: Subscription, lines: Vec<LineItem>, origin: InvoiceOrigin) -> Self {
        let origin = (!lines.is_empty()).then_some(origin);
        Self { subscription, lines, origin }
    }
}

/// When a change takes effect (`timeframe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Timeframe {
    /// Now, prorated.
    Now,
    /// At the next billed renewal (`pending_subscription`).
    Renewal,
}

/// What a termination refunds of the current period (`refund=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refund {
    /// Nothing.
    None,
    /// The unused part, from now to the period end.
    Partial,
    /// The whole current period.
    Full,
}

/// What the next scheduled transition is (a job kind for the scheduler).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DueKind {
    /// A future subscription starts.
    Activation,
    /// The trial ends; the first paid period starts.
    TrialEnd,
    /// A normal renewal.
    Renewal,
    /// A scheduled pause starts (no charge).
    PauseStart,
    /// A renewal during a pause (no charge).
    PausedRenewal,
    /// The pause ends; billed renewal.
    PauseEnd,
    /// The subscription expires (canceled, or no billing cycle left).
    Expiration,
}

impl DueKind {
    /// A snake_case name, e.g. `trial_end`.
    pub fn name(self) -> &'static str {
        match self {
            DueKind::Activation => "activation",
            DueKind::TrialEnd => "trial_end",
            DueKind::Renewal => "renewal",
            DueKind::PauseStart => "pause_start",
            DueKind::PausedRenewal => "paused_renewal",
            DueKind::PauseEnd => "pause_end",
            DueKind::Expiration => "expiration",
        }
    }
}

/// The next scheduled transition of a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Due {
    /// When it is due.
    pub at: DateTime<Utc>,
    /// What it is.
    pub kind: DueKind,
}

/// Creates a subscription at `now`. A start after `now` gives a `future` subscription (no
/// lines); otherwise it is activated at its start (in the past for a backdated start: call
/// [`advance_to`] afterwards to catch up).
pub fn create(new: NewSubscription, now: DateTime<Utc>) -> Result<Transition, LifecycleError> {
    new.terms.validate()?;
    if new.total_billing_cycles == Some(0) {
        return Err(LifecycleError::InvalidBillingCycles);
    }
    let start = new.starts_at.unwrap_or(now);
    let trial_end = match new.trial {
        None => None,
        Some(Trial::For(interval)) => Some(interval.add_to(start)?),
        Some(Trial::Until(end)) if end > start => Some(end),
        Some(Trial::Until(_)) => return Err(LifecycleError::InvalidTrialEnd),
    };
    if new.imported_trial && trial_end.is_none() {
        return Err(LifecycleError::ImportedTrialNotInTrial);
    }
    let subscription = Subscription {
        uuid: new.uuid,
        state: SubscriptionState::Future,
        terms: new.terms,
        billing_anchor: start,
        starts_at: start,
        activated_at: None,
        current_period_started_at: None,
        current_period_ends_at: None,
        trial_started_at: trial_end.map(|_| start),
        trial_ends_at: trial_end,
        total_billing_cycles: new.total_billing_cycles,
        remaining_billing_cycles: new.total_billing_cycles,
        paused_at: None,
        remaining_pause_cycles: None,
        pending_change: None,
        canceled_at: None,
        expires_at: None,
        terminated_at: None,
        imported_trial: new.imported_trial,
        past_due: false,
        billed_segments: Vec::new(),
        billed_period_key_end: None,
    };
    if start <= now {
        activate(&subscription, start)
    } else {
        Ok(Transition { subscription, lines: Vec::new(), origin: None })
    }
}

/// Activates a `future` or `pending` subscription at `at`: charges the setup fee, then starts
/// the trial, or the first billed period.
pub fn activate(sub: &Subscription, at: DateTime<Utc>) -> Result<Transition, LifecycleError> {
    match sub.state {
        SubscriptionState::Future | SubscriptionState::Pending => {}
        SubscriptionState::Expired => return Err(LifecycleError::AlreadyExpired),
        state => return Err(LifecycleError::InvalidTransition { action: "activate", state }),
    }
    let mut s = sub.clone();
    let mut lines = Vec::new();
    s.state = SubscriptionState::Active;
    s.activated_at = Some(at);
    if s.terms.setup_fee_in_cents > 0 {
        lines.push(invoice::setup_fee_line(&s.uuid, &s.terms, at)?);
    }
    match s.trial_ends_at {
        Some(end) if end > at => {
            s.trial_started_at = Some(at);
            s.billing_anchor = end;
            s.current_period_started_at = Some(at);
            s.current_period_ends_at = Some(end);
            clear_billed_period(&mut s);
        }
        _ => {
            s.billing_anchor = at;
            begin_billed_period(&mut s, at, &mut lines)?;
        }
    }
    Ok(Transition::new(s, lines, InvoiceOrigin::Purchase))
}

/// The next scheduled transition, if any: the scheduler keeps one job per subscription at this
/// instant and calls [`advance`] when it is due.
pub fn next_due(sub: &Subscription) -> Option<Due> {
    use SubscriptionState as S;
    let due = |at, kind| Some(Due { at, kind });
    match sub.state {
        S::Future => due(sub.starts_at, DueKind::Activation),
        S::Pending | S::Expired => None,
        S::Canceled => due(sub.expires_at.or(sub.current_period_ends_at)?, DueKind::Expiration),
        S::Active => {
            let end = sub.current_period_ends_at?;
            if sub.has_scheduled_pause() {
                due(end, DueKind::PauseStart)
            } else if sub.remaining_billing_cycles == Some(0) {
                due(end, DueKind::Expiration)
            } else if sub.trial_ends_at == Some(end) {
                due(end, DueKind::TrialEnd)
            } else {
                due(end, DueKind::Renewal)
            }
        }
        S::Paused => {
            let end = sub.current_period_ends_at?;
            match sub.remaining_pause_cycles {
                Some(0) | None if sub.remaining_billing_cycles == Some(0) => due(end, DueKind::Expiration),
                Some(0) | None => due(end, DueKind::PauseEnd),
                Some(_) => due(end, DueKind::PausedRenewal),
            }
        }
    }
}

/// Runs the next scheduled transition at its due instant (see [`next_due`]); what the scheduler
/// calls for each due job. Renewals charge the new period; paused renewals, pause starts and
/// expirations charge nothing.
pub fn advance(sub: &Subscription) -> Result<Transition, LifecycleError> {
    let due = next_due(sub).ok_or(LifecycleError::NothingDue)?;
    let at = due.at;
    let mut s = sub.clone();
    let mut lines = Vec::new();
    match due.kind {
        DueKind::Activation => return activate(sub, at),
        DueKind::Expiration => expire(&mut s, at),
        DueKind::PauseStart | DueKind::PausedRenewal => {
            s.state = SubscriptionState::Paused;
            s.remaining_pause_cycles = s.remaining_pause_cycles.map(|n| n.saturating_sub(1));
            open_unbilled_period(&mut s, at)?;
        }
        DueKind::PauseEnd => {
            s.state = SubscriptionState::Active;
            s.paused_at = None;
            s.remaining_pause_cycles = None;
            begin_billed_period(&mut s, at, &mut lines)?;
        }
        DueKind::TrialEnd | DueKind::Renewal => begin_billed_period(&mut s, at, &mut lines)?,
    }
    Ok(Transition::new(s, lines, InvoiceOrigin::Renewal))
}

/// Runs every transition due at or before `now`, in order, collecting their lines (origin
/// `purchase` when an activation was among them, else `renewal`). A request handler calls this
/// before applying an action.
pub fn advance_to(sub: &Subscription, now: DateTime<Utc>) -> Result<Transition, LifecycleError> {
    let mut s = sub.clone();
    let mut lines = Vec::new();
    let mut origin = InvoiceOrigin::Renewal;
    while let Some(due) = next_due(&s) {
        if due.at > now {
            break;
        }
        if due.kind == DueKind::Activation {
            origin = InvoiceOrigin::Purchase;
        }
        let step = advance(&s)?;
        s = step.subscription;
        lines.extend(step.lines);
    }
    Ok(Transition::new(s, lines, origin))
}

/// Changes the terms. `Now` in a billed period credits the old terms and charges the new ones
/// for the rest of the period (a new period starts now if the interval changes); `Renewal`
/// stores a pending change applied at the next billed renewal. Before activation, in a trial or
/// in a paused period the terms are replaced without charge. A new change replaces a pending
/// one.
pub fn change(
    sub: &Subscription,
    terms: SubscriptionTerms,
    timeframe: Timeframe,
    now: DateTime<Utc>,
) -> Result<Transition, LifecycleError> {
    match sub.state {
        SubscriptionState::Expired => return Err(LifecycleError::AlreadyExpired),
        SubscriptionState::Canceled => {
            return Err(LifecycleError::InvalidTransition { action: "change", state: sub.state });
        }
        _ => {}
    }
    terms.validate()?;
    if terms.currency != sub.terms.currency {
        return Err(LifecycleError::CurrencyMismatch);
    }
    ensure_current(sub, now)?;
    let mut s = sub.clone();
    let mut lines = Vec::new();
    match (s.state, timeframe) {
        (SubscriptionState::Future | SubscriptionState::Pending, _) => {
            s.terms = terms;
            s.pending_change = None;
        }
        (_, Timeframe::Renewal) => s.pending_change = Some(terms),
        (_, Timeframe::Now) => {
            s.pending_change = None;
            match billed_period(&s) {
                None => {
                    if terms.interval != s.terms.interval
                        && let Some(end) = s.current_period_ends_at
                    {
                        s.billing_anchor = end;
                    }
                    s.terms = terms;
                }
                Some((period, key_end)) => {
                    lines.extend(credit_from(&s, now)?);
                    if terms.interval == s.terms.interval {
                        let rest = Period { start: now, end: period.end };
                        lines.extend(invoice::segment_lines(&s.uuid, period, key_end, rest, &terms, false)?);
                        match s.billed_segments.last_mut() {
                            Some(last) if last.from == now => last.terms = terms.clone(),
                            _ => s.billed_segments.push(BilledSegment { from: now, terms: terms.clone() }),
                        }
                        s.terms = terms;
                    } else {
                        let pause_scheduled = s.has_scheduled_pause();
                        s.terms = terms;
                        s.billing_anchor = now;
                        open_billed_period(&mut s, now, &mut lines)?;
                        if pause_scheduled {
                            s.paused_at = s.current_period_ends_at;
                        }
                    }
                }
            }
        }
    }
    Ok(Transition::new(s, lines, InvoiceOrigin::ImmediateChange))
}

/// `PUT …/pause` with `remaining_pause_cycles = cycles` (billing-behaviour §4.1): on an active
/// subscription schedules (or, with a pause scheduled, replaces; 0 cancels) a pause starting at
/// the period end; on a paused one sets the paused renewals left (0 resumes at the next
/// renewal). No charge.
pub fn pause(sub: &Subscription, cycles: i64, now: DateTime<Utc>) -> Result<Transition, LifecycleError> {
    let cycles = u32::try_from(cycles).map_err(|_| LifecycleError::InvalidPauseCycles)?;
    match sub.state {
        SubscriptionState::Active | SubscriptionState::Paused => {}
        SubscriptionState::Expired => return Err(LifecycleError::AlreadyExpired),
        state => return Err(LifecycleError::InvalidTransition { action: "pause", state }),
    }
    ensure_current(sub, now)?;
    let mut s = sub.clone();
    if s.state == SubscriptionState::Paused {
        s.remaining_pause_cycles = Some(cycles);
    } else if cycles == 0 {
        s.paused_at = None;
        s.remaining_pause_cycles = None;
    } else {
        s.paused_at = s.current_period_ends_at;
        s.remaining_pause_cycles = Some(cycles);
    }
    Ok(Transition { subscription: s, lines: Vec::new(), origin: None })
}

/// `PUT …/resume`: ends a pause now. A new billed period starts now (the schedule is re-anchored
/// at now), any pending change applies, and the period is charged (origin `renewal`). On an
/// active subscription whose pause is only scheduled, the scheduled pause is dropped (as a pause
/// of 0 cycles drops it) and nothing else changes: the paid period runs on, no charge.
pub fn resume(sub: &Subscription, now: DateTime<Utc>) -> Result<Transition, LifecycleError> {
    if sub.has_scheduled_pause() {
        ensure_current(sub, now)?;
        let mut s = sub.clone();
        s.paused_at = None;
        s.remaining_pause_cycles = None;
        return Ok(Transition { subscription: s, lines: Vec::new(), origin: None });
    }
    if sub.state != SubscriptionState::Paused {
        return Err(LifecycleError::NotPaused);
    }
    ensure_current(sub, now)?;
    let mut s = sub.clone();
    let mut lines = Vec::new();
    s.state = SubscriptionState::Active;
    s.paused_at = None;
    s.remaining_pause_cycles = None;
    s.billing_anchor = now;
    begin_billed_period(&mut s, now, &mut lines)?;
    Ok(Transition::new(s, lines, InvoiceOrigin::Renewal))
}

/// `PUT …/cancel`: the subscription runs to the end of the current period (`expires_at`), then
/// expires. No charge or credit.
pub fn cancel(sub: &Subscription, now: DateTime<Utc>) -> Result<Transition, LifecycleError> {
    match sub.state {
        SubscriptionState::Active | SubscriptionState::Paused => {}
        SubscriptionState::Canceled => return Err(LifecycleError::AlreadyCanceled),
        SubscriptionState::Expired => return Err(LifecycleError::AlreadyExpired),
        state => return Err(LifecycleError::InvalidTransition { action: "cancel", state }),
    }
    ensure_current(sub, now)?;
    let mut s = sub.clone();
    s.state = SubscriptionState::Canceled;
    s.canceled_at = Some(now);
    s.expires_at = s.current_period_ends_at;
    Ok(Transition { subscription: s, lines: Vec::new(), origin: None })
}

/// `PUT …/reactivate`: undoes a cancel before `expires_at` (back to `active`, or `paused` if
/// canceled during a pause). No charge.
pub fn reactivate(sub: &Subscription, now: DateTime<Utc>) -> Result<Transition, LifecycleError> {
    match sub.state {
        SubscriptionState::Canceled => {}
        SubscriptionState::Expired => return Err(LifecycleError::AlreadyExpired),
        _ => return Err(LifecycleError::NotCanceled),
    }
    if sub.expires_at.is_some_and(|end| end <= now) {
        return Err(LifecycleError::AlreadyExpired);
    }
    ensure_current(sub, now)?;
    let mut s = sub.clone();
    s.state = if s.pause_started() { SubscriptionState::Paused } else { SubscriptionState::Active };
    s.canceled_at = None;
    s.expires_at = None;
    Ok(Transition { subscription: s, lines: Vec::new(), origin: None })
}

/// `PUT …/terminate?refund=…`: ends the subscription now (`expired`, `expires_at` now,
/// `canceled_at` now unless an earlier cancel set it), crediting none, the unused part or all of
/// the current billed period (origin `termination`).
pub fn terminate(sub: &Subscription, refund: Refund, now: DateTime<Utc>) -> Result<Transition, LifecycleError> {
    if sub.state == SubscriptionState::Expired {
        return Err(LifecycleError::AlreadyExpired);
    }
    ensure_current(sub, now)?;
    let mut s = sub.clone();
    let lines = match (s.current_period(), refund) {
        (Some(period), Refund::Full) => credit_from(&s, period.start)?,
        (Some(_), Refund::Partial) => credit_from(&s, now)?,
        _ => Vec::new(),
    };
    s.state = SubscriptionState::Expired;
    s.terminated_at = Some(now);
    s.canceled_at = s.canceled_at.or(Some(now));
    s.expires_at = Some(now);
    clear_billed_period(&mut s);
    Ok(Transition::new(s, lines, InvoiceOrigin::Termination))
}

/// `PUT …/postpone?next_renewal_date=…`: moves the current period end (and the schedule) to
/// `next_renewal`, without charge or credit; a trial end or scheduled pause there moves along.
pub fn postpone(
    sub: &Subscription,
    next_renewal: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Transition, LifecycleError> {
    match sub.state {
        SubscriptionState::Active | SubscriptionState::Paused => {}
        SubscriptionState::Expired => return Err(LifecycleError::AlreadyExpired),
        state => return Err(LifecycleError::InvalidTransition { action: "postpone", state }),
    }
    ensure_current(sub, now)?;
    if next_renewal <= now {
        return Err(LifecycleError::InvalidRenewalDate);
    }
    let mut s = sub.clone();
    let old_end = s.current_period_ends_at;
    if s.has_scheduled_pause() {
        s.paused_at = Some(next_renewal);
    }
    if s.trial_ends_at.is_some() && s.trial_ends_at == old_end {
        s.trial_ends_at = Some(next_renewal);
    }
    s.current_period_ends_at = Some(next_renewal);
    s.billing_anchor = next_renewal;
    Ok(Transition { subscription: s, lines: Vec::new(), origin: None })
}

/// Sets the billed periods still to start (`None` = renew forever): the manual renewal of a
/// term, or shortening it. No charge.
pub fn set_remaining_billing_cycles(
    sub: &Subscription,
    remaining: Option<u32>,
    now: DateTime<Utc>,
) -> Result<Transition, LifecycleError> {
    if sub.state == SubscriptionState::Expired {
        return Err(LifecycleError::AlreadyExpired);
    }
    ensure_current(sub, now)?;
    let mut s = sub.clone();
    s.remaining_billing_cycles = remaining;
    Ok(Transition { subscription: s, lines: Vec::new(), origin: None })
}

/// Sets `imported_trial`: a change is only allowed while a trial is ahead or running
/// ([`LifecycleError::ImportedTrialNotInTrial`] otherwise); setting the current value is a no-op.
pub fn set_imported_trial(
    sub: &Subscription,
    imported_trial: bool,
    now: DateTime<Utc>,
) -> Result<Transition, LifecycleError> {
    if sub.imported_trial == imported_trial {
        return Ok(Transition { subscription: sub.clone(), lines: Vec::new(), origin: None });
    }
    let trial_ahead_or_running = matches!(
        sub.state,
        SubscriptionState::Future
            | SubscriptionState::Pending
            | SubscriptionState::Active
            | SubscriptionState::Canceled
    ) && sub.trial_ends_at.is_some_and(|end| now < end);
    if !trial_ahead_or_running {
        return Err(LifecycleError::ImportedTrialNotInTrial);
    }
    let mut s = sub.clone();
    s.imported_trial = imported_trial;
    Ok(Transition { subscription: s, lines: Vec::new(), origin: None })
}

/// Marks a renewal as failed to collect: the subscription becomes past due (its state stays).
pub fn fail_renewal(sub: &Subscription) -> Result<Subscription, LifecycleError> {
    match sub.state {
        SubscriptionState::Active | SubscriptionState::Canceled | SubscriptionState::Paused => {}
        SubscriptionState::Expired => return Err(LifecycleError::AlreadyExpired),
        state => return Err(LifecycleError::InvalidTransition { action: "fail the renewal of", state }),
    }
    let mut s = sub.clone();
    s.past_due = true;
    Ok(s)
}

/// The past-due invoice was collected: the subscription is no longer past due.
pub fn recover(sub: &Subscription) -> Result<Subscription, LifecycleError> {
    let mut s = sub.clone();
    s.past_due = false;
    Ok(s)
}

/// Starts a billed period at `start` (activation, trial end, renewal, pause end, resume),
/// applying a pending change and counting a billing cycle; expires instead when none is left.
fn begin_billed_period(
    s: &mut Subscription,
    start: DateTime<Utc>,
    lines: &mut Vec<LineItem>,
) -> Result<(), LifecycleError> {
    if s.remaining_billing_cycles == Some(0) {
        expire(s, start);
        return Ok(());
    }
    if let Some(next) = s.pending_change.take() {
        if next.interval != s.terms.interval {
            s.billing_anchor = start;
        }
        s.terms = next;
    }
    s.remaining_billing_cycles = s.remaining_billing_cycles.map(|n| n.saturating_sub(1));
    open_billed_period(s, start, lines)
}

/// Makes the period of the schedule starting at `start` current, billed in full at the terms.
fn open_billed_period(
    s: &mut Subscription,
    start: DateTime<Utc>,
    lines: &mut Vec<LineItem>,
) -> Result<(), LifecycleError> {
    let period = Period { start, end: s.terms.interval.next_boundary_after(s.billing_anchor, start)? };
    s.current_period_started_at = Some(period.start);
    s.current_period_ends_at = Some(period.end);
    s.billed_segments = vec![BilledSegment { from: start, terms: s.terms.clone() }];
    s.billed_period_key_end = Some(period.end);
    lines.extend(invoice::segment_lines(&s.uuid, period, period.end, period, &s.terms, false)?);
    Ok(())
}

/// Makes the period of the schedule starting at `start` current, not billed (a pause).
fn open_unbilled_period(s: &mut Subscription, start: DateTime<Utc>) -> Result<(), LifecycleError> {
    s.current_period_started_at = Some(start);
    s.current_period_ends_at = Some(s.terms.interval.next_boundary_after(s.billing_anchor, start)?);
    clear_billed_period(s);
    Ok(())
}

fn clear_billed_period(s: &mut Subscription) {
    s.billed_segments.clear();
    s.billed_period_key_end = None;
}

fn expire(s: &mut Subscription, at: DateTime<Utc>) {
    s.state = SubscriptionState::Expired;
    s.expires_at = Some(s.expires_at.unwrap_or(at));
    clear_billed_period(s);
}

/// The current period and the end naming it, when it is billed.
fn billed_period(s: &Subscription) -> Option<(Period, DateTime<Utc>)> {
    if s.billed_segments.is_empty() {
        return None;
    }
    let period = s.current_period()?;
    Some((period, s.billed_period_key_end.unwrap_or(period.end)))
}

/// Credits for everything billed in the current period from `from` on.
fn credit_from(s: &Subscription, from: DateTime<Utc>) -> Result<Vec<LineItem>, LifecycleError> {
    let Some((period, key_end)) = billed_period(s) else { return Ok(Vec::new()) };
    let mut lines = Vec::new();
    for (i, segment) in s.billed_segments.iter().enumerate() {
        let end = s.billed_segments.get(i + 1).map_or(period.end, |next| next.from);
        let start = segment.from.max(from);
        if start < end {
            let span = Period { start, end };
            lines.extend(invoice::segment_lines(&s.uuid, period, key_end, span, &segment.terms, true)?);
        }
    }
    Ok(lines)
}

/// Refuses a stale value (a transition due at or before `now`) or an instant before the last
/// change.
fn ensure_current(s: &Subscription, now: DateTime<Utc>) -> Result<(), LifecycleError> {
    if let Some(due) = next_due(s)
        && due.at <= now
    {
        return Err(LifecycleError::NotAdvanced { due: due.at });
    }
    let last_change = s.billed_segments.last().map(|seg| seg.from).or(s.current_period_started_at);
    if last_change.is_some_and(|t| now < t) {
        return Err(LifecycleError::OutOfOrder { at: now });
    }
    Ok(())
}

/// An action of a subscription's history (one accepted API call or event), applied with
/// [`apply`]. Renewals are not actions: they follow from the schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// [`activate`] a pending subscription.
    Activate,
    /// [`change`].
    Change {
        /// The new terms.
        terms: SubscriptionTerms,
        /// Now or at renewal.
        timeframe: Timeframe,
    },
    /// [`pause`].
    Pause {
        /// The requested `remaining_pause_cycles`.
        remaining_pause_cycles: i64,
    },
    /// [`resume`].
    Resume,
    /// [`cancel`].
    Cancel,
    /// [`reactivate`].
    Reactivate,
    /// [`terminate`].
    Terminate {
        /// What to refund.
        refund: Refund,
    },
    /// [`postpone`].
    Postpone {
        /// The new renewal date.
        next_renewal: DateTime<Utc>,
    },
    /// [`set_remaining_billing_cycles`].
    SetRemainingBillingCycles {
        /// The new count (`None` = forever).
        remaining_billing_cycles: Option<u32>,
    },
    /// [`set_imported_trial`].
    SetImportedTrial {
        /// The new value.
        imported_trial: bool,
    },
}

/// Applies one action at `now` (no catching up: call [`advance_to`] first).
pub fn apply(sub: &Subscription, action: &Action, now: DateTime<Utc>) -> Result<Transition, LifecycleError> {
    match action {
        Action::Activate => activate(sub, now),
        Action::Change { terms, timeframe } => change(sub, terms.clone(), *timeframe, now),
        Action::Pause { remaining_pause_cycles } => pause(sub, *remaining_pause_cycles, now),
        Action::Resume => resume(sub, now),
        Action::Cancel => cancel(sub, now),
        Action::Reactivate => reactivate(sub, now),
        Action::Terminate { refund } => terminate(sub, *refund, now),
        Action::Postpone { next_renewal } => postpone(sub, *next_renewal, now),
        Action::SetRemainingBillingCycles { remaining_billing_cycles } => {
            set_remaining_billing_cycles(sub, *remaining_billing_cycles, now)
        }
        Action::SetImportedTrial { imported_trial } => set_imported_trial(sub, *imported_trial, now),
    }
}
