//! Participant mirroring gives a topic one forwarder per application participant that writes it; every
//! forwarder's reader receives every writer's samples, yet each sample crosses once: two participants writing
//! one topic on one side, a reader on the other gets each of their samples exactly once.
mod common;
use common::*;
use partita_dds::{qos::History, DomainConfig, Participant, Qos, Reader, Topic, Writer};
use partita_router::Router;
use std::time::{Duration, Instant};

#[test]
fn two_participants_writing_one_topic_are_forwarded_once_each() {
    let (a, b) = (domain(20), domain(21));
    let router = Router::start(in_process(two_sides(a, b, ""))).unwrap();
    let qos = Qos::reliable().history(History::KeepAll);
    let pb = Participant::new(&DomainConfig::loopback(b)).unwrap();
    let r = Reader::new(&Topic::<Tick>::new(&pb, "ticks", &qos).unwrap(), &qos).unwrap();
    let writers: Vec<(Participant, Writer<Tick>)> = (0..2)
        .map(|_| {
            let p = Participant::new(&DomainConfig::loopback(a)).unwrap();
            let w = Writer::new(&Topic::<Tick>::new(&p, "ticks", &qos).unwrap(), &qos).unwrap();
            (p, w)
        })
        .collect();
    // One forwarder per writing participant, each matched with the reader on b.
    wait_until("a forwarder per writing participant", || router.active().len() == 2);
    wait_until("the forwarders' writers matched with the reader", || r.matched_writers().unwrap_or(0) >= 2);
    std::thread::sleep(Duration::from_millis(300));
    for (i, (_, w)) in writers.iter().enumerate() {
        for n in 0..50 {
            w.write(&Tick { n: i as u32 * 1000 + n }).unwrap();
        }
    }
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        got.extend(r.take().unwrap().into_iter().filter_map(|s| s.value).map(|t| t.n));
        std::thread::sleep(Duration::from_millis(20));
    }
    got.sort();
    let want: Vec<u32> = (0..50).chain(1000..1050).collect();
    assert_eq!(got, want, "each sample of both writers once\n{:#?}", router.stats());
}
