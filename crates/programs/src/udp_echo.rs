//! The raw-UDP answerer of `monitor --udp` (`partita app udp-echo`): the NETWORK baseline.
use crate::fail;
use clap::Args;
use partita_apps::udp;
use std::net::SocketAddr;
use std::process::ExitCode;

#[derive(Args)]
pub struct UdpEchoArgs {
    /// Address to answer on (inside partita's namespaces: lo or a V-NIC address).
    #[arg(long, default_value = "127.0.0.1:9500")]
    pub bind: SocketAddr,
}

pub fn run(a: UdpEchoArgs) -> ExitCode {
    partita_os::signal::install_stop_signals();
    match udp::serve(a.bind, partita_os::signal::stop_flag()) {
        Ok(n) => {
            println!("udp-echo: answered {n} requests");
            ExitCode::SUCCESS
        }
        Err(e) => fail("udp-echo", &format!("{}: {e}", a.bind)),
    }
}
