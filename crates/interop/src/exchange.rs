//! One exchange between a publishing probe and a subscribing probe, live (the subscriber first, the publisher
//! writing as soon as it matched) or late (the subscriber after the publisher wrote, reading its history),
//! with the subscriber's domain possibly another (a router between them is the caller's).
use crate::{parse_seen, Implementation, Probe, Role, Seen};
use std::io::Read;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// When the subscriber joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joining {
    /// Before the publisher; the publisher writes as soon as one reader matched (through a router, the
    /// router's).
    Live,
    /// After the publisher has written everything; it reads the publisher's (transient-local) history.
    Late,
}

/// What the subscriber printed, and both probes' output for failure messages.
#[derive(Debug, Clone)]
pub struct Exchanged {
    pub seen: Vec<Seen>,
    pub log: String,
}

/// A probe process, killed by its pid if still running when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Running {
    /// Waits at most `limit` for the process, kills it after that; returns its stdout and stderr.
    pub fn finish(mut self, limit: Duration) -> (String, String) {
        let end = Instant::now() + limit;
        while self.0.try_wait().ok().flatten().is_none() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
        let (mut out, mut err) = (String::new(), String::new());
        if let Some(mut o) = self.0.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        if let Some(mut e) = self.0.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (out, err)
    }
}

/// Runs one exchange of `topic`: `publisher` on `pub_domain`, `subscriber` on `sub_domain`. `dir` receives the
/// probes' configuration files. Through a router, `writers_before_live` is how many readers the publisher waits
/// for (1: the router's, or the subscriber's when direct).
pub fn exchange(
    publisher: Implementation,
    subscriber: Implementation,
    (pub_domain, sub_domain): (u32, u32),
    topic: &str,
    keyless: bool,
    joining: Joining,
    dir: &Path,
) -> std::io::Result<Exchanged> {
    let sub = |dir: &Path, seconds: f64| -> std::io::Result<Running> {
        let p = Probe { implementation: subscriber, domain: sub_domain, topic: topic.into(), keyless, role: Role::Sub { seconds } };
        Ok(Running(p.command(&dir.join("sub"))?.spawn()?))
    };
    let publish = |dir: &Path, wait_readers: u32, linger_s: f64| -> std::io::Result<Running> {
        let p = Probe { implementation: publisher, domain: pub_domain, topic: topic.into(), keyless, role: Role::Pub { wait_readers, linger_s } };
        Ok(Running(p.command(&dir.join("pub"))?.spawn()?))
    };
    std::fs::create_dir_all(dir.join("sub"))?;
    std::fs::create_dir_all(dir.join("pub"))?;
    let (sub_out, sub_err, pub_err) = match joining {
        Joining::Live => {
            // Longer than the publisher lingers (by 6 s): an instance it leaves shows as such. The publisher
            // writes as soon as its reader matched and the samples arrive within a second or two, so 8 s of
            // lingering leaves them time over; a late joiner's publisher lingers longer (below).
            let s = sub(dir, 14.0)?;
            let p = publish(dir, 1, 8.0)?;
            let (out, err) = s.finish(Duration::from_secs(19));
            let (_, perr) = p.finish(Duration::ZERO);
            (out, err, perr)
        }
        Joining::Late => {
            // It stays while the late subscriber starts and reads for its 8 s.
            let mut p = publish(dir, 0, 14.0)?;
            // Wait for its "written" line on stdout.
            let mut stdout = p.0.stdout.take().expect("piped");
            let mut line = Vec::new();
            let end = Instant::now() + Duration::from_secs(20);
            let mut byte = [0u8; 1];
            while !String::from_utf8_lossy(&line).contains("\"written\"") && Instant::now() < end {
                match stdout.read(&mut byte) {
                    Ok(1) => line.push(byte[0]),
                    _ => break,
                }
            }
            // The history is read for a fixed time: how much of it a late joiner gets is what is compared.
            let s = sub(dir, 8.0)?;
            let (out, err) = s.finish(Duration::from_secs(12));
            let (_, perr) = p.finish(Duration::ZERO);
            (out, err, perr)
        }
    };
    let log = format!("subscriber stdout:\n{sub_out}\nsubscriber stderr:\n{sub_err}\npublisher stderr:\n{pub_err}");
    Ok(Exchanged { seen: parse_seen(&sub_out), log })
}
