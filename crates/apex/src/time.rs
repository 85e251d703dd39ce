//! ARINC 653 time services on CLOCK_MONOTONIC, the clock every partition of the machine shares with the
//! supervisor and its plan executor (GET_TIME, TIMED_WAIT, PERIODIC_WAIT, REPLENISH).
//!
//! Every wait sleeps to an absolute instant, so time the partition spends frozen outside its windows counts,
//! as it does for a port's timeout: a process waiting 10 ms across a window boundary wakes in its partition's
//! next window, late by however long the other partitions held the CPU.
use crate::error::{record, ApexError, Service};
use crate::partition::mode;
use crate::process::{current, set_current};
use crate::PartitaHypervisor;
use a653rs::bindings::*;

fn now_ns() -> u64 {
    partita_os::clock::monotonic_ns()
}

impl ApexTimeP4 for PartitaHypervisor {
    fn periodic_wait() -> Result<(), ErrorReturnCode> {
        record(periodic_wait())
    }

    /// Nanoseconds of CLOCK_MONOTONIC (since the machine booted, not since the partition started).
    fn get_time() -> ApexSystemTime {
        now_ns().min(i64::MAX as u64) as ApexSystemTime
    }
}

impl ApexTimeP1 for PartitaHypervisor {
    fn timed_wait(delay_time: ApexSystemTime) -> Result<(), ErrorReturnCode> {
        record(timed_wait(delay_time))
    }

    fn replenish(budget_time: ApexSystemTime) -> Result<(), ErrorReturnCode> {
        record(replenish(budget_time))
    }
}

/// Suspends the calling periodic process until its next release point: its previous one plus its period.
/// Release points that passed while the process ran late or its partition was frozen are skipped rather
/// than caught up with a burst of back-to-back releases; the process keeps its phase.
fn periodic_wait() -> Result<(), ApexError> {
    let service = Service::PeriodicWait;
    let Some(mut me) = current() else {
        return Err(ApexError::InvalidMode { service, problem: "only a process may wait for its next release (this is the start thread or a thread of the application's own)" });
    };
    let Some(period) = me.period_ns else {
        return Err(ApexError::InvalidMode { service, problem: "the calling process is aperiodic" });
    };
    let now = now_ns();
    let mut next = me.release_ns.saturating_add(period);
    if next <= now {
        let missed = (now - me.release_ns) / period;
        next = me.release_ns.saturating_add(missed.saturating_add(1).saturating_mul(period));
    }
    me.release_ns = next;
    me.deadline_ns = me.time_capacity_ns.map(|c| next.saturating_add(c));
    set_current(me);
    partita_os::clock::sleep_until_ns(next);
    Ok(())
}

/// Suspends the caller for `delay` ns; 0 gives the CPU to the partition's other ready threads.
fn timed_wait(delay: ApexSystemTime) -> Result<(), ApexError> {
    let Ok(delay) = u64::try_from(delay) else {
        return Err(ApexError::InvalidParameter { service: Service::TimedWait, problem: "an infinite delay (a negative time)".into() });
    };
    if delay == 0 {
        std::thread::yield_now();
    } else {
        partita_os::clock::sleep_until_ns(now_ns().saturating_add(delay));
    }
    Ok(())
}

/// Moves the calling process's deadline to now + `budget` (infinite for a negative budget). The deadline is
/// kept with the process; nothing watches deadlines yet, so this changes no behaviour today.
fn replenish(budget: ApexSystemTime) -> Result<(), ApexError> {
    let service = Service::Replenish;
    if mode() != OperatingMode::Normal {
        return Err(ApexError::NoAction { service, problem: "the partition is not in NORMAL mode" });
    }
    let Some(mut me) = current() else {
        return Err(ApexError::NoAction { service, problem: "not called from a process" });
    };
    let deadline = u64::try_from(budget).ok().map(|b| now_ns().saturating_add(b));
    if let Some(period) = me.period_ns {
        let next_release = me.release_ns.saturating_add(period);
        if !matches!(deadline, Some(d) if d <= next_release) {
            return Err(ApexError::InvalidMode { service, problem: "the new deadline of a periodic process would pass its next release point" });
        }
    }
    me.deadline_ns = deadline;
    set_current(me);
    Ok(())
}
