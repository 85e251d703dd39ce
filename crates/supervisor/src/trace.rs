//! `partita up --trace FILE`: the run as a Chrome trace-event JSON file (the "JSON Object Format"), which
//! Perfetto (ui.perfetto.dev) and chrome://tracing open. One job: turn the executors' window records, their
//! plan switches, the event log and the state's counters into trace events, and stream them to a buffered file.
//!
//! The clock: every `ts` is CLOCK_MONOTONIC in µs (floats, ns in the decimals), the clock of the executors'
//! records, the event log's `monotonic_ns`, `--timeline` and a `mono` ftrace: times in the trace are the
//! records' own, not shifted. The viewers show them from the first event on.
//!
//! Tracks (threads of one process per system, named by `ph:"M"` events):
//! - `CPU n plan (actual)`: each executed window as a complete slice (`ph:"X"`) named by its partition, from
//!   the instant its freezes and thaws were issued (`switched_ns`) to the next record's (the next window's
//!   start or the end of a gap);
//! - `CPU n plan (planned)`: the planned windows (`planned_ns` and the window's duration in its schedule);
//! - `CPU n plan switches`: the executor's plan switches, as instants (only when one happened);
//! - `health`: the event log's events, as instants;
//! - counters (`ph:"C"`): `CPU n lateness` (each window start's lateness, µs) and, where the state has them,
//!   the routers' counters (once a second).
//!
//! Nothing is kept beyond one pending window per CPU: events go to the file as they are read.
use crate::error::{path_err, Result};
use crate::executor::Executor;
use crate::health::{Event, EventLog};
use crate::modes::{ModulePlans, SwitchReport};
use crate::window_ring::{NewWindows, WindowRecord};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What one CPU's plan executor runs, as the trace names it.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuPlan {
    pub module: String,
    pub cpu: usize,
    /// The plans' names, by index.
    pub plans: Vec<String>,
    /// The executor's partitions' names, by its index.
    pub partitions: Vec<String>,
    /// Per plan, per window: its duration, ns.
    pub durations: Vec<Vec<u64>>,
}

impl CpuPlan {
    /// One per executor, in the executors' order (the modules' plans' order).
    pub fn of(modules: &[ModulePlans]) -> Vec<CpuPlan> {
        modules
            .iter()
            .flat_map(|m| {
                m.executors.iter().map(move |e| CpuPlan {
                    module: m.module.clone(),
                    cpu: e.cpu,
                    plans: m.names.clone(),
                    partitions: e.partitions.clone(),
                    durations: e.schedules.iter().map(|s| s.windows().iter().map(|w| w.duration.as_nanos() as u64).collect()).collect(),
                })
            })
            .collect()
    }

    fn plan(&self, p: usize) -> String {
        self.plans.get(p).cloned().unwrap_or_else(|| format!("plan {p}"))
    }

    fn partition(&self, p: Option<usize>) -> String {
        match p {
            Some(p) => self.partitions.get(p).cloned().unwrap_or_else(|| format!("partition {p}")),
            None => "(gap)".into(),
        }
    }
}

/// What the trace holds, once it is closed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceSummary {
    pub path: PathBuf,
    pub events: u64,
    pub bytes: u64,
    /// Executed windows written as slices, over every CPU.
    pub windows: u64,
    /// Window records overwritten in an executor's ring before they were read.
    pub lost_records: u64,
    pub health_events: u64,
    /// CLOCK_MONOTONIC ns when the trace was opened and closed.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The first write error: the file is incomplete.
    pub error: Option<String>,
}

struct CpuTrack {
    plan: CpuPlan,
    /// The ring's sequence to read from next.
    next: u64,
    /// The last window start read, written once the record after it says when it ended.
    pending: Option<WindowRecord>,
    windows: u64,
    lost: u64,
    switches_named: bool,
    /// The kernel track (`--trace-stalls`): named once used, and the last instant written on it.
    kernel_named: bool,
    kernel_last_ns: u64,
}

