//! The Cyclone DDS configuration of one partition, written to a file and handed over as `CYCLONEDDS_URI`.
use crate::error::{path_err, Result, SupervisorError};
use std::net::Ipv4Addr;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycloneConfig {
    /// The V-NIC's name inside the partition's namespace.
    pub interface: String,
    pub domain_id: u32,
    /// Unicast discovery peers: the other members of the network.
    pub peers: Vec<Ipv4Addr>,
    /// Multicast stays on the partition's own bridge when enabled; off by default.
    pub multicast: bool,
    pub max_participant_index: u32,
    /// Peers may lie outside 198.18.0.0/15: an uplink's, on the real network the file names.
    pub any_peers: bool,
    /// DDS Security on this domain (an uplink's), with the paths the member reads the files at.
    pub security: Option<partita_dds::SecurityFiles>,
    /// One receive thread for every socket of the domain instead of one more for its data (an I/O partition's:
    /// every thread of a partition runs at each thaw, docs/router.md, "Threads").
    pub one_receive_thread: bool,
}

impl CycloneConfig {
    pub fn new(interface: &str, domain_id: u32, peers: Vec<Ipv4Addr>) -> Self {
        CycloneConfig { interface: interface.into(), domain_id, peers, multicast: false, max_participant_index: 20, any_peers: false, security: None, one_receive_thread: false }
    }

    /// The domain an uplink carries, on its interface inside the namespace, with its peers and, where the file
    /// allows it, multicast on that interface.
    pub fn uplink(u: &partita_system::Uplink) -> Self {
        CycloneConfig { multicast: u.multicast, any_peers: true, ..Self::new(partita_system::UPLINK_NIC, u.domain.get(), u.peers.clone()) }
    }

    /// One XML document configuring several domains (an I/O partition: its module's and the external one),
    /// written by the DDS layer ([`partita_dds::config::document`]).
    pub fn to_xml_all(domains: &[CycloneConfig]) -> Result<String> {
        let configs = domains.iter().map(CycloneConfig::domain_config).collect::<Result<Vec<_>>>()?;
        let what = || format!("the Cyclone DDS configuration of {}", domains.iter().map(|d| d.interface.as_str()).collect::<Vec<_>>().join(", "));
        partita_dds::config::document(&configs).map_err(|source| SupervisorError::DdsConfig { what: what(), source })
    }

    pub fn to_xml(&self) -> Result<String> {
        Self::to_xml_all(std::slice::from_ref(self))
    }

    /// The DDS layer's settings for this domain on its named interface, so that every other knob is the one it
    /// writes too.
    fn domain_config(&self) -> Result<partita_dds::DomainConfig> {
        if self.interface.is_empty() || self.interface.len() > 15 || !self.interface.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(SupervisorError::Name { what: "interface", value: self.interface.clone(), rule: "is not a Linux interface name (1 to 15 characters, no `/`, space or `:`)" });
        }
        if let Some(p) = self.peers.iter().find(|p| !self.any_peers && !crate::vnet::is_project_address(**p)) {
            return Err(SupervisorError::Address { what: "peer", value: p.to_string() });
        }
        let peers = self.peers.iter().map(|p| p.to_string()).collect();
        Ok(partita_dds::DomainConfig::on_interface(self.domain_id, partita_dds::Interface::Named(self.interface.clone()), peers).with(|s| {
            s.multicast = self.multicast;
            s.max_participant_index = self.max_participant_index;
            s.security = self.security.clone();
            s.multiple_receive_threads = !self.one_receive_thread;
        }))
    }

    /// Writes the XML of `domains` to `path` and returns the `CYCLONEDDS_URI` value naming it.
    pub fn write_all(domains: &[CycloneConfig], path: &Path) -> Result<String> {
        std::fs::write(path, Self::to_xml_all(domains)?).map_err(path_err("write", path))?;
        Ok(format!("file://{}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_names_interface_domain_and_peers() {
        let c = CycloneConfig::new("vnic0", 7, vec![Ipv4Addr::new(198, 18, 1, 2), Ipv4Addr::new(198, 18, 1, 3)]);
        let x = c.to_xml().unwrap();
        assert!(x.contains("<Domain id=\"7\">"));
        assert!(x.contains("name=\"vnic0\""));
        assert!(x.contains("<AllowMulticast>false</AllowMulticast>"));
        assert!(x.contains("<Peer address=\"198.18.1.3\"/>"));
        assert!(x.contains("<ParticipantIndex>auto</ParticipantIndex>"));
        assert_eq!(x.matches("<CycloneDDS").count(), 1);
    }

    #[test]
    fn an_io_partition_gets_two_domains_on_two_interfaces() {
        let inner = CycloneConfig::new("vnic0", 1, vec![Ipv4Addr::new(198, 18, 1, 2)]);
        let outer = CycloneConfig::new("vnic1", 0, vec![Ipv4Addr::new(198, 19, 0, 9)]);
        let x = CycloneConfig::to_xml_all(&[inner, outer]).unwrap();
        assert!(x.contains("<Domain id=\"1\">") && x.contains("<Domain id=\"0\">"));
        assert!(x.find("vnic0").unwrap() < x.find("<Domain id=\"0\">").unwrap());
        assert_eq!(x.matches("</CycloneDDS>").count(), 1);
    }

    #[test]
    fn an_io_partitions_domains_have_one_receive_thread() {
        let c = CycloneConfig::new("vnic0", 1, vec![Ipv4Addr::new(198, 18, 1, 2)]);
        assert!(c.to_xml().unwrap().contains("<MultipleReceiveThreads>true</MultipleReceiveThreads>"));
        let io = CycloneConfig { one_receive_thread: true, ..c };
        assert!(io.to_xml().unwrap().contains("<MultipleReceiveThreads>false</MultipleReceiveThreads>"));
    }

    #[test]
    fn peers_outside_the_project_range_are_refused() {
        let c = CycloneConfig::new("vnic0", 0, vec![Ipv4Addr::new(10, 0, 0, 1)]);
        assert!(c.to_xml().is_err());
    }
}
