//! Routed throughput against direct, with a DDS program partita did not write (`partita bench router`): Cyclone's
//! `ddsperf pub` floods its data topic (reliable, keep-all: nothing may be lost) and `ddsperf sub` counts what
//! arrives, once on one domain (direct) and once with the publisher on one domain, the subscriber on another and
//! `partita route` between them (routed), the two interleaved run by run.
//!
//! Besides the rates the run takes what explains them: the CPU each process used per sample received (from
//! `/proc/PID/stat` over the measured seconds), the router's threads, and its resident memory. On a machine with
//! few CPUs a routed flood is bounded by CPU: the three processes share the CPUs the direct pair had, so the
//! report gives the ceiling `CPUs / (CPU per sample of publisher + router + subscriber)` beside the rate.
//!
//! Network safety: every process joins its domain through an explicit loopback configuration
//! ([`partita_dds::DomainConfig::loopback`]), inside the private network namespace the command enters first.
use crate::error::BenchError;
use partita_dds::DomainConfig;
use serde::Serialize;
use std::path::Path;
use crate::ddsperf::Killed;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One flood of one size, direct or routed.
#[derive(Debug, Clone, Serialize)]
pub struct FloodRun {
    pub mode: &'static str,
    pub size: usize,
    /// Which run of this cell, from 1.
    pub repeat: u32,
    /// Mean rate over the measured seconds (the first and last second of the flood left out), samples/s.
    pub samples_per_s: f64,
    pub megabits_per_s: f64,
    /// Samples the subscriber received over the whole flood, and lost by its own count (sequence gaps).
    pub received: u64,
    pub lost: u64,
    /// CPU time (user + system) per sample received over the measured seconds, µs.
    pub pub_cpu_us: f64,
    pub sub_cpu_us: f64,
    pub router_cpu_us: Option<f64>,
    /// Threads of the router process while it forwarded.
    pub router_threads: Option<usize>,
    /// The router's largest resident memory while it forwarded, KiB.
    pub router_rss_kib_max: Option<u64>,
    /// CPUs of this machine (the processes may use any of them).
    pub cpus: usize,
}

impl FloodRun {
    /// The rate the CPUs allow when every sample costs what this run's processes spent: CPUs over the sum of
    /// the CPU per sample, samples/s.
    pub fn cpu_ceiling(&self) -> f64 {
        let per_sample = self.pub_cpu_us + self.sub_cpu_us + self.router_cpu_us.unwrap_or(0.0);
        if per_sample > 0.0 {
            self.cpus as f64 * 1e6 / per_sample
        } else {
            0.0
        }
    }
}

/// CPU time (user + system) a process has used so far, s; 0 once it is gone.
fn cpu_s(pid: u32) -> f64 {
    crate::flood::cpu_seconds(pid).unwrap_or(0.0)
}

fn err(reason: String) -> BenchError {
    BenchError::Server { transport: "router".into(), reason }
}

fn ddsperf(domain: u32, args: &[&str]) -> Result<Killed, BenchError> {
    let uri = DomainConfig::loopback(domain).to_cyclone_config().map_err(|e| err(e.to_string()))?;
    let child = Command::new(crate::ddsperf::PROGRAM)
        .args(["-i", &domain.to_string()])
        .args(args)
        .env("CYCLONEDDS_URI", uri)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| err(format!("starting ddsperf {} (Debian package cyclonedds-tools): {e}", args.join(" "))))?;
    Ok(Killed(child))
}

/// One line of `ddsperf sub`'s output per second: `… size S total T lost L delta D lost L rate R kS/s M Mb/s …`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SubLine {
    pub total: u64,
    pub lost: u64,
    pub rate_ks: f64,
    pub mbps: f64,
}

pub fn parse_sub_line(line: &str) -> Option<SubLine> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let after = |key: &str| w.iter().position(|x| *x == key).and_then(|i| w.get(i + 1));
    let rate_at = w.iter().position(|x| *x == "rate")?;
    Some(SubLine {
        total: after("total")?.parse().ok()?,
        lost: after("lost")?.parse().ok()?,
        rate_ks: w.get(rate_at + 1)?.parse().ok()?,
        mbps: w.get(rate_at + 3)?.parse().ok()?,
    })
}

/// The router's configuration: both ways between the two domains (ddsperf matches its peers' ping and pong
/// endpoints too), with statistics rarely.
fn router_config(a: u32, b: u32) -> String {
    format!(
        "name = \"bench\"\nstats_period = \"60s\"\n[[side]]\nname = \"pub\"\ndomain = {a}\n[[side]]\nname = \"sub\"\ndomain = {b}\n\
         [[route]]\nfrom = \"pub\"\nto = \"sub\"\nboth_ways = true\n"
    )
}