/// Thread ids of the tracks: the health track, then four per CPU plan.
const HEALTH_TID: u64 = 1;
fn tid(k: usize, track: u64) -> u64 {
    10 + 10 * k as u64 + track
}
const ACTUAL: u64 = 0;
const PLANNED: u64 = 1;
const SWITCHES: u64 = 2;
const KERNEL: u64 = 3;

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// The trace file being written. Closed (the JSON completed) by [`TraceWriter::finish`], or on drop.
pub struct TraceWriter {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    system: String,
    pid: u64,
    first: bool,
    cpus: Vec<CpuTrack>,
    health_read: usize,
    summary: TraceSummary,
    outcome: Arc<Mutex<Option<TraceSummary>>>,
}

impl TraceWriter {
    /// Creates (or truncates) the trace file and writes the start of its JSON. Fails before anything else
    /// is built when the path cannot be written.
    pub fn create(path: &Path) -> Result<TraceWriter> {
        let file = File::create(path).map_err(path_err("create", path))?;
        let mut w = TraceWriter {
            path: path.to_path_buf(),
            out: Some(BufWriter::with_capacity(1 << 16, file)),
            system: String::new(),
            pid: u64::from(std::process::id()),
            first: true,
            cpus: Vec::new(),
            health_read: 0,
            summary: TraceSummary { path: path.to_path_buf(), start_ns: crate::clock::monotonic_ns(), ..TraceSummary::default() },
            outcome: Arc::new(Mutex::new(None)),
        };
        w.raw("{\"traceEvents\":[\n");
        if let Some(e) = &w.summary.error {
            return Err(path_err("write", path)(std::io::Error::other(e.clone())));
        }
        Ok(w)
    }

    /// Where the summary appears once the trace is closed (whoever closes it).
    pub fn outcome(&self) -> Arc<Mutex<Option<TraceSummary>>> {
        self.outcome.clone()
    }

    /// Names the process (the system) and the tracks of each CPU's plan.
    pub fn begin(&mut self, system: &str, cpus: Vec<CpuPlan>) {
        self.system = system.to_string();
        self.meta("process_name", None, json!({ "name": format!("partita system {system}") }));
        self.meta("thread_name", Some(HEALTH_TID), json!({ "name": "health" }));
        self.meta("thread_sort_index", Some(HEALTH_TID), json!({ "sort_index": HEALTH_TID }));
        for (k, plan) in cpus.iter().enumerate() {
            for (track, what) in [(ACTUAL, "actual"), (PLANNED, "planned")] {
                self.meta("thread_name", Some(tid(k, track)), json!({ "name": format!("CPU {} plan ({what})", plan.cpu) }));
                self.meta("thread_sort_index", Some(tid(k, track)), json!({ "sort_index": tid(k, track) }));
            }
        }
        self.cpus = cpus.into_iter().map(|plan| CpuTrack { plan, next: 0, pending: None, windows: 0, lost: 0, switches_named: false, kernel_named: false, kernel_last_ns: 0 }).collect();
    }

    /// Reads what is new in every executor's ring and the event log, and writes it.
    pub fn drain(&mut self, executors: &[Executor], log: &EventLog) {
        for (k, e) in executors.iter().enumerate().take(self.cpus.len()) {
            let got = e.windows.read_since(self.cpus[k].next);
            self.windows(k, got);
        }
        let events = log.events_since(self.health_read);
        self.health_read += events.len();
        self.health(&events);
    }

