//! A search over window layouts of one plan that keep every partition's CPU time per frame (its share).
//!
//! Candidates: major frames from 1/8 to 2 times the plan's (within the bounds given), each cut into n equal
//! repetitions (more, shorter windows), each repetition giving every partition its share in one window, in
//! every order of the partitions up to rotation (at most [`MAX_ORDERS`] of them), the plan's idle time at
//! the end of each repetition. Only layouts whose windows are whole nanoseconds, at least the minimum window
//! long, and at most [`MAX_WINDOWS`] per frame are kept: a kept layout gives each partition exactly its share.
//! Each is predicted ([`crate::predict`]) and costs the switches it makes (windows entered from elsewhere ×
//! the switch cost, as a share of the CPU).
use crate::predict::{predict, Model, PredictError, Predicted};
use crate::windows::PlanWindows;
use serde::Serialize;
use std::collections::BTreeSet;
use thiserror::Error;

/// The most windows one plan may have (the system file's limit).
pub const MAX_WINDOWS: usize = 1000;

/// The most partition orders the search tries: every order up to rotation of five partitions (4! = 24); plans
/// of more partitions try the first 24 orders of theirs.
pub const MAX_ORDERS: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Objective {
    Mean,
    P99,
}

#[derive(Debug, Clone, Serialize)]
pub struct Search {
    pub min_window_ns: u64,
    pub min_frame_ns: u64,
    pub max_frame_ns: u64,
    /// The largest share of the CPU the switches may cost for the chosen plan, 0.0..1.0.
    pub max_overhead: f64,
    pub objective: Objective,
    /// Requests simulated per candidate in the search, and for the best candidates at the end.
    pub search_requests: usize,
    pub final_requests: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    #[serde(skip)]
    pub plan: PlanWindows,
    pub major_frame_ns: u64,
    pub windows_per_frame: usize,
    /// Windows entered from another partition or from idle time, per millisecond.
    pub switches_per_ms: f64,
    /// The CPU share those switches cost at the model's switch cost.
    pub overhead: f64,
    /// The partitions' order in a repetition.
    pub order: Vec<String>,
    pub predicted: Predicted,
    /// Whether no other candidate is at least as good in both objective and overhead and better in one.
    pub pareto: bool,
    /// Whether this is the plan the search started from.
    pub original: bool,
}

impl Candidate {
    pub fn objective(&self, o: Objective) -> f64 {
        match o {
            Objective::Mean => self.predicted.mean_us,
            Objective::P99 => self.predicted.p99_us,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Every candidate, fewest switches first; the original plan among them.
    pub candidates: Vec<Candidate>,
    /// Index of the chosen plan: the best objective among the candidates within the overhead limit.
    pub chosen: usize,
}

#[derive(Debug, Error, PartialEq)]
pub enum OptimiseError {
    #[error(transparent)]
    Predict(#[from] PredictError),
    #[error("no layout of the plan fits: windows of at least {min_window_us} µs in frames of {min_frame_us}–{max_frame_us} µs; lower --min-window or widen the frame bounds")]
    NothingFits { min_window_us: f64, min_frame_us: f64, max_frame_us: f64 },
    #[error("the frame bounds are reversed ({min_frame_us} µs > {max_frame_us} µs); give --min-frame below --max-frame")]
    Bounds { min_frame_us: f64, max_frame_us: f64 },
}

/// Each partition's time per frame, in the order of its first window, and the idle time, ns.
fn shares(p: &PlanWindows) -> (Vec<(String, u64)>, u64) {
    let mut t: Vec<(String, u64)> = Vec::new();
    for s in &p.slots {
        match t.iter_mut().find(|(n, _)| *n == s.partition) {
            Some((_, d)) => *d += s.duration,
            None => t.push((s.partition.clone(), s.duration)),
        }
    }
    let busy: u64 = t.iter().map(|(_, d)| d).sum();
    (t, p.major_frame_ns.saturating_sub(busy))
}

/// The orders of `items` up to rotation (a rotation of a cyclic plan is the same plan, shifted): the first item
/// stays first.
fn orders(items: &[String]) -> Vec<Vec<String>> {
    let Some((first, rest)) = items.split_first() else { return vec![Vec::new()] };
    permutations(rest).into_iter().map(|mut p| {
        p.insert(0, first.clone());
        p
    }).collect()
}

fn permutations(items: &[String]) -> Vec<Vec<String>> {
    if items.len() <= 1 || items.len() > 5 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, first.clone());
            out.push(tail);
        }
    }
    out
}

