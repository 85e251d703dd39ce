//! The partition's first process between `clone` and `execve`: the only `unsafe` code of the supervisor.
//!
//! The child runs in a copy of a multi-threaded process, so it makes raw system calls only, on memory the
//! parent prepared ([`Plan`]): no allocation, no lock, no Rust standard library call that might take one.
//! It reports each failure, and that it is ready, on a pipe (8 bytes: a [`Stage`] and the errno), and asks the
//! parent for its user namespace's id maps on the same pipe, waiting for the answer on a second one.
use super::rootfs::Step;
use std::ffi::CStr;
use std::os::fd::RawFd;

/// What the child does and reports, in order. The numbers travel on the report pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Stage {
    ResetSignals = 1,
    NewSession,
    JoinNetwork,
    Mount,
    SetMountAttributes,
    MakeMountPoint,
    PivotRoot,
    SetHostName,
    RedirectOutput,
    SetScheduling,
    LimitRealtime,
    DropGroups,
    EnterUserNamespace,
    WaitForIdMaps,
    BecomeRoot,
    ParentDeathSignal,
    AllowMemoryLock,
    SetLimits,
    BecomeOwner,
    WriteFile,
}

impl Stage {
    pub const ALL: [Stage; 20] = [
        Stage::ResetSignals,
        Stage::NewSession,
        Stage::JoinNetwork,
        Stage::Mount,
        Stage::SetMountAttributes,
        Stage::MakeMountPoint,
        Stage::PivotRoot,
        Stage::SetHostName,
        Stage::RedirectOutput,
        Stage::SetScheduling,
        Stage::LimitRealtime,
        Stage::DropGroups,
        Stage::EnterUserNamespace,
        Stage::WaitForIdMaps,
        Stage::BecomeRoot,
        Stage::ParentDeathSignal,
        Stage::AllowMemoryLock,
        Stage::SetLimits,
        Stage::BecomeOwner,
        Stage::WriteFile,
    ];

    pub fn from_u32(n: u32) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| *s as u32 == n)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Stage::ResetSignals => "reset signals",
            Stage::NewSession => "start a session",
            Stage::JoinNetwork => "join network namespace",
            Stage::Mount => "mount",
            Stage::SetMountAttributes => "make the host's file system read-only",
            Stage::MakeMountPoint => "make a mount point",
            Stage::PivotRoot => "pivot into its view of the file system",
            Stage::SetHostName => "set host name",
            Stage::RedirectOutput => "redirect stdin, stdout and stderr",
            Stage::SetScheduling => "set the scheduling class",
            Stage::LimitRealtime => "limit the real-time priority",
            Stage::DropGroups => "drop supplementary groups",
            Stage::EnterUserNamespace => "enter its user namespace",
            Stage::WaitForIdMaps => "wait for its id maps",
            Stage::BecomeRoot => "become root of its user namespace",
            Stage::ParentDeathSignal => "set the parent-death signal",
            Stage::AllowMemoryLock => "raise RLIMIT_MEMLOCK to its memory limit for lock_memory (the supervisor needs CAP_SYS_RESOURCE)",
            Stage::SetLimits => "set its limits (RLIMIT_MSGQUEUE, RLIMIT_SIGPENDING)",
            Stage::BecomeOwner => "become its host uid, the owner of its user namespace",
            Stage::WriteFile => "write its DDS configuration into its view",
        }
    }
}

/// The message that the child is set up (the parent returns; the child joins its cgroups and execs).
pub const READY: [u8; 8] = [0xff; 8];
/// The message that the child is in its user namespace and waits for its id maps.
pub const NEED_MAPS: [u8; 8] = [0xfe; 8];

/// Exit statuses of a child that failed after it was ready (the health monitor sees them).
pub const EXIT_CGROUP: i32 = 126;
pub const EXIT_EXEC: i32 = 127;
pub const EXIT_CONFINE: i32 = 125;

