//! Year-long billing stories end to end over HTTP against `rebill serve`, on SQLite and on
//! PostgreSQL: one subscription per billing interval (monthly, and every 14 days) lives through
//! twelve months of sandbox time with regular renewals, a renewal declined and then recovered by
//! a dunning retry after the card is replaced, a pause of two cycles with its automatic resume,
//! a second pause ended by a manual resume (which invoices at once and applies a change pending
//! for the renewal), a cancel undone by a reactivate, a plan change now (prorated) and one at
//! renewal. Afterwards every invoice of the account is read back through the API with
//! `rebill-client` (page by page) and compared, to the cent, with what the rules say it must be.
//!
//! The expected invoices are computed here, independently of the service, from the rules in
//! `billing-behaviour.md` §4 and the spec ("States and transitions"):
//!
//! - Periods are billed in advance at their start, at the plan's full price; monthly periods keep
//!   the anchor's day and time, day periods are exact 24-hour steps.
//! - Pause (§4.1): scheduled for the next renewal (`paused_at` = the current period end, state
//!   still `active`); each paused cycle charges nothing; after N cycles the subscription renews
//!   normally and is `active` again.
//! - Resume (spec; §4.1): immediately, applies pending changes, produces an invoice. Where the
//!   reference is silent, rebill starts a new full period at the resume (documented in
//!   `rebill_billing::lifecycle`): the invoice is the full price of the (pending) plan.
//! - Cancel (§4.2): runs to the end of the paid period; reactivate before then → `active`; neither
//!   charges anything.
//! - Change `timeframe=now` (§4.2): credit the old price and charge the new one for the rest of
//!   the period, by time. The prices are chosen so that every proration here is exact
//!   ([`prorate`] asserts it), so no rounding rule is involved (§7.1 would round once per line).
//!   `timeframe=renewal` keeps the terms until the next billed renewal.
//! - Dunning (where the spec is silent, `rebill-server/src/billing.rs`): a declined renewal leaves
//!   the invoice `past_due`, retried 1, 3, 5 and 7 days after it was created with the billing info
//!   on file at the retry.

use std::future::Future;

use chrono::{DateTime, Months, TimeDelta, Utc};
use rebill_client::models::{AdjustmentType, Invoice};
use rebill_client::{Client, Order};
use rebill_testkit::*;

/// 2027-01-15T08:00:00Z: the start of every story.
const T0: i64 = 1_800_000_000;

/// Plan prices in cents. 4340 = 140 × 31 = 310 × 14, 8680 = 280 × 31 = 620 × 14 and
/// 13020 = 420 × 31 = 930 × 14: prorating any of them over a 31-day month or a 14-day period by
/// whole days gives whole cents.
const SILVER: i64 = 4340;
const GOLD: i64 = 8680;
const PLATINUM: i64 = 13_020;

/// A billing interval and what its story must come to, written out by hand.
struct Cadence {
    tag: &'static str,
    length: u32,
    unit: &'static str,
    /// The immediate change's credit and charge (see the story).
    change_credit: i64,
    change_charge: i64,
    /// Number of invoices and their sum after twelve months.
    invoice_count: usize,
    billed_total: i64,
    /// The current period at the end of the twelve months.
    final_period: (&'static str, &'static str),
}

/// Monthly. The resume on Aug 20 re-anchors the schedule at the 20th; the change now is made on
/// Oct 24 in the period Oct 20 → Nov 20 (31 days), 27 days before its end:
/// credit 8680 × 27/31 = 280 × 27 = 7560, charge 13020 × 27/31 = 420 × 27 = 11340.
/// Invoices: Jan 15, Feb 15, Mar 15 (declined, recovered), Apr 15, Jul 15 (after the pause) at
/// 4340; Aug 20 (resume), Sep 20, Oct 20 at 8680; the change at 11340 − 7560 = 3780; Nov 20 and
/// Dec 20 at 4340: 11 invoices, 7 × 4340 + 3 × 8680 + 3780 = 30380 + 26040 + 3780 = 60200.
const MONTHLY: Cadence = Cadence {
    tag: "story_monthly",
    length: 1,
    unit: "months",
    change_credit: -7560,
    change_charge: 11_340,
    invoice_count: 11,
    billed_total: 60_200,
    final_period: ("2027-12-20T08:00:00Z", "2028-01-20T08:00:00Z"),
};

