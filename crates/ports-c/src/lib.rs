//! partita-ports-c: the ARINC 653 ports of partita-ports for C programs in partitions.
//!
//! A C program links the static library this crate builds (`libpartita_ports_c.a`, with `-lpthread -ldl -lm`
//! as every Rust static library needs) and includes `include/partita_ports.h`, the API's reference. It gets
//! what a Rust partition gets from [`partita_ports::Ports::from_env`]: its ports by name, from the descriptors
//! and `PARTITA_PORTS` the supervisor gave it.
//!
//! **What it offers, and how it maps onto partita-ports.**
//!
//! | C | partita-ports |
//! |---|---|
//! | `partita_ports_open()` | [`partita_ports::Ports::from_env`], once per process; its outcome is kept |
//! | `partita_sampling_source_open(name, &err)`, `partita_sampling_write` | [`partita_ports::Ports::sampling_source`], [`partita_ports::SamplingSource::write_with`] |
//! | `partita_sampling_destination_open`, `partita_sampling_read` | [`partita_ports::SamplingDestination::read`]: length, age, validity |
//! | `partita_queuing_source_open`, `partita_queuing_send(…, timeout_ns)` | [`partita_ports::QueuingSource::send_with`] |
//! | `partita_queuing_destination_open`, `partita_queuing_receive(…, timeout_ns)` | [`partita_ports::QueuingDestination::receive`] |
//! | `partita_*_close` | dropping the port |
//! | `int` return codes, `partita_ports_strerror`, `partita_ports_last_error` | one [`Code`] per [`partita_ports::PortError`] variant; the error's text per thread |
//!
//! A timeout is 0 (do not wait: `Empty` or `Full` at once), negative (wait without end) or a number of
//! nanoseconds on the monotonic clock, as [`partita_ports::Timeout`]. Faults are counted in the port's status
//! memory exactly as for a Rust partition: the C layer adds no check the supervisor would not see, and skips
//! none (a message too large for the channel goes to the port, which counts it, before it is refused).
//!
//! **The boundary.** Every function C calls catches Rust panics and returns [`Code::Internal`] instead of
//! unwinding into C; every pointer is checked for null and every length against the buffer C gave before any
//! memory is touched. Received messages land in a buffer the handle owns and are then copied into C's buffer,
//! `len` bytes at most `cap`: no Rust slice is ever made over C memory that C may not have initialised. All the
//! `unsafe` code of the crate is in the `ffi` module.
//!
//! **Threads.** A handle is used by one thread at a time: it has no lock of its own (a port is one end of a
//! channel with one writer or one reader; ARINC 653 gives a port to one process too). Different handles may be
//! used by different threads at once. Opening ports is serialised on one lock, so any thread may open any port.
//! `partita_ports_last_error` is per thread: the text of the last call that failed on the calling thread.
//!
//! **Left out.** A port is opened once per process: closing it releases its memory but does not give its
//! descriptors back, so a second open of the same name is `PARTITA_ERR_ALREADY_OPEN` (as in partita-ports).
//! Writing in place (`write_with`/`send_with` with a callback), a sampling message's sequence number, a queued
//! message's send time, the number of messages waiting and the port's status counters stay Rust-only: a C
//! program copies, and the supervisor reads the counters. A wait is not ended by a signal (the futex wait
//! restarts); a C program that must react to signals waits with a finite timeout.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
mod ffi;

use partita_ports::{PortError, Ports, QueuingDestination, QueuingSource, SamplingDestination, SamplingSource, Timeout};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, PoisonError};

/// The codes C functions return, as `enum partita_ports_code` in the header: 0, or one negative code per
/// [`PortError`] variant, then the two failures only the C boundary has.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Ok = 0,
    NoSuchPort = -1,
    WrongPort = -2,
    AlreadyOpen = -3,
    TooLarge = -4,
    BufferTooSmall = -5,
    Empty = -6,
    Full = -7,
    TimedOut = -8,
    PeerFault = -9,
    System = -10,
    BadDescription = -11,
    /// A null pointer where one is required, or a port name that is not UTF-8.
    InvalidArgument = -12,
    /// A panic inside the library, caught at the boundary: a bug of partita, not of the caller.
    Internal = -13,
}