/// The confinement applied after the cgroups are joined, inside the partition's user namespace.
pub struct Confined<'a> {
    /// RLIMIT_MEMLOCK, when the partition may lock its memory.
    pub memlock: Option<u64>,
    /// Its host uid (and gid): the owner of its user namespace, whom the kernel charges its per-user counts.
    pub uid: libc::uid_t,
    /// Limits set before its user namespace is made: they also cap the whole namespace's per-user counts.
    pub limits: &'a [(libc::__rlimit_resource_t, u64)],
    /// Capabilities kept (bit n = capability n); every other one up to `last_cap` is dropped.
    pub keep: u64,
    pub last_cap: u32,
    /// The filter whose attempts go to the supervisor: installed with a new listener, whose descriptor is sent
    /// on `notify_socket`.
    pub notify: Option<&'a libc::sock_fprog>,
    pub notify_socket: RawFd,
    pub filters: &'a [libc::sock_fprog],
}

/// Everything the child needs, prepared by the parent.
pub struct Plan<'a> {
    pub program: &'a CStr,
    /// NULL-terminated.
    pub argv: &'a [*const libc::c_char],
    /// NULL-terminated.
    pub envp: &'a [*const libc::c_char],
    pub hostname: &'a [u8],
    pub netns: Option<RawFd>,
    /// `/dev/null`, the partition's stdin.
    pub stdin: RawFd,
    /// The write end of the pipe its stdout and stderr go to.
    pub output: Option<RawFd>,
    /// `cgroup.procs` of each of the partition's cgroups, opened by the parent.
    pub procs: &'a [RawFd],
    pub mounts: &'a [Step],
    pub fifo_priority: Option<libc::c_int>,
    /// Set for a confined partition: enter a user namespace (the parent writes its maps) and confine.
    pub confined: Option<Confined<'a>>,
    /// Write end of the report pipe.
    pub report: RawFd,
    /// Read end of the pipe the parent answers `NEED_MAPS` on.
    pub maps_written: RawFd,
    /// Descriptors the program gets as 3, 4, …, in order (a VM partition's taps).
    pub pass_fds: &'a [RawFd],
}

/// Clones the partition's first process, the root of new PID, mount, UTS and IPC namespaces and a direct
/// child of the caller, and runs `plan` in it; returns its pid.
pub fn spawn(plan: &Plan) -> std::io::Result<i32> {
    let flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWUTS | libc::CLONE_NEWIPC | libc::SIGCHLD;
    // SAFETY: a clone without CLONE_VM and with a null stack behaves like fork(2): the child gets a copy of
    // the address space and continues here; it only runs `run`, which ends in execve or _exit.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags as libc::c_ulong, 0usize, 0usize, 0usize, 0usize) };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: this is the freshly cloned child; `plan` points into the parent's memory, copied with it.
        unsafe { run(plan) }
    }
    Ok(pid as i32)
}

/// Writes a failure report and ends the child.
///
/// # Safety
/// Only in the child: async-signal-safe calls on its own memory.
unsafe fn fail(report: RawFd, stage: Stage) -> ! {
    let errno = *libc::__errno_location();
    let mut m = [0u8; 8];
    m[..4].copy_from_slice(&(stage as u32).to_ne_bytes());
    m[4..].copy_from_slice(&errno.to_ne_bytes());
    libc::write(report, m.as_ptr().cast(), 8);
    libc::_exit(127)
}

