//! The per-launch archive: what differs between VM partitions (and between two launches of one), appended to
//! the base initramfs. It is small (a few kB) and built for every start.
//!
//! | path in the guest | contents |
//! |---|---|
//! | `/etc/partita/env` | `export NAME='value'` lines: the partition's `PARTITA_*` variables ([`partita_env::PartitionEnv::vars`]), `CYCLONEDDS_URI=file:///etc/partita/dds.xml`, then the system file's own variables |
//! | `/etc/partita/dds.xml` | the Cyclone DDS configuration: one domain per V-NIC, on that NIC's guest name, unicast peers, no multicast |
//! | `/etc/partita/router.toml` | an I/O partition's router file ([`LaunchSpec::router_file`]); `PARTITA_ROUTER_FILE` names it |
//! | `/etc/partita/net` | one `MAC NAME ADDRESS/PREFIX` line per NIC; `/init` finds each NIC by its MAC and renames it |
//! | `/etc/partita/command` | `set -- 'arg0' 'arg1' …`: the command, each argument single-quoted, so spaces, quotes, `$` and newlines arrive unchanged |
//! | the state directory | created empty when the environment names one; the guest's root is in memory, so nothing in it outlives the VM |
//!
//! A command whose program is `partita` (by that name or any path ending in `/partita`) runs the guest's own
//! partita binary, `/usr/bin/partita`.
use crate::cpio;
use crate::init::{self, shell_quote};
use partita_env::PartitionEnv;
use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: {source}")]
    Io { path: std::path::PathBuf, source: std::io::Error },
}

/// An Ethernet address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// A locally administered unicast address derived from the host-side interface name (the tap), so each
    /// guest NIC on a bridge has its own, and the same across restarts: `02:` then 40 bits of FNV-1a.
    pub fn for_interface(host_name: &str) -> MacAddr {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in host_name.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
        let b = h.to_be_bytes();
        MacAddr([0x02, b[3], b[4], b[5], b[6], b[7]])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl std::str::FromStr for MacAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let bad = || format!("{s:?} is not a MAC address (six hexadecimal bytes separated by `:`)");
        if parts.len() != 6 {
            return Err(bad());
        }
        let mut b = [0u8; 6];
        for (d, p) in b.iter_mut().zip(parts) {
            if p.len() != 2 {
                return Err(bad());
            }
            *d = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        Ok(MacAddr(b))
    }
}

/// One NIC of the guest: a virtio-net device on a tap the runner was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestNic {
    /// Its name inside the guest (`vnic0`, like a process partition's V-NIC).
    pub name: String,
    /// Its address; the runner gives QEMU the same one for the tap's descriptor.
    pub mac: MacAddr,
    pub address: Ipv4Addr,
    pub prefix: u8,
    /// The DDS domain on this NIC, and its unicast discovery peers (the other members of its network; none:
    /// the NIC's own address, so participants inside the guest still find each other).
    pub domain: u32,
    pub peers: Vec<Ipv4Addr>,
}

/// Whether `a` is in 198.18.0.0/15, the only range partita puts on its own networks.
pub fn is_project_address(a: Ipv4Addr) -> bool {
    let o = a.octets();
    o[0] == 198 && (o[1] == 18 || o[1] == 19)
}

/// Everything that differs per launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchSpec {
    /// The supervisor's variables; `cyclonedds_uri` is replaced by the guest's file.
    pub env: PartitionEnv,
    /// The system file's own variables for the partition.
    pub extra_env: Vec<(String, String)>,
    pub nics: Vec<GuestNic>,
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// Programs of the host put in the guest at the same path, with the shared libraries they need (a
    /// command that neither busybox nor partita provides, such as Cyclone DDS's `ddsperf`).
    pub programs: Vec<std::path::PathBuf>,
    /// An I/O partition's router file (its text), put at [`GUEST_ROUTER_FILE`].
    pub router_file: Option<String>,
}

