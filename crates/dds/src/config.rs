//! Explicit participant configuration.
//!
//! Cyclone DDS, left to its defaults, picks the machine's "best" interface and multicasts on it. partita never
//! lets it: every domain is created from a configuration built here, naming the interface, switching multicast
//! off (or limiting it to an interface partita owns) and listing unicast peers.
use crate::error::{DdsError, Result};
use std::fmt::Write as _;

/// The network a participant binds to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interface {
    /// The loopback interface (`lo`, 127.0.0.1).
    Loopback,
    /// An interface by name, e.g. a partition's V-NIC inside its network namespace.
    Named(String),
}

/// How a domain of this process is configured. Build one with [`DomainConfig::loopback`] or
/// [`DomainConfig::on_interface`], or take the supervisor's file with [`DomainConfig::from_environment`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainConfig {
    pub domain_id: u32,
    source: Source,
    /// See [`DomainConfig::probing_peers_forever`].
    probe_peers_forever: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Built(NetworkSettings),
    /// A `CYCLONEDDS_URI` value written by the supervisor for a partition.
    Uri(String),
}

/// The knobs partita sets explicitly on every domain it builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSettings {
    pub interface: Interface,
    pub multicast: bool,
    /// Unicast discovery peers (IPv4 addresses or host names).
    pub peers: Vec<String>,
    /// Highest participant index probed on each peer when multicast is off.
    pub max_participant_index: u32,
    /// Deliver data on the receive thread instead of handing it to a delivery thread (saves a thread
    /// hand-off on every sample; Cyclone's `Internal/SynchronousDeliveryPriorityThreshold`, whose default of 0
    /// already does this for writers of transport priority >= 0).
    pub synchronous_delivery: bool,
    /// Data arriving on the shared unicast socket gets a receive thread of its own that blocks in `recvmsg`,
    /// instead of one thread multiplexing every socket (`epoll_wait` then `recvmsg` for each datagram):
    /// Cyclone's `Internal/MultipleReceiveThreads`, off by default because firewalls may block the datagram
    /// Cyclone sends itself to stop that thread; partita's networks are loopback and its own bridges.
    pub multiple_receive_threads: bool,
    /// Largest RTPS message Cyclone builds (`General/MaxMessageSize`, Cyclone's default 14,720 B).
    pub max_message_size: Option<u32>,
    /// Samples larger than this travel in fragments of this size (`General/FragmentSize`, Cyclone's default
    /// 1,344 B, sized for a 1,500-byte Ethernet MTU).
    pub fragment_size: Option<u32>,
    /// DDS Security's built-in plugins on this domain; `None`: plain DDS.
    pub security: Option<SecurityFiles>,
}

/// The files of DDS Security's built-in plugins (authentication, access control; cryptography as the governance
/// document says), as paths this process can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityFiles {
    pub identity_ca: String,
    pub identity_certificate: String,
    pub private_key: String,
    pub permissions_ca: String,
    pub governance: String,
    pub permissions: String,
}

impl SecurityFiles {
    /// Refuses a path that is not absolute or could break the XML it is written into (`<`, `>`, `&`, quotes,
    /// control characters): both Cyclone's configuration and Fast DDS's profile carry these paths.
    pub fn check(&self) -> Result<()> {
        let all = [&self.identity_ca, &self.identity_certificate, &self.private_key, &self.permissions_ca, &self.governance, &self.permissions];
        match all.iter().find(|f| !f.starts_with('/') || f.chars().any(|c| "<>&\"'".contains(c) || c.is_control())) {
            Some(bad) => Err(DdsError::Config(format!("security file {bad:?} is not an absolute path without <, >, &, quotes"))),
            None => Ok(()),
        }
    }
}

/// Message and fragment size on loopback, whose MTU is 64 KiB: a sample of up to about 62 KiB travels as one
/// datagram instead of 46 fragments of 1,344 B, which a router must reassemble and cut up again (measured with
/// `partita bench rr --transport dds,dds-routed --size 60k`: about 2.4× faster direct and through the router).
pub const LOOPBACK_MAX_MESSAGE_SIZE: u32 = 65_500;
pub const LOOPBACK_FRAGMENT_SIZE: u32 = 64_000;

