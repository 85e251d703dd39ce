//! `partita bench rr` end to end through the real binary: a client process, a server process it starts, raw UDP
//! on 127.0.0.1, and the result files. No timing thresholds: only counts, ordering and exit codes.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn partita(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_partita")).args(args).output().expect("the partita binary runs")
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("partita-bench-rr-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("results.json is JSON")
}

fn f(v: &serde_json::Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn udp_round_trips_end_to_end() {
    let dir = fresh_dir("udp");
    let out = partita(&[
        "bench", "rr", "--transport", "udp", "--size", "64", "--count", "200", "--warmup", "20", "--out",
        dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);

    let r = json(&dir.join("results.json"));
    let scenarios = r["scenarios"].as_array().expect("scenarios");
    assert_eq!(scenarios.len(), 1);
    let s = &scenarios[0];
    assert_eq!(s["transport"], "udp");
    assert_eq!(s["size"], 64);
    assert_eq!(s["mode"], "closed-loop");
    let lost = s["lost"].as_u64().unwrap();
    let stats = &s["stats"];
    assert_eq!(stats["count"].as_u64().unwrap() + lost, 200, "{s}");
    assert_eq!(lost, 0, "no reply should be lost on loopback: {s}");
    assert_eq!(s["warmup_done"].as_u64().unwrap() + s["warmup_lost"].as_u64().unwrap(), 20);
    let (min, p50, p99, max) = (f(stats, "min_us"), f(stats, "p50_us"), f(stats, "p99_us"), f(stats, "max_us"));
    assert!(min > 0.0 && min <= p50 && p50 <= p99 && p99 <= max, "{stats}");
    assert!(f(stats, "q1_us") <= p50 && p50 <= f(stats, "q3_us"), "{stats}");
    assert_eq!(r["config"]["count"], 200);
    assert!(r["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(r["started"].as_str().unwrap() <= r["finished"].as_str().unwrap());

    let table = std::fs::read_to_string(dir.join("table.md")).unwrap();
    assert!(table.contains("| MIN | AVG | MAX | STD | PER99 | P50 | P99.9 |"), "{table}");
    assert!(table.contains("| udp 64 |"), "{table}");
    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2, "{csv}");
    assert!(!dir.join("raw-udp-64.csv").exists(), "raw samples only with --raw");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn raw_samples_and_open_loop() {
    let dir = fresh_dir("raw");
    let out = partita(&[
        "bench", "rr", "--transport", "udp", "--size", "1k", "--count", "100", "--warmup", "10", "--rate", "2000",
        "--raw", "--out", dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = json(&dir.join("results.json"));
    let s = &r["scenarios"][0];
    assert_eq!(s["mode"], "open-loop");
    assert_eq!(s["size"], 1024);
    let samples = s["samples_ns"].as_array().unwrap();
    let lost = s["lost"].as_u64().unwrap();
    assert_eq!(samples.len() as u64 + lost, 100);
    // Measured sequence numbers follow the warm-up ones.
    assert!(samples.iter().all(|p| p[0].as_u64().unwrap() >= 10));
    let raw = std::fs::read_to_string(dir.join("raw-udp-1KiB.csv")).unwrap();
    assert_eq!(raw.lines().count(), samples.len() + 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_exit_with_status_2() {
    let dir = fresh_dir("bad");
    let d = dir.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--size", "0"], "size"),
        (&["--size", "65500"], "too large"),
        (&["--transport", "pigeon"], "unknown transport"),
        (&["--count", "0"], "count"),
        (&["--size", "12q"], "size"),
        (&["--rate", "-1"], "rate"),
        (&["--server-work", "-5"], "server-work"),
        (&["--fifo", "0"], "--fifo"),
        (&["--fifo", "10", "--busy-poll"], "busy-poll"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["bench", "rr", "--out", d];
        args.extend_from_slice(extra);
        let out = partita(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.to_lowercase().contains(needle), "{extra:?}: {stderr}");
    }
    let out = partita(&["bench", "rr", "--count", "10", "--out", "/proc/partita-cannot-write-here"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("output folder"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dds_round_trips_end_to_end() {
    // Both servers: replying from a listener (dds) and from a waitset loop (dds-waitset).
    let dir = fresh_dir("dds");
    let out = partita(&[
        "bench", "rr", "--transport", "dds,dds-waitset", "--size", "64", "--count", "100", "--warmup", "10", "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = json(&dir.join("results.json"));
    for (i, name) in ["dds", "dds-waitset"].iter().enumerate() {
        let s = &r["scenarios"][i];
        assert_eq!(s["transport"], *name);
        let stats = &s["stats"];
        assert_eq!(stats["count"].as_u64().unwrap() + s["lost"].as_u64().unwrap(), 100, "{s}");
        let (min, p50, p99, max) = (f(stats, "min_us"), f(stats, "p50_us"), f(stats, "p99_us"), f(stats, "max_us"));
        assert!(min > 0.0 && min <= p50 && p50 <= p99 && p99 <= max, "{stats}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn one_forwarding_hop_under_the_realtime_setup() {
    // The relay and the router between client and server, every process under SCHED_FIFO, idle states held
    // off: all four paths answer, and the report names the setup and ends with the hop table.
    let dir = fresh_dir("hop");
    let out = partita(&[
        "bench", "rr", "--transport", "udp,udp-relay,dds,dds-routed", "--size", "64", "--count", "100", "--warmup",
        "10", "--fifo", "10", "--cpu-dma-latency", "0", "--out", dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = json(&dir.join("results.json"));
    assert_eq!(r["config"]["fifo_priority"], 10);
    for (i, name) in ["udp", "udp-relay", "dds", "dds-routed"].iter().enumerate() {
        let s = &r["scenarios"][i];
        assert_eq!(s["transport"], *name);
        let answered = s["stats"]["count"].as_u64().unwrap_or(0);
        assert!(answered > 0, "{s}");
        assert_eq!(answered + s["lost"].as_u64().unwrap(), 100, "{s}");
    }
    let table = std::fs::read_to_string(dir.join("table.md")).unwrap();
    assert!(table.contains("SCHED_FIFO 10, cpu_dma_latency 0 µs"), "{table}");
    let row = table.lines().find(|l| l.starts_with("| 64 |")).unwrap_or_else(|| panic!("no hop row: {table}"));
    assert_eq!(row.split('|').filter(|c| !c.trim().is_empty()).count(), 4, "{row}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ddsperf_reference_end_to_end() {
    // Needs Cyclone's ddsperf (Debian cyclonedds-tools, installed by scripts/setup.sh).
    let dir = fresh_dir("ddsperf");
    let out = partita(&["bench", "rr", "--transport", "ddsperf", "--size", "64", "--count", "1000", "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = json(&dir.join("results.json"));
    let s = &r["scenarios"][0];
    assert_eq!(s["transport"], "ddsperf");
    assert!(s["stats"].is_null(), "ddsperf figures are a reference, not partita's samples");
    let rf = &s["reference"];
    assert!(rf["count"].as_u64().unwrap() > 0, "{rf}");
    assert!(rf["intervals_used"].as_u64().unwrap() >= 1, "{rf}");
    let (min, p50, p99, max) = (f(rf, "min_us"), f(rf, "p50_us"), f(rf, "p99_us"), f(rf, "max_us"));
    assert!(min > 0.0 && min <= p50 && p50 <= p99 && p99 <= max, "{rf}");
    assert!(rf["note"].as_str().unwrap().contains("RTT/2"));
    let table = std::fs::read_to_string(dir.join("table.md")).unwrap();
    assert!(table.contains("| ddsperf 64 |") && table.contains("×2"), "{table}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scenarios_run_size_by_size_and_are_listed_by_transport() {
    // The paths compared at one size run next to each other in time; the result files keep the table's order.
    let dir = fresh_dir("order");
    let out = partita(&[
        "bench", "rr", "--transport", "udp,udp-relay", "--size", "64,128", "--count", "50", "--warmup", "5", "--out",
        dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let ran: Vec<&str> = stderr.lines().filter_map(|l| l.split(':').next()).filter(|s| s.starts_with("udp")).collect();
    assert_eq!(ran, ["udp 64", "udp-relay 64", "udp 128", "udp-relay 128"], "{stderr}");
    let r = json(&dir.join("results.json"));
    let listed: Vec<String> = r["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{} {}", s["transport"].as_str().unwrap(), s["size"]))
        .collect();
    assert_eq!(listed, ["udp 64", "udp 128", "udp-relay 64", "udp-relay 128"]);
    let _ = std::fs::remove_dir_all(&dir);
}
