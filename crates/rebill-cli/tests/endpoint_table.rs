//! Every endpoint of the table is built: a request to each, at every version the service
//! supports, on a site without and with Credit Memos (so the routes of that feature are routed
//! too), on SQLite and on PostgreSQL, is answered by its handler or refused by the protocol
//! rules — never 501. The path parameters name nothing that exists and the bodies are empty,
//! so each answer is a refusal (404, 400, 405, 422 …); only 501 would mean "not built".

use rebill_models::api::ENDPOINTS;
use rebill_testkit::*;

const VERSIONS: [&str; 11] = ["2.0", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11"];

fn sweep(s: &Server, credit_memos: bool) {
    let mut answered = 0;
    for endpoint in ENDPOINTS.iter() {
        let params: Vec<&str> = vec!["nobody"; endpoint.path.matches('{').count()];
        let path = endpoint.render(&params);
        for version in VERSIONS {
            let r = authed(s, endpoint.method.as_str(), &path, &xml_at(version), "");
            assert_ne!(
                r.status,
                501,
                "{} ({} {path}) at {version}, Credit Memos {credit_memos}: {}",
                endpoint.name,
                endpoint.method.as_str(),
                r.body
            );
            assert!(r.status < 500, "{} at {version}: {}\n{}", endpoint.name, r.head, r.body);
            answered += 1;
        }
    }
    assert_eq!(answered, ENDPOINTS.len() * VERSIONS.len());
}

fn every_endpoint(db: &str) {
    // A generous rate limit: the sweep sends a few thousand requests.
    let s = start_with(db, Options::default());
    s.cli(&["site", "update", "--name", "sandbox", "--rate-limit", "100000"]);
    sweep(&s, false);
    s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    sweep(&s, true);
}

#[test]
fn no_endpoint_of_the_table_answers_501() {
    on_both_backends("endpoint_table", every_endpoint);
}
