//! The scenarios of paper 001's evaluation, each a system file (`crates/paper/scenarios/<key>.toml`) whose
//! `@...@` fields are filled in with the measurement's commands and parsed and validated like any user file:
//! the recorder node and a native monitoring node on partita's bridges.
//!
//! | scenario | recorder node |
//! |---|---|
//! | NETWORK | a native node answering raw UDP (`partita app udp-echo`) |
//! | TRADITIONAL DDS | a native node running the recorder on the inter-module domain |
//! | SINGLE DDS PARTITION | one partition (the I/O partition, owning the network) with a whole-frame window |
//! | TRADITIONAL DDS WITH ROUTING | a native machine (a module without a plan): the recorder on its local domain, the routing service between it and the network domain |
//! | PARTITIONED DDS WITH ROUTING | the paper's plan: recorder 700 µs, routing 800 µs, one 1500 µs frame on one CPU (examples/video-surveillance.toml) |
//! | PORTS | the partitioned system with the recorder as a partition without a network: the routing partition carries the requests and frames through two queuing channels (examples/video-surveillance-ports.toml) |
//! | MULTICORE | the paper's future work: the same two partitions, each with its own CPU and a whole-frame window (examples/video-surveillance-multicore.toml) |
use partita_lab::setup::{Setup, LOCK_MEMORY_FLAG};
use partita_schedule::PlanWindows;
use partita_system::{ByteSize, Duration, Errors, Host, System};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Scenario {
    Network,
    Traditional,
    SinglePartition,
    TraditionalRouting,
    PartitionedRouting,
    /// PARTITIONED DDS WITH ROUTING with the recorder behind ports, without a network (issue 34).
    PartitionedPorts,
    Multicore,
    /// PARTITIONED DDS WITH ROUTING with the plan of `bench paper --plan FILE` (an optimised plan) instead of
    /// the paper's: not in [`Scenario::ALL`]; added when a plan is given.
    FilePlan,
}

/// The paper's figures (µs): min, avg, max, std, p99 (Tables 1 and 2, 1 KiB).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PaperRow {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    pub std: f64,
    pub p99: f64,
}

/// The NETWORK scenario's answerer: its address on the inter-module network (the template pins the subnet)
/// and port.
pub const UDP_ADDRESS: &str = "198.18.0.10";
pub const UDP_PORT: u16 = 9500;
/// The recorder's frame rate in every scenario.
pub const RECORDER_FPS: u64 = 10;
/// The name of the monitoring node in every scenario.
pub const MONITOR: &str = "monitor";

impl Scenario {
    pub const ALL: [Scenario; 7] = [
        Scenario::Network,
        Scenario::Traditional,
        Scenario::SinglePartition,
        Scenario::TraditionalRouting,
        Scenario::PartitionedRouting,
        Scenario::PartitionedPorts,
        Scenario::Multicore,
    ];

