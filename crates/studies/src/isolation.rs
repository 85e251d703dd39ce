//! `partita bench isolation`: issue 31's fault suite. How much of its planned time a busy partition keeps when
//! the partition before it in the plan makes the kernel work (large writes, fsync, O_DIRECT, mlock, huge
//! pages, calls over many memory areas, many timers, a packet flood at the victim, fork storms, many threads:
//! `partita app fault`, crates/apps/src/fault.rs), against the same system with that partition asleep.
//!
//! Every cell is a system of its own on CPU 0: three process partitions `victim`, `faulty` and `bystander`,
//! 1 ms windows each in that order in a 3 ms major frame. Victim and bystander spin; the faulty partition runs
//! the fault, or `sleep` in the quiet cells. With the VM table the faulty partition is a QEMU guest running the
//! same program with its own copy of partita, for the faults that mean something in a guest
//! ([`Kind::in_guest`]). Each cell waits for the fault program's ready line (a guest's boot), settles, then
//! measures for `seconds`:
//!
//! - **share**: a partition's CPU time over the span (its cgroup's), divided by its planned time in the span,
//!   a third of it;
//! - **lateness**: how late the executor woke for each window start in the span (its log's starts, exact);
//! - **health events** of the span, counted by name and partition, and the time from the first `time_overrun`
//!   to the next `contained` event of the cell, when the supervisor reports such events.
//!
//! Quiet and fault cells alternate (quiet, fault, quiet, fault …) for each fault, under each protection setting:
//! `landed`, the supervisor as the issue found it, and `protected`, with the system-file keys of its
//! protections ([`protection_keys`]). Each row compares a fault cell with the quiet cells of the same fault and
//! setting (medians over `--repeat` runs).
use partita_apps::fault::{self, Kind};
use partita_lab::machine::{Disturbance, Watch, HOST_NOTE};
use partita_lab::run::RunError;
use partita_supervisor::cgroup::PartitionCgroup;
use partita_supervisor::health::{Event, EventLog};
use partita_supervisor::supervisor::{stop_requested, Supervisor, UpOptions};
use partita_system::spec::{DiskSpec, HealthSpec, ModuleSpec, PartitionSpec, PlanSpec, SystemSpec, TimeOverrunSpec, VmSpec};
use partita_system::{ByteSize, OverrunAction, Preemption, System};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The supervisor's protections, off or on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protection {
    /// The behaviour before the protections.
    Landed,
    Protected,
}

impl Protection {
    pub const ALL: [Protection; 2] = [Protection::Landed, Protection::Protected];

    pub fn key(self) -> &'static str {
        match self {
            Protection::Landed => "landed",
            Protection::Protected => "protected",
        }
    }
}

/// Where the faulty partition runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    Process,
    Vm,
}

/// The keys a protection setting sets in a cell's system: in `[system]`, in each `[[module.plan]]` and in each
/// `[[module.partition]]`; unset keys keep the system file's defaults. The report prints them as TOML.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProtectionKeys {
    pub preemption: Option<Preemption>,
    pub housekeeping_cpus: Option<Vec<usize>>,
    pub demote: Option<bool>,
    pub time_overrun: Option<TimeOverrunSpec>,
    pub disk: Option<DiskSpec>,
    pub seccomp_allow: Vec<String>,
}

impl ProtectionKeys {
    fn system(&self, mut s: SystemSpec) -> SystemSpec {
        if let Some(p) = self.preemption {
            s = s.preemption(p);
        }
        if let Some(c) = &self.housekeeping_cpus {
            s = s.housekeeping_cpus(c.iter().copied());
        }
        s
    }

    fn plan(&self, p: PlanSpec) -> PlanSpec {
        match self.demote {
            Some(d) => p.demote(d),
            None => p,
        }
    }

    fn partition(&self, mut p: PartitionSpec) -> PartitionSpec {
        if let Some(t) = &self.time_overrun {
            p = p.time_overrun(t.clone());
        }
        if let Some(d) = &self.disk {
            p = p.disk(d.clone());
        }
        if !self.seccomp_allow.is_empty() {
            p = p.seccomp_allow(self.seccomp_allow.iter().cloned());
        }
        p
    }

