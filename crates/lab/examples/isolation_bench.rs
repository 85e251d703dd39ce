//! Benchmarks of temporal isolation on this machine (root needed):
//!   isolation_bench freeze [ITERATIONS]           cost and precision of each freezing backend
//!   isolation_bench frame [FRAMES] [BACKEND] [CPU] the 1500 µs reference frame with a probe per partition
//!   isolation_bench probe OUTPUT DURATION_MS      (internal) the probe run inside each partition
use partita_lab::freezing;
use partita_supervisor::freeze::FreezeBackend;

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("probe") => {
            let out = std::path::PathBuf::from(&args[2]);
            let ms: u64 = args[3].parse().expect("duration in ms");
            let runs = partita_lab::probe::spin(ms * 1_000_000, 20_000, 10_000_000);
            partita_lab::probe::write_intervals(&out, &runs).expect("writing probe output");
        }
        Some("freeze") => {
            let n: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2000);
            for r in freezing::freeze_backends(n, 0, 1).expect("freeze benchmark") {
                println!(
                    "{:<11} n={}  freeze call p50/p99/max {}/{}/{} µs  freeze→stopped {}/{}/{} µs  thaw call {}/{}/{} µs",
                    r.backend, r.iterations,
                    us(r.freeze_call.p50_ns), us(r.freeze_call.p99_ns), us(r.freeze_call.max_ns),
                    us(r.freeze_to_stopped.p50_ns), us(r.freeze_to_stopped.p99_ns), us(r.freeze_to_stopped.max_ns),
                    us(r.thaw_call.p50_ns), us(r.thaw_call.p99_ns), us(r.thaw_call.max_ns),
                );
            }
        }
        Some("frame") => {
            let frames: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4000);
            let backend = args.get(3).and_then(|s| FreezeBackend::parse(s)).unwrap_or(FreezeBackend::CgroupV2);
            let cpu: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(1);
            let exe = std::env::current_exe().unwrap().display().to_string();
            let dir = std::env::temp_dir().join(format!("partita-frame-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let r = freezing::reference_frame(frames, cpu, backend, (&exe, &["probe".to_string()]), &dir).expect("frame benchmark");
            let _ = std::fs::remove_dir_all(&dir);
            println!(
                "{} frames of 1500 µs (800+700) on CPU {}, backend {}, SCHED_FIFO {}: window-start lateness p50/p99/max {}/{}/{} µs, \
                 switch cost p50/p99/max {}/{}/{} µs, probe ran {:.1} ms, outside planned windows {:.3}% ({} µs), outside actual windows {:.3}%, switch errors {}",
                r.frames, r.cpu, r.backend, r.realtime,
                us(r.window_start_lateness.p50_ns), us(r.window_start_lateness.p99_ns), us(r.window_start_lateness.max_ns),
                us(r.switch_cost.p50_ns), us(r.switch_cost.p99_ns), us(r.switch_cost.max_ns),
                r.probe_run_ns as f64 / 1e6,
                100.0 * r.probe_outside_plan_ns as f64 / r.probe_run_ns.max(1) as f64, us(r.probe_outside_plan_ns),
                100.0 * r.probe_outside_actual_ns as f64 / r.probe_run_ns.max(1) as f64,
                r.switch_errors,
            );
            println!("{}", serde_json::to_string(&r).unwrap());
        }
        _ => {
            eprintln!("usage: isolation_bench freeze [N] | frame [FRAMES] [cgroup-v2|v1-freezer|signals] [CPU]");
            std::process::exit(2);
        }
    }
}
