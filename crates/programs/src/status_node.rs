//! The status node (`partita app status-node`): a native node on the inter-module network that publishes its
//! system's state on the DDS topic `partita/status`, one instance per partition and node keyed by system and
//! partition (as DDS Router publishes its monitor topic), and hands the routing partitions' statistics
//! (`partita/router/stats`, which I/O partitions publish there with `stats_side = "network"`) back to the
//! supervisor's state.
//!
//! It reads the state file the supervisor rewrites every second (`/run/partita/<system>/state.json`) and writes
//! the statistics it heard to `routers.json` beside it (replaced whole, by rename); the supervisor folds that
//! file into the next state. Nothing here is on the plans' real-time path: the node runs on the host's other
//! CPUs like any node.
use crate::dds_args::DdsArgs;
use partita_dds::{DomainConfig, Participant, Qos, Reader, Topic, TopicType, Writer};
use partita_router::stats::RouteStats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct StatusNodeArgs {
    /// The system whose state it publishes, as `partita status` names it (`<system>.<host>` for one host's part).
    #[arg(long)]
    system: String,
    /// Where running systems keep their state.
    #[arg(long, default_value = "/run/partita")]
    state_dir: PathBuf,
    #[command(flatten)]
    dds: DdsArgs,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    duration: Option<f64>,
    /// Read `partita/status` instead of publishing it: print every sample as one JSON line (an operator's
    /// view from another node of the network, and the test's).
    #[arg(long)]
    watch: bool,
}

/// `partita app status-node`.
pub fn run_args(a: StatusNodeArgs) -> ExitCode {
    if a.system.is_empty() || a.system.contains('/') || a.system.starts_with('.') {
        return crate::fail("status-node", &format!("--system {:?}: name a system as `partita status` shows it (no `/`, not starting with `.`)", a.system));
    }
    let dds = match a.dds.config() {
        Ok(d) => d,
        Err(e) => return crate::fail("status-node", &e),
    };
    partita_os::signal::install_stop_signals();
    let end = a.duration.map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let stop = || partita_os::signal::stop_requested() || end.is_some_and(|e| Instant::now() >= e);
    if a.watch {
        return match watch(&dds, stop) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => crate::fail("status-node", &e.to_string()),
        };
    }
    let state_file = a.state_dir.join(&a.system).join("state.json");
    match run(&state_file, &dds, || partita_os::signal::stop_requested() || end.is_some_and(|e| Instant::now() >= e)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::fail("status-node", &e.to_string()),
    }
}

pub const STATUS_TOPIC: &str = "partita/status";
pub const ROUTER_STATS_TOPIC: &str = "partita/router/stats";
/// The file the node writes beside the state file.
pub const ROUTERS_FILE: &str = "routers.json";
/// The most statistics rows kept (routes of every routing partition of the system), and the longest name a row
/// may carry: any partition on the network can publish on the statistics topic, and a row past these is dropped.
pub const MAX_ROUTES: usize = 256;
pub const MAX_NAME: usize = 256;

/// Whether a statistics row is one to keep: its names of a plausible length.
pub fn plausible(row: &RouteStats) -> bool {
    [&row.router, &row.route, &row.topic, &row.type_name].iter().all(|s| s.len() <= MAX_NAME)
}

/// One partition's (or node's) status, as published on `partita/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionStatus {
    pub system: String,
    pub partition: String,
    /// Its module; empty for a native node.
    pub module: String,
    /// The root pid of its process tree; -1 while it is stopped.
    pub pid: i64,
    /// normal, idle, cold_start, warm_start; empty where the partition has no mode (nodes, VM partitions).
    pub mode: String,
    pub cpu_us: u64,
    pub memory_bytes: u64,
    pub restarts: u64,
    /// Its windows: samples found frozen inside them, spans it ran outside them.
    pub windows_missed: u64,
    pub ran_outside: u64,
    /// The plan its module runs now; empty for a node.
    pub plan: String,
    /// Window-start lateness of the CPU its windows are on, p99 over the last second, µs (0: no plan).
    pub lateness_p99_us: f64,
    /// When the supervisor wrote the state this sample is taken from.
    pub updated_unix_ms: u64,
}

