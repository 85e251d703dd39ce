//! A system built in code, validated as a file is.
//!
//! [`SystemSpec`] mirrors the system file (`docs/configuration.md`) table for table and key for key: each
//! struct here is one table of the file, each field one of its keys, spelled as in the file. It is built with
//! the constructors and chainable setters below (every field is public, for anything unusual), written as TOML
//! with [`SystemSpec::to_toml`] where a file is wanted, and read back with [`SystemSpec::from_toml`]. It is never
//! validated on its own: [`SystemSpec::build`] writes the TOML and hands it to [`crate::parse`], so a spec is
//! accepted or refused exactly as the same file would be, and every error names a line and field of that text.
//!
//! ```
//! use partita_system::spec::*;
//! use partita_system::{ByteSize, Duration, Host};
//! let us = Duration::from_micros;
//! let system = SystemSpec::new("demo")
//!     .module(
//!         ModuleSpec::new("m")
//!             .cpus([0])
//!             .partition(PartitionSpec::new("app", ["sh", "-c", "exec sleep 3600"]).memory(ByteSize::mib(64)).binds(["sleep"]))
//!             .partition(PartitionSpec::new("routing", ["partita", "route"]).io(true))
//!             .plan(PlanSpec::new(0, us(1500)).window("app", us(0), us(700)).window("routing", us(700), us(800))),
//!     )
//!     .node(NodeSpec::new("monitor", ["partita", "app", "monitor"]));
//! let built = system.build(&Host::with_cpus(1), "<demo>").unwrap();
//! assert_eq!(built.modules[0].partitions.len(), 2);
//! ```
//!
//! Durations, sizes and subnets are the model's own types ([`Duration`], [`ByteSize`], [`Subnet`]), written in
//! the file's syntax (`"700us"`, `"64MiB"`, `"198.18.4.0/24"`); the words of the file (`criticality`,
//! `preemption`, `accel`, `mode`, a time overrun's `action`) are the model's enums; a few words that have no
//! model type of their own ([`PartitionKind`], [`ExitAction`], [`SchedulingPolicy`]) are small enums here. The
//! router table (`[module.partition.router]`) is a plain [`toml::Table`], validated by `partita-router-config`
//! as in a file.
//!
//! An optional key is an `Option`: a key the text leaves out reads as `None`, and TOML's writer leaves `None`
//! out (TOML has no null), so the fields need no serde attribute of their own.
use crate::error::{Diagnostic, Errors, Problem};
use crate::load::Host;
use crate::model::{Accel, ByteSize, Criticality, Duration, ErrorKind, HmAction, OverrunAction, Preemption, Subnet, System, UplinkMode};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// Chainable setters of optional keys: `key(value)` sets the key to `Some(value)`.
macro_rules! set_optional {
    ($($(#[$doc:meta])* $key:ident: $t:ty,)*) => {
        $($(#[$doc])* pub fn $key(mut self, value: $t) -> Self {
            self.$key = Some(value);
            self
        })*
    };
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn strings<S: Into<String>>(items: impl IntoIterator<Item = S>) -> Vec<String> {
    items.into_iter().map(Into::into).collect()
}

/// A whole system file: `[system]`, `[network]`, `[[host]]`, `[[peer]]`, `[[module]]` and `[[node]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemSpec {
    pub system: SystemSection,
    pub network: Option<NetworkSpec>,
    /// The system-level health-monitor table (`[health_monitor]`).
    #[serde(default, deserialize_with = "hm_table_spec", skip_serializing_if = "Option::is_none")]
    pub health_monitor: Option<HmTableSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host: Vec<HostSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peer: Vec<PeerSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub module: Vec<ModuleSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node: Vec<NodeSpec>,
}

impl SystemSpec {
    /// A system named `name` with nothing in it yet.
    pub fn new(name: impl Into<String>) -> SystemSpec {
        SystemSpec { system: SystemSection::new(name), network: None, health_monitor: None, host: Vec::new(), peer: Vec::new(), module: Vec::new(), node: Vec::new() }
    }
    set_optional! {
        /// Sets the whole `[health_monitor]` table.
        health_monitor: HmTableSpec,
    }
    /// Sets `kind`'s entry of the system-level `[health_monitor]`.
    pub fn hm_entry(mut self, kind: ErrorKind, entry: HmEntrySpec) -> Self {
        self.health_monitor.get_or_insert_with(HmTableSpec::new).insert(kind.as_str().to_string(), entry);
        self
    }
    /// Adds a `[[module]]`.
    pub fn module(mut self, m: ModuleSpec) -> Self {
        self.module.push(m);
        self
    }
    /// Adds a `[[node]]`.
    pub fn node(mut self, n: NodeSpec) -> Self {
        self.node.push(n);
        self
    }
    set_optional! {
        /// Sets `[network]`.
        network: NetworkSpec,
    }
    /// Adds a `[[host]]` named `name`.
    pub fn host(mut self, name: impl Into<String>) -> Self {
        self.host.push(HostSpec { name: name.into() });
        self
    }
    /// Adds a `[[peer]]`.
    pub fn peer(mut self, name: impl Into<String>, address: Ipv4Addr) -> Self {
        self.peer.push(PeerSpec { name: name.into(), address });
        self
    }
    /// Sets `system.cpu_dma_latency`.
    pub fn cpu_dma_latency(mut self, l: CpuDmaLatency) -> Self {
        self.system.cpu_dma_latency = Some(l);
        self
    }
    /// Sets `system.preemption`.
    pub fn preemption(mut self, p: Preemption) -> Self {
        self.system.preemption = Some(p);
        self
    }
    /// Sets `system.housekeeping_cpus` (empty: leave the host alone).
    pub fn housekeeping_cpus(mut self, cpus: impl IntoIterator<Item = usize>) -> Self {
        self.system.housekeeping_cpus = Some(cpus.into_iter().collect());
        self
    }

    /// The system file this spec stands for.
    ///
    /// # Panics
    /// When a number is beyond TOML's integers (above `i64::MAX`), which no valid system has;
    /// [`SystemSpec::build`] reports that as an error instead.
    pub fn to_toml(&self) -> String {
        self.try_to_toml().unwrap_or_else(|e| panic!("system {:?} cannot be written as TOML: {e}", self.system.name))
    }

    /// [`SystemSpec::to_toml`], or why the spec cannot be written (a number beyond TOML's integers).
    pub fn try_to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }

    /// Reads a system file's text as a spec: its keys, not yet validated (unknown keys and wrong types are
    /// refused, as the loader refuses them).
    pub fn from_toml(text: &str) -> Result<SystemSpec, toml::de::Error> {
        toml::from_str(text)
    }

    /// Validates the spec exactly as the file [`SystemSpec::to_toml`] writes would be ([`crate::parse`] of that
    /// text against `host`): errors name `name_for_errors` and a line and field of that text (write it to a file
    /// of that name to read them).
    pub fn build(&self, host: &Host, name_for_errors: &str) -> Result<System, Errors> {
        match self.try_to_toml() {
            Ok(text) => crate::load::parse(&text, name_for_errors, host),
            Err(e) => Err(Errors(vec![Diagnostic {
                file: name_for_errors.to_string(),
                line: 1,
                column: 1,
                path: "(spec)".into(),
                problem: Problem::BadValue(format!("the spec cannot be written as a system file: {e}; give numbers a system file can hold")),
            }])),
        }
    }
}

/// The `[system]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemSection {
    pub name: String,
    pub cpu_dma_latency: Option<CpuDmaLatency>,
    pub preemption: Option<Preemption>,
    pub housekeeping_cpus: Option<Vec<usize>>,
}

