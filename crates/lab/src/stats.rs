//! Statistics of round-trip samples, from an HdrHistogram with nanosecond resolution and 3 significant digits
//! (relative error at most 0.1 %). Every figure is reported in microseconds as a floating-point number.
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest recordable value: one minute. Longer samples are clamped and counted in `clamped`.
const HIGHEST_NS: u64 = 60_000_000_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of samples.
    pub count: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
    /// Population standard deviation.
    pub std_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    /// First and third quartiles.
    pub q1_us: f64,
    pub q3_us: f64,
    /// Box-plot whiskers: the most extreme samples within 1.5 interquartile ranges of the quartiles.
    pub whisker_low_us: f64,
    pub whisker_high_us: f64,
    /// Max − min.
    pub max_jitter_us: f64,
    /// Samples above one minute, recorded as one minute.
    pub clamped: u64,
}

pub use partita_apps::summary::nearest_rank;

/// A time in µs as an axis label or a table prints it: `850 µs`, `1.5 ms`, `2 s`.
pub fn fmt_us(v: f64) -> String {
    if v >= 1e6 {
        format!("{} s", v / 1e6)
    } else if v >= 1e3 {
        format!("{} ms", v / 1e3)
    } else {
        format!("{v} µs")
    }
}

fn us(ns: f64) -> f64 {
    ns / 1000.0
}

impl Stats {
    /// Statistics of round-trip times in nanoseconds; `None` when there is no sample.
    pub fn from_ns(samples: &[u64]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut h = Histogram::<u64>::new_with_bounds(1, HIGHEST_NS, 3).expect("valid histogram bounds");
        let mut clamped = 0;
        for &s in samples {
            let v = s.clamp(1, HIGHEST_NS);
            if s > HIGHEST_NS {
                clamped += 1;
            }
            h.record(v).expect("value within bounds");
        }
        let q = |x: f64| h.value_at_quantile(x) as f64;
        let (q1, q3) = (q(0.25), q(0.75));
        let iqr = q3 - q1;
        let (lo_fence, hi_fence) = (q1 - 1.5 * iqr, q3 + 1.5 * iqr);
        // Whiskers from the raw samples: the histogram's buckets would blur the fences.
        let whisker_low = samples.iter().map(|&s| s as f64).filter(|&s| s >= lo_fence).fold(f64::INFINITY, f64::min);
        let whisker_high =
            samples.iter().map(|&s| s as f64).filter(|&s| s <= hi_fence).fold(f64::NEG_INFINITY, f64::max);
        let (min, max) = (h.min() as f64, h.max() as f64);
        Some(Stats {
            count: h.len(),
            min_us: us(min),
            mean_us: us(h.mean()),
            max_us: us(max),
            std_us: us(h.stdev()),
            p50_us: us(q(0.5)),
            p90_us: us(q(0.9)),
            p99_us: us(q(0.99)),
            p99_9_us: us(q(0.999)),
            q1_us: us(q1),
            q3_us: us(q3),
            whisker_low_us: us(whisker_low.max(min)),
            whisker_high_us: us(whisker_high.min(max)),
            max_jitter_us: us(max - min),
            clamped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-9)
    }

    #[test]
    fn exact_below_two_microseconds() {
        // 1..=1000 ns: values below 2048 are exact at 3 significant digits.
        let samples: Vec<u64> = (1..=1000).rev().collect();
        let s = Stats::from_ns(&samples).unwrap();
        assert_eq!(s.count, 1000);
        assert_eq!(s.min_us, 0.001);
        assert_eq!(s.max_us, 1.0);
        assert!(close(s.mean_us, 0.5005, 1e-9), "{}", s.mean_us);
        // Population σ of 1..=n is sqrt((n²−1)/12).
        let sigma = ((1000.0f64 * 1000.0 - 1.0) / 12.0).sqrt() / 1000.0;
        assert!(close(s.std_us, sigma, 1e-6), "{} vs {sigma}", s.std_us);
        assert_eq!(s.p50_us, 0.5);
        assert_eq!(s.p90_us, 0.9);
        assert_eq!(s.p99_us, 0.99);
        assert_eq!(s.p99_9_us, 0.999);
        assert_eq!(s.q1_us, 0.25);
        assert_eq!(s.q3_us, 0.75);
        assert_eq!(s.max_jitter_us, 0.999);
        assert_eq!(s.whisker_low_us, 0.001);
        assert_eq!(s.whisker_high_us, 1.0);
        assert_eq!(s.clamped, 0);
    }

    #[test]
    fn large_values_within_relative_error_and_outlier_outside_whisker() {
        let mut samples = vec![100_000u64; 98];
        samples.push(120_000);
        samples.push(5_000_000);
        let s = Stats::from_ns(&samples).unwrap();
        assert!(close(s.min_us, 100.0, 1e-3));
        assert!(close(s.max_us, 5000.0, 1e-3));
        assert!(close(s.p50_us, 100.0, 1e-3));
        assert!(close(s.p99_us, 120.0, 1e-3), "{}", s.p99_us);
        assert!(close(s.mean_us, (98.0 * 100.0 + 120.0 + 5000.0) / 100.0, 1e-3));
        // IQR is 0: both outliers lie beyond the upper fence.
        assert!(close(s.whisker_high_us, 100.0, 1e-3), "{}", s.whisker_high_us);
        assert!(s.min_us <= s.p50_us && s.p50_us <= s.p99_us && s.p99_us <= s.p99_9_us && s.p99_9_us <= s.max_us);
    }

    #[test]
    fn empty_and_clamped() {
        assert!(Stats::from_ns(&[]).is_none());
        let s = Stats::from_ns(&[0, HIGHEST_NS * 2]).unwrap();
        assert_eq!(s.count, 2);
        assert_eq!(s.clamped, 1);
    }
}
