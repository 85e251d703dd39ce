//! Result files: `results.json` (everything), `summary.csv` (one row per cell: the figures over its runs),
//! `runs.csv` (one row per run), `raw-<scenario>-r<repeat>.csv` (with `--raw`), and `table.md`, a Markdown
//! table shaped like the papers' tables. Each of them says which measurement setup produced it.
use crate::error::BenchError;
use partita_lab::machine::Machine;
use partita_lab::repeat::Spread;
use crate::rr::{Cell, RrConfig, ScenarioResult};
use partita_lab::setup::SetupRecord;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The partita version and the DDS implementation it is built on.
#[derive(Debug, Clone, Serialize)]
pub struct Versions {
    pub partita: String,
    pub cyclonedds: String,
    pub cyclors: String,
}

impl Versions {
    pub fn new(partita: &str) -> Versions {
        Versions { partita: partita.to_string(), cyclonedds: "11.0.1".into(), cyclors: "0.4.0".into() }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub benchmark: String,
    /// What the figures are.
    pub unit: String,
    pub clock: String,
    pub machine: Machine,
    pub versions: Versions,
    /// How the measured processes were scheduled.
    pub setup: SetupRecord,
    pub config: RrConfig,
    pub started: String,
    pub finished: String,
    /// One per transport × size, by transport then size, each with its runs.
    pub scenarios: Vec<Cell>,
}

/// Makes sure `dir` exists and can be written, before any measurement runs.
pub fn prepare_dir(dir: &Path) -> Result<(), BenchError> {
    let err = |source| BenchError::OutputDir { path: dir.to_path_buf(), source };
    std::fs::create_dir_all(dir).map_err(err)?;
    let probe = dir.join(".partita-write-test");
    std::fs::write(&probe, b"").map_err(err)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

fn write(path: PathBuf, text: &str) -> Result<PathBuf, BenchError> {
    std::fs::write(&path, text).map_err(|source| BenchError::Write { path: path.clone(), source })?;
    Ok(path)
}

fn file_stem(s: &ScenarioResult) -> String {
    format!("{}-r{}", s.scenario.replace(' ', "-"), s.repeat)
}

fn f(x: f64) -> String {
    format!("{x:.3}")
}

fn med(x: &Option<Spread>) -> String {
    x.as_ref().map(|s| f(s.median)).unwrap_or_else(|| "—".into())
}

/// A CSV field: quoted when it holds a comma or a quote.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// The line above the table: what was measured, how often, under which setup, on what.
pub fn caption(report: &Report) -> String {
    let c = &report.config;
    let runs = if c.repeat > 1 {
        format!(
            "{} runs per scenario, the transports interleaved; each figure is the median of the runs' figures",
            c.repeat
        )
    } else {
        "one run per scenario".to_string()
    };
    format!(
        "Round-trip time, µs ({}, {} measured operations per run after {} warm-up; {runs}). {}. {} on {}, {} cores.",
        c.mode(),
        c.count,
        c.warmup,
        report.setup.caption,
        report.machine.cpu_model,
        report.machine.hostname,
        report.machine.cores
    )
}

/// The Markdown table: rows are transport × size cells, columns MIN AVG MAX STD PER99 (as in paper 001) plus
/// P50 and P99.9, all round-trip times in µs and medians over the runs, then the p50's range and spread over
/// the runs (flagged above 10 %).
pub fn markdown(report: &Report) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "{}\n", caption(report));
    let _ = writeln!(t, "| Scenario | MIN | AVG | MAX | STD | PER99 | P50 | P99.9 | P50 min–max | P50 spread | samples | lost | host |");
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut notes = Vec::new();
    let mut flagged = false;
    for c in &report.scenarios {
        let x = &c.figures;
        flagged |= x.flagged;
        let (range, spread) = match &x.p50_us {
            Some(p) => (p.range_cell(3), p.spread_cell()),
            None => ("—".into(), "—".into()),
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {range} | {spread} | {} | {} | {} |",
            c.scenario,
            med(&x.min_us),
            med(&x.mean_us),
            med(&x.max_us),
            med(&x.std_us),
            med(&x.p99_us),
            med(&x.p50_us),
            med(&x.p99_9_us),
            x.samples,
            x.lost,
            x.disturbance.map_or("—".to_string(), |d| d.note())
        );
        if let Some(n) = c.note() {
            notes.push(format!("{}: {n}", c.scenario));
        }
    }
    if flagged {
        let _ = writeln!(t, "\n{}", partita_lab::repeat::flag_note("The p50 of a row marked", "p50s"));
    }
    let _ = writeln!(t, "\n{}", partita_lab::machine::HOST_NOTE);
    for n in notes {
        let _ = writeln!(t, "\n{n}");
    }
    let hops = hop_rows(report);
    if !hops.is_empty() {
        let _ = writeln!(t, "\nRound trip added by one forwarding hop (medians of the p50s, this run): the router's hop (dds-routed − dds) against a minimal raw-UDP relay's (udp-relay − udp).\n");
        let _ = writeln!(t, "| size | relay adds | router adds | router / relay |");
        let _ = writeln!(t, "|---|---:|---:|---:|");
        for h in hops {
            let _ = writeln!(t, "| {} | {} | {} | {:.2} |", crate::size::format_size(h.size), f(h.relay_us), f(h.router_us), h.ratio());
        }
    }
    t
}

