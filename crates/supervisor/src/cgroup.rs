//! A partition's cgroups: memory limit, pids limit, cpuset, and the counters the health monitor reads.
//!
//! Two layouts are supported, found at run time from `/proc/self/mountinfo`:
//! - **unified** (pure cgroup v2): one directory `ROOT/partita/<system>/<partition>` with the controllers
//!   enabled down the path;
//! - **hybrid** (v1 controllers, possibly with a v2 hierarchy mounted beside them, e.g. at
//!   `/sys/fs/cgroup/unified`): one directory of the same relative path in each v1 hierarchy used (memory,
//!   pids, cpuset, cpuacct, freezer) plus one in the v2 hierarchy, whose core file `cgroup.freeze` works
//!   without any controller.
use crate::error::{path_err, Result, SupervisorError};
use partita_os::cgroupfs;
use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The top directory of everything partita creates in every hierarchy.
pub use partita_system::names::CGROUP_ROOT as TOP;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// Pure cgroup v2, all controllers in one tree.
    Unified { root: PathBuf },
    /// v1 controllers by name (`memory`, `pids`, ...) to their mount point, and the v2 tree if mounted.
    Hybrid { v1: BTreeMap<String, PathBuf>, unified: Option<PathBuf> },
}

/// v1 controllers a partition uses on a hybrid machine (cpuacct only for the CPU-time counter; cpu only for
/// demoting a partition that runs past its window, `cpu.idle`; blkio for its disk limits).
const V1_CONTROLLERS: [&str; 7] = ["memory", "pids", "cpuset", "cpuacct", "freezer", "cpu", "blkio"];

impl Layout {
    pub fn detect() -> Result<Layout> {
        let info = cgroupfs::read_mountinfo().map_err(path_err("read", "/proc/self/mountinfo"))?;
        Ok(Self::from_mountinfo(&info, |p| fs::read_to_string(p.join("cgroup.controllers")).ok()))
    }

    /// Parses mountinfo text; `controllers_of` reads a v2 mount's `cgroup.controllers` (injected for tests).
    pub fn from_mountinfo(info: &str, controllers_of: impl Fn(&Path) -> Option<String>) -> Layout {
        let mut v1 = BTreeMap::new();
        let mut v2: Option<PathBuf> = None;
        for m in cgroupfs::cgroup_mounts(info) {
            if m.unified {
                v2.get_or_insert(m.mount_point);
                continue;
            }
            for c in V1_CONTROLLERS.iter().filter(|c| m.has_controller(c)) {
                v1.entry(c.to_string()).or_insert_with(|| m.mount_point.clone());
            }
        }
        if let Some(root) = &v2 {
            let has_memory = controllers_of(root).map(|c| c.split_whitespace().any(|x| x == "memory")).unwrap_or(false);
            if v1.is_empty() || (has_memory && !v1.contains_key("memory")) {
                return Layout::Unified { root: root.clone() };
            }
        }
        Layout::Hybrid { v1, unified: v2 }
    }

    pub fn is_unified(&self) -> bool {
        matches!(self, Layout::Unified { .. })
    }

    /// Every hierarchy root partita may create directories in (for cleanup).
    pub fn roots(&self) -> Vec<PathBuf> {
        match self {
            Layout::Unified { root } => vec![root.clone()],
            Layout::Hybrid { v1, unified } => {
                let mut r: Vec<PathBuf> = v1.values().cloned().collect();
                r.extend(unified.iter().cloned());
                r.sort();
                r.dedup();
                r
            }
        }
    }
}

/// Resource limits of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    pub memory_bytes: Option<u64>,
    pub pids_max: Option<u64>,
    /// CPU list in the kernel's syntax, e.g. "1" or "0-1".
    pub cpus: Option<String>,
    /// Memory nodes, e.g. "0"; defaults to the parent's when `cpus` is set.
    pub mems: Option<String>,
    /// A group of the cpu controller of its own, whose `cpu.idle` demotes it (on a hybrid machine; a pure v2
    /// tree always has one). Not for a partition granted SCHED_FIFO: the kernel refuses real-time tasks in a
    /// v1 cpu group without a real-time budget (`cpu.rt_runtime_us`).
    pub cpu_group: bool,
    /// Block I/O limits on one disk: `(major, minor)` of the whole disk and the limits.
    pub disk: Option<((u32, u32), partita_system::DiskLimits)>,
}

/// What a directory of a partition's cgroup is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// The directory in a pure v2 tree: every controller.
    UnifiedAll,
    /// The directory in the v2 tree of a hybrid machine: freezing and `cgroup.kill` only.
    UnifiedCore,
    Memory,
    Pids,
    Cpuset,
    Cpuacct,
    Freezer,
    Cpu,
    Blkio,
}

