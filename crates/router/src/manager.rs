//! The manager loop, on the router's one thread of its own: it polls every side's discovery, works out the wanted
//! routes (for each route direction, the topics whose trigger holds, by [`ForwardKey`]), ends the forwarders
//! no longer wanted (keeping their last figures), and starts the new ones within `max_topics`, each placed on
//! the main participant or on a proxy (`proxies.rs`). A forwarder that fails to start is tried again a second
//! later.
use crate::batch::Flusher;
use crate::config::{RouteConfig, RouterConfig, TopicOverride, Trigger};
use crate::engine::{ReloadSummary, Shared, StatsOut, RETIRED_KEPT};
use crate::forwarder::{ForwardKey, Forwarder, ForwarderSpec, Pending, Placement, Settings};
use crate::owners::{Groups, Sources};
use crate::pattern::matches;
use crate::proxies::Proxies;
use crate::side::Side;
use partita_dds::{DiscoveredEndpoint, GuidPrefix, Wakeup};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tracing::{debug, error, info, trace};

/// Target of the manager's events: routes wanted, started, refused and ended.
const LOG: &str = "partita::router::routes";

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

/// An application endpoint of `topic` and `type_name` that announced type information, on any side, with the
/// side it was discovered on.
fn typed_endpoint(sides: &[Side], topic: &str, type_name: &str) -> Option<(DiscoveredEndpoint, usize)> {
    sides.iter().enumerate().find_map(|(i, s)| {
        s.applications(&s.writers)
            .chain(s.applications(&s.readers))
            .find(|e| e.topic_name == topic && e.type_name == type_name && e.has_type_info())
            .map(|e| (e.clone(), i))
    })
}

/// A route direction as statistics and messages name it: `from->to`.
fn route_name(shared: &Shared, key: &ForwardKey) -> String {
    format!("{}->{}", shared.side_names[key.from], shared.side_names[key.to])
}

/// The wanted set: every (route, direction, topic, type, partitions) with an application writer on the source side
/// and, unless the trigger says otherwise, an application reader on the destination side. Each wanted route keeps
/// the endpoint that asked for it and the side it was discovered on (where its type can be resolved).
fn wanted_routes(config: &RouterConfig, dirs: &[(usize, usize, usize)], sides: &[Side]) -> BTreeMap<ForwardKey, (DiscoveredEndpoint, usize)> {
    let mut wanted: BTreeMap<ForwardKey, (DiscoveredEndpoint, usize)> = BTreeMap::new();
    for &(ri, from, to) in dirs {
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
    wanted
}

/// What a forwarder of `topic` on route `route` is made with under `config`: the route's first override whose
/// pattern matches the topic (the default when none does) and the batching it gives.
fn settings_of(config: &RouterConfig, route: usize, topic: &str) -> (TopicOverride, Settings) {
    let ov = config.routes[route].topics.iter().find(|t| matches(&t.name, topic)).cloned().unwrap_or_default();
    let settings = Settings::new(&ov, config.batching(&ov));
    (ov, settings)
}

/// Ends a running forwarder and keeps its last figures among the retired routes' (`active = false`).
fn retire(shared: &Shared, key: &ForwardKey, f: Forwarder) {
    let route = route_name(shared, key);
    f.refresh_reader_figures();
    let mut row = f.stats.snapshot(&shared.name, &route, &key.topic, &key.type_name);
    row.active = false;
    debug!(target: LOG, route = %route, topic = %key.topic, type_name = %key.type_name, owner = %key.owner, forwarded = row.forwarded, "route ended");
    drop(f); // deletes the reader, then the writer
    let mut retired = shared.retired.lock().unwrap_or_else(|p| p.into_inner());
    retired.push(row);
    if retired.len() > RETIRED_KEPT {
        retired.remove(0);
    }
}

/// A new route table for the running router, sent by [`crate::Router::reload`] (which has checked that nothing
/// the router cannot change at runtime differs), and where the manager answers.
pub(crate) struct ReloadRequest {
    pub(crate) config: RouterConfig,
    pub(crate) reply: mpsc::Sender<ReloadSummary>,
}

/// The manager's state that a reload changes: the table, its route directions, and the forwarders' bookkeeping.
struct Table<'a> {
    config: &'a mut RouterConfig,
    dirs: &'a mut Vec<(usize, usize, usize)>,
    pending: &'a mut HashMap<ForwardKey, Pending>,
    groups: &'a mut Groups<ForwardKey>,
    failed: &'a mut HashMap<ForwardKey, Instant>,
}

