//! `partita bench virt`: paper 003 on this machine. What the middleware and what partitioning or
//! virtualization cost a DDS client-server exchange, against raw UDP, for server work from 0 to 100 µs.
//!
//! Every row is a system under the supervisor, generated here and validated like a user's file. The client
//! (`partita app exchange-client`) is a native node on CPU `client_cpu`; the server
//! (`partita app exchange-server`) runs on CPU `cpu`:
//!
//! | row | server |
//! |---|---|
//! | ideal | a native node answering raw UDP (the paper's ICMP "ideal" middleware: no serialization, no topics) |
//! | native | a native node answering DDS |
//! | process | the I/O partition of a module without a plan: alone on its CPU |
//! | process-plan | the same partition with a 700 µs window of a 1500 µs frame, a CPU-bound neighbour in the other 800 µs (paper 001's plan) |
//! | vm | the I/O partition as a VM partition, alone on its CPU |
//! | vm-plan | the VM partition in the plan with the neighbour |
//!
//! The client measures every (size, work) point in one run of the system, sizes outer and works inner, each
//! point `warmup` + `count` requests in closed loop. The server's work is a calibrated busy loop whose CPU time
//! it measures and returns: the report shows the work done beside the work asked for.
use partita_lab::plot::{self, Line};
use partita_apps::exchange::SweepReport;
use partita_apps::summary::Summary;
use partita_lab::repeat::{interleaved, Spread};
use partita_lab::setup::{Setup, LOCK_MEMORY_FLAG};
use partita_lab::machine::{Disturbance, HOST_NOTE};
use partita_lab::run::{run_until_exits, Finished, RunError};
use partita_supervisor::executor::ExecutorLog;
use partita_supervisor::UpOptions;
use partita_system::spec::{ModuleSpec, NetworkSpec, NodeSpec, PartitionSpec, PlanSpec, SystemSpec, VmSpec};
use partita_system::ByteSize;
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    Ideal,
    Native,
    Process,
    ProcessPlan,
    Vm,
    VmPlan,
}

impl Placement {
    pub const ALL: [Placement; 6] = [Placement::Ideal, Placement::Native, Placement::Process, Placement::ProcessPlan, Placement::Vm, Placement::VmPlan];

    pub fn key(self) -> &'static str {
        match self {
            Placement::Ideal => "ideal",
            Placement::Native => "native",
            Placement::Process => "process",
            Placement::ProcessPlan => "process-plan",
            Placement::Vm => "vm",
            Placement::VmPlan => "vm-plan",
        }
    }

    pub fn from_key(k: &str) -> Option<Placement> {
        Placement::ALL.into_iter().find(|p| p.key() == k)
    }

    pub fn title(self) -> &'static str {
        match self {
            Placement::Ideal => "ideal: raw UDP, server native",
            Placement::Native => "DDS, server native",
            Placement::Process => "DDS, server in a process partition, alone",
            Placement::ProcessPlan => "DDS, server in a process partition, in a plan",
            Placement::Vm => "DDS, server in a VM partition, alone",
            Placement::VmPlan => "DDS, server in a VM partition, in a plan",
        }
    }

    pub fn is_vm(self) -> bool {
        matches!(self, Placement::Vm | Placement::VmPlan)
    }

    fn planned(self) -> bool {
        matches!(self, Placement::ProcessPlan | Placement::VmPlan)
    }
}

#[derive(Debug, Clone)]
pub struct VirtConfig {
    pub exe: String,
    pub out: PathBuf,
    pub state_root: PathBuf,
    pub placements: Vec<Placement>,
    pub sizes: Vec<usize>,
    pub works_us: Vec<f64>,
    pub count: u64,
    pub warmup: u64,
    pub repeat: u32,
    /// The server's CPU (and the plan's).
    pub cpu: usize,
    /// The client's CPU.
    pub client_cpu: usize,
    /// `kvm` or `tcg`, decided before the run.
    pub accel: String,
    pub accel_reason: String,
    pub setup: Setup,
}

/// The ideal row's server node's address (the system pins the inter-module subnet), and the port its server
/// listens on.
const UDP_ADDRESS: std::net::Ipv4Addr = std::net::Ipv4Addr::new(198, 18, 0, 10);
const UDP_PORT: u16 = 9600;
/// The plan of the planned rows: the server's window, then the neighbour's, in one frame.
pub const PLAN_US: (u64, u64) = (700, 800);
/// The deadlines of paper 003, µs.
pub const DEADLINES_US: [f64; 2] = [10_000.0, 100_000.0];

