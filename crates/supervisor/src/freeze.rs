//! Freezing and thawing a partition: the mechanism of temporal isolation.
//!
//! Three backends, chosen per machine:
//! - [`FreezeBackend::CgroupV2`]: `cgroup.freeze` of the partition's v2 cgroup (also on the v2 hierarchy of a
//!   hybrid machine, where it needs no controller). Children forked while frozen are frozen too.
//! - [`FreezeBackend::V1Freezer`]: `freezer.state` of the v1 freezer hierarchy.
//! - [`FreezeBackend::Signals`]: SIGSTOP/SIGCONT to every process listed in the cgroup; a process forked
//!   between the listing and the signal escapes one freeze, which the cgroup backends do not allow.
use crate::cgroup::{read_pids, PartitionCgroup};
use crate::error::{path_err, Result, SupervisorError};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FreezeBackend {
    CgroupV2,
    V1Freezer,
    Signals,
}

impl FreezeBackend {
    pub const ALL: [FreezeBackend; 3] = [FreezeBackend::CgroupV2, FreezeBackend::V1Freezer, FreezeBackend::Signals];

    pub fn name(self) -> &'static str {
        match self {
            FreezeBackend::CgroupV2 => "cgroup-v2",
            FreezeBackend::V1Freezer => "v1-freezer",
            FreezeBackend::Signals => "signals",
        }
    }

    pub fn parse(s: &str) -> Option<FreezeBackend> {
        Self::ALL.into_iter().find(|b| b.name() == s)
    }

    /// The preferred backend this cgroup supports: cgroup v2 first (fastest measured here, see
    /// docs/supervisor.md, and it confines children forked while frozen), then the v1 freezer, then signals.
    pub fn best_for(cg: &PartitionCgroup) -> FreezeBackend {
        if cg.v2_dir().map(|d| d.join("cgroup.freeze").exists()).unwrap_or(false) {
            FreezeBackend::CgroupV2
        } else if cg.v1_freezer_dir().is_some() {
            FreezeBackend::V1Freezer
        } else {
            FreezeBackend::Signals
        }
    }
}

/// Freezes and thaws one partition. Holds the control file open so a switch is a single `pwrite`.
#[derive(Debug)]
pub struct Freezer {
    backend: FreezeBackend,
    control: Option<(File, PathBuf)>,
    /// `cgroup.procs` listing the partition's processes (for signals and for checking the stop).
    procs: PathBuf,
    status: PathBuf,
    status_file: Option<File>,
}

const FROZEN_V2: &[u8] = b"1";
const THAWED_V2: &[u8] = b"0";

impl Freezer {
    pub fn new(cg: &PartitionCgroup, backend: FreezeBackend) -> Result<Freezer> {
        let procs_dir: PathBuf = cg
            .v2_dir()
            .or_else(|| cg.directories().next().map(|(_, d)| d))
            .ok_or_else(|| SupervisorError::Layout("partition cgroup has no directory".into()))?
            .to_path_buf();
        let (control, status) = match backend {
            FreezeBackend::CgroupV2 => {
                let d = cg.v2_dir().ok_or_else(|| SupervisorError::Layout("no cgroup v2 hierarchy mounted".into()))?;
                (Some(open_rw(&d.join("cgroup.freeze"))?), d.join("cgroup.events"))
            }
            FreezeBackend::V1Freezer => {
                let d = cg
                    .v1_freezer_dir()
                    .ok_or_else(|| SupervisorError::Layout("no v1 freezer hierarchy mounted".into()))?;
                (Some(open_rw(&d.join("freezer.state"))?), d.join("freezer.state"))
            }
            FreezeBackend::Signals => (None, PathBuf::new()),
        };
        // Opened once, so the executor can ask whether a freeze has completed without opening a file.
        let status_file = (backend != FreezeBackend::Signals).then(|| File::open(&status).ok()).flatten();
        Ok(Freezer { backend, control, procs: procs_dir.join("cgroup.procs"), status, status_file })
    }

    /// Whether the kernel reports the partition frozen now, read from the status file kept open (one
    /// `pread`, no allocation: for the executor's path). `None` for the signals backend or when unreadable.
    pub fn stopped_now(&self) -> Option<bool> {
        let (buf, n) = self.read_status()?;
        let text = &buf[..n];
        match self.backend {
            // cgroup.events: "populated 1\nfrozen 1\n"
            FreezeBackend::CgroupV2 => Some(text.windows(8).any(|w| w == b"frozen 1")),
            FreezeBackend::V1Freezer => Some(text.starts_with(b"FROZEN")),
            FreezeBackend::Signals => None,
        }
    }

    /// Whether every task of the partition is stopped now or none is left (`cgroup.events`: `frozen 1` or
    /// `populated 0`); the v1 freezer tells only the first. One `pread`, no allocation.
    pub fn stopped_or_empty_now(&self) -> Option<bool> {
        if self.backend != FreezeBackend::CgroupV2 {
            return self.stopped_now();
        }
        let (buf, n) = self.read_status()?;
        let text = &buf[..n];
        Some(text.windows(8).any(|w| w == b"frozen 1") || text.windows(11).any(|w| w == b"populated 0"))
    }

