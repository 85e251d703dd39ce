//! The scenarios of paper 001's evaluation, each as a system the supervisor builds: two "nodes" (network
//! namespaces on partita's bridges), the recorder node and a native monitoring node.
//!
//! | scenario | recorder node |
//! |---|---|
//! | NETWORK | a native node answering raw UDP (`partita app udp-echo`) |
//! | TRADITIONAL DDS | a native node running the recorder on the inter-module domain |
//! | SINGLE DDS PARTITION | one partition (the I/O partition, owning the network) with a whole-frame window |
//! | TRADITIONAL DDS WITH ROUTING | a native machine: the recorder on its local domain, the routing service between it and the network domain |
//! | PARTITIONED DDS WITH ROUTING | the paper's plan: recorder 700 µs, routing 800 µs, one 1500 µs frame on one CPU |
//! | MULTICORE | the paper's future work: the same two partitions, each with its own CPU and a whole-frame window |
use partita_supervisor::health::Action;
use partita_supervisor::supervisor::external_address;
use partita_supervisor::system::{ModuleSpec, PartitionSpec, PlanSpec, SystemSpec};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Scenario {
    Network,
    Traditional,
    SinglePartition,
    TraditionalRouting,
    PartitionedRouting,
    Multicore,
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

pub const MAJOR_FRAME_US: u64 = 1500;
pub const RECORDER_WINDOW_US: u64 = 700;
pub const ROUTING_WINDOW_US: u64 = 800;
/// UDP port of the NETWORK scenario's answerer.
pub const UDP_PORT: u16 = 9500;

impl Scenario {
    pub const ALL: [Scenario; 6] = [
        Scenario::Network,
        Scenario::Traditional,
        Scenario::SinglePartition,
        Scenario::TraditionalRouting,
        Scenario::PartitionedRouting,
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
            Scenario::Multicore => "multicore",
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
            Scenario::Multicore => "PARTITIONED DDS WITH ROUTING, ROUTING ON ITS OWN CPU",
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
            Scenario::Multicore => None,
        }
    }

    /// Which of the paper's tables the scenario belongs to (the multicore variant is reported with Table 2).
    pub fn table(self) -> u8 {
        match self {
            Scenario::Network | Scenario::Traditional | Scenario::SinglePartition => 1,
            _ => 2,
        }
    }

    /// The system of this scenario. The monitor writes its report to `p.monitor_json` and exits.
    pub fn spec(self, p: &Params) -> SystemSpec {
        let restart = Action::Restart { max: 3, within: Duration::from_secs(10) };
        let part = |name: &str, command: Vec<String>, io: bool, action: Action| PartitionSpec {
            name: name.into(),
            command,
            memory_bytes: Some(p.memory_bytes),
            pids_max: Some(128),
            action,
            io,
            env: Vec::new(),
            address: None,
            external_address: None,
        };
        let recorder_cmd = p.recorder_command();
        // The recorder on the module's domain and the routing service as the I/O partition.
        let recorder_and_routing = || {
            vec![part("recorder", p.recorder_command(), false, restart), part("routing", vec![p.exe.clone(), "route".into()], true, restart)]
        };
        let us = Duration::from_micros;
        let frame = us(MAJOR_FRAME_US);
        let recorder_module = match self {
            Scenario::Network => ModuleSpec {
                name: "recorder".into(),
                cpus: Some(p.recorder_cpu.to_string()),
                domain: 0,
                plans: Vec::new(),
                partitions: vec![part(
                    "recorder",
                    vec![p.exe.clone(), "app".into(), "udp-echo".into(), "--bind".into(), udp_server()],
                    false,
                    restart,
                )],
            },
            Scenario::Traditional => ModuleSpec {
                name: "recorder".into(),
                cpus: Some(p.recorder_cpu.to_string()),
                domain: 0,
                plans: Vec::new(),
                partitions: vec![part("recorder", recorder_cmd, false, restart)],
            },
            Scenario::SinglePartition => ModuleSpec {
                name: "camera-node".into(),
                cpus: Some(p.recorder_cpu.to_string()),
                domain: 1,
                plans: vec![PlanSpec {
                    major_frame: frame,
                    windows: vec![("recorder".into(), Duration::ZERO, frame)],
                    executor_cpu: Some(p.recorder_cpu),
                }],
                partitions: vec![part("recorder", recorder_cmd, true, restart)],
            },
            Scenario::TraditionalRouting => ModuleSpec {
                name: "camera-node".into(),
                cpus: Some(p.recorder_cpu.to_string()),
                domain: 1,
                plans: Vec::new(),
                partitions: recorder_and_routing(),
            },
            Scenario::PartitionedRouting => ModuleSpec {
                name: "camera-node".into(),
                cpus: Some(p.recorder_cpu.to_string()),
                domain: 1,
                plans: vec![PlanSpec {
                    major_frame: frame,
                    windows: vec![
                        ("recorder".into(), Duration::ZERO, us(RECORDER_WINDOW_US)),
                        ("routing".into(), us(RECORDER_WINDOW_US), us(ROUTING_WINDOW_US)),
                    ],
                    executor_cpu: Some(p.recorder_cpu),
                }],
                partitions: recorder_and_routing(),
            },
            Scenario::Multicore => ModuleSpec {
                name: "camera-node".into(),
                cpus: Some(format!("{},{}", p.recorder_cpu, p.routing_cpu)),
                domain: 1,
                plans: vec![
                    PlanSpec { major_frame: frame, windows: vec![("recorder".into(), Duration::ZERO, frame)], executor_cpu: Some(p.recorder_cpu) },
                    PlanSpec { major_frame: frame, windows: vec![("routing".into(), Duration::ZERO, frame)], executor_cpu: Some(p.routing_cpu) },
                ],
                partitions: recorder_and_routing(),
            },
        };
        let monitor = ModuleSpec {
            name: "monitor".into(),
            cpus: None,
            domain: 0,
            plans: Vec::new(),
            partitions: vec![part("monitor", p.monitor_command(self), false, Action::Ignore)],
        };
        SystemSpec { name: format!("paper-{}", self.key()), modules: vec![recorder_module, monitor], external_domain: 0 }
    }
}

