//! `partita check [SYSTEM.toml]`: validate a system file (the built-in default without one) and show its
//! plans, a timeline of each major frame, and its networks, addresses and domains.
use clap::Args;
use partita_system::{HostObjects, NetworkId, System};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct CheckArgs {
    /// The system file; without it, the built-in video-surveillance system of paper 001.
    pub file: Option<PathBuf>,
    /// Of a system spanning several hosts, check the part that runs on this one (its uplinks against this
    /// machine's interfaces).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
}

/// Characters of the timeline for one major frame.
const TIMELINE_WIDTH: usize = 60;

pub fn run(args: CheckArgs) -> ExitCode {
    let result = match &args.file {
        Some(f) => partita_system::load(f),
        None => partita_system::builtin_default(),
    };
    let result = result.map_err(|e| e.to_string()).and_then(|s| {
        // A system spanning hosts is checked whole without --host (no machine's interfaces say anything of it).
        if args.host.is_none() && !s.hosts.is_empty() {
            return Ok(s);
        }
        let s = partita_system::uplink::for_this_machine(s, args.host.as_deref()).map_err(|e| e.to_string())?;
        let held = partita_supervisor::uplink::held_by_others(&s);
        if held.is_empty() {
            Ok(s)
        } else {
            Err(format!("{}: {}", s.source, held.join("; ")))
        }
    });
    match result {
        Ok(system) => {
            print!("{}", render(&system));
            println!("{}: valid", system.source);
            ExitCode::SUCCESS
        }
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!("the system is not valid here");
            ExitCode::from(2)
        }
    }
}

/// For each request path of module `mi` (its `[[module.path]]`s, or else from its I/O partition to the plan's
/// other partition and back): the delay the windows alone add, over arrival instants.
fn path_delays(s: &System, mi: usize) -> String {
    let mut out = String::new();
    let plans = partita_schedule::PlanWindows::of_system(s);
    for (name, path) in partita_schedule::system::paths_of(s, mi) {
        let chain: Vec<&str> = path.iter().map(String::as_str).collect();
        if let Some(d) = partita_schedule::window_delay(&plans, &chain) {
            out.push_str(&format!(
                "  {name} path {}: the windows alone add min {:.0} / mean {:.0} / p50 {:.0} / p99 {:.0} / max {:.0} µs\n    \
                 (arrivals at any instant; `partita plan optimise` adds service times and searches better layouts)\n",
                chain.join(" → "),
                d.min_us,
                d.mean_us,
                d.p50_us,
                d.p99_us,
                d.max_us
            ));
        }
    }
    out
}

