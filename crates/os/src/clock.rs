//! CLOCK_MONOTONIC in nanoseconds, the time base shared by the supervisor, its logs, the plan executor and
//! every partition (process partitions share the host's clock), and wall-clock time for logs read by people.

const NS_PER_S: u64 = 1_000_000_000;

/// Now on CLOCK_MONOTONIC, in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux, so the call cannot
    // fail and `ts` is always filled.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * NS_PER_S + ts.tv_nsec as u64
}

/// CPU time the calling thread has used, in ns (CLOCK_THREAD_CPUTIME_ID): what a piece of work cost, without
/// the time the thread spent preempted or frozen.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the calling thread's CPU clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * NS_PER_S + ts.tv_nsec as u64
}

/// Sleeps until the absolute CLOCK_MONOTONIC time `at_ns` (returns at once if it is past).
///
/// An absolute deadline does not drift when the sleep is interrupted or starts late: a signal handler that
/// runs in between (EINTR) only makes it sleep again towards the same instant.
pub fn sleep_until_ns(at_ns: u64) {
    let ts = libc::timespec { tv_sec: (at_ns / NS_PER_S) as libc::time_t, tv_nsec: (at_ns % NS_PER_S) as libc::c_long };
    loop {
        // SAFETY: `ts` is a valid timespec; the remainder pointer may be null with TIMER_ABSTIME.
        let r = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        if r != libc::EINTR {
            return;
        }
    }
}

/// Wall-clock time in ms since the Unix epoch (for event logs read by people).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Wall-clock time in ns since the Unix epoch, as an `i64` because DDS source timestamps are `i64` ns on the
/// same clock (the router subtracts one from the other to measure the age of a sample).
pub fn unix_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// The rate of this CPU's time-stamp counter in kHz, measured against CLOCK_MONOTONIC_RAW over `window`
/// (the best of three tries, so a preemption between two readings does not skew it); `None` off x86-64.
///
/// A QEMU guest under TCG reads the host's TSC, and a guest kernel without HPET or ACPI PM timer (QEMU's
/// `microvm`) can only calibrate it against the PIT, which fails on a busy host and then hangs the boot: the
/// VM runner hands the guest this figure instead (`tsc_early_khz=`).
pub fn tsc_khz(window: std::time::Duration) -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        let raw_ns = || {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC_RAW exists on every supported kernel.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
            ts.tv_sec as u64 * NS_PER_S + ts.tv_nsec as u64
        };
        // SAFETY: RDTSC reads a counter; every x86-64 CPU has it.
        let tsc = || unsafe { core::arch::x86_64::_rdtsc() };
        let mut best: Option<(u64, u64)> = None; // (bracket width in ns, kHz)
        for _ in 0..3 {
            let (a0, t0, a1) = (raw_ns(), tsc(), raw_ns());
            std::thread::sleep(window);
            let (b0, t1, b1) = (raw_ns(), tsc(), raw_ns());
            let elapsed = ((b0 + b1) / 2).checked_sub((a0 + a1) / 2)?;
            if elapsed == 0 {
                continue;
            }
            let khz = (t1.wrapping_sub(t0) as u128 * 1_000_000 / elapsed as u128) as u64;
            let width = (a1 - a0) + (b1 - b0);
            if !matches!(best, Some((w, _)) if w <= width) {
                best = Some((width, khz));
            }
        }
        best.map(|(_, khz)| khz)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = window;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_tsc_rate_is_plausible_and_repeatable() {
        let a = tsc_khz(std::time::Duration::from_millis(20)).unwrap();
        let b = tsc_khz(std::time::Duration::from_millis(20)).unwrap();
        assert!((100_000..10_000_000).contains(&a), "{a} kHz");
        assert!(a.abs_diff(b) * 100 < a, "{a} vs {b} kHz: more than 1 % apart");
    }

    #[test]
    fn monotonic_clock_never_goes_back_and_advances_over_a_sleep() {
        let mut last = monotonic_ns();
        assert!(last > 0);
        for _ in 0..1000 {
            let now = monotonic_ns();
            assert!(now >= last, "{now} < {last}");
            last = now;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(monotonic_ns() >= last + 2_000_000);
    }

    #[test]
    fn sleep_until_returns_at_or_after_the_deadline() {
        for delay_ns in [0u64, 50_000, 1_000_000, 5_000_000] {
            let deadline = monotonic_ns() + delay_ns;
            sleep_until_ns(deadline);
            let woke = monotonic_ns();
            assert!(woke >= deadline, "woke {} ns early", deadline - woke);
        }
    }

    #[test]
    fn sleep_until_a_past_instant_returns_at_once() {
        let t0 = monotonic_ns();
        sleep_until_ns(t0.saturating_sub(1_000_000_000));
        sleep_until_ns(0);
        // Generous: only a sleep that waited for something would take this long on a loaded machine.
        assert!(monotonic_ns() - t0 < 200_000_000);
    }

    #[test]
    fn wall_clock_in_ms_and_ns_agree() {
        let ms = unix_ms();
        let ns = unix_ns();
        // After 2020-01-01 and within a second of each other.
        assert!(ms > 1_577_836_800_000);
        assert!((ns / 1_000_000 - ms as i64).abs() < 1000, "{ns} ns vs {ms} ms");
    }
}
