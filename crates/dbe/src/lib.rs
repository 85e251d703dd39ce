//! partita-dbe: paper 002's DDS Benchmark Environment on this machine (`partita bench dbe`).
//!
//! Several DDS implementations — Cyclone DDS through partita's own layer, eProsima Fast DDS 2.9 (a C++ agent),
//! RustDDS — and two floors, raw UDP and iceoryx2's shared memory, measured by one protocol ([`agent`]) in the
//! architectures of the paper (decentralized, federated through partita's routing service, centralized
//! discovery through Fast DDS's discovery server), on one node or two, from a test matrix kept as data
//! ([`matrix`]), into a results tree keyed by machine and test id ([`store`]), reported as the paper's
//! Figs. 7–10 and tables ([`report`]); [`interop`] checks which implementation reads which.
#![forbid(unsafe_code)]
pub mod agent;
pub mod interop;
pub mod matrix;
pub mod report;
pub mod run;
pub mod store;
pub mod system;

/// The Fast DDS agent this build compiled (`build.rs`).
pub const FASTDDS_AGENT: &str = env!("PARTITA_DBE_FASTDDS_AGENT");
