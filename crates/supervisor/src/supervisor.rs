//! `Supervisor::up`: builds a whole system in order (cgroups, namespaces, networks, DDS configurations,
//! partitions, plan executors) and tears everything down in reverse, on any error during the build (never a
//! half-built system), at the end of the run, and on SIGINT/SIGTERM.
use crate::cgroup::{check_component, Layout, Limits, PartitionCgroup};
use crate::clock::unix_ms;
use crate::dds_config::CycloneConfig;
use crate::error::{path_err, Result, SupervisorError};
use crate::partition_log::PartitionLog;
use crate::state_image::StateImage;
use crate::executor::{Executor, ExecutorConfig, ExecutorLog, Members, Schedule, Window};
use crate::control_socket::{self, ControlSocket};
use crate::hm::{Decision, HealthTables};
use crate::modes::{ModulePlans, PartitionControl, PlanExecutor, PlanState};
use partita_ports::control::{ControlPage, Mode, Outcome, Request, StartCondition};
use partita_system::{ErrorKind, HmAction, HmLevel};
use crate::freeze::{FreezeBackend, Freezer};
use crate::guest::{GuestPlace, Guests, KvmNode, Tap};
use crate::health::{EventLog, HealthMonitor};
use crate::launch::{launch, launch_guest, rootfs, Confine, LaunchSpec};
use crate::health::Action;
use partita_system::{HealthAction, Module, NetworkId, OverrunAction, Partition, ProcessTree, Scheduling, System, PARTITA_PROGRAM};
use crate::overrun::{Note, EVENT_CONTAINED, EVENT_DEMOTED, EVENT_OVERRUN_ACTION, EVENT_TIME_OVERRUN};
use crate::registry::Registration;
use crate::window_watch::{WindowCounts, WindowWatch};
use crate::overrun::{OverrunPolicy, TimeGuard};
use crate::host_tuning::{self, HostTuning};
use partita_os::cpu_latency::CpuLatencyHold;
use crate::uplink::HandedUplink;
use crate::vnet::{Bridge, NetNamespace, Side, VirtualNic};
use partita_system::UPLINK_NIC;
use partita_dds::fastdds::FastDdsProfile;
use partita_env::PartitionEnv;
use serde::Serialize;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the operator asked through the control socket (restart or stop of a partition), as the event log says it.
pub const EVENT_OPERATOR: &str = "operator";

/// Where running supervisors write their state (`<dir>/<system>/state.json`, `events.jsonl`, DDS files).
pub const STATE_DIR: &str = "/run/partita";

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT request an orderly stop instead of killing the process: the supervisor
/// tears its system down, and the long-running roles (route, recorder, udp-echo) end their loops.
pub use partita_os::signal::{install_stop_signals, stop_flag, stop_requested};

#[derive(Debug, Clone, Serialize)]
pub struct PartitionState {
    /// `None` for a native node.
    pub module: Option<String>,
    pub partition: String,
    pub pid: Option<i32>,
    /// For a planned partition: how often it was found frozen inside its windows, or running outside them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<WindowCounts>,
    /// On the module network (`None` for a native node).
    pub address: Option<Ipv4Addr>,
    pub external_address: Option<Ipv4Addr>,
    /// Its operating mode (planned process partitions): idle, cold_start, warm_start or normal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
    /// CPU time its cgroup has used since the system came up, µs; memory charged to it now, bytes.
    pub cpu_us: Option<u64>,
    pub memory_bytes: Option<u64>,
    /// How often it was restarted.
    pub restarts: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct State {
    pub system: String,
    pub supervisor_pid: u32,
    pub started_unix_ms: u64,
    pub updated_unix_ms: u64,
    pub freeze_backend: &'static str,
    pub partitions: Vec<PartitionState>,
    pub frames: Vec<u64>,
    pub max_lateness_ns: Vec<u64>,
    /// Each planned module's plans: the one running, the one asked for, how many switches.
    pub plans: Vec<PlanState>,
    /// Each CPU's plan as it runs: planned windows, the last window starts, lateness ([`crate::status`]).
    pub cpus: Vec<crate::status::CpuStatus>,
    /// The routing partitions' statistics, as the system's status node last heard them (empty without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routers: Option<crate::status::Routers>,
}

/// How to bring a system up, beside the system itself.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// Where the system's state directory goes (`<root>/<system>`); [`STATE_DIR`] for `partita up`.
    pub state_root: PathBuf,
    /// The freezing mechanism; `None`: the best this machine has.
    pub backend: Option<FreezeBackend>,
    /// The binary a command's program `partita` stands for; `None`: this very binary.
    pub partita: Option<PathBuf>,
}

impl UpOptions {
    pub fn new(state_root: impl Into<PathBuf>) -> UpOptions {
        UpOptions { state_root: state_root.into(), backend: None, partita: None }
    }
}

/// A built, running system. Fields drop in declaration order: plans stop first, then partitions are
/// killed, then cgroups, V-NICs, namespaces and bridges go, the state directory last.
pub struct Supervisor {
    executors: Vec<Executor>,
    /// Per executor: how far its overrun notes were read.
    overruns_read: Vec<u64>,
    /// The plans watched from outside their executors.
    watch: WindowWatch,
    /// Per executor: the index in `state.partitions` of each partition it schedules (its freezers' order).
    plan_partitions: Vec<Vec<usize>>,
    monitor: HealthMonitor,
    cgroups: Vec<Arc<PartitionCgroup>>,
    nics: Vec<VirtualNic>,
    /// The partitions' and nodes' output logs.
    logs: Vec<Arc<PartitionLog>>,
    /// Host interfaces handed to I/O partitions and nodes: given back before their namespaces go.
    uplinks: Vec<HandedUplink>,
    /// VM partitions' V-NICs, and their KVM device nodes (under hardware virtualization).
    taps: Vec<Tap>,
    kvm_nodes: Vec<KvmNode>,
    namespaces: Vec<NetNamespace>,
    bridges: Vec<Bridge>,
    state_dir: StateDir,
    state: State,
    /// The partitions' state directories mounted from their images: unmounted before the directories go.
    state_images: Vec<StateImage>,
    /// The partitions' state directories: each one is removed when the system goes down if nothing was left in
    /// it (a recorder's ring stays).
    _state_dirs: EmptyDirs,
    /// The wake-up latency bound held while the system runs (the system file's `cpu_dma_latency`).
    _cpu_latency: Option<CpuLatencyHold>,
    /// The host's preemption model, interrupts and kernel work moved off the plans' CPUs while the system runs
    /// (the system file's `preemption` and `housekeeping_cpus`), given back when it goes.
    _host_tuning: Option<HostTuning>,
    /// The CPUs the calling thread had before `up` moved it off the plans' CPUs: given back when the system goes.
    _caller_cpus: CallerCpus,
    /// The partitions' ARINC 653 ports, whose fault counters the health monitor reads.
    ports: Vec<crate::ports::WatchedPort>,
    /// Each planned module's named plans and their executors.
    module_plans: Vec<ModulePlans>,
    /// The planned process partitions' control pages and modes.
    controls: Vec<PartitionControl>,
    /// The health-monitor tables and their escalation counts.
    tables: HealthTables,
    /// `partita plan switch` reaches the supervisor here; requests waiting for their switch to happen.
    control_socket: Option<ControlSocket>,
    /// The system it runs, as validated (its route tables as last reloaded), and its I/O partitions' router
    /// files: `partita router reload` compares the file with the one and rewrites the others.
    system: System,
    router_files: Vec<crate::router_reload::RouterFile>,
    waiting: Vec<WaitingSwitch>,
    /// Reads the executors' window rings and histograms for the state file.
    status: crate::status::StatusReader,
    /// `partita up --trace`: where the run goes as a trace, when asked ([`crate::trace`]).
    trace: Option<crate::trace::TraceWriter>,
    /// `partita up --trace-stalls`: a kernel trace of each plan's CPU, explaining every window start later than
    /// 1 ms (a `stall` event, and the kernel's events on the trace's CPU track).
    stall_watchers: Vec<crate::stalls::Watcher>,
    /// Partitions' illegal requests logged in the last second (the rest are counted, not logged).
    illegal_logged: std::collections::HashMap<String, (Instant, u64)>,
    /// The system's record in the registry: the system is up until it goes, last.
    _registration: Registration,
}

/// What a switch request came to.
enum Asked {
    /// The module runs the plan on every CPU and no other switch is pending.
    Already,
    /// Asked of every CPU of module `module` (index in `module_plans`).
    Requested { module: usize, plan: usize },
}

/// An operator's switch request, answered once every CPU of its module runs the plan (or at its deadline).
struct WaitingSwitch {
    stream: std::os::unix::net::UnixStream,
    module: usize,
    plan: usize,
    deadline: Instant,
    details: Vec<String>,
}

/// The calling thread's CPUs before `up`, restored on drop (on the thread that drops the system, normally the
/// one that built it).
struct CallerCpus(Option<Vec<usize>>);
impl Drop for CallerCpus {
    fn drop(&mut self) {
        if let Some(cpus) = &self.0 {
            let _ = partita_os::sched::set_current_thread_cpus(cpus);
        }
    }
}

