//! The calls a process may make between `fork`/`clone` of a multi-threaded parent and `execve`: each a raw system
//! call, async-signal-safe, with no allocation, no lock and no Rust standard library call that might take one.
//! The partition launcher's child (crates/supervisor/src/launch/child.rs) makes its calls through these, and
//! the crate's other wrappers of the same calls (a thread's scheduler, its network namespace) use them too.
//!
//! Each returns `true` on success; on failure it returns `false` with the call's `errno` left as the kernel set
//! it ([`errno`] reads it), so that the caller can report the step that failed and why without formatting
//! anything.
use std::ffi::CStr;
use std::os::fd::RawFd;

/// The calling thread's `errno`.
pub fn errno() -> i32 {
    // SAFETY: __errno_location returns a valid pointer to this thread's errno for the thread's lifetime.
    unsafe { *libc::__errno_location() }
}

/// Clones the caller like `fork(2)` (no `CLONE_VM`, the child continues on a copy of the stack) with `flags`
/// (namespaces, and the signal the parent gets at the child's exit): the child's pid, 0 in the child.
///
/// # Safety
/// The child runs in a copy of a possibly multi-threaded process: until it calls `execve` or `_exit` it may only
/// make async-signal-safe calls (this module's).
pub unsafe fn clone_process(flags: libc::c_int) -> std::io::Result<i32> {
    let pid = libc::syscall(libc::SYS_clone, flags as libc::c_ulong, 0usize, 0usize, 0usize, 0usize);
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(pid as i32)
}

/// Unblocks every signal and gives SIGPIPE its default action back (Rust ignores it; a program starts with it).
pub fn reset_signals() -> bool {
    // SAFETY: the set is a local, initialised by sigemptyset before use; signal() takes no pointer.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
            return false;
        }
        libc::signal(libc::SIGPIPE, libc::SIG_DFL) != libc::SIG_ERR
    }
}

/// A session of its own: no controlling terminal.
pub fn new_session() -> bool {
    // SAFETY: no arguments.
    unsafe { libc::setsid() >= 0 }
}

/// SIGKILL when the thread that created this process ends (cleared by a change of credentials: set it again).
pub fn die_with_parent() -> bool {
    // SAFETY: integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) == 0 }
}

/// Joins the network namespace open at `fd`.
pub fn join_network_namespace(fd: RawFd) -> bool {
    // SAFETY: integer arguments only; a bad descriptor is an error, not undefined behaviour.
    unsafe { libc::setns(fd, libc::CLONE_NEWNET) == 0 }
}

/// Leaves for new namespaces of the kinds in `flags` (`CLONE_NEWUSER`, `CLONE_NEWCGROUP`, …).
pub fn unshare(flags: libc::c_int) -> bool {
    // SAFETY: integer argument only.
    unsafe { libc::unshare(flags) == 0 }
}

pub fn set_hostname(name: &[u8]) -> bool {
    // SAFETY: the pointer and length come from one slice.
    unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) == 0 }
}

/// Makes `target` a copy of `fd` (close-on-exec cleared on the copy).
pub fn duplicate_onto(fd: RawFd, target: RawFd) -> bool {
    // SAFETY: integer arguments only.
    unsafe { libc::dup2(fd, target) >= 0 }
}

pub fn close(fd: RawFd) {
    // SAFETY: integer argument only; closing a descriptor this process owns.
    unsafe { libc::close(fd) };
}

/// Marks every descriptor from `first` on close-on-exec.
pub fn close_from_on_exec(first: u32) -> bool {
    // SAFETY: integer arguments only.
    unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) == 0 }
}

/// SCHED_FIFO at `priority`, or SCHED_OTHER for `None`, for this process.
pub fn set_scheduler(fifo_priority: Option<libc::c_int>) -> bool {
    let (policy, priority) = match fifo_priority {
        Some(p) => (libc::SCHED_FIFO, p),
        None => (libc::SCHED_OTHER, 0),
    };
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: param is a local the call only reads.
    unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
}

/// Sets the soft and hard limit of `resource` to `value`.
pub fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> bool {
    let limit = libc::rlimit { rlim_cur: value, rlim_max: value };
    // SAFETY: limit is a local the call only reads.
    unsafe { libc::setrlimit(resource, &limit) == 0 }
}

/// No supplementary groups.
pub fn drop_supplementary_groups() -> bool {
    // SAFETY: a count of 0 with a null list is the documented way to clear them.
    unsafe { libc::setgroups(0, std::ptr::null()) == 0 }
}

/// Real, effective and saved gid and uid all `id` (the gid first, while the uid may still change it).
pub fn become_id(id: libc::uid_t) -> bool {
    // SAFETY: integer arguments only.
    unsafe { libc::setresgid(id, id, id) == 0 && libc::setresuid(id, id, id) == 0 }
}

/// Writes all of `bytes` to `fd`.
pub fn write_all(fd: RawFd, bytes: &[u8]) -> bool {
    let mut done = 0;
    while done < bytes.len() {
        // SAFETY: the pointer and length stay inside `bytes`.
        let n = unsafe { libc::write(fd, bytes[done..].as_ptr().cast(), bytes.len() - done) };
        if n <= 0 {
            return false;
        }
        done += n as usize;
    }
    true
}

