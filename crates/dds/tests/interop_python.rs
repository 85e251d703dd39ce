//! Interoperability with a DDS program partita did not write: Cyclone DDS's Python binding (PyPI `cyclonedds`,
//! installed by scripts/setup.sh into target/pyenv), with the same type declared in Python. Samples written here
//! are read there, and the other way round, keys and dispose included. Both sides run on loopback only.
mod common;
use common::{cameras, domain, Camera, Mode};
use partita_dds::{qos::History, DomainConfig, InstanceState, Participant, Qos, Reader, Topic, Writer};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn python() -> PathBuf {
    let p = std::env::var_os("PARTITA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv/bin/python"));
    assert!(p.exists(), "{} not found: run scripts/setup.sh (it installs the Python Cyclone DDS binding)", p.display());
    p
}

fn peer(role: &str, cfg: &DomainConfig) -> std::process::Child {
    Command::new(python())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/camera_peer.py"))
        .args([role, &cfg.domain_id.to_string()])
        .env("CYCLONEDDS_URI", cfg.to_cyclone_config().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the Python DDS peer")
}

fn qos() -> Qos {
    Qos::reliable().history(History::KeepAll).transient_local()
}

#[test]
fn python_reads_what_partita_writes() {
    let cfg = DomainConfig::loopback(domain(10));
    let mut child = peer("sub", &cfg);
    let p = Participant::new(&cfg).unwrap();
    let topic = Topic::<Camera>::new(&p, "cameras", &qos()).unwrap();
    let w = Writer::new(&topic, &qos()).unwrap();
    let matched = w.wait_for_readers(1, Duration::from_secs(20));
    if matched.is_err() {
        let _ = child.kill();
    }
    matched.unwrap();
    let cams = cameras("rs");
    for c in &cams {
        w.write(c).unwrap();
    }
    w.dispose(&cams[1]).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "Python reader did not see 3 samples and a dispose:\n{text}");
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let samples: Vec<&serde_json::Value> = lines.iter().filter(|v| v.get("id").is_some()).collect();
    assert_eq!(samples.len(), 3, "{text}");
    for (v, c) in samples.iter().zip(&cams) {
        assert_eq!(v["id"], c.id);
        assert_eq!(v["name"], c.name.as_str());
        assert_eq!(v["mode"], format!("{:?}", c.mode));
        assert_eq!(v["x"], c.at.x);
        assert_eq!(v["y"], c.at.y);
        assert_eq!(v["frame"], serde_json::json!(c.frame));
        assert_eq!(v["tags"], serde_json::json!(c.tags));
    }
    assert!(lines.iter().any(|v| v.get("disposed").is_some()), "{text}");
}

#[test]
fn partita_reads_what_python_writes() {
    let cfg = DomainConfig::loopback(domain(11));
    let p = Participant::new(&cfg).unwrap();
    let topic = Topic::<Camera>::new(&p, "cameras", &qos()).unwrap();
    let r = Reader::new(&topic, &qos()).unwrap();
    let mut child = peer("pub", &cfg);
    let end = Instant::now() + Duration::from_secs(20);
    let mut values = Vec::new();
    let mut disposed = Vec::new();
    while (values.len() < 3 || disposed.is_empty()) && Instant::now() < end {
        for s in r.take_wait(Duration::from_millis(100)).unwrap() {
            if s.info.instance_state == InstanceState::Disposed {
                disposed.push(s.info.instance_handle);
            }
            if let Some(v) = s.value {
                values.push((v, s.info.instance_handle));
            }
        }
    }
    drop(r);
    let status = child.wait().unwrap();
    assert_eq!(values.len(), 3, "got {values:?}");
    for (i, (v, _)) in values.iter().enumerate() {
        assert_eq!(v.id, i as u32);
        assert_eq!(v.name, format!("py-{i}"));
        assert_eq!(v.mode, if i % 2 == 1 { Mode::Recording } else { Mode::Idle });
        assert_eq!(v.at.x, i as f64 * 0.5);
        assert_eq!(v.at.y, 7.25);
        assert_eq!(v.frame, vec![i as u8; 10 + i]);
        assert_eq!(v.tags, vec!["py".to_string(), format!("n{i}")]);
    }
    let handles: std::collections::HashSet<u64> = values.iter().map(|(_, h)| *h).collect();
    assert_eq!(handles.len(), 3, "three keys must arrive as three instances");
    assert_eq!(disposed.len(), 1, "one dispose expected");
    assert_eq!(disposed[0], values[1].1, "the dispose must be for camera 1's instance");
    assert!(status.success());
}
