//! The in-process harness of the use cases for test suites (feature `testing`): a clock the
//! test moves, a gateway that does what it is told with chosen purchase, refund and void calls
//! (decline, fail to be reached, never answer) and records every call, and a site with
//! card-paying subscribers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::customers::accounts;
use crate::customers::payment_methods::{self, BillingRequest};
use crate::subscriptions::lifecycle::{self as subscriptions, Details, Subscribe};
use crate::{Clock, Context, Services};
use chrono::{DateTime, Utc};
use rebill_billing::gateway::{
    Decline, Gateway, GatewayFuture, Outcome, PaymentMethod, PaymentRequest, RefundRequest, SandboxGateway,
    StoreFuture, VoidRequest,
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

/// What the scripted gateway does with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// Declined: a purchase by the issuer (`declined`), a refund or void by the gateway
    /// (`transaction_cannot_be_refunded`, `transaction_cannot_be_voided`).
    Decline,
    /// The gateway cannot be reached: a `communication` decline (`gateway_unavailable`).
    Error,
    /// The call never answers.
    Hang,
    /// The call is made (as the sandbox would answer it) but its answer is lost: an unknown
    /// outcome ([`Outcome::Pending`], `gateway_timeout`). Asked again under the same key, the
    /// gateway answers what it did.
    Lost,
    /// The request never reaches the gateway and no answer comes: an unknown outcome
    /// ([`Outcome::Pending`], `gateway_timeout`), with nothing done. Asked again under the same
    /// key, the gateway finds nothing: it charges when the request may be sent again
    /// ([`PaymentRequest::may_resend`]), else declines it (`attempt_not_found`), as Stripe does.
    Unsent,
}

/// The kinds of gateway calls a script acts on; the calls of each kind are numbered on their own,
/// from 1, in the order the gateway gets them (a repeated call counts again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Purchase,
    Refund,
    Void,
}

/// One refund or void call the scripted gateway got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GiveBackCall {
    pub amount_in_cents: i64,
    pub currency: String,
    /// The gateway reference of the purchase given back.
    pub reference: String,
    pub idempotency_key: Option<String>,
}

/// The sandbox gateway, except for the calls whose (1-based) numbers are scripted and the
/// purchases of the amounts in `decline_amounts`.
/// Every call's amount and idempotency key are recorded (refunds and voids also with the
/// reference they give back), so a test sees each call the gateway got; like a real gateway it
/// charges, refunds or voids an idempotency key once (a call repeating a key that was done is
/// answered, not done again), so the distinct keys count what it did at most.
pub struct Scripted {
    script: Vec<(Call, usize, Script)>,
    /// Purchases of these amounts (in cents) are declined too, whatever their number, so a
    /// decline does not depend on the order in which the purchases come. Refunds and voids are
    /// scripted by number only.
    pub decline_amounts: Mutex<Vec<i64>>,
    /// The amount of every purchase call, in order.
    pub purchases: Mutex<Vec<i64>>,
    /// The idempotency key of every purchase call, in order.
    pub keys: Mutex<Vec<String>>,
    /// `resumed` and `may_resend` of every purchase call, in order.
    resumed: Mutex<Vec<(bool, bool)>>,
    /// The keys of the purchases the gateway did (approved or declined).
    done: Mutex<Vec<String>>,
    refunds: Mutex<Vec<GiveBackCall>>,
    voids: Mutex<Vec<GiveBackCall>>,
}

/// Records a refund or void call and answers its (1-based) number among the calls of its kind.
fn record(calls: &Mutex<Vec<GiveBackCall>>, call: GiveBackCall) -> usize {
    let mut calls = calls.lock().unwrap_or_else(PoisonError::into_inner);
    calls.push(call);
    calls.len()
}

fn recorded(calls: &Mutex<Vec<GiveBackCall>>) -> Vec<GiveBackCall> {
    calls.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

fn distinct<'k>(keys: impl Iterator<Item = &'k str>) -> usize {
    let mut keys: Vec<&str> = keys.collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

/// A decline of the scripted gateway.
fn declined<'a>(code: &'static str) -> GatewayFuture<'a> {
    declined_as(code, "scripted")
}

/// A decline of the scripted gateway with the gateway's own code.
fn declined_as<'a>(code: &'static str, gateway_error_code: &str) -> GatewayFuture<'a> {
    let decline = Decline {
        code,
        gateway_error_code: Some(gateway_error_code.into()),
        cvv_result: None,
        avs_result: None,
        reference: None,
    };
    Box::pin(async move { Outcome::Declined(decline) })
}

