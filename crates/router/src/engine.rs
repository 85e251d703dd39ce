//! The routing engine: one participant per side, a discovery manager that keeps the set of routed topics in
//! step with the writers and readers it sees, one forwarder (a listening reader and a writer) per routed topic
//! and direction, and the flusher thread that sends what the forwarders' batches leave waiting.
use crate::batch::Flusher;
use crate::owners::{Groups, Sources};
use crate::config::{DurabilityOverride, ReliabilityOverride, RouteConfig, RouterConfig, SideConfig, TopicOverride, Trigger};
use crate::pattern::matches;
use crate::stats::{ForwardStats, RouteStats};
use partita_dds::qos::{DataRepresentation, Durability, IgnoreLocal, Reliability};
use partita_dds::{
    DiscoveredEndpoint, DiscoveredParticipant, DomainConfig, EndpointKind, EndpointWatcher, Guid, GuidPrefix, Participant,
    ParticipantWatcher, Qos,
    RawTopic, RawWriter, TopicDescriptor, Writer,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// USER_DATA every router endpoint announces, so routers never take each other's endpoints for applications
/// and never forward samples another router wrote (no loops, also with several routers in a ring).
pub const ROUTER_TAG: &[u8] = b"partita-router";

/// Engine failures.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    #[error("side {side}: {source}")]
    Side { side: String, source: partita_dds::DdsError },
    #[error("statistics topic: {0}")]
    Stats(partita_dds::DdsError),
}

/// One end of the router: a participant on a domain, watching its writers and readers.
struct Side {
    name: String,
    config: DomainConfig,
    participant: Participant,
    /// GUID prefixes of this router's participants on this side: the main one and the proxies.
    router_prefixes: HashSet<GuidPrefix>,
    participants: ParticipantWatcher,
    /// Application participants (not any router's), by GUID prefix.
    app_participants: HashMap<GuidPrefix, DiscoveredParticipant>,
    publications: EndpointWatcher,
    subscriptions: EndpointWatcher,
    writers: HashMap<Guid, DiscoveredEndpoint>,
    readers: HashMap<Guid, DiscoveredEndpoint>,
    /// Publication handles of router writers on this side as discovery finds them (any router's; this
    /// process's own are in [`OWN_WRITERS`] from their creation): their samples are never forwarded.
    router_writers: Arc<RwLock<HashSet<u64>>>,
}

fn is_router(ep: &DiscoveredEndpoint) -> bool {
    ep.qos.user_data.as_deref() == Some(ROUTER_TAG)
}

/// Cyclone's built-in topic readers (DCPSPublication & co.) show up in discovery; they are never routed.
fn is_builtin(ep: &DiscoveredEndpoint) -> bool {
    ep.qos.partitions.as_ref().is_some_and(|p| p.iter().any(|n| n == "__BUILT-IN PARTITION__"))
}

/// Property every participant of a router announces (main and proxies), so routers never mirror each other.
const ROUTER_PROPERTY: &str = "partita.router";

fn router_qos(name: &str) -> Qos {
    Qos::new().property(ROUTER_PROPERTY, name)
}

impl Side {
    fn open(cfg: &SideConfig, dc: DomainConfig, router: &str) -> Result<Side, RouterError> {
        let e = |source| RouterError::Side { side: cfg.name.clone(), source };
        let participant = Participant::with_qos(&dc, &router_qos(router)).map_err(e)?;
        let prefix = participant.guid().map_err(e)?.prefix();
        Ok(Side {
            name: cfg.name.clone(),
            config: dc,
            participants: ParticipantWatcher::new(&participant, &[ROUTER_PROPERTY]).map_err(e)?,
            app_participants: HashMap::new(),
            publications: EndpointWatcher::new(&participant, EndpointKind::Publication).map_err(e)?,
            subscriptions: EndpointWatcher::new(&participant, EndpointKind::Subscription).map_err(e)?,
            participant,
            router_prefixes: [prefix].into_iter().collect(),
            writers: HashMap::new(),
            readers: HashMap::new(),
            router_writers: Arc::new(RwLock::new(HashSet::new())),
        })
    }

