//! `bench ports`' results: the comparisons of one run, the Markdown tables (`table.md`, also printed), and the
//! files `results.json` (everything), `latency.csv`, `throughput.csv`, `comparisons.csv` and, with `--raw`,
//! `raw-<row>.csv`. Each says which measurement setup produced it.
use super::{LatencyRow, Path, PortsConfig, Scenario, ThroughputRow, Write};
use crate::error::BenchError;
use partita_apps::size::format_size;
use partita_lab::machine::{Machine, HOST_NOTE};
use partita_lab::setup::SetupRecord;
use partita_lab::stats::Stats;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path as FsPath, PathBuf};

/// The versions of what was measured.
#[derive(Debug, Clone, Serialize)]
pub struct Versions {
    pub partita: String,
    pub iceoryx2: String,
}

impl Versions {
    pub fn new(partita: &str) -> Versions {
        Versions { partita: partita.to_string(), iceoryx2: "0.10.0".into() }
    }
}

/// The goal for a comparison, and whether this run met it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Goal {
    /// The value must be at most this.
    pub at_most: f64,
    pub met: bool,
}

/// One figure of a row set against another row's, or against a goal, in this run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The key of the row it belongs to.
    pub row: String,
    /// What it is, as the tables name it: `sampling p99 / iceoryx2 polling p99`.
    pub what: String,
    pub value: f64,
    /// `×` for a ratio, `µs` for a latency.
    pub unit: &'static str,
    pub goal: Option<Goal>,
}

impl Comparison {
    /// `sampling p99 / iceoryx2 polling p99 = 0.83 (goal ≤ 2: met)`
    pub fn text(&self) -> String {
        let value = match self.unit {
            "µs" => format!("{:.3} µs", self.value),
            _ => format!("{:.2}", self.value),
        };
        let goal = self.goal.map_or(String::new(), |g| {
            let limit = if self.unit == "µs" { format!("{} µs", g.at_most) } else { format!("{}", g.at_most) };
            format!(" (goal ≤ {limit}: {})", if g.met { "met" } else { "not met" })
        });
        format!("{} = {value}{goal}", self.what)
    }
}

/// Everything one run of `bench ports` measured.
#[derive(Debug, Clone, Serialize)]
pub struct PortsReport {
    pub benchmark: String,
    pub clock: String,
    pub method: String,
    pub machine: Machine,
    pub versions: Versions,
    /// How the writer and the reader were scheduled.
    pub setup: SetupRecord,
    pub config: PortsConfig,
    pub started: String,
    pub finished: String,
    pub latency: Vec<LatencyRow>,
    pub throughput: Vec<ThroughputRow>,
    pub comparisons: Vec<Comparison>,
}

pub const CLOCK: &str = "CLOCK_MONOTONIC in both processes (the host's, which every process partition shares): the writer's \
     before it makes a message, the reader's when its read or receive returns it";
pub const METHOD: &str = "two processes, the writer (partita bench ports-peer) pinned to one CPU and the reader to another; \
     ping-pong: the writer sends the next message when the reader has echoed the last one over a second channel of the same \
     kind; only the forward way is measured";

impl PortsReport {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        machine: Machine,
        versions: Versions,
        setup: SetupRecord,
        config: PortsConfig,
        started: String,
        finished: String,
        latency: Vec<LatencyRow>,
        throughput: Vec<ThroughputRow>,
    ) -> PortsReport {
        let comparisons = comparisons(&config, &latency, &throughput);
        PortsReport { benchmark: "ports".into(), clock: CLOCK.into(), method: METHOD.into(), machine, versions, setup, config, started, finished, latency, throughput, comparisons }
    }
}

/// The goals: a sampling port's p99 at most 2 µs and 2× iceoryx2's polled subscriber; a queuing
/// port's blocking receive within 1.2× of iceoryx2's event wake-up and of a bare futex.
const SAMPLING_P99_US: f64 = 2.0;
const SAMPLING_VS_ICEORYX2: f64 = 2.0;
const QUEUING_VS_FLOORS: f64 = 1.2;

