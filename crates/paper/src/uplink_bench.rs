//! `partita bench uplink`: paper 001's NETWORK and PARTITIONED DDS WITH ROUTING rows with the monitor on one host
//! (today's bridge) and on another machine (an uplink on a wire), in one run (docs/deployment.md, "Measured").
//!
//! The machines are network namespaces on a wire ([`crate::wire`]); every row runs `partita up` as a separate
//! process on them, the one-host rows on the near machine alone, the two-host rows as two parts
//! (`up --host near` and `up --host far`) of one file derived from the same scenario: the recorder side and its
//! uplink on the near machine, the monitor and its uplink on the far one. The monitor is the same program with the
//! same arguments in every row.
use crate::scenario::{Params, Scenario, UDP_ADDRESS, UDP_PORT};
use crate::wire::TwoMachines;
use partita_apps::monitor::Report;
use partita_lab::setup::Setup;
use partita_system::spec::{SystemSpec, UplinkSpec};
use partita_system::UplinkMode;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// The near machine's uplink address (recorder side) and the far one's (monitor side).
pub const NEAR_UPLINK: &str = "198.19.200.1";
pub const FAR_UPLINK: &str = "198.19.200.2";

pub struct UplinkBenchConfig {
    pub count: u64,
    pub warmup: u64,
    pub reply_size: usize,
    /// Where the files of every row and the tables go.
    pub out: PathBuf,
    /// The partita binary the machines run.
    pub partita: PathBuf,
    pub setup: Setup,
}

/// One row: a scenario on one layout, as its monitor measured it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub scenario: String,
    /// `one host (bridge)` or `two hosts (uplink)`.
    pub layout: String,
    pub report: Report,
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum UplinkBenchError {
    #[error("the machines: {0}")]
    Machines(String),
    #[error("{row}: {why}")]
    Row { row: String, why: String },
    #[error("{path}: {e}")]
    File { path: PathBuf, e: std::io::Error },
}

fn file_err(path: &Path) -> impl FnOnce(std::io::Error) -> UplinkBenchError + '_ {
    move |e| UplinkBenchError::File { path: path.to_path_buf(), e }
}

/// An uplink on `eth1` at `address` (a /24).
fn uplink(address: &str) -> UplinkSpec {
    UplinkSpec::new("eth1", UplinkMode::Move, format!("{address}/24"))
}

/// The one-host system `one` of `scenario` placed on two machines, `near` and `far`: the answering side on
/// `near` with an uplink, the monitor on `far` with its own. `None` for a scenario this benchmark does not
/// place.
pub fn place_on_two_hosts(scenario: Scenario, one: SystemSpec) -> Option<SystemSpec> {
    let mut s = one.host("near").host("far");
    match scenario {
        Scenario::Network => {
            // The monitor asks the echo at the near machine's uplink address.
            let (server, near_server) = (format!("{UDP_ADDRESS}:{UDP_PORT}"), format!("{NEAR_UPLINK}:{UDP_PORT}"));
            for n in &mut s.node {
                for a in &mut n.command {
                    *a = a.replace(&server, &near_server);
                }
                match n.name.as_str() {
                    "recorder" => {
                        n.host = Some("near".into());
                        n.uplink = Some(uplink(NEAR_UPLINK));
                    }
                    "monitor" => {
                        n.host = Some("far".into());
                        n.uplink = Some(uplink(FAR_UPLINK));
                    }
                    _ => {}
                }
            }
        }
        Scenario::PartitionedRouting => {
            for m in s.module.iter_mut().filter(|m| m.name == "camera-node") {
                m.host = Some("near".into());
                for p in m.partition.iter_mut().filter(|p| p.router.is_some()) {
                    p.uplink = Some(uplink(NEAR_UPLINK));
                    // What came from the inter-module network now comes from the uplink.
                    let routes = p.router.as_mut().and_then(|r| r.get_mut("route")).and_then(|r| r.as_array_mut());
                    if let Some(route) = routes.and_then(|r| r.iter_mut().filter_map(|r| r.as_table_mut()).find(|r| r.get("from").and_then(|f| f.as_str()) == Some("network"))) {
                        route.insert("from".into(), "uplink".into());
                    }
                }
            }
            for n in s.node.iter_mut().filter(|n| n.name == "monitor") {
                n.host = Some("far".into());
                n.uplink = Some(uplink(FAR_UPLINK));
            }
        }
        _ => return None,
    }
    Some(s)
}

