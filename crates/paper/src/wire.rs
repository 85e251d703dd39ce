//! Two machines on one: network namespaces `<tag>a` and `<tag>b`, each with an `eth1` on a wire (two veth pairs
//! on a bridge in a third namespace, `<tag>s`, the switch), for the tests and the benchmark of uplinks
//! (docs/deployment.md). The near machine (`a`) also has a second interface with an address, so that `eth1` is
//! not its only one. Everything is in namespaces of its own with addresses from 198.18.0.0/15; dropping it runs
//! `partita down` on each machine (what is left of systems whose supervisor is gone) and deletes the namespaces.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub struct TwoMachines {
    tag: String,
    partita: PathBuf,
}

/// Runs `ip ARGS`; its standard output, or what it said when it failed.
pub fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
    if !out.status.success() {
        return Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The address the near machine's eth1 holds before anything is handed over.
pub const NEAR_ETH1_ADDRESS: &str = "198.19.201.1/24";

impl TwoMachines {
    /// Builds the machines and the wire. `partita` is the binary each machine's commands run.
    pub fn new(tag: &str, partita: &Path) -> Result<TwoMachines, String> {
        let m = TwoMachines { tag: tag.to_string(), partita: partita.to_path_buf() };
        for n in [m.near(), m.far(), m.switch()] {
            let _ = Command::new("ip").args(["netns", "del", &n]).stderr(Stdio::null()).status();
            ip(&["netns", "add", &n])?;
            ip(&["-n", &n, "link", "set", "lo", "up"])?;
        }
        let (near, far, switch) = (m.near(), m.far(), m.switch());
        ip(&["-n", &switch, "link", "add", "sw", "type", "bridge"])?;
        ip(&["-n", &switch, "link", "set", "sw", "up"])?;
        for (host, port) in [(&near, "pa"), (&far, "pb")] {
            ip(&["-n", &switch, "link", "add", port, "type", "veth", "peer", "name", "eth1", "netns", host])?;
            ip(&["-n", &switch, "link", "set", port, "master", "sw", "up"])?;
        }
        // The near machine's eth1 as a user would have it: an address, an MTU, a route through it, up.
        ip(&["-n", &near, "addr", "add", NEAR_ETH1_ADDRESS, "dev", "eth1"])?;
        ip(&["-n", &near, "link", "set", "eth1", "mtu", "1400", "up"])?;
        ip(&["-n", &near, "route", "add", "198.19.251.0/24", "via", "198.19.201.9", "dev", "eth1"])?;
        ip(&["-n", &far, "link", "set", "eth1", "up"])?;
        ip(&["-n", &near, "link", "add", "spare0", "type", "veth", "peer", "name", "spare1"])?;
        ip(&["-n", &near, "addr", "add", "198.19.250.1/24", "dev", "spare0"])?;
        Ok(m)
    }
    /// The near machine's namespace (the camera's).
    pub fn near(&self) -> String {
        format!("{}a", self.tag)
    }
    /// The far machine's namespace (the monitor's).
    pub fn far(&self) -> String {
        format!("{}b", self.tag)
    }
    /// The switch's namespace; its ports to the machines are `pa` and `pb`.
    pub fn switch(&self) -> String {
        format!("{}s", self.tag)
    }
    /// `partita` to run on machine `ns` (only its network namespace differs).
    pub fn partita(&self, ns: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{ns}")).arg(&self.partita);
        c
    }
    /// `partita up --host HOST FILE --duration SECONDS` on machine `ns`, its standard error in `err`.
    pub fn up(&self, ns: &str, host: &str, file: &Path, seconds: u32, err: &Path) -> std::io::Result<Child> {
        self.partita(ns)
            .args(["up", "--host", host, &file.display().to_string(), "--duration", &seconds.to_string()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(err)?)
            .spawn()
    }
    /// What eth1 of machine `ns` is (addresses, MTU, link state, routes); `None` when it is not there.
    pub fn eth1(&self, ns: &str) -> Option<String> {
        let addrs = ip(&["-n", ns, "-o", "-4", "addr", "show", "dev", "eth1"]).ok()?;
        let link = ip(&["-n", ns, "-o", "link", "show", "dev", "eth1"]).ok()?;
        let mtu = link.split_whitespace().skip_while(|w| *w != "mtu").nth(1).unwrap_or("?").to_string();
        let up = link.contains(",UP") || link.contains("<UP");
        let addrs: Vec<String> = addrs.lines().filter_map(|l| l.split_whitespace().nth(3).map(String::from)).collect();
        let routes = ip(&["-n", ns, "-4", "route", "show", "dev", "eth1"]).ok()?.lines().map(|l| l.trim().to_string()).collect::<Vec<_>>().join("; ");
        Some(format!("addresses {addrs:?} mtu {mtu} up {up} routes [{routes}]"))
    }
}

impl Drop for TwoMachines {
    fn drop(&mut self) {
        for ns in [self.near(), self.far()] {
            let _ = self.partita(&ns).arg("down").stdout(Stdio::null()).stderr(Stdio::null()).status();
        }
        for n in [self.near(), self.far(), self.switch()] {
            let _ = Command::new("ip").args(["netns", "del", &n]).stderr(Stdio::null()).status();
        }
    }
}
