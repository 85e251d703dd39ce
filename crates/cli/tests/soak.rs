//! `partita soak` runs the paper's system for a few seconds end to end and its report parses; bad arguments
//! exit 2 (root for the run).
use std::process::Command;

fn partita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partita"))
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_short_soak_of_the_papers_system_reports_every_interval_against_the_floor() {
    let out = std::env::temp_dir().join(format!("partita-soak-{}", std::process::id()));
    // The response limit from a `bench paper` results file (only its bound is read) plus the freeze-ahead lead:
    // 99,900 + 100 = 100,000 µs, far above any response, so that the verdict below is about the plumbing.
    let bench = std::env::temp_dir().join(format!("partita-soak-bench-{}.json", std::process::id()));
    std::fs::write(&bench, r#"{"machine": "another machine", "prediction": {"bound_us": 99900.0, "thaw_herd": {"p99_us": 80.0}}}"#).unwrap();
    let child = partita()
        .args(["soak", "--duration", "3s", "--interval", "1s", "--floor", "1s", "--bound-from", bench.to_str().unwrap(), "--freeze-ahead", "100us"])
        .args(["--wake-ahead", "30us", "--jitter", "1500us", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While it runs: the recorder partition is scheduled as the real-time setup says (SCHED_FIFO 50).
    let state = std::path::Path::new("/run/partita/video-surveillance/state.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(6);
    let mut policy = None;
    while policy.is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let pid = std::fs::read_to_string(state).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()).and_then(|v| {
            v["partitions"].as_array()?.iter().find(|p| p["partition"] == "recorder")?["pid"].as_i64()
        });
        // /proc/PID/stat: field 40 is the real-time priority, 41 the policy (1: SCHED_FIFO); the command name
        // in parentheses comes before them.
        policy = pid.and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()).and_then(|st| {
            let after: Vec<String> = st.rsplit_once(") ")?.1.split_whitespace().map(String::from).collect();
            Some((after.get(37)?.parse::<u32>().ok()?, after.get(38)?.parse::<u32>().ok()?))
        });
    }
    let o = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&bench);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(policy, Some((50, 1)), "the recorder's (rt_priority, policy): {err}");
    assert!(o.status.success(), "{err}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("soak.json")).unwrap()).unwrap();
    assert_eq!(r["limits"]["response_p99_us"].as_f64(), Some(100_000.0), "{}", r["limits"]);
    let from = r["limits"]["response_from"].as_str().unwrap();
    assert!(from.contains("bound 99900 µs, the thaw herd's p99 80 µs in it,") && from.contains("lead 100 µs") && from.contains("another machine"), "{from}");
    let intervals = r["intervals"].as_array().unwrap();
    assert_eq!(intervals.len(), 3, "{err}");
    // The built-in system measures under the real-time setup by default, as every benchmark.
    assert!(r["setup"].as_str().unwrap().starts_with("real-time setup: SCHED_FIFO 50"), "{}", r["setup"]);
    assert_eq!(r["floor"].as_array().unwrap().len(), 1, "one plan, one cyclictest");
    assert!(r["floor"][0][1]["samples"].as_u64().unwrap() >= 900, "{}", r["floor"]);
    for i in intervals {
        // 1 s of a 1500 µs frame with two windows: about 1,333 window starts
        let windows = i["plans"][0]["windows"].as_u64().unwrap();
        assert!((1000..=1400).contains(&windows), "{i}");
        assert!(i["plans"][0]["lateness_p99_us"].as_f64().unwrap() > 0.0);
        let names: Vec<&str> = i["partitions"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["recorder", "routing", "monitor"]);
        assert!(i["partitions"][0]["rss_kib"].as_u64().unwrap() > 0, "{i}");
    }
    let last = &intervals[2];
    assert!(last["monitors"][0]["answered"].as_u64().unwrap() >= 150, "200/s open loop: {last}");
    // The built-in monitor prints every response time: the interval's p99 is over all of them.
    let m = &last["monitors"][0];
    assert!(m["samples"].as_u64().unwrap() >= 150, "{m}");
    let (p50, p99, max) = (m["all_p50_us"].as_f64().unwrap(), m["all_p99_us"].as_f64().unwrap(), m["all_max_us"].as_f64().unwrap());
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{m}");
    assert_eq!(last["response_ok"], true, "{last}");
    // Every response of the run is in the whole run's bins, and each interval counts those above the limit.
    let binned: u64 = r["responses_100us"].as_array().unwrap().iter().map(|b| b[1].as_u64().unwrap()).sum();
    let sampled: u64 = intervals.iter().map(|i| i["monitors"][0]["samples"].as_u64().unwrap()).sum();
    assert_eq!(binned, sampled, "{}", r["responses_100us"]);
    // An interval without a response (the first, while the monitor connects) has no count above the limit.
    for i in intervals {
        let m = &i["monitors"][0];
        assert_eq!(m["over_limit"].is_u64(), m["samples"].as_u64() > Some(0), "{m}");
    }
    let over: u64 = intervals.iter().filter_map(|i| i["monitors"][0]["over_limit"].as_u64()).sum();
    let above: u64 = r["responses_100us"].as_array().unwrap().iter().filter(|b| b[0].as_u64().unwrap() >= 100_000).map(|b| b[1].as_u64().unwrap()).sum();
    assert!(over <= above, "a response above 100,000 µs is in a bin from 100,000 on: {over} > {above}");
    let slowest = intervals.iter().filter_map(|i| i["monitors"][0]["all_max_us"].as_f64()).fold(0.0, f64::max);
    assert_eq!(over > 0, slowest > 100_000.0, "{over} above the limit, the slowest {slowest} µs");
    let jsonl = std::fs::read_to_string(out.join("intervals.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), 3);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Verdict") && md.contains("of 3 intervals") && md.contains("within 100000 µs (bench paper's bound 99900 µs"), "{md}");
    assert!(md.contains("## Responses over the whole run") && md.contains("Above the limit of 100000 µs"), "{md}");
    assert!(md.contains("- setup: real-time setup: SCHED_FIFO 50"), "{md}");
    assert!(md.contains("- plan CPU 0: major frame 1500us, freeze_ahead 100us, wake_ahead 30us"), "{md}");
    assert!(std::fs::read_to_string(out.join("soak.svg")).unwrap().contains("<polyline"));
    std::fs::remove_dir_all(&out).unwrap();
}

/// With --trace-stalls every window start later than 1 ms gets a cause from the kernel's trace, and the trace
/// instance goes with the run. A stall is made on purpose: a SCHED_FIFO 99 shell loop on the plan's CPU holds
/// the executor (SCHED_FIFO 90) off it; the trace must name it.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn stalls_are_traced_and_the_trace_instance_is_removed() {
    let name = format!("st{}", std::process::id());
    let file = std::env::temp_dir().join(format!("{name}.toml"));
    std::fs::write(
        &file,
        format!(
            "[system]\nname = \"{name}\"\n[[module]]\nname = \"m\"\ncpus = [1]\n[[module.partition]]\nname = \"a\"\ncommand = [\"sh\", \"-c\", \"while :; do :; done\"]\n\
             [[module.partition]]\nname = \"b\"\ncommand = [\"sleep\", \"100\"]\n[[module.plan]]\ncpu = 1\nmajor_frame = \"2ms\"\n\
             window = [{{ partition = \"a\", start = \"0ms\", duration = \"1ms\" }}, {{ partition = \"b\", start = \"1ms\", duration = \"1ms\" }}]\n"
        ),
    )
    .unwrap();
    let out = std::env::temp_dir().join(format!("partita-soak-{name}"));
    let soak = partita()
        .args(["soak", file.to_str().unwrap(), "--duration", "4s", "--interval", "2s", "--floor", "0", "--trace-stalls", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the plan runs: a shell loop of some 200 ms at SCHED_FIFO 99 on CPU 1, twice: the executor catches up
    // some 200 window starts after each, planned inside the stall, which are the same stall and not noted again
    // (the ring holds 64).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for _ in 0..2 {
        let hog = Command::new("chrt")
            .args(["-f", "99", "taskset", "-c", "1", "sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(hog.success());
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let o = soak.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&file);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("soak.json")).unwrap()).unwrap();
    let mut held_off = 0;
    for i in r["intervals"].as_array().unwrap() {
        assert_eq!(i["stalls_lost"], 0, "{i}");
        for s in i["stalls"].as_array().expect("a stalls list per interval") {
            assert!(s["lateness_us"].as_f64().unwrap() > 1000.0, "{s}");
            assert!(["no-event", "interrupts", "other-task", "not-preempted", "page-fault", "late-timer", "no-trace", "trace-lost"].contains(&s["cause"].as_str().unwrap()), "{s}");
            let excerpt = std::fs::read_to_string(out.join(s["trace"].as_str().unwrap())).unwrap();
            // Wake-ups are traced for the executor only (the freezer's herds would cost the plan's CPU).
            for l in excerpt.lines().filter(|l| l.contains(" sched_wakeup: ") || l.contains(" sched_waking: ")) {
                assert!(l.contains("comm=partita-plan "), "a wake-up of another task was traced: {l}");
            }
            let detail = s["detail"].as_str().unwrap();
            if s["cause"] == "other-task" && detail.contains("sh (prio 0)") {
                held_off += 1;
            }
        }
    }
    assert!(held_off >= 1, "the FIFO 99 loop must be found holding the executor off: {}", serde_json::to_string_pretty(&r["intervals"]).unwrap());
    let left: Vec<String> = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("partita-")).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "trace instances left: {left:?}");
    std::fs::remove_dir_all(&out).unwrap();
    // The partitions' logs stay for inspection until `partita down`; this test's go with it.
    let _ = std::fs::remove_dir_all(format!("/run/partita/{name}"));
}

