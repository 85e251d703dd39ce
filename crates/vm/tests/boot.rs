//! Guests booted for real under QEMU's TCG (about 2–3 s each on a 2-core machine): exit status, kernel panic,
//! boot timeout, and a guest on a tap answering UDP from another network namespace on the same bridge.
mod common;

use partita_env::PartitionEnv;
use partita_vm::image::{prepare_base, BaseSpec};
use partita_vm::launch::{GuestNic, LaunchSpec, MacAddr};
use partita_vm::qemu::{Accel, Hardware, Machine, NetFd};
use partita_vm::runner::{self, exit_code, Outcome, RunConfig};
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn env(partition: &str) -> PartitionEnv {
    PartitionEnv {
        partition: partition.into(),
        module: "m".into(),
        domain: 5,
        external_domain: None,
        uplink_domain: None,
        router_file: None,
        cyclonedds_uri: "file:///run/partita/host-side.xml".into(),
        fastdds_profile: None,
        state_dir: None,
        ports: Vec::new(),
    }
}

/// The real guest: the setup's kernel, a base archive with the partita binary of this build, and a launch
/// archive for `spec` in a temporary file (removed on drop).
struct Guest {
    config: RunConfig,
    extra: PathBuf,
}

impl Guest {
    fn new(spec: &LaunchSpec, tag: &str) -> Guest {
        let mut base = BaseSpec::new(&common::vm_cache()).unwrap();
        base.partita = partita_env::programs::guest_binary(&common::partita_binary());
        let img = prepare_base(&base).unwrap();
        let extra = std::env::temp_dir().join(format!("partita-vm-test-{tag}-{}.cpio", std::process::id()));
        spec.write_archive(&extra).unwrap();
        let mut config = RunConfig::new(img.kernel.image.clone(), vec![img.path.clone(), extra.clone()]);
        config.hardware = Hardware { machine: Machine::Microvm, accel: Accel::Tcg, memory_mib: 256, cpus: 1 };
        config.boot_timeout = Duration::from_secs(60);
        Guest { config, extra }
    }

    fn run(&self) -> (Outcome, String) {
        let mut console = Vec::new();
        let outcome = runner::run(&self.config, &mut console, &AtomicBool::new(false));
        (outcome, String::from_utf8_lossy(&console).into_owned())
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.extra);
    }
}

fn command(argv: &[&str]) -> LaunchSpec {
    LaunchSpec { env: env("p7"), extra_env: vec![("GREETING".into(), "a 'quoted' $value".into())], nics: vec![], argv: argv.iter().map(|s| s.to_string()).collect(), programs: Vec::new(), router_file: None }
}

#[test]
fn the_guest_commands_exit_status_is_the_runners_and_its_arguments_and_environment_arrive_intact() {
    // The script checks what it was given and exits 7 only if all of it arrived unchanged.
    let script = r#"test "$1" = "it's two words" && test "$2" = '$HOME "x"' && test "$PARTITA_PARTITION" = p7 && test "$PARTITA_DOMAIN" = 5 && test "$GREETING" = "a 'quoted' \$value" && test "$CYCLONEDDS_URI" = file:///etc/partita/dds.xml && echo all-arrived && exit 7; exit 1"#;
    let guest = Guest::new(&command(&["sh", "-c", script, "sh", "it's two words", "$HOME \"x\""]), "exit");
    let (outcome, console) = guest.run();
    assert_eq!(outcome.exit_code(), 7, "{outcome:?}\n{console}");
    let Outcome::Exited { status: 7, times } = outcome else { panic!("{outcome:?}") };
    assert!(console.contains("all-arrived"), "{console}");
    assert!(times.boot > Duration::ZERO && times.guest_uptime > 0.0 && times.total >= times.boot, "{times:?}");
    assert!(console.contains("partita vm: boot ") && console.contains("exited with status 7"), "{console}");
}

