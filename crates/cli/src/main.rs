//! The `partita` binary: the operator's commands (check, up, down, status, plan, vm), the lab's (demo, bench,
//! soak), and every program a partition runs (route, app), which crates/programs also builds as small binaries.
#![forbid(unsafe_code)]
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod app;
mod bench;
mod check;
mod dbe;
mod paper;
mod partition;
mod plan;
mod router;
mod soak;
mod studies;
mod supervise;
mod vm;
mod web;

#[derive(Parser)]
#[command(name = "partita", version, about = "Time-and-space partitioned DDS for mixed-criticality Linux machines")]
struct Cli {
    #[command(flatten)]
    globals: partita_programs::globals::Globals,
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
    Route(partita_programs::route::RouteArgs),
    /// A running system's routing services: `router reload SYSTEM` takes over changed route tables.
    Router(router::RouterArgs),
    /// Run benchmarks (request/response round trips: `bench rr`).
    Bench(bench::BenchArgs),
    /// Build a system (default: the paper's), run its partitions on their plan until Ctrl-C, tear it down.
    Up(supervise::UpArgs),
    /// Remove everything partita created on this machine (after a crashed supervisor, too).
    Down(supervise::DownArgs),
    /// Show the systems that are up (state under /run/partita) and partita's leftovers.
    Status(supervise::StatusArgs),
    /// Restart or stop one partition of a running system (the operator's admin actions).
    Partition(partition::PartitionArgs),
    /// The applications that run inside partitions: recorder, monitor, udp-echo, probe, and vm (the runner of
    /// a VM partition).
    App(app::AppArgs),
    /// VM partitions: build the guest image, probe the acceleration, boot a guest by hand.
    Vm(vm::VmArgs),
    /// Serve a browser view of the systems up on this machine: plans, lateness, partitions, health events, and
    /// admin actions with a token.
    Web(web::WebArgs),
    /// Run a system for a long time and report, per interval, its temporal isolation against cyclictest's floor.
    Soak(soak::SoakArgs),
    /// Measure freezing backends and the reference frame (supervisor benchmarks).
    #[command(hide = true)]
    IsolationBench(supervise::IsolationBenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(code) = cli.globals.apply() {
        return code;
    }
    match cli.command {
        Command::Demo(a) => paper::demo(a),
        Command::Check(a) => check::run(a),
        Command::Plan(a) => plan::run(a),
        Command::Route(a) => partita_programs::route::run(a),
        Command::Router(a) => router::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Up(a) => supervise::up(a),
        Command::Down(a) => supervise::down(a),
        Command::Status(a) => supervise::status(a),
        Command::Partition(a) => partition::run(a),
        Command::App(a) => app::run(a),
        Command::Vm(a) => vm::run(a),
        Command::IsolationBench(a) => supervise::isolation_bench(a),
        Command::Soak(a) => soak::run(a),
        Command::Web(a) => web::run(a),
    }
}
