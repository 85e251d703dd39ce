//! partita-bench: the request/response benchmark (`partita bench rr`).
//!
//! A client process sends requests (a sequence number and N payload bytes) to a server process, which answers
//! each with a reply of the same size carrying the same sequence number; the client records every round trip
//! with `CLOCK_MONOTONIC` (`std::time::Instant`). Transports plug in through the [`driver`] traits; the
//! registry of transports is [`driver::registry`]. Cyclone's own `ddsperf` runs as a reference in the same
//! benchmark ([`ddsperf`]).
//!
//! [`ports`] is `partita bench ports`: partita's ARINC 653 ports against iceoryx2 and a bare futex.
#![forbid(unsafe_code)]
pub mod dds;
pub mod ddsperf;
pub mod driver;
pub mod error;
pub mod flood;
pub mod hop;
pub mod ports;
pub mod report;
pub mod router_throughput;
pub mod rr;
pub use partita_apps::size;
pub mod udp;

pub use error::{BenchError, DriverError};
pub use partita_lab::repeat::Spread;
pub use rr::{RrConfig, ServerConfig};
pub use partita_lab::setup::Setup;
pub use size::parse_size;
pub use partita_lab::stats::Stats;
