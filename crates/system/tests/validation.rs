//! Every validation rule: a good file passes, and breaking the rule yields that rule's error with the
//! right file, line and field path.
use partita_system::*;
use std::path::PathBuf;

const GOOD: &str = r#"
[system]
name = "t"

[[module]]
name = "m"
cpus = [0]

[[module.partition]]
name = "a"
command = ["prog"]

[[module.partition]]
name = "b"
command = ["prog", "-x"]
io = true

[[module.plan]]
cpu = 0
major_frame = "1ms"

[[module.plan.window]]
partition = "a"
start = "0us"
duration = "400us"

[[module.plan.window]]
partition = "b"
start = "500us"
duration = "500us"

[[node]]
name = "n"
command = ["mon"]
"#;

fn host() -> Host {
    Host::with_cpus(2)
}

fn errors(text: &str) -> Vec<Diagnostic> {
    match parse(text, "sys.toml", &host()) {
        Ok(_) => panic!("expected errors in:\n{text}"),
        Err(e) => e.0,
    }
}

/// The errors of `GOOD` with `from` replaced by `to` (which must occur).
fn broken(from: &str, to: &str) -> Vec<Diagnostic> {
    assert!(GOOD.contains(from), "{from}");
    errors(&GOOD.replacen(from, to, 1))
}

fn line_of(text: &str, needle: &str) -> usize {
    text[..text.find(needle).expect(needle)].matches('\n').count() + 1
}

#[test]
fn the_good_file_is_valid_and_gets_addresses_and_domains() {
    let s = parse(GOOD, "sys.toml", &host()).unwrap();
    let m = &s.modules[0];
    assert_eq!(s.network.domain.get(), 0);
    assert_eq!(m.network.domain.get(), 1);
    assert!(ADDRESS_POOL.covers(&s.network.subnet) && ADDRESS_POOL.covers(&m.network.subnet));
    assert!(!s.network.subnet.overlaps(&m.network.subnet));
    assert!(m.partitions.iter().all(|p| m.network.subnet.contains(p.address)));
    assert_ne!(m.partitions[0].address, m.partitions[1].address);
    assert_eq!(m.partitions[0].external_address, None);
    let ext = m.partitions[1].external_address.unwrap();
    assert!(s.network.subnet.contains(ext));
    assert!(s.network.subnet.contains(s.nodes[0].address));
    assert_ne!(ext, s.nodes[0].address);
    assert_eq!(m.partitions[0].domain, m.network.domain);
    assert_eq!(s.nodes[0].domain, s.network.domain);
    assert_eq!(m.io_partition().unwrap().name, "b");
    assert_eq!(m.partitions[0].tree.memory, Some(ByteSize(64 << 20)));
}

#[test]
fn errors_name_file_line_and_field() {
    let text = GOOD.replace("start = \"500us\"", "start = \"300us\"");
    let e = errors(&text);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].file, "sys.toml");
    assert_eq!(e[0].line, line_of(&text, "start = \"300us\""));
    assert_eq!(e[0].path, "module[m].plan[0].window[1].start");
    assert!(matches!(e[0].problem, Problem::WindowOverlap { other: 0, .. }), "{:?}", e[0]);
    let msg = e[0].to_string();
    assert!(msg.starts_with(&format!("sys.toml:{}:", e[0].line)) && msg.contains("400us"), "{msg}");
}

#[test]
fn overlapping_windows() {
    let e = broken("duration = \"400us\"", "duration = \"600us\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::WindowOverlap { .. })), "{e:?}");
}

#[test]
fn window_beyond_the_frame() {
    let e = broken("duration = \"500us\"", "duration = \"501us\"");
    assert!(matches!(e[0].problem, Problem::WindowBeyondFrame { .. }), "{e:?}");
    assert_eq!(e[0].path, "module[m].plan[0].window[1].duration");
}

#[test]
fn zero_window_and_zero_frame() {
    let e = broken("duration = \"400us\"", "duration = \"0us\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::ZeroWindow)), "{e:?}");
    let e = broken("major_frame = \"1ms\"", "major_frame = \"0s\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::ZeroFrame)), "{e:?}");
}

#[test]
fn partition_without_window() {
    let e = broken("partition = \"a\"", "partition = \"b\"");
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::NoWindow { name } if name == "a")), "{e:?}");
}

#[test]
fn unknown_partition_in_a_plan() {
    let e = broken("partition = \"b\"", "partition = \"c\"");
    let d = e.iter().find(|d| matches!(d.problem, Problem::UnknownPartition { .. })).expect("unknown partition");
    assert_eq!(d.path, "module[m].plan[0].window[1].partition");
}

#[test]
fn two_io_partitions() {
    let e = broken("command = [\"prog\"]", "command = [\"prog\"]\nio = true");
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::SecondIoPartition { first } if first == "a")), "{e:?}");
}

#[test]
fn cpu_the_machine_does_not_have() {
    let e = broken("cpus = [0]", "cpus = [0, 7]");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::CpuNotAvailable { cpu: 7, .. })), "{e:?}");
    let e = broken("cpu = 0", "cpu = 5");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::CpuNotInModule { cpu: 5, .. })), "{e:?}");
    // a module CPU without a plan
    let e = broken("cpus = [0]", "cpus = [0, 1]");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::CpuWithoutPlan { cpu: 1 })), "{e:?}");
    // the same file is fine on a machine with enough CPUs only if the CPU exists there
    assert!(parse(GOOD, "sys.toml", &Host { cpus: vec![1], path: None }).is_err());
}

#[test]
fn duplicate_names() {
    let e = broken("name = \"b\"", "name = \"a\"");
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::Duplicate { name, .. } if name == "a")), "{e:?}");
    let e = broken("name = \"n\"", "name = \"a\"");
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::Duplicate { .. }) && d.path == "node[a].name"), "{e:?}");
    let two = format!("{GOOD}\n[[module]]\nname = \"m\"\ncpus = [1]\n[[module.partition]]\nname = \"c\"\ncommand = [\"x\"]\n[[module.plan]]\ncpu = 1\nmajor_frame = \"1ms\"\n[[module.plan.window]]\npartition = \"c\"\nstart = \"0us\"\nduration = \"1ms\"\n");
    let e = errors(&two);
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::Duplicate { what: "module", .. })), "{e:?}");
    // and the same with another module name is valid
    assert!(parse(&two.replacen("name = \"m\"\ncpus = [1]", "name = \"m2\"\ncpus = [1]", 1), "x", &host()).is_ok());
}

