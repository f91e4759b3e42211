//! The differential test of the renewal paths: every branch a renewal job can take (a plain
//! renewal, manual collection, nothing to charge, no payment method, a declined payment, an
//! earlier charge not invoiced yet, a subscription held by another change) is set up on a fresh
//! database and run four ways, one job at a time (every renewal a batch of one), all jobs in one
//! batch, four runners side by side claiming two jobs at a time, and each job through the
//! general path `subscriptions::run_job` directly, on both backends. The rows the runs leave (subscriptions, charges, invoices, line items,
//! transactions, jobs, domain events) must be the same once ids and random uuids are named by
//! their order.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rebill_app::billing::invoicing;
use rebill_app::customers::accounts;
use rebill_app::customers::payment_methods;
use rebill_app::operations::scheduler;
use rebill_app::operations::testing::{DAY, Scripted, T0, TestClock, at, card, subscribers};
use rebill_app::platform::jobs::{RETRY_SECONDS, settle};
use rebill_app::subscriptions::lifecycle::{self as subscriptions, Details, Loaded, Subscribe};
use rebill_app::{Context, Services};
use rebill_billing::lifecycle::{self, Action, NewSubscription, SubscriptionTerms, Timeframe};
use rebill_billing::period::{Interval, IntervalUnit};
use rebill_store::accounts::AccountFields;
use rebill_store::events::Awaiting;
use rebill_store::invoices::{InvoiceFilter, TransactionFilter};
use rebill_store::plans::{IntervalUnit as PlanUnit, PlanFields};
use rebill_store::subscriptions::{Claimed, SubscriptionChange};
use rebill_store::testing::both_backends;
use rebill_store::{PageRequest, Store};

/// The declined subscriber's plan price: the gateway declines purchases of this amount.
const DECLINED_AMOUNT: i64 = 1313;
/// When the renewals are run (the renewals are due a month after `T0`).
const RUN_AT: i64 = T0 + 31 * DAY + 3600;

/// The subscribers: account code, plan, collection method, what is done to it before the run.
#[derive(Clone, Copy, PartialEq)]
enum Branch {
    Plain,
    Manual,
    ZeroBalance,
    NoPaymentMethod,
    Declined,
    EarlierChargeNotInvoiced,
    BusyElsewhere,
}

/// `subscribers` makes `a0` and `a1` (plain); these follow, in due order.
const BRANCHES: [Branch; 7] = [
    Branch::Manual,
    Branch::ZeroBalance,
    Branch::NoPaymentMethod,
    Branch::Declined,
    Branch::EarlierChargeNotInvoiced,
    Branch::BusyElsewhere,
    Branch::Plain,
];

#[derive(Debug, Clone, Copy)]
enum Mode {
    /// `scheduler::run_due_with(…, 1, 1)`: every renewal a batch of one.
    OneAtATime,
    /// `scheduler::run_due_with(…, 100, 1)`: every due job in one claim, the renewals in one batch.
    Batch,
    /// `scheduler::run_due_with(…, 2, 4)`: four runners side by side, each claiming two jobs at a
    /// time, as four processes would.
    Runners,
    /// Each job through its general path (`subscriptions::run_job` for subscriptions).
    General,
}

fn terms(plan_code: &str, amount: i64, quantity: u32) -> SubscriptionTerms {
    SubscriptionTerms {
        plan_code: plan_code.into(),
        currency: "USD".into(),
        interval: Interval::new(1, IntervalUnit::Months).expect("interval"),
        unit_amount_in_cents: amount,
        quantity,
        add_ons: Vec::new(),
        setup_fee_in_cents: 0,
    }
}

async fn plan(services: &Services, ctx: &Context, code: &str, amount: i64) -> i64 {
    let fields = PlanFields {
        name: Some(code.into()),
        plan_interval_length: Some(1),
        plan_interval_unit: Some(PlanUnit::Months),
        unit_amount_in_cents: Some(BTreeMap::from([("USD".to_owned(), amount)])),
        ..PlanFields::default()
    };
    services.store.create_plan(ctx.site.id, code, &fields, T0).await.expect("plan").id
}

fn uuid(i: usize) -> String {
    format!("{i:032x}")
}