impl SystemSection {
    pub fn new(name: impl Into<String>) -> SystemSection {
        SystemSection { name: name.into(), cpu_dma_latency: None, preemption: None, housekeeping_cpus: None }
    }
}

/// `system.cpu_dma_latency`: `"off"`, or the wake-up latency bound to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuDmaLatency {
    Off,
    Bound(Duration),
}

impl std::str::FromStr for CpuDmaLatency {
    type Err = crate::model::BadDuration;
    /// `"off"` or a duration, as in the file.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "off" {
            Ok(CpuDmaLatency::Off)
        } else {
            s.parse().map(CpuDmaLatency::Bound)
        }
    }
}

impl std::fmt::Display for CpuDmaLatency {
    /// As the file writes it, unquoted: `off` or the bound (`500us`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuDmaLatency::Off => f.write_str("off"),
            CpuDmaLatency::Bound(d) => d.fmt(f),
        }
    }
}

/// The `[network]` table: the inter-module network.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    pub domain: Option<u64>,
    pub subnet: Option<Subnet>,
}

impl NetworkSpec {
    pub fn new() -> NetworkSpec {
        NetworkSpec::default()
    }
    set_optional! {
        domain: u64,
        subnet: Subnet,
    }
}

/// A `[[host]]`: a machine the system spans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub name: String,
}

