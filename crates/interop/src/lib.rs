//! DDS programs partita did not write, for its interoperability tests: the same small program twice, once on
//! eProsima Fast DDS 2.9 (C++, type support from fastddsgen, built by `build.rs`) and once on Cyclone DDS's
//! Python binding. Each publishes the same keyed samples (three instances, one disposed, one unregistered) or
//! keyless ones, or subscribes and prints what arrives as JSON lines, so that any pair can be compared with a
//! direct exchange and with one through partita's router.
//!
//! Every probe gets an explicit network configuration: `CYCLONEDDS_URI` for the Python one, a Fast DDS XML
//! profile in `FASTRTPS_DEFAULT_PROFILES_FILE` for the Fast DDS one (loopback in the tests).
#![forbid(unsafe_code)]
pub mod exchange;
use partita_dds::fastdds::{FastDdsProfile, PROFILES_VARIABLE};
use partita_dds::DomainConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A DDS implementation with a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implementation {
    /// eProsima Fast DDS 2.9 (Debian's libfastrtps-dev), C++.
    FastDds,
    /// Cyclone DDS through its Python binding (PyPI `cyclonedds` 11.0.1).
    CyclonePython,
}

impl Implementation {
    pub const ALL: [Implementation; 2] = [Implementation::FastDds, Implementation::CyclonePython];

    pub fn name(self) -> &'static str {
        match self {
            Implementation::FastDds => "Fast DDS",
            Implementation::CyclonePython => "Cyclone DDS (Python)",
        }
    }
}

/// The Fast DDS probe built by `build.rs`.
pub fn fastdds_probe() -> &'static Path {
    Path::new(env!("PARTITA_FASTDDS_PROBE"))
}

/// The Python interpreter with Cyclone DDS's binding: `PARTITA_PYTHON`, else the venv scripts/setup.sh makes.
pub fn python() -> PathBuf {
    std::env::var_os("PARTITA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv/bin/python"))
}

/// The Python probe.
pub fn python_probe() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/probe.py")
}

/// What a probe does.
#[derive(Debug, Clone)]
pub struct Probe {
    pub implementation: Implementation,
    pub domain: u32,
    pub topic: String,
    pub keyless: bool,
    pub role: Role,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Role {
    /// Publish, after `wait_readers` readers matched (0: at once), then stay `linger_s` seconds.
    Pub { wait_readers: u32, linger_s: f64 },
    /// Subscribe until it has every sample and (keyed) instance 2 disposed and instance 3 without writers, or
    /// `seconds` pass.
    Sub { seconds: f64 },
}

impl Probe {
    /// The probe's command, on loopback: `profile_dir` receives the Fast DDS profile file.
    pub fn command(&self, profile_dir: &Path) -> std::io::Result<Command> {
        let mut c = match self.implementation {
            Implementation::FastDds => {
                let file = profile_dir.join("fastdds-loopback.xml");
                let xml = FastDdsProfile::loopback().to_xml().map_err(|e| std::io::Error::other(e.to_string()))?;
                std::fs::write(&file, xml)?;
                let mut c = Command::new(fastdds_probe());
                c.env(PROFILES_VARIABLE, file);
                c
            }
            Implementation::CyclonePython => {
                let mut c = Command::new(python());
                c.arg(python_probe());
                let uri = DomainConfig::loopback(self.domain).to_cyclone_config().map_err(|e| std::io::Error::other(e.to_string()))?;
                c.env("CYCLONEDDS_URI", uri);
                c
            }
        };
        // Nothing of the caller's DDS configuration reaches the probe but what is set here.
        c.env_remove(if self.implementation == Implementation::FastDds { "CYCLONEDDS_URI" } else { PROFILES_VARIABLE });
        let role = match self.role {
            Role::Pub { .. } => "pub",
            Role::Sub { .. } => "sub",
        };
        c.args([role, &self.domain.to_string(), &self.topic]);
        if self.keyless {
            c.arg("--keyless");
        }
        match self.role {
            Role::Pub { wait_readers, linger_s } => {
                c.args(["--wait-readers", &wait_readers.to_string(), "--linger", &linger_s.to_string()]);
            }
            Role::Sub { seconds } => {
                c.args(["--seconds", &seconds.to_string()]);
            }
        }
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        Ok(c)
    }
}

/// One line a subscribing probe printed: a sample, or a key-only notification (`valid` false).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Seen {
    /// The instance (keyed topics): known from an earlier sample of the instance; None for keyless topics.
    #[serde(default)]
    pub id: Option<i32>,
    #[serde(default)]
    pub seq: Option<i32>,
    #[serde(default)]
    pub text: Option<String>,
    pub valid: bool,
    /// `alive`, `disposed` or `no_writers`.
    pub state: String,
    /// Source timestamp, ns since the Unix epoch.
    pub ts: i64,
}

/// The source timestamp every probe gives its n-th write (samples 1..=6, the dispose 7, the unregister 8):
/// 1700000000 s + n ms, so that a subscriber can tell the publisher's timestamps from ones stamped on the way.
pub fn stamp(n: i64) -> i64 {
    1_700_000_000 * 1_000_000_000 + n * 1_000_000
}

/// The lines of a subscribing probe's output; other lines are left out.
pub fn parse_seen(stdout: &str) -> Vec<Seen> {
    stdout.lines().filter_map(|l| serde_json::from_str::<Seen>(l).ok()).collect()
}

/// What a subscriber saw, reduced to what a direct exchange and a routed one must share: its data samples
/// (instance, sequence number, text, source timestamp) in order, and the last instance state it saw of every
/// instance. Whether a dispose came as a sample of its own or folded into a data sample not yet read depends
/// on timing, so key-only samples count only through the states.
pub type Outcome = (Vec<(Option<i32>, Option<i32>, Option<String>, i64)>, Vec<(Option<i32>, String)>);

pub fn outcome(seen: &[Seen]) -> Outcome {
    let samples = seen.iter().filter(|s| s.valid).map(|s| (s.id, s.seq, s.text.clone(), s.ts)).collect();
    let mut last: Vec<(Option<i32>, String)> = Vec::new();
    for s in seen {
        match last.iter_mut().find(|(id, _)| *id == s.id) {
            Some(entry) => entry.1 = s.state.clone(),
            None => last.push((s.id, s.state.clone())),
        }
    }
    last.sort();
    (samples, last)
}