    /// The keys per table, as the system file writes them: what applying them to an empty table sets.
    fn toml(&self) -> [(&'static str, Vec<String>); 3] {
        fn key(name: &str, v: &impl Serialize) -> Option<String> {
            Some(format!("{name} = {}", toml::Value::try_from(v).ok()?))
        }
        let s = self.system(SystemSpec::new("-")).system;
        let plan = self.plan(PlanSpec::new(0, partita_system::Duration::from_micros(1)));
        let part = self.partition(PartitionSpec::new("-", ["-"]));
        [
            ("[system]", [s.preemption.and_then(|v| key("preemption", &v)), s.housekeeping_cpus.and_then(|v| key("housekeeping_cpus", &v))].into_iter().flatten().collect()),
            ("[[module.plan]]", plan.demote.and_then(|v| key("demote", &v)).into_iter().collect()),
            (
                "[[module.partition]]",
                [part.time_overrun.and_then(|v| key("time_overrun", &v)), part.disk.and_then(|v| key("disk", &v)), part.seccomp.and_then(|v| key("seccomp", &v))].into_iter().flatten().collect(),
            ),
        ]
    }
}

/// "landed": every protection against kernel work off (the behaviour before them: kernel preemption and the
/// host's interrupts and kernel work left alone, no demotion, overruns only logged, no disk limit);
/// "protected": the defaults of a system file (docs/configuration.md), the faulty partition's overrun action
/// following its `health` (stop).
pub fn protection_keys(p: Protection) -> ProtectionKeys {
    match p {
        Protection::Landed => ProtectionKeys {
            preemption: Some(Preemption::Keep),
            housekeeping_cpus: Some(Vec::new()),
            demote: Some(false),
            time_overrun: Some(TimeOverrunSpec::new().action(OverrunAction::Ignore)),
            disk: Some(DiskSpec::Unlimited),
            seccomp_allow: vec!["sync".into(), "syncfs".into()],
        },
        Protection::Protected => ProtectionKeys::default(),
    }
}

/// The health events of the supervisor's protections (`EVENT_TIME_OVERRUN` and `EVENT_CONTAINED`, in the
/// supervisor's work in progress), matched by name so that the bench reads them whether or not this build has them.
pub const TIME_OVERRUN: &str = "time_overrun";
pub const CONTAINED: &str = "contained";

/// The plan's partitions in window order, and their window.
pub const PARTITIONS: [&str; 3] = ["victim", "faulty", "bystander"];
pub const WINDOW_US: u64 = 1000;
/// Where `udp-flood` sends on the victim's V-NIC (nothing listens: the victim answers with ICMP).
pub const FLOOD_PORT: u16 = 9999;
/// The faulty process partition's limits: room for 64 MiB regions, 24 MiB writes and 240 threads.
const FAULTY_MEMORY: ByteSize = ByteSize::mib(256);
const FAULTY_PIDS: u64 = 1024;
/// The faulty guest's memory (its partition's cgroup gets QEMU's 256 MiB more, docs/configuration.md).
const GUEST_MEMORY: ByteSize = ByteSize::mib(320);
const GUEST_BOOT_TIMEOUT_S: u64 = 120;

#[derive(Debug, Clone)]
pub struct IsolationConfig {
    pub exe: String,
    pub out: PathBuf,
    pub state_root: PathBuf,
    pub faults: Vec<Kind>,
    /// Measured span of each cell.
    pub span: Duration,
    /// Between the fault program's ready line and the span.
    pub settle: Duration,
    /// The process table; false with `--only-vm`.
    pub process: bool,
    pub vm: bool,
    pub accel: String,
    pub accel_reason: String,
    pub repeat: u32,
}

/// One cell to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CellSpec {
    pub placement: Placement,
    pub protection: Protection,
    pub fault: Kind,
    /// The faulty partition sleeps instead.
    pub quiet: bool,
    pub run: u32,
}

impl CellSpec {
    pub fn program(&self) -> Kind {
        if self.quiet { Kind::Sleep } else { self.fault }
    }
}

/// The cells in the order they run: per run, per placement and setting, each fault's quiet cell and then its
/// fault cell.
pub fn plan_cells(cfg: &IsolationConfig) -> Vec<CellSpec> {
    let mut out = Vec::new();
    for run in 1..=cfg.repeat {
        for placement in [Placement::Process, Placement::Vm].into_iter().filter(|p| if *p == Placement::Process { cfg.process } else { cfg.vm }) {
            for protection in Protection::ALL {
                for &fault in cfg.faults.iter().filter(|f| placement == Placement::Process || f.in_guest()) {
                    for quiet in [true, false] {
                        out.push(CellSpec { placement, protection, fault, quiet, run });
                    }
                }
            }
        }
    }
    out
}

/// The system of a cell; `target` is the victim's V-NIC address for `udp-flood`.
pub fn cell_spec(cfg: &IsolationConfig, spec: &CellSpec, name: &str, target: Option<SocketAddr>) -> Result<SystemSpec, String> {
    let keys = protection_keys(spec.protection);
    let mut module = ModuleSpec::new("bench").cpus([0]);
    for p in PARTITIONS {
        let program = if p == "faulty" { spec.program() } else { Kind::Spin };
        let mut command: Vec<String> = ["partita", "app", "fault", program.key()].map(String::from).to_vec();
        if let (Kind::UdpFlood, Some(to)) = (program, target) {
            command.extend(["--target".into(), to.to_string()]);
        }
        let mut partition = PartitionSpec::new(p, command).health(HealthSpec::stop());
        if p == "faulty" && spec.placement == Placement::Vm {
            let accel = cfg.accel.parse().map_err(|e| format!("acceleration {:?}: {e}", cfg.accel))?;
            let guest = VmSpec::new().memory(GUEST_MEMORY).vcpus(1).accel(accel).boot_timeout(partita_system::Duration::from_millis(GUEST_BOOT_TIMEOUT_S * 1000));
            partition = partition.vm(guest).pids(FAULTY_PIDS);
        } else if p == "faulty" {
            partition = partition.memory(FAULTY_MEMORY).pids(FAULTY_PIDS);
        }
        module = module.partition(keys.partition(partition));
    }
    let us = partita_system::Duration::from_micros;
    let mut plan = PlanSpec::new(0, us(WINDOW_US * PARTITIONS.len() as u64));
    for (k, p) in PARTITIONS.iter().enumerate() {
        plan = plan.window(*p, us(k as u64 * WINDOW_US), us(WINDOW_US));
    }
    Ok(keys.system(SystemSpec::new(name)).module(module.plan(keys.plan(plan))))
}

