//! Spatial isolation, for real: namespaces, cgroups and limits on this machine (needs root).
mod common;
use partita_env::PartitionEnv;
use partita_system::HostNames;
use common::*;
use partita_supervisor::cgroup::{Layout, Limits, PartitionCgroup};
use partita_supervisor::health::{Action, EventLog, ExitKind, HealthMonitor};
use partita_supervisor::launch::{launch, LaunchSpec};
use partita_supervisor::vnet::NetNamespace;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn spec(system: &str, partition: &str, cg: &PartitionCgroup, netns: Option<&NetNamespace>, program: &str, args: &[&str]) -> LaunchSpec {
    LaunchSpec {
        partition: partition.into(),
        program: program.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: vec![],
        cgroup_procs: cg.procs_files(),
        netns: netns.map(|n| n.path()),
        environment: Some(PartitionEnv {
            partition: partition.into(),
            module: system.into(),
            domain: 3,
            external_domain: None,
            uplink_domain: None,
            router_file: None,
            cyclonedds_uri: "file:///nonexistent.xml".into(),
            fastdds_profile: None,
            state_dir: None,
            ports: Vec::new(),
        }),
        output: None,
        fifo_priority: None,
        confine: None,
        pass_fds: Vec::new(),
    }
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_partition_sees_only_its_own_processes_network_and_name() {
    let system = system_name("ps");
    let layout = Layout::detect().unwrap();
    let dir = tempdir("ps");
    {
        let cg_a = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("alpha"), &Limits::default()).unwrap();
        let cg_b = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("beta"), &Limits::default()).unwrap();
        let ns_a = NetNamespace::create(&format!("partita-{system}-alpha")).unwrap();
        let ns_b = NetNamespace::create(&format!("partita-{system}-beta")).unwrap();
        let a = launch(&spec(&system, "alpha", &cg_a, Some(&ns_a), "sleep", &["300"])).unwrap();
        let out = dir.0.join("beta.txt");
        let script = format!(
            "{{ echo pid=$$; echo host=$(hostname); echo part=$PARTITA_PARTITION dom=$PARTITA_DOMAIN; \
             for p in /proc/[0-9]*; do echo comm=$(cat $p/comm); done; cat /proc/net/dev; }} > {}",
            out.display()
        );
        let b = launch(&spec(&system, "beta", &cg_b, Some(&ns_b), "sh", &["-c", &script])).unwrap();
        let status = wait_for(b.pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "beta's script failed: {status:#x}");
        let text = std::fs::read_to_string(&out).unwrap();
        // alpha's sleep exists, in alpha's cgroup, but beta cannot see it.
        assert!(cg_a.pids().unwrap().contains(&a.pid), "alpha's root is not in its cgroup");
        assert!(std::fs::read_to_string(format!("/proc/{}/comm", a.pid)).unwrap().starts_with("sleep"));
        assert!(!text.contains("comm=sleep"), "beta sees alpha's process:\n{text}");
        assert!(text.contains("pid=1\n"), "beta's shell is not PID 1 of its namespace:\n{text}");
        assert!(text.contains("host=beta\n"), "host name not set:\n{text}");
        assert!(text.contains("part=beta dom=3\n"), "environment not passed:\n{text}");
        // Only loopback in beta's network namespace (no V-NIC was given to it).
        let ifaces: Vec<&str> = text.lines().filter_map(|l| l.split_once(':')).map(|(i, _)| i.trim()).filter(|i| !i.contains('|') && !i.starts_with("comm=") && !i.starts_with("pid=")).collect();
        assert_eq!(ifaces, vec!["lo"], "beta's namespace has other interfaces:\n{text}");
        cg_a.kill_all().unwrap();
        wait_for(a.pid);
    }
    assert_nothing_left(&system, None);
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_memory_limit_holds_and_the_oom_kill_is_detected() {
    let system = system_name("oom");
    let layout = Layout::detect().unwrap();
    {
        let limits = Limits { memory_bytes: Some(32 << 20), pids_max: Some(16), ..Limits::default() };
        let cg = Arc::new(PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("hog"), &limits).unwrap());
        let log = EventLog::new(None);
        let mut monitor = HealthMonitor::new(log.clone());
        let s = spec(&system, "hog", &cg, None, "dd", &["if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"]);
        monitor.start("hog", Action::Stop, cg.clone(), Box::new(move || launch(&s))).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while monitor.poll() == 0 {
            assert!(Instant::now() < deadline, "the memory hog was not stopped");
            std::thread::sleep(Duration::from_millis(10));
        }
        let events = log.events();
        let exit = events.iter().find(|e| e.event == "exit").expect("exit event");
        assert_eq!(exit.exit, Some(ExitKind::OomKilled), "events: {events:?}");
        assert!(cg.oom_kills().unwrap() >= 1);
        assert!(events.iter().any(|e| e.event == "stopped"));
    }
    assert_nothing_left(&system, None);
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_pids_limit_holds() {
    let system = system_name("pid");
    let layout = Layout::detect().unwrap();
    let dir = tempdir("pids");
    {
        let limits = Limits { pids_max: Some(4), ..Limits::default() };
        let cg = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("forker"), &limits).unwrap();
        let marker = dir.0.join("done");
        assert_eq!(cg.pids_limit_hits().unwrap(), 0);
        // Tries to start 10 sleepers; the shell gives up when a fork is refused.
        let script = format!("for i in 1 2 3 4 5 6 7 8 9 10; do sleep 30 & done; echo all > {}", marker.display());
        let p = launch(&spec(&system, "forker", &cg, None, "sh", &["-c", &script])).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while cg.pids_limit_hits().unwrap() == 0 && !marker.exists() {
            assert!(Instant::now() < deadline, "the script neither forked 10 times nor was refused");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!marker.exists(), "10 sleepers started in a partition limited to 4 processes");
        assert!(cg.pids_limit_hits().unwrap() >= 1);
        assert!(cg.pids().unwrap().len() <= 4);
        cg.kill_all().unwrap();
        wait_for(p.pid);
    }
    assert_nothing_left(&system, None);
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_failing_partition_is_restarted_up_to_its_limit() {
    let system = system_name("rs");
    let layout = Layout::detect().unwrap();
    {
        let cg = Arc::new(PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("crasher"), &Limits::default()).unwrap());
        let log = EventLog::new(None);
        let mut monitor = HealthMonitor::new(log.clone());
        let s = spec(&system, "crasher", &cg, None, "sh", &["-c", "exit 3"]);
        let action = Action::Restart { max: 2, within: Duration::from_secs(60), backoff: Duration::from_millis(10) };
        monitor.start("crasher", action, cg.clone(), Box::new(move || launch(&s))).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while monitor.any_running() {
            monitor.poll();
            assert!(Instant::now() < deadline, "restarts did not stop");
            std::thread::sleep(Duration::from_millis(5));
        }
        let kinds: Vec<&str> = log.events().iter().map(|e| e.event).collect();
        assert_eq!(kinds, vec!["start", "exit", "restart_scheduled", "restart", "exit", "restart_scheduled", "restart", "exit", "restart_limit"]);
        // each restart waited out its back-off, twice as long as the one before (10 ms, then 20 ms)
        let at = |k: &str, n: usize| log.events().iter().filter(|e| e.event == k).nth(n).map(|e| e.monotonic_ns).unwrap();
        assert!(at("restart", 0) - at("exit", 0) >= 10_000_000);
        assert!(at("restart", 1) - at("exit", 1) >= 20_000_000);
        let exits: Vec<_> = log.events().iter().filter_map(|e| e.exit).collect();
        assert!(exits.iter().all(|e| *e == ExitKind::Exited { code: 3 }), "{exits:?}");
    }
    assert_nothing_left(&system, None);
}