    /// The status file kept open, read whole into a stack buffer (no allocation: the executor's path).
    fn read_status(&self) -> Option<([u8; 256], usize)> {
        let f = self.status_file.as_ref()?;
        let mut buf = [0u8; 256];
        let n = f.read_at(&mut buf, 0).ok()?;
        Some((buf, n))
    }

    pub fn backend(&self) -> FreezeBackend {
        self.backend
    }

    pub fn freeze(&self) -> Result<()> {
        self.set(true)
    }

    pub fn thaw(&self) -> Result<()> {
        self.set(false)
    }

    fn set(&self, frozen: bool) -> Result<()> {
        match (&self.backend, &self.control) {
            (FreezeBackend::CgroupV2, Some((f, p))) => {
                f.write_at(if frozen { FROZEN_V2 } else { THAWED_V2 }, 0).map_err(path_err("write", p))?;
            }
            (FreezeBackend::V1Freezer, Some((f, p))) => {
                f.write_at(if frozen { b"FROZEN" } else { b"THAWED" }, 0).map_err(path_err("write", p))?;
            }
            _ => {
                let sig = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
                for pid in read_pids(&self.procs)? {
                    // The pid comes from the partition's cgroup; one that ended meanwhile needs no signal.
                    let _ = partita_os::process::send_signal(pid, sig);
                }
            }
        }
        Ok(())
    }

    /// Whether every process of the partition is stopped now (the kernel's view, not our last request).
    pub fn is_frozen(&self) -> Result<bool> {
        self.probe().is_frozen()
    }

    /// A reader of the partition's frozen state that needs no access to the control file: for watching the
    /// plan from another thread than the executor's.
    pub fn probe(&self) -> FrozenProbe {
        FrozenProbe { backend: self.backend, procs: self.procs.clone(), status: self.status.clone() }
    }

    /// Polls without pause until the partition is frozen; returns how long that took (from the call). Only
    /// for a caller on another CPU than the partition's: a partition's tasks must run to stop themselves, and a
    /// real-time caller spinning on their CPU keeps them from it (use [`Freezer::wait_frozen_sleeping`]).
    pub fn wait_frozen(&self, timeout: Duration) -> Result<Duration> {
        self.wait_frozen_pausing(timeout, std::hint::spin_loop)
    }

    /// Waits until the partition is frozen, sleeping `FROZEN_POLL` between looks, so that the partition's tasks
    /// can run to stop themselves on the caller's own CPU (the plan executor, at SCHED_FIFO on the plan's CPU).
    pub fn wait_frozen_sleeping(&self, timeout: Duration) -> Result<Duration> {
        self.wait_frozen_pausing(timeout, || std::thread::sleep(FROZEN_POLL))
    }

    fn wait_frozen_pausing(&self, timeout: Duration, pause: impl Fn()) -> Result<Duration> {
        let t0 = Instant::now();
        loop {
            if self.is_frozen()? {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > timeout {
                return Err(SupervisorError::NotFrozen { timeout, backend: self.backend.name() });
            }
            pause();
        }
    }
}

/// How long [`Freezer::wait_frozen_sleeping`] sleeps between looks.
const FROZEN_POLL: Duration = Duration::from_micros(100);

/// Reads a partition's frozen state (the kernel's view).
#[derive(Debug, Clone)]
pub struct FrozenProbe {
    backend: FreezeBackend,
    procs: PathBuf,
    status: PathBuf,
}

impl FrozenProbe {
    /// Whether every process of the partition is stopped now.
    pub fn is_frozen(&self) -> Result<bool> {
        match self.backend {
            FreezeBackend::CgroupV2 => {
                let t = std::fs::read_to_string(&self.status).map_err(path_err("read", &self.status))?;
                Ok(t.lines().any(|l| l.trim() == "frozen 1"))
            }
            FreezeBackend::V1Freezer => {
                let t = std::fs::read_to_string(&self.status).map_err(path_err("read", &self.status))?;
                Ok(t.trim() == "FROZEN")
            }
            FreezeBackend::Signals => {
                for pid in read_pids(&self.procs)? {
                    let stat = format!("/proc/{pid}/stat");
                    if let Ok(s) = std::fs::read_to_string(&stat) {
                        let state = s.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
                        if !matches!(state, Some('T') | Some('t') | Some('Z') | Some('X')) {
                            return Ok(false);
                        }
                    }
                }
                Ok(true)
            }
        }
    }
}

fn open_rw(path: &Path) -> Result<(File, PathBuf)> {
    let f = OpenOptions::new().write(true).open(path).map_err(path_err("open", path))?;
    Ok((f, path.to_path_buf()))
}
