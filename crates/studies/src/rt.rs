//! `partita bench rt`: paper 004 on this machine. The latency of a periodic real-time task (Debian's
//! `cyclictest`, SCHED_FIFO, memory locked, 10 ms period) alone or beside `stress-ng` load, in the testing
//! profiles TP1–TP6 of the paper's Table 2, on the system profiles:
//!
//! | system profile | where cyclictest runs |
//! |---|---|
//! | native | a child process of this command on the host (the paper's bare-metal baseline) |
//! | process | a process partition of a module on CPUs 0 and 1 without a plan, granted SCHED_FIFO 89 |
//! | process-plan | the same partition on CPU 1 under a cyclic plan: its 1050 µs window of a 2100 µs frame, two neighbours 525 µs each |
//! | vm | a VM partition with two vCPUs on CPUs 0 and 1 (cyclictest at the guest's SCHED_FIFO 99) |
//!
//! | TP | affinity | load | neighbours |
//! |---|---|---|---|
//! | 1 | no | no | no |
//! | 2 | yes | no | no |
//! | 3 | no | beside the RT task | no |
//! | 4 | yes | beside the RT task, on the other CPU | no |
//! | 5 | no | in two neighbour partitions (VMs on the vm profile) | yes |
//! | 6 | yes | in two neighbour partitions | yes |
//!
//! Affinity: cyclictest on CPU 1 (`-a 1`), the load on CPU 0 (`stress-ng --taskset 0`, the neighbours'
//! partitions on CPU 0); without it nothing is pinned within the profile's CPUs. Under the plan every planned
//! partition runs on the plan's CPU 1, so affinity changes nothing there, and the neighbours share the plan.
//! The native profile runs TP1–TP4, as the paper's baseline does (TP5 and TP6 need partitions).
//!
//! cyclictest prints every latency (`-v`); the statistics are [`BoxStats`] of all of them and of every
//! `slice` of the run (stability over time).
use partita_lab::boxstats::BoxStats;
use partita_lab::machine::{Disturbance, Watch, HOST_NOTE};
use partita_lab::plot;
use partita_lab::setup::Setup;
use partita_lab::run::{run_until_exit, RunError};
use partita_supervisor::UpOptions;
use partita_system::spec::{HealthSpec, ModuleSpec, PartitionSpec, PlanSpec, SchedulingSpec, SystemSpec, TimeOverrunSpec, VmSpec};
use partita_system::{ByteSize, OverrunAction};
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    Native,
    Process,
    ProcessPlan,
    Vm,
}

impl Profile {
    pub const ALL: [Profile; 4] = [Profile::Native, Profile::Process, Profile::ProcessPlan, Profile::Vm];

    pub fn key(self) -> &'static str {
        match self {
            Profile::Native => "native",
            Profile::Process => "process",
            Profile::ProcessPlan => "process-plan",
            Profile::Vm => "vm",
        }
    }

    pub fn from_key(k: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.key() == k)
    }

    pub fn title(self) -> &'static str {
        match self {
            Profile::Native => "native",
            Profile::Process => "process partition",
            Profile::ProcessPlan => "process partition under a plan",
            Profile::Vm => "VM partition",
        }
    }

    /// Whether the profile runs testing profile `tp`.
    pub fn runs(self, tp: u8) -> bool {
        self != Profile::Native || tp <= 4
    }
}

/// Affinity, load beside the RT task, load in two neighbours: paper 004's Table 2.
pub fn testing_profile(tp: u8) -> (bool, bool, bool) {
    match tp {
        1 => (false, false, false),
        2 => (true, false, false),
        3 => (false, true, false),
        4 => (true, true, false),
        5 => (false, false, true),
        _ => (true, false, true),
    }
}

/// The stress-ng load: CPU workers spinning on sqrt and VM workers mapping, touching and unmapping blocks.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Load {
    pub cpu_workers: u32,
    pub vm_workers: u32,
    pub vm_bytes_mib: u32,
}

#[derive(Debug, Clone)]
pub struct RtConfig {
    pub exe: String,
    pub out: PathBuf,
    pub state_root: PathBuf,
    pub profiles: Vec<Profile>,
    pub tps: Vec<u8>,
    pub duration: Duration,
    pub slice: Duration,
    pub interval_us: u32,
    pub load: Load,
    pub accel: String,
    pub accel_reason: String,
    pub setup: Setup,
    /// The archive of cyclictest and stress-ng for the VM profile's guests (`vm.initramfs`): the guest copies
    /// a command's own program, but the load beside cyclictest is started from a shell line. Set by [`run`].
    pub guest_tools: Option<PathBuf>,
}

/// SCHED_FIFO priorities: on the host, in a partition (the top a system file may grant, below the plan
/// executors' 90), in a guest.
pub const NATIVE_PRIORITY: u8 = 99;
pub const PARTITION_PRIORITY: u8 = 89;
pub const GUEST_PRIORITY: u8 = 99;
/// The plan of process-plan: the RT partition's window, then each neighbour's. The 2100 µs frame is not a
/// divisor of cyclictest's 10 ms period, so its wake-ups fall at 21 phases of the frame, 100 µs apart, in and out
/// of its window: what a plan costs a periodic task that is not aligned with its window. (With a 2000 µs frame
/// every wake-up falls at the same phase, in the window or not, depending on when cyclictest started.)
pub const PLAN_US: (u64, u64) = (1050, 525);

