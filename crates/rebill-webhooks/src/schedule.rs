//! When a notification is tried again. The first attempt goes out as soon as the notification
//! exists; a failed attempt (anything but a 2xx within the timeout, redirects included) is
//! retried [`RETRIES`] times, retry `x` (0…9) coming `10 + x·2^(x+5)` seconds after the attempt
//! that failed (10 s, 74 s, 266 s, 778 s, 2,058 s, 5,130 s, 12,298 s, 28,682 s, 65,546 s,
//! 147,466 s: about 73 hours in all, as the original service). After the last retry fails the
//! notification is `failed`. A scale (`serve --webhook-retry-scale F`) multiplies every delay,
//! for tests and staging.

use std::time::Duration;

/// Retries after the first attempt.
pub const RETRIES: u32 = 10;
/// How long an endpoint may take to answer an attempt.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// The delay before retry `x` (0-based), unscaled: `10 + x·2^(x+5)` seconds; `None` after the
/// last retry.
pub fn delay(retry: u32) -> Option<Duration> {
    (retry < RETRIES).then(|| Duration::from_secs(10 + u64::from(retry) * (1u64 << (retry + 5))))
}

/// [`delay`] multiplied by `scale` (a finite, non-negative factor; anything else counts as 1).
pub fn scaled(retry: u32, scale: f64) -> Option<Duration> {
    let scale = if scale.is_finite() && scale >= 0.0 { scale } else { 1.0 };
    delay(retry).map(|d| d.mul_f64(scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_original_schedule() {
        let seconds: Vec<u64> = (0..RETRIES).filter_map(delay).map(|d| d.as_secs()).collect();
        assert_eq!(seconds, [10, 74, 266, 778, 2_058, 5_130, 12_298, 28_682, 65_546, 147_466]);
        assert_eq!(seconds.iter().sum::<u64>(), 262_308, "about 73 hours");
        assert_eq!(delay(RETRIES), None, "failed after ten retries");
    }

    #[test]
    fn scaled_for_tests() {
        assert_eq!(scaled(0, 0.01), Some(Duration::from_millis(100)));
        assert_eq!(scaled(1, 0.5), Some(Duration::from_secs(37)));
        assert_eq!(scaled(2, f64::NAN), delay(2));
        assert_eq!(scaled(2, -1.0), delay(2));
        assert_eq!(scaled(RETRIES, 0.01), None);
    }
}
