//! The studies of papers 003 and 004, run on the machine at hand with native, process-partition and
//! VM-partition rows, each as systems under partita's supervisor:
//!
//! - [`virt`]: `partita bench virt`, paper 003: a DDS client-server exchange with server work swept from 0 to
//!   100 µs, against raw UDP (the paper's "ideal" middleware), with the server native, in a process partition
//!   and in a VM partition, alone on its CPU and in a plan with a neighbour; overhead split and deadline shares.
//! - [`rt`]: `partita bench rt`, paper 004: `cyclictest` under `stress-ng` load in the testing profiles TP1–TP6
//!   on the system profiles native, process partition, process partition under a plan and VM partition; the
//!   paper's statistics, box plots, stability over time and a verdict against the paper's Table 1.
//! - [`isolation`]: `partita bench isolation`, issue 31's fault suite: what a busy partition keeps of its planned
//!   time while its neighbour makes the kernel work (writes, fsync, huge pages, calls over many memory areas,
//!   timers, a packet flood, fork storms…), as a process partition and as a VM partition.
//!
//! - [`modes`]: `partita bench modes`, issue 35: plan switches at frame ends and at once, and a partition
//!   setting itself idle, checked from the executor's record and a kernel trace.
//!
//! Each is a study of partita-lab (its runner, statistics, box plots, figures and machine description).
#![forbid(unsafe_code)]
pub mod isolation;
pub mod modes;
pub mod rt;
pub mod virt;
pub mod web;
