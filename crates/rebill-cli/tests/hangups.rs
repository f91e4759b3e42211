//! Clients that hang up, on SQLite and on PostgreSQL: a raw TCP client sends a write and closes
//! its socket at a point of the request — right after the head, half-way through the body, right
//! after the body, or a few milliseconds later while rebill works — and the operation either did
//! not happen at all (the request was not whole when the client went away) or happened whole: a
//! one-off charge's invoice is paid by its successful transaction, a terminated subscription is
//! expired and what was paid for it refunded, a changed subscription is changed and let go (the
//! next change is accepted at once, never `simultaneous_request`). A client that hangs up on a
//! terminate with full refund and retries at once never gets back more than it paid. A service
//! asked to stop waits, within its grace, for the writes of clients gone.
//!
//! Every request that reached rebill is logged when it ends, also when its client went away
//! (with the status it would have been answered): the tests wait for that line, never for a
//! fixed time, before they look at what the request did.

use std::time::{Duration, Instant};

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
/// What a subscription to the plan `monthly` pays for its first period.
const MONTHLY: i64 = 3000;

/// Every point a client hangs up at in these tests.
const CUTS: [Cut; 6] =
    [Cut::AfterHead, Cut::MidBody, Cut::AfterBody, Cut::WhileWorking(1), Cut::WhileWorking(5), Cut::WhileWorking(20)];

/// The points that differ for a request with `body` (without a body, right after the head is
/// right after the body, and there is no half of it).
fn cuts_for(body: &str) -> Vec<Cut> {
    CUTS.into_iter().filter(|cut| !body.is_empty() || !matches!(cut, Cut::AfterHead | Cut::MidBody)).collect()
}

/// The statuses of the requests `method path` (without the query) logged so far, in order.
fn logged(s: &Server, method: &str, path: &str) -> Vec<u16> {
    let needle = format!(" method={method} path={path} query=");
    s.log()
        .lines()
        .filter(|line| line.contains(&needle))
        .map(|line| {
            let status = line.split(" status=").nth(1).and_then(|rest| rest.split(' ').next());
            status.and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("a status in {line}"))
        })
        .collect()
}

/// Waits until `method path` has been logged `n` times (each request is logged when it ends,
/// also when nobody waits for its answer any more) and answers the statuses.
#[track_caller]
fn await_logged(s: &Server, method: &str, path: &str, n: usize) -> Vec<u16> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let statuses = logged(s, method, path);
        if statuses.len() >= n {
            assert_eq!(statuses.len(), n, "{method} {path} logged more often than sent: {statuses:?}");
            return statuses;
        }
        assert!(Instant::now() < deadline, "{method} {path} logged {} of {n} times", statuses.len());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The number answered by one SQL statement.
#[track_caller]
fn int(db: &str, statement: &str) -> i64 {
    let rows = sql(db, statement);
    assert_eq!(rows.len(), 1, "{statement}: {rows:?}");
    rows[0].parse().unwrap_or_else(|_| panic!("{statement}: {rows:?}"))
}

/// The sum of the amounts of the account's transactions `action` (`purchase`, `refund`) that
/// succeeded.
fn transacted(db: &str, code: &str, action: &str) -> i64 {
    int(
        db,
        &format!(
            "SELECT CAST(COALESCE(SUM(t.amount), 0) AS BIGINT) FROM transactions t JOIN accounts a \
             ON a.id = t.account_id WHERE a.account_code = '{code}' AND t.action = '{action}' AND t.status = 'success'"
        ),
    )
}

/// Nothing of the account is left half-done: no invoice pending or processing, no transaction
/// processing.
#[track_caller]
fn nothing_half_done(db: &str, code: &str) {
    let invoices = int(
        db,
        &format!(
            "SELECT COUNT(*) FROM invoices i JOIN accounts a ON a.id = i.account_id \
             WHERE a.account_code = '{code}' AND i.state IN ('pending', 'processing')"
        ),
    );
    assert_eq!(invoices, 0, "{code}: invoices left pending or processing");
    let transactions = int(
        db,
        &format!(
            "SELECT COUNT(*) FROM transactions t JOIN accounts a ON a.id = t.account_id \
             WHERE a.account_code = '{code}' AND t.status = 'processing'"
        ),
    );
    assert_eq!(transactions, 0, "{code}: transactions left processing");
}

