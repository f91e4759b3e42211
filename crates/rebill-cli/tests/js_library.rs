//! The client-side library as `rebill serve` serves it, on SQLite and on PostgreSQL:
//!
//! - over raw HTTP: `/js/v4/service.js` and `service.css` (caching, `ETag`, 304), the hosted
//!   field page with its Content-Security-Policy and its script, and the helper endpoints under
//!   `/js/v1` (`tokens`, `risk/preflights`, `risk/info`, `engage/settings`, `events`) with CORS and
//!   JSONP;
//! - in headless Chromium: `crates/rebill-server/js/test/browser/*.test.js` run by Node's test
//!   runner against the started server (a merchant page on another origin loads the library,
//!   types into the hosted fields, gets tokens and uses them in the API; `dropin.test.js` does
//!   the same with merchant pages speaking the original v4 library's page protocol, hosted
//!   fields and Elements). The browser and
//!   `playwright-core` are installed by `crates/rebill-server/js/test/setup.sh` when missing; a
//!   failure to install fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use rebill_testkit::*;
use serde_json::{Value, json};

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

fn get(s: &Server, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(s, "GET", path, headers, "")
}

fn json_of(reply: &Reply) -> Value {
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{e}: {}", reply.body))
}

#[test]
fn the_library_script_and_stylesheet_are_served_with_caching_and_etags() {
    on_both_backends("js_assets", |db| {
        let s = start(db);
        for (path, content_type, marker) in [
            ("/js/v4/service.js", "application/javascript; charset=utf-8", "window.service = service"),
            ("/js/v4/service.css", "text/css; charset=utf-8", ".service-hosted-field-focus"),
        ] {
            let reply = ok(get(&s, path, &[]), 200);
            assert_eq!(reply.header("content-type").as_deref(), Some(content_type), "{path}");
            assert_eq!(reply.header("cache-control").as_deref(), Some("public, max-age=86400"), "{path}");
            assert!(reply.body.contains(marker), "{path}");
            let etag = reply.header("etag").expect("etag");
            assert!(etag.starts_with('"') && etag.len() == 26, "{etag}");
            let again = ok(get(&s, path, &[("If-None-Match", &etag)]), 304);
            assert_eq!(again.header("etag").as_deref(), Some(etag.as_str()));
            assert!(again.body.is_empty());
            ok(get(&s, path, &[("If-None-Match", "\"other\"")]), 200);
            ok(request(&s, "POST", path, &[], ""), 405);
        }
        // The library's pure parts ride inside the one function scope of the script.
        let script = get(&s, "/js/v4/service.js", &[]).body;
        assert!(script.contains("function luhn") && script.trim_end().ends_with("})();"));
        assert_eq!(get(&s, "/js/v4/nothing.js", &[]).status, 404);
    });
}

#[test]
fn the_field_page_has_a_strict_policy_of_its_own() {
    on_both_backends("js_field_page", |db| {
        let s = start(db);
        for path in ["/js/v1/field.html", "/js/v1/field-canary.html"] {
            let reply = ok(get(&s, path, &[]), 200);
            assert_eq!(reply.header("content-type").as_deref(), Some("text/html; charset=utf-8"));
            let csp = reply.header("content-security-policy").expect("a policy");
            assert!(csp.contains("script-src 'self';"), "{csp}");
            assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"), "{csp}");
            assert!(!csp.contains("unsafe-eval") && !csp.contains("script-src 'self' 'unsafe-inline'"), "{csp}");
            assert!(csp.contains("frame-ancestors *"), "{csp}");
            assert!(reply.header("x-frame-options").is_none(), "any merchant page frames it");
            assert!(reply.body.contains("<script src=\"field.js\"></script>"));
            assert!(!reply.body.contains("<script>"), "no inline script");
            assert!(!reply.body.contains(" on"), "no inline handlers");
        }
        let script = ok(get(&s, "/js/v1/field.js", &[]), 200);
        assert_eq!(script.header("content-type").as_deref(), Some("application/javascript; charset=utf-8"));
        assert_eq!(script.header("cache-control").as_deref(), Some("public, max-age=86400"));
        assert!(!script.body.contains("eval(") && !script.body.contains("new Function"));
        let css = ok(get(&s, "/js/v1/field.css", &[]), 200);
        assert_eq!(css.header("content-type").as_deref(), Some("text/css; charset=utf-8"));
    });
}