/// Directories removed on drop if they are empty, with their parent if it is empty then.
struct EmptyDirs(Vec<PathBuf>);
impl Drop for EmptyDirs {
    fn drop(&mut self) {
        for d in &self.0 {
            if std::fs::remove_dir(d).is_ok() {
                if let Some(parent) = d.parent() {
                    let _ = std::fs::remove_dir(parent);
                }
            }
        }
    }
}

/// The system's directory under /run/partita. When the system goes down its state file goes (the system is
/// no longer up); the event log, partition output and DDS files stay for inspection until `partita down`.
/// A refused `up` removes the whole directory: nothing is left of a system that never came up.
struct StateDir {
    path: PathBuf,
    came_up: bool,
}
impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = if self.came_up { std::fs::remove_file(self.path.join("state.json")) } else { std::fs::remove_dir_all(&self.path) };
    }
}

impl Supervisor {
    /// Builds and starts `system`, exactly as `partita check` describes it: every bridge, namespace, cgroup,
    /// V-NIC, address and domain comes from the validated model. On error everything built so far is removed
    /// before returning.
    pub fn up(system: &System, options: &UpOptions) -> Result<Supervisor> {
        check_component("system", &system.name)?;
        // SIGPWR is a power failure for the health-monitor tables, not the end of the supervisor.
        partita_os::signal::install_power_fail_signal();
        let layout = Layout::detect()?;
        let partita = match &options.partita {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(|e| SupervisorError::Sys { call: "current_exe", context: "the partita binary".into(), source: e })?,
        };
        let state_path = options.state_root.join(&system.name);
        // Recorded before anything is created, so that `partita down` finds it all if this process dies.
        let registration = Registration::claim(&system.name, &state_path, &system.host_objects())?;
        std::fs::create_dir_all(&state_path).map_err(path_err("mkdir", &state_path))?;
        let events_path = state_path.join("events.jsonl");
        let events = std::fs::File::create(&events_path).map_err(path_err("create", &events_path))?;
        // This run's output starts empty, as its event log does: an earlier run's partition logs (kept for
        // inspection until `partita down`) would otherwise be read as this run's (a restart within the run
        // appends).
        let members = system.modules.iter().flat_map(|m| m.partitions.iter().map(|p| p.name.as_str())).chain(system.nodes.iter().map(|n| n.name.as_str()));
        for name in members {
            let _ = std::fs::remove_file(state_path.join(format!("{name}.log")));
        }
        let mut s = Supervisor {
            executors: Vec::new(),
            overruns_read: Vec::new(),
            watch: WindowWatch::default(),
            plan_partitions: Vec::new(),
            monitor: HealthMonitor::new(EventLog::new(Some(Box::new(events)))),
            cgroups: Vec::new(),
            nics: Vec::new(),
            logs: Vec::new(),
            uplinks: Vec::new(),
            taps: Vec::new(),
            kvm_nodes: Vec::new(),
            namespaces: Vec::new(),
            bridges: Vec::new(),
            state_dir: StateDir { path: state_path.clone(), came_up: false },
            state: State {
                system: system.name.clone(),
                supervisor_pid: std::process::id(),
                started_unix_ms: unix_ms(),
                updated_unix_ms: unix_ms(),
                freeze_backend: "none",
                partitions: Vec::new(),
                frames: Vec::new(),
                max_lateness_ns: Vec::new(),
                plans: Vec::new(),
                cpus: Vec::new(),
                routers: None,
            },
            state_images: Vec::new(),
            _state_dirs: EmptyDirs(Vec::new()),
            _cpu_latency: None,
            _host_tuning: None,
            _caller_cpus: CallerCpus(None),
            ports: Vec::new(),
            module_plans: Vec::new(),
            controls: Vec::new(),
            tables: HealthTables::new(system),
            control_socket: None,
            system: system.clone(),
            router_files: Vec::new(),
            waiting: Vec::new(),
            illegal_logged: Default::default(),
            status: Default::default(),
            trace: None,
            stall_watchers: Vec::new(),
            _registration: registration,
        };
        if let Some(bound) = system.cpu_dma_latency {
            let us = u32::try_from(bound.as_nanos() / 1_000).unwrap_or(u32::MAX);
            s._cpu_latency = Some(CpuLatencyHold::new(us).map_err(|source| SupervisorError::CpuLatency { source })?);
        }
        // The supervisor's own work (launching and restarting partitions, watching them) stays off the CPUs of
        // the plans where the machine has others: it must not take time from the partitions' windows.
        let planned: Vec<usize> = system.modules.iter().flat_map(|m| m.plans.iter().map(|p| p.cpu)).collect();
        if let Ok(mine) = partita_os::sched::current_thread_cpus() {
            let free: Vec<usize> = mine.into_iter().filter(|c| !planned.contains(c)).collect();
            if !free.is_empty() && !planned.is_empty() {
                s._caller_cpus = CallerCpus(partita_os::sched::current_thread_cpus().ok());
                let _ = partita_os::sched::set_current_thread_cpus(&free);
            }
        }
        if !planned.is_empty() {
            favor_dynamic_cgroup_changes();
            let (tuning, applied) = HostTuning::hold(&system.name, &system.host)?;
            for c in &applied.changed {
                s.monitor.log().record("(host)", "host_setting", None, None, Some(c.clone()));
            }
            for l in &applied.left {
                s.monitor.log().record("(host)", "host_setting_left", None, None, Some(l.clone()));
            }
            s._host_tuning = Some(tuning);
        }
        // 1. Networks: a bridge for each network that has members.
        let mut bridges: Vec<(NetworkId, usize)> = Vec::new();
        for (id, net) in system.networks() {
            s.bridges.push(Bridge::create(&net.bridge)?);
            bridges.push((id, s.bridges.len() - 1));
        }
        // 2. Per partition and node: cgroup, namespace, V-NICs, DDS configuration; then launch (frozen when
        //    planned). Freezers go to the plan executors, by module and plan.
        let mut build = Build {
            system,
            options,
            layout: &layout,
            partita: &partita,
            state_path: &state_path,
            bridges,
            guests: Guests::default(),
            freezers: Vec::new(),
            guards: Vec::new(),
            channels: Default::default(),
            pages: Vec::new(),
        };
        let members = system
            .partitions()
            .map(|(m, p)| Member { name: &p.name, module: Some(m), partition: Some(p), tree: &p.tree })
            .chain(system.nodes.iter().map(|n| Member { name: &n.name, module: None, partition: None, tree: &n.tree }));
        for member in members {
            build.member(&mut s, member)?;
        }
        let Build { mut freezers, mut guards, mut pages, .. } = build;
        // 3. Plans: one executor per CPU, owning the freezers of its partitions (in module order), with the
        //    module's every named plan (the default first, where it starts).
        let mut first = 0;
        for m in &system.modules {
            let sets = m.plan_sets();
            let mut plan_executors = Vec::new();
            for (k, plan) in m.plans.iter().enumerate() {
                let members: Vec<usize> = (0..m.partitions.len()).filter(|&pi| m.partitions[pi].plan == Some(k)).collect();
                let schedules = sets
                    .iter()
                    .map(|(_, plans)| {
                        let plan = plans.get(k).ok_or(SupervisorError::Model { member: m.name.clone(), broken: "a named plan lacks a CPU of the default plan" })?;
                        let windows = plan
                            .windows
                            .iter()
                            .map(|w| {
                                let partition = members.iter().position(|&pi| m.partitions[pi].name == w.partition).ok_or_else(|| {
                                    SupervisorError::Model { member: w.partition.clone(), broken: "a plan's window names a partition of another module or CPU, or of none" }
                                })?;
                                Ok(Window { partition, offset: w.start.to_std(), duration: w.duration.to_std() })
                            })
                            .collect::<Result<Vec<_>>>()?;
                        Schedule::new(plan.frame().to_std(), windows)?.with_freeze_ahead(plan.freeze_ahead.to_std())?.with_wake_ahead(plan.wake_ahead.to_std())
                    })
                    .collect::<Result<Vec<Schedule>>>()?;
                let plan_freezers: Vec<Freezer> = members.iter().filter_map(|&pi| freezers[first + pi].take()).collect();
                let plan_guards: Vec<Option<TimeGuard>> = members.iter().map(|&pi| guards[first + pi].take()).collect();
                let plan_pages: Vec<Option<Arc<ControlPage>>> = members.iter().map(|&pi| pages[first + pi].take()).collect();
                let idle = plan_pages.iter().map(|p| p.as_ref().map(crate::modes::idle_probe)).collect();
                let probes = members.iter().zip(&plan_freezers).map(|(&pi, f)| (m.partitions[pi].name.clone(), f.probe(), s.cgroups[first + pi].clone())).collect();
                let config = ExecutorConfig { cpu: Some(plan.cpu), ..ExecutorConfig::default() };
                let executor = Executor::start_plans(schedules.clone(), 0, plan_freezers, Members { guards: plan_guards, idle }, config)?;
                s.watch.add_plans(&schedules, Some(executor.plans.clone()), executor.origin(), probes);
                let names: Vec<String> = members.iter().map(|&pi| m.partitions[pi].name.clone()).collect();
                for (index, page) in plan_pages.into_iter().enumerate() {
                    let Some(page) = page else { continue };
                    let p = &m.partitions[members[index]];
                    s.controls.push(PartitionControl { name: p.name.clone(), module: m.name.clone(), system_partition: p.system_partition, page, mode: Mode::ColdStart, executor: s.executors.len(), index });
                }
                plan_executors.push(PlanExecutor { cpu: plan.cpu, cell: executor.plans.clone(), schedules, partitions: names });
                s.executors.push(executor);
                s.overruns_read.push(0);
                s.plan_partitions.push(members.iter().map(|pi| first + pi).collect());
            }
            if !plan_executors.is_empty() {
                s.module_plans.push(ModulePlans::new(&m.name, sets.iter().map(|(n, _)| n.to_string()).collect(), plan_executors, 0));
            }
            first += m.partitions.len();
        }
        s.control_socket = Some(ControlSocket::bind(&state_path)?);
        s.write_state()?;
        s.state_dir.came_up = true;
        Ok(s)
    }