#[test]
fn memory_floor_and_pids() {
    let e = broken("command = [\"prog\"]", "command = [\"prog\"]\nmemory = \"4MiB\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::MemoryTooSmall { .. })), "{e:?}");
    assert!(parse(&GOOD.replacen("command = [\"prog\"]", "command = [\"prog\"]\nmemory = \"8MiB\"", 1), "x", &host()).is_ok());
    let e = broken("command = [\"prog\"]", "command = [\"prog\"]\nmemory = \"lots\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::BadValue(_))), "{e:?}");
    let e = broken("command = [\"prog\"]", "command = [\"prog\"]\npids = 0");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::PidsZero)), "{e:?}");
}

#[test]
fn subnets_outside_the_pool_overlapping_or_too_small() {
    let e = broken("cpus = [0]", "cpus = [0]\nsubnet = \"10.0.0.0/24\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::SubnetOutsidePool { .. }) && d.path == "module[m].subnet"), "{e:?}");
    let text = GOOD.replacen("name = \"t\"", "name = \"t\"\n[network]\nsubnet = \"198.18.4.0/23\"", 1).replacen("cpus = [0]", "cpus = [0]\nsubnet = \"198.18.5.0/24\"", 1);
    let e = errors(&text);
    assert!(e.iter().any(|d| matches!(d.problem, Problem::SubnetOverlap { .. })), "{e:?}");
    let e = broken("cpus = [0]", "cpus = [0]\nsubnet = \"198.18.5.0/31\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::SubnetTooSmall { .. })), "{e:?}");
    let e = broken("cpus = [0]", "cpus = [0]\nsubnet = \"198.18.5.1/24\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::BadValue(_))), "{e:?}");
    // explicit subnets are honoured and automatic ones avoid them
    let s = parse(&GOOD.replacen("cpus = [0]", "cpus = [0]\nsubnet = \"198.18.0.0/16\"", 1), "x", &host()).unwrap();
    assert_eq!(s.modules[0].network.subnet.to_string(), "198.18.0.0/16");
    assert_eq!(s.network.subnet.to_string(), "198.19.0.0/24");
}

#[test]
fn address_pool_exhausted() {
    // the module takes the whole pool: nothing is left for the inter-module network
    let e = broken("cpus = [0]", "cpus = [0]\nsubnet = \"198.18.0.0/15\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::PoolExhausted { .. }) || matches!(d.problem, Problem::AddressesExhausted { .. })), "{e:?}");
    // a /30 has two hosts: three partitions do not fit
    let text = GOOD.replacen("cpus = [0]", "cpus = [0]\nsubnet = \"198.18.8.0/30\"", 1).replacen(
        "[[module.plan]]",
        "[[module.partition]]\nname = \"c\"\ncommand = [\"x\"]\n[[module.plan]]",
        1,
    );
    let e = errors(&text);
    assert!(e.iter().any(|d| matches!(d.problem, Problem::AddressesExhausted { .. })), "{e:?}");
}

#[test]
fn explicit_addresses_are_checked() {
    let e = broken("name = \"n\"", "name = \"n\"\naddress = \"198.18.200.1\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::AddressOutsideSubnet { .. }) && d.path == "node[n].address"), "{e:?}");
    let text = GOOD.replacen("command = [\"prog\"]", "command = [\"prog\"]\naddress = \"198.18.1.9\"", 1)
        .replacen("command = [\"prog\", \"-x\"]", "command = [\"prog\", \"-x\"]\naddress = \"198.18.1.9\"", 1);
    let e = errors(&text);
    assert!(e.iter().any(|d| matches!(d.problem, Problem::AddressTaken { .. })), "{e:?}");
}

#[test]
fn domain_out_of_range_or_taken() {
    let e = broken("cpus = [0]", "cpus = [0]\ndomain = 233");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::DomainOutOfRange { id: 233 })), "{e:?}");
    assert!(parse(&GOOD.replacen("cpus = [0]", "cpus = [0]\ndomain = 232", 1), "x", &host()).is_ok());
    let e = broken("cpus = [0]", "cpus = [0]\ndomain = 0");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::DomainTaken { id: 0, .. })), "{e:?}");
}

#[test]
fn unknown_keys_are_refused_with_their_line() {
    let text = GOOD.replacen("io = true", "io = true\nprioity = 3", 1);
    let e = errors(&text);
    assert_eq!(e.len(), 1);
    assert!(matches!(&e[0].problem, Problem::Syntax(m) if m.contains("prioity")), "{e:?}");
    assert_eq!(e[0].line, line_of(&text, "prioity"));
    assert_eq!(e[0].path, "module.partition.prioity");
}

#[test]
fn empty_command() {
    let e = broken("command = [\"mon\"]", "command = []");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::EmptyCommand) && d.path == "node[n].command"), "{e:?}");
    let e = broken("command = [\"prog\"]", "command = [\"\"]");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::EmptyCommand)), "{e:?}");
}

#[test]
fn bad_names_criticality_health_and_durations() {
    let e = broken("name = \"a\"", "name = \"a/b\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::BadName { .. })), "{e:?}");
    let e = broken("command = [\"prog\"]", "command = [\"prog\"]\ncriticality = \"extreme\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::BadCriticality(_))), "{e:?}");
    let e = broken("command = [\"prog\"]", "command = [\"prog\"]\nhealth = { action = \"reboot\" }");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::BadHealthAction(_))), "{e:?}");
    let e = broken("command = [\"prog\"]", "command = [\"prog\"]\nhealth = { action = \"stop\", max_restarts = 2 }");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::HealthKeyWithoutRestart { .. })), "{e:?}");
    let e = broken("start = \"0us\"", "start = \"0 parsecs\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::BadValue(_)) && d.path.ends_with("window[0].start")), "{e:?}");
    let s = parse(&GOOD.replacen("command = [\"prog\"]", "command = [\"prog\"]\nhealth = { action = \"restart\", max_restarts = 5, window = \"2s\" }\ncriticality = \"low\"", 1), "x", &host()).unwrap();
    assert_eq!(s.modules[0].partitions[0].tree.health, HealthAction::Restart { max_restarts: 5, window: Duration::from_millis(2000), backoff: Duration::from_millis(100) });
    assert_eq!(s.modules[0].partitions[0].criticality, Criticality::Low);
}

#[test]
fn a_module_without_a_plan_is_a_native_machine() {
    let text = format!("{}{}", &GOOD[..GOOD.find("[[module.plan]]").unwrap()], &GOOD[GOOD.find("[[node]]").unwrap()..]);
    let s = parse(&text, "sys.toml", &host()).unwrap();
    let m = &s.modules[0];
    assert!(m.is_native());
    assert!(m.partitions.iter().all(|p| p.plan.is_none() && p.tree.cpus == vec![0]), "{:?}", m.partitions);
    // it still has its V-NETWORK, and its I/O partition is on the inter-module network
    assert_eq!(m.partitions[0].tree.nics.len(), 1);
    assert_eq!(m.partitions[1].tree.nics.len(), 2);
}

