//! The partition's first process between `clone` and `execve`: the only `unsafe` code of the supervisor (the
//! clone, and the run of the child, whose argv and envp are raw pointers).
//!
//! The child runs in a copy of a multi-threaded process, so it makes async-signal-safe system calls only
//! (`partita_os::prexec`), on memory the parent prepared ([`Plan`]): no allocation, no lock, no Rust standard
//! library call that might take one.
//! It reports each failure, and that it is ready, on a pipe (8 bytes: a [`Stage`] and the errno), and asks the
//! parent for its user namespace's id maps on the same pipe, waiting for the answer on a second one.
use super::rootfs::Step;
use partita_os::prexec;
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
    // SAFETY: the child only runs `run`, which makes async-signal-safe calls (partita_os::prexec) and ends in
    // execve or _exit.
    let pid = unsafe { prexec::clone_process(flags)? };
    if pid == 0 {
        // SAFETY: this is the freshly cloned child; `plan` points into the parent's memory, copied with it.
        unsafe { run(plan) }
    }
    Ok(pid)
}

/// Writes a failure report (the stage and the errno of the call that failed) and ends the child.
fn fail(report: RawFd, stage: Stage) -> ! {
    let errno = prexec::errno();
    let mut m = [0u8; 8];
    m[..4].copy_from_slice(&(stage as u32).to_ne_bytes());
    m[4..].copy_from_slice(&errno.to_ne_bytes());
    prexec::write_all(report, &m);
    prexec::exit(127)
}

/// One step of building the partition's view of the file system; fails the child with its stage.
fn mount_step(step: &Step, report: RawFd) {
    let (done, stage) = match step {
        Step::Write { path, content } => (prexec::write_file(path, content), Stage::WriteFile),
        Step::Mount { source, target, fstype, flags, data, optional } => {
            let mounted = prexec::mount(source.as_deref(), target, fstype.as_deref(), *flags, data.as_deref());
            (mounted || (*optional && prexec::errno() == libc::ENOENT), Stage::Mount)
        }
        Step::SetAttr { target, set } => (prexec::set_mount_attributes(target, *set), Stage::SetMountAttributes),
        Step::Mkdir { path, mode } => (prexec::make_directory(path, *mode), Stage::MakeMountPoint),
        Step::Touch { path } => (prexec::touch(path), Stage::MakeMountPoint),
        Step::Symlink { target, link } => (prexec::symlink(target, link), Stage::MakeMountPoint),
        Step::PivotRoot { new_root } => (prexec::pivot_into(new_root), Stage::PivotRoot),
    };
    if !done {
        fail(report, stage);
    }
}

