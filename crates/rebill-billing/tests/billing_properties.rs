//! Properties of recompute-and-diff billing over random subscription histories.

mod common;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use proptest::prelude::*;
use rebill_billing::invoice::{self, LineItem, LineKind};
use rebill_billing::lifecycle::{
    self, Action, AddOnTerms, NewSubscription, Refund, SubscriptionState, SubscriptionTerms, Timeframe, Trial,
};
use rebill_billing::period::{Interval, Period};
use rebill_billing::proration;

use common::{HistoryEntry, SubscriptionHistory};

fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 31, 0, 0, 0).single().expect("valid date")
}

fn arb_interval() -> impl Strategy<Value = Interval> {
    prop_oneof![(3u32..40).prop_map(Interval::days), (1u32..4).prop_map(Interval::months), Just(Interval::months(12))]
}

fn arb_terms() -> impl Strategy<Value = SubscriptionTerms> {
    (
        prop_oneof![Just("basic"), Just("pro"), Just("max")],
        arb_interval(),
        0i64..100_000,
        1u32..4,
        proptest::collection::vec((0i64..5_000, 0u32..4), 0..3),
        prop_oneof![Just(0i64), 1i64..5_000],
    )
        .prop_map(|(plan, interval, unit, quantity, add_ons, setup)| SubscriptionTerms {
            add_ons: add_ons
                .into_iter()
                .enumerate()
                .map(|(i, (unit_amount_in_cents, quantity))| AddOnTerms {
                    add_on_code: format!("addon{i}"),
                    unit_amount_in_cents,
                    quantity,
                })
                .collect(),
            quantity,
            setup_fee_in_cents: setup,
            ..SubscriptionTerms::new(plan, "USD", interval, unit)
        })
}

#[derive(Debug, Clone)]
enum Step {
    Change(SubscriptionTerms, bool),
    Pause(i64),
    Resume,
    Cancel,
    Reactivate,
    Terminate(u8),
    Postpone(i64),
    Cycles(Option<u32>),
    ImportedTrial(bool),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (arb_terms(), any::<bool>()).prop_map(|(t, now)| Step::Change(t, now)),
        4 => (0i64..4).prop_map(Step::Pause),
        3 => Just(Step::Resume),
        1 => Just(Step::Cancel),
        2 => Just(Step::Reactivate),
        1 => (0u8..3).prop_map(Step::Terminate),
        1 => (1i64..1_500).prop_map(Step::Postpone),
        1 => proptest::option::weighted(0.7, 1u32..6).prop_map(Step::Cycles),
        1 => any::<bool>().prop_map(Step::ImportedTrial),
    ]
}

/// A random creation and random steps, hours apart (so they sometimes land on boundaries).
fn arb_story() -> impl Strategy<Value = (NewSubscription, i64, Vec<(i64, Step)>, i64)> {
    (
        arb_terms(),
        prop_oneof![Just(None), (1u32..20).prop_map(|d| Some(Trial::For(Interval::days(d))))],
        proptest::option::weighted(0.3, 2u32..12),
        prop_oneof![Just(0i64), 1i64..(40 * 24)],
        proptest::collection::vec((prop_oneof![Just(0i64), 1i64..(50 * 24)], arb_step()), 0..20),
        0i64..(200 * 24),
    )
        .prop_map(|(terms, trial, cycles, start_in_hours, steps, tail_hours)| {
            let new = NewSubscription {
                starts_at: (start_in_hours > 0).then(|| base() + TimeDelta::hours(start_in_hours)),
                trial,
                total_billing_cycles: cycles,
                ..NewSubscription::new("sub", terms)
            };
            (new, start_in_hours, steps, tail_hours)
        })
}

fn action(step: Step, at: DateTime<Utc>) -> Action {
    match step {
        Step::Change(mut terms, now) => {
            terms.setup_fee_in_cents = 0;
            Action::Change { terms, timeframe: if now { Timeframe::Now } else { Timeframe::Renewal } }
        }
        Step::Pause(n) => Action::Pause { remaining_pause_cycles: n },
        Step::Resume => Action::Resume,
        Step::Cancel => Action::Cancel,
        Step::Reactivate => Action::Reactivate,
        Step::Terminate(r) => {
            Action::Terminate { refund: [Refund::None, Refund::Partial, Refund::Full][usize::from(r)] }
        }
        Step::Postpone(h) => Action::Postpone { next_renewal: at + TimeDelta::hours(h) },
        Step::Cycles(n) => Action::SetRemainingBillingCycles { remaining_billing_cycles: n },
        Step::ImportedTrial(b) => Action::SetImportedTrial { imported_trial: b },
    }
}

