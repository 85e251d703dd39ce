//! The test matrix as data: a TOML file of `[[test]]` tables, each expanding over its lists into cells
//! (one implementation × architecture × node count × QoS × subscribers × payload size), each with a test id.
//! Cells that differ only in their size form a *group*, measured in one run of one generated system.
use crate::agent::args::{history_key, parse_history};
use crate::agent::channel::{Durability, History, QosChoice, Reliability, MAX_DATA};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The built-in matrix: paper 002's Figs. 7–10 and the paper's future work, on this machine.
pub const DEFAULT_MATRIX: &str = include_str!("../../../examples/dbe-paper-002.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMatrix {
    #[serde(default)]
    defaults: RawDefaults,
    #[serde(default)]
    test: Vec<RawTest>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    count: Option<u64>,
    warmup: Option<u64>,
    sizes: Option<Vec<i64>>,
    seconds: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTest {
    name: String,
    metric: String,
    implementations: Vec<String>,
    #[serde(default)]
    architectures: Option<Vec<String>>,
    #[serde(default)]
    nodes: Option<Vec<i64>>,
    #[serde(default)]
    reliability: Option<Vec<String>>,
    #[serde(default)]
    history: Option<Vec<String>>,
    #[serde(default)]
    durability: Option<Vec<String>>,
    #[serde(default)]
    subscribers: Option<Vec<i64>>,
    #[serde(default)]
    sizes: Option<Vec<i64>>,
    count: Option<u64>,
    warmup: Option<u64>,
    seconds: Option<f64>,
}

/// What a test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Round trips of `PubMessage` → `AckMessage` (paper 002's latency; 1-to-n with more subscribers).
    Latency,
    /// Samples a writer gets across per second, and what is lost.
    Throughput,
}

impl Metric {
    pub fn key(self) -> &'static str {
        match self {
            Metric::Latency => "latency",
            Metric::Throughput => "throughput",
        }
    }
}

/// An implementation (and, for Fast DDS, its transport).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Implementation {
    Cyclone,
    Fastdds,
    FastddsShm,
    Rustdds,
    Iceoryx2,
    Udp,
}

impl Implementation {
    pub const ALL: [Implementation; 6] =
        [Implementation::Cyclone, Implementation::Fastdds, Implementation::FastddsShm, Implementation::Rustdds, Implementation::Iceoryx2, Implementation::Udp];

    pub fn key(self) -> &'static str {
        match self {
            Implementation::Cyclone => "cyclone",
            Implementation::Fastdds => "fastdds",
            Implementation::FastddsShm => "fastdds-shm",
            Implementation::Rustdds => "rustdds",
            Implementation::Iceoryx2 => "iceoryx2",
            Implementation::Udp => "udp",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Implementation::Cyclone => "Cyclone DDS 11 (UDP)",
            Implementation::Fastdds => "Fast DDS 2.9 (UDP)",
            Implementation::FastddsShm => "Fast DDS 2.9 (shared memory)",
            Implementation::Rustdds => "RustDDS (UDP)",
            Implementation::Iceoryx2 => "iceoryx2 (shared memory, not DDS)",
            Implementation::Udp => "raw UDP (not DDS)",
        }
    }

    pub fn from_key(k: &str) -> Option<Implementation> {
        Implementation::ALL.into_iter().find(|i| i.key() == k)
    }

    /// Whether it is a DDS implementation (the others are floors).
    pub fn is_dds(self) -> bool {
        !matches!(self, Implementation::Iceoryx2 | Implementation::Udp)
    }

    /// Why it cannot run a cell, or `None` when it can.
    pub fn refuses(self, arch: Architecture, nodes: u32, qos: &QosChoice) -> Option<String> {
        match self {
            Implementation::Iceoryx2 | Implementation::FastddsShm if nodes > 1 => Some("shared memory reaches only processes of one node".into()),
            Implementation::Udp if qos.reliability == Reliability::Reliable => Some("raw UDP has no reliable delivery (its rows are best-effort)".into()),
            Implementation::Udp if qos.durability == Durability::TransientLocal => Some("raw UDP keeps no history for late readers".into()),
            Implementation::Udp | Implementation::Iceoryx2 if arch != Architecture::Decentralized => {
                Some("not DDS: only the direct (decentralized) path".into())
            }
            _ if arch == Architecture::Centralized && !matches!(self, Implementation::Fastdds | Implementation::FastddsShm) => {
                Some("no discovery server: of the implementations here only Fast DDS has one".into())
            }
            _ => None,
        }
    }
}