/// Every 14 days. Boundaries on days 14, 28, …, 98 after the start; the resume on day 103
/// re-anchors the schedule (day 103 + 14k); the change now is made on day 135 in the period
/// 131 → 145, 10 of 14 days before its end: credit 8680 × 10/14 = 620 × 10 = 6200, charge
/// 13020 × 10/14 = 930 × 10 = 9300. Invoices: days 0, 14, 28 (declined, recovered), 42, 84 at
/// 4340; 103 (resume), 117, 131 at 8680; the change at 9300 − 6200 = 3100; then 145, 159, …, 355
/// (16 renewals; day 365 is 2028-01-15) at 4340: 25 invoices,
/// 21 × 4340 + 3 × 8680 + 3100 = 91140 + 26040 + 3100 = 120280.
const FORTNIGHTLY: Cadence = Cadence {
    tag: "story_days",
    length: 14,
    unit: "days",
    change_credit: -6200,
    change_charge: 9300,
    invoice_count: 25,
    billed_total: 120_280,
    final_period: ("2028-01-05T08:00:00Z", "2028-01-19T08:00:00Z"),
};

#[test]
fn monthly_story_on_both_backends() {
    on_both_backends(MONTHLY.tag, |db| story(db, &MONTHLY));
}

#[test]
fn fourteen_day_story_on_both_backends() {
    on_both_backends(FORTNIGHTLY.tag, |db| story(db, &FORTNIGHTLY));
}

// ---------------------------------------------------------------------------------------------
// Expected invoices

/// One line item as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    /// `charge` or `credit` (the adjustment's root `type`).
    kind: String,
    origin: String,
    total: i64,
    start: String,
    end: String,
}

/// One invoice as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bill {
    number: i64,
    state: String,
    total: i64,
    created_at: String,
    lines: Vec<Line>,
    /// `status:amount` of each transaction, in order.
    transactions: Vec<String>,
}

fn charge(total: i64, start: DateTime<Utc>, end: DateTime<Utc>) -> Line {
    Line { kind: "charge".into(), origin: "plan".into(), total, start: iso(start), end: iso(end) }
}

fn credit(total: i64, start: DateTime<Utc>, end: DateTime<Utc>) -> Line {
    Line { kind: "credit".into(), origin: "credit".into(), total, start: iso(start), end: iso(end) }
}

/// The invoices expected so far, numbered from 1001 in order (numbers are per site).
#[derive(Default)]
struct Ledger {
    bills: Vec<Bill>,
    origins: Vec<String>,
}

impl Ledger {
    /// An invoice created at `at` with `lines`, paid at once by one approved transaction.
    fn paid(&mut self, origin: &str, at: DateTime<Utc>, lines: Vec<Line>) {
        let total: i64 = lines.iter().map(|l| l.total).sum();
        self.push(origin, at, lines, "paid", vec![format!("success:{total}")]);
    }

    fn push(&mut self, origin: &str, at: DateTime<Utc>, lines: Vec<Line>, state: &str, transactions: Vec<String>) {
        let total = lines.iter().map(|l| l.total).sum();
        self.bills.push(Bill {
            number: 1001 + self.bills.len() as i64,
            state: state.into(),
            total,
            created_at: iso(at),
            lines,
            transactions,
        });
        self.origins.push(origin.into());
    }
}

/// `price × part / whole`, asserting it is a whole number of cents (the prices are chosen so;
/// see [`SILVER`]).
fn prorate(price: i64, part: TimeDelta, whole: TimeDelta) -> i64 {
    let (part, whole) = (part.num_seconds(), whole.num_seconds());
    assert_eq!(price * part % whole, 0, "{price} × {part}/{whole} is not a whole number of cents");
    price * part / whole
}

fn at(t: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(t, 0).expect("time")
}

