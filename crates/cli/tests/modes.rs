//! Partition modes, health-monitor tables and plan switching, end to end (root): the modes example switches
//! to its degraded plan when its routing partition has crashed three times and back on the operator's word,
//! and stops its module on a power failure (SIGPWR);
//! partitions set their modes, raise errors and ask for plan switches through their control pages, and only
//! the system partition's switch is made.
mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn events(name: &str) -> String {
    std::fs::read_to_string(Path::new("/run/partita").join(name).join("events.jsonl")).unwrap_or_default()
}



/// The pids in a partition's cgroup (v2 hierarchy, or the v1 cpuset one).
fn pids_of(system: &str, partition: &str) -> Vec<i32> {
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/cpuset"] {
        let p = PathBuf::from(root).join("partita").join(system).join(partition).join("cgroup.procs");
        if let Ok(text) = std::fs::read_to_string(&p) {
            let pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if !pids.is_empty() {
                return pids;
            }
        }
    }
    Vec::new()
}

fn lines_with<'a>(text: &'a str, words: &[&str]) -> Vec<&'a str> {
    text.lines().filter(|l| words.iter().all(|w| l.contains(w))).collect()
}

fn plan_switch(system: &str, plan: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_partita")).args(["plan", "switch", system, plan]).output().unwrap()
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_example_switches_to_its_degraded_plan_when_routing_crashes_three_times_and_back_on_the_operators_word() {
    let dir = TempDir::new("modes", "example");
    let name = format!("vsm{}", std::process::id() % 100_000);
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance-modes.toml")).unwrap();
    let text = text.replace("name = \"video-surveillance-modes\"", &format!("name = \"{name}\""));
    assert!(text.contains(&name));
    let file = dir.0.join("modes.toml");
    std::fs::write(&file, text).unwrap();
    let err = dir.0.join("up.err");
    let up = spawn_up(&file, 120, &err);
    let mut failures = Vec::new();
    let up_now = wait_for(Duration::from_secs(30), || state(&name)["plans"][0]["plan"] == "normal" && !pids_of(&name, "routing").is_empty());
    if !up_now {
        failures.push(format!("the system did not come up in the normal plan: {}", std::fs::read_to_string(&err).unwrap_or_default()));
    }
    // Three crashes of the routing partition (SIGKILL to every process in it), each after its restart.
    for k in 1..=3 {
        if !up_now {
            break;
        }
        let restarts_before = lines_with(&events(&name), &["\"restart\"", "routing"]).len();
        for pid in pids_of(&name, "routing") {
            let _ = partita_os::process::send_signal(pid, libc::SIGKILL);
        }
        if k < 3 && !wait_for(Duration::from_secs(20), || lines_with(&events(&name), &["\"restart\"", "routing"]).len() > restarts_before && !pids_of(&name, "routing").is_empty()) {
            failures.push(format!("crash {k}: routing was not restarted"));
            break;
        }
    }
    let switched = wait_for(Duration::from_secs(20), || state(&name)["plans"][0]["plan"] == "degraded");
    let log = events(&name);
    let cold = lines_with(&log, &["hm_action", "routing", "exited: restart_cold (partition table)"]).len();
    let escalated = lines_with(&log, &["hm_action", "routing", "switch_plan to degraded", "escalated"]).len();
    let made = lines_with(&log, &["\"plan_switch\"", "normal → degraded at the end of a major frame"]).len();
    // Routing stays down in the degraded plan; the recorder keeps running.
    let routing_down = pids_of(&name, "routing").is_empty();
    let recorder_up = !pids_of(&name, "recorder").is_empty();
    // The operator switches back; a plan the module does not have is refused.
    let back = plan_switch(&name, "normal");
    let nosuch = plan_switch(&name, "nosuch");
    let normal_again = state(&name)["plans"][0]["plan"] == "normal" || wait_for(Duration::from_secs(3), || state(&name)["plans"][0]["plan"] == "normal");
    // A power failure (SIGPWR to the supervisor): the system table stops every module; the supervisor lives on.
    let _ = partita_os::process::send_signal(up.id() as i32, libc::SIGPWR);
    let power = wait_for(Duration::from_secs(10), || pids_of(&name, "recorder").is_empty() && !lines_with(&events(&name), &["hm_action", "power_fail: stop_module (system table)"]).is_empty());
    let (status, up_err) = stop_up_when(up, &err, Duration::from_secs(1), || false);
    let final_log = events(&name);
    let _ = std::fs::remove_dir_all(Path::new("/run/partita").join(&name));
    assert!(failures.is_empty(), "{failures:?}\n{log}");
    assert!(switched, "the module did not switch to degraded:\n{log}");
    assert_eq!(cold, 2, "two cold restarts before the switch:\n{log}");
    assert_eq!(escalated, 1, "the third crash escalates to the switch:\n{log}");
    assert_eq!(made, 1, "the switch is made at a frame end and logged:\n{log}");
    assert!(routing_down && recorder_up, "routing stays down, the recorder runs on (routing down {routing_down}, recorder up {recorder_up})");
    let back_out = String::from_utf8_lossy(&back.stdout);
    assert!(back.status.success() && back_out.contains("degraded → normal"), "{back:?}");
    assert_eq!(nosuch.status.code(), Some(2), "{nosuch:?}");
    assert!(String::from_utf8_lossy(&nosuch.stderr).contains("has no plan \"nosuch\""), "{nosuch:?}");
    assert!(normal_again, "state.json does not show the normal plan after the operator's switch");
    assert!(power, "SIGPWR did not stop the module:\n{final_log}");
    assert!(!lines_with(&final_log, &["\"mode\"", "recorder", "→ idle (the health monitor stopped its module)"]).is_empty(), "{final_log}");
    assert!(status.success(), "{up_err}");
}

const PARTITIONS: &str = r#"
[system]
name = "NAME"

[[module]]
name = "m"
cpus = [1]
default_plan = "normal"

[[module.partition]]
name = "sys"
system_partition = true
command = ["partita", "app", "partition", "plan", "degraded"]
health = { action = "stop" }

[[module.partition]]
name = "usr"
command = ["partita", "app", "partition", "plan", "degraded"]
health = { action = "stop" }

[[module.partition]]
name = "err"
command = ["partita", "app", "partition", "error", "--kind", "application_error", "boom"]
health = { action = "stop" }

[module.partition.health_monitor]
application_error = { action = "restart_warm", max = 1, within = "60s", then = "stop" }

[[module.partition]]
name = "nml"
command = ["partita", "app", "partition", "mode", "normal"]
health = { action = "stop" }

[[module.plan]]
name = "normal"
cpu = 1
major_frame = "2ms"

[[module.plan.window]]
partition = "sys"
start = "0us"
duration = "500us"

[[module.plan.window]]
partition = "usr"
start = "500us"
duration = "500us"

[[module.plan.window]]
partition = "err"
start = "1000us"
duration = "500us"

[[module.plan.window]]
partition = "nml"
start = "1500us"
duration = "500us"

[[module.plan]]
name = "degraded"
cpu = 1
major_frame = "4ms"

[[module.plan.window]]
partition = "sys"
start = "0us"
duration = "1ms"

[[module.plan.window]]
partition = "usr"
start = "1ms"
duration = "1ms"

[[module.plan.window]]
partition = "err"
start = "2ms"
duration = "1ms"

[[module.plan.window]]
partition = "nml"
start = "3ms"
duration = "1ms"
"#;

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn partitions_set_their_mode_raise_errors_and_only_the_system_partition_switches_the_plan() {
    let dir = TempDir::new("modes", "pages");
    let name = format!("pgs{}", std::process::id() % 100_000);
    let file = dir.0.join("pages.toml");
    std::fs::write(&file, PARTITIONS.replace("NAME", &name)).unwrap();
    let err = dir.0.join("up.err");
    let up = spawn_up(&file, 60, &err);
    let done = || {
        let log = events(&name);
        !lines_with(&log, &["\"plan_switch\"", "normal → degraded"]).is_empty()
            && !lines_with(&log, &["illegal_request", "usr"]).is_empty()
            && !lines_with(&log, &["hm_action", "err", "application_error: stop"]).is_empty()
            && !lines_with(&log, &["\"mode\"", "nml", "cold_start → normal"]).is_empty()
    };
    let seen = wait_for(Duration::from_secs(30), done);
    let (status, up_err) = stop_up_when(up, &err, Duration::from_secs(1), || false);
    let log = events(&name);
    let _ = std::fs::remove_dir_all(Path::new("/run/partita").join(&name));
    assert!(seen, "not every request was answered as expected:\n{log}\n{up_err}");
    // The system partition's switch is made; the other partition's is refused, logged and made nowhere.
    assert!(!lines_with(&log, &["plan_switch_requested", "by system partition sys"]).is_empty(), "{log}");
    assert!(!lines_with(&log, &["plan_switch_refused", "asked by partition usr, which is not a system partition"]).is_empty(), "{log}");
    assert!(lines_with(&log, &["plan_switch_requested", "usr"]).is_empty(), "{log}");
    assert_eq!(lines_with(&log, &["\"plan_switch\""]).len(), 1, "one switch only:\n{log}");
    // The raised error: restarted warm once, then stopped by the escalation; both logged with the message.
    assert_eq!(lines_with(&log, &["error_raised", "err", "application_error: boom"]).len(), 2, "{log}");
    assert_eq!(lines_with(&log, &["hm_action", "err", "application_error: restart_warm (partition table)"]).len(), 1, "{log}");
    assert!(!lines_with(&log, &["\"restart\"", "err", "warm start"]).is_empty(), "{log}");
    assert!(status.success(), "{up_err}");
}

const TABLES: &str = r#"
[system]
name = "NAME"

[[module]]
name = "m"
cpus = [1]

[module.health_monitor]
deadline_missed = "stop_module"

[[module.partition]]
name = "idl"
command = ["partita", "app", "partition", "error", "--kind", "application_error", "go idle"]
health = { action = "stop" }

[module.partition.health_monitor]
application_error = "idle"

[[module.partition]]
name = "ign"
command = ["partita", "app", "partition", "error", "--kind", "stack_overflow", "nobody minds"]
health = { action = "stop" }

[[module.partition]]
name = "stm"
command = ["sh", "-c", "sleep 1; exec partita-partition error --kind deadline_missed late"]
health = { action = "stop" }

[[module.partition]]
name = "by"
command = ["sleep", "60"]

[[module.plan]]
cpu = 1
major_frame = "2ms"
window = [{ partition = "idl", start = "0us", duration = "500us" }, { partition = "ign", start = "500us", duration = "500us" }, { partition = "stm", start = "1ms", duration = "500us" }, { partition = "by", start = "1500us", duration = "500us" }]
"#;

/// The table actions the other tests do not take: `idle` at partition level, `stop_module` at module level,
/// and an error no table names (ignored, logged).
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_partition_table_idles_its_partition_and_a_module_table_stops_the_module() {
    let dir = TempDir::new("modes", "tables");
    let name = format!("tbl{}", std::process::id() % 100_000);
    let file = dir.0.join("tables.toml");
    // The shell partition runs the small binary by path: its own copy in its state directory.
    let small = Path::new(env!("CARGO_BIN_EXE_partita")).parent().unwrap().join("partita-partition");
    // Its bind brings the libraries the small binary links (the copy alone would not start).
    let binds = format!("binds = [\"sleep\", \"{}\"]\ncommand = [\"sh\", \"-c\"", small.display());
    let text = TABLES.replace("NAME", &name).replace("exec partita-partition", "exec $PARTITA_STATE_DIR/partita-partition").replace("command = [\"sh\", \"-c\"", &binds);
    std::fs::write(&file, &text).unwrap();
    let system = partita_system::parse(&text, "tables.toml", &partita_system::Host::this_machine()).unwrap();
    let stm_dir = system.partitions().find(|(_, p)| p.name == "stm").unwrap().1.tree.confinement.clone().unwrap().state_dir;
    std::fs::create_dir_all(&stm_dir).unwrap();
    std::fs::copy(&small, stm_dir.join("partita-partition")).unwrap();
    let err = dir.0.join("up.err");
    let up = spawn_up(&file, 60, &err);
    let seen = wait_for(Duration::from_secs(30), || !lines_with(&events(&name), &["hm_action", "stm", "deadline_missed: stop_module (module table)"]).is_empty() && pids_of(&name, "by").is_empty());
    let (status, up_err) = stop_up_when(up, &err, Duration::from_secs(1), || false);
    let log = events(&name);
    let _ = std::fs::remove_dir_all(Path::new("/run/partita").join(&name));
    let _ = std::fs::remove_dir_all(stm_dir.parent().unwrap());
    assert!(seen, "the module was not stopped:\n{log}\n{up_err}");
    assert_eq!(lines_with(&log, &["hm_action", "idl", "application_error: idle (partition table)"]).len(), 1, "{log}");
    assert!(!lines_with(&log, &["\"mode\"", "idl", "→ idle (the health monitor's action)"]).is_empty(), "{log}");
    // No table names stack_overflow: logged as raised, no action.
    assert_eq!(lines_with(&log, &["error_raised", "ign", "stack_overflow: nobody minds"]).len(), 1, "{log}");
    assert!(lines_with(&log, &["hm_action", "ign"]).is_empty(), "{log}");
    // The module table's stop_module stopped every partition of the module still running, the bystander too
    // (idl was idle already, ign had ended).
    for p in ["stm", "by"] {
        assert!(!lines_with(&log, &["\"mode\"", &format!("\"{p}\""), "→ idle (the health monitor stopped its module)"]).is_empty(), "{p}:\n{log}");
    }
    assert!(status.success(), "{up_err}");
}
