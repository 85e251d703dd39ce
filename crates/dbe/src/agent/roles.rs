//! The measuring loops of the agents (PROTOCOL.md, "Roles"), written once over [`Channel`].
use crate::agent::channel::{Channel, ChannelConfig, Ends, Matched, END_SEQ};
use crate::agent::output::{self, Line, ProcessFigures};
use crate::agent::{AgentArgs, AgentError, BuiltIn, Role};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a receive waits before the loop looks at its clocks again.
const POLL: Duration = Duration::from_millis(100);
/// The end marker is written this often, this far apart (best-effort may lose some).
const END_REPEAT: u32 = 5;
const END_GAP: Duration = Duration::from_millis(20);
/// How long a pub waits, once its writer matched the readers, before writing (see `publish`).
const READERS_SETTLE: Duration = Duration::from_millis(300);

fn ends(role: Role) -> Ends {
    match role {
        Role::Ping => Ends { pub_writer: true, ack_reader: true, ..Ends::default() },
        Role::Pong => Ends { pub_reader: true, ack_writer: true, ..Ends::default() },
        Role::Pub => Ends { pub_writer: true, ..Ends::default() },
        Role::Sub => Ends { pub_reader: true, ..Ends::default() },
        Role::Server => Ends::default(),
    }
}

/// Whether everything the role waits for has matched.
fn matched_enough(role: Role, n: u32, m: &Matched) -> bool {
    match role {
        Role::Ping => m.pub_readers >= n && m.ack_writers >= n,
        Role::Pong => m.pub_writers >= 1 && m.ack_readers >= 1,
        Role::Pub => m.pub_readers >= n,
        Role::Sub => m.pub_writers >= 1,
        Role::Server => true,
    }
}

fn wait_matched(ch: &mut dyn Channel, implementation: BuiltIn, a: &AgentArgs) -> Result<(), AgentError> {
    let deadline = Instant::now() + a.match_timeout;
    loop {
        let m = ch.matched()?;
        if matched_enough(a.role, a.subscribers, &m) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(AgentError::NotMatched {
                implementation: implementation.key(),
                what: format!("the {} role's endpoints", a.role.key()),
                seconds: a.match_timeout.as_secs(),
                matched: format!("{m:?}"),
            });
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

pub fn run(implementation: BuiltIn, a: &AgentArgs, started: Instant) -> Result<(), AgentError> {
    if a.role == Role::Server {
        return Err(AgentError::Unsupported { implementation: implementation.key(), what: "the discovery server role (Fast DDS only)".into() });
    }
    if a.transport != "udp" && !(implementation == BuiltIn::Iceoryx2 && a.transport == "shm") {
        return Err(AgentError::Unsupported { implementation: implementation.key(), what: format!("--transport {}", a.transport) });
    }
    if a.discovery_server.is_some() {
        return Err(AgentError::Unsupported { implementation: implementation.key(), what: "a discovery server (Fast DDS only)".into() });
    }
    let domain = a.domain.or_else(|| std::env::var(partita_env::DOMAIN).ok().and_then(|d| d.parse().ok())).unwrap_or(0);
    let cfg = ChannelConfig {
        domain,
        topic: a.topic.clone(),
        qos: a.qos,
        ends: ends(a.role),
        peers: a.peers.clone(),
        listen: a.listen.clone(),
        linger: a.idle * 3,
    };
    let mut ch = implementation.open(&cfg)?;
    wait_matched(ch.as_mut(), implementation, a)?;
    let discovery_ns = started.elapsed().as_nanos() as u64;
    match a.role {
        Role::Ping => ping(ch.as_mut(), a)?,
        Role::Pong => pong(ch.as_mut())?,
        Role::Pub => publish(ch.as_mut(), a)?,
        Role::Sub => subscribe(ch.as_mut(), started, a.idle)?,
        Role::Server => unreachable!("refused above"),
    }
    let (cpu_user_ns, cpu_system_ns, max_rss_kib) = output::own_figures();
    output::print(&Line::Process(ProcessFigures {
        implementation: implementation.key().into(),
        role: a.role.key().into(),
        discovery_ns: Some(discovery_ns),
        cpu_user_ns,
        cpu_system_ns,
        max_rss_kib,
    }));
    // Let the last writes leave before the endpoints go (reliable writers still owe retransmissions).
    std::thread::sleep(Duration::from_millis(50));
    drop(ch);
    Ok(())
}

fn end_marker(ch: &mut dyn Channel) -> Result<(), AgentError> {
    for i in 0..END_REPEAT {
        if i > 0 {
            std::thread::sleep(END_GAP);
        }
        ch.write_pub(END_SEQ, &[])?;
    }
    Ok(())
}

fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i % 251) as u8).collect()
}

