//! `partita bench router-flood` end to end: a reliable flood crosses the router without loss, with and without
//! batching, and the result file carries the setup, the router's memory readings and its samples per batch.
use std::process::{Command, Output};

fn flood(args: &[&str], json: &std::path::Path) -> (Output, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["bench", "router-flood", "--seconds", "1", "--json", json.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let _ = std::fs::remove_file(json);
    (out, doc)
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn reliable_flood_crosses_the_router_without_loss() {
    let json = std::env::temp_dir().join(format!("partita-flood-test-{}.json", std::process::id()));
    let (out, doc) = flood(&["--repeat", "1"], &json);
    assert_eq!(doc["setup"]["name"], "real-time", "the default setup: {}", doc["setup"]);
    assert_eq!(doc["setup"]["fifo_priority"], 50);
    assert_eq!(doc["setup"]["memory_locked"], true);
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "by default one flood without batching and one with: {doc}");
    for r in runs {
        assert_eq!(r["repeat"], 1);
        let (written, received) = (r["written"].as_u64().unwrap(), r["received"].as_u64().unwrap());
        assert!(written > 0);
        assert_eq!(received, written, "reliable keep-all samples must all arrive: {r}");
        assert!(r["router_rss_kib_max"].as_u64().unwrap() >= r["router_rss_kib_start"].as_u64().unwrap());
        assert!(r["router_rss_kib_start"].as_u64().unwrap() > 0, "{r}");
        assert!(r["router_forwarded"].as_u64().unwrap() >= received, "the router's own count covers the flood: {r}");
        assert!(r["router_cpu_us_per_sample"].as_f64().unwrap() > 0.0, "the router's CPU time was read: {r}");
    }
    let (single, batched) = (&runs[0], &runs[1]);
    assert_eq!(single["config"]["batch_delay"], "0s");
    assert_eq!(single["router_batches"], single["router_forwarded"], "without batching one batch per sample: {single}");
    assert!(batched["samples_per_batch"].as_f64().unwrap() > 1.0, "a flood shares batches when the router batches: {batched}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Router flood: 64 B reliable samples") && text.contains("one run per batch delay"), "{text}");
    assert!(text.contains("real-time setup: SCHED_FIFO 50, memory locked, /dev/cpu_dma_latency held at 0 µs"), "{text}");
    assert!(text.contains("received/s with batch_delay 100us against 0s"), "{text}");
}

#[test]
fn repeated_floods_interleave_the_batch_delays_under_normal_scheduling() {
    let json = std::env::temp_dir().join(format!("partita-flood-test-{}-repeat.json", std::process::id()));
    let (out, doc) = flood(&["--repeat", "2", "--normal-scheduling"], &json);
    assert_eq!(doc["setup"]["name"], "normal", "{}", doc["setup"]);
    assert_eq!(doc["setup"]["memory_locked"], false);
    assert_eq!(doc["repeat"], 2);
    let order: Vec<(String, u64)> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["config"]["batch_delay"].as_str().unwrap().to_string(), r["repeat"].as_u64().unwrap()))
        .collect();
    let want = [("0s", 1), ("100us", 1), ("0s", 2), ("100us", 2)].map(|(d, k)| (d.to_string(), k));
    assert_eq!(order, want, "A B A B, not A A B B");
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for c in cells {
        let r = &c["received_per_s"];
        assert_eq!(r["runs"], 2, "{c}");
        assert!(r["min"].as_f64().unwrap() <= r["median"].as_f64().unwrap() && r["median"].as_f64().unwrap() <= r["max"].as_f64().unwrap());
        assert_eq!(c["flagged"], r["spread"].as_f64().unwrap() > 0.10, "{c}");
    }
    assert_eq!(doc["ratio"]["runs"], 2, "one ratio per repeat: {}", doc["ratio"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 runs per batch delay, the batch delays interleaved") && text.contains("normal scheduling: SCHED_OTHER"), "{text}");
    assert!(text.contains("(per repeat "), "{text}");
}

#[test]
fn bad_flood_arguments_exit_with_status_2() {
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_partita")).args(["bench", "router-flood"]).args(args).output().unwrap();
    let out = run(&["--seconds", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--seconds"));
    let out = run(&["--batch-delay", "0s,soon"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--batch-delay \"soon\"") && err.contains("is not a duration"), "{err}");
    for (args, needle) in [
        (&["--repeat", "0"][..], "--repeat"),
        (&["--normal-scheduling", "--fifo", "10"][..], "--fifo 10 with --normal-scheduling"),
        (&["--fifo", "99"][..], "--fifo 99"),
    ] {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