/// A cell's validated system: for `udp-flood`, built once to learn the victim's address, then again with it.
pub fn cell_system(cfg: &IsolationConfig, spec: &CellSpec, name: &str, host: &partita_system::Host) -> Result<System, String> {
    let parse = |target| cell_spec(cfg, spec, name, target)?.build(host, &format!("<bench isolation {name}>")).map_err(|e| e.to_string());
    let system = parse(None)?;
    if spec.program() != Kind::UdpFlood {
        return Ok(system);
    }
    let victim = system.partitions().find(|(_, p)| p.name == "victim").map(|(_, p)| p.address).ok_or("the system has no victim")?;
    parse(Some(SocketAddr::new(victim.into(), FLOOD_PORT)))
}

/// Window-start lateness over a span, µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Lateness {
    pub starts: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

use partita_lab::stats::nearest_rank as quantile;

impl Lateness {
    pub fn of(mut ns: Vec<u64>) -> Option<Lateness> {
        ns.sort_unstable();
        let us = |v: Option<u64>| v.map(|v| v as f64 / 1e3);
        Some(Lateness { starts: ns.len(), p50_us: us(quantile(&ns, 0.5))?, p99_us: us(quantile(&ns, 0.99))?, max_us: us(ns.last().copied())? })
    }
}

/// CPU time over planned time: a partition with one window of [`WINDOW_US`] per frame is planned a third of
/// the span.
pub fn share(used: Duration, span: Duration) -> f64 {
    used.as_secs_f64() / (span.as_secs_f64() / PARTITIONS.len() as f64)
}

/// Events of `[t0, t1)` (CLOCK_MONOTONIC ns), counted by `event (partition)`.
pub fn count_events(events: &[Event], t0: u64, t1: u64) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for e in events.iter().filter(|e| (t0..t1).contains(&e.monotonic_ns)) {
        *out.entry(format!("{} ({})", e.event, e.partition)).or_insert(0) += 1;
    }
    out
}

/// From the first `time_overrun` to the first `contained` after it, ms.
pub fn containment_ms(events: &[Event]) -> Option<f64> {
    let overrun = events.iter().find(|e| e.event == TIME_OVERRUN)?.monotonic_ns;
    let contained = events.iter().find(|e| e.event == CONTAINED && e.monotonic_ns >= overrun)?.monotonic_ns;
    Some((contained - overrun) as f64 / 1e6)
}

/// One measured cell.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    #[serde(flatten)]
    pub spec: CellSpec,
    pub program: Kind,
    pub system: String,
    /// From `up` to the fault program's ready line, s (a guest's boot).
    pub ready_s: Option<f64>,
    pub span_s: f64,
    pub victim_share: Option<f64>,
    pub bystander_share: Option<f64>,
    pub faulty_share: Option<f64>,
    pub lateness: Option<Lateness>,
    pub events: BTreeMap<String, u64>,
    pub containment_ms: Option<f64>,
    /// What the host did to the machine during the measured span (steal time, CPU frequency).
    pub disturbance: Option<Disturbance>,
    pub error: Option<String>,
}

/// What the driver thread read: the span and each partition's CPU time at its ends, in [`PARTITIONS`] order.
struct Span {
    ready: Duration,
    t0_ns: u64,
    t1_ns: u64,
    used0: Vec<Duration>,
    used1: Vec<Duration>,
    disturbance: Disturbance,
}

/// Sets the flag when dropped: the system goes down however the driver ends (an error, a panic).
struct StopOnDrop(Arc<AtomicBool>);
impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Sleeps `d` unless a stop comes first; whether it slept it all.
fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop_requested() || stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(20)));
    }
    true
}

fn usages(cgroups: &[Arc<PartitionCgroup>]) -> Result<Vec<Duration>, String> {
    cgroups.iter().map(|c| c.cpu_usage().map_err(|e| e.to_string())).collect()
}

/// What the driver waits for and how long it measures.
struct Drive {
    cgroups: Vec<Arc<PartitionCgroup>>,
    events: EventLog,
    log: PathBuf,
    ready_line: String,
    ready_timeout: Duration,
    settle: Duration,
    span: Duration,
}