/// A `[[peer]]`: a DDS program on another machine that partita does not start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerSpec {
    pub name: String,
    pub address: Ipv4Addr,
}

/// A `[[module]]`: a partitioned machine with its partitions, plans and request paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleSpec {
    pub name: String,
    pub host: Option<String>,
    pub cpus: Option<Vec<usize>>,
    pub domain: Option<u64>,
    pub subnet: Option<Subnet>,
    /// The named plan `up` starts with.
    pub default_plan: Option<String>,
    /// The module-level health-monitor table (`[module.health_monitor]`).
    #[serde(default, deserialize_with = "hm_table_spec", skip_serializing_if = "Option::is_none")]
    pub health_monitor: Option<HmTableSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition: Vec<PartitionSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<PlanSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<RequestPathSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channel: Vec<ChannelSpec>,
}

impl ModuleSpec {
    /// A module named `name` with nothing in it yet.
    pub fn new(name: impl Into<String>) -> ModuleSpec {
        ModuleSpec { name: name.into(), host: None, cpus: None, domain: None, subnet: None, default_plan: None, health_monitor: None, partition: Vec::new(), plan: Vec::new(), path: Vec::new(), channel: Vec::new() }
    }
    /// Sets `default_plan`: the named plan `up` starts with.
    pub fn default_plan(mut self, name: impl Into<String>) -> Self {
        self.default_plan = Some(name.into());
        self
    }
    set_optional! {
        /// Sets the whole `[module.health_monitor]` table.
        health_monitor: HmTableSpec,
    }
    /// Sets `kind`'s entry of `[module.health_monitor]`.
    pub fn hm_entry(mut self, kind: ErrorKind, entry: HmEntrySpec) -> Self {
        self.health_monitor.get_or_insert_with(HmTableSpec::new).insert(kind.as_str().to_string(), entry);
        self
    }
    /// Adds a `[[module.partition]]`.
    pub fn partition(mut self, p: PartitionSpec) -> Self {
        self.partition.push(p);
        self
    }
    /// Adds a `[[module.plan]]`.
    pub fn plan(mut self, p: PlanSpec) -> Self {
        self.plan.push(p);
        self
    }
    /// Adds a `[[module.channel]]`.
    pub fn channel(mut self, c: ChannelSpec) -> Self {
        self.channel.push(c);
        self
    }
    /// Adds a `[[module.path]]`: a request's visits to the module's partitions, in order.
    pub fn path<S: Into<String>>(mut self, name: impl Into<String>, through: impl IntoIterator<Item = S>) -> Self {
        self.path.push(RequestPathSpec { name: name.into(), through: strings(through) });
        self
    }
    pub fn cpus(mut self, cpus: impl IntoIterator<Item = usize>) -> Self {
        self.cpus = Some(cpus.into_iter().collect());
        self
    }
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }
    set_optional! {
        domain: u64,
        subnet: Subnet,
    }
}

/// A `[[module.path]]`: a request path through the module's partitions, for the schedule analysis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestPathSpec {
    pub name: String,
    pub through: Vec<String>,
}

/// A `[[module.channel]]`: an ARINC 653 channel between partitions of the module (docs/ports.md). Ends are
/// `"partition"` (the port named after the channel) or `"partition:port"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelSpec {
    pub name: String,
    pub kind: String,
    pub source: String,
    pub destinations: Vec<String>,
    pub max_message: ByteSize,
    pub refresh: Option<Duration>,
    pub depth: Option<u64>,
    /// `"ignore"`, `"restart"` or `"stop"`.
    pub on_fault: Option<String>,
}

