//! The same explicit network settings for eProsima Fast DDS programs: an XML profile, marked as the default
//! one, that a Fast DDS 2.x program loads from `FASTRTPS_DEFAULT_PROFILES_FILE` without any change to its
//! code. Left to its defaults Fast DDS binds every interface, multicasts discovery on them and shares memory
//! with every Fast DDS program of the host; the profile allows one address, no multicast, no shared memory,
//! and lists the unicast peers to discover.
use crate::error::{DdsError, Result};
use std::fmt::Write as _;
use std::net::Ipv4Addr;

/// The environment variable Fast DDS 2.x reads its default profile from.
pub const PROFILES_VARIABLE: &str = "FASTRTPS_DEFAULT_PROFILES_FILE";

/// A Fast DDS participant's network: the addresses it binds (its V-NICs', or 127.0.0.1) and its peers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastDdsProfile {
    pub addresses: Vec<Ipv4Addr>,
    /// Unicast discovery peers; Fast DDS sends its announcements to each, for participant ids 0 to
    /// `max_participant_index` (the ports Cyclone's participants use too).
    pub peers: Vec<Ipv4Addr>,
    pub max_participant_index: u32,
}

impl FastDdsProfile {
    /// Loopback only: for tests and single-host benchmarks.
    pub fn loopback() -> Self {
        FastDdsProfile { addresses: vec![Ipv4Addr::LOCALHOST], peers: vec![Ipv4Addr::LOCALHOST], max_participant_index: 20 }
    }

    /// The profile as XML.
    pub fn to_xml(&self) -> Result<String> {
        if self.addresses.is_empty() {
            return Err(DdsError::Config("a Fast DDS profile needs an address to bind".into()));
        }
        if self.peers.is_empty() {
            return Err(DdsError::Config("a Fast DDS profile without unicast peers could discover nothing (multicast is off); add peers".into()));
        }
        let locator = |a: &Ipv4Addr| format!("<locator><udpv4><address>{a}</address></udpv4></locator>");
        let own: String = self.addresses.iter().map(locator).collect();
        let allowed: String = self.addresses.iter().map(|a| format!("<address>{a}</address>")).collect();
        let mut x = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<dds xmlns=\"http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles\"><profiles>",
        );
        let _ = write!(
            x,
            "<transport_descriptors><transport_descriptor><transport_id>partita-udp</transport_id><type>UDPv4</type>\
             <maxInitialPeersRange>{}</maxInitialPeersRange><interfaceWhiteList>{allowed}</interfaceWhiteList>\
             </transport_descriptor></transport_descriptors>",
            self.max_participant_index + 1,
        );
        x.push_str("<participant profile_name=\"partita\" is_default_profile=\"true\"><rtps>");
        x.push_str("<useBuiltinTransports>false</useBuiltinTransports><userTransports><transport_id>partita-udp</transport_id></userTransports>");
        let _ = write!(x, "<builtin><metatrafficUnicastLocatorList>{own}</metatrafficUnicastLocatorList><initialPeersList>");
        for p in &self.peers {
            x.push_str(&locator(p));
        }
        let _ = write!(x, "</initialPeersList></builtin><defaultUnicastLocatorList>{own}</defaultUnicastLocatorList>");
        x.push_str("</rtps></participant>");
        // Data sharing (Fast DDS's shared-memory delivery between its own writers and readers on one host) off
        // by default: partitions never share memory.
        for kind in ["data_writer", "data_reader"] {
            let _ = write!(x, "<{kind} profile_name=\"partita-{kind}\" is_default_profile=\"true\"><qos><data_sharing><kind>OFF</kind></data_sharing></qos></{kind}>");
        }
        x.push_str("</profiles></dds>\n");
        Ok(x)
    }
}

