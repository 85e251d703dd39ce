//! Two `partita route` processes in a ring, as two modules' I/O partitions would be: one routes domain a → b,
//! the other b → a, every topic. Cyclone's ddsperf (a DDS program partita did not write) publishes and
//! subscribes on both domains, so each router's reader on a domain also receives, over the network, what the
//! other router wrote there. Each router forwards its own side's samples once and drops the other's (LOOP),
//! told apart by discovery alone (the routers share no process); nothing circles.
use partita_dds::DomainConfig;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child started here, killed (by its pid) and reaped when the test ends, however it ends.
struct Started(Option<Child>);

impl Started {
    fn spawn(cmd: &mut Command) -> Started {
        Started(Some(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start a program")))
    }

    /// Everything it printed on stdout and stderr once it has exited; killed at `deadline`.
    fn output(mut self, deadline: Duration) -> (bool, String, String) {
        let mut child = self.0.take().unwrap();
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_end(&mut bytes);
                }
                String::from_utf8_lossy(&bytes).into_owned()
            })
        };
        let out = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let err = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let end = Instant::now() + deadline;
        let ended = loop {
            match child.try_wait() {
                Ok(Some(_)) => break true,
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break false;
                }
            }
        };
        (ended, out.join().unwrap_or_default(), err.join().unwrap_or_default())
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn router(dir: &Path, name: &str, a: u32, b: u32, from: &str, to: &str) -> Started {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(
        &file,
        format!(
            "name = \"{name}\"\nstats_period = \"500ms\"\n\
             [[side]]\nname = \"a\"\ndomain = {a}\n[[side]]\nname = \"b\"\ndomain = {b}\n\
             [[route]]\nfrom = \"{from}\"\nto = \"{to}\"\n"
        ),
    )
    .unwrap();
    Started::spawn(Command::new(env!("CARGO_BIN_EXE_partita")).args(["route", "--stats", "--duration", "6"]).arg(&file))
}

fn ddsperf(domain: u32, args: &[&str]) -> Started {
    let uri = DomainConfig::loopback(domain).to_cyclone_config().unwrap();
    Started::spawn(Command::new("ddsperf").args(["-i", &domain.to_string()]).args(args).env("CYCLONEDDS_URI", uri))
}

/// (forwarded, dropped as loops) summed over the rows of the last statistics table a router printed.
fn totals(stats: &str) -> (u64, u64) {
    let last = stats.rsplit("ROUTE ").next().unwrap_or("");
    // The columns by their names in the header (ROUTE itself was cut off by the split).
    let header: Vec<&str> = std::iter::once("ROUTE").chain(last.lines().next().unwrap_or("").split_whitespace()).collect();
    let at = |name: &str| header.iter().position(|h| *h == name);
    let (Some(forwarded), Some(looped)) = (at("FORWARDED"), at("LOOP")) else { return (0, 0) };
    let mut sums = (0, 0);
    for row in last.lines().skip(1) {
        let cols: Vec<&str> = row.split_whitespace().collect();
        if cols.len() == header.len() {
            sums.0 += cols[forwarded].parse::<u64>().unwrap_or(0);
            sums.1 += cols[looped].parse::<u64>().unwrap_or(0);
        }
    }
    sums
}

#[test]
fn two_router_processes_in_a_ring_forward_each_sample_once_and_drop_each_others() {
    let dir = std::env::temp_dir().join(format!("partita-ring-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = 100 + (std::process::id() % 60) * 2;
    let b = a + 1;
    let r1 = router(&dir, "r1", a, b, "a", "b");
    let r2 = router(&dir, "r2", a, b, "b", "a");
    // On each domain a subscriber, and a publisher of 100 samples a second for 3 s.
    let subs = [ddsperf(a, &["-D", "5", "sub"]), ddsperf(b, &["-D", "5", "sub"])];
    let pub_b = ddsperf(b, &["-D", "3", "pub", "100Hz"]);
    let (pub_ended, _, pub_err) = ddsperf(a, &["-D", "3", "pub", "100Hz"]).output(Duration::from_secs(30));
    let _ = pub_b.output(Duration::from_secs(30));
    drop(subs);
    let (r1_ended, s1, e1) = r1.output(Duration::from_secs(30));
    let (r2_ended, s2, e2) = r2.output(Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&dir);
    let context = format!("r1 (a->b):\n{s1}{e1}\nr2 (b->a):\n{s2}{e2}\npublisher on a: {pub_err}");
    assert!(pub_ended && r1_ended && r2_ended, "a program did not end by its deadline\n{context}");
    let ((f1, l1), (f2, l2)) = (totals(&s1), totals(&s2));
    eprintln!("r1 forwarded {f1}, dropped {l1} as loops; r2 forwarded {f2}, dropped {l2}");
    // Each publisher writes about 300 samples; each router forwards its own side's once. A loop would forward
    // every sample again on each turn. Each router has two forwarders of the data topic here (one per ddsperf
    // participant on its side that has a writer of it); were each to forward every writer's samples, every
    // sample would cross twice.
    assert!(f1 >= 240 && f2 >= 240, "each router forwards its side's samples: {f1} and {f2}\n{context}");
    assert!(f1 <= 420 && f2 <= 420, "forwarded {f1} and {f2} of about 300 each: samples crossed more than once\n{context}");
    assert!(l1 >= 150 && l2 >= 150, "each router receives the other's samples and drops them (LOOP)\n{context}");
}
