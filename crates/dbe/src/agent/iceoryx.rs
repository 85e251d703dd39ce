//! The benchmark's topics over [iceoryx2](https://iceoryx.io) 0.10: zero-copy shared-memory publish-subscribe
//! between the processes of one host, with no daemon and no network. It is the floor for shared memory on one
//! host: a sample is written once into the publisher's shared-memory segment and the subscriber reads it in
//! place; only an offset travels through a lock-free queue.
//!
//! # Services
//!
//! Each topic is an iceoryx2 publish-subscribe service of the same name plus an iceoryx2 *event* service of the
//! same name (iceoryx2 tells services apart by name and messaging pattern):
//!
//! - `{topic}_pub`: payload `[u8]` (a dynamic slice of exactly the data bytes, at most [`MAX_DATA`]) with the
//!   `i32` sequence number in the user header; the writer loans the slice in its segment and copies the data
//!   bytes in once.
//! - `{topic}_ack`: payload `i32`, the sequence number.
//!
//! After every sample the writer notifies the event service, and a reader blocks on its event listener (a
//! counting bit set in shared memory plus a Unix datagram socket for the wake-up; a datagram is sent only to a
//! listener not already notified, so a fast writer mostly pays two atomic operations) with the caller's
//! timeout. We measured a sleep-poll loop of the subscriber against it (ping-pong, 2 CPUs, p50 round trip):
//!
//! | wait | normal scheduling | SCHED_FIFO, one CPU | SCHED_FIFO, a CPU each |
//! |---|---|---|---|
//! | event listener (chosen) | 12-24 µs | 14-16 µs | 22-25 µs |
//! | poll, 10 µs sleeps | 67-69 µs (50 µs timer slack) | 18-22 µs | 15-19 µs |
//! | poll, 1 µs sleeps | 60 µs | never finished | 5-8 µs |
//!
//! The 1 µs poll is a busy spin in disguise: under SCHED_FIFO a sleep that short ends before the kernel
//! switches away, so the loop never leaves the CPU, and two agents on one CPU starved each other (no
//! progress in 60 s). The 10 µs poll costs a waiting agent a third of a CPU (1.6 s of CPU in 5 s idle, the
//! listener 0.03 s) and is slower unless each agent has a CPU to itself. We chose the listener: it never
//! spins, costs nothing while idle, and is the fastest wherever the agents share a CPU; where they do not,
//! its round trip includes waking an idle CPU. There is no busy spin on the agent's path (the benchmark runs
//! under SCHED_FIFO on 2 CPUs), with the one exception iceoryx2 itself makes: a reliable keep-all writer
//! whose reader's buffer is full retries with up to 10 000 `sched_yield`s, then 100 µs sleeps, then 10 ms
//! sleeps, until the reader took a sample (iceoryx2's `AdaptiveWait`).
//!
//! The DDS domain becomes the iceoryx2 *domain*, the prefix of every resource name (`iox2_dbe{domain}_`), so
//! agents of different domains never see each other. The process's signal handlers are left alone.
//!
//! # QoS
//!
//! Shared memory loses no sample on the way, so a sample is only ever lost when a reader's buffer is full, and
//! what happens then is the whole QoS:
//!
//! | QoS choice | iceoryx2 |
//! |---|---|
//! | keep-last N, reliable or best-effort | safe overflow: the reader's buffer holds N samples and the newest replaces the oldest, the writer never blocks (DDS keep-last: the reader keeps the last N; reliability only repairs losses on the wire, and there are none) |
//! | keep-all, reliable | no overflow, `RetryUntilDelivered`: the writer waits until every reader has room (DDS reliable keep-all with a resource limit: `write` blocks); the buffer holds [`KEEP_ALL_DEPTH`] samples, since an iceoryx2 buffer cannot grow. Unlike DDS the wait has no `max_blocking_time`: it lasts while the reader is connected |
//! | keep-all, best-effort | no overflow, `DiscardData`: a reader whose [`KEEP_ALL_DEPTH`] buffer is full does not get the new sample, the writer never waits (DDS best-effort keep-all at its resource limit rejects the new sample) |
//! | volatile | no history: a reader gets what is written after it connected |
//! | transient-local, keep-last N | the service keeps a history of N samples per writer and a reader asks for all N when it connects (iceoryx2 delivers history when the writer next updates its connections: at its next write, and at once when [`Channel::matched`] sees a new reader) |
//! | transient-local, keep-all | refused ([`AgentError::Unsupported`]): iceoryx2's history is a fixed ring, it cannot keep all |
//!
//! All endpoints of one agent live in one iceoryx2 node. Each service takes up to [`MAX_PORTS`] writers and
//! [`MAX_PORTS`] readers, enough for the 1-to-n tests.
//!
//! # Threads
//!
//! The channel uses the `ipc_threadsafe` service variant, whose ports keep their shared state behind a mutex
//! instead of an `Rc`, so the channel is `Send` without `unsafe`; an uncontended lock costs some 20 ns against
//! round trips of microseconds.
//!
//! # Files
//!
//! iceoryx2 keeps static service and node descriptions under `/tmp/iceoryx2/` (`services/`, `nodes/`), the Unix
//! sockets of the event services there too, and its shared memory in `/dev/shm/iox2_dbe{domain}_*`. So two
//! agents must share `/tmp` and `/dev/shm`; they need not share a network, PID or mount namespace (tested:
//! each agent in its own). A confined partition mounts its own tmpfs on both, so iceoryx2 agents talk only
//! within one partition or between unconfined ones. Everything is removed when the last node of a service
//! drops it, except one 16-byte node counter per domain (`/dev/shm/iox2_dbe{domain}_*.global_mgmt`, kept
//! on purpose). A killed process's files stay until the next node of the same domain starts, which removes
//! the resources of dead nodes (found by a file lock that the kernel releases when a process dies): a topic
//! can even be used again after a `kill -9`.
use crate::agent::channel::{Channel, ChannelConfig, Durability, History, Matched, Reliability, MAX_DATA};
use crate::agent::AgentError;
use iceoryx2::config::Config;
use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::port::update_connections::UpdateConnections;
use iceoryx2::prelude::*;
use iceoryx2::service::port_factory::{event, publish_subscribe};
use std::fmt::Debug;
use std::time::{Duration, Instant};

