//! `partita check` through the real binary: a valid file, the built-in default, and a broken file.
use std::process::Command;

fn partita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partita"))
}

fn example(name: &str) -> String {
    format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_valid_file_prints_its_plan_timeline_and_networks() {
    let out = partita().args(["check", &example("video-surveillance.toml")]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for needed in [
        "recorder",
        "routing",
        "700us",
        "1500us",
        "|AAAA",
        "198.18.",
        "partita-video-surveillance-recorder",
        "valid",
        // the windows-only delay of a request from the network, over arrival instants
        "frame-request path routing → recorder → routing: the windows alone add min 701 / mean 1450 / p50 1450 / p99 2185 / max 2200 µs",
    ] {
        assert!(stdout.contains(needed), "missing {needed:?} in:\n{stdout}");
    }
}

#[test]
fn without_a_file_the_builtin_default_is_checked() {
    let out = partita().arg("check").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("video-surveillance"));
}

#[test]
fn a_broken_file_lists_every_error_with_file_line_and_field_and_exits_2() {
    let good = std::fs::read_to_string(example("video-surveillance.toml")).unwrap();
    let bad = good
        .replacen("duration = \"800us\"", "duration = \"900us\"", 1)
        .replacen("memory = \"64MiB\"", "memory = \"1MiB\"", 1);
    let dir = std::env::temp_dir().join(format!("partita-check-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, &bad).unwrap();
    let out = partita().arg("check").arg(&file).output().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line_of = |needle: &str| bad[..bad.find(needle).unwrap()].matches('\n').count() + 1;
    let frame = format!("{}:{}:", file.display(), line_of("duration = \"900us\""));
    assert!(stderr.contains(&frame), "no {frame} in:\n{stderr}");
    assert!(stderr.contains("module[camera-node].plan[0].window[1].duration"), "{stderr}");
    assert!(stderr.contains("major frame"), "{stderr}");
    let mem = format!("{}:{}:", file.display(), line_of("memory = \"1MiB\""));
    assert!(stderr.contains(&mem) && stderr.contains("module[camera-node].partition[recorder].memory"), "{stderr}");
}

#[test]
fn a_file_with_two_named_plans_prints_each_timeline_and_the_resolved_health_monitor() {
    let text = r#"
[system]
name = "modes-check"

[health_monitor]
power_fail = "stop_module"

[[module]]
name = "core"
cpus = [0]
default_plan = "normal"

[module.health_monitor]
hardware_fault = "stop_module"

[[module.partition]]
name = "routing"
command = ["partita", "route"]
io = true
system_partition = true

[module.partition.health_monitor]
exited = { action = "restart_cold", max = 2, within = "60s", then = "switch_plan", plan = "degraded" }

[[module.partition]]
name = "recorder"
command = ["partita", "app", "recorder"]

[[module.plan]]
name = "normal"
cpu = 0
major_frame = "1500us"

[[module.plan.window]]
partition = "routing"
start = "0us"
duration = "700us"

[[module.plan.window]]
partition = "recorder"
start = "700us"
duration = "800us"

[[module.plan]]
name = "degraded"
cpu = 0
major_frame = "1ms"

[[module.plan.window]]
partition = "routing"
start = "0us"
duration = "1ms"
"#;
    let dir = std::env::temp_dir().join(format!("partita-check-modes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("modes.toml");
    std::fs::write(&file, text).unwrap();
    let out = partita().arg("check").arg(&file).output().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for needed in [
        "named plans (2;",
        "plan normal (default: `up` starts with it)\n  CPU 0   |AAAAAAAAAAAAAAAAAAAAAAAAAAAABBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB| 1500us (idle 0us)\n",
        "plan degraded\n  CPU 0   |AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA| 1ms (idle 0us)\n",
        "routing (module core, a system partition: may request plan switches)",
        "    exited              restart_cold, then switch_plan degraded after 2 within 60s   [partition table]",
        "    hardware_fault      stop_module   [module table]",
        "    power_fail          stop_module   [system table]",
        "    deadline_missed     ignore   [default, partition level]",
        "recorder (module core)",
        "    exited              restart (health: at most 3 within 60s, then stop)",
        "    numeric_error       at exit: restart (health: at most 3 within 60s, then stop); raised: ignore   [default, partition level]",
    ] {
        assert!(stdout.contains(needed), "missing {needed:?} in:\n{stdout}");
    }
    // A system with one plan and no table prints neither.
    let plain = partita().args(["check", &example("video-surveillance.toml")]).output().unwrap();
    let plain = String::from_utf8_lossy(&plain.stdout);
    assert!(!plain.contains("named plans") && !plain.contains("health monitor ("), "{plain}");
}
