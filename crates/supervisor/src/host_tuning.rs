//! Host settings held while a system is up, so that the kernel's own work and kernel code run for partitions
//! do not take the plans' CPUs (docs/security.md, "Time partitioning and kernel work"):
//!
//! - **preemption**: a kernel built with dynamic preemption (`PREEMPT_DYNAMIC`) is switched to `full` through
//!   debugfs (`sched/preempt`), so kernel code yields to the plan executor at once, not at its next scheduling
//!   point. Where debugfs is closed (kernel lockdown) or the kernel has no switch, nothing changes and
//!   [`Probe`] says how to get it (the `preempt=full` boot option);
//! - **housekeeping CPUs**: every interrupt that may move (`/proc/irq/*/smp_affinity_list`, and the default
//!   for new ones), the unbound workqueues (`/sys/devices/virtual/workqueue/cpumask`) and writeback
//!   (`/sys/bus/workqueue/devices/writeback/cpumask`) go to the CPUs without a plan;
//! - the V-NICs' receive processing goes there too (RPS on their host ends): a partition's packets are
//!   processed off the plan's CPU, not in the next window's time. Those interfaces are partita's own and go
//!   with the system.
//!
//! Every original value is recorded in `/run/partita/host-tuning.json` before it is changed, with the systems
//! holding it (by name and supervisor pid); the last system to go gives every value back. A supervisor killed
//! with SIGKILL leaves the record behind: `partita down` gives the values back when no holder is alive.
use crate::error::{path_err, Result, SupervisorError};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

/// Where the record of the host's original values lives.
pub const RECORD: &str = "/run/partita/host-tuning.json";
const PREEMPT: &str = "/sys/kernel/debug/sched/preempt";
const WORKQUEUE_MASK: &str = "/sys/devices/virtual/workqueue/cpumask";
const WRITEBACK_MASK: &str = "/sys/bus/workqueue/devices/writeback/cpumask";
const DEFAULT_IRQ_AFFINITY: &str = "/proc/irq/default_smp_affinity";

/// What the kernel offers for each setting, found without changing anything (for `partita check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The preemption model now, and whether partita can switch it (else why not).
    pub preemption: Option<String>,
    pub preemption_switch: std::result::Result<(), String>,
    /// How many interrupts the machine has (the kernel tells which may move only when asked to move them).
    pub irqs: usize,
    pub workqueues: bool,
}

/// The kernel's preemption model: the debugfs file where readable, else the boot option or the build's
/// default (`/proc/config.gz`, `uname -v`).
pub fn probe() -> Probe {
    let (preemption, preemption_switch) = match std::fs::read_to_string(PREEMPT) {
        Ok(t) => (current_preempt(&t), Ok(())),
        Err(e) => {
            let why = match e.raw_os_error() {
                Some(libc::EPERM) => "debugfs is closed by kernel lockdown".to_string(),
                Some(libc::ENOENT) if !Path::new("/sys/kernel/debug/sched").exists() => {
                    "debugfs is not mounted, or the kernel has no dynamic preemption".to_string()
                }
                _ => e.to_string(),
            };
            (preemption_from_boot(), Err(why))
        }
    };
    Probe { preemption, preemption_switch, irqs: irq_dirs().len(), workqueues: writable(Path::new(WORKQUEUE_MASK)) }
}

fn writable(p: &Path) -> bool {
    OpenOptions::new().write(true).open(p).is_ok()
}

/// `none voluntary (full) lazy` → `full`.
fn current_preempt(text: &str) -> Option<String> {
    text.split_whitespace().find(|w| w.starts_with('(')).map(|w| w.trim_matches(|c| c == '(' || c == ')').to_string())
}

