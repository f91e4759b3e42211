//! Subscription stories through the public API, with exact dates and cents.

mod common;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use rebill_billing::invoice::{InvoiceOrigin, ItemRef, LineItem, LineKind};
use rebill_billing::lifecycle::{
    self, Action, AddOnTerms, DueKind, LifecycleError, NewSubscription, Refund, StateFilter, Subscription,
    SubscriptionState, SubscriptionTerms, Timeframe, Transition, Trial,
};
use rebill_billing::period::Interval;

use common::{HistoryEntry, SubscriptionHistory};

fn at(y: i32, m: u32, d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, h, 0, 0).single().expect("valid date")
}

fn day(y: i32, m: u32, d: u32) -> DateTime<Utc> {
    at(y, m, d, 0)
}

fn monthly(plan: &str, cents: i64) -> SubscriptionTerms {
    SubscriptionTerms::new(plan, "USD", Interval::months(1), cents)
}

fn total(lines: &[LineItem]) -> i64 {
    lines.iter().map(|l| l.total_in_cents).sum()
}

fn spans(lines: &[LineItem]) -> Vec<(LineKind, DateTime<Utc>, DateTime<Utc>, i64)> {
    lines.iter().map(|l| (l.kind, l.start, l.end, l.total_in_cents)).collect()
}

fn period(sub: &Subscription) -> (DateTime<Utc>, DateTime<Utc>) {
    (sub.current_period_started_at.expect("has a period"), sub.current_period_ends_at.expect("has a period"))
}

fn step(sub: &Subscription) -> Transition {
    lifecycle::advance(sub).expect("something due")
}

#[test]
fn twelve_month_term_renews_eleven_times_then_expires() {
    let start = at(2025, 1, 15, 10);
    let new =
        NewSubscription { total_billing_cycles: Some(12), ..NewSubscription::new("sub-12", monthly("gold", 1000)) };
    let created = lifecycle::create(new.clone(), start).expect("valid");
    assert_eq!(created.origin, Some(InvoiceOrigin::Purchase));
    assert_eq!(spans(&created.lines), vec![(LineKind::Plan, start, at(2025, 2, 15, 10), 1000)]);
    assert_eq!(created.lines[0].description, "Plan gold");
    assert_eq!(created.subscription.remaining_billing_cycles, Some(11));

    let mut sub = created.subscription;
    let mut billed = created.lines;
    for month in 2..=12u32 {
        let due = lifecycle::next_due(&sub).expect("renews");
        assert_eq!(due, lifecycle::Due { at: at(2025, month, 15, 10), kind: DueKind::Renewal });
        let renewed = step(&sub);
        assert_eq!(renewed.origin, Some(InvoiceOrigin::Renewal));
        let end = if month == 12 { at(2026, 1, 15, 10) } else { at(2025, month + 1, 15, 10) };
        assert_eq!(spans(&renewed.lines), vec![(LineKind::Plan, due.at, end, 1000)]);
        sub = renewed.subscription;
        billed.extend(renewed.lines);
    }
    assert_eq!(sub.remaining_billing_cycles, Some(0));
    assert_eq!(total(&billed), 12_000);
    assert_eq!(lifecycle::next_due(&sub).map(|d| d.kind), Some(DueKind::Expiration));
    let expired = step(&sub);
    assert!(expired.lines.is_empty());
    assert_eq!(expired.subscription.state, SubscriptionState::Expired);
    assert_eq!(expired.subscription.expires_at, Some(at(2026, 1, 15, 10)));
    assert_eq!(lifecycle::next_due(&expired.subscription), None);

    // The history gives the same twelve charges, and billing again adds nothing.
    let history = SubscriptionHistory::new(start, new);
    assert_eq!(common::expected(&history, at(2027, 1, 1, 0)), billed);
    assert!(common::bill(&history, at(2027, 1, 1, 0), &billed).expect("replays").is_empty());
}

#[test]
fn manual_renewal_of_a_term() {
    let new = NewSubscription { total_billing_cycles: Some(1), ..NewSubscription::new("s", monthly("gold", 1000)) };
    let sub = lifecycle::create(new, day(2025, 1, 1)).expect("valid").subscription;
    assert_eq!(lifecycle::next_due(&sub).map(|d| d.kind), Some(DueKind::Expiration));
    let renewed =
        lifecycle::set_remaining_billing_cycles(&sub, Some(2), day(2025, 1, 20)).expect("active").subscription;
    let next = step(&renewed);
    assert_eq!(total(&next.lines), 1000);
    assert_eq!(next.subscription.remaining_billing_cycles, Some(1));
}

#[test]
fn yearly_plan_from_a_leap_day() {
    let terms = SubscriptionTerms::new("annual", "USD", Interval::months(12), 12_000);
    let mut sub = lifecycle::create(NewSubscription::new("y", terms), day(2024, 2, 29)).expect("valid").subscription;
    assert_eq!(period(&sub), (day(2024, 2, 29), day(2025, 2, 28)));
    for (start, end) in [
        (day(2025, 2, 28), day(2026, 2, 28)),
        (day(2026, 2, 28), day(2027, 2, 28)),
        (day(2027, 2, 28), day(2028, 2, 29)),
    ] {
        let renewed = step(&sub);
        assert_eq!(spans(&renewed.lines), vec![(LineKind::Plan, start, end, 12_000)]);
        sub = renewed.subscription;
    }
}

