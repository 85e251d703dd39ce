//! `partita app partition …`: the partition's control page (`PARTITA_CONTROL`) from the shell, for shell
//! programs in partitions:
//!
//! - `status`: the page's state, one `key value` line each (mode, start condition, plan, next plan, last
//!   switch, the module's plans);
//! - `mode MODE`: asks the supervisor for an operating mode (idle, cold_start, warm_start, normal);
//! - `error [--kind KIND] MESSAGE`: raises an error (application_error by default) for the supervisor's
//!   health-monitor tables;
//! - `plan NAME`: asks the supervisor to switch the module to the plan NAME (system partitions only).
//!
//! A request prints the supervisor's answer (`done`, `refused`, `invalid`, `no such plan`) and exits with
//! [`EXIT_DONE`], [`EXIT_REFUSED`] or [`EXIT_INVALID`]; any other failure (no page, no answer in time) is an
//! error line and exit code 1.
use crate::fail;
use clap::{Args, Subcommand};
use partita_ports::control::{error_kind_code, Control, Mode, Outcome, Request, ERROR_KIND_NAMES, MAX_MESSAGE};
use std::process::ExitCode;
use std::time::Duration;

/// Exit code of a request the supervisor did.
pub const EXIT_DONE: u8 = 0;
/// Exit code of a request the supervisor refused (not permitted to this partition, or not now).
pub const EXIT_REFUSED: u8 = 3;
/// Exit code of a request the supervisor found invalid, or of a plan the module does not have.
pub const EXIT_INVALID: u8 = 4;

#[derive(Args)]
pub struct PartitionArgs {
    #[command(subcommand)]
    command: PartitionCommand,
}

#[derive(Subcommand)]
enum PartitionCommand {
    /// The control page's state: mode, start condition, plan, next plan, last switch, the module's plans.
    Status,
    /// Asks the supervisor for an operating mode: idle, cold_start, warm_start or normal. IDLE freezes the
    /// partition and a start mode restarts it, this program with it.
    Mode {
        #[arg(value_parser = parse_mode)]
        mode: Mode,
        /// How long to wait for the answer (the partition is frozen outside its windows: that time counts).
        #[arg(long, value_parser = crate::vm_runner::parse_duration, default_value = "5s")]
        timeout: Duration,
    },
    /// Raises an error for the supervisor's health-monitor tables: its message (at most 192 bytes) goes with it.
    Error {
        /// The error kind: application_error, deadline_missed, numeric_error or stack_overflow (the kinds a
        /// partition may raise), or any of the system file's kinds (the supervisor refuses the others).
        #[arg(long, default_value = "application_error", value_parser = parse_kind)]
        kind: u8,
        message: String,
        #[arg(long, value_parser = crate::vm_runner::parse_duration, default_value = "5s")]
        timeout: Duration,
    },
    /// Asks the supervisor to switch the module to the plan NAME at the end of its major frame (system
    /// partitions only).
    Plan {
        name: String,
        #[arg(long, value_parser = crate::vm_runner::parse_duration, default_value = "5s")]
        timeout: Duration,
    },
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

fn parse_kind(s: &str) -> Result<u8, String> {
    error_kind_code(s).ok_or_else(|| format!("{s:?} is not an error kind: give one of {}", ERROR_KIND_NAMES.join(", ")))
}

pub fn run(a: PartitionArgs) -> ExitCode {
    match partition(a) {
        Ok(code) => ExitCode::from(code),
        Err(e) => fail("partition", &e),
    }
}

fn partition(a: PartitionArgs) -> Result<u8, String> {
    let page = Control::from_env().map_err(|e| e.to_string())?.ok_or("this program runs outside a planned process partition: PARTITA_CONTROL is unset")?;
    let (request, timeout) = match a.command {
        PartitionCommand::Status => {
            status(&page);
            return Ok(EXIT_DONE);
        }
        PartitionCommand::Mode { mode, timeout } => (Request::SetMode(mode), timeout),
        PartitionCommand::Error { kind, message, timeout } => {
            if message.len() > MAX_MESSAGE {
                return Err(format!("a message of {} bytes; the control page carries at most {MAX_MESSAGE}", message.len()));
            }
            (Request::RaiseError { kind, message }, timeout)
        }
        PartitionCommand::Plan { name, timeout } => match page.plan_index(&name) {
            Some(index) => (Request::SwitchPlan(index), timeout),
            None => {
                let plans: Vec<String> = page.plan_names().into_iter().map(|(_, n)| n).collect();
                println!("{}: {name:?} (the module's plans: {})", Outcome::NoSuchPlan, plans.join(", "));
                return Ok(EXIT_INVALID);
            }
        },
    };
    let outcome = page.request(&request, timeout).map_err(|e| e.to_string())?;
    println!("{outcome}");
    Ok(match outcome {
        Outcome::Done => EXIT_DONE,
        Outcome::Refused => EXIT_REFUSED,
        Outcome::Invalid | Outcome::NoSuchPlan => EXIT_INVALID,
    })
}

fn status(page: &Control) {
    let named = |index: u64| page.plan_name(index).map_or_else(|| index.to_string(), |n| format!("{index} {n}"));
    println!("mode {}", page.mode().map_or("unknown", Mode::as_str));
    println!("start_condition {}", page.start_condition().map_or("unknown", |c| c.as_str()));
    println!("plan {}", named(page.plan()));
    println!("next_plan {}", named(page.next_plan()));
    println!("last_switch_ns {}", page.last_switch_ns());
    let plans: Vec<String> = page.plan_names().into_iter().map(|(_, n)| n).collect();
    println!("plans {}", plans.join(" "));
}