    /// Applies discovery news; true if anything changed.
    fn poll(&mut self) -> bool {
        let mut changed = false;
        match self.participants.take() {
            Ok(news) => {
                for p in news {
                    changed = true;
                    let prefix = p.key.prefix();
                    if !p.alive {
                        self.app_participants.remove(&prefix);
                    } else if p.properties.is_empty() && !self.router_prefixes.contains(&prefix) {
                        self.app_participants.insert(prefix, p);
                    }
                }
            }
            Err(e) => eprintln!("router: side {}: participant discovery: {e}", self.name),
        }
        for (watcher, map) in [(&self.publications, &mut self.writers), (&self.subscriptions, &mut self.readers)] {
            let news = match watcher.take() {
                Ok(n) => n,
                Err(e) => {
                    eprintln!("router: side {}: discovery: {e}", self.name);
                    continue;
                }
            };
            for ep in news {
                changed = true;
                if std::env::var_os("PARTITA_ROUTER_DEBUG").is_some() {
                    eprintln!("router: side {}: {:?} {} {} alive={} router={} typeinfo={} parts={:?}", self.name, ep.kind, ep.topic_name, ep.type_name, ep.alive, is_router(&ep), ep.has_type_info(), ep.qos.partitions);
                }
                if ep.alive {
                    if ep.kind == EndpointKind::Publication && is_router(&ep) {
                        self.router_writers.write().unwrap_or_else(|p| p.into_inner()).insert(ep.instance_handle);
                    }
                    map.insert(ep.key, ep);
                } else if let Some(old) = map.remove(&ep.key) {
                    if old.kind == EndpointKind::Publication {
                        self.router_writers.write().unwrap_or_else(|p| p.into_inner()).remove(&old.instance_handle);
                    }
                }
            }
        }
        changed
    }

    /// Application endpoints: alive, not a router's, not this router's own participant.
    fn applications<'a>(&'a self, map: &'a HashMap<Guid, DiscoveredEndpoint>) -> impl Iterator<Item = &'a DiscoveredEndpoint> {
        map.values().filter(move |e| e.alive && !is_router(e) && !self.router_prefixes.contains(&e.key.prefix()) && !is_builtin(e))
    }
}

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
    fn unowned(&self) -> ForwardKey {
        ForwardKey { owner: GuidPrefix::default(), ..self.clone() }
    }
}

/// One routed topic in one direction: a listening reader on the source side whose callback, on Cyclone's
/// delivery thread, re-publishes each sample through the writer on the destination side (no hand-off to a
/// thread of the router's own; under a flood the writer batches, see `batch.rs`). Dropping it deletes the
/// reader, waiting for a running callback, then the writer, sending what it still holds.
struct Forwarder {
    stats: Arc<ForwardStats>,
    /// Created for a writer on the source side (not for a reader on the destination side).
    writer_owned: bool,
    reader: partita_dds::ListeningReader,
    /// With applications in the router's process: its writer among the process's router writers. Last: dropped
    /// after the reader and, with it, the writer.
    _own: Option<OwnWriter>,
}

/// With applications in the routers' process (`RouterConfig::local_applications`): the publication handles of
/// every forwarder writer of every router in this process (Cyclone's handles are unique within a process),
/// known from each writer's creation on, so a router's sample delivered to a router reader of this process is
/// dropped at once, before discovery has told the readers' router about the writer.
static OWN_WRITERS: RwLock<BTreeSet<u64>> = RwLock::new(BTreeSet::new());

fn is_own_writer(handle: u64) -> bool {
    OWN_WRITERS.read().unwrap_or_else(|p| p.into_inner()).contains(&handle)
}

/// A forwarder's writer in [`OWN_WRITERS`], from its creation to its deletion.
struct OwnWriter(u64);

