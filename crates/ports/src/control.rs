//! The partition's control page: one memory file of 4096 bytes per planned process partition, which the
//! supervisor creates (mode 0600, sealed against shrinking and growing like a channel's memory) and hands to
//! the partition as an inherited descriptor whose number is in `PARTITA_CONTROL`. Both sides map it writable.
//! Through it the supervisor tells the partition its operating mode, its start condition and the module's plan,
//! and the partition posts one request at a time (a mode change, an error it raises, a plan switch) and waits
//! for the answer.
//!
//! Every field is a little-endian u64, read and written with atomics:
//!
//! | offset | field | written by |
//! |---|---|---|
//! | 0 | magic 0x4C52_5443_4154_5450 | supervisor |
//! | 8 | version 1 | supervisor |
//! | 16 | mode: 0 idle, 1 cold_start, 2 warm_start, 3 normal (ARINC 653's numbers) | supervisor |
//! | 24 | start_condition: 0 normal_start, 1 partition_restart, 2 hm_module_restart, 3 hm_partition_restart | supervisor |
//! | 32 | plan: index of the module's current plan | supervisor |
//! | 40 | next_plan: index of the plan a pending switch goes to (= plan when none) | supervisor |
//! | 48 | last_switch_ns: CLOCK_MONOTONIC of the last switch (0: none) | supervisor |
//! | 56 | idle_request: 1 just before the partition asks for IDLE (the executor reads it at every boundary) | partition |
//! | 64 | req_seq: incremented by the partition after it filled the request fields | partition |
//! | 72 | req_kind: 1 set_mode, 2 raise_error, 3 switch_plan | partition |
//! | 80 | req_arg: the mode (0..=3), the error kind's code, or the plan's index | partition |
//! | 88 | req_len: length of req_msg (at most 192) | partition |
//! | 96..288 | req_msg: a UTF-8 message (raise_error) | partition |
//! | 512 | done_seq: the last req_seq the supervisor answered (its low 32 bits are the futex a waiting partition sleeps on) | supervisor |
//! | 520 | done_result: 0 done, 1 refused, 2 invalid, 3 no such plan | supervisor |
//! | 1024.. | plan names: 16 entries of 32 bytes, NUL-padded, at the plan's index | supervisor |
//!
//! **The partition is untrusted.** It can write anything anywhere in its page, including the supervisor's
//! fields: the supervisor keeps its own state and never reads its fields back; it reads only the request
//! fields, and [`ControlPage::take_request`] turns any byte pattern into a valid request or
//! [`Outcome::Invalid`], with a bounded number of reads and at most 192 bytes allocated. The sealed size means
//! the partition cannot truncate the page under the supervisor's mapping.
use partita_os::shm::{self, Mapping, Wake};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The page's size.
pub const PAGE_BYTES: usize = 4096;
/// What the supervisor writes at offset 0.
pub const MAGIC: u64 = 0x4C52_5443_4154_5450;
/// The layout's version, at offset 8.
pub const VERSION: u64 = 1;

pub const MAGIC_AT: usize = 0;
pub const VERSION_AT: usize = 8;
pub const MODE_AT: usize = 16;
pub const START_CONDITION_AT: usize = 24;
pub const PLAN_AT: usize = 32;
pub const NEXT_PLAN_AT: usize = 40;
pub const LAST_SWITCH_AT: usize = 48;
pub const IDLE_REQUEST_AT: usize = 56;
pub const REQ_SEQ_AT: usize = 64;
pub const REQ_KIND_AT: usize = 72;
pub const REQ_ARG_AT: usize = 80;
pub const REQ_LEN_AT: usize = 88;
pub const REQ_MSG_AT: usize = 96;
/// The longest message a request carries.
pub const MAX_MESSAGE: usize = 192;
pub const DONE_SEQ_AT: usize = 512;
pub const DONE_RESULT_AT: usize = 520;
pub const PLAN_NAMES_AT: usize = 1024;
/// One plan name's entry: NUL-padded UTF-8; a name of exactly 32 bytes has no NUL.
pub const PLAN_NAME_BYTES: usize = 32;
/// The most plans the page names.
pub const MAX_PLANS: usize = 16;

/// `req_kind` values.
pub const KIND_SET_MODE: u64 = 1;
pub const KIND_RAISE_ERROR: u64 = 2;
pub const KIND_SWITCH_PLAN: u64 = 3;