/// The layouts of `base` the search considers (see the module's documentation).
pub fn layouts(base: &PlanWindows, search: &Search) -> Vec<(PlanWindows, Vec<String>)> {
    let (times, idle) = shares(base);
    let f = base.major_frame_ns;
    let names: Vec<String> = times.iter().map(|(n, _)| n.clone()).collect();
    // At most MAX_ORDERS orders (every order up to rotation of up to five partitions), so that the search stays
    // seconds long for larger plans.
    let orders: Vec<Vec<String>> = orders(&names).into_iter().take(MAX_ORDERS).collect();
    let mut seen: BTreeSet<(u64, Vec<String>)> = BTreeSet::new();
    let mut out = Vec::new();
    for j in 1..=16u64 {
        let Some(frame) = (f * j).checked_div(8).filter(|_| (f * j) % 8 == 0) else { continue };
        if frame < search.min_frame_ns || frame > search.max_frame_ns {
            continue;
        }
        for n in 1..=(MAX_WINDOWS / times.len().max(1)) as u64 {
            // Each window: its partition's time scaled to the frame, cut in n; whole nanoseconds only.
            let scale = |t: u64| -> Option<u64> {
                let num = t as u128 * frame as u128;
                let den = f as u128 * n as u128;
                (num % den == 0).then_some((num / den) as u64)
            };
            let Some(lengths) = times.iter().map(|(_, t)| scale(*t)).collect::<Option<Vec<u64>>>() else { continue };
            let Some(gap) = scale(idle) else { continue };
            if lengths.iter().any(|&l| l < search.min_window_ns) {
                break; // more repetitions only shorten the windows
            }
            for order in &orders {
                if !seen.insert((frame / n, order.clone())) {
                    continue;
                }
                let mut windows = Vec::new();
                let mut at = 0;
                for _ in 0..n {
                    for p in order {
                        let l = lengths[names.iter().position(|x| x == p).expect("a name of the plan")];
                        windows.push((p.clone(), at, l));
                        at += l;
                    }
                    at += gap;
                }
                out.push((PlanWindows::new(base.cpu, frame, &windows), order.clone()));
            }
        }
    }
    out
}

/// `plans` with `plan` in place of the plan of its CPU.
fn with(plans: &[PlanWindows], plan: &PlanWindows) -> Vec<PlanWindows> {
    plans.iter().map(|p| if p.cpu == plan.cpu { plan.clone() } else { p.clone() }).collect()
}

fn candidate(plan: PlanWindows, order: Vec<String>, plans: &[PlanWindows], model: &Model, service: &[u64]) -> Result<Candidate, PredictError> {
    let predicted = predict(&with(plans, &plan), model, service)?;
    Ok(Candidate {
        major_frame_ns: plan.major_frame_ns,
        windows_per_frame: plan.slots.len(),
        switches_per_ms: plan.switches_per_ms(),
        overhead: plan.switches() as f64 * model.switch_ns as f64 / plan.major_frame_ns.max(1) as f64,
        order,
        predicted,
        pareto: false,
        original: false,
        plan,
    })
}

