//! The statistics of paper 004's Tables 3–5 for one set of latencies: lower whisker, lower quartile, median,
//! mean, σ, upper quartile, upper whisker, max jitter; plus p99, min and max, which the paper does not give.
//!
//! The paper does not define its whiskers. Its tables are "within a 95 % confidence interval" and its max jitter
//! is always upper whisker − lower whisker (e.g. 0.572 − 0.005 = 0.567 ms for the baseline's TP3), far above
//! its upper quartile plus 1.5 IQR: so the whiskers here are the 2.5th and 97.5th percentiles (the central 95 %
//! of samples) and the max jitter their difference. The quartiles are nearest-rank percentiles.
use crate::stats::nearest_rank;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BoxStats {
    pub samples: usize,
    pub lower_whisker: f64,
    pub lower_quartile: f64,
    pub median: f64,
    pub mean: f64,
    pub sigma: f64,
    pub upper_quartile: f64,
    pub upper_whisker: f64,
    pub max_jitter: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
}


impl BoxStats {
    /// `None` for no samples.
    pub fn of(values: &[f64]) -> Option<BoxStats> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let sigma = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        // Not empty: every rank exists.
        let rank = |q: f64| nearest_rank(&v, q).unwrap_or(f64::NAN);
        let (lw, uw) = (rank(0.025), rank(0.975));
        Some(BoxStats {
            samples: v.len(),
            lower_whisker: lw,
            lower_quartile: rank(0.25),
            median: rank(0.5),
            mean,
            sigma,
            upper_quartile: rank(0.75),
            upper_whisker: uw,
            max_jitter: uw - lw,
            p99: rank(0.99),
            min: v[0],
            max: v[v.len() - 1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_columns_of_a_known_set() {
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        let s = BoxStats::of(&v).unwrap();
        assert_eq!((s.lower_whisker, s.lower_quartile, s.median, s.upper_quartile, s.upper_whisker), (5.0, 50.0, 100.0, 150.0, 195.0));
        assert_eq!((s.max_jitter, s.p99, s.min, s.max, s.samples), (190.0, 198.0, 1.0, 200.0, 200));
        assert!((s.mean - 100.5).abs() < 1e-9);
        assert!((s.sigma - (((200.0f64 * 200.0) - 1.0) / 12.0).sqrt()).abs() < 1e-9);
        assert!(BoxStats::of(&[]).is_none());
        let one = BoxStats::of(&[7.0]).unwrap();
        assert_eq!((one.lower_whisker, one.upper_whisker, one.max_jitter, one.sigma), (7.0, 7.0, 0.0, 0.0));
    }
}
