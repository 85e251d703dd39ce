//! Adaptive batching of forwarded samples: a burst crosses the router in fewer batches than samples, whole and
//! in order, its last samples included (the flusher sends what the burst left waiting); a lone sample after a
//! pause crosses on its own; a topic with `batch_delay = "0s"` sends every sample on its own. (When the
//! flusher sends a batch, and not before, is tested in `src/batch.rs`.)
mod common;
use common::*;
use partita_dds::{qos::History, DomainConfig, Participant, Qos, Reader, Topic, Writer};
use partita_router::{RouteStats, Router};
use std::time::{Duration, Instant};

const BURST: u32 = 20_000;

struct Ends {
    _pa: Participant,
    _pb: Participant,
    w: Writer<Tick>,
    r: Reader<Tick>,
}

fn ends(a: u32, b: u32) -> Ends {
    let qos = Qos::reliable().history(History::KeepAll);
    let pa = Participant::new(&DomainConfig::loopback(a)).unwrap();
    let pb = Participant::new(&DomainConfig::loopback(b)).unwrap();
    let w = Writer::new(&Topic::<Tick>::new(&pa, "ticks", &qos).unwrap(), &qos).unwrap();
    let r = Reader::new(&Topic::<Tick>::new(&pb, "ticks", &qos).unwrap(), &qos).unwrap();
    Ends { _pa: pa, _pb: pb, w, r }
}

/// Writes `BURST` samples as fast as the writer can and takes them on the far side; returns what arrived, in
/// order, once `BURST` samples did (or after 30 s).
fn burst_through(router: &Router, e: &Ends) -> Vec<u32> {
    wait_until("the route", || !router.active().is_empty() && e.w.matched_readers().unwrap() > 0);
    std::thread::sleep(Duration::from_millis(300));
    for n in 0..BURST {
        e.w.write(&Tick { n }).unwrap();
    }
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(30);
    while got.len() < BURST as usize && Instant::now() < end {
        got.extend(e.r.take().unwrap().into_iter().filter_map(|s| s.value).map(|t| t.n));
        std::thread::sleep(Duration::from_millis(5));
    }
    got
}

fn row(router: &Router) -> RouteStats {
    router.stats().into_iter().find(|r| r.topic == "ticks").expect("a statistics row for ticks")
}

#[test]
fn a_burst_crosses_whole_and_in_order_in_fewer_batches_than_samples() {
    let (a, b) = (domain(16), domain(17));
    let router = Router::start(in_process(two_sides(a, b, ""))).unwrap();
    let e = ends(a, b);
    let got = burst_through(&router, &e);
    assert_eq!(got.len(), BURST as usize, "every sample of the burst crossed, its last ones included");
    assert!(got.iter().copied().eq(0..BURST), "in order, without duplicates");
    let burst = row(&router);
    assert_eq!(burst.forwarded, BURST as u64, "{burst:?}");
    assert!(
        burst.batches * 2 <= burst.forwarded,
        "a burst written back to back shares batches: {} samples in {} batches",
        burst.forwarded,
        burst.batches
    );

    // After a pause, a lone sample is sent at once, in a batch of its own.
    std::thread::sleep(Duration::from_millis(200));
    e.w.write(&Tick { n: BURST }).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    let mut lone = Vec::new();
    while lone.is_empty() && Instant::now() < end {
        lone.extend(e.r.take().unwrap().into_iter().filter_map(|s| s.value).map(|t| t.n));
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(lone, vec![BURST]);
    let after = row(&router);
    assert_eq!(after.batches, burst.batches + 1, "the lone sample went out alone: {after:?}");
}

#[test]
fn a_topic_with_batch_delay_zero_sends_every_sample_on_its_own() {
    let (a, b) = (domain(18), domain(19));
    // The router batches by default; the topic's own batch_delay turns it off for this topic.
    let router = Router::start(in_process(two_sides(a, b, "[[route.topic]]\nname = \"ticks\"\nbatch_delay = \"0s\""))).unwrap();
    let e = ends(a, b);
    let got = burst_through(&router, &e);
    assert!(got.iter().copied().eq(0..BURST), "whole and in order: {} samples", got.len());
    let r = row(&router);
    assert_eq!((r.forwarded, r.batches), (BURST as u64, BURST as u64), "{r:?}");
}