fn cyclictest(cfg: &RtConfig, prio: u8, affinity: bool) -> Vec<String> {
    let mut c: Vec<String> = ["cyclictest", "-q", "-v", "-m", "--default-system", "-t", "1", "-d", "0"].map(String::from).to_vec();
    c.extend(["-p".into(), prio.to_string(), "-i".into(), cfg.interval_us.to_string(), "-D".into(), format!("{}", cfg.duration.as_secs().max(1))]);
    if affinity {
        c.extend(["-a".into(), "1".into()]);
    }
    c
}

/// stress-ng with `share` of the load (1 or 2: half of it), pinned to CPU 0 when `pinned`, running at most
/// `secs` (it also ends with its partition).
fn stress(load: &Load, share: u32, pinned: bool, secs: u64, in_partition: bool) -> Vec<String> {
    // Not --quiet: its "dispatching hogs" line is how a cell knows that the load started. `--sched other`: the
    // load runs under normal scheduling, as the paper's did, also where it inherits the RT partition's
    // SCHED_FIFO 89 (spinning at 89 beside cyclictest, it kept cyclictest from ever finishing).
    let mut c: Vec<String> = vec!["stress-ng".into(), "--sched".into(), "other".into()];
    if in_partition {
        // stress-ng refuses to start in a directory it cannot write, and a process partition's working
        // directory is its read-only view of the host: its own /tmp is writable.
        c.extend(["--temp-path".into(), "/tmp".into()]);
    }
    let (cpu, vm) = (load.cpu_workers.div_ceil(share), load.vm_workers.div_ceil(share));
    if cpu > 0 {
        c.extend(["--cpu".into(), cpu.to_string(), "--cpu-method".into(), "sqrt".into()]);
    }
    if vm > 0 {
        c.extend(["--vm".into(), vm.to_string(), "--vm-bytes".into(), format!("{}M", load.vm_bytes_mib)]);
    }
    if pinned {
        c.extend(["--taskset".into(), "0".into()]);
    }
    c.extend(["--timeout".into(), format!("{secs}s")]);
    c
}

fn shell_quote(v: &[String]) -> String {
    v.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect::<Vec<_>>().join(" ")
}

/// The memory a partition running `load`'s share needs (its VM workers' blocks, and room for the rest).
fn memory_mib(load: &Load, share: u32) -> u64 {
    u64::from(256 + load.vm_workers.div_ceil(share) * load.vm_bytes_mib * 2)
}

/// How long the RT guest waits before it measures when loaded neighbour guests boot beside it, s.
const VM_NEIGHBOURS_HEAD_START_S: u64 = 3;

/// The system of `profile` × `tp` (not for native).
pub fn system_spec(cfg: &RtConfig, profile: Profile, tp: u8, name: &str) -> SystemSpec {
    let (affinity, beside, neighbours) = testing_profile(tp);
    let vm = profile == Profile::Vm;
    // Guests boot together; with loaded neighbours the RT guest gives theirs a head start, so that their load
    // runs from its first wake-up (three TCG guests booting on two CPUs: a short cell ended twice in one suite
    // run before a neighbour's stress-ng had started). The neighbours' load runs that much longer.
    let head_start = if vm && neighbours { VM_NEIGHBOURS_HEAD_START_S } else { 0 };
    let secs = cfg.duration.as_secs().max(1) + 5 + head_start;
    let ct = cyclictest(cfg, if vm { GUEST_PRIORITY } else { PARTITION_PRIORITY }, affinity);
    let ct = if head_start > 0 { vec!["sh".into(), "-c".into(), format!("sleep {head_start}; exec {}", shell_quote(&ct))] } else { ct };
    // The RT task's command: cyclictest, with the load started beside it in the same partition for TP3/TP4.
    // Under the plan every planned partition is confined to the plan's CPU 1: pinning the load to CPU 0 would
    // fail there, so it shares the RT partition's CPU.
    let planned = profile == Profile::ProcessPlan;
    let rt_cmd: Vec<String> = if beside {
        vec!["sh".into(), "-c".into(), format!("{} & exec {}", shell_quote(&stress(&cfg.load, 1, affinity && !planned, secs, !vm)), shell_quote(&ct))]
    } else {
        ct
    };
    let cpus: &[usize] = if planned { &[1] } else { &[0, 1] };
    let partition = |pname: &str, cmd: &[String], mem: u64, rt: bool, pin0: bool| {
        let mut p = PartitionSpec::new(pname, cmd.iter().cloned()).pids(256).health(HealthSpec::stop());
        if vm {
            let mut v = VmSpec::new().memory(ByteSize::mib(mem)).vcpus(2).accel(cfg.accel.parse().expect("a checked acceleration")).boot_timeout(partita_system::Duration::from_millis(90_000));
            if let Some(tools) = &cfg.guest_tools {
                v = v.initramfs(tools.display().to_string());
            }
            p = p.vm(v);
        } else {
            p = p.memory(ByteSize::mib(mem));
            // A partition sees its program and what its file binds: the programs its shell line runs.
            if cmd.first().is_some_and(|p| p == "sh") {
                p = p.binds(["cyclictest", "stress-ng", "sleep"].into_iter().filter(|prog| cmd.iter().any(|a| a.contains(*prog))));
            }
            if rt {
                p = p.scheduling(SchedulingSpec::fifo(u64::from(PARTITION_PRIORITY)));
            }
        }
        if pin0 && !planned {
            p = p.cpus([0]);
        }
        // Under the plan, a partition's load (stress-ng's page faults, its I/O) runs past its window in the kernel:
        // the default overrun action would restart it, cyclictest with it, before cyclictest printed a latency
        // (a TP4 cell ended so in one suite run). The study measures latency under that load, not containment
        // (docs/security.md measures that): overruns are only logged.
        if planned && !vm {
            p = p.time_overrun(TimeOverrunSpec::new().action(OverrunAction::Ignore));
        }
        p
    };
    let mut module = ModuleSpec::new("rt-module").cpus(cpus.iter().copied());
    module = module.partition(partition("rt", &rt_cmd, if beside { memory_mib(&cfg.load, 1) } else { 256 }, true, false));
    if neighbours || planned {
        for n in ["neighbour-1", "neighbour-2"] {
            let cmd = if neighbours { stress(&cfg.load, 2, false, secs, !vm) } else { vec!["sleep".into(), format!("{secs}")] };
            module = module.partition(partition(n, &cmd, if neighbours { memory_mib(&cfg.load, 2) } else { 64 }, false, affinity));
        }
    }
    if planned {
        let (rt, n) = PLAN_US;
        let us = partita_system::Duration::from_micros;
        module = module.plan(PlanSpec::new(1, us(rt + 2 * n)).window("rt", us(0), us(rt)).window("neighbour-1", us(rt), us(n)).window("neighbour-2", us(rt + n), us(n)));
    }
    SystemSpec::new(name).cpu_dma_latency(cfg.setup.cpu_dma_latency_spec()).module(module)
}