    /// Writes the run from here on (and the window records the executors still hold from before) to `trace`,
    /// until the system goes down.
    pub fn trace_to(&mut self, mut trace: crate::trace::TraceWriter) {
        trace.begin(&self.state.system, crate::trace::CpuPlan::of(&self.module_plans));
        self.trace = Some(trace);
    }

    /// Traces each plan's CPU in the kernel (every `sched_switch`, interrupt and wake-up, as `partita soak
    /// --trace-stalls` does) and explains each window start later than 1 ms: a `stall` event in the event log,
    /// and the kernel's events around it in the trace when there is one.
    pub fn trace_stalls(&mut self) -> Result<()> {
        let cpus: Vec<usize> = self.module_plans.iter().flat_map(|m| m.executors.iter().map(|e| e.cpu)).collect();
        for (cpu, e) in cpus.into_iter().zip(&self.executors) {
            self.stall_watchers.push(crate::stalls::Watcher::start(cpu, e.stall.clone())?);
        }
        Ok(())
    }

    fn read_stalls(&mut self) {
        let log = self.monitor.log().clone();
        for w in &mut self.stall_watchers {
            let explained = match w.poll() {
                Ok(x) => x,
                Err(e) => {
                    log.record(&format!("cpu{}", w.cpu), "error", None, None, Some(format!("the stall tracer: {e}")));
                    continue;
                }
            };
            for x in &explained {
                let detail = format!("window start {:.0} µs late: {}: {}", x.explanation.lateness_us, x.explanation.cause, x.explanation.detail);
                log.record(&format!("cpu{}", w.cpu), "stall", None, None, Some(detail));
            }
            if let Some(t) = self.trace.as_mut() {
                t.stalls(w.cpu, &explained);
            }
        }
    }

    pub fn events(&self) -> &EventLog {
        self.monitor.log()
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir.path
    }

    /// Each plan's window-start lateness histogram, in the order of the executors' logs.
    pub fn lateness(&self) -> Vec<Arc<crate::histogram::LatencyHistogram>> {
        self.executors.iter().map(|e| e.lateness.clone()).collect()
    }

    /// Each plan's window starts later than [`crate::executor::STALL_NS`], in the same order.
    pub fn stalls(&self) -> Vec<Arc<crate::stalls::StallRing>> {
        self.executors.iter().map(|e| e.stall.clone()).collect()
    }

    /// The cgroups of every partition and node, in the order of `state.json`'s partitions.
    pub fn cgroups(&self) -> Vec<Arc<PartitionCgroup>> {
        self.cgroups.clone()
    }

