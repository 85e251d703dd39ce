//! The validated system model. Every value here has passed validation: names are unique, windows fit their
//! frames, addresses lie in 198.18.0.0/15, domain ids are in range.
use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// A span of time with nanosecond resolution, written in TOML with a unit: `500ns`, `800us`, `1.5ms`, `2s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(u64);

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const fn from_nanos(ns: u64) -> Duration {
        Duration(ns)
    }
    pub const fn from_micros(us: u64) -> Duration {
        Duration(us * 1_000)
    }
    pub const fn from_millis(ms: u64) -> Duration {
        Duration(ms * 1_000_000)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// In microseconds, as a float (tables and reports use µs).
    pub fn as_micros_f64(self) -> f64 {
        self.0 as f64 / 1_000.0
    }
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
    pub fn checked_add(self, other: Duration) -> Option<Duration> {
        self.0.checked_add(other.0).map(Duration)
    }
    pub fn saturating_sub(self, other: Duration) -> Duration {
        Duration(self.0.saturating_sub(other.0))
    }
}

impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> Self {
        d.to_std()
    }
}

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a duration; write a number and a unit: `500ns`, `800us`, `1.5ms`, `2s`")]
pub struct BadDuration(pub String);

impl FromStr for Duration {
    type Err = BadDuration;
    fn from_str(s: &str) -> Result<Duration, BadDuration> {
        let bad = || BadDuration(s.to_string());
        let t = s.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        let (num, unit) = t.split_at(split);
        let scale: u64 = match unit.trim() {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            _ => return Err(bad()),
        };
        if num.is_empty() || num.starts_with('.') || num.ends_with('.') || num.matches('.').count() > 1 {
            return Err(bad());
        }
        // Exact decimal arithmetic: `1.5ms` must be exactly 1,500,000 ns, not a float rounding of it.
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        let int: u64 = int.parse().map_err(|_| bad())?;
        let mut ns = int.checked_mul(scale).ok_or_else(bad)?;
        let mut place = scale;
        for d in frac.bytes() {
            place /= 10;
            let digit = (d - b'0') as u64;
            if place == 0 {
                if digit != 0 {
                    return Err(bad()); // finer than a nanosecond
                }
                continue;
            }
            ns = ns.checked_add(digit * place).ok_or_else(bad)?;
        }
        Ok(Duration(ns))
    }
}

impl fmt::Display for Duration {
    /// The largest unit that shows the value exactly (`1500us`, `2s`, `1ms`, `7ns`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n == 0 {
            return write!(f, "0us");
        }
        for (scale, unit) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
            if n % scale == 0 {
                return write!(f, "{}{unit}", n / scale);
            }
        }
        write!(f, "{n}ns")
    }
}

/// A DDS domain id, 0..=232 (the range the DDS/RTPS port mapping allows with the default port parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DomainId(u32);

impl DomainId {
    pub const MAX: u32 = 232;
    /// `None` when out of range.
    pub fn new(id: u32) -> Option<DomainId> {
        (id <= Self::MAX).then_some(DomainId(id))
    }
    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for DomainId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The only address range partita uses on its own bridges: 198.18.0.0/15 (RFC 2544, benchmarking).
pub const ADDRESS_POOL: Subnet = Subnet { base: Ipv4Addr::new(198, 18, 0, 0), prefix: 15 };

/// An IPv4 subnet `base/prefix` (base has no host bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Subnet {
    base: Ipv4Addr,
    prefix: u8,
}

/// Why a subnet string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a subnet; write `a.b.c.d/prefix` with no host bits, for example `198.18.4.0/24`")]
pub struct BadSubnet(pub String);

impl Subnet {
    /// `None` if `prefix > 32` or `base` has host bits set.
    pub fn new(base: Ipv4Addr, prefix: u8) -> Option<Subnet> {
        if prefix > 32 {
            return None;
        }
        let s = Subnet { base, prefix };
        (u32::from(base) & !s.mask() == 0).then_some(s)
    }
    fn mask(&self) -> u32 {
        if self.prefix == 0 { 0 } else { u32::MAX << (32 - self.prefix) }
    }
    pub fn base(&self) -> Ipv4Addr {
        self.base
    }
    pub fn prefix(&self) -> u8 {
        self.prefix
    }
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        u32::from(a) & self.mask() == u32::from(self.base)
    }
    /// Whether `other` lies entirely inside `self`.
    pub fn covers(&self, other: &Subnet) -> bool {
        other.prefix >= self.prefix && self.contains(other.base)
    }
    pub fn overlaps(&self, other: &Subnet) -> bool {
        self.covers(other) || other.covers(self)
    }
    /// Usable host addresses (network and broadcast excluded).
    pub fn host_count(&self) -> u64 {
        (1u64 << (32 - self.prefix as u32)).saturating_sub(2)
    }
    /// The `n`-th usable host address (1-based), if the subnet has that many.
    pub fn host(&self, n: u64) -> Option<Ipv4Addr> {
        (n >= 1 && n <= self.host_count()).then(|| Ipv4Addr::from(u32::from(self.base) + n as u32))
    }
}

impl FromStr for Subnet {
    type Err = BadSubnet;
    fn from_str(s: &str) -> Result<Subnet, BadSubnet> {
        let bad = || BadSubnet(s.to_string());
        let (a, p) = s.trim().split_once('/').ok_or_else(bad)?;
        let base: Ipv4Addr = a.parse().map_err(|_| bad())?;
        let prefix: u8 = p.parse().map_err(|_| bad())?;
        Subnet::new(base, prefix).ok_or_else(bad)
    }
}

