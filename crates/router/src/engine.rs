//! The routing engine: one participant per side (`side.rs`), a discovery manager that keeps the set of routed
//! topics in step with the writers and readers it sees (`manager.rs`), one forwarder (a listening reader and a
//! writer) per routed topic and direction (`forwarder.rs`), the flusher that sends what the forwarders' batches
//! leave waiting (`batch.rs`), and the statistics topic; the manager's thread does all but the forwarding. This
//! module starts and stops them.
use crate::batch::Flusher;
use crate::config::RouterConfig;
use crate::forwarder::{ForwardKey, Forwarder};
use crate::config::ConfigError;
use crate::manager::{manage, ReloadRequest};
use crate::side::Side;
use crate::stats::RouteStats;
use partita_dds::{Qos, Writer};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// USER_DATA every router endpoint announces, followed by the domains its router bridges
/// (`partita-router domains=1,0`): a router never takes the endpoints of a router that bridges one of the
/// domains it forwards to for applications, and never forwards samples such a router wrote (no loops, also
/// with several routers in a ring between the same domains), while a chain — module A's I/O partition
/// bridging domains 1 and 0, module B's bridging 0 and 2 — forwards end to end.
pub const ROUTER_TAG: &[u8] = b"partita-router";

/// The USER_DATA of the endpoints of a router that bridges `domains`.
pub fn router_tag(domains: &[u32]) -> Vec<u8> {
    let list = domains.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",");
    format!("partita-router domains={list}").into_bytes()
}

/// The domains a router endpoint's USER_DATA says its router bridges: `None` for an endpoint that is not a
/// router's, `Some(None)` for a router that does not say (taken as bridging every domain).
pub fn tagged_domains(user_data: &[u8]) -> Option<Option<Vec<u32>>> {
    let rest = user_data.strip_prefix(ROUTER_TAG)?;
    if rest.is_empty() {
        return Some(None);
    }
    let list = std::str::from_utf8(rest).ok().and_then(|r| r.strip_prefix(" domains="));
    Some(list.and_then(|l| l.split(',').map(|d| d.parse().ok()).collect::<Option<Vec<u32>>>()))
}

/// Whether `user_data` is a router's tag whose router also reaches one of `reach` (a router that does not say
/// which domains it bridges is taken as reaching them all): what it wrote would come back or arrive twice.
pub(crate) fn tag_reaches(user_data: &[u8], reach: &[u32]) -> bool {
    match tagged_domains(user_data) {
        None => false,
        Some(None) => true,
        Some(Some(domains)) => domains.iter().any(|d| reach.contains(d)),
    }
}

/// Engine failures.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    #[error("side {side}: {source}")]
    Side { side: String, source: partita_dds::DdsError },
    #[error("statistics topic: {0}")]
    Stats(partita_dds::DdsError),
    #[error(transparent)]
    PortRoute(#[from] crate::ports::PortRouteError),
}

/// Why a new route table was not taken over; the running table stays.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new table changes what a running router cannot change (`RouterConfig::fixed_differences`): each
    /// field with what changed.
    #[error("{}", fixed_lines(.0))]
    NeedsRestart(Vec<(String, String)>),
    /// The router's manager thread has ended (the router is stopping).
    #[error("the router is stopping; its route table can no longer be changed")]
    Stopped,
}

/// What to do about a field a reload cannot change.
pub const RESTART_FIX: &str = "put it back as it was to reload the rest, or restart the router to change it";

fn fixed_lines(diff: &[(String, String)]) -> String {
    diff.iter().map(|(field, what)| format!("{field}: {what}, which the running router cannot change; {RESTART_FIX}")).collect::<Vec<_>>().join("\n")
}

impl ReloadError {
    /// The refusal as configuration errors naming `file`: file, field, problem and fix, as a bad file's are.
    pub fn config_errors(&self, file: &str) -> Vec<ConfigError> {
        match self {
            ReloadError::NeedsRestart(diff) => diff
                .iter()
                .map(|(field, what)| ConfigError {
                    file: file.to_string(),
                    line: None,
                    field: field.clone(),
                    problem: format!("{what}, which the running router cannot change"),
                    fix: RESTART_FIX.to_string(),
                })
                .collect(),
            ReloadError::Stopped => vec![ConfigError {
                file: file.to_string(),
                line: None,
                field: "(router)".into(),
                problem: self.to_string(),
                fix: "start the router again".into(),
            }],
        }
    }
}

