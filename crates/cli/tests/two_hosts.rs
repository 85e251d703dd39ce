//! One system over two machines (root; docs/deployment.md): each "machine" is a network namespace of this test
//! with its own supervisor running `partita up --host NAME` of examples/video-surveillance-two-hosts.toml, the
//! two joined by a wire (veth pairs on a switch namespace, all 198.18.0.0/15). Frames asked for on the monitor's
//! host come from the recorder on the camera's host through its routing partition's uplink; each uplink comes
//! back to its host with its name, address, MTU, routes and link state on SIGTERM, on Ctrl-C, at the end of
//! `--duration`, after `kill -9` and `partita down`, and when `up` fails half-way; a cut wire stops the frames
//! and they come back when it is mended, without restarting anything.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::TempDir;

/// Each test's camera part runs a plan on CPU 0: two at once would share its windows and starve each other's
/// recorder, so the tests take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

const EXE: &str = env!("CARGO_BIN_EXE_partita");
const EXAMPLE: &str = include_str!("../../../examples/video-surveillance-two-hosts.toml");

/// Two machines and a switch between them, as network namespaces of this test: `<tag>a` (the camera's) and
/// `<tag>b` (the monitor's) each with an `eth1` on the wire, the camera's also with a second interface holding
/// an address (so that eth1 is not its only one). Removed on drop, after `partita down` on each machine.
struct Machines {
    tag: String,
}

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Machines {
    fn new(tag: &str) -> Machines {
        let m = Machines { tag: tag.to_string() };
        for n in [m.a(), m.b(), m.switch()] {
            let _ = Command::new("ip").args(["netns", "del", &n]).status();
            ip(&["netns", "add", &n]);
            ip(&["-n", &n, "link", "set", "lo", "up"]);
        }
        ip(&["-n", &m.switch(), "link", "add", "sw", "type", "bridge"]);
        ip(&["-n", &m.switch(), "link", "set", "sw", "up"]);
        for (host, port) in [(m.a(), "pa"), (m.b(), "pb")] {
            ip(&["-n", &m.switch(), "link", "add", port, "type", "veth", "peer", "name", "eth1", "netns", &host]);
            ip(&["-n", &m.switch(), "link", "set", port, "master", "sw", "up"]);
        }
        // The camera machine's eth1 as a user would have it: an address, an MTU, a route through it, up.
        ip(&["-n", &m.a(), "addr", "add", "198.19.201.1/24", "dev", "eth1"]);
        ip(&["-n", &m.a(), "link", "set", "eth1", "mtu", "1400", "up"]);
        ip(&["-n", &m.a(), "route", "add", "198.19.251.0/24", "via", "198.19.201.9", "dev", "eth1"]);
        ip(&["-n", &m.b(), "link", "set", "eth1", "up"]);
        ip(&["-n", &m.a(), "link", "add", "spare0", "type", "veth", "peer", "name", "spare1"]);
        ip(&["-n", &m.a(), "addr", "add", "198.19.250.1/24", "dev", "spare0"]);
        m
    }
    fn a(&self) -> String {
        format!("{}a", self.tag)
    }
    fn b(&self) -> String {
        format!("{}b", self.tag)
    }
    fn switch(&self) -> String {
        format!("{}s", self.tag)
    }
    /// `partita ARGS` run on machine `ns`.
    fn partita(&self, ns: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{ns}")).arg(EXE);
        c
    }
    /// What eth1 of machine `ns` is: addresses, MTU, link state, routes; `None` when it is not there.
    fn eth1(&self, ns: &str) -> Option<String> {
        let out = Command::new("ip").args(["-n", ns, "-o", "-4", "addr", "show", "dev", "eth1"]).output().unwrap();
        if !out.status.success() {
            return None;
        }
        let link = ip(&["-n", ns, "-o", "link", "show", "dev", "eth1"]);
        let mtu = link.split_whitespace().skip_while(|w| *w != "mtu").nth(1).unwrap_or("?").to_string();
        let up = link.contains(",UP") || link.contains("<UP");
        let addrs: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.split_whitespace().nth(3).map(String::from)).collect();
        let routes = ip(&["-n", ns, "-4", "route", "show", "dev", "eth1"]).lines().map(|l| l.trim().to_string()).collect::<Vec<_>>().join("; ");
        Some(format!("addresses {addrs:?} mtu {mtu} up {up} routes [{routes}]"))
    }
}