fn iso(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn days(n: i64) -> TimeDelta {
    TimeDelta::days(n)
}

/// The `n`-th boundary of the schedule anchored at `anchor`, computed from the anchor: calendar
/// months keeping the day and time (no anchor here is past the 28th), or 24-hour days.
fn boundary(c: &Cadence, anchor: DateTime<Utc>, n: u32) -> DateTime<Utc> {
    match c.unit {
        "months" => anchor.checked_add_months(Months::new(n * c.length)).expect("date"),
        _ => anchor + days(i64::from(n * c.length)),
    }
}

// ---------------------------------------------------------------------------------------------
// The story

fn story(db: &str, c: &Cadence) {
    let s = serve(db, T0);
    let interval = format!(
        "<plan_interval_length>{}</plan_interval_length><plan_interval_unit>{}</plan_interval_unit>",
        c.length, c.unit
    );
    plan(&s, "silver", SILVER, &interval);
    plan(&s, "gold", GOLD, &interval);
    plan(&s, "platinum", PLATINUM, &interval);
    let code = "story";
    let t0 = at(T0);
    let end_of_story = t0.checked_add_months(Months::new(12)).expect("date");
    let b = |n| boundary(c, t0, n);
    let mut want = Ledger::default();

    // Start on silver: the first period is invoiced and paid at once.
    let created = ok(subscribe(&s, code, "silver", "4111111111111111"), 201);
    let uuid = field(&created.body, "uuid");
    let path = format!("/v2/subscriptions/{uuid}");
    assert_eq!(field(&created.body, "current_period_ends_at"), iso(b(1)));
    want.paid("purchase", t0, vec![charge(SILVER, t0, b(1))]);
    check_count(&s, code, &want, "after the purchase");

    // A regular renewal.
    clock_to(&s, b(1));
    want.paid("renewal", b(1), vec![charge(SILVER, b(1), b(2))]);
    check_count(&s, code, &want, "first renewal");

    // The customer switches to a card the gateway declines but keeps (4000000000000341,
    // "Declined by Gateway" error, but the card is still stored): the update answers the
    // decline, and the card is on file for the next renewal.
    clock_to(&s, b(1) + days(5));
    let r = set_card(&s, code, "4000000000000341");
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(field(&r.body, "error_code"), "declined_saveable");
    assert_eq!(field(&ok(get(&s, &format!("/v2/accounts/{code}/billing_info")), 200).body, "last_four"), "0341");

    // The renewal is declined: invoiced but past due; the subscription stays active, past due.
    clock_to(&s, b(2));
    let declined = 1001 + want.bills.len();
    let bill = ok(get(&s, &format!("/v2/invoices/{declined}")), 200);
    assert_eq!(field(&bill.body, "state"), "past_due");
    assert_eq!(field(&bill.body, "total_in_cents"), SILVER.to_string());
    assert_eq!(field(&bill.body, "attempt_next_collection_at"), iso(b(2) + days(1)));
    assert_eq!(field(&bill.body, "error_code"), "declined_saveable");
    let sub = ok(get(&s, &path), 200);
    assert_eq!(field(&sub.body, "state"), "active");
    assert_eq!(field(&sub.body, "current_period_started_at"), iso(b(2)));
    assert_eq!(records(&s, "/v2/subscriptions?state=past_due"), 1);
    assert_eq!(field(&ok(get(&s, &format!("/v2/accounts/{code}")), 200).body, "has_past_due_invoice"), "true");
    // The first retry, a day later, declines again.
    clock_to(&s, b(2) + days(1));
    let bill = ok(get(&s, &format!("/v2/invoices/{declined}")), 200);
    assert_eq!(field(&bill.body, "state"), "past_due");
    assert_eq!(field(&bill.body, "attempt_next_collection_at"), iso(b(2) + days(3)));
    // The customer puts a good card on file; the retry three days after the invoice collects.
    ok(set_card(&s, code, "5555555555554444"), 200);
    clock_to(&s, b(2) + days(3));
    let bill = ok(get(&s, &format!("/v2/invoices/{declined}")), 200);
    assert_eq!(field(&bill.body, "state"), "paid");
    assert_eq!(field(&bill.body, "closed_at"), iso(b(2) + days(3)));
    assert_eq!(tag(&bill.body, "attempt_next_collection_at").as_deref(), Some(""));
    assert_eq!(records(&s, "/v2/subscriptions?state=past_due"), 0);
    assert_eq!(field(&ok(get(&s, &format!("/v2/accounts/{code}")), 200).body, "has_past_due_invoice"), "false");
    want.push(
        "renewal",
        b(2),
        vec![charge(SILVER, b(2), b(3))],
        "paid",
        vec![format!("declined:{SILVER}"), format!("declined:{SILVER}"), format!("success:{SILVER}")],
    );
    check_count(&s, code, &want, "the recovered renewal is one invoice");

    // Renewals go on from the new card.
    clock_to(&s, b(3));
    want.paid("renewal", b(3), vec![charge(SILVER, b(3), b(4))]);
    check_count(&s, code, &want, "renewal after the recovery");

    // A pause of two cycles, scheduled for the next renewal.
    clock_to(&s, b(3) + days(5));
    let r = ok(put(&s, &format!("{path}/pause"), &pause_body(2)), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "paused_at"), iso(b(4)));
    assert_eq!(field(&r.body, "remaining_pause_cycles"), "2");
    // First paused cycle: no charge.
    clock_to(&s, b(4));
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "paused");
    assert_eq!(field(&r.body, "current_period_started_at"), iso(b(4)));
    assert_eq!(field(&r.body, "current_period_ends_at"), iso(b(5)));
    assert_eq!(field(&r.body, "remaining_pause_cycles"), "1");
    assert_eq!(field(&r.body, "paused_at"), iso(b(4)));
    assert_eq!(field(&ok(get(&s, &format!("/v2/accounts/{code}")), 200).body, "has_paused_subscription"), "true");
    check_count(&s, code, &want, "first paused cycle");
    // Second paused cycle: no charge.
    clock_to(&s, b(5));
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "paused");
    assert_eq!(field(&r.body, "current_period_ends_at"), iso(b(6)));
    assert_eq!(field(&r.body, "remaining_pause_cycles"), "0");
    assert_eq!(field(&r.body, "paused_at"), iso(b(4)));
    check_count(&s, code, &want, "second paused cycle");
    // The pause ends by itself: a normal renewal, active again.
    clock_to(&s, b(6));
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "current_period_started_at"), iso(b(6)));
    assert_eq!(field(&r.body, "current_period_ends_at"), iso(b(7)));
    assert_eq!(tag(&r.body, "paused_at").as_deref(), Some(""));
    assert_eq!(field(&ok(get(&s, &format!("/v2/accounts/{code}")), 200).body, "has_paused_subscription"), "false");
    want.paid("renewal", b(6), vec![charge(SILVER, b(6), b(7))]);
    check_count(&s, code, &want, "automatic resume");

    // A second pause, scheduled for one cycle, then replaced by three (§4.1: "the count is
    // replaced"), ended early by hand.
    clock_to(&s, b(6) + days(4));
    let r = ok(put(&s, &format!("{path}/pause"), &pause_body(1)), 200);
    assert_eq!(field(&r.body, "remaining_pause_cycles"), "1");
    clock_to(&s, b(6) + days(5));
    let r = ok(put(&s, &format!("{path}/pause"), &pause_body(3)), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "paused_at"), iso(b(7)));
    assert_eq!(field(&r.body, "remaining_pause_cycles"), "3");
    clock_to(&s, b(7));
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "paused");
    assert_eq!(field(&r.body, "remaining_pause_cycles"), "2");
    check_count(&s, code, &want, "second pause");
    // While paused, a change to gold for the renewal: nothing charged, it waits.
    clock_to(&s, b(7) + days(2));
    let r = ok(put(&s, &path, &change_body("gold", "renewal")), 200);
    assert_eq!(field(&r.body, "state"), "paused");
    assert_eq!(field(&r.body, "plan_code"), "silver");
    let pending = field(&r.body, "pending_subscription");
    assert_eq!(field(&pending, "plan_code"), "gold");
    assert_eq!(field(&pending, "unit_amount_in_cents"), GOLD.to_string());
    check_count(&s, code, &want, "change at renewal during a pause");
    // The manual resume: at once, with the pending change, invoiced at once for a new period.
    let resumed = b(7) + days(5);
    clock_to(&s, resumed);
    let anchor = resumed;
    let cb = |n| boundary(c, anchor, n);
    let r = ok(put(&s, &format!("{path}/resume"), ""), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "plan_code"), "gold");
    assert_eq!(field(&r.body, "unit_amount_in_cents"), GOLD.to_string());
    assert_eq!(field(&r.body, "current_period_started_at"), iso(resumed));
    assert_eq!(field(&r.body, "current_period_ends_at"), iso(cb(1)));
    assert_eq!(tag(&r.body, "paused_at").as_deref(), Some(""));
    assert_eq!(tag(&r.body, "remaining_pause_cycles").as_deref(), Some(""));
    assert!(r.body.contains("<pending_subscription type=\"subscription\" nil=\"nil\">"), "{}", r.body);
    want.paid("renewal", resumed, vec![charge(GOLD, resumed, cb(1))]);
    check_count(&s, code, &want, "the manual resume invoices at once");
    let link = format!("<invoice href=\"http://{}/v2/invoices/{}\"/>", s.addr, 1000 + want.bills.len());
    assert!(r.body.contains(&link), "{}", r.body);

    // Renewal of the new schedule at the gold price.
    clock_to(&s, cb(1));
    want.paid("renewal", cb(1), vec![charge(GOLD, cb(1), cb(2))]);
    check_count(&s, code, &want, "renewal after the manual resume");

    // Cancel, then reactivate before the period ends: nothing invoiced, nothing lost.
    clock_to(&s, cb(1) + days(3));
    let r = ok(put(&s, &format!("{path}/cancel"), ""), 200);
    assert_eq!(field(&r.body, "state"), "canceled");
    assert_eq!(field(&r.body, "canceled_at"), iso(cb(1) + days(3)));
    assert_eq!(field(&r.body, "expires_at"), iso(cb(2)));
    assert_eq!(field(&ok(get(&s, &format!("/v2/accounts/{code}")), 200).body, "has_canceled_subscription"), "true");
    assert_eq!(records(&s, "/v2/subscriptions?state=canceled"), 1);
    check_count(&s, code, &want, "cancel");
    clock_to(&s, cb(1) + days(6));
    let r = ok(put(&s, &format!("{path}/reactivate"), ""), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(tag(&r.body, "canceled_at").as_deref(), Some(""));
    assert_eq!(tag(&r.body, "expires_at").as_deref(), Some(""));
    assert_eq!(field(&r.body, "current_period_ends_at"), iso(cb(2)));
    assert_eq!(field(&ok(get(&s, &format!("/v2/accounts/{code}")), 200).body, "has_canceled_subscription"), "false");
    assert_eq!(records(&s, "/v2/subscriptions?state=canceled"), 0);
    check_count(&s, code, &want, "reactivate");
    // The renewal at the end of the period happens exactly once.
    clock_to(&s, cb(2));
    assert_eq!(field(&ok(get(&s, &path), 200).body, "state"), "active");
    want.paid("renewal", cb(2), vec![charge(GOLD, cb(2), cb(3))]);
    check_count(&s, code, &want, "renewal after the reactivation");

    // A change to platinum now: the rest of the period is credited at gold and charged at
    // platinum, on one invoice.
    let changed = cb(2) + days(4);
    clock_to(&s, changed);
    let (rest, whole) = (cb(3) - changed, cb(3) - cb(2));
    let credit_amount = -prorate(GOLD, rest, whole);
    let charge_amount = prorate(PLATINUM, rest, whole);
    assert_eq!((credit_amount, charge_amount), (c.change_credit, c.change_charge));
    let r = ok(put(&s, &path, &change_body("platinum", "now")), 200);
    assert_eq!(field(&r.body, "plan_code"), "platinum");
    assert_eq!(field(&r.body, "unit_amount_in_cents"), PLATINUM.to_string());
    assert_eq!(field(&r.body, "current_period_started_at"), iso(cb(2)));
    assert_eq!(field(&r.body, "current_period_ends_at"), iso(cb(3)));
    want.paid(
        "immediate_change",
        changed,
        vec![credit(credit_amount, changed, cb(3)), charge(charge_amount, changed, cb(3))],
    );
    check_count(&s, code, &want, "change now");

    // A change back to silver at renewal: kept pending, nothing charged now.
    clock_to(&s, cb(2) + days(6));
    let r = ok(put(&s, &path, &change_body("silver", "renewal")), 200);
    assert_eq!(field(&r.body, "plan_code"), "platinum");
    let pending = field(&r.body, "pending_subscription");
    assert_eq!(field(&pending, "plan_code"), "silver");
    assert_eq!(field(&pending, "unit_amount_in_cents"), SILVER.to_string());
    check_count(&s, code, &want, "change at renewal");
    // The renewal bills silver.
    clock_to(&s, cb(3));
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "plan_code"), "silver");
    assert_eq!(field(&r.body, "unit_amount_in_cents"), SILVER.to_string());
    assert!(r.body.contains("<pending_subscription type=\"subscription\" nil=\"nil\">"), "{}", r.body);
    want.paid("renewal", cb(3), vec![charge(SILVER, cb(3), cb(4))]);

    // Plain renewals to the end of the twelve months.
    let mut n = 4;
    while cb(n) <= end_of_story {
        want.paid("renewal", cb(n), vec![charge(SILVER, cb(n), cb(n + 1))]);
        n += 1;
    }
    clock_to(&s, end_of_story);

    // Every invoice of the year, to the cent.
    let (got, pages) = all_invoices(&s, code);
    for (got, want) in got.iter().zip(&want.bills) {
        assert_eq!(got, want, "invoice {}", want.number);
    }
    assert_eq!(got.len(), want.bills.len(), "{got:?}");
    assert_eq!(pages, c.invoice_count.div_ceil(10), "ten invoices a page");
    assert_eq!(origins(db, code), want.origins);
    assert_eq!(got.len(), c.invoice_count);
    assert_eq!(got.iter().map(|b| b.total).sum::<i64>(), c.billed_total);
    // Exactly the billed amount was collected: nothing lost, nothing taken twice.
    let collected: i64 = got
        .iter()
        .flat_map(|b| &b.transactions)
        .filter_map(|t| t.strip_prefix("success:"))
        .map(|a| a.parse::<i64>().expect("amount"))
        .sum();
    assert_eq!(collected, c.billed_total);

    // The subscription at the end of the year.
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "plan_code"), "silver");
    assert_eq!(field(&r.body, "unit_amount_in_cents"), SILVER.to_string());
    assert_eq!(field(&r.body, "activated_at"), iso(t0));
    assert_eq!(field(&r.body, "current_period_started_at"), iso(cb(n - 1)));
    assert_eq!(field(&r.body, "current_period_ends_at"), iso(cb(n)));
    assert_eq!((iso(cb(n - 1)).as_str(), iso(cb(n)).as_str()), c.final_period);
    for empty in ["canceled_at", "expires_at", "paused_at", "remaining_pause_cycles"] {
        assert_eq!(tag(&r.body, empty).as_deref(), Some(""), "{empty}: {}", r.body);
    }
    let last = format!("<invoice href=\"http://{}/v2/invoices/{}\"/>", s.addr, 1000 + c.invoice_count);
    assert!(r.body.contains(&last), "{}", r.body);
    let account = ok(get(&s, &format!("/v2/accounts/{code}")), 200);
    assert_eq!(field(&account.body, "has_active_subscription"), "true");
    assert_eq!(field(&account.body, "has_paused_subscription"), "false");
    assert_eq!(field(&account.body, "has_canceled_subscription"), "false");
    assert_eq!(field(&account.body, "has_past_due_invoice"), "false");
}

