//! Uplinks: a host interface handed to an I/O partition or native node, and given back.
//!
//! `move` moves the device itself into the member's network namespace, renamed [`UPLINK_NIC`]; `macvlan` and
//! `ipvlan` create a child of it there, so the host keeps the device. Before a device moves, what it was on the
//! host (name, MAC address, IPv4 addresses, MTU, link state, its routes other than the connected ones) is
//! written to a record under [`RECORD_DIR`]; giving it back restores exactly that, in the network namespace the
//! supervisor ran in. The record outlives a killed supervisor: `partita down` finds it and gives the device
//! back before it deletes the namespace (a veth end in a deleted namespace would be destroyed, a physical device
//! would fall back to the machine's first namespace under another name).
use crate::command::ip;
use crate::error::{path_err, Result, SupervisorError};
use crate::registry;
use crate::vnet::NetNamespace;
use partita_system::{Uplink, UplinkMode, UPLINK_NIC};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the records of the uplinks handed over live.
pub const RECORD_DIR: &str = "/run/partita/uplinks";

/// What an uplink's interface was on the host, and where it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub system: String,
    pub owner: String,
    /// The member's network namespace (named, under /run/netns).
    pub netns: String,
    /// The host interface.
    pub interface: String,
    pub mode: String,
    /// Its MAC address: how it is found again if it left the namespace by itself.
    pub mac: String,
    /// `address/prefix`, each.
    pub addresses: Vec<String>,
    pub mtu: u32,
    pub up: bool,
    /// Its routes other than the kernel's connected ones, as `ip route replace` arguments.
    pub routes: Vec<Vec<String>>,
    /// The inode of the network namespace the supervisor ran in: the device goes back there.
    pub home_netns: u64,
}

/// An uplink handed over; given back on [`HandedUplink::give_back`] or drop.
#[derive(Debug)]
pub struct HandedUplink {
    record: Record,
    path: PathBuf,
    done: bool,
}

/// The inode of this process's network namespace.
pub fn own_netns() -> u64 {
    std::fs::metadata("/proc/self/ns/net").map(|m| m.ino()).unwrap_or(0)
}

#[derive(Deserialize)]
struct Link {
    address: Option<String>,
    mtu: u32,
    #[serde(default)]
    flags: Vec<String>,
    #[serde(default)]
    addr_info: Vec<Addr>,
}
#[derive(Deserialize)]
struct Addr {
    family: String,
    local: String,
    prefixlen: u8,
}
#[derive(Deserialize)]
struct Route {
    dst: String,
    gateway: Option<String>,
    metric: Option<u32>,
    protocol: Option<String>,
}

/// What `interface` is now, in this namespace (`ns` = `None`) or in the named one.
fn read(ns: Option<&str>, interface: &str) -> Result<(Link, Vec<Route>)> {
    let mut args = Vec::new();
    if let Some(n) = ns {
        args.extend(["-n", n]);
    }
    let link_args: Vec<&str> = args.iter().copied().chain(["-j", "addr", "show", "dev", interface]).collect();
    let links: Vec<Link> = serde_json::from_str(&ip(&link_args)?).map_err(|source| SupervisorError::Decode { command: format!("ip -j addr show dev {interface}"), source })?;
    let link = links.into_iter().next().ok_or_else(|| SupervisorError::Uplink { interface: interface.to_string(), problem: "no such interface".into() })?;
    let route_args: Vec<&str> = args.iter().copied().chain(["-j", "-4", "route", "show", "dev", interface]).collect();
    let routes: Vec<Route> = serde_json::from_str(&ip(&route_args)?).unwrap_or_default();
    Ok((link, routes))
}

fn record_path(dir: &Path, r: &Record) -> PathBuf {
    dir.join(format!("{}.{}.{}.json", r.interface, r.system, r.owner))
}

/// The records under `dir`, with their paths.
pub fn records_in(dir: &Path) -> Vec<(PathBuf, Record)> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<(PathBuf, Record)> = rd
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let r: Record = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
            Some((p, r))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

impl HandedUplink {
    /// Hands `uplink` to `owner` of `system`, in namespace `ns`: the device (move) or a child of it, with the
    /// uplink's address, MTU and gateway, up. Refused when another system that is up holds the interface.
    pub fn hand_over(uplink: &Uplink, system: &str, owner: &str, ns: &NetNamespace) -> Result<HandedUplink> {
        Self::hand_over_in(Path::new(RECORD_DIR), uplink, system, owner, ns)
    }

