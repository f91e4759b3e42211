//! Alert e-mails end to end: alerts queued by the store on a real database (SQLite and a fresh
//! PostgreSQL database), sent by the mailer with lettre to an in-test SMTP server.

use std::collections::HashSet;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use rebill_mail::{Clock, DEFAULT_FROM, Drained, MailConfig, Mailer, drain_once, run};
use rebill_store::outbox::RETRY_BASE_SECONDS;
use rebill_store::testing::{TestDatabase, fresh_postgres_database, fresh_sqlite_url};
use rebill_store::{Alert, Mode, NewSite, Plan, Site, Store};
use rebill_testkit::sink::{Sink, closed_url};

const NOW: i64 = 1_800_000_000;

/// A store on SQLite and one on PostgreSQL; the PostgreSQL database is dropped when the loop
/// over them ends.
async fn both(tag: &str) -> Both {
    let sqlite = Store::connect(&fresh_sqlite_url(tag)).await.expect("sqlite");
    let database = fresh_postgres_database(tag).await;
    let pg = Store::connect(database.url()).await.expect("postgres");
    Both { stores: vec![sqlite, pg].into_iter(), _database: database }
}

struct Both {
    stores: std::vec::IntoIter<Store>,
    _database: TestDatabase,
}

impl Iterator for Both {
    type Item = Store;

    fn next(&mut self) -> Option<Store> {
        self.stores.next()
    }
}

async fn site(store: &Store, name: &str, contact: Option<&str>) -> Site {
    let new = NewSite {
        name: name.into(),
        mode: Mode::Sandbox,
        plan: Plan::Core,
        credit_memos: false,
        contact: contact.map(Into::into),
    };
    store.create_site(&new, NOW).await.expect("create site").0
}

/// A clock tests can move.
fn clock() -> (Arc<AtomicI64>, Clock) {
    let now = Arc::new(AtomicI64::new(NOW));
    let read = now.clone();
    (now, Arc::new(move || read.load(Ordering::SeqCst)))
}

async fn alert_of(store: &Store, site: &Site) -> Alert {
    store.alerts().await.expect("alerts").into_iter().rev().find(|a| a.site_id == site.id).expect("an alert")
}