/// Builds a valid history: steps that the lifecycle refuses at their time are dropped.
fn build(new: NewSubscription, steps: Vec<(i64, Step)>) -> (SubscriptionHistory, DateTime<Utc>) {
    let mut at = base();
    let mut entries = Vec::new();
    for (gap, step) in steps {
        at += TimeDelta::hours(gap);
        entries.push(HistoryEntry { at, action: action(step, at) });
    }
    (keep_valid(new, entries), at)
}

/// The history of `entries` without those the lifecycle refuses at their time.
fn keep_valid(new: NewSubscription, entries: Vec<HistoryEntry>) -> SubscriptionHistory {
    let mut history = SubscriptionHistory::new(base(), new);
    for entry in entries {
        let at = entry.at;
        history.entries.push(entry);
        if common::replay(&history, at).is_err() {
            history.entries.pop();
        }
    }
    history
}

fn total(lines: &[LineItem]) -> i64 {
    lines.iter().map(|l| l.total_in_cents).sum()
}

fn has_postpone(history: &SubscriptionHistory) -> bool {
    history.entries.iter().any(|e| matches!(e.action, Action::Postpone { .. }))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Billing what `expected` returns, then recomputing, adds nothing; the lines are sane.
    #[test]
    fn billing_the_expected_lines_is_idempotent((new, _start, steps, tail) in arb_story()) {
        let (history, last) = build(new, steps);
        let up_to = last + TimeDelta::hours(tail);
        let replay = common::replay(&history, up_to).expect("built valid");
        let expected = replay.lines;
        prop_assert!(invoice::diff(&expected, &expected).expect("valid").is_empty());
        let first = invoice::diff(&expected, &[]).expect("valid");
        if !has_postpone(&history) {
            prop_assert_eq!(total(&first), total(&expected));
        }
        prop_assert!(invoice::diff(&expected, &first).expect("valid").is_empty());
        for line in &expected {
            prop_assert!(line.start <= line.end);
            prop_assert!(line.end <= line.period_end || line.kind == LineKind::SetupFee);
            prop_assert!(line.key.period_start <= line.start);
            if line.is_credit() {
                prop_assert!(line.total_in_cents <= 0);
            } else {
                prop_assert!(line.total_in_cents >= 0);
            }
        }
        let sub = replay.subscription.expect("created at base");
        if let Some(p) = sub.current_period() {
            prop_assert!(p.start < p.end);
        }
        prop_assert!(sub.state != SubscriptionState::Paused || sub.remaining_pause_cycles.is_some());
        // In a billed period a counted pause has not started: it waits for the period end.
        if sub.is_billed_period() && sub.remaining_pause_cycles.is_some() {
            prop_assert_eq!(sub.paused_at, sub.current_period_ends_at);
        }
        prop_assert!(!sub.is_billed_period() || matches!(sub.state, SubscriptionState::Active | SubscriptionState::Canceled));
        if let Some(due) = lifecycle::next_due(&sub) {
            prop_assert!(due.at > up_to);
        }
    }

    /// Billing step by step as time passes ends with the same coverage as billing once, and
    /// (without postponements) the same money to the cent.
    #[test]
    fn incremental_billing_converges((new, _start, steps, tail) in arb_story(), checkpoints in proptest::collection::vec(0i64..(60 * 24), 1..12)) {
        let (history, last) = build(new, steps);
        let end = last + TimeDelta::hours(tail);
        let mut billed = Vec::new();
        let mut at = base();
        for gap in checkpoints {
            at += TimeDelta::hours(gap);
            let new_lines = common::bill(&history, at.min(end), &billed).expect("valid");
            billed.extend(new_lines);
        }
        let new_lines = common::bill(&history, end, &billed).expect("valid");
        billed.extend(new_lines);
        prop_assert!(common::bill(&history, end, &billed).expect("valid").is_empty());
        if !has_postpone(&history) {
            prop_assert_eq!(total(&billed), total(&common::expected(&history, end)));
        }
    }

    /// Changing the history (one more action, backdated) yields repair items after which the
    /// billed lines match the new history.
    #[test]
    fn history_edits_are_repaired((new, _start, steps, tail) in arb_story(), edit in (0usize..14, arb_step())) {
        let (history, last) = build(new, steps);
        let end = last + TimeDelta::hours(tail);
        let billed = common::expected(&history, end);
        let (index, step) = edit;
        let index = index.min(history.entries.len());
        let at = if index == 0 { base() } else { history.entries[index - 1].at };
        let mut entries = history.entries.clone();
        entries.insert(index, HistoryEntry { at, action: action(step, at) });
        // Later entries the edit made invalid are dropped, as a correction would.
        let edited = keep_valid(history.creation.clone(), entries);
        let repair = common::bill(&edited, end, &billed).expect("valid");
        let mut all = billed.clone();
        all.extend(repair);
        prop_assert!(common::bill(&edited, end, &all).expect("valid").is_empty());
        if !has_postpone(&edited) {
            prop_assert_eq!(total(&all), total(&common::expected(&edited, end)));
        }
    }
}

