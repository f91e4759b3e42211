//! A short soak: the `soak` driver for 4 + 12 seconds against the debug `rebill` (the one the
//! end-to-end suites run, `target/debug/rebill`; built first when it is missing, but not
//! rebuilt: after changing the service, `cargo test -p rebill-load-bench` alone runs the last
//! build of it, while `cargo xtask test` builds it with the workspace).
//!
//! It must exit 0 (no 5xx, every request answered, every kind of request succeeded, renewals
//! and webhook deliveries happened), with no other unexpected status either. The clock moves a
//! day every two seconds, so the daily plan's subscriptions renew during the run. The resident
//! set may move by half here (`--tolerance 50`): a few seconds of a debug build are too short
//! for the 10 % rule of the long run, which is what judges growth.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// The debug `rebill`, built when missing.
fn rebill() -> PathBuf {
    let binary = rebill_testkit::bin();
    if !binary.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_owned());
        let status = Command::new(cargo)
            .args(["build", "--package", "rebill-cli", "--bin", "rebill"])
            .status()
            .expect("running cargo build");
        assert!(status.success(), "cargo build -p rebill-cli failed");
    }
    assert!(binary.is_file(), "{} is missing", binary.display());
    binary
}

#[test]
fn a_short_soak_passes() {
    let rebill = rebill();
    let report = std::env::temp_dir().join(format!("rebill-soak-test-{}.json", std::process::id()));
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_soak"))
        .arg("--rebill")
        .arg(&rebill)
        .args([
            "--seconds",
            "12",
            "--warm-up",
            "4",
            "--subscriptions",
            "20",
            "--rate-limit",
            "1200",
            "--connections",
            "4",
        ])
        .args(["--clock-step", "1day", "--clock-every", "2", "--tolerance", "50", "--json"])
        .arg(&report)
        .output()
        .expect("running the soak driver");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the soak failed ({:?}):\n{stdout}\n{stderr}", out.status);
    eprintln!("the short soak took {:.1} s", took.as_secs_f64());

    let text = std::fs::read_to_string(&report).expect("the JSON report");
    let _ = std::fs::remove_file(&report);
    let r: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("a number, not {v}: {text}"));
    assert_eq!(r["failures"].as_array().map(Vec::len), Some(0), "{text}");
    let kinds = r["kinds"].as_object().expect("kinds");
    for (kind, k) in kinds {
        assert_eq!(n(&k["server_errors"]), 0, "5xx of {kind}: {text}");
        assert_eq!(n(&k["no_answer"]), 0, "requests of {kind} without an answer: {text}");
        assert_eq!(n(&k["unexpected"]), 0, "unexpected statuses of {kind}: {stdout}");
        assert!(n(&k["ok"]) > 0, "no {kind} succeeded: {text}");
    }
    for kind in [
        "get_account",
        "list_accounts",
        "get_subscriptions",
        "get_invoices",
        "post_account",
        "put_account",
        "post_subscription",
        "terminate_with_refund",
        "refund_invoice",
        "token",
        "clock",
    ] {
        assert!(kinds.contains_key(kind), "{kind} missing: {text}");
    }
    // Paced at the limit: never above 1,200 a minute, and none refused. (How close to it the run
    // gets depends on how fast the debug build answers on a loaded machine: not asserted.)
    let per_minute = n(&r["run_requests"]) as f64 / r["run_seconds"].as_f64().expect("seconds") * 60.0;
    assert!(n(&r["run_requests"]) > 0 && per_minute <= 1210.0, "{per_minute} API requests a minute: {text}");
    assert_eq!(n(&kinds["api"]["too_many_requests"]), 0, "{text}");
    assert!(n(&r["renewals"]["during_run"]) > 0, "no renewal during the run: {text}");
    // A steady state: past 20 live subscriptions new-subscription slots terminate the oldest, so
    // the active ones number 20, give or take the requests in flight (4 connections) and the
    // terminations answered "try again" (the subscription stays active).
    let active = n(&r["subscriptions_by_state"]["active"]);
    let retried = n(&kinds["terminate_with_refund"]["try_again"]);
    assert!((16..=24 + retried).contains(&active), "{active} active subscriptions, not about 20: {text}");
    assert!(n(&kinds["terminate_with_refund"]["ok"]) > n(&kinds["refund_invoice"]["ok"]), "{text}");
    assert!(n(&r["webhooks"]["received"]) > 0, "no webhook arrived: {text}");
    assert!(n(&r["webhooks"]["by_kind"]["renewed_subscription_notification"]) > 0, "{text}");
    assert_eq!(r["exit"].as_str(), Some("exit status: 0"), "{text}");
}
