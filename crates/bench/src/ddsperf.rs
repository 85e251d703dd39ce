//! Cyclone DDS's own `ddsperf` as a reference transport: `ddsperf pong` and `ddsperf ping` processes run in the
//! same benchmark, on loopback only, so partita's DDS figures can be compared with Cyclone's tool.
//!
//! What ddsperf measures and how it is converted:
//! - ddsperf prints, once per second, statistics of that second: `mean`, `min`, `50%`, `90%`, `99%`, `max` and
//!   `cnt`. Its latencies are **half the round trip** (RTT/2); partita multiplies every figure by 2 to report
//!   round-trip times like its own drivers.
//! - ddsperf has no operation count, only a duration (`-D`): partita runs it for whole seconds, enough for about
//!   `--count` pings at the rate observed (closed loop) or at `--rate`, discards the first reported second as
//!   warm-up, and merges the remaining seconds: min and max exactly, mean weighted by count, percentiles as the
//!   count-weighted mean of the per-second percentiles (an approximation; σ and p99.9 are not available).
//! - The payload is ddsperf's `size S` of its default `KS` topic (sequence number, key, octet sequence), which
//!   counts its 12-byte fixed part and cannot be below 12: sizes under 12 run as 12.
//!
//! Network safety: both processes get `CYCLONEDDS_URI` with the loopback interface only, multicast disabled and
//! 127.0.0.1 as the only peer, and a domain id derived from the pid so parallel runs do not cross.
use crate::error::BenchError;
use crate::rr::{RrConfig, ScenarioResult};
use serde::Serialize;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub const PROGRAM: &str = "ddsperf";
/// Largest payload partita hands to ddsperf.
pub const MAX_SIZE: usize = 8 * 1024 * 1024;
/// ddsperf's KS topic has a 12-byte fixed part.
pub const MIN_SIZE: usize = 12;
/// Rough closed-loop rate used to size the run (ddsperf on loopback does tens of thousands per second).
const ASSUMED_CLOSED_LOOP_HZ: f64 = 20_000.0;

/// Merged figures of a ddsperf run, already converted to round-trip µs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DdsperfSummary {
    pub count: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    /// The `size` given to ddsperf.
    pub ddsperf_size: usize,
    pub domain_id: u32,
    /// The Debian package version of `cyclonedds-tools`, when dpkg knows it.
    pub ddsperf_version: Option<String>,
    pub intervals_used: usize,
    pub intervals_discarded: usize,
    pub note: String,
}

/// One per-second line of `ddsperf ping`, as printed (RTT/2, µs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub cnt: u64,
}

fn micros(token: &str) -> Option<f64> {
    let (num, scale) = if let Some(v) = token.strip_suffix("us") {
        (v, 1.0)
    } else if let Some(v) = token.strip_suffix("ns") {
        (v, 1e-3)
    } else if let Some(v) = token.strip_suffix("ms") {
        (v, 1e3)
    } else if let Some(v) = token.strip_suffix('s') {
        (v, 1e6)
    } else {
        (token, 1.0)
    };
    num.parse::<f64>().ok().map(|x| x * scale)
}

/// Parses a latency line such as
/// `[123] 2.000  host:456 size 64 mean 14.372us min 11.521us 50% 13.675us 90% 16.795us 99% 24.991us max 648.696us cnt 34607`.
pub fn parse_line(line: &str) -> Option<Interval> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    let get = |key: &str| toks.iter().position(|&t| t == key).and_then(|i| toks.get(i + 1)).copied();
    Some(Interval {
        mean: micros(get("mean")?)?,
        min: micros(get("min")?)?,
        p50: micros(get("50%")?)?,
        p90: micros(get("90%")?)?,
        p99: micros(get("99%")?)?,
        max: micros(get("max")?)?,
        cnt: get("cnt")?.parse().ok()?,
    })
}

/// Merges per-second intervals into round-trip figures (×2).
pub fn merge(intervals: &[Interval]) -> Option<(u64, f64, f64, f64, f64, f64, f64)> {
    let n: u64 = intervals.iter().map(|i| i.cnt).sum();
    if n == 0 {
        return None;
    }
    let w = |f: fn(&Interval) -> f64| intervals.iter().map(|i| f(i) * i.cnt as f64).sum::<f64>() / n as f64;
    let min = intervals.iter().filter(|i| i.cnt > 0).map(|i| i.min).fold(f64::INFINITY, f64::min);
    let max = intervals.iter().filter(|i| i.cnt > 0).map(|i| i.max).fold(f64::NEG_INFINITY, f64::max);
    Some((n, 2.0 * min, 2.0 * w(|i| i.mean), 2.0 * max, 2.0 * w(|i| i.p50), 2.0 * w(|i| i.p90), 2.0 * w(|i| i.p99)))
}

