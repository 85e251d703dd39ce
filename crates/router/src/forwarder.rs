//! The forwarder: one routed topic in one direction of one route. Its reader on the source side hands each
//! sample, on Cyclone's delivery thread, to its writer on the destination side, after the checks that keep the
//! router from looping (router writers' samples are dropped), from forwarding a sample twice (`owners.rs`) and
//! from flooding the far side (`limit.rs`). Also here: where the reader and writer live and which QoS they take
//! from the endpoint that asked for the route.
use crate::batch::{Batch, Batching, Flusher};
use crate::config::{DurabilityOverride, ReliabilityOverride, TopicOverride};
use crate::limit::{Limiter, Verdict};
use crate::owners::Sources;
use crate::stats::ForwardStats;
use partita_dds::qos::{DataRepresentation, Durability, IgnoreLocal, Reliability};
use partita_dds::{DiscoveredEndpoint, GuidPrefix, Participant, Qos, RawTopic, RawWriter, TopicDescriptor};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tracing::{debug, error, warn};

/// Target of the forwarders' events.
const LOG: &str = "partita::router::forwarder";

/// How often a forwarder says that the far side does not keep up, at most.
const BACKPRESSURE_WARNING_EVERY: Duration = Duration::from_secs(5);

/// The longest a new route's writer waits for the readers it is for before its reader is made.
pub(crate) const MATCH_WAIT: Duration = Duration::from_secs(2);

/// What one forwarder routes: a topic with one type and one set of partitions, in one direction of one route.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ForwardKey {
    pub route: usize,
    pub from: usize,
    pub to: usize,
    pub topic: String,
    pub type_name: String,
    pub partitions: Vec<String>,
    /// GUID prefix of the participant owning the endpoint that triggered the route: with participant
    /// mirroring, the router's endpoint on the other side lives in that participant's proxy. Without
    /// mirroring, all zeros.
    pub owner: GuidPrefix,
}

impl ForwardKey {
    /// The key of the topic and direction whatever the owner: the forwarders of one group (`owners.rs`).
    pub(crate) fn unowned(&self) -> ForwardKey {
        ForwardKey { owner: GuidPrefix::default(), ..self.clone() }
    }
}

/// One routed topic in one direction: a listening reader on the source side whose callback, on Cyclone's
/// delivery thread, re-publishes each sample through the writer on the destination side (no hand-off to a
/// thread of the router's own; under a flood the writer batches, see `batch.rs`). Dropping it deletes the
/// reader, waiting for a running callback, then the writer, sending what it still holds.
pub(crate) struct Forwarder {
    pub(crate) stats: Arc<ForwardStats>,
    /// Created for a writer on the source side (not for a reader on the destination side).
    pub(crate) writer_owned: bool,
    /// What the route table gave it: a reload keeps it only while the new table gives the same.
    pub(crate) settings: Settings,
    reader: partita_dds::ListeningReader,
    /// With applications in the router's process: its writer among the process's router writers. Last: dropped
    /// after the reader and, with it, the writer.
    _own: Option<OwnWriter>,
}

/// With applications in the routers' process (`RouterConfig::local_applications`): the publication handles of
/// every forwarder writer of every router in this process (Cyclone's handles are unique within a process),
/// known from each writer's creation on, so a router's sample delivered to a router reader of this process is
/// dropped at once, before discovery has told the readers' router about the writer. Each handle maps to its
/// router's tag (`engine::router_tag`): a sample of a router further along a chain (one that cannot reach the
/// reading router's destinations) is forwarded, as between processes.
pub(crate) static OWN_WRITERS: RwLock<BTreeMap<u64, Vec<u8>>> = RwLock::new(BTreeMap::new());

/// Whether `handle` is a router writer of this process whose router also reaches one of `reach`.
fn is_own_writer(handle: u64, reach: &[u32]) -> bool {
    OWN_WRITERS.read().unwrap_or_else(|p| p.into_inner()).get(&handle).is_some_and(|tag| crate::engine::tag_reaches(tag, reach))
}

/// A forwarder's writer in [`OWN_WRITERS`], from its creation to its deletion.
struct OwnWriter(u64);

