//! The status service: what a running system looks like now, for readers outside the real-time path.
//!
//! Once a second the supervisor's own thread (never an executor) reads each plan executor's window ring and
//! lateness histogram — lock-free structures the executor writes with relaxed stores — and the partitions'
//! cgroups, and writes the result into `state.json` beside what was there (`partita status --json` prints
//! it, `partita web` serves it, the status node publishes it as the DDS topic `partita/status`). Nothing here
//! takes a lock the executor holds or makes the executor wait.
use crate::executor::Executor;
use crate::histogram::Snapshot;
use crate::modes::ModulePlans;
use crate::window_ring::WindowRecord;
use serde::Serialize;

/// The last window records kept per CPU in the state: at least two major frames of the paper's plan.
pub const RECENT_RECORDS: usize = 64;

/// One CPU's plan and how it runs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CpuStatus {
    pub module: String,
    pub cpu: usize,
    /// The plan running now (its name), its major frame and windows.
    pub plan: String,
    pub major_frame_ns: u64,
    pub windows: Vec<PlannedWindow>,
    /// CLOCK_MONOTONIC ns of frame 0 of the plan running now (0 before the executor began), and of this snapshot.
    pub origin_ns: u64,
    pub now_ns: u64,
    /// The last window starts and ends the executor made, oldest first.
    pub recent: Vec<RecentWindow>,
    /// Window-start lateness since the system came up, and over the last status period.
    pub lateness: Lateness,
    pub lateness_last: Lateness,
    pub frames: u64,
    /// How many window records (starts and ends) the executor has made.
    pub windows_started: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PlannedWindow {
    pub partition: String,
    pub start_ns: u64,
    pub duration_ns: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RecentWindow {
    pub frame: u64,
    pub plan: String,
    /// The partition whose window started here; `None`: the plan went idle (a gap).
    pub partition: Option<String>,
    pub planned_ns: u64,
    pub woke_ns: u64,
    pub switched_ns: u64,
}

/// A lateness histogram in µs: percentiles (each its bucket's upper edge, never better than measured) and the
/// non-empty buckets as `[upper edge µs, count]`.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Lateness {
    pub count: u64,
    pub p50_us: Option<f64>,
    pub p90_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub max_us: Option<f64>,
    pub buckets: Vec<(f64, u64)>,
}

impl Lateness {
    pub fn of(s: &Snapshot) -> Lateness {
        Lateness {
            count: s.total(),
            p50_us: s.quantile_us(0.5),
            p90_us: s.quantile_us(0.9),
            p99_us: s.quantile_us(0.99),
            p999_us: s.quantile_us(0.999),
            max_us: s.max_us(),
            buckets: s.nonzero(),
        }
    }
}

/// Reads the executors for the state file, keeping each one's last histogram to report the last period.
#[derive(Default)]
pub struct StatusReader {
    last: Vec<Snapshot>,
}

impl StatusReader {
    /// One entry per executor, in the order of `executors` (which is the modules' plans' order).
    pub fn cpus(&mut self, executors: &[Executor], modules: &[ModulePlans]) -> Vec<CpuStatus> {
        let now_ns = crate::clock::monotonic_ns();
        let plan_executors = modules
            .iter()
            .flat_map(|m| m.executors.iter().map(move |e| (m, e)));
        let mut out = Vec::with_capacity(executors.len());
        for (k, (executor, (module, pe))) in executors.iter().zip(plan_executors).enumerate() {
            let current = pe.cell.current();
            let Some(schedule) = pe.schedules.get(current) else {
                continue;
            };
            let plan_name = |p: usize| {
                module
                    .names
                    .get(p)
                    .cloned()
                    .unwrap_or_else(|| p.to_string())
            };
            let partition_name = |p: usize| {
                pe.partitions
                    .get(p)
                    .cloned()
                    .unwrap_or_else(|| p.to_string())
            };
            let snapshot = executor.lateness.snapshot();
            let last = self
                .last
                .get(k)
                .map(|l| snapshot.since(l))
                .unwrap_or_else(|| snapshot.clone());
            if self.last.len() <= k {
                self.last.resize(k + 1, Snapshot { counts: Vec::new() });
            }
            let progress = executor.progress.lock().map(|p| *p).unwrap_or_default();
            let recent =
                executor
                    .windows
                    .last(RECENT_RECORDS)
                    .into_iter()
                    .map(|r: WindowRecord| RecentWindow {
                        frame: r.frame,
                        plan: plan_name(r.plan),
                        partition: r.partition.map(partition_name),
                        planned_ns: r.planned_ns,
                        woke_ns: r.woke_ns,
                        switched_ns: r.switched_ns,
                    });
            out.push(CpuStatus {
                module: module.module.clone(),
                cpu: pe.cpu,
                plan: plan_name(current),
                major_frame_ns: schedule.major_frame().as_nanos() as u64,
                windows: schedule
                    .windows()
                    .iter()
                    .map(|w| PlannedWindow {
                        partition: partition_name(w.partition),
                        start_ns: w.offset.as_nanos() as u64,
                        duration_ns: w.duration.as_nanos() as u64,
                    })
                    .collect(),
                origin_ns: executor.origin_ns().unwrap_or(0),
                now_ns,
                recent: recent.collect(),
                lateness: Lateness::of(&snapshot),
                lateness_last: Lateness::of(&last),
                frames: progress.frames,
                windows_started: executor.windows.written(),
            });
            self.last[k] = snapshot;
        }
        out
    }
}