impl OwnWriter {
    fn register(handle: u64) -> OwnWriter {
        OWN_WRITERS.write().unwrap_or_else(|p| p.into_inner()).insert(handle);
        OwnWriter(handle)
    }
}

impl Drop for OwnWriter {
    fn drop(&mut self) {
        OWN_WRITERS.write().unwrap_or_else(|p| p.into_inner()).remove(&self.0);
    }
}

impl Forwarder {
    fn refresh_queue_drops(&self) {
        if let Ok((lost, rejected)) = self.reader.lost_and_rejected() {
            self.stats.dropped_queue.store(lost + rejected, Ordering::Relaxed);
        }
    }
}

struct Shared {
    name: String,
    side_names: Vec<String>,
    forwarders: Mutex<BTreeMap<ForwardKey, Forwarder>>,
    refused_topics: Mutex<HashSet<String>>,
    /// Final figures of routes that ended, newest last (bounded).
    retired: Mutex<Vec<RouteStats>>,
}

const RETIRED_KEPT: usize = 256;

/// A running router. Dropping it (or calling [`Router::stop`]) stops every thread and deletes every entity.
pub struct Router {
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    manager: Option<JoinHandle<()>>,
    stats_thread: Option<JoinHandle<()>>,
    /// Last: forwarders still hand batches to it until they are gone.
    _flusher: Arc<Flusher>,
}

impl Router {
    /// Opens every side and starts discovery and forwarding.
    pub fn start(config: impl Into<RouterConfig>) -> Result<Router, RouterError> {
        let config = config.into();
        let sides: Vec<Side> = config.sides.iter().map(|c| Side::open(c, config.domain_of(c), &config.name)).collect::<Result<_, _>>()?;
        let shared = Arc::new(Shared {
            name: config.name.clone(),
            side_names: sides.iter().map(|s| s.name.clone()).collect(),
            forwarders: Mutex::new(BTreeMap::new()),
            refused_topics: Mutex::new(HashSet::new()),
            retired: Mutex::new(Vec::new()),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let flusher = Arc::new(Flusher::start());
        let stats_idx = config
            .stats_side
            .as_ref()
            .and_then(|n| sides.iter().position(|s| &s.name == n))
            .unwrap_or(0);
        let stats_writer = {
            let p = &sides[stats_idx].participant;
            let q = Qos::reliable().keep_last(1).transient_local().user_data(ROUTER_TAG);
            let t = partita_dds::Topic::<RouteStats>::new(p, "partita/router/stats", &q).map_err(RouterError::Stats)?;
            Writer::new(&t, &q).map_err(RouterError::Stats)?
        };
        let period = config.stats_period();
        let stats_thread = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::Builder::new()
                .name("router-stats".into())
                .spawn(move || {
                    while sleep_unless_stopped(&stop, period) {
                        for row in snapshot(&shared) {
                            if let Err(e) = stats_writer.write(&row) {
                                eprintln!("router: publishing statistics: {e}");
                            }
                        }
                    }
                })
                .expect("spawn statistics thread")
        };
        let manager = {
            let (shared, stop, flusher) = (shared.clone(), stop.clone(), flusher.clone());
            std::thread::Builder::new()
                .name("router-discovery".into())
                .spawn(move || manage(config, sides, shared, stop, &flusher))
                .expect("spawn discovery thread")
        };
        Ok(Router { shared, stop, manager: Some(manager), stats_thread: Some(stats_thread), _flusher: flusher })
    }

    /// Current statistics of every routed topic, then the final figures of routes that have ended.
    pub fn stats(&self) -> Vec<RouteStats> {
        let mut rows = snapshot(&self.shared);
        rows.extend(self.shared.retired.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned());
        rows
    }

    /// Topics that matched a route but were refused because `max_topics` was reached.
    pub fn refused_topics(&self) -> Vec<String> {
        let mut v: Vec<String> = self.shared.refused_topics.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
        v.sort();
        v
    }

    /// The keys of the routes currently forwarding.
    pub fn active(&self) -> Vec<ForwardKey> {
        self.shared.forwarders.lock().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect()
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.manager.take() {
            let _ = t.join();
        }
        if let Some(t) = self.stats_thread.take() {
            let _ = t.join();
        }
        self.shared.forwarders.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn sleep_unless_stopped(stop: &AtomicBool, d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20).min(d));
    }
    !stop.load(Ordering::Relaxed)
}

