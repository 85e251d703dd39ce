//! A whole system built by `Supervisor::up`, run, and torn down; and a build that fails half-way leaves
//! nothing behind (needs root).
mod common;
use common::*;
use partita_supervisor::health::Action;
use partita_supervisor::supervisor::Names;
use partita_supervisor::system::{ModuleSpec, PartitionSpec, PlanSpec, SystemSpec};
use partita_supervisor::Supervisor;
use std::time::Duration;

fn partition(name: &str, io: bool, command: &[&str]) -> PartitionSpec {
    PartitionSpec {
        name: name.into(),
        command: command.iter().map(|s| s.to_string()).collect(),
        memory_bytes: Some(64 << 20),
        pids_max: Some(32),
        action: Action::Restart { max: 3, within: Duration::from_secs(10) },
        io,
        env: vec![],
        address: None,
        external_address: None,
    }
}

fn reference_system(name: &str, recorder_command: &[&str]) -> SystemSpec {
    let spin: &[&str] = &["sh", "-c", "while :; do :; done"];
    SystemSpec {
        name: name.into(),
        external_domain: 0,
        modules: vec![
            ModuleSpec {
                name: "node".into(),
                cpus: Some("1".into()),
                domain: 1,
                plans: vec![PlanSpec {
                    major_frame: Duration::from_micros(1500),
                    windows: vec![
                        ("routing".into(), Duration::ZERO, Duration::from_micros(800)),
                        ("recorder".into(), Duration::from_micros(800), Duration::from_micros(700)),
                    ],
                    executor_cpu: Some(1),
                }],
                partitions: vec![partition("routing", true, spin), partition("recorder", false, recorder_command)],
            },
            ModuleSpec {
                name: "monitor".into(),
                cpus: Some("0".into()),
                domain: 0,
                plans: Vec::new(),
                partitions: vec![partition("monitor", false, &["sleep", "300"])],
            },
        ],
    }
}

#[test]
fn the_reference_system_comes_up_runs_its_plan_and_goes_away() {
    let system = system_name("up");
    let root = tempdir("state");
    let spin: &[&str] = &["sh", "-c", "while :; do :; done"];
    let sup = Supervisor::up(&reference_system(&system, spin), &root.0, None).unwrap();
    let state_dir = sup.state_dir().to_path_buf();
    let state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(state_dir.join("state.json")).unwrap()).unwrap();
    assert_eq!(state["partitions"].as_array().unwrap().len(), 3);
    let xml = std::fs::read_to_string(state_dir.join("node-routing.xml")).unwrap();
    assert!(xml.contains("vnic0") && xml.contains("vnic1"), "the I/O partition's configuration lacks a domain:\n{xml}");
    let xml = std::fs::read_to_string(state_dir.join("node-recorder.xml")).unwrap();
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
    let xml = std::fs::read_to_string(state_dir.join("monitor-monitor.xml")).unwrap();
    assert!(xml.contains("vnic1") && !xml.contains("vnic0"), "a native node is on the inter-module network only:\n{xml}");
    assert_nothing_left(&system, Some(&Names::new(&system).link_prefix()));
}

#[test]
fn a_build_failing_half_way_leaves_nothing() {
    let system = system_name("hf");
    let root = tempdir("state");
    let r = Supervisor::up(&reference_system(&system, &["/nonexistent/partita-test-program"]), &root.0, None);
    assert!(r.is_err(), "a partition with a missing program was started");
    assert!(!root.0.join(&system).join("state.json").exists());
    assert_nothing_left(&system, Some(&Names::new(&system).link_prefix()));
}
