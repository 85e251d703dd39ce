//! `partita up --trace FILE` end to end (root): the paper's system runs ten seconds with `--trace` and
//! `--timeline`; the trace passes a schema check of the Chrome trace-event format (what Perfetto's and
//! chrome://tracing's importers need: fields per phase, named tracks, slices of no negative length, each track's
//! events in time order), and its executed-window slices are the executor's own record of window starts: the
//! same starts, partitions in the same order, at the same instants. An unwritable trace path builds nothing.
//!
//! (Perfetto's trace_processor would be the better judge, but its Python package downloads its binary on first
//! use, which this machine cannot: the schema check stands in for it.)
mod common;
use common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// The systems of this file's tests run on the same CPU: one at a time.
static CPU0: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    CPU0.lock().unwrap_or_else(|e| e.into_inner())
}

/// The checks the importers make of a trace-event file, as far as this writer uses the format; what it holds
/// as `(tid → thread name, events)`.
fn schema_check(v: &Value) -> Result<(BTreeMap<u64, String>, Vec<Value>), String> {
    if v["displayTimeUnit"] != "ns" || !v["metadata"].is_object() {
        return Err("displayTimeUnit \"ns\" and a metadata object".into());
    }
    let events = v["traceEvents"].as_array().ok_or("no traceEvents array")?;
    let mut names = BTreeMap::new();
    let mut last_ts: BTreeMap<String, f64> = BTreeMap::new();
    let mut used = BTreeSet::new();
    for (i, e) in events.iter().enumerate() {
        let bad = |what: &str| format!("event {i} ({e}): {what}");
        let ph = e["ph"].as_str().ok_or_else(|| bad("no ph"))?;
        e["name"].as_str().ok_or_else(|| bad("no name"))?;
        e["pid"].as_u64().ok_or_else(|| bad("no numeric pid"))?;
        if ph == "M" {
            match e["name"].as_str() {
                Some("process_name") => {
                    e["args"]["name"].as_str().ok_or_else(|| bad("a process without a name"))?;
                }
                Some("thread_name") => {
                    let tid = e["tid"].as_u64().ok_or_else(|| bad("a thread name without tid"))?;
                    names.insert(tid, e["args"]["name"].as_str().ok_or_else(|| bad("a thread without a name"))?.to_string());
                }
                Some("thread_sort_index") => {
                    e["args"]["sort_index"].as_u64().ok_or_else(|| bad("a sort index that is no number"))?;
                }
                _ => return Err(bad("an unknown metadata event")),
            }
            continue;
        }
        let ts = e["ts"].as_f64().ok_or_else(|| bad("no numeric ts"))?;
        let track = match ph {
            "X" => {
                let dur = e["dur"].as_f64().ok_or_else(|| bad("a slice without dur"))?;
                if dur < 0.0 {
                    return Err(bad("a slice of negative length"));
                }
                let tid = e["tid"].as_u64().ok_or_else(|| bad("a slice without tid"))?;
                used.insert(tid);
                format!("thread {tid}")
            }
            "i" => {
                if e["s"] != "t" && e["s"] != "p" && e["s"] != "g" {
                    return Err(bad("an instant without scope t, p or g"));
                }
                let tid = e["tid"].as_u64().ok_or_else(|| bad("an instant without tid"))?;
                used.insert(tid);
                format!("thread {tid}")
            }
            "C" => {
                let args = e["args"].as_object().ok_or_else(|| bad("a counter without args"))?;
                if args.is_empty() || !args.values().all(Value::is_number) {
                    return Err(bad("a counter whose args are not all numbers"));
                }
                format!("counter {}", e["name"])
            }
            _ => return Err(bad("a phase this writer does not use")),
        };
        let last = last_ts.entry(track.clone()).or_insert(f64::MIN);
        if ts < *last {
            return Err(bad(&format!("{track}: ts {ts} before the one before it, {last}")));
        }
        *last = ts;
    }
    if let Some(t) = used.iter().find(|t| !names.contains_key(t)) {
        return Err(format!("track {t} has events and no thread_name"));
    }
    Ok((names, events.clone()))
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_trace_of_the_paper_system_opens_as_trace_events_and_its_windows_are_the_executors_record() {
    let _cpu = one_at_a_time();
    let dir = TempDir::new("trace", "paper");
    let name = format!("trc{}", std::process::id() % 100_000);
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance.toml")).unwrap();
    let text = text.replace("name = \"video-surveillance\"", &format!("name = \"{name}\""));
    assert!(text.contains(&name));
    // The module's partitions in file order: the timeline numbers them so.
    let doc: toml::Value = toml::from_str(&text).unwrap();
    let partitions: Vec<String> = doc["module"][0]["partition"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_string()).collect();
    let file = dir.0.join("system.toml");
    std::fs::write(&file, &text).unwrap();
    let (trace, timeline) = (dir.0.join("run.trace.json"), dir.0.join("timeline.jsonl"));
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["up", file.to_str().unwrap(), "--duration", "10", "--trace", trace.to_str().unwrap(), "--timeline", timeline.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "partita up failed: {stderr}");
    let bytes = std::fs::metadata(&trace).unwrap().len();
    eprintln!("trace: {bytes} bytes for a 10 s run ({:.0} bytes/s); {}", bytes as f64 / 10.0, stderr.lines().find(|l| l.contains("window slices")).unwrap_or("-"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).expect("the trace is one JSON object");
    let (threads, events) = schema_check(&v).unwrap_or_else(|e| panic!("schema: {e}"));
    assert_eq!(v["metadata"]["lost_window_records"], 0, "a 10 ms drain of an 8192-record ring loses nothing");
    let actual_tid = *threads.iter().find(|(_, n)| *n == "CPU 0 plan (actual)").expect("a CPU 0 actual track").0;
    assert!(threads.values().any(|n| n == "CPU 0 plan (planned)"), "{threads:?}");
    assert!(threads.values().any(|n| n == "health"), "{threads:?}");
    let slices: Vec<(String, u64)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == actual_tid)
        .map(|e| (e["name"].as_str().unwrap().to_string(), (e["ts"].as_f64().unwrap() * 1e3).round() as u64))
        .collect();
    let starts: Vec<(String, u64)> = std::fs::read_to_string(&timeline)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|s| (partitions[s["partition"].as_u64().unwrap() as usize].clone(), s["switched_ns"].as_u64().unwrap()))
        .collect();
    assert!(starts.len() > 5_000, "ten seconds of a 1500 µs frame with two windows: {} starts", starts.len());
    // The span both cover: the trace ends as the system starts going down, the timeline when the executor stops.
    let (from, to) = (slices[0].1.max(starts[0].1), slices.last().unwrap().1.min(starts.last().unwrap().1));
    let within = |s: &[(String, u64)]| s.iter().filter(|(_, t)| *t + 1_000 >= from && *t <= to + 1_000).cloned().collect::<Vec<_>>();
    let (slices, starts) = (within(&slices), within(&starts));
    assert!(slices.len() > 5_000, "{} slices in the common span", slices.len());
    assert_eq!(slices.len(), starts.len(), "window starts in the common span");
    for (i, (s, t)) in slices.iter().zip(&starts).enumerate() {
        assert_eq!(s.0, t.0, "window start {i}: partition");
        assert!(s.1.abs_diff(t.1) <= 1_000, "window start {i}: trace {} ns, executor {} ns", s.1, t.1);
    }
    // The event log's events are on the health track, at their own instants.
    let health = events.iter().filter(|e| e["ph"] == "i" && threads.get(&e["tid"].as_u64().unwrap_or(0)).is_some_and(|n| n == "health")).count();
    assert!(health > 0, "no health events");
    assert_eq!(v["metadata"]["health_events"], health);
}

