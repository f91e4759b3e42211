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

/// The endpoints of a table indexed by method and path: one radix tree per method (`matchit`),
/// so a request is routed by walking its path once instead of trying every template.
///
/// No path fits two templates of one method (the table is refused otherwise), so which template
/// a path takes never depends on a priority between them. A parameter fits one whole, non-empty
/// segment; one trailing `/` is ignored (`/v2/accounts/` is `/v2/accounts`).
pub struct Routes {
    /// Indexed by [`Method`] (`Get`, `Post`, `Put`, `Delete`).
    by_method: [matchit::Router<&'static Endpoint>; 4],
}

/// The routes of the generated table ([`crate::api::ENDPOINTS`]), built on first use.
pub fn routes() -> &'static Routes {
    static ROUTES: std::sync::LazyLock<Routes> = std::sync::LazyLock::new(|| {
        Routes::new(&crate::api::ENDPOINTS).expect("the generated endpoint table routes without conflicts")
    });
    &ROUTES
}

/// Why a table cannot be routed (a schema error).
#[derive(Debug, thiserror::Error)]
pub enum RouteConflict {
    #[error("endpoints {first} ({first_path}) and {second} ({second_path}) are both {method} and fit the same paths")]
    Overlap {
        method: &'static str,
        first: &'static str,
        first_path: &'static str,
        second: &'static str,
        second_path: &'static str,
    },
    #[error("endpoint {name} ({method} {path}) cannot be routed: {source}")]
    Template { name: &'static str, method: &'static str, path: &'static str, source: matchit::InsertError },
}

const METHODS: [Method; 4] = [Method::Get, Method::Post, Method::Put, Method::Delete];

fn method_index(method: Method) -> usize {
    match method {
        Method::Get => 0,
        Method::Post => 1,
        Method::Put => 2,
        Method::Delete => 3,
    }
}

/// Whether some path fits both templates: as many segments, and in each place the same text or
/// a parameter in either.
fn overlap(a: &str, b: &str) -> bool {
    let param = |s: &str| s.starts_with('{');
    a.split('/').count() == b.split('/').count()
        && a.split('/').zip(b.split('/')).all(|(x, y)| x == y || param(x) || param(y))
}

impl Routes {
    /// Indexes `endpoints` by method and path template.
    pub fn new(endpoints: &'static [Endpoint]) -> Result<Self, RouteConflict> {
        for (at, first) in endpoints.iter().enumerate() {
            if let Some(second) =
                endpoints[at + 1..].iter().find(|e| e.method == first.method && overlap(first.path, e.path))
            {
                return Err(RouteConflict::Overlap {
                    method: first.method.as_str(),
                    first: first.name,
                    first_path: first.path,
                    second: second.name,
                    second_path: second.path,
                });
            }
        }
        let mut by_method: [matchit::Router<&'static Endpoint>; 4] = Default::default();
        for endpoint in endpoints {
            by_method[method_index(endpoint.method)].insert(endpoint.path, endpoint).map_err(|source| {
                RouteConflict::Template {
                    name: endpoint.name,
                    method: endpoint.method.as_str(),
                    path: endpoint.path,
                    source,
                }
            })?;
        }
        Ok(Self { by_method })
    }

    /// The endpoint for a method and path, with its raw (still percent-encoded) path parameters
    /// in template order.
    pub fn route<'p>(&self, method: Method, path: &'p str) -> Option<(&'static Endpoint, Vec<&'p str>)> {
        let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
        let found = self.by_method[method_index(method)].at(path).ok()?;
        let params: Vec<&'p str> = found.params.iter().map(|(_, value)| value).collect();
        // `matchit` lets a parameter fit an empty segment (`/v2/accounts//notes`); no identifier
        // is empty.
        if params.iter().any(|p| p.is_empty()) {
            return None;
        }
        Some((*found.value, params))
    }

    /// The methods whose endpoint at `path` exists in `ctx` (for a 405 `Allow` header).
    pub fn allowed_methods(&self, path: &str, ctx: &WireContext) -> Vec<Method> {
        METHODS.into_iter().filter(|m| self.route(*m, path).is_some_and(|(e, _)| e.available(ctx))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Method;
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

    /// The rule [`super::Routes`] keeps, written out plainly: the template of the method whose
    /// segments all fit the path (a parameter fits one non-empty segment). No path fits two
    /// templates of one method, since the table is refused otherwise.
    fn by_rule<'p>(method: Method, path: &'p str) -> Option<(&'static super::Endpoint, Vec<&'p str>)> {
        let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
        let fits = |e: &super::Endpoint| -> Option<Vec<&'p str>> {
            let (template, actual): (Vec<&str>, Vec<&str>) = (e.path.split('/').collect(), path.split('/').collect());
            if template.len() != actual.len() {
                return None;
            }
            let mut params = Vec::new();
            for (t, a) in template.iter().zip(actual) {
                if t.starts_with('{') && !a.is_empty() {
                    params.push(a);
                } else if *t != a {
                    return None;
                }
            }
            Some(params)
        };
        let mut fitting = ENDPOINTS.iter().filter(|e| e.method == method).filter_map(|e| fits(e).map(|p| (e, p)));
        let found = fitting.next();
        assert!(fitting.next().is_none(), "{path} fits two templates of {}", method.as_str());
        found
    }

