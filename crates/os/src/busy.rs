//! Busy work of a known length: a loop calibrated in iterations per microsecond, so a server spends CPU (and is
//! slowed down when it is preempted or frozen) rather than merely waiting for the clock.
use crate::clock::thread_cpu_ns;

#[derive(Debug, Clone, Copy)]
pub struct BusyWork {
    pub iterations_per_us: f64,
}

#[inline(never)]
fn spin(iterations: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..iterations {
        x = std::hint::black_box(x.rotate_left(7) ^ i).wrapping_mul(0x2545_F491_4F6C_DD1D);
    }
    std::hint::black_box(x)
}

impl BusyWork {
    /// Measures the loop three times for ≥ 20 ms of the thread's CPU time each and keeps the fastest (least
    /// disturbed) rate. CPU time, not wall time: a thread calibrating in a partition that the plan freezes, or
    /// preempted, would otherwise count the time it did not run and make every later piece of work too short
    /// (measured: 47 µs of CPU for 100 µs asked in a 700 µs window of a 1500 µs frame).
    pub fn calibrate() -> BusyWork {
        let mut best = 0.0f64;
        for _ in 0..3 {
            let mut n = 1_000u64;
            loop {
                let t = thread_cpu_ns();
                spin(n);
                let el = thread_cpu_ns().saturating_sub(t);
                if el >= 20_000_000 {
                    best = best.max(n as f64 / (el as f64 / 1000.0));
                    break;
                }
                n *= 2;
            }
        }
        BusyWork { iterations_per_us: best }
    }

    pub fn run(&self, us: f64) {
        if us > 0.0 {
            spin((us * self.iterations_per_us) as u64);
        }
    }
}