/// Searches layouts of the plan of CPU `cpu` among `plans` for the path of `model`, with service times
/// `service` (ns).
pub fn optimise(plans: &[PlanWindows], cpu: usize, model: &Model, service: &[u64], search: &Search) -> Result<Outcome, OptimiseError> {
    if search.min_frame_ns > search.max_frame_ns {
        return Err(OptimiseError::Bounds { min_frame_us: search.min_frame_ns as f64 / 1e3, max_frame_us: search.max_frame_ns as f64 / 1e3 });
    }
    let base = plans.iter().find(|p| p.cpu == cpu).cloned().ok_or(PredictError::NotPlanned(format!("<the plan of CPU {cpu}>")))?;
    let quick = Model { requests: search.search_requests, ..model.clone() };
    let original_order: Vec<String> = shares(&base).0.into_iter().map(|(n, _)| n).collect();
    let mut all = vec![candidate(base.clone(), original_order, plans, &quick, service)?];
    all[0].original = true;
    for (plan, order) in layouts(&base, search) {
        if plan.major_frame_ns == base.major_frame_ns && plan.slots == base.slots {
            continue; // the file's plan is already a candidate
        }
        match candidate(plan, order, plans, &quick, service) {
            Ok(c) => all.push(c),
            // A layout whose windows are too short for the switch cost serves nothing: not a candidate.
            Err(PredictError::NeverServed(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    if all.len() == 1 {
        return Err(OptimiseError::NothingFits {
            min_window_us: search.min_window_ns as f64 / 1e3,
            min_frame_us: search.min_frame_ns as f64 / 1e3,
            max_frame_us: search.max_frame_ns as f64 / 1e3,
        });
    }
    let o = search.objective;
    // The best few by objective within the limit, and the original, again with more requests.
    let mut order: Vec<usize> = (0..all.len()).filter(|&i| all[i].overhead <= search.max_overhead).collect();
    order.sort_by(|&a, &b| all[a].objective(o).total_cmp(&all[b].objective(o)));
    let full = Model { requests: search.final_requests, ..model.clone() };
    for i in order.into_iter().take(5).chain([0]) {
        all[i].predicted = predict(&with(plans, &all[i].plan), &full, service)?;
    }
    for i in 0..all.len() {
        all[i].pareto = !all.iter().any(|c| {
            c.objective(o) <= all[i].objective(o) && c.overhead <= all[i].overhead && (c.objective(o) < all[i].objective(o) || c.overhead < all[i].overhead)
        });
    }
    all.sort_by(|a, b| a.overhead.total_cmp(&b.overhead).then(a.objective(o).total_cmp(&b.objective(o))));
    let chosen = (0..all.len())
        .filter(|&i| all[i].overhead <= search.max_overhead)
        .min_by(|&a, &b| all[a].objective(o).total_cmp(&all[b].objective(o)))
        .unwrap_or_else(|| all.iter().position(|c| c.original).expect("the original is a candidate"));
    Ok(Outcome { candidates: all, chosen })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::Arrivals;

    fn paper() -> PlanWindows {
        PlanWindows::new(0, 1_500_000, &[("recorder".into(), 0, 700_000), ("routing".into(), 700_000, 800_000)])
    }
    fn search() -> Search {
        Search {
            min_window_ns: 50_000,
            min_frame_ns: 100_000,
            max_frame_ns: 3_000_000,
            max_overhead: 0.2,
            objective: Objective::Mean,
            search_requests: 2000,
            final_requests: 5000,
        }
    }

    #[test]
    fn every_layout_keeps_each_partitions_share_and_the_minimum_window() {
        let base = paper();
        let l = layouts(&base, &search());
        assert!(l.len() > 10, "{}", l.len());
        for (p, _) in &l {
            let (t, idle) = shares(p);
            assert_eq!(idle, 0);
            for (name, d) in t {
                let want = if name == "recorder" { 700 } else { 800 };
                assert_eq!(d as u128 * 1500, want * p.major_frame_ns as u128, "{name} in {p:?}");
            }
            assert!(p.slots.iter().all(|s| s.duration >= 50_000));
        }
    }

    #[test]
    fn shorter_windows_answer_sooner_and_the_search_says_what_they_cost() {
        let m = Model { chain: vec!["routing".into(), "recorder".into(), "routing".into()], switch_ns: 20_000, switch_samples: Vec::new(), arrivals: Arrivals::Closed { think_ns: 0 }, requests: 5000, background: Vec::new() };
        let out = optimise(&[paper()], 0, &m, &[60_000, 80_000, 100_000], &search()).unwrap();
        let chosen = &out.candidates[out.chosen];
        let original = out.candidates.iter().find(|c| c.original).unwrap();
        assert!(chosen.predicted.mean_us < original.predicted.mean_us / 2.0, "{chosen:?} against {original:?}");
        assert!(chosen.overhead <= 0.2 && chosen.overhead > original.overhead);
        assert!(out.candidates.iter().any(|c| c.pareto));
    }

    #[test]
    fn impossible_searches_say_why() {
        let m = Model { chain: vec!["routing".into()], switch_ns: 0, switch_samples: Vec::new(), arrivals: Arrivals::Open, requests: 100, background: Vec::new() };
        let mut s = search();
        s.min_window_ns = 10_000_000;
        assert!(matches!(optimise(&[paper()], 0, &m, &[1], &s), Err(OptimiseError::NothingFits { .. })));
        s = search();
        s.min_frame_ns = 4_000_000;
        assert!(matches!(optimise(&[paper()], 0, &m, &[1], &s), Err(OptimiseError::Bounds { .. })));
        assert!(optimise(&[paper()], 3, &m, &[1], &search()).is_err());
    }
}
