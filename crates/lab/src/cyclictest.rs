//! The machine's own wake-up floor: Debian's `cyclictest` (rt-tests) on one CPU, its histogram read back as
//! percentiles, so that partita's window-start lateness can be reported beside it.
use partita_os::cpu_latency::CpuLatencyHold;
use serde::Serialize;
use std::process::Command;
use std::time::Duration;

/// The histogram's range, µs: a wake-up later than this counts as an overflow (its value is still the max).
pub const HISTOGRAM_US: u32 = 100_000;

#[derive(Debug, Clone, Copy)]
pub struct CyclicConfig {
    pub cpu: usize,
    /// SCHED_FIFO priority (1..=99).
    pub priority: u8,
    pub interval_us: u32,
    pub duration: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CyclicResult {
    pub samples: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Wake-ups beyond the histogram's range.
    pub overflows: u64,
}

/// Runs cyclictest with one thread pinned to `cfg.cpu`, memory locked, and reads its histogram.
///
/// cyclictest holds `/dev/cpu_dma_latency` at 0 µs itself; on a kernel without a cpuidle driver that leaves
/// idle CPUs halting, so the run also holds a bound of 0 through [`CpuLatencyHold`], whose idle pollers keep the
/// CPUs polling as the request means, and as they do while a partita system or benchmark holds its bound: the
/// floor is measured under the same idle policy as the executor it is compared with.
pub fn run(cfg: &CyclicConfig) -> Result<CyclicResult, String> {
    if !(1..=99).contains(&cfg.priority) || cfg.interval_us == 0 || cfg.duration.as_secs() == 0 {
        return Err(format!("cyclictest: priority {} (1..=99), interval {} µs (> 0) and duration {:?} (≥ 1 s)", cfg.priority, cfg.interval_us, cfg.duration));
    }
    let _polling = CpuLatencyHold::new(0).map_err(|e| format!("cyclictest: holding the wake-up latency bound: {e}"))?;
    let out = Command::new("cyclictest")
        .args(["-q", "-m", "-t", "1", "-p", &cfg.priority.to_string(), "-a", &cfg.cpu.to_string(), "-i", &cfg.interval_us.to_string()])
        .args(["-D", &cfg.duration.as_secs().to_string(), "-h", &HISTOGRAM_US.to_string()])
        .output()
        .map_err(|e| format!("cyclictest: {e} (Debian package rt-tests; scripts/setup.sh installs it)"))?;
    if !out.status.success() {
        return Err(format!("cyclictest failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    parse_histogram(&String::from_utf8_lossy(&out.stdout))
}

/// Percentiles from cyclictest's `-h` output (`bucket count` lines, then `# Max Latencies:` and
/// `# Histogram Overflows:`). The nearest-rank percentile over the buckets; overflows rank above every bucket.
pub fn parse_histogram(text: &str) -> Result<CyclicResult, String> {
    let mut buckets: Vec<(u64, u64)> = Vec::new();
    let (mut max, mut overflows) = (None, 0u64);
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("# Max Latencies:") {
            max = v.split_whitespace().next().and_then(|m| m.parse::<u64>().ok());
        } else if let Some(v) = line.strip_prefix("# Histogram Overflows:") {
            overflows = v.split_whitespace().next().and_then(|m| m.parse().ok()).unwrap_or(0);
        } else if !line.starts_with('#') {
            let mut w = line.split_whitespace();
            if let (Some(Ok(b)), Some(Ok(c))) = (w.next().map(str::parse::<u64>), w.next().map(str::parse::<u64>)) {
                buckets.push((b, c));
            }
        }
    }
    let max = max.ok_or("cyclictest printed no `# Max Latencies` line")?;
    let samples = buckets.iter().map(|b| b.1).sum::<u64>() + overflows;
    if samples == 0 {
        return Err("cyclictest measured no wake-up".into());
    }
    let rank = |q: f64| {
        let want = ((samples as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for &(b, c) in &buckets {
            seen += c;
            if seen >= want {
                return b as f64;
            }
        }
        max as f64
    };
    Ok(CyclicResult { samples, p50_us: rank(0.5), p99_us: rank(0.99), max_us: max as f64, overflows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_histogram_and_overflows_rank_last() {
        let text = "000009 000050\n000010 000040\n000020 000009\n000400 000001\n# Total: 000000100\n# Max Latencies: 00400\n# Histogram Overflows: 00000\n";
        let r = parse_histogram(text).unwrap();
        assert_eq!((r.samples, r.p50_us, r.p99_us, r.max_us), (100, 9.0, 20.0, 400.0));
        let over = parse_histogram("000005 000098\n# Max Latencies: 150000\n# Histogram Overflows: 00002\n").unwrap();
        assert_eq!((over.samples, over.p50_us, over.p99_us, over.max_us, over.overflows), (100, 5.0, 150000.0, 150000.0, 2), "the 99th of 100 is an overflow");
        let all_over = parse_histogram("000005 000001\n# Max Latencies: 150000\n# Histogram Overflows: 00099\n").unwrap();
        assert_eq!(all_over.p99_us, 150000.0, "overflows rank above every bucket");
        assert!(parse_histogram("nothing").is_err());
        assert!(parse_histogram("# Max Latencies: 00001\n").is_err());
    }
}
