//! The status service end to end (root): a running system's state file holds each CPU's plan as it runs and
//! each partition's figures; the status node publishes them on the DDS topic `partita/status` of the
//! inter-module network, where another node reads them; the routing partition's statistics come back into the
//! state; and the operator stops and restarts a partition (`partita partition stop|restart`).
mod common;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;



fn partition<'a>(state: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    state["partitions"].as_array().and_then(|ps| ps.iter().find(|p| p["partition"] == name)).unwrap_or(&serde_json::Value::Null)
}

fn partita(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_partita")).args(args).output().unwrap()
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_status_node_publishes_every_partition_on_dds_and_brings_the_routers_statistics_into_the_state() {
    let dir = TempDir::new("status", "topic");
    let name = format!("vst{}", std::process::id() % 100_000);
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance-status.toml")).unwrap();
    let text = text.replace("name = \"video-surveillance\"", &format!("name = \"{name}\"")).replace("\"--system\", \"video-surveillance\"", &format!("\"--system\", \"{name}\"")).replace("/run/partita/video-surveillance/", &format!("/run/partita/{name}/"));
    // A second node reads the topic, as an operator's tool on the network would.
    let text = format!("{text}\n[[node]]\nname = \"watcher\"\ncommand = [\"partita\", \"app\", \"status-node\", \"--system\", \"{name}\", \"--watch\"]\n");
    let file = dir.0.join("status.toml");
    std::fs::write(&file, &text).unwrap();
    let err = dir.0.join("up.err");
    let up = spawn_up(&file, 90, &err);
    let watcher_log = Path::new("/run/partita").join(&name).join("watcher.log");
    let samples = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&watcher_log).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    };
    let heard_all = || ["recorder", "routing", "monitor", "status", "watcher"].iter().all(|p| samples().iter().any(|s| s["partition"] == *p && s["system"] == name.as_str()));
    let routed = || state(&name)["routers"]["routes"].as_array().is_some_and(|rs| rs.iter().any(|r| r["topic"] == "surveillance/request" && r["forwarded"].as_u64().unwrap_or(0) > 0));
    let outcome = check(&name, &samples, &heard_all, &routed);
    // Whatever the checks found, the system goes down first (SIGTERM to this test's own `up`).
    let (status, log) = stop_up_when(up, &err, Duration::ZERO, || true);
    if let Err(e) = outcome {
        panic!("{e}\nthe watcher heard {:?}; up said:\n{log}", samples().iter().map(|s| s["partition"].clone()).collect::<Vec<_>>());
    }
    assert!(status.success(), "{log}");
}

macro_rules! ensure {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err(format!($($why)+));
        }
    };
}

fn check(name: &str, samples: &dyn Fn() -> Vec<serde_json::Value>, heard_all: &dyn Fn() -> bool, routed: &dyn Fn() -> bool) -> Result<(), String> {
    ensure!(wait_for(Duration::from_secs(30), heard_all), "the watcher did not hear every partition on partita/status");
    ensure!(wait_for(Duration::from_secs(15), routed), "no router statistics in the state: {}", state(name)["routers"]);
    let s = state(name);
    // The state: each CPU's plan with its windows and recent starts, lateness, and each partition's figures.
    let cpu = &s["cpus"][0];
    ensure!(cpu["major_frame_ns"] == 1_500_000, "{cpu}");
    ensure!(cpu["windows"].as_array().map(|w| w.len()) == Some(2), "{cpu}");
    let recent = cpu["recent"].as_array().ok_or("no recent window starts")?;
    ensure!(recent.len() >= 4, "{cpu}");
    ensure!(recent.iter().all(|r| r["switched_ns"].as_u64() >= r["woke_ns"].as_u64() && r["woke_ns"].as_u64() >= r["planned_ns"].as_u64()), "{cpu}");
    ensure!(cpu["lateness"]["count"].as_u64().unwrap_or(0) > 100, "{cpu}");
    let recorder = partition(&s, "recorder");
    ensure!(recorder["cpu_us"].as_u64().unwrap_or(0) > 0 && recorder["memory_bytes"].as_u64().unwrap_or(0) > 0, "{recorder}");
    // What the watcher heard on DDS is what the state says (pids do not change while nothing restarts).
    let heard = samples();
    for p in ["recorder", "routing", "monitor"] {
        let last = heard.iter().rev().find(|h| h["partition"] == p).ok_or(format!("nothing heard of {p}"))?;
        ensure!(last["pid"] == partition(&s, p)["pid"], "{p}: heard {last}, the state has {}", partition(&s, p));
        ensure!(last["system"] == name, "{last}");
    }
    let recorder_heard = heard.iter().rev().find(|h| h["partition"] == "recorder").ok_or("nothing heard of the recorder")?;
    ensure!(recorder_heard["module"] == "camera-node" && recorder_heard["plan"] == "default", "{recorder_heard}");
    ensure!(recorder_heard["lateness_p99_us"].as_f64().unwrap_or(0.0) > 0.0, "{recorder_heard}");

    // The operator stops the routing partition: it stays stopped; a restart brings it back.
    let out = partita(&["partition", "stop", name, "routing"]);
    ensure!(out.status.success(), "stop: {}", String::from_utf8_lossy(&out.stderr));
    ensure!(wait_for(Duration::from_secs(10), || partition(&state(name), "routing")["pid"].is_null()), "routing still has a pid after stop");
    std::thread::sleep(Duration::from_secs(2));
    ensure!(partition(&state(name), "routing")["pid"].is_null(), "a stopped partition came back by itself");
    let before = partition(&state(name), "routing")["restarts"].as_u64().unwrap_or(0);
    let out = partita(&["partition", "restart", name, "routing"]);
    ensure!(out.status.success(), "restart: {}", String::from_utf8_lossy(&out.stderr));
    ensure!(String::from_utf8_lossy(&out.stdout).contains("it was kept stopped"), "{}", String::from_utf8_lossy(&out.stdout));
    let back = wait_for(Duration::from_secs(10), || {
        let s = state(name);
        let r = partition(&s, "routing");
        r["pid"].is_number() && r["restarts"].as_u64() == Some(before + 1)
    });
    ensure!(back, "routing did not come back: {}", partition(&state(name), "routing"));
    // Unknown names are refused with the members the system has.
    let out = partita(&["partition", "restart", name, "nosuch"]);
    ensure!(out.status.code() == Some(2), "{:?}", out.status);
    ensure!(String::from_utf8_lossy(&out.stderr).contains("recorder"), "{}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}
