//! `partita bench router-flood` end to end: a reliable flood crosses the router without loss, with and without
//! batching, and the result file carries the router's memory readings and its samples per batch.
use std::process::Command;

#[test]
fn reliable_flood_crosses_the_router_without_loss() {
    let json = std::env::temp_dir().join(format!("partita-flood-test-{}.json", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["bench", "router-flood", "--seconds", "1", "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "by default one flood without batching and one with: {doc}");
    for r in runs {
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
    assert!(text.contains("received/s with batch_delay 100us against 0s"), "{text}");
}

#[test]
fn bad_flood_arguments_exit_with_status_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_partita")).args(["bench", "router-flood", "--seconds", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--seconds"));
    let out = Command::new(env!("CARGO_BIN_EXE_partita")).args(["bench", "router-flood", "--batch-delay", "0s,soon"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--batch-delay \"soon\"") && err.contains("is not a duration"), "{err}");
}
