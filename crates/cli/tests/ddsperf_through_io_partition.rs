//! Cyclone's ddsperf, a DDS program partita did not write, in its own network namespace on each side of an I/O
//! partition (needs root): `ddsperf ping` in a partition on the module's V-NETWORK, `ddsperf pong` on a native
//! node on the inter-module network; their round trips cross only the routing partition (`partita route`
//! without a file, routing every topic both ways), all of it under the module's plan.
use std::process::Command;

const SYSTEM: &str = r#"
[system]
name = "NAME"

[[module]]
name = "m"
cpus = [0]

[[module.partition]]
name = "ping"
command = ["sh", "-c", "exec ddsperf -i $PARTITA_DOMAIN -D 8 ping 100Hz"]
memory = "64MiB"
health = { action = "stop" }

[[module.partition]]
name = "routing"
command = ["partita", "route"]
memory = "64MiB"
io = true

[[module.plan]]
cpu = 0
major_frame = "2ms"

[[module.plan.window]]
partition = "ping"
start = "0us"
duration = "1ms"

[[module.plan.window]]
partition = "routing"
start = "1ms"
duration = "1ms"

[[node]]
name = "pong"
command = ["sh", "-c", "exec ddsperf -i $PARTITA_DOMAIN pong"]
"#;

/// (round trips, smallest round trip in µs) from ddsperf ping's per-second lines
/// ("... pong:1 size 12 mean 1009.2us min 850.8us ... cnt 100").
fn roundtrips(out: &str) -> (u64, f64) {
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" cnt ")).collect();
    let count = lines.iter().filter_map(|l| l.split(" cnt ").nth(1)?.split_whitespace().next()?.parse::<u64>().ok()).sum();
    let min = lines
        .iter()
        .filter_map(|l| l.split(" min ").nth(1)?.split_whitespace().next()?.trim_end_matches("us").parse::<f64>().ok())
        .fold(f64::INFINITY, f64::min);
    (count, min)
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn ddsperf_ping_in_a_partition_and_pong_on_a_native_node_meet_through_the_routing_partition() {
    let name = format!("dp{}", std::process::id() % 100_000);
    let dir = std::env::temp_dir().join(format!("partita-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("system.toml");
    std::fs::write(&file, SYSTEM.replace("NAME", &name)).unwrap();
    let up = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["up", file.to_str().unwrap(), "--duration", "12"])
        .output()
        .unwrap();
    // A partition cannot write the host's files: what each side printed is in its log, kept after the run.
    let state = std::path::Path::new("/run/partita").join(&name);
    let ping = std::fs::read_to_string(state.join("ping.log")).unwrap_or_default();
    let pong = std::fs::read_to_string(state.join("pong.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&state);
    let left = partita_supervisor::cleanup::find(Some(&name)).expect("listing leftovers");
    assert!(left.netns.is_empty() && left.cgroups.is_empty(), "left behind: {:?} {:?}", left.netns, left.cgroups);
    assert!(up.status.success(), "partita up failed: {}", String::from_utf8_lossy(&up.stderr));
    let (count, min_us) = roundtrips(&ping);
    eprintln!("ddsperf round trips through the routing partition: {count}, the fastest {min_us} µs");
    assert!(count > 100, "ddsperf ping got {count} pongs through the routing partition:\nping:\n{ping}\npong:\n{pong}");
    // The routing partition runs only in its window, the ping partition only in the other: a round trip waits
    // for at least part of a window (without the plan ddsperf's round trips on a bridge take tens of µs).
    assert!(min_us > 200.0, "the plan delays every round trip, the fastest took {min_us} µs:\n{ping}");
}
