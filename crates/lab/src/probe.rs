//! The probe application: spins reading CLOCK_MONOTONIC and records the intervals in which it actually ran.
//! A gap larger than a threshold (20 µs by default) between two consecutive readings means the process was
//! not running: frozen, or preempted. Comparing these intervals with the executor's windows shows whether a
//! partition ran outside its windows.
use partita_supervisor::clock::monotonic_ns;
use partita_supervisor::error::{path_err, Result};
use std::io::Write;
use std::path::Path;

/// Intervals `[start, end]` (CLOCK_MONOTONIC ns) of continuous execution.
pub fn spin(duration_ns: u64, gap_ns: u64, max_intervals: usize) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(max_intervals.min(1 << 20));
    let t0 = monotonic_ns();
    let end = t0 + duration_ns;
    let mut start = t0;
    let mut last = t0;
    loop {
        let now = monotonic_ns();
        if now - last > gap_ns {
            if out.len() < max_intervals {
                out.push((start, last));
            }
            start = now;
        }
        last = now;
        if now >= end {
            break;
        }
    }
    out.push((start, last));
    out
}

/// Writes intervals as text, one `start end` pair (ns) per line.
pub fn write_intervals(path: &Path, intervals: &[(u64, u64)]) -> Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(path_err("create", path))?);
    for (a, b) in intervals {
        writeln!(f, "{a} {b}").map_err(path_err("write", path))?;
    }
    f.flush().map_err(path_err("write", path))
}

pub fn read_intervals(path: &Path) -> Result<Vec<(u64, u64)>> {
    let t = std::fs::read_to_string(path).map_err(path_err("read", path))?;
    Ok(t.lines()
        .filter_map(|l| {
            let (a, b) = l.split_once(' ')?;
            Some((a.parse().ok()?, b.trim().parse().ok()?))
        })
        .collect())
}

/// Total length of `runs` falling outside every interval of `allowed` (both sorted, `allowed` disjoint).
pub fn time_outside(runs: &[(u64, u64)], allowed: &[(u64, u64)]) -> u64 {
    let mut outside = 0;
    for &(a, b) in runs {
        let mut covered = 0;
        for &(x, y) in allowed {
            if y <= a || x >= b {
                continue;
            }
            covered += b.min(y) - a.max(x);
        }
        outside += (b - a).saturating_sub(covered);
    }
    outside
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_time_counts_only_uncovered_parts() {
        let allowed = [(100, 200), (300, 400)];
        assert_eq!(time_outside(&[(150, 180)], &allowed), 0);
        assert_eq!(time_outside(&[(150, 250)], &allowed), 50);
        assert_eq!(time_outside(&[(50, 450)], &allowed), 200);
    }
}
