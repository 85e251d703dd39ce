//! A partition that keeps running past its windows inside long system calls (`partita app fault vma-walk`:
//! single calls over 60,000 mappings, which the freezer cannot stop until they return) is noted, demoted and
//! contained by its time-overrun action; its neighbours keep running. How much of their time it takes before
//! that, per kind of kernel work and kernel, is `partita bench isolation`'s to measure (docs/security.md).
mod common;
use common::*;
use partita_supervisor::overrun::{EVENT_CONTAINED, EVENT_OVERRUN_ACTION, EVENT_TIME_OVERRUN};
use partita_supervisor::Supervisor;
use std::time::{Duration, Instant};

fn system_text(name: &str, action: &str) -> String {
    let fault = partita_binary().display().to_string();
    format!(
        r#"
[system]
name = "{name}"

[[module]]
name = "m"
cpus = [1]

[[module.partition]]
name = "victim"
command = ["sh", "-c", "while :; do :; done"]
health = {{ action = "stop" }}

[[module.partition]]
name = "faulty"
command = ["{fault}", "app", "fault", "vma-walk"]
memory = "256MiB"
health = {{ action = "restart" }}
time_overrun = {{ action = "{action}", count = 2, frames = 10 }}

[[module.partition]]
name = "bystander"
command = ["sh", "-c", "while :; do :; done"]
health = {{ action = "stop" }}

[[module.plan]]
cpu = 1
major_frame = "3ms"
window = [{{ partition = "victim", start = "0ms", duration = "1ms" }}, {{ partition = "faulty", start = "1ms", duration = "1ms" }}, {{ partition = "bystander", start = "2ms", duration = "1ms" }}]
"#
    )
}

/// Runs the system until the faulty partition is contained (or 60 s), then for `after` more; returns the
/// event log.
fn run_until_contained(name: &str, action: &str, after: Duration) -> Vec<partita_supervisor::health::Event> {
    let root = tempdir("state");
    let sys = system(&system_text(name, action));
    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    let events = sup.events().clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (stop, events) = (stop.clone(), events.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline && !events.events().iter().any(|e| e.event == EVENT_CONTAINED) {
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(after);
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    sup.run(None, Some(stop)).unwrap();
    watcher.join().unwrap();
    assert_nothing_left(name, Some(&link_prefix(name)));
    events.events()
}

fn of<'a>(events: &'a [partita_supervisor::health::Event], partition: &str, event: &str) -> Vec<&'a partita_supervisor::health::Event> {
    events.iter().filter(|e| e.partition == partition && e.event == event).collect()
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_partition_running_past_its_windows_is_stopped_and_not_restarted() {
    let name = system_name("ovs");
    let events = run_until_contained(&name, "stop", Duration::from_millis(500));
    let dump = || events.iter().filter(|e| e.event != "time_overrun" && e.event != "demoted").map(|e| format!("{} {} {:?}", e.partition, e.event, e.detail)).collect::<Vec<_>>().join("\n");
    assert!(!of(&events, "faulty", EVENT_TIME_OVERRUN).is_empty(), "no overrun of the faulty partition was seen:\n{}", dump());
    let actions = of(&events, "faulty", EVENT_OVERRUN_ACTION);
    assert_eq!(actions.len(), 1, "{}", dump());
    assert!(actions[0].detail.as_deref().unwrap_or("").starts_with("stop"), "{}", dump());
    let contained = of(&events, "faulty", EVENT_CONTAINED);
    assert_eq!(contained.len(), 1, "{}", dump());
    eprintln!("contained: {:?}", contained[0].detail);
    // Killed once, never started again, although its health action is restart.
    assert_eq!(of(&events, "faulty", "exit").len(), 1, "{}", dump());
    assert!(of(&events, "faulty", "restart").is_empty(), "{}", dump());
    // Its neighbours only ever ran; none of them was acted on.
    for p in ["victim", "bystander"] {
        assert!(of(&events, p, EVENT_OVERRUN_ACTION).is_empty() && of(&events, p, "exit").is_empty(), "{p}:\n{}", dump());
    }
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn an_idled_partition_stays_frozen_with_its_processes_alive() {
    let name = system_name("ovi");
    let events = run_until_contained(&name, "idle", Duration::from_millis(500));
    let dump = || events.iter().filter(|e| e.event != "time_overrun" && e.event != "demoted").map(|e| format!("{} {} {:?}", e.partition, e.event, e.detail)).collect::<Vec<_>>().join("\n");
    let actions = of(&events, "faulty", EVENT_OVERRUN_ACTION);
    assert_eq!(actions.len(), 1, "{}", dump());
    assert!(actions[0].detail.as_deref().unwrap_or("").starts_with("idle"), "{}", dump());
    assert_eq!(of(&events, "faulty", EVENT_CONTAINED).len(), 1, "{}", dump());
    // Not killed: it ended with the system, frozen all along since its containment.
    assert!(of(&events, "faulty", "exit").is_empty(), "{}", dump());
    let contained_at = of(&events, "faulty", EVENT_CONTAINED)[0].monotonic_ns;
    let later: Vec<_> = events.iter().filter(|e| e.partition == "faulty" && e.monotonic_ns > contained_at && e.event == EVENT_TIME_OVERRUN).collect();
    assert!(later.is_empty(), "it ran past its windows after its containment: {later:?}");
}