/// The model the kernel booted with: `preempt=` on its command line, else its build default.
fn preemption_from_boot() -> Option<String> {
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    if let Some(v) = cmdline.split_whitespace().find_map(|w| w.strip_prefix("preempt=")) {
        return Some(format!("{v} (boot option)"));
    }
    let config = std::process::Command::new("sh").args(["-c", "zcat /proc/config.gz 2>/dev/null"]).output().ok()?;
    let config = String::from_utf8_lossy(&config.stdout);
    let model = ["PREEMPT_NONE", "PREEMPT_VOLUNTARY", "PREEMPT_LAZY", "PREEMPT"]
        .into_iter()
        .find(|m| config.lines().any(|l| l == format!("CONFIG_{m}=y")))?;
    let name = match model {
        "PREEMPT_NONE" => "none",
        "PREEMPT_VOLUNTARY" => "voluntary",
        "PREEMPT_LAZY" => "lazy",
        _ => "full",
    };
    Some(format!("{name} (the kernel's build default)"))
}

fn irq_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/proc/irq")
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// A CPU list as a hex mask (`[1]` → `2`).
fn hex_mask(cpus: &[usize]) -> String {
    let mut words: Vec<u32> = vec![0; cpus.iter().max().map_or(1, |m| m / 32 + 1)];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    words.iter().rev().map(|w| format!("{w:08x}")).collect::<Vec<_>>().join(",").trim_start_matches('0').to_string()
}

fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

/// The record on disk: the original value of every setting changed, and the systems that hold the changes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Record {
    pub holders: Vec<Holder>,
    /// `(file, original value)`, in the order they were changed.
    pub originals: Vec<(PathBuf, String)>,
    /// What each setting was set to (for the report).
    pub applied: Vec<String>,
    /// The housekeeping CPUs in force: those of every holder (a CPU one system plans on is no other's
    /// housekeeping CPU).
    #[serde(default)]
    pub housekeeping: Vec<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Holder {
    pub system: String,
    pub pid: u32,
}

/// Held by a running system: dropping it releases the system's hold, and the last holder gives every value
/// back.
#[derive(Debug)]
pub struct HostTuning {
    system: String,
    record: PathBuf,
}

/// What [`HostTuning::hold`] did, for the supervisor's log and `partita status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub changed: Vec<String>,
    pub left: Vec<String>,
}

/// Opens (creating) the lock beside the record: one supervisor or `partita down` at a time reads and writes it.
fn lock(record: &Path) -> Result<File> {
    let dir = record.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(path_err("mkdir", dir))?;
    let path = record.with_extension("lock");
    let f = OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(path_err("open", &path))?;
    f.lock().map_err(path_err("lock", &path))?;
    Ok(f)
}

fn read_record(path: &Path) -> Record {
    std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
}

fn write_record(path: &Path, r: &Record) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_string_pretty(r).map_err(|source| SupervisorError::Encode { what: "the record of host settings", source })?;
    std::fs::write(&tmp, text).map_err(path_err("write", &tmp))?;
    std::fs::rename(&tmp, path).map_err(path_err("rename", path))
}

/// Changes one file, recording its original value first (in `r`, written to disk before the change).
fn set(r: &mut Record, record: &Path, file: &Path, value: &str, applied: &mut Applied) -> Result<()> {
    let original = match std::fs::read_to_string(file) {
        Ok(t) => t.trim().to_string(),
        Err(e) => {
            applied.left.push(format!("{}: {e}", file.display()));
            return Ok(());
        }
    };
    let original = if file == Path::new(PREEMPT) { current_preempt(&original).unwrap_or(original) } else { original };
    if original == value {
        return Ok(());
    }
    if !r.originals.iter().any(|(f, _)| f == file) {
        r.originals.push((file.to_path_buf(), original.clone()));
        write_record(record, r)?;
    }
    match std::fs::write(file, value) {
        Ok(()) => applied.changed.push(format!("{} {original} → {value}", file.display())),
        Err(e) => {
            // Refused (a per-CPU interrupt, a locked file): nothing changed, nothing to give back.
            r.originals.retain(|(f, _)| f != file);
            write_record(record, r)?;
            applied.left.push(format!("{}: {e}", file.display()));
        }
    }
    Ok(())
}

