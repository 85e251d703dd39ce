//! `partita bench rr` end to end through the real binary: a client process, a server process it starts, raw UDP
//! on 127.0.0.1, and the result files. No timing thresholds: only counts, ordering, the recorded setup and exit
//! codes. Tests about something else than the setup measure under `--normal-scheduling` (no root needed) and
//! make one run per cell (`--repeat 1`) to stay fast.
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

/// The caption of the default setup, as tables and CSV files carry it.
const REALTIME: &str = "real-time setup: SCHED_FIFO 50, memory locked, /dev/cpu_dma_latency held at 0 µs";
const NORMAL: &str = "normal scheduling: SCHED_OTHER, memory not locked, CPU idle states as the machine sets them";

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn udp_round_trips_end_to_end_under_the_default_realtime_setup() {
    let dir = fresh_dir("udp");
    let out = partita(&[
        "bench", "rr", "--transport", "udp", "--size", "64", "--count", "200", "--warmup", "20", "--repeat", "1",
        "--out", dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);

    let r = json(&dir.join("results.json"));
    let setup = &r["setup"];
    assert_eq!(setup["name"], "real-time", "{setup}");
    assert_eq!(setup["policy"], "fifo");
    assert_eq!(setup["fifo_priority"], 50);
    assert_eq!(setup["memory_locked"], true);
    assert_eq!(setup["cpu_dma_latency_us"], 0);
    assert_eq!(setup["caption"], REALTIME);
    let scenarios = r["scenarios"].as_array().expect("scenarios");
    assert_eq!(scenarios.len(), 1);
    let cell = &scenarios[0];
    assert_eq!(cell["transport"], "udp");
    assert_eq!(cell["size"], 64);
    let runs = cell["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let s = &runs[0];
    assert_eq!(s["repeat"], 1);
    assert_eq!(s["mode"], "closed-loop");
    let lost = s["lost"].as_u64().unwrap();
    let stats = &s["stats"];
    assert_eq!(stats["count"].as_u64().unwrap() + lost, 200, "{s}");
    assert_eq!(lost, 0, "no reply should be lost on loopback: {s}");
    assert_eq!(s["warmup_done"].as_u64().unwrap() + s["warmup_lost"].as_u64().unwrap(), 20);
    let (min, p50, p99, max) = (f(stats, "min_us"), f(stats, "p50_us"), f(stats, "p99_us"), f(stats, "max_us"));
    assert!(min > 0.0 && min <= p50 && p50 <= p99 && p99 <= max, "{stats}");
    assert!(f(stats, "q1_us") <= p50 && p50 <= f(stats, "q3_us"), "{stats}");
    // One run: the cell's figures are the run's, without a spread.
    let figures = &cell["figures"];
    assert_eq!(figures["p50_us"]["median"], stats["p50_us"]);
    assert!(figures["p50_spread"].is_null(), "{figures}");
    assert_eq!(figures["flagged"], false);
    assert_eq!(r["config"]["count"], 200);
    assert_eq!(r["config"]["repeat"], 1);
    assert!(r["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(r["started"].as_str().unwrap() <= r["finished"].as_str().unwrap());

    let table = std::fs::read_to_string(dir.join("table.md")).unwrap();
    assert!(table.lines().next().unwrap().contains(REALTIME), "{table}");
    assert!(table.contains("| MIN | AVG | MAX | STD | PER99 | P50 | P99.9 | P50 min–max | P50 spread |"), "{table}");
    assert!(table.contains("| udp 64 |") && table.contains("| — | 200 | 0 |"), "{table}");
    for file in ["summary.csv", "runs.csv"] {
        let csv = std::fs::read_to_string(dir.join(file)).unwrap();
        assert_eq!(csv.lines().count(), 2, "{csv}");
        assert!(csv.lines().next().unwrap().ends_with(",setup"), "{csv}");
        assert!(csv.lines().nth(1).unwrap().ends_with(&format!(",\"{REALTIME}\"")), "{file}: {csv}");
    }
    assert!(!dir.join("raw-udp-64-r1.csv").exists(), "raw samples only with --raw");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn normal_scheduling_is_recorded_in_every_result_file() {
    let dir = fresh_dir("normal");
    let out = partita(&[
        "bench", "rr", "--transport", "udp", "--size", "64", "--count", "50", "--warmup", "5", "--repeat", "1",
        "--normal-scheduling", "--out", dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = json(&dir.join("results.json"));
    let setup = &r["setup"];
    assert_eq!(setup["name"], "normal", "{setup}");
    assert_eq!(setup["policy"], "normal");
    assert!(setup["fifo_priority"].is_null() && setup["cpu_dma_latency_us"].is_null(), "{setup}");
    assert_eq!(setup["memory_locked"], false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().next().unwrap().contains(NORMAL), "{stdout}");
    let table = std::fs::read_to_string(dir.join("table.md")).unwrap();
    assert_eq!(table, stdout.trim_end_matches('\n').to_string() + "\n", "table.md is the table printed");
    for file in ["summary.csv", "runs.csv"] {
        let csv = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(csv.lines().skip(1).all(|l| l.ends_with(&format!(",\"{NORMAL}\""))), "{file}: {csv}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn raw_samples_of_every_repeat_and_open_loop() {
    let dir = fresh_dir("raw");
    let out = partita(&[
        "bench", "rr", "--transport", "udp", "--size", "1k", "--count", "100", "--warmup", "10", "--rate", "2000",
        "--raw", "--repeat", "2", "--normal-scheduling", "--out", dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = json(&dir.join("results.json"));
    let cell = &r["scenarios"][0];
    assert_eq!(cell["size"], 1024);
    let runs = cell["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (k, s) in runs.iter().enumerate() {
        assert_eq!(s["repeat"], k as u64 + 1);
        assert_eq!(s["mode"], "open-loop");
        let samples = s["samples_ns"].as_array().unwrap();
        let lost = s["lost"].as_u64().unwrap();
        assert_eq!(samples.len() as u64 + lost, 100);
        // Measured sequence numbers follow the warm-up ones.
        assert!(samples.iter().all(|p| p[0].as_u64().unwrap() >= 10));
        let raw = std::fs::read_to_string(dir.join(format!("raw-udp-1KiB-r{}.csv", k + 1))).unwrap();
        assert_eq!(raw.lines().count(), samples.len() + 1);
    }
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
        (&["--fifo", "90"], "below the plan executors"),
        (&["--fifo", "10", "--busy-poll"], "busy-poll"),
        (&["--busy-poll"], "--normal-scheduling"),
        (&["--repeat", "0"], "--repeat"),
        (&["--repeat", "many"], "--repeat"),
        (&["--normal-scheduling", "--fifo", "50"], "--fifo 50 with --normal-scheduling"),
        (&["--normal-scheduling", "--cpu-dma-latency", "0"], "--cpu-dma-latency 0 with --normal-scheduling"),
        (&["--cpu-dma-latency", "2000000"], "--cpu-dma-latency"),
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
        "bench", "rr", "--transport", "dds,dds-waitset", "--size", "64", "--count", "100", "--warmup", "10",
        "--repeat", "1", "--normal-scheduling", "--out", dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = json(&dir.join("results.json"));
    for (i, name) in ["dds", "dds-waitset"].iter().enumerate() {
        let s = &r["scenarios"][i]["runs"][0];
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
        "10", "--fifo", "10", "--cpu-dma-latency", "0", "--repeat", "1", "--out", dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = json(&dir.join("results.json"));
    assert_eq!(r["setup"]["fifo_priority"], 10);
    assert_eq!(r["setup"]["cpu_dma_latency_us"], 0);
    for (i, name) in ["udp", "udp-relay", "dds", "dds-routed"].iter().enumerate() {
        let s = &r["scenarios"][i]["runs"][0];
        assert_eq!(s["transport"], *name);
        let answered = s["stats"]["count"].as_u64().unwrap_or(0);
        assert!(answered > 0, "{s}");
        assert_eq!(answered + s["lost"].as_u64().unwrap(), 100, "{s}");
    }
    let table = std::fs::read_to_string(dir.join("table.md")).unwrap();
    assert!(table.contains("real-time setup: SCHED_FIFO 10, memory locked, /dev/cpu_dma_latency held at 0 µs"), "{table}");
    let row = table.lines().find(|l| l.starts_with("| 64 |")).unwrap_or_else(|| panic!("no hop row: {table}"));
    assert_eq!(row.split('|').filter(|c| !c.trim().is_empty()).count(), 4, "{row}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ddsperf_reference_end_to_end() {
    // Needs Cyclone's ddsperf (Debian cyclonedds-tools, installed by scripts/setup.sh).
    let dir = fresh_dir("ddsperf");
    let out = partita(&[
        "bench", "rr", "--transport", "ddsperf", "--size", "64", "--count", "1000", "--repeat", "1", "--normal-scheduling",
        "--out", dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = json(&dir.join("results.json"));
    let s = &r["scenarios"][0]["runs"][0];
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
fn repeats_interleave_the_transports_size_by_size_and_cells_are_listed_by_transport() {
    // At one size every transport runs once, then every transport again (A B A B), before the next size; the
    // result files list the cells by transport, each with its runs in order.
    let dir = fresh_dir("order");
    let out = partita(&[
        "bench", "rr", "--transport", "udp,udp-relay", "--size", "64,128", "--count", "50", "--warmup", "5",
        "--repeat", "2", "--normal-scheduling", "--out", dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let ran: Vec<&str> = stderr.lines().filter_map(|l| l.split(':').next()).filter(|s| s.starts_with("udp")).collect();
    assert_eq!(
        ran,
        [
            "udp 64, run 1 of 2",
            "udp-relay 64, run 1 of 2",
            "udp 64, run 2 of 2",
            "udp-relay 64, run 2 of 2",
            "udp 128, run 1 of 2",
            "udp-relay 128, run 1 of 2",
            "udp 128, run 2 of 2",
            "udp-relay 128, run 2 of 2"
        ],
        "{stderr}"
    );
    let r = json(&dir.join("results.json"));
    assert_eq!(r["config"]["repeat"], 2);
    let cells = r["scenarios"].as_array().unwrap();
    let listed: Vec<String> = cells.iter().map(|s| format!("{} {}", s["transport"].as_str().unwrap(), s["size"])).collect();
    assert_eq!(listed, ["udp 64", "udp 128", "udp-relay 64", "udp-relay 128"]);
    for c in cells {
        let repeats: Vec<u64> = c["runs"].as_array().unwrap().iter().map(|r| r["repeat"].as_u64().unwrap()).collect();
        assert_eq!(repeats, [1, 2], "{c}");
        // The cell's p50 is the median of its runs' p50s (their mean, for two), with their min and max.
        let p50s: Vec<f64> = c["runs"].as_array().unwrap().iter().map(|r| f(&r["stats"], "p50_us")).collect();
        let p = &c["figures"]["p50_us"];
        assert_eq!(f(p, "min"), p50s[0].min(p50s[1]), "{c}");
        assert_eq!(f(p, "max"), p50s[0].max(p50s[1]), "{c}");
        assert!((f(p, "median") - (p50s[0] + p50s[1]) / 2.0).abs() < 1e-9, "{c}");
        let spread = f(&c["figures"], "p50_spread");
        assert_eq!(c["figures"]["flagged"], spread > 0.10, "{c}");
        assert_eq!(c["figures"]["samples"].as_u64().unwrap() + c["figures"]["lost"].as_u64().unwrap(), 100, "{c}");
    }
    // The table shows each cell's p50 range and spread.
    let table = std::fs::read_to_string(dir.join("table.md")).unwrap();
    assert!(table.contains("2 runs per scenario, the transports interleaved"), "{table}");
    for row in table.lines().filter(|l| l.starts_with("| udp")) {
        let cols: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(cols[9].contains('–') && cols[10].contains('%'), "{row}");
    }
    let runs = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    assert_eq!(runs.lines().count(), 9, "{runs}");
    let _ = std::fs::remove_dir_all(&dir);
}