/// The file a status node writes the routing partitions' statistics to, beside the state file.
pub const ROUTERS_FILE: &str = "routers.json";
/// The largest such file read, and the most rows kept.
const MAX_ROUTERS_BYTES: u64 = 1 << 20;
const MAX_ROUTES: usize = 256;

/// The routing partitions' statistics (one row per route and topic: received, forwarded, dropped, …, as
/// `partita/router/stats` carries them) and when the status node last wrote them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Routers {
    pub updated_unix_ms: u64,
    pub routes: Vec<serde_json::Value>,
}

impl Routers {
    /// What the status node wrote in `dir`, if anything: a JSON array of objects, at most 1 MiB; the first
    /// 256 rows kept. Anything else is ignored (the node is a program on the network, not the supervisor).
    pub fn read(dir: &std::path::Path) -> Option<Routers> {
        use std::io::Read;
        let path = dir.join(ROUTERS_FILE);
        let file = std::fs::File::open(&path).ok()?;
        let modified = file.metadata().ok()?.modified().ok()?;
        let mut text = String::new();
        file.take(MAX_ROUTERS_BYTES).read_to_string(&mut text).ok()?;
        let rows: Vec<serde_json::Value> = serde_json::from_str(&text).ok()?;
        let routes: Vec<serde_json::Value> = rows.into_iter().filter(|r| r.is_object()).take(MAX_ROUTES).collect();
        let updated_unix_ms = modified.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        Some(Routers { updated_unix_ms, routes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::LatencyHistogram;

    #[test]
    fn routers_file_is_read_only_when_it_is_an_array_of_rows_and_is_bounded() {
        let dir = std::env::temp_dir().join(format!("partita-status-routers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(Routers::read(&dir), None, "no file");
        std::fs::write(dir.join(ROUTERS_FILE), r#"[{"topic":"a","received":3}, 7, {"topic":"b"}]"#).unwrap();
        let r = Routers::read(&dir).unwrap();
        assert_eq!(r.routes.len(), 2, "the number is not a row");
        assert_eq!(r.routes[0]["received"], 3);
        std::fs::write(dir.join(ROUTERS_FILE), "{not json").unwrap();
        assert_eq!(Routers::read(&dir), None);
        let many: Vec<serde_json::Value> = (0..1000).map(|i| serde_json::json!({ "topic": i })).collect();
        std::fs::write(dir.join(ROUTERS_FILE), serde_json::to_string(&many).unwrap()).unwrap();
        assert_eq!(Routers::read(&dir).unwrap().routes.len(), MAX_ROUTES);
        std::fs::write(dir.join(ROUTERS_FILE), format!("[{}]", "{\"x\":1},".repeat(200_000))).unwrap();
        assert_eq!(Routers::read(&dir), None, "past 1 MiB the text is cut, and no longer an array");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn lateness_reports_percentiles_and_only_the_buckets_that_hold_values() {
        let h = LatencyHistogram::default();
        for us in [3u64, 3, 4, 250, 1_500] {
            h.record(us * 1_000 + 200);
        }
        let l = Lateness::of(&h.snapshot());
        assert_eq!(l.count, 5);
        assert_eq!(l.p50_us, Some(5.0), "the third of five, 4.2 µs, lies in the bucket up to 5");
        assert_eq!(l.max_us, Some(1_510.0));
        assert_eq!(
            l.buckets,
            vec![(4.0, 2), (5.0, 1), (251.0, 1), (1_510.0, 1)]
        );
        assert_eq!(
            Lateness::of(&Snapshot {
                counts: vec![0; crate::histogram::BUCKETS]
            }),
            Lateness {
                count: 0,
                ..Lateness::default()
            }
        );
    }
}
