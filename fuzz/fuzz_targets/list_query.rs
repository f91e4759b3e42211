//! The query string of every list endpoint, read by the service's `lists::ListQuery::parse`
//! with the endpoint's declared filters (per_page, cursor, sort, order, begin_time, end_time and
//! the filters), then what the list handlers do with it: the page the store reads, the filters'
//! values (the subscription states through `StateFilter::from_name`), the `Link` header and
//! a refusal's 400 document.
//!
//! Besides "never panics": the query of a page's `Link` reads back as the same query (the
//! links carry every parameter), and a cursor the service writes reads back as its position.
//!
//! Input: byte 0 picks the list endpoint (modulo their number, in table order); the rest is the
//! query string.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rebill_billing::lifecycle::StateFilter;
use rebill_models::Endpoint;
use rebill_models::api::ENDPOINTS;
use rebill_server::lists::{self, ListQuery};

fn list_endpoints() -> &'static [&'static Endpoint] {
    static LISTS: OnceLock<Vec<&'static Endpoint>> = OnceLock::new();
    LISTS.get_or_init(|| ENDPOINTS.iter().filter(|e| e.is_list()).collect())
}

fuzz_target!(|data: &[u8]| {
    let [which, query @ ..] = data else { return };
    let Ok(query) = std::str::from_utf8(query) else { return };
    let endpoints = list_endpoints();
    let endpoint = endpoints[usize::from(*which) % endpoints.len()];
    match ListQuery::parse(Some(query), endpoint.filters) {
        Err(refused) => {
            assert_eq!(refused.response().status().as_u16(), 400, "a refused list query answers 400");
        }
        Ok(parsed) => {
            let page = parsed.page();
            assert!((1..=200).contains(&page.limit), "per_page is 1 to 200");
            for name in endpoint.filters {
                if let Some(value) = parsed.filter(name) {
                    let _ = StateFilter::from_name(value);
                    let _ = lists::invalid_choice(name, &["active", "closed"], value);
                }
            }
            // The start link, and a next link at the cursor sent (or a position after it).
            let next = parsed.cursor.map(|p| rebill_app::platform::model::Position { id: p.id, value: p.value });
            let _ = parsed.link_header(rebill_fuzz::BASE_URL, endpoint.path, next);
            for cursor in [None, next] {
                let link = parsed.link_query(cursor);
                let again = ListQuery::parse(Some(&link), endpoint.filters)
                    .unwrap_or_else(|e| panic!("the link query `{link}` is refused: {e}"));
                let expected = ListQuery { cursor, ..parsed.clone() };
                assert_eq!(again, expected, "the link query `{link}` reads back as the query");
            }
            if let Some(position) = parsed.cursor {
                let text = lists::encode_cursor(position);
                assert_eq!(lists::decode_cursor(&text), Some(position), "cursor {text}");
            }
        }
    }
});
