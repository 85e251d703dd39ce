//! The video-surveillance system of paper 001 under the supervisor (needs root): recording goes on through a
//! request flood and while the routing partition is killed and restarted, a native monitor gets the right frame through the routing
//! partition, a damaged recording is skipped on restart, and `partita demo` / `partita bench paper` work.
use partita_apps::monitor::Report;
use partita_apps::pattern;
use partita_apps::ring::{segment_path, RingConfig, RingWriter};
use partita_lab::run::run_until_monitor_exits;
use partita_paper::scenario::{Params, Scenario};
use partita_supervisor::UpOptions;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_partita");

mod common;
use common::TempDir;

fn assert_nothing_left(system: &str) {
    let left = partita_supervisor::cleanup::find(Some(system)).expect("listing leftovers");
    assert!(left.netns.is_empty() && left.cgroups.is_empty(), "left behind: {:?} {:?}", left.netns, left.cgroups);
}

fn now_ns() -> i64 {
    partita_apps::recorder::now_ns()
}

/// The pid of `partition` in the supervisor's state file, once it is written.
fn pid_of(state: &Path, partition: &str) -> Option<i32> {
    let text = std::fs::read_to_string(state.join("state.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["partitions"].as_array()?.iter().find(|p| p["partition"] == partition)?["pid"].as_i64().map(|p| p as i32)
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn recording_goes_on_through_a_request_flood_and_a_killed_routing_partition_and_the_monitor_gets_the_right_frame() {
    let dir = TempDir::new("surv", "kill");
    let params = Params {
        reply_size: 8 << 10,
        count: 0,
        warmup: 0,
        timeout_ms: 300,
        monitor_json: dir.0.join("monitor.json"),
        ring: dir.0.join("ring"),
        save_frame: Some(dir.0.join("last.png")),
        recorder_cpu: 0,
        routing_cpu: 1,
        memory_bytes: 256 << 20,
        monitor_extra: ["--rate", "50", "--duration", "9", "--connect-timeout", "6"].map(String::from).to_vec(),
        setup: partita_lab::setup::Setup::default(),
        plan: None,
    };
    // The paper's system (its routing table protects the recorder with a per-monitor request rate), with a
    // second native node that floods the recorder with requests through the routing partition all along.
    let name = format!("t{}kill", std::process::id());
    // The flooder is held to 200 requests a second (the paper's file allows 2000 per monitor, about what the
    // recorder can answer through this plan, so a flood at that rate starved the monitor in some runs, with the
    // landed router too): the recorder keeps room for the monitor's 50 a second.
    let text = Scenario::PartitionedRouting
        .toml(&params)
        .replacen("name = \"paper-partitioned\"", &format!("name = {name:?}"), 1)
        .replacen("max_rate_per_instance = 2000", "max_rate_per_instance = 200", 1)
        + "\n[[node]]\nname = \"flooder\"\ncommand = [\"partita\", \"app\", \"monitor\", \"--flood\", \"--duration\", \"20\", \"--name\", \"flooder\"]\n";
    assert!(text.contains("max_rate_per_instance = 200\n"), "{text}");
    let system = partita_system::parse(&text, "kill.toml", &partita_system::Host::this_machine()).unwrap();
    assert_eq!(system.name, name);
    // The recorder partition records into its own state directory (it cannot write the host's files).
    let recording = Scenario::PartitionedRouting.ring(&system, &params).expect("a recorder partition");
    let _ = std::fs::remove_dir_all(&recording);
    let _state = TempDir(recording.parent().and_then(|p| p.parent()).expect("/var/lib/partita/<system>").to_path_buf());
    let state_root = dir.0.join("state");
    let state = state_root.join(&system.name);
    // Kill the routing partition 3 s after the recorder has started recording, and note when.
    let killer = {
        let (state, ring) = (state.clone(), recording.clone());
        std::thread::spawn(move || -> Option<(i32, i64)> {
            let deadline = Instant::now() + Duration::from_secs(25);
            while Instant::now() < deadline {
                let recording = std::fs::read_dir(&ring).map(|d| d.count() > 0).unwrap_or(false);
                if let (Some(pid), true) = (pid_of(&state, "routing"), recording) {
                    std::thread::sleep(Duration::from_secs(3));
                    let at = now_ns();
                    // The routing partition's pid, a process this test's supervisor started.
                    let _ = partita_os::process::send_signal(pid, libc::SIGKILL);
                    return Some((pid, at));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            None
        })
    };
    let options = UpOptions { partita: Some(EXE.into()), ..UpOptions::new(&state_root) };
    let done = run_until_monitor_exits(&system, &options, "monitor", &params.monitor_json, Duration::from_secs(60));
    let killed = killer.join().unwrap();
    assert_nothing_left(&system.name);
    let done = done.expect("the system ran and the monitor reported");
    let (killed_pid, killed_at) = killed.expect("the routing partition was killed");
    let events = std::fs::read_to_string(state.join("events.jsonl")).unwrap();
    let flood = std::fs::read_to_string(state.join("flooder.log")).unwrap_or_default();
    let routing_log = std::fs::read_to_string(state.join("routing.log")).unwrap_or_default();
    let monitor_log = std::fs::read_to_string(state.join("monitor.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&state);
    assert!(
        events.lines().any(|l| l.contains("\"routing\"") && l.contains("\"restart\"")),
        "the health monitor restarted the routing partition (pid {killed_pid}): {events}"
    );
    let r: Report = done.report;
    // The flooder's requests are held to its own rate by the routing partition, so the monitor is answered
    // while the flood goes on (it would give up after 6 s without an answer; the flood lasts until the end) —
    // slowly: the flood still fills the partitions' windows and queues (see docs/paper.md).
    eprintln!("monitor under the flood: {} answered, {} timed out, p50 {:.0} µs", r.answered, r.timeouts, r.summary.p50_us);
    assert!(r.answered >= 1, "the monitor was answered during the flood: {r:?}");
    // The last frame reached the monitor through the restarted routing partition and is the frame it claims.
    let last = r.last_frame.expect("a frame");
    assert!(
        last.captured_ns > killed_at,
        "the last frame was captured {:.3} s before the kill of the routing partition (at unix ns {killed_at}):\nevents:\n{events}\nrouting log:\n{routing_log}\nmonitor log:\n{monitor_log}",
        (killed_at - last.captured_ns) as f64 / 1e9
    );
    assert_eq!(last.content_ok, Some(true), "the frame's pixels are the test pattern of its camera, number and time");
    let png = std::fs::read(dir.0.join("last.png")).expect("the monitor saved the frame");
    let img = pattern::decode_png(&png).unwrap();
    assert_eq!(img, pattern::render(last.camera, last.frame, last.captured_ns, last.width, last.height));
    // The recording has no hole around the kill: consecutive frames at most 0.5 s apart (10 fps).
    // The flood lasts longer than the monitor: it reports its count every second until the system goes down.
    let flooded: u64 = flood.rsplit("flooded ").next().and_then(|t| t.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(flooded > 10_000, "the flooder wrote requests all along: {flood}");
    // The recorder partition's state directory is its image, unmounted now that the system is down.
    let _inspect = partita_supervisor::state_image::StateImage::mount_to_inspect(recording.parent().unwrap()).unwrap();
    let (ring, report) = RingWriter::open(RingConfig::new(&recording, 16 << 20)).unwrap();
    assert_eq!(report.damaged, 0);
    let index = ring.index();
    let idx = index.lock().unwrap();
    // While the system ran: up to the monitor's exit (teardown stops the plan before it kills the partitions,
    // which can leave the recorder frozen for a moment first).
    let monitor_exit_ns = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["partition"] == "monitor" && v["event"] == "exit")
        .and_then(|v| v["unix_ms"].as_i64())
        .expect("the monitor's exit is in the event log")
        * 1_000_000;
    let times: Vec<i64> = idx.entries().map(|e| e.meta.captured_ns).filter(|&t| t <= monitor_exit_ns).collect();
    assert!(times.iter().any(|&t| t < killed_at - 1_000_000_000) && times.iter().any(|&t| t > killed_at + 1_000_000_000));
    let worst_gap = times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    let at = times.windows(2).position(|w| w[1] - w[0] == worst_gap).unwrap();
    eprintln!(
        "worst recording gap: {} ms over {} frames, after frame {at}, {} ms after the first frame, {} ms from the kill",
        worst_gap / 1_000_000,
        times.len(),
        (times[at] - times[0]) / 1_000_000,
        (times[at] - killed_at) / 1_000_000
    );
    assert!(worst_gap < 500_000_000, "recording paused for {} ms", worst_gap / 1_000_000);
}

fn recorder(ring: &Path, seconds: &str, domain: &str) -> String {
    let out = Command::new(EXE)
        .args(["app", "recorder", "--ring", ring.to_str().unwrap(), "--ring-size", "4MiB", "--fps", "20", "--duration", seconds])
        .args(["--domain", domain])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "recorder failed: {text}");
    text
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_damaged_or_torn_recording_is_detected_and_skipped_on_restart() {
    let dir = TempDir::new("surv", "ring");
    let ring = dir.0.join("ring");
    let first = recorder(&ring, "1.5", "61");
    assert!(first.contains("0 records kept"), "{first}");
    let seg = segment_path(&ring, 0);
    let mut bytes = std::fs::read(&seg).unwrap();
    assert!(bytes.len() > 4096, "the first run recorded frames");
    // Damage a byte in the middle of an early record, and leave half a record at the end (a torn write).
    bytes[200] ^= 0xff;
    let torn = bytes[..300].to_vec();
    bytes.extend_from_slice(&torn);
    std::fs::write(&seg, &bytes).unwrap();
    let second = recorder(&ring, "0.5", "61");
    let line = second.lines().find(|l| l.contains("opened")).unwrap();
    let num = |after: &str| -> u64 {
        let i = line.find(after).unwrap();
        line[..i].trim_end().rsplit(' ').next().unwrap().trim_start_matches(':').trim().parse().unwrap()
    };
    assert!(num(" records kept") > 0, "{line}");
    assert!(num(" damaged stretches") >= 1, "{line}");
    assert!(num(" bytes cut") > 0, "the torn end is cut: {line}");
    // And the ring is whole again: every record reads back.
    let (_w, report) = RingWriter::open(RingConfig::new(&ring, 4 << 20)).unwrap();
    assert_eq!(report.truncated_bytes, 0);
    assert!(report.records > 0);
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn demo_prints_the_response_time_table_and_saves_a_frame_a_person_can_open() {
    let dir = TempDir::new("surv", "demo");
    let out = Command::new(EXE)
        .args(["demo", "--count", "200", "--warmup", "20", "--out", dir.0.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "demo failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("| monitor | dds | 220 | 200 | 0 |"), "{stdout}");
    assert!(stdout.contains("matches the test pattern"), "{stdout}");
    let report: Report = serde_json::from_str(&std::fs::read_to_string(dir.0.join("monitor.json")).unwrap()).unwrap();
    assert_eq!(report.samples_ns.len(), 200);
    let f = report.last_frame.unwrap();
    let img = pattern::decode_png(&std::fs::read(dir.0.join("last-frame.png")).unwrap()).unwrap();
    assert_eq!(img, pattern::render(f.camera, f.frame, f.captured_ns, f.width, f.height));
    assert_nothing_left("video-surveillance");
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn bench_paper_writes_the_tables_the_prediction_and_the_sweep() {
    let dir = TempDir::new("surv", "paper");
    let out = Command::new(EXE)
        .args(["bench", "paper", "--scenarios", "network,trad-routing,partitioned,multicore", "--count", "200", "--warmup", "20"])
        .args(["--repeat", "2", "--sweep", "1KiB,64KiB", "--sweep-count", "30", "--sweep-warmup", "5", "--out", dir.0.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench paper failed: {stdout}{stderr}");
    // The rows are measured interleaved: every scenario once, then every scenario again.
    let order: Vec<&str> = stderr.lines().filter(|l| l.contains(", run ") && l.ends_with("warm-up…")).map(|l| l.split(':').next().unwrap()).collect();
    let titles = ["NETWORK", "TRADITIONAL DDS WITH ROUTING", "PARTITIONED DDS WITH ROUTING", "PARTITIONED DDS WITH ROUTING, ROUTING ON ITS OWN CPU"];
    let want: Vec<String> = (1..=2).flat_map(|k| titles.iter().map(move |t| format!("{t}, run {k} of 2"))).collect();
    assert_eq!(order, want, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.0.join("results.json")).unwrap()).unwrap();
    // The default setup, granted by the system files.
    let setup = &v["setup"];
    assert_eq!((setup["name"].as_str(), setup["fifo_priority"].as_u64(), setup["cpu_dma_latency_us"].as_u64()), (Some("real-time"), Some(50), Some(0)), "{setup}");
    assert!(setup["applied"].as_str().unwrap().starts_with("granted by each scenario's system file"), "{setup}");
    assert_eq!(v["repeat"], 2);
    let tables = v["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 4);
    for row in tables {
        let runs = row["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{row}");
        assert_eq!(row["answered"], 440, "{row}");
        for (k, run) in runs.iter().enumerate() {
            assert_eq!(run["repeat"], k as u64 + 1);
            assert_eq!(run["answered"], 220, "{run}");
            let raw_path = run["raw"].as_str().unwrap();
            assert!(raw_path.ends_with(&format!("-r{}.json", k + 1)), "{raw_path}");
            let raw: Report = serde_json::from_str(&std::fs::read_to_string(dir.0.join(raw_path)).unwrap()).unwrap();
            assert_eq!(raw.samples_ns.len(), 200);
        }
        // The row's figures are the medians of its runs', within their min and max.
        let (lo, mid, hi) = (row["low"]["p50_us"].as_f64().unwrap(), row["summary"]["p50_us"].as_f64().unwrap(), row["high"]["p50_us"].as_f64().unwrap());
        assert!(lo <= mid && mid <= hi && lo > 0.0, "{row}");
        let spread = row["p50_spread"].as_f64().expect("two runs have a spread");
        assert!((spread - (hi - lo) / mid).abs() < 1e-9, "{row}");
        assert_eq!(row["flagged"], spread > 0.10);
        assert!(row["summary"]["p99_us"].as_f64().unwrap() > 0.0);
    }
    // The sweep: one run per point, the 1 KiB point being the table's row.
    let sweep = v["sweep"].as_array().unwrap();
    assert_eq!(sweep.len(), 8);
    assert!(sweep.iter().all(|r| r["runs"].as_array().unwrap().len() == if r["reply_size"] == 1024 { 2 } else { 1 }));
    assert_eq!(v["prediction"]["window_delay"]["max_us"], 2200.0);
    assert!(v["prediction"]["p99_within_bound"].is_boolean());
    assert_eq!(v["prediction"]["runs"], 2);
    // The routing partition's thaw herd, traced under the paper's plan: every thread of the partition (the
    // router's and two Cyclone DDS participants') ran after each thaw, some microseconds after it.
    let herd = &v["prediction"]["thaw_herd"];
    assert!(herd["threads"].as_u64().unwrap() >= 10, "{herd}");
    assert!(herd["herds"].as_u64().unwrap() >= 300, "about 667 routing window starts a second: {herd}");
    let (p50, p99, max) = (herd["p50_us"].as_f64().unwrap(), herd["p99_us"].as_f64().unwrap(), herd["max_us"].as_f64().unwrap());
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{herd}");
    let (bound, without) = (v["prediction"]["bound_us"].as_f64().unwrap(), v["prediction"]["bound_without_herd_us"].as_f64().unwrap());
    assert!((bound - without - p99).abs() < 1e-6, "the bound adds the herd's p99: {bound} {without} {herd}");
    assert!(stderr.contains("The routing partition's thaw herd"), "{stderr}");
    assert!(v["multicore_penalty_removed"].is_array());
    let ratios = v["ratios"].as_array().unwrap();
    assert!(ratios.iter().any(|r| r["name"] == "partitioned/traditional with routing"), "{ratios:?}");
    assert!(ratios.iter().all(|r| r["per_repeat"]["runs"] == 2), "{ratios:?}");
    let svg = std::fs::read_to_string(dir.0.join("fig5.svg")).unwrap();
    assert_eq!(svg.matches("<polyline").count(), 8, "max and p99 lines of four scenarios");
    // The report: the setup, and every table row with its p50 range and spread.
    let md = std::fs::read_to_string(dir.0.join("report.md")).unwrap();
    assert!(md.contains("## Table 2: performance test") && md.contains("PARTITIONED DDS WITH ROUTING"));
    assert!(md.contains("Setup: real-time setup: SCHED_FIFO 50, memory locked, /dev/cpu_dma_latency held at 0 µs; granted by each scenario's system file"), "{md}");
    assert!(md.contains("| P50 | P50 min–max | P50 spread |"), "{md}");
    assert!(md.contains("by the thaw herd") && md.contains("without the herd"), "{md}");
    for t in titles {
        let row = md.lines().find(|l| l.starts_with(&format!("| {t} |"))).unwrap_or_else(|| panic!("no row {t}: {md}"));
        let cols: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(cols[8].contains('–') && cols[9].contains('%'), "{row}");
    }
    for (file, lines) in [("results.csv", 1 + 4 + 4), ("runs.csv", 1 + 8 + 4)] {
        let csv = std::fs::read_to_string(dir.0.join(file)).unwrap();
        assert_eq!(csv.lines().count(), lines, "{file}: {csv}");
        assert!(csv.lines().skip(1).all(|l| l.ends_with(",\"real-time setup: SCHED_FIFO 50, memory locked, /dev/cpu_dma_latency held at 0 µs\"")), "{file}: {csv}");
    }
    for s in ["network", "trad-routing", "partitioned", "multicore"] {
        assert_nothing_left(&format!("paper-{s}"));
    }
    // The herd's trace instance went with it.
    let dead: Vec<String> = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.strip_prefix("partita-").and_then(|r| r.split('-').next()).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()))
        .collect();
    assert!(dead.is_empty(), "trace instances left: {dead:?}");
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn bench_paper_under_normal_scheduling_says_so() {
    let dir = TempDir::new("surv", "paper-normal");
    let out = Command::new(EXE)
        .args(["bench", "paper", "--scenarios", "network", "--count", "50", "--warmup", "5", "--sweep", "", "--repeat", "1"])
        .args(["--normal-scheduling", "--out", dir.0.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench paper failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.0.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["setup"]["name"], "normal");
    assert!(v["setup"]["applied"].as_str().unwrap().contains("cpu_dma_latency = \"off\""), "{}", v["setup"]);
    assert_eq!(v["tables"][0]["runs"].as_array().unwrap().len(), 1);
    assert!(v["tables"][0]["p50_spread"].is_null(), "one run has no spread");
    assert!(stdout.contains("Setup: normal scheduling: SCHED_OTHER"), "{stdout}");
    assert!(stdout.contains("measured once"), "{stdout}");
    let row = stdout.lines().find(|l| l.starts_with("| NETWORK |")).unwrap();
    assert_eq!(row.split('|').map(str::trim).nth(9), Some("—"), "{row}");
    assert_nothing_left("paper-network");
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn bench_paper_measures_a_plan_from_a_file_beside_the_papers_and_predicts_both() {
    let dir = TempDir::new("surv", "paper-plan");
    let plan_dir = dir.0.join("plan");
    let made = Command::new(EXE).args(["plan", "optimise", "--service-time", "120us", "--max-overhead", "10", "--out", plan_dir.to_str().unwrap()]).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let file = plan_dir.join("video-surveillance-optimised.toml");
    let out = Command::new(EXE)
        .args(["bench", "paper", "--scenarios", "trad-routing,partitioned", "--plan", file.to_str().unwrap(), "--count", "300", "--warmup", "30"])
        .args(["--sweep", "", "--repeat", "1", "--out", dir.0.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench paper failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.0.join("results.json")).unwrap()).unwrap();
    let tables = v["tables"].as_array().unwrap();
    assert_eq!(tables.iter().map(|r| r["key"].as_str().unwrap()).collect::<Vec<_>>(), ["trad-routing", "partitioned", "plan"]);
    let plan_row = &tables[2];
    assert_eq!(plan_row["answered"], 330, "{plan_row}");
    // The file's plan has more, shorter windows than the paper's: more switches per ms, a smaller window delay.
    assert!(plan_row["switches_per_ms"].as_f64().unwrap() > tables[1]["switches_per_ms"].as_f64().unwrap(), "{plan_row}");
    assert!(plan_row["window_delay"]["max_us"].as_f64().unwrap() < 2200.0, "{plan_row}");
    for row in &tables[1..] {
        let p = &row["predicted"];
        assert!(p["mean_us"].as_f64().unwrap() > 0.0 && p["p99_us"].as_f64().unwrap() >= p["p50_us"].as_f64().unwrap(), "{row}");
        let entry = &row["runs"][0]["window_entry_us"];
        assert!(entry[0].as_f64().unwrap() > 0.0 && entry[1].as_f64().unwrap() >= entry[0].as_f64().unwrap(), "{row}");
        let windows = format!("{}-1024-r1-windows.json", row["key"].as_str().unwrap());
        let w: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.0.join("raw").join(windows)).unwrap()).unwrap();
        assert!(w["window_entry_ns"].as_array().unwrap().len() > 100);
    }
    assert!(tables[0]["predicted"].is_null(), "the unpartitioned row is the model's input");
    let sch = &v["schedule"];
    assert!(sch["switch_measured"].as_bool().unwrap() && sch["switch_samples"].as_u64().unwrap() > 100, "{sch}");
    assert_eq!(sch["service_samples"], 300);
    assert_eq!(sch["model"]["background"][0]["partition"], "recorder");
    assert!(sch["layouts"].as_array().unwrap().len() > 20);
    let ratios = v["ratios"].as_array().unwrap();
    assert!(ratios.iter().any(|r| r["name"] == "the --plan plan/traditional with routing"), "{ratios:?}");
    assert!(stdout.contains("## The schedule model: predicted beside measured"), "{stdout}");
    assert!(stdout.contains("| PARTITIONED DDS WITH ROUTING, THE PLAN OF --plan |"), "{stdout}");
    assert!(std::fs::read_to_string(dir.0.join("schedule.svg")).unwrap().starts_with("<svg"));
    for s in ["trad-routing", "partitioned", "plan"] {
        assert_nothing_left(&format!("paper-{s}"));
    }
}

#[test]
fn bad_bench_paper_arguments_exit_with_status_2() {
    let three = std::env::temp_dir().join(format!("partita-three-{}.toml", std::process::id()));
    std::fs::write(
        &three,
        "[system]\nname = \"three\"\n[[module]]\nname = \"m\"\ncpus = [0]\n[[module.partition]]\nname = \"a\"\ncommand = [\"true\"]\n\
         [[module.partition]]\nname = \"b\"\ncommand = [\"true\"]\n[[module.plan]]\ncpu = 0\nmajor_frame = \"1ms\"\n\
         [[module.plan.window]]\npartition = \"a\"\nstart = \"0us\"\nduration = \"500us\"\n\
         [[module.plan.window]]\npartition = \"b\"\nstart = \"500us\"\nduration = \"500us\"\n",
    )
    .unwrap();
    let multicore = format!("{}/../../examples/video-surveillance-multicore.toml", env!("CARGO_MANIFEST_DIR"));
    for (args, needle) in [
        (&["--plan", "/nonexistent/plan.toml"][..], "--plan /nonexistent/plan.toml"),
        (&["--plan", three.to_str().unwrap()][..], "exactly `recorder` and `routing`"),
        (&["--plan", &multicore][..], "nothing to lay out"),
        (&["--switch-cost", "quick"][..], "--switch-cost \"quick\""),
        (&["--repeat", "0"][..], "--repeat"),
        (&["--normal-scheduling", "--cpu-dma-latency", "0"][..], "--cpu-dma-latency 0 with --normal-scheduling"),
        (&["--fifo", "95"][..], "--fifo 95"),
    ] {
        let out = Command::new(EXE).args(["bench", "paper"]).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let _ = std::fs::remove_file(three);
}

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_monitor_gets_the_recorded_frame_nearest_the_time_it_asks_for() {
    let dir = TempDir::new("surv", "ago");
    let mut rec = Command::new(EXE)
        .args(["app", "recorder", "--ring", dir.0.join("ring").to_str().unwrap(), "--ring-size", "4MiB", "--fps", "20"])
        .args(["--duration", "20", "--domain", "62"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Let two seconds of frames be recorded, then ask for the one captured a second before the request.
    std::thread::sleep(Duration::from_secs(2));
    let json = dir.0.join("m.json");
    let asked_at = now_ns();
    let out = Command::new(EXE)
        .args(["app", "monitor", "--ago", "1", "--count", "5", "--warmup", "0", "--quiet", "--domain", "62"])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    // The recorder this test started.
    let _ = partita_os::process::send_signal(rec.id() as i32, libc::SIGTERM);
    let _ = rec.wait();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let f = r.last_frame.unwrap();
    let age_ms = (asked_at - f.captured_ns) / 1_000_000;
    // 20 fps: the nearest frame is within 50 ms of the time asked for (the ask happens a little after asked_at).
    assert!((900..=1200).contains(&age_ms), "asked for 1 s ago, got a frame {age_ms} ms older than the request");
    assert_eq!(f.content_ok, Some(true));
}
