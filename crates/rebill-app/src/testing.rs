//! The in-process harness of the use cases for test suites (feature `testing`): a clock the
//! test moves, a gateway that does what it is told with chosen purchase calls (decline, fail to
//! be reached, never answer), and a site with card-paying subscribers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::accounts;
use crate::payment_methods::{self, BillingRequest};
use crate::subscriptions::{self, Details, Subscribe};
use crate::{Clock, Context, Services};
use chrono::{DateTime, Utc};
use rebill_billing::gateway::{
    Decline, Gateway, GatewayFuture, Outcome, PaymentMethod, PaymentRequest, RefundRequest, SandboxGateway, StoreFuture,
};
use rebill_billing::lifecycle::{NewSubscription, SubscriptionTerms};
use rebill_billing::period::{Interval, IntervalUnit};
use rebill_store::accounts::AccountFields;
use rebill_store::billing_info::BillingFields;
use rebill_store::plans::{IntervalUnit as PlanUnit, PlanFields};
use rebill_store::{Mode, NewSite, Plan, Store};

/// 2027-01-01T00:00:00Z.
pub const T0: i64 = 1_798_761_600;
pub const DAY: i64 = 86_400;

/// A clock the test moves.
pub struct TestClock(pub AtomicI64);

impl TestClock {
    pub fn starting(secs: i64) -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(secs)))
    }

    pub fn set(&self, secs: i64) {
        self.0.store(secs, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// What the scripted gateway does with one purchase call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// Declined by the issuer.
    Decline,
    /// The gateway cannot be reached: a `communication` decline (`gateway_unavailable`).
    Error,
    /// The call never answers.
    Hang,
}

/// The sandbox gateway, except for the purchase calls whose (1-based) numbers are scripted and
/// those of the amounts in `decline_amounts`.
/// Every call's amount and idempotency key are recorded, so a test sees each call the gateway
/// got; like a real gateway it charges an idempotency key once (a call repeating a key that
/// was charged is answered, not charged again).
pub struct Scripted {
    script: Vec<(usize, Script)>,
    /// Purchases of these amounts (in cents) are declined too, whatever their number, so a
    /// decline does not depend on the order in which the purchases come.
    pub decline_amounts: Mutex<Vec<i64>>,
    /// The amount of every purchase call, in order.
    pub purchases: Mutex<Vec<i64>>,
    /// The idempotency key of every purchase call, in order.
    pub keys: Mutex<Vec<String>>,
}

impl Scripted {
    /// Declines the purchases with these (1-based) numbers.
    pub fn declining(decline: &[usize]) -> Arc<Self> {
        Self::following(&decline.iter().map(|n| (*n, Script::Decline)).collect::<Vec<_>>())
    }

    /// Does what `script` says with the purchase calls of these (1-based) numbers.
    pub fn following(script: &[(usize, Script)]) -> Arc<Self> {
        Arc::new(Self {
            script: script.to_vec(),
            decline_amounts: Mutex::new(Vec::new()),
            purchases: Mutex::new(Vec::new()),
            keys: Mutex::new(Vec::new()),
        })
    }

    /// Purchase calls so far.
    pub fn purchases(&self) -> usize {
        self.purchases.lock().map(|p| p.len()).unwrap_or_default()
    }

    /// Distinct idempotency keys the gateway was called with: the payments it made at most.
    pub fn distinct_keys(&self) -> usize {
        let mut keys = self.keys.lock().map(|k| k.clone()).unwrap_or_default();
        keys.sort();
        keys.dedup();
        keys.len()
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
        if let (Ok(mut keys), Some(key)) = (self.keys.lock(), request.idempotency_key) {
            keys.push(key.to_owned());
        }
        let declined = |code: &'static str| {
            let decline = Decline {
                code,
                gateway_error_code: Some("scripted".into()),
                cvv_result: None,
                avs_result: None,
                reference: None,
            };
            Box::pin(async move { Outcome::Declined(decline) }) as GatewayFuture<'a>
        };
        let by_amount = self.decline_amounts.lock().is_ok_and(|a| a.contains(&request.amount_in_cents));
        match self.script.iter().find(|(at, _)| *at == n).map(|(_, s)| *s) {
            _ if by_amount => declined("declined"),
            Some(Script::Decline) => declined("declined"),
            Some(Script::Error) => declined("gateway_unavailable"),
            Some(Script::Hang) => Box::pin(std::future::pending()),
            None => SandboxGateway.purchase(request),
        }
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

pub fn at(secs: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(secs, 0).expect("time in range")
}

pub fn card() -> BillingRequest {
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
pub async fn subscribers(store: Store, gateway: Arc<Scripted>, clock: Arc<TestClock>, n: usize) -> (Services, Context) {
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
