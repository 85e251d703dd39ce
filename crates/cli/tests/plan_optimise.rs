//! `partita plan optimise` through the real binary: the chosen plan is a file `check` accepts that keeps every
//! partition's share; measured inputs (monitor samples, window entries, background work) are read; bad inputs
//! exit 2 naming the flag or the file and the fix.
use std::path::Path;
use std::process::{Command, Output};

fn partita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partita"))
}

fn example(name: &str) -> String {
    format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

mod common;
use common::TempDir;

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The windows of the first plan of a system file, as (partition, start µs, duration µs), and its frame (µs).
fn plan_of(file: &Path) -> (f64, Vec<(String, f64, f64)>) {
    let v: toml::Value = std::fs::read_to_string(file).unwrap().parse().unwrap();
    let plan = &v["module"][0]["plan"][0];
    let us = |s: &str| -> f64 {
        let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).unwrap());
        num.parse::<f64>().unwrap() * match unit { "ns" => 1e-3, "us" => 1.0, "ms" => 1e3, "s" => 1e6, u => panic!("{u}") }
    };
    let windows = plan["window"].as_array().unwrap().iter().map(|w| (w["partition"].as_str().unwrap().to_string(), us(w["start"].as_str().unwrap()), us(w["duration"].as_str().unwrap()))).collect();
    (us(plan["major_frame"].as_str().unwrap()), windows)
}

#[test]
fn the_chosen_plan_is_a_valid_file_with_the_same_shares_and_more_windows() {
    let dir = TempDir::new("plan", "default");
    let out = partita().args(["plan", "optimise", "--service-time", "80us", "--out", dir.0.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("| chosen |") && stdout.contains("| the file's | 1500.0 | 2 |"), "{stdout}");
    let file = dir.0.join("video-surveillance-optimised.toml");
    let check = partita().args(["check", file.to_str().unwrap()]).output().unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
    let (frame, windows) = plan_of(&file);
    assert!(windows.len() > 2, "{windows:?}");
    for (p, share) in [("recorder", 700.0 / 1500.0), ("routing", 800.0 / 1500.0)] {
        let t: f64 = windows.iter().filter(|w| w.0 == p).map(|w| w.2).sum();
        assert!((t / frame - share).abs() < 1e-9, "{p}: {t} of {frame}");
    }
    // The rest of the file is the built-in system's, comments included.
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.starts_with("# Written by `partita plan optimise`") && written.contains("[[node]]\nname = \"monitor\""), "{written}");
    let csv = std::fs::read_to_string(dir.0.join("candidates.csv")).unwrap();
    assert!(csv.lines().count() > 20, "{csv}");
    assert!(std::fs::read_to_string(dir.0.join("tradeoff.svg")).unwrap().starts_with("<svg"));
    assert!(dir.0.join("plan.md").exists());
}

#[test]
fn measured_inputs_are_read_from_the_benchmarks_files() {
    let dir = TempDir::new("plan", "measured");
    let service = dir.0.join("trad-routing.json");
    std::fs::write(&service, r#"{"samples_ns": [110000, 130000, 150000, 400000]}"#).unwrap();
    let windows = dir.0.join("partitioned-windows.json");
    std::fs::write(&windows, r#"{"window_entry_ns": [30000, 50000, 90000]}"#).unwrap();
    let out = partita()
        .args(["plan", "optimise", &example("video-surveillance.toml"), "--service", service.to_str().unwrap()])
        .args(["--switch-cost", windows.to_str().unwrap(), "--background", "recorder:100ms:600us", "--objective", "p99", "--arrivals", "open"])
        .args(["--max-overhead", "30", "--out", dir.0.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for needed in ["4 raw samples of", "one of 3 measured window entries", "(median 50us)", "background work: recorder:100ms:600us", "open arrivals", "predicted p99"] {
        assert!(stdout.contains(needed), "{needed:?} missing: {stdout}");
    }
}

#[test]
fn bad_inputs_exit_2_naming_the_flag_and_the_fix() {
    let dir = TempDir::new("plan", "bad");
    let no_samples = dir.0.join("empty.json");
    std::fs::write(&no_samples, r#"{"requests": 3}"#).unwrap();
    let broken = dir.0.join("broken.toml");
    std::fs::write(&broken, "[system]\nname = 3\n").unwrap();
    let out = dir.0.to_str().unwrap().to_string();
    let multicore = example("video-surveillance-multicore.toml");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![], "--service-time 80us"),
        (vec!["--service", "/nonexistent/samples.json"], "--service /nonexistent/samples.json"),
        (vec!["--service", no_samples.to_str().unwrap()], "no `samples_ns`"),
        (vec!["--service-time", "fast"], "--service-time \"fast\""),
        (vec!["--service-time", "80us", "--switch-cost", "quick"], "--switch-cost \"quick\": neither a duration"),
        (vec!["--service-time", "80us", "--background", "nobody:100ms:1ms"], "no partition \"nobody\""),
        (vec!["--service-time", "80us", "--background", "recorder:1ms"], "PARTITION:PERIOD:COST"),
        (vec!["--service-time", "80us", "--background", "recorder:1ms:2ms"], "longer than the cost"),
        (vec!["--service-time", "80us", "--path", "routing,nobody"], "\"nobody\", which no plan schedules"),
        (vec!["--service-time", "80us", "--cpu", "7"], "no plan schedules CPU 7"),
        (vec!["--service-time", "80us", "--min-frame", "2ms", "--max-frame", "1ms"], "--min-frame below --max-frame"),
        (vec!["--service-time", "80us", "--min-window", "10ms"], "lower --min-window"),
        (vec!["--service-time", "80us", "--max-overhead", "200"], "--max-overhead 200"),
        (vec![&multicore, "--service-time", "80us"], "nothing to lay out"),
        (vec![broken.to_str().unwrap(), "--service-time", "80us"], "broken.toml"),
    ];
    for (args, needle) in cases {
        let o = partita().args(["plan", "optimise", "--out", &out]).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
    }
    assert!(!dir.0.join("video-surveillance-optimised.toml").exists(), "a refused search writes nothing");
}