proptest! {
    /// A pause of N cycles requested at any time of a billed period skips exactly the next N
    /// periods of the schedule, then renews on it.
    #[test]
    fn a_pause_skips_exactly_n_periods(interval in arb_interval(), cycles in 1i64..6, offset in 0.0f64..1.0) {
        let terms = SubscriptionTerms::new("gold", "USD", interval, 1000);
        let sub = lifecycle::create(NewSubscription::new("p", terms), base()).expect("valid").subscription;
        let first = sub.current_period().expect("billed");
        let now = first.start + TimeDelta::seconds((first.seconds() as f64 * offset) as i64);
        let mut sub = lifecycle::pause(&sub, cycles, now).expect("active").subscription;
        let mut skipped = 0;
        loop {
            let step = lifecycle::advance(&sub).expect("due");
            sub = step.subscription;
            if step.lines.is_empty() {
                prop_assert_eq!(sub.state, SubscriptionState::Paused);
                skipped += 1;
            } else {
                prop_assert_eq!(sub.state, SubscriptionState::Active);
                prop_assert_eq!(total(&step.lines), 1000);
                break;
            }
        }
        prop_assert_eq!(skipped, cycles);
        let n = u32::try_from(cycles).expect("small") + 1;
        prop_assert_eq!(sub.current_period_started_at, Some(interval.boundary(base(), n).expect("in range")));
    }
}

proptest! {
    /// A plan change with `timeframe=now` at any time of a billed period (what the service runs
    /// for `PUT /subscriptions/{uuid}` with `timeframe=now`) credits the old price and charges
    /// the new one for the rest of the period, each the exact span amount of the period; a change
    /// to the same price nets to zero.
    #[test]
    fn an_immediate_change_credits_and_charges_the_rest_exactly(
        interval in arb_interval(),
        old in 0i64..10_000_000,
        new in 0i64..10_000_000,
        offset in 0.0f64..1.0,
    ) {
        let sub = lifecycle::create(NewSubscription::new("p", SubscriptionTerms::new("basic", "USD", interval, old)), base())
            .expect("valid")
            .subscription;
        let period = sub.current_period().expect("billed");
        let at = period.start + TimeDelta::seconds((period.seconds() as f64 * offset) as i64);
        let rest = Period { start: at, end: period.end };
        let sums = |price: i64| {
            let terms = SubscriptionTerms::new("pro", "USD", interval, price);
            let changed = lifecycle::change(&sub, terms, Timeframe::Now, at).expect("inside the period");
            let credit: i64 = changed.lines.iter().filter(|l| l.is_credit()).map(|l| l.total_in_cents).sum();
            let charge: i64 = changed.lines.iter().filter(|l| !l.is_credit()).map(|l| l.total_in_cents).sum();
            (credit, charge)
        };
        let (credit, charge) = sums(new);
        prop_assert_eq!(credit, -proration::span_amount(old, period, rest).expect("inside"));
        prop_assert_eq!(charge, proration::span_amount(new, period, rest).expect("inside"));
        let (credit, charge) = sums(old);
        prop_assert_eq!(credit + charge, 0);
    }
}
