//! `partita route CONFIG`: the DDS routing service as a program (standalone, or inside an I/O partition).
use clap::Args;
use partita_router::{stats, Router, RouterConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct RouteArgs {
    /// The router's TOML configuration (see docs/router.md).
    pub config: PathBuf,
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

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

pub fn run(args: RouteArgs) -> ExitCode {
    let config = match RouterConfig::load(&args.config) {
        Ok(c) => c,
        Err(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            return ExitCode::from(2);
        }
    };
    if args.check {
        println!("{}: valid ({} sides, {} routes)", args.config.display(), config.sides.len(), config.routes.len());
        return ExitCode::SUCCESS;
    }
    if let Some(d) = args.duration {
        if !(d > 0.0 && d.is_finite()) {
            eprintln!("error: --duration {d}: give a positive number of seconds");
            return ExitCode::from(2);
        }
    }
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let period = config.stats_period();
    let router = match Router::start(config) {
        Ok(r) => Arc::new(r),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let start = Instant::now();
    let mut next = start + period;
    while !STOP.load(Ordering::Relaxed) {
        if args.duration.is_some_and(|d| start.elapsed().as_secs_f64() >= d) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        if args.stats && Instant::now() >= next {
            next += period;
            print!("{}", stats::table(&router.stats()));
            let refused = router.refused_topics();
            if !refused.is_empty() {
                println!("refused (max_topics reached): {}", refused.join(", "));
            }
        }
    }
    let rows = router.stats();
    drop(router);
    if args.stats {
        print!("{}", stats::table(&rows));
    }
    ExitCode::SUCCESS
}