/// The whole report for a valid system.
pub fn render(s: &System) -> String {
    let mut out = String::new();
    out.push_str(&format!("system {} ({})\n", s.name, s.source));
    for (mi, m) in s.modules.iter().enumerate() {
        out.push_str(&format!("\nmodule {} — CPUs {:?}\n", m.name, m.cpus));
        if m.is_native() {
            let partitions: Vec<&str> = m.partitions.iter().map(|p| p.name.as_str()).collect();
            out.push_str(&format!("  no plan: a native machine, its partitions run freely: {}\n", partitions.join(", ")));
            continue;
        }
        out.push_str(&format!(
            "  {:>6}  {:<20} {:>12} {:>12} {:>12} {:>4}\n",
            "window", "partition", "start", "end", "duration", "CPU"
        ));
        for plan in &m.plans {
            for (i, w) in plan.sorted_windows().iter().enumerate() {
                out.push_str(&format!(
                    "  {:>6}  {:<20} {:>12} {:>12} {:>12} {:>4}\n",
                    i,
                    w.partition,
                    w.start.to_string(),
                    w.end().to_string(),
                    w.duration.to_string(),
                    plan.cpu
                ));
            }
        }
        for plan in m.plans.iter().filter(|p| p.freeze_ahead > partita_system::Duration::ZERO) {
            out.push_str(&format!(
                "  CPU {}: freeze_ahead {}: a partition another partition's window follows is frozen that long before its window ends\n",
                plan.cpu, plan.freeze_ahead
            ));
        }
        for plan in m.plans.iter().filter(|p| p.wake_ahead > partita_system::Duration::ZERO) {
            out.push_str(&format!(
                "  CPU {}: wake_ahead {}: the executor waits on the clock for a window start that follows time no partition runs in\n",
                plan.cpu, plan.wake_ahead
            ));
        }
        out.push_str("\n  partition            share  worst-case wait\n");
        for plan in &m.plans {
            for p in &m.partitions {
                if let Some(wait) = plan.worst_case_wait(&p.name) {
                    out.push_str(&format!(
                        "  {:<20} {:>5.1}%  {:>15}   (CPU {})\n",
                        p.name,
                        plan.share(&p.name) * 100.0,
                        wait.to_string(),
                        plan.cpu
                    ));
                }
            }
        }
        // Timeline: one letter per partition, `.` for idle time.
        let letters: Vec<(char, &str)> =
            m.partitions.iter().enumerate().map(|(i, p)| ((b'A' + (i % 26) as u8) as char, p.name.as_str())).collect();
        out.push('\n');
        for plan in &m.plans {
            out.push_str(&timeline(plan, &letters));
        }
        let legend: Vec<String> = letters.iter().map(|(c, n)| format!("{c}={n}")).collect();
        out.push_str(&format!("           {}  .=idle\n", legend.join(" ")));
        out.push_str(&path_delays(s, mi));
        out.push_str(&render_named_plans(m, &letters));
    }
    out.push_str(&render_health_monitor(s));

    out.push_str("\nnetworks\n");
    out.push_str(&format!("  {:<34} {:>6}  {:<18} {}\n", "network", "domain", "subnet", "bridge"));
    for (id, net) in s.networks() {
        let name = match id {
            NetworkId::InterModule => "inter-module".to_string(),
            NetworkId::Module(m) => format!("module {} V-NETWORK", s.modules[m].name),
        };
        out.push_str(&format!("  {:<34} {:>6}  {:<18} {}\n", name, net.domain.to_string(), net.subnet.to_string(), net.bridge));
    }
    out.push_str("\naddresses\n");
    out.push_str(&format!("  {:<22} {:<14} {:>6}  {:<16} {:<16} {}\n", "partition/node", "kind", "domain", "V-NIC", "inter-module", "namespace"));
    for m in &s.modules {
        for p in &m.partitions {
            let kind = match (p.io, p.vm.is_some()) {
                (true, true) => "VM I/O partition",
                (true, false) => "I/O partition",
                (false, true) => "VM partition",
                (false, false) => "partition",
            };
            let ext = p.external_address.map(|a| a.to_string()).unwrap_or_else(|| "-".into());
            // A partition without a network has no V-NIC: it is reached through its ports only.
            let (kind, vnic) = if p.network { (kind, p.address.to_string()) } else { ("no network", "ports only".to_string()) };
            out.push_str(&format!(
                "  {:<22} {:<14} {:>6}  {:<16} {:<16} {}\n",
                p.name,
                kind,
                p.domain.to_string(),
                vnic,
                ext,
                p.tree.netns
            ));
        }
    }
    for n in &s.nodes {
        out.push_str(&format!(
            "  {:<22} {:<14} {:>6}  {:<16} {:<16} {}\n",
            n.name,
            "native node",
            n.domain.to_string(),
            "-",
            n.address.to_string(),
            n.tree.netns
        ));
    }
    out.push_str(&render_channels(s));
    out.push_str(&render_uplinks(s));
    out.push_str(&render_vms(s));
    out.push_str(&render_time_protection(s));
    out.push_str(&render_host_objects(&s.host_objects()));
    out
}

/// One CPU's plan as a line of `TIMELINE_WIDTH` characters: a letter per partition, `.` for idle time.
fn timeline(plan: &partita_system::Plan, letters: &[(char, &str)]) -> String {
    let frame = plan.frame().as_nanos().max(1);
    let mut line = vec!['.'; TIMELINE_WIDTH];
    for w in &plan.windows {
        let c = letters.iter().find(|(_, n)| *n == w.partition).map(|(c, _)| *c).unwrap_or('?');
        let a = (w.start.as_nanos() as u128 * TIMELINE_WIDTH as u128 / frame as u128) as usize;
        let b = (w.end().as_nanos() as u128 * TIMELINE_WIDTH as u128 / frame as u128) as usize;
        // a window shorter than one character still shows
        for slot in line.iter_mut().take(b.max(a + 1).min(TIMELINE_WIDTH)).skip(a.min(TIMELINE_WIDTH - 1)) {
            *slot = c;
        }
    }
    format!("  CPU {:<3} |{}| {} (idle {})\n", plan.cpu, line.iter().collect::<String>(), plan.frame(), plan.idle())
}

