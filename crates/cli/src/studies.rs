//! `partita bench virt` (paper 003), `partita bench rt` (paper 004) and `partita bench isolation` (issue 31):
//! arguments, checks and output.
use clap::Args;
use partita_studies::virt::{self, Placement, VirtConfig};
use partita_supervisor::supervisor::{install_stop_signals, STATE_DIR};
use std::path::PathBuf;
use std::process::ExitCode;

fn usage(m: String) -> ExitCode {
    eprintln!("error: {m}");
    ExitCode::from(2)
}

/// The CPUs this process may use, for checking `--cpu` arguments.
pub fn check_cpu(flag: &str, cpu: usize) -> Result<(), String> {
    let cpus = partita_os::sched::current_thread_cpus().unwrap_or_default();
    if cpus.contains(&cpu) {
        Ok(())
    } else {
        Err(format!("{flag}: CPU {cpu} is not one of this machine's {cpus:?}"))
    }
}

/// The keys of a comma-separated flag, each named once, in the order given.
fn keys<T: PartialEq>(flag: &str, given: &[String], from_key: fn(&str) -> Option<T>, known: &str) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for k in given {
        match from_key(k.trim()) {
            Some(x) if !out.contains(&x) => out.push(x),
            Some(_) => return Err(format!("{flag}: {k} is named twice")),
            None => return Err(format!("{flag}: {k:?} is not one of {known}")),
        }
    }
    Ok(out)
}

/// The acceleration VM rows will run under and why, when there are VM rows (`what`: row or profile).
fn accel(vm_rows: bool, asked: &str, what: &str) -> Result<(String, String), String> {
    if vm_rows {
        crate::paper::vm_accel(asked)
    } else {
        Ok(("none".into(), format!("no VM {what} asked for")))
    }
}

#[derive(Args)]
pub struct VirtArgs {
    /// Output folder: virt.md, virt.json, virt-<size>.svg/.png, raw/ (every client report, the guests' consoles).
    #[arg(long, default_value = "results/virt")]
    out: PathBuf,
    /// Rows, comma-separated: ideal, native, process, process-plan, vm, vm-plan.
    #[arg(long, value_delimiter = ',', default_value = "ideal,native,process,process-plan,vm,vm-plan")]
    placements: Vec<String>,
    /// Data sizes each way, bytes, comma-separated (paper 003: 64 and 512).
    #[arg(long, value_delimiter = ',', default_value = "64,512")]
    sizes: Vec<String>,
    /// The server's work per request, µs, comma-separated (paper 003: 0 to 100).
    #[arg(long, value_delimiter = ',', default_value = "0,10,25,50,75,100")]
    works: Vec<f64>,
    /// Measured requests per point.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    /// Runs of every row, the rows interleaved.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// The server's CPU (and the plan's).
    #[arg(long, default_value_t = 1)]
    cpu: usize,
    /// The client's CPU.
    #[arg(long, default_value_t = 0)]
    client_cpu: usize,
    /// The VM rows' acceleration: auto (KVM when a stock guest boots under it here, else TCG), kvm or tcg.
    #[arg(long, default_value = "auto")]
    accel: String,
    #[command(flatten)]
    setup: crate::bench::SetupArgs,
}