impl Code {
    pub const ALL: [Code; 14] = [
        Code::Ok,
        Code::NoSuchPort,
        Code::WrongPort,
        Code::AlreadyOpen,
        Code::TooLarge,
        Code::BufferTooSmall,
        Code::Empty,
        Code::Full,
        Code::TimedOut,
        Code::PeerFault,
        Code::System,
        Code::BadDescription,
        Code::InvalidArgument,
        Code::Internal,
    ];

    /// The code of a port error. Exhaustive on purpose: a new variant of [`PortError`] does not compile here
    /// until it has a code of its own in this enum and in the header.
    pub fn of(e: &PortError) -> Code {
        match e {
            PortError::NoSuchPort { .. } => Code::NoSuchPort,
            PortError::WrongPort { .. } => Code::WrongPort,
            PortError::AlreadyOpen { .. } => Code::AlreadyOpen,
            PortError::TooLarge { .. } => Code::TooLarge,
            PortError::BufferTooSmall { .. } => Code::BufferTooSmall,
            PortError::Empty { .. } => Code::Empty,
            PortError::Full { .. } => Code::Full,
            PortError::TimedOut { .. } => Code::TimedOut,
            PortError::PeerFault { .. } => Code::PeerFault,
            PortError::Sys { .. } => Code::System,
            PortError::Description(_) => Code::BadDescription,
        }
    }

    pub fn from_raw(code: c_int) -> Option<Code> {
        Code::ALL.into_iter().find(|c| *c as c_int == code)
    }

    /// Its name in the header.
    pub fn header_name(self) -> &'static str {
        match self {
            Code::Ok => "PARTITA_OK",
            Code::NoSuchPort => "PARTITA_ERR_NO_SUCH_PORT",
            Code::WrongPort => "PARTITA_ERR_WRONG_PORT",
            Code::AlreadyOpen => "PARTITA_ERR_ALREADY_OPEN",
            Code::TooLarge => "PARTITA_ERR_TOO_LARGE",
            Code::BufferTooSmall => "PARTITA_ERR_BUFFER_TOO_SMALL",
            Code::Empty => "PARTITA_ERR_EMPTY",
            Code::Full => "PARTITA_ERR_FULL",
            Code::TimedOut => "PARTITA_ERR_TIMED_OUT",
            Code::PeerFault => "PARTITA_ERR_PEER_FAULT",
            Code::System => "PARTITA_ERR_SYSTEM",
            Code::BadDescription => "PARTITA_ERR_BAD_DESCRIPTION",
            Code::InvalidArgument => "PARTITA_ERR_INVALID_ARGUMENT",
            Code::Internal => "PARTITA_ERR_INTERNAL",
        }
    }

    /// What `partita_ports_strerror` says: what the code means in general (the last error says which port
    /// and what exactly).
    pub fn description(self) -> &'static CStr {
        match self {
            Code::Ok => c"no error",
            Code::NoSuchPort => c"no port of this name was given to this partition",
            Code::WrongPort => c"the port is of another kind or direction than the function opening it",
            Code::AlreadyOpen => c"the port is already open in this process",
            Code::TooLarge => c"a message longer than the channel's maximum message size",
            Code::BufferTooSmall => c"the message does not fit the buffer given",
            Code::Empty => c"no message",
            Code::Full => c"the queue is full",
            Code::TimedOut => c"timed out",
            Code::PeerFault => c"the other end's memory holds values no valid writer writes; the message is not taken",
            Code::System => c"a system call failed",
            Code::BadDescription => c"PARTITA_PORTS is not what the supervisor writes",
            Code::InvalidArgument => c"a null pointer where one is required, or a port name that is not UTF-8",
            Code::Internal => c"an internal error of the partita ports library (a bug): the operation may be half done",
        }
    }
}