/// The row's system.
pub fn system_spec(cfg: &VirtConfig, p: Placement, name: &str, json: &Path) -> SystemSpec {
    let sched = cfg.setup.scheduling_spec();
    let native = |mut c: Vec<String>| {
        if cfg.setup.locks_memory() {
            c.push(LOCK_MEMORY_FLAG.into());
        }
        c
    };
    let join = |v: &[f64]| v.iter().map(|w| w.to_string()).collect::<Vec<_>>().join(",");
    let mut client: Vec<String> = ["partita", "app", "exchange-client"].map(String::from).to_vec();
    client.extend([
        "--sizes".into(),
        cfg.sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(","),
        "--works".into(),
        join(&cfg.works_us),
        "--count".into(),
        cfg.count.to_string(),
        "--warmup".into(),
        cfg.warmup.to_string(),
        "--json".into(),
        json.display().to_string(),
    ]);
    let mut server: Vec<String> = ["partita", "app", "exchange-server"].map(String::from).to_vec();
    if p == Placement::Ideal {
        let at = std::net::SocketAddr::new(UDP_ADDRESS.into(), UDP_PORT).to_string();
        client.extend(["--udp".into(), at.clone()]);
        server.extend(["--udp".into(), at]);
    }
    let t = SystemSpec::new(name).cpu_dma_latency(cfg.setup.cpu_dma_latency_spec()).network(NetworkSpec::new().domain(0).subnet("198.18.0.0/24".parse().expect("a subnet")));
    let t = match p {
        Placement::Ideal | Placement::Native => {
            let mut node = NodeSpec::new("server", native(server)).scheduling(sched.clone()).cpus([cfg.cpu]).memory(ByteSize::mib(256)).pids(128);
            if p == Placement::Ideal {
                node = node.address(UDP_ADDRESS);
            }
            t.node(node)
        }
        _ => {
            let mut server = PartitionSpec::new("server", server).io(true).pids(128);
            server = if p.is_vm() {
                server.vm(VmSpec::new().memory(ByteSize::mib(256)).accel(cfg.accel.parse().expect("a checked acceleration")).boot_timeout(partita_system::Duration::from_millis(120_000)))
            } else {
                server.scheduling(sched.clone()).memory(ByteSize::mib(256))
            };
            let mut module = ModuleSpec::new("server-module").cpus([cfg.cpu]).domain(1).partition(server);
            if p.planned() {
                let us = partita_system::Duration::from_micros;
                module = module
                    .partition(PartitionSpec::new("neighbour", ["sh", "-c", "while :; do :; done"]).memory(ByteSize::mib(16)).pids(8))
                    .plan(PlanSpec::new(cfg.cpu, us(PLAN_US.0 + PLAN_US.1)).window("server", us(0), us(PLAN_US.0)).window("neighbour", us(PLAN_US.0), us(PLAN_US.1)));
            }
            t.module(module)
        }
    };
    t.node(NodeSpec::new("client", native(client)).scheduling(sched).cpus([cfg.client_cpu]))
}

/// One point of one run.
#[derive(Debug, Clone, Serialize)]
pub struct PointRun {
    pub repeat: u32,
    pub summary: Summary,
    pub timeouts: u64,
    pub server_cpu_mean_us: f64,
    /// Requests over each of [`DEADLINES_US`].
    pub missed: [u64; 2],
}

#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub placement: Placement,
    pub size: usize,
    pub work_us: f64,
    pub runs: Vec<PointRun>,
}

