//! The use cases in process, over a real store on both backends, with a scriptable gateway:
//! a decline injected in the middle of a batch of renewals touches only its own invoice, running
//! the scheduler again bills nothing twice, and the dunning retry charges the declined invoice
//! once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};
use rebill_app::accounts;
use rebill_app::payment_methods::{self, BillingRequest};
use rebill_app::subscriptions::{self, Details, Subscribe};
use rebill_app::{Clock, Context, Services, scheduler};
use rebill_billing::gateway::{
    Decline, Gateway, GatewayFuture, Outcome, PaymentMethod, PaymentRequest, RefundRequest, SandboxGateway, StoreFuture,
};
use rebill_billing::lifecycle::{NewSubscription, SubscriptionTerms};
use rebill_billing::period::{Interval, IntervalUnit};
use rebill_store::accounts::AccountFields;
use rebill_store::billing_info::BillingFields;
use rebill_store::invoicing::{InvoiceFilter, InvoiceState, TransactionFilter, TransactionStatus};
use rebill_store::plans::{IntervalUnit as PlanUnit, PlanFields};
use rebill_store::testing::both_backends;
use rebill_store::{Mode, NewSite, PageRequest, Plan, Store};

/// 2027-01-01T00:00:00Z.
const T0: i64 = 1_798_761_600;
const DAY: i64 = 86_400;

/// A clock the test moves.
struct TestClock(AtomicI64);

impl Clock for TestClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The sandbox gateway, except that the purchases whose (1-based) numbers are listed are
/// declined; every purchase's amount is recorded, so a test sees each charge the gateway got.
struct Scripted {
    decline: Vec<usize>,
    purchases: Mutex<Vec<i64>>,
}

impl Scripted {
    fn purchases(&self) -> usize {
        self.purchases.lock().map(|p| p.len()).unwrap_or_default()
    }
}

impl Gateway for Scripted {
    fn kind(&self) -> &'static str {
        SandboxGateway.kind()
    }

    fn is_test(&self) -> bool {
        true
    }

    fn purchase<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        let n = match self.purchases.lock() {
            Ok(mut p) => {
                p.push(request.amount_in_cents);
                p.len()
            }
            Err(_) => 0,
        };
        if self.decline.contains(&n) {
            let decline = Decline {
                code: "declined",
                gateway_error_code: Some("scripted".into()),
                cvv_result: None,
                avs_result: None,
                reference: None,
            };
            return Box::pin(async move { Outcome::Declined(decline) });
        }
        SandboxGateway.purchase(request)
    }

    fn verify<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        SandboxGateway.verify(request)
    }

    fn refund<'a>(&'a self, request: &'a RefundRequest<'a>) -> GatewayFuture<'a> {
        SandboxGateway.refund(request)
    }

    fn store_payment_method<'a>(&'a self, method: PaymentMethod<'a>) -> StoreFuture<'a> {
        SandboxGateway.store_payment_method(method)
    }

    fn bank_name(&self, routing_number: &str) -> Option<String> {
        SandboxGateway.bank_name(routing_number)
    }
}

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(secs, 0).expect("time in range")
}

fn card() -> BillingRequest {
    BillingRequest {
        details: BillingFields {
            first_name: Some("Verena".into()),
            last_name: Some("Example".into()),
            address1: Some("123 Main St.".into()),
            zip: Some("94105".into()),
            country: Some("US".into()),
            ..BillingFields::default()
        },
        number: Some("4111111111111111".into()),
        month: Some(12),
        year: Some(2031),
        verification_value: Some("123".into()),
        ..BillingRequest::default()
    }
}