    /// CPU plan `k`'s new window records: each window start before the newest becomes a slice on the actual
    /// track and one on the planned track; lost records cut the pending window (its end is unknown).
    pub fn windows(&mut self, k: usize, got: NewWindows) {
        let Some(track) = self.cpus.get_mut(k) else { return };
        track.next = got.next;
        let mut out = Vec::new();
        if got.lost > 0 {
            track.lost += got.lost;
            let at = track.pending.take().map(|p| p.switched_ns).or(got.records.first().map(|r| r.switched_ns));
            if let Some(at) = at {
                out.push(json!({ "ph": "i", "s": "t", "name": format!("{} window records lost", got.lost), "pid": self.pid, "tid": tid(k, ACTUAL), "ts": us(at), "args": { "lost": got.lost } }));
            }
        }
        for r in got.records {
            if let Some(p) = track.pending.take() {
                out.extend(window_events(self.pid, k, &track.plan, &p, r.switched_ns, Some(r.planned_ns)));
                track.windows += 1;
            }
            if r.window.is_some() {
                out.push(json!({ "ph": "C", "name": format!("CPU {} lateness", track.plan.cpu), "pid": self.pid, "ts": us(r.switched_ns), "args": { "lateness_us": us(r.woke_ns.saturating_sub(r.planned_ns)) } }));
                track.pending = Some(r);
            }
        }
        for e in out {
            self.emit(e);
        }
    }

    /// The plan switches one module's executors made ([`ModulePlans::read`]), as instants on their CPU's
    /// plan-switch track.
    pub fn plan_switches(&mut self, module: &str, reports: &[SwitchReport]) {
        for r in reports {
            let Some(k) = self.cpus.iter().position(|c| c.plan.module == module && c.plan.cpu == r.cpu) else { continue };
            if !self.cpus[k].switches_named {
                self.cpus[k].switches_named = true;
                let cpu = self.cpus[k].plan.cpu;
                self.meta("thread_name", Some(tid(k, SWITCHES)), json!({ "name": format!("CPU {cpu} plan switches") }));
                self.meta("thread_sort_index", Some(tid(k, SWITCHES)), json!({ "sort_index": tid(k, SWITCHES) }));
            }
            let plan = &self.cpus[k].plan;
            let s = &r.record;
            let e = json!({
                "ph": "i", "s": "t", "pid": self.pid, "tid": tid(k, SWITCHES), "ts": us(s.switched_ns),
                "name": format!("plan switch {} → {}", plan.plan(s.from), plan.plan(s.to)),
                "args": {
                    "module": module, "from": plan.plan(s.from), "to": plan.plan(s.to), "now": s.now, "frame": s.frame,
                    "requested_ns": s.requested_ns, "planned_ns": s.planned_ns, "woke_ns": s.woke_ns, "switched_ns": s.switched_ns,
                    "cut_offset_ns": s.cut_offset_ns, "old_frame_ns": s.old_frame_ns, "detail": r.detail,
                }
            });
            self.emit(e);
        }
    }

    /// Window starts the stall tracer explained on CPU `cpu` (`partita up --trace-stalls`): on the CPU's kernel
    /// track, each stall as a slice from its planned start to the executor's wake-up, named by its cause, and
    /// the kernel's events around it (its `sched_switch`es, interrupts, …, on the same CLOCK_MONOTONIC) as
    /// instants. Events already written for an earlier stall are not written again.
    pub fn stalls(&mut self, cpu: usize, explained: &[crate::stalls::Explained]) {
        let Some(k) = self.cpus.iter().position(|c| c.plan.cpu == cpu) else { return };
        if explained.is_empty() {
            return;
        }
        if !self.cpus[k].kernel_named {
            self.cpus[k].kernel_named = true;
            self.meta("thread_name", Some(tid(k, KERNEL)), json!({ "name": format!("CPU {cpu} kernel (stalls)") }));
            self.meta("thread_sort_index", Some(tid(k, KERNEL)), json!({ "sort_index": tid(k, KERNEL) }));
        }
        for x in explained {
            let mut out: Vec<(u64, Value)> = crate::stalls::parse_trace(&x.excerpt)
                .into_iter()
                .map(|e| (e.ns, json!({ "ph": "i", "s": "t", "pid": self.pid, "tid": tid(k, KERNEL), "ts": us(e.ns), "name": e.event, "args": { "task": e.task, "fields": e.fields } })))
                .collect();
            out.push((
                x.planned_ns,
                json!({
                    "ph": "X", "pid": self.pid, "tid": tid(k, KERNEL), "ts": us(x.planned_ns), "dur": us(x.woke_ns.saturating_sub(x.planned_ns)),
                    "name": format!("stall: {}", x.explanation.cause),
                    "args": { "lateness_us": x.explanation.lateness_us, "cause": x.explanation.cause, "detail": x.explanation.detail },
                }),
            ));
            out.sort_by_key(|(ns, _)| *ns);
            for (ns, v) in out {
                if ns < self.cpus[k].kernel_last_ns {
                    continue;
                }
                self.cpus[k].kernel_last_ns = ns;
                self.emit(v);
            }
        }
    }

