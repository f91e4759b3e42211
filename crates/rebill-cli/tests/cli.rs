//! The `rebill` binary on SQLite and on PostgreSQL (a fresh database per run; never skipped).

use std::process::{Command, Output};

use rebill_store::testing::{fresh_postgres_database, fresh_sqlite_url};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rebill");

fn rebill(db: &str, args: &[&str]) -> Output {
    Command::new(BIN).arg("--database").arg(db).args(args).output().expect("run rebill")
}

fn json(db: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = rebill(db, &all);
    assert!(out.status.success(), "rebill {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(text.lines().count(), 1, "one JSON object: {text}");
    serde_json::from_str(&text).expect("JSON")
}

fn stdout_of(db: &str, args: &[&str]) -> String {
    let out = rebill(db, args);
    assert!(out.status.success(), "rebill {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

fn failure(db: &str, args: &[&str]) -> String {
    let out = rebill(db, args);
    assert_eq!(out.status.code(), Some(1), "rebill {args:?} should fail");
    String::from_utf8(out.stderr).expect("utf-8")
}

fn scenario(db: &str) {
    let site = json(db, &["site", "create", "--name", "acme", "--contact", "tech@acme.test"]);
    assert_eq!(site["mode"], "sandbox");
    assert_eq!(site["plan"], "core");
    assert_eq!(site["key_limit"], 5);
    let first = site["private_key"].as_str().expect("private key").to_owned();
    assert_eq!(first.len(), 32);
    assert!(site["public_key"].as_str().expect("public key").starts_with("pk-"));

    let human = rebill(
        db,
        &["site", "create", "--name", "globex", "--mode", "production", "--plan", "professional", "--credit-memos"],
    );
    let text = String::from_utf8(human.stdout).expect("utf-8");
    assert!(text.contains("private key: ") && text.contains("shown only now"), "{text}");

    let ro = json(db, &["keys", "create", "--site", "acme", "--read-only"]);
    assert_eq!(ro["read_only"], true);
    let keys = json(db, &["keys", "list", "--site", "acme"]);
    let listed = keys["keys"].as_array().expect("keys");
    assert_eq!(listed.len(), 2);
    assert!(!keys.to_string().contains(&first), "listings never show keys");
    assert_eq!(listed[0]["hint"], first[28..]);

    let first_id = listed[0]["id"].as_i64().expect("id").to_string();
    let regen = json(db, &["keys", "regenerate", &first_id, "--old-key", "keep-12h", "--site", "acme"]);
    assert_eq!(regen["replaced"].as_i64().map(|i| i.to_string()), Some(first_id.clone()));
    let keys = json(db, &["keys", "list", "--site", "acme"]);
    let old = keys["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .find(|k| k["id"].as_i64().map(|i| i.to_string()) == Some(first_id.clone()))
        .cloned()
        .expect("old key");
    assert_eq!(old["active"], true, "kept for 12 hours");
    // Times for people: ISO 8601 UTC, in JSON and in text.
    let expires = old["expires_at"].as_str().expect("expires_at");
    assert!(is_iso_utc(expires), "{expires}");
    assert!(is_iso_utc(old["created_at"].as_str().expect("created_at")), "{old}");
    let listing = stdout_of(db, &["keys", "list", "--site", "acme"]);
    let line = listing.lines().find(|l| l.starts_with(&format!("{first_id} "))).expect("the old key's line");
    assert!(line.contains(&format!("expires at {expires}")), "{listing}");

    let public = json(db, &["public-key", "show", "--site", "acme"])["public_key"].clone();
    let renewed = json(db, &["public-key", "regenerate", "--site", "acme"])["public_key"].clone();
    assert_ne!(public, renewed);

    let updated = json(db, &["site", "update", "--name", "acme", "--good-standing", "false", "--mode", "production"]);
    assert_eq!(
        (updated["good_standing"].clone(), updated["mode"].clone()),
        (Value::Bool(false), Value::from("production"))
    );

    let alerts = json(db, &["alerts", "list"]);
    let kinds: Vec<&str> =
        alerts["alerts"].as_array().expect("alerts").iter().filter_map(|a| a["kind"].as_str()).collect();
    assert_eq!(kinds, ["key_created", "key_regenerated", "public_key_regenerated"]);
    assert!(alerts["alerts"][0]["recipient"] == "tech@acme.test");

    for _ in 0..3 {
        json(db, &["keys", "create", "--site", "acme"]);
    }
    let err = failure(db, &["keys", "create", "--site", "acme"]);
    assert!(err.contains("already has 5 active private keys"), "{err}");
    let err = failure(db, &["keys", "list", "--site", "nope"]);
    assert_eq!(err.trim(), "error: no site named `nope`");
    let err = failure(db, &["site", "create", "--name", "acme"]);
    assert!(err.contains("already exists"), "{err}");

    // The README's administration example, literally, on a database that already has sites:
    // key numbers are per site, so `demo`'s first key is 1.
    stdout_of(db, &["site", "create", "--name", "demo", "--contact", "tech@example.com"]);
    let created = stdout_of(db, &["keys", "create", "--site", "demo", "--read-only"]);
    assert!(created.starts_with("created key 2\n"), "{created}");
    let replaced = stdout_of(db, &["keys", "regenerate", "1", "--site", "demo", "--old-key", "keep-12h"]);
    assert!(replaced.starts_with("key 1 replaced by key 3\n"), "{replaced}");
    let listing = stdout_of(db, &["keys", "list", "--site", "demo"]);
    let numbers: Vec<&str> = listing.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(numbers, ["1", "2", "3"], "{listing}");
    let updated = stdout_of(db, &["site", "update", "--name", "demo", "--mode", "production", "--rate-limit", "2000"]);
    assert!(updated.contains(" rate_limit=2000/min "), "{updated}");
    let sites = stdout_of(db, &["site", "list"]);
    let acme = sites.lines().find(|l| l.starts_with("acme ")).expect("acme");
    assert!(acme.contains(" rate_limit=1000/min (mode default) "), "{sites}");
    let demo = sites.lines().find(|l| l.starts_with("demo ")).expect("demo");
    assert!(demo.contains(" rate_limit=2000/min "), "{sites}");
    // A key number the site does not have: the error says where to look.
    let err = failure(db, &["keys", "regenerate", "9", "--site", "demo", "--old-key", "block"]);
    assert_eq!(
        err.trim(),
        "error: site `demo` has no active private key number 9; `rebill keys list --site demo` shows its keys"
    );
    // The alert about the regeneration says until when, in ISO 8601.
    let alerts = json(db, &["alerts", "list"]);
    let body = alerts["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .filter(|a| a["kind"] == "key_regenerated")
        .filter_map(|a| a["body"].as_str())
        .find(|b| b.contains("site demo"))
        .expect("demo's regeneration alert")
        .to_owned();
    let until = body.rsplit("until ").next().expect("until").trim_end_matches('.');
    assert!(is_iso_utc(until), "{body}");
}

/// `2026-11-24T00:00:00Z`.
fn is_iso_utc(text: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(text).is_ok() && text.len() == 20 && text.ends_with('Z')
}

#[test]
fn administration_on_sqlite() {
    scenario(&fresh_sqlite_url("cli"));
}

#[tokio::test(flavor = "multi_thread")]
async fn administration_on_postgres() {
    let database = fresh_postgres_database("cli").await;
    let url = database.url().to_owned();
    tokio::task::spawn_blocking(move || scenario(&url)).await.expect("scenario");
}
