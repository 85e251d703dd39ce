//! `partita demo` (the README's run command), `partita bench paper` (paper 001's experiments) and `partita bench vm`.
use clap::Args;
use partita_paper::bench::{self, BenchConfig};
use partita_paper::demo::{self, DemoConfig};
use partita_paper::scenario::Scenario;
use partita_supervisor::supervisor::{install_stop_signals, STATE_DIR};
use std::path::PathBuf;
use std::process::ExitCode;

/// This invocation as a report quotes it: `partita` and its arguments, those with spaces quoted.
pub fn command_line() -> String {
    std::iter::once("partita".to_string())
        .chain(std::env::args().skip(1).map(|a| if a.contains(' ') { format!("{a:?}") } else { a }))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn exe() -> String {
    std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "partita".into())
}

#[derive(Args)]
pub struct DemoArgs {
    /// Measured requests of the monitor.
    #[arg(long, default_value_t = 2000)]
    count: u64,
    #[arg(long, default_value_t = 200)]
    warmup: u64,
    /// Folder for the results (monitor.json with the raw samples, last-frame.png, demo.md).
    #[arg(long, default_value = "results/demo")]
    out: PathBuf,
}

pub fn demo(a: DemoArgs) -> ExitCode {
    if a.count == 0 {
        eprintln!("error: --count: give at least 1 request");
        return ExitCode::from(2);
    }
    install_stop_signals();
    let cfg = DemoConfig { exe: exe(), out: a.out.clone(), state_root: STATE_DIR.into(), count: a.count, warmup: a.warmup };
    eprintln!(
        "partita demo: booting the video-surveillance system of paper 001 (recorder 700 µs + routing 800 µs in a \
         1500 µs frame on CPU 0, a native monitoring node); the monitor makes {} requests after {} warm-up…",
        a.count, a.warmup
    );
    let r = match demo::run(&cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("partita demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut text = String::from("# partita demo: the video-surveillance system of paper 001\n\n");
    text.push_str("Response time of one frame request from the native monitoring node, through the routing partition, to the recorder partition and back:\n\n");
    text.push_str(&partita_programs::monitor::table(&r.report));
    if let Some(d) = r.window_delay {
        text.push_str(&format!(
            "\nThe plan alone delays a request by {:.0}–{:.0} µs (routing window, then the recorder's, then routing again); \
             the plan executor's latest window start was {:.1} µs late.\n",
            d.min_us,
            d.max_us,
            r.window_lateness_max_us.unwrap_or(0.0)
        ));
    }
    text.push_str(&format!(
        "\nWritten: {} (summary and raw samples), {} (the last frame the monitor received), {}.\n",
        r.monitor_json.display(),
        r.frame.display(),
        a.out.join("demo.md").display()
    ));
    print!("{text}");
    if let Err(e) = std::fs::write(a.out.join("demo.md"), &text) {
        eprintln!("partita demo: writing {}: {e}", a.out.join("demo.md").display());
        return ExitCode::FAILURE;
    }
    if r.report.answered == 0 {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[derive(Args)]
pub struct PaperArgs {
    /// Output folder: report.md, results.json, results.csv, runs.csv, fig5.svg, raw/*.json.
    #[arg(long, default_value = "results/paper")]
    out: PathBuf,
    /// Scenarios, comma-separated: network, traditional, single, trad-routing, partitioned, ports, multicore.
    #[arg(long, value_delimiter = ',', default_value = "network,traditional,single,trad-routing,partitioned,ports,multicore")]
    scenarios: Vec<String>,
    /// Measured requests per scenario for Tables 1 and 2.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    /// Answer size of Tables 1 and 2.
    #[arg(long, default_value = "1KiB")]
    size: String,
    /// Fig. 5 sizes, comma-separated (empty: no sweep).
    #[arg(long, value_delimiter = ',', default_value = "1KiB,4KiB,16KiB,64KiB,256KiB,1MiB")]
    sweep: Vec<String>,
    /// Measured requests per Fig. 5 point.
    #[arg(long, default_value_t = 1_000)]
    sweep_count: u64,
    #[arg(long, default_value_t = 100)]
    sweep_warmup: u64,
    /// CPU of the recorder node (and of the plan).
    #[arg(long, default_value_t = 0)]
    cpu: usize,
    /// CPU of the routing partition in the multicore scenario.
    #[arg(long, default_value_t = 1)]
    routing_cpu: usize,
    /// A system file (e.g. written by `partita plan optimise`) whose plan of the recorder and routing partitions
    /// runs as an extra row beside the paper's plan: PARTITIONED DDS WITH ROUTING, THE PLAN OF --plan.
    #[arg(long)]
    plan: Option<PathBuf>,
    /// The schedule model's cost of entering a window (docs/schedule.md), e.g. 25us; `measured`: each window
    /// instance loses one of the window entries (lateness plus the freeze and thaw calls) the executor measured
    /// under the paper's plan in this run.
    #[arg(long, default_value = "measured")]
    switch_cost: String,
    /// The setup the scenarios' system files grant every partition and node, and the runs per table row.
    #[command(flatten)]
    measure: crate::bench::MeasureArgs,
}

/// The plan of the recorder and routing partitions in system file `path`, for `bench paper --plan`.
fn plan_from(path: &std::path::Path) -> Result<partita_schedule::PlanWindows, String> {
    let system = partita_system::load(path).map_err(|e| format!("--plan {}: not a valid system file:\n{e}", path.display()))?;
    let at = partita_schedule::system::locate(&system, None).map_err(|e| format!("--plan: {e}"))?;
    let plan = partita_schedule::PlanWindows::of_plan(&system.modules[at.module].plans[at.plan]);
    let mut names: Vec<&str> = plan.slots.iter().map(|s| s.partition.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    if names != ["recorder", "routing"] {
        return Err(format!(
            "--plan {}: the plan of CPU {} has windows of {}; the paper's system needs a plan of exactly `recorder` and `routing` (write one with `partita plan optimise`)",
            path.display(),
            at.cpu,
            names.join(", ")
        ));
    }
    Ok(plan)
}

pub fn paper(a: PaperArgs) -> ExitCode {
    let mut scenarios = Vec::new();
    for s in &a.scenarios {
        match Scenario::from_key(s) {
            Some(x) => scenarios.push(x),
            None => {
                eprintln!("error: --scenarios: {s:?} is not one of network, traditional, single, trad-routing, partitioned, ports, multicore");
                return ExitCode::from(2);
            }
        }
    }
    let size = |s: &str, what: &str| partita_bench::parse_size(s).map_err(|e| format!("{what} {s:?}: {e}"));
    let table_size = match size(&a.size, "--size") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut sweep = Vec::new();
    for s in a.sweep.iter().filter(|s| !s.is_empty()) {
        match size(s, "--sweep") {
            Ok(v) => sweep.push(v),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if a.cpu >= cpus || (scenarios.contains(&Scenario::Multicore) && (a.routing_cpu >= cpus || a.routing_cpu == a.cpu)) {
        eprintln!("error: --cpu {} / --routing-cpu {}: this machine has CPUs 0..{}; the multicore scenario needs two different ones", a.cpu, a.routing_cpu, cpus - 1);
        return ExitCode::from(2);
    }
    if a.count == 0 || a.sweep_count == 0 {
        eprintln!("error: --count and --sweep-count: give at least 1 request");
        return ExitCode::from(2);
    }
    let setup = match a.measure.setup() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let plan = match a.plan.as_deref().map(plan_from).transpose() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if plan.is_some() {
        scenarios.push(Scenario::FilePlan);
    }
    let switch_ns = match a.switch_cost.parse::<partita_system::Duration>() {
        _ if a.switch_cost == "measured" => None,
        Ok(d) => Some(d.as_nanos()),
        Err(e) => {
            eprintln!("error: --switch-cost {:?}: {e}; give `measured` or a duration such as 25us", a.switch_cost);
            return ExitCode::from(2);
        }
    };
    install_stop_signals();
    let cfg = BenchConfig {
        exe: exe(),
        out: a.out.clone(),
        state_root: STATE_DIR.into(),
        scenarios,
        table_size,
        count: a.count,
        warmup: a.warmup,
        sweep_sizes: sweep,
        sweep_count: a.sweep_count,
        sweep_warmup: a.sweep_warmup,
        recorder_cpu: a.cpu,
        routing_cpu: a.routing_cpu,
        repeat: a.measure.repeat,
        setup,
        plan,
        switch_ns,
    };
    eprintln!("partita bench paper: {}; {}", setup.caption(), bench::granted(&setup));
    let res = match bench::run(&cfg, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("partita bench paper: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = command_line();
    if let Err(e) = partita_paper::report::write_all(&res, &a.out, &command) {
        eprintln!("partita bench paper: writing {}: {e}", a.out.display());
        return ExitCode::FAILURE;
    }
    print!("{}", partita_paper::report::markdown(&res, &command));
    eprintln!("wrote {}/report.md, results.json, results.csv, runs.csv, fig5.svg, raw/", a.out.display());
    ExitCode::SUCCESS
}

#[derive(Args)]
pub struct VmBenchArgs {
    /// Output folder: vm.md, vm.json, raw/ (monitor reports, the guests' consoles).
    #[arg(long, default_value = "results/vm")]
    out: PathBuf,
    /// Measured requests per run.
    #[arg(long, default_value_t = 2_000)]
    count: u64,
    #[arg(long, default_value_t = 200)]
    warmup: u64,
    /// Answer size.
    #[arg(long, default_value = "1KiB")]
    size: String,
    /// CPU of the recorder and of the plan.
    #[arg(long, default_value_t = 1)]
    cpu: usize,
    /// The VM rows' acceleration: auto (KVM when a stock guest boots under it here, else TCG), kvm or tcg.
    #[arg(long, default_value = "auto")]
    accel: String,
    #[command(flatten)]
    measure: crate::bench::MeasureArgs,
}

pub fn vm(a: VmBenchArgs) -> ExitCode {
    let usage = |m: String| {
        eprintln!("error: {m}");
        ExitCode::from(2)
    };
    let size = match partita_bench::parse_size(&a.size) {
        Ok(s) => s,
        Err(e) => return usage(format!("--size: {e}")),
    };
    if a.count == 0 {
        return usage("--count: give at least 1 measured request".into());
    }
    if !["auto", "kvm", "tcg"].contains(&a.accel.as_str()) {
        return usage(format!("--accel: {:?} is not auto, kvm or tcg", a.accel));
    }
    if let Err(e) = crate::studies::check_cpu("--cpu", a.cpu) {
        return usage(e);
    }
    let setup = match a.measure.setup() {
        Ok(s) => s,
        Err(e) => return usage(e.to_string()),
    };
    let accel = match vm_accel(&a.accel) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("partita bench vm: {e}");
            return ExitCode::FAILURE;
        }
    };
    install_stop_signals();
    let cfg = partita_paper::vm_bench::VmBenchConfig {
        exe: exe(),
        out: a.out.clone(),
        state_root: STATE_DIR.into(),
        reply_size: size,
        count: a.count,
        warmup: a.warmup,
        repeat: a.measure.repeat,
        recorder_cpu: a.cpu,
        accel: accel.0.clone(),
        setup,
    };
    eprintln!("partita bench vm: VM rows under {} ({}); {}", accel.0, accel.1, setup.caption());
    let res = match partita_paper::vm_bench::run(&cfg, accel, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("partita bench vm: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = command_line();
    if let Err(e) = partita_paper::vm_bench::write_all(&res, &a.out, &command) {
        eprintln!("partita bench vm: writing {}: {e}", a.out.display());
        return ExitCode::FAILURE;
    }
    print!("{}", partita_paper::vm_bench::markdown(&res, &command));
    ExitCode::SUCCESS
}

/// The acceleration the VM rows will run under and why: what was asked, or for `auto` the probe's verdict
/// (from its cache, or by booting the guest under KVM once).
pub fn vm_accel(asked: &str) -> Result<(String, String), String> {
    if asked != "auto" {
        return Ok((asked.to_string(), "asked for with --accel".into()));
    }
    let cache = partita_vm::image::cache_dir();
    let spec = partita_vm::BaseSpec::new(&cache).map_err(|e| e.to_string())?;
    let base = partita_vm::prepare_base(&spec).map_err(|e| e.to_string())?;
    let v = partita_vm::probe::probe(&base.kernel.image, &base.path, &cache, partita_vm::probe::DEFAULT_TIMEOUT, false).map_err(|e| e.to_string())?;
    Ok((v.accel.to_string(), v.reason))
}

#[derive(Args)]
pub struct UplinkBenchArgs {
    /// Output folder: uplink.md, uplink.json, and each row's system files and supervisor logs.
    #[arg(long, default_value = "results/uplink")]
    out: PathBuf,
    /// Measured requests per row.
    #[arg(long, default_value_t = 1_000)]
    count: u64,
    #[arg(long, default_value_t = 100)]
    warmup: u64,
    /// Answer size.
    #[arg(long, default_value = "1KiB")]
    size: String,
    /// How the measured processes are scheduled.
    #[command(flatten)]
    setup: crate::bench::SetupArgs,
}

/// `partita bench uplink`: paper 001's NETWORK and PARTITIONED DDS WITH ROUTING rows on one host and with the
/// monitor on another machine over an uplink, in one run (docs/deployment.md).
pub fn uplink(a: UplinkBenchArgs) -> ExitCode {
    let usage = |m: String| {
        eprintln!("error: {m}");
        ExitCode::from(2)
    };
    let size = match partita_bench::parse_size(&a.size) {
        Ok(s) => s,
        Err(e) => return usage(format!("--size: {e}")),
    };
    if a.count == 0 {
        return usage("--count: give at least 1 measured request".into());
    }
    let setup = match a.setup.setup() {
        Ok(s) => s,
        Err(e) => return usage(e.to_string()),
    };
    let partita = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return usage(format!("the partita binary: {e}")),
    };
    let cfg = partita_paper::uplink_bench::UplinkBenchConfig { count: a.count, warmup: a.warmup, reply_size: size, out: a.out.clone(), partita, setup };
    let rows = match partita_paper::uplink_bench::run(&cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("partita bench uplink: {e}");
            return ExitCode::FAILURE;
        }
    };
    let md = partita_paper::uplink_bench::markdown(&rows);
    print!("{md}");
    let (md_path, json_path) = (a.out.join("uplink.md"), a.out.join("uplink.json"));
    let json = serde_json::to_string_pretty(&rows).unwrap_or_default();
    if let Err(e) = std::fs::write(&md_path, &md).and_then(|_| std::fs::write(&json_path, json)) {
        eprintln!("partita bench uplink: {}: {e}", a.out.display());
        return ExitCode::FAILURE;
    }
    eprintln!("wrote {} and {}", md_path.display(), json_path.display());
    ExitCode::SUCCESS
}