/// A site with a monthly plan of 10 USD, and `n` subscribers each paying by card, subscribed at
/// `T0` (their first payment approved). Answers the services and the context at `T0`.
async fn subscribers(store: Store, gateway: Arc<Scripted>, clock: Arc<TestClock>, n: usize) -> (Services, Context) {
    let services = Services::new(store, clock).with_gateway(gateway);
    let new_site =
        NewSite { name: "harness".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
    let (site, _) = services.store.create_site(&new_site, T0).await.expect("site");
    let plan_fields = PlanFields {
        name: Some("Gold".into()),
        plan_interval_length: Some(1),
        plan_interval_unit: Some(PlanUnit::Months),
        unit_amount_in_cents: Some(BTreeMap::from([("USD".to_owned(), 1000)])),
        ..PlanFields::default()
    };
    let plan = services.store.create_plan(site.id, "gold", &plan_fields, T0).await.expect("plan");
    let ctx = Context { site, now: T0 };
    for i in 0..n {
        let code = format!("a{i}");
        let account = accounts::create(&services, &ctx, &code, &AccountFields::default(), None).await.expect("account");
        payment_methods::apply(&services, &ctx, &account, &card()).await.expect("billing info");
        let new = NewSubscription {
            uuid: format!("{i:032x}"),
            terms: SubscriptionTerms {
                plan_code: "gold".into(),
                currency: "USD".into(),
                interval: Interval::new(1, IntervalUnit::Months).expect("interval"),
                unit_amount_in_cents: 1000,
                quantity: 1,
                add_ons: Vec::new(),
                setup_fee_in_cents: 0,
            },
            starts_at: None,
            trial: None,
            total_billing_cycles: None,
            imported_trial: false,
        };
        let drafted = subscriptions::draft(new, at(T0)).expect("drafted");
        let input = Subscribe {
            existing: Some(account),
            account_code: code.clone(),
            account_fields: None,
            billing_info: None,
            plan_id: plan.id,
            drafted,
            details: Details { account_code: code, ..Details::default() },
        };
        subscriptions::create(&services, &ctx, input).await.expect("subscribed");
    }
    (services, ctx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decline_in_the_middle_of_a_batch_touches_only_its_subscription_and_nothing_is_billed_twice() {
    for store in both_backends("app_failure_injection").await {
        let backend = store.backend();
        // Purchases 1-5 are the first payments; 6-10 the renewals, run as one batch; the 8th
        // (the third renewal) is declined.
        let gateway = Arc::new(Scripted { decline: vec![8], purchases: Mutex::new(Vec::new()) });
        let clock = Arc::new(TestClock(AtomicI64::new(T0)));
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 5).await;
        assert_eq!(gateway.purchases(), 5, "{backend:?}: first payments");

        // A month later (February 1st) every renewal is due; the dunning retry of a declined
        // one is a day after its invoice.
        clock.0.store(T0 + 31 * DAY + 3600, Ordering::SeqCst);
        let ran = scheduler::run_due(&services, Some(&ctx.site)).await.expect("renewals ran");
        assert!(ran >= 5, "{backend:?}: {ran} jobs ran");
        assert_eq!(gateway.purchases(), 10, "{backend:?}: one charge per renewal");

        let page = PageRequest { limit: 100, ..PageRequest::default() };
        let invoices =
            services.store.list_invoices(ctx.site.id, &InvoiceFilter::default(), &page).await.expect("invoices").items;
        let states: Vec<InvoiceState> = invoices.iter().map(|i| i.state).collect();
        assert_eq!(invoices.len(), 10, "{backend:?}: {states:?}");
        assert_eq!(states.iter().filter(|s| **s == InvoiceState::Paid).count(), 9, "{backend:?}: {states:?}");
        assert_eq!(states.iter().filter(|s| **s == InvoiceState::PastDue).count(), 1, "{backend:?}: {states:?}");
        let declined = services
            .store
            .list_transactions(
                ctx.site.id,
                &TransactionFilter { statuses: vec![TransactionStatus::Declined], ..TransactionFilter::default() },
                &page,
            )
            .await
            .expect("transactions")
            .items;
        assert_eq!(declined.len(), 1, "{backend:?}: the injected decline only");
        let past_due = invoices.iter().find(|i| i.state == InvoiceState::PastDue).expect("a past-due invoice");
        assert_eq!(declined[0].invoice_number, Some(past_due.invoice_number), "{backend:?}");

        // Running the scheduler again at the same time finds nothing due: nothing is charged or
        // invoiced twice.
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("second run");
        assert_eq!(gateway.purchases(), 10, "{backend:?}: no second charge");
        let again =
            services.store.list_invoices(ctx.site.id, &InvoiceFilter::default(), &page).await.expect("invoices");
        assert_eq!(again.items.len(), 10, "{backend:?}: no second invoice");

        // The retry a day later charges the declined invoice once (approved this time).
        clock.0.store(T0 + 32 * DAY + 3600, Ordering::SeqCst);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("retry");
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("nothing left");
        assert_eq!(gateway.purchases(), 11, "{backend:?}: one retry");
        let retried = services.store.invoice_by_id(past_due.id).await.expect("invoice").expect("kept");
        assert_eq!(retried.state, InvoiceState::Paid, "{backend:?}");
        let amounts = gateway.purchases.lock().map(|p| p.clone()).unwrap_or_default();
        assert!(amounts.iter().all(|a| *a == 1000), "{backend:?}: {amounts:?}");
    }
}