/// The Cyclone configuration for both ddsperf processes: loopback only, no multicast, 127.0.0.1 as the peer.
pub fn loopback_config() -> String {
    concat!(
        "<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface name=\"lo\"/></Interfaces>",
        "<AllowMulticast>false</AllowMulticast></General><Discovery><ParticipantIndex>auto</ParticipantIndex>",
        "<MaxAutoParticipantIndex>20</MaxAutoParticipantIndex><Peers><Peer address=\"127.0.0.1\"/></Peers>",
        "</Discovery></Domain></CycloneDDS>"
    )
    .to_string()
}

/// A domain id for this run: 1..=200, from the pid (Cyclone's port mapping allows ids up to 232).
pub fn domain_id() -> u32 {
    1 + std::process::id() % 200
}

/// The installed `cyclonedds-tools` version (ddsperf has no version option).
pub fn version() -> Option<String> {
    let out = Command::new("dpkg-query").args(["-W", "-f", "${Version}", "cyclonedds-tools"]).output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// A child process killed by its pid and reaped when dropped.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How ddsperf hands samples to its ping and pong code: its default, a listener called on Cyclone's
/// delivery thread, or a waitset and an application thread (`ping ... waitset`, `pong waitset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Listener,
    Waitset,
}

impl Trigger {
    /// The transport name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Listener => "ddsperf",
            Trigger::Waitset => "ddsperf-waitset",
        }
    }
}