    /// Event-log events, as instants on the health track.
    pub fn health(&mut self, events: &[Event]) {
        let mut sorted: Vec<&Event> = events.iter().collect();
        sorted.sort_by_key(|e| e.monotonic_ns);
        for e in sorted {
            let mut args = json!({ "partition": e.partition, "event": e.event, "unix_ms": e.unix_ms });
            if let Some(d) = &e.detail {
                args["detail"] = json!(d);
            }
            if let Some(p) = e.pid {
                args["pid"] = json!(p);
            }
            if let Some(x) = &e.exit {
                args["exit"] = serde_json::to_value(x).unwrap_or(Value::Null);
            }
            let v = json!({ "ph": "i", "s": "t", "pid": self.pid, "tid": HEALTH_TID, "ts": us(e.monotonic_ns), "name": format!("{} {}", e.partition, e.event), "args": args });
            self.emit(v);
            self.summary.health_events += 1;
        }
    }

    /// The routers' statistics rows of the state ([`crate::status::Routers`]): each row's numbers (to two levels
    /// deep) as one counter event at `now_ns`, named by the row's router, route and topic.
    pub fn routers(&mut self, routers: &crate::status::Routers, now_ns: u64) {
        for (i, r) in routers.routes.iter().enumerate() {
            let words: Vec<&str> = ["router", "route", "topic"].iter().filter_map(|k| r.get(*k).and_then(Value::as_str)).collect();
            let label = if words.is_empty() { i.to_string() } else { words.join(" ") };
            let mut args = Map::new();
            numbers(r, "", 0, &mut args);
            if !args.is_empty() {
                let v = json!({ "ph": "C", "name": format!("router {label}"), "pid": self.pid, "ts": us(now_ns), "args": args });
                self.emit(v);
            }
        }
    }

    /// Writes what is pending and completes the JSON; the summary also goes to [`TraceWriter::outcome`].
    pub fn finish(mut self) -> TraceSummary {
        self.close()
    }

    fn close(&mut self) -> TraceSummary {
        let end_ns = crate::clock::monotonic_ns();
        if self.out.is_none() {
            return self.summary.clone();
        }
        // The last window of each CPU ends with the trace.
        let mut out = Vec::new();
        for (k, t) in self.cpus.iter_mut().enumerate() {
            if let Some(p) = t.pending.take() {
                out.extend(window_events(self.pid, k, &t.plan, &p, end_ns.max(p.switched_ns), None));
                t.windows += 1;
            }
        }
        for e in out {
            self.emit(e);
        }
        self.summary.end_ns = end_ns;
        self.summary.windows = self.cpus.iter().map(|c| c.windows).sum();
        self.summary.lost_records = self.cpus.iter().map(|c| c.lost).sum();
        let metadata = json!({
            "system": self.system,
            "writer": "partita up --trace",
            "clock": "CLOCK_MONOTONIC: ts is its value in µs (ns in the decimals), as the executors' records, events.jsonl's monotonic_ns and --timeline give it",
            "trace_start_monotonic_ns": self.summary.start_ns,
            "trace_end_monotonic_ns": end_ns,
            "window_slices": self.summary.windows,
            "lost_window_records": self.summary.lost_records,
            "health_events": self.summary.health_events,
            "cpus": self.cpus.iter().map(|c| json!({ "module": c.plan.module, "cpu": c.plan.cpu, "windows": c.windows, "lost_window_records": c.lost })).collect::<Vec<_>>(),
            "kernel_tracks": "none: partita up runs no kernel trace (the stall tracer belongs to partita soak --trace-stalls)",
        });
        let tail = format!("\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{metadata}\n}}\n");
        self.raw(&tail);
        if let Some(mut out) = self.out.take() {
            if let Err(e) = out.flush() {
                self.summary.error.get_or_insert_with(|| format!("write {}: {e}", self.path.display()));
            }
        }
        let summary = self.summary.clone();
        if let Ok(mut o) = self.outcome.lock() {
            *o = Some(summary.clone());
        }
        summary
    }

