//! Hot reload of the route table (`Router::reload`): a topic whose route the new tables keep loses no sample
//! and gets none twice while the table is swapped under a flood (its route renumbered, since the new table puts
//! another route before it); a topic added by a reload starts being forwarded and stops when a later reload
//! removes it; a changed topic override makes its forwarder again; a lowered `max_topics` ends the topics past
//! it; a bad table is refused naming the field, and a change of sides is refused as needing a restart, while the
//! running table keeps forwarding.
mod common;
use common::*;
use partita_dds::{qos::History, DomainConfig, Participant, Qos, Reader, Topic, Writer};
use partita_router::{ReloadError, Router, RouterConfig};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A router between loopback domains `a` and `b`, for this process's applications, with `routes` (TOML
/// `[[route]]` tables) and the top-level `keys`.
fn table(a: u32, b: u32, keys: &str, routes: &str) -> RouterConfig {
    in_process(config(&format!(
        "stats_period = \"200ms\"\n{keys}\n[[side]]\nname = \"a\"\ndomain = {a}\n[[side]]\nname = \"b\"\ndomain = {b}\n{routes}\n"
    )))
}

fn route(allow: &str, extra: &str) -> String {
    format!("[[route]]\nfrom = \"a\"\nto = \"b\"\nallow = [\"{allow}\"]\n{extra}\n")
}

fn qos() -> Qos {
    Qos::reliable().history(History::KeepAll)
}

/// A reader of `topic` on `domain`, with its participant.
struct Sub {
    _p: Participant,
    r: Reader<Tick>,
}

fn sub(domain: u32, topic: &str) -> Sub {
    let p = Participant::new(&DomainConfig::loopback(domain)).unwrap();
    let t = Topic::<Tick>::new(&p, topic, &qos()).unwrap();
    Sub { r: Reader::new(&t, &qos()).unwrap(), _p: p }
}

struct Pub {
    _p: Participant,
    w: Writer<Tick>,
}

fn publisher(domain: u32, topic: &str) -> Pub {
    let p = Participant::new(&DomainConfig::loopback(domain)).unwrap();
    let t = Topic::<Tick>::new(&p, topic, &qos()).unwrap();
    Pub { w: Writer::new(&t, &qos()).unwrap(), _p: p }
}

fn take(s: &Sub) -> Vec<u32> {
    s.r.take().unwrap().into_iter().filter_map(|s| s.value).map(|t| t.n).collect()
}

/// Whether the router runs a forwarder of `topic`.
fn routes(router: &Router, topic: &str) -> bool {
    router.active().iter().any(|k| k.topic == topic)
}