/// Runs `ddsperf pong` and `ddsperf ping` for one payload size; `repeat` counts the cell's runs from 1. Both
/// inherit this process's scheduling class; being another project's program, they do not lock their memory.
pub fn run(size: usize, repeat: u32, cfg: &RrConfig, stop: &AtomicBool, trigger: Trigger) -> Result<ScenarioResult, BenchError> {
    let started = partita_lab::machine::now_rfc3339();
    let watch = partita_lab::machine::Watch::start();
    let dsize = size.max(MIN_SIZE);
    let domain = domain_id();
    let uri = loopback_config();
    let rate = cfg.rate_hz.unwrap_or(ASSUMED_CLOSED_LOOP_HZ);
    // ddsperf prints its first latency line at t = 2 s (the first second goes to start-up and discovery), so
    // `-D S` yields S − 1 lines: one second of warm-up (discarded) plus enough whole seconds for `count` pings.
    let seconds = 2 + ((cfg.count as f64 / rate).ceil() as u64).max(1);
    let spawn = |args: Vec<String>, output: Stdio, errors: Stdio| {
        Command::new(PROGRAM)
            .args(&args)
            .env("CYCLONEDDS_URI", &uri)
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(errors)
            .spawn()
            .map_err(|e| BenchError::Ddsperf(format!("starting {PROGRAM} {}: {e}", args.join(" "))))
    };
    let dom = domain.to_string();
    let mut pong_args: Vec<String> = vec!["-i".into(), dom.clone(), "pong".into()];
    if trigger == Trigger::Waitset {
        pong_args.push("waitset".into());
    }
    let pong = Killed(spawn(pong_args, Stdio::null(), Stdio::null())?);
    let mut ping_args = vec![
        "-i".into(),
        dom,
        "-D".into(),
        seconds.to_string(),
        "-Qminmatch:1".into(),
        "-Qinitwait:10".into(),
        "ping".into(),
    ];
    if let Some(r) = cfg.rate_hz {
        ping_args.push(format!("{r}Hz"));
    }
    ping_args.extend(["size".into(), dsize.to_string()]);
    if trigger == Trigger::Waitset {
        ping_args.push("waitset".into());
    }
    let mut ping = Killed(spawn(ping_args.clone(), Stdio::piped(), Stdio::piped())?);
    let stdout = ping.0.stdout.take().expect("piped stdout");
    let mut intervals = Vec::new();
    let mut text = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| BenchError::Ddsperf(format!("reading ping output: {e}")))?;
        if stop.load(Ordering::Relaxed) {
            return Err(BenchError::Interrupted);
        }
        if let Some(i) = parse_line(&line) {
            intervals.push(i);
        }
        text.push_str(&line);
        text.push('\n');
    }
    let status = ping.0.wait().map_err(|e| BenchError::Ddsperf(format!("waiting for ping: {e}")))?;
    drop(pong);
    if !status.success() {
        let mut err = String::new();
        if let Some(mut e) = ping.0.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        return Err(BenchError::Ddsperf(format!(
            "`{PROGRAM} {}` exited with {status}: {}{}",
            ping_args.join(" "),
            text.trim(),
            err.trim()
        )));
    }
    if intervals.len() < 2 {
        return Err(BenchError::Ddsperf(format!(
            "`{PROGRAM} {}` printed {} latency interval(s), at least 2 are needed (one is warm-up): {}",
            ping_args.join(" "),
            intervals.len(),
            text.trim()
        )));
    }
    let discarded = 1;
    let used = &intervals[discarded..];
    let merged = merge(used);
    let warmup_done = intervals.first().map(|i| i.cnt).unwrap_or(0);
    let reference = merged.map(|(count, min, mean, max, p50, p90, p99)| DdsperfSummary {
        count,
        min_us: min,
        mean_us: mean,
        max_us: max,
        p50_us: p50,
        p90_us: p90,
        p99_us: p99,
        ddsperf_size: dsize,
        domain_id: domain,
        ddsperf_version: version(),
        intervals_used: used.len(),
        intervals_discarded: discarded,
        note: format!(
            "ddsperf prints RTT/2; figures shown ×2 as round trips. {} one-second intervals merged (first discarded \
             as warm-up); percentiles are count-weighted means of per-second percentiles; σ and P99.9 unavailable; \
             ddsperf size {dsize}.",
            used.len()
        ),
    });
    std::thread::sleep(Duration::from_millis(10));
    Ok(ScenarioResult {
        scenario: format!("{} {}", trigger.name(), crate::size::format_size(size)),
        transport: trigger.name().into(),
        size,
        repeat,
        mode: cfg.mode().to_string(),
        warmup_requested: cfg.warmup,
        warmup_done,
        warmup_lost: 0,
        count_requested: cfg.count,
        lost: 0,
        started,
        finished: partita_lab::machine::now_rfc3339(),
        stats: None,
        reference,
        server_iterations_per_us: None,
        samples_ns: None,
        disturbance: Some(watch.stop()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "[23876] 2.000  vm:23875 size 64 mean 14.372us min 11.521us 50% 13.675us 90% 16.795us 99% 24.991us max 648.696us cnt 34607";

    #[test]
    fn parses_a_latency_line_and_ignores_others() {
        let i = parse_line(LINE).unwrap();
        assert_eq!(i.mean, 14.372);
        assert_eq!(i.min, 11.521);
        assert_eq!(i.p50, 13.675);
        assert_eq!(i.p90, 16.795);
        assert_eq!(i.p99, 24.991);
        assert_eq!(i.max, 648.696);
        assert_eq!(i.cnt, 34607);
        assert!(parse_line("[23876] 2.000  rss:7.7MB vcsw:33304 ivcsw:1338 recvUC:16%+37%").is_none());
        assert!(parse_line("[23876] participant vm:23876: new (self)").is_none());
    }

    #[test]
    fn merge_doubles_half_round_trips() {
        let a = Interval { mean: 10.0, min: 5.0, p50: 9.0, p90: 12.0, p99: 20.0, max: 100.0, cnt: 1 };
        let b = Interval { mean: 20.0, min: 8.0, p50: 19.0, p90: 22.0, p99: 30.0, max: 50.0, cnt: 3 };
        let (n, min, mean, max, p50, p90, p99) = merge(&[a, b]).unwrap();
        assert_eq!(n, 4);
        assert_eq!(min, 10.0);
        assert_eq!(max, 200.0);
        assert_eq!(mean, 2.0 * (10.0 + 60.0) / 4.0);
        assert_eq!(p50, 2.0 * (9.0 + 57.0) / 4.0);
        assert_eq!(p90, 2.0 * (12.0 + 66.0) / 4.0);
        assert_eq!(p99, 2.0 * (20.0 + 90.0) / 4.0);
        assert!(merge(&[]).is_none());
    }

    #[test]
    fn configuration_is_loopback_only() {
        let c = loopback_config();
        assert!(c.contains("<NetworkInterface name=\"lo\"/>"));
        assert!(c.contains("<AllowMulticast>false</AllowMulticast>"));
        assert!(c.contains("<Peer address=\"127.0.0.1\"/>"));
        assert!((1..=200).contains(&domain_id()));
    }
}
