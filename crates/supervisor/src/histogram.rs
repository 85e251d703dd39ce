//! A lock-free latency histogram the plan executor records every window start's lateness in (one relaxed
//! atomic add, no allocation on the executor's path), and that readers snapshot while the plan runs: the soak
//! takes one snapshot per interval and reports the difference.
//!
//! Buckets: 1 µs wide below 1 ms, 10 µs below 10 ms, 1 ms below 1 s; later values go to the last bucket. A
//! percentile is reported as its bucket's upper edge (never better than measured).
use std::sync::atomic::{AtomicU64, Ordering};

const FINE: u64 = 1_000; // µs of 1 µs buckets
const MEDIUM: u64 = 10_000; // up to here, 10 µs buckets
const COARSE: u64 = 1_000_000; // up to here, 1 ms buckets
/// The number of buckets.
pub const BUCKETS: usize = (FINE + (MEDIUM - FINE) / 10 + (COARSE - MEDIUM) / 1_000 + 1) as usize;

pub struct LatencyHistogram {
    counts: Box<[AtomicU64]>,
    max_ns: AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram { counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(), max_ns: AtomicU64::new(0) }
    }
}

fn bucket(us: u64) -> usize {
    (if us < FINE {
        us
    } else if us < MEDIUM {
        FINE + (us - FINE) / 10
    } else if us < COARSE {
        FINE + (MEDIUM - FINE) / 10 + (us - MEDIUM) / 1_000
    } else {
        BUCKETS as u64 - 1
    }) as usize
}

/// The upper edge of bucket `b`, µs.
fn upper_us(b: usize) -> f64 {
    let b = b as u64;
    let fine_end = FINE;
    let medium_end = FINE + (MEDIUM - FINE) / 10;
    (if b < fine_end {
        b + 1
    } else if b < medium_end {
        FINE + (b - fine_end + 1) * 10
    } else {
        MEDIUM + (b - medium_end + 1) * 1_000
    }) as f64
}

impl LatencyHistogram {
    pub fn record(&self, ns: u64) {
        self.counts[bucket(ns / 1_000)].fetch_add(1, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot { counts: self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect() }
    }

    /// The largest value recorded so far, ns (exact).
    pub fn max_ns(&self) -> u64 {
        self.max_ns.load(Ordering::Relaxed)
    }
}

/// Counts per bucket at one moment; the difference of two is an interval's histogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub counts: Vec<u64>,
}

impl Snapshot {
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot { counts: self.counts.iter().zip(&earlier.counts).map(|(a, b)| a.saturating_sub(*b)).collect() }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q` quantile (0..=1) as the upper edge of its bucket, µs; `None` when empty.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        let n = self.total();
        if n == 0 {
            return None;
        }
        let want = ((n as f64 * q).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (b, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some(upper_us(b));
            }
        }
        None
    }

    /// Each non-empty bucket as `(upper edge µs, count)`, lowest first.
    pub fn nonzero(&self) -> Vec<(f64, u64)> {
        self.counts.iter().enumerate().filter(|(_, c)| **c > 0).map(|(b, c)| (upper_us(b), *c)).collect()
    }

    /// The upper edge of the highest non-empty bucket, µs.
    pub fn max_us(&self) -> Option<f64> {
        self.counts.iter().rposition(|c| *c > 0).map(upper_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_their_edges_bound_their_values() {
        let mut last = 0;
        for us in 0..1_200_000u64 {
            let b = bucket(us);
            assert!(b == last || b == last + 1, "{us} µs jumps from bucket {last} to {b}");
            last = b;
            assert!(us < COARSE && (upper_us(b) as u64) > us || b == BUCKETS - 1, "{us} µs above its bucket's edge {}", upper_us(b));
        }
        assert_eq!(last, BUCKETS - 1);
    }

    #[test]
    fn quantiles_of_an_interval() {
        let h = LatencyHistogram::default();
        let before = h.snapshot();
        for us in 1..=100u64 {
            h.record(us * 1_000 + 500);
        }
        h.record(25_300_000);
        let s = h.snapshot().since(&before);
        assert_eq!(s.total(), 101);
        assert_eq!(s.quantile_us(0.5), Some(52.0), "the 51st of 101 is 51.5 µs, in the bucket up to 52");
        assert_eq!(s.quantile_us(0.99), Some(101.0));
        assert_eq!(s.max_us(), Some(26_000.0));
        assert_eq!(h.max_ns(), 25_300_000);
        let later = h.snapshot();
        assert_eq!(later.since(&later).quantile_us(0.5), None);
    }
}