/// Takes over the table `new`. Routes are numbered by their place in the table, and a new table may add, remove
/// or reorder them, so a running forwarder is matched to the new table by what it routes (direction, topic,
/// type, partitions, owner) whatever its route's number: it is kept as it is — its reader and writer untouched,
/// so its topic loses no sample — when the new table still wants it from a route that gives it the same
/// settings (the topic's override and batching), and only its key's route number changes. The forwarders of
/// one topic and direction (one group, `owners.rs`) move to one new route together. A forwarder the new table
/// no longer wants ends now (its last figures retired as when its endpoints go), one whose settings changed ends
/// and is made again with the new ones, and routes the new table wants that were not running start through
/// the usual path on the manager's next round.
fn reload(new: RouterConfig, t: Table<'_>, sides: &[Side], shared: &Shared) -> ReloadSummary {
    let new_dirs = directions(&new.routes, sides);
    let wanted = wanted_routes(&new, &new_dirs, sides);
    // A key without its route's number: what a forwarder routes.
    let what = |k: &ForwardKey| ForwardKey { route: 0, ..k.unowned() };
    let mut candidates: BTreeMap<ForwardKey, BTreeSet<usize>> = BTreeMap::new();
    for k in wanted.keys() {
        candidates.entry(what(k)).or_default().insert(k.route);
    }
    let mut fw = shared.forwarders.lock().unwrap_or_else(|p| p.into_inner());
    // Each running group (by key without owner) with the settings its forwarders were made with.
    let mut old_groups: BTreeMap<ForwardKey, Settings> = BTreeMap::new();
    for (k, s) in fw.iter().map(|(k, f)| (k, &f.settings)).chain(t.pending.iter().map(|(k, p)| (k, p.settings()))) {
        old_groups.entry(k.unowned()).or_insert_with(|| s.clone());
    }
    let mut claimed: HashSet<ForwardKey> = HashSet::new();
    let mut moves: BTreeMap<ForwardKey, ForwardKey> = BTreeMap::new();
    for (g, settings) in &old_groups {
        let Some(routes) = candidates.get(&what(g)) else { continue };
        // Its own route's number first, when the new table still has it for the topic.
        let order = routes.iter().filter(|r| **r == g.route).chain(routes.iter().filter(|r| **r != g.route));
        for &r in order {
            let target = ForwardKey { route: r, ..g.clone() };
            if !claimed.contains(&target) && settings_of(&new, r, &g.topic).1 == *settings {
                claimed.insert(target.clone());
                moves.insert(g.clone(), target);
                break;
            }
        }
    }
    let mut summary = ReloadSummary::default();
    let mut restarted: HashSet<ForwardKey> = HashSet::new();
    // What becomes of a running or pending forwarder: its new key when it is kept; else it ends, counted as made
    // again when the new table still routes its topic (with other settings) or as removed. Counted here.
    let mut fate = |k: &ForwardKey| match moves.get(&k.unowned()).map(|g| ForwardKey { route: g.route, ..k.clone() }).filter(|n| wanted.contains_key(n)) {
        Some(n) => {
            summary.kept += 1;
            Some(n)
        }
        None if candidates.contains_key(&what(k)) && !moves.contains_key(&k.unowned()) => {
            summary.restarted += 1;
            restarted.insert(what(k));
            None
        }
        None => {
            summary.removed += 1;
            None
        }
    };
    let mut moved = BTreeMap::new();
    for k in fw.keys().cloned().collect::<Vec<_>>() {
        let Some(f) = fw.remove(&k) else { continue };
        match fate(&k) {
            Some(n) => {
                moved.insert(n, f);
            }
            None => retire(shared, &k, f),
        }
    }
    fw.extend(moved);
    let pending: HashMap<ForwardKey, Pending> = t.pending.drain().filter_map(|(k, p)| fate(&k).map(|n| (n, p))).collect();
    *t.pending = pending;
    t.groups.rename(moves);
    summary.added = wanted.keys().filter(|k| !fw.contains_key(*k) && !t.pending.contains_key(*k) && !restarted.contains(&what(k))).count();
    drop(fw);
    t.failed.clear();
    *t.config = new;
    *t.dirs = new_dirs;
    summary.reloads = shared.reloads.fetch_add(1, Ordering::Relaxed) + 1;
    info!(
        target: LOG,
        reloads = summary.reloads,
        kept = summary.kept,
        restarted = summary.restarted,
        removed = summary.removed,
        added = summary.added,
        "route table reloaded"
    );
    summary
}