const IMPL: &str = "iceoryx2";

/// The reader buffer of a keep-all topic: iceoryx2 buffers have a fixed size, and a writer's segment holds
/// `MAX_PORTS * (KEEP_ALL_DEPTH + 2)` samples of up to 16 KiB (touched only as far as used).
pub const KEEP_ALL_DEPTH: usize = 256;
/// The most writers, readers and nodes of one service.
pub const MAX_PORTS: usize = 8;

type Svc = ipc_threadsafe::Service;

fn err(what: impl Into<String>, e: impl std::fmt::Display) -> AgentError {
    AgentError::middleware(IMPL, what, e)
}

/// How deep the readers' buffers are and what a writer does when one is full.
#[derive(Debug, Clone, Copy)]
struct Qos {
    depth: usize,
    safe_overflow: bool,
    backpressure: BackpressureStrategy,
    history: usize,
}

fn map_qos(cfg: &ChannelConfig) -> Result<Qos, AgentError> {
    let q = cfg.qos;
    let (depth, safe_overflow, backpressure) = match (q.history, q.reliability) {
        (History::KeepLast(0), _) => {
            return Err(AgentError::Unsupported { implementation: IMPL, what: "history keep-last:0".into() })
        }
        (History::KeepLast(n), _) => (n as usize, true, BackpressureStrategy::DiscardData),
        (History::KeepAll, Reliability::Reliable) => (KEEP_ALL_DEPTH, false, BackpressureStrategy::RetryUntilDelivered),
        (History::KeepAll, Reliability::BestEffort) => (KEEP_ALL_DEPTH, false, BackpressureStrategy::DiscardData),
    };
    let history = match (q.durability, q.history) {
        (Durability::Volatile, _) => 0,
        (Durability::TransientLocal, History::KeepLast(n)) => n as usize,
        (Durability::TransientLocal, History::KeepAll) => {
            return Err(AgentError::Unsupported {
                implementation: IMPL,
                what: "durability transient-local with history keep-all (its history is a fixed ring)".into(),
            })
        }
    };
    Ok(Qos { depth, safe_overflow, backpressure, history })
}

