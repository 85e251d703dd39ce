//! The C API from C: `examples/c/hello.c` compiled by the system's C compiler against `include/partita_ports.h`
//! and the static library, run as partitions' processes, each given only its own ports' descriptors and
//! `PARTITA_PORTS`, as the supervisor gives them: the test plays the supervisor (and, once, a hostile source).
use partita_env::ports::{format_ports, PORTS};
use partita_os::shm::Mapping;
use partita_ports::{create_status, layout, ChannelMemory, Direction, Fault, PortEnd, PortEntry, PortKind, QueuingSource, SamplingSource, Timeout};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const INCLUDE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/include");
const HELLO_C: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/c/hello.c");
/// The libraries every Rust static library needs beside the C library.
const SYSTEM_LIBRARIES: [&str; 3] = ["-lpthread", "-ldl", "-lm"];

/// The geometry hello.c expects: messages of at most 32 bytes; `hello` valid for 2 s (far more than a read
/// takes, even on a loaded machine); `greetings` 4 deep, so that a source sending more waits for room.
const MAX_MESSAGE: u32 = 32;
const HELLO_REFRESH: Duration = Duration::from_secs(2);
const GREETINGS_DEPTH: u64 = 4;

/// Descriptors are made inheritable only while one child is spawned, and every child of this test process is
/// spawned under this lock (the compilers too), so that no child inherits a port that is not its own.
static SPAWNING: Mutex<()> = Mutex::new(());

fn spawning() -> std::sync::MutexGuard<'static, ()> {
    SPAWNING.lock().unwrap_or_else(|p| p.into_inner())
}

/// The static library cargo built for this test. The test depends on the crate, which cargo builds with all its
/// crate types into the profile's `deps` (`libpartita_ports_c-<hash>.a`, beside the rlib this test links); a
/// `cargo build -p partita-ports-c` also copies it to the profile's directory. The newest of those is this
/// build's.
fn static_library() -> PathBuf {
    let test = std::env::current_exe().expect("the test binary's path");
    let deps = test.parent().expect("the test binary is in <target>/<profile>/deps");
    let profile = deps.parent().expect("the test binary is in <target>/<profile>/deps");
    let in_deps = std::fs::read_dir(deps).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libpartita_ports_c-") && n.ends_with(".a"))
    });
    let newest = in_deps
        .chain(Some(profile.join("libpartita_ports_c.a")).filter(|p| p.is_file()))
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    newest.unwrap_or_else(|| panic!("no libpartita_ports_c*.a in {} or {}: cargo builds it with the crate (crate-type staticlib)", deps.display(), profile.display()))
}

/// Runs a C or C++ compiler; a missing compiler is a failure that says what to install, never a skip.
fn compile(command: &mut Command, package: &str) {
    let compiler = command.get_program().to_string_lossy().into_owned();
    let _one_at_a_time = spawning();
    let output = command.stdin(Stdio::null()).output().unwrap_or_else(|e| {
        panic!("cannot run `{compiler}` ({e}): this test builds C programs against include/partita_ports.h; install a compiler (Debian: apt-get install {package})")
    });
    assert!(output.status.success(), "`{compiler}` failed ({}):\n{}", output.status, String::from_utf8_lossy(&output.stderr));
}

/// hello.c, built once per test process: C99, every warning an error, so that the header stays clean C.
fn hello() -> &'static Path {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let program = Path::new(env!("CARGO_TARGET_TMPDIR")).join("partita-ports-c-hello");
        // Built beside its final name and renamed, so that another run of this test never executes half a file.
        let building = program.with_extension(std::process::id().to_string());
        compile(Command::new("cc").args(["-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-I", INCLUDE, HELLO_C]).arg(static_library()).args(SYSTEM_LIBRARIES).arg("-o").arg(&building), "gcc");
        std::fs::rename(&building, &program).unwrap();
        program
    })
}

/// One end of a channel as the supervisor holds it: the descriptors a partition gets, and the status it reads.
type End = PortEnd;

fn end(name: &str, memory: &ChannelMemory, direction: Direction) -> End {
    let depth_or_refresh = match memory.kind {
        PortKind::Sampling => HELLO_REFRESH.as_nanos() as u64,
        PortKind::Queuing => GREETINGS_DEPTH,
    };
    memory.end(name, direction, depth_or_refresh).unwrap()
}

/// hello.c's two channels: `hello` (sampling) and `greetings` (queuing).
struct Channels {
    hello: ChannelMemory,
    greetings: ChannelMemory,
}