/// Adds host programs to an archive at their own paths, each with the shared libraries `ldd` names and their
/// directories; `copied` holds the paths already in the archive (each is added once).
fn add_programs<W: std::io::Write>(w: &mut cpio::Writer<W>, programs: &[PathBuf], copied: &mut std::collections::BTreeSet<String>) -> Result<(), LaunchError> {
    let io = |e: std::io::Error| LaunchError::Invalid(format!("building the archive: {e}"));
    for program in programs {
        let libs = crate::image::shared_libraries(program).map_err(|e| LaunchError::Invalid(format!("program {}: {e}", program.display())))?;
        for file in std::iter::once(program.clone()).chain(libs) {
            let Some(rel) = file.to_str().and_then(guest_path) else {
                return Err(LaunchError::Invalid(format!("{}: not an absolute UTF-8 path inside /", file.display())));
            };
            if !copied.insert(rel.clone()) {
                continue;
            }
            let mut at = String::new();
            for part in rel.split('/').take(rel.split('/').count() - 1) {
                at = if at.is_empty() { part.to_string() } else { format!("{at}/{part}") };
                if copied.insert(at.clone()) {
                    w.dir(&at, 0o755).map_err(io)?;
                }
            }
            let data = std::fs::read(&file).map_err(|e| LaunchError::Invalid(format!("reading {}: {e}", file.display())))?;
            w.file(&rel, 0o755, &data).map_err(io)?;
        }
    }
    Ok(())
}

/// An archive of host programs with their libraries, for a system file's `vm.initramfs`: programs a guest
/// command starts itself (from a shell line, say), which partita copies only when they are the command.
pub fn programs_archive(programs: &[PathBuf]) -> Result<Vec<u8>, LaunchError> {
    let mut w = cpio::Writer::new(Vec::new());
    add_programs(&mut w, programs, &mut std::collections::BTreeSet::new())?;
    w.finish().map_err(|e| LaunchError::Invalid(format!("building the archive: {e}")))
}

