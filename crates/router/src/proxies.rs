//! Participant mirroring: for each application participant on one side, a proxy participant of the router's on
//! the other sides with the same USER_DATA, hosting the router's endpoints that stand for that participant's,
//! and the translation of partition names that spell a participant's GUID between a participant and its proxy.
use crate::side::{router_qos, Side};
use partita_dds::{GuidPrefix, Participant};
use std::collections::HashMap;

/// Proxy participants: for an application participant on one side, a participant of the router's on another
/// side announcing the same USER_DATA, hosting the router's endpoints that stand for it there. Programs that
/// recognise their peers by participant (Cyclone's ddsperf) then see their peer across the router.
#[derive(Default)]
pub(crate) struct Proxies {
    /// (side, origin prefix) → the proxy participant on that side and its prefix.
    by_origin: HashMap<(usize, GuidPrefix), (Participant, GuidPrefix)>,
    /// (side, proxy prefix) → (origin side, origin prefix).
    origin_of: HashMap<(usize, GuidPrefix), (usize, GuidPrefix)>,
}

impl Proxies {
    /// The proxy on `side` of the application participant `origin` of `origin_side` (created on first use);
    /// `None` if that participant is not (or no longer) known.
    pub(crate) fn get(&mut self, sides: &mut [Side], side: usize, origin_side: usize, origin: GuidPrefix, router: &str) -> Option<Participant> {
        if let Some((p, _)) = self.by_origin.get(&(side, origin)) {
            return Some(p.clone());
        }
        let user_data = sides[origin_side].app_participants.get(&origin)?.user_data.clone();
        let mut q = router_qos(router);
        q.user_data = user_data;
        let p = match Participant::with_qos(&sides[side].config, &q) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(target: "partita::router::proxies", side = %sides[side].name, origin = %origin, "cannot create a proxy participant, the router's main participant stands in: {e}");
                return None;
            }
        };
        let prefix = p.guid().ok()?.prefix();
        tracing::debug!(target: "partita::router::proxies", side = %sides[side].name, origin = %origin, proxy = %prefix, "proxy participant");
        sides[side].router_prefixes.insert(prefix);
        self.origin_of.insert((side, prefix), (origin_side, origin));
        self.by_origin.insert((side, origin), (p.clone(), prefix));
        Some(p)
    }

    /// A partition name as seen on `from`, as it must read on `to`: names that spell a participant's GUID are
    /// mapped between application participants and their proxies; others are kept.
    pub(crate) fn translate(&mut self, sides: &mut [Side], name: &str, from: usize, to: usize, router: &str) -> String {
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
    pub(crate) fn prune(&mut self, sides: &mut [Side]) {
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