/// The round trip one forwarding hop adds at one payload size, from the p50s of four scenarios of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct HopRow {
    pub size: usize,
    pub relay_us: f64,
    pub router_us: f64,
}

impl HopRow {
    pub fn ratio(&self) -> f64 {
        self.router_us / self.relay_us
    }
}

/// One row per size measured with all of udp, udp-relay, dds and dds-routed, from the medians of their p50s.
pub fn hop_rows(report: &Report) -> Vec<HopRow> {
    let p50 = |transport: &str, size: usize| {
        report.scenarios.iter().find(|c| c.transport == transport && c.size == size).and_then(|c| c.figures.p50_us).map(|s| s.median)
    };
    report
        .config
        .sizes
        .iter()
        .filter_map(|&size| {
            let (udp, relay, dds, routed) = (p50("udp", size)?, p50("udp-relay", size)?, p50("dds", size)?, p50("dds-routed", size)?);
            Some(HopRow { size, relay_us: relay - udp, router_us: routed - dds })
        })
        .collect()
}

/// One row per cell: the medians over its runs, the p50's range and spread, and the setup.
fn summary_csv(report: &Report) -> String {
    let mut c = String::from(
        "scenario,transport,size,mode,runs,samples,lost,min_us,mean_us,max_us,std_us,p50_us,p90_us,p99_us,p99_9_us,p50_min_us,p50_max_us,p50_spread,flagged,setup\n",
    );
    let setup = field(&report.setup.caption);
    for cell in &report.scenarios {
        let x = &cell.figures;
        let m = |s: &Option<Spread>| s.map(|s| f(s.median)).unwrap_or_default();
        let figs = [&x.min_us, &x.mean_us, &x.max_us, &x.std_us, &x.p50_us, &x.p90_us, &x.p99_us, &x.p99_9_us].map(m).join(",");
        let (lo, hi) = x.p50_us.map(|p| (f(p.min), f(p.max))).unwrap_or_default();
        let spread = x.p50_spread.map(|s| format!("{s:.4}")).unwrap_or_default();
        let _ = writeln!(
            c,
            "{},{},{},{},{},{},{},{figs},{lo},{hi},{spread},{},{setup}",
            cell.scenario,
            cell.transport,
            cell.size,
            report.config.mode(),
            x.runs,
            x.samples,
            x.lost,
            x.flagged
        );
    }
    c
}

/// One row per run, in the order of the cells and, within a cell, of the runs.
fn runs_csv(report: &Report) -> String {
    let mut c = String::from(
        "scenario,transport,size,repeat,mode,warmup_done,count,lost,min_us,mean_us,max_us,std_us,p50_us,p90_us,p99_us,p99_9_us,q1_us,q3_us,max_jitter_us,started,setup\n",
    );
    let setup = field(&report.setup.caption);
    for s in report.scenarios.iter().flat_map(|c| &c.runs) {
        let (cnt, fig): (u64, [Option<f64>; 11]) = if let Some(st) = &s.stats {
            (
                st.count,
                [st.min_us, st.mean_us, st.max_us, st.std_us, st.p50_us, st.p90_us, st.p99_us, st.p99_9_us, st.q1_us, st.q3_us, st.max_jitter_us]
                    .map(Some),
            )
        } else if let Some(r) = &s.reference {
            (r.count, [Some(r.min_us), Some(r.mean_us), Some(r.max_us), None, Some(r.p50_us), Some(r.p90_us), Some(r.p99_us), None, None, None, Some(r.max_us - r.min_us)])
        } else {
            (0, [None; 11])
        };
        let figs: Vec<String> = fig.iter().map(|x| x.map(f).unwrap_or_default()).collect();
        let _ = writeln!(
            c,
            "{},{},{},{},{},{},{},{},{},{},{setup}",
            s.scenario,
            s.transport,
            s.size,
            s.repeat,
            s.mode,
            s.warmup_done,
            cnt,
            s.lost,
            figs.join(","),
            s.started
        );
    }
    c
}

