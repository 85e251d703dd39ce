//! Fast DDS to Fast DDS through the router keeps the instance life cycle: a Fast DDS 2.9 publisher (the probe,
//! fastddsgen types) writes three instances twice each, disposes instance 1 and unregisters instance 2 (its writer
//! does not autodispose); a Fast DDS subscriber on another domain, the router's engine between them, must see the six
//! samples, instance 1 disposed, instance 2 without writers and instance 3 alive, as the same pair does directly.
//! Once on loopback (two domains), once with publisher and subscriber each in a network namespace of its own,
//! joined by a veth pair to a third one where the router runs (198.18.37.0/30 and 198.18.37.4/30, no multicast).
use partita_dds::fastdds::{FastDdsProfile, PROFILES_VARIABLE};
use partita_interop::exchange::Running;
use partita_interop::{fastdds_probe, outcome, parse_seen, stamp};
use partita_router::{Router, RouterConfig};
use std::io::Read;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The life cycle the publisher gives: `--dispose 1 --unregister 2` (the vendor test's probes dispose 2 and
/// unregister 3).
const LIFE_CYCLE: [&str; 4] = ["--dispose", "1", "--unregister", "2"];

/// Domain ids distinct per test process.
fn domain(n: u32) -> u32 {
    assert!(n < 10);
    150 + (std::process::id() % 8) * 10 + n
}

/// Where a probe runs: its network namespace (`None`: this one) and its Fast DDS profile.
struct Place {
    netns: Option<String>,
    profile: FastDdsProfile,
}

/// Starts the Fast DDS probe with `args` at `place`; `file` receives its profile.
fn probe(place: &Place, file: &Path, args: &[&str]) -> Running {
    std::fs::write(file, place.profile.to_xml().unwrap()).unwrap();
    let mut c = match &place.netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(fastdds_probe());
            c
        }
        None => Command::new(fastdds_probe()),
    };
    c.args(args).args(LIFE_CYCLE).env(PROFILES_VARIABLE, file).env_remove("CYCLONEDDS_URI");
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    Running(c.spawn().unwrap_or_else(|e| panic!("starting the Fast DDS probe: {e}")))
}

/// The subscriber first, then the publisher, which writes once it matched a reader (the router's): returns what
/// the subscriber printed and both probes' logs.
fn exchange(publisher: &Place, subscriber: &Place, (pd, sd): (u32, u32), topic: &str, dir: &Path) -> (String, String) {
    std::fs::create_dir_all(dir).unwrap();
    let (pd, sd) = (pd.to_string(), sd.to_string());
    let sub = probe(subscriber, &dir.join("sub.xml"), &["sub", &sd, topic, "--seconds", "14"]);
    let publ = probe(publisher, &dir.join("pub.xml"), &["pub", &pd, topic, "--wait-readers", "1", "--linger", "8"]);
    let (out, err) = sub.finish(Duration::from_secs(19));
    let (pout, perr) = publ.finish(Duration::ZERO);
    (out.clone(), format!("subscriber stdout:\n{out}\nsubscriber stderr:\n{err}\npublisher stdout:\n{pout}\npublisher stderr:\n{perr}"))
}

/// What the subscriber must have seen: the six samples in order with the publisher's source timestamps, instance 1
/// disposed, 2 without writers, 3 alive.
fn check(what: &str, out: &str, log: &str, router: &Router) {
    let (samples, states) = outcome(&parse_seen(out));
    let stats = format!("{:#?}", router.stats());
    assert_eq!(samples.len(), 6, "{what}: samples\n{log}\nrouter statistics: {stats}");
    for (i, (_, seq, _, ts)) in samples.iter().enumerate() {
        assert_eq!((*seq, *ts), (Some(i as i32 + 1), stamp(i as i64 + 1)), "{what}: sample {i}\n{log}");
    }
    let whole = vec![(Some(1), "disposed".to_string()), (Some(2), "no_writers".to_string()), (Some(3), "alive".to_string())];
    let states: Vec<_> = states.into_iter().filter(|(id, _)| id.is_some()).collect();
    assert_eq!(states, whole, "{what}: instance states\n{log}\nrouter statistics: {stats}");
}

fn route(name: &str, a: (u32, &str, &str), b: (u32, &str, &str)) -> RouterConfig {
    let side = |n: &str, (d, interface, peer): (u32, &str, &str)| {
        format!("[[side]]\nname = \"{n}\"\ndomain = {d}\ninterface = \"{interface}\"\npeers = [\"{peer}\"]\n")
    };
    let text = format!("name = \"{name}\"\nstats_period = \"1s\"\n{}{}[[route]]\nfrom = \"a\"\nto = \"b\"\n", side("a", a), side("b", b));
    RouterConfig::parse(&text, Path::new("lifecycle.toml")).unwrap_or_else(|e| panic!("{e:?}"))
}