fn snapshot(shared: &Shared) -> Vec<RouteStats> {
    let f = shared.forwarders.lock().unwrap_or_else(|p| p.into_inner());
    f.iter()
        .map(|(k, fw)| {
            let route = format!("{}->{}", shared.side_names[k.from], shared.side_names[k.to]);
            fw.refresh_queue_drops();
            fw.stats.snapshot(&shared.name, &route, &k.topic, &k.type_name)
        })
        .collect()
}

fn allowed(route: &RouteConfig, ep: &DiscoveredEndpoint) -> bool {
    let hit = |p: &String| match p.strip_prefix("type:") {
        Some(tp) => matches(tp, &ep.type_name),
        None => matches(p, &ep.topic_name),
    };
    if route.block.iter().any(hit) || !route.allow.iter().any(hit) {
        return false;
    }
    let parts = ep.qos.partitions.clone().unwrap_or_default();
    let parts = if parts.is_empty() { vec![String::new()] } else { parts };
    parts.iter().any(|p| route.partitions.iter().any(|pat| matches(pat, p)))
}

fn directions(routes: &[RouteConfig], sides: &[Side]) -> Vec<(usize, usize, usize)> {
    let idx = |n: &str| sides.iter().position(|s| s.name == n).expect("validated side name");
    let mut d = Vec::new();
    for (i, r) in routes.iter().enumerate() {
        let (a, b) = (idx(&r.from), idx(&r.to));
        d.push((i, a, b));
        if r.both_ways {
            d.push((i, b, a));
        }
    }
    d
}

