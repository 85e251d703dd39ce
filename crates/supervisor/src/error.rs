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
    /// A name the supervisor would give a host object (interface, namespace, cgroup) breaks partita's rule.
    #[error("{what} {value:?}: {rule}")]
    Name { what: &'static str, value: String, rule: &'static str },
    /// An address or peer outside partita's own range.
    #[error("{what} {value} is outside 198.18.0.0/15 (partita uses only that range)")]
    Address { what: &'static str, value: String },
    /// The system model breaks an invariant its validation holds (a model built around `partita-system`'s
    /// validation): the supervisor refuses it rather than build half of it.
    #[error("{member}: {broken} (the system was not validated: build it with partita_system::parse or SystemSpec)")]
    Model { member: String, broken: &'static str },
    /// A plan its executor cannot run.
    #[error(transparent)]
    Plan(#[from] crate::executor::PlanError),
    /// A record or state file could not be written as JSON.
    #[error("encoding {what}: {source}")]
    Encode { what: &'static str, #[source] source: serde_json::Error },
    /// A command's JSON output could not be read.
    #[error("reading the output of `{command}`: {source}")]
    Decode { command: String, #[source] source: serde_json::Error },
    /// A DDS configuration (Cyclone XML, Fast DDS profile) could not be written: `what` says which.
    #[error("{what}: {source}")]
    DdsConfig { what: String, #[source] source: partita_dds::DdsError },
    /// The bound on the CPUs' wake-up latency could not be held.
    #[error("{source} (system.cpu_dma_latency; \"1us\" lets idle CPUs halt without pollers, \"off\" leaves the idle states alone)")]
    CpuLatency { #[source] source: partita_os::cpu_latency::CpuLatencyError },
    /// A partition's view of the file system: what its file binds.
    #[error("`binds` names {bind}, {problem}")]
    Bind { bind: String, problem: &'static str },
    /// A step of making a VM partition's guest failed.
    #[error("VM partition {partition}: {step}: {source}")]
    Guest { partition: String, step: &'static str, #[source] source: Box<dyn std::error::Error + Send + Sync> },
    /// An uplink cannot be handed over or given back.
    #[error("uplink {interface}: {problem}")]
    Uplink { interface: String, problem: String },
    /// A partition's state image cannot be used.
    #[error("{image}: {problem}")]
    StateImage { image: PathBuf, problem: String },
    /// Another system holds what this one needs (its name, its uplink), or is up where `down` would remove it.
    #[error("{0}")]
    Held(String),
    /// What failed for one partition or node.
    #[error("{member}: {source}")]
    Member { member: String, #[source] source: Box<SupervisorError> },
    /// A partition's program cannot be started.
    #[error("program {program:?} {problem}")]
    Program { program: String, problem: &'static str },
    /// A partition's seccomp filter could not be built from what its file allows.
    #[error("seccomp filter of {partition}: {problem}")]
    Seccomp { partition: String, problem: String },
    /// Processes of a cgroup outlived SIGKILL.
    #[error("processes {pids:?} survived SIGKILL for 5 s")]
    Unkillable { pids: Vec<i32> },
    /// A partition did not freeze in time.
    #[error("partition not frozen after {timeout:?} with {backend}")]
    NotFrozen { timeout: std::time::Duration, backend: &'static str },
    /// The kernel's tracer could not be reached.
    #[error("tracefs is not mounted at {path} and mounting it failed: {source}")]
    Tracefs { path: &'static str, #[source] source: Box<SupervisorError> },
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