/// Why a cell's figures do not stand: a partition that ended before `t1`, unless it is the faulty one and the
/// supervisor contained it (then the span measures what containment left its neighbours).
pub fn ended_early(events: &[Event], t1: u64) -> Option<String> {
    let contained = events.iter().any(|e| e.event == CONTAINED && e.partition == "faulty" && e.monotonic_ns < t1);
    events
        .iter()
        .filter(|e| matches!(e.event, "exit" | "stopped") && e.monotonic_ns < t1)
        .find(|e| !(contained && e.partition == "faulty"))
        .map(|end| {
            // The partition's last event before its end, with what the supervisor said of it (an overrun action).
            let before = events.iter().filter(|e| e.partition == end.partition && e.monotonic_ns <= end.monotonic_ns && !matches!(e.event, "exit" | "stopped")).last();
            let why = before.map(|e| format!(" after {} ({})", e.event, e.detail.as_deref().unwrap_or("-"))).unwrap_or_default();
            // And the overruns that led to it, the last few: how far past its window, and whether it still ran.
            let overruns: Vec<String> = events
                .iter()
                .filter(|e| e.partition == end.partition && e.event == TIME_OVERRUN && e.monotonic_ns <= end.monotonic_ns)
                .filter_map(|e| e.detail.clone())
                .collect();
            let last = overruns.len().saturating_sub(4);
            let overruns = if overruns.is_empty() { String::new() } else { format!("; its last time overruns: {}", overruns[last..].join("; ")) };
            format!("{} ended ({}{}){why}{overruns}", end.partition, end.event, end.exit.map(|x| format!(": {x:?}")).unwrap_or_default())
        })
}

/// The driver: waits for the fault program's ready line in its log, settles, reads the CPU times at both ends
/// of the span, then stops the system.
fn drive(d: Drive, stop: Arc<AtomicBool>) -> Result<Span, String> {
    let _stop = StopOnDrop(stop.clone());
    let t_up = Instant::now();
    while !std::fs::read_to_string(&d.log).is_ok_and(|t| t.contains(&d.ready_line)) {
        if t_up.elapsed() > d.ready_timeout {
            return Err(format!("the faulty partition did not say {:?} within {} s", d.ready_line, d.ready_timeout.as_secs()));
        }
        if let Some(why) = ended_early(&d.events.events(), u64::MAX) {
            return Err(format!("{why} before the fault program was ready"));
        }
        if !sleep_unless_stopped(Duration::from_millis(50), &stop) {
            return Err("stopped before the fault program was ready".into());
        }
    }
    let ready = t_up.elapsed();
    if !sleep_unless_stopped(d.settle, &stop) {
        return Err("stopped while settling".into());
    }
    let watch = Watch::start();
    let (t0_ns, used0) = (partita_os::clock::monotonic_ns(), usages(&d.cgroups)?);
    if !sleep_unless_stopped(d.span, &stop) {
        return Err("stopped while measuring".into());
    }
    let (t1_ns, used1) = (partita_os::clock::monotonic_ns(), usages(&d.cgroups)?);
    Ok(Span { ready, t0_ns, t1_ns, used0, used1, disturbance: watch.stop() })
}

/// The last `n` lines of a file, for an error.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Runs one cell: up, drive, down, always; then removes the cell's state (its logs and the faulty
/// partition's file in its state directory).
pub fn run_cell(cfg: &IsolationConfig, spec: &CellSpec, name: &str) -> Result<Cell, RunError> {
    let sys_err = |m: String| RunError::Supervisor { system: name.to_string(), message: m };
    let system = cell_system(cfg, spec, name, &partita_system::Host::this_machine()).map_err(sys_err)?;
    let options = UpOptions { partita: Some(cfg.exe.clone().into()), ..UpOptions::new(&cfg.state_root) };
    let sup = Supervisor::up(&system, &options).map_err(|e| sys_err(e.to_string()))?;
    let (state, events) = (sup.state_dir().to_path_buf(), sup.events().clone());
    let log = state.join("faulty.log");
    let cgroups = sup.cgroups();
    let stop = Arc::new(AtomicBool::new(false));
    let ready_timeout = Duration::from_secs(if spec.placement == Placement::Vm { GUEST_BOOT_TIMEOUT_S + 30 } else { 60 });
    let driver = {
        let d = Drive { cgroups, events: events.clone(), log: log.clone(), ready_line: fault::ready_line(spec.program()), ready_timeout, settle: cfg.settle, span: cfg.span };
        let stop = stop.clone();
        std::thread::spawn(move || drive(d, stop))
    };
    let logs = sup.run(None, Some(stop));
    let driven = driver.join().unwrap_or_else(|_| Err("the driver thread panicked".into()));
    let log_tail = tail(&log, 8);
    let _ = std::fs::remove_dir_all(&state);
    if let Some(dir) = system.partitions().find(|(_, p)| p.name == "faulty").and_then(|(_, p)| p.tree.confinement.as_ref()).map(|c| c.state_dir.clone()) {
        let _ = std::fs::remove_dir_all(&dir);
        let _ = dir.parent().map(std::fs::remove_dir);
    }
    if stop_requested() {
        return Err(RunError::Interrupted);
    }
    let logs = logs.map_err(|e| sys_err(e.to_string()))?;
    let all_events = events.events();
    let mut cell = Cell { spec: *spec, program: spec.program(), system: name.into(), ready_s: None, span_s: 0.0, victim_share: None, bystander_share: None, faulty_share: None, lateness: None, events: BTreeMap::new(), containment_ms: containment_ms(&all_events), disturbance: None, error: None };
    let s = match driven {
        Ok(s) => s,
        Err(e) => {
            cell.error = Some(format!("{e}; the faulty partition's log ends with:\n{log_tail}"));
            // The whole cell's events, for what ended it.
            cell.events = count_events(&all_events, 0, u64::MAX);
            return Ok(cell);
        }
    };
    let span = Duration::from_nanos(s.t1_ns - s.t0_ns);
    let used = |k: usize| s.used1[k].saturating_sub(s.used0[k]);
    cell.ready_s = Some(s.ready.as_secs_f64());
    cell.span_s = span.as_secs_f64();
    cell.disturbance = Some(s.disturbance);
    (cell.victim_share, cell.faulty_share, cell.bystander_share) = (Some(share(used(0), span)), Some(share(used(1), span)), Some(share(used(2), span)));
    let lateness: Vec<u64> = logs.iter().flat_map(|l| l.starts.iter()).filter(|w| (s.t0_ns..s.t1_ns).contains(&w.planned_ns)).map(|w| w.lateness_ns()).collect();
    cell.lateness = Lateness::of(lateness);
    cell.events = count_events(&all_events, s.t0_ns, s.t1_ns);
    if let Some(why) = ended_early(&all_events, s.t1_ns) {
        cell.error = Some(format!("{why} before the span did; the faulty partition's log ends with:\n{log_tail}"));
    }
    Ok(cell)
}

