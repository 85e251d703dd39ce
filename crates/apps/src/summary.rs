//! Response-time summaries of raw samples (nearest-rank percentiles), shared by the monitor and the UDP client.
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub min_us: f64,
    pub mean_us: f64,
    /// Standard deviation (population).
    pub std_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// The nearest-rank `q`-quantile (0..=1) of sorted values, `None` when there are none: the one definition of a
/// percentile every report of partita uses (the monitor's, the benchmarks' and the studies').
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let n = sorted.len();
    (n > 0).then(|| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1])
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    nearest_rank(sorted, q).unwrap_or(0)
}

impl Summary {
    /// Summarises response times given in nanoseconds.
    pub fn of_ns(samples: &[u64]) -> Summary {
        if samples.is_empty() {
            return Summary::default();
        }
        let mut s = samples.to_vec();
        s.sort_unstable();
        let us = |ns: u64| ns as f64 / 1000.0;
        let mean = s.iter().map(|&v| v as f64).sum::<f64>() / s.len() as f64;
        let var = s.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / s.len() as f64;
        Summary {
            count: s.len() as u64,
            min_us: us(s[0]),
            mean_us: mean / 1000.0,
            std_us: var.sqrt() / 1000.0,
            p50_us: us(quantile(&s, 0.50)),
            p90_us: us(quantile(&s, 0.90)),
            p99_us: us(quantile(&s, 0.99)),
            max_us: us(*s.last().unwrap()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let s = Summary::of_ns(&v);
        assert_eq!(s.count, 100);
        assert_eq!(s.p50_us, 50.0);
        assert_eq!(s.p99_us, 99.0);
        assert_eq!(s.max_us, 100.0);
        assert_eq!(s.min_us, 1.0);
        assert!((s.mean_us - 50.5).abs() < 1e-9);
        assert!((s.std_us - 28.866).abs() < 1e-3, "{}", s.std_us);
        assert_eq!(Summary::of_ns(&[]).count, 0);
    }
}