    pub fn hand_over_in(dir: &Path, uplink: &Uplink, system: &str, owner: &str, ns: &NetNamespace) -> Result<HandedUplink> {
        let iface = uplink.interface.as_str();
        if let Some(why) = held_elsewhere(dir, iface, system) {
            return Err(SupervisorError::Held(why));
        }
        let (link, routes) = read(None, iface).map_err(|e| SupervisorError::Uplink { interface: iface.to_string(), problem: format!("{e}; name an interface `ip link` shows") })?;
        let record = Record {
            system: system.into(),
            owner: owner.into(),
            netns: ns.name().into(),
            interface: iface.into(),
            mode: uplink.mode.to_string(),
            mac: link.address.unwrap_or_default(),
            addresses: link.addr_info.iter().filter(|a| a.family == "inet").map(|a| format!("{}/{}", a.local, a.prefixlen)).collect(),
            mtu: link.mtu,
            up: link.flags.iter().any(|f| f == "UP"),
            routes: routes
                .iter()
                .filter(|r| r.protocol.as_deref() != Some("kernel"))
                .map(|r| {
                    let mut a = vec![r.dst.clone()];
                    if let Some(g) = &r.gateway {
                        a.extend(["via".into(), g.clone()]);
                    }
                    if let Some(m) = r.metric {
                        a.extend(["metric".into(), m.to_string()]);
                    }
                    a
                })
                .collect(),
            home_netns: own_netns(),
        };
        std::fs::create_dir_all(dir).map_err(path_err("mkdir", dir))?;
        let path = record_path(dir, &record);
        let json = serde_json::to_vec_pretty(&record).map_err(|source| SupervisorError::Encode { what: "the uplink's record", source })?;
        std::fs::write(&path, json).map_err(path_err("write", &path))?;
        // From here on, dropping the value gives back whatever was done.
        let handed = HandedUplink { record, path, done: false };
        let nsn = ns.name();
        match uplink.mode {
            UplinkMode::Move => {
                ip(&["link", "set", "dev", iface, "down"])?;
                ip(&["link", "set", "dev", iface, "netns", nsn])?;
                ip(&["-n", nsn, "link", "set", "dev", iface, "name", UPLINK_NIC])?;
            }
            UplinkMode::Macvlan | UplinkMode::Ipvlan => {
                let (kind, mode) = if uplink.mode == UplinkMode::Macvlan { ("macvlan", "bridge") } else { ("ipvlan", "l2") };
                ip(&["link", "add", "link", iface, "name", UPLINK_NIC, "netns", nsn, "type", kind, "mode", mode]).map_err(|e| match e {
                    SupervisorError::Command { stderr, .. } if stderr.contains("Unknown device type") => SupervisorError::Uplink {
                        interface: iface.to_string(),
                        problem: format!("this kernel has no {kind} interfaces (CONFIG_{}; `modprobe {kind}` found none); use mode = \"move\" or another mode", kind.to_uppercase()),
                    },
                    e => e,
                })?;
            }
        }
        let _ = ip(&["-n", nsn, "link", "set", "dev", UPLINK_NIC, "addrgenmode", "none"]);
        if let Some(mtu) = uplink.mtu {
            ip(&["-n", nsn, "link", "set", "dev", UPLINK_NIC, "mtu", &mtu.to_string()])?;
        }
        ip(&["-n", nsn, "addr", "add", &format!("{}/{}", uplink.address, uplink.prefix), "dev", UPLINK_NIC])?;
        ip(&["-n", nsn, "link", "set", "dev", UPLINK_NIC, "up"])?;
        if let Some(g) = uplink.gateway {
            ip(&["-n", nsn, "route", "add", "default", "via", &g.to_string(), "dev", UPLINK_NIC])?;
        }
        Ok(handed)
    }

    pub fn record(&self) -> &Record {
        &self.record
    }

    /// Gives the interface back (see [`give_back`]) and removes the record.
    pub fn give_back(mut self) -> Result<()> {
        self.done = true;
        give_back(&self.record)?;
        forget(&self.path);
        Ok(())
    }
}

impl Drop for HandedUplink {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            match give_back(&self.record) {
                Ok(()) => forget(&self.path),
                Err(e) => tracing::warn!(target: "partita::supervisor::network", "uplink {}: {e} (its record stays in {RECORD_DIR} for `partita down`)", self.record.interface),
            }
        }
    }
}