async fn wait_for(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn alerts_reach_the_smtp_server_and_are_marked_sent() {
    for store in both("mail_sent").await {
        let sink = Sink::start().await;
        let (_, clock) = clock();
        let mailer = Mailer::new(store.clone(), &MailConfig::new(&sink.url(), None).expect("config"), clock);
        let acme = site(&store, "acme", Some("tech@acme.example")).await;
        let silent = site(&store, "silent", None).await;
        store.create_key(&acme, false, NOW).await.expect("key for acme");
        store.create_key(&silent, false, NOW).await.expect("key for silent");
        let alert = alert_of(&store, &acme).await;
        assert!(!alert.body.is_ascii(), "the key hint is introduced by an ellipsis: {}", alert.body);

        assert_eq!(mailer.deliver_due().await.expect("deliver"), Drained { sent: 1, failed: 0 });
        let received = sink.received();
        assert_eq!(received.len(), 1, "only the alert with a recipient is sent");
        let mail = &received[0];
        assert_eq!(mail.rcpt_to, ["<tech@acme.example>"]);
        assert_eq!(mail.mail_from, "<alerts@rebill.localhost>");
        assert_eq!(mail.header("From").as_deref(), Some(DEFAULT_FROM));
        assert_eq!(mail.header("To").as_deref(), Some("tech@acme.example"));
        assert_eq!(mail.header("Subject").as_deref(), Some("rebill: key_created on site acme"));
        assert_eq!(mail.header("Subject"), Some(alert.subject.clone()));
        let id = format!("<alert.{}.{}.{}@rebill.localhost>", alert.id, acme.id, alert.created_at);
        assert_eq!(mail.header("Message-ID"), Some(id));
        assert_eq!(mail.body(), alert.body);

        assert_eq!(alert_of(&store, &acme).await.sent_at, Some(NOW));
        let unaddressed = alert_of(&store, &silent).await;
        assert_eq!(unaddressed.sent_at, None);
        let delivery = store.alert_delivery(unaddressed.id).await.expect("delivery").expect("exists");
        assert_eq!(delivery.attempts, 0, "an alert without recipient is never tried");

        // Nothing more to send, however often the mailer looks.
        assert_eq!(mailer.deliver_due().await.expect("deliver"), Drained::default());
        assert_eq!(sink.received().len(), 1);
    }
}

#[tokio::test]
async fn refused_deliveries_are_recorded_and_retried_later() {
    for store in both("mail_refused").await {
        let sink = Sink::start().await;
        sink.refuse_recipients(true);
        let (now, clock) = clock();
        let mailer = Mailer::new(store.clone(), &MailConfig::new(&sink.url(), None).expect("config"), clock);
        let acme = site(&store, "acme", Some("tech@acme.example")).await;
        store.alert(&acme, "test", "first alert", NOW).await.expect("queue");
        let alert = alert_of(&store, &acme).await;

        assert_eq!(mailer.deliver_due().await.expect("deliver"), Drained { sent: 0, failed: 1 });
        let delivery = store.alert_delivery(alert.id).await.expect("delivery").expect("exists");
        assert_eq!(
            (delivery.attempts, delivery.next_attempt_at, delivery.sent_at),
            (1, NOW + RETRY_BASE_SECONDS, None)
        );
        let error = delivery.last_error.expect("the error is recorded");
        assert!(error.contains("550") || error.contains("mailbox unavailable"), "{error}");
        assert_eq!(sink.connections(), 1);

        // Not hammered: no new connection before the backoff ends.
        now.store(NOW + RETRY_BASE_SECONDS - 1, Ordering::SeqCst);
        assert_eq!(mailer.deliver_due().await.expect("deliver"), Drained::default());
        assert_eq!(sink.connections(), 1);

        // The server accepts again: the alert goes out on the next try.
        sink.refuse_recipients(false);
        now.store(NOW + RETRY_BASE_SECONDS, Ordering::SeqCst);
        assert_eq!(mailer.deliver_due().await.expect("deliver"), Drained { sent: 1, failed: 0 });
        let received = sink.received();
        assert_eq!(received.len(), 1);
        assert_eq!(received[0].body(), "first alert");
        let delivery = store.alert_delivery(alert.id).await.expect("delivery").expect("exists");
        assert_eq!(
            (delivery.attempts, delivery.sent_at, delivery.last_error),
            (2, Some(NOW + RETRY_BASE_SECONDS), None)
        );
    }
}

#[tokio::test]
async fn an_unreachable_server_loses_no_alert() {
    for store in both("mail_unreachable").await {
        let (now, clock) = clock();
        let down = MailConfig::new(&closed_url().await, None).expect("config");
        let acme = site(&store, "acme", Some("tech@acme.example")).await;
        store.alert(&acme, "test", "while the server was down", NOW).await.expect("queue");
        let alert = alert_of(&store, &acme).await;

        let mailer = Mailer::new(store.clone(), &down, clock.clone());
        assert_eq!(mailer.deliver_due().await.expect("deliver"), Drained { sent: 0, failed: 1 });
        now.store(NOW + RETRY_BASE_SECONDS, Ordering::SeqCst);
        assert_eq!(mailer.deliver_due().await.expect("deliver"), Drained { sent: 0, failed: 1 });
        let delivery = store.alert_delivery(alert.id).await.expect("delivery").expect("exists");
        assert_eq!((delivery.attempts, delivery.sent_at), (2, None));
        assert_eq!(delivery.next_attempt_at, NOW + 3 * RETRY_BASE_SECONDS, "the wait doubles");
        assert!(delivery.last_error.is_some());

        // The service comes back with a reachable server: the alert is still there and goes out.
        let sink = Sink::start().await;
        let mailer = Mailer::new(store.clone(), &MailConfig::new(&sink.url(), None).expect("config"), clock);
        now.store(delivery.next_attempt_at, Ordering::SeqCst);
        assert_eq!(mailer.deliver_due().await.expect("deliver"), Drained { sent: 1, failed: 0 });
        assert_eq!(sink.received()[0].body(), "while the server was down");
        assert_eq!(alert_of(&store, &acme).await.sent_at, Some(delivery.next_attempt_at));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_mailers_on_one_postgres_database_never_send_an_alert_twice() {
    let database = fresh_postgres_database("mail_two").await;
    let first = Store::connect(database.url()).await.expect("first process");
    let second = Store::connect(database.url()).await.expect("second process");
    let sink = Sink::start().await;
    let config = MailConfig::new(&sink.url(), None).expect("config");
    let (_, clock) = clock();
    let acme = site(&first, "acme", Some("tech@acme.example")).await;
    for i in 0..45 {
        first.alert(&acme, "test", &format!("alert {i}"), NOW).await.expect("queue");
    }

    let mailers = [Mailer::new(first.clone(), &config, clock.clone()), Mailer::new(second.clone(), &config, clock)];
    let mut total = 0;
    for _ in 0..3 {
        let (a, b) = tokio::join!(mailers[0].deliver_due(), mailers[1].deliver_due());
        let (a, b) = (a.expect("first mailer"), b.expect("second mailer"));
        assert_eq!(a.failed + b.failed, 0);
        total += a.sent + b.sent;
    }
    assert_eq!(total, 45);
    let received = sink.received();
    let ids: HashSet<_> = received.iter().map(|m| m.header("Message-ID").expect("Message-ID")).collect();
    assert_eq!((received.len(), ids.len()), (45, 45), "every alert sent exactly once");
    let bodies: HashSet<_> = received.iter().map(|m| m.body()).collect();
    assert_eq!(bodies, (0..45).map(|i| format!("alert {i}")).collect::<HashSet<_>>());
    assert!(second.alerts().await.expect("alerts").iter().all(|a| a.sent_at == Some(NOW)));
}

#[tokio::test]
async fn the_loop_drains_the_outbox_every_interval() {
    let store = Store::connect(&fresh_sqlite_url("mail_loop")).await.expect("sqlite");
    let sink = Sink::start().await;
    let config = MailConfig::new(&sink.url(), Some("Billing <billing@shop.example>")).expect("config");
    let acme = site(&store, "acme", Some("tech@acme.example")).await;
    let task = tokio::spawn(run(store.clone(), Some(config), || NOW, Duration::from_millis(20)));
    for i in 0..2 {
        store.alert(&acme, "test", &format!("looped {i}"), NOW).await.expect("queue");
        wait_for("the alert e-mail", async || sink.received().len() == i + 1).await;
    }
    // The message reaches the server before the mailer records it as sent.
    wait_for("both alerts marked sent", async || {
        store.alerts().await.expect("alerts").iter().all(|a| a.sent_at == Some(NOW))
    })
    .await;
    task.abort();
    let received = sink.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[1].body(), "looped 1");
    assert_eq!(received[1].mail_from, "<billing@shop.example>");
    assert_eq!(received[1].header("From").as_deref(), Some("Billing <billing@shop.example>"));
}

thread_local! {
    static THREAD_LOGS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Writes log lines into the buffer of the thread that logs them.
struct ThreadLogs;

impl Write for ThreadLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        THREAD_LOGS.with(|logs| logs.borrow_mut().extend_from_slice(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Log lines written by this test's thread (a current-thread runtime: the spawned loop runs on
/// it too). One global subscriber serves every test of the binary: a per-thread default
/// subscriber can miss events when tests on other threads register theirs at the same time.
struct Logs;

impl Logs {
    fn capture() -> Logs {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(|| {
            let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(|| ThreadLogs).finish();
            tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
        });
        THREAD_LOGS.with(|logs| logs.borrow_mut().clear());
        Logs
    }

    fn text(&self) -> String {
        THREAD_LOGS.with(|logs| String::from_utf8_lossy(&logs.borrow()).into_owned())
    }
}

#[tokio::test]
async fn without_smtp_alerts_stay_in_the_outbox_and_are_logged_once() {
    let logs = Logs::capture();
    for store in both("mail_none").await {
        let acme = site(&store, "acme", Some("tech@acme.example")).await;
        let silent = site(&store, "silent", None).await;
        let before = logs.text().matches("alert queued").count();
        let task = tokio::spawn(run(store.clone(), None, || NOW, Duration::from_millis(10)));
        store.alert(&acme, "key_created", "body with key hint …a1b2", NOW).await.expect("queue");
        store.alert(&silent, "rate_limit", "body of the rate alert", NOW).await.expect("queue");
        let ids: Vec<i64> = store.alerts().await.expect("alerts").iter().map(|a| a.id).collect();
        for id in ids {
            wait_for("the announcement", async || {
                store.alert_delivery(id).await.expect("delivery").expect("exists").announced_at.is_some()
            })
            .await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await; // several more ticks
        task.abort();

        let text = logs.text();
        assert_eq!(text.matches("alert queued").count() - before, 2, "each alert is logged once:\n{text}");
        assert!(text.contains("recipient=tech@acme.example"), "{text}");
        assert!(text.contains("subject=rebill: key_created on site acme"), "{text}");
        assert!(text.contains("recipient=none"), "{text}");
        assert!(text.contains("kind=rate_limit"), "{text}");
        assert!(!text.contains("body"), "alert bodies are never logged:\n{text}");
        assert!(store.alerts().await.expect("alerts").iter().all(|a| a.sent_at.is_none()));
    }
}

#[tokio::test]
async fn with_smtp_only_alerts_without_recipient_are_logged_as_queued() {
    let logs = Logs::capture();
    let store = Store::connect(&fresh_sqlite_url("mail_announce")).await.expect("sqlite");
    let sink = Sink::start().await;
    let (_, clock) = clock();
    let mailer = Mailer::new(store.clone(), &MailConfig::new(&sink.url(), None).expect("config"), clock);
    let acme = site(&store, "acme", Some("tech@acme.example")).await;
    let silent = site(&store, "silent", None).await;
    store.alert(&acme, "test", "secret-free body", NOW).await.expect("queue");
    store.alert(&silent, "test", "secret-free body", NOW).await.expect("queue");
    assert_eq!(drain_once(&store, Some(&mailer), NOW).await.expect("drain"), Drained { sent: 1, failed: 0 });
    assert_eq!(drain_once(&store, Some(&mailer), NOW).await.expect("drain"), Drained::default());
    let text = logs.text();
    assert_eq!(text.matches("alert queued without a recipient").count(), 1, "{text}");
    assert_eq!(text.matches("alert e-mail sent").count(), 1, "{text}");
    assert!(!text.contains("secret-free body"), "{text}");
}