impl ChannelSpec {
    /// A sampling channel from `source` to `destinations`, valid for `refresh` after each write.
    pub fn sampling<S: Into<String>>(name: impl Into<String>, source: impl Into<String>, destinations: impl IntoIterator<Item = S>, max_message: ByteSize, refresh: Duration) -> ChannelSpec {
        ChannelSpec { name: name.into(), kind: "sampling".into(), source: source.into(), destinations: strings(destinations), max_message, refresh: Some(refresh), depth: None, on_fault: None }
    }
    /// A queuing channel of `depth` messages from `source` to `destination`.
    pub fn queuing(name: impl Into<String>, source: impl Into<String>, destination: impl Into<String>, max_message: ByteSize, depth: u64) -> ChannelSpec {
        ChannelSpec { name: name.into(), kind: "queuing".into(), source: source.into(), destinations: vec![destination.into()], max_message, refresh: None, depth: Some(depth), on_fault: None }
    }
}

/// A `[[module.partition]]`. Besides the setters, the struct-update form sets any other key:
/// `PartitionSpec { uid: Some(2_000_000_000), ..PartitionSpec::new("p", ["prog"]) }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionSpec {
    pub name: String,
    pub command: Vec<String>,
    pub kind: Option<PartitionKind>,
    pub criticality: Option<Criticality>,
    pub memory: Option<ByteSize>,
    pub pids: Option<u64>,
    pub cpus: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub io: bool,
    /// `Some(false)`: no V-NIC, only ports.
    pub network: Option<bool>,
    pub domain: Option<u64>,
    pub address: Option<Ipv4Addr>,
    pub uid: Option<u64>,
    pub lock_memory: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binds: Vec<String>,
    pub log_size: Option<ByteSize>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    pub health: Option<HealthSpec>,
    pub scheduling: Option<SchedulingSpec>,
    pub seccomp: Option<SeccompSpec>,
    pub time_overrun: Option<TimeOverrunSpec>,
    pub disk: Option<DiskSpec>,
    pub limits: Option<KernelLimitsSpec>,
    pub state: Option<StateSpec>,
    pub vm: Option<VmSpec>,
    pub uplink: Option<UplinkSpec>,
    /// It may request plan switches through its API.
    pub system_partition: Option<bool>,
    /// The partition-level health-monitor table (`[module.partition.health_monitor]`).
    #[serde(default, deserialize_with = "hm_table_spec", skip_serializing_if = "Option::is_none")]
    pub health_monitor: Option<HmTableSpec>,
    /// The routing service's configuration (I/O partition only): the keys of a router file without `[[side]]`.
    pub router: Option<toml::Table>,
}

