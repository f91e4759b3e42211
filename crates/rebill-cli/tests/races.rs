//! Money operations raced: for each operation that gives money back, spends credit or uses up a
//! limit, 12 requests released together (several rounds), on three topologies — SQLite with one
//! `rebill serve`, PostgreSQL with one, and PostgreSQL with two processes sharing the database
//! (requests alternate between them). Whatever order the database lets them run in, what is
//! given back never exceeds what was paid, credit spent never exceeds credit held, a purchase is
//! voided or refunded but never both, each limit is exact, nothing answers 5xx, and a refused
//! request leaves nothing behind (no credit invoice, no `processing` row, no recovery job).
//! Checked through the API and in the database. Some races have clients that hang up at points
//! of their requests: what those requests did counts all the same.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
/// Requests released together in each race.
const RACERS: usize = 12;
/// Rounds of each race (each on fresh records).
const ROUNDS: usize = 3;

/// One or more `rebill serve` processes on one database, with the site's private key.
struct Topology {
    servers: Vec<Server>,
    key: String,
    db: String,
}

impl Topology {
    fn first(&self) -> &Server {
        &self.servers[0]
    }

    fn send(&self, method: &str, version: &str, path: &str, body: &str) -> Reply {
        authed_with(self.first(), &self.key, method, path, &xml_at(version), body)
    }

    fn get(&self, path: &str) -> Reply {
        authed_with(self.first(), &self.key, "GET", path, &[("X-Api-Version", "2.11")], "")
    }

