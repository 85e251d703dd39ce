//! Scheduling of the calling thread: CPU pinning, SCHED_FIFO, the nice value, and locking memory.
//!
//! On Linux every one of these settings belongs to a thread (pid 0 in the calls below is the calling
//! thread), and threads and processes created afterwards inherit them. The plan executor, the freezing
//! benchmark's measuring thread and the benchmark drivers use them to run ahead of the partitions they
//! measure; the recorder to weigh its capture thread above its serving threads.
use std::io;
use thiserror::Error;

/// Why the calling thread's scheduling could not be set; each message says what to change.
#[derive(Debug, Error)]
pub enum SchedError {
    /// A `cpu_set_t` holds CPUs 0 to 1023.
    #[error("CPU {cpu} is beyond the {} CPUs a CPU set holds", libc::CPU_SETSIZE)]
    CpuOutOfRange { cpu: usize },
    #[error("pinning the thread to CPU {cpu}: {source} (is the CPU online and in this process's cpuset? see /proc/self/status, Cpus_allowed_list)")]
    Pin { cpu: usize, #[source] source: io::Error },
    #[error("SCHED_FIFO priority {priority} is outside {min}..={max}")]
    PriorityOutOfRange { priority: i32, min: i32, max: i32 },
    #[error("SCHED_FIFO priority {priority}: {source}{}", fifo_hint(source))]
    Fifo { priority: i32, #[source] source: io::Error },
}

fn fifo_hint(e: &io::Error) -> &'static str {
    if e.raw_os_error() == Some(libc::EPERM) {
        " (needs root or CAP_SYS_NICE, or an RLIMIT_RTPRIO at least this high; in a container also a real-time \
         runtime budget for its cgroup)"
    } else {
        ""
    }
}

/// Runs the calling thread on `cpu` only.
pub fn pin_current_thread(cpu: usize) -> Result<(), SchedError> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(SchedError::CpuOutOfRange { cpu });
    }
    // SAFETY: `set` is a zeroed (empty) cpu_set_t changed only by CPU_SET with an index checked above; the
    // size passed is its own; pid 0 is the calling thread.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(SchedError::Pin { cpu, source: io::Error::last_os_error() });
    }
    Ok(())
}

/// Lets the calling thread run on `cpus` only (at least one).
pub fn set_current_thread_cpus(cpus: &[usize]) -> Result<(), SchedError> {
    let Some(&first) = cpus.first() else { return Err(SchedError::CpuOutOfRange { cpu: usize::MAX }) };
    if let Some(&cpu) = cpus.iter().find(|&&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(SchedError::CpuOutOfRange { cpu });
    }
    // SAFETY: `set` is a zeroed (empty) cpu_set_t changed only by CPU_SET with indices checked above; the size
    // passed is its own; pid 0 is the calling thread.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(SchedError::Pin { cpu: first, source: io::Error::last_os_error() });
    }
    Ok(())
}

/// The CPUs the calling thread may run on, in increasing order.
pub fn current_thread_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t for the kernel to fill, with its own size; pid 0 is the calling thread.
    let (r, set) = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let r = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (r, set)
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET only reads the set, at indices below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) }).collect())
}

/// The priorities SCHED_FIFO accepts (1..=99 on Linux).
pub fn fifo_priority_range() -> (i32, i32) {
    // SAFETY: both calls take a policy constant only.
    unsafe { (libc::sched_get_priority_min(libc::SCHED_FIFO), libc::sched_get_priority_max(libc::SCHED_FIFO)) }
}

/// Runs the calling thread (and what it creates afterwards) under SCHED_FIFO at `priority`.
pub fn set_current_thread_fifo(priority: i32) -> Result<(), SchedError> {
    let (min, max) = fifo_priority_range();
    if !(min..=max).contains(&priority) {
        return Err(SchedError::PriorityOutOfRange { priority, min, max });
    }
    if !crate::prexec::set_scheduler(Some(priority)) {
        return Err(SchedError::Fifo { priority, source: io::Error::last_os_error() });
    }
    Ok(())
}

