//! SIGINT and SIGTERM as a stop flag, for the long-running roles (route, recorder, udp-echo).
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the handlers; afterwards [`stop_requested`] turns true on the first SIGINT or SIGTERM.
pub fn install() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The flag itself, for code that polls an `&AtomicBool`.
pub fn flag() -> &'static AtomicBool {
    &STOP
}
