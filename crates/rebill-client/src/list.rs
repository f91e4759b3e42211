//! Lists: the common list parameters, one page with its cursor, every record as a stream
//! following `Link: <…>; rel="next"`, and counting with HEAD (`X-Records`).

use std::collections::VecDeque;
use std::marker::PhantomData;

use chrono::{DateTime, SecondsFormat, Utc};
use futures_core::Stream;
use rebill_models::endpoint::HEAD_SINCE;
use rebill_models::{ApiEndpoint, Endpoint};
use rebill_xml::{Mode, WireContext, XmlEnum, XmlResource, list_from_xml_in};
use reqwest::{Method, Url};

use crate::client::{Answer, Client};
use crate::error::Error;

/// The attribute a list is sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// `created_at` (the service's default).
    CreatedAt,
    /// `updated_at`.
    UpdatedAt,
}

/// The direction of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Oldest first.
    Asc,
    /// Newest first (the service's default).
    Desc,
}

/// A value of a list filter: a string as sent, or a model enum spelled as the client's version
/// spells it (`InvoiceState::Pending` is `open` before 2.10).
pub trait FilterValue {
    /// The query value at `ctx`.
    fn filter_value(&self, ctx: &WireContext) -> String;
}

impl FilterValue for &str {
    fn filter_value(&self, _ctx: &WireContext) -> String {
        (*self).to_owned()
    }
}

impl FilterValue for String {
    fn filter_value(&self, _ctx: &WireContext) -> String {
        self.clone()
    }
}

/// The query value of an enum at `ctx` (the generated [`FilterValue`] impls of the model enums
/// call it).
pub(crate) fn enum_value<E: XmlEnum>(value: &E, ctx: &WireContext) -> String {
    value.wire_value(ctx).to_owned()
}

/// The filters of a list endpoint that declares none.
#[derive(Debug, Clone, Copy)]
pub struct NoFilters;

/// A list request of `T` records; `F` names the endpoint's declared filters (the generated
/// filter methods, such as `.state(…)`, exist for the lists that declare them).
pub struct List<T, F = NoFilters> {
    client: Client,
    endpoint: &'static Endpoint,
    path: String,
    query: Vec<(&'static str, String)>,
    marker: PhantomData<fn() -> (T, F)>,
}

impl<T, F> Clone for List<T, F> {
    fn clone(&self) -> Self {
        List {
            client: self.client.clone(),
            endpoint: self.endpoint,
            path: self.path.clone(),
            query: self.query.clone(),
            marker: PhantomData,
        }
    }
}

impl<T, F> std::fmt::Debug for List<T, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("List").field("path", &self.path).field("query", &self.query).finish()
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The page's records.
    pub items: Vec<T>,
    /// The next page's URL (`Link: <…>; rel="next"`); `None` on the last page.
    pub next: Option<Url>,
    /// The number of matching records (`X-Records`; the cursor not applied).
    pub records: Option<u64>,
}

impl<T> Page<T> {
    /// The next page's cursor (pass it to [`List::cursor`]); `None` on the last page.
    pub fn cursor(&self) -> Option<String> {
        let next = self.next.as_ref()?;
        next.query_pairs().find(|(name, _)| name == "cursor").map(|(_, value)| value.into_owned())
    }
}

