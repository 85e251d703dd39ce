//! Which forwarder of a topic forwards which writer's samples, so that each sample crosses once.
//!
//! With participant mirroring a topic has one forwarder per application participant that asked for the route
//! (its owner), each hosted by that participant's proxy on the far side. Every forwarder's reader receives
//! every writer's samples, so each forwarder must pick its own: a forwarder owned by a writer's participant
//! forwards that participant's samples; samples of any other writer (one whose participant owns no forwarder
//! of the topic, or one not known yet) are forwarded by the group's leader, its oldest forwarder (a new one
//! never takes over, so no sample is lost to a hand-over while the new one's reader is still matching). The
//! discovery thread keeps each group's state, a forwarder joining before its reader exists; the forwarders read
//! it per sample.
use partita_dds::{Guid, GuidPrefix as Prefix};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, RwLock};

/// The forwarders of one topic in one direction, as their owners.
#[derive(Debug, Default)]
pub struct GroupState {
    /// Owners of forwarders created for one of their writers.
    writer_owners: HashSet<Prefix>,
    /// Owners of every forwarder of the group, oldest first: the first leads.
    members: Vec<Prefix>,
}

pub type Group = Arc<RwLock<GroupState>>;

/// Every group, by a key that leaves the owner out.
pub struct Groups<K> {
    map: HashMap<K, Group>,
}

impl<K> Default for Groups<K> {
    fn default() -> Self {
        Groups { map: HashMap::new() }
    }
}

impl<K: Hash + Eq + Clone> Groups<K> {
    /// The group of `key` (created empty if new).
    pub fn group(&mut self, key: &K) -> Group {
        self.map.entry(key.clone()).or_default().clone()
    }

    /// Adds a forwarder about to start to its group: (group key, owner, created for a writer).
    pub fn join(&mut self, key: &K, owner: Prefix, writer_owned: bool) -> Group {
        let g = self.group(key);
        {
            let mut s = g.write().unwrap_or_else(|p| p.into_inner());
            if !s.members.contains(&owner) {
                s.members.push(owner);
            }
            if writer_owned {
                s.writer_owners.insert(owner);
            }
        }
        g
    }

    /// Moves groups to new keys, each (old key, new key), keeping each group itself: its forwarders' choice of
    /// samples reads it (a route table reload renumbers routes, see `manager.rs`). All are taken out before any
    /// is put back, so one group's new key may be another's old one.
    pub fn rename(&mut self, moves: impl IntoIterator<Item = (K, K)>) {
        let taken: Vec<(K, Group)> = moves.into_iter().filter_map(|(old, new)| self.map.remove(&old).map(|g| (new, g))).collect();
        self.map.extend(taken);
    }

    /// Sets every group's state from the forwarders that exist now: (group key, owner, created for a writer).
    /// Groups without a forwarder are forgotten.
    pub fn update(&mut self, members: impl IntoIterator<Item = (K, Prefix, bool)>) {
        let mut now: HashMap<K, (HashSet<Prefix>, BTreeSet<Prefix>)> = HashMap::new();
        for (k, owner, writer_owned) in members {
            let (writers, all) = now.entry(k).or_default();
            if writer_owned {
                writers.insert(owner);
            }
            all.insert(owner);
        }
        self.map.retain(|k, _| now.contains_key(k));
        for (k, (writer_owners, all)) in now {
            let g = self.group(&k);
            let mut s = g.write().unwrap_or_else(|p| p.into_inner());
            s.writer_owners = writer_owners;
            s.members.retain(|o| all.contains(o));
            for o in all {
                if !s.members.contains(&o) {
                    s.members.push(o);
                }
            }
        }
    }
}

/// Most writers a forwarder remembers the participant of; past it, it asks again.
const KNOWN_WRITERS: usize = 4096;

/// One forwarder's choice of samples.
pub struct Sources {
    group: Group,
    me: Prefix,
    writer_owned: bool,
    /// Publication handle → the writer's participant, as asked of the reader.
    known: HashMap<u64, Prefix>,
}

impl Sources {
    pub fn new(group: Group, me: Prefix, writer_owned: bool) -> Sources {
        Sources { group, me, writer_owned, known: HashMap::new() }
    }

