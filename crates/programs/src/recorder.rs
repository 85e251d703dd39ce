//! The Video_Recorder partition's program (`partita-recorder`, `partita app recorder`): synthetic cameras
//! recorded into an on-disk ring, frames served over DDS, or with `--request-port` and `--reply-port` over two
//! of the partition's queuing ports (a partition without a network, the routing service at the ports' other
//! ends).
use crate::dds_args::DdsArgs;
use crate::{fail, parse_size};
use clap::Args;
use partita_apps::recorder::{Recorder, RecorderConfig};
use partita_apps::recorder_ports::RecorderPorts;
use partita_apps::ring::{FsyncPolicy, RingConfig};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct RecorderArgs {
    /// Directory of the recording ring (default: `ring` in the partition's state directory,
    /// /var/lib/partita/<system>/<partition>, or ./recording outside the supervisor).
    #[arg(long)]
    ring: Option<PathBuf>,
    /// Bytes for the whole ring (oldest frames are overwritten): e.g. 64MiB.
    #[arg(long, default_value = "32MiB", value_parser = parse_size)]
    ring_size: usize,
    #[arg(long, default_value_t = 8)]
    segments: u32,
    /// When records are flushed to the disk: never, segment, record.
    #[arg(long, default_value = "segment")]
    fsync: FsyncPolicy,
    #[arg(long, default_value_t = 1)]
    cameras: u32,
    #[arg(long, default_value_t = 320)]
    width: u32,
    #[arg(long, default_value_t = 240)]
    height: u32,
    /// Frames per second per camera.
    #[arg(long, default_value_t = 10.0)]
    fps: f64,
    /// Make every reply exactly this many serialized bytes (e.g. 1KiB, 1MiB): the image when it fits,
    /// padding for the rest (the paper's image size).
    #[arg(long, value_parser = parse_size)]
    reply_size: Option<usize>,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    duration: Option<f64>,
    /// Print the counters every second.
    #[arg(long)]
    stats: bool,
    /// Serve over ports instead of DDS: the partition's queuing destination port the requests come from (each a
    /// DDS frame of a FrameRequest). Needs --reply-port; no DDS participant is made.
    #[arg(long, value_name = "NAME", requires = "reply_port", conflicts_with_all = ["domain", "network"])]
    request_port: Option<String>,
    /// Serve over ports instead of DDS: the partition's queuing source port the replies go to (each a DDS frame
    /// of a FrameReply, for the routing service to publish). Needs --request-port.
    #[arg(long, value_name = "NAME", requires = "request_port", conflicts_with_all = ["domain", "network"])]
    reply_port: Option<String>,
    #[command(flatten)]
    dds: DdsArgs,
}

/// How the recorder is reached.
enum Transport {
    Dds(partita_dds::DomainConfig),
    Ports(RecorderPorts),
}

impl Transport {
    fn from_args(a: &RecorderArgs) -> Result<Transport, String> {
        match (&a.request_port, &a.reply_port) {
            (Some(request), Some(reply)) => {
                let mut ports = partita_ports::Ports::from_env().map_err(|e| e.to_string())?;
                RecorderPorts::open(&mut ports, request, reply).map(Transport::Ports).map_err(|e| e.to_string())
            }
            // clap requires both or neither.
            _ => a.dds.config().map(Transport::Dds),
        }
    }
}

/// Where the startup line says requests come from.
fn describe(ports: &RecorderPorts) -> String {
    let (q, r) = (&ports.requests, &ports.replies);
    format!(
        "ports: requests from {} (at most {} B, depth {}), replies to {} (at most {} B, depth {})",
        q.name(),
        q.max_message(),
        q.depth(),
        r.name(),
        r.max_message(),
        r.depth()
    )
}

/// The ring in the partition's private state directory (kept across runs), or `./recording` outside one.
fn default_ring_dir() -> PathBuf {
    match partita_env::state_dir() {
        Some(state) => Path::new(&state).join("ring"),
        None => PathBuf::from("recording"),
    }
}

pub fn run(a: RecorderArgs) -> ExitCode {
    let transport = match Transport::from_args(&a) {
        Ok(t) => t,
        Err(e) => return fail("recorder", &e),
    };
    let mut ring = RingConfig::new(a.ring.clone().unwrap_or_else(default_ring_dir), a.ring_size as u64);
    ring.segments = a.segments;
    ring.fsync = a.fsync;
    let dir = ring.dir.clone();
    let config = RecorderConfig { ring, cameras: a.cameras, width: a.width, height: a.height, fps: a.fps, reply_size: a.reply_size };
    partita_os::signal::install_stop_signals();
    let (started, serving) = match transport {
        Transport::Dds(dds) => (Recorder::start(config, &dds), format!("domain {}", dds.domain_id)),
        Transport::Ports(ports) => {
            let serving = describe(&ports);
            (Recorder::start_on_ports(config, ports), serving)
        }
    };
    let rec = match started {
        Ok(r) => r,
        Err(e) => return fail("recorder", &e.to_string()),
    };
    let o = rec.open_report();
    println!(
        "recorder: ring {} opened: {} records kept, {} damaged stretches ({} bytes) skipped, {} bytes cut; {serving}",
        dir.display(),
        o.records,
        o.damaged,
        o.damaged_bytes,
        o.truncated_bytes,
    );
    let start = Instant::now();
    let mut next = start + Duration::from_secs(1);
    let mut shown_error = None;
    while !partita_os::signal::stop_requested() && rec.is_running() {
        if a.duration.is_some_and(|d| start.elapsed().as_secs_f64() >= d) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        if a.stats && Instant::now() >= next {
            next += Duration::from_secs(1);
            println!("recorder: {}", serde_json::to_string(&rec.stats()).unwrap_or_default());
            // Counters say how often, the error says why (a reply port too small for the replies, garbage on
            // the request port): shown once each time it changes.
            let error = rec.last_error();
            if error.is_some() && error != shown_error {
                println!("recorder: last error: {}", error.as_deref().unwrap_or_default());
                shown_error = error;
            }
        }
    }
    let error = rec.last_error();
    let running = rec.is_running();
    match rec.stop() {
        Ok(s) => {
            println!("recorder: stopped: {}", serde_json::to_string(&s).unwrap_or_default());
            if let Some(e) = error.as_deref().filter(|_| running) {
                println!("recorder: last error: {e}");
            }
            if !running {
                return fail("recorder", &format!("a thread ended early: {}", error.unwrap_or_default()));
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("recorder", &e.to_string()),
    }
}
