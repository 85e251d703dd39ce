//! ARINC 653 sampling ports on partita's sampling channels (CREATE_SAMPLING_PORT, WRITE_SAMPLING_MESSAGE,
//! READ_SAMPLING_MESSAGE, GET_SAMPLING_PORT_ID, GET_SAMPLING_PORT_STATUS).
use crate::error::{record, ApexError, Service};
use crate::partition::in_start_mode;
use crate::ports::{bytes, nanoseconds, port_name, registry, same, Request};
use crate::PartitaHypervisor;
use a653rs::bindings::*;
use partita_ports::{PortKind, SamplingDestination, SamplingSource};
use std::sync::{Arc, Mutex, MutexGuard};

pub(crate) struct SamplingPort {
    name: String,
    max_message: u32,
    /// The channel's refresh period, in ns.
    refresh_ns: u64,
    direction: PortDirection,
    end: Mutex<End>,
}

enum End {
    Source(SamplingSource),
    /// With the validity of the last message read (ARINC 653's LAST_MSG_VALIDITY).
    Destination(SamplingDestination, Validity),
}

impl SamplingPort {
    fn end(&self) -> MutexGuard<'_, End> {
        // An operation that panicked left the port's end as any completed one does (partita's ports keep
        // their own consistency in shared memory); the port stays usable.
        self.end.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn by_id(service: Service, id: SamplingPortId) -> Result<Arc<SamplingPort>, ApexError> {
    let r = registry();
    usize::try_from(id).ok().and_then(|i| i.checked_sub(1)).and_then(|i| r.sampling.get(i)).cloned().ok_or(ApexError::UnknownId { service, what: "sampling port", id })
}

fn create(name: SamplingPortName, max_message_size: MessageSize, direction: PortDirection, refresh_period: ApexSystemTime) -> Result<SamplingPortId, ApexError> {
    let service = Service::CreateSamplingPort;
    in_start_mode(service)?;
    let name = port_name(service, name)?;
    let mut r = registry();
    // By name and direction: a real partition has one direction per name; ports made in one process for both
    // ends of a channel (tests) have both.
    if r.sampling.iter().any(|p| p.name == name && p.direction == direction) {
        return Err(ApexError::AlreadyCreated { service, what: "sampling port", name });
    }
    let req = Request { service, name: name.clone(), kind: PortKind::Sampling, direction };
    let check = |e: &partita_ports::PortEntry| {
        same(service, &name, "maximum message size", u64::from(max_message_size), u64::from(e.max_message), bytes)?;
        // A source's refresh period means nothing (its readers judge the age); a653rs passes 1 ns for one.
        if direction == PortDirection::Destination {
            match u64::try_from(refresh_period) {
                Ok(asked) => same(service, &name, "refresh period", asked, e.depth_or_refresh, nanoseconds)?,
                Err(_) => return Err(ApexError::Geometry { service, port: name.clone(), what: "refresh period", asked: "an infinite one".into(), given: nanoseconds(e.depth_or_refresh) }),
            }
        }
        Ok(())
    };
    let mut refresh_ns = 0;
    let end = r.open(
        &req,
        |e| {
            refresh_ns = e.depth_or_refresh;
            check(e)
        },
        |ports, name| match direction {
            PortDirection::Source => ports.sampling_source(name).map(End::Source),
            PortDirection::Destination => ports.sampling_destination(name).map(|d| End::Destination(d, Validity::Invalid)),
        },
    )?;
    r.sampling.push(Arc::new(SamplingPort { name, max_message: max_message_size, refresh_ns, direction, end: Mutex::new(end) }));
    Ok(r.sampling.len() as SamplingPortId)
}

fn write(id: SamplingPortId, message: &[ApexByte]) -> Result<(), ApexError> {
    let service = Service::WriteSamplingMessage;
    let port = by_id(service, id)?;
    if message.is_empty() {
        return Err(ApexError::InvalidParameter { service, problem: format!("an empty message for port {:?}", port.name) });
    }
    let mut end = port.end();
    match &mut *end {
        End::Source(s) => s.write(message).map_err(|source| ApexError::Port { service, source }),
        End::Destination(..) => Err(ApexError::WrongDirection { service, port: port.name.clone(), direction: "destination" }),
    }
}

fn read(id: SamplingPortId, buf: &mut [ApexByte]) -> Result<(Validity, MessageSize), ApexError> {
    let service = Service::ReadSamplingMessage;
    let port = by_id(service, id)?;
    let mut end = port.end();
    match &mut *end {
        End::Destination(d, last) => {
            let sample = d.read(buf).map_err(|source| ApexError::Port { service, source })?;
            *last = match sample.validity {
                partita_ports::Validity::Valid => Validity::Valid,
                partita_ports::Validity::Invalid => Validity::Invalid,
            };
            Ok((*last, sample.len as MessageSize))
        }
        End::Source(_) => Err(ApexError::WrongDirection { service, port: port.name.clone(), direction: "source" }),
    }
}

impl ApexSamplingPortP4 for PartitaHypervisor {
    /// Opens the partita port of that name, which the supervisor gave with the requested direction, maximum
    /// message size and (at a destination) refresh period; anything else is INVALID_CONFIG.
    fn create_sampling_port(
        sampling_port_name: SamplingPortName,
        max_message_size: MessageSize,
        port_direction: PortDirection,
        refresh_period: ApexSystemTime,
    ) -> Result<SamplingPortId, ErrorReturnCode> {
        record(create(sampling_port_name, max_message_size, port_direction, refresh_period))
    }

    fn write_sampling_message(sampling_port_id: SamplingPortId, message: &[ApexByte]) -> Result<(), ErrorReturnCode> {
        record(write(sampling_port_id, message))
    }

    /// Reads the channel's latest message into `message`, with its validity: valid when it is no older than
    /// the channel's refresh period. Safe whatever `message`'s length: a message longer than it is refused
    /// (INVALID_PARAM), never written past its end.
    //
    // SAFETY: `unsafe` only because a653rs declares it so (for hypervisors that copy through a raw pointer);
    // this body does nothing unsafe, and writes only within `message` through safe slices.
    #[allow(unsafe_code)]
    unsafe fn read_sampling_message(sampling_port_id: SamplingPortId, message: &mut [ApexByte]) -> Result<(Validity, MessageSize), ErrorReturnCode> {
        record(read(sampling_port_id, message))
    }
}

impl ApexSamplingPortP1 for PartitaHypervisor {
    fn get_sampling_port_id(sampling_port_name: SamplingPortName) -> Result<SamplingPortId, ErrorReturnCode> {
        let service = Service::GetSamplingPortId;
        record(port_name(service, sampling_port_name).and_then(|name| {
            let r = registry();
            match r.sampling.iter().position(|p| p.name == name) {
                Some(i) => Ok(i as SamplingPortId + 1),
                None => Err(ApexError::UnknownName { service, what: "sampling port", name }),
            }
        }))
    }

    fn get_sampling_port_status(sampling_port_id: SamplingPortId) -> Result<ApexSamplingPortStatus, ErrorReturnCode> {
        record(by_id(Service::GetSamplingPortStatus, sampling_port_id).map(|port| {
            let last_msg_validity = match &*port.end() {
                End::Destination(_, v) => *v,
                End::Source(_) => Validity::Invalid,
            };
            ApexSamplingPortStatus {
                refresh_period: port.refresh_ns.min(i64::MAX as u64) as ApexSystemTime,
                max_message_size: port.max_message,
                port_direction: port.direction,
                last_msg_validity,
            }
        }))
    }
}
