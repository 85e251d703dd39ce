//! Space attacks of a partition on what it shares with the host and its neighbours (`tests/attacks/space.py`):
//! the operator's terminal, its own output log, the host's disk and inodes, the kernel's per-user counts, and
//! the I/O partition's inter-module side. From inside a partition each must be refused, while root on the host
//! and the I/O partition keep what they need; the same attacks made on the host against scratch targets work,
//! which shows the test would see one succeed.
mod common;
use common::*;
use partita_supervisor::Supervisor;
use partita_system::NetworkId;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SCRIPT: &str = include_str!("attacks/space.py");
/// What the attacker's log, state directory and disk attacks are given and try.
const LOG_SIZE: u64 = 64 << 10;
const STATE_SIZE: u64 = 16 << 20;
const STATE_INODES: u64 = 256;
const DISK_TRY: u64 = 256 << 20;

fn system_text(name: &str) -> String {
    let wait = |role: &str| format!("while [ ! -f \\\"$PARTITA_STATE_DIR/context.json\\\" ]; do sleep 0.05; done; exec python3 \\\"$PARTITA_STATE_DIR/space.py\\\" {role} \\\"$PARTITA_STATE_DIR/context.json\\\"");
    format!(
        r#"
[system]
name = "{name}"

[[module]]
name = "m"
cpus = [1]

[[module.partition]]
name = "attacker"
command = ["sh", "-c", "{attacker}"]
{binds}
health = {{ action = "stop" }}
log_size = "64KiB"
state = {{ size = "16MiB", inodes = {STATE_INODES} }}

[[module.partition]]
name = "io"
command = ["sh", "-c", "{listener}"]
{binds}
io = true
health = {{ action = "stop" }}
"#,
        attacker = wait("attacker"),
        listener = wait("listener"),
        binds = binds(&["sleep", "python3"]),
    )
}

fn wait_for_text(path: &Path, text: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let now = std::fs::read_to_string(path).unwrap_or_default();
        if now.contains(text) || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Makes and removes a scratch file in each place the view attacks watch.
fn touch_watched_places() {
    for dir in ["/etc", "/var/lib", "/usr/bin"] {
        let p = Path::new(dir).join(format!("partita-probe-{}", std::process::id()));
        std::fs::write(&p, b"x").unwrap();
        std::fs::remove_file(&p).unwrap();
    }
}

fn results(log: &str) -> Vec<(String, String)> {
    log.lines().filter_map(|l| l.trim_start_matches('\0').strip_prefix("RESULT ")).filter_map(|l| l.split_once(": ")).map(|(a, r)| (a.to_string(), r.to_string())).collect()
}

fn result<'a>(all: &'a [(String, String)], attack: &str) -> &'a str {
    all.iter().find(|(a, _)| a == attack).map(|(_, r)| r.as_str()).unwrap_or_else(|| panic!("no result of {attack:?}: {all:?}"))
}