/// Error kind codes a request may carry: 0..ERROR_KINDS, the codes of `partita_system::ErrorKind` (ARINC
/// 653's 0..=7, then partita's own). Whether a partition may raise a kind is the supervisor's decision
/// ([`Outcome::Refused`]); a code outside the range is [`Outcome::Invalid`].
pub const ERROR_KINDS: u64 = 14;

/// The error kinds' names, at their codes: those of `partita_system::ErrorKind::as_str` (the system file's
/// health-monitor keys), for programs that do not link the system model (`partita app partition error`).
pub const ERROR_KIND_NAMES: [&str; ERROR_KINDS as usize] = [
    "deadline_missed",
    "application_error",
    "numeric_error",
    "illegal_request",
    "stack_overflow",
    "memory_violation",
    "hardware_fault",
    "power_fail",
    "seccomp_denial",
    "oom",
    "pids_limit",
    "missed_window",
    "ran_outside_window",
    "exited",
];

/// The code of the error kind named `name` (one of [`ERROR_KIND_NAMES`], or its code in decimal).
pub fn error_kind_code(name: &str) -> Option<u8> {
    if let Ok(n) = name.parse::<u8>() {
        return (u64::from(n) < ERROR_KINDS).then_some(n);
    }
    ERROR_KIND_NAMES.iter().position(|k| *k == name).map(|i| i as u8)
}

/// How often [`ControlPage::take_request`] reads a request again when the partition changed it during the
/// read, before it calls the request invalid.
const READ_ATTEMPTS: u32 = 4;

/// A partition's operating mode (ARINC 653's numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Idle = 0,
    ColdStart = 1,
    WarmStart = 2,
    Normal = 3,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Idle, Mode::ColdStart, Mode::WarmStart, Mode::Normal];

    pub fn code(self) -> u64 {
        self as u64
    }

    pub fn from_code(c: u64) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.code() == c)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Idle => "idle",
            Mode::ColdStart => "cold_start",
            Mode::WarmStart => "warm_start",
            Mode::Normal => "normal",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `idle`, `cold_start`, `warm_start`, `normal` (a `-` for the `_` too, any case).
impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        let word = s.to_ascii_lowercase().replace('-', "_");
        Mode::ALL.into_iter().find(|m| m.as_str() == word).ok_or_else(|| format!("{s:?} is not a mode: give idle, cold_start, warm_start or normal"))
    }
}

/// Why the partition is in its current run (ARINC 653's numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StartCondition {
    NormalStart = 0,
    PartitionRestart = 1,
    HmModuleRestart = 2,
    HmPartitionRestart = 3,
}

impl StartCondition {
    pub const ALL: [StartCondition; 4] = [StartCondition::NormalStart, StartCondition::PartitionRestart, StartCondition::HmModuleRestart, StartCondition::HmPartitionRestart];

    pub fn code(self) -> u64 {
        self as u64
    }

    pub fn from_code(c: u64) -> Option<StartCondition> {
        StartCondition::ALL.into_iter().find(|s| s.code() == c)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StartCondition::NormalStart => "normal_start",
            StartCondition::PartitionRestart => "partition_restart",
            StartCondition::HmModuleRestart => "hm_module_restart",
            StartCondition::HmPartitionRestart => "hm_partition_restart",
        }
    }
}

impl fmt::Display for StartCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a partition asks of the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// SET_PARTITION_MODE.
    SetMode(Mode),
    /// RAISE_APPLICATION_ERROR and its kin: an error kind's code (`partita_system::ErrorKind`) and a message of
    /// at most [`MAX_MESSAGE`] bytes, for the supervisor's health-monitor table.
    RaiseError { kind: u8, message: String },
    /// SET_MODULE_SCHEDULE: the plan of this index (system partitions only).
    SwitchPlan(u64),
}

impl Request {
    /// The service's name, for messages.
    pub fn as_str(&self) -> &'static str {
        match self {
            Request::SetMode(_) => "set_mode",
            Request::RaiseError { .. } => "raise_error",
            Request::SwitchPlan(_) => "switch_plan",
        }
    }

    fn fields(&self) -> (u64, u64, &[u8]) {
        match self {
            Request::SetMode(m) => (KIND_SET_MODE, m.code(), &[]),
            Request::RaiseError { kind, message } => (KIND_RAISE_ERROR, u64::from(*kind), message.as_bytes()),
            Request::SwitchPlan(p) => (KIND_SWITCH_PLAN, *p, &[]),
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::SetMode(m) => write!(f, "set_mode {m}"),
            Request::RaiseError { kind, message } => write!(f, "raise_error kind {kind}: {message}"),
            Request::SwitchPlan(p) => write!(f, "switch_plan {p}"),
        }
    }
}

