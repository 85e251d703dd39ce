//! An unmodified DDS program (Cyclone's `ddsperf`, installed by scripts/setup.sh) in two partitions of one
//! module finds its peer over the V-NETWORK with the generated configuration, under the plan (needs root).
mod common;
use common::*;
use partita_supervisor::health::ExitKind;
use partita_supervisor::Supervisor;
use std::time::Duration;

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn ddsperf_ping_pong_between_two_partitions_over_the_module_network() {
    let system = system_name("dds");
    let root = tempdir("state");
    let sys = common::system(&format!(
        r#"
[system]
name = "{system}"
[[module]]
name = "m"
cpus = [1]
domain = 5
[[module.partition]]
name = "ping"
command = ["sh", "-c", "exec ddsperf -i $PARTITA_DOMAIN -D 8 -Qroundtrips:5 ping"]
binds = ["ddsperf"]
memory = "256MiB"
pids = 64
health = {{ action = "stop" }}
[[module.partition]]
name = "pong"
command = ["sh", "-c", "exec ddsperf -i $PARTITA_DOMAIN -D 12 pong"]
binds = ["ddsperf"]
memory = "256MiB"
pids = 64
health = {{ action = "stop" }}
[[module.plan]]
cpu = 1
major_frame = "10ms"
window = [{{ partition = "ping", start = "0ms", duration = "5ms" }}, {{ partition = "pong", start = "5ms", duration = "5ms" }}]
"#
    ));
    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    let events = sup.events().clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (events, stop) = (events.clone(), stop.clone());
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !events.events().iter().any(|e| e.event == "exit" && e.partition == "ping") && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    sup.run(Some(Duration::from_secs(25)), Some(stop)).unwrap();
    watcher.join().unwrap();
    let log = std::fs::read_to_string(root.0.join(&system).join("ping.log")).unwrap_or_default();
    let exit = events.events().into_iter().find(|e| e.event == "exit" && e.partition == "ping");
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
    assert_nothing_left(&system, Some(&link_prefix(&system)));
}