#[test]
fn a_partition_runs_in_one_plan_only() {
    let text = GOOD.replacen("cpus = [0]", "cpus = [0, 1]", 1)
        + "\n[[module.plan]]\ncpu = 1\nmajor_frame = \"1ms\"\n[[module.plan.window]]\npartition = \"a\"\nstart = \"0us\"\nduration = \"100us\"\n";
    // the node table is no longer last, so the appended plan belongs to the module only if it comes before it
    let text = text.replacen("[[node]]\nname = \"n\"\ncommand = [\"mon\"]\n", "", 1) + "[[node]]\nname = \"n\"\ncommand = [\"mon\"]\n";
    let e = errors(&text);
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::PartitionInTwoPlans { partition, cpu: 0, other: 0 } if partition == "a")), "{e:?}");
    assert!(e.iter().any(|d| d.path == "module[m].plan[1].window[0].partition"), "{e:?}");
}

#[test]
fn a_planned_partition_runs_on_its_plans_cpu() {
    let s = parse(GOOD, "sys.toml", &host()).unwrap();
    assert!(s.modules[0].partitions.iter().all(|p| p.plan == Some(0) && p.tree.cpus == vec![0]));
}

#[test]
fn values_the_kernel_or_execve_would_refuse_are_refused_here() {
    let e = broken("command = [\"prog\"]", "command = [\"prog\", \"a\\u0000b\"]");
    assert!(e.iter().any(|d| d.problem == Problem::NulByte && d.path == "module[m].partition[a].command[1]"), "{e:?}");
    let e = broken("command = [\"mon\"]", "command = [\"mon\"]\nenv = { X = \"a\\u0000\" }");
    assert!(e.iter().any(|d| d.problem == Problem::NulByte && d.path == "node[n].env.X"), "{e:?}");
    let e = broken("command = [\"mon\"]", "command = [\"mon\"]\nenv = { \"A=B\" = \"1\" }");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::BadEnvName { .. })), "{e:?}");
    let e = broken("command = [\"mon\"]", "command = [\"mon\"]\nenv = { CYCLONEDDS_URI = \"file:///x.xml\" }");
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::ReservedEnv { name } if name == "CYCLONEDDS_URI")), "{e:?}");
    let e = broken("command = [\"mon\"]", "command = [\"mon\"]\nenv = { FASTRTPS_DEFAULT_PROFILES_FILE = \"/x.xml\" }");
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::ReservedEnv { name } if name == "FASTRTPS_DEFAULT_PROFILES_FILE")), "{e:?}");
    let e = broken("command = [\"mon\"]", "command = [\"mon\"]\nenv = { PARTITA_DOMAIN = \"3\" }");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::ReservedEnv { .. })), "{e:?}");
    let e = broken("command = [\"prog\"]", "command = [\"prog\"]\npids = 9223372036854775807");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::PidsTooMany { max: 4194304 })), "{e:?}");
    let e = broken("major_frame = \"1ms\"", "major_frame = \"11s\"");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::FrameTooLong { .. }) && d.path == "module[m].plan[0].major_frame"), "{e:?}");
}

#[test]
fn programs_are_looked_up_on_the_machine() {
    let dir = std::env::temp_dir().join(format!("partita-path-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("prog");
    std::fs::write(&exe, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let machine = Host { cpus: vec![0, 1], path: Some(vec![dir.clone()]) };
    let e = parse(GOOD, "sys.toml", &machine).unwrap_err().0;
    // prog is found (twice), mon is not
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(matches!(&e[0].problem, Problem::ProgramNotFound { program } if program == "mon") && e[0].path == "node[n].command[0]", "{e:?}");
    let text = GOOD.replace("command = [\"mon\"]", "command = [\"partita\", \"app\", \"monitor\"]");
    assert!(parse(&text, "sys.toml", &machine).is_ok(), "partita stands for the running binary");
    let text = GOOD.replace("command = [\"mon\"]", &format!("command = [{:?}]", dir.display().to_string()));
    let e = parse(&text, "sys.toml", &machine).unwrap_err().0;
    assert!(matches!(e[0].problem, Problem::ProgramNotExecutable { .. }), "{e:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn nodes_take_cpus_limits_and_a_health_action() {
    let s = parse(&GOOD.replacen("command = [\"mon\"]", "command = [\"mon\"]\ncpus = [1]\npids = 12\nmemory = \"16MiB\"\nhealth = { action = \"restart\" }", 1), "sys.toml", &host()).unwrap();
    let n = &s.nodes[0].tree;
    assert_eq!((n.cpus.clone(), n.pids_max, n.memory), (vec![1], Some(12), Some(ByteSize(16 << 20))));
    assert!(matches!(n.health, HealthAction::Restart { .. }));
    let s = parse(GOOD, "sys.toml", &host()).unwrap();
    assert_eq!((s.nodes[0].tree.cpus.is_empty(), s.nodes[0].tree.health, s.nodes[0].tree.pids_max), (true, HealthAction::Ignore, None));
    let e = broken("command = [\"mon\"]", "command = [\"mon\"]\ncpus = [0]");
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::CpuTakenByModule { cpu: 0, other } if other == "m") && d.path == "node[n].cpus"), "{e:?}");
}

#[test]
fn every_host_object_is_named_once_here() {
    let s = parse(GOOD, "sys.toml", &host()).unwrap();
    let tag = HostNames::new("t").tag().to_string();
    let o = s.host_objects();
    assert_eq!(o.bridges, vec![format!("pt{tag}x"), format!("pt{tag}m0")]);
    assert_eq!(o.veths, vec![format!("pt{tag}0n0"), format!("pt{tag}0n1"), format!("pt{tag}0x1"), format!("pt{tag}n0")]);
    assert_eq!(o.namespaces, vec!["partita-t-a", "partita-t-b", "partita-t-n"]);
    assert_eq!(o.cgroups, vec!["partita/t/a", "partita/t/b", "partita/t/n"]);
    let b = &s.modules[0].partitions[1].tree;
    assert_eq!(b.nics.iter().map(|n| (n.name.as_str(), n.network)).collect::<Vec<_>>(), vec![("vnic0", NetworkId::Module(0)), ("vnic1", NetworkId::InterModule)]);
    assert_eq!(s.addresses_on(NetworkId::InterModule), vec![s.modules[0].partitions[1].external_address.unwrap(), s.nodes[0].address]);
    assert_eq!(s.addresses_on(NetworkId::Module(0)), vec![s.modules[0].partitions[0].address, s.modules[0].partitions[1].address]);
}

#[test]
fn several_errors_are_all_reported() {
    let text = GOOD.replacen("name = \"b\"", "name = \"a\"", 1).replacen("duration = \"500us\"", "duration = \"900us\"", 1).replacen("command = [\"mon\"]", "command = []", 1);
    let e = errors(&text);
    assert!(e.len() >= 3, "{e:?}");
    assert!(e.windows(2).all(|w| w[0].line <= w[1].line), "sorted by line");
}

#[test]
fn durations_parse_exactly() {
    assert_eq!("1.5ms".parse::<Duration>().unwrap().as_nanos(), 1_500_000);
    assert_eq!("800us".parse::<Duration>().unwrap().as_nanos(), 800_000);
    assert_eq!("2s".parse::<Duration>().unwrap().as_nanos(), 2_000_000_000);
    assert_eq!("500ns".parse::<Duration>().unwrap().as_nanos(), 500);
    for bad in ["", "ms", "1", "1.ms", ".5ms", "1.2.3ms", "1.5ns", "-1ms", "99999999999999999999s", "1 parsec"] {
        assert!(bad.parse::<Duration>().is_err(), "{bad}");
    }
    assert_eq!(Duration::from_micros(1500).to_string(), "1500us");
    assert_eq!("64MiB".parse::<ByteSize>().unwrap(), ByteSize(64 << 20));
}

#[test]
fn garbage_and_truncated_files_never_panic() {
    let files = [GOOD, BUILTIN_DEFAULT, include_str!("../../../examples/video-surveillance-n-monitors.toml")];
    for f in files {
        for cut in (0..f.len()).filter(|i| f.is_char_boundary(*i)) {
            let _ = parse(&f[..cut], "cut.toml", &host());
        }
    }
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..2000 {
        let mut bytes = GOOD.as_bytes().to_vec();
        for _ in 0..4 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let i = (seed as usize) % bytes.len();
            bytes[i] = b"[]=\"{},.0 9aZ\n#-"[(seed >> 32) as usize % 16];
        }
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse(&text, "garbage.toml", &host());
    }
    for g in ["\u{0}\u{ff}", "[[[", "system = 3", "[system]\nname = \"\"", "[[module]]\nname=1", "[system]\nname=\"x\"\n[[module]]\nname=\"m\"\n[[module.plan]]\nmajor_frame=\"18446744073709551615s\""] {
        assert!(parse(g, "g.toml", &host()).is_err(), "{g:?}");
    }
}