/// Sets up every branch on a fresh store at `T0` (the subscriber busy elsewhere stays claimed
/// until the test releases it); answers the services, the context, the number of subscribers
/// and the claim held.
async fn setup(
    store: Store,
    gateway: Arc<Scripted>,
    clock: Arc<TestClock>,
) -> (Services, Context, usize, rebill_store::subscriptions::SubscriptionClaim) {
    let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 2).await;
    let gold = services.store.plan(ctx.site.id, "gold").await.expect("plan").expect("gold").id;
    let free = plan(&services, &ctx, "free", 0).await;
    let dear = plan(&services, &ctx, "dear", DECLINED_AMOUNT).await;
    let mut busy = None;
    for (n, branch) in BRANCHES.iter().enumerate() {
        let i = n + 2;
        let code = format!("a{i}");
        let (plan_code, plan_id, amount) = match branch {
            Branch::ZeroBalance => ("free", free, 0),
            Branch::Declined => ("dear", dear, DECLINED_AMOUNT),
            _ => ("gold", gold, 1000),
        };
        let account = accounts::create(&services, &ctx, &code, &AccountFields::default(), None).await.expect("account");
        payment_methods::apply(&services, &ctx, &account, &card()).await.expect("billing info");
        let new = NewSubscription {
            uuid: uuid(i),
            terms: terms(plan_code, amount, 1),
            starts_at: None,
            trial: None,
            total_billing_cycles: None,
            imported_trial: false,
        };
        let collection_method = (*branch == Branch::Manual).then(|| "manual".to_owned());
        let input = Subscribe {
            existing: Some(account),
            account_code: code.clone(),
            account_fields: None,
            billing_info: None,
            plan_id,
            drafted: subscriptions::draft(new, at(T0)).expect("drafted"),
            details: Details { account_code: code.clone(), collection_method, ..Details::default() },
            coupon_codes: Vec::new(),
        };
        subscriptions::create(&services, &ctx, input).await.expect("subscribed");
        match branch {
            Branch::NoPaymentMethod => payment_methods::remove(&services, &ctx, &code).await.expect("removed"),
            Branch::EarlierChargeNotInvoiced => {
                // Ten days in, a change to two units is saved with its prorated charge, and the
                // process stops before invoicing it.
                let now = T0 + 10 * DAY;
                clock.set(now);
                let Claimed::Held(claim, record) =
                    services.store.claim_subscription(ctx.site.id, &uuid(i), now, now + 60).await.expect("claim")
                else {
                    panic!("the subscription is free")
                };
                let loaded = Loaded::of(*record).expect("loaded");
                let action = Action::Change { terms: terms("gold", 1000, 2), timeframe: Timeframe::Now };
                let changed = lifecycle::apply(&loaded.sub, &action, at(now)).expect("changed");
                let mut progress = subscriptions::Progress::default();
                let sub = subscriptions::push(changed, at(now), "subscription.changed", None, &mut progress);
                assert_eq!(progress.charges.len(), 1, "a prorated charge");
                let change = SubscriptionChange {
                    indexed: subscriptions::indexed(&sub),
                    value: subscriptions::to_json(&sub).expect("value"),
                    details: loaded.record.details.clone(),
                    events: subscriptions::step_events(&services, &progress.steps, &loaded.details),
                    charges: subscriptions::new_charges(&progress.charges).expect("charges"),
                    ..SubscriptionChange::default()
                };
                services.store.save_subscription(&claim, &change, now).await.expect("saved").expect("held");
                services.store.release_subscription(&claim).await.expect("released");
                clock.set(T0);
            }
            Branch::BusyElsewhere => {
                // Another change holds it past the run (service time).
                let Claimed::Held(claim, _) =
                    services.store.claim_subscription(ctx.site.id, &uuid(i), T0, RUN_AT + 3600).await.expect("claim")
                else {
                    panic!("the subscription is free")
                };
                busy = Some(claim);
            }
            _ => {}
        }
    }
    if let Ok(mut amounts) = gateway.decline_amounts.lock() {
        amounts.push(DECLINED_AMOUNT);
    }
    (services, ctx, BRANCHES.len() + 2, busy.expect("a busy subscription"))
}