impl PartitionSpec {
    /// A partition named `name` running `command` (argv), every other key left to its default.
    pub fn new<S: Into<String>>(name: impl Into<String>, command: impl IntoIterator<Item = S>) -> PartitionSpec {
        PartitionSpec {
            name: name.into(),
            command: strings(command),
            kind: None,
            criticality: None,
            memory: None,
            pids: None,
            cpus: None,
            io: false,
            network: None,
            domain: None,
            address: None,
            uid: None,
            lock_memory: None,
            capabilities: Vec::new(),
            binds: Vec::new(),
            log_size: None,
            env: BTreeMap::new(),
            health: None,
            scheduling: None,
            seccomp: None,
            time_overrun: None,
            disk: None,
            limits: None,
            state: None,
            vm: None,
            uplink: None,
            system_partition: None,
            health_monitor: None,
            router: None,
        }
    }
    set_optional! {
        /// `true`: it may request plan switches through its API.
        system_partition: bool,
    }
    set_optional! {
        /// Sets the whole `[module.partition.health_monitor]` table.
        health_monitor: HmTableSpec,
    }
    /// Sets `kind`'s entry of `[module.partition.health_monitor]`.
    pub fn hm_entry(mut self, kind: ErrorKind, entry: HmEntrySpec) -> Self {
        self.health_monitor.get_or_insert_with(HmTableSpec::new).insert(kind.as_str().to_string(), entry);
        self
    }
    set_optional! {
        criticality: Criticality,
        memory: ByteSize,
        pids: u64,
    }
    pub fn cpus(mut self, cpus: impl IntoIterator<Item = usize>) -> Self {
        self.cpus = Some(cpus.into_iter().collect());
        self
    }
    /// Whether it is the module's I/O partition.
    pub fn io(mut self, io: bool) -> Self {
        self.io = io;
        self
    }
    set_optional! {
        domain: u64,
        address: Ipv4Addr,
        /// `false`: no V-NIC, only its ports.
        network: bool,
    }
    /// Adds an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }
    /// Adds to `binds`: absolute paths, or programs found in `PATH`.
    pub fn binds<S: Into<String>>(mut self, binds: impl IntoIterator<Item = S>) -> Self {
        self.binds.extend(strings(binds));
        self
    }
    /// Adds to the capabilities it keeps.
    pub fn capabilities<S: Into<String>>(mut self, caps: impl IntoIterator<Item = S>) -> Self {
        self.capabilities.extend(strings(caps));
        self
    }
    /// Adds to `seccomp.allow`.
    pub fn seccomp_allow<S: Into<String>>(mut self, allow: impl IntoIterator<Item = S>) -> Self {
        self.seccomp.get_or_insert_with(SeccompSpec::default).allow.extend(strings(allow));
        self
    }
    set_optional! {
        log_size: ByteSize,
        health: HealthSpec,
        scheduling: SchedulingSpec,
        time_overrun: TimeOverrunSpec,
        disk: DiskSpec,
        limits: KernelLimitsSpec,
        state: StateSpec,
    }
    /// Makes it a VM partition (`kind = "vm"`) with this guest.
    pub fn vm(mut self, vm: VmSpec) -> Self {
        self.kind = Some(PartitionKind::Vm);
        self.vm = Some(vm);
        self
    }
    set_optional! {
        uplink: UplinkSpec,
        /// Sets the router table (`[module.partition.router]`).
        router: toml::Table,
    }
}

/// A partition's `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PartitionKind {
    Process,
    Vm,
}

/// The `health` table of a partition or node: what the health monitor does when it exits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthSpec {
    pub action: ExitAction,
    pub max_restarts: Option<u32>,
    pub window: Option<Duration>,
    pub backoff: Option<Duration>,
}

impl HealthSpec {
    /// `{ action = "restart" }`; the limits default unless set.
    pub fn restart() -> HealthSpec {
        HealthSpec { action: ExitAction::Restart, max_restarts: None, window: None, backoff: None }
    }
    /// `{ action = "stop" }`.
    pub fn stop() -> HealthSpec {
        HealthSpec { action: ExitAction::Stop, ..HealthSpec::restart() }
    }
    /// `{ action = "ignore" }`.
    pub fn ignore() -> HealthSpec {
        HealthSpec { action: ExitAction::Ignore, ..HealthSpec::restart() }
    }
    set_optional! {
        max_restarts: u32,
        window: Duration,
        backoff: Duration,
    }
}

/// `health.action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExitAction {
    Restart,
    Stop,
    Ignore,
}

/// The `scheduling` table of a partition or node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulingSpec {
    pub policy: SchedulingPolicy,
    pub priority: Option<u64>,
}

impl SchedulingSpec {
    /// `{ policy = "normal" }`.
    pub fn normal() -> SchedulingSpec {
        SchedulingSpec { policy: SchedulingPolicy::Normal, priority: None }
    }
    /// `{ policy = "fifo", priority = priority }`.
    pub fn fifo(priority: u64) -> SchedulingSpec {
        SchedulingSpec { policy: SchedulingPolicy::Fifo, priority: Some(priority) }
    }
}

/// The inline table a system file writes: `{ policy = "fifo", priority = 50 }`.
impl std::fmt::Display for SchedulingSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let table = toml::Value::try_from(self).map_err(|_| std::fmt::Error)?;
        write!(f, "{table}")
    }
}

/// `scheduling.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulingPolicy {
    Normal,
    Fifo,
}

/// A partition's `seccomp` table: entries of the default profile let through.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeccompSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

/// A partition's `time_overrun` table; every key has a default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeOverrunSpec {
    pub tolerance: Option<Duration>,
    pub count: Option<u32>,
    pub frames: Option<u32>,
    pub action: Option<OverrunAction>,
}

