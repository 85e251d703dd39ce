//! `partita up --compare-cyclictest` prints cyclictest's wake-up latency on the plan's CPU beside the
//! executor's window-start lateness (root).
use std::process::Command;

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn up_reports_cyclictest_beside_the_executors_lateness() {
    let name = format!("cy{}", std::process::id());
    let file = std::env::temp_dir().join(format!("{name}.toml"));
    std::fs::write(
        &file,
        format!(
            "[system]\nname = \"{name}\"\n[[module]]\nname = \"m\"\ncpus = [1]\n[[module.partition]]\nname = \"a\"\ncommand = [\"sleep\", \"100\"]\n\
             [[module.partition]]\nname = \"b\"\ncommand = [\"sleep\", \"100\"]\n[[module.plan]]\ncpu = 1\nmajor_frame = \"2ms\"\n\
             window = [{{ partition = \"a\", start = \"0ms\", duration = \"1ms\" }}, {{ partition = \"b\", start = \"1ms\", duration = \"1ms\" }}]\n"
        ),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_partita")).args(["up", file.to_str().unwrap(), "--duration", "2", "--compare-cyclictest"]).output().unwrap();
    let _ = std::fs::remove_file(&file);
    let _ = Command::new(env!("CARGO_BIN_EXE_partita")).arg("down").output();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let line = err.lines().find(|l| l.contains("cyclictest on CPU 1 (SCHED_FIFO 90")).unwrap_or_else(|| panic!("{err}"));
    // "N wake-ups" over at least 5 s at 1 ms: about 5000
    let wakeups: u64 = line.split(" wake-ups").next().and_then(|l| l.rsplit(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    assert!(wakeups >= 4000, "{line}");
    let ratio: f64 = line.rsplit("= ").next().and_then(|r| r.trim().parse().ok()).unwrap();
    assert!(ratio > 0.0 && ratio.is_finite(), "{line}");
    assert!(err.contains("plan 0: ") && err.contains("window starts, lateness p50/p99/max"), "{err}");
}

#[test]
fn compare_cyclictest_is_an_option_of_up() {
    let o = Command::new(env!("CARGO_BIN_EXE_partita")).args(["up", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("--compare-cyclictest"));
}
