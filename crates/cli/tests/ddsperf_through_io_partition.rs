//! Cyclone's ddsperf, a DDS program partita did not write, in its own network namespace on each side of an I/O
//! partition (needs root): `ddsperf ping` in a partition on the module's V-NETWORK, `ddsperf pong` on a native
//! node on the inter-module network; their round trips cross only the routing partition (`partita route`
//! without a file, routing every topic both ways), all of it under the module's plan.
mod common;
use common::{spawn_up, stop_up_when};

const SYSTEM: &str = r#"
[system]
name = "NAME"

[[module]]
name = "m"
cpus = [0]

[[module.partition]]
name = "ping"
command = ["sh", "-c", "exec ddsperf -i $PARTITA_DOMAIN -D 8 ping 100Hz"]
binds = ["ddsperf"]
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

/// Round trips after which a test has seen enough: the system is stopped then (SIGTERM, which tears it down as
/// the end of `--duration` does) instead of at its duration.
const ENOUGH: u64 = 100;

/// Runs `system` (its name as NAME) for `seconds` at most, until ping has counted more than [`ENOUGH`] round
/// trips; returns `up`'s stderr and what ping and pong printed, after checking that nothing of the system is
/// left.
fn run(name: &str, system: &str, seconds: u32) -> (String, String, String) {
    let dir = std::env::temp_dir().join(format!("partita-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("system.toml");
    std::fs::write(&file, system.replace("NAME", name)).unwrap();
    let up_err = dir.join("up.err");
    let up = spawn_up(&file, seconds, &up_err);
    // A partition cannot write the host's files: what each side printed is in its log, kept after the run.
    let state = std::path::Path::new("/run/partita").join(name);
    let ping_log = || std::fs::read_to_string(state.join("ping.log")).unwrap_or_default();
    let (status, up_stderr) = stop_up_when(up, &up_err, std::time::Duration::from_secs(u64::from(seconds) + 5), || roundtrips(&ping_log()).0 > ENOUGH);
    let ping = ping_log();
    let pong = std::fs::read_to_string(state.join("pong.log")).unwrap_or_default();
    let routing = std::fs::read_to_string(state.join("routing.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&state);
    let _ = std::fs::remove_dir_all(std::path::Path::new("/var/lib/partita").join(name));
    let left = partita_supervisor::cleanup::find(Some(name)).expect("listing leftovers");
    assert!(left.netns.is_empty() && left.cgroups.is_empty() && left.links.is_empty(), "left behind: {left:?}");
    assert!(status.success(), "partita up failed: {up_stderr}\nrouting:\n{routing}");
    (up_stderr, ping, format!("{pong}\nrouting:\n{routing}"))
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn ddsperf_ping_in_a_partition_and_pong_on_a_native_node_meet_through_the_routing_partition() {
    let name = format!("dp{}", std::process::id() % 100_000);
    let (_, ping, pong) = run(&name, SYSTEM, 12);
    let (count, min_us) = roundtrips(&ping);
    eprintln!("ddsperf round trips through the routing partition: {count}, the fastest {min_us} µs");
    assert!(count > ENOUGH, "ddsperf ping got {count} pongs through the routing partition:\nping:\n{ping}\npong:\n{pong}");
    // The routing partition runs only in its window, the ping partition only in the other: a round trip waits
    // for at least part of a window (without the plan ddsperf's round trips on a bridge take tens of µs).
    assert!(min_us > 200.0, "the plan delays every round trip, the fastest took {min_us} µs:\n{ping}");
}

/// The I/O partition as a virtual machine (TCG here): the router runs in a QEMU guest with a tap on the module's
/// bridge and a second one on the inter-module bridge, under the same plan as the process partition.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn an_io_partition_may_be_a_virtual_machine_with_a_nic_on_each_network() {
    let name = format!("dv{}", std::process::id() % 100_000);
    let system = SYSTEM
        .replace("cpus = [0]", "cpus = [1]")
        .replace("cpu = 0", "cpu = 1")
        .replace("name = \"routing\"\ncommand = [\"partita\", \"route\"]\nmemory = \"64MiB\"", "name = \"routing\"\ncommand = [\"partita\", \"route\"]\nkind = \"vm\"\nvm = { memory = \"192MiB\", accel = \"tcg\", boot_timeout = \"90s\" }\npids = 64")
        .replace("major_frame = \"2ms\"", "major_frame = \"10ms\"")
        // ping ends after its -D seconds: the guest's boot (a few seconds under TCG) comes out of them.
        .replace("-D 8", "-D 25")
        .replace("duration = \"1ms\"\n\n[[module.plan.window]]\npartition = \"routing\"\nstart = \"1ms\"\nduration = \"1ms\"", "duration = \"3ms\"\n\n[[module.plan.window]]\npartition = \"routing\"\nstart = \"3ms\"\nduration = \"7ms\"");
    assert!(system.contains("kind = \"vm\"") && system.contains("start = \"3ms\"") && system.contains("-D 25"), "{system}");
    let (_, ping, pong) = run(&name, &system, 32);
    let (count, min_us) = roundtrips(&ping);
    eprintln!("ddsperf round trips through a routing VM partition (TCG): {count}, the fastest {min_us} µs");
    assert!(count > ENOUGH, "ddsperf ping got {count} pongs through the routing VM partition:\nping:\n{ping}\npong:\n{pong}");
}
