//! The control page between its two sides in one process: the supervisor's (ControlPage) and the partition's
//! (Control), honest and hostile.
use partita_os::shm::Mapping;
use partita_ports::control::*;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const PLANS: [&str; 3] = ["normal", "degraded", "a-plan-name-of-exactly-32-bytes!"];
const LONG: Duration = Duration::from_secs(10);

/// A page, the partition's side of it, and a writable mapping of it for writing what a hostile partition
/// writes.
fn page() -> (ControlPage, Control, Mapping) {
    let page = ControlPage::create("p", &PLANS).unwrap();
    let control = Control::from_fd(page.fd_for_partition().unwrap()).unwrap();
    let hostile = Mapping::map(page.fd_for_partition().unwrap(), true).unwrap();
    (page, control, hostile)
}

type Seen = Vec<Result<Request, Outcome>>;

/// The supervisor's side in a thread: takes `n` requests (polling, as the executor does at boundaries) and
/// answers each with what `decide` says; gives the page back with what it took.
fn serve(page: ControlPage, n: usize, decide: fn(&Result<Request, Outcome>) -> Outcome) -> JoinHandle<(ControlPage, Seen)> {
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let end = Instant::now() + LONG;
        while seen.len() < n && Instant::now() < end {
            match page.take_request() {
                Some(r) => {
                    page.answer(decide(&r));
                    seen.push(r);
                }
                None => std::thread::sleep(Duration::from_micros(200)),
            }
        }
        (page, seen)
    })
}

fn by_kind(r: &Result<Request, Outcome>) -> Outcome {
    match r {
        Ok(Request::SwitchPlan(1)) => Outcome::Refused,
        Ok(_) => Outcome::Done,
        Err(o) => *o,
    }
}

fn every_request() -> Vec<Request> {
    let mut all: Vec<Request> = Mode::ALL.into_iter().map(Request::SetMode).collect();
    all.push(Request::RaiseError { kind: 1, message: "the tank is empty".into() });
    all.push(Request::RaiseError { kind: 0, message: String::new() });
    all.push(Request::RaiseError { kind: 13, message: "é".repeat(MAX_MESSAGE / 2) });
    all.extend((0..PLANS.len() as u64).map(Request::SwitchPlan));
    all
}

#[test]
fn every_request_goes_round_trip_between_the_two_sides() {
    let (page, control, _) = page();
    let all = every_request();
    let server = serve(page, all.len(), by_kind);
    for r in &all {
        let expected = by_kind(&Ok(r.clone()));
        assert_eq!(control.request(r, LONG).unwrap(), expected, "{r}");
    }
    let (_, seen) = server.join().unwrap();
    assert_eq!(seen, all.into_iter().map(Ok).collect::<Seen>());
}

#[test]
fn the_partition_reads_what_the_supervisor_writes() {
    let (page, control, _) = page();
    assert_eq!(control.mode(), Some(Mode::ColdStart));
    assert_eq!(control.start_condition(), Some(StartCondition::NormalStart));
    assert_eq!((control.plan(), control.next_plan(), control.last_switch_ns()), (0, 0, 0));
    page.set_mode(Mode::Normal);
    page.set_start_condition(StartCondition::HmPartitionRestart);
    page.set_plan(1, 2, 12345);
    assert_eq!(control.mode(), Some(Mode::Normal));
    assert_eq!(control.start_condition(), Some(StartCondition::HmPartitionRestart));
    assert_eq!((control.plan(), control.next_plan(), control.last_switch_ns()), (1, 2, 12345));
    for (i, n) in PLANS.iter().enumerate() {
        assert_eq!(control.plan_index(n), Some(i as u64));
        assert_eq!(control.plan_name(i as u64).as_deref(), Some(*n));
    }
    assert_eq!(control.plan_index("nope"), None);
    assert_eq!(control.plan_name(3), None);
    assert_eq!(control.plan_name(u64::MAX), None);
    assert_eq!(control.plan_names().len(), PLANS.len());
    assert_eq!(page.plan_count(), 3);
}

#[test]
fn asking_for_idle_sets_the_idle_request_the_executor_reads() {
    let (page, control, _) = page();
    assert!(!page.idle_requested());
    let server = serve(page, 1, by_kind);
    assert_eq!(control.request(&Request::SetMode(Mode::Idle), LONG).unwrap(), Outcome::Done);
    let (page, _) = server.join().unwrap();
    assert!(page.idle_requested());
    page.clear_idle_request();
    assert!(!page.idle_requested());
    // Refused: the partition takes its idle request back.
    let server = serve(page, 1, |_| Outcome::Refused);
    assert_eq!(control.request(&Request::SetMode(Mode::Idle), LONG).unwrap(), Outcome::Refused);
    let (page, _) = server.join().unwrap();
    assert!(!page.idle_requested());
}

