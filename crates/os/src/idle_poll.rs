//! Idle pollers: one process per CPU that spins whenever nothing else wants the CPU, so that the CPU never
//! halts (what the kernel's polling idle state does where a cpuidle driver offers one; see
//! [`crate::cpu_latency`]).
//!
//! A poller must take no time from anything else, a partition least of all. SCHED_IDLE alone does not give
//! that: the scheduler shares a CPU between groups of tasks first (cgroups, and the per-session autogroups of
//! tasks in the root cgroup) and only then between the tasks of a group, so a SCHED_IDLE thread in the
//! supervisor's group took about a third of a CPU from a SCHED_OTHER process of another session (a partition
//! calls `setsid`) on this project's test machine. The pollers therefore are processes of their own, in a cgroup
//! of their own whose `cpu.idle` is 1: the scheduler treats the whole group as SCHED_IDLE against every
//! other group (Linux 5.15 or later), and each poller is SCHED_IDLE inside it.
//!
//! The cgroup is `partita-idle-poll-<pid>-<n>` at the top of the hierarchy that has the cpu controller (the v1
//! `cpu` hierarchy, or the v2 tree), made by the process that starts the pollers (`<pid>`) and removed when
//! they are stopped. A poller ends by itself within milliseconds once the process that started it is gone, and
//! [`remove_stale`] removes the cgroups such a process left (every start does, and `partita down`).
use crate::cgroupfs;
use std::ffi::CString;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use thiserror::Error;

/// The name every poller cgroup starts with.
pub const GROUP_PREFIX: &str = "partita-idle-poll-";

#[derive(Debug, Error)]
pub enum IdlePollError {
    #[error("no cgroup hierarchy with the cpu controller is mounted (in /proc/self/mountinfo)")]
    NoCpuHierarchy,
    #[error("{}: {source}{}", path.display(), idle_hint(path, source))]
    Group { path: PathBuf, #[source] source: io::Error },
    #[error("the idle poller of CPU {cpu}, {step}: {source}")]
    Start { cpu: usize, step: &'static str, #[source] source: io::Error },
}

fn idle_hint(path: &Path, e: &io::Error) -> &'static str {
    if path.ends_with("cpu.idle") && e.kind() == io::ErrorKind::NotFound {
        " (cpu.idle, which makes a cgroup idle, needs Linux 5.15 or later)"
    } else {
        ""
    }
}

/// The name of a CPU's idle poller process.
pub fn poller_name(cpu: usize) -> String {
    format!("idle-poll-{cpu}")
}

/// The top of the cgroup hierarchy with the cpu controller, and whether it is the v2 tree.
fn cpu_hierarchy() -> Result<(PathBuf, bool), IdlePollError> {
    let info = cgroupfs::read_mountinfo().map_err(|source| IdlePollError::Group { path: "/proc/self/mountinfo".into(), source })?;
    let mounts = cgroupfs::cgroup_mounts(&info);
    if let Some(v1) = mounts.iter().find(|m| m.has_controller("cpu")) {
        return Ok((v1.mount_point.clone(), false));
    }
    let root = mounts.into_iter().find(|m| m.unified).ok_or(IdlePollError::NoCpuHierarchy)?.mount_point;
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|c| c == "cpu") {
        Ok((root, true))
    } else {
        Err(IdlePollError::NoCpuHierarchy)
    }
}

/// The pid in a poller cgroup's name, if it is one.
fn owner_of(name: &str) -> Option<i32> {
    name.strip_prefix(GROUP_PREFIX)?.split('-').next()?.parse().ok()
}

/// Removes the poller cgroups of processes that are gone (their pollers end by themselves); returns them.
pub fn remove_stale() -> Vec<PathBuf> {
    let Ok((root, _)) = cpu_hierarchy() else { return Vec::new() };
    remove_stale_in(&root)
}

/// [`remove_stale`] under `root`, the top of the cpu controller's hierarchy.
fn remove_stale_in(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = owner_of(&name) {
            if !crate::process::is_alive(pid) && rmdir_patiently(&e.path()).is_ok() {
                removed.push(e.path());
            }
        }
    }
    removed
}

