//! partita-env: the environment the supervisor gives every program it starts in a partition or native node,
//! in one place. The supervisor writes it with [`PartitionEnv::vars`]; partita's own programs (the routing
//! service, the recorder, the monitor) and the DDS layer read it with the functions here. Unmodified DDS
//! programs need only [`CYCLONEDDS_URI`] (and `$PARTITA_DOMAIN` in their arguments, if they take a domain).
//!
//! | variable | value |
//! |---|---|
//! | `PARTITA_PARTITION` | the partition's (or node's) name, unique in its system |
//! | `PARTITA_MODULE` | its module's name (a node's own name) |
//! | `PARTITA_DOMAIN` | the DDS domain id of its first V-NIC: the module's V-NETWORK, or the inter-module network for a node |
//! | `PARTITA_EXTERNAL_DOMAIN` | I/O partitions only: the inter-module network's domain id |
//! | `PARTITA_UPLINK_DOMAIN` | I/O partitions with an uplink: the DDS domain carried on it |
//! | `PARTITA_ROUTER_FILE` | I/O partitions: the path of the routing service's whole configuration, a router file (docs/router.md) the supervisor wrote from the system file |
//! | `PARTITA_PORTS` | partitions with ARINC 653 ports: each port's channel memory and geometry ([`ports`]) |
//! | `PARTITA_CONTROL` | planned process partitions: the number of the inherited descriptor of the partition's control page (modes, plan, requests to the supervisor; `partita_ports::control`) |
//! | `PARTITA_STATE_DIR` | partitions: their private writable directory, kept across runs |
//! | `CYCLONEDDS_URI` | `file://` of the Cyclone DDS configuration the supervisor wrote: every domain on its V-NIC |
//! | `FASTRTPS_DEFAULT_PROFILES_FILE` | the Fast DDS XML profile the supervisor wrote: its V-NICs only, unicast peers, no multicast, no shared memory |
#![forbid(unsafe_code)]
pub mod ports;
pub mod programs;

/// The partition's or node's name.
pub const PARTITION: &str = "PARTITA_PARTITION";
/// Its module's name.
pub const MODULE: &str = "PARTITA_MODULE";
/// The DDS domain of its first V-NIC.
pub const DOMAIN: &str = "PARTITA_DOMAIN";
/// An I/O partition's inter-module domain.
pub const EXTERNAL_DOMAIN: &str = "PARTITA_EXTERNAL_DOMAIN";
/// An I/O partition's uplink domain.
pub const UPLINK_DOMAIN: &str = "PARTITA_UPLINK_DOMAIN";
/// A partition's private writable directory (the same path on the host and inside).
pub const STATE_DIR: &str = "PARTITA_STATE_DIR";
/// Where an I/O partition's routing service finds its configuration (a router file).
pub const ROUTER_FILE: &str = "PARTITA_ROUTER_FILE";
/// The inherited descriptor (its number, in decimal) of the partition's control page: a memory file of 4096
/// bytes the supervisor created, through which the partition reads its mode and plan and posts requests
/// (`partita_ports::control` has its layout).
pub const CONTROL: &str = "PARTITA_CONTROL";
/// Cyclone DDS's own variable: where its configuration is.
pub const CYCLONEDDS_URI: &str = "CYCLONEDDS_URI";
/// eProsima Fast DDS's (2.x) own variable: the XML file whose default profile its participants take.
pub const FASTDDS_PROFILES_FILE: &str = "FASTRTPS_DEFAULT_PROFILES_FILE";
/// Every variable partita sets starts with this; a system file may not set such variables itself.
pub const RESERVED_PREFIX: &str = "PARTITA_";

/// Whether a system file may set `name` in a partition's environment: not the supervisor's own variables.
pub fn is_reserved(name: &str) -> bool {
    name.starts_with(RESERVED_PREFIX) || name == CYCLONEDDS_URI || name == FASTDDS_PROFILES_FILE
}

/// A variable that is set but does not hold what the supervisor writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}={value:?} is not a DDS domain id; the supervisor sets it to a number 0..=232")]
pub struct BadDomain {
    pub name: &'static str,
    pub value: String,
}

/// What the supervisor tells a program about where it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionEnv {
    pub partition: String,
    pub module: String,
    pub domain: u32,
    pub external_domain: Option<u32>,
    /// I/O partitions with an uplink: the DDS domain carried on it.
    pub uplink_domain: Option<u32>,
    /// I/O partitions: the path of their router file, as the partition sees it.
    pub router_file: Option<String>,
    /// `file://...` of the generated DDS configuration.
    pub cyclonedds_uri: String,
    /// The generated Fast DDS profile's path; `None` where there is none (a VM partition's guest).
    pub fastdds_profile: Option<String>,
    /// A partition's private writable directory (none for a native node).
    pub state_dir: Option<String>,
    /// Its ARINC 653 ports (`PARTITA_PORTS`), each with the descriptors it inherits.
    pub ports: Vec<ports::PortEntry>,
}