/// Runs the calling thread (and what it creates afterwards) under SCHED_OTHER again.
pub fn set_current_thread_normal() -> io::Result<()> {
    if !crate::prexec::set_scheduler(None) {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's SCHED_FIFO priority, or `None` under any other policy.
pub fn current_thread_fifo_priority() -> io::Result<Option<i32>> {
    // SAFETY: pid 0 is the calling thread; no memory is passed.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(io::Error::last_os_error());
    }
    if policy & !libc::SCHED_RESET_ON_FORK != libc::SCHED_FIFO {
        return Ok(None);
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid, writable sched_param; pid 0 is the calling thread.
    if unsafe { libc::sched_getparam(0, &mut param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Some(param.sched_priority))
}

/// The Linux thread id of the calling thread (what `PRIO_PROCESS` means by a process for one thread).
fn gettid() -> libc::id_t {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() as libc::id_t }
}

/// Sets the nice value of the calling thread only (not of its process). Lowering it below the current value
/// needs CAP_SYS_NICE or RLIMIT_NICE; raising it is always allowed.
pub fn set_current_thread_nice(nice: i32) -> io::Result<()> {
    // SAFETY: setpriority on this thread's own id; no memory is passed.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, gettid(), nice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The nice value of the calling thread.
pub fn current_thread_nice() -> io::Result<i32> {
    // getpriority returns -1 both for nice -1 and for an error: only errno tells them apart.
    // SAFETY: __errno_location points to this thread's errno, valid for the thread's life; getpriority on
    // this thread's own id passes no memory.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, gettid())
    };
    if nice == -1 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(0) {
            return Err(e);
        }
    }
    Ok(nice)
}

/// Locks every page of the process, now and later, in memory, so that page faults do not show as lateness
/// in a timed loop. Needs CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK.
pub fn lock_all_memory() -> io::Result<()> {
    // SAFETY: mlockall takes flags only.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_can_be_given_a_set_of_cpus() {
        std::thread::spawn(|| {
            let all = current_thread_cpus().unwrap();
            set_current_thread_cpus(&all[..1]).unwrap();
            assert_eq!(current_thread_cpus().unwrap(), all[..1].to_vec());
            set_current_thread_cpus(&all).unwrap();
            assert_eq!(current_thread_cpus().unwrap(), all);
            assert!(set_current_thread_cpus(&[]).is_err());
        })
        .join()
        .unwrap();
    }

    /// Runs `f` on a thread of its own, so that the test runner's threads keep their scheduling.
    fn on_own_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    #[test]
    fn pinning_shows_in_the_thread_affinity() {
        let allowed = current_thread_cpus().unwrap();
        assert!(!allowed.is_empty());
        // CPU 0 on any machine that lets this process use it; otherwise the first CPU it may use.
        let cpu = if allowed.contains(&0) { 0 } else { allowed[0] };
        let (pinned, after) = on_own_thread(move || {
            pin_current_thread(cpu).unwrap();
            (current_thread_cpus().unwrap(), std::thread::spawn(|| current_thread_cpus().unwrap()).join().unwrap())
        });
        assert_eq!(pinned, vec![cpu]);
        assert_eq!(after, vec![cpu], "a thread started by a pinned thread inherits its CPU");
        assert_eq!(current_thread_cpus().unwrap(), allowed, "other threads keep their CPUs");
    }

    #[test]
    fn pinning_to_a_cpu_that_does_not_exist_fails() {
        let e = on_own_thread(|| pin_current_thread(libc::CPU_SETSIZE as usize).unwrap_err());
        assert!(matches!(e, SchedError::CpuOutOfRange { cpu } if cpu == libc::CPU_SETSIZE as usize), "{e:?}");
        let e = on_own_thread(|| pin_current_thread(libc::CPU_SETSIZE as usize - 1).unwrap_err());
        assert!(matches!(e, SchedError::Pin { cpu: 1023, .. }), "{e:?}");
        assert!(e.to_string().contains("Cpus_allowed_list"), "{e}");
    }

    #[test]
    fn fifo_priority_outside_1_to_99_is_refused() {
        assert_eq!(fifo_priority_range(), (1, 99));
        for priority in [0, 100, -1] {
            let e = on_own_thread(move || set_current_thread_fifo(priority).unwrap_err());
            assert!(matches!(e, SchedError::PriorityOutOfRange { priority: p, min: 1, max: 99 } if p == priority), "{e:?}");
        }
        assert_eq!(current_thread_fifo_priority().unwrap(), None);
    }

    #[test]
    fn fifo_takes_effect_on_the_calling_thread_only_as_root() {
        let (result, priority) = on_own_thread(|| {
            let r = set_current_thread_fifo(3);
            (r, current_thread_fifo_priority().unwrap())
        });
        match result {
            Ok(()) => assert_eq!(priority, Some(3)),
            // Without the privilege, the error says how to get it.
            Err(e) => {
                assert!(matches!(&e, SchedError::Fifo { priority: 3, .. }), "{e:?}");
                assert!(e.to_string().contains("CAP_SYS_NICE"), "{e}");
                assert_eq!(priority, None);
            }
        }
        assert_eq!(current_thread_fifo_priority().unwrap(), None, "other threads keep their policy");
    }

    #[test]
    fn nice_of_one_thread_changes_that_thread_only() {
        let before = current_thread_nice().unwrap();
        let target = (before + 3).min(19);
        let seen = on_own_thread(move || {
            set_current_thread_nice(target).unwrap();
            current_thread_nice().unwrap()
        });
        assert_eq!(seen, target);
        assert_eq!(current_thread_nice().unwrap(), before);
    }

    #[test]
    fn fifo_error_names_the_missing_capability() {
        let e = SchedError::Fifo { priority: 80, source: io::Error::from_raw_os_error(libc::EPERM) };
        let text = e.to_string();
        assert!(text.starts_with("SCHED_FIFO priority 80: "), "{text}");
        assert!(text.contains("root or CAP_SYS_NICE"), "{text}");
        let e = SchedError::Fifo { priority: 80, source: io::Error::from_raw_os_error(libc::EINVAL) };
        assert!(!e.to_string().contains("CAP_SYS_NICE"));
    }
}