#[test]
fn helper_endpoints_answer_json_jsonp_and_cors() {
    on_both_backends("js_helpers", |db| {
        let s = start(db);
        let origin = [("Origin", "https://shop.example")];
        let preflights = ok(get(&s, "/js/v1/risk/preflights?version=4&key=k&deviceId=d", &origin), 200);
        assert_eq!(json_of(&preflights), json!({ "preflights": [] }));
        assert_eq!(preflights.header("access-control-allow-origin").as_deref(), Some("*"));
        assert_eq!(preflights.header("content-type").as_deref(), Some("application/json; charset=utf-8"));
        assert_eq!(json_of(&ok(get(&s, "/js/v1/risk/info", &origin), 200)), json!({ "profiles": [] }));
        let engage = ok(get(&s, "/js/v1/engage/settings", &origin), 404);
        assert_eq!(json_of(&engage)["error"]["code"], "engage-not-enabled");
        let events = ok(request(&s, "POST", "/js/v1/events", &[FORM], "event=ready&key=k"), 200);
        assert_eq!(json_of(&events), json!({}));
        assert_eq!(events.header("access-control-allow-origin").as_deref(), Some("*"));
        // JSONP: always 200, the body a call of the callback.
        let jsonp = ok(get(&s, "/js/v1/engage/settings?callback=cb_1", &[]), 200);
        assert_eq!(jsonp.header("content-type").as_deref(), Some("application/javascript; charset=utf-8"));
        assert!(jsonp.body.starts_with("cb_1({\"error\":{\"code\":\"engage-not-enabled\""), "{}", jsonp.body);
        assert_eq!(get(&s, "/js/v1/risk/preflights?callback=a.b", &[]).body, "a.b({\"preflights\":[]})");
        let bad = ok(get(&s, "/js/v1/risk/info?callback=alert(1)", &[]), 400);
        assert_eq!(json_of(&bad)["error"]["fields"], json!(["callback"]));
        // Preflights and wrong methods.
        let options = ok(
            request(
                &s,
                "OPTIONS",
                "/js/v1/events",
                &[("Origin", "https://shop.example"), ("Access-Control-Request-Method", "POST")],
                "",
            ),
            204,
        );
        assert_eq!(options.header("access-control-allow-methods").as_deref(), Some("GET, POST, OPTIONS"));
        assert_eq!(options.header("access-control-allow-origin").as_deref(), Some("*"));
        let wrong = ok(request(&s, "DELETE", "/js/v1/risk/info", &[], ""), 405);
        assert_eq!(wrong.header("allow").as_deref(), Some("GET, OPTIONS"));
    });
}

#[test]
fn tokens_is_the_token_endpoint() {
    on_both_backends("js_tokens", |db| {
        let s = serve_at(db, 1_800_000_000, &[]);
        let bank = format!(
            "key={}&routing_number=123456780&account_number=111111111&account_number_confirmation=111111111\
             &account_type=checking&name_on_account=Verena+Example&country=US",
            s.public_key
        );
        let reply = ok(request(&s, "POST", "/js/v1/tokens", &[FORM], &bank), 200);
        let token = json_of(&reply);
        assert_eq!(token["type"], "bank_account");
        assert_eq!(reply.header("access-control-allow-origin").as_deref(), Some("*"));
        let mismatch = bank.replace("confirmation=111111111", "confirmation=222222222");
        let refused = ok(request(&s, "POST", "/js/v1/tokens", &[FORM], &mismatch), 422);
        assert_eq!(json_of(&refused)["error"]["code"], "validation");
        // The JSONP form of the plural route.
        let jsonp = ok(get(&s, &format!("/js/v1/tokens?{bank}&_method=post&callback=done"), &[]), 200);
        assert!(jsonp.body.starts_with("done({\"id\":\""), "{}", jsonp.body);
        // The token works in the API.
        let id = token["id"].as_str().expect("id");
        ok(
            authed(&s, "POST", "/v2/accounts", &xml_at("2.11"), "<account><account_code>js-1</account_code></account>"),
            201,
        );
        let body = format!("<billing_info><token_id>{id}</token_id></billing_info>");
        let info = ok(authed(&s, "PUT", "/v2/accounts/js-1/billing_info", &xml_at("2.11"), &body), 200);
        assert_eq!(field(&info.body, "name_on_account"), "Verena Example");
    });
}

