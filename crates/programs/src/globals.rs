//! What every partita binary takes before or after its command: `--log` and `--lock-memory`, and the logging
//! they set up.
use clap::Args;
use std::io::IsTerminal;
use std::process::ExitCode;

#[derive(Args, Debug, Clone, Default)]
pub struct Globals {
    /// What the diagnostics on stderr show: a level (error, warn, info, debug, trace) or a filter such as
    /// `info,partita::router=debug` [default: RUST_LOG's filter, else info]
    #[arg(long, global = true, value_name = "LEVEL_OR_FILTER")]
    pub log: Option<String>,
    /// Lock this process's memory (mlockall) before it starts: what a measured process of the benchmarks'
    /// real-time setup does (needs root or CAP_IPC_LOCK)
    #[arg(long, global = true)]
    pub lock_memory: bool,
}

impl Globals {
    /// Sets up logging and locks the memory when asked; the exit status to end with when either fails.
    pub fn apply(&self) -> Result<(), ExitCode> {
        if let Err(e) = init_logging(self.log.as_deref()) {
            eprintln!("error: {e}");
            return Err(ExitCode::from(2));
        }
        if self.lock_memory {
            if let Err(e) = partita_os::sched::lock_all_memory() {
                eprintln!("error: --lock-memory: mlockall: {e} (needs root or CAP_IPC_LOCK)");
                return Err(ExitCode::FAILURE);
            }
        }
        Ok(())
    }
}

/// Logging, set up once per process: the `tracing` events of every crate (the router's and the DDS layer's
/// diagnostics) that pass the filter go to stderr, one line each with time, level and target, without colours
/// unless stderr is a terminal. The filter is `--log`, else `RUST_LOG`, else `info`; a `RUST_LOG` that is not
/// a filter is reported and `info` used, so a stray variable in a partition's environment stops nothing.
/// What a command reports to its user (tables on stdout, errors before it exits) does not go through here.
pub fn init_logging(option: Option<&str>) -> Result<(), String> {
    use tracing_subscriber::EnvFilter;
    let mut ignored = None;
    let filter = match option {
        Some(text) => EnvFilter::builder()
            .parse(text)
            .map_err(|e| format!("--log {text:?}: {e}; give a level (error, warn, info, debug, trace) or a filter such as info,partita::router=debug"))?,
        None => match std::env::var(EnvFilter::DEFAULT_ENV) {
            Ok(text) if !text.trim().is_empty() => EnvFilter::builder().parse(&text).unwrap_or_else(|e| {
                ignored = Some((text, e));
                EnvFilter::new("info,rustdds=warn")
            }),
            _ => EnvFilter::new("info,rustdds=warn"),
        },
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .map_err(|e| format!("setting up logging: {e}"))?;
    if let Some((text, e)) = ignored {
        tracing::warn!(target: "partita", "{} = {text:?} is not a filter ({e}); logging at info", EnvFilter::DEFAULT_ENV);
    }
    Ok(())
}
