//! `partita bench ports`: partita's ARINC 653 ports (`partita-ports`) against their floors, every ratio taken
//! in one run on one machine (issue 34).
//!
//! | row | writer | reader | compared with |
//! |---|---|---|---|
//! | sampling, polled | `SamplingSource::write` | polls `SamplingDestination::read` until the sequence changes | iceoryx2 publish → a subscriber polling `receive` |
//! | queuing, blocking | `QueuingSource::send` | `QueuingDestination::receive(Timeout::Infinite)` | iceoryx2 publish + notify → a listener's wait, then `receive`; a futex on shared memory (store, wake → wait) |
//! | copy vs in place | `write`/`send` of a message made in the writer's buffer | as above | `write_with`/`send_with`, the message made in the channel |
//! | throughput | `send` (and `send_with`) with `Timeout::Infinite`, as fast as the queue drains | `receive(Timeout::Infinite)` | the same channel at each size |
//!
//! # Method
//!
//! - **Two processes**, the honest case for ports between partitions: separate address spaces sharing only the
//!   channels' memory and its futexes. The reader is a thread of this process pinned to [`READER_CPU`]; the
//!   writer is `partita bench ports-peer`, started afresh for every row (this binary re-executed, as `bench rr`
//!   starts its server) and pinned to [`WRITER_CPU`]. This process creates the channels' memory, as the
//!   supervisor does, and hands the writer its ends as inherited descriptors: close-on-exec cleared, their
//!   numbers on the writer's command line ([`peer::EndNumbers`]). Both follow the measurement setup
//!   (SCHED_FIFO 50 and locked memory by default), as `bench rr`'s client and server do.
//! - **Latency is one-way**, from the writer's CLOCK_MONOTONIC timestamp, taken just before it makes the message
//!   and writes or sends it, to the reader's CLOCK_MONOTONIC when its read or receive returns it. Both
//!   processes read the same clock (the host's CLOCK_MONOTONIC, which every process partition shares), so the
//!   difference needs no correction. The timestamp and the message's number travel in the message's first
//!   [`HEADER_BYTES`] bytes.
//! - **Ping-pong**: the writer sends the next message when the reader has echoed the last one back over a
//!   second channel of the same kind (a sampling port, a queuing port, an iceoryx2 service, the futex's second
//!   word), so every message finds its reader waiting and none is overwritten unread. Only the forward way is
//!   measured; the echo only paces.
//! - **A message is made each time**: the writer writes every byte of it (header, then the number's low byte in
//!   every payload byte), into its own buffer that `write`/`send` then copy into the channel, or in place in
//!   the channel's slot with `write_with`/`send_with`. The timestamp is taken before the message is made, so
//!   both ways include making it and the copy is the whole difference.
//! - **Throughput**: one queuing channel whose slots take [`PortsConfig::largest`] bytes (64 KiB by default),
//!   [`PortsConfig::depth`] deep; after the warm-up messages the writer sends with `Timeout::Infinite` for
//!   [`PortsConfig::seconds`], then a message of no bytes, which ends the reader's count. The reader's clock
//!   runs from its last warm-up message to that end: messages and payload bytes per second (MB = 10⁶ bytes).
//! - Statistics from the lab's HdrHistogram ([`partita_lab::stats::Stats`]); the warm-up messages are sent,
//!   echoed and discarded; every run records what the host did meanwhile ([`partita_lab::machine::Watch`]).
//! - **Repeats** (`--repeat`, 3 by default), interleaved as every benchmark of the lab does
//!   ([`partita_lab::repeat`]): every latency row once, then every one again, then the throughput rows alike. A
//!   row's figures are the medians of its runs' figures, with their min–max; a comparison is the ratio of the
//!   medians, with the range of the ratios of the runs made in the same round. On these VMs the blocking rows'
//!   tails come in bursts (a second mode of 11–20 µs wake-ups, shared by the bare futex), so that one run's
//!   p99 ratio moved between 0.5 and 4.7 from run to run: a single run judges no tail.
//! - **Short polling rows.** In a polling row both CPUs spin under SCHED_FIFO, and the kernel keeps
//!   real-time tasks to `sched_rt_runtime_us` of every `sched_rt_period_us` (0.95 s of each second by default):
//!   a row spinning for longer shows the pause as outliers of some 50 ms (seen with `--count 3000000`). At the
//!   defaults a polling row takes some 10 ms (64 B) to 250 ms (64 KiB).
use crate::error::BenchError;
use partita_apps::size::format_size;
use partita_lab::machine::{Disturbance, Watch};
use partita_lab::repeat::{interleaved, Spread};
use partita_lab::setup::Setup;
use partita_lab::stats::Stats;
use partita_ports::{create_status, layout, ChannelMemory, EndFds, PortKind};
use serde::Serialize;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

mod iceoryx;
pub mod peer;
mod reader;
pub mod report;

