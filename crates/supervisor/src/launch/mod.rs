//! Starting a partition's process tree in its own namespaces and cgroups, confined.
//!
//! The partition's first process is created by `clone(2)` with new PID, mount, UTS and IPC namespaces, so it
//! is PID 1 of its namespace and a direct child of the supervisor (which reaps it). It starts a session of its
//! own, joins the partition's network namespace, and then, for a confined partition (every partition; native
//! nodes stand for other machines and are not):
//!
//! 1. while still root on the host, builds its view of the file system ([`rootfs`]: the host's root
//!    read-only, private writable `/tmp`, `/run` and state directory, masked kernel files, nothing of the
//!    supervisor's) and pivots into it, sets its host name, its scheduling class (the one its system file
//!    grants; SCHED_OTHER otherwise) and limits its real-time priority to 0;
//! 2. drops the host's supplementary groups and enters a user namespace of its own, whose root is the
//!    partition's unprivileged host uid (the supervisor writes the id maps); every other namespace it is in
//!    belongs to the host's user namespace, so being root in its own gives it no power over its network,
//!    mounts, host name or cgroups;
//! 3. joins its cgroups (where a frozen partition stops until its window), enters a cgroup namespace, keeps
//!    only the capabilities its system file grants, sets no_new_privs and installs its seccomp filters
//!    ([`seccomp`]), marks every inherited descriptor close-on-exec and executes the program.
//!
//! Everything the child needs is prepared here; the child ([`child`]) only makes raw system calls.
// The partition launcher's pre-exec child code (between clone and execve) makes raw system calls on memory
// prepared by the parent, which no safe wrapper can express; it is the only unsafe code of this crate.
#[allow(unsafe_code)]
mod child;
pub mod rootfs;
pub mod seccomp;
pub mod view;

use crate::error::{path_err, sys_failed, Result, SupervisorError};
use crate::partition_log::PartitionLog;
use child::{Confined, Plan, Stage, NEED_MAPS, READY};
use partita_env::PartitionEnv;
use partita_os::process::is_executable;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

pub use child::{EXIT_CGROUP, EXIT_CONFINE, EXIT_EXEC};

/// What to start for a partition, and where.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The partition's name (its host name, and in errors).
    pub partition: String,
    /// The program (a path, or a name looked up in PATH by the supervisor) and its arguments.
    pub program: String,
    pub args: Vec<String>,
    /// Extra environment on top of the partition's (`environment`).
    pub env: Vec<(String, String)>,
    /// The `cgroup.procs` files of the partition's cgroups.
    pub cgroup_procs: Vec<PathBuf>,
    /// `/run/netns/<name>` of the partition's network namespace; `None` keeps the supervisor's (tests only).
    pub netns: Option<PathBuf>,
    /// What the supervisor tells the programs about their partition (`PARTITA_*`, `CYCLONEDDS_URI`); `None`:
    /// nothing (tests of the mechanism alone).
    pub environment: Option<PartitionEnv>,
    /// The log receiving the partition's stdout and stderr through a pipe the supervisor drains
    /// ([`PartitionLog`]); `None` inherits the supervisor's (tests of the mechanism alone).
    pub output: Option<Arc<PartitionLog>>,
    /// SCHED_FIFO at this priority; `None`: SCHED_OTHER (whatever class the supervisor itself runs in).
    pub fifo_priority: Option<u8>,
    /// How a partition is confined; `None`: its namespaces and cgroups only (native nodes, mechanism tests).
    pub confine: Option<Confine>,
    /// Descriptors the program gets as 3, 4, … (a VM partition's taps, which QEMU uses as its NICs).
    pub pass_fds: Vec<Arc<OwnedFd>>,
}