/// Writes every file into `dir` and returns their paths.
pub fn write_all(dir: &Path, report: &Report) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let json = serde_json::to_string_pretty(report).expect("the report serializes");
    files.push(write(dir.join("results.json"), &json)?);
    files.push(write(dir.join("summary.csv"), &summary_csv(report))?);
    files.push(write(dir.join("runs.csv"), &runs_csv(report))?);
    files.push(write(dir.join("table.md"), &markdown(report))?);
    for s in report.scenarios.iter().flat_map(|c| &c.runs) {
        if let Some(samples) = &s.samples_ns {
            let mut c = String::from("seq,rtt_ns\n");
            for (seq, ns) in samples {
                let _ = writeln!(c, "{seq},{ns}");
            }
            files.push(write(dir.join(format!("raw-{}.csv", file_stem(s))), &c)?);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_lab::setup::Setup;

    fn run(transport: &str, size: usize, repeat: u32, rtt_us: u64) -> ScenarioResult {
        ScenarioResult {
            scenario: format!("{transport} {size}"),
            transport: transport.into(),
            size,
            repeat,
            mode: "closed-loop".into(),
            warmup_requested: 0,
            warmup_done: 0,
            warmup_lost: 0,
            count_requested: 3,
            lost: 0,
            started: String::new(),
            finished: String::new(),
            stats: crate::Stats::from_ns(&[rtt_us * 1000; 3]),
            reference: None,
            server_iterations_per_us: None,
            samples_ns: None,
            disturbance: None,
        }
    }

    fn report(setup: Setup, repeat: u32, scenarios: Vec<Cell>) -> Report {
        let config = RrConfig { sizes: vec![64, 1024], setup, repeat, ..crate::rr::tests::cfg() };
        Report {
            benchmark: "rr".into(),
            unit: "µs".into(),
            clock: "test".into(),
            machine: Machine::probe(),
            versions: Versions::new("test"),
            setup: setup.record("test"),
            config,
            started: String::new(),
            finished: String::new(),
            scenarios,
        }
    }

    #[test]
    fn the_hop_table_subtracts_each_direct_path_from_its_forwarded_one() {
        // 1 KiB lacks the relay: no row for it.
        let cells = [("udp", 64, 10), ("udp-relay", 64, 30), ("dds", 64, 20), ("dds-routed", 64, 50), ("udp", 1024, 10), ("dds", 1024, 20), ("dds-routed", 1024, 50)]
            .map(|(t, s, us)| Cell::new(vec![run(t, s, 1, us)]));
        let report = report(Setup::Realtime { priority: 50, cpu_dma_latency_us: 0 }, 1, cells.to_vec());
        let rows = hop_rows(&report);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].size, rows[0].relay_us.round(), rows[0].router_us.round()), (64, 20.0, 30.0));
        assert!((rows[0].ratio() - 1.5).abs() < 0.01);
        let md = markdown(&report);
        assert!(md.contains("real-time setup: SCHED_FIFO 50, memory locked, /dev/cpu_dma_latency held at 0 µs"), "{md}");
        assert!(md.contains("one run per scenario"), "{md}");
        assert!(md.contains("| 64 | 20"), "{md}");
    }

    #[test]
    fn repeats_give_medians_ranges_and_a_flag_above_ten_percent() {
        // udp steady (10, 10.5, 10 µs), dds not (20, 30, 22 µs): its p50 spread is 10/22 = 45 %.
        let udp = Cell::new(vec![run("udp", 64, 1, 10), run("udp", 64, 2, 11), run("udp", 64, 3, 10)]);
        let dds = Cell::new(vec![run("dds", 64, 1, 20), run("dds", 64, 2, 30), run("dds", 64, 3, 22)]);
        assert!(!udp.figures.flagged && dds.figures.flagged);
        assert_eq!(dds.figures.samples, 9);
        let p50 = dds.figures.p50_us.unwrap();
        assert_eq!((p50.min.round(), p50.median.round(), p50.max.round()), (20.0, 22.0, 30.0));
        let r = report(Setup::Normal, 3, vec![udp, dds]);
        let md = markdown(&r);
        assert!(md.contains("3 runs per scenario, the transports interleaved"), "{md}");
        assert!(md.contains("normal scheduling: SCHED_OTHER"), "{md}");
        let dds_row = md.lines().find(|l| l.starts_with("| dds 64 |")).unwrap();
        assert!(dds_row.contains("| 20.") && dds_row.contains("–30.") && dds_row.contains("% ! |"), "{dds_row}");
        let udp_row = md.lines().find(|l| l.starts_with("| udp 64 |")).unwrap();
        assert!(!udp_row.contains('!'), "{udp_row}");
        assert!(md.contains("\n! The p50 of a row marked"), "{md}");
        // Every CSV row carries the setup; runs.csv has one row per run with its repeat.
        let summary = summary_csv(&r);
        assert_eq!(summary.lines().count(), 3, "{summary}");
        assert!(summary.lines().skip(1).all(|l| l.ends_with(",\"normal scheduling: SCHED_OTHER, memory not locked, CPU idle states as the machine sets them\"")), "{summary}");
        assert!(summary.lines().nth(2).unwrap().contains(",true,"), "{summary}");
        let runs = runs_csv(&r);
        let repeats: Vec<&str> = runs.lines().skip(1).map(|l| l.split(',').nth(3).unwrap()).collect();
        assert_eq!(repeats, ["1", "2", "3", "1", "2", "3"]);
    }

    #[test]
    fn raw_files_are_named_with_the_repeat() {
        assert_eq!(file_stem(&run("udp", 64, 2, 10)), "udp-64-r2");
    }

    #[test]
    fn unwritable_folder_is_a_usage_error() {
        let e = prepare_dir(Path::new("/proc/partita-cannot-be-here")).unwrap_err();
        assert!(e.is_usage(), "{e}");
    }
}
