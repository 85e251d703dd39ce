//! Hosts, uplinks and external peers (docs/deployment.md): the two-hosts example validates, each host's part
//! holds its own modules and nodes under its own names, and every rule refuses a broken file with the field and
//! the fix; the machine checks refuse a missing interface, partita's own, a bridge's port and the host's own
//! connection unless the file names that risk.
use partita_system::uplink::{check_on_machine, for_this_machine, HostInterface};
use partita_system::*;
use std::net::Ipv4Addr;

const TWO_HOSTS: &str = include_str!("../../../examples/video-surveillance-two-hosts.toml");

fn parse_ok(text: &str) -> System {
    parse(text, "t.toml", &Host::with_cpus(2)).unwrap_or_else(|e| panic!("{e}"))
}

/// The errors of `text`, as `(field path, message)`.
fn refused(text: &str) -> Vec<(String, String)> {
    let e = parse(text, "t.toml", &Host::with_cpus(2)).expect_err("the file must be refused");
    e.0.iter().map(|d| (d.path.clone(), d.problem.to_string())).collect()
}

fn has(errors: &[(String, String)], path: &str, words: &str) -> bool {
    errors.iter().any(|(p, m)| p == path && m.contains(words))
}

#[test]
fn the_two_hosts_example_places_each_member_and_gives_each_uplink_the_others_address() {
    let s = parse_ok(TWO_HOSTS);
    assert_eq!(s.hosts, ["camera-host", "monitor-host"]);
    assert_eq!(s.modules[0].host.as_deref(), Some("camera-host"));
    assert_eq!(s.nodes[0].host.as_deref(), Some("monitor-host"));
    let routing = s.modules[0].partition("routing").unwrap().tree.uplink.clone().unwrap();
    let monitor = s.nodes[0].tree.uplink.clone().unwrap();
    assert_eq!((routing.interface.as_str(), routing.mode, routing.address, routing.prefix), ("eth1", UplinkMode::Move, Ipv4Addr::new(198, 19, 200, 1), 24));
    assert_eq!(routing.peers, [monitor.address]);
    assert_eq!(monitor.peers, [routing.address]);
    // the uplink's domain is one no network of the file uses, the same on both ends
    assert_eq!(routing.domain, monitor.domain);
    assert!(routing.domain != s.network.domain && routing.domain != s.modules[0].network.domain);
    assert!(!routing.multicast && !routing.allow_host_connection_loss);
}

