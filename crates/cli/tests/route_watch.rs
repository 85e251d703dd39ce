//! `partita route CONFIG --watch`: a route added to the file starts forwarding without a restart, and the
//! router prints what the reload did; a broken file, or one that changes the sides, is refused with the file,
//! field and fix, and the running routes keep forwarding.
use partita_dds::{qos::History, DomainConfig, Participant, Qos, Reader, Topic, TopicType, Writer};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Tick {
    n: u32,
}

impl TopicType for Tick {
    fn type_name() -> &'static str {
        "partita::test::Tick"
    }
}

/// The router process, killed (by its pid) and reaped when the test ends, and what it printed so far.
struct RouterProcess {
    child: Child,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
}

impl RouterProcess {
    fn start(file: &Path) -> RouterProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_partita"))
            .args(["route", "--watch", "--duration", "120"])
            .arg(file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start partita route");
        fn collect(pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
            let text = Arc::new(Mutex::new(String::new()));
            let t = text.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut t = t.lock().unwrap();
                    t.push_str(&line);
                    t.push('\n');
                }
            });
            text
        }
        let out = collect(child.stdout.take().unwrap());
        let err = collect(child.stderr.take().unwrap());
        RouterProcess { child, out, err }
    }

    fn printed(&self) -> String {
        format!("--- stdout\n{}--- stderr\n{}", self.out.lock().unwrap(), self.err.lock().unwrap())
    }

    /// Waits (up to 20 s) until the router has printed `needle` on stdout (`err` false) or stderr, past `from`
    /// bytes of it; returns the text printed past `from`.
    fn wait_for(&self, err: bool, from: usize, needle: &str) -> String {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let text = if err { self.err.lock().unwrap().clone() } else { self.out.lock().unwrap().clone() };
            let new = text.get(from..).unwrap_or("").to_string();
            if new.contains(needle) {
                return new;
            }
            assert!(Instant::now() < end, "the router did not print {needle:?}\n{}", self.printed());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn lengths(&self) -> (usize, usize) {
        (self.out.lock().unwrap().len(), self.err.lock().unwrap().len())
    }
}

impl Drop for RouterProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn file_text(a: u32, b: u32, routes: &[&str]) -> String {
    let mut text = format!("stats_period = \"200ms\"\n[[side]]\nname = \"a\"\ndomain = {a}\n[[side]]\nname = \"b\"\ndomain = {b}\n");
    for r in routes {
        text.push_str(r);
    }
    text
}

fn route(topic: &str) -> String {
    format!("[[route]]\nfrom = \"a\"\nto = \"b\"\nallow = [\"{topic}\"]\n")
}

/// Whether what `w` writes reaches `r`: writes a sample every 20 ms until one arrives, for up to `patience`.
fn crosses(w: &Writer<Tick>, r: &Reader<Tick>, patience: Duration) -> bool {
    let _ = r.take();
    let end = Instant::now() + patience;
    let mut n = 0;
    while Instant::now() < end {
        w.write(&Tick { n }).unwrap();
        n += 1;
        std::thread::sleep(Duration::from_millis(20));
        if r.take().unwrap().iter().any(|s| s.value.is_some()) {
            return true;
        }
    }
    false
}

#[test]
fn a_watched_route_file_is_reloaded_and_a_bad_one_is_refused_while_the_routes_keep_forwarding() {
    let dir = std::env::temp_dir().join(format!("partita-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("router.toml");
    let a = 40 + (std::process::id() % 25) * 2;
    let b = a + 1;
    std::fs::write(&file, file_text(a, b, &[&route("first")])).unwrap();
    let router = RouterProcess::start(&file);

    let qos = Qos::reliable().history(History::KeepAll);
    let (pa, pb) = (Participant::new(&DomainConfig::loopback(a)).unwrap(), Participant::new(&DomainConfig::loopback(b)).unwrap());
    let endpoints = |topic: &str| {
        let (ta, tb) = (Topic::<Tick>::new(&pa, topic, &qos).unwrap(), Topic::<Tick>::new(&pb, topic, &qos).unwrap());
        (Writer::new(&ta, &qos).unwrap(), Reader::new(&tb, &qos).unwrap())
    };
    let (w1, r1) = endpoints("first");
    let (w2, r2) = endpoints("second");
    let long = Duration::from_secs(20);
    assert!(crosses(&w1, &r1, long), "first is routed from the start\n{}", router.printed());
    assert!(!crosses(&w2, &r2, Duration::from_millis(600)), "second has no route yet\n{}", router.printed());

    // A new route, put before the first one: second starts, first is kept.
    let (out, _) = router.lengths();
    std::fs::write(&file, file_text(a, b, &[&route("second"), &route("first")])).unwrap();
    let said = router.wait_for(false, out, "reloaded");
    let expected = format!("{}: reloaded: routes kept 1, restarted with new settings 0, removed 0, added 1 (reload 1)", file.display());
    assert!(said.lines().any(|l| l == expected), "expected {expected:?}\n{}", router.printed());
    assert!(crosses(&w2, &r2, long), "second is routed after the reload\n{}", router.printed());

    // A broken file: refused, naming file, line, field and fix; both routes keep forwarding.
    let (_, err) = router.lengths();
    std::fs::write(&file, file_text(a, b, &[&route("second").replace("to = \"b\"", "to = \"nowhere\""), &route("first")])).unwrap();
    let said = router.wait_for(true, err, "keeping the running table");
    let prefix = format!("error: {}:", file.display());
    assert!(
        said.lines().any(|l| l.starts_with(&prefix) && l.contains(": route[0].to: no side named \"nowhere\"; name one of the [[side]] tables")),
        "{}",
        router.printed()
    );
    assert!(crosses(&w1, &r1, long) && crosses(&w2, &r2, long), "the running table stays\n{}", router.printed());

    // A change of sides: refused as needing a restart.
    let (_, err) = router.lengths();
    std::fs::write(&file, file_text(a, b + 50, &[&route("second"), &route("first")])).unwrap();
    let said = router.wait_for(true, err, "keeping the running table");
    assert!(said.lines().any(|l| l.starts_with(&prefix) && l.contains(" side[1]: ") && l.contains("restart")), "{}", router.printed());
    assert!(crosses(&w1, &r1, long), "the running table stays\n{}", router.printed());

    // Back to the first table: second's route is removed and it stops.
    let (out, _) = router.lengths();
    std::fs::write(&file, file_text(a, b, &[&route("first")])).unwrap();
    let said = router.wait_for(false, out, "reloaded");
    assert!(said.contains("routes kept 1, restarted with new settings 0, removed 1, added 0 (reload 2)"), "{}", router.printed());
    assert!(!crosses(&w2, &r2, Duration::from_millis(600)), "second stopped\n{}", router.printed());
    assert!(crosses(&w1, &r1, long), "{}", router.printed());
    drop(router);
    let _ = std::fs::remove_dir_all(&dir);
}
