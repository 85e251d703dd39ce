//! The results tree: `<root>/<machine>/<test id>.json`, one file per cell, and the raw round trips beside it
//! (`<test id>.rtt.csv`, one ns value per line). A rerun finds what is measured and skips it unless asked.
use crate::agent::output::ProcessFigures;
use crate::matrix::Group;
use partita_lab::machine::Disturbance;
use partita_lab::stats::Stats;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One measured cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    pub id: String,
    pub test: String,
    pub group: Group,
    pub size: usize,
    /// RFC 3339, UTC.
    pub measured_at: String,
    pub machine: String,
    pub setup: String,
    pub count: u64,
    pub warmup: u64,
    /// Round trips (latency tests).
    pub latency: Option<Latency>,
    /// Throughput tests.
    pub throughput: Option<Throughput>,
    /// Every agent of the run (the same for every cell of a group).
    pub processes: Vec<ProcessFigures>,
    /// Why the cell has no figures; a failed cell is measured again by the next run.
    pub error: Option<String>,
    /// What the host did to the machine during its group's run (steal time, CPU frequency); absent in cells
    /// stored before it was recorded.
    #[serde(default)]
    pub disturbance: Option<Disturbance>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Latency {
    pub stats: Option<Stats>,
    pub lost: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Throughput {
    pub sent: u64,
    /// Received by each subscriber.
    pub received: Vec<u64>,
    pub seconds: f64,
    /// Samples per second received (the mean over the subscribers), over the writer's time.
    pub samples_per_s: f64,
    pub mb_per_s: f64,
    /// The share of what was written that did not arrive (mean over the subscribers).
    pub loss: f64,
}

/// A results tree on disk.
#[derive(Debug, Clone)]
pub struct Store {
    pub root: PathBuf,
    pub machine: String,
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct StoreError {
    pub path: PathBuf,
    pub message: String,
}

/// A name for this machine in the tree: its host name and CPU count, as file-name characters.
pub fn machine_key() -> String {
    let m = partita_lab::machine::Machine::probe();
    let raw = format!("{}-{}cpu", m.hostname, m.cores);
    raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect()
}

impl Store {
    pub fn new(root: impl Into<PathBuf>, machine: impl Into<String>) -> Store {
        Store { root: root.into(), machine: machine.into() }
    }

    pub fn dir(&self) -> PathBuf {
        self.root.join(&self.machine)
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir().join(format!("{id}.json"))
    }

    /// The cell, if a run measured it (failed cells included).
    pub fn get(&self, id: &str) -> Option<CellResult> {
        let text = std::fs::read_to_string(self.path(id)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Whether the cell has figures.
    pub fn measured(&self, id: &str) -> bool {
        self.get(id).is_some_and(|c| c.error.is_none())
    }

    pub fn put(&self, cell: &CellResult, rtt_ns: Option<&[u64]>) -> Result<(), StoreError> {
        let dir = self.dir();
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |e: std::io::Error| StoreError { path, message: e.to_string() }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let path = self.path(&cell.id);
        let text = serde_json::to_string_pretty(cell).expect("results are plain data");
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        if let Some(v) = rtt_ns {
            let csv = dir.join(format!("{}.rtt.csv", cell.id));
            let mut s = String::with_capacity(v.len() * 7);
            for x in v {
                s.push_str(&x.to_string());
                s.push('\n');
            }
            std::fs::write(&csv, s).map_err(io(&csv))?;
        }
        Ok(())
    }

    /// Every cell in the tree of this machine.
    pub fn all(&self) -> Vec<CellResult> {
        let Ok(rd) = std::fs::read_dir(self.dir()) else { return Vec::new() };
        let mut v: Vec<CellResult> = rd
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "json") && !e.file_name().to_string_lossy().starts_with("interop"))
            .filter_map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).ok()?).ok())
            .collect();
        v.sort_by(|a, b| (&a.group, a.size).cmp(&(&b.group, b.size)));
        v
    }

    /// The machines that have a tree under the root.
    pub fn machines(root: &Path) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(root) else { return Vec::new() };
        let mut v: Vec<String> = rd.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }
}
