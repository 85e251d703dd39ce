//! `bench ports`' results: the comparisons of one run, the Markdown tables (`table.md`, also printed), and the
//! files `results.json` (everything), `latency.csv` and `throughput.csv` (a line per row: the medians over its
//! runs), `latency-runs.csv` and `throughput-runs.csv` (a line per run), `comparisons.csv` and, with `--raw`,
//! `raw-<row>-r<repeat>.csv`. Each says which measurement setup produced it.
use super::{LatencyFigures, LatencyRow, Path, PortsConfig, Scenario, ThroughputRow, Write};
use crate::error::BenchError;
use partita_apps::size::format_size;
use partita_lab::machine::{Machine, HOST_NOTE};
use partita_lab::repeat::Spread;
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
    /// Of the medians over the runs.
    pub value: f64,
    /// The same, run by run: the ratio within each round of the interleaved runs (or the run's own figure).
    pub per_run: Vec<f64>,
    /// `×` for a ratio, `µs` for a latency.
    pub unit: &'static str,
    pub goal: Option<Goal>,
}

impl Comparison {
    /// `sampling p99 / iceoryx2 polling p99 = 0.83 (runs 0.80–0.91; goal ≤ 2: met)`
    pub fn text(&self) -> String {
        let num = |v: f64| if self.unit == "µs" { format!("{v:.3} µs") } else { format!("{v:.2}") };
        let mut notes = Vec::new();
        if self.per_run.len() > 1 {
            let (lo, hi) = self.per_run.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            notes.push(format!("runs {}–{}", num(lo), num(hi)));
        }
        if let Some(g) = self.goal {
            notes.push(format!("goal ≤ {}: {}", self.limit(g), if g.met { "met" } else { "not met" }));
        }
        let notes = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) };
        format!("{} = {}{notes}", self.what, num(self.value))
    }

    fn limit(&self, g: Goal) -> String {
        if self.unit == "µs" {
            format!("{} µs", g.at_most)
        } else {
            g.at_most.to_string()
        }
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
     kind; only the forward way is measured; rows repeated and interleaved, figures the medians over the runs";

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

/// A figure of a latency row: its median over the runs, and each run's value by its round.
type Figure = fn(&LatencyFigures) -> Option<Spread>;

fn p50(f: &LatencyFigures) -> Option<Spread> {
    f.p50_us
}

fn p99(f: &LatencyFigures) -> Option<Spread> {
    f.p99_us
}

/// Every comparison the rows of one run allow, in the order of the rows.
pub fn comparisons(cfg: &PortsConfig, latency: &[LatencyRow], throughput: &[ThroughputRow]) -> Vec<Comparison> {
    let row = |path, write, size| latency.iter().find(|r| (r.scenario.path, r.scenario.write, r.scenario.size) == (path, write, size));
    let mut out = Vec::new();
    // `a`'s figure over `b`'s: the ratio of the medians, and the ratio within each round both have a run in.
    let mut ratio = |a: &LatencyRow, b: &LatencyRow, what: String, figure: Figure, run_figure: fn(&Stats) -> f64, at_most: Option<f64>| {
        let (Some(x), Some(y)) = (figure(&a.figures), figure(&b.figures)) else { return };
        let value = x.median / y.median;
        if !value.is_finite() {
            return;
        }
        let per_run = a
            .runs
            .iter()
            .filter_map(|ra| {
                let rb = b.runs.iter().find(|rb| rb.repeat == ra.repeat)?;
                Some(run_figure(ra.stats.as_ref()?) / run_figure(rb.stats.as_ref()?))
            })
            .collect();
        out.push(Comparison { row: a.key.clone(), what, value, per_run, unit: "×", goal: at_most.map(|l| Goal { at_most: l, met: value <= l }) });
    };
    let small = cfg.latency_size;
    if let (Some(s), Some(i)) = (row(Path::SamplingPoll, Write::Copy, small), row(Path::Iceoryx2Poll, Write::Copy, small)) {
        ratio(s, i, "sampling p99 / iceoryx2 polling p99".into(), p99, |s| s.p99_us, Some(SAMPLING_VS_ICEORYX2));
        ratio(s, i, "sampling p50 / iceoryx2 polling p50".into(), p50, |s| s.p50_us, None);
    }
    if let Some(q) = row(Path::QueuingBlock, Write::Copy, small) {
        for (path, name) in [(Path::Iceoryx2Event, "iceoryx2 event"), (Path::Futex, "futex")] {
            if let Some(f) = row(path, Write::Copy, small) {
                ratio(q, f, format!("queuing p50 / {name} p50"), p50, |s| s.p50_us, Some(QUEUING_VS_FLOORS));
                ratio(q, f, format!("queuing p99 / {name} p99"), p99, |s| s.p99_us, Some(QUEUING_VS_FLOORS));
            }
        }
    }
    let large = cfg.largest();
    let size = format_size(large);
    for (path, name, copy, in_place) in [(Path::SamplingPoll, "sampling", "write", "write_with"), (Path::QueuingBlock, "queuing", "send", "send_with")] {
        if let (Some(w), Some(c)) = (row(path, Write::InPlace, large), row(path, Write::Copy, large)) {
            ratio(w, c, format!("{name} {in_place} p50 / {copy} p50 at {size}"), p50, |s| s.p50_us, None);
            ratio(w, c, format!("{name} {in_place} p99 / {copy} p99 at {size}"), p99, |s| s.p99_us, None);
        }
    }
    let flood = |write| throughput.iter().find(|r| r.scenario.write == write && r.scenario.size == large);
    if let (Some(w), Some(c)) = (flood(Write::InPlace), flood(Write::Copy)) {
        if let (Some(x), Some(y)) = (w.mb_per_s, c.mb_per_s) {
            let per_run = w.runs.iter().filter_map(|rw| c.runs.iter().find(|rc| rc.repeat == rw.repeat).map(|rc| rw.mb_per_s / rc.mb_per_s)).collect();
            let value = x.median / y.median;
            if value.is_finite() {
                out.push(Comparison { row: w.key.clone(), what: format!("queuing send_with MB/s / send MB/s at {size}"), value, per_run, unit: "×", goal: None });
            }
        }
    }
    // The absolute goal last, beside its row's ratios in the tables.
    if let Some(s) = row(Path::SamplingPoll, Write::Copy, small) {
        if let Some(p) = s.figures.p99_us {
            let per_run = s.runs.iter().filter_map(|r| r.stats.as_ref().map(|x| x.p99_us)).collect();
            out.push(Comparison {
                row: s.key.clone(),
                what: "sampling p99".into(),
                value: p.median,
                per_run,
                unit: "µs",
                goal: Some(Goal { at_most: SAMPLING_P99_US, met: p.median <= SAMPLING_P99_US }),
            });
        }
    }
    out
}

fn us(x: f64) -> String {
    format!("{x:.3}")
}

fn med(x: &Option<Spread>) -> String {
    x.map_or("—".into(), |s| us(s.median))
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
    let runs = if c.repeat > 1 {
        format!("{} runs per row, the rows interleaved; each figure is the median of the runs' figures", c.repeat)
    } else {
        "one run per row".into()
    };
    let mut t = String::new();
    let _ = writeln!(
        t,
        "One-way latency, µs, from the writer's CLOCK_MONOTONIC timestamp, taken before it makes the message, to the \
         reader's when its read or receive returns it (two processes on one host share CLOCK_MONOTONIC); writer on CPU \
         {}, reader on CPU {}; ping-pong, the writer sending the next message when the reader has echoed the last; {} \
         measured messages per run after {} warm-up; {runs}. {}. {} on {}, {} cores.\n",
        c.writer_cpu, c.reader_cpu, c.count, c.warmup, report.setup.caption, m.cpu_model, m.hostname, m.cores
    );
    let _ = writeln!(t, "| path | size | samples | MIN | AVG | P50 | P99 | P99.9 | MAX | P50 min–max | P50 spread | P99 min–max | compared in this run | host |");
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|");
    let mut flagged = false;
    for r in &report.latency {
        let x = &r.figures;
        flagged |= x.flagged;
        let range = |s: &Option<Spread>| s.map_or("—".into(), |s| s.range_cell(3));
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.label,
            format_size(r.scenario.size),
            x.samples,
            med(&x.min_us),
            med(&x.mean_us),
            med(&x.p50_us),
            med(&x.p99_us),
            med(&x.p99_9_us),
            med(&x.max_us),
            range(&x.p50_us),
            x.p50_us.map_or("—".into(), |s| s.spread_cell()),
            range(&x.p99_us),
            compared(report, &r.scenario, &r.key),
            x.disturbance.map_or("—".into(), |d| d.note())
        );
    }
    if flagged {
        let _ = writeln!(t, "\n{}", partita_lab::repeat::flag_note("The p50 of a row marked", "p50s"));
    }
    let largest = c.largest();
    let _ = writeln!(
        t,
        "\nThroughput of one queuing channel (slots of {}, depth {}): after {} warm-up messages the writer sends with \
         Timeout::Infinite for {} s, then a message of no bytes that ends the reader's count; the reader receives with \
         Timeout::Infinite. MB = 10⁶ payload bytes; the reader's clock runs from its last warm-up message to the end; \
         {runs}.\n",
        format_size(largest),
        c.depth,
        c.warmup,
        c.seconds
    );
    let _ = writeln!(t, "| path | size | messages/s | MB/s | MB/s min–max | MB/s spread | compared in this run | host |");
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---|---|");
    let mut flagged = false;
    for r in &report.throughput {
        flagged |= r.flagged;
        let rate = |s: &Option<Spread>, d: usize| s.map_or("—".into(), |s| format!("{:.*}", d, s.median));
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.label,
            format_size(r.scenario.size),
            rate(&r.messages_per_s, 0),
            rate(&r.mb_per_s, 1),
            r.mb_per_s.map_or("—".into(), |s| s.range_cell(1)),
            r.mb_per_s.map_or("—".into(), |s| s.spread_cell()),
            compared(report, &r.scenario, &r.key),
            r.disturbance.map_or("—".into(), |d| d.note())
        );
    }
    if flagged {
        let _ = writeln!(t, "\n{}", partita_lab::repeat::flag_note("The MB/s of a row marked", "rates"));
    }
    let goals: Vec<&Comparison> = report.comparisons.iter().filter(|c| c.goal.is_some()).collect();
    if !goals.is_empty() {
        let _ = writeln!(t, "\nGoals (issue 34), this run, on the medians over the runs:\n");
        let _ = writeln!(t, "| goal | measured | runs | met |");
        let _ = writeln!(t, "|---|---:|---:|---|");
        for g in goals {
            let goal = g.goal.expect("filtered");
            let num = |v: f64| if g.unit == "µs" { format!("{v:.3} µs") } else { format!("{v:.2}") };
            let spread = if g.per_run.len() > 1 {
                let (lo, hi) = g.per_run.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
                format!("{}–{}", num(lo), num(hi))
            } else {
                "—".into()
            };
            let _ = writeln!(t, "| {} ≤ {} | {} | {spread} | {} |", g.what, g.limit(goal), num(g.value), if goal.met { "yes" } else { "no" });
        }
    }
    let _ = writeln!(t, "\n{HOST_NOTE}");
    t
}