fn manage(config: RouterConfig, mut sides: Vec<Side>, shared: Arc<Shared>, stop: Arc<AtomicBool>, flusher: &Flusher) {
    let dirs = directions(&config.routes, &sides);
    let mut failed: HashMap<ForwardKey, Instant> = HashMap::new();
    let mut proxies = Proxies::default();
    // With mirroring, the forwarders of one topic and direction, by key without the owner.
    let mut groups: Groups<ForwardKey> = Groups::default();
    let mut dirty = true;
    while !stop.load(Ordering::Relaxed) {
        for s in sides.iter_mut() {
            dirty |= s.poll();
        }
        if !dirty {
            // Wait on the first side's publications for news, briefly; the other sides are polled next round.
            let _ = sides[0].publications.wait(Duration::from_millis(20));
            continue;
        }
        dirty = false;
        // The wanted set: every (route, direction, topic, type, partitions) with an application writer on the
        // source side and, unless the trigger says otherwise, an application reader on the destination side.
        // Each wanted route keeps the endpoint that asked for it and the side it was discovered on (where its
        // type can be resolved).
        let mut wanted: BTreeMap<ForwardKey, (DiscoveredEndpoint, usize)> = BTreeMap::new();
        for &(ri, from, to) in &dirs {
            let route = &config.routes[ri];
            let mut want = |ep: &DiscoveredEndpoint, seen_on: usize| {
                let mut partitions = ep.qos.partitions.clone().unwrap_or_default();
                partitions.sort();
                let key = ForwardKey {
                    route: ri,
                    from,
                    to,
                    topic: ep.topic_name.clone(),
                    type_name: ep.type_name.clone(),
                    partitions,
                    owner: if config.mirror_participants { ep.key.prefix() } else { GuidPrefix::default() },
                };
                wanted.entry(key).or_insert_with(|| (ep.clone(), seen_on));
            };
            for w in sides[from].applications(&sides[from].writers) {
                if !allowed(route, w) {
                    continue;
                }
                let enough = matches!(route.trigger, Trigger::Writer | Trigger::Either)
                    || (route.trigger == Trigger::WriterAndReader
                        && sides[to].applications(&sides[to].readers).any(|r| r.topic_name == w.topic_name && r.type_name == w.type_name));
                if enough {
                    want(w, from);
                }
            }
            if matches!(route.trigger, Trigger::Reader | Trigger::Either) {
                for r in sides[to].applications(&sides[to].readers) {
                    if allowed(route, r) {
                        want(r, to);
                    }
                }
            }
        }
        if std::env::var_os("PARTITA_ROUTER_DEBUG").is_some() {
            for (k, (_, seen)) in &wanted {
                eprintln!("router: wanted {k:?} (seen on {seen})");
            }
        }
        let mut fw = shared.forwarders.lock().unwrap_or_else(|p| p.into_inner());
        let ended: Vec<ForwardKey> = fw.keys().filter(|k| !wanted.contains_key(*k)).cloned().collect();
        for k in ended {
            if let Some(f) = fw.remove(&k) {
                let route = format!("{}->{}", shared.side_names[k.from], shared.side_names[k.to]);
                f.refresh_queue_drops();
                let mut row = f.stats.snapshot(&shared.name, &route, &k.topic, &k.type_name);
                row.active = false;
                drop(f); // deletes the reader, then the writer
                let mut retired = shared.retired.lock().unwrap_or_else(|p| p.into_inner());
                retired.push(row);
                if retired.len() > RETIRED_KEPT {
                    retired.remove(0);
                }
            }
        }
        proxies.prune(&mut sides);
        let topics_in_use: HashSet<String> = fw.keys().map(|k| k.topic.clone()).collect();
        let mut count = topics_in_use.len();
        let mut refused = shared.refused_topics.lock().unwrap_or_else(|p| p.into_inner());
        refused.clear();
        let mut new_topics: HashSet<String> = HashSet::new();
        for (key, (ep, seen_on)) in wanted {
            if fw.contains_key(&key) {
                continue;
            }
            if !topics_in_use.contains(&key.topic) && !new_topics.contains(&key.topic) {
                if count >= config.max_topics {
                    refused.insert(key.topic.clone());
                    continue;
                }
                count += 1;
                new_topics.insert(key.topic.clone());
            }
            if failed.get(&key).is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
                dirty = true; // try again soon
                continue;
            }
            let route = &config.routes[key.route];
            let ov = route.topics.iter().find(|t| matches(&t.name, &key.topic)).cloned().unwrap_or_default();
            // The router's endpoint on the side where the triggering endpoint lives stays on the router's main
            // participant with the endpoint's partitions; the one on the other side stands for the endpoint's
            // participant (its proxy, when mirroring) with partitions translated to that side.
            let other = if seen_on == key.from { key.to } else { key.from };
            let parts = ep.qos.partitions.clone().unwrap_or_default();
            let (host, translated) = if config.mirror_participants {
                let host = proxies.get(&mut sides, other, seen_on, key.owner, &config.name);
                let translated: Vec<String> = parts.iter().map(|p| proxies.translate(&mut sides, p, seen_on, other, &config.name)).collect();
                (host, translated)
            } else {
                (None, parts.clone())
            };
            let host = host.unwrap_or_else(|| sides[other].participant.clone());
            let (src_p, dst_p, src_parts, dst_parts) = if seen_on == key.from {
                (sides[key.from].participant.clone(), host, parts, translated)
            } else {
                (host, sides[key.to].participant.clone(), translated, parts)
            };
            let placement = Placement { src: src_p, dst: dst_p, src_partitions: src_parts, dst_partitions: dst_parts };
            // Joins its group before its reader exists, so its first samples (a durable history) are judged right.
            let sources = config.mirror_participants.then(|| {
                let writer_owned = seen_on == key.from;
                Sources::new(groups.join(&key.unowned(), key.owner, writer_owned), key.owner, writer_owned)
            });
            match Forwarder::start(&sides, seen_on, &ep, &ov, &key, &shared.side_names, placement, flusher, &config, sources) {
                Ok(f) => {
                    failed.remove(&key);
                    fw.insert(key, f);
                }
                Err(e) => {
                    eprintln!("router: cannot route topic {} ({}): {e}", key.topic, key.type_name);
                    failed.insert(key, Instant::now());
                    dirty = true;
                }
            }
        }
        if config.mirror_participants {
            groups.update(fw.iter().map(|(k, f)| (k.unowned(), k.owner, f.writer_owned)));
        }
    }
}

