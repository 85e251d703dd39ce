//! `Supervisor::up`: builds a whole system in order (cgroups, namespaces, networks, DDS configurations,
//! partitions, plan executors) and tears everything down in reverse, on any error during the build (never a
//! half-built system), at the end of the run, and on SIGINT/SIGTERM.
use crate::cgroup::{check_component, Layout, Limits, PartitionCgroup};
use crate::clock::unix_ms;
use crate::dds_config::CycloneConfig;
use crate::error::{path_err, Result, SupervisorError};
use crate::executor::{Executor, ExecutorConfig, ExecutorLog, Schedule, Window};
use crate::freeze::{FreezeBackend, Freezer};
use crate::health::{EventLog, HealthMonitor};
use crate::launch::{launch, LaunchSpec};
use crate::system::SystemSpec;
use crate::vnet::{Bridge, NetNamespace, VirtualNic};
use serde::Serialize;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where running supervisors write their state (`<dir>/<system>/state.json`, `events.jsonl`, DDS files).
pub const STATE_DIR: &str = "/run/partita";

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT request an orderly stop instead of killing the process: the supervisor
/// tears its system down, and the long-running roles (route, recorder, udp-echo) end their loops.
pub use partita_os::signal::{install_stop_signals, stop_flag, stop_requested};

/// Host-side names of everything of one system. Interface names are `pt` + a 4-hex-digit tag of the system
/// name + role + indices, at most 15 characters.
#[derive(Debug, Clone)]
pub struct Names {
    system: String,
    tag: String,
}

impl Names {
    pub fn new(system: &str) -> Names {
        // FNV-1a: a stable short tag, so every link of one system shares a prefix.
        let mut h: u32 = 0x811c9dc5;
        for b in system.bytes() {
            h = (h ^ b as u32).wrapping_mul(0x01000193);
        }
        Names { system: system.into(), tag: format!("{:04x}", h & 0xffff) }
    }
    pub fn link_prefix(&self) -> String {
        format!("pt{}", self.tag)
    }
    pub fn module_bridge(&self, m: usize) -> String {
        format!("pt{}m{m}", self.tag)
    }
    pub fn external_bridge(&self) -> String {
        format!("pt{}x", self.tag)
    }
    pub fn vnic(&self, m: usize, p: usize) -> String {
        format!("pt{}{m}n{p}", self.tag)
    }
    pub fn external_vnic(&self, m: usize, p: usize) -> String {
        format!("pt{}{m}x{p}", self.tag)
    }
    pub fn netns(&self, module: &str, partition: &str) -> String {
        format!("partita-{}-{module}-{partition}", self.system)
    }
    pub fn cgroup_partition(&self, module: &str, partition: &str) -> String {
        format!("{module}-{partition}")
    }
}

/// Addresses: module `m`'s V-NETWORK is 198.18.m.0/24, the inter-module network 198.19.0.0/24.
pub fn module_address(m: usize, p: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, m as u8, (p + 2) as u8)
}
pub fn external_address(index: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, 0, (index + 2) as u8)
}

#[derive(Debug, Clone, Serialize)]
pub struct PartitionState {
    pub module: String,
    pub partition: String,
    pub pid: Option<i32>,
    /// On the module network (`None` for a native node).
    pub address: Option<Ipv4Addr>,
    pub external_address: Option<Ipv4Addr>,
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
}

/// A built, running system. Fields drop in declaration order: plans stop first, then partitions are
/// killed, then cgroups, V-NICs, namespaces and bridges go, the state directory last.
pub struct Supervisor {
    executors: Vec<Executor>,
    /// Per executor: the module index of each partition it schedules (its freezers' order).
    plan_partitions: Vec<Vec<usize>>,
    monitor: HealthMonitor,
    cgroups: Vec<Arc<PartitionCgroup>>,
    nics: Vec<VirtualNic>,
    namespaces: Vec<NetNamespace>,
    bridges: Vec<Bridge>,
    state_dir: StateDir,
    state: State,
}

/// The system's directory under /run/partita. When the system goes down its state file goes (the system is
/// no longer up); the event log, partition output and DDS files stay for inspection until `partita down`.
struct StateDir(PathBuf);
impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0.join("state.json"));
    }
}