impl TimeOverrunSpec {
    pub fn new() -> TimeOverrunSpec {
        TimeOverrunSpec::default()
    }
    set_optional! {
        tolerance: Duration,
        count: u32,
        frames: u32,
        action: OverrunAction,
    }
}

/// A partition's `disk`: `"unlimited"`, or a table of limits (keys left out are unlimited).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskSpec {
    Unlimited,
    Limits(DiskLimitsSpec),
}

/// The table form of `disk`: sizes per second (`*_bps`) and operations per second (`*_iops`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskLimitsSpec {
    pub read_bps: Option<DiskLimit<ByteSize>>,
    pub write_bps: Option<DiskLimit<ByteSize>>,
    pub read_iops: Option<DiskLimit<u64>>,
    pub write_iops: Option<DiskLimit<u64>>,
}

/// One key of a `disk` table: a limit, or `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskLimit<T> {
    Unlimited,
    At(T),
}

const UNLIMITED: &str = "unlimited";

impl Serialize for DiskSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DiskSpec::Unlimited => s.serialize_str(UNLIMITED),
            DiskSpec::Limits(l) => l.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for DiskSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match toml::Value::deserialize(d)? {
            toml::Value::String(w) if w == UNLIMITED => Ok(DiskSpec::Unlimited),
            v @ toml::Value::Table(_) => v.try_into().map(DiskSpec::Limits).map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!("{other} is not a disk limit; write \"unlimited\" or a table of limits"))),
        }
    }
}

impl<T: Serialize> Serialize for DiskLimit<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DiskLimit::Unlimited => s.serialize_str(UNLIMITED),
            DiskLimit::At(v) => v.serialize(s),
        }
    }
}

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for DiskLimit<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match toml::Value::deserialize(d)? {
            toml::Value::String(w) if w == UNLIMITED => Ok(DiskLimit::Unlimited),
            v => v.try_into().map(DiskLimit::At).map_err(serde::de::Error::custom),
        }
    }
}

/// A partition's `limits` table: its limits on the kernel's per-user counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelLimitsSpec {
    pub message_queue_bytes: Option<ByteSize>,
    pub queued_signals: Option<u64>,
}

/// A partition's `state` table: the room of its state directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSpec {
    pub size: Option<ByteSize>,
    pub inodes: Option<u64>,
}

/// A VM partition's `vm` table: the guest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    pub memory: Option<ByteSize>,
    pub vcpus: Option<u64>,
    pub accel: Option<Accel>,
    pub kernel: Option<String>,
    pub initramfs: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub append: Vec<String>,
    pub boot_timeout: Option<Duration>,
}

impl VmSpec {
    /// A guest with every key at its default.
    pub fn new() -> VmSpec {
        VmSpec::default()
    }
    set_optional! {
        memory: ByteSize,
        vcpus: u64,
        accel: Accel,
    }
    pub fn kernel(mut self, path: impl Into<String>) -> Self {
        self.kernel = Some(path.into());
        self
    }
    pub fn initramfs(mut self, path: impl Into<String>) -> Self {
        self.initramfs = Some(path.into());
        self
    }
    /// Adds a kernel command-line argument.
    pub fn append(mut self, arg: impl Into<String>) -> Self {
        self.append.push(arg.into());
        self
    }
    set_optional! {
        boot_timeout: Duration,
    }
}

/// A `[[module.plan]]`: the cyclic plan of one CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSpec {
    /// The named plan this table is the CPU's part of ("default" when absent).
    pub name: Option<String>,
    pub cpu: Option<usize>,
    pub major_frame: Duration,
    pub freeze_ahead: Option<Duration>,
    pub wake_ahead: Option<Duration>,
    pub demote: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window: Vec<WindowSpec>,
}

impl PlanSpec {
    /// A plan of `major_frame` on `cpu`, with no windows yet.
    pub fn new(cpu: usize, major_frame: Duration) -> PlanSpec {
        PlanSpec { name: None, cpu: Some(cpu), major_frame, freeze_ahead: None, wake_ahead: None, demote: None, window: Vec::new() }
    }
    /// Makes it CPU `cpu`'s part of the named plan `name`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Adds a window of `partition` from `start` for `duration` (offsets in the major frame).
    pub fn window(mut self, partition: impl Into<String>, start: Duration, duration: Duration) -> Self {
        self.window.push(WindowSpec { partition: partition.into(), start, duration });
        self
    }
    set_optional! {
        freeze_ahead: Duration,
        wake_ahead: Duration,
        demote: bool,
    }
}