    /// Whether this forwarder forwards a sample of the writer behind `handle`; `guid_of` asks the reader for
    /// that writer's GUID (once per writer).
    pub fn accepts(&mut self, handle: u64, guid_of: impl FnOnce(u64) -> Option<Guid>) -> bool {
        let owner = match self.known.get(&handle) {
            Some(p) => Some(*p),
            None => guid_of(handle).map(|g| {
                let p = g.prefix();
                if self.known.len() >= KNOWN_WRITERS {
                    self.known.clear();
                }
                self.known.insert(handle, p);
                p
            }),
        };
        let g = self.group.read().unwrap_or_else(|p| p.into_inner());
        match owner {
            Some(p) if g.writer_owners.contains(&p) => self.writer_owned && p == self.me,
            _ => g.members.first() == Some(&self.me),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guid(prefix: u8) -> Guid {
        let mut g = [0u8; 16];
        g[..12].fill(prefix);
        Guid::from_bytes(g)
    }

    fn prefix(p: u8) -> Prefix {
        Prefix::from_bytes([p; 12])
    }

    /// Writers 1 and 2 (participants 1 and 2) each own a forwarder; handle 30 is a writer of participant 3,
    /// which owns none; handle 40 is not known to the reader.
    fn who(h: u64) -> Option<Guid> {
        match h {
            10 => Some(guid(1)),
            20 => Some(guid(2)),
            30 => Some(guid(3)),
            _ => None,
        }
    }

    #[test]
    fn each_writer_is_forwarded_by_one_forwarder_of_its_topic() {
        let mut groups = Groups::default();
        let g = groups.group(&"ticks");
        groups.update([("ticks", prefix(1), true), ("ticks", prefix(2), true)]);
        let mut one = Sources::new(g.clone(), prefix(1), true);
        let mut two = Sources::new(g, prefix(2), true);
        for h in [10, 20, 30, 40] {
            let by: Vec<bool> = vec![one.accepts(h, who), two.accepts(h, who)];
            assert_eq!(by.iter().filter(|a| **a).count(), 1, "writer {h}: {by:?}");
        }
        assert!(one.accepts(10, who) && two.accepts(20, who), "each owner forwards its own writers");
        assert!(one.accepts(30, who) && one.accepts(40, who), "the leader (first of the group) forwards the rest");
    }

    #[test]
    fn a_forwarder_asked_for_by_a_reader_forwards_only_writers_without_their_own() {
        let mut groups = Groups::default();
        let g = groups.group(&"ticks");
        // Participant 0 owns a forwarder through a reader on the far side; participant 2 through its writer.
        groups.update([("ticks", prefix(0), false), ("ticks", prefix(2), true)]);
        let mut by_reader = Sources::new(g.clone(), prefix(0), false);
        let mut by_writer = Sources::new(g, prefix(2), true);
        assert!(!by_reader.accepts(20, who) && by_writer.accepts(20, who));
        assert!(by_reader.accepts(30, who) && !by_writer.accepts(30, who));
    }

    #[test]
    fn a_forwarder_that_joins_later_never_takes_the_lead() {
        let mut groups = Groups::default();
        let g = groups.join(&"ticks", prefix(2), true);
        let mut two = Sources::new(g.clone(), prefix(2), true);
        assert!(two.accepts(20, who) && two.accepts(30, who), "the first forwarder takes its own writer's samples at once");
        let mut one = Sources::new(groups.join(&"ticks", prefix(1), true), prefix(1), true);
        groups.update([("ticks", prefix(1), true), ("ticks", prefix(2), true)]);
        assert!(two.accepts(30, who) && !one.accepts(30, who), "the oldest still leads");
        assert!(one.accepts(10, who) && !two.accepts(10, who));
    }

    #[test]
    fn when_the_leader_leaves_the_next_one_leads_and_empty_groups_are_forgotten() {
        let mut groups = Groups::default();
        groups.join(&"ticks", prefix(1), true);
        let mut two = Sources::new(groups.join(&"ticks", prefix(2), true), prefix(2), true);
        assert!(!two.accepts(30, who));
        groups.update([("ticks", prefix(2), true)]);
        assert!(two.accepts(30, who) && two.accepts(10, who), "alone, it forwards every writer");
        groups.update(Vec::<(&str, Prefix, bool)>::new());
        assert!(groups.map.is_empty());
    }

    #[test]
    fn a_writer_is_asked_about_once() {
        let g = Groups::default().group(&"ticks");
        let mut s = Sources::new(g, prefix(1), true);
        let mut asked = 0;
        for _ in 0..3 {
            s.accepts(10, |h| {
                asked += 1;
                who(h)
            });
        }
        assert_eq!(asked, 1);
    }
}
