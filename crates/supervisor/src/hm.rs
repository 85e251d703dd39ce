//! The health-monitor tables at run time: which action an error of a kind in a partition gets. The partition's
//! table is looked at first, then its module's, then the system's ([`System::hm_resolve`]); an error none of
//! them names gets the default: a kind that ended the partition's process tree its `health` action,
//! `power_fail` the system-level `stop_module`, any other kind `ignore` (logged). An entry with an escalation
//! counts the occurrences of its kind per partition: beyond `max` within `within`, its `then` applies.
use partita_system::{ErrorKind, HmAction, HmEntry, HmLevel, HmResolution, System};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// What to do about one error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// An entry of a table: its action, its level, and whether its escalation chose it.
    Table { action: HmAction, level: HmLevel, escalated: bool, occurrences: u32 },
    /// No table names the kind and it ended the partition: the partition's own `health` action.
    Health,
    /// No table names the kind: the default action of its level.
    Default { action: HmAction, level: HmLevel },
}

impl Decision {
    /// The action, where the decision is not the partition's `health`.
    pub fn action(&self) -> Option<&HmAction> {
        match self {
            Decision::Table { action, .. } | Decision::Default { action, .. } => Some(action),
            Decision::Health => None,
        }
    }

    /// For the event log: `restart_cold (partition table, 3rd within 60 s: escalated)`.
    pub fn describe(&self) -> String {
        match self {
            Decision::Table { action, level, escalated, occurrences } => {
                let plan = match action {
                    HmAction::SwitchPlan(p) => format!(" to {p}"),
                    _ => String::new(),
                };
                let why = if *escalated { format!(", occurrence {occurrences}: escalated") } else { String::new() };
                format!("{}{plan} ({} table{why})", action.as_str(), level_name(*level))
            }
            Decision::Health => "the partition's health action (no table names this kind)".into(),
            Decision::Default { action, level } => format!("{} (default at {} level)", action.as_str(), level_name(*level)),
        }
    }
}

pub fn level_name(l: HmLevel) -> &'static str {
    match l {
        HmLevel::System => "system",
        HmLevel::Module => "module",
        HmLevel::Partition => "partition",
    }
}

/// The tables of one system and the occurrences their escalations count.
#[derive(Debug)]
pub struct HealthTables {
    system: System,
    /// (partition or module, kind) → when it occurred, within the longest escalation window.
    seen: HashMap<(String, ErrorKind), VecDeque<Instant>>,
}

/// The most occurrences remembered per partition and kind (an escalation's `max` is at most 1000).
const MAX_REMEMBERED: usize = 1_001;

impl HealthTables {
    pub fn new(system: &System) -> HealthTables {
        HealthTables { system: system.clone(), seen: HashMap::new() }
    }

    /// The action for an error of `kind` in partition `partition` of `module` (the lookup is the system
    /// model's [`System::hm_resolve`]); `ended`: the error ended the partition's process tree. A kind that
    /// can end a process but did not (an OOM kill of one of its processes, a denied system call) is logged and
    /// ignored unless a table names it.
    pub fn decide(&mut self, module: &str, partition: &str, kind: ErrorKind, ended: bool, now: Instant) -> Decision {
        let resolved = self.system.module(module).and_then(|m| Some(self.system.hm_resolve(m, m.partitions.iter().find(|p| p.name == partition)?, kind, ended)));
        self.escalate(partition, kind, resolved, ended, now)
    }

    /// The action for an error of module `module` as a whole (`power_fail`): [`System::hm_resolve_module`],
    /// with its escalation counted for the module.
    pub fn decide_module(&mut self, module: &str, kind: ErrorKind, now: Instant) -> Decision {
        let resolved = self.system.module(module).map(|m| self.system.hm_resolve_module(m, kind));
        self.escalate(module, kind, resolved, false, now)
    }