/// Runs one flood of `seconds` (at least 4) with samples of `size` bytes; routed when `program` (the partita
/// binary, for `partita route`) is given.
pub fn flood(size: usize, seconds: u32, repeat: u32, routed: Option<&Path>, domain: u32) -> Result<FloodRun, BenchError> {
    let seconds = seconds.max(4);
    let (a, b) = (domain, if routed.is_some() { domain + 1 } else { domain });
    let mut router = None;
    let mut config_file = None;
    if let Some(program) = routed {
        let path = std::env::temp_dir().join(format!("partita-bench-router-{}-{a}.toml", std::process::id()));
        std::fs::write(&path, router_config(a, b)).map_err(|e| err(format!("writing {}: {e}", path.display())))?;
        let child = Command::new(program)
            .args(["route", &path.to_string_lossy()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| err(format!("starting partita route: {e}")))?;
        router = Some(Killed(child));
        config_file = Some(path);
        std::thread::sleep(Duration::from_millis(500));
    }
    let result = (|| {
        let total = seconds + 2;
        let mut sub = ddsperf(b, &["-D", &total.to_string(), "-k", "all", "sub"])?;
        std::thread::sleep(Duration::from_millis(500));
        let size_arg = size.max(crate::ddsperf::MIN_SIZE).to_string();
        let publisher = ddsperf(a, &["-D", &seconds.to_string(), "-k", "all", "pub", "size", &size_arg])?;
        let pids = (publisher.0.id(), sub.0.id(), router.as_ref().map(|r: &Killed| r.0.id()));
        // The measured seconds: from 1.5 s after the publisher started (discovery, the router's routes) to 0.5 s
        // before it ends.
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(1500));
        let cpu0 = (cpu_s(pids.0), cpu_s(pids.1), pids.2.map(cpu_s));
        let t0 = Instant::now();
        let mut threads = None;
        let mut rss_max = None;
        while started.elapsed() < Duration::from_secs_f64(seconds as f64 - 0.5) {
            std::thread::sleep(Duration::from_millis(100));
            if let Some(pid) = pids.2 {
                threads = std::fs::read_dir(format!("/proc/{pid}/task")).ok().map(|d| d.count()).or(threads);
                rss_max = crate::flood::rss_kib(pid).max(rss_max);
            }
        }
        let cpu1 = (cpu_s(pids.0), cpu_s(pids.1), pids.2.map(cpu_s));
        let window = t0.elapsed().as_secs_f64();
        let mut publisher = publisher;
        let _ = publisher.0.wait();
        let out = wait_output(&mut sub, Duration::from_secs(total as u64 + 10))?;
        let lines: Vec<SubLine> = out.lines().filter_map(parse_sub_line).collect();
        // ddsperf prints a line per second; the first and the last second are partial.
        let steady: Vec<&SubLine> = lines.iter().skip(1).take(lines.len().saturating_sub(2)).collect();
        if steady.is_empty() {
            return Err(err(format!("ddsperf sub reported no whole second of data ({} lines):\n{out}", lines.len())));
        }
        let rate = steady.iter().map(|l| l.rate_ks).sum::<f64>() / steady.len() as f64 * 1e3;
        let mbps = steady.iter().map(|l| l.mbps).sum::<f64>() / steady.len() as f64;
        let last = lines.last().copied().unwrap_or(SubLine { total: 0, lost: 0, rate_ks: 0.0, mbps: 0.0 });
        let samples = rate * window;
        let per = |c0: f64, c1: f64| if samples > 0.0 { (c1 - c0) * 1e6 / samples } else { 0.0 };
        Ok(FloodRun {
            mode: if routed.is_some() { "routed" } else { "direct" },
            size,
            repeat,
            samples_per_s: rate,
            megabits_per_s: mbps,
            received: last.total,
            lost: lines.iter().map(|l| l.lost).max().unwrap_or(0),
            pub_cpu_us: per(cpu0.0, cpu1.0),
            sub_cpu_us: per(cpu0.1, cpu1.1),
            router_cpu_us: cpu0.2.zip(cpu1.2).map(|(c0, c1)| per(c0, c1)),
            router_threads: threads,
            router_rss_kib_max: rss_max,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        })
    })();
    drop(router);
    if let Some(p) = config_file {
        let _ = std::fs::remove_file(p);
    }
    result
}

fn wait_output(child: &mut Killed, limit: Duration) -> Result<String, BenchError> {
    use std::io::Read;
    let mut out = child.0.stdout.take().ok_or_else(|| err("ddsperf sub's output is not piped".into()))?;
    let end = Instant::now() + limit;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    loop {
        match child.0.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.0.kill();
                break;
            }
        }
    }
    reader.join().map_err(|_| err("reading ddsperf sub's output".into()))
}

