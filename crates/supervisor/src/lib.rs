//! The partita supervisor: builds a system on Linux (cgroups, namespaces, virtual networks), runs the plan
//! by freezing and thawing partitions, and watches their health.
//!
//! Its OS calls go through partita-os; the one exception is the partition launcher below.
#![deny(unsafe_code)]
pub mod cgroup;
pub mod clock;
pub mod command;
pub mod control_socket;
pub mod error;
pub mod freeze;
pub mod guest;
pub mod host_tuning;
pub mod histogram;
pub mod launch;
pub mod partition_log;
pub mod ports;
pub mod state_image;
pub mod overrun;

pub use error::{Result, SupervisorError};
pub mod dds_config;
pub mod executor;
pub mod vnet;
pub mod cleanup;
pub mod health;
pub mod hm;
pub mod modes;
pub mod registry;
pub mod router_reload;
pub mod stalls;
pub mod uplink;
pub mod supervisor;
pub mod window_watch;
pub mod window_ring;
pub mod status;
pub mod trace;

pub use supervisor::{Supervisor, UpOptions};