    fn write_state(&mut self) -> Result<()> {
        let pids = self.monitor.pids();
        for (st, (_, pid)) in self.state.partitions.iter_mut().zip(pids) {
            st.pid = pid;
        }
        for (name, counts) in self.watch.counts() {
            if let Some(st) = self.state.partitions.iter_mut().find(|p| p.partition == name) {
                st.windows = Some(counts);
            }
        }
        for c in &self.controls {
            if let Some(st) = self.state.partitions.iter_mut().find(|p| p.partition == c.name) {
                st.mode = Some(crate::modes::mode_name(c.mode));
            }
        }
        for (name, restarts) in self.monitor.restarts() {
            if let Some(st) = self.state.partitions.iter_mut().find(|p| p.partition == name) {
                st.restarts = restarts;
            }
        }
        for (st, cgroup) in self.state.partitions.iter_mut().zip(&self.cgroups) {
            st.cpu_us = cgroup.cpu_usage().ok().map(|d| d.as_micros() as u64);
            st.memory_bytes = cgroup.memory_usage().ok();
        }
        self.state.plans = self.module_plans.iter().map(|m| m.state()).collect();
        self.state.cpus = self.status.cpus(&self.executors, &self.module_plans);
        self.state.routers = crate::status::Routers::read(&self.state_dir.path);
        self.state.updated_unix_ms = unix_ms();
        self.state.frames = self.executors.iter().map(|e| e.progress.lock().map(|p| p.frames).unwrap_or(0)).collect();
        self.state.max_lateness_ns =
            self.executors.iter().map(|e| e.progress.lock().map(|p| p.max_lateness_ns).unwrap_or(0)).collect();
        let path = self.state_dir.path.join("state.json");
        let tmp = self.state_dir.path.join("state.json.tmp");
        let text = serde_json::to_string_pretty(&self.state).map_err(|source| SupervisorError::Encode { what: "the state file", source })?;
        std::fs::write(&tmp, text).map_err(path_err("write", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(path_err("rename", &path))
    }

    /// Watches the system until `duration` has passed (forever when `None`), a stop signal arrives, or
    /// `stop` is set; then tears it down and returns the plan executors' logs.
    pub fn run(mut self, duration: Option<Duration>, stop: Option<Arc<AtomicBool>>) -> Result<Vec<ExecutorLog>> {
        let t0 = Instant::now();
        let mut last_state = Instant::now();
        loop {
            // Before the health monitor reaps: a partition killed by its overrun action `stop` is not restarted.
            self.read_overruns();
            self.read_port_faults();
            self.monitor.poll();
            self.watch.sample(crate::clock::monotonic_ns(), self.monitor.log());
            self.health_errors();
            if partita_os::signal::take_power_fail() {
                self.power_fail();
            }
            self.read_controls();
            self.read_plan_switches();
            self.serve_control_socket();
            self.read_stalls();
            if let Some(t) = self.trace.as_mut() {
                t.drain(&self.executors, self.monitor.log());
            }
            if stop_requested() || stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst)) || duration.is_some_and(|d| t0.elapsed() >= d) {
                break;
            }
            if last_state.elapsed() >= Duration::from_secs(1) {
                let _ = self.write_state();
                if let (Some(t), Some(routers)) = (self.trace.as_mut(), &self.state.routers) {
                    t.routers(routers, crate::clock::monotonic_ns());
                }
                last_state = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.down()
    }

    /// Logs what the plans' time guards noted since the last look, and does what the executor left to this
    /// thread: the kill where the kernel has no `cgroup.kill`, and keeping a stopped partition stopped.
    fn read_overruns(&mut self) {
        for (k, e) in self.executors.iter().enumerate() {
            let (notes, next, lost) = e.overruns.read_since(self.overruns_read[k]);
            self.overruns_read[k] = next;
            let name = |p: usize| self.plan_partitions[k].get(p).map(|&i| self.state.partitions[i].partition.clone()).unwrap_or_default();
            let log = self.monitor.log().clone();
            if lost > 0 {
                log.record(&name(0), EVENT_TIME_OVERRUN, None, None, Some(format!("{lost} notes of plan {k} were overwritten before they were read")));
            }
            for n in notes {
                match n {
                    Note::Overrun { partition, frame, past_ns, before_freeze_ns, still_running, continued, .. } => {
                        let what = if continued { "ran on" } else { "ran past its window's end by" };
                        let before = if continued { String::new() } else { format!(", {} µs of it before its freeze", before_freeze_ns / 1_000) };
                        let running = if still_running { ", still running" } else { ", stopped" };
                        log.record(&name(partition), EVENT_TIME_OVERRUN, None, None, Some(format!("{what} {} µs of CPU time (frame {frame}{before}{running})", past_ns / 1_000)));
                    }
                    Note::Demoted { partition, .. } => log.record(&name(partition), EVENT_DEMOTED, None, None, Some("runs as idle (cpu.idle) until its next window".into())),
                    Note::Action { partition, action, killed, .. } => {
                        let how = if killed { "killed through cgroup.kill" } else { "" };
                        log.record(&name(partition), EVENT_OVERRUN_ACTION, None, None, Some(format!("{action} {how}").trim().to_string()));
                        if matches!(action, OverrunAction::Stop) {
                            self.monitor.keep_stopped(&name(partition));
                        }
                        if !killed && matches!(action, OverrunAction::Stop | OverrunAction::Restart) {
                            self.monitor.kill(&name(partition));
                        }
                    }
                    Note::Contained { partition, first_ns, at_ns, frames } => {
                        let us = at_ns.saturating_sub(first_ns) / 1_000;
                        log.record(&name(partition), EVENT_CONTAINED, None, None, Some(format!("stopped {us} µs ({frames} major frames) after the end of the window of its first counted overrun")));
                    }
                }
            }
        }
    }

    /// Logs the faults the partitions' ports counted since the last look, and applies each channel's
    /// `on_fault` to the partition that reported a fault of its own (crate::ports says why only to it).
    fn read_port_faults(&mut self) {
        let log = self.monitor.log().clone();
        for port in &mut self.ports {
            for r in port.read() {
                log.record(&r.partition, crate::ports::EVENT_PORT_FAULT, None, None, Some(r.detail));
                match r.action {
                    partita_system::FaultAction::Ignore => {}
                    partita_system::FaultAction::Restart => self.monitor.kill(&r.partition),
                    partita_system::FaultAction::Stop => {
                        self.monitor.keep_stopped(&r.partition);
                        self.monitor.kill(&r.partition);
                    }
                }
            }
        }
    }

    /// The errors the monitor and the window watch saw since the last look, each acted on by the tables: the
    /// ends of partitions (by their signal), limit events, windows missed or overrun.
    fn health_errors(&mut self) {
        let now = Instant::now();
        for e in self.monitor.take_ended() {
            let kind = crate::hm::kind_of_end(&e.exit);
            self.on_error(&e.name, kind, true, now);
        }
        let noted: Vec<(String, &'static str)> = self.monitor.take_noted().into_iter().chain(self.watch.take_noted()).collect();
        for (name, event) in noted {
            if let Some(kind) = crate::hm::kind_of_event(event) {
                self.on_error(&name, kind, false, now);
            }
        }
    }

    /// SIGPWR reached the supervisor: a `power_fail` error of every planned module, decided by its module's
    /// table, then the system's (default: stop_module at system level).
    fn power_fail(&mut self) {
        let modules: Vec<String> = self.module_plans.iter().map(|m| m.module.clone()).collect();
        for module in modules {
            let decision = self.tables.decide_module(&module, ErrorKind::PowerFail, Instant::now());
            self.monitor.log().record(&module, crate::modes::EVENT_HM_ACTION, None, None, Some(format!("{}: {}", ErrorKind::PowerFail.as_str(), decision.describe())));
            if let Decision::Table { action, level, .. } | Decision::Default { action, level } = decision {
                self.act(&module, &module, level, &action, false);
            }
        }
    }

    /// The module a partition belongs to.
    fn module_of(&self, partition: &str) -> Option<String> {
        self.state.partitions.iter().find(|p| p.partition == partition).and_then(|p| p.module.clone())
    }

    /// Decides and acts on one error of `kind` in `partition` (`ended`: its process tree ended with it).
    fn on_error(&mut self, partition: &str, kind: ErrorKind, ended: bool, now: Instant) {
        let Some(module) = self.module_of(partition) else {
            // A native node: its own `health`.
            if ended {
                self.monitor.apply_default(partition);
            }
            return;
        };
        let decision = self.tables.decide(&module, partition, kind, ended, now);
        if !matches!(decision, Decision::Health) && !(matches!(decision, Decision::Default { action: HmAction::Ignore, .. }) && !ended) {
            self.monitor.log().record(partition, crate::modes::EVENT_HM_ACTION, None, None, Some(format!("{}: {}", kind.as_str(), decision.describe())));
        }
        match decision {
            Decision::Health => {
                self.monitor.apply_default(partition);
                if self.monitor.is_running(partition) {
                    self.restarted(partition, Mode::WarmStart, StartCondition::HmPartitionRestart);
                } else {
                    self.set_mode(partition, Mode::Idle, "stopped by its health action");
                }
            }
            Decision::Table { action, level, .. } | Decision::Default { action, level } => self.act(&module, partition, level, &action, ended),
        }
    }

    /// Carries out a table's action for an error in `partition` of `module`, at `level`.
    fn act(&mut self, module: &str, partition: &str, level: HmLevel, action: &HmAction, ended: bool) {
        let module_partitions: Vec<String> = self.state.partitions.iter().filter(|p| p.module.as_deref() == Some(module)).map(|p| p.partition.clone()).collect();
        let targets: Vec<String> = match level {
            HmLevel::Partition => vec![partition.to_string()],
            HmLevel::Module => module_partitions,
            HmLevel::System => self.state.partitions.iter().filter(|p| p.module.is_some()).map(|p| p.partition.clone()).collect(),
        };
        let condition = if level == HmLevel::Partition { StartCondition::HmPartitionRestart } else { StartCondition::HmModuleRestart };
        match action {
            HmAction::Ignore => {
                if ended {
                    self.set_mode(partition, Mode::Idle, "ended; the health monitor ignores it");
                }
            }
            HmAction::RestartCold | HmAction::RestartWarm => {
                let (kind, mode) = if *action == HmAction::RestartCold { (crate::health::RestartKind::Cold, Mode::ColdStart) } else { (crate::health::RestartKind::Warm, Mode::WarmStart) };
                for t in &targets {
                    self.hold(t, false);
                    self.monitor.restart(t, kind);
                    self.restarted(t, mode, condition);
                }
            }
            HmAction::Idle => {
                self.hold(partition, true);
                self.set_mode(partition, Mode::Idle, "the health monitor's action");
            }
            HmAction::Stop => self.stop_partition(partition, "the health monitor's action"),
            HmAction::StopModule => {
                for t in targets {
                    self.stop_partition(&t, "the health monitor stopped its module");
                }
            }
            HmAction::SwitchPlan(name) => {
                let by = format!("by the health monitor (an error of {partition})");
                // A refusal (no such plan) is logged where it is decided.
                let _ = self.switch_plan(module, name, false, &by);
            }
        }
    }

    fn stop_partition(&mut self, name: &str, why: &str) {
        self.monitor.keep_stopped(name);
        self.monitor.kill(name);
        self.hold(name, true);
        self.set_mode(name, Mode::Idle, why);
    }

    /// Holds a partition frozen in its executor (or lets it run in its windows again).
    fn hold(&mut self, name: &str, held: bool) {
        if let Some(c) = self.controls.iter().find(|c| c.name == name) {
            if !held {
                c.page.clear_idle_request();
            }
            if let Some(e) = self.executors.get(c.executor) {
                e.plans.hold(c.index, held);
            }
        }
    }

    fn set_mode(&mut self, name: &str, mode: Mode, why: &str) {
        let log = self.monitor.log().clone();
        if let Some(c) = self.controls.iter_mut().find(|c| c.name == name) {
            if let Some(text) = c.set_mode(mode, why) {
                log.record(name, crate::modes::EVENT_MODE, None, None, Some(text));
            }
        }
    }

    /// A restart was asked for: the partition starts again in `mode`, under `condition`.
    fn restarted(&mut self, name: &str, mode: Mode, condition: StartCondition) {
        if let Some(c) = self.controls.iter().find(|c| c.name == name) {
            c.set_start_condition(condition);
        }
        let why = match condition {
            StartCondition::PartitionRestart => "restarted at its own request",
            StartCondition::HmModuleRestart => "restarted by the health monitor with its module",
            _ => "restarted by the health monitor",
        };
        self.set_mode(name, mode, why);
    }

    /// Asks `module` to switch to plan `name`; `by` says who asked. The answer: what was asked (or that the
    /// module runs it already), or why not.
    fn switch_plan(&mut self, module: &str, name: &str, now: bool, by: &str) -> std::result::Result<Asked, String> {
        let log = self.monitor.log().clone();
        let Some(mi) = self.module_plans.iter().position(|m| m.module == module) else {
            let why = format!("module {module} has no plan");
            log.record(module, crate::modes::EVENT_PLAN_SWITCH_REFUSED, None, None, Some(format!("{why} (asked {by})")));
            return Err(why);
        };
        let m = &mut self.module_plans[mi];
        let Some(plan) = m.index(name) else {
            let why = format!("module {module} has no plan {name:?}; its plans: {}", m.names.join(", "));
            log.record(module, crate::modes::EVENT_PLAN_SWITCH_REFUSED, None, None, Some(format!("{why} (asked {by})")));
            return Err(why);
        };
        // Asked for the plan every CPU runs, with no other switch pending: nothing to do.
        if m.requested.is_none() && m.current == plan && m.executors.iter().all(|e| e.cell.current() == plan) {
            return Ok(Asked::Already);
        }
        m.request(plan, now);
        let when = if now { "at once" } else { "at the end of the current major frame" };
        log.record(module, crate::modes::EVENT_PLAN_SWITCH_REQUESTED, None, None, Some(format!("{} → {name} {when}, {by}", m.names[m.current])));
        for c in self.controls.iter().filter(|c| c.module == module) {
            c.page.set_plan(m.current as u64, plan as u64, m.last_switch_ns);
        }
        Ok(Asked::Requested { module: mi, plan })
    }

    /// The switches the executors made: events with their planned and actual instants, the pages' plan, and
    /// the operators waiting for them.
    fn read_plan_switches(&mut self) {
        let log = self.monitor.log().clone();
        for (mi, m) in self.module_plans.iter_mut().enumerate() {
            let reports = m.read();
            if reports.is_empty() {
                continue;
            }
            if let Some(t) = self.trace.as_mut() {
                t.plan_switches(&m.module, &reports);
            }
            for r in &reports {
                log.record(&m.module, crate::modes::EVENT_PLAN_SWITCH, None, None, Some(r.detail.clone()));
                for w in self.waiting.iter_mut().filter(|w| w.module == mi) {
                    w.details.push(r.detail.clone());
                }
            }
            let next = m.requested.unwrap_or(m.current);
            for c in self.controls.iter().filter(|c| c.module == m.module) {
                c.page.set_plan(m.current as u64, next as u64, m.last_switch_ns);
            }
        }
        let now = Instant::now();
        let mut still = Vec::new();
        for w in self.waiting.drain(..) {
            let m = &self.module_plans[w.module];
            let done = m.current == w.plan && m.executors.iter().all(|e| e.cell.current() == w.plan);
            if done || now >= w.deadline {
                let detail = if done { w.details.join("\n") } else { format!("asked; not every CPU of module {} had switched to {} within 10 s", m.module, m.names[w.plan]) };
                control_socket::answer(w.stream, &control_socket::Response { ok: done, detail });
            } else {
                still.push(w);
            }
        }
        self.waiting = still;
    }

    /// The operators' requests on the control socket.
    fn serve_control_socket(&mut self) {
        let Some(socket) = &self.control_socket else { return };
        for (stream, request) in socket.accept() {
            match request {
                Err(why) => control_socket::answer(stream, &control_socket::Response { ok: false, detail: why }),
                Ok(control_socket::Request::SwitchPlan { module, plan, now }) => {
                    let module = match module {
                        Some(m) => m,
                        None => {
                            let several: Vec<&ModulePlans> = self.module_plans.iter().filter(|m| m.names.len() > 1).collect();
                            match several.as_slice() {
                                [one] => one.module.clone(),
                                [] => {
                                    control_socket::answer(stream, &control_socket::Response { ok: false, detail: "no module of this system has more than one plan".into() });
                                    continue;
                                }
                                many => {
                                    let names: Vec<&str> = many.iter().map(|m| m.module.as_str()).collect();
                                    control_socket::answer(stream, &control_socket::Response { ok: false, detail: format!("several modules have plans ({}): name one with --module", names.join(", ")) });
                                    continue;
                                }
                            }
                        }
                    };
                    match self.switch_plan(&module, &plan, now, "by the operator") {
                        Ok(Asked::Already) => control_socket::answer(stream, &control_socket::Response { ok: true, detail: format!("module {module} runs plan {plan} already") }),
                        Ok(Asked::Requested { module, plan }) => self.waiting.push(WaitingSwitch { stream, module, plan, deadline: Instant::now() + Duration::from_secs(10), details: Vec::new() }),
                        Err(why) => control_socket::answer(stream, &control_socket::Response { ok: false, detail: why }),
                    }
                }
                Ok(control_socket::Request::ReloadRouters) => {
                    let answer = self.reload_routers();
                    control_socket::answer(stream, &answer);
                }
                Ok(control_socket::Request::RestartPartition { partition, cold }) => {
                    let answer = self.operator_restart(&partition, cold);
                    control_socket::answer(stream, &answer);
                }
                Ok(control_socket::Request::StopPartition { partition }) => {
                    let answer = match self.known_member(&partition) {
                        Err(why) => control_socket::Response { ok: false, detail: why },
                        Ok(()) => {
                            self.monitor.log().record(&partition, EVENT_OPERATOR, None, None, Some("stop".into()));
                            self.stop_partition(&partition, "stopped by the operator");
                            control_socket::Response { ok: true, detail: format!("{partition} stopped; it stays stopped until restarted") }
                        }
                    };
                    control_socket::answer(stream, &answer);
                }
            }
        }
    }

    /// The operator's `partita router reload`: the system file read again, and each I/O partition whose route
    /// table changed given its new router file (crate::router_reload). Everything is checked before anything is
    /// written; the host's copy is written before the partition's, so that a restart reads the new table.
    fn reload_routers(&mut self) -> control_socket::Response {
        use crate::router_reload::{changes, read_again, write_host_copy, write_own_copy, Reads, Refused};
        let refused = |r: Refused| control_socket::Response { ok: false, detail: r.to_string() };
        let new = match read_again(&self.system) {
            Ok(n) => n,
            Err(r) => return refused(r),
        };
        let changed = match changes(&self.system, &new) {
            Ok(c) => c,
            Err(r) => return refused(r),
        };
        if changed.is_empty() {
            return control_socket::Response { ok: true, detail: format!("{}: no route table changed; nothing was reloaded", new.source) };
        }
        let file_of = |name: &str| self.router_files.iter().find(|f| f.partition == name).cloned();
        if let Some(c) = changed.iter().find(|c| file_of(&c.partition).is_some_and(|f| f.reads == Reads::GuestCopy)) {
            return refused(Refused::VirtualMachine { partition: c.partition.clone() });
        }
        let pids: std::collections::HashMap<String, Option<i32>> = self.monitor.pids().into_iter().collect();
        let (mut lines, mut ok) = (Vec::new(), true);
        for change in changed {
            let name = &change.partition;
            let Some(file) = file_of(name) else { continue };
            let Some(running) = self.system.modules.iter_mut().flat_map(|m| m.partitions.iter_mut()).find(|p| &p.name == name) else { continue };
            let text = change.now.to_file(&crate::router_reload::header(&new, name));
            if let Err(e) = write_host_copy(&file.host, &text) {
                lines.push(format!("{name}: not reloaded: {}: {e}", file.host.display()));
                ok = false;
                continue;
            }
            let pid = pids.get(name).copied().flatten();
            let watched = "its router takes it over on its next looks at the file (every 500 ms while the partition runs), and prints `reloaded: …` in the partition's log";
            let how = match (file.reads, pid) {
                (Reads::OwnCopy, Some(pid)) => match write_own_copy(pid, &text) {
                    Ok(()) => watched.to_string(),
                    Err(e) => {
                        // The host's copy is new, the running one is not: not in force yet, so a retry writes both again.
                        lines.push(format!("{name}: not reloaded: the partition's own copy could not be rewritten ({e}); it takes the new table over when it next starts, or ask again"));
                        ok = false;
                        continue;
                    }
                },
                (Reads::OwnCopy, None) => "the partition is not running: it takes it over when it next starts".to_string(),
                _ => watched.to_string(),
            };
            // The table now in force for this partition (only route tables differ between the two models).
            running.router = change.table.clone();
            let summary = change.summary();
            self.monitor.log().record(name, EVENT_OPERATOR, pid, None, Some(format!("router reload ({summary})")));
            lines.push(format!("{name}: route table reloaded from {} ({summary}); {how}", new.source));
        }
        control_socket::Response { ok, detail: lines.join("\n") }
    }

    /// Whether `name` is a partition or node of this system, or the answer that says it is not.
    fn known_member(&self, name: &str) -> std::result::Result<(), String> {
        if self.state.partitions.iter().any(|p| p.partition == name) {
            return Ok(());
        }
        let names: Vec<&str> = self.state.partitions.iter().map(|p| p.partition.as_str()).collect();
        Err(format!("{} has no partition or node named {name:?} (it has {})", self.state.system, names.join(", ")))
    }

    /// The operator's restart: also of a partition kept stopped, which gets its own health action back.
    fn operator_restart(&mut self, name: &str, cold: bool) -> control_socket::Response {
        if let Err(why) = self.known_member(name) {
            return control_socket::Response { ok: false, detail: why };
        }
        let (kind, mode) = if cold { (crate::health::RestartKind::Cold, Mode::ColdStart) } else { (crate::health::RestartKind::Warm, Mode::WarmStart) };
        let was_stopped = self.monitor.is_kept_stopped(name);
        self.monitor.log().record(name, EVENT_OPERATOR, None, None, Some(format!("restart ({})", kind.as_str())));
        self.monitor.release(name);
        self.hold(name, false);
        self.monitor.restart(name, kind);
        if let Some(c) = self.controls.iter().find(|c| c.name == name) {
            c.set_start_condition(StartCondition::NormalStart);
        }
        self.set_mode(name, mode, "restarted by the operator");
        let from = if was_stopped { " (it was kept stopped)" } else { "" };
        control_socket::Response { ok: true, detail: format!("{name} restarting ({}){from}", kind.as_str()) }
    }

    /// The requests partitions posted on their control pages, each judged and answered.
    fn read_controls(&mut self) {
        let now = Instant::now();
        for k in 0..self.controls.len() {
            let Some(request) = self.controls[k].page.take_request() else { continue };
            let (name, module, system_partition) = (self.controls[k].name.clone(), self.controls[k].module.clone(), self.controls[k].system_partition);
            let request = match request {
                Ok(r) => r,
                Err(outcome) => {
                    self.controls[k].page.answer(outcome);
                    self.illegal(&name, "a request the page cannot hold (unknown kind, argument out of range, or too long)", now);
                    continue;
                }
            };
            match request {
                Request::SetMode(Mode::Normal) => {
                    if matches!(self.controls[k].mode, Mode::ColdStart | Mode::WarmStart) {
                        self.controls[k].page.answer(Outcome::Done);
                        self.set_mode(&name, Mode::Normal, "at its own request");
                    } else {
                        // ARINC 653's NO_ACTION: normal already.
                        self.controls[k].page.answer(Outcome::Invalid);
                    }
                }
                Request::SetMode(Mode::Idle) => {
                    self.hold(&name, true);
                    self.controls[k].page.answer(Outcome::Done);
                    self.set_mode(&name, Mode::Idle, "at its own request");
                }
                Request::SetMode(m @ (Mode::ColdStart | Mode::WarmStart)) => {
                    self.controls[k].page.answer(Outcome::Done);
                    let kind = if m == Mode::ColdStart { crate::health::RestartKind::Cold } else { crate::health::RestartKind::Warm };
                    self.monitor.restart(&name, kind);
                    self.restarted(&name, m, StartCondition::PartitionRestart);
                }
                Request::RaiseError { kind, message } => match ErrorKind::from_code(u64::from(kind)).filter(|k| k.raisable()) {
                    Some(kind) => {
                        self.controls[k].page.answer(Outcome::Done);
                        self.monitor.log().record(&name, crate::modes::EVENT_ERROR_RAISED, None, None, Some(format!("{}: {message}", kind.as_str())));
                        self.on_error(&name, kind, false, now);
                    }
                    None => {
                        self.controls[k].page.answer(Outcome::Refused);
                        self.illegal(&name, &format!("raising error code {kind}, which a partition may not raise"), now);
                    }
                },
                Request::SwitchPlan(index) => {
                    let plan = self.module_plans.iter().find(|m| m.module == module).and_then(|m| m.names.get(index as usize).cloned());
                    match plan {
                        _ if !system_partition => {
                            self.controls[k].page.answer(Outcome::Refused);
                            self.monitor.log().record(&module, crate::modes::EVENT_PLAN_SWITCH_REFUSED, None, None, Some(format!("asked by partition {name}, which is not a system partition")));
                            self.illegal(&name, "a plan switch: it is not a system partition", now);
                        }
                        None => self.controls[k].page.answer(Outcome::NoSuchPlan),
                        Some(plan) => {
                            let by = format!("by system partition {name}");
                            let outcome = if self.switch_plan(&module, &plan, false, &by).is_ok() { Outcome::Done } else { Outcome::NoSuchPlan };
                            self.controls[k].page.answer(outcome);
                        }
                    }
                }
            }
        }
    }

    /// A partition's refused request: logged (at most once a second per partition, the rest counted) and
    /// handed to the tables as an illegal request.
    fn illegal(&mut self, name: &str, what: &str, now: Instant) {
        let entry = self.illegal_logged.entry(name.to_string()).or_insert((now - Duration::from_secs(2), 0));
        if now.duration_since(entry.0) >= Duration::from_secs(1) {
            let more = if entry.1 > 0 { format!(" ({} more since the last one logged)", entry.1) } else { String::new() };
            self.monitor.log().record(name, crate::modes::EVENT_ILLEGAL_REQUEST, None, None, Some(format!("refused: {what}{more}")));
            *entry = (now, 0);
        } else {
            entry.1 += 1;
        }
        self.on_error(name, ErrorKind::IllegalRequest, false, now);
    }

    /// Stops the plans and removes everything, in reverse order of the build.
    pub fn down(mut self) -> Result<Vec<ExecutorLog>> {
        self.read_overruns();
        if let Some(mut t) = self.trace.take() {
            t.drain(&self.executors, self.monitor.log());
            t.finish();
        }
        let mut logs = Vec::new();
        for (e, members) in self.executors.drain(..).zip(std::mem::take(&mut self.plan_partitions)) {
            let mut log = e.stop()?;
            // The executor numbers its partitions among its own; the timeline numbers them in their module.
            for start in &mut log.starts {
                start.partition = members[start.partition];
            }
            logs.push(log);
        }
        self.monitor.kill_all();
        // The partitions' last words reach their logs before the system counts as down.
        for log in &self.logs {
            if !log.drained(Duration::from_secs(5)) {
                tracing::warn!(target: "partita::supervisor", "{}: output still coming 5 s after the partition ended", log.path().display());
            }
        }
        Ok(logs)
        // The remaining fields drop here, in declaration order.
    }
}

/// What building each partition and node needs: the system, where things go, the bridges made for its
/// networks; and what the members built leave for their plans' executors (freezers and time guards, in member
/// order).
struct Build<'a> {
    system: &'a System,
    options: &'a UpOptions,
    layout: &'a Layout,
    partita: &'a Path,
    state_path: &'a Path,
    bridges: Vec<(NetworkId, usize)>,
    guests: Guests,
    freezers: Vec<Option<Freezer>>,
    guards: Vec<Option<TimeGuard>>,
    channels: crate::ports::Channels,
    /// The planned process partitions' control pages, in member order.
    pages: Vec<Option<Arc<ControlPage>>>,
}

impl Build<'_> {
    /// One partition or node: its cgroup, namespace, V-NICs and uplink, DDS configurations and router file,
    /// its guest (a VM partition) and its view of the host; then its start (frozen when planned), watched by
    /// the health monitor. What it makes goes into `s`, so that a failure later on removes it too.
    fn member(&mut self, s: &mut Supervisor, member: Member) -> Result<()> {
        let (system, options, layout, partita, state_path) = (self.system, self.options, self.layout, self.partita, self.state_path);
        let (bridges, guests, freezers, guards, pages) = (&self.bridges, &mut self.guests, &mut self.freezers, &mut self.guards, &mut self.pages);
        let tree = member.tree;
        let cpus = (!tree.cpus.is_empty()).then(|| tree.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","));
        // A planned partition that may be demoted gets a cpu controller group of its own (not one granted
        // SCHED_FIFO: docs/security.md, "Time partitioning and kernel work").
        let plan = member.partition.and_then(|p| Some((p, &member.module?.plans[p.plan?])));
        let cpu_group = plan.is_some_and(|(_, pl)| pl.demote) && tree.scheduling == Scheduling::Normal;
        let disk = match (&tree.confinement, tree.disk.is_unlimited()) {
            (Some(c), false) => partita_os::blockdev::whole_disk_of(&c.state_dir).ok().flatten().map(|d| (d, tree.disk)),
            _ => None,
        };
        let limits = Limits { memory_bytes: tree.memory.map(|m| m.0), pids_max: tree.pids_max, cpus, mems: None, cpu_group, disk };
        let cg = Arc::new(PartitionCgroup::create(&layout, &tree.cgroup, &limits)?);
        s.cgroups.push(cg.clone());
        let ns = NetNamespace::create(&tree.netns)?;
        // A VM partition's V-NICs are taps (made below with its guest); its namespace stays empty.
        let vm = member.partition.and_then(|p| p.vm.as_ref());
        let mut domains = Vec::new();
        let mut fastdds = FastDdsProfile { addresses: Vec::new(), peers: Vec::new(), max_participant_index: 20 };
        for nic in tree.nics.iter().filter(|_| vm.is_none()) {
            let (net, bridge) = bridges
                .iter()
                .find(|(id, _)| *id == nic.network)
                .and_then(|(id, b)| Some((system.network(*id)?, &s.bridges[*b])))
                .ok_or_else(|| SupervisorError::Model { member: member.name.to_string(), broken: "a V-NIC names a network the system does not have" })?;
            s.nics.push(VirtualNic::create(&nic.host_name, &nic.name, &ns, bridge, nic.address, net.subnet.prefix())?);
            if s._host_tuning.is_some() && !system.host.housekeeping_cpus.is_empty() {
                for l in host_tuning::steer_vnics(&[nic.host_name.as_str()], &system.host.housekeeping_cpus) {
                    s.monitor.log().record(member.name, "host_setting_left", None, None, Some(l));
                }
            }
            domains.push(CycloneConfig::new(&nic.name, nic.domain.get(), system.addresses_on(nic.network)));
            fastdds.addresses.push(nic.address);
            fastdds.peers.extend(system.addresses_on(nic.network));
        }
        // An I/O partition's sides reach each other only through its program (the routing service).
        let mut sides: Vec<Side> = tree.nics.iter().filter(|_| vm.is_none()).map(|n| Side { interface: &n.name, address: n.address, domain: n.domain.get() }).collect();
        if let Some(u) = &tree.uplink {
            sides.push(Side { interface: UPLINK_NIC, address: u.address, domain: u.domain.get() });
        }
        // A secure uplink's credentials: a confined partition reads copies it owns, bound read-only in its view.
        let mut security_binds: Vec<(PathBuf, &'static str)> = Vec::new();
        if let Some(u) = &tree.uplink {
            s.uplinks.push(HandedUplink::hand_over(u, &system.name, member.name, &ns)?);
            s.monitor.log().record(member.name, "uplink", None, None, Some(format!("{} ({}) as {UPLINK_NIC} {}/{}", u.interface, u.mode, u.address, u.prefix)));
            let mut config = CycloneConfig::uplink(u);
            if let Some(sec) = &u.security {
                let (files, binds) = crate::uplink::security_files(sec, tree.confinement.as_ref().map(|c| c.uid), &state_path.join(format!("{}.security", member.name)))?;
                config.security = Some(files);
                security_binds = binds;
            }
            domains.push(config);
            fastdds.addresses.push(u.address);
            fastdds.peers.extend(&u.peers);
        }
        crate::vnet::strong_host(&ns, &sides)?;
        // The routing service of an I/O partition: one receive thread per domain (docs/router.md, "Threads").
        if member.partition.is_some_and(|p| p.io) {
            domains.iter_mut().for_each(|d| d.one_receive_thread = true);
        }
        let xml_path = state_path.join(format!("{}.xml", member.name));
        // A partition without a network (`network = false`) gets no DDS configuration: its namespace holds only
        // the loopback interface, and it talks through its ports.
        let networkless = member.partition.is_some_and(|p| !p.network);
        let uri = match vm {
            Some(_) => String::new(),
            None if networkless => String::new(),
            None => CycloneConfig::write_all(&domains, &xml_path).map_err(|e| SupervisorError::Member { member: member.name.to_string(), source: Box::new(e) })?,
        };
        // The same network for Fast DDS programs (their default profile), which would otherwise bind every
        // interface, multicast and share memory with every Fast DDS program of the host.
        let fastdds_path = state_path.join(format!("{}.fastdds.xml", member.name));
        let fastdds_written = match vm {
            None if !fastdds.addresses.is_empty() => {
                let xml = fastdds.to_xml().map_err(|source| SupervisorError::DdsConfig { what: format!("{}: its Fast DDS profile", member.name), source })?;
                std::fs::write(&fastdds_path, xml).map_err(path_err("write", &fastdds_path))?;
                true
            }
            _ => false,
        };
        // An I/O partition's routing service: its whole configuration, as a router file.
        let io = member.partition.filter(|p| p.io);
        let router = io.and_then(|p| system.router_config(p)).map(|r| r.to_file(&crate::router_reload::header(system, member.name)));
        let router_path = state_path.join(format!("{}.router.toml", member.name));
        if let (Some(text), None) = (&router, vm) {
            std::fs::write(&router_path, text).map_err(path_err("write", &router_path))?;
        }
        // Where its router reads the file: a VM's guest archive, a confined partition's own copy, the host's.
        let reads = router.as_ref().map(|_| match (vm, &tree.confinement) {
            (Some(_), _) => crate::router_reload::Reads::GuestCopy,
            (None, Some(_)) => crate::router_reload::Reads::OwnCopy,
            (None, None) => crate::router_reload::Reads::HostCopy,
        });
        if let Some(reads) = reads {
            s.router_files.push(crate::router_reload::RouterFile { partition: member.name.to_string(), host: router_path.clone(), reads });
        }
        let confine = match &tree.confinement {
            Some(c) => {
                s._state_dirs.0.push(c.state_dir.clone());
                let mut confine = confine(c, &state_path.join(format!("{}.root", member.name)), (vm.is_none() && !networkless).then_some(xml_path.as_path()))?;
                s.state_images.push(StateImage::mount(&c.state_dir, c.state_quota, c.uid)?);
                confine.fastdds_profile = fastdds_written.then(|| fastdds_path.clone());
                confine.router_file = (reads == Some(crate::router_reload::Reads::OwnCopy)).then(|| router_path.clone());
                confine.guest_files.extend(security_binds.iter().cloned());
                confine.memory = tree.memory.map(|m| m.0);
                Some(confine)
            }
            None => None,
        };
        // A confined partition reads its DDS configurations where its view puts them.
        let uri = if confine.is_some() && !networkless { format!("file://{}", rootfs::DDS_CONFIG) } else { uri };
        let fastdds_profile = fastdds_written.then(|| if confine.is_some() { rootfs::FASTDDS_PROFILE.to_string() } else { fastdds_path.display().to_string() });
        freezers.push(match member.partition.and_then(|p| p.plan) {
            Some(_) => {
                let f = Freezer::new(&cg, options.backend.unwrap_or_else(|| FreezeBackend::best_for(&cg)))?;
                s.state.freeze_backend = f.backend().name();
                f.freeze()?;
                Some(f)
            }
            None => None,
        });
        guards.push(match plan {
            Some((p, pl)) => Some(TimeGuard::new(&cg, OverrunPolicy::from_system(&p.time_overrun, pl.demote))?),
            None => None,
        });
        let Some((program, args)) = tree.command.split_first() else {
            return Err(SupervisorError::Model { member: member.name.to_string(), broken: "its command is empty" });
        };
        // `partita route`, `partita app recorder`, …: the small binary of that program, beside partita.
        let (program, args) = if program == PARTITA_PROGRAM { partita_env::programs::resolve(&partita, args) } else { (PathBuf::from(program), args.to_vec()) };
        let program = program.display().to_string();
        let environment = PartitionEnv {
            partition: member.name.to_string(),
            module: member.module.map_or(member.name, |m| &m.name).to_string(),
            // A node with an uplink speaks on it: it stands for a machine on that network.
            domain: match (&tree.uplink, member.partition) {
                (Some(u), None) => u.domain,
                _ => tree.nics.first().map_or(system.network.domain, |n| n.domain),
            }
            .get(),
            external_domain: io.and(tree.nics.iter().find(|n| n.network == NetworkId::InterModule)).map(|n| n.domain.get()),
            uplink_domain: io.and(tree.uplink.as_ref()).map(|u| u.domain.get()),
            router_file: reads.map(|r| match r {
                crate::router_reload::Reads::GuestCopy => partita_vm::GUEST_ROUTER_FILE.to_string(),
                crate::router_reload::Reads::OwnCopy => rootfs::ROUTER_FILE.to_string(),
                crate::router_reload::Reads::HostCopy => router_path.display().to_string(),
            }),
            cyclonedds_uri: uri,
            fastdds_profile,
            state_dir: tree.confinement.as_ref().map(|c| c.state_dir.display().to_string()),
            ports: Vec::new(),
        };
        // Its ARINC 653 ports (process partitions only: check refuses a channel to a VM partition).
        let ports = match (member.module, member.partition, vm) {
            (Some(m), Some(_), None) => Some(self.channels.for_partition(m, member.name, 3)?),
            _ => None,
        };
        let mut environment = environment;
        if let Some(p) = &ports {
            environment.ports = p.entries.clone();
        }
        // A planned process partition's control page: its mode, the module's plans, its requests. It follows
        // its ports' descriptors.
        let page = match (member.module, member.partition, vm) {
            (Some(m), Some(p), None) if p.plan.is_some() => {
                let names: Vec<&str> = m.plan_sets().iter().map(|(n, _)| *n).collect();
                let page = ControlPage::create(member.name, &names).map_err(|e| SupervisorError::Sys { call: "memfd_create", context: format!("the control page of {}", member.name), source: e })?;
                Some(Arc::new(page))
            }
            _ => None,
        };
        let mut control_fd: Option<(Arc<std::os::fd::OwnedFd>, i32)> = None;
        if let Some(page) = &page {
            let fd = page.fd_for_partition().map_err(|e| SupervisorError::Sys { call: "fcntl", context: format!("the control page of {}", member.name), source: e })?;
            let number = 3 + ports.as_ref().map_or(0, |p| p.fds.len()) as i32;
            control_fd = Some((Arc::new(fd), number));
        }
        pages.push(page);
        let log = PartitionLog::new(state_path.join(format!("{}.log", member.name)), tree.log_size);
        s.logs.push(log.clone());
        let mut spec = LaunchSpec {
            partition: member.name.to_string(),
            program,
            args,
            env: tree.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            cgroup_procs: cg.procs_files(),
            netns: Some(ns.path()),
            environment: Some(environment.clone()),
            output: Some(log.clone()),
            fifo_priority: match tree.scheduling {
                Scheduling::Fifo { priority } => Some(priority),
                Scheduling::Normal => None,
            },
            confine,
            pass_fds: ports.as_ref().map(|p| p.fds.clone()).unwrap_or_default(),
        };
        if let Some((fd, number)) = control_fd {
            spec.pass_fds.push(fd);
            spec.env.push((partita_env::CONTROL.to_string(), number.to_string()));
        }
        s.ports.extend(ports.into_iter().flat_map(|p| p.watched));
        let mut guest_seen: Vec<PathBuf> = Vec::new();
        if let Some(vm) = vm {
            // The partition's program is the runner, QEMU its child; the guest gets the command, its file's
            // environment and the supervisor's variables.
            let (Some(granted), Some(confine)) = (&tree.confinement, spec.confine.as_mut()) else {
                return Err(SupervisorError::Model { member: member.name.to_string(), broken: "a VM partition without confinement" });
            };
            let bridge_of = |id: NetworkId| bridges.iter().find(|(i, _)| *i == id).map(|(_, b)| &s.bridges[*b]);
            let place = GuestPlace {
                partition: member.name,
                vm,
                tree,
                env: environment.clone(),
                partita: &partita,
                state_path: &state_path,
                uid: granted.uid,
                state_dir: &granted.state_dir,
                router_file: router.clone(),
            };
            let guest = guests.prepare(system, place, bridge_of)?;
            let (runner, args) = partita_env::programs::resolve(&partita, &guest.args);
            spec.program = runner.display().to_string();
            spec.args = args;
            spec.env.clear();
            spec.pass_fds = guest.pass_fds();
            confine.kvm = guest.kvm_node();
            confine.guest_files = guest.files.clone();
            guest_seen = guest.seen.clone();
            s.taps.extend(guest.taps);
            s.kvm_nodes.extend(guest.kvm);
        }
        // What of the host it sees: its program (partita's runner for a VM partition, with QEMU) and binds.
        if let (Some(confine), Some(granted)) = (spec.confine.as_mut(), &tree.confinement) {
            let program = crate::launch::resolve_program(&spec.program)?;
            confine.seen = crate::launch::view::seen(&program, &granted.binds, vm.is_some(), &guest_seen).map_err(|e| SupervisorError::Member { member: member.name.to_string(), source: Box::new(e) })?;
        }
        s.namespaces.push(ns);
        let address = |id: fn(&NetworkId) -> bool| tree.nics.iter().find(|n| id(&n.network)).map(|n| n.address);
        s.state.partitions.push(PartitionState {
            module: member.module.map(|m| m.name.clone()),
            partition: member.name.to_string(),
            pid: None,
            windows: None,
            address: address(|id| matches!(id, NetworkId::Module(_))),
            external_address: address(|id| *id == NetworkId::InterModule),
            mode: None,
            cpu_us: None,
            memory_bytes: None,
            restarts: 0,
        });
        let action = health_action(&tree.health);
        let starter: crate::health::Starter = match vm {
            Some(vm) => {
                let boot_timeout = vm.boot_timeout.to_std();
                Box::new(move || launch_guest(&spec, boot_timeout))
            }
            None => Box::new(move || launch(&spec)),
        };
        s.monitor.start(member.name, action, cg, starter)?;
        // A partition's ends go to the health-monitor tables (which fall back to its `health`).
        if member.partition.is_some() {
            s.monitor.defer(member.name, tree.confinement.as_ref().map(|c| c.state_dir.clone()));
        }
        // Its time guard (pushed above, for this member) holds nothing of its launch against it.
        if let (Some(Some(guard)), Some(clock)) = (guards.last_mut(), s.monitor.program_clock(member.name)) {
            guard.watch_program(clock);
        }
        Ok(())
    }
}


/// Mounts the cgroup v2 hierarchy with `favordynmods`, so that moving a process into a cgroup (every start
/// and restart of a partition) does not wait for an RCU grace period while holding the lock the plan executor's
/// freeze and thaw writes need: measured here, without it each restart in a crash loop delayed window starts by
/// up to 10 ms (`partita isolation-bench crash-loop`, docs/supervisor.md). It makes forks and exits slightly
/// dearer for the whole machine, and stays on until the hierarchy is mounted again.
fn favor_dynamic_cgroup_changes() {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return };
    for line in info.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let (Some(mount_point), Some(fstype), Some(options)) = (left.split(' ').nth(4), right.split(' ').next(), right.split(' ').nth(2)) else { continue };
        if fstype == "cgroup2" && !options.split(',').any(|o| o == "favordynmods") {
            match crate::command::run("mount", &["-o", "remount,favordynmods", mount_point]) {
                Ok(_) => tracing::info!(target: "partita::supervisor", "{mount_point}: cgroup v2 remounted with favordynmods (partition restarts no longer delay window starts)"),
                Err(e) => tracing::warn!(target: "partita::supervisor", "{mount_point}: could not turn on favordynmods ({e}); partition restarts may delay window starts by milliseconds"),
            }
        }
    }
}