/// The CPU the writer is pinned to.
pub const WRITER_CPU: usize = 0;
/// The CPU the reader is pinned to.
pub const READER_CPU: usize = 1;
/// Every message starts with the writer's timestamp (CLOCK_MONOTONIC ns) and its number, u64 each.
pub const HEADER_BYTES: usize = 16;
/// An echo carries the number of the message it answers.
pub const ECHO_BYTES: usize = 8;
/// The queue of a latency row: a ping-pong never holds more than one message.
pub const LATENCY_DEPTH: u64 = 1;
/// The throughput channel's depth unless `--depth` says otherwise.
pub const DEFAULT_DEPTH: u64 = 32;
/// A sampling channel's refresh period here: every read is valid (validity is not what is measured).
pub(crate) const REFRESH: Duration = Duration::from_secs(1);

/// What carries a row's messages and how its reader waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Path {
    /// A partita-ports sampling channel; the reader polls `read` until the sequence changes.
    SamplingPoll,
    /// iceoryx2 publish-subscribe; the subscriber polls `receive`.
    Iceoryx2Poll,
    /// A partita-ports queuing channel; the reader blocks in `receive(Timeout::Infinite)`.
    QueuingBlock,
    /// iceoryx2 publish-subscribe with an event service: publish, notify; the reader waits on its listener,
    /// then receives.
    Iceoryx2Event,
    /// A futex on shared memory: the writer copies the message, stores a counter and wakes; the reader waits on
    /// the counter, then copies the message out.
    Futex,
    /// A partita-ports queuing channel flooded for a time (throughput).
    QueuingFlood,
}

impl Path {
    pub const ALL: [Path; 6] = [Path::SamplingPoll, Path::Iceoryx2Poll, Path::QueuingBlock, Path::Iceoryx2Event, Path::Futex, Path::QueuingFlood];

    pub fn name(self) -> &'static str {
        match self {
            Path::SamplingPoll => "sampling-poll",
            Path::Iceoryx2Poll => "iceoryx2-poll",
            Path::QueuingBlock => "queuing-block",
            Path::Iceoryx2Event => "iceoryx2-event",
            Path::Futex => "futex",
            Path::QueuingFlood => "queuing-flood",
        }
    }
}

impl std::str::FromStr for Path {
    type Err = String;
    fn from_str(s: &str) -> Result<Path, String> {
        Path::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            format!("unknown path {s:?} (known: {})", Path::ALL.map(Path::name).join(", "))
        })
    }
}

/// How the writer puts a message into the channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Write {
    /// Made in the writer's own buffer, then copied in: `write`, `send`, iceoryx2's `write_from_slice`.
    Copy,
    /// Made in the channel's slot: `write_with`, `send_with`.
    InPlace,
}

impl Write {
    pub fn name(self) -> &'static str {
        match self {
            Write::Copy => "copy",
            Write::InPlace => "in-place",
        }
    }
}

impl std::str::FromStr for Write {
    type Err = String;
    fn from_str(s: &str) -> Result<Write, String> {
        [Write::Copy, Write::InPlace].into_iter().find(|w| w.name() == s).ok_or_else(|| format!("unknown write {s:?} (known: copy, in-place)"))
    }
}

/// One row: what carries the messages, how they are written, and how large they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Scenario {
    pub path: Path,
    pub write: Write,
    /// Bytes per message.
    pub size: usize,
    /// The largest message its channel takes (the size of its slots).
    pub channel_max: usize,
    /// A queuing channel's depth (1 for the other paths).
    pub depth: u64,
}

impl Scenario {
    /// A name unique within a run, for files and errors: `sampling-poll-copy-64`.
    pub fn key(&self) -> String {
        format!("{}-{}-{}", self.path.name(), self.write.name(), format_size(self.size))
    }

    /// What the row measures, as the tables say it.
    pub fn label(&self) -> &'static str {
        match (self.path, self.write) {
            (Path::SamplingPoll, Write::Copy) => "ports sampling: write → polling read",
            (Path::SamplingPoll, Write::InPlace) => "ports sampling: write_with (in place) → polling read",
            (Path::QueuingBlock, Write::Copy) => "ports queuing: send → blocking receive",
            (Path::QueuingBlock, Write::InPlace) => "ports queuing: send_with (in place) → blocking receive",
            (Path::Iceoryx2Poll, _) => "iceoryx2: publish → polling receive",
            (Path::Iceoryx2Event, _) => "iceoryx2: publish + notify → listener wait, receive",
            (Path::Futex, _) => "futex on shared memory: copy, store + wake → wait, copy",
            (Path::QueuingFlood, Write::Copy) => "ports queuing: send → blocking receive",
            (Path::QueuingFlood, Write::InPlace) => "ports queuing: send_with (in place) → blocking receive",
        }
    }

    pub fn is_throughput(&self) -> bool {
        self.path == Path::QueuingFlood
    }
}

/// Everything `partita bench ports` was asked for.
#[derive(Debug, Clone, Serialize)]
pub struct PortsConfig {
    /// Measured messages per latency row.
    pub count: u64,
    /// Messages before the measured ones, discarded (latency rows), or before the timed flood (throughput).
    pub warmup: u64,
    /// How long each throughput row floods its channel.
    pub seconds: f64,
    /// Message sizes of the throughput rows; the largest is the throughput channel's slot size and the size
    /// copy and in-place writes are compared at.
    pub sizes: Vec<usize>,
    /// Message size of the latency rows compared with iceoryx2 and the futex.
    pub latency_size: usize,
    /// Depth of the throughput channel.
    pub depth: u64,
    /// Also write every latency sample.
    pub raw: bool,
    pub out: PathBuf,
    #[serde(skip)]
    pub setup: Setup,
    /// Runs of every row, the rows interleaved; tables give the medians over the runs.
    pub repeat: u32,
    pub writer_cpu: usize,
    pub reader_cpu: usize,
}

