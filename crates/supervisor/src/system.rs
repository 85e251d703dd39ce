//! What the supervisor builds: a plain description of modules, partitions, plans and networks. The TOML
//! system model (crate partita-system) is converted into this; tests build it directly.
use crate::health::Action;
use std::net::Ipv4Addr;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct SystemSpec {
    /// Name of the system ([A-Za-z0-9_-], used in cgroup and namespace names).
    pub name: String,
    pub modules: Vec<ModuleSpec>,
    /// Domain id of the inter-module network (reached by I/O partitions and native nodes).
    pub external_domain: u32,
}

#[derive(Debug, Clone)]
pub struct ModuleSpec {
    pub name: String,
    /// The module's CPUs (cpuset syntax), shared by its partitions.
    pub cpus: Option<String>,
    /// Domain id of the module's V-NETWORK.
    pub domain: u32,
    /// The cyclic plans, one per CPU; none for a native node (its partitions run freely). Each partition is
    /// in at most one plan; with several plans a partition is pinned to its plan's CPU.
    pub plans: Vec<PlanSpec>,
    pub partitions: Vec<PartitionSpec>,
}

#[derive(Debug, Clone)]
pub struct PlanSpec {
    pub major_frame: Duration,
    /// (partition name, offset, duration)
    pub windows: Vec<(String, Duration, Duration)>,
    /// CPU of the plan executor's thread (default: the first CPU of the module).
    pub executor_cpu: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct PartitionSpec {
    pub name: String,
    pub command: Vec<String>,
    pub memory_bytes: Option<u64>,
    pub pids_max: Option<u64>,
    pub action: Action,
    /// The I/O partition: it also gets a V-NIC on the inter-module network.
    pub io: bool,
    pub env: Vec<(String, String)>,
    /// Its V-NIC address and prefix length on the module's V-NETWORK; `None`: assigned by the supervisor.
    pub address: Option<(Ipv4Addr, u8)>,
    /// Its address and prefix length on the inter-module network (I/O partitions and native nodes); `None`:
    /// assigned by the supervisor.
    pub external_address: Option<(Ipv4Addr, u8)>,
}

impl SystemSpec {
    /// Makes partitions whose command names the program `partita` run `exe` instead (this very binary,
    /// wherever it is installed).
    pub fn run_partita_as(&mut self, exe: &str) {
        for p in self.modules.iter_mut().flat_map(|m| m.partitions.iter_mut()) {
            if p.command.first().map(String::as_str) == Some("partita") {
                p.command[0] = exe.to_string();
            }
        }
    }
}

impl ModuleSpec {
    pub fn is_native(&self) -> bool {
        self.plans.is_empty()
    }

    /// A module with a network of its own: every partitioned module, and a native one that has an I/O
    /// partition (a machine whose processes share a local domain, one of them also on the inter-module
    /// network). A native node without an I/O partition is on the inter-module network only.
    pub fn has_module_network(&self) -> bool {
        !self.is_native() || self.partitions.iter().any(|p| p.io)
    }

    /// Whether partition `p` has a V-NIC on the inter-module network.
    pub fn is_external(&self, p: &PartitionSpec) -> bool {
        p.io || !self.has_module_network()
    }

    /// The index of the (first) plan whose windows name `partition`.
    pub fn plan_index(&self, partition: &str) -> Option<usize> {
        self.plans.iter().position(|pl| pl.windows.iter().any(|(n, _, _)| n == partition))
    }

    /// The plan whose windows name `partition`.
    pub fn plan_of(&self, partition: &str) -> Option<&PlanSpec> {
        self.plan_index(partition).map(|i| &self.plans[i])
    }
}
