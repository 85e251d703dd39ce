//! `partita bench dbe` (paper 002's DDS Benchmark Environment) end to end: every implementation's agents
//! round-trip at two payload sizes on one node and, where they can, on two nodes, federated through two routing
//! daemons and centralized through Fast DDS's discovery server; throughput cells count what arrived; a rerun
//! skips what is measured; `bench dbe report` redraws the figures from the results tree; the interoperability
//! matrix is asserted; bad matrix files and arguments exit with status 2 naming the file, field and fix.
use std::path::{Path, PathBuf};
use std::process::Command;

fn partita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partita"))
}

/// Runs a command to its end; its output and its pid (the systems it builds are named `dbe-<pid>-…`).
fn run_with_pid(cmd: &mut Command) -> (std::process::Output, u32) {
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    (child.wait_with_output().unwrap(), pid)
}

/// None of the systems the runs `pids` built is left (a crashed earlier run's leftovers are not ours to judge).
fn assert_no_system_left(pids: &[u32]) {
    let status = partita().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    for pid in pids {
        assert!(!text.contains(&format!("dbe-{pid}-")), "a system was left: {text}");
    }
}

mod common;
use common::TempDir;

const MATRIX: &str = r#"
[defaults]
count = 200
warmup = 20
sizes = [64, 4096]
seconds = 0.3

[[test]]
name = "every-implementation"
metric = "latency"
implementations = ["cyclone", "fastdds", "fastdds-shm", "rustdds", "iceoryx2"]
nodes = [1, 2]

[[test]]
name = "udp"
metric = "latency"
implementations = ["udp"]
reliability = ["best-effort"]
nodes = [1, 2]

[[test]]
name = "architectures"
metric = "latency"
implementations = ["cyclone", "fastdds"]
architectures = ["federated", "centralized"]
nodes = [2]

[[test]]
name = "one-to-two"
metric = "latency"
implementations = ["cyclone"]
history = ["keep-all"]
subscribers = [2]

[[test]]
name = "throughput"
metric = "throughput"
implementations = ["cyclone", "fastdds"]
reliability = ["reliable"]
history = ["keep-all"]
"#;