fn pause_body(cycles: u32) -> String {
    format!("<subscription><remaining_pause_cycles>{cycles}</remaining_pause_cycles></subscription>")
}

fn change_body(plan_code: &str, timeframe: &str) -> String {
    format!("<subscription><plan_code>{plan_code}</plan_code><timeframe>{timeframe}</timeframe></subscription>")
}

/// A client of the server at API 2.11.
fn client(s: &Server) -> Client {
    Client::builder().base_url(format!("http://{}", s.addr)).api_key(&s.key).build().expect("client")
}

fn run<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(f)
}

/// The number of the account's invoices (HEAD, `X-Records`) equals the number expected so far.
#[track_caller]
fn check_count(s: &Server, code: &str, want: &Ledger, when: &str) {
    let count = run(client(s).accounts().list_invoices(code).count()).expect("X-Records");
    assert_eq!(count, want.bills.len() as u64, "{when}");
}

/// `X-Records` of a list (HEAD).
#[track_caller]
fn records(s: &Server, path: &str) -> usize {
    let r = ok(authed(s, "HEAD", path, &[("X-Api-Version", "2.11")], ""), 200);
    r.header("x-records").and_then(|v| v.parse().ok()).expect("X-Records")
}

/// Every invoice of the account through `GET /v2/accounts/:code/invoices`, ten a page, following
/// the pages' cursors, in invoice-number order; and the number of pages.
fn all_invoices(s: &Server, code: &str) -> (Vec<Bill>, usize) {
    let list = client(s).accounts().list_invoices(code).per_page(10).order(Order::Asc);
    let (mut bills, pages) = run(async {
        let mut bills = Vec::new();
        let mut page = list.page().await.expect("the first page");
        let mut pages = 1;
        loop {
            bills.extend(page.items.iter().map(bill_of));
            let Some(cursor) = page.cursor() else { break };
            pages += 1;
            assert!(pages <= 10, "too many pages");
            page = list.clone().cursor(cursor).page().await.expect("a page");
        }
        (bills, pages)
    });
    bills.sort_by_key(|b| b.number);
    (bills, pages)
}

