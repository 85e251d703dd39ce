//! `partita bench vm` runs its five rows end to end (a few requests each, the VM rows under TCG) and writes a
//! report that parses; bad arguments exit with status 2 (root for the run).
use std::process::Command;

fn partita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partita"))
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn bench_vm_measures_native_process_and_vm_rows_and_names_the_acceleration() {
    let out = std::env::temp_dir().join(format!("partita-bench-vm-{}", std::process::id()));
    let run = partita()
        .args(["bench", "vm", "--count", "60", "--warmup", "10", "--repeat", "1", "--accel", "tcg", "--normal-scheduling", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("vm.json")).unwrap()).unwrap();
    assert_eq!(v["accel"], "tcg");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    for row in rows {
        let run = &row["runs"][0];
        assert_eq!(run["summary"]["count"], 60, "{row}");
        assert!(run["summary"]["mean_us"].as_f64().unwrap() > 0.0, "{row}");
        let vm = row["placement"] == "vm";
        assert_eq!(run["boot_s"].is_number(), vm, "a boot time for the VM rows only: {row}");
        assert_eq!(run["lateness_us"].is_object(), row["placement"] != "native", "window lateness where there is a plan: {row}");
    }
    let md = std::fs::read_to_string(out.join("vm.md")).unwrap();
    assert!(md.contains("VM acceleration: **tcg**") && md.contains("| PARTITIONED DDS WITH ROUTING | VM partition |"), "{md}");
    assert!(std::fs::read_dir(out.join("raw")).unwrap().flatten().any(|e| e.file_name().to_string_lossy().ends_with(".recorder.log")));
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn bad_bench_vm_arguments_exit_with_status_2() {
    for args in [&["--accel", "xen"][..], &["--count", "0"], &["--size", "big"], &["--cpu", "4096"], &["--repeat", "0"]] {
        let o = partita().args(["bench", "vm"]).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains("error"), "{args:?}");
    }
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_freezing_benchmark_freezes_a_qemu_guest_beside_the_process_rows() {
    let o = partita().args(["isolation-bench", "freeze", "50", "--vm", "tcg"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    let vm: Vec<&str> = text.lines().filter(|l| l.starts_with("cgroup-v2") && l.contains("a QEMU guest")).collect();
    assert_eq!(vm.len(), 1, "{text}");
    // freeze→stopped p50 of the guest: a number of µs
    let stopped = vm[0].split("freeze→stopped ").nth(1).and_then(|r| r.split('/').next()).and_then(|p| p.parse::<f64>().ok());
    assert!(stopped.is_some_and(|s| s > 0.0), "{text}");
    let bad = partita().args(["isolation-bench", "freeze", "5", "--vm", "xen"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