struct Writer<P: Debug + ZeroCopySend + IceoryxSend + ?Sized + 'static, H: Debug + ZeroCopySend> {
    publisher: Publisher<Svc, P, H>,
    notifier: Notifier<Svc>,
    service: publish_subscribe::PortFactory<Svc, P, H>,
    _events: event::PortFactory<Svc>,
    /// Readers seen by [`Channel::matched`], to hand history to new ones at once.
    readers: usize,
    history: bool,
}

impl<P: Debug + ZeroCopySend + IceoryxSend + ?Sized + 'static, H: Debug + ZeroCopySend> Writer<P, H> {
    fn notify(&self, topic: &str) -> Result<(), AgentError> {
        self.notifier.notify().map_err(|e| err(format!("notify {topic}"), e))?;
        Ok(())
    }

    /// The readers of the service; connects new ones and hands them the history.
    fn readers(&mut self, topic: &str) -> Result<u32, AgentError> {
        let n = self.service.dynamic_config().number_of_subscribers();
        if n != self.readers {
            self.publisher.update_connections().map_err(|e| err(format!("update connections of {topic}"), e))?;
            if self.history && n > self.readers {
                self.notify(topic)?;
            }
            self.readers = n;
        }
        Ok(n as u32)
    }
}

struct Reader<P: Debug + ZeroCopySend + IceoryxSend + ?Sized + 'static, H: Debug + ZeroCopySend> {
    subscriber: Subscriber<Svc, P, H>,
    listener: Listener<Svc>,
    service: publish_subscribe::PortFactory<Svc, P, H>,
    _events: event::PortFactory<Svc>,
}

impl<P: Debug + ZeroCopySend + IceoryxSend + ?Sized + 'static, H: Debug + ZeroCopySend> Reader<P, H> {
    fn writers(&self) -> u32 {
        self.service.dynamic_config().number_of_publishers() as u32
    }

    /// Calls `drain` (which takes what is there and says how many) until it took something or `timeout` ran
    /// out, sleeping in between on the event listener.
    fn wait(
        &self,
        topic: &str,
        timeout: Duration,
        mut drain: impl FnMut(&Subscriber<Svc, P, H>) -> Result<usize, AgentError>,
    ) -> Result<usize, AgentError> {
        let deadline = Instant::now() + timeout;
        loop {
            let n = drain(&self.subscriber)?;
            if n > 0 {
                return Ok(n);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(0);
            }
            // Returns at once while notifications of samples already taken are pending; they are consumed
            // here, and the next round waits for real.
            self.listener.timed_wait(|_| {}, deadline - now).map_err(|e| err(format!("wait on {topic}"), e))?;
        }
    }
}

/// The endpoints of one agent. Fields drop in order: the ports before the node.
struct IceoryxChannel {
    pub_topic: String,
    ack_topic: String,
    pub_writer: Option<Writer<[u8], i32>>,
    pub_reader: Option<Reader<[u8], i32>>,
    ack_writer: Option<Writer<i32, ()>>,
    ack_reader: Option<Reader<i32, ()>>,
    _node: Node<Svc>,
}

type PubSubBuilder<P, H> = iceoryx2::service::builder::publish_subscribe::Builder<P, H, Svc>;

/// A publish-subscribe service's settings for the QoS.
fn configure<P: Debug + ZeroCopySend + IceoryxSend + ?Sized + 'static, H: Debug + ZeroCopySend>(
    b: PubSubBuilder<P, H>,
    qos: Qos,
) -> PubSubBuilder<P, H> {
    b.enable_safe_overflow(qos.safe_overflow)
        .subscriber_max_buffer_size(qos.depth)
        .history_size(qos.history)
        .subscriber_max_borrowed_samples(2)
        .max_publishers(MAX_PORTS)
        .max_subscribers(MAX_PORTS)
        .max_nodes(2 * MAX_PORTS + 2)
}

/// `{topic}_pub`, opened or created.
fn pub_service(
    node: &Node<Svc>,
    topic: &str,
    qos: Qos,
) -> Result<publish_subscribe::PortFactory<Svc, [u8], i32>, AgentError> {
    configure(node.service_builder(&service_name(topic)?).publish_subscribe::<[u8]>().user_header::<i32>(), qos)
        .open_or_create()
        .map_err(|e| err(format!("open publish-subscribe service {topic}"), e))
}

