//! A group of cells as a system file: the agents as native nodes (decentralized, centralized) or as
//! partitions of modules whose I/O partitions run partita's routing service (federated), built as a
//! `SystemSpec` and validated like a user's file. The supervisor builds the namespaces, the bridge, the V-NICs and each
//! program's DDS configuration (`CYCLONEDDS_URI`, the Fast DDS profile), and removes them all afterwards.
//!
//! | architecture | one node | two nodes |
//! |---|---|---|
//! | decentralized | node `node` (CPUs 0 and 1) runs every agent: the ping on CPU 0, the pongs on CPU 1 | node `a` (CPU 0) the ping, node `b` (CPU 1) the pongs, on the inter-module bridge |
//! | centralized | as decentralized, with Fast DDS's discovery server in the node | as decentralized, the discovery server in node `b` |
//! | federated | — | module `a` (CPU 0, domain 1): partition `ping` and the I/O partition `daemon-a` running `partita route`; module `b` (CPU 1, domain 2): `pong` and `daemon-b`; the daemons meet on domain 0 |
use crate::agent::args::{AgentArgs, Role};
use crate::matrix::{Architecture, Implementation, Metric, Planned};
use partita_lab::setup::{Setup, LOCK_MEMORY_FLAG};
use partita_system::spec::{HealthSpec, ModuleSpec, NetworkSpec, NodeSpec, PartitionSpec, SystemSpec};
use partita_system::{ByteSize, Subnet};
use std::fmt::Write;
use std::net::Ipv4Addr;

/// The inter-module network's addresses: node `a` (or the only node) and node `b`.
pub const ADDRESS_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 10);
pub const ADDRESS_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 11);
/// Fast DDS's discovery server listens here on its node.
pub const DISCOVERY_PORT: u16 = 11811;
/// The UDP agents' readers listen from here on (one port per reader).
pub const UDP_PORT: u16 = 9700;

/// A federated agent's address: the `k`-th agent partition of the module on `domain` (subnet 198.18.<domain>.0/24).
fn federated_address(domain: u32, k: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, domain as u8, 10 + k as u8)
}

/// The /24 of 198.18.0.0/15 whose third byte is `third`.
fn subnet(third: u32) -> Subnet {
    format!("198.18.{third}.0/24").parse().expect("a /24 of 198.18.0.0/15")
}

/// The inter-module network every layout uses: domain 0 on 198.18.0.0/24.
pub fn network() -> NetworkSpec {
    NetworkSpec::new().domain(0).subnet(subnet(0))
}

/// The programs an agent command runs.
#[derive(Debug, Clone)]
pub struct Programs {
    /// The `partita` binary (the built-in agents and the routing service).
    pub partita: String,
    /// The Fast DDS agent.
    pub fastdds: String,
}

/// The system, the partition or node whose exit ends the run, and the names whose logs hold agent output.
#[derive(Debug, Clone)]
pub struct Layout {
    pub spec: SystemSpec,
    pub wait_for: String,
    pub logs: Vec<String>,
}

