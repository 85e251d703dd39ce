//! Reading a system file: TOML (with spans) → raw structs → validated [`System`], collecting every problem.
use crate::confinement::{capability_number, is_seccomp_name, Confinement, KernelLimits, StateQuota, DEFAULT_KERNEL_LIMITS, DEFAULT_STATE_QUOTA, DEFAULT_UID_BASE, STATE_QUOTA_FLOOR, UID_RANGE};
use crate::error::{Diagnostic, Errors, Problem};
use crate::model::*;
use crate::plan::WakeAheadRefused;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The smallest memory limit accepted: below it a DDS participant does not even start.
pub const MEMORY_FLOOR: ByteSize = ByteSize(8 << 20);
const DEFAULT_MEMORY: ByteSize = ByteSize(64 << 20);
const DEFAULT_PIDS: u64 = 256;
/// The kernel's own ceiling on process ids (PID_MAX_LIMIT on 64-bit): a larger `pids.max` is meaningless and
/// refused by the pids controller.
const MAX_PIDS: u64 = 1 << 22;
/// The longest major frame: the executor sleeps a frame's boundaries away, and a stop waits for at most one.
pub const MAX_FRAME: Duration = Duration::from_millis(10_000);
/// A VM partition's guest memory by default, the room its cgroup keeps for QEMU above it by default, and the
/// least room it must keep.
const DEFAULT_GUEST_MEMORY: ByteSize = ByteSize(256 << 20);
const VM_OVERHEAD: ByteSize = ByteSize(256 << 20);
const VM_MIN_OVERHEAD: ByteSize = ByteSize(96 << 20);
/// The least guest memory partita's guest image boots in, with room to spare. Measured under TCG with Debian's
/// 6.1 cloud kernel (docs/vm.md): with a 15 MiB base archive, 64 MiB hung before `/init`, 80 MiB panicked out of
/// memory while unpacking the archive, 96 MiB booted with 22 MiB free on one machine and panicked on another;
/// since partita links OpenSSL for DDS Security the archive is 32 MiB: 128 MiB fails to unpack it, 144 MiB
/// boots with 51 MiB free.
const GUEST_MEMORY_FLOOR: ByteSize = ByteSize(160 << 20);
const MAX_VCPUS: u64 = 8;
const DEFAULT_BOOT_TIMEOUT: Duration = Duration::from_millis(60_000);
const MAX_BOOT_TIMEOUT: Duration = Duration::from_millis(600_000);
/// The most windows one plan may have.
const MAX_WINDOWS: usize = 1_000;
/// The longest wake-up latency bound worth holding (no idle state of any CPU takes longer to leave).
const MAX_CPU_DMA_LATENCY: Duration = Duration::from_millis(1_000);
const DEFAULT_HEALTH: HealthAction = HealthAction::Restart { max_restarts: 3, window: Duration::from_millis(60_000), backoff: DEFAULT_BACKOFF };
/// A restarting partition waits at least this long before its first restart, twice as long before each next.
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(100);
/// The bounds a system file's restart policy must keep: a crash loop may not restart faster than this, nor
/// more often.
const MIN_RESTART_WINDOW: Duration = Duration::from_millis(1_000);
const MIN_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(60_000);
const MAX_RESTARTS: u32 = 1_000;
/// The name of a module's plan whose [[module.plan]] tables have no `name`.
pub const DEFAULT_PLAN: &str = "default";
/// The bounds of a health-monitor escalation: at most this many occurrences, counted over 1 s to 24 h.
const MAX_HM_COUNT: u32 = 1_000;
const MIN_HM_WITHIN: Duration = Duration::from_millis(1_000);
const MAX_HM_WITHIN: Duration = Duration::from_millis(86_400_000);
const MAX_NAME: usize = 24;
const MAX_COUNT: usize = 99;
/// A partition's CPU time past its window's end that counts as an overrun by default: above the time its
/// threads take to stop after the freeze (measured for the paper's system without freeze_ahead: recorder p99
/// 45 µs, max 208 µs; routing p99 95 µs, max 303 µs over 8,000 frames; docs/security.md).
const DEFAULT_OVERRUN_TOLERANCE: Duration = Duration::from_micros(500);
const MAX_OVERRUN_TOLERANCE: Duration = Duration::from_millis(1_000);
const DEFAULT_OVERRUN_COUNT: u32 = 2;
const DEFAULT_OVERRUN_FRAMES: u32 = 10;
/// The most overruns a policy may wait for, and the longest look-back in frames.
const MAX_OVERRUN_COUNT: u32 = 16;
const MAX_OVERRUN_FRAMES: u32 = 100_000;
/// A partition's block I/O by default: enough for the recorder's frames, not enough to fill the disk queue
/// the other partitions share.
const DEFAULT_DISK: DiskLimits = DiskLimits { read_bps: None, write_bps: Some(32 << 20), read_iops: None, write_iops: Some(1_000) };

/// What validation knows about the machine: the CPUs partitions may use, and where programs are found.
/// Injectable for tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub cpus: Vec<usize>,
    /// The directories a command's program is looked up in (`PATH`); `None`: programs are not looked up.
    pub path: Option<Vec<PathBuf>>,
}

/// The program name that stands for the running `partita` binary in commands (the supervisor runs itself).
pub const PARTITA_PROGRAM: &str = "partita";

impl Host {
    /// The online CPUs of this machine (`/sys/devices/system/cpu/online`, else `0..available_parallelism`) and
    /// its `PATH`.
    pub fn this_machine() -> Host {
        let from_sys = std::fs::read_to_string("/sys/devices/system/cpu/online").ok().and_then(|s| parse_cpu_list(&s));
        let cpus = from_sys.unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect()
        });
        Host { cpus, path: Some(search_path()) }
    }
    /// A machine with CPUs `0..n` on which every program exists (for tests of the file format).
    pub fn with_cpus(n: usize) -> Host {
        Host { cpus: (0..n).collect(), path: None }
    }

    /// Where `program` (a command's first word) is on this machine: a path as given, a name looked up in
    /// `PATH`, `partita` as the running binary (`None` then, and when programs are not looked up).
    pub fn find_program(&self, program: &str) -> Result<Option<PathBuf>, Problem> {
        let Some(dirs) = &self.path else { return Ok(None) };
        if program == PARTITA_PROGRAM {
            return Ok(None);
        }
        if program.contains('/') {
            let p = PathBuf::from(program);
            return if is_executable(&p) { Ok(Some(p)) } else { Err(Problem::ProgramNotExecutable { program: program.into() }) };
        }
        dirs.iter()
            .map(|d| d.join(program))
            .find(|p| is_executable(p))
            .map(Some)
            .ok_or_else(|| Problem::ProgramNotFound { program: program.into() })
    }
}

/// The directories of `PATH` (the usual ones when it is unset).
pub fn search_path() -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).collect()
}

/// A regular file someone may execute.
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The action of a word of [`HmAction::WORDS`] (switch_plan without its plan).
fn word_action(w: &str) -> HmAction {
    match w {
        "restart_cold" => HmAction::RestartCold,
        "restart_warm" => HmAction::RestartWarm,
        "idle" => HmAction::Idle,
        "stop" => HmAction::Stop,
        "switch_plan" => HmAction::SwitchPlan(String::new()),
        "stop_module" => HmAction::StopModule,
        _ => HmAction::Ignore,
    }
}

/// `0-3,6` → [0,1,2,3,6].
fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 4096 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Reads and validates the system file at `path` against this machine.
pub fn load(path: &Path) -> Result<System, Errors> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text, &file, &Host::this_machine()),
        Err(e) => Err(Errors(vec![Diagnostic { file, line: 1, column: 1, path: "(file)".into(), problem: Problem::Unreadable(e.to_string()) }])),
    }
}

/// Validates `text` (shown as `file` in errors) against `host`'s CPUs.
pub fn parse(text: &str, file: &str, host: &Host) -> Result<System, Errors> {
    let mut cx = Cx { file, text, host, errors: Vec::new() };
    let mut raw: RawFile = match toml::from_str(text) {
        Ok(r) => r,
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            let path = syntax_path(text, &span);
            let msg = e.message().trim().to_string();
            cx.err(&span, &path, Problem::Syntax(msg));
            return Err(Errors(cx.errors));
        }
    };
    // Hosts, uplinks and peers are read in a pass of their own (crate::uplink), once the networks are known.
    let placement = crate::uplink::RawPlacement {
        hosts: std::mem::take(&mut raw.host),
        peers: std::mem::take(&mut raw.peer),
        module_hosts: raw.module.iter_mut().map(|m| m.host.take()).collect(),
        // cloned, not taken: the router table's validation needs to know whether an uplink side exists
        partition_uplinks: raw.module.iter().map(|m| m.partition.iter().map(|p| p.uplink.clone()).collect()).collect(),
        node_hosts: raw.node.iter_mut().map(|n| n.host.take()).collect(),
        node_uplinks: raw.node.iter_mut().map(|n| n.uplink.take()).collect(),
    };
    let mut system = cx.build(raw, host);
    let mut report = crate::uplink::Report { file, text, errors: &mut cx.errors };
    crate::uplink::place(placement, &mut system, &mut report);
    if cx.errors.is_empty() {
        Ok(system)
    } else {
        cx.errors.sort_by_key(|d| (d.line, d.column));
        Err(Errors(cx.errors))
    }
}

type S<T> = Spanned<T>;

/// A name of the file (system, module, partition, node, channel, port): 1 to [`MAX_NAME`] characters from
/// `[A-Za-z0-9_-]`, starting with a letter or digit.
fn is_valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_NAME && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') && s.starts_with(|c: char| c.is_ascii_alphanumeric())
}

/// Where the key `key` is first written in `text` at or after byte `from` (its partition's name): the position
/// an error about a value without a span of its own points at.
fn key_after(text: &str, key: &str, from: usize) -> std::ops::Range<usize> {
    match text.get(from..).and_then(|rest| rest.find(key)) {
        Some(at) => from + at..from + at + key.len(),
        None => from..from,
    }
}

/// Host uid ranges taken by partitions: (first uid, partition, given in the file).
#[derive(Default)]
struct Uids {
    taken: Vec<(u32, String, bool)>,
}

impl Uids {
    /// The partition whose range overlaps the one starting at `uid`.
    fn overlapping(&self, uid: u32) -> Option<String> {
        let r = u64::from(UID_RANGE);
        self.taken.iter().find(|(u, _, _)| u64::from(*u) < u64::from(uid) + r && u64::from(uid) < u64::from(*u) + r).map(|(_, o, _)| o.clone())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    system: RawSystem,
    network: Option<RawNetwork>,
    #[serde(default)]
    module: Vec<RawModule>,
    #[serde(default)]
    node: Vec<RawNode>,
    #[serde(default)]
    host: Vec<crate::uplink::RawHost>,
    #[serde(default)]
    peer: Vec<crate::uplink::RawPeer>,
    /// The system-level health-monitor table.
    health_monitor: Option<RawHmTable>,
}

/// A health-monitor table: error kind → an action word or a [`RawHmEntry`] table. Read as values, so that a
/// key that is not an error kind is refused with the list of kinds, not as a TOML type error.
type RawHmTable = BTreeMap<String, S<toml::Value>>;

/// The table form of a health-monitor entry: `{ action, max, within, then, plan }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHmEntry {
    action: String,
    /// The plan of `switch_plan` (as `action` or `then`).
    plan: Option<String>,
    /// Read wide, so that an out-of-range count is refused with its range, not as a type error.
    max: Option<i64>,
    within: Option<String>,
    then: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSystem {
    name: S<String>,
    cpu_dma_latency: Option<S<String>>,
    preemption: Option<S<String>>,
    housekeeping_cpus: Option<S<Vec<u64>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    domain: Option<S<u64>>,
    subnet: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModule {
    name: S<String>,
    cpus: Option<S<Vec<u64>>>,
    domain: Option<S<u64>>,
    subnet: Option<S<String>>,
    #[serde(default)]
    partition: Vec<RawPartition>,
    #[serde(default)]
    plan: Vec<RawPlan>,
    #[serde(default)]
    path: Vec<RawPath>,
    #[serde(default)]
    channel: Vec<RawChannel>,
    /// The host it runs on, in a system spanning several (`[[host]]`).
    host: Option<S<String>>,
    /// The named plan `up` starts with.
    default_plan: Option<S<String>>,
    /// The module-level health-monitor table.
    health_monitor: Option<RawHmTable>,
}

/// A request path through the module's partitions, for the schedule analysis (`partita check`,
/// `partita plan optimise`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPath {
    name: S<String>,
    through: S<Vec<String>>,
}

/// An ARINC 653 channel between partitions of the module (docs/ports.md).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChannel {
    name: S<String>,
    kind: S<String>,
    /// `partition` or `partition:port` (the port is named after the channel unless given).
    source: S<String>,
    destinations: S<Vec<String>>,
    max_message: S<String>,
    /// Sampling channels: how long a message stays valid.
    refresh: Option<S<String>>,
    /// Queuing channels: how many messages the queue holds.
    depth: Option<S<u64>>,
    /// `ignore` (default: logged), `restart` or `stop` the partition that reports a fault of its own.
    on_fault: Option<S<String>>,
}

