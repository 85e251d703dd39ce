//! Protection of the partitioned side and observability: a per-topic rate limit drops and counts what exceeds
//! it, the cap on routed topics refuses (and lists) the topics beyond it, and the statistics reach the DDS topic
//! partita/router/stats.
mod common;
use common::*;
use partita_dds::{qos::History, DomainConfig, Participant, Qos, Reader, Topic, Writer};
use partita_router::{RouteStats, Router};
use std::time::Duration;

struct App {
    _p: Participant,
    w: Option<Writer<Tick>>,
    r: Option<Reader<Tick>>,
}

fn app(domain: u32, topic: &str, writer: bool) -> App {
    let qos = Qos::reliable().history(History::KeepAll);
    let p = Participant::new(&DomainConfig::loopback(domain)).unwrap();
    let t = Topic::<Tick>::new(&p, topic, &qos).unwrap();
    let (w, r) = if writer { (Some(Writer::new(&t, &qos).unwrap()), None) } else { (None, Some(Reader::new(&t, &qos).unwrap())) };
    App { _p: p, w, r }
}

#[test]
fn rate_limit_drops_and_counts_the_excess() {
    let (a, b) = (domain(12), domain(13));
    let router = Router::start(in_process(two_sides(a, b, "[[route.topic]]\nname = \"ticks\"\nmax_rate = 5.0"))).unwrap();
    let src = app(a, "ticks", true);
    let dst = app(b, "ticks", false);
    let w = src.w.as_ref().unwrap();
    wait_until("the router's reader", || w.matched_readers().unwrap() >= 1);
    std::thread::sleep(Duration::from_millis(500));
    for n in 0..200 {
        w.write(&Tick { n }).unwrap();
    }
    wait_until("all 200 samples counted by the router", || {
        router.stats().iter().filter(|r| r.topic == "ticks").map(|r| r.received).sum::<u64>() >= 200
    });
    std::thread::sleep(Duration::from_millis(300));
    let got = dst.r.as_ref().unwrap().take().unwrap().len() as u64;
    let row = router.stats().into_iter().find(|r| r.topic == "ticks").unwrap();
    assert_eq!(row.received, 200, "{row:?}");
    assert!(row.dropped_rate > 0, "200 samples at once must exceed 5/s: {row:?}");
    assert_eq!(row.forwarded + row.dropped_rate, row.received, "every sample is forwarded or counted: {row:?}");
    assert_eq!(got, row.forwarded, "the far reader gets what was forwarded: {row:?}");
}

#[test]
fn the_topic_cap_refuses_topics_beyond_it_and_stats_are_published() {
    let (a, b) = (domain(14), domain(15));
    let cfg = config(&format!(
        "max_topics = 1\nstats_period = \"200ms\"\nstats_side = \"b\"\n[[side]]\nname = \"a\"\ndomain = {a}\n[[side]]\nname = \"b\"\ndomain = {b}\n\
         [[route]]\nfrom = \"a\"\nto = \"b\"\n"
    ));
    let router = Router::start(in_process(cfg)).unwrap();
    let _apps: Vec<App> = ["one", "two"].iter().flat_map(|t| [app(a, t, true), app(b, t, false)]).collect();
    wait_until("one routed and one refused topic", || router.active().len() == 1 && router.refused_topics().len() == 1);
    let active = router.active()[0].topic.clone();
    let refused = router.refused_topics();
    assert_ne!(refused[0], active);
    assert!(["one", "two"].contains(&active.as_str()) && ["one", "two"].contains(&refused[0].as_str()));

    // The statistics topic on side b carries the routed topic's row.
    let p = Participant::new(&DomainConfig::loopback(b)).unwrap();
    let q = Qos::reliable().keep_last(1).transient_local();
    let t = Topic::<RouteStats>::new(&p, "partita/router/stats", &q).unwrap();
    let r = Reader::new(&t, &q).unwrap();
    let mut rows = Vec::new();
    wait_until("a statistics sample", || {
        rows.extend(r.take().unwrap().into_iter().filter_map(|s| s.value));
        rows.iter().any(|row: &RouteStats| row.topic == active)
    });
}

#[test]
fn downsampling_is_counted_apart_from_the_rate_limit() {
    let (a, b) = (domain(16), domain(17));
    let router = Router::start(in_process(two_sides(a, b, "[[route.topic]]\nname = \"thinned\"\ndownsample = 4"))).unwrap();
    let src = app(a, "thinned", true);
    let dst = app(b, "thinned", false);
    let w = src.w.as_ref().unwrap();
    wait_until("the router's reader", || w.matched_readers().unwrap() >= 1);
    std::thread::sleep(Duration::from_millis(500));
    for n in 0..100 {
        w.write(&Tick { n }).unwrap();
    }
    let row = || router.stats().into_iter().find(|r| r.topic == "thinned").unwrap();
    wait_until("all 100 samples counted by the router", || row().received >= 100);
    let row = row();
    assert_eq!((row.received, row.forwarded, row.dropped_downsample, row.dropped_rate), (100, 25, 75, 0), "one in four passes: {row:?}");
    std::thread::sleep(Duration::from_millis(300));
    let got: Vec<u32> = dst.r.as_ref().unwrap().take().unwrap().into_iter().filter_map(|s| s.value).map(|t| t.n).collect();
    assert_eq!(got, (0..100).step_by(4).collect::<Vec<u32>>());
}

/// A far reader that takes nothing and keeps at most 20 samples: the router's reliable writer fills its
/// history, each further forward waits its max blocking time and is dropped as `dropped_backpressure`; every
/// sample the router received is accounted for, and the far reader holds no more than it has room for.
#[test]
fn a_far_side_that_does_not_keep_up_makes_the_router_drop_and_count_not_hoard() {
    let (a, b) = (domain(18), domain(19));
    let router = Router::start(in_process(two_sides(a, b, ""))).unwrap();
    let src = app(a, "stalled", true);
    let qos = Qos::reliable().history(History::KeepAll).resource_limits(partita_dds::qos::ResourceLimits { max_samples: 20, max_instances: -1, max_samples_per_instance: -1 });
    let pb = Participant::new(&DomainConfig::loopback(b)).unwrap();
    let stalled = Reader::new(&Topic::<Tick>::new(&pb, "stalled", &qos).unwrap(), &qos).unwrap();
    let w = src.w.as_ref().unwrap();
    wait_until("the route", || !router.active().is_empty() && stalled.matched_writers().unwrap() >= 1);
    std::thread::sleep(Duration::from_millis(300));
    let row = || router.stats().into_iter().find(|r| r.topic == "stalled").unwrap();
    // Samples of 64 KiB fill the writer's history after a few: write for up to 10 s until 5 were dropped.
    let end = std::time::Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    while row().dropped_backpressure < 5 && std::time::Instant::now() < end {
        let _ = w.write(&Tick { n });
        n += 1;
    }
    let r = row();
    assert!(r.dropped_backpressure >= 5, "the far side took nothing for 10 s and nothing was dropped: {r:?}");
    assert_eq!(r.forwarded + r.dropped_backpressure + r.dropped_queue + r.errors, r.received, "every sample forwarded or counted: {r:?}");
    assert_eq!(r.errors, 0, "a full history is back-pressure, not an error: {r:?}");
    let held = stalled.take().unwrap().len();
    assert!(held <= 20, "the far reader holds at most its limit, {held}");
    assert!(crate_table_has_the_column(&partita_router::stats::table(&[r])));
}

fn crate_table_has_the_column(t: &str) -> bool {
    t.lines().next().is_some_and(|h| h.contains("DROP-BP") && h.contains("DROP-DS"))
}