impl Supervisor {
    /// Builds and starts `system`; on error everything built so far is removed before returning.
    pub fn up(system: &SystemSpec, state_root: &Path, backend: Option<FreezeBackend>) -> Result<Supervisor> {
        check_component("system", &system.name)?;
        let names = Names::new(&system.name);
        let layout = Layout::detect()?;
        let state_path = state_root.join(&system.name);
        if state_path.join("state.json").exists() {
            return Err(SupervisorError::Invalid(format!(
                "{} exists: system {} is already up (or its supervisor crashed: run `partita down`)",
                state_path.display(),
                system.name
            )));
        }
        std::fs::create_dir_all(&state_path).map_err(path_err("mkdir", &state_path))?;
        let events_path = state_path.join("events.jsonl");
        let events = std::fs::File::create(&events_path).map_err(path_err("create", &events_path))?;
        let mut s = Supervisor {
            executors: Vec::new(),
            plan_partitions: Vec::new(),
            monitor: HealthMonitor::new(EventLog::new(Some(Box::new(events)))),
            cgroups: Vec::new(),
            nics: Vec::new(),
            namespaces: Vec::new(),
            bridges: Vec::new(),
            state_dir: StateDir(state_path.clone()),
            state: State {
                system: system.name.clone(),
                supervisor_pid: std::process::id(),
                started_unix_ms: unix_ms(),
                updated_unix_ms: unix_ms(),
                freeze_backend: "none",
                partitions: Vec::new(),
                frames: Vec::new(),
                max_lateness_ns: Vec::new(),
            },
        };
        // 1. Networks.
        let needs_external = system.modules.iter().any(|m| m.is_native() || m.partitions.iter().any(|p| p.io));
        // A native node is on the inter-module network only: no module network of its own.
        let mut module_bridge = Vec::new();
        for (mi, m) in system.modules.iter().enumerate() {
            if !m.has_module_network() {
                module_bridge.push(None);
            } else {
                s.bridges.push(Bridge::create(&names.module_bridge(mi))?);
                module_bridge.push(Some(s.bridges.len() - 1));
            }
        }
        let external_bridge = if needs_external {
            s.bridges.push(Bridge::create(&names.external_bridge())?);
            Some(s.bridges.len() - 1)
        } else {
            None
        };
        // External addresses: I/O partitions and native nodes, in order.
        let mut external_members = Vec::new();
        for (mi, m) in system.modules.iter().enumerate() {
            for (pi, p) in m.partitions.iter().enumerate() {
                if m.is_external(p) {
                    external_members.push((mi, pi));
                }
            }
        }
        // The system's addresses where it gives them, the supervisor's defaults elsewhere.
        let ext_of = |i: usize, (mi, pi): (usize, usize)| {
            system.modules[mi].partitions[pi].external_address.unwrap_or((external_address(i), 24))
        };
        let ext_addr = |mi: usize, pi: usize| external_members.iter().position(|x| *x == (mi, pi)).map(|i| ext_of(i, (mi, pi)));
        let all_external: Vec<Ipv4Addr> = external_members.iter().enumerate().map(|(i, m)| ext_of(i, *m).0).collect();
        // 2. Per partition: cgroup, namespace, V-NICs, DDS configuration; then launch (frozen when planned).
        let mut freezers: Vec<Vec<Option<Freezer>>> = Vec::new();
        for (mi, m) in system.modules.iter().enumerate() {
            check_component("module", &m.name)?;
            let mut module_freezers = Vec::new();
            let addr_of = |pi: usize| m.partitions[pi].address.unwrap_or((module_address(mi, pi), 24));
            let module_peers: Vec<Ipv4Addr> = (0..m.partitions.len()).map(|pi| addr_of(pi).0).collect();
            for (pi, p) in m.partitions.iter().enumerate() {
                check_component("partition", &p.name)?;
                // With one plan per CPU, a partition runs on its plan's CPU only.
                let cpus = match (m.plans.len() > 1, m.plan_of(&p.name)) {
                    (true, Some(plan)) => plan.executor_cpu.map(|c| c.to_string()).or_else(|| m.cpus.clone()),
                    _ => m.cpus.clone(),
                };
                let limits = Limits { memory_bytes: p.memory_bytes, pids_max: p.pids_max, cpus, mems: None };
                let cg = Arc::new(PartitionCgroup::create(&layout, &system.name, &names.cgroup_partition(&m.name, &p.name), &limits)?);
                s.cgroups.push(cg.clone());
                let ns = NetNamespace::create(&names.netns(&m.name, &p.name))?;
                let external = ext_addr(mi, pi);
                let mut domains = Vec::new();
                let address = match module_bridge[mi] {
                    Some(b) => {
                        let (a, prefix) = addr_of(pi);
                        s.nics.push(VirtualNic::create(&names.vnic(mi, pi), "vnic0", &ns, &s.bridges[b], a, prefix)?);
                        domains.push(CycloneConfig::new("vnic0", m.domain, module_peers.clone()));
                        Some(a)
                    }
                    None => None,
                };
                if let (Some((a, prefix)), Some(b)) = (external, external_bridge) {
                    s.nics.push(VirtualNic::create(&names.external_vnic(mi, pi), "vnic1", &ns, &s.bridges[b], a, prefix)?);
                    domains.push(CycloneConfig::new("vnic1", system.external_domain, all_external.clone()));
                }
                let xml_path = state_path.join(format!("{}-{}.xml", m.name, p.name));
                let uri = CycloneConfig::write_all(&domains, &xml_path)?;
                module_freezers.push(match m.plan_of(&p.name) {
                    Some(_) => {
                        let f = Freezer::new(&cg, backend.unwrap_or_else(|| FreezeBackend::best_for(&cg)))?;
                        s.state.freeze_backend = f.backend().name();
                        f.freeze()?;
                        Some(f)
                    }
                    None => None,
                });
                let Some((program, args)) = p.command.split_first() else {
                    return Err(SupervisorError::Invalid(format!("partition {} has no command", p.name)));
                };
                let mut env = p.env.clone();
                if external.is_some() && m.has_module_network() {
                    env.push(("PARTITA_EXTERNAL_DOMAIN".into(), system.external_domain.to_string()));
                }
                let spec = LaunchSpec {
                    partition: p.name.clone(),
                    module: m.name.clone(),
                    domain: if m.has_module_network() { m.domain } else { system.external_domain },
                    program: program.clone(),
                    args: args.to_vec(),
                    env,
                    cgroup_procs: cg.procs_files(),
                    netns: Some(ns.path()),
                    cyclonedds_uri: Some(uri),
                    output: Some(state_path.join(format!("{}-{}.log", m.name, p.name))),
                };
                s.namespaces.push(ns);
                s.state.partitions.push(PartitionState {
                    module: m.name.clone(),
                    partition: p.name.clone(),
                    pid: None,
                    address,
                    external_address: external.map(|(a, _)| a),
                });
                s.monitor.start(&format!("{}/{}", m.name, p.name), p.action, cg, Box::new(move || Ok(launch(&spec)?.pid)))?;
            }
            freezers.push(module_freezers);
        }
        // 3. Plans: one executor per plan, owning the freezers of its partitions (in module order).
        for (m, mut module_freezers) in system.modules.iter().zip(freezers) {
            for (k, plan) in m.plans.iter().enumerate() {
                let members: Vec<usize> = (0..m.partitions.len()).filter(|&pi| m.plan_index(&m.partitions[pi].name) == Some(k)).collect();
                let mut windows = Vec::new();
                for (name, offset, duration) in &plan.windows {
                    let partition = m
                        .partitions
                        .iter()
                        .position(|p| &p.name == name)
                        .and_then(|pi| members.iter().position(|&x| x == pi))
                        .ok_or_else(|| {
                            SupervisorError::Invalid(format!(
                                "plan of module {} names partition {name}, which is unknown or already in another plan",
                                m.name
                            ))
                        })?;
                    windows.push(Window { partition, offset: *offset, duration: *duration });
                }
                let plan_freezers = members.iter().filter_map(|&pi| module_freezers[pi].take()).collect();
                let schedule = Schedule::new(plan.major_frame, windows)?;
                let cpu = plan.executor_cpu.or_else(|| m.cpus.as_deref().and_then(first_cpu));
                let config = ExecutorConfig { cpu, ..ExecutorConfig::default() };
                s.executors.push(Executor::start(schedule, plan_freezers, config)?);
                s.plan_partitions.push(members);
            }
        }
        s.write_state()?;
        Ok(s)
    }