/// One invoice of a list as the ledger writes it.
fn bill_of(invoice: &Invoice) -> Bill {
    let time = |t: Option<DateTime<Utc>>| t.map(iso).unwrap_or_default();
    let lines = (invoice.line_items.iter().flatten())
        .map(|a| Line {
            kind: if a.kind == Some(AdjustmentType::Credit) { "credit" } else { "charge" }.into(),
            origin: a.origin.as_ref().map(|o| o.name().to_owned()).unwrap_or_default(),
            total: a.total_in_cents.expect("total"),
            start: time(a.start_date),
            end: time(a.end_date),
        })
        .collect();
    let transactions = (invoice.transactions.iter().flatten())
        .map(|t| {
            let status = t.status.as_ref().map(|s| s.name().to_owned()).unwrap_or_default();
            format!("{status}:{}", t.amount_in_cents.expect("amount"))
        })
        .collect();
    Bill {
        number: invoice.invoice_number.expect("number"),
        state: invoice.state.as_ref().map(|s| s.name().to_owned()).unwrap_or_default(),
        total: invoice.total_in_cents.expect("total"),
        created_at: time(invoice.created_at),
        lines,
        transactions,
    }
}

/// The origin of each of the account's invoices, in number order (not on the wire without
/// Credit Memos, so read from the database).
fn origins(db: &str, account: &str) -> Vec<String> {
    sql(
        db,
        &format!(
            "SELECT i.origin FROM invoices i JOIN accounts a ON a.id = i.account_id \
             WHERE a.account_code = '{account}' ORDER BY i.invoice_number"
        ),
    )
}