/// What the launcher needs of a partition's confinement; creates its state directory (owned by its host uid,
/// kept across runs) on the way.
fn confine(c: &partita_system::Confinement, root: &Path, dds_config: Option<&Path>) -> Result<Confine> {
    std::fs::create_dir_all(&c.state_dir).map_err(path_err("mkdir", &c.state_dir))?;
    std::os::unix::fs::chown(&c.state_dir, Some(c.uid), Some(c.uid)).map_err(path_err("chown", &c.state_dir))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&c.state_dir, std::fs::Permissions::from_mode(0o700)).map_err(path_err("chmod", &c.state_dir))?;
    Ok(Confine { granted: c.clone(), dds_config: dds_config.map(Path::to_path_buf), root: root.to_path_buf(), memory: None, kvm: None, guest_files: Vec::new(), fastdds_profile: None, router_file: None, seen: Default::default() })
}

/// A partition or native node, as the build loop sees it.
struct Member<'a> {
    name: &'a str,
    module: Option<&'a Module>,
    partition: Option<&'a Partition>,
    tree: &'a ProcessTree,
}

fn health_action(h: &HealthAction) -> Action {
    match h {
        HealthAction::Restart { max_restarts, window, backoff } => {
            Action::Restart { max: *max_restarts, within: window.to_std(), backoff: backoff.to_std() }
        }
        HealthAction::Stop => Action::Stop,
        HealthAction::Ignore => Action::Ignore,
    }
}