/// A module with several named plans: each plan's timeline, the default (the one `up` starts with) marked.
fn render_named_plans(m: &partita_system::Module, letters: &[(char, &str)]) -> String {
    if m.other_plans.is_empty() {
        return String::new();
    }
    let mut out = format!("\n  named plans ({}; the health monitor and system partitions switch between them at a major frame's end)\n", m.plan_sets().len());
    for (name, plans) in m.plan_sets() {
        let mark = if name == m.plan_name { " (default: `up` starts with it)" } else { "" };
        out.push_str(&format!("  plan {name}{mark}\n"));
        for plan in plans {
            out.push_str(&timeline(plan, letters));
        }
    }
    out
}

/// The health monitor's answer to each error kind, per partition, with the table it comes from: printed when
/// the system has a health-monitor table or a module has several plans.
fn render_health_monitor(s: &System) -> String {
    use partita_system::{ErrorKind, HealthAction, HmResolution};
    let any_table = !s.health_monitor.is_empty() || s.modules.iter().any(|m| !m.health_monitor.is_empty() || m.partitions.iter().any(|p| !p.health_monitor.is_empty()));
    if !any_table && s.modules.iter().all(|m| m.other_plans.is_empty()) {
        return String::new();
    }
    let health = |h: HealthAction| match h {
        HealthAction::Restart { max_restarts, window, .. } => format!("restart (health: at most {max_restarts} within {window}, then stop)"),
        HealthAction::Stop => "stop (health)".to_string(),
        HealthAction::Ignore => "ignore (health)".to_string(),
    };
    let answer = |r: HmResolution| match r {
        HmResolution::Table { level, entry } => format!("{entry}   [{level} table]"),
        HmResolution::Health(h) => health(h),
        HmResolution::Default { level, action } => format!("{action}   [default, {level} level]"),
    };
    let mut out = String::from("\nhealth monitor (each partition's table, then its module's, then the system's, then the defaults)\n");
    for (m, p) in s.partitions() {
        let system = if p.system_partition { ", a system partition: may request plan switches" } else { "" };
        out.push_str(&format!("  {} (module {}{system})\n", p.name, m.name));
        for kind in ErrorKind::ALL {
            let a = answer(s.hm_resolve(m, p, kind, true));
            if kind == ErrorKind::NumericError {
                let raised = answer(s.hm_resolve(m, p, kind, false));
                if raised != a {
                    out.push_str(&format!("    {:<19} at exit: {a}; raised: {raised}\n", kind.as_str()));
                    continue;
                }
            }
            out.push_str(&format!("    {:<19} {a}\n", kind.as_str()));
        }
    }
    out
}

/// ARINC 653 channels between partitions (docs/ports.md).
fn render_channels(s: &System) -> String {
    let mut out = String::new();
    for m in s.modules.iter().filter(|m| !m.channels.is_empty()) {
        if out.is_empty() {
            out.push_str("\nchannels (ARINC 653 ports, on memory the supervisor creates per channel)\n");
            out.push_str(&format!("  {:<10} {:<16} {:<9} {:>9} {:<14} {:<24} {}\n", "module", "channel", "kind", "max", "depth/refresh", "source", "destinations"));
        }
        for c in &m.channels {
            let geometry = match c.kind {
                partita_system::ChannelKind::Sampling { refresh } => format!("{refresh}"),
                partita_system::ChannelKind::Queuing { depth } => format!("{depth} msgs"),
            };
            let dests: Vec<String> = c.destinations.iter().map(ToString::to_string).collect();
            out.push_str(&format!(
                "  {:<10} {:<16} {:<9} {:>9} {:<14} {:<24} {}\n",
                m.name,
                c.name,
                c.kind.as_str(),
                partita_system::ByteSize(u64::from(c.max_message)).to_string(),
                geometry,
                c.source.to_string(),
                dests.join(", ")
            ));
        }
    }
    out
}

