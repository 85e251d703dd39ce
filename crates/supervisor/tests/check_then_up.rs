//! Everything `partita up` can refuse, `partita check` refuses first: variants of a valid system aimed at each
//! of the supervisor's own refusals (cgroup values the kernel rejects, names, arguments `execve` cannot take,
//! programs that do not exist, plans one executor cannot run, networks) are validated against this machine;
//! every variant validation accepts is brought up, run briefly and torn down (root).
mod common;
use common::*;
use partita_supervisor::Supervisor;
use std::time::Duration;

const BASE: &str = r#"
[system]
name = "NAME"

[[module]]
name = "m"
cpus = [1]

[[module.partition]]
name = "a"
command = ["sleep", "30"]
memory = "32MiB"
pids = 16

[[module.partition]]
name = "b"
command = ["sleep", "30"]
io = true

[[module.plan]]
cpu = 1
major_frame = "2ms"

[[module.plan.window]]
partition = "a"
start = "0us"
duration = "1ms"

[[module.plan.window]]
partition = "b"
start = "1ms"
duration = "1ms"

[[node]]
name = "n"
command = ["sleep", "30"]
"#;

/// (what it aims at, text to replace, replacement): each applied to BASE on its own; `+` joins two
/// replacements of one variant.
const VARIANTS: &[(&str, &str, &str)] = &[
    ("pids above the kernel's limit", "pids = 16", "pids = 9223372036854775807"),
    ("pids at the kernel's limit", "pids = 16", "pids = 4194304"),
    ("pids of one", "pids = 16", "pids = 1"),
    ("a huge memory limit", "memory = \"32MiB\"", "memory = \"8589934591GiB\""),
    ("a memory limit that overflows", "memory = \"32MiB\"", "memory = \"17179869184GiB\""),
    ("the smallest memory limit", "memory = \"32MiB\"", "memory = \"8MiB\""),
    ("a NUL byte in an argument", "command = [\"sleep\", \"30\"]\nmemory", "command = [\"sleep\", \"3\\u00000\"]\nmemory"),
    ("a NUL byte in an environment value", "pids = 16", "pids = 16\nenv = { X = \"a\\u0000b\" }"),
    ("an environment name with =", "pids = 16", "pids = 16\nenv = { \"X=Y\" = \"1\" }"),
    ("an empty environment name", "pids = 16", "pids = 16\nenv = { \"\" = \"1\" }"),
    ("the DDS configuration overridden", "pids = 16", "pids = 16\nenv = { CYCLONEDDS_URI = \"file:///etc/passwd\" }"),
    ("a supervisor variable overridden", "pids = 16", "pids = 16\nenv = { PARTITA_DOMAIN = \"7\" }"),
    ("odd but valid environment", "pids = 16", "pids = 16\nenv = { lower_case = \"ünïcödé \\\" ' $HOME\" }"),
    ("a program that does not exist", "command = [\"sleep\", \"30\"]\nmemory", "command = [\"partita-no-such-program\"]\nmemory"),
    ("a path that is not a program", "command = [\"sleep\", \"30\"]\nmemory", "command = [\"/etc/passwd\"]\nmemory"),
    ("a directory as the program", "command = [\"sleep\", \"30\"]\nmemory", "command = [\"/usr/bin\"]\nmemory"),
    ("a program by path", "command = [\"sleep\", \"30\"]\nmemory", "command = [\"/bin/sleep\", \"30\"]\nmemory"),
    ("a partition in two plans", "cpus = [1]", "cpus = [0, 1]\n[[module.plan]]\ncpu = 0\nmajor_frame = \"2ms\"\nwindow = [{ partition = \"a\", start = \"0us\", duration = \"1ms\" }]"),
    (
        "one partition per CPU",
        "cpus = [1]+[[module.plan.window]]\npartition = \"b\"\nstart = \"1ms\"\nduration = \"1ms\"",
        "cpus = [0, 1]+[[module.plan]]\ncpu = 0\nmajor_frame = \"2ms\"\nwindow = [{ partition = \"b\", start = \"0us\", duration = \"2ms\" }]",
    ),
    ("a frame beyond the bound", "major_frame = \"2ms\"", "major_frame = \"18446744073709551615ns\""),
    ("a one-nanosecond window", "duration = \"1ms\"\n\n[[module.plan.window]]\npartition = \"b\"", "duration = \"1ns\"\n\n[[module.plan.window]]\npartition = \"b\""),
    ("a one-second frame", "major_frame = \"2ms\"", "major_frame = \"1s\""),
    ("a node on the module's CPU", "name = \"n\"", "name = \"n\"\ncpus = [1]"),
    ("a node on a CPU this machine lacks", "name = \"n\"", "name = \"n\"\ncpus = [4096]"),
    ("the largest domain id", "cpus = [1]", "cpus = [1]\ndomain = 232"),
    ("a domain id out of range", "cpus = [1]", "cpus = [1]\ndomain = 233"),
    ("a subnet too small for its members", "cpus = [1]", "cpus = [1]\nsubnet = \"198.19.255.252/30\"\n[[module.partition]]\nname = \"c\"\ncommand = [\"sleep\", \"30\"]\n"),
    ("a tiny subnet that fits", "cpus = [1]", "cpus = [1]\nsubnet = \"198.19.255.252/30\""),
    ("a subnet outside partita's range", "cpus = [1]", "cpus = [1]\nsubnet = \"10.0.0.0/24\""),
    ("an address at the end of its subnet", "io = true", "io = true\naddress = \"198.18.1.254\""),
    ("a node without a limit but a health action", "name = \"n\"", "name = \"n\"\nhealth = { action = \"stop\" }"),
    ("a long name", "name = \"a\"+partition = \"a\"", "name = \"abcdefghijklmnopqrstuvwx\"+partition = \"abcdefghijklmnopqrstuvwx\""),
    ("a name with a slash", "name = \"a\"", "name = \"../a\""),
];

