//! `[[module.channel]]`: ARINC 653 channels between partitions of a module, and every rule `check` keeps.
use partita_system::spec::*;
use partita_system::*;

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
command = ["prog"]

[[module.partition]]
name = "c"
command = ["prog"]
io = true

[[module.channel]]
name = "position"
kind = "sampling"
source = "a"
destinations = ["b", "c:pos_in"]
max_message = "64B"
refresh = "100ms"

[[module.channel]]
name = "commands"
kind = "queuing"
source = "c:cmd_out"
destinations = ["a"]
max_message = "1KiB"
depth = 8
"#;

fn errors(text: &str) -> Vec<Diagnostic> {
    match parse(text, "sys.toml", &Host::with_cpus(2)) {
        Ok(_) => panic!("expected errors in:\n{text}"),
        Err(e) => e.0,
    }
}

/// The one error of `GOOD` with `from` replaced by `to`: its field path, and its message contains `says`.
fn refused(from: &str, to: &str, path: &str, says: &str) {
    assert!(GOOD.contains(from), "{from}");
    let e = errors(&GOOD.replacen(from, to, 1));
    assert!(e.iter().any(|d| d.path == path && d.to_string().contains(says)), "{from} → {to}: wanted {path} saying {says:?}, got {e:#?}");
}

#[test]
fn channels_are_read_with_their_ends_and_geometry() {
    let s = parse(GOOD, "sys.toml", &Host::with_cpus(2)).unwrap();
    let m = &s.modules[0];
    assert_eq!(m.channels.len(), 2);
    let pos = &m.channels[0];
    assert_eq!((pos.kind, pos.max_message), (ChannelKind::Sampling { refresh: Duration::from_millis(100) }, 64));
    assert_eq!(pos.source, PortRef { partition: "a".into(), port: "position".into() });
    assert_eq!(pos.destinations[1], PortRef { partition: "c".into(), port: "pos_in".into() });
    assert_eq!(m.channels[1].kind, ChannelKind::Queuing { depth: 8 });
    let a: Vec<_> = m.ports_of("a").map(|(c, p, src)| (c.name.as_str(), p.port.as_str(), src)).collect();
    assert_eq!(a, [("position", "position", true), ("commands", "commands", false)]);
    assert_eq!(m.ports_of("c").count(), 2);
}

#[test]
fn a_channel_built_in_code_is_the_same_as_in_a_file() {
    let us = Duration::from_micros;
    let spec = SystemSpec::new("t").module(
        ModuleSpec::new("m")
            .cpus([0])
            .partition(PartitionSpec::new("a", ["prog"]))
            .partition(PartitionSpec::new("b", ["prog"]))
            .channel(ChannelSpec::sampling("position", "a", ["b"], ByteSize(64), us(100_000)))
            .channel(ChannelSpec::queuing("commands", "b", "a", ByteSize(1024), 8))
            .plan(PlanSpec::new(0, us(1000)).window("a", us(0), us(500)).window("b", us(500), us(500))),
    );
    let built = spec.build(&Host::with_cpus(2), "<spec>").unwrap();
    assert_eq!(built.modules[0].channels.len(), 2);
    assert_eq!(SystemSpec::from_toml(&spec.to_toml()).unwrap(), spec);
}

#[test]
fn every_rule_of_a_channel_is_kept_with_the_field_and_the_fix() {
    let c0 = "module[m].channel[0]";
    let c1 = "module[m].channel[1]";
    refused("kind = \"sampling\"", "kind = \"fifo\"", &format!("{c0}.kind"), "use \"sampling\" or \"queuing\"");
    refused("refresh = \"100ms\"", "depth = 4", &format!("{c0}.depth"), "no depth");
    refused("refresh = \"100ms\"", "refresh = \"0ms\"", &format!("{c0}.refresh"), "out of range");
    refused("depth = 8", "depth = 0", &format!("{c1}.depth"), "1 to 4096");
    refused("depth = 8", "depth = 8\nrefresh = \"1ms\"", &format!("{c1}.refresh"), "do not age");
    refused("max_message = \"64B\"", "max_message = \"8MiB\"", &format!("{c0}.max_message"), "out of range");
    refused("max_message = \"1KiB\"\ndepth = 8", "max_message = \"1MiB\"\ndepth = 4096", &format!("{c1}.max_message"), "make the queue shorter");
    refused("source = \"a\"", "source = \"z\"", &format!("{c0}.source"), "z");
    refused("destinations = [\"a\"]", "destinations = [\"a\", \"b\"]", &format!("{c1}.destinations"), "exactly one destination");
    refused("destinations = [\"b\", \"c:pos_in\"]", "destinations = [\"a\"]", &format!("{c0}.destinations"), "both the source and a destination");
    refused("destinations = [\"b\", \"c:pos_in\"]", "destinations = []", &format!("{c0}.destinations"), "destinations");
    refused("source = \"c:cmd_out\"", "source = \"b:position\"", &format!("{c1}.source"), "already an end of channel \"position\"");
    refused("source = \"c:cmd_out\"", "source = \"c:bad port\"", &format!("{c1}.source"), "not allowed");
    refused("name = \"commands\"", "name = \"position\"", &format!("{c1}.name"), "a second channel");
    refused("depth = 8", "depth = 8\non_fault = \"reboot\"", &format!("{c1}.on_fault"), "use \"ignore\"");
}

