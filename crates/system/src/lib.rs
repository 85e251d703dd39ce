//! partita-system: the system description. One TOML file describes modules (machines) with their
//! partitions, cyclic plans and V-NETWORKs, native nodes, and the inter-module network. [`parse`] and
//! [`load`] turn it into a validated [`System`] or report every problem found ([`Errors`]), each naming the
//! file, line, field path and the fix. [`plan`] holds the plan analysis, [`names`] the host names, [`spec`] a
//! system built in code ([`SystemSpec`]), validated as a file is.
//! The format is documented in `docs/configuration.md`.
#![forbid(unsafe_code)]
pub mod confinement;
pub mod error;
mod load;
pub mod model;
pub mod names;
pub mod plan;
pub mod spec;
pub mod uplink;

pub use confinement::{Confinement, KernelLimits, StateQuota};
pub use error::{Diagnostic, Errors, Problem};
pub use load::{load, parse, search_path, Host, DEFAULT_PLAN, MAX_FRAME, MEMORY_FLOOR, PARTITA_PROGRAM};
pub use model::*;
pub use names::HostNames;
pub use spec::{
    CpuDmaLatency, DiskLimit, DiskLimitsSpec, DiskSpec, ExitAction, HealthSpec, HmEntrySpec, HmTableSpec, HostSpec, KernelLimitsSpec, ModuleSpec, NetworkSpec, NodeSpec, PartitionKind, PartitionSpec, PeerSpec,
    PlanSpec, RequestPathSpec, SchedulingPolicy, SchedulingSpec, SeccompSpec, SecuritySpec, StateSpec, SystemSection, SystemSpec, TimeOverrunSpec, UplinkSpec, VmSpec, WindowSpec,
};

/// The paper's video-surveillance system, the system used when no file is given.
pub const BUILTIN_DEFAULT: &str = include_str!("../../../examples/video-surveillance.toml");
/// File name shown in errors and tables for [`BUILTIN_DEFAULT`].
pub const BUILTIN_DEFAULT_NAME: &str = "<built-in video-surveillance.toml>";

/// The built-in default system, validated against this machine's CPUs.
pub fn builtin_default() -> Result<System, Errors> {
    parse(BUILTIN_DEFAULT, BUILTIN_DEFAULT_NAME, &Host::this_machine())
}
