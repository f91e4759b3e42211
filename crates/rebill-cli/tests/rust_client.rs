//! The Rust client (`rebill-client`) against the real `rebill` binary, on SQLite and on
//! PostgreSQL: every implemented endpoint once at 2.11, a sample at 2.0, 2.6, 2.9 and 2.10 where
//! the wire differs, paging across pages with records inserted between them, counting with
//! HEAD, every error variant from a real answer, and the retry and rate-limit policies against
//! a site whose limit is set low.

use std::collections::HashSet;
use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use rebill_client::models::{
    Account, AccountState, AddOn, Adjustment, BillingInfo, CollectionMethod, Coupon, CouponDiscountType, CouponState,
    Invoice, InvoiceState, Plan, Subscription, SubscriptionState, Timeframe, Transaction, TransactionStatus,
};
use rebill_client::{ApiVersion, ByVersion, Client, Error, Money, Order, RetryPolicy};
use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

fn run<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(f)
}

fn client_at(s: &Server, version: &str) -> Client {
    Client::builder()
        .base_url(format!("http://{}", s.addr))
        .api_key(&s.key)
        .api_version(ApiVersion::parse(version).expect("version"))
        .build()
        .expect("client")
}

fn plan(code: &str, cents: i64) -> Plan {
    Plan {
        plan_code: Some(code.into()),
        name: Some(format!("Plan {code}")),
        unit_amount_in_cents: Some(Money(vec![("USD".into(), cents), ("EUR".into(), cents)])),
        ..Plan::default()
    }
}

fn account(code: &str, token: Option<String>) -> Account {
    Account {
        account_code: Some(code.into()),
        email: Some(format!("{code}@example.com")),
        first_name: Some("Verena".into()),
        last_name: Some("Example".into()),
        billing_info: token.map(|t| Box::new(BillingInfo { token_id: Some(t), ..BillingInfo::default() })),
        ..Account::default()
    }
}

fn charge(description: &str, cents: i64) -> Adjustment {
    Adjustment {
        description: Some(description.into()),
        unit_amount_in_cents: Some(cents),
        currency: Some("USD".into()),
        ..Adjustment::default()
    }
}

fn manual() -> Invoice {
    Invoice { collection_method: Some(CollectionMethod::Manual), net_terms: Some(30), ..Invoice::default() }
}

fn subscription_of(account: Account, plan_code: &str) -> Subscription {
    Subscription {
        plan_code: Some(plan_code.into()),
        currency: Some("USD".into()),
        account: Some(Box::new(account)),
        ..Subscription::default()
    }
}

/// The charge invoice of an invoicing answer at 2.10 and later.
#[track_caller]
fn charge_invoice(answer: ByVersion<Invoice, rebill_client::models::InvoiceCollection>) -> Invoice {
    match answer {
        ByVersion::Later(collection) => *collection.charge_invoice.expect("a charge invoice"),
        ByVersion::Earlier(invoice) => panic!("an invoice collection from 2.10, got {invoice:?}"),
    }
}

fn number(invoice: &Invoice) -> String {
    invoice.invoice_number.expect("invoice number").to_string()
}

// ---------------------------------------------------------------------------------------------
// Every implemented endpoint at 2.11