/// rmdir, retried for up to a second while the last processes of the cgroup finish leaving it.
fn rmdir_patiently(dir: &Path) -> io::Result<()> {
    cgroupfs::rmdir_retrying(dir, Duration::from_secs(1))
}

/// The idle cgroup of one [`Pollers`].
#[derive(Debug)]
struct IdleGroup {
    dir: PathBuf,
}

impl IdleGroup {
    /// A new idle group under `root`, the top of the cpu controller's hierarchy (`v2`: the unified tree).
    fn create(root: &Path, v2: bool) -> Result<IdleGroup, IdlePollError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let group = |path: &Path| {
            let path = path.to_path_buf();
            move |source| IdlePollError::Group { path, source }
        };
        if v2 {
            let control = root.join("cgroup.subtree_control");
            let enabled = std::fs::read_to_string(&control).map_err(group(&control))?;
            if !enabled.split_whitespace().any(|c| c == "cpu") {
                std::fs::write(&control, "+cpu").map_err(group(&control))?;
            }
        }
        let dir = root.join(format!("{GROUP_PREFIX}{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir(&dir).map_err(group(&dir))?;
        let g = IdleGroup { dir };
        let idle = g.dir.join("cpu.idle");
        std::fs::write(&idle, "1").map_err(group(&idle))?;
        Ok(g)
    }
}

impl Drop for IdleGroup {
    fn drop(&mut self) {
        let _ = rmdir_patiently(&self.dir);
    }
}

/// One poller process per CPU, in an idle cgroup, until dropped.
#[derive(Debug)]
pub struct Pollers {
    /// (CPU, pid), in the order started. Dropped before `group`.
    children: Vec<(usize, i32)>,
    group: IdleGroup,
}

/// What the child does, in the order it does it; a failed step is reported by its index.
const STEPS: [&str; 4] = ["setting SCHED_IDLE", "joining its idle cgroup", "pinning it to its CPU", "naming it"];

impl Pollers {
    /// Starts a poller on each of `cpus` (after removing the cgroups of pollers whose starter is gone).
    pub fn start(cpus: &[usize]) -> Result<Pollers, IdlePollError> {
        let (root, v2) = cpu_hierarchy()?;
        remove_stale_in(&root);
        let mut pollers = Pollers { children: Vec::new(), group: IdleGroup::create(&root, v2)? };
        for &cpu in cpus {
            let pid = spawn(cpu, &pollers.group.dir.join("cgroup.procs"))?;
            pollers.children.push((cpu, pid));
        }
        Ok(pollers)
    }

    /// The CPUs kept polling.
    pub fn cpus(&self) -> Vec<usize> {
        self.children.iter().map(|(c, _)| *c).collect()
    }

    /// The pollers' pids.
    pub fn pids(&self) -> Vec<i32> {
        self.children.iter().map(|(_, p)| *p).collect()
    }

    /// The cgroup the pollers run in.
    pub fn group(&self) -> &Path {
        &self.group.dir
    }
}

impl Drop for Pollers {
    fn drop(&mut self) {
        for (_, pid) in self.children.drain(..) {
            end(pid);
        }
    }
}

/// Kills and reaps a poller: our child, not yet reaped, so no other process can have its pid.
fn end(pid: i32) {
    let _ = crate::process::send_signal(pid, libc::SIGKILL);
    let _ = crate::process::wait_blocking(pid);
}

/// Forks the poller of `cpu`, which joins the cgroup of `procs`, and waits for it to report.
fn spawn(cpu: usize, procs: &Path) -> Result<i32, IdlePollError> {
    let start_err = |step: &'static str| move |source| IdlePollError::Start { cpu, step, source };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(start_err("pinning it to its CPU")(io::Error::from_raw_os_error(libc::EINVAL)));
    }
    // Everything the child needs is made before the fork: after it, the child may only make system calls.
    let procs = CString::new(procs.as_os_str().as_encoded_bytes()).map_err(|e| start_err("joining its idle cgroup")(io::Error::other(e)))?;
    let mut name = [0u8; 16];
    let n = poller_name(cpu);
    name[..n.len().min(15)].copy_from_slice(&n.as_bytes()[..n.len().min(15)]);
    // SAFETY: a zeroed cpu_set_t changed only by CPU_SET with an index checked above.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        set
    };
    let (read_end, write_end) = crate::process::cloexec_pipe().map_err(start_err("making its report pipe"))?;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork in a possibly multi-threaded process: the child below makes only system calls (no
    // allocation, no lock, no Rust runtime) and ends with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(start_err("forking it")(io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: the child's own copies of what was prepared above; see poll().
        unsafe { poll(&procs, &set, &name, write_end.as_raw_fd(), parent) }
    }
    drop(write_end);
    let mut report = [0u8; 8];
    let read = std::fs::File::from(read_end).read_exact(&mut report);
    let step = i32::from_ne_bytes(report[..4].try_into().expect("4 bytes"));
    let errno = i32::from_ne_bytes(report[4..].try_into().expect("4 bytes"));
    if read.is_ok() && step < 0 {
        return Ok(pid);
    }
    end(pid);
    if read.is_err() {
        return Err(start_err("starting it")(io::Error::other("it ended without a word")));
    }
    Err(start_err(STEPS.get(step as usize).copied().unwrap_or("starting it"))(io::Error::from_raw_os_error(errno)))
}