impl fmt::Display for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix)
    }
}

/// How much a partition's failure matters. Three levels, from the avionics DAL A..E scale folded into the
/// three that change partita's behaviour: `high` (DAL A/B: the system is not up without it), `medium`
/// (DAL C), `low` (DAL D/E: best effort). Informative for now; the supervisor and reports show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Criticality {
    High,
    Medium,
    Low,
}

impl fmt::Display for Criticality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Criticality::High => "high",
            Criticality::Medium => "medium",
            Criticality::Low => "low",
        })
    }
}

/// What the health monitor does when a partition's process tree exits or dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthAction {
    /// Cold-start it again, at most `max_restarts` times within any `window`; beyond that, stop it. The first
    /// restart waits `backoff`, each further one within the window twice as long as the one before.
    Restart { max_restarts: u32, window: Duration, backoff: Duration },
    /// Leave it stopped.
    Stop,
    /// Log the event only.
    Ignore,
}

/// A quantity of memory in bytes, written `"64MiB"`, `"512KiB"`, `"1GiB"` or a plain number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// `n` KiB.
    pub const fn kib(n: u64) -> ByteSize {
        ByteSize(n << 10)
    }
    /// `n` MiB.
    pub const fn mib(n: u64) -> ByteSize {
        ByteSize(n << 20)
    }
    /// `n` GiB.
    pub const fn gib(n: u64) -> ByteSize {
        ByteSize(n << 30)
    }
}

/// Why a memory size string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a memory size; write a whole number and a unit: `64MiB`, `512KiB`, `1GiB`")]
pub struct BadByteSize(pub String);

impl FromStr for ByteSize {
    type Err = BadByteSize;
    fn from_str(s: &str) -> Result<ByteSize, BadByteSize> {
        let bad = || BadByteSize(s.to_string());
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num.parse().map_err(|_| bad())?;
        let scale: u64 = match unit.trim() {
            "" | "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            _ => return Err(bad()),
        };
        n.checked_mul(scale).map(ByteSize).ok_or_else(bad)
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (scale, unit) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
            if self.0 >= scale && self.0 % scale == 0 {
                return write!(f, "{}{unit}", self.0 / scale);
            }
        }
        write!(f, "{}B", self.0)
    }
}

/// The scheduling class of a partition's or node's processes, granted by the system file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheduling {
    /// SCHED_OTHER, the default.
    #[default]
    Normal,
    /// SCHED_FIFO at `priority`, below the plan executor's.
    Fifo { priority: u8 },
}

impl fmt::Display for Scheduling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scheduling::Normal => f.write_str("normal"),
            Scheduling::Fifo { priority } => write!(f, "SCHED_FIFO {priority}"),
        }
    }
}

/// The SCHED_FIFO priority of the plan executors; partitions get at most one less.
pub const EXECUTOR_PRIORITY: u8 = 90;

/// A whole system: modules (partitioned machines), native nodes, and the network between them.
///
/// Everything the supervisor builds on the host is computed here, once, during validation: every network's
/// bridge, every partition's and node's namespace, cgroup, V-NICs (names on both ends, addresses, domains) and
/// CPUs. `partita check` prints these values and `partita up` creates exactly them.
#[derive(Debug, Clone, PartialEq)]
pub struct System {
    /// `[A-Za-z0-9_-]`, at most 24 characters; used in cgroup and namespace names.
    pub name: String,
    /// The file it was read from (`<built-in>` for the default).
    pub source: String,
    pub modules: Vec<Module>,
    pub nodes: Vec<NativeNode>,
    /// The inter-module network, reached only by I/O partitions and native nodes.
    pub network: Network,
    /// The CPU wake-up latency bound (`/dev/cpu_dma_latency`) the supervisor holds while the system runs;
    /// `None`: the machine's idle states are left alone.
    pub cpu_dma_latency: Option<Duration>,
    /// What the supervisor sets on the host while the system is up, so that kernel work stays off the plans'
    /// CPUs and the window's owner can take the CPU back from kernel code (`[system] preemption`,
    /// `housekeeping_cpus`).
    pub host: HostTuning,
    /// The machines a system spanning several hosts is placed on (`[[host]]`); empty: one machine.
    pub hosts: Vec<String>,
    /// The host this is the part of (`partita up --host NAME`): only that host's modules and nodes are in it,
    /// and its `name` is `<system>.<host>`, so that two parts on one machine do not collide. `None`: the whole
    /// system.
    pub part: Option<String>,
    /// DDS programs on other machines that partita does not start, reached over the uplinks (`[[peer]]`).
    pub peers: Vec<Peer>,
    /// The system-level health-monitor table (the top-level `[health_monitor]`).
    pub health_monitor: HmTable,
}

/// A DDS program on another machine that partita does not start (`[[peer]]`): a unicast discovery peer of every
/// uplink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    pub address: Ipv4Addr,
}

/// How a host interface is handed to an I/O partition or native node as its uplink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UplinkMode {
    /// The device itself moves into the partition's network namespace (a NIC passed through); it is given
    /// back, with its name, addresses, MTU and link state, when the system goes.
    Move,
    /// A macvlan child of the device (bridge mode): the host keeps the device.
    Macvlan,
    /// An ipvlan child of the device (L2 mode): the host keeps the device; one MAC address on the wire.
    Ipvlan,
}

impl fmt::Display for UplinkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UplinkMode::Move => "move",
            UplinkMode::Macvlan => "macvlan",
            UplinkMode::Ipvlan => "ipvlan",
        })
    }
}