#[test]
fn seven_day_plan() {
    let terms = SubscriptionTerms::new("weekly", "USD", Interval::days(7), 700);
    let start = Utc.with_ymd_and_hms(2025, 3, 27, 22, 30, 15).single().expect("valid");
    let created = lifecycle::create(NewSubscription::new("w", terms), start).expect("valid");
    let mut sub = created.subscription;
    let mut ends = Vec::new();
    for _ in 0..4 {
        let renewed = step(&sub);
        sub = renewed.subscription;
        ends.push(period(&sub).1);
    }
    // Exact 24-hour days across the end of March (no daylight saving in UTC).
    let expected: Vec<_> = [(4, 10), (4, 17), (4, 24), (5, 1)]
        .iter()
        .map(|&(m, d)| Utc.with_ymd_and_hms(2025, m, d, 22, 30, 15).unwrap())
        .collect();
    assert_eq!(ends, expected);
}

#[test]
fn month_end_anchor() {
    let mut sub = lifecycle::create(NewSubscription::new("m", monthly("gold", 1000)), day(2025, 1, 31))
        .expect("valid")
        .subscription;
    let mut starts = vec![period(&sub).0];
    for _ in 0..5 {
        sub = step(&sub).subscription;
        starts.push(period(&sub).0);
    }
    assert_eq!(
        starts,
        vec![
            day(2025, 1, 31),
            day(2025, 2, 28),
            day(2025, 3, 31),
            day(2025, 4, 30),
            day(2025, 5, 31),
            day(2025, 6, 30)
        ]
    );
}

#[test]
fn trial_then_paid() {
    let start = at(2025, 5, 1, 9);
    let terms = SubscriptionTerms { setup_fee_in_cents: 500, ..monthly("gold", 2000) };
    let new = NewSubscription {
        trial: Some(Trial::For(Interval::days(14))),
        imported_trial: true,
        total_billing_cycles: Some(3),
        ..NewSubscription::new("t", terms)
    };
    let created = lifecycle::create(new, start).expect("valid");
    let sub = &created.subscription;
    // Only the setup fee at signup.
    assert_eq!(spans(&created.lines), vec![(LineKind::SetupFee, start, start, 500)]);
    assert_eq!(created.lines[0].key.item, ItemRef::SetupFee { plan_code: "gold".into() });
    assert_eq!(sub.state, SubscriptionState::Active);
    assert!(sub.in_trial(at(2025, 5, 10, 0)));
    assert!(StateFilter::InTrial.matches(sub, at(2025, 5, 10, 0)));
    assert!(StateFilter::Live.matches(sub, at(2025, 5, 10, 0)));
    assert_eq!((sub.trial_started_at, sub.trial_ends_at), (Some(start), Some(at(2025, 5, 15, 9))));
    assert_eq!(period(sub), (start, at(2025, 5, 15, 9)));
    assert_eq!(sub.remaining_billing_cycles, Some(3));
    assert_eq!(lifecycle::next_due(sub).map(|d| d.kind), Some(DueKind::TrialEnd));

    // imported_trial may change during the trial only.
    let flipped = lifecycle::set_imported_trial(sub, false, at(2025, 5, 2, 0)).expect("in trial").subscription;
    assert!(!flipped.imported_trial);

    let paid = step(sub);
    assert_eq!(spans(&paid.lines), vec![(LineKind::Plan, at(2025, 5, 15, 9), at(2025, 6, 15, 9), 2000)]);
    let paid = paid.subscription;
    assert!(!paid.in_trial(at(2025, 5, 20, 0)));
    assert_eq!(paid.remaining_billing_cycles, Some(2));
    assert_eq!(
        lifecycle::set_imported_trial(&paid, false, at(2025, 5, 20, 0)),
        Err(LifecycleError::ImportedTrialNotInTrial)
    );
    // Setting the same value is not a change.
    assert!(lifecycle::set_imported_trial(&paid, true, at(2025, 5, 20, 0)).is_ok());
}

#[test]
fn imported_trial_needs_a_trial_and_trial_end_must_follow_start() {
    let new = NewSubscription { imported_trial: true, ..NewSubscription::new("x", monthly("gold", 1000)) };
    assert_eq!(lifecycle::create(new, day(2025, 1, 1)), Err(LifecycleError::ImportedTrialNotInTrial));
    let new = NewSubscription {
        trial: Some(Trial::Until(day(2025, 1, 1))),
        ..NewSubscription::new("x", monthly("gold", 1000))
    };
    assert_eq!(lifecycle::create(new, day(2025, 1, 1)), Err(LifecycleError::InvalidTrialEnd));
    let new = NewSubscription { total_billing_cycles: Some(0), ..NewSubscription::new("x", monthly("gold", 1000)) };
    assert_eq!(lifecycle::create(new, day(2025, 1, 1)), Err(LifecycleError::InvalidBillingCycles));
}

