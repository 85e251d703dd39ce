//! Adaptive write batching: under a flood, several forwarded samples leave in one datagram; at low rates none
//! is held back.
//!
//! Sending is most of what a forwarded sample costs the router: on loopback and on a bridge, `sendmsg` also
//! runs the receiving socket's side of the kernel's UDP path and wakes the receiver (measured with `perf record`
//! during `partita bench router-flood`: 56 % of the router's receive thread under `sendmsg`, 13 % under
//! `recvmsg`). A forwarder's writer therefore batches ([`Qos::writer_batching`]). While a route's samples
//! arrive closer together than [`Batching::burst_gap`] on average (a mean over about the last eight gaps, so
//! that the router's own preemption does not end a flood's batching), a forwarded sample is left in the
//! writer's message; the message is sent when it holds [`Batching::max_samples`], when a sample arrives after
//! the first waiting one's [`Batching::max_delay`] is up, or by the router's flusher at that time (on the manager's thread). A sample
//! after a pause of `max_delay` or more, or while samples arrive further apart, is sent at once with anything
//! still waiting. The first sample after a pause is never delayed; a sample waits at most `max_delay`.
//! (Cyclone also sends a batching writer's message itself when it is full, before the writer blocks for
//! acknowledgements, and when it adds a heartbeat for one reader, at most every 100 µs per writer.)
//!
//! [`Qos::writer_batching`]: partita_dds::Qos::writer_batching
use crate::stats::ForwardStats;
use partita_dds::RawWriter;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// When a forwarder sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    /// While a route's samples arrive closer together than this on average, they are a burst and may wait.
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

/// What holds a batch and sends it: a batching DDS writer.
pub trait Flush: Send + Sync + 'static {
    fn flush(&self) -> partita_dds::Result<()>;
}

impl Flush for RawWriter {
    fn flush(&self) -> partita_dds::Result<()> {
        RawWriter::flush(self)
    }
}

/// A forwarder's batching writer, shared by the forwarder and the flusher.
struct BatchedWriter<W: Flush> {
    writer: W,
    /// Samples handed to the writer and not sent yet.
    pending: AtomicU64,
    /// When the flusher must send what waits, in ns since the flusher started; 0 while nothing waits for it.
    due_ns: AtomicU64,
    /// Counts the batches sent (`batches`).
    stats: Arc<ForwardStats>,
}

/// A batched writer as the flusher sees it.
trait Due: Send + Sync {
    fn due_ns(&self) -> u64;
    fn send(&self) -> partita_dds::Result<()>;
}

impl<W: Flush> Due for BatchedWriter<W> {
    fn due_ns(&self) -> u64 {
        self.due_ns.load(Ordering::SeqCst)
    }

    fn send(&self) -> partita_dds::Result<()> {
        self.due_ns.store(0, Ordering::SeqCst);
        if self.pending.swap(0, Ordering::SeqCst) > 0 {
            self.stats.batches.fetch_add(1, Ordering::Relaxed);
            self.writer.flush()?;
        }
        Ok(())
    }
}

impl<W: Flush> Drop for BatchedWriter<W> {
    fn drop(&mut self) {
        let _ = self.send();
    }
}

/// The sending side of one forwarder, used from its delivery callback only.
pub struct Batch<W: Flush> {
    out: Arc<BatchedWriter<W>>,
    flusher: Arc<FlusherShared>,
    /// `None`: the writer does not batch; each write sends.
    settings: Option<Batching>,
    last_sample: Option<Instant>,
    /// The mean time between this route's samples since the last pause (weight 1/8 on the newest gap).
    mean_gap: Option<Duration>,
}

impl<W: Flush> Batch<W> {
    pub fn writer(&self) -> &W {
        &self.out.writer
    }

    /// To call after each sample handed to [`Batch::writer`]: sends now, or leaves the sample for a later one
    /// or the flusher.
    pub fn written(&mut self) -> partita_dds::Result<()> {
        self.written_at(Instant::now())
    }

