//! Sandbox clock control (`POST /sandbox/clock`, outside the v2 API): a sandbox site moves its
//! own clock on — to a time (`<clock><now>…</now></clock>`) or by an amount
//! (`<clock><advance>1month</advance></clock>`) — and every job that became due on the way
//! (renewals, trial ends, pauses, dunning retries) runs, in time order, before the answer —
//! including jobs other runners had claimed, which are waited for (503 `clock_catching_up` when
//! they take longer than [`CATCH_UP_PATIENCE`]; the same request again goes on waiting).
//! `jobs_run` counts the jobs due in the time the clock moved over that are done, whoever ran
//! them. Authenticated with a private key like the API; read-only keys and production sites get
//! 403.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Months, TimeDelta, Utc};
use rebill_models::Clock;
use rebill_models::validate::reject_decode;
use rebill_store::Mode as SiteMode;
use rebill_xml::{ApiVersion, Features, Mode, WireContext};

use crate::layers::{basic_key, unauthorized};
use crate::{AppState, respond, scheduler};

/// How long a clock call waits for due jobs that other runners are running.
pub const CATCH_UP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);

/// A bad `<advance>` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an amount of time such as 1month, 2 days or 12 hours")]
pub struct BadAdvance(String);

/// `from` moved on by `amount` (`1month`, `2 months`, `15days`, `3 hours`, `1 year`, …):
/// months and years by the calendar (clamped to the month's end), the rest as exact durations.
pub fn advance(from: DateTime<Utc>, amount: &str) -> Result<DateTime<Utc>, BadAdvance> {
    let bad = || BadAdvance(amount.to_owned());
    let text = amount.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let n: u32 = text[..digits].parse().map_err(|_| bad())?;
    let unit = text[digits..].trim().to_ascii_lowercase();
    let unit = unit.strip_suffix('s').unwrap_or(&unit);
    let seconds = |per: i64| TimeDelta::try_seconds(i64::from(n) * per).and_then(|d| from.checked_add_signed(d));
    let moved = match unit {
        "second" | "sec" => seconds(1),
        "minute" | "min" => seconds(60),
        "hour" => seconds(3600),
        "day" => seconds(86_400),
        "week" => seconds(7 * 86_400),
        "month" => from.checked_add_months(Months::new(n)),
        "year" => n.checked_mul(12).and_then(|m| from.checked_add_months(Months::new(m))),
        _ => None,
    };
    moved.ok_or_else(bad)
}

fn invalid(field: &str, symbol: &'static str, message: &str) -> Response {
    let ctx = WireContext::new(ApiVersion::default(), Features::none(), "");
    respond::field_error(&ctx, &format!("clock.{field}"), symbol, message)
}

/// `POST /sandbox/clock`.
pub(crate) async fn clock(State(state): State<AppState>, request: Request) -> Response {
    let Some(key) = basic_key(request.headers()) else { return unauthorized() };
    let service_now = state.clock.now();
    let (site, api_key) = match state.store.authenticate(&key, service_now).await {
        Ok(Some(found)) => found,
        Ok(None) => return unauthorized(),
        Err(e) => return respond::internal(&e),
    };
    if let Some(log) = request.extensions().get::<crate::layers::LogFields>() {
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
    let Some(current) = DateTime::<Utc>::from_timestamp(site.now(service_now), 0) else {
        return respond::internal(&"site clock out of range");
    };
    let target = match (&wanted.now, &wanted.advance) {
        (Some(now), None) => *now,
        (None, Some(amount)) => match advance(current, amount) {
            Ok(t) => t,
            Err(e) => return invalid("advance", "invalid", &e.to_string()),
        },
        _ => return invalid("base", "invalid", "give either now or advance"),
    };
    if target < current {
        return invalid("now", "invalid", &format!("is before the site's time {current}: a clock only moves forward"));
    }
    let site = match state.store.set_site_clock(&site, target.timestamp(), service_now).await {
        Ok(site) => site,
        Err(e) => return respond::internal(&e),
    };
    let ran = match scheduler::catch_up(&state, &site, current.timestamp(), CATCH_UP_PATIENCE).await {
        Ok(n) => n,
        Err(scheduler::CatchUpError::StillRunning(n, _)) => {
            return respond::error(
                StatusCode::SERVICE_UNAVAILABLE,
                "clock_catching_up",
                &format!(
                    "The clock moved, but {n} jobs due before the new time are still running; send the same \
                     request again to wait for them."
                ),
            );
        }
        Err(scheduler::CatchUpError::Store(e)) => return respond::internal(&e),
    };
    let answer = Clock {
        now: DateTime::<Utc>::from_timestamp(site.now(state.clock.now()), 0),
        advance: None,
        jobs_run: Some(ran),
    };
    respond::resource(StatusCode::OK, &answer, &ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&Utc)).expect("time")
    }

    #[test]
    fn amounts_of_time() {
        let jan31 = at("2027-01-31T10:00:00Z");
        assert_eq!(advance(jan31, "1month"), Ok(at("2027-02-28T10:00:00Z")));
        assert_eq!(advance(jan31, "2 months"), Ok(at("2027-03-31T10:00:00Z")));
        assert_eq!(advance(jan31, "1 year"), Ok(at("2028-01-31T10:00:00Z")));
        assert_eq!(advance(jan31, "15days"), Ok(at("2027-02-15T10:00:00Z")));
        assert_eq!(advance(jan31, "3 hours"), Ok(at("2027-01-31T13:00:00Z")));
        assert_eq!(advance(jan31, "90 seconds"), Ok(at("2027-01-31T10:01:30Z")));
        assert_eq!(advance(jan31, "1 week"), Ok(at("2027-02-07T10:00:00Z")));
        for bad in ["", "month", "1 fortnight", "-1 day", "1.5 days"] {
            assert!(advance(jan31, bad).is_err(), "{bad}");
        }
    }
}