/// What a scripted call answers: its script's outcome (`refused` the code of a decline), or the
/// sandbox's answer when it has none.
fn answer<'a>(
    script: Option<Script>,
    refused: &'static str,
    sandbox: impl FnOnce() -> GatewayFuture<'a>,
) -> GatewayFuture<'a> {
    match script {
        Some(Script::Decline) => declined(refused),
        Some(Script::Error) => declined("gateway_unavailable"),
        Some(Script::Hang) => Box::pin(std::future::pending()),
        Some(Script::Unsent) => Box::pin(std::future::ready(Outcome::Pending(rebill_billing::gateway::Pending {
            code: "gateway_timeout",
            reference: None,
        }))),
        Some(Script::Lost) => {
            let done = sandbox();
            Box::pin(async move {
                let outcome = done.await;
                let reference = match &outcome {
                    Outcome::Approved(a) => Some(a.reference.clone()),
                    _ => None,
                };
                Outcome::Pending(rebill_billing::gateway::Pending { code: "gateway_timeout", reference })
            })
        }
        None => sandbox(),
    }
}

impl Scripted {
    /// Declines the purchases with these (1-based) numbers.
    pub fn declining(decline: &[usize]) -> Arc<Self> {
        Self::following(&decline.iter().map(|n| (*n, Script::Decline)).collect::<Vec<_>>())
    }

    /// Does what `script` says with the purchase calls of these (1-based) numbers.
    pub fn following(script: &[(usize, Script)]) -> Arc<Self> {
        Self::scripting(&script.iter().map(|(n, s)| (Call::Purchase, *n, *s)).collect::<Vec<_>>())
    }

    /// Does what `script` says with the calls of these kinds and (1-based) numbers, e.g.
    /// `(Call::Refund, 2, Script::Hang)`: the second refund call never answers.
    pub fn scripting(script: &[(Call, usize, Script)]) -> Arc<Self> {
        Arc::new(Self {
            script: script.to_vec(),
            decline_amounts: Mutex::new(Vec::new()),
            purchases: Mutex::new(Vec::new()),
            keys: Mutex::new(Vec::new()),
            resumed: Mutex::new(Vec::new()),
            done: Mutex::new(Vec::new()),
            refunds: Mutex::new(Vec::new()),
            voids: Mutex::new(Vec::new()),
        })
    }

    /// The script of call `n` of this kind.
    fn script_of(&self, call: Call, n: usize) -> Option<Script> {
        self.script.iter().find(|(c, at, _)| *c == call && *at == n).map(|(_, _, s)| *s)
    }

    /// Purchase calls so far.
    pub fn purchases(&self) -> usize {
        self.purchases.lock().map(|p| p.len()).unwrap_or_default()
    }

    /// Distinct idempotency keys the gateway was called with: the payments it made at most.
    pub fn distinct_keys(&self) -> usize {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        distinct(keys.iter().map(String::as_str))
    }

    /// `(resumed, may_resend)` of every purchase call, in order ([`PaymentRequest::resumed`],
    /// [`PaymentRequest::may_resend`]).
    pub fn resumed_calls(&self) -> Vec<(bool, bool)> {
        self.resumed.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Refund calls so far.
    pub fn refunds(&self) -> usize {
        self.refunds.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Every refund call, in order.
    pub fn refund_calls(&self) -> Vec<GiveBackCall> {
        recorded(&self.refunds)
    }

    /// Distinct idempotency keys of the refund calls: the refunds it made at most.
    pub fn distinct_refund_keys(&self) -> usize {
        let calls = self.refunds.lock().unwrap_or_else(PoisonError::into_inner);
        distinct(calls.iter().filter_map(|c| c.idempotency_key.as_deref()))
    }

    /// Void calls so far.
    pub fn voids(&self) -> usize {
        self.voids.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Every void call, in order.
    pub fn void_calls(&self) -> Vec<GiveBackCall> {
        recorded(&self.voids)
    }

    /// Distinct idempotency keys of the void calls: the voids it made at most.
    pub fn distinct_void_keys(&self) -> usize {
        let calls = self.voids.lock().unwrap_or_else(PoisonError::into_inner);
        distinct(calls.iter().filter_map(|c| c.idempotency_key.as_deref()))
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
        if let Ok(mut resumed) = self.resumed.lock() {
            resumed.push((request.resumed, request.may_resend));
        }
        let by_amount = self.decline_amounts.lock().is_ok_and(|a| a.contains(&request.amount_in_cents));
        let script = if by_amount { Some(Script::Decline) } else { self.script_of(Call::Purchase, n) };
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        let found = request.idempotency_key.is_some_and(|key| done.iter().any(|d| d == key));
        if script.is_none() && request.resumed && !request.may_resend && !found {
            // Nothing done under the key, which may be forgotten: not sent again.
            return declined_as("gateway_timeout", "attempt_not_found");
        }
        if let (Some(key), None | Some(Script::Decline | Script::Lost)) = (request.idempotency_key, script) {
            done.push(key.to_owned());
        }
        drop(done);
        answer(script, "declined", || SandboxGateway.purchase(request))
    }

    fn verify<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        SandboxGateway.verify(request)
    }

    fn check_cvv<'a>(&'a self, request: &'a rebill_billing::gateway::CvvRequest<'a>) -> GatewayFuture<'a> {
        SandboxGateway.check_cvv(request)
    }

