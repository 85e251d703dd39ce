//! Which of a partition's domains a program joins (`--network`), or a loopback domain outside the supervisor
//! (`--domain`).
use clap::{Args, ValueEnum};
use partita_dds::DomainConfig;


/// Which of a partition's domains an application joins.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Network {
    /// The inter-module network when the partition has a V-NIC on it (an I/O partition), else the module's.
    Auto,
    Module,
    External,
}

#[derive(Args)]
pub struct DdsArgs {
    /// Domain id when not under the supervisor (loopback only).
    #[arg(long, default_value_t = 0)]
    pub domain: u32,
    /// Under the supervisor: which of the partition's networks to join.
    #[arg(long, value_enum, default_value_t = Network::Auto)]
    pub network: Network,
}

impl DdsArgs {
    pub fn config(&self) -> Result<DomainConfig, String> {
        let external = || DomainConfig::from_environment_external();
        let module = || DomainConfig::from_environment();
        let chosen = match self.network {
            Network::Auto => external().or_else(module),
            Network::Module => module(),
            Network::External => match external() {
                Some(c) => Some(c),
                None if partita_env::supervised() => {
                    return Err("--network external: this partition has no V-NIC on the inter-module network (it is not the I/O partition)".into())
                }
                None => None,
            },
        };
        match chosen {
            Some(c) => c.map_err(|e| e.to_string()),
            None => Ok(DomainConfig::loopback(self.domain)),
        }
    }
}