/// Medians of a figure over runs.
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    (n > 0).then(|| if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// A side of a row (quiet or under fault): medians over its runs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    pub runs: usize,
    pub victim_share: Option<f64>,
    pub bystander_share: Option<f64>,
    pub faulty_share: Option<f64>,
    pub lateness_p50_us: Option<f64>,
    pub lateness_p99_us: Option<f64>,
    pub lateness_max_us: Option<f64>,
    /// Summed over the runs.
    pub events: BTreeMap<String, u64>,
    /// The most the host disturbed any of the runs ([`Disturbance::worst`]).
    pub disturbance: Option<Disturbance>,
}

impl Figures {
    fn of(cells: &[&Cell]) -> Figures {
        let ok: Vec<&&Cell> = cells.iter().filter(|c| c.error.is_none()).collect();
        let med = |f: &dyn Fn(&Cell) -> Option<f64>| median(ok.iter().filter_map(|c| f(c)).collect());
        let mut events = BTreeMap::new();
        for c in &ok {
            for (k, n) in &c.events {
                *events.entry(k.clone()).or_insert(0) += n;
            }
        }
        Figures {
            runs: ok.len(),
            victim_share: med(&|c| c.victim_share),
            bystander_share: med(&|c| c.bystander_share),
            faulty_share: med(&|c| c.faulty_share),
            lateness_p50_us: med(&|c| c.lateness.map(|l| l.p50_us)),
            lateness_p99_us: med(&|c| c.lateness.map(|l| l.p99_us)),
            lateness_max_us: med(&|c| c.lateness.map(|l| l.max_us)),
            events,
            disturbance: Disturbance::worst(&ok.iter().filter_map(|c| c.disturbance).collect::<Vec<_>>()),
        }
    }
}

/// A fault under one setting and placement, against its quiet cells.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub placement: Placement,
    pub protection: Protection,
    pub fault: Kind,
    pub quiet: Figures,
    pub under_fault: Figures,
    /// Victim share under fault / quiet.
    pub share_ratio: Option<f64>,
    /// Lateness p99 under fault / quiet.
    pub p99_ratio: Option<f64>,
    /// Median over the fault cells that report both events.
    pub containment_ms: Option<f64>,
    pub failed: Vec<String>,
}

pub fn rows(cells: &[Cell]) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    for c in cells {
        let s = c.spec;
        if out.iter().any(|r| (r.placement, r.protection, r.fault) == (s.placement, s.protection, s.fault)) {
            continue;
        }
        let same = |quiet: bool| -> Vec<&Cell> { cells.iter().filter(|x| (x.spec.placement, x.spec.protection, x.spec.fault, x.spec.quiet) == (s.placement, s.protection, s.fault, quiet)).collect() };
        let (q, f) = (same(true), same(false));
        let (quiet, under_fault) = (Figures::of(&q), Figures::of(&f));
        let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b.filter(|b| *b > 0.0)?);
        out.push(Row {
            placement: s.placement,
            protection: s.protection,
            fault: s.fault,
            share_ratio: ratio(under_fault.victim_share, quiet.victim_share),
            p99_ratio: ratio(under_fault.lateness_p99_us, quiet.lateness_p99_us),
            containment_ms: median(f.iter().filter_map(|c| c.containment_ms).collect()),
            failed: q.iter().chain(&f).filter_map(|c| Some(format!("{} run {}: {}", c.program.key(), c.spec.run, c.error.as_ref()?))).collect(),
            quiet,
            under_fault,
        });
    }
    out
}

#[derive(Debug, Clone, Serialize)]
pub struct IsolationResults {
    pub machine: String,
    pub accel: String,
    pub accel_reason: String,
    pub seconds: f64,
    pub settle_s: f64,
    pub repeat: u32,
    pub protection_keys: BTreeMap<&'static str, ProtectionKeys>,
    pub rows: Vec<Row>,
    pub cells: Vec<Cell>,
    pub elapsed_s: f64,
}