    /// A resolution made a decision: a table's entry counts its occurrence for `key` and applies its
    /// escalation.
    fn escalate(&mut self, key: &str, kind: ErrorKind, resolved: Option<HmResolution>, ended: bool, now: Instant) -> Decision {
        let (entry, level) = match resolved {
            Some(HmResolution::Table { level, entry }) => (entry, level),
            Some(HmResolution::Health(_)) if ended => return Decision::Health,
            Some(HmResolution::Default { level, action }) => return Decision::Default { action, level },
            _ => return Decision::Default { action: HmAction::Ignore, level: HmLevel::Partition },
        };
        let HmEntry { action, escalate } = entry;
        let seen = self.seen.entry((key.to_string(), kind)).or_default();
        seen.push_back(now);
        if seen.len() > MAX_REMEMBERED {
            seen.pop_front();
        }
        match escalate {
            None => Decision::Table { action, level, escalated: false, occurrences: seen.len() as u32 },
            Some(e) => {
                let within: Duration = e.within.to_std();
                while seen.front().is_some_and(|t| now.duration_since(*t) > within) {
                    seen.pop_front();
                }
                let n = seen.len() as u32;
                if n > e.max {
                    Decision::Table { action: e.then, level, escalated: true, occurrences: n }
                } else {
                    Decision::Table { action, level, escalated: false, occurrences: n }
                }
            }
        }
    }
}

/// The kind of error a partition's end is: its signal (SIGSEGV, SIGFPE, SIGBUS/SIGILL, SIGSYS), an OOM kill,
/// else `exited`.
pub fn kind_of_end(exit: &crate::health::ExitKind) -> ErrorKind {
    use crate::health::ExitKind;
    match *exit {
        ExitKind::OomKilled => ErrorKind::Oom,
        ExitKind::Signaled { signal } if signal == libc::SIGSEGV => ErrorKind::MemoryViolation,
        ExitKind::Signaled { signal } if signal == libc::SIGFPE => ErrorKind::NumericError,
        ExitKind::Signaled { signal } if signal == libc::SIGBUS || signal == libc::SIGILL => ErrorKind::HardwareFault,
        ExitKind::Signaled { signal } if signal == libc::SIGSYS => ErrorKind::SeccompDenial,
        _ => ErrorKind::Exited,
    }
}

