//! `partita down`, `partita status` and `partita app probe` through the binary (needs root for down).
use std::process::Command;

fn partita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partita"))
}

#[test]
fn the_probe_records_when_it_ran() {
    let out = std::env::temp_dir().join(format!("partita-probe-{}.txt", std::process::id()));
    let status = partita().args(["app", "probe"]).arg(&out).arg("200").status().unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let runs: Vec<(u64, u64)> = text
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    assert!(!runs.is_empty());
    assert!(runs.iter().all(|(a, b)| a <= b), "an interval ends before it starts");
    assert!(runs.windows(2).all(|w| w[0].1 < w[1].0), "intervals overlap or are out of order");
    let span = runs.last().unwrap().1 - runs[0].0;
    assert!(span >= 200_000_000, "the probe stopped early: {span} ns");
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn down_removes_a_crashed_supervisors_namespace_and_cgroup() {
    let ns = format!("partita-clitest{}", std::process::id());
    assert!(Command::new("ip").args(["netns", "add", &ns]).status().unwrap().success());
    let cg = std::path::PathBuf::from("/sys/fs/cgroup/pids/partita/clitest").join(std::process::id().to_string());
    let unified = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let cg = if unified { std::path::PathBuf::from("/sys/fs/cgroup/partita/clitest").join(std::process::id().to_string()) } else { cg };
    std::fs::create_dir_all(&cg).unwrap();
    let out = partita().arg("down").output().unwrap();
    // Whatever happened, leave nothing behind.
    let _ = Command::new("ip").args(["netns", "del", &ns]).output();
    let _ = std::fs::remove_dir(&cg);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list = String::from_utf8(Command::new("ip").args(["netns", "list"]).output().unwrap().stdout).unwrap();
    assert!(!list.contains(&ns), "namespace survived `partita down`");
    assert!(!cg.exists(), "cgroup survived `partita down`");
    let status = partita().arg("status").output().unwrap();
    assert!(status.status.success());
    assert!(!String::from_utf8_lossy(&status.stdout).contains("partita network namespaces"));
}