fn channels() -> Channels {
    Channels {
        hello: ChannelMemory::create("hello", PortKind::Sampling, MAX_MESSAGE, 1).unwrap(),
        greetings: ChannelMemory::create("greetings", PortKind::Queuing, MAX_MESSAGE, GREETINGS_DEPTH).unwrap(),
    }
}

fn set_inheritable(ends: &[&End], inheritable: bool) {
    for e in ends {
        e.set_inheritable(inheritable).unwrap();
    }
}

/// A C partition's process, its standard output and error collected as it runs.
struct Partition {
    child: Child,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

fn collect(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Starts hello.c with `args`, given `ends` (only those: `PARTITA_PORTS` names them, and no other descriptor of
/// this process is inheritable while it starts).
fn start(ends: &[&End], args: &[&str]) -> Partition {
    let program = hello();
    let entries: Vec<PortEntry> = ends.iter().map(|e| e.entry.clone()).collect();
    let mut child = {
        let _one_at_a_time = spawning();
        set_inheritable(ends, true);
        let child = Command::new(program).args(args).env(PORTS, format_ports(&entries)).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        set_inheritable(ends, false);
        child.unwrap()
    };
    let stdout = collect(child.stdout.take().unwrap());
    let stderr = collect(child.stderr.take().unwrap());
    Partition { child, stdout, stderr }
}

impl Partition {
    /// Waits for the process to end (killed at `deadline`, then a failure); returns how it ended, its standard
    /// output line by line and its standard error.
    fn finish(mut self, deadline: Instant) -> (ExitStatus, Vec<String>, String) {
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("hello.c still running at the deadline; output so far:\n{}\n{}", self.stdout.join().unwrap(), self.stderr.join().unwrap());
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let stdout = self.stdout.join().unwrap().lines().map(str::to_string).collect();
        (status, stdout, self.stderr.join().unwrap())
    }
}

/// A `sampling message="hello N" valid=V` line: N and whether it was valid.
fn hello_line(line: &str) -> Option<(u64, bool)> {
    let rest = line.strip_prefix("sampling message=\"hello ")?;
    let (counter, valid) = rest.split_once("\" valid=")?;
    Some((counter.parse().ok()?, valid == "1"))
}

#[test]
fn a_c_destination_gets_every_message_of_a_c_source_in_order() {
    const N: u64 = 20;
    let c = channels();
    let (hello_source, hello_destination) = (end("hello", &c.hello, Direction::Source), end("hello", &c.hello, Direction::Destination));
    let (greetings_source, greetings_destination) = (end("greetings", &c.greetings, Direction::Source), end("greetings", &c.greetings, Direction::Destination));
    let count = N.to_string();
    // The destination first: it waits on the empty queue. The source sends 20 into a queue of 4, so it waits for
    // room too.
    let destination = start(&[&hello_destination, &greetings_destination], &["destination", &count]);
    let source = start(&[&hello_source, &greetings_source], &["source", &count]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let (source_status, sent, source_errors) = source.finish(deadline);
    let (destination_status, got, destination_errors) = destination.finish(deadline);
    assert_eq!(source_status.code(), Some(0), "source: {source_status}\n{source_errors}");
    assert_eq!(destination_status.code(), Some(0), "destination: {destination_status}\n{destination_errors}");
    assert_eq!(sent, (1..=N).map(|n| format!("sent counter={n}")).collect::<Vec<_>>());

    let greetings: Vec<&str> = got.iter().filter_map(|l| l.strip_prefix("queuing message=")).collect();
    assert_eq!(greetings, (1..=N).map(|n| format!("\"greeting {n}\"")).collect::<Vec<_>>(), "every greeting once, in order: {got:#?}");
    let samples: Vec<(u64, bool)> = got.iter().filter_map(|l| hello_line(l)).collect();
    assert!(samples.windows(2).all(|w| w[0].0 < w[1].0), "new sampling messages only, in order: {got:#?}");
    assert_eq!(samples.last().map(|s| s.0), Some(N), "the last sampling message read is the last written: {got:#?}");
    assert!(samples.iter().all(|s| s.1), "every sampling message read within its refresh period: {got:#?}");
    assert_eq!(got.len(), greetings.len() + samples.len(), "nothing else on standard output: {got:#?}");

    // What the supervisor's health monitor reads: every message moved, no fault on either side.
    assert_eq!(hello_source.status.read().messages, N);
    assert!(hello_destination.status.read().messages >= samples.len() as u64);
    assert_eq!((greetings_source.status.read().messages, greetings_destination.status.read().messages), (N, N));
    for end in [&hello_source, &hello_destination, &greetings_source, &greetings_destination] {
        let status = end.status.read();
        assert!(Fault::ALL.iter().all(|f| status.count(*f) == 0), "{} {:?}: {status:?}", end.entry.name, end.entry.direction);
    }
}

#[test]
fn a_c_destination_reports_a_hostile_rust_source_s_lengths_and_goes_on() {
    let c = channels();
    // The source partition is this process, on partita-ports, with write access to its channels' memory as any
    // source has: it writes honest messages, then garbles their lengths.
    let mut hello = SamplingSource::open("hello", MAX_MESSAGE, c.hello.source(create_status("hello").unwrap()).unwrap()).unwrap();
    let mut greetings = QueuingSource::open("greetings", MAX_MESSAGE, GREETINGS_DEPTH, c.greetings.source(create_status("greetings").unwrap()).unwrap()).unwrap();
    let garble_hello = Mapping::map(&c.hello.data, true).unwrap();
    let garble_greetings = Mapping::map(&c.greetings.data, true).unwrap();
    hello.write(b"hello 1").unwrap();
    // The first message is in slot 1 of 2: a length beyond any buffer.
    garble_hello.store32(layout::HEADER + layout::sampling_slot(MAX_MESSAGE) + layout::S_LEN, u32::MAX, Ordering::Release);
    for n in 1..=3 {
        greetings.send(format!("greeting {n}").as_bytes(), Timeout::Immediate).unwrap();
    }
    // The second greeting (slot 1): a gigabyte.
    garble_greetings.store32(layout::HEADER + layout::queuing_slot(MAX_MESSAGE) + layout::Q_LEN, 1 << 30, Ordering::Release);

    let hello_destination = end("hello", &c.hello, Direction::Destination);
    let greetings_destination = end("greetings", &c.greetings, Direction::Destination);
    let destination = start(&[&hello_destination, &greetings_destination], &["destination", "3"]);
    let (status, got, errors) = destination.finish(Instant::now() + Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "the C program survives and goes on: {status}\n{errors}\n{got:#?}");
    assert_eq!(
        got,
        [
            "queuing message=\"greeting 1\"",
            "sampling error=PARTITA_ERR_TOO_LARGE: a message of 4294967295 bytes does not fit port \"hello\" (at most 32)",
            "queuing error=PARTITA_ERR_TOO_LARGE: a message of 1073741824 bytes does not fit port \"greetings\" (at most 32)",
            "queuing message=\"greeting 3\"",
        ],
        "{errors}"
    );
    // Counted where the health monitor reads them: each sampling read of the garbled message (one per greeting),
    // the one dropped greeting.
    let (hello_seen, greetings_seen) = (hello_destination.status.read(), greetings_destination.status.read());
    assert_eq!((hello_seen.count(Fault::TooLarge), hello_seen.messages), (3, 0));
    assert_eq!((greetings_seen.count(Fault::TooLarge), greetings_seen.messages), (1, 2));
}

#[test]
fn a_c_program_given_no_ports_is_told_which_port_is_missing() {
    let destination = start(&[], &["destination"]);
    let (status, got, errors) = destination.finish(Instant::now() + Duration::from_secs(30));
    assert_eq!(status.code(), Some(1), "{status}");
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(
        errors.trim_end(),
        "hello: open the sampling port \"hello\": PARTITA_ERR_NO_SUCH_PORT (no port of this name was given to this partition): no port \"hello\" was given to this partition (its ports: none); add a channel with this port to the system file"
    );
}

#[test]
fn the_header_declares_the_functions_with_c_linkage_for_cpp() {
    // Without `extern "C"` in the header, C++ would look for mangled names and this program would not link.
    let source = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("partita-ports-c-{}.cpp", std::process::id()));
    let program = source.with_extension("");
    let mut file = std::fs::File::create(&source).unwrap();
    writeln!(file, "#include \"partita_ports.h\"\n#include <cstring>\nint main() {{ return std::strcmp(partita_ports_strerror(PARTITA_ERR_FULL), \"the queue is full\") == 0 && partita_ports_open() == PARTITA_OK ? 0 : 1; }}").unwrap();
    drop(file);
    compile(Command::new("c++").args(["-std=c++11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-I", INCLUDE]).arg(&source).arg(static_library()).args(SYSTEM_LIBRARIES).arg("-o").arg(&program), "g++");
    let status = {
        let _one_at_a_time = spawning();
        Command::new(&program).env_remove(PORTS).status().unwrap()
    };
    let _ = std::fs::remove_file(&source);
    let _ = std::fs::remove_file(&program);
    assert!(status.success(), "{status}");
}
