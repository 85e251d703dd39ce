//! The `partita` binary: every role in one executable.
#![forbid(unsafe_code)]
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod app;
mod bench;
mod check;
mod paper;
mod route;
mod supervise;

#[derive(Parser)]
#[command(name = "partita", version, about = "Time-and-space partitioned DDS for mixed-criticality Linux machines")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Boot the paper's video-surveillance system (built in), measure its monitor, print the table, tear down.
    Demo(paper::DemoArgs),
    /// Validate a system file (the built-in default without one) and show its plans and networks.
    Check(check::CheckArgs),
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
    /// The applications that run inside partitions: recorder, monitor, udp-echo, probe.
    App(app::AppArgs),
    /// Measure freezing backends and the reference frame (supervisor benchmarks).
    #[command(hide = true)]
    IsolationBench(supervise::IsolationBenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo(a) => paper::demo(a),
        Command::Check(a) => check::run(a),
        Command::Route(a) => route::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Up(a) => supervise::up(a),
        Command::Down(a) => supervise::down(a),
        Command::Status(a) => supervise::status(a),
        Command::App(a) => app::run(a),
        Command::IsolationBench(a) => supervise::isolation_bench(a),
    }
}
