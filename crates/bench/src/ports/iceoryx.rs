//! The iceoryx2 rows: publish-subscribe over iceoryx2 0.10 (`ipc` services, as an application uses it by
//! default), the floor of shared-memory messaging the ports are compared with, configured here in code (the
//! defaults, a resource prefix of the run's own) and never from a configuration file; it needs no daemon and no
//! network (its event wake-ups are Unix datagram sockets under `/tmp/iceoryx2`).
//!
//! Per row two services, each of one publisher and one subscriber: `forward`, a `[u8]` slice of the row's size
//! (the message), and `echo`, a `u64` (the number of the message answered). Both keep only the latest sample
//! (safe overflow, a buffer of one), the sampling port's semantics; the ping-pong never has more than one in
//! flight anyway. The event row adds an event service per direction: the writer notifies after each publish,
//! the reader waits on its listener when it finds nothing, then receives.
use super::{make_message, message_header, Patience, Path, Scenario};
use crate::error::BenchError;
use iceoryx2::config::Config;
use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::*;
use iceoryx2::service::port_factory::{event, publish_subscribe};
use partita_os::clock::monotonic_ns;

type Svc = ipc::Service;

fn err(measurement: &str, what: impl Into<String>, e: impl std::fmt::Debug) -> BenchError {
    BenchError::Iceoryx { measurement: measurement.to_string(), what: what.into(), reason: format!("{e:?}") }
}

/// The prefix of every file iceoryx2 makes for run `run` (in `/dev/shm` and `/tmp/iceoryx2`), so that one run
/// never meets another's services and its leftovers can be told apart.
fn prefix(run: &str) -> String {
    format!("iox2_ports{run}_")
}

fn node(run: &str, key: &str) -> Result<Node<Svc>, BenchError> {
    let mut config = Config::default();
    config.global.prefix = FileName::new(prefix(run).as_bytes()).map_err(|e| err(key, "resource prefix", e))?;
    NodeBuilder::new()
        .config(&config)
        // Stop signals stay this program's own.
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<Svc>()
        .map_err(|e| err(key, "create a node", e))
}

fn name(key: &str, what: &str) -> Result<ServiceName, BenchError> {
    let text = format!("partita-bench-ports/{key}/{what}");
    ServiceName::new(&text).map_err(|e| err(key, format!("service name {text:?}"), e))
}

/// The services of a row, opened or created (the reader creates them, the writer opens them).
struct Services {
    forward: publish_subscribe::PortFactory<Svc, [u8], ()>,
    echo: publish_subscribe::PortFactory<Svc, u64, ()>,
    /// Wakes the reader (with events).
    forward_events: Option<event::PortFactory<Svc>>,
    /// Wakes the writer (with events).
    echo_events: Option<event::PortFactory<Svc>>,
}

impl Services {
    fn open(node: &Node<Svc>, sc: &Scenario) -> Result<Services, BenchError> {
        let key = sc.key();
        let forward = node
            .service_builder(&name(&key, "forward")?)
            .publish_subscribe::<[u8]>()
            .enable_safe_overflow(true)
            .subscriber_max_buffer_size(1)
            .subscriber_max_borrowed_samples(1)
            .history_size(0)
            .max_publishers(1)
            .max_subscribers(1)
            .max_nodes(2)
            .open_or_create()
            .map_err(|e| err(&key, "open the forward service", e))?;
        let echo = node
            .service_builder(&name(&key, "echo")?)
            .publish_subscribe::<u64>()
            .enable_safe_overflow(true)
            .subscriber_max_buffer_size(1)
            .subscriber_max_borrowed_samples(1)
            .history_size(0)
            .max_publishers(1)
            .max_subscribers(1)
            .max_nodes(2)
            .open_or_create()
            .map_err(|e| err(&key, "open the echo service", e))?;
        let events = |what: &str| -> Result<Option<event::PortFactory<Svc>>, BenchError> {
            if sc.path != Path::Iceoryx2Event {
                return Ok(None);
            }
            node.service_builder(&name(&key, what)?)
                .event()
                .max_notifiers(1)
                .max_listeners(1)
                .max_nodes(2)
                .open_or_create()
                .map(Some)
                .map_err(|e| err(&key, format!("open the {what} service"), e))
        };
        Ok(Services { forward, echo, forward_events: events("forward-events")?, echo_events: events("echo-events")? })
    }
}

/// Takes the message that is there, else waits: on the listener (events) or by spinning (polling). Returns
/// the clock when `receive` returned it, with its header.
fn take(subscriber: &Subscriber<Svc, [u8], ()>, listener: Option<&Listener<Svc>>, patience: &mut Patience, key: &str) -> Result<(u64, u64, u64), BenchError> {
    loop {
        if let Some(sample) = subscriber.receive().map_err(|e| err(key, "receive", e))? {
            let now = monotonic_ns();
            let (stamp, seq) = message_header(sample.payload());
            return Ok((now, stamp, seq));
        }
        wait(listener, patience, key)?;
    }
}

/// Waits for more: on the listener (events) or by spinning (polling). A listener returns at once for a
/// notification of a sample already taken; the next round then waits.
fn wait(listener: Option<&Listener<Svc>>, patience: &mut Patience, key: &str) -> Result<(), BenchError> {
    match listener {
        Some(l) => {
            l.blocking_wait(|_| {}).map_err(|e| err(key, "wait on the listener", e))?;
        }
        None => patience.spin()?,
    }
    Ok(())
}

