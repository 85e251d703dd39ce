//! Partition modes and plan switching at run time.
//!
//! Each planned process partition gets a control page (`partita_ports::control`): the supervisor writes its
//! mode, start condition and the module's plan there, and reads the requests it posts — set its own mode,
//! raise an error, and, for a partition the file marks `system_partition`, switch the module's plan. Every
//! request is judged here; the page is the partition's and may hold anything.
//!
//! A module's plans run on one executor per CPU; a switch is asked of each and happens at the end of each
//! one's current major frame (or at once). The executors record every switch; [`ModulePlans::read`] turns
//! those records into events with the planned and actual instants, and what a switch at once cut.
use crate::executor::{PlanCell, PlanSwitch, Schedule};
use partita_ports::control::{ControlPage, Mode, StartCondition};
use serde::Serialize;
use std::sync::Arc;

/// Event names.
pub const EVENT_PLAN_SWITCH: &str = "plan_switch";
pub const EVENT_PLAN_SWITCH_REQUESTED: &str = "plan_switch_requested";
pub const EVENT_PLAN_SWITCH_REFUSED: &str = "plan_switch_refused";
pub const EVENT_MODE: &str = "mode";
pub const EVENT_ERROR_RAISED: &str = "error_raised";
pub const EVENT_ILLEGAL_REQUEST: &str = "illegal_request";
pub const EVENT_HM_ACTION: &str = "hm_action";

pub fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Idle => "idle",
        Mode::ColdStart => "cold_start",
        Mode::WarmStart => "warm_start",
        Mode::Normal => "normal",
    }
}

/// One executor of a module: its plans' schedules (for what a cut loses) and its cell.
pub struct PlanExecutor {
    pub cpu: usize,
    pub cell: Arc<PlanCell>,
    pub schedules: Vec<Schedule>,
    /// The executor's partitions, by name, in its order.
    pub partitions: Vec<String>,
}

/// A module's named plans and the executors that run them.
pub struct ModulePlans {
    pub module: String,
    pub names: Vec<String>,
    pub executors: Vec<PlanExecutor>,
    /// The plan running on every CPU (the last one each executor reported), and the one asked for.
    pub current: usize,
    pub requested: Option<usize>,
    pub switches: u64,
    /// When the last switch took effect (CLOCK_MONOTONIC ns of its planned instant; 0: none yet).
    pub last_switch_ns: u64,
}

/// A module's plans as `state.json` shows them.
#[derive(Debug, Clone, Serialize)]
pub struct PlanState {
    pub module: String,
    pub plan: String,
    pub plans: Vec<String>,
    /// The plan a switch asked for and not yet made on every CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    pub switches: u64,
}

/// A switch made on one CPU, as the event log tells it.
#[derive(Debug, Clone)]
pub struct SwitchReport {
    pub cpu: usize,
    pub record: PlanSwitch,
    pub detail: String,
}