/// The interface an uplink has inside its partition's namespace.
pub const UPLINK_NIC: &str = "uplink0";

/// A host interface given to an I/O partition or a native node: its way off the machine
/// (`[module.partition.uplink]`, `[node.uplink]`; docs/deployment.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uplink {
    /// The host interface (in the supervisor's network namespace).
    pub interface: String,
    pub mode: UplinkMode,
    /// Its address inside the namespace, in any subnet the operator names.
    pub address: Ipv4Addr,
    pub prefix: u8,
    pub gateway: Option<Ipv4Addr>,
    pub mtu: Option<u32>,
    /// The DDS domain carried on it (the system's uplink domain unless set): a side of its own in the I/O
    /// partition's router, `uplink`.
    pub domain: DomainId,
    /// Unicast discovery peers: every other uplink of the system file (on every host) and every `[[peer]]`.
    pub peers: Vec<Ipv4Addr>,
    /// DDS discovery by multicast on this interface too (off unless the file allows it).
    pub multicast: bool,
    /// The file accepts that the host may lose its own connection (the interface carries the host's default
    /// route or its only address): `allow_host_connection_loss = true`.
    pub allow_host_connection_loss: bool,
    /// DDS Security on the uplink's domain (`[..uplink.security]`); `None`: plain DDS.
    pub security: Option<UplinkSecurity>,
}

/// The files of DDS Security's built-in plugins for one uplink: authentication with an X.509 identity, access
/// control by signed governance and permissions documents, encryption as the governance says. Absolute paths on
/// the machine the part comes up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UplinkSecurity {
    /// The CA that signed the identities this member accepts (its peers').
    pub ca: std::path::PathBuf,
    /// This member's identity certificate and its private key.
    pub certificate: std::path::PathBuf,
    pub private_key: std::path::PathBuf,
    /// The CA that signed the governance and permissions documents (the identity CA unless set).
    pub permissions_ca: std::path::PathBuf,
    pub governance: std::path::PathBuf,
    pub permissions: std::path::PathBuf,
}

impl UplinkSecurity {
    /// Every file with its key in the table, in a fixed order.
    pub fn files(&self) -> [(&'static str, &std::path::Path); 6] {
        [
            ("ca", &self.ca),
            ("certificate", &self.certificate),
            ("private_key", &self.private_key),
            ("permissions_ca", &self.permissions_ca),
            ("governance", &self.governance),
            ("permissions", &self.permissions),
        ]
    }
}

impl Uplink {
    pub fn subnet(&self) -> Subnet {
        let mask = if self.prefix == 0 { 0 } else { u32::MAX << (32 - self.prefix) };
        Subnet::new(Ipv4Addr::from(u32::from(self.address) & mask), self.prefix).expect("a masked base has no host bits")
    }
}

/// Host settings held while a system is up and given back when it goes (docs/security.md, "Time
/// partitioning and kernel work").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostTuning {
    pub preemption: Preemption,
    /// The CPUs that take the host's interrupts, its unbound kernel work (workqueues, writeback) and the
    /// V-NICs' receive processing while the system is up; empty: the host is left as it is.
    pub housekeeping_cpus: Vec<usize>,
}

/// The kernel's preemption model while a system is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Preemption {
    /// Switch a kernel built with dynamic preemption to full preemption (kernel code yields to a higher
    /// priority at once, not at its next scheduling point), where the kernel lets it be switched at run time.
    #[default]
    Full,
    /// Leave the kernel's model as it is.
    Keep,
}

/// What the plan's executor does when a partition keeps running past the end of its window (ARINC 653's
/// time-overrun error), beside demoting it (docs/security.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeOverrun {
    /// CPU time a partition may use past its window's end (its threads stopping) before it counts as an
    /// overrun.
    pub tolerance: Duration,
    /// The action is taken at the `count`-th overrun within `frames` major frames.
    pub count: u32,
    pub frames: u32,
    pub action: OverrunAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverrunAction {
    /// Kill its processes; the health monitor then applies the partition's `health` action to the exit.
    Restart,
    /// Kill its processes and keep it stopped.
    Stop,
    /// Keep it frozen from then on: its windows stay empty.
    Idle,
    /// Log the overruns only.
    Ignore,
}

impl fmt::Display for OverrunAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OverrunAction::Restart => "restart",
            OverrunAction::Stop => "stop",
            OverrunAction::Idle => "idle",
            OverrunAction::Ignore => "ignore",
        })
    }
}

/// Block I/O limits of a partition's cgroup on the disk that holds its state directory (`disk`); `None`:
/// unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskLimits {
    pub read_bps: Option<u64>,
    pub write_bps: Option<u64>,
    pub read_iops: Option<u64>,
    pub write_iops: Option<u64>,
}

impl DiskLimits {
    pub fn is_unlimited(&self) -> bool {
        *self == DiskLimits::default()
    }
}

/// A virtual network: one Linux bridge, one DDS domain, one subnet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    pub domain: DomainId,
    pub subnet: Subnet,
    /// The Linux bridge in the host's namespace (`pt<tag>x`, `pt<tag>m<module>`).
    pub bridge: String,
}

/// Which network of a system: the inter-module one, or the V-NETWORK of module number `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NetworkId {
    InterModule,
    Module(usize),
}

