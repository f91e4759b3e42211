//! The use cases behind the server's plain endpoints, in process over a real store on both
//! backends: the catalogue, adjustments, the reads, tokens and sites, with the errors an adapter
//! maps (each also classified as an `AppError`).

use std::collections::BTreeMap;
use std::sync::Arc;

use rebill_app::billing::adjustments::{self, AdjustmentError, NewCharge};
use rebill_app::billing::queries::{self, ReadError};
use rebill_app::catalog::plans::{self as catalog, CatalogError};
use rebill_app::customers::payment_methods::{self, BillingRequest};
use rebill_app::platform::error::{AppError, Missing};
use rebill_app::platform::sites::{self, SiteError};
use rebill_app::platform::tokens::{self, TokenError, TokenPayment, TokenRequest};
use rebill_app::{Clock, Context, Services};
use rebill_billing::card::{BankInput, CardInput, Field, Problem};
use rebill_billing::gateway::SANDBOX_ROUTING_NUMBER;
use rebill_store::accounts::AccountFields;
use rebill_store::billing_info::{BillingFields, PaymentKind};
use rebill_store::invoices::{AdjustmentFilter, AdjustmentKind, AdjustmentState};
use rebill_store::plans::{AddOnFields, PlanFields};
use rebill_store::testing::both_backends;
use rebill_store::{Mode, NewSite, PageRequest, Plan, Store};

/// 2027-01-01T00:00:00Z.
const T0: i64 = 1_798_761_600;

struct FixedClock;

impl Clock for FixedClock {
    fn now(&self) -> i64 {
        T0
    }
}

