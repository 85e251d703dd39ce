//! partita-apex: the ARINC 653 APEX services of the [`a653rs`] crate on partita's ports, so that a partition
//! written against a653rs alone (with its `#[a653rs::partition(...)]` macro or its binding traits) runs in a
//! partita partition: name [`PartitaHypervisor`] as its hypervisor.
//!
//! ```ignore
//! #[a653rs::partition(partita_apex::PartitaHypervisor)]
//! mod hello { /* ports, processes, cold and warm start, as for any a653rs hypervisor */ }
//! fn main() { use a653rs::prelude::PartitionExt; hello::Partition.run() }
//! ```
//!
//! # What is implemented, and on what
//!
//! | a653rs trait | services | on |
//! |---|---|---|
//! | `ApexPartitionP4` | GET_PARTITION_STATUS, SET_PARTITION_MODE | the partition's process (below) |
//! | `ApexProcessP4` | CREATE_PROCESS, START | one thread per process |
//! | `ApexSamplingPortP4`, `ApexSamplingPortP1` | CREATE_SAMPLING_PORT, WRITE_/READ_SAMPLING_MESSAGE, GET_SAMPLING_PORT_ID/_STATUS | [`partita_ports::SamplingSource`], [`partita_ports::SamplingDestination`] |
//! | `ApexQueuingPortP4`, `ApexQueuingPortP1` | CREATE_QUEUING_PORT, SEND_/RECEIVE_QUEUING_MESSAGE, GET_QUEUING_PORT_STATUS, CLEAR_QUEUING_PORT, GET_QUEUING_PORT_ID | [`partita_ports::QueuingSource`], [`partita_ports::QueuingDestination`] |
//! | `ApexTimeP4`, `ApexTimeP1` | GET_TIME, PERIODIC_WAIT, TIMED_WAIT, REPLENISH | CLOCK_MONOTONIC |
//! | `ApexErrorP4` | REPORT_APPLICATION_MESSAGE, RAISE_APPLICATION_ERROR | standard error; the control page, or the process's exit code |
//! | `ApexScheduleP2` | SET_MODULE_SCHEDULE, GET_MODULE_SCHEDULE_STATUS, GET_MODULE_SCHEDULE_ID | the control page's plans |
//!
//! **Ports.** CREATE_*_PORT opens the partita port of the same name from those the supervisor gave the
//! partition (`PARTITA_PORTS`, read at the first creation; port names are the system file's channel names by
//! default). The request must match what the supervisor gave: kind, direction, maximum message size, and a
//! sampling destination's refresh period or a queuing port's depth (`max_nb_message`); a mismatch is
//! INVALID_CONFIG. A port not given, or given as the other kind or direction, is refused by partita's
//! [`partita_ports::Ports`], which counts it as [`partita_ports::Fault::IllegalOperation`] in the status memory
//! the supervisor's health monitor reads (its first port's); a size, refresh or depth mismatch is refused here before the port is
//! opened, and not counted (partita-ports offers no way to count a fault on a port it has not opened). A port
//! created twice is NO_ACTION; a creation outside cold or warm start is INVALID_MODE. Ids are 1, 2, … in order
//! of creation, one series for sampling ports and one for queuing ports.
//!
//! A sampling read returns the latest message with ARINC 653's validity: valid when no older than the
//! channel's refresh period. A port never written is NO_ACTION. Queuing timeouts map onto
//! [`partita_ports::Timeout`]: 0 is `Immediate`, a negative time (INFINITE_TIME_VALUE) `Infinite`, anything
//! else `After` that many ns; a full queue is NOT_AVAILABLE at once and TIMED_OUT after a wait, and counted as
//! an overflow in the source's status. No message is ever overwritten, so a receive's overflow flag is always
//! false. Both queuing disciplines are accepted: a partita queue has one receiving partition, and its
//! processes sharing one port take turns on the port's lock, not in FIFO or priority order. Writing to a
//! destination or reading from a source is INVALID_MODE; an empty message INVALID_PARAM, one longer than the
//! channel INVALID_CONFIG. Every other failure of a port (the other end's memory garbled, a buffer too short)
//! has its code in [`ApexError::code`].
//!
//! **The control page.** A partition the supervisor runs in a plan gets a control page
//! ([`partita_ports::control`], its descriptor in `PARTITA_CONTROL`): the supervisor writes there the
//! partition's mode, start condition and the module's plan, and the partition posts requests to it, one at a
//! time, each answered (done, refused, invalid, no such plan). The services below use it when it is there,
//! and behave as described under "without a control page" otherwise. A service waits for the supervisor's
//! answer at most 5 s, time frozen outside the partition's windows included.
//!
//! **Partition and processes.** The partition starts in COLD_START, or in WARM_START when its control page says
//! so (the supervisor restarted it warm); GET_PARTITION_STATUS gives the page's mode and start condition
//! (without a page: the process's own mode and NORMAL_START). A process is a thread;
//! one started during cold or warm start waits until the partition enters NORMAL mode, which is its first
//! release point. SET_PARTITION_MODE:
//!
//! - NORMAL (from cold or warm start) releases the processes, and the calling start thread then waits for the
//!   partition's end instead of returning (a653rs's `Partition::run` spins in an empty loop after it): on a stop
//!   signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT) or once every started process has returned from its entry
//!   point, the process exits with [`EXIT_STOPPED`]. NORMAL when already NORMAL is NO_ACTION.
//! - IDLE, COLD_START and WARM_START, with a control page, are asked of the supervisor, which freezes the
//!   partition (IDLE) or restarts it (cold or warm); once it accepted, the call waits for it to act, and if it
//!   has not within 5 s of the request (or did not answer), the process exits with the code below. A refusal
//!   is INVALID_MODE. NORMAL is told to the supervisor too (a refusal is INVALID_MODE; no answer does not keep
//!   the partition from NORMAL mode).
//! - Without a control page, IDLE exits the partition's process with [`EXIT_IDLE`]; COLD_START and WARM_START
//!   exit it with [`EXIT_COLD_START`] and [`EXIT_WARM_START`]: a restart is the supervisor's to make, and its
//!   health monitor applies the partition's action to any exit.
//!
//! WARM_START during cold start is INVALID_MODE, as ARINC 653 says.
//!
//! GET_PARTITION_STATUS gives the mode, the start condition, the number of CPUs the partition may run on, and
//! infinite period and duration: the plan is the supervisor's, and a partition does not learn its windows.
//! CREATE_PROCESS checks the attributes as ARINC 653 does (priority 1..=239, a positive period or infinite, a
//! time capacity within the period) and keeps them; stacks are at least 256 KiB. Priorities are not applied
//! (a partition may not raise its threads' priority: they share its CPU time under Linux's ordinary
//! scheduler), and time capacities and deadlines are not monitored.
//!
//! **Time.** GET_TIME is CLOCK_MONOTONIC in ns, the clock every partition of the machine and the plan executor
//! share. TIMED_WAIT sleeps to an absolute instant (0 yields). PERIODIC_WAIT, in a periodic process, sleeps
//! to its next release point, its previous one plus its period; release points missed (the process overran,
//! or its partition was frozen outside its windows) are skipped, not caught up with a burst. REPLENISH moves
//! the calling process's deadline (refused past a periodic process's next release point), which nothing
//! watches yet. Time the partition spends frozen counts in every wait.
//!
//! **Health.** REPORT_APPLICATION_MESSAGE writes one line to standard error (the supervisor's partition log):
//! the partition's name, the process's, the message. RAISE_APPLICATION_ERROR, there being no error handler,
//! is handled at partition level: the message goes to standard error, and then, with a control page, to the
//! supervisor as an `application_error` (its first 192 bytes), whose health-monitor tables decide what
//! follows (ignore, a restart, idle, a plan switch…); the call returns once the supervisor answered. Without a
//! control page the process exits with [`EXIT_APPLICATION_ERROR`], for the supervisor's health monitor to apply
//! the partition's action.
//!
//! **Schedules.** A module's schedules are its named plans (the system file's `[[module.plan]]` names), a
//! schedule's id its plan's index on the control page (0 is the plan the module started with).
//! GET_MODULE_SCHEDULE_ID finds a name there (an unknown name is INVALID_CONFIG); GET_MODULE_SCHEDULE_STATUS
//! reads the current plan, the next (the one a pending switch goes to, at the end of the current major frame;
//! the current one when none is pending) and the CLOCK_MONOTONIC time of the last switch (0: none).
//! SET_MODULE_SCHEDULE asks the supervisor: an id the page does not name is INVALID_PARAM, a partition that is
//! not a system partition (`system_partition = true`) is refused with INVALID_CONFIG. Without a control page
//! the three are NOT_AVAILABLE, as is any service whose request the supervisor did not answer within 5 s.
//!
//! Every failure is an [`ApexError`] with its context before it is reduced to ARINC 653's return code:
//! [`take_last_error`] gives the calling thread's last one, and a failed creation of a port or a process (a
//! configuration error) is also printed to standard error, since applications usually unwrap it at start.
//!
//! # Not implemented, and why
//!
//! - Intra-partition communication (buffers, blackboards, semaphores, events, mutexes: a653rs's `*P1` traits
//!   of those names): they are between the threads of one process, which Rust's standard library already
//!   serves; they come when a partition needs them through a653rs.
//! - The rest of process management (`ApexProcessP1`: suspend, resume, stop, priorities, preemption locking):
//!   the threads run under Linux's scheduler, which a partition may not steer, and stopping a thread from
//!   another is not something Rust's threads allow.
//! - The error handler (`ApexErrorP1`): the supervisor does not deliver health-monitor events into a
//!   partition.
//! - The partition's period and duration, deadline monitoring: a partition does not learn its windows.
//! - The rest of ARINC 653 Part 2 (memory blocks, files, logbooks, …).
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

