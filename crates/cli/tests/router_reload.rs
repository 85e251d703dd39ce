//! `partita router reload SYSTEM` (needs root): a running I/O partition's router takes over the route table of
//! its system file as edited, without a restart; a file that changes anything else, or whose table does not
//! validate, is refused and the partition's router file stays as it was. And the attacks an I/O partition could
//! make on its own router file (written into its view, rewritten there by the supervisor) are all refused from
//! inside it, while the same attacks on a scratch copy of the layout on the host work.
mod common;
use common::{spawn_up, state, stop_up_when, wait_for, TempDir};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// ddsperf ping in a partition, pong on a native node, the I/O partition between them routing only the pings:
/// no round trip can complete until the pongs' route is added.
const SYSTEM: &str = r#"
[system]
name = "NAME"

[[module]]
name = "m"
cpus = [0]

[[module.partition]]
name = "ping"
command = ["sh", "-c", "exec ddsperf -i $PARTITA_DOMAIN -D 60 ping 50Hz"]
binds = ["ddsperf"]
memory = "64MiB"
health = { action = "stop" }

[[module.partition]]
name = "routing"
command = ["partita", "route"]
memory = "64MiB"
io = true

[module.partition.router]
[[module.partition.router.route]]
from = "module"
to = "network"
allow = ["DDSPerf*Ping*"]
# PONG

[[module.plan]]
cpu = 0
major_frame = "2ms"
window = [{ partition = "ping", start = "0us", duration = "1ms" }, { partition = "routing", start = "1ms", duration = "1ms" }]

[[node]]
name = "pong"
command = ["sh", "-c", "exec ddsperf -i $PARTITA_DOMAIN pong"]
"#;

/// The route the reload adds.
const PONG_ROUTE: &str = "[[module.partition.router.route]]\nfrom = \"network\"\nto = \"module\"\nallow = [\"DDSPerf*Pong*\"]\n";

/// Round trips ddsperf ping counted, from its per-second lines ("... cnt 50").
fn roundtrips(out: &str) -> u64 {
    out.lines().filter_map(|l| l.split(" cnt ").nth(1)?.split_whitespace().next()?.parse::<u64>().ok()).sum()
}

fn reload(name: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_partita")).args(["router", "reload", name]).output().expect("run partita router reload")
}

