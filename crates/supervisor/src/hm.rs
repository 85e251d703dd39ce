//! The health-monitor tables at run time: which action an error of a kind, in a partition (or in the module as
//! a whole), gets. The partition's table is looked at first, then its module's, then the system's; an error
//! none of them names gets the default: a kind that ended the partition's process tree its `health` action,
//! `power_fail` the system-level `stop_module`, any other kind `ignore` (logged). An entry with an escalation
//! counts the occurrences of its kind per partition: beyond `max` within `within`, its `then` applies.
use partita_system::{ErrorKind, HmAction, HmEntry, HmLevel, HmTable, System};
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
#[derive(Debug, Default)]
pub struct HealthTables {
    system: HmTable,
    modules: HashMap<String, HmTable>,
    partitions: HashMap<String, (String, HmTable)>,
    /// (partition or module, kind) → when it occurred, within the longest escalation window.
    seen: HashMap<(String, ErrorKind), VecDeque<Instant>>,
}

/// The most occurrences remembered per partition and kind (an escalation's `max` is at most 1000).
const MAX_REMEMBERED: usize = 1_001;

impl HealthTables {
    pub fn new(system: &System) -> HealthTables {
        let mut t = HealthTables { system: system.health_monitor.clone(), ..HealthTables::default() };
        for m in &system.modules {
            t.modules.insert(m.name.clone(), m.health_monitor.clone());
            for p in &m.partitions {
                t.partitions.insert(p.name.clone(), (m.name.clone(), p.health_monitor.clone()));
            }
        }
        t
    }

    /// Whether any table has an entry: without, the supervisor behaves as before tables existed.
    pub fn is_empty(&self) -> bool {
        self.system.entries.is_empty() && self.modules.values().all(|t| t.entries.is_empty()) && self.partitions.values().all(|(_, t)| t.entries.is_empty())
    }

    /// The action for an error of `kind` in partition `partition` (or, with `None`, in module `module` as a
    /// whole); `ended`: the error ended the partition's process tree.
    pub fn decide(&mut self, module: &str, partition: Option<&str>, kind: ErrorKind, ended: bool, now: Instant) -> Decision {
        let from_partition = partition.and_then(|p| self.partitions.get(p)).and_then(|(_, t)| t.entries.get(&kind)).map(|e| (e.clone(), HmLevel::Partition));
        let found = from_partition
            .or_else(|| self.modules.get(module).and_then(|t| t.entries.get(&kind)).map(|e| (e.clone(), HmLevel::Module)))
            .or_else(|| self.system.entries.get(&kind).map(|e| (e.clone(), HmLevel::System)));
        let key = (partition.unwrap_or(module).to_string(), kind);
        let Some((entry, level)) = found else {
            return if kind == ErrorKind::PowerFail {
                Decision::Default { action: HmAction::StopModule, level: HmLevel::System }
            } else if ended {
                Decision::Health
            } else {
                Decision::Default { action: HmAction::Ignore, level: HmLevel::Partition }
            };
        };
        let HmEntry { action, escalate } = entry;
        let seen = self.seen.entry(key).or_default();
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
    use partita_system::HmEscalation;

    fn tables(partition: &[(ErrorKind, HmEntry)], module: &[(ErrorKind, HmEntry)], system: &[(ErrorKind, HmEntry)]) -> HealthTables {
        let mut t = HealthTables { system: HmTable { entries: system.iter().cloned().collect() }, ..HealthTables::default() };
        t.modules.insert("core".into(), HmTable { entries: module.iter().cloned().collect() });
        t.partitions.insert("routing".into(), ("core".into(), HmTable { entries: partition.iter().cloned().collect() }));
        t.partitions.insert("recorder".into(), ("core".into(), HmTable::default()));
        t
    }

    fn entry(a: HmAction) -> HmEntry {
        HmEntry { action: a, escalate: None }
    }

    #[test]
    fn the_partition_table_comes_first_then_the_module_then_the_system_then_the_defaults() {
        let mut t = tables(
            &[(ErrorKind::ApplicationError, entry(HmAction::RestartWarm))],
            &[(ErrorKind::ApplicationError, entry(HmAction::StopModule)), (ErrorKind::DeadlineMissed, entry(HmAction::SwitchPlan("degraded".into())))],
            &[(ErrorKind::DeadlineMissed, entry(HmAction::StopModule)), (ErrorKind::HardwareFault, entry(HmAction::StopModule))],
        );
        let now = Instant::now();
        let action = |d: Decision| (d.action().cloned(), matches!(d, Decision::Table { level: HmLevel::Partition, .. }));
        assert_eq!(action(t.decide("core", Some("routing"), ErrorKind::ApplicationError, false, now)), (Some(HmAction::RestartWarm), true));
        assert!(matches!(t.decide("core", Some("recorder"), ErrorKind::ApplicationError, false, now), Decision::Table { action: HmAction::StopModule, level: HmLevel::Module, .. }));
        assert!(matches!(t.decide("core", Some("recorder"), ErrorKind::DeadlineMissed, false, now), Decision::Table { action: HmAction::SwitchPlan(_), level: HmLevel::Module, .. }));
        assert!(matches!(t.decide("core", Some("recorder"), ErrorKind::HardwareFault, true, now), Decision::Table { action: HmAction::StopModule, level: HmLevel::System, .. }));
        assert_eq!(t.decide("core", Some("recorder"), ErrorKind::Exited, true, now), Decision::Health);
        assert_eq!(t.decide("core", Some("recorder"), ErrorKind::Oom, false, now), Decision::Default { action: HmAction::Ignore, level: HmLevel::Partition });
        assert_eq!(t.decide("core", None, ErrorKind::PowerFail, false, now), Decision::Default { action: HmAction::StopModule, level: HmLevel::System });
    }

    #[test]
    fn an_escalation_applies_beyond_max_occurrences_within_its_window_and_forgets_older_ones() {
        let e = HmEntry {
            action: HmAction::RestartCold,
            escalate: Some(HmEscalation { max: 2, within: partita_system::Duration::from_millis(60_000), then: HmAction::SwitchPlan("degraded".into()) }),
        };
        let mut t = tables(&[(ErrorKind::Exited, e)], &[], &[]);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let got: Vec<(HmAction, bool)> = [0, 10, 20, 30]
            .into_iter()
            .map(|s| match t.decide("core", Some("routing"), ErrorKind::Exited, true, at(s)) {
                Decision::Table { action, escalated, .. } => (action, escalated),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got[0], (HmAction::RestartCold, false));
        assert_eq!(got[1], (HmAction::RestartCold, false));
        assert_eq!(got[2], (HmAction::SwitchPlan("degraded".into()), true));
        assert_eq!(got[3], (HmAction::SwitchPlan("degraded".into()), true));
        // 100 s later the earlier ones are out of the window: a restart again.
        assert!(matches!(t.decide("core", Some("routing"), ErrorKind::Exited, true, at(130)), Decision::Table { action: HmAction::RestartCold, escalated: false, .. }));
        // Another partition counts its own.
        assert_eq!(t.decide("core", Some("recorder"), ErrorKind::Exited, true, at(130)), Decision::Health);
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
