//! `partita check` prints every bridge, veth, namespace and cgroup of a system; `partita up` of the same file
//! creates exactly those and nothing else of the system (root).
use partita_supervisor::cgroup::Layout;
use partita_system::HostNames;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const HEADING: &str = "on the host (what `partita up` creates, by name)";

fn partita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partita"))
}

/// The paper's system under a name of this test's own.
fn system_file(name: &str) -> PathBuf {
    let example = format!("{}/../../examples/video-surveillance.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(example).unwrap().replacen("name = \"video-surveillance\"", &format!("name = {name:?}"), 1);
    assert!(text.contains(name));
    let p = std::env::temp_dir().join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// The objects `check` lists under its host-objects heading, by kind.
fn printed(check_output: &str) -> [BTreeSet<String>; 4] {
    let section = check_output.split(HEADING).nth(1).expect("check prints the host objects");
    let kind = |k: &str| -> BTreeSet<String> {
        let line = section.lines().find(|l| l.trim_start().starts_with(k)).unwrap_or_else(|| panic!("no {k} line:\n{section}"));
        line.split_whitespace().skip(1).map(String::from).collect()
    };
    [kind("bridges"), kind("veths"), kind("namespaces"), kind("cgroups")]
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

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn up_creates_exactly_the_host_objects_check_printed() {
    let name = format!("ho{}", std::process::id());
    let file = system_file(&name);
    let check = partita().arg("check").arg(&file).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let [bridges, veths, namespaces, cgroups] = printed(&String::from_utf8_lossy(&check.stdout));
    assert_eq!((bridges.len(), veths.len(), namespaces.len(), cgroups.len()), (2, 4, 3, 3), "the paper's system: two networks, three members");

    let mut up = partita().args(["up", file.to_str().unwrap(), "--duration", "8"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let state = Path::new("/run/partita").join(&name).join("state.json");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !state.exists() && Instant::now() < deadline && up.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let found_links = links_with_prefix(&HostNames::new(&name).link_prefix());
    let found_netns = netns_with_prefix(&format!("partita-{name}-"));
    let layout = Layout::detect().unwrap();
    let per_hierarchy: Vec<(PathBuf, BTreeSet<String>)> = layout.roots().into_iter().map(|r| { let c = cgroups_in(&r, &name); (r, c) }).collect();
    let up_ok = up.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(state.parent().unwrap().exists(), "the system never came up: {}", String::from_utf8_lossy(&up_ok.stderr));
    assert!(up_ok.status.success(), "{}", String::from_utf8_lossy(&up_ok.stderr));
    let _ = std::fs::remove_dir_all(state.parent().unwrap());
    // The recorder partition's state directory (its ring) stays across runs by design: this test's goes.
    let _ = std::fs::remove_dir_all(std::path::Path::new("/var/lib/partita").join(&name));

    let printed_links: BTreeSet<String> = bridges.union(&veths).cloned().collect();
    assert_eq!(found_links, printed_links, "interfaces up created vs. what check printed");
    assert_eq!(found_netns, namespaces, "namespaces up created vs. what check printed");
    let mut used = 0;
    for (root, found) in &per_hierarchy {
        // partita uses some hierarchies (memory, pids, cpuset, cpuacct, freezer, the v2 one), not all
        if !found.is_empty() {
            used += 1;
            assert_eq!(found, &cgroups, "cgroups in {} vs. what check printed", root.display());
        }
    }
    assert!(used >= 1, "no cgroup of the system was found in any hierarchy");
    // and everything went away with the system
    assert!(links_with_prefix(&HostNames::new(&name).link_prefix()).is_empty());
    assert!(netns_with_prefix(&format!("partita-{name}-")).is_empty());
    assert!(layout.roots().iter().all(|r| cgroups_in(r, &name).is_empty()));
}