impl PartitionEnv {
    /// The variables, in the order the supervisor sets them.
    pub fn vars(&self) -> Vec<(String, String)> {
        let mut v = vec![
            (PARTITION.to_string(), self.partition.clone()),
            (MODULE.to_string(), self.module.clone()),
            (DOMAIN.to_string(), self.domain.to_string()),
            (CYCLONEDDS_URI.to_string(), self.cyclonedds_uri.clone()),
        ];
        if let Some(p) = &self.fastdds_profile {
            v.push((FASTDDS_PROFILES_FILE.to_string(), p.clone()));
        }
        if let Some(d) = self.external_domain {
            v.push((EXTERNAL_DOMAIN.to_string(), d.to_string()));
        }
        if let Some(d) = self.uplink_domain {
            v.push((UPLINK_DOMAIN.to_string(), d.to_string()));
        }
        if let Some(t) = &self.router_file {
            v.push((ROUTER_FILE.to_string(), t.clone()));
        }
        if let Some(d) = &self.state_dir {
            v.push((STATE_DIR.to_string(), d.clone()));
        }
        if !self.ports.is_empty() {
            v.push((ports::PORTS.to_string(), ports::format_ports(&self.ports)));
        }
        v
    }
}

/// The partition's name when running under the supervisor.
pub fn partition() -> Option<String> {
    std::env::var(PARTITION).ok()
}

/// The module's name when running under the supervisor.
pub fn module() -> Option<String> {
    std::env::var(MODULE).ok()
}

/// Whether this process was started by the supervisor.
pub fn supervised() -> bool {
    std::env::var_os(PARTITION).is_some()
}

/// `PARTITA_CONTROL` holds something other than a descriptor number of 3 or more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("PARTITA_CONTROL={value:?} is not a descriptor number; the supervisor sets it to the number (3 or more) of the partition's control page")]
pub struct BadControl {
    pub value: String,
}

/// The descriptor number of the partition's control page; `None` when `PARTITA_CONTROL` is unset (outside a
/// planned process partition).
pub fn control_fd() -> Option<Result<i32, BadControl>> {
    std::env::var_os(CONTROL).map(|v| parse_control(&v.to_string_lossy()))
}

/// The value of `PARTITA_CONTROL` as a descriptor number.
pub fn parse_control(value: &str) -> Result<i32, BadControl> {
    match value.parse::<i32>() {
        Ok(fd) if fd >= 3 => Ok(fd),
        _ => Err(BadControl { value: value.to_string() }),
    }
}

/// The supervisor's DDS configuration and the domain of the first V-NIC; `None` outside a partition.
pub fn domain() -> Option<Result<(String, u32), BadDomain>> {
    uri_and_domain(DOMAIN)
}

/// The supervisor's DDS configuration and the inter-module domain; `None` outside an I/O partition.
pub fn external_domain() -> Option<Result<(String, u32), BadDomain>> {
    uri_and_domain(EXTERNAL_DOMAIN)
}

/// The supervisor's DDS configuration and the uplink's domain; `None` outside an I/O partition with an uplink.
pub fn uplink_domain() -> Option<Result<(String, u32), BadDomain>> {
    uri_and_domain(UPLINK_DOMAIN)
}

/// A partition's private writable directory, when running under the supervisor.
pub fn state_dir() -> Option<String> {
    std::env::var(STATE_DIR).ok()
}

/// The path of the router file the supervisor wrote for an I/O partition.
pub fn router_file() -> Option<String> {
    std::env::var(ROUTER_FILE).ok()
}

fn uri_and_domain(name: &'static str) -> Option<Result<(String, u32), BadDomain>> {
    let uri = std::env::var(CYCLONEDDS_URI).ok()?;
    let value = std::env::var(name).ok()?;
    Some(match value.parse::<u32>() {
        Ok(d) if d <= 232 => Ok((uri, d)),
        _ => Err(BadDomain { name, value }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supervisors_variables_are_reserved_and_others_are_not() {
        let all = PartitionEnv { partition: "p".into(), module: "m".into(), domain: 1, external_domain: Some(0), uplink_domain: Some(2), router_file: Some("/x".into()), cyclonedds_uri: "file:///x".into(), fastdds_profile: None, state_dir: Some("/s".into()), ports: Vec::new() };
        for v in all.vars() {
            assert!(is_reserved(&v.0), "{}", v.0);
        }
        assert!(!is_reserved("RUST_LOG") && !is_reserved("partita_x"));
    }

    #[test]
    fn the_control_variable_is_reserved_and_names_a_descriptor_of_3_or_more() {
        assert!(is_reserved(CONTROL));
        assert_eq!(parse_control("7"), Ok(7));
        for bad in ["", "2", "-1", "x", "99999999999", " 7"] {
            assert!(parse_control(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_io_partitions_get_the_external_domain_and_router() {
        let e = PartitionEnv { partition: "p".into(), module: "m".into(), domain: 3, external_domain: None, uplink_domain: None, router_file: None, cyclonedds_uri: "file:///x".into(), fastdds_profile: None, state_dir: None, ports: Vec::new() };
        let names: Vec<String> = e.vars().into_iter().map(|(k, _)| k).collect();
        assert_eq!(names, vec![PARTITION, MODULE, DOMAIN, CYCLONEDDS_URI]);
        assert!(e.vars().contains(&(DOMAIN.to_string(), "3".to_string())));
    }
}
