//! Other processes: signalling them, asking whether they exist, reaping children, and the two things a
//! parent prepares before starting one (a close-on-exec pipe, an executable check).
use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Sends `signal` to the process `pid`. Only a single process: a pid of 0 or below (which kill(2) would
/// take as a process group, or as every process) is refused, so a bad pid read from a file can never
/// signal more than one process.
pub fn send_signal(pid: i32, signal: libc::c_int) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("pid {pid}: only a single process (pid > 0) is signalled")));
    }
    // SAFETY: kill(2) passes no memory; the pid is a single process, checked above.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a process `pid` exists (running, stopped, or ended but not yet reaped), by signal 0. A process
/// that exists but that we may not signal (EPERM) exists all the same.
pub fn is_alive(pid: i32) -> bool {
    match send_signal(pid, 0) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
    }
}

/// Clock ticks per second, the unit of the CPU times in `/proc/PID/stat`; `None` if the system does not say.
pub fn clock_ticks_per_second() -> Option<u64> {
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then_some(hz as u64)
}

/// Waits (blocking, through signals) for our child `pid` to end and reaps it; returns the raw wait status
/// (read it with `libc::WIFEXITED` and friends).
pub fn wait_blocking(pid: i32) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waiting for a child into a local int.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Reaps our child `pid` if it has ended: `Some(raw wait status)`, or `None` while it runs.
pub fn try_wait(pid: i32) -> io::Result<Option<i32>> {
    let mut status = 0;
    // SAFETY: waiting for a child into a local int, without blocking.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    match r {
        0 => Ok(None),
        r if r == pid => Ok(Some(status)),
        _ => Err(io::Error::last_os_error()),
    }
}

/// A pipe whose two ends are closed on exec: (read end, write end).
pub fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created by pipe2 and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The resident memory of `pid` (`VmRSS` in `/proc/<pid>/status`), KiB; `None` when it has ended.
pub fn rss_kib(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()
}

/// The CPU time `pid` has used so far, (user, system) in ns, from `/proc/<pid>/stat`; `None` when it has ended.
pub fn cpu_times_ns(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start with the state, field 3; utime and stime
    // are fields 14 and 15.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let hz = clock_ticks_per_second()?;
    let ns = |i: usize| -> Option<u64> { Some(f.get(i)?.parse::<u64>().ok()? * 1_000_000_000 / hz) };
    Some((ns(11)?, ns(12)?))
}

/// The peak resident memory of `pid` (`VmHWM` in `/proc/<pid>/status`), KiB; `None` when it has ended.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.split_whitespace().next()?.parse().ok()
}

/// Whether `path` is a regular file this process may execute (access(2) with X_OK, so root's rules apply).
pub fn is_executable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: access(2) reads the NUL-terminated path only.
    path.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::process::Command;

    #[test]
    fn a_live_process_has_cpu_times_and_a_peak_rss_and_an_ended_one_none() {
        let me = std::process::id();
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {}
        let (user, _) = cpu_times_ns(me).unwrap();
        assert!(user > 0);
        let rss = rss_kib(me as i32).unwrap();
        assert!(peak_rss_kib(me).unwrap() >= rss);
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(cpu_times_ns(pid), None);
        assert_eq!(peak_rss_kib(pid), None);
    }
    use std::time::{Duration, Instant};

    fn spawn(script: &str) -> i32 {
        Command::new("/bin/sh").args(["-c", script]).spawn().unwrap().id() as i32
    }

    #[test]
    fn own_pid_is_alive_and_a_reaped_child_is_not() {
        assert!(is_alive(std::process::id() as i32));
        let pid = spawn("exit 0");
        let status = wait_blocking(pid).unwrap();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{status:#x}");
        assert!(!is_alive(pid));
        assert!(!is_alive(0) && !is_alive(-1));
    }

    #[test]
    fn try_wait_sees_a_child_run_then_reaps_its_exit_code() {
        let pid = spawn("sleep 0.2; exit 7");
        assert_eq!(try_wait(pid).unwrap(), None);
        assert!(is_alive(pid));
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = try_wait(pid).unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "child did not end");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 7, "{status:#x}");
        assert_eq!(try_wait(pid).unwrap_err().raw_os_error(), Some(libc::ECHILD), "reaped once only");
    }

    #[test]
    fn a_signalled_child_ends_by_that_signal() {
        let pid = spawn("exec sleep 30");
        send_signal(pid, libc::SIGTERM).unwrap();
        let status = wait_blocking(pid).unwrap();
        assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGTERM, "{status:#x}");
        assert_eq!(wait_blocking(pid).unwrap_err().raw_os_error(), Some(libc::ECHILD));
    }

    #[test]
    fn signals_to_process_groups_are_refused() {
        for pid in [0, -1, -(std::process::id() as i32)] {
            assert_eq!(send_signal(pid, 0).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn clock_ticks_are_known() {
        let hz = clock_ticks_per_second().unwrap();
        assert!((10..=10_000).contains(&hz), "{hz}");
    }

    #[test]
    fn pipe_carries_bytes_and_closes_on_exec() {
        let (r, w) = cloexec_pipe().unwrap();
        for fd in [&r, &w] {
            use std::os::fd::AsRawFd;
            // SAFETY: F_GETFD on a descriptor we own reads its flags only.
            let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
            assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        }
        std::fs::File::from(w).write_all(b"ok").unwrap();
        let mut got = String::new();
        std::fs::File::from(r).read_to_string(&mut got).unwrap();
        assert_eq!(got, "ok");
    }

    #[test]
    fn executables_are_told_from_other_paths() {
        assert!(is_executable(Path::new("/bin/sh")));
        assert!(!is_executable(Path::new("/")), "a directory");
        assert!(!is_executable(Path::new("/nonexistent/partita")));
        let plain = std::env::temp_dir().join(format!("partita-os-plain-{}", std::process::id()));
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        let plain_is_executable = is_executable(&plain);
        std::fs::remove_file(&plain).unwrap();
        assert!(!plain_is_executable, "a file without execute bits, even for root");
    }
}

/// Makes the child that `cmd` starts receive `signal` when the thread that starts it ends, even by SIGKILL or a
/// crash (prctl PR_SET_PDEATHSIG): a benchmark's load or probe must not outlive the benchmark.
pub fn end_with_parent(cmd: &mut std::process::Command, signal: libc::c_int) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl and getppid, which are
    // async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have ended before the prctl: then nothing would ever send the signal.
            if libc::getppid() == 1 {
                return Err(io::Error::other("the parent ended before the child started"));
            }
            Ok(())
        });
    }
}

/// This process's effective uid.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
