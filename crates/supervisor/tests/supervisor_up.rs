//! A whole system built by `Supervisor::up`, run, and torn down; and a build that fails half-way leaves
//! nothing behind (needs root).
mod common;
use common::*;
use partita_supervisor::Supervisor;
use std::sync::{RwLock, RwLockReadGuard};
use std::time::Duration;

/// `/dev/cpu_dma_latency` is the machine's: the test that watches the bound taken and released runs alone
/// (write), as does the one that times a stop; the other tests of this file, which hold the bound while their
/// systems are up, together (read).
static LATENCY_BOUND: RwLock<()> = RwLock::new(());

fn bound_shared() -> RwLockReadGuard<'static, ()> {
    LATENCY_BOUND.read().unwrap_or_else(|e| e.into_inner())
}

/// Paper 001's shape: a routing I/O partition and a recorder in a 1500 µs frame on CPU 1, and a native node.
fn reference_system(name: &str, recorder_command: &str) -> String {
    format!(
        r#"
[system]
name = "{name}"

[[module]]
name = "node"
cpus = [1]

[[module.partition]]
name = "routing"
command = ["sh", "-c", "while :; do :; done"]
io = true
pids = 32
health = {{ action = "restart", max_restarts = 3, window = "10s" }}

[[module.partition]]
name = "recorder"
command = {recorder_command}
pids = 32
health = {{ action = "restart", max_restarts = 3, window = "10s" }}

[[module.plan]]
cpu = 1
major_frame = "1500us"
window = [{{ partition = "routing", start = "0us", duration = "800us" }}, {{ partition = "recorder", start = "800us", duration = "700us" }}]

[[node]]
name = "monitor"
command = ["sleep", "300"]
cpus = [0]
"#
    )
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_reference_system_comes_up_runs_its_plan_and_goes_away() {
    let _bound = bound_shared();
    let name = system_name("up");
    let root = tempdir("state");
    let sys = system(&reference_system(&name, r#"["sh", "-c", "while :; do :; done"]"#));
    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    let state_dir = sup.state_dir().to_path_buf();
    let state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(state_dir.join("state.json")).unwrap()).unwrap();
    assert_eq!(state["partitions"].as_array().unwrap().len(), 3);
    let xml = std::fs::read_to_string(state_dir.join("routing.xml")).unwrap();
    assert!(xml.contains("vnic0") && xml.contains("vnic1"), "the I/O partition's configuration lacks a domain:\n{xml}");
    let xml = std::fs::read_to_string(state_dir.join("recorder.xml")).unwrap();
    assert!(!xml.contains("vnic1"), "a non-I/O partition is configured on the inter-module network:\n{xml}");
    let events = sup.events().clone();
    let logs = sup.run(Some(Duration::from_millis(600)), None).unwrap();
    assert_eq!(logs.len(), 1, "one plan executor for the one planned module");
    assert!(logs[0].windows_started > 10, "the plan barely ran: {}", logs[0].windows_started);
    assert_eq!(logs[0].switch_errors, 0);
    let starts = events.events().iter().filter(|e| e.event == "start").count();
    assert_eq!(starts, 3);
    assert!(!events.events().iter().any(|e| e.event == "exit"), "a partition ended during the run: {:?}", events.events());
    assert!(!state_dir.join("state.json").exists(), "the state file says the system is still up");
    let log = std::fs::read_to_string(state_dir.join("events.jsonl")).unwrap();
    assert_eq!(log.lines().filter(|l| l.contains("\"event\":\"start\"")).count(), 3, "{log}");
    let xml = std::fs::read_to_string(state_dir.join("monitor.xml")).unwrap();
    assert!(xml.contains("vnic1") && !xml.contains("vnic0"), "a native node is on the inter-module network only:\n{xml}");
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_io_partition_alone_gets_its_router_file_in_its_view_with_a_side_per_v_nic() {
    let _bound = bound_shared();
    let name = system_name("rf");
    let root = tempdir("state");
    // Shell builtins only: a confined partition sees no program its file does not bind.
    let show = |what: &str| format!(r#"["sh", "-c", "echo file=${{PARTITA_ROUTER_FILE:-none}}; for f in /run/partita/*; do echo seen $f; done; {what} while :; do :; done"]"#);
    let text = reference_system(&name, &show(""))
        .replacen(r#"command = ["sh", "-c", "while :; do :; done"]"#, &format!("command = {}", show(r#"while IFS= read -r l; do echo \"$l\"; done < \"$PARTITA_ROUTER_FILE\";"#)), 1);
    let sys = system(&text);
    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    let state_dir = sup.state_dir().to_path_buf();
    let written = std::fs::read_to_string(state_dir.join("routing.router.toml")).unwrap();
    assert!(!state_dir.join("recorder.router.toml").exists(), "a partition that is not the I/O partition got a router file");
    let logs = sup.run(Some(Duration::from_millis(600)), None).unwrap();
    assert_eq!(logs[0].switch_errors, 0);
    let routing = std::fs::read_to_string(state_dir.join("routing.log")).unwrap();
    let recorder = std::fs::read_to_string(state_dir.join("recorder.log")).unwrap();
    // The routing partition reads, in its own view, what the supervisor wrote: every topic both ways between
    // a side on each V-NIC.
    assert!(routing.contains("file=/run/partita/router.toml\n") && routing.contains("seen /run/partita/router.toml\n"), "{routing}");
    assert!(routing.contains(&written[written.find("name = ").unwrap()..]), "the partition sees another file than the supervisor wrote:\n{routing}\n{written}");
    for side in ["name = \"module\"", "interface = \"vnic0\"", "name = \"network\"", "interface = \"vnic1\"", "both_ways = true"] {
        assert!(written.contains(side), "{side} missing from\n{written}");
    }
    assert!(recorder.contains("file=none\n") && recorder.contains("seen /run/partita/dds.xml\n") && !recorder.contains("router.toml"), "{recorder}");
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

/// A system model built around validation (its fields are public) that breaks what validation guarantees is
/// refused with the member and the broken rule, and nothing is left.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_model_that_breaks_what_validation_guarantees_is_refused_and_leaves_nothing() {
    let _bound = bound_shared();
    let name = system_name("mb");
    let root = tempdir("state");
    let mut sys = system(&reference_system(&name, r#"["sh", "-c", "while :; do :; done"]"#));
    sys.modules[0].partitions[1].tree.command.clear();
    match Supervisor::up(&sys, &options(&root)) {
        Err(partita_supervisor::SupervisorError::Model { member, broken }) => assert_eq!((member.as_str(), broken), ("recorder", "its command is empty")),
        other => panic!("an empty command was not refused as a broken model: {:?}", other.err()),
    }
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_build_failing_half_way_leaves_nothing() {
    let _bound = bound_shared();
    let name = system_name("hf");
    let root = tempdir("state");
    // `partita check` refuses a missing program; read the file as on a machine that has it, so that the
    // supervisor meets the failure half-way through the build (after the bridges, the routing partition's
    // namespace, cgroup and V-NICs).
    let text = reference_system(&name, r#"["/nonexistent/partita-test-program"]"#);
    let sys = partita_system::parse(&text, "test.toml", &partita_system::Host::with_cpus(2)).unwrap();
    let r = Supervisor::up(&sys, &options(&root));
    assert!(r.is_err(), "a partition with a missing program was started");
    assert!(!root.0.join(&name).exists(), "a refused up left its state directory");
    assert!(partita_supervisor::registry::owners().iter().all(|(_, o)| o.system != name), "a refused up left its record");
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_stop_takes_effect_at_once_whatever_the_frame() {
    let _alone = LATENCY_BOUND.write().unwrap_or_else(|e| e.into_inner());
    let name = system_name("long");
    let root = tempdir("state");
    let sys = system(&format!(
        "[system]\nname = \"{name}\"\n[[module]]\nname = \"m\"\ncpus = [1]\n[[module.partition]]\nname = \"p\"\ncommand = [\"sleep\", \"60\"]\n\
         [[module.plan]]\ncpu = 1\nmajor_frame = \"10s\"\nwindow = [{{ partition = \"p\", start = \"0s\", duration = \"9s\" }}]\n"
    ));
    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    let t0 = std::time::Instant::now();
    let logs = sup.run(Some(Duration::from_millis(300)), None).unwrap();
    let took = t0.elapsed();
    // The window of 9 s was still open and the next boundary 9 s away: the stop did not wait for it. (The
    // time includes the teardown, which took 4-5 s while other tests removed network namespaces too: this test
    // runs alone.)
    assert!(took < Duration::from_secs(3), "stopping a 10 s frame took {took:?}");
    assert_eq!(logs[0].windows_started, 1);
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

/// (policy, rt_priority) of a process: fields 41 and 40 of /proc/<pid>/stat.
fn scheduling_of(pid: i32) -> (u32, u32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split_whitespace().collect();
    // fields[0] is field 3 (state): field n is fields[n - 3]
    (fields[41 - 3].parse().unwrap(), fields[40 - 3].parse().unwrap())
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn partitions_run_in_the_class_their_file_grants_and_the_latency_bound_is_held_while_up() {
    let _bound = LATENCY_BOUND.write().unwrap_or_else(|e| e.into_inner());
    let name = system_name("rt");
    let root = tempdir("state");
    let text = reference_system(&name, r#"["sleep", "30"]"#).replacen(
        "name = \"recorder\"",
        "name = \"recorder\"\nscheduling = { policy = \"fifo\", priority = 42 }",
        1,
    );
    let sys = system(&text);
    assert_eq!(sys.cpu_dma_latency, Some(partita_system::Duration::ZERO));
    // The supervisor itself runs under SCHED_FIFO here: partitions must not inherit it.
    partita_os::sched::set_current_thread_fifo(30).unwrap();
    let sup = Supervisor::up(&sys, &options(&root));
    partita_os::sched::set_current_thread_normal().unwrap();
    let sup = sup.unwrap();
    let bound = partita_os::cpu_latency::current_bound_us().unwrap();
    let polling = idle_pollers();
    let pid = |p: &str| sup.events().events().iter().find(|e| e.event == "start" && e.partition == p).and_then(|e| e.pid).unwrap();
    let (recorder, routing, monitor) = (pid("recorder"), pid("routing"), pid("monitor"));
    // A frozen process's /proc entry is readable; its class is set before it joined its cgroup.
    assert_eq!(scheduling_of(recorder), (libc::SCHED_FIFO as u32, 42), "the recorder runs SCHED_FIFO 42");
    assert_eq!(scheduling_of(routing), (libc::SCHED_OTHER as u32, 0), "the routing partition runs SCHED_OTHER, not the supervisor's class");
    assert_eq!(scheduling_of(monitor), (libc::SCHED_OTHER as u32, 0));
    sup.run(Some(Duration::from_millis(200)), None).unwrap();
    assert_eq!(bound, 0, "the supervisor holds /dev/cpu_dma_latency at 0 while the plan runs");
    assert!(partita_os::cpu_latency::current_bound_us().unwrap() > 0, "the bound is released when the system goes down");
    // Without a cpuidle driver the bound alone would leave idle CPUs halting: the supervisor polls them itself,
    // one SCHED_IDLE process per CPU in an idle cgroup, while the system is up.
    if partita_os::cpu_latency::needs_pollers(0) {
        let cpus = partita_os::sched::current_thread_cpus().unwrap();
        let mut want: Vec<_> = cpus.iter().map(|&c| (partita_os::cpu_latency::poller_name(c), libc::SCHED_IDLE)).collect();
        want.sort();
        assert_eq!(polling, want, "an idle poller per CPU while up");
    } else {
        assert!(polling.is_empty(), "the cpuidle driver honours the bound: no poller ({polling:?})");
    }
    assert!(idle_pollers().is_empty(), "the pollers end when the system goes down");
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

/// The idle pollers this process started: name and scheduling policy.
fn idle_pollers() -> Vec<(String, i32)> {
    partita_os::idle_poll::running(std::process::id()).into_iter().map(|r| (r.name, r.policy)).collect()
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_partition_kept_frozen_or_thawed_against_the_plan_is_reported() {
    let _bound = bound_shared();
    let name = system_name("ww");
    let root = tempdir("state");
    let sys = system(&reference_system(&name, r#"["sh", "-c", "while :; do :; done"]"#));
    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    let events = sup.events().clone();
    let cgroup = |p: &str| {
        let relative = &sys.partitions().find(|(_, x)| x.name == p).unwrap().1.tree.cgroup;
        partita_supervisor::cgroup::Layout::detect().unwrap().roots().into_iter().map(|r| r.join(relative)).find(|d| d.join("cgroup.freeze").exists()).unwrap()
    };
    // From the host (as the attack of a partition with access to cgroup files would): keep the recorder frozen
    // for three seconds, then keep the routing partition thawed for three seconds.
    let (recorder, routing) = (cgroup("recorder"), cgroup("routing"));
    let seen = |events: &partita_supervisor::health::EventLog, p: &str, e: &str| events.events().iter().any(|x| x.partition == p && x.event == e);
    let watched = events.clone();
    let meddler = std::thread::spawn(move || {
        // Off the plan's CPU (1), where the spinning partitions would take turns with it: on CPU 0 it writes as
        // fast as it can (unpinned, it lost most of the race in one CI-like run and the freeze went unseen).
        partita_os::sched::pin_current_thread(0).unwrap();
        // Until the supervisor reports it, three seconds at most each: it judges only samples well inside a
        // window, a few a second.
        for (dir, value, partition, event) in [(recorder, "1", "recorder", "window_missed"), (routing, "0", "routing", "ran_outside_window")] {
            let until = std::time::Instant::now() + Duration::from_secs(3);
            while std::time::Instant::now() < until && !seen(&watched, partition, event) {
                for _ in 0..100 {
                    let _ = std::fs::write(dir.join("cgroup.freeze"), value);
                }
            }
        }
    });
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopper = {
        let (stop, watched) = (stop.clone(), events.clone());
        std::thread::spawn(move || {
            meddler.join().unwrap();
            // A report that came late: 1.5 s at most.
            let until = std::time::Instant::now() + Duration::from_millis(1500);
            while std::time::Instant::now() < until && !(seen(&watched, "recorder", "window_missed") && seen(&watched, "routing", "ran_outside_window")) {
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    sup.run(None, Some(stop)).unwrap();
    stopper.join().unwrap();
    let log = events.events();
    let found = |p: &str, e: &str| log.iter().find(|x| x.partition == p && x.event == e).and_then(|x| x.detail.clone());
    eprintln!("recorder: {:?}; routing: {:?}", found("recorder", "window_missed"), found("routing", "ran_outside_window"));
    assert!(found("recorder", "window_missed").is_some(), "a partition kept frozen through its windows was not reported: {log:?}");
    assert!(found("routing", "ran_outside_window").is_some(), "a partition kept running outside its windows was not reported: {log:?}");
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

/// With a wake lead the executor waits on the clock for a start in the time before it that no partition runs in
/// (the lead of the partition frozen ahead). It never starts a window before it is due, and no partition runs
/// outside its windows; every start is judged for the partition frozen ahead of it.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_wake_lead_starts_no_window_early_and_lets_no_partition_out_of_its_windows() {
    let _bound = bound_shared();
    let name = system_name("wake");
    let root = tempdir("state");
    let text = reference_system(&name, r#"["sh", "-c", "while :; do :; done"]"#)
        .replacen("major_frame = \"1500us\"", "major_frame = \"1500us\"\nfreeze_ahead = \"100us\"\nwake_ahead = \"30us\"", 1);
    let sys = system(&text);
    assert_eq!(sys.modules[0].plans[0].wake_ahead, partita_system::Duration::from_micros(30));
    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    let events = sup.events().clone();
    // 1.5 s: 1000 frames of two windows.
    let logs = sup.run(Some(Duration::from_millis(1500)), None).unwrap();
    let log = &logs[0];
    assert!(log.windows_started > 1000, "the plan barely ran: {}", log.windows_started);
    assert_eq!(log.switch_errors, 0);
    let early: Vec<_> = log.starts.iter().filter(|s| s.woke_ns < s.planned_ns).collect();
    assert!(early.is_empty(), "{} of {} windows started before they were due: {:?}", early.len(), log.starts.len(), early.first());
    assert_eq!(log.freezes_ahead_done + log.freezes_ahead_overran, log.windows_started, "every start judged once");
    let outside: Vec<_> = events.events().into_iter().filter(|e| e.event == "ran_outside_window").collect();
    // A host stall (the vCPU not running for ms, the executor's late start above 1 ms) lets the running partition
    // overrun its window by the stall, with or without a lead (seen once in a clean-clone run: 3381 µs in 1 of 88
    // spans); without such a stall, none may.
    assert!(outside.is_empty() || log.max_lateness_ns > 1_000_000, "a partition ran outside its windows with no stall of the executor: {outside:?}");
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_partition_granted_lock_memory_may_lock_up_to_its_memory_limit_or_up_says_why_not() {
    let _bound = bound_shared();
    let name = system_name("ml");
    let root = tempdir("state");
    let sys = system(&format!(
        "[system]\nname = \"{name}\"\n[[module]]\nname = \"m\"\ncpus = [1]\n[[module.partition]]\nname = \"p\"\ncommand = [\"sh\", \"-c\", \"ulimit -l; sleep 30\"]\nbinds = [\"sleep\"]\nmemory = \"48MiB\"\nlock_memory = true\n\
         [[module.plan]]\ncpu = 1\nmajor_frame = \"2ms\"\nwindow = [{{ partition = \"p\", start = \"0us\", duration = \"1ms\" }}]\n"
    ));
    // Raising a hard limit needs CAP_SYS_RESOURCE (capability 24), which some machines' root lacks.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let eff = u64::from_str_radix(status.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap().trim(), 16).unwrap();
    match Supervisor::up(&sys, &options(&root)) {
        Ok(sup) => {
            assert!(eff & (1 << 24) != 0, "the limit was raised without CAP_SYS_RESOURCE?");
            sup.run(Some(Duration::from_millis(400)), None).unwrap();
            let log = std::fs::read_to_string(root.0.join(&name).join("p.log")).unwrap();
            assert_eq!(log.trim(), (48 * 1024).to_string(), "ulimit -l shows the memory limit in KiB");
        }
        Err(e) => {
            assert!(eff & (1 << 24) == 0, "up failed although the supervisor holds CAP_SYS_RESOURCE: {e}");
            assert!(e.to_string().contains("lock_memory") && e.to_string().contains("CAP_SYS_RESOURCE"), "{e}");
        }
    }
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

/// Fields 5 and 6 of `/proc/PID/stat` (process group and session), read past the command's parentheses.
fn group_and_session(pid: i32) -> (i32, i32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split_whitespace().collect();
    (rest[2].parse().unwrap(), rest[3].parse().unwrap())
}

/// What a partition holds, read from inside it (its own /proc) and from the host: no capabilities, no way to
/// gain any (no_new_privs, an empty bounding set), the seccomp filters, root inside mapped to an unprivileged
/// host uid, and a session of its own, so that a Ctrl-C to the supervisor's terminal reaches no partition.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_partition_holds_no_privilege_and_runs_in_a_session_of_its_own() {
    let _bound = bound_shared();
    let name = system_name("priv");
    let root = tempdir("state");
    let sys = system(&format!(
        "[system]\nname = \"{name}\"\n[[module]]\nname = \"m\"\ncpus = [1]\n[[module.partition]]\nname = \"p\"\n\
         command = [\"sh\", \"-c\", \"cat /proc/self/status /proc/self/uid_map; echo END; sleep 30\"]\nbinds = [\"cat\", \"sleep\"]\n"
    ));
    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    let events = sup.events().clone();
    let log_path = sup.state_dir().join("p.log");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (stop, events) = (stop.clone(), events.clone());
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !std::fs::read_to_string(&log_path).unwrap_or_default().contains("END") && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let pid = events.events().iter().find(|e| e.event == "start" && e.partition == "p").and_then(|e| e.pid).unwrap();
            let seen = (std::fs::read_to_string(&log_path).unwrap_or_default(), group_and_session(pid), pid);
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            seen
        })
    };
    sup.run(Some(Duration::from_secs(25)), Some(stop)).unwrap();
    let (log, (group, session), pid) = reader.join().unwrap();
    let field = |f: &str| log.lines().find_map(|l| l.strip_prefix(&format!("{f}:"))).map(str::trim).unwrap_or_else(|| panic!("no {f} in:\n{log}"));
    for caps in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(field(caps), "0000000000000000", "{caps}:\n{log}");
    }
    assert_eq!(field("NoNewPrivs"), "1");
    assert_eq!(field("Seccomp"), "2", "filter mode");
    let filters: u32 = field("Seccomp_filters").parse().unwrap();
    assert!(filters >= 4, "the forbidden list, EPERM, ENOSYS and newer-than-the-profile filters: {filters}");
    // uid_map's line: three numbers (inside, outside, count), the only such line of the output.
    let map: Vec<u64> = log
        .lines()
        .map(|l| l.split_whitespace().map(|x| x.parse::<u64>()).collect::<Result<Vec<_>, _>>())
        .find_map(|v| v.ok().filter(|v| v.len() == 3))
        .unwrap_or_else(|| panic!("no uid_map line in:\n{log}"));
    assert_eq!(map[0], 0, "root inside is mapped:\n{log}");
    assert!(map[1] >= 1, "to an unprivileged host uid, not root: {map:?}");
    assert_eq!((group, session), (pid, pid), "the partition leads its own process group and session");
    let (my_group, my_session) = group_and_session(std::process::id() as i32);
    assert!(group != my_group && session != my_session, "a signal to the supervisor's group or terminal session misses the partition");
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

/// The real-time allowance `bench rt` grants its cyclictest partition (`scheduling = { policy = "fifo",
/// priority = 89 }`): the partition's processes start at SCHED_FIFO 89 and may set it again (cyclictest does),
/// but not rise to the plan executors' 90 or above.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_partition_granted_fifo_89_keeps_it_and_cannot_rise_to_the_executors_priority() {
    let _bound = bound_shared();
    let name = system_name("rt");
    let root = tempdir("state");
    let script = "import os\n\
                  def try_(p):\n    try:\n        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(p)); return 'set'\n    except PermissionError:\n        return 'refused'\n\
                  print('start', os.sched_getscheduler(0) == os.SCHED_FIFO, os.sched_getparam(0).sched_priority)\n\
                  print('89', try_(89)); print('90', try_(90)); print('99', try_(99))\n\
                  print('now', os.sched_getparam(0).sched_priority)\n";
    let sys = system(&format!(
        "[system]\nname = \"{name}\"\n[[module]]\nname = \"m\"\ncpus = [1]\n[[module.partition]]\nname = \"p\"\ncommand = [\"sh\", \"-c\", \"exec python3 -c \\\"$SCRIPT\\\"\"]\n{}\nenv = {{ SCRIPT = '''{}''' }}\n\
         scheduling = {{ policy = \"fifo\", priority = 89 }}\nhealth = {{ action = \"stop\" }}\n\
         [[module.plan]]\ncpu = 1\nmajor_frame = \"2ms\"\nwindow = [{{ partition = \"p\", start = \"0us\", duration = \"1ms\" }}]\n",
        binds(&["python3"]),
        script
    ));
    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    sup.run(Some(Duration::from_millis(1500)), None).unwrap();
    let log = std::fs::read_to_string(root.0.join(&name).join("p.log")).unwrap();
    let events = std::fs::read_to_string(root.0.join(&name).join("events.jsonl")).unwrap_or_default();
    assert!(log.contains("start True 89"), "{log}{events}");
    assert!(log.contains("89 set"), "setting its own priority again is allowed: {log}");
    assert!(log.contains("90 refused") && log.contains("99 refused"), "{log}");
    assert!(log.contains("now 89"), "{log}");
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}
