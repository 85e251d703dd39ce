//! partita-programs: the programs that run inside partitions and on native nodes — the DDS routing service,
//! the recorder, the monitor, a VM partition's runner, and the guest's own `partita` — each with its command
//! line and its `run`. Each is built as a small binary of its own (`src/bin`) that links only the runtime
//! (no benchmark, no study, no other DDS implementation); the operator's `partita` binary runs the same code as
//! `partita route`, `partita app recorder`, … (`partita_system::programs` maps one to the other).
#![forbid(unsafe_code)]
pub mod dds_args;
pub mod exchange;
pub mod globals;
pub mod guest;
pub mod monitor;
pub mod partition;
pub mod port;
pub mod recorder;
pub mod route;
pub mod status_node;
pub mod udp_echo;
pub mod vm_runner;

use std::process::ExitCode;

/// A program's error line on stderr (`partita app monitor: error: …`), and its failure status.
pub fn fail(what: &str, msg: &str) -> ExitCode {
    eprintln!("partita app {what}: error: {msg}");
    ExitCode::FAILURE
}

/// A byte count on the command line (`64`, `1k`, `1KiB`, `2MiB`).
pub fn parse_size(s: &str) -> Result<usize, String> {
    partita_apps::size::parse_size(s).map_err(|e| e.to_string())
}

/// A small binary's command line: `--log`, `--lock-memory` and the program's own arguments.
#[derive(clap::Parser)]
struct Program<A: clap::Args> {
    #[command(flatten)]
    globals: globals::Globals,
    #[command(flatten)]
    args: A,
}

/// The `main` of a small binary: parses its command line (shown as `name`, described by `about`), sets up
/// logging and the memory lock, and runs the program.
pub fn run_program<A: clap::Args>(name: &'static str, about: &'static str, run: fn(A) -> ExitCode) -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Program::<A>::command().name(name).bin_name(name).about(about).get_matches();
    let program = match Program::<A>::from_arg_matches(&matches) {
        Ok(p) => p,
        Err(e) => e.exit(),
    };
    if let Err(code) = program.globals.apply() {
        return code;
    }
    run(program.args)
}
