//! `partita app …`: the applications that run inside partitions (recorder, monitor, udp-echo, exchange-server,
//! exchange-client and vm: crates/programs, the same code as their small binaries), and the lab's own: probe,
//! the hidden fault programs of `bench isolation` and the DBE agents.
use clap::{Args, Subcommand};
use partita_programs::{exchange, fail, monitor, partition, port, recorder, status_node, udp_echo, vm_runner};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct AppArgs {
    #[command(subcommand)]
    app: App,
}

#[derive(Subcommand)]
enum App {
    /// The Video_Recorder partition: synthetic cameras recorded into an on-disk ring, frames served over DDS.
    Recorder(recorder::RecorderArgs),
    /// A monitoring node: requests frames, measures response times, saves the latest frame.
    Monitor(monitor::MonitorArgs),
    /// A partition's ARINC 653 ports from the shell: list, write and read (sampling), send and receive (queuing).
    Port(port::PortArgs),
    /// The partition's control page from the shell: status, and requests to the supervisor (mode, error, plan);
    /// exit code 0 done, 3 refused, 4 invalid or no such plan.
    Partition(partition::PartitionArgs),
    /// A native node that publishes its system's state on the DDS topic `partita/status` and collects the routing
    /// partitions' statistics for it (docs/observability.md).
    StatusNode(status_node::StatusNodeArgs),
    /// The raw-UDP answerer of `monitor --udp` (the NETWORK baseline).
    UdpEcho(udp_echo::UdpEchoArgs),
    /// Paper 003's server: answers exchange requests after busy work of the length each asks for (DDS on the
    /// partition's network, or raw UDP with --udp), until SIGINT/SIGTERM.
    ExchangeServer(exchange::ExchangeServerArgs),
    /// Paper 003's client: measures the exchange at every size × server work, writes one JSON report.
    ExchangeClient(exchange::ExchangeClientArgs),
    /// Spins and records when it actually ran (CLOCK_MONOTONIC intervals, one `start end` line in ns each):
    /// a gap longer than --gap-us between two readings means it was frozen or preempted.
    Probe {
        output: PathBuf,
        duration_ms: u64,
        #[arg(long, default_value_t = 20)]
        gap_us: u64,
    },
    /// A VM partition's program: runs QEMU on inherited tap descriptors, copies the guest's console to stdout,
    /// exits with the guest command's status (193 kernel panic, 194 QEMU failed, 195 boot timeout, 196 guest
    /// set-up failed, 143 stopped by a signal).
    Vm(vm_runner::VmAppArgs),
    /// A fault program of `partita bench isolation` (issue 31): makes the kernel work on the partition's behalf
    /// until --seconds pass or a stop signal. Kinds: sleep (quiet), spin, threads, fork-storm, page-faults,
    /// vma-walk, smaps, big-write, fsync, o-direct, sync, aio, tmpfs-write, thp, mlock, timers, udp-flood
    /// (crates/apps/src/fault.rs says what each makes the kernel do).
    #[command(hide = true)]
    Fault(FaultArgs),
    /// A DDS Benchmark Environment agent of a built-in implementation (cyclone, rustdds, iceoryx2, udp):
    /// the arguments of crates/dbe/src/agent/PROTOCOL.md.
    #[command(name = "dbe-agent", hide = true)]
    DbeAgent {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
}

#[derive(Args)]
struct FaultArgs {
    /// What to make the kernel do.
    #[arg(value_parser = parse_fault_kind)]
    kind: partita_apps::fault::Kind,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    seconds: Option<f64>,
    /// udp-flood: where to send (the victim's V-NIC address; 198.18.0.0/15 or loopback only).
    #[arg(long)]
    target: Option<SocketAddr>,
}

fn parse_fault_kind(s: &str) -> Result<partita_apps::fault::Kind, String> {
    use partita_apps::fault::Kind;
    Kind::from_key(s).ok_or_else(|| format!("{s:?} is not one of sleep, {}", Kind::fault_keys()))
}

/// `partita app fault`: its files go to the partition's state directory (the temporary directory outside one)
/// and `/tmp`.
fn fault(a: FaultArgs) -> ExitCode {
    use partita_apps::fault::{self, FaultConfig};
    if a.seconds.is_some_and(|s| !(s > 0.0 && s.is_finite())) {
        return fail("fault", "--seconds: give a positive number of seconds, or leave it out to run until stopped");
    }
    let state_dir = partita_env::state_dir().map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let mut cfg = FaultConfig::new(a.kind, state_dir);
    cfg.duration = a.seconds.map(Duration::from_secs_f64);
    cfg.target = a.target;
    partita_os::signal::install_stop_signals();
    let mut ready = || println!("{}", fault::ready_line(a.kind));
    match fault::run(&cfg, partita_os::signal::stop_flag(), &mut ready) {
        Ok(r) => {
            println!("partita app fault {}: {} rounds in {:.1} s", a.kind.key(), r.rounds, r.seconds);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("fault {}", a.kind.key()), &e.to_string()),
    }
}

pub fn run(a: AppArgs) -> ExitCode {
    match a.app {
        App::Recorder(r) => recorder::run(r),
        App::Monitor(m) => monitor::run(m),
        App::UdpEcho(u) => udp_echo::run(u),
        App::StatusNode(s) => status_node::run_args(s),
        App::Port(p) => port::run(p),
        App::Partition(p) => partition::run(p),
        App::Vm(v) => vm_runner::run(v),
        App::DbeAgent { args } => crate::dbe::agent(args),
        App::Fault(f) => fault(f),
        App::ExchangeServer(x) => exchange::server(x),
        App::ExchangeClient(x) => exchange::client(x),
        App::Probe { output, duration_ms, gap_us } => {
            let runs = partita_lab::probe::spin(duration_ms * 1_000_000, gap_us * 1000, 10_000_000);
            match partita_lab::probe::write_intervals(&output, &runs) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail("probe", &e.to_string()),
            }
        }
    }
}
