//! Paper 001 (Pérez & Gutiérrez, DDS on a partitioning hypervisor) on this machine.
//!
//! - [`demo`]: the video-surveillance system on its built-in defaults, measured by its monitoring node.
//! - [`scenario`]: the evaluation's scenarios (Tables 1 and 2, the multicore future work) as systems.
//! - [`bench`] and [`report`]: `partita bench paper` and its Markdown, CSV, JSON and SVG outputs.
//! - [`soak`]: `partita soak`, a system run for hours with per-interval figures and a verdict.
//! - [`vm_bench`]: `partita bench vm`, the recorder as a VM partition against a process partition and native.
//! - [`uplink_bench`]: `partita bench uplink`, paper 001's rows with the monitor on another machine (an uplink) beside one host.
//! - [`wire`]: two machines as network namespaces on a wire, for the uplink tests and benchmark.
//!
//! A study of partita-lab: its runner boots each system, waits for its monitor and tears it down.
#![forbid(unsafe_code)]
pub mod bench;
pub mod demo;
pub mod report;
pub mod ports_plan;
pub mod scenario;
pub mod soak;
pub mod uplink_bench;
pub mod vm_bench;
pub mod wire;
