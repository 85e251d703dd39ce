//! The partition's ports by APEX id: which ports the supervisor gave (`PARTITA_PORTS`, read on first use),
//! which of them the application created, and the checks a creation makes against the supervisor's word.
//!
//! Each created port has a lock of its own, taken for one operation: a process blocked in a receive with a
//! timeout holds its port, not the registry, so the partition's other processes go on with their own ports.
//! Two processes of one partition using one port take turns (in the order the lock grants, whatever the
//! port's queuing discipline).
use crate::error::{ApexError, Service};
use crate::queuing::QueuingPort;
use crate::sampling::SamplingPort;
use a653rs::bindings::{ApexSystemTime, PortDirection};
use partita_ports::{Direction, PortEntry, PortError, PortKind, Ports, Timeout};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Where the partition's ports come from.
enum Given {
    /// `PARTITA_PORTS` is read when the first port is created (a partition without ports never reads it).
    Unread,
    Ports(Vec<Ports>),
    /// `PARTITA_PORTS` is not what the supervisor writes, or its descriptors could not be taken: every
    /// creation fails with this reason.
    Unusable(String),
}

pub(crate) struct Registry {
    given: Given,
    /// Index + 1 is the port's id.
    pub sampling: Vec<Arc<SamplingPort>>,
    pub queuing: Vec<Arc<QueuingPort>>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { given: Given::Unread, sampling: Vec::new(), queuing: Vec::new() });

pub(crate) fn registry() -> MutexGuard<'static, Registry> {
    // Every change under this lock is a single push or assignment: a panicking holder leaves it consistent.
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// Adds ports made in this process (tests, or a program that opens its ports itself) to those the APEX
/// services create ports from; once called, `PARTITA_PORTS` is not read.
pub(crate) fn provide(ports: Ports) {
    let mut r = registry();
    match &mut r.given {
        Given::Ports(v) => v.push(ports),
        g => *g = Given::Ports(vec![ports]),
    }
}

fn partita_direction(d: PortDirection) -> Direction {
    match d {
        PortDirection::Source => Direction::Source,
        PortDirection::Destination => Direction::Destination,
    }
}

/// An APEX port name as a string: up to the first NUL, UTF-8, not empty.
pub(crate) fn port_name(service: Service, name: [u8; a653rs::bindings::MAX_NAME_LENGTH]) -> Result<String, ApexError> {
    a653rs::prelude::Name::new(name).to_str().ok().filter(|n| !n.is_empty()).map(str::to_string).ok_or(ApexError::BadName { service, what: "the port's name" })
}

/// An APEX timeout as partita's ([`Timeout::from_ns`]: 0 does not wait, INFINITE_TIME_VALUE waits without end).
pub(crate) fn timeout(t: ApexSystemTime) -> Timeout {
    Timeout::from_ns(t)
}

/// What a port's creation asks for, to check against what the supervisor gave.
pub(crate) struct Request {
    pub service: Service,
    pub name: String,
    pub kind: PortKind,
    pub direction: PortDirection,
}

impl Registry {
    fn ports(&mut self, service: Service) -> Result<&mut Vec<Ports>, ApexError> {
        if let Given::Unread = self.given {
            self.given = match Ports::from_env() {
                Ok(p) => Given::Ports(vec![p]),
                Err(e) => Given::Unusable(e.to_string()),
            };
        }
        match &mut self.given {
            Given::Ports(v) => Ok(v),
            Given::Unusable(reason) => Err(ApexError::PortsUnavailable { service, reason: reason.clone() }),
            Given::Unread => unreachable!("read above"),
        }
    }

    /// Opens the port `req` asks for, after `check` has compared its geometry with the supervisor's entry.
    ///
    /// A port not given, or given as the other kind or direction, is asked of partita's [`Ports`] all the
    /// same: it refuses, and counts the refusal as an illegal operation in the status memory the supervisor's
    /// health monitor reads.
    pub fn open<T>(
        &mut self,
        req: &Request,
        check: impl FnOnce(&PortEntry) -> Result<(), ApexError>,
        open: impl FnOnce(&mut Ports, &str) -> Result<T, PortError>,
    ) -> Result<T, ApexError> {
        let service = req.service;
        let port = |source| ApexError::Port { service, source };
        let all = self.ports(service)?;
        // The set that gives the port as asked; else any that has the name (then refused as the wrong kind or
        // direction). Only ports made in one process for both ends (tests) have one name in two sets.
        let asked = |e: &PortEntry| e.name == req.name && e.kind == req.kind && e.direction == partita_direction(req.direction);
        let found = all.iter().position(|p| p.list().any(asked)).or_else(|| all.iter().position(|p| p.list().any(|e| e.name == req.name)));
        let Some(i) = found else {
            let mut none = Ports::default();
            let home = all.first_mut().unwrap_or(&mut none);
            return match open(home, &req.name) {
                Err(e) => Err(port(e)),
                Ok(_) => unreachable!("partita_ports opened a port it does not list"),
            };
        };
        let entry = all[i].list().find(|e| asked(e)).or_else(|| all[i].list().find(|e| e.name == req.name)).cloned().expect("found above");
        if entry.kind != req.kind || entry.direction != partita_direction(req.direction) {
            return match open(&mut all[i], &req.name) {
                Err(e) => Err(port(e)),
                Ok(_) => unreachable!("partita_ports opened a port of another kind or direction"),
            };
        }
        check(&entry)?;
        open(&mut all[i], &req.name).map_err(port)
    }
}

/// The entry's geometry against the request's: equal, or a [`ApexError::Geometry`] naming the difference.
pub(crate) fn same(service: Service, port: &str, what: &'static str, asked: u64, given: u64, show: fn(u64) -> String) -> Result<(), ApexError> {
    if asked == given {
        return Ok(());
    }
    Err(ApexError::Geometry { service, port: port.to_string(), what, asked: show(asked), given: show(given) })
}

pub(crate) fn bytes(n: u64) -> String {
    format!("{n} bytes")
}

pub(crate) fn messages(n: u64) -> String {
    format!("{n} messages")
}

pub(crate) fn nanoseconds(n: u64) -> String {
    format!("{:?}", Duration::from_nanos(n))
}
