//! `partita partition restart|stop SYSTEM NAME`: the operator's hand on one partition of a running system,
//! through its supervisor's control socket (the same requests `partita web`'s admin actions send).
use clap::{Args, Subcommand};
use partita_supervisor::control_socket::{send, Request, SOCKET};
use partita_supervisor::supervisor::STATE_DIR;
use std::path::Path;
use std::process::ExitCode;

#[derive(Args)]
pub struct PartitionArgs {
    #[command(subcommand)]
    command: PartitionCommand,
}

#[derive(Subcommand)]
enum PartitionCommand {
    /// Restart a partition or node (also one kept stopped): warm, or cold with its state directory emptied.
    Restart {
        /// The system (as `partita status` names it).
        system: String,
        /// The partition or node.
        name: String,
        /// Empty its state directory first.
        #[arg(long)]
        cold: bool,
    },
    /// Stop a partition or node and keep it stopped (its windows stay in the plan, unused) until restarted.
    Stop { system: String, name: String },
}

pub fn run(a: PartitionArgs) -> ExitCode {
    let (system, request) = match a.command {
        PartitionCommand::Restart { system, name, cold } => (system, Request::RestartPartition { partition: name, cold }),
        PartitionCommand::Stop { system, name } => (system, Request::StopPartition { partition: name }),
    };
    ask("partita partition", &system, &request)
}

/// Sends `request` to the running system's supervisor and prints its answer, as command `command`: exit 0
/// when done, 2 when refused or the system is not up, 1 when the supervisor could not be asked.
pub fn ask(command: &str, system: &str, request: &Request) -> ExitCode {
    let dir = Path::new(STATE_DIR).join(system);
    if !dir.join(SOCKET).exists() {
        eprintln!("{command}: system {system:?} is not up on this machine (no {}); `partita status` lists the systems that are", dir.join(SOCKET).display());
        return ExitCode::from(2);
    }
    match send(&dir, request, std::time::Duration::from_secs(15)) {
        Ok(r) if r.ok => {
            println!("{}", r.detail);
            ExitCode::SUCCESS
        }
        Ok(r) => {
            eprintln!("{command}: {}", r.detail);
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("{command}: {e}");
            ExitCode::FAILURE
        }
    }
}