/// cyclictest's `-v` lines (`thread: loop: latency µs`) of thread 0, in order; other lines (a guest's console,
/// cyclictest's banner) are skipped.
pub fn parse_verbose(text: &str) -> Vec<(u64, f64)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.trim().split(':').map(str::trim);
            let (t, n, v) = (f.next()?.parse::<u32>().ok()?, f.next()?.parse::<u64>().ok()?, f.next()?.parse::<f64>().ok()?);
            (t == 0 && f.next().is_none()).then_some((n, v))
        })
        .collect()
}

/// The SCHED_FIFO priority cyclictest's thread ran at, from its closing `T: 0 (pid) P:NN …` line.
pub fn parse_priority(text: &str) -> Option<u8> {
    text.lines().filter(|l| l.trim_start().starts_with("T: 0 ")).find_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("P:")?.parse().ok()))
}

#[derive(Debug, Clone, Serialize)]
pub struct RtCell {
    pub profile: Profile,
    pub tp: u8,
    /// The priority cyclictest reported it ran at.
    pub priority: Option<u8>,
    pub stats: Option<BoxStats>,
    /// Statistics of each `slice` of the run, in order.
    pub slices: Vec<Option<BoxStats>>,
    /// Cumulative statistics after 1/8, 1/4, 1/2 and all of the run (the paper's 1, 2, 4, 8 h of 8 h).
    pub cumulative: Vec<Option<BoxStats>>,
    /// Where the raw latencies are, relative to the output folder.
    pub raw: String,
    pub wall_s: f64,
    /// Why the cell has no figures, when it failed (the run goes on with the next cell).
    pub error: Option<String>,
    /// Whether the cell was run a second time because its guest did not boot.
    pub retried: bool,
    /// What the host did to the machine during the cell's (last) run: steal time, CPU frequency.
    pub disturbance: Option<Disturbance>,
}

/// stress-ng's line when its workers start; a cell with load must show it once per stress-ng.
const LOAD_STARTED: &str = "dispatching hogs";

/// Whether every stress-ng of testing profile `tp` started and none reported an error, from the cell's logs.
pub fn load_check(tp: u8, logs: &str) -> Result<(), String> {
    let (_, beside, neighbours) = testing_profile(tp);
    let want = if beside { 1 } else if neighbours { 2 } else { 0 };
    let started = logs.matches(LOAD_STARTED).count();
    if let Some(l) = logs.lines().find(|l| l.contains("stress-ng: error") || l.contains("stress-ng: fail") || l.contains("unsuccessful run")) {
        return Err(format!("the load failed: {}", l.trim()));
    }
    if started < want {
        return Err(format!("the load did not start ({started} of {want} stress-ng said {LOAD_STARTED:?})"));
    }
    Ok(())
}

/// What the VM runner says when a guest did not start its command within the boot timeout.
const BOOT_TIMEOUT_LINE: &str = "no start marker within the boot timeout";

#[derive(Debug, Clone, Serialize)]
pub struct RtResults {
    pub machine: String,
    pub accel: String,
    pub accel_reason: String,
    pub setup: String,
    pub duration_s: f64,
    pub slice_s: f64,
    pub interval_us: u32,
    pub load: Load,
    pub cells: Vec<RtCell>,
    pub elapsed_s: f64,
}

impl RtResults {
    /// The cells that failed.
    pub fn failed(&self) -> Vec<&RtCell> {
        self.cells.iter().filter(|c| c.error.is_some()).collect()
    }
}

/// A child process of this command, ended when dropped: SIGTERM first (stress-ng then stops its workers, which
/// SIGKILL would orphan), SIGKILL after a second, then reaped. Only this pid is signalled. Should this command
/// itself be killed, the children get a signal from the kernel ([`partita_os::process::end_with_parent`]).
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let pid = self.0.id() as i32;
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = partita_os::process::send_signal(pid, libc::SIGTERM);
            let t = std::time::Instant::now();
            while matches!(self.0.try_wait(), Ok(None)) && t.elapsed() < Duration::from_secs(1) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Runs the native profile's cell: cyclictest and stress-ng as children of this process, both ended by pid
