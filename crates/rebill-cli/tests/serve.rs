//! `rebill serve` over HTTP: the protocol layers and the routing over the endpoint table, on
//! SQLite and on PostgreSQL, through raw HTTP/1.1 requests (so the exact bytes are visible).

use std::process::Command;

use rebill_testkit::*;

fn scenario(s: &Server) {
    // 401: no key, a wrong key, a password-only header.
    let r = request(s, "GET", "/v2/accounts", &[("Accept", "application/xml")], "");
    assert_eq!((r.status, r.body.as_str()), (401, "HTTP Basic: Access denied."));
    let wrong = format!("Basic {}", basic("0123456789abcdef0123456789abcdef"));
    let r = request(s, "GET", "/v2/accounts", &[("Accept", "application/xml"), ("Authorization", &wrong)], "");
    assert_eq!(r.status, 401);

    // 406 and 400.
    let auth = format!("Basic {}", basic(&s.key));
    let r = request(s, "GET", "/v2/accounts", &[("Authorization", &auth), ("Accept", "application/json")], "");
    assert_error(&r, 406, "not_acceptable");
    assert_error(&request(s, "GET", "/v2/accounts", &[("Authorization", &auth)], ""), 406, "not_acceptable");
    let r = authed(s, "GET", "/v2/accounts", &[("X-Api-Version", "2.12")], "");
    assert_error(&r, 400, "unsupported_api_version");
    assert!(r.body.contains("2.0, 2.2, 2.3"), "{}", r.body);

    // Routing over the endpoint table (the default version is 2.0).
    let r = authed(s, "GET", "/v2/plans", &[], "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("<plans type=\"array\">"), "{}", r.body);
    assert_eq!(r.header("x-api-version").as_deref(), Some("2.0"));
    assert_error(&authed(s, "GET", "/v2/widgets", &[], ""), 404, "not_found");
    assert_error(&authed(s, "PUT", "/v2/subscriptions/abc/pause", &[("X-Api-Version", "2.10")], ""), 404, "not_found");
    assert_error(&authed(s, "GET", "/v2/credit_payments", &[("X-Api-Version", "2.9")], ""), 404, "not_found");
    let r = authed(s, "GET", "/v2/credit_payments", &[("X-Api-Version", "2.10")], "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("<credit_payments type=\"array\">"), "{}", r.body);
    // A route of 2.10 is routed from 2.10 on, with the version echoed.
    assert_eq!(r.header("x-api-version").as_deref(), Some("2.10"));
    let r = authed(s, "DELETE", "/v2/accounts", &[], "");
    assert_error(&r, 405, "method_not_allowed");
    assert_eq!(r.header("allow").as_deref(), Some("GET, POST"));
    // Invoices cannot be edited at the versions served (the edit arrived with 2.14).
    let r = authed(s, "PUT", "/v2/invoices/1001", &xml_at("2.11"), "<invoice><po_number>7</po_number></invoice>");
    assert_error(&r, 405, "method_not_allowed");
    assert_eq!(r.header("allow").as_deref(), Some("GET"));

    // 415 for a body without the XML content type; an empty PUT needs none.
    assert_error(
        &authed(s, "POST", "/v2/accounts", &[("Content-Type", "application/json")], "{}"),
        415,
        "unsupported_media_type",
    );
    // (an unknown subscription: routed and looked up, not refused for its missing Content-Type)
    assert_error(&authed(s, "PUT", "/v2/subscriptions/abc/cancel", &[], ""), 404, "not_found");
    // No Content-Length at all: no body either.
    let no_length = format!(
        "PUT /v2/subscriptions/abc/cancel HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAuthorization: Basic {}\r\nAccept: application/xml\r\n\r\n",
        s.addr,
        basic(&s.key)
    );
    assert_error(&raw(&s.addr, &no_length), 404, "not_found");
    let xml = [("Content-Type", "application/xml; charset=utf-8")];
    let r = authed(s, "POST", "/v2/accounts", &xml, "<account/>");
    assert_eq!(r.status, 422, "an XML body is read and validated: {}", r.body);

    // 413 for a declared body over 1 MiB.
    let big = format!(
        "POST /v2/accounts HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAuthorization: Basic {}\r\nAccept: application/xml\r\nContent-Type: application/xml; charset=utf-8\r\nContent-Length: 2000000\r\n\r\n",
        s.addr,
        basic(&s.key)
    );
    assert_error(&raw(&s.addr, &big), 413, "request_too_large");

    // An absolute-form target is routed by its path.
    let absolute = format!(
        "GET http://{}/v2/plans HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAuthorization: Basic {}\r\nAccept: application/xml\r\n\r\n",
        s.addr,
        s.addr,
        basic(&s.key)
    );
    let r = raw(&s.addr, &absolute);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("<plans type=\"array\">"), "{}", r.body);

    // 403: a read-only key may read but not write.
    let out = Command::new(bin())
        .args(["--database", &s.database, "keys", "create", "--site", "sandbox", "--read-only", "--json"])
        .output()
        .expect("create read-only key");
    let created: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let ro = created["private_key"].as_str().expect("key").to_owned();
    let ro_auth = format!("Basic {}", basic(&ro));
    let r = request(s, "POST", "/v2/accounts", &[("Authorization", &ro_auth), ("Accept", "application/xml")], "");
    assert_error(&r, 403, "forbidden");
    let r = request(s, "GET", "/v2/coupons", &[("Authorization", &ro_auth), ("Accept", "application/xml")], "");
    assert_eq!(r.status, 200, "{}", r.body);

    // 402: a production site not in good standing; a sandbox site never gets it.
    let update = |args: &[&str]| {
        let out = Command::new(bin())
            .args(["--database", &s.database, "site", "update", "--name", "sandbox"])
            .args(args)
            .output()
            .expect("update");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    update(&["--good-standing", "false"]);
    assert_eq!(authed(s, "GET", "/v2/coupons", &[], "").status, 200);
    update(&["--mode", "production"]);
    assert_error(&authed(s, "GET", "/v2/coupons", &[], ""), 402, "payment_required");
    update(&["--good-standing", "true"]);
    assert_eq!(authed(s, "GET", "/v2/coupons", &[], "").status, 200);
}