/// Reads one byte from `fd`.
pub fn read_byte(fd: RawFd) -> Option<u8> {
    let mut b = 0u8;
    // SAFETY: reads at most one byte into a local.
    (unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) } == 1).then_some(b)
}

/// Creates (or truncates) `path` read-only for everyone and writes `content` into it.
pub fn write_file(path: &CStr, content: &[u8]) -> bool {
    // SAFETY: path is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC, 0o444) };
    if fd < 0 {
        return false;
    }
    let ok = write_all(fd, content);
    close(fd);
    ok
}

/// mount(2); `None` stands for a null argument.
pub fn mount(source: Option<&CStr>, target: &CStr, fstype: Option<&CStr>, flags: libc::c_ulong, data: Option<&CStr>) -> bool {
    let ptr = |c: Option<&CStr>| c.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: every pointer is null or a NUL-terminated string that outlives the call.
    unsafe { libc::mount(ptr(source), target.as_ptr(), ptr(fstype), flags, ptr(data).cast()) == 0 }
}

/// Sets the attributes `set` (`MOUNT_ATTR_*`) on the mount at `target` and every mount below it.
pub fn set_mount_attributes(target: &CStr, set: u64) -> bool {
    let attr = libc::mount_attr { attr_set: set, attr_clr: 0, propagation: 0, userns_fd: 0 };
    // SAFETY: target is NUL-terminated; attr is a local of the size passed.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        ) == 0
    }
}

/// Makes the directory `path` (one that exists already is fine).
pub fn make_directory(path: &CStr, mode: libc::mode_t) -> bool {
    // SAFETY: path is NUL-terminated.
    let made = unsafe { libc::mkdir(path.as_ptr(), mode) == 0 };
    made || errno() == libc::EEXIST
}

/// Makes `path` an empty file if it is not there.
pub fn touch(path: &CStr) -> bool {
    // SAFETY: path is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644) };
    if fd < 0 {
        return false;
    }
    close(fd);
    true
}

pub fn symlink(target: &CStr, link: &CStr) -> bool {
    // SAFETY: both are NUL-terminated.
    unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) == 0 }
}

/// Makes `new_root` this mount namespace's root and the working directory, the old root detached
/// (`pivot_root(".", ".")`: the old root ends up stacked under the new one).
pub fn pivot_into(new_root: &CStr) -> bool {
    let dot = c".".as_ptr();
    // SAFETY: every path is NUL-terminated.
    unsafe {
        libc::chdir(new_root.as_ptr()) == 0
            && libc::syscall(libc::SYS_pivot_root, dot, dot) == 0
            && libc::umount2(dot, libc::MNT_DETACH) == 0
            && libc::chdir(c"/".as_ptr()) == 0
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

/// Keeps only the capabilities in `keep` (bit n = capability n): every other one up to `last_cap` out of the
/// bounding set, the ambient set cleared, and `keep` as the effective, permitted and inheritable sets.
pub fn keep_only_capabilities(keep: u64, last_cap: u32) -> bool {
    for cap in 0..=last_cap {
        // SAFETY: integer arguments only.
        if keep & (1u64 << cap) == 0 && unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            return false;
        }
    }
    // SAFETY: integer arguments only.
    if unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0) } != 0 {
        return false;
    }
    let header = CapHeader { version: CAPABILITY_VERSION_3, pid: 0 };
    let half = |shift: u32| (keep >> shift) as u32;
    let data = [
        CapData { effective: half(0), permitted: half(0), inheritable: half(0) },
        CapData { effective: half(32), permitted: half(32), inheritable: half(32) },
    ];
    // SAFETY: header and the two data structs of version 3 are locals the call only reads.
    unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) == 0 }
}

/// No new privileges on `execve` (set-uid bits and file capabilities do nothing).
pub fn no_new_privileges() -> bool {
    // SAFETY: integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 }
}

/// Installs the seccomp filter `program`.
pub fn install_filter(program: &libc::sock_fprog) -> bool {
    // SAFETY: program points to a filter the caller keeps alive for the call; the kernel copies it.
    unsafe { libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER as libc::c_ulong, program as *const libc::sock_fprog) == 0 }
}

/// Installs the seccomp filter `program` with a new listener for its `SECCOMP_RET_USER_NOTIF` decisions: the
/// listener's descriptor.
pub fn install_filter_with_listener(program: &libc::sock_fprog) -> Option<RawFd> {
    // SAFETY: as for install_filter.
    let fd = unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER, program as *const libc::sock_fprog) };
    (fd >= 0).then_some(fd as RawFd)
}

/// Ends the process at once with `status` (no destructors, no atexit handlers, no flushing).
pub fn exit(status: i32) -> ! {
    // SAFETY: _exit never returns and touches no memory of the process.
    unsafe { libc::_exit(status) }
}

/// Executes `program`; returns only if that failed.
///
/// # Safety
/// `argv` and `envp` must be NULL-terminated arrays of pointers to NUL-terminated strings that stay valid for the
/// call.
pub unsafe fn execute(program: &CStr, argv: &[*const libc::c_char], envp: &[*const libc::c_char]) {
    libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr());
}