#[test]
fn a_vm_partition_cannot_be_an_end_of_a_channel() {
    let text = GOOD.replacen("name = \"b\"\ncommand = [\"prog\"]", "name = \"b\"\ncommand = [\"prog\"]\nkind = \"vm\"", 1);
    let e = errors(&text);
    assert!(e.iter().any(|d| d.path == "module[m].channel[0].destinations[0]" && d.to_string().contains("VM partition")), "{e:#?}");
}

const NETWORKLESS: &str = r#"
[system]
name = "t"

[[module]]
name = "m"
cpus = [0]

[[module.partition]]
name = "recorder"
command = ["prog"]
network = false

[[module.partition]]
name = "routing"
command = ["prog"]
io = true
[module.partition.router]
[[module.partition.router.port]]
topic = "surveillance/request"
type = "partita::surveillance::FrameRequest"
keyed = true
to_port = "requests"
[[module.partition.router.port]]
topic = "surveillance/reply"
type = "partita::surveillance::FrameReply"
keyed = true
from_port = "replies"

[[module.channel]]
name = "requests"
kind = "queuing"
source = "routing"
destinations = ["recorder"]
max_message = "256B"
depth = 8

[[module.channel]]
name = "replies"
kind = "queuing"
source = "recorder"
destinations = ["routing"]
max_message = "64KiB"
depth = 8
"#;

#[test]
fn a_partition_without_a_network_has_no_v_nic_and_the_router_reaches_it_through_its_ports() {
    let s = parse(NETWORKLESS, "sys.toml", &Host::with_cpus(2)).unwrap();
    let m = &s.modules[0];
    let recorder = m.partition("recorder").unwrap();
    assert!(!recorder.network && recorder.tree.nics.is_empty());
    assert!(!s.addresses_on(NetworkId::Module(0)).contains(&recorder.address));
    let routing = m.partition("routing").unwrap();
    assert_eq!(routing.tree.nics.len(), 2);
    let r = s.router_config(routing).unwrap();
    assert_eq!((r.ports[0].to_port.as_deref(), r.ports[1].from_port.as_deref()), (Some("requests"), Some("replies")));
}

#[test]
fn port_routes_and_partitions_without_a_network_are_checked_with_the_field_and_the_fix() {
    let bad = |from: &str, to: &str, path: &str, says: &str| {
        let e = errors(&NETWORKLESS.replacen(from, to, 1));
        assert!(e.iter().any(|d| d.path == path && d.to_string().contains(says)), "{from} → {to}: wanted {path} saying {says:?}, got {e:#?}");
    };
    bad("to_port = \"requests\"", "to_port = \"nothing\"", "module[m].partition[routing].router.port[0].to_port", "no source port \"nothing\"");
    bad("from_port = \"replies\"", "from_port = \"requests\"", "module[m].partition[routing].router.port[1].from_port", "no destination port \"requests\"");
    bad("from_port = \"replies\"", "to_port = \"requests\"\nfrom_port = \"replies\"", "module[m].partition[routing].router.port[1].to_port", "either to_port or from_port");
    bad("network = false", "network = false\naddress = \"198.18.1.9\"", "module[m].partition[recorder].network", "remove `address`");
    bad("io = true", "io = true\nnetwork = false", "module[m].partition[routing].network", "give `network = false` to another partition");
    let sampling = NETWORKLESS.replacen("kind = \"queuing\"\nsource = \"routing\"", "kind = \"sampling\"\nsource = \"routing\"", 1).replacen("max_message = \"256B\"\ndepth = 8", "max_message = \"256B\"\nrefresh = \"1s\"", 1);
    let e = errors(&sampling);
    assert!(e.iter().any(|d| d.path == "module[m].partition[routing].router.port[0].to_port" && d.to_string().contains("through queuing channels")), "{e:#?}");
}
