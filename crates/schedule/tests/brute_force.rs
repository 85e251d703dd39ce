//! The window model against a brute-force simulation that steps time 1 µs at a time and asks only "does this
//! partition run now?", for several plans, paths and switch costs.
use partita_schedule::windows::{window_delay, PlanWindows, WindowDelay};

struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// The paper's plan and twelve pseudo-random ones: 2–4 partitions, up to 11 windows, gaps, windows of 50–640 µs.
fn plans() -> Vec<(PlanWindows, Vec<String>)> {
    let mut r = Lcg(7);
    let paper = vec![("a".to_string(), 0, 700_000), ("b".to_string(), 700_000, 800_000)];
    let mut out = vec![(PlanWindows::new(0, 1_500_000, &paper), vec!["b".into(), "a".into(), "b".into()])];
    for _ in 0..12 {
        let parts = 2 + r.below(3) as usize;
        let n = parts + r.below(8) as usize;
        let (mut w, mut at) = (Vec::new(), 0u64);
        for i in 0..n {
            at += r.below(3) * 10_000;
            let d = (5 + r.below(60)) * 10_000;
            let p = if i < parts { i } else { r.below(parts as u64) as usize };
            w.push((((b'a' + p as u8) as char).to_string(), at, d));
            at += d;
        }
        let frame = at + r.below(2) * 20_000;
        let chain: Vec<String> = (0..1 + r.below(4)).map(|_| ((b'a' + r.below(parts as u64) as u8) as char).to_string()).collect();
        out.push((PlanWindows::new(0, frame, &w), chain));
    }
    out
}

/// For each µs of the frame: how long `p` has been running without a break at that instant (µs; `None` when it
/// does not run), found by stepping through two frames and asking only `runs_at`.
fn running_for(plan: &PlanWindows, p: &str) -> Vec<Option<u64>> {
    let n = (plan.major_frame_ns / 1000) as usize;
    let mut since = vec![None; n];
    let mut run: Option<u64> = None;
    for i in 0..2 * n {
        run = if plan.runs_at(p, i as u64 * 1000) { Some(run.map_or(0, |r| r + 1)) } else { None };
        if i >= n {
            // A partition that runs the whole frame never switched in.
            since[i - n] = run.map(|r| if r as usize >= n { u64::MAX } else { r });
        }
    }
    since
}

fn brute_serve(plan: &PlanWindows, p: &str, mut t: u64, need: u64, switch: u64) -> u64 {
    let since = running_for(plan, p);
    let usable = |t: u64| since[((t % plan.major_frame_ns) / 1000) as usize].is_some_and(|r| r.saturating_mul(1000) >= switch);
    while !usable(t) {
        t += 1000;
    }
    let mut done = 0;
    while done < need {
        while !usable(t) {
            t += 1000;
        }
        done += 1000;
        t += 1000;
    }
    t
}

#[test]
fn the_window_only_distribution_is_the_brute_force_one() {
    for (plan, chain) in plans() {
        let chain: Vec<&str> = chain.iter().map(String::as_str).collect();
        let got = window_delay(std::slice::from_ref(&plan), &chain).unwrap();
        let mut d = Vec::new();
        let mut a = 0;
        while a < plan.major_frame_ns {
            let mut t = a;
            for p in &chain {
                while !plan.runs_at(p, t) {
                    t += 1000;
                }
            }
            d.push(t - a);
            a += 1000;
        }
        assert_eq!(got, WindowDelay::of(&mut d), "{plan:?} {chain:?}");
    }
}

#[test]
fn serving_work_with_a_switch_cost_is_the_brute_force_walk() {
    let mut r = Lcg(11);
    for (plan, chain) in plans() {
        for _ in 0..40 {
            let p = &chain[r.below(chain.len() as u64) as usize];
            let t = r.below(plan.major_frame_ns * 2) / 1000 * 1000;
            let need = r.below(400) * 1000;
            let switch = [0, 10_000, 30_000][r.below(3) as usize];
            let want = brute_serve(&plan, p, t, need, switch);
            assert_eq!(plan.serve(p, t, need, switch), Some(want), "{plan:?}: {p} at {t} needing {need} with switch {switch}");
        }
    }
}
