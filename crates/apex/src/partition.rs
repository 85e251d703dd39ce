//! The partition's operating mode and the process's end (ARINC 653 GET_PARTITION_STATUS, SET_PARTITION_MODE).
use crate::error::{record, ApexError, Service};
use crate::{PartitaHypervisor, EXIT_APPLICATION_ERROR, EXIT_COLD_START, EXIT_IDLE, EXIT_STOPPED, EXIT_WARM_START};
use a653rs::bindings::*;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// How often the start thread, once the partition is in NORMAL mode, looks at the stop flag a signal handler
/// sets: the longest a stop signal waits before the partition's process exits.
const STOP_POLL: Duration = Duration::from_millis(20);

/// The partition's state, shared by its start thread and its processes' threads.
pub(crate) struct PartitionState {
    pub mode: OperatingMode,
    /// When the partition entered NORMAL mode (CLOCK_MONOTONIC ns): the first release point of the processes
    /// started during cold or warm start.
    pub normal_since_ns: Option<u64>,
    pub processes: Vec<crate::process::ProcessRecord>,
}

static STATE: Mutex<PartitionState> = Mutex::new(PartitionState { mode: OperatingMode::ColdStart, normal_since_ns: None, processes: Vec::new() });

/// Notified on every change of [`STATE`] that someone may wait for: the mode, a process ending.
pub(crate) static CHANGED: Condvar = Condvar::new();

pub(crate) fn state() -> MutexGuard<'static, PartitionState> {
    // A thread that panicked while holding the lock leaves the state as consistent as any other point
    // (every change is one assignment), so the lock is taken over rather than poisoning the whole partition.
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn mode() -> OperatingMode {
    state().mode
}

/// Whether the partition is in a start mode, when ports and processes may be created.
pub(crate) fn in_start_mode(service: Service) -> Result<(), ApexError> {
    match mode() {
        OperatingMode::ColdStart | OperatingMode::WarmStart => Ok(()),
        mode => Err(ApexError::NotInStartMode { service, mode }),
    }
}

/// The partition's name for messages people read: the supervisor's `PARTITA_PARTITION`, or outside a
/// partition the program's file name.
pub fn partition_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        partita_env::partition().unwrap_or_else(|| {
            std::env::args_os().next().map(|a| std::path::Path::new(&a).file_name().unwrap_or(&a).to_string_lossy().into_owned()).unwrap_or_else(|| "partition".into())
        })
    })
}

/// Ends the partition's process with `code`, after saying why on stderr (where the supervisor's partition log
/// keeps it). Standard output is flushed by `exit`.
pub(crate) fn exit_partition(code: i32, why: &str) -> ! {
    eprintln!("{}: {why}; the partition's process exits with code {code}", partition_name());
    std::process::exit(code)
}

impl ApexPartitionP4 for PartitaHypervisor {
    fn get_partition_status() -> ApexPartitionStatus {
        let mode = mode();
        ApexPartitionStatus {
            // The partition's share of the plan is the supervisor's; a partition learns it with the plan API (a
            // later issue). Until then: infinite, i.e. not known here.
            period: INFINITE_TIME_VALUE,
            duration: INFINITE_TIME_VALUE,
            // Partitions have names in the system file, not numbers.
            identifier: 0,
            lock_level: 0,
            operating_mode: mode,
            // The supervisor does not yet tell a restarted partition that it was restarted.
            start_condition: StartCondition::NormalStart,
            num_assigned_cores: partita_os::sched::current_thread_cpus().map(|c| c.len() as NumCores).unwrap_or(1),
        }
    }

    fn set_partition_mode(operating_mode: OperatingMode) -> Result<(), ErrorReturnCode> {
        record(set_mode(operating_mode))
    }
}

fn set_mode(to: OperatingMode) -> Result<(), ApexError> {
    let service = Service::SetPartitionMode;
    let from = mode();
    match (to, from) {
        (OperatingMode::Normal, OperatingMode::Normal) => Err(ApexError::NoAction { service, problem: "the partition is in NORMAL mode already" }),
        (OperatingMode::WarmStart, OperatingMode::ColdStart) => Err(ApexError::InvalidMode { service, problem: "a partition in cold start cannot go to warm start" }),
        (OperatingMode::Normal, _) => enter_normal(),
        (OperatingMode::Idle, _) => exit_partition(EXIT_IDLE, "SET_PARTITION_MODE(IDLE)"),
        (OperatingMode::ColdStart, _) => exit_partition(EXIT_COLD_START, "SET_PARTITION_MODE(COLD_START): a restart is the supervisor's"),
        (OperatingMode::WarmStart, _) => exit_partition(EXIT_WARM_START, "SET_PARTITION_MODE(WARM_START): a restart is the supervisor's"),
    }
}

/// NORMAL mode: the processes started during cold or warm start are released, and the calling (start) thread
/// becomes the partition's keeper. It never returns: a653rs's `Partition::run` spins in an empty loop after
/// this call, which would burn the partition's whole CPU time; instead the start thread waits until the
/// partition ends, and then ends its process:
///
/// - a stop signal (SIGTERM from the supervisor, SIGINT, SIGHUP, SIGQUIT): exit with [`EXIT_STOPPED`];
/// - every process that was started has returned from its entry point: exit with [`EXIT_STOPPED`];
/// - a process panicked: its thread is gone, the others go on (a653rs's entry points are `extern "C"`, so
///   a panic aborts the whole process before it gets here).
fn enter_normal() -> Result<(), ApexError> {
    partita_os::signal::install_stop_signals();
    let mut s = state();
    s.mode = OperatingMode::Normal;
    s.normal_since_ns = Some(partita_os::clock::monotonic_ns());
    CHANGED.notify_all();
    loop {
        if partita_os::signal::stop_requested() {
            drop(s);
            exit_partition(EXIT_STOPPED, "stop signal");
        }
        let started = s.processes.iter().filter(|p| p.started).count();
        if started > 0 && s.processes.iter().all(|p| !p.started || p.ended) {
            drop(s);
            exit_partition(EXIT_STOPPED, "every process has returned");
        }
        s = CHANGED.wait_timeout(s, STOP_POLL).unwrap_or_else(|p| p.into_inner()).0;
    }
}

/// RAISE_APPLICATION_ERROR without an error handler: the partition-level response, which is the supervisor's
/// health monitor's (restart, stop or ignore, from the system file) once the process has exited.
pub(crate) fn application_error(message: &str) -> ! {
    exit_partition(EXIT_APPLICATION_ERROR, &format!("application error: {message}"))
}
