//! Helpers for the supervisor's integration tests: unique names and the final check that nothing is left.
#![allow(dead_code)]
use partita_supervisor::cleanup;
use partita_system::{HostNames, System};
use std::sync::atomic::{AtomicU32, Ordering};

static N: AtomicU32 = AtomicU32::new(0);

/// A system name unique to this test run and call.
pub fn system_name(tag: &str) -> String {
    format!("t{}{}{}", std::process::id(), tag, N.fetch_add(1, Ordering::Relaxed))
}

/// An interface-name stem (`pt` + 6 characters) unique to this test process and call.
pub fn link_stem() -> String {
    format!("pt{:05x}{}", std::process::id() & 0xfffff, N.fetch_add(1, Ordering::Relaxed) % 10)
}

/// Asserts that no namespace, cgroup or link of `system` (links: starting with `stem`) is left.
pub fn assert_nothing_left(system: &str, stem: Option<&str>) {
    let left = cleanup::find(Some(system)).expect("listing leftovers");
    assert!(left.netns.is_empty(), "namespaces left: {:?}", left.netns);
    assert!(left.cgroups.is_empty(), "cgroups left: {:?}", left.cgroups);
    if let Some(stem) = stem {
        let links = cleanup::links_with_prefix(stem).expect("listing links");
        assert!(links.is_empty(), "links left: {links:?}");
    }
}

pub fn tempdir(tag: &str) -> TempDir {
    let p = std::env::temp_dir().join(format!("partita-test-{}-{tag}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(&p).unwrap();
    TempDir(p)
}

pub struct TempDir(pub std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits up to 10 s for `pid` (a child) to end; returns its wait status.
pub fn wait_for(pid: i32) -> i32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(s) = partita_supervisor::launch::try_wait(pid).unwrap() {
            return s;
        }
        assert!(std::time::Instant::now() < deadline, "pid {pid} did not end within 10 s");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A system from TOML, validated against this machine as `partita check` does (the test fails on any error).
pub fn system(text: &str) -> System {
    partita_system::parse(text, "test.toml", &partita_system::Host::this_machine()).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The prefix of every interface of `system`.
pub fn link_prefix(system: &str) -> String {
    HostNames::new(system).link_prefix()
}

/// Options that keep the state directory below `root`.
pub fn options(root: &TempDir) -> partita_supervisor::UpOptions {
    partita_supervisor::UpOptions::new(&root.0)
}

/// The workspace's `partita` binary beside the test binary (`target/<profile>/partita`): what a VM partition's
/// runner is. scripts/test.sh builds it before the tests.
pub fn partita_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().and_then(|d| d.parent()).map(|d| d.join("partita")).unwrap();
    assert!(p.is_file(), "{} is missing: build it first (cargo build --release -p partita-cli)", p.display());
    p
}

/// What a partition running `sh -c` scripts with `programs` needs bound (a partition sees only its program and
/// what its file binds): the programs, found in PATH; `python3` is the system's (`/usr/bin/python3`, which brings
/// its standard library), not a version manager's shim.
pub fn binds(programs: &[&str]) -> String {
    let name = |p: &&str| if *p == "python3" { "/usr/bin/python3".to_string() } else { p.to_string() };
    format!("binds = [{}]", programs.iter().map(|p| format!("\"{}\"", name(p))).collect::<Vec<_>>().join(", "))
}

/// Runs a system that is up until `done` says so (checked every 50 ms) or `limit` passes; returns its event log.
pub fn run_until(
    sup: partita_supervisor::Supervisor,
    limit: std::time::Duration,
    done: impl Fn(&partita_supervisor::health::EventLog) -> bool + Send + 'static,
) -> partita_supervisor::health::EventLog {
    use std::sync::{atomic::AtomicBool, Arc};
    let events = sup.events().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (events, stop) = (events.clone(), stop.clone());
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + limit;
            while !done(&events) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            stop.store(true, Ordering::SeqCst);
        })
    };
    sup.run(Some(limit + std::time::Duration::from_secs(5)), Some(stop)).unwrap();
    watcher.join().unwrap();
    events
}