fn ping(ch: &mut dyn Channel, a: &AgentArgs) -> Result<(), AgentError> {
    let mut seq: i32 = 0;
    for &size in &a.sizes {
        let data = payload(size);
        let mut rtt = Vec::with_capacity(a.count as usize);
        let mut lost = 0;
        for i in 0..a.warmup + a.count {
            let measured = i >= a.warmup;
            let t0 = Instant::now();
            ch.write_pub(seq, &data)?;
            let deadline = t0 + a.timeout;
            let mut acks = 0u32;
            let mut done_at = None;
            while done_at.is_none() {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                ch.take_ack((deadline - now).min(POLL), &mut |s| {
                    if s == seq {
                        acks += 1;
                        if acks >= a.subscribers && done_at.is_none() {
                            done_at = Some(Instant::now());
                        }
                    }
                })?;
            }
            match done_at {
                Some(t) if measured => rtt.push((t - t0).as_nanos() as u64),
                None if measured => lost += 1,
                _ => {}
            }
            seq = seq.wrapping_add(1).max(0);
        }
        eprintln!("dbe-agent ping: {size} B, {} round trips, {lost} lost", rtt.len());
        output::print(&Line::Rtt { size, rtt_ns: rtt, lost, warmup: a.warmup });
    }
    end_marker(ch)
}

fn pong(ch: &mut dyn Channel) -> Result<(), AgentError> {
    let mut pending = Vec::new();
    loop {
        let mut end = false;
        ch.take_pub(POLL, &mut |s, _| {
            if s == END_SEQ {
                end = true;
            } else {
                pending.push(s);
            }
        })?;
        for s in pending.drain(..) {
            ch.write_ack(s)?;
        }
        if end {
            return Ok(());
        }
    }
}

fn publish(ch: &mut dyn Channel, a: &AgentArgs) -> Result<(), AgentError> {
    // The writer matched the readers; a reader matches the writer when it has processed the writer's SEDP, which
    // may come later, and drops what arrives before: give the readers time to match too.
    std::thread::sleep(READERS_SETTLE);
    let mut seq: i32 = 0;
    let span = Duration::from_secs_f64(a.seconds);
    for &size in &a.sizes {
        let data = payload(size);
        let t0 = Instant::now();
        let mut sent = 0u64;
        while t0.elapsed() < span {
            ch.write_pub(seq, &data)?;
            // Under SCHED_FIFO a writer that never blocks would keep its own middleware's threads (same
            // priority, same CPU: receive, heartbeats, acknowledgements) off the CPU for the whole test.
            std::thread::yield_now();
            sent += 1;
            seq = seq.wrapping_add(1).max(0);
        }
        output::print(&Line::Sent { size, sent, elapsed_ns: t0.elapsed().as_nanos() as u64 });
    }
    end_marker(ch)
}

#[derive(Default)]
struct Tally {
    received: u64,
    bytes: u64,
    first_ns: u64,
    last_ns: u64,
}

fn subscribe(ch: &mut dyn Channel, started: Instant, idle: Duration) -> Result<(), AgentError> {
    let mut by_size: BTreeMap<usize, Tally> = BTreeMap::new();
    let mut last = None::<Instant>;
    loop {
        let mut end = false;
        ch.take_pub(POLL, &mut |s, len| {
            if s == END_SEQ {
                end = true;
                return;
            }
            let now_ns = started.elapsed().as_nanos() as u64;
            let t = by_size.entry(len).or_default();
            if t.received == 0 {
                t.first_ns = now_ns;
            }
            t.received += 1;
            t.bytes += len as u64;
            t.last_ns = now_ns;
            last = Some(Instant::now());
        })?;
        if end || last.is_some_and(|l| l.elapsed() > idle) {
            break;
        }
    }
    for (size, t) in by_size {
        output::print(&Line::Received { size, received: t.received, bytes: t.bytes, first_ns: t.first_ns, last_ns: t.last_ns });
    }
    Ok(())
}
