//! The `partita` binary: every role in one executable.
#![forbid(unsafe_code)]
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::process::ExitCode;

mod app;
mod bench;
mod check;
mod dbe;
mod paper;
mod plan;
mod route;
mod soak;
mod studies;
mod supervise;
mod vm;

#[derive(Parser)]
#[command(name = "partita", version, about = "Time-and-space partitioned DDS for mixed-criticality Linux machines")]
struct Cli {
    /// What the diagnostics on stderr show: a level (error, warn, info, debug, trace) or a filter such as
    /// `info,partita::router=debug` [default: RUST_LOG's filter, else info]
    #[arg(long, global = true, value_name = "LEVEL_OR_FILTER")]
    log: Option<String>,
    /// Lock this process's memory (mlockall) before it starts: what a measured process of the benchmarks'
    /// real-time setup does (needs root or CAP_IPC_LOCK)
    #[arg(long, global = true)]
    lock_memory: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Boot the paper's video-surveillance system (built in), measure its monitor, print the table, tear down.
    Demo(paper::DemoArgs),
    /// Validate a system file (the built-in default without one) and show its plans and networks.
    Check(check::CheckArgs),
    /// Schedule analysis: search window layouts of a plan for better response times (`plan optimise`).
    Plan(plan::PlanArgs),
    /// Run the DDS routing service between domains.
    Route(route::RouteArgs),
    /// Run benchmarks (request/response round trips: `bench rr`).
    Bench(bench::BenchArgs),
    /// Build a system (default: the paper's), run its partitions on their plan until Ctrl-C, tear it down.
    Up(supervise::UpArgs),
    /// Remove everything partita created on this machine (after a crashed supervisor, too).
    Down(supervise::DownArgs),
    /// Show the systems that are up (state under /run/partita) and partita's leftovers.
    Status(supervise::StatusArgs),
    /// The applications that run inside partitions: recorder, monitor, udp-echo, probe, and vm (the runner of
    /// a VM partition).
    App(app::AppArgs),
    /// VM partitions: build the guest image, probe the acceleration, boot a guest by hand.
    Vm(vm::VmArgs),
    /// Run a system for a long time and report, per interval, its temporal isolation against cyclictest's floor.
    Soak(soak::SoakArgs),
    /// Measure freezing backends and the reference frame (supervisor benchmarks).
    #[command(hide = true)]
    IsolationBench(supervise::IsolationBenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = init_logging(cli.log.as_deref()) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    if cli.lock_memory {
        if let Err(e) = partita_os::sched::lock_all_memory() {
            eprintln!("error: --lock-memory: mlockall: {e} (needs root or CAP_IPC_LOCK)");
            return ExitCode::FAILURE;
        }
    }
    match cli.command {
        Command::Demo(a) => paper::demo(a),
        Command::Check(a) => check::run(a),
        Command::Plan(a) => plan::run(a),
        Command::Route(a) => route::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Up(a) => supervise::up(a),
        Command::Down(a) => supervise::down(a),
        Command::Status(a) => supervise::status(a),
        Command::App(a) => app::run(a),
        Command::Vm(a) => vm::run(a),
        Command::IsolationBench(a) => supervise::isolation_bench(a),
        Command::Soak(a) => soak::run(a),
    }
}

/// Logging, set up once per process: the `tracing` events of every crate (the router's and the DDS layer's
/// diagnostics) that pass the filter go to stderr, one line each with time, level and target, without colours
/// unless stderr is a terminal. The filter is `--log`, else `RUST_LOG`, else `info`; a `RUST_LOG` that is not
/// a filter is reported and `info` used, so a stray variable in a partition's environment stops nothing.
/// What a command reports to its user (tables on stdout, errors before it exits) does not go through here.
fn init_logging(option: Option<&str>) -> Result<(), String> {
    use tracing_subscriber::EnvFilter;
    let mut ignored = None;
    let filter = match option {
        Some(text) => EnvFilter::builder()
            .parse(text)
            .map_err(|e| format!("--log {text:?}: {e}; give a level (error, warn, info, debug, trace) or a filter such as info,partita::router=debug"))?,
        None => match std::env::var(EnvFilter::DEFAULT_ENV) {
            Ok(text) if !text.trim().is_empty() => EnvFilter::builder().parse(&text).unwrap_or_else(|e| {
                ignored = Some((text, e));
                EnvFilter::new("info,rustdds=warn")
            }),
            _ => EnvFilter::new("info,rustdds=warn"),
        },
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .map_err(|e| format!("setting up logging: {e}"))?;
    if let Some((text, e)) = ignored {
        tracing::warn!(target: "partita", "{} = {text:?} is not a filter ({e}); logging at info", EnvFilter::DEFAULT_ENV);
    }
    Ok(())
}
