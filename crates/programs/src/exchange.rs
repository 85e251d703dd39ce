//! Paper 003's exchange (`partita app exchange-server`, `partita app exchange-client`): a server that answers
//! after busy work of the length each request asks for, and the client that sweeps sizes × work.
use crate::dds_args::DdsArgs;
use crate::{fail, parse_size};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct ExchangeServerArgs {
    /// Answer raw UDP on this address instead of DDS (the "ideal" baseline).
    #[arg(long)]
    udp: Option<SocketAddr>,
    #[command(flatten)]
    dds: DdsArgs,
}

#[derive(Args)]
pub struct ExchangeClientArgs {
    /// Data sizes, comma-separated (e.g. 64,512).
    #[arg(long, value_delimiter = ',', default_value = "64,512", value_parser = parse_size)]
    sizes: Vec<usize>,
    /// The server's work per request, µs, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,10,25,50,75,100")]
    works: Vec<f64>,
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    #[arg(long, default_value_t = 1000)]
    warmup: u64,
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Seconds to wait for the first answer (discovery, a VM partition's boot).
    #[arg(long, default_value_t = 120.0)]
    connect_timeout: f64,
    /// Where the report goes (JSON).
    #[arg(long)]
    json: PathBuf,
    /// Exchange raw UDP with `exchange-server --udp` at this address instead of DDS.
    #[arg(long)]
    udp: Option<SocketAddr>,
    #[command(flatten)]
    dds: DdsArgs,
}

pub fn server(a: ExchangeServerArgs) -> ExitCode {
    use partita_apps::exchange;
    partita_os::signal::install_stop_signals();
    let stop = partita_os::signal::stop_flag();
    if let Some(bind) = a.udp {
        println!("exchange-server: raw UDP on {bind}");
        return match exchange::serve_udp(bind, stop) {
            Ok(n) => {
                println!("exchange-server: answered {n} requests");
                ExitCode::SUCCESS
            }
            Err(e) => fail("exchange-server", &e.to_string()),
        };
    }
    let dds = match a.dds.config() {
        Ok(d) => d,
        Err(e) => return fail("exchange-server", &e),
    };
    let server = match exchange::DdsServer::start(&dds) {
        Ok(s) => s,
        Err(e) => return fail("exchange-server", &e.to_string()),
    };
    println!("exchange-server: DDS domain {}, busy work {:.1} iterations/µs", dds.domain_id, server.calibration.iterations_per_us);
    while !partita_os::signal::stop_requested() {
        std::thread::sleep(Duration::from_millis(50));
    }
    ExitCode::SUCCESS
}

pub fn client(a: ExchangeClientArgs) -> ExitCode {
    use partita_apps::exchange;
    if !(a.connect_timeout > 0.0 && a.connect_timeout.is_finite()) || a.timeout_ms == 0 {
        return fail("exchange-client", "--connect-timeout and --timeout-ms must be positive");
    }
    let target = match a.udp {
        Some(addr) => exchange::Target::Udp(addr),
        None => match a.dds.config() {
            Ok(d) => exchange::Target::Dds(d),
            Err(e) => return fail("exchange-client", &e),
        },
    };
    let cfg = exchange::SweepConfig {
        name: format!("client-{}", std::process::id()),
        sizes: a.sizes,
        works_us: a.works,
        count: a.count,
        warmup: a.warmup,
        timeout: Duration::from_millis(a.timeout_ms),
        connect_timeout: Duration::from_secs_f64(a.connect_timeout),
    };
    partita_os::signal::install_stop_signals();
    let report = match exchange::sweep(&cfg, target, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => return fail("exchange-client", &e.to_string()),
    };
    let text = serde_json::to_string(&report).expect("a report always serializes");
    match std::fs::write(&a.json, text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("exchange-client", &format!("{}: {e}", a.json.display())),
    }
}
