//! Discovery state per side: the router's participant on one domain, the writers, readers and participants
//! discovery reports there, and which of them are applications (not a router's, not built-in) that routes
//! follow. The manager polls every side and rebuilds the wanted routes from this state.
use crate::config::SideConfig;
use crate::engine::{tag_reaches, tagged_domains, RouterError};
use partita_dds::{
    DiscoveredEndpoint, DiscoveredParticipant, DomainConfig, EndpointKind, EndpointWatcher, Guid, GuidPrefix, Participant,
    ParticipantWatcher, Qos,
};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use tracing::{debug, error, info, warn};

/// Target of the discovery events: what each side's participant, writer and reader discovery reports.
const LOG: &str = "partita::router::discovery";
/// Target of the application participants a side finds and loses (info: a lost peer is news to an operator).
const PEERS: &str = "partita::router::peers";

/// The application participants of one side, for statistics: how many there are, how many went.
#[derive(Debug, Default)]
pub struct PeerCounts {
    pub present: std::sync::atomic::AtomicU64,
    /// Participants that went: left, or were lost (no word from them within their lease, as when the network
    /// to them is cut).
    pub gone: std::sync::atomic::AtomicU64,
    /// Participants that showed no endpoint for [`SILENT_AFTER`] after they were found: on a DDS Security
    /// domain, refused (not authenticated, or not permitted to join), or idle.
    pub silent: std::sync::atomic::AtomicU64,
}

/// How long a participant may be known without any endpoint before the side reports it.
pub const SILENT_AFTER: std::time::Duration = std::time::Duration::from_secs(15);

/// One end of the router: a participant on a domain, watching its writers and readers.
pub(crate) struct Side {
    pub(crate) name: String,
    pub(crate) config: DomainConfig,
    pub(crate) participant: Participant,
    /// GUID prefixes of this router's participants on this side: the main one and the proxies.
    pub(crate) router_prefixes: HashSet<GuidPrefix>,
    pub(crate) participants: ParticipantWatcher,
    /// Application participants (not any router's), by GUID prefix.
    pub(crate) app_participants: HashMap<GuidPrefix, DiscoveredParticipant>,
    pub(crate) publications: EndpointWatcher,
    pub(crate) subscriptions: EndpointWatcher,
    pub(crate) writers: HashMap<Guid, DiscoveredEndpoint>,
    pub(crate) readers: HashMap<Guid, DiscoveredEndpoint>,
    /// Publication handles of router writers on this side as discovery finds them (any router's; this
    /// process's own are in `forwarder::OWN_WRITERS` from their creation): their samples are never forwarded.
    pub(crate) router_writers: Arc<RwLock<HashSet<u64>>>,
    /// The domains this router forwards to from this side (its other sides').
    pub(crate) reach: Vec<u32>,
    /// The USER_DATA of this router's endpoints (`engine::router_tag`).
    pub(crate) tag: Vec<u8>,
    pub(crate) peers: Arc<PeerCounts>,
    /// When each application participant was found, until it shows an endpoint or is reported silent.
    pub(crate) unproven: HashMap<GuidPrefix, std::time::Instant>,
}

pub(crate) fn is_router(ep: &DiscoveredEndpoint) -> bool {
    ep.qos.user_data.as_deref().is_some_and(|u| tagged_domains(u).is_some())
}

/// See [`Side::is_loop_risk`].
fn loop_risk(reach: &[u32], ep: &DiscoveredEndpoint) -> bool {
    ep.qos.user_data.as_deref().is_some_and(|u| tag_reaches(u, reach))
}

/// Cyclone's built-in topic readers (DCPSPublication & co.) show up in discovery; they are never routed.
fn is_builtin(ep: &DiscoveredEndpoint) -> bool {
    ep.qos.partitions.as_ref().is_some_and(|p| p.iter().any(|n| n == "__BUILT-IN PARTITION__"))
}

/// Property every participant of a router announces (main and proxies), so routers never mirror each other.
const ROUTER_PROPERTY: &str = "partita.router";

pub(crate) fn router_qos(name: &str) -> Qos {
    Qos::new().property(ROUTER_PROPERTY, name)
}

