//! A CPU wake-up latency bound through `/dev/cpu_dma_latency`, as `cyclictest` sets one: while the file is
//! held open with a bound written to it, the kernel keeps every CPU out of idle states whose exit latency
//! exceeds the bound (a PM QoS request, ended when the file is closed, also when the process dies).
//!
//! The kernel can only honour the request through a cpuidle driver (`intel_idle`, `acpi_idle`, `haltpoll` in a
//! virtual machine), whose governor then picks the polling state for a bound of 0. Without one
//! (`/sys/devices/system/cpu/cpuidle/current_driver` reads `none`, as in some virtual machines) every idle CPU
//! halts whatever the bound, and in a virtual machine waking a halted virtual CPU goes through the host. There a
//! hold of 0 µs also starts an idle poller per CPU the process may use ([`crate::idle_poll`]): a process in an
//! idle cgroup that spins while nothing else wants the CPU, so the CPU never halts, as the kernel's own polling
//! state would do. Measured on
//! such a VM (docs/soak.md, "Idle CPUs that halt"): plan executor lateness p99 halved, the monitor's response
//! p99 70-140 µs shorter. The cost: the CPUs are always busy for the host, which then takes them away more often
//! (about 100 ms of steal a minute, in stalls of about 2 ms).
use crate::idle_poll::Pollers;
use std::fs::File;
use std::io::{self, Read, Write};
use thiserror::Error;

pub const PATH: &str = "/dev/cpu_dma_latency";
/// Where the kernel names its cpuidle driver (`none` without one).
pub const IDLE_DRIVER_PATH: &str = "/sys/devices/system/cpu/cpuidle/current_driver";