fn every_endpoint(db: &str) {
    let s = serve_at(db, T0, &[]);
    let c = client_at(&s, "2.11");
    let token = |number: &str| card_token(&s, number);
    let (t1, t2, t3, t4, t5) = (
        token("4111111111111111"),
        token("4111111111111111"),
        token("4111111111111111"),
        token("4111111111111111"),
        token("4111111111111111"),
    );
    run(async {
        // Plans and add-ons.
        let gold = c.plans().create(&plan("gold", 1000)).await.expect("create plan");
        assert_eq!(gold.unit_amount_in_cents.as_ref().and_then(|m| m.get("USD")), Some(1000));
        let renamed = Plan { name: Some("Gold".into()), ..Plan::default() };
        assert_eq!(c.plans().update("gold", &renamed).await.expect("update plan").name.as_deref(), Some("Gold"));
        assert_eq!(c.plans().get("gold").await.expect("get plan").name.as_deref(), Some("Gold"));
        c.plans().create(&plan("temp", 5)).await.expect("create plan");
        c.plans().delete("temp").await.expect("delete plan");
        let codes: Vec<String> =
            c.plans().list().stream().map_ok(|p| p.plan_code.unwrap_or_default()).try_collect().await.expect("plans");
        assert_eq!(codes, ["gold"]);
        let seats = AddOn {
            add_on_code: Some("seats".into()),
            name: Some("Seats".into()),
            unit_amount_in_cents: Some(Money::single("USD", 200)),
            ..AddOn::default()
        };
        c.plans().create_add_on("gold", &seats).await.expect("create add-on");
        let update = AddOn { name: Some("Extra seats".into()), ..AddOn::default() };
        c.plans().update_add_on("gold", "seats", &update).await.expect("update add-on");
        let got = c.plans().get_add_on("gold", "seats").await.expect("get add-on");
        assert_eq!(got.name.as_deref(), Some("Extra seats"));
        let listed = c.plans().list_add_ons("gold").page().await.expect("add-ons");
        assert_eq!(listed.items.len(), 1);
        c.plans().delete_add_on("gold", "seats").await.expect("delete add-on");
        assert!(c.plans().list_add_ons("gold").page().await.expect("add-ons").items.is_empty());

        // Accounts and billing info.
        let a1 = c.accounts().create(&account("a1", Some(t1))).await.expect("create account");
        assert_eq!(a1.state, Some(AccountState::Active));
        let info = c.accounts().get_billing_info("a1").await.expect("billing info from the token");
        assert_eq!(info.last_four.as_deref(), Some("1111"));
        let change = Account { first_name: Some("Vera".into()), ..Account::default() };
        assert_eq!(c.accounts().update("a1", &change).await.expect("update").first_name.as_deref(), Some("Vera"));
        assert_eq!(c.accounts().get("a1").await.expect("get").email.as_deref(), Some("a1@example.com"));
        assert_eq!(c.accounts().list().page().await.expect("accounts").items.len(), 1);
        c.accounts().delete_billing_info("a1").await.expect("delete billing info");
        assert!(matches!(c.accounts().get_billing_info("a1").await, Err(Error::NotFound { .. })));
        let info = BillingInfo { token_id: Some(t2), ..BillingInfo::default() };
        c.accounts().update_billing_info("a1", &info).await.expect("update billing info");
        let info = c.accounts().get_billing_info("a1").await.expect("billing info");
        assert_eq!(info.first_six.as_deref(), Some("411111"));
        c.accounts().create(&account("a2", None)).await.expect("create account");
        // Path parameters are percent-encoded (`+` and `@` are allowed in codes).
        let odd = Account { email: Some("xy@example.com".into()), ..account("x+y@example.com", None) };
        c.accounts().create(&odd).await.expect("create account");
        let got = c.accounts().get("x+y@example.com").await.expect("get by an encoded code");
        assert_eq!(got.account_code.as_deref(), Some("x+y@example.com"));
        c.accounts().close("a2").await.expect("close");
        assert_eq!(c.accounts().get("a2").await.expect("get").state, Some(AccountState::Closed));
        assert_eq!(c.accounts().reopen("a2").await.expect("reopen").state, Some(AccountState::Active));

        // Adjustments and invoices.
        let adjustment = c.accounts().create_adjustment("a1", &charge("Consulting", 2500)).await.expect("charge");
        let uuid = adjustment.uuid.clone().expect("uuid");
        assert_eq!(c.adjustments().get(&uuid).await.expect("get adjustment").unit_amount_in_cents, Some(2500));
        let extra = c.accounts().create_adjustment("a1", &charge("Mistake", 100)).await.expect("charge");
        c.adjustments().delete(extra.uuid.as_deref().expect("uuid")).await.expect("delete adjustment");
        assert_eq!(c.accounts().list_adjustments("a1").page().await.expect("adjustments").items.len(), 1);
        let preview = charge_invoice(c.accounts().preview_invoice("a1", &manual()).await.expect("preview"));
        assert_eq!((preview.total_in_cents, preview.invoice_number), (Some(2500), None));
        let first = charge_invoice(c.accounts().create_invoice("a1", &manual()).await.expect("invoice"));
        assert_eq!((first.total_in_cents, first.state.clone()), (Some(2500), Some(InvoiceState::Pending)));
        let n1 = number(&first);
        assert_eq!(c.invoices().get(&n1).await.expect("get invoice").total_in_cents, Some(2500));
        let paid = c.invoices().mark_successful(&n1).await.expect("mark successful");
        assert_eq!(paid.state, Some(InvoiceState::Paid));
        c.accounts().create_adjustment("a1", &charge("Second", 300)).await.expect("charge");
        let n2 = number(&charge_invoice(c.accounts().create_invoice("a1", &manual()).await.expect("invoice")));
        let failed = charge_invoice(c.invoices().mark_failed(&n2).await.expect("mark failed"));
        assert_eq!(failed.state, Some(InvoiceState::Failed));
        c.accounts().create_adjustment("a1", &charge("Third", 700)).await.expect("charge");
        let n3 = number(&charge_invoice(c.accounts().create_invoice("a1", &manual()).await.expect("invoice")));
        let collected = charge_invoice(c.invoices().collect(&n3).await.expect("collect"));
        assert_eq!(collected.state, Some(InvoiceState::Paid));
        let all: Vec<Invoice> = c.invoices().list().stream().try_collect().await.expect("invoices");
        assert_eq!(all.len(), 3);
        let mine = c.accounts().list_invoices("a1").state(InvoiceState::Paid).page().await.expect("invoices");
        assert_eq!(mine.items.len(), 2);

        // Transactions.
        let mut body = Transaction {
            amount_in_cents: Some(1500),
            currency: Some("USD".into()),
            description: Some("Consulting".into()),
            account: Some(Box::new(account("t1", Some(t3)))),
            ..Transaction::default()
        };
        let tx = c.transactions().create(&body).await.expect("transaction");
        assert_eq!(tx.status, Some(TransactionStatus::Success));
        let tx_uuid = tx.uuid.clone().expect("uuid");
        assert_eq!(c.transactions().get(&tx_uuid).await.expect("get").amount_in_cents, Some(1500));
        body.account = Some(Box::new(Account { account_code: Some("t1".into()), ..Account::default() }));
        c.transactions().create(&body).await.expect("second transaction");
        // Two here and the collection of the third invoice.
        assert_eq!(c.transactions().list().state("successful").r#type("purchase").count().await.expect("count"), 3);
        assert_eq!(c.accounts().list_transactions("t1").page().await.expect("transactions").items.len(), 2);

        // Subscriptions.
        let s1 = c.subscriptions().create(&subscription_of(account("s1", Some(t4)), "gold")).await.expect("subscribe");
        assert_eq!(s1.state, Some(SubscriptionState::Active));
        let uuid = s1.uuid.clone().expect("uuid");
        assert_eq!(c.subscriptions().get(&uuid).await.expect("get").uuid.as_deref(), Some(uuid.as_str()));
        let preview = c
            .subscriptions()
            .preview(&subscription_of(account("s2", Some(t5.clone())), "gold"))
            .await
            .expect("preview");
        assert_eq!(preview.unit_amount_in_cents, Some(1000));
        assert!(matches!(c.accounts().get("s2").await, Err(Error::NotFound { .. })), "a preview writes nothing");
        let second =
            Subscription { plan_code: Some("gold".into()), currency: Some("USD".into()), ..Subscription::default() };
        let s2 = c.accounts().create_subscription("s1", &second).await.expect("second subscription");
        let uuid2 = s2.uuid.clone().expect("uuid");
        assert_eq!(c.accounts().list_subscriptions("s1").page().await.expect("subscriptions").items.len(), 2);
        assert_eq!(c.subscriptions().list().state("live").count().await.expect("count"), 2);
        let more = Subscription { quantity: Some(2), timeframe: Some(Timeframe::Now), ..Subscription::default() };
        let previewed = c.subscriptions().preview_change(&uuid, &more).await.expect("preview change");
        assert_eq!(previewed.quantity, Some(2));
        assert_eq!(c.subscriptions().update(&uuid, &more).await.expect("change").quantity, Some(2));
        let notes = Subscription { customer_notes: Some("VIP".into()), ..Subscription::default() };
        let noted = c.subscriptions().update_notes(&uuid, &notes).await.expect("notes");
        assert_eq!(noted.customer_notes.as_deref(), Some("VIP"));
        let paused = c.subscriptions().pause_cycles(&uuid, 1).await.expect("pause");
        assert_eq!(paused.remaining_pause_cycles, Some(1));
        sandbox_clock(&s, "<advance>1month</advance>");
        assert_eq!(c.subscriptions().get(&uuid).await.expect("get").state, Some(SubscriptionState::Paused));
        let resumed = c.subscriptions().resume(&uuid).await.expect("resume");
        assert_eq!(resumed.state, Some(SubscriptionState::Active));
        let canceled = c.subscriptions().cancel(&uuid).await.expect("cancel");
        assert_eq!(canceled.state, Some(SubscriptionState::Canceled));
        let reactivated = c.subscriptions().reactivate(&uuid).await.expect("reactivate");
        assert_eq!(reactivated.state, Some(SubscriptionState::Active));
        let later = c.subscriptions().get(&uuid2).await.expect("get").current_period_ends_at.expect("period end")
            + chrono::Duration::days(10);
        let postponed = c
            .subscriptions()
            .postpone(&uuid2)
            .next_renewal_date(later.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .await
            .expect("postpone");
        assert_eq!(postponed.current_period_ends_at, Some(later));
        let terminated = c.subscriptions().terminate(&uuid2).refund("none").await.expect("terminate");
        assert_eq!(terminated.state, Some(SubscriptionState::Expired));
        let balance = c.accounts().get_balance("s1").await.expect("balance");
        assert_eq!(balance.account_code.as_deref(), Some("s1"));
        assert_eq!(balance.past_due, Some(false));
    });
}

#[test]
fn every_implemented_endpoint_at_2_11_on_both_backends() {
    on_both_backends("client_endpoints", every_endpoint);
}

// ---------------------------------------------------------------------------------------------
// Older versions

fn versions(db: &str) {
    let s = serve_at(db, T0, &[]);
    let latest = client_at(&s, "2.11");
    let token = card_token(&s, "4111111111111111");
    run(async {
        latest.accounts().create(&account("v1", Some(token))).await.expect("account");
        for (i, version) in ["2.0", "2.6", "2.9", "2.10"].iter().enumerate() {
            let c = client_at(&s, version);
            let at_least = |v: &str| c.api_version() >= ApiVersion::parse(v).expect("version");
            c.accounts().create_adjustment("v1", &charge("Work", 1000 + i as i64)).await.expect("charge");
            let answer = c.accounts().create_invoice("v1", &manual()).await.expect("invoice");
            // An invoice before 2.10, an invoice collection from 2.10.
            let invoice = match answer {
                ByVersion::Earlier(invoice) if !at_least("2.10") => invoice,
                ByVersion::Later(collection) if at_least("2.10") => *collection.charge_invoice.expect("charge invoice"),
                other => panic!("{version}: {other:?}"),
            };
            // `open` before 2.10 and `pending` from 2.10 are both read as Pending; the filter is
            // spelled the version's way.
            assert_eq!(invoice.state, Some(InvoiceState::Pending), "{version}");
            let open = c.invoices().list().state(InvoiceState::Pending).page().await.expect("list");
            assert_eq!(open.items.len(), 1, "{version}");
            let n = number(&invoice);
            let paid = c.invoices().mark_successful(&n).await.expect("mark successful");
            // `collected` before 2.10, `paid` from 2.10.
            assert_eq!(paid.state, Some(InvoiceState::Paid), "{version}");
            // The subtotal before discount is `subtotal_in_cents` before 2.10 and
            // `subtotal_before_discount_in_cents` from 2.10; the client reads both into one field.
            assert_eq!(paid.subtotal_before_discount, Some(1000 + i as i64), "{version}");
            // Counting with HEAD exists from 2.6.
            match c.invoices().list().count().await {
                Ok(n) => assert!(at_least("2.6") && n == i as u64 + 1, "{version}: {n}"),
                Err(Error::Unavailable { since, .. }) => {
                    assert!(!at_least("2.6"));
                    assert_eq!(since, ApiVersion::new(2, 6));
                }
                Err(e) => panic!("{version}: {e}"),
            }
            // Pause exists from 2.11: older versions answer 404.
            let sub = Subscription { remaining_pause_cycles: Some(1), ..Subscription::default() };
            assert!(matches!(c.subscriptions().pause("any", &sub).await, Err(Error::NotFound { .. })), "{version}");
        }
    });
}

#[test]
fn versions_2_0_2_6_2_9_and_2_10_on_both_backends() {
    on_both_backends("client_versions", versions);
}

// ---------------------------------------------------------------------------------------------
// Paging and counting

fn paging(db: &str) {
    let s = serve_at(db, T0, &[]);
    let c = client_at(&s, "2.11");
    run(async {
        for i in 0..7 {
            c.accounts().create(&account(&format!("p{i}"), None)).await.expect("account");
        }
        assert_eq!(c.accounts().list().count().await.expect("count"), 7);
        // Oldest first, 3 per page: records created between pages come after the cursor.
        let mut stream = Box::pin(c.accounts().list().per_page(3).order(Order::Asc).stream());
        let mut seen = Vec::new();
        while let Some(record) = stream.next().await {
            let code = record.expect("account").account_code.expect("code");
            seen.push(code);
            if seen.len() == 3 || seen.len() == 6 {
                let n = seen.len();
                c.accounts().create(&account(&format!("q{n}"), None)).await.expect("account");
            }
        }
        let unique: HashSet<&String> = seen.iter().collect();
        assert_eq!(unique.len(), seen.len(), "no duplicates: {seen:?}");
        assert_eq!(seen.len(), 9, "every record, the inserted ones included: {seen:?}");
        assert_eq!(c.accounts().list().count().await.expect("count"), 9);

        // Newest first with pages and cursors: a record inserted between pages is before the
        // cursor and neither shifts nor repeats the rest.
        let list = c.accounts().list().per_page(4);
        let first = list.page().await.expect("page");
        assert_eq!((first.items.len(), first.records), (4, Some(9)));
        c.accounts().create(&account("late", None)).await.expect("account");
        let cursor = first.cursor().expect("a next page");
        let second = list.clone().cursor(cursor).page().await.expect("page");
        let third = list.clone().cursor(second.cursor().expect("a third page")).page().await.expect("page");
        assert_eq!(third.cursor(), None, "the last page");
        let codes: Vec<String> = [first.items, second.items, third.items]
            .concat()
            .into_iter()
            .map(|a| a.account_code.expect("code"))
            .collect();
        assert_eq!(codes.len(), 9);
        assert!(!codes.contains(&"late".to_owned()));
        assert_eq!(codes.iter().collect::<HashSet<_>>().len(), 9);

        // Counting applies the filters.
        c.accounts().close("p0").await.expect("close");
        assert_eq!(c.accounts().list().state(AccountState::Closed).count().await.expect("count"), 1);
        assert_eq!(c.accounts().list().state("active").count().await.expect("count"), 9);
    });
}

#[test]
fn paging_and_counting_on_both_backends() {
    on_both_backends("client_paging", paging);
}

// ---------------------------------------------------------------------------------------------
// Errors

fn errors(db: &str) {
    let s = serve_at(db, T0, &[]);
    let c = client_at(&s, "2.11");
    let good = card_token(&s, "4111111111111111");
    let declined = card_token(&s, "4000000000000002");
    let read_only = s.cli_json(&["keys", "create", "--site", "sandbox", "--read-only"])["private_key"]
        .as_str()
        .expect("key")
        .to_owned();
    let uuid = run(async {
        let e = c.accounts().get("nobody").await.expect_err("unknown account");
        assert!(matches!(&e, Error::NotFound { symbol, .. } if symbol == "not_found"), "{e:?}");

        let bad =
            Account { account_code: Some("x".into()), email: Some("not an address".into()), ..Account::default() };
        let Err(Error::Validation(fields)) = c.accounts().create(&bad).await else { panic!("a validation error") };
        assert!(fields.iter().any(|f| f.field == "account.email" && f.symbol == "invalid_email"), "{fields:?}");

        let body = Transaction {
            amount_in_cents: Some(1000),
            currency: Some("USD".into()),
            account: Some(Box::new(account("d1", Some(declined)))),
            ..Transaction::default()
        };
        let Err(Error::Transaction(decline)) = c.transactions().create(&body).await else { panic!("a decline") };
        assert_eq!(decline.error.error_code.as_deref(), Some("declined"));
        let transaction = decline.transaction.as_ref().expect("the declined transaction");
        assert_eq!(transaction.status, Some(TransactionStatus::Declined));

        let wrong = Client::builder().base_url(format!("http://{}", s.addr)).api_key("0".repeat(32)).build();
        let e = wrong.expect("client").accounts().list().page().await.expect_err("wrong key");
        assert!(matches!(e, Error::Unauthorized), "{e:?}");

        let ro = Client::builder().base_url(format!("http://{}", s.addr)).api_key(&read_only).build().expect("client");
        ro.accounts().list().page().await.expect("a read-only key reads");
        let e = ro.accounts().create(&account("ro", None)).await.expect_err("read-only write");
        assert!(matches!(e, Error::Forbidden), "{e:?}");

        let e = c.accounts().list().per_page(500).page().await.expect_err("per_page too large");
        assert!(matches!(&e, Error::Api { status: 400, symbol, .. } if symbol == "invalid_parameter"), "{e:?}");
        // Coupons: created, then listed by state.
        let coupon = Coupon {
            coupon_code: Some("save10".into()),
            name: Some("Ten percent".into()),
            discount_type: Some(CouponDiscountType::Percent),
            discount_percent: Some(10),
            ..Coupon::default()
        };
        let made = c.coupons().create(&coupon).await.expect("coupon");
        assert_eq!(made.state, Some(CouponState::Redeemable));
        let listed = c.coupons().list().page().await.expect("coupons");
        let codes: Vec<_> = listed.items.iter().filter_map(|c| c.coupon_code.clone()).collect();
        assert_eq!(codes, ["save10"]);
        assert_eq!(c.coupons().list().state("redeemable").count().await.expect("count"), 1);
        assert_eq!(c.coupons().list().state("expired").count().await.expect("count"), 0);
        let e = c.coupons().list().per_page(500).page().await.expect_err("per_page too large");
        assert!(matches!(&e, Error::Api { status: 400, symbol, .. } if symbol == "invalid_parameter"), "{e:?}");

        // Nothing listens on a port just released.
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
        let closed = Client::builder()
            .base_url(format!("http://127.0.0.1:{port}"))
            .api_key("k")
            .retry_policy(RetryPolicy::none())
            .build()
            .expect("client");
        let e = closed.accounts().get("a").await.expect_err("connection refused");
        assert!(matches!(&e, Error::Transport(t) if t.is_connect()), "{e:?}");

        c.plans().create(&plan("gold", 1000)).await.expect("plan");
        let sub = c.subscriptions().create(&subscription_of(account("s1", Some(good)), "gold")).await;
        sub.expect("subscription").uuid.expect("uuid")
    });
    // A change in progress elsewhere (another process holds the subscription's claim).
    sql(
        db,
        &format!("UPDATE subscriptions SET lock_token = 'elsewhere', locked_until = {} WHERE uuid = '{uuid}'", T0 + 30),
    );
    run(async {
        let e = c.subscriptions().cancel(&uuid).await.expect_err("claimed elsewhere");
        assert!(matches!(e, Error::SimultaneousRequest), "{e:?}");
    });
}

#[test]
fn every_error_variant_from_a_real_answer_on_both_backends() {
    on_both_backends("client_errors", errors);
}

// ---------------------------------------------------------------------------------------------
// Rate limits and retries

fn rate_limits(db: &str) {
    let key_file = vault_key_file();
    let args = ["--vault-key-file", key_file.as_str()];
    let s = start_with(db, Options { clock: Some(T0), capture_stderr: true, args: &args, ..Options::default() });
    s.cli(&["site", "update", "--name", "sandbox", "--rate-limit", "1"]);
    // The service's clock is set so that its rate window resets at a whole minute of real time
    // at least five seconds away: the client waits for it in real time.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("time").as_secs() as i64;
    let reset = (now + 5).div_euclid(60) * 60 + 60;
    s.set_clock(reset - 300);
    let c = client_at(&s, "2.11");
    run(async {
        // A sandbox site counts every request: 5 in the five-minute window.
        for remaining in (0..5).rev() {
            c.accounts().list().page().await.expect("within the limit");
            let rate = c.rate_limit().expect("rate-limit headers");
            assert_eq!((rate.limit, rate.remaining, rate.reset_at.timestamp()), (5, remaining, reset));
        }
        let e = c.accounts().list().page().await.expect_err("over the limit");
        assert!(matches!(e, Error::RateLimited { reset_at: Some(t) } if t.timestamp() == reset), "{e:?}");
        // Writes are refused the same way and never retried.
        let e = c.accounts().create(&account("w", None)).await.expect_err("over the limit");
        assert!(matches!(e, Error::RateLimited { .. }), "{e:?}");
        // A wait longer than the policy allows answers at once.
        let impatient = Client::builder()
            .base_url(format!("http://{}", s.addr))
            .api_key(&s.key)
            .wait_on_rate_limit(Duration::from_millis(1))
            .build()
            .expect("client");
        let started = Instant::now();
        assert!(matches!(impatient.accounts().list().page().await, Err(Error::RateLimited { .. })));
        assert!(started.elapsed() < Duration::from_secs(2));
    });
    let refusals = || s.log().matches("status=429").count();
    let deadline = Instant::now() + Duration::from_secs(10);
    while refusals() < 3 {
        assert!(Instant::now() < deadline, "three refusals logged:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let refused = refusals();

    // The patient client waits until the reset and sends the request again; the window has
    // moved on by then (the service's clock is moved to the reset once the 429 is logged).
    let patient = Client::builder()
        .base_url(format!("http://{}", s.addr))
        .api_key(&s.key)
        .wait_on_rate_limit(Duration::from_secs(90))
        .build()
        .expect("client");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let call = runtime.spawn(async move {
        let started = Instant::now();
        let page = patient.accounts().list().page().await;
        (page, started.elapsed(), patient.rate_limit())
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while refusals() == refused {
        assert!(Instant::now() < deadline, "the patient request never reached the service");
        std::thread::sleep(Duration::from_millis(20));
    }
    s.set_clock(reset);
    let (page, waited, rate) = runtime.block_on(call).expect("task");
    page.expect("the request succeeds after the wait");
    let until_reset = reset - now;
    assert!(waited >= Duration::from_secs(1) && waited.as_secs() as i64 <= until_reset + 1, "{waited:?}");
    assert_eq!(refusals(), refused + 1, "one 429 and then the success");
    assert_eq!(rate.expect("rate").remaining, 4, "a new window");
}

#[test]
fn rate_limit_policy_on_both_backends() {
    on_both_backends("client_rate", rate_limits);
}