/// The confinement of a partition, as its launcher needs it: what its system file grants, and where on the
/// host its view is built from.
#[derive(Debug, Clone)]
pub struct Confine {
    /// Its host uid, capabilities, system calls let through and state directory (owned by the uid, the same
    /// path on the host and inside).
    pub granted: partita_system::Confinement,
    /// Its DDS configuration on the host, seen inside at [`rootfs::DDS_CONFIG`].
    pub dds_config: Option<PathBuf>,
    /// Its Fast DDS profile on the host, seen inside at [`rootfs::FASTDDS_PROFILE`].
    pub fastdds_profile: Option<PathBuf>,
    /// An I/O partition's router file on the host, seen inside at [`rootfs::ROUTER_FILE`].
    pub router_file: Option<PathBuf>,
    /// An empty directory on the host its view of the file system is assembled in.
    pub root: PathBuf,
    /// Its memory limit: how much it may lock when its file lets it (`lock_memory`).
    pub memory: Option<u64>,
    /// A VM partition's guest: the KVM device node made for it (bound at `/dev/kvm`, under KVM) and its
    /// files, each bound read-only where its runner finds it ([`rootfs::View::guest_files`]).
    pub kvm: Option<PathBuf>,
    pub guest_files: Vec<(PathBuf, &'static str)>,
    /// What of the host it sees ([`view::seen`]), found once when the system comes up.
    pub seen: view::Seen,
}

/// Variables of the supervisor's environment a confined partition gets (beside its own and the file's):
/// nothing else of the supervisor's environment reaches it.
const PASSED_TO_CONFINED: [&str; 5] = ["PATH", "LANG", "LC_ALL", "TZ", "RUST_BACKTRACE"];

/// A started partition: the PID (in the supervisor's namespace) of its PID-namespace root, and for a confined
/// one the socket its seccomp listener arrives on (once it has installed its filters).
#[derive(Debug)]
pub struct Started {
    pub pid: i32,
    pub notifications: Option<OwnedFd>,
    /// The launch pipe's read end (non-blocking): end of file once the program has been executed (the pipe
    /// closes on exec), a stage-and-errno word if a step after the set-up failed. Until then the partition's
    /// CPU time is the launch's (an `execve` tears down the copy of the supervisor's address space it forked
    /// with, kernel work that runs past a window), not its program's.
    pub exec_report: Option<File>,
    /// How long after the launch the program counts as running even if `exec_report` has not said so (a VM
    /// partition's boot timeout: its report is the guest's start, which the partition could hold back).
    pub program_deadline: Option<std::time::Duration>,
}

/// Looks `program` up in PATH unless it contains a slash.
pub fn resolve_program(program: &str) -> Result<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(SupervisorError::Program { program: program.to_string(), problem: "is not an executable file" })
        };
    }
    partita_system::search_path()
        .into_iter()
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
        .ok_or_else(|| SupervisorError::Program { program: program.to_string(), problem: "not found in PATH" })
}

fn cstring(what: &'static str, s: &[u8]) -> Result<CString> {
    CString::new(s).map_err(|_| SupervisorError::Name { what, value: String::from_utf8_lossy(s).into_owned(), rule: "contains a NUL byte" })
}

/// The highest capability number this kernel knows.
fn last_capability() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(40)
}

/// The environment of the partition's program.
fn environment(spec: &LaunchSpec) -> Vec<(String, String)> {
    let from_supervisor = std::env::vars().filter(|(k, _)| !partita_env::is_reserved(k));
    let mut env: Vec<(String, String)> = match &spec.confine {
        Some(_) => from_supervisor.filter(|(k, _)| PASSED_TO_CONFINED.contains(&k.as_str())).chain([("HOME".to_string(), "/tmp".to_string())]).collect(),
        None => from_supervisor.collect(),
    };
    env.extend(spec.environment.iter().flat_map(PartitionEnv::vars));
    env.extend(spec.env.iter().cloned());
    env
}

