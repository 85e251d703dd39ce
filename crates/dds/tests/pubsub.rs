//! Typed and raw topics through Cyclone DDS on loopback, in one process (two participants).
use partita_dds::{qos::History, DomainConfig, InstanceState, Participant, Qos, RawReader, RawTopic, RawWriter, Reader, Topic, TopicType, Writer};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

mod common;
use common::{cameras, domain, Camera};

fn collect<T: TopicType>(r: &Reader<T>, want: usize, timeout: Duration) -> Vec<partita_dds::Sample<T>> {
    let end = Instant::now() + timeout;
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < end {
        got.extend(r.take_wait(Duration::from_millis(100)).unwrap());
    }
    got
}

#[test]
fn keyed_typed_topic_keeps_instances_and_dispose() {
    let cfg = DomainConfig::loopback(domain(0));
    let a = Participant::new(&cfg).unwrap();
    let b = Participant::new(&cfg).unwrap();
    let qos = Qos::reliable().history(History::KeepAll).transient_local();
    let tw = Topic::<Camera>::new(&a, "cameras", &qos).unwrap();
    let tr = Topic::<Camera>::new(&b, "cameras", &qos).unwrap();
    assert!(tw.is_keyed());
    let w = Writer::new(&tw, &qos).unwrap();
    let r = Reader::new(&tr, &qos).unwrap();
    w.wait_for_readers(1, Duration::from_secs(10)).unwrap();
    let cams = cameras("cam");
    for c in &cams {
        w.write(c).unwrap();
    }
    let got = collect(&r, 3, Duration::from_secs(10));
    let values: Vec<Camera> = got.iter().filter_map(|s| s.value.clone()).collect();
    assert_eq!(values, cams);
    let handles: std::collections::HashSet<u64> = got.iter().map(|s| s.info.instance_handle).collect();
    assert_eq!(handles.len(), 3, "three keys must be three instances");

    w.dispose(&cams[1]).unwrap();
    let got = collect(&r, 1, Duration::from_secs(10));
    assert_eq!(got.len(), 1);
    assert!(!got[0].info.valid_data);
    assert_eq!(got[0].info.instance_state, InstanceState::Disposed);
    let disposed = got[0].info.instance_handle;
    assert!(handles.contains(&disposed));
}

#[test]
fn raw_keyless_topic_round_trips_bytes() {
    let cfg = DomainConfig::loopback(domain(0));
    let a = Participant::new(&cfg).unwrap();
    let b = Participant::new(&cfg).unwrap();
    let qos = Qos::reliable().keep_last(16);
    let ta = RawTopic::keyless(&a, "raw", "partita::test::Blob").unwrap();
    let tb = RawTopic::keyless(&b, "raw", "partita::test::Blob").unwrap();
    let w = RawWriter::new(&ta, &qos).unwrap();
    let r = RawReader::new(&tb, &qos).unwrap();
    w.wait_for_readers(1, Duration::from_secs(10)).unwrap();
    let sample = partita_dds::cdr::to_vec(&(7u32, "hello".to_string())).unwrap();
    w.write(&sample).unwrap();
    assert!(r.wait(Duration::from_secs(10)).unwrap());
    let got = r.take().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data, sample);
    let (n, s): (u32, String) = partita_dds::cdr::from_slice(&got[0].data).unwrap();
    assert_eq!((n, s.as_str()), (7, "hello"));

    // The writer leaving produces an invalid (no-writers) sample; on a keyless raw topic it carries no bytes.
    drop(w);
    let end = Instant::now() + Duration::from_secs(10);
    let mut gone = Vec::new();
    while gone.is_empty() && Instant::now() < end {
        r.wait(Duration::from_millis(100)).unwrap();
        gone = r.take().unwrap();
    }
    assert_eq!(gone.len(), 1, "expected the no-writers notification");
    assert!(!gone[0].info.valid_data);
    assert!(gone[0].data.is_empty());
}

#[test]
fn a_second_configuration_for_one_domain_is_refused() {
    let d = domain(1);
    let _a = Participant::new(&DomainConfig::loopback(d)).unwrap();
    let other = DomainConfig::loopback(d).with(|s| s.max_participant_index = 3);
    let err = Participant::new(&other).unwrap_err();
    assert!(err.to_string().contains("another configuration"), "{err}");
}

