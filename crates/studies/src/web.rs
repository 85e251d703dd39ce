//! `partita bench web`: what watching a running system costs it (issue 36).
//!
//! The paper's system with its status node (examples/video-surveillance-status.toml, under a name of the
//! benchmark's own) comes up with `partita up`, `partita web` serves it on loopback, and the run alternates
//! phases of equal length: the page closed, then open in headless Chromium (Playwright driving the system's
//! browser) and reloaded every second, then Chromium on a blank page (the browser's own load on the machine,
//! without partita web's part), then `stress-ng` loading the same CPUs as much as the open page did (any
//! program's load there, without a browser), and so on. At each phase boundary the benchmark reads the executor's
//! lateness histogram from the state file (cumulative counts per bucket, so a phase's histogram is the
//! difference of two reads) and the CPU time and resident memory of the supervisor and of `partita web`
//! (`/proc/<pid>/stat`, `/proc/<pid>/status`). It reports the window-start lateness p50/p99 over all closed
//! phases against all open ones (interleaved, one run, the same machine state), and the two processes' CPU time
//! and memory per hour.
//!
//! `partita web` and Chromium run on the CPUs the plan does not use (the docs ask the same of every host
//! program: a program on a plan's CPU takes that CPU's windows, whatever it is).
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The system: the paper's, with its status node.
pub const SYSTEM: &str = include_str!("../../../examples/video-surveillance-status.toml");
/// The browser's part: open the page, reload it every second, report loads and console errors.
pub const LOAD_SCRIPT: &str = include_str!("web_load.py");

