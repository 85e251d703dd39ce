//! Running iproute2 commands with their failure as a typed error.
use crate::error::{Result, SupervisorError};
use std::process::Command;

/// Runs `ip ARGS...`, returning its stdout.
pub fn ip(args: &[&str]) -> Result<String> {
    run("ip", args)
}

pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program).args(args).output().map_err(|e| SupervisorError::Command {
        command: command.clone(),
        status: "not started".into(),
        stderr: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(SupervisorError::Command {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