    /// Short name, used in file names, system names and `--scenarios`.
    pub fn key(self) -> &'static str {
        match self {
            Scenario::Network => "network",
            Scenario::Traditional => "traditional",
            Scenario::SinglePartition => "single",
            Scenario::TraditionalRouting => "trad-routing",
            Scenario::PartitionedRouting => "partitioned",
            Scenario::PartitionedPorts => "ports",
            Scenario::Multicore => "multicore",
            Scenario::FilePlan => "plan",
        }
    }

    pub fn from_key(key: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.key() == key)
    }

    /// The row title of the paper's tables.
    pub fn title(self) -> &'static str {
        match self {
            Scenario::Network => "NETWORK",
            Scenario::Traditional => "TRADITIONAL DDS",
            Scenario::SinglePartition => "SINGLE DDS PARTITION",
            Scenario::TraditionalRouting => "TRADITIONAL DDS WITH ROUTING",
            Scenario::PartitionedRouting => "PARTITIONED DDS WITH ROUTING",
            Scenario::PartitionedPorts => "PARTITIONED, THE RECORDER WITHOUT A NETWORK (PORTS)",
            Scenario::Multicore => "PARTITIONED DDS WITH ROUTING, ROUTING ON ITS OWN CPU",
            Scenario::FilePlan => "PARTITIONED DDS WITH ROUTING, THE PLAN OF --plan",
        }
    }

    pub fn paper(self) -> Option<PaperRow> {
        let r = |min, avg, max, std, p99| Some(PaperRow { min, avg, max, std, p99 });
        match self {
            Scenario::Network => r(154.0, 206.0, 262.0, 20.0, 249.0),
            Scenario::Traditional => r(218.0, 286.0, 415.0, 29.0, 383.0),
            Scenario::SinglePartition => r(262.0, 331.0, 467.0, 28.0, 409.0),
            Scenario::TraditionalRouting => r(662.0, 764.0, 1632.0, 36.0, 876.0),
            Scenario::PartitionedRouting => r(1028.0, 1858.0, 4157.0, 539.0, 3346.0),
            Scenario::PartitionedPorts | Scenario::Multicore | Scenario::FilePlan => None,
        }
    }

    /// Which of the paper's tables the scenario belongs to (the multicore variant is reported with Table 2).
    pub fn table(self) -> u8 {
        match self {
            Scenario::Network | Scenario::Traditional | Scenario::SinglePartition => 1,
            _ => 2,
        }
    }

    /// The scenario's system file, before its fields are filled in.
    pub fn template(self) -> &'static str {
        match self {
            Scenario::Network => include_str!("../scenarios/network.toml"),
            Scenario::Traditional => include_str!("../scenarios/traditional.toml"),
            Scenario::SinglePartition => include_str!("../scenarios/single.toml"),
            Scenario::TraditionalRouting => include_str!("../scenarios/trad-routing.toml"),
            Scenario::PartitionedRouting | Scenario::FilePlan => include_str!("../scenarios/partitioned.toml"),
            Scenario::PartitionedPorts => include_str!("../scenarios/ports.toml"),
            Scenario::Multicore => include_str!("../scenarios/multicore.toml"),
        }
    }

    /// The scenario's system file with `p`'s commands, CPUs, limits and measurement setup filled in. The
    /// monitor (node [`MONITOR`]) writes its report to `p.monitor_json` and exits.
    pub fn toml(self, p: &Params) -> String {
        let strings = |v: Vec<String>| toml::Value::Array(v.into_iter().map(toml::Value::String).collect()).to_string();
        let string = |s: &str| toml::Value::String(s.to_string()).to_string();
        let mut text = self.template().to_string();
        let plan = match (self, &p.plan) {
            (Scenario::FilePlan, Some(plan)) => plan.clone(),
            _ => paper_plan(),
        };
        for (key, value) in [
            ("@SYSTEM@", string(&format!("paper-{}", self.key()))),
            ("@CPU_DMA_LATENCY@", string(&p.cpu_dma_latency())),
            ("@SCHEDULING@", p.scheduling()),
            ("@RECORDER@", strings(p.recorder_command(self))),
            ("@MONITOR@", strings(p.monitor_command(self))),
            ("@ROUTER@", strings(p.router_command())),
            ("@UDP_ECHO@", strings(p.udp_echo_command())),
            ("@UDP_ADDRESS@", string(UDP_ADDRESS)),
            ("@RECORDER_CPU@", p.recorder_cpu.to_string()),
            ("@ROUTING_CPU@", p.routing_cpu.to_string()),
            ("@MEMORY@", string(&ByteSize(p.memory_bytes).to_string())),
            ("@PLAN@", plan_toml(&plan, p.recorder_cpu)),
            // A reply and the 32-byte header of the DDS frame that carries it through the port.
            ("@FRAME_MAX@", string(&ByteSize(p.reply_size as u64 + partita_ports::dds_frame::HEADER as u64).to_string())),
        ] {
            text = text.replace(key, &value);
        }
        text
    }

    /// Where the scenario's recorder keeps its ring: `p.ring` for a native recorder, `ring` in the recorder
    /// partition's state directory otherwise (`None` when nothing records, as in NETWORK).
    pub fn ring(self, system: &System, p: &Params) -> Option<std::path::PathBuf> {
        match self {
            Scenario::Network => None,
            Scenario::Traditional => Some(p.ring.clone()),
            _ => system.partitions().find(|(_, part)| part.name == "recorder")?.1.tree.confinement.as_ref().map(|c| c.state_dir.join("ring")),
        }
    }

    /// The scenario's system, validated against this machine as `partita check` validates a file.
    pub fn system(self, p: &Params) -> Result<System, Errors> {
        partita_system::parse(&self.toml(p), &format!("<paper scenario {}>", self.key()), &Host::this_machine())
    }
}

