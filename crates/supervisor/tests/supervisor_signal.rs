//! SIGTERM to the supervisor tears the running system down (its own test process: signal handlers are
//! process-wide). Needs root.
mod common;
use common::*;
use partita_supervisor::supervisor::{install_stop_signals, write_timeline};
use partita_supervisor::Supervisor;
use std::time::{Duration, Instant};

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn sigterm_stops_the_plan_and_removes_the_system() {
    let system = system_name("sig");
    let root = tempdir("state");
    let sys = common::system(&format!(
        r#"
[system]
name = "{system}"
[[module]]
name = "m"
cpus = [1]
[[module.partition]]
name = "only"
command = ["sleep", "300"]
health = {{ action = "stop" }}
[[module.plan]]
cpu = 1
major_frame = "10ms"
window = [{{ partition = "only", start = "0ms", duration = "5ms" }}]
"#
    ));
    install_stop_signals();
    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(300));
        // Our own process, whose handler only sets a flag.
        partita_os::process::send_signal(std::process::id() as i32, libc::SIGTERM).unwrap();
    });
    let t0 = Instant::now();
    let logs = sup.run(None, None).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(60));
    assert!(logs[0].windows_started > 0);
    let timeline = root.0.join("timeline.jsonl");
    write_timeline(&timeline, &logs).unwrap();
    let lines = std::fs::read_to_string(&timeline).unwrap();
    assert_eq!(lines.lines().count() as u64, logs[0].windows_started.min(logs[0].capacity as u64));
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["partition"], 0);
    assert_nothing_left(&system, Some(&link_prefix(&system)));
}