#[test]
fn a_kernel_panic_ends_the_vm_with_the_panic_code() {
    let guest = Guest::new(&command(&["sh", "-c", "echo c > /proc/sysrq-trigger; sleep 30; exit 3"]), "panic");
    let started = Instant::now();
    let (outcome, console) = guest.run();
    assert_eq!(outcome.exit_code(), exit_code::PANIC, "{outcome:?}\n{console}");
    assert!(matches!(&outcome, Outcome::Panicked { line, boot: Some(_) } if line.contains("Kernel panic - not syncing")), "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(25), "the panic ended the VM, not the command's 30 s sleep");
}

#[test]
fn a_guest_that_has_not_started_its_command_in_time_is_killed_with_the_boot_timeout_code() {
    let mut guest = Guest::new(&command(&["true"]), "timeout");
    guest.config.boot_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let (outcome, console) = guest.run();
    assert!(
        matches!(outcome, Outcome::BootTimeout { after, qemu_cpu: Some(cpu) } if after == Duration::from_millis(300) && cpu > Duration::ZERO && cpu < Duration::from_secs(10)),
        "the timeout, with the CPU time QEMU had used: {outcome:?}\n{console}"
    );
    assert!(console.contains("s of CPU, exit code 195"), "the runner's last line says how much CPU QEMU used: {console}");
    assert_eq!(outcome.exit_code(), exit_code::BOOT_TIMEOUT);
    assert!(started.elapsed() < Duration::from_secs(10), "QEMU was killed at the timeout, and run() returned");
    assert!(!console.contains(partita_vm::init::START_MARKER));
}

#[test]
fn a_missing_qemu_is_a_qemu_failure() {
    let mut guest = Guest::new(&command(&["true"]), "noqemu");
    guest.config.qemu = PathBuf::from("/nonexistent/qemu-system-x86_64");
    let (outcome, _) = guest.run();
    assert_eq!(outcome.exit_code(), exit_code::QEMU_FAILED);
    assert!(matches!(&outcome, Outcome::QemuFailed { reason } if reason.contains("qemu-system-x86")), "{outcome:?}");
}

/// A request of `partita app udp-echo`'s protocol (crates/apps/src/udp.rs): `PTUQ`, reply size, number.
fn request(size: u32, seq: u64) -> Vec<u8> {
    let mut r = b"PTUQ".to_vec();
    r.extend_from_slice(&size.to_le_bytes());
    r.extend_from_slice(&seq.to_le_bytes());
    r
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_guest_on_a_tap_answers_udp_from_a_namespace_on_the_same_bridge() {
    // Bridge and tap in one namespace, the peer in another, joined by a veth: nothing on the host's own.
    let bridge_ns = common::Netns::new("partita-vmtest-bridge");
    let peer_ns = common::Netns::new("partita-vmtest-peer");
    let b = bridge_ns.0.as_str();
    common::ip(&["-n", b, "link", "add", "pt9f00v0", "type", "bridge"]);
    common::ip(&["-n", b, "link", "set", "pt9f00v0", "up"]);
    common::ip(&["-n", b, "link", "add", "pt9f00v2", "type", "veth", "peer", "name", "pt9f00v3", "netns", &peer_ns.0]);
    common::ip(&["-n", b, "link", "set", "pt9f00v2", "master", "pt9f00v0", "up"]);
    common::ip(&["-n", &peer_ns.0, "addr", "add", "198.18.7.1/24", "dev", "pt9f00v3"]);
    common::ip(&["-n", &peer_ns.0, "link", "set", "pt9f00v3", "up"]);
    let tap = partita_os::netns::run_in_netns(&bridge_ns.path(), || partita_os::tap::create("pt9f00v1")).unwrap().unwrap();
    common::ip(&["-n", b, "link", "set", "pt9f00v1", "master", "pt9f00v0", "up"]);

    let guest_addr = Ipv4Addr::new(198, 18, 7, 2);
    let mac = MacAddr::for_interface("pt9f00v1");
    let nic = GuestNic { name: "vnic0".into(), mac, address: guest_addr, prefix: 24, domain: 5, peers: vec![Ipv4Addr::new(198, 18, 7, 1)] };
    let script = "cat /etc/partita/dds.xml; ip -o -4 addr show dev vnic0; exec partita app udp-echo --bind 198.18.7.2:9500";
    let spec = LaunchSpec { env: env("echo"), extra_env: vec![], nics: vec![nic], argv: vec!["sh".into(), "-c".into(), script.into()], programs: Vec::new(), router_file: None };
    let mut guest = Guest::new(&spec, "udp");
    guest.config.nets = vec![NetFd { fd: tap.as_raw_fd(), mac }];

    let stop = Arc::new(AtomicBool::new(false));
    let config = guest.config.clone();
    let stop_runner = Arc::clone(&stop);
    let runner = std::thread::spawn(move || {
        let mut console = Vec::new();
        let outcome = runner::run(&config, &mut console, &stop_runner);
        (outcome, String::from_utf8_lossy(&console).into_owned())
    });

    // From the peer's namespace: ask until the guest answers (it boots first), then 20 round trips.
    let answers = partita_os::netns::run_in_netns(&peer_ns.path(), move || -> Result<(usize, Duration), String> {
        let sock = UdpSocket::bind("198.18.7.1:0").map_err(|e| e.to_string())?;
        sock.connect((guest_addr, 9500)).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut buf = [0u8; 2048];
        let mut seq = 0u64;
        loop {
            if Instant::now() > deadline {
                return Err("no answer from the guest within 60 s".into());
            }
            let _ = sock.send(&request(32, seq));
            if let Ok(n) = sock.recv(&mut buf) {
                if n == 16 + 32 && buf[..8] == seq.to_le_bytes() {
                    break;
                }
            }
            seq += 1;
        }
        let mut answered = 0;
        let started = Instant::now();
        for i in 0..20u64 {
            let seq = 1000 + i;
            sock.send(&request(100, seq)).map_err(|e| e.to_string())?;
            let n = sock.recv(&mut buf).map_err(|e| format!("request {seq}: {e}"))?;
            if n == 16 + 100 && buf[..8] == seq.to_le_bytes() && buf[12..16] == 1u32.to_le_bytes() {
                answered += 1;
            }
        }
        Ok((answered, started.elapsed() / 20))
    })
    .unwrap();
    stop.store(true, Ordering::SeqCst);
    let (outcome, console) = runner.join().unwrap();
    let (answered, mean) = answers.unwrap_or_else(|e| panic!("{e}\nconsole:\n{console}"));
    assert_eq!(answered, 20, "{console}");
    assert!(mean < Duration::from_millis(100), "mean round trip {mean:?}");
    assert_eq!(outcome, Outcome::Stopped, "{console}");
    assert!(console.contains("inet 198.18.7.2/24") && console.contains("vnic0"), "the NIC was found by MAC and renamed: {console}");
    assert!(console.contains("<NetworkInterface name=\"vnic0\"") && console.contains("<Peer address=\"198.18.7.1\"/>"), "{console}");
    drop(tap);
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_acceleration_probe_boots_under_kvm_once_and_then_answers_from_its_cache() {
    let dir = std::env::temp_dir().join(format!("partita-vm-test-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let guest = Guest::new(&command(&["true"]), "probe");
    let (kernel, base) = (guest.config.kernel.clone(), guest.config.initrds[0].clone());
    let probe = |fresh| partita_vm::probe::probe(&kernel, &base, &dir, Duration::from_secs(2), fresh).unwrap();
    // The first probe boots (2 s at most: where KVM hangs, as under kvm_pvm, that is its cost).
    let started = Instant::now();
    let first = probe(true);
    assert!(!first.cached && !first.reason.is_empty(), "{first:?}");
    // A verdict stored for this very host is taken as it is, without a boot.
    let seeded = partita_vm::probe::Verdict { accel: Accel::Kvm, reason: "seeded by the test".into(), ..first.clone() };
    std::fs::write(dir.join(partita_vm::probe::CACHE_FILE), serde_json::to_vec(&seeded).unwrap()).unwrap();
    let cached = probe(false);
    assert!(cached.cached && cached.reason == "seeded by the test" && cached.accel == Accel::Kvm, "{cached:?}");
    // A fresh probe boots again and writes what it found.
    let again = probe(true);
    assert_eq!((again.accel, again.cached), (first.accel, false), "{again:?}");
    let stored: partita_vm::probe::Verdict = serde_json::from_slice(&std::fs::read(dir.join(partita_vm::probe::CACHE_FILE)).unwrap()).unwrap();
    assert_eq!(stored.reason, again.reason);
    match first.accel {
        Accel::Kvm => assert!(first.kvm_boot_s.is_some_and(|s| s < 2.0), "{first:?}"),
        Accel::Tcg => assert!(first.reason.contains("KVM") || first.reason.contains("/dev/kvm"), "the reason names what failed: {first:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    std::fs::remove_dir_all(&dir).unwrap();
}