#[test]
fn future_subscription_activates_at_its_start() {
    let new = NewSubscription {
        starts_at: Some(day(2025, 3, 1)),
        trial: Some(Trial::Until(day(2025, 3, 8))),
        ..NewSubscription::new("f", monthly("gold", 1000))
    };
    let created = lifecycle::create(new, day(2025, 2, 10)).expect("valid");
    assert!(created.lines.is_empty());
    let sub = created.subscription;
    assert_eq!(sub.state, SubscriptionState::Future);
    assert!(StateFilter::Future.matches(&sub, day(2025, 2, 10)));
    assert!(!StateFilter::Live.matches(&sub, day(2025, 2, 10)));
    assert_eq!(lifecycle::next_due(&sub), Some(lifecycle::Due { at: day(2025, 3, 1), kind: DueKind::Activation }));
    // The scheduler runs late: dates do not drift.
    let caught_up = lifecycle::advance_to(&sub, day(2025, 3, 20)).expect("catches up");
    assert_eq!(caught_up.origin, Some(InvoiceOrigin::Purchase));
    assert_eq!(spans(&caught_up.lines), vec![(LineKind::Plan, day(2025, 3, 8), day(2025, 4, 8), 1000)]);
    assert_eq!(caught_up.subscription.activated_at, Some(day(2025, 3, 1)));
}

#[test]
fn two_cycle_pause_then_automatic_resume() {
    let start = at(2025, 1, 15, 10);
    let mut sub =
        lifecycle::create(NewSubscription::new("p", monthly("gold", 1000)), start).expect("valid").subscription;
    sub = step(&sub).subscription; // Feb 15 renewal
    let now = day(2025, 2, 20);

    // Scheduled at the next renewal; the state stays active.
    let scheduled = lifecycle::pause(&sub, 2, now).expect("active");
    assert!(scheduled.lines.is_empty());
    let sub = scheduled.subscription;
    assert_eq!(sub.state, SubscriptionState::Active);
    assert_eq!(sub.paused_at, Some(at(2025, 3, 15, 10)));
    assert_eq!(sub.remaining_pause_cycles, Some(2));
    assert!(sub.has_scheduled_pause());
    assert_eq!(lifecycle::next_due(&sub).map(|d| d.kind), Some(DueKind::PauseStart));

    // Mar 15: the pause starts, nothing charged.
    let t = step(&sub);
    assert!(t.lines.is_empty());
    assert_eq!(t.origin, None);
    let sub = t.subscription;
    assert_eq!(sub.state, SubscriptionState::Paused);
    assert!(StateFilter::Paused.matches(&sub, day(2025, 3, 20)));
    assert_eq!(period(&sub), (at(2025, 3, 15, 10), at(2025, 4, 15, 10)));
    assert_eq!(sub.remaining_pause_cycles, Some(1));

    // Apr 15: a paused renewal, nothing charged.
    let t = step(&sub);
    assert!(t.lines.is_empty());
    let sub = t.subscription;
    assert_eq!(sub.state, SubscriptionState::Paused);
    assert_eq!(period(&sub), (at(2025, 4, 15, 10), at(2025, 5, 15, 10)));
    assert_eq!(sub.remaining_pause_cycles, Some(0));
    assert_eq!(lifecycle::next_due(&sub).map(|d| d.kind), Some(DueKind::PauseEnd));

    // May 15: renews normally and is active again.
    let t = step(&sub);
    assert_eq!(spans(&t.lines), vec![(LineKind::Plan, at(2025, 5, 15, 10), at(2025, 6, 15, 10), 1000)]);
    assert_eq!(t.subscription.state, SubscriptionState::Active);
    assert_eq!((t.subscription.paused_at, t.subscription.remaining_pause_cycles), (None, None));
}

#[test]
fn pause_counts_are_replaced_cancelled_and_adjusted() {
    let sub = lifecycle::create(NewSubscription::new("p", monthly("gold", 1000)), day(2025, 1, 1))
        .expect("valid")
        .subscription;
    let now = day(2025, 1, 10);
    let scheduled = lifecycle::pause(&sub, 3, now).expect("ok").subscription;
    let replaced = lifecycle::pause(&scheduled, 1, now).expect("ok").subscription;
    assert_eq!(replaced.remaining_pause_cycles, Some(1));
    let cancelled = lifecycle::pause(&replaced, 0, now).expect("ok").subscription;
    assert_eq!((cancelled.paused_at, cancelled.remaining_pause_cycles), (None, None));
    assert_eq!(lifecycle::next_due(&cancelled).map(|d| d.kind), Some(DueKind::Renewal));
    assert_eq!(lifecycle::pause(&sub, -1, now), Err(LifecycleError::InvalidPauseCycles));
    assert_eq!(lifecycle::pause(&sub, i64::from(u32::MAX) + 1, now), Err(LifecycleError::InvalidPauseCycles));

    // Paused with 3 cycles: 0 resumes at the next renewal.
    let paused = step(&scheduled).subscription;
    assert_eq!((paused.state, paused.remaining_pause_cycles), (SubscriptionState::Paused, Some(2)));
    let shortened = lifecycle::pause(&paused, 0, day(2025, 2, 10)).expect("paused").subscription;
    let back = step(&shortened);
    assert_eq!(back.subscription.state, SubscriptionState::Active);
    assert_eq!(spans(&back.lines), vec![(LineKind::Plan, day(2025, 3, 1), day(2025, 4, 1), 1000)]);
}