/// A V-NIC: a veth pair with one end inside a partition's (or node's) network namespace and the other end on
/// its network's bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    /// The interface inside the namespace: `vnic0` on the module's V-NETWORK, `vnic1` on the inter-module
    /// network.
    pub name: String,
    /// The end in the host's namespace, on the network's bridge.
    pub host_name: String,
    pub network: NetworkId,
    pub address: Ipv4Addr,
    /// The DDS domain the partition's generated DDS configuration binds to this interface.
    pub domain: DomainId,
}

/// A process tree the supervisor starts and confines: its program, its limits, and the host objects it lives
/// in. Partitions and native nodes both have one.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessTree {
    /// argv; never empty, no NUL byte.
    pub command: Vec<String>,
    /// Extra environment variables (names non-empty, without `=` or NUL).
    pub env: BTreeMap<String, String>,
    /// Memory limit of its cgroup; `None` = no limit.
    pub memory: Option<ByteSize>,
    /// Maximum number of processes and threads (`pids.max`); `None` = no limit.
    pub pids_max: Option<u64>,
    /// The CPUs it runs on (its cgroup's cpuset); empty = any CPU of the machine.
    pub cpus: Vec<usize>,
    pub health: HealthAction,
    /// The scheduling class the supervisor starts it in; it cannot raise it itself.
    pub scheduling: Scheduling,
    /// Named network namespace (`partita-<system>-<name>`).
    pub netns: String,
    /// cgroup path below each hierarchy's root (`partita/<system>/<name>`).
    pub cgroup: String,
    /// Its V-NICs, the module's V-NETWORK first.
    pub nics: Vec<Nic>,
    /// How a partition is confined on the host (its own user, capabilities, system calls, a read-only view of
    /// the host with private writable directories); `None` for a native node, which stands for another machine
    /// and is confined only by its namespaces and cgroup.
    pub confinement: Option<crate::Confinement>,
    /// Block I/O limits on the disk that holds its state directory.
    pub disk: DiskLimits,
    /// A host interface it owns (I/O partitions and native nodes only).
    pub uplink: Option<Uplink>,
    /// The size its output log rotates at (`log_size`): the log and its older part take at most twice this.
    pub log_size: u64,
}

/// A partition's or node's output log without `log_size`.
pub const DEFAULT_LOG_SIZE: u64 = 16 << 20;
/// The smallest `log_size` accepted.
pub const LOG_SIZE_FLOOR: u64 = 64 << 10;

/// A core module (a machine) with its partitions, plans and V-NETWORK.
#[derive(Debug, Clone, PartialEq)]
pub struct Module {
    pub name: String,
    /// The module's CPUs; partitions share them. One plan per CPU; a module without plans (a native machine)
    /// may list CPUs its partitions are pinned to, or none.
    pub cpus: Vec<usize>,
    /// The module's internal V-NETWORK.
    pub network: Network,
    pub partitions: Vec<Partition>,
    /// The default plan (the one `up` starts with): one Plan per CPU in `cpus`, in CPU order; none for a native
    /// machine, whose partitions run freely.
    pub plans: Vec<Plan>,
    /// Its name (`name` of its [[module.plan]] tables; "default" when unnamed).
    pub plan_name: String,
    /// The module's other named plans, in file order; each has one Plan per CPU of `plans`, in the same order.
    pub other_plans: Vec<PlanSet>,
    /// The module-level health-monitor table (`[module.health_monitor]`).
    pub health_monitor: HmTable,
    /// Request paths through the module's partitions (`[[module.path]]`), for the schedule analysis.
    pub paths: Vec<RequestPath>,
    /// The host it runs on (`host`), in a system spanning several.
    pub host: Option<String>,
    /// ARINC 653 channels between its partitions (`[[module.channel]]`).
    pub channels: Vec<Channel>,
}

/// A named plan of a module other than its default one: one Plan per CPU, in the order of the module's `plans`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSet {
    pub name: String,
    pub plans: Vec<Plan>,
}

/// An ARINC 653 channel between partitions of one module: one source port, one destination (queuing) or
/// one or more (sampling), on memory the supervisor creates before the partitions start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    pub name: String,
    pub kind: ChannelKind,
    /// The longest message, in bytes.
    pub max_message: u32,
    pub source: PortRef,
    pub destinations: Vec<PortRef>,
    /// What the health monitor does to a partition that reports a fault of its own at this channel's port.
    pub on_fault: FaultAction,
}

/// The health monitor's answer to a port fault (`on_fault`): every fault is logged as an event either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    Ignore,
    Restart,
    Stop,
}

impl FaultAction {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultAction::Ignore => "ignore",
            FaultAction::Restart => "restart",
            FaultAction::Stop => "stop",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// The latest message, valid for `refresh` after it was written.
    Sampling { refresh: Duration },
    /// A FIFO of at most `depth` messages.
    Queuing { depth: u32 },
}

impl ChannelKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            ChannelKind::Sampling { .. } => "sampling",
            ChannelKind::Queuing { .. } => "queuing",
        }
    }
}

/// One end of a channel: a partition and the name its port has there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PortRef {
    pub partition: String,
    pub port: String,
}

impl fmt::Display for PortRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.partition, self.port)
    }
}

impl Module {
    /// The ports of partition `name`: each channel it is an end of, the port, and whether it is the source.
    pub fn ports_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = (&'a Channel, &'a PortRef, bool)> + 'a {
        self.channels.iter().flat_map(move |c| {
            std::iter::once((&c.source, true)).chain(c.destinations.iter().map(|d| (d, false))).filter(move |(p, _)| p.partition == name).map(move |(p, src)| (c, p, src))
        })
    }
}

