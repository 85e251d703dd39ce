//! Ports under a plan: a writer partition sends a message into a queuing channel every 20 µs of its window; the
//! reader partition, blocked on the channel, receives in its window. Each message's age when the receive
//! returns (CLOCK_MONOTONIC, which every partition shares) is measured against the plan's bound: the longest
//! time from an instant of the writer's windows to the start of the reader's next window. Both partitions have
//! no network (`network = false`); the plan is the paper's layout (700 µs then 800 µs in a 1500 µs frame).
use partita_supervisor::supervisor::{Supervisor, UpOptions};
use partita_system::spec::{ChannelSpec, ModuleSpec, PartitionSpec, PlanSpec, SystemSpec};
use partita_system::{ByteSize, Duration, Host};
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct PortsPlanRow {
    /// The plan, in words.
    pub plan: String,
    pub seen: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// The plan's gap: writer window start → reader's next window start.
    pub gap_us: f64,
    /// How late the executor started windows in this run, and how long their thaw took (p99 of each).
    pub lateness_p99_us: f64,
    pub switch_p99_us: f64,
    /// The bound a message keeps: the plan's gap plus the window start's delay (lateness and thaw, p99).
    pub bound_us: f64,
}

const WRITER: (u64, u64) = (0, 700);
const READER: (u64, u64) = (700, 800);
const FRAME_US: u64 = 1500;

/// The system measured: writer and reader on CPU `cpu` under the paper's layout.
pub fn system(name: &str, cpu: usize, count: u64) -> Result<partita_system::System, String> {
    let us = Duration::from_micros;
    let seconds = (count / 10_000 + 20).to_string();
    let spec = SystemSpec::new(name).module(
        ModuleSpec::new("m")
            .cpus([cpu])
            .partition(PartitionSpec::new("writer", ["partita", "app", "port", "stamp", "samples", "--interval", "20us", "--seconds", seconds.as_str()]).network(false))
            .partition(PartitionSpec::new("reader", ["partita", "app", "port", "watch", "samples", "--count", &count.to_string(), "--seconds", seconds.as_str()]).network(false))
            .channel(ChannelSpec::queuing("samples", "writer", "reader", ByteSize(64), 256))
            .plan(PlanSpec::new(cpu, us(FRAME_US)).window("writer", us(WRITER.0), us(WRITER.1)).window("reader", us(READER.0), us(READER.1))),
    );
    spec.build(&Host::this_machine(), "<bench ports: plan>").map_err(|e| e.to_string())
}

/// Brings the system up with `exe` as partita, until the reader has seen `count` messages; returns its figures.
pub fn measure(exe: &Path, state_root: &Path, cpu: usize, count: u64) -> Result<PortsPlanRow, String> {
    let name = format!("ports-plan-{}", std::process::id());
    let system = system(&name, cpu, count)?;
    let options = UpOptions { partita: Some(exe.to_path_buf()), ..UpOptions::new(state_root) };
    let sup = Supervisor::up(&system, &options).map_err(|e| e.to_string())?;
    let log = state_root.join(&name).join("reader.log");
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, log) = (stop.clone(), log.clone());
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(count / 10_000 + 30);
            while std::time::Instant::now() < deadline && !std::fs::read_to_string(&log).is_ok_and(|t| t.contains("\"seen\"")) {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            stop.store(true, Ordering::SeqCst);
        })
    };
    let ran = sup.run(None, Some(stop));
    let _ = watcher.join();
    let logs = ran.map_err(|e| e.to_string())?;
    let (lateness, switch) = logs.iter().map(|l| (l.lateness().p99_ns, l.switch_cost().p99_ns)).fold((0, 0), |a, b| (a.0.max(b.0), a.1.max(b.1)));
    let text = std::fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let _ = std::fs::remove_dir_all(state_root.join(&name));
    let _ = std::fs::remove_dir_all(Path::new("/var/lib/partita").join(&name));
    let line = text.lines().rev().find(|l| l.contains("\"seen\"")).ok_or_else(|| format!("the reader measured nothing; its log:\n{text}"))?;
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("{line}: {e}"))?;
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    Ok(PortsPlanRow {
        plan: format!("writer {}–{} µs, reader {}–{} µs of a {FRAME_US} µs frame", WRITER.0, WRITER.0 + WRITER.1, READER.0, READER.0 + READER.1),
        seen: v["seen"].as_u64().unwrap_or(0),
        p50_us: f("p50_us"),
        p99_us: f("p99_us"),
        max_us: f("max_us"),
        gap_us: (READER.0 - WRITER.0) as f64,
        lateness_p99_us: lateness as f64 / 1e3,
        switch_p99_us: switch as f64 / 1e3,
        bound_us: (READER.0 - WRITER.0) as f64 + (lateness + switch) as f64 / 1e3,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_measured_system_is_valid_and_its_partitions_have_no_network() {
        let s = super::system("ports-plan-test", 0, 100).unwrap();
        assert!(s.modules[0].partitions.iter().all(|p| !p.network && p.tree.nics.is_empty()));
        assert_eq!(s.modules[0].channels.len(), 1);
    }
}