#[test]
fn bad_soak_arguments_exit_with_status_2() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance.toml");
    let missing = std::env::temp_dir().join(format!("partita-soak-missing-{}.json", std::process::id()));
    // A results file of `bench paper` without the scenarios that predict a bound.
    let no_bound = std::env::temp_dir().join(format!("partita-soak-nobound-{}.json", std::process::id()));
    std::fs::write(&no_bound, r#"{"machine": "m", "prediction": null}"#).unwrap();
    for args in [
        &["--duration", "0"][..],
        &["--duration", "10s", "--interval", "1m"],
        &["--floor", "x"],
        &["--rate", "-1"],
        &["--jitter", "1.5"],
        &["--jitter", "lots"],
        &["--freeze-ahead", "200us"],
        &["--freeze-ahead", "x"],
        &["--wake-ahead", "30us"],
        &["--freeze-ahead", "30us", "--wake-ahead", "30us"],
        &["--freeze-ahead", "100us", "--wake-ahead", "soon"],
        &["--freeze-ahead", "100us", "--wake-ahead", "2ms"],
        &[example, "--wake-ahead", "10us"],
        &["--lateness-vs-floor", "0.5"],
        &["--duration", "1y"],
        &["--fifo", "95"],
        &[example, "--normal-scheduling"],
        &[example, "--jitter", "1ms"],
        &[example, "--freeze-ahead", "50us"],
        &[example, "--bound-from", missing.to_str().unwrap()],
        &["--bound-from", missing.to_str().unwrap()],
        &["--bound-from", no_bound.to_str().unwrap()],
        &["--bound-from", no_bound.to_str().unwrap(), "--max-response-us", "2000"],
    ] {
        let o = partita().arg("soak").args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    // The errors name the file, the field and the fix.
    let o = partita().args(["soak", "--bound-from"]).arg(&no_bound).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(no_bound.to_str().unwrap()) && err.contains("prediction.bound_us") && err.contains("--scenarios trad-routing,partitioned"), "{err}");
    let o = partita().args(["soak", "--bound-from"]).arg(&missing).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(missing.to_str().unwrap()) && err.contains("results.json"), "{err}");
    let _ = std::fs::remove_file(&no_bound);
}