#[test]
fn a_kept_route_loses_no_sample_while_the_table_is_reloaded_under_a_flood() {
    let (a, b) = (domain(0), domain(1));
    let only_flood = table(a, b, "", &route("flood", ""));
    // Topic "extra" gets a route of its own, put first: the flood's route becomes route 1.
    let with_extra = table(a, b, "", &format!("{}{}", route("extra", ""), route("flood", "")));
    let router = Router::start(only_flood.clone()).unwrap();

    let flood_sub = sub(b, "flood");
    let extra_sub = sub(b, "extra");
    let extra_pub = publisher(a, "extra");
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU32::new(0));
    let writer = {
        let (stop, written) = (stop.clone(), written.clone());
        std::thread::spawn(move || {
            let p = publisher(a, "flood");
            wait_until("the router's reader of flood", || p.w.matched_readers().unwrap() >= 1);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                p.w.write(&Tick { n }).unwrap();
                n += 1;
                written.store(n, Ordering::Relaxed);
            }
            // Kept until every sample is acknowledged: the reader must get all of them.
            std::thread::sleep(Duration::from_secs(2));
            n
        })
    };
    let mut got: Vec<u32> = Vec::new();
    wait_until("the flood crossing", || {
        got.extend(take(&flood_sub));
        got.len() > 1000
    });
    assert!(!routes(&router, "extra"), "extra has no route yet: {:?}", router.active());

    let mut extra_n = 0;
    let before = written.load(Ordering::Relaxed);
    for round in 0..3 {
        // Add extra's route.
        let s = router.reload(with_extra.clone()).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!((s.kept, s.removed, s.restarted), (1, 0, 0), "round {round}: the flood's forwarder is kept: {s:?}");
        assert_eq!(s.reloads, 2 * round + 1);
        wait_until("extra forwarded after it was added", || {
            extra_pub.w.write(&Tick { n: extra_n }).unwrap();
            extra_n += 1;
            got.extend(take(&flood_sub));
            !take(&extra_sub).is_empty()
        });

        // A bad table is refused by its validation, naming the field; the running table stays.
        let bad_tables = [("", route("flood", "").replace("to = \"b\"", "to = \"c\""), "route[0].to"), ("stats_period = \"soon\"", route("flood", ""), "stats_period")];
        for (keys, routes, field) in bad_tables {
            let text = format!("{keys}\n[[side]]\nname = \"a\"\ndomain = {a}\n[[side]]\nname = \"b\"\ndomain = {b}\n{routes}");
            let e = RouterConfig::parse(&text, Path::new("reload.toml")).expect_err("a bad table");
            assert!(e.iter().any(|e| e.field == field && e.file == "reload.toml" && !e.fix.is_empty()), "{field}: {e:?}");
        }
        // A change of sides needs a restart: refused, naming the side.
        let moved = table(a, domain(2), "", &route("flood", ""));
        match router.reload(moved) {
            Err(ReloadError::NeedsRestart(diff)) => assert!(diff.iter().any(|(f, _)| f == "side[1]"), "{diff:?}"),
            other => panic!("a change of sides was not refused: {other:?}"),
        }
        assert!(routes(&router, "extra"), "the refused reloads left the running table: {:?}", router.active());

        // Remove extra's route: it stops, the flood goes on.
        let s = router.reload(only_flood.clone()).unwrap();
        assert_eq!((s.kept, s.removed, s.restarted, s.added), (1, 1, 0, 0), "round {round}: {s:?}");
        assert!(!routes(&router, "extra"), "{:?}", router.active());
        take(&extra_sub);
        for _ in 0..20 {
            extra_pub.w.write(&Tick { n: extra_n }).unwrap();
            extra_n += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
        got.extend(take(&flood_sub));
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(take(&extra_sub), Vec::<u32>::new(), "round {round}: extra crossed after its route was removed");
    }
    assert_eq!(router.reloads(), 6);
    assert!(written.load(Ordering::Relaxed) > before, "the flood went on during the reloads");
    // One forwarder carried the flood throughout the reloads: none of its figures were retired (its route ends
    // only with its writer, below).
    let stats = router.stats();
    assert!(!stats.iter().any(|r| r.topic == "flood" && !r.active), "{stats:#?}");
    assert_eq!(stats.iter().filter(|r| r.topic == "extra" && !r.active).count(), 3, "extra's figures, retired at each removal: {stats:#?}");

    stop.store(true, Ordering::Relaxed);
    let total = writer.join().expect("the flooding writer");
    let end = Instant::now() + Duration::from_secs(30);
    while got.len() < total as usize && Instant::now() < end {
        got.extend(flood_sub.r.take_wait(Duration::from_millis(100)).unwrap().into_iter().filter_map(|s| s.value).map(|t| t.n));
    }
    let stats = router.stats();
    let first_wrong = got.iter().enumerate().find(|(i, n)| **n != *i as u32).map(|(i, n)| (i, *n));
    assert!(
        got.len() == total as usize && first_wrong.is_none(),
        "the reader got {} of {total} samples; first out of place (index, value): {first_wrong:?}\n{stats:#?}",
        got.len()
    );
}

#[test]
fn a_changed_override_remakes_its_forwarder_and_a_lowered_cap_ends_the_topics_past_it() {
    let (a, b) = (domain(3), domain(4));
    let router = Router::start(table(a, b, "", &route("*", ""))).unwrap();
    let _apps: Vec<(Pub, Sub)> = ["one", "two"].iter().map(|t| (publisher(a, t), sub(b, t))).collect();
    wait_until("both topics routed", || routes(&router, "one") && routes(&router, "two"));

    // An override for "two": its forwarder is made again; "one" is kept.
    let s = router.reload(table(a, b, "", &route("*", "[[route.topic]]\nname = \"two\"\nmax_rate = 1000.0"))).unwrap();
    assert_eq!((s.kept, s.restarted, s.removed), (1, 1, 0), "{s:?}");
    wait_until("two routed again", || routes(&router, "two"));
    assert!(router.stats().iter().any(|r| r.topic == "two" && !r.active), "the first forwarder of two was retired: {:#?}", router.stats());

    // The same table again changes nothing.
    let same = table(a, b, "", &route("*", "[[route.topic]]\nname = \"two\"\nmax_rate = 1000.0"));
    let s = router.reload(same.clone()).unwrap();
    assert_eq!((s.kept, s.restarted, s.removed, s.added), (2, 0, 0, 0), "{s:?}");

    // max_topics lowered to 1: "one" (first by name) stays, "two" ends and is refused.
    let s = router.reload(table(a, b, "max_topics = 1", &route("*", "[[route.topic]]\nname = \"two\"\nmax_rate = 1000.0"))).unwrap();
    assert_eq!(s.kept, 2, "both still wanted by the table: {s:?}");
    wait_until("two ended and refused", || !routes(&router, "two") && router.refused_topics() == ["two"]);
    assert!(routes(&router, "one"), "{:?}", router.active());

    // Other fields a running router cannot change.
    let renamed = table(a, b, "name = \"other\"", &route("*", ""));
    match router.reload(renamed) {
        Err(e @ ReloadError::NeedsRestart(_)) => {
            let errors = e.config_errors("r.toml");
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert!(errors[0].to_string().starts_with("r.toml: name: "), "{}", errors[0]);
            assert!(errors[0].fix.contains("restart"), "{}", errors[0]);
        }
        other => panic!("a new name was not refused: {other:?}"),
    }
    let mut different = same;
    different.mirror_participants = false;
    assert!(matches!(router.reload(different), Err(ReloadError::NeedsRestart(d)) if d[0].0 == "mirror_participants"));
}
