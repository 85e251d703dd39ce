//! Shared helpers of the router's integration tests.
#![allow(dead_code)]
use partita_dds::{DomainConfig, TopicType};
use partita_router::RouterConfig;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A small keyless sample: a counter.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tick {
    pub n: u32,
}

impl TopicType for Tick {
    fn type_name() -> &'static str {
        "partita::test::Tick"
    }
}

/// Polls `f` every 20 ms until it holds; fails the test after 20 s, naming `what`.
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !f() {
        assert!(std::time::Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Domain ids distinct per test process (0..=232).
pub fn domain(offset: u32) -> u32 {
    assert!(offset < 25);
    (std::process::id() % 9) * 25 + offset
}

pub fn loopback_uri(domain: u32) -> String {
    DomainConfig::loopback(domain).to_cyclone_config().unwrap()
}

pub fn config(text: &str) -> RouterConfig {
    RouterConfig::parse(text, Path::new("test.toml")).unwrap_or_else(|e| panic!("{e:?}"))
}

/// For a router sharing this test's process with the test's own DDS readers and writers.
pub fn in_process(mut config: RouterConfig) -> RouterConfig {
    config.local_applications = true;
    config
}

/// A two-sided router configuration on loopback.
pub fn two_sides(a: u32, b: u32, route: &str) -> RouterConfig {
    config(&format!(
        "stats_period = \"200ms\"\n[[side]]\nname = \"a\"\ndomain = {a}\n[[side]]\nname = \"b\"\ndomain = {b}\n[[route]]\nfrom = \"a\"\nto = \"b\"\n{route}\n"
    ))
}

pub fn python() -> PathBuf {
    let p = std::env::var_os("PARTITA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv/bin/python"));
    assert!(p.exists(), "{} not found: run scripts/setup.sh", p.display());
    p
}

/// The Python camera peer of the DDS layer's interoperability test (an independent DDS program).
pub fn camera_peer(role: &str, domain: u32, extra: &[&str]) -> Child {
    Command::new(python())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../dds/tests/interop/camera_peer.py"))
        .args([role, &domain.to_string()])
        .args(extra)
        .env("CYCLONEDDS_URI", loopback_uri(domain))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the Python DDS peer")
}

/// Cyclone's ddsperf (Debian cyclonedds-tools), on loopback only.
pub fn ddsperf(domain: u32, args: &[&str]) -> Child {
    Command::new("ddsperf")
        .args(["-i", &domain.to_string()])
        .args(args)
        .env("CYCLONEDDS_URI", loopback_uri(domain))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ddsperf (install cyclonedds-tools: scripts/setup.sh)")
}

/// Kills a child we started (by its pid) and reaps it, on drop.
pub struct Reap(pub Option<Child>);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What a child we started printed, and how it ended.
pub struct Finished {
    /// `None`: still running at the deadline, so it was killed.
    pub success: Option<bool>,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// Everything it printed, for a failing assertion's message.
    pub fn text(&self) -> String {
        let how = match self.success {
            None => "killed at its deadline",
            Some(true) => "exited with success",
            Some(false) => "exited with failure",
        };
        format!("({how})\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr)
    }
}

/// Reads a child's piped stdout and stderr to their end (in threads, so neither pipe fills and blocks it) and
/// waits for it to exit; at `deadline` it is killed (by its pid) and reaped. A DDS program that never ends then
/// fails its test with what it printed instead of holding up the suite.
pub fn finish(mut child: Child, deadline: Duration) -> Finished {
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let mut bytes = Vec::new();
                let _ = p.read_to_end(&mut bytes);
                text = String::from_utf8_lossy(&bytes).into_owned();
            }
            text
        })
    }
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let end = Instant::now() + deadline;
    let success = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status.success()),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                // Where it waits, for the failure message, before it is killed.
                let trace = Command::new("gdb")
                    .args(["-batch", "-p", &child.id().to_string(), "-ex", "thread apply all bt"])
                    .stdin(Stdio::null())
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_else(|e| format!("(no backtrace: gdb: {e})"));
                eprintln!("killing pid {} at its deadline; its threads:\n{trace}", child.id());
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    Finished { success, stdout: out.join().unwrap_or_default(), stderr: err.join().unwrap_or_default() }
}
