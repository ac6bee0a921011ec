//! Latency histograms in microseconds and their percentiles.

use hdrhistogram::Histogram;

/// Highest latency recorded exactly: one minute. Larger values saturate.
const LATENCY_US_MAX: u64 = 60_000_000;

/// A histogram of latencies in microseconds, 3 significant digits.
pub fn new() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts (1 <= low, high >= 2 * low).
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("constant histogram bounds")
}

/// p50, p99 and p99.9 in microseconds; `None` if nothing was recorded.
pub fn percentiles(h: &Histogram<u64>) -> Option<(f64, f64, f64)> {
    (!h.is_empty()).then(|| {
        (
            h.value_at_quantile(0.50) as f64,
            h.value_at_quantile(0.99) as f64,
            h.value_at_quantile(0.999) as f64,
        )
    })
}