impl OwnWriter {
    fn register(handle: u64, tag: &[u8]) -> OwnWriter {
        OWN_WRITERS.write().unwrap_or_else(|p| p.into_inner()).insert(handle, tag.to_vec());
        OwnWriter(handle)
    }
}

impl Drop for OwnWriter {
    fn drop(&mut self) {
        OWN_WRITERS.write().unwrap_or_else(|p| p.into_inner()).remove(&self.0);
    }
}

impl Forwarder {
    /// Brings the figures its reader keeps into its statistics: samples lost or rejected, callback panics.
    pub(crate) fn refresh_reader_figures(&self) {
        if let Ok((lost, rejected)) = self.reader.lost_and_rejected() {
            self.stats.dropped_queue.store(lost + rejected, Ordering::Relaxed);
        }
        self.stats.callback_panics.store(self.reader.callback_panics().count, Ordering::Relaxed);
    }
}

/// What a forwarder takes from the route table once made: its topic's override (protection, QoS, batch delay;
/// the pattern that matched left out) and its writer's batching. A reload keeps a running forwarder only when
/// the new table gives it the same; otherwise it is made again.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    topic: TopicOverride,
    batching: Option<Batching>,
}

impl Settings {
    pub(crate) fn new(ov: &TopicOverride, batching: Option<Batching>) -> Settings {
        Settings { topic: TopicOverride { name: String::new(), ..ov.clone() }, batching }
    }
}

/// Where a forwarder's reader and writer live and which partitions they use.
pub(crate) struct Placement {
    /// The participant of the reader, on the source side.
    pub src: Participant,
    /// The participant of the writer, on the destination side.
    pub dst: Participant,
    pub src_partitions: Vec<String>,
    pub dst_partitions: Vec<String>,
}

/// What a new forwarder is made of: the endpoint that asked for its route, where its reader and writer live,
/// the route's protection and batching, and how it tells which samples are its to forward.
pub(crate) struct ForwarderSpec<'a> {
    /// The application endpoint that asked for the route: its topic, type and QoS are the forwarder's.
    pub endpoint: &'a DiscoveredEndpoint,
    /// Asked for by a writer on the source side (else by a reader on the destination side).
    pub writer_owned: bool,
    /// An endpoint of the topic that announced its type (`endpoint` itself, or another of the same topic and
    /// type name, on either side), with the router's participant on its domain, where its owner answers type
    /// look-ups. `None`: no endpoint of the topic announced one.
    pub typed: Option<(&'a DiscoveredEndpoint, &'a Participant)>,
    /// How many application readers on the destination side the route is for: its writer waits (up to
    /// [`MATCH_WAIT`]) until it has matched that many before its reader is made.
    pub far_readers: u32,
    pub placement: Placement,
    /// The route's override for this topic (protection, QoS, batch delay); the default when none matches.
    pub topic: &'a TopicOverride,
    /// The writer's batching; `None`: every sample is sent on its own.
    pub batching: Option<Batching>,
    pub flusher: &'a Flusher,
    /// Whether applications share the router's process (`RouterConfig::local_applications`).
    pub local_applications: bool,
    /// Publication handles of router writers on the source side, as discovery finds them.
    pub router_writers: Arc<RwLock<HashSet<u64>>>,
    /// With participant mirroring: which writers' samples this forwarder forwards (`owners.rs`).
    pub sources: Option<Sources>,
    /// The route as messages name it: `from->to topic`.
    pub label: String,
    /// The USER_DATA of the router's endpoints (`engine::router_tag`).
    pub tag: Vec<u8>,
    /// The domains the router forwards to from the source side.
    pub reach: Vec<u32>,
}