/// A failed call as C sees it: its code, and the text `partita_ports_last_error` returns.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    code: Code,
    message: String,
}

impl Failure {
    fn invalid_argument(what: &str) -> Failure {
        Failure { code: Code::InvalidArgument, message: what.to_string() }
    }
}

impl From<PortError> for Failure {
    fn from(e: PortError) -> Failure {
        Failure { code: Code::of(&e), message: e.to_string() }
    }
}

thread_local! {
    /// The text of the last failure on this thread; C holds a pointer into it until the next failure.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Keeps `failure`'s text as this thread's last error and returns its code.
fn record(failure: Failure) -> c_int {
    // The texts come from port names and OS errors, which hold no NUL; one that did would still be shown.
    let text = CString::new(failure.message.replace('\0', "\\0")).unwrap_or_default();
    // Fails only while the thread ends (its locals destroyed): there is no one left to read the text.
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = text);
    failure.code as c_int
}

/// This thread's last error text; empty before the first failure (and while the thread ends).
fn last_error() -> *const c_char {
    LAST_ERROR.try_with(|last| last.borrow().as_ptr()).unwrap_or(c"".as_ptr())
}

/// What a caught panic said.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let what = payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str)).unwrap_or("a panic without a message");
    format!("internal error of the partita ports library (please report it): {what}")
}

/// Runs one C call: its failure, or a panic, becomes a code and this thread's last error. The closure is
/// asserted unwind-safe: after a panic the caller gets `PARTITA_ERR_INTERNAL` and is told the operation may
/// be half done, which is all a C caller can be told.
fn guarded(call: impl FnOnce() -> Result<(), Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(())) => Code::Ok as c_int,
        Ok(Err(failure)) => record(failure),
        Err(payload) => record(Failure { code: Code::Internal, message: panic_text(payload.as_ref()) }),
    }
}

/// Runs one C call that makes a handle: the handle, or null with the code in `err`.
fn guarded_open<H>(err: &mut c_int, open: impl FnOnce() -> Result<H, Failure>) -> Option<Box<H>> {
    let mut made = None;
    *err = guarded(|| {
        made = Some(Box::new(open()?));
        Ok(())
    });
    made
}

/// What `PARTITA_PORTS` gave this process, read once: a failure is kept too, since the descriptors read
/// before it were taken (and closed) and a second reading would fail differently.
enum Given {
    Ports(Ports),
    Failed(Failure),
}

static GIVEN: Mutex<Option<Given>> = Mutex::new(None);

/// Runs `use_ports` on the ports of `PARTITA_PORTS`, read on first use.
fn with_ports<T>(use_ports: impl FnOnce(&mut Ports) -> Result<T, PortError>) -> Result<T, Failure> {
    // A panic while the lock was held left no half-made state: `Ports` takes a port's descriptors out in one step.
    let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    let given = given.get_or_insert_with(|| match Ports::from_env() {
        Ok(ports) => Given::Ports(ports),
        Err(e) => Given::Failed(e.into()),
    });
    match given {
        Given::Ports(ports) => use_ports(ports).map_err(Failure::from),
        Given::Failed(failure) => Err(failure.clone()),
    }
}

/// Gives this process `ports` as if `PARTITA_PORTS` had named them: the unit tests' ports, made in-process
/// without touching the environment (which other test threads read).
#[cfg(test)]
fn give_for_test(ports: Ports) {
    let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    assert!(given.is_none(), "one test gives this process its ports");
    *given = Some(Given::Ports(ports));
}

fn open_ports() -> Result<(), Failure> {
    with_ports(|_| Ok(()))
}