/// The cgroup(s) of one partition. Dropping it kills what is left inside and removes the directories.
#[derive(Debug)]
pub struct PartitionCgroup {
    relative: PathBuf,
    dirs: Vec<(Role, PathBuf)>,
    removed: bool,
}

/// Checks a name used as a cgroup/netns path component.
pub fn check_component(what: &'static str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.') || name.starts_with('.') {
        return Err(SupervisorError::Name { what, value: name.to_string(), rule: "must be 1 to 64 of [A-Za-z0-9_.-], not starting with `.` (it becomes a cgroup and namespace name)" });
    }
    Ok(())
}

fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).map_err(path_err("write", path))
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(path_err("read", path))
}

/// Creates `root/rel` and its ancestors below `root`, preparing each new v1 cpuset directory (which is
/// unusable until cpus and mems are set) and enabling controllers on v2 ancestors.
fn create_path(root: &Path, rel: &Path, role: Role) -> Result<PathBuf> {
    let mut dir = root.to_path_buf();
    for comp in rel.components() {
        let parent = dir.clone();
        dir.push(comp);
        if role == Role::UnifiedAll {
            enable_v2_controllers(&parent)?;
        }
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(SupervisorError::Path { op: "mkdir", path: dir, source: e }),
        }
        if role == Role::Cpuset {
            for f in ["cpuset.cpus", "cpuset.mems"] {
                let mine = read(&dir.join(f))?;
                if mine.trim().is_empty() {
                    let theirs = read(&parent.join(f))?;
                    write(&dir.join(f), theirs.trim())?;
                }
            }
        }
    }
    Ok(dir)
}

fn enable_v2_controllers(dir: &Path) -> Result<()> {
    let available = read(&dir.join("cgroup.controllers"))?;
    let wanted: Vec<String> = ["memory", "pids", "cpuset", "cpu"]
        .iter()
        .filter(|c| available.split_whitespace().any(|a| a == **c))
        .map(|c| format!("+{c}"))
        .collect();
    if !wanted.is_empty() {
        write(&dir.join("cgroup.subtree_control"), &wanted.join(" "))?;
    }
    Ok(())
}

impl PartitionCgroup {
    /// Creates the cgroup at `relative` (`partita/<system>/<partition>`, as `partita_system::HostNames::cgroup`
    /// names it) in every hierarchy used and applies `limits`.
    pub fn create(layout: &Layout, relative: &str, limits: &Limits) -> Result<PartitionCgroup> {
        let relative = Path::new(relative);
        let mut parts = relative.components().map(|c| c.as_os_str().to_str().unwrap_or(""));
        if parts.next() != Some(TOP) {
            return Err(SupervisorError::Name { what: "cgroup", value: relative.display().to_string(), rule: "must be below partita/" });
        }
        for part in parts {
            check_component("cgroup path component", part)?;
        }
        let relative = relative.to_path_buf();
        let mut cg = PartitionCgroup { relative: relative.clone(), dirs: Vec::new(), removed: false };
        match layout {
            Layout::Unified { root } => {
                let d = create_path(root, &relative, Role::UnifiedAll)?;
                cg.dirs.push((Role::UnifiedAll, d));
            }
            Layout::Hybrid { v1, unified } => {
                for (name, role) in [
                    ("memory", Role::Memory),
                    ("pids", Role::Pids),
                    ("cpuset", Role::Cpuset),
                    ("cpuacct", Role::Cpuacct),
                    ("freezer", Role::Freezer),
                    ("cpu", Role::Cpu),
                    ("blkio", Role::Blkio),
                ] {
                    if role == Role::Cpu && (!limits.cpu_group || v1.get("cpu") == v1.get("cpuacct")) {
                        // Without a group of its own; where cpu and cpuacct share a hierarchy, the cpuacct
                        // directory is that group.
                        continue;
                    }
                    if role == Role::Blkio && limits.disk.is_none() {
                        continue;
                    }
                    if let Some(root) = v1.get(name) {
                        // On a drop (an error half-way), `cg` removes the directories made so far.
                        let d = create_path(root, &relative, role)?;
                        cg.dirs.push((role, d));
                    } else if matches!(role, Role::Memory | Role::Pids | Role::Cpuset) {
                        return Err(SupervisorError::Layout(format!("no v1 `{name}` hierarchy is mounted")));
                    }
                }
                if let Some(root) = unified {
                    let d = create_path(root, &relative, Role::UnifiedCore)?;
                    cg.dirs.push((Role::UnifiedCore, d));
                }
            }
        }
        cg.apply(limits)?;
        Ok(cg)
    }

