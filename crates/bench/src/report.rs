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
        "Round-trip time, µs ({}, {} measured operations per scenario after {} warm-up; {} on {}, {} cores).\n",
        report.config.mode(),
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
    t
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

    #[test]
    fn unwritable_folder_is_a_usage_error() {
        let e = prepare_dir(Path::new("/proc/partita-cannot-be-here")).unwrap_err();
        assert!(e.is_usage(), "{e}");
    }
}
