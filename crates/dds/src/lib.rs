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
pub mod cdr;
pub mod config;
pub mod discovery;
mod endpoint;
mod error;
pub mod guid;
mod participant;
pub mod qos;
pub mod sandbox;
pub mod types;

pub use discovery::{DiscoveredEndpoint, DiscoveredParticipant, EndpointKind, EndpointWatcher, ParticipantWatcher, TopicDescriptor};
pub use guid::{Guid, GuidPrefix};
pub use config::{DomainConfig, Interface, NetworkSettings};
pub use endpoint::{
    forward_kind, CallbackPanics, InstanceState, ListeningReader, MatchedPublications, RawReader, RawSample, RawTopic, RawWriter, Reader, Sample, SampleInfo, Topic, WriteKind, Writer,
};
pub use error::{DdsError, Result};
pub use participant::Participant;
pub use qos::Qos;
pub use types::{TopicType, TypeShape};

/// The Cyclone DDS version this crate is built on.
pub const CYCLONE_DDS_VERSION: &str = "11.0.1";
/// The cyclors version pinned by the workspace.
pub const CYCLORS_VERSION: &str = "0.4.0";
