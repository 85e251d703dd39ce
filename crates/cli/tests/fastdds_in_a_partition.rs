//! A Fast DDS program left to its defaults, in a partition: the supervisor's profile
//! (`FASTRTPS_DEFAULT_PROFILES_FILE`: its V-NIC only, unicast peers, no multicast, no shared memory) puts it on
//! the module's V-NETWORK, where the routing partition finds it and forwards its keyed samples, dispose and
//! unregister included, to a Cyclone DDS subscriber (Python) on a native node (root).
use partita_interop::{outcome, parse_seen, stamp};
mod common;
use common::{spawn_up, stop_up_when};
use std::time::Duration;

const SYSTEM: &str = r#"
[system]
name = "NAME"

[[module]]
name = "m"
cpus = [1]

[[module.partition]]
name = "fastpub"
command = ["FASTPROBE", "pub", "FASTDOMAIN", "keyed", "--wait-readers", "1", "--linger", "20"]
memory = "64MiB"
health = { action = "stop" }

[[module.partition]]
name = "routing"
command = ["partita", "route"]
memory = "64MiB"
io = true

[[module.plan]]
cpu = 1
major_frame = "2ms"
window = [{ partition = "fastpub", start = "0us", duration = "1ms" }, { partition = "routing", start = "1ms", duration = "1ms" }]

[[node]]
name = "sub"
command = ["sh", "-c", "exec PYTHON PYPROBE sub $PARTITA_DOMAIN keyed --seconds 25"]
"#;

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_fast_dds_program_with_its_defaults_in_a_partition_reaches_a_cyclone_subscriber_through_the_routing_partition() {
    let name = format!("fd{}", std::process::id() % 100_000);
    let dir = std::env::temp_dir().join(format!("partita-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("system.toml");
    // The probe is the partition's program itself (not run through a shell), so that the supervisor binds it into
    // the partition's view wherever the build put it (a clone under /tmp: partitions do not see the host's /tmp);
    // its domain is the module's, as the validated system says.
    let named = SYSTEM.replace("NAME", &name);
    let host = partita_system::Host { cpus: vec![0, 1], path: None };
    let domain = partita_system::parse(&named, "system.toml", &host)
        .unwrap()
        .partitions()
        .find(|(_, p)| p.name == "fastpub")
        .and_then(|(_, p)| p.tree.nics.first().map(|n| n.domain.get()))
        .expect("the publisher's V-NIC");
    let text = named
        .replace("FASTDOMAIN", &domain.to_string())
        .replace("FASTPROBE", partita_interop::fastdds_probe().to_str().unwrap())
        .replace("PYTHON", partita_interop::python().to_str().unwrap())
        .replace("PYPROBE", partita_interop::python_probe().to_str().unwrap());
    std::fs::write(&file, text).unwrap();
    // Up to 30 s; once the subscriber has seen every sample and state (it exits then), the system is stopped
    // with SIGTERM, as an operator would: that tears it down as the end of --duration does.
    let up_err = dir.join("up.err");
    let up = spawn_up(&file, 30, &up_err);
    let state = std::path::Path::new("/run/partita").join(&name);
    let read = |p: &str| std::fs::read_to_string(state.join(format!("{p}.log"))).unwrap_or_default();
    let complete = |log: &str| {
        let (samples, states) = outcome(&parse_seen(log));
        samples.len() == 6 && states.iter().any(|(id, s)| *id == Some(3) && s == "no_writers") && states.iter().any(|(id, s)| *id == Some(2) && s == "disposed")
    };
    let (status, up_stderr) = stop_up_when(up, &up_err, Duration::from_secs(35), || complete(&read("sub")));
    let (publisher, subscriber, routing) = (read("fastpub"), read("sub"), read("routing"));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&state);
    let _ = std::fs::remove_dir_all(std::path::Path::new("/var/lib/partita").join(&name));
    let left = partita_supervisor::cleanup::find(Some(&name)).expect("listing leftovers");
    assert!(left.netns.is_empty() && left.cgroups.is_empty() && left.links.is_empty(), "left behind: {left:?}");
    let logs = format!("publisher:\n{publisher}\nsubscriber:\n{subscriber}\nrouting:\n{routing}\nup:\n{}", up_stderr);
    assert!(status.success(), "{logs}");
    let (samples, states) = outcome(&parse_seen(&subscriber));
    assert_eq!(samples.len(), 6, "{logs}");
    for (i, (_, seq, _, ts)) in samples.iter().enumerate() {
        assert_eq!((*seq, *ts), (Some(i as i32 + 1), stamp(i as i64 + 1)), "{logs}");
    }
    assert_eq!(states, vec![(Some(1), "alive".into()), (Some(2), "disposed".into()), (Some(3), "no_writers".into())], "{logs}");
}
