//! Virtual networks: a named network namespace per partition, a bridge per module network (V-NETWORK),
//! a veth pair per partition and network (V-NIC).
//!
//! Built with iproute2 commands rather than netlink messages: they run only while a system is built or torn
//! down (never in a window switch), each one is the command an operator would type to inspect or repeat the
//! step, and failures come back with iproute2's own explanation. Bridges are never attached to a host
//! interface and get no address on the host: only partition namespaces hold addresses, all in 198.18.0.0/15.
use crate::command::ip;
use crate::error::{Result, SupervisorError};
use std::net::Ipv4Addr;
use std::path::PathBuf;

pub use partita_system::names::{LINK_PREFIX, NETNS_PREFIX};

pub fn check_link_name(name: &str) -> Result<()> {
    if !name.starts_with(LINK_PREFIX)
        || name.len() > 15
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(SupervisorError::Name { what: "interface name", value: name.to_string(), rule: "must start with \"pt\", be at most 15 characters of [A-Za-z0-9._-]" });
    }
    Ok(())
}

/// Whether `a` is in 198.18.0.0/15, the only range partita uses.
pub fn is_project_address(a: Ipv4Addr) -> bool {
    let o = a.octets();
    o[0] == 198 && (o[1] == 18 || o[1] == 19)
}

/// A named network namespace (`/run/netns/partita-...`). Deleted on drop.
#[derive(Debug)]
pub struct NetNamespace {
    name: String,
    deleted: bool,
}

impl NetNamespace {
    /// Creates the namespace with its loopback up.
    pub fn create(name: &str) -> Result<NetNamespace> {
        if !name.starts_with(NETNS_PREFIX) || name.len() > 200 || name.contains('/') {
            return Err(SupervisorError::Name { what: "network namespace name", value: name.to_string(), rule: "must start with \"partita-\", without `/`, at most 200 characters" });
        }
        ip(&["netns", "add", name])?;
        let ns = NetNamespace { name: name.to_string(), deleted: false };
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `/run/netns/<name>`, to `setns` into.
    pub fn path(&self) -> PathBuf {
        partita_os::netns::named_path(&self.name)
    }

    pub fn delete(mut self) -> Result<()> {
        self.deleted = true;
        ip(&["netns", "del", &self.name]).map(|_| ())
    }
}

impl Drop for NetNamespace {
    fn drop(&mut self) {
        if !self.deleted {
            if let Err(e) = ip(&["netns", "del", &self.name]) {
                tracing::warn!(target: "partita::supervisor::network", "{e}");
            }
        }
    }
}

/// A Linux bridge in the host namespace, up, with no address and no host interface attached.
#[derive(Debug)]
pub struct Bridge {
    name: String,
    deleted: bool,
}

impl Bridge {
    pub fn create(name: &str) -> Result<Bridge> {
        check_link_name(name)?;
        ip(&["link", "add", name, "type", "bridge"])?;
        let b = Bridge { name: name.to_string(), deleted: false };
        // No IPv6 link-local address or router solicitations from the host side of a partition network.
        let _ = ip(&["link", "set", name, "addrgenmode", "none"]);
        ip(&["link", "set", name, "up"])?;
        Ok(b)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if !self.deleted {
            self.deleted = true;
            if let Err(e) = ip(&["link", "del", &self.name]) {
                tracing::warn!(target: "partita::supervisor::network", "{e}");
            }
        }
    }
}

/// A V-NIC: a veth pair with `host_name` on `bridge` and `inner_name` in the partition's namespace holding
/// `address/prefix`. Dropping it deletes the pair (both ends).
#[derive(Debug)]
pub struct VirtualNic {
    host_name: String,
    inner_name: String,
    namespace: String,
    address: Ipv4Addr,
    deleted: bool,
}

impl VirtualNic {
    pub fn create(
        host_name: &str,
        inner_name: &str,
        namespace: &NetNamespace,
        bridge: &Bridge,
        address: Ipv4Addr,
        prefix: u8,
    ) -> Result<VirtualNic> {
        check_link_name(host_name)?;
        if inner_name.is_empty() || inner_name.len() > 15 {
            return Err(SupervisorError::Name { what: "inner interface name", value: inner_name.to_string(), rule: "must be 1 to 15 characters" });
        }
        if !is_project_address(address) || !(15..=30).contains(&prefix) {
            return Err(SupervisorError::Address { what: "address", value: format!("{address}/{prefix}") });
        }
        let ns = namespace.name();
        ip(&["link", "add", host_name, "type", "veth", "peer", "name", inner_name, "netns", ns])?;
        let nic = VirtualNic {
            host_name: host_name.into(),
            inner_name: inner_name.into(),
            namespace: ns.into(),
            address,
            deleted: false,
        };
        let _ = ip(&["link", "set", host_name, "addrgenmode", "none"]);
        ip(&["link", "set", host_name, "master", bridge.name(), "up"])?;
        ip(&["-n", ns, "addr", "add", &format!("{address}/{prefix}"), "dev", inner_name])?;
        ip(&["-n", ns, "link", "set", inner_name, "up"])?;
        Ok(nic)
    }

