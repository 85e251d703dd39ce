//! Why an APEX call failed. a653rs's services return a bare `ErrorReturnCode` (`INVALID_CONFIG`, …), which
//! tells an application what class of failure it met but not what to fix; every failure here is first an
//! [`ApexError`] with its context, kept for the calling thread ([`take_last_error`]), and only then reduced to
//! the code the service returns.
use a653rs::bindings::{ErrorReturnCode, OperatingMode};
use partita_ports::control::ControlError;
use partita_ports::PortError;
use std::cell::RefCell;
use std::fmt;

/// An APEX service, named as ARINC 653 names it (its name is what [`ApexError`] messages start with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    GetPartitionStatus,
    SetPartitionMode,
    CreateProcess,
    Start,
    CreateSamplingPort,
    WriteSamplingMessage,
    ReadSamplingMessage,
    GetSamplingPortId,
    GetSamplingPortStatus,
    CreateQueuingPort,
    SendQueuingMessage,
    ReceiveQueuingMessage,
    GetQueuingPortId,
    GetQueuingPortStatus,
    ClearQueuingPort,
    TimedWait,
    PeriodicWait,
    Replenish,
    ReportApplicationMessage,
    RaiseApplicationError,
    SetModuleSchedule,
    GetModuleScheduleStatus,
    GetModuleScheduleId,
}

