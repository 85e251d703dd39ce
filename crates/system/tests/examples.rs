//! The example systems parse, validate and have the paper's shape.
use partita_system::*;

#[test]
fn the_builtin_default_is_the_papers_system() {
    let s = parse(BUILTIN_DEFAULT, BUILTIN_DEFAULT_NAME, &Host::with_cpus(1)).unwrap();
    assert_eq!(BUILTIN_DEFAULT, std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance.toml")).unwrap());
    assert_eq!(s.modules.len(), 1);
    let m = &s.modules[0];
    let plan = &m.plans[0];
    assert_eq!(plan.frame(), Duration::from_micros(1500));
    assert_eq!(plan.time_of("recorder"), Duration::from_micros(700));
    assert_eq!(plan.time_of("routing"), Duration::from_micros(800));
    assert_eq!(m.io_partition().unwrap().name, "routing");
    // the partitioned scenario's worst-case wait: the recorder waits out the router's window
    assert_eq!(plan.worst_case_wait("recorder"), Some(Duration::from_micros(800)));
    assert_eq!(s.nodes.len(), 1);
}

#[test]
fn the_n_monitors_example_has_three_native_monitors() {
    let text = include_str!("../../../examples/video-surveillance-n-monitors.toml");
    let s = parse(text, "n.toml", &Host::with_cpus(1)).unwrap();
    assert_eq!(s.nodes.len(), 3);
    let addrs: std::collections::BTreeSet<_> = s.nodes.iter().map(|n| n.address).collect();
    assert_eq!(addrs.len(), 3);
}

#[test]
fn load_reads_files_and_reports_missing_ones() {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance.toml");
    // load checks against this machine; the example needs CPU 0 only
    assert!(load(std::path::Path::new(p)).is_ok());
    let e = load(std::path::Path::new("/nonexistent/x.toml")).unwrap_err();
    assert!(matches!(e.0[0].problem, Problem::Unreadable(_)));
    assert_eq!(e.0[0].file, "/nonexistent/x.toml");
}

#[test]
fn the_builtin_routing_partition_lets_only_the_surveillance_topics_cross() {
    let s = parse(BUILTIN_DEFAULT, BUILTIN_DEFAULT_NAME, &Host::with_cpus(1)).unwrap();
    let cfg = s.modules[0].io_partition().unwrap().router.clone().expect("a router table");
    assert_eq!(cfg.routes.len(), 1);
    assert_eq!(cfg.routes[0].allow, vec!["surveillance/*".to_string()]);
    assert!(cfg.routes[0].both_ways);
}

#[test]
fn the_multicore_example_gives_the_routing_partition_its_own_cpu() {
    let text = include_str!("../../../examples/video-surveillance-multicore.toml");
    let s = parse(text, "multicore.toml", &Host::with_cpus(2)).unwrap();
    let m = &s.modules[0];
    assert_eq!(m.plans.len(), 2);
    assert_eq!(m.plans.iter().map(|p| p.cpu).collect::<Vec<_>>(), vec![0, 1]);
    assert!(m.io_partition().unwrap().router.is_some());
}