/// `{topic}_ack`, opened or created.
fn ack_service(
    node: &Node<Svc>,
    topic: &str,
    qos: Qos,
) -> Result<publish_subscribe::PortFactory<Svc, i32, ()>, AgentError> {
    configure(node.service_builder(&service_name(topic)?).publish_subscribe::<i32>(), qos)
        .open_or_create()
        .map_err(|e| err(format!("open publish-subscribe service {topic}"), e))
}

fn events(node: &Node<Svc>, name: &ServiceName, topic: &str) -> Result<event::PortFactory<Svc>, AgentError> {
    node.service_builder(name)
        .event()
        .max_notifiers(MAX_PORTS)
        .max_listeners(MAX_PORTS)
        .max_nodes(2 * MAX_PORTS + 2)
        .open_or_create()
        .map_err(|e| err(format!("open event service {topic}"), e))
}

fn service_name(topic: &str) -> Result<ServiceName, AgentError> {
    ServiceName::new(topic).map_err(|e| err(format!("service name {topic:?}"), e))
}

fn writer<P: Debug + ZeroCopySend + IceoryxSend + ?Sized + 'static, H: Debug + ZeroCopySend>(
    node: &Node<Svc>,
    topic: &str,
    qos: Qos,
    open_service: impl FnOnce() -> Result<publish_subscribe::PortFactory<Svc, P, H>, AgentError>,
    publisher: impl FnOnce(&publish_subscribe::PortFactory<Svc, P, H>) -> Result<Publisher<Svc, P, H>, AgentError>,
) -> Result<Writer<P, H>, AgentError> {
    let name = service_name(topic)?;
    // The notifier first: a reader that sees the publisher can count on its notifications.
    let events = events(node, &name, topic)?;
    let notifier = events.notifier_builder().create().map_err(|e| err(format!("create notifier of {topic}"), e))?;
    let service = open_service()?;
    let publisher = publisher(&service)?;
    Ok(Writer { publisher, notifier, service, _events: events, readers: 0, history: qos.history > 0 })
}

fn reader<P: Debug + ZeroCopySend + IceoryxSend + ?Sized + 'static, H: Debug + ZeroCopySend>(
    node: &Node<Svc>,
    topic: &str,
    qos: Qos,
    open_service: impl FnOnce() -> Result<publish_subscribe::PortFactory<Svc, P, H>, AgentError>,
) -> Result<Reader<P, H>, AgentError> {
    let name = service_name(topic)?;
    // The listener first: a writer that sees the subscriber reaches it with its notifications.
    let events = events(node, &name, topic)?;
    let listener = events.listener_builder().create().map_err(|e| err(format!("create listener of {topic}"), e))?;
    let service = open_service()?;
    let subscriber = service
        .subscriber_builder()
        .buffer_size(qos.depth)
        .history_request(qos.history)
        .create()
        .map_err(|e| err(format!("create subscriber of {topic}"), e))?;
    Ok(Reader { subscriber, listener, service, _events: events })
}

/// Opens the endpoints `cfg.ends` asks for.
pub fn open(cfg: &ChannelConfig) -> Result<Box<dyn Channel>, AgentError> {
    let qos = map_qos(cfg)?;
    let mut config = Config::default();
    config.global.prefix = FileName::new(format!("iox2_dbe{}_", cfg.domain).as_bytes())
        .map_err(|e| err(format!("domain {}", cfg.domain), format!("{e:?}")))?;
    let node = NodeBuilder::new()
        .config(&config)
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<Svc>()
        .map_err(|e| err("create node", e))?;
    let (pub_topic, ack_topic) = (cfg.pub_topic(), cfg.ack_topic());
    let open_pub = || pub_service(&node, &pub_topic, qos);
    let open_ack = || ack_service(&node, &ack_topic, qos);

    let pub_writer = if cfg.ends.pub_writer {
        Some(writer(&node, &pub_topic, qos, open_pub, |s| {
            s.publisher_builder()
                .initial_max_slice_len(MAX_DATA)
                .backpressure_strategy(qos.backpressure)
                .max_loaned_samples(1)
                .create()
                .map_err(|e| err(format!("create publisher of {pub_topic}"), e))
        })?)
    } else {
        None
    };
    let ack_writer = if cfg.ends.ack_writer {
        Some(writer(&node, &ack_topic, qos, open_ack, |s| {
            s.publisher_builder()
                .backpressure_strategy(qos.backpressure)
                .max_loaned_samples(1)
                .create()
                .map_err(|e| err(format!("create publisher of {ack_topic}"), e))
        })?)
    } else {
        None
    };
    let pub_reader = if cfg.ends.pub_reader { Some(reader(&node, &pub_topic, qos, open_pub)?) } else { None };
    let ack_reader = if cfg.ends.ack_reader { Some(reader(&node, &ack_topic, qos, open_ack)?) } else { None };
    Ok(Box::new(IceoryxChannel { pub_topic, ack_topic, pub_writer, pub_reader, ack_writer, ack_reader, _node: node }))
}

