//! partita-dds: a safe, thin layer over Cyclone DDS 11.0.1 (through `cyclors`).
//!
//! All of partita's `unsafe` DDS code lives in this crate. What it offers:
//! - participants on domains built from an explicit [`DomainConfig`] (interface, multicast, peers): never
//!   Cyclone's defaults, which pick the machine's default interface and multicast on it;
//! - typed topics from Rust types through serde ([`TopicType`]), encoded as standard XCDR1 ([`cdr`]) and
//!   declared to Cyclone as XTypes types, keys included, so other DDS implementations read them;
//! - raw topics, readers and writers of serialized samples, for programs that forward data without its type;
//! - QoS as builder-style values ([`Qos`]);
//! - blocking takes through a waitset, no listeners on the hot path.
//!
//! Every `unsafe` block and `unsafe impl` carries a `// SAFETY:` comment saying why it is sound (which pointers
//! are valid and for how long, who owns what, which Cyclone API contract holds), and every `unsafe fn` a
//! `# Safety` section saying what its callers must ensure. Clippy refuses an unsafe block or impl without its
//! comment, and `unsafe_op_in_unsafe_fn` makes the body of an `unsafe fn` put each of its own unsafe operations
//! in a commented block like any other code.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
pub mod cdr;
pub mod config;
pub mod discovery;
pub mod fastdds;
mod endpoint;
mod error;
pub mod guid;
mod keyhash;
mod participant;
pub mod qos;
pub mod types;

pub use discovery::{DiscoveredEndpoint, DiscoveredParticipant, EndpointKind, EndpointWatcher, ParticipantWatcher, TopicDescriptor};
pub use guid::{Guid, GuidPrefix};
pub use config::{DomainConfig, Interface, NetworkSettings, SecurityFiles};
pub use endpoint::{
    forward_kind, CallbackPanics, InstanceState, ListeningReader, MatchedPublications, RawReader, RawSample, RawTopic, RawWriter, Reader, Sample, SampleInfo, Topic, Wakeup, WriteKind, Writer,
};
pub use error::{DdsError, Result, RETCODE_TIMEOUT};
pub use participant::Participant;
pub use qos::Qos;
pub use types::{TopicType, TypeShape};

/// The Cyclone DDS version this crate is built on.
pub const CYCLONE_DDS_VERSION: &str = "11.0.1";
/// The cyclors version pinned by the workspace.
pub const CYCLORS_VERSION: &str = "0.4.0";

#[cfg(test)]
mod tests {
    use super::*;

    fn send_and_sync<T: Send + Sync>() {}

    /// The handles of this crate cross threads (a router moves readers and writers into its threads). Most are
    /// Send and Sync because their fields are, not by a hand-written promise: this keeps them so.
    #[test]
    fn dds_handles_are_send_and_sync() {
        send_and_sync::<Participant>();
        send_and_sync::<RawTopic>();
        send_and_sync::<Topic<()>>();
        send_and_sync::<RawReader>();
        send_and_sync::<RawWriter>();
        send_and_sync::<Reader<()>>();
        send_and_sync::<Writer<()>>();
        send_and_sync::<ListeningReader>();
        send_and_sync::<EndpointWatcher>();
        send_and_sync::<ParticipantWatcher>();
        send_and_sync::<DiscoveredEndpoint>();
        send_and_sync::<TopicDescriptor>();
    }
}
