//! Topics keyed by key hash (`RawTopic::keyed_by_hash`) between two processes on loopback: the test re-runs
//! itself as the writer, so that samples cross the network and are rebuilt from received fragments (within one
//! process Cyclone hands samples over without serializing them). Samples of 100 B, 70 KB and 200 KB (more than
//! one 64,000-byte fragment on loopback) arrive byte for byte with the key hash they were written with; a
//! key-only dispose that carries only a key hash arrives as a dispose of that instance, its key hash as payload.
use partita_dds::{DomainConfig, InstanceState, ListeningReader, Participant, Qos, RawTopic, RawWriter, WriteKind};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CHILD: &str = "PARTITA_KEYHASH_WRITER_DOMAIN";
const TOPIC: &str = "keyhash";
const TYPE: &str = "partita::test::Opaque";

/// The n-th sample: a CDR header and `len` bytes that depend on n and their position.
fn sample(n: u8, len: usize) -> Vec<u8> {
    let mut v = vec![0, 1, 0, 0];
    v.extend((0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(n)));
    v
}

fn key_hash(n: u8) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[3] = n;
    k
}

const SIZES: [usize; 3] = [100, 70_000, 200_000];

fn qos() -> Qos {
    Qos::reliable().history(partita_dds::qos::History::KeepAll)
}

/// The writer, in the child process: waits for the parent's reader, writes the three samples, then disposes the
/// instance of the second by its key hash alone, and stays until the parent is done.
fn write(domain: u32) {
    let p = Participant::new(&DomainConfig::loopback(domain)).unwrap();
    let t = RawTopic::keyed_by_hash(&p, TOPIC, TYPE).unwrap();
    let w = RawWriter::new(&t, &qos()).unwrap();
    w.wait_for_readers(1, Duration::from_secs(20)).unwrap();
    for (n, len) in SIZES.iter().enumerate() {
        w.forward_with_key_hash(&sample(n as u8, *len), WriteKind::Write, None, Some(key_hash(n as u8))).unwrap();
    }
    w.forward_with_key_hash(&[], WriteKind::Dispose, None, Some(key_hash(1))).unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    while w.matched_readers().unwrap() > 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn samples_and_a_key_hash_only_dispose_cross_between_processes_whole_and_with_their_key_hashes() {
    if let Ok(d) = std::env::var(CHILD) {
        return write(d.parse().unwrap());
    }
    let domain = (std::process::id() % 50) * 4 + 30;
    let p = Participant::new(&DomainConfig::loopback(domain)).unwrap();
    let t = RawTopic::keyed_by_hash(&p, TOPIC, TYPE).unwrap();
    let got: Arc<Mutex<Vec<(Vec<u8>, partita_dds::SampleInfo)>>> = Arc::default();
    let sink = got.clone();
    let reader = ListeningReader::new(&t, &qos(), move |bytes, info| sink.lock().unwrap().push((bytes.to_vec(), info))).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "samples_and_a_key_hash_only_dispose_cross_between_processes_whole_and_with_their_key_hashes", "--nocapture"])
        .env(CHILD, domain.to_string())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    while got.lock().unwrap().len() < 4 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(reader);
    let _ = child.wait();
    let got = got.lock().unwrap();
    assert_eq!(got.len(), 4, "three samples and a dispose: {:?}", got.iter().map(|(b, i)| (b.len(), i.valid_data, i.key_hash)).collect::<Vec<_>>());
    for (n, len) in SIZES.iter().enumerate() {
        let (bytes, info) = &got[n];
        assert!(info.valid_data);
        assert_eq!(info.key_hash, Some(key_hash(n as u8)), "sample {n}");
        assert!(bytes == &sample(n as u8, *len), "sample {n} ({} bytes, {} received) differs", len + 4, bytes.len());
    }
    let (bytes, info) = &got[3];
    assert!(!info.valid_data);
    assert_eq!(info.instance_state, InstanceState::Disposed);
    assert_eq!(info.key_hash, Some(key_hash(1)));
    assert_eq!(bytes.as_slice(), key_hash(1).as_slice(), "a key-hash-only sample carries its key hash as payload");
    assert_eq!(info.instance_handle, got[1].1.instance_handle, "the dispose is of the second sample's instance");
}