impl Service {
    pub fn as_str(self) -> &'static str {
        match self {
            Service::GetPartitionStatus => "GET_PARTITION_STATUS",
            Service::SetPartitionMode => "SET_PARTITION_MODE",
            Service::CreateProcess => "CREATE_PROCESS",
            Service::Start => "START",
            Service::CreateSamplingPort => "CREATE_SAMPLING_PORT",
            Service::WriteSamplingMessage => "WRITE_SAMPLING_MESSAGE",
            Service::ReadSamplingMessage => "READ_SAMPLING_MESSAGE",
            Service::GetSamplingPortId => "GET_SAMPLING_PORT_ID",
            Service::GetSamplingPortStatus => "GET_SAMPLING_PORT_STATUS",
            Service::CreateQueuingPort => "CREATE_QUEUING_PORT",
            Service::SendQueuingMessage => "SEND_QUEUING_MESSAGE",
            Service::ReceiveQueuingMessage => "RECEIVE_QUEUING_MESSAGE",
            Service::GetQueuingPortId => "GET_QUEUING_PORT_ID",
            Service::GetQueuingPortStatus => "GET_QUEUING_PORT_STATUS",
            Service::ClearQueuingPort => "CLEAR_QUEUING_PORT",
            Service::TimedWait => "TIMED_WAIT",
            Service::PeriodicWait => "PERIODIC_WAIT",
            Service::Replenish => "REPLENISH",
            Service::ReportApplicationMessage => "REPORT_APPLICATION_MESSAGE",
            Service::RaiseApplicationError => "RAISE_APPLICATION_ERROR",
            Service::SetModuleSchedule => "SET_MODULE_SCHEDULE",
            Service::GetModuleScheduleStatus => "GET_MODULE_SCHEDULE_STATUS",
            Service::GetModuleScheduleId => "GET_MODULE_SCHEDULE_ID",
        }
    }

    /// Whether the service creates something: its failures are configuration errors, printed when they happen.
    fn creates(self) -> bool {
        matches!(self, Service::CreateProcess | Service::CreateSamplingPort | Service::CreateQueuingPort)
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an APEX service failed; [`ApexError::code`] is what the service returned.
#[derive(Debug, thiserror::Error)]
pub enum ApexError {
    /// `PARTITA_PORTS` could not be read, or its descriptors could not be taken over.
    #[error("{service}: the ports the supervisor gave this partition are not usable: {reason}")]
    PortsUnavailable { service: Service, reason: String },
    /// partita's port refused the operation (its error names the port).
    #[error("{service}: {source}")]
    Port {
        service: Service,
        #[source]
        source: PortError,
    },
    /// The application asked for a port of another geometry than the system file gave its channel.
    #[error("{service} {port:?}: the partition asks for a {what} of {asked}, its channel has {given}; make the system file and the partition agree")]
    Geometry { service: Service, port: String, what: &'static str, asked: String, given: String },
    /// A name that is not UTF-8 or is empty.
    #[error("{service}: {what} is not a name (empty, or not UTF-8)")]
    BadName { service: Service, what: &'static str },
    #[error("{service}: {what} {name:?} exists already")]
    AlreadyCreated { service: Service, what: &'static str, name: String },
    #[error("{service}: allowed only during cold or warm start; the partition is in {mode:?}")]
    NotInStartMode { service: Service, mode: OperatingMode },
    #[error("{service}: no {what} named {name:?} was created in this partition")]
    UnknownName { service: Service, what: &'static str, name: String },
    #[error("{service}: no {what} has id {id} in this partition")]
    UnknownId { service: Service, what: &'static str, id: i64 },
    #[error("{service}: port {port:?} is a {direction} port")]
    WrongDirection { service: Service, port: String, direction: &'static str },
    /// A parameter out of its range.
    #[error("{service}: {problem}")]
    InvalidParameter { service: Service, problem: String },
    /// A call not allowed in the caller's state (not a periodic process, a mode change ARINC 653 forbids).
    #[error("{service}: {problem}")]
    InvalidMode { service: Service, problem: &'static str },
    /// Nothing to do (the state asked for is already there).
    #[error("{service}: {problem}")]
    NoAction { service: Service, problem: &'static str },
    #[error("{service}: at most {limit} {what} in one partition")]
    Limit { service: Service, what: &'static str, limit: u32 },
    /// The service needs the partition's control page, and the supervisor gave none.
    #[error("{service}: this partition has no control page (PARTITA_CONTROL is unset: it runs outside a supervisor's plan)")]
    NoControlPage { service: Service },
    /// The control page failed: the supervisor did not answer in time, or the page is not usable.
    #[error("{service}: {source}")]
    Control {
        service: Service,
        #[source]
        source: ControlError,
    },
    /// The supervisor refused the request (not permitted to this partition, or not in its state).
    #[error("{service}: refused by the supervisor: {problem}")]
    Refused { service: Service, problem: String },
    #[error("{service}: could not make the thread of process {process:?}: {source}")]
    Thread {
        service: Service,
        process: String,
        #[source]
        source: std::io::Error,
    },
}

impl ApexError {
    pub fn service(&self) -> Service {
        match self {
            ApexError::PortsUnavailable { service, .. }
            | ApexError::Port { service, .. }
            | ApexError::Geometry { service, .. }
            | ApexError::BadName { service, .. }
            | ApexError::AlreadyCreated { service, .. }
            | ApexError::NotInStartMode { service, .. }
            | ApexError::UnknownName { service, .. }
            | ApexError::UnknownId { service, .. }
            | ApexError::WrongDirection { service, .. }
            | ApexError::InvalidParameter { service, .. }
            | ApexError::InvalidMode { service, .. }
            | ApexError::NoAction { service, .. }
            | ApexError::Limit { service, .. }
            | ApexError::NoControlPage { service }
            | ApexError::Control { service, .. }
            | ApexError::Refused { service, .. }
            | ApexError::Thread { service, .. } => *service,
        }
    }

    /// The return code ARINC 653 gives this failure.
    pub fn code(&self) -> ErrorReturnCode {
        use ErrorReturnCode::*;
        match self {
            ApexError::PortsUnavailable { .. } | ApexError::Geometry { .. } | ApexError::UnknownName { .. } | ApexError::Limit { .. } | ApexError::Thread { .. } => InvalidConfig,
            ApexError::BadName { service, .. } => {
                if *service == Service::CreateProcess {
                    InvalidParam
                } else {
                    InvalidConfig
                }
            }
            ApexError::AlreadyCreated { .. } | ApexError::NoAction { .. } => NoAction,
            ApexError::NotInStartMode { .. } | ApexError::WrongDirection { .. } | ApexError::InvalidMode { .. } => InvalidMode,
            ApexError::UnknownId { .. } | ApexError::InvalidParameter { .. } => InvalidParam,
            ApexError::Port { service, source } => port_code(*service, source),
            ApexError::NoControlPage { .. } => NotAvailable,
            ApexError::Control { source: ControlError::MessageTooLong { .. }, .. } => InvalidParam,
            ApexError::Control { .. } => NotAvailable,
            // A schedule switch by a partition the configuration does not allow to; a mode change the partition's
            // state does not allow; an error kind the partition may not raise.
            ApexError::Refused { service, .. } => match service {
                Service::SetPartitionMode => InvalidMode,
                Service::RaiseApplicationError => InvalidParam,
                _ => InvalidConfig,
            },
        }
    }
}

/// What ARINC 653 returns for a port's failure in `service`.
fn port_code(service: Service, error: &PortError) -> ErrorReturnCode {
    use ErrorReturnCode::*;
    match error {
        // Asked for a port the supervisor did not give, or not as given: the configuration does not have it.
        PortError::NoSuchPort { .. } | PortError::WrongPort { .. } | PortError::Description(_) | PortError::Sys { .. } => InvalidConfig,
        PortError::AlreadyOpen { .. } => NoAction,
        // A sender's message longer than the channel is INVALID_CONFIG (WRITE_SAMPLING_MESSAGE,
        // SEND_QUEUING_MESSAGE); at a reader it is the writer's garbage, and there is no message to take.
        PortError::TooLarge { .. } if matches!(service, Service::WriteSamplingMessage | Service::SendQueuingMessage) => InvalidConfig,
        PortError::TooLarge { .. } | PortError::PeerFault { .. } => NotAvailable,
        PortError::BufferTooSmall { .. } => InvalidParam,
        // READ_SAMPLING_MESSAGE of a port never written is NO_ACTION; an empty queue is NOT_AVAILABLE.
        PortError::Empty { .. } if service == Service::ReadSamplingMessage => NoAction,
        PortError::Empty { .. } | PortError::Full { .. } => NotAvailable,
        PortError::TimedOut { .. } => TimedOut,
    }
}

thread_local! {
    static LAST_ERROR: RefCell<Option<ApexError>> = const { RefCell::new(None) };
}

/// Why the calling thread's most recent failed APEX call failed, taken (the next call returns `None` until
/// another call fails). The services themselves return only ARINC 653's code.
pub fn take_last_error() -> Option<ApexError> {
    LAST_ERROR.with(|l| l.borrow_mut().take())
}

/// Reduces `result` to what the binding returns, keeping the error for [`take_last_error`]. A failure to create
/// a port or a process is a configuration error that an application usually unwraps at start: it is printed
/// too, so the operator reads what to fix rather than a bare `InvalidConfig`.
pub(crate) fn record<T>(result: Result<T, ApexError>) -> Result<T, ErrorReturnCode> {
    result.map_err(|e| {
        let code = e.code();
        if e.service().creates() {
            eprintln!("{}: {e}", crate::partition::partition_name());
        }
        LAST_ERROR.with(|l| *l.borrow_mut() = Some(e));
        code
    })
}