/// Runs every job due now the way `mode` says.
async fn run(services: &Services, ctx: &Context, mode: Mode) {
    match mode {
        Mode::OneAtATime => {
            scheduler::run_due_with(services, Some(&ctx.site), 1, 1).await.expect("run one at a time");
        }
        Mode::Batch => {
            scheduler::run_due_with(services, Some(&ctx.site), 100, 1).await.expect("run in one batch");
        }
        Mode::Runners => {
            scheduler::run_due_with(services, Some(&ctx.site), 2, 4).await.expect("run by four runners");
        }
        Mode::General => {
            rebill_app::collection::reactions::sweep(services, Awaiting::Site(ctx.site.id)).await.expect("sweep");
            loop {
                let now = services.clock.now();
                let jobs = services
                    .store
                    .claim_due_jobs(Some(&ctx.site), now, scheduler::LEASE_SECONDS, 100)
                    .await
                    .expect("claimed");
                if jobs.is_empty() {
                    break;
                }
                for job in &jobs {
                    let outcome = match job.kind.as_str() {
                        invoicing::DUNNING_JOB => rebill_app::collection::settlement::run_dunning(services, job).await,
                        invoicing::INVOICE_DUE_JOB => invoicing::run_invoice_due(services, job).await,
                        _ => subscriptions::run_job(services, &ctx.site, job).await,
                    };
                    settle(services, job, outcome).await.expect("settled");
                }
            }
        }
    }
}

/// Names random strings (invoice and transaction uuids) by their order of first sight.
#[derive(Default)]
struct Names(HashMap<String, String>);

impl Names {
    fn name(&mut self, kind: &str, value: &str) -> String {
        let n = self.0.len();
        self.0.entry(value.to_owned()).or_insert_with(|| format!("<{kind}{n}>")).clone()
    }

    fn apply(&self, text: &str) -> String {
        self.0.iter().fold(text.to_owned(), |t, (from, to)| t.replace(from.as_str(), to))
    }
}