#[test]
fn a_multicore_module_has_one_plan_per_cpu() {
    let text = r#"
[system]
name = "mc"
[[module]]
name = "m"
cpus = [0, 1]
[[module.partition]]
name = "a"
command = ["x"]
cpus = [0]
[[module.partition]]
name = "b"
command = ["x"]
cpus = [1]
io = true
[[module.plan]]
cpu = 1
major_frame = "2ms"
[[module.plan.window]]
partition = "b"
start = "1ms"
duration = "1ms"
[[module.plan]]
cpu = 0
major_frame = "1ms"
[[module.plan.window]]
partition = "a"
start = "0us"
duration = "250us"
"#;
    let s = parse(text, "mc.toml", &host()).unwrap();
    let m = &s.modules[0];
    let by_cpu = m.windows_by_cpu();
    assert_eq!(by_cpu.iter().map(|(c, _)| *c).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(m.plan_for_cpu(1).unwrap().worst_case_wait("b"), Some(Duration::from_millis(1)));
    assert_eq!(m.plan_for_cpu(0).unwrap().idle(), Duration::from_micros(750));
    // a window for a partition on a CPU it may not use
    let e = errors(&text.replacen("partition = \"b\"", "partition = \"a\"", 1));
    assert!(e.iter().any(|d| matches!(d.problem, Problem::WindowOnForeignCpu { cpu: 1, .. })), "{e:?}");
    // two plans for one CPU
    let e = errors(&text.replacen("cpu = 1\n", "cpu = 0\n", 1));
    assert!(e.iter().any(|d| matches!(d.problem, Problem::DuplicatePlan { cpu: 0 })), "{e:?}");
    // two modules on one CPU
    let two = format!("{text}\n[[module]]\nname = \"m2\"\ncpus = [1]\n[[module.partition]]\nname = \"c\"\ncommand = [\"x\"]\n[[module.plan]]\ncpu = 1\nmajor_frame = \"1ms\"\n[[module.plan.window]]\npartition = \"c\"\nstart = \"0us\"\nduration = \"1ms\"\n");
    let e = errors(&two);
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::CpuTakenByModule { cpu: 1, other } if other == "m")), "{e:?}");
}

#[test]
fn an_io_partitions_router_table_is_validated_and_kept() {
    let router = "io = true\n\n[module.partition.router]\nmax_topics = 4\n\n[[module.partition.router.route]]\nfrom = \"network\"\nto = \"module\"\nallow = [\"camera/*\"]\n";
    let text = GOOD.replacen("io = true\n", router, 1);
    let s = parse(&text, "sys.toml", &host()).unwrap();
    let b = s.modules[0].partition("b").unwrap();
    let cfg = b.router.as_ref().expect("the router table is kept");
    assert_eq!((cfg.max_topics, &cfg.routes[0].allow), (4, &vec!["camera/*".to_string()]));
    let a = s.modules[0].partition("a").unwrap();
    assert!(a.router.is_none() && s.router_config(a).is_none());
    // The whole configuration the supervisor writes into the partition: a side per V-NIC, on its interface,
    // in its domain, with the members of its network as peers; as a file it reads back equal.
    let whole = s.router_config(b).unwrap();
    let sides: Vec<(&str, u32, &str)> = whole.sides.iter().map(|x| (x.name.as_str(), x.domain, x.interface.as_str())).collect();
    let nics: Vec<(u32, &str)> = b.tree.nics.iter().map(|n| (n.domain.get(), n.name.as_str())).collect();
    assert_eq!(sides, [("module", nics[0].0, nics[0].1), ("network", nics[1].0, nics[1].1)]);
    for (side, nic) in whole.sides.iter().zip(&b.tree.nics) {
        let peers: Vec<String> = s.addresses_on(nic.network).iter().map(|a| a.to_string()).collect();
        assert!(side.peers == peers && !side.peers.is_empty() && !side.multicast, "{side:?}");
    }
    assert_eq!((whole.name.as_str(), whole.max_topics, whole.routes.len()), ("b", 4, 1));
    let back = partita_router_config::RouterConfig::parse(&whole.to_file("test"), std::path::Path::new("router.toml")).unwrap();
    assert_eq!(back, whole);

    // Routes alone, without a [module.partition.router] header (an implicit table in TOML's words), are the
    // same table.
    let routes_only = GOOD.replacen("io = true\n", "io = true\n\n[[module.partition.router.route]]\nfrom = \"network\"\nto = \"module\"\nallow = [\"camera/*\"]\n", 1);
    let s = parse(&routes_only, "sys.toml", &host()).unwrap_or_else(|e| panic!("{e}"));
    let kept = s.modules[0].partition("b").unwrap().router.as_ref().expect("the router table is kept");
    assert_eq!(kept.routes[0].allow, vec!["camera/*".to_string()]);
    let e = errors(&routes_only.replacen("to = \"module\"", "to = \"elsewhere\"", 1));
    assert_eq!((e.len(), e[0].path.as_str()), (1, "module[m].partition[b].router.route[0].to"), "{e:?}");
    assert_eq!(e[0].line, line_of(&routes_only, "[[module.partition.router.route]]"));

    // A route to a side that is not there.
    let e = errors(&text.replacen("to = \"module\"", "to = \"elsewhere\"", 1));
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].path, "module[m].partition[b].router.route[0].to");
    assert!(matches!(&e[0].problem, Problem::Router { problem, .. } if problem.contains("elsewhere")), "{e:?}");

    // A router table on a partition that is not the I/O partition.
    let text = GOOD.replacen("command = [\"prog\"]\n", "command = [\"prog\"]\n\n[module.partition.router]\nmax_topics = 4\n", 1);
    let e = errors(&text);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].problem, Problem::RouterNotIo);
    assert_eq!(e[0].path, "module[m].partition[a].router");
    assert_eq!(e[0].line, line_of(&text, "[module.partition.router]"));
}