impl PortsConfig {
    /// Checks the arguments against each other and against the ports' limits.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.count == 0 {
            return Err(BenchError::ZeroCount);
        }
        if self.repeat == 0 {
            return Err(BenchError::BadRepeat);
        }
        if !(self.seconds > 0.0 && self.seconds.is_finite()) {
            return Err(BenchError::BadSeconds(self.seconds));
        }
        if self.sizes.is_empty() {
            return Err(BenchError::NoSize);
        }
        for &size in self.sizes.iter().chain([&self.latency_size]) {
            if size < HEADER_BYTES {
                return Err(BenchError::BadSize {
                    text: size.to_string(),
                    reason: format!("a message carries the writer's timestamp and its number: at least {HEADER_BYTES} bytes"),
                });
            }
            if size > layout::MAX_MESSAGE as usize {
                return Err(BenchError::SizeTooLarge { transport: "partita-ports".into(), size, max: layout::MAX_MESSAGE as usize });
            }
        }
        if !(1..=layout::MAX_DEPTH).contains(&self.depth) {
            return Err(BenchError::BadDepth { depth: self.depth, reason: format!("give a queue depth from 1 to {}", layout::MAX_DEPTH) });
        }
        let bytes = layout::queuing_bytes(self.largest() as u32, self.depth) as u64;
        if bytes > layout::MAX_CHANNEL_BYTES {
            return Err(BenchError::BadDepth {
                depth: self.depth,
                reason: format!(
                    "{} slots of {} take {bytes} bytes, more than a channel may ({} bytes); give a smaller depth or smaller sizes",
                    self.depth,
                    format_size(self.largest()),
                    layout::MAX_CHANNEL_BYTES
                ),
            });
        }
        Ok(())
    }

    /// The largest of the throughput sizes.
    pub fn largest(&self) -> usize {
        self.sizes.iter().copied().max().unwrap_or(self.latency_size)
    }

    /// The latency rows in the order they run: the compared ones next to each other, then copy against in
    /// place at the largest size (a row already measured at that size is not measured twice).
    pub fn latency_scenarios(&self) -> Vec<Scenario> {
        let at = |path, write, size: usize| {
            let depth = if path == Path::QueuingBlock { LATENCY_DEPTH } else { 1 };
            Scenario { path, write, size, channel_max: size, depth }
        };
        let (small, large) = (self.latency_size, self.largest());
        let mut rows = vec![
            at(Path::SamplingPoll, Write::Copy, small),
            at(Path::Iceoryx2Poll, Write::Copy, small),
            at(Path::QueuingBlock, Write::Copy, small),
            at(Path::Iceoryx2Event, Write::Copy, small),
            at(Path::Futex, Write::Copy, small),
        ];
        for s in [
            at(Path::SamplingPoll, Write::Copy, large),
            at(Path::SamplingPoll, Write::InPlace, large),
            at(Path::QueuingBlock, Write::Copy, large),
            at(Path::QueuingBlock, Write::InPlace, large),
        ] {
            if !rows.contains(&s) {
                rows.push(s);
            }
        }
        rows
    }

    /// The throughput rows: every size written by copy, then the largest written in place.
    pub fn throughput_scenarios(&self) -> Vec<Scenario> {
        let channel_max = self.largest();
        let at = |write, size| Scenario { path: Path::QueuingFlood, write, size, channel_max, depth: self.depth };
        let mut sizes = self.sizes.clone();
        sizes.dedup();
        let mut rows: Vec<Scenario> = sizes.into_iter().map(|s| at(Write::Copy, s)).collect();
        rows.push(at(Write::InPlace, channel_max));
        rows
    }
}

/// Makes message number `seq` as a writer makes a new message: every byte written, the header (`stamp_ns`,
/// `seq`) first, then `seq`'s low byte in every payload byte.
pub fn make_message(buf: &mut [u8], stamp_ns: u64, seq: u64) {
    buf[HEADER_BYTES..].fill(seq as u8);
    buf[..8].copy_from_slice(&stamp_ns.to_le_bytes());
    buf[8..HEADER_BYTES].copy_from_slice(&seq.to_le_bytes());
}

/// The writer's timestamp and the message's number, from a message's first bytes.
pub fn message_header(buf: &[u8]) -> (u64, u64) {
    let word = |at: usize| u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
    (word(0), word(8))
}

/// How a spinning loop gives up: when the run is stopped (either of two flags: the stop signals', and the
/// watching thread's when it gives up on the row), or when the other end has not answered by a deadline. It
/// looks only every [`Patience::EVERY`] spins, so that a spin costs a compare.
pub(crate) struct Patience<'a> {
    stops: [&'a AtomicBool; 2],
    deadline_ns: u64,
    limit: Option<Duration>,
    spins: u32,
    measurement: &'a str,
}

impl<'a> Patience<'a> {
    const EVERY: u32 = 1024;