fn text(o: &Output) -> String {
    format!("exit {:?}\n--- stdout\n{}--- stderr\n{}", o.status.code(), String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The running partition's pid, from the system's state file.
fn pid_of(name: &str, partition: &str) -> Option<i64> {
    state(name)["partitions"].as_array()?.iter().find(|p| p["partition"] == partition)?["pid"].as_i64()
}

/// The router file as the partition sees it (read by the host root through its process's root).
fn own_copy(pid: i64) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/root/run/partita/router.toml")).unwrap_or_default()
}

/// Checks that nothing of system `name` is left, and removes its kept logs and state.
fn nothing_left(name: &str) {
    let _ = std::fs::remove_dir_all(Path::new("/run/partita").join(name));
    let _ = std::fs::remove_dir_all(Path::new("/var/lib/partita").join(name));
    let left = partita_supervisor::cleanup::find(Some(name)).expect("listing leftovers");
    assert!(left.netns.is_empty() && left.cgroups.is_empty() && left.links.is_empty(), "left behind: {left:?}");
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_running_io_partition_takes_over_an_edited_route_table_and_refuses_other_changes() {
    let name = format!("rl{}", std::process::id() % 100_000);
    let dir = TempDir::new("router-reload", &name);
    let file = dir.0.join("system.toml");
    let system = SYSTEM.replace("NAME", &name);
    std::fs::write(&file, &system).unwrap();
    let up_err = dir.0.join("up.err");
    let up = spawn_up(&file, 60, &up_err);
    let logs = Path::new("/run/partita").join(&name);
    let log = |p: &str| std::fs::read_to_string(logs.join(format!("{p}.log"))).unwrap_or_default();
    let host_copy = logs.join("routing.router.toml");
    let mut checks = Vec::new();
    let (status, up_stderr) = stop_up_when(up, &up_err, Duration::from_secs(65), || {
        // Once: every check below runs inside this closure, while the system is up; then it is stopped.
        if !checks.is_empty() {
            return true;
        }
        let ready = || pid_of(&name, "routing").filter(|p| pid_of(&name, "ping").is_some() && !own_copy(*p).is_empty());
        let Some(pid) = wait_for(Duration::from_secs(20), || ready().is_some()).then(ready).flatten() else {
            checks.push("the routing partition did not come up".to_string());
            return true;
        };
        let started = own_copy(pid);
        // The pings cross, the pongs do not: no round trip in 4 s of pinging.
        std::thread::sleep(Duration::from_secs(4));
        if roundtrips(&log("ping")) != 0 {
            checks.push(format!("round trips before the pongs' route:\n{}", log("ping")));
        }
        // Refused, nothing changed: a table that does not validate, then a change outside the tables.
        let refusals = [
            (system.replace("allow = [\"DDSPerf*Ping*\"]", "allow = [\"DDSPerf*Ping*\"]\nto_nowhere = 1"), "to_nowhere"),
            (system.replace("50Hz", "60Hz").replace("# PONG", PONG_ROUTE), "partition ping"),
            (system.replace("# PONG", &format!("{PONG_ROUTE}\n[module.partition.router.x]")), "unknown field `x`"),
        ];
        for (edited, named) in refusals {
            let _ = std::fs::write(&file, &edited);
            let o = reload(&name);
            if o.status.code() != Some(2) || !text(&o).contains(named) || !text(&o).contains("system.toml") {
                checks.push(format!("not refused naming {named:?} and the file: {}", text(&o)));
            }
        }
        if own_copy(pid) != started || std::fs::read_to_string(&host_copy).unwrap_or_default() != started {
            checks.push(format!("a refused reload changed a router file:\n{}", own_copy(pid)));
        }
        // The pongs' route added: the partition's router takes it over and round trips complete.
        let _ = std::fs::write(&file, system.replace("# PONG", PONG_ROUTE));
        let asked = std::time::Instant::now();
        let o = reload(&name);
        let answered = asked.elapsed();
        if !o.status.success() || !text(&o).contains("routing: route table reloaded") || !text(&o).contains("next looks") || !text(&o).contains("1 routes → 2 routes") {
            checks.push(format!("the reload was not done: {}", text(&o)));
        }
        let own = own_copy(pid);
        if !own.contains("DDSPerf*Pong*") || std::fs::read_to_string(&host_copy).unwrap_or_default() != own {
            checks.push(format!("the partition's copy and the host's are not the new table:\n{own}"));
        }
        if wait_for(Duration::from_secs(15), || roundtrips(&log("ping")) > 0) {
            // ddsperf prints its counts once a second: the figure is the reload's time rounded up to that line.
            eprintln!("router reload: answered in {answered:.2?}; the first round trips printed {:.2?} after it was asked", asked.elapsed());
        }
        if !wait_for(Duration::from_secs(15), || roundtrips(&log("ping")) > 20) {
            checks.push(format!("no round trips after the reload:\nping:\n{}\nrouting:\n{}", log("ping"), log("routing")));
        }
        if !log("routing").contains("reloaded: ") {
            checks.push(format!("the router did not print its reload:\n{}", log("routing")));
        }
        if pid_of(&name, "routing") != Some(pid) {
            checks.push("the routing partition was restarted".to_string());
        }
        // The same file again: nothing to do.
        let o = reload(&name);
        if !o.status.success() || !text(&o).contains("no route table changed") {
            checks.push(format!("the same file again: {}", text(&o)));
        }
        checks.push(String::new());
        true
    });
    let routing = log("routing");
    nothing_left(&name);
    assert!(status.success(), "partita up failed: {up_stderr}\nrouting:\n{routing}");
    let failed: Vec<&String> = checks.iter().filter(|c| !c.is_empty()).collect();
    assert!(failed.is_empty() && !checks.is_empty(), "{failed:#?}\nup:\n{up_stderr}");
    // Not a system that is up: refused with the fix.
    let o = reload(&name);
    assert!(o.status.code() == Some(2) && text(&o).contains("is not up"), "{}", text(&o));
}

const ATTACK: &str = include_str!("router_file_attack.py");

/// The attack script's lines, by attack: `None` for `DONE`, the errno's name for `REFUSED`.
fn outcomes(out: &str) -> Vec<(String, Option<String>)> {
    out.lines()
        .filter_map(|l| match l.split_once(' ') {
            Some(("DONE", what)) => Some((what.to_string(), None)),
            Some(("REFUSED", rest)) => {
                let (what, why) = rest.split_once(": ")?;
                Some((what.to_string(), Some(why.split_whitespace().next()?.to_string())))
            }
            _ => None,
        })
        .collect()
}

/// Each attack from inside the I/O partition, and why it must fail.
const REFUSALS: [(&str, &str); 9] = [
    ("reach the supervisor's control socket", "ENOENT"),
    ("write into its router file", "EACCES"),
    ("make its router file writable", "EPERM"),
    ("replace its router file", "EACCES"),
    ("add a file beside its router file", "EACCES"),
    ("plant a link where the supervisor writes", "EACCES"),
    ("rename /run/partita away", "EBUSY"),
    ("mount over /run/partita", "EPERM"),
    ("unmount /run/partita", "EPERM"),
];

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn an_io_partition_cannot_change_its_own_router_file_and_the_supervisor_still_can() {
    let name = format!("ra{}", std::process::id() % 100_000);
    let dir = TempDir::new("router-attack", &name);
    // The attacks on the host, on a scratch copy of the layout (plain directories, a listening control socket),
    // in a private mount namespace: each must work.
    let scratch = dir.0.join("scratch");
    let own = scratch.join("run/partita");
    std::fs::create_dir_all(own.join(&name)).unwrap();
    std::fs::write(own.join("router.toml"), "# a router file\n").unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(own.join(&name).join("control.sock")).unwrap();
    let script = dir.0.join("attack.py");
    std::fs::write(&script, ATTACK).unwrap();
    let host = Command::new("unshare").args(["-m", "--propagation", "private", "/usr/bin/python3"]).arg(&script).arg(&scratch).arg(&name).output().unwrap();
    let on_host = outcomes(&String::from_utf8_lossy(&host.stdout));
    assert!(on_host.len() == REFUSALS.len() && on_host.iter().all(|(_, why)| why.is_none()), "the attacks must work on the host's scratch copy: {}", text(&host));
    // (the link, planted before the directory was renamed away)
    assert!(std::fs::symlink_metadata(scratch.join("run/partita-old/.router.toml.new")).is_ok_and(|m| m.file_type().is_symlink()), "the host run planted its link");

    // The same attacks from inside the I/O partition.
    let system = format!(
        "[system]\nname = \"{name}\"\n\n[[module]]\nname = \"m\"\ncpus = [0]\n\n[[module.partition]]\nname = \"io\"\n\
         command = [\"/usr/bin/python3\", \"-c\", '''{ATTACK}''', \"/\", \"{name}\"]\nbinds = [\"/usr/bin/python3\"]\nio = true\nmemory = \"64MiB\"\n\n\
         [module.partition.router]\n[[module.partition.router.route]]\nfrom = \"module\"\nto = \"network\"\nallow = [\"a/*\"]\n# MORE\n"
    );
    let file = dir.0.join("system.toml");
    std::fs::write(&file, &system).unwrap();
    let up_err = dir.0.join("up.err");
    let up = spawn_up(&file, 40, &up_err);
    let log = || std::fs::read_to_string(Path::new("/run/partita").join(&name).join("io.log")).unwrap_or_default();
    let host_copy: PathBuf = Path::new("/run/partita").join(&name).join("io.router.toml");
    let mut seen = (String::new(), String::new(), String::new(), None);
    let (status, up_stderr) = stop_up_when(up, &up_err, Duration::from_secs(45), || {
        if !log().contains("END") {
            return false;
        }
        let Some(pid) = pid_of(&name, "io") else { return false };
        let before = own_copy(pid);
        // The supervisor can still rewrite it, whatever the partition tried.
        let _ = std::fs::write(&file, system.replace("# MORE", "[[module.partition.router.route]]\nfrom = \"network\"\nto = \"module\"\nallow = [\"b/*\"]\n"));
        let o = reload(&name);
        seen = (before, own_copy(pid), text(&o), Some(o.status.success()));
        true
    });
    let out = log();
    let host_file = std::fs::read_to_string(&host_copy).unwrap_or_default();
    nothing_left(&name);
    assert!(status.success(), "partita up failed: {up_stderr}\n{out}");
    eprintln!("from inside the I/O partition:\n{out}");
    let inside = outcomes(&out);
    let expected: Vec<(String, Option<String>)> = REFUSALS.iter().map(|(what, why)| (what.to_string(), Some(why.to_string()))).collect();
    assert_eq!(inside, expected, "each attack from inside the I/O partition is refused, for its reason:\n{out}");
    let (before, after, answer, reloaded) = seen;
    assert!(before.contains("allow = [\"a/*\"]") && !before.contains("written by the partition") && !before.contains("own table"), "the partition's copy as the supervisor wrote it:\n{before}");
    assert_eq!(reloaded, Some(true), "{answer}");
    assert!(after.contains("allow = [\"b/*\"]") && after == host_file, "the supervisor rewrote it after the attacks:\n{after}\n{answer}");
}