#[test]
fn a_wrong_type_names_the_key_not_the_value() {
    let e = broken("major_frame = \"1ms\"", "major_frame = 1500");
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].path, "module.plan.major_frame", "{e:?}");
    let e = broken("cpus = [0]", "cpus = 0");
    assert_eq!(e[0].path, "module.cpus", "{e:?}");
}

#[test]
fn a_partition_or_node_is_granted_its_scheduling_class_below_the_executor() {
    let s = parse(&GOOD.replacen("command = [\"prog\"]", "command = [\"prog\"]\nscheduling = { policy = \"fifo\", priority = 50 }", 1), "sys.toml", &host()).unwrap();
    assert_eq!(s.modules[0].partitions[0].tree.scheduling, Scheduling::Fifo { priority: 50 });
    assert_eq!(s.modules[0].partitions[1].tree.scheduling, Scheduling::Normal);
    let s = parse(&GOOD.replacen("command = [\"mon\"]", "command = [\"mon\"]\nscheduling = { policy = \"fifo\", priority = 89 }", 1), "sys.toml", &host()).unwrap();
    assert_eq!(s.nodes[0].tree.scheduling, Scheduling::Fifo { priority: 89 });
    for bad in ["{ policy = \"fifo\", priority = 90 }", "{ policy = \"fifo\", priority = 0 }", "{ policy = \"fifo\" }"] {
        let e = broken("command = [\"prog\"]", &format!("command = [\"prog\"]\nscheduling = {bad}"));
        assert!(e.iter().any(|d| matches!(d.problem, Problem::FifoPriority { max: 89, .. }) && d.path == "module[m].partition[a].scheduling.priority"), "{bad}: {e:?}");
    }
    let e = broken("command = [\"prog\"]", "command = [\"prog\"]\nscheduling = { policy = \"rr\" }");
    assert!(e.iter().any(|d| d.path == "module[m].partition[a].scheduling.policy"), "{e:?}");
}

#[test]
fn the_wake_up_latency_bound_is_held_for_planned_systems_unless_turned_off() {
    let s = parse(GOOD, "sys.toml", &host()).unwrap();
    assert_eq!(s.cpu_dma_latency, Some(Duration::ZERO), "a system with a plan holds 0 µs by default");
    let s = parse(&GOOD.replacen("name = \"t\"", "name = \"t\"\ncpu_dma_latency = \"off\"", 1), "sys.toml", &host()).unwrap();
    assert_eq!(s.cpu_dma_latency, None);
    let s = parse(&GOOD.replacen("name = \"t\"", "name = \"t\"\ncpu_dma_latency = \"20us\"", 1), "sys.toml", &host()).unwrap();
    assert_eq!(s.cpu_dma_latency, Some(Duration::from_micros(20)));
    let e = broken("name = \"t\"", "name = \"t\"\ncpu_dma_latency = \"2s\"");
    assert!(e.iter().any(|d| d.path == "system.cpu_dma_latency"), "{e:?}");
    let native = format!("{}{}", &GOOD[..GOOD.find("[[module.plan]]").unwrap()], &GOOD[GOOD.find("[[node]]").unwrap()..]);
    assert_eq!(parse(&native, "sys.toml", &host()).unwrap().cpu_dma_latency, None, "without a plan the idle states are left alone");
}

#[test]
fn every_partition_is_confined_with_its_own_host_user_and_state_directory() {
    let s = parse(GOOD, "sys.toml", &host()).unwrap();
    let c: Vec<&Confinement> = s.partitions().map(|(_, p)| p.tree.confinement.as_ref().expect("a partition is confined")).collect();
    assert_eq!(c[0].uid, confinement::DEFAULT_UID_BASE);
    assert_eq!(c[1].uid, confinement::DEFAULT_UID_BASE + confinement::UID_RANGE, "each partition its own range");
    assert_eq!(c[0].state_dir, std::path::Path::new("/var/lib/partita/t/a"));
    assert!(c[0].capabilities.is_empty() && c[0].seccomp_allow.is_empty(), "nothing is granted by default");
    assert!(s.nodes[0].tree.confinement.is_none(), "a native node stands for another machine");
}

#[test]
fn a_system_file_grants_a_uid_capabilities_and_system_calls_and_nothing_unknown() {
    let text = GOOD.replacen(
        "command = [\"prog\"]",
        "command = [\"prog\"]\nuid = 5000000\ncapabilities = [\"CAP_NET_BIND_SERVICE\", \"chown\"]\nseccomp = { allow = [\"ptrace\", \"clone/namespaces\"] }",
        1,
    );
    let s = parse(&text, "sys.toml", &host()).unwrap();
    let c = s.modules[0].partitions[0].tree.confinement.clone().unwrap();
    assert_eq!((c.uid, c.capabilities.clone(), c.seccomp_allow.clone()), (5_000_000, vec![10, 0], vec!["ptrace".to_string(), "clone/namespaces".to_string()]));
    let e = broken("command = [\"prog\"]", "command = [\"prog\"]\ncapabilities = [\"CAP_FLY\"]");
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::UnknownCapability { name } if name == "CAP_FLY") && d.path == "module[m].partition[a].capabilities"), "{e:?}");
    let e = broken("command = [\"prog\"]", "command = [\"prog\"]\nseccomp = { allow = [\"read\"] }");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::UnknownSyscall { .. }) && d.path == "module[m].partition[a].seccomp.allow"), "{e:?}");
    for bad in ["0", "4294967295"] {
        let e = broken("command = [\"prog\"]", &format!("command = [\"prog\"]\nuid = {bad}"));
        assert!(e.iter().any(|d| matches!(d.problem, Problem::BadUid { .. })), "{bad}: {e:?}");
    }
    // an explicit range overlapping another partition's (explicit, or the default one) is refused
    let both = GOOD.replacen("command = [\"prog\"]", "command = [\"prog\"]\nuid = 7000000", 1).replacen("command = [\"prog\", \"-x\"]", "command = [\"prog\", \"-x\"]\nuid = 7000100", 1);
    let e = errors(&both);
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::UidOverlap { other, .. } if other == "a")), "{e:?}");
    let on_default = GOOD.replacen("command = [\"prog\", \"-x\"]", &format!("command = [\"prog\", \"-x\"]\nuid = {}", confinement::DEFAULT_UID_BASE), 1);
    let s = parse(&on_default, "sys.toml", &host()).unwrap();
    let (a, b) = (s.modules[0].partitions[0].tree.confinement.clone().unwrap(), s.modules[0].partitions[1].tree.confinement.clone().unwrap());
    assert_eq!(b.uid, confinement::DEFAULT_UID_BASE, "the explicit uid is kept");
    assert_ne!(a.uid, b.uid, "the default moves out of an explicit range");
}