    fn dir(&self, role: Role) -> Option<&Path> {
        self.dirs.iter().find(|(r, _)| *r == role).map(|(_, d)| d.as_path())
    }

    /// The directory holding `role`'s files: the v1 one on hybrid machines, the single v2 one otherwise.
    fn controller_dir(&self, role: Role) -> Option<&Path> {
        self.dir(role).or_else(|| self.dir(Role::UnifiedAll))
    }

    fn apply(&self, limits: &Limits) -> Result<()> {
        let unified = self.dir(Role::UnifiedAll).is_some();
        if let Some(cpus) = &limits.cpus {
            let d = self.controller_dir(Role::Cpuset).expect("cpuset directory exists");
            write(&d.join("cpuset.cpus"), cpus)?;
            let mems = match &limits.mems {
                Some(m) => m.clone(),
                None => {
                    let parent = d.parent().expect("below a root");
                    let f = if unified { "cpuset.mems.effective" } else { "cpuset.mems" };
                    read(&parent.join(f))?.trim().to_string()
                }
            };
            write(&d.join("cpuset.mems"), &mems)?;
        }
        if let Some(bytes) = limits.memory_bytes {
            let d = self.controller_dir(Role::Memory).expect("memory directory exists");
            if unified {
                write(&d.join("memory.max"), &bytes.to_string())?;
                // Swap would let a partition exceed its limit without an OOM kill.
                let _ = write(&d.join("memory.swap.max"), "0");
            } else {
                write(&d.join("memory.limit_in_bytes"), &bytes.to_string())?;
                let memsw = d.join("memory.memsw.limit_in_bytes");
                if memsw.exists() {
                    let _ = write(&memsw, &bytes.to_string());
                }
            }
        }
        if let Some(n) = limits.pids_max {
            let d = self.controller_dir(Role::Pids).expect("pids directory exists");
            write(&d.join("pids.max"), &n.to_string())?;
        }
        if let Some(((major, minor), disk)) = limits.disk {
            self.apply_disk(major, minor, &disk)?;
        }
        Ok(())
    }

    /// Writes the disk limits: v2 `io.max` in a pure v2 tree, else the v1 blkio throttle files (which limit
    /// direct and synchronous I/O; buffered writes are bounded by the memory limit there, docs/security.md).
    fn apply_disk(&self, major: u32, minor: u32, disk: &partita_system::DiskLimits) -> Result<()> {
        if let Some(d) = self.dir(Role::UnifiedAll) {
            let max = |v: Option<u64>| v.map_or("max".to_string(), |n| n.to_string());
            let line = format!("{major}:{minor} rbps={} wbps={} riops={} wiops={}", max(disk.read_bps), max(disk.write_bps), max(disk.read_iops), max(disk.write_iops));
            let f = d.join("io.max");
            if f.exists() {
                write(&f, &line)?;
            }
            return Ok(());
        }
        let Some(d) = self.dir(Role::Blkio) else { return Ok(()) };
        for (file, v) in [
            ("blkio.throttle.read_bps_device", disk.read_bps),
            ("blkio.throttle.write_bps_device", disk.write_bps),
            ("blkio.throttle.read_iops_device", disk.read_iops),
            ("blkio.throttle.write_iops_device", disk.write_iops),
        ] {
            if let Some(n) = v {
                write(&d.join(file), &format!("{major}:{minor} {n}"))?;
            }
        }
        Ok(())
    }

    /// The v1 cpuacct directory (its `cpuacct.usage`), if the hierarchy is mounted.
    pub fn cpuacct_dir(&self) -> Option<&Path> {
        self.dir(Role::Cpuacct)
    }

    /// The `cpu.idle` file of the partition's own cpu controller group, where it has one.
    pub fn cpu_idle_file(&self) -> Option<PathBuf> {
        let d = self.dir(Role::Cpu).or_else(|| self.dir(Role::UnifiedAll))?;
        Some(d.join("cpu.idle")).filter(|f| f.exists())
    }

    /// `partita/<system>/<partition>`, the same in every hierarchy.
    pub fn relative_path(&self) -> &Path {
        &self.relative
    }

    pub fn directories(&self) -> impl Iterator<Item = (Role, &Path)> {
        self.dirs.iter().map(|(r, d)| (*r, d.as_path()))
    }