/// A port name from C, already checked for null.
fn port_name(name: &CStr) -> Result<&str, Failure> {
    name.to_str().map_err(|_| Failure::invalid_argument("the port name is not UTF-8"))
}

/// A timeout as C gives it: 0 = do not wait, negative = without end, positive = at most that many nanoseconds
/// ([`Timeout::from_ns`], as the APEX services take it).
fn timeout(timeout_ns: i64) -> Timeout {
    Timeout::from_ns(timeout_ns)
}

/// `struct partita_sampling_source` of the header.
#[derive(Debug)]
pub struct SamplingSourceHandle(SamplingSource);

/// `struct partita_sampling_destination`: the port, and the buffer a message is read into before it is
/// copied into C's (one channel's maximum message, allocated once at open).
#[derive(Debug)]
pub struct SamplingDestinationHandle {
    port: SamplingDestination,
    received: Vec<u8>,
}

/// `struct partita_queuing_source`.
#[derive(Debug)]
pub struct QueuingSourceHandle(QueuingSource);

/// `struct partita_queuing_destination`, with its receive buffer as the sampling destination's.
#[derive(Debug)]
pub struct QueuingDestinationHandle {
    port: QueuingDestination,
    received: Vec<u8>,
}

impl SamplingSourceHandle {
    fn open(name: &CStr) -> Result<SamplingSourceHandle, Failure> {
        let name = port_name(name)?;
        with_ports(|ports| ports.sampling_source(name)).map(SamplingSourceHandle)
    }

    /// Writes a message of `len` bytes that `fill` copies into the channel, once the port has checked `len`
    /// against the channel's maximum (so that `fill` is never given more than the channel holds).
    fn write_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), Failure> {
        self.0.write_with(len, fill).map_err(Failure::from)
    }
}

impl SamplingDestinationHandle {
    fn open(name: &CStr) -> Result<SamplingDestinationHandle, Failure> {
        let name = port_name(name)?;
        let port = with_ports(|ports| ports.sampling_destination(name))?;
        let received = vec![0; port.max_message() as usize];
        Ok(SamplingDestinationHandle { port, received })
    }

    /// Reads the latest message as a buffer of `cap` bytes can take it: the message (in the handle's buffer),
    /// or the failure and, for `BufferTooSmall`, the length a buffer must have.
    fn read(&mut self, cap: usize) -> Result<(&[u8], partita_ports::Sample), (Failure, usize)> {
        // Never more than the channel's maximum: the port needs no more, and it keeps the buffer's size.
        let cap = cap.min(self.received.len());
        match self.port.read(&mut self.received[..cap]) {
            Ok(sample) => Ok((&self.received[..sample.len], sample)),
            Err(e) => Err(needed_length(e)),
        }
    }
}

impl QueuingSourceHandle {
    fn open(name: &CStr) -> Result<QueuingSourceHandle, Failure> {
        let name = port_name(name)?;
        with_ports(|ports| ports.queuing_source(name)).map(QueuingSourceHandle)
    }

    /// Sends a message of `len` bytes that `fill` copies into the channel, as [`SamplingSourceHandle::write_with`].
    fn send_with(&mut self, len: usize, timeout_ns: i64, fill: impl FnOnce(&mut [u8])) -> Result<(), Failure> {
        self.0.send_with(len, timeout(timeout_ns), fill).map_err(Failure::from)
    }
}

impl QueuingDestinationHandle {
    fn open(name: &CStr) -> Result<QueuingDestinationHandle, Failure> {
        let name = port_name(name)?;
        let port = with_ports(|ports| ports.queuing_destination(name))?;
        let received = vec![0; port.max_message() as usize];
        Ok(QueuingDestinationHandle { port, received })
    }

