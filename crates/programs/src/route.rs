//! The DDS routing service as a program (`partita-route`, `partita route CONFIG`): standalone, or inside an I/O partition.
use clap::Args;
use partita_router::{stats, Router, RouterConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub struct RouteArgs {
    /// The router's TOML configuration (see docs/router.md). Inside an I/O partition it may be left out: the
    /// router then reads the router file the supervisor wrote from the system file (`PARTITA_ROUTER_FILE`).
    pub config: Option<PathBuf>,
    /// Print the statistics table every stats period.
    #[arg(long)]
    pub stats: bool,
    /// Stop after this many seconds (default: run until SIGINT or SIGTERM).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Only check the configuration and exit.
    #[arg(long)]
    pub check: bool,
}

pub fn run(args: RouteArgs) -> ExitCode {
    let (config, source) = match &args.config {
        Some(path) => match RouterConfig::load(path) {
            Ok(c) => (c, path.display().to_string()),
            Err(errors) => {
                for e in errors {
                    eprintln!("error: {e}");
                }
                return ExitCode::from(2);
            }
        },
        None => match RouterConfig::for_io_partition() {
            Some(Ok(c)) => (c, partita_env::router_file().unwrap_or_default()),
            Some(Err(e)) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
            None => {
                eprintln!(
                    "error: partita route needs a CONFIG file (see docs/router.md and examples/router-loopback.toml); \
                     only inside an I/O partition, whose router file the supervisor names in PARTITA_ROUTER_FILE, can it be left out"
                );
                return ExitCode::from(2);
            }
        },
    };
    if args.check {
        println!("{source}: valid ({} sides, {} routes)", config.sides.len(), config.routes.len());
        return ExitCode::SUCCESS;
    }
    if let Some(d) = args.duration {
        if !(d > 0.0 && d.is_finite()) {
            eprintln!("error: --duration {d}: give a positive number of seconds");
            return ExitCode::from(2);
        }
    }
    partita_os::signal::install_stop_signals();
    let period = config.stats_period();
    // The partition's ARINC 653 ports, for the port routes (`[[port]]`): none outside a partition.
    let mut ports = match partita_ports::Ports::from_env() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    // The router's manager runs on this thread (`Router::serve`): a routing partition's threads all run at every
    // thaw, so the program adds none of its own (docs/router.md, "Threads").
    let start = Instant::now();
    let mut next = start + period;
    let mut last_rows = Vec::new();
    let served = Router::serve(config, &mut ports, |router| {
        let stop = partita_os::signal::stop_requested() || args.duration.is_some_and(|d| start.elapsed().as_secs_f64() >= d);
        if stop {
            last_rows = router.stats();
            return false;
        }
        if args.stats && Instant::now() >= next {
            next += period;
            print!("{}", stats::table(&router.stats()));
            let refused = router.refused_topics();
            if !refused.is_empty() {
                println!("refused (max_topics reached): {}", refused.join(", "));
            }
            for (side, present, gone, silent) in router.peers() {
                println!("side {side}: {present} application participants, {gone} gone (left or lost), {silent} without endpoints (refused by DDS Security, or idle)");
            }
        }
        true
    });
    if let Err(e) = served {
        eprintln!("error: {e}");
        return ExitCode::from(1);
    }
    if args.stats {
        print!("{}", stats::table(&last_rows));
    }
    ExitCode::SUCCESS
}