    /// Every `cgroup.procs` file a new process of this partition must be written to.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|(_, d)| d.join("cgroup.procs")).collect()
    }

    /// Moves `pid` (and, v1 `cgroup.procs` semantics, its whole thread group) into every hierarchy.
    pub fn add_pid(&self, pid: i32) -> Result<()> {
        for f in self.procs_files() {
            write(&f, &pid.to_string())?;
        }
        Ok(())
    }

    /// The v2 directory with `cgroup.freeze`, if any.
    pub fn v2_dir(&self) -> Option<&Path> {
        self.dir(Role::UnifiedAll).or_else(|| self.dir(Role::UnifiedCore))
    }

    /// The v1 freezer directory, if the hierarchy is mounted.
    pub fn v1_freezer_dir(&self) -> Option<&Path> {
        self.dir(Role::Freezer)
    }

    /// The processes inside (union over the hierarchies, so a process half-moved is seen too).
    pub fn pids(&self) -> Result<Vec<i32>> {
        let mut all = Vec::new();
        for (_, d) in &self.dirs {
            all.extend(read_pids(&d.join("cgroup.procs"))?);
        }
        all.sort_unstable();
        all.dedup();
        Ok(all)
    }

    /// How many processes the kernel's OOM killer killed in this cgroup.
    pub fn oom_kills(&self) -> Result<u64> {
        Ok(self.memory_events()?.oom_kill)
    }

    pub fn memory_events(&self) -> Result<MemoryEvents> {
        let d = self.controller_dir(Role::Memory).expect("memory directory exists");
        if self.dir(Role::UnifiedAll).is_some() {
            let text = read(&d.join("memory.events"))?;
            Ok(MemoryEvents {
                oom: key_value(&text, "oom").unwrap_or(0),
                oom_kill: key_value(&text, "oom_kill").unwrap_or(0),
                limit_hits: key_value(&text, "max").unwrap_or(0),
            })
        } else {
            let text = read(&d.join("memory.oom_control"))?;
            let failcnt = read(&d.join("memory.failcnt"))?.trim().parse().unwrap_or(0);
            let oom_kill = key_value(&text, "oom_kill").ok_or_else(|| {
                SupervisorError::Layout(format!(
                    "{} has no oom_kill counter (kernel older than 4.13)",
                    d.join("memory.oom_control").display()
                ))
            })?;
            Ok(MemoryEvents { oom: oom_kill, oom_kill, limit_hits: failcnt })
        }
    }

    /// Memory charged to the partition now, bytes (`memory.current`, or v1's `memory.usage_in_bytes`).
    pub fn memory_usage(&self) -> Result<u64> {
        let d = self.controller_dir(Role::Memory).expect("memory directory exists");
        let file = if self.dir(Role::UnifiedAll).is_some() { "memory.current" } else { "memory.usage_in_bytes" };
        Ok(read(&d.join(file))?.trim().parse().unwrap_or(0))
    }

    /// How many forks the pids limit refused (`pids.events` `max`).
    pub fn pids_limit_hits(&self) -> Result<u64> {
        let d = self.controller_dir(Role::Pids).expect("pids directory exists");
        Ok(key_value(&read(&d.join("pids.events"))?, "max").unwrap_or(0))
    }

    /// CPU time consumed by the partition's processes.
    pub fn cpu_usage(&self) -> Result<Duration> {
        if let Some(d) = self.dir(Role::Cpuacct) {
            let ns: u64 = read(&d.join("cpuacct.usage"))?.trim().parse().unwrap_or(0);
            return Ok(Duration::from_nanos(ns));
        }
        let d = self.v2_dir().ok_or_else(|| SupervisorError::Layout("no cpuacct and no v2 cpu.stat".into()))?;
        let text = read(&d.join("cpu.stat"))?;
        Ok(Duration::from_micros(key_value(&text, "usage_usec").unwrap_or(0)))
    }

    /// Kills every process inside (thawing first, so frozen ones can die) and waits until the cgroup is empty.
    pub fn kill_all(&self) -> Result<()> {
        kill_dirs(self.dirs.iter().map(|(_, d)| d.as_path()))
    }

    /// Kills what is left and removes the directories, then the `partita/<system>` parents if empty.
    pub fn remove(mut self) -> Result<()> {
        self.remove_now()
    }

    fn remove_now(&mut self) -> Result<()> {
        if self.removed {
            return Ok(());
        }
        self.kill_all()?;
        for (_, d) in self.dirs.iter().rev() {
            rmdir_retrying(d)?;
            // Parents are shared with other partitions: removed only when empty.
            let mut p = d.parent();
            for _ in 0..2 {
                if let Some(dir) = p {
                    let _ = fs::remove_dir(dir);
                    p = dir.parent();
                }
            }
        }
        self.removed = true;
        Ok(())
    }
}

