//! The timer slack of the calling thread: how late the kernel may fire its timers to group wake-ups.
//!
//! Linux's default is 50 µs, which would double a sleep of tens of µs (the router's batch flusher sleeps that
//! long). The setting is per thread and inherited by threads created afterwards.
use std::io;

/// Sets the calling thread's timer slack to `ns` (at least 1: a slack of 0 means "back to the default").
pub fn set_current_thread_timer_slack_ns(ns: u64) -> io::Result<()> {
    let ns = ns.max(1) as libc::c_ulong;
    // SAFETY: PR_SET_TIMERSLACK takes a value, no memory, and changes only the calling thread's slack.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's timer slack in ns.
pub fn current_thread_timer_slack_ns() -> io::Result<u64> {
    // SAFETY: PR_GET_TIMERSLACK takes no memory and returns the value itself.
    let r = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_set_on_one_thread_reads_back_there_only() {
        let before = current_thread_timer_slack_ns().unwrap();
        let target = if before == 1_000 { 2_000 } else { 1_000 };
        let (set, inherited) = std::thread::spawn(move || {
            set_current_thread_timer_slack_ns(target).unwrap();
            let set = current_thread_timer_slack_ns().unwrap();
            (set, std::thread::spawn(|| current_thread_timer_slack_ns().unwrap()).join().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(set, target);
        assert_eq!(inherited, target);
        assert_eq!(current_thread_timer_slack_ns().unwrap(), before);
    }

    #[test]
    fn zero_slack_is_the_smallest_slack_not_the_default() {
        let seen = std::thread::spawn(|| {
            set_current_thread_timer_slack_ns(0).unwrap();
            current_thread_timer_slack_ns().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(seen, 1);
    }
}