/// What a reload did to the routes running when it came (each a topic in one direction of a route, per owner
/// with participant mirroring; see `manager.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadSummary {
    /// Still wanted with the same settings: kept as they were, without losing a sample.
    pub kept: usize,
    /// Still wanted, but their topic's override or batching changed: ended and started again with the new ones.
    pub restarted: usize,
    /// No longer wanted by the new table: ended.
    pub removed: usize,
    /// Wanted by the new table and not running: starting now (routes whose endpoints appear later start then).
    pub added: usize,
    /// Reloads since the router started, this one included.
    pub reloads: u64,
}

impl std::fmt::Display for ReloadSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "routes kept {}, restarted with new settings {}, removed {}, added {} (reload {})", self.kept, self.restarted, self.removed, self.added, self.reloads)
    }
}

/// What the router's threads share: the forwarders and the statistics of routes that ended.
pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) side_names: Vec<String>,
    pub(crate) forwarders: Mutex<BTreeMap<ForwardKey, Forwarder>>,
    pub(crate) refused_topics: Mutex<HashSet<String>>,
    /// Final figures of routes that ended, newest last (bounded).
    pub(crate) retired: Mutex<Vec<RouteStats>>,
    /// Per side (in `side_names` order): its application participants.
    pub(crate) peers: Vec<Arc<crate::side::PeerCounts>>,
    /// The port routes' figures: (route, topic, type, counters).
    pub(crate) port_stats: Vec<(String, String, String, Arc<crate::stats::ForwardStats>)>,
    /// Route tables taken over since the router started.
    pub(crate) reloads: AtomicU64,
}

/// Routes that ended whose final figures are kept.
pub(crate) const RETIRED_KEPT: usize = 256;

/// A running router. Dropping it (or calling [`Router::stop`]) stops every thread and deletes every entity.
pub struct Router {
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    /// Discovery, route changes, the statistics topic and the forwarders' due batches: one thread, since every
    /// thread of a partition under a plan is woken at each freeze and thaw (docs/router.md, "Threads").
    manager: Option<JoinHandle<()>>,
    /// Topics carried through the partition's ports; dropped first when the router stops.
    port_routes: Option<crate::ports::PortRoutes>,
    /// New route tables for the manager ([`Router::reload`]).
    reloads: Mutex<mpsc::Sender<ReloadRequest>>,
    /// The table the router runs with: what a reload must not change is compared with it.
    config: Mutex<RouterConfig>,
    /// Last: forwarders still hand batches to it until they are gone.
    _flusher: Arc<Flusher>,
}

impl Router {
    /// Opens every side and starts discovery and forwarding.
    pub fn start(config: impl Into<RouterConfig>) -> Result<Router, RouterError> {
        Router::start_with_ports(config, &mut partita_ports::Ports::default())
    }

    /// [`Router::start`] with the ARINC 653 ports of the router's partition, which its port routes (`[[port]]`)
    /// open by name.
    pub fn start_with_ports(config: impl Into<RouterConfig>, ports: &mut partita_ports::Ports) -> Result<Router, RouterError> {
        let (mut router, manager) = Router::prepare(config.into(), ports)?;
        let thread = std::thread::Builder::new()
            .name("router-manager".into())
            .spawn(move || manager.run(&mut || true))
            .expect("spawn the router's manager thread");
        router.manager = Some(thread);
        Ok(router)
    }

    /// Runs the router with its manager on the calling thread, so that the router has no thread of its own
    /// beside the caller's and Cyclone's (a routing partition's threads all run at every thaw: docs/router.md,
    /// "Threads"). `turn` runs on every turn of the manager (at least every 20 ms) with the running router, for
    /// its statistics; the router stops and this returns once `turn` returns false.
    pub fn serve(config: impl Into<RouterConfig>, ports: &mut partita_ports::Ports, mut turn: impl FnMut(&Router) -> bool) -> Result<(), RouterError> {
        let (router, manager) = Router::prepare(config.into(), ports)?;
        manager.run(&mut || turn(&router));
        drop(router);
        Ok(())
    }