/// The poller child: takes SCHED_IDLE, joins the idle cgroup, pins itself, names itself, closes every
/// inherited descriptor but the report pipe, reports, and spins until the process that started it is gone.
///
/// # Safety
/// Only in the child of a fork, with `report` its write end of the report pipe.
unsafe fn poll(procs: &CString, set: &libc::cpu_set_t, name: &[u8; 16], report: i32, parent: i32) -> ! {
    unsafe fn tell(report: i32, step: i32, errno: i32) {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&step.to_ne_bytes());
        b[4..].copy_from_slice(&errno.to_ne_bytes());
        libc::write(report, b.as_ptr().cast(), b.len());
    }
    let fail = |step: i32| -> ! {
        tell(report, step, *libc::__errno_location());
        libc::_exit(1)
    };
    // SCHED_IDLE first: a real-time task (a child of a SCHED_FIFO starter) may not join a cgroup without a
    // real-time budget, and the spinning must never run in a real-time class.
    let param = libc::sched_param { sched_priority: 0 };
    if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
        fail(0);
    }
    let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
        fail(1);
    }
    libc::close(fd);
    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
        fail(2);
    }
    if libc::prctl(libc::PR_SET_NAME, name.as_ptr()) != 0 {
        fail(3);
    }
    // Hold no descriptor of the parent's (sockets, pipes, the latency request): close all but the report pipe.
    libc::syscall(libc::SYS_close_range, 3u32, (report - 1) as u32, 0u32);
    libc::syscall(libc::SYS_close_range, (report + 1) as u32, u32::MAX, 0u32);
    tell(report, -1, 0);
    libc::close(report);
    loop {
        // About a millisecond of spinning between looks at whether the starter is still there.
        for _ in 0..(1 << 14) {
            std::hint::spin_loop();
        }
        if libc::getppid() != parent {
            libc::_exit(0);
        }
    }
}

/// A running idle poller, as `/proc` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub pid: i32,
    pub name: String,
    /// The scheduling policy (`libc::SCHED_*`).
    pub policy: i32,
    /// `Cpus_allowed_list` of `/proc/<pid>/status`.
    pub cpus_allowed: String,
    /// Its cgroup line for the cpu controller's hierarchy (`/proc/<pid>/cgroup`).
    pub cgroup: String,
}