/// A request's visits to the module's partitions, in order (`[[module.path]]`): what `partita check` and
/// `partita plan optimise` predict response times for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPath {
    pub name: String,
    pub through: Vec<String>,
}

/// A partition: an isolated process tree that runs only inside its windows.
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    pub name: String,
    pub criticality: Criticality,
    /// The module's I/O partition: it also has a V-NIC on the inter-module network.
    pub io: bool,
    /// Whether it has a V-NIC (`network`, default true). Without one its network namespace holds only the
    /// loopback interface: it talks to the other partitions through its ARINC 653 ports alone.
    pub network: bool,
    /// DDS domain its applications use by default (the module's domain unless set).
    pub domain: DomainId,
    /// Its V-NIC address on the module's V-NETWORK.
    pub address: Ipv4Addr,
    /// Its address on the inter-module network (I/O partitions only).
    pub external_address: Option<Ipv4Addr>,
    /// The routing service's table (`[module.partition.router]`, validated; I/O partition only). Its sides are
    /// placeholders: [`System::router_config`] gives the whole configuration the supervisor writes.
    pub router: Option<partita_router_config::RouterConfig>,
    /// Index into the module's `plans` of the one plan that has its windows; `None` in a native machine.
    pub plan: Option<usize>,
    /// A virtual-machine partition: its command runs in a QEMU guest, whose QEMU process is the partition's
    /// process tree on the host (`kind = "vm"`); `None` for a process partition.
    pub vm: Option<Vm>,
    /// What its plan's executor does when it runs past its windows (`time_overrun`).
    pub time_overrun: TimeOverrun,
    pub tree: ProcessTree,
    /// It may request plan switches through its API (`system_partition`; only in a module with plans).
    pub system_partition: bool,
    /// The partition-level health-monitor table (`[module.partition.health_monitor]`).
    pub health_monitor: HmTable,
}

/// How a virtual-machine partition's guest is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vm {
    /// The guest's memory (the partition's cgroup holds it and QEMU's own).
    pub memory: ByteSize,
    pub vcpus: u32,
    pub accel: Accel,
    /// The guest kernel; `None`: the one partita's setup fetched (Debian's cloud kernel).
    pub kernel: Option<std::path::PathBuf>,
    /// An archive of the user's (newc cpio, plain or gzip) unpacked over partita's guest image, before the
    /// partition's own per-launch archive: files the guest command needs that partita does not put there.
    pub initramfs: Option<std::path::PathBuf>,
    /// Extra kernel command-line arguments.
    pub append: Vec<String>,
    /// The longest a guest may take to start its command; beyond, it is stopped and the health monitor acts.
    pub boot_timeout: Duration,
}

/// How a guest's CPU is provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM when a probe shows a stock guest runs under it here, else TCG.
    Auto,
    /// Hardware virtualization (KVM).
    Kvm,
    /// QEMU's emulation: timings are emulation, not virtualization.
    Tcg,
}

impl fmt::Display for Accel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Accel::Auto => "auto",
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        })
    }
}

/// A word that is not an acceleration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an acceleration: write \"auto\", \"kvm\" or \"tcg\"")]
pub struct BadAccel(pub String);

impl FromStr for Accel {
    type Err = BadAccel;
    fn from_str(s: &str) -> Result<Accel, BadAccel> {
        match s {
            "auto" => Ok(Accel::Auto),
            "kvm" => Ok(Accel::Kvm),
            "tcg" => Ok(Accel::Tcg),
            other => Err(BadAccel(other.to_string())),
        }
    }
}

/// A non-partitioned node: a process tree on the inter-module network, not frozen by any plan.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeNode {
    pub name: String,
    /// Its address on the inter-module network.
    pub address: Ipv4Addr,
    /// DDS domain (the inter-module network's unless set).
    pub domain: DomainId,
    pub tree: ProcessTree,
    /// The host it runs on (`host`), in a system spanning several.
    pub host: Option<String>,
}

/// The repeating cycle of time windows of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MajorFrame(pub Duration);

/// The cyclic schedule of one CPU of a module.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub cpu: usize,
    pub major_frame: MajorFrame,
    /// Sorted by start, non-overlapping, all inside the major frame.
    pub windows: Vec<Window>,
    /// A partition whose window another partition's window follows directly is frozen this long before its
    /// window ends, so that its threads stop in its own time (`freeze_ahead`; zero: at the boundary).
    pub freeze_ahead: Duration,
    /// The plan's executor wakes this long before a window start that follows time no partition runs in and
    /// waits for the start on the clock, so that the window starts on time, not a timer's wake-up latency late
    /// (`wake_ahead`; zero: it sleeps until the start).
    pub wake_ahead: Duration,
    /// A partition still running when its window has ended runs as an idle task (its cgroup's `cpu.idle`)
    /// until its next window, so that it only gets CPU time the window's owner leaves (`demote`).
    pub demote: bool,
}

/// A time window in which one partition runs, as offsets from the start of the major frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub partition: String,
    pub start: Duration,
    pub duration: Duration,
}

impl Window {
    pub fn end(&self) -> Duration {
        Duration(self.start.0 + self.duration.0)
    }
}

