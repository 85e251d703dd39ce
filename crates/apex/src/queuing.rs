//! ARINC 653 queuing ports on partita's queuing channels (CREATE_QUEUING_PORT, SEND_QUEUING_MESSAGE,
//! RECEIVE_QUEUING_MESSAGE, GET_QUEUING_PORT_ID, GET_QUEUING_PORT_STATUS, CLEAR_QUEUING_PORT).
//!
//! A full queue refuses the sender (NOT_AVAILABLE at once, TIMED_OUT after a timeout, counted as an overflow
//! in the source's status memory); no message is ever overwritten, so a receiver's `QueueOverflow` flag (ARINC
//! 653's INVALID_CONFIG-with-a-message on an overflowed destination) is always false.
use crate::error::{record, ApexError, Service};
use crate::partition::in_start_mode;
use crate::ports::{bytes, messages, port_name, registry, same, timeout, Request};
use crate::PartitaHypervisor;
use a653rs::bindings::*;
use partita_ports::{PortError, PortKind, QueuingDestination, QueuingSource, Timeout};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

pub(crate) struct QueuingPort {
    name: String,
    max_message: u32,
    depth: u32,
    direction: PortDirection,
    /// Processes of this partition in a send or receive that may wait (ARINC 653's WAITING_PROCESSES).
    waiting: AtomicI32,
    end: Mutex<End>,
}

enum End {
    Source(QueuingSource),
    Destination(QueuingDestination),
}

impl QueuingPort {
    fn end(&self) -> MutexGuard<'_, End> {
        // As for sampling ports: the channel's state lives in shared memory, consistent after any operation.
        self.end.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `op` on the port's end, counted as a waiting process while it may block.
    fn with_end<T>(&self, t: Timeout, op: impl FnOnce(&mut End) -> T) -> T {
        let may_wait = t != Timeout::Immediate;
        if may_wait {
            self.waiting.fetch_add(1, Ordering::SeqCst);
        }
        let result = op(&mut self.end());
        if may_wait {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        result
    }
}

fn by_id(service: Service, id: QueuingPortId) -> Result<Arc<QueuingPort>, ApexError> {
    let r = registry();
    usize::try_from(id).ok().and_then(|i| i.checked_sub(1)).and_then(|i| r.queuing.get(i)).cloned().ok_or(ApexError::UnknownId { service, what: "queuing port", id })
}

fn create(name: QueuingPortName, max_message_size: MessageSize, max_nb_message: MessageRange, direction: PortDirection) -> Result<QueuingPortId, ApexError> {
    let service = Service::CreateQueuingPort;
    in_start_mode(service)?;
    let name = port_name(service, name)?;
    let mut r = registry();
    // By name and direction: a real partition has one direction per name; ports made in one process for both
    // ends of a channel (tests) have both.
    if r.queuing.iter().any(|p| p.name == name && p.direction == direction) {
        return Err(ApexError::AlreadyCreated { service, what: "queuing port", name });
    }
    let req = Request { service, name: name.clone(), kind: PortKind::Queuing, direction };
    let end = r.open(
        &req,
        |e| {
            same(service, &name, "maximum message size", u64::from(max_message_size), u64::from(e.max_message), bytes)?;
            same(service, &name, "depth", u64::from(max_nb_message), e.depth_or_refresh, messages)
        },
        |ports, name| match direction {
            PortDirection::Source => ports.queuing_source(name).map(End::Source),
            PortDirection::Destination => ports.queuing_destination(name).map(End::Destination),
        },
    )?;
    r.queuing.push(Arc::new(QueuingPort { name, max_message: max_message_size, depth: max_nb_message, direction, waiting: AtomicI32::new(0), end: Mutex::new(end) }));
    Ok(r.queuing.len() as QueuingPortId)
}

fn send(id: QueuingPortId, message: &[ApexByte], time_out: ApexSystemTime) -> Result<(), ApexError> {
    let service = Service::SendQueuingMessage;
    let port = by_id(service, id)?;
    if message.is_empty() {
        return Err(ApexError::InvalidParameter { service, problem: format!("an empty message for port {:?}", port.name) });
    }
    let t = timeout(time_out);
    port.with_end(t, |end| match end {
        End::Source(s) => s.send(message, t).map_err(|source| ApexError::Port { service, source }),
        End::Destination(_) => Err(ApexError::WrongDirection { service, port: port.name.clone(), direction: "destination" }),
    })
}

fn receive(id: QueuingPortId, time_out: ApexSystemTime, buf: &mut [ApexByte]) -> Result<(MessageSize, QueueOverflow), ApexError> {
    let service = Service::ReceiveQueuingMessage;
    let port = by_id(service, id)?;
    let t = timeout(time_out);
    port.with_end(t, |end| match end {
        End::Destination(d) => match d.receive(buf, t) {
            Ok(r) => Ok((r.len as MessageSize, false)),
            Err(source) => Err(ApexError::Port { service, source }),
        },
        End::Source(_) => Err(ApexError::WrongDirection { service, port: port.name.clone(), direction: "source" }),
    })
}

fn status(id: QueuingPortId) -> Result<QueuingPortStatus, ApexError> {
    let port = by_id(Service::GetQueuingPortStatus, id)?;
    // A source does not see its destination's progress through partita's ports: it counts none. At a
    // destination, another process may hold the port, blocked in a receive for as long as its timeout: the
    // count does not wait for it, and a receiver waiting means the queue is empty.
    let nb_message = match port.end.try_lock() {
        Ok(end) => pending(&end),
        Err(TryLockError::Poisoned(p)) => pending(&p.into_inner()),
        Err(TryLockError::WouldBlock) => 0,
    };
    Ok(QueuingPortStatus {
        nb_message,
        max_nb_message: port.depth,
        max_message_size: port.max_message,
        port_direction: port.direction,
        waiting_processes: port.waiting.load(Ordering::SeqCst),
    })
}

fn pending(end: &End) -> MessageRange {
    match end {
        End::Destination(d) => d.pending().unwrap_or(0).min(u64::from(MessageRange::MAX)) as MessageRange,
        End::Source(_) => 0,
    }
}

/// Discards the messages waiting at a destination: at most the queue's depth of them, so that a sender
/// filling the queue as fast as it is emptied cannot keep the call going.
fn clear(id: QueuingPortId) -> Result<(), ApexError> {
    let service = Service::ClearQueuingPort;
    let port = by_id(service, id)?;
    let mut scratch = vec![0u8; port.max_message as usize];
    let mut end = port.end();
    let End::Destination(d) = &mut *end else {
        return Err(ApexError::WrongDirection { service, port: port.name.clone(), direction: "source" });
    };
    for _ in 0..port.depth {
        match d.receive(&mut scratch, Timeout::Immediate) {
            // A message too long for the channel is dropped by the receive itself: go on with the next.
            Ok(_) | Err(PortError::TooLarge { .. }) => {}
            // Empty, or the sender's memory is garbage (counted in the port's status): nothing more to take.
            Err(_) => break,
        }
    }
    Ok(())
}

impl ApexQueuingPortP4 for PartitaHypervisor {
    /// Opens the partita port of that name, which the supervisor gave with the requested direction, maximum
    /// message size and depth (`max_nb_message`); anything else is INVALID_CONFIG. Either queuing discipline
    /// is accepted (see the crate's documentation).
    fn create_queuing_port(
        queuing_port_name: QueuingPortName,
        max_message_size: MessageSize,
        max_nb_message: MessageRange,
        port_direction: PortDirection,
        _queuing_discipline: QueuingDiscipline,
    ) -> Result<QueuingPortId, ErrorReturnCode> {
        record(create(queuing_port_name, max_message_size, max_nb_message, port_direction))
    }