    /// Every template filled with a plain value, and with each literal segment of the table in
    /// each parameter's place (where literal and parameter templates overlap), routes as the rule
    /// says; so do the same paths with a trailing `/`, an empty or a split parameter, a segment
    /// more or a segment less.
    #[test]
    fn routes_follow_the_rule_for_every_template() {
        let routes = super::routes();
        let mut literals: Vec<&str> =
            ENDPOINTS.iter().flat_map(|e| e.path.split('/')).filter(|s| !s.is_empty() && !s.starts_with('{')).collect();
        literals.sort_unstable();
        literals.dedup();
        let mut paths: Vec<String> = vec!["/".into(), "".into(), "/v2".into(), "/v2/".into(), "//".into()];
        for e in ENDPOINTS.iter() {
            let segments: Vec<&str> = e.path.split('/').collect();
            let params: Vec<usize> = (0..segments.len()).filter(|i| segments[*i].starts_with('{')).collect();
            let fill = |at: Option<usize>, with: &str| -> String {
                let filled: Vec<&str> = segments
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        if !s.starts_with('{') {
                            s
                        } else if Some(i) == at {
                            with
                        } else {
                            "v%20x"
                        }
                    })
                    .collect();
                filled.join("/")
            };
            let plain = fill(None, "");
            paths.extend([plain.clone(), format!("{plain}/"), format!("{plain}//"), format!("{plain}/extra")]);
            paths.push(plain.rsplit_once('/').map_or(String::new(), |(head, _)| head.to_owned()));
            for at in &params {
                paths.extend([fill(Some(*at), ""), fill(Some(*at), "a/b")]);
                paths.extend(literals.iter().map(|literal| fill(Some(*at), literal)));
            }
        }
        let mut routed = 0;
        for path in &paths {
            for method in super::METHODS {
                let got = routes.route(method, path).map(|(e, params)| (e.name, params));
                let want = by_rule(method, path).map(|(e, params)| (e.name, params));
                assert_eq!(got, want, "{} {path}", method.as_str());
                routed += usize::from(got.is_some());
            }
        }
        // Most of these paths route somewhere: the comparison is not between two empty answers.
        assert!(routed > paths.len() / 2, "{routed} of {} paths routed", paths.len());
    }

    #[test]
    fn routes_answer_raw_parameters_and_allow_lists_what_exists() {
        let routes = super::routes();
        let (e, params) = routes.route(Method::Post, "/v2/subscriptions/preview").expect("a route");
        assert_eq!((e.name, params.len()), ("preview_subscription", 0));
        let (e, params) = routes.route(Method::Get, "/v2/accounts/a%2Fb/").expect("a route");
        assert_eq!((e.name, params), ("get_account", vec!["a%2Fb"]));
        assert!(routes.route(Method::Get, "/v2/accounts//").is_none());
        let ctx = rebill_xml::WireContext::new(
            rebill_xml::ApiVersion::new(2, 11),
            rebill_xml::Features::none(),
            "http://localhost",
        );
        let allowed = routes.allowed_methods("/v2/accounts/abc", &ctx);
        assert_eq!(allowed, vec![Method::Get, Method::Put, Method::Delete]);
        assert!(routes.allowed_methods("/v2/nothing", &ctx).is_empty());
    }

    /// Two templates of one method that some path fits (the same, or a literal where the other
    /// has a parameter) are refused when the table is read; of two methods, they are not.
    #[test]
    fn templates_of_one_method_that_fit_one_path_are_refused() {
        fn table(second_path: &'static str, method: Method) -> &'static [super::Endpoint] {
            let one = *endpoint("get_account");
            Box::leak(Box::new([one, super::Endpoint { name: "second", path: second_path, method, ..one }]))
        }
        for path in ["/v2/accounts/{other}", "/v2/accounts/mine", "/v2/{things}/{code}"] {
            let refused = super::Routes::new(table(path, Method::Get)).err().expect("an overlap");
            assert!(refused.to_string().contains("get_account") && refused.to_string().contains(path), "{refused}");
            assert!(super::Routes::new(table(path, Method::Post)).is_ok(), "{path} as POST");
        }
        for path in ["/v2/accounts/{code}/notes", "/v2/accounts", "/v2/plans/mine"] {
            assert!(super::Routes::new(table(path, Method::Get)).is_ok(), "{path}");
        }
    }

    #[test]
    #[should_panic(expected = "more parameters")]
    fn render_refuses_extra_parameters() {
        endpoint("get_account").render(&["a", "b"]);
    }
}