#[test]
fn a_restart_policy_cannot_make_a_crash_loop() {
    let h = |t: &str| broken("command = [\"prog\"]", &format!("command = [\"prog\"]\nhealth = {t}"));
    let e = h("{ action = \"restart\", window = \"0s\" }");
    assert!(e.iter().any(|d| d.path == "module[m].partition[a].health.window"), "{e:?}");
    let e = h("{ action = \"restart\", max_restarts = 0 }");
    assert!(e.iter().any(|d| d.path == "module[m].partition[a].health.max_restarts"), "{e:?}");
    let e = h("{ action = \"restart\", backoff = \"1ms\" }");
    assert!(e.iter().any(|d| d.path == "module[m].partition[a].health.backoff"), "{e:?}");
    let e = h("{ action = \"stop\", backoff = \"1s\" }");
    assert!(e.iter().any(|d| matches!(d.problem, Problem::HealthKeyWithoutRestart { key: "backoff" })), "{e:?}");
    let s = parse(&GOOD.replacen("command = [\"prog\"]", "command = [\"prog\"]\nhealth = { action = \"restart\", backoff = \"250ms\" }", 1), "sys.toml", &host()).unwrap();
    assert!(matches!(s.modules[0].partitions[0].tree.health, HealthAction::Restart { backoff, .. } if backoff == Duration::from_millis(250)));
}

#[test]
fn a_router_that_is_not_a_table_and_a_plan_of_too_many_windows_are_refused_plainly() {
    let e = broken("io = true", "io = true\nrouter = 5");
    assert!(e.iter().any(|d| d.path == "module[m].partition[b].router" && d.problem.to_string().contains("not integer")), "{e:?}");
    let windows: String = (0..1001).map(|i| format!("[[module.plan.window]]\npartition = \"a\"\nstart = \"{i}ns\"\nduration = \"1ns\"\n")).collect();
    let text = GOOD.replacen("[[module.plan.window]]\npartition = \"a\"", &format!("{windows}[[module.plan.window]]\npartition = \"a\""), 1);
    let e = errors(&text);
    assert!(e.iter().any(|d| d.path == "module[m].plan[0].window" && d.problem.to_string().contains("at most 1000")), "{:?}", &e[..e.len().min(3)]);
}

