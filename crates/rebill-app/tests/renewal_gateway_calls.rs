//! A batch of renewals has several gateway calls under way at once: the gateway here lets no
//! purchase answer until `GATEWAY_CALLS_AT_ONCE` purchases are waiting together, so a batch
//! calling one renewal at a time would never finish. Every renewal is then charged once, under
//! its own key, and paid, on both backends.

use std::sync::Arc;
use std::time::Duration;

use rebill_app::operations::scheduler;
use rebill_app::operations::testing::{DAY, Scripted, T0, TestClock, subscribers};
use rebill_app::subscriptions::renewals::GATEWAY_CALLS_AT_ONCE;
use rebill_billing::gateway::{
    CvvRequest, Gateway, GatewayFuture, PaymentMethod, PaymentRequest, RefundRequest, StoreFuture, VoidRequest,
};
use rebill_billing::states::InvoiceState;
use rebill_store::PageRequest;
use rebill_store::invoices::InvoiceFilter;
use rebill_store::testing::both_backends;
use tokio::sync::Barrier;

/// The scripted gateway, whose purchases wait for each other in groups of
/// [`GATEWAY_CALLS_AT_ONCE`].
struct Gathering {
    inner: Arc<Scripted>,
    together: Barrier,
}

impl Gateway for Gathering {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn is_test(&self) -> bool {
        self.inner.is_test()
    }

    fn purchase<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(async move {
            self.together.wait().await;
            self.inner.purchase(request).await
        })
    }

    fn verify<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        self.inner.verify(request)
    }

    fn refund<'a>(&'a self, request: &'a RefundRequest<'a>) -> GatewayFuture<'a> {
        self.inner.refund(request)
    }

    fn void<'a>(&'a self, request: &'a VoidRequest<'a>) -> GatewayFuture<'a> {
        self.inner.void(request)
    }

    fn store_payment_method<'a>(&'a self, method: PaymentMethod<'a>, replacing: Option<&'a str>) -> StoreFuture<'a> {
        self.inner.store_payment_method(method, replacing)
    }

    fn bank_name(&self, routing_number: &str) -> Option<String> {
        self.inner.bank_name(routing_number)
    }

    fn check_cvv<'a>(&'a self, request: &'a CvvRequest<'a>) -> GatewayFuture<'a> {
        self.inner.check_cvv(request)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_has_several_gateway_calls_under_way_at_once() {
    // Two groups of calls in one batch.
    let n = 2 * GATEWAY_CALLS_AT_ONCE;
    for store in both_backends("app_renewal_gateway_calls").await {
        let backend = store.backend();
        let scripted = Scripted::declining(&[]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, scripted.clone(), clock.clone(), n).await;
        let first_payments = scripted.purchases();
        let gathering = Gathering { inner: scripted.clone(), together: Barrier::new(GATEWAY_CALLS_AT_ONCE) };
        let services = services.with_gateway(Arc::new(gathering));
        clock.set(T0 + 31 * DAY);
        // One runner claiming every job: the renewals are one batch.
        let run = scheduler::run_due_with(&services, Some(&ctx.site), 64, 1);
        let ran = tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .unwrap_or_else(|_| panic!("{backend:?}: the batch's purchases never were under way together"))
            .expect("the renewals ran");
        assert_eq!(ran, n, "{backend:?}: every renewal ran");
        assert_eq!(scripted.purchases() - first_payments, n, "{backend:?}: one purchase per renewal");
        assert_eq!(scripted.distinct_keys(), first_payments + n, "{backend:?}: each under its own key");
        let page = PageRequest { limit: 100, ..PageRequest::default() };
        let invoices =
            services.store.list_invoices(ctx.site.id, &InvoiceFilter::default(), &page).await.expect("invoices");
        let renewals: Vec<_> = invoices.items.iter().filter(|i| i.origin == "renewal").collect();
        assert_eq!(renewals.len(), n, "{backend:?}: one renewal invoice each");
        assert!(renewals.iter().all(|i| i.state == InvoiceState::Paid), "{backend:?}: every renewal paid");
    }
}