/// Reads every running system's state (for `partita status`).
pub fn read_states(state_root: &Path) -> Vec<(PathBuf, serde_json::Value)> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(state_root) {
        for e in entries.flatten() {
            let p = e.path().join("state.json");
            if let Ok(t) = std::fs::read_to_string(&p) {
                if let Ok(v) = serde_json::from_str(&t) {
                    out.push((p, v));
                }
            }
        }
    }
    out
}


/// Writes every recorded window start of the plans as JSON lines (`module` = index of the plan, one per
/// planned module unless a module has one per CPU; `partition` = index of the partition in its module), for
/// comparing the executed timeline with the plan.
pub fn write_timeline(path: &Path, logs: &[ExecutorLog]) -> Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(path_err("create", path))?);
    for (m, log) in logs.iter().enumerate() {
        for s in &log.starts {
            let line = serde_json::json!({
                "module": m, "frame": s.frame, "window": s.window, "partition": s.partition,
                "planned_ns": s.planned_ns, "woke_ns": s.woke_ns, "switched_ns": s.switched_ns,
                "lateness_ns": s.lateness_ns(), "switch_ns": s.switch_ns(),
            });
            writeln!(f, "{line}").map_err(path_err("write", path))?;
        }
    }
    f.flush().map_err(path_err("write", path))
}