/// Paper 002's three DDS architectures, as partita builds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Architecture {
    /// Applications talk to each other directly (every implementation's default).
    Decentralized,
    /// Each node's applications talk to a daemon on their node, the daemons to each other: partita's routing
    /// service in each node's I/O partition, the applications in partitions on the node's own domain.
    Federated,
    /// Discovery through one server (Fast DDS's discovery server); data still flows directly.
    Centralized,
}

impl Architecture {
    pub const ALL: [Architecture; 3] = [Architecture::Decentralized, Architecture::Federated, Architecture::Centralized];

    pub fn key(self) -> &'static str {
        match self {
            Architecture::Decentralized => "decentralized",
            Architecture::Federated => "federated",
            Architecture::Centralized => "centralized",
        }
    }

    pub fn from_key(k: &str) -> Option<Architecture> {
        Architecture::ALL.into_iter().find(|a| a.key() == k)
    }
}

/// Everything of a cell but its payload size: one run of one system measures a group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Group {
    pub metric: Metric,
    pub implementation: Implementation,
    pub architecture: Architecture,
    pub nodes: u32,
    pub reliability: Reliability,
    pub history: History,
    pub durability: Durability,
    pub subscribers: u32,
}

impl Group {
    pub fn qos(&self) -> QosChoice {
        QosChoice { reliability: self.reliability, history: self.history, durability: self.durability }
    }

    /// The group's part of a test id.
    pub fn id(&self) -> String {
        format!(
            "{}-{}-{}-{}n-{}-{}-{}-x{}",
            self.metric.key(),
            self.implementation.key(),
            self.architecture.key(),
            self.nodes,
            match self.reliability {
                Reliability::Reliable => "rel",
                Reliability::BestEffort => "be",
            },
            history_key(self.history).replace(':', ""),
            match self.durability {
                Durability::Volatile => "vol",
                Durability::TransientLocal => "tl",
            },
            self.subscribers
        )
    }

    /// The test id of one cell.
    pub fn cell_id(&self, size: usize) -> String {
        format!("{}-{size}B", self.id())
    }
}

/// A group of cells to measure, with the sizes and run lengths its test asked for.
#[derive(Debug, Clone, Serialize)]
pub struct Planned {
    pub test: String,
    pub group: Group,
    pub sizes: Vec<usize>,
    pub count: u64,
    pub warmup: u64,
    pub seconds: f64,
}

/// A combination the matrix names that no implementation can run, and why (listed in the report).
#[derive(Debug, Clone, Serialize)]
pub struct NotApplicable {
    pub test: String,
    pub group: Group,
    pub why: String,
}

/// A checked matrix.
#[derive(Debug, Clone)]
pub struct Matrix {
    pub planned: Vec<Planned>,
    pub not_applicable: Vec<NotApplicable>,
}

/// An error in a matrix file: where, what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}; {fix}")]
pub struct MatrixError {
    pub file: String,
    pub field: String,
    pub message: String,
    pub fix: String,
}

/// Every error of a file at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct MatrixErrors(pub Vec<MatrixError>);

pub const PAPER_SIZES: [usize; 13] = [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];