impl Module {
    pub fn partition(&self, name: &str) -> Option<&Partition> {
        self.partitions.iter().find(|p| p.name == name)
    }
    /// The module's I/O partition, if it has one.
    pub fn io_partition(&self) -> Option<&Partition> {
        self.partitions.iter().find(|p| p.io)
    }
    pub fn plan_for_cpu(&self, cpu: usize) -> Option<&Plan> {
        self.plans.iter().find(|p| p.cpu == cpu)
    }
    /// Every named plan, the default first: (name, per-CPU plans). Empty for a native machine.
    pub fn plan_sets(&self) -> Vec<(&str, &[Plan])> {
        if self.plans.is_empty() {
            return Vec::new();
        }
        std::iter::once((self.plan_name.as_str(), self.plans.as_slice())).chain(self.other_plans.iter().map(|s| (s.name.as_str(), s.plans.as_slice()))).collect()
    }
    /// Index in [`Module::plan_sets`] of the plan named `name`.
    pub fn plan_index(&self, name: &str) -> Option<usize> {
        self.plan_sets().iter().position(|(n, _)| *n == name)
    }
}

impl System {
    pub fn module(&self, name: &str) -> Option<&Module> {
        self.modules.iter().find(|m| m.name == name)
    }
    pub fn node(&self, name: &str) -> Option<&NativeNode> {
        self.nodes.iter().find(|n| n.name == name)
    }
    pub fn node_mut(&mut self, name: &str) -> Option<&mut NativeNode> {
        self.nodes.iter_mut().find(|n| n.name == name)
    }
    /// Every partition with its module.
    pub fn partitions(&self) -> impl Iterator<Item = (&Module, &Partition)> {
        self.modules.iter().flat_map(|m| m.partitions.iter().map(move |p| (m, p)))
    }
    /// Every process tree the supervisor starts, partitions (in module order) then native nodes, with its name.
    pub fn trees(&self) -> impl Iterator<Item = (&str, &ProcessTree)> {
        self.partitions()
            .map(|(_, p)| (p.name.as_str(), &p.tree))
            .chain(self.nodes.iter().map(|n| (n.name.as_str(), &n.tree)))
    }
    /// Every process tree, mutably (to point `partita` commands at an installed binary, say).
    pub fn trees_mut(&mut self) -> impl Iterator<Item = &mut ProcessTree> {
        self.modules
            .iter_mut()
            .flat_map(|m| m.partitions.iter_mut().map(|p| &mut p.tree))
            .chain(self.nodes.iter_mut().map(|n| &mut n.tree))
    }
    pub fn network(&self, id: NetworkId) -> Option<&Network> {
        match id {
            NetworkId::InterModule => Some(&self.network),
            NetworkId::Module(m) => self.modules.get(m).map(|m| &m.network),
        }
    }
    /// The networks that have at least one member, the inter-module network first.
    pub fn networks(&self) -> Vec<(NetworkId, &Network)> {
        let used: std::collections::BTreeSet<NetworkId> =
            self.trees().flat_map(|(_, t)| t.nics.iter().map(|n| n.network)).collect();
        used.into_iter().filter_map(|id| self.network(id).map(|n| (id, n))).collect()
    }
    /// Addresses of every member of a network (the unicast discovery peers of its DDS domain).
    pub fn addresses_on(&self, id: NetworkId) -> Vec<Ipv4Addr> {
        self.trees().flat_map(|(_, t)| t.nics.iter()).filter(|n| n.network == id).map(|n| n.address).collect()
    }
    /// The whole configuration of I/O partition `p`'s routing service: its `[module.partition.router]` (or, without
    /// one, every topic both ways) with a side per V-NIC, `module` and `network`, and `uplink` when it owns one,
    /// each on its interface with the unicast peers of its DDS domain, as the partition's generated DDS
    /// configuration has them. `None` for a partition that is not an I/O partition.
    pub fn router_config(&self, p: &Partition) -> Option<partita_router_config::RouterConfig> {
        use partita_router_config::{RouterConfig, SideConfig, EMBEDDED_SIDES, UPLINK_SIDE};
        if !p.io {
            return None;
        }
        let text = |a: &[Ipv4Addr]| a.iter().map(Ipv4Addr::to_string).collect::<Vec<_>>();
        let mut sides: Vec<SideConfig> = p
            .tree
            .nics
            .iter()
            .map(|n| SideConfig {
                name: match n.network {
                    NetworkId::Module(_) => EMBEDDED_SIDES[0],
                    NetworkId::InterModule => EMBEDDED_SIDES[1],
                }
                .into(),
                domain: n.domain.get(),
                interface: n.name.clone(),
                peers: text(&self.addresses_on(n.network)),
                multicast: false,
            })
            .collect();
        if let Some(u) = &p.tree.uplink {
            sides.push(SideConfig { name: UPLINK_SIDE.into(), domain: u.domain.get(), interface: UPLINK_NIC.into(), peers: text(&u.peers), multicast: u.multicast });
        }
        Some(RouterConfig::for_io_partition(p.router.as_ref(), &p.name, sides))
    }
    /// The part of this system that runs on `host` (`partita up --host NAME`): its modules and nodes, named
    /// `<system>.<host>`. The uplinks keep the peers computed from the whole file.
    pub fn part(&self, host: &str) -> Result<System, String> {
        if self.part.is_some() {
            return Err(format!("{} is already the part of host {host}", self.name));
        }
        if !self.hosts.iter().any(|h| h == host) {
            return Err(if self.hosts.is_empty() {
                format!("{} declares no [[host]]: it runs on one machine; leave --host out", self.source)
            } else {
                format!("{} has no host {host:?}; its hosts are {}", self.source, self.hosts.join(", "))
            });
        }
        let mut part = self.clone();
        part.modules.retain(|m| m.host.as_deref() == Some(host));
        part.nodes.retain(|n| n.host.as_deref() == Some(host));
        part.name = format!("{}.{host}", self.name);
        part.part = Some(host.to_string());
        crate::names::place(&mut part);
        Ok(part)
    }