/// Every comparison the rows of one run allow, in the order of the rows.
pub fn comparisons(cfg: &PortsConfig, latency: &[LatencyRow], throughput: &[ThroughputRow]) -> Vec<Comparison> {
    let stats = |path, write, size| -> Option<(&str, &Stats)> {
        latency.iter().find(|r| (r.scenario.path, r.scenario.write, r.scenario.size) == (path, write, size)).and_then(|r| r.stats.as_ref().map(|s| (r.key.as_str(), s)))
    };
    let mut out = Vec::new();
    let mut ratio = |row: &str, what: String, value: f64, at_most: Option<f64>| {
        if value.is_finite() {
            out.push(Comparison { row: row.into(), what, value, unit: "×", goal: at_most.map(|l| Goal { at_most: l, met: value <= l }) });
        }
    };
    let small = cfg.latency_size;
    if let Some((row, s)) = stats(Path::SamplingPoll, Write::Copy, small) {
        if let Some((_, i)) = stats(Path::Iceoryx2Poll, Write::Copy, small) {
            ratio(row, "sampling p99 / iceoryx2 polling p99".into(), s.p99_us / i.p99_us, Some(SAMPLING_VS_ICEORYX2));
            ratio(row, "sampling p50 / iceoryx2 polling p50".into(), s.p50_us / i.p50_us, None);
        }
    }
    if let Some((row, q)) = stats(Path::QueuingBlock, Write::Copy, small) {
        for (path, name) in [(Path::Iceoryx2Event, "iceoryx2 event"), (Path::Futex, "futex")] {
            if let Some((_, f)) = stats(path, Write::Copy, small) {
                ratio(row, format!("queuing p50 / {name} p50"), q.p50_us / f.p50_us, Some(QUEUING_VS_FLOORS));
                ratio(row, format!("queuing p99 / {name} p99"), q.p99_us / f.p99_us, Some(QUEUING_VS_FLOORS));
            }
        }
    }
    let large = cfg.largest();
    for (path, name, copy, in_place) in [(Path::SamplingPoll, "sampling", "write", "write_with"), (Path::QueuingBlock, "queuing", "send", "send_with")] {
        if let (Some((row, w)), Some((_, c))) = (stats(path, Write::InPlace, large), stats(path, Write::Copy, large)) {
            let size = format_size(large);
            ratio(row, format!("{name} {in_place} p50 / {copy} p50 at {size}"), w.p50_us / c.p50_us, None);
            ratio(row, format!("{name} {in_place} p99 / {copy} p99 at {size}"), w.p99_us / c.p99_us, None);
        }
    }
    let flood = |write| throughput.iter().find(|r| r.scenario.write == write && r.scenario.size == large);
    if let (Some(w), Some(c)) = (flood(Write::InPlace), flood(Write::Copy)) {
        ratio(&w.key, format!("queuing send_with MB/s / send MB/s at {}", format_size(large)), w.mb_per_s / c.mb_per_s, None);
    }
    // The absolute goal last, beside its row's ratios in the tables.
    if let Some((row, s)) = stats(Path::SamplingPoll, Write::Copy, small) {
        out.push(Comparison { row: row.into(), what: "sampling p99".into(), value: s.p99_us, unit: "µs", goal: Some(Goal { at_most: SAMPLING_P99_US, met: s.p99_us <= SAMPLING_P99_US }) });
    }
    out
}

fn us(x: f64) -> String {
    format!("{x:.3}")
}

/// A CSV field: quoted when it holds a comma or a quote.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// What a row is compared with, for its table cell.
fn compared(report: &PortsReport, sc: &Scenario, key: &str) -> String {
    let texts: Vec<String> = report.comparisons.iter().filter(|c| c.row == key).map(Comparison::text).collect();
    if !texts.is_empty() {
        return texts.join("; ");
    }
    match sc.path {
        Path::Iceoryx2Poll | Path::Iceoryx2Event => "reference".into(),
        Path::Futex => "floor".into(),
        _ => "—".into(),
    }
}