/// The report: per size, direct and routed (medians over the runs), their ratio, and what the CPUs allow.
pub fn markdown(runs: &[FloodRun], seconds: u32) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let _ = writeln!(t, "# Routed throughput against direct (`ddsperf pub` → `ddsperf sub`, reliable, keep-all)\n");
    let _ = writeln!(t, "{} s floods, the first and last second left out; medians over the runs; CPU in µs per sample received.\n", seconds);
    let _ = writeln!(t, "| size | direct samples/s | routed samples/s | routed / direct | lost (direct, routed) | CPU pub+sub direct | CPU pub+sub+router routed | router CPU | CPU ceiling routed | router threads | router RSS max |");
    let _ = writeln!(t, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut sizes: Vec<usize> = runs.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for size in sizes {
        let of = |mode: &str| runs.iter().filter(|r| r.size == size && r.mode == mode).collect::<Vec<_>>();
        let (d, r) = (of("direct"), of("routed"));
        let med = |v: Vec<f64>| median(v);
        let (dr, rr) = (med(d.iter().map(|x| x.samples_per_s).collect()), med(r.iter().map(|x| x.samples_per_s).collect()));
        let lost = (d.iter().map(|x| x.lost).sum::<u64>(), r.iter().map(|x| x.lost).sum::<u64>());
        let dc = med(d.iter().map(|x| x.pub_cpu_us + x.sub_cpu_us).collect());
        let rc = med(r.iter().map(|x| x.pub_cpu_us + x.sub_cpu_us + x.router_cpu_us.unwrap_or(0.0)).collect());
        let router = med(r.iter().filter_map(|x| x.router_cpu_us).collect());
        let ceiling = med(r.iter().map(|x| x.cpu_ceiling()).collect());
        let threads = r.iter().filter_map(|x| x.router_threads).max().map_or("—".into(), |n| n.to_string());
        let rss = r.iter().filter_map(|x| x.router_rss_kib_max).max().map_or("—".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        let ratio = if dr > 0.0 { rr / dr } else { 0.0 };
        let _ = writeln!(
            t,
            "| {size} | {dr:.0} | {rr:.0} | **{ratio:.2}** | {}, {} | {dc:.2} | {rc:.2} | {router:.2} | {ceiling:.0} | {threads} | {rss} |",
            lost.0, lost.1
        );
    }
    t
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sub_line_gives_total_lost_and_rate() {
        let l = "[27890] 2.000  size 65536 total 10677 lost 0 delta 7312 lost 0 rate 7.31 kS/s 3833.72 Mb/s (1.07 kS/s 559.80 Mb/s)";
        assert_eq!(parse_sub_line(l), Some(SubLine { total: 10677, lost: 0, rate_ks: 7.31, mbps: 3833.72 }));
        assert_eq!(parse_sub_line("[27890] 1.000  rss:9.3MB vcsw:6279 ivcsw:2759 tev:0%+1% recvUC:7%+9%"), None);
    }

    #[test]
    fn the_report_has_one_row_per_size_whatever_the_order_of_the_runs() {
        let run = |mode: &'static str, size: usize| FloodRun {
            mode,
            size,
            repeat: 1,
            samples_per_s: if mode == "direct" { 100.0 } else { 50.0 },
            megabits_per_s: 0.0,
            received: 0,
            lost: 0,
            pub_cpu_us: 1.0,
            sub_cpu_us: 1.0,
            router_cpu_us: (mode == "routed").then_some(2.0),
            router_threads: None,
            router_rss_kib_max: None,
            cpus: 2,
        };
        let runs = [run("direct", 1024), run("routed", 1024), run("direct", 65536), run("routed", 65536), run("direct", 1024), run("routed", 1024)];
        let md = markdown(&runs, 8);
        assert_eq!(md.lines().filter(|l| l.starts_with("| 1024 ")).count(), 1, "{md}");
        assert_eq!(md.lines().filter(|l| l.starts_with("| 65536 ")).count(), 1, "{md}");
        assert!(md.contains("**0.50**"), "{md}");
    }

    #[test]
    fn the_ceiling_is_the_cpus_over_the_cpu_per_sample() {
        let r = FloodRun {
            mode: "routed",
            size: 1024,
            repeat: 1,
            samples_per_s: 1.0,
            megabits_per_s: 0.0,
            received: 0,
            lost: 0,
            pub_cpu_us: 3.0,
            sub_cpu_us: 3.0,
            router_cpu_us: Some(4.0),
            router_threads: Some(13),
            router_rss_kib_max: None,
            cpus: 2,
        };
        assert!((r.cpu_ceiling() - 200_000.0).abs() < 1e-6);
    }
}