    /// Takes the oldest message as a buffer of `cap` bytes can take it, as [`SamplingDestinationHandle::read`].
    /// A message longer than `cap` stays in the queue (the port refuses it before taking it).
    fn receive(&mut self, cap: usize, timeout_ns: i64) -> Result<&[u8], (Failure, usize)> {
        let cap = cap.min(self.received.len());
        match self.port.receive(&mut self.received[..cap], timeout(timeout_ns)) {
            Ok(r) => Ok(&self.received[..r.len]),
            Err(e) => Err(needed_length(e)),
        }
    }
}

/// A read's failure, with the length C is told: the message's for `BufferTooSmall` (so that C can size its
/// buffer), 0 otherwise (a length a hostile writer wrote is not passed on).
fn needed_length(e: PortError) -> (Failure, usize) {
    let needed = match &e {
        PortError::BufferTooSmall { len, .. } => *len,
        _ => 0,
    };
    (e.into(), needed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The header's `enum partita_ports_code`, as `(name, value)`.
    fn header_codes() -> Vec<(String, i32)> {
        let header = include_str!("../include/partita_ports.h");
        let start = header.find("enum partita_ports_code {").expect("the header declares enum partita_ports_code");
        let body = &header[start..header[start..].find("};").unwrap() + start];
        body.lines()
            .filter_map(|l| {
                let (name, value) = l.trim().trim_end_matches(',').split_once(" = ")?;
                Some((name.to_string(), value.parse().unwrap_or_else(|_| panic!("{l:?}: not a number"))))
            })
            .collect()
    }

    #[test]
    fn the_header_s_codes_are_the_library_s() {
        let rust: Vec<(String, i32)> = Code::ALL.iter().map(|c| (c.header_name().to_string(), *c as i32)).collect();
        assert_eq!(header_codes(), rust);
    }

    #[test]
    fn the_header_declares_every_function_the_library_exports_and_no_other() {
        let header = include_str!("../include/partita_ports.h");
        let ffi = include_str!("ffi.rs");
        let exported: Vec<&str> = ffi.split("extern \"C\" fn ").skip(1).map(|rest| &rest[..rest.find('(').unwrap()]).collect();
        assert!(exported.len() >= 15, "{exported:?}");
        let declared: Vec<&str> = header
            .lines()
            .filter(|l| !l.starts_with([' ', '*', '/', '#']) && l.contains("partita_") && l.ends_with(");"))
            .map(|l| {
                let before = &l[..l.find('(').unwrap()];
                before.rsplit([' ', '*']).next().unwrap()
            })
            .collect();
        let mut a = exported.clone();
        let mut b = declared.clone();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "exported by src/ffi.rs, declared in include/partita_ports.h");
    }

    #[test]
    fn every_port_error_has_its_own_code_and_a_description() {
        let descriptions: Vec<&CStr> = Code::ALL.iter().map(|c| c.description()).collect();
        for (i, c) in Code::ALL.iter().enumerate() {
            assert_eq!(Code::from_raw(*c as c_int), Some(*c));
            assert!(!descriptions[i].is_empty());
            assert!(!descriptions[..i].contains(&descriptions[i]), "{c:?} says what another code says");
        }
        assert_eq!(Code::from_raw(-14), None);
        assert_eq!(Code::from_raw(1), None);
    }

    #[test]
    fn a_timeout_of_zero_does_not_wait_a_negative_one_waits_without_end() {
        assert_eq!(timeout(0), Timeout::Immediate);
        assert_eq!(timeout(-1), Timeout::Infinite);
        assert_eq!(timeout(i64::MIN), Timeout::Infinite);
        assert_eq!(timeout(1_500), Timeout::After(Duration::from_nanos(1_500)));
        assert_eq!(timeout(i64::MAX), Timeout::After(Duration::from_nanos(i64::MAX as u64)));
    }

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_text() {
        let code = guarded(|| panic!("the test's panic"));
        assert_eq!(code, Code::Internal as c_int);
        let text = LAST_ERROR.with(|l| l.borrow().to_str().unwrap().to_string());
        assert!(text.contains("the test's panic"), "{text}");
    }
}