    pub(crate) fn new(stops: [&'a AtomicBool; 2], limit: Option<Duration>, measurement: &'a str) -> Patience<'a> {
        let deadline_ns = limit.map_or(u64::MAX, |d| partita_os::clock::monotonic_ns().saturating_add(d.as_nanos() as u64));
        Patience { stops, deadline_ns, limit, spins: 0, measurement }
    }

    pub(crate) fn spin(&mut self) -> Result<(), BenchError> {
        self.spins = self.spins.wrapping_add(1);
        if self.spins % Self::EVERY == 0 {
            if self.stops.iter().any(|s| s.load(Ordering::Relaxed)) {
                return Err(BenchError::Interrupted);
            }
            if partita_os::clock::monotonic_ns() > self.deadline_ns {
                let seconds = self.limit.map_or(0.0, |d| d.as_secs_f64());
                return Err(BenchError::Stalled { measurement: self.measurement.to_string(), seconds });
            }
        }
        std::hint::spin_loop();
        Ok(())
    }
}

/// What the reader measured in one row.
#[derive(Debug)]
pub(crate) enum Measured {
    /// `(message number, one-way ns)` of every message, warm-up included.
    Latency(Vec<(u64, u64)>),
    /// Messages and payload bytes received after the warm-up, and over how long.
    Throughput { messages: u64, bytes: u64, seconds: f64 },
}

/// How to start the writer: the `partita` executable and the arguments that lead to `bench ports-peer`.
#[derive(Debug, Clone)]
pub struct PeerLauncher {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// One run of a latency row.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRun {
    /// Which of the row's runs this is, from 1.
    pub repeat: u32,
    pub started: String,
    pub finished: String,
    /// One-way latency statistics, µs.
    pub stats: Option<Stats>,
    /// Every measured message's `[number, one-way ns]` (with `--raw`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples_ns: Option<Vec<(u64, u64)>>,
    pub disturbance: Disturbance,
}

/// A latency row's figures over its runs: for each, the median of the runs' values with their min and max, µs.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyFigures {
    /// Runs that produced figures.
    pub runs: usize,
    /// Measured messages over all runs.
    pub samples: u64,
    pub min_us: Option<Spread>,
    pub mean_us: Option<Spread>,
    pub p50_us: Option<Spread>,
    pub p90_us: Option<Spread>,
    pub p99_us: Option<Spread>,
    pub p99_9_us: Option<Spread>,
    pub max_us: Option<Spread>,
    /// Whether the runs' p50s spread more than [`partita_lab::repeat::FLAG_SPREAD`].
    pub flagged: bool,
    /// The most the host disturbed any of the runs.
    pub disturbance: Option<Disturbance>,
}

/// One latency row: its runs, and its figures over them.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    pub key: String,
    pub label: String,
    pub scenario: Scenario,
    pub warmup: u64,
    pub count: u64,
    pub figures: LatencyFigures,
    /// In the order they were made.
    pub runs: Vec<LatencyRun>,
}

impl LatencyRow {
    pub fn new(sc: Scenario, warmup: u64, count: u64, runs: Vec<LatencyRun>) -> LatencyRow {
        let stats: Vec<&Stats> = runs.iter().filter_map(|r| r.stats.as_ref()).collect();
        let fig = |f: fn(&Stats) -> f64| Spread::of(&stats.iter().map(|s| f(s)).collect::<Vec<_>>());
        let p50_us = fig(|s| s.p50_us);
        let figures = LatencyFigures {
            runs: stats.len(),
            samples: stats.iter().map(|s| s.count).sum(),
            min_us: fig(|s| s.min_us),
            mean_us: fig(|s| s.mean_us),
            p50_us,
            p90_us: fig(|s| s.p90_us),
            p99_us: fig(|s| s.p99_us),
            p99_9_us: fig(|s| s.p99_9_us),
            max_us: fig(|s| s.max_us),
            flagged: p50_us.is_some_and(|p| p.flagged()),
            disturbance: Disturbance::worst(&runs.iter().map(|r| r.disturbance).collect::<Vec<_>>()),
        };
        LatencyRow { key: sc.key(), label: sc.label().to_string(), scenario: sc, warmup, count, figures, runs }
    }
}

/// One run of a throughput row.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputRun {
    /// Which of the row's runs this is, from 1.
    pub repeat: u32,
    /// Messages received after the warm-up, until the writer's end.
    pub messages: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// The reader's time from its last warm-up message to the writer's end.
    pub seconds: f64,
    pub messages_per_s: f64,
    /// 10⁶ payload bytes per second.
    pub mb_per_s: f64,
    pub started: String,
    pub finished: String,
    pub disturbance: Disturbance,
}

/// One throughput row: its runs, and the medians of their rates with their min and max.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputRow {
    pub key: String,
    pub label: String,
    pub scenario: Scenario,
    pub warmup: u64,
    pub messages_per_s: Option<Spread>,
    pub mb_per_s: Option<Spread>,
    /// Whether the runs' rates spread more than [`partita_lab::repeat::FLAG_SPREAD`].
    pub flagged: bool,
    pub disturbance: Option<Disturbance>,
    pub runs: Vec<ThroughputRun>,
}

