//! Errors of the benchmark. [`BenchError::is_usage`] tells the command line which ones are the user's to fix
//! (exit code 2) and which ones happened while running (exit code 1).
use std::path::PathBuf;

/// Failures inside a transport driver.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("{what}: {source}")]
    Io { what: String, #[source] source: std::io::Error },
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("{0}")]
    Other(String),
}

impl DriverError {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        DriverError::Io { what: what.into(), source }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("size {text:?}: {reason}")]
    BadSize { text: String, reason: String },
    #[error("size {size} bytes is too large for transport {transport} (at most {max} bytes)")]
    SizeTooLarge { transport: String, size: usize, max: usize },
    #[error("unknown transport {name:?} (known: {known})")]
    UnknownTransport { name: String, known: String },
    #[error("--count must be at least 1")]
    ZeroCount,
    #[error("--seconds {0}: give a positive number of seconds")]
    BadSeconds(f64),
    #[error("--rate {0}: give a positive number of requests per second")]
    BadRate(f64),
    #[error("--server-work {0}: give a number of microseconds, 0 or more")]
    BadServerWork(f64),
    #[error("--timeout-ms must be at least 1")]
    BadTimeout,
    #[error("output folder {path}: {source}")]
    OutputDir { path: PathBuf, #[source] source: std::io::Error },
    #[error("no transport given")]
    NoTransport,
    #[error("no size given")]
    NoSize,

    #[error("transport {transport}: {source}")]
    Driver { transport: String, #[source] source: DriverError },
    #[error("server process for {transport}: {reason}")]
    Server { transport: String, reason: String },
    #[error("ddsperf: {0}")]
    Ddsperf(String),
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, #[source] source: std::io::Error },
    #[error("interrupted")]
    Interrupted,
    #[error("entering a private network namespace: {0}")]
    Sandbox(String),
    #[error("--busy-poll under the real-time setup: a spinning SCHED_FIFO client would keep the other processes of the run off its CPU; add --normal-scheduling to busy-poll")]
    BusyPollUnderFifo,
    #[error("--fifo {0}: give a SCHED_FIFO priority from 1 to 89 (below the plan executors' 90)")]
    BadPriority(u8),
    #[error(transparent)]
    Setup(#[from] partita_lab::setup::SetupError),
    #[error("--repeat must be at least 1")]
    BadRepeat,
    #[error("--batch-delay {text:?}: {reason}")]
    BadBatchDelay { text: String, reason: String },
    #[error("--depth {depth}: {reason}")]
    BadDepth { depth: u64, reason: String },

    #[error("{measurement}: {source}")]
    Port { measurement: String, #[source] source: partita_ports::PortError },
    #[error("{measurement}: {what}: {source}")]
    SharedMemory { measurement: String, what: &'static str, #[source] source: std::io::Error },
    #[error("{measurement}: iceoryx2: {what}: {reason}")]
    Iceoryx { measurement: String, what: String, reason: String },
    #[error("{measurement}: the writer process {reason}")]
    Peer { measurement: String, reason: String },
    #[error("{measurement}: no answer within {seconds:.0} s (the other end stopped or never started)")]
    Stalled { measurement: String, seconds: f64 },
    #[error("bench ports pins its writer to CPU {writer} and its reader to CPU {reader}, but this process may run on CPUs {allowed:?} only: run it where both are allowed (see /proc/self/status, Cpus_allowed_list)")]
    Cpus { writer: usize, reader: usize, allowed: Vec<usize> },
    #[error("pinning to CPU {cpu}: {source}")]
    Pin { cpu: usize, #[source] source: partita_os::sched::SchedError },
}

impl BenchError {
    /// True when the user gave arguments that cannot work (the command exits with status 2).
    pub fn is_usage(&self) -> bool {
        if let BenchError::Setup(e) = self {
            return e.is_usage();
        }
        matches!(
            self,
            BenchError::BadSize { .. }
                | BenchError::BadSeconds(_)
                | BenchError::SizeTooLarge { .. }
                | BenchError::UnknownTransport { .. }
                | BenchError::ZeroCount
                | BenchError::BadRate(_)
                | BenchError::BusyPollUnderFifo
                | BenchError::BadPriority(_)
                | BenchError::BadRepeat
                | BenchError::BadBatchDelay { .. }
                | BenchError::BadDepth { .. }
                | BenchError::BadTimeout
                | BenchError::BadServerWork(_)
                | BenchError::OutputDir { .. }
                | BenchError::NoTransport
                | BenchError::NoSize
        )
    }
}

impl From<partita_apps::size::BadSize> for BenchError {
    fn from(e: partita_apps::size::BadSize) -> Self {
        BenchError::BadSize { text: e.text, reason: e.reason }
    }
}