#[test]
fn a_partition_may_be_a_virtual_machine() {
    let text = GOOD
        .replacen("command = [\"prog\"]", "command = [\"no-such-program-here\"]\nkind = \"vm\"\nvm = { memory = \"192MiB\", accel = \"tcg\", append = [\"quiet\"] }", 1)
        .replacen("command = [\"prog\", \"-x\"]", "command = [\"/bin/sh\"]", 1)
        .replacen("command = [\"mon\"]", "command = [\"/bin/sh\"]", 1);
    let machine = Host { cpus: vec![0, 1], path: Some(vec![]) };
    let s = parse(&text, "sys.toml", &machine).expect("a guest's command is not looked up on the host");
    let a = &s.modules[0].partitions[0];
    let vm = a.vm.clone().expect("a VM partition");
    assert_eq!((vm.memory, vm.vcpus, vm.accel, vm.append.clone()), (ByteSize(192 << 20), 1, Accel::Tcg, vec!["quiet".to_string()]));
    assert_eq!(a.tree.memory, Some(ByteSize((192 + 256) << 20)), "its cgroup holds the guest and QEMU");
    assert_eq!(a.tree.nics[0].name, "vnic0", "a guest names its NICs as a process partition does");
    assert!(a.tree.confinement.is_some(), "QEMU runs confined like any partition");
    assert!(s.modules[0].partitions[1].vm.is_none());
    for (bad, path) in [
        ("kind = \"container\"", "module[m].partition[a].kind"),
        ("vm = { vcpus = 2 }", "module[m].partition[a].vm"),
        ("kind = \"vm\"\nvm = { vcpus = 0 }", "module[m].partition[a].vm.vcpus"),
        ("kind = \"vm\"\nvm = { accel = \"xen\" }", "module[m].partition[a].vm.accel"),
        ("kind = \"vm\"\nvm = { boot_timeout = \"1ms\" }", "module[m].partition[a].vm.boot_timeout"),
        ("kind = \"vm\"\nscheduling = { policy = \"fifo\", priority = 10 }", "module[m].partition[a].scheduling"),
        ("kind = \"vm\"\nvm = { append = [\"partita.ip=1\"] }", "module[m].partition[a].vm.append"),
        ("kind = \"vm\"\nvm = { memory = \"512MiB\" }\nmemory = \"520MiB\"", "module[m].partition[a].memory"),
        ("kind = \"vm\"\nvm = { memory = \"96MiB\" }", "module[m].partition[a].vm.memory"),
    ] {
        let e = broken("command = [\"prog\"]", &format!("command = [\"prog\"]\n{bad}"));
        assert!(e.iter().any(|d| d.path == path), "{bad}: {e:?}");
    }
    // The archive a guest adds is looked at where files are (a host with a PATH): a cpio archive or gzip only.
    let dir = std::env::temp_dir().join(format!("partita-initramfs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cpio, gzip, text) = (dir.join("a.cpio"), dir.join("a.cpio.gz"), dir.join("a.txt"));
    std::fs::write(&cpio, b"070701000000").unwrap();
    std::fs::write(&gzip, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0]).unwrap();
    std::fs::write(&text, b"not an archive").unwrap();
    for program in ["prog", "mon"] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(dir.join(program), b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(dir.join(program), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let host = Host { cpus: vec![0, 1], path: Some(vec![dir.clone()]) };
    let with = |file: &std::path::Path| GOOD.replacen("command = [\"prog\"]", &format!("command = [\"sh\"]\nkind = \"vm\"\nvm = {{ initramfs = \"{}\" }}", file.display()), 1);
    for good in [&cpio, &gzip] {
        let s = parse(&with(good), "sys.toml", &host).unwrap_or_else(|e| panic!("{}: {e:?}", good.display()));
        assert_eq!(s.modules[0].partitions[0].vm.as_ref().and_then(|v| v.initramfs.clone()).as_deref(), Some(good.as_path()));
    }
    for bad in [text.clone(), dir.join("missing.cpio"), PathBuf::from("relative.cpio")] {
        let e = parse(&with(&bad), "sys.toml", &host).err().unwrap_or_else(|| panic!("{} was accepted", bad.display())).0;
        assert!(e.iter().any(|d| d.path == "module[m].partition[a].vm.initramfs"), "{}: {e:?}", bad.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn request_paths_name_partitions_of_their_module() {
    let with = |path: &str| GOOD.replacen("[[node]]", &format!("{path}\n[[node]]"), 1);
    let s = parse(&with("[[module.path]]\nname = \"req\"\nthrough = [\"b\", \"a\", \"b\"]"), "sys.toml", &host()).unwrap();
    assert_eq!(s.modules[0].paths, vec![RequestPath { name: "req".into(), through: vec!["b".into(), "a".into(), "b".into()] }]);
    let e = errors(&with("[[module.path]]\nname = \"req\"\nthrough = [\"b\", \"zz\"]"));
    assert!(e.iter().any(|d| matches!(&d.problem, Problem::UnknownPartition { name, .. } if name == "zz") && d.path == "module[m].path[0].through[1]"), "{e:?}");
    let e = errors(&with("[[module.path]]\nname = \"req\"\nthrough = []"));
    assert!(e.iter().any(|d| d.path == "module[m].path[0].through" && d.to_string().contains("1 to 64 partitions")), "{e:?}");
    let two = "[[module.path]]\nname = \"req\"\nthrough = [\"a\"]\n[[module.path]]\nname = \"req\"\nthrough = [\"b\"]";
    let e = errors(&with(two));
    assert!(e.iter().any(|d| d.path == "module[m].path[1].name" && d.to_string().contains("a second path named")), "{e:?}");
    let e = errors(&with("[[module.path]]\nname = \"req\"\nvia = [\"a\"]"));
    assert!(!e.is_empty(), "an unknown key is refused");
}

#[test]
fn freeze_ahead_is_read_and_shortens_the_window_another_partition_follows() {
    let s = parse(&GOOD.replacen("major_frame = \"1ms\"", "major_frame = \"1ms\"\nfreeze_ahead = \"100us\"", 1), "sys.toml", &host()).unwrap();
    let p = &s.modules[0].plans[0];
    assert_eq!(p.freeze_ahead, Duration::from_micros(100));
    // a is followed by idle time, b (at the frame's end) by a.
    assert_eq!((p.usable(0), p.usable(1)), (Duration::from_micros(400), Duration::from_micros(400)));
}

#[test]
fn freeze_ahead_over_a_fifth_of_a_window_or_not_a_length_is_refused() {
    let e = broken("major_frame = \"1ms\"", "major_frame = \"1ms\"\nfreeze_ahead = \"101us\"");
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].path, "module[m].plan[0].freeze_ahead");
    assert!(matches!(&e[0].problem, Problem::FreezeAheadTooLong { window: 1, partition, .. } if partition == "b"), "{e:?}");
    assert!(e[0].to_string().contains("shorter freeze_ahead"), "{}", e[0]);
    let e = broken("major_frame = \"1ms\"", "major_frame = \"1ms\"\nfreeze_ahead = \"soon\"");
    assert_eq!(e[0].path, "module[m].plan[0].freeze_ahead");
    assert!(matches!(e[0].problem, Problem::BadValue(_)), "{e:?}");
}

#[test]
fn wake_ahead_is_read_where_a_window_follows_quiet_time_and_refused_elsewhere() {
    // GOOD's window b follows 100 µs of idle time.
    let s = parse(&GOOD.replacen("major_frame = \"1ms\"", "major_frame = \"1ms\"\nwake_ahead = \"30us\"", 1), "sys.toml", &host()).unwrap();
    assert_eq!(s.modules[0].plans[0].wake_ahead, Duration::from_micros(30));
    // Back to back, frozen at the boundary: no start follows quiet time.
    let back_to_back = ("start = \"500us\"", "start = \"400us\"");
    let text = GOOD.replacen("duration = \"500us\"", "duration = \"600us\"", 1).replacen(back_to_back.0, back_to_back.1, 1);
    let e = errors(&text.replacen("major_frame = \"1ms\"", "major_frame = \"1ms\"\nwake_ahead = \"30us\"", 1));
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].path, "module[m].plan[0].wake_ahead");
    assert!(matches!(&e[0].problem, Problem::WakeAheadUnused { .. }), "{e:?}");
    assert!(e[0].to_string().contains("set freeze_ahead"), "{}", e[0]);
    // ... which a freeze lead gives, if it is longer than the wake lead.
    let led = text.replacen("major_frame = \"1ms\"", "major_frame = \"1ms\"\nfreeze_ahead = \"60us\"\nwake_ahead = \"20us\"", 1);
    assert_eq!(parse(&led, "sys.toml", &host()).unwrap().modules[0].plans[0].wake_ahead, Duration::from_micros(20));
    let e = errors(&text.replacen("major_frame = \"1ms\"", "major_frame = \"1ms\"\nfreeze_ahead = \"60us\"\nwake_ahead = \"60us\"", 1));
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].path, "module[m].plan[0].wake_ahead");
    assert!(matches!(&e[0].problem, Problem::WakeAheadNotShorter { .. }), "{e:?}");
    let e = broken("major_frame = \"1ms\"", "major_frame = \"2ms\"\nwake_ahead = \"1001us\"");
    assert_eq!(e[0].path, "module[m].plan[0].wake_ahead");
    assert!(e[0].to_string().contains("longer than 1ms"), "{}", e[0]);
    let e = broken("major_frame = \"1ms\"", "major_frame = \"1ms\"\nwake_ahead = \"early\"");
    assert_eq!(e[0].path, "module[m].plan[0].wake_ahead");
    assert!(matches!(e[0].problem, Problem::BadValue(_)), "{e:?}");
}