/// The subscription `uuid` is held by no change (its claim let go).
#[track_caller]
fn not_held(db: &str, uuid: &str) {
    let held = int(db, &format!("SELECT COUNT(*) FROM subscriptions WHERE uuid = '{uuid}' AND lock_token IS NOT NULL"));
    assert_eq!(held, 0, "subscription {uuid} is still claimed");
}

fn serve(db: &str) -> Server {
    let key_file = vault_key_file();
    let args = ["--vault-key-file", key_file.as_str()];
    start_with(db, Options { clock: Some(T0), args: &args, capture_stderr: true, ..Options::default() })
}

/// An account `code` paying with the sandbox gateway's card 4111….
fn customer(s: &Server, code: &str) {
    let body = format!("<account><account_code>{code}</account_code><email>{code}@example.com</email></account>");
    ok(authed(s, "POST", "/v2/accounts", &xml_at("2.11"), &body), 201);
    let body = format!("<billing_info><token_id>{}</token_id></billing_info>", card_token(s, "4111111111111111"));
    ok(authed(s, "PUT", &format!("/v2/accounts/{code}/billing_info"), &xml_at("2.11"), &body), 200);
}

/// The plan `monthly` at [`MONTHLY`].
fn monthly_plan(s: &Server) {
    let body = format!(
        "<plan><plan_code>monthly</plan_code><name>Monthly</name>\
         <unit_amount_in_cents><USD>{MONTHLY}</USD></unit_amount_in_cents></plan>"
    );
    ok(authed(s, "POST", "/v2/plans", &xml_at("2.11"), &body), 201);
}

/// A new account `code` subscribed to `monthly` with a card (its first period paid); answers
/// the subscription's uuid.
fn subscription(s: &Server, code: &str) -> String {
    let body = format!(
        "<subscription><plan_code>monthly</plan_code><currency>USD</currency>\
         <account><account_code>{code}</account_code><email>{code}@example.com</email>\
         <billing_info><token_id>{}</token_id></billing_info></account></subscription>",
        card_token(s, "4111111111111111")
    );
    let r = ok(authed(s, "POST", "/v2/subscriptions", &xml_at("2.11"), &body), 201);
    assert_eq!(transacted(&s.database, code, "purchase"), MONTHLY, "the first period is paid");
    field(&r.body, "uuid")
}

/// `POST /v2/transactions` cut at every point: a charge whose request was whole is invoiced,
/// charged and its invoice paid; one cut before its body was whole leaves nothing.
fn charges(db: &str) {
    let s = serve(db);
    for (i, cut) in CUTS.into_iter().enumerate() {
        let code = format!("charge{i}");
        customer(&s, &code);
        let amount = 500 + 100 * i64::try_from(i).expect("small");
        let body = format!(
            "<transaction><amount_in_cents>{amount}</amount_in_cents><currency>USD</currency>\
             <account><account_code>{code}</account_code></account></transaction>"
        );
        hang_up(&s, &s.key, "POST", "/v2/transactions", &body, cut);
        let status = await_logged(&s, "POST", "/v2/transactions", i + 1)[i];
        let invoices = |condition: &str| {
            int(
                db,
                &format!(
                    "SELECT COUNT(*) FROM invoices i JOIN accounts a ON a.id = i.account_id \
                     WHERE a.account_code = '{code}'{condition}"
                ),
            )
        };
        let purchases = int(
            db,
            &format!(
                "SELECT COUNT(*) FROM transactions t JOIN accounts a ON a.id = t.account_id \
                 WHERE a.account_code = '{code}' AND t.action = 'purchase'"
            ),
        );
        if cut.whole(&body) {
            assert_eq!(status, 201, "{cut:?}");
            assert_eq!(invoices(""), 1, "{cut:?}: one invoice");
            assert_eq!(invoices(&format!(" AND i.state = 'paid' AND i.total = {amount}")), 1, "{cut:?}: paid");
            assert_eq!(purchases, 1, "{cut:?}: one charge");
            assert_eq!(transacted(db, &code, "purchase"), amount, "{cut:?}: the charge succeeded");
        } else {
            assert_eq!(status, 400, "{cut:?}: the body could not be read");
            assert_eq!(invoices(""), 0, "{cut:?}: no invoice");
            assert_eq!(purchases, 0, "{cut:?}: no charge");
        }
        nothing_half_done(db, &code);
    }
}

#[test]
fn a_charge_whose_client_hung_up_is_made_whole_or_not_at_all() {
    on_both_backends("hangup_charges", charges);
}