impl ThroughputRow {
    pub fn new(sc: Scenario, warmup: u64, runs: Vec<ThroughputRun>) -> ThroughputRow {
        let mb_per_s = Spread::of(&runs.iter().map(|r| r.mb_per_s).collect::<Vec<_>>());
        ThroughputRow {
            key: sc.key(),
            label: sc.label().to_string(),
            scenario: sc,
            warmup,
            messages_per_s: Spread::of(&runs.iter().map(|r| r.messages_per_s).collect::<Vec<_>>()),
            mb_per_s,
            flagged: mb_per_s.is_some_and(|m| m.flagged()),
            disturbance: Disturbance::worst(&runs.iter().map(|r| r.disturbance).collect::<Vec<_>>()),
            runs,
        }
    }
}

/// Runs every row `cfg.repeat` times, latency rows first, the rows of each kind interleaved (every row once,
/// then every row again), so that a change of the machine's speed during the run reaches the compared rows
/// alike; hands a line to `on_run` after each run.
pub fn run_all(
    cfg: &PortsConfig,
    launcher: &PeerLauncher,
    stop: &'static AtomicBool,
    mut on_run: impl FnMut(&str),
) -> Result<(Vec<LatencyRow>, Vec<ThroughputRow>), BenchError> {
    cfg.validate()?;
    let allowed = partita_os::sched::current_thread_cpus().unwrap_or_default();
    if !allowed.contains(&cfg.writer_cpu) || !allowed.contains(&cfg.reader_cpu) {
        return Err(BenchError::Cpus { writer: cfg.writer_cpu, reader: cfg.reader_cpu, allowed });
    }
    let run = std::process::id().to_string();
    let of = |repeat: u32| if cfg.repeat > 1 { format!(", run {repeat} of {}", cfg.repeat) } else { String::new() };
    let result = (|| {
        let scenarios = cfg.latency_scenarios();
        let mut runs: Vec<Vec<LatencyRun>> = vec![Vec::new(); scenarios.len()];
        for (repeat, i) in interleaved(scenarios.len(), cfg.repeat) {
            let sc = &scenarios[i];
            let started = partita_lab::machine::now_rfc3339();
            let watch = Watch::start();
            let Measured::Latency(all) = measure(sc, cfg.warmup + cfg.count, cfg, &run, launcher, stop)? else {
                unreachable!("a latency row measures latency")
            };
            let disturbance = watch.stop();
            let measured: Vec<(u64, u64)> = all.into_iter().filter(|&(seq, _)| seq >= cfg.warmup).collect();
            let ns: Vec<u64> = measured.iter().map(|&(_, ns)| ns).collect();
            let r = LatencyRun {
                repeat,
                started,
                finished: partita_lab::machine::now_rfc3339(),
                stats: Stats::from_ns(&ns),
                samples_ns: cfg.raw.then_some(measured),
                disturbance,
            };
            let figure = r.stats.as_ref().map_or("no sample".into(), |s| format!("p50 {:.3} µs, p99 {:.3} µs, max {:.3} µs", s.p50_us, s.p99_us, s.max_us));
            on_run(&format!("{} {}{}: {figure}", sc.label(), format_size(sc.size), of(repeat)));
            runs[i].push(r);
        }
        let latency = scenarios.into_iter().zip(runs).map(|(sc, runs)| LatencyRow::new(sc, cfg.warmup, cfg.count, runs)).collect();

        let scenarios = cfg.throughput_scenarios();
        let mut runs: Vec<Vec<ThroughputRun>> = vec![Vec::new(); scenarios.len()];
        for (repeat, i) in interleaved(scenarios.len(), cfg.repeat) {
            let sc = &scenarios[i];
            let started = partita_lab::machine::now_rfc3339();
            let watch = Watch::start();
            let Measured::Throughput { messages, bytes, seconds } = measure(sc, cfg.warmup, cfg, &run, launcher, stop)? else {
                unreachable!("a throughput row measures throughput")
            };
            let per_s = |n: f64| if seconds > 0.0 { n / seconds } else { 0.0 };
            let r = ThroughputRun {
                repeat,
                messages,
                bytes,
                seconds,
                messages_per_s: per_s(messages as f64),
                mb_per_s: per_s(bytes as f64) / 1e6,
                started,
                finished: partita_lab::machine::now_rfc3339(),
                disturbance: watch.stop(),
            };
            on_run(&format!("{} {}, flooded{}: {:.0} messages/s, {:.1} MB/s", sc.label(), format_size(sc.size), of(repeat), r.messages_per_s, r.mb_per_s));
            runs[i].push(r);
        }
        let throughput = scenarios.into_iter().zip(runs).map(|(sc, runs)| ThroughputRow::new(sc, cfg.warmup, runs)).collect();
        Ok((latency, throughput))
    })();
    iceoryx::remove_leftovers(&run);
    result
}

/// What one row may take before it counts as stalled: generous, since a stall is a broken end, not a slow one.
fn limit(sc: &Scenario, total: u64, cfg: &PortsConfig) -> Duration {
    let base = Duration::from_secs(10) + Duration::from_millis(total);
    if sc.is_throughput() {
        base + Duration::from_secs_f64(cfg.seconds)
    } else {
        base
    }
}

