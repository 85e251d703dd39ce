//! A listening reader's callback runs inside Cyclone: on its receive thread, or (in one process) inside the
//! writer's call into Cyclone. Nothing may unwind from there into C (undefined behaviour before Rust 1.81, a
//! process abort since), not even a panic raised while the reader handles the callback's own panic. These tests
//! run in a program of their own, so that a failure aborts only them.
use partita_dds::{DomainConfig, ListeningReader, Participant, Qos, Topic, Writer};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;
use common::{cameras, domain, Camera};

/// A panic payload that panics again when it is dropped.
struct PanicsWhenDropped;

impl Drop for PanicsWhenDropped {
    fn drop(&mut self) {
        panic!("the panic payload panicked when dropped");
    }
}

fn wait_for_panics(r: &ListeningReader, n: u64) {
    let end = Instant::now() + Duration::from_secs(10);
    while r.callback_panics().count < n {
        assert!(Instant::now() < end, "expected {n} panic(s), counted {:?}", r.callback_panics());
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_panic_payload_that_panics_when_dropped_stays_out_of_cyclone() {
    let cfg = DomainConfig::loopback(domain(0));
    let a = Participant::new(&cfg).unwrap();
    let b = Participant::new(&cfg).unwrap();
    let qos = Qos::reliable().keep_all();
    let tw = Topic::<Camera>::new(&a, "payload-bomb", &qos).unwrap();
    let tr = Topic::<Camera>::new(&b, "payload-bomb", &qos).unwrap();
    let (tx, rx) = mpsc::channel();
    let r = ListeningReader::typed(&tr, &qos, move |s| {
        let Some(cam) = s.value else { return };
        if cam.name == "bomb-1" {
            std::panic::panic_any(PanicsWhenDropped);
        }
        let _ = tx.send(cam.name);
    })
    .unwrap();
    let w = Writer::new(&tw, &qos).unwrap();
    w.wait_for_readers(1, Duration::from_secs(10)).unwrap();
    for c in cameras("bomb").iter().chain(&cameras("calm")) {
        w.write(c).unwrap();
    }
    let mut got = Vec::new();
    while got.len() < 5 {
        got.push(rx.recv_timeout(Duration::from_secs(10)).expect("the reader goes on delivering after the panic"));
    }
    assert_eq!(got, ["bomb-0", "bomb-2", "calm-0", "calm-1", "calm-2"]);
    wait_for_panics(&r, 1);
    assert_eq!(r.callback_panics().last_message.as_deref(), Some("(a panic without a message)"));
}

/// How many times the panicking log writer was called.
static LOG_WRITES: AtomicUsize = AtomicUsize::new(0);

/// A log destination that panics on every write: what a broken logging setup looks like from the reader.
struct PanickingWriter;

impl std::io::Write for PanickingWriter {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        LOG_WRITES.fetch_add(1, Ordering::SeqCst);
        panic!("the log writer is broken");
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_logger_that_panics_while_the_reader_reports_a_panic_stays_out_of_cyclone() {
    let cfg = DomainConfig::loopback(domain(1));
    let a = Participant::new(&cfg).unwrap();
    let b = Participant::new(&cfg).unwrap();
    let qos = Qos::reliable().keep_all();
    let tw = Topic::<Camera>::new(&a, "log-bomb", &qos).unwrap();
    let tr = Topic::<Camera>::new(&b, "log-bomb", &qos).unwrap();
    let (tx, rx) = mpsc::channel();
    let r = ListeningReader::typed(&tr, &qos, move |s| {
        let Some(cam) = s.value else { return };
        if cam.name == "log-1" {
            panic!("no room for camera {}", cam.name);
        }
        let _ = tx.send(cam.name);
    })
    .unwrap();
    let w = Writer::new(&tw, &qos).unwrap();
    w.wait_for_readers(1, Duration::from_secs(10)).unwrap();
    // In one process Cyclone delivers on the writing thread, so a logger installed for this thread is the one
    // the reader reports its callback's panic to.
    let logger = tracing_subscriber::fmt().with_ansi(false).with_writer(|| PanickingWriter).finish();
    tracing::subscriber::with_default(logger, || {
        for c in cameras("log").iter().chain(&cameras("calm")) {
            w.write(c).unwrap();
        }
    });
    let mut got = Vec::new();
    while got.len() < 5 {
        got.push(rx.recv_timeout(Duration::from_secs(10)).expect("the reader goes on delivering after the panic"));
    }
    assert_eq!(got, ["log-0", "log-2", "calm-0", "calm-1", "calm-2"]);
    wait_for_panics(&r, 1);
    assert_eq!(r.callback_panics().last_message.as_deref(), Some("no room for camera log-1"));
    assert!(LOG_WRITES.load(Ordering::SeqCst) > 0, "the panic report never reached the panicking logger");
}