/// The rows the run left, normalised: one sorted list of lines per table.
async fn rows(
    services: &Services,
    ctx: &Context,
    subscribers: usize,
    gateway: &Scripted,
) -> BTreeMap<&'static str, Vec<String>> {
    let store = &services.store;
    let site = ctx.site.id;
    let page = PageRequest { limit: 1000, ..PageRequest::default() };
    let mut names = Names::default();
    let mut out: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    // What the gateway was asked to do: the payments (distinct keys) and the first calls of
    // each. A call that asks again about an attempt under its key (`resumed`: the attempt was
    // found under way, e.g. by two runners' jobs of one subscription at once) moves no money
    // and depends on timing, so it is not compared.
    let first_calls = gateway.resumed_calls().iter().filter(|(resumed, _)| !resumed).count();
    out.insert("gateway", vec![format!("{} payments, {first_calls} first calls", gateway.distinct_keys())]);
    // An invoice is named by its account, origin and time, not by its number (numbers follow
    // the order in which jobs due at the same time are claimed).
    let invoices = store.list_invoices(site, &InvoiceFilter::default(), &page).await.expect("invoices").items;
    let numbers: HashMap<i64, String> = invoices
        .iter()
        .map(|i| (i.invoice_number, format!("{}/{}/{}", i.account_code, i.origin, i.created_at)))
        .collect();
    let number = |n: Option<i64>| n.and_then(|n| numbers.get(&n).cloned()).unwrap_or_else(|| "-".to_owned());
    let renumber = |text: &str| {
        numbers.iter().fold(text.to_owned(), |t, (n, name)| {
            t.replace(&format!("\"invoice_number\":{n}"), &format!("\"invoice_number\":\"{name}\""))
        })
    };
    // Named in the order of those names, so that the names do not depend on the order in
    // which the invoices were made either.
    let mut named: Vec<_> = invoices.iter().map(|i| (number(Some(i.invoice_number)), i.uuid.as_str())).collect();
    named.sort();
    for (_, uuid) in named {
        names.name("invoice", uuid);
    }
    let mut transactions =
        store.list_transactions(site, &TransactionFilter::default(), &page).await.expect("transactions").items;
    transactions.sort_by_key(|t| (number(t.invoice_number), t.created_at, t.new.action.clone(), t.id));
    for t in &transactions {
        names.name("transaction", &t.uuid);
    }
    for invoice in &invoices {
        out.entry("invoices").or_default().push(format!(
            "{} {:?} {} {} {:?} due {:?} attempts {} next {:?} closed {:?} created {} updated {}",
            number(Some(invoice.invoice_number)),
            invoice.state,
            invoice.origin,
            invoice.currency,
            invoice.amounts,
            invoice.due_on,
            invoice.collection_attempts,
            invoice.attempt_next_collection_at,
            invoice.closed_at,
            invoice.created_at,
            invoice.updated_at,
        ));
        for line in store.invoice_lines(invoice.id).await.expect("lines") {
            let mut l = line.line.clone();
            l.account_id = 0;
            out.entry("line items").or_default().push(format!(
                "{} {:?} {:?}",
                number(Some(invoice.invoice_number)),
                line.state,
                l
            ));
        }
        for job in store.pending_jobs(&invoice.uuid).await.expect("jobs") {
            out.entry("jobs").or_default().push(format!(
                "{} {} due {} attempts {} error {:?}",
                job.kind,
                names.apply(&job.subject),
                job.due_at,
                job.attempts,
                job.last_error
            ));
        }
        for event in store.events(site, &invoice.invoice_number.to_string()).await.expect("events") {
            out.entry("events").or_default().push(format!(
                "{} {} at {} {}",
                number(Some(invoice.invoice_number)),
                event.kind,
                event.at,
                renumber(&names.apply(&event.payload))
            ));
        }
    }
    for t in &transactions {
        out.entry("transactions").or_default().push(format!(
            "{} {} {} {} {} {:?} recurring {} {:?} collected {:?} created {}",
            names.apply(&t.uuid),
            number(t.invoice_number),
            t.new.action,
            t.new.origin,
            t.new.amount,
            t.result.status,
            t.new.recurring,
            t.result.failure.as_ref().map(|f| format!("{f:?}")),
            t.result.collected_at,
            t.created_at,
        ));
        for event in store.events(site, &t.uuid).await.expect("events") {
            out.entry("events").or_default().push(format!(
                "{} {} at {} {}",
                names.apply(&event.subject),
                event.kind,
                event.at,
                renumber(&names.apply(&event.payload))
            ));
        }
    }
    for i in 0..subscribers {
        let uuid = uuid(i);
        let record = store.subscription(site, &uuid).await.expect("subscription").expect("kept");
        out.entry("subscriptions").or_default().push(format!(
            "{} {} past_due {} last_invoice {:?} updated {} value {} details {}",
            uuid,
            record.state,
            record.past_due,
            number(record.last_invoice.as_deref().and_then(|l| l.parse().ok())),
            record.updated_at,
            record.value,
            record.details,
        ));
        for charge in store.subscription_charges(record.id).await.expect("charges") {
            out.entry("charges").or_default().push(format!(
                "{} {} at {} billed {:?} invoice {:?} lines {}",
                uuid,
                charge.origin,
                charge.at,
                charge.billed_at,
                number(charge.invoice_ref.as_deref().and_then(|l| l.parse().ok())),
                charge.lines
            ));
        }
        for job in store.pending_jobs(&uuid).await.expect("jobs") {
            out.entry("jobs").or_default().push(format!(
                "{} {} due {} attempts {} error {:?}",
                job.kind, job.subject, job.due_at, job.attempts, job.last_error
            ));
        }
        let code = format!("a{i}");
        for subject in [uuid.as_str(), code.as_str()] {
            for event in store.events(site, subject).await.expect("events") {
                out.entry("events").or_default().push(format!(
                    "{} {} at {} {}",
                    event.subject,
                    event.kind,
                    event.at,
                    renumber(&names.apply(&event.payload))
                ));
            }
        }
    }
    for lines in out.values_mut() {
        lines.sort();
    }
    out
}