/// when the cell ends, fails or is interrupted (Ctrl-C, SIGTERM).
fn run_native(cfg: &RtConfig, tp: u8) -> Result<String, RunError> {
    let (affinity, beside, _) = testing_profile(tp);
    let secs = cfg.duration.as_secs().max(1) + 5;
    let fail = |m: String| RunError::Setup(m);
    let mut _load = if beside {
        let s = stress(&cfg.load, 1, affinity, secs, false);
        let mut c = Command::new(&s[0]);
        partita_os::process::end_with_parent(&mut c, libc::SIGTERM);
        Some(Child(c.args(&s[1..]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().map_err(|e| fail(format!("stress-ng: {e} (Debian package stress-ng; scripts/setup.sh installs it)")))?))
    } else {
        None
    };
    let ct = cyclictest(cfg, NATIVE_PRIORITY, affinity);
    let mut cyclic = Command::new(&ct[0]);
    partita_os::process::end_with_parent(&mut cyclic, libc::SIGKILL);
    let mut child = Child(
        cyclic.args(&ct[1..]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().map_err(|e| fail(format!("cyclictest: {e} (Debian package rt-tests; scripts/setup.sh installs it)")))?,
    );
    let mut stdout = child.0.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        text
    });
    let status = loop {
        if partita_os::signal::stop_requested() {
            drop(child);
            let _ = reader.join();
            return Err(RunError::Interrupted);
        }
        match child.0.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(fail(format!("waiting for cyclictest: {e}"))),
        }
    };
    let text = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(fail(format!("cyclictest failed ({status})")));
    }
    // The load runs 5 s longer than cyclictest: if it is gone, part of the cell ran without it.
    if let Some(l) = _load.as_mut() {
        if let Ok(Some(s)) = l.0.try_wait() {
            return Err(fail(format!("stress-ng ended before cyclictest ({s}): the cell did not run under its load")));
        }
        return Ok(format!("{text}\n{LOAD_STARTED} (native)\n"));
    }
    Ok(text)
}

/// Runs a partitioned cell as a system under the supervisor; returns the RT partition's log.
fn run_system(cfg: &RtConfig, profile: Profile, tp: u8) -> Result<String, RunError> {
    let name = format!("rt-{}-tp{tp}", profile.key());
    let system = system_spec(cfg, profile, tp, &name)
        .build(&partita_system::Host::this_machine(), &format!("<bench rt {name}>"))
        .map_err(|e| RunError::Supervisor { system: name.clone(), message: e.to_string() })?;
    let options = UpOptions { partita: Some(cfg.exe.clone().into()), ..UpOptions::new(&cfg.state_root) };
    let limit = cfg.duration + Duration::from_secs(if profile == Profile::Vm { 240 } else { 60 });
    let done = run_until_exit(&system, &options, "rt", limit);
    let state = cfg.state_root.join(&system.name);
    // The RT partition's log, then the neighbours' (where their load says it started).
    let log: String = ["rt.log", "neighbour-1.log", "neighbour-2.log"].iter().map(|f| std::fs::read_to_string(state.join(f)).unwrap_or_default()).collect::<Vec<_>>().join("\n");
    let _ = std::fs::remove_dir_all(&state);
    if done?.timed_out {
        return Err(RunError::Supervisor { system: name, message: format!("cyclictest was still running after {:.0} s", limit.as_secs_f64()) });
    }
    Ok(log)
}

fn slices(samples: &[(u64, f64)], interval_us: u32, slice: Duration, duration: Duration) -> (Vec<Option<BoxStats>>, Vec<Option<BoxStats>>) {
    let (slice_us, run_us) = (slice.as_micros().max(1) as u64, duration.as_micros() as u64);
    let n = run_us.div_ceil(slice_us).max(1) as usize;
    let mut parts: Vec<Vec<f64>> = vec![Vec::new(); n];
    for &(i, v) in samples {
        parts[((i * interval_us as u64 / slice_us) as usize).min(n - 1)].push(v);
    }
    // Cumulative parts by time (loop number), so that lost wake-ups do not shift them.
    let loops = run_us / interval_us as u64;
    let cumulative = [8, 4, 2, 1]
        .iter()
        .map(|d| BoxStats::of(&samples.iter().filter(|s| s.0 < loops / d || *d == 1).map(|s| s.1).collect::<Vec<_>>()))
        .collect();
    (parts.iter().map(|p| BoxStats::of(p)).collect(), cumulative)
}

/// Checks every partitioned cell's system file against this machine before anything runs: a load that does
/// not fit a partition, for one, is refused here with the validator's words.
pub fn check_systems(cfg: &RtConfig) -> Result<(), String> {
    for &p in cfg.profiles.iter().filter(|p| **p != Profile::Native) {
        for &tp in cfg.tps.iter().filter(|&&tp| p.runs(tp)) {
            let name = format!("rt-{}-tp{tp}", p.key());
            system_spec(cfg, p, tp, &name).build(&partita_system::Host::this_machine(), &format!("<bench rt {name}>")).map_err(|e| format!("{} TP{tp}: {e}", p.key()))?;
        }
    }
    Ok(())
}

/// A program's path: `name` looked up in `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(name)).find(|f| f.is_file()))
}

