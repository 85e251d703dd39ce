//! The APEX services on a control page: the test plays the supervisor (it makes the page, hands its
//! descriptor to a child process as the supervisor does, with `PARTITA_CONTROL`, and answers the child's
//! requests); the child is this test binary run again with `PARTITA_APEX_CONTROL_CHILD` naming what it does.
use a653rs::bindings::*;
use a653rs::prelude::Name;
use partita_apex::{PartitaHypervisor as H, EXIT_STOPPED, EXIT_WARM_START};
use partita_ports::control::{ControlPage, Mode, Outcome, Request, StartCondition as PageStart};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const CHILD: &str = "PARTITA_APEX_CONTROL_CHILD";
const PLANS: [&str; 2] = ["normal", "degraded"];

/// The control page's descriptor is made inheritable only while one child is spawned.
static SPAWNING: Mutex<()> = Mutex::new(());

fn name(n: &str) -> ApexName {
    Name::from_str(n).unwrap().into()
}

extern "C" fn worker() {
    println!("child: worker ran");
}

/// What a child process does; nothing in the ordinary test run.
#[test]
fn child() {
    let Ok(scenario) = std::env::var(CHILD) else { return };
    let status = H::get_partition_status();
    println!("child: status {:?} {:?}", status.operating_mode, status.start_condition);
    match scenario.as_str() {
        "status" => {}
        "idle" => println!("child: idle {:?}", H::set_partition_mode(OperatingMode::Idle)),
        "cold-start" => println!("child: cold start {:?}", H::set_partition_mode(OperatingMode::ColdStart)),
        "warm-start" => println!("child: warm start {:?}", H::set_partition_mode(OperatingMode::WarmStart)),
        "raise" => println!("child: raise {:?}", H::raise_application_error(ErrorCode::ApplicationError, b"the tank is empty")),
        "normal" => {
            let attributes = ApexProcessAttribute { period: INFINITE_TIME_VALUE, time_capacity: INFINITE_TIME_VALUE, entry_point: worker, stack_size: 64 << 10, base_priority: 1, deadline: Deadline::Soft, name: name("worker") };
            H::start(H::create_process(&attributes).unwrap()).unwrap();
            let _ = H::set_partition_mode(OperatingMode::Normal);
        }
        "schedule" => {
            println!("child: id degraded {:?}", H::get_module_schedule_id(name("degraded")));
            println!("child: id nope {:?}", H::get_module_schedule_id(name("nope")));
            println!("child: set 5 {:?}", H::set_module_schedule(5));
            println!("child: set -1 {:?}", H::set_module_schedule(-1));
            println!("child: set 1 {:?}", H::set_module_schedule(1));
            let s = H::get_module_schedule_status().unwrap();
            println!("child: schedule status {} {} {}", s.current_schedule, s.next_schedule, s.time_of_last_schedule_switch);
            println!("child: set 0 {:?}", H::set_module_schedule(0));
        }
        "no-page" => {
            println!("child: schedule status {:?}", H::get_module_schedule_status());
            println!("child: set 0 {:?}", H::set_module_schedule(0));
            println!("child: id normal {:?}", H::get_module_schedule_id(name("normal")));
        }
        other => panic!("no child scenario {other:?}"),
    }
    println!("child: still running");
}

/// How a child ended, its lines (after `child: `), its standard error, and the requests the test took.
struct Ended {
    status: ExitStatus,
    lines: Vec<String>,
    stderr: String,
    seen: Vec<Result<Request, Outcome>>,
}