fn write(path: PathBuf, text: &str) -> Result<PathBuf, BenchError> {
    std::fs::write(&path, text).map_err(|source| BenchError::Write { path: path.clone(), source })?;
    Ok(path)
}

/// One line per latency row: the medians over its runs, the p50's and p99's min and max, the flag.
fn latency_csv(report: &PortsReport) -> String {
    let mut c = String::from("row,path,write,size,channel_max,depth,runs,samples,min_us,mean_us,p50_us,p90_us,p99_us,p99_9_us,max_us,p50_min_us,p50_max_us,p99_min_us,p99_max_us,p50_spread,flagged,steal_pct,host_moved,setup\n");
    let setup = field(&report.setup.caption);
    for r in &report.latency {
        let (sc, x) = (&r.scenario, &r.figures);
        let m = |s: &Option<Spread>| s.map(|s| us(s.median)).unwrap_or_default();
        let figs = [&x.min_us, &x.mean_us, &x.p50_us, &x.p90_us, &x.p99_us, &x.p99_9_us, &x.max_us].map(m).join(",");
        let lo_hi = |s: &Option<Spread>| s.map(|s| format!("{},{}", us(s.min), us(s.max))).unwrap_or_else(|| ",".into());
        let spread = x.p50_us.and_then(|p| p.spread).map(|s| format!("{s:.4}")).unwrap_or_default();
        let (steal, moved) = x.disturbance.map(|d| (format!("{:.2}", d.steal_pct), d.moved().to_string())).unwrap_or_default();
        let _ = writeln!(
            c,
            "{},{},{},{},{},{},{},{},{figs},{},{},{spread},{},{steal},{moved},{setup}",
            r.key,
            sc.path.name(),
            sc.write.name(),
            sc.size,
            sc.channel_max,
            sc.depth,
            x.runs,
            x.samples,
            lo_hi(&x.p50_us),
            lo_hi(&x.p99_us),
            x.flagged
        );
    }
    c
}