/// Runs every cell in order; `log` gets a line per cell. A cell that fails is recorded and the run goes on;
/// a stop signal ends the run (the cell's system torn down).
pub fn run(cfg: &IsolationConfig, mut log: impl FnMut(&str)) -> Result<IsolationResults, RunError> {
    let t0 = Instant::now();
    let specs = plan_cells(cfg);
    let mut cells = Vec::new();
    for (k, spec) in specs.iter().enumerate() {
        let name = format!("isolation-{}-{k}", std::process::id() % 100_000);
        let cell = run_cell(cfg, spec, &name)?;
        let figure = match (&cell.error, cell.victim_share, cell.lateness) {
            (Some(e), _, _) => format!("failed: {}", e.lines().next().unwrap_or_default()),
            (None, Some(v), Some(l)) => format!("victim {:.1} %, bystander {:.1} %, lateness p99 {:.1} µs, max {:.1} µs", v * 100.0, cell.bystander_share.unwrap_or(0.0) * 100.0, l.p99_us, l.max_us),
            _ => "no figures".into(),
        };
        log(&format!("[{}/{}] {} {} {}, run {}: {figure}", k + 1, specs.len(), placement_title(cfg, spec.placement), spec.protection.key(), spec.program().key(), spec.run));
        cells.push(cell);
    }
    Ok(IsolationResults {
        machine: partita_lab::machine::describe(),
        accel: cfg.accel.clone(),
        accel_reason: cfg.accel_reason.clone(),
        seconds: cfg.span.as_secs_f64(),
        settle_s: cfg.settle.as_secs_f64(),
        repeat: cfg.repeat,
        protection_keys: Protection::ALL.into_iter().map(|p| (p.key(), protection_keys(p))).collect(),
        rows: rows(&cells),
        cells,
        elapsed_s: t0.elapsed().as_secs_f64(),
    })
}

/// Checks every cell's system against this machine before anything runs.
pub fn check_systems(cfg: &IsolationConfig, host: &partita_system::Host) -> Result<(), String> {
    for spec in plan_cells(cfg).iter().filter(|s| s.run == 1) {
        cell_system(cfg, spec, "isolation-check", host).map_err(|e| format!("{} {} {}: {e}", placement_title(cfg, spec.placement), spec.protection.key(), spec.program().key()))?;
    }
    Ok(())
}