/// `PUT /v2/subscriptions/:uuid/terminate?refund=full` (a request without a body, whole once
/// its head is) cut at every point: the subscription is expired and everything it paid is
/// refunded, and it is let go.
fn terminations(db: &str) {
    let s = serve(db);
    monthly_plan(&s);
    for (i, cut) in cuts_for("").into_iter().enumerate() {
        let code = format!("term{i}");
        let uuid = subscription(&s, &code);
        let path = format!("/v2/subscriptions/{uuid}/terminate");
        hang_up(&s, &s.key, "PUT", &format!("{path}?refund=full"), "", cut);
        assert_eq!(await_logged(&s, "PUT", &path, 1), [200], "{cut:?}");
        assert_eq!(sql(db, &format!("SELECT state FROM subscriptions WHERE uuid = '{uuid}'")), ["expired"], "{cut:?}");
        assert_eq!(transacted(db, &code, "refund"), MONTHLY, "{cut:?}: what was paid is refunded");
        assert_eq!(transacted(db, &code, "purchase"), MONTHLY, "{cut:?}: nothing more was charged");
        not_held(db, &uuid);
        nothing_half_done(db, &code);
    }
}

#[test]
fn a_terminate_with_refund_whose_client_hung_up_expires_and_refunds_whole() {
    on_both_backends("hangup_terminations", terminations);
}

/// `PUT /v2/subscriptions/:uuid` (one more unit, now) cut at every point: the change is made
/// and invoiced whole, or not at all; either way the subscription is let go when the request
/// ends, and the next change is accepted at once.
fn changes(db: &str) {
    let s = serve(db);
    monthly_plan(&s);
    let body = "<subscription><quantity>2</quantity><timeframe>now</timeframe></subscription>";
    for (i, cut) in CUTS.into_iter().enumerate() {
        let code = format!("change{i}");
        let uuid = subscription(&s, &code);
        let path = format!("/v2/subscriptions/{uuid}");
        hang_up(&s, &s.key, "PUT", &path, body, cut);
        let status = await_logged(&s, "PUT", &path, 1)[0];
        not_held(db, &uuid);
        let read = ok(authed(&s, "GET", &path, &[("X-Api-Version", "2.11")], ""), 200);
        let changed = int(
            db,
            &format!(
                "SELECT COUNT(*) FROM invoices i JOIN accounts a ON a.id = i.account_id \
                 WHERE a.account_code = '{code}' AND i.origin = 'immediate_change' AND i.state = 'paid'"
            ),
        );
        if cut.whole(body) {
            assert_eq!(status, 200, "{cut:?}");
            assert_eq!(field(&read.body, "quantity"), "2", "{cut:?}: changed");
            assert_eq!(changed, 1, "{cut:?}: the change is invoiced and paid");
            assert!(transacted(db, &code, "purchase") > MONTHLY, "{cut:?}: the change is charged");
        } else {
            assert_eq!(status, 400, "{cut:?}: the body could not be read");
            assert_eq!(field(&read.body, "quantity"), "1", "{cut:?}: unchanged");
            assert_eq!(changed, 0, "{cut:?}: nothing invoiced");
            assert_eq!(transacted(db, &code, "purchase"), MONTHLY, "{cut:?}: nothing charged");
        }
        nothing_half_done(db, &code);
        // Another request changes it at once.
        let next = "<subscription><quantity>3</quantity><timeframe>renewal</timeframe></subscription>";
        let r = authed(&s, "PUT", &path, &xml_at("2.11"), next);
        assert_eq!(r.status, 200, "{cut:?}: the next change is refused\n{}", r.body);
        not_held(db, &uuid);
    }
}

#[test]
fn a_change_whose_client_hung_up_lets_its_subscription_go() {
    on_both_backends("hangup_changes", changes);
}

