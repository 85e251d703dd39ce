//! One system over two machines (root; docs/deployment.md): each "machine" is a network namespace of this test
//! with its own supervisor running `partita up --host NAME` of examples/video-surveillance-two-hosts.toml, the
//! two joined by a wire (veth pairs on a switch namespace, all 198.18.0.0/15). Frames asked for on the monitor's
//! host come from the recorder on the camera's host through its routing partition's uplink; each uplink comes
//! back to its host with its name, address, MTU, routes and link state on SIGTERM, on Ctrl-C, at the end of
//! `--duration`, after `kill -9` and `partita down`, and when `up` fails half-way; a cut wire stops the frames
//! and they come back when it is mended, without restarting anything.
use std::path::{Path, PathBuf};
use partita_paper::wire::TwoMachines;
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

fn ip(args: &[&str]) -> String {
    partita_paper::wire::ip(args).unwrap_or_else(|e| panic!("{e}"))
}

/// The camera's and the monitor's machines on a wire (`partita_paper::wire`).
fn machines(tag: &str) -> TwoMachines {
    TwoMachines::new(tag, Path::new(EXE)).unwrap_or_else(|e| panic!("{e}"))
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
fn spawn_part(m: &TwoMachines, ns: &str, host: &str, file: &Path, seconds: u32, err: &Path) -> Child {
    m.up(ns, host, file, seconds, err).unwrap()
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
fn an_uplink_comes_back_after_kill_9_and_down_when_up_fails_half_way_and_at_the_end_of_its_duration() {
    let _turn = turn();
    let tag = format!("ptw{}k", std::process::id());
    let m = machines(&tag);
    let dir = TempDir::new("two-hosts", "kill");
    let name = format!("th{}k", std::process::id());
    let file = system_file(&dir.0, &name, &["--count", "5", "--quiet"]);
    // kill -9 of the supervisor, then `partita down` on that machine
    let ea = dir.0.join("a.err");
    let mut a = spawn_part(&m, &m.near(), "camera-host", &file, 60, &ea);
    let state_a = PathBuf::from(format!("/run/partita/{name}.camera-host"));
    assert!(wait_for(Duration::from_secs(20), || state_a.join("state.json").exists()), "{}", read(&ea));
    assert_eq!(m.eth1(&m.near()), None);
    signal(&a, libc::SIGKILL);
    a.wait().unwrap();
    assert_eq!(m.eth1(&m.near()), None, "still in the routing partition's namespace until `down`");
    let down = m.partita(&m.near()).arg("down").output().unwrap();
    let said = String::from_utf8_lossy(&down.stdout);
    assert!(down.status.success() && said.contains("uplink eth1 of routing"), "{said}{}", String::from_utf8_lossy(&down.stderr));
    assert_eq!(m.eth1(&m.near()).as_deref(), Some(CAMERA_ETH1));
    let left = ip(&["netns", "list"]);
    assert!(!left.contains(&format!("partita-{name}.")), "{left}");

    // `up` fails after the uplink was handed over: a namespace of a later member is taken already
    let with_blocker = format!("{}\n[[node]]\nname = \"blocker\"\nhost = \"monitor-host\"\ncommand = [\"sleep\", \"30\"]\n", read(&file));
    let blocked = dir.0.join("blocked.toml");
    std::fs::write(&blocked, with_blocker).unwrap();
    let taken = format!("partita-{name}.monitor-host-blocker");
    ip(&["netns", "add", &taken]);
    let up = m.partita(&m.far()).args(["up", "--host", "monitor-host", blocked.to_str().unwrap(), "--duration", "5"]).output().unwrap();
    ip(&["netns", "del", &taken]);
    let err = String::from_utf8_lossy(&up.stderr);
    assert!(!up.status.success() && err.contains("nothing was left behind"), "{err}");
    assert!(m.eth1(&m.far()).is_some_and(|s| s.contains("up true")), "{:?}\n{err}", m.eth1(&m.far()));
    assert!(!ip(&["netns", "list"]).contains(&format!("partita-{name}.monitor-host-monitor")));

    // the end of --duration
    let eb = dir.0.join("b.err");
    let mut b = spawn_part(&m, &m.far(), "monitor-host", &file, 1, &eb);
    assert!(b.wait().unwrap().success(), "{}", read(&eb));
    assert!(m.eth1(&m.far()).is_some_and(|s| s.contains("up true")), "{:?}", m.eth1(&m.far()));
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn frames_cross_the_wire_stop_when_it_is_cut_resume_when_it_is_mended_and_each_uplink_comes_back_on_sigterm_and_ctrl_c() {
    let _turn = turn();
    let tag = format!("ptw{}c", std::process::id());
    let m = machines(&tag);
    let dir = TempDir::new("two-hosts", "cut");
    let name = format!("th{}c", std::process::id());
    let file = system_file(&dir.0, &name, &["--rate", "20", "--count", "0", "--duration", "120", "--timeout-ms", "300", "--connect-timeout", "30"]);
    assert_eq!(m.eth1(&m.near()).as_deref(), Some(CAMERA_ETH1));
    let check = m.partita(&m.near()).args(["check", "--host", "camera-host", file.to_str().unwrap()]).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    assert!(String::from_utf8_lossy(&check.stdout).contains("moves eth1 into routing's namespace as uplink0"));
    let (ea, eb) = (dir.0.join("a.err"), dir.0.join("b.err"));
    let a = spawn_part(&m, &m.near(), "camera-host", &file, 120, &ea);
    let state_a = PathBuf::from(format!("/run/partita/{name}.camera-host/state.json"));
    assert!(wait_for(Duration::from_secs(20), || state_a.exists()), "camera part up: {}", read(&ea));
    // the wire's end left the camera machine for the routing partition
    assert_eq!(m.eth1(&m.near()), None);
    let b = spawn_part(&m, &m.far(), "monitor-host", &file, 120, &eb);
    let monitor_log = PathBuf::from(format!("/run/partita/{name}.monitor-host/monitor.log"));
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
    // the routing partition reports the monitor lost once it has been silent past its lease (Cyclone's 10 s)
    let routing_log = PathBuf::from(format!("/run/partita/{name}.camera-host/routing.log"));
    let lost_line = |l: &&str| l.contains("participant gone") && l.contains("side=uplink");
    let reported = wait_for(Duration::from_secs(25), || read(&routing_log).lines().any(|l| lost_line(&l)));
    // mend it
    ip(&["-n", &m.switch(), "link", "set", "pa", "up"]);
    let (seconds_mended, frames_mended) = (answered().len(), frames());
    let resumed = wait_for(Duration::from_secs(40), || answered().iter().skip(seconds_mended).any(|n| *n > count_cut));
    let log = read(&monitor_log);
    let events = read(&PathBuf::from(format!("/run/partita/{name}.camera-host/events.jsonl")));
    let (mut a, mut b) = (a, b);
    signal(&b, libc::SIGTERM);
    let sb = b.wait().unwrap();
    // SIGTERM: the monitor machine's eth1 is back (it had no address)
    let far_back = m.eth1(&m.far());
    // Ctrl-C: the camera machine's eth1 is back as it was
    signal(&a, libc::SIGINT);
    let sa = a.wait().unwrap();
    assert!(flowed, "frames flowed before the cut:\n{log}\n{}\n{}", read(&ea), read(&eb));
    assert!(log.contains("answered"), "{log}");
    assert!(stopped, "no frames while the wire was cut:\n{log}");
    assert!(reported, "the routing partition reported the lost monitor:\n{}", read(&routing_log));
    assert!(resumed, "frames came back once the wire was mended, nothing restarted:\n{log}");
    // and found it again on the uplink after the mend
    let routing = read(&routing_log);
    let after = routing.lines().skip_while(|l| !lost_line(l)).skip(1).any(|l| l.contains("participant found") && l.contains("side=uplink"));
    assert!(after, "{routing}");
    // the camera host's plan ran on through the cut (its frames counter went on), and no partition restarted
    assert!(frames_cut > frames_before && frames_mended > frames_cut, "frames {frames_before} → {frames_cut} → {frames_mended}");
    assert!(!events.contains("\"restart\""), "{events}");
    assert!(sa.success() && sb.success(), "{}\n{}", read(&ea), read(&eb));
    assert!(far_back.as_deref().is_some_and(|s| s.contains("addresses []") && s.contains("up true")), "{far_back:?}");
    assert_eq!(m.eth1(&m.near()).as_deref(), Some(CAMERA_ETH1), "{}", read(&ea));
    assert!(std::fs::read_dir("/run/partita/uplinks").map(|d| d.flatten().all(|e| !e.file_name().to_string_lossy().contains(&name))).unwrap_or(true));
}

/// What a partition without the uplink tries: see it, route to it, find a neighbour on it, send to it.
const REACH_THE_UPLINK: &str = r#"{ echo "links: $(ip -o link | cut -d: -f2 | tr -d ' ' | tr '\n' ,)"; ip -o link >/dev/null; echo "list: $?"; ip route get 198.19.200.2 >/dev/null 2>&1; echo "route: $?"; echo "neighbours: $(ip neigh | grep -c 198.19.200)"; python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('198.19.200.2', 9))" 2>/dev/null; echo "send: $?"; echo done; } > "$PARTITA_STATE_DIR/out" 2>&1; exec sleep 60"#;

/// What the I/O partition tries on the uplink it owns and on its other interfaces, and on its DDS Security
/// credentials (which it may read, not change).
const CHANGE_THE_UPLINK: &str = r#"{ ip -o link >/dev/null; echo "list: $?"; ip addr add 198.19.200.77/24 dev uplink0; echo "add: $?"; ip addr del 198.19.200.1/24 dev uplink0; echo "del: $?"; ip link set uplink0 down; echo "down: $?"; ip link set vnic0 down; echo "vnic0: $?"; ip link add evil0 type veth peer name evil1; echo "new: $?"; ip link set lo down; echo "lo: $?"; head -c 10 /run/partita/uplink-private-key.pem >/dev/null; echo "read key: $?"; echo x > /run/partita/uplink-permissions.p7s; echo "write permissions: $?"; rm -f /run/partita/uplink-ca.pem; echo "remove ca: $?"; echo done; } > "$PARTITA_STATE_DIR/out" 2>&1; exec sleep 60"#;

/// `name: N` of a result file.
fn result(out: &str, name: &str) -> Option<String> {
    out.lines().find_map(|l| l.strip_prefix(&format!("{name}: "))).map(String::from)
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn from_inside_a_partition_the_uplink_cannot_be_reached_nor_changed() {
    let _turn = turn();
    let tag = format!("ptw{}x", std::process::id());
    let m = machines(&tag);
    let dir = TempDir::new("two-hosts", "attack");
    let name = format!("th{}x", std::process::id());
    let pki = dir.0.join("pki");
    let made = Command::new("bash").arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/make-test-pki.sh")).arg(&pki).arg("io").output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let security = security_table("module.partition", &pki, "io");
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
binds = ["ip", "cut", "tr", "grep", "/usr/bin/python3", "sleep"]

[[module.partition]]
name = "io"
io = true
command = ["sh", "-c", {CHANGE_THE_UPLINK:?}]
binds = ["ip", "head", "rm", "sleep"]

[module.partition.uplink]
interface = "eth1"
mode = "move"
address = "198.19.200.1/24"
{security}
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
    let up = m.partita(&m.near()).args(["up", file.to_str().unwrap(), "--duration", "40"]).stdout(Stdio::null()).stderr(std::fs::File::create(&err).unwrap()).spawn().unwrap();
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
    // its credentials: readable (its DDS reads them), not writable nor removable; the host's files unchanged
    assert_eq!(result(&io, "read key").as_deref(), Some("0"), "{io}");
    assert_ne!(result(&io, "write permissions").as_deref(), Some("0"), "{io}");
    assert_ne!(result(&io, "remove ca").as_deref(), Some("0"), "{io}");
    assert!(read(&pki.join("io.permissions.p7s")).contains("S/MIME") && read(&pki.join("ca.pem")).contains("BEGIN CERTIFICATE"));
    assert!(uplink.contains("198.19.200.1/24") && !uplink.contains("198.19.200.77"), "{uplink}");
    assert!(links.contains("uplink0") && links.contains("state UP") && !links.contains("evil0"), "{links}");
    assert_eq!(m.eth1(&m.near()).as_deref(), Some(CAMERA_ETH1));

    // The same attempts as root in a namespace of this test shaped like the partitions' work: the test would see
    // them succeed.
    let scratch = format!("{tag}r");
    // A crashed earlier run's namespace, if any (none is the rule: say nothing then).
    let _ = Command::new("ip").args(["netns", "del", &scratch]).stderr(Stdio::null()).status();
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
    // what the script wrote as root on the host
    let _ = std::fs::remove_file("/run/partita/uplink-permissions.p7s");
    assert!(result(&host_inner, "links").unwrap().contains("uplink0"), "{host_inner}");
    assert_eq!(result(&host_inner, "route").as_deref(), Some("0"), "{host_inner}");
    assert_eq!(result(&host_inner, "send").as_deref(), Some("0"), "{host_inner}");
    for attempt in ["add", "del", "down", "vnic0", "new", "lo"] {
        assert_eq!(result(&host_io, attempt).as_deref(), Some("0"), "{attempt}: {host_io}");
    }
    let _ = std::fs::remove_dir_all(format!("/run/partita/{name}"));
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn bench_uplink_measures_both_scenarios_on_both_layouts_and_leaves_nothing() {
    let _turn = turn();
    let dir = TempDir::new("two-hosts", "bench");
    let out = Command::new(EXE).args(["bench", "uplink", "--count", "30", "--warmup", "3", "--out", dir.0.to_str().unwrap()]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for row in ["| network | one host (bridge) | 30 |", "| network | two hosts (uplink) | 30 |", "| partitioned | one host (bridge) | 30 |", "| partitioned | two hosts (uplink) | 30 |"] {
        assert!(stdout.contains(row), "{row}:\n{stdout}");
    }
    let rows: serde_json::Value = serde_json::from_str(&read(&dir.0.join("uplink.json"))).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 4);
    assert!(rows.as_array().unwrap().iter().all(|r| r["report"]["answered"].as_u64() >= Some(30)), "{rows}");
    // the machines are gone, and every uplink was given back before them
    let left = ip(&["netns", "list"]);
    assert!(!left.lines().any(|l| l.starts_with("ptub") || l.starts_with("partita-uplink-")), "{left}");
    assert!(std::fs::read_dir("/run/partita/uplinks").map(|d| d.count() == 0).unwrap_or(true));
}

/// The example's camera module alone, its routing partition owning `interface` as its uplink at 198.19.200.1,
/// with one external peer at `peer`: the far machine partita does not start.
fn camera_with_uplink(name: &str, interface: &str, peer: &str) -> String {
    let single = include_str!("../../../examples/video-surveillance.toml");
    let mut s = single[..single.find("# A native (non-partitioned) node").unwrap()].to_string();
    s = s.replacen("name = \"video-surveillance\"", &format!("name = {name:?}"), 1);
    s = s.replacen(
        "[module.partition.router]\n",
        &format!("[module.partition.uplink]\ninterface = {interface:?}\nmode = \"move\"\naddress = \"198.19.200.1/24\"\n\n[module.partition.router]\n"),
        1,
    );
    s = s.replacen("from = \"network\"", "from = \"uplink\"", 1);
    assert!(s.contains("[module.partition.uplink]") && s.contains("from = \"uplink\""));
    s + &format!("\n[[peer]]\nname = \"far\"\naddress = {peer:?}\n")
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_far_machine_can_be_a_qemu_guest_on_a_tap_the_routing_partition_owns() {
    let _turn = turn();
    let dir = TempDir::new("two-hosts", "guest");
    let ns = format!("ptw{}q", std::process::id());
    let _ = Command::new("ip").args(["netns", "del", &ns]).stderr(Stdio::null()).status();
    ip(&["netns", "add", &ns]);
    ip(&["-n", &ns, "link", "set", "lo", "up"]);
    ip(&["-n", &ns, "link", "add", "wbr", "type", "bridge"]);
    ip(&["-n", &ns, "link", "set", "wbr", "up"]);
    let in_ns = |args: &[&str]| {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{ns}")).arg(EXE).args(args);
        c
    };
    // The far machine: a guest kernel (TCG) whose NIC is the tap wtap0, running the monitor natively on the
    // uplinks' domain (the file's first free id: 2).
    let console = dir.0.join("guest.out");
    let mut guest = in_ns(&["vm", "run", "--accel", "tcg", "--nic", "tap=wtap0,bridge=wbr,address=198.19.200.2/24,peer=198.19.200.1", "--domain", "2", "--", "partita", "app", "monitor", "--count", "20", "--warmup", "2", "--connect-timeout", "120", "--timeout-ms", "2000"])
        .stdout(std::fs::File::create(&console).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let tap_there = wait_for(Duration::from_secs(30), || Command::new("ip").args(["-n", &ns, "link", "show", "wtap0"]).output().is_ok_and(|o| o.status.success()));
    // the tap leaves the bridge: the routing partition takes it whole
    let _ = Command::new("ip").args(["-n", &ns, "link", "set", "wtap0", "nomaster"]).status();
    let name = format!("th{}q", std::process::id());
    let file = dir.0.join("camera.toml");
    std::fs::write(&file, camera_with_uplink(&name, "wtap0", "198.19.200.2")).unwrap();
    let err = dir.0.join("up.err");
    let up = in_ns(&["up", file.to_str().unwrap(), "--duration", "150"]).stdout(Stdio::null()).stderr(std::fs::File::create(&err).unwrap()).spawn().unwrap();
    let answered = wait_for(Duration::from_secs(150), || read(&console).contains("PARTITA-VM exit status"));
    let out = read(&console);
    signal(&up, libc::SIGTERM);
    let mut up = up;
    let status = up.wait().unwrap();
    if guest.try_wait().unwrap().is_none() {
        signal(&guest, libc::SIGTERM);
    }
    guest.wait().unwrap();
    let left = ip(&["netns", "list"]);
    ip(&["netns", "del", &ns]);
    assert!(tap_there, "the guest's tap appeared:\n{out}");
    assert!(answered, "the guest's monitor finished:\n{out}\n{}", read(&err));
    assert!(out.contains("PARTITA-VM exit status=0"), "{out}");
    assert!(out.contains("content matches the test pattern"), "the guest got the recorder's frames:\n{out}");
    assert!(status.success(), "{}", read(&err));
    assert!(!left.contains(&format!("partita-{name}-")), "{left}");
}

/// A `[...uplink.security]` table naming `name`'s files in the test PKI at `pki` (scripts/make-test-pki.sh).
fn security_table(table: &str, pki: &Path, name: &str) -> String {
    let p = pki.display();
    format!("\n[{table}.uplink.security]\nca = \"{p}/ca.pem\"\ncertificate = \"{p}/{name}.pem\"\nprivate_key = \"{p}/{name}.key\"\ngovernance = \"{p}/governance.p7s\"\npermissions = \"{p}/{name}.permissions.p7s\"\n")
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_secure_uplink_carries_the_frames_and_refuses_another_cas_identity_and_an_unpermitted_topic() {
    let _turn = turn();
    let tag = format!("ptw{}s", std::process::id());
    let m = machines(&tag);
    let dir = TempDir::new("two-hosts", "secure");
    let (pki, other) = (dir.0.join("pki"), dir.0.join("other-pki"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/make-test-pki.sh");
    for (at, names) in [(&pki, vec!["routing", "monitor", "stranger=camera/*"]), (&other, vec!["monitor"])] {
        let made = Command::new("bash").arg(script).arg(at).args(&names).output().unwrap();
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    }
    let name = format!("th{}s", std::process::id());
    let base = read(&system_file(&dir.0, &name, &["--count", "20", "--warmup", "2", "--connect-timeout", "20", "--timeout-ms", "1000"]));
    // The camera machine's eth1 has an MTU of 1400, which its uplink keeps: the monitor's gets the same (the
    // handshake's certificates travel in datagrams a smaller MTU at the far end would drop).
    let base = base.replacen("address = \"198.19.200.2/24\"", "address = \"198.19.200.2/24\"\nmtu = 1400", 1);
    assert!(base.contains("mtu = 1400"));
    let routing = security_table("module.partition", &pki, "routing");
    let base = base.replacen("# Only the request and reply topics cross the uplink", &format!("{routing}\n# Only the request and reply topics cross the uplink"), 1);
    assert!(base.contains("[module.partition.uplink.security]"));
    let variant = |label: &str, pki: &Path, identity: &str| {
        let p = dir.0.join(format!("{label}.toml"));
        std::fs::write(&p, format!("{base}{}", security_table("node", pki, identity))).unwrap();
        p
    };
    let (good, foreign, unpermitted) = (variant("good", &pki, "monitor"), variant("foreign", &other, "monitor"), variant("unpermitted", &pki, "stranger"));
    let check = m.partita(&m.near()).args(["check", "--host", "camera-host", good.to_str().unwrap()]).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let ea = dir.0.join("a.err");
    let a = spawn_part(&m, &m.near(), "camera-host", &good, 150, &ea);
    let monitor_log = PathBuf::from(format!("/run/partita/{name}.monitor-host/monitor.log"));
    let routing_log = PathBuf::from(format!("/run/partita/{name}.camera-host/routing.log"));
    // each monitor in turn, until it has its answers or gives up
    let run_monitor = |file: &Path| -> String {
        let eb = dir.0.join("b.err");
        // the last run's log stays until this run's part starts
        let _ = std::fs::remove_file(&monitor_log);
        let b = spawn_part(&m, &m.far(), "monitor-host", file, 60, &eb);
        let done = |t: &str| t.contains("last frame:") || t.contains("partita app monitor: error");
        wait_for(Duration::from_secs(45), || done(&read(&monitor_log)));
        let log = read(&monitor_log);
        signal(&b, libc::SIGTERM);
        let mut b = b;
        b.wait().unwrap();
        log
    };
    let good_log = run_monitor(&good);
    let foreign_log = run_monitor(&foreign);
    let reported = wait_for(Duration::from_secs(20), || read(&routing_log).lines().any(|l| l.contains("shows no endpoint") && l.contains("side=uplink")));
    let unpermitted_log = run_monitor(&unpermitted);
    eprintln!("another CA's monitor:\n{foreign_log}\nthe unpermitted monitor:\n{unpermitted_log}");
    let routing = read(&routing_log);
    signal(&a, libc::SIGTERM);
    let mut a = a;
    assert!(a.wait().unwrap().success(), "{}", read(&ea));
    // valid credentials: the frames flow, encrypted
    assert!(good_log.contains("content matches the test pattern"), "{good_log}\ncamera part: {}\nrouting: {routing}", read(&ea));
    // another CA's identity: refused at the handshake, gets nothing; the router saw a participant on the uplink
    // but never an endpoint of it (nothing it could forward into the module), and says so
    assert!(!foreign_log.contains("last frame:") && foreign_log.contains("error"), "{foreign_log}");
    assert!(foreign_log.contains("handshake") || foreign_log.contains("Certificate"), "{foreign_log}");
    assert!(reported, "the routing partition reported the refused participant:\n{routing}");
    // a valid identity without permission for the surveillance topics: refused its writer and reader, nothing
    assert!(!unpermitted_log.contains("last frame:") && unpermitted_log.contains("Not Allowed By Security"), "{unpermitted_log}");
    assert_eq!(m.eth1(&m.near()).as_deref(), Some(CAMERA_ETH1));
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn an_interface_another_system_holds_is_refused_and_a_child_uplink_leaves_the_device_to_the_host() {
    let _turn = turn();
    let tag = format!("ptw{}m", std::process::id());
    let m = machines(&tag);
    let dir = TempDir::new("two-hosts", "children");
    for (k, mode) in ["macvlan", "ipvlan"].into_iter().enumerate() {
        let (first, second) = (format!("th{}m{k}a", std::process::id()), format!("th{}m{k}b", std::process::id()));
        let file = |name: &str| {
            let p = dir.0.join(format!("{name}.toml"));
            std::fs::write(&p, camera_with_uplink(name, "eth1", "198.19.200.2").replacen("mode = \"move\"", &format!("mode = {mode:?}"), 1)).unwrap();
            p
        };
        let (f1, f2) = (file(&first), file(&second));
        let err = dir.0.join("up.err");
        let up = m.partita(&m.near()).args(["up", f1.to_str().unwrap(), "--duration", "60"]).stdout(Stdio::null()).stderr(std::fs::File::create(&err).unwrap()).spawn().unwrap();
        let state = PathBuf::from(format!("/run/partita/{first}/state.json"));
        let mut up = up;
        // up for good, or refused (its standard error says why)
        wait_for(Duration::from_secs(20), || state.exists() || read(&err).contains("nothing was left behind"));
        let came_up = state.exists();
        // the host keeps eth1 as it was, and the routing partition has a child of it with its own address
        let host_eth1 = m.eth1(&m.near());
        let child = Command::new("ip").args(["-n", &format!("partita-{first}-routing"), "-d", "-o", "addr", "show", "uplink0"]).output().unwrap();
        let child = String::from_utf8_lossy(&child.stdout).into_owned();
        let child_link = Command::new("ip").args(["-n", &format!("partita-{first}-routing"), "-d", "-o", "link", "show", "uplink0"]).output().unwrap();
        let child_link = String::from_utf8_lossy(&child_link.stdout).into_owned();
        // a second system may not take the same interface while the first holds it
        let second_up = m.partita(&m.near()).args(["up", f2.to_str().unwrap(), "--duration", "5"]).output().unwrap();
        let refusal = String::from_utf8_lossy(&second_up.stderr).into_owned();
        if up.try_wait().unwrap().is_none() {
            signal(&up, libc::SIGTERM);
        }
        let status = up.wait().unwrap();
        // A kernel without this kind of interface (this machine's has no ipvlan): up says so, names the fix and
        // leaves the device as it was.
        let unsupported = read(&err).contains(&format!("this kernel has no {mode} interfaces"));
        if unsupported && !came_up {
            assert!(!status.success() && read(&err).contains("nothing was left behind") && read(&err).contains("mode = \"move\""), "{mode}: {}", read(&err));
            assert_eq!(m.eth1(&m.near()).as_deref(), Some(CAMERA_ETH1), "{mode}");
            assert!(!ip(&["netns", "list"]).contains(&format!("partita-{first}-")), "{mode}");
            eprintln!("{mode}: not in this kernel; up refused it cleanly");
            continue;
        }
        assert!(status.success(), "{mode}: {}", read(&err));
        let _ = std::fs::remove_dir_all(format!("/var/lib/partita/{first}"));
        let _ = std::fs::remove_dir_all(format!("/var/lib/partita/{second}"));
        assert!(came_up, "{mode}: {}", read(&err));
        assert_eq!(host_eth1.as_deref(), Some(CAMERA_ETH1), "{mode}");
        assert!(child_link.contains(mode) && child.contains("198.19.200.1/24"), "{mode}: {child_link}\n{child}");
        assert!(!second_up.status.success() && refusal.contains(&format!("eth1 is the uplink of routing in system {first}, which is up")) && refusal.contains("nothing was created"), "{mode}: {refusal}");
        assert!(!ip(&["netns", "list"]).contains(&format!("partita-{second}-")), "{mode}: the refused system left nothing");
        // the child went with the first system; the device stayed as it was
        assert_eq!(m.eth1(&m.near()).as_deref(), Some(CAMERA_ETH1), "{mode}");
        assert!(!ip(&["netns", "list"]).contains(&format!("partita-{first}-")), "{mode}");
    }
}