// ---------------------------------------------------------------------------------------------
// Helpers (as in subscriptions.rs)

/// A server on `db` with the clock at `now` and its own vault key file.
fn serve(db: &str, now: i64) -> Server {
    serve_at(db, now, &[])
}

fn post(s: &Server, path: &str, body: &str) -> Reply {
    authed(s, "POST", path, &xml_at("2.11"), body)
}

fn put(s: &Server, path: &str, body: &str) -> Reply {
    authed(s, "PUT", path, &xml_at("2.11"), body)
}

fn get(s: &Server, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", "2.11")], "")
}

/// Moves the site's clock to `to` (running every job due on the way).
#[track_caller]
fn clock_to(s: &Server, to: DateTime<Utc>) {
    let r = sandbox_clock(s, &format!("<now>{}</now>", iso(to)));
    assert_eq!(field(&r.body, "now"), iso(to));
}

/// Replaces the account's billing info with a new card.
fn set_card(s: &Server, code: &str, number: &str) -> Reply {
    let token = card_token(s, number);
    put(
        s,
        &format!("/v2/accounts/{code}/billing_info"),
        &format!("<billing_info><token_id>{token}</token_id></billing_info>"),
    )
}

fn plan(s: &Server, code: &str, cents: i64, extra: &str) {
    let body = format!(
        "<plan><plan_code>{code}</plan_code><name>Plan {code}</name>\
         <unit_amount_in_cents><USD>{cents}</USD></unit_amount_in_cents>{extra}</plan>"
    );
    ok(post(s, "/v2/plans", &body), 201);
}

/// Creates a subscription of a new account paying with `card`.
fn subscribe(s: &Server, account: &str, plan_code: &str, card: &str) -> Reply {
    let token = card_token(s, card);
    let body = format!(
        "<subscription><plan_code>{plan_code}</plan_code><currency>USD</currency>\
         <account><account_code>{account}</account_code><email>{account}@example.com</email>\
         <first_name>Verena</first_name><last_name>Example</last_name>\
         <billing_info><token_id>{token}</token_id></billing_info></account></subscription>"
    );
    post(s, "/v2/subscriptions", &body)
}