pub fn virt(a: VirtArgs) -> ExitCode {
    let placements = match keys("--placements", &a.placements, Placement::from_key, "ideal, native, process, process-plan, vm, vm-plan") {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    let mut sizes = Vec::new();
    for s in &a.sizes {
        match partita_bench::parse_size(s) {
            Ok(n) if (1..=partita_apps::exchange::MAX_DATA).contains(&n) => sizes.push(n),
            Ok(n) => return usage(format!("--sizes: {n} bytes is not in 1..={}", partita_apps::exchange::MAX_DATA)),
            Err(e) => return usage(format!("--sizes: {e}")),
        }
    }
    if let Some(w) = a.works.iter().find(|w| !(0.0..=100_000.0).contains(*w)) {
        return usage(format!("--works: {w} µs is not in 0..=100000"));
    }
    if (1..sizes.len()).any(|i| sizes[..i].contains(&sizes[i])) || (1..a.works.len()).any(|i| a.works[..i].contains(&a.works[i])) {
        return usage("--sizes and --works: name each value once".into());
    }
    if a.count > 1_000_000 || a.warmup > 1_000_000 {
        return usage("--count and --warmup are at most 1000000".into());
    }
    if placements.is_empty() || sizes.is_empty() || a.works.is_empty() {
        return usage("--placements, --sizes and --works each need at least one value".into());
    }
    if a.count == 0 || a.repeat == 0 {
        return usage("--count and --repeat must be at least 1".into());
    }
    if let Err(e) = check_cpu("--cpu", a.cpu).and_then(|_| check_cpu("--client-cpu", a.client_cpu)) {
        return usage(e);
    }
    if a.cpu == a.client_cpu {
        return usage(format!("--cpu and --client-cpu are both {}: the client needs a CPU of its own", a.cpu));
    }
    if !["auto", "kvm", "tcg"].contains(&a.accel.as_str()) {
        return usage(format!("--accel: {:?} is not auto, kvm or tcg", a.accel));
    }
    let setup = match a.setup.setup() {
        Ok(s) => s,
        Err(e) => return usage(e.to_string()),
    };
    let accel = match accel(placements.iter().any(|p| p.is_vm()), &a.accel, "row") {
        Ok(x) => x,
        Err(e) => {
            eprintln!("partita bench virt: {e}");
            return ExitCode::FAILURE;
        }
    };
    install_stop_signals();
    let cfg = VirtConfig {
        exe: crate::paper::exe(),
        out: a.out.clone(),
        state_root: STATE_DIR.into(),
        placements,
        sizes,
        works_us: a.works.clone(),
        count: a.count,
        warmup: a.warmup,
        repeat: a.repeat,
        cpu: a.cpu,
        client_cpu: a.client_cpu,
        accel: accel.0,
        accel_reason: accel.1,
        setup,
    };
    eprintln!("partita bench virt: VM rows under {} ({}); {}", cfg.accel, cfg.accel_reason, setup.caption());
    let res = match virt::run(&cfg, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("partita bench virt: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = crate::paper::command_line();
    match virt::write_all(&res, &a.out, &command) {
        Ok(notes) => notes.iter().for_each(|n| eprintln!("partita bench virt: {n}")),
        Err(e) => {
            eprintln!("partita bench virt: writing {}: {e}", a.out.display());
            return ExitCode::FAILURE;
        }
    }
    print!("{}", virt::markdown(&res, &command));
    ExitCode::SUCCESS
}

#[derive(Args)]
pub struct RtArgs {
    /// Output folder: rt.md, rt.json, rt-<profile>.svg/.png, raw/ (every latency).
    #[arg(long, default_value = "results/rt")]
    out: PathBuf,
    /// System profiles, comma-separated: native, process, process-plan, vm.
    #[arg(long, value_delimiter = ',', default_value = "native,process,process-plan,vm")]
    profiles: Vec<String>,
    /// Testing profiles of paper 004's Table 2, comma-separated (1..=6; native runs 1–4).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6")]
    tps: Vec<String>,
    /// cyclictest's run per cell (e.g. 20s, 10m, 8h: the paper's). The default, 20 s, makes the whole matrix
    /// about eight minutes.
    #[arg(long, default_value = "20s")]
    duration: String,
    /// Length of the slices of the stability-over-time table [default: a quarter of --duration].
    #[arg(long)]
    slice: Option<String>,
    /// cyclictest's period, µs (paper 004: 10 ms).
    #[arg(long, default_value_t = 10_000)]
    interval_us: u32,
    /// stress-ng CPU workers (sqrt).
    #[arg(long, default_value_t = 4)]
    cpu_workers: u32,
    /// stress-ng VM workers.
    #[arg(long, default_value_t = 4)]
    vm_workers: u32,
    /// Each VM worker's block, MiB (paper 004: 64).
    #[arg(long, default_value_t = 64)]
    vm_mib: u32,
    /// The VM profile's acceleration: auto, kvm or tcg.
    #[arg(long, default_value = "auto")]
    accel: String,
    #[command(flatten)]
    setup: crate::bench::SetupArgs,
}

pub fn rt(a: RtArgs) -> ExitCode {
    use partita_studies::rt::{self, Load, Profile, RtConfig};
    let profiles = match keys("--profiles", &a.profiles, Profile::from_key, "native, process, process-plan, vm") {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    let mut tps = Vec::new();
    for t in &a.tps {
        match t.trim().trim_start_matches("TP").trim_start_matches("tp").parse::<u8>() {
            Ok(n) if (1..=6).contains(&n) && !tps.contains(&n) => tps.push(n),
            _ => return usage(format!("--tps: {t:?} is not a testing profile 1..=6 named once")),
        }
    }
    if profiles.is_empty() || tps.is_empty() {
        return usage("--profiles and --tps each need at least one value".into());
    }
    if profiles.iter().all(|p| !tps.iter().any(|&t| p.runs(t))) {
        return usage("nothing to run: the native profile runs TP1–TP4 only".into());
    }
    let Some(duration) = partita_paper::soak::parse_duration(&a.duration).filter(|d| d.as_secs() >= 1) else {
        return usage(format!("--duration: {:?} is not a duration of at least 1 s (e.g. 20s, 10m, 8h)", a.duration));
    };
    let slice = match &a.slice {
        None => duration / 4,
        Some(s) => match partita_paper::soak::parse_duration(s).filter(|d| *d <= duration && d.as_millis() as u64 >= a.interval_us as u64 / 1000) {
            Some(d) => d,
            None => return usage(format!("--slice: {s:?} is not a duration between one period and --duration")),
        },
    };
    if !(100..=1_000_000).contains(&a.interval_us) {
        return usage(format!("--interval-us: {} is not in 100..=1000000", a.interval_us));
    }
    if a.cpu_workers > 64 || a.vm_workers > 64 || !(1..=1024).contains(&a.vm_mib) {
        return usage("--cpu-workers and --vm-workers are at most 64, --vm-mib 1..=1024".into());
    }
    // The VM workers' blocks must fit this machine's memory with room to spare (the native profile runs them
    // on the host without a limit).
    let mem_mib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| t.lines().find_map(|l| l.strip_prefix("MemTotal:")?.split_whitespace().next()?.parse::<u64>().ok())).unwrap_or(0) / 1024;
    if mem_mib > 0 && a.vm_workers as u64 * a.vm_mib as u64 * 2 > mem_mib {
        return usage(format!("--vm-workers {} × --vm-mib {} is more than half of this machine's {mem_mib} MiB: give fewer or smaller workers", a.vm_workers, a.vm_mib));
    }
    if let Err(e) = check_cpu("this benchmark", 0).and_then(|_| check_cpu("this benchmark", 1)) {
        return usage(format!("{e}: it needs CPUs 0 and 1 (the RT task on 1, the load on 0)"));
    }
    if !["auto", "kvm", "tcg"].contains(&a.accel.as_str()) {
        return usage(format!("--accel: {:?} is not auto, kvm or tcg", a.accel));
    }
    let setup = match a.setup.setup() {
        Ok(s) => s,
        Err(e) => return usage(e.to_string()),
    };
    let accel = match accel(profiles.contains(&Profile::Vm), &a.accel, "profile") {
        Ok(x) => x,
        Err(e) => {
            eprintln!("partita bench rt: {e}");
            return ExitCode::FAILURE;
        }
    };
    install_stop_signals();
    let cfg = RtConfig {
        exe: crate::paper::exe(),
        out: a.out.clone(),
        state_root: STATE_DIR.into(),
        profiles,
        tps,
        duration,
        slice,
        interval_us: a.interval_us,
        load: Load { cpu_workers: a.cpu_workers, vm_workers: a.vm_workers, vm_bytes_mib: a.vm_mib },
        accel: accel.0,
        accel_reason: accel.1,
        setup,
        guest_tools: None,
    };
    if let Err(e) = rt::check_systems(&cfg) {
        return usage(format!("a cell's system is not valid on this machine: {e}"));
    }
    eprintln!("partita bench rt: {:?} per cell; VM profile under {} ({}); {}", duration, cfg.accel, cfg.accel_reason, setup.caption());
    let res = match rt::run(&cfg, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("partita bench rt: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = crate::paper::command_line();
    match rt::write_all(&res, &a.out, &command) {
        Ok(notes) => notes.iter().for_each(|n| eprintln!("partita bench rt: {n}")),
        Err(e) => {
            eprintln!("partita bench rt: writing {}: {e}", a.out.display());
            return ExitCode::FAILURE;
        }
    }
    print!("{}", rt::markdown(&res, &command));
    let failed = res.failed();
    if failed.is_empty() {
        return ExitCode::SUCCESS;
    }
    for c in failed {
        eprintln!("partita bench rt: {} TP{} failed: {}", c.profile.key(), c.tp, c.error.as_deref().unwrap_or_default());
    }
    ExitCode::FAILURE
}

/// Where QEMU must be for the VM table.
const QEMU: &str = "/usr/bin/qemu-system-x86_64";

#[derive(Args)]
pub struct IsolationArgs {
    /// Measured seconds of each cell, after the fault program is ready and 1 s of settling.
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true)]
    seconds: f64,
    /// Faults, comma-separated [default: all]: spin, threads, fork-storm, page-faults, vma-walk, smaps,
    /// big-write, fsync, o-direct, sync, aio, tmpfs-write, thp, mlock, timers, udp-flood.
    #[arg(long, value_delimiter = ',')]
    faults: Vec<String>,
    /// Also the VM table: the faulty partition as a VM partition (for the faults that mean something in a
    /// guest) [default: when /usr/bin/qemu-system-x86_64 exists].
    #[arg(long, conflicts_with = "no_vm")]
    vm: bool,
    /// No VM table.
    #[arg(long)]
    no_vm: bool,
    /// Only the VM table (to complete or repeat it without the process cells).
    #[arg(long, conflicts_with = "no_vm")]
    only_vm: bool,
    /// Output folder: isolation.md, isolation.json.
    #[arg(long, default_value = "results/isolation")]
    out: PathBuf,
    /// Runs of every cell, quiet and fault cells interleaved; tables give medians.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
}

pub fn isolation(a: IsolationArgs) -> ExitCode {
    use partita_apps::fault::Kind;
    use partita_studies::isolation::{self, IsolationConfig};
    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
        return usage(format!("--seconds: {} is not a number of seconds in (0, 3600]; give e.g. --seconds 5", a.seconds));
    }
    let faults = if a.faults.is_empty() {
        Kind::ALL[1..].to_vec()
    } else {
        match keys("--faults", &a.faults, |k| Kind::from_key(k).filter(|k| *k != Kind::Sleep), &Kind::fault_keys()) {
            Ok(f) => f,
            Err(e) => return usage(e),
        }
    };
    if !(1..=100).contains(&a.repeat) {
        return usage(format!("--repeat: {} is not in 1..=100", a.repeat));
    }
    if let Err(e) = check_cpu("this benchmark", 0) {
        return usage(format!("{e}: its plan runs on CPU 0"));
    }
    let qemu = std::path::Path::new(QEMU).exists();
    if (a.vm || a.only_vm) && !qemu {
        let flag = if a.vm { "--vm" } else { "--only-vm" };
        return usage(format!("{flag}: {QEMU} is not installed (scripts/setup.sh installs qemu-system-x86); give --no-vm"));
    }
    let vm = (a.vm || a.only_vm || qemu) && !a.no_vm && faults.iter().any(|f| f.in_guest());
    if a.only_vm && !vm {
        return usage("--only-vm: none of the faults given runs in a guest (spin, threads, fork-storm, page-faults, vma-walk, big-write, thp, timers, udp-flood do)".to_string());
    }
    let accel = match accel(vm, "auto", "table") {
        Ok(x) => x,
        Err(e) => {
            eprintln!("partita bench isolation: {e}");
            return ExitCode::FAILURE;
        }
    };
    install_stop_signals();
    let cfg = IsolationConfig {
        exe: crate::paper::exe(),
        out: a.out.clone(),
        state_root: STATE_DIR.into(),
        faults,
        span: std::time::Duration::from_secs_f64(a.seconds),
        settle: std::time::Duration::from_secs(1),
        process: !a.only_vm,
        vm,
        accel: accel.0,
        accel_reason: accel.1,
        repeat: a.repeat,
    };
    if let Err(e) = isolation::check_systems(&cfg, &partita_system::Host::this_machine()) {
        return usage(format!("a cell's system is not valid on this machine: {e}"));
    }
    let cells = isolation::plan_cells(&cfg).len();
    eprintln!("partita bench isolation: {cells} cells of {:.1} s measured; VM table: {}", a.seconds, if vm { format!("{} ({})", cfg.accel, cfg.accel_reason) } else { "none".into() });
    let res = match isolation::run(&cfg, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("partita bench isolation: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = crate::paper::command_line();
    if let Err(e) = isolation::write_all(&res, &a.out, &command) {
        eprintln!("partita bench isolation: writing {}: {e}", a.out.display());
        return ExitCode::FAILURE;
    }
    print!("{}", isolation::markdown(&res, &command));
    eprintln!("partita bench isolation: wrote {}, {}", a.out.join("isolation.md").display(), a.out.join("isolation.json").display());
    ExitCode::SUCCESS
}

#[derive(Args)]
pub struct ModesArgs {
    /// Switches at the end of a major frame, back and forth between the plans normal and degraded.
    #[arg(long, default_value_t = 1000)]
    switches: u32,
    /// Switches at once (`partita plan switch --now`), after those.
    #[arg(long, default_value_t = 200)]
    now_switches: u32,
    /// The plan's CPU [default: the machine's last].
    #[arg(long)]
    cpu: Option<usize>,
    /// No stress-ng beside the plan.
    #[arg(long)]
    no_load: bool,
    /// Output folder: modes.md, modes.json.
    #[arg(long, default_value = "results/modes")]
    out: PathBuf,
}

pub fn modes(a: ModesArgs) -> ExitCode {
    use partita_studies::modes::{self, ModesConfig};
    partita_supervisor::supervisor::install_stop_signals();
    let cpus = partita_system::Host::this_machine().cpus;
    let cpu = a.cpu.unwrap_or_else(|| cpus.last().copied().unwrap_or(0));
    if !cpus.contains(&cpu) {
        eprintln!("partita bench modes: --cpu {cpu} is not a CPU of this machine (its CPUs: {cpus:?})");
        return ExitCode::from(2);
    }
    if a.switches == 0 {
        eprintln!("partita bench modes: --switches must be at least 1");
        return ExitCode::from(2);
    }
    let cfg = ModesConfig { switches: a.switches, now_switches: a.now_switches, cpu, load: !a.no_load, partita: None, state_root: std::env::temp_dir().join(format!("partita-bench-modes-{}", std::process::id())) };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let res = match modes::run(&cfg, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("partita bench modes: {e}");
            let _ = std::fs::remove_dir_all(&cfg.state_root);
            return ExitCode::FAILURE;
        }
    };
    let _ = std::fs::remove_dir_all(&cfg.state_root);
    if let Err(e) = modes::write_all(&res, &a.out, &command) {
        eprintln!("partita bench modes: writing {}: {e}", a.out.display());
        return ExitCode::FAILURE;
    }
    print!("{}", modes::markdown(&res, &command));
    eprintln!("partita bench modes: wrote {}, {}", a.out.join("modes.md").display(), a.out.join("modes.json").display());
    ExitCode::SUCCESS
}

/// `partita bench modes-peer`: the program of `bench modes`' partitions.
pub fn modes_peer() -> ExitCode {
    let dir = std::env::var(partita_env::STATE_DIR).ok().map(PathBuf::from);
    match partita_studies::modes::peer(dir.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("partita bench modes-peer: {e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Args)]
pub struct WebArgs {
    /// Phases of each kind (page closed, page open), interleaved.
    #[arg(long, default_value_t = 6)]
    phases: u32,
    /// Seconds per phase.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// The loopback port `partita web` listens on.
    #[arg(long, default_value_t = 18080)]
    port: u16,
    /// Output folder: web.md, web.json.
    #[arg(long, default_value = "results/web")]
    out: PathBuf,
}

pub fn web(a: WebArgs) -> ExitCode {
    use partita_studies::web::{self, WebBenchConfig};
    if a.phases == 0 || !(a.seconds >= 3.0) {
        eprintln!("partita bench web: --phases must be at least 1 and --seconds at least 3");
        return ExitCode::from(2);
    }
    let partita = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("partita bench web: this program's path: {e}");
            return ExitCode::FAILURE;
        }
    };
    let work = std::env::temp_dir().join(format!("partita-bench-web-{}", std::process::id()));
    let cfg = WebBenchConfig { phases: a.phases, phase: std::time::Duration::from_secs_f64(a.seconds), partita, python: std::env::var_os("PARTITA_PYTHON").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv/bin/python")), port: a.port, work: work.clone() };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let res = web::run(&cfg, |l| eprintln!("{l}"));
    let _ = std::fs::remove_dir_all(&work);
    let res = match res {
        Ok(r) => r,
        Err(e) => {
            eprintln!("partita bench web: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = web::write_all(&res, &a.out, &command) {
        eprintln!("partita bench web: writing {}: {e}", a.out.display());
        return ExitCode::FAILURE;
    }
    print!("{}", web::markdown(&res, &command));
    eprintln!("partita bench web: wrote {}, {}", a.out.join("web.md").display(), a.out.join("web.json").display());
    ExitCode::SUCCESS
}