impl Drop for Machines {
    fn drop(&mut self) {
        for ns in [self.a(), self.b()] {
            let _ = self.partita(&ns).args(["down", "--force"]).stdout(Stdio::null()).stderr(Stdio::null()).status();
        }
        for n in [self.a(), self.b(), self.switch()] {
            let _ = Command::new("ip").args(["netns", "del", &n]).status();
        }
    }
}

/// The camera machine's eth1 before anything was handed over.
const CAMERA_ETH1: &str = "addresses [\"198.19.201.1/24\"] mtu 1400 up true routes [198.19.201.0/24 proto kernel scope link src 198.19.201.1; 198.19.251.0/24 via 198.19.201.9]";

/// The example under a system name of this test's own, with the monitor's command `monitor` (its arguments).
fn system_file(dir: &Path, name: &str, monitor: &[&str]) -> PathBuf {
    let cmd: Vec<String> = ["partita", "app", "monitor"].iter().chain(monitor).map(|a| format!("{a:?}")).collect();
    let text = EXAMPLE
        .replacen("name = \"vs-two-hosts\"", &format!("name = {name:?}"), 1)
        .replacen("command = [\"partita\", \"app\", \"monitor\"]", &format!("command = [{}]", cmd.join(", ")), 1);
    assert!(text.contains(&format!("name = {name:?}")));
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// `partita up --host HOST FILE` on machine `ns`, its standard error in `err`.
fn spawn_part(m: &Machines, ns: &str, host: &str, file: &Path, seconds: u32, err: &Path) -> Child {
    m.partita(ns)
        .args(["up", "--host", host, file.to_str().unwrap(), "--duration", &seconds.to_string()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .unwrap()
}

fn wait_for(limit: Duration, what: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if what() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    what()
}

fn signal(child: &Child, sig: i32) {
    // this test's own child: the supervisor (nsenter executes it in place)
    partita_os::process::send_signal(child.id() as i32, sig).unwrap();
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// The monitor's count of answered requests at each of its live lines (one a second; the count is cumulative).
fn answered(log: &Path) -> Vec<u64> {
    read(log).lines().filter(|l| l.starts_with("monitor:")).filter_map(|l| l.split_whitespace().nth(3)?.parse().ok()).collect()
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn frames_cross_the_wire_and_each_uplink_comes_back_on_sigterm_and_ctrl_c() {
    let _turn = turn();
    let tag = format!("ptw{}f", std::process::id());
    let m = Machines::new(&tag);
    let dir = TempDir::new("two-hosts", "frames");
    let name = format!("th{}f", std::process::id());
    let file = system_file(&dir.0, &name, &["--rate", "50", "--count", "0", "--duration", "60", "--connect-timeout", "30"]);
    assert_eq!(m.eth1(&m.a()).as_deref(), Some(CAMERA_ETH1));
    let check = m.partita(&m.a()).args(["check", "--host", "camera-host", file.to_str().unwrap()]).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    assert!(String::from_utf8_lossy(&check.stdout).contains("moves eth1 into routing's namespace as uplink0"));
    let (ea, eb) = (dir.0.join("a.err"), dir.0.join("b.err"));
    let a = spawn_part(&m, &m.a(), "camera-host", &file, 60, &ea);
    let state_a = PathBuf::from(format!("/run/partita/{name}.camera-host"));
    assert!(wait_for(Duration::from_secs(20), || state_a.join("state.json").exists()), "camera part up: {}", read(&ea));
    // the wire's end left the camera machine for the routing partition
    assert_eq!(m.eth1(&m.a()), None);
    let b = spawn_part(&m, &m.b(), "monitor-host", &file, 60, &eb);
    let monitor_log = PathBuf::from(format!("/run/partita/{name}.monitor-host/monitor.log"));
    let flowed = wait_for(Duration::from_secs(40), || answered(&monitor_log).last().is_some_and(|n| *n >= 20));
    let log = read(&monitor_log);
    signal(&b, libc::SIGTERM);
    let (mut a, mut b) = (a, b);
    let sb = b.wait().unwrap();
    assert!(flowed, "frames reached the monitor's host:\n{log}\ncamera: {}\nmonitor: {}", read(&ea), read(&eb));
    assert!(log.contains("answered"), "{log}");
    assert!(sb.success(), "{}", read(&eb));
    // SIGTERM: the monitor machine's eth1 is back (it had no address)
    assert!(m.eth1(&m.b()).is_some_and(|s| s.contains("addresses []") && s.contains("up true")), "{:?}", m.eth1(&m.b()));
    // Ctrl-C: the camera machine's eth1 is back as it was
    signal(&a, libc::SIGINT);
    let sa = a.wait().unwrap();
    assert!(sa.success(), "{}", read(&ea));
    assert_eq!(m.eth1(&m.a()).as_deref(), Some(CAMERA_ETH1), "{}", read(&ea));
    assert!(std::fs::read_dir("/run/partita/uplinks").map(|d| d.flatten().all(|e| !e.file_name().to_string_lossy().contains(&name))).unwrap_or(true));
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn an_uplink_comes_back_after_kill_9_and_down_when_up_fails_half_way_and_at_the_end_of_its_duration() {
    let _turn = turn();
    let tag = format!("ptw{}k", std::process::id());
    let m = Machines::new(&tag);
    let dir = TempDir::new("two-hosts", "kill");
    let name = format!("th{}k", std::process::id());
    let file = system_file(&dir.0, &name, &["--count", "5", "--quiet"]);
    // kill -9 of the supervisor, then `partita down` on that machine
    let ea = dir.0.join("a.err");
    let mut a = spawn_part(&m, &m.a(), "camera-host", &file, 60, &ea);
    let state_a = PathBuf::from(format!("/run/partita/{name}.camera-host"));
    assert!(wait_for(Duration::from_secs(20), || state_a.join("state.json").exists()), "{}", read(&ea));
    assert_eq!(m.eth1(&m.a()), None);
    signal(&a, libc::SIGKILL);
    a.wait().unwrap();
    assert_eq!(m.eth1(&m.a()), None, "still in the routing partition's namespace until `down`");
    let down = m.partita(&m.a()).arg("down").output().unwrap();
    let said = String::from_utf8_lossy(&down.stdout);
    assert!(down.status.success() && said.contains("uplink eth1 of routing"), "{said}{}", String::from_utf8_lossy(&down.stderr));
    assert_eq!(m.eth1(&m.a()).as_deref(), Some(CAMERA_ETH1));
    let left = ip(&["netns", "list"]);
    assert!(!left.contains(&format!("partita-{name}.")), "{left}");

    // `up` fails after the uplink was handed over: a namespace of a later member is taken already
    let with_blocker = format!("{}\n[[node]]\nname = \"blocker\"\nhost = \"monitor-host\"\ncommand = [\"sleep\", \"30\"]\n", read(&file));
    let blocked = dir.0.join("blocked.toml");
    std::fs::write(&blocked, with_blocker).unwrap();
    let taken = format!("partita-{name}.monitor-host-blocker");
    ip(&["netns", "add", &taken]);
    let up = m.partita(&m.b()).args(["up", "--host", "monitor-host", blocked.to_str().unwrap(), "--duration", "5"]).output().unwrap();
    ip(&["netns", "del", &taken]);
    let err = String::from_utf8_lossy(&up.stderr);
    assert!(!up.status.success() && err.contains("nothing was left behind"), "{err}");
    assert!(m.eth1(&m.b()).is_some_and(|s| s.contains("up true")), "{:?}\n{err}", m.eth1(&m.b()));
    assert!(!ip(&["netns", "list"]).contains(&format!("partita-{name}.monitor-host-monitor")));

    // the end of --duration
    let eb = dir.0.join("b.err");
    let mut b = spawn_part(&m, &m.b(), "monitor-host", &file, 3, &eb);
    assert!(b.wait().unwrap().success(), "{}", read(&eb));
    assert!(m.eth1(&m.b()).is_some_and(|s| s.contains("up true")), "{:?}", m.eth1(&m.b()));
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_cut_wire_stops_the_frames_and_they_resume_when_it_is_mended_with_the_plan_kept_all_along() {
    let _turn = turn();
    let tag = format!("ptw{}c", std::process::id());
    let m = Machines::new(&tag);
    let dir = TempDir::new("two-hosts", "cut");
    let name = format!("th{}c", std::process::id());
    let file = system_file(&dir.0, &name, &["--rate", "20", "--count", "0", "--duration", "120", "--timeout-ms", "300", "--connect-timeout", "30"]);
    let (ea, eb) = (dir.0.join("a.err"), dir.0.join("b.err"));
    let a = spawn_part(&m, &m.a(), "camera-host", &file, 120, &ea);
    let b = spawn_part(&m, &m.b(), "monitor-host", &file, 120, &eb);
    let monitor_log = PathBuf::from(format!("/run/partita/{name}.monitor-host/monitor.log"));
    let state_a = PathBuf::from(format!("/run/partita/{name}.camera-host/state.json"));
    let answered = || answered(&monitor_log);
    let frames = || -> u64 {
        let v: serde_json::Value = serde_json::from_str(&read(&state_a)).unwrap_or_default();
        v["frames"].as_array().and_then(|f| f.first()).and_then(|f| f.as_u64()).unwrap_or(0)
    };
    let flowed = wait_for(Duration::from_secs(40), || answered().last().is_some_and(|n| *n >= 20));
    // cut the wire at the switch
    ip(&["-n", &m.switch(), "link", "set", "pa", "down"]);
    let (seconds_before, frames_before) = (answered().len(), frames());
    // stopped: the count stays put for two live lines in a row, within a few seconds of the cut
    let stopped = wait_for(Duration::from_secs(10), || {
        let a = answered();
        a.len() >= seconds_before + 3 && a[a.len() - 3] == a[a.len() - 1]
    });
    let count_cut = answered().last().copied().unwrap_or(0);
    let frames_cut = frames();
    std::thread::sleep(Duration::from_secs(3));
    // mend it
    ip(&["-n", &m.switch(), "link", "set", "pa", "up"]);
    let (seconds_mended, frames_mended) = (answered().len(), frames());
    let resumed = wait_for(Duration::from_secs(40), || answered().iter().skip(seconds_mended).any(|n| *n > count_cut));
    let log = read(&monitor_log);
    let events = read(&PathBuf::from(format!("/run/partita/{name}.camera-host/events.jsonl")));
    for c in [&b, &a] {
        signal(c, libc::SIGTERM);
    }
    let (mut a, mut b) = (a, b);
    let (sa, sb) = (a.wait().unwrap(), b.wait().unwrap());
    assert!(flowed, "frames flowed before the cut:\n{log}\n{}\n{}", read(&ea), read(&eb));
    assert!(stopped, "no frames while the wire was cut:\n{log}");
    assert!(resumed, "frames came back once the wire was mended, nothing restarted:\n{log}");
    // the camera host's plan ran on through the cut (its frames counter went on), and no partition restarted
    assert!(frames_cut > frames_before && frames_mended > frames_cut, "frames {frames_before} → {frames_cut} → {frames_mended}");
    assert!(!events.contains("\"restart\""), "{events}");
    assert!(sa.success() && sb.success(), "{}\n{}", read(&ea), read(&eb));
    assert_eq!(m.eth1(&m.a()).as_deref(), Some(CAMERA_ETH1));
}

/// What a partition without the uplink tries: see it, route to it, find a neighbour on it, send to it.
const REACH_THE_UPLINK: &str = r#"{ echo "links: $(ip -o link | cut -d: -f2 | tr -d ' ' | tr '\n' ,)"; ip -o link >/dev/null; echo "list: $?"; ip route get 198.19.200.2 >/dev/null 2>&1; echo "route: $?"; echo "neighbours: $(ip neigh | grep -c 198.19.200)"; python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('198.19.200.2', 9))" 2>/dev/null; echo "send: $?"; echo done; } > "$PARTITA_STATE_DIR/out" 2>&1; exec sleep 60"#;

/// What the I/O partition tries on the uplink it owns and on its other interfaces.
const CHANGE_THE_UPLINK: &str = r#"{ ip -o link >/dev/null; echo "list: $?"; ip addr add 198.19.200.77/24 dev uplink0; echo "add: $?"; ip addr del 198.19.200.1/24 dev uplink0; echo "del: $?"; ip link set uplink0 down; echo "down: $?"; ip link set vnic0 down; echo "vnic0: $?"; ip link add evil0 type veth peer name evil1; echo "new: $?"; ip link set lo down; echo "lo: $?"; echo done; } > "$PARTITA_STATE_DIR/out" 2>&1; exec sleep 60"#;

/// `name: N` of a result file.
fn result(out: &str, name: &str) -> Option<String> {
    out.lines().find_map(|l| l.strip_prefix(&format!("{name}: "))).map(String::from)
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn from_inside_a_partition_the_uplink_cannot_be_reached_nor_changed() {
    let _turn = turn();
    let tag = format!("ptw{}x", std::process::id());
    let m = Machines::new(&tag);
    let dir = TempDir::new("two-hosts", "attack");
    let name = format!("th{}x", std::process::id());
    let text = format!(
        r#"
[system]
name = "{name}"

[[module]]
name = "m"
cpus = [0]

[[module.partition]]
name = "inner"
command = ["sh", "-c", {REACH_THE_UPLINK:?}]

[[module.partition]]
name = "io"
io = true
command = ["sh", "-c", {CHANGE_THE_UPLINK:?}]

[module.partition.uplink]
interface = "eth1"
mode = "move"
address = "198.19.200.1/24"

[[peer]]
name = "far"
address = "198.19.200.2"

[[module.plan]]
cpu = 0
major_frame = "1ms"
window = [{{ partition = "inner", start = "0us", duration = "500us" }}, {{ partition = "io", start = "500us", duration = "500us" }}]
"#
    );
    let file = dir.0.join("attack.toml");
    std::fs::write(&file, text).unwrap();
    let err = dir.0.join("up.err");
    let up = m.partita(&m.a()).args(["up", file.to_str().unwrap(), "--duration", "40"]).stdout(Stdio::null()).stderr(std::fs::File::create(&err).unwrap()).spawn().unwrap();
    let out = |p: &str| read(&PathBuf::from(format!("/var/lib/partita/{name}/{p}/out")));
    let done = wait_for(Duration::from_secs(30), || out("inner").contains("done") && out("io").contains("done"));
    let (inner, io) = (out("inner"), out("io"));
    let uplink = Command::new("ip").args(["-n", &format!("partita-{name}-io"), "-o", "-4", "addr", "show", "dev", "uplink0"]).output().unwrap();
    let uplink = String::from_utf8_lossy(&uplink.stdout).into_owned();
    let links = ip(&["-n", &format!("partita-{name}-io"), "-o", "link"]);
    signal(&up, libc::SIGTERM);
    let mut up = up;
    assert!(up.wait().unwrap().success(), "{}", read(&err));
    let _ = std::fs::remove_dir_all(format!("/var/lib/partita/{name}"));
    eprintln!("inner partition: {inner}\nI/O partition: {io}");
    assert!(done, "both partitions made their attempts:\ninner: {inner}\nio: {io}\n{}", read(&err));
    // the other partition: no interface, no route, no neighbour, nothing sent; netlink itself answered
    assert_eq!(result(&inner, "list").as_deref(), Some("0"), "{inner}");
    assert!(!result(&inner, "links").unwrap().contains("uplink0"), "{inner}");
    assert_ne!(result(&inner, "route").as_deref(), Some("0"), "{inner}");
    assert_eq!(result(&inner, "neighbours").as_deref(), Some("0"), "{inner}");
    assert_ne!(result(&inner, "send").as_deref(), Some("0"), "{inner}");
    // the I/O partition: every change refused for want of CAP_NET_ADMIN; the uplink kept its address and state
    assert_eq!(result(&io, "list").as_deref(), Some("0"), "{io}");
    for attempt in ["add", "del", "down", "vnic0", "new", "lo"] {
        assert_ne!(result(&io, attempt).as_deref(), Some("0"), "{attempt}: {io}");
    }
    assert!(io.contains("Operation not permitted"), "{io}");
    assert!(uplink.contains("198.19.200.1/24") && !uplink.contains("198.19.200.77"), "{uplink}");
    assert!(links.contains("uplink0") && links.contains("state UP") && !links.contains("evil0"), "{links}");
    assert_eq!(m.eth1(&m.a()).as_deref(), Some(CAMERA_ETH1));

    // The same attempts as root in a namespace of this test shaped like the partitions' work: the test would see
    // them succeed.
    let scratch = format!("{tag}r");
    let _ = Command::new("ip").args(["netns", "del", &scratch]).status();
    ip(&["netns", "add", &scratch]);
    ip(&["-n", &scratch, "link", "add", "uplink0", "type", "veth", "peer", "name", "vnic0"]);
    ip(&["-n", &scratch, "addr", "add", "198.19.200.1/24", "dev", "uplink0"]);
    for l in ["lo", "uplink0", "vnic0"] {
        ip(&["-n", &scratch, "link", "set", l, "up"]);
    }
    let run = |script: &str| {
        let d = TempDir::new("two-hosts", &format!("scratch{}", script.len()));
        Command::new("ip").args(["netns", "exec", &scratch, "sh", "-c", &script.replace("; exec sleep 60", "")]).env("PARTITA_STATE_DIR", &d.0).status().unwrap();
        read(&d.0.join("out"))
    };
    let (host_inner, host_io) = (run(REACH_THE_UPLINK), run(CHANGE_THE_UPLINK));
    ip(&["netns", "del", &scratch]);
    assert!(result(&host_inner, "links").unwrap().contains("uplink0"), "{host_inner}");
    assert_eq!(result(&host_inner, "route").as_deref(), Some("0"), "{host_inner}");
    assert_eq!(result(&host_inner, "send").as_deref(), Some("0"), "{host_inner}");
    for attempt in ["add", "del", "down", "vnic0", "new", "lo"] {
        assert_eq!(result(&host_io, attempt).as_deref(), Some("0"), "{attempt}: {host_io}");
    }
}