fn placement_title(cfg: &IsolationConfig, p: Placement) -> String {
    match p {
        Placement::Process => "process".into(),
        Placement::Vm => format!("VM ({})", cfg.accel),
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{:.1}", v * 100.0))
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

fn lateness_cell(f: &Figures) -> String {
    format!("{} / {} / {}", num(f.lateness_p50_us, 1), num(f.lateness_p99_us, 1), num(f.lateness_max_us, 1))
}

fn events_cell(e: &BTreeMap<String, u64>) -> String {
    if e.is_empty() { "–".into() } else { e.iter().map(|(k, n)| format!("{k} ×{n}")).collect::<Vec<_>>().join(", ") }
}

fn keys_line(k: &ProtectionKeys) -> String {
    let all: Vec<String> = k.toml().iter().filter(|(_, keys)| !keys.is_empty()).map(|(table, keys)| format!("{table} `{}`", keys.join("; "))).collect();
    if all.is_empty() { "no keys (the supervisor's defaults)".into() } else { all.join(", ") }
}

/// The Markdown report.
pub fn markdown(r: &IsolationResults, command: &str) -> String {
    let mut o = format!(
        "# Time partitioning against a partition's own kernel work (issue 31)\n\n`{command}`\n\n\
         - machine: {}\n\
         - plan on CPU 0: `victim`, `faulty`, `bystander`, {WINDOW_US} µs windows in that order, {} µs major frame; victim and bystander spin (`partita app fault spin`), the faulty partition runs the fault (`partita app fault KIND`, crates/apps/src/fault.rs) or, in the quiet cells, `sleep`; every partition under normal scheduling, the faulty one limited to {FAULTY_MEMORY} and {FAULTY_PIDS} tasks (a VM: {GUEST_MEMORY} of guest memory, 1 vCPU)\n\
         - each cell a system of its own: up, the fault program's ready line (a guest's boot), {:.1} s settle, {:.1} s measured, down; per fault and setting a quiet cell then a fault cell, {} run(s) each, medians\n\
         - share: the partition's CPU time (its cgroup) over the measured span divided by its planned time in it (a third of the span); ratio: victim under fault / quiet\n\
         - lateness: how late the plan executor woke for each window start of the span, µs, p50 / p99 / max; p99 ratio: under fault / quiet\n\
         - health events of the span by name (partition), summed over runs; overrun → contained: from the first `{TIME_OVERRUN}` event of a cell to the next `{CONTAINED}`\n\
         - settings: landed = {}; protected = {}\n",
        r.machine,
        WINDOW_US * PARTITIONS.len() as u64,
        r.settle_s,
        r.seconds,
        r.repeat,
        keys_line(&r.protection_keys["landed"]),
        keys_line(&r.protection_keys["protected"]),
    );
    for placement in [Placement::Process, Placement::Vm] {
        let rows: Vec<&Row> = r.rows.iter().filter(|x| x.placement == placement).collect();
        if rows.is_empty() {
            continue;
        }
        let (title, what) = match placement {
            Placement::Process => ("## The faulty partition as a process partition".to_string(), "process".to_string()),
            Placement::Vm => (format!("## The faulty partition as a VM partition ({}: {})", r.accel, r.accel_reason), format!("VM ({})", r.accel)),
        };
        let _ = write!(
            o,
            "\n{title}\n\n| faulty partition | fault | setting | victim quiet % | victim under fault % | ratio | bystander quiet % | bystander under fault % | lateness quiet µs | lateness under fault µs | p99 ratio | health events quiet | health events under fault | overrun → contained ms | host |\n\
             |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---|\n"
        );
        for x in &rows {
            let _ = writeln!(
                o,
                "| {what} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                x.fault.key(),
                x.protection.key(),
                pct(x.quiet.victim_share),
                pct(x.under_fault.victim_share),
                num(x.share_ratio, 2),
                pct(x.quiet.bystander_share),
                pct(x.under_fault.bystander_share),
                lateness_cell(&x.quiet),
                lateness_cell(&x.under_fault),
                num(x.p99_ratio, 2),
                events_cell(&x.quiet.events),
                events_cell(&x.under_fault.events),
                num(x.containment_ms, 1),
                Disturbance::worst(&[x.quiet.disturbance, x.under_fault.disturbance].into_iter().flatten().collect::<Vec<_>>()).map_or("–".to_string(), |d| d.note()),
            );
        }
        for x in rows.iter().filter(|x| !x.failed.is_empty()) {
            for f in &x.failed {
                let _ = writeln!(o, "\n**{what} {} {} failed**: {}", x.fault.key(), x.protection.key(), f.lines().next().unwrap_or_default());
            }
        }
    }
    if r.rows.iter().any(|x| x.placement == Placement::Vm) {
        let left: Vec<&str> = Kind::ALL[1..].iter().filter(|k| !k.in_guest()).map(|k| k.key()).collect();
        let _ = writeln!(o, "\nThe VM table leaves out {}: the guest has no disk (its root and state directory are in its memory), and the others repeat a kind it has.", left.join(", "));
    }
    let _ = writeln!(o, "\n{HOST_NOTE}");
    let _ = writeln!(o, "\nEvery cell, with its lateness and events: `isolation.json`. Wall time: {:.0} s.", r.elapsed_s);
    o
}

/// Writes isolation.md and isolation.json into `dir`.
pub fn write_all(r: &IsolationResults, dir: &Path, command: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("isolation.md"), markdown(r, command))?;
    let mut json = serde_json::to_value(r).map_err(std::io::Error::other)?;
    json["command"] = serde_json::Value::String(command.into());
    std::fs::write(dir.join("isolation.json"), serde_json::to_string_pretty(&json).map_err(std::io::Error::other)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(vm: bool) -> IsolationConfig {
        IsolationConfig {
            exe: "partita".into(),
            out: "/tmp/x".into(),
            state_root: "/tmp/s".into(),
            faults: Kind::ALL[1..].to_vec(),
            span: Duration::from_secs(5),
            settle: Duration::from_secs(1),
            process: true,
            vm,
            accel: "tcg".into(),
            accel_reason: "asked".into(),
            repeat: 2,
        }
    }

    #[test]
    fn every_cells_system_is_valid_and_floods_the_victims_address() {
        let host = partita_system::Host::with_cpus(2);
        let cfg = cfg(true);
        let specs = plan_cells(&cfg);
        let vm_faults = Kind::ALL.iter().filter(|k| **k != Kind::Sleep && k.in_guest()).count();
        assert_eq!(specs.len(), 2 * 2 * 2 * (16 + vm_faults));
        // Quiet and fault cells alternate.
        assert!(specs.chunks(2).all(|p| p[0].quiet && !p[1].quiet && p[0].fault == p[1].fault));
        let only_vm = plan_cells(&IsolationConfig { process: false, ..cfg.clone() });
        assert_eq!(only_vm.len(), 2 * 2 * 2 * vm_faults);
        assert!(only_vm.iter().all(|s| s.placement == Placement::Vm));
        for spec in specs.iter().filter(|s| s.run == 1) {
            let system = cell_system(&cfg, spec, "isolation-1-1", &host).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
            let names: Vec<&str> = system.partitions().map(|(_, p)| p.name.as_str()).collect();
            assert_eq!(names, PARTITIONS);
            let plan = &system.modules[0].plans[0];
            assert_eq!((plan.cpu, plan.windows.len()), (0, 3));
            let faulty = system.partitions().find(|(_, p)| p.name == "faulty").unwrap().1;
            assert_eq!(faulty.tree.command[3], spec.program().key());
            if spec.program() == Kind::UdpFlood {
                let victim = system.partitions().find(|(_, p)| p.name == "victim").unwrap().1.address;
                assert_eq!(faulty.tree.command[4..], ["--target".to_string(), format!("{victim}:{FLOOD_PORT}")]);
                assert!(fault::flood_target_allowed(victim.into()));
            }
            let text = cell_spec(&cfg, spec, "x", None).unwrap().to_toml();
            assert_eq!(text.contains("kind = \"vm\""), spec.placement == Placement::Vm, "{text}");
            // The setting's keys are in the system, as the report prints them.
            let landed = spec.protection == Protection::Landed;
            assert_eq!((system.host.preemption == Preemption::Keep, plan.demote), (landed, !landed), "{text}");
        }
    }

    #[test]
    fn quantiles_lateness_and_shares() {
        assert_eq!(quantile::<u64>(&[], 0.5), None);
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!((quantile(&v, 0.5), quantile(&v, 0.99), quantile(&v, 1.0)), (Some(50), Some(99), Some(100)));
        let l = Lateness::of(vec![30_000, 10_000, 20_000]).unwrap();
        assert_eq!((l.starts, l.p50_us, l.p99_us, l.max_us), (3, 20.0, 30.0, 30.0));
        assert!(Lateness::of(Vec::new()).is_none());
        assert!((share(Duration::from_millis(500), Duration::from_millis(1500)) - 1.0).abs() < 1e-9);
        assert_eq!(median(vec![3.0, 1.0, 2.0, 10.0]), Some(2.5));
    }

    fn event(t: u64, partition: &str, event: &'static str) -> Event {
        Event { unix_ms: 0, monotonic_ns: t, partition: partition.into(), event, pid: None, exit: None, detail: None }
    }

    #[test]
    fn events_are_counted_in_the_span_and_containment_timed() {
        let ev = [event(5, "faulty", "start"), event(10, "faulty", TIME_OVERRUN), event(20, "victim", "window_missed"), event(3_000_010, "faulty", CONTAINED), event(30, "victim", "window_missed")];
        let n = count_events(&ev, 10, 100);
        assert_eq!(n.len(), 2);
        assert_eq!((n["window_missed (victim)"], n["time_overrun (faulty)"]), (2, 1));
        assert_eq!(containment_ms(&ev), Some(3.0));
        assert_eq!(containment_ms(&ev[..3]), None);
        // The faulty partition stopped by containment leaves a cell standing; any other end does not.
        assert_eq!(ended_early(&[event(10, "faulty", CONTAINED), event(11, "faulty", "exit")], 100), None);
        assert!(ended_early(&[event(11, "faulty", "exit")], 100).unwrap().starts_with("faulty ended (exit"));
        assert!(ended_early(&[event(10, "faulty", CONTAINED), event(11, "victim", "stopped")], 100).unwrap().starts_with("victim"));
        assert_eq!(ended_early(&[event(200, "victim", "exit")], 100), None);
    }

    #[test]
    fn a_row_pairs_fault_cells_with_their_quiet_cells() {
        let spec = |quiet, run| CellSpec { placement: Placement::Process, protection: Protection::Landed, fault: Kind::VmaWalk, quiet, run };
        let cell = |quiet, run, victim: f64, p99: f64| Cell {
            spec: spec(quiet, run),
            program: if quiet { Kind::Sleep } else { Kind::VmaWalk },
            system: "s".into(),
            ready_s: Some(0.1),
            span_s: 1.0,
            victim_share: Some(victim),
            bystander_share: Some(0.9),
            faulty_share: Some(0.5),
            lateness: Some(Lateness { starts: 1000, p50_us: 5.0, p99_us: p99, max_us: 100.0 }),
            events: BTreeMap::from([("window_missed (victim)".to_string(), 1)]),
            containment_ms: None,
            disturbance: Some(Disturbance { seconds: 1.0, steal_pct: if quiet { 0.2 } else { 3.5 }, mhz_start: Some(2600.0), mhz_end: Some(2600.0) }),
            error: None,
        };
        let cells = [cell(true, 1, 0.96, 20.0), cell(false, 1, 0.10, 200.0), cell(true, 2, 0.98, 20.0), cell(false, 2, 0.12, 400.0)];
        let r = rows(&cells);
        assert_eq!(r.len(), 1);
        assert!((r[0].under_fault.victim_share.unwrap() - 0.11).abs() < 1e-9);
        assert!((r[0].share_ratio.unwrap() - 0.11 / 0.97).abs() < 1e-9);
        assert_eq!(r[0].p99_ratio, Some(15.0));
        assert_eq!(r[0].under_fault.events["window_missed (victim)"], 2);
        let res = IsolationResults { machine: "m".into(), accel: "none".into(), accel_reason: "".into(), seconds: 1.0, settle_s: 1.0, repeat: 2, protection_keys: Protection::ALL.into_iter().map(|p| (p.key(), protection_keys(p))).collect(), rows: r, cells: cells.to_vec(), elapsed_s: 1.0 };
        let md = markdown(&res, "partita bench isolation");
        assert!(md.contains("| process | vma-walk | landed | 97.0 | 11.0 | 0.11 |"), "{md}");
        // The host column: the worst run of the row, quiet or under fault, flagged.
        assert!(md.contains("| steal 3.5 %, 2600→2600 MHz (moved) |"), "{md}");
        assert!(md.contains(HOST_NOTE), "{md}");
        // The settings' keys, printed from the typed values the cells' systems are built with.
        let landed = "landed = [system] `preemption = \"keep\"; housekeeping_cpus = []`, [[module.plan]] `demote = false`, [[module.partition]] `time_overrun = { action = \"ignore\" }; disk = \"unlimited\"; seccomp = { allow = [\"sync\", \"syncfs\"] }`";
        assert!(md.contains(landed) && md.contains("protected = no keys (the supervisor's defaults)"), "{md}");
    }
}