/// One line per latency run.
fn latency_runs_csv(report: &PortsReport) -> String {
    let mut c = String::from("row,repeat,samples,min_us,mean_us,max_us,std_us,p50_us,p90_us,p99_us,p99_9_us,q1_us,q3_us,max_jitter_us,steal_pct,host_moved,started,setup\n");
    let setup = field(&report.setup.caption);
    for r in &report.latency {
        for run in &r.runs {
            let figs = match &run.stats {
                Some(s) => format!(
                    "{},{}",
                    s.count,
                    [s.min_us, s.mean_us, s.max_us, s.std_us, s.p50_us, s.p90_us, s.p99_us, s.p99_9_us, s.q1_us, s.q3_us, s.max_jitter_us].map(us).join(",")
                ),
                None => format!("0{}", ",".repeat(11)),
            };
            let d = &run.disturbance;
            let _ = writeln!(c, "{},{},{figs},{:.2},{},{},{setup}", r.key, run.repeat, d.steal_pct, d.moved(), run.started);
        }
    }
    c
}

/// One line per throughput row: the medians of its rates, their min and max, the flag.
fn throughput_csv(report: &PortsReport) -> String {
    let mut c = String::from("row,path,write,size,channel_max,depth,warmup,runs,messages_per_s,mb_per_s,mb_per_s_min,mb_per_s_max,mb_per_s_spread,flagged,steal_pct,host_moved,setup\n");
    let setup = field(&report.setup.caption);
    for r in &report.throughput {
        let sc = &r.scenario;
        let msgs = r.messages_per_s.map(|s| format!("{:.1}", s.median)).unwrap_or_default();
        let (mb, lo, hi) = r.mb_per_s.map(|s| (format!("{:.3}", s.median), format!("{:.3}", s.min), format!("{:.3}", s.max))).unwrap_or_default();
        let spread = r.mb_per_s.and_then(|s| s.spread).map(|s| format!("{s:.4}")).unwrap_or_default();
        let (steal, moved) = r.disturbance.map(|d| (format!("{:.2}", d.steal_pct), d.moved().to_string())).unwrap_or_default();
        let _ = writeln!(
            c,
            "{},{},{},{},{},{},{},{},{msgs},{mb},{lo},{hi},{spread},{},{steal},{moved},{setup}",
            r.key,
            sc.path.name(),
            sc.write.name(),
            sc.size,
            sc.channel_max,
            sc.depth,
            r.warmup,
            r.runs.len(),
            r.flagged
        );
    }
    c
}

