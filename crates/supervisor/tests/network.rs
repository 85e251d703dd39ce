//! Virtual networks, for real: a module bridge, the inter-module bridge, and who can reach whom (needs root).
//! Only 198.18.0.0/15 addresses on partita's own bridges, inside namespaces made here.
mod common;
use common::*;
use partita_supervisor::vnet::{run_in_netns, Bridge, NetNamespace, VirtualNic};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

/// Sends one datagram from namespace `from` to `to` (a listener in namespace `at`); true if it arrived.
fn udp_reaches(from: PathBuf, at: PathBuf, to: Ipv4Addr) -> bool {
    let listener = run_in_netns(&at, move || {
        let s = UdpSocket::bind(SocketAddrV4::new(to, 0)).expect("bind in the listening namespace");
        s.set_read_timeout(Some(Duration::from_millis(1500))).unwrap();
        s
    })
    .unwrap();
    let port = listener.local_addr().unwrap().port();
    let sent = run_in_netns(&from, move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.send_to(b"partita", SocketAddrV4::new(to, port)).is_ok()
    })
    .unwrap();
    let mut buf = [0u8; 16];
    let got = listener.recv_from(&mut buf).map(|(n, _)| &buf[..n] == b"partita").unwrap_or(false);
    assert!(sent || !got, "a datagram arrived though sending failed");
    got
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn only_the_io_partition_reaches_the_inter_module_network() {
    let system = system_name("net");
    let stem = link_stem();
    {
        let module_net = Bridge::create(&format!("{stem}m")).unwrap();
        let inter_net = Bridge::create(&format!("{stem}x")).unwrap();
        let app = NetNamespace::create(&format!("partita-{system}-app")).unwrap();
        let io = NetNamespace::create(&format!("partita-{system}-io")).unwrap();
        let native = NetNamespace::create(&format!("partita-{system}-native")).unwrap();
        let app_ip = Ipv4Addr::new(198, 18, 201, 2);
        let io_ip = Ipv4Addr::new(198, 18, 201, 3);
        let io_ext_ip = Ipv4Addr::new(198, 19, 201, 3);
        let native_ip = Ipv4Addr::new(198, 19, 201, 9);
        let _v1 = VirtualNic::create(&format!("{stem}a"), "vnic0", &app, &module_net, app_ip, 24).unwrap();
        let _v2 = VirtualNic::create(&format!("{stem}b"), "vnic0", &io, &module_net, io_ip, 24).unwrap();
        let _v3 = VirtualNic::create(&format!("{stem}c"), "vnic1", &io, &inter_net, io_ext_ip, 24).unwrap();
        let _v4 = VirtualNic::create(&format!("{stem}d"), "vnic0", &native, &inter_net, native_ip, 24).unwrap();

        assert!(udp_reaches(app.path(), io.path(), io_ip), "app cannot reach the I/O partition on its module network");
        assert!(udp_reaches(io.path(), native.path(), native_ip), "the I/O partition cannot reach the native node");
        assert!(udp_reaches(native.path(), io.path(), io_ext_ip), "the native node cannot reach the I/O partition");
        assert!(!udp_reaches(app.path(), native.path(), native_ip), "a non-I/O partition reached the inter-module network");
        assert!(!udp_reaches(native.path(), io.path(), io_ip), "the native node reached the module network");
    }
    assert_nothing_left(&system, Some(&stem));
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn addresses_and_names_outside_the_rules_are_refused() {
    let system = system_name("bad");
    let stem = link_stem();
    {
        assert!(Bridge::create("eth9").is_err(), "a bridge without the pt prefix was created");
        assert!(Bridge::create(&format!("{stem}toolongname")).is_err());
        let br = Bridge::create(&format!("{stem}m")).unwrap();
        let ns = NetNamespace::create(&format!("partita-{system}-p")).unwrap();
        let r = VirtualNic::create(&format!("{stem}a"), "vnic0", &ns, &br, Ipv4Addr::new(10, 1, 2, 3), 24);
        assert!(r.is_err(), "an address outside 198.18.0.0/15 was accepted");
    }
    assert_nothing_left(&system, Some(&stem));
}