/// Writes the VM profile's archive of cyclictest and stress-ng with their libraries to `path`.
fn write_guest_tools(path: &Path) -> Result<(), RunError> {
    let mut programs = Vec::new();
    for (name, package) in [("cyclictest", "rt-tests"), ("stress-ng", "stress-ng")] {
        programs.push(which(name).ok_or_else(|| RunError::Setup(format!("{name} is not in PATH (Debian package {package}; scripts/setup.sh installs it)")))?);
    }
    let archive = partita_vm::launch::programs_archive(&programs).map_err(|e| RunError::Setup(e.to_string()))?;
    std::fs::write(path, archive).map_err(|e| RunError::File { path: path.into(), message: e.to_string() })
}

/// Runs every asked cell, profile by profile; `log` gets a line per cell.
pub fn run(cfg: &RtConfig, mut log: impl FnMut(&str)) -> Result<RtResults, RunError> {
    let t0 = std::time::Instant::now();
    let machine = partita_lab::machine::describe();
    let raw = cfg.out.join("raw");
    std::fs::create_dir_all(&raw).map_err(|e| RunError::File { path: raw.clone(), message: e.to_string() })?;
    let mut cfg = cfg.clone();
    if cfg.profiles.contains(&Profile::Vm) {
        let tools = std::fs::canonicalize(&raw).map_err(|e| RunError::File { path: raw.clone(), message: e.to_string() })?.join("guest-tools.cpio");
        write_guest_tools(&tools)?;
        cfg.guest_tools = Some(tools);
    }
    let cfg = &cfg;
    let _latency = cfg.setup.hold_cpu_latency().map_err(|e| RunError::Setup(e.to_string()))?;
    let mut cells = Vec::new();
    for &p in &cfg.profiles {
        for &tp in cfg.tps.iter().filter(|&&tp| p.runs(tp)) {
            log(&format!("{}, TP{tp}…", p.title()));
            let t = std::time::Instant::now();
            let mut watch = Watch::start();
            let mut outcome = match p {
                Profile::Native => run_native(cfg, tp),
                _ => run_system(cfg, p, tp),
            };
            // A TCG guest now and then hangs while booting (about one boot in a dozen here, with its
            // neighbours busy): such a cell is run once more, and says so.
            // Likewise a neighbour guest whose stress-ng had not started when a short cell ended (three TCG
            // guests booting on two CPUs: seen once in a suite run with 2 s cells).
            let again = match &outcome {
                Ok(t) if t.contains(BOOT_TIMEOUT_LINE) => Some("the guest did not boot within its boot timeout"),
                Ok(t) if p == Profile::Vm && load_check(tp, t).is_err_and(|e| e.contains("did not start")) => Some("a guest's load had not started when the cell ended"),
                _ => None,
            };
            let retried = again.is_some();
            if let Some(why) = again {
                log(&format!("  {why}: running the cell once more"));
                watch = Watch::start();
                outcome = run_system(cfg, p, tp);
            }
            let disturbance = Some(watch.stop());
            let file = format!("raw/{}-tp{tp}.txt", p.key());
            let failed = |error: String| RtCell { profile: p, tp, priority: None, stats: None, slices: Vec::new(), cumulative: Vec::new(), raw: file.clone(), wall_s: t.elapsed().as_secs_f64(), error: Some(error), retried, disturbance };
            let text = match outcome {
                Ok(text) => text,
                Err(RunError::Interrupted) => return Err(RunError::Interrupted),
                Err(e) => {
                    log(&format!("  failed: {e}"));
                    cells.push(failed(e.to_string()));
                    continue;
                }
            };
            if let Err(e) = load_check(tp, &text) {
                log(&format!("  failed: {e}"));
                cells.push(failed(e));
                continue;
            }
            let samples = parse_verbose(&text);
            let body: String = samples.iter().map(|(i, v)| format!("{i} {v}\n")).collect();
            std::fs::write(cfg.out.join(&file), body).map_err(|e| RunError::File { path: cfg.out.join(&file), message: e.to_string() })?;
            if samples.is_empty() {
                let tail: Vec<&str> = text.lines().rev().take(10).collect();
                let e = format!("cyclictest printed no latency; its output ends with:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
                log(&format!("  failed: {e}"));
                cells.push(failed(e));
                continue;
            }
            let stats = BoxStats::of(&samples.iter().map(|s| s.1).collect::<Vec<_>>());
            let (sl, cumulative) = slices(&samples, cfg.interval_us, cfg.slice, cfg.duration);
            if let Some(s) = &stats {
                log(&format!("  {} samples: median {:.0} µs, mean {:.1} µs, p99 {:.0} µs, max {:.0} µs", s.samples, s.median, s.mean, s.p99, s.max));
            }
            cells.push(RtCell { profile: p, tp, priority: parse_priority(&text), stats, slices: sl, cumulative, raw: file, wall_s: t.elapsed().as_secs_f64(), error: None, retried, disturbance });
        }
    }
    Ok(RtResults {
        machine,
        accel: cfg.accel.clone(),
        accel_reason: cfg.accel_reason.clone(),
        setup: cfg.setup.caption(),
        duration_s: cfg.duration.as_secs_f64(),
        slice_s: cfg.slice.as_secs_f64(),
        interval_us: cfg.interval_us,
        load: cfg.load,
        cells,
        elapsed_s: t0.elapsed().as_secs_f64(),
    })
}

/// Paper 004's Table 1: service, end-to-end latency and jitter, µs.
pub const SERVICES: [(&str, f64, f64); 8] = [
    ("Factory automation (motion control)", 1_000.0, 1.0),
    ("Factory automation", 10_000.0, 100.0),
    ("Process automation (remote control)", 50_000.0, 20.0),
    ("Process automation (monitoring)", 50_000.0, 20_000.0),
    ("Electricity distribution (medium voltage)", 25_000.0, 10_000.0),
    ("Electricity distribution (high voltage)", 5_000.0, 1_000.0),
    ("Intelligent transport systems (infrastructure backhaul)", 10_000.0, 2_000.0),
    ("Remote control", 5_000.0, 1_000.0),
];

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1e3)
}