impl HostTuning {
    /// Applies `tuning` for `system` (supervisor pid: this process) and records how to undo it. A second
    /// system joins the first's hold: the settings are the host's, not a system's (a later system's other
    /// housekeeping CPUs are not applied; its report says so).
    pub fn hold(system: &str, tuning: &partita_system::HostTuning) -> Result<(HostTuning, Applied)> {
        Self::hold_at(Path::new(RECORD), system, tuning)
    }

    pub fn hold_at(record: &Path, system: &str, tuning: &partita_system::HostTuning) -> Result<(HostTuning, Applied)> {
        let _lock = lock(record)?;
        let mut r = read_record(record);
        r.holders.retain(|h| partita_os::process::is_alive(h.pid as i32) && h.system != system);
        let mut applied = Applied::default();
        let first = r.holders.is_empty();
        let others: Vec<String> = r.holders.iter().map(|h| h.system.clone()).collect();
        r.holders.push(Holder { system: system.into(), pid: std::process::id() });
        write_record(record, &r)?;
        let housekeeping: Vec<usize> = if first {
            tuning.housekeeping_cpus.clone()
        } else {
            // Joining a running system: only the CPUs both leave free of plans.
            let both: Vec<usize> = r.housekeeping.iter().copied().filter(|c| tuning.housekeeping_cpus.contains(c)).collect();
            if both.is_empty() && !tuning.housekeeping_cpus.is_empty() {
                applied.left.push(format!("housekeeping: {} keeps the host's interrupts and kernel work on CPUs {:?}, which this system plans on or does not name", others.join(", "), r.housekeeping));
            }
            if both.is_empty() || both == r.housekeeping {
                return Ok((HostTuning { system: system.into(), record: record.to_path_buf() }, applied));
            }
            both
        };
        if first && tuning.preemption == partita_system::Preemption::Full {
            match probe().preemption_switch {
                Ok(()) => set(&mut r, record, Path::new(PREEMPT), "full", &mut applied)?,
                Err(why) => applied.left.push(format!("preemption: {why}; boot with preempt=full for full preemption")),
            }
        }
        if !housekeeping.is_empty() {
            r.housekeeping = housekeeping.clone();
            let list = cpu_list(&housekeeping);
            let mask = hex_mask(&housekeeping);
            let mut moved = 0;
            let mut refused = 0;
            for d in irq_dirs() {
                let mut a = Applied::default();
                set(&mut r, record, &d.join("smp_affinity_list"), &list, &mut a)?;
                moved += a.changed.len();
                refused += a.left.len();
            }
            applied.changed.push(format!("{moved} interrupts → CPUs {list} ({refused} cannot move)"));
            for f in [DEFAULT_IRQ_AFFINITY, WORKQUEUE_MASK, WRITEBACK_MASK] {
                set(&mut r, record, Path::new(f), &mask, &mut applied)?;
            }
        }
        r.applied = applied.changed.clone();
        write_record(record, &r)?;
        Ok((HostTuning { system: system.into(), record: record.to_path_buf() }, applied))
    }
}

impl Drop for HostTuning {
    fn drop(&mut self) {
        if let Err(e) = release(&self.record, |h| h.system == self.system && h.pid == std::process::id()) {
            tracing::warn!(target: "partita::supervisor", "giving the host's settings back: {e}");
        }
    }
}

