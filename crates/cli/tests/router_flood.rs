//! `partita bench router-flood` end to end: a reliable flood crosses the router without loss, and the result
//! file carries the router's memory readings.
use std::process::Command;

#[test]
fn reliable_flood_crosses_the_router_without_loss() {
    let json = std::env::temp_dir().join(format!("partita-flood-test-{}.json", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["bench", "router-flood", "--seconds", "1", "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let (written, received) = (r["written"].as_u64().unwrap(), r["received"].as_u64().unwrap());
    assert!(written > 0);
    assert_eq!(received, written, "reliable keep-all samples must all arrive: {r}");
    assert!(r["router_rss_kib_max"].as_u64().unwrap() >= r["router_rss_kib_start"].as_u64().unwrap());
    assert!(r["router_rss_kib_start"].as_u64().unwrap() > 0, "{r}");
}

#[test]
fn bad_flood_arguments_exit_with_status_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_partita")).args(["bench", "router-flood", "--seconds", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--seconds"));
}
