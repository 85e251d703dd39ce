//! The operating-system calls partita makes, each wrapped once, so that every other crate of the workspace
//! (except the DDS layer's FFI and the partition launcher's pre-exec child code) is free of `unsafe`.
//!
//! Each module is one kind of call; each `unsafe` block says why it is sound. Errors are `std::io::Error`
//! where the errno says it all, and small enums where the caller needs to know which step failed or what to
//! do about it (a SCHED_FIFO refusal says which capability is missing).
//!
//! The wrappers sit directly on `libc`: every one is a few lines, and a second binding crate would add a
//! dependency (and a second set of types) without removing any of the `unsafe` blocks below.
//!
//! `idle_poll` keeps idle CPUs from halting where the kernel cannot (processes of their own, in an idle cgroup).
//!
//! `tap` and `fd` serve VM partitions: a tap device per guest NIC, descriptors QEMU inherits.
//!
//! Everything here acts on the calling thread or process unless a name says otherwise: scheduling, timer
//! slack and network namespaces are per thread on Linux.
pub mod blockdev;
pub mod beneath;
pub mod busy;
pub mod cgroupfs;
pub mod clock;
pub mod cpu_latency;
pub mod fault_calls;
pub mod fd;
pub mod idle_poll;
pub mod netns;
pub mod prexec;
pub mod process;
pub mod sandbox;
pub mod sched;
pub mod shm;
pub mod seccomp_notify;
pub mod signal;
pub mod socket;
pub mod tap;
pub mod timer_slack;
