//! The list machinery shared by every list endpoint (spec "List behaviour").
//!
//! [`ListQuery::parse`] reads the common query parameters and the endpoint's declared filters:
//!
//! | Parameter | Rule |
//! |---|---|
//! | `per_page` | integer 1–200, default 50 |
//! | `cursor` | a cursor taken from a `Link` header (see below); empty means none |
//! | `sort` | `created_at` (default) or `updated_at` |
//! | `order` | `asc` or `desc` (default) |
//! | `begin_time`, `end_time` | a date or date-time (ISO 8601, or Ruby's `2026-11-26 20:49:03 UTC` / `+0100`; `docs/times.md`), inclusive bounds on the sort attribute |
//! | the endpoint's `filters` | kept as sent; the endpoint checks their values ([`invalid_choice`]) |
//!
//! A bad value is a 400 `invalid_parameter` naming the parameter and what it accepts; unknown
//! parameters are ignored. Pages are keyset pages on (sort attribute, id), so records inserted
//! between two page requests cause neither duplicates nor misses.
//!
//! **Cursor format.** A cursor is a decimal integer (optionally negative): the position's sort
//! value in epoch seconds times 10^19 plus the record id (ids are below 10^19). It looks like the
//! integers clients have seen as cursors and survives any URL or integer conversion, but only
//! cursors from a `Link` header are meaningful.
//!
//! [`page_response`] writes the page: the `<plural type="array">` body (none for HEAD),
//! `X-Records` (matching records: filters and time range applied, cursor not) and an RFC 5988
//! `Link` header with `rel="start"` and, when more records remain, `rel="next"`; every link
//! carries `per_page`, `sort`, `order`, the time range and the filters.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use rebill_app::platform::model::{Order, PageRequest, Position, Sort};
use rebill_xml::{Mode, WireContext, XmlResource};

use crate::respond;

/// Records per page when `per_page` is absent.
pub(crate) const DEFAULT_PER_PAGE: u32 = 50;
/// Largest `per_page`.
pub(crate) const MAX_PER_PAGE: u32 = 200;

pub(crate) static X_RECORDS: HeaderName = HeaderName::from_static("x-records");

/// The cursor's multiplier of the sort value (one more than the largest id).
const CURSOR_SCALE: i128 = 10_000_000_000_000_000_000;

/// A query parameter that cannot be used: 400 `invalid_parameter`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{description}")]
pub struct InvalidParameter {
    pub name: String,
    pub description: String,
}

impl InvalidParameter {
    pub fn response(&self) -> Response {
        respond::error(StatusCode::BAD_REQUEST, "invalid_parameter", &self.description)
    }
}

/// A value as it is echoed in a description (shortened, so that a description stays short).
fn shown(value: &str) -> String {
    let mut out: String = value.chars().take(64).collect();
    if out.len() < value.len() {
        out.push('…');
    }
    out
}

/// `name` must be one of `allowed`.
pub fn invalid_choice(name: &str, allowed: &[&str], got: &str) -> InvalidParameter {
    InvalidParameter {
        name: name.to_owned(),
        description: format!("{name} must be one of {} (got `{}`).", allowed.join(", "), shown(got)),
    }
}

/// The cursor of a position.
pub fn encode_cursor(position: Position) -> String {
    (i128::from(position.value) * CURSOR_SCALE + i128::from(position.id)).to_string()
}

/// The position of a cursor made by [`encode_cursor`].
pub fn decode_cursor(text: &str) -> Option<Position> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || digits.len() > 38 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i128 = text.parse().ok()?;
    let value = i64::try_from(n.div_euclid(CURSOR_SCALE)).ok()?;
    let id = i64::try_from(n.rem_euclid(CURSOR_SCALE)).ok()?;
    (id > 0).then_some(Position { value, id })
}

/// A time bound as sent and as epoch seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeBound {
    pub text: String,
    pub at: i64,
}