    fn refund<'a>(&'a self, request: &'a RefundRequest<'a>) -> GatewayFuture<'a> {
        let n = record(
            &self.refunds,
            GiveBackCall {
                amount_in_cents: request.amount_in_cents,
                currency: request.currency.to_owned(),
                reference: request.reference.to_owned(),
                idempotency_key: request.idempotency_key.map(str::to_owned),
            },
        );
        answer(self.script_of(Call::Refund, n), "transaction_cannot_be_refunded", || SandboxGateway.refund(request))
    }

    fn void<'a>(&'a self, request: &'a VoidRequest<'a>) -> GatewayFuture<'a> {
        let n = record(
            &self.voids,
            GiveBackCall {
                amount_in_cents: request.amount_in_cents,
                currency: request.currency.to_owned(),
                reference: request.reference.to_owned(),
                idempotency_key: request.idempotency_key.map(str::to_owned),
            },
        );
        answer(self.script_of(Call::Void, n), "transaction_cannot_be_voided", || SandboxGateway.void(request))
    }

    fn store_payment_method<'a>(&'a self, method: PaymentMethod<'a>, replacing: Option<&'a str>) -> StoreFuture<'a> {
        SandboxGateway.store_payment_method(method, replacing)
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
            coupon_codes: Vec::new(),
        };
        subscriptions::create(&services, &ctx, input).await.expect("subscribed");
    }
    (services, ctx)
}

#[cfg(test)]
mod tests {
    use std::task::{Context as TaskContext, Waker};

    use rebill_billing::card::{Brand, Card, Expiry};
    use rebill_billing::gateway::{Approval, AvsAddress};

    use super::*;

    fn card(number: &str) -> Card {
        Card {
            number: number.to_owned(),
            brand: Brand::detect(number, false),
            expiry: Expiry { month: 12, year: 2031 },
            cvv: Some("123".to_owned()),
        }
    }

    async fn purchase(gateway: &Scripted, number: &str, amount_in_cents: i64, key: &str) -> Outcome {
        let c = card(number);
        let request = PaymentRequest {
            amount_in_cents,
            currency: "USD",
            method: PaymentMethod::Card(&c),
            address: AvsAddress::default(),
            recurring: false,
            idempotency_key: Some(key),
            resumed: false,
            may_resend: false,
            invoice: None,
            replacing: None,
        };
        gateway.purchase(&request).await
    }

    async fn refund(gateway: &Scripted, reference: &str, amount_in_cents: i64, key: Option<&str>) -> Outcome {
        let request = RefundRequest { amount_in_cents, currency: "USD", reference, idempotency_key: key };
        gateway.refund(&request).await
    }

    async fn void(gateway: &Scripted, reference: &str, amount_in_cents: i64, key: Option<&str>) -> Outcome {
        let request = VoidRequest { reference, amount_in_cents, currency: "USD", idempotency_key: key };
        gateway.void(&request).await
    }

    fn approved(outcome: Outcome) -> Approval {
        match outcome {
            Outcome::Approved(a) => a,
            other => panic!("not approved: {other:?}"),
        }
    }