#[derive(Debug, Clone)]
pub struct WebBenchConfig {
    /// Phases of each kind (closed, open, blank), interleaved.
    pub phases: u32,
    pub phase: Duration,
    /// The `partita` binary (its `up` and `web`).
    pub partita: PathBuf,
    /// The Python with Playwright.
    pub python: PathBuf,
    pub port: u16,
    /// Where the benchmark's files go (system file, script); removed by the caller.
    pub work: PathBuf,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct ProcessCost {
    /// CPU time (user + system) per hour of wall time, seconds.
    pub cpu_s_per_hour: f64,
    /// The largest resident set seen, KiB.
    pub max_rss_kib: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub open: bool,
    /// closed, open, blank (Chromium on about:blank) or load (stress-ng on the browser's CPUs).
    pub kind: &'static str,
    pub seconds: f64,
    /// How busy the CPUs beside the plan's were (browser, web server, supervisor, everything), 0..1.
    pub others_busy: f64,
    pub windows: u64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub max_us: Option<f64>,
    pub page_loads: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WebBenchResults {
    pub system: String,
    pub phases: Vec<Phase>,
    /// Over all phases of a kind.
    pub closed: Summary,
    pub open: Summary,
    pub blank: Summary,
    pub load: Summary,
    /// open p99 / closed p99, blank p99 / closed p99, load p99 / closed p99.
    pub p99_ratio: Option<f64>,
    pub p99_blank_ratio: Option<f64>,
    pub p99_load_ratio: Option<f64>,
    /// The load stress-ng put on the browser's CPUs, % of one CPU (the open phases' measured load, rounded).
    pub load_percent: u32,
    /// The supervisor's threads but its plan executors (those run the plan whether anyone watches or not;
    /// `executors_cpu_s_per_hour` is theirs over the whole run).
    pub supervisor_closed: ProcessCost,
    pub supervisor_open: ProcessCost,
    pub web_closed: ProcessCost,
    pub web_open: ProcessCost,
    pub executors_cpu_s_per_hour: f64,
    pub console_errors: Vec<String>,
    pub browser_cpus: Vec<usize>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    pub windows: u64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub max_us: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum WebBenchError {
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{0}")]
    Failed(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> WebBenchError {
    let what = what.into();
    move |source| WebBenchError::Io { what, source }
}

/// Cumulative bucket counts (`[upper µs, count]`) of the first CPU's lateness, from a state file.
fn buckets(state: &serde_json::Value) -> BTreeMap<u64, u64> {
    state["cpus"][0]["lateness"]["buckets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| Some(((b[0].as_f64()? * 1000.0) as u64, b[1].as_u64()?)))
        .collect()
}

/// The difference of two cumulative histograms, added into `into`.
fn add_since(into: &mut BTreeMap<u64, u64>, now: &BTreeMap<u64, u64>, before: &BTreeMap<u64, u64>) {
    for (edge, c) in now {
        let d = c.saturating_sub(before.get(edge).copied().unwrap_or(0));
        if d > 0 {
            *into.entry(*edge).or_default() += d;
        }
    }
}

/// The `q` quantile of a histogram of `[upper edge ns → count]`, µs (its bucket's upper edge).
fn quantile(h: &BTreeMap<u64, u64>, q: f64) -> Option<f64> {
    let n: u64 = h.values().sum();
    if n == 0 {
        return None;
    }
    let want = ((n as f64 * q).ceil() as u64).clamp(1, n);
    let mut seen = 0;
    for (edge, c) in h {
        seen += c;
        if seen >= want {
            return Some(*edge as f64 / 1000.0);
        }
    }
    None
}

fn summary(h: &BTreeMap<u64, u64>) -> Summary {
    Summary { windows: h.values().sum(), p50_us: quantile(h, 0.5), p99_us: quantile(h, 0.99), max_us: h.keys().next_back().map(|e| *e as f64 / 1000.0) }
}

/// (busy, total) jiffies of the CPUs in `cpus`, from /proc/stat.
fn cpu_jiffies(cpus: &[usize]) -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let (mut busy, mut total) = (0, 0);
    for line in stat.lines() {
        let mut f = line.split_whitespace();
        let Some(cpu) = f.next().and_then(|n| n.strip_prefix("cpu")).and_then(|n| n.parse::<usize>().ok()) else { continue };
        if !cpus.contains(&cpu) {
            continue;
        }
        let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
        let all: u64 = v.iter().take(8).sum();
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        busy += all - idle;
        total += all;
    }
    (busy, total)
}

/// The name of the plan executors' threads (crates/supervisor/src/executor.rs).
const EXECUTOR_THREAD: &str = "partita-plan";

/// (user + system CPU seconds of its threads other than the plan executors', resident KiB) of a process.
fn cost(pid: u32) -> (f64, u64) {
    let (cpu, _) = thread_cpu(pid);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0);
    (cpu, rss)
}

/// CPU seconds (user + system) of a process's threads: (all but the plan executors, the plan executors).
fn thread_cpu(pid: u32) -> (f64, f64) {
    let ticks = 100.0; // USER_HZ on Linux
    let (mut others, mut executors) = (0.0, 0.0);
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        let Some((head, after)) = stat.rsplit_once(')') else { continue };
        let comm = head.split_once('(').map(|(_, c)| c).unwrap_or("");
        let f: Vec<&str> = after.split_whitespace().collect();
        let cpu = f.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0) + f.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
        if comm == EXECUTOR_THREAD {
            executors += cpu / ticks;
        } else {
            others += cpu / ticks;
        }
    }
    (others, executors)
}

/// Ends a child this benchmark started (SIGTERM, then SIGKILL after 20 s) and reaps it.
fn end(child: &mut Child) {
    let _ = partita_os::process::send_signal(child.id() as i32, libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn read_state(path: &Path) -> serde_json::Value {
    std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
}

/// The next state the supervisor writes after now (it writes one a second).
fn next_state(path: &Path) -> serde_json::Value {
    let before = read_state(path)["updated_unix_ms"].as_u64().unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let s = read_state(path);
        if s["updated_unix_ms"].as_u64().unwrap_or(0) != before || Instant::now() >= deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn run(cfg: &WebBenchConfig, say: impl Fn(&str)) -> Result<WebBenchResults, WebBenchError> {
    let name = format!("webbench{}", std::process::id() % 100_000);
    std::fs::create_dir_all(&cfg.work).map_err(io(format!("mkdir {}", cfg.work.display())))?;
    let text = SYSTEM.replace("name = \"video-surveillance\"", &format!("name = \"{name}\"")).replace("\"--system\", \"video-surveillance\"", &format!("\"--system\", \"{name}\"")).replace("/run/partita/video-surveillance/", &format!("/run/partita/{name}/"));
    let file = cfg.work.join("system.toml");
    std::fs::write(&file, text).map_err(io(format!("write {}", file.display())))?;
    let script = cfg.work.join("web_load.py");
    std::fs::write(&script, LOAD_SCRIPT).map_err(io(format!("write {}", script.display())))?;
    let plan_cpus: Vec<usize> = vec![0];
    let others: Vec<usize> = partita_system::Host::this_machine().cpus.into_iter().filter(|c| !plan_cpus.contains(c)).collect();
    let pin = others.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
    if pin.is_empty() {
        return Err(WebBenchError::Failed("the machine has no CPU beside the plan's CPU 0 for the browser and `partita web`".into()));
    }

    let mut up_cmd = Command::new(&cfg.partita);
    up_cmd.args(["up", &file.display().to_string()]).stdout(Stdio::null()).stderr(std::fs::File::create(cfg.work.join("up.err")).map_err(io("up.err"))?);
    partita_os::process::end_with_parent(&mut up_cmd, libc::SIGTERM);
    let mut up = up_cmd.spawn().map_err(io("partita up"))?;
    let state_path = Path::new("/run/partita").join(&name).join("state.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !state_path.exists() {
        if Instant::now() >= deadline || up.try_wait().ok().flatten().is_some() {
            end(&mut up);
            let err = std::fs::read_to_string(cfg.work.join("up.err")).unwrap_or_default();
            return Err(WebBenchError::Failed(format!("the system did not come up:\n{err}")));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let url = format!("http://127.0.0.1:{}/?system={name}", cfg.port);
    let mut web_cmd = Command::new("taskset");
    web_cmd.args(["-c", &pin]).arg(&cfg.partita).args(["web", "--listen", &format!("127.0.0.1:{}", cfg.port)]).stdout(Stdio::null()).stderr(std::fs::File::create(cfg.work.join("web.err")).map_err(io("web.err"))?);
    partita_os::process::end_with_parent(&mut web_cmd, libc::SIGTERM);
    let mut web = match web_cmd.spawn() {
        Ok(w) => w,
        Err(e) => {
            end(&mut up);
            return Err(WebBenchError::Io { what: "partita web (through taskset)".into(), source: e });
        }
    };
    let result = measure(cfg, &name, &state_path, &url, &pin, up.id(), &mut web, &script, &others, &say);
    end(&mut web);
    end(&mut up);
    result
}

#[allow(clippy::too_many_arguments)]
fn measure(
    cfg: &WebBenchConfig,
    name: &str,
    state_path: &Path,
    url: &str,
    pin: &str,
    supervisor: u32,
    web: &mut Child,
    script: &Path,
    others: &[usize],
    say: &dyn Fn(&str),
) -> Result<WebBenchResults, WebBenchError> {
    // Let the system settle (discovery, the monitor's warm-up) before the first phase.
    std::thread::sleep(Duration::from_secs(5));
    let mut phases = Vec::new();
    let (mut closed_h, mut open_h, mut blank_h, mut load_h) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    // The load phases copy the open phases' load on the other CPUs (measured in the phases before them).
    let mut open_busy: Vec<f64> = Vec::new();
    let mut load_percent = 0u32;
    let mut costs = [[(0.0f64, 0.0f64, 0u64); 2]; 2]; // [supervisor, web][closed, open]: cpu s, wall s, max rss
    let mut console_errors = Vec::new();
    let mut state = next_state(state_path);
    let (run0, executors0) = (Instant::now(), thread_cpu(supervisor).1);
    for k in 0..cfg.phases * 4 {
        let kind = ["closed", "open", "blank", "load"][(k % 4) as usize];
        let open = kind == "open";
        let browser = kind == "open" || kind == "blank";
        let target = if open { url.to_string() } else { "about:blank".to_string() };
        let t0 = Instant::now();
        let (s0, w0) = (cost(supervisor), cost(web.id()));
        let j0 = cpu_jiffies(others);
        let h0 = buckets(&state);
        let mut loads = 0;
        if browser {
            let out = Command::new("taskset")
                .args(["-c", pin])
                .arg(&cfg.python)
                .arg(script)
                .arg(&target)
                .arg(format!("{}", cfg.phase.as_secs_f64()))
                .output()
                .map_err(io(format!("{} {}", cfg.python.display(), script.display())))?;
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            if !out.status.success() || report.is_null() {
                return Err(WebBenchError::Failed(format!("the browser's run failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr))));
            }
            loads = report["loads"].as_u64().unwrap_or(0);
            console_errors.extend(report["console_errors"].as_array().into_iter().flatten().filter_map(|e| e.as_str().map(String::from)));
        } else if kind == "load" {
            let busy = open_busy.iter().sum::<f64>() / open_busy.len().max(1) as f64;
            load_percent = ((busy * others.len() as f64 * 100.0).round() as u32).clamp(1, 100);
            let mut stress = Command::new("stress-ng");
            stress
                .args(["--cpu", "1", "--cpu-load", &load_percent.to_string(), "--taskset", pin, "--timeout", &format!("{}s", cfg.phase.as_secs().max(1)), "--quiet"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            partita_os::process::end_with_parent(&mut stress, libc::SIGKILL);
            let ran = stress.status().map_err(io("stress-ng (apt-get install stress-ng)"))?;
            if !ran.success() {
                return Err(WebBenchError::Failed(format!("stress-ng ended with {ran}")));
            }
        } else {
            std::thread::sleep(cfg.phase);
        }
        if web.try_wait().ok().flatten().is_some() {
            return Err(WebBenchError::Failed("partita web ended during the run".into()));
        }
        state = next_state(state_path);
        let h1 = buckets(&state);
        let mut h = BTreeMap::new();
        add_since(&mut h, &h1, &h0);
        add_since(
            match kind {
                "open" => &mut open_h,
                "blank" => &mut blank_h,
                "load" => &mut load_h,
                _ => &mut closed_h,
            },
            &h1,
            &h0,
        );
        let wall = t0.elapsed().as_secs_f64();
        let j1 = cpu_jiffies(others);
        let others_busy = if j1.1 > j0.1 { (j1.0 - j0.0) as f64 / (j1.1 - j0.1) as f64 } else { 0.0 };
        let (s1, w1) = (cost(supervisor), cost(web.id()));
        if open {
            open_busy.push(others_busy);
        }
        for (i, (a, b)) in [(s0, s1), (w0, w1)].into_iter().enumerate().filter(|_| kind == "open" || kind == "closed") {
            let c = &mut costs[i][open as usize];
            c.0 += b.0 - a.0;
            c.1 += wall;
            c.2 = c.2.max(b.1).max(a.1);
        }
        let s = summary(&h);
        say(&format!(
            "phase {}/{} ({}): {} windows, lateness p50 {:?} p99 {:?} µs, {} page loads",
            k + 1,
            cfg.phases * 4,
            match kind {
                "open" => "page open",
                "blank" => "Chromium on a blank page",
                "load" => "stress-ng on the other CPUs",
                _ => "page closed",
            },
            s.windows,
            s.p50_us,
            s.p99_us,
            loads
        ));
        phases.push(Phase { open, kind, seconds: wall, others_busy, windows: s.windows, p50_us: s.p50_us, p99_us: s.p99_us, max_us: s.max_us, page_loads: loads });
    }
    let executors_cpu_s_per_hour = (thread_cpu(supervisor).1 - executors0) / run0.elapsed().as_secs_f64() * 3600.0;
    let per_hour = |c: (f64, f64, u64)| ProcessCost { cpu_s_per_hour: if c.1 > 0.0 { c.0 / c.1 * 3600.0 } else { 0.0 }, max_rss_kib: c.2 };
    let (closed, open, blank, load) = (summary(&closed_h), summary(&open_h), summary(&blank_h), summary(&load_h));
    let ratio = |a: &Summary| match (a.p99_us, closed.p99_us) {
        (Some(o), Some(c)) if c > 0.0 => Some(o / c),
        _ => None,
    };
    let (p99_ratio, p99_blank_ratio, p99_load_ratio) = (ratio(&open), ratio(&blank), ratio(&load));
    Ok(WebBenchResults {
        system: name.to_string(),
        phases,
        closed,
        open,
        blank,
        load,
        p99_ratio,
        p99_blank_ratio,
        p99_load_ratio,
        load_percent,
        supervisor_closed: per_hour(costs[0][0]),
        supervisor_open: per_hour(costs[0][1]),
        web_closed: per_hour(costs[1][0]),
        web_open: per_hour(costs[1][1]),
        executors_cpu_s_per_hour,
        console_errors,
        browser_cpus: others.to_vec(),
    })
}

pub fn markdown(r: &WebBenchResults, command: &str) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let mut s = String::new();
    let _ = writeln!(s, "# The web view's cost to the plan\n\n`{command}`\n");
    let _ = writeln!(s, "Paper system with its status node; `partita web` and headless Chromium on CPUs {:?}; phases interleaved, page closed first.\n", r.browser_cpus);
    let _ = writeln!(s, "| page | phases | window starts | lateness p50 µs | p99 µs | max µs |\n|---|---:|---:|---:|---:|---:|");
    for (label, kind, sum) in [("closed", "closed", &r.closed), ("open, reloaded every second", "open", &r.open), ("closed, Chromium on a blank page", "blank", &r.blank), ("closed, stress-ng on the other CPUs", "load", &r.load)] {
        let n = r.phases.iter().filter(|p| p.kind == kind).count();
        let _ = writeln!(s, "| {label} | {n} | {} | {} | {} | {} |", sum.windows, f(sum.p50_us), f(sum.p99_us), f(sum.max_us));
    }
    let _ = writeln!(
        s,
        "\np99 open / closed: {}; Chromium on a blank page / closed: {}; stress-ng at {} % of a CPU / closed: {}\n",
        r.p99_ratio.map_or("-".into(), |v| format!("{v:.3}")),
        r.p99_blank_ratio.map_or("-".into(), |v| format!("{v:.3}")),
        r.load_percent,
        r.p99_load_ratio.map_or("-".into(), |v| format!("{v:.3}"))
    );
    let _ = writeln!(s, "| process | page | CPU s per hour | max RSS MiB |\n|---|---|---:|---:|");
    for (who, label, c) in [("supervisor (its executors apart)", "closed", &r.supervisor_closed), ("supervisor (its executors apart)", "open", &r.supervisor_open), ("partita web", "closed", &r.web_closed), ("partita web", "open", &r.web_open)] {
        let _ = writeln!(s, "| {who} | {label} | {:.1} | {:.1} |", c.cpu_s_per_hour, c.max_rss_kib as f64 / 1024.0);
    }
    let _ = writeln!(s, "\nThe plan executors (the supervisor's `partita-plan` threads, on the plan's CPU, the same with or without the page): {:.1} CPU s per hour.", r.executors_cpu_s_per_hour);
    let _ = writeln!(s, "\n| phase | page | s | other CPUs busy | window starts | p50 µs | p99 µs | max µs | loads |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for (i, p) in r.phases.iter().enumerate() {
        let _ = writeln!(s, "| {} | {} | {:.1} | {} | {} | {} | {} | {} | {} |", i + 1, p.kind, p.seconds, format!("{:.0} %", p.others_busy * 100.0), p.windows, f(p.p50_us), f(p.p99_us), f(p.max_us), p.page_loads);
    }
    if !r.console_errors.is_empty() {
        let _ = writeln!(s, "\nConsole errors in the page: {}", r.console_errors.len());
    }
    s
}

pub fn write_all(r: &WebBenchResults, dir: &Path, command: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("web.md"), markdown(r, command))?;
    std::fs::write(dir.join("web.json"), serde_json::to_string_pretty(r).map_err(std::io::Error::other)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_is_the_difference_of_two_cumulative_histograms() {
        let before: BTreeMap<u64, u64> = [(10_000, 5), (20_000, 1)].into_iter().collect();
        let after: BTreeMap<u64, u64> = [(10_000, 100), (20_000, 1), (300_000, 2)].into_iter().collect();
        let mut h = BTreeMap::new();
        add_since(&mut h, &after, &before);
        assert_eq!(h, [(10_000, 95), (300_000, 2)].into_iter().collect());
        assert_eq!(quantile(&h, 0.5), Some(10.0));
        assert_eq!(quantile(&h, 0.99), Some(300.0));
        assert_eq!(quantile(&BTreeMap::new(), 0.5), None);
        let state = serde_json::json!({"cpus": [{"lateness": {"buckets": [[16.0, 3], [31.0, 1]]}}]});
        assert_eq!(buckets(&state), [(16_000, 3), (31_000, 1)].into_iter().collect());
    }
}