#[test]

#[cfg_attr(partita_not_root, ignore = "needs root")]
fn every_system_check_accepts_comes_up() {
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    for (what, from, to) in VARIANTS {
        let name = system_name("cu");
        let mut text = BASE.replacen("NAME", &name, 1);
        for (from, to) in from.split('+').zip(to.split('+')) {
            assert!(text.contains(from), "{what}: {from:?} is not in the base system");
            text = text.replacen(from, to, 1);
        }
        match partita_system::parse(&text, "variant.toml", &partita_system::Host::this_machine()) {
            Err(e) => refused.push(format!("{what}: {}", e.0[0].problem)),
            Ok(system) => {
                let root = tempdir("cu");
                let sup = Supervisor::up(&system, &options(&root)).unwrap_or_else(|e| panic!("{what}: check accepted it, up refused it: {e}\n{text}"));
                let events = sup.events().clone();
                let logs = sup.run(Some(Duration::from_millis(300)), None).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(logs.iter().all(|l| l.switch_errors == 0), "{what}: switch errors");
                assert!(logs.iter().all(|l| l.windows_started > 0), "{what}: a plan did not run");
                assert!(
                    !events.events().iter().any(|e| e.event == "error" || e.event == "restart_failed"),
                    "{what}: {:?}",
                    events.events()
                );
                assert_nothing_left(&name, Some(&link_prefix(&name)));
                accepted.push(*what);
            }
        }
    }
    eprintln!("accepted and brought up: {accepted:?}\nrefused by check: {refused:#?}");
    // The variants aimed at the supervisor's refusals are refused; the ones inside the rules come up.
    for must_refuse in [
        "pids above the kernel's limit",
        "a NUL byte in an argument",
        "a program that does not exist",
        "a path that is not a program",
        "a partition in two plans",
        "the DDS configuration overridden",
        "a subnet too small for its members",
    ] {
        assert!(refused.iter().any(|r| r.starts_with(must_refuse)), "{must_refuse} was not refused: {refused:?}");
    }
    for must_run in ["pids at the kernel's limit", "a huge memory limit", "a one-nanosecond window", "one partition per CPU", "a tiny subnet that fits", "a long name"] {
        assert!(accepted.contains(&must_run), "{must_run} did not come up: {refused:?}");
    }
}