fn stats_row(label: &str, s: &Option<BoxStats>) -> String {
    match s {
        Some(s) => format!(
            "| {label} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            ms(s.lower_whisker),
            ms(s.lower_quartile),
            ms(s.median),
            ms(s.mean),
            ms(s.sigma),
            ms(s.upper_quartile),
            ms(s.upper_whisker),
            ms(s.max_jitter),
            ms(s.p99),
            ms(s.max),
            s.samples
        ),
        None => format!("| {label} | – | – | – | – | – | – | – | – | – | – | 0 |\n"),
    }
}

const STATS_HEAD: &str = "| lower whisker | lower quartile | median | μ | σ | upper quartile | upper whisker | max jitter | p99 | max | samples |";

fn profile_title(r: &RtResults, p: Profile) -> String {
    if p == Profile::Vm {
        format!("{} ({})", p.title(), r.accel)
    } else {
        p.title().to_string()
    }
}

/// One service's verdict for one system profile over all its testing profiles, in words: strict (every TP's max
/// latency within the service's latency and its max − min within the jitter; the margin and the TP that sets
/// it, or the TPs that miss it and how the worst misses), then in brackets the paper's reading (every TP's mean
/// within the latency and its whisker-to-whisker max jitter within the jitter).
pub fn verdict(cells: &[(u8, BoxStats)], lat: f64, jit: f64) -> String {
    if cells.is_empty() {
        return "–".into();
    }
    let slack = |s: &BoxStats| (lat - s.max).min(jit - (s.max - s.min));
    let (tp, s) = cells.iter().min_by(|a, b| slack(&a.1).total_cmp(&slack(&b.1))).expect("not empty");
    let strict = if slack(s) >= 0.0 {
        format!("met, margin {} ms (TP{tp})", ms(slack(s)))
    } else {
        let missed: Vec<String> = cells.iter().filter(|(_, s)| slack(s) < 0.0).map(|(tp, _)| format!("TP{tp}")).collect();
        let mut over = Vec::new();
        if s.max > lat {
            over.push(format!("max {} ms", ms(s.max)));
        }
        if s.max - s.min > jit {
            over.push(format!("jitter {} ms", ms(s.max - s.min)));
        }
        format!("**not met** in {}: TP{tp} {}", missed.join(", "), over.join(", "))
    };
    let paper = if cells.iter().all(|(_, s)| s.mean <= lat && s.max_jitter <= jit) { "met" } else { "not met" };
    format!("{strict} ({paper})")
}