fn missing(end: &str) -> AgentError {
    AgentError::Unsupported { implementation: IMPL, what: format!("{end}: the role did not ask for it") }
}

impl Channel for IceoryxChannel {
    fn write_pub(&mut self, seq: i32, data: &[u8]) -> Result<(), AgentError> {
        let topic = &self.pub_topic;
        let w = self.pub_writer.as_ref().ok_or_else(|| missing("PubMessage writer"))?;
        if data.len() > MAX_DATA {
            return Err(AgentError::Argument {
                flag: "--sizes".into(),
                message: format!("{} bytes exceed the largest PubMessage of {MAX_DATA}", data.len()),
            });
        }
        let mut sample =
            w.publisher.loan_slice_uninit(data.len()).map_err(|e| err(format!("loan a sample of {topic}"), e))?;
        *sample.user_header_mut() = seq;
        let sample = sample.write_from_slice(data);
        sample.send().map_err(|e| err(format!("send on {topic}"), e))?;
        w.notify(topic)
    }

    fn take_pub(&mut self, timeout: Duration, f: &mut dyn FnMut(i32, usize)) -> Result<usize, AgentError> {
        let topic = &self.pub_topic;
        let r = self.pub_reader.as_ref().ok_or_else(|| missing("PubMessage reader"))?;
        r.wait(topic, timeout, |s| {
            let mut n = 0;
            while let Some(sample) = s.receive().map_err(|e| err(format!("receive on {topic}"), e))? {
                f(*sample.user_header(), sample.payload().len());
                n += 1;
            }
            Ok(n)
        })
    }

    fn write_ack(&mut self, seq: i32) -> Result<(), AgentError> {
        let topic = &self.ack_topic;
        let w = self.ack_writer.as_ref().ok_or_else(|| missing("AckMessage writer"))?;
        let sample = w.publisher.loan_uninit().map_err(|e| err(format!("loan a sample of {topic}"), e))?;
        sample.write_payload(seq).send().map_err(|e| err(format!("send on {topic}"), e))?;
        w.notify(topic)
    }

    fn take_ack(&mut self, timeout: Duration, f: &mut dyn FnMut(i32)) -> Result<usize, AgentError> {
        let topic = &self.ack_topic;
        let r = self.ack_reader.as_ref().ok_or_else(|| missing("AckMessage reader"))?;
        r.wait(topic, timeout, |s| {
            let mut n = 0;
            while let Some(sample) = s.receive().map_err(|e| err(format!("receive on {topic}"), e))? {
                f(*sample.payload());
                n += 1;
            }
            Ok(n)
        })
    }

    fn matched(&mut self) -> Result<Matched, AgentError> {
        let mut m = Matched::default();
        if let Some(w) = self.pub_writer.as_mut() {
            m.pub_readers = w.readers(&self.pub_topic)?;
        }
        if let Some(r) = self.pub_reader.as_ref() {
            m.pub_writers = r.writers();
        }
        if let Some(w) = self.ack_writer.as_mut() {
            m.ack_readers = w.readers(&self.ack_topic)?;
        }
        if let Some(r) = self.ack_reader.as_ref() {
            m.ack_writers = r.writers();
        }
        Ok(m)
    }
}