#[test]
fn resume_now_charges_a_new_period_from_now_and_applies_the_pending_change() {
    let sub = lifecycle::create(NewSubscription::new("r", monthly("gold", 1000)), day(2025, 1, 1))
        .expect("valid")
        .subscription;
    let sub = lifecycle::pause(&sub, 2, day(2025, 1, 5)).expect("ok").subscription;
    let sub = lifecycle::change(&sub, monthly("platinum", 4000), Timeframe::Renewal, day(2025, 1, 6))
        .expect("ok")
        .subscription;
    assert_eq!(sub.pending_change.as_ref().map(|t| t.plan_code.as_str()), Some("platinum"));
    let paused = step(&sub).subscription; // Feb 1: paused, the pending change waits
    assert_eq!(paused.state, SubscriptionState::Paused);
    assert!(paused.pending_change.is_some());

    assert_eq!(
        lifecycle::resume(
            &lifecycle::create(NewSubscription::new("x", monthly("g", 1)), day(2025, 1, 1)).expect("ok").subscription,
            day(2025, 1, 2)
        ),
        Err(LifecycleError::NotPaused)
    );

    let now = at(2025, 2, 20, 15);
    let resumed = lifecycle::resume(&paused, now).expect("paused");
    assert_eq!(resumed.origin, Some(InvoiceOrigin::Renewal));
    assert_eq!(spans(&resumed.lines), vec![(LineKind::Plan, now, at(2025, 3, 20, 15), 4000)]);
    assert_eq!(resumed.lines[0].key.item, ItemRef::Plan { plan_code: "platinum".into() });
    let sub = resumed.subscription;
    assert_eq!(sub.state, SubscriptionState::Active);
    assert_eq!(sub.pending_change, None);
    assert_eq!((sub.paused_at, sub.remaining_pause_cycles), (None, None));
    assert_eq!(lifecycle::next_due(&sub).map(|d| d.at), Some(at(2025, 3, 20, 15)));
}

#[test]
fn resume_before_a_scheduled_pause_drops_it_without_charge() {
    let sub = lifecycle::create(NewSubscription::new("s", monthly("gold", 1000)), day(2025, 1, 1))
        .expect("valid")
        .subscription;
    let scheduled = lifecycle::pause(&sub, 2, day(2025, 1, 5)).expect("ok").subscription;
    assert!(scheduled.has_scheduled_pause());

    let resumed = lifecycle::resume(&scheduled, day(2025, 1, 10)).expect("a scheduled pause");
    assert_eq!((resumed.origin, resumed.lines.len()), (None, 0), "no charge");
    let sub = resumed.subscription;
    assert_eq!(sub.state, SubscriptionState::Active);
    assert_eq!((sub.paused_at, sub.remaining_pause_cycles), (None, None));
    assert_eq!(period(&sub), (day(2025, 1, 1), day(2025, 2, 1)), "the paid period runs on");
    // Feb 1 renews (billed) instead of pausing; a second resume finds nothing to resume.
    let renewed = step(&sub);
    assert_eq!(renewed.subscription.state, SubscriptionState::Active);
    assert_eq!(total(&renewed.lines), 1000);
    assert_eq!(lifecycle::resume(&sub, day(2025, 1, 11)), Err(LifecycleError::NotPaused));
    // Canceled with a pause scheduled: nothing to resume (reactivate first).
    let canceled = lifecycle::cancel(&scheduled, day(2025, 1, 6)).expect("ok").subscription;
    assert_eq!(lifecycle::resume(&canceled, day(2025, 1, 7)), Err(LifecycleError::NotPaused));
}

