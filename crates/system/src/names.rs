//! Names partita gives the things it creates on the host, derived only from the system's name and the
//! positions/names in it, so `partita down` finds leftovers by prefix:
//! - Linux interfaces: `pt<tag>...`, at most 15 characters, `<tag>` = 4 hex digits (FNV-1a of the system name):
//!   module bridges `pt<tag>m<module>`, the inter-module bridge `pt<tag>x`, V-NICs `pt<tag><module>n<partition>`,
//!   I/O partitions' inter-module veths `pt<tag><module>x<partition>`, native nodes' veths `pt<tag>n<node>`;
//! - cgroups: `partita/<system>/<partition>`;
//! - network namespaces: `partita-<system>-<partition>`.
use crate::model::{Nic, NetworkId, System};

/// Every interface name starts with this.
pub const LINK_PREFIX: &str = "pt";
/// Every network namespace name starts with this.
pub const NETNS_PREFIX: &str = "partita-";
/// Every cgroup lives under this directory of each hierarchy.
pub const CGROUP_ROOT: &str = "partita";
/// Linux's limit on interface names (IFNAMSIZ − 1).
pub const MAX_LINK_NAME: usize = 15;

/// Host names of one system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostNames {
    system: String,
    tag: String,
}

impl HostNames {
    pub fn new(system: &str) -> HostNames {
        // FNV-1a, low 16 bits (the scheme the supervisor already uses): stable across runs and builds, short enough to leave room in 15 characters.
        let mut h: u32 = 0x811c_9dc5;
        for b in system.bytes() {
            h = (h ^ b as u32).wrapping_mul(0x0100_0193);
        }
        HostNames { system: system.to_string(), tag: format!("{:04x}", h & 0xffff) }
    }
    pub fn for_system(system: &System) -> HostNames {
        HostNames::new(&system.name)
    }
    /// The 4-hex-digit tag in every interface name of this system.
    pub fn tag(&self) -> &str {
        &self.tag
    }
    /// Prefix shared by all this system's interfaces (`pt<tag>`).
    pub fn link_prefix(&self) -> String {
        format!("{LINK_PREFIX}{}", self.tag)
    }
    /// Bridge of module number `module` (its V-NETWORK).
    pub fn module_bridge(&self, module: usize) -> String {
        format!("{}m{module}", self.link_prefix())
    }
    /// Bridge of the inter-module network.
    pub fn external_bridge(&self) -> String {
        format!("{}x", self.link_prefix())
    }
    /// Host end of the V-NIC of partition `partition` of module `module`.
    pub fn vnic(&self, module: usize, partition: usize) -> String {
        format!("{}{module}n{partition}", self.link_prefix())
    }
    /// Host end of the inter-module veth of an I/O partition.
    pub fn external_vnic(&self, module: usize, partition: usize) -> String {
        format!("{}{module}x{partition}", self.link_prefix())
    }
    /// Host end of the veth of native node number `node`.
    pub fn node_vnic(&self, node: usize) -> String {
        format!("{}n{node}", self.link_prefix())
    }
    /// cgroup path (relative to the hierarchy's root) of a partition or native node.
    pub fn cgroup(&self, partition: &str) -> String {
        format!("{CGROUP_ROOT}/{}/{partition}", self.system)
    }
    /// cgroup directory of the whole system.
    pub fn system_cgroup(&self) -> String {
        format!("{CGROUP_ROOT}/{}", self.system)
    }
    /// Named network namespace of a partition or native node.
    pub fn netns(&self, partition: &str) -> String {
        format!("{NETNS_PREFIX}{}-{partition}", self.system)
    }
    /// A partition's private writable directory on the host (and inside it), kept across runs.
    pub fn state_dir(&self, partition: &str) -> std::path::PathBuf {
        std::path::Path::new(crate::confinement::STATE_ROOT).join(&self.system).join(partition)
    }
    /// Prefix of every network namespace of this system.
    pub fn netns_prefix(&self) -> String {
        format!("{NETNS_PREFIX}{}-", self.system)
    }
}

/// Whether `name` has the exact shape of an interface partita makes (`pt` + 4 hex digits + `x`, `m<n>`,
/// `<n>n<n>`, `<n>x<n>` or `n<n>`), so that cleaning up never touches a user's interface that merely starts
/// with `pt`.
pub fn is_link_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(LINK_PREFIX) else { return false };
    if rest.len() < 5 || name.len() > MAX_LINK_NAME || !rest.is_char_boundary(4) {
        return false;
    }
    let (tag, role) = rest.split_at(4);
    let hex = tag.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
    let num = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let role_ok = role == "x"
        || role.strip_prefix('m').is_some_and(num)
        || role.strip_prefix('n').is_some_and(num)
        || role.split_once('n').is_some_and(|(a, b)| num(a) && num(b))
        || role.split_once('x').is_some_and(|(a, b)| num(a) && num(b));
    hex && role_ok
}

