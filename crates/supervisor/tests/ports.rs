//! ARINC 653 channels between partitions under a plan: a writer and a reader exchange sampling and queuing
//! messages through `partita app port`; an attacker, a destination of the same sampling channel and the source
//! of a queuing channel of its own to the reader, attacks the channel memory (each attack also made on the host
//! against a scratch memory file, where it works) and then writes garbage into its own channel. The reader
//! gets every message of the writer in order, reports the attacker's garbage, and nobody is restarted for it.
mod common;
use common::*;
use partita_supervisor::Supervisor;
use std::process::Command;
use std::time::Duration;

const ATTACK: &str = include_str!("ports/port_attack.py");
const MESSAGES: u32 = 30;

fn system_text(name: &str, port: &str) -> String {
    format!(
        r#"
[system]
name = "{name}"

[[module]]
name = "m"
cpus = [1]

[[module.partition]]
name = "writer"
command = ["sh", "-c", "P=$PARTITA_STATE_DIR/partita-port; i=0; while [ $i -lt {MESSAGES} ]; do i=$((i+1)); $P write position p$i; $P send commands c$i --timeout 2s || echo SEND-FAILED $i; done; $P write commands x; $P read position; echo WRITER done; exec sleep 300"]
binds = ["sleep", "{port}"]

[[module.partition]]
name = "reader"
command = ["sh", "-c", "P=$PARTITA_STATE_DIR/partita-port; i=0; while [ $i -lt {MESSAGES} ]; do i=$((i+1)); $P receive commands --timeout 5s; $P read position; $P receive junk || true; done; j=0; while [ $j -lt 20 ]; do j=$((j+1)); $P receive junk || true; sleep 0.1; done; echo READER done; exec sleep 300"]
binds = ["sleep", "{port}"]

[[module.partition]]
name = "attacker"
command = ["sh", "-c", "while [ ! -f \"$PARTITA_STATE_DIR/attack.py\" ]; do sleep 0.05; done; python3 \"$PARTITA_STATE_DIR/attack.py\" partition; exec sleep 300"]
{python}

[[module.channel]]
name = "position"
kind = "sampling"
source = "writer"
destinations = ["reader", "attacker"]
max_message = "64B"
refresh = "1s"

[[module.channel]]
name = "commands"
kind = "queuing"
source = "writer"
destinations = ["reader"]
max_message = "256B"
depth = 4

[[module.channel]]
name = "junk"
kind = "queuing"
source = "attacker"
destinations = ["reader"]
max_message = "64B"
depth = 4
on_fault = "restart"

[[module.plan]]
cpu = 1
major_frame = "3ms"
window = [{{ partition = "writer", start = "0us", duration = "1ms" }}, {{ partition = "reader", start = "1ms", duration = "1ms" }}, {{ partition = "attacker", start = "2ms", duration = "1ms" }}]
"#,
        python = binds(&["sleep", "python3"])
    )
}