    fn written_at(&mut self, now: Instant) -> partita_dds::Result<()> {
        let Some(settings) = self.settings else {
            self.out.stats.batches.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        let gap = self.last_sample.map(|t| now.saturating_duration_since(t));
        self.last_sample = Some(now);
        self.mean_gap = match (gap, self.mean_gap) {
            // The first sample, or one after a pause: the next gap sets the mean afresh.
            (None, _) => None,
            (Some(g), _) if g >= settings.max_delay => None,
            (Some(g), None) => Some(g),
            (Some(g), Some(m)) => Some(if g >= m { m + (g - m) / 8 } else { m - (m - g) / 8 }),
        };
        let burst = self.mean_gap.is_some_and(|m| m < settings.burst_gap);
        let before = self.out.pending.fetch_add(1, Ordering::SeqCst);
        let due = self.out.due_ns.load(Ordering::SeqCst);
        if !burst || before + 1 >= settings.max_samples || (due != 0 && self.flusher.ns(now) >= due) {
            return self.out.send();
        }
        if before == 0 {
            // The first sample that waits sets when the flusher sends the batch.
            self.out.due_ns.store(self.flusher.ns(now + settings.max_delay), Ordering::SeqCst);
            self.flusher.arm();
        }
        if self.flusher.busy.load(Ordering::SeqCst) {
            // The flusher's thread may not come back in time: send now.
            return self.out.send();
        }
        Ok(())
    }
}

struct FlusherShared {
    writers: Mutex<Vec<Weak<dyn Due>>>,
    armed: AtomicBool,
    /// Set while the thread that sends the due batches does work that may block (making routes: a type look-up
    /// waits up to seconds): meanwhile forwarders send at once instead of leaving samples for it.
    busy: AtomicBool,
    /// Wakes the thread that sends the due batches.
    wake: Box<dyn Fn() + Send + Sync>,
    epoch: Instant,
}

impl FlusherShared {
    /// `t` in ns since the flusher started (at least 1: 0 means "nothing due").
    fn ns(&self, t: Instant) -> u64 {
        (t.saturating_duration_since(self.epoch).as_nanos() as u64).max(1)
    }

    fn arm(&self) {
        if !self.armed.swap(true, Ordering::SeqCst) {
            (self.wake)();
        }
    }

    /// Sends every batch that is due (every waiting one with `all`); returns the earliest deadline still ahead.
    fn send_due(&self, all: bool) -> Option<u64> {
        let now = if all { u64::MAX } else { self.ns(Instant::now()) };
        let mut next: Option<u64> = None;
        let mut writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        writers.retain(|w| {
            let Some(w) = w.upgrade() else { return false };
            match w.due_ns() {
                0 => {}
                due if due <= now => {
                    if let Err(e) = w.send() {
                        tracing::error!(target: "partita::router::batch", "sending a batch: {e}");
                    }
                }
                due => next = Some(next.map_or(due, |n| n.min(due))),
            }
            true
        });
        next
    }
}

/// The router's flusher: sends the batches left waiting by forwarders whose burst ended, each when its delay is
/// up. It has no thread of its own (every thread of a partition runs at each thaw, docs/router.md, "Threads"):
/// the router's manager calls [`Flusher::send_due`] on every turn and waits no longer than the deadline it
/// returns; a forwarder that leaves the first sample of a batch waiting calls the `wake` the flusher was made
/// with, which ends the manager's wait.
pub struct Flusher {
    shared: Arc<FlusherShared>,
}

/// While it lives, forwarders send every sample at once ([`Flusher::busy`]).
pub struct Busy<'a>(&'a FlusherShared);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::SeqCst);
    }
}

impl Flusher {
    /// A flusher whose forwarders call `wake` when a batch starts waiting.
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Flusher {
        Flusher {
            shared: Arc::new(FlusherShared {
                writers: Mutex::new(Vec::new()),
                armed: AtomicBool::new(false),
                busy: AtomicBool::new(false),
                wake: Box::new(wake),
                epoch: Instant::now(),
            }),
        }
    }

    /// Sends what is due; returns when the next waiting batch is due, if any. A batch that starts waiting after
    /// this call wakes the caller again.
    pub fn send_due(&self) -> Option<Instant> {
        self.shared.armed.store(false, Ordering::SeqCst);
        self.shared.send_due(false).map(|ns| self.shared.epoch + Duration::from_nanos(ns))
    }