    /// Every uplink with the name of the partition or node that owns it.
    pub fn uplinks(&self) -> impl Iterator<Item = (&str, &Uplink)> {
        self.trees().filter_map(|(n, t)| t.uplink.as_ref().map(|u| (n, u)))
    }

    /// Every object `partita up` creates on the host for this system, by name.
    pub fn host_objects(&self) -> HostObjects {
        let mut o = HostObjects::default();
        for (_, n) in self.networks() {
            o.bridges.push(n.bridge.clone());
        }
        for (_, t) in self.trees() {
            o.namespaces.push(t.netns.clone());
            o.cgroups.push(t.cgroup.clone());
            o.veths.extend(t.nics.iter().map(|n| n.host_name.clone()));
        }
        // A VM partition's V-NICs are taps, not veths.
        for (_, p) in self.partitions().filter(|(_, p)| p.vm.is_some()) {
            o.veths.retain(|v| !p.tree.nics.iter().any(|n| &n.host_name == v));
            o.taps.extend(p.tree.nics.iter().map(|n| n.host_name.clone()));
        }
        o
    }
}

/// What `partita up` creates on the host, by name (the host ends of veth pairs; their other ends live in the
/// namespaces).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostObjects {
    pub bridges: Vec<String>,
    pub veths: Vec<String>,
    /// VM partitions' V-NICs (taps on the bridges).
    #[serde(default)]
    pub taps: Vec<String>,
    pub namespaces: Vec<String>,
    /// Relative to each cgroup hierarchy's root.
    pub cgroups: Vec<String>,
}

impl Module {
    /// A module without plans: a native machine whose partitions run freely.
    pub fn is_native(&self) -> bool {
        self.plans.is_empty()
    }
}

/// An error the health monitor handles: ARINC 653's error codes 0..=7 in ARINC order, then partita's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorKind {
    DeadlineMissed = 0,
    ApplicationError = 1,
    NumericError = 2,
    IllegalRequest = 3,
    StackOverflow = 4,
    MemoryViolation = 5,
    HardwareFault = 6,
    PowerFail = 7,
    SeccompDenial = 8,
    Oom = 9,
    PidsLimit = 10,
    MissedWindow = 11,
    RanOutsideWindow = 12,
    Exited = 13,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 14] = [
        ErrorKind::DeadlineMissed,
        ErrorKind::ApplicationError,
        ErrorKind::NumericError,
        ErrorKind::IllegalRequest,
        ErrorKind::StackOverflow,
        ErrorKind::MemoryViolation,
        ErrorKind::HardwareFault,
        ErrorKind::PowerFail,
        ErrorKind::SeccompDenial,
        ErrorKind::Oom,
        ErrorKind::PidsLimit,
        ErrorKind::MissedWindow,
        ErrorKind::RanOutsideWindow,
        ErrorKind::Exited,
    ];
    /// The word a health-monitor table writes.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::DeadlineMissed => "deadline_missed",
            ErrorKind::ApplicationError => "application_error",
            ErrorKind::NumericError => "numeric_error",
            ErrorKind::IllegalRequest => "illegal_request",
            ErrorKind::StackOverflow => "stack_overflow",
            ErrorKind::MemoryViolation => "memory_violation",
            ErrorKind::HardwareFault => "hardware_fault",
            ErrorKind::PowerFail => "power_fail",
            ErrorKind::SeccompDenial => "seccomp_denial",
            ErrorKind::Oom => "oom",
            ErrorKind::PidsLimit => "pids_limit",
            ErrorKind::MissedWindow => "missed_window",
            ErrorKind::RanOutsideWindow => "ran_outside_window",
            ErrorKind::Exited => "exited",
        }
    }
    /// The code (the discriminant; ARINC 653's for 0..=7).
    pub fn code(self) -> u8 {
        self as u8
    }
    pub fn from_code(c: u64) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| u64::from(k.code()) == c)
    }
    /// The kinds a partition may raise itself through its API: deadline_missed, application_error,
    /// numeric_error, stack_overflow.
    pub fn raisable(self) -> bool {
        matches!(self, ErrorKind::DeadlineMissed | ErrorKind::ApplicationError | ErrorKind::NumericError | ErrorKind::StackOverflow)
    }
    /// Whether the kind is the end of the partition's process (numeric_error: when a SIGFPE ended it), so that
    /// with no table naming it the partition's `health` action applies.
    pub fn ends_process(self, at_exit: bool) -> bool {
        match self {
            ErrorKind::Exited | ErrorKind::MemoryViolation | ErrorKind::HardwareFault | ErrorKind::SeccompDenial | ErrorKind::Oom => true,
            ErrorKind::NumericError => at_exit,
            _ => false,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that is not an error kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an error kind; use one of {kinds}", kinds = ErrorKind::words())]
pub struct BadErrorKind(pub String);

impl ErrorKind {
    /// Every kind's word, comma-separated (for messages).
    pub fn words() -> String {
        ErrorKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
    }
}

impl FromStr for ErrorKind {
    type Err = BadErrorKind;
    fn from_str(s: &str) -> Result<ErrorKind, BadErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| BadErrorKind(s.to_string()))
    }
}

/// The level of a health-monitor table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HmLevel {
    System,
    Module,
    Partition,
}

impl HmLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            HmLevel::System => "system",
            HmLevel::Module => "module",
            HmLevel::Partition => "partition",
        }
    }
    /// The table's heading in a system file.
    pub fn table(self) -> &'static str {
        match self {
            HmLevel::System => "[health_monitor]",
            HmLevel::Module => "[module.health_monitor]",
            HmLevel::Partition => "[module.partition.health_monitor]",
        }
    }
}