fn scratch(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("partita-lifecycle-{what}-{}", std::process::id()))
}

#[test]
fn fast_dds_to_fast_dds_keeps_dispose_and_unregister_through_the_router_on_loopback() {
    let dir = scratch("lo");
    let here = || Place { netns: None, profile: FastDdsProfile::loopback() };
    // Directly first: the probes themselves keep the life cycle.
    let d = domain(0);
    let (out, log) = exchange(&here(), &here(), (d, d), "lifecycle_direct", &dir.join("direct"));
    let _ = std::fs::remove_dir_all(&dir);
    let (samples, states) = outcome(&parse_seen(&out));
    assert_eq!(samples.len(), 6, "directly:\n{log}");
    assert_eq!(states, vec![(Some(1), "disposed".into()), (Some(2), "no_writers".into()), (Some(3), "alive".into())], "directly:\n{log}");

    let (a, b) = (domain(1), domain(2));
    let router = Router::start(route("lifecycle-lo", (a, "lo", "127.0.0.1"), (b, "lo", "127.0.0.1"))).unwrap();
    let (out, log) = exchange(&here(), &here(), (a, b), "lifecycle_routed", &dir.join("routed"));
    let _ = std::fs::remove_dir_all(&dir);
    check("routed on loopback", &out, &log, &router);
}

/// Network namespaces this test made, deleted (with their veths) when dropped.
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap_or_else(|e| panic!("ip {args:?}: {e}"));
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn fast_dds_to_fast_dds_keeps_dispose_and_unregister_through_the_router_between_network_namespaces() {
    if partita_os::process::effective_uid() != 0 {
        eprintln!("skipped: network namespaces need root");
        return;
    }
    let tag = std::process::id() % 100_000;
    let name = |role: &str| format!("partita-lc{tag}-{role}");
    let ns = Namespaces(vec![name("pub"), name("sub"), name("router")]);
    for n in &ns.0 {
        ip(&["netns", "add", n]);
        ip(&["-n", n, "link", "set", "lo", "up"]);
    }
    let router_ns = &ns.0[2];
    // A veth pair from the router's namespace to each probe's: the router's end, the probe's end, their addresses.
    let links = [
        (&ns.0[0], format!("lcp{tag}r"), format!("lcp{tag}"), "198.18.37.1", "198.18.37.2"),
        (&ns.0[1], format!("lcs{tag}r"), format!("lcs{tag}"), "198.18.37.5", "198.18.37.6"),
    ];
    for (probe_ns, router_end, probe_end, router_addr, probe_addr) in &links {
        ip(&["-n", router_ns, "link", "add", router_end, "type", "veth", "peer", "name", probe_end, "netns", probe_ns]);
        ip(&["-n", router_ns, "addr", "add", &format!("{router_addr}/30"), "dev", router_end]);
        ip(&["-n", router_ns, "link", "set", router_end, "up"]);
        ip(&["-n", probe_ns, "addr", "add", &format!("{probe_addr}/30"), "dev", probe_end]);
        ip(&["-n", probe_ns, "link", "set", probe_end, "up"]);
    }
    // Fast DDS leaves out an interface whose link is not yet up (its whitelist is then empty): wait for carrier.
    for (probe_ns, router_end, probe_end, _, _) in &links {
        for (n, dev) in [(router_ns, router_end), (*probe_ns, probe_end)] {
            let end = Instant::now() + Duration::from_secs(10);
            loop {
                let out = Command::new("ip").args(["-n", n, "-br", "link", "show", "dev", dev]).output().unwrap();
                if String::from_utf8_lossy(&out.stdout).split_whitespace().nth(1) == Some("UP") {
                    break;
                }
                assert!(Instant::now() < end, "{dev} in {n} is not up: {}", String::from_utf8_lossy(&out.stdout));
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    let place = |i: usize| {
        let (probe_ns, _, _, router_addr, probe_addr) = &links[i];
        let addr: Ipv4Addr = probe_addr.parse().unwrap();
        Place { netns: Some(probe_ns.to_string()), profile: FastDdsProfile { addresses: vec![addr], peers: vec![router_addr.parse().unwrap()], max_participant_index: 20 } }
    };
    let (a, b) = (domain(3), domain(4));
    let config = route("lifecycle-ns", (a, &links[0].1, links[0].4), (b, &links[1].1, links[1].4));
    // The router's participants open their sockets in the router's namespace: it starts on a thread that joined it.
    let router = partita_os::netns::run_in_netns(&partita_os::netns::named_path(router_ns), move || Router::start(config))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = scratch("ns");
    let (out, log) = exchange(&place(0), &place(1), (a, b), "lifecycle_ns", &dir);
    let _ = std::fs::remove_dir_all(&dir);
    check("routed between network namespaces", &out, &log, &router);
    drop(router);
    drop(ns);
}