/// The kind of error a monitor event is (`oom`, `pids_limit`, `seccomp`, and the window watch's).
pub fn kind_of_event(event: &str) -> Option<ErrorKind> {
    Some(match event {
        "oom" => ErrorKind::Oom,
        "pids_limit" => ErrorKind::PidsLimit,
        "seccomp" => ErrorKind::SeccompDenial,
        "window_missed" => ErrorKind::MissedWindow,
        "ran_outside_window" => ErrorKind::RanOutsideWindow,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[system]
name = "hm"
[health_monitor]
deadline_missed = "stop_module"
hardware_fault = "stop_module"
[[module]]
name = "core"
cpus = [0]
default_plan = "normal"
[module.health_monitor]
application_error = "stop_module"
deadline_missed = { action = "switch_plan", plan = "degraded" }
[[module.partition]]
name = "routing"
command = ["true"]
[module.partition.health_monitor]
application_error = "restart_warm"
exited = { action = "restart_cold", max = 2, within = "60s", then = "switch_plan", plan = "degraded" }
[[module.partition]]
name = "recorder"
command = ["true"]
[[module.plan]]
name = "normal"
cpu = 0
major_frame = "1ms"
[[module.plan.window]]
partition = "routing"
start = "0us"
duration = "500us"
[[module.plan.window]]
partition = "recorder"
start = "500us"
duration = "500us"
[[module.plan]]
name = "degraded"
cpu = 0
major_frame = "1ms"
[[module.plan.window]]
partition = "recorder"
start = "0us"
duration = "900us"
[[module.plan.window]]
partition = "routing"
start = "900us"
duration = "100us"
"#;

    fn tables() -> HealthTables {
        let system = partita_system::parse(FILE, "hm.toml", &partita_system::Host::with_cpus(1)).unwrap();
        HealthTables::new(&system)
    }

    #[test]
    fn the_partition_table_comes_first_then_the_module_then_the_system_then_the_defaults() {
        let mut t = tables();
        let now = Instant::now();
        assert!(matches!(t.decide("core", "routing", ErrorKind::ApplicationError, false, now), Decision::Table { action: HmAction::RestartWarm, level: HmLevel::Partition, .. }));
        assert!(matches!(t.decide("core", "recorder", ErrorKind::ApplicationError, false, now), Decision::Table { action: HmAction::StopModule, level: HmLevel::Module, .. }));
        assert!(matches!(t.decide("core", "recorder", ErrorKind::DeadlineMissed, false, now), Decision::Table { action: HmAction::SwitchPlan(_), level: HmLevel::Module, .. }));
        assert!(matches!(t.decide("core", "recorder", ErrorKind::HardwareFault, true, now), Decision::Table { action: HmAction::StopModule, level: HmLevel::System, .. }));
        assert_eq!(t.decide("core", "recorder", ErrorKind::Exited, true, now), Decision::Health);
        // An OOM kill of one of its processes did not end it: ignored (logged) without a table.
        assert_eq!(t.decide("core", "recorder", ErrorKind::Oom, false, now), Decision::Default { action: HmAction::Ignore, level: HmLevel::Partition });
        assert_eq!(t.decide("core", "recorder", ErrorKind::PowerFail, false, now), Decision::Default { action: HmAction::StopModule, level: HmLevel::System });
        // An error of the module as a whole: its table, then the system's, then the default.
        assert_eq!(t.decide_module("core", ErrorKind::PowerFail, now), Decision::Default { action: HmAction::StopModule, level: HmLevel::System });
        assert!(matches!(t.decide_module("core", ErrorKind::DeadlineMissed, now), Decision::Table { action: HmAction::SwitchPlan(_), level: HmLevel::Module, .. }));
        assert!(matches!(t.decide_module("core", ErrorKind::HardwareFault, now), Decision::Table { action: HmAction::StopModule, level: HmLevel::System, .. }));
        assert_eq!(t.decide_module("core", ErrorKind::Oom, now), Decision::Default { action: HmAction::Ignore, level: HmLevel::Module });
    }

    #[test]
    fn an_escalation_applies_beyond_max_occurrences_within_its_window_and_forgets_older_ones() {
        let mut t = tables();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let got: Vec<(HmAction, bool)> = [0, 10, 20, 30]
            .into_iter()
            .map(|s| match t.decide("core", "routing", ErrorKind::Exited, true, at(s)) {
                Decision::Table { action, escalated, .. } => (action, escalated),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got[0], (HmAction::RestartCold, false));
        assert_eq!(got[1], (HmAction::RestartCold, false));
        assert_eq!(got[2], (HmAction::SwitchPlan("degraded".into()), true));
        assert_eq!(got[3], (HmAction::SwitchPlan("degraded".into()), true));
        // 100 s later the earlier ones are out of the window: a restart again.
        assert!(matches!(t.decide("core", "routing", ErrorKind::Exited, true, at(130)), Decision::Table { action: HmAction::RestartCold, escalated: false, .. }));
        // Another partition counts its own.
        assert_eq!(t.decide("core", "recorder", ErrorKind::Exited, true, at(130)), Decision::Health);
    }

    #[test]
    fn the_control_page_names_the_error_kinds_as_the_system_file_does() {
        // partita-ports cannot link the system model: its list of names is checked against it here.
        let page = partita_ports::control::ERROR_KIND_NAMES;
        assert_eq!(page.len(), ErrorKind::ALL.len());
        for (code, name) in page.iter().enumerate() {
            assert_eq!(ErrorKind::from_code(code as u64).map(|k| k.as_str()), Some(*name));
        }
    }

    #[test]
    fn ends_are_classified_by_their_signal() {
        use crate::health::ExitKind;
        assert_eq!(kind_of_end(&ExitKind::Signaled { signal: libc::SIGSEGV }), ErrorKind::MemoryViolation);
        assert_eq!(kind_of_end(&ExitKind::Signaled { signal: libc::SIGFPE }), ErrorKind::NumericError);
        assert_eq!(kind_of_end(&ExitKind::Signaled { signal: libc::SIGILL }), ErrorKind::HardwareFault);
        assert_eq!(kind_of_end(&ExitKind::Signaled { signal: libc::SIGSYS }), ErrorKind::SeccompDenial);
        assert_eq!(kind_of_end(&ExitKind::OomKilled), ErrorKind::Oom);
        assert_eq!(kind_of_end(&ExitKind::Signaled { signal: libc::SIGKILL }), ErrorKind::Exited);
        assert_eq!(kind_of_end(&ExitKind::Exited { code: 0 }), ErrorKind::Exited);
    }
}