/// A health-monitor table (`[health_monitor]`, `[module.health_monitor]`, `[module.partition.health_monitor]`):
/// error kind (`"exited"`, `"deadline_missed"`, …) → entry. Reading one refuses a key that is not an error kind.
pub type HmTableSpec = BTreeMap<String, HmEntrySpec>;

/// One entry of a health-monitor table: an action word (written alone, `"restart_warm"`, when nothing else is
/// set), the plan of `switch_plan`, and an escalation (`max` occurrences `within` a time, then `then`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HmEntrySpec {
    pub action: String,
    pub plan: Option<String>,
    pub max: Option<u32>,
    pub within: Option<Duration>,
    pub then: Option<String>,
}

impl HmEntrySpec {
    /// The action word `action` (`"ignore"`, `"restart_cold"`, `"restart_warm"`, `"idle"`, `"stop"`,
    /// `"switch_plan"`, `"stop_module"`).
    pub fn new(action: impl Into<String>) -> HmEntrySpec {
        HmEntrySpec { action: action.into(), plan: None, max: None, within: None, then: None }
    }
    /// `{ action = "switch_plan", plan = plan }`.
    pub fn switch_plan(plan: impl Into<String>) -> HmEntrySpec {
        HmEntrySpec::new("switch_plan").plan(plan)
    }
    /// Sets `plan`: the plan of switch_plan (as `action` or `then`).
    pub fn plan(mut self, plan: impl Into<String>) -> Self {
        self.plan = Some(plan.into());
        self
    }
    /// After `max` occurrences within `within`, `then` instead of the action.
    pub fn escalate(mut self, max: u32, within: Duration, then: impl Into<String>) -> Self {
        self.max = Some(max);
        self.within = Some(within);
        self.then = Some(then.into());
        self
    }
    fn is_word(&self) -> bool {
        self.plan.is_none() && self.max.is_none() && self.within.is_none() && self.then.is_none()
    }
}

impl From<&HmAction> for HmEntrySpec {
    /// The entry taking `action` (switch_plan with its plan).
    fn from(action: &HmAction) -> HmEntrySpec {
        match action {
            HmAction::SwitchPlan(p) => HmEntrySpec::switch_plan(p.clone()),
            a => HmEntrySpec::new(a.as_str()),
        }
    }
}

/// The table form of a health-monitor entry, as the file writes it.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HmEntryTable {
    action: String,
    plan: Option<String>,
    max: Option<u32>,
    within: Option<Duration>,
    then: Option<String>,
}

impl Serialize for HmEntrySpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.is_word() {
            return s.serialize_str(&self.action);
        }
        HmEntryTable { action: self.action.clone(), plan: self.plan.clone(), max: self.max, within: self.within, then: self.then.clone() }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for HmEntrySpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match toml::Value::deserialize(d)? {
            toml::Value::String(w) => Ok(HmEntrySpec::new(w)),
            v @ toml::Value::Table(_) => {
                let t: HmEntryTable = v.try_into().map_err(serde::de::Error::custom)?;
                Ok(HmEntrySpec { action: t.action, plan: t.plan, max: t.max, within: t.within, then: t.then })
            }
            other => Err(serde::de::Error::custom(format!("{other} is not a health-monitor entry; write an action word or a table {{ action, max, within, then, plan }}"))),
        }
    }
}

/// Reads a health-monitor table, refusing a key that is not an error kind (as the loader does).
fn hm_table_spec<'de, D: Deserializer<'de>>(d: D) -> Result<Option<HmTableSpec>, D::Error> {
    let raw = BTreeMap::<String, toml::Value>::deserialize(d)?;
    let mut table = HmTableSpec::new();
    for (k, v) in raw {
        k.parse::<ErrorKind>().map_err(serde::de::Error::custom)?;
        let entry = HmEntrySpec::deserialize(v).map_err(|e| serde::de::Error::custom(format!("{k}: {e}")))?;
        table.insert(k, entry);
    }
    Ok(Some(table))
}