/// Removes what iceoryx2 agents leave once they are all gone: the per-domain node counters
/// `/dev/shm/iox2_dbe*` and the empty `/tmp/iceoryx2` folders. Call it only when no agent of this benchmark runs.
pub fn remove_leftovers() {
    for e in std::fs::read_dir("/dev/shm").into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with("iox2_dbe") {
            let _ = std::fs::remove_file(e.path());
        }
    }
    // remove_dir removes only empty folders: another program's services stay.
    for d in ["/tmp/iceoryx2/nodes", "/tmp/iceoryx2/services", "/tmp/iceoryx2"] {
        let _ = std::fs::remove_dir(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::channel::{Ends, QosChoice};

    fn assert_send<T: Send>() {}

    #[test]
    fn channel_is_send() {
        assert_send::<IceoryxChannel>();
    }

    fn config(topic: &str, ends: Ends, qos: QosChoice) -> ChannelConfig {
        ChannelConfig { domain: 97, topic: topic.into(), qos, ends, peers: vec![], listen: None, linger: Duration::from_secs(1) }
    }

    #[test]
    fn refuses_what_has_no_meaning() {
        let qos = QosChoice {
            reliability: Reliability::Reliable,
            history: History::KeepAll,
            durability: Durability::TransientLocal,
        };
        let e = open(&config("dbe_iox_refuse", Ends::default(), qos)).err().expect("refused");
        assert!(matches!(e, AgentError::Unsupported { .. }), "{e}");
    }

    #[test]
    fn loopback_in_one_process() {
        let topic = format!("dbe_iox_test_{}", std::process::id());
        let qos = QosChoice {
            reliability: Reliability::Reliable,
            history: History::KeepLast(1),
            durability: Durability::Volatile,
        };
        let ping = Ends { pub_writer: true, ack_reader: true, ..Ends::default() };
        let pong = Ends { pub_reader: true, ack_writer: true, ..Ends::default() };
        let mut a = open(&config(&topic, ping, qos)).unwrap();
        let mut b = open(&config(&topic, pong, qos)).unwrap();
        let m = a.matched().unwrap();
        assert_eq!((m.pub_readers, m.ack_writers), (1, 1));
        let m = b.matched().unwrap();
        assert_eq!((m.pub_writers, m.ack_readers), (1, 1));
        let t = Instant::now();
        assert_eq!(b.take_pub(Duration::from_millis(50), &mut |_, _| panic!("nothing was sent")).unwrap(), 0);
        assert!(t.elapsed() >= Duration::from_millis(50));
        for (seq, len) in [(0, 4usize), (1, 16384), (END_SEQ_TEST, 0)] {
            a.write_pub(seq, &vec![7u8; len]).unwrap();
            let mut got = vec![];
            b.take_pub(Duration::from_secs(1), &mut |s, l| got.push((s, l))).unwrap();
            assert_eq!(got, vec![(seq, len)]);
            b.write_ack(seq).unwrap();
            let mut acks = vec![];
            a.take_ack(Duration::from_secs(1), &mut |s| acks.push(s)).unwrap();
            assert_eq!(acks, vec![seq]);
        }
        // The channel moves to another thread.
        std::thread::spawn(move || a.write_ack(0).expect_err("ping has no ack writer")).join().unwrap();
    }
    const END_SEQ_TEST: i32 = crate::agent::channel::END_SEQ;

    fn qos(reliability: Reliability, history: History, durability: Durability) -> QosChoice {
        QosChoice { reliability, history, durability }
    }
    const WRITER: Ends = Ends { pub_writer: true, pub_reader: false, ack_writer: false, ack_reader: false };
    const READER: Ends = Ends { pub_writer: false, pub_reader: true, ack_writer: false, ack_reader: false };

    fn take_all(c: &mut Box<dyn Channel>, wait: Duration) -> Vec<i32> {
        let mut got = vec![];
        while c.take_pub(wait, &mut |s, _| got.push(s)).unwrap() > 0 {}
        got
    }

    #[test]
    fn keep_last_keeps_the_newest() {
        let topic = format!("dbe_iox_kl_{}", std::process::id());
        let q = qos(Reliability::Reliable, History::KeepLast(2), Durability::Volatile);
        let mut w = open(&config(&topic, WRITER, q)).unwrap();
        let mut r = open(&config(&topic, READER, q)).unwrap();
        assert_eq!(w.matched().unwrap().pub_readers, 1);
        for seq in 0..5 {
            w.write_pub(seq, &[1, 2, 3]).unwrap();
        }
        assert_eq!(take_all(&mut r, Duration::from_millis(20)), vec![3, 4]);
    }

    #[test]
    fn best_effort_keep_all_drops_the_new_when_full() {
        let topic = format!("dbe_iox_bka_{}", std::process::id());
        let q = qos(Reliability::BestEffort, History::KeepAll, Durability::Volatile);
        let mut w = open(&config(&topic, WRITER, q)).unwrap();
        let mut r = open(&config(&topic, READER, q)).unwrap();
        for seq in 0..(KEEP_ALL_DEPTH as i32 + 44) {
            w.write_pub(seq, &[0; 100]).unwrap();
        }
        assert_eq!(take_all(&mut r, Duration::from_millis(20)), (0..KEEP_ALL_DEPTH as i32).collect::<Vec<_>>());
    }

    #[test]
    fn reliable_keep_all_blocks_the_writer_and_loses_nothing() {
        let topic = format!("dbe_iox_rka_{}", std::process::id());
        let q = qos(Reliability::Reliable, History::KeepAll, Durability::Volatile);
        let mut w = open(&config(&topic, WRITER, q)).unwrap();
        let mut r = open(&config(&topic, READER, q)).unwrap();
        let n = 4 * KEEP_ALL_DEPTH as i32;
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let mut got = vec![];
            while got.len() < n as usize {
                r.take_pub(Duration::from_secs(2), &mut |s, len| {
                    assert_eq!(len, 1000);
                    got.push(s)
                })
                .unwrap();
            }
            got
        });
        for seq in 0..n {
            w.write_pub(seq, &[0; 1000]).unwrap();
        }
        assert_eq!(reader.join().unwrap(), (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn transient_local_hands_history_to_a_late_reader() {
        let topic = format!("dbe_iox_tl_{}", std::process::id());
        let q = qos(Reliability::Reliable, History::KeepLast(3), Durability::TransientLocal);
        let mut w = open(&config(&topic, WRITER, q)).unwrap();
        for seq in 0..5 {
            w.write_pub(seq, &[9; 10]).unwrap();
        }
        let mut r = open(&config(&topic, READER, q)).unwrap();
        // The reader blocks in another thread; the writer's matched() sees it and hands it the history.
        let reader = std::thread::spawn(move || {
            let mut got = vec![];
            let t = Instant::now();
            r.take_pub(Duration::from_secs(5), &mut |s, _| got.push(s)).unwrap();
            (got, t.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(w.matched().unwrap().pub_readers, 1);
        let (got, waited) = reader.join().unwrap();
        assert_eq!(got, vec![2, 3, 4]);
        assert!(waited < Duration::from_secs(1), "woken by the notification, not the timeout: {waited:?}");
    }

    #[test]
    fn volatile_hands_nothing_to_a_late_reader() {
        let topic = format!("dbe_iox_vol_{}", std::process::id());
        let q = qos(Reliability::Reliable, History::KeepLast(3), Durability::Volatile);
        let mut w = open(&config(&topic, WRITER, q)).unwrap();
        w.write_pub(0, &[1]).unwrap();
        let mut r = open(&config(&topic, READER, q)).unwrap();
        assert_eq!(w.matched().unwrap().pub_readers, 1);
        assert!(take_all(&mut r, Duration::from_millis(20)).is_empty());
        w.write_pub(1, &[1]).unwrap();
        assert_eq!(take_all(&mut r, Duration::from_millis(20)), vec![1]);
    }

    #[test]
    fn domains_are_apart() {
        let topic = format!("dbe_iox_dom_{}", std::process::id());
        let q = qos(Reliability::Reliable, History::KeepLast(1), Durability::Volatile);
        let mut w = open(&config(&topic, WRITER, q)).unwrap();
        let mut other = config(&topic, READER, q);
        other.domain = 98;
        let mut r = open(&other).unwrap();
        assert_eq!(w.matched().unwrap().pub_readers, 0);
        assert_eq!(r.matched().unwrap().pub_writers, 0);
    }
}
