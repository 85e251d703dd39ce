//! Two routers in a ring (one routes a→b, the other b→a) with applications writing and reading the same topic
//! on both domains: every sample arrives once on each side, and what a router wrote is never forwarded again.
mod common;
use common::*;
use partita_dds::{qos::History, DomainConfig, Participant, Qos, Reader, Topic, TopicType, Writer};
use partita_router::Router;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Note {
    origin: String,
    seq: u32,
}

impl TopicType for Note {
    fn type_name() -> &'static str {
        "partita::test::Note"
    }
    fn key_fields() -> &'static [&'static str] {
        &["origin", "seq"]
    }
}

fn config(name: &str, a: u32, b: u32, from: &str, to: &str) -> partita_router::RouterConfig {
    in_process(common::config(&format!(
        "name = \"{name}\"\n[[side]]\nname = \"a\"\ndomain = {a}\n[[side]]\nname = \"b\"\ndomain = {b}\n[[route]]\nfrom = \"{from}\"\nto = \"{to}\"\n"
    )))
}

/// What each reader takes until it holds the ten notes of both sides and `routed` says the routers did their
/// part, then for a grace time more (a note delivered twice on loopback comes within it), 3 s at most.
fn collect(readers: &[&Reader<Note>], routed: impl Fn() -> bool) -> Vec<Vec<Note>> {
    let end = Instant::now() + Duration::from_secs(3);
    let mut grace_end: Option<Instant> = None;
    let mut got: Vec<Vec<Note>> = vec![Vec::new(); readers.len()];
    while Instant::now() < grace_end.unwrap_or(end).min(end) {
        for (i, r) in readers.iter().enumerate() {
            got[i].extend(r.take_wait(Duration::from_millis(50)).unwrap().into_iter().filter_map(|s| s.value));
        }
        if grace_end.is_none() && got.iter().all(|g| g.len() >= 10) && routed() {
            grace_end = Some(Instant::now() + Duration::from_millis(500));
        }
    }
    got
}

#[test]
fn two_routers_in_a_ring_do_not_loop() {
    let (a, b) = (domain(10), domain(11));
    let r1 = Router::start(config("r1", a, b, "a", "b")).unwrap();
    let r2 = Router::start(config("r2", a, b, "b", "a")).unwrap();
    let qos = Qos::reliable().history(History::KeepAll);
    let mut apps = Vec::new();
    for (d, name) in [(a, "a"), (b, "b")] {
        let p = Participant::new(&DomainConfig::loopback(d)).unwrap();
        let t = Topic::<Note>::new(&p, "notes", &qos).unwrap();
        let w = Writer::new(&t, &qos).unwrap();
        let r = Reader::new(&t, &qos).unwrap();
        apps.push((name, p, w, r));
    }
    // Each writer is matched by its own side's reader and by the router reading that side.
    for (_, _, w, _) in &apps {
        w.wait_for_readers(2, Duration::from_secs(20)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    for (name, _, w, _) in &apps {
        for seq in 0..5 {
            w.write(&Note { origin: name.to_string(), seq }).unwrap();
        }
    }
    let readers: Vec<&Reader<Note>> = apps.iter().map(|(_, _, _, r)| r).collect();
    let counts = |f: fn(&partita_router::stats::RouteStats) -> u64| r1.stats().iter().chain(&r2.stats()).map(f).sum::<u64>();
    let got = collect(&readers, || counts(|r| r.forwarded) >= 10 && counts(|r| r.suppressed_loop) >= 10);
    let s1 = r1.stats();
    let s2 = r2.stats();
    for (i, notes) in got.iter().enumerate() {
        let mut sorted = notes.clone();
        sorted.sort_by(|x, y| (&x.origin, x.seq).cmp(&(&y.origin, y.seq)));
        let want: Vec<Note> = ["a", "b"].iter().flat_map(|o| (0..5).map(move |seq| Note { origin: o.to_string(), seq })).collect();
        assert_eq!(sorted, want, "side {i} must see each note exactly once\nr1: {s1:#?}\nr2: {s2:#?}");
    }
    let suppressed: u64 = s1.iter().chain(&s2).map(|r| r.suppressed_loop).sum();
    let forwarded: u64 = s1.iter().chain(&s2).map(|r| r.forwarded).sum();
    assert_eq!(forwarded, 10, "each router forwards its side's 5 notes once\nr1: {s1:#?}\nr2: {s2:#?}");
    assert_eq!(suppressed, 10, "each router sees the other's 5 forwarded notes and drops them\nr1: {s1:#?}\nr2: {s2:#?}");
}

fn chain_config(name: &str, near: u32, network: u32) -> partita_router::RouterConfig {
    in_process(common::config(&format!(
        "name = \"{name}\"\n[[side]]\nname = \"module\"\ndomain = {near}\n[[side]]\nname = \"network\"\ndomain = {network}\n\
         [[route]]\nfrom = \"module\"\nto = \"network\"\nboth_ways = true\ntrigger = \"writer\"\n"
    )))
}

/// Two modules talking through their I/O partitions: router A bridges module A's domain and the network,
/// router B the network and module B's domain. Each forwards what the other wrote (the other cannot reach the
/// destination), in both directions, exactly once.
#[test]
fn two_routers_in_a_chain_forward_end_to_end_both_ways() {
    let (da, net, db) = (domain(12), domain(13), domain(14));
    let ra = Router::start(chain_config("ra", da, net)).unwrap();
    let rb = Router::start(chain_config("rb", db, net)).unwrap();
    let qos = Qos::reliable().history(History::KeepAll);
    let mut apps = Vec::new();
    for (d, name) in [(da, "a"), (db, "b")] {
        let p = Participant::new(&DomainConfig::loopback(d)).unwrap();
        let t = Topic::<Note>::new(&p, "notes", &qos).unwrap();
        let w = Writer::new(&t, &qos).unwrap();
        let r = Reader::new(&t, &qos).unwrap();
        apps.push((name, p, w, r));
    }
    // Each writer is matched by its own side's reader and by its router's reader, which the router makes once
    // its writer on the network matched the far router's reader.
    for (_, _, w, _) in &apps {
        w.wait_for_readers(2, Duration::from_secs(20)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    for (name, _, w, _) in &apps {
        for seq in 0..5 {
            w.write(&Note { origin: name.to_string(), seq }).unwrap();
        }
    }
    let readers: Vec<&Reader<Note>> = apps.iter().map(|(_, _, _, r)| r).collect();
    let got = collect(&readers, || ra.stats().iter().chain(&rb.stats()).map(|r| r.forwarded).sum::<u64>() >= 20);
    let (sa, sb) = (ra.stats(), rb.stats());
    for (i, notes) in got.iter().enumerate() {
        let mut sorted = notes.clone();
        sorted.sort_by(|x, y| (&x.origin, x.seq).cmp(&(&y.origin, y.seq)));
        let want: Vec<Note> = ["a", "b"].iter().flat_map(|o| (0..5).map(move |seq| Note { origin: o.to_string(), seq })).collect();
        assert_eq!(sorted, want, "side {i} must see each note exactly once\nra: {sa:#?}\nrb: {sb:#?}");
    }
    let forwarded: u64 = sa.iter().chain(&sb).map(|r| r.forwarded).sum();
    assert_eq!(forwarded, 20, "each note crosses both routers once\nra: {sa:#?}\nrb: {sb:#?}");
}
