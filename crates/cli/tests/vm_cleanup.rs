//! Nothing of a system with a VM partition is left after SIGTERM to `partita up`, nor after kill -9 of it
//! followed by `partita down`: no tap, bridge, veth, namespace, cgroup, or QEMU process (root; TCG guests).
use partita_system::HostNames;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn partita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partita"))
}

fn system_file(name: &str) -> PathBuf {
    let text = format!(
        r#"
[system]
name = "{name}"
[[module]]
name = "m"
cpus = [1]
[[module.partition]]
name = "guest"
kind = "vm"
vm = {{ memory = "160MiB", accel = "tcg", boot_timeout = "120s" }}
command = ["sh", "-c", "echo guest-ready; sleep 1000"]
pids = 64
health = {{ action = "stop" }}
[[module.partition]]
name = "proc"
command = ["sleep", "1000"]
memory = "32MiB"
pids = 8
health = {{ action = "stop" }}
[[module.plan]]
cpu = 1
major_frame = "10ms"
window = [{{ partition = "guest", start = "0ms", duration = "7ms" }}, {{ partition = "proc", start = "7ms", duration = "3ms" }}]
"#
    );
    let p = std::env::temp_dir().join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

fn links(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["-o", "link", "show"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.split(": ").nth(1)).map(|n| n.split('@').next().unwrap_or(n).to_string()).filter(|n| n.starts_with(prefix)).collect()
}

fn namespaces(name: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.split_whitespace().next()).filter(|n| n.starts_with(&format!("partita-{name}-"))).map(String::from).collect()
}

/// Pids of QEMU processes in this system's cgroups.
fn qemus(name: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) else { continue };
        if comm.starts_with("qemu-system") && cgroup_of(pid).contains(&format!("partita/{name}/")) {
            out.push(pid);
        }
    }
    out
}

fn cgroup_of(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default()
}

fn cgroups_left(name: &str) -> Vec<PathBuf> {
    let layout = partita_supervisor::cgroup::Layout::detect().unwrap();
    layout.roots().into_iter().map(|r| r.join("partita").join(name)).filter(|p| p.exists()).collect()
}

/// `partita up`, sent SIGTERM if the test fails while it runs.
struct Up(std::process::Child);
impl Drop for Up {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = partita_os::process::send_signal(self.0.id() as i32, libc::SIGTERM);
            let _ = self.0.wait();
        }
    }
}

/// Starts `up` and waits until the guest runs its command (its QEMU and tap exist).
fn start(name: &str, file: &Path) -> Up {
    // A previous run's log stays (for inspection) until `down`.
    let _ = std::fs::remove_file(Path::new("/run/partita").join(name).join("guest.log"));
    let up = Up(partita().args(["up", file.to_str().unwrap(), "--duration", "300"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let log = Path::new("/run/partita").join(name).join("guest.log");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(&log).unwrap_or_default().contains("guest-ready") {
        assert!(Instant::now() < deadline, "the guest never started:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(qemus(name).len(), 1, "one QEMU runs in the guest partition's cgroup");
    assert_eq!(links(&HostNames::new(name).link_prefix()).len(), 3, "the module's bridge, a veth and a tap: {:?}", links(&HostNames::new(name).link_prefix()));
    up
}

fn assert_nothing_left(name: &str) {
    assert!(links(&HostNames::new(name).link_prefix()).is_empty(), "links left: {:?}", links(&HostNames::new(name).link_prefix()));
    assert!(namespaces(name).is_empty(), "namespaces left: {:?}", namespaces(name));
    assert!(qemus(name).is_empty(), "QEMU left: {:?}", qemus(name));
    assert!(cgroups_left(name).is_empty(), "cgroups left: {:?}", cgroups_left(name));
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn sigterm_to_up_and_kill_9_then_down_leave_nothing_of_a_vm_partition() {
    let name = format!("vc{}", std::process::id());
    let file = system_file(&name);

    let mut up = start(&name, &file);
    partita_os::process::send_signal(up.0.id() as i32, libc::SIGTERM).unwrap();
    let status = up.0.wait().unwrap();
    assert!(status.success(), "up after SIGTERM: {status:?}");
    assert_nothing_left(&name);

    let mut up = start(&name, &file);
    partita_os::process::send_signal(up.0.id() as i32, libc::SIGKILL).unwrap();
    let _ = up.0.wait();
    assert_eq!(qemus(&name).len(), 1, "kill -9 of the supervisor leaves its partitions running, until `down`");
    let down = partita().arg("down").output().unwrap();
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    assert_nothing_left(&name);
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir_all(Path::new("/var/lib/partita").join(&name));
}
