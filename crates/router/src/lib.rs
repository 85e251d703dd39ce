//! partita-router: the DDS routing service of an I/O partition.
//!
//! It connects two or more DDS domains (one participant per side, each on an explicit network interface) and
//! forwards topics between them along configured routes, for any data type: samples travel as serialized CDR,
//! topics are built from the type information discovery announces, so keys, instances, dispose/unregister and
//! source timestamps survive. Routes appear and disappear with the applications' writers and readers.
//! Protection of the partitioned side: per-topic rate limits and downsampling, bounded queues and a cap on the
//! number of routed topics, with every dropped sample counted. Statistics are printed and published on the DDS
//! topic `partita/router/stats`.
#![forbid(unsafe_code)]
pub mod batch;
pub mod config;
mod engine;
mod forwarder;
mod limit;
mod manager;
mod owners;
pub mod pattern;
mod ports;
mod proxies;
mod side;
pub mod stats;

pub use config::{ConfigError, RouterConfig};
pub use engine::{router_tag, tagged_domains, ReloadError, ReloadSummary, Router, RouterError, RESTART_FIX, ROUTER_TAG};
pub use forwarder::ForwardKey;
pub use ports::PortRouteError;
pub use stats::RouteStats;