/// The tables of one run: latency, throughput, the goals; each with its caption.
pub fn markdown(report: &PortsReport) -> String {
    let c = &report.config;
    let m = &report.machine;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "One-way latency, µs, from the writer's CLOCK_MONOTONIC timestamp, taken before it makes the message, to the \
         reader's when its read or receive returns it (two processes on one host share CLOCK_MONOTONIC); writer on CPU \
         {}, reader on CPU {}; ping-pong, the writer sending the next message when the reader has echoed the last; {} \
         measured messages per row after {} warm-up, one run per row. {}. {} on {}, {} cores.\n",
        c.writer_cpu, c.reader_cpu, c.count, c.warmup, report.setup.caption, m.cpu_model, m.hostname, m.cores
    );
    let _ = writeln!(t, "| path | size | samples | MIN | AVG | P50 | P99 | P99.9 | MAX | compared in this run | host |");
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|");
    for r in &report.latency {
        let figs = match &r.stats {
            Some(s) => format!("{} | {} | {} | {} | {} | {} | {}", s.count, us(s.min_us), us(s.mean_us), us(s.p50_us), us(s.p99_us), us(s.p99_9_us), us(s.max_us)),
            None => "0 | — | — | — | — | — | —".into(),
        };
        let _ = writeln!(t, "| {} | {} | {figs} | {} | {} |", r.label, format_size(r.scenario.size), compared(report, &r.scenario, &r.key), r.disturbance.note());
    }
    let largest = c.largest();
    let _ = writeln!(
        t,
        "\nThroughput of one queuing channel (slots of {}, depth {}): after {} warm-up messages the writer sends with \
         Timeout::Infinite for {} s, then a message of no bytes that ends the reader's count; the reader receives with \
         Timeout::Infinite. MB = 10⁶ payload bytes; the reader's clock runs from its last warm-up message to the end.\n",
        format_size(largest),
        c.depth,
        c.warmup,
        c.seconds
    );
    let _ = writeln!(t, "| path | size | messages | seconds | messages/s | MB/s | compared in this run | host |");
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---|---|");
    for r in &report.throughput {
        let _ = writeln!(
            t,
            "| {} | {} | {} | {:.3} | {:.0} | {:.1} | {} | {} |",
            r.label,
            format_size(r.scenario.size),
            r.messages,
            r.seconds,
            r.messages_per_s,
            r.mb_per_s,
            compared(report, &r.scenario, &r.key),
            r.disturbance.note()
        );
    }
    let goals: Vec<&Comparison> = report.comparisons.iter().filter(|c| c.goal.is_some()).collect();
    if !goals.is_empty() {
        let _ = writeln!(t, "\nGoals (issue 34), this run:\n");
        let _ = writeln!(t, "| goal | measured | met |");
        let _ = writeln!(t, "|---|---:|---|");
        for g in goals {
            let goal = g.goal.expect("filtered");
            let (limit, value) = if g.unit == "µs" { (format!("{} µs", goal.at_most), format!("{:.3} µs", g.value)) } else { (format!("{}", goal.at_most), format!("{:.2}", g.value)) };
            let _ = writeln!(t, "| {} ≤ {limit} | {value} | {} |", g.what, if goal.met { "yes" } else { "no" });
        }
    }
    let _ = writeln!(t, "\n{HOST_NOTE}");
    t
}

fn write(path: PathBuf, text: &str) -> Result<PathBuf, BenchError> {
    std::fs::write(&path, text).map_err(|source| BenchError::Write { path: path.clone(), source })?;
    Ok(path)
}

