//! An unmodified DDS program (Cyclone's `ddsperf`, installed by scripts/setup.sh) in two partitions of one
//! module finds its peer over the V-NETWORK with the generated configuration, under the plan (needs root).
mod common;
use common::*;
use partita_supervisor::health::{Action, ExitKind};
use partita_supervisor::supervisor::Names;
use partita_supervisor::system::{ModuleSpec, PartitionSpec, PlanSpec, SystemSpec};
use partita_supervisor::Supervisor;
use std::time::Duration;

fn partition(name: &str, script: &str) -> PartitionSpec {
    PartitionSpec {
        name: name.into(),
        command: vec!["sh".into(), "-c".into(), script.into()],
        memory_bytes: Some(256 << 20),
        pids_max: Some(64),
        action: Action::Stop,
        io: false,
        env: vec![],
        address: None,
        external_address: None,
    }
}

#[test]
fn ddsperf_ping_pong_between_two_partitions_over_the_module_network() {
    let system = system_name("dds");
    let root = tempdir("state");
    let spec = SystemSpec {
        name: system.clone(),
        external_domain: 0,
        modules: vec![ModuleSpec {
            name: "m".into(),
            cpus: Some("1".into()),
            domain: 5,
            plans: vec![PlanSpec {
                major_frame: Duration::from_millis(10),
                windows: vec![
                    ("ping".into(), Duration::ZERO, Duration::from_millis(5)),
                    ("pong".into(), Duration::from_millis(5), Duration::from_millis(5)),
                ],
                executor_cpu: None,
            }],
            partitions: vec![
                partition("ping", "exec ddsperf -i $PARTITA_DOMAIN -D 8 -Qroundtrips:5 ping"),
                partition("pong", "exec ddsperf -i $PARTITA_DOMAIN -D 12 pong"),
            ],
        }],
    };
    let sup = Supervisor::up(&spec, &root.0, None).unwrap();
    let events = sup.events().clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (events, stop) = (events.clone(), stop.clone());
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !events.events().iter().any(|e| e.event == "exit" && e.partition == "m/ping") && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    sup.run(Some(Duration::from_secs(25)), Some(stop)).unwrap();
    watcher.join().unwrap();
    let log = std::fs::read_to_string(root.0.join(&system).join("m-ping.log")).unwrap_or_default();
    let exit = events.events().into_iter().find(|e| e.event == "exit" && e.partition == "m/ping");
    assert_eq!(exit.and_then(|e| e.exit), Some(ExitKind::Exited { code: 0 }), "ping failed:\n{log}");
    // ddsperf names participants host:pid; the pong partition's host name is "pong" and its pid 1.
    assert!(log.contains("participant pong:1: new"), "ping never discovered the pong partition:\n{log}");
    // A statistics line with a round-trip count reports measured round trips with that peer.
    let round_trips: u64 = log
        .lines()
        .filter_map(|l| l.split(" cnt ").nth(1))
        .filter_map(|c| c.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    assert!(round_trips > 0, "no round trip was measured:\n{log}");
    assert_nothing_left(&system, Some(&Names::new(&system).link_prefix()));
}
