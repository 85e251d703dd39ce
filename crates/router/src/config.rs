//! The configuration a router starts from: a configuration validated by `partita-router-config` (its schema,
//! re-exported here) and, for each side, the DDS domain its participant joins.
//!
//! The schema has no DDS in it, so that the system description can validate an I/O partition's router table
//! without building Cyclone; what needs DDS, the domain configurations the supervisor made for an I/O
//! partition and the batching of a forwarder's writer, is added here.
use crate::batch::Batching;
use partita_dds::{DomainConfig, Interface};
pub use partita_router_config::{
    describe, parse_duration, ConfigError, DurabilityOverride, DurationError, ReliabilityOverride, RouteConfig, SideConfig, TopicOverride,
    Trigger, DEFAULT_BATCH_DELAY, EMBEDDED_SIDES, UPLINK_SIDE, MAX_BATCH_DELAY, MAX_STATS_PERIOD,
};
use std::collections::BTreeMap;
use std::path::Path;

/// The validated configuration as the file (or the system file's table) gives it.
pub type Validated = partita_router_config::RouterConfig;

/// A router's configuration: the validated configuration, which it reads as (through `Deref`, so callers
/// read `sides`, `routes` and the rest as before), and the domains the supervisor configured for some of its
/// sides.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    validated: Validated,
    /// By side name: the domain configuration the supervisor made (an I/O partition's `CYCLONEDDS_URI`), used
    /// instead of the side's interface, peers and multicast.
    supervisor_domains: BTreeMap<String, DomainConfig>,
}

impl From<Validated> for RouterConfig {
    fn from(validated: Validated) -> Self {
        RouterConfig { validated, supervisor_domains: BTreeMap::new() }
    }
}

impl std::ops::Deref for RouterConfig {
    type Target = Validated;
    fn deref(&self) -> &Validated {
        &self.validated
    }
}

impl std::ops::DerefMut for RouterConfig {
    fn deref_mut(&mut self) -> &mut Validated {
        &mut self.validated
    }
}

impl RouterConfig {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Self, Vec<ConfigError>> {
        Validated::load(path).map(Self::from)
    }