    fn meta(&mut self, name: &str, tid: Option<u64>, args: Value) {
        let mut v = json!({ "ph": "M", "name": name, "pid": self.pid, "args": args });
        if let Some(t) = tid {
            v["tid"] = json!(t);
        }
        self.emit(v);
    }

    fn emit(&mut self, v: Value) {
        let text = match serde_json::to_string(&v) {
            Ok(t) => t,
            Err(_) => return,
        };
        let sep = if self.first { "" } else { ",\n" };
        self.first = false;
        self.raw(sep);
        self.raw(&text);
        self.summary.events += 1;
    }

    fn raw(&mut self, text: &str) {
        if self.summary.error.is_some() {
            return;
        }
        if let Some(out) = self.out.as_mut() {
            match out.write_all(text.as_bytes()) {
                Ok(()) => self.summary.bytes += text.len() as u64,
                Err(e) => self.summary.error = Some(format!("write {}: {e}", self.path.display())),
            }
        }
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        self.close();
    }
}

/// A window's actual slice (from its switch to `end_ns`) and its planned one (its schedule's duration, cut
/// at the next record's planned instant when a switch at once cut it).
fn window_events(pid: u64, k: usize, plan: &CpuPlan, r: &WindowRecord, end_ns: u64, next_planned: Option<u64>) -> [Value; 2] {
    let name = plan.partition(r.partition);
    let args = json!({
        "module": plan.module, "plan": plan.plan(r.plan), "frame": r.frame, "window": r.window,
        "planned_ns": r.planned_ns, "woke_ns": r.woke_ns, "switched_ns": r.switched_ns,
        "lateness_us": us(r.woke_ns.saturating_sub(r.planned_ns)), "switch_us": us(r.switched_ns.saturating_sub(r.woke_ns)),
    });
    let mut planned = r.window.and_then(|w| plan.durations.get(r.plan).and_then(|d| d.get(w))).copied().unwrap_or(0);
    if let Some(next) = next_planned.filter(|n| *n > r.planned_ns) {
        planned = planned.min(next - r.planned_ns);
    }
    [
        json!({ "ph": "X", "name": name, "pid": pid, "tid": tid(k, ACTUAL), "ts": us(r.switched_ns), "dur": us(end_ns.saturating_sub(r.switched_ns)), "args": args }),
        json!({ "ph": "X", "name": name, "pid": pid, "tid": tid(k, PLANNED), "ts": us(r.planned_ns), "dur": us(planned), "args": { "plan": plan.plan(r.plan), "frame": r.frame, "window": r.window, "planned_ns": r.planned_ns, "duration_ns": planned } }),
    ]
}

