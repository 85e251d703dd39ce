//! The applications of paper 001's video-surveillance system, run inside partitions as `partita app …`:
//!
//! - [`recorder`]: the Video_Recorder partition. Synthetic cameras ([`pattern`]) encoded as PNG, recorded into
//!   a bounded on-disk ring ([`ring`]), served over DDS ([`surveillance`] topics) or, in a partition without a
//!   network, over two queuing ports ([`recorder_ports`]).
//! - [`monitor`]: a monitoring node. Requests frames, measures each response time, saves the latest frame.
//! - [`udp`]: the same request/response over raw UDP, the NETWORK baseline of the paper's Table 1.
//! - [`exchange`]: paper 003's client-server exchange (data both ways, server work of a given length), over
//!   DDS and raw UDP, and the client that sweeps it.
//! - [`size`]: byte counts as the command lines take them (`1KiB`).
//! - [`fault`]: programs that make the kernel work on a partition's behalf (issue 31's fault suite, run by
//!   `partita bench isolation`).
#![forbid(unsafe_code)]
pub mod exchange;
pub mod fault;
pub mod monitor;
pub mod pattern;
pub mod size;
pub mod recorder;
pub mod recorder_ports;
pub mod ring;
pub mod summary;
pub mod surveillance;
pub mod udp;