/// A client hangs up on a terminate with full refund and sends it again at once: one of the two
/// terminates (the other is refused, 422), and what is refunded is what was paid, never more.
fn retries(db: &str) {
    let s = serve(db);
    monthly_plan(&s);
    for (i, cut) in cuts_for("").into_iter().chain([Cut::WhileWorking(2), Cut::WhileWorking(10)]).enumerate() {
        let code = format!("retry{i}");
        let uuid = subscription(&s, &code);
        let path = format!("/v2/subscriptions/{uuid}/terminate");
        hang_up(&s, &s.key, "PUT", &format!("{path}?refund=full"), "", cut);
        let retried = authed(&s, "PUT", &format!("{path}?refund=full"), &xml_at("2.11"), "");
        assert!(
            matches!(retried.status, 200 | 422),
            "{cut:?}: the retry answered {}\n{}",
            retried.status,
            retried.body
        );
        let statuses = await_logged(&s, "PUT", &path, 2);
        assert_eq!(
            statuses.iter().filter(|&&status| status == 200).count(),
            1,
            "{cut:?}: terminated once: {statuses:?}"
        );
        assert!(statuses.iter().all(|&status| matches!(status, 200 | 422)), "{cut:?}: {statuses:?}");
        assert_eq!(sql(db, &format!("SELECT state FROM subscriptions WHERE uuid = '{uuid}'")), ["expired"], "{cut:?}");
        let paid = transacted(db, &code, "purchase");
        assert_eq!(paid, MONTHLY, "{cut:?}");
        assert_eq!(transacted(db, &code, "refund"), paid, "{cut:?}: refunded what was paid, never more");
        not_held(db, &uuid);
        nothing_half_done(db, &code);
    }
}

#[test]
fn a_client_that_retries_after_hanging_up_gets_back_what_it_paid_never_more() {
    on_both_backends("hangup_retries", retries);
}

/// A write whose client hung up is waited for when the service stops: SIGTERM while a refund
/// of a client gone waits for the invoice's row lock (held by the test, on PostgreSQL) closes
/// the listener and every connection, and the process waits on; once the lock is let go the
/// refund is made whole and the process exits 0 within the grace.
#[test]
fn a_stopping_service_waits_for_the_writes_of_clients_gone() {
    let database = postgres_database("hangup_shutdown");
    let db = database.url();
    let mut s = serve(db);
    s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    customer(&s, "gone");
    let body = "<adjustment><description>Order</description><unit_amount_in_cents>2000</unit_amount_in_cents>\
                <currency>USD</currency></adjustment>";
    ok(authed(&s, "POST", "/v2/accounts/gone/adjustments", &xml_at("2.11"), body), 201);
    let r = ok(authed(&s, "POST", "/v2/accounts/gone/invoices", &xml_at("2.9"), ""), 201);
    let number = field(&r.body, "invoice_number");
    assert_eq!(transacted(db, "gone", "purchase"), 2000);

    // The test holds the invoice's row: a refund waits for it.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let mut holder = runtime.block_on(async {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(db).await.expect("a connection");
        sqlx::query("BEGIN").execute(&mut conn).await.expect("begin");
        let locked = format!("SELECT id FROM invoices WHERE invoice_number = {number} FOR UPDATE");
        sqlx::query(&locked).execute(&mut conn).await.expect("the invoice's row");
        conn
    });
    let path = format!("/v2/invoices/{number}/refund");
    let refund = "<invoice><refund_method>all_transaction</refund_method></invoice>";
    hang_up(&s, &s.key, "POST", &path, refund, Cut::AfterBody);
    let waiting =
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'";
    let deadline = Instant::now() + Duration::from_secs(30);
    while int(db, waiting) == 0 {
        assert!(Instant::now() < deadline, "the refund never reached the invoice's lock\n{}", s.log());
        std::thread::sleep(Duration::from_millis(5));
    }

    s.signal("TERM");
    while !s.log().contains("every connection finished") {
        assert!(Instant::now() < deadline, "the connections never closed\n{}", s.log());
        std::thread::sleep(Duration::from_millis(5));
    }
    // Its connection closed, the refund still waits for the lock: the process waits for it.
    assert!(s.wait_exit(Duration::ZERO).is_none(), "the process left a write behind\n{}", s.log());
    assert!(!s.log().contains("went away finished"), "{}", s.log());
    runtime.block_on(async {
        sqlx::query("COMMIT").execute(&mut holder).await.expect("the lock let go");
    });
    let status = s.wait_exit(Duration::from_secs(20)).expect("the service exits within the grace");
    assert!(status.success(), "{status:?}\n{}", s.log());
    assert!(s.log().contains("every request whose client went away finished"), "{}", s.log());
    assert_eq!(logged(&s, "POST", &path), [201], "the refund was made");
    assert_eq!(transacted(db, "gone", "refund"), 2000, "refunded to the card");
    let credited = int(
        db,
        &format!(
            "SELECT CAST(COALESCE(-SUM(r.total), 0) AS BIGINT) FROM invoices r JOIN invoices o \
             ON o.id = r.original_invoice_id WHERE o.invoice_number = {number}"
        ),
    );
    assert_eq!(credited, 2000, "one credit invoice gives back what was paid");
    nothing_half_done(db, "gone");
}
