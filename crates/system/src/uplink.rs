//! Hosts, uplinks and external peers: the keys that take a system off one machine (docs/deployment.md).
//!
//! Read from the file in a pass of their own after the rest of the system is built: `[[host]]` and each
//! module's and node's `host`, `[module.partition.uplink]` and `[node.uplink]`, `[[peer]]`. Checked in two
//! steps: against the file (here, always) and against the machine the part is brought up on
//! ([`check_on_machine`], by `partita check --host` and `partita up`), since the interfaces of one host say
//! nothing of another's.
use crate::error::{Diagnostic, Errors, Problem};
use crate::model::*;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::ops::Range;
use toml::Spanned;

type S<T> = Spanned<T>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHost {
    pub name: S<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPeer {
    pub name: S<String>,
    pub address: S<String>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUplink {
    pub interface: S<String>,
    pub mode: S<String>,
    pub address: S<String>,
    pub gateway: Option<S<String>>,
    pub mtu: Option<S<u64>>,
    pub domain: Option<S<u64>>,
    pub multicast: Option<bool>,
    pub allow_host_connection_loss: Option<bool>,
    pub security: Option<S<RawSecurity>>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSecurity {
    pub ca: S<String>,
    pub certificate: S<String>,
    pub private_key: S<String>,
    pub permissions_ca: Option<S<String>>,
    pub governance: S<String>,
    pub permissions: S<String>,
}

/// What a system file says of hosts and uplinks, taken out of the raw file before the rest is built.
#[derive(Default)]
pub(crate) struct RawPlacement {
    pub hosts: Vec<RawHost>,
    pub peers: Vec<RawPeer>,
    /// Per module (file order): its `host`.
    pub module_hosts: Vec<Option<S<String>>>,
    /// Per module, per partition (file order): its uplink.
    pub partition_uplinks: Vec<Vec<Option<S<RawUplink>>>>,
    /// Per node (file order): its `host` and its uplink.
    pub node_hosts: Vec<Option<S<String>>>,
    pub node_uplinks: Vec<Option<S<RawUplink>>>,
}

/// The lowest and highest MTU an uplink may be given (IPv4's minimum; the largest Linux takes).
const MIN_MTU: u64 = 68;
const MAX_MTU: u64 = 65_535;

/// Reports problems with file, line and field, as the rest of validation does.
pub(crate) struct Report<'a> {
    pub file: &'a str,
    pub text: &'a str,
    pub errors: &'a mut Vec<Diagnostic>,
}

impl Report<'_> {
    fn err(&mut self, span: &Range<usize>, path: &str, why: String) {
        let off = span.start.min(self.text.len());
        let mut at = off;
        while !self.text.is_char_boundary(at) {
            at -= 1;
        }
        let before = &self.text[..at];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
        self.errors.push(Diagnostic { file: self.file.to_string(), line, column, path: path.to_string(), problem: Problem::BadValue(why) });
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 24 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') && s.starts_with(|c: char| c.is_ascii_alphanumeric())
}

/// A Linux interface name: 1 to 15 characters, no `/`, whitespace or `:`.
pub fn valid_interface_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= crate::names::MAX_LINK_NAME && s != "." && s != ".." && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
}

/// Places modules and nodes on hosts and gives uplinks to I/O partitions and nodes; every problem goes to `r`.
pub(crate) fn place(raw: RawPlacement, system: &mut System, r: &mut Report) {
    // Hosts.
    let mut hosts: Vec<String> = Vec::new();
    for h in &raw.hosts {
        let name = h.name.get_ref();
        if !valid_name(name) {
            r.err(&h.name.span(), "host.name", format!("{name:?} is not a host name; use 1 to 24 of [A-Za-z0-9_-], starting with a letter or digit"));
        } else if hosts.contains(name) {
            r.err(&h.name.span(), "host.name", format!("a second host named {name:?}; give each [[host]] its own name"));
        } else {
            hosts.push(name.clone());
        }
    }
    let placed = |r: &mut Report, host: &Option<S<String>>, path: &str| -> Option<String> {
        match host {
            None if !hosts.is_empty() => {
                r.err(&(0..0), &format!("{path}.host"), format!("the file declares hosts ({}); say on which one it runs: host = \"{}\"", hosts.join(", "), hosts[0]));
                None
            }
            None => None,
            Some(h) if hosts.is_empty() => {
                r.err(&h.span(), &format!("{path}.host"), format!("no [[host]] is declared, so there is no host {:?}; add [[host]] name = {:?} or remove the key", h.get_ref(), h.get_ref()));
                None
            }
            Some(h) if !hosts.contains(h.get_ref()) => {
                r.err(&h.span(), &format!("{path}.host"), format!("no host {:?}; the file's hosts are {}", h.get_ref(), hosts.join(", ")));
                None
            }
            Some(h) => Some(h.get_ref().clone()),
        }
    };
    for (m, h) in system.modules.iter_mut().zip(&raw.module_hosts) {
        m.host = placed(r, h, &format!("module[{}]", m.name));
    }
    for (n, h) in system.nodes.iter_mut().zip(&raw.node_hosts) {
        n.host = placed(r, h, &format!("node[{}]", n.name));
    }
    system.hosts = hosts;

    // The subnets partita's own networks use: no uplink or peer may be in them.
    let mut own: Vec<(Subnet, String)> = vec![(system.network.subnet, "the inter-module network".into())];
    own.extend(system.modules.iter().map(|m| (m.network.subnet, format!("module {}'s V-NETWORK", m.name))));
    let taken_domains: Vec<u32> = std::iter::once(system.network.domain.get()).chain(system.modules.iter().map(|m| m.network.domain.get())).collect();
    let uplink_domain = (0..=DomainId::MAX).find(|d| !taken_domains.contains(d)).and_then(DomainId::new).unwrap_or(system.network.domain);

    // External peers.
    let mut addresses: BTreeMap<Ipv4Addr, String> = BTreeMap::new();
    let mut peers = Vec::new();
    for p in &raw.peers {
        let name = p.name.get_ref();
        let path = format!("peer[{name}]");
        if !valid_name(name) {
            r.err(&p.name.span(), &format!("{path}.name"), format!("{name:?} is not a peer name; use 1 to 24 of [A-Za-z0-9_-]"));
        } else if peers.iter().any(|x: &Peer| &x.name == name) {
            r.err(&p.name.span(), &format!("{path}.name"), format!("a second peer named {name:?}; give each [[peer]] its own name"));
        }
        let Ok(address) = p.address.get_ref().parse::<Ipv4Addr>() else {
            r.err(&p.address.span(), &format!("{path}.address"), format!("{:?} is not an IPv4 address; write the peer's address on the uplinks' network, e.g. \"192.0.2.7\"", p.address.get_ref()));
            continue;
        };
        if let Some((s, owner)) = own.iter().find(|(s, _)| s.contains(address)) {
            r.err(&p.address.span(), &format!("{path}.address"), format!("{address} lies in {s}, {owner}: a peer is on another machine; give its address on the uplinks' network"));
            continue;
        }
        if let Some(other) = addresses.insert(address, format!("peer {name}")) {
            r.err(&p.address.span(), &format!("{path}.address"), format!("{address} is also {other}'s; give each peer its own address"));
        }
        peers.push(Peer { name: name.clone(), address });
    }

    // Uplinks, first as the file gives them; peers once every uplink's address is known.
    let mut uplinks: Vec<(Uplink, String, Range<usize>, Option<String>)> = Vec::new(); // (uplink, owner path, span, host)
    let mut owners: Vec<(usize, Option<usize>)> = Vec::new(); // (module or node index, partition index: None = node)
    for (mi, m) in system.modules.iter().enumerate() {
        for (pi, p) in m.partitions.iter().enumerate() {
            let Some(Some(ru)) = raw.partition_uplinks.get(mi).and_then(|v| v.get(pi)) else { continue };
            let path = format!("module[{}].partition[{}].uplink", m.name, p.name);
            if !p.io {
                r.err(&ru.span(), &path, "only a module's I/O partition may own an uplink (it is the only one on a network beyond its module); set io = true on this partition or give the uplink to the I/O partition".into());
                continue;
            }
            if p.vm.is_some() {
                r.err(&ru.span(), &path, "a VM partition cannot own an uplink yet; make the I/O partition a process partition (kind = \"process\")".into());
                continue;
            }
            let avoid = [m.network.domain.get(), system.network.domain.get()];
            if let Some(u) = uplink(ru, &path, uplink_domain, &avoid, &own, &mut addresses, r) {
                uplinks.push((u, path, ru.span(), m.host.clone()));
                owners.push((mi, Some(pi)));
            }
        }
    }
    for (ni, n) in system.nodes.iter().enumerate() {
        let Some(Some(ru)) = raw.node_uplinks.get(ni) else { continue };
        let path = format!("node[{}].uplink", n.name);
        let avoid = [n.domain.get()];
        if let Some(u) = uplink(ru, &path, uplink_domain, &avoid, &own, &mut addresses, r) {
            uplinks.push((u, path, ru.span(), n.host.clone()));
            owners.push((ni, None));
        }
    }
    // One host interface, one owner, when it moves.
    for i in 0..uplinks.len() {
        for j in 0..i {
            let (a, b) = (&uplinks[j], &uplinks[i]);
            if a.0.interface == b.0.interface && a.3 == b.3 && (a.0.mode == UplinkMode::Move || b.0.mode == UplinkMode::Move) {
                let (iface, first, span, path) = (b.0.interface.clone(), a.1.clone(), b.2.clone(), b.1.clone());
                r.err(&span, &format!("{path}.interface"), format!("{iface} is also the uplink of {first}, and a moved interface has one owner; give each its own interface, or use mode = \"macvlan\" for both"));
            }
        }
    }
    let all: Vec<Ipv4Addr> = uplinks.iter().map(|(u, ..)| u.address).chain(peers.iter().map(|p| p.address)).collect();
    for (u, path, span, _) in &mut uplinks {
        u.peers = all.iter().copied().filter(|a| *a != u.address).collect();
        if u.peers.is_empty() && !u.multicast {
            r.err(span, path, "nothing could be discovered over this uplink: the file names no other uplink and no [[peer]], and multicast is off; add a [[peer]] with the far machine's address, an uplink on the other host, or multicast = true".into());
        }
    }
    for ((u, ..), (i, pi)) in uplinks.into_iter().zip(owners) {
        match pi {
            Some(pi) => system.modules[i].partitions[pi].tree.uplink = Some(u),
            None => system.nodes[i].tree.uplink = Some(u),
        }
    }
    system.peers = peers;
}

/// One uplink table, checked against the file.
fn uplink(
    ru: &S<RawUplink>,
    path: &str,
    default_domain: DomainId,
    avoid_domains: &[u32],
    own: &[(Subnet, String)],
    addresses: &mut BTreeMap<Ipv4Addr, String>,
    r: &mut Report,
) -> Option<Uplink> {
    let u = ru.get_ref();
    let mut ok = true;
    let interface = u.interface.get_ref().clone();
    if !valid_interface_name(&interface) {
        r.err(&u.interface.span(), &format!("{path}.interface"), format!("{interface:?} is not a Linux interface name; name a host interface as `ip link` shows it, e.g. \"eth1\""));
        ok = false;
    } else if crate::names::is_link_name(&interface) {
        r.err(&u.interface.span(), &format!("{path}.interface"), format!("{interface} is an interface partita makes for its own networks; name a host interface of the machine's real network"));
        ok = false;
    } else if interface == "lo" {
        r.err(&u.interface.span(), &format!("{path}.interface"), "lo is the host's loopback; name a host interface of a real network".into());
        ok = false;
    }
    let mode = match u.mode.get_ref().as_str() {
        "move" => UplinkMode::Move,
        "macvlan" => UplinkMode::Macvlan,
        "ipvlan" => UplinkMode::Ipvlan,
        other => {
            r.err(&u.mode.span(), &format!("{path}.mode"), format!("{other:?} is not a way to hand an interface over; write \"move\" (the device moves into the partition), \"macvlan\" or \"ipvlan\" (a child of it; the host keeps the device)"));
            ok = false;
            UplinkMode::Move
        }
    };
    let (address, prefix) = match u.address.get_ref().split_once('/').map(|(a, p)| (a.parse::<Ipv4Addr>(), p.parse::<u8>())) {
        Some((Ok(a), Ok(p))) if (8..=30).contains(&p) => (a, p),
        _ => {
            r.err(&u.address.span(), &format!("{path}.address"), format!("{:?} is not an address with its prefix; write e.g. \"192.0.2.10/24\" (prefix 8 to 30)", u.address.get_ref()));
            return None;
        }
    };
    let mut up = Uplink { interface, mode, address, prefix, gateway: None, mtu: None, domain: default_domain, peers: Vec::new(), multicast: u.multicast.unwrap_or(false), allow_host_connection_loss: u.allow_host_connection_loss.unwrap_or(false), security: None };
    if let Some(sec) = &u.security {
        let s = sec.get_ref();
        let mut file = |v: &S<String>, key: &str| -> Option<std::path::PathBuf> {
            let p = std::path::PathBuf::from(v.get_ref());
            let safe = !v.get_ref().chars().any(|c| "<>&\"'".contains(c) || c.is_control());
            if p.is_absolute() && safe {
                Some(p)
            } else {
                r.err(&v.span(), &format!("{path}.security.{key}"), format!("{:?} is not an absolute path of a file (without <, >, &, quotes); give one, e.g. as scripts/make-test-pki.sh prints it", v.get_ref()));
                None
            }
        };
        let ca = file(&s.ca, "ca");
        let certificate = file(&s.certificate, "certificate");
        let private_key = file(&s.private_key, "private_key");
        let permissions_ca = match &s.permissions_ca {
            Some(p) => file(p, "permissions_ca"),
            None => ca.clone(),
        };
        let governance = file(&s.governance, "governance");
        let permissions = file(&s.permissions, "permissions");
        match (ca, certificate, private_key, permissions_ca, governance, permissions) {
            (Some(ca), Some(certificate), Some(private_key), Some(permissions_ca), Some(governance), Some(permissions)) => {
                up.security = Some(UplinkSecurity { ca, certificate, private_key, permissions_ca, governance, permissions })
            }
            _ => ok = false,
        }
    }
    let subnet = up.subnet();
    if address == subnet.base() || u32::from(address) == u32::from(subnet.base()) | !(u32::MAX << (32 - prefix)) {
        r.err(&u.address.span(), &format!("{path}.address"), format!("{address} is the network or broadcast address of {subnet}; give a host address in it"));
        ok = false;
    }
    if let Some((s, owner)) = own.iter().find(|(s, _)| s.overlaps(&subnet)) {
        r.err(&u.address.span(), &format!("{path}.address"), format!("{subnet} overlaps {s}, {owner}; give the uplink an address of the real network, outside partita's own networks (or move those with `subnet`)"));
        ok = false;
    }
    if let Some(other) = addresses.insert(address, path.to_string()) {
        r.err(&u.address.span(), &format!("{path}.address"), format!("{address} is also {other}'s; give each uplink and peer its own address"));
        ok = false;
    }
    if let Some(g) = &u.gateway {
        match g.get_ref().parse::<Ipv4Addr>() {
            Ok(a) if subnet.contains(a) && a != address => up.gateway = Some(a),
            _ => {
                r.err(&g.span(), &format!("{path}.gateway"), format!("{:?} is not an address in {subnet} other than the uplink's own; give the router on that network, or remove the key", g.get_ref()));
                ok = false;
            }
        }
    }
    if let Some(m) = &u.mtu {
        let v = *m.get_ref();
        if (MIN_MTU..=MAX_MTU).contains(&v) {
            up.mtu = Some(v as u32);
        } else {
            r.err(&m.span(), &format!("{path}.mtu"), format!("{v} is not an MTU; give {MIN_MTU} to {MAX_MTU} bytes, or remove the key to keep the interface's"));
            ok = false;
        }
    }
    if let Some(d) = &u.domain {
        match u32::try_from(*d.get_ref()).ok().and_then(DomainId::new) {
            Some(id) if avoid_domains.contains(&id.get()) => {
                r.err(&d.span(), &format!("{path}.domain"), format!("domain {id} is already carried by this member's V-NICs, and a DDS program holds one configuration per domain; give the uplink a domain of its own (the default is {default_domain})"));
                ok = false;
            }
            Some(id) => up.domain = id,
            None => {
                r.err(&d.span(), &format!("{path}.domain"), format!("{} is not a DDS domain id; use 0 to {}", d.get_ref(), DomainId::MAX));
                ok = false;
            }
        }
    }
    // Cyclone's access-control plugin reads domain ids up to 230 in governance and permissions documents.
    if let (Some(sec), true) = (&u.security, up.domain.get() > 230) {
        r.err(&sec.span(), &format!("{path}.security"), format!("domain {} is above 230, the highest DDS Security's documents can name; give the uplink a domain of 230 or less", up.domain));
        ok = false;
    }
    ok.then_some(up)
}

/// An interface of the machine a part is brought up on, as the uplink checks need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInterface {
    pub name: String,
    /// Linux's link kind (`bridge`, `veth`, `macvlan`...), empty for a plain device.
    pub kind: String,
    /// The bridge or bond it is a port of.
    pub master: Option<String>,
    /// Its IPv4 addresses with prefix lengths.
    pub addresses: Vec<(Ipv4Addr, u8)>,
    /// It carries the namespace's default route.
    pub default_route: bool,
}