/// The V-NIC inside a partition or node on its module's V-NETWORK.
pub const MODULE_NIC: &str = "vnic0";
/// The V-NIC inside an I/O partition or node on the inter-module network.
pub const INTER_MODULE_NIC: &str = "vnic1";

/// Gives every network its bridge and every partition and node its namespace, cgroup and V-NICs: the names
/// and addresses `partita up` creates, derived once, here.
pub(crate) fn place(system: &mut System) {
    let names = HostNames::for_system(system);
    system.network.bridge = names.external_bridge();
    let external_domain = system.network.domain;
    for (mi, m) in system.modules.iter_mut().enumerate() {
        m.network.bridge = names.module_bridge(mi);
        for (pi, p) in m.partitions.iter_mut().enumerate() {
            p.tree.netns = names.netns(&p.name);
            p.tree.cgroup = names.cgroup(&p.name);
            if let Some(c) = &mut p.tree.confinement {
                c.state_dir = names.state_dir(&p.name);
            }
            // A guest's NICs carry the same names (its /init renames them by MAC); on the host they are taps.
            p.tree.nics = if p.network {
                vec![Nic { name: MODULE_NIC.into(), host_name: names.vnic(mi, pi), network: NetworkId::Module(mi), address: p.address, domain: p.domain }]
            } else {
                Vec::new()
            };
            if let Some(a) = p.external_address {
                p.tree.nics.push(Nic {
                    name: INTER_MODULE_NIC.into(),
                    host_name: names.external_vnic(mi, pi),
                    network: NetworkId::InterModule,
                    address: a,
                    domain: external_domain,
                });
            }
        }
    }
    for (ni, n) in system.nodes.iter_mut().enumerate() {
        n.tree.netns = names.netns(&n.name);
        n.tree.cgroup = names.cgroup(&n.name);
        n.tree.nics = vec![Nic {
            name: INTER_MODULE_NIC.into(),
            host_name: names.node_vnic(ni),
            network: NetworkId::InterModule,
            address: n.address,
            domain: n.domain,
        }];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_fit_and_carry_the_tag() {
        let n = HostNames::new("a-rather-long-system-name-x");
        // validation allows at most 999 modules, partitions and nodes in practice; the worst case must fit
        for name in [n.module_bridge(999), n.external_bridge(), n.vnic(99, 99), n.external_vnic(99, 99), n.node_vnic(9999)] {
            assert!(name.len() <= MAX_LINK_NAME, "{name} is too long");
            assert!(name.starts_with(&n.link_prefix()), "{name}");
            assert!(name.starts_with(LINK_PREFIX));
        }
    }

    #[test]
    fn every_interface_name_partita_makes_has_the_exact_shape_and_others_do_not() {
        let n = HostNames::new("vs");
        for name in [n.module_bridge(0), n.module_bridge(12), n.external_bridge(), n.vnic(3, 14), n.external_vnic(0, 1), n.node_vnic(7)] {
            assert!(is_link_name(&name), "{name}");
        }
        for other in ["ptp-user0", "pt", "ptabcgx", "pt12g4x", "ptABCDx", "pt1234", "pt1234y", "pt1234m", "pt1234n", "pt12340n", "pt1234xx", "eth0", "pt1234m1a"] {
            assert!(!is_link_name(other), "{other}");
        }
    }

    #[test]
    fn names_are_deterministic_and_distinct() {
        assert_eq!(HostNames::new("vs"), HostNames::new("vs"));
        assert_ne!(HostNames::new("vs").tag(), HostNames::new("vt").tag());
        let n = HostNames::new("vs");
        let all = [n.module_bridge(1), n.module_bridge(11), n.external_bridge(), n.vnic(1, 1), n.vnic(11, 1),
            n.vnic(1, 11), n.external_vnic(1, 1), n.node_vnic(1), n.node_vnic(11)];
        let set: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(set.len(), all.len());
    }

    #[test]
    fn cgroups_and_namespaces_follow_the_documented_shape() {
        let n = HostNames::new("vs");
        assert_eq!(n.cgroup("recorder"), "partita/vs/recorder");
        assert_eq!(n.netns("recorder"), "partita-vs-recorder");
        // the tag is FNV-1a of the name, computed here independently: offset basis, then xor and multiply
        let mut h: u32 = 2166136261;
        for b in *b"vs" {
            h ^= u32::from(b);
            h = h.wrapping_mul(16777619);
        }
        assert_eq!(n.tag(), format!("{:04x}", h & 0xffff));
        assert_eq!(n.module_bridge(0), format!("pt{}m0", n.tag()));
        assert!(n.netns("routing").starts_with(&n.netns_prefix()));
        assert!(n.cgroup("routing").starts_with(&n.system_cgroup()));
    }
}