/// One line per throughput run.
fn throughput_runs_csv(report: &PortsReport) -> String {
    let mut c = String::from("row,repeat,messages,bytes,seconds,messages_per_s,mb_per_s,steal_pct,host_moved,started,setup\n");
    let setup = field(&report.setup.caption);
    for r in &report.throughput {
        for run in &r.runs {
            let d = &run.disturbance;
            let _ = writeln!(
                c,
                "{},{},{},{},{:.6},{:.1},{:.3},{:.2},{},{},{setup}",
                r.key, run.repeat, run.messages, run.bytes, run.seconds, run.messages_per_s, run.mb_per_s, d.steal_pct, d.moved(), run.started
            );
        }
    }
    c
}

fn comparisons_csv(report: &PortsReport) -> String {
    let mut c = String::from("row,comparison,value,runs_min,runs_max,unit,goal_at_most,met,setup\n");
    let setup = field(&report.setup.caption);
    for x in &report.comparisons {
        let (limit, met) = x.goal.map_or((String::new(), String::new()), |g| (g.at_most.to_string(), g.met.to_string()));
        let lo = x.per_run.iter().copied().reduce(f64::min).map(|v| format!("{v:.4}")).unwrap_or_default();
        let hi = x.per_run.iter().copied().reduce(f64::max).map(|v| format!("{v:.4}")).unwrap_or_default();
        let _ = writeln!(c, "{},{},{:.4},{lo},{hi},{},{limit},{met},{setup}", x.row, field(&x.what), x.value, x.unit);
    }
    c
}