/// Removes a record, and its directory once it holds none.
fn forget(path: &Path) {
    let _ = std::fs::remove_file(path);
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// Gives an uplink back: a moved device returns to the namespace the supervisor ran in with its name, MTU,
/// addresses, routes and link state; a child interface is deleted. Must run in that namespace (refused
/// elsewhere, the device staying where it is).
pub fn give_back(r: &Record) -> Result<()> {
    let ns_exists = crate::cleanup::netns_with_prefix(&r.netns)?.iter().any(|n| n == &r.netns);
    if r.mode != UplinkMode::Move.to_string() {
        if ns_exists {
            // Gone already if its namespace went: not an error.
            let _ = ip(&["-n", &r.netns, "link", "del", "dev", UPLINK_NIC]);
        }
        return Ok(());
    }
    if own_netns() != r.home_netns {
        return Err(SupervisorError::Uplink {
            interface: r.interface.clone(),
            problem: format!("belongs to the network namespace with inode {} but this process runs in {}; run `partita down` where `partita up` ran", r.home_netns, own_netns()),
        });
    }
    let here = |name: &str| read(None, name).is_ok();
    if ns_exists && read(Some(&r.netns), UPLINK_NIC).is_ok() {
        let nsn = r.netns.as_str();
        let _ = ip(&["-n", nsn, "link", "set", "dev", UPLINK_NIC, "down"]);
        // Renamed inside first: the host may have an interface called uplink0 of its own.
        let name = if ip(&["-n", nsn, "link", "set", "dev", UPLINK_NIC, "name", &r.interface]).is_ok() { r.interface.as_str() } else { UPLINK_NIC };
        ip(&["-n", nsn, "link", "set", "dev", name, "netns", &std::process::id().to_string()])?;
        if name != r.interface {
            ip(&["link", "set", "dev", name, "name", &r.interface])?;
        }
    } else if !here(&r.interface) {
        // The namespace went without giving it back: a physical device fell back to the machine's first
        // namespace, maybe here, under the name it had inside; find it by its MAC address.
        let Some(found) = find_by_mac(&r.mac)? else {
            // A virtual device is destroyed with its namespace (a veth) or with the process holding it (a tap):
            // there is nothing left to give back.
            tracing::warn!(target: "partita::supervisor::network", "uplink {} ({}) is neither in {} nor on this host: it was destroyed (a virtual device goes with its namespace or its owner); nothing to give back", r.interface, r.mac, r.netns);
            return Ok(());
        };
        ip(&["link", "set", "dev", &found, "down"])?;
        ip(&["link", "set", "dev", &found, "name", &r.interface])?;
    }
    let iface = r.interface.as_str();
    ip(&["addr", "flush", "dev", iface])?;
    ip(&["link", "set", "dev", iface, "mtu", &r.mtu.to_string()])?;
    for a in &r.addresses {
        ip(&["addr", "add", a, "dev", iface])?;
    }
    if r.up {
        ip(&["link", "set", "dev", iface, "up"])?;
    }
    for route in &r.routes {
        let mut args: Vec<&str> = vec!["route", "replace"];
        args.extend(route.iter().map(String::as_str));
        args.extend(["dev", iface]);
        if let Err(e) = ip(&args) {
            tracing::warn!(target: "partita::supervisor::network", "uplink {iface}: route not restored: {e}");
        }
    }
    Ok(())
}

/// The interface of this namespace with MAC address `mac`.
fn find_by_mac(mac: &str) -> Result<Option<String>> {
    #[derive(Deserialize)]
    struct L {
        ifname: String,
        address: Option<String>,
    }
    let links: Vec<L> = serde_json::from_str(&ip(&["-j", "link", "show"])?).map_err(|source| SupervisorError::Decode { command: "ip -j link show".into(), source })?;
    Ok(links.into_iter().find(|l| !mac.is_empty() && l.address.as_deref() == Some(mac)).map(|l| l.ifname))
}

/// Whether a network namespace with this inode exists: named under /run/netns, or held by a process.
fn netns_exists(inode: u64) -> bool {
    let named = std::fs::read_dir("/run/netns").into_iter().flatten().flatten().any(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.ino() == inode));
    named
        || std::fs::read_dir("/proc").into_iter().flatten().flatten().any(|e| {
            e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) && std::fs::metadata(e.path().join("ns/net")).is_ok_and(|m| m.ino() == inode)
        })
}

