//! The endpoint table's types. The table itself (`api::ENDPOINTS`, `api::EndpointId` and one
//! marker type per endpoint implementing [`ApiEndpoint`]) is generated from
//! `schema/endpoints.toml`; the service routes with it and the client calls with it.

use rebill_xml::{ApiVersion, WireContext};

/// HTTP method of an endpoint (HEAD is implied on list endpoints from [`HEAD_SINCE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Post,
    Put,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }
}

/// HEAD on a list endpoint (count in `X-Records`) exists from this version (spec: Versioning 4).
pub const HEAD_SINCE: ApiVersion = ApiVersion::new(2, 6);

/// What an endpoint answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body (204, or 202 with only a `Location`).
    Empty,
    /// One document of the named resource.
    Resource(&'static str),
    /// A list document of the named resource (with the common list parameters).
    List(&'static str),
}

/// The answer to a request for an endpoint at a version older than its `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BelowSince {
    /// 404 `not_found`, as for a path that does not exist.
    NotFound,
    /// 400 `unavailable_in_api_version` (the account balance before 2.3).
    Unavailable,
}

/// One endpoint of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub name: &'static str,
    pub method: Method,
    /// Template with `{param}` segments, e.g. `/v2/accounts/{account_code}`.
    pub path: &'static str,
    pub since: Option<ApiVersion>,
    /// What a version older than `since` is answered.
    pub below_since: BelowSince,
    pub feature: Option<&'static str>,
    /// Resource of the request body.
    pub request: Option<&'static str>,
    pub response: Body,
    /// The response resource from a later version on (`invoice` → `invoice_collection` at 2.10).
    pub later: &'static [(ApiVersion, &'static str)],
    /// Success status.
    pub status: u16,
    /// The root element of a list document when it is not the item resource's plural
    /// (`unique_coupon_codes`, a list of `coupon`).
    pub list_root: Option<&'static str>,
    /// List filters beyond the common list parameters.
    pub filters: &'static [&'static str],
    /// Other query parameters the endpoint reads.
    pub query: &'static [&'static str],
    pub doc: &'static str,
}

impl Endpoint {
    /// Whether the endpoint exists for this version and site.
    pub fn available(&self, ctx: &WireContext) -> bool {
        ctx.has(self.since, None, self.feature)
    }

    /// Whether a request at `ctx` is refused as `unavailable_in_api_version`: the site has the
    /// endpoint's feature, the version is older than `since`, and the table says so.
    pub fn unavailable_in(&self, ctx: &WireContext) -> bool {
        self.below_since == BelowSince::Unavailable
            && self.since.is_some_and(|since| ctx.version < since)
            && ctx.has(None, None, self.feature)
    }

    /// The response body at `version`.
    pub fn response_at(&self, version: ApiVersion) -> Body {
        match self.later.iter().rev().find(|(since, _)| version >= *since) {
            Some((_, resource)) => Body::Resource(resource),
            None => self.response,
        }
    }

    pub fn is_list(&self) -> bool {
        matches!(self.response, Body::List(_))
    }

    /// The raw (still percent-encoded) parameter values when `path` fits the template.
    pub fn match_path<'p>(&self, path: &'p str) -> Option<Vec<&'p str>> {
        let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
        // Templates of another length are passed over before a parameter is collected.
        if segments(self.path) != segments(path) {
            return None;
        }
        let mut params = Vec::new();
        let mut template = self.path.split('/');
        let mut actual = path.split('/');
        loop {
            match (template.next(), actual.next()) {
                (None, None) => return Some(params),
                (Some(t), Some(a)) if t.starts_with('{') => {
                    if a.is_empty() {
                        return None;
                    }
                    params.push(a);
                }
                (Some(t), Some(a)) if t == a => {}
                _ => return None,
            }
        }
    }

    /// The path with `params` filled in (each percent-encoded as one segment).
    ///
    /// # Panics
    /// If the number of parameters does not match the template (a programming error).
    pub fn render(&self, params: &[&str]) -> String {
        // Room for the template and the values unescaped: one allocation for most paths.
        let mut out = String::with_capacity(self.path.len() + params.iter().map(|p| p.len()).sum::<usize>());
        let mut values = params.iter();
        // The text between the parameters as it stands; each `{name}` (a whole segment, as the
        // schema's loader requires) replaced by its value.
        let mut rest = self.path;
        while let Some(start) = rest.find('{') {
            out.push_str(&rest[..start]);
            let value = values.next().expect("a value for every path parameter");
            rebill_xml::value::push_path_segment(&mut out, value);
            rest = rest[start..].find('/').map_or("", |end| &rest[start + end..]);
        }
        out.push_str(rest);
        assert!(values.next().is_none(), "more parameters than the path of {} has", self.name);
        out
    }
}