fn reader_and_writer_qos(ep: &DiscoveredEndpoint, ov: &TopicOverride, local_applications: bool, tag: &[u8]) -> (Qos, Qos) {
    let mut base = ep.qos.clone();
    base.user_data = Some(tag.to_vec());
    if let Some(r) = ov.reliability {
        base.reliability = Some(match r {
            ReliabilityOverride::BestEffort => Reliability::BestEffort,
            ReliabilityOverride::Reliable => Reliability::Reliable { max_blocking: Duration::from_millis(100) },
        });
    }
    if let Some(d) = ov.durability {
        base.durability = Some(match d {
            DurabilityOverride::Volatile => Durability::Volatile,
            DurabilityOverride::TransientLocal => Durability::TransientLocal,
        });
    }
    // Only Cyclone announces an endpoint's history in discovery (the standard discovery data has no history);
    // for any other implementation Cyclone fills in its default, keep-last 1, which would let the router's
    // reader drop samples of an instance that arrive together (a durable history, a burst) before its callback
    // took them. Keep them all: the reader hands each on at once, and the writer keeps only what is not yet
    // acknowledged.
    if ep.participant_key.prefix().vendor() != partita_dds::guid::CYCLONE_VENDOR && ov.history.is_none() {
        base.history = Some(partita_dds::qos::History::KeepAll);
    }
    let mut reader = base.clone();
    // Accept whatever encoding the source writer uses; the writer re-publishes in the same encoding.
    reader.data_representation = Some(vec![DataRepresentation::Xcdr1, DataRepresentation::Xcdr2]);
    // Samples this router writes on a side are never delivered to its own readers there: with no applications
    // in its process, no writer of the process is (see `RouterConfig::local_applications`).
    reader.ignore_local = Some(if local_applications { IgnoreLocal::Participant } else { IgnoreLocal::Process });
    if let Some(n) = ov.history {
        reader.history = Some(partita_dds::qos::History::KeepLast(n));
    }
    // The source's unregister (or its writer's end) is forwarded as such: the router's writer must not turn
    // it into a dispose, as DDS's default writer does.
    let writer = base.autodispose_unregistered(false);
    (reader, writer)
}

/// A forwarder whose topics and writer exist and whose reader does not yet: its reader is made once the writer
/// has matched the readers the route is for, or [`MATCH_WAIT`] has passed ([`Pending::ready`]), so that what the
/// reader takes at once (a durable history, a writer that writes as soon as it matched) has somewhere to go. The
/// manager keeps polling discovery meanwhile: blocking it would leave other routers' new writers unknown as
/// routers' for that long, and their samples would be forwarded back.
pub(crate) struct Pending {
    since: Instant,
    far_readers: u32,
    writer_owned: bool,
    src_topic: RawTopic,
    reader_qos: Qos,
    batch: Batch<RawWriter>,
    stats: Arc<ForwardStats>,
    limiter: Limiter,
    routers: Arc<RwLock<HashSet<u64>>>,
    sources: Option<Sources>,
    local: bool,
    own: Option<OwnWriter>,
    label: String,
    /// The domains the router forwards to from this forwarder's source side.
    reach: Vec<u32>,
    settings: Settings,
}

