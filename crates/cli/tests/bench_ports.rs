//! `partita bench ports` end to end through the real binary: its writer processes on one CPU, its reader on the
//! other, every row and comparison present with positive figures, the result files, and bad arguments refused
//! before anything runs. No timing thresholds (the goals are reported, not asserted): only that every
//! figure exists and is ordered.
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;
use common::TempDir;

fn partita(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_partita")).args(args).output().expect("the partita binary runs")
}

/// Runs `partita ARGS` to its end; its output and its pid (which names its iceoryx2 resources).
fn partita_with_pid(args: &[&str]) -> (Output, u32) {
    let child = Command::new(env!("CARGO_BIN_EXE_partita")).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    (child.wait_with_output().unwrap(), pid)
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("results.json is JSON")
}

fn f(v: &serde_json::Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// The rows of the default sizes, in the order they run.
const LATENCY_ROWS: [(&str, &str); 9] = [
    ("sampling-poll-copy-64", "| ports sampling: write → polling read | 64 |"),
    ("iceoryx2-poll-copy-64", "| iceoryx2: publish → polling receive | 64 |"),
    ("queuing-block-copy-64", "| ports queuing: send → blocking receive | 64 |"),
    ("iceoryx2-event-copy-64", "| iceoryx2: publish + notify → listener wait, receive | 64 |"),
    ("futex-copy-64", "| futex on shared memory: copy, store + wake → wait, copy | 64 |"),
    ("sampling-poll-copy-64KiB", "| ports sampling: write → polling read | 64KiB |"),
    ("sampling-poll-in-place-64KiB", "| ports sampling: write_with (in place) → polling read | 64KiB |"),
    ("queuing-block-copy-64KiB", "| ports queuing: send → blocking receive | 64KiB |"),
    ("queuing-block-in-place-64KiB", "| ports queuing: send_with (in place) → blocking receive | 64KiB |"),
];

const THROUGHPUT_ROWS: [&str; 4] = ["queuing-flood-copy-64", "queuing-flood-copy-1KiB", "queuing-flood-copy-64KiB", "queuing-flood-in-place-64KiB"];

/// Every comparison with the row it belongs to, and whether the issue sets it a goal.
const COMPARISONS: [(&str, &str, bool); 12] = [
    ("sampling-poll-copy-64", "sampling p99 / iceoryx2 polling p99", true),
    ("sampling-poll-copy-64", "sampling p50 / iceoryx2 polling p50", false),
    ("queuing-block-copy-64", "queuing p50 / iceoryx2 event p50", true),
    ("queuing-block-copy-64", "queuing p99 / iceoryx2 event p99", true),
    ("queuing-block-copy-64", "queuing p50 / futex p50", true),
    ("queuing-block-copy-64", "queuing p99 / futex p99", true),
    ("sampling-poll-in-place-64KiB", "sampling write_with p50 / write p50 at 64KiB", false),
    ("sampling-poll-in-place-64KiB", "sampling write_with p99 / write p99 at 64KiB", false),
    ("queuing-block-in-place-64KiB", "queuing send_with p50 / send p50 at 64KiB", false),
    ("queuing-block-in-place-64KiB", "queuing send_with p99 / send p99 at 64KiB", false),
    ("queuing-flood-in-place-64KiB", "queuing send_with MB/s / send MB/s at 64KiB", false),
    ("sampling-poll-copy-64", "sampling p99", true),
];

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn every_row_and_ratio_of_a_small_run_under_the_realtime_setup() {
    let dir = TempDir::new("bench-ports", "small");
    let out_dir = dir.0.join("out");
    let started = std::time::Instant::now();
    let (out, pid) = partita_with_pid(&[
        "bench", "ports", "--count", "200", "--warmup", "20", "--seconds", "0.2", "--repeat", "2", "--plan-count", "300", "--out", out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    assert!(started.elapsed().as_secs() < 10, "a small run takes a few seconds: {:?}", started.elapsed());
    assert_eq!(stderr.lines().filter(|l| l.contains(", run 2 of 2: ")).count(), 13, "a line per run: {stderr}");

    let r = json(&out_dir.join("results.json"));
    assert_eq!(r["benchmark"], "ports");
    assert_eq!(r["setup"]["name"], "real-time", "{}", r["setup"]);
    assert_eq!(r["setup"]["fifo_priority"], 50);
    assert!(r["clock"].as_str().unwrap().contains("CLOCK_MONOTONIC"), "{}", r["clock"]);
    assert_eq!((r["config"]["writer_cpu"].as_u64(), r["config"]["reader_cpu"].as_u64()), (Some(0), Some(1)));
    assert_eq!(r["config"]["repeat"], 2);

    let latency = r["latency"].as_array().expect("latency rows");
    let keys: Vec<&str> = latency.iter().map(|row| row["key"].as_str().unwrap()).collect();
    assert_eq!(keys, LATENCY_ROWS.map(|(k, _)| k), "{keys:?}");
    for row in latency {
        let runs = row["runs"].as_array().unwrap();
        assert_eq!(runs.iter().map(|run| run["repeat"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2], "{row}");
        for run in runs {
            let s = &run["stats"];
            assert_eq!(s["count"], 200, "{run}");
            let (min, p50, p99, p999, max) = (f(s, "min_us"), f(s, "p50_us"), f(s, "p99_us"), f(s, "p99_9_us"), f(s, "max_us"));
            assert!(min > 0.0 && min <= p50 && p50 <= p99 && p99 <= p999 && p999 <= max, "{run}");
            assert!(run["disturbance"]["seconds"].as_f64().unwrap() > 0.0, "{run}");
        }
        let x = &row["figures"];
        assert_eq!((x["runs"].as_u64(), x["samples"].as_u64()), (Some(2), Some(400)), "{x}");
        let m = |key: &str| x[key]["median"].as_f64().unwrap_or_else(|| panic!("{key}: {x}"));
        assert!(m("min_us") > 0.0 && m("p50_us") <= m("p99_us") && m("p99_us") <= m("max_us"), "{x}");
    }
    let throughput = r["throughput"].as_array().expect("throughput rows");
    let keys: Vec<&str> = throughput.iter().map(|row| row["key"].as_str().unwrap()).collect();
    assert_eq!(keys, THROUGHPUT_ROWS, "{keys:?}");
    for row in throughput {
        assert_eq!(row["scenario"]["channel_max"], 65536, "one channel of 64 KiB slots: {row}");
        assert!(row["mb_per_s"]["median"].as_f64().unwrap() > 0.0, "{row}");
        let runs = row["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{row}");
        for run in runs {
            assert!(run["messages"].as_u64().unwrap() > 0, "{run}");
            assert_eq!(run["bytes"].as_u64().unwrap(), run["messages"].as_u64().unwrap() * row["scenario"]["size"].as_u64().unwrap(), "{run}");
            for key in ["seconds", "messages_per_s", "mb_per_s"] {
                assert!(f(run, key) > 0.0, "{key}: {run}");
            }
        }
    }
    let comparisons = r["comparisons"].as_array().expect("comparisons");
    assert_eq!(comparisons.len(), COMPARISONS.len(), "{comparisons:?}");
    for (row, what, has_goal) in COMPARISONS {
        let c = comparisons.iter().find(|c| c["what"] == what).unwrap_or_else(|| panic!("{what} missing: {comparisons:?}"));
        assert_eq!(c["row"], row, "{c}");
        assert!(f(c, "value") > 0.0, "{c}");
        assert_eq!(c["per_run"].as_array().unwrap().len(), 2, "a value per round: {c}");
        assert_eq!(!c["goal"].is_null(), has_goal, "{c}");
    }

    // The table is printed and written; every row names what it is compared with.
    let table = std::fs::read_to_string(out_dir.join("table.md")).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The table, then the row under a plan (a writer and a reader partition the supervisor brought up).
    let (tables, plan) = stdout.split_once("\nQueuing channel under a plan").unwrap_or_else(|| panic!("no row under a plan: {stdout}"));
    assert_eq!(tables.trim(), table.trim());
    let p = json(&out_dir.join("plan.json"));
    assert_eq!(p["seen"], 300, "{p}");
    let g = |k: &str| p[k].as_f64().unwrap();
    assert!(g("p50_us") > 0.0 && g("p50_us") <= g("p99_us") && g("p99_us") <= g("max_us"), "{p}");
    assert!(g("bound_us") > g("gap_us") && g("gap_us") == 700.0, "{p}");
    assert!(plan.contains("| 300 |"), "{plan}");
    for (key, start) in LATENCY_ROWS {
        let line = table.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("{key}: {table}"));
        let compared = match key {
            "sampling-poll-copy-64" => "sampling p99 / iceoryx2 polling p99 = ",
            "queuing-block-copy-64" => "queuing p50 / futex p50 = ",
            "iceoryx2-poll-copy-64" | "iceoryx2-event-copy-64" => "| reference |",
            "futex-copy-64" => "| floor |",
            "sampling-poll-in-place-64KiB" => "sampling write_with p50 / write p50 at 64KiB = ",
            "queuing-block-in-place-64KiB" => "queuing send_with p50 / send p50 at 64KiB = ",
            _ => "| — |",
        };
        assert!(line.contains(compared), "{key}: {line}");
    }
    assert!(table.contains("| sampling p99 ≤ 2 µs |"), "{table}");
    assert!(table.contains("| queuing p50 / iceoryx2 event p50 ≤ 1.2 |"), "{table}");
    assert!(table.contains("real-time setup: SCHED_FIFO 50"), "{table}");
    assert!(table.contains("2 runs per row, the rows interleaved"), "{table}");
    for (file, lines) in [("latency.csv", 9), ("latency-runs.csv", 18), ("throughput.csv", 4), ("throughput-runs.csv", 8), ("comparisons.csv", COMPARISONS.len())] {
        let text = std::fs::read_to_string(out_dir.join(file)).unwrap();
        assert_eq!(text.lines().count(), lines + 1, "{file}: {text}");
    }
    // iceoryx2 left nothing of this run behind.
    let ours = format!("iox2_ports{pid}_");
    let left: Vec<_> = std::fs::read_dir("/dev/shm").unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with(&ours)).collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    for (args, needle) in [
        (&["--count", "0"][..], "--count"),
        (&["--sizes", "8"][..], "at least 16 bytes"),
        (&["--latency-size", "100M"][..], "at most"),
        (&["--seconds", "0"][..], "--seconds"),
        (&["--depth", "0"][..], "--depth 0"),
        (&["--repeat", "0"][..], "--repeat"),
        (&["--depth", "4096"][..], "more than a channel may"),
        (&["--normal-scheduling", "--fifo", "50"][..], "--fifo 50"),
    ] {
        let dir = TempDir::new("bench-ports", "bad");
        let out_dir = dir.0.join("out");
        let mut all = vec!["bench", "ports", "--out", out_dir.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = partita(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!out_dir.exists(), "{args:?}: nothing is written");
    }
}
