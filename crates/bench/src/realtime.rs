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
pub use partita_os::cpu_latency::CpuLatencyHold;

/// Runs the calling thread, and every thread and process it creates afterwards, under SCHED_FIFO at `priority`.
pub fn enter_fifo(priority: u8) -> Result<(), BenchError> {
    partita_os::sched::set_current_thread_fifo(i32::from(priority))
        .map_err(|e| BenchError::Realtime(format!("{e}; leave out --fifo to measure under the normal policy")))
}

/// Holds the CPUs out of idle states slower than `bound_us` until the hold is dropped.
pub fn hold_cpu_latency(bound_us: u32) -> Result<CpuLatencyHold, BenchError> {
    CpuLatencyHold::new(bound_us).map_err(|e| {
        BenchError::Realtime(format!("{e}; leave out --cpu-dma-latency to measure with the idle states the machine allows"))
    })
}
