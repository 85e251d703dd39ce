//! SIGTERM to the supervisor tears the running system down (its own test process: signal handlers are
//! process-wide). Needs root.
mod common;
use common::*;
use partita_supervisor::health::Action;
use partita_supervisor::supervisor::{install_stop_signals, write_timeline, Names};
use partita_supervisor::system::{ModuleSpec, PartitionSpec, PlanSpec, SystemSpec};
use partita_supervisor::Supervisor;
use std::time::{Duration, Instant};

#[test]
fn sigterm_stops_the_plan_and_removes_the_system() {
    let system = system_name("sig");
    let root = tempdir("state");
    let spec = SystemSpec {
        name: system.clone(),
        external_domain: 0,
        modules: vec![ModuleSpec {
            name: "m".into(),
            cpus: Some("1".into()),
            domain: 1,
            plans: vec![PlanSpec {
                major_frame: Duration::from_millis(10),
                windows: vec![("only".into(), Duration::ZERO, Duration::from_millis(5))],
                executor_cpu: None,
            }],
            partitions: vec![PartitionSpec {
                name: "only".into(),
                command: vec!["sleep".into(), "300".into()],
                memory_bytes: None,
                pids_max: None,
                action: Action::Stop,
                io: false,
                env: vec![],
                address: None,
                external_address: None,
            }],
        }],
    };
    install_stop_signals();
    let sup = Supervisor::up(&spec, &root.0, None).unwrap();
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
    assert_nothing_left(&system, Some(&Names::new(&system).link_prefix()));
}
