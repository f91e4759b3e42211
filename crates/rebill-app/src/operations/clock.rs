//! Sandbox clocks: a sandbox site moves its own clock on (never back), and every job that
//! became due on the way runs, in time order, before the answer (see [`move_clock`]).

use chrono::{DateTime, Months, TimeDelta, Utc};
use rebill_store::{Site, StoreError};

use crate::Services;
use crate::operations::scheduler::{self, CatchUpError};

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

/// Why a clock did not move, or its due work did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ClockError {
    /// The target lies before the site's time: a clock only moves forward.
    #[error("the new time is before the site's time {0}: a clock only moves forward")]
    Backwards(DateTime<Utc>),
    #[error("the site's clock is out of range")]
    OutOfRange,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The clock moved, but jobs due before the new time were still running elsewhere.
    #[error(transparent)]
    CatchingUp(#[from] CatchUpError),
}

/// The site's clock after it moved, and how many jobs due in the time it moved over are done.
#[derive(Debug, Clone)]
pub struct Moved {
    pub site: Site,
    pub jobs_run: i64,
}

/// Moves a site's clock to `target` (epoch seconds, never back) and runs the site's due work
/// until it caught up (see [`scheduler::catch_up`], waiting up to [`CATCH_UP_PATIENCE`]).
pub async fn move_clock(services: &Services, site: &Site, target: i64) -> Result<Moved, ClockError> {
    let service_now = services.clock.now();
    let current = site.now(service_now);
    if target < current {
        return Err(ClockError::Backwards(crate::time(current).ok_or(ClockError::OutOfRange)?));
    }
    let site = services.store.set_site_clock(site, target, service_now).await?;
    let jobs_run = scheduler::catch_up(services, &site, current, CATCH_UP_PATIENCE).await?;
    Ok(Moved { site, jobs_run })
}

impl From<ClockError> for crate::platform::error::AppError {
    fn from(e: ClockError) -> Self {
        match e {
            ClockError::Backwards(_) => Self::refused("now", "invalid", e.to_string()),
            ClockError::Store(e) => e.into(),
            ClockError::CatchingUp(e) => e.into(),
            e @ ClockError::OutOfRange => Self::internal(e),
        }
    }
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
