//! A compromised QEMU (a guest that escaped into its VM partition's QEMU process) stays inside the partition:
//! it may use its taps (read and write frames), but not make a tap outlive the system, take another name or
//! owner, change its address, create interfaces, or open KVM or the tun device (needs root).
//!
//! The "QEMU" here is a script given as `PARTITA_QEMU`: the runner starts it exactly as it starts QEMU, as
//! the partition's confined program with the taps at descriptors 3, 4, …. One partition has the default
//! profile; the other is granted `seccomp = { allow = ["ioctl/tun-admin"] }`, which shows that the kernel
//! itself lets a descriptor holder do what the profile refuses.
mod common;
use common::*;
use partita_supervisor::Supervisor;
use std::time::{Duration, Instant};

const FAKE_QEMU: &str = r#"#!/usr/bin/python3
import errno, fcntl, os, socket, struct, subprocess, sys

TUNSETIFF, TUNSETPERSIST, TUNSETOWNER, SIOCSIFHWADDR = 0x400454CA, 0x400454CB, 0x400454CC, 0x8924

def attempt(name, f):
    try:
        f()
        print(f"ATTACK {name} WORKED", flush=True)
    except OSError as e:
        print(f"ATTACK {name} refused ({errno.errorcode.get(e.errno, e.errno)})", flush=True)

def shell(args):
    r = subprocess.run(args, capture_output=True)
    if r.returncode != 0:
        raise OSError(errno.EPERM, r.stderr.decode(errors="replace").strip())

# The control: the tap is QEMU's to use.
attempt("write-frame", lambda: os.write(3, b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + b"\x88\xb5" + b"x" * 46))
attempt("tap-persist", lambda: fcntl.ioctl(3, TUNSETPERSIST, 1))
attempt("tap-owner", lambda: fcntl.ioctl(3, TUNSETOWNER, 0))
attempt("tap-rename", lambda: fcntl.ioctl(3, TUNSETIFF, struct.pack("16sH22x", b"evil0", 0x0002 | 0x1000)))
attempt("tap-mac", lambda: fcntl.ioctl(3, SIOCSIFHWADDR, struct.pack("16sH6s16x", b"", 1, b"\x02\xee\xee\xee\xee\xee")))
attempt("open-tun", lambda: os.close(os.open("/dev/net/tun", os.O_RDWR)))
attempt("open-kvm", lambda: os.close(os.open("/dev/kvm", os.O_RDWR)))
attempt("link-add", lambda: shell(["ip", "link", "add", "evil0", "type", "bridge"]))
attempt("link-up-lo-down", lambda: shell(["ip", "link", "set", "lo", "down"]))
print("ATTACKS DONE", flush=True)
sys.exit(0)
"#;

fn results(log: &str) -> Vec<(String, bool)> {
    log.lines()
        .filter_map(|l| l.split("ATTACK ").nth(1))
        .filter_map(|r| {
            let mut w = r.split_whitespace();
            Some((w.next()?.to_string(), w.next()? == "WORKED"))
        })
        .collect()
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_compromised_qemu_uses_its_taps_and_nothing_else() {
    // Where the partition sees it: not under the host's /tmp (a clone under /tmp has its target there), which a
    // partition does not see.
    let dir = std::path::PathBuf::from("/var/tmp").join(format!("partita-vm-attacks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = dir.join("qemu");
    std::fs::write(&fake, FAKE_QEMU).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Read by the supervisor when it writes the runner's command line (this test binary runs no other test).
    std::env::set_var("PARTITA_QEMU", &fake);

    let system = system_name("vmatk");
    let root = tempdir("state");
    let sys = common::system(&format!(
        r#"
[system]
name = "{system}"
[[module]]
name = "m"
cpus = [1]
[[module.partition]]
name = "default"
kind = "vm"
vm = {{ memory = "160MiB", accel = "tcg" }}
command = ["true"]
pids = 64
# The compromised QEMU's `ip` attempts need `ip` in its view (else they fail for want of the program).
binds = ["ip"]
health = {{ action = "stop" }}
[[module.partition]]
name = "granted"
kind = "vm"
vm = {{ memory = "160MiB", accel = "tcg" }}
command = ["true"]
pids = 64
binds = ["ip"]
seccomp = {{ allow = ["ioctl/tun-admin"] }}
health = {{ action = "stop" }}
"#
    ));
    let mut options = options(&root);
    options.partita = Some(partita_binary());
    let sup = Supervisor::up(&sys, &options).unwrap();
    let log = |p: &str| std::fs::read_to_string(root.0.join(&system).join(format!("{p}.log"))).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !["default", "granted"].iter().all(|p| log(p).contains("ATTACKS DONE")) {
        assert!(Instant::now() < deadline, "the fake QEMU did not finish:\n{}\n{}", log("default"), log("granted"));
        std::thread::sleep(Duration::from_millis(50));
    }
    let taps: Vec<String> = sys.modules[0].partitions.iter().map(|p| p.tree.nics[0].host_name.clone()).collect();
    let persist = |tap: &str| {
        let out = std::process::Command::new("ip").args(["-d", "link", "show", tap]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).contains("persist on")
    };
    let persisted = (persist(&taps[0]), persist(&taps[1]));
    sup.down().unwrap();

    let default = results(&log("default"));
    assert_eq!(default.len(), 9, "every attempt reported:\n{}", log("default"));
    for (name, worked) in &default {
        assert_eq!(*worked, name == "write-frame", "{name} in the default profile:\n{}", log("default"));
    }
    // Granted the tap requests, the same holder makes its tap persistent: the kernel asks for no capability.
    let granted = results(&log("granted"));
    assert!(granted.contains(&("tap-persist".to_string(), true)), "the kernel refused TUNSETPERSIST by itself:\n{}", log("granted"));
    assert!(granted.contains(&("link-add".to_string(), false)) && granted.contains(&("open-tun".to_string(), false)), "{}", log("granted"));
    assert_eq!(persisted, (false, true), "only the granted partition's tap was made persistent");
    // A persistent tap would outlive its descriptors: the supervisor deletes its taps by name.
    std::fs::remove_dir_all(&dir).unwrap();
    assert_nothing_left(&system, Some(&link_prefix(&system)));
}