impl TopicType for PartitionStatus {
    fn type_name() -> &'static str {
        "partita::status::PartitionStatus"
    }
    fn key_fields() -> &'static [&'static str] {
        &["system", "partition"]
    }
}

/// The QoS of `partita/status`: reliable, the last sample of each instance kept for late joiners.
pub fn status_qos() -> Qos {
    Qos::reliable().keep_last(1).transient_local()
}

/// Each partition's status from a state file's JSON (what the supervisor writes); anything missing reads as
/// zero or empty.
pub fn statuses(state: &serde_json::Value) -> Vec<PartitionStatus> {
    let system = state["system"].as_str().unwrap_or_default().to_string();
    let updated = state["updated_unix_ms"].as_u64().unwrap_or(0);
    let plan_of = |module: &str| {
        state["plans"].as_array().into_iter().flatten().find(|p| p["module"].as_str() == Some(module)).and_then(|p| p["plan"].as_str()).unwrap_or_default().to_string()
    };
    let lateness_of = |partition: &str| {
        state["cpus"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["windows"].as_array().into_iter().flatten().any(|w| w["partition"].as_str() == Some(partition)))
            .and_then(|c| c["lateness_last"]["p99_us"].as_f64())
            .unwrap_or(0.0)
    };
    state["partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let partition = p["partition"].as_str().unwrap_or_default().to_string();
            let module = p["module"].as_str().unwrap_or_default().to_string();
            PartitionStatus {
                system: system.clone(),
                pid: p["pid"].as_i64().unwrap_or(-1),
                mode: p["mode"].as_str().unwrap_or_default().to_string(),
                cpu_us: p["cpu_us"].as_u64().unwrap_or(0),
                memory_bytes: p["memory_bytes"].as_u64().unwrap_or(0),
                restarts: p["restarts"].as_u64().unwrap_or(0),
                windows_missed: p["windows"]["missed"].as_u64().unwrap_or(0),
                ran_outside: p["windows"]["ran_outside"].as_u64().unwrap_or(0),
                plan: if module.is_empty() { String::new() } else { plan_of(&module) },
                lateness_p99_us: lateness_of(&partition),
                updated_unix_ms: updated,
                module,
                partition,
            }
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum StatusNodeError {
    #[error("DDS: {0}")]
    Dds(#[from] partita_dds::DdsError),
    #[error("{path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
}

/// Runs the node until `stop` says so: publishes every change of the state file, collects router statistics.
pub fn run(state_file: &Path, dds: &DomainConfig, stop: impl Fn() -> bool) -> Result<(), StatusNodeError> {
    let participant = Participant::new(dds)?;
    let q = status_qos();
    let topic = Topic::<PartitionStatus>::new(&participant, STATUS_TOPIC, &q)?;
    let writer = Writer::new(&topic, &q)?;
    // The routers' writers: reliable, keep last 1, transient local (crates/router/src/engine.rs).
    let rq = Qos::reliable().keep_last(1).transient_local();
    let stats_topic = Topic::<RouteStats>::new(&participant, ROUTER_STATS_TOPIC, &rq)?;
    let stats = Reader::new(&stats_topic, &rq)?;
    let routers_file = state_file.with_file_name(ROUTERS_FILE);
    let mut routes: BTreeMap<(String, String, String), RouteStats> = BTreeMap::new();
    let mut last_updated = 0u64;
    let mut last_routes_write = Instant::now();
    while !stop() {
        for s in stats.take_wait(Duration::from_millis(200))? {
            if let Some(row) = s.value.filter(plausible) {
                let key = (row.router.clone(), row.route.clone(), row.topic.clone());
                if routes.len() < MAX_ROUTES || routes.contains_key(&key) {
                    routes.insert(key, row);
                }
            }
        }
        if let Ok(text) = std::fs::read_to_string(state_file) {
            if let Ok(state) = serde_json::from_str::<serde_json::Value>(&text) {
                let updated = state["updated_unix_ms"].as_u64().unwrap_or(0);
                if updated != last_updated {
                    last_updated = updated;
                    for row in statuses(&state) {
                        writer.write(&row)?;
                    }
                }
            }
        }
        if !routes.is_empty() && last_routes_write.elapsed() >= Duration::from_millis(500) {
            last_routes_write = Instant::now();
            let rows: Vec<&RouteStats> = routes.values().collect();
            write_whole(&routers_file, &serde_json::to_vec(&rows).unwrap_or_default())?;
        }
    }
    Ok(())
}

/// Prints every sample of `partita/status` as a JSON line until `stop` says so.
pub fn watch(dds: &DomainConfig, stop: impl Fn() -> bool) -> Result<(), StatusNodeError> {
    use std::io::Write;
    let participant = Participant::new(dds)?;
    let q = status_qos();
    let topic = Topic::<PartitionStatus>::new(&participant, STATUS_TOPIC, &q)?;
    let reader = Reader::new(&topic, &q)?;
    let mut out = std::io::stdout().lock();
    while !stop() {
        for s in reader.take_wait(Duration::from_millis(200))? {
            if let Some(row) = s.value {
                let _ = writeln!(out, "{}", serde_json::to_string(&row).unwrap_or_default());
            }
        }
        let _ = out.flush();
    }
    Ok(())
}

/// Replaces `path` with `bytes` (written beside it, then renamed).
fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), StatusNodeError> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes).map_err(|source| StatusNodeError::File { path: tmp.clone(), source })?;
    std::fs::rename(&tmp, path).map_err(|source| StatusNodeError::File { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_rows_with_names_past_the_limit_are_dropped() {
        let row = |topic: String| RouteStats {
            active: true,
            router: "routing".into(),
            route: "module->network".into(),
            topic,
            type_name: "T".into(),
            received: 1,
            forwarded: 1,
            dropped_rate: 0,
            dropped_downsample: 0,
            dropped_backpressure: 0,
            dropped_queue: 0,
            suppressed_loop: 0,
            errors: 0,
            batches: 1,
            callback_panics: 0,
            latency_p50_us: 0.0,
            latency_p99_us: 0.0,
            latency_max_us: 0.0,
        };
        assert!(plausible(&row("surveillance/request".into())));
        assert!(plausible(&row("x".repeat(MAX_NAME))));
        assert!(!plausible(&row("x".repeat(MAX_NAME + 1))));
    }

    #[test]
    fn a_state_file_becomes_one_status_per_partition_with_its_modules_plan_and_cpus_lateness() {
        let state = serde_json::json!({
            "system": "vs", "updated_unix_ms": 42,
            "partitions": [
                {"module": "m", "partition": "recorder", "pid": 10, "mode": "normal", "cpu_us": 5, "memory_bytes": 6, "restarts": 1, "windows": {"missed": 2, "ran_outside": 3}},
                {"module": null, "partition": "monitor", "pid": null}
            ],
            "plans": [{"module": "m", "plan": "normal"}],
            "cpus": [{"windows": [{"partition": "recorder"}], "lateness_last": {"p99_us": 31.0}}]
        });
        let s = statuses(&state);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].system.as_str(), s[0].partition.as_str(), s[0].pid, s[0].plan.as_str(), s[0].lateness_p99_us), ("vs", "recorder", 10, "normal", 31.0));
        assert_eq!((s[0].windows_missed, s[0].ran_outside, s[0].restarts, s[0].updated_unix_ms), (2, 3, 1, 42));
        assert_eq!((s[1].module.as_str(), s[1].pid, s[1].plan.as_str(), s[1].lateness_p99_us), ("", -1, "", 0.0));
        assert!(statuses(&serde_json::json!("not a state")).is_empty());
    }
}
