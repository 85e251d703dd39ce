//! Errors of the supervisor, one enum, each variant saying which path, call or command failed and why.
use std::io;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SupervisorError {
    /// A file operation on a cgroup, netns or state file failed.
    #[error("{op} {path}: {source}")]
    Path { op: &'static str, path: PathBuf, #[source] source: io::Error },
    /// A system call failed (the io::Error carries the errno).
    #[error("{call} ({context}): {source}")]
    Sys { call: &'static str, context: String, #[source] source: io::Error },
    /// An external command (iproute2) failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command { command: String, status: String, stderr: String },
    /// No usable cgroup hierarchy was found for a controller partita needs.
    #[error("cgroup layout: {0}")]
    Layout(String),
    /// A value given to the supervisor cannot be used (name too long, address outside 198.18.0.0/15, ...).
    #[error("invalid: {0}")]
    Invalid(String),
    /// A supervisor thread could not get its CPU or its real-time policy.
    #[error("{context}: {source}")]
    Sched { context: &'static str, #[source] source: partita_os::sched::SchedError },
    /// Code could not be run inside a partition's network namespace.
    #[error(transparent)]
    Netns(#[from] partita_os::netns::NetnsError),
    /// The partition's process could not be started; the error comes from the child before exec.
    #[error("launch of partition {partition}: {step} failed: {source}")]
    Launch { partition: String, step: &'static str, #[source] source: io::Error },
}

pub type Result<T, E = SupervisorError> = std::result::Result<T, E>;

/// Maps an I/O error of `op` on `path` to [`SupervisorError::Path`].
pub fn path_err(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> SupervisorError {
    let path = path.into();
    move |source| SupervisorError::Path { op, path, source }
}

/// For a partita-os call that failed with `source`.
pub(crate) fn sys_failed(call: &'static str, context: impl Into<String>) -> impl FnOnce(io::Error) -> SupervisorError {
    let context = context.into();
    move |source| SupervisorError::Sys { call, context, source }
}
