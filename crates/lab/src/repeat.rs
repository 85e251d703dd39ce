//! Repeats of a measurement: the order they run in, and what is reported of them.
//!
//! A benchmark runs every cell (a transport at one size, a scenario) N times and **interleaves** the cells it
//! compares (A B C A B C …, not A A A B B B …), so that a change of the machine's speed during the run reaches
//! every cell alike instead of favouring whichever ran first. A figure is reported as the median of its per-run
//! values, with their minimum and maximum; its spread is (max − min) / median. A cell whose p50 spread exceeds
//! [`FLAG_SPREAD`] is flagged in the tables with [`FLAG`]: its figures are not to be trusted to better than that.
use serde::Serialize;

/// The p50 spread above which a cell is flagged.
pub const FLAG_SPREAD: f64 = 0.10;
/// The mark of a flagged cell.
pub const FLAG: &str = "!";

/// One figure over the repeats of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// The median of the per-run values (the mean of the middle two for an even number of runs).
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// How many runs the figure is taken over.
    pub runs: usize,
    /// (max − min) / median; `None` with a single run (nothing to compare) or a median of 0.
    pub spread: Option<f64>,
}

impl Spread {
    /// The figure over its per-run values; `None` without any (NaN values are left out).
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        let (min, max) = (v[0], v[n - 1]);
        let spread = (n > 1 && median != 0.0).then(|| (max - min) / median.abs());
        Some(Spread { median, min, max, runs: n, spread })
    }

    /// Whether the spread exceeds [`FLAG_SPREAD`].
    pub fn flagged(&self) -> bool {
        self.spread.is_some_and(|s| s > FLAG_SPREAD)
    }

    /// The spread as a table cell: `4.9 %`, `14.2 % !` when flagged, `—` for a single run.
    pub fn spread_cell(&self) -> String {
        match self.spread {
            Some(s) if self.flagged() => format!("{:.1} % {FLAG}", s * 100.0),
            Some(s) => format!("{:.1} %", s * 100.0),
            None => "—".into(),
        }
    }

    /// `min–max` with `decimals` decimals; the value alone for a single run.
    pub fn range_cell(&self, decimals: usize) -> String {
        if self.runs > 1 {
            format!("{:.*}–{:.*}", decimals, self.min, decimals, self.max)
        } else {
            format!("{:.*}", decimals, self.median)
        }
    }
}

/// The order in which `repeats` runs of each of `cells` cells are made: `(repeat, cell)` pairs, repeats
/// counted from 1, the cells interleaved (every cell once, then every cell again).
pub fn interleaved(cells: usize, repeats: u32) -> Vec<(u32, usize)> {
    (1..=repeats).flat_map(|r| (0..cells).map(move |c| (r, c))).collect()
}

/// The footnote of a table with flagged rows: `subject` (`The p50 of a row marked`) moved more than the flag's
/// spread between repeats, taken over the runs' `figures` (`p50s`).
pub fn flag_note(subject: &str, figures: &str) -> String {
    format!(
        "{FLAG} {subject} moved more than {:.0} % between repeats ((max − min) / median of the runs' {figures}): the \
         machine was not steady enough for these figures to be trusted to better than that.",
        FLAG_SPREAD * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max_and_spread() {
        let s = Spread::of(&[20.0, 18.0, 19.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.runs), (19.0, 18.0, 20.0, 3));
        assert!((s.spread.unwrap() - 2.0 / 19.0).abs() < 1e-12);
        assert!(s.flagged(), "10.5 % is above the flag");
        assert_eq!(s.spread_cell(), "10.5 % !");
        assert_eq!(s.range_cell(1), "18.0–20.0");
        let s = Spread::of(&[10.0, 11.0, 10.5, 10.2]).unwrap();
        assert_eq!(s.median, 10.35);
        assert!(!s.flagged());
        assert_eq!(s.spread_cell(), "9.7 %");
    }

    #[test]
    fn one_run_has_no_spread_and_none_has_no_figure() {
        let s = Spread::of(&[42.0]).unwrap();
        assert_eq!((s.median, s.spread), (42.0, None));
        assert!(!s.flagged());
        assert_eq!(s.spread_cell(), "—");
        assert_eq!(s.range_cell(0), "42");
        assert!(Spread::of(&[]).is_none());
        assert!(Spread::of(&[f64::NAN]).is_none());
    }

    #[test]
    fn cells_are_interleaved_not_grouped() {
        assert_eq!(interleaved(3, 2), [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]);
        assert!(interleaved(2, 0).is_empty());
    }
}
