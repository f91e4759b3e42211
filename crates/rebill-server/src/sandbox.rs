//! Sandbox clock control (`POST /sandbox/clock`, outside the v2 API): a sandbox site moves its
//! own clock on — to a time (`<clock><now>…</now></clock>`) or by an amount
//! (`<clock><advance>1month</advance></clock>`) — and every job that became due on the way
//! (renewals, trial ends, pauses, dunning retries) runs, in time order, before the answer —
//! including jobs other runners had claimed, which are waited for (503 `clock_catching_up` when
//! they take longer than [`CATCH_UP_PATIENCE`]; the same request again goes on waiting).
//! `jobs_run` counts the jobs due in the time the clock moved over that are done, whoever ran
//! them. Authenticated with a private key like the API; read-only keys and production sites get
//! 403. The use case is `rebill_app::operations::clock`; this module decodes and answers.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use rebill_app::operations::clock::{ClockError, advance, move_clock};
use rebill_app::operations::scheduler::CatchUpError;
use rebill_app::platform::model::Mode as SiteMode;
use rebill_app::platform::sites::{self, SiteError};
use rebill_models::Clock;
use rebill_models::validate::reject_decode;
use rebill_xml::{ApiVersion, Features, Mode, WireContext};

use crate::layers::{basic_key, unauthorized};
use crate::respond;
use crate::state::AppState;

fn invalid(field: &str, symbol: &'static str, message: &str) -> Response {
    let ctx = WireContext::new(ApiVersion::default(), Features::none(), "");
    respond::field_error(&ctx, &format!("clock.{field}"), symbol, message)
}

/// `POST /sandbox/clock`.
pub(crate) async fn clock(State(state): State<AppState>, request: Request) -> Response {
    let Some(key) = basic_key(request.headers()) else { return unauthorized() };
    let (site, api_key) = match sites::authenticate(&state, &key).await {
        Ok(found) => found,
        Err(SiteError::UnknownKey) => return unauthorized(),
        Err(e) => return respond::internal(&e),
    };
    if let Some(log) = request.extensions().get::<crate::state::LogFields>() {
        log.site(site.id);
    }
    if api_key.read_only {
        return respond::error(StatusCode::FORBIDDEN, "forbidden", "This API key is read-only.");
    }
    if site.mode != SiteMode::Sandbox {
        return respond::error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "Only sandbox sites can move their clock; a production site runs on real time.",
        );
    }
    let body = match crate::layers::read_body(&state, request).await {
        Ok(b) => b,
        Err(response) => return response,
    };
    let ctx = WireContext::new(rebill_xml::version::LATEST_VERSION, Features::none(), "");
    let wanted: Clock = match rebill_xml::from_xml(&body, &ctx, Mode::Request) {
        Ok(c) => c,
        Err(e) => return respond::rejection(&reject_decode(&e), &ctx),
    };
    let Some(current) = DateTime::<Utc>::from_timestamp(site.now(state.clock.now()), 0) else {
        return respond::invariant(&"site clock out of range");
    };
    let target = match (&wanted.now, &wanted.advance) {
        (Some(now), None) => *now,
        (None, Some(amount)) => match advance(current, amount) {
            Ok(t) => t,
            Err(e) => return invalid("advance", "invalid", &e.to_string()),
        },
        _ => return invalid("base", "invalid", "give either now or advance"),
    };
    let (site, ran) = match move_clock(&state, &site, target.timestamp()).await {
        Ok(moved) => (moved.site, moved.jobs_run),
        Err(ClockError::Backwards(current)) => {
            return invalid(
                "now",
                "invalid",
                &format!("is before the site's time {current}: a clock only moves forward"),
            );
        }
        Err(ClockError::CatchingUp(CatchUpError::StillRunning(n, _))) => {
            return respond::error(
                StatusCode::SERVICE_UNAVAILABLE,
                "clock_catching_up",
                &format!(
                    "The clock moved, but {n} jobs due before the new time are still running; send the same \
                     request again to wait for them."
                ),
            );
        }
        Err(e) => return respond::internal(&e),
    };
    let answer = Clock {
        now: DateTime::<Utc>::from_timestamp(site.now(state.clock.now()), 0),
        advance: None,
        jobs_run: Some(ran),
    };
    respond::resource(StatusCode::OK, &answer, &ctx)
}