    pub fn events(&self) -> &EventLog {
        self.monitor.log()
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir.0
    }

    fn write_state(&mut self) -> Result<()> {
        let pids = self.monitor.pids();
        for (st, (_, pid)) in self.state.partitions.iter_mut().zip(pids) {
            st.pid = pid;
        }
        self.state.updated_unix_ms = unix_ms();
        self.state.frames = self.executors.iter().map(|e| e.progress.lock().map(|p| p.frames).unwrap_or(0)).collect();
        self.state.max_lateness_ns =
            self.executors.iter().map(|e| e.progress.lock().map(|p| p.max_lateness_ns).unwrap_or(0)).collect();
        let path = self.state_dir.0.join("state.json");
        let tmp = self.state_dir.0.join("state.json.tmp");
        let text = serde_json::to_string_pretty(&self.state).map_err(|e| SupervisorError::Invalid(e.to_string()))?;
        std::fs::write(&tmp, text).map_err(path_err("write", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(path_err("rename", &path))
    }

    /// Watches the system until `duration` has passed (forever when `None`), a stop signal arrives, or
    /// `stop` is set; then tears it down and returns the plan executors' logs.
    pub fn run(mut self, duration: Option<Duration>, stop: Option<Arc<AtomicBool>>) -> Result<Vec<ExecutorLog>> {
        let t0 = Instant::now();
        let mut last_state = Instant::now();
        loop {
            self.monitor.poll();
            if stop_requested() || stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst)) || duration.is_some_and(|d| t0.elapsed() >= d) {
                break;
            }
            if last_state.elapsed() >= Duration::from_secs(1) {
                let _ = self.write_state();
                last_state = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.down()
    }

    /// Stops the plans and removes everything, in reverse order of the build.
    pub fn down(mut self) -> Result<Vec<ExecutorLog>> {
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
        Ok(logs)
        // The remaining fields drop here, in declaration order.
    }
}

fn first_cpu(list: &str) -> Option<usize> {
    list.split([',', '-']).next()?.trim().parse().ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_names_fit_and_share_the_system_prefix() {
        let n = Names::new("video-surveillance-node");
        for name in [n.module_bridge(9), n.external_bridge(), n.vnic(9, 99), n.external_vnic(9, 99)] {
            assert!(name.len() <= 15 && name.starts_with(&n.link_prefix()), "{name}");
        }
        assert_ne!(Names::new("a").link_prefix(), Names::new("b").link_prefix());
    }
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