/// # Safety
/// Only in the child after `clone`: raw system calls on memory prepared by the parent, no allocation.
unsafe fn mount_step(step: &Step, report: RawFd) {
    let ptr = |c: &Option<std::ffi::CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    match step {
        Step::Write { path, content } => {
            let fd = libc::open(path.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC, 0o444);
            if fd < 0 {
                fail(report, Stage::WriteFile);
            }
            let mut done = 0;
            while done < content.len() {
                let n = libc::write(fd, content[done..].as_ptr().cast(), content.len() - done);
                if n <= 0 {
                    fail(report, Stage::WriteFile);
                }
                done += n as usize;
            }
            libc::close(fd);
        }
        Step::Mount { source, target, fstype, flags, data, optional } => {
            if libc::mount(ptr(source), target.as_ptr(), ptr(fstype), *flags, ptr(data).cast()) != 0 {
                let errno = *libc::__errno_location();
                if !(*optional && errno == libc::ENOENT) {
                    fail(report, Stage::Mount);
                }
            }
        }
        Step::SetAttr { target, set } => {
            let attr = libc::mount_attr { attr_set: *set, attr_clr: 0, propagation: 0, userns_fd: 0 };
            let r = libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                target.as_ptr(),
                libc::AT_RECURSIVE as libc::c_uint,
                &attr as *const libc::mount_attr,
                std::mem::size_of::<libc::mount_attr>(),
            );
            if r != 0 {
                fail(report, Stage::SetMountAttributes);
            }
        }
        Step::Mkdir { path, mode } => {
            if libc::mkdir(path.as_ptr(), *mode) != 0 && *libc::__errno_location() != libc::EEXIST {
                fail(report, Stage::MakeMountPoint);
            }
        }
        Step::Touch { path } => {
            let fd = libc::open(path.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644);
            if fd < 0 {
                fail(report, Stage::MakeMountPoint);
            }
            libc::close(fd);
        }
        Step::Symlink { target, link } => {
            if libc::symlink(target.as_ptr(), link.as_ptr()) != 0 {
                fail(report, Stage::MakeMountPoint);
            }
        }
        Step::PivotRoot { new_root } => {
            // pivot_root(".", "."): the old root ends up stacked under the new one and is detached at once.
            let dot = c".".as_ptr();
            if libc::chdir(new_root.as_ptr()) != 0
                || libc::syscall(libc::SYS_pivot_root, dot, dot) != 0
                || libc::umount2(dot, libc::MNT_DETACH) != 0
                || libc::chdir(c"/".as_ptr()) != 0
            {
                fail(report, Stage::PivotRoot);
            }
        }
    }
}

/// The capability header and data of capset(2), version 3 (two 32-bit halves of each set).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Keeps only the capabilities in `keep`: out of the bounding and ambient sets, and the effective, permitted
/// and inheritable ones; returns false if the kernel refused.
///
/// # Safety
/// Only in the child: raw system calls on local memory.
unsafe fn keep_only(keep: u64, last_cap: u32) -> bool {
    for cap in 0..=last_cap {
        if keep & (1u64 << cap) == 0 && libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
            return false;
        }
    }
    if libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0) != 0 {
        return false;
    }
    let header = CapHeader { version: CAPABILITY_VERSION_3, pid: 0 };
    let half = |shift: u32| (keep >> shift) as u32;
    let data = [
        CapData { effective: half(0), permitted: half(0), inheritable: half(0) },
        CapData { effective: half(32), permitted: half(32), inheritable: half(32) },
    ];
    libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) == 0
}