/// What one run of a scenario measures.
#[derive(Debug, Clone)]
pub struct Params {
    /// The partita binary that partitions run.
    pub exe: String,
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
}

/// Where the NETWORK scenario's answerer listens: the recorder node is the first member of the inter-module
/// network, so the supervisor gives it the first external address.
fn udp_server() -> String {
    format!("{}:{UDP_PORT}", external_address(0))
}

impl Params {
    fn recorder_command(&self) -> Vec<String> {
        let mut c: Vec<String> = vec![self.exe.clone(), "app".into(), "recorder".into(), "--ring".into(), self.ring.display().to_string()];
        c.extend(["--ring-size".into(), "16MiB".into(), "--fps".into(), "10".into(), "--fsync".into(), "never".into()]);
        c.extend(["--reply-size".into(), self.reply_size.to_string()]);
        c
    }

    fn monitor_command(&self, s: Scenario) -> Vec<String> {
        let mut c: Vec<String> = vec![self.exe.clone(), "app".into(), "monitor".into(), "--quiet".into()];
        c.extend(["--count".into(), self.count.to_string(), "--warmup".into(), self.warmup.to_string()]);
        c.extend(["--timeout-ms".into(), self.timeout_ms.to_string(), "--json".into(), self.monitor_json.display().to_string()]);
        if s == Scenario::Network {
            c.extend(["--udp".into(), udp_server(), "--reply-size".into(), self.reply_size.to_string()]);
        } else {
            c.extend(["--name".into(), "monitor".into()]);
            if let Some(f) = &self.save_frame {
                c.extend(["--save-frame".into(), f.display().to_string()]);
            }
        }
        c.extend(self.monitor_extra.iter().cloned());
        c
    }
}