/// A `[[module.plan.window]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    pub partition: String,
    pub start: Duration,
    pub duration: Duration,
}

/// A `[[node]]`: a native process on the inter-module network, never frozen by a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub name: String,
    pub command: Vec<String>,
    pub host: Option<String>,
    pub memory: Option<ByteSize>,
    pub pids: Option<u64>,
    pub cpus: Option<Vec<usize>>,
    pub domain: Option<u64>,
    pub address: Option<Ipv4Addr>,
    pub log_size: Option<ByteSize>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    pub health: Option<HealthSpec>,
    pub scheduling: Option<SchedulingSpec>,
    pub uplink: Option<UplinkSpec>,
}

impl NodeSpec {
    /// A node named `name` running `command` (argv), every other key left to its default.
    pub fn new<S: Into<String>>(name: impl Into<String>, command: impl IntoIterator<Item = S>) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            command: strings(command),
            host: None,
            memory: None,
            pids: None,
            cpus: None,
            domain: None,
            address: None,
            log_size: None,
            env: BTreeMap::new(),
            health: None,
            scheduling: None,
            uplink: None,
        }
    }
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }
    set_optional! {
        memory: ByteSize,
        pids: u64,
    }
    pub fn cpus(mut self, cpus: impl IntoIterator<Item = usize>) -> Self {
        self.cpus = Some(cpus.into_iter().collect());
        self
    }
    set_optional! {
        domain: u64,
        address: Ipv4Addr,
        log_size: ByteSize,
    }
    /// Adds an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }
    set_optional! {
        health: HealthSpec,
        scheduling: SchedulingSpec,
        uplink: UplinkSpec,
    }
}

/// An `uplink` table of an I/O partition or a node: a host interface it owns (docs/deployment.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UplinkSpec {
    pub interface: String,
    pub mode: UplinkMode,
    /// `"a.b.c.d/prefix"`: the address with its prefix on the machines' network.
    pub address: String,
    pub gateway: Option<Ipv4Addr>,
    pub mtu: Option<u64>,
    pub domain: Option<u64>,
    pub multicast: Option<bool>,
    pub allow_host_connection_loss: Option<bool>,
    pub security: Option<SecuritySpec>,
}

impl UplinkSpec {
    /// The host interface `interface`, handed over by `mode`, at `address` (`"a.b.c.d/prefix"`).
    pub fn new(interface: impl Into<String>, mode: UplinkMode, address: impl Into<String>) -> UplinkSpec {
        UplinkSpec { interface: interface.into(), mode, address: address.into(), gateway: None, mtu: None, domain: None, multicast: None, allow_host_connection_loss: None, security: None }
    }
    set_optional! {
        gateway: Ipv4Addr,
        mtu: u64,
        domain: u64,
        multicast: bool,
        allow_host_connection_loss: bool,
        security: SecuritySpec,
    }
}

/// An uplink's `security` table: the DDS Security files (absolute paths).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecuritySpec {
    pub ca: String,
    pub certificate: String,
    pub private_key: String,
    pub permissions_ca: Option<String>,
    pub governance: String,
    pub permissions: String,
}

// How the model's values are written in a system file: durations, sizes and subnets as their text
// (`Display`, read back by `FromStr`), the words as the file spells them.

macro_rules! as_text {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
            }
        }
    )*};
}
as_text!(Duration, ByteSize, Subnet, CpuDmaLatency);

macro_rules! as_word {
    ($t:ident { $($v:ident => $w:literal),* $(,)? }) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(match self { $($t::$v => $w),* })
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let w = String::deserialize(d)?;
                match w.as_str() {
                    $($w => Ok($t::$v),)*
                    _ => Err(serde::de::Error::unknown_variant(&w, &[$($w),*])),
                }
            }
        }
    };
}
as_word!(Criticality { High => "high", Medium => "medium", Low => "low" });
as_word!(Preemption { Full => "full", Keep => "keep" });
as_word!(Accel { Auto => "auto", Kvm => "kvm", Tcg => "tcg" });
as_word!(UplinkMode { Move => "move", Macvlan => "macvlan", Ipvlan => "ipvlan" });
as_word!(OverrunAction { Restart => "restart", Stop => "stop", Idle => "idle", Ignore => "ignore" });
