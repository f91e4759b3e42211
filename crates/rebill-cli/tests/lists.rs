//! The list machinery over HTTP, on `GET /v2/accounts`, on SQLite and on PostgreSQL: parameters
//! and their 400s, keyset pages followed through `Link` headers, `X-Records`, HEAD, and the
//! spec's list rules 1–5.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

fn start_at(db: &str, now: i64) -> Server {
    start_with(db, Options { clock: Some(now), ..Options::default() })
}

fn create(s: &Server, code: &str) {
    let body = format!("<account><account_code>{code}</account_code></account>");
    let r = authed(s, "POST", "/v2/accounts", &xml_at("2.11"), &body);
    assert_eq!(r.status, 201, "{}", r.body);
}

/// Creates `code` with the clock at `at`.
fn create_at(s: &Server, code: &str, at: i64) {
    s.set_clock(at);
    create(s, code);
}

fn touch(s: &Server, code: &str, at: i64) {
    s.set_clock(at);
    let r = authed(
        s,
        "PUT",
        &format!("/v2/accounts/{code}"),
        &xml_at("2.11"),
        "<account><company_name>touched</company_name></account>",
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

fn list(s: &Server, path_and_query: &str) -> Reply {
    authed(s, "GET", path_and_query, &[("X-Api-Version", "2.11")], "")
}

/// The account codes of a list body, in order.
fn codes(body: &str) -> Vec<String> {
    body.split("<account_code>").skip(1).map(|p| p.split('<').next().unwrap_or_default().to_owned()).collect()
}

/// The links of a `Link` header by relation.
fn links(reply: &Reply) -> Vec<(String, String)> {
    let header = reply.header("link").unwrap_or_else(|| panic!("a Link header in\n{}", reply.head));
    header
        .split(", <")
        .map(|part| {
            let part = part.trim_start_matches('<');
            let (url, rel) = part.split_once(">; rel=").expect("url and rel");
            (rel.trim_matches('"').to_owned(), url.to_owned())
        })
        .collect()
}

fn link(reply: &Reply, rel: &str) -> Option<String> {
    links(reply).into_iter().find(|(r, _)| r == rel).map(|(_, url)| url)
}

/// The path and query of a link (the requests go to the same server).
fn target(url: &str, s: &Server) -> String {
    url.strip_prefix(&format!("http://{}", s.addr)).expect("a link on the server's host").to_owned()
}

/// Follows `rel="next"` from `first` to the end; the codes of every page.
fn walk(s: &Server, first: &str) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut next = Some(first.to_owned());
    while let Some(path) = next {
        let r = list(s, &path);
        assert_eq!(r.status, 200, "{}", r.body);
        pages.push(codes(&r.body));
        next = link(&r, "next").map(|u| target(&u, s));
        assert!(pages.len() < 50, "paging does not end");
    }
    pages
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn parameters(s: &Server) {
    // The empty list: its wrapper, no records, a start link only.
    let r = list(s, "/v2/accounts");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type").as_deref(), Some("application/xml; charset=utf-8"));
    assert_eq!(r.body, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<accounts type=\"array\">\n</accounts>\n");
    assert_eq!(r.header("x-records").as_deref(), Some("0"));
    assert_eq!(
        r.header("link"),
        Some(format!("<http://{}/v2/accounts?per_page=50&sort=created_at&order=desc>; rel=\"start\"", s.addr))
    );
    assert!(r.has_exact_header("X-Records") && r.has_exact_header("Link"), "{}", r.head);

    // Bad values: 400 invalid_parameter naming the parameter and what it accepts.
    let cases = [
        ("per_page=0", "per_page must be an integer from 1 to 200 (got `0`)."),
        ("per_page=201", "per_page must be an integer from 1 to 200 (got `201`)."),
        ("per_page=-5", "per_page must be an integer from 1 to 200 (got `-5`)."),
        ("per_page=ten", "per_page must be an integer from 1 to 200 (got `ten`)."),
        ("cursor=abc", "cursor `abc` is not valid; use the cursor of a Link header's next page."),
        ("cursor=-", "cursor `-` is not valid; use the cursor of a Link header's next page."),
        ("sort=name", "sort must be one of created_at, updated_at (got `name`)."),
        ("order=up", "order must be one of asc, desc (got `up`)."),
        ("state=open", "state must be one of active, closed (got `open`)."),
    ];
    for (query, description) in cases {
        let r = list(s, &format!("/v2/accounts?{query}"));
        assert_error(&r, 400, "invalid_parameter");
        assert!(
            r.body.contains(&format!("<description lang=\"en-US\">{description}</description>")),
            "{query}: {}",
            r.body
        );
    }
    for query in ["begin_time=yesterday", "end_time=2024-13-01", "begin_time=2024-01-01T25:00:00Z"] {
        let r = list(s, &format!("/v2/accounts?{query}"));
        assert_error(&r, 400, "invalid_parameter");
        let name = query.split('=').next().unwrap_or_default();
        assert!(
            r.body.contains(&format!("<description lang=\"en-US\">{name} must be an ISO 8601 date or date-time")),
            "{}",
            r.body
        );
    }
    // Unknown parameters are ignored.
    let r = list(s, "/v2/accounts?limit=5&foo=bar");
    assert_eq!((r.status, r.header("x-records").as_deref()), (200, Some("0")));
}

/// Rule 1 and the parameters carried by the links: pages of 2 over 5 accounts.
fn paging(s: &Server) {
    for (i, code) in ["a1", "a2", "a3", "a4", "a5"].iter().enumerate() {
        create_at(s, code, T0 + 60 * i as i64);
    }
    // Default: created_at descending.
    let r = list(s, "/v2/accounts?per_page=2");
    assert_eq!(r.status, 200);
    assert_eq!(codes(&r.body), strings(&["a5", "a4"]));
    assert_eq!(r.header("x-records").as_deref(), Some("5"));
    let base = format!("http://{}/v2/accounts", s.addr);
    let next = link(&r, "next").expect("a next link");
    assert_eq!(links(&r)[0], ("start".to_owned(), format!("{base}?per_page=2&sort=created_at&order=desc")));
    // The cursor is an integer: the sort value (epoch seconds) times 10^19 plus the record id.
    let cursor = next.split("cursor=").nth(1).and_then(|c| c.split('&').next()).expect("cursor").to_owned();
    assert!(cursor.bytes().all(|b| b.is_ascii_digit()), "{cursor}");
    assert!(cursor.starts_with(&(T0 + 180).to_string()), "{cursor}");
    assert_eq!(next, format!("{base}?cursor={cursor}&per_page=2&sort=created_at&order=desc"));
    assert_eq!(
        walk(s, "/v2/accounts?per_page=2"),
        vec![strings(&["a5", "a4"]), strings(&["a3", "a2"]), strings(&["a1"])]
    );
    // An empty cursor is the first page.
    assert_eq!(codes(&list(s, "/v2/accounts?per_page=2&cursor=").body), strings(&["a5", "a4"]));
    // A page holding the last record has no next link, only its start link.
    let r = list(s, "/v2/accounts?per_page=5");
    assert_eq!((codes(&r.body).len(), links(&r).len(), r.header("x-records")), (5, 1, Some("5".to_owned())));

    // Ascending, with a time range and a filter: every link carries them all.
    touch(s, "a2", T0 + 1000);
    let r = authed(s, "DELETE", "/v2/accounts/a4", &[], "");
    assert_eq!(r.status, 204);
    let q = "/v2/accounts?per_page=1&order=asc&state=active&begin_time=2027-01-15T08:01:00Z&end_time=2027-01-15T08:04:00%2B00:00";
    let r = list(s, q);
    // a2, a3 and a5 (a4 is closed, a1 too early; a2's update does not matter: sorted by created_at).
    assert_eq!(r.header("x-records").as_deref(), Some("3"));
    let carried = "per_page=1&sort=created_at&order=asc&begin_time=2027-01-15T08%3A01%3A00Z&end_time=2027-01-15T08%3A04%3A00%2B00%3A00&state=active";
    assert_eq!(link(&r, "start"), Some(format!("{base}?{carried}")));
    assert!(link(&r, "next").is_some_and(|n| n.ends_with(&format!("&{carried}"))), "{:?}", links(&r));
    assert_eq!(walk(s, q), vec![strings(&["a2"]), strings(&["a3"]), strings(&["a5"])]);
    let r = list(s, "/v2/accounts?state=closed");
    assert_eq!((codes(&r.body), r.header("x-records")), (strings(&["a4"]), Some("1".to_owned())));
    // Bounds are inclusive; a date means its midnight (UTC).
    let r = list(s, "/v2/accounts?begin_time=2027-01-15T08:01:00Z&end_time=2027-01-15T08:01:00Z");
    assert_eq!(codes(&r.body), strings(&["a2"]));
    let r = list(s, "/v2/accounts?begin_time=2027-01-16");
    assert_eq!(r.header("x-records").as_deref(), Some("0"));
    let r = list(s, "/v2/accounts?end_time=2027-01-16&sort=updated_at&order=asc");
    assert_eq!(codes(&r.body), strings(&["a1", "a3", "a5", "a2", "a4"]));
}

/// Rule 2: records created between page requests cause neither duplicates nor misses, in both
/// directions; records of one second are ordered by id.
fn inserts_between_pages(s: &Server) {
    for i in 1..=6 {
        // Two accounts per second.
        create_at(s, &format!("b{i}"), T0 + (i - 1) / 2);
    }
    // Pages of 3 with two new accounts created after the first page: one in the second of the
    // cursor's record, one later.
    let paged = |order: &str| {
        let first = list(s, &format!("/v2/accounts?per_page=3&order={order}"));
        create_at(s, &format!("{order}-late-1"), T0 + 1);
        create_at(s, &format!("{order}-late-2"), T0 + 10);
        let mut seen = vec![codes(&first.body)];
        seen.extend(walk(s, &target(&link(&first, "next").expect("next"), s)));
        seen.concat()
    };
    // Descending: the new accounts sort ahead of the cursor and are not on later pages.
    assert_eq!(paged("desc"), strings(&["b6", "b5", "b4", "b3", "b2", "b1"]));
    // Ascending: they sort after it and come in their place; the descending pass's accounts too.
    assert_eq!(
        paged("asc"),
        strings(&["b1", "b2", "b3", "b4", "desc-late-1", "asc-late-1", "b5", "b6", "desc-late-2", "asc-late-2"])
    );
}

/// Rule 3: sorted by updated_at with an end_time, a record updated after it is not returned.
/// Rule 4: paging by updated_at ascending, a record modified mid-paging moves to the end and is
/// seen again; descending, it moves to the front and is missed.
fn updated_at_rules(s: &Server) {
    for (i, code) in ["c1", "c2", "c3", "c4"].iter().enumerate() {
        create_at(s, code, T0 + 10 * i as i64);
    }
    let end = "2027-01-15T08:00:30Z"; // T0 + 30: every creation
    let q = format!("/v2/accounts?sort=updated_at&end_time={end}");
    assert_eq!(codes(&list(s, &q).body), strings(&["c4", "c3", "c2", "c1"]));
    touch(s, "c2", T0 + 40);
    let r = list(s, &q);
    assert_eq!(codes(&r.body), strings(&["c4", "c3", "c1"]));
    assert_eq!(r.header("x-records").as_deref(), Some("3"));
    // Sorted by created_at the same end_time still returns it.
    assert_eq!(codes(&list(s, &format!("/v2/accounts?end_time={end}")).body), strings(&["c4", "c3", "c2", "c1"]));

    // Ascending by updated_at (c1 0, c3 20, c4 30, c2 40): c1 is modified after the first page.
    let first = list(s, "/v2/accounts?sort=updated_at&order=asc&per_page=2");
    assert_eq!(codes(&first.body), strings(&["c1", "c3"]));
    touch(s, "c1", T0 + 50);
    let rest = walk(s, &target(&link(&first, "next").expect("next"), s));
    assert_eq!(rest, vec![strings(&["c4", "c2"]), strings(&["c1"])]);
    // Using the start of paging as end_time keeps the modified record from being seen twice.
    let start_of_paging = "2027-01-15T08:00:45Z";
    let first = list(s, &format!("/v2/accounts?sort=updated_at&order=asc&per_page=2&end_time={start_of_paging}"));
    assert_eq!(codes(&first.body), strings(&["c3", "c4"]));
    touch(s, "c3", T0 + 60);
    let rest = walk(s, &target(&link(&first, "next").expect("next"), s));
    assert_eq!(rest, vec![strings(&["c2"])]);

    // Descending (c3 60, c1 50, c2 40, c4 30): c4, not yet seen, is modified and missed.
    let first = list(s, "/v2/accounts?sort=updated_at&order=desc&per_page=2");
    assert_eq!(codes(&first.body), strings(&["c3", "c1"]));
    touch(s, "c4", T0 + 70);
    let rest = walk(s, &target(&link(&first, "next").expect("next"), s));
    assert_eq!(rest, vec![strings(&["c2"])]);
}

/// Rule 5: HEAD from 2.6 counts without a body; filters and the time range narrow the count.
fn head(s: &Server) {
    for (i, code) in ["h1", "h2", "h3"].iter().enumerate() {
        create_at(s, code, T0 + 100 * i as i64);
    }
    let r = authed(s, "DELETE", "/v2/accounts/h2", &[], "");
    assert_eq!(r.status, 204);
    let head = |path: &str, version: &str| authed(s, "HEAD", path, &[("X-Api-Version", version)], "");
    let r = head("/v2/accounts", "2.6");
    assert_eq!((r.status, r.body.as_str()), (200, ""));
    assert_eq!(r.header("x-records").as_deref(), Some("3"));
    assert_eq!(r.header("content-type").as_deref(), Some("application/xml; charset=utf-8"));
    assert_eq!(
        r.header("link"),
        Some(format!("<http://{}/v2/accounts?per_page=50&sort=created_at&order=desc>; rel=\"start\"", s.addr))
    );
    assert_eq!(head("/v2/accounts?state=active", "2.11").header("x-records").as_deref(), Some("2"));
    assert_eq!(head("/v2/accounts?state=closed", "2.11").header("x-records").as_deref(), Some("1"));
    let r = head("/v2/accounts?state=active&begin_time=2027-01-15T08:01:40Z", "2.11");
    assert_eq!(r.header("x-records").as_deref(), Some("1"));
    // The count ignores the cursor; per_page only changes the links.
    let r = head("/v2/accounts?per_page=1", "2.11");
    assert_eq!(r.header("x-records").as_deref(), Some("3"));
    let next = link(&r, "next").expect("HEAD carries the next link");
    let r = head(&target(&next, s), "2.11");
    assert_eq!((r.status, r.header("x-records").as_deref(), r.body.as_str()), (200, Some("3"), ""));
    // HEAD checks the parameters like GET.
    let r = head("/v2/accounts?state=bogus", "2.11");
    assert_eq!(r.status, 400);
    // GET carries the count too.
    assert_eq!(list(s, "/v2/accounts?state=active").header("x-records").as_deref(), Some("2"));
    // Before 2.6 HEAD on a list is not a method of the API.
    let r = head("/v2/accounts", "2.5");
    assert_eq!((r.status, r.header("allow").as_deref()), (405, Some("GET")));
}

#[test]
fn list_parameters_and_their_errors() {
    on_both_backends("lists_params", |db| parameters(&start_at(db, T0)));
}

#[test]
fn pages_follow_links_with_every_parameter() {
    on_both_backends("lists_paging", |db| paging(&start_at(db, T0)));
}

#[test]
fn records_inserted_between_pages_are_neither_repeated_nor_missed() {
    on_both_backends("lists_inserts", |db| inserts_between_pages(&start_at(db, T0)));
}

#[test]
fn updated_at_paging_follows_rules_3_and_4() {
    on_both_backends("lists_updated", |db| updated_at_rules(&start_at(db, T0)));
}

#[test]
fn head_counts_matching_records() {
    on_both_backends("lists_head", |db| head(&start_at(db, T0)));
}
