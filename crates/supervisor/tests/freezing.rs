//! Temporal isolation, for real: every freezing backend stops a spinning partition, and the plan executor
//! runs partitions by turns (needs root). No timing thresholds here: timing lives in the benchmarks.
mod common;
use partita_system::HostNames;
use common::*;
use partita_supervisor::cgroup::{Layout, Limits, PartitionCgroup};
use partita_supervisor::executor::{Executor, ExecutorConfig, Members, Schedule, Window};
use partita_supervisor::freeze::{FreezeBackend, Freezer};
use partita_supervisor::launch::{launch, LaunchSpec};
use std::time::{Duration, Instant};

/// Starts `sh -c script` in the partition's cgroup; its pid.
fn shell(partition: &str, cg: &PartitionCgroup, script: &str) -> i32 {
    let spec = LaunchSpec {
        partition: partition.into(),
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![],
        cgroup_procs: cg.procs_files(),
        netns: None,
        environment: None,
        output: None,
        fifo_priority: None,
        confine: None,
        pass_fds: Vec::new(),
    };
    launch(&spec).unwrap().pid
}

fn spinner(partition: &str, cg: &PartitionCgroup) -> i32 {
    // A child spinner too: freezing must stop the whole tree.
    shell(partition, cg, "(while :; do :; done) & while :; do :; done")
}

