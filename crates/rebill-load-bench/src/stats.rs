//! Latency percentiles.

/// The value at `percent` (nearest rank) of `sorted`, 0 when it is empty.
pub fn percentile(sorted: &[u64], percent: f64) -> u64 {
    let rank = (percent / 100.0 * sorted.len() as f64).ceil() as usize;
    let last = sorted.len().saturating_sub(1);
    sorted.get(rank.saturating_sub(1).min(last)).copied().unwrap_or(0)
}

/// Microseconds as wrk prints a time (`612.34us`, `1.23ms`, `1.02s`).
pub fn latency(micros: f64) -> String {
    if micros < 1e3 {
        format!("{micros:.2}us")
    } else if micros < 1e6 {
        format!("{:.2}ms", micros / 1e3)
    } else {
        format!("{:.2}s", micros / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50.0), 50);
        assert_eq!(percentile(&values, 99.0), 99);
        assert_eq!(percentile(&values, 100.0), 100);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }
}
