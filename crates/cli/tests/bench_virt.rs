//! `partita bench virt` (paper 003) runs a reduced matrix end to end, every row a system under the supervisor
//! (the VM row under TCG), and writes a report that parses; bad arguments exit with status 2.
use std::process::Command;

fn partita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partita"))
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn bench_virt_measures_every_placement_at_every_point_and_checks_the_servers_work() {
    let out = std::env::temp_dir().join(format!("partita-bench-virt-{}", std::process::id()));
    let run = partita()
        .args(["bench", "virt", "--placements", "ideal,native,process,process-plan,vm", "--sizes", "64,512", "--works", "0,50"])
        .args(["--count", "40", "--warmup", "5", "--accel", "tcg", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("virt.json")).unwrap()).unwrap();
    assert_eq!(v["accel"], "tcg");
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 5 * 2 * 2);
    let done = |c: &serde_json::Value| c["runs"][0]["server_cpu_mean_us"].as_f64().unwrap();
    for c in cells {
        let run = &c["runs"][0];
        assert_eq!(run["summary"]["count"], 40, "{c}");
        assert_eq!(run["timeouts"], 0, "{c}");
        // The work done is the work asked for: the server's CPU time. Natively and in a process partition within
        // a factor of two either way, and next to none when none is asked. A TCG guest's clock and calibration
        // are emulated (measured 100 µs for 50 asked): there only more work than with none asked.
        let asked = c["work_us"].as_f64().unwrap();
        if c["placement"] == "vm" {
            if asked > 0.0 {
                let none = cells.iter().find(|x| x["placement"] == "vm" && x["size"] == c["size"] && x["work_us"] == 0.0).unwrap();
                assert!(done(c) > done(none), "{c}");
            }
        } else if asked > 0.0 {
            assert!(done(c) > asked / 2.0 && done(c) < asked * 2.0, "asked {asked} µs, done {} µs: {c}", done(c));
        } else {
            assert!(done(c) < 25.0, "{c}");
        }
    }
    let runs = v["runs"].as_array().unwrap();
    for r in runs {
        assert_eq!(r["lateness_p99_us"].is_number(), r["placement"] == "process-plan", "window lateness where there is a plan: {r}");
        // What the host did during the run, beside its figures.
        assert!(r["disturbance"]["seconds"].as_f64().unwrap() > 0.0 && r["disturbance"]["steal_pct"].as_f64().unwrap() >= 0.0, "{r}");
    }
    let md = std::fs::read_to_string(out.join("virt.md")).unwrap();
    for want in ["VM rows: **tcg**", "## Overhead split", "## Share of a 10 ms deadline", "## Share of a 100 ms deadline", "## Paper 003 beside this run", "| connect s | window lateness p99 µs | host |", "DDS, server in a VM partition, alone (tcg)"] {
        assert!(md.contains(want), "{want}:\n{md}");
    }
    for f in ["virt-64.svg", "virt-512.svg", "virt-64.png", "virt-512.png"] {
        assert!(std::fs::metadata(out.join(f)).map(|m| m.len() > 200).unwrap_or(false), "{f}");
    }
    assert!(std::fs::read_dir(out.join("raw")).unwrap().flatten().any(|e| e.file_name().to_string_lossy().ends_with(".server.log")));
    let status = partita().arg("status").output().unwrap();
    assert!(!String::from_utf8_lossy(&status.stdout).contains("virt-"), "a system was left: {}", String::from_utf8_lossy(&status.stdout));
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn bad_bench_virt_arguments_exit_with_status_2_and_say_which() {
    for (args, says) in [
        (&["--placements", "docker"][..], "--placements"),
        (&["--placements", "vm,vm"], "twice"),
        (&["--sizes", "0"], "--sizes"),
        (&["--sizes", "1MiB"], "--sizes"),
        (&["--works=-5"], "--works"),
        (&["--count", "0"], "--count"),
        (&["--count", "2000000"], "--count"),
        (&["--sizes", "64,64"], "once"),
        (&["--works", "0,10,0"], "once"),
        (&["--cpu", "4096"], "--cpu"),
        (&["--cpu", "0", "--client-cpu", "0"], "CPU of its own"),
        (&["--accel", "xen"], "--accel"),
    ] {
        let o = partita().args(["bench", "virt"]).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