/// Draws `frames` consecutive frames of each plan (from the middle of the run) as an SVG picture: one row per
/// partition, planned windows as outlines, executed windows (from one switch to the next) filled.
pub fn write_timeline_svg(path: &Path, logs: &[ExecutorLog], frames: u64) -> Result<()> {
    use std::fmt::Write as _;
    let (width, row_h, left) = (900.0f64, 22.0f64, 90.0f64);
    let mut body = String::new();
    let mut y = 10.0;
    for (m, log) in logs.iter().enumerate() {
        let starts: Vec<&crate::executor::WindowStart> = log.starts.iter().collect();
        if starts.len() < 2 {
            continue;
        }
        let first_frame = starts[starts.len() / 2].frame;
        let sel: Vec<usize> = (0..starts.len() - 1)
            .filter(|&i| starts[i].frame >= first_frame && starts[i].frame < first_frame + frames)
            .collect();
        let (Some(&a), Some(&b)) = (sel.first(), sel.last()) else { continue };
        let t0 = starts[a].planned_ns;
        let t1 = starts[b + 1].planned_ns.max(starts[b + 1].switched_ns);
        let scale = (width - left - 10.0) / (t1 - t0).max(1) as f64;
        let x = |t: u64| left + (t.saturating_sub(t0)) as f64 * scale;
        let mut parts: Vec<usize> = sel.iter().map(|&i| starts[i].partition).collect();
        parts.sort_unstable();
        parts.dedup();
        let _ = writeln!(body, r#"<text x="4" y="{:.0}" font-size="12">plan {m}: frames {}–{} </text>"#, y + 12.0, first_frame, first_frame + frames - 1);
        y += 18.0;
        for p in &parts {
            let _ = writeln!(body, r#"<text x="4" y="{:.0}" font-size="12">partition {p}</text>"#, y + 15.0);
            for &i in &sel {
                if starts[i].partition != *p {
                    continue;
                }
                let (ps, pe) = (x(starts[i].planned_ns), x(starts[i + 1].planned_ns));
                let (as_, ae) = (x(starts[i].switched_ns), x(starts[i + 1].switched_ns));
                let _ = writeln!(body, r#"<rect x="{ps:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="gray"/>"#, y + 2.0, (pe - ps).max(0.5), row_h - 4.0);
                let _ = writeln!(body, r#"<rect x="{as_:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="steelblue" opacity="0.7"/>"#, y + 5.0, (ae - as_).max(0.5), row_h - 10.0);
            }
            y += row_h;
        }
        let span_us = (t1 - t0) as f64 / 1e3;
        let _ = writeln!(body, r#"<text x="{left}" y="{:.0}" font-size="11">0 µs</text><text x="{:.0}" y="{:.0}" font-size="11" text-anchor="end">{span_us:.0} µs</text>"#, y + 12.0, width - 10.0, y + 12.0);
        y += 26.0;
    }
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{:.0}\" font-family=\"sans-serif\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"11\">outline: planned window; filled: executed (switch to next switch)</text>\n{body}</svg>\n",
        y + 20.0,
        left,
        y + 12.0
    );
    std::fs::write(path, svg).map_err(path_err("write", path))
}