/// Runs until `stop` is set or `turn`, called at the start of every turn, returns false.
#[allow(clippy::too_many_arguments)]
pub(crate) fn manage(
    mut config: RouterConfig,
    mut sides: Vec<Side>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    flusher: &Flusher,
    wakeup: &Wakeup,
    mut stats: StatsOut,
    reloads: mpsc::Receiver<ReloadRequest>,
    turn: &mut dyn FnMut() -> bool,
) {
    // This thread sends the batches that are due and sleeps until the next one is: tens of µs at a time, which
    // Linux's default timer slack of 50 µs would double.
    let _ = partita_os::timer_slack::set_current_thread_timer_slack_ns(1_000);
    let mut dirs = directions(&config.routes, &sides);
    let mut failed: HashMap<ForwardKey, Instant> = HashMap::new();
    let mut proxies = Proxies::default();
    // With mirroring, the forwarders of one topic and direction, by key without the owner.
    let mut groups: Groups<ForwardKey> = Groups::default();
    let mut dirty = true;
    // New forwarders whose readers wait for their writers to match (forwarder::Pending).
    let mut pending: HashMap<ForwardKey, Pending> = HashMap::new();
    let mut next_stats = Instant::now() + stats.period;
    while !stop.load(Ordering::Relaxed) && turn() {
        let next_flush = flusher.send_due();
        let now = Instant::now();
        if now >= next_stats {
            stats.publish(&shared);
            next_stats = (next_stats + stats.period).max(now);
        }
        for s in sides.iter_mut() {
            dirty |= s.poll();
        }
        while let Ok(request) = reloads.try_recv() {
            // Ending and remaking forwarders may wait for Cyclone: meanwhile no forwarder leaves samples waiting.
            let _busy = flusher.busy();
            let table = Table { config: &mut config, dirs: &mut dirs, pending: &mut pending, groups: &mut groups, failed: &mut failed };
            let summary = reload(request.config, table, &sides, &shared);
            stats.period = config.stats_period();
            next_stats = next_stats.min(Instant::now() + stats.period);
            let _ = request.reply.send(summary);
            dirty = true;
        }
        if !pending.is_empty() {
            // Making a reader may wait for Cyclone: meanwhile the forwarders do not leave samples to this thread.
            let _busy = flusher.busy();
            finish_pending(&mut pending, &shared, &mut failed, &mut dirty);
        }
        if !dirty {
            // Wait on the first side's publications for news, briefly (and not past the next statistics or the
            // next due batch, and no longer once a batch starts waiting); the other sides are polled next round.
            let until = next_flush.map_or(next_stats, |f| f.min(next_stats));
            let _ = sides[0].publications.wait(Duration::from_millis(20).min(until.saturating_duration_since(Instant::now())));
            wakeup.take();
            continue;
        }
        dirty = false;
        // Making routes may block (a type look-up waits up to seconds): no forwarder leaves samples waiting.
        let _busy = flusher.busy();
        let mut wanted = wanted_routes(&config, &dirs, &sides);
        if tracing::enabled!(target: LOG, tracing::Level::TRACE) {
            for (k, (_, seen)) in &wanted {
                trace!(target: LOG, key = ?k, seen_on = %sides[*seen].name, "wanted");
            }
        }
        let mut fw = shared.forwarders.lock().unwrap_or_else(|p| p.into_inner());
        // More topics routed than `max_topics` allows (a reload lowered it): the first ones by name stay, the rest
        // end and are refused like any topic past the cap.
        let in_use: BTreeSet<String> = fw.keys().chain(pending.keys()).filter(|k| wanted.contains_key(*k)).map(|k| k.topic.clone()).collect();
        let over: Vec<String> = in_use.into_iter().skip(config.max_topics).collect();
        wanted.retain(|k, _| !over.contains(&k.topic));
        pending.retain(|k, _| wanted.contains_key(k));
        let ended: Vec<ForwardKey> = fw.keys().filter(|k| !wanted.contains_key(*k)).cloned().collect();
        for k in ended {
            if let Some(f) = fw.remove(&k) {
                retire(&shared, &k, f);
            }
        }
        proxies.prune(&mut sides);
        let topics_in_use: HashSet<String> = fw.keys().chain(pending.keys()).map(|k| k.topic.clone()).collect();
        let mut count = topics_in_use.len();
        let mut refused = shared.refused_topics.lock().unwrap_or_else(|p| p.into_inner());
        refused.clear();
        refused.extend(over);
        let mut new_topics: HashSet<String> = HashSet::new();
        for (key, (ep, seen_on)) in wanted {
            if fw.contains_key(&key) || pending.contains_key(&key) {
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
            let (ov, _) = settings_of(&config, key.route, &key.topic);
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
            // With mirroring, the reader on the source side of a writer's route lives in the proxy of a participant
            // that reads the topic on the destination side (the lowest prefix when several do, chosen once, when
            // the route starts), so the source side sees that participant read the topic, as it does (Cyclone's
            // ddsperf checks this of every peer); the main participant when none does or no proxy could be made.
            let reader_owner = sides[key.to]
                .applications(&sides[key.to].readers)
                .filter(|r| r.topic_name == key.topic && r.type_name == key.type_name)
                .map(|r| r.participant_prefix())
                .min();
            let reader_host = reader_owner
                .filter(|_| config.mirror_participants && seen_on == key.from)
                .and_then(|owner| proxies.get(&mut sides, key.from, key.to, owner, &config.name))
                .unwrap_or_else(|| sides[key.from].participant.clone());
            let (src_p, dst_p, src_parts, dst_parts) = if seen_on == key.from {
                (reader_host, host, parts, translated)
            } else {
                (host, sides[key.to].participant.clone(), translated, parts)
            };
            let placement = Placement { src: src_p, dst: dst_p, src_partitions: src_parts, dst_partitions: dst_parts };
            let writer_owned = seen_on == key.from;
            // Joins its group before its reader exists, so its first samples (a durable history) are judged right.
            let sources = config
                .mirror_participants
                .then(|| Sources::new(groups.join(&key.unowned(), key.owner, writer_owned), key.owner, writer_owned));
            // The type: the triggering endpoint's when it announced one, else that of any application endpoint
            // of the topic and type name, on any side, that did (a Fast DDS writer announces none, the Cyclone
            // reader it is routed to does). The endpoint's owner answers type look-ups on its own side.
            let typed = if ep.has_type_info() {
                Some((ep.clone(), seen_on))
            } else {
                typed_endpoint(&sides, &key.topic, &key.type_name)
            };
            // The route's reader is made once its writer has matched the readers it is for, so that what the
            // reader takes at once (a durable history, a writer writing as soon as it matched) has somewhere to
            // go instead of only the writer's own history.
            let far_readers = sides[key.to]
                .applications(&sides[key.to].readers)
                .filter(|r| r.topic_name == key.topic && r.type_name == key.type_name)
                .count() as u32;
            let spec = ForwarderSpec {
                endpoint: &ep,
                writer_owned,
                typed: typed.as_ref().map(|(e, side)| (e, &sides[*side].participant)),
                far_readers,
                placement,
                topic: &ov,
                batching: config.batching(&ov),
                flusher,
                local_applications: config.local_applications,
                router_writers: sides[key.from].router_writers.clone(),
                sources,
                label: format!("{} {}", route_name(&shared, &key), key.topic),
                tag: sides[key.from].tag.clone(),
                reach: sides[key.from].reach.clone(),
            };
            match Forwarder::start(spec) {
                Ok(p) => {
                    debug!(target: LOG, route = %route_name(&shared, &key), topic = %key.topic, type_name = %key.type_name, owner = %key.owner, "route started; its reader follows once its writer matched");
                    failed.remove(&key);
                    pending.insert(key, p);
                }
                Err(e) => {
                    error!(target: LOG, route = %route_name(&shared, &key), "cannot route topic {} ({}), trying again in a second: {e}", key.topic, key.type_name);
                    failed.insert(key, Instant::now());
                    dirty = true;
                }
            }
        }
        if config.mirror_participants {
            groups.update(fw.iter().map(|(k, f)| (k.unowned(), k.owner, f.writer_owned)).chain(pending.iter().map(|(k, p)| (k.unowned(), k.owner, p.writer_owned()))));
        }
    }
    // The statistics writer goes before the participants it was made on.
    drop(stats);
    drop(sides);
}

/// Makes the readers of the pending forwarders whose writers are ready; they join the running forwarders. The
/// manager calls this on every turn (at least every 20 ms), so the ones still waiting are looked at again soon;
/// `dirty` is set when one joined or failed (the groups and retries are worked out again).
fn finish_pending(pending: &mut HashMap<ForwardKey, Pending>, shared: &Shared, failed: &mut HashMap<ForwardKey, Instant>, dirty: &mut bool) {
    if pending.is_empty() {
        return;
    }
    let ready: Vec<ForwardKey> = pending.iter().filter(|(_, p)| p.ready()).map(|(k, _)| k.clone()).collect();
    *dirty |= !ready.is_empty();
    for key in ready {
        let Some(p) = pending.remove(&key) else { continue };
        match p.finish() {
            Ok(f) => {
                shared.forwarders.lock().unwrap_or_else(|p| p.into_inner()).insert(key, f);
            }
            Err(e) => {
                error!(target: LOG, route = %route_name(shared, &key), "cannot route topic {} ({}), trying again in a second: {e}", key.topic, key.type_name);
                failed.insert(key, Instant::now());
            }
        }
    }
}