/// The supervisor's answer to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Done (a mode change or a plan switch is under way: the page shows when it happened).
    Done = 0,
    /// Not permitted (a plan switch by a partition that is not a system partition, an error kind a partition
    /// may not raise, a mode change ARINC 653 forbids).
    Refused = 1,
    /// A request no honest partition posts: a bad kind, argument or length, a message not UTF-8.
    Invalid = 2,
    /// A plan switch to an index the module has no plan at.
    NoSuchPlan = 3,
}

impl Outcome {
    pub const ALL: [Outcome; 4] = [Outcome::Done, Outcome::Refused, Outcome::Invalid, Outcome::NoSuchPlan];

    pub fn code(self) -> u64 {
        self as u64
    }

    pub fn from_code(c: u64) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.code() == c)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Refused => "refused",
            Outcome::Invalid => "invalid",
            Outcome::NoSuchPlan => "no such plan",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the partition's side of the page failed with.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(transparent)]
    Variable(#[from] partita_env::BadControl),
    #[error("the control page (descriptor {fd}) was taken over already in this process; keep the first Control")]
    AlreadyTaken { fd: i32 },
    #[error("the control page (descriptor {fd}): {what}: {source}")]
    Sys {
        fd: i32,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("descriptor {fd} is not a control page the supervisor made: {problem}")]
    NotAPage { fd: i32, problem: String },
    #[error("{request}: a message of {len} bytes does not fit the control page (at most {max} bytes)")]
    MessageTooLong { request: &'static str, len: usize, max: usize },
    #[error("{request}: the supervisor did not answer within {waited:?} (the time the partition spent frozen counts)")]
    TimedOut { request: &'static str, waited: Duration },
    #[error("{request}: the supervisor answered {value}, which is no outcome (0 done, 1 refused, 2 invalid, 3 no such plan)")]
    BadAnswer { request: &'static str, value: u64 },
}

/// Set once `PARTITA_CONTROL`'s descriptor is owned by a [`Control`] of this process.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// The partition's side of its control page.
#[derive(Debug)]
pub struct Control {
    map: Mapping,
    fd: i32,
    /// One request at a time: the threads of a partition share its page.
    one_request: Mutex<()>,
}

impl Control {
    /// The page of `PARTITA_CONTROL`, its descriptor taken over (close-on-exec from here on); `None` when the
    /// variable is unset (outside a planned process partition). The descriptor is taken once per process: a
    /// second call fails with [`ControlError::AlreadyTaken`].
    pub fn from_env() -> Result<Option<Control>, ControlError> {
        let fd = match partita_env::control_fd() {
            None => return Ok(None),
            Some(r) => r?,
        };
        if TAKEN.swap(true, Ordering::SeqCst) {
            return Err(ControlError::AlreadyTaken { fd });
        }
        let owned = partita_os::fd::take_inherited(fd).map_err(|source| ControlError::Sys { fd, what: "take the inherited descriptor", source })?;
        Control::from_fd(owned).map(Some)
    }

    /// Maps the page of `fd` (writable), after checking that it is sealed against resizing, big enough, and
    /// has the magic and version the supervisor writes.
    pub fn from_fd(fd: OwnedFd) -> Result<Control, ControlError> {
        let n = fd.as_raw_fd();
        let not_a_page = |problem: String| ControlError::NotAPage { fd: n, problem };
        if !shm::is_size_sealed(&fd) {
            return Err(not_a_page("it is not sealed against resizing".into()));
        }
        let map = Mapping::map(&fd, true).map_err(|source| ControlError::Sys { fd: n, what: "map it writable", source })?;
        if map.len() < PAGE_BYTES {
            return Err(not_a_page(format!("{} bytes, not {PAGE_BYTES}", map.len())));
        }
        let magic = map.load64(MAGIC_AT, Ordering::Acquire);
        if magic != MAGIC {
            return Err(not_a_page(format!("its magic is {magic:#x}, not {MAGIC:#x}")));
        }
        let version = map.load64(VERSION_AT, Ordering::Acquire);
        if version != VERSION {
            return Err(not_a_page(format!("layout version {version}; this program knows version {VERSION}")));
        }
        Ok(Control { map, fd: n, one_request: Mutex::new(()) })
    }

    /// The partition's operating mode as the supervisor last wrote it.
    pub fn mode(&self) -> Option<Mode> {
        Mode::from_code(self.map.load64(MODE_AT, Ordering::Acquire))
    }

    pub fn start_condition(&self) -> Option<StartCondition> {
        StartCondition::from_code(self.map.load64(START_CONDITION_AT, Ordering::Acquire))
    }

    /// The index of the module's current plan.
    pub fn plan(&self) -> u64 {
        self.map.load64(PLAN_AT, Ordering::Acquire)
    }

    /// The plan a pending switch goes to (the current one when none is pending).
    pub fn next_plan(&self) -> u64 {
        self.map.load64(NEXT_PLAN_AT, Ordering::Acquire)
    }

    /// CLOCK_MONOTONIC ns of the last plan switch; 0 when there was none.
    pub fn last_switch_ns(&self) -> u64 {
        self.map.load64(LAST_SWITCH_AT, Ordering::Acquire)
    }

    /// The index of the plan named `name`.
    pub fn plan_index(&self, name: &str) -> Option<u64> {
        (0..MAX_PLANS as u64).find(|&i| self.plan_name(i).as_deref() == Some(name))
    }

    /// The name of the plan at `index`; `None` past the module's plans.
    pub fn plan_name(&self, index: u64) -> Option<String> {
        plan_name(&self.map, index)
    }

    /// Every plan the page names: (index, name).
    pub fn plan_names(&self) -> Vec<(u64, String)> {
        (0..MAX_PLANS as u64).filter_map(|i| self.plan_name(i).map(|n| (i, n))).collect()
    }

    /// The descriptor's number, for messages.
    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// Posts the request (setting idle_request first for `SetMode(Idle)`) and waits for the supervisor's
    /// answer up to `timeout` on CLOCK_MONOTONIC (time the partition spends frozen outside its windows
    /// counts), sleeping on a futex on done_seq that the supervisor's answer wakes. Threads of the partition
    /// take turns: one request is on the page at a time. A request that timed out stays posted; the next one
    /// replaces it.
    pub fn request(&self, r: &Request, timeout: Duration) -> Result<Outcome, ControlError> {
        let _one = self.one_request.lock().unwrap_or_else(|p| p.into_inner());
        let (kind, arg, message) = r.fields();
        if message.len() > MAX_MESSAGE {
            return Err(ControlError::MessageTooLong { request: r.as_str(), len: message.len(), max: MAX_MESSAGE });
        }
        let idle = *r == Request::SetMode(Mode::Idle);
        if idle {
            self.map.store64(IDLE_REQUEST_AT, 1, Ordering::SeqCst);
        }
        self.map.store64(REQ_KIND_AT, kind, Ordering::Relaxed);
        self.map.store64(REQ_ARG_AT, arg, Ordering::Relaxed);
        self.map.store64(REQ_LEN_AT, message.len() as u64, Ordering::Relaxed);
        self.map.write(REQ_MSG_AT, message);
        let mut seq = self.map.load64(REQ_SEQ_AT, Ordering::Relaxed).wrapping_add(1);
        if seq == 0 || seq == self.map.load64(DONE_SEQ_AT, Ordering::Acquire) {
            // Never a number the supervisor already answered (after a wrap, or a page a previous run left).
            seq = seq.wrapping_add(1).max(1);
        }
        self.map.store64(REQ_SEQ_AT, seq, Ordering::Release);
        let start = partita_os::clock::monotonic_ns();
        let deadline = start.saturating_add(timeout.as_nanos().min(u128::from(u64::MAX)) as u64);
        loop {
            let done = self.map.load64(DONE_SEQ_AT, Ordering::Acquire);
            if done == seq {
                let value = self.map.load64(DONE_RESULT_AT, Ordering::Acquire);
                let outcome = Outcome::from_code(value).ok_or(ControlError::BadAnswer { request: r.as_str(), value })?;
                if idle && outcome != Outcome::Done {
                    self.map.store64(IDLE_REQUEST_AT, 0, Ordering::SeqCst);
                }
                return Ok(outcome);
            }
            if partita_os::clock::monotonic_ns() >= deadline {
                return Err(ControlError::TimedOut { request: r.as_str(), waited: timeout });
            }
            match self.map.wait(DONE_SEQ_AT, done as u32, Some(deadline)) {
                Ok(Wake::LookAgain | Wake::TimedOut) => {}
                Err(source) => return Err(ControlError::Sys { fd: self.fd, what: "wait for the supervisor's answer", source }),
            }
        }
    }
}

fn plan_name(map: &Mapping, index: u64) -> Option<String> {
    if index >= MAX_PLANS as u64 {
        return None;
    }
    let mut buf = [0u8; PLAN_NAME_BYTES];
    map.read(PLAN_NAMES_AT + index as usize * PLAN_NAME_BYTES, &mut buf);
    let end = buf.iter().position(|&b| b == 0).unwrap_or(PLAN_NAME_BYTES);
    if end == 0 {
        return None;
    }
    std::str::from_utf8(&buf[..end]).ok().map(str::to_string)
}

/// The supervisor's side of a partition's control page: it creates the page, writes the partition's mode,
/// start condition and plan, reads the partition's requests (every byte of them hostile) and answers.
#[derive(Debug)]
pub struct ControlPage {
    fd: OwnedFd,
    map: Mapping,
    partition: String,
    plans: u64,
    /// The req_seq of the last request taken: the one [`ControlPage::answer`] answers. Atomic, so that the
    /// page can be shared (the plan executor reads its idle request through the same page).
    taken: std::sync::atomic::AtomicU64,
}

impl ControlPage {
    /// Creates the page of `partition` (its name shows in `/proc/<pid>/fd` as `memfd:partita-control-NAME`)
    /// naming the module's plans (at most 16, each at most 32 bytes of UTF-8 without NUL, index = plan index);
    /// mode cold_start, start condition normal_start, plan 0.
    pub fn create(partition: &str, plan_names: &[&str]) -> io::Result<ControlPage> {
        let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        if plan_names.len() > MAX_PLANS {
            return Err(invalid(format!("partition {partition:?}: {} plans; a control page names at most {MAX_PLANS}", plan_names.len())));
        }
        if let Some(n) = plan_names.iter().find(|n| n.is_empty() || n.len() > PLAN_NAME_BYTES || n.contains('\0')) {
            return Err(invalid(format!("partition {partition:?}: plan name {n:?} does not fit a control page (1 to {PLAN_NAME_BYTES} bytes, no NUL)")));
        }
        let fd = shm::create(&format!("partita-control-{partition}"), PAGE_BYTES)?;
        let map = Mapping::map(&fd, true)?;
        for (i, n) in plan_names.iter().enumerate() {
            map.write(PLAN_NAMES_AT + i * PLAN_NAME_BYTES, n.as_bytes());
        }
        let page = ControlPage { fd, map, partition: partition.to_string(), plans: plan_names.len() as u64, taken: std::sync::atomic::AtomicU64::new(0) };
        page.set_mode(Mode::ColdStart);
        page.set_start_condition(StartCondition::NormalStart);
        page.set_plan(0, 0, 0);
        page.map.store64(VERSION_AT, VERSION, Ordering::Release);
        page.map.store64(MAGIC_AT, MAGIC, Ordering::Release);
        Ok(page)
    }

    /// The partition's name.
    pub fn partition(&self) -> &str {
        &self.partition
    }

    /// How many plans the page names.
    pub fn plan_count(&self) -> u64 {
        self.plans
    }

    /// A writable duplicate of the page's descriptor, close-on-exec: the supervisor numbers it among the
    /// descriptors a partition inherits and puts its number in `PARTITA_CONTROL`.
    pub fn fd_for_partition(&self) -> io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    pub fn set_mode(&self, m: Mode) {
        self.map.store64(MODE_AT, m.code(), Ordering::Release);
    }

    pub fn set_start_condition(&self, c: StartCondition) {
        self.map.store64(START_CONDITION_AT, c.code(), Ordering::Release);
    }

    pub fn set_plan(&self, current: u64, next: u64, last_switch_ns: u64) {
        self.map.store64(LAST_SWITCH_AT, last_switch_ns, Ordering::Release);
        self.map.store64(NEXT_PLAN_AT, next, Ordering::Release);
        self.map.store64(PLAN_AT, current, Ordering::Release);
    }

    /// Whether the partition set idle_request (any value but 0): one atomic load, no allocation.
    pub fn idle_requested(&self) -> bool {
        self.map.load64(IDLE_REQUEST_AT, Ordering::Acquire) != 0
    }

    pub fn clear_idle_request(&self) {
        self.map.store64(IDLE_REQUEST_AT, 0, Ordering::Release);
    }

    /// The request posted since the last one taken, if any, validated: its kind, its argument's range (a mode
    /// 0..=3, an error kind below [`ERROR_KINDS`], a plan index below the page's plans: else
    /// [`Outcome::NoSuchPlan`]), its length (at most [`MAX_MESSAGE`]) and its message (UTF-8). Anything else is
    /// `Err(Outcome::Invalid)`, as is a request the partition kept changing while it was read (read at most 4
    /// times). Never panics on any page content; allocates at most the message.
    pub fn take_request(&self) -> Option<Result<Request, Outcome>> {
        let mut seq = self.map.load64(REQ_SEQ_AT, Ordering::Acquire);
        if seq == self.taken.load(Ordering::Acquire) {
            return None;
        }
        let mut attempts = 0;
        let request = loop {
            let kind = self.map.load64(REQ_KIND_AT, Ordering::Acquire);
            let arg = self.map.load64(REQ_ARG_AT, Ordering::Acquire);
            let len = self.map.load64(REQ_LEN_AT, Ordering::Acquire);
            let mut message = [0u8; MAX_MESSAGE];
            let read = self.validate(kind, arg, len, &mut message);
            let again = self.map.load64(REQ_SEQ_AT, Ordering::Acquire);
            if again == seq {
                break read.and_then(|r| r.into_request(&message));
            }
            seq = again;
            attempts += 1;
            if attempts >= READ_ATTEMPTS {
                break Err(Outcome::Invalid);
            }
        };
        self.taken.store(seq, Ordering::Release);
        Some(request)
    }

    /// Checks the fixed fields and copies the message (raise_error) into `message`.
    fn validate(&self, kind: u64, arg: u64, len: u64, message: &mut [u8; MAX_MESSAGE]) -> Result<Parsed, Outcome> {
        if len > MAX_MESSAGE as u64 {
            return Err(Outcome::Invalid);
        }
        match kind {
            KIND_SET_MODE => Mode::from_code(arg).map(Parsed::SetMode).ok_or(Outcome::Invalid),
            KIND_RAISE_ERROR if arg < ERROR_KINDS => {
                let len = len as usize;
                self.map.read(REQ_MSG_AT, &mut message[..len]);
                Ok(Parsed::RaiseError { kind: arg as u8, len })
            }
            KIND_RAISE_ERROR => Err(Outcome::Invalid),
            KIND_SWITCH_PLAN if arg < self.plans => Ok(Parsed::SwitchPlan(arg)),
            KIND_SWITCH_PLAN => Err(Outcome::NoSuchPlan),
            _ => Err(Outcome::Invalid),
        }
    }

    /// Answers the request last taken: done_result, then done_seq = its req_seq (Release), then wakes the
    /// partition if it waits.
    pub fn answer(&self, o: Outcome) {
        self.map.store64(DONE_RESULT_AT, o.code(), Ordering::Release);
        self.map.store64(DONE_SEQ_AT, self.taken.load(Ordering::Acquire), Ordering::Release);
        // A failed wake leaves a waiting partition to its timeout; nothing here can do better.
        let _ = self.map.wake(DONE_SEQ_AT);
    }
}

/// A request's fixed fields, checked; the message is still bytes.
enum Parsed {
    SetMode(Mode),
    RaiseError { kind: u8, len: usize },
    SwitchPlan(u64),
}

impl Parsed {
    fn into_request(self, message: &[u8; MAX_MESSAGE]) -> Result<Request, Outcome> {
        Ok(match self {
            Parsed::SetMode(m) => Request::SetMode(m),
            Parsed::SwitchPlan(p) => Request::SwitchPlan(p),
            Parsed::RaiseError { kind, len } => {
                let text = std::str::from_utf8(&message[..len]).map_err(|_| Outcome::Invalid)?;
                Request::RaiseError { kind, message: text.to_string() }
            }
        })
    }
}