/// The longest message a channel may carry, the deepest queue, and the most memory a channel's messages may
/// take (the same bounds as partita-ports' layout).
pub const MAX_CHANNEL_MESSAGE: u64 = 4 << 20;
pub const MAX_CHANNEL_DEPTH: u64 = 4096;
pub const MAX_CHANNEL_BYTES: u64 = 64 << 20;
/// The longest refresh period of a sampling channel.
const MAX_REFRESH: Duration = Duration::from_millis(3_600_000);

/// The most partitions one request path may visit.
const MAX_PATH_VISITS: usize = 64;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPartition {
    name: S<String>,
    command: S<Vec<String>>,
    criticality: Option<S<String>>,
    memory: Option<S<String>>,
    pids: Option<S<u64>>,
    cpus: Option<S<Vec<u64>>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    health: Option<RawHealth>,
    scheduling: Option<RawScheduling>,
    uid: Option<S<u64>>,
    lock_memory: Option<bool>,
    capabilities: Option<S<Vec<String>>>,
    seccomp: Option<RawSeccomp>,
    #[serde(default)]
    io: bool,
    /// `false`: no V-NIC at all (a partition that talks only through its ports).
    network: Option<S<bool>>,
    domain: Option<S<u64>>,
    address: Option<S<String>>,
    /// The routing service's configuration (I/O partition only).
    /// Not spanned: a router table made only of `[[module.partition.router.route]]` headers is an implicit
    /// table, which TOML's span reader refuses (errors point at the partition's `router` key instead).
    router: Option<toml::Value>,
    /// `process` (default) or `vm`.
    kind: Option<S<String>>,
    vm: Option<S<RawVm>>,
    time_overrun: Option<S<RawTimeOverrun>>,
    /// `"unlimited"` or a table of limits.
    disk: Option<S<toml::Value>>,
    /// A host interface the I/O partition owns (docs/deployment.md).
    uplink: Option<S<crate::uplink::RawUplink>>,
    log_size: Option<S<String>>,
    /// `{ message_queue_bytes, queued_signals }`.
    limits: Option<S<toml::Value>>,
    /// `{ size, inodes }` of its state directory.
    state: Option<S<toml::Value>>,
    /// What of the host it sees besides its program: paths, or programs found in PATH.
    binds: Option<S<Vec<String>>>,
    /// It may request plan switches through its API.
    system_partition: Option<S<bool>>,
    /// The partition-level health-monitor table.
    health_monitor: Option<RawHmTable>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTimeOverrun {
    tolerance: Option<S<String>>,
    count: Option<S<u32>>,
    frames: Option<S<u32>>,
    action: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVm {
    memory: Option<S<String>>,
    vcpus: Option<S<u64>>,
    accel: Option<S<String>>,
    kernel: Option<S<String>>,
    initramfs: Option<S<String>>,
    #[serde(default)]
    append: Vec<S<String>>,
    boot_timeout: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHealth {
    action: S<String>,
    max_restarts: Option<S<u32>>,
    window: Option<S<String>>,
    backoff: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    /// The named plan this table is the CPU's part of ("default" when absent).
    name: Option<S<String>>,
    cpu: Option<S<u64>>,
    major_frame: S<String>,
    freeze_ahead: Option<S<String>>,
    wake_ahead: Option<S<String>>,
    demote: Option<bool>,
    #[serde(default)]
    window: Vec<RawWindow>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWindow {
    partition: S<String>,
    start: S<String>,
    duration: S<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: S<String>,
    command: S<Vec<String>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    memory: Option<S<String>>,
    pids: Option<S<u64>>,
    cpus: Option<S<Vec<u64>>>,
    health: Option<RawHealth>,
    scheduling: Option<RawScheduling>,
    domain: Option<S<u64>>,
    address: Option<S<String>>,
    host: Option<S<String>>,
    uplink: Option<S<crate::uplink::RawUplink>>,
    log_size: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeccomp {
    #[serde(default)]
    allow: Vec<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScheduling {
    policy: S<String>,
    priority: Option<S<u64>>,
}

/// The table header (`[[module.plan]]` → `module.plan`) above `span`, plus the key at `span` if it is one:
/// the best field path toml's own errors allow.
fn syntax_path(text: &str, span: &Range<usize>) -> String {
    let start = span.start.min(text.len());
    let before = text.get(..start).unwrap_or("");
    let header = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_string())
        .unwrap_or_default();
    // A value's span (a wrong type) lies right of `key =` on its line; a key's span (unknown, duplicate) is the key.
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let left = &before[line_start..];
    let key = match left.split_once('=') {
        Some((k, _)) => k.trim().trim_matches('"'),
        None => text.get(span.clone()).unwrap_or(""),
    };
    let is_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (header.is_empty(), is_key) {
        (true, true) => key.to_string(),
        (false, true) => format!("{header}.{key}"),
        _ if header.is_empty() => "(top level)".to_string(),
        _ => header,
    }
}

struct Cx<'a> {
    file: &'a str,
    text: &'a str,
    host: &'a Host,
    errors: Vec<Diagnostic>,
}

fn fmt_cpus(c: &[usize]) -> String {
    c.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

impl Cx<'_> {
    fn line_col(&self, offset: usize) -> (usize, usize) {
        let mut off = offset.min(self.text.len());
        while !self.text.is_char_boundary(off) {
            off -= 1;
        }
        let before = &self.text[..off];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
        (line, col)
    }
    fn line(&self, span: &Range<usize>) -> usize {
        self.line_col(span.start).0
    }
    fn err(&mut self, span: &Range<usize>, path: &str, problem: Problem) {
        let (line, column) = self.line_col(span.start);
        self.errors.push(Diagnostic { file: self.file.to_string(), line, column, path: path.to_string(), problem });
    }

    fn name(&mut self, n: &S<String>, path: &str) -> String {
        let s = n.get_ref();
        if !is_valid_name(s) {
            self.err(&n.span(), &format!("{path}.name"), Problem::BadName { name: s.clone(), max: MAX_NAME });
        }
        s.clone()
    }

    fn duration(&mut self, d: &S<String>, path: &str) -> Option<Duration> {
        match d.get_ref().parse::<Duration>() {
            Ok(v) => Some(v),
            Err(e) => {
                self.err(&d.span(), path, Problem::BadValue(e.to_string()));
                None
            }
        }
    }

    fn memory(&mut self, m: &S<String>, path: &str) -> Option<ByteSize> {
        match m.get_ref().parse::<ByteSize>() {
            Ok(v) if v < MEMORY_FLOOR => {
                self.err(&m.span(), path, Problem::MemoryTooSmall { memory: v.to_string(), floor: MEMORY_FLOOR.to_string() });
                None
            }
            Ok(v) => Some(v),
            Err(e) => {
                self.err(&m.span(), path, Problem::BadValue(e.to_string()));
                None
            }
        }
    }

    fn command(&mut self, c: &S<Vec<String>>, path: &str) -> Vec<String> {
        let argv = c.get_ref();
        match argv.first() {
            Some(p) if !p.trim().is_empty() => {
                if let Some(i) = argv.iter().position(|a| a.contains('\0')) {
                    self.err(&c.span(), &format!("{path}[{i}]"), Problem::NulByte);
                } else if let Err(problem) = self.host.find_program(p) {
                    self.err(&c.span(), &format!("{path}[0]"), problem);
                }
            }
            _ => self.err(&c.span(), path, Problem::EmptyCommand),
        }
        argv.clone()
    }

    /// Environment variables: names usable by `execve` (non-empty, no `=` or NUL), values without NUL.
    fn env(&mut self, env: &BTreeMap<String, String>, path: &str, span: &Range<usize>) -> BTreeMap<String, String> {
        for (k, v) in env {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                self.err(span, &format!("{path}.{k:?}"), Problem::BadEnvName { name: k.clone() });
            } else if v.contains('\0') {
                self.err(span, &format!("{path}.{k}"), Problem::NulByte);
            } else if partita_env::is_reserved(k) {
                self.err(span, &format!("{path}.{k}"), Problem::ReservedEnv { name: k.clone() });
            }
        }
        env.clone()
    }

    fn pids(&mut self, n: &S<u64>, path: &str) -> Option<u64> {
        match *n.get_ref() {
            0 => {
                self.err(&n.span(), path, Problem::PidsZero);
                None
            }
            v if v > MAX_PIDS => {
                self.err(&n.span(), path, Problem::PidsTooMany { max: MAX_PIDS });
                None
            }
            v => Some(v),
        }
    }

    fn domain(&mut self, d: &S<u64>, path: &str) -> Option<DomainId> {
        let id = *d.get_ref();
        let r = u32::try_from(id).ok().and_then(DomainId::new);
        if r.is_none() {
            self.err(&d.span(), path, Problem::DomainOutOfRange { id });
        }
        r
    }

    fn cpu_list(&mut self, c: &S<Vec<u64>>, path: &str, allowed: &[usize], module_level: bool) -> Vec<usize> {
        let mut seen = BTreeSet::new();
        for &cpu in c.get_ref() {
            if !seen.insert(cpu) {
                self.err(&c.span(), path, Problem::DuplicateCpu { cpu });
            } else if !allowed.contains(&(cpu as usize)) || cpu > usize::MAX as u64 {
                let p = if module_level {
                    Problem::CpuNotAvailable { cpu, available: fmt_cpus(allowed) }
                } else {
                    Problem::CpuNotInModule { cpu, module_cpus: fmt_cpus(allowed) }
                };
                self.err(&c.span(), path, p);
            }
        }
        if seen.is_empty() {
            self.err(&c.span(), path, Problem::BadValue("the CPU list is empty; list at least one CPU, e.g. [0]".into()));
        }
        seen.into_iter().map(|c| c as usize).collect()
    }

    fn build(&mut self, raw: RawFile, host: &Host) -> System {
        let system_name = self.name(&raw.system.name, "system");
        let mut names: HashMap<String, usize> = HashMap::new(); // partitions and nodes share namespace names
        let mut module_names: HashMap<String, usize> = HashMap::new();
        let mut cpu_owner: HashMap<u64, String> = HashMap::new();
        let mut domains: Vec<(u32, String)> = Vec::new();
        let mut subnets: Vec<(Subnet, String)> = Vec::new();

        if raw.module.len() > MAX_COUNT || raw.node.len() > MAX_COUNT {
            self.err(&(0..0), "module", Problem::BadValue(format!("at most {MAX_COUNT} modules and {MAX_COUNT} nodes; split the system")));
            return System { name: system_name, source: self.file.into(), modules: vec![], nodes: vec![], network: Network { domain: DomainId::new(0).expect("0 is a domain"), subnet: ADDRESS_POOL, bridge: String::new() }, cpu_dma_latency: None, host: HostTuning::default(), hosts: vec![], part: None, peers: vec![], health_monitor: HmTable::default() };
        }

        // Explicit domains and subnets first, so automatic ones avoid them.
        let ext_domain = match raw.network.as_ref().and_then(|n| n.domain.as_ref()) {
            Some(d) => self.domain(d, "network.domain"),
            None => DomainId::new(0),
        };
        if let Some(d) = ext_domain {
            domains.push((d.get(), "the inter-module network".into()));
        }
        let ext_subnet = raw.network.as_ref().and_then(|n| n.subnet.as_ref()).and_then(|s| self.subnet(s, "network.subnet", "the inter-module network", &mut subnets));
        let mut module_domains = Vec::new();
        let mut module_subnets = Vec::new();
        for m in &raw.module {
            let path = format!("module[{}]", m.name.get_ref());
            let d = m.domain.as_ref().and_then(|d| {
                let id = self.domain(d, &format!("{path}.domain"))?;
                if let Some((_, other)) = domains.iter().find(|(x, _)| *x == id.get()) {
                    let other = other.clone();
                    self.err(&d.span(), &format!("{path}.domain"), Problem::DomainTaken { id: id.get(), other });
                }
                domains.push((id.get(), format!("module {}", m.name.get_ref())));
                Some(id)
            });
            module_domains.push(d);
            let s = m.subnet.as_ref().and_then(|s| self.subnet(s, &format!("{path}.subnet"), &format!("module {}", m.name.get_ref()), &mut subnets));
            module_subnets.push(s);
        }
        let ext_subnet = ext_subnet
            .or_else(|| {
                let s = self.free_subnet(&mut subnets, "the inter-module network");
                if s.is_none() {
                    let span = raw.network.as_ref().and_then(|n| n.domain.as_ref()).map(|d| d.span()).unwrap_or(raw.system.name.span());
                    self.err(&span, "network.subnet", Problem::PoolExhausted { what: "the inter-module network".into() });
                }
                s
            })
            .unwrap_or(ADDRESS_POOL);
        let network = Network { domain: ext_domain.unwrap_or(DomainId::new(0).expect("0 is a domain")), subnet: ext_subnet, bridge: String::new() };
        let mut ext_hosts: BTreeMap<Ipv4Addr, String> = BTreeMap::new();
        // Node addresses are explicit or assigned after the I/O partitions'; reserve the explicit ones now.
        let mut node_addrs = Vec::new();
        for n in &raw.node {
            let path = format!("node[{}]", n.name.get_ref());
            node_addrs.push(n.address.as_ref().and_then(|a| self.address(a, &format!("{path}.address"), &ext_subnet, &format!("node {}", n.name.get_ref()), &mut ext_hosts)));
        }

        // Host uid ranges of the partitions' user namespaces: the explicit ones first, so defaults avoid them.
        let mut uids = Uids::default();
        for m in &raw.module {
            for p in &m.partition {
                if let Some(u) = &p.uid {
                    let path = format!("module[{}].partition[{}].uid", m.name.get_ref(), p.name.get_ref());
                    self.explicit_uid(u, &path, p.name.get_ref(), &mut uids);
                }
            }
        }
        let mut modules = Vec::new();
        for (mi, m) in raw.module.iter().enumerate() {
            let path = format!("module[{}]", m.name.get_ref());
            let name = self.name(&m.name, &path);
            if let Some(first) = module_names.insert(name.clone(), self.line(&m.name.span())) {
                self.err(&m.name.span(), &format!("{path}.name"), Problem::Duplicate { what: "module", name: name.clone(), first_line: first });
                module_names.insert(name.clone(), first);
            }
            let domain = module_domains[mi].unwrap_or_else(|| {
                let id = (1..=DomainId::MAX).find(|i| !domains.iter().any(|(x, _)| x == i)).unwrap_or(DomainId::MAX);
                domains.push((id, format!("module {name}")));
                DomainId::new(id).expect("in range")
            });
            let subnet = module_subnets[mi].or_else(|| {
                let s = self.free_subnet(&mut subnets, &format!("module {name}"));
                if s.is_none() {
                    self.err(&m.name.span(), &format!("{path}.subnet"), Problem::PoolExhausted { what: format!("module {name}") });
                }
                s
            }).unwrap_or(ADDRESS_POOL);

            // CPUs: explicit, or those of the plans (cpu defaults to the first available one).
            let cpus = match &m.cpus {
                Some(c) => {
                    let cpus = self.cpu_list(c, &format!("{path}.cpus"), &host.cpus, true);
                    for &cpu in &cpus {
                        if let Some(other) = cpu_owner.get(&(cpu as u64)) {
                            let other = other.clone();
                            self.err(&c.span(), &format!("{path}.cpus"), Problem::CpuTakenByModule { cpu: cpu as u64, other });
                        }
                        cpu_owner.insert(cpu as u64, name.clone());
                    }
                    cpus
                }
                None => {
                    let mut cpus: Vec<usize> = Vec::new();
                    for (pi, p) in m.plan.iter().enumerate() {
                        let cpu = p.cpu.as_ref().map(|c| *c.get_ref()).unwrap_or(host.cpus.first().copied().unwrap_or(0) as u64);
                        let span = p.cpu.as_ref().map(|c| c.span()).unwrap_or(p.major_frame.span());
                        let ppath = format!("{path}.plan[{pi}].cpu");
                        if !host.cpus.contains(&(cpu as usize)) {
                            self.err(&span, &ppath, Problem::CpuNotAvailable { cpu, available: fmt_cpus(&host.cpus) });
                        } else if let Some(other) = cpu_owner.get(&cpu).filter(|o| **o != name) {
                            let other = other.clone();
                            self.err(&span, &ppath, Problem::CpuTakenByModule { cpu, other });
                        } else if !cpus.contains(&(cpu as usize)) {
                            cpus.push(cpu as usize);
                            cpu_owner.insert(cpu, name.clone());
                        }
                    }
                    cpus.sort();
                    cpus
                }
            };

            // Partitions.
            let mut partitions = Vec::new();
            // Partitions given a `time_overrun`: refused in a module without a plan.
            let mut explicit_overrun: Vec<(String, Range<usize>, String)> = Vec::new();
            let mut io_first: Option<String> = None;
            let mut hosts: BTreeMap<Ipv4Addr, String> = BTreeMap::new();
            let mut explicit = Vec::new();
            for p in &m.partition {
                let ppath = format!("{path}.partition[{}]", p.name.get_ref());
                explicit.push(p.address.as_ref().and_then(|a| self.address(a, &format!("{ppath}.address"), &subnet, &format!("partition {}", p.name.get_ref()), &mut hosts)));
            }
            if m.partition.len() > MAX_COUNT {
                self.err(&m.name.span(), &path, Problem::BadValue(format!("at most {MAX_COUNT} partitions per module")));
            }
            for (pi, p) in m.partition.iter().enumerate() {
                let ppath = format!("{path}.partition[{}]", p.name.get_ref());
                let pname = self.name(&p.name, &ppath);
                if let Some(first) = names.get(&pname).copied() {
                    self.err(&p.name.span(), &format!("{ppath}.name"), Problem::Duplicate { what: "partition or node", name: pname.clone(), first_line: first });
                } else {
                    names.insert(pname.clone(), self.line(&p.name.span()));
                }
                let vm = self.vm(p, &ppath);
                // A guest's command runs in the guest (its programs are busybox's and partita): not looked up here.
                let command = if vm.is_some() { self.guest_command(&p.command, &format!("{ppath}.command")) } else { self.command(&p.command, &format!("{ppath}.command")) };
                let criticality = match p.criticality.as_ref() {
                    None => Criticality::Medium,
                    Some(c) => match c.get_ref().as_str() {
                        "high" => Criticality::High,
                        "medium" => Criticality::Medium,
                        "low" => Criticality::Low,
                        other => {
                            self.err(&c.span(), &format!("{ppath}.criticality"), Problem::BadCriticality(other.into()));
                            Criticality::Medium
                        }
                    },
                };
                // A VM partition's cgroup holds the guest's memory and QEMU's own.
                let default_memory = vm.as_ref().map_or(DEFAULT_MEMORY, |v| ByteSize(v.memory.0.saturating_add(VM_OVERHEAD.0)));
                let memory = p.memory.as_ref().map_or(Some(default_memory), |m| self.memory(m, &format!("{ppath}.memory"))).unwrap_or(default_memory);
                if let (Some(v), Some(m)) = (&vm, &p.memory) {
                    if memory.0 < v.memory.0.saturating_add(VM_MIN_OVERHEAD.0) {
                        let fix = format!("give the partition at least the guest's {} plus {VM_MIN_OVERHEAD} for QEMU, or leave `memory` out", v.memory);
                        self.err(&m.span(), &format!("{ppath}.memory"), Problem::BadValue(format!("{memory} cannot hold the guest; {fix}")));
                    }
                }
                let pids_max = p.pids.as_ref().map_or(Some(DEFAULT_PIDS), |n| self.pids(n, &format!("{ppath}.pids")));
                let pcpus = match &p.cpus {
                    Some(c) => self.cpu_list(c, &format!("{ppath}.cpus"), &cpus, false),
                    None => cpus.clone(),
                };
                let health = self.health(p.health.as_ref(), &format!("{ppath}.health"), DEFAULT_HEALTH);
                let scheduling = self.scheduling(p.scheduling.as_ref(), &format!("{ppath}.scheduling"));
                if let (Some(_), Scheduling::Fifo { .. }, Some(s)) = (&vm, scheduling, &p.scheduling) {
                    // QEMU's vCPU thread never blocks under emulation: at one SCHED_FIFO priority with its I/O thread
                    // on one CPU it starves that thread, and the guest hangs in its boot (measured under TCG).
                    self.err(&s.policy.span(), &format!("{ppath}.scheduling"), Problem::BadValue(
                        "a VM partition runs under policy = \"normal\": QEMU's vCPU thread would starve its own I/O thread at one SCHED_FIFO priority; remove `scheduling` (the guest schedules its own work)".into()));
                }
                if p.io {
                    if let Some(first) = &io_first {
                        let first = first.clone();
                        self.err(&p.name.span(), &format!("{ppath}.io"), Problem::SecondIoPartition { first });
                    } else {
                        io_first = Some(pname.clone());
                    }
                }
                let domain = p.domain.as_ref().and_then(|d| self.domain(d, &format!("{ppath}.domain"))).unwrap_or(domain);
                let address = explicit[pi].or_else(|| self.next_host(&subnet, &mut hosts, &format!("partition {pname}"), &p.name.span(), &format!("{ppath}.address"))).unwrap_or(Ipv4Addr::UNSPECIFIED);
                let external_address = if p.io && io_first.as_deref() == Some(pname.as_str()) {
                    self.next_host(&ext_subnet, &mut ext_hosts, &format!("I/O partition {pname}"), &p.name.span(), &format!("{ppath}.io"))
                } else {
                    None
                };
                let router_span = || key_after(self.text, "router", p.name.span().start);
                let router = match &p.router {
                    None => None,
                    Some(_) if !p.io => {
                        self.err(&router_span(), &format!("{ppath}.router"), Problem::RouterNotIo);
                        None
                    }
                    Some(r) if !r.is_table() => {
                        let p = Problem::BadValue(format!("the router is a table of routes, not {}; write [module.partition.router] (docs/router.md)", r.type_str()));
                        self.err(&router_span(), &format!("{ppath}.router"), p);
                        None
                    }
                    Some(r) => {
                        let text = toml::to_string(r).unwrap_or_default();
                        match partita_router_config::RouterConfig::parse_embedded_with(&text, self.file, p.uplink.is_some()) {
                            Ok(table) => Some(table),
                            Err(errors) => {
                                for e in errors {
                                    self.err(&router_span(), &format!("{ppath}.router.{}", e.field), Problem::Router { problem: e.problem, fix: e.fix });
                                }
                                None
                            }
                        }
                    }
                };
                let env = self.env(&p.env, &format!("{ppath}.env"), &p.name.span());
                let confinement = self.confinement(p, &ppath, &mut uids);
                let time_overrun = self.time_overrun(p.time_overrun.as_ref(), &format!("{ppath}.time_overrun"), health);
                if let Some(t) = &p.time_overrun {
                    explicit_overrun.push((pname.clone(), t.span(), format!("{ppath}.time_overrun")));
                }
                let disk = match &p.disk {
                    Some(d) => self.disk(d, &format!("{ppath}.disk")),
                    None => DEFAULT_DISK,
                };
                let tree = ProcessTree { command, env, memory: Some(memory), pids_max, cpus: pcpus, health, scheduling, netns: String::new(), cgroup: String::new(), nics: Vec::new(), confinement: Some(confinement), disk, uplink: None, log_size: self.log_size(p.log_size.as_ref(), &format!("{ppath}.log_size")) };
                let network = p.network.as_ref().map_or(true, |n| *n.get_ref());
                if let (false, Some(n)) = (network, &p.network) {
                    let refused = if p.io {
                        Some("the I/O partition is the module's way to the network; give `network = false` to another partition")
                    } else if vm.is_some() {
                        Some("a VM partition's guest reaches the module over its V-NIC; remove `network = false`")
                    } else if p.address.is_some() || p.domain.is_some() {
                        Some("a partition without a network has no address or DDS domain; remove `address` and `domain`")
                    } else {
                        None
                    };
                    if let Some(why) = refused {
                        self.err(&n.span(), &format!("{ppath}.network"), Problem::BadValue(why.into()));
                    }
                }
                partitions.push(Partition { name: pname, criticality, io: p.io, network, domain, address, external_address, router, plan: None, vm, time_overrun, tree, system_partition: false, health_monitor: HmTable::default() });
            }

            // Plans: each [[module.plan]] is one CPU's part of a named plan ("default" when unnamed).
            // (name, whether the file names it, plan, span to point at for the plan as a whole), in file order
            let mut built: Vec<(String, bool, Plan, Range<usize>)> = Vec::new();
            // partition name → (the plan's index in the file, its CPU, its plan's name), for the first plan that
            // has a window of it
            let mut planned: BTreeMap<String, (usize, u64, String)> = BTreeMap::new();
            for (pi, rp) in m.plan.iter().enumerate() {
                let ppath = format!("{path}.plan[{pi}]");
                let plan_name = match &rp.name {
                    Some(n) => self.name(n, &ppath),
                    None => DEFAULT_PLAN.to_string(),
                };
                let cpu = rp.cpu.as_ref().map(|c| *c.get_ref()).unwrap_or(host.cpus.first().copied().unwrap_or(0) as u64);
                let cpu_span = rp.cpu.as_ref().map(|c| c.span()).unwrap_or(rp.major_frame.span());
                if m.cpus.is_some() && !cpus.contains(&(cpu as usize)) {
                    self.err(&cpu_span, &format!("{ppath}.cpu"), Problem::CpuNotInModule { cpu, module_cpus: fmt_cpus(&cpus) });
                }
                if let Some(first) = built.iter().position(|(n, _, p, _)| *n == plan_name && p.cpu as u64 == cpu) {
                    let p = if rp.name.is_some() { Problem::DuplicateNamedPlan { name: plan_name.clone(), cpu, first } } else { Problem::DuplicatePlan { cpu } };
                    self.err(&cpu_span, &format!("{ppath}.cpu"), p);
                }
                let frame = self.duration(&rp.major_frame, &format!("{ppath}.major_frame"));
                if frame == Some(Duration::ZERO) {
                    self.err(&rp.major_frame.span(), &format!("{ppath}.major_frame"), Problem::ZeroFrame);
                }
                if frame.is_some_and(|f| f > MAX_FRAME) {
                    self.err(&rp.major_frame.span(), &format!("{ppath}.major_frame"), Problem::FrameTooLong { max: MAX_FRAME.to_string() });
                }
                // (index in file, window, span of start)
                let mut wins: Vec<(usize, Window, Range<usize>)> = Vec::new();
                if rp.window.len() > MAX_WINDOWS {
                    let p = Problem::BadValue(format!("{} windows in one plan; a plan has at most {MAX_WINDOWS} (every window is a freeze and a thaw of the executor)", rp.window.len()));
                    self.err(&rp.major_frame.span(), &format!("{ppath}.window"), p);
                    continue;
                }
                for (wi, w) in rp.window.iter().enumerate() {
                    let wpath = format!("{ppath}.window[{wi}]");
                    let part = w.partition.get_ref().clone();
                    match partitions.iter().find(|p| p.name == part) {
                        None => {
                            let known = partitions.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
                            self.err(&w.partition.span(), &format!("{wpath}.partition"), Problem::UnknownPartition { name: part.clone(), known });
                        }
                        Some(p) => {
                            match planned.get(&part) {
                                // Two tables of one named plan (two CPUs, or one CPU twice): as when plans had no names.
                                Some((other, other_cpu, other_name)) if *other != pi && *other_name == plan_name => {
                                    let p = Problem::PartitionInTwoPlans { partition: part.clone(), cpu: *other_cpu, other: *other };
                                    self.err(&w.partition.span(), &format!("{wpath}.partition"), p);
                                }
                                Some((other, other_cpu, other_name)) if *other_cpu != cpu => {
                                    let p = Problem::PartitionOnTwoCpus { partition: part.clone(), cpu: *other_cpu, other_plan: other_name.clone(), other: *other };
                                    self.err(&w.partition.span(), &format!("{wpath}.partition"), p);
                                }
                                Some(_) => {}
                                None => {
                                    planned.insert(part.clone(), (pi, cpu, plan_name.clone()));
                                }
                            }
                            if !p.tree.cpus.contains(&(cpu as usize)) {
                                let cpus = fmt_cpus(&p.tree.cpus);
                                self.err(&w.partition.span(), &format!("{wpath}.partition"), Problem::WindowOnForeignCpu { partition: part.clone(), cpu, cpus });
                            }
                        }
                    }
                    let start = self.duration(&w.start, &format!("{wpath}.start"));
                    let dur = self.duration(&w.duration, &format!("{wpath}.duration"));
                    let (Some(start), Some(dur)) = (start, dur) else { continue };
                    if dur == Duration::ZERO {
                        self.err(&w.duration.span(), &format!("{wpath}.duration"), Problem::ZeroWindow);
                        continue;
                    }
                    let Some(end) = start.checked_add(dur) else {
                        self.err(&w.duration.span(), &format!("{wpath}.duration"), Problem::BadValue("the window ends too far in the future; use a realistic duration".into()));
                        continue;
                    };
                    if let Some(frame) = frame {
                        if end > frame {
                            self.err(&w.duration.span(), &format!("{wpath}.duration"), Problem::WindowBeyondFrame { end: end.to_string(), frame: frame.to_string() });
                        }
                    }
                    wins.push((wi, Window { partition: part, start, duration: dur }, w.start.span()));
                }
                wins.sort_by_key(|(i, w, _)| (w.start, *i));
                for k in 1..wins.len() {
                    // compare with the latest-ending earlier window, so a long window overlapping several is caught
                    let (pi_, prev) = wins[..k].iter().map(|(i, w, _)| (*i, w)).max_by_key(|(_, w)| w.end()).expect("k >= 1");
                    let (wi, w, span) = &wins[k];
                    if w.start < prev.end() {
                        let p = Problem::WindowOverlap { start: w.start.to_string(), end: w.end().to_string(), other: pi_, other_start: prev.start.to_string(), other_end: prev.end().to_string() };
                        self.err(span, &format!("{ppath}.window[{wi}].start"), p);
                    }
                }
                let ahead = rp.freeze_ahead.as_ref().and_then(|a| self.duration(a, &format!("{ppath}.freeze_ahead"))).unwrap_or(Duration::ZERO);
                let wake = rp.wake_ahead.as_ref().and_then(|a| self.duration(a, &format!("{ppath}.wake_ahead"))).unwrap_or(Duration::ZERO);
                let order: Vec<usize> = wins.iter().map(|(i, _, _)| *i).collect();
                let plan = Plan { cpu: cpu as usize, major_frame: MajorFrame(frame.unwrap_or(Duration::ZERO)), windows: wins.into_iter().map(|(_, w, _)| w).collect(), freeze_ahead: ahead, wake_ahead: wake, demote: rp.demote.unwrap_or(true) };
                if let Some(a) = rp.freeze_ahead.as_ref().filter(|_| ahead > Duration::ZERO) {
                    if let Some(k) = plan.freeze_ahead_too_long() {
                        let w = &plan.windows[k];
                        let p = Problem::FreezeAheadTooLong { ahead: ahead.to_string(), window: order[k], partition: w.partition.clone(), duration: w.duration.to_string() };
                        self.err(&a.span(), &format!("{ppath}.freeze_ahead"), p);
                    }
                }
                if let (Some(w), Some(why)) = (rp.wake_ahead.as_ref(), plan.wake_ahead_refused()) {
                    let p = match why {
                        WakeAheadRefused::OverAMillisecond => Problem::BadValue(format!("wake_ahead {wake} is longer than 1ms: the executor would wait on the clock that long before every start, and a timer's wake-up latency is tens of µs; use tens of µs")),
                        WakeAheadRefused::NotShorterThanFreezeAhead => Problem::WakeAheadNotShorter { ahead: wake.to_string(), freeze: ahead.to_string() },
                        WakeAheadRefused::NoQuietTime => Problem::WakeAheadUnused { ahead: wake.to_string() },
                    };
                    self.err(&w.span(), &format!("{ppath}.wake_ahead"), p);
                }
                let span = rp.name.as_ref().map(|n| n.span()).unwrap_or_else(|| cpu_span.clone());
                built.push((plan_name, rp.name.is_some(), plan, span));
            }
            if m.cpus.is_some() && !m.plan.is_empty() {
                for &cpu in &cpus {
                    if !built.iter().any(|(_, _, p, _)| p.cpu == cpu) {
                        let span = m.cpus.as_ref().map(|c| c.span()).unwrap_or(0..0);
                        self.err(&span, &format!("{path}.cpus"), Problem::CpuWithoutPlan { cpu: cpu as u64 });
                    }
                }
            }
            if !m.plan.is_empty() {
                for p in &m.partition {
                    if !planned.contains_key(p.name.get_ref()) {
                        self.err(&p.name.span(), &format!("{path}.partition[{}]", p.name.get_ref()), Problem::NoWindow { name: p.name.get_ref().clone() });
                    }
                }
            }
            let (plans, plan_name, other_plans) = self.plan_sets(m, &path, built);
            let plan_names: Vec<String> = std::iter::once(plan_name.clone()).chain(other_plans.iter().map(|s| s.name.clone())).filter(|_| !plans.is_empty()).collect();
            // A planned partition runs on its CPU only (the same in every plan), frozen and thawed by that CPU's
            // executor; its `plan` is the default plan's part for that CPU.
            for p in &mut partitions {
                let cpu = plans.iter().chain(other_plans.iter().flat_map(|s| s.plans.iter())).find(|pl| pl.windows.iter().any(|w| w.partition == p.name)).map(|pl| pl.cpu);
                p.plan = cpu.and_then(|c| plans.iter().position(|pl| pl.cpu == c));
                if let Some(c) = cpu {
                    p.tree.cpus = vec![c];
                }
            }
            // System partitions and the health-monitor tables, now that the plans' names are known.
            for (rp, p) in m.partition.iter().zip(partitions.iter_mut()) {
                let ppath = format!("{path}.partition[{}]", rp.name.get_ref());
                if let Some(sp) = &rp.system_partition {
                    p.system_partition = *sp.get_ref();
                    if p.system_partition && m.plan.is_empty() {
                        self.err(&sp.span(), &format!("{ppath}.system_partition"), Problem::SystemPartitionWithoutPlans { module: name.clone() });
                    }
                }
                p.health_monitor = self.hm_table(rp.health_monitor.as_ref(), &format!("{ppath}.health_monitor"), HmLevel::Partition, Some((&name, &plan_names)));
            }
            let module_hm = self.hm_table(m.health_monitor.as_ref(), &format!("{path}.health_monitor"), HmLevel::Module, Some((&name, &plan_names)));
            if m.plan.is_empty() {
                for (name, span, field) in explicit_overrun.drain(..) {
                    let why = format!("partition {name} has no window (module {} has no plan), so it cannot run past one; remove `time_overrun`", m.name.get_ref());
                    self.err(&span, &field, Problem::BadValue(why));
                }
            }
            explicit_overrun.clear();
            let mut paths: Vec<RequestPath> = Vec::new();
            for (k, rp) in m.path.iter().enumerate() {
                let ppath = format!("{path}.path[{k}]");
                let pname = self.name(&rp.name, &format!("{ppath}.name"));
                if paths.iter().any(|x| x.name == pname) {
                    self.err(&rp.name.span(), &format!("{ppath}.name"), Problem::BadValue(format!("a second path named {pname:?}; give each path of a module its own name")));
                }
                let through = rp.through.get_ref();
                if through.is_empty() || through.len() > MAX_PATH_VISITS {
                    let why = format!("a path visits 1 to {MAX_PATH_VISITS} partitions, this one {}; list the partitions a request passes, e.g. [\"routing\", \"recorder\", \"routing\"]", through.len());
                    self.err(&rp.through.span(), &format!("{ppath}.through"), Problem::BadValue(why));
                    continue;
                }
                for (j, t) in through.iter().enumerate() {
                    if !partitions.iter().any(|p| p.name == *t) {
                        let known = partitions.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
                        self.err(&rp.through.span(), &format!("{ppath}.through[{j}]"), Problem::UnknownPartition { name: t.clone(), known });
                    }
                }
                paths.push(RequestPath { name: pname, through: through.clone() });
            }
            let channels = self.channels(&m.channel, &path, &partitions);
            modules.push(Module { name, cpus, network: Network { domain, subnet, bridge: String::new() }, partitions, plans, plan_name, other_plans, health_monitor: module_hm, paths, host: None, channels });
        }

        // Native nodes.
        let mut nodes = Vec::new();
        for (ni, n) in raw.node.iter().enumerate() {
            let path = format!("node[{}]", n.name.get_ref());
            let name = self.name(&n.name, &path);
            if let Some(first) = names.get(&name).copied() {
                self.err(&n.name.span(), &format!("{path}.name"), Problem::Duplicate { what: "partition or node", name: name.clone(), first_line: first });
            } else {
                names.insert(name.clone(), self.line(&n.name.span()));
            }
            let command = self.command(&n.command, &format!("{path}.command"));
            let memory = n.memory.as_ref().and_then(|m| self.memory(m, &format!("{path}.memory")));
            let pids_max = n.pids.as_ref().and_then(|p| self.pids(p, &format!("{path}.pids")));
            let cpus = match &n.cpus {
                None => Vec::new(),
                Some(c) => {
                    let cpus = self.cpu_list(c, &format!("{path}.cpus"), &host.cpus, true);
                    if let Some((cpu, other)) = cpus.iter().find_map(|cpu| cpu_owner.get(&(*cpu as u64)).map(|o| (*cpu, o.clone()))) {
                        self.err(&c.span(), &format!("{path}.cpus"), Problem::CpuTakenByModule { cpu: cpu as u64, other });
                    }
                    cpus
                }
            };
            let health = self.health(n.health.as_ref(), &format!("{path}.health"), HealthAction::Ignore);
            let scheduling = self.scheduling(n.scheduling.as_ref(), &format!("{path}.scheduling"));
            let env = self.env(&n.env, &format!("{path}.env"), &n.name.span());
            let domain = n.domain.as_ref().and_then(|d| self.domain(d, &format!("{path}.domain"))).unwrap_or(network.domain);
            let address = node_addrs[ni]
                .or_else(|| self.next_host(&ext_subnet, &mut ext_hosts, &format!("node {name}"), &n.name.span(), &format!("{path}.address")))
                .unwrap_or(Ipv4Addr::UNSPECIFIED);
            let tree = ProcessTree { command, env, memory, pids_max, cpus, health, scheduling, netns: String::new(), cgroup: String::new(), nics: Vec::new(), confinement: None, disk: DiskLimits::default(), uplink: None, log_size: self.log_size(n.log_size.as_ref(), &format!("{path}.log_size")) };
            nodes.push(NativeNode { name, address, domain, tree, host: None });
        }

        // The wake-up latency bound: on by default (0 µs) when a plan runs, as cyclictest holds it.
        let planned = modules.iter().any(|m| !m.is_native());
        let cpu_dma_latency = match &raw.system.cpu_dma_latency {
            None => planned.then_some(Duration::ZERO),
            Some(v) if v.get_ref() == "off" => None,
            Some(v) => match self.duration(v, "system.cpu_dma_latency") {
                Some(d) if d > MAX_CPU_DMA_LATENCY => {
                    self.err(&v.span(), "system.cpu_dma_latency", Problem::BadValue(format!("{d} is longer than any idle state's exit latency; use at most {MAX_CPU_DMA_LATENCY}, or \"off\"")));
                    None
                }
                d => d,
            },
        };
        let host_tuning = self.host_tuning(&raw.system, &modules, host);
        let health_monitor = self.hm_table(raw.health_monitor.as_ref(), "health_monitor", HmLevel::System, None);
        let mut system = System { name: system_name, source: self.file.to_string(), modules, nodes, network, cpu_dma_latency, host: host_tuning, hosts: vec![], part: None, peers: vec![], health_monitor };
        crate::names::place(&mut system);
        system
    }

    /// Groups a module's [[module.plan]] tables (file order) into its named plans: the default one (per CPU, by
    /// CPU) with its name, and the others in file order. Refuses a `default_plan` naming no plan, several names
    /// without a default, and a named plan without a table for a CPU another plan schedules.
    fn plan_sets(&mut self, m: &RawModule, path: &str, built: Vec<(String, bool, Plan, Range<usize>)>) -> (Vec<Plan>, String, Vec<PlanSet>) {
        // each name with the index of its first table
        let mut names: Vec<(String, usize)> = Vec::new();
        for (i, (n, ..)) in built.iter().enumerate() {
            if !names.iter().any(|(x, _)| x == n) {
                names.push((n.clone(), i));
            }
        }
        let known = names.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ");
        let first_name = || names.first().map(|(n, _)| n.clone()).unwrap_or_else(|| DEFAULT_PLAN.to_string());
        let has = |name: &str| names.iter().any(|(n, _)| n == name);
        let default = match &m.default_plan {
            Some(d) if has(d.get_ref()) => d.get_ref().clone(),
            Some(d) => {
                let p = if names.is_empty() {
                    Problem::BadValue(format!("default_plan names the plan `up` starts with, and module {} has no [[module.plan]]; remove default_plan or add plans", m.name.get_ref()))
                } else {
                    Problem::UnknownDefaultPlan { name: d.get_ref().clone(), known: known.clone() }
                };
                self.err(&d.span(), &format!("{path}.default_plan"), p);
                first_name()
            }
            None if has(DEFAULT_PLAN) => DEFAULT_PLAN.to_string(),
            None if names.len() > 1 => {
                self.err(&m.name.span(), &format!("{path}.default_plan"), Problem::NoDefaultPlan { known: known.clone() });
                first_name()
            }
            None => first_name(),
        };
        // Every named plan schedules every CPU some plan of the module schedules.
        let all_cpus: BTreeSet<usize> = built.iter().map(|(_, _, p, _)| p.cpu).collect();
        for (n, first) in &names {
            for &cpu in &all_cpus {
                if !built.iter().any(|(x, _, p, _)| x == n && p.cpu == cpu) {
                    let other = built.iter().find(|(x, _, p, _)| x != n && p.cpu == cpu).map(|(x, ..)| x.clone()).unwrap_or_default();
                    let span = built[*first].3.clone();
                    self.err(&span, &format!("{path}.plan[{first}]"), Problem::PlanMissingCpu { plan: n.clone(), cpu: cpu as u64, other });
                }
            }
        }
        let mut sets: Vec<PlanSet> = names.iter().map(|(n, _)| PlanSet { name: n.clone(), plans: Vec::new() }).collect();
        for (n, _, p, _) in built {
            if let Some(s) = sets.iter_mut().find(|s| s.name == n) {
                s.plans.push(p);
            }
        }
        for s in &mut sets {
            s.plans.sort_by_key(|p| p.cpu);
        }
        let plans = match sets.iter().position(|s| s.name == default) {
            Some(k) => sets.remove(k).plans,
            None => Vec::new(),
        };
        (plans, default, sets)
    }

    /// A health-monitor table at `level`: every key an error kind, every action one the level may take, a
    /// switch_plan's plan one of the module's (`module`: its name and plan names; `None` at system level), an
    /// escalation complete and in range.
    fn hm_table(&mut self, raw: Option<&RawHmTable>, path: &str, level: HmLevel, module: Option<(&str, &[String])>) -> HmTable {
        const FORM: &str = "write an action word such as \"restart_cold\", or a table { action = \"…\", max = N, within = \"60s\", then = \"…\", plan = \"…\" }";
        let mut table = HmTable::default();
        let Some(raw) = raw else { return table };
        for (key, v) in raw {
            let epath = format!("{path}.{key}");
            let span = v.span();
            let Ok(kind) = key.parse::<ErrorKind>() else {
                self.err(&span, &epath, Problem::UnknownErrorKind { kind: key.clone() });
                continue;
            };
            let (entry, apath) = match v.get_ref() {
                toml::Value::String(a) => (RawHmEntry { action: a.clone(), plan: None, max: None, within: None, then: None }, epath.clone()),
                t @ toml::Value::Table(_) => match t.clone().try_into::<RawHmEntry>() {
                    Ok(e) => (e, format!("{epath}.action")),
                    Err(e) => {
                        self.err(&span, &epath, Problem::BadValue(format!("{}; {FORM}", e.message().trim())));
                        continue;
                    }
                },
                other => {
                    self.err(&span, &epath, Problem::BadValue(format!("{other} is not a health-monitor entry; {FORM}")));
                    continue;
                }
            };
            let action = self.hm_action(&entry.action, entry.plan.as_deref(), &span, &apath, &format!("{epath}.plan"), level, module);
            let then = entry.then.as_ref().and_then(|t| self.hm_action(t, entry.plan.as_deref(), &span, &format!("{epath}.then"), &format!("{epath}.plan"), level, module));
            let switches = entry.action == "switch_plan" || entry.then.as_deref() == Some("switch_plan");
            if entry.plan.is_some() && !switches {
                self.err(&span, &format!("{epath}.plan"), Problem::PlanWithoutSwitch);
            }
            let max = entry.max.and_then(|n| {
                let ok = u32::try_from(n).ok().filter(|n| (1..=MAX_HM_COUNT).contains(n));
                if ok.is_none() {
                    self.err(&span, &format!("{epath}.max"), Problem::BadValue(format!("max = {n} occurrences: give 1..={MAX_HM_COUNT} (after that many within `within`, `then` is taken)")));
                }
                ok
            });
            let within = entry.within.as_ref().and_then(|w| match w.parse::<Duration>() {
                Ok(d) if (MIN_HM_WITHIN..=MAX_HM_WITHIN).contains(&d) => Some(d),
                Ok(d) => {
                    self.err(&span, &format!("{epath}.within"), Problem::BadValue(format!("within = {d}: give {MIN_HM_WITHIN} to {MAX_HM_WITHIN} (24 h), the time over which occurrences are counted")));
                    None
                }
                Err(e) => {
                    self.err(&span, &format!("{epath}.within"), Problem::BadValue(e.to_string()));
                    None
                }
            });
            let given = [("max", entry.max.is_some()), ("within", entry.within.is_some()), ("then", entry.then.is_some())];
            if given.iter().any(|(_, g)| *g) && !given.iter().all(|(_, g)| *g) {
                let missing: Vec<&str> = given.iter().filter(|(_, g)| !*g).map(|(k, _)| *k).collect();
                let why = format!(
                    "an escalation needs max, within and then together (after `max` occurrences within `within`, `then` is taken instead of `action`); add {} or remove {}",
                    missing.join(" and "),
                    given.iter().filter(|(_, g)| *g).map(|(k, _)| *k).collect::<Vec<_>>().join(" and ")
                );
                self.err(&span, &format!("{epath}.{}", missing[0]), Problem::BadValue(why));
            }
            let escalate = match (max, within, then) {
                (Some(max), Some(within), Some(then)) => Some(HmEscalation { max, within, then }),
                _ => None,
            };
            if let Some(action) = action {
                table.entries.insert(kind, HmEntry { action, escalate });
            }
        }
        table
    }

    /// One action word of a health-monitor entry (`action` or `then`, at `field`), with the entry's `plan`.
    #[allow(clippy::too_many_arguments)]
    fn hm_action(&mut self, word: &str, plan: Option<&str>, span: &Range<usize>, field: &str, plan_field: &str, level: HmLevel, module: Option<(&str, &[String])>) -> Option<HmAction> {
        let action = match word {
            "ignore" => HmAction::Ignore,
            "restart_cold" => HmAction::RestartCold,
            "restart_warm" => HmAction::RestartWarm,
            "idle" => HmAction::Idle,
            "stop" => HmAction::Stop,
            "switch_plan" => HmAction::SwitchPlan(plan.unwrap_or_default().to_string()),
            "stop_module" => HmAction::StopModule,
            other => {
                self.err(span, field, Problem::UnknownHmAction { action: other.to_string() });
                return None;
            }
        };
        if !action.allowed_at(level) {
            let allowed: Vec<&str> = HmAction::WORDS.iter().copied().filter(|w| {
                let a = if *w == "switch_plan" { HmAction::SwitchPlan(String::new()) } else { word_action(w) };
                a.allowed_at(level)
            }).collect();
            let levels: Vec<HmLevel> = [HmLevel::Partition, HmLevel::Module, HmLevel::System].into_iter().filter(|l| action.allowed_at(*l)).collect();
            let why = match (&action, level) {
                (HmAction::SwitchPlan(_), HmLevel::System) => "a system-level table does not say which module's plan to switch; ",
                (HmAction::Idle | HmAction::Stop, _) => "it acts on one partition; ",
                (HmAction::StopModule, _) => "it stops a whole module; ",
                (_, HmLevel::System) => "a system-level table ignores an error or stops every module; ",
                _ => "",
            };
            let names = levels.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(" and ");
            let tables = levels.iter().map(|l| l.table()).collect::<Vec<_>>().join(" or ");
            let fix = format!("{why}{word} is taken at {names} level: put the entry in {tables}");
            self.err(span, field, Problem::HmActionNotAllowed { action: action.as_str(), level, allowed: allowed.join(", "), fix });
            return None;
        }
        if let HmAction::SwitchPlan(_) = action {
            let (module, plans) = module.unwrap_or(("", &[]));
            let known = if plans.is_empty() { "none: the module has no [[module.plan]]".to_string() } else { plans.join(", ") };
            match plan {
                None => {
                    self.err(span, plan_field, Problem::SwitchPlanWithoutPlan { known });
                    return None;
                }
                Some(p) if !plans.iter().any(|n| n == p) => {
                    self.err(span, plan_field, Problem::UnknownPlan { name: p.to_string(), module: module.to_string(), known });
                    return None;
                }
                Some(_) => {}
            }
        }
        Some(action)
    }

    /// A module's `[[module.channel]]`s against its partitions: both ends exist and are process partitions,
    /// sizes and depths within bounds, each port used once.
    fn channels(&mut self, raw: &[RawChannel], mpath: &str, partitions: &[Partition]) -> Vec<Channel> {
        let mut channels: Vec<Channel> = Vec::new();
        let mut ports: BTreeMap<PortRef, String> = BTreeMap::new();
        for (k, rc) in raw.iter().enumerate() {
            let cpath = format!("{mpath}.channel[{k}]");
            let name = self.name(&rc.name, &cpath);
            if channels.iter().any(|c| c.name == name) {
                self.err(&rc.name.span(), &format!("{cpath}.name"), Problem::BadValue(format!("a second channel named {name:?}; give each channel of a module its own name")));
            }
            let mut ok = true;
            let kind = match rc.kind.get_ref().as_str() {
                "sampling" => {
                    if let Some(d) = &rc.depth {
                        self.err(&d.span(), &format!("{cpath}.depth"), Problem::BadValue("a sampling channel holds one message, it has no depth; remove `depth` (or make it kind = \"queuing\")".into()));
                        ok = false;
                    }
                    match &rc.refresh {
                        None => {
                            self.err(&rc.kind.span(), &format!("{cpath}.refresh"), Problem::BadValue("a sampling channel needs `refresh`, how long a message stays valid, e.g. refresh = \"100ms\"".into()));
                            None
                        }
                        Some(r) => match self.duration(r, &format!("{cpath}.refresh")) {
                            Some(d) if d == Duration::from_micros(0) || d > MAX_REFRESH => {
                                self.err(&r.span(), &format!("{cpath}.refresh"), Problem::BadValue(format!("refresh {d} is out of range; give more than 0 and at most {MAX_REFRESH}")));
                                None
                            }
                            Some(d) => Some(ChannelKind::Sampling { refresh: d }),
                            None => None,
                        },
                    }
                }
                "queuing" => {
                    if let Some(r) = &rc.refresh {
                        self.err(&r.span(), &format!("{cpath}.refresh"), Problem::BadValue("a queuing channel's messages do not age; remove `refresh` (or make it kind = \"sampling\")".into()));
                        ok = false;
                    }
                    match &rc.depth {
                        None => {
                            self.err(&rc.kind.span(), &format!("{cpath}.depth"), Problem::BadValue("a queuing channel needs `depth`, how many messages it holds, e.g. depth = 16".into()));
                            None
                        }
                        Some(d) if *d.get_ref() == 0 || *d.get_ref() > MAX_CHANNEL_DEPTH => {
                            self.err(&d.span(), &format!("{cpath}.depth"), Problem::BadValue(format!("depth {} is out of range; give 1 to {MAX_CHANNEL_DEPTH}", d.get_ref())));
                            None
                        }
                        Some(d) => Some(ChannelKind::Queuing { depth: *d.get_ref() as u32 }),
                    }
                }
                other => {
                    self.err(&rc.kind.span(), &format!("{cpath}.kind"), Problem::BadValue(format!("unknown channel kind {other:?}; use \"sampling\" or \"queuing\"")));
                    None
                }
            };
            let max_message = match rc.max_message.get_ref().parse::<ByteSize>().map_err(|e| self.err(&rc.max_message.span(), &format!("{cpath}.max_message"), Problem::BadValue(e.to_string()))).ok() {
                Some(b) if b.0 == 0 || b.0 > MAX_CHANNEL_MESSAGE => {
                    self.err(&rc.max_message.span(), &format!("{cpath}.max_message"), Problem::BadValue(format!("max_message {b} is out of range; give 1B to {}", ByteSize(MAX_CHANNEL_MESSAGE))));
                    None
                }
                other => other,
            };
            if let (Some(ChannelKind::Queuing { depth }), Some(m)) = (kind, max_message) {
                if u64::from(depth) * m.0 > MAX_CHANNEL_BYTES {
                    let why = format!("depth {depth} × max_message {m} is more than the {} a channel may take; make the queue shorter or its messages smaller", ByteSize(MAX_CHANNEL_BYTES));
                    self.err(&rc.max_message.span(), &format!("{cpath}.max_message"), Problem::BadValue(why));
                    ok = false;
                }
            }
            let mut end = |cx: &mut Self, text: &str, span: &Range<usize>, field: String| -> Option<PortRef> {
                let (partition, port) = match text.split_once(':') {
                    Some((p, q)) => (p.to_string(), q.to_string()),
                    None => (text.to_string(), name.clone()),
                };
                let Some(p) = partitions.iter().find(|p| p.name == partition) else {
                    let known = partitions.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
                    cx.err(span, &field, Problem::UnknownPartition { name: partition, known });
                    return None;
                };
                if p.vm.is_some() {
                    cx.err(span, &field, Problem::BadValue(format!("partition {partition} is a VM partition, which shares no memory with the host's partitions; connect it over its V-NIC (DDS) instead, or make it a process partition")));
                    return None;
                }
                if !is_valid_name(&port) {
                    cx.err(span, &field, Problem::BadName { name: port, max: MAX_NAME });
                    return None;
                }
                let r = PortRef { partition, port };
                if let Some(other) = ports.get(&r) {
                    cx.err(span, &field, Problem::BadValue(format!("port {r} is already an end of channel {other:?}; give each port one channel (name it \"{}:<port>\")", r.partition)));
                    return None;
                }
                ports.insert(r.clone(), name.clone());
                Some(r)
            };
            let source = end(self, rc.source.get_ref(), &rc.source.span(), format!("{cpath}.source"));
            let dests = rc.destinations.get_ref();
            let wanted = match kind {
                Some(ChannelKind::Queuing { .. }) => dests.len() == 1,
                _ => !dests.is_empty() && dests.len() <= partitions.len(),
            };
            if !wanted {
                let why = match kind {
                    Some(ChannelKind::Queuing { .. }) => format!("a queuing channel has exactly one destination, this one {}; use a channel per destination, or a sampling channel", dests.len()),
                    _ => format!("a sampling channel has 1 to {} destinations (one per other partition), this one {}", partitions.len().saturating_sub(1).max(1), dests.len()),
                };
                self.err(&rc.destinations.span(), &format!("{cpath}.destinations"), Problem::BadValue(why));
                ok = false;
            }
            let mut destinations = Vec::new();
            let source_partition = rc.source.get_ref().split(':').next().unwrap_or_default();
            for (j, d) in dests.iter().enumerate() {
                if d.split(':').next() == Some(source_partition) {
                    let why = format!("partition {source_partition} is both the source and a destination; a channel connects different partitions");
                    self.err(&rc.destinations.span(), &format!("{cpath}.destinations"), Problem::BadValue(why));
                    ok = false;
                    continue;
                }
                match end(self, d, &rc.destinations.span(), format!("{cpath}.destinations[{j}]")) {
                    Some(r) => destinations.push(r),
                    None => ok = false,
                }
            }
            let on_fault = match rc.on_fault.as_ref().map(|a| (a, a.get_ref().as_str())) {
                None | Some((_, "ignore")) => FaultAction::Ignore,
                Some((_, "restart")) => FaultAction::Restart,
                Some((_, "stop")) => FaultAction::Stop,
                Some((a, other)) => {
                    self.err(&a.span(), &format!("{cpath}.on_fault"), Problem::BadValue(format!("unknown fault action {other:?}; use \"ignore\" (the fault is logged), \"restart\" or \"stop\"")));
                    ok = false;
                    FaultAction::Ignore
                }
            };
            if let (true, Some(kind), Some(max_message), Some(source)) = (ok, kind, max_message, source) {
                channels.push(Channel { name, kind, max_message: max_message.0 as u32, source, destinations, on_fault });
            }
        }
        // The I/O partition's router carries topics through its own queuing ports only.
        let span = raw.first().map(|c| c.name.span()).unwrap_or(0..0);
        for io in partitions.iter().filter(|p| p.io) {
            let Some(r) = &io.router else { continue };
            for (i, pr) in r.ports.iter().enumerate() {
                let (name, source, key) = match (&pr.to_port, &pr.from_port) {
                    (Some(n), _) => (n, true, "to_port"),
                    (None, Some(n)) => (n, false, "from_port"),
                    (None, None) => continue,
                };
                let end = PortRef { partition: io.name.clone(), port: name.clone() };
                let found = channels.iter().find(|c| if source { c.source == end } else { c.destinations.contains(&end) });
                let field = format!("{mpath}.partition[{}].router.port[{i}].{key}", io.name);
                match found {
                    None => {
                        let (what, side) = if source { ("source", "source") } else { ("destination", "destinations") };
                        let why = format!("the I/O partition {} has no {what} port {name:?}; add a [[module.channel]] with {side} = \"{end}\" (kind = \"queuing\")", io.name);
                        self.err(&span, &field, Problem::BadValue(why));
                    }
                    Some(c) if !matches!(c.kind, ChannelKind::Queuing { .. }) => {
                        let why = format!("port {end} is an end of sampling channel {:?}; the router carries DDS samples through queuing channels (every sample, in order): make it kind = \"queuing\"", c.name);
                        self.err(&span, &field, Problem::BadValue(why));
                    }
                    Some(_) => {}
                }
            }
        }
        channels
    }

    fn explicit_uid(&mut self, u: &S<u64>, path: &str, owner: &str, uids: &mut Uids) {
        let uid = *u.get_ref();
        let max = u32::MAX - UID_RANGE;
        if uid == 0 || uid > u64::from(max) {
            self.err(&u.span(), path, Problem::BadUid { uid, max });
            return;
        }
        if let Some(other) = uids.overlapping(uid as u32) {
            self.err(&u.span(), path, Problem::UidOverlap { uid, other, range: UID_RANGE });
            return;
        }
        uids.taken.push((uid as u32, owner.to_string(), true));
    }

    /// A partition's confinement: its host uid (explicit, or the next free default range), the capabilities it
    /// keeps and the system calls let through.
    fn confinement(&mut self, p: &RawPartition, ppath: &str, uids: &mut Uids) -> Confinement {
        let name = p.name.get_ref();
        let uid = match uids.taken.iter().find(|(_, o, explicit)| *explicit && o == name) {
            Some((u, _, _)) => *u,
            None if p.uid.is_some() => 0, // refused above
            None => {
                let free = (0..).map(|k| DEFAULT_UID_BASE + UID_RANGE * k).find(|u| uids.overlapping(*u).is_none()).expect("a free range");
                uids.taken.push((free, name.clone(), false));
                free
            }
        };
        let mut capabilities = Vec::new();
        if let Some(list) = &p.capabilities {
            for c in list.get_ref() {
                match capability_number(c) {
                    Some(n) if !capabilities.contains(&n) => capabilities.push(n),
                    Some(_) => {}
                    None => self.err(&list.span(), &format!("{ppath}.capabilities"), Problem::UnknownCapability { name: c.clone() }),
                }
            }
        }
        let mut seccomp_allow = Vec::new();
        if let Some(s) = &p.seccomp {
            for a in &s.allow {
                if is_seccomp_name(a.get_ref()) {
                    seccomp_allow.push(a.get_ref().clone());
                } else {
                    self.err(&a.span(), &format!("{ppath}.seccomp.allow"), Problem::UnknownSyscall { name: a.get_ref().clone() });
                }
            }
        }
        let limits = p.limits.as_ref().map_or(DEFAULT_KERNEL_LIMITS, |l| self.kernel_limits(l, &format!("{ppath}.limits")));
        let state_quota = p.state.as_ref().map_or(DEFAULT_STATE_QUOTA, |q| self.state_quota(q, &format!("{ppath}.state")));
        let mut binds = Vec::new();
        if let Some(list) = &p.binds {
            for b in list.get_ref() {
                let found = if b.starts_with('/') { Path::new(b).exists() } else { !b.is_empty() && !b.contains('/') && search_path().iter().any(|d| is_executable(&d.join(b))) };
                if found && !b.contains('\0') {
                    binds.push(b.clone());
                } else {
                    self.err(&list.span(), &format!("{ppath}.binds"), Problem::BadValue(format!("{b:?} is neither a path this machine has nor a program in its PATH; give an absolute path that exists, or the name of an installed program")));
                }
            }
        }
        Confinement { uid, capabilities, seccomp_allow, state_dir: PathBuf::new(), lock_memory: p.lock_memory.unwrap_or(false), limits, state_quota, binds }
    }

    /// A size of at least `floor` (`what` names it in the fix).
    fn size_at_least(&mut self, v: &S<String>, path: &str, floor: u64, what: &str) -> Option<u64> {
        match v.get_ref().parse::<ByteSize>() {
            Ok(b) if b.0 < floor => {
                self.err(&v.span(), path, Problem::BadValue(format!("{b} is too small for {what}; give at least {}", ByteSize(floor))));
                None
            }
            Ok(b) => Some(b.0),
            Err(e) => {
                self.err(&v.span(), path, Problem::BadValue(e.to_string()));
                None
            }
        }
    }

    fn log_size(&mut self, v: Option<&S<String>>, path: &str) -> u64 {
        v.and_then(|v| self.size_at_least(v, path, LOG_SIZE_FLOOR, "an output log")).unwrap_or(DEFAULT_LOG_SIZE)
    }

    /// A table of sizes and counts: `sizes` keys take a size (`"800KiB"`), `counts` keys a positive number.
    fn table_of_limits(&mut self, v: &S<toml::Value>, path: &str, sizes: &[&str], counts: &[&str], fix: &str) -> Vec<(String, u64)> {
        let Some(table) = v.get_ref().as_table() else {
            self.err(&v.span(), path, Problem::BadValue(format!("{} is not a table; {fix}", v.get_ref())));
            return Vec::new();
        };
        let mut out = Vec::new();
        for (key, value) in table {
            let field = format!("{path}.{key}");
            let parsed = match (value, sizes.contains(&key.as_str()), counts.contains(&key.as_str())) {
                (toml::Value::String(s), true, _) => s.parse::<ByteSize>().map(|b| b.0).map_err(|e| e.to_string()),
                (toml::Value::Integer(n), _, true) if *n > 0 => Ok(*n as u64),
                (_, true, _) => Err(format!("{value} is not a size; write a whole number and a unit such as \"64MiB\"")),
                (_, _, true) => Err(format!("{value} is not a positive number")),
                _ => Err(format!("unknown key {key:?}; {fix}")),
            };
            match parsed {
                Ok(n) => out.push((key.clone(), n)),
                Err(why) => self.err(&v.span(), &field, Problem::BadValue(why)),
            }
        }
        out
    }

    /// `limits = { message_queue_bytes = "800KiB", queued_signals = 1024 }`; keys left out keep the default.
    fn kernel_limits(&mut self, v: &S<toml::Value>, path: &str) -> KernelLimits {
        let mut limits = DEFAULT_KERNEL_LIMITS;
        let fix = "write a table such as { message_queue_bytes = \"800KiB\", queued_signals = 1024 }";
        for (key, n) in self.table_of_limits(v, path, &["message_queue_bytes"], &["queued_signals"], fix) {
            match key.as_str() {
                "message_queue_bytes" => limits.message_queue_bytes = n,
                _ => limits.queued_signals = n,
            }
        }
        limits
    }

    /// `state = { size = "64MiB", inodes = 4096 }`; keys left out keep the default.
    fn state_quota(&mut self, v: &S<toml::Value>, path: &str) -> StateQuota {
        let mut quota = DEFAULT_STATE_QUOTA;
        let fix = "write a table such as { size = \"64MiB\", inodes = 4096 }";
        for (key, n) in self.table_of_limits(v, path, &["size"], &["inodes"], fix) {
            match key.as_str() {
                "size" if n < STATE_QUOTA_FLOOR => self.err(&v.span(), &format!("{path}.size"), Problem::BadValue(format!("{} is too small for a state directory; give at least {}", ByteSize(n), ByteSize(STATE_QUOTA_FLOOR)))),
                "size" => quota.bytes = n,
                _ if n < 64 => self.err(&v.span(), &format!("{path}.inodes"), Problem::BadValue(format!("{n} inodes cannot hold a program's files; give at least 64"))),
                _ => quota.inodes = n,
            }
        }
        quota
    }

    /// A partition's kind, and for a VM partition its guest.
    fn vm(&mut self, p: &RawPartition, ppath: &str) -> Option<Vm> {
        let kind = p.kind.as_ref().map_or("process", |k| k.get_ref().as_str());
        match (kind, &p.vm) {
            ("process", None) => return None,
            ("process", Some(v)) => {
                self.err(&v.span(), &format!("{ppath}.vm"), Problem::BadValue("a [vm] table belongs to a partition of kind = \"vm\"; add it or remove the table".into()));
                return None;
            }
            ("vm", _) => {}
            (other, _) => {
                let span = p.kind.as_ref().map(|k| k.span()).unwrap_or(0..0);
                self.err(&span, &format!("{ppath}.kind"), Problem::BadValue(format!("unknown partition kind {other:?}; use \"process\" or \"vm\"")));
                return None;
            }
        }
        let path = format!("{ppath}.vm");
        let raw = p.vm.as_ref().map(|v| v.get_ref());
        let memory = match raw.and_then(|v| v.memory.as_ref()).map(|m| (m, self.memory(m, &format!("{path}.memory")))) {
            None | Some((_, None)) => DEFAULT_GUEST_MEMORY,
            Some((m, Some(v))) if v < GUEST_MEMORY_FLOOR => {
                let why = "partita's guest kernel and initramfs do not boot reliably in less";
                self.err(&m.span(), &format!("{path}.memory"), Problem::BadValue(format!("a guest of {v}: {why}; give at least {GUEST_MEMORY_FLOOR}")));
                DEFAULT_GUEST_MEMORY
            }
            Some((_, Some(v))) => v,
        };
        let vcpus = match raw.and_then(|v| v.vcpus.as_ref()) {
            None => 1,
            Some(n) if (1..=MAX_VCPUS).contains(n.get_ref()) => *n.get_ref() as u32,
            Some(n) => {
                self.err(&n.span(), &format!("{path}.vcpus"), Problem::BadValue(format!("{} vCPUs: give 1..={MAX_VCPUS}", n.get_ref())));
                1
            }
        };
        let accel = match raw.and_then(|v| v.accel.as_ref()) {
            None => Accel::Auto,
            Some(a) => match a.get_ref().parse::<Accel>() {
                Ok(accel) => accel,
                Err(e) => {
                    self.err(&a.span(), &format!("{path}.accel"), Problem::BadValue(format!("unknown acceleration {:?}; use \"auto\", \"kvm\" or \"tcg\"", e.0)));
                    Accel::Auto
                }
            },
        };
        let kernel = raw.and_then(|v| v.kernel.as_ref()).map(|k| {
            let p = PathBuf::from(k.get_ref());
            if self.host.path.is_some() && !p.is_file() {
                self.err(&k.span(), &format!("{path}.kernel"), Problem::BadValue(format!("{:?} is not a file on this machine; give a guest kernel image, or leave `kernel` out for partita's", k.get_ref())));
            }
            p
        });
        let initramfs = raw.and_then(|v| v.initramfs.as_ref()).map(|i| {
            let p = PathBuf::from(i.get_ref());
            if self.host.path.is_some() {
                if let Err(why) = initramfs_problem(&p) {
                    self.err(&i.span(), &format!("{path}.initramfs"), Problem::BadValue(format!("{:?} {why}; give a newc cpio archive (plain or gzip), or leave `initramfs` out", i.get_ref())));
                }
            }
            p
        });
        let mut append = Vec::new();
        for a in raw.map(|v| v.append.as_slice()).unwrap_or_default() {
            if a.get_ref().contains('\0') || a.get_ref().starts_with("partita.") {
                self.err(&a.span(), &format!("{path}.append"), Problem::BadValue(format!("{:?} cannot be a kernel argument here (NUL bytes and partita.* are not allowed)", a.get_ref())));
            } else {
                append.push(a.get_ref().clone());
            }
        }
        let boot_timeout = match raw.and_then(|v| v.boot_timeout.as_ref()).and_then(|b| self.duration(b, &format!("{path}.boot_timeout")).map(|d| (b, d))) {
            None => DEFAULT_BOOT_TIMEOUT,
            Some((b, d)) if !(Duration::from_millis(1_000)..=MAX_BOOT_TIMEOUT).contains(&d) => {
                self.err(&b.span(), &format!("{path}.boot_timeout"), Problem::BadValue(format!("a boot timeout of {d}: give 1s to {MAX_BOOT_TIMEOUT}")));
                DEFAULT_BOOT_TIMEOUT
            }
            Some((_, d)) => d,
        };
        Some(Vm { memory, vcpus, accel, kernel, initramfs, append, boot_timeout })
    }

    /// A guest's command: not empty, no NUL byte.
    fn guest_command(&mut self, c: &S<Vec<String>>, path: &str) -> Vec<String> {
        let argv = c.get_ref();
        if !matches!(argv.first(), Some(p) if !p.trim().is_empty()) {
            self.err(&c.span(), path, Problem::EmptyCommand);
        } else if let Some(i) = argv.iter().position(|a| a.contains('\0')) {
            self.err(&c.span(), &format!("{path}[{i}]"), Problem::NulByte);
        }
        argv.clone()
    }

    fn scheduling(&mut self, s: Option<&RawScheduling>, path: &str) -> Scheduling {
        let Some(s) = s else { return Scheduling::Normal };
        match s.policy.get_ref().as_str() {
            "normal" => {
                if let Some(p) = &s.priority {
                    self.err(&p.span(), &format!("{path}.priority"), Problem::BadValue("a priority only applies to policy = \"fifo\"; remove it".into()));
                }
                Scheduling::Normal
            }
            "fifo" => match s.priority.as_ref() {
                Some(p) if (1..EXECUTOR_PRIORITY as u64).contains(p.get_ref()) => Scheduling::Fifo { priority: *p.get_ref() as u8 },
                Some(p) => {
                    self.err(&p.span(), &format!("{path}.priority"), Problem::FifoPriority { priority: *p.get_ref(), max: EXECUTOR_PRIORITY - 1 });
                    Scheduling::Normal
                }
                None => {
                    self.err(&s.policy.span(), &format!("{path}.priority"), Problem::FifoPriority { priority: 0, max: EXECUTOR_PRIORITY - 1 });
                    Scheduling::Normal
                }
            },
            other => {
                self.err(&s.policy.span(), &format!("{path}.policy"), Problem::BadValue(format!("unknown scheduling policy {other:?}; use \"normal\" or \"fifo\"")));
                Scheduling::Normal
            }
        }
    }

    /// `time_overrun`: every key has a default; the action follows the partition's `health` unless given.
    fn time_overrun(&mut self, t: Option<&S<RawTimeOverrun>>, path: &str, health: HealthAction) -> TimeOverrun {
        let action = match health {
            HealthAction::Restart { .. } => OverrunAction::Restart,
            HealthAction::Stop => OverrunAction::Stop,
            HealthAction::Ignore => OverrunAction::Ignore,
        };
        let mut policy = TimeOverrun { tolerance: DEFAULT_OVERRUN_TOLERANCE, count: DEFAULT_OVERRUN_COUNT, frames: DEFAULT_OVERRUN_FRAMES, action };
        let Some(t) = t else { return policy };
        let t = t.get_ref();
        if let Some(v) = &t.tolerance {
            match self.duration(v, &format!("{path}.tolerance")) {
                Some(d) if d > MAX_OVERRUN_TOLERANCE => {
                    self.err(&v.span(), &format!("{path}.tolerance"), Problem::BadValue(format!("a tolerance of {d} lets a partition take whole windows of others; give at most {MAX_OVERRUN_TOLERANCE} (tens or hundreds of µs)")));
                }
                Some(d) => policy.tolerance = d,
                None => {}
            }
        }
        if let Some(c) = &t.count {
            if (1..=MAX_OVERRUN_COUNT).contains(c.get_ref()) {
                policy.count = *c.get_ref();
            } else {
                self.err(&c.span(), &format!("{path}.count"), Problem::BadValue(format!("{} overruns: give 1..={MAX_OVERRUN_COUNT}", c.get_ref())));
            }
        }
        if let Some(f) = &t.frames {
            if (1..=MAX_OVERRUN_FRAMES).contains(f.get_ref()) {
                policy.frames = *f.get_ref();
            } else {
                self.err(&f.span(), &format!("{path}.frames"), Problem::BadValue(format!("{} frames: give 1..={MAX_OVERRUN_FRAMES}", f.get_ref())));
            }
        }
        if policy.frames < policy.count {
            let span = t.frames.as_ref().map(|f| f.span()).or(t.count.as_ref().map(|c| c.span())).unwrap_or(0..0);
            let why = format!("{} overruns can never happen within {} frames (at most one per frame); give frames >= count", policy.count, policy.frames);
            self.err(&span, &format!("{path}.frames"), Problem::BadValue(why));
        }
        if let Some(a) = &t.action {
            policy.action = match a.get_ref().as_str() {
                "restart" => OverrunAction::Restart,
                "stop" => OverrunAction::Stop,
                "idle" => OverrunAction::Idle,
                "ignore" => OverrunAction::Ignore,
                other => {
                    let why = format!("unknown action {other:?}; use \"restart\" (killed, then its `health` applies), \"stop\" (killed, kept stopped), \"idle\" (kept frozen) or \"ignore\" (logged only)");
                    self.err(&a.span(), &format!("{path}.action"), Problem::BadValue(why));
                    policy.action
                }
            };
        }
        policy
    }

    /// `disk`: `"unlimited"`, or a table of `read_bps`, `write_bps` (sizes per second) and `read_iops`,
    /// `write_iops` (operations per second), each also `"unlimited"`; keys left out are unlimited.
    fn disk(&mut self, d: &S<toml::Value>, path: &str) -> DiskLimits {
        const FIX: &str = "write \"unlimited\" or a table such as { write_bps = \"32MiB\", write_iops = 1000 } (keys read_bps, write_bps, read_iops, write_iops)";
        let mut limits = DiskLimits::default();
        let table = match d.get_ref() {
            toml::Value::String(w) if w == "unlimited" => return limits,
            toml::Value::Table(t) => t,
            other => {
                self.err(&d.span(), path, Problem::BadValue(format!("{other} is not a disk limit; {FIX}")));
                return DEFAULT_DISK;
            }
        };
        for (key, value) in table {
            let field = format!("{path}.{key}");
            let parsed = match (key.as_str(), value) {
                (_, toml::Value::String(w)) if w == "unlimited" => Ok(None),
                ("read_bps" | "write_bps", toml::Value::String(v)) => v.parse::<ByteSize>().map(|b| Some(b.0)).map_err(|_| format!("{v:?} is not a size per second; write a whole number and a unit such as \"32MiB\", or \"unlimited\"")),
                ("read_iops" | "write_iops", toml::Value::Integer(n)) if *n > 0 => Ok(Some(*n as u64)),
                ("read_bps" | "write_bps" | "read_iops" | "write_iops", v) => Err(format!("{v} is not a limit: give a size per second such as \"32MiB\" for *_bps, a positive number for *_iops, or \"unlimited\"")),
                _ => Err(format!("unknown key {key:?}; {FIX}")),
            };
            match parsed {
                Ok(Some(0)) => self.err(&d.span(), &field, Problem::BadValue("a limit of 0 stops every I/O of the partition; give a positive limit or \"unlimited\"".into())),
                Ok(v) => match key.as_str() {
                    "read_bps" => limits.read_bps = v,
                    "write_bps" => limits.write_bps = v,
                    "read_iops" => limits.read_iops = v,
                    _ => limits.write_iops = v,
                },
                Err(why) => self.err(&d.span(), &field, Problem::BadValue(why)),
            }
        }
        limits
    }

    /// `preemption` and `housekeeping_cpus` of `[system]`. Housekeeping defaults to the online CPUs no plan
    /// uses, when a plan runs and such CPUs exist.
    fn host_tuning(&mut self, raw: &RawSystem, modules: &[Module], host: &Host) -> HostTuning {
        let preemption = match &raw.preemption {
            None => Preemption::Full,
            Some(p) => match p.get_ref().as_str() {
                "full" => Preemption::Full,
                "keep" => Preemption::Keep,
                other => {
                    self.err(&p.span(), "system.preemption", Problem::BadValue(format!("unknown preemption {other:?}; use \"full\" (switched while the system is up, where the kernel allows) or \"keep\"")));
                    Preemption::Full
                }
            },
        };
        let planned: Vec<usize> = modules.iter().flat_map(|m| m.plans.iter().map(|p| p.cpu)).collect();
        let housekeeping_cpus = match &raw.housekeeping_cpus {
            None if planned.is_empty() => Vec::new(),
            None => host.cpus.iter().copied().filter(|c| !planned.contains(c)).collect(),
            Some(list) => {
                let mut cpus = Vec::new();
                for &c in list.get_ref() {
                    let c = c as usize;
                    if !host.cpus.contains(&c) {
                        self.err(&list.span(), "system.housekeeping_cpus", Problem::BadValue(format!("CPU {c} is not online here (online: {}); list CPUs of this machine, or [] to leave the host alone", fmt_cpus(&host.cpus))));
                    } else if planned.contains(&c) {
                        self.err(&list.span(), "system.housekeeping_cpus", Problem::BadValue(format!("CPU {c} runs a plan: the host's interrupts and kernel work would take its partitions' time; list CPUs without a plan, or [] to leave the host alone")));
                    } else if !cpus.contains(&c) {
                        cpus.push(c);
                    }
                }
                cpus
            }
        };
        HostTuning { preemption, housekeeping_cpus }
    }

    fn health(&mut self, h: Option<&RawHealth>, path: &str, default: HealthAction) -> HealthAction {
        let Some(h) = h else { return default };
        match h.action.get_ref().as_str() {
            "restart" => {
                let max_restarts = match h.max_restarts.as_ref() {
                    None => 3,
                    Some(m) if (1..=MAX_RESTARTS).contains(m.get_ref()) => *m.get_ref(),
                    Some(m) => {
                        self.err(&m.span(), &format!("{path}.max_restarts"), Problem::BadValue(format!("{} restarts: give 1..={MAX_RESTARTS}, or action = \"stop\"", m.get_ref())));
                        3
                    }
                };
                let window = match h.window.as_ref().and_then(|w| self.duration(w, &format!("{path}.window")).map(|d| (w, d))) {
                    None => Duration::from_millis(60_000),
                    Some((w, d)) if d < MIN_RESTART_WINDOW => {
                        self.err(&w.span(), &format!("{path}.window"), Problem::BadValue(format!("a window of {d} lets a crash loop restart without end; give at least {MIN_RESTART_WINDOW}")));
                        MIN_RESTART_WINDOW
                    }
                    Some((_, d)) => d,
                };
                let backoff = match h.backoff.as_ref().and_then(|b| self.duration(b, &format!("{path}.backoff")).map(|d| (b, d))) {
                    None => DEFAULT_BACKOFF,
                    Some((b, d)) if !(MIN_BACKOFF..=MAX_BACKOFF).contains(&d) => {
                        self.err(&b.span(), &format!("{path}.backoff"), Problem::BadValue(format!("a back-off of {d}: give {MIN_BACKOFF} to {MAX_BACKOFF}")));
                        DEFAULT_BACKOFF
                    }
                    Some((_, d)) => d,
                };
                HealthAction::Restart { max_restarts, window, backoff }
            }
            a @ ("stop" | "ignore") => {
                if let Some(m) = &h.max_restarts {
                    self.err(&m.span(), &format!("{path}.max_restarts"), Problem::HealthKeyWithoutRestart { key: "max_restarts" });
                }
                if let Some(w) = &h.window {
                    self.err(&w.span(), &format!("{path}.window"), Problem::HealthKeyWithoutRestart { key: "window" });
                }
                if let Some(b) = &h.backoff {
                    self.err(&b.span(), &format!("{path}.backoff"), Problem::HealthKeyWithoutRestart { key: "backoff" });
                }
                if a == "stop" { HealthAction::Stop } else { HealthAction::Ignore }
            }
            other => {
                self.err(&h.action.span(), &format!("{path}.action"), Problem::BadHealthAction(other.into()));
                default
            }
        }
    }

    /// An explicit subnet: parsed, inside the pool, big enough, not overlapping an earlier one.
    fn subnet(&mut self, s: &S<String>, path: &str, owner: &str, taken: &mut Vec<(Subnet, String)>) -> Option<Subnet> {
        let subnet = match s.get_ref().parse::<Subnet>() {
            Ok(v) => v,
            Err(e) => {
                self.err(&s.span(), path, Problem::BadValue(e.to_string()));
                return None;
            }
        };
        if !ADDRESS_POOL.covers(&subnet) {
            self.err(&s.span(), path, Problem::SubnetOutsidePool { subnet: subnet.to_string() });
            return None;
        }
        if subnet.prefix() > 30 {
            self.err(&s.span(), path, Problem::SubnetTooSmall { subnet: subnet.to_string() });
            return None;
        }
        if let Some((o, other)) = taken.iter().find(|(o, _)| o.overlaps(&subnet)) {
            let p = Problem::SubnetOverlap { subnet: subnet.to_string(), other: other.clone(), other_subnet: o.to_string() };
            self.err(&s.span(), path, p);
            return None;
        }
        taken.push((subnet, owner.to_string()));
        Some(subnet)
    }

    /// The first /24 of the pool that overlaps no subnet in use.
    fn free_subnet(&mut self, taken: &mut Vec<(Subnet, String)>, owner: &str) -> Option<Subnet> {
        let base = u32::from(ADDRESS_POOL.base());
        let s = (0..512u32)
            .filter_map(|i| Subnet::new(Ipv4Addr::from(base + (i << 8)), 24))
            .find(|s| !taken.iter().any(|(o, _)| o.overlaps(s)))?;
        taken.push((s, owner.to_string()));
        Some(s)
    }

    fn address(&mut self, a: &S<String>, path: &str, subnet: &Subnet, owner: &str, hosts: &mut BTreeMap<Ipv4Addr, String>) -> Option<Ipv4Addr> {
        let Ok(addr) = a.get_ref().parse::<Ipv4Addr>() else {
            self.err(&a.span(), path, Problem::BadValue(format!("{:?} is not an IPv4 address; write e.g. \"{}\"", a.get_ref(), subnet.host(10).unwrap_or(subnet.base()))));
            return None;
        };
        let last = subnet.host(subnet.host_count());
        if !subnet.contains(addr) || addr == subnet.base() || Some(addr) < subnet.host(1) || Some(addr) > last {
            self.err(&a.span(), path, Problem::AddressOutsideSubnet { address: addr.to_string(), subnet: subnet.to_string() });
            return None;
        }
        if let Some(other) = hosts.get(&addr) {
            let other = other.clone();
            self.err(&a.span(), path, Problem::AddressTaken { address: addr.to_string(), other });
            return None;
        }
        hosts.insert(addr, owner.to_string());
        Some(addr)
    }

    fn next_host(&mut self, subnet: &Subnet, hosts: &mut BTreeMap<Ipv4Addr, String>, owner: &str, span: &Range<usize>, path: &str) -> Option<Ipv4Addr> {
        let n = (1..=subnet.host_count()).filter_map(|n| subnet.host(n)).find(|a| !hosts.contains_key(a));
        match n {
            Some(a) => {
                hosts.insert(a, owner.to_string());
                Some(a)
            }
            None => {
                self.err(span, path, Problem::AddressesExhausted { subnet: subnet.to_string(), what: owner.to_string() });
                None
            }
        }
    }
}

/// Why `path` cannot be a guest's extra initramfs: not an absolute path to a readable file that starts as a newc
/// cpio archive (`070701`) or a gzip stream does.
fn initramfs_problem(path: &Path) -> Result<(), &'static str> {
    use std::io::Read;
    if !path.is_absolute() {
        return Err("is not an absolute path");
    }
    let mut head = [0u8; 6];
    let mut f = std::fs::File::open(path).map_err(|_| "is not a readable file on this machine")?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return Err("is not a file");
    }
    f.read_exact(&mut head).map_err(|_| "is too short to be an archive")?;
    if &head == b"070701" || head.starts_with(&[0x1f, 0x8b]) {
        Ok(())
    } else {
        Err("is neither a newc cpio archive nor gzip")
    }
}
