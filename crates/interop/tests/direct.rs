//! The probes among themselves, without a router: every pair of implementations, keyed (three instances, one
//! disposed, one unregistered) and keyless, live and as a late joiner, on loopback. What each pair shows here
//! is what a router between them must reproduce (crates/router/tests/vendors.rs).
use partita_interop::exchange::{exchange, Joining};
use partita_interop::{outcome, stamp, Implementation};

fn domain(n: u32) -> u32 {
    (std::process::id() % 20) * 10 + 30 + n
}

#[test]
fn every_pair_of_implementations_exchanges_keyed_and_keyless_samples_directly() {
    let dir = std::env::temp_dir().join(format!("partita-interop-direct-{}", std::process::id()));
    let mut report = String::new();
    let mut runs = Vec::new();
    let mut n = 0;
    for publisher in Implementation::ALL {
        for subscriber in Implementation::ALL {
            for keyless in [false, true] {
                n += 1;
                let d = domain(n % 10);
                let topic = format!("direct{n}");
                let dir = dir.join(&topic);
                runs.push((publisher, subscriber, keyless, std::thread::spawn(move || exchange(publisher, subscriber, (d, d), &topic, keyless, Joining::Live, &dir).unwrap())));
            }
        }
    }
    {
        for (publisher, subscriber, keyless, run) in runs {
            {
                let got = run.join().unwrap();
                let (samples, states) = outcome(&got.seen);
                report.push_str(&format!("{} -> {} {}: {} samples, states {states:?}\n", publisher.name(), subscriber.name(), if keyless { "keyless" } else { "keyed" }, samples.len()));
                assert_eq!(samples.len(), 6, "{report}{}", got.log);
                for (i, (_, seq, _, ts)) in samples.iter().enumerate() {
                    assert_eq!(*seq, Some(i as i32 + 1), "{}", got.log);
                    assert_eq!(*ts, stamp(i as i64 + 1), "the publisher's source timestamp: {}", got.log);
                }
                // Within one implementation the life cycle arrives whole. Across them it may not (Cyclone's Python
                // binding cannot turn Fast DDS's key-hash-only dispose into an instance); the router tests compare
                // with what each pair does here, not with the ideal.
                if !keyless && publisher == subscriber {
                    assert_eq!(states, vec![(Some(1), "alive".to_string()), (Some(2), "disposed".to_string()), (Some(3), "no_writers".to_string())], "{}", got.log);
                }
            }
        }
    }
    eprintln!("{report}");
    let _ = std::fs::remove_dir_all(&dir);
}