#[test]
fn plan_change_now_is_prorated_and_at_renewal_waits() {
    // January: 31 days. Change on Jan 16 00:00 leaves 16 days.
    let terms = SubscriptionTerms {
        quantity: 2,
        add_ons: vec![AddOnTerms { add_on_code: "seats".into(), unit_amount_in_cents: 500, quantity: 3 }],
        ..monthly("basic", 1500)
    };
    let created = lifecycle::create(NewSubscription::new("c", terms), day(2025, 1, 1)).expect("valid");
    assert_eq!(total(&created.lines), 3000 + 1500);
    let sub = created.subscription;
    let jan16 = day(2025, 1, 16);

    let pro = SubscriptionTerms {
        quantity: 2,
        add_ons: vec![AddOnTerms { add_on_code: "seats".into(), unit_amount_in_cents: 500, quantity: 5 }],
        ..monthly("pro", 3000)
    };
    let now = lifecycle::change(&sub, pro.clone(), Timeframe::Now, jan16).expect("active");
    assert_eq!(now.origin, Some(InvoiceOrigin::ImmediateChange));
    let jan_end = day(2025, 2, 1);
    assert_eq!(
        spans(&now.lines),
        vec![
            (LineKind::Credit, jan16, jan_end, -1548), // 3000 × 16/31 = 1548.39
            (LineKind::Credit, jan16, jan_end, -774),  // 1500 × 16/31 = 774.19
            (LineKind::Plan, jan16, jan_end, 3097),    // 6000 × 16/31 = 3096.77
            (LineKind::AddOn, jan16, jan_end, 1290),   // 2500 × 16/31 = 1290.32
        ]
    );
    assert_eq!(now.lines[0].description, "Credit: Plan basic");
    assert_eq!(now.lines[0].unit_amount_in_cents, -1500);
    assert_eq!(now.lines[2].proration.map(|p| (p.part_seconds, p.whole_seconds)), Some((16 * 86_400, 31 * 86_400)));
    // Next renewal bills the new terms in full.
    let feb = step(&now.subscription);
    assert_eq!(total(&feb.lines), 6000 + 2500);

    // The same change at renewal: nothing now, the new terms from Feb 1.
    let later = lifecycle::change(&sub, pro, Timeframe::Renewal, jan16).expect("active");
    assert!(later.lines.is_empty());
    assert_eq!(later.subscription.terms.plan_code, "basic");
    let feb = step(&later.subscription);
    assert_eq!(spans(&feb.lines)[0], (LineKind::Plan, jan_end, day(2025, 3, 1), 6000));
    assert_eq!(feb.subscription.terms.plan_code, "pro");
    assert_eq!(feb.subscription.pending_change, None);
}

#[test]
fn change_to_another_interval_restarts_the_period() {
    let sub = lifecycle::create(NewSubscription::new("i", monthly("monthly", 3100)), day(2025, 1, 1))
        .expect("valid")
        .subscription;
    let yearly = SubscriptionTerms::new("yearly", "USD", Interval::months(12), 30_000);
    let t = lifecycle::change(&sub, yearly, Timeframe::Now, day(2025, 1, 11)).expect("active");
    assert_eq!(
        spans(&t.lines),
        vec![
            (LineKind::Credit, day(2025, 1, 11), day(2025, 2, 1), -2100),
            (LineKind::Plan, day(2025, 1, 11), day(2026, 1, 11), 30_000),
        ]
    );
    assert_eq!(period(&t.subscription), (day(2025, 1, 11), day(2026, 1, 11)));
}

#[test]
fn a_scheduled_pause_moves_to_the_end_of_a_period_restarted_by_a_change() {
    let days = |n| SubscriptionTerms::new("basic", "USD", Interval::days(n), 0);
    let start = day(2024, 1, 31);
    let sub = lifecycle::create(NewSubscription::new("pc", days(3)), start).expect("valid").subscription;
    let sub = lifecycle::pause(&sub, 1, start).expect("active").subscription;
    let sub = lifecycle::postpone(&sub, start + TimeDelta::hours(1019), start).expect("active").subscription;
    assert_eq!(sub.paused_at, Some(start + TimeDelta::hours(1019)));

    // A change of interval now restarts the period: the pause goes on waiting for its end.
    let four_days = start + TimeDelta::hours(250);
    let sub = lifecycle::change(&sub, days(4), Timeframe::Now, four_days).expect("active").subscription;
    assert_eq!(period(&sub), (four_days, four_days + TimeDelta::days(4)));
    assert_eq!(sub.paused_at, sub.current_period_ends_at);
    let due = lifecycle::next_due(&sub).expect("due");
    assert_eq!((due.at, due.kind), (four_days + TimeDelta::days(4), DueKind::PauseStart));

    // The story proptest found: the old pause instant inside a later billed period made the
    // reactivated subscription `paused` while its period was billed.
    let sub = lifecycle::advance(&sub).expect("due").subscription;
    assert_eq!(sub.state, SubscriptionState::Paused);
    let resumed_at = lifecycle::next_due(&sub).expect("due").at;
    let sub = lifecycle::advance(&sub).expect("due").subscription;
    assert_eq!((sub.state, sub.current_period_started_at), (SubscriptionState::Active, Some(resumed_at)));
    let later = resumed_at + TimeDelta::hours(1);
    let yearly = SubscriptionTerms::new("basic", "USD", Interval::months(12), 0);
    let sub = lifecycle::change(&sub, yearly, Timeframe::Now, later).expect("active").subscription;
    let sub = lifecycle::cancel(&sub, later).expect("active").subscription;
    let sub = lifecycle::reactivate(&sub, later).expect("canceled").subscription;
    assert_eq!(sub.state, SubscriptionState::Active);
    assert!(sub.is_billed_period());
}

