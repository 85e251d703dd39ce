//! `partita check` prints every bridge, veth, tap, namespace and cgroup of a system; `partita up` of the same
//! file creates exactly those and nothing else of the system (root). For the paper's system, and for its
//! variants with the recorder as a VM partition (whose monitor must get frames from the guest) and as a
//! partition without a network (reached through ports).
use partita_supervisor::cgroup::Layout;
use partita_system::HostNames;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{spawn_up, stop_up_when};
use std::time::{Duration, Instant};

const HEADING: &str = "on the host (what `partita up` creates, by name)";

fn partita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partita"))
}

/// An example system under a name of this test's own.
fn system_file(example: &str, name: &str) -> PathBuf {
    let example = format!("{}/../../examples/{example}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&example).unwrap();
    let original = text.lines().find(|l| l.starts_with("name = ")).unwrap().to_string();
    let text = text.replacen(&original, &format!("name = {name:?}"), 1);
    // The monitor prints the frame it checked once its requests are done: 50 of them (not the default 1100), as
    // soon as the frames come, even behind a guest under TCG.
    let monitor = r#"command = ["partita", "app", "monitor"]"#;
    assert!(text.contains(monitor), "{example}: the monitor's command changed");
    let text = text.replacen(monitor, r#"command = ["partita", "app", "monitor", "--warmup", "10", "--count", "40"]"#, 1);
    assert!(text.contains(name));
    let p = std::env::temp_dir().join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// The objects `check` lists under its host-objects heading, by kind.
fn printed(check_output: &str) -> [BTreeSet<String>; 5] {
    let section = check_output.split(HEADING).nth(1).expect("check prints the host objects");
    let kind = |k: &str| -> BTreeSet<String> {
        let line = section.lines().find(|l| l.trim_start().starts_with(k)).unwrap_or_else(|| panic!("no {k} line:\n{section}"));
        line.split_whitespace().skip(1).map(String::from).collect()
    };
    let taps = if section.contains("\n  taps ") { kind("taps") } else { BTreeSet::new() };
    [kind("bridges"), kind("veths"), taps, kind("namespaces"), kind("cgroups")]
}

/// The members `check` lists with a disk limit, and those it says are demoted past their windows (from its
/// time-partitioning section).
fn limited(check_output: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let section = check_output.split("time partitioning against kernel work").nth(1).and_then(|s| s.split(HEADING).next()).unwrap_or("");
    let members = |pred: &dyn Fn(&str) -> bool| -> BTreeSet<String> {
        section.lines().filter(|l| l.contains(" overrun past ") && pred(l)).filter_map(|l| l.split_whitespace().next()).map(String::from).collect()
    };
    let disk = members(&|l| !l.trim_end().ends_with("disk reads unlimited, writes unlimited"));
    let demoted = members(&|l| l.contains("; demoted past its window;"));
    (disk, demoted)
}

fn netns_with_prefix(prefix: &str) -> BTreeSet<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.split_whitespace().next()).filter(|n| n.starts_with(prefix)).map(String::from).collect()
}

fn links_with_prefix(prefix: &str) -> BTreeSet<String> {
    let out = Command::new("ip").args(["-o", "link", "show"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Cgroup directories below `partita/<system>` of one hierarchy, relative to its root.
fn cgroups_in(root: &Path, system: &str) -> BTreeSet<String> {
    let dir = root.join("partita").join(system);
    let Ok(entries) = std::fs::read_dir(&dir) else { return BTreeSet::new() };
    entries.flatten().filter(|e| e.path().is_dir()).map(|e| format!("partita/{system}/{}", e.file_name().to_string_lossy())).collect()
}

/// What the monitor prints of a frame whose content it checked.
const FRAME_CHECKED: &str = "content matches the test pattern";

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn up_creates_exactly_the_host_objects_check_printed() {
    let name = format!("ho{}", std::process::id());
    let (monitor_log, up_log) = check_then_up("video-surveillance", &name, 8, (4, 0));
    assert!(monitor_log.contains(FRAME_CHECKED), "{monitor_log}\n`up` said:\n{up_log}");
}

/// The recorder as a VM partition (TCG here, or KVM where a stock guest boots under it): its V-NIC is a
/// tap, and the monitor gets frames whose content is checked from the recorder in the guest.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn with_the_recorder_as_a_vm_up_creates_what_check_printed_and_the_monitor_gets_frames() {
    let name = format!("hv{}", std::process::id());
    let (monitor_log, up_log) = check_then_up("video-surveillance-vm", &name, 30, (3, 1));
    assert!(monitor_log.contains(FRAME_CHECKED), "the monitor got no checked frame from the guest:\n{monitor_log}\n`up` said:\n{up_log}");
}

/// The recorder as a partition without a network (examples/video-surveillance-ports.toml): no V-NIC of its own,
/// and the monitor gets checked frames through the routing partition's port routes and two queuing channels.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn with_the_recorder_behind_ports_up_creates_what_check_printed_and_the_monitor_gets_frames() {
    let name = format!("hp{}", std::process::id());
    let (monitor_log, up_log) = check_then_up("video-surveillance-ports", &name, 8, (3, 0));
    assert!(monitor_log.contains(FRAME_CHECKED), "the monitor got no checked frame through the ports:\n{monitor_log}\n`up` said:\n{up_log}");
}

/// Runs `check` and then `up` for `seconds` on `example` renamed `name`; compares what each says and
/// finds; returns the monitor's log and what `up` wrote to its standard error.
fn check_then_up(example: &str, name: &str, seconds: u32, (n_veths, n_taps): (usize, usize)) -> (String, String) {
    let name = name.to_string();
    let file = system_file(example, &name);
    let check = partita().arg("check").arg(&file).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let check_text = String::from_utf8_lossy(&check.stdout).to_string();
    let [bridges, veths, taps, namespaces, cgroups] = printed(&check_text);
    let (disk_limited, demoted) = limited(&check_text);
    assert_eq!((bridges.len(), veths.len(), taps.len(), namespaces.len(), cgroups.len()), (2, n_veths, n_taps, 3, 3), "two networks, three members");

    let up_err = file.with_extension("up.err");
    let mut up = spawn_up(&file, seconds, &up_err);
    let state = Path::new("/run/partita").join(&name).join("state.json");
    // A VM partition's first `up` on a machine may build the guest image and probe KVM first.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !state.exists() && Instant::now() < deadline && up.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let found_links = links_with_prefix(&HostNames::new(&name).link_prefix());
    let found_netns = netns_with_prefix(&format!("partita-{name}-"));
    let layout = Layout::detect().unwrap();
    let per_hierarchy: Vec<(PathBuf, BTreeSet<String>)> = layout.roots().into_iter().map(|r| { let c = cgroups_in(&r, &name); (r, c) }).collect();
    // Up to `seconds`; once the monitor has checked a frame the system is stopped with SIGTERM, which tears it
    // down as the end of --duration does.
    let monitor_log = || std::fs::read_to_string(state.parent().unwrap().join("monitor.log")).unwrap_or_default();
    let (status, up_stderr) = stop_up_when(up, &up_err, Duration::from_secs(u64::from(seconds) + 10), || monitor_log().contains(FRAME_CHECKED));
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&up_err);
    assert!(state.parent().unwrap().exists(), "the system never came up: {up_stderr}");
    assert!(status.success(), "{up_stderr}");
    let monitor_log = monitor_log();
    let _ = std::fs::remove_dir_all(state.parent().unwrap());
    // The recorder partition's state directory (its ring) stays across runs by design: this test's goes.
    let _ = std::fs::remove_dir_all(std::path::Path::new("/var/lib/partita").join(&name));

    let printed_links: BTreeSet<String> = bridges.iter().chain(&veths).chain(&taps).cloned().collect();
    assert_eq!(found_links, printed_links, "interfaces up created vs. what check printed");
    assert_eq!(found_netns, namespaces, "namespaces up created vs. what check printed");
    let mut used = 0;
    for (root, found) in &per_hierarchy {
        // partita uses some hierarchies (memory, pids, cpuset, cpuacct, freezer, the v2 one), not all
        if !found.is_empty() {
            used += 1;
            // The blkio and (where it is a hierarchy of its own) cpu groups are only for the members `check`
            // says have a disk limit or are demoted past their windows.
            let only: Option<&BTreeSet<String>> = match root.file_name().and_then(|n| n.to_str()) {
                Some("blkio") => Some(&disk_limited),
                Some("cpu") => Some(&demoted),
                _ => None,
            };
            let expected: BTreeSet<String> = match only {
                Some(members) => cgroups.iter().filter(|c| c.rsplit('/').next().is_some_and(|m| members.contains(m))).cloned().collect(),
                None => cgroups.clone(),
            };
            assert_eq!(found, &expected, "cgroups in {} vs. what check printed", root.display());
        }
    }
    assert!(used >= 1, "no cgroup of the system was found in any hierarchy");
    // and everything went away with the system
    assert!(links_with_prefix(&HostNames::new(&name).link_prefix()).is_empty());
    assert!(netns_with_prefix(&format!("partita-{name}-")).is_empty());
    assert!(layout.roots().iter().all(|r| cgroups_in(r, &name).is_empty()));
    (monitor_log, up_stderr)
}