/// The idle pollers `parent` started that are running now, by name.
pub fn running(parent: u32) -> Vec<Running> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        // "pid (comm) state ppid ...": the command name may hold spaces, so split after its last ')'.
        let Some(close) = stat.rfind(')') else { continue };
        let name = stat[stat.find('(').map_or(0, |i| i + 1)..close].to_string();
        let ppid = stat[close + 1..].split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(parent) || !name.starts_with("idle-poll-") {
            continue;
        }
        // SAFETY: no memory is passed.
        let policy = unsafe { libc::sched_getscheduler(pid) };
        let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
        let cpus_allowed = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap_or_default().trim().to_string();
        let cgroup = std::fs::read_to_string(e.path().join("cgroup")).unwrap_or_default();
        let cgroup = cgroup.lines().find(|l| l.contains(GROUP_PREFIX)).unwrap_or_default().to_string();
        found.push(Running { pid, name, policy, cpus_allowed, cgroup });
    }
    found.sort_by(|a, b| a.name.cmp(&b.name).then(a.pid.cmp(&b.pid)));
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn group_names_give_their_owner() {
        assert_eq!(owner_of("partita-idle-poll-1234-0"), Some(1234));
        assert_eq!(owner_of("partita-idle-poll-77-12"), Some(77));
        assert_eq!(owner_of("partita"), None);
        assert_eq!(owner_of("partita-idle-poll-x-1"), None);
    }

    /// The CPU time of `pid`, from /proc.
    fn cpu_time(pid: i32) -> Duration {
        crate::process::cpu_times_ns(pid as u32).map(|(u, s)| Duration::from_nanos(u + s)).unwrap_or_default()
    }

    /// Each poller is a SCHED_IDLE process pinned to its CPU in an idle cgroup, and all are gone, cgroup
    /// included, once dropped.
    #[test]
    #[cfg_attr(partita_not_root, ignore = "needs root")]
    fn pollers_are_idle_processes_pinned_to_their_cpus_until_dropped() {
        let cpus = crate::sched::current_thread_cpus().unwrap();
        let pollers = Pollers::start(&cpus).unwrap();
        assert_eq!(pollers.cpus(), cpus);
        assert_eq!(std::fs::read_to_string(pollers.group().join("cpu.idle")).unwrap().trim(), "1");
        let group_name = pollers.group().file_name().unwrap().to_string_lossy().into_owned();
        let seen: Vec<Running> = running(std::process::id()).into_iter().filter(|r| pollers.pids().contains(&r.pid)).collect();
        assert_eq!(seen.len(), cpus.len(), "{seen:?}");
        for (r, (cpu, pid)) in seen.iter().zip(pollers.children.iter()) {
            assert_eq!((r.pid, r.name.as_str(), r.policy), (*pid, poller_name(*cpu).as_str(), libc::SCHED_IDLE), "{r:?}");
            assert_eq!(r.cpus_allowed, cpu.to_string(), "{r:?}");
            assert!(r.cgroup.ends_with(&format!("/{group_name}")), "{r:?}");
        }
        let (group, pids) = (pollers.group().to_path_buf(), pollers.pids());
        drop(pollers);
        for pid in pids {
            assert!(!Path::new(&format!("/proc/{pid}")).exists(), "poller {pid} was ended and reaped");
        }
        assert!(!group.exists(), "{} was removed", group.display());
    }

    /// What the pollers are for: they run only when nothing else wants the CPU. A busy SCHED_OTHER process of
    /// another session (as a partition is: the supervisor calls setsid for it) on a poller's CPU leaves the
    /// poller next to no time; the same poller took about a third of the CPU as a SCHED_IDLE thread of the
    /// starting process.
    #[test]
    #[cfg_attr(partita_not_root, ignore = "needs root")]
    fn a_busy_process_of_another_session_leaves_the_poller_of_its_cpu_next_to_no_time() {
        let cpu = *crate::sched::current_thread_cpus().unwrap().last().unwrap();
        let pollers = Pollers::start(&[cpu]).unwrap();
        let poller = pollers.pids()[0];
        let mut busy = std::process::Command::new("taskset");
        busy.args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"]);
        // SAFETY: setsid is async-signal-safe.
        unsafe { std::os::unix::process::CommandExt::pre_exec(&mut busy, || if libc::setsid() < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }) };
        let mut busy = busy.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let (p0, t0) = (cpu_time(poller), Instant::now());
        std::thread::sleep(Duration::from_secs(1));
        let (p1, wall) = (cpu_time(poller), t0.elapsed());
        let _ = busy.kill();
        let _ = busy.wait();
        let share = (p1 - p0).as_secs_f64() / wall.as_secs_f64();
        assert!(share < 0.05, "the poller of CPU {cpu} took {:.0} % of it from a busy process of another session", share * 100.0);
    }
}