/// A partition's program in a place a partition does not see (here the partita binary copied under /tmp, as in
/// a clone under /tmp) is bound into its view and runs; before, every start ended with exit 127 and restarts.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_program_under_tmp_runs_in_a_partition() {
    let name = system_name("hid");
    let root = tempdir("state");
    let bin = tempdir("bin");
    let partita = bin.0.join("partita");
    std::fs::copy(partita_binary(), &partita).unwrap();
    assert!(partita.starts_with("/tmp"), "{}", partita.display());
    let sys = common::system(&format!("[system]\nname = \"{name}\"\n[[module]]\nname = \"m\"\n[[module.partition]]\nname = \"a\"\ncommand = [\"partita\", \"--help\"]\nhealth = {{ action = \"stop\" }}\n"));
    let mut options = options(&root);
    options.partita = Some(partita.clone());
    let sup = Supervisor::up(&sys, &options).unwrap();
    let log_path = sup.state_dir().join("a.log");
    // The health monitor sees the exit while the system runs.
    let written = log_path.clone();
    let events = run_until(sup, Duration::from_secs(10), move |e| e.events().iter().any(|e| e.event == "exit") && std::fs::read_to_string(&written).is_ok_and(|l| l.contains("Usage")));
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let exit = events.events().into_iter().find(|e| e.event == "exit").and_then(|e| e.exit);
    assert_eq!(exit, Some(partita_supervisor::health::ExitKind::Exited { code: 0 }), "{log}");
    assert!(log.contains("Usage: partita"), "{log}");
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

/// A partition's log holds this run's output only: what an earlier run of the same system wrote (kept until
/// `partita down`) is not read as this run's.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_new_run_starts_with_empty_partition_logs() {
    let name = system_name("logs");
    let root = tempdir("state");
    let state = root.0.join(&name);
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("a.log"), "left by an earlier run\n").unwrap();
    let sys = common::system(&format!("[system]\nname = \"{name}\"\n[[module]]\nname = \"m\"\n[[module.partition]]\nname = \"a\"\ncommand = [\"partita\", \"--help\"]\nhealth = {{ action = \"stop\" }}\n"));
    let mut options = options(&root);
    options.partita = Some(partita_binary().into());
    let sup = Supervisor::up(&sys, &options).unwrap();
    let log_path = sup.state_dir().join("a.log");
    let written = log_path.clone();
    run_until(sup, Duration::from_secs(10), move |e| e.events().iter().any(|e| e.event == "exit") && std::fs::read_to_string(&written).is_ok_and(|l| l.contains("Usage")));
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("Usage: partita") && !log.contains("earlier run"), "{log}");
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}

/// `up` keeps its caller's thread off the plans' CPUs while the system runs, and gives the CPUs back after.
#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_callers_cpus_come_back_when_the_system_goes() {
    let before = partita_os::sched::current_thread_cpus().unwrap();
    assert!(before.len() >= 2, "needs two CPUs: {before:?}");
    let name = system_name("cpu");
    let root = tempdir("state");
    let sys = common::system(&format!(
        "[system]\nname = \"{name}\"\n[[module]]\nname = \"m\"\ncpus = [1]\n[[module.partition]]\nname = \"a\"\ncommand = [\"sleep\", \"100\"]\n[[module.plan]]\ncpu = 1\nmajor_frame = \"10ms\"\nwindow = [{{ partition = \"a\", start = \"0ms\", duration = \"5ms\" }}]\n"
    ));
    let sup = Supervisor::up(&sys, &options(&root)).unwrap();
    let during = partita_os::sched::current_thread_cpus().unwrap();
    assert!(!during.contains(&1), "off the plan's CPU while it runs: {during:?}");
    sup.down().unwrap();
    assert_eq!(partita_os::sched::current_thread_cpus().unwrap(), before);
    assert_nothing_left(&name, Some(&link_prefix(&name)));
}
