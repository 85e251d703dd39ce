//! `partita bench vm`: what making the paper's recorder a VM partition costs, against the same recorder as a
//! process partition and as a native process, in one run.
//!
//! Rows: TRADITIONAL DDS (native recorder); SINGLE DDS PARTITION (the recorder alone in the I/O partition, the
//! whole frame its window) with the recorder as a process and as a VM; PARTITIONED DDS WITH ROUTING (recorder
//! 700 µs, router 800 µs of 1500 µs) with the recorder as a process and as a VM. The VM rows are the same
//! scenario files with `kind = "vm"` on the recorder. Every row is run `repeat` times, the rows interleaved.
//!
//! Per row: the monitor's response times (mean, p50, p99, max); the plan executor's window-start lateness
//! (p50, p99, max) and the time it took to issue a boundary's freeze and thaw writes (p50, p99: the freeze/thaw
//! cost on the executor's side); the CPU time the recorder used beyond its windows (the window watch's figure:
//! how long its threads took to stop once frozen); and, for a VM, the boot time to the command's first
//! instruction. The acceleration is named in the table's heading.
use partita_lab::run::{run_until_monitor_exits, RunError};
use crate::scenario::{Params, Scenario, MONITOR};
use partita_apps::summary::Summary;
use partita_lab::repeat::{flag_note, interleaved, Spread};
use partita_lab::setup::Setup;
use partita_supervisor::executor::ExecutorLog;
use partita_supervisor::UpOptions;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct VmBenchConfig {
    pub exe: String,
    pub out: PathBuf,
    pub state_root: PathBuf,
    pub reply_size: usize,
    pub count: u64,
    pub warmup: u64,
    pub repeat: u32,
    pub recorder_cpu: usize,
    /// `auto`, `kvm` or `tcg`, as a system file says it.
    pub accel: String,
    pub setup: Setup,
}

/// How the recorder runs in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    Native,
    Process,
    Vm,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::Native => "native",
            Placement::Process => "process partition",
            Placement::Vm => "VM partition",
        }
    }
}

/// The rows, in the table's order.
pub const ROWS: [(Scenario, Placement); 5] = [
    (Scenario::Traditional, Placement::Native),
    (Scenario::SinglePartition, Placement::Process),
    (Scenario::SinglePartition, Placement::Vm),
    (Scenario::PartitionedRouting, Placement::Process),
    (Scenario::PartitionedRouting, Placement::Vm),
];