fn latency_csv(report: &PortsReport) -> String {
    let mut c = String::from("row,path,write,size,channel_max,depth,samples,min_us,mean_us,max_us,std_us,p50_us,p90_us,p99_us,p99_9_us,q1_us,q3_us,max_jitter_us,steal_pct,host_moved,started,setup\n");
    let setup = field(&report.setup.caption);
    for r in &report.latency {
        let sc = &r.scenario;
        let figs = match &r.stats {
            Some(s) => format!(
                "{},{}",
                s.count,
                [s.min_us, s.mean_us, s.max_us, s.std_us, s.p50_us, s.p90_us, s.p99_us, s.p99_9_us, s.q1_us, s.q3_us, s.max_jitter_us].map(us).join(",")
            ),
            None => format!("0{}", ",".repeat(11)),
        };
        let _ = writeln!(
            c,
            "{},{},{},{},{},{},{figs},{:.2},{},{},{setup}",
            r.key,
            sc.path.name(),
            sc.write.name(),
            sc.size,
            sc.channel_max,
            sc.depth,
            r.disturbance.steal_pct,
            r.disturbance.moved(),
            r.started
        );
    }
    c
}

fn throughput_csv(report: &PortsReport) -> String {
    let mut c = String::from("row,path,write,size,channel_max,depth,warmup,messages,bytes,seconds,messages_per_s,mb_per_s,steal_pct,host_moved,started,setup\n");
    let setup = field(&report.setup.caption);
    for r in &report.throughput {
        let sc = &r.scenario;
        let _ = writeln!(
            c,
            "{},{},{},{},{},{},{},{},{},{:.6},{:.1},{:.3},{:.2},{},{},{setup}",
            r.key,
            sc.path.name(),
            sc.write.name(),
            sc.size,
            sc.channel_max,
            sc.depth,
            r.warmup,
            r.messages,
            r.bytes,
            r.seconds,
            r.messages_per_s,
            r.mb_per_s,
            r.disturbance.steal_pct,
            r.disturbance.moved(),
            r.started
        );
    }
    c
}

fn comparisons_csv(report: &PortsReport) -> String {
    let mut c = String::from("row,comparison,value,unit,goal_at_most,met,setup\n");
    let setup = field(&report.setup.caption);
    for x in &report.comparisons {
        let (limit, met) = x.goal.map_or((String::new(), String::new()), |g| (g.at_most.to_string(), g.met.to_string()));
        let _ = writeln!(c, "{},{},{:.4},{},{limit},{met},{setup}", x.row, field(&x.what), x.value, x.unit);
    }
    c
}