    /// Sends the requests `requests` (method, path, body) all at once, request `i` to server
    /// `i % servers`, each thread waiting at one barrier until all are ready; answers the replies
    /// in the order of `requests`. No reply may be a 5xx.
    fn race(&self, requests: Vec<(String, String, String)>) -> Vec<Reply> {
        let barrier = Arc::new(Barrier::new(requests.len()));
        let replies = std::thread::scope(|scope| {
            let handles: Vec<_> = requests
                .iter()
                .enumerate()
                .map(|(i, (method, path, body))| {
                    let barrier = barrier.clone();
                    let server = &self.servers[i % self.servers.len()];
                    let key = self.key.as_str();
                    scope.spawn(move || {
                        barrier.wait();
                        authed_with(server, key, method, path, &xml_at("2.11"), body)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("racer")).collect::<Vec<Reply>>()
        });
        for (r, (method, path, _)) in replies.iter().zip(&requests) {
            assert!(r.status < 500, "{method} {path} answered {}\n{}", r.status, r.body);
        }
        replies
    }

    /// Like [`Topology::race`], but the racers with a [`Cut`] send their request raw and close
    /// the connection at that point without reading an answer (their reply is `None`).
    fn race_hanging_up(&self, requests: Vec<(String, String, String, Option<Cut>)>) -> Vec<Option<Reply>> {
        let barrier = Arc::new(Barrier::new(requests.len()));
        let replies = std::thread::scope(|scope| {
            let handles: Vec<_> = requests
                .iter()
                .enumerate()
                .map(|(i, (method, path, body, cut))| {
                    let barrier = barrier.clone();
                    let server = &self.servers[i % self.servers.len()];
                    let key = self.key.as_str();
                    scope.spawn(move || {
                        barrier.wait();
                        match cut {
                            None => Some(authed_with(server, key, method, path, &xml_at("2.11"), body)),
                            Some(cut) => {
                                hang_up(server, key, method, path, body, *cut);
                                None
                            }
                        }
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("racer")).collect::<Vec<Option<Reply>>>()
        });
        for (r, (method, path, _, _)) in replies.iter().zip(&requests) {
            if let Some(r) = r {
                assert!(r.status < 500, "{method} {path} answered {}\n{}", r.status, r.body);
            }
        }
        replies
    }

    /// Waits until the servers together have logged `method path` (without the query) `n`
    /// times — each request is logged when it ends, also when its client went away — and
    /// answers the statuses.
    #[track_caller]
    fn await_logged(&self, method: &str, path: &str, n: usize) -> Vec<u16> {
        let needle = format!(" method={method} path={path} query=");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let statuses: Vec<u16> = self
                .servers
                .iter()
                .flat_map(|s| {
                    let log = s.log();
                    log.lines()
                        .filter(|line| line.contains(&needle))
                        .map(|line| {
                            let status = line.split(" status=").nth(1).and_then(|rest| rest.split(' ').next());
                            status.and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("a status in {line}"))
                        })
                        .collect::<Vec<u16>>()
                })
                .collect();
            if statuses.len() >= n {
                assert_eq!(statuses.len(), n, "{method} {path} logged more often than sent: {statuses:?}");
                return statuses;
            }
            assert!(Instant::now() < deadline, "{method} {path} logged {} of {n} times", statuses.len());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The integer answered by one SQL statement.
    fn int(&self, statement: &str) -> i64 {
        let rows = sql(&self.db, statement);
        assert_eq!(rows.len(), 1, "{statement}: {rows:?}");
        rows[0].parse().unwrap_or_else(|_| panic!("{statement}: {rows:?}"))
    }

    fn credit_memos(&self) {
        self.first().cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    }

    /// A new account paying with the card 4111…, its billing info stored.
    fn customer(&self, code: &str) {
        let body = format!("<account><account_code>{code}</account_code><email>{code}@example.com</email></account>");
        ok(self.send("POST", "2.11", "/v2/accounts", &body), 201);
        let token = self.card_token("4111111111111111");
        let body = format!("<billing_info><token_id>{token}</token_id></billing_info>");
        ok(self.send("PUT", "2.11", &format!("/v2/accounts/{code}/billing_info"), &body), 200);
    }

    fn card_token(&self, number: &str) -> String {
        card_token(self.first(), number)
    }

    /// One line of `cents` (quantity 1) invoiced to `code` and paid by its card; answers the
    /// invoice number and the purchase's uuid.
    fn paid_invoice(&self, code: &str, cents: i64) -> (String, String) {
        let body = format!(
            "<adjustment><description>Order</description><unit_amount_in_cents>{cents}</unit_amount_in_cents>\
             <currency>USD</currency></adjustment>"
        );
        ok(self.send("POST", "2.11", &format!("/v2/accounts/{code}/adjustments"), &body), 201);
        let r = ok(self.send("POST", "2.9", &format!("/v2/accounts/{code}/invoices"), ""), 201);
        assert!(r.body.contains("<state>collected</state>"), "{}", r.body);
        let number = field(&r.body, "invoice_number");
        let transactions = &r.body[r.body.find("<transactions").expect("transactions")..];
        (number, field(transactions, "uuid"))
    }

    /// What was given back of the invoice `number`: the totals of the invoices crediting it
    /// (not failed), as positive cents.
    fn credited(&self, number: &str) -> i64 {
        self.int(&format!(
            "SELECT CAST(COALESCE(-SUM(r.total), 0) AS BIGINT) FROM invoices r JOIN invoices o \
             ON o.id = r.original_invoice_id WHERE o.invoice_number = {number} AND r.state <> 'failed'"
        ))
    }

    /// Refund transactions of the purchase `uuid` that succeeded or are under way.
    fn refunded(&self, uuid: &str) -> i64 {
        self.int(&format!(
            "SELECT CAST(COALESCE(SUM(r.amount), 0) AS BIGINT) FROM transactions r JOIN transactions p \
             ON p.id = r.original_transaction_id WHERE p.uuid = '{uuid}' AND r.action = 'refund' \
             AND r.status IN ('success', 'processing')"
        ))
    }

    /// Nothing is left half-done: no invoice and no transaction `processing`.
    fn nothing_pending(&self) {
        assert_eq!(self.int("SELECT COUNT(*) FROM invoices WHERE state = 'processing'"), 0, "processing invoices");
        assert_eq!(
            self.int("SELECT COUNT(*) FROM transactions WHERE status = 'processing'"),
            0,
            "processing transactions"
        );
    }

    /// The account's credit left (open credit, positive cents) in USD.
    fn credit_left(&self, code: &str) -> i64 {
        self.int(&format!(
            "SELECT CAST(COALESCE(-SUM(i.balance), 0) AS BIGINT) FROM invoices i JOIN accounts a \
             ON a.id = i.account_id WHERE a.account_code = '{code}' AND i.balance < 0"
        ))
    }
}

/// Runs `scenario` on SQLite with one server, PostgreSQL with one, and PostgreSQL with two.
fn on_three_topologies(tag: &str, scenario: fn(&Topology)) {
    let sqlite = rebill_store::testing::fresh_sqlite_url(tag);
    scenario(&topology(&sqlite, 1));
    let pg = postgres_database(tag);
    scenario(&topology(pg.url(), 1));
    let pg2 = postgres_database(&format!("{tag}2"));
    scenario(&topology(pg2.url(), 2));
}

/// The servers keep their logs (each request's line, also of requests whose clients hung up).
fn topology(db: &str, processes: usize) -> Topology {
    let key_file = vault_key_file();
    let args = ["--vault-key-file", key_file.as_str()];
    let first = start_with(db, Options { clock: Some(T0), args: &args, capture_stderr: true, ..Options::default() });
    let key = first.key.clone();
    let clock = first.clock.clone();
    let mut servers = vec![first];
    for _ in 1..processes {
        let options = Options {
            clock_file: clock.clone(),
            args: &args,
            existing_database: true,
            capture_stderr: true,
            ..Options::default()
        };
        servers.push(start_with(db, options));
    }
    Topology { servers, key, db: db.to_owned() }
}

fn refund_body(method: &str, amount: Option<i64>) -> String {
    let amount = amount.map(|a| format!("<amount_in_cents>{a}</amount_in_cents>")).unwrap_or_default();
    format!("<invoice><refund_method>{method}</refund_method>{amount}</invoice>")
}

fn successes(replies: &[Reply], status: u16) -> usize {
    replies.iter().filter(|r| r.status == status).count()
}

/// The 12 refunds raced on one paid invoice of 2000: mixed methods and amounts (`None`: all
/// that is left).
const MIXED_REFUNDS: [(&str, Option<i64>); RACERS] = [
    ("all_credit", Some(900)),
    ("credit_first", Some(700)),
    ("all_transaction", Some(700)),
    ("all_credit", None),
    ("all_credit", Some(1500)),
    ("transaction_first", Some(300)),
    ("all_transaction", None),
    ("credit_first", None),
    ("all_credit", Some(100)),
    ("all_transaction", Some(1200)),
    ("transaction_first", None),
    ("all_credit", Some(2000)),
];

/// 12 refunds of one paid invoice of 2000 with mixed methods and amounts.
fn mixed_invoice_refunds(t: &Topology) {
    t.credit_memos();
    for round in 0..ROUNDS {
        let code = format!("mixed{round}");
        t.customer(&code);
        let (number, purchase) = t.paid_invoice(&code, 2000);
        let asks = MIXED_REFUNDS;
        let requests = asks
            .iter()
            .map(|(method, amount)| {
                ("POST".to_owned(), format!("/v2/invoices/{number}/refund"), refund_body(method, *amount))
            })
            .collect();
        let replies = t.race(requests);
        let given: i64 = replies
            .iter()
            .filter(|r| r.status == 201)
            .map(|r| -field(&r.body, "total_in_cents").parse::<i64>().expect("total"))
            .sum();
        assert!(successes(&replies, 201) >= 1, "at least one refund is made");
        assert!(given <= 2000, "given back {given} on 2000");
        assert_eq!(t.credited(&number), given, "the refund invoices answered are the ones stored");
        assert!(t.refunded(&purchase) <= 2000);
        // The credit given plus the card refunds never exceed what was paid.
        assert!(t.credit_left(&code) + t.refunded(&purchase) <= 2000);
        for r in replies.iter().filter(|r| r.status != 201) {
            assert_eq!(r.status, 422, "{}", r.body);
        }
        t.nothing_pending();
        // What is left is refundable exactly: asking a cent more is refused and writes nothing.
        let left = 2000 - given;
        if left > 0 {
            let r = t.get(&format!("/v2/invoices/{number}"));
            assert!(r.body.contains(&format!("<refundable_total_in_cents type=\"integer\">{left}<")), "{}", r.body);
            let more = refund_body("credit_first", Some(left + 100));
            let r = t.send("POST", "2.11", &format!("/v2/invoices/{number}/refund"), &more);
            assert_eq!(r.status, 422, "{}", r.body);
            assert!(
                r.body.contains("field=\"invoice.amount_in_cents\" symbol=\"less_than_or_equal_to\""),
                "{}",
                r.body
            );
            assert_eq!(t.credited(&number), given);
        }
    }
}

#[test]
fn invoice_refunds_with_mixed_methods_never_give_back_more_than_was_paid() {
    on_three_topologies("race_mixed", mixed_invoice_refunds);
}

/// 12 refunds of one paid invoice of 2000 with mixed methods and amounts, where two racers in
/// three hang up at some point of their request: right after its head, half-way through its
/// body, right after its body, or while rebill works. A refund whose request was whole is made
/// whole or refused as any other; one cut before its body was whole does nothing.
fn refunds_with_hang_ups(t: &Topology) {
    t.credit_memos();
    let cuts = [Cut::AfterHead, Cut::MidBody, Cut::AfterBody, Cut::WhileWorking(2), Cut::WhileWorking(8)];
    for round in 0..ROUNDS {
        let code = format!("hung{round}");
        t.customer(&code);
        let (number, purchase) = t.paid_invoice(&code, 2000);
        let asks = MIXED_REFUNDS;
        let path = format!("/v2/invoices/{number}/refund");
        let requests: Vec<(String, String, String, Option<Cut>)> = asks
            .iter()
            .enumerate()
            .map(|(i, (method, amount))| {
                let cut = (i % 3 != 0).then(|| cuts[(i + round) % cuts.len()]);
                ("POST".to_owned(), path.clone(), refund_body(method, *amount), cut)
            })
            .collect();
        let replies = t.race_hanging_up(requests.clone());
        for r in replies.iter().flatten() {
            assert!(matches!(r.status, 201 | 422), "{}\n{}", r.head, r.body);
        }
        // What every request did, also those whose clients went away.
        let statuses = t.await_logged("POST", &path, RACERS);
        let unread = requests.iter().filter(|(_, _, body, cut)| cut.is_some_and(|c| !c.whole(body))).count();
        assert_eq!(
            statuses.iter().filter(|&&s| s == 400).count(),
            unread,
            "cut before the body was whole: {statuses:?}"
        );
        assert!(statuses.iter().all(|s| matches!(s, 201 | 400 | 422)), "{statuses:?}");
        let made = statuses.iter().filter(|&&s| s == 201).count();
        assert!(made >= 1, "at least one refund is made: {statuses:?}");
        assert_eq!(
            t.int(&format!(
                "SELECT COUNT(*) FROM invoices r JOIN invoices o ON o.id = r.original_invoice_id \
                 WHERE o.invoice_number = {number}"
            )),
            i64::try_from(made).expect("small"),
            "one credit invoice for each refund made, none for the others"
        );
        let given = t.credited(&number);
        assert!(given <= 2000, "given back {given} on 2000");
        assert!(t.refunded(&purchase) <= 2000);
        assert!(t.credit_left(&code) + t.refunded(&purchase) <= 2000);
        t.nothing_pending();
    }
}

#[test]
fn refunds_whose_clients_hang_up_never_give_back_more_than_was_paid() {
    on_three_topologies("race_hang_ups", refunds_with_hang_ups);
}

/// 12 refunds of the only line (quantity 1, 2000) of a paid invoice.
fn line_refunds(t: &Topology) {
    t.credit_memos();
    for round in 0..ROUNDS {
        let code = format!("line{round}");
        t.customer(&code);
        let (number, purchase) = t.paid_invoice(&code, 2000);
        let invoice = t.get(&format!("/v2/invoices/{number}"));
        let lines = &invoice.body[invoice.body.find("<line_items").expect("line items")..];
        let line = field(lines, "uuid");
        let method = if round % 2 == 0 { "all_credit" } else { "credit_first" };
        let body = format!(
            "<invoice><refund_method>{method}</refund_method><line_items><adjustment><uuid>{line}</uuid>\
             <quantity>1</quantity></adjustment></line_items></invoice>"
        );
        let requests =
            (0..RACERS).map(|_| ("POST".to_owned(), format!("/v2/invoices/{number}/refund"), body.clone())).collect();
        let replies = t.race(requests);
        assert_eq!(successes(&replies, 201), 1, "one unit is refunded once");
        assert_eq!(t.credited(&number), 2000);
        assert!(t.credit_left(&code) + t.refunded(&purchase) <= 2000);
        assert_eq!(
            t.int(&format!(
                "SELECT COUNT(*) FROM invoices r JOIN invoices o ON o.id = r.original_invoice_id \
                 WHERE o.invoice_number = {number}"
            )),
            1,
            "refused refunds leave no invoice"
        );
        t.nothing_pending();
    }
}

#[test]
fn line_item_refunds_refund_each_unit_once() {
    on_three_topologies("race_lines", line_refunds);
}

/// 6 voids and 6 refunds of 500 of one unsettled purchase of 2000.
fn voids_and_refunds(t: &Topology) {
    t.credit_memos();
    for round in 0..ROUNDS {
        let code = format!("void{round}");
        t.customer(&code);
        let (number, purchase) = t.paid_invoice(&code, 2000);
        let requests = (0..RACERS)
            .map(|i| {
                let path = if i % 2 == 0 {
                    format!("/v2/transactions/{purchase}")
                } else {
                    format!("/v2/transactions/{purchase}?amount_in_cents=500")
                };
                ("DELETE".to_owned(), path, String::new())
            })
            .collect();
        let replies = t.race(requests);
        let voided = t.int(&format!("SELECT COUNT(*) FROM transactions WHERE uuid = '{purchase}' AND status = 'void'"));
        let refunded = t.refunded(&purchase);
        assert!(voided == 0 || refunded == 0, "voided and refunded: {refunded}");
        let given = if voided == 1 { 2000 } else { refunded };
        assert!(given <= 2000);
        assert!(successes(&replies, 202) >= 1);
        for r in replies.iter().filter(|r| r.status != 202) {
            assert_eq!(r.status, 422, "{}", r.body);
        }
        // Every credit invoice of the purchase's invoice stands for money given back.
        assert_eq!(t.credited(&number), given, "refused requests leave no credit invoice");
        assert!(t.credit_left(&code) == 0, "the money went to the card");
        t.nothing_pending();
        assert_eq!(
            t.int(
                "SELECT COUNT(*) FROM jobs WHERE kind = 'refund' AND done_at IS NULL AND subject NOT IN \
                   (SELECT uuid FROM invoices) AND subject NOT LIKE '%/%'"
            ),
            0,
            "no recovery job without its refund invoice"
        );
    }
}

#[test]
fn a_purchase_is_voided_or_refunded_never_both() {
    on_three_topologies("race_voids", voids_and_refunds);
}

/// A subscription's invoice refunded as credit while its subscription is terminated with a
/// partial refund, 6 of each at once.
fn terminate_against_refunds(t: &Topology) {
    t.credit_memos();
    let plan = "<plan><plan_code>monthly</plan_code><name>Monthly</name>\
                <unit_amount_in_cents><USD>2000</USD></unit_amount_in_cents></plan>";
    ok(t.send("POST", "2.11", "/v2/plans", plan), 201);
    for round in 0..ROUNDS {
        let code = format!("term{round}");
        let body = format!(
            "<subscription><plan_code>monthly</plan_code><currency>USD</currency>\
             <account><account_code>{code}</account_code><email>{code}@example.com</email>\
             <billing_info><token_id>{}</token_id></billing_info></account></subscription>",
            t.card_token("4111111111111111")
        );
        let r = ok(t.send("POST", "2.11", "/v2/subscriptions", &body), 201);
        let uuid = field(&r.body, "uuid");
        let number = t.int(&format!(
            "SELECT MAX(i.invoice_number) FROM invoices i JOIN accounts a ON a.id = i.account_id \
             WHERE a.account_code = '{code}'"
        ));
        let requests = (0..RACERS)
            .map(|i| {
                if i % 2 == 0 {
                    ("PUT".to_owned(), format!("/v2/subscriptions/{uuid}/terminate?refund=partial"), String::new())
                } else {
                    ("POST".to_owned(), format!("/v2/invoices/{number}/refund"), refund_body("all_credit", None))
                }
            })
            .collect();
        let replies = t.race(requests);
        assert_eq!(replies.iter().filter(|r| r.status == 200).count(), 1, "terminated once");
        let given = t.credited(&number.to_string());
        assert!(given <= 2000, "given back {given} on 2000");
        t.nothing_pending();
    }
}

#[test]
fn terminate_with_refund_and_invoice_refunds_share_what_was_paid() {
    on_three_topologies("race_terminate", terminate_against_refunds);
}

/// A one-off charge paid wholly by the account's credit answers 201 with its invoice paid, and
/// 12 charges at once spend no more than the credit held.
fn charges_paid_by_credit(t: &Topology) {
    t.credit_memos();
    for round in 0..ROUNDS {
        let code = format!("credit{round}");
        t.customer(&code);
        let (number, _) = t.paid_invoice(&code, 2000);
        ok(t.send("POST", "2.11", &format!("/v2/invoices/{number}/refund"), &refund_body("all_credit", None)), 201);
        assert_eq!(t.credit_left(&code), 2000);
        let charge = format!(
            "<transaction><amount_in_cents>500</amount_in_cents><currency>USD</currency>\
             <account><account_code>{code}</account_code></account></transaction>"
        );
        let requests =
            (0..RACERS).map(|_| ("POST".to_owned(), "/v2/transactions".to_owned(), charge.clone())).collect();
        let replies = t.race(requests);
        // Four charges are paid wholly by the 2000 of credit: 204 without a transaction, as the
        // real service answered; the card pays the other eight (201 with the transaction).
        assert_eq!(successes(&replies, 204), 4, "charges paid by credit");
        assert_eq!(successes(&replies, 201), RACERS - 4, "charges paid by the card");
        for r in replies.iter().filter(|r| r.status == 204) {
            assert!(r.body.is_empty() && r.header("location").is_none(), "{}\n{}", r.head, r.body);
        }
        assert_eq!(t.credit_left(&code), 0);
        let spent = t.int(&format!(
            "SELECT CAST(COALESCE(SUM(p.amount), 0) AS BIGINT) FROM credit_payments p JOIN accounts a \
             ON a.id = p.account_id WHERE a.account_code = '{code}' AND p.action = 'payment' AND p.voided_at IS NULL"
        ));
        assert_eq!(spent, 2000, "credit spent is the credit held");
        let carded = t.int(&format!(
            "SELECT CAST(COALESCE(SUM(x.amount), 0) AS BIGINT) FROM transactions x JOIN accounts a \
             ON a.id = x.account_id WHERE a.account_code = '{code}' AND x.action = 'purchase' \
             AND x.status = 'success'"
        ));
        assert_eq!(carded, 2000 + (RACERS as i64 * 500 - 2000), "the first order plus what credit did not pay");
        assert_eq!(
            t.int(&format!(
                "SELECT COUNT(*) FROM invoices i JOIN accounts a ON a.id = i.account_id \
                 WHERE a.account_code = '{code}' AND i.kind = 'charge' AND i.state <> 'paid'"
            )),
            0
        );
        t.nothing_pending();
    }
}

#[test]
fn charges_paid_by_credit_spend_the_credit_once() {
    on_three_topologies("race_credit", charges_paid_by_credit);
}

/// An open credit invoice of 2000 (a card-paid invoice refunded all to credit): answers its
/// number.
fn open_credit(t: &Topology, code: &str) -> String {
    t.customer(code);
    let (number, _) = t.paid_invoice(code, 2000);
    let r = ok(t.send("POST", "2.11", &format!("/v2/invoices/{number}/refund"), &refund_body("all_credit", None)), 201);
    field(&r.body, "invoice_number")
}

/// Money that left a credit invoice: its refund transactions that succeeded or are under way.
fn paid_out(t: &Topology, credit: &str) -> i64 {
    t.int(&format!(
        "SELECT CAST(COALESCE(SUM(x.amount), 0) AS BIGINT) FROM transactions x JOIN invoices i \
         ON i.id = x.invoice_id WHERE i.invoice_number = {credit} AND x.action = 'refund' \
         AND x.status IN ('success', 'processing')"
    ))
}

/// The balance of the invoice `number`.
fn balance(t: &Topology, number: &str) -> i64 {
    t.int(&format!("SELECT balance FROM invoices WHERE invoice_number = {number}"))
}

/// 12 payouts of one open credit invoice of 2000 at once: the whole balance to the card, or
/// 500 outside the gateway.
fn credit_payouts(t: &Topology) {
    t.credit_memos();
    for round in 0..ROUNDS {
        let code = format!("payout{round}");
        let credit = open_credit(t, &code);
        let requests = (0..RACERS)
            .map(|i| {
                let body = if i % 3 == 0 {
                    "<invoice><refund_method>transaction_first</refund_method></invoice>".to_owned()
                } else {
                    "<invoice><external_refund>true</external_refund><amount_in_cents>500</amount_in_cents></invoice>"
                        .to_owned()
                };
                ("POST".to_owned(), format!("/v2/invoices/{credit}/refund"), body)
            })
            .collect();
        let replies = t.race(requests);
        let out = paid_out(t, &credit);
        assert!(out <= 2000, "paid out {out} of 2000");
        assert_eq!(-balance(t, &credit) + out, 2000, "what was not paid out is still credit");
        assert!(successes(&replies, 201) >= 1);
        for r in replies.iter().filter(|r| r.status != 201) {
            assert_eq!(r.status, 422, "{}", r.body);
        }
        // Each payout is one `refund` credit payment of what it paid out.
        let refunds = t.int(&format!(
            "SELECT CAST(COALESCE(SUM(p.amount), 0) AS BIGINT) FROM credit_payments p JOIN invoices i \
             ON i.id = p.original_invoice_id WHERE i.invoice_number = {credit} AND p.action = 'refund' \
             AND p.voided_at IS NULL"
        ));
        assert_eq!(refunds, out);
        t.nothing_pending();
    }
}

#[test]
fn credit_is_paid_out_once() {
    on_three_topologies("race_payouts", credit_payouts);
}

/// 6 voids of an open credit invoice of 2000 and 6 payouts of 500 outside the gateway at once.
fn credit_voids(t: &Topology) {
    t.credit_memos();
    for round in 0..ROUNDS {
        let code = format!("cvoid{round}");
        let credit = open_credit(t, &code);
        let requests = (0..RACERS)
            .map(|i| {
                if i % 2 == 0 {
                    ("PUT".to_owned(), format!("/v2/invoices/{credit}/void"), String::new())
                } else {
                    let body = "<invoice><external_refund>true</external_refund><amount_in_cents>500</amount_in_cents>\
                                </invoice>";
                    ("POST".to_owned(), format!("/v2/invoices/{credit}/refund"), body.to_owned())
                }
            })
            .collect();
        let replies = t.race(requests);
        let voids: Vec<&Reply> = replies.iter().step_by(2).collect();
        assert!(voids.iter().filter(|r| r.status == 200).count() <= 1, "voided once");
        let reduced = t.int(&format!(
            "SELECT CAST(COALESCE(SUM(p.amount), 0) AS BIGINT) FROM credit_payments p JOIN invoices i \
             ON i.id = p.original_invoice_id WHERE i.invoice_number = {credit} AND p.action = 'reduction'"
        ));
        let out = paid_out(t, &credit);
        assert_eq!(reduced + out - balance(t, &credit), 2000, "voided {reduced}, paid out {out}");
        assert_eq!(balance(t, &credit), 0, "a void takes whatever is left");
        for r in &replies {
            assert!(matches!(r.status, 200 | 201 | 422), "{}\n{}", r.head, r.body);
        }
        t.nothing_pending();
    }
}

#[test]
fn a_credit_invoice_is_voided_or_paid_out_never_beyond_its_balance() {
    on_three_topologies("race_credit_voids", credit_voids);
}

/// 12 offline payments of 500 at once on a manual invoice of 2000: exactly four are recorded.
fn offline_payments(t: &Topology) {
    for round in 0..ROUNDS {
        let code = format!("offline{round}");
        let body = format!("<account><account_code>{code}</account_code></account>");
        ok(t.send("POST", "2.11", "/v2/accounts", &body), 201);
        let body = "<adjustment><description>Consulting</description><unit_amount_in_cents>2000</unit_amount_in_cents>\
                    <currency>USD</currency></adjustment>";
        ok(t.send("POST", "2.11", &format!("/v2/accounts/{code}/adjustments"), body), 201);
        let manual = "<invoice><collection_method>manual</collection_method><net_terms>30</net_terms></invoice>";
        let r = ok(t.send("POST", "2.9", &format!("/v2/accounts/{code}/invoices"), manual), 201);
        let number = field(&r.body, "invoice_number");
        let check = "<transaction><payment_method>check</payment_method>\
                     <amount_in_cents type=\"integer\">500</amount_in_cents></transaction>";
        let requests = (0..RACERS)
            .map(|_| ("POST".to_owned(), format!("/v2/invoices/{number}/transactions"), check.to_owned()))
            .collect();
        let replies = t.race(requests);
        assert_eq!(successes(&replies, 201), 4, "2000 takes four payments of 500");
        for r in replies.iter().filter(|r| r.status != 201) {
            assert_eq!(r.status, 422, "{}", r.body);
        }
        let paid = t.int(&format!(
            "SELECT CAST(COALESCE(SUM(x.amount), 0) AS BIGINT) FROM transactions x JOIN invoices i \
             ON i.id = x.invoice_id WHERE i.invoice_number = {number} AND x.status = 'success'"
        ));
        assert_eq!(paid, 2000);
        assert_eq!(balance(t, &number), 0);
        assert_eq!(t.int(&format!("SELECT paid FROM invoices WHERE invoice_number = {number}")), 2000);
        assert_eq!(
            sql(&t.db, &format!("SELECT state FROM invoices WHERE invoice_number = {number}")),
            vec!["paid".to_owned()]
        );
    }
}

#[test]
fn offline_payments_never_pay_more_than_the_balance() {
    on_three_topologies("race_offline", offline_payments);
}

/// 12 write-offs (`mark_failed`) at once of a manual invoice paid 300 by credit: one writes it
/// off, one write-off credit invoice, the credit given back once.
fn write_offs(t: &Topology) {
    t.credit_memos();
    // The write-off is the reaction to `invoice.failed`, which every request's drain may run at
    // once: more rounds, as two reactions meet only when their drains overlap.
    for round in 0..3 * ROUNDS {
        let code = format!("woff{round}");
        let body = format!("<account><account_code>{code}</account_code></account>");
        ok(t.send("POST", "2.11", "/v2/accounts", &body), 201);
        let adjustment = |cents: i64| {
            let body = format!(
                "<adjustment><description>Goodwill</description><unit_amount_in_cents>{cents}</unit_amount_in_cents>\
                 <currency>USD</currency></adjustment>"
            );
            ok(t.send("POST", "2.11", &format!("/v2/accounts/{code}/adjustments"), &body), 201);
        };
        adjustment(-300);
        ok(t.send("POST", "2.9", &format!("/v2/accounts/{code}/invoices"), ""), 201);
        adjustment(1000);
        let manual = "<invoice><collection_method>manual</collection_method><net_terms>30</net_terms></invoice>";
        let r = ok(t.send("POST", "2.9", &format!("/v2/accounts/{code}/invoices"), manual), 201);
        let number = field(&r.body, "invoice_number");
        let requests = (0..RACERS)
            .map(|_| ("PUT".to_owned(), format!("/v2/invoices/{number}/mark_failed"), String::new()))
            .collect();
        let replies = t.race(requests);
        assert_eq!(successes(&replies, 200), 1, "written off once");
        for r in replies.iter().filter(|r| r.status != 200) {
            assert_eq!(r.status, 422, "{}", r.body);
        }
        assert_eq!(
            t.int(&format!(
                "SELECT COUNT(*) FROM invoices r JOIN invoices o ON o.id = r.original_invoice_id \
                 WHERE o.invoice_number = {number} AND r.origin = 'write_off'"
            )),
            1
        );
        // The 300 of credit that paid it is back once.
        assert_eq!(t.credit_left(&code), 300);
    }
}

#[test]
fn an_invoice_is_written_off_once() {
    on_three_topologies("race_write_offs", write_offs);
}

/// 12 redemptions at once of a coupon that allows 3, each by another account.
fn coupon_limits(t: &Topology) {
    for round in 0..ROUNDS {
        let coupon = format!("three{round}");
        let body = format!(
            "<coupon><coupon_code>{coupon}</coupon_code><name>Three</name><discount_type>percent</discount_type>\
             <discount_percent>10</discount_percent><max_redemptions>3</max_redemptions></coupon>"
        );
        ok(t.send("POST", "2.11", "/v2/coupons", &body), 201);
        let accounts: Vec<String> = (0..RACERS).map(|i| format!("cpn{round}x{i}")).collect();
        for code in &accounts {
            let body = format!("<account><account_code>{code}</account_code></account>");
            ok(t.send("POST", "2.11", "/v2/accounts", &body), 201);
        }
        let requests = accounts
            .iter()
            .map(|code| {
                let body =
                    format!("<redemption><account_code>{code}</account_code><currency>USD</currency></redemption>");
                ("POST".to_owned(), format!("/v2/coupons/{coupon}/redeem"), body)
            })
            .collect();
        let replies = t.race(requests);
        assert_eq!(successes(&replies, 201), 3, "the limit is exact");
        for r in replies.iter().filter(|r| r.status != 201) {
            assert_eq!(r.status, 422, "{}", r.body);
        }
        assert_eq!(
            t.int(&format!(
                "SELECT COUNT(*) FROM redemptions r JOIN coupons c ON c.id = r.coupon_id WHERE c.coupon_code = '{coupon}'"
            )),
            3,
            "refused redemptions leave nothing"
        );
        assert_eq!(t.int(&format!("SELECT redemptions_count FROM coupons WHERE coupon_code = '{coupon}'")), 3);
    }
}

#[test]
fn coupon_limits_are_exact() {
    on_three_topologies("race_coupons", coupon_limits);
}

/// 12 redemptions at once of one gift card of 2000, each onto another account.
fn gift_card_redemptions(t: &Topology) {
    t.first().cli(&[
        "gift-cards",
        "products",
        "add",
        "--site",
        "sandbox",
        "--product-code",
        "gift_card",
        "--currency",
        "usd",
        "2000",
    ]);
    for round in 0..ROUNDS {
        let gifter = format!("gifter{round}");
        let token = t.card_token("4111111111111111");
        let body = format!(
            "<gift_card><product_code>gift_card</product_code><unit_amount_in_cents>2000</unit_amount_in_cents>\
             <currency>USD</currency><delivery><method>email</method><email_address>friend@example.com</email_address>\
             <first_name>Fran</first_name><last_name>Friend</last_name></delivery>\
             <gifter_account><account_code>{gifter}</account_code><email>{gifter}@example.com</email>\
             <billing_info><token_id>{token}</token_id></billing_info></gifter_account></gift_card>"
        );
        let r = ok(t.send("POST", "2.11", "/v2/gift_cards", &body), 201);
        let code = field(&r.body, "redemption_code");
        let accounts: Vec<String> = (0..RACERS).map(|i| format!("gift{round}x{i}")).collect();
        for account in &accounts {
            let body = format!("<account><account_code>{account}</account_code></account>");
            ok(t.send("POST", "2.11", "/v2/accounts", &body), 201);
        }
        let requests = accounts
            .iter()
            .map(|account| {
                let body = format!("<recipient_account><account_code>{account}</account_code></recipient_account>");
                ("POST".to_owned(), format!("/v2/gift_cards/{code}/redeem"), body)
            })
            .collect();
        let replies = t.race(requests);
        let redeemed: Vec<&Reply> = replies.iter().filter(|r| r.status < 300).collect();
        assert_eq!(redeemed.len(), 1, "redeemed once");
        for r in replies.iter().filter(|r| r.status >= 300) {
            assert_error(r, 400, "bad_request");
            assert!(r.body.contains("already been redeemed"), "{}", r.body);
        }
        let credit: i64 = accounts.iter().map(|a| t.credit_left(a)).sum();
        assert_eq!(credit, 2000, "one account holds the card's credit");
    }
}

#[test]
fn a_gift_card_is_redeemed_once() {
    on_three_topologies("race_gift_cards", gift_card_redemptions);
}
