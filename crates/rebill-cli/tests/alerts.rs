//! Alert e-mails end to end: `rebill serve --smtp-url …` delivers a key-change alert queued by
//! the CLI to the site's technical contact; without SMTP the alert stays in the outbox.

use std::time::{Duration, Instant};

use rebill_testkit::*;

fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn key_change_alert_is_mailed_to_the_contact() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let sink = runtime.block_on(rebill_testkit::sink::Sink::start());
    let url = sink.url();
    let s = start_with(
        &rebill_store::testing::fresh_sqlite_url("alerts"),
        Options { args: &["--smtp-url", &url, "--mail-from", "rebill <ops@rebill.test>"], ..Options::default() },
    );
    s.cli(&["site", "update", "--name", "sandbox", "--contact", "tech@example.com"]);
    let keys = s.cli_json(&["keys", "list", "--site", "sandbox"]);
    let id = keys["keys"][0]["id"].as_i64().expect("id").to_string();
    s.cli(&["keys", "regenerate", &id, "--old-key", "keep-12h", "--site", "sandbox"]);
    assert!(wait_for(|| !sink.received().is_empty()), "the alert reached the SMTP server");
    let mail = sink.received().remove(0);
    assert_eq!(mail.rcpt_to, ["<tech@example.com>"]);
    assert!(mail.mail_from.contains("ops@rebill.test"), "{}", mail.mail_from);
    assert_eq!(mail.header("Subject").as_deref(), Some("rebill: key_regenerated on site sandbox"));
    // Times in the text are ISO 8601 UTC, never epoch seconds.
    let body = mail.body();
    let until = body.split("stays valid for 12 hours, until ").nth(1).expect("until when").trim();
    let until = until.trim_end_matches('.');
    assert!(chrono::DateTime::parse_from_rfc3339(until).is_ok() && until.ends_with('Z') && until.len() == 20, "{body}");
    assert!(wait_for(|| s.cli_json(&["alerts", "list"])["alerts"][0]["sent"] == true), "marked sent");
    assert_eq!(sink.received().len(), 1);
}

#[test]
fn without_smtp_alerts_stay_in_the_outbox() {
    let s = start(&rebill_store::testing::fresh_sqlite_url("outbox"));
    s.cli(&["site", "update", "--name", "sandbox", "--contact", "tech@example.com"]);
    s.cli(&["keys", "create", "--site", "sandbox"]);
    std::thread::sleep(Duration::from_secs(6));
    let alerts = s.cli_json(&["alerts", "list"]);
    assert_eq!(alerts["alerts"][0]["kind"], "key_created");
    assert_eq!(alerts["alerts"][0]["recipient"], "tech@example.com");
    assert_eq!(alerts["alerts"][0]["sent"], false);
}