/// A typed endpoint: the generated marker types in [`crate::api`] implement it.
pub trait ApiEndpoint {
    const ENDPOINT: &'static Endpoint;
    /// The request body (`()` when there is none).
    type Request;
    /// The response body (`()`, a resource, or `Vec` of a resource for lists).
    type Response;
}

/// An endpoint whose response resource changes at a version (its `ENDPOINT.later`, e.g. `invoice`
/// → `invoice_collection` at 2.10): generated for those endpoints only, so only they can answer
/// the later resource.
pub trait LaterResponse: ApiEndpoint {
    /// The response body from the version of the change on (below it, [`ApiEndpoint::Response`]).
    type Later;

    /// Whether the response at `version` is [`Self::Later`].
    fn later_at(version: ApiVersion) -> bool {
        Self::ENDPOINT.response_at(version) != Self::ENDPOINT.response
    }
}

/// How many `/`-separated segments `path` has.
fn segments(path: &str) -> usize {
    path.bytes().filter(|b| *b == b'/').count()
}

/// The endpoint for a method and path, with its raw path parameters. Literal segments win over
/// parameters (`/v2/subscriptions/preview` before `/v2/subscriptions/{uuid}`).
pub fn route<'p>(
    endpoints: &'static [Endpoint],
    method: Method,
    path: &'p str,
) -> Option<(&'static Endpoint, Vec<&'p str>)> {
    endpoints
        .iter()
        .filter(|e| e.method == method)
        .filter_map(|e| e.match_path(path).map(|params| (e, params)))
        .min_by_key(|(e, params)| (params.len(), e.path.len()))
}

/// The methods of the endpoints at `path` that exist in `ctx` (for a 405 `Allow` header).
pub fn allowed_methods(endpoints: &'static [Endpoint], path: &str, ctx: &WireContext) -> Vec<Method> {
    let mut methods: Vec<Method> = Vec::new();
    for e in endpoints.iter().filter(|e| e.available(ctx) && e.match_path(path).is_some()) {
        if !methods.contains(&e.method) {
            methods.push(e.method);
        }
    }
    methods
}

#[cfg(test)]
mod tests {
    use crate::api::ENDPOINTS;

    fn endpoint(name: &str) -> &'static super::Endpoint {
        ENDPOINTS.iter().find(|e| e.name == name).expect("an endpoint of the schema")
    }

    /// Each parameter fills its segment, percent-encoded; the text around them stays as it is.
    #[test]
    fn render_fills_each_parameter_segment() {
        assert_eq!(endpoint("list_accounts").render(&[]), "/v2/accounts");
        assert_eq!(
            endpoint("get_shipping_address").render(&["a b/c", "42"]),
            "/v2/accounts/a%20b%2Fc/shipping_addresses/42"
        );
        assert_eq!(endpoint("get_account").render(&["ü"]), "/v2/accounts/%C3%BC");
        // Every endpoint of the schema, with values that need no encoding: the template with
        // each `{name}` replaced.
        for e in ENDPOINTS.iter() {
            let names: Vec<&str> = e.path.split('/').filter(|s| s.starts_with('{')).collect();
            let values: Vec<String> = (0..names.len()).map(|i| format!("v{i}")).collect();
            let refs: Vec<&str> = values.iter().map(String::as_str).collect();
            let mut expected = e.path.to_owned();
            for (name, value) in names.iter().zip(&values) {
                expected = expected.replacen(name, value, 1);
            }
            assert_eq!(e.render(&refs), expected, "{}", e.name);
        }
    }

    #[test]
    #[should_panic(expected = "more parameters")]
    fn render_refuses_extra_parameters() {
        endpoint("get_account").render(&["a", "b"]);
    }
}
