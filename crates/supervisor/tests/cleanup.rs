//! `partita down` after a crashed supervisor: everything partita made is found by name and removed (needs root).
mod common;
use partita_system::HostNames;
use common::*;
use partita_supervisor::cgroup::{Layout, Limits, PartitionCgroup};
use partita_supervisor::cleanup;
use partita_supervisor::freeze::{FreezeBackend, Freezer};
use partita_supervisor::launch::{launch, LaunchSpec};
use partita_supervisor::vnet::{Bridge, NetNamespace, VirtualNic};
use std::net::Ipv4Addr;

/// Both tests run `cleanup::down`, which removes every system's leftovers: one running while the other has
/// made its own would take them from under it.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn leftovers_of_a_crashed_supervisor_are_removed() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let system = system_name("cl");
    let names = HostNames::new(&system);
    let stem = names.link_prefix();
    let layout = Layout::detect().unwrap();
    let cg = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("orphan"), &Limits { memory_bytes: Some(64 << 20), ..Limits::default() }).unwrap();
    let ns = NetNamespace::create(&format!("partita-{system}-orphan")).unwrap();
    let br = Bridge::create(&names.module_bridge(0)).unwrap();
    let nic = VirtualNic::create(&names.vnic(0, 0), "vnic0", &ns, &br, Ipv4Addr::new(198, 18, 202, 2), 24).unwrap();
    let spec = LaunchSpec {
        partition: "orphan".into(),
        program: "sleep".into(),
        args: vec!["300".into()],
        env: vec![],
        cgroup_procs: cg.procs_files(),
        netns: Some(ns.path()),
        environment: None,
        output: None,
        fifo_priority: None,
        confine: None,
        pass_fds: Vec::new(),
    };
    let pid = launch(&spec).unwrap().pid;
    // Frozen, as a partition outside its window would be when the supervisor dies.
    let f = Freezer::new(&cg, FreezeBackend::best_for(&cg)).unwrap();
    f.freeze().unwrap();
    // A partition's state directory mounted from its image, with a file in it.
    let state = std::path::Path::new(partita_system::confinement::STATE_ROOT).join(&system).join("orphan");
    let image = partita_supervisor::state_image::StateImage::mount(&state, partita_system::StateQuota { bytes: 8 << 20, inodes: 128 }, 1_999_000_000).unwrap();
    std::fs::write(state.join("kept"), b"x").unwrap();
    let image_path = image.image().to_path_buf();
    // The supervisor "crashes": nothing is torn down by its owners.
    std::mem::forget((cg, ns, br, nic, f, image));

    let before = cleanup::find(Some(&system)).unwrap();
    assert_eq!(before.netns, vec![format!("partita-{system}-orphan")]);
    assert!(!before.cgroups.is_empty());
    assert_eq!(cleanup::links_with_prefix(&stem).unwrap().len(), 2);

    assert!(partita_supervisor::state_image::is_mount_point(&state));
    let down = cleanup::down(false).unwrap();
    assert!(down.removed.netns.contains(&format!("partita-{system}-orphan")), "{down:?}");
    assert_eq!(down.state_mounts, vec![state.clone()], "the state directory left mounted was unmounted");
    assert!(!partita_supervisor::state_image::is_mount_point(&state));
    // Its image is kept, with what the partition wrote: mounted again, the file is there.
    assert!(image_path.is_file());
    let again = partita_supervisor::state_image::StateImage::mount(&state, partita_system::StateQuota { bytes: 8 << 20, inodes: 128 }, 1_999_000_000).unwrap();
    assert_eq!(std::fs::read(state.join("kept")).unwrap(), b"x");
    std::fs::remove_file(state.join("kept")).unwrap();
    drop(again);
    assert!(!image_path.exists(), "an image left empty goes");
    let _ = std::fs::remove_dir_all(state.parent().unwrap());
    let status = wait_for(pid);
    assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL, "status {status:#x}");
    assert_nothing_left(&system, Some(&stem));
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn down_leaves_a_system_that_is_up_and_a_users_interfaces_alone() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let name = system_name("live");
    let root = tempdir("state");
    let sys = system(&format!(
        "[system]\nname = \"{name}\"\n[[module]]\nname = \"m\"\ncpus = [1]\n[[module.partition]]\nname = \"p\"\ncommand = [\"sleep\", \"30\"]\n\
         [[module.plan]]\ncpu = 1\nmajor_frame = \"2ms\"\nwindow = [{{ partition = \"p\", start = \"0us\", duration = \"1ms\" }}]\n"
    ));
    // An interface of the user's whose name merely starts like partita's.
    let user_link = "ptp-user0";
    partita_supervisor::command::ip(&["link", "add", user_link, "type", "bridge"]).unwrap();
    let sup = partita_supervisor::Supervisor::up(&sys, &options(&root)).unwrap();
    // A second `up` of the same system is refused while it is up.
    let again = partita_supervisor::Supervisor::up(&sys, &options(&tempdir("again"))).err().expect("a second up is refused");
    assert!(again.to_string().contains("is up"), "{again}");
    let down = cleanup::down(false).unwrap();
    assert!(down.live.iter().any(|o| o.system == name), "the live system is reported as left alone: {down:?}");
    let mine = cleanup::find(Some(&name)).unwrap();
    assert_eq!(mine.netns, sys.host_objects().namespaces, "down removed a live system's namespace");
    assert!(!mine.cgroups.is_empty(), "down removed a live system's cgroups");
    assert!(!down.removed.links.iter().any(|l| l == user_link), "down removed the user's {user_link}");
    let links = cleanup::links_with_prefix("pt").unwrap();
    assert!(links.iter().any(|l| l == user_link));
    for o in sys.host_objects().bridges.iter().chain(&sys.host_objects().veths) {
        assert!(links.contains(o), "down removed {o} of the live system");
    }
    sup.run(Some(std::time::Duration::from_millis(100)), None).unwrap();
    partita_supervisor::command::ip(&["link", "del", user_link]).unwrap();
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}