    /// Parses and validates configuration text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, Vec<ConfigError>> {
        Validated::parse(text, path).map(Self::from)
    }

    /// The routing service of an I/O partition started without a file: the router file the supervisor wrote
    /// into the partition's view (`PARTITA_ROUTER_FILE`, from the system file's `[module.partition.router]`, see
    /// [`Validated::for_io_partition`]), whose sides `module`, `network` and `uplink` join the domains the
    /// supervisor configured (`CYCLONEDDS_URI`, with `PARTITA_DOMAIN`, `PARTITA_EXTERNAL_DOMAIN` and
    /// `PARTITA_UPLINK_DOMAIN`). `None` outside an I/O partition.
    pub fn for_io_partition() -> Option<Result<Self, String>> {
        let file = partita_env::router_file()?;
        let validated = match Validated::load(Path::new(&file)) {
            Ok(v) => v,
            Err(errors) => return Some(Err(errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))),
        };
        let mut supervisor_domains = BTreeMap::new();
        let domains = [
            (EMBEDDED_SIDES[0], DomainConfig::from_environment()),
            (EMBEDDED_SIDES[1], DomainConfig::from_environment_external()),
            (UPLINK_SIDE, DomainConfig::from_environment_uplink()),
        ];
        for (side, domain) in domains {
            match domain {
                Some(Ok(d)) => {
                    supervisor_domains.insert(side.to_string(), d);
                }
                Some(Err(e)) => return Some(Err(e.to_string())),
                None => {}
            }
        }
        // The file and the environment come from one system file; a side on another domain than the one the
        // supervisor configured for it would join a domain on no V-NIC.
        for side in &validated.sides {
            if let Some(d) = supervisor_domains.get(&side.name).filter(|d| d.domain_id != side.domain) {
                return Some(Err(format!(
                    "{file}: side {}: domain {}, but the supervisor configured domain {} for it; route with the file the supervisor wrote",
                    side.name, side.domain, d.domain_id
                )));
            }
        }
        Some(Ok(RouterConfig { validated, supervisor_domains }))
    }

    /// The validated configuration.
    pub fn validated(&self) -> &Validated {
        &self.validated
    }

    /// The DDS domain the participant of `side` joins: the supervisor's, or one on the side's interface with
    /// its peers.
    pub fn domain_of(&self, side: &SideConfig) -> DomainConfig {
        if let Some(dc) = self.supervisor_domains.get(&side.name) {
            return dc.clone();
        }
        let iface = if side.interface == "lo" { Interface::Loopback } else { Interface::Named(side.interface.clone()) };
        // One receive thread per side (docs/router.md, "Threads"); applications in the router's process create
        // their domains as DomainConfig does by default, and a domain has one configuration per process.
        let own_process = !self.local_applications;
        DomainConfig::on_interface(side.domain, iface, side.peers.clone()).with(|s| {
            s.multicast = side.multicast;
            s.multiple_receive_threads = !own_process;
        })
    }

    /// What differs between this configuration and `new` that a running router cannot take over (see
    /// `Router::reload`): what [`Validated::fixed_differences`] names, and the domains the supervisor configured
    /// for the sides. Each as (field, what changed); empty when `new` can be reloaded.
    pub fn fixed_differences(&self, new: &RouterConfig) -> Vec<(String, String)> {
        let mut diff = self.validated.fixed_differences(&new.validated);
        if self.supervisor_domains != new.supervisor_domains {
            diff.push(("side".to_string(), "the domains the supervisor configured for the sides changed".to_string()));
        }
        diff
    }

    /// The batching of forwarded samples of a topic with override `ov`; `None` when its `batch_delay` is zero.
    pub fn batching(&self, ov: &TopicOverride) -> Option<Batching> {
        let max_delay = self.validated.batch_delay(ov);
        (!max_delay.is_zero()).then_some(Batching { max_delay, ..Batching::DEFAULT })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "[[side]]\nname = \"module\"\ndomain = 1\n[[side]]\nname = \"network\"\ndomain = 2\ninterface = \"veth0\"\n\
                        peers = [\"198.18.0.2\"]\n[[route]]\nfrom = \"module\"\nto = \"network\"\n\
                        [[route.topic]]\nname = \"video/*\"\nbatch_delay = \"0s\"\n";

    #[test]
    fn batching_follows_the_batch_delay_and_zero_turns_it_off() {
        let with = |v: &str| RouterConfig::parse(&format!("batch_delay = \"{v}\"\n{GOOD}"), Path::new("r.toml")).unwrap();
        let c = RouterConfig::parse(GOOD, Path::new("r.toml")).unwrap();
        assert_eq!(c.batching(&TopicOverride::default()), Some(Batching::DEFAULT), "batching is on by default");
        assert_eq!(c.batching(&c.routes[0].topics[0]), None, "the topic's own 0s");
        assert_eq!(with("0s").batching(&TopicOverride::default()), None);
        assert_eq!(with("250us").batching(&TopicOverride::default()).unwrap().max_delay, std::time::Duration::from_micros(250));
        assert_eq!(Batching::DEFAULT.max_delay, DEFAULT_BATCH_DELAY, "one default for the file and the engine");
    }

    #[test]
    fn a_side_without_a_supervisor_domain_joins_its_own_interface() {
        let c = RouterConfig::parse(GOOD, Path::new("r.toml")).unwrap();
        let network = c.domain_of(&c.sides[1]);
        assert_eq!(network.domain_id, 2);
        let settings = network.settings().expect("built from the side's keys");
        assert_eq!(settings.interface, Interface::Named("veth0".into()));
        assert_eq!(settings.peers, vec!["198.18.0.2".to_string()]);
        assert!(!settings.multicast);
        assert!(!settings.multiple_receive_threads, "one receive thread per side");
        assert_eq!(c.domain_of(&c.sides[0]), DomainConfig::loopback(1).with(|s| s.multiple_receive_threads = false));
        // With applications in the router's process, its domains are configured as theirs.
        let mut local = c.clone();
        local.local_applications = true;
        assert_eq!(local.domain_of(&local.sides[0]), DomainConfig::loopback(1));
    }
}
