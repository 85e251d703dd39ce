//! The example partitions partita-apex-hello-source and -destination as two processes, each given its own
//! ports' descriptors and `PARTITA_PORTS` as the supervisor gives them: the test plays the supervisor.
use partita_env::ports::{format_ports, PORTS};
use partita_env::PARTITION;
use partita_ports::{ChannelMemory, Direction, Fault, PortEnd, PortEntry, PortKind};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SOURCE: &str = env!("CARGO_BIN_EXE_partita-apex-hello-source");
const DESTINATION: &str = env!("CARGO_BIN_EXE_partita-apex-hello-destination");

/// The geometry the example partitions declare: a653rs makes them ask for exactly this.
const HELLO_SIZE: u32 = 16;
const HELLO_REFRESH: Duration = Duration::from_millis(500);
const GREETINGS_SIZE: u32 = 32;
const GREETINGS_DEPTH: u64 = 8;

/// Descriptors are made inheritable only while one child is spawned, so that no other child of this test
/// process (the tests run in parallel) inherits a port that is not its own.
static SPAWNING: Mutex<()> = Mutex::new(());

/// One end of a channel as the supervisor holds it: the descriptors a partition gets, and the status it reads.
type End = PortEnd;

fn end(name: &str, memory: &ChannelMemory, direction: Direction, depth_or_refresh: u64) -> End {
    memory.end(name, direction, depth_or_refresh).unwrap()
}

/// The channels `hello` (sampling) and `greetings` (queuing), `hello` with `hello_size` bytes at most.
struct Channels {
    hello: [End; 2],
    greetings: [End; 2],
}

fn channels(hello_size: u32) -> Channels {
    let hello = ChannelMemory::create("hello", PortKind::Sampling, hello_size, 1).unwrap();
    let greetings = ChannelMemory::create("greetings", PortKind::Queuing, GREETINGS_SIZE, GREETINGS_DEPTH).unwrap();
    let refresh = HELLO_REFRESH.as_nanos() as u64;
    Channels {
        hello: [end("hello", &hello, Direction::Source, refresh), end("hello", &hello, Direction::Destination, refresh)],
        greetings: [end("greetings", &greetings, Direction::Source, GREETINGS_DEPTH), end("greetings", &greetings, Direction::Destination, GREETINGS_DEPTH)],
    }
}

/// A partition's process, its standard output line by line as it comes, its standard error kept.
struct Partition {
    child: Child,
    lines: Receiver<String>,
    stdout: Vec<String>,
    stderr: std::thread::JoinHandle<String>,
}

fn set_inheritable(ends: &[&End], inheritable: bool) {
    for e in ends {
        e.set_inheritable(inheritable).unwrap();
    }
}

fn start(binary: &str, partition: &str, ends: &[&End], args: &[&str]) -> Partition {
    let entries: Vec<PortEntry> = ends.iter().map(|e| e.entry.clone()).collect();
    let mut child = {
        let _one_at_a_time = SPAWNING.lock().unwrap_or_else(|p| p.into_inner());
        set_inheritable(ends, true);
        let child = Command::new(binary).args(args).env(PORTS, format_ports(&entries)).env(PARTITION, partition).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        set_inheritable(ends, false);
        child.unwrap()
    };
    let (tx, lines) = channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    Partition { child, lines, stdout: Vec::new(), stderr }
}

impl Partition {
    /// Waits until the process has printed a line `until` accepts; panics (after killing it) at `deadline`.
    fn wait_for_line(&mut self, deadline: Instant, until: impl Fn(&str) -> bool) {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let done = until(&line);
                    self.stdout.push(line);
                    if done {
                        return;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("no such line before the deadline; output so far: {:#?}", self.stdout);
                }
            }
        }
    }

    /// Waits for the process to end (killed at `deadline`, then a failure); returns how it ended, its whole
    /// standard output and its standard error.
    fn wait(mut self, deadline: Instant) -> (ExitStatus, Vec<String>, String) {
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("still running at the deadline; output so far: {:#?}\n{}", self.stdout, self.stderr.join().unwrap());
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let stderr = self.stderr.join().unwrap();
        // The reader thread ends at the pipe's end, after the process: every line is in the channel by now.
        let mut stdout = self.stdout;
        stdout.extend(self.lines.iter());
        (status, stdout, stderr)
    }
}

/// A `hello` line of the destination: its counter and whether it was valid.
fn hello_line(line: &str) -> Option<(u64, bool)> {
    let rest = line.strip_prefix("hello counter=")?;
    let mut words = rest.split_whitespace();
    let counter = words.next()?.parse().ok()?;
    let validity = words.next()?.strip_prefix("validity=")?;
    Some((counter, validity == "valid"))
}

