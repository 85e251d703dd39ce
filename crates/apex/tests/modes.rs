//! The services that end or take over the partition's process (SET_PARTITION_MODE, RAISE_APPLICATION_ERROR,
//! the release of processes in NORMAL mode), each in a child process: this test binary run again with
//! `PARTITA_APEX_MODES_CHILD` naming what the child does.
use a653rs::bindings::*;
use a653rs::prelude::Name;
use partita_apex::{PartitaHypervisor as H, EXIT_APPLICATION_ERROR, EXIT_COLD_START, EXIT_IDLE, EXIT_STOPPED};
use std::process::{Command, Output};
use std::str::FromStr;
use std::time::Duration;

const CHILD: &str = "PARTITA_APEX_MODES_CHILD";
const PERIOD: Duration = Duration::from_millis(20);
const RELEASES: usize = 5;

/// Runs [`child`] in a new process of this test binary, doing `scenario`.
fn run_child(scenario: &str) -> (i32, Vec<String>, String) {
    let Output { status, stdout, stderr } = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD, scenario)
        .env(partita_env::PARTITION, "modes")
        .output()
        .unwrap();
    // The test harness's own lines ("running 1 test") are not the child's; its "test child ... " has no line
    // end, so the child's first line follows it on the same line.
    let lines = String::from_utf8_lossy(&stdout).lines().filter_map(|l| l.split_once("child: ").map(|(_, line)| line.to_string())).collect();
    (status.code().unwrap_or(-1), lines, String::from_utf8_lossy(&stderr).into_owned())
}

fn name(n: &str) -> ApexName {
    Name::from_str(n).unwrap().into()
}

fn attributes(process: &str, period: ApexSystemTime, entry_point: extern "C" fn()) -> ApexProcessAttribute {
    ApexProcessAttribute { period, time_capacity: INFINITE_TIME_VALUE, entry_point, stack_size: 64 << 10, base_priority: 1, deadline: Deadline::Soft, name: name(process) }
}

/// A periodic process: prints the time of each of its releases, and what REPLENISH says.
extern "C" fn periodic() {
    for _ in 0..=RELEASES {
        println!("child: release {}", H::get_time());
        <H as ApexTimeP4>::periodic_wait().unwrap();
    }
    println!("child: replenish within the period {:?}", H::replenish(PERIOD.as_nanos() as i64 / 4));
    println!("child: replenish beyond the next release {:?}", H::replenish(10 * PERIOD.as_nanos() as i64));
}

/// An aperiodic process: PERIODIC_WAIT is not for it.
extern "C" fn aperiodic() {
    println!("child: aperiodic periodic_wait {:?}", <H as ApexTimeP4>::periodic_wait());
}

/// What a child process does; nothing in the ordinary test run.
#[test]
fn child() {
    let Ok(scenario) = std::env::var(CHILD) else { return };
    match scenario.as_str() {
        "idle" => drop(H::set_partition_mode(OperatingMode::Idle)),
        "cold-start" => drop(H::set_partition_mode(OperatingMode::ColdStart)),
        "raise" => drop(H::raise_application_error(ErrorCode::ApplicationError, b"the tank is empty")),
        "normal" => {
            let p = H::create_process(&attributes("periodic", PERIOD.as_nanos() as i64, periodic)).unwrap();
            let a = H::create_process(&attributes("aperiodic", INFINITE_TIME_VALUE, aperiodic)).unwrap();
            H::start(p).unwrap();
            H::start(a).unwrap();
            // Started, but not released before NORMAL mode: nothing of theirs may come before this line.
            std::thread::sleep(Duration::from_millis(50));
            println!("child: entering normal mode");
            let _ = H::set_partition_mode(OperatingMode::Normal);
        }
        other => panic!("no child scenario {other:?}"),
    }
    println!("child: still running");
}

#[test]
fn idle_mode_ends_the_partition_s_process_with_its_exit_code() {
    let (code, lines, stderr) = run_child("idle");
    assert_eq!(code, EXIT_IDLE, "{stderr}");
    assert!(lines.is_empty(), "{lines:?}");
    assert!(stderr.contains("modes: SET_PARTITION_MODE(IDLE)"), "{stderr}");
    let (code, _, stderr) = run_child("cold-start");
    assert_eq!(code, EXIT_COLD_START, "{stderr}");
}

#[test]
fn an_application_error_ends_the_partition_s_process_for_the_health_monitor() {
    let (code, lines, stderr) = run_child("raise");
    assert_eq!(code, EXIT_APPLICATION_ERROR, "{stderr}");
    assert!(lines.is_empty(), "{lines:?}");
    assert!(stderr.contains("modes: application error: the tank is empty"), "{stderr}");
}

#[test]
fn normal_mode_releases_the_processes_and_the_partition_ends_when_they_return() {
    let (code, lines, stderr) = run_child("normal");
    assert_eq!(code, EXIT_STOPPED, "{stderr}");
    assert_eq!(lines.first().map(String::as_str), Some("entering normal mode"), "no process runs before NORMAL mode: {lines:?}");
    assert!(!lines.iter().any(|l| l == "still running"), "SET_PARTITION_MODE(NORMAL) does not return: {lines:?}");
    assert!(lines.iter().any(|l| l == "aperiodic periodic_wait Err(InvalidMode)"), "{lines:?}");
    let releases: Vec<i64> = lines.iter().filter_map(|l| l.strip_prefix("release ")).map(|t| t.parse().unwrap()).collect();
    assert_eq!(releases.len(), RELEASES + 1, "{lines:?}");
    // Released every period from the partition's entry into NORMAL mode: the first release may have woken late
    // (by up to a period here, on a loaded machine), the later ones are at fixed points after it.
    let period = PERIOD.as_nanos() as i64;
    assert!(releases.windows(2).all(|w| w[0] < w[1]), "{releases:?}");
    let span = releases[RELEASES] - releases[0];
    assert!(span >= period * (RELEASES as i64 - 1) && span < period * (RELEASES as i64 + 10), "{RELEASES} periods took {span} ns: {releases:?}");
    assert!(lines.iter().any(|l| l == "replenish within the period Ok(())"), "{lines:?}");
    assert!(lines.iter().any(|l| l == "replenish beyond the next release Err(InvalidMode)"), "{lines:?}");
    assert!(stderr.contains("every process has returned"), "{stderr}");
}