    /// Opens every side and the statistics topic; the manager, which discovery and forwarding start from, is
    /// returned to run on a thread of the caller's choice.
    fn prepare(config: RouterConfig, ports: &mut partita_ports::Ports) -> Result<(Router, Manager), RouterError> {
        let configs: Vec<_> = config.sides.iter().map(|c| config.domain_of(c)).collect();
        let domains: Vec<u32> = configs.iter().map(|dc| dc.domain_id).collect();
        let tag = router_tag(&domains);
        let sides: Vec<Side> = config
            .sides
            .iter()
            .zip(configs)
            .enumerate()
            .map(|(i, (c, dc))| {
                let reach = domains.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, d)| *d).collect();
                Side::open(c, dc, &config.name, config.local_applications, reach, tag.clone())
            })
            .collect::<Result<_, _>>()?;
        let participants: Vec<(String, partita_dds::Participant)> = sides.iter().map(|s| (s.name.clone(), s.participant.clone())).collect();
        let port_routes = crate::ports::PortRoutes::start(&config.ports, &participants, ports, &tag)?;
        let shared = Arc::new(Shared {
            name: config.name.clone(),
            side_names: sides.iter().map(|s| s.name.clone()).collect(),
            forwarders: Mutex::new(BTreeMap::new()),
            refused_topics: Mutex::new(HashSet::new()),
            retired: Mutex::new(Vec::new()),
            peers: sides.iter().map(|s| s.peers.clone()).collect(),
            port_stats: port_routes.routes.iter().map(|r| (r.label.clone(), r.topic.clone(), r.type_name.clone(), r.stats.clone())).collect(),
            reloads: AtomicU64::new(0),
        });
        let stop = Arc::new(AtomicBool::new(false));
        // The manager waits on the first side's publications and on this wake-up, which a forwarder's first
        // waiting sample triggers: it also sends the forwarders' due batches (no flusher thread).
        let side_err = |source| RouterError::Side { side: sides[0].name.clone(), source };
        let wakeup = Arc::new(partita_dds::Wakeup::new(&sides[0].participant).map_err(side_err)?);
        sides[0].publications.attach(&wakeup).map_err(side_err)?;
        let flusher = {
            let w = wakeup.clone();
            Arc::new(Flusher::new(move || w.wake()))
        };
        let stats_idx = config
            .stats_side
            .as_ref()
            .and_then(|n| sides.iter().position(|s| &s.name == n))
            .unwrap_or(0);
        let stats_writer = {
            let p = &sides[stats_idx].participant;
            let q = Qos::reliable().keep_last(1).transient_local().user_data(tag.clone());
            let t = partita_dds::Topic::<RouteStats>::new(p, "partita/router/stats", &q).map_err(RouterError::Stats)?;
            Writer::new(&t, &q).map_err(RouterError::Stats)?
        };
        let stats = StatsOut { writer: stats_writer, period: config.stats_period() };
        let (reload_tx, reload_rx) = mpsc::channel();
        let running = config.clone();
        let manager = Manager { config, sides, shared: shared.clone(), stop: stop.clone(), flusher: flusher.clone(), wakeup, stats, reloads: reload_rx };
        let router = Router {
            shared,
            stop,
            manager: None,
            reloads: Mutex::new(reload_tx),
            config: Mutex::new(running),
            _flusher: flusher,
            port_routes: Some(port_routes),
        };
        Ok((router, manager))
    }

    /// Takes over a new route table without stopping: routes, their allow and block lists, partitions,
    /// triggers and topic overrides, `max_topics`, `stats_period` and `batch_delay` may change. What the router
    /// cannot change while it runs (its sides, name, port routes, `stats_side`, `mirror_participants`; see
    /// [`RouterConfig::fixed_differences`]) must be as it was, else the reload is refused and the running table
    /// stays. A forwarder the new table still wants with the same settings keeps running untouched (its topic
    /// loses no sample); one whose topic override or batching changed is made again; one no longer wanted ends;
    /// new ones start as discovery finds their endpoints. Returns once the manager has taken the table over
    /// (within one of its rounds, about 20 ms).
    pub fn reload(&self, new: impl Into<RouterConfig>) -> Result<ReloadSummary, ReloadError> {
        self.request_reload(new)?.recv().map_err(|_| ReloadError::Stopped)
    }

    /// [`Router::reload`] without waiting for the manager: the table is checked now, the manager takes it over
    /// on its next turn and sends what it did on the returned channel. For a caller on the manager's own thread
    /// (the turn of [`Router::serve`]), which would otherwise wait for itself.
    pub fn request_reload(&self, new: impl Into<RouterConfig>) -> Result<mpsc::Receiver<ReloadSummary>, ReloadError> {
        let new = new.into();
        let mut running = self.config.lock().unwrap_or_else(|p| p.into_inner());
        let diff = running.fixed_differences(&new);
        if !diff.is_empty() {
            return Err(ReloadError::NeedsRestart(diff));
        }
        let (reply, answer) = mpsc::channel();
        self.reloads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(ReloadRequest { config: new.clone(), reply })
            .map_err(|_| ReloadError::Stopped)?;
        *running = new;
        Ok(answer)
    }

    /// Route tables taken over since the router started ([`Router::reload`]).
    pub fn reloads(&self) -> u64 {
        self.shared.reloads.load(Ordering::Relaxed)
    }

    /// Current statistics of every routed topic, then the final figures of routes that have ended.
    pub fn stats(&self) -> Vec<RouteStats> {
        let mut rows = snapshot(&self.shared);
        rows.extend(self.shared.retired.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned());
        rows
    }

    /// Per side: its name, the application participants it sees now and how many went (left, or were lost when
    /// the network to them failed), since the router started.
    /// The third number: participants that showed no endpoint long after they were found (refused by DDS
    /// Security, or idle).
    pub fn peers(&self) -> Vec<(String, u64, u64, u64)> {
        use std::sync::atomic::Ordering::Relaxed;
        self.shared.side_names.iter().zip(&self.shared.peers).map(|(n, p)| (n.clone(), p.present.load(Relaxed), p.gone.load(Relaxed), p.silent.load(Relaxed))).collect()
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
        self.port_routes = None;
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.manager.take() {
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

/// What the manager's loop runs with, until the router's stop flag is set or its caller's turn says to stop.
pub(crate) struct Manager {
    config: RouterConfig,
    sides: Vec<Side>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    flusher: Arc<Flusher>,
    wakeup: Arc<partita_dds::Wakeup>,
    stats: StatsOut,
    reloads: mpsc::Receiver<ReloadRequest>,
}

impl Manager {
    fn run(self, turn: &mut dyn FnMut() -> bool) {
        let Manager { config, sides, shared, stop, flusher, wakeup, stats, reloads } = self;
        manage(config, sides, shared, stop, &flusher, &wakeup, stats, reloads, turn);
    }
}

/// The statistics topic and how often the manager publishes every route's figures on it.
pub(crate) struct StatsOut {
    pub(crate) writer: Writer<RouteStats>,
    pub(crate) period: Duration,
}

impl StatsOut {
    pub(crate) fn publish(&self, shared: &Shared) {
        for row in snapshot(shared) {
            if let Err(e) = self.writer.write(&row) {
                tracing::warn!(target: "partita::router::stats", "publishing statistics: {e}");
            }
        }
    }
}

fn snapshot(shared: &Shared) -> Vec<RouteStats> {
    let f = shared.forwarders.lock().unwrap_or_else(|p| p.into_inner());
    f.iter()
        .map(|(k, fw)| {
            let route = format!("{}->{}", shared.side_names[k.from], shared.side_names[k.to]);
            fw.refresh_reader_figures();
            fw.stats.snapshot(&shared.name, &route, &k.topic, &k.type_name)
        })
        .chain(shared.port_stats.iter().map(|(route, topic, type_name, st)| st.snapshot(&shared.name, route.split(' ').next().unwrap_or(route), topic, type_name)))
        .collect()
}

#[cfg(test)]
mod tag_tests {
    use super::*;

    #[test]
    fn a_router_tag_names_the_domains_it_bridges() {
        assert_eq!(tagged_domains(&router_tag(&[1, 0])), Some(Some(vec![1, 0])));
        assert_eq!(tagged_domains(ROUTER_TAG), Some(None));
        assert_eq!(tagged_domains(b"partita-router domains=x"), Some(None));
        assert_eq!(tagged_domains(b"an application"), None);
    }

    #[test]
    fn a_router_reaching_a_destination_is_a_loop_risk_and_one_further_along_a_chain_is_not() {
        assert!(tag_reaches(&router_tag(&[1, 0]), &[1]));
        assert!(!tag_reaches(&router_tag(&[0, 2]), &[1]));
        assert!(tag_reaches(ROUTER_TAG, &[1]));
        assert!(!tag_reaches(b"an application", &[1]));
    }
}