fn wait_cpu_above(cg: &PartitionCgroup, d: Duration) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while cg.cpu_usage().unwrap() <= d {
        assert!(Instant::now() < deadline, "the spinner does not run");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn check_backend(backend: FreezeBackend) {
    let system = system_name("fz");
    let layout = Layout::detect().unwrap();
    {
        let cg = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("spin"), &Limits::default()).unwrap();
        let freezer = match Freezer::new(&cg, backend) {
            Ok(f) => f,
            Err(e) => panic!("backend {} unavailable on this machine: {e}", backend.name()),
        };
        let pid = spinner("spin", &cg);
        // Both the shell and its child exist before freezing.
        let deadline = Instant::now() + Duration::from_secs(10);
        while cg.pids().unwrap().len() < 2 {
            assert!(Instant::now() < deadline, "the spinner's child did not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        wait_cpu_above(&cg, Duration::from_millis(20));
        freezer.freeze().unwrap();
        freezer.wait_frozen(Duration::from_secs(5)).unwrap();
        let frozen_at = cg.cpu_usage().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let later = cg.cpu_usage().unwrap();
        assert_eq!(frozen_at, later, "{}: CPU time advanced while frozen", backend.name());
        assert!(freezer.is_frozen().unwrap());
        freezer.thaw().unwrap();
        wait_cpu_above(&cg, later);
        assert!(!freezer.is_frozen().unwrap());
        cg.kill_all().unwrap();
        wait_for(pid);
    }
    assert_nothing_left(&system, None);
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn cgroup_v2_freeze_stops_a_spinning_tree() {
    check_backend(FreezeBackend::CgroupV2);
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn v1_freezer_stops_a_spinning_tree() {
    check_backend(FreezeBackend::V1Freezer);
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn signals_stop_a_spinning_tree() {
    check_backend(FreezeBackend::Signals);
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_executor_runs_partitions_by_turns_and_leaves_them_frozen() {
    let system = system_name("ex");
    let layout = Layout::detect().unwrap();
    {
        let limits = Limits { cpus: Some("1".into()), ..Limits::default() };
        let a = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("a"), &limits).unwrap();
        let b = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("b"), &limits).unwrap();
        let fa = Freezer::new(&a, FreezeBackend::best_for(&a)).unwrap();
        let fb = Freezer::new(&b, FreezeBackend::best_for(&b)).unwrap();
        fa.freeze().unwrap();
        fb.freeze().unwrap();
        let pa = spinner("a", &a);
        let pb = spinner("b", &b);
        let schedule = Schedule::new(Duration::from_micros(1500), vec![
            Window { partition: 0, offset: Duration::ZERO, duration: Duration::from_micros(800) },
            Window { partition: 1, offset: Duration::from_micros(800), duration: Duration::from_micros(700) },
        ])
        .unwrap();
        let config = ExecutorConfig { cpu: Some(1), priority: Some(90), frames: Some(400), log_capacity: 1000, require_realtime: true };
        let log = Executor::start(schedule, vec![fa, fb], config).unwrap().join().unwrap();
        assert_eq!(log.windows_started, 800);
        assert_eq!(log.starts.len(), 800);
        assert!(log.realtime && log.pinned);
        assert_eq!(log.switch_errors, 0);
        // Windows alternate and their planned starts are one window apart.
        for pair in log.starts.iter().collect::<Vec<_>>().windows(2) {
            assert_ne!(pair[0].partition, pair[1].partition);
            let gap = pair[1].planned_ns - pair[0].planned_ns;
            assert!(gap == 800_000 || gap == 700_000, "planned gap {gap}");
        }
        // Both partitions ran, and both are frozen once the plan has stopped.
        assert!(a.cpu_usage().unwrap() > Duration::ZERO && b.cpu_usage().unwrap() > Duration::ZERO);
        let (ua, ub) = (a.cpu_usage().unwrap(), b.cpu_usage().unwrap());
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!((ua, ub), (a.cpu_usage().unwrap(), b.cpu_usage().unwrap()), "a partition ran after the plan stopped");
        a.kill_all().unwrap();
        b.kill_all().unwrap();
        wait_for(pa);
        wait_for(pb);
    }
    assert_nothing_left(&system, None);
}

/// A partition of many tasks: freezing wakes every one of them so that each stops itself. With a freeze lead
/// they do so before the next partition's window starts: the executor counts, at each window start, whether
/// the partition frozen ahead has stopped.
#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_freeze_lead_stops_a_partitions_many_tasks_before_the_next_window_starts() {
    let system = system_name("ahead");
    let layout = Layout::detect().unwrap();
    {
        let limits = Limits { cpus: Some("1".into()), ..Limits::default() };
        let a = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("a"), &limits).unwrap();
        let b = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("b"), &limits).unwrap();
        let fa = Freezer::new(&a, FreezeBackend::best_for(&a)).unwrap();
        let fb = Freezer::new(&b, FreezeBackend::best_for(&b)).unwrap();
        let pa = shell("a", &a, "for i in $(seq 60); do sleep 600 & done; wait");
        let deadline = Instant::now() + Duration::from_secs(10);
        while a.pids().unwrap().len() < 61 {
            assert!(Instant::now() < deadline, "the 60 sleepers did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        fa.freeze().unwrap();
        fb.freeze().unwrap();
        let pb = spinner("b", &b);
        let schedule = Schedule::new(Duration::from_micros(1500), vec![
            Window { partition: 0, offset: Duration::ZERO, duration: Duration::from_micros(800) },
            Window { partition: 1, offset: Duration::from_micros(800), duration: Duration::from_micros(700) },
        ])
        .unwrap()
        .with_freeze_ahead(Duration::from_micros(300))
        .unwrap();
        let config = ExecutorConfig { cpu: Some(1), priority: Some(90), frames: Some(400), log_capacity: 1000, require_realtime: true };
        let log = Executor::start(schedule, vec![fa, fb], config).unwrap().join().unwrap();
        assert_eq!(log.windows_started, 800);
        assert_eq!(log.switch_errors, 0);
        // Every window start follows the other partition's window, frozen ahead: each was judged once.
        assert_eq!(log.freezes_ahead_done + log.freezes_ahead_overran, 800, "done {} overran {}", log.freezes_ahead_done, log.freezes_ahead_overran);
        // The lead works: some of the time the 61 tasks had stopped when the next window started. How often is a
        // timing figure (739 and 764 of 800 when this was written, 443-495 on a later day of the same machine),
        // reported by `partita up` and the soak, not asserted here.
        assert!(log.freezes_ahead_done > 0, "done {} overran {}", log.freezes_ahead_done, log.freezes_ahead_overran);
        a.kill_all().unwrap();
        b.kill_all().unwrap();
        wait_for(pa);
        wait_for(pb);
    }
    assert_nothing_left(&system, None);
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_partition_started_while_frozen_runs_nothing_until_thawed() {
    let system = system_name("fs");
    let layout = Layout::detect().unwrap();
    let dir = tempdir("frozen-start");
    {
        let cg = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("late"), &Limits::default()).unwrap();
        let f = Freezer::new(&cg, FreezeBackend::best_for(&cg)).unwrap();
        f.freeze().unwrap();
        let marker = dir.0.join("ran");
        let spec = LaunchSpec {
            partition: "late".into(),
            program: "sh".into(),
            args: vec!["-c".into(), format!("echo ran > {}", marker.display())],
            env: vec![],
            cgroup_procs: cg.procs_files(),
            netns: None,
            environment: None,
            output: None,
            fifo_priority: None,
            confine: None,
            pass_fds: Vec::new(),
        };
        let pid = launch(&spec).unwrap().pid;
        // The process exists (in the cgroup) but has not executed the program.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cg.pids().unwrap().contains(&pid) {
            assert!(Instant::now() < deadline, "the new process never joined its cgroup");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(300));
        assert!(!marker.exists(), "the program ran while its partition was frozen");
        assert!(partita_supervisor::launch::try_wait(pid).unwrap().is_none());
        f.thaw().unwrap();
        let status = wait_for(pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status:#x}");
        assert!(marker.exists(), "the program did not run after the thaw");
    }
    assert_nothing_left(&system, None);
}

/// Two plans over the same two partitions: "normal" (a 800 µs, b 700 µs in 1500 µs) and "degraded" (a 1200 µs,
/// b 300 µs in 2000 µs, with a gap). Switches asked for at the end of a frame happen exactly at the old frame's
/// end, with the new plan's first window starting there; the window sequence before and after is the plans'
/// own (nothing lost, doubled or cut); a switch at once cuts the old frame where the executor woke; a held
/// partition gets no window.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_executor_switches_plans_at_a_frame_end_or_at_once_and_keeps_held_partitions_frozen() {
    let system = system_name("sw");
    let layout = Layout::detect().unwrap();
    let us = Duration::from_micros;
    {
        let limits = Limits { cpus: Some("1".into()), ..Limits::default() };
        let a = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("a"), &limits).unwrap();
        let b = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("b"), &limits).unwrap();
        let fa = Freezer::new(&a, FreezeBackend::best_for(&a)).unwrap();
        let fb = Freezer::new(&b, FreezeBackend::best_for(&b)).unwrap();
        fa.freeze().unwrap();
        fb.freeze().unwrap();
        let pa = spinner("a", &a);
        let pb = spinner("b", &b);
        let normal = Schedule::new(us(1500), vec![
            Window { partition: 0, offset: Duration::ZERO, duration: us(800) },
            Window { partition: 1, offset: us(800), duration: us(700) },
        ])
        .unwrap();
        let degraded = Schedule::new(us(2000), vec![
            Window { partition: 0, offset: Duration::ZERO, duration: us(1200) },
            Window { partition: 1, offset: us(1500), duration: us(300) },
        ])
        .unwrap();
        let config = ExecutorConfig { cpu: Some(1), priority: Some(90), frames: None, log_capacity: 100_000, require_realtime: true };
        let ex = Executor::start_plans(vec![normal, degraded], 0, vec![fa, fb], Members::default(), config).unwrap();
        let cell = ex.plans.clone();
        // 40 switches at frame ends, back and forth, each waited for.
        for k in 0..40 {
            let to = if k % 2 == 0 { 1 } else { 0 };
            let before = cell.switch_count();
            cell.request(to, false);
            let deadline = Instant::now() + Duration::from_secs(5);
            while cell.switch_count() == before {
                assert!(Instant::now() < deadline, "switch {k} to plan {to} did not happen");
                std::thread::sleep(Duration::from_millis(2));
            }
            assert_eq!(cell.current(), to);
            std::thread::sleep(Duration::from_millis(7));
        }
        // A switch at once, then b held: it gets no window while held.
        let before = cell.switch_count();
        let asked = partita_supervisor::clock::monotonic_ns();
        cell.request(1, true);
        while cell.switch_count() == before {
            std::thread::sleep(Duration::from_millis(1));
        }
        cell.hold(1, true);
        // Its window running when the hold came ends as planned; from its next boundary on it stays frozen.
        std::thread::sleep(Duration::from_millis(5));
        let held_from = (partita_supervisor::clock::monotonic_ns(), b.cpu_usage().unwrap());
        std::thread::sleep(Duration::from_millis(30));
        let held_to = (partita_supervisor::clock::monotonic_ns(), b.cpu_usage().unwrap());
        cell.hold(1, false);
        wait_cpu_above(&b, held_to.1);
        let log = ex.stop().unwrap();
        assert_eq!(log.switch_errors, 0);
        assert_eq!(log.switches.len(), 41, "{:?}", log.switches);
        let frames = [1_500_000u64, 2_000_000];
        for s in log.switches.iter().filter(|s| !s.now) {
            // At the end of the old plan's frame: the cut is the whole frame, and the first window of the new
            // plan (partition a at offset 0 in both) starts at the switch instant.
            assert_eq!(s.cut_offset_ns, frames[s.from]);
            assert_eq!(s.old_frame_ns, frames[s.from]);
            let first = log.starts.iter().find(|w| w.planned_ns == s.planned_ns).expect("a window starts at the switch");
            assert_eq!((first.plan, first.window, first.partition), (s.to, 0, 0));
            // The window before it is the old plan's last one (b), which started one old window earlier.
            let before = log.starts.iter().rev().find(|w| w.planned_ns < s.planned_ns).unwrap();
            assert_eq!((before.plan, before.partition), (s.from, 1));
            let last_window = if s.from == 0 { 700_000 } else { 500_000 };
            assert_eq!(s.planned_ns - before.planned_ns, last_window, "the old plan's last window was not whole");
        }
        // Between switches every window start follows the plan's own sequence: a, b, a, b … one window apart.
        for pair in log.starts.iter().collect::<Vec<_>>().windows(2) {
            let (x, y) = (pair[0], pair[1]);
            if x.plan == y.plan && log.switches.iter().all(|s| s.planned_ns != y.planned_ns) {
                assert_ne!(x.partition, y.partition, "{x:?} {y:?}");
                let gap = y.planned_ns - x.planned_ns;
                let expected = match (x.plan, x.partition) {
                    (0, 0) => 800_000,
                    (0, _) => 700_000,
                    (_, 0) => 1_500_000,
                    _ => 500_000,
                };
                assert_eq!(gap, expected, "{x:?} {y:?}");
            }
        }
        let now = log.switches.iter().find(|s| s.now).expect("the switch at once");
        assert_eq!((now.from, now.to), (0, 1));
        assert!(now.planned_ns >= asked && now.cut_offset_ns < frames[0], "{now:?}");
        // Held: b's windows came (the plan went on) but b used no CPU time in them; released, it ran again.
        assert!(log.starts.iter().any(|w| w.partition == 1 && w.planned_ns > held_from.0 && w.planned_ns < held_to.0), "b's windows are still planned");
        assert_eq!(held_from.1, held_to.1, "a held partition ran");
        a.kill_all().unwrap();
        b.kill_all().unwrap();
        wait_for(pa);
        wait_for(pb);
    }
    assert_nothing_left(&system, None);
}