/// `crates/rebill-server/js`.
fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../rebill-server/js")
}

/// Installs the browser and `playwright-core` when missing (fails the test when it cannot). Runs
/// once per test process, so two tests never run apt-get or npm at the same time.
fn setup_browser() {
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let installed = *DONE
        .get_or_init(|| Command::new("bash").arg(js_dir().join("test/setup.sh")).status().is_ok_and(|s| s.success()));
    assert!(installed, "crates/rebill-server/js/test/setup.sh failed: the browser tests cannot run");
}

/// Runs Node's test runner over the browser tests against `s`; panics with its output when a
/// test fails or none ran.
fn run_browser_tests(s: &Server, suite: &str, tag: &str) {
    // One browser suite at a time: several headless Chromiums on a small machine starve each
    // other, and the keyboard tests then wait on focus that arrives late.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = js_dir();
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("js-screenshots").join(tag);
    std::fs::create_dir_all(&shots).expect("screenshot directory");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("test").join(suite))
        .expect("browser tests")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".test.js"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no browser test files");
    let out = Command::new("node")
        .arg("--test")
        .arg("--test-concurrency=1")
        .arg("--test-timeout=180000")
        .args(&files)
        .env("REBILL_URL", format!("http://{}", s.addr))
        .env("REBILL_PUBLIC_KEY", &s.public_key)
        .env("REBILL_PRIVATE_KEY", &s.key)
        .env("REBILL_SCREENSHOTS", &shots)
        .output()
        .expect("run node --test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let count = |label: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# {label} ")))
            .and_then(|n| n.trim().parse::<u32>().ok())
            .unwrap_or(0)
    };
    println!("{stdout}");
    assert!(out.status.success() && count("fail") == 0, "browser tests failed:\n{stdout}\n{stderr}");
    assert!(count("pass") > 0, "no browser test ran:\n{stdout}\n{stderr}");
}

#[test]
fn hosted_fields_work_in_headless_chromium() {
    setup_browser();
    on_both_backends("js_browser", |db| {
        let s = serve_at(db, 1_800_000_000, &[]);
        let tag = if db.starts_with("postgres") { "postgres" } else { "sqlite" };
        run_browser_tests(&s, "browser", tag);
    });
}

#[test]
fn the_demo_page_is_served_only_with_demo() {
    on_both_backends("js_demo_http", |db| {
        let plain = start(db);
        // Without --demo the path is the API's, which knows no such route.
        let refused = authed(&plain, "GET", "/demo", &[], "");
        assert_error(&refused, 404, "not_found");
        drop(plain);
        let s = start_with(db, Options { existing_database: true, args: &["--demo"], ..Options::default() });
        assert!(s.banner.iter().any(|l| l.starts_with("demo checkout page at http://")), "{:?}", s.banner);
        let page = ok(get(&s, "/demo", &[]), 200);
        let csp = page.header("content-security-policy").expect("a policy");
        assert!(csp.contains("script-src 'self';") && csp.contains("frame-src 'self'"), "{csp}");
        let key = sql(db, "SELECT public_key FROM sites ORDER BY id").remove(0);
        assert!(page.body.contains(&format!("content=\"{key}\"")), "the page names the public key");
        assert!(!page.body.contains("<script>"), "no inline script");
        ok(get(&s, "/demo/demo.js", &[]), 200);
        ok(get(&s, "/demo/demo.css", &[]), 200);
        let plans = ok(get(&s, "/demo/plans", &[]), 200);
        assert!(plans.body.contains("<plans"), "{}", plans.body);
    });
}

#[test]
fn the_demo_page_subscribes_in_headless_chromium() {
    setup_browser();
    on_both_backends("js_demo", |db| {
        let s = serve_at(db, 1_800_000_000, &["--demo"]);
        let tag = if db.starts_with("postgres") { "postgres" } else { "sqlite" };
        run_browser_tests(&s, "demo", tag);
    });
}