/// Proxy participants: for an application participant on one side, a participant of the router's on another
/// side announcing the same USER_DATA, hosting the router's endpoints that stand for it there. Programs that
/// recognise their peers by participant (Cyclone's ddsperf) then see their peer across the router.
#[derive(Default)]
struct Proxies {
    /// (side, origin prefix) → the proxy participant on that side and its prefix.
    by_origin: HashMap<(usize, GuidPrefix), (Participant, GuidPrefix)>,
    /// (side, proxy prefix) → (origin side, origin prefix).
    origin_of: HashMap<(usize, GuidPrefix), (usize, GuidPrefix)>,
}

impl Proxies {
    /// The proxy on `side` of the application participant `origin` of `origin_side` (created on first use);
    /// `None` if that participant is not (or no longer) known.
    fn get(&mut self, sides: &mut [Side], side: usize, origin_side: usize, origin: GuidPrefix, router: &str) -> Option<Participant> {
        if let Some((p, _)) = self.by_origin.get(&(side, origin)) {
            return Some(p.clone());
        }
        let user_data = sides[origin_side].app_participants.get(&origin)?.user_data.clone();
        let mut q = router_qos(router);
        q.user_data = user_data;
        let p = match Participant::with_qos(&sides[side].config, &q) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("router: side {}: proxy participant: {e}", sides[side].name);
                return None;
            }
        };
        let prefix = p.guid().ok()?.prefix();
        sides[side].router_prefixes.insert(prefix);
        self.origin_of.insert((side, prefix), (origin_side, origin));
        self.by_origin.insert((side, origin), (p.clone(), prefix));
        Some(p)
    }

    /// A partition name as seen on `from`, as it must read on `to`: names that spell a participant's GUID are
    /// mapped between application participants and their proxies; others are kept.
    fn translate(&mut self, sides: &mut [Side], name: &str, from: usize, to: usize, router: &str) -> String {
        let Ok(prefix) = name.parse::<GuidPrefix>() else { return name.to_string() };
        if let Some(&(origin_side, origin)) = self.origin_of.get(&(from, prefix)) {
            if origin_side == to {
                return origin.to_string();
            }
        }
        if sides[from].app_participants.contains_key(&prefix) && self.get(sides, to, from, prefix, router).is_some() {
            let proxy = self.by_origin[&(to, prefix)].1;
            return proxy.to_string();
        }
        name.to_string()
    }

    /// Drops the proxies of participants that have gone.
    fn prune(&mut self, sides: &mut [Side]) {
        let gone: Vec<(usize, GuidPrefix)> = self
            .origin_of
            .iter()
            .filter(|(_, (os, o))| !sides[*os].app_participants.contains_key(o))
            .map(|(k, _)| *k)
            .collect();
        for (side, proxy) in gone {
            if let Some((os, o)) = self.origin_of.remove(&(side, proxy)) {
                let _ = os;
                self.by_origin.remove(&(side, o));
                sides[side].router_prefixes.remove(&proxy);
            }
        }
    }
}

/// Where a forwarder's reader and writer live and which partitions they use.
struct Placement {
    src: Participant,
    dst: Participant,
    src_partitions: Vec<String>,
    dst_partitions: Vec<String>,
}

