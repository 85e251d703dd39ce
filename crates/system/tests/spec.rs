//! The system spec: a system built in code is validated as the file it stands for, covers every key the loader
//! reads (and the documentation lists), and the project's system files read into it and back unchanged.
use partita_system::spec::*;
use partita_system::*;
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A machine with CPUs `0..n` on which programs are looked up in this machine's `PATH`, as `partita check` does
/// (`sh` and `sleep` exist, `partita` is the running binary).
fn real_path_host(n: usize) -> Host {
    Host { cpus: (0..n).collect(), path: Some(search_path()) }
}

/// Every key path of a TOML value: `module[].partition[].health.action`; arrays of tables as `name[]`.
fn key_paths(v: &toml::Value) -> BTreeSet<String> {
    fn walk(v: &toml::Value, prefix: &str, out: &mut BTreeSet<String>) {
        if let toml::Value::Table(t) = v {
            for (k, v) in t {
                let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                out.insert(p.clone());
                match v {
                    toml::Value::Table(_) => walk(v, &p, out),
                    toml::Value::Array(items) if items.iter().all(|i| i.is_table()) && !items.is_empty() => {
                        for i in items {
                            walk(i, &format!("{p}[]"), out);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(v, "", &mut out);
    out
}

fn value(text: &str) -> toml::Value {
    toml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn line_of(text: &str, needle: &str) -> usize {
    text[..text.find(needle).unwrap_or_else(|| panic!("{needle:?} in\n{text}"))].matches('\n').count() + 1
}

// --- The project's own system files -------------------------------------------------------------------------

/// The system files of `dir` (files of another kind, such as a router file, are not system files: the loader
/// refuses them and they have no `[system]`).
fn system_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .filter(|(_, text)| value(text).get("system").is_some())
        .collect()
}

/// Reads `text` into a spec, builds it and compares with the loader's reading of the text itself.
fn assert_round_trips(name: &str, text: &str, host: &Host) {
    let from_file = parse(text, name, host).unwrap_or_else(|e| panic!("{name} is not valid: {e}"));
    let spec = SystemSpec::from_toml(text).unwrap_or_else(|e| panic!("{name} does not read into a SystemSpec: {e}"));
    let written = spec.to_toml();
    let built = spec.build(host, name).unwrap_or_else(|e| panic!("{name} written from its spec is refused: {e}\n{written}"));
    // System is not PartialEq (its trees are not): its Debug shows every field.
    assert_eq!(format!("{built:#?}"), format!("{from_file:#?}"), "{name}: the spec's system differs from the file's\n{written}");
    assert_eq!(SystemSpec::from_toml(&written).unwrap(), spec, "{name}: the spec does not read back from its own TOML\n{written}");
    // No key is lost or invented on the way (the examples write no key at its empty or false value).
    assert_eq!(key_paths(&value(&written)), key_paths(&value(text)), "{name}: the keys differ\n{written}");
}

#[test]
fn every_example_system_reads_into_a_spec_and_builds_to_the_same_system() {
    // The multicore example needs two CPUs; more do no harm.
    let host = Host::with_cpus(4);
    let examples = system_files(&repo().join("examples"));
    assert!(examples.len() >= 5, "the example systems: {:?}", examples.iter().map(|(p, _)| p).collect::<Vec<_>>());
    for (path, text) in &examples {
        assert_round_trips(&path.display().to_string(), text, &host);
    }
    assert_round_trips(BUILTIN_DEFAULT_NAME, BUILTIN_DEFAULT, &host);
}

// --- A spec built in code -----------------------------------------------------------------------------------

/// Two partitions (the second the I/O one) in a 1.5 ms plan on CPU 0, and a native node; the partitions' and
/// the node's programs exist on this machine.
fn two_partitions() -> SystemSpec {
    SystemSpec::new("spec-demo")
        .network(NetworkSpec::new().domain(0))
        .module(
            ModuleSpec::new("camera")
                .cpus([0])
                .partition(
                    PartitionSpec::new("recorder", ["sh", "-c", "exec sleep 3600"])
                        .criticality(Criticality::High)
                        .memory(ByteSize::mib(64))
                        .pids(64)
                        .binds(["sleep"])
                        .env("RUST_LOG", "info")
                        .health(HealthSpec::restart().max_restarts(3).window(Duration::from_millis(10_000)))
                        .time_overrun(TimeOverrunSpec::new().action(OverrunAction::Ignore)),
                )
                .partition(PartitionSpec::new("routing", ["partita", "route"]).io(true).health(HealthSpec::restart()))
                .plan(PlanSpec::new(0, us(1500)).window("recorder", us(0), us(700)).window("routing", us(700), us(800)))
                .path("request", ["routing", "recorder", "routing"]),
        )
        .node(NodeSpec::new("monitor", ["sleep", "3600"]).health(HealthSpec::stop()))
}

#[test]
fn a_spec_built_with_the_setters_validates_and_round_trips() {
    let spec = two_partitions();
    let host = real_path_host(1);
    let system = spec.build(&host, "<spec-demo>").unwrap_or_else(|e| panic!("{e}\n{}", spec.to_toml()));
    assert_eq!(system.name, "spec-demo");
    assert_eq!(system.source, "<spec-demo>");
    let m = &system.modules[0];
    assert_eq!(m.partitions.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["recorder", "routing"]);
    assert_eq!(m.io_partition().unwrap().name, "routing");
    assert_eq!(m.plans[0].frame(), us(1500));
    assert_eq!(m.plans[0].time_of("recorder"), us(700));
    assert_eq!(m.plans[0].time_of("routing"), us(800));
    let recorder = &m.partitions[0];
    assert_eq!(recorder.criticality, Criticality::High);
    assert_eq!(recorder.tree.memory, Some(ByteSize::mib(64)));
    assert_eq!(recorder.tree.pids_max, Some(64));
    assert_eq!(recorder.tree.env.get("RUST_LOG").map(String::as_str), Some("info"));
    assert_eq!(recorder.tree.health, HealthAction::Restart { max_restarts: 3, window: Duration::from_millis(10_000), backoff: Duration::from_millis(100) });
    assert_eq!(recorder.time_overrun.action, OverrunAction::Ignore);
    assert_eq!(recorder.tree.confinement.as_ref().unwrap().binds, ["sleep"]);
    assert_eq!(m.paths[0].through, ["routing", "recorder", "routing"]);
    assert_eq!(system.nodes[0].name, "monitor");
    assert_eq!(system.nodes[0].tree.health, HealthAction::Stop);

    // The TOML is a system file: arrays of tables as such, values in the file's syntax.
    let text = spec.to_toml();
    for needle in ["[system]", "[[module]]", "[[module.partition]]", "[[module.plan]]", "[[module.plan.window]]", "[[module.path]]", "[[node]]", "memory = \"64MiB\"", "major_frame = \"1500us\"", "criticality = \"high\""] {
        assert!(text.contains(needle), "{needle} in\n{text}");
    }
    assert_eq!(SystemSpec::from_toml(&text).unwrap(), spec);
    assert_eq!(format!("{:?}", parse(&text, "<spec-demo>", &host).unwrap()), format!("{system:?}"));
}

#[test]
fn a_spec_equals_the_spec_read_from_the_file_it_stands_for() {
    let file = r#"
[system]
name = "spec-demo"

[network]
domain = 0

[[module]]
name = "camera"
cpus = [0]

[[module.partition]]
name = "recorder"
command = ["sh", "-c", "exec sleep 3600"]
criticality = "high"
memory = "64MiB"
pids = 64
binds = ["sleep"]
env = { RUST_LOG = "info" }
health = { action = "restart", max_restarts = 3, window = "10s" }
time_overrun = { action = "ignore" }

[[module.partition]]
name = "routing"
command = ["partita", "route"]
io = true
health = { action = "restart" }

[[module.plan]]
cpu = 0
major_frame = "1.5ms"
window = [{ partition = "recorder", start = "0us", duration = "700us" }, { partition = "routing", start = "700us", duration = "800us" }]

[[module.path]]
name = "request"
through = ["routing", "recorder", "routing"]

[[node]]
name = "monitor"
command = ["sleep", "3600"]
health = { action = "stop" }
"#;
    assert_eq!(SystemSpec::from_toml(file).unwrap(), two_partitions());
}

#[test]
fn a_vm_partition_and_an_uplink_from_the_setters() {
    let spec = SystemSpec::new("vm-demo")
        .host("a")
        .host("b")
        .peer("far", Ipv4Addr::new(192, 0, 2, 50))
        .module(
            ModuleSpec::new("m")
                .host("a")
                .cpus([0])
                .partition(PartitionSpec::new("guest", ["sleep", "3600"]).vm(VmSpec::new().memory(ByteSize::mib(192)).vcpus(1).accel(Accel::Tcg).boot_timeout(Duration::from_millis(90_000))))
                .partition(PartitionSpec::new("routing", ["partita", "route"]).io(true).uplink(UplinkSpec::new("eth1", UplinkMode::Macvlan, "192.0.2.10/24").gateway(Ipv4Addr::new(192, 0, 2, 1))))
                .plan(PlanSpec::new(0, us(1500)).window("guest", us(0), us(700)).window("routing", us(700), us(800))),
        )
        .node(NodeSpec::new("monitor", ["sleep", "3600"]).host("b").uplink(UplinkSpec::new("eth1", UplinkMode::Move, "192.0.2.11/24")));
    let system = spec.build(&real_path_host(1), "<vm-demo>").unwrap_or_else(|e| panic!("{e}\n{}", spec.to_toml()));
    let m = &system.modules[0];
    let vm = m.partitions[0].vm.as_ref().expect("a VM partition");
    assert_eq!((vm.memory, vm.accel, vm.boot_timeout), (ByteSize::mib(192), Accel::Tcg, Duration::from_millis(90_000)));
    let uplink = m.partitions[1].tree.uplink.as_ref().expect("an uplink");
    assert_eq!((uplink.mode, uplink.gateway), (UplinkMode::Macvlan, Some(Ipv4Addr::new(192, 0, 2, 1))));
    assert!(uplink.peers.contains(&Ipv4Addr::new(192, 0, 2, 50)) && uplink.peers.contains(&Ipv4Addr::new(192, 0, 2, 11)), "{:?}", uplink.peers);
    assert_eq!(system.hosts, ["a", "b"]);
    let text = spec.to_toml();
    assert!(text.contains("kind = \"vm\""), "{text}");
    assert_eq!(SystemSpec::from_toml(&text).unwrap(), spec);
}

// --- Refused as the file is ---------------------------------------------------------------------------------

#[test]
fn a_window_beyond_the_frame_is_refused_with_the_files_problem_line_and_field() {
    let mut spec = two_partitions();
    spec.module[0].plan[0].window[1].duration = us(900); // 700 + 900 > 1500
    let e = spec.build(&real_path_host(1), "bad.toml").unwrap_err().0;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].problem, Problem::WindowBeyondFrame { end: "1600us".into(), frame: "1500us".into() });
    assert_eq!(e[0].path, "module[camera].plan[0].window[1].duration");
    assert_eq!(e[0].file, "bad.toml");
    // The line is that of the key in the spec's TOML, so writing the text to bad.toml shows it.
    let text = spec.to_toml();
    assert_eq!(e[0].line, line_of(&text, "duration = \"900us\""));
    // The same system written by hand is refused with the same problem at the same field.
    let by_hand = BUILTIN_DEFAULT.replace("duration = \"800us\"", "duration = \"900us\"");
    let f = parse(&by_hand, "bad.toml", &Host::with_cpus(1)).unwrap_err().0;
    assert_eq!((&f[0].problem, f[0].path.replace("camera-node", "camera")), (&e[0].problem, e[0].path.clone()));
}

#[test]
fn a_duplicate_partition_name_is_refused_as_in_a_file() {
    let mut spec = two_partitions();
    spec.module[0].partition[1].name = "recorder".into();
    spec.module[0].plan[0].window[1].partition = "recorder".into();
    let e = spec.build(&real_path_host(1), "dup.toml").unwrap_err().0;
    let text = spec.to_toml();
    let first_line = line_of(&text, "name = \"recorder\"");
    let d = e.iter().find(|d| matches!(d.problem, Problem::Duplicate { .. })).unwrap_or_else(|| panic!("{e:?}"));
    assert_eq!(d.problem, Problem::Duplicate { what: "partition or node", name: "recorder".into(), first_line });
    assert_eq!(d.path, "module[camera].partition[recorder].name");
    assert!(d.line > first_line);
    assert_eq!(text.lines().nth(d.line - 1).map(str::trim), Some("name = \"recorder\""));
    // `build` is the loader on the spec's text: the same errors, all of them.
    assert_eq!(parse(&text, "dup.toml", &real_path_host(1)).unwrap_err().0, e);
}

#[test]
fn programs_are_looked_up_on_the_host_as_for_a_file() {
    let mut spec = two_partitions();
    spec.module[0].partition[0].command = vec!["no-such-program-partita-spec".into()];
    let e = spec.build(&real_path_host(1), "p.toml").unwrap_err().0;
    assert_eq!(e[0].problem, Problem::ProgramNotFound { program: "no-such-program-partita-spec".into() });
    assert_eq!(e[0].path, "module[camera].partition[recorder].command[0]");
    // A host on which programs are not looked up (tests of the format) takes it.
    assert!(spec.build(&Host::with_cpus(1), "p.toml").is_ok());
}

#[test]
fn numbers_beyond_toml_are_refused_by_build_not_a_panic() {
    let mut spec = two_partitions();
    spec.module[0].partition[0].pids = Some(u64::MAX);
    let e = spec.build(&Host::with_cpus(1), "big.toml").unwrap_err().0;
    assert_eq!((e[0].file.as_str(), e[0].path.as_str()), ("big.toml", "(spec)"));
    assert!(spec.try_to_toml().is_err());
}

// --- Every key ----------------------------------------------------------------------------------------------

/// A valid system file with every key the loader reads and the documentation lists, each at least once (the
/// nested keys of `health`, `scheduling` and `uplink` on a partition: a node's are the same tables). No key is
/// at its empty or `false` value, so that writing its spec gives back exactly these keys.
const EVERY_KEY: &str = r#"
[system]
name = "every-key"
cpu_dma_latency = "1us"
preemption = "keep"
housekeeping_cpus = [3]

[network]
domain = 5
subnet = "198.18.100.0/24"

[health_monitor]
power_fail = "stop_module"
hardware_fault = "ignore"

[[host]]
name = "alpha"

[[peer]]
name = "far"
address = "192.0.2.50"

[[module]]
name = "m"
host = "alpha"
cpus = [0, 1]
domain = 7
subnet = "198.18.101.0/24"
default_plan = "normal"

[module.health_monitor]
hardware_fault = "stop_module"
missed_window = { action = "switch_plan", plan = "degraded" }

[[module.partition]]
name = "app"
command = ["prog", "--flag"]
kind = "process"
network = true
criticality = "high"
memory = "128MiB"
pids = 64
cpus = [0]
domain = 9
address = "198.18.101.20"
uid = 2000000000
lock_memory = true
capabilities = ["CAP_NET_BIND_SERVICE"]
binds = ["sh"]
log_size = "1MiB"
env = { RUST_LOG = "info" }
health = { action = "restart", max_restarts = 5, window = "10s", backoff = "200ms" }
scheduling = { policy = "fifo", priority = 10 }
seccomp = { allow = ["ptrace"] }
time_overrun = { tolerance = "200us", count = 3, frames = 20, action = "idle" }
disk = { read_bps = "64MiB", write_bps = "unlimited", read_iops = 500, write_iops = 1000 }
limits = { message_queue_bytes = "1MiB", queued_signals = 512 }
state = { size = "32MiB", inodes = 1024 }
system_partition = true

[module.partition.health_monitor]
deadline_missed = { action = "switch_plan", plan = "degraded" }
application_error = "restart_warm"
numeric_error = "idle"
illegal_request = "ignore"
stack_overflow = "stop"
memory_violation = "restart_cold"
hardware_fault = "restart_cold"
power_fail = "ignore"
seccomp_denial = "stop"
oom = "restart_cold"
pids_limit = "restart_warm"
missed_window = "ignore"
ran_outside_window = "idle"
exited = { action = "restart_cold", max = 2, within = "60s", then = "switch_plan", plan = "degraded" }

[[module.partition]]
name = "guest"
command = ["sleep", "3600"]
kind = "vm"
memory = "512MiB"
disk = "unlimited"
vm = { memory = "256MiB", vcpus = 2, accel = "tcg", kernel = "/boot/vmlinuz-guest", initramfs = "/srv/guest-extra.cpio", append = ["quiet"], boot_timeout = "90s" }

[[module.partition]]
name = "routing"
command = ["partita", "route"]
io = true

[module.partition.uplink]
interface = "eth1"
mode = "macvlan"
address = "192.0.2.10/24"
gateway = "192.0.2.1"
mtu = 1500
domain = 20
multicast = true
allow_host_connection_loss = true

[module.partition.uplink.security]
ca = "/etc/partita/pki/ca.pem"
certificate = "/etc/partita/pki/routing.pem"
private_key = "/etc/partita/pki/routing.key"
permissions_ca = "/etc/partita/pki/permissions-ca.pem"
governance = "/etc/partita/pki/governance.p7s"
permissions = "/etc/partita/pki/permissions.p7s"

[module.partition.router]
max_topics = 16

[[module.partition.router.route]]
from = "uplink"
to = "module"
both_ways = true
allow = ["demo/*"]

[[module.plan]]
name = "normal"
cpu = 0
major_frame = "1ms"
freeze_ahead = "50us"
wake_ahead = "20us"
demote = false

[[module.plan.window]]
partition = "app"
start = "0us"
duration = "400us"

[[module.plan.window]]
partition = "routing"
start = "400us"
duration = "500us"

[[module.plan]]
name = "normal"
cpu = 1
major_frame = "2ms"

[[module.plan.window]]
partition = "guest"
start = "0us"
duration = "2ms"

[[module.plan]]
name = "degraded"
cpu = 0
major_frame = "1ms"

[[module.plan.window]]
partition = "routing"
start = "0us"
duration = "500us"

[[module.plan]]
name = "degraded"
cpu = 1
major_frame = "2ms"

[[module.plan.window]]
partition = "guest"
start = "0us"
duration = "1ms"

[[module.path]]
name = "request"
through = ["routing", "app", "routing"]

[[module.channel]]
name = "position"
kind = "sampling"
source = "app"
destinations = ["routing:position_in"]
max_message = "64B"
refresh = "100ms"

[[module.channel]]
name = "commands"
kind = "queuing"
source = "routing"
destinations = ["app"]
max_message = "1KiB"
depth = 8
on_fault = "restart"

[[node]]
name = "monitor"
command = ["mon"]
host = "alpha"
memory = "32MiB"
pids = 32
cpus = [2]
domain = 11
address = "198.18.100.50"
log_size = "2MiB"
env = { MODE = "watch" }
health = { action = "stop" }
scheduling = { policy = "normal" }

[node.uplink]
interface = "eth2"
mode = "ipvlan"
address = "192.0.2.11/24"
"#;

/// The table of the file each of the loader's raw structs reads (`[]`: an array of tables).
const RAW_TABLES: &[(&str, &str)] = &[
    ("RawFile", ""),
    ("RawSystem", "system"),
    ("RawNetwork", "network"),
    ("RawHost", "host[]"),
    ("RawPeer", "peer[]"),
    ("RawModule", "module[]"),
    ("RawPath", "module[].path[]"),
    ("RawChannel", "module[].channel[]"),
    ("RawPartition", "module[].partition[]"),
    ("RawHealth", "module[].partition[].health"),
    ("RawScheduling", "module[].partition[].scheduling"),
    ("RawSeccomp", "module[].partition[].seccomp"),
    ("RawTimeOverrun", "module[].partition[].time_overrun"),
    ("RawVm", "module[].partition[].vm"),
    ("RawUplink", "module[].partition[].uplink"),
    ("RawSecurity", "module[].partition[].uplink.security"),
    ("RawHmEntry", "module[].partition[].health_monitor.exited"),
    ("RawPlan", "module[].plan[]"),
    ("RawWindow", "module[].plan[].window[]"),
    ("RawNode", "node[]"),
];

/// The fields of every `struct Raw…` in a source file (the loader's serde structs: a field is a key).
fn raw_structs(source: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("pub(crate) struct ").or_else(|| line.trim_start().strip_prefix("struct ")) else { continue };
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.starts_with("Raw") || !rest.trim_end().ends_with('{') {
            continue;
        }
        let mut fields = Vec::new();
        for l in lines.by_ref() {
            let l = l.trim();
            if l == "}" {
                break;
            }
            if l.starts_with("//") || l.starts_with('#') {
                continue;
            }
            let l = l.strip_prefix("pub ").unwrap_or(l);
            if let Some((field, _)) = l.split_once(':') {
                fields.push(field.trim().to_string());
            }
        }
        out.push((name, fields));
    }
    out
}

#[test]
fn the_every_key_file_has_every_field_of_the_loaders_raw_structs() {
    let keys = key_paths(&value(EVERY_KEY));
    let mut sources = raw_structs(include_str!("../src/load.rs"));
    sources.extend(raw_structs(include_str!("../src/uplink.rs")));
    // RawPlacement is what the loader takes out of the file for its second pass, not a table of the file.
    sources.retain(|(name, _)| name != "RawPlacement");
    let named: BTreeSet<&str> = sources.iter().map(|(n, _)| n.as_str()).collect();
    let known: BTreeSet<&str> = RAW_TABLES.iter().map(|(n, _)| *n).collect();
    assert_eq!(named, known, "a raw struct of the loader is not in RAW_TABLES (or is gone): give the spec its table and RAW_TABLES its path");
    let mut missing = Vec::new();
    for (name, fields) in &sources {
        let table = RAW_TABLES.iter().find(|(n, _)| n == name).unwrap().1;
        assert!(!fields.is_empty(), "{name} has no fields?");
        for f in fields {
            let path = if table.is_empty() { f.clone() } else { format!("{table}.{f}") };
            if !keys.contains(&path) {
                missing.push(format!("{name}.{f} ({path})"));
            }
        }
    }
    assert!(missing.is_empty(), "keys the loader reads that EVERY_KEY (and so perhaps the spec) lacks: {missing:?}");
}

#[test]
fn the_every_key_file_has_every_key_the_documentation_lists() {
    let keys = key_paths(&value(EVERY_KEY));
    let doc = std::fs::read_to_string(repo().join("docs/configuration.md")).unwrap();
    // The heading a table of keys stands under → the table of the file it documents.
    let tables: &[(&str, &str)] = &[
        ("## `[system]`", "system"),
        ("## `[network]`", "network"),
        ("## `[[module]]`", "module[]"),
        ("### `[[module.partition]]`", "module[].partition[]"),
        ("#### A VM partition", "module[].partition[].vm"),
        ("### `[[module.plan]]`", "module[].plan[]"),
        ("### `[[module.plan.window]]`", "module[].plan[].window[]"),
        ("### `[[module.path]]`", "module[].path[]"),
        ("### `[[module.channel]]`", "module[].channel[]"),
        ("### Error kinds: the keys of a table", "module[].partition[].health_monitor"),
        ("### An entry: an action word, or a table", "module[].partition[].health_monitor.exited"),
        ("## `[[node]]`", "node[]"),
    ];
    let mut table: Option<&str> = None;
    let mut heading = String::new();
    let mut listed = 0;
    let mut missing = Vec::new();
    for line in doc.lines() {
        if line.starts_with('#') {
            heading = line.to_string();
            table = tables.iter().find(|(h, _)| line.starts_with(h)).map(|(_, t)| *t);
            continue;
        }
        let Some(key) = line.strip_prefix("| `").and_then(|r| r.split_once("` |")).map(|(k, _)| k) else { continue };
        let table = table.unwrap_or_else(|| panic!("docs/configuration.md lists key {key:?} under {heading:?}, a heading this test does not know: add it"));
        listed += 1;
        let path = format!("{table}.{key}");
        if !keys.contains(&path) {
            missing.push(path);
        }
    }
    assert!(listed > 60, "only {listed} keys found in docs/configuration.md: has its table format changed?");
    assert!(missing.is_empty(), "keys docs/configuration.md lists that EVERY_KEY lacks: {missing:?}");
}

#[test]
fn the_spec_reads_every_key_and_builds_the_files_system() {
    let host = Host::with_cpus(4);
    let from_file = parse(EVERY_KEY, "every-key.toml", &host).unwrap_or_else(|e| panic!("EVERY_KEY is not valid: {e}"));
    let spec = SystemSpec::from_toml(EVERY_KEY).unwrap_or_else(|e| panic!("the spec lacks a key: {e}"));
    let written = spec.to_toml();
    // Every key comes back, none is added: the spec keeps every key it reads.
    assert_eq!(key_paths(&value(&written)), key_paths(&value(EVERY_KEY)), "{written}");
    assert_eq!(SystemSpec::from_toml(&written).unwrap(), spec);
    let built = spec.build(&host, "every-key.toml").unwrap_or_else(|e| panic!("{e}\n{written}"));
    assert_eq!(format!("{built:#?}"), format!("{from_file:#?}"));
    // A few values, to see that they arrive where they belong.
    let app = &built.modules[0].partitions[0];
    assert_eq!(app.tree.scheduling, Scheduling::Fifo { priority: 10 });
    assert_eq!(app.time_overrun, TimeOverrun { tolerance: us(200), count: 3, frames: 20, action: OverrunAction::Idle });
    assert_eq!(app.tree.disk, DiskLimits { read_bps: Some(64 << 20), write_bps: None, read_iops: Some(500), write_iops: Some(1000) });
    assert_eq!(built.modules[0].partitions[1].tree.disk, DiskLimits::default());
    assert_eq!(built.host.preemption, Preemption::Keep);
    assert_eq!(built.cpu_dma_latency, Some(us(1)));
    let sec = built.modules[0].partitions[2].tree.uplink.as_ref().unwrap().security.as_ref().unwrap();
    assert_eq!(sec.permissions_ca, Path::new("/etc/partita/pki/permissions-ca.pem"));
    assert_eq!(spec.module[0].partition[1].kind, Some(PartitionKind::Vm));
    assert_eq!(spec.system.cpu_dma_latency, Some(CpuDmaLatency::Bound(us(1))));
    // The named plans, the system partition and the health-monitor tables.
    let m = &built.modules[0];
    assert_eq!(m.plan_sets().iter().map(|(n, p)| (*n, p.len())).collect::<Vec<_>>(), [("normal", 2), ("degraded", 2)]);
    assert!(app.system_partition);
    assert_eq!(app.health_monitor.entries.len(), ErrorKind::ALL.len());
    assert_eq!(m.health_monitor.get(ErrorKind::MissedWindow), Some(&HmEntry::new(HmAction::SwitchPlan("degraded".into()))));
    assert_eq!(built.health_monitor.get(ErrorKind::PowerFail), Some(&HmEntry::new(HmAction::StopModule)));
    let exited = &spec.module[0].partition[0].health_monitor.as_ref().unwrap()["exited"];
    assert_eq!(exited, &HmEntrySpec::new("restart_cold").escalate(2, Duration::from_millis(60_000), "switch_plan").plan("degraded"));
}

#[test]
fn the_spec_refuses_a_key_the_loader_does_not_know_in_every_table() {
    /// The first table of the file at each key path (`module[].partition[].uplink`), by where it is: keys and
    /// array indices.
    fn tables(v: &toml::Value, path: &str, at: &mut Vec<toml::Value>, out: &mut Vec<(String, Vec<toml::Value>)>) {
        let toml::Value::Table(t) = v else { return };
        if !out.iter().any(|(p, _)| p == path) {
            out.push((path.to_string(), at.clone()));
        }
        for (k, v) in t {
            // Free-form tables: the router's (checked by partita-router-config) and env.
            if k == "router" || k == "env" {
                continue;
            }
            let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
            at.push(toml::Value::String(k.clone()));
            match v {
                toml::Value::Table(_) => tables(v, &p, at, out),
                toml::Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        at.push(toml::Value::Integer(i as i64));
                        tables(item, &format!("{p}[]"), at, out);
                        at.pop();
                    }
                }
                _ => {}
            }
            at.pop();
        }
    }
    let every = value(EVERY_KEY);
    let mut found = Vec::new();
    tables(&every, "", &mut Vec::new(), &mut found);
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    // Every table of the loader, and the inline ones the loader reads as values (disk, limits, state).
    for (_, t) in RAW_TABLES {
        assert!(paths.contains(t), "{t} in {paths:?}");
    }
    for t in ["module[].partition[].disk", "module[].partition[].limits", "module[].partition[].state"] {
        assert!(paths.contains(&t), "{t} in {paths:?}");
    }
    for (path, at) in &found {
        let mut v = every.clone();
        let mut table = &mut v;
        for seg in at {
            table = match seg {
                toml::Value::String(k) => table.get_mut(k.as_str()).unwrap(),
                toml::Value::Integer(i) => table.get_mut(*i as usize).unwrap(),
                _ => unreachable!(),
            };
        }
        table.as_table_mut().unwrap().insert("no_such_key".into(), toml::Value::Integer(1));
        let text = toml::to_string(&v).unwrap();
        let e = SystemSpec::from_toml(&text).expect_err(&format!("the spec took an unknown key in {path:?}"));
        assert!(e.message().contains("no_such_key"), "{path}: {e}");
        // … as the loader does.
        assert!(parse(&text, "x.toml", &Host::with_cpus(4)).is_err(), "{path}");
    }
}

#[test]
fn durations_sizes_and_words_are_written_in_the_files_syntax() {
    let spec = SystemSpec::new("w")
        .cpu_dma_latency(CpuDmaLatency::Off)
        .preemption(Preemption::Full)
        .module(ModuleSpec::new("m").subnet("198.18.4.0/24".parse().unwrap()).partition(
            PartitionSpec::new("p", ["prog"])
                .memory(ByteSize(1_048_577))
                .disk(DiskSpec::Limits(DiskLimitsSpec { write_bps: Some(DiskLimit::At(ByteSize::mib(32))), write_iops: Some(DiskLimit::Unlimited), ..Default::default() }))
                .health(HealthSpec::restart().backoff(Duration::from_nanos(1_500_000))),
        ));
    let text = spec.to_toml();
    for needle in ["cpu_dma_latency = \"off\"", "preemption = \"full\"", "subnet = \"198.18.4.0/24\"", "memory = \"1048577B\"", "write_bps = \"32MiB\"", "write_iops = \"unlimited\"", "backoff = \"1500us\"", "action = \"restart\""] {
        assert!(text.contains(needle), "{needle} in\n{text}");
    }
    assert_eq!(SystemSpec::from_toml(&text).unwrap(), spec);
    assert!("off".parse::<CpuDmaLatency>() == Ok(CpuDmaLatency::Off) && "1.5ms".parse::<CpuDmaLatency>() == Ok(CpuDmaLatency::Bound(us(1500))));
    // Words the loader does not know are refused on reading, naming the ones it does.
    let e = SystemSpec::from_toml("[system]\nname = \"w\"\npreemption = \"some\"\n").unwrap_err();
    assert!(e.message().contains("full") && e.message().contains("keep"), "{e}");
}