/// The reader's end of an iceoryx2 row. Fields drop in order: the ports before their services and node.
pub(crate) struct Reader {
    forward: Subscriber<Svc, [u8], ()>,
    echo: Publisher<Svc, u64, ()>,
    listener: Option<Listener<Svc>>,
    notifier: Option<Notifier<Svc>>,
    _services: Services,
    _node: Node<Svc>,
}

impl Reader {
    /// Creates the row's services and the reader's ports, before the writer starts: the writer's first
    /// message then finds its subscriber.
    pub(crate) fn open(sc: &Scenario, run: &str) -> Result<Reader, BenchError> {
        let key = sc.key();
        let node = node(run, &key)?;
        let services = Services::open(&node, sc)?;
        let listener = services.forward_events.as_ref().map(|e| e.listener_builder().create().map_err(|e| err(&key, "create the listener", e))).transpose()?;
        let notifier = services.echo_events.as_ref().map(|e| e.notifier_builder().create().map_err(|e| err(&key, "create the notifier", e))).transpose()?;
        let forward = services.forward.subscriber_builder().buffer_size(1).create().map_err(|e| err(&key, "create the subscriber", e))?;
        let echo = services.echo.publisher_builder().max_loaned_samples(1).create().map_err(|e| err(&key, "create the echo publisher", e))?;
        Ok(Reader { forward, echo, listener, notifier, _services: services, _node: node })
    }

    pub(crate) fn run(&mut self, sc: &Scenario, total: u64, samples: &mut Vec<(u64, u64)>, patience: &mut Patience) -> Result<(), BenchError> {
        let key = sc.key();
        for _ in 0..total {
            let (now, stamp, seq) = take(&self.forward, self.listener.as_ref(), patience, &key)?;
            samples.push((seq, now.saturating_sub(stamp)));
            self.echo.send_copy(seq).map_err(|e| err(&key, "send the echo", e))?;
            if let Some(n) = &self.notifier {
                n.notify().map_err(|e| err(&key, "notify the writer", e))?;
            }
        }
        Ok(())
    }
}

/// The writer's end of an iceoryx2 row.
pub(crate) struct Writer {
    forward: Publisher<Svc, [u8], ()>,
    echo: Subscriber<Svc, u64, ()>,
    notifier: Option<Notifier<Svc>>,
    listener: Option<Listener<Svc>>,
    _services: Services,
    _node: Node<Svc>,
}

impl Writer {
    pub(crate) fn open(sc: &Scenario, run: &str) -> Result<Writer, BenchError> {
        let key = sc.key();
        let node = node(run, &key)?;
        let services = Services::open(&node, sc)?;
        let listener = services.echo_events.as_ref().map(|e| e.listener_builder().create().map_err(|e| err(&key, "create the listener", e))).transpose()?;
        let notifier = services.forward_events.as_ref().map(|e| e.notifier_builder().create().map_err(|e| err(&key, "create the notifier", e))).transpose()?;
        let echo = services.echo.subscriber_builder().buffer_size(1).create().map_err(|e| err(&key, "create the echo subscriber", e))?;
        let forward = services
            .forward
            .publisher_builder()
            .initial_max_slice_len(sc.size)
            .max_loaned_samples(1)
            .create()
            .map_err(|e| err(&key, "create the publisher", e))?;
        Ok(Writer { forward, echo, notifier, listener, _services: services, _node: node })
    }

    pub(crate) fn run(&mut self, sc: &Scenario, total: u64, patience: &mut Patience) -> Result<(), BenchError> {
        let key = sc.key();
        let mut buf = vec![0u8; sc.size];
        for seq in 0..total {
            let stamp = monotonic_ns();
            // Made in the writer's buffer and copied into the loaned sample, as the ports' `write` copies.
            make_message(&mut buf, stamp, seq);
            let sample = self.forward.loan_slice_uninit(sc.size).map_err(|e| err(&key, "loan a sample", e))?;
            sample.write_from_slice(&buf).send().map_err(|e| err(&key, "send", e))?;
            if let Some(n) = &self.notifier {
                n.notify().map_err(|e| err(&key, "notify the reader", e))?;
            }
            loop {
                if let Some(echo) = self.echo.receive().map_err(|e| err(&key, "receive the echo", e))? {
                    if *echo.payload() == seq {
                        break;
                    }
                    continue;
                }
                wait(self.listener.as_ref(), patience, &key)?;
            }
        }
        Ok(())
    }
}

/// Removes what run `run`'s iceoryx2 nodes leave once they are all gone (a node counter in `/dev/shm` per
/// prefix) and iceoryx2's folders under `/tmp` if they are empty.
pub(crate) fn remove_leftovers(run: &str) {
    let ours = prefix(run);
    for e in std::fs::read_dir("/dev/shm").into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(&ours) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    // remove_dir removes only empty folders: another program's services stay.
    for d in ["/tmp/iceoryx2/nodes", "/tmp/iceoryx2/services", "/tmp/iceoryx2"] {
        let _ = std::fs::remove_dir(d);
    }
}