/// The list parameters of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub per_page: u32,
    pub cursor: Option<Position>,
    pub sort: Sort,
    pub order: Order,
    pub begin_time: Option<TimeBound>,
    pub end_time: Option<TimeBound>,
    /// The endpoint's declared filters that were sent, in declaration order.
    pub filters: Vec<(&'static str, String)>,
}

impl Default for ListQuery {
    fn default() -> Self {
        Self {
            per_page: DEFAULT_PER_PAGE,
            cursor: None,
            sort: Sort::default(),
            order: Order::default(),
            begin_time: None,
            end_time: None,
            filters: Vec::new(),
        }
    }
}

fn time_bound(name: &str, text: &str) -> Result<TimeBound, InvalidParameter> {
    // The grammar of request times (docs/times.md); a `+` of an offset sent unescaped arrives
    // as a space and still counts.
    let at = rebill_xml::value::parse_query_datetime(text).map(|t| t.timestamp());
    at.map(|at| TimeBound { text: text.to_owned(), at }).ok_or_else(|| InvalidParameter {
        name: name.to_owned(),
        description: format!(
            "{name} must be an ISO 8601 date or date-time such as 2024-01-31 or 2024-01-31T12:00:00Z (got `{}`).",
            shown(text)
        ),
    })
}

impl ListQuery {
    /// Reads the query string (`None`: no query) of a list endpoint with these `filters`.
    /// When a parameter is repeated, the last one counts.
    pub fn parse(query: Option<&str>, filters: &[&'static str]) -> Result<Self, InvalidParameter> {
        let mut out = ListQuery::default();
        let mut found: Vec<(&'static str, String)> = Vec::new();
        for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let value = value.as_ref();
            match name.as_ref() {
                "per_page" => {
                    out.per_page =
                        value.parse::<u32>().ok().filter(|n| (1..=MAX_PER_PAGE).contains(n)).ok_or_else(|| {
                            InvalidParameter {
                                name: "per_page".into(),
                                description: format!(
                                    "per_page must be an integer from 1 to {MAX_PER_PAGE} (got `{}`).",
                                    shown(value)
                                ),
                            }
                        })?;
                }
                "cursor" if value.is_empty() => out.cursor = None,
                "cursor" => {
                    out.cursor = Some(decode_cursor(value).ok_or_else(|| InvalidParameter {
                        name: "cursor".into(),
                        description: format!(
                            "cursor `{}` is not valid; use the cursor of a Link header's next page.",
                            shown(value)
                        ),
                    })?);
                }
                "sort" => {
                    out.sort = Sort::parse(value)
                        .ok_or_else(|| invalid_choice("sort", &["created_at", "updated_at"], value))?;
                }
                "order" => {
                    out.order = Order::parse(value).ok_or_else(|| invalid_choice("order", &["asc", "desc"], value))?
                }
                "begin_time" => out.begin_time = Some(time_bound("begin_time", value)?),
                "end_time" => out.end_time = Some(time_bound("end_time", value)?),
                other => {
                    if let Some(filter) = filters.iter().find(|f| **f == other) {
                        found.retain(|(f, _)| f != filter);
                        found.push((filter, value.to_owned()));
                    }
                }
            }
        }
        out.filters = filters.iter().filter_map(|f| found.iter().find(|(name, _)| name == f).cloned()).collect();
        Ok(out)
    }

    /// A declared filter's value, if sent.
    pub fn filter(&self, name: &str) -> Option<&str> {
        self.filters.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    /// The page the store reads.
    pub fn page(&self) -> PageRequest {
        PageRequest {
            sort: self.sort,
            order: self.order,
            after: self.cursor,
            begin: self.begin_time.as_ref().map(|t| t.at),
            end: self.end_time.as_ref().map(|t| t.at),
            limit: self.per_page,
        }
    }

    /// The query string of a link to the page after `cursor` (the first page when `None`).
    pub fn link_query(&self, cursor: Option<Position>) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        if let Some(c) = cursor {
            q.append_pair("cursor", &encode_cursor(c));
        }
        q.append_pair("per_page", &self.per_page.to_string());
        q.append_pair("sort", self.sort.as_str());
        q.append_pair("order", self.order.as_str());
        if let Some(t) = &self.begin_time {
            q.append_pair("begin_time", &t.text);
        }
        if let Some(t) = &self.end_time {
            q.append_pair("end_time", &t.text);
        }
        for (name, value) in &self.filters {
            q.append_pair(name, value);
        }
        q.finish()
    }

    /// The `Link` header of a page of the list at `base` + `path`.
    pub fn link_header(&self, base: &str, path: &str, next: Option<Position>) -> String {
        let mut links = format!("<{base}{path}?{}>; rel=\"start\"", self.link_query(None));
        if let Some(next) = next {
            links.push_str(&format!(", <{base}{path}?{}>; rel=\"next\"", self.link_query(Some(next))));
        }
        links
    }
}

/// A list body: `Vec` of its element type (what the table's list endpoints answer).
pub(crate) trait ListBody {
    type Item: XmlResource;
}

impl<T: XmlResource> ListBody for Vec<T> {
    type Item = T;
}

/// The response of a list page: 200 with the list document (no body for HEAD), `X-Records` and
/// `Link`. `root` is the document's root element when the endpoint names one (else the items'
/// plural); `path` is the list's path (its links are built on the request's base URL). Handlers
/// answer pages through `Routed::answer_page`, typed by the endpoint.
#[allow(clippy::too_many_arguments)]
pub(crate) fn page_response<T: XmlResource>(
    ctx: &WireContext,
    root: Option<&str>,
    path: &str,
    query: &ListQuery,
    items: &[T],
    next: Option<Position>,
    total: i64,
    head: bool,
) -> Response {
    let root = root.unwrap_or(T::PLURAL.unwrap_or(T::ROOT));
    let body = if head { String::new() } else { rebill_xml::list_to_xml_in(root, items, ctx, Mode::Response) };
    let mut response = respond::xml(StatusCode::OK, body);
    let headers = response.headers_mut();
    headers.insert(X_RECORDS.clone(), HeaderValue::from(total));
    match HeaderValue::from_str(&query.link_header(ctx.base_url(), path, next)) {
        Ok(v) => {
            headers.insert(header::LINK, v);
        }
        Err(e) => return respond::internal(&e),
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(q: &str) -> Result<ListQuery, InvalidParameter> {
        ListQuery::parse(Some(q), &["state", "type"])
    }

    #[test]
    fn defaults() {
        let q = ListQuery::parse(None, &["state"]).expect("no query");
        assert_eq!(q, ListQuery::default());
        assert_eq!((q.per_page, q.sort, q.order, q.cursor), (50, Sort::CreatedAt, Order::Desc, None));
        assert_eq!(parse("").expect("empty query"), ListQuery::default());
        let page = q.page();
        assert_eq!((page.limit, page.after, page.begin, page.end), (50, None, None, None));
    }

    #[test]
    fn per_page_is_1_to_200() {
        assert_eq!(parse("per_page=1").expect("1").per_page, 1);
        assert_eq!(parse("per_page=200").expect("200").per_page, 200);
        for bad in ["0", "201", "-1", "abc", "", "1.5", "99999999999999999999"] {
            let err = parse(&format!("per_page={bad}")).expect_err(bad);
            assert_eq!(err.name, "per_page");
            assert!(err.description.contains("from 1 to 200"), "{}", err.description);
        }
    }

    #[test]
    fn sort_order_and_times() {
        let q = parse("sort=updated_at&order=asc&begin_time=2024-01-31&end_time=2024-02-01T10:00:00%2B02:00")
            .expect("valid");
        assert_eq!((q.sort, q.order), (Sort::UpdatedAt, Order::Asc));
        assert_eq!(q.begin_time.as_ref().map(|t| t.at), Some(1_706_659_200));
        assert_eq!(
            q.end_time.as_ref().map(|t| (t.text.as_str(), t.at)),
            Some(("2024-02-01T10:00:00+02:00", 1_706_774_400))
        );
        // An unescaped `+` (a space once decoded) is still read as the offset.
        assert_eq!(
            parse("end_time=2024-02-01T10:00:00+02:00").expect("plus").end_time.map(|t| t.at),
            Some(1_706_774_400)
        );
        assert_eq!(parse("sort=name").expect_err("sort").name, "sort");
        assert_eq!(parse("order=up").expect_err("order").name, "order");
        let err = parse("begin_time=yesterday").expect_err("time");
        assert_eq!(err.name, "begin_time");
        assert!(err.description.contains("ISO 8601"), "{}", err.description);
        assert_eq!(parse("end_time=2024-13-01").expect_err("time").name, "end_time");
    }

    #[test]
    fn filters_are_kept_in_declaration_order_and_unknown_parameters_ignored() {
        let q = parse("type=charge&limit=5&state=active&foo=bar&state=closed").expect("valid");
        assert_eq!(q.filters, vec![("state", "closed".to_owned()), ("type", "charge".to_owned())]);
        assert_eq!((q.filter("state"), q.filter("type"), q.filter("foo")), (Some("closed"), Some("charge"), None));
        let err = invalid_choice("state", &["active", "closed"], "open");
        assert_eq!(err.description, "state must be one of active, closed (got `open`).");
    }

    #[test]
    fn cursors_round_trip_and_look_like_integers() {
        for p in [
            Position { value: 1_304_958_672, id: 42 },
            Position { value: 0, id: 1 },
            Position { value: -5, id: 7 },
            Position { value: 4_102_444_800, id: i64::MAX },
        ] {
            let c = encode_cursor(p);
            assert!(c.trim_start_matches('-').bytes().all(|b| b.is_ascii_digit()), "{c}");
            assert_eq!(decode_cursor(&c), Some(p), "{c}");
        }
        assert_eq!(encode_cursor(Position { value: 1_304_958_672, id: 42 }), "13049586720000000000000000042");
        for bad in ["", "-", "abc", "12a", "0", "+5", " 5", "1e5", &"9".repeat(39), "10000000000000000000"] {
            assert_eq!(decode_cursor(bad), None, "{bad:?}");
        }
        let err = parse("cursor=xyz").expect_err("cursor");
        assert_eq!(err.name, "cursor");
        assert_eq!(parse("cursor=").expect("empty cursor").cursor, None);
        let q = parse("cursor=13049586720000000000000000042").expect("cursor");
        assert_eq!(q.page().after, Some(Position { value: 1_304_958_672, id: 42 }));
    }

    #[test]
    fn links_carry_every_parameter() {
        let q = parse("per_page=2&sort=updated_at&begin_time=2024-01-31T00:00:00Z&state=active&foo=1").expect("valid");
        let next = Position { value: 1_706_659_200, id: 3 };
        assert_eq!(
            q.link_header("http://h:1", "/v2/accounts", Some(next)),
            "<http://h:1/v2/accounts?per_page=2&sort=updated_at&order=desc&begin_time=2024-01-31T00%3A00%3A00Z&state=active>; rel=\"start\", \
             <http://h:1/v2/accounts?cursor=17066592000000000000000000003&per_page=2&sort=updated_at&order=desc&begin_time=2024-01-31T00%3A00%3A00Z&state=active>; rel=\"next\""
        );
        let q = ListQuery::parse(Some("end_time=2024-02-01T10:00:00%2B02:00"), &[]).expect("valid");
        assert_eq!(
            q.link_query(None),
            "per_page=50&sort=created_at&order=desc&end_time=2024-02-01T10%3A00%3A00%2B02%3A00"
        );
    }
}