/// Starts the partition. Returns once the child is set up (namespaces, its view of the file system, its user
/// namespace) or with the stage that failed; it then joins the partition's cgroups, confines itself and
/// executes the program. A failure of those last steps shows as exit status [`EXIT_CGROUP`],
/// [`EXIT_CONFINE`] or [`EXIT_EXEC`] to the health monitor: they cannot be waited for here, because a frozen
/// partition's process stops as soon as it joins its cgroup.
pub fn launch(spec: &LaunchSpec) -> Result<Started> {
    let program = resolve_program(&spec.program)?;
    // A confined partition does not see the host's /tmp, /run, /dev or /var/lib/partita: a program there (the
    // partita binary of a clone under /tmp) is bound into its view and run from there.
    let hidden = spec.confine.is_some() && rootfs::hidden_place(&program).is_some();
    let in_view = if hidden { std::path::Path::new(rootfs::PROGRAM) } else { program.as_path() };
    let c_program = cstring("program", in_view.as_os_str().as_bytes())?;
    let mut c_args = vec![cstring("program", spec.program.as_bytes())?];
    for a in &spec.args {
        c_args.push(cstring("argument", a.as_bytes())?);
    }
    let c_env: Vec<CString> =
        environment(spec).iter().map(|(k, v)| cstring("environment", format!("{k}={v}").as_bytes())).collect::<Result<_>>()?;
    let argv: Vec<*const libc::c_char> = c_args.iter().map(|c| c.as_ptr()).chain([std::ptr::null()]).collect();
    let envp: Vec<*const libc::c_char> = c_env.iter().map(|c| c.as_ptr()).chain([std::ptr::null()]).collect();
    let procs: Vec<File> = spec
        .cgroup_procs
        .iter()
        .map(|p| OpenOptions::new().write(true).open(p).map_err(path_err("open", p)))
        .collect::<Result<_>>()?;
    let procs_fds: Vec<i32> = procs.iter().map(|f| f.as_raw_fd()).collect();
    let netns: Option<File> = match &spec.netns {
        Some(p) => Some(File::open(p).map_err(path_err("open", p))?),
        None => None,
    };
    // stdin is /dev/null, never the supervisor's (an operator's terminal); stdout and stderr a pipe.
    let dev_null = File::open("/dev/null").map_err(path_err("open", "/dev/null"))?;
    let output: Option<(OwnedFd, OwnedFd)> = match &spec.output {
        Some(_) => Some(cloexec_pipe()?),
        None => None,
    };
    let mounts = match &spec.confine {
        Some(c) => {
            std::fs::create_dir_all(&c.root).map_err(path_err("mkdir", &c.root))?;
            let mut writes = Vec::new();
            for (host, inside) in [(&c.dds_config, rootfs::DDS_CONFIG), (&c.fastdds_profile, rootfs::FASTDDS_PROFILE), (&c.router_file, rootfs::ROUTER_FILE)] {
                if let Some(h) = host {
                    writes.push((inside, std::fs::read(h).map_err(path_err("read", h))?));
                }
            }
            rootfs::steps(&rootfs::View { root: &c.root, uid: c.granted.uid, state_dir: &c.granted.state_dir, kvm: c.kvm.as_deref(), guest_files: &c.guest_files, program: hidden.then_some(program.as_path()), seen: &c.seen, writes: &writes })
        }
        None => vec![
            rootfs::Step::Mount { source: None, target: c"/".into(), fstype: None, flags: libc::MS_REC | libc::MS_PRIVATE, data: None, optional: false },
            rootfs::Step::Mount {
                source: Some(c"proc".into()),
                target: c"/proc".into(),
                fstype: Some(c"proc".into()),
                flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                data: None,
                optional: false,
            },
        ],
    };
    let filters = match &spec.confine {
        Some(c) => seccomp::filters(&c.granted.seccomp_allow).map_err(|problem| SupervisorError::Seccomp { partition: spec.partition.clone(), problem })?,
        None => seccomp::Filters::default(),
    };
    let fprog = |p: &seccompiler::BpfProgram| libc::sock_fprog { len: p.len() as u16, filter: p.as_ptr() as *mut libc::sock_filter };
    let fprogs: Vec<libc::sock_fprog> = filters.others.iter().map(fprog).collect();
    let notify = filters.notify.as_ref().map(fprog);
    let (notify_theirs, notify_ours) = partita_os::seccomp_notify::socket_pair().map_err(sys_failed("socketpair", "seccomp listener"))?;
    // Above every number the child uses until it hands them over at 3, 4, …
    let passed: Vec<OwnedFd> =
        spec.pass_fds.iter().map(|f| partita_os::fd::dup_above(f.as_fd(), 100)).collect::<std::io::Result<_>>().map_err(sys_failed("fcntl", "descriptors for the partition"))?;
    let passed_fds: Vec<i32> = passed.iter().map(|f| f.as_raw_fd()).collect();
    let limits: Vec<(libc::__rlimit_resource_t, u64)> = match &spec.confine {
        Some(c) => vec![(libc::RLIMIT_MSGQUEUE, c.granted.limits.message_queue_bytes), (libc::RLIMIT_SIGPENDING, c.granted.limits.queued_signals)],
        None => Vec::new(),
    };
    let (err_read, err_write) = cloexec_pipe()?;
    let (maps_read, maps_write) = cloexec_pipe()?;
    let plan = Plan {
        program: &c_program,
        argv: &argv,
        envp: &envp,
        hostname: spec.partition.as_bytes(),
        netns: netns.as_ref().map(|f| f.as_raw_fd()),
        stdin: dev_null.as_raw_fd(),
        output: output.as_ref().map(|(_, w)| w.as_raw_fd()),
        procs: &procs_fds,
        mounts: &mounts,
        fifo_priority: spec.fifo_priority.map(libc::c_int::from),
        confined: spec.confine.as_ref().map(|c| Confined {
            memlock: c.granted.lock_memory.then(|| c.memory.unwrap_or(libc::RLIM_INFINITY)),
            uid: c.granted.uid,
            limits: &limits,
            keep: c.granted.capabilities.iter().fold(0u64, |m, n| m | (1u64 << n)),
            last_cap: last_capability(),
            notify: notify.as_ref(),
            notify_socket: notify_theirs.as_raw_fd(),
            filters: &fprogs,
        }),
        report: err_write.as_raw_fd(),
        maps_written: maps_read.as_raw_fd(),
        pass_fds: &passed_fds,
    };
    let pid = child::spawn(&plan).map_err(|e| SupervisorError::Sys { call: "clone", context: format!("partition {}", spec.partition), source: e })?;
    drop(err_write);
    drop(maps_read);
    if let (Some(log), Some((read, write))) = (&spec.output, output) {
        // The partition's processes hold the write end now; the pump ends when the last of them has closed it.
        drop(write);
        log.pump(read, &spec.partition).map_err(sys_failed("spawn", format!("the log pump of {}", spec.partition)))?;
    }
    drop(procs);
    drop(notify_theirs);
    let mut report = File::from(err_read);
    let mut maps = Some(File::from(maps_write));
    loop {
        let mut msg = [0u8; 8];
        if let Err(e) = report.read_exact(&mut msg) {
            let _ = partita_os::process::wait_blocking(pid);
            return Err(SupervisorError::Launch { partition: spec.partition.clone(), step: "set up (the child ended without a word)", source: e });
        }
        if msg == READY {
            let exec_report = partita_os::fd::set_nonblocking(report.as_fd()).is_ok().then_some(report);
            return Ok(Started { pid, notifications: spec.confine.is_some().then_some(notify_ours), exec_report, program_deadline: None });
        }
        if msg == NEED_MAPS {
            let c = spec.confine.as_ref().expect("only a confined partition asks for id maps");
            let written = write_id_maps(pid, c.granted.uid).and_then(|_| maps.take().expect("asked once").write_all(b"m").map_err(path_err("write", "the id maps pipe")));
            if let Err(e) = written {
                let _ = partita_os::process::send_signal(pid, libc::SIGKILL);
                let _ = partita_os::process::wait_blocking(pid);
                return Err(e);
            }
            continue;
        }
        let stage = u32::from_ne_bytes(msg[..4].try_into().expect("4 bytes"));
        let errno = i32::from_ne_bytes(msg[4..].try_into().expect("4 bytes"));
        // Reaping our own child, which has exited or is about to.
        let _ = partita_os::process::wait_blocking(pid);
        return Err(SupervisorError::Launch {
            partition: spec.partition.clone(),
            step: Stage::from_u32(stage).map_or("unknown step", Stage::describe),
            source: std::io::Error::from_raw_os_error(errno),
        });
    }
}