async fn site(store: Store) -> (Services, Context, String) {
    let services = Services::new(store, Arc::new(FixedClock));
    let new =
        NewSite { name: "adapters".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
    let (site, key) = services.store.create_site(&new, T0).await.expect("site");
    (services, Context { site, now: T0 }, key)
}

fn gold() -> PlanFields {
    PlanFields {
        name: Some("Gold".into()),
        unit_amount_in_cents: Some(BTreeMap::from([("USD".to_owned(), 1000)])),
        ..PlanFields::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalogue_creates_finds_and_deletes_plans_and_add_ons() {
    for store in both_backends("app_catalogue").await {
        let backend = store.backend();
        let (services, ctx, _) = site(store).await;
        let plan = catalog::create_plan(&services, &ctx, "gold", &gold()).await.expect("created");
        let taken = catalog::create_plan(&services, &ctx, "gold", &gold()).await;
        assert!(matches!(taken, Err(CatalogError::PlanTaken(ref c)) if c == "gold"), "{backend:?}: {taken:?}");
        let renamed = PlanFields { name: Some("Golden".into()), ..PlanFields::default() };
        let updated = catalog::update_plan(&services, &ctx, "gold", &renamed).await.expect("updated");
        assert_eq!(updated.name, "Golden");

        let extra = AddOnFields { name: Some("Extra".into()), ..AddOnFields::default() };
        catalog::create_add_on(&services, &ctx, &plan, "extra", &extra).await.expect("add-on");
        let taken = catalog::create_add_on(&services, &ctx, &plan, "extra", &extra).await;
        assert!(matches!(taken, Err(CatalogError::AddOnTaken(_))), "{backend:?}: {taken:?}");
        assert_eq!(catalog::add_on(&services, &plan, "extra").await.expect("found").name, "Extra");
        let page = PageRequest { limit: 10, ..PageRequest::default() };
        assert_eq!(catalog::add_ons(&services, &plan, &page).await.expect("listed").items.len(), 1);
        catalog::delete_add_on(&services, &ctx, &plan, "extra").await.expect("deleted");
        let gone = catalog::add_on(&services, &plan, "extra").await;
        assert!(matches!(gone, Err(CatalogError::AddOnNotFound(_))), "{backend:?}: a deleted add-on is not found");
        assert!(catalog::all_add_ons(&services, &plan).await.expect("all").is_empty(), "{backend:?}: live ones only");

        catalog::delete_plan(&services, &ctx, "gold").await.expect("deleted");
        let gone = catalog::plan(&services, &ctx, "gold").await.expect_err("a deleted plan is not found");
        assert!(matches!(AppError::from(gone), AppError::NotFound(m) if m == Missing::plan("gold")));
        assert!(catalog::plans(&services, &ctx, &page).await.expect("listed").items.is_empty(), "{backend:?}");
        let (named, add_ons) =
            catalog::plan_with_add_ons(&services, &ctx, "gold").await.expect("read").expect("still named");
        assert_eq!((named.name.as_str(), add_ons.len()), ("Golden", 0), "{backend:?}: subscriptions still name it");
        let missing = catalog::update_plan(&services, &ctx, "silver", &renamed).await;
        assert!(matches!(missing, Err(CatalogError::PlanNotFound(_))), "{backend:?}: {missing:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adjustments_are_checked_created_read_and_deleted_while_pending() {
    for store in both_backends("app_adjustments").await {
        let backend = store.backend();
        let (services, ctx, _) = site(store).await;
        let account = services
            .store
            .create_account(ctx.site.id, "a1", &AccountFields::default(), T0, &[])
            .await
            .expect("account");
        let charge =
            NewCharge { unit_amount_in_cents: 500, quantity: Some(3), currency: "usd".into(), ..NewCharge::default() };
        let refused = |currency: &str, quantity: i64, unit: i64| NewCharge {
            unit_amount_in_cents: unit,
            quantity: Some(quantity),
            currency: currency.into(),
            ..NewCharge::default()
        };
        for (bad, expected) in [
            (refused("usdx", 1, 100), "currency"),
            (refused("USD", 0, 100), "quantity"),
            (refused("USD", 1_000_001, 100), "quantity"),
            (refused("USD", 2, 600_000_000_000), "unit_amount_in_cents"),
        ] {
            let e = adjustments::create(&services, &ctx, &account, &bad).await.expect_err("refused");
            assert!(
                matches!(
                    e,
                    AdjustmentError::InvalidCurrency | AdjustmentError::InvalidQuantity | AdjustmentError::TooLarge
                ),
                "{backend:?}: {e:?}"
            );
            let AppError::Refused(fields) = AppError::from(e) else { panic!("{backend:?}: not a refusal") };
            let field = fields[0].field.clone();
            assert_eq!(field, expected, "{backend:?}: {bad:?}");
        }

        let created = adjustments::create(&services, &ctx, &account, &charge).await.expect("created");
        assert_eq!(
            (created.line.kind, created.line.origin.as_str(), created.line.currency.as_str(), created.line.total),
            (AdjustmentKind::Charge, "debit", "USD", 1500),
            "{backend:?}"
        );
        assert_eq!(created.line.start_date, Some(T0), "{backend:?}: starts now when not given");
        let credit = NewCharge { unit_amount_in_cents: -200, currency: "USD".into(), ..NewCharge::default() };
        let credit = adjustments::create(&services, &ctx, &account, &credit).await.expect("credit");
        assert_eq!((credit.line.kind, credit.line.origin.as_str()), (AdjustmentKind::Credit, "credit"));

        assert_eq!(
            adjustments::find(&services, &ctx, &created.uuid).await.expect("found").state,
            AdjustmentState::Pending
        );
        let filter = AdjustmentFilter { account_id: Some(account.id), ..AdjustmentFilter::default() };
        let page = PageRequest { limit: 10, ..PageRequest::default() };
        assert_eq!(adjustments::list(&services, &ctx, &filter, &page).await.expect("listed").items.len(), 2);
        adjustments::delete(&services, &ctx, &created.uuid).await.expect("deleted");
        let again = adjustments::delete(&services, &ctx, &created.uuid).await.expect_err("gone");
        assert!(matches!(AppError::from(again), AppError::NotFound(m) if m == Missing::adjustment(&created.uuid)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_name_what_is_missing() {
    for store in both_backends("app_queries").await {
        let backend = store.backend();
        let (services, ctx, _) = site(store).await;
        for number in ["abc", "999999"] {
            let e = queries::invoice(&services, &ctx, number).await.expect_err("no invoice");
            assert!(matches!(e, ReadError::NotFound(ref m) if *m == Missing::invoice(number)), "{backend:?}: {e:?}");
        }
        let e = queries::subscription(&services, &ctx, "0123").await.expect_err("no subscription");
        assert!(matches!(e, ReadError::NotFound(ref m) if *m == Missing::subscription("0123")), "{backend:?}");
        let e = queries::transaction(&services, &ctx, "0123").await.expect_err("no transaction");
        assert!(matches!(AppError::from(e), AppError::NotFound(m) if m.resource == "Transaction"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_issued_for_a_public_key_and_used_once() {
    for store in both_backends("app_tokens").await {
        let backend = store.backend();
        let (services, ctx, _) = site(store).await;
        let unknown = tokens::site_for_public_key(&services, "nobody").await;
        assert!(matches!(unknown, Err(TokenError::InvalidPublicKey)), "{backend:?}");
        let site = tokens::site_for_public_key(&services, &ctx.site.public_key).await.expect("the site");
        assert_eq!(site.id, ctx.site.id);

        let card = |number, cvv, country: &str| TokenRequest {
            payment: TokenPayment::Card(CardInput {
                number: Some(number),
                month: Some("12"),
                year: Some("2031"),
                cvv: Some(cvv),
                first_name: Some("Verena"),
                last_name: Some("Example"),
            }),
            fields: BillingFields {
                first_name: Some("Verena".into()),
                last_name: Some("Example".into()),
                country: Some(country.to_owned()),
                ..BillingFields::default()
            },
        };
        let token = tokens::issue(&services, &site, &card("4111111111111111", "123", "US")).await.expect("issued");
        assert_eq!(token.kind, PaymentKind::CreditCard);
        let account = services
            .store
            .create_account(ctx.site.id, "a1", &AccountFields::default(), T0, &[])
            .await
            .expect("account");
        let with_token = BillingRequest { token_id: Some(token.id.clone()), ..BillingRequest::default() };
        let saved = payment_methods::apply(&services, &ctx, &account, &with_token).await.expect("the token pays");
        assert_eq!(saved.fields.last_four.as_deref(), Some("1111"), "{backend:?}");
        let reused = payment_methods::apply(&services, &ctx, &account, &with_token).await;
        assert!(reused.is_err(), "{backend:?}: a token is used once");

        let e = tokens::issue(&services, &site, &card("4111111111111111", "1234", "US")).await.expect_err("cvv");
        assert!(matches!(e, TokenError::CvvLength(_)), "{backend:?}: {e:?}");
        let e = tokens::issue(&services, &site, &card("4111111111111112", "123", "XX")).await.expect_err("refused");
        match e {
            TokenError::Invalid { errors, country } => {
                assert!(country, "{backend:?}: the country is named");
                assert_eq!(errors.iter().map(|e| e.field).collect::<Vec<_>>(), [Field::Number]);
                assert_eq!(errors[0].problem, Problem::Invalid);
            }
            other => panic!("{backend:?}: {other:?}"),
        }

        let bank = |routing| TokenRequest {
            payment: TokenPayment::Bank(BankInput {
                routing_number: Some(routing),
                account_number: Some("111111111"),
                account_number_confirmation: Some("111111111"),
                confirm: true,
                account_type: Some("checking"),
                name_on_account: Some("Verena Example"),
            }),
            fields: BillingFields::default(),
        };
        let token = tokens::issue(&services, &site, &bank(SANDBOX_ROUTING_NUMBER)).await.expect("a bank token");
        assert_eq!(token.kind, PaymentKind::BankAccount);
        // A routing number with a valid check digit that the gateway does not know.
        let e = tokens::issue(&services, &site, &bank("021000021")).await.expect_err("unknown bank");
        assert!(matches!(e, TokenError::InvalidRoutingNumber), "{backend:?}: {e:?}");
        assert_eq!(tokens::bank_name(&services, &site, "021000021").await.expect("read"), None);
        assert!(tokens::bank_name(&services, &site, SANDBOX_ROUTING_NUMBER).await.expect("read").is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sites_are_found_by_private_key_and_the_demo_finds_its_sandbox() {
    for store in both_backends("app_sites").await {
        let backend = store.backend();
        let (services, ctx, key) = site(store).await;
        let (site, api_key) = sites::authenticate(&services, &key).await.expect("authenticated");
        assert_eq!((site.id, api_key.read_only), (ctx.site.id, false), "{backend:?}");
        let wrong = sites::authenticate(&services, "not-a-key").await;
        assert!(matches!(wrong, Err(SiteError::UnknownKey)), "{backend:?}");
        assert_eq!(sites::first_sandbox(&services).await.expect("a sandbox").id, ctx.site.id);
        let writing = sites::writing_key(&services, &ctx.site).await.expect("keys").expect("a writing key");
        assert_eq!(writing.id, api_key.id, "{backend:?}");
    }
}
