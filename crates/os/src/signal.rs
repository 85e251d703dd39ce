//! The process-wide stop request: SIGINT, SIGTERM, SIGHUP and SIGQUIT all ask for an orderly stop instead of
//! killing the process. The supervisor then tears its system down (a killed supervisor would leave
//! namespaces, cgroups and links behind), and the long-running roles (route, recorder, udp-echo, the
//! benchmark drivers) end their loops and write what they measured.
//!
//! The handler only stores to an atomic flag, the one thing a signal handler may safely do here; everything
//! else polls [`stop_requested`] or the flag itself. Interrupted system calls are restarted (`SA_RESTART`),
//! so a signal never shows as a spurious EINTR error somewhere in the program: only the flag tells of it.
use std::sync::atomic::{AtomicBool, Ordering};

/// The signals that request a stop: Ctrl-C, `kill`/systemd, a closed terminal, Ctrl-\.
pub const STOP_SIGNALS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Makes every signal of [`STOP_SIGNALS`] set the stop flag. Calling it again changes nothing.
pub fn install_stop_signals() {
    for sig in STOP_SIGNALS {
        // SAFETY: `sa` is zeroed and then fully set up (handler, flags, empty mask) before use; the handler
        // only stores to an atomic, which is async-signal-safe; the old action is not asked for (null).
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        // sigaction fails only for an invalid signal number, SIGKILL or SIGSTOP, or a bad pointer: none of
        // which can happen with the constants and locals above.
        assert_eq!(r, 0, "sigaction({sig}): {}", std::io::Error::last_os_error());
    }
}

static POWER_FAIL: AtomicBool = AtomicBool::new(false);

extern "C" fn on_power_fail(_: libc::c_int) {
    POWER_FAIL.store(true, Ordering::SeqCst);
}

/// Makes SIGPWR (what init sends when the UPS reports a power failure) set a flag instead of ending the
/// process: the supervisor hands it to its health-monitor tables as a `power_fail` error.
pub fn install_power_fail_signal() {
    // SAFETY: as in install_stop_signals: a zeroed and fully set up sigaction whose handler only stores to an
    // atomic.
    let r = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_power_fail as extern "C" fn(libc::c_int) as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGPWR, &sa, std::ptr::null_mut())
    };
    assert_eq!(r, 0, "sigaction(SIGPWR): {}", std::io::Error::last_os_error());
}

/// Whether SIGPWR arrived since the last call (the flag is cleared).
pub fn take_power_fail() -> bool {
    POWER_FAIL.swap(false, Ordering::SeqCst)
}

/// Whether a stop signal has arrived since the process started.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The flag [`install_stop_signals`] sets, for code that polls an `&AtomicBool` (a benchmark loop, a server
/// that also stops for other reasons).
pub fn stop_flag() -> &'static AtomicBool {
    &STOP
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAG_SET: i32 = 0;
    const FLAG_NOT_SET: i32 = 3;
    const NOT_RESTARTED: i32 = 4;

    /// Forks a child that installs the handlers and raises `sig`, and returns its wait status. The exit code
    /// tells what happened; without a handler the signal's default action (terminate, or dump core) ends the
    /// child instead. The child only makes async-signal-safe calls (sigaction, raise, atomics, _exit), so it is
    /// safe to fork from the multi-threaded test process.
    fn raise_in_child(sig: libc::c_int, handlers: bool) -> i32 {
        // SAFETY: fork(2) then, in the child, only async-signal-safe calls before _exit; the parent reaps it.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
            if pid == 0 {
                if handlers {
                    install_stop_signals();
                }
                libc::raise(sig);
                if !(stop_requested() && stop_flag().load(Ordering::SeqCst)) {
                    libc::_exit(FLAG_NOT_SET);
                }
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, std::ptr::null(), &mut old);
                libc::_exit(if old.sa_flags & libc::SA_RESTART != 0 { FLAG_SET } else { NOT_RESTARTED });
            }
            let mut status = 0;
            assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
            status
        }
    }

    #[test]
    fn stop_signal_sets_the_flag_and_the_process_lives_on() {
        for sig in STOP_SIGNALS {
            let status = raise_in_child(sig, true);
            assert!(!libc::WIFSIGNALED(status), "signal {sig} killed the process: no handler");
            assert_eq!(libc::WEXITSTATUS(status), FLAG_SET, "signal {sig}: flag not set ({FLAG_NOT_SET}) or no SA_RESTART ({NOT_RESTARTED})");
        }
    }

    #[test]
    fn without_the_handlers_the_signal_ends_the_child() {
        // The check above means something only if an unhandled signal would end the child.
        for sig in [libc::SIGHUP, libc::SIGTERM] {
            let status = raise_in_child(sig, false);
            assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == sig, "status {status:#x}");
        }
    }
}