/// Gives back every recorded uplink of a system not in `keep` (systems that are up) whose home is this network
/// namespace, for `partita down`. A record of another namespace is left to a `down` there while that namespace
/// exists, and dropped once it is gone (its devices went with it or fell back to the machine's first namespace).
/// Returns what was done, and what could not be with why.
pub fn give_back_leftovers(keep: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    let here = own_netns();
    for (path, r) in records_in(Path::new(RECORD_DIR)) {
        if keep.contains(&r.system) {
            continue;
        }
        if r.home_netns != here {
            if !netns_exists(r.home_netns) {
                forget(&path);
                done.push(format!("uplink {} of {} ({}): its network namespace is gone, nothing to give back", r.interface, r.owner, r.system));
            }
            continue;
        }
        match give_back(&r) {
            Ok(()) => {
                forget(&path);
                done.push(format!("uplink {} of {} ({}) given back", r.interface, r.owner, r.system));
            }
            Err(e) => failed.push(format!("uplink {} of {} ({}): {e}", r.interface, r.owner, r.system)),
        }
    }
    (done, failed)
}

/// Why `iface` cannot be an uplink of `system` here: another system's record holds it in this network
/// namespace (the same name in another namespace, another host's part on this machine, is another interface).
fn held_elsewhere(dir: &Path, iface: &str, system: &str) -> Option<String> {
    let here = own_netns();
    let (_, other) = records_in(dir).into_iter().find(|(_, r)| r.interface == iface && r.system != system && r.home_netns == here)?;
    Some(if registry::owners().iter().any(|(_, o)| o.system == other.system && o.alive()) {
        format!("{iface} is the uplink of {} in system {}, which is up; give this system another interface, or bring that one down", other.owner, other.system)
    } else {
        format!("{iface} is still recorded as the uplink of {} in system {}, whose supervisor is gone; run `partita down` to give it back first", other.owner, other.system)
    })
}

/// Every uplink of `system` that another system holds on this machine, with why: what `check` and `up` refuse
/// before anything is created.
pub fn held_by_others(system: &partita_system::System) -> Vec<String> {
    system
        .uplinks()
        .filter_map(|(owner, u)| held_elsewhere(Path::new(RECORD_DIR), &u.interface, &system.name).map(|why| format!("{}.interface: {why}", partita_system::uplink::uplink_path(system, owner))))
        .collect()
}

/// Where a confined partition reads its uplink's DDS Security files, in the order of
/// [`partita_system::UplinkSecurity::files`].
pub const SECURITY_FILES_INSIDE: [&str; 6] = [
    "/run/partita/uplink-ca.pem",
    "/run/partita/uplink-certificate.pem",
    "/run/partita/uplink-private-key.pem",
    "/run/partita/uplink-permissions-ca.pem",
    "/run/partita/uplink-governance.p7s",
    "/run/partita/uplink-permissions.p7s",
];

/// The DDS Security files of an uplink as its member reads them. A native node (`uid` = `None`) reads them where
/// they are. A confined partition (`uid`: its host uid) reads copies in `dir` that its user owns (a private key
/// is rarely readable by anyone but its owner), bound read-only at [`SECURITY_FILES_INSIDE`]: returned with
/// the files as the binds its view needs.
pub fn security_files(sec: &partita_system::UplinkSecurity, uid: Option<u32>, dir: &Path) -> Result<(partita_dds::SecurityFiles, Vec<(PathBuf, &'static str)>)> {
    let mut paths: Vec<String> = Vec::new();
    let mut binds = Vec::new();
    match uid {
        None => paths.extend(sec.files().iter().map(|(_, p)| p.display().to_string())),
        Some(uid) => {
            std::fs::create_dir_all(dir).map_err(path_err("mkdir", dir))?;
            for ((key, host), inside) in sec.files().into_iter().zip(SECURITY_FILES_INSIDE) {
                let copy = dir.join(key);
                std::fs::copy(host, &copy).map_err(path_err("copy", host))?;
                std::os::unix::fs::chown(&copy, Some(uid), Some(uid)).map_err(path_err("chown", &copy))?;
                std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o400)).map_err(path_err("chmod", &copy))?;
                binds.push((copy, inside));
                paths.push(inside.to_string());
            }
        }
    }
    let files = partita_dds::SecurityFiles {
        identity_ca: paths[0].clone(),
        identity_certificate: paths[1].clone(),
        private_key: paths[2].clone(),
        permissions_ca: paths[3].clone(),
        governance: paths[4].clone(),
        permissions: paths[5].clone(),
    };
    Ok((files, binds))
}
