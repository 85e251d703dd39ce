//! The measurement setup every benchmark runs under: how the measured processes are scheduled.
//!
//! **Real-time** (the default): the measured processes run under SCHED_FIFO at priority 50 (below the plan
//! executors' 90, so a benchmark never delays a window switch of a system running beside it), with their memory
//! locked (`mlockall`), while `/dev/cpu_dma_latency` is held at 0 µs for the run, as `cyclictest` runs. Under the
//! normal policy a woken process often preempts the one that woke it halfway through its work (an extra pair of
//! context switches per message), and on a virtual machine waking a halted virtual CPU costs tens of µs: a closed
//! loop then measures where the scheduler happened to put whom, and its p50 moves by several times between runs.
//!
//! **Normal scheduling** (`--normal-scheduling`): SCHED_OTHER, memory not locked, idle states as the machine
//! sets them: what an untuned machine gives.
//!
//! A benchmark whose measured processes are its own (`bench rr`, `bench router-flood`) calls [`Setup::enter`]
//! before it starts any thread or process: children inherit the scheduling class, and the `partita` processes
//! it starts lock their own memory ([`child_args`]; memory locks are not inherited). A benchmark whose measured
//! processes are partitions (`bench paper`) cannot set their class itself: the system file grants it, and the
//! benchmark only holds the latency bound ([`Setup::hold_cpu_latency`]).
use partita_os::cpu_latency::CpuLatencyHold;
use serde::Serialize;
use std::sync::OnceLock;

/// Why a measurement setup was refused or could not be entered.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0} with --normal-scheduling: it sets the real-time setup; leave out one of them")]
    Conflict(String),
    #[error("--fifo {0}: give a SCHED_FIFO priority from 1 to 89 (below the plan executors' 90)")]
    BadPriority(u8),
    #[error("--cpu-dma-latency {0}: give a bound from 0 to 1000000 µs")]
    BadCpuDmaLatency(u32),
    #[error("real-time setup: {0}")]
    Realtime(String),
}

impl SetupError {
    /// True when the user gave options that cannot work (the command exits with status 2).
    pub fn is_usage(&self) -> bool {
        !matches!(self, SetupError::Realtime(_))
    }
}

/// The SCHED_FIFO priority of the real-time setup.
pub const DEFAULT_PRIORITY: u8 = 50;
/// The highest priority a measured process may take: one below the plan executors' 90.
pub const MAX_PRIORITY: u8 = 89;
/// The longest wake-up latency bound worth holding, µs (as the system file's `cpu_dma_latency`).
pub const MAX_CPU_DMA_LATENCY_US: u32 = 1_000_000;
/// The `partita` binary's global option that locks the process's memory before it starts its role.
pub const LOCK_MEMORY_FLAG: &str = "--lock-memory";

/// How the measured processes of a benchmark are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// SCHED_FIFO at `priority`, memory locked, `/dev/cpu_dma_latency` held at `cpu_dma_latency_us`.
    Realtime { priority: u8, cpu_dma_latency_us: u32 },
    /// SCHED_OTHER, memory not locked, CPU idle states as the machine sets them.
    Normal,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup::Realtime { priority: DEFAULT_PRIORITY, cpu_dma_latency_us: 0 }
    }
}

/// What the setup did to this process; ends the latency bound when dropped.
#[derive(Debug)]
pub struct SetupGuard {
    _hold: Option<CpuLatencyHold>,
}

/// The setup this process entered, for the processes it starts.
static ENTERED: OnceLock<Setup> = OnceLock::new();

/// Arguments to put first on the command line of a `partita` process a benchmark starts (a server, a relay, a
/// router), so that it follows the setup this process entered: the real-time setup's memory lock. The
/// scheduling class needs nothing: children inherit it.
pub fn child_args() -> &'static [&'static str] {
    match ENTERED.get() {
        Some(s) if s.locks_memory() => &[LOCK_MEMORY_FLAG],
        _ => &[],
    }
}

