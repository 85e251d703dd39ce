//! The `partita` binary: every role in one executable.
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod bench;
mod route;

#[derive(Parser)]
#[command(name = "partita", version, about = "Time-and-space partitioned DDS for mixed-criticality Linux machines")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the DDS routing service between domains.
    Route(route::RouteArgs),
    /// Run benchmarks (request/response round trips: `bench rr`).
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Route(a) => route::run(a),
        Command::Bench(a) => bench::run(a),
    }
}
