//! The guest's own `partita` (the `partita-guest` binary, `/usr/bin/partita` in a VM partition's guest): the
//! programs a guest command may run, with the operator's command lines (`partita route`, `partita app
//! recorder|monitor|udp-echo|exchange-server|exchange-client`), and nothing else: no supervisor, no benchmark.
use crate::globals::Globals;
use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "partita", version, about = "partita's programs inside a VM partition's guest")]
pub struct GuestCli {
    #[command(flatten)]
    pub globals: Globals,
    #[command(subcommand)]
    pub command: GuestCommand,
}

#[derive(Subcommand)]
pub enum GuestCommand {
    /// Run the DDS routing service between domains.
    Route(crate::route::RouteArgs),
    /// The applications that run inside partitions.
    App(GuestAppArgs),
}

#[derive(Args)]
pub struct GuestAppArgs {
    #[command(subcommand)]
    pub app: GuestApp,
}

#[derive(Subcommand)]
pub enum GuestApp {
    /// The Video_Recorder partition: synthetic cameras recorded into an on-disk ring, frames served over DDS.
    Recorder(crate::recorder::RecorderArgs),
    /// A monitoring node: requests frames, measures response times, saves the latest frame.
    Monitor(crate::monitor::MonitorArgs),
    /// The raw-UDP answerer of `monitor --udp` (the NETWORK baseline).
    UdpEcho(crate::udp_echo::UdpEchoArgs),
    /// Paper 003's server: answers exchange requests after busy work of the length each asks for.
    ExchangeServer(crate::exchange::ExchangeServerArgs),
    /// Paper 003's client: measures the exchange at every size × server work, writes one JSON report.
    ExchangeClient(crate::exchange::ExchangeClientArgs),
}

/// Parses the command line and runs the program it names.
pub fn main() -> ExitCode {
    let cli = GuestCli::parse();
    if let Err(code) = cli.globals.apply() {
        return code;
    }
    match cli.command {
        GuestCommand::Route(a) => crate::route::run(a),
        GuestCommand::App(a) => match a.app {
            GuestApp::Recorder(r) => crate::recorder::run(r),
            GuestApp::Monitor(m) => crate::monitor::run(m),
            GuestApp::UdpEcho(u) => crate::udp_echo::run(u),
            GuestApp::ExchangeServer(x) => crate::exchange::server(x),
            GuestApp::ExchangeClient(x) => crate::exchange::client(x),
        },
    }
}