/// Writes a request's fields as a hostile partition may, and bumps req_seq.
fn post_raw(m: &Mapping, kind: u64, arg: u64, len: u64, msg: &[u8]) {
    m.store64(REQ_KIND_AT, kind, Ordering::Relaxed);
    m.store64(REQ_ARG_AT, arg, Ordering::Relaxed);
    m.store64(REQ_LEN_AT, len, Ordering::Relaxed);
    m.write(REQ_MSG_AT, &msg[..msg.len().min(MAX_MESSAGE)]);
    m.store64(REQ_SEQ_AT, m.load64(REQ_SEQ_AT, Ordering::Relaxed).wrapping_add(1), Ordering::Release);
}

#[test]
fn garbage_in_every_request_field_is_invalid_and_the_next_honest_request_works() {
    let (mut page, control, hostile) = page();
    let bad: &[(u64, u64, u64, &[u8], Outcome)] = &[
        (0, 0, 0, b"", Outcome::Invalid),
        (4, 0, 0, b"", Outcome::Invalid),
        (u64::MAX, 0, 0, b"", Outcome::Invalid),
        (KIND_SET_MODE, 4, 0, b"", Outcome::Invalid),
        (KIND_SET_MODE, u64::MAX, 0, b"", Outcome::Invalid),
        (KIND_SET_MODE, 3, 1 << 63, b"", Outcome::Invalid),
        (KIND_RAISE_ERROR, ERROR_KINDS, 0, b"", Outcome::Invalid),
        (KIND_RAISE_ERROR, u64::MAX, 0, b"", Outcome::Invalid),
        (KIND_RAISE_ERROR, 1, MAX_MESSAGE as u64 + 1, b"x", Outcome::Invalid),
        (KIND_RAISE_ERROR, 1, 1 << 63, b"x", Outcome::Invalid),
        (KIND_RAISE_ERROR, 1, u64::MAX, b"x", Outcome::Invalid),
        (KIND_RAISE_ERROR, 1, 2, b"\xff\xfe", Outcome::Invalid),
        (KIND_RAISE_ERROR, 1, 3, b"ab\xc3", Outcome::Invalid),
        (KIND_SWITCH_PLAN, 3, 0, b"", Outcome::NoSuchPlan),
        (KIND_SWITCH_PLAN, u64::MAX, 0, b"", Outcome::NoSuchPlan),
        (KIND_SWITCH_PLAN, 0, 1 << 63, b"", Outcome::Invalid),
    ];
    for &(kind, arg, len, msg, expected) in bad {
        post_raw(&hostile, kind, arg, len, msg);
        assert_eq!(page.take_request(), Some(Err(expected)), "kind {kind} arg {arg} len {len} msg {msg:?}");
        page.answer(expected);
        assert_eq!(page.take_request(), None, "one request is taken once");
        let server = serve(page, 1, by_kind);
        assert_eq!(control.request(&Request::SwitchPlan(2), LONG).unwrap(), Outcome::Done);
        let (p, seen) = server.join().unwrap();
        assert_eq!(seen, vec![Ok(Request::SwitchPlan(2))]);
        page = p;
    }
    // The longest message that is valid: 192 bytes of UTF-8 at the edge.
    post_raw(&hostile, KIND_RAISE_ERROR, 2, MAX_MESSAGE as u64, &[b'a'; MAX_MESSAGE]);
    assert_eq!(page.take_request(), Some(Ok(Request::RaiseError { kind: 2, message: "a".repeat(MAX_MESSAGE) })));
}

#[test]
fn any_byte_pattern_in_the_page_yields_a_request_or_an_outcome_and_never_a_panic() {
    let (page, _control, hostile) = page();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..20_000u64 {
        // Every word of the page, the supervisor's fields included, then the request fields from small
        // ranges half of the time, so that the valid paths are met too.
        for at in (0..PAGE_BYTES).step_by(8) {
            hostile.store64(at, next(), Ordering::Relaxed);
        }
        if i % 2 == 0 {
            hostile.store64(REQ_KIND_AT, next() % 5, Ordering::Relaxed);
            hostile.store64(REQ_ARG_AT, next() % 20, Ordering::Relaxed);
            hostile.store64(REQ_LEN_AT, next() % 200, Ordering::Relaxed);
        }
        match page.take_request() {
            Some(Ok(Request::RaiseError { message, .. })) => assert!(message.len() <= MAX_MESSAGE),
            Some(Ok(Request::SwitchPlan(p))) => assert!(p < PLANS.len() as u64),
            Some(_) | None => {}
        }
        page.answer(Outcome::Invalid);
        let _ = page.idle_requested();
    }
}