/// Waits for the monitor's report at `json` (written when it has made its requests), at most `limit`; then
/// stops every `up` of the row (SIGTERM: each tears its part down and gives its uplink back).
fn finish(ups: Vec<Child>, json: &Path, limit: Duration, row: &str, logs: &[PathBuf]) -> Result<Report, UplinkBenchError> {
    let deadline = Instant::now() + limit;
    let mut report = None;
    let mut ups = ups;
    while Instant::now() < deadline {
        if let Some(r) = std::fs::read_to_string(json).ok().and_then(|t| serde_json::from_str::<Report>(&t).ok()) {
            report = Some(r);
            break;
        }
        if ups.iter_mut().any(|u| u.try_wait().ok().flatten().is_some()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Monitor side first, then the answering side.
    for u in ups.iter().rev() {
        // our own children: the supervisors (nsenter runs each in place)
        let _ = partita_os::process::send_signal(u.id() as i32, libc::SIGTERM);
    }
    for u in ups.iter_mut() {
        let _ = u.wait();
    }
    report.ok_or_else(|| UplinkBenchError::Row {
        row: row.to_string(),
        why: format!(
            "no report from the monitor within {} s; the supervisors said: {}",
            limit.as_secs(),
            logs.iter().map(|l| std::fs::read_to_string(l).unwrap_or_default()).collect::<Vec<_>>().join(" | ")
        ),
    })
}

/// Runs the four rows: NETWORK and PARTITIONED DDS WITH ROUTING, each on one host and over the uplink.
pub fn run(cfg: &UplinkBenchConfig) -> Result<Vec<Row>, UplinkBenchError> {
    std::fs::create_dir_all(&cfg.out).map_err(file_err(&cfg.out))?;
    let machines = TwoMachines::new(&format!("ptub{}", std::process::id()), &cfg.partita).map_err(UplinkBenchError::Machines)?;
    let mut rows = Vec::new();
    for scenario in [Scenario::Network, Scenario::PartitionedRouting] {
        for two in [false, true] {
            let layout = if two { "two hosts (uplink)" } else { "one host (bridge)" };
            let row = format!("{} on {layout}", scenario.key());
            let json = cfg.out.join(format!("{}-{}.json", scenario.key(), if two { "two" } else { "one" }));
            let _ = std::fs::remove_file(&json);
            let params = Params {
                reply_size: cfg.reply_size,
                count: cfg.count,
                warmup: cfg.warmup,
                timeout_ms: 1000,
                monitor_json: json.clone(),
                ring: cfg.out.join("ring"),
                save_frame: None,
                recorder_cpu: 0,
                routing_cpu: 1,
                memory_bytes: 256 << 20,
                monitor_extra: vec!["--connect-timeout".into(), "30".into()],
                setup: cfg.setup,
                plan: None,
            };
            let mut one = SystemSpec::from_toml(&scenario.toml(&params)).map_err(|e| UplinkBenchError::Row { row: row.clone(), why: format!("the scenario's system: {e}") })?;
            one.system.name = format!("uplink-{}", scenario.key());
            let text = if two { place_on_two_hosts(scenario, one).expect("a placed scenario") } else { one }.to_toml();
            let file = cfg.out.join(format!("{}-{}.toml", scenario.key(), if two { "two" } else { "one" }));
            std::fs::write(&file, &text).map_err(file_err(&file))?;
            let limit = Duration::from_secs(60 + cfg.count / 50);
            let seconds = limit.as_secs() as u32 + 10;
            let (near_log, far_log) = (cfg.out.join(format!("{}-near.log", scenario.key())), cfg.out.join(format!("{}-far.log", scenario.key())));
            let spawn = |ns: String, host: Option<&str>, log: &Path| -> Result<Child, UplinkBenchError> {
                match host {
                    Some(h) => machines.up(&ns, h, &file, seconds, log),
                    None => std::fs::File::create(log).and_then(|err| {
                        machines
                            .partita(&ns)
                            .args(["up", &file.display().to_string(), "--duration", &seconds.to_string()])
                            .stdout(std::process::Stdio::null())
                            .stderr(err)
                            .spawn()
                    }),
                }
                .map_err(|e| UplinkBenchError::Row { row: row.clone(), why: format!("starting partita up: {e}") })
            };
            let ups = if two {
                let near = spawn(machines.near(), Some("near"), &near_log)?;
                vec![near, spawn(machines.far(), Some("far"), &far_log)?]
            } else {
                vec![spawn(machines.near(), None, &near_log)?]
            };
            let report = finish(ups, &json, limit, &row, &[near_log, far_log])?;
            eprintln!("bench uplink: {row}: p50 {:.0} µs, p99 {:.0} µs over {} requests", report.summary.p50_us, report.summary.p99_us, report.summary.count);
            rows.push(Row { scenario: scenario.key().to_string(), layout: layout.to_string(), report });
        }
    }
    Ok(rows)
}

/// The rows as a Markdown table, with what the uplink adds to each scenario (two hosts against one, from the
/// same run).
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from("| scenario | layout | requests | timed out | reply B | min µs | mean µs | p50 µs | p99 µs | max µs |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let s = &r.report.summary;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |\n",
            r.scenario, r.layout, s.count, r.report.timeouts, r.report.reply_bytes, s.min_us, s.mean_us, s.p50_us, s.p99_us, s.max_us
        ));
    }
    out.push_str("\n| scenario | uplink adds to p50 (µs) | two hosts / one host, p50 | two hosts / one host, p99 |\n|---|---:|---:|---:|\n");
    for pair in rows.chunks(2) {
        if let [one, two] = pair {
            let (a, b) = (&one.report.summary, &two.report.summary);
            out.push_str(&format!("| {} | {:+.1} | {:.2} | {:.2} |\n", one.scenario, b.p50_us - a.p50_us, b.p50_us / a.p50_us.max(1e-9), b.p99_us / a.p99_us.max(1e-9)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_system::{parse, Host};

    fn params() -> Params {
        Params {
            reply_size: 1024,
            count: 10,
            warmup: 1,
            timeout_ms: 100,
            monitor_json: "/tmp/m.json".into(),
            ring: "/tmp/ring".into(),
            save_frame: None,
            recorder_cpu: 0,
            routing_cpu: 1,
            memory_bytes: 64 << 20,
            monitor_extra: vec![],
            setup: Setup::default(),
            plan: None,
        }
    }

    #[test]
    fn both_scenarios_split_into_a_near_and_a_far_part_joined_by_their_uplinks() {
        for s in [Scenario::Network, Scenario::PartitionedRouting] {
            let text = place_on_two_hosts(s, SystemSpec::from_toml(&s.toml(&params())).unwrap()).unwrap().to_toml();
            let sys = parse(&text, "two.toml", &Host::with_cpus(2)).unwrap_or_else(|e| panic!("{s:?}: {e}\n{text}"));
            let near = sys.part("near").unwrap();
            let far = sys.part("far").unwrap();
            assert_eq!(far.nodes.len(), 1, "{s:?}: only the monitor is far");
            assert_eq!(far.nodes[0].name, "monitor");
            let far_uplink = far.nodes[0].tree.uplink.as_ref().unwrap();
            assert_eq!(far_uplink.address.to_string(), FAR_UPLINK);
            assert_eq!(far_uplink.peers.iter().map(|p| p.to_string()).collect::<Vec<_>>(), [NEAR_UPLINK]);
            assert_eq!(near.uplinks().count(), 1, "{s:?}");
            if s == Scenario::Network {
                // the monitor asks the echo at the near machine's uplink address
                assert!(far.nodes[0].tree.command.iter().any(|a| a == &format!("{NEAR_UPLINK}:{UDP_PORT}")), "{:?}", far.nodes[0].tree.command);
            } else {
                let routing = near.modules[0].partition("routing").unwrap();
                assert!(routing.router.as_ref().unwrap().routes.iter().any(|r| r.from == "uplink"));
            }
        }
        assert!(place_on_two_hosts(Scenario::Traditional, SystemSpec::new("x")).is_none());
    }
}