impl Cell {
    /// The median over the runs of `f`.
    pub fn median(&self, f: impl Fn(&PointRun) -> f64) -> Option<f64> {
        Spread::of(&self.runs.iter().map(f).collect::<Vec<_>>()).map(|s| s.median)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RowRun {
    pub placement: Placement,
    pub repeat: u32,
    pub connect_s: f64,
    pub lateness_p99_us: Option<f64>,
    /// What the host did to the machine during the run (steal time, CPU frequency).
    pub disturbance: Disturbance,
}

#[derive(Debug, Clone, Serialize)]
pub struct VirtResults {
    pub machine: String,
    pub accel: String,
    pub accel_reason: String,
    pub setup: String,
    pub sizes: Vec<usize>,
    pub works_us: Vec<f64>,
    pub count: u64,
    pub warmup: u64,
    pub repeat: u32,
    pub cpu: usize,
    pub client_cpu: usize,
    pub cells: Vec<Cell>,
    pub runs: Vec<RowRun>,
    pub elapsed_s: f64,
}

impl VirtResults {
    pub fn cell(&self, p: Placement, size: usize, work: f64) -> Option<&Cell> {
        self.cells.iter().find(|c| c.placement == p && c.size == size && c.work_us == work)
    }

    pub fn placements(&self) -> Vec<Placement> {
        Placement::ALL.into_iter().filter(|p| self.cells.iter().any(|c| c.placement == *p)).collect()
    }
}

fn lateness_p99(logs: &[ExecutorLog]) -> Option<f64> {
    let v: Vec<f64> = logs.iter().flat_map(|l| l.starts.iter().map(|s| s.lateness_ns() as f64 / 1e3)).collect();
    partita_lab::boxstats::BoxStats::of(&v).map(|s| s.p99)
}

fn run_one(cfg: &VirtConfig, p: Placement, k: u32) -> Result<Finished<SweepReport>, RunError> {
    let raw = cfg.out.join("raw");
    std::fs::create_dir_all(&raw).map_err(|e| RunError::File { path: raw.clone(), message: e.to_string() })?;
    let tag = format!("{}-r{k}", p.key());
    let json = raw.join(format!("{tag}.json"));
    let name = format!("virt-{tag}");
    let system = system_spec(cfg, p, &name, &json)
        .build(&partita_system::Host::this_machine(), &format!("<bench virt {tag}>"))
        .map_err(|e| RunError::Supervisor { system: name.clone(), message: e.to_string() })?;
    let options = UpOptions { partita: Some(cfg.exe.clone().into()), ..UpOptions::new(&cfg.state_root) };
    // Boot and discovery, then every request at up to 25 ms (a VM in a plan under TCG) plus three times its work
    // (a planned server runs about half the time).
    let requests = cfg.count + cfg.warmup;
    let per_size: f64 = cfg.works_us.iter().map(|w| requests as f64 * (25_000.0 + 3.0 * w)).sum();
    let limit = Duration::from_secs(240) + Duration::from_secs_f64(per_size * cfg.sizes.len() as f64 / 1e6);
    let done = run_until_exits::<SweepReport>(&system, &options, "client", &json, limit);
    let state = cfg.state_root.join(&system.name);
    if p.is_vm() {
        let _ = std::fs::copy(state.join("server.log"), raw.join(format!("{tag}.server.log")));
    }
    let _ = std::fs::remove_dir_all(&state);
    done
}

/// Runs every placement `repeat` times, interleaved; `log` gets a line per run and per point.
pub fn run(cfg: &VirtConfig, mut log: impl FnMut(&str)) -> Result<VirtResults, RunError> {
    let t0 = std::time::Instant::now();
    let machine = partita_lab::machine::describe();
    let _latency = cfg.setup.hold_cpu_latency().map_err(|e| RunError::Setup(e.to_string()))?;
    let mut cells: Vec<Cell> = Vec::new();
    for &p in &cfg.placements {
        for &size in &cfg.sizes {
            for &work_us in &cfg.works_us {
                cells.push(Cell { placement: p, size, work_us, runs: Vec::new() });
            }
        }
    }
    let mut runs = Vec::new();
    for (k, i) in interleaved(cfg.placements.len(), cfg.repeat) {
        let p = cfg.placements[i];
        log(&format!("{}, run {k} of {}…", p.title(), cfg.repeat));
        let Finished { report, executors, disturbance } = run_one(cfg, p, k)?;
        runs.push(RowRun { placement: p, repeat: k, connect_s: report.connect_s, lateness_p99_us: lateness_p99(&executors), disturbance });
        for pt in &report.points {
            let missed = DEADLINES_US.map(|d| pt.report.samples_ns.iter().filter(|&&ns| ns as f64 / 1e3 > d).count() as u64 + pt.report.timeouts);
            if let Some(c) = cells.iter_mut().find(|c| c.placement == p && c.size == pt.size && c.work_us == pt.work_us) {
                c.runs.push(PointRun { repeat: k, summary: pt.report.summary, timeouts: pt.report.timeouts, server_cpu_mean_us: pt.server_cpu_mean_us, missed });
            }
            log(&format!(
                "  {} B, work {} µs: mean {:.1} µs, p99 {:.1} µs, {} timed out, server work {:.1} µs",
                pt.size, pt.work_us, pt.report.summary.mean_us, pt.report.summary.p99_us, pt.report.timeouts, pt.server_cpu_mean_us
            ));
        }
    }
    Ok(VirtResults {
        machine,
        accel: cfg.accel.clone(),
        accel_reason: cfg.accel_reason.clone(),
        setup: cfg.setup.caption(),
        sizes: cfg.sizes.clone(),
        works_us: cfg.works_us.clone(),
        count: cfg.count,
        warmup: cfg.warmup,
        repeat: cfg.repeat,
        cpu: cfg.cpu,
        client_cpu: cfg.client_cpu,
        cells,
        runs,
        elapsed_s: t0.elapsed().as_secs_f64(),
    })
}

fn f1(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.1}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| if x.abs() < 0.01 { format!("{x:.3} %") } else { format!("{x:.2} %") })
}