fn reader_and_writer_qos(ep: &DiscoveredEndpoint, ov: &TopicOverride, local_applications: bool) -> (Qos, Qos) {
    let mut base = ep.qos.clone();
    base.user_data = Some(ROUTER_TAG.to_vec());
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
    let mut reader = base.clone();
    // Accept whatever encoding the source writer uses; the writer re-publishes in the same encoding.
    reader.data_representation = Some(vec![DataRepresentation::Xcdr1, DataRepresentation::Xcdr2]);
    // Samples this router writes on a side are never delivered to its own readers there: with no applications
    // in its process, no writer of the process is (see `RouterConfig::local_applications`).
    reader.ignore_local = Some(if local_applications { IgnoreLocal::Participant } else { IgnoreLocal::Process });
    if let Some(n) = ov.history {
        reader.history = Some(partita_dds::qos::History::KeepLast(n));
    }
    (reader, base)
}

impl Forwarder {
    #[allow(clippy::too_many_arguments)]
    fn start(
        sides: &[Side],
        seen_on: usize,
        ep: &DiscoveredEndpoint,
        ov: &TopicOverride,
        key: &ForwardKey,
        names: &[String],
        at: Placement,
        flusher: &Flusher,
        config: &RouterConfig,
        mut sources: Option<Sources>,
    ) -> partita_dds::Result<Forwarder> {
        let src = &sides[key.from];
        let (mut rq, mut wq) = reader_and_writer_qos(ep, ov, config.local_applications);
        let batching = config.batching(ov);
        rq.partitions = Some(at.src_partitions.clone());
        wq.partitions = Some(at.dst_partitions.clone());
        let (src_topic, dst_topic) = if ep.has_type_info() {
            // The type is known where the endpoint was discovered (its owner answers type look-ups there).
            let desc = TopicDescriptor::resolve(&sides[seen_on].participant, ep, Duration::from_secs(2))?;
            (
                RawTopic::with_descriptor(&at.src, &ep.topic_name, &desc, &wq)?,
                RawTopic::with_descriptor(&at.dst, &ep.topic_name, &desc, &wq)?,
            )
        } else {
            // Without type information the key layout is unknown: forwarded as keyless, every sample is kept but
            // instances of a keyed type collapse into one on the far side.
            eprintln!("router: topic {} ({}) announced no type information; forwarding it as keyless", ep.topic_name, ep.type_name);
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
        let local = config.local_applications;
        let own = if local { Some(OwnWriter::register(writer.instance_handle()?)) } else { None };
        let mut batch = flusher.batch(writer, batching, stats.clone());
        let label = format!("{}->{} {}", names[key.from], names[key.to], key.topic);
        let mut limiter = Limiter::new(ov);
        let routers = src.router_writers.clone();
        let st = stats.clone();
        // Each sample is re-published straight from Cyclone's buffer on the delivery thread, without a copy.
        let reader = partita_dds::ListeningReader::with_publications(&src_topic, &rq, move |bytes, info, matched| {
            let h = info.publication_handle;
            let looped = (local && is_own_writer(h)) || routers.read().unwrap_or_else(|p| p.into_inner()).contains(&h);
            // Another forwarder of this topic forwards this writer's samples.
            if !looped && sources.as_mut().is_some_and(|s| !s.accepts(h, |h| matched.guid(h))) {
                return;
            }
            st.received.fetch_add(1, Ordering::Relaxed);
            if looped {
                st.suppressed_loop.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if info.valid_data && !limiter.admit(info.instance_handle) {
                st.dropped_rate.fetch_add(1, Ordering::Relaxed);
                return;
            }
            match batch.writer().forward_taken(bytes, &info) {
                Ok(true) => {
                    st.forwarded.fetch_add(1, Ordering::Relaxed);
                    st.record_latencies_ns(std::iter::once(now_ns() - info.source_timestamp_ns));
                    if let Err(e) = batch.written() {
                        st.errors.fetch_add(1, Ordering::Relaxed);
                        eprintln!("router: {label}: sending: {e}");
                    }
                }
                Ok(false) => {}
                Err(e) => {
                    st.errors.fetch_add(1, Ordering::Relaxed);
                    eprintln!("router: {label}: {e}");
                }
            }
        })?;
        Ok(Forwarder { stats, writer_owned: seen_on == key.from, reader, _own: own })
    }
}

/// A token bucket: `rate` per second, bursts of a tenth of a second (at least one sample).
#[derive(Debug, Clone)]
struct Bucket {
    rate: f64,
    tokens: f64,
    burst: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: f64, now: Instant) -> Self {
        let burst = (rate / 10.0).max(1.0);
        Bucket { rate, tokens: burst, burst, last: now }
    }

    fn take(&mut self, now: Instant) -> bool {
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.rate).min(self.burst);
        self.last = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// Instances with a bucket of their own at most; further instances share one bucket, so the limiter's memory
/// stays bounded whatever the number of keys.
const MAX_INSTANCE_BUCKETS: usize = 4096;

/// Rate limits (token buckets per topic and per instance) and downsampling of valid data samples; life-cycle
/// notifications always pass.
struct Limiter {
    topic: Option<Bucket>,
    /// Per instance: a bucket each (at most [`MAX_INSTANCE_BUCKETS`]), then this one shared by the rest; its
    /// rate is the per-instance rate.
    shared: Option<Bucket>,
    instances: HashMap<u64, Bucket>,
    downsample: u32,
    seen: u64,
}

impl Limiter {
    fn new(ov: &TopicOverride) -> Self {
        let now = Instant::now();
        Limiter {
            topic: ov.max_rate.map(|r| Bucket::new(r, now)),
            shared: ov.max_rate_per_instance.map(|r| Bucket::new(r, now)),
            instances: HashMap::new(),
            downsample: ov.downsample.unwrap_or(1).max(1),
            seen: 0,
        }
    }

    fn admit(&mut self, instance: u64) -> bool {
        self.seen += 1;
        if !(self.seen - 1).is_multiple_of(self.downsample as u64) {
            return false;
        }
        if self.topic.is_none() && self.shared.is_none() {
            return true;
        }
        let now = Instant::now();
        if let Some(shared) = &mut self.shared {
            let full = self.instances.len() >= MAX_INSTANCE_BUCKETS;
            let bucket = match self.instances.get_mut(&instance) {
                Some(b) => b,
                None if !full => self.instances.entry(instance).or_insert_with(|| Bucket::new(shared.rate, now)),
                None => shared,
            };
            if !bucket.take(now) {
                return false;
            }
        }
        self.topic.as_mut().is_none_or(|b| b.take(now))
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flooding_instance_uses_up_its_own_rate_not_the_others() {
        let ov = TopicOverride { name: "t".into(), max_rate_per_instance: Some(100.0), ..TopicOverride::default() };
        let mut l = Limiter::new(&ov);
        // Instance 1 floods: only its burst (a tenth of a second at 100/s) passes at once.
        let passed = (0..10_000).filter(|_| l.admit(1)).count();
        assert!((10..=12).contains(&passed), "{passed}");
        // Instance 2 is not held back by instance 1's flood.
        assert!(l.admit(2));
        // A topic-wide rate still caps the sum.
        let ov = TopicOverride { name: "t".into(), max_rate: Some(100.0), ..TopicOverride::default() };
        let mut l = Limiter::new(&ov);
        let passed = (0..10_000).filter(|i| l.admit(i % 2)).count();
        assert!((10..=12).contains(&passed), "{passed}");
        assert!(!l.admit(7), "the topic's burst is used up by the others");
    }

    #[test]
    fn the_limiters_memory_is_bounded_by_the_number_of_buckets() {
        let ov = TopicOverride { name: "t".into(), max_rate_per_instance: Some(1.0), ..TopicOverride::default() };
        let mut l = Limiter::new(&ov);
        for i in 0..(MAX_INSTANCE_BUCKETS as u64 + 1000) {
            l.admit(i);
        }
        assert_eq!(l.instances.len(), MAX_INSTANCE_BUCKETS);
    }
}