/// Parses and checks a matrix; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Matrix, MatrixErrors> {
    let raw: RawMatrix = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|sp| text.as_bytes()[..sp.start.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1);
        MatrixErrors(vec![MatrixError {
            file: match line {
                Some(l) => format!("{file}:{l}"),
                None => file.into(),
            },
            field: "(syntax)".into(),
            message: e.message().to_string(),
            fix: "write the matrix as docs/dbe.md describes (unknown keys are refused)".into(),
        }])
    })?;
    let mut errors = Vec::new();
    let mut err = |field: String, message: String, fix: &str| errors.push(MatrixError { file: file.into(), field, message, fix: fix.into() });
    let sizes_of = |v: &[i64], field: String, err: &mut dyn FnMut(String, String, &str)| -> Vec<usize> {
        let mut out = Vec::new();
        for &s in v {
            if s < 1 || s > MAX_DATA as i64 {
                err(field.clone(), format!("{s} is outside 1..={MAX_DATA}"), "give payload sizes in bytes up to paper 002's 16384");
            } else {
                out.push(s as usize);
            }
        }
        if v.is_empty() {
            err(field, "is empty".into(), "list at least one size");
        }
        out
    };
    let d = &raw.defaults;
    let default_sizes = match &d.sizes {
        Some(v) => sizes_of(v, "defaults.sizes".into(), &mut err),
        None => PAPER_SIZES.to_vec(),
    };
    let default_count = d.count.unwrap_or(10_000);
    let default_warmup = d.warmup.unwrap_or(1_000);
    let default_seconds = d.seconds.unwrap_or(2.0);
    if default_count == 0 {
        err("defaults.count".into(), "is 0".into(), "measure at least one round trip");
    }
    if raw.test.is_empty() {
        err("test".into(), "the matrix has no [[test]]".into(), "add at least one [[test]] table");
    }
    let mut planned = Vec::new();
    let mut not_applicable = Vec::new();
    let mut names = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for (i, t) in raw.test.iter().enumerate() {
        let at = |k: &str| format!("test[{i}].{k}");
        if t.name.is_empty() || !t.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            err(at("name"), format!("{:?} is not a name", t.name), "use letters, digits, - and _");
        } else if !names.insert(t.name.clone()) {
            err(at("name"), format!("{:?} is used twice", t.name), "give every test its own name");
        }
        let metric = match t.metric.as_str() {
            "latency" => Some(Metric::Latency),
            "throughput" => Some(Metric::Throughput),
            m => {
                err(at("metric"), format!("{m:?} is not a metric"), "use \"latency\" or \"throughput\"");
                None
            }
        };
        let mut list = |key: &str, v: &[String], f: &dyn Fn(&str) -> bool, fix: &str| {
            if v.is_empty() {
                err(at(key), "is empty".into(), fix);
            }
            for x in v {
                if !f(x) {
                    err(at(key), format!("{x:?} is not known"), fix);
                }
            }
        };
        list("implementations", &t.implementations, &|x| Implementation::from_key(x).is_some(), "use cyclone, fastdds, fastdds-shm, rustdds, iceoryx2 or udp");
        let archs = t.architectures.clone().unwrap_or_else(|| vec!["decentralized".into()]);
        list("architectures", &archs, &|x| Architecture::from_key(x).is_some(), "use decentralized, federated or centralized");
        let rels = t.reliability.clone().unwrap_or_else(|| vec!["reliable".into()]);
        list("reliability", &rels, &|x| x == "reliable" || x == "best-effort", "use reliable or best-effort");
        let hists = t.history.clone().unwrap_or_else(|| vec!["keep-last:1".into()]);
        list("history", &hists, &|x| parse_history(x).is_some(), "use keep-last:N (N ≥ 1) or keep-all");
        let durs = t.durability.clone().unwrap_or_else(|| vec!["volatile".into()]);
        list("durability", &durs, &|x| x == "volatile" || x == "transient-local", "use volatile or transient-local");
        let nodes = t.nodes.clone().unwrap_or_else(|| vec![1]);
        for &n in &nodes {
            if !(n == 1 || n == 2) {
                err(at("nodes"), format!("{n} nodes"), "use 1 (one node) or 2 (two nodes joined by a bridge)");
            }
        }
        let subs = t.subscribers.clone().unwrap_or_else(|| vec![1]);
        for &s in &subs {
            if !(1..=8).contains(&s) {
                err(at("subscribers"), format!("{s} subscribers"), "use 1 to 8 (paper 002's future work: 1-to-n with n = 1, 2, 4, 8)");
            }
        }
        let sizes = match &t.sizes {
            Some(v) => sizes_of(v, at("sizes"), &mut err),
            None => default_sizes.clone(),
        };
        let count = t.count.unwrap_or(default_count);
        if count == 0 {
            err(at("count"), "is 0".into(), "measure at least one round trip");
        }
        let seconds = t.seconds.unwrap_or(default_seconds);
        if !(seconds > 0.0 && seconds <= 600.0) {
            err(at("seconds"), format!("{seconds}"), "give the seconds of writing per size, more than 0 and at most 600");
        }
        let Some(metric) = metric else { continue };
        for imp in t.implementations.iter().filter_map(|x| Implementation::from_key(x)) {
            for arch in archs.iter().filter_map(|x| Architecture::from_key(x)) {
                for &n in nodes.iter().filter(|n| **n == 1 || **n == 2) {
                    for rel in &rels {
                        for h in hists.iter().filter_map(|x| parse_history(x)) {
                            for dur in &durs {
                                for &s in subs.iter().filter(|s| (1..=8).contains(*s)) {
                                    let reliability = if rel == "best-effort" { Reliability::BestEffort } else { Reliability::Reliable };
                                    let durability = if dur == "transient-local" { Durability::TransientLocal } else { Durability::Volatile };
                                    let group = Group {
                                        metric,
                                        implementation: imp,
                                        architecture: arch,
                                        nodes: n as u32,
                                        reliability,
                                        history: h,
                                        durability,
                                        subscribers: s as u32,
                                    };
                                    let refusal = imp.refuses(arch, n as u32, &group.qos()).or_else(|| {
                                        (arch == Architecture::Federated && n == 1).then(|| {
                                            "a federated daemon forwards between its node's domain and the network: with one node there is nothing to forward".into()
                                        })
                                    });
                                    if let Some(why) = refusal {
                                        not_applicable.push(NotApplicable { test: t.name.clone(), group, why });
                                        continue;
                                    }
                                    if !ids.insert(group.id()) {
                                        continue; // another test measures it already
                                    }
                                    planned.push(Planned { test: t.name.clone(), group, sizes: sizes.clone(), count, warmup: t.warmup.unwrap_or(default_warmup), seconds });
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(MatrixErrors(errors));
    }
    Ok(Matrix { planned, not_applicable })
}

/// Reads and checks a matrix file.
pub fn load(path: &std::path::Path) -> Result<Matrix, MatrixErrors> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        MatrixErrors(vec![MatrixError { file: file.clone(), field: "(file)".into(), message: e.to_string(), fix: "give the path of a readable matrix file".into() }])
    })?;
    parse(&text, &file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_matrix_is_valid_and_covers_the_papers_figures() {
        let m = parse(DEFAULT_MATRIX, "built-in").unwrap();
        for n in [1, 2] {
            assert!(m.planned.iter().any(|p| p.group.metric == Metric::Latency && p.group.nodes == n && p.sizes == PAPER_SIZES.to_vec()));
        }
        assert!(m.not_applicable.iter().any(|n| n.group.implementation == Implementation::Iceoryx2 && n.group.nodes == 2));
    }

    #[test]
    fn a_cell_id_names_every_dimension() {
        let g = Group {
            metric: Metric::Latency,
            implementation: Implementation::FastddsShm,
            architecture: Architecture::Decentralized,
            nodes: 1,
            reliability: Reliability::BestEffort,
            history: History::KeepLast(1),
            durability: Durability::TransientLocal,
            subscribers: 4,
        };
        assert_eq!(g.cell_id(1024), "latency-fastdds-shm-decentralized-1n-be-keep-last1-tl-x4-1024B");
    }

    #[test]
    fn bad_matrices_name_the_file_the_field_and_the_fix() {
        let cases = [
            ("[[test]]\nname = \"a\"\nmetric = \"speed\"\nimplementations = [\"cyclone\"]\n", "test[0].metric"),
            ("[[test]]\nname = \"a\"\nmetric = \"latency\"\nimplementations = [\"opendds\"]\n", "test[0].implementations"),
            ("[[test]]\nname = \"a\"\nmetric = \"latency\"\nimplementations = [\"cyclone\"]\nsizes = [0]\n", "test[0].sizes"),
            ("[[test]]\nname = \"a\"\nmetric = \"latency\"\nimplementations = [\"cyclone\"]\nnodes = [3]\n", "test[0].nodes"),
            ("[[test]]\nname = \"a\"\nmetric = \"latency\"\nimplementations = [\"cyclone\"]\nsubscribers = [9]\n", "test[0].subscribers"),
            ("[[test]]\nname = \"a\"\nmetric = \"latency\"\nimplementations = [\"cyclone\"]\nhistory = [\"keep-some\"]\n", "test[0].history"),
            ("[[test]]\nname = \"a\"\nmetric = \"latency\"\nimplementations = [\"cyclone\"]\ncolour = 1\n", "(syntax)"),
            ("", "test"),
        ];
        for (text, field) in cases {
            let e = parse(text, "m.toml").unwrap_err();
            assert_eq!(e.0[0].field, field, "{text}: {e}");
            assert!(e.to_string().starts_with("m.toml"), "{e}");
            assert!(!e.0[0].fix.is_empty());
        }
        // Every error at once.
        let e = parse("[[test]]\nname = \"a\"\nmetric = \"x\"\nimplementations = [\"y\"]\n", "m.toml").unwrap_err();
        assert_eq!(e.0.len(), 2, "{e}");
    }

    #[test]
    fn combinations_nothing_can_run_are_listed_with_the_reason() {
        let m = parse("[[test]]\nname = \"a\"\nmetric = \"latency\"\nimplementations = [\"udp\", \"cyclone\"]\narchitectures = [\"centralized\", \"federated\"]\nnodes = [1, 2]\n", "m").unwrap();
        // Cyclone federated over two nodes is the only runnable combination.
        assert_eq!(m.planned.len(), 1);
        assert_eq!(m.planned[0].group.implementation, Implementation::Cyclone);
        assert_eq!(m.planned[0].group.architecture, Architecture::Federated);
        assert_eq!(m.not_applicable.len(), 7);
    }
}
