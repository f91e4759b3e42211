//! `rebill webhooks add/list/remove` on both backends: an endpoint's signing secret is printed
//! once and stored sealed, its HTTP password is read from a file and sealed, kinds are checked
//! against the catalogue, a site has at most ten live endpoints, and removing one makes room.

use std::process::{Command, Output};

use rebill_testkit::*;
use serde_json::Value;

fn rebill(db: &str, key_file: &str, args: &[&str]) -> Output {
    Command::new(bin())
        .args(["--database", db])
        .args(args)
        .env("REBILL_VAULT_KEY_FILE", key_file)
        .output()
        .expect("run rebill")
}

#[track_caller]
fn json(db: &str, key_file: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = rebill(db, key_file, &all);
    assert!(out.status.success(), "rebill {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("json")
}

#[track_caller]
fn refused(db: &str, key_file: &str, args: &[&str], message: &str) {
    let out = rebill(db, key_file, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "rebill {args:?} succeeded");
    assert!(stderr.contains(message), "rebill {args:?}: {stderr}");
}

fn endpoints(db: &str) {
    let key_file = vault_key_file();
    let k = key_file.as_str();
    json(db, k, &["site", "create", "--name", "acme"]);
    json(db, k, &["site", "create", "--name", "globex"]);
    let dir = std::path::Path::new(&key_file).parent().expect("key directory").to_path_buf();
    let password_file = dir.join("hook-password");
    std::fs::write(&password_file, "s3cret-pa55\n").expect("password file");
    let password = password_file.display().to_string();

    let added = json(
        db,
        k,
        &[
            "webhooks",
            "add",
            "--site",
            "acme",
            "--url",
            "https://hooks.example.com/rebill",
            "--http-user",
            "hooks",
            "--http-password-file",
            &password,
            "--kinds",
            "new_account,paid_charge_invoice_notification",
        ],
    );
    let secret = added["secret"].as_str().expect("a secret").to_owned();
    assert!(secret.starts_with("whsec_") && secret.len() > 40, "{secret}");
    assert_eq!(added["site"], "acme");
    assert_eq!(added["http_user"], "hooks");
    assert_eq!(added["kinds"], serde_json::json!(["new_account_notification", "paid_charge_invoice_notification"]));
    let id = added["id"].as_i64().expect("an id");

    // Listed without its secret or password; sealed in the database.
    let listed = json(db, k, &["webhooks", "list", "--site", "acme"]);
    assert_eq!(listed["endpoints"].as_array().map(Vec::len), Some(1));
    let text = listed.to_string();
    assert!(!text.contains(&secret) && !text.contains("s3cret"), "{text}");
    let stored = sql(db, "SELECT secret_sealed || ' ' || http_password_sealed FROM webhook_endpoints");
    assert!(!stored[0].contains(&secret[6..]) && !stored[0].contains("s3cret"), "{stored:?}");

    // Refusals: kinds, URLs, a password without a user.
    refused(
        db,
        k,
        &["webhooks", "add", "--site", "acme", "--url", "https://e.com", "--kinds", "nope"],
        "unknown notification kind `nope`",
    );
    refused(db, k, &["webhooks", "add", "--site", "acme", "--url", "e.com/hooks"], "http:// or https://");
    refused(db, k, &["webhooks", "add", "--site", "acme", "--url", "ftp://e.com/"], "http:// or https://");
    refused(db, k, &["webhooks", "add", "--site", "nowhere", "--url", "https://e.com"], "no site named `nowhere`");

    // Ten live endpoints per site; the other site counts apart; a removal makes room.
    for n in 1..10 {
        json(db, k, &["webhooks", "add", "--site", "acme", "--url", &format!("http://127.0.0.1:9/{n}")]);
    }
    refused(
        db,
        k,
        &["webhooks", "add", "--site", "acme", "--url", "http://127.0.0.1:9/x"],
        "already has 10 webhook endpoints",
    );
    json(db, k, &["webhooks", "add", "--site", "globex", "--url", "http://127.0.0.1:9/g"]);
    assert_eq!(json(db, k, &["webhooks", "list"])["endpoints"].as_array().map(Vec::len), Some(11));
    let removed = json(db, k, &["webhooks", "remove", &id.to_string()]);
    assert_eq!((removed["id"].as_i64(), removed["removed"].as_bool()), (Some(id), Some(true)));
    refused(db, k, &["webhooks", "remove", &id.to_string()], &format!("no webhook endpoint {id}"));
    json(db, k, &["webhooks", "add", "--site", "acme", "--url", "http://127.0.0.1:9/again"]);
    let text = String::from_utf8(rebill(db, k, &["webhooks", "list", "--site", "acme"]).stdout).expect("utf-8");
    assert_eq!(text.lines().count(), 10, "{text}");
    assert!(text.contains("every kind"), "{text}");
}

#[test]
fn webhook_endpoints_are_managed_from_the_cli() {
    on_both_backends("webhook_cli", endpoints);
}