/// The numbers of `v`, flattened to `a.b` keys, at most two levels deep and 32 of them.
fn numbers(v: &Value, prefix: &str, depth: usize, out: &mut Map<String, Value>) {
    let Value::Object(o) = v else { return };
    for (k, x) in o {
        if out.len() >= 32 {
            return;
        }
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match x {
            Value::Number(_) => {
                out.insert(key, x.clone());
            }
            Value::Object(_) if depth < 1 => numbers(x, &key, depth + 1, out),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::PlanSwitch;

    fn plan() -> CpuPlan {
        CpuPlan {
            module: "camera".into(),
            cpu: 3,
            plans: vec!["normal".into(), "degraded".into()],
            partitions: vec!["recorder".into(), "routing".into()],
            durations: vec![vec![700_000, 600_000], vec![1_500_000]],
        }
    }

    fn rec(seq_frame: u64, plan: usize, window: Option<usize>, planned_ns: u64, late: u64) -> WindowRecord {
        let partition = match (plan, window) {
            (0, Some(w)) => Some(w),
            (_, Some(_)) => Some(0),
            _ => None,
        };
        WindowRecord { frame: seq_frame, plan, window, partition, planned_ns, woke_ns: planned_ns + late, switched_ns: planned_ns + late + 2_000 }
    }

    const T0: u64 = 1_000_000_000_000;

    #[test]
    fn records_become_slices_a_gap_ends_a_window_lost_records_cut_one_and_the_json_closes() {
        let dir = std::env::temp_dir().join(format!("partita-trace-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.json");
        let mut w = TraceWriter::create(&path).unwrap();
        let outcome = w.outcome();
        w.begin("sys", vec![plan()]);
        // Frame 0: recorder, routing, then a gap (100 µs idle before the frame ends); frame 1: recorder.
        let first = vec![
            rec(0, 0, Some(0), T0, 5_000),
            rec(0, 0, Some(1), T0 + 700_000, 3_000),
            rec(0, 0, None, T0 + 1_300_000, 1_000),
            rec(1, 0, Some(0), T0 + 1_500_000, 4_000),
        ];
        w.windows(0, NewWindows { records: first, lost: 0, next: 4 });
        // Two records lost: frame 1's recorder window has no known end and is cut; then the plan switches.
        let second = vec![rec(2, 1, Some(0), T0 + 4_500_000, 7_000), rec(3, 1, Some(0), T0 + 6_000_000, 2_000)];
        w.windows(0, NewWindows { records: second, lost: 2, next: 8 });
        let switch = PlanSwitch { from: 0, to: 1, now: false, requested_ns: T0 + 10, frame: 2, planned_ns: T0 + 4_500_000, woke_ns: T0 + 4_507_000, switched_ns: T0 + 4_509_000, cut_offset_ns: 1_500_000, old_frame_ns: 1_500_000 };
        w.plan_switches("camera", &[SwitchReport { cpu: 3, record: switch, detail: "CPU 3: normal → degraded".into() }]);
        w.plan_switches("other module", &[SwitchReport { cpu: 3, record: switch, detail: String::new() }]);
        let ev = |ns: u64, event: &'static str| Event { unix_ms: 1, monotonic_ns: ns, partition: "routing".into(), event, pid: Some(42), exit: None, detail: Some("why \"quoted\"".into()) };
        w.health(&[ev(T0 + 2_000, "restart"), ev(T0 + 1_000, "exit")]);
        let routers = |routes: Vec<Value>| crate::status::Routers { updated_unix_ms: 5, routes };
        w.routers(&routers(vec![json!({ "router": "routing", "forwarded": 12, "dropped": { "queue": 1 }, "name2": "x" })]), T0 + 7_000_000);
        w.routers(&routers(vec![json!({ "router": "routing", "route": "requests", "topic": "surveillance/request", "received": 3 })]), T0 + 7_000_001);
        let summary = w.finish();
        assert_eq!(*outcome.lock().unwrap(), Some(summary.clone()));
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(summary.bytes, text.len() as u64);
        let v: Value = serde_json::from_str(&text).expect("the trace is one JSON object");
        assert_eq!(v["displayTimeUnit"], "ns");
        assert_eq!(v["metadata"]["lost_window_records"], 2);
        assert_eq!(v["metadata"]["cpus"][0]["lost_window_records"], 2);
        let events = v["traceEvents"].as_array().unwrap();
        assert_eq!(summary.events, events.len() as u64);
        let on = |tid: u64, ph: &str| events.iter().filter(|e| e["tid"] == tid && e["ph"] == ph).cloned().collect::<Vec<_>>();
        let names = |es: &[Value]| es.iter().map(|e| e["name"].as_str().unwrap().to_string()).collect::<Vec<_>>();
        let actual = on(tid(0, ACTUAL), "X");
        // Recorder and routing of frame 0; frame 1's recorder cut by the loss; the two degraded windows (the
        // last ending with the trace).
        assert_eq!(names(&actual), ["recorder", "routing", "recorder", "recorder"]);
        assert_eq!(summary.windows, 4);
        let ts = |e: &Value| (e["ts"].as_f64().unwrap() * 1e3).round() as u64;
        let dur = |e: &Value| (e["dur"].as_f64().unwrap() * 1e3).round() as u64;
        assert_eq!((ts(&actual[0]), dur(&actual[0])), (T0 + 7_000, 700_000 + 3_000 - 5_000));
        // Routing ends where the gap starts (the gap record's switch), not at the next window.
        assert_eq!(ts(&actual[1]) + dur(&actual[1]), T0 + 1_300_000 + 3_000);
        assert_eq!((ts(&actual[2]), dur(&actual[2])), (T0 + 4_509_000, 1_500_000 - 7_000 + 2_000));
        assert_eq!(actual[0]["args"]["lateness_us"], 5.0);
        assert_eq!(actual[2]["args"]["plan"], "degraded");
        let planned = on(tid(0, PLANNED), "X");
        assert_eq!(names(&planned), names(&actual));
        assert_eq!((ts(&planned[1]), dur(&planned[1])), (T0 + 700_000, 600_000));
        assert_eq!(dur(&planned[3]), 1_500_000);
        let lost = on(tid(0, ACTUAL), "i");
        assert_eq!(names(&lost), ["2 window records lost"]);
        assert_eq!(ts(&lost[0]), T0 + 1_506_000, "at the start of the window it cut");
        let switches = on(tid(0, SWITCHES), "i");
        assert_eq!(names(&switches), ["plan switch normal → degraded"], "one, of this module's CPU 3");
        let lateness: Vec<f64> = events.iter().filter(|e| e["ph"] == "C" && e["name"] == "CPU 3 lateness").map(|e| e["args"]["lateness_us"].as_f64().unwrap()).collect();
        assert_eq!(lateness, [5.0, 3.0, 4.0, 7.0, 2.0], "each window start's, no gap's");
        let health = on(HEALTH_TID, "i");
        assert_eq!(names(&health), ["routing exit", "routing restart"], "in the clock's order");
        assert_eq!(health[0]["args"]["detail"], "why \"quoted\"");
        let router: Vec<&Value> = events.iter().filter(|e| e["ph"] == "C" && e["name"] == "router routing").collect();
        assert_eq!(router.len(), 1);
        assert_eq!(router[0]["args"], json!({ "forwarded": 12, "dropped.queue": 1 }));
        let routes: Vec<&Value> = events.iter().filter(|e| e["ph"] == "C" && e["name"] == "router routing requests surveillance/request").collect();
        assert_eq!(routes.len(), 1, "the status node's rows, named by router, route and topic");
        assert_eq!(routes[0]["args"], json!({ "received": 3 }));
        let thread_names: Vec<&str> = events.iter().filter(|e| e["ph"] == "M" && e["name"] == "thread_name").map(|e| e["args"]["name"].as_str().unwrap()).collect();
        assert_eq!(thread_names, ["health", "CPU 3 plan (actual)", "CPU 3 plan (planned)", "CPU 3 plan switches"]);
    }

    #[test]
    fn a_writer_dropped_without_finish_still_closes_its_json_and_a_bad_path_is_refused() {
        let path = std::env::temp_dir().join(format!("partita-trace-drop-{}.json", std::process::id()));
        {
            let mut w = TraceWriter::create(&path).unwrap();
            w.begin("sys", vec![plan()]);
            w.windows(0, NewWindows { records: vec![rec(0, 0, Some(0), T0, 0)], lost: 0, next: 1 });
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let v: Value = serde_json::from_str(&text).expect("closed on drop");
        assert_eq!(v["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X").count(), 2);
        let bad = Path::new("/nonexistent-partita-dir/t.json");
        let e = TraceWriter::create(bad).err().expect("refused").to_string();
        assert!(e.contains("/nonexistent-partita-dir/t.json"), "{e}");
    }
}