/// Writes every file into `dir` and returns their paths.
pub fn write_all(dir: &FsPath, report: &PortsReport) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let json = serde_json::to_string_pretty(report).expect("the report serializes");
    files.push(write(dir.join("results.json"), &json)?);
    files.push(write(dir.join("latency.csv"), &latency_csv(report))?);
    files.push(write(dir.join("throughput.csv"), &throughput_csv(report))?);
    files.push(write(dir.join("comparisons.csv"), &comparisons_csv(report))?);
    files.push(write(dir.join("table.md"), &markdown(report))?);
    for r in &report.latency {
        if let Some(samples) = &r.samples_ns {
            let mut c = String::from("seq,one_way_ns\n");
            for (seq, ns) in samples {
                let _ = writeln!(c, "{seq},{ns}");
            }
            files.push(write(dir.join(format!("raw-{}.csv", r.key)), &c)?);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::tests::cfg;
    use partita_lab::machine::Disturbance;
    use partita_lab::setup::Setup;

    fn row(sc: Scenario, us: u64) -> LatencyRow {
        LatencyRow {
            key: sc.key(),
            label: sc.label().into(),
            scenario: sc,
            warmup: 0,
            count: 3,
            started: String::new(),
            finished: String::new(),
            stats: Stats::from_ns(&[us * 1000; 3]),
            samples_ns: None,
            disturbance: Disturbance { seconds: 0.1, steal_pct: 0.0, mhz_start: None, mhz_end: None },
        }
    }

    fn flood(sc: Scenario, mb_per_s: f64) -> ThroughputRow {
        ThroughputRow {
            key: sc.key(),
            label: sc.label().into(),
            scenario: sc,
            warmup: 0,
            messages: 10,
            bytes: 10 * sc.size as u64,
            seconds: 1.0,
            messages_per_s: 10.0,
            mb_per_s,
            started: String::new(),
            finished: String::new(),
            disturbance: Disturbance { seconds: 1.0, steal_pct: 0.0, mhz_start: None, mhz_end: None },
        }
    }

    #[test]
    fn every_comparison_names_its_ratio_and_the_goals_are_judged() {
        let c = cfg();
        // sampling 1 µs vs iceoryx2 polling 2 µs; queuing 6 µs vs iceoryx2 event 5 µs and futex 4 µs; in place
        // twice as fast as copy.
        let us = [1, 2, 6, 5, 4, 10, 5, 20, 10];
        let latency: Vec<LatencyRow> = c.latency_scenarios().into_iter().zip(us).map(|(sc, us)| row(sc, us)).collect();
        let throughput: Vec<ThroughputRow> = c.throughput_scenarios().into_iter().zip([10.0, 100.0, 1000.0, 1500.0]).map(|(sc, m)| flood(sc, m)).collect();
        let report = PortsReport::new(Machine::probe(), Versions::new("test"), Setup::Normal.record("test"), c, String::new(), String::new(), latency, throughput);
        let find = |what: &str| report.comparisons.iter().find(|x| x.what == what).unwrap_or_else(|| panic!("{what}: {:?}", report.comparisons));
        let s = find("sampling p99 / iceoryx2 polling p99");
        assert!((s.value - 0.5).abs() < 0.01 && s.goal.unwrap().met, "{s:?}");
        assert_eq!(s.row, "sampling-poll-copy-64");
        let q = find("queuing p50 / iceoryx2 event p50");
        assert!((q.value - 1.2).abs() < 0.01 && q.goal.unwrap().met, "{q:?}");
        let f = find("queuing p50 / futex p50");
        assert!((f.value - 1.5).abs() < 0.01 && !f.goal.unwrap().met, "{f:?}");
        assert!((find("sampling write_with p50 / write p50 at 64KiB").value - 0.5).abs() < 0.01);
        assert!((find("queuing send_with p50 / send p50 at 64KiB").value - 0.5).abs() < 0.01);
        assert!((find("queuing send_with MB/s / send MB/s at 64KiB").value - 1.5).abs() < 0.01);
        let abs = find("sampling p99");
        assert!(abs.unit == "µs" && abs.goal.unwrap().met);

        let md = markdown(&report);
        let line = |start: &str| md.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("{start}: {md}")).to_string();
        assert!(line("| ports sampling: write → polling read | 64 |").contains("sampling p99 / iceoryx2 polling p99 = 0.50 (goal ≤ 2: met)"), "{md}");
        assert!(line("| iceoryx2: publish → polling receive |").contains("| reference |"), "{md}");
        assert!(line("| futex on shared memory").contains("| floor |"), "{md}");
        assert!(line("| queuing p50 / futex p50 ≤ 1.2 |").ends_with("| 1.50 | no |"), "{md}");
        assert!(line("| sampling p99 ≤ 2 µs |").contains("| yes |"), "{md}");
        assert!(md.contains("normal scheduling: SCHED_OTHER"), "{md}");
        // Every CSV row carries the setup.
        for csv in [latency_csv(&report), throughput_csv(&report), comparisons_csv(&report)] {
            assert!(csv.lines().skip(1).all(|l| l.ends_with("\"normal scheduling: SCHED_OTHER, memory not locked, CPU idle states as the machine sets them\"")), "{csv}");
        }
        assert_eq!(latency_csv(&report).lines().count(), 10);
        assert_eq!(throughput_csv(&report).lines().count(), 5);
    }
}
