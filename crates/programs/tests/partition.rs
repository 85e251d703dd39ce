//! `partita-partition` (`partita app partition`) on a control page the test makes and hands over as the
//! supervisor does (an inherited descriptor named by `PARTITA_CONTROL`); the test answers its requests.
use partita_ports::control::{ControlPage, Mode, Outcome, Request, StartCondition};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const PROGRAM: &str = env!("CARGO_BIN_EXE_partita-partition");

/// The page's descriptor is made inheritable only while one child is spawned.
static SPAWNING: Mutex<()> = Mutex::new(());

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    seen: Vec<Result<Request, Outcome>>,
}

/// Runs the program with `args` on `page` (none: no `PARTITA_CONTROL`), answering each request with `answer`
/// (none: not at all).
fn run(args: &[&str], page: Option<&mut ControlPage>, answer: Option<Outcome>) -> Ran {
    let mut command = Command::new(PROGRAM);
    command.args(args).env_remove(partita_env::CONTROL).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = {
        let _one = SPAWNING.lock().unwrap_or_else(|p| p.into_inner());
        let fd = page.as_ref().map(|p| p.fd_for_partition().unwrap());
        if let Some(fd) = &fd {
            partita_os::fd::set_inheritable(fd.as_raw_fd(), true).unwrap();
            command.env(partita_env::CONTROL, fd.as_raw_fd().to_string());
        }
        command.spawn().unwrap()
    };
    let output = std::thread::spawn(move || child.wait_with_output().unwrap());
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    if let Some(page) = page {
        while !output.is_finished() && Instant::now() < deadline {
            match page.take_request() {
                Some(r) => {
                    seen.push(r);
                    if let Some(o) = answer {
                        page.answer(o);
                    }
                }
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }
    let out = output.join().unwrap();
    Ran { code: out.status.code(), stdout: String::from_utf8_lossy(&out.stdout).into_owned(), stderr: String::from_utf8_lossy(&out.stderr).into_owned(), seen }
}

fn page() -> ControlPage {
    ControlPage::create("shell", &["normal", "degraded"]).unwrap()
}

#[test]
fn status_prints_the_page_s_state() {
    let mut p = page();
    p.set_mode(Mode::Normal);
    p.set_start_condition(StartCondition::PartitionRestart);
    p.set_plan(0, 1, 99);
    let r = run(&["status"], Some(&mut p), None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "mode normal\nstart_condition partition_restart\nplan 0 normal\nnext_plan 1 degraded\nlast_switch_ns 99\nplans normal degraded\n");
    assert!(r.seen.is_empty());
}

#[test]
fn a_request_prints_the_outcome_and_exits_with_its_code() {
    let mut p = page();
    let r = run(&["mode", "idle"], Some(&mut p), Some(Outcome::Done));
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), "done\n"), "{}", r.stderr);
    assert_eq!(r.seen, vec![Ok(Request::SetMode(Mode::Idle))]);
    assert!(p.idle_requested());

    let r = run(&["error", "--kind", "numeric_error", "division by zero"], Some(&mut p), Some(Outcome::Refused));
    assert_eq!((r.code, r.stdout.as_str()), (Some(3), "refused\n"), "{}", r.stderr);
    assert_eq!(r.seen, vec![Ok(Request::RaiseError { kind: 2, message: "division by zero".into() })]);

    let r = run(&["error", "the tank is empty"], Some(&mut p), Some(Outcome::Invalid));
    assert_eq!((r.code, r.stdout.as_str()), (Some(4), "invalid\n"), "{}", r.stderr);
    assert_eq!(r.seen, vec![Ok(Request::RaiseError { kind: 1, message: "the tank is empty".into() })]);

    let r = run(&["plan", "degraded"], Some(&mut p), Some(Outcome::Done));
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), "done\n"), "{}", r.stderr);
    assert_eq!(r.seen, vec![Ok(Request::SwitchPlan(1))]);
}

#[test]
fn a_plan_the_page_does_not_name_is_no_such_plan_without_a_request() {
    let mut p = page();
    let r = run(&["plan", "emergency"], Some(&mut p), Some(Outcome::Done));
    assert_eq!(r.code, Some(4), "{}", r.stderr);
    assert!(r.stdout.starts_with("no such plan: \"emergency\" (the module's plans: normal, degraded)"), "{}", r.stdout);
    assert!(r.seen.is_empty());
}

#[test]
fn no_answer_in_time_no_page_or_a_bad_argument_is_an_error() {
    let mut p = page();
    let r = run(&["mode", "warm_start", "--timeout", "100ms"], Some(&mut p), None);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("did not answer"), "{}", r.stderr);
    assert_eq!(r.seen, vec![Ok(Request::SetMode(Mode::WarmStart))]);

    let r = run(&["status"], None, None);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("PARTITA_CONTROL is unset"), "{}", r.stderr);

    let r = run(&["error", "--kind", "tank_empty", "x"], Some(&mut p), None);
    assert_eq!(r.code, Some(2), "clap's usage error");
    assert!(r.stderr.contains("application_error"), "{}", r.stderr);
    let r = run(&["error", &"x".repeat(193)], Some(&mut p), None);
    assert_eq!(r.code, Some(1));
    assert!(r.seen.is_empty());
}
