//! `partita up` end to end (root): a two-partition module on one CPU (800 + 700 µs windows) runs for two
//! seconds, writes its timeline and leaves nothing behind; a bad file is refused with exit 2 and builds nothing.
use std::process::Command;
use std::sync::{RwLock, RwLockReadGuard};

/// The host's settings (interrupts, workqueue CPUs) are shared by every system up at once: the test that
/// watches them change and come back runs alone (write), the other tests of this file together (read).
static HOST: RwLock<()> = RwLock::new(());

fn host_shared() -> RwLockReadGuard<'static, ()> {
    HOST.read().unwrap_or_else(|e| e.into_inner())
}

const SYSTEM: &str = r#"
[system]
name = "NAME"

[[module]]
name = "node"
cpus = [1]

[[module.partition]]
name = "alpha"
command = ["sleep", "30"]
memory = "32MiB"

[[module.partition]]
name = "beta"
command = ["sleep", "30"]
memory = "32MiB"
io = true

[[module.plan]]
cpu = 1
major_frame = "1500us"

[[module.plan.window]]
partition = "beta"
start = "0us"
duration = "800us"

[[module.plan.window]]
partition = "alpha"
start = "800us"
duration = "700us"
"#;

fn leftovers(tag: &str) -> Vec<String> {
    let mut found = Vec::new();
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    found.extend(String::from_utf8_lossy(&netns.stdout).lines().filter(|l| l.contains(tag)).map(String::from));
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpuset"] {
        let p = std::path::Path::new(root).join("partita").join(tag);
        if p.exists() {
            found.push(p.display().to_string());
        }
    }
    found
}