/// The child's whole life until `execve`.
///
/// # Safety
/// Only in the child right after `clone` (see [`spawn`]): `p`'s pointers (argv, envp) are the parent's,
/// valid in the copy.
unsafe fn run(p: &Plan) -> ! {
    let report = p.report;
    // Rust ignores SIGPIPE and the supervisor may block signals; a partition starts with defaults.
    if !prexec::reset_signals() {
        fail(report, Stage::ResetSignals);
    }
    // Its own session: no terminal, and a Ctrl-C at the supervisor's terminal does not reach it.
    if !prexec::new_session() {
        fail(report, Stage::NewSession);
    }
    // The partition dies with the supervisor thread that started it, never left unsupervised.
    prexec::die_with_parent();
    if let Some(ns) = p.netns {
        if !prexec::join_network_namespace(ns) {
            fail(report, Stage::JoinNetwork);
        }
    }
    for step in p.mounts {
        mount_step(step, report);
    }
    if !prexec::set_hostname(p.hostname) {
        fail(report, Stage::SetHostName);
    }
    if !prexec::duplicate_onto(p.stdin, 0) {
        fail(report, Stage::RedirectOutput);
    }
    if let Some(out) = p.output {
        if !prexec::duplicate_onto(out, 1) || !prexec::duplicate_onto(out, 2) {
            fail(report, Stage::RedirectOutput);
        }
    }
    // The scheduling class its system file grants, never the supervisor's own.
    if !prexec::set_scheduler(p.fifo_priority) {
        fail(report, Stage::SetScheduling);
    }
    if let Some(bytes) = p.confined.as_ref().and_then(|c| c.memlock) {
        if !prexec::set_limit(libc::RLIMIT_MEMLOCK, bytes) {
            fail(report, Stage::AllowMemoryLock);
        }
    }
    if let Some(c) = p.confined.as_ref() {
        // No way to raise the real-time priority or the nice value later (raising a limit needs a capability
        // on the host, which a partition never has).
        // No core dumps either: a crashing program's memory stays in the partition (its root is read-only
        // anyway), and writing one would take time outside its window.
        if !prexec::set_limit(libc::RLIMIT_RTPRIO, 0) || !prexec::set_limit(libc::RLIMIT_NICE, 0) || !prexec::set_limit(libc::RLIMIT_CORE, 0) {
            fail(report, Stage::LimitRealtime);
        }
        // The host's supplementary groups (root's) must not come along into the user namespace.
        if !prexec::drop_supplementary_groups() {
            fail(report, Stage::DropGroups);
        }
        for (resource, value) in c.limits {
            if !prexec::set_limit(*resource, *value) {
                fail(report, Stage::SetLimits);
            }
        }
        // Its user namespace belongs to its own host uid, not to host root: the kernel charges the per-user
        // counts of everything inside (inotify instances and watches, message-queue bytes, queued signals,
        // processes) to the namespace's owner at the host's level, so they are the partition's own and never
        // root's, and the limits set above cap them (the kernel copies them into the namespace).
        if !prexec::become_id(c.uid) {
            fail(report, Stage::BecomeOwner);
        }
        if !prexec::unshare(libc::CLONE_NEWUSER) {
            fail(report, Stage::EnterUserNamespace);
        }
        prexec::write_all(report, &NEED_MAPS);
        if prexec::read_byte(p.maps_written).is_none() {
            fail(report, Stage::WaitForIdMaps);
        }
        // Root of its user namespace: the partition's host uid and gid.
        if !prexec::become_id(0) {
            fail(report, Stage::BecomeRoot);
        }
        // A change of credentials clears the parent-death signal: set it again.
        if !prexec::die_with_parent() {
            fail(report, Stage::ParentDeathSignal);
        }
    }
    // Set up: the parent may return now. Joining the cgroups comes late because the partition may be frozen
    // (outside its window): this process then stops here, before its first instruction of the partition's
    // program, and goes on when its window comes.
    prexec::write_all(report, &READY);
    for fd in p.procs {
        // "0" is the writing process itself.
        if !prexec::write_all(*fd, b"0") {
            prexec::exit(EXIT_CGROUP);
        }
    }
    if let Some(c) = &p.confined {
        // Its own cgroup namespace (its cgroup is its root), then no capability beyond the granted ones, no
        // new privileges on exec, and its seccomp filters.
        if !prexec::unshare(libc::CLONE_NEWCGROUP) || !prexec::keep_only_capabilities(c.keep, c.last_cap) || !prexec::no_new_privileges() {
            prexec::exit(EXIT_CONFINE);
        }
        if let Some(f) = c.notify {
            match prexec::install_filter_with_listener(f) {
                Some(listener) if partita_os::seccomp_notify::send_fd(c.notify_socket, listener) => prexec::close(listener),
                _ => prexec::exit(EXIT_CONFINE),
            }
        }
        for f in c.filters {
            if !prexec::install_filter(f) {
                prexec::exit(EXIT_CONFINE);
            }
        }
    }
    // The descriptors handed over go to 3, 4, … (dup2 clears their close-on-exec); no other descriptor of the
    // supervisor's survives into the partition's program.
    for (i, fd) in p.pass_fds.iter().enumerate() {
        if !prexec::duplicate_onto(*fd, 3 + i as libc::c_int) {
            prexec::exit(EXIT_CONFINE);
        }
    }
    prexec::close_from_on_exec(3 + p.pass_fds.len() as u32);
    prexec::execute(p.program, p.argv, p.envp);
    prexec::exit(EXIT_EXEC)
}