impl<T: XmlResource + Send + 'static, F> List<T, F> {
    pub(crate) fn new<E: ApiEndpoint<Response = Vec<T>>>(client: &Client, params: &[&str]) -> Self {
        List {
            client: client.clone(),
            endpoint: E::ENDPOINT,
            path: E::ENDPOINT.render(params),
            query: Vec::new(),
            marker: PhantomData,
        }
    }

    fn set(mut self, name: &'static str, value: String) -> Self {
        self.query.retain(|(n, _)| *n != name);
        self.query.push((name, value));
        self
    }

    /// A filter the endpoint declares (the generated filter methods call it).
    pub(crate) fn filter(self, name: &'static str, value: impl FilterValue) -> Self {
        debug_assert!(self.endpoint.filters.contains(&name), "{} has no filter {name}", self.endpoint.name);
        let value = value.filter_value(self.client.wire_context());
        self.set(name, value)
    }

    /// Records per page (1–200; the service's default is 50).
    pub fn per_page(self, n: u32) -> Self {
        self.set("per_page", n.to_string())
    }

    /// The attribute to sort by.
    pub fn sort(self, sort: Sort) -> Self {
        let value = match sort {
            Sort::CreatedAt => "created_at",
            Sort::UpdatedAt => "updated_at",
        };
        self.set("sort", value.to_owned())
    }

    /// The direction.
    pub fn order(self, order: Order) -> Self {
        let value = match order {
            Order::Asc => "asc",
            Order::Desc => "desc",
        };
        self.set("order", value.to_owned())
    }

    /// Only records whose sort attribute is at or after `t`.
    pub fn begin_time(self, t: DateTime<Utc>) -> Self {
        self.set("begin_time", t.to_rfc3339_opts(SecondsFormat::Secs, true))
    }

    /// Only records whose sort attribute is at or before `t`.
    pub fn end_time(self, t: DateTime<Utc>) -> Self {
        self.set("end_time", t.to_rfc3339_opts(SecondsFormat::Secs, true))
    }

    /// Start at a cursor from an earlier page ([`Page::cursor`]).
    pub fn cursor(self, cursor: impl Into<String>) -> Self {
        self.set("cursor", cursor.into())
    }

    fn first_url(&self) -> Result<Url, Error> {
        let mut url = self.client.url(&self.path)?;
        if !self.query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (name, value) in &self.query {
                pairs.append_pair(name, value);
            }
        }
        Ok(url)
    }

    /// The first page (from the cursor, if one was set).
    pub async fn page(&self) -> Result<Page<T>, Error> {
        fetch(&self.client, self.endpoint.list_root, self.first_url()?).await
    }

    /// The number of matching records: a HEAD request reading `X-Records` (API 2.6 and later;
    /// older versions answer [`Error::Unavailable`] without a request).
    pub async fn count(&self) -> Result<u64, Error> {
        let version = self.client.api_version();
        if version < HEAD_SINCE {
            return Err(Error::Unavailable { what: "counting a list with HEAD", version, since: HEAD_SINCE });
        }
        let answer = self.client.send(Method::HEAD, self.first_url()?, None).await?;
        records(&answer).ok_or_else(|| Error::Api {
            status: answer.status.as_u16(),
            symbol: String::new(),
            description: "the answer to HEAD carried no X-Records header".into(),
        })
    }

    /// Every record from the first page on, page by page (following `Link: <…>; rel="next"`,
    /// so records inserted meanwhile cause neither duplicates nor misses). An error ends the
    /// stream after it is yielded.
    pub fn stream(self) -> impl Stream<Item = Result<T, Error>> + Send + 'static {
        struct State<T> {
            client: Client,
            root: Option<&'static str>,
            next: Option<Result<Url, Error>>,
            buffer: VecDeque<T>,
        }
        let state = State {
            next: Some(self.first_url()),
            root: self.endpoint.list_root,
            client: self.client,
            buffer: VecDeque::new(),
        };
        futures_util::stream::unfold(state, |mut state| async move {
            loop {
                if let Some(item) = state.buffer.pop_front() {
                    return Some((Ok(item), state));
                }
                let page = match state.next.take()? {
                    Ok(url) => fetch::<T>(&state.client, state.root, url).await,
                    Err(e) => Err(e),
                };
                match page {
                    Ok(page) => {
                        state.buffer = page.items.into();
                        state.next = page.next.map(Ok);
                    }
                    Err(e) => return Some((Err(e), state)),
                }
            }
        })
    }
}

fn records(answer: &Answer) -> Option<u64> {
    answer.header("x-records")?.trim().parse().ok()
}

/// One page at `url`; `root` is the list document's root when the endpoint names one (else the
/// items' plural).
async fn fetch<T: XmlResource>(client: &Client, root: Option<&'static str>, url: Url) -> Result<Page<T>, Error> {
    let answer = client.send(Method::GET, url, None).await?;
    let root = root.unwrap_or(T::PLURAL.unwrap_or(T::ROOT));
    let items = list_from_xml_in(root, &answer.body, client.wire_context(), Mode::Response).map_err(Error::decode)?;
    let next = match answer.header("link").and_then(|l| link(l, "next")) {
        None => None,
        // A next page that cannot be followed is an error, not a silently shorter list.
        Some(next) => Some(Url::parse(&next).map_err(|e| Error::Api {
            status: answer.status.as_u16(),
            symbol: String::new(),
            description: format!("the next page's link {next:?} is not a URL: {e}"),
        })?),
    };
    Ok(Page { items, next, records: records(&answer) })
}

/// The URL of the `rel` link of an RFC 5988 `Link` header.
fn link(header: &str, rel: &str) -> Option<String> {
    let mut rest = header;
    while let Some(start) = rest.find('<') {
        let end = start + rest[start..].find('>')?;
        let url = &rest[start + 1..end];
        let params_end = rest[end..].find('<').map_or(rest.len(), |i| end + i);
        let params = &rest[end + 1..params_end];
        let wanted = params.split(';').any(|p| {
            let p = p.trim().trim_end_matches(',').trim();
            p.strip_prefix("rel=").is_some_and(|v| v.trim_matches('"').split_whitespace().any(|r| r == rel))
        });
        if wanted {
            return Some(url.to_owned());
        }
        rest = &rest[params_end..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_found_by_rel() {
        let header = r#"<http://h/v2/invoices?per_page=2&state=past_due,paid>; rel="start", <http://h/v2/invoices?cursor=123&per_page=2>; rel="next""#;
        assert_eq!(link(header, "next").as_deref(), Some("http://h/v2/invoices?cursor=123&per_page=2"));
        assert_eq!(link(header, "start").as_deref(), Some("http://h/v2/invoices?per_page=2&state=past_due,paid"));
        assert_eq!(link(r#"<http://h/v2/a>; rel="start""#, "next"), None);
        assert_eq!(link("garbage", "next"), None);
    }

    #[test]
    fn a_page_knows_its_cursor() {
        let page: Page<()> = Page {
            items: vec![],
            next: Url::parse("http://h/v2/accounts?cursor=-42&per_page=3").ok(),
            records: Some(7),
        };
        assert_eq!(page.cursor().as_deref(), Some("-42"));
        let last: Page<()> = Page { items: vec![], next: None, records: None };
        assert_eq!(last.cursor(), None);
    }
}