/// `partita up FILE` for at most a minute, its output discarded: for tests that stop it themselves.
fn spawn_up(file: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["up", file.to_str().unwrap(), "--duration", "60"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn write_system(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("{name}.toml"));
    std::fs::write(&p, text.replace("NAME", name)).unwrap();
    p
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn up_runs_the_plan_writes_the_timeline_and_cleans_up() {
    let _host = host_shared();
    let name = format!("up{}", std::process::id() % 100_000);
    let file = write_system(&name, SYSTEM);
    let timeline = std::env::temp_dir().join(format!("{name}-timeline.jsonl"));
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["up", file.to_str().unwrap(), "--duration", "2", "--timeline", timeline.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&timeline).unwrap();
    let _ = std::fs::remove_file(&timeline);
    let svg_path = timeline.with_extension("svg");
    let svg = std::fs::read_to_string(&svg_path).expect("a picture beside the timeline");
    let _ = std::fs::remove_file(&svg_path);
    assert!(svg.starts_with("<svg") && svg.matches("<rect").count() > 10, "{svg}");
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() > 100, "two seconds of a 1.5 ms frame: {} window starts", lines.len());
    for partition in [0, 1] {
        assert!(lines.iter().any(|l| l["partition"] == partition), "no window of partition {partition}");
    }
    assert!(lines.iter().all(|l| l["switched_ns"].as_u64() >= l["planned_ns"].as_u64()), "a window started before its time");
    assert!(leftovers(&name).is_empty(), "left behind: {:?}", leftovers(&name));
    let _ = std::fs::remove_dir_all(std::path::Path::new("/run/partita").join(&name));
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_bad_system_file_is_refused_and_builds_nothing() {
    let name = format!("bad{}", std::process::id() % 100_000);
    let file = write_system(&name, &SYSTEM.replace("duration = \"700us\"", "duration = \"900us\""));
    let out = Command::new(env!("CARGO_BIN_EXE_partita")).args(["up", file.to_str().unwrap(), "--duration", "1"]).output().unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{name}.toml")) && err.contains("window"), "{err}");
    assert!(leftovers(&name).is_empty(), "left behind: {:?}", leftovers(&name));
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_crashing_partition_is_restarted_while_its_neighbour_keeps_every_window() {
    let _host = host_shared();
    let name = format!("crash{}", std::process::id() % 100_000);
    let text = SYSTEM
        .replace(
            "command = [\"sleep\", \"30\"]\nmemory = \"32MiB\"\n\n[[module.partition]]",
            "command = [\"sh\", \"-c\", \"sleep 0.2; exit 3\"]\nbinds = [\"sleep\"]\nmemory = \"32MiB\"\nhealth = { action = \"restart\", max_restarts = 100, window = \"10s\" }\n\n[[module.partition]]",
        );
    assert!(text.contains("exit 3"), "the crashing partition is alpha");
    let file = write_system(&name, &text);
    let timeline = std::env::temp_dir().join(format!("{name}-timeline.jsonl"));
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["up", file.to_str().unwrap(), "--duration", "3", "--timeline", timeline.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let events_path = std::path::Path::new("/run/partita").join(&name).join("events.jsonl");
    let events = std::fs::read_to_string(&events_path).unwrap_or_default();
    let restarts = events.lines().filter(|l| l.contains("\"restart\"") && l.contains("alpha")).count();
    assert!(restarts >= 2, "alpha exits every 0.2 s of its own run time and must be restarted:\n{events}");
    let text = std::fs::read_to_string(&timeline).unwrap();
    let _ = std::fs::remove_file(&timeline);
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // Every frame the executor ran has beta's window: the crashes and cold starts took none of it.
    let frames: std::collections::BTreeSet<u64> = lines.iter().map(|l| l["frame"].as_u64().unwrap()).collect();
    let beta_frames: std::collections::BTreeSet<u64> =
        lines.iter().filter(|l| l["partition"] == 1).map(|l| l["frame"].as_u64().unwrap()).collect();
    assert!(frames.len() > 100);
    assert_eq!(frames, beta_frames, "frames without a window of beta");
    // The events and DDS files stay for inspection after a run; this test's are removed here.
    let _ = std::fs::remove_dir_all(events_path.parent().unwrap());
    assert!(leftovers(&name).is_empty(), "left behind: {:?}", leftovers(&name));
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_addresses_of_the_system_file_are_the_ones_the_partitions_get() {
    let _host = host_shared();
    let name = format!("addr{}", std::process::id() % 100_000);
    // The I/O partition and a native node at addresses the file gives; each writes what `ip` shows.
    let text = SYSTEM
        .replace("[[module]]\nname = \"node\"", "[network]\nsubnet = \"198.18.40.0/24\"\n\n[[module]]\nname = \"node\"\nsubnet = \"198.18.41.0/24\"")
        .replace(
            "command = [\"sleep\", \"30\"]\nmemory = \"32MiB\"\nio = true",
            "command = [\"sh\", \"-c\", \"ip -4 -o addr show; sleep 30\"]\nbinds = [\"ip\", \"sleep\"]\nmemory = \"32MiB\"\nio = true\naddress = \"198.18.41.77\"",
        )
        + "\n[[node]]\nname = \"watcher\"\ncommand = [\"sh\", \"-c\", \"ip -4 -o addr show; sleep 30\"]\naddress = \"198.18.40.99\"\n";
    assert!(text.contains("198.18.41.77") && text.contains("subnet = \"198.18.41.0/24\""), "{text}");
    let file = write_system(&name, &text);
    let check = Command::new(env!("CARGO_BIN_EXE_partita")).args(["check", file.to_str().unwrap()]).output().unwrap();
    let shown = String::from_utf8_lossy(&check.stdout).to_string();
    assert!(check.status.success(), "{shown}{}", String::from_utf8_lossy(&check.stderr));
    let out = Command::new(env!("CARGO_BIN_EXE_partita")).args(["up", file.to_str().unwrap(), "--duration", "1.5"]).output().unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let state = std::path::Path::new("/run/partita").join(&name);
    let beta = std::fs::read_to_string(state.join("beta.log")).unwrap_or_default();
    let watcher = std::fs::read_to_string(state.join("watcher.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&state);
    assert!(beta.contains("198.18.41.77/24"), "the I/O partition's V-NIC: {beta}");
    let beta_external = shown.lines().find(|l| l.contains("beta") && l.contains("I/O partition")).unwrap_or_default().to_string();
    assert!(beta_external.contains("198.18.40."), "check shows the inter-module address: {shown}");
    let ext = beta_external.split_whitespace().find(|w| w.starts_with("198.18.40.")).unwrap();
    assert!(beta.contains(&format!("{ext}/24")), "the address check shows ({ext}) is the one it gets: {beta}");
    assert!(watcher.contains("198.18.40.99/24"), "the native node's address: {watcher}");
    assert!(leftovers(&name).is_empty(), "left behind: {:?}", leftovers(&name));
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn sighup_and_sigquit_tear_the_system_down_like_sigterm() {
    let _host = host_shared();
    for signal in [libc::SIGHUP, libc::SIGQUIT] {
        let name = format!("hup{}x{signal}", std::process::id() % 100_000);
        let file = write_system(&name, SYSTEM);
        let up = Command::new(env!("CARGO_BIN_EXE_partita")).args(["up", file.to_str().unwrap()]).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let state = std::path::Path::new("/run/partita").join(&name).join("state.json");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !state.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(state.exists(), "the system did not come up");
        partita_os::process::send_signal(up.id() as i32, signal).unwrap();
        let out = up.wait_with_output().unwrap();
        let _ = std::fs::remove_file(&file);
        assert!(out.status.success(), "signal {signal}: {:?} {}", out.status, String::from_utf8_lossy(&out.stderr));
        assert!(!state.exists(), "signal {signal}: the state file says the system is still up");
        assert!(leftovers(&name).is_empty(), "signal {signal} left behind: {:?}", leftovers(&name));
        let _ = std::fs::remove_dir_all(state.parent().unwrap());
    }
}

/// A supervisor killed with SIGKILL cannot stop its idle pollers (crates/os/src/idle_poll.rs, on a kernel
/// without a cpuidle driver): they end by themselves once it is gone, and `partita down` removes their cgroup
/// with the rest of the system.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_idle_pollers_of_a_killed_supervisor_end_and_down_removes_their_cgroup() {
    let _host = host_shared();
    use std::time::{Duration, Instant};
    let name = format!("kp{}", std::process::id() % 100_000);
    let file = write_system(&name, SYSTEM);
    let mut up = spawn_up(&file);
    let pid = up.id();
    let want = if partita_os::cpu_latency::needs_pollers(0) { partita_os::sched::current_thread_cpus().unwrap().len() } else { 0 };
    // Up when the plan's window starts are being written to its state directory's events; the pollers start
    // before that.
    let until = Instant::now() + Duration::from_secs(20);
    let mut pollers = partita_os::idle_poll::running(pid);
    while pollers.len() < want || !std::path::Path::new("/run/partita").join(&name).join("events.jsonl").exists() {
        assert!(Instant::now() < until, "the system did not come up with {want} idle pollers: {pollers:?}");
        std::thread::sleep(Duration::from_millis(50));
        pollers = partita_os::idle_poll::running(pid);
    }
    assert_eq!(pollers.len(), want, "{pollers:?}");
    let _ = std::fs::remove_file(&file);
    // SAFETY: kill on the pid of the child this test started, not yet reaped.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let _ = up.wait();
    let ended = |p: i32| std::fs::read_to_string(format!("/proc/{p}/stat")).map_or(true, |s| s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'));
    let until = Instant::now() + Duration::from_secs(2);
    while !pollers.iter().all(|p| ended(p.pid)) {
        assert!(Instant::now() < until, "idle pollers outlived their supervisor: {pollers:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let group = |p: &partita_os::idle_poll::Running| p.cgroup.rsplit('/').next().unwrap_or_default().to_string();
    let groups: Vec<String> = pollers.iter().map(group).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_partita")).arg("down").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for g in &groups {
        for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup"] {
            let d = std::path::Path::new(root).join(g);
            assert!(g.is_empty() || !d.exists(), "{} survived `partita down`", d.display());
        }
    }
    assert!(groups.iter().all(|g| g.starts_with(partita_os::idle_poll::GROUP_PREFIX)), "{groups:?}");
    assert!(leftovers(&name).is_empty(), "left behind: {:?}", leftovers(&name));
}

/// The host's settings `up` changes (docs/security.md, "Time partitioning and kernel work"): the unbound
/// workqueues leave the plan's CPU while the system is up, and are given back after SIGTERM, and after SIGKILL
/// of the supervisor by `partita down`.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_host_settings_are_held_while_up_and_given_back_after_sigterm_and_after_sigkill_and_down() {
    let _host = HOST.write().unwrap_or_else(|e| e.into_inner());
    use std::time::{Duration, Instant};
    const MASK: &str = "/sys/devices/virtual/workqueue/cpumask";
    const RECORD: &str = "/run/partita/host-tuning.json";
    let read = || std::fs::read_to_string(MASK).unwrap().trim().to_string();
    let has_cpu1 = |mask: &str| u64::from_str_radix(mask.rsplit(',').next().unwrap(), 16).unwrap() & 0b10 != 0;
    let before = read();
    assert!(has_cpu1(&before), "this test needs unbound kernel work allowed on CPU 1 (the plan's) to begin with: {before}");
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        let name = format!("ht{}x{signal}", std::process::id() % 100_000);
        let file = write_system(&name, SYSTEM);
        let mut up = spawn_up(&file);
        let state = std::path::Path::new("/run/partita").join(&name).join("state.json");
        let until = Instant::now() + Duration::from_secs(20);
        while !state.exists() {
            assert!(Instant::now() < until, "the system did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(&file);
        let held = read();
        assert!(!has_cpu1(&held), "while up, unbound kernel work may still run on the plan's CPU 1: {held}");
        partita_os::process::send_signal(up.id() as i32, signal).unwrap();
        let _ = up.wait();
        if signal == libc::SIGKILL {
            assert_eq!(read(), held, "nothing gave the settings back after SIGKILL but `partita down`");
            assert!(std::path::Path::new(RECORD).exists(), "the record of the original values is gone");
            let out = Command::new(env!("CARGO_BIN_EXE_partita")).arg("down").output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            assert!(String::from_utf8_lossy(&out.stdout).contains("gave the host back"), "{}", String::from_utf8_lossy(&out.stdout));
        }
        assert_eq!(read(), before, "after {signal}: the workqueues' CPUs were not given back");
        assert!(!std::path::Path::new(RECORD).exists(), "after {signal}: the record is left behind");
        assert!(leftovers(&name).is_empty(), "left behind: {:?}", leftovers(&name));
        let _ = std::fs::remove_dir_all(state.parent().unwrap());
    }
}
