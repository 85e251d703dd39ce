//! Port routes (`[[port]]`): topics carried between a DDS side and the I/O partition's ARINC 653 ports, for
//! partitions that have no network and no DDS of their own.
//!
//! - **DDS → port** (`to_port`): a listening reader of the topic on the side hands each sample, on Cyclone's
//!   delivery thread, to the port as a `dds_frame` (its serialized CDR untouched, its key hash, its kind: data,
//!   dispose or unregister, its source timestamp). A full queue drops the sample and counts it: the router never
//!   waits on a partition that does not read.
//! - **port → DDS** (`from_port`): a thread of the router waits on the port and publishes each frame as it is,
//!   with its key hash, kind and timestamp, through a writer of the topic on the side. What the partition wrote
//!   is untrusted: a frame that is not one, or that DDS refuses, is counted as an error and skipped.
//!
//! The topic is made from its name and type name (keyed by the key hash the frames carry when `keyed`), so any
//! type passes without the router knowing it; the applications on the side must announce the same type name.
use crate::stats::ForwardStats;
use partita_dds::qos::{Durability, Reliability};
use partita_dds::{ListeningReader, Participant, Qos, RawTopic, RawWriter, SampleInfo, WriteKind};
use partita_ports::dds_frame::{DdsFrame, SampleKind};
use partita_ports::{PortError, Ports, QueuingDestination, Timeout};
use partita_router_config::{PortRouteConfig, ReliabilityOverride};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const LOG: &str = "partita::router::ports";

/// How long the thread of a `from_port` route waits on its port before it looks whether the router stops.
const POLL: Duration = Duration::from_millis(100);

/// Why a port route could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PortRouteError {
    #[error("port route {label}: {source}")]
    Port { label: String, source: PortError },
    #[error("port route {label}: {source}")]
    Dds { label: String, source: partita_dds::DdsError },
    #[error("port route {label}: no side named {side:?}")]
    NoSide { label: String, side: String },
}

/// One port route while the router runs.
pub(crate) struct PortRoute {
    pub(crate) label: String,
    pub(crate) topic: String,
    pub(crate) type_name: String,
    pub(crate) stats: Arc<ForwardStats>,
    _reader: Option<ListeningReader>,
    thread: Option<JoinHandle<()>>,
}

/// The running port routes; dropping them stops their threads and deletes their readers.
#[derive(Default)]
pub(crate) struct PortRoutes {
    pub(crate) routes: Vec<PortRoute>,
    stop: Arc<AtomicBool>,
}

impl Drop for PortRoutes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for r in &mut self.routes {
            if let Some(t) = r.thread.take() {
                let _ = t.join();
            }
        }
    }
}

fn qos(c: &PortRouteConfig, tag: &[u8]) -> Qos {
    let reliability = match c.reliability {
        Some(ReliabilityOverride::BestEffort) => Reliability::BestEffort,
        _ => Reliability::Reliable { max_blocking: Duration::from_millis(100) },
    };
    Qos::new().reliability(reliability).keep_last(c.history.unwrap_or(16)).durability(Durability::Volatile).user_data(tag.to_vec()).autodispose_unregistered(false)
}

fn kind_of(info: &SampleInfo) -> SampleKind {
    // One sample per frame: data of an instance disposed with it goes as data (its dispose follows).
    match partita_dds::forward_kind(info, false) {
        WriteKind::Write | WriteKind::WriteDispose => SampleKind::Data,
        WriteKind::Dispose => SampleKind::Dispose,
        WriteKind::Unregister => SampleKind::Unregister,
    }
}

fn write_kind(k: SampleKind) -> WriteKind {
    match k {
        SampleKind::Data => WriteKind::Write,
        SampleKind::Dispose | SampleKind::DisposeUnregister => WriteKind::Dispose,
        SampleKind::Unregister => WriteKind::Unregister,
    }
}

