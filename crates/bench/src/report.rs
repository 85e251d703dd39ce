//! Result files: `results.json` (everything), `summary.csv` (one row per scenario), `raw-<scenario>.csv` (with
//! `--raw`), and `table.md`, a Markdown table shaped like the papers' tables.
use crate::error::BenchError;
use crate::machine::Machine;
use crate::rr::{RrConfig, ScenarioResult};
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
    pub config: RrConfig,
    pub started: String,
    pub finished: String,
    pub scenarios: Vec<ScenarioResult>,
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
    s.scenario.replace(' ', "-")
}

fn f(x: f64) -> String {
    format!("{x:.3}")
}

fn opt(x: Option<f64>) -> String {
    x.map(f).unwrap_or_else(|| "—".into())
}

/// The row figures of one scenario, in µs round trip: (min, avg, max, std, p99, p50, p99.9).
type Row = (f64, f64, f64, Option<f64>, f64, f64, Option<f64>);

fn row(s: &ScenarioResult) -> Option<Row> {
    if let Some(st) = &s.stats {
        return Some((st.min_us, st.mean_us, st.max_us, Some(st.std_us), st.p99_us, st.p50_us, Some(st.p99_9_us)));
    }
    s.reference.as_ref().map(|r| (r.min_us, r.mean_us, r.max_us, None, r.p99_us, r.p50_us, None))
}

/// The Markdown table: rows are scenarios, columns MIN AVG MAX STD PER99 (as in paper 001) plus P50 and P99.9,
/// all round-trip times in µs.
pub fn markdown(report: &Report) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Round-trip time, µs ({}, {}, {} measured operations per scenario after {} warm-up; {} on {}, {} cores).\n",
        report.config.mode(),
        report.config.setup(),
        report.config.count,
        report.config.warmup,
        report.machine.cpu_model,
        report.machine.hostname,
        report.machine.cores
    );
    let _ = writeln!(t, "| Scenario | MIN | AVG | MAX | STD | PER99 | P50 | P99.9 | samples | lost |");
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut notes = Vec::new();
    for s in &report.scenarios {
        let samples = s.stats.as_ref().map(|x| x.count).or(s.reference.as_ref().map(|r| r.count)).unwrap_or(0);
        match row(s) {
            Some((min, avg, max, std, p99, p50, p999)) => {
                let _ = writeln!(
                    t,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    s.scenario,
                    f(min),
                    f(avg),
                    f(max),
                    opt(std),
                    f(p99),
                    f(p50),
                    opt(p999),
                    samples,
                    s.lost
                );
            }
            None => {
                let _ = writeln!(t, "| {} | — | — | — | — | — | — | — | 0 | {} |", s.scenario, s.lost);
            }
        }
        if let Some(r) = &s.reference {
            notes.push(format!("{}: {}", s.scenario, r.note));
        }
    }
    for n in notes {
        let _ = writeln!(t, "\n{n}");
    }
    let hops = hop_rows(report);
    if !hops.is_empty() {
        let _ = writeln!(t, "\nRound trip added by one forwarding hop (p50, this run): the router's hop (dds-routed − dds) against a minimal raw-UDP relay's (udp-relay − udp).\n");
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

/// One row per size measured with all of udp, udp-relay, dds and dds-routed.
pub fn hop_rows(report: &Report) -> Vec<HopRow> {
    let p50 = |transport: &str, size: usize| {
        report.scenarios.iter().find(|s| s.transport == transport && s.size == size).and_then(|s| s.stats.as_ref()).map(|s| s.p50_us)
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

fn csv(report: &Report) -> String {
    let mut c = String::from(
        "scenario,transport,size,mode,warmup_done,count,lost,min_us,mean_us,max_us,std_us,p50_us,p90_us,p99_us,p99_9_us,q1_us,q3_us,max_jitter_us\n",
    );
    for s in &report.scenarios {
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
            "{},{},{},{},{},{},{},{}",
            s.scenario,
            s.transport,
            s.size,
            s.mode,
            s.warmup_done,
            cnt,
            s.lost,
            figs.join(",")
        );
    }
    c
}

/// Writes every file into `dir` and returns their paths.
pub fn write_all(dir: &Path, report: &Report) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let json = serde_json::to_string_pretty(report).expect("the report serializes");
    files.push(write(dir.join("results.json"), &json)?);
    files.push(write(dir.join("summary.csv"), &csv(report))?);
    files.push(write(dir.join("table.md"), &markdown(report))?);
    for s in &report.scenarios {
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

    fn scenario(transport: &str, size: usize, rtt_us: u64) -> crate::rr::ScenarioResult {
        crate::rr::ScenarioResult {
            scenario: format!("{transport} {size}"),
            transport: transport.into(),
            size,
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
        }
    }

    #[test]
    fn the_hop_table_subtracts_each_direct_path_from_its_forwarded_one() {
        let config = crate::RrConfig {
            sizes: vec![64, 1024],
            fifo_priority: Some(50),
            cpu_dma_latency_us: Some(0),
            ..crate::rr::tests::cfg()
        };
        let report = Report {
            benchmark: "rr".into(),
            unit: "µs".into(),
            clock: "test".into(),
            machine: Machine::probe(),
            versions: Versions::new("test"),
            config,
            started: String::new(),
            finished: String::new(),
            // 1 KiB lacks the relay: no row for it.
            scenarios: vec![
                scenario("udp", 64, 10),
                scenario("udp-relay", 64, 30),
                scenario("dds", 64, 20),
                scenario("dds-routed", 64, 50),
                scenario("udp", 1024, 10),
                scenario("dds", 1024, 20),
                scenario("dds-routed", 1024, 50),
            ],
        };
        let rows = hop_rows(&report);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].size, rows[0].relay_us.round(), rows[0].router_us.round()), (64, 20.0, 30.0));
        assert!((rows[0].ratio() - 1.5).abs() < 0.01);
        let md = markdown(&report);
        assert!(md.contains("SCHED_FIFO 50, cpu_dma_latency 0 µs"), "{md}");
        assert!(md.contains("| 64 | 20"), "{md}");
    }

    #[test]
    fn unwritable_folder_is_a_usage_error() {
        let e = prepare_dir(Path::new("/proc/partita-cannot-be-here")).unwrap_err();
        assert!(e.is_usage(), "{e}");
    }
}