/// Where an absolute path of the host goes in the archive: relative to `/`, `.` and `..` resolved by name
/// (a library found through `$ORIGIN/../lib` lands where the loader will look for it); `None` for a relative
/// path or one that climbs above `/`.
fn guest_path(host: &str) -> Option<String> {
    let rest = host.strip_prefix('/')?;
    let mut parts: Vec<&str> = Vec::new();
    for c in rest.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The guest's `CYCLONEDDS_URI`.
pub const GUEST_DDS_URI: &str = "file:///etc/partita/dds.xml";
/// Where an I/O partition's router file is in the guest (`PARTITA_ROUTER_FILE`).
pub const GUEST_ROUTER_FILE: &str = "/etc/partita/router.toml";

impl LaunchSpec {
    /// The Cyclone DDS configuration: one domain per NIC on its guest name (the DDS layer's settings for a
    /// named interface, as the supervisor writes them for process partitions). `None` without NICs.
    pub fn dds_xml(&self) -> Result<Option<String>, LaunchError> {
        if self.nics.is_empty() {
            return Ok(None);
        }
        let configs: Vec<partita_dds::DomainConfig> = self
            .nics
            .iter()
            .map(|n| {
                let peers = if n.peers.is_empty() { vec![n.address.to_string()] } else { n.peers.iter().map(|p| p.to_string()).collect() };
                partita_dds::DomainConfig::on_interface(n.domain, partita_dds::Interface::Named(n.name.clone()), peers)
            })
            .collect();
        let names = self.nics.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ");
        partita_dds::config::document(&configs).map(Some).map_err(|e| LaunchError::Invalid(format!("NICs {names}: {e}")))
    }

    fn check(&self) -> Result<(), LaunchError> {
        let bad = |m: String| Err(LaunchError::Invalid(m));
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return bad("the command is empty: give the program to run in the guest".into());
        }
        if let Some(a) = self.argv.iter().find(|a| a.contains('\0')) {
            return bad(format!("argument {a:?} contains a NUL byte"));
        }
        for (k, v) in self.env.vars().iter().chain(&self.extra_env) {
            if !init::is_variable_name(k) {
                return bad(format!("environment variable name {k:?}: letters, digits and `_`, not starting with a digit"));
            }
            if v.contains('\0') {
                return bad(format!("environment variable {k}: its value contains a NUL byte"));
            }
        }
        for (i, n) in self.nics.iter().enumerate() {
            if !partita_os::tap::is_interface_name(&n.name) {
                return bad(format!("NIC name {:?} is not an interface name (1 to 15 of [A-Za-z0-9_.-])", n.name));
            }
            if n.prefix == 0 || n.prefix > 32 {
                return bad(format!("NIC {}: prefix /{} is not 1..=32", n.name, n.prefix));
            }
            if n.mac.0[0] & 1 != 0 {
                return bad(format!("NIC {}: {} is a multicast MAC address", n.name, n.mac));
            }
            if let Some(a) = std::iter::once(&n.address).chain(&n.peers).find(|a| !is_project_address(**a)) {
                return bad(format!("NIC {}: {a} is outside 198.18.0.0/15, the range of partita's own networks", n.name));
            }
            if self.nics[..i].iter().any(|o| o.name == n.name || o.mac == n.mac) {
                return bad(format!("NIC {}: two NICs share its name or MAC address {}", n.name, n.mac));
            }
        }
        Ok(())
    }

    /// The archive, uncompressed (it is a few kB).
    pub fn archive(&self) -> Result<Vec<u8>, LaunchError> {
        self.check()?;
        let io = |e: std::io::Error| LaunchError::Invalid(format!("building the archive: {e}"));
        let mut w = cpio::Writer::new(Vec::new());
        w.dir("etc", 0o755).map_err(io)?;
        w.dir("etc/partita", 0o755).map_err(io)?;

        let mut env = String::new();
        for (k, v) in self.env.vars() {
            let v = match k.as_str() {
                partita_env::CYCLONEDDS_URI => GUEST_DDS_URI.to_string(),
                partita_env::ROUTER_FILE => GUEST_ROUTER_FILE.to_string(),
                _ => v,
            };
            env.push_str(&format!("export {k}={}\n", shell_quote(&v)));
        }
        for (k, v) in &self.extra_env {
            env.push_str(&format!("export {k}={}\n", shell_quote(v)));
        }
        w.file(init::ENV_FILE, 0o644, env.as_bytes()).map_err(io)?;

        if let Some(xml) = self.dds_xml()? {
            w.file(init::DDS_FILE, 0o644, xml.as_bytes()).map_err(io)?;
        }
        if let Some(text) = &self.router_file {
            w.file(init::ROUTER_FILE, 0o644, text.as_bytes()).map_err(io)?;
        }
        if !self.nics.is_empty() {
            let net: String = self.nics.iter().map(|n| format!("{} {} {}/{}\n", n.mac, n.name, n.address, n.prefix)).collect();
            w.file(init::NET_FILE, 0o644, net.as_bytes()).map_err(io)?;
        }

        let mut argv = self.argv.clone();
        if argv[0] == "partita" || argv[0].ends_with("/partita") {
            argv[0] = init::GUEST_PARTITA.to_string();
        }
        let command = format!("set -- {}\n", argv.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" "));
        w.file(init::COMMAND_FILE, 0o644, command.as_bytes()).map_err(io)?;

        let mut copied = std::collections::BTreeSet::new();
        add_programs(&mut w, &self.programs, &mut copied)?;
        if let Some(state) = &self.env.state_dir {
            let rel = state.trim_start_matches('/');
            if !rel.is_empty() && !rel.split('/').any(|c| c.is_empty() || c == "..") {
                let mut at = String::new();
                for part in rel.split('/') {
                    at = if at.is_empty() { part.to_string() } else { format!("{at}/{part}") };
                    w.dir(&at, 0o755).map_err(io)?;
                }
            }
        }
        w.finish().map_err(io)
    }

    /// Writes the archive to `path` atomically (a temporary file beside it, then a rename).
    pub fn write_archive(&self, path: &Path) -> Result<(), LaunchError> {
        let bytes = self.archive()?;
        let tmp = path.with_file_name(format!(".{}.{}.tmp", path.file_name().and_then(|n| n.to_str()).unwrap_or("launch.cpio"), std::process::id()));
        let io = |source| LaunchError::Io { path: path.to_path_buf(), source };
        std::fs::write(&tmp, bytes).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(|source| {
            let _ = std::fs::remove_file(&tmp);
            LaunchError::Io { path: path.to_path_buf(), source }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn env() -> PartitionEnv {
        PartitionEnv { partition: "p1".into(), module: "m".into(), domain: 3, external_domain: None, uplink_domain: None, router_file: None, cyclonedds_uri: "file:///run/partita/dds.xml".into(), fastdds_profile: None, state_dir: Some("/var/lib/partita/s/p1".into()), ports: Vec::new() }
    }

    fn nic() -> GuestNic {
        GuestNic { name: "vnic0".into(), mac: MacAddr::for_interface("pt9f00v1"), address: "198.18.0.2".parse().unwrap(), prefix: 24, domain: 3, peers: vec!["198.18.0.1".parse().unwrap()] }
    }

    #[test]
    fn macs_are_local_unicast_and_differ_per_tap() {
        let a = MacAddr::for_interface("pt1234m0n1");
        assert_eq!(a.0[0], 0x02);
        assert_ne!(a, MacAddr::for_interface("pt1234m0n2"));
        assert_eq!(a, a.to_string().parse().unwrap());
        assert!("02:00:00:00:00".parse::<MacAddr>().is_err() && "02:00:00:00:00:0g".parse::<MacAddr>().is_err());
    }

    #[test]
    fn the_archive_carries_env_network_dds_and_command() {
        let spec = LaunchSpec { env: env(), extra_env: vec![("RUST_LOG".into(), "debug".into())], nics: vec![nic()], argv: vec!["/opt/x/partita".into(), "app".into(), "it's a test".into()], programs: Vec::new(), router_file: None };
        let a = spec.archive().unwrap();
        let entries = cpio::entries(&a).unwrap();
        let get = |name: &str| {
            let e = entries.iter().find(|e| e.name == name).unwrap_or_else(|| panic!("{name}"));
            String::from_utf8(a[e.offset..e.offset + e.size].to_vec()).unwrap()
        };
        let env = get(init::ENV_FILE);
        assert!(env.contains("export PARTITA_PARTITION='p1'\n") && env.contains("export CYCLONEDDS_URI='file:///etc/partita/dds.xml'\n"), "{env}");
        assert!(env.contains("export RUST_LOG='debug'\n"));
        assert!(get(init::NET_FILE).ends_with(" vnic0 198.18.0.2/24\n"));
        let xml = get(init::DDS_FILE);
        assert!(xml.contains("<Domain id=\"3\">") && xml.contains("name=\"vnic0\"") && xml.contains("<Peer address=\"198.18.0.1\"/>"), "{xml}");
        assert_eq!(get(init::COMMAND_FILE), "set -- '/usr/bin/partita' 'app' 'it'\\''s a test'\n");
        assert!(entries.iter().any(|e| e.name == "var/lib/partita/s/p1" && e.mode & cpio::S_IFMT == cpio::S_IFDIR));
    }

    #[test]
    fn an_io_partitions_router_file_is_in_the_guest_where_its_variable_points() {
        let env = PartitionEnv { router_file: Some("/run/partita/s/p1.router.toml".into()), ..env() };
        let spec = LaunchSpec { env, extra_env: vec![], nics: vec![nic()], argv: vec!["true".into()], programs: Vec::new(), router_file: Some("name = \"p1\"\n".into()) };
        let a = spec.archive().unwrap();
        let entries = cpio::entries(&a).unwrap();
        let get = |name: &str| entries.iter().find(|e| e.name == name).map(|e| String::from_utf8(a[e.offset..e.offset + e.size].to_vec()).unwrap());
        assert_eq!(get(init::ROUTER_FILE).as_deref(), Some("name = \"p1\"\n"));
        assert_eq!(format!("/{}", init::ROUTER_FILE), GUEST_ROUTER_FILE);
        let vars = get(init::ENV_FILE).unwrap();
        assert!(vars.contains("export PARTITA_ROUTER_FILE='/etc/partita/router.toml'\n") && !vars.contains("/run/partita/s"), "{vars}");
    }

    #[test]
    fn a_host_program_comes_with_the_libraries_it_links() {
        let program = std::path::PathBuf::from("/usr/bin/ddsperf");
        let spec = LaunchSpec { env: env(), extra_env: vec![], nics: vec![], argv: vec![program.display().to_string()], programs: vec![program.clone()], router_file: None };
        let a = spec.archive().unwrap();
        let entries = cpio::entries(&a).unwrap();
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        let libs = crate::image::shared_libraries(&program).unwrap();
        assert!(libs.iter().any(|l| l.to_string_lossy().contains("libddsc")), "{libs:?}");
        for f in std::iter::once(&program).chain(&libs) {
            let name = guest_path(f.to_str().unwrap()).unwrap();
            let name = name.as_str();
            let e = entries.iter().find(|e| e.name == name).unwrap_or_else(|| panic!("{name} in {names:?}"));
            assert_eq!(e.size as u64, std::fs::metadata(f).unwrap().len(), "{name} whole");
            let parent = name.rsplit_once('/').unwrap().0;
            assert!(entries.iter().any(|e| e.name == parent && e.mode & cpio::S_IFMT == cpio::S_IFDIR), "{parent} before {name}");
        }
        assert_eq!(names.len(), names.iter().collect::<std::collections::BTreeSet<_>>().len(), "each entry once");
        assert_eq!(guest_path("/usr/bin/../lib/x/libddsc.so").as_deref(), Some("usr/lib/x/libddsc.so"));
        assert_eq!((guest_path("/a/../../etc"), guest_path("lib/x"), guest_path("/")), (None, None, None));
        let missing = LaunchSpec { programs: vec!["/no/such/program".into()], ..spec };
        assert!(missing.archive().unwrap_err().to_string().contains("/no/such/program"));
    }

    #[test]
    fn mistakes_are_refused_with_what_to_fix() {
        let base = LaunchSpec { env: env(), extra_env: vec![], nics: vec![nic()], argv: vec!["true".into()], programs: Vec::new(), router_file: None };
        let refuse = |f: &dyn Fn(&mut LaunchSpec), what: &str| {
            let mut s = base.clone();
            f(&mut s);
            let e = s.archive().unwrap_err().to_string();
            assert!(e.contains(what), "{e} should say {what}");
        };
        refuse(&|s| s.argv.clear(), "command is empty");
        refuse(&|s| s.extra_env.push(("A-B".into(), "x".into())), "variable name");
        refuse(&|s| s.nics[0].address = "10.0.0.1".parse().unwrap(), "outside 198.18.0.0/15");
        refuse(&|s| s.nics[0].peers.push("192.168.1.1".parse().unwrap()), "outside 198.18.0.0/15");
        refuse(&|s| s.nics[0].prefix = 33, "prefix");
        refuse(&|s| s.nics.push(nic()), "share");
        refuse(&|s| s.nics[0].name = "no spaces allowed".into(), "interface name");
    }

    #[test]
    fn a_nic_without_peers_discovers_on_its_own_address() {
        let mut n = nic();
        n.peers.clear();
        let spec = LaunchSpec { env: env(), extra_env: vec![], nics: vec![n], argv: vec!["true".into()], programs: Vec::new(), router_file: None };
        let xml = spec.dds_xml().unwrap().unwrap();
        assert!(xml.contains("<Peer address=\"198.18.0.2\"/>"), "{xml}");
    }
}