fn title(r: &VirtResults, p: Placement) -> String {
    if p.is_vm() {
        format!("{} ({})", p.title(), r.accel)
    } else {
        p.title().to_string()
    }
}

/// The Markdown report.
pub fn markdown(r: &VirtResults, command: &str) -> String {
    let mut o = format!(
        "# Paper 003 on this machine: middleware and partitioning in a client-server exchange\n\n`{command}`\n\n\
         - machine: {}\n- VM rows: **{}** ({})\n- setup: {}\n- client on CPU {}, server on CPU {}; plan rows: the server's {} µs window and a CPU-bound neighbour's {} µs in a {} µs frame\n\
         - {} requests after {} warm-up per point, closed loop, {} run(s) per row interleaved; each figure is the median over the runs\n\n",
        r.machine,
        r.accel,
        r.accel_reason,
        r.setup,
        r.client_cpu,
        r.cpu,
        PLAN_US.0,
        PLAN_US.1,
        PLAN_US.0 + PLAN_US.1,
        r.count,
        r.warmup,
        r.repeat
    );
    let places = r.placements();
    for &size in &r.sizes {
        let _ = writeln!(o, "## Response time, {size} B each way: mean / p99 µs (server work done, µs)\n");
        let _ = writeln!(o, "| server work µs | {} |", places.iter().map(|p| title(r, *p)).collect::<Vec<_>>().join(" | "));
        let _ = writeln!(o, "|---:|{}", "---:|".repeat(places.len()));
        for &w in &r.works_us {
            let cells: Vec<String> = places
                .iter()
                .map(|&p| match r.cell(p, size, w) {
                    Some(c) => format!("{} / {} ({})", f1(c.median(|x| x.summary.mean_us)), f1(c.median(|x| x.summary.p99_us)), f1(c.median(|x| x.server_cpu_mean_us))),
                    None => "–".into(),
                })
                .collect();
            let _ = writeln!(o, "| {w} | {} |", cells.join(" | "));
        }
        o.push('\n');
    }
    o.push_str("## Overhead split (means, µs): middleware = DDS native − ideal; each placement − DDS native\n\n");
    let others: Vec<Placement> = places.iter().copied().filter(|p| !matches!(p, Placement::Ideal | Placement::Native)).collect();
    let _ = writeln!(o, "| size B | work µs | middleware (share of native DDS) | {} |", others.iter().map(|p| title(r, *p)).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(o, "|---:|---:|---:|{}", "---:|".repeat(others.len()));
    for &size in &r.sizes {
        for &w in &r.works_us {
            let mean = |p| r.cell(p, size, w).and_then(|c| c.median(|x| x.summary.mean_us));
            let native = mean(Placement::Native);
            let mw = match (native, mean(Placement::Ideal)) {
                (Some(n), Some(i)) => format!("{:.1} ({:.0} %)", n - i, (n - i) / n * 100.0),
                _ => "–".into(),
            };
            let cols: Vec<String> = others
                .iter()
                .map(|&p| match (mean(p), native) {
                    (Some(m), Some(n)) => format!("{:+.1} ({:+.0} %)", m - n, (m - n) / n * 100.0),
                    _ => "–".into(),
                })
                .collect();
            let _ = writeln!(o, "| {size} | {w} | {mw} | {} |", cols.join(" | "));
        }
    }
    for (d, deadline) in DEADLINES_US.iter().enumerate() {
        let _ = writeln!(o, "\n## Share of a {} ms deadline: mean / p99 (requests that missed it)\n", deadline / 1e3);
        let _ = writeln!(o, "| row | size B | {} |", r.works_us.iter().map(|w| format!("work {w} µs")).collect::<Vec<_>>().join(" | "));
        let _ = writeln!(o, "|---|---:|{}", "---:|".repeat(r.works_us.len()));
        for &p in &places {
            for &size in &r.sizes {
                let cols: Vec<String> = r
                    .works_us
                    .iter()
                    .map(|&w| match r.cell(p, size, w) {
                        Some(c) => format!(
                            "{} / {} ({})",
                            pct(c.median(|x| x.summary.mean_us / deadline * 100.0)),
                            pct(c.median(|x| x.summary.p99_us / deadline * 100.0)),
                            c.runs.iter().map(|x| x.missed[d]).sum::<u64>()
                        ),
                        None => "–".into(),
                    })
                    .collect();
                let _ = writeln!(o, "| {} | {size} | {} |", title(r, p), cols.join(" | "));
            }
        }
    }
    o.push_str("\n## Paper 003 beside this run\n\n");
    o.push_str(&paper_comparison(r));
    let _ = writeln!(o, "\n## Runs\n\n| row | run | connect s | window lateness p99 µs | host |\n|---|---:|---:|---:|---|");
    for x in &r.runs {
        let _ = writeln!(o, "| {} | {} | {:.2} | {} | {} |", title(r, x.placement), x.repeat, x.connect_s, f1(x.lateness_p99_us), x.disturbance.note());
    }
    let _ = writeln!(o, "\n{HOST_NOTE} Here per run, from its system's start to its end; the figures above are medians over the runs.");
    let _ = writeln!(o, "\nWall time: {:.0} s. Raw client reports (every response time) in `raw/`; `virt.json` holds every figure; `virt-<size>.svg`/`.png` plot the mean response time against the server's work.", r.elapsed_s);
    o
}

/// Paper 003's published figures and ours, in words and numbers.
fn paper_comparison(r: &VirtResults) -> String {
    let mut o = String::from(
        "| paper 003 (VirtualBox 4.2, OpenSplice 5.5 / RTI 5.0, two machines on 100 Mbit/s Ethernet) | this run |\n|---|---|\n",
    );
    let mean = |p, size, w| r.cell(p, size, w).and_then(|c| c.median(|x| x.summary.mean_us));
    let ratio_range = |p: Placement| -> Option<(f64, f64)> {
        let v: Vec<f64> = r.sizes.iter().flat_map(|&s| r.works_us.iter().map(move |&w| (s, w))).filter_map(|(s, w)| Some((mean(p, s, w)? - mean(Placement::Native, s, w)?) / mean(Placement::Native, s, w)? * 100.0)).collect();
        (!v.is_empty()).then(|| (v.iter().cloned().fold(f64::MAX, f64::min), v.iter().cloned().fold(f64::MIN, f64::max)))
    };
    // The largest share of deadline `d` over a row's points, of the mean and of the p99.
    let share_max = |p: Placement, d: f64, f: fn(&PointRun) -> f64| -> Option<f64> {
        r.cells.iter().filter(|c| c.placement == p).filter_map(|c| c.median(f)).fold(None, |a: Option<f64>, m| Some(a.map_or(m, |a| a.max(m)))).map(|m| m / d * 100.0)
    };
    let mw: Vec<f64> = r.sizes.iter().flat_map(|&s| r.works_us.iter().map(move |&w| (s, w))).filter_map(|(s, w)| Some((mean(Placement::Native, s, w)? - mean(Placement::Ideal, s, w)?) / mean(Placement::Native, s, w)? * 100.0)).collect();
    let _ = writeln!(
        o,
        "| virtualization adds 120–300 % to the response time | {} |",
        [Placement::Process, Placement::ProcessPlan, Placement::Vm, Placement::VmPlan]
            .iter()
            .filter_map(|&p| ratio_range(p).map(|(a, b)| format!("{}: {a:+.0} … {b:+.0} %", title(r, p))))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let _ = writeln!(
        o,
        "| up to 50 % of a 10 ms deadline (virtualized), under 5 % of 100 ms | {} |",
        r.placements()
            .iter()
            .filter_map(|&p| {
                let (mean, p99) = (|x: &PointRun| x.summary.mean_us, |x: &PointRun| x.summary.p99_us);
                Some(format!(
                    "{}: mean up to {:.2} % of 10 ms and {:.3} % of 100 ms, p99 up to {:.2} % and {:.3} %",
                    title(r, p),
                    share_max(p, 1e4, mean)?,
                    share_max(p, 1e5, mean)?,
                    share_max(p, 1e4, p99)?,
                    share_max(p, 1e5, p99)?
                ))
            })
            .collect::<Vec<_>>()
            .join("; ")
    );
    let _ = writeln!(
        o,
        "| middleware abstraction ≈ 30 % of the total time | {} |",
        if mw.is_empty() { "–".to_string() } else { format!("DDS − raw UDP is {:.0} … {:.0} % of the native DDS response time", mw.iter().cloned().fold(f64::MAX, f64::min), mw.iter().cloned().fold(f64::MIN, f64::max)) }
    );
    let _ = writeln!(o, "| non-virtualized 800 µs to a few ms with 512 B | {} |", r.sizes.iter().filter_map(|&s| Some(format!("native DDS {s} B: {:.0}–{:.0} µs", mean(Placement::Native, s, r.works_us[0])?, mean(Placement::Native, s, *r.works_us.last()?)?))).collect::<Vec<_>>().join("; "));
    o
}

/// The mean response time against the server's work, one line per row, one figure per size.
pub fn svg(r: &VirtResults, size: usize) -> String {
    let lines: Vec<Line> = r
        .placements()
        .into_iter()
        .map(|p| Line {
            name: title(r, p),
            points: r.works_us.iter().filter_map(|&w| Some((w, r.cell(p, size, w)?.median(|x| x.summary.mean_us)?))).collect(),
            dashed: p == Placement::Ideal,
        })
        .collect();
    plot::lines(&format!("Mean response time, {size} B each way (VM rows under {})", r.accel), "server work, µs", &lines)
}

/// Writes virt.md, virt.json and the figures; returns notes on PNGs that could not be made.
pub fn write_all(r: &VirtResults, dir: &Path, command: &str) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let mut notes = Vec::new();
    for &s in &r.sizes {
        if let Err(e) = plot::write_svg_and_png(&dir.join(format!("virt-{s}.svg")), &svg(r, s))? {
            notes.push(e);
        }
    }
    std::fs::write(dir.join("virt.md"), markdown(r, command))?;
    std::fs::write(dir.join("virt.json"), serde_json::to_string_pretty(r).map_err(std::io::Error::other)?)?;
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> VirtConfig {
        VirtConfig {
            exe: "partita".into(),
            out: "/tmp/x".into(),
            state_root: "/tmp/s".into(),
            placements: Placement::ALL.to_vec(),
            sizes: vec![64, 512],
            works_us: vec![0.0, 25.0],
            count: 10,
            warmup: 2,
            repeat: 1,
            cpu: 1,
            client_cpu: 0,
            accel: "tcg".into(),
            accel_reason: "asked".into(),
            setup: Setup::default(),
        }
    }

    #[test]
    fn every_rows_system_is_valid_and_places_the_server_as_the_row_says() {
        let host = partita_system::Host { cpus: vec![0, 1], path: None };
        for p in Placement::ALL {
            let spec = system_spec(&cfg(), p, &format!("virt-{}", p.key()), Path::new("/tmp/c.json"));
            let text = spec.to_toml();
            let sys = spec.build(&host, p.key()).unwrap_or_else(|e| panic!("{}: {e}\n{text}", p.key()));
            let server = sys.partitions().find(|(_, x)| x.name == "server");
            match p {
                Placement::Ideal | Placement::Native => assert!(server.is_none() && sys.node("server").is_some(), "{}", p.key()),
                _ => assert!(server.is_some(), "{}", p.key()),
            }
            assert_eq!(text.contains("kind = \"vm\""), p.is_vm(), "{}", p.key());
            assert_eq!(text.contains("[[module.plan]]"), p.planned(), "{}", p.key());
            assert_eq!(text.contains("--udp"), p == Placement::Ideal, "{}", p.key());
        }
    }

    #[test]
    fn placements_are_named_by_their_keys() {
        for p in Placement::ALL {
            assert_eq!(Placement::from_key(p.key()), Some(p));
        }
        assert_eq!(Placement::from_key("docker"), None);
    }
}