impl PortRoutes {
    /// Makes every port route of the configuration, on the participants of the router's sides (by name).
    pub(crate) fn start(configs: &[PortRouteConfig], sides: &[(String, Participant)], ports: &mut Ports, tag: &[u8]) -> Result<PortRoutes, PortRouteError> {
        let mut out = PortRoutes::default();
        for c in configs {
            let port = c.to_port.as_deref().or(c.from_port.as_deref()).unwrap_or_default();
            let label = match &c.to_port {
                Some(p) => format!("{}->port:{p} {}", c.side, c.topic),
                None => format!("port:{port}->{} {}", c.side, c.topic),
            };
            let participant = sides.iter().find(|(n, _)| *n == c.side).map(|(_, p)| p).ok_or_else(|| PortRouteError::NoSide { label: label.clone(), side: c.side.clone() })?;
            let dds = |source| PortRouteError::Dds { label: label.clone(), source };
            let topic = if c.keyed { RawTopic::keyed_by_hash(participant, &c.topic, &c.type_name) } else { RawTopic::keyless(participant, &c.topic, &c.type_name) }.map_err(dds)?;
            let stats = Arc::new(ForwardStats::default());
            let q = qos(c, tag);
            let route = match (&c.to_port, &c.from_port) {
                (Some(name), _) => {
                    let mut sink = ports.queuing_source(name).map_err(|source| PortRouteError::Port { label: label.clone(), source })?;
                    let st = stats.clone();
                    let mut reader_qos = q.clone();
                    // What this router publishes from its ports is not taken back into them.
                    reader_qos.ignore_local = Some(partita_dds::qos::IgnoreLocal::Process);
                    let reader = ListeningReader::new(&topic, &reader_qos, move |bytes, info| {
                        st.received.fetch_add(1, Ordering::Relaxed);
                        let frame = DdsFrame { kind: kind_of(&info), source_timestamp_ns: Some(info.source_timestamp_ns), key_hash: info.key_hash.unwrap_or_default(), cdr: bytes };
                        match sink.send_with(frame.len(), Timeout::Immediate, |buf| frame.write_into(buf)) {
                            Ok(()) => {
                                st.forwarded.fetch_add(1, Ordering::Relaxed);
                                st.record_latencies_ns(std::iter::once(partita_os::clock::unix_ns() - info.source_timestamp_ns));
                            }
                            Err(PortError::Full { .. }) => {
                                st.dropped_queue.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => {
                                st.errors.fetch_add(1, Ordering::Relaxed);
                                tracing::debug!(target: LOG, "{e}");
                            }
                        }
                    })
                    .map_err(dds)?;
                    PortRoute { label: label.clone(), topic: c.topic.clone(), type_name: c.type_name.clone(), stats, _reader: Some(reader), thread: None }
                }
                (None, Some(name)) => {
                    let source = ports.queuing_destination(name).map_err(|source| PortRouteError::Port { label: label.clone(), source })?;
                    let writer = RawWriter::new(&topic, &q).map_err(dds)?;
                    let (st, stop, l) = (stats.clone(), out.stop.clone(), label.clone());
                    let thread = std::thread::Builder::new()
                        .name(format!("port-{name}"))
                        .spawn(move || publish_from_port(source, writer, &st, &stop, &l))
                        .expect("spawn a port route's thread");
                    PortRoute { label: label.clone(), topic: c.topic.clone(), type_name: c.type_name.clone(), stats, _reader: None, thread: Some(thread) }
                }
                (None, None) => continue,
            };
            tracing::info!(target: LOG, "{label} ({})", c.type_name);
            out.routes.push(route);
        }
        Ok(out)
    }
}

/// The thread of a `from_port` route: each frame the partition wrote, published as it is.
fn publish_from_port(mut port: QueuingDestination, writer: RawWriter, st: &ForwardStats, stop: &AtomicBool, label: &str) {
    let mut buf = vec![0u8; port.max_message() as usize];
    while !stop.load(Ordering::Relaxed) {
        let n = match port.receive(&mut buf, Timeout::After(POLL)) {
            Ok(r) => r.len,
            Err(PortError::TimedOut { .. } | PortError::Empty { .. }) => continue,
            Err(e) => {
                // The partition's garbage (a length out of range, corrupt counters): counted at its port too.
                st.errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: LOG, route = label, "{e}");
                if matches!(e, PortError::PeerFault { .. }) {
                    std::thread::sleep(POLL);
                }
                continue;
            }
        };
        st.received.fetch_add(1, Ordering::Relaxed);
        let frame = match DdsFrame::read(&buf[..n]) {
            Ok(f) => f,
            Err(e) => {
                st.errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: LOG, route = label, "not a DDS frame: {e}");
                continue;
            }
        };
        let key_hash = (frame.key_hash != [0; 16]).then_some(frame.key_hash);
        match writer.forward_with_key_hash(frame.cdr, write_kind(frame.kind), frame.source_timestamp_ns, key_hash) {
            Ok(()) => {
                st.forwarded.fetch_add(1, Ordering::Relaxed);
                if let Some(ts) = frame.source_timestamp_ns {
                    st.record_latencies_ns(std::iter::once(partita_os::clock::unix_ns() - ts));
                }
                if frame.kind == SampleKind::DisposeUnregister {
                    let _ = writer.forward_with_key_hash(frame.cdr, WriteKind::Unregister, frame.source_timestamp_ns, key_hash);
                }
            }
            Err(e) => {
                st.errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: LOG, route = label, "refused by DDS: {e}");
            }
        }
    }
}