/// The child's whole life until `execve`.
///
/// # Safety
/// Only in the child right after `clone` (see [`spawn`]).
unsafe fn run(p: &Plan) -> ! {
    let report = p.report;
    // Rust ignores SIGPIPE and the supervisor may block signals; a partition starts with defaults.
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
        fail(report, Stage::ResetSignals);
    }
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    // Its own session: no terminal, and a Ctrl-C at the supervisor's terminal does not reach it.
    if libc::setsid() < 0 {
        fail(report, Stage::NewSession);
    }
    // The partition dies with the supervisor thread that started it, never left unsupervised.
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
    if let Some(ns) = p.netns {
        if libc::setns(ns, libc::CLONE_NEWNET) != 0 {
            fail(report, Stage::JoinNetwork);
        }
    }
    for step in p.mounts {
        mount_step(step, report);
    }
    if libc::sethostname(p.hostname.as_ptr().cast(), p.hostname.len()) != 0 {
        fail(report, Stage::SetHostName);
    }
    if libc::dup2(p.stdin, 0) < 0 {
        fail(report, Stage::RedirectOutput);
    }
    if let Some(out) = p.output {
        if libc::dup2(out, 1) < 0 || libc::dup2(out, 2) < 0 {
            fail(report, Stage::RedirectOutput);
        }
    }
    // The scheduling class its system file grants, never the supervisor's own.
    let (policy, priority) = match p.fifo_priority {
        Some(prio) => (libc::SCHED_FIFO, prio),
        None => (libc::SCHED_OTHER, 0),
    };
    let param = libc::sched_param { sched_priority: priority };
    if libc::sched_setscheduler(0, policy, &param) != 0 {
        fail(report, Stage::SetScheduling);
    }
    if let Some(bytes) = p.confined.as_ref().and_then(|c| c.memlock) {
        let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
        if libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) != 0 {
            fail(report, Stage::AllowMemoryLock);
        }
    }
    if p.confined.is_some() {
        // No way to raise the real-time priority or the nice value later (raising a limit needs a capability
        // on the host, which a partition never has).
        // No core dumps either: a crashing program's memory stays in the partition (its root is read-only
        // anyway), and writing one would take time outside its window.
        let zero = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::setrlimit(libc::RLIMIT_RTPRIO, &zero) != 0 || libc::setrlimit(libc::RLIMIT_NICE, &zero) != 0 || libc::setrlimit(libc::RLIMIT_CORE, &zero) != 0 {
            fail(report, Stage::LimitRealtime);
        }
        // The host's supplementary groups (root's) must not come along into the user namespace.
        if libc::setgroups(0, std::ptr::null()) != 0 {
            fail(report, Stage::DropGroups);
        }
        let Some(c) = p.confined.as_ref() else { fail(report, Stage::SetLimits) };
        for (resource, value) in c.limits {
            let limit = libc::rlimit { rlim_cur: *value, rlim_max: *value };
            if libc::setrlimit(*resource, &limit) != 0 {
                fail(report, Stage::SetLimits);
            }
        }
        // Its user namespace belongs to its own host uid, not to host root: the kernel charges the per-user
        // counts of everything inside (inotify instances and watches, message-queue bytes, queued signals,
        // processes) to the namespace's owner at the host's level, so they are the partition's own and never
        // root's, and the limits set above cap them (the kernel copies them into the namespace).
        if libc::setresgid(c.uid, c.uid, c.uid) != 0 || libc::setresuid(c.uid, c.uid, c.uid) != 0 {
            fail(report, Stage::BecomeOwner);
        }
        if libc::unshare(libc::CLONE_NEWUSER) != 0 {
            fail(report, Stage::EnterUserNamespace);
        }
        libc::write(report, NEED_MAPS.as_ptr().cast(), 8);
        let mut answer = 0u8;
        if libc::read(p.maps_written, (&mut answer as *mut u8).cast(), 1) != 1 {
            fail(report, Stage::WaitForIdMaps);
        }
        // Root of its user namespace: the partition's host uid and gid.
        if libc::setresgid(0, 0, 0) != 0 || libc::setresuid(0, 0, 0) != 0 {
            fail(report, Stage::BecomeRoot);
        }
        // A change of credentials clears the parent-death signal: set it again.
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
            fail(report, Stage::ParentDeathSignal);
        }
    }
    // Set up: the parent may return now. Joining the cgroups comes late because the partition may be frozen
    // (outside its window): this process then stops here, before its first instruction of the partition's
    // program, and goes on when its window comes.
    libc::write(report, READY.as_ptr().cast(), 8);
    for fd in p.procs {
        // "0" is the writing process itself.
        if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
            libc::_exit(EXIT_CGROUP);
        }
    }
    if let Some(c) = &p.confined {
        // Its own cgroup namespace (its cgroup is its root), then no capability beyond the granted ones, no
        // new privileges on exec, and its seccomp filters.
        if libc::unshare(libc::CLONE_NEWCGROUP) != 0 || !keep_only(c.keep, c.last_cap) || libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            libc::_exit(EXIT_CONFINE);
        }
        if let Some(f) = c.notify {
            let flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
            let listener = libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, f as *const libc::sock_fprog);
            if listener < 0 || !partita_os::seccomp_notify::send_fd(c.notify_socket, listener as RawFd) {
                libc::_exit(EXIT_CONFINE);
            }
            libc::close(listener as RawFd);
        }
        for f in c.filters {
            if libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER as libc::c_ulong, f as *const libc::sock_fprog) != 0 {
                libc::_exit(EXIT_CONFINE);
            }
        }
    }
    // The descriptors handed over go to 3, 4, … (dup2 clears their close-on-exec); no other descriptor of the
    // supervisor's survives into the partition's program.
    for (i, fd) in p.pass_fds.iter().enumerate() {
        if libc::dup2(*fd, 3 + i as libc::c_int) < 0 {
            libc::_exit(EXIT_CONFINE);
        }
    }
    libc::syscall(libc::SYS_close_range, 3u32 + p.pass_fds.len() as u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
    libc::execve(p.program.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
    libc::_exit(EXIT_EXEC);
}