impl DomainConfig {
    /// Loopback only, no multicast, peer 127.0.0.1: for tests and single-host benchmarks.
    pub fn loopback(domain_id: u32) -> Self {
        Self::on_interface(domain_id, Interface::Loopback, vec!["127.0.0.1".into()])
    }

    /// One named interface, no multicast, the given unicast peers. On loopback, messages and fragments as large
    /// as its MTU allows; elsewhere Cyclone's sizes for a 1,500-byte MTU.
    pub fn on_interface(domain_id: u32, interface: Interface, peers: Vec<String>) -> Self {
        let lo = interface == Interface::Loopback;
        DomainConfig {
            domain_id,
            source: Source::Built(NetworkSettings {
                interface,
                multicast: false,
                peers,
                max_participant_index: 20,
                synchronous_delivery: true,
                multiple_receive_threads: true,
                max_message_size: lo.then_some(LOOPBACK_MAX_MESSAGE_SIZE),
                fragment_size: lo.then_some(LOOPBACK_FRAGMENT_SIZE),
                security: None,
            }),
            probe_peers_forever: false,
        }
    }

    /// The configuration the supervisor handed to this process through `CYCLONEDDS_URI` (inside a partition),
    /// with the domain from `PARTITA_DOMAIN`. `None` when not running under the supervisor.
    pub fn from_environment() -> Option<Result<Self>> {
        Self::from_environment_domain(partita_env::domain())
    }

    /// The supervisor's `CYCLONEDDS_URI` with one of its domains, as `partita_env` read them.
    fn from_environment_domain(found: Option<std::result::Result<(String, u32), partita_env::BadDomain>>) -> Option<Result<Self>> {
        Some(match found? {
            Ok((uri, domain_id)) => Ok(DomainConfig { domain_id, source: Source::Uri(uri), probe_peers_forever: false }),
            Err(e) => Err(DdsError::Config(e.to_string())),
        })
    }

    /// The inter-module network's domain of an I/O partition (`PARTITA_EXTERNAL_DOMAIN`, configured in the same
    /// `CYCLONEDDS_URI` file as the module's domain). `None` outside an I/O partition.
    pub fn from_environment_external() -> Option<Result<Self>> {
        Self::from_environment_domain(partita_env::external_domain())
    }

    /// The uplink's domain of an I/O partition that owns one (`PARTITA_UPLINK_DOMAIN`, in the same
    /// `CYCLONEDDS_URI` file). `None` without an uplink.
    pub fn from_environment_uplink() -> Option<Result<Self>> {
        Self::from_environment_domain(partita_env::uplink_domain())
    }

    /// The partition's configuration when under the supervisor, else loopback on `fallback_domain`.
    pub fn from_environment_or_loopback(fallback_domain: u32) -> Result<Self> {
        Self::from_environment().unwrap_or_else(|| Ok(Self::loopback(fallback_domain)))
    }

    /// Changes the network settings of a built configuration (no effect on a supervisor-provided one).
    pub fn with(mut self, f: impl FnOnce(&mut NetworkSettings)) -> Self {
        if let Source::Built(settings) = &mut self.source {
            f(settings);
        }
        self
    }

    pub fn settings(&self) -> Option<&NetworkSettings> {
        match &self.source {
            Source::Built(s) => Some(s),
            Source::Uri(_) => None,
        }
    }

    /// The configuration with its unicast peers probed for as long as the participant lives. Cyclone stops
    /// probing a configured peer after 30 s without an answer (`Discovery/InitialLocatorPruneDelay`), so a
    /// program that starts there later (a partition restarted, a Fast DDS program, which announces itself only
    /// to its own peers) is never found. For partita's own long-lived participants (the router's): the element
    /// is unknown to older Cyclone releases (Debian's ddsperf, 0.10.2, refuses a file holding it), so it is
    /// added to this process's configuration, never written into the files partitions get.
    pub fn probing_peers_forever(mut self) -> Self {
        self.probe_peers_forever = true;
        self
    }

    /// The configuration string handed to `dds_create_domain`.
    pub fn to_cyclone_config(&self) -> Result<String> {
        let base = match &self.source {
            Source::Uri(uri) => uri.clone(),
            Source::Built(s) => s.to_xml()?,
        };
        Ok(if self.probe_peers_forever {
            // Cyclone reads a comma-separated list of files and fragments, each merged over the ones before.
            format!("{base},<CycloneDDS><Domain id=\"any\"><Discovery><InitialLocatorPruneDelay>inf</InitialLocatorPruneDelay></Discovery></Domain></CycloneDDS>")
        } else {
            base
        })
    }
}