    fn declined_code(outcome: &Outcome) -> &'static str {
        match outcome {
            Outcome::Declined(d) => d.code,
            other => panic!("not declined: {other:?}"),
        }
    }

    fn call(amount_in_cents: i64, reference: &str, key: Option<&str>) -> GiveBackCall {
        GiveBackCall {
            amount_in_cents,
            currency: "USD".to_owned(),
            reference: reference.to_owned(),
            idempotency_key: key.map(str::to_owned),
        }
    }

    #[tokio::test]
    async fn refunds_and_voids_follow_their_own_numbered_script() {
        let gateway = Scripted::scripting(&[
            (Call::Purchase, 2, Script::Error),
            (Call::Refund, 1, Script::Decline),
            (Call::Refund, 2, Script::Error),
            (Call::Refund, 3, Script::Hang),
            (Call::Void, 2, Script::Decline),
            (Call::Void, 3, Script::Error),
            (Call::Void, 4, Script::Hang),
        ]);
        let original = approved(purchase(&gateway, "4111111111111111", 1000, "p1").await).reference;

        assert_eq!(
            declined_code(&refund(&gateway, &original, 400, Some("r1")).await),
            "transaction_cannot_be_refunded"
        );
        assert_eq!(declined_code(&refund(&gateway, &original, 400, Some("r1")).await), "gateway_unavailable");
        let request =
            RefundRequest { amount_in_cents: 600, currency: "USD", reference: &original, idempotency_key: None };
        let mut hanging = gateway.refund(&request);
        assert!(hanging.as_mut().poll(&mut TaskContext::from_waker(Waker::noop())).is_pending());
        let refunded = approved(refund(&gateway, &original, 600, Some("r2")).await);
        assert_ne!(refunded.reference, original, "a refund of its own");

        assert_eq!(approved(void(&gateway, &original, 1000, Some("v1")).await).reference, original);
        assert_eq!(declined_code(&void(&gateway, &original, 1000, Some("v1")).await), "transaction_cannot_be_voided");
        assert_eq!(declined_code(&void(&gateway, &original, 1000, None).await), "gateway_unavailable");
        let request =
            VoidRequest { reference: &original, amount_in_cents: 1000, currency: "USD", idempotency_key: Some("v2") };
        let mut hanging = gateway.void(&request);
        assert!(hanging.as_mut().poll(&mut TaskContext::from_waker(Waker::noop())).is_pending());

        // Purchases keep their own numbering: the second purchase is the scripted one.
        assert_eq!(declined_code(&purchase(&gateway, "4111111111111111", 500, "p2").await), "gateway_unavailable");
        assert!(purchase(&gateway, "4111111111111111", 500, "p3").await.is_approved());

        // Every call is recorded, the hanging ones too.
        assert_eq!((gateway.purchases(), gateway.distinct_keys()), (3, 3));
        assert_eq!(gateway.refunds(), 4);
        assert_eq!(
            gateway.refund_calls(),
            vec![
                call(400, &original, Some("r1")),
                call(400, &original, Some("r1")),
                call(600, &original, None),
                call(600, &original, Some("r2")),
            ]
        );
        assert_eq!(gateway.distinct_refund_keys(), 2);
        assert_eq!(gateway.voids(), 4);
        assert_eq!(
            gateway.void_calls(),
            vec![
                call(1000, &original, Some("v1")),
                call(1000, &original, Some("v1")),
                call(1000, &original, None),
                call(1000, &original, Some("v2")),
            ]
        );
        assert_eq!(gateway.distinct_void_keys(), 2);
    }

    #[tokio::test]
    async fn unscripted_calls_answer_like_the_sandbox() {
        let gateway = Scripted::declining(&[]);
        let no_refund = approved(purchase(&gateway, "4000000000002024", 1000, "p1").await).reference;
        assert_eq!(declined_code(&refund(&gateway, &no_refund, 1000, None).await), "transaction_cannot_be_refunded");
        assert_eq!(declined_code(&void(&gateway, &no_refund, 1000, None).await), "transaction_cannot_be_voided");
        let original = approved(purchase(&gateway, "4111111111111111", 1000, "p2").await).reference;
        assert_eq!(declined_code(&refund(&gateway, &original, 0, None).await), "invalid_amount");
        assert_eq!(declined_code(&void(&gateway, &original, -1, None).await), "invalid_amount");
        assert!(refund(&gateway, &original, 1000, Some("r")).await.is_approved());
        assert!(void(&gateway, &original, 1000, Some("v")).await.is_approved());
        assert_eq!((gateway.refunds(), gateway.voids()), (3, 3));
        // Calls without a key are recorded but count no key.
        assert_eq!((gateway.distinct_refund_keys(), gateway.distinct_void_keys()), (1, 1));
    }

    #[tokio::test]
    async fn purchases_are_declined_by_number_or_by_amount() {
        let gateway = Scripted::declining(&[2]);
        if let Ok(mut amounts) = gateway.decline_amounts.lock() {
            amounts.push(777);
        }
        assert!(purchase(&gateway, "4111111111111111", 1000, "a").await.is_approved());
        assert_eq!(declined_code(&purchase(&gateway, "4111111111111111", 1000, "b").await), "declined");
        assert_eq!(declined_code(&purchase(&gateway, "4111111111111111", 777, "c").await), "declined");
        assert!(purchase(&gateway, "4111111111111111", 1000, "c").await.is_approved());
        assert_eq!(gateway.purchases.lock().map(|p| p.clone()).unwrap_or_default(), vec![1000, 1000, 777, 1000]);
        assert_eq!((gateway.purchases(), gateway.distinct_keys()), (4, 3));
        // Refunds are not declined by amount.
        let original = approved(purchase(&gateway, "4111111111111111", 1000, "d").await).reference;
        assert!(refund(&gateway, &original, 777, None).await.is_approved());
    }
}