/// The interfaces of the network namespace this process runs in (`ip -j -d addr`, `ip -j route show default`).
pub fn interfaces_here() -> Result<Vec<HostInterface>, String> {
    #[derive(Deserialize)]
    struct Link {
        ifname: String,
        master: Option<String>,
        linkinfo: Option<LinkInfo>,
        #[serde(default)]
        addr_info: Vec<Addr>,
    }
    #[derive(Deserialize)]
    struct LinkInfo {
        info_kind: Option<String>,
    }
    #[derive(Deserialize)]
    struct Addr {
        family: String,
        local: String,
        prefixlen: u8,
    }
    #[derive(Deserialize)]
    struct Route {
        dev: Option<String>,
    }
    let run = |args: &[&str]| -> Result<String, String> {
        let out = std::process::Command::new("ip").args(args).output().map_err(|e| format!("ip {}: {e} (install iproute2)", args.join(" ")))?;
        if !out.status.success() {
            return Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let links: Vec<Link> = serde_json::from_str(&run(&["-j", "-d", "addr", "show"])?).map_err(|e| format!("ip -j -d addr show: {e}"))?;
    let routes: Vec<Route> = serde_json::from_str(&run(&["-j", "-4", "route", "show", "default"])?).map_err(|e| format!("ip -j route show default: {e}"))?;
    Ok(links
        .into_iter()
        .map(|l| HostInterface {
            default_route: routes.iter().any(|r| r.dev.as_deref() == Some(&l.ifname)),
            kind: l.linkinfo.and_then(|i| i.info_kind).unwrap_or_default(),
            master: l.master,
            addresses: l.addr_info.iter().filter(|a| a.family == "inet").filter_map(|a| Some((a.local.parse().ok()?, a.prefixlen))).collect(),
            name: l.ifname,
        })
        .collect())
}

/// Checks the uplinks of `system` (a part, or a system on one machine) against the interfaces of the machine
/// it is to come up on: each interface exists, is not one of partita's, holds no address of a partita
/// network, is no bridge's port when it moves, and is not the host's own connection (its default route or its
/// only address) unless the file allows that loss by name. Errors name the file and the uplink's field.
pub fn check_on_machine(system: &System, machine: &[HostInterface]) -> Result<(), Errors> {
    let mut errors = Vec::new();
    let own: Vec<Subnet> = std::iter::once(system.network.subnet).chain(system.modules.iter().map(|m| m.network.subnet)).collect();
    for (owner, u) in system.uplinks() {
        let path = uplink_path(system, owner);
        let mut err = |field: &str, why: String| {
            errors.push(Diagnostic { file: system.source.clone(), line: 1, column: 1, path: format!("{path}.{field}"), problem: Problem::BadValue(why) })
        };
        let Some(i) = machine.iter().find(|i| i.name == u.interface) else {
            let names: Vec<&str> = machine.iter().map(|i| i.name.as_str()).filter(|n| *n != "lo" && !crate::names::is_link_name(n)).collect();
            err("interface", format!("there is no interface {} on this machine (its interfaces: {}); name one `ip link` shows", u.interface, if names.is_empty() { "none but lo".into() } else { names.join(", ") }));
            continue;
        };
        if i.kind == "bridge" && crate::names::is_link_name(&i.name) {
            err("interface", format!("{} is a bridge of partita's; name a host interface of the real network", i.name));
        }
        if let Some((a, p)) = i.addresses.iter().find(|(a, _)| own.iter().any(|s| s.contains(*a))) {
            err("interface", format!("{} carries {a}/{p}, an address of one of this system's networks; give those networks other subnets or clear the address", i.name));
        }
        if u.mode == UplinkMode::Move {
            if let Some(m) = &i.master {
                err("interface", format!("{} is a port of {m}; moving it would take it out of {m}; use mode = \"macvlan\", or name an interface that is no port", i.name));
            }
        }
        let others_global = machine.iter().any(|o| o.name != i.name && o.name != "lo" && o.addresses.iter().any(|(a, _)| !a.is_loopback() && !a.is_link_local()));
        let only_address = !i.addresses.is_empty() && !others_global;
        if let Some(sec) = &u.security {
            for (key, file) in sec.files() {
                if let Err(why) = security_file_problem(key, file) {
                    errors.push(Diagnostic { file: system.source.clone(), line: 1, column: 1, path: format!("{path}.security.{key}"), problem: Problem::BadValue(format!("{}: {why}; scripts/make-test-pki.sh makes a test set", file.display())) });
                }
            }
        }
        let mut err = |field: &str, why: String| {
            errors.push(Diagnostic { file: system.source.clone(), line: 1, column: 1, path: format!("{path}.{field}"), problem: Problem::BadValue(why) })
        };
        if (i.default_route || only_address) && !u.allow_host_connection_loss {
            let what = if i.default_route { "carries this machine's default route" } else { "holds this machine's only address" };
            let how = if u.mode == UplinkMode::Move { "moving it" } else { "stacking a child interface on it" };
            err("interface", format!("{} {what}: {how} can cut the host off its own network; name another interface, or, knowing that the host may lose its connection, set allow_host_connection_loss = true", i.name));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Errors(errors))
    }
}

/// Why `file` cannot be the DDS Security file `key`: unreadable, or not what the key needs (a PEM certificate, a
/// PEM private key, an S/MIME or PKCS#7 signed document).
fn security_file_problem(key: &str, file: &std::path::Path) -> Result<(), String> {
    let text = std::fs::read(file).map_err(|e| format!("cannot be read ({e})"))?;
    let text = String::from_utf8_lossy(&text);
    let (ok, what) = match key {
        "ca" | "certificate" | "permissions_ca" => (text.contains("-----BEGIN CERTIFICATE-----"), "a PEM certificate"),
        "private_key" => (text.contains("PRIVATE KEY-----"), "a PEM private key"),
        _ => (text.contains("application/x-pkcs7-signature") || text.contains("application/pkcs7-signature") || text.contains("-----BEGIN PKCS7-----"), "a document signed with S/MIME (openssl smime -sign)"),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("is not {what}"))
    }
}

/// The field path of the uplink of partition or node `owner`.
pub fn uplink_path(system: &System, owner: &str) -> String {
    match system.partitions().find(|(_, p)| p.name == owner) {
        Some((m, p)) => format!("module[{}].partition[{}].uplink", m.name, p.name),
        None => format!("node[{owner}].uplink"),
    }
}

/// Why a system cannot come up on this machine as asked.
#[derive(Debug, thiserror::Error)]
pub enum PartError {
    #[error("{0}")]
    Host(String),
    #[error("{0}")]
    Machine(Errors),
    #[error("{0}: reading this machine's interfaces: {1}")]
    Interfaces(String, String),
}

/// The system, or its part on `host`, as it is to come up on this machine: a system spanning hosts needs
/// `host`; its uplinks are checked against this machine's interfaces ([`check_on_machine`]).
pub fn for_this_machine(system: System, host: Option<&str>) -> Result<System, PartError> {
    let system = match host {
        Some(h) => system.part(h).map_err(PartError::Host)?,
        None if !system.hosts.is_empty() => {
            return Err(PartError::Host(format!(
                "{} spans hosts {}: say which part runs on this machine with --host NAME",
                system.source,
                system.hosts.join(", ")
            )))
        }
        None => system,
    };
    if system.uplinks().next().is_some() {
        let here = interfaces_here().map_err(|e| PartError::Interfaces(system.source.clone(), e))?;
        check_on_machine(&system, &here).map_err(PartError::Machine)?;
    }
    Ok(system)
}
