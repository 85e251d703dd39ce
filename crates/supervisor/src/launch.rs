//! Starting a partition's process tree in its own namespaces and cgroups.
//!
//! The partition's first process is created by `clone(2)` with new PID, mount, UTS and IPC namespaces, so it
//! is PID 1 of its namespace and a direct child of the supervisor (which reaps it). It joins the partition's
//! named network namespace, mounts a fresh `/proc` (so `ps` sees only the partition's tree), sets its host
//! name, and, last before executing the partition's program, writes itself into every cgroup of the
//! partition: the program and every descendant are confined from their first instruction.
//!
//! Between `clone` and `execve` the child runs in a copy of a multi-threaded process, so it only makes raw
//! system calls on memory prepared by the parent (no allocation, no locks).
use crate::error::{path_err, sys_failed, Result, SupervisorError};
use partita_env::PartitionEnv;
use partita_os::process::is_executable;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// What to start for a partition, and where.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The partition's name (its host name, and in errors).
    pub partition: String,
    /// The program (a path, or a name looked up in PATH by the supervisor) and its arguments.
    pub program: String,
    pub args: Vec<String>,
    /// Extra environment on top of the supervisor's own and the partition's (`environment`).
    pub env: Vec<(String, String)>,
    /// The `cgroup.procs` files of the partition's cgroups.
    pub cgroup_procs: Vec<PathBuf>,
    /// `/run/netns/<name>` of the partition's network namespace; `None` keeps the supervisor's (tests only).
    pub netns: Option<PathBuf>,
    /// What the supervisor tells the programs about their partition (`PARTITA_*`, `CYCLONEDDS_URI`); `None`:
    /// nothing (tests of the mechanism alone).
    pub environment: Option<PartitionEnv>,
    /// File receiving the partition's stdout and stderr (appended); `None` inherits the supervisor's.
    pub output: Option<PathBuf>,
    /// SCHED_FIFO at this priority; `None`: SCHED_OTHER (whatever class the supervisor itself runs in).
    pub fifo_priority: Option<u8>,
}

/// A started partition: the PID (in the supervisor's namespace) of its PID-namespace root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    pub pid: i32,
}

/// Steps of the child, reported back through the error pipe.
const STEPS: [&str; 9] = ["join cgroup", "join network namespace", "make mounts private", "mount /proc", "set host name", "execve", "reset signals", "redirect output", "set the scheduling class"];

/// Looks `program` up in PATH unless it contains a slash.
pub fn resolve_program(program: &str) -> Result<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(SupervisorError::Invalid(format!("program {program:?} is not an executable file")))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let p = dir.join(program);
        if is_executable(&p) {
            return Ok(p);
        }
    }
    Err(SupervisorError::Invalid(format!("program {program:?} not found in PATH")))
}

fn cstring(what: &str, s: &[u8]) -> Result<CString> {
    CString::new(s).map_err(|_| SupervisorError::Invalid(format!("{what} contains a NUL byte")))
}

