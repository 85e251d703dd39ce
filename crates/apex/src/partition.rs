//! The partition's operating mode and the process's end (ARINC 653 GET_PARTITION_STATUS, SET_PARTITION_MODE).
use crate::control::{ask, page, SUPERVISOR_WAIT};
use crate::error::{record, ApexError, Service};
use crate::{PartitaHypervisor, EXIT_APPLICATION_ERROR, EXIT_COLD_START, EXIT_IDLE, EXIT_STOPPED, EXIT_WARM_START};
use a653rs::bindings::*;
use partita_ports::control::{Control, Mode, Outcome, Request};
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
    /// Whether the start mode was taken from the control page (once, at the first look at the state).
    pub from_page: bool,
}

static STATE: Mutex<PartitionState> = Mutex::new(PartitionState { mode: OperatingMode::ColdStart, normal_since_ns: None, processes: Vec::new(), from_page: false });

/// Notified on every change of [`STATE`] that someone may wait for: the mode, a process ending.
pub(crate) static CHANGED: Condvar = Condvar::new();

pub(crate) fn state() -> MutexGuard<'static, PartitionState> {
    // A thread that panicked while holding the lock leaves the state as consistent as any other point
    // (every change is one assignment), so the lock is taken over rather than poisoning the whole partition.
    let mut s = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if !s.from_page {
        s.from_page = true;
        // A partition the supervisor restarted warm starts in WARM_START: the page says so.
        if page().and_then(Control::mode) == Some(Mode::WarmStart) && s.mode == OperatingMode::ColdStart {
            s.mode = OperatingMode::WarmStart;
        }
    }
    s
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

fn operating_mode(m: Mode) -> OperatingMode {
    match m {
        Mode::Idle => OperatingMode::Idle,
        Mode::ColdStart => OperatingMode::ColdStart,
        Mode::WarmStart => OperatingMode::WarmStart,
        Mode::Normal => OperatingMode::Normal,
    }
}

fn page_mode(m: OperatingMode) -> Mode {
    match m {
        OperatingMode::Idle => Mode::Idle,
        OperatingMode::ColdStart => Mode::ColdStart,
        OperatingMode::WarmStart => Mode::WarmStart,
        OperatingMode::Normal => Mode::Normal,
    }
}

fn start_condition(c: partita_ports::control::StartCondition) -> StartCondition {
    use partita_ports::control::StartCondition as S;
    match c {
        S::NormalStart => StartCondition::NormalStart,
        S::PartitionRestart => StartCondition::PartitionRestart,
        S::HmModuleRestart => StartCondition::HmModuleRestart,
        S::HmPartitionRestart => StartCondition::HmPartitionRestart,
    }
}

impl ApexPartitionP4 for PartitaHypervisor {
    /// With a control page, the mode and the start condition are the supervisor's (as it last wrote them);
    /// without one, the mode is the process's own and the start condition NORMAL_START.
    fn get_partition_status() -> ApexPartitionStatus {
        let page = page();
        let mode = page.and_then(Control::mode).map(operating_mode).unwrap_or_else(mode);
        ApexPartitionStatus {
            // The partition's share of the plan is the supervisor's; a partition learns it with the plan API (a
            // later issue). Until then: infinite, i.e. not known here.
            period: INFINITE_TIME_VALUE,
            duration: INFINITE_TIME_VALUE,
            // Partitions have names in the system file, not numbers.
            identifier: 0,
            lock_level: 0,
            operating_mode: mode,
            start_condition: page.and_then(Control::start_condition).map(start_condition).unwrap_or(StartCondition::NormalStart),
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
        (OperatingMode::Normal, _) => {
            if let Some(page) = page() {
                tell_normal(page)?;
            }
            enter_normal()
        }
        (OperatingMode::Idle, _) => leave(to, EXIT_IDLE, "SET_PARTITION_MODE(IDLE)"),
        (OperatingMode::ColdStart, _) => leave(to, EXIT_COLD_START, "SET_PARTITION_MODE(COLD_START): a restart is the supervisor's"),
        (OperatingMode::WarmStart, _) => leave(to, EXIT_WARM_START, "SET_PARTITION_MODE(WARM_START): a restart is the supervisor's"),
    }
}

/// Tells the supervisor that the partition enters NORMAL mode. A refusal is the caller's error; a supervisor
/// that does not answer does not keep the partition from its work (said on standard error).
fn tell_normal(page: &Control) -> Result<(), ApexError> {
    let service = Service::SetPartitionMode;
    match ask(service, page, &Request::SetMode(Mode::Normal)) {
        Ok(Outcome::Done) => Ok(()),
        Ok(Outcome::Refused) => Err(ApexError::Refused { service, problem: "the supervisor does not let the partition enter NORMAL mode".into() }),
        Ok(o) => Err(ApexError::InvalidParameter { service, problem: format!("the supervisor answered {o} to NORMAL") }),
        Err(e) => {
            eprintln!("{}: {e}; the partition enters NORMAL mode", partition_name());
            Ok(())
        }
    }
}

/// IDLE, COLD_START or WARM_START: without a control page, the process exits with `code` (the supervisor's
/// health monitor applies the partition's action to the exit). With one, the request goes to the supervisor,
/// which freezes (IDLE) or restarts the partition: once it accepted, the process waits for that, and exits
/// with `code` only if nothing happened within [`SUPERVISOR_WAIT`] of the request; so it does too when the
/// supervisor does not answer in that time. A refusal returns to the caller.
fn leave(to: OperatingMode, code: i32, why: &str) -> Result<(), ApexError> {
    let service = Service::SetPartitionMode;
    let Some(page) = page() else { exit_partition(code, why) };
    let deadline = partita_os::clock::monotonic_ns().saturating_add(SUPERVISOR_WAIT.as_nanos() as u64);
    match ask(service, page, &Request::SetMode(page_mode(to))) {
        Ok(Outcome::Done) => {
            eprintln!("{}: {why}: the supervisor accepted it", partition_name());
            partita_os::clock::sleep_until_ns(deadline);
            exit_partition(code, &format!("{why}: the supervisor did not act within {SUPERVISOR_WAIT:?}"))
        }
        Ok(Outcome::Refused) => Err(ApexError::Refused { service, problem: format!("the supervisor does not allow {} now", page_mode(to)) }),
        Ok(o) => Err(ApexError::InvalidParameter { service, problem: format!("the supervisor answered {o} to {}", page_mode(to)) }),
        Err(e) => exit_partition(code, &format!("{why}: {e}")),
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
/// health monitor's (from the system file's tables). With a control page the error is posted to the supervisor
/// and the call returns once it answered (its action, a restart say, follows); without one the process exits
/// for the health monitor to see.
pub(crate) fn application_error(message: &str) -> Result<(), ApexError> {
    let service = Service::RaiseApplicationError;
    let Some(page) = page() else { exit_partition(EXIT_APPLICATION_ERROR, &format!("application error: {message}")) };
    eprintln!("{}: application error: {message}", partition_name());
    let message = crate::control::truncated(message, partita_ports::control::MAX_MESSAGE).to_string();
    match ask(service, page, &Request::RaiseError { kind: APPLICATION_ERROR, message })? {
        Outcome::Done => Ok(()),
        Outcome::Refused => Err(ApexError::Refused { service, problem: "the supervisor does not take this error kind from a partition".into() }),
        o => Err(ApexError::InvalidParameter { service, problem: format!("the supervisor answered {o}") }),
    }
}

/// The code of application_error among the error kinds (`partita_system::ErrorKind::ApplicationError`).
const APPLICATION_ERROR: u8 = 1;