/// What the reader thread says to the thread that started it.
enum FromReader {
    /// Its ends are open: the writer may start.
    Ready,
    Done(Result<Measured, BenchError>),
}

/// Measures one row: creates its channels, opens the reader's ends on a thread pinned to the reader's CPU,
/// starts the writer with its ends, and waits for the reader's result, the writer's failure, a stop or the
/// row's time limit.
fn measure(sc: &Scenario, total: u64, cfg: &PortsConfig, run: &str, launcher: &PeerLauncher, stop: &'static AtomicBool) -> Result<Measured, BenchError> {
    let key = sc.key();
    let (reader_ends, peer_ends) = prepare(sc, run)?;
    let limit = limit(sc, total, cfg);
    // Tells a spinning reader to give up (a blocked one cannot hear it; it is left behind on a failure, which
    // ends the command).
    let abandon = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let thread = {
        let (sc, abandon, thread_key, run) = (*sc, abandon.clone(), key.clone(), run.to_string());
        let (reader_cpu, warmup) = (cfg.reader_cpu, cfg.warmup);
        std::thread::Builder::new()
            .name("ports-reader".into())
            .spawn(move || {
                let result = (|| {
                    partita_os::sched::pin_current_thread(reader_cpu).map_err(|source| BenchError::Pin { cpu: reader_cpu, source })?;
                    let mut ends = reader::Reader::open(&sc, reader_ends, &run)?;
                    let _ = tx.send(FromReader::Ready);
                    let mut patience = Patience::new([stop, &abandon], Some(limit), &thread_key);
                    ends.run(&sc, total, warmup, &mut patience)
                })();
                let _ = tx.send(FromReader::Done(result));
            })
            .map_err(|e| BenchError::Peer { measurement: key.clone(), reason: format!("could not be measured: no reader thread: {e}") })?
    };
    let stalled = |abandon: &AtomicBool| {
        abandon.store(true, Ordering::Relaxed);
        BenchError::Stalled { measurement: key.clone(), seconds: limit.as_secs_f64() }
    };
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(FromReader::Ready) => {}
        Ok(FromReader::Done(r)) => return r.and(Err(BenchError::Peer { measurement: key.clone(), reason: "was never started: the reader ended first".into() })),
        Err(_) => return Err(stalled(&abandon)),
    }
    let peer_cfg = peer::PeerConfig {
        scenario: *sc,
        total,
        seconds: cfg.seconds,
        run: run.to_string(),
        forward: peer_ends.forward.as_ref().map(peer::EndNumbers::of),
        echo: peer_ends.echo.as_ref().map(peer::EndNumbers::of),
        shared: peer_ends.shared.as_ref().map(|fd| fd.as_raw_fd()),
        cpu: cfg.writer_cpu,
        fifo: cfg.setup.fifo_priority(),
    };
    // Before the writer starts: from then on the reader and the writer may spin on both CPUs.
    let _outranking = Outrank::measured(&cfg.setup);
    let mut writer = PeerProcess::spawn(launcher, &peer_cfg, peer_ends, &key)?;
    let started = Instant::now();
    let mut writer_ended: Option<Instant> = None;
    let measured = loop {
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(FromReader::Done(r)) => break r,
            Ok(FromReader::Ready) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(BenchError::Peer { measurement: key.clone(), reason: "ran, but the reader thread ended without a result".into() })
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if stop.load(Ordering::Relaxed) {
                    abandon.store(true, Ordering::Relaxed);
                    return Err(BenchError::Interrupted);
                }
                if let Some(status) = writer.exited() {
                    if !status.success() {
                        abandon.store(true, Ordering::Relaxed);
                        return Err(writer.failure(&key, &format!("ended with {status}")));
                    }
                    // Its last message is on its way; a reader still waiting after this long lost it.
                    if writer_ended.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(5) {
                        return Err(stalled(&abandon));
                    }
                }
                if started.elapsed() > limit {
                    return Err(stalled(&abandon));
                }
            }
        }
    };
    let _ = thread.join();
    let measured = measured?;
    writer.finish(&key)?;
    Ok(measured)
}

/// While it waits for a row, the thread that started it runs one SCHED_FIFO priority above the measured
/// threads: during a polling row the reader and the writer spin on both CPUs at the setup's priority, and a
/// thread of equal priority would not run until they end — neither to see a writer that failed nor, being the
/// process's main thread (the one the kernel hands a signal to while it waits), to run the stop signals'
/// handler. It wakes
/// every 250 ms and takes a few µs when it does: at most a sample or two of a row. Back to the setup's
/// priority when dropped, so that the next row's reader thread and writer inherit that one.
struct Outrank {
    priority: Option<u8>,
}

impl Outrank {
    fn measured(setup: &Setup) -> Outrank {
        // At the highest priority a measured process may take (89) there is no room below the plan executors'
        // 90: the thread then stays level with the measured ones.
        let priority = setup.fifo_priority().filter(|&p| p < partita_lab::setup::MAX_PRIORITY);
        if let Some(p) = priority {
            if partita_os::sched::set_current_thread_fifo(i32::from(p) + 1).is_err() {
                return Outrank { priority: None };
            }
        }
        Outrank { priority }
    }
}

impl Drop for Outrank {
    fn drop(&mut self) {
        if let Some(p) = self.priority {
            let _ = partita_os::sched::set_current_thread_fifo(i32::from(p));
        }
    }
}

