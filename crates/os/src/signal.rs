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
    use std::process::Command;

    /// Set in a copy of this test binary that installs the handlers and raises the named signal.
    const CHILD_ENV: &str = "PARTITA_OS_TEST_RAISE";
    const CHILD_TEST: &str = "signal::tests::child_raises_a_stop_signal";
    const FLAG_SET: i32 = 0;
    const FLAG_NOT_SET: i32 = 3;
    const NOT_RESTARTED: i32 = 4;

    /// Runs only in the copy started by [`stop_signal_sets_the_flag_and_the_process_lives_on`]: there the
    /// handlers are installed and the signal is raised (on this thread, so the handler has run when `raise`
    /// returns). The exit code tells the parent what happened; without a handler the signal's default action
    /// (terminate, or dump core) ends the process instead.
    #[test]
    #[ignore = "a helper run in a copy of the test binary by stop_signal_sets_the_flag_and_the_process_lives_on"]
    fn child_raises_a_stop_signal() {
        let Ok(sig) = std::env::var(CHILD_ENV) else { return };
        let sig: libc::c_int = sig.parse().unwrap();
        install_stop_signals();
        assert!(!stop_requested());
        // SAFETY: raise(3) sends a signal to the calling thread; its handler only stores to an atomic.
        unsafe { libc::raise(sig) };
        if !(stop_requested() && stop_flag().load(Ordering::SeqCst)) {
            std::process::exit(FLAG_NOT_SET);
        }
        // SAFETY: querying the current action into a zeroed, writable sigaction; no action is changed.
        let flags = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old);
            old.sa_flags
        };
        std::process::exit(if flags & libc::SA_RESTART != 0 { FLAG_SET } else { NOT_RESTARTED });
    }

    fn raise_in_child(sig: libc::c_int) -> std::process::ExitStatus {
        Command::new(std::env::current_exe().unwrap())
            .args([CHILD_TEST, "--exact", "--ignored", "--test-threads=1", "--nocapture"])
            .env(CHILD_ENV, sig.to_string())
            .output()
            .unwrap()
            .status
    }

    #[test]
    fn stop_signal_sets_the_flag_and_the_process_lives_on() {
        use std::os::unix::process::ExitStatusExt;
        for sig in [libc::SIGHUP, libc::SIGQUIT, libc::SIGTERM, libc::SIGINT] {
            let status = raise_in_child(sig);
            assert_eq!(status.signal(), None, "signal {sig} killed the process: no handler");
            assert_eq!(status.code(), Some(FLAG_SET), "signal {sig}: flag not set ({FLAG_NOT_SET}) or no SA_RESTART ({NOT_RESTARTED})");
        }
    }

    #[test]
    fn the_copy_without_handlers_dies_of_the_signal() {
        // The check above means something only if an unhandled signal would end the copy: SIGUSR1 is not a
        // stop signal, so the copy dies of it.
        use std::os::unix::process::ExitStatusExt;
        assert!(!STOP_SIGNALS.contains(&libc::SIGUSR1));
        assert_eq!(raise_in_child(libc::SIGUSR1).signal(), Some(libc::SIGUSR1));
    }
}