/// Hosts, uplinks and external peers, and what `up` does with each uplink (docs/deployment.md).
fn render_uplinks(s: &System) -> String {
    let mut out = String::new();
    if !s.hosts.is_empty() {
        out.push_str("\nhosts\n");
        for h in &s.hosts {
            let modules: Vec<&str> = s.modules.iter().filter(|m| m.host.as_deref() == Some(h)).map(|m| m.name.as_str()).collect();
            let nodes: Vec<&str> = s.nodes.iter().filter(|n| n.host.as_deref() == Some(h)).map(|n| n.name.as_str()).collect();
            let here = if s.part.as_deref() == Some(h) { "  <- this part" } else { "" };
            out.push_str(&format!("  {h:<20} modules: {}; nodes: {}{here}\n", if modules.is_empty() { "-".into() } else { modules.join(", ") }, if nodes.is_empty() { "-".into() } else { nodes.join(", ") }));
        }
        if s.part.is_none() {
            out.push_str(&format!("  (the whole file; `partita check --host NAME` checks one part against this machine, `partita up --host NAME` brings it up as system {}.NAME)\n", s.name));
        }
    }
    if s.uplinks().next().is_some() {
        out.push_str("\nuplinks (docs/deployment.md)\n");
        for (owner, u) in s.uplinks() {
            let how = match u.mode {
                partita_system::UplinkMode::Move => format!("moves {} into {owner}'s namespace as {}", u.interface, partita_system::UPLINK_NIC),
                _ => format!("makes a {} child of {} in {owner}'s namespace as {}", u.mode, u.interface, partita_system::UPLINK_NIC),
            };
            out.push_str(&format!(
                "  {owner}: `up` {how}, {}/{}{}{}; DDS domain {} there, peers {}{}; given back at `down`\n",
                u.address,
                u.prefix,
                u.gateway.map(|g| format!(" via {g}")).unwrap_or_default(),
                u.mtu.map(|m| format!(", MTU {m}")).unwrap_or_default(),
                u.domain,
                u.peers.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "),
                if u.multicast { ", multicast on" } else { ", no multicast" }
            ));
        }
    }
    for p in &s.peers {
        out.push_str(&format!("  external peer {} at {} (not started by partita)\n", p.name, p.address));
    }
    out
}