fn results(log: &str) -> Vec<(String, String)> {
    log.lines().filter_map(|l| l.strip_prefix("RESULT ")).filter_map(|l| l.split_once(": ").map(|(a, r)| (a.to_string(), r.to_string()))).collect()
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn partitions_exchange_through_their_ports_and_an_attacker_reaches_no_other_channel() {
    // On the host, against scratch memory files, every attack works: the test would see one succeed.
    let dir = tempdir("port-attack");
    let script = dir.0.join("attack.py");
    std::fs::write(&script, ATTACK).unwrap();
    let out = Command::new("python3").arg(&script).arg("host").output().unwrap();
    let host = results(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(host.len(), 5, "{host:?} {}", String::from_utf8_lossy(&out.stderr));
    assert!(host.iter().all(|(_, r)| r == "SUCCEEDED"), "on the host every attack works: {host:?}");

    let port = partita_binary().parent().unwrap().join("partita-port");
    assert!(port.is_file(), "{} is missing: build the workspace's binaries first", port.display());
    let name = system_name("ports");
    let root = tempdir("state");
    let sys = system(&system_text(&name, &port.display().to_string()));
    let state_dir = |name: &str| sys.partitions().find(|(_, p)| p.name == name).unwrap().1.tree.confinement.clone().unwrap().state_dir;
    let attacker = state_dir("attacker");
    std::fs::create_dir_all(&attacker).unwrap();
    std::fs::write(attacker.join("attack.py"), ATTACK).unwrap();
    // The shell's `partita app port` is a copy in each partition's own state directory: a build under /tmp (a
    // clean clone there) is in a place no partition sees. Its bind above brings the libraries it links.
    for p in ["writer", "reader"] {
        let dir = state_dir(p);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&port, dir.join("partita-port")).unwrap();
    }
    let _cleanup = TempDir(attacker.parent().unwrap().to_path_buf());

    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    let logs = root.0.join(&name);
    let log = move |p: &str| std::fs::read_to_string(logs.join(format!("{p}.log"))).unwrap_or_default();
    let (l2, l3) = (log.clone(), log.clone());
    let events = run_until(sup, Duration::from_secs(40), move |events| {
        // The reader reads the attacker's channel for 2 s after its exchange: both of the hostile writer's
        // garbage phases (0.5 s apart) reach it, whenever the attacker starts them.
        let too_large = events.events().iter().any(|e| e.event == "port_fault" && e.detail.as_deref().is_some_and(|d| d.contains("message too large")));
        l2("reader").contains("READER done") && l2("writer").contains("WRITER done") && l3("attacker").contains("HOSTILE done") && too_large
    });
    let (writer, reader, attacker_log) = (log("writer"), log("reader"), log("attacker"));
    assert!(reader.contains("READER done") && writer.contains("WRITER done"), "writer:\n{writer}\nreader:\n{reader}");
    assert!(!writer.contains("SEND-FAILED"), "{writer}");

    // Every queuing message, in order; every sampling read valid and one the writer wrote.
    let received: Vec<&str> = reader.lines().filter(|l| l.starts_with("len=") && l.ends_with(|c: char| c.is_ascii_digit()) && !l.contains(" seq=")).filter_map(|l| l.rsplit(' ').next()).filter(|m| m.starts_with('c')).collect();
    let wanted: Vec<String> = (1..=MESSAGES).map(|i| format!("c{i}")).collect();
    assert_eq!(received, wanted, "reader:\n{reader}");
    let samples: Vec<&str> = reader.lines().filter(|l| l.contains(" seq=")).collect();
    assert_eq!(samples.len(), MESSAGES as usize, "reader:\n{reader}");
    assert!(samples.iter().all(|l| l.contains(" valid ") && l.rsplit(' ').next().is_some_and(|m| m.starts_with('p'))), "{samples:?}");
    // The writer read its own source port: refused as an illegal operation, as was writing a queuing port.
    assert!(writer.contains("is a sampling source port, opened as a sampling destination"), "{writer}");

    // Every attack refused inside the partition.
    let inside = results(&attacker_log);
    assert_eq!(inside.len(), 5, "attacker:\n{attacker_log}");
    assert!(inside.iter().all(|(_, r)| r.starts_with("refused")), "attacker:\n{attacker_log}");
    // Its control page and the supervisor's socket: a plan switch (it is no system partition), garbage, an error
    // kind a partition may not raise, resizing the page, the socket: each refused, the requests as illegal.
    let control: Vec<(String, String)> = attacker_log.lines().filter_map(|l| l.strip_prefix("CONTROL ")).filter_map(|l| l.split_once(": ").map(|(a, r)| (a.to_string(), r.to_string()))).collect();
    assert_eq!(control.len(), 5, "attacker:\n{attacker_log}");
    assert!(control.iter().all(|(_, r)| r.starts_with("refused")), "attacker:\n{attacker_log}");
    let refusals = |what: &str| control.iter().find(|(a, _)| a == what).map(|(_, r)| r.clone()).unwrap_or_default();
    assert_eq!(refusals("switch-plan-from-a-partition-not-marked-system"), "refused (refused by the supervisor)");
    assert_eq!(refusals("garbage-request-on-own-page"), "refused (invalid)");
    assert_eq!(refusals("raise-power-fail"), "refused (refused by the supervisor)");
    let illegal = events.events().iter().filter(|e| e.event == "illegal_request" && e.partition == "attacker").count();
    assert!(illegal >= 1, "the refused requests are logged as illegal requests");

    // The faults are the health monitor's events: the writer's illegal operations, and the attacker's garbage
    // as the reader found it, blamed on the attacker and acted on for nobody.
    let faults: Vec<(String, String)> = events.events().iter().filter(|e| e.event == "port_fault").map(|e| (e.partition.clone(), e.detail.clone().unwrap_or_default())).collect();
    assert!(faults.iter().any(|(p, d)| p == "writer" && d.contains("illegal port operation")), "{faults:?}");
    assert!(faults.iter().any(|(p, d)| p == "reader" && d.contains("port junk") && d.contains("corrupt peer memory") && d.contains("of the other end: attacker")), "{faults:?}");
    assert!(faults.iter().any(|(p, d)| p == "reader" && d.contains("port junk") && d.contains("message too large")), "{faults:?}");
    let restarts: Vec<_> = events.events().iter().filter(|e| e.event == "restart" || e.event == "exit").map(|e| (e.partition.clone(), e.event.to_string())).collect();
    assert!(restarts.iter().all(|(p, _)| p != "reader" && p != "writer"), "{restarts:?}");
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}
