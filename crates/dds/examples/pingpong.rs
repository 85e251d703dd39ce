//! Quick round-trip probe: `pingpong pong` in one process, `pingpong ping N SIZE [spin]` in another.
use partita_dds::{DomainConfig, Participant, Qos, RawReader, RawTopic, RawWriter};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let cfg = DomainConfig::loopback(42);
    let p = Participant::new(&cfg).unwrap();
    let qos = if std::env::var_os("PP_BE").is_some() { Qos::best_effort().keep_last(1) } else { Qos::reliable().keep_last(1) };
    let qos = if std::env::var_os("PP_KEEPALL").is_some() { qos.keep_all() } else { qos };
    let spin_pong = std::env::var_os("PP_SPIN_PONG").is_some();
    let req = RawTopic::keyless(&p, "probe_req", "probe::Msg").unwrap();
    let rep = RawTopic::keyless(&p, "probe_rep", "probe::Msg").unwrap();
    if args[1] == "pong-listener" {
        let w = std::sync::Arc::new(RawWriter::new(&rep, &qos).unwrap());
        let _r = partita_dds::ListeningReader::new(&req, &qos, move |b, info| {
            if info.valid_data {
                w.write(b).unwrap();
            }
        })
        .unwrap();
        std::thread::sleep(Duration::from_secs(3600));
    }
    if args[1] == "pong" {
        let r = RawReader::new(&req, &qos).unwrap();
        let w = RawWriter::new(&rep, &qos).unwrap();
        let mut buf = Vec::new();
        loop {
            if !spin_pong {
                r.wait(Duration::from_secs(30)).unwrap();
            }
            buf.clear();
            r.take_batch(|b, info| if info.valid_data { buf.push(b.to_vec()) }).unwrap();
            for b in &buf {
                w.write(b).unwrap();
            }
        }
    } else {
        let n: usize = args[2].parse().unwrap();
        let size: usize = args[3].parse().unwrap();
        let spin = args.get(4).is_some();
        let w = RawWriter::new(&req, &qos).unwrap();
        let r = RawReader::new(&rep, &qos).unwrap();
        w.wait_for_readers(1, Duration::from_secs(10)).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let sample = partita_dds::cdr::to_vec(&vec![7u8; size]).unwrap();
        let mut rtts = Vec::new();
        for i in 0..n + 1000 {
            let t = Instant::now();
            w.write(&sample).unwrap();
            let mut got = 0;
            while got == 0 {
                if !spin {
                    r.wait(Duration::from_secs(5)).unwrap();
                }
                got = r.take_batch(|_, _| {}).unwrap();
            }
            if i >= 1000 {
                rtts.push(t.elapsed().as_nanos() as f64 / 1000.0);
            }
        }
        rtts.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let avg: f64 = rtts.iter().sum::<f64>() / rtts.len() as f64;
        println!("size {size} n {n} spin {spin}: min {:.1} p50 {:.1} avg {:.1} p99 {:.1} max {:.1} us",
            rtts[0], rtts[rtts.len() / 2], avg, rtts[rtts.len() * 99 / 100], rtts[rtts.len() - 1]);
    }
}