/// Runs [`child`] doing `scenario`, with `page` (or none) handed over as the supervisor does, and answers its
/// requests with `decide` until it ends: the answer, and whether to kill the child then (the supervisor's
/// restart or idle).
fn run(scenario: &str, page: Option<ControlPage>, mut decide: impl FnMut(&ControlPage, &Result<Request, Outcome>) -> (Outcome, bool)) -> Ended {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args(["--exact", "child", "--nocapture", "--test-threads=1"]).env(CHILD, scenario).env(partita_env::PARTITION, "ctl").env_remove(partita_env::CONTROL);
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child: Child = {
        let _one_at_a_time = SPAWNING.lock().unwrap_or_else(|p| p.into_inner());
        let fd = page.as_ref().map(|p| p.fd_for_partition().unwrap());
        if let Some(fd) = &fd {
            partita_os::fd::set_inheritable(fd.as_raw_fd(), true).unwrap();
            command.env(partita_env::CONTROL, fd.as_raw_fd().to_string());
        }
        command.spawn().unwrap()
    };
    let pipe = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = r.read_to_string(&mut text);
            text
        })
    };
    let stdout = pipe(Box::new(child.stdout.take().unwrap()));
    let stderr = pipe(Box::new(child.stderr.take().unwrap()));
    let mut page = page;
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the child runs on: {}", stderr.join().unwrap());
        }
        if let Some(page) = page.as_mut() {
            if let Some(r) = page.take_request() {
                let (outcome, kill) = decide(page, &r);
                seen.push(r);
                page.answer(outcome);
                if kill {
                    child.kill().unwrap();
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    // The harness's own "test child ... " has no line end: the child's first line follows it on the same line.
    let lines = stdout.join().unwrap().lines().filter_map(|l| l.split_once("child: ").map(|(_, line)| line.to_string())).collect();
    Ended { status, lines, stderr: stderr.join().unwrap(), seen }
}

fn page() -> ControlPage {
    ControlPage::create("ctl", &PLANS).unwrap()
}

fn done(_: &ControlPage, _: &Result<Request, Outcome>) -> (Outcome, bool) {
    (Outcome::Done, false)
}

#[test]
fn the_partition_s_status_is_the_mode_and_start_condition_the_supervisor_wrote() {
    let p = page();
    p.set_start_condition(PageStart::HmPartitionRestart);
    let e = run("status", Some(p), done);
    assert!(e.status.success(), "{}", e.stderr);
    assert_eq!(e.lines.first().map(String::as_str), Some("status ColdStart HmPartitionRestart"), "{:?}", e.lines);
    assert!(e.seen.is_empty());
}

#[test]
fn idle_is_asked_of_the_supervisor_which_then_acts_on_the_process() {
    let mut idle_flag = false;
    let e = run("idle", Some(page()), |p, _| {
        idle_flag = p.idle_requested();
        (Outcome::Done, true)
    });
    assert_eq!(e.status.signal(), Some(libc::SIGKILL), "the process did not end on its own: {:?} {}", e.status, e.stderr);
    assert_eq!(e.seen, vec![Ok(Request::SetMode(Mode::Idle))]);
    assert!(idle_flag, "idle_request was set before the request");
    assert!(!e.lines.iter().any(|l| l.starts_with("idle")), "SET_PARTITION_MODE(IDLE) did not return: {:?}", e.lines);
}

#[test]
fn a_mode_change_the_supervisor_refuses_returns_invalid_mode() {
    let e = run("cold-start", Some(page()), |_, _| (Outcome::Refused, false));
    assert!(e.status.success(), "{}", e.stderr);
    assert_eq!(e.seen, vec![Ok(Request::SetMode(Mode::ColdStart))]);
    assert!(e.lines.iter().any(|l| l == "cold start Err(InvalidMode)"), "{:?}", e.lines);
    assert!(e.lines.iter().any(|l| l == "still running"), "{:?}", e.lines);
}

#[test]
fn a_restarted_partition_starts_warm_and_exits_itself_when_the_supervisor_does_not_act_within_5_s() {
    let p = page();
    p.set_mode(Mode::WarmStart);
    p.set_start_condition(PageStart::PartitionRestart);
    let t = Instant::now();
    let e = run("warm-start", Some(p), done);
    assert_eq!(e.status.code(), Some(EXIT_WARM_START), "{}", e.stderr);
    assert!(t.elapsed() >= Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(e.lines.first().map(String::as_str), Some("status WarmStart PartitionRestart"), "{:?}", e.lines);
    assert_eq!(e.seen, vec![Ok(Request::SetMode(Mode::WarmStart))]);
    assert!(e.stderr.contains("the supervisor did not act within 5s"), "{}", e.stderr);
}

#[test]
fn an_application_error_goes_to_the_supervisor_and_the_partition_goes_on() {
    let e = run("raise", Some(page()), done);
    assert!(e.status.success(), "{}", e.stderr);
    assert_eq!(e.seen, vec![Ok(Request::RaiseError { kind: 1, message: "the tank is empty".into() })]);
    assert!(e.lines.iter().any(|l| l == "raise Ok(())"), "{:?}", e.lines);
    assert!(e.lines.iter().any(|l| l == "still running"), "{:?}", e.lines);
    assert!(e.stderr.contains("ctl: application error: the tank is empty"), "{}", e.stderr);
}

#[test]
fn normal_mode_is_told_to_the_supervisor_and_the_processes_run() {
    let e = run("normal", Some(page()), |p, _| {
        p.set_mode(Mode::Normal);
        (Outcome::Done, false)
    });
    assert_eq!(e.status.code(), Some(EXIT_STOPPED), "{}", e.stderr);
    assert_eq!(e.seen, vec![Ok(Request::SetMode(Mode::Normal))]);
    assert!(e.lines.iter().any(|l| l == "worker ran"), "{:?}", e.lines);
}

#[test]
fn module_schedules_are_the_page_s_plans_and_a_switch_goes_through_the_supervisor() {
    let e = run("schedule", Some(page()), |p, r| match r {
        Ok(Request::SwitchPlan(1)) => {
            p.set_plan(0, 1, 4242);
            (Outcome::Done, false)
        }
        _ => (Outcome::Refused, false),
    });
    assert!(e.status.success(), "{}", e.stderr);
    assert_eq!(e.seen, vec![Ok(Request::SwitchPlan(1)), Ok(Request::SwitchPlan(0))], "ids the page does not name are refused before a request");
    for expected in ["id degraded Ok(1)", "id nope Err(InvalidConfig)", "set 5 Err(InvalidParam)", "set -1 Err(InvalidParam)", "set 1 Ok(())", "schedule status 0 1 4242", "set 0 Err(InvalidConfig)"] {
        assert!(e.lines.iter().any(|l| l == expected), "{expected:?} in {:?}", e.lines);
    }
}

#[test]
fn without_a_control_page_the_schedule_services_are_not_available() {
    let e = run("no-page", None, done);
    assert!(e.status.success(), "{}", e.stderr);
    assert_eq!(e.lines.first().map(String::as_str), Some("status ColdStart NormalStart"), "{:?}", e.lines);
    for expected in ["schedule status Err(NotAvailable)", "set 0 Err(NotAvailable)", "id normal Err(NotAvailable)"] {
        assert!(e.lines.iter().any(|l| l == expected), "{expected:?} in {:?}", e.lines);
    }
}