#[test]
fn time_protection_has_defaults_the_supervisor_can_use() {
    let s = parse(GOOD, "sys.toml", &host()).unwrap();
    assert_eq!(s.host.preemption, Preemption::Full);
    assert_eq!(s.host.housekeeping_cpus, vec![1], "the online CPUs without a plan");
    let a = &s.modules[0].partitions[0];
    assert_eq!((a.time_overrun.tolerance, a.time_overrun.count, a.time_overrun.frames), (Duration::from_micros(500), 2, 10));
    assert_eq!(a.time_overrun.action, OverrunAction::Restart, "follows the default health action");
    assert!(s.modules[0].plans[0].demote);
    assert_eq!(a.tree.disk.write_bps, Some(32 << 20));
    assert!(s.nodes[0].tree.disk.is_unlimited(), "a native node stands for another machine");
    let s = parse(&GOOD.replacen("name = \"t\"", "name = \"t\"\npreemption = \"keep\"\nhousekeeping_cpus = []", 1), "sys.toml", &host()).unwrap();
    assert_eq!((s.host.preemption, s.host.housekeeping_cpus.is_empty()), (Preemption::Keep, true));
    let s = parse(&GOOD.replacen("command = [\"prog\"]", "command = [\"prog\"]\ntime_overrun = { tolerance = \"50us\", count = 1, frames = 1, action = \"idle\" }\ndisk = \"unlimited\"", 1), "sys.toml", &host()).unwrap();
    let a = &s.modules[0].partitions[0];
    assert_eq!((a.time_overrun.tolerance, a.time_overrun.action), (Duration::from_micros(50), OverrunAction::Idle));
    assert!(a.tree.disk.is_unlimited());
}

#[test]
fn bad_time_protection_keys_name_the_field_and_the_fix() {
    let cases: [(&str, &str, &str, &str); 9] = [
        ("name = \"t\"", "name = \"t\"\npreemption = \"rt\"", "system.preemption", "\"keep\""),
        ("name = \"t\"", "name = \"t\"\nhousekeeping_cpus = [0]", "system.housekeeping_cpus", "CPU 0 runs a plan"),
        ("name = \"t\"", "name = \"t\"\nhousekeeping_cpus = [7]", "system.housekeeping_cpus", "not online"),
        ("command = [\"prog\"]", "command = [\"prog\"]\ntime_overrun = { count = 0 }", "module[m].partition[a].time_overrun.count", "1..=16"),
        ("command = [\"prog\"]", "command = [\"prog\"]\ntime_overrun = { count = 3, frames = 2 }", "module[m].partition[a].time_overrun.frames", "frames >= count"),
        ("command = [\"prog\"]", "command = [\"prog\"]\ntime_overrun = { action = \"reboot\" }", "module[m].partition[a].time_overrun.action", "\"idle\""),
        ("command = [\"prog\"]", "command = [\"prog\"]\ntime_overrun = { tolerance = \"2s\" }", "module[m].partition[a].time_overrun.tolerance", "at most"),
        ("command = [\"prog\"]", "command = [\"prog\"]\ndisk = { write_bps = \"fast\" }", "module[m].partition[a].disk.write_bps", "\"32MiB\""),
        ("command = [\"prog\"]", "command = [\"prog\"]\ndisk = { writes = 3 }", "module[m].partition[a].disk.writes", "unknown key"),
    ];
    for (from, to, path, fix) in cases {
        let e = broken(from, to);
        assert!(e.iter().any(|d| d.path == path && d.to_string().contains(fix)), "{to}: {e:?}");
    }
    // A partition of a module without a plan has no window to run past.
    let native = GOOD.split("[[module.plan]]").next().unwrap().to_string() + "\n[[node]]\nname = \"n\"\ncommand = [\"mon\"]\n";
    let e = errors(&native.replacen("command = [\"prog\"]", "command = [\"prog\"]\ntime_overrun = { action = \"stop\" }", 1));
    assert!(e.iter().any(|d| d.path == "module[m].partition[a].time_overrun" && d.to_string().contains("no window")), "{e:?}");
}

#[test]
fn a_partitions_binds_state_limits_and_log_have_defaults_and_take_the_files_values() {
    let s = parse(GOOD, "sys.toml", &host()).unwrap();
    let a = &s.modules[0].partitions[0];
    let c = a.tree.confinement.clone().unwrap();
    assert_eq!((c.state_quota.bytes, c.state_quota.inodes), (64 << 20, 4096));
    assert_eq!((c.limits.message_queue_bytes, c.limits.queued_signals), (819_200, 1024));
    assert_eq!((a.tree.log_size, s.nodes[0].tree.log_size), (16 << 20, 16 << 20));
    let text = GOOD.replacen(
        "command = [\"prog\"]",
        "command = [\"prog\"]\nstate = { size = \"8MiB\", inodes = 100 }\nlimits = { message_queue_bytes = \"64KiB\", queued_signals = 16 }\nlog_size = \"1MiB\"",
        1,
    );
    let s = parse(&text, "sys.toml", &host()).unwrap();
    let a = &s.modules[0].partitions[0];
    let c = a.tree.confinement.clone().unwrap();
    assert_eq!((c.state_quota.bytes, c.state_quota.inodes), (8 << 20, 100));
    assert_eq!((c.limits.message_queue_bytes, c.limits.queued_signals), (64 << 10, 16));
    assert_eq!(a.tree.log_size, 1 << 20);
    let s = parse(&GOOD.replacen("command = [\"prog\"]", "command = [\"prog\"]\nbinds = [\"/etc/passwd\", \"sh\"]", 1), "sys.toml", &host()).unwrap();
    assert_eq!(s.modules[0].partitions[0].tree.confinement.clone().unwrap().binds, vec!["/etc/passwd".to_string(), "sh".to_string()]);
}

#[test]
fn bad_binds_state_limits_and_log_sizes_name_the_field_and_the_fix() {
    let cases: [(&str, &str, &str); 9] = [
        ("binds = [\"/no/such/path\"]", "module[m].partition[a].binds", "neither a path this machine has nor a program in its PATH"),
        ("binds = [\"no-such-program-here\"]", "module[m].partition[a].binds", "an installed program"),
        ("state = { size = \"1MiB\" }", "module[m].partition[a].state.size", "at least 4MiB"),
        ("state = { size = \"big\" }", "module[m].partition[a].state.size", "`64MiB`"),
        ("state = { inodes = 3 }", "module[m].partition[a].state.inodes", "at least 64"),
        ("state = { files = 3 }", "module[m].partition[a].state.files", "unknown key"),
        ("limits = { queued_signals = 0 }", "module[m].partition[a].limits.queued_signals", "positive"),
        ("limits = \"none\"", "module[m].partition[a].limits", "not a table"),
        ("log_size = \"1KiB\"", "module[m].partition[a].log_size", "at least 64KiB"),
    ];
    for (key, path, fix) in cases {
        let e = broken("command = [\"prog\"]", &format!("command = [\"prog\"]\n{key}"));
        assert!(e.iter().any(|d| d.path == path && d.to_string().contains(fix)), "{key}: {e:?}");
    }
}