/// The paper's plan: the recorder 700 µs, then the routing partition 800 µs, in a 1500 µs frame.
pub fn paper_plan() -> PlanWindows {
    PlanWindows::new(0, 1_500_000, &[("recorder".into(), 0, 700_000), ("routing".into(), 700_000, 800_000)])
}

/// `plan` as the `[[module.plan]]` of CPU `cpu`.
fn plan_toml(plan: &PlanWindows, cpu: usize) -> String {
    let d = |ns: u64| Duration::from_nanos(ns).to_string();
    let mut t = format!("[[module.plan]]\ncpu = {cpu}\nmajor_frame = \"{}\"\n", d(plan.major_frame_ns));
    for s in &plan.slots {
        t.push_str(&format!("\n[[module.plan.window]]\npartition = \"{}\"\nstart = \"{}\"\nduration = \"{}\"\n", s.partition, d(s.start), d(s.duration)));
    }
    t
}

/// What one run of a scenario measures.
#[derive(Debug, Clone)]
pub struct Params {
    /// Serialized size of every answer (the paper's "image size").
    pub reply_size: usize,
    pub count: u64,
    pub warmup: u64,
    /// Per-request timeout of the monitor.
    pub timeout_ms: u64,
    /// Where the monitor writes its report.
    pub monitor_json: PathBuf,
    /// The recorder's ring directory.
    pub ring: PathBuf,
    /// The recorder's PNG of the last frame, when wanted.
    pub save_frame: Option<PathBuf>,
    pub recorder_cpu: usize,
    /// The routing partition's CPU in the multicore scenario.
    pub routing_cpu: usize,
    pub memory_bytes: u64,
    /// More arguments for the monitor (e.g. `--rate 50 --duration 8` with `count` 0).
    pub monitor_extra: Vec<String>,
    /// The measurement setup the system file grants every partition and node: their scheduling class, their
    /// memory locked (`--lock-memory` on their commands) and the system's `cpu_dma_latency`.
    pub setup: Setup,
    /// The plan of [`Scenario::FilePlan`] (the recorder and routing partitions' windows; its CPU is
    /// `recorder_cpu`).
    pub plan: Option<PlanWindows>,
}

/// Where the NETWORK scenario's answerer listens.
fn udp_server() -> String {
    format!("{UDP_ADDRESS}:{UDP_PORT}")
}

impl Params {
    /// `partita` and its subcommand, then, on a native node, the setup's memory lock. A partition does not lock
    /// its memory: it may only up to RLIMIT_MEMLOCK (8 MiB here), and raising that for it needs CAP_SYS_RESOURCE,
    /// which the supervisor does not hold on these machines.
    fn partita(&self, role: &[&str], in_partition: bool) -> Vec<String> {
        let mut c = vec!["partita".to_string()];
        c.extend(role.iter().map(|s| s.to_string()));
        if self.setup.locks_memory() && !in_partition {
            c.push(LOCK_MEMORY_FLAG.into());
        }
        c
    }

    /// The `scheduling` of every partition and node (an inline TOML table).
    pub fn scheduling(&self) -> String {
        self.setup.scheduling_toml()
    }

    /// The system's `cpu_dma_latency`: the setup's bound, or `off`.
    pub fn cpu_dma_latency(&self) -> String {
        self.setup.cpu_dma_latency_value()
    }

    pub fn router_command(&self) -> Vec<String> {
        self.partita(&["route"], true)
    }

    pub fn udp_echo_command(&self) -> Vec<String> {
        let mut c = self.partita(&["app", "udp-echo"], false);
        c.extend(["--bind".into(), udp_server()]);
        c
    }