/// Percentiles of a list of µs values.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Spread3 {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Spread3 {
    pub fn of(mut v: Vec<f64>) -> Option<Spread3> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let q = |f: f64| v[((v.len() as f64 * f).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Spread3 { p50: q(0.5), p99: q(0.99), max: v[v.len() - 1] })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct VmRun {
    pub repeat: u32,
    pub summary: Summary,
    pub timeouts: u64,
    pub lateness_us: Option<Spread3>,
    pub switch_us: Option<Spread3>,
    /// Runner start to the guest's start marker, s (VM rows).
    pub boot_s: Option<f64>,
    /// CPU time the recorder used beyond its windows over the run, µs, as the window watch last reported it.
    pub outside_windows_us: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VmRow {
    pub scenario: &'static str,
    pub placement: Placement,
    pub runs: Vec<VmRun>,
}

impl VmRow {
    /// `f` over the runs: median, min–max and spread.
    pub fn spread(&self, f: impl Fn(&VmRun) -> Option<f64>) -> Option<Spread> {
        Spread::of(&self.runs.iter().filter_map(f).collect::<Vec<_>>())
    }

    /// The median over the runs of `f`.
    pub fn median(&self, f: impl Fn(&VmRun) -> Option<f64>) -> Option<f64> {
        self.spread(f).map(|s| s.median)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct VmResults {
    pub machine: String,
    /// The acceleration the VM rows ran under, and why (`partita check`'s words).
    pub accel: String,
    pub accel_reason: String,
    pub setup: String,
    pub reply_size: usize,
    pub count: u64,
    pub warmup: u64,
    pub repeat: u32,
    pub rows: Vec<VmRow>,
    pub elapsed_s: f64,
}

/// The scenario's system file with the recorder partition made a VM partition under `accel`.
pub fn as_vm(text: &str, accel: &str) -> Result<String, String> {
    let start = text.find("name = \"recorder\"").ok_or("the scenario has no recorder partition")?;
    let end = text[start..].find("\n[").map_or(text.len(), |e| start + e);
    // A VM partition runs under normal scheduling (the system file refuses SCHED_FIFO for one).
    let mut part: Vec<String> = text[start..end].lines().filter(|l| !l.starts_with("memory =") && !l.starts_with("scheduling =")).map(String::from).collect();
    part.insert(1, format!("kind = \"vm\"\nvm = {{ memory = \"256MiB\", accel = \"{accel}\", boot_timeout = \"120s\" }}"));
    Ok(format!("{}{}{}", &text[..start], part.join("\n"), &text[end..]))
}

fn lateness(logs: &[ExecutorLog]) -> (Option<Spread3>, Option<Spread3>) {
    let starts = || logs.iter().flat_map(|l| l.starts.iter());
    (
        Spread3::of(starts().map(|s| s.lateness_ns() as f64 / 1e3).collect()),
        Spread3::of(starts().map(|s| s.switched_ns.saturating_sub(s.woke_ns) as f64 / 1e3).collect()),
    )
}

/// The runner's "boot X s" line in the recorder's log.
pub fn boot_seconds(log: &str) -> Option<f64> {
    log.lines().filter_map(|l| l.strip_prefix("partita vm: boot ")).filter_map(|r| r.split_whitespace().next()?.parse().ok()).next()
}

/// The last "(N µs in all)" of the recorder's ran_outside_window events.
pub fn outside_windows_us(events: &str) -> Option<f64> {
    events
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["partition"] == "recorder" && v["event"] == "ran_outside_window")
        .filter_map(|v| {
            let d = v["detail"].as_str()?.to_string();
            d.rsplit_once('(')?.1.split_whitespace().next()?.parse::<f64>().ok()
        })
        .next()
}

fn run_one(cfg: &VmBenchConfig, s: Scenario, placement: Placement, repeat: u32) -> Result<VmRun, RunError> {
    let raw = cfg.out.join("raw");
    std::fs::create_dir_all(&raw).map_err(|e| RunError::File { path: raw.clone(), message: e.to_string() })?;
    let tag = format!("{}-{}-r{repeat}", s.key(), match placement { Placement::Vm => "vm", Placement::Process => "proc", Placement::Native => "native" });
    let params = Params {
        reply_size: cfg.reply_size,
        count: cfg.count,
        warmup: cfg.warmup,
        timeout_ms: 1000,
        monitor_json: raw.join(format!("{tag}.json")),
        ring: cfg.out.join("rings").join(&tag),
        save_frame: None,
        recorder_cpu: cfg.recorder_cpu,
        routing_cpu: cfg.recorder_cpu,
        memory_bytes: 512 << 20,
        // The first answer waits for the guest to boot: as long as its boot timeout (a TCG guest frozen half of
        // each frame on a busy machine took over the monitor's default 30 s once in a suite run).
        monitor_extra: if placement == Placement::Vm { vec!["--connect-timeout".into(), "120".into()] } else { Vec::new() },
        setup: cfg.setup,
        plan: None,
    };
    let mut text = s.toml(&params).replace(&format!("\"paper-{}\"", s.key()), &format!("\"vmb-{}\"", tag.replace("traditional", "trad").replace("partitioned", "part")));
    if placement == Placement::Vm {
        text = as_vm(&text, &cfg.accel).map_err(|m| RunError::Supervisor { system: tag.clone(), message: m })?;
    }
    let system = partita_system::parse(&text, &format!("<bench vm {tag}>"), &partita_system::Host::this_machine())
        .map_err(|e| RunError::Supervisor { system: tag.clone(), message: e.to_string() })?;
    let ring = s.ring(&system, &params);
    let options = UpOptions { partita: Some(cfg.exe.clone().into()), ..UpOptions::new(&cfg.state_root) };
    let limit = Duration::from_secs(180) + Duration::from_millis(20) * (cfg.count + cfg.warmup) as u32;
    let done = run_until_monitor_exits(&system, &options, MONITOR, &params.monitor_json, limit);
    let state = cfg.state_root.join(&system.name);
    let read = |f: &str| std::fs::read_to_string(state.join(f)).unwrap_or_default();
    let (boot_s, outside) = (boot_seconds(&read("recorder.log")), outside_windows_us(&read("events.jsonl")));
    if placement == Placement::Vm {
        let _ = std::fs::copy(state.join("recorder.log"), raw.join(format!("{tag}.recorder.log")));
    }
    let _ = std::fs::remove_dir_all(&state);
    if let Some(r) = &ring {
        let _ = std::fs::remove_dir_all(r);
        let _ = r.parent().map(std::fs::remove_dir);
        let _ = r.parent().and_then(|p| p.parent()).map(std::fs::remove_dir);
    }
    let done = done?;
    let (lateness_us, switch_us) = lateness(&done.executors);
    Ok(VmRun { repeat, summary: done.report.summary, timeouts: done.report.timeouts, lateness_us, switch_us, boot_s, outside_windows_us: outside })
}

/// Runs every row `repeat` times, interleaved; `log` gets a line per run.
pub fn run(cfg: &VmBenchConfig, accel: (String, String), mut log: impl FnMut(&str)) -> Result<VmResults, RunError> {
    let t0 = std::time::Instant::now();
    // Before any system is up: the supervisor keeps this thread off the plans' CPUs while one runs.
    let machine = partita_lab::machine::describe();
    let _latency = cfg.setup.hold_cpu_latency().map_err(|e| RunError::Setup(e.to_string()))?;
    let mut rows: Vec<VmRow> = ROWS.iter().map(|&(s, p)| VmRow { scenario: s.title(), placement: p, runs: Vec::new() }).collect();
    for (k, i) in interleaved(ROWS.len(), cfg.repeat) {
        let (s, p) = ROWS[i];
        log(&format!("{}, recorder as {}, run {k} of {}…", s.title(), p.name(), cfg.repeat));
        let run = run_one(cfg, s, p, k)?;
        log(&format!(
            "  mean {:.1} µs, p99 {:.1} µs, {} timed out{}",
            run.summary.mean_us,
            run.summary.p99_us,
            run.timeouts,
            run.boot_s.map(|b| format!(", boot {b:.2} s")).unwrap_or_default()
        ));
        rows[i].runs.push(run);
    }
    let _ = std::fs::remove_dir(cfg.out.join("rings"));
    Ok(VmResults {
        machine,
        accel: accel.0,
        accel_reason: accel.1,
        setup: cfg.setup.caption(),
        reply_size: cfg.reply_size,
        count: cfg.count,
        warmup: cfg.warmup,
        repeat: cfg.repeat,
        rows,
        elapsed_s: t0.elapsed().as_secs_f64(),
    })
}

fn f1(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.1}"))
}

/// The Markdown report.
pub fn markdown(r: &VmResults, command: &str) -> String {
    let mut out = format!(
        "# VM partitions against process partitions and native: the paper's recorder\n\n`{command}`\n\n\
         - machine: {}\n- VM acceleration: **{}** ({})\n- setup: {}\n- {} B answers, {} requests after {} warm-up, {} run(s) per row, \
         interleaved; each figure is the median over the runs\n\n",
        r.machine, r.accel, r.accel_reason, r.setup, r.reply_size, r.count, r.warmup, r.repeat
    );
    out.push_str(&format!(
        "| scenario | recorder | mean µs | p50 µs | p50 spread | p99 µs | max µs | timed out | window lateness p50/p99/max µs | boundary switch p50/p99 µs | recorder CPU beyond its windows µs | boot s ({}) |\n",
        r.accel
    ));
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for row in &r.rows {
        let m = |f: fn(&Summary) -> f64| f1(row.median(|x| Some(f(&x.summary))));
        let late = match (row.median(|x| Some(x.lateness_us?.p50)), row.median(|x| Some(x.lateness_us?.p99)), row.median(|x| Some(x.lateness_us?.max))) {
            (Some(a), Some(b), Some(c)) => format!("{a:.1} / {b:.1} / {c:.1}"),
            _ => "–".into(),
        };
        let switch = match (row.median(|x| Some(x.switch_us?.p50)), row.median(|x| Some(x.switch_us?.p99))) {
            (Some(a), Some(b)) => format!("{a:.1} / {b:.1}"),
            _ => "–".into(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.scenario,
            row.placement.name(),
            m(|s| s.mean_us),
            m(|s| s.p50_us),
            row.spread(|x| Some(x.summary.p50_us)).map_or("—".into(), |s| s.spread_cell()),
            m(|s| s.p99_us),
            m(|s| s.max_us),
            row.runs.iter().map(|x| x.timeouts).sum::<u64>(),
            late,
            switch,
            f1(row.median(|x| x.outside_windows_us)),
            row.median(|x| x.boot_s).map_or("–".into(), |b| format!("{b:.2}")),
        ));
    }
    if r.rows.iter().any(|row| row.spread(|x| Some(x.summary.p50_us)).is_some_and(|s| s.flagged())) {
        out.push_str(&format!("\n{}\n", flag_note("The p50 of a row marked", "p50s")));
    }
    out.push_str(&format!("\nWall time of the benchmark: {:.0} s. Raw monitor reports and the guests' consoles are in `raw/`.\n", r.elapsed_s));
    out
}

/// Writes `vm.md` and `vm.json` into `dir`.
pub fn write_all(r: &VmResults, dir: &Path, command: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("vm.md"), markdown(r, command))?;
    std::fs::write(dir.join("vm.json"), serde_json::to_string_pretty(r).map_err(std::io::Error::other)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorder_becomes_a_vm_and_keeps_everything_else() {
        let text = "[[module.partition]]\nname = \"recorder\"\ncommand = [\"partita\"]\nscheduling = { policy = \"fifo\", priority = 50 }\nmemory = \"512MiB\"\npids = 128\n\n[[module.partition]]\nname = \"routing\"\nmemory = \"1MiB\"\n";
        let vm = as_vm(text, "tcg").unwrap();
        assert!(vm.contains("name = \"recorder\"\nkind = \"vm\"\nvm = { memory = \"256MiB\", accel = \"tcg\""), "{vm}");
        assert!(!vm.contains("512MiB") && !vm.contains("fifo") && vm.contains("name = \"routing\"\nmemory = \"1MiB\""), "{vm}");
        assert!(as_vm("[[node]]\nname = \"monitor\"\n", "tcg").is_err());
    }

    #[test]
    fn boot_and_outside_time_are_read_from_the_logs() {
        assert_eq!(boot_seconds("x\npartita vm: boot 5.837 s (runner start to start marker; tcg)\n"), Some(5.837));
        assert_eq!(boot_seconds("no boot here"), None);
        let ev = r#"{"partition":"recorder","event":"ran_outside_window","detail":"used more CPU time than its windows had in 1 of 16 spans (876 µs in all)"}
{"partition":"routing","event":"ran_outside_window","detail":"x (5 µs in all)"}
{"partition":"recorder","event":"ran_outside_window","detail":"used more CPU time than its windows had in 2 of 20 spans (900 µs in all)"}"#;
        assert_eq!(outside_windows_us(ev), Some(900.0));
        let s = Spread3::of(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.p50, s.p99, s.max), (2.0, 3.0, 3.0));
        assert!(Spread3::of(vec![]).is_none());
    }
}
