//! partita-lab: the study framework. Every benchmark and study of partita (paper 001's scenarios in
//! partita-paper, paper 002's DBE in partita-dbe, papers 003 and 004 and the fault suite in partita-studies, the
//! transport benchmarks in partita-bench) is a study of its own on top of this crate, and none imports another:
//!
//! - [`setup`]: the measurement setup every benchmark runs under (real-time by default), and [`repeat`]: runs
//!   repeated and interleaved, with their spread.
//! - [`cyclictest`]: the scheduling-latency floor of the machine (rt-tests' `cyclictest`).
//! - [`run`]: bring a system up under the supervisor, wait for the programs that measure, tear it down.
//! - [`stats`]: statistics of samples (percentiles, nearest rank, in one place) and how tables print them.
//! - [`boxstats`] and [`plot`]: box-plot statistics and the figures (SVG, PNG through `rsvg-convert`).
//! - [`machine`]: the machine a figure was measured on, and what disturbed each run (steal time, CPU frequency).
//! - [`freezing`], [`probe`] and [`herd`]: the supervisor's own measurements (freezing backends, the reference
//!   frame with a probe in each partition, the thaw herd read from a kernel trace).
//!
//! The runtime crates (partita-os, -env, -dds, -router-config, -system, -vm, -router, -apps, -supervisor,
//! -programs) never depend on a lab crate (crates/programs/tests/layers.rs checks it).
#![forbid(unsafe_code)]
pub mod boxstats;
pub mod cyclictest;
pub mod freezing;
pub mod herd;
pub mod machine;
pub mod plot;
pub mod probe;
pub mod repeat;
pub mod run;
pub mod setup;
pub mod stats;