impl FastDdsProfile {
    /// The profile with DDS Security's built-in plugins on (PKI-DH authentication, Access-Permissions access
    /// control, AES-GCM-GMAC cryptography), for a Fast DDS program on the far side of a secure uplink: every
    /// participant of the program it configures authenticates with `files`. (Fast DDS 2.x has one default
    /// profile for all of a program's participants: partita writes none with security for its own members,
    /// whose V-NETWORK side stays plain.)
    pub fn to_xml_secure(&self, files: &crate::SecurityFiles) -> Result<String> {
        let x = self.to_xml()?;
        files.check()?;
        let mut props = String::from("<propertiesPolicy><properties>");
        for (name, value) in [
            ("dds.sec.auth.plugin", "builtin.PKI-DH".to_string()),
            ("dds.sec.auth.builtin.PKI-DH.identity_ca", format!("file://{}", files.identity_ca)),
            ("dds.sec.auth.builtin.PKI-DH.identity_certificate", format!("file://{}", files.identity_certificate)),
            ("dds.sec.auth.builtin.PKI-DH.private_key", format!("file://{}", files.private_key)),
            ("dds.sec.access.plugin", "builtin.Access-Permissions".to_string()),
            ("dds.sec.access.builtin.Access-Permissions.permissions_ca", format!("file://{}", files.permissions_ca)),
            ("dds.sec.access.builtin.Access-Permissions.governance", format!("file://{}", files.governance)),
            ("dds.sec.access.builtin.Access-Permissions.permissions", format!("file://{}", files.permissions)),
            ("dds.sec.crypto.plugin", "builtin.AES-GCM-GMAC".to_string()),
        ] {
            let _ = write!(props, "<property><name>{name}</name><value>{value}</value></property>");
        }
        props.push_str("</properties></propertiesPolicy>");
        let anchor = "<participant profile_name=\"partita\" is_default_profile=\"true\"><rtps>";
        Ok(x.replacen(anchor, &format!("{anchor}{props}"), 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secure_profile_turns_the_builtin_plugins_on_with_its_files() {
        let p = FastDdsProfile { addresses: vec!["198.19.200.2".parse().unwrap()], peers: vec!["198.19.200.1".parse().unwrap()], max_participant_index: 20 };
        let f = crate::SecurityFiles {
            identity_ca: "/p/ca.pem".into(),
            identity_certificate: "/p/me.pem".into(),
            private_key: "/p/me.key".into(),
            permissions_ca: "/p/ca.pem".into(),
            governance: "/p/governance.p7s".into(),
            permissions: "/p/me.permissions.p7s".into(),
        };
        let x = p.to_xml_secure(&f).unwrap();
        assert!(x.contains("<name>dds.sec.auth.plugin</name><value>builtin.PKI-DH</value>"), "{x}");
        assert!(x.contains("<name>dds.sec.access.builtin.Access-Permissions.permissions</name><value>file:///p/me.permissions.p7s</value>"), "{x}");
        assert!(x.contains("<name>dds.sec.crypto.plugin</name><value>builtin.AES-GCM-GMAC</value>"), "{x}");
        assert_eq!(x.matches("<propertiesPolicy>").count(), 1);
        assert!(!p.to_xml().unwrap().contains("propertiesPolicy"));
        assert!(p.to_xml_secure(&crate::SecurityFiles { governance: "g.p7s".into(), ..f }).is_err());
    }

    #[test]
    fn the_profile_binds_one_address_without_multicast_or_shared_memory() {
        let p = FastDdsProfile { addresses: vec!["198.18.1.2".parse().unwrap()], peers: vec!["198.18.1.1".parse().unwrap(), "198.18.1.3".parse().unwrap()], max_participant_index: 20 };
        let x = p.to_xml().unwrap();
        assert!(x.contains("is_default_profile=\"true\""), "{x}");
        assert!(x.contains("<useBuiltinTransports>false</useBuiltinTransports>"), "no built-in UDP or shared memory: {x}");
        assert!(x.contains("<interfaceWhiteList><address>198.18.1.2</address></interfaceWhiteList>"), "{x}");
        assert!(x.contains("<initialPeersList><locator><udpv4><address>198.18.1.1</address></udpv4></locator><locator><udpv4><address>198.18.1.3</address></udpv4></locator></initialPeersList>"), "{x}");
        assert!(!x.contains("ulticast</"), "no multicast locator: {x}");
        assert!(x.contains("<maxInitialPeersRange>21</maxInitialPeersRange>"), "{x}");
        assert_eq!(x.matches("<data_sharing><kind>OFF</kind></data_sharing>").count(), 2, "{x}");
        let lonely = FastDdsProfile { peers: vec![], ..p.clone() };
        assert!(matches!(lonely.to_xml(), Err(DdsError::Config(_))));
        let nowhere = FastDdsProfile { addresses: vec![], ..p };
        assert!(matches!(nowhere.to_xml(), Err(DdsError::Config(_))));
        let lonely = FastDdsProfile { addresses: vec![], peers: vec![], max_participant_index: 1 };
        assert!(matches!(lonely.to_xml(), Err(DdsError::Config(_))));
    }
}