#[test]
fn changes_are_validated() {
    let sub = lifecycle::create(NewSubscription::new("v", monthly("gold", 1000)), day(2025, 1, 1))
        .expect("valid")
        .subscription;
    let now = day(2025, 1, 5);
    let euro = SubscriptionTerms::new("gold", "EUR", Interval::months(1), 1000);
    assert_eq!(lifecycle::change(&sub, euro, Timeframe::Now, now), Err(LifecycleError::CurrencyMismatch));
    let none = SubscriptionTerms { quantity: 0, ..monthly("gold", 1000) };
    assert_eq!(
        lifecycle::change(&sub, none, Timeframe::Now, now),
        Err(LifecycleError::InvalidTerms { field: "quantity", message: "must be at least 1" })
    );
    let twice = SubscriptionTerms {
        add_ons: vec![
            AddOnTerms { add_on_code: "a".into(), unit_amount_in_cents: 1, quantity: 1 },
            AddOnTerms { add_on_code: "a".into(), unit_amount_in_cents: 1, quantity: 1 },
        ],
        ..monthly("gold", 1000)
    };
    assert!(matches!(lifecycle::change(&sub, twice, Timeframe::Now, now), Err(LifecycleError::InvalidTerms { .. })));
    // A stale value (renewal due) is refused until advanced.
    assert_eq!(
        lifecycle::change(&sub, monthly("gold", 2000), Timeframe::Now, day(2025, 2, 3)),
        Err(LifecycleError::NotAdvanced { due: day(2025, 2, 1) })
    );
    assert_eq!(lifecycle::cancel(&sub, day(2024, 12, 1)), Err(LifecycleError::OutOfOrder { at: day(2024, 12, 1) }));
    assert_eq!(LifecycleError::NotPaused.symbol(), "not_paused");
}

#[test]
fn cancel_then_reactivate_then_expire() {
    let sub = lifecycle::create(NewSubscription::new("k", monthly("gold", 1000)), day(2025, 1, 1))
        .expect("valid")
        .subscription;
    let now = day(2025, 1, 20);
    let canceled = lifecycle::cancel(&sub, now).expect("active");
    assert!(canceled.lines.is_empty());
    let canceled = canceled.subscription;
    assert_eq!(canceled.state, SubscriptionState::Canceled);
    assert_eq!((canceled.canceled_at, canceled.expires_at), (Some(now), Some(day(2025, 2, 1))));
    assert!(StateFilter::Live.matches(&canceled, now));
    assert_eq!(lifecycle::cancel(&canceled, now), Err(LifecycleError::AlreadyCanceled));
    assert_eq!(lifecycle::reactivate(&sub, now), Err(LifecycleError::NotCanceled));

    let back = lifecycle::reactivate(&canceled, day(2025, 1, 25)).expect("not expired").subscription;
    assert_eq!(back.state, SubscriptionState::Active);
    assert_eq!((back.canceled_at, back.expires_at), (None, None));
    assert_eq!(lifecycle::next_due(&back).map(|d| d.kind), Some(DueKind::Renewal));

    // Canceled again: at the period end it expires without a charge.
    let canceled = lifecycle::cancel(&back, day(2025, 1, 26)).expect("active").subscription;
    assert_eq!(lifecycle::reactivate(&canceled, day(2025, 2, 1)), Err(LifecycleError::AlreadyExpired));
    let expired = step(&canceled);
    assert!(expired.lines.is_empty());
    assert_eq!(expired.subscription.state, SubscriptionState::Expired);
    assert_eq!(expired.subscription.expires_at, Some(day(2025, 2, 1)));
    assert_eq!(lifecycle::reactivate(&expired.subscription, day(2025, 2, 2)), Err(LifecycleError::AlreadyExpired));
    assert_eq!(lifecycle::pause(&expired.subscription, 1, day(2025, 2, 2)), Err(LifecycleError::AlreadyExpired));
}

#[test]
fn canceled_during_a_pause_reactivates_paused() {
    let sub = lifecycle::create(NewSubscription::new("cp", monthly("gold", 1000)), day(2025, 1, 1))
        .expect("valid")
        .subscription;
    let sub = lifecycle::pause(&sub, 2, day(2025, 1, 2)).expect("ok").subscription;
    let paused = step(&sub).subscription;
    let canceled = lifecycle::cancel(&paused, day(2025, 2, 5)).expect("paused").subscription;
    assert_eq!(canceled.expires_at, Some(day(2025, 3, 1)));
    let back = lifecycle::reactivate(&canceled, day(2025, 2, 6)).expect("not expired").subscription;
    assert_eq!(back.state, SubscriptionState::Paused);
}