impl Setup {
    /// The setup the command-line options ask for: real-time unless `normal_scheduling`; `fifo` and
    /// `cpu_dma_latency_us` change the real-time setup and conflict with `normal_scheduling`.
    pub fn from_options(normal_scheduling: bool, fifo: Option<u8>, cpu_dma_latency_us: Option<u32>) -> Result<Setup, SetupError> {
        if normal_scheduling {
            if let Some(p) = fifo {
                return Err(SetupError::Conflict(format!("--fifo {p}")));
            }
            if let Some(us) = cpu_dma_latency_us {
                return Err(SetupError::Conflict(format!("--cpu-dma-latency {us}")));
            }
            return Ok(Setup::Normal);
        }
        let priority = fifo.unwrap_or(DEFAULT_PRIORITY);
        if !(1..=MAX_PRIORITY).contains(&priority) {
            return Err(SetupError::BadPriority(priority));
        }
        let cpu_dma_latency_us = cpu_dma_latency_us.unwrap_or(0);
        if cpu_dma_latency_us > MAX_CPU_DMA_LATENCY_US {
            return Err(SetupError::BadCpuDmaLatency(cpu_dma_latency_us));
        }
        Ok(Setup::Realtime { priority, cpu_dma_latency_us })
    }

    pub fn is_realtime(&self) -> bool {
        matches!(self, Setup::Realtime { .. })
    }

    /// The SCHED_FIFO priority of the measured processes; `None`: SCHED_OTHER.
    pub fn fifo_priority(&self) -> Option<u8> {
        match self {
            Setup::Realtime { priority, .. } => Some(*priority),
            Setup::Normal => None,
        }
    }

    /// The wake-up latency bound held during the run, µs; `None`: not held.
    pub fn cpu_dma_latency_us(&self) -> Option<u32> {
        match self {
            Setup::Realtime { cpu_dma_latency_us, .. } => Some(*cpu_dma_latency_us),
            Setup::Normal => None,
        }
    }

    /// The `scheduling` a system file grants for this setup (an inline TOML table): [`Setup::scheduling_spec`]
    /// as the file writes it.
    pub fn scheduling_toml(&self) -> String {
        self.scheduling_spec().to_string()
    }

    /// The `scheduling` a system grants for this setup, in a system built in code.
    pub fn scheduling_spec(&self) -> partita_system::spec::SchedulingSpec {
        match self.fifo_priority() {
            Some(p) => partita_system::spec::SchedulingSpec::fifo(u64::from(p)),
            None => partita_system::spec::SchedulingSpec::normal(),
        }
    }

    /// The system's `cpu_dma_latency` for this setup, in a system built in code.
    pub fn cpu_dma_latency_spec(&self) -> partita_system::spec::CpuDmaLatency {
        match self.cpu_dma_latency_us() {
            Some(us) => partita_system::spec::CpuDmaLatency::Bound(partita_system::Duration::from_micros(u64::from(us))),
            None => partita_system::spec::CpuDmaLatency::Off,
        }
    }

    /// A system file's `cpu_dma_latency` for this setup: its bound, or `off` (the value, unquoted).
    pub fn cpu_dma_latency_value(&self) -> String {
        self.cpu_dma_latency_spec().to_string()
    }

    pub fn locks_memory(&self) -> bool {
        self.is_realtime()
    }