/// One fresh database per mode; answers the rows after each of the three runs.
async fn scenario(store: Store, mode: Mode) -> Vec<BTreeMap<&'static str, Vec<String>>> {
    let gateway = Scripted::declining(&[]);
    let clock = TestClock::starting(T0);
    let (services, ctx, subscribers, busy) = setup(store, gateway.clone(), clock.clone()).await;
    let mut runs = Vec::new();
    // 1. The renewals are due; one subscription is held by another change.
    clock.set(RUN_AT);
    run(&services, &ctx, mode).await;
    runs.push(rows(&services, &ctx, subscribers, &gateway).await);
    // 2. The other change ends; the busy renewal's retry is due.
    services.store.release_subscription(&busy).await.expect("released");
    clock.set(RUN_AT + RETRY_SECONDS + 60);
    run(&services, &ctx, mode).await;
    runs.push(rows(&services, &ctx, subscribers, &gateway).await);
    // 3. Two days on: the dunning retries and the manual invoice falling due.
    clock.set(RUN_AT + 2 * DAY);
    run(&services, &ctx, mode).await;
    runs.push(rows(&services, &ctx, subscribers, &gateway).await);
    runs
}

/// Every table's lines that one of two runs has and the other has not.
fn differences(a: &BTreeMap<&'static str, Vec<String>>, b: &BTreeMap<&'static str, Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for table in a.keys().chain(b.keys()) {
        let (x, y) = (a.get(table).cloned().unwrap_or_default(), b.get(table).cloned().unwrap_or_default());
        for line in x.iter().filter(|l| !y.contains(l)) {
            out.push(format!("{table}: only in the first: {line}"));
        }
        for line in y.iter().filter(|l| !x.contains(l)) {
            out.push(format!("{table}: only in the second: {line}"));
        }
    }
    out.sort();
    out.dedup();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_job_at_a_time_a_batch_runners_side_by_side_and_the_general_path_leave_the_same_rows() {
    let mut results = Vec::new();
    for mode in [Mode::OneAtATime, Mode::Batch, Mode::Runners, Mode::General] {
        for store in both_backends(&format!("app_renewal_paths_{mode:?}").to_lowercase()).await {
            let backend = store.backend();
            results.push((format!("{mode:?} on {backend:?}"), scenario(store, mode).await));
        }
    }
    let (first_name, first) = &results[0];
    // The scenario reaches every branch: the reference run shows each of them.
    let last = &first[2];
    let invoices = last.get("invoices").cloned().unwrap_or_default().join("\n");
    let subs = last.get("subscriptions").cloned().unwrap_or_default().join("\n");
    assert!(invoices.contains("PastDue"), "the declined renewal's invoice: {invoices}");
    assert!(
        invoices.contains("a2/renewal/1801440000 PastDue") && invoices.contains("attempts 0"),
        "the manual invoice: {invoices}"
    );
    assert!(!invoices.contains("a3/"), "nothing to charge on the free plan: {invoices}");
    assert!(subs.contains("past_due true"), "a subscription past due: {subs}");
    let charges = last.get("charges").cloned().unwrap_or_default();
    assert!(charges.iter().all(|c| !c.contains("billed None")), "every charge billed in the end: {charges:#?}");
    assert!(
        charges.iter().any(|c| c.starts_with(&uuid(6)) && c.contains("immediate_change")),
        "the earlier charge: {charges:#?}"
    );
    let first_run_jobs = first[0].get("jobs").cloned().unwrap_or_default();
    assert!(
        first_run_jobs.iter().any(|j| j.contains(&uuid(7)) && j.contains("attempts 1")),
        "the busy renewal failed and waits for its retry: {first_run_jobs:#?}"
    );
    let retried = first[1].get("invoices").cloned().unwrap_or_default().join("\n");
    assert!(
        !first[0].get("invoices").cloned().unwrap_or_default().join("\n").contains("a7/renewal/")
            && retried.contains("a7/renewal/1801440000 Paid"),
        "the busy renewal is billed by its retry, at its due time: {retried}"
    );
    assert!(
        invoices.contains("a6/immediate_change/1799625600 Paid") && invoices.contains("a6/renewal/1801440000 Paid"),
        "the earlier charge invoiced before the renewal: {invoices}"
    );
    let mut failures = Vec::new();
    for (name, runs) in &results[1..] {
        for (n, (a, b)) in first.iter().zip(runs).enumerate() {
            let diff = differences(a, b);
            if !diff.is_empty() {
                failures.push(format!("run {} of {first_name} vs {name}:\n{}", n + 1, diff.join("\n")));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