impl Drop for PartitionCgroup {
    fn drop(&mut self) {
        if let Err(e) = self.remove_now() {
            tracing::warn!(target: "partita::supervisor::cgroup", "removing cgroup {}: {e}", self.relative.display());
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryEvents {
    /// Times the cgroup went out of memory.
    pub oom: u64,
    /// Processes killed by the OOM killer.
    pub oom_kill: u64,
    /// Times usage hit the limit (v2 `max`, v1 `failcnt`).
    pub limit_hits: u64,
}

fn key_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        if k == key {
            v.trim().parse().ok()
        } else {
            None
        }
    })
}

pub(crate) fn read_pids(procs: &Path) -> Result<Vec<i32>> {
    match fs::read_to_string(procs) {
        Ok(t) => Ok(t.lines().filter_map(|l| l.trim().parse().ok()).collect()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(SupervisorError::Path { op: "read", path: procs.to_path_buf(), source: e }),
    }
}

/// Kills every process in `dirs` (cgroups partita made), waiting up to 5 s for them to be gone.
///
/// The freezing state stays what the plan made it, so a partition killed outside its window (a crash, a
/// restart) is still frozen when its next process joins: cgroup v2 kills frozen processes as they are
/// (`cgroup.kill`, and SIGKILL wakes a frozen task only to die); the v1 freezer must be thawed for a kill to
/// complete, and is frozen again afterwards.
pub(crate) fn kill_dirs<'a>(dirs: impl Iterator<Item = &'a Path> + Clone) -> Result<()> {
    let v1_frozen: Vec<&Path> = dirs
        .clone()
        .filter(|d| fs::read_to_string(d.join("freezer.state")).is_ok_and(|s| s.trim() != "THAWED"))
        .collect();
    for d in &v1_frozen {
        let _ = fs::write(d.join("freezer.state"), "THAWED");
    }
    for d in dirs.clone() {
        let _ = fs::write(d.join("cgroup.kill"), "1");
    }
    let result = wait_empty(dirs);
    for d in &v1_frozen {
        let _ = fs::write(d.join("freezer.state"), "FROZEN");
    }
    result
}

/// SIGKILL to every process left in `dirs` until none is, for at most 5 s.
fn wait_empty<'a>(dirs: impl Iterator<Item = &'a Path> + Clone) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut left = Vec::new();
        for d in dirs.clone() {
            left.extend(read_pids(&d.join("cgroup.procs"))?);
        }
        left.sort_unstable();
        left.dedup();
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(SupervisorError::Unkillable { pids: left.clone() });
        }
        for pid in left {
            // The pid was read from a cgroup partita created, so only processes partita placed there are
            // signalled; one that ended meanwhile is what we wait for anyway.
            let _ = partita_os::process::send_signal(pid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// rmdir, retrying while the kernel still holds the cgroup busy (dying tasks, v1 memory charges).
pub(crate) fn rmdir_retrying(d: &Path) -> Result<()> {
    cgroupfs::rmdir_retrying(d, Duration::from_secs(5)).map_err(|source| SupervisorError::Path { op: "rmdir", path: d.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "35 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:14 - cgroup cgroup rw,memory
36 25 0:31 / /sys/fs/cgroup/unified rw,relatime shared:15 - cgroup2 cgroup2 rw
37 25 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:16 - cgroup cgroup rw,cpu,cpuacct
38 25 0:33 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
39 25 0:34 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset
";
    const UNIFIED: &str = "30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

    #[test]
    fn hybrid_layout_maps_controllers_to_mounts() {
        let l = Layout::from_mountinfo(HYBRID, |_| Some(String::new()));
        let Layout::Hybrid { v1, unified } = l else { panic!("expected hybrid, got {l:?}") };
        assert_eq!(v1["memory"], PathBuf::from("/sys/fs/cgroup/memory"));
        assert_eq!(v1["cpuacct"], PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"));
        assert!(!v1.contains_key("freezer"));
        assert_eq!(unified, Some(PathBuf::from("/sys/fs/cgroup/unified")));
    }

    #[test]
    fn pure_v2_layout_is_unified() {
        let l = Layout::from_mountinfo(UNIFIED, |_| Some("cpuset cpu io memory pids".into()));
        assert_eq!(l, Layout::Unified { root: PathBuf::from("/sys/fs/cgroup") });
    }

    #[test]
    fn names_with_slashes_are_refused() {
        assert!(check_component("partition", "../x").is_err());
        assert!(check_component("partition", "recorder").is_ok());
    }
}
