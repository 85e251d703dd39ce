//! Adaptive write batching: under a flood, several forwarded samples leave in one datagram; at low rates none
//! is held back.
//!
//! Sending is most of what a forwarded sample costs the router: on loopback and on a bridge, `sendmsg` also
//! runs the receiving socket's side of the kernel's UDP path and wakes the receiver (measured with `perf record`
//! during `partita bench router-flood`: 56 % of the router's receive thread under `sendmsg`, 13 % under
//! `recvmsg`). A forwarder's writer therefore batches ([`Qos::writer_batching`]): a forwarded sample that
//! arrives long after the previous one (more than [`Batching::burst_gap`]) is sent at once, with anything still
//! waiting; one that follows its predecessor closely is left in the writer's message, which is sent when it
//! holds [`Batching::max_samples`], or by the router's flusher thread at most [`Batching::max_delay`] later.
//! The first sample of a burst is never delayed; the others wait at most `max_delay`.
//!
//! [`Qos::writer_batching`]: partita_dds::Qos::writer_batching
use crate::stats::ForwardStats;
use partita_dds::RawWriter;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// When a forwarder sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    /// A sample arriving within this time of the previous one of its route is part of a burst and may wait.
    pub burst_gap: Duration,
    /// The longest a sample waits in a batch.
    pub max_delay: Duration,
    /// A batch of this many samples is sent at once.
    pub max_samples: u64,
}

impl Batching {
    /// The router's defaults: a request/response exchange through the router (tens of µs between the
    /// samples of one route) never batches; a flood (a few µs apart) does.
    pub const DEFAULT: Batching =
        Batching { burst_gap: Duration::from_micros(20), max_delay: Duration::from_micros(100), max_samples: 64 };
}

/// A forwarder's batching writer, shared by the forwarder and the flusher.
pub struct BatchedWriter {
    writer: RawWriter,
    /// Samples handed to the writer and not sent yet.
    pending: AtomicU64,
    /// Counts the messages sent (`sends`).
    stats: Arc<ForwardStats>,
}

impl BatchedWriter {
    fn send(&self) -> partita_dds::Result<()> {
        if self.pending.swap(0, Ordering::SeqCst) > 0 {
            self.stats.sends.fetch_add(1, Ordering::Relaxed);
            self.writer.flush()?;
        }
        Ok(())
    }
}

impl Drop for BatchedWriter {
    fn drop(&mut self) {
        let _ = self.send();
    }
}

/// The sending side of one forwarder, used from its delivery callback only.
pub struct Batch {
    out: Arc<BatchedWriter>,
    flusher: Arc<FlusherShared>,
    /// `None`: the writer does not batch; each write sends.
    settings: Option<Batching>,
    last_sample: Option<Instant>,
}

impl Batch {
    pub fn writer(&self) -> &RawWriter {
        &self.out.writer
    }

    /// To call after each sample handed to [`Batch::writer`]: sends now, or leaves the sample for a later one
    /// or the flusher.
    pub fn written(&mut self) -> partita_dds::Result<()> {
        let Some(settings) = self.settings else {
            self.out.stats.sends.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        let now = Instant::now();
        let burst = self.last_sample.is_some_and(|t| now.duration_since(t) < settings.burst_gap);
        self.last_sample = Some(now);
        let waiting = self.out.pending.fetch_add(1, Ordering::SeqCst) + 1;
        if !burst || waiting >= settings.max_samples {
            return self.out.send();
        }
        self.flusher.arm();
        Ok(())
    }
}

struct FlusherShared {
    writers: Mutex<Vec<Weak<BatchedWriter>>>,
    armed: AtomicBool,
    wake: Mutex<()>,
    cv: Condvar,
    stop: AtomicBool,
    max_delay: Duration,
}

impl FlusherShared {
    fn arm(&self) {
        if !self.armed.swap(true, Ordering::SeqCst) {
            // Taking the lock orders this notification after the flusher's check of `armed` (no lost wake-up).
            let _g = self.wake.lock().unwrap_or_else(|p| p.into_inner());
            self.cv.notify_one();
        }
    }

    fn run(&self) {
        set_timer_slack_ns(1_000);
        loop {
            {
                let mut g = self.wake.lock().unwrap_or_else(|p| p.into_inner());
                while !self.armed.load(Ordering::SeqCst) && !self.stop.load(Ordering::SeqCst) {
                    g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
                }
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(self.max_delay);
            // A sample deferred after this point arms the flusher again.
            self.armed.store(false, Ordering::SeqCst);
            let mut writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
            writers.retain(|w| match w.upgrade() {
                Some(w) => {
                    if let Err(e) = w.send() {
                        eprintln!("router: sending a batch: {e}");
                    }
                    true
                }
                None => false,
            });
        }
    }
}

/// The router's flusher: one thread that sends the batches left waiting by forwarders whose burst ended.
pub struct Flusher {
    shared: Arc<FlusherShared>,
    settings: Option<Batching>,
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    /// `None`: no batching, every forwarded sample is sent at once (and no thread is started).
    pub fn start(settings: Option<Batching>) -> Flusher {
        let max_delay = settings.map_or(Duration::ZERO, |s| s.max_delay);
        let shared = Arc::new(FlusherShared {
            writers: Mutex::new(Vec::new()),
            armed: AtomicBool::new(false),
            wake: Mutex::new(()),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            max_delay,
        });
        let thread = settings.map(|_| {
            let s = shared.clone();
            std::thread::Builder::new().name("router-flush".into()).spawn(move || s.run()).expect("spawn flusher thread")
        });
        Flusher { shared, settings, thread }
    }

    /// Whether forwarders' writers must be created with [`partita_dds::Qos::writer_batching`].
    pub fn batching(&self) -> bool {
        self.settings.is_some()
    }

    /// The sending side of a new forwarder whose writer was created as [`Flusher::batching`] says; it counts
    /// the messages it sends in `stats.sends`.
    pub fn batch(&self, writer: RawWriter, stats: Arc<ForwardStats>) -> Batch {
        let out = Arc::new(BatchedWriter { writer, pending: AtomicU64::new(0), stats });
        if self.settings.is_some() {
            self.shared.writers.lock().unwrap_or_else(|p| p.into_inner()).push(Arc::downgrade(&out));
        }
        Batch { out, flusher: self.shared.clone(), settings: self.settings, last_sample: None }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let _g = self.shared.wake.lock().unwrap_or_else(|p| p.into_inner());
            self.shared.cv.notify_one();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The flusher sleeps for tens of µs at a time; Linux's default timer slack of 50 µs would double that.
fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK only changes the calling thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
}