#[test]
fn each_part_holds_its_hosts_members_under_names_of_its_own() {
    let s = parse_ok(TWO_HOSTS);
    let a = s.part("camera-host").unwrap();
    let b = s.part("monitor-host").unwrap();
    assert_eq!((a.modules.len(), a.nodes.len(), b.modules.len(), b.nodes.len()), (1, 0, 0, 1));
    assert_eq!(a.name, "vs-two-hosts.camera-host");
    assert_eq!(a.part.as_deref(), Some("camera-host"));
    // nothing the two parts create on one machine has the same name
    let (oa, ob) = (a.host_objects(), b.host_objects());
    for x in oa.bridges.iter().chain(&oa.veths).chain(&oa.namespaces).chain(&oa.cgroups) {
        assert!(!ob.bridges.contains(x) && !ob.veths.contains(x) && !ob.namespaces.contains(x) && !ob.cgroups.contains(x), "{x} in both parts");
    }
    // the far host's uplink stays a peer of the near one's
    assert_eq!(a.uplinks().next().unwrap().1.peers, [Ipv4Addr::new(198, 19, 200, 2)]);
    assert!(s.part("nowhere").unwrap_err().contains("camera-host, monitor-host"));
    assert!(a.part("camera-host").is_err());
    // without --host, a system spanning hosts is not brought up here
    let e = for_this_machine(s, None).unwrap_err().to_string();
    assert!(e.contains("--host"), "{e}");
    let one = parse_ok(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance.toml")).unwrap());
    assert!(one.part("camera-host").unwrap_err().contains("declares no [[host]]"));
}

#[test]
fn host_placement_is_all_or_nothing_and_names_a_declared_host() {
    let e = refused(&TWO_HOSTS.replacen("host = \"monitor-host\"\n", "", 1));
    assert!(has(&e, "node[monitor].host", "say on which one it runs"), "{e:?}");
    let e = refused(&TWO_HOSTS.replacen("host = \"monitor-host\"\n", "host = \"elsewhere\"\n", 1));
    assert!(has(&e, "node[monitor].host", "no host \"elsewhere\""), "{e:?}");
    let e = refused(&TWO_HOSTS.replacen("[[host]]\nname = \"monitor-host\"", "[[host]]\nname = \"camera-host\"", 1));
    assert!(has(&e, "host.name", "a second host"), "{e:?}");
    // no [[host]] at all: a `host` key names nothing
    let single = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance.toml")).unwrap();
    let e = refused(&single.replacen("cpus = [0]", "cpus = [0]\nhost = \"a\"", 1));
    assert!(has(&e, "module[camera-node].host", "no [[host]] is declared"), "{e:?}");
}

#[test]
fn every_uplink_rule_refuses_with_the_field_and_the_fix() {
    let routing = "module[camera-node].partition[routing].uplink";
    let e = refused(&TWO_HOSTS.replacen("mode = \"move\"", "mode = \"bridge\"", 1));
    assert!(has(&e, &format!("{routing}.mode"), "\"move\""), "{e:?}");
    // an address in one of partita's own networks
    let e = refused(&TWO_HOSTS.replacen("198.19.200.1/24", "198.18.1.9/24", 1));
    assert!(has(&e, &format!("{routing}.address"), "overlaps 198.18.1.0/24"), "{e:?}");
    let e = refused(&TWO_HOSTS.replacen("198.19.200.1/24", "198.19.200.1", 1));
    assert!(has(&e, &format!("{routing}.address"), "with its prefix"), "{e:?}");
    let e = refused(&TWO_HOSTS.replacen("198.19.200.1/24", "198.19.200.255/24", 1));
    assert!(has(&e, &format!("{routing}.address"), "broadcast"), "{e:?}");
    let e = refused(&TWO_HOSTS.replacen("198.19.200.2/24", "198.19.200.1/24", 1));
    assert!(has(&e, "node[monitor].uplink.address", "also"), "{e:?}");
    let e = refused(&TWO_HOSTS.replacen("# gateway = \"198.19.200.254\"", "gateway = \"10.0.0.1\"", 1));
    assert!(has(&e, &format!("{routing}.gateway"), "198.19.200.0/24"), "{e:?}");
    let e = refused(&TWO_HOSTS.replacen("# mtu = 1500", "mtu = 20", 1));
    assert!(has(&e, &format!("{routing}.mtu"), "68 to 65535"), "{e:?}");
    let e = refused(&TWO_HOSTS.replacen("# domain = 2", "domain = 1", 1));
    assert!(has(&e, &format!("{routing}.domain"), "domain of its own"), "{e:?}");
    let e = refused(&TWO_HOSTS.replacen("interface = \"eth1\"", "interface = \"ptb163x\"", 1));
    assert!(has(&e, &format!("{routing}.interface"), "partita makes"), "{e:?}");
    let e = refused(&TWO_HOSTS.replacen("interface = \"eth1\"", "interface = \"lo\"", 1));
    assert!(has(&e, &format!("{routing}.interface"), "loopback"), "{e:?}");
    // only the I/O partition owns an uplink
    let e = refused(&TWO_HOSTS.replacen("io = true\n", "", 1));
    assert!(has(&e, routing, "only a module's I/O partition"), "{e:?}");
    // a lone uplink discovers nothing, unless a peer is named or multicast allowed
    let lone = TWO_HOSTS.replacen("[node.uplink]\ninterface = \"eth1\"\nmode = \"move\"\naddress = \"198.19.200.2/24\"\n", "", 1);
    let e = refused(&lone);
    assert!(has(&e, routing, "nothing could be discovered"), "{e:?}");
    let with_peer = parse_ok(&format!("{lone}\n[[peer]]\nname = \"ground\"\naddress = \"192.0.2.7\"\n"));
    assert_eq!(with_peer.modules[0].partitions[1].tree.uplink.as_ref().unwrap().peers, [Ipv4Addr::new(192, 0, 2, 7)]);
    assert_eq!(with_peer.peers[0].name, "ground");
    assert!(parse(&lone.replacen("# multicast = false", "multicast = true", 1), "t.toml", &Host::with_cpus(2)).is_ok());
    // a peer inside partita's networks is no other machine
    let e = refused(&format!("{TWO_HOSTS}\n[[peer]]\nname = \"x\"\naddress = \"198.18.0.7\"\n"));
    assert!(has(&e, "peer[x].address", "another machine"), "{e:?}");
    // one moved interface, one owner (on one host)
    let same = TWO_HOSTS.replacen("host = \"monitor-host\"", "host = \"camera-host\"", 1);
    let e = refused(&same);
    assert!(has(&e, "node[monitor].uplink.interface", "one owner"), "{e:?}");
    // routes may name the uplink side only where there is an uplink
    let (start, end) = (TWO_HOSTS.find("[module.partition.uplink]").unwrap(), TWO_HOSTS.find("# Only the request").unwrap());
    let no_uplink = format!("{}{}", &TWO_HOSTS[..start], &TWO_HOSTS[end..]);
    let e = refused(&no_uplink);
    assert!(e.iter().any(|(p, m)| p.contains("router") && m.contains("uplink")), "{e:?}");
}

fn iface(name: &str, kind: &str, addresses: &[(&str, u8)], default_route: bool) -> HostInterface {
    HostInterface {
        name: name.into(),
        kind: kind.into(),
        master: None,
        addresses: addresses.iter().map(|(a, p)| (a.parse().unwrap(), *p)).collect(),
        default_route,
    }
}

#[test]
fn the_machine_checks_refuse_what_would_cut_the_host_off_unless_the_file_names_the_risk() {
    let part = parse_ok(TWO_HOSTS).part("camera-host").unwrap();
    let lo = iface("lo", "", &[("127.0.0.1", 8)], false);
    let uplink_path = "module[camera-node].partition[routing].uplink.interface";
    let refuses = |machine: Vec<HostInterface>, words: &str| {
        let e = check_on_machine(&part, &machine).expect_err(words);
        assert!(e.0.iter().any(|d| d.path == uplink_path && d.problem.to_string().contains(words)), "{words}: {e}");
        assert_eq!(e.0[0].file, "t.toml");
    };
    // fine: a spare interface beside the one that carries the host
    let host = iface("eth0", "", &[("192.0.2.2", 24)], true);
    check_on_machine(&part, &[lo.clone(), host.clone(), iface("eth1", "", &[], false)]).unwrap();
    refuses(vec![lo.clone(), host.clone()], "there is no interface eth1");
    refuses(vec![lo.clone(), iface("eth1", "", &[("192.0.2.2", 24)], true)], "default route");
    refuses(vec![lo.clone(), iface("eth1", "", &[("192.0.2.2", 24)], false)], "only address");
    refuses(vec![lo.clone(), host.clone(), iface("eth1", "", &[("198.18.1.7", 24)], false)], "networks");
    let mut port = iface("eth1", "", &[], false);
    port.master = Some("br0".into());
    refuses(vec![lo.clone(), host.clone(), port], "port of br0");
    // named, the risk is taken
    let risky = parse_ok(&TWO_HOSTS.replacen("address = \"198.19.200.1/24\"", "address = \"198.19.200.1/24\"\nallow_host_connection_loss = true", 1)).part("camera-host").unwrap();
    check_on_machine(&risky, &[lo, iface("eth1", "", &[("192.0.2.2", 24)], true)]).unwrap();
}

#[test]
fn a_secure_uplink_names_absolute_files_that_check_finds_and_recognises() {
    let dir = std::env::temp_dir().join(format!("partita-uplink-security-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let signed = "MIME-Version: 1.0\nContent-Type: multipart/signed; protocol=\"application/x-pkcs7-signature\"\n";
    for (f, text) in [("ca.pem", cert), ("routing.pem", cert), ("routing.key", "-----BEGIN PRIVATE KEY-----\n"), ("governance.p7s", signed), ("routing.permissions.p7s", signed)] {
        std::fs::write(dir.join(f), text).unwrap();
    }
    let d = dir.display();
    let table = format!("\n[module.partition.uplink.security]\nca = \"{d}/ca.pem\"\ncertificate = \"{d}/routing.pem\"\nprivate_key = \"{d}/routing.key\"\ngovernance = \"{d}/governance.p7s\"\npermissions = \"{d}/routing.permissions.p7s\"\n");
    let secure = TWO_HOSTS.replacen("# Only the request and reply topics cross the uplink", &format!("{table}\n# Only the request"), 1);
    let s = parse_ok(&secure);
    let sec = s.modules[0].partition("routing").unwrap().tree.uplink.as_ref().unwrap().security.clone().unwrap();
    assert_eq!(sec.permissions_ca, sec.ca, "the permissions CA is the identity CA unless set");
    let part = s.part("camera-host").unwrap();
    let machine = [iface("lo", "", &[("127.0.0.1", 8)], false), iface("eth0", "", &[("192.0.2.2", 24)], true), iface("eth1", "", &[], false)];
    check_on_machine(&part, &machine).unwrap();
    // a key that is no key, a missing governance document: refused with the field
    std::fs::write(dir.join("routing.key"), "not a key").unwrap();
    std::fs::remove_file(dir.join("governance.p7s")).unwrap();
    let e = check_on_machine(&part, &machine).unwrap_err();
    let sec_path = "module[camera-node].partition[routing].uplink.security";
    assert!(e.0.iter().any(|d| d.path == format!("{sec_path}.private_key") && d.problem.to_string().contains("PEM private key")), "{e}");
    assert!(e.0.iter().any(|d| d.path == format!("{sec_path}.governance") && d.problem.to_string().contains("cannot be read")), "{e}");
    // relative paths, and a domain above what DDS Security's documents can name
    let errors = refused(&secure.replacen(&format!("ca = \"{d}/ca.pem\""), "ca = \"ca.pem\"", 1));
    assert!(has(&errors, &format!("{sec_path}.ca"), "absolute path"), "{errors:?}");
    let errors = refused(&secure.replacen("# domain = 2", "domain = 231", 1));
    assert!(has(&errors, sec_path, "230"), "{errors:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
