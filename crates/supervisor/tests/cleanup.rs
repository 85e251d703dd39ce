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

#[test]
fn leftovers_of_a_crashed_supervisor_are_removed() {
    let system = system_name("cl");
    let stem = link_stem();
    let layout = Layout::detect().unwrap();
    let cg = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("orphan"), &Limits { memory_bytes: Some(64 << 20), ..Limits::default() }).unwrap();
    let ns = NetNamespace::create(&format!("partita-{system}-orphan")).unwrap();
    let br = Bridge::create(&format!("{stem}m")).unwrap();
    let nic = VirtualNic::create(&format!("{stem}a"), "vnic0", &ns, &br, Ipv4Addr::new(198, 18, 202, 2), 24).unwrap();
    let spec = LaunchSpec {
        partition: "orphan".into(),
        module: system.clone(),
        domain: 0,
        program: "sleep".into(),
        args: vec!["300".into()],
        env: vec![],
        cgroup_procs: cg.procs_files(),
        netns: Some(ns.path()),
        cyclonedds_uri: None,
        output: None,
    };
    let pid = launch(&spec).unwrap().pid;
    // Frozen, as a partition outside its window would be when the supervisor dies.
    let f = Freezer::new(&cg, FreezeBackend::best_for(&cg)).unwrap();
    f.freeze().unwrap();
    // The supervisor "crashes": nothing is torn down by its owners.
    std::mem::forget((cg, ns, br, nic, f));

    let before = cleanup::find(Some(&system)).unwrap();
    assert_eq!(before.netns, vec![format!("partita-{system}-orphan")]);
    assert!(!before.cgroups.is_empty());
    assert_eq!(cleanup::links_with_prefix(&stem).unwrap().len(), 2);

    let removed = cleanup::remove_all().unwrap();
    assert!(removed.netns.contains(&format!("partita-{system}-orphan")));
    let status = wait_for(pid);
    assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL, "status {status:#x}");
    assert_nothing_left(&system, Some(&stem));
    assert!(cleanup::find(None).unwrap().is_empty(), "partita leftovers remain: {:?}", cleanup::find(None).unwrap());
}