/// The reader's ends of a row, as this process keeps them.
pub(crate) enum ReaderEnds {
    Sampling { forward: EndFds, echo: EndFds },
    Queuing { forward: EndFds, echo: Option<EndFds> },
    Futex(OwnedFd),
    Iceoryx2,
}

/// The writer's ends of a row, handed over to its process.
#[derive(Default)]
struct PeerEnds {
    forward: Option<EndFds>,
    echo: Option<EndFds>,
    shared: Option<OwnedFd>,
}

impl PeerEnds {
    fn fds(&self) -> Vec<&OwnedFd> {
        let ends = self.forward.iter().chain(self.echo.iter());
        let mut all: Vec<&OwnedFd> = ends.flat_map(|e| [Some(&e.data), Some(&e.status), e.ack.as_ref()]).flatten().collect();
        all.extend(self.shared.iter());
        all
    }
}

/// Bytes of the futex row's memory: the forward and echo words on lines of their own, then the message.
pub(crate) const FUTEX_FORWARD: usize = 0;
pub(crate) const FUTEX_ECHO: usize = 64;
pub(crate) const FUTEX_MESSAGE: usize = 128;

/// Creates a row's channels as the supervisor would (the memory, each end's status) and splits their ends
/// between the reader and the writer.
fn prepare(sc: &Scenario, run: &str) -> Result<(ReaderEnds, PeerEnds), BenchError> {
    let key = sc.key();
    let io = |what: &'static str| {
        let key = key.clone();
        move |source| BenchError::SharedMemory { measurement: key, what, source }
    };
    let name = |end: &str| format!("bench-ports-{run}-{}-{end}", sc.key());
    let status = |end: &str| create_status(&name(end)).map_err(io("create a port's status memory"));
    let channel = |end: &str, kind, max: usize, depth| ChannelMemory::create(&name(end), kind, max as u32, depth).map_err(io("create a channel's memory"));
    Ok(match sc.path {
        Path::SamplingPoll => {
            let forward = channel("forward", PortKind::Sampling, sc.channel_max, 1)?;
            let echo = channel("echo", PortKind::Sampling, ECHO_BYTES, 1)?;
            let reader = ReaderEnds::Sampling {
                forward: forward.destination(status("forward-destination")?).map_err(io("a destination's descriptors"))?,
                echo: echo.source(status("echo-source")?).map_err(io("a source's descriptors"))?,
            };
            let peer = PeerEnds {
                forward: Some(forward.source(status("forward-source")?).map_err(io("a source's descriptors"))?),
                echo: Some(echo.destination(status("echo-destination")?).map_err(io("a destination's descriptors"))?),
                shared: None,
            };
            (reader, peer)
        }
        Path::QueuingBlock | Path::QueuingFlood => {
            let forward = channel("forward", PortKind::Queuing, sc.channel_max, sc.depth)?;
            let echo = if sc.path == Path::QueuingBlock { Some(channel("echo", PortKind::Queuing, ECHO_BYTES, LATENCY_DEPTH)?) } else { None };
            let reader = ReaderEnds::Queuing {
                forward: forward.destination(status("forward-destination")?).map_err(io("a destination's descriptors"))?,
                echo: echo.as_ref().map(|e| e.source(status("echo-source")?).map_err(io("a source's descriptors"))).transpose()?,
            };
            let peer = PeerEnds {
                forward: Some(forward.source(status("forward-source")?).map_err(io("a source's descriptors"))?),
                echo: echo.as_ref().map(|e| e.destination(status("echo-destination")?).map_err(io("a destination's descriptors"))).transpose()?,
                shared: None,
            };
            (reader, peer)
        }
        Path::Futex => {
            let fd = partita_os::shm::create(&name("futex"), FUTEX_MESSAGE + sc.size).map_err(io("create the futex's memory"))?;
            let peer = PeerEnds { shared: Some(fd.try_clone().map_err(io("duplicate the futex's descriptor"))?), ..PeerEnds::default() };
            (ReaderEnds::Futex(fd), peer)
        }
        Path::Iceoryx2Poll | Path::Iceoryx2Event => (ReaderEnds::Iceoryx2, PeerEnds::default()),
    })
}

