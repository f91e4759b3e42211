//! Routing over the generated endpoint table: 404 for unknown paths and for routes newer than
//! the requested version or missing the site's feature (400 `unavailable_in_api_version` instead
//! for the routes whose table entry says `below_since = "unavailable"`), 405 with `Allow` for a
//! wrong method,
//! then the endpoint's handler, or 501 naming an endpoint whose behaviour is not built yet.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use rebill_models::api::EndpointId;
use rebill_models::routes;

use crate::handlers;
use crate::request::Call;
use crate::respond;
use crate::state::{AppState, LogFields, RequestContext};

fn table_method(method: &axum::http::Method) -> Option<rebill_models::Method> {
    use axum::http::Method;
    Some(match *method {
        Method::GET | Method::HEAD => rebill_models::Method::Get,
        Method::POST => rebill_models::Method::Post,
        Method::PUT => rebill_models::Method::Put,
        Method::DELETE => rebill_models::Method::Delete,
        _ => return None,
    })
}

/// A path parameter as sent (percent-decoded). `None` when the escapes are not UTF-8 or decode
/// to a character XML forbids (`%00`): no stored identifier can hold one, and none may reach a
/// store (PostgreSQL refuses a NUL in text outright).
fn decode_param(raw: &str) -> Option<String> {
    let decoded = percent_encoding::percent_decode_str(raw).decode_utf8().ok()?;
    rebill_xml::reader::find_forbidden(&decoded).is_none().then(|| decoded.into_owned())
}

/// The first query parameter (decoded name) whose name or value holds a character XML forbids.
fn forbidden_query_parameter(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes()).find_map(|(name, value)| {
        let bad =
            rebill_xml::reader::find_forbidden(&name).is_some() || rebill_xml::reader::find_forbidden(&value).is_some();
        bad.then(|| name.into_owned())
    })
}

/// The endpoint of the table a method and path route to (`None`: no route).
pub(crate) fn endpoint_of(method: &axum::http::Method, path: &str) -> Option<EndpointId> {
    let (endpoint, _) = routes().route(table_method(method)?, path)?;
    EndpointId::of(endpoint)
}

pub(crate) async fn dispatch(State(state): State<AppState>, request: Request<Body>) -> Response {
    let path = request.uri().path().to_owned();
    let Some(ctx) = request.extensions().get::<RequestContext>().cloned() else {
        return respond::invariant(&"request reached routing without a context");
    };
    let not_found = || respond::not_found(&format!("Couldn't find anything at {path}."));
    let found = table_method(request.method()).and_then(|m| routes().route(m, &path));
    let Some((endpoint, raw_params)) = found else {
        let allowed: Vec<&str> = routes().allowed_methods(&path, &ctx.wire).into_iter().map(|m| m.as_str()).collect();
        if allowed.is_empty() {
            return not_found();
        }
        let mut response = respond::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            &format!("{} is not valid at {path}; allowed: {}.", request.method(), allowed.join(", ")),
        );
        if let Ok(v) = HeaderValue::from_str(&allowed.join(", ")) {
            response.headers_mut().insert(header::ALLOW, v);
        }
        return response;
    };
    if endpoint.unavailable_in(&ctx.wire) {
        return respond::error(
            StatusCode::BAD_REQUEST,
            "unavailable_in_api_version",
            &format!(
                "{} {path} is not available in API version {}; it exists from {}.",
                endpoint.method.as_str(),
                ctx.version,
                endpoint.since.map(|v| v.to_string()).unwrap_or_default()
            ),
        );
    }
    if !endpoint.available(&ctx.wire) {
        return not_found();
    }
    let is_head = request.method() == axum::http::Method::HEAD;
    if is_head && endpoint.is_list() && ctx.version < rebill_models::endpoint::HEAD_SINCE {
        // Counting with HEAD exists from 2.6 (elsewhere HEAD is a GET without its body).
        let mut response = respond::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            &format!("HEAD is not valid at {path} for API version {}.", ctx.version),
        );
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET"));
        return response;
    }
    let Some(params) = raw_params.iter().map(|p| decode_param(p)).collect::<Option<Vec<String>>>() else {
        return not_found();
    };
    if let Some(name) = forbidden_query_parameter(request.uri().query()) {
        // The name is shown as the writer shows any text: forbidden characters become U+FFFD.
        return respond::error(
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
            &format!("The query parameter `{name}` holds a character that is not allowed (a control character)."),
        );
    }
    if let Some(log) = request.extensions().get::<LogFields>() {
        log.endpoint(endpoint.name);
    }
    let Some(id) = EndpointId::of(endpoint) else {
        return respond::invariant(&format!("endpoint {} is not in the table", endpoint.name));
    };
    let call = Call { id, endpoint, params, ctx, head: is_head };
    match handlers::handle(&state, call, request).await {
        Some(response) => response,
        None => respond::error(
            StatusCode::NOT_IMPLEMENTED,
            "not_implemented",
            &format!(
                "The endpoint {} ({} {}) is not implemented yet.",
                endpoint.name,
                endpoint.method.as_str(),
                endpoint.path
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_parameters_with_forbidden_characters_match_nothing() {
        assert_eq!(decode_param("a%20b%2F%40").as_deref(), Some("a b/@"));
        for raw in ["%00x", "a%01", "%1F", "%EF%BF%BF", "%EF%BF%BE", "%0B"] {
            assert_eq!(decode_param(raw), None, "{raw}");
        }
        assert_eq!(decode_param("%FF"), None, "not UTF-8");
        assert_eq!(decode_param("%09%0A%0D").as_deref(), Some("\t\n\r"));
    }

    #[test]
    fn query_values_with_forbidden_characters_are_found() {
        assert_eq!(forbidden_query_parameter(None), None);
        assert_eq!(forbidden_query_parameter(Some("state=active&per_page=2")), None);
        assert_eq!(forbidden_query_parameter(Some("state=%00")).as_deref(), Some("state"));
        assert_eq!(forbidden_query_parameter(Some("a=1&cursor=x%EF%BF%BE")).as_deref(), Some("cursor"));
        assert_eq!(forbidden_query_parameter(Some("x%01=1")).as_deref(), Some("x\u{1}"));
    }
}
