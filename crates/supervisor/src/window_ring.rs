//! Every window start and end the plan executor makes, in a ring that readers outside the real-time path follow
//! while the plan runs: the status service (the live timeline of `partita web`) and the trace writer
//! (`partita up --trace`). The executor writes each record with relaxed stores framed by a sequence stamp (a
//! seqlock per slot: no lock, no allocation, no wait on its path); a reader that falls more than
//! [`WINDOW_SLOTS`] records behind loses the oldest and is told how many.
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Records kept: about three seconds of the paper's plan (two windows per 1500 µs frame, each a start and an
/// end or the next start), more than the supervisor's 10 ms loop and its 1 s status period need.
pub const WINDOW_SLOTS: usize = 8192;

/// One boundary the executor made: a window started (`window` is `Some`) or the plan went idle (a gap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct WindowRecord {
    pub frame: u64,
    /// The plan (index among the executor's plans).
    pub plan: usize,
    /// The window of that plan that started here; `None`: a window ended with nothing after it (a gap).
    pub window: Option<usize>,
    /// The partition (index among the executor's freezers) whose window started; `None` with `window`.
    pub partition: Option<usize>,
    /// Planned instant, when the executor woke for it, when its freezes and thaws were issued (CLOCK_MONOTONIC ns).
    pub planned_ns: u64,
    pub woke_ns: u64,
    pub switched_ns: u64,
}

struct Slot {
    /// `n + 1` once record `n` is whole in the slot; 0 while the executor writes it.
    stamp: AtomicU64,
    frame: AtomicU64,
    /// plan (bits 32..48), window + 1 (16..32, 0: none), partition + 1 (0..16, 0: none).
    which: AtomicU64,
    planned: AtomicU64,
    woke: AtomicU64,
    switched: AtomicU64,
}

pub struct WindowRing {
    next: AtomicU64,
    slots: Box<[Slot]>,
}

impl Default for WindowRing {
    fn default() -> Self {
        let slot = || Slot {
            stamp: AtomicU64::new(0),
            frame: AtomicU64::new(0),
            which: AtomicU64::new(0),
            planned: AtomicU64::new(0),
            woke: AtomicU64::new(0),
            switched: AtomicU64::new(0),
        };
        WindowRing {
            next: AtomicU64::new(0),
            slots: (0..WINDOW_SLOTS).map(|_| slot()).collect(),
        }
    }
}

/// What a reader got since its last read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewWindows {
    /// Oldest first.
    pub records: Vec<WindowRecord>,
    /// Overwritten before they were read.
    pub lost: u64,
    /// The sequence to read from next time.
    pub next: u64,
}

fn pack(r: &WindowRecord) -> u64 {
    let w = r.window.map_or(0, |w| (w as u64 + 1) & 0xffff);
    let p = r.partition.map_or(0, |p| (p as u64 + 1) & 0xffff);
    ((r.plan as u64 & 0xffff) << 32) | (w << 16) | p
}

fn unpack(v: u64) -> (usize, Option<usize>, Option<usize>) {
    let w = (v >> 16) & 0xffff;
    let p = v & 0xffff;
    (
        ((v >> 32) & 0xffff) as usize,
        w.checked_sub(1).map(|w| w as usize),
        p.checked_sub(1).map(|p| p as usize),
    )
}

impl WindowRing {
    /// Called by the executor only (one writer): six relaxed stores between two stamps.
    pub fn record(&self, r: &WindowRecord) {
        let n = self.next.load(Ordering::Relaxed);
        let slot = &self.slots[(n % WINDOW_SLOTS as u64) as usize];
        slot.stamp.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        slot.frame.store(r.frame, Ordering::Relaxed);
        slot.which.store(pack(r), Ordering::Relaxed);
        slot.planned.store(r.planned_ns, Ordering::Relaxed);
        slot.woke.store(r.woke_ns, Ordering::Relaxed);
        slot.switched.store(r.switched_ns, Ordering::Relaxed);
        slot.stamp.store(n + 1, Ordering::Release);
        self.next.store(n + 1, Ordering::Release);
    }