#[test]
fn an_unwritable_trace_path_is_refused_before_anything_is_built() {
    let dir = TempDir::new("trace", "refused");
    let name = format!("trr{}", std::process::id() % 100_000);
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance.toml")).unwrap();
    let file = dir.0.join("system.toml");
    std::fs::write(&file, text.replace("name = \"video-surveillance\"", &format!("name = \"{name}\""))).unwrap();
    let bad = dir.0.join("no-such-dir").join("t.json");
    let out = Command::new(env!("CARGO_BIN_EXE_partita")).args(["up", file.to_str().unwrap(), "--trace", bad.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(bad.to_str().unwrap()) && stderr.contains("nothing was created"), "{stderr}");
    assert!(!Path::new("/run/partita").join(&name).exists(), "a state directory was made");
}

/// Takes CPU 0 from everything below SCHED_FIFO 99 (the plan executor runs at 90) for `ms`, spinning on this
/// thread, then gives the thread its CPUs and policy back: a window start late by that much.
fn steal_cpu0(ms: u64) {
    // SAFETY: plain system calls on this thread with a CPU set and a scheduling parameter on the stack.
    unsafe {
        let mut before: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut before);
        let mut only0: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut only0);
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &only0), 0);
        let fifo = libc::sched_param { sched_priority: 99 };
        assert_eq!(libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo), 0);
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(ms) {
            std::hint::spin_loop();
        }
        let normal = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &normal);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &before);
    }
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn sigterm_closes_the_trace_and_a_stall_shows_with_the_kernels_events_around_it() {
    let _cpu = one_at_a_time();
    let dir = TempDir::new("trace", "sigterm");
    let name = format!("trs{}", std::process::id() % 100_000);
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance.toml")).unwrap();
    let file = dir.0.join("system.toml");
    std::fs::write(&file, text.replace("name = \"video-surveillance\"", &format!("name = \"{name}\""))).unwrap();
    let (trace, err) = (dir.0.join("t.json"), dir.0.join("up.err"));
    let up = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["up", file.to_str().unwrap(), "--duration", "60", "--trace", trace.to_str().unwrap(), "--trace-stalls"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    // Once the trace holds a second or so of windows, a 5 ms stall on the plan's CPU; then SIGTERM to this
    // test's own child.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline && !std::fs::metadata(&trace).is_ok_and(|m| m.len() > 500_000) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    steal_cpu0(5);
    let events = Path::new("/run/partita").join(&name).join("events.jsonl");
    let stall_logged = || std::fs::read_to_string(&events).unwrap_or_default().lines().any(|l| l.contains("\"stall\""));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline && !stall_logged() {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let logged = stall_logged();
    let (status, stderr) = stop_up_when(up, &err, std::time::Duration::ZERO, || true);
    assert!(status.success(), "{stderr}");
    assert!(logged, "no stall event after 5 ms taken from the plan's CPU: {stderr}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap_or_else(|e| panic!("the trace is not closed JSON after SIGTERM: {e}; {stderr}"));
    let (threads, events) = schema_check(&v).unwrap_or_else(|e| panic!("schema: {e}"));
    assert!(v["metadata"]["window_slices"].as_u64().unwrap() > 500, "{}", v["metadata"]);
    // The stall is on CPU 0's kernel track: a slice of at least 1 ms, with the kernel's events around it (the
    // test's own spinning thread among them).
    let kernel = *threads.iter().find(|(_, n)| *n == "CPU 0 kernel (stalls)").unwrap_or_else(|| panic!("no kernel track: {threads:?}")).0;
    let stalls: Vec<&Value> = events.iter().filter(|e| e["tid"] == kernel && e["ph"] == "X").collect();
    assert!(stalls.iter().any(|s| s["dur"].as_f64().unwrap_or(0.0) >= 1_000.0 && s["name"].as_str().unwrap_or("").starts_with("stall: ")), "{stalls:?}");
    assert!(events.iter().filter(|e| e["tid"] == kernel && e["ph"] == "i").count() > 2, "no kernel events around the stall");
}