#[test]
fn unsupported_types_are_clear_errors() {
    #[derive(Serialize, Deserialize)]
    struct WithOption {
        a: Option<u8>,
    }
    impl TopicType for WithOption {
        fn type_name() -> &'static str {
            "t::WithOption"
        }
    }
    #[derive(Serialize, Deserialize)]
    struct BadKey {
        a: u8,
    }
    impl TopicType for BadKey {
        fn type_name() -> &'static str {
            "t::BadKey"
        }
        fn key_fields() -> &'static [&'static str] {
            &["nope"]
        }
    }
    let p = Participant::new(&DomainConfig::loopback(domain(2))).unwrap();
    let e = Topic::<WithOption>::new(&p, "x", &Qos::new()).err().unwrap().to_string();
    assert!(e.contains("WithOption"), "{e}");
    let e = Topic::<BadKey>::new(&p, "y", &Qos::new()).err().unwrap().to_string();
    assert!(e.contains("nope"), "{e}");
}

#[test]
fn a_listening_reader_gets_every_sample_on_delivery() {
    let cfg = DomainConfig::loopback(domain(3));
    let a = Participant::new(&cfg).unwrap();
    let b = Participant::new(&cfg).unwrap();
    let qos = Qos::reliable().keep_all();
    let tw = Topic::<Camera>::new(&a, "listened", &qos).unwrap();
    let tr = Topic::<Camera>::new(&b, "listened", &qos).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let _r = partita_dds::ListeningReader::typed(&tr, &qos, move |s| {
        let _ = tx.send(s.value);
    })
    .unwrap();
    let w = Writer::new(&tw, &qos).unwrap();
    w.wait_for_readers(1, Duration::from_secs(10)).unwrap();
    let cams = cameras("listen");
    for c in &cams {
        w.write(c).unwrap();
    }
    let mut got = Vec::new();
    while got.len() < cams.len() {
        // In one process Cyclone delivers locally, on the writing thread; across processes, on its receive thread.
        let v = rx.recv_timeout(Duration::from_secs(10)).expect("sample delivered to the listener");
        got.push(v.expect("decodes"));
    }
    assert_eq!(got, cams);
}

/// What the process logs through `tracing`, from the first call on.
fn captured_log() -> std::sync::Arc<std::sync::Mutex<Vec<u8>>> {
    struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = log.clone();
    let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || Sink(sink.clone())).finish();
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber of this test program");
    log
}

#[test]
fn a_listening_reader_whose_callback_panics_counts_the_panic_and_keeps_delivering() {
    let log = captured_log();
    let cfg = DomainConfig::loopback(domain(4));
    let a = Participant::new(&cfg).unwrap();
    let b = Participant::new(&cfg).unwrap();
    let qos = Qos::reliable().keep_all();
    let tw = Topic::<Camera>::new(&a, "panicky", &qos).unwrap();
    let tr = Topic::<Camera>::new(&b, "panicky", &qos).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let r = partita_dds::ListeningReader::typed(&tr, &qos, move |s| {
        // The writer's unregistrations at the end carry no value.
        let Some(cam) = s.value else { return };
        if cam.name == "boom-1" {
            panic!("no room for camera {}", cam.name);
        }
        let _ = tx.send(cam.name);
    })
    .unwrap();
    assert_eq!(r.callback_panics(), partita_dds::CallbackPanics::default());
    let w = Writer::new(&tw, &qos).unwrap();
    w.wait_for_readers(1, Duration::from_secs(10)).unwrap();
    // The panic on boom-1 costs that sample only: boom-2, after it, and the next writes still arrive.
    for c in cameras("boom").iter().chain(&cameras("calm")) {
        w.write(c).unwrap();
    }
    let mut got = Vec::new();
    while got.len() < 5 {
        got.push(rx.recv_timeout(Duration::from_secs(10)).expect("the reader goes on delivering after a panic"));
    }
    assert_eq!(got, ["boom-0", "boom-2", "calm-0", "calm-1", "calm-2"]);
    let panics = r.callback_panics();
    assert_eq!(panics.count, 1, "{panics:?}");
    assert_eq!(panics.last_message.as_deref(), Some("no room for camera boom-1"));
    let logged = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    let line = logged.lines().find(|l| l.contains("no room for camera boom-1")).unwrap_or_else(|| panic!("the panic is logged: {logged:?}"));
    assert!(line.contains("ERROR") && line.contains("partita::dds::listener") && line.contains("listening reader on topic panicky"), "{line}");
    w.write(&cameras("boom")[1]).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while r.callback_panics().count < 2 {
        assert!(Instant::now() < end, "the second panic was not counted: {:?}", r.callback_panics());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(rx.try_recv().is_err(), "the sample whose callback panicked is not delivered");
}