impl ModulePlans {
    pub fn new(module: &str, names: Vec<String>, executors: Vec<PlanExecutor>, initial: usize) -> ModulePlans {
        ModulePlans { module: module.to_string(), names, executors, current: initial, requested: None, switches: 0, last_switch_ns: 0 }
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Asks every CPU of the module for plan `plan`, at the end of its frame or at once.
    pub fn request(&mut self, plan: usize, now: bool) {
        for e in &self.executors {
            e.cell.request(plan, now);
        }
        // A request for the plan running replaces a pending one and is then dropped by the executors.
        self.requested = (plan != self.current).then_some(plan);
    }

    /// The switches the executors made since the last look, each with its event text.
    pub fn read(&mut self) -> Vec<SwitchReport> {
        let mut out = Vec::new();
        for e in &self.executors {
            for r in e.cell.take_switches() {
                let name = |i: usize| self.names.get(i).cloned().unwrap_or_else(|| format!("plan {i}"));
                let when = if r.now { format!("at once, cutting the old frame at {:.1} µs of {:.1} µs", r.cut_offset_ns as f64 / 1e3, r.old_frame_ns as f64 / 1e3) } else { "at the end of a major frame".to_string() };
                let mut detail = format!(
                    "CPU {}: {} → {} {when}; the new plan's frame {} planned at {} ns, the executor woke {:.1} µs late and switched in {:.1} µs",
                    e.cpu,
                    name(r.from),
                    name(r.to),
                    r.frame,
                    r.planned_ns,
                    r.woke_ns.saturating_sub(r.planned_ns) as f64 / 1e3,
                    r.switched_ns.saturating_sub(r.woke_ns) as f64 / 1e3
                );
                if r.now {
                    let lost = lost_by_cut(e, &r);
                    if lost.is_empty() {
                        detail.push_str("; no window was cut");
                    } else {
                        let parts: Vec<String> = lost.iter().map(|(p, ns)| format!("{p} {:.1} µs", *ns as f64 / 1e3)).collect();
                        detail.push_str(&format!("; windows lost to the cut: {}", parts.join(", ")));
                    }
                }
                out.push(SwitchReport { cpu: e.cpu, record: r, detail });
            }
        }
        self.switches += out.len() as u64;
        if let Some(ns) = out.iter().map(|r| r.record.planned_ns).max() {
            self.last_switch_ns = ns;
        }
        if let Some(last) = out.last() {
            let to = last.record.to;
            if self.executors.iter().all(|e| e.cell.current() == to) {
                self.current = to;
                if self.requested == Some(to) {
                    self.requested = None;
                }
            }
        }
        out
    }

    pub fn state(&self) -> PlanState {
        PlanState {
            module: self.module.clone(),
            plan: self.names.get(self.current).cloned().unwrap_or_default(),
            plans: self.names.clone(),
            next: self.requested.filter(|r| *r != self.current).and_then(|r| self.names.get(r).cloned()),
            switches: self.switches,
        }
    }
}

/// What each partition of the old plan lost to a switch at once: the time its windows had left between the cut
/// and the end of the old frame.
pub fn lost_by_cut(e: &PlanExecutor, r: &PlanSwitch) -> Vec<(String, u64)> {
    let Some(old) = e.schedules.get(r.from) else { return Vec::new() };
    let mut lost: Vec<(String, u64)> = Vec::new();
    for w in old.windows() {
        let (start, end) = (w.offset.as_nanos() as u64, (w.offset + w.duration).as_nanos() as u64);
        let cut = r.cut_offset_ns;
        let ns = end.saturating_sub(cut.max(start));
        if ns == 0 {
            continue;
        }
        let name = e.partitions.get(w.partition).cloned().unwrap_or_default();
        match lost.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => *t += ns,
            None => lost.push((name, ns)),
        }
    }
    lost
}

/// A planned process partition's control page and what the supervisor knows of its mode.
pub struct PartitionControl {
    pub name: String,
    pub module: String,
    pub system_partition: bool,
    pub page: Arc<ControlPage>,
    pub mode: Mode,
    /// Its executor (index among the supervisor's executors) and its index there.
    pub executor: usize,
    pub index: usize,
}

impl PartitionControl {
    /// Sets and publishes its mode; the event text when it changed.
    pub fn set_mode(&mut self, mode: Mode, why: &str) -> Option<String> {
        self.page.set_mode(mode);
        if self.mode == mode {
            return None;
        }
        let text = format!("{} → {} ({why})", mode_name(self.mode), mode_name(mode));
        self.mode = mode;
        Some(text)
    }

    pub fn set_start_condition(&self, c: StartCondition) {
        self.page.set_start_condition(c);
    }
}

/// The executors' idle probe of a partition: its page's idle request, one atomic load.
pub fn idle_probe(page: &Arc<ControlPage>) -> crate::executor::IdleProbe {
    let page = page.clone();
    Arc::new(move || page.idle_requested())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::Window;
    use std::time::Duration;

    #[test]
    fn a_cut_loses_the_rest_of_the_old_frames_windows() {
        let us = Duration::from_micros;
        let plan = Schedule::new(us(1500), vec![Window { partition: 0, offset: us(0), duration: us(700) }, Window { partition: 1, offset: us(700), duration: us(800) }]).unwrap();
        let e = PlanExecutor { cpu: 0, cell: Arc::new(crate::executor::PlanCell::for_tests(2)), schedules: vec![plan], partitions: vec!["recorder".into(), "routing".into()] };
        let r = |cut: u64| PlanSwitch { from: 0, to: 0, now: true, requested_ns: 0, frame: 0, planned_ns: 0, woke_ns: 0, switched_ns: 0, cut_offset_ns: cut, old_frame_ns: 1_500_000 };
        assert_eq!(lost_by_cut(&e, &r(300_000)), vec![("recorder".to_string(), 400_000), ("routing".to_string(), 800_000)]);
        assert_eq!(lost_by_cut(&e, &r(700_000)), vec![("routing".to_string(), 800_000)]);
        assert_eq!(lost_by_cut(&e, &r(1_500_000)), vec![]);
    }
}