fn quote(w: &str) -> String {
    if w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:,=+".contains(c)) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// An argv as one `sh` command line.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

/// One agent's argv: `imp`'s agent program with `a` (native nodes lock their memory under the real-time setup;
/// partitions may not).
pub fn argv(imp: Implementation, programs: &Programs, setup: &Setup, a: AgentArgs, native: bool) -> Vec<String> {
    match imp {
        Implementation::Fastdds | Implementation::FastddsShm => {
            let mut v = vec![programs.fastdds.clone()];
            v.extend(a.to_words());
            v
        }
        _ => {
            let mut v = vec![programs.partita.clone()];
            if native && setup.locks_memory() {
                v.push(LOCK_MEMORY_FLAG.into());
            }
            v.extend(["app".into(), "dbe-agent".into()]);
            v.extend(a.to_words());
            v
        }
    }
}

/// An agent of `imp` in `role`, the rest at the protocol's defaults: Fast DDS over shared memory is the Fast
/// DDS agent with `--transport shm`.
pub fn agent_for(imp: Implementation, role: Role) -> AgentArgs {
    match imp {
        Implementation::FastddsShm => AgentArgs { transport: "shm".into(), ..AgentArgs::new(Implementation::Fastdds.key(), role) },
        i => AgentArgs::new(i.key(), role),
    }
}

/// The agent arguments of a role in a group.
fn agent_args(p: &Planned, role: Role, topic: &str, domain: u32, cpu: Option<usize>) -> AgentArgs {
    let g = &p.group;
    let mut a = agent_for(g.implementation, role);
    a.domain = Some(domain);
    a.topic = topic.into();
    a.sizes = p.sizes.clone();
    a.count = p.count;
    a.warmup = p.warmup;
    a.subscribers = g.subscribers;
    a.qos = g.qos();
    a.seconds = p.seconds;
    a.cpu = cpu;
    // Federated round trips cross two daemons each way; a late sample is still not lost.
    if g.architecture == Architecture::Federated {
        a.timeout = std::time::Duration::from_millis(2000);
    }
    a
}

/// The system of one group. `name` is the system's name, `topic` the run's unique topic base.
pub fn layout(p: &Planned, name: &str, topic: &str, programs: &Programs, setup: &Setup) -> Layout {
    let g = &p.group;
    let sched = setup.scheduling_spec();
    let (lead, follow) = match g.metric {
        Metric::Latency => (Role::Ping, Role::Pong),
        Metric::Throughput => (Role::Pub, Role::Sub),
    };
    let followers = g.subscribers as usize;
    let t = SystemSpec::new(name).cpu_dma_latency(setup.cpu_dma_latency_spec()).network(network());
    let follower_host = if g.nodes == 1 { ADDRESS_A } else { ADDRESS_B };
    let server = format!("{follower_host}:{DISCOVERY_PORT}");
    let with_network = |mut a: AgentArgs, k: usize, own: Ipv4Addr| {
        if g.implementation == Implementation::Udp {
            if a.role == lead {
                a.listen = Some(format!("{own}:0"));
                a.peers = (0..followers).map(|i| format!("{follower_host}:{}", UDP_PORT + i as u16)).collect();
            } else {
                a.listen = Some(format!("{follower_host}:{}", UDP_PORT + k as u16));
            }
        }
        // RustDDS joins multicast and announces itself on every interface unless told one address.
        if g.implementation == Implementation::Rustdds {
            a.listen = Some(format!("{own}:0"));
        }
        if g.architecture == Architecture::Centralized {
            a.discovery_server = Some(server.clone());
        }
        a
    };
    match g.architecture {
        Architecture::Decentralized | Architecture::Centralized => {
            let lead_cmd = argv(p.group.implementation, programs, setup, with_network(agent_args(p, lead, topic, 0, Some(0)), 0, ADDRESS_A), true);
            let mut follow_cmds: Vec<Vec<String>> = (0..followers)
                .map(|k| argv(p.group.implementation, programs, setup, with_network(agent_args(p, follow, topic, 0, Some(1)), k, follower_host), true))
                .collect();
            if g.architecture == Architecture::Centralized {
                let mut s = agent_args(p, Role::Server, topic, 0, Some(1));
                s.listen = Some(server.clone());
                s.discovery_server = None;
                follow_cmds.insert(0, argv(p.group.implementation, programs, setup, s, true));
            }
            let script = |lead: Option<&Vec<String>>, rest: &[Vec<String>]| {
                let mut s = String::new();
                // The discovery server runs until the others are done.
                let server = g.architecture == Architecture::Centralized;
                for (i, c) in rest.iter().enumerate() {
                    let _ = write!(s, "{} & {}", shell_line(c), if i == 0 && server { "server=$!; " } else { "" });
                }
                if let Some(l) = lead {
                    let _ = write!(s, "{}; status=$?; ", shell_line(l));
                } else {
                    s.push_str("status=0; ");
                }
                // With a ping in this node the server is ended after it; in node b it lives until the teardown.
                if server && lead.is_some() {
                    s.push_str("kill $server; ");
                }
                s.push_str("wait; exit $status");
                s
            };
            let node = |name: &str, cpus: &[usize], address: Ipv4Addr, command: Vec<String>| {
                NodeSpec::new(name, command).cpus(cpus.iter().copied()).scheduling(sched.clone()).memory(ByteSize::gib(1)).pids(512).address(address)
            };
            if g.nodes == 1 {
                let t = t.node(node("node", &[0, 1], ADDRESS_A, vec!["sh".into(), "-c".into(), script(Some(&lead_cmd), &follow_cmds)]));
                Layout { spec: t, wait_for: "node".into(), logs: vec!["node".into()] }
            } else {
                let t = t.node(node("a", &[0], ADDRESS_A, lead_cmd)).node(node("b", &[1], ADDRESS_B, vec!["sh".into(), "-c".into(), script(None, &follow_cmds)]));
                Layout { spec: t, wait_for: "a".into(), logs: vec!["a".into(), "b".into()] }
            }
        }
        Architecture::Federated => {
            let module = |m: &str, cpu: usize, domain: u32, agents: Vec<(String, Vec<String>)>| {
                let mut module = ModuleSpec::new(m).cpus([cpu]).domain(u64::from(domain)).subnet(subnet(domain));
                for (k, (pname, cmd)) in agents.into_iter().enumerate() {
                    module = module.partition(
                        PartitionSpec::new(pname, cmd)
                            .scheduling(sched.clone())
                            .memory(ByteSize::mib(512))
                            .pids(256)
                            .health(HealthSpec::stop())
                            .address(federated_address(domain, k)),
                    );
                }
                // A daemon routes a topic as soon as a writer appears on either side: the far daemon's writer is
                // the only endpoint the near one sees on the network, and it appears only once the near one wrote.
                let router: toml::Table = toml::from_str("[[route]]\nfrom = \"module\"\nto = \"network\"\nboth_ways = true\ntrigger = \"writer\"\n").expect("a router table");
                module.partition(
                    PartitionSpec::new(format!("daemon-{m}"), ["partita", "route"])
                        .io(true)
                        .scheduling(sched.clone())
                        .memory(ByteSize::mib(512))
                        .pids(256)
                        .router(router),
                )
            };
            let rustdds = |mut a: AgentArgs, address: Ipv4Addr| {
                if g.implementation == Implementation::Rustdds {
                    a.listen = Some(format!("{address}:0"));
                }
                a
            };
            let lead_cmd = argv(p.group.implementation, programs, setup, rustdds(agent_args(p, lead, topic, 1, None), federated_address(1, 0)), false);
            let follows: Vec<(String, Vec<String>)> = (0..followers)
                .map(|k| {
                    let n = if followers == 1 { follow.key().to_string() } else { format!("{}-{}", follow.key(), k + 1) };
                    (n, argv(p.group.implementation, programs, setup, rustdds(agent_args(p, follow, topic, 2, None), federated_address(2, k)), false))
                })
                .collect();
            let mut logs = vec![lead.key().to_string()];
            logs.extend(follows.iter().map(|f| f.0.clone()));
            let t = t.module(module("a", 0, 1, vec![(lead.key().into(), lead_cmd)])).module(module("b", 1, 2, follows));
            Layout { spec: t, wait_for: lead.key().into(), logs }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix;

    #[test]
    fn every_group_of_the_built_in_matrix_is_a_valid_system() {
        let m = matrix::parse(matrix::DEFAULT_MATRIX, "built-in").unwrap();
        let host = partita_system::Host { cpus: vec![0, 1], path: None };
        let programs = Programs { partita: "/usr/bin/partita".into(), fastdds: "/usr/lib/partita/dbe-fastdds".into() };
        for setup in [Setup::Normal, Setup::from_options(false, None, None).unwrap()] {
            for p in &m.planned {
                let l = layout(p, "dbe-test", "dbe_t", &programs, &setup);
                let text = l.spec.to_toml();
                let sys = l.spec.build(&host, &p.group.id()).unwrap_or_else(|e| panic!("{}: {e}\n{text}", p.group.id()));
                assert!(sys.node(&l.wait_for).is_some() || sys.partitions().any(|(_, q)| q.name == l.wait_for), "{}", p.group.id());
                let agents = text.matches("dbe-agent").count() + text.matches("dbe-fastdds").count();
                let expected = 1 + p.group.subscribers as usize + usize::from(p.group.architecture == Architecture::Centralized);
                assert_eq!(agents, expected, "{}:\n{text}", p.group.id());
            }
        }
    }
}