#[test]
fn terminate_with_each_refund() {
    // Jan 2025, $31.00: 100 cents a day. Terminate on Jan 21 (11 days unused).
    let sub = lifecycle::create(NewSubscription::new("x", monthly("gold", 3100)), day(2025, 1, 1))
        .expect("valid")
        .subscription;
    let now = day(2025, 1, 21);
    let none = lifecycle::terminate(&sub, Refund::None, now).expect("active");
    assert!(none.lines.is_empty());
    assert_eq!(none.origin, None);
    assert_eq!(none.subscription.state, SubscriptionState::Expired);
    assert_eq!((none.subscription.terminated_at, none.subscription.expires_at), (Some(now), Some(now)));
    assert_eq!(none.subscription.canceled_at, Some(now), "a terminated subscription was canceled when it ended");
    assert_eq!(lifecycle::next_due(&none.subscription), None);

    let partial = lifecycle::terminate(&sub, Refund::Partial, now).expect("active");
    assert_eq!(partial.origin, Some(InvoiceOrigin::Termination));
    assert_eq!(spans(&partial.lines), vec![(LineKind::Credit, now, day(2025, 2, 1), -1100)]);

    let full = lifecycle::terminate(&sub, Refund::Full, now).expect("active");
    assert_eq!(spans(&full.lines), vec![(LineKind::Credit, day(2025, 1, 1), day(2025, 2, 1), -3100)]);
    assert_eq!(lifecycle::terminate(&full.subscription, Refund::Full, now), Err(LifecycleError::AlreadyExpired));

    // A full refund after a mid-period change gives back exactly what was paid for the period.
    let created = lifecycle::create(NewSubscription::new("y", monthly("gold", 1001)), day(2025, 1, 1)).expect("valid");
    let changed =
        lifecycle::change(&created.subscription, monthly("pro", 2003), Timeframe::Now, at(2025, 1, 9, 7)).expect("ok");
    let full = lifecycle::terminate(&changed.subscription, Refund::Full, day(2025, 1, 20)).expect("ok");
    assert_eq!(total(&created.lines) + total(&changed.lines) + total(&full.lines), 0);

    // Terminating a canceled subscription keeps the cancel's time and ends it now.
    let canceled = lifecycle::cancel(&sub, day(2025, 1, 10)).expect("active").subscription;
    let ended = lifecycle::terminate(&canceled, Refund::None, now).expect("canceled").subscription;
    assert_eq!(ended.state, SubscriptionState::Expired);
    assert_eq!(
        (ended.canceled_at, ended.expires_at, ended.terminated_at),
        (Some(day(2025, 1, 10)), Some(now), Some(now))
    );
}

#[test]
fn postpone_moves_the_renewal_without_charge() {
    let sub = lifecycle::create(NewSubscription::new("pp", monthly("gold", 1000)), day(2025, 1, 1))
        .expect("valid")
        .subscription;
    assert_eq!(lifecycle::postpone(&sub, day(2025, 1, 5), day(2025, 1, 5)), Err(LifecycleError::InvalidRenewalDate));
    let moved = lifecycle::postpone(&sub, day(2025, 2, 10), day(2025, 1, 5)).expect("active");
    assert!(moved.lines.is_empty());
    assert_eq!(period(&moved.subscription), (day(2025, 1, 1), day(2025, 2, 10)));
    let next = step(&moved.subscription);
    assert_eq!(spans(&next.lines), vec![(LineKind::Plan, day(2025, 2, 10), day(2025, 3, 10), 1000)]);
}

#[test]
fn past_due_is_a_flag_not_a_state() {
    let sub = lifecycle::create(NewSubscription::new("d", monthly("gold", 1000)), day(2025, 1, 1))
        .expect("valid")
        .subscription;
    let failed = lifecycle::fail_renewal(&sub).expect("active");
    assert_eq!(failed.state, SubscriptionState::Active);
    assert!(StateFilter::PastDue.matches(&failed, day(2025, 1, 2)));
    let recovered = lifecycle::recover(&failed).expect("ok");
    assert!(!StateFilter::PastDue.matches(&recovered, day(2025, 1, 2)));
    for state in SubscriptionState::ALL {
        assert_eq!(SubscriptionState::from_name(state.name()), Some(state));
    }
    for filter in StateFilter::ALL {
        assert_eq!(StateFilter::from_name(filter.name()), Some(filter));
    }
    assert_eq!(SubscriptionState::from_name("in_trial"), None);
}

#[test]
fn backdated_change_yields_prorated_repairs() {
    let start = day(2025, 1, 1);
    let mut history = SubscriptionHistory::new(start, NewSubscription::new("h", monthly("basic", 3100)));
    // Billed on schedule through March.
    let mut billed = Vec::new();
    for up_to in [day(2025, 1, 1), day(2025, 2, 1), day(2025, 3, 1)] {
        let new = common::bill(&history, up_to, &billed).expect("replays");
        assert_eq!(total(&new), 3100);
        billed.extend(new);
    }
    // It turns out the customer moved to "pro" on Feb 15 (a correction entered on Mar 10).
    history.entries.push(HistoryEntry {
        at: day(2025, 2, 15),
        action: Action::Change { terms: monthly("pro", 5600), timeframe: Timeframe::Now },
    });
    let repair = common::bill(&history, day(2025, 3, 10), &billed).expect("replays");
    // February (28 days): 14 days unused of basic, 14 days of pro; March: basic out, pro in.
    assert_eq!(
        spans(&repair),
        vec![
            (LineKind::Credit, day(2025, 2, 15), day(2025, 3, 1), -1550),
            (LineKind::Plan, day(2025, 2, 15), day(2025, 3, 1), 2800),
            (LineKind::Credit, day(2025, 3, 1), day(2025, 4, 1), -3100),
            (LineKind::Plan, day(2025, 3, 1), day(2025, 4, 1), 5600),
        ]
    );
    billed.extend(repair);
    assert!(common::bill(&history, day(2025, 3, 10), &billed).expect("replays").is_empty());
}

