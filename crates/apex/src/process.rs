//! ARINC 653 processes as threads of the partition's process (CREATE_PROCESS, START).
//!
//! A process started during cold or warm start gets its thread at once, and the thread waits until the
//! partition enters NORMAL mode: that instant is the first release point of every such process. A periodic
//! process is released every `period` after it ([`crate::time`]'s PERIODIC_WAIT). Priorities, time capacities
//! and deadlines are checked and kept, not enforced: the threads share the partition's CPU time under Linux's
//! ordinary scheduler (a partition may not raise its scheduling priority), and nothing watches deadlines yet.
use crate::error::{record, ApexError, Service};
use crate::partition::{in_start_mode, state, CHANGED};
use crate::PartitaHypervisor;
use a653rs::bindings::*;
use a653rs::prelude::Name;
use std::cell::Cell;

/// The least stack a process's thread gets, whatever its attributes ask: an ARINC 653 configuration sizes
/// stacks for an embedded kernel (a few KB), and Rust's standard library (formatting, printing) needs more.
const MIN_STACK: usize = 256 << 10;

/// The most processes in one partition: ARINC 653 Part 1's default limit (`ApexLimits`).
const MAX_PROCESSES: u32 = 128;

/// A process as the partition knows it.
pub(crate) struct ProcessRecord {
    pub name: String,
    pub attributes: ApexProcessAttribute,
    pub started: bool,
    /// Its entry point has returned.
    pub ended: bool,
}

/// What a process's own thread knows of it (the calling process, for PERIODIC_WAIT and REPLENISH).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Current {
    pub id: ProcessId,
    /// `None`: aperiodic.
    pub period_ns: Option<u64>,
    /// `None`: infinite.
    pub time_capacity_ns: Option<u64>,
    /// Its latest release point (CLOCK_MONOTONIC ns).
    pub release_ns: u64,
    /// Its current deadline; `None`: none (infinite time capacity).
    pub deadline_ns: Option<u64>,
}

thread_local! {
    static CURRENT: Cell<Option<Current>> = const { Cell::new(None) };
}

/// The calling process; `None` on the start thread (or any thread the application made itself).
pub(crate) fn current() -> Option<Current> {
    CURRENT.with(Cell::get)
}

pub(crate) fn set_current(c: Current) {
    CURRENT.with(|cell| cell.set(Some(c)));
}

/// The calling process's name, for messages.
pub(crate) fn current_name() -> Option<String> {
    let id = current()?.id;
    state().processes.get(usize::try_from(id).ok()?.checked_sub(1)?).map(|p| p.name.clone())
}

/// A time attribute in ns: `None` for infinite (any negative value, as ARINC 653 reads it).
fn time_ns(t: ApexSystemTime) -> Option<u64> {
    u64::try_from(t).ok()
}

impl ApexProcessP4 for PartitaHypervisor {
    fn create_process(attributes: &ApexProcessAttribute) -> Result<ProcessId, ErrorReturnCode> {
        record(create(attributes))
    }

    fn start(process_id: ProcessId) -> Result<(), ErrorReturnCode> {
        record(start(process_id))
    }
}

fn create(a: &ApexProcessAttribute) -> Result<ProcessId, ApexError> {
    let service = Service::CreateProcess;
    let bad = |problem: String| ApexError::InvalidParameter { service, problem };
    in_start_mode(service)?;
    let name = Name::new(a.name).to_str().ok().filter(|n| !n.is_empty()).map(str::to_string).ok_or(ApexError::BadName { service, what: "the process's name" })?;
    if !(MIN_PRIORITY_VALUE..=MAX_PRIORITY_VALUE).contains(&a.base_priority) {
        return Err(bad(format!("process {name:?}: base priority {} is outside {MIN_PRIORITY_VALUE}..={MAX_PRIORITY_VALUE}", a.base_priority)));
    }
    if a.stack_size == 0 {
        return Err(bad(format!("process {name:?}: a stack of 0 bytes")));
    }
    let (period, capacity) = (time_ns(a.period), time_ns(a.time_capacity));
    if period == Some(0) {
        return Err(bad(format!("process {name:?}: a period of 0 (a periodic process needs a positive period; INFINITE_TIME_VALUE makes it aperiodic)")));
    }
    if capacity == Some(0) {
        return Err(bad(format!("process {name:?}: a time capacity of 0")));
    }
    // An infinite time capacity is allowed for a periodic process too (no deadline), as a653rs's examples use.
    if let (Some(p), Some(c)) = (period, capacity) {
        if c > p {
            return Err(bad(format!("process {name:?}: its time capacity of {c} ns exceeds its period of {p} ns")));
        }
    }
    let mut s = state();
    if s.processes.iter().any(|p| p.name == name) {
        return Err(ApexError::AlreadyCreated { service, what: "process", name });
    }
    if s.processes.len() >= MAX_PROCESSES as usize {
        return Err(ApexError::Limit { service, what: "processes", limit: MAX_PROCESSES });
    }
    s.processes.push(ProcessRecord { name, attributes: a.clone(), started: false, ended: false });
    Ok(s.processes.len() as ProcessId)
}

fn start(id: ProcessId) -> Result<(), ApexError> {
    let service = Service::Start;
    let mut s = state();
    let during_start = s.mode != OperatingMode::Normal;
    let Some(p) = usize::try_from(id).ok().and_then(|i| i.checked_sub(1)).and_then(|i| s.processes.get_mut(i)) else {
        return Err(ApexError::UnknownId { service, what: "process", id });
    };
    if p.started && !p.ended {
        return Err(ApexError::NoAction { service, problem: "the process is running already (not dormant)" });
    }
    let attributes = p.attributes.clone();
    let name = p.name.clone();
    let stack = (attributes.stack_size as usize).max(MIN_STACK);
    std::thread::Builder::new()
        .name(name.clone())
        .stack_size(stack)
        .spawn(move || run(id, attributes, during_start))
        .map_err(|source| ApexError::Thread { service, process: name, source })?;
    p.started = true;
    p.ended = false;
    Ok(())
}

/// A process's thread: waits for its first release, runs its entry point, and tells the partition when the
/// entry point returns (ARINC 653 processes normally never do; here a returned process is dormant).
fn run(id: ProcessId, attributes: ApexProcessAttribute, started_during_start: bool) {
    let release_ns = {
        let mut s = state();
        while s.mode != OperatingMode::Normal {
            s = CHANGED.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        // Started during cold or warm start: released when the partition entered NORMAL mode, with every
        // other such process. Started later (by another process): released now.
        match s.normal_since_ns {
            Some(entered) if started_during_start => entered,
            _ => partita_os::clock::monotonic_ns(),
        }
    };
    let time_capacity_ns = time_ns(attributes.time_capacity);
    set_current(Current {
        id,
        period_ns: time_ns(attributes.period),
        time_capacity_ns,
        release_ns,
        deadline_ns: time_capacity_ns.map(|c| release_ns.saturating_add(c)),
    });
    (attributes.entry_point)();
    let mut s = state();
    if let Some(p) = s.processes.get_mut(id as usize - 1) {
        p.ended = true;
    }
    CHANGED.notify_all();
}