    /// Sends `message`; `time_out` 0 does not wait (a full queue is NOT_AVAILABLE), a negative one waits for
    /// room without end, a positive one at most that many ns (then TIMED_OUT).
    fn send_queuing_message(queuing_port_id: QueuingPortId, message: &[ApexByte], time_out: ApexSystemTime) -> Result<(), ErrorReturnCode> {
        record(send(queuing_port_id, message, time_out))
    }

    /// Takes the oldest message into `message`; the timeout as for a send (an empty queue is NOT_AVAILABLE at
    /// once, TIMED_OUT after a wait). Safe whatever `message`'s length: a message longer than it is refused
    /// (INVALID_PARAM) and stays queued, never written past the buffer's end.
    //
    // SAFETY: `unsafe` only because a653rs declares it so (for hypervisors that copy through a raw pointer);
    // this body does nothing unsafe, and writes only within `message` through safe slices.
    #[allow(unsafe_code)]
    unsafe fn receive_queuing_message(queuing_port_id: QueuingPortId, time_out: ApexSystemTime, message: &mut [ApexByte]) -> Result<(MessageSize, QueueOverflow), ErrorReturnCode> {
        record(receive(queuing_port_id, time_out, message))
    }

    fn get_queuing_port_status(queuing_port_id: QueuingPortId) -> Result<QueuingPortStatus, ErrorReturnCode> {
        record(status(queuing_port_id))
    }

    fn clear_queuing_port(queuing_port_id: QueuingPortId) -> Result<(), ErrorReturnCode> {
        record(clear(queuing_port_id))
    }
}

impl ApexQueuingPortP1 for PartitaHypervisor {
    fn get_queuing_port_id(queuing_port_name: QueuingPortName) -> Result<QueuingPortId, ErrorReturnCode> {
        let service = Service::GetQueuingPortId;
        record(port_name(service, queuing_port_name).and_then(|name| {
            let r = registry();
            match r.queuing.iter().position(|p| p.name == name) {
                Some(i) => Ok(i as QueuingPortId + 1),
                None => Err(ApexError::UnknownName { service, what: "queuing port", name }),
            }
        }))
    }
}