    pub fn host_name(&self) -> &str {
        &self.host_name
    }
    pub fn inner_name(&self) -> &str {
        &self.inner_name
    }
    pub fn namespace(&self) -> &str {
        &self.namespace
    }
    pub fn address(&self) -> Ipv4Addr {
        self.address
    }
}

impl Drop for VirtualNic {
    fn drop(&mut self) {
        if !self.deleted {
            self.deleted = true;
            // Gone already when its namespace was deleted first: not an error.
            let _ = ip(&["link", "del", &self.host_name]);
        }
    }
}

/// Runs `f` on a new thread that has joined the named network namespace at `path` (sockets it opens live
/// there), and returns its result. The calling thread's namespace is unchanged.
pub fn run_in_netns<T: Send + 'static>(path: &std::path::Path, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    Ok(partita_os::netns::run_in_netns(path, f)?)
}

/// One interface of a network namespace that has several (an I/O partition's): its name, its address and the
/// DDS domain spoken on it.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub interface: &'a str,
    pub address: Ipv4Addr,
    pub domain: u32,
}

/// The UDP ports of DDS domain `domain` (the RTPS port mapping both Cyclone DDS and Fast DDS use: 7400 + 250 per
/// domain, the participants' ports within), 0..=232.
pub fn domain_ports(domain: u32) -> (u32, u32) {
    let first = 7400 + 250 * domain;
    // Domain 232, the highest, runs past the last port; iproute2 takes ranges up to 65534 (its participants use the
    // first 52 ports of the domain's at most: `MaxAutoParticipantIndex` 20).
    (first, (first + 249).min(65534))
}

/// The strong host model in a namespace with several interfaces, set from outside it (the partition has no
/// CAP_NET_ADMIN there): a packet that arrives on one interface for the address of another is dropped, and so
/// is a datagram for the DDS ports of a domain that is spoken on another interface only. The DDS
/// implementations bind their receiving sockets to the any address (Cyclone DDS has no setting to bind them to
/// the interface's), so without the second rule the routing service's inter-module participant would hear a
/// module partition that sends to the I/O partition's module address. ARP is answered only for the address of
/// the interface asked on.
pub fn strong_host(namespace: &NetNamespace, sides: &[Side]) -> Result<()> {
    if sides.len() < 2 {
        return Ok(());
    }
    let ns = namespace.name();
    let path = namespace.path();
    let written = run_in_netns(&path, || {
        ["all", "default"].iter().try_for_each(|conf| {
            std::fs::write(format!("/proc/sys/net/ipv4/conf/{conf}/arp_ignore"), "1")?;
            std::fs::write(format!("/proc/sys/net/ipv4/conf/{conf}/arp_announce"), "2")
        })
    })?;
    written.map_err(|e| SupervisorError::Sys { call: "write", context: format!("arp_ignore and arp_announce in {ns}"), source: e })?;
    for side in sides {
        for other in sides.iter().filter(|o| o.interface != side.interface) {
            ip(&["-n", ns, "rule", "add", "pref", "100", "iif", side.interface, "to", &format!("{}/32", other.address), "blackhole"])?;
            // A domain spoken only on `other` (`side` is among the sides, so not on `side` either).
            if sides.iter().all(|s| s.interface == other.interface || s.domain != other.domain) {
                let (first, last) = domain_ports(other.domain);
                ip(&["-n", ns, "rule", "add", "pref", "101", "iif", side.interface, "ipproto", "udp", "dport", &format!("{first}-{last}"), "blackhole"])?;
            }
        }
    }
    // The local table after those rules (it comes first by default, where no rule could stop a local delivery).
    ip(&["-n", ns, "rule", "add", "pref", "200", "lookup", "local"])?;
    ip(&["-n", ns, "rule", "del", "pref", "0", "lookup", "local"])?;
    Ok(())
}