/// The writer's process: ended (by pid) and reaped when dropped, also on errors.
struct PeerProcess {
    child: Child,
    /// What it writes on stderr, read to its end by a thread (so that it never blocks on a full pipe).
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl PeerProcess {
    /// Starts the writer with `ends` inherited, then closes this process's copies of them.
    fn spawn(launcher: &PeerLauncher, cfg: &peer::PeerConfig, ends: PeerEnds, key: &str) -> Result<PeerProcess, BenchError> {
        let fail = |reason: String| BenchError::Peer { measurement: key.to_string(), reason };
        for fd in ends.fds() {
            partita_os::fd::set_inheritable(fd.as_raw_fd(), true).map_err(|e| fail(format!("could not be handed its descriptors: {e}")))?;
        }
        let mut child = Command::new(&launcher.program)
            .args(partita_lab::setup::child_args())
            .args(&launcher.args)
            .args(cfg.args())
            // Its stdin closes when this process goes away, however it goes: the writer then stops.
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("could not be started ({}): {e}", launcher.program.display())))?;
        // The child holds its own copies now.
        drop(ends);
        let stderr = child.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                text
            })
        });
        Ok(PeerProcess { child, stderr })
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The error of a writer that failed, with what it said.
    fn failure(&mut self, key: &str, how: &str) -> BenchError {
        let said = self.stderr.take().and_then(|t| t.join().ok()).unwrap_or_default();
        let said = said.trim();
        let reason = if said.is_empty() { how.to_string() } else { format!("{how}: {said}") };
        BenchError::Peer { measurement: key.to_string(), reason }
    }

    /// Waits for the writer to end after its last message, and checks that it ended well.
    fn finish(mut self, key: &str) -> Result<(), BenchError> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(status) = self.exited() {
                return if status.success() { Ok(()) } else { Err(self.failure(key, &format!("ended with {status}"))) };
            }
            if Instant::now() > deadline {
                return Err(self.failure(key, "did not end after its last message"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn cfg() -> PortsConfig {
        PortsConfig {
            count: 100,
            warmup: 10,
            seconds: 0.1,
            sizes: vec![64, 1024, 65536],
            latency_size: 64,
            depth: DEFAULT_DEPTH,
            raw: false,
            out: PathBuf::from("/tmp"),
            setup: Setup::Normal,
            repeat: 3,
            writer_cpu: WRITER_CPU,
            reader_cpu: READER_CPU,
        }
    }

    #[test]
    fn argument_errors_are_usage_errors() {
        assert!(cfg().validate().is_ok());
        let cases: Vec<(PortsConfig, fn(&BenchError) -> bool)> = vec![
            (PortsConfig { count: 0, ..cfg() }, |e| matches!(e, BenchError::ZeroCount)),
            (PortsConfig { repeat: 0, ..cfg() }, |e| matches!(e, BenchError::BadRepeat)),
            (PortsConfig { seconds: 0.0, ..cfg() }, |e| matches!(e, BenchError::BadSeconds(_))),
            (PortsConfig { seconds: f64::NAN, ..cfg() }, |e| matches!(e, BenchError::BadSeconds(_))),
            (PortsConfig { sizes: vec![], ..cfg() }, |e| matches!(e, BenchError::NoSize)),
            (PortsConfig { sizes: vec![8], ..cfg() }, |e| matches!(e, BenchError::BadSize { .. })),
            (PortsConfig { latency_size: 15, ..cfg() }, |e| matches!(e, BenchError::BadSize { .. })),
            (PortsConfig { sizes: vec![layout::MAX_MESSAGE as usize + 1], ..cfg() }, |e| matches!(e, BenchError::SizeTooLarge { .. })),
            (PortsConfig { depth: 0, ..cfg() }, |e| matches!(e, BenchError::BadDepth { .. })),
            (PortsConfig { depth: 4096, ..cfg() }, |e| matches!(e, BenchError::BadDepth { .. })),
        ];
        for (c, want) in cases {
            let e = c.validate().unwrap_err();
            assert!(want(&e), "unexpected error {e}");
            assert!(e.is_usage(), "{e} should be a usage error");
        }
    }

    #[test]
    fn the_compared_rows_run_side_by_side_and_copy_meets_in_place_at_the_largest_size() {
        let keys: Vec<String> = cfg().latency_scenarios().iter().map(Scenario::key).collect();
        assert_eq!(
            keys,
            [
                "sampling-poll-copy-64",
                "iceoryx2-poll-copy-64",
                "queuing-block-copy-64",
                "iceoryx2-event-copy-64",
                "futex-copy-64",
                "sampling-poll-copy-64KiB",
                "sampling-poll-in-place-64KiB",
                "queuing-block-copy-64KiB",
                "queuing-block-in-place-64KiB",
            ]
        );
        // At one size the copy rows are the compared ones: not measured twice.
        let one = PortsConfig { sizes: vec![64], ..cfg() };
        assert_eq!(one.latency_scenarios().len(), 7);
        let flood: Vec<(String, usize)> = cfg().throughput_scenarios().iter().map(|s| (s.key(), s.channel_max)).collect();
        assert_eq!(
            flood,
            [
                ("queuing-flood-copy-64".to_string(), 65536),
                ("queuing-flood-copy-1KiB".into(), 65536),
                ("queuing-flood-copy-64KiB".into(), 65536),
                ("queuing-flood-in-place-64KiB".into(), 65536),
            ]
        );
    }

    #[test]
    fn a_message_carries_its_stamp_and_number_and_every_byte_is_written() {
        let mut buf = vec![0u8; 64];
        make_message(&mut buf, 123_456_789, 0x1_02);
        assert_eq!(message_header(&buf), (123_456_789, 0x1_02));
        assert!(buf[HEADER_BYTES..].iter().all(|&b| b == 0x02));
    }

    #[test]
    fn paths_and_writes_read_back_from_their_names() {
        for p in Path::ALL {
            assert_eq!(p.name().parse::<Path>().unwrap(), p);
        }
        assert_eq!("in-place".parse::<Write>().unwrap(), Write::InPlace);
        assert!("pigeon".parse::<Path>().unwrap_err().contains("sampling-poll"));
    }
}
