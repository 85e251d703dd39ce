//! `partita router reload SYSTEM`: a running system's I/O partitions take over the route tables
//! (`[module.partition.router]`) of its system file as it is now, without a restart (docs/router.md, "Hot
//! reload"), through its supervisor's control socket.
use clap::{Args, Subcommand};
use partita_supervisor::control_socket::Request;
use std::process::ExitCode;

#[derive(Args)]
pub struct RouterArgs {
    #[command(subcommand)]
    command: RouterCommand,
}

#[derive(Subcommand)]
enum RouterCommand {
    /// Read the running system's file again and give each I/O partition whose route table changed its new
    /// table; a file that changes anything else, or does not validate, is refused and nothing changes.
    Reload {
        /// The system (as `partita status` names it).
        system: String,
    },
}

pub fn run(a: RouterArgs) -> ExitCode {
    match a.command {
        RouterCommand::Reload { system } => crate::partition::ask("partita router reload", &system, &Request::ReloadRouters),
    }
}