    /// `real-time` or `normal`.
    pub fn name(&self) -> &'static str {
        match self {
            Setup::Realtime { .. } => "real-time",
            Setup::Normal => "normal",
        }
    }

    /// One line for tables and result files.
    pub fn caption(&self) -> String {
        match self {
            Setup::Realtime { priority, cpu_dma_latency_us } => format!(
                "real-time setup: SCHED_FIFO {priority}, memory locked, /dev/cpu_dma_latency held at {cpu_dma_latency_us} µs"
            ),
            Setup::Normal => "normal scheduling: SCHED_OTHER, memory not locked, CPU idle states as the machine sets them".into(),
        }
    }

    /// Puts this process under the setup: SCHED_FIFO for the calling thread and every thread and process it
    /// creates afterwards, its memory locked, the latency bound held until the guard is dropped. Call it before
    /// any other thread or process of the benchmark exists, but after any step that needs a single-threaded
    /// process (entering a private network namespace): the latency hold starts idle pollers
    /// (`partita_os::idle_poll`, on a kernel without a cpuidle driver) from the process as it is then.
    pub fn enter(&self) -> Result<SetupGuard, SetupError> {
        let guard = self.hold_cpu_latency()?;
        if let Setup::Realtime { priority, .. } = *self {
            partita_os::sched::set_current_thread_fifo(i32::from(priority))
                .map_err(|e| SetupError::Realtime(format!("{e}; run as root, or measure with --normal-scheduling")))?;
            partita_os::sched::lock_all_memory().map_err(|e| {
                SetupError::Realtime(format!("locking memory (mlockall): {e} (needs root or CAP_IPC_LOCK); or measure with --normal-scheduling"))
            })?;
        }
        let _ = ENTERED.set(*self);
        Ok(guard)
    }

    /// Holds the setup's wake-up latency bound (nothing under normal scheduling) until the guard is dropped.
    pub fn hold_cpu_latency(&self) -> Result<SetupGuard, SetupError> {
        let hold = match self.cpu_dma_latency_us() {
            Some(us) => Some(CpuLatencyHold::new(us).map_err(|e| SetupError::Realtime(format!("{e}; or hold --cpu-dma-latency 1 (idle CPUs may halt), or measure with --normal-scheduling")))?),
            None => None,
        };
        Ok(SetupGuard { _hold: hold })
    }

    /// The `setup` object of a result file; `applied` says how the measured processes got the setup.
    pub fn record(&self, applied: impl Into<String>) -> SetupRecord {
        SetupRecord {
            name: self.name(),
            policy: if self.is_realtime() { "fifo" } else { "normal" },
            fifo_priority: self.fifo_priority(),
            memory_locked: self.locks_memory(),
            cpu_dma_latency_us: self.cpu_dma_latency_us(),
            caption: self.caption(),
            applied: applied.into(),
        }
    }
}

/// The setup as result files record it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetupRecord {
    /// `real-time` or `normal`.
    pub name: &'static str,
    /// The measured processes' scheduling policy: `fifo` or `normal`.
    pub policy: &'static str,
    pub fifo_priority: Option<u8>,
    pub memory_locked: bool,
    /// The wake-up latency bound held during the run; `null`: not held.
    pub cpu_dma_latency_us: Option<u32>,
    /// The line tables carry.
    pub caption: String,
    /// How the measured processes got the setup.
    pub applied: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_realtime_setup_below_the_executors() {
        let s = Setup::from_options(false, None, None).unwrap();
        assert_eq!(s, Setup::default());
        assert_eq!(s.fifo_priority(), Some(50));
        assert_eq!(s.cpu_dma_latency_us(), Some(0));
        assert_eq!(s.cpu_dma_latency_value(), "0us", "as a system file writes it");
        assert!(s.locks_memory());
        assert_eq!(s.caption(), "real-time setup: SCHED_FIFO 50, memory locked, /dev/cpu_dma_latency held at 0 µs");
        let s = Setup::from_options(false, Some(89), Some(20)).unwrap();
        assert_eq!(s, Setup::Realtime { priority: 89, cpu_dma_latency_us: 20 });
    }

    #[test]
    fn normal_scheduling_holds_nothing_and_locks_nothing() {
        let s = Setup::from_options(true, None, None).unwrap();
        assert_eq!(s, Setup::Normal);
        assert_eq!((s.fifo_priority(), s.cpu_dma_latency_us(), s.locks_memory()), (None, None, false));
        assert_eq!(s.cpu_dma_latency_value(), "off");
        assert!(s.caption().starts_with("normal scheduling: SCHED_OTHER"));
        let r = s.record("test");
        assert_eq!((r.name, r.policy, r.memory_locked), ("normal", "normal", false));
    }

    #[test]
    fn the_scheduling_a_system_grants_is_written_as_the_file_writes_it() {
        assert_eq!(Setup::default().scheduling_toml(), "{ policy = \"fifo\", priority = 50 }");
        assert_eq!(Setup::Normal.scheduling_toml(), "{ policy = \"normal\" }");
    }

    #[test]
    fn bad_or_conflicting_options_are_usage_errors() {
        let cases = [
            (true, Some(50), None, "--fifo 50"),
            (true, None, Some(0), "--cpu-dma-latency 0"),
            (false, Some(0), None, "--fifo 0"),
            (false, Some(90), None, "--fifo 90"),
            (false, None, Some(MAX_CPU_DMA_LATENCY_US + 1), "--cpu-dma-latency 1000001"),
        ];
        for (normal, fifo, latency, needle) in cases {
            let e = Setup::from_options(normal, fifo, latency).unwrap_err();
            assert!(e.is_usage(), "{e}");
            assert!(e.to_string().contains(needle), "{e}");
        }
    }
}
