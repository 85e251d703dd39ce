//! Cyclone's own ddsperf, a DDS program partita did not write: `ping` on one domain, `pong` on another; round
//! trips complete only through the router (which mirrors each ddsperf participant on the other domain).
mod common;
use common::*;
use partita_router::Router;
use std::time::Duration;

fn roundtrips(out: &str) -> u64 {
    // ddsperf ping prints lines like "... size 12 mean 30.1us min ... cnt 1234" for each second with pongs.
    out.lines()
        .filter_map(|l| l.split(" cnt ").nth(1))
        .filter_map(|c| c.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// ping for `seconds` (pong 2 s longer), with the router between their domains or without.
fn run_ping(a: u32, b: u32, with_router: bool, seconds: u32) -> (u64, String) {
    let router = with_router.then(|| Router::start(two_sides(a, b, "both_ways = true")).unwrap());
    let _pong = Reap(Some(ddsperf(b, &["-D", &(seconds + 2).to_string(), "pong"])));
    // ddsperf ends itself after its time; the deadline only stops a ping that hangs.
    let ping = finish(ddsperf(a, &["-D", &seconds.to_string(), "ping", "200Hz"]), Duration::from_secs(30));
    assert!(ping.success.is_some(), "ddsperf ping did not end within 30 s (with router: {with_router}):\n{}", ping.text());
    let stats = router.as_ref().map(|r| r.stats()).unwrap_or_default();
    drop(router);
    // Every topic is routed both ways here (ddsperf has readers and writers of ping and pong), yet the router's
    // writers never deliver to its own readers: in one process that delivery runs inside the writer's call, in
    // the forwarding callback, and a sample forwarded back waited for that very callback (docs/router.md).
    let looped: u64 = stats.iter().map(|r| r.suppressed_loop).sum();
    assert_eq!(looped, 0, "the router received its own samples:\n{stats:#?}");
    (roundtrips(&ping.stdout), format!("{}\nrouter: {stats:#?}", ping.text()))
}

#[test]
fn ddsperf_ping_pong_complete_only_through_the_router() {
    let (a, b) = (domain(6), domain(7));
    // Without the router 2 s tell: on one domain ddsperf's first round trips come well within a second.
    let (without, out) = run_ping(a, b, false, 2);
    assert_eq!(without, 0, "ping and pong are on different domains: no round trip without a router\n{out}");
    let (with, out) = run_ping(a, b, true, 3);
    eprintln!("round trips through the router: {with}");
    // ddsperf checks that every ddsperf participant it discovers reads and writes what it does: the router's
    // mirror of pong on ping's domain holds a reader (for ping's writers' routes) and a writer (for pong's).
    assert!(out.starts_with("(exited with success)"), "ddsperf ping exits 0 through the router, as it does directly on one domain:\n{out}");
    assert!(with > 100, "expected round trips through the router, got {with}:\n{out}");
}
