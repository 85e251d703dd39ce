//! The router between two domains, with DDS programs partita did not write (Cyclone's Python binding) on both
//! sides: keyed instances with dispose cross as instances; a TRANSIENT_LOCAL writer's history reaches a reader
//! that starts after it; a blocked topic never crosses.
mod common;
use common::*;
use partita_router::Router;
use std::time::Duration;

/// The JSON lines a subscribing peer printed; it ends itself when it has what it waits for or after its own
/// timeout, and is killed if it is still running a minute later.
fn lines(child: std::process::Child) -> (bool, Vec<serde_json::Value>, String) {
    let sub = finish(child, Duration::from_secs(60));
    let got = sub.stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    (sub.success == Some(true), got, sub.text())
}

#[test]
fn keyed_instances_and_dispose_cross_the_router() {
    let (a, b) = (domain(0), domain(1));
    let router = Router::start(two_sides(a, b, "")).unwrap();
    let sub = camera_peer("sub", b, &["20"]);
    let _publisher = Reap(Some(camera_peer("pub", a, &["20"])));
    let (ok, got, out) = lines(sub);
    let stats = router.stats();
    assert!(ok, "the reader on the far domain did not get 3 cameras and a dispose:\n{out}\n{stats:#?}");
    let ids: Vec<u64> = got.iter().filter_map(|v| v.get("id")?.as_u64()).collect();
    assert_eq!(ids, vec![0, 1, 2], "{out}");
    let two = got.iter().find(|v| v.get("id").and_then(|i| i.as_u64()) == Some(2)).unwrap();
    assert_eq!(two["name"], "py-2");
    assert_eq!(two["frame"].as_array().unwrap().len(), 12);
    assert!(got.iter().any(|v| v.get("disposed").is_some()), "{out}");
    let row = stats.iter().find(|r| r.topic == "cameras").expect("a route for cameras");
    assert!(row.forwarded >= 3, "{row:?}");
}

/// An unregister (its writer without autodispose) reaches the far reader as an unregister (no writers), as it
/// does directly: the router's writer does not add a dispose. Before, it arrived as NOT_ALIVE_DISPOSED.
#[test]
fn an_unregister_crosses_the_router_as_an_unregister() {
    // Directly, on one domain: what the router must reproduce.
    let d = domain(8);
    let sub = camera_peer("sub", d, &["20", "unregister"]);
    let _publisher = Reap(Some(camera_peer("pub", d, &["20", "unregister"])));
    let (ok, direct, out) = lines(sub);
    assert!(ok && direct.iter().any(|v| v.get("unregistered").is_some()) && !direct.iter().any(|v| v.get("disposed").is_some()), "directly:\n{out}");
    // Through the router.
    let (a, b) = (domain(9), domain(10));
    let _router = Router::start(two_sides(a, b, "")).unwrap();
    let sub = camera_peer("sub", b, &["20", "unregister"]);
    let _publisher = Reap(Some(camera_peer("pub", a, &["20", "unregister"])));
    let (ok, routed, out) = lines(sub);
    assert!(ok, "the far reader did not get 3 cameras and camera 1 not alive:\n{out}");
    assert!(routed.iter().any(|v| v.get("unregistered").is_some()), "{out}");
    assert!(!routed.iter().any(|v| v.get("disposed").is_some()), "the unregister became a dispose:\n{out}");
}

#[test]
fn transient_local_history_reaches_a_late_reader() {
    let (a, b) = (domain(2), domain(3));
    // Trigger on the writer alone: the route exists before any reader on the far side.
    let router = Router::start(two_sides(a, b, "trigger = \"writer\"")).unwrap();
    let _publisher = Reap(Some(camera_peer("pub", a, &["20", "nodispose"])));
    // Wait until the router has taken the writer's samples, then start the reader.
    let end = std::time::Instant::now() + Duration::from_secs(20);
    while router.stats().iter().map(|r| r.forwarded).sum::<u64>() < 3 && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(router.stats().iter().map(|r| r.forwarded).sum::<u64>() >= 3, "{:#?}", router.stats());
    std::thread::sleep(Duration::from_millis(300));
    let (ok, got, out) = lines(camera_peer("sub", b, &["20", "nodispose"]));
    assert!(ok, "the late reader did not get the history:\n{out}");
    let ids: Vec<u64> = got.iter().filter_map(|v| v.get("id")?.as_u64()).collect();
    assert_eq!(ids, vec![0, 1, 2], "{out}");
}

#[test]
fn a_blocked_topic_never_crosses() {
    let (a, b) = (domain(4), domain(5));
    let router = Router::start(two_sides(a, b, "trigger = \"either\"\nblock = [\"cam*\"]")).unwrap();
    let _publisher = Reap(Some(camera_peer("pub", a, &["6"])));
    let (ok, got, out) = lines(camera_peer("sub", b, &["4"]));
    assert!(!ok && got.is_empty(), "a blocked topic crossed:\n{out}");
    assert!(router.stats().iter().all(|r| r.topic != "cameras"), "{:#?}", router.stats());
}