#[test]
fn a_second_request_before_the_answer_replaces_the_first_and_a_late_answer_does_not_answer_it() {
    let (page, control, _) = page();
    // Nobody answers: the first request times out (on the monotonic clock, from an absolute deadline).
    let t = Instant::now();
    match control.request(&Request::SwitchPlan(1), Duration::from_millis(50)) {
        Err(ControlError::TimedOut { request: "switch_plan", .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(t.elapsed() >= Duration::from_millis(50));
    // The supervisor takes the first one only now; meanwhile the partition posts a second.
    assert_eq!(page.take_request(), Some(Ok(Request::SwitchPlan(1))));
    let control = std::sync::Arc::new(control);
    let c = control.clone();
    let second = std::thread::spawn(move || c.request(&Request::SwitchPlan(2), LONG));
    std::thread::sleep(Duration::from_millis(50));
    // The answer to the first does not end the wait for the second.
    page.answer(Outcome::Refused);
    std::thread::sleep(Duration::from_millis(50));
    assert!(!second.is_finished());
    assert_eq!(page.take_request(), Some(Ok(Request::SwitchPlan(2))));
    page.answer(Outcome::Done);
    assert_eq!(second.join().unwrap().unwrap(), Outcome::Done);
    assert_eq!(page.take_request(), None);
}

#[test]
fn threads_of_one_partition_take_turns_on_the_page() {
    let (page, control, _) = page();
    let control = std::sync::Arc::new(control);
    let server = serve(page, 40, by_kind);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let c = control.clone();
            std::thread::spawn(move || {
                for i in 0..10u8 {
                    let r = Request::RaiseError { kind: 1, message: format!("thread {t} error {i}") };
                    assert_eq!(c.request(&r, LONG).unwrap(), Outcome::Done);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let (_, seen) = server.join().unwrap();
    assert_eq!(seen.len(), 40);
    assert!(seen.iter().all(|r| matches!(r, Ok(Request::RaiseError { kind: 1, .. }))));
}

#[test]
fn a_message_longer_than_the_page_holds_is_refused_before_it_is_posted() {
    let (page, control, _) = page();
    match control.request(&Request::RaiseError { kind: 1, message: "x".repeat(MAX_MESSAGE + 1) }, LONG) {
        Err(ControlError::MessageTooLong { len, .. }) => assert_eq!(len, MAX_MESSAGE + 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(page.take_request(), None);
}

#[test]
fn the_partition_cannot_grow_or_shrink_its_page() {
    let (page, _control, _) = page();
    let f = std::fs::File::from(page.fd_for_partition().unwrap());
    assert!(f.set_len(0).is_err());
    assert!(f.set_len(PAGE_BYTES as u64 * 2).is_err());
    assert_eq!(f.metadata().unwrap().len(), PAGE_BYTES as u64);
}

#[test]
fn from_fd_refuses_a_page_without_the_magic_or_of_another_version_or_unsealed() {
    let blank = partita_os::shm::create("blank", PAGE_BYTES).unwrap();
    match Control::from_fd(blank) {
        Err(ControlError::NotAPage { problem, .. }) => assert!(problem.contains("magic"), "{problem}"),
        other => panic!("{other:?}"),
    }
    let (page, _, hostile) = page();
    hostile.store64(VERSION_AT, 2, Ordering::Relaxed);
    match Control::from_fd(page.fd_for_partition().unwrap()) {
        Err(ControlError::NotAPage { problem, .. }) => assert!(problem.contains("version 2"), "{problem}"),
        other => panic!("{other:?}"),
    }
    let unsealed = partita_os::fd::memfd("unsealed").unwrap();
    unsealed.set_len(PAGE_BYTES as u64).unwrap();
    match Control::from_fd(unsealed.into()) {
        Err(ControlError::NotAPage { problem, .. }) => assert!(problem.contains("sealed"), "{problem}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_page_names_at_most_16_plans_of_at_most_32_bytes() {
    let many: Vec<String> = (0..17).map(|i| format!("p{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert!(ControlPage::create("p", &many).is_err());
    assert!(ControlPage::create("p", &many[..16]).is_ok());
    assert!(ControlPage::create("p", &["x".repeat(33).as_str()]).is_err());
    assert!(ControlPage::create("p", &[""]).is_err());
    assert!(ControlPage::create("p", &["a\0b"]).is_err());
}

#[test]
fn modes_parse_from_the_words_the_shell_takes() {
    assert_eq!("cold_start".parse::<Mode>(), Ok(Mode::ColdStart));
    assert_eq!("WARM-START".parse::<Mode>(), Ok(Mode::WarmStart));
    assert!("sleep".parse::<Mode>().is_err());
    for m in Mode::ALL {
        assert_eq!(Mode::from_code(m.code()), Some(m));
    }
    assert_eq!(Mode::from_code(4), None);
    assert_eq!(Outcome::from_code(4), None);
    assert_eq!(StartCondition::from_code(u64::MAX), None);
}

#[test]
fn error_kinds_are_named_as_the_system_file_names_them() {
    assert_eq!(error_kind_code("application_error"), Some(1));
    assert_eq!(error_kind_code("exited"), Some(13));
    assert_eq!(error_kind_code("4"), Some(4));
    assert_eq!(error_kind_code("14"), None);
    assert_eq!(error_kind_code("tank_empty"), None);
    assert_eq!(ERROR_KIND_NAMES.len() as u64, ERROR_KINDS);
}