#[test]
fn history_with_every_kind_of_action_bills_once() {
    let start = day(2025, 1, 1);
    let mut history = SubscriptionHistory::new(
        start,
        NewSubscription {
            trial: Some(Trial::For(Interval::days(10))),
            ..NewSubscription::new("all", SubscriptionTerms { setup_fee_in_cents: 999, ..monthly("gold", 1000) })
        },
    );
    let entries = [
        (day(2025, 1, 20), Action::Change { terms: monthly("gold", 2000), timeframe: Timeframe::Now }),
        (day(2025, 2, 1), Action::Pause { remaining_pause_cycles: 2 }),
        (day(2025, 3, 20), Action::Resume),
        (day(2025, 3, 25), Action::Postpone { next_renewal: day(2025, 4, 30) }),
        (day(2025, 4, 2), Action::Change { terms: monthly("silver", 500), timeframe: Timeframe::Renewal }),
        (day(2025, 5, 3), Action::Cancel),
        (day(2025, 5, 4), Action::Reactivate),
        (day(2025, 5, 17), Action::Terminate { refund: Refund::Partial }),
    ];
    for (when, action) in entries {
        history.entries.push(HistoryEntry { at: when, action });
    }
    let replay = common::replay(&history, day(2025, 12, 31)).expect("valid history");
    let sub = replay.subscription.expect("created");
    assert_eq!(sub.state, SubscriptionState::Expired);
    let mut billed = Vec::new();
    for month in 1..=12 {
        billed.extend(common::bill(&history, day(2025, month, 28), &billed).expect("replays"));
    }
    assert!(common::bill(&history, day(2026, 1, 1), &billed).expect("replays").is_empty());
    assert_eq!(total(&billed), total(&replay.lines));
    // Setup fee; trial Jan 1–11 free; Jan 11–Feb 11 at 1000 then 2000 from Jan 20; pause of
    // Feb 11–Mar 11 and (paused renewal) Mar 11–Apr 11 cut short by the resume on Mar 20;
    // Mar 20–Apr 30 postponed period at 2000; silver from Apr 30, terminated May 17 with refund.
    let kinds: Vec<_> = replay.lines.iter().map(|l| (l.kind, l.start, l.end)).collect();
    assert_eq!(
        kinds,
        vec![
            (LineKind::SetupFee, start, start),
            (LineKind::Plan, day(2025, 1, 11), day(2025, 2, 11)),
            (LineKind::Credit, day(2025, 1, 20), day(2025, 2, 11)),
            (LineKind::Plan, day(2025, 1, 20), day(2025, 2, 11)),
            (LineKind::Plan, day(2025, 3, 20), day(2025, 4, 20)),
            (LineKind::Plan, day(2025, 4, 30), day(2025, 5, 30)),
            (LineKind::Credit, day(2025, 5, 17), day(2025, 5, 30)),
        ]
    );
    // An invalid history is reported with its position.
    history.entries.push(HistoryEntry { at: day(2025, 6, 1), action: Action::Resume });
    let err = common::replay(&history, day(2025, 12, 31)).expect_err("resume on an expired subscription");
    assert_eq!((err.position, err.source), (9, LifecycleError::NotPaused));
}

#[test]
fn values_round_trip_through_serde() {
    let mut history = SubscriptionHistory::new(
        day(2025, 1, 1),
        NewSubscription {
            trial: Some(Trial::For(Interval::days(7))),
            ..NewSubscription::new("s", monthly("gold", 1000))
        },
    );
    history.entries.push(HistoryEntry {
        at: day(2025, 1, 20),
        action: Action::Change { terms: monthly("pro", 2000), timeframe: Timeframe::Now },
    });
    history.entries.push(HistoryEntry { at: day(2025, 1, 21), action: Action::Terminate { refund: Refund::Partial } });
    let text = toml::to_string(&history).expect("serializes");
    assert_eq!(toml::from_str::<SubscriptionHistory>(&text).expect("parses"), history);

    let replay = common::replay(&history, day(2025, 1, 20)).expect("valid");
    let sub = replay.subscription.expect("created");
    let text = toml::to_string(&sub).expect("serializes");
    assert_eq!(toml::from_str::<Subscription>(&text).expect("parses"), sub);

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Lines {
        lines: Vec<LineItem>,
    }
    let lines = Lines { lines: replay.lines };
    let text = toml::to_string(&lines).expect("serializes");
    assert_eq!(toml::from_str::<Lines>(&text).expect("parses"), lines);
}