    /// For work of the flusher's thread that may block: sends every waiting batch now, and until the guard is
    /// dropped forwarders send each sample at once. (A forwarder stores its waiting batch's deadline before it
    /// reads `busy`, the flusher sets `busy` before it reads the deadlines: one of the two sends it.)
    pub fn busy(&self) -> Busy<'_> {
        self.shared.busy.store(true, Ordering::SeqCst);
        self.shared.send_due(true);
        Busy(&self.shared)
    }

    /// The sending side of a new forwarder. Its writer must batch ([`partita_dds::Qos::writer_batching`]) when
    /// `settings` is `Some`; it counts the batches it sends in `stats.batches`.
    pub fn batch<W: Flush>(&self, writer: W, settings: Option<Batching>, stats: Arc<ForwardStats>) -> Batch<W> {
        let out = Arc::new(BatchedWriter { writer, pending: AtomicU64::new(0), due_ns: AtomicU64::new(0), stats });
        if settings.is_some() {
            let due: Arc<dyn Due> = out.clone();
            self.shared.writers.lock().unwrap_or_else(|p| p.into_inner()).push(Arc::downgrade(&due));
        }
        Batch { out, flusher: self.shared.clone(), settings, last_sample: None, mean_gap: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that records when it was flushed.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<Instant>>);

    impl Flush for Arc<Recorder> {
        fn flush(&self) -> partita_dds::Result<()> {
            self.0.lock().unwrap().push(Instant::now());
            Ok(())
        }
    }

    fn batch(flusher: &Flusher, settings: Option<Batching>) -> (Batch<Arc<Recorder>>, Arc<Recorder>, Arc<ForwardStats>) {
        let rec = Arc::new(Recorder::default());
        let stats = Arc::new(ForwardStats::default());
        (flusher.batch(rec.clone(), settings, stats.clone()), rec, stats)
    }

    fn flushes(rec: &Recorder) -> Vec<Instant> {
        rec.0.lock().unwrap().clone()
    }

    /// A flusher with a thread standing in for the router's manager: it sends what is due, and sleeps until the
    /// next deadline or a wake-up. Stopped and joined when dropped.
    struct Driven {
        flusher: Arc<Flusher>,
        stop: Arc<(Mutex<bool>, std::sync::Condvar)>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl std::ops::Deref for Driven {
        type Target = Flusher;
        fn deref(&self) -> &Flusher {
            &self.flusher
        }
    }

    impl Drop for Driven {
        fn drop(&mut self) {
            *self.stop.0.lock().unwrap() = true;
            self.stop.1.notify_all();
            let _ = self.thread.take().map(|t| t.join());
        }
    }

    fn driven() -> Driven {
        let stop = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let s = stop.clone();
        let flusher = Arc::new(Flusher::new(move || s.1.notify_all()));
        let (f, s) = (flusher.clone(), stop.clone());
        let thread = std::thread::spawn(move || loop {
            let next = f.send_due();
            let g = s.0.lock().unwrap();
            if *g {
                return;
            }
            let wait = next.map_or(Duration::from_millis(20), |n| n.saturating_duration_since(Instant::now())).min(Duration::from_millis(20));
            drop(s.1.wait_timeout(g, wait).unwrap());
        });
        Driven { flusher, stop, thread: Some(thread) }
    }

    const SLOW: Batching =
        Batching { burst_gap: Duration::from_millis(10), max_delay: Duration::from_millis(50), max_samples: 8 };

    #[test]
    fn a_sample_after_a_pause_is_sent_at_once_and_a_burst_waits_for_its_delay() {
        let flusher = driven();
        let (mut b, rec, stats) = batch(&flusher, Some(SLOW));
        let t = Instant::now();
        b.written_at(t).unwrap();
        assert_eq!(flushes(&rec).len(), 1, "the first sample goes out at once");
        // Three more right behind it: a burst; they wait.
        for i in 1..4 {
            b.written_at(t + Duration::from_micros(i)).unwrap();
        }
        assert_eq!(flushes(&rec).len(), 1);
        // The flusher sends them when the first one's delay is up, not before.
        let deadline = Instant::now() + Duration::from_secs(5);
        while flushes(&rec).len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let f = flushes(&rec);
        assert_eq!(f.len(), 2, "the flusher sent the waiting samples");
        assert!(f[1] >= t + SLOW.max_delay, "not before the delay: {:?}", f[1] - t);
        assert_eq!(stats.batches.load(Ordering::Relaxed), 2);
        // Nothing waits now: the flusher does not send again.
        std::thread::sleep(Duration::from_millis(120));
        assert_eq!(flushes(&rec).len(), 2);
    }

    #[test]
    fn a_full_batch_or_a_sample_after_a_pause_sends_what_waits() {
        let flusher = driven();
        let (mut b, rec, _) = batch(&flusher, Some(SLOW));
        let t = Instant::now();
        // One at once, then a burst of max_samples: the last one fills the batch.
        for i in 0..=SLOW.max_samples {
            b.written_at(t + Duration::from_micros(i)).unwrap();
        }
        assert_eq!(flushes(&rec).len(), 2, "the first sample, then the full batch");
        b.written_at(t + Duration::from_micros(100)).unwrap();
        assert_eq!(flushes(&rec).len(), 2, "one more in the burst waits");
        b.written_at(t + Duration::from_millis(60)).unwrap();
        assert_eq!(flushes(&rec).len(), 3, "a sample after a pause goes out at once, with the one that waited");
    }

    #[test]
    fn a_sample_arriving_after_the_first_waiting_ones_delay_sends_the_batch() {
        let flusher = driven();
        let (mut b, rec, _) = batch(&flusher, Some(SLOW));
        let t = Instant::now();
        b.written_at(t).unwrap();
        b.written_at(t + Duration::from_micros(1)).unwrap();
        // Gaps shorter than the delay keep the mean below burst_gap: a burst, still waiting.
        b.written_at(t + Duration::from_millis(40)).unwrap();
        assert_eq!(flushes(&rec).len(), 1, "the mean gap is still short: the batch waits");
        // Due at t + 1 µs + 50 ms: the receive thread sends it itself.
        b.written_at(t + Duration::from_millis(51)).unwrap();
        assert_eq!(flushes(&rec).len(), 2);
    }

    #[test]
    fn samples_further_apart_than_the_burst_gap_on_average_never_wait() {
        let flusher = driven();
        let (mut b, rec, _) = batch(&flusher, Some(Batching { burst_gap: Duration::from_micros(20), ..SLOW }));
        let t = Instant::now();
        // A request/response exchange: one sample every 40 µs on this route, with one close pair.
        let mut at = Duration::ZERO;
        for i in 0..50u32 {
            at += Duration::from_micros(if i == 25 { 5 } else { 40 });
            b.written_at(t + at).unwrap();
        }
        assert_eq!(flushes(&rec).len(), 50, "every sample went out at once");
    }

    #[test]
    fn without_batching_nothing_waits_and_every_sample_is_its_own_batch() {
        let flusher = driven();
        let (mut b, rec, stats) = batch(&flusher, None);
        let t = Instant::now();
        for i in 0..10 {
            b.written_at(t + Duration::from_micros(i)).unwrap();
        }
        assert_eq!(stats.batches.load(Ordering::Relaxed), 10);
        assert!(flushes(&rec).is_empty(), "the writer sends each write itself");
    }

    #[test]
    fn a_forwarder_that_ends_sends_what_waits() {
        let flusher = driven();
        let (mut b, rec, _) = batch(&flusher, Some(Batching { max_delay: Duration::from_secs(60), ..SLOW }));
        let t = Instant::now();
        b.written_at(t).unwrap();
        b.written_at(t + Duration::from_micros(1)).unwrap();
        assert_eq!(flushes(&rec).len(), 1);
        drop(b);
        assert_eq!(flushes(&rec).len(), 2);
    }

    #[test]
    fn a_batch_that_starts_waiting_wakes_the_flushers_thread_once() {
        let wakes = Arc::new(AtomicU64::new(0));
        let w = wakes.clone();
        let flusher = Flusher::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        });
        let (mut b, rec, _) = batch(&flusher, Some(SLOW));
        let t = Instant::now();
        for i in 0..4 {
            b.written_at(t + Duration::from_micros(i)).unwrap();
        }
        assert_eq!((flushes(&rec).len(), wakes.load(Ordering::SeqCst)), (1, 1), "the first sent, three waiting, one wake-up");
        let due = flusher.send_due().expect("a batch waits");
        assert!(due > t + Duration::from_millis(49) && due <= t + Duration::from_millis(51), "{:?}", due - t);
        assert_eq!(flushes(&rec).len(), 1, "not due yet");
    }

    #[test]
    fn while_the_flushers_thread_is_busy_nothing_waits() {
        let flusher = Flusher::new(|| {});
        let (mut b, rec, _) = batch(&flusher, Some(Batching { max_delay: Duration::from_secs(60), ..SLOW }));
        let t = Instant::now();
        b.written_at(t).unwrap();
        b.written_at(t + Duration::from_micros(1)).unwrap();
        assert_eq!(flushes(&rec).len(), 1, "the second waits");
        let busy = flusher.busy();
        assert_eq!(flushes(&rec).len(), 2, "becoming busy sends what waits");
        b.written_at(t + Duration::from_micros(2)).unwrap();
        b.written_at(t + Duration::from_micros(3)).unwrap();
        assert_eq!(flushes(&rec).len(), 4, "in a burst, yet each sent at once while busy");
        drop(busy);
        b.written_at(t + Duration::from_micros(4)).unwrap();
        assert_eq!(flushes(&rec).len(), 4, "batching again");
    }
}