/// Writes every file into `dir` and returns their paths.
pub fn write_all(dir: &FsPath, report: &PortsReport) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let json = serde_json::to_string_pretty(report).expect("the report serializes");
    files.push(write(dir.join("results.json"), &json)?);
    files.push(write(dir.join("latency.csv"), &latency_csv(report))?);
    files.push(write(dir.join("latency-runs.csv"), &latency_runs_csv(report))?);
    files.push(write(dir.join("throughput.csv"), &throughput_csv(report))?);
    files.push(write(dir.join("throughput-runs.csv"), &throughput_runs_csv(report))?);
    files.push(write(dir.join("comparisons.csv"), &comparisons_csv(report))?);
    files.push(write(dir.join("table.md"), &markdown(report))?);
    for r in &report.latency {
        for run in &r.runs {
            if let Some(samples) = &run.samples_ns {
                let mut c = String::from("seq,one_way_ns\n");
                for (seq, ns) in samples {
                    let _ = writeln!(c, "{seq},{ns}");
                }
                files.push(write(dir.join(format!("raw-{}-r{}.csv", r.key, run.repeat)), &c)?);
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::tests::cfg;
    use crate::ports::{LatencyRun, ThroughputRun};
    use partita_lab::machine::Disturbance;
    use partita_lab::setup::Setup;

    const QUIET: Disturbance = Disturbance { seconds: 0.1, steal_pct: 0.0, mhz_start: None, mhz_end: None };

    /// A row of three runs, each of three samples of `us` µs.
    fn row(sc: Scenario, us: [u64; 3]) -> LatencyRow {
        let runs = (1..).zip(us)
            .map(|(repeat, us)| LatencyRun { repeat, started: String::new(), finished: String::new(), stats: Stats::from_ns(&[us * 1000; 3]), samples_ns: None, disturbance: QUIET })
            .collect();
        LatencyRow::new(sc, 0, 3, runs)
    }

    fn flood(sc: Scenario, mb_per_s: [f64; 3]) -> ThroughputRow {
        let runs = (1..)
            .zip(mb_per_s)
            .map(|(repeat, mb_per_s)| ThroughputRun {
                repeat,
                messages: 10,
                bytes: 10 * sc.size as u64,
                seconds: 1.0,
                messages_per_s: 10.0,
                mb_per_s,
                started: String::new(),
                finished: String::new(),
                disturbance: QUIET,
            })
            .collect();
        ThroughputRow::new(sc, 0, runs)
    }

    fn report() -> PortsReport {
        let c = cfg();
        // Sampling 1 µs (2 µs in its third run) against iceoryx2 polling's 2 µs; queuing 6 µs against iceoryx2's
        // event 5 µs and the futex's 4 µs; in place twice as fast as copy at 64 KiB.
        let us = [[1, 1, 2], [2, 2, 2], [6, 6, 6], [5, 5, 5], [4, 4, 4], [10, 10, 10], [5, 5, 5], [20, 20, 20], [10, 10, 10]];
        let latency: Vec<LatencyRow> = c.latency_scenarios().into_iter().zip(us).map(|(sc, us)| row(sc, us)).collect();
        let mb = [[10.0; 3], [100.0; 3], [1000.0; 3], [1500.0, 1500.0, 3000.0]];
        let throughput: Vec<ThroughputRow> = c.throughput_scenarios().into_iter().zip(mb).map(|(sc, m)| flood(sc, m)).collect();
        PortsReport::new(Machine::probe(), Versions::new("test"), Setup::Normal.record("test"), c, String::new(), String::new(), latency, throughput)
    }

    #[test]
    fn comparisons_are_ratios_of_the_medians_with_the_ratios_of_each_round() {
        let report = report();
        let find = |what: &str| report.comparisons.iter().find(|x| x.what == what).unwrap_or_else(|| panic!("{what}: {:?}", report.comparisons));
        let s = find("sampling p99 / iceoryx2 polling p99");
        assert!((s.value - 0.5).abs() < 0.01 && s.goal.unwrap().met, "{s:?}");
        assert_eq!(s.row, "sampling-poll-copy-64");
        assert_eq!(s.per_run.len(), 3);
        assert!((s.per_run[2] - 1.0).abs() < 0.01, "the third round: 2 µs against 2 µs: {s:?}");
        let q = find("queuing p50 / iceoryx2 event p50");
        assert!((q.value - 1.2).abs() < 0.01 && q.goal.unwrap().met, "{q:?}");
        let f = find("queuing p50 / futex p50");
        assert!((f.value - 1.5).abs() < 0.01 && !f.goal.unwrap().met, "{f:?}");
        assert!((find("sampling write_with p50 / write p50 at 64KiB").value - 0.5).abs() < 0.01);
        assert!((find("queuing send_with p50 / send p50 at 64KiB").value - 0.5).abs() < 0.01);
        let t = find("queuing send_with MB/s / send MB/s at 64KiB");
        assert!((t.value - 1.5).abs() < 0.01 && (t.per_run[2] - 3.0).abs() < 0.01, "{t:?}");
        let abs = find("sampling p99");
        assert!(abs.unit == "µs" && abs.goal.unwrap().met);
        assert_eq!(report.comparisons.len(), 12);
    }

    #[test]
    fn every_row_names_its_comparisons_and_the_goals_are_judged_on_the_medians() {
        let report = report();
        let md = markdown(&report);
        let line = |start: &str| md.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("{start}: {md}")).to_string();
        let sampling = line("| ports sampling: write → polling read | 64 |");
        assert!(sampling.contains("sampling p99 / iceoryx2 polling p99 = 0.50 (runs 0.50–1.00; goal ≤ 2: met)"), "{sampling}");
        // Its p50s (1, 1, 2 µs) spread 100 %: flagged, with the note.
        assert!(sampling.contains("| 1.000–2.000 | 100.0 % ! | 1.000–2.000 |"), "{sampling}");
        assert!(md.contains("\n! The p50 of a row marked"), "{md}");
        assert!(line("| iceoryx2: publish → polling receive |").contains("| reference |"), "{md}");
        assert!(line("| futex on shared memory").contains("| floor |"), "{md}");
        assert!(line("| queuing p50 / futex p50 ≤ 1.2 |").ends_with("| 1.50 | 1.50–1.50 | no |"), "{md}");
        assert!(line("| sampling p99 ≤ 2 µs |").ends_with("| yes |"), "{md}");
        assert!(md.contains("3 runs per row, the rows interleaved"), "{md}");
        assert!(md.contains("normal scheduling: SCHED_OTHER"), "{md}");
        // Every CSV line carries the setup; the runs' files a line per run.
        let files = [latency_csv(&report), latency_runs_csv(&report), throughput_csv(&report), throughput_runs_csv(&report), comparisons_csv(&report)];
        for csv in &files {
            assert!(csv.lines().skip(1).all(|l| l.ends_with("\"normal scheduling: SCHED_OTHER, memory not locked, CPU idle states as the machine sets them\"")), "{csv}");
        }
        assert_eq!(files.each_ref().map(|f| f.lines().count()), [10, 28, 5, 13, 13]);
        let header_fields = |csv: &str| csv.lines().next().unwrap().split(',').count();
        for csv in &files[..4] {
            // Every line has as many fields as the header (the caption, quoted, holds commas).
            let fields = |l: &str| l.split('"').next().unwrap().split(',').count();
            assert!(csv.lines().skip(1).all(|l| fields(l) == header_fields(csv)), "{csv}");
        }
    }
}
