//! The transcoder behind `cargo xtask xml`, run as a process.

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_rebill-transcode");

fn example(name: &str) -> String {
    format!("{}/../../schema/examples/{name}.xml", env!("CARGO_MANIFEST_DIR"))
}

fn run_stdin(args: &[&str], input: &str) -> std::process::Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rebill-transcode");
    // The process may exit (on a bad argument) before reading its input: a broken pipe is fine.
    let _ = child.stdin.take().expect("stdin").write_all(input.as_bytes());
    child.wait_with_output().expect("wait")
}

#[test]
fn rewrites_an_invoice_for_an_older_version() {
    let out = Command::new(BIN)
        .args([
            "--resource",
            "invoice",
            "--from",
            "2.11",
            "--to",
            "2.9",
            "--features",
            "credit_memos",
            &example("invoice"),
        ])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let xml = String::from_utf8(out.stdout).expect("utf-8");
    assert!(xml.contains("<state>collected</state>"), "{xml}");
    assert!(xml.contains("<subtotal_in_cents type=\"integer\">2500</subtotal_in_cents>"), "{xml}");
    assert!(
        xml.contains("<subtotal_after_discount_in_cents type=\"integer\">2300</subtotal_after_discount_in_cents>"),
        "{xml}"
    );
    assert!(!xml.contains("balance_in_cents"), "{xml}");
}

#[test]
fn reads_stdin_when_no_file_is_given() {
    let out = run_stdin(
        &["--resource", "subscription", "--from", "2.11", "--to", "2.10"],
        "<subscription><uuid>u1</uuid><state>paused</state></subscription>",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let xml = String::from_utf8(out.stdout).expect("utf-8");
    assert!(xml.contains("<subscription href=\"https://api.rebill.test/v2/subscriptions/u1\">"), "{xml}");
    assert!(xml.contains("<state>active</state>"), "paused is shown as active before 2.11: {xml}");
}

#[test]
fn invalid_input_gives_status_1_and_one_line_with_the_path() {
    let out = run_stdin(
        &["--resource", "invoice", "--from", "2.11", "--to", "2.9"],
        "<invoice><line_items type=\"array\"><adjustment><quantity type=\"integer\">abc</quantity></adjustment></line_items></invoice>",
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(
        err.trim_end(),
        "error: invalid invoice document: `abc` is not an integer at `invoice.line_items[0].quantity`"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn unknown_resource_and_version_are_errors() {
    let out = run_stdin(&["--resource", "widget", "--from", "2.11", "--to", "2.9"], "<widget/>");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown resource `widget`; known resources: account"));
    let out = run_stdin(&["--resource", "invoice", "--from", "2.12", "--to", "2.9"], "<invoice/>");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported API version `2.12`"));
}
