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