impl fmt::Display for HmLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the health monitor does about an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HmAction {
    /// Log it only.
    Ignore,
    /// Restart the partition (at module level: every partition of the module) from scratch.
    RestartCold,
    /// Restart it keeping its state directory (a warm start).
    RestartWarm,
    /// Keep the partition frozen: its windows stay empty.
    Idle,
    /// Stop the partition and keep it stopped.
    Stop,
    /// Switch the module to the named plan at the next major-frame boundary.
    SwitchPlan(String),
    /// Stop the module (at system level: every module, the system stops).
    StopModule,
}

impl HmAction {
    /// Every action word, in the order of the enum.
    pub const WORDS: [&'static str; 7] = ["ignore", "restart_cold", "restart_warm", "idle", "stop", "switch_plan", "stop_module"];
    pub fn as_str(&self) -> &'static str {
        match self {
            HmAction::Ignore => "ignore",
            HmAction::RestartCold => "restart_cold",
            HmAction::RestartWarm => "restart_warm",
            HmAction::Idle => "idle",
            HmAction::Stop => "stop",
            HmAction::SwitchPlan(_) => "switch_plan",
            HmAction::StopModule => "stop_module",
        }
    }
    /// partition: ignore, restart_cold, restart_warm, idle, stop, switch_plan
    /// module:    ignore, restart_cold, restart_warm (every partition of the module), switch_plan, stop_module
    /// system:    ignore, stop_module (every module: the system stops)
    pub fn allowed_at(&self, level: HmLevel) -> bool {
        match level {
            HmLevel::Partition => !matches!(self, HmAction::StopModule),
            HmLevel::Module => !matches!(self, HmAction::Idle | HmAction::Stop),
            HmLevel::System => matches!(self, HmAction::Ignore | HmAction::StopModule),
        }
    }
}

impl fmt::Display for HmAction {
    /// The word; `switch_plan` with its plan (`switch_plan degraded`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HmAction::SwitchPlan(p) => write!(f, "switch_plan {p}"),
            a => f.write_str(a.as_str()),
        }
    }
}

/// One entry of a health-monitor table: the action, and what it escalates to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HmEntry {
    pub action: HmAction,
    pub escalate: Option<HmEscalation>,
}

impl HmEntry {
    /// An entry without escalation.
    pub fn new(action: HmAction) -> HmEntry {
        HmEntry { action, escalate: None }
    }
}

impl fmt::Display for HmEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.action)?;
        if let Some(e) = &self.escalate {
            write!(f, ", then {} after {} within {}", e.then, e.max, e.within)?;
        }
        Ok(())
    }
}

/// After `max` occurrences within `within` (the (max+1)-th and later), `then` instead of `action`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HmEscalation {
    pub max: u32,
    pub within: Duration,
    pub then: HmAction,
}

/// A health-monitor table: what to do for each error kind it names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HmTable {
    pub entries: BTreeMap<ErrorKind, HmEntry>,
}

impl HmTable {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn get(&self, kind: ErrorKind) -> Option<&HmEntry> {
        self.entries.get(&kind)
    }
}

/// What the health monitor does about one error kind of one partition, and where that comes from
/// ([`System::hm_resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HmResolution {
    /// The entry of the table at `level` that names the kind (the partition's, else its module's, else the
    /// system's).
    Table { level: HmLevel, entry: HmEntry },
    /// No table names it and it ended the partition's process: the partition's `health` action.
    Health(HealthAction),
    /// No table names it: the default, taken at `level` (power_fail: stop_module at system level; any other
    /// kind: ignore, logged).
    Default { level: HmLevel, action: HmAction },
}

impl System {
    /// The health monitor's answer to `kind` raised for `partition` of `module`: the partition's table, then
    /// its module's, then the system's, then the defaults. `at_exit`: the error is the end of its process (a
    /// numeric_error from SIGFPE), not raised through its API.
    pub fn hm_resolve(&self, module: &Module, partition: &Partition, kind: ErrorKind, at_exit: bool) -> HmResolution {
        self.resolve(module, Some(partition), kind, at_exit)
    }

    /// The same for an error of `module` as a whole (power_fail): its table, then the system's, then the
    /// defaults (power_fail: stop_module at system level; any other kind: ignore at module level).
    pub fn hm_resolve_module(&self, module: &Module, kind: ErrorKind) -> HmResolution {
        self.resolve(module, None, kind, false)
    }

    fn resolve(&self, module: &Module, partition: Option<&Partition>, kind: ErrorKind, at_exit: bool) -> HmResolution {
        let own = partition.map(|p| (HmLevel::Partition, &p.health_monitor));
        for (level, table) in own.into_iter().chain([(HmLevel::Module, &module.health_monitor), (HmLevel::System, &self.health_monitor)]) {
            if let Some(entry) = table.get(kind) {
                return HmResolution::Table { level, entry: entry.clone() };
            }
        }
        match partition {
            Some(p) if kind.ends_process(at_exit) => HmResolution::Health(p.tree.health),
            _ if kind == ErrorKind::PowerFail => HmResolution::Default { level: HmLevel::System, action: HmAction::StopModule },
            Some(_) => HmResolution::Default { level: HmLevel::Partition, action: HmAction::Ignore },
            None => HmResolution::Default { level: HmLevel::Module, action: HmAction::Ignore },
        }
    }
}