/// Removes the holders `gone` says are gone, and gives every value back when none is left. Returns the
/// values given back.
fn release(record: &Path, gone: impl Fn(&Holder) -> bool) -> Result<Vec<String>> {
    if !record.exists() {
        return Ok(Vec::new());
    }
    let _lock = lock(record)?;
    let mut r = read_record(record);
    r.holders.retain(|h| !gone(h) && partita_os::process::is_alive(h.pid as i32));
    if !r.holders.is_empty() {
        write_record(record, &r)?;
        return Ok(Vec::new());
    }
    let mut restored = Vec::new();
    for (file, value) in r.originals.iter().rev() {
        match std::fs::write(file, value) {
            Ok(()) => restored.push(format!("{} ← {value}", file.display())),
            // An interrupt that went away meanwhile has nothing to give back.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(target: "partita::supervisor", "{}: giving back {value:?}: {e}", file.display()),
        }
    }
    std::fs::remove_file(record).map_err(path_err("remove", record))?;
    Ok(restored)
}

/// For `partita down`: gives the host's values back if every system that held them is gone (`force`: even
/// if some supervisor is alive). Returns what was given back.
pub fn restore_leftover(force: bool) -> Result<Vec<String>> {
    restore_leftover_at(Path::new(RECORD), force)
}

pub fn restore_leftover_at(record: &Path, force: bool) -> Result<Vec<String>> {
    release(record, |_| force)
}

/// The record as it is now (for `partita status`).
pub fn current() -> Option<Record> {
    Path::new(RECORD).exists().then(|| read_record(Path::new(RECORD)))
}

/// Sets the receive processing of V-NICs (`host_ends`, interfaces in the host's namespace) to `cpus`: RPS
/// moves the packets they carry off the plan's CPU. The interfaces are the system's own and go with it.
pub fn steer_vnics(host_ends: &[&str], cpus: &[usize]) -> Vec<String> {
    let mask = hex_mask(cpus);
    let mut left = Vec::new();
    for nic in host_ends {
        let dir = PathBuf::from(format!("/sys/class/net/{nic}/queues"));
        let queues = std::fs::read_dir(&dir).map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("rx-"))).collect::<Vec<_>>()).unwrap_or_default();
        for q in queues {
            if let Err(e) = std::fs::write(q.join("rps_cpus"), &mask) {
                left.push(format!("{}: {e}", q.join("rps_cpus").display()));
            }
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_models_are_read_and_written_as_the_kernel_does() {
        assert_eq!(hex_mask(&[1]), "2");
        assert_eq!(hex_mask(&[0, 1, 3]), "b");
        assert_eq!(hex_mask(&[33]), "2,00000000");
        assert_eq!(current_preempt("none voluntary (full) lazy\n").as_deref(), Some("full"));
        assert_eq!(current_preempt("(none) voluntary full\n").as_deref(), Some("none"));
    }

    /// A scratch file stands for a kernel setting: held, changed, given back when the last holder goes; a
    /// holder that died (pid gone) is released by `restore_leftover`.
    #[test]
    fn settings_are_given_back_by_the_last_holder_or_after_a_crash() {
        let dir = std::env::temp_dir().join(format!("partita-host-tuning-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let record = dir.join("record.json");
        let knob = dir.join("knob");
        std::fs::write(&knob, "0-1\n").unwrap();
        let mut r = Record::default();
        let mut a = Applied::default();
        set(&mut r, &record, &knob, "1", &mut a).unwrap();
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "1");
        assert_eq!(read_record(&record).originals, vec![(knob.clone(), "0-1".to_string())], "recorded before the change");
        // A holder whose process is gone: `partita down` gives the value back.
        r.holders.push(Holder { system: "crashed".into(), pid: u32::MAX / 2 });
        write_record(&record, &r).unwrap();
        let restored = restore_leftover_at(&record, false).unwrap();
        assert_eq!(restored.len(), 1, "{restored:?}");
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "0-1");
        assert!(!record.exists());
        // A live holder keeps it, unless forced.
        let mut r = Record::default();
        set(&mut r, &record, &knob, "1", &mut Applied::default()).unwrap();
        r.holders.push(Holder { system: "alive".into(), pid: std::process::id() });
        write_record(&record, &r).unwrap();
        assert!(restore_leftover_at(&record, false).unwrap().is_empty());
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "1");
        restore_leftover_at(&record, true).unwrap();
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "0-1");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
