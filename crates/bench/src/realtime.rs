//! The real-time setup a latency benchmark may run under, as `cyclictest` runs: every process of the run
//! (client, servers, forwarders; children inherit it) under SCHED_FIFO, and the CPUs kept out of deep idle
//! states by holding `/dev/cpu_dma_latency` open with a latency bound.
//!
//! Under the normal policy a woken process often preempts the one that woke it halfway through its work, which
//! costs an extra pair of context switches per message and makes the figures depend on where the scheduler
//! put whom; on a virtual machine the wake-up of a halted virtual CPU adds tens of microseconds on top. Both
//! setups are worth measuring: the normal one is what an untuned machine gives, the real-time one is what a
//! partitioned system is configured for.
use crate::error::BenchError;
use std::io::Write;

/// Runs the calling thread, and every thread and process it creates afterwards, under SCHED_FIFO at `priority`.
pub fn enter_fifo(priority: u8) -> Result<(), BenchError> {
    let param = libc::sched_param { sched_priority: i32::from(priority) };
    // SAFETY: plain system call on the calling thread with a valid parameter block.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(BenchError::Realtime(format!(
            "SCHED_FIFO priority {priority}: {e} (needs root or CAP_SYS_NICE; leave out --fifo to measure under the normal policy)"
        )));
    }
    Ok(())
}

/// Keeps the CPUs out of idle states whose exit latency exceeds the bound while it lives (the kernel's PM QoS
/// request ends when the file is closed).
pub struct CpuLatencyHold(#[allow(dead_code)] std::fs::File);

impl CpuLatencyHold {
    pub fn new(bound_us: u32) -> Result<Self, BenchError> {
        const PATH: &str = "/dev/cpu_dma_latency";
        let err = |e: std::io::Error| {
            BenchError::Realtime(format!(
                "{PATH}: {e} (needs root; leave out --cpu-dma-latency to measure with the idle states the machine allows)"
            ))
        };
        let mut f = std::fs::OpenOptions::new().write(true).open(PATH).map_err(err)?;
        f.write_all(&(bound_us as i32).to_ne_bytes()).map_err(err)?;
        Ok(CpuLatencyHold(f))
    }
}