/// The Cyclone DDS configuration file of several domains, one `<Domain>` each with its own settings: the one
/// writer of the files partita gives its partitions, nodes and VM guests (`CYCLONEDDS_URI`). Every configuration
/// must be built from settings (not a supervisor-provided URI).
pub fn document(domains: &[DomainConfig]) -> Result<String> {
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CycloneDDS xmlns=\"https://cdds.io/config\">\n");
    for d in domains {
        let settings = d.settings().ok_or_else(|| DdsError::Config(format!("domain {}: a configuration read from CYCLONEDDS_URI cannot be written again", d.domain_id)))?;
        x.push_str(&settings.domain_xml(&d.domain_id.to_string())?);
    }
    x.push_str("</CycloneDDS>\n");
    Ok(x)
}

impl NetworkSettings {
    /// Cyclone DDS XML for these settings. Valid for any domain id (`Domain id="any"`): the domain id itself is
    /// given to `dds_create_domain`.
    pub fn to_xml(&self) -> Result<String> {
        Ok(format!("<CycloneDDS>{}</CycloneDDS>", self.domain_xml("any")?))
    }

    /// The `<Domain id="ID">…</Domain>` element for these settings, to combine several domains in one
    /// configuration file (a partition on two networks).
    pub fn domain_xml(&self, id: &str) -> Result<String> {
        if id != "any" && id.parse::<u32>().map_or(true, |d| d > 232) {
            return Err(DdsError::Config(format!("domain id {id:?} is neither \"any\" nor 0..=232")));
        }
        let iface = match &self.interface {
            Interface::Loopback => "lo".to_string(),
            Interface::Named(n) => {
                if n.is_empty() || n.len() > 15 || !n.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c)) {
                    return Err(DdsError::Config(format!(
                        "interface name {n:?} is not a Linux interface name (1 to 15 of [A-Za-z0-9-_.@])"
                    )));
                }
                n.clone()
            }
        };
        for p in &self.peers {
            if p.is_empty() || !p.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c)) {
                return Err(DdsError::Config(format!("peer {p:?} is not an address or host name")));
            }
        }
        if !self.multicast && self.peers.is_empty() {
            return Err(DdsError::Config(
                "multicast is off and there are no unicast peers: nothing could be discovered; add peers".into(),
            ));
        }
        let mut x = String::new();
        let _ = write!(x, "<Domain id=\"{id}\"><General><Interfaces>");
        let _ = write!(x, "<NetworkInterface name=\"{iface}\" multicast=\"{}\"/>", self.multicast);
        x.push_str("</Interfaces>");
        let _ = write!(x, "<AllowMulticast>{}</AllowMulticast>", if self.multicast { "true" } else { "false" });
        if let Some(m) = self.max_message_size {
            let _ = write!(x, "<MaxMessageSize>{m}B</MaxMessageSize>");
        }
        if let Some(f) = self.fragment_size {
            let _ = write!(x, "<FragmentSize>{f}B</FragmentSize>");
        }
        x.push_str("</General><Discovery>");
        if !self.multicast {
            let _ = write!(
                x,
                "<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>{}</MaxAutoParticipantIndex>",
                self.max_participant_index
            );
        }
        if !self.peers.is_empty() {
            x.push_str("<Peers>");
            for p in &self.peers {
                let _ = write!(x, "<Peer address=\"{p}\"/>");
            }
            x.push_str("</Peers>");
        }
        x.push_str("</Discovery>");
        // Cyclone delivers synchronously from the receive thread when a writer's transport priority is at
        // least the threshold and its latency budget at most the bound; stating both keeps the choice explicit.
        let threshold = if self.synchronous_delivery { 0 } else { i32::MAX };
        let _ = write!(
            x,
            "<Internal><SynchronousDeliveryPriorityThreshold>{threshold}</SynchronousDeliveryPriorityThreshold>\
             <SynchronousDeliveryLatencyBound>inf</SynchronousDeliveryLatencyBound>\
             <MultipleReceiveThreads>{}</MultipleReceiveThreads></Internal>",
            self.multiple_receive_threads
        );
        if let Some(s) = &self.security {
            s.check()?;
            let _ = write!(
                x,
                "<Security><Authentication><IdentityCertificate>file:{}</IdentityCertificate><IdentityCA>file:{}</IdentityCA>\
                 <PrivateKey>file:{}</PrivateKey></Authentication><AccessControl><Governance>file:{}</Governance>\
                 <PermissionsCA>file:{}</PermissionsCA><Permissions>file:{}</Permissions></AccessControl></Security>",
                s.identity_certificate, s.identity_ca, s.private_key, s.governance, s.permissions_ca, s.permissions
            );
        }
        x.push_str("</Domain>");
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_config_names_lo_and_disables_multicast() {
        let x = DomainConfig::loopback(7).to_cyclone_config().unwrap();
        assert!(x.contains("<NetworkInterface name=\"lo\" multicast=\"false\"/>"), "{x}");
        assert!(x.contains("<AllowMulticast>false</AllowMulticast>"), "{x}");
        assert!(x.contains("<Peer address=\"127.0.0.1\"/>"), "{x}");
    }

    #[test]
    fn a_secure_domain_names_its_security_files_and_refuses_unsafe_paths() {
        let files = SecurityFiles {
            identity_ca: "/p/ca.pem".into(),
            identity_certificate: "/p/me.pem".into(),
            private_key: "/p/me.key".into(),
            permissions_ca: "/p/ca.pem".into(),
            governance: "/p/governance.p7s".into(),
            permissions: "/p/me.permissions.p7s".into(),
        };
        let secure = |f: SecurityFiles| DomainConfig::on_interface(2, Interface::Named("uplink0".into()), vec!["192.0.2.2".into()]).with(|s| s.security = Some(f)).to_cyclone_config();
        let x = secure(files.clone()).unwrap();
        for part in ["<IdentityCertificate>file:/p/me.pem</IdentityCertificate>", "<IdentityCA>file:/p/ca.pem</IdentityCA>", "<PrivateKey>file:/p/me.key</PrivateKey>", "<Governance>file:/p/governance.p7s</Governance>", "<Permissions>file:/p/me.permissions.p7s</Permissions>"] {
            assert!(x.contains(part), "{part} in {x}");
        }
        assert!(x.find("<Security>").unwrap() < x.find("</Domain>").unwrap());
        assert!(!DomainConfig::loopback(1).to_cyclone_config().unwrap().contains("<Security>"));
        assert!(secure(SecurityFiles { private_key: "/p/<x>".into(), ..files.clone() }).is_err());
        assert!(secure(SecurityFiles { governance: "relative.p7s".into(), ..files }).is_err());
    }

    #[test]
    fn large_fragments_only_on_loopback() {
        let lo = DomainConfig::loopback(7).to_cyclone_config().unwrap();
        assert!(lo.contains("<MaxMessageSize>65500B</MaxMessageSize><FragmentSize>64000B</FragmentSize>"), "{lo}");
        let bridge = DomainConfig::on_interface(7, Interface::Named("pt-br0".into()), vec!["198.18.0.1".into()]);
        let x = bridge.to_cyclone_config().unwrap();
        assert!(!x.contains("FragmentSize") && !x.contains("MaxMessageSize"), "{x}");
    }

    #[test]
    fn bad_interface_and_peer_are_rejected() {
        let bad = DomainConfig::on_interface(0, Interface::Named("a\"><x".into()), vec!["1.2.3.4".into()]);
        assert!(bad.to_cyclone_config().is_err());
        let bad = DomainConfig::on_interface(0, Interface::Loopback, vec!["<evil>".into()]);
        assert!(bad.to_cyclone_config().is_err());
        let nothing = DomainConfig::on_interface(0, Interface::Loopback, vec![]);
        assert!(!DomainConfig::loopback(1).to_cyclone_config().unwrap().contains("InitialLocatorPruneDelay"), "not in files others read");
        let forever = DomainConfig::loopback(1).probing_peers_forever().to_cyclone_config().unwrap();
        assert!(forever.ends_with(",<CycloneDDS><Domain id=\"any\"><Discovery><InitialLocatorPruneDelay>inf</InitialLocatorPruneDelay></Discovery></Domain></CycloneDDS>"), "{forever}");
        assert!(matches!(nothing.to_cyclone_config(), Err(DdsError::Config(_))));
    }
}