    /// The sequence of the next record: how many were ever written.
    pub fn written(&self) -> u64 {
        self.next.load(Ordering::Acquire)
    }

    /// The records from sequence `from` on (all still in the ring); `from` of 0 on a ring that wrapped reads
    /// what is left, counting the rest as lost.
    pub fn read_since(&self, from: u64) -> NewWindows {
        let end = self.written();
        let start = from.max(end.saturating_sub(WINDOW_SLOTS as u64));
        let mut out = NewWindows {
            records: Vec::with_capacity((end - start.min(end)) as usize),
            lost: start.saturating_sub(from),
            next: end,
        };
        for n in start..end {
            match self.read_slot(n) {
                Some(r) => out.records.push(r),
                None => out.lost += 1,
            }
        }
        out
    }

    /// The last `count` records (fewer when fewer were written), oldest first.
    pub fn last(&self, count: usize) -> Vec<WindowRecord> {
        let end = self.written();
        self.read_since(end.saturating_sub(count as u64)).records
    }

    fn read_slot(&self, n: u64) -> Option<WindowRecord> {
        let slot = &self.slots[(n % WINDOW_SLOTS as u64) as usize];
        if slot.stamp.load(Ordering::Acquire) != n + 1 {
            return None;
        }
        let frame = slot.frame.load(Ordering::Relaxed);
        let which = slot.which.load(Ordering::Relaxed);
        let planned_ns = slot.planned.load(Ordering::Relaxed);
        let woke_ns = slot.woke.load(Ordering::Relaxed);
        let switched_ns = slot.switched.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if slot.stamp.load(Ordering::Relaxed) != n + 1 {
            return None;
        }
        let (plan, window, partition) = unpack(which);
        Some(WindowRecord {
            frame,
            plan,
            window,
            partition,
            planned_ns,
            woke_ns,
            switched_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u64) -> WindowRecord {
        WindowRecord {
            frame: i / 2,
            plan: (i % 3) as usize,
            window: (i % 2 == 0).then_some((i % 5) as usize),
            partition: (i % 2 == 0).then_some((i % 7) as usize),
            planned_ns: i * 10,
            woke_ns: i * 10 + 1,
            switched_ns: i * 10 + 2,
        }
    }

    #[test]
    fn records_come_back_whole_in_order_and_a_slow_reader_is_told_what_it_lost() {
        let ring = WindowRing::default();
        for i in 0..10 {
            ring.record(&rec(i));
        }
        let got = ring.read_since(0);
        assert_eq!(got.records, (0..10).map(rec).collect::<Vec<_>>());
        assert_eq!((got.lost, got.next), (0, 10));
        assert!(ring.read_since(10).records.is_empty());
        for i in 10..(10 + WINDOW_SLOTS as u64 + 5) {
            ring.record(&rec(i));
        }
        let got = ring.read_since(10);
        assert_eq!(got.lost, 5);
        assert_eq!(got.records.len(), WINDOW_SLOTS);
        assert_eq!(got.records[0], rec(15));
        assert_eq!(
            ring.last(3),
            (WINDOW_SLOTS as u64 + 12..WINDOW_SLOTS as u64 + 15)
                .map(rec)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_reader_beside_the_writer_never_sees_a_torn_record() {
        let ring = std::sync::Arc::new(WindowRing::default());
        let writer = {
            let ring = ring.clone();
            std::thread::spawn(move || {
                for i in 0..400_000u64 {
                    ring.record(&rec(i));
                }
            })
        };
        let mut from = 0;
        let mut seen = 0u64;
        while !writer.is_finished() || from < ring.written() {
            let got = ring.read_since(from);
            for r in &got.records {
                // Every field of a record is derived from one i: a torn one mixes two.
                let i = r.planned_ns / 10;
                assert_eq!(*r, rec(i), "a torn record");
                seen += 1;
            }
            from = got.next;
        }
        writer.join().unwrap();
        assert!(seen > 0);
    }
}