#[derive(Debug, Error)]
pub enum CpuLatencyError {
    /// The kernel takes the bound as an `i32`.
    #[error("{PATH}: a bound of {bound_us} µs is above {} µs", i32::MAX)]
    OutOfRange { bound_us: u32 },
    #[error("{PATH}: {source}{}", if source.kind() == io::ErrorKind::PermissionDenied { " (needs root)" } else { "" })]
    Io { #[source] source: io::Error },
    /// The kernel has no cpuidle driver and the idle pollers could not be started.
    #[error("the kernel has no cpuidle driver to keep idle CPUs polling, and partita's idle pollers could not start: {0}")]
    Poller(#[from] crate::idle_poll::IdlePollError),
}

/// The kernel's cpuidle driver, `None` when it has none (then no bound keeps an idle CPU from halting).
pub fn idle_driver() -> Option<String> {
    std::fs::read_to_string(IDLE_DRIVER_PATH).ok().map(|d| d.trim().to_string()).filter(|d| !d.is_empty() && d != "none")
}

/// Whether a bound of `bound_us` needs idle pollers on this kernel: 0 µs (only polling allowed) and no cpuidle
/// driver to honour it.
pub fn needs_pollers(bound_us: u32) -> bool {
    bound_us == 0 && idle_driver().is_none()
}

pub use crate::idle_poll::poller_name;

/// Keeps the CPUs out of idle states slower than the bound while it lives.
#[derive(Debug)]
pub struct CpuLatencyHold {
    bound_us: u32,
    /// Stopped (on drop) before the request is closed.
    pollers: Option<Pollers>,
    /// The open request; closing it (on drop) ends the bound.
    _request: File,
}

impl CpuLatencyHold {
    /// Holds a bound of `bound_us` µs (0 keeps the CPUs out of every idle state but polling).
    pub fn new(bound_us: u32) -> Result<Self, CpuLatencyError> {
        let value = i32::try_from(bound_us).map_err(|_| CpuLatencyError::OutOfRange { bound_us })?;
        let io = |source| CpuLatencyError::Io { source };
        let mut request = std::fs::OpenOptions::new().write(true).open(PATH).map_err(io)?;
        // One write of the binary value; the kernel also takes hex text, but only the i32 is unambiguous.
        request.write_all(&value.to_ne_bytes()).map_err(io)?;
        let pollers = if needs_pollers(bound_us) {
            let cpus = crate::sched::current_thread_cpus().map_err(io)?;
            Some(Pollers::start(&cpus)?)
        } else {
            None
        };
        Ok(CpuLatencyHold { bound_us, pollers, _request: request })
    }

    pub fn bound_us(&self) -> u32 {
        self.bound_us
    }

    /// The CPUs kept polling by this hold's idle pollers (none where a cpuidle driver honours the bound).
    pub fn polling_cpus(&self) -> Vec<usize> {
        self.pollers.as_ref().map_or(Vec::new(), |p| p.cpus())
    }

    /// The idle pollers' pids (none where a cpuidle driver honours the bound).
    pub fn poller_pids(&self) -> Vec<i32> {
        self.pollers.as_ref().map_or(Vec::new(), |p| p.pids())
    }
}

/// The bound in force now, in µs: the tightest of all holds in the system (a very large value when none).
pub fn current_bound_us() -> Result<i32, CpuLatencyError> {
    let io = |source| CpuLatencyError::Io { source };
    let mut value = [0u8; 4];
    File::open(PATH).map_err(io)?.read_exact(&mut value).map_err(io)?;
    Ok(i32::from_ne_bytes(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_bound_is_in_force_until_dropped() {
        // A bound no other program is likely to hold, so the one read back is ours (or a tighter one).
        const BOUND: u32 = 1234;
        let hold = match CpuLatencyHold::new(BOUND) {
            Ok(h) => h,
            Err(e) => {
                // Not root: the error must say so. (The project's tests run as root, where this is not taken.)
                assert!(e.to_string().contains("needs root") || !std::path::Path::new(PATH).exists(), "{e}");
                return;
            }
        };
        assert_eq!(hold.bound_us(), BOUND);
        let held = current_bound_us().unwrap();
        assert!(held <= BOUND as i32, "bound in force {held} µs, held {BOUND} µs");
        let before_drop = held;
        drop(hold);
        let after = current_bound_us().unwrap();
        // Another hold tighter than ours may be in force throughout; otherwise ours is gone.
        assert!(after > BOUND as i32 || after == before_drop && before_drop < BOUND as i32, "{after} µs after the drop");
    }

    #[test]
    fn a_bound_beyond_i32_is_refused() {
        let e = CpuLatencyHold::new(u32::MAX).unwrap_err();
        assert!(matches!(e, CpuLatencyError::OutOfRange { bound_us: u32::MAX }), "{e:?}");
    }

    /// A hold of 0 µs on a kernel without a cpuidle driver polls every CPU with an idle poller pinned to it
    /// (crate::idle_poll), and stops them when dropped; with a driver, or with a bound above 0, it starts none.
    #[test]
    #[cfg_attr(partita_not_root, ignore = "needs root")]
    fn a_zero_bound_without_an_idle_driver_polls_every_cpu_at_sched_idle_until_dropped() {
        let cpus = crate::sched::current_thread_cpus().unwrap();
        let hold = CpuLatencyHold::new(0).unwrap();
        // Other tests of this binary may hold a bound at the same time: look at this hold's pollers only.
        let pids = hold.poller_pids();
        let seen: Vec<_> = crate::idle_poll::running(std::process::id()).into_iter().filter(|r| pids.contains(&r.pid)).collect();
        if idle_driver().is_none() {
            assert_eq!(hold.polling_cpus(), cpus);
            let got: Vec<_> = seen.iter().map(|r| (r.name.clone(), r.policy, r.cpus_allowed.clone())).collect();
            // (each is pinned to its own CPU: Cpus_allowed_list names that CPU alone)
            let want: Vec<_> = cpus.iter().map(|c| (poller_name(*c), libc::SCHED_IDLE, c.to_string())).collect();
            assert_eq!(got, want);
        } else {
            assert!(hold.polling_cpus().is_empty() && seen.is_empty(), "{seen:?}");
        }
        drop(hold);
        for pid in pids {
            assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "poller {pid} ended with the hold");
        }
        let loose = CpuLatencyHold::new(50).unwrap();
        assert!(loose.polling_cpus().is_empty(), "a bound above 0 lets CPUs halt: no poller");
        drop(loose);
    }

    #[test]
    fn permission_errors_say_root_is_needed() {
        let e = CpuLatencyError::Io { source: io::Error::from(io::ErrorKind::PermissionDenied) };
        assert!(e.to_string().ends_with("(needs root)"), "{e}");
    }
}