/// What `up` does against kernel work on the plans' CPUs, as this machine allows it (docs/security.md, "Time
/// partitioning and kernel work").
fn render_time_protection(s: &System) -> String {
    use partita_system::{Preemption, Scheduling};
    if s.modules.iter().all(|m| m.is_native()) {
        return String::new();
    }
    let mut out = String::from("
time partitioning against kernel work (docs/security.md)
");
    let probe = partita_supervisor::host_tuning::probe();
    let model = probe.preemption.clone().unwrap_or_else(|| "unknown".into());
    out.push_str(&match (s.host.preemption, &probe.preemption_switch) {
        (Preemption::Keep, _) => format!("  preemption: {model}, kept (preemption = \"keep\")\n"),
        (Preemption::Full, Ok(())) => format!("  preemption: {model}; `up` switches it to full while the system is up\n"),
        (Preemption::Full, Err(why)) => format!(
            "  preemption: {model}; `up` cannot switch it ({why}): boot the kernel with preempt=full for full preemption; until then kernel code runs on past a window's end until its next scheduling point, and the time-overrun actions below contain the partition\n"
        ),
    });
    if s.host.housekeeping_cpus.is_empty() {
        out.push_str("  housekeeping: none (the host's interrupts and kernel work are left where they are)\n");
    } else {
        out.push_str(&format!(
            "  housekeeping CPUs {:?}: `up` moves the interrupts the kernel lets move (of {} in all){}, and the V-NICs' receive processing there; given back at `down`\n",
            s.host.housekeeping_cpus,
            probe.irqs,
            if probe.workqueues { ", the unbound workqueues and writeback" } else { "" }
        ));
    }
    for (m, p) in s.partitions().filter(|(_, p)| p.plan.is_some()) {
        let t = &p.time_overrun;
        let demote = match (m.plans[p.plan.unwrap_or(0)].demote, p.tree.scheduling) {
            (false, _) => "not demoted (demote = false)".to_string(),
            (true, Scheduling::Fifo { .. }) => "not demoted (SCHED_FIFO)".to_string(),
            (true, Scheduling::Normal) => "demoted past its window".to_string(),
        };
        let d = &p.tree.disk;
        let rate = |b: Option<u64>, i: Option<u64>| match (b, i) {
            (None, None) => "unlimited".to_string(),
            (b, i) => format!("{} {}", b.map_or("-".into(), |b| format!("{}/s", partita_system::ByteSize(b))), i.map_or("".into(), |i| format!("{i} IOPS"))).trim().to_string(),
        };
        out.push_str(&format!(
            "  {:<20} overrun past {}: {} at {} in {} frames; {demote}; disk reads {}, writes {}\n",
            p.name, t.tolerance, t.action, t.count, t.frames, rate(d.read_bps, d.read_iops), rate(d.write_bps, d.write_iops)
        ));
    }
    out
}

/// The VM partitions: their guest, and which acceleration `up` will use on this machine and why.
fn render_vms(s: &System) -> String {
    let vms: Vec<(&str, &partita_system::Vm)> = s.partitions().filter_map(|(_, p)| Some((p.name.as_str(), p.vm.as_ref()?))).collect();
    if vms.is_empty() {
        return String::new();
    }
    let cache = partita_vm::image::cache_dir();
    let default_kernel = partita_vm::Kernel::find(&cache);
    let mut out = String::from("
virtual machines
");
    out.push_str(&format!("  {:<22} {:>8} {:>5}  {:<20} {}
", "partition", "memory", "vCPUs", "kernel", "acceleration on this machine"));
    for (name, vm) in vms {
        let kernel = match (&vm.kernel, &default_kernel) {
            (Some(k), _) => Ok(k.clone()),
            (None, Ok(k)) => Ok(k.image.clone()),
            (None, Err(e)) => Err(e.to_string()),
        };
        let kernel_name = match &kernel {
            Ok(k) => k.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            Err(_) => "missing".into(),
        };
        let accel = match (vm.accel, &kernel) {
            (partita_system::Accel::Tcg, _) => "tcg (the file says so)".to_string(),
            (partita_system::Accel::Kvm, _) => "kvm (the file says so; a guest KVM cannot run ends with QEMU's failure or the boot timeout)".to_string(),
            (partita_system::Accel::Auto, Err(_)) => "auto: unknown until the guest kernel is there".to_string(),
            (partita_system::Accel::Auto, Ok(k)) => match partita_vm::probe::cached(k, &cache) {
                Some(v) => format!("{} (auto: {})", v.accel, v.reason),
                None if !std::path::Path::new("/dev/kvm").exists() => "tcg (auto: this machine has no /dev/kvm)".to_string(),
                None => "auto: not probed yet; `up` boots the guest under KVM once (at most 10 s) and keeps the verdict".to_string(),
            },
        };
        out.push_str(&format!("  {:<22} {:>8} {:>5}  {:<20} {}
", name, vm.memory.to_string(), vm.vcpus, kernel_name, accel));
        if let Err(e) = &kernel {
            out.push_str(&format!("    {e}
"));
        }
    }
    out.push_str("  (under tcg a guest's timings are QEMU's emulation, not virtualization)
");
    out
}

/// Heading of the list of host objects in `check`'s report; tests and tools read the lines below it.
pub const HOST_OBJECTS_HEADING: &str = "on the host (what `partita up` creates, by name)";

/// Every bridge, veth, namespace and cgroup of the system, one kind per line.
fn render_host_objects(o: &HostObjects) -> String {
    let mut out = format!("\n{HOST_OBJECTS_HEADING}\n");
    for (kind, names) in [("bridges", &o.bridges), ("veths", &o.veths), ("taps", &o.taps), ("namespaces", &o.namespaces), ("cgroups", &o.cgroups)] {
        if kind != "taps" || !names.is_empty() {
            out.push_str(&format!("  {kind:<11} {}\n", names.join(" ")));
        }
    }
    out.push_str("  (veths: the host ends of the V-NICs; taps: VM partitions' V-NICs; cgroups: below each cgroup hierarchy's root)\n");
    out
}
