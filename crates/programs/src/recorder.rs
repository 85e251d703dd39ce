//! The Video_Recorder partition's program (`partita-recorder`, `partita app recorder`): synthetic cameras
//! recorded into an on-disk ring, frames served over DDS.
use crate::dds_args::DdsArgs;
use crate::{fail, parse_size};
use clap::Args;
use partita_apps::recorder::{Recorder, RecorderConfig};
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
    #[command(flatten)]
    dds: DdsArgs,
}

/// The ring in the partition's private state directory (kept across runs), or `./recording` outside one.
fn default_ring_dir() -> PathBuf {
    match partita_env::state_dir() {
        Some(state) => Path::new(&state).join("ring"),
        None => PathBuf::from("recording"),
    }
}

pub fn run(a: RecorderArgs) -> ExitCode {
    let dds = match a.dds.config() {
        Ok(d) => d,
        Err(e) => return fail("recorder", &e),
    };
    let mut ring = RingConfig::new(a.ring.clone().unwrap_or_else(default_ring_dir), a.ring_size as u64);
    ring.segments = a.segments;
    ring.fsync = a.fsync;
    let dir = ring.dir.clone();
    let config = RecorderConfig { ring, cameras: a.cameras, width: a.width, height: a.height, fps: a.fps, reply_size: a.reply_size };
    partita_os::signal::install_stop_signals();
    let rec = match Recorder::start(config, &dds) {
        Ok(r) => r,
        Err(e) => return fail("recorder", &e.to_string()),
    };
    let o = rec.open_report();
    println!(
        "recorder: ring {} opened: {} records kept, {} damaged stretches ({} bytes) skipped, {} bytes cut; domain {}",
        dir.display(),
        o.records,
        o.damaged,
        o.damaged_bytes,
        o.truncated_bytes,
        rec.domain_id()
    );
    let start = Instant::now();
    let mut next = start + Duration::from_secs(1);
    while !partita_os::signal::stop_requested() && rec.is_running() {
        if a.duration.is_some_and(|d| start.elapsed().as_secs_f64() >= d) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        if a.stats && Instant::now() >= next {
            next += Duration::from_secs(1);
            println!("recorder: {}", serde_json::to_string(&rec.stats()).unwrap_or_default());
        }
    }
    let error = rec.last_error();
    let running = rec.is_running();
    match rec.stop() {
        Ok(s) => {
            println!("recorder: stopped: {}", serde_json::to_string(&s).unwrap_or_default());
            if !running {
                return fail("recorder", &format!("a thread ended early: {}", error.unwrap_or_default()));
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("recorder", &e.to_string()),
    }
}