#[test]
fn the_destination_gets_every_greeting_in_order_and_the_source_s_samples_valid() {
    const N: u64 = 5;
    let c = channels(HELLO_SIZE);
    let count = N.to_string();
    // The destination first: it waits on the queue, and its sampling reads find nothing until the source writes.
    let destination = start(DESTINATION, "hello-destination", &[&c.hello[1], &c.greetings[1]], &["--count", &count]);
    let source = start(SOURCE, "hello-source", &[&c.hello[0], &c.greetings[0]], &["--count", &count]);
    // The source sends every 100 ms: N of them take (N - 1) × 100 ms, plus the start of two processes.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (source_status, sent, source_errors) = source.wait(deadline);
    let (destination_status, got, destination_errors) = destination.wait(deadline);
    assert_eq!(source_status.code(), Some(0), "source: {source_status}\n{source_errors}");
    assert_eq!(destination_status.code(), Some(0), "destination: {destination_status}\n{destination_errors}");
    assert_eq!(sent, (1..=N).map(|n| format!("sent counter={n}")).collect::<Vec<_>>());

    let greetings: Vec<&str> = got.iter().filter_map(|l| l.strip_prefix("greetings message=")).collect();
    assert_eq!(greetings, (1..=N).map(|n| format!("\"greeting {n}\"")).collect::<Vec<_>>(), "every greeting once, in order: {got:#?}");
    let samples: Vec<(u64, bool)> = got.iter().filter_map(|l| hello_line(l)).collect();
    assert!(samples.windows(2).all(|w| w[0].0 < w[1].0), "new samples only, in order: {got:#?}");
    assert_eq!(samples.last().map(|s| s.0), Some(N), "the last sample read is the last written: {got:#?}");
    assert!(samples.iter().all(|s| s.1), "every sample read within its refresh period: {got:#?}");
    assert_eq!(got.len(), greetings.len() + samples.len(), "nothing else on standard output: {got:#?}");

    // What the supervisor's health monitor reads: every message moved, no fault.
    let [hello_source, hello_destination] = &c.hello;
    let [greetings_source, greetings_destination] = &c.greetings;
    assert_eq!(hello_source.status.read().messages, N);
    assert!(hello_destination.status.read().messages >= samples.len() as u64);
    assert_eq!((greetings_source.status.read().messages, greetings_destination.status.read().messages), (N, N));
    for end in [hello_source, hello_destination, greetings_source, greetings_destination] {
        let status = end.status.read();
        assert!(Fault::ALL.iter().all(|f| status.count(*f) == 0), "{} {:?}: {status:?}", end.entry.name, end.entry.direction);
    }
}

#[test]
fn a_stop_signal_ends_both_partitions_with_exit_code_0() {
    let c = channels(HELLO_SIZE);
    let mut destination = start(DESTINATION, "hello-destination", &[&c.hello[1], &c.greetings[1]], &[]);
    let source = start(SOURCE, "hello-source", &[&c.hello[0], &c.greetings[0]], &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    destination.wait_for_line(deadline, |l| l == "greetings message=\"greeting 2\"");
    // SIGTERM, as the supervisor stops a partition. The destination's receiving process waits on an empty queue
    // without a timeout when it comes.
    for p in [&destination, &source] {
        partita_os::process::send_signal(p.child.id() as i32, libc::SIGTERM).unwrap();
    }
    let stop_deadline = Instant::now() + Duration::from_secs(5);
    for (what, p) in [("source", source), ("destination", destination)] {
        let (status, _, stderr) = p.wait(stop_deadline);
        assert_eq!(status.code(), Some(0), "{what}: {status}\n{stderr}");
        assert!(stderr.contains("stop signal"), "{what} says why it exits: {stderr}");
    }
}

#[test]
fn a_partition_asking_for_another_size_than_its_channel_has_is_told_what_to_fix() {
    // The source and destination declare 16 bytes for `hello`; this system gives 32.
    let c = channels(32);
    let destination = start(DESTINATION, "hello-destination", &[&c.hello[1], &c.greetings[1]], &["--count", "1"]);
    let (status, stdout, stderr) = destination.wait(Instant::now() + Duration::from_secs(20));
    assert!(!status.success(), "{status}");
    assert!(stdout.is_empty(), "{stdout:?}");
    assert!(stderr.contains("hello-destination: CREATE_SAMPLING_PORT \"hello\": the partition asks for a maximum message size of 16 bytes, its channel has 32 bytes"), "{stderr}");
    assert_eq!(c.hello[1].status.read().messages, 0);
}