/// Starts the partition. Returns once the child is set up (namespaces, mounts, host name) or with the step
/// that failed; it then joins the partition's cgroups and executes the program. A failure of those two last
/// steps shows as exit status 126 (cgroup) or 127 (execve) to the health monitor: they cannot be waited for
/// here, because a frozen partition's process stops as soon as it joins its cgroup.
pub fn launch(spec: &LaunchSpec) -> Result<Started> {
    // Everything the child needs is prepared here: it must not allocate.
    let program = resolve_program(&spec.program)?;
    let c_program = cstring("program", program.as_os_str().as_bytes())?;
    let mut c_args = vec![cstring("program", spec.program.as_bytes())?];
    for a in &spec.args {
        c_args.push(cstring("argument", a.as_bytes())?);
    }
    let mut env: Vec<(String, String)> = std::env::vars().filter(|(k, _)| !partita_env::is_reserved(k)).collect();
    env.extend(spec.environment.iter().flat_map(PartitionEnv::vars));
    env.extend(spec.env.iter().cloned());
    let c_env: Vec<CString> =
        env.iter().map(|(k, v)| cstring("environment", format!("{k}={v}").as_bytes())).collect::<Result<_>>()?;
    let argv: Vec<*const libc::c_char> = c_args.iter().map(|c| c.as_ptr()).chain([std::ptr::null()]).collect();
    let envp: Vec<*const libc::c_char> = c_env.iter().map(|c| c.as_ptr()).chain([std::ptr::null()]).collect();
    let hostname = spec.partition.as_bytes().to_vec();
    let procs: Vec<File> = spec
        .cgroup_procs
        .iter()
        .map(|p| OpenOptions::new().write(true).open(p).map_err(path_err("open", p)))
        .collect::<Result<_>>()?;
    let netns: Option<File> = match &spec.netns {
        Some(p) => Some(File::open(p).map_err(path_err("open", p))?),
        None => None,
    };
    let output: Option<File> = match &spec.output {
        Some(p) => Some(OpenOptions::new().create(true).append(true).open(p).map_err(path_err("open", p))?),
        None => None,
    };
    let (err_read, err_write) = cloexec_pipe()?;
    let fifo_priority = spec.fifo_priority.map(libc::c_int::from);
    let proc_src = c"proc";
    let proc_dir = c"/proc";
    let root = c"/";

    let flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWUTS | libc::CLONE_NEWIPC | libc::SIGCHLD;
    // SAFETY: a clone without CLONE_VM and with a null stack behaves like fork(2): the child gets a copy of
    // the address space and continues here. It only runs `child` below, which uses raw system calls on
    // memory prepared above and ends in execve or _exit.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags as libc::c_ulong, 0usize, 0usize, 0usize, 0usize) };
    if pid < 0 {
        return Err(SupervisorError::Sys {
            call: "clone",
            context: format!("partition {}", spec.partition),
            source: std::io::Error::last_os_error(),
        });
    }
    if pid == 0 {
        let fail = |step: u32| -> ! {
            // SAFETY: only async-signal-safe calls on the child's own copies: errno, write to the pipe, _exit.
            unsafe {
                let errno = *libc::__errno_location();
                let msg: [u8; 8] = {
                    let mut m = [0u8; 8];
                    m[..4].copy_from_slice(&step.to_ne_bytes());
                    m[4..].copy_from_slice(&errno.to_ne_bytes());
                    m
                };
                libc::write(err_write.as_raw_fd(), msg.as_ptr().cast(), 8);
                libc::_exit(127)
            }
        };
        // SAFETY (whole block): raw system calls with pointers into buffers that live in this copy of the
        // parent's memory until execve; no allocation, no locks taken.
        unsafe {
            // Rust ignores SIGPIPE and the supervisor may block signals; a partition starts with defaults.
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                fail(6);
            }
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            // The partition dies with the supervisor thread that started it, never left unsupervised.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if let Some(ns) = &netns {
                if libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    fail(1);
                }
            }
            if libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) != 0 {
                fail(2);
            }
            let pflags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            if libc::mount(proc_src.as_ptr(), proc_dir.as_ptr(), proc_src.as_ptr(), pflags, std::ptr::null()) != 0 {
                fail(3);
            }
            if libc::sethostname(hostname.as_ptr().cast(), hostname.len()) != 0 {
                fail(4);
            }
            if let Some(out) = &output {
                if libc::dup2(out.as_raw_fd(), 1) < 0 || libc::dup2(out.as_raw_fd(), 2) < 0 {
                    fail(7);
                }
            }
            // The partition's scheduling class is the one its system file grants, never the supervisor's.
            let (policy, priority) = match fifo_priority {
                Some(p) => (libc::SCHED_FIFO, p),
                None => (libc::SCHED_OTHER, 0),
            };
            let param = libc::sched_param { sched_priority: priority };
            if libc::sched_setscheduler(0, policy, &param) != 0 {
                fail(8);
            }
            // Set up: the parent may return now. Joining the cgroups comes last because the partition
            // may be frozen (outside its window): this process then stops here, before its first
            // instruction of the partition's program, and execs when its window comes.
            let ready: [u8; 8] = [0xff; 8];
            libc::write(err_write.as_raw_fd(), ready.as_ptr().cast(), 8);
            for f in &procs {
                // "0" is the writing process itself.
                if libc::write(f.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                    libc::_exit(126);
                }
            }
            libc::execve(c_program.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
    }
    let pid = pid as i32;
    drop(err_write);
    drop(procs);
    let mut msg = [0u8; 8];
    let mut got = 0;
    while got < 8 {
        // SAFETY: reading into a local buffer from our end of the pipe.
        let n = unsafe { libc::read(err_read.as_raw_fd(), msg[got..].as_mut_ptr().cast(), 8 - got) };
        if n == 0 {
            break;
        }
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break;
        }
        got += n as usize;
    }
    if got == 0 {
        return Err(SupervisorError::Launch {
            partition: spec.partition.clone(),
            step: "set up (the child ended without a word)",
            source: std::io::Error::from_raw_os_error(libc::ECHILD),
        });
    }
    if msg == [0xff; 8] {
        return Ok(Started { pid });
    }
    let step = u32::from_ne_bytes(msg[..4].try_into().unwrap()) as usize;
    let errno = i32::from_ne_bytes(msg[4..].try_into().unwrap());
    // Reaping our own child, which has exited or is about to.
    let _ = partita_os::process::wait_blocking(pid);
    Err(SupervisorError::Launch {
        partition: spec.partition.clone(),
        step: STEPS.get(step).copied().unwrap_or("unknown step"),
        source: std::io::Error::from_raw_os_error(errno),
    })
}

fn cloexec_pipe() -> Result<(OwnedFd, OwnedFd)> {
    partita_os::process::cloexec_pipe().map_err(sys_failed("pipe2", "launch error pipe"))
}

/// Waits (blocking) for a started partition to end; returns the raw wait status.
pub fn wait_blocking(pid: i32) -> Result<i32> {
    partita_os::process::wait_blocking(pid).map_err(sys_failed("waitpid", format!("pid {pid}")))
}

/// Non-blocking reap; `Some(status)` once the partition's root process has ended.
pub fn try_wait(pid: i32) -> Result<Option<i32>> {
    partita_os::process::try_wait(pid).map_err(sys_failed("waitpid", format!("pid {pid}")))
}

/// Path of a named network namespace made by `ip netns add`.
pub use partita_os::netns::named_path as netns_path;