/// Free bytes of the file system that holds the partitions' state.
fn free_bytes(path: &str) -> u64 {
    let out = Command::new("stat").args(["-f", "-c", "%a %S", path]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut it = text.split_whitespace().map(|n| n.parse::<u64>().unwrap());
    it.next().unwrap() * it.next().unwrap()
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn space_attacks_from_a_partition_are_refused_and_leave_the_host_and_the_io_partition_whole() {
    let name = system_name("spc");
    let root = tempdir("state");
    let sys = system(&system_text(&name));
    let part = |p: &str| sys.partitions().find(|(_, x)| x.name == p).unwrap().1;
    let (attacker, io) = (part("attacker"), part("io"));
    let state_of = |p: &partita_system::Partition| p.tree.confinement.clone().unwrap().state_dir;
    let (attacker_state, io_state) = (state_of(attacker), state_of(io));
    for d in [&attacker_state, &io_state] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("space.py"), SCRIPT).unwrap();
    }
    let _cleanup = TempDir(attacker_state.parent().unwrap().to_path_buf());
    let nic = |p: &partita_system::Partition, id: fn(&NetworkId) -> bool| p.tree.nics.iter().find(|n| id(&n.network)).unwrap().clone();
    let io_module = nic(io, |n| matches!(n, NetworkId::Module(_)));
    let io_external = nic(io, |n| *n == NetworkId::InterModule);
    let (dds_first, _) = partita_supervisor::vnet::domain_ports(io_external.domain.get());
    let targets = serde_json::json!({
        "device": nic(attacker, |n| matches!(n, NetworkId::Module(_))).name,
        "other_address": io_external.address.to_string(),
        "module_address": io_module.address.to_string(),
        "dds_port": dds_first + 240,
        "plain_port": 9999,
        "tcp_port": 9998,
    });
    // Another system's state, and the places whose file events the attacker watches.
    let other = tempdir("other");
    let other_state = Path::new(partita_system::confinement::STATE_ROOT).join(format!("{name}-other"));
    std::fs::create_dir_all(other_state.join("p")).unwrap();
    let _other_cleanup = TempDir(other_state.clone());
    let source_tree = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf();
    let view = serde_json::json!({
        "source_tree": source_tree, "other_state": other_state,
        // The source tree, the supervisor's state (where the partition's DDS configuration is written), another
        // system's state, a scratch directory of the test's.
        "host_paths": [source_tree.display().to_string(), root.0.file_name().unwrap().to_string_lossy(), format!("{name}-other"), other.0.display().to_string()],
        "watch": ["/etc", "/var/lib", "/usr/bin"], "watched": attacker_state.join("watched"),
    });
    let context = |state: &Path| {
        serde_json::json!({
            "view": view,
            "state": state, "disk_bytes": DISK_TRY, "files": 5000, "log_bytes": 1 << 20, "targets": targets,
            "release": attacker_state.join("release"), "check": io_state.join("check"),
        })
    };

    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    let (attacker_log, io_log) = (sup.state_dir().join("attacker.log"), sup.state_dir().join("io.log"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let driver = {
        let (stop, attacker_log, io_log, attacker_state, io_state) = (stop.clone(), attacker_log.clone(), io_log.clone(), attacker_state.clone(), io_state.clone());
        let (ctx_attacker, ctx_io) = (context(&attacker_state), context(&io_state));
        std::thread::spawn(move || {
            std::fs::write(io_state.join("context.json"), ctx_io.to_string()).unwrap();
            wait_for_text(&io_log, "LISTENING", Duration::from_secs(30));
            let free_before = free_bytes(partita_system::confinement::STATE_ROOT);
            std::fs::write(attacker_state.join("context.json"), ctx_attacker.to_string()).unwrap();
            wait_for_text(&attacker_log, "WATCHING", Duration::from_secs(60));
            touch_watched_places();
            std::fs::write(attacker_state.join("watched"), b"").unwrap();
            let held = wait_for_text(&attacker_log, "HOLDING", Duration::from_secs(120));
            let free_held = free_bytes(partita_system::confinement::STATE_ROOT);
            // While the attacker holds all it could take: root on the host, then the I/O partition.
            let ctx_path = attacker_state.join("context.json");
            let probe = Command::new("python3").arg(attacker_state.join("space.py")).arg("probe").arg(&ctx_path).stdin(Stdio::null()).output().unwrap();
            let host = String::from_utf8_lossy(&probe.stdout).into_owned();
            std::fs::write(io_state.join("check"), b"").unwrap();
            let neighbour = wait_for_text(&io_log, "NEIGHBOUR sigqueue", Duration::from_secs(30));
            std::fs::write(attacker_state.join("release"), b"").unwrap();
            let done = wait_for_text(&attacker_log, "ATTACKER DONE", Duration::from_secs(60));
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            (held, free_before, free_held, host, neighbour, done)
        })
    };
    sup.run(None, Some(stop)).unwrap();
    let (held, free_before, free_held, host, neighbour, done) = driver.join().unwrap();
    let io_said = std::fs::read_to_string(&io_log).unwrap_or_default();
    let log_sizes: Vec<u64> = [attacker_log.clone(), PathBuf::from(format!("{}.1", attacker_log.display()))].iter().map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)).collect();
    assert_nothing_left(&name, Some(&link_prefix(&name)));
    eprintln!("the attacker said:\n{held}\n...\n{}", done.lines().rev().take(3).collect::<Vec<_>>().join("\n"));
    eprintln!("root on the host, while it held them:\n{host}\nthe I/O partition:\n{io_said}");
    let got = results(&held);

    // 1. No terminal, a log it cannot grow nor erase, capped.
    assert!(result(&got, "read the operator's terminal").starts_with("REFUSED"), "{got:?}");
    assert!(result(&got, "grow the log").starts_with("REFUSED"), "{got:?}");
    assert!(result(&got, "erase the log").starts_with("REFUSED"), "{got:?}");
    assert!(done.contains("RESULT flood the log: DONE"), "the flood ran: {done}");
    assert!(log_sizes.iter().all(|s| *s <= LOG_SIZE) && log_sizes.iter().sum::<u64>() > 0, "after a 1 MiB flood the log and its older part are {log_sizes:?} bytes, each at most {LOG_SIZE}");
    // 2. The state directory's quota: ENOSPC at its size and inode count, and the host's disk kept.
    let disk = result(&got, "fill the host's disk");
    assert!(disk.starts_with("REFUSED ENOSPC"), "{disk}");
    let written_mib: u64 = disk.split_whitespace().rev().nth(1).unwrap().parse().unwrap();
    assert!(written_mib <= STATE_SIZE >> 20, "wrote {written_mib} MiB into a {} MiB state directory", STATE_SIZE >> 20);
    let taken = free_before.saturating_sub(free_held);
    assert!(taken < DISK_TRY / 4, "the host's free space fell by {} MiB while the attacker held what it wrote", taken >> 20);
    let inodes = result(&got, "use up the host's inodes");
    assert!(inodes.starts_with("REFUSED ENOSPC"), "{inodes}");
    // 3. Its kernel counts are its own: it took what it could, and root and the I/O partition still have theirs.
    for count in ["inotify", "mq", "signals"] {
        assert!(held.contains(&format!("TOOK {count}: ")), "no {count} attack: {held}");
    }
    assert!(held.contains("queued 1024 signals, then EAGAIN"), "its queued signals are capped at its limit: {held}");
    for line in ["inotify: ok", "mq_open: ok", "sigqueue: ok"] {
        assert!(host.contains(line), "root on the host: {line:?} expected, got:\n{host}");
        assert!(neighbour.contains(&format!("NEIGHBOUR {line}")), "the I/O partition: {line:?} expected, got:\n{neighbour}");
    }
    // 4. The I/O partition's other side: nothing arrives, the control does.
    assert!(result(&got, "reach the I/O partition's module address").starts_with("DONE"), "{got:?}");
    assert!(io_said.contains("GOT 9999 control"), "the control datagram arrived:\n{io_said}");
    assert!(!io_said.contains("other-address"), "a datagram to the inter-module address arrived through the module V-NIC:\n{io_said}");
    assert!(!io_said.contains("other-domain"), "a datagram for the inter-module domain's ports arrived through the module V-NIC:\n{io_said}");
    assert!(result(&got, "TCP to the other side's address").starts_with("REFUSED"), "{got:?}");
    // 6. A minimal root: nothing of the host's activity in view.
    for attack in ["read the source tree", "see the host's home directories", "see another system's state", "read host paths in mountinfo", "watch the host's files"] {
        assert!(result(&got, attack).starts_with("REFUSED"), "{attack}: {got:?}");
    }
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_same_space_attacks_work_on_the_host_against_scratch_targets() {
    let dir = tempdir("space-host");
    let script = dir.0.join("space.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let state = dir.0.join("state");
    std::fs::create_dir_all(&state).unwrap();
    // A scratch user makes the counter attacks (they take that user's counts, as a partition owned by host root
    // took root's), owning the scratch directory.
    let scratch_uid = "3999000000";
    Command::new("chown").args(["-R", &format!("{scratch_uid}:{scratch_uid}"), &dir.0.display().to_string()]).status().unwrap();
    let ctx = dir.0.join("context.json");
    let release = dir.0.join("release");
    // The view attacks' scratch targets: a directory with a file (the source tree, another system's state), a
    // mount of its own (a path the host's mount table names).
    let scratch_tree = dir.0.join("tree");
    std::fs::create_dir_all(scratch_tree.join("src")).unwrap();
    let mounted = dir.0.join("mounted");
    std::fs::create_dir_all(&mounted).unwrap();
    assert!(Command::new("mount").args(["-t", "tmpfs", "scratch", &mounted.display().to_string()]).status().unwrap().success());
    let view = serde_json::json!({
        "source_tree": scratch_tree, "other_state": scratch_tree, "host_paths": [mounted.display().to_string()],
        "watch": ["/etc", "/var/lib", "/usr/bin"], "watched": dir.0.join("watched"),
    });
    std::fs::write(&ctx, serde_json::json!({"view": view, "state": state, "disk_bytes": 32 << 20, "files": 500, "log_bytes": 1 << 20, "release": release, "check": dir.0.join("check")}).to_string()).unwrap();
    let out_path = dir.0.join("stdout");
    // stdin: a terminal (`script` gives the program one), as `partita up` run at a terminal has; stdout and
    // stderr: a file, as the landed supervisor's partition log was.
    let as_scratch = ["--reuid", scratch_uid, "--regid", scratch_uid, "--clear-groups", "/usr/bin/python3"];
    let cmdline = format!("setpriv {} {} attacker {} >{} 2>&1", as_scratch.join(" "), script.display(), ctx.display(), out_path.display());
    let mut attacker = Command::new("script").args(["-q", "-c", &cmdline, "/dev/null"]).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    wait_for_text(&out_path, "WATCHING", Duration::from_secs(60));
    touch_watched_places();
    std::fs::write(dir.0.join("watched"), b"").unwrap();
    let held = wait_for_text(&out_path, "HOLDING", Duration::from_secs(120));
    let probe = Command::new("setpriv").args(as_scratch).arg(&script).arg("probe").arg(&ctx).output().unwrap();
    let same_user = String::from_utf8_lossy(&probe.stdout).into_owned();
    std::fs::write(&release, b"").unwrap();
    let _ = wait_for_text(&out_path, "ATTACKER DONE", Duration::from_secs(60));
    let _ = attacker.kill();
    let _ = attacker.wait();
    let _ = Command::new("umount").arg(&mounted).status();
    eprintln!("on the host:\n{held}\nthe same user while it held them:\n{same_user}");
    let got = results(&held);
    for attack in [
        "read the operator's terminal",
        "grow the log",
        "erase the log",
        "fill the host's disk",
        "use up the host's inodes",
        "read the source tree",
        "see the host's home directories",
        "see another system's state",
        "read host paths in mountinfo",
        "watch the host's files",
    ] {
        assert!(result(&got, attack).starts_with("DONE"), "{attack} did not work on the host, so the test could not see it work from a partition: {got:?}");
    }
    for line in ["inotify: failed", "mq_open: failed", "sigqueue: failed"] {
        assert!(same_user.contains(line), "exhausting the counts did not take them from the same user ({line:?}), so the test could not see it work from a partition:\n{same_user}");
    }
}