impl Pending {
    pub(crate) fn writer_owned(&self) -> bool {
        self.writer_owned
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Whether its writer has matched the readers it waits for, or has waited long enough.
    pub(crate) fn ready(&self) -> bool {
        self.far_readers == 0
            || self.since.elapsed() >= MATCH_WAIT
            || self.batch.writer().matched_readers().map_or(true, |n| n >= self.far_readers)
    }

    /// Makes its reader; from then on the reader's callback forwards.
    pub(crate) fn finish(self) -> partita_dds::Result<Forwarder> {
        let Pending { since, far_readers, writer_owned, src_topic, reader_qos, mut batch, stats, mut limiter, routers, mut sources, local, own, label, reach, settings } = self;
        if far_readers > 0 && since.elapsed() >= MATCH_WAIT && batch.writer().matched_readers().is_ok_and(|n| n < far_readers) {
            debug!(target: LOG, route = %label, "the writer matched fewer than {far_readers} reader(s) within {MATCH_WAIT:?}; routing anyway");
        }
        let st = stats.clone();
        let mut last_backpressure_warning: Option<Instant> = None;
        // Each sample is re-published straight from Cyclone's buffer on the delivery thread, without a copy.
        let reader = partita_dds::ListeningReader::with_publications(&src_topic, &reader_qos, move |bytes, info, matched| {
            let h = info.publication_handle;
            let looped = (local && is_own_writer(h, &reach)) || routers.read().unwrap_or_else(|p| p.into_inner()).contains(&h);
            // Another forwarder of this topic forwards this writer's samples.
            if !looped && sources.as_mut().is_some_and(|s| !s.accepts(h, |h| matched.guid(h))) {
                return;
            }
            st.received.fetch_add(1, Ordering::Relaxed);
            if looped {
                st.suppressed_loop.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if info.valid_data {
                match limiter.judge(info.instance_handle) {
                    Verdict::Pass => {}
                    Verdict::Downsampled => {
                        st.dropped_downsample.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Verdict::RateLimited => {
                        st.dropped_rate.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            }
            #[cfg(test)]
            if tests::fault(&label) {
                panic!("a fault injected into {label}");
            }
            match batch.writer().forward_taken(bytes, &info) {
                Ok(true) => {
                    st.forwarded.fetch_add(1, Ordering::Relaxed);
                    st.record_latencies_ns(std::iter::once(partita_os::clock::unix_ns() - info.source_timestamp_ns));
                    if let Err(e) = batch.written() {
                        st.errors.fetch_add(1, Ordering::Relaxed);
                        error!(target: LOG, route = %label, "sending: {e}");
                    }
                }
                Ok(false) => {}
                // The far readers did not acknowledge enough within the writer's max blocking time: its history,
                // which bounds the router's memory, is full. Dropped, counted, and said once in a while.
                Err(partita_dds::DdsError::Call { code: partita_dds::RETCODE_TIMEOUT, .. }) => {
                    st.dropped_backpressure.fetch_add(1, Ordering::Relaxed);
                    if last_backpressure_warning.is_none_or(|t: Instant| t.elapsed() >= BACKPRESSURE_WARNING_EVERY) {
                        last_backpressure_warning = Some(Instant::now());
                        warn!(target: LOG, route = %label, dropped = st.dropped_backpressure.load(Ordering::Relaxed), "the far side does not keep up: samples dropped (dropped_backpressure)");
                    }
                }
                Err(e) => {
                    st.errors.fetch_add(1, Ordering::Relaxed);
                    error!(target: LOG, route = %label, "forwarding a sample: {e}");
                }
            }
        })?;
        Ok(Forwarder { stats, writer_owned, settings, reader, _own: own })
    }
}

impl Forwarder {
    /// Creates the forwarder's topics and writer; its reader follows ([`Pending`]).
    pub(crate) fn start(spec: ForwarderSpec<'_>) -> partita_dds::Result<Pending> {
        let ForwarderSpec { endpoint: ep, writer_owned, typed, far_readers, placement: at, topic: ov, batching, flusher, local_applications: local, router_writers: routers, sources, label, tag, reach } = spec;
        let (mut rq, mut wq) = reader_and_writer_qos(ep, ov, local, &tag);
        rq.partitions = Some(at.src_partitions.clone());
        wq.partitions = Some(at.dst_partitions.clone());
        let (src_topic, dst_topic) = if let Some((typed, resolver)) = typed {
            let desc = TopicDescriptor::resolve(resolver, typed, Duration::from_secs(2))?;
            (
                RawTopic::with_descriptor(&at.src, &ep.topic_name, &desc, &wq)?,
                RawTopic::with_descriptor(&at.dst, &ep.topic_name, &desc, &wq)?,
            )
        } else if ep.key.keyed_endpoint() == Some(true) {
            // Keyed (its entity kind says so), but no endpoint of the topic announced its type: instances are
            // told apart by the key hash the wire carries (partita_dds's keyed_by_hash).
            debug!(target: LOG, route = %label, "topic {} ({}): no type information anywhere; routing it keyed by key hash", ep.topic_name, ep.type_name);
            (
                RawTopic::keyed_by_hash(&at.src, &ep.topic_name, &ep.type_name)?,
                RawTopic::keyed_by_hash(&at.dst, &ep.topic_name, &ep.type_name)?,
            )
        } else {
            (
                RawTopic::keyless(&at.src, &ep.topic_name, &ep.type_name)?,
                RawTopic::keyless(&at.dst, &ep.topic_name, &ep.type_name)?,
            )
        };
        let stats = Arc::new(ForwardStats::default());
        let writer = RawWriter::new(&dst_topic, &wq.writer_batching(batching.is_some()))?;
        // With applications in the process, its samples can reach the process's router readers: known as a
        // router's before its first sample (discovery, which also finds it, may come later). Otherwise those
        // readers ignore the process.
        let own = if local { Some(OwnWriter::register(writer.instance_handle()?, &tag)) } else { None };
        let settings = Settings::new(ov, batching);
        let batch = flusher.batch(writer, batching, stats.clone());
        Ok(Pending {
            since: Instant::now(),
            far_readers,
            writer_owned,
            src_topic,
            reader_qos: rq,
            batch,
            stats,
            limiter: Limiter::new(ov),
            routers,
            sources,
            local,
            own,
            label,
            reach,
            settings,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{Router, RouterConfig};
    use partita_dds::{qos::History, DomainConfig, Participant, Qos, Reader, Topic, TopicType, Writer};
    use serde::{Deserialize, Serialize};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// The topic whose every sample makes its forwarders' callbacks panic: a fault only this crate's tests inject.
    static FAULTY_TOPIC: Mutex<Option<String>> = Mutex::new(None);

    pub(super) fn fault(label: &str) -> bool {
        FAULTY_TOPIC.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_some_and(|t| label.ends_with(&format!(" {t}")))
    }

    #[derive(Debug, Clone, Serialize, Deserialize)]
    struct Tick {
        n: u32,
    }

    impl TopicType for Tick {
        fn type_name() -> &'static str {
            "partita::test::Tick"
        }
    }

    fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
        let end = Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(Instant::now() < end, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_panic_in_a_forwarders_callback_is_counted_in_its_statistics_and_forwarding_goes_on() {
        let (a, b) = ((std::process::id() % 9) * 25 + 23, (std::process::id() % 9) * 25 + 24);
        let text = format!("[[side]]\nname = \"a\"\ndomain = {a}\n[[side]]\nname = \"b\"\ndomain = {b}\n[[route]]\nfrom = \"a\"\nto = \"b\"\n");
        let mut config = RouterConfig::parse(&text, std::path::Path::new("test.toml")).unwrap();
        config.local_applications = true;
        *FAULTY_TOPIC.lock().unwrap() = Some("faulty".into());
        let router = Router::start(config).unwrap();
        let qos = Qos::reliable().history(History::KeepAll);
        let pa = Participant::new(&DomainConfig::loopback(a)).unwrap();
        let pb = Participant::new(&DomainConfig::loopback(b)).unwrap();
        let w = Writer::new(&Topic::<Tick>::new(&pa, "faulty", &qos).unwrap(), &qos).unwrap();
        let r = Reader::new(&Topic::<Tick>::new(&pb, "faulty", &qos).unwrap(), &qos).unwrap();
        wait_until("the route", || !router.active().is_empty() && w.matched_readers().unwrap() > 0 && r.matched_writers().unwrap() > 0);
        std::thread::sleep(Duration::from_millis(300));
        let row = || router.stats().into_iter().find(|s| s.topic == "faulty").expect("a statistics row for the topic");

        for n in 0..3 {
            w.write(&Tick { n }).unwrap();
        }
        wait_until("three panics in the statistics", || row().callback_panics == 3);
        let faulty = row();
        assert_eq!((faulty.received, faulty.forwarded), (3, 0), "{faulty:?}");
        assert!(
            crate::stats::table(&router.stats()).contains("callback panics (samples dropped, see the log): a->b faulty (3)"),
            "{}",
            crate::stats::table(&router.stats())
        );
        std::thread::sleep(Duration::from_millis(200));
        assert!(r.take().unwrap().is_empty(), "a sample whose forwarding panicked does not cross");

        // The forwarder's reader goes on: once the fault is gone, samples cross again.
        *FAULTY_TOPIC.lock().unwrap() = None;
        for n in 3..6 {
            w.write(&Tick { n }).unwrap();
        }
        let mut got = Vec::new();
        let end = Instant::now() + Duration::from_secs(10);
        while got.len() < 3 && Instant::now() < end {
            got.extend(r.take_wait(Duration::from_millis(100)).unwrap().into_iter().filter_map(|s| s.value).map(|t| t.n));
        }
        assert_eq!(got, [3, 4, 5]);
        let after = row();
        assert_eq!((after.forwarded, after.callback_panics), (3, 3), "{after:?}");
    }
}