/// The Markdown report.
pub fn markdown(r: &RtResults, command: &str) -> String {
    let mut o = format!(
        "# Paper 004 on this machine: real-time latency in partitions\n\n`{command}`\n\n\
         - machine: {}\n- VM profile: **{}** ({})\n- setup: {} (this command holds /dev/cpu_dma_latency; cyclictest does not tune the system)\n\
         - cyclictest: one thread, {} µs period, memory locked, SCHED_FIFO {NATIVE_PRIORITY} native, {PARTITION_PRIORITY} in a process partition (granted by the system file: the top a partition may have, below the plan executors' 90), {GUEST_PRIORITY} inside the guest (the VM partition itself runs under normal scheduling)\n\
         - process-plan: the RT partition's {} µs window and two neighbours' {} µs each in a {} µs frame on CPU 1 (not a divisor of the period: the wake-ups fall at every phase of the frame)\n\
         - load: stress-ng, {} CPU workers (sqrt) and {} VM workers of {} MiB (the paper's stress: 10 + 10 on 6 cores; scaled to this machine's CPUs); TP5/TP6: half in each neighbour\n\
         - {:.0} s per cell ({}), slices of {:.1} s. Figures in ms, as the paper's tables.\n\n",
        r.machine,
        r.accel,
        r.accel_reason,
        r.setup,
        r.interval_us,
        PLAN_US.0,
        PLAN_US.1,
        PLAN_US.0 + 2 * PLAN_US.1,
        r.load.cpu_workers,
        r.load.vm_workers,
        r.load.vm_bytes_mib,
        r.duration_s,
        if r.duration_s < 3600.0 { "short: `--duration 8h` reproduces the paper's runs" } else { "the paper ran 8 h" },
        r.slice_s
    );
    o.push_str("## The paper's table: every system profile × testing profile (ms)\n\n");
    let _ = writeln!(o, "| system profile | TP | FIFO {} host |\n|---|---:|---:|{}---|", STATS_HEAD, "---:|".repeat(11));
    for p in Profile::ALL {
        for c in r.cells.iter().filter(|c| c.profile == p) {
            let row = stats_row(&format!("{} | {} | {}", profile_title(r, p), c.tp, c.priority.map_or("?".into(), |x| x.to_string())), &c.stats);
            let _ = writeln!(o, "{} {} |", row.trim_end(), c.disturbance.map_or("–".to_string(), |d| d.note()));
        }
    }
    let _ = writeln!(o, "\n{HOST_NOTE} Here per cell, from its system's start to its end.");
    for c in r.cells.iter().filter(|c| c.retried) {
        let _ = writeln!(o, "\n{} TP{} was run twice: the first time a guest did not boot, or start its load, in time.", profile_title(r, c.profile), c.tp);
    }
    for c in r.cells.iter().filter(|c| c.error.is_some()) {
        let _ = writeln!(o, "\n**{} TP{} failed**: {}", profile_title(r, c.profile), c.tp, c.error.as_deref().unwrap_or_default().lines().next().unwrap_or_default());
    }
    o.push_str("\n## Stability over time: each slice of the run (ms)\n\n");
    let _ = writeln!(o, "| system profile | TP | slice | {}\n|---|---:|---:|{}", STATS_HEAD.trim_start_matches("| "), "---:|".repeat(11));
    for c in &r.cells {
        for (k, s) in c.slices.iter().enumerate() {
            o.push_str(&stats_row(&format!("{} | {} | {}", profile_title(r, c.profile), c.tp, k + 1), s));
        }
    }
    o.push_str("\n## Cumulative, like the paper's Table 5 (after 1/8, 1/4, 1/2 and all of the run; ms)\n\n");
    let _ = writeln!(o, "| system profile | TP | part | {}\n|---|---:|---:|{}", STATS_HEAD.trim_start_matches("| "), "---:|".repeat(11));
    for c in &r.cells {
        for (k, s) in c.cumulative.iter().enumerate() {
            o.push_str(&stats_row(&format!("{} | {} | {}", profile_title(r, c.profile), c.tp, ["1/8", "1/4", "1/2", "all"][k]), s));
        }
    }
    o.push_str("\n## Verdict against paper 004's Table 1\n\n");
    o.push_str(
        "Each system profile over all its testing profiles. Met when in every one the **max** latency is within \
         the service's end-to-end latency and the jitter (max − min) within its jitter; the margin is the smallest \
         slack and names the TP that sets it; otherwise the TPs that miss and how the worst misses. In brackets, the \
         paper's own reading (every TP's mean latency and max jitter between the whiskers within the service's). \
         These are processing latencies only: the network's share of the end-to-end budget comes on top.\n\n",
    );
    let profiles: Vec<Profile> = Profile::ALL.into_iter().filter(|p| r.cells.iter().any(|c| c.profile == *p && c.stats.is_some())).collect();
    let _ = writeln!(
        o,
        "| service | latency | jitter | {} |\n|---|---:|---:|{}",
        profiles.iter().map(|p| profile_title(r, *p)).collect::<Vec<_>>().join(" | "),
        "---|".repeat(profiles.len())
    );
    for (name, lat, jit) in SERVICES {
        let cols: Vec<String> = profiles
            .iter()
            .map(|p| verdict(&r.cells.iter().filter(|c| c.profile == *p).filter_map(|c| Some((c.tp, c.stats?))).collect::<Vec<_>>(), lat, jit))
            .collect();
        let _ = writeln!(o, "| {name} | {} ms | {} ms | {} |", ms(lat), ms(jit), cols.join(" | "));
    }
    let _ = writeln!(o, "\nBox plots per system profile: `rt-<profile>.svg` and `.png`; raw latencies (loop number, µs) in `raw/`. Wall time: {:.0} s.", r.elapsed_s);
    o
}

/// Box plots of one system profile's testing profiles.
pub fn svg(r: &RtResults, p: Profile) -> String {
    let items: Vec<(String, BoxStats)> = r.cells.iter().filter(|c| c.profile == p).filter_map(|c| Some((format!("TP{}", c.tp), c.stats?))).collect();
    plot::boxes(&format!("cyclictest latency, {}", profile_title(r, p)), &items)
}