    /// The recorder's command: a native recorder node records into `ring`; a recorder partition into its own
    /// state directory (it cannot write the host's files).
    pub fn recorder_command(&self, s: Scenario) -> Vec<String> {
        let mut c = self.partita(&["app", "recorder"], s != Scenario::Traditional);
        if s == Scenario::Traditional {
            c.extend(["--ring".to_string(), self.ring.display().to_string()]);
        }
        c.extend(["--ring-size".into(), "16MiB".into(), "--fps".into(), RECORDER_FPS.to_string(), "--fsync".into(), "never".into()]);
        c.extend(["--reply-size".into(), self.reply_size.to_string()]);
        if s == Scenario::PartitionedPorts {
            c.extend(["--request-port".into(), "requests".into(), "--reply-port".into(), "frames".into()]);
        }
        c
    }

    pub fn monitor_command(&self, s: Scenario) -> Vec<String> {
        let mut c = self.partita(&["app", "monitor"], false);
        c.push("--quiet".into());
        c.extend(["--count".into(), self.count.to_string(), "--warmup".into(), self.warmup.to_string()]);
        c.extend(["--timeout-ms".into(), self.timeout_ms.to_string(), "--json".into(), self.monitor_json.display().to_string()]);
        if s == Scenario::Network {
            c.extend(["--udp".into(), udp_server(), "--reply-size".into(), self.reply_size.to_string()]);
        } else {
            c.extend(["--name".into(), MONITOR.into()]);
            if let Some(f) = &self.save_frame {
                c.extend(["--save-frame".into(), f.display().to_string()]);
            }
        }
        c.extend(self.monitor_extra.iter().cloned());
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            reply_size: 1024,
            count: 10,
            warmup: 1,
            timeout_ms: 1000,
            monitor_json: "/tmp/m \"quoted\".json".into(),
            ring: "/tmp/ring".into(),
            save_frame: None,
            recorder_cpu: 0,
            routing_cpu: 1,
            memory_bytes: 512 << 20,
            monitor_extra: Vec::new(),
            setup: Setup::default(),
            plan: None,
        }
    }

    fn parse(s: Scenario) -> System {
        partita_system::parse(&s.toml(&params()), s.key(), &Host::with_cpus(2)).unwrap_or_else(|e| panic!("{}: {e}", s.key()))
    }

    #[test]
    fn every_scenario_is_a_valid_system_with_its_monitor_and_recorder() {
        for s in Scenario::ALL {
            let sys = parse(s);
            let text = s.toml(&params());
            let unfilled = text.match_indices('@').any(|(i, _)| text[i + 1..].starts_with(|c: char| c.is_ascii_uppercase()));
            assert!(!unfilled, "{}: a field was left unfilled", s.key());
            let monitor = sys.node(MONITOR).expect("a monitoring node");
            assert_eq!(&monitor.tree.command[..3], &["partita", "app", "monitor"]);
            assert!(monitor.tree.command.contains(&"/tmp/m \"quoted\".json".to_string()), "paths survive TOML quoting");
            let recorder = sys.partitions().map(|(_, p)| &p.tree).chain(sys.node("recorder").map(|n| &n.tree));
            assert_eq!(recorder.filter(|t| t.command.get(2).is_some_and(|c| c == "recorder" || c == "udp-echo")).count(), 1, "{}", s.key());
        }
    }

    #[test]
    fn the_system_files_grant_the_measurement_setup_to_every_partition_and_node() {
        use partita_system::{Duration, Scheduling};
        let normal = Params { setup: Setup::Normal, ..params() };
        for s in Scenario::ALL {
            let trees = |sys: &System| -> Vec<(String, partita_system::ProcessTree)> {
                sys.partitions().map(|(_, p)| (p.name.clone(), p.tree.clone())).chain(sys.nodes.iter().map(|n| (n.name.clone(), n.tree.clone()))).collect()
            };
            // native nodes lock their memory; partitions cannot raise RLIMIT_MEMLOCK here
            let locks = |t: &partita_system::ProcessTree| if t.confinement.is_some() { 0 } else { 1 };
            let rt = parse(s);
            assert_eq!(rt.cpu_dma_latency, Some(Duration::ZERO), "{}", s.key());
            for (name, t) in trees(&rt) {
                assert_eq!(t.scheduling, Scheduling::Fifo { priority: 50 }, "{} {name}", s.key());
                assert_eq!(t.command.iter().filter(|a| *a == LOCK_MEMORY_FLAG).count(), locks(&t), "{} {name}: {:?}", s.key(), t.command);
            }
            let sys = partita_system::parse(&s.toml(&normal), s.key(), &Host::with_cpus(2)).unwrap();
            assert_eq!(sys.cpu_dma_latency, None, "{}: the idle states are left alone", s.key());
            for (name, t) in trees(&sys) {
                assert_eq!(t.scheduling, Scheduling::Normal, "{} {name}", s.key());
                assert!(!t.command.iter().any(|a| a == LOCK_MEMORY_FLAG), "{} {name}", s.key());
            }
        }
        let other = Params { setup: Setup::Realtime { priority: 30, cpu_dma_latency_us: 10 }, ..params() };
        let sys = partita_system::parse(&Scenario::PartitionedRouting.toml(&other), "p", &Host::with_cpus(2)).unwrap();
        assert_eq!(sys.cpu_dma_latency, Some(Duration::from_micros(10)));
        assert_eq!(sys.node(MONITOR).unwrap().tree.scheduling, Scheduling::Fifo { priority: 30 });
    }

    #[test]
    fn the_network_scenario_answers_where_its_monitor_asks() {
        let sys = parse(Scenario::Network);
        let recorder = sys.node("recorder").unwrap();
        let asked = format!("{}:{UDP_PORT}", recorder.address);
        assert!(recorder.tree.command.contains(&asked));
        assert!(sys.node(MONITOR).unwrap().tree.command.contains(&asked));
    }

    /// The partitioned scenarios are the example systems with other commands: same plans, same routing table.
    #[test]
    fn the_partitioned_scenarios_are_the_examples_systems() {
        for (s, example) in [
            (Scenario::PartitionedRouting, partita_system::BUILTIN_DEFAULT),
            (Scenario::Multicore, include_str!("../../../examples/video-surveillance-multicore.toml")),
            (Scenario::PartitionedPorts, include_str!("../../../examples/video-surveillance-ports.toml")),
        ] {
            let ours = parse(s);
            let theirs = partita_system::parse(example, "example", &Host::with_cpus(2)).unwrap();
            let (a, b) = (&ours.modules[0], &theirs.modules[0]);
            assert_eq!(a.cpus, b.cpus);
            for (pa, pb) in a.plans.iter().zip(&b.plans) {
                assert_eq!((pa.cpu, pa.major_frame, &pa.windows), (pb.cpu, pb.major_frame, &pb.windows), "{}", s.key());
            }
            assert_eq!(a.plans.len(), b.plans.len());
            let router = |m: &partita_system::Module| m.io_partition().and_then(|p| p.router.clone());
            assert_eq!(router(a), router(b), "{}: the routing table differs from the example's", s.key());
            assert!(router(a).is_some());
            let ends = |m: &partita_system::Module| m.channels.iter().map(|c| (c.name.clone(), c.kind, c.source.clone(), c.destinations.clone())).collect::<Vec<_>>();
            assert_eq!(ends(a), ends(b), "{}: the channels differ from the example's", s.key());
        }
    }

    #[test]
    fn the_plan_scenario_is_the_partitioned_one_with_the_given_windows() {
        let plan = PlanWindows::new(0, 300_000, &[("recorder".into(), 0, 70_000), ("routing".into(), 70_000, 80_000), ("recorder".into(), 150_000, 70_000), ("routing".into(), 220_000, 80_000)]);
        let p = Params { plan: Some(plan.clone()), recorder_cpu: 1, ..params() };
        let sys = partita_system::parse(&Scenario::FilePlan.toml(&p), "plan", &Host::with_cpus(2)).unwrap();
        let got = PlanWindows::of_plan(&sys.modules[0].plans[0]);
        assert_eq!((got.cpu, got.major_frame_ns, got.slots), (1, 300_000, plan.slots));
        // Without a plan, and in the partitioned scenario, the paper's.
        for s in [Scenario::FilePlan, Scenario::PartitionedRouting] {
            let sys = partita_system::parse(&s.toml(&Params { plan: None, ..params() }), "p", &Host::with_cpus(2)).unwrap();
            assert_eq!(PlanWindows::of_plan(&sys.modules[0].plans[0]).slots, paper_plan().slots);
        }
    }
}