#[test]
fn protocol_rules() {
    on_both_backends("serve", |db| scenario(&start(db)));
}

/// A second start on a database that has sites prints them and how to get a private key (never
/// a key: only hashes are stored).
fn second_start(db: &str) {
    let first = start(db);
    let key = first.key.clone();
    first.cli(&["site", "create", "--name", "demo"]);
    drop(first);
    let again = start_with(db, Options { existing_database: true, ..Options::default() });
    assert_eq!(again.key, "", "no key is printed again");
    let banner = again.banner.join("\n");
    assert!(!banner.contains(&key), "{banner}");
    assert_eq!(
        again.banner[..4],
        [
            "sites on this database:".to_owned(),
            "  sandbox (id 1, sandbox)".to_owned(),
            "  demo (id 2, sandbox)".to_owned(),
            "private keys are shown only when created; make a new one with `rebill keys create --site sandbox` \
             (`rebill keys list --site sandbox` lists them)"
                .to_owned(),
        ],
        "{banner}"
    );
    // Following that advice gives a working key.
    let created = again.cli_json(&["keys", "create", "--site", "sandbox"]);
    let new_key = created["private_key"].as_str().expect("key");
    assert_eq!(created["id"], 2, "the sandbox site's second key");
    assert_eq!(authed_with(&again, new_key, "GET", "/v2/accounts", &[], "").status, 200);
}

#[test]
fn a_second_start_names_the_sites_and_how_to_get_a_key() {
    on_both_backends("second_start", second_start);
}
