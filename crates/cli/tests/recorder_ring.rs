//! One recorder per ring: a second `partita app recorder` on a ring another one is writing exits with an error
//! that names the ring and the first recorder's pid, and the first one's recording stays whole. The recorders
//! join DDS on loopback only (no supervisor, no root needed).
use partita_apps::ring::{RingConfig, RingReader, RingWriter};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const EXE: &str = env!("CARGO_BIN_EXE_partita");

mod common;
use common::TempDir;

fn recorder(ring: &std::path::Path, seconds: &str) -> Command {
    let mut c = Command::new(EXE);
    c.args(["app", "recorder", "--ring", ring.to_str().unwrap(), "--ring-size", "4MiB", "--fps", "20"])
        .args(["--duration", seconds, "--domain", "63"]);
    c
}

#[test]
fn a_second_recorder_on_a_ring_in_use_exits_with_an_error_naming_the_first() {
    let dir = TempDir::new("recorder-ring", "two");
    let ring = dir.0.join("ring");
    let mut first = recorder(&ring, "3").stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    // The first recorder holds the ring once it says it opened it.
    let mut out = BufReader::new(first.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("opened") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the first recorder ended before opening its ring");
    }

    let second = recorder(&ring, "1").output().unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success() && second.status.code() != Some(101), "{:?}: {stderr}", second.status);
    let expected = format!("partita app recorder: error: ring {} is in use by another recorder (pid {}", ring.display(), first.id());
    assert!(stderr.contains(&expected), "no {expected:?} in:\n{stderr}");
    assert!(stderr.contains("give each recorder its own --ring"), "{stderr}");

    let rest: Vec<String> = out.lines().map_while(Result::ok).collect();
    assert!(first.wait().unwrap().success(), "the first recorder failed: {rest:?}");
    // Every record the first recorder wrote is there, in order, unharmed.
    let (w, report) = RingWriter::open(RingConfig::new(&ring, 4 << 20)).unwrap();
    assert_eq!((report.damaged, report.truncated_bytes), (0, 0), "{report:?}");
    assert!(report.records >= 20, "{report:?}");
    let index = w.index();
    let entries: Vec<_> = index.lock().unwrap().entries().copied().collect();
    let mut reader = RingReader::new(&ring);
    for (i, e) in entries.iter().enumerate() {
        assert_eq!((e.seq, e.meta.frame), (i as u64, i as u64));
        assert!(reader.read(e).is_ok(), "record {i}");
    }
}