/// Maps ids 0..65536 inside the child's user namespace to `uid..uid+65536` (and the same gids) on the host,
/// with setgroups denied.
fn write_id_maps(pid: i32, uid: u32) -> Result<()> {
    let range = partita_system::confinement::UID_RANGE;
    let proc = PathBuf::from(format!("/proc/{pid}"));
    for (file, text) in [("setgroups", "deny".to_string()), ("uid_map", format!("0 {uid} {range}\n")), ("gid_map", format!("0 {uid} {range}\n"))] {
        let path = proc.join(file);
        std::fs::write(&path, text).map_err(path_err("write", &path))?;
    }
    Ok(())
}

/// A VM partition's launch: [`launch`], with one more descriptor for its runner after the taps (the write end
/// of a fresh pipe, at the number its `--ready-fd` names) that the runner closes once the guest's command
/// starts. Its read end is the [`Started::exec_report`]: until its end of file, or `boot_timeout` at the
/// latest, the partition's CPU time is its launch's (QEMU starting, mapping the guest's memory, the guest
/// booting), which the health monitor does not hold against the partition.
pub fn launch_guest(spec: &LaunchSpec, boot_timeout: std::time::Duration) -> Result<Started> {
    let (read, write) = cloexec_pipe()?;
    let mut spec = spec.clone();
    spec.pass_fds.push(Arc::new(write));
    let mut started = launch(&spec)?;
    // The supervisor's copy of the write end goes: the runner's is the only one left.
    drop(spec);
    started.exec_report = partita_os::fd::set_nonblocking(read.as_fd()).is_ok().then(|| File::from(read));
    started.program_deadline = Some(boot_timeout);
    Ok(started)
}

fn cloexec_pipe() -> Result<(OwnedFd, OwnedFd)> {
    partita_os::process::cloexec_pipe().map_err(sys_failed("pipe2", "launch pipe"))
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