mod control;
mod error;
mod health;
mod partition;
mod ports;
mod process;
mod queuing;
mod sampling;
mod time;

pub use error::{take_last_error, ApexError, Service};
pub use partition::partition_name;

/// The hypervisor a partition names in `#[a653rs::partition(partita_apex::PartitaHypervisor)]`: its APEX
/// services are partita's (module documentation). The state it serves (mode, processes, ports) is the
/// process's own: one partition per process.
#[derive(Debug, Clone, Copy, Default)]
pub struct PartitaHypervisor;

impl PartitaHypervisor {
    /// Adds ports made in this process (tests, benchmarks) to those the port services open by name; once
    /// called, `PARTITA_PORTS` is not read. A partition started by the supervisor never needs it.
    pub fn provide_ports(ports: partita_ports::Ports) {
        ports::provide(ports)
    }
}

/// Exit code of a partition's process that ended in an orderly way: a stop signal, or every process returned.
pub const EXIT_STOPPED: i32 = 0;
/// Exit code after SET_PARTITION_MODE(IDLE) without a control page, or when the supervisor did not act.
pub const EXIT_IDLE: i32 = 90;
/// Exit code after SET_PARTITION_MODE(COLD_START) without a control page, or when the supervisor did not act.
pub const EXIT_COLD_START: i32 = 91;
/// Exit code after SET_PARTITION_MODE(WARM_START) without a control page, or when the supervisor did not act.
pub const EXIT_WARM_START: i32 = 92;
/// Exit code after RAISE_APPLICATION_ERROR without a control page.
pub const EXIT_APPLICATION_ERROR: i32 = 93;