fn cell(dir: &Path, id: &str) -> serde_json::Value {
    let path = dir.join(format!("{id}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

fn machine_dir(results: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(results).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    assert_eq!(dirs.len(), 1, "one machine's tree: {dirs:?}");
    dirs[0].clone()
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn every_driver_round_trips_and_a_rerun_skips_what_is_measured() {
    let t = TempDir::new("dbe", "run");
    let matrix = t.0.join("m.toml");
    std::fs::write(&matrix, MATRIX).unwrap();
    let results = t.0.join("results");
    let (run, first) = run_with_pid(partita().args(["bench", "dbe"]).arg(&matrix).arg("--results").arg(&results).arg("--no-interop"));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let dir = machine_dir(&results);
    let latency = |imp: &str, arch: &str, nodes: u32, qos: &str, subs: u32, size: usize| {
        cell(&dir, &format!("latency-{imp}-{arch}-{nodes}n-{qos}-x{subs}-{size}B"))
    };
    let mut checked = 0;
    for (imp, arch, nodes, qos, subs) in [
        ("cyclone", "decentralized", 1, "rel-keep-last1-vol", 1),
        ("cyclone", "decentralized", 2, "rel-keep-last1-vol", 1),
        ("fastdds", "decentralized", 1, "rel-keep-last1-vol", 1),
        ("fastdds", "decentralized", 2, "rel-keep-last1-vol", 1),
        ("fastdds-shm", "decentralized", 1, "rel-keep-last1-vol", 1),
        ("rustdds", "decentralized", 1, "rel-keep-last1-vol", 1),
        ("rustdds", "decentralized", 2, "rel-keep-last1-vol", 1),
        ("iceoryx2", "decentralized", 1, "rel-keep-last1-vol", 1),
        ("udp", "decentralized", 1, "be-keep-last1-vol", 1),
        ("udp", "decentralized", 2, "be-keep-last1-vol", 1),
        ("cyclone", "federated", 2, "rel-keep-last1-vol", 1),
        ("fastdds", "federated", 2, "rel-keep-last1-vol", 1),
        ("fastdds", "centralized", 2, "rel-keep-last1-vol", 1),
        ("cyclone", "decentralized", 1, "rel-keep-all-vol", 2),
    ] {
        for size in [64, 4096] {
            let c = latency(imp, arch, nodes, qos, subs, size);
            assert!(c["error"].is_null(), "{c}");
            // What the host did during the group's run, beside the figures.
            assert!(c["disturbance"]["seconds"].as_f64().unwrap() > 0.0 && c["disturbance"]["steal_pct"].as_f64().unwrap() >= 0.0, "{c}");
            let s = &c["latency"]["stats"];
            assert_eq!(s["count"].as_u64().unwrap() + c["latency"]["lost"].as_u64().unwrap(), 200, "{c}");
            assert!(s["min_us"].as_f64().unwrap() > 0.0 && s["max_us"].as_f64().unwrap() < 1e6, "{c}");
            // Every agent reported its process figures; the leading one its discovery time.
            let procs = c["processes"].as_array().unwrap();
            assert!(procs.len() > subs as usize, "{c}");
            assert!(procs.iter().all(|p| p["max_rss_kib"].as_u64().unwrap() > 0), "{c}");
            assert!(procs.iter().any(|p| p["role"] == "ping" && p["discovery_ns"].as_u64().unwrap() > 0), "{c}");
            let raw = std::fs::read_to_string(dir.join(format!("{}.rtt.csv", c["id"].as_str().unwrap()))).unwrap();
            assert_eq!(raw.lines().count() as u64, s["count"].as_u64().unwrap());
            checked += 1;
        }
    }
    assert_eq!(checked, 28);
    // Reliable cells lose nothing.
    for imp in ["cyclone", "fastdds", "rustdds"] {
        assert_eq!(latency(imp, "decentralized", 1, "rel-keep-last1-vol", 1, 64)["latency"]["lost"], 0);
    }
    for imp in ["cyclone", "fastdds"] {
        for size in [64, 4096] {
            let c = cell(&dir, &format!("throughput-{imp}-decentralized-1n-rel-keep-all-vol-x1-{size}B"));
            let tp = &c["throughput"];
            assert!(tp["sent"].as_u64().unwrap() > 10, "{c}");
            assert_eq!(tp["received"][0], tp["sent"], "reliable keep-all delivers every sample: {c}");
        }
    }
    // Shared memory and raw UDP have no second node; that is said, not measured.
    let report = std::fs::read_to_string(dir.join("report/report.md")).unwrap();
    for want in ["## Figs. 7 and 8: one node", "## Figs. 9 and 10: two nodes", "## Architectures", "## 1-to-n latency", "## Throughput", "## CPU, memory and discovery", "| agents: CPU ms, peak RSS MiB | host |", "## Not applicable", "shared memory reaches only processes of one node"] {
        assert!(report.contains(want), "{want}:\n{report}");
    }
    for f in ["fig7-latency-one-node", "fig8-jitter-one-node", "fig9-latency-two-nodes", "fig10-jitter-two-nodes"] {
        assert!(std::fs::metadata(dir.join(format!("report/{f}.svg"))).map(|m| m.len() > 500).unwrap_or(false), "{f}");
    }

    // A rerun measures nothing: every cell is in the tree.
    let (again, second) = run_with_pid(partita().args(["bench", "dbe"]).arg(&matrix).arg("--results").arg(&results).arg("--no-interop"));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(stderr.contains("0 groups to measure"), "{stderr}");
    assert!(stderr.contains("0 cells measured"), "{stderr}");

    // The report is redrawn from the stored results alone.
    std::fs::remove_dir_all(dir.join("report")).unwrap();
    let report = partita().args(["bench", "dbe", "report", "--results"]).arg(&results).output().unwrap();
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    assert!(String::from_utf8_lossy(&report.stdout).contains("## Figs. 9 and 10: two nodes"));
    assert!(dir.join("report/fig10-jitter-two-nodes.svg").exists());

    assert_no_system_left(&[first, second]);
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_interoperability_matrix_is_measured_and_each_pair_judged() {
    let t = TempDir::new("dbe", "interop");
    let matrix = t.0.join("m.toml");
    // The smallest matrix: one cell, so that the run is the interoperability matrix.
    std::fs::write(&matrix, "[[test]]\nname = \"one\"\nmetric = \"latency\"\nimplementations = [\"udp\"]\nreliability = [\"best-effort\"]\nsizes = [64]\ncount = 10\nwarmup = 1\n").unwrap();
    let results = t.0.join("results");
    // A pair that does not work waits the whole match timeout: 8 s instead of 20 keeps the test short (working
    // pairs match in about a second here).
    let (run, pid) = run_with_pid(partita().args(["bench", "dbe"]).arg(&matrix).arg("--results").arg(&results).args(["--interop-match-timeout", "8s"]));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert_no_system_left(&[pid]);
    let dir = machine_dir(&results);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("interop.json")).unwrap()).unwrap();
    let pairs = v["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 9);
    let works = |w: &str, r: &str| {
        let p = pairs.iter().find(|p| p["writer"] == w && p["reader"] == r).unwrap();
        (p["works"].as_bool().unwrap(), p.to_string())
    };
    // What works today; RustDDS's writer towards the others is judged and reported, whichever way it goes.
    for (w, r) in [("cyclone", "cyclone"), ("cyclone", "fastdds"), ("fastdds", "cyclone"), ("fastdds", "fastdds"), ("cyclone", "rustdds"), ("fastdds", "rustdds"), ("rustdds", "rustdds")] {
        let (ok, p) = works(w, r);
        assert!(ok, "{w} → {r} must work: {p}");
    }
    for p in pairs {
        let ok = p["works"].as_bool().unwrap();
        assert_eq!(ok, p["received"].as_u64().unwrap() > 0 && p["note"] == "", "{p}");
    }
    let report = std::fs::read_to_string(dir.join("report/report.md")).unwrap();
    assert!(report.contains("## Interoperability"), "{report}");
}

#[test]
fn bad_matrix_files_and_arguments_exit_2_naming_the_file_the_field_and_the_fix() {
    let t = TempDir::new("dbe", "bad");
    let cases = [
        ("[[test]]\nname = \"a\"\nmetric = \"latency\"\nimplementations = [\"opendds\"]\n", "test[0].implementations", "use cyclone, fastdds"),
        ("[[test]]\nname = \"a\"\nmetric = \"latency\"\nimplementations = [\"cyclone\"]\nsizes = [32768]\n", "test[0].sizes", "16384"),
        ("[[test]]\nname = \"a\"\nmetric = \"latency\"\nimplementations = [\"cyclone\"]\nnodes = [3]\n", "test[0].nodes", "use 1"),
        ("[[test]]\nname = \"a\"\nmetric = \"latency\"\nimplementations = [\"cyclone\"]\nspeed = 1\n", "unknown field", "unknown keys are refused"),
        ("[defaults]\ncount = 10\n", "test", "add at least one [[test]]"),
    ];
    for (i, (text, field, fix)) in cases.iter().enumerate() {
        let m = t.0.join(format!("bad{i}.toml"));
        std::fs::write(&m, text).unwrap();
        let out = partita().args(["bench", "dbe"]).arg(&m).arg("--results").arg(t.0.join("r")).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        assert!(err.contains(&*m.display().to_string()) && err.contains(field) && err.contains(fix), "{text}: {err}");
    }
    let missing = partita().args(["bench", "dbe", "/nonexistent/m.toml"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/m.toml"));
    let report = partita().args(["bench", "dbe", "report", "--results"]).arg(t.0.join("empty")).arg("--machine").arg("nowhere").output().unwrap();
    assert_eq!(report.status.code(), Some(2), "{}", String::from_utf8_lossy(&report.stderr));
    for bad in ["0s", "500ms", "soon"] {
        let out = partita().args(["bench", "dbe", "--interop-match-timeout", bad]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "--interop-match-timeout {bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--interop-match-timeout"), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // An agent's bad argument names the flag.
    let agent = partita().args(["app", "dbe-agent", "--impl", "cyclone", "--role", "ping", "--sizes", "0"]).output().unwrap();
    assert_eq!(agent.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&agent.stderr).contains("--sizes"));
    // Nothing was measured or written for a bad matrix.
    assert!(!t.0.join("r").exists());
}