impl Side {
    /// Opens the side's participant. The router lives as long as its system: it keeps probing its peers, so a
    /// program that starts on a peer address later is found (Cyclone gives up on a silent peer after 30 s by
    /// default) — unless applications share its process (`local`), which must create the domain with the
    /// same configuration as the router.
    pub(crate) fn open(cfg: &SideConfig, dc: DomainConfig, router: &str, local: bool, reach: Vec<u32>, tag: Vec<u8>) -> Result<Side, RouterError> {
        let dc = if local { dc } else { dc.probing_peers_forever() };
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
            reach,
            tag,
            peers: Arc::new(PeerCounts::default()),
            unproven: HashMap::new(),
        })
    }

    /// Applies discovery news; true if anything changed.
    pub(crate) fn poll(&mut self) -> bool {
        let mut changed = false;
        match self.participants.take() {
            Ok(news) => {
                for p in news {
                    changed = true;
                    let prefix = p.key.prefix();
                    use std::sync::atomic::Ordering::Relaxed;
                    if !p.alive {
                        self.unproven.remove(&prefix);
                        if self.app_participants.remove(&prefix).is_some() {
                            let gone = self.peers.gone.fetch_add(1, Relaxed) + 1;
                            info!(target: PEERS, side = %self.name, participant = %prefix, gone, "participant gone (left, or lost: silent past its lease)");
                        }
                    } else if p.properties.is_empty() && !self.router_prefixes.contains(&prefix) {
                        if !self.app_participants.contains_key(&prefix) {
                            info!(target: PEERS, side = %self.name, participant = %prefix, "participant found");
                            self.unproven.insert(prefix, std::time::Instant::now());
                        }
                        self.app_participants.insert(prefix, p);
                    }
                    self.peers.present.store(self.app_participants.len() as u64, Relaxed);
                }
            }
            Err(e) => error!(target: LOG, side = %self.name, "participant discovery: {e}"),
        }
        let reach = &self.reach;
        for (watcher, map) in [(&self.publications, &mut self.writers), (&self.subscriptions, &mut self.readers)] {
            let news = match watcher.take() {
                Ok(n) => n,
                Err(e) => {
                    error!(target: LOG, side = %self.name, "endpoint discovery: {e}");
                    continue;
                }
            };
            for ep in news {
                changed = true;
                debug!(
                    target: LOG,
                    side = %self.name,
                    kind = ?ep.kind,
                    topic = %ep.topic_name,
                    type_name = %ep.type_name,
                    alive = ep.alive,
                    router = is_router(&ep),
                    type_info = ep.has_type_info(),
                    partitions = ?ep.qos.partitions,
                    "endpoint"
                );
                if ep.alive {
                    if ep.kind == EndpointKind::Publication && loop_risk(reach, &ep) {
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
        // A participant that shows an endpoint is proven; one that shows none for long is reported once: under
        // DDS Security (discovery protected), a participant refused authentication or access is seen on the
        // wire, never its endpoints.
        let (writers, readers) = (&self.writers, &self.readers);
        self.unproven.retain(|prefix, _| !writers.keys().chain(readers.keys()).any(|g| g.prefix() == *prefix));
        let silent: Vec<GuidPrefix> = self.unproven.iter().filter(|(_, at)| at.elapsed() >= SILENT_AFTER).map(|(p, _)| *p).collect();
        for prefix in silent {
            self.unproven.remove(&prefix);
            let silent = self.peers.silent.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            warn!(target: PEERS, side = %self.name, participant = %prefix, silent, "participant shows no endpoint {} s after it was found: refused by DDS Security (not authenticated, or not permitted), or idle", SILENT_AFTER.as_secs());
        }
        changed
    }

    /// Whether `ep` is an endpoint of a router that itself bridges a domain this router forwards to from this
    /// side: its samples would come back or arrive twice, so it is neither followed nor forwarded. The endpoints
    /// of a router further along a chain (bridging other domains) are followed like applications'.
    pub(crate) fn is_loop_risk(&self, ep: &DiscoveredEndpoint) -> bool {
        loop_risk(&self.reach, ep)
    }

    /// Application endpoints: alive, not a router's that could loop, not this router's own participant.
    pub(crate) fn applications<'a>(&'a self, map: &'a HashMap<Guid, DiscoveredEndpoint>) -> impl Iterator<Item = &'a DiscoveredEndpoint> {
        map.values().filter(move |e| e.alive && !self.is_loop_risk(e) && !self.router_prefixes.contains(&e.key.prefix()) && !is_builtin(e))
    }
}