/// Writes rt.md, rt.json and the box plots; returns notes on PNGs that could not be made.
pub fn write_all(r: &RtResults, dir: &Path, command: &str) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let mut notes = Vec::new();
    for p in Profile::ALL.into_iter().filter(|p| r.cells.iter().any(|c| c.profile == *p)) {
        if let Err(e) = plot::write_svg_and_png(&dir.join(format!("rt-{}.svg", p.key())), &svg(r, p))? {
            notes.push(e);
        }
    }
    std::fs::write(dir.join("rt.md"), markdown(r, command))?;
    std::fs::write(dir.join("rt.json"), serde_json::to_string_pretty(r).map_err(std::io::Error::other)?)?;
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> RtConfig {
        RtConfig {
            exe: "partita".into(),
            out: "/tmp/x".into(),
            state_root: "/tmp/s".into(),
            profiles: Profile::ALL.to_vec(),
            tps: (1..=6).collect(),
            duration: Duration::from_secs(20),
            slice: Duration::from_secs(5),
            interval_us: 10_000,
            load: Load { cpu_workers: 4, vm_workers: 4, vm_bytes_mib: 64 },
            accel: "tcg".into(),
            accel_reason: "asked".into(),
            setup: Setup::default(),
            guest_tools: Some("/tmp/tools.cpio".into()),
        }
    }

    #[test]
    fn every_cells_system_is_valid_and_is_the_testing_profile_of_table_2() {
        let host = partita_system::Host { cpus: vec![0, 1], path: None };
        for p in [Profile::Process, Profile::ProcessPlan, Profile::Vm] {
            for tp in 1..=6 {
                let spec = system_spec(&cfg(), p, tp, &format!("rt-{}-tp{tp}", p.key()));
                let text = spec.to_toml();
                let sys = spec.build(&host, "rt").unwrap_or_else(|e| panic!("{} TP{tp}: {e}\n{text}", p.key()));
                let (affinity, beside, neighbours) = testing_profile(tp);
                let names: Vec<String> = sys.partitions().map(|(_, x)| x.name.clone()).collect();
                assert_eq!(names.len(), if neighbours || p == Profile::ProcessPlan { 3 } else { 1 }, "{} TP{tp}: {names:?}", p.key());
                // An argument pair, in the command's array or in the shell line that starts the load beside it.
                let has = |a: &str, b: &str| text.contains(&format!("\"{a}\", \"{b}\"")) || text.contains(&format!("'{a}' '{b}'"));
                assert_eq!(has("-a", "1"), affinity, "{} TP{tp}", p.key());
                // Under the plan the load cannot leave the plan's CPU: it is not pinned there.
                assert_eq!(has("--taskset", "0"), affinity && beside && p != Profile::ProcessPlan, "{} TP{tp}", p.key());
                assert_eq!(has("--sched", "other"), beside || neighbours, "the load runs under normal scheduling: {} TP{tp}", p.key());
                let commands: String = text.lines().filter(|l| !l.starts_with("binds = ")).collect::<Vec<_>>().join("\n");
                assert_eq!(commands.matches("stress-ng").count(), if beside { 1 } else if neighbours { 2 } else { 0 }, "{} TP{tp}", p.key());
                // A shell line's programs are bound (a partition sees only its program and its binds).
                if beside && p != Profile::Vm {
                    assert!(text.contains("binds = [\"cyclictest\", \"stress-ng\"]"), "{} TP{tp}:\n{text}", p.key());
                }
                assert_eq!(text.contains("[[module.plan]]"), p == Profile::ProcessPlan, "{} TP{tp}", p.key());
                assert_eq!(text.matches("kind = \"vm\"").count(), if p == Profile::Vm { names.len() } else { 0 }, "{} TP{tp}", p.key());
                let prio = if p == Profile::Vm { GUEST_PRIORITY } else { PARTITION_PRIORITY };
                assert!(has("-p", &prio.to_string()), "{} TP{tp}", p.key());
                // Loaded neighbour guests get a head start before the RT guest measures.
                assert_eq!(text.contains(&format!("sleep {VM_NEIGHBOURS_HEAD_START_S}; exec ")), p == Profile::Vm && neighbours, "{} TP{tp}", p.key());
            }
        }
        assert!(!Profile::Native.runs(5) && Profile::Native.runs(4) && Profile::Vm.runs(6));
    }

    #[test]
    fn cyclictests_verbose_lines_are_read_and_the_rest_skipped() {
        let text = "Thread 0 Interval: 10000\n       0:       0:      15\n[    1.2] virtio_net ok\n       0:       1:      23\nT: 0 (1) P:99 I:10000 C: 2 Min: 15\n       1:       0:       9\n";
        assert_eq!(parse_verbose(text), vec![(0, 15.0), (1, 23.0)]);
        assert_eq!(parse_priority(text), Some(99));
        assert_eq!(parse_priority("0: 0: 15\n"), None);
    }

    #[test]
    fn a_service_is_met_only_when_every_testing_profile_meets_it() {
        let st = |v: &[f64]| BoxStats::of(v).unwrap();
        let good = st(&[100.0, 120.0, 150.0]);
        let jittery = st(&[100.0, 900.0, 4000.0]);
        assert_eq!(verdict(&[(1, good), (2, good)], 5_000.0, 1_000.0), "met, margin 0.950 ms (TP1) (met)");
        // TP2's max is within the latency, but its jitter is not: the service is not met, although TP2 is not the
        // cell with the highest mean.
        let v = verdict(&[(1, good), (2, jittery)], 5_000.0, 1_000.0);
        assert!(v.starts_with("**not met** in TP2: TP2 jitter 3.900 ms"), "{v}");
        assert!(v.ends_with("(not met)"), "{v}");
        assert_eq!(verdict(&[], 1.0, 1.0), "–");
    }

    #[test]
    fn a_cell_with_load_must_show_every_stress_ng_starting() {
        let hogs = "stress-ng: info:  [12] dispatching hogs: 4 cpu, 4 vm\n";
        assert!(load_check(1, "").is_ok());
        assert!(load_check(3, hogs).is_ok());
        assert!(load_check(3, "").unwrap_err().contains("did not start"));
        assert!(load_check(5, hogs).unwrap_err().contains("1 of 2"));
        assert!(load_check(6, &format!("{hogs}{hogs}")).is_ok());
        let failed = format!("{hogs}stress-ng: fail:  [13] cannot set CPU affinity\n");
        assert!(load_check(4, &failed).unwrap_err().contains("cannot set CPU affinity"));
    }

    #[test]
    fn slices_and_cumulative_parts_cover_the_run() {
        let samples: Vec<(u64, f64)> = (0..2000).map(|i| (i, if i < 1000 { 10.0 } else { 30.0 })).collect();
        let (sl, cum) = slices(&samples, 10_000, Duration::from_secs(5), Duration::from_secs(20));
        assert_eq!(sl.len(), 4);
        assert_eq!(sl.iter().map(|s| s.unwrap().samples).sum::<usize>(), 2000);
        assert_eq!((sl[0].unwrap().median, sl[3].unwrap().median), (10.0, 30.0));
        assert_eq!(cum.iter().map(|s| s.unwrap().samples).collect::<Vec<_>>(), vec![250, 500, 1000, 2000]);
    }
}
