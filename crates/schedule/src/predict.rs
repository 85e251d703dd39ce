//! The response-time distribution a plan gives a request path: the plan's geometry ([`PlanWindows::serve`])
//! combined with service times measured without a plan.
//!
//! The model (docs/schedule.md): a request's service time S is a sample of the same path measured without
//! windows (raw response times of TRADITIONAL DDS WITH ROUTING); it is spread evenly over the path's visits, each
//! visit needing S / k of its partition's CPU, served only inside that partition's windows, each window entered
//! from elsewhere losing the switch cost. Time spent outside partitions (the monitor, the wire) is counted as
//! partition time, which errs on the slow side. Arrivals are either closed-loop (the next request leaves
//! `think` after the previous answer, as `bench paper`'s monitor asks) or open (uniform over the frame). Left
//! out: the host preempting the machine, the executor's lateness beyond the switch cost, and queueing between
//! requests (one request at a time in closed loop; open-loop requests are taken as not overlapping).
use crate::windows::{plan_of, rank_us, PlanWindows};
use serde::Serialize;
use thiserror::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Arrivals {
    /// The next request leaves `think_ns` after the previous answer.
    Closed { think_ns: u64 },
    /// Requests arrive at instants spread uniformly over the plan.
    Open,
}

#[derive(Debug, Clone, Serialize)]
pub struct Model {
    /// The partitions a request visits, in order.
    pub chain: Vec<String>,
    /// CPU time each window entered from elsewhere loses, ns (when `switch_samples` is empty).
    pub switch_ns: u64,
    /// Measured window entries (ns): each window instance entered from elsewhere loses one of them, picked by
    /// a hash of its start.
    #[serde(skip)]
    pub switch_samples: Vec<u64>,
    pub arrivals: Arrivals,
    /// Simulated requests.
    pub requests: usize,
    /// Periodic work of partitions besides the requests (the recorder's frame capture).
    pub background: Vec<Background>,
}

/// A partition's own periodic job: released every `period_ns`, it needs `cost_ns` of the partition's CPU, in
/// its windows. A request's visit that finds the job released and not done waits for it (first come, first
/// served, as SCHED_FIFO threads of one priority are).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Background {
    pub partition: String,
    pub period_ns: u64,
    pub cost_ns: u64,
}

/// Predicted response times, µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Predicted {
    pub requests: usize,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

#[derive(Debug, Error, PartialEq)]
pub enum PredictError {
    #[error("partition {0:?} of the path has no window in the plan; name partitions the plan schedules")]
    NotPlanned(String),
    #[error("partition {0:?} has no window longer than the switch cost; lower the switch cost or lengthen its windows")]
    NeverServed(String),
    #[error("no service-time samples; measure the path without a plan first (bench paper's trad-routing raw samples)")]
    NoSamples,
    #[error("the path is empty; give the partitions a request visits, e.g. routing,recorder,routing")]
    EmptyChain,
}

/// A small, seeded generator (splitmix64): the prediction is the same for the same inputs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn mix(x: u64) -> u64 {
    Rng(x).next()
}

/// One request arriving at `t`: the instant its answer is out.
fn walk(hops: &[(&str, &PlanWindows)], t: u64, service_ns: u64, lost: &dyn Fn(u64) -> u64, background: &[Background]) -> Option<u64> {
    let k = hops.len() as u64;
    let mut t = t;
    for (i, (p, plan)) in hops.iter().enumerate() {
        for b in background.iter().filter(|b| b.partition == *p && b.period_ns > 0) {
            // The job released last before the visit: if it is not done yet, the visit waits for it.
            let released = t - t % b.period_ns;
            let done = plan.serve_with(p, released, b.cost_ns, lost)?;
            t = t.max(done);
        }
        // S split evenly; the first visits take the remainder's nanoseconds.
        let need = service_ns / k + u64::from((i as u64) < service_ns % k);
        t = plan.serve_with(p, t, need, lost)?;
    }
    Some(t)
}

/// The predicted response times of `model.chain` through `plans`, for service times drawn from `service_ns`.
pub fn predict(plans: &[PlanWindows], model: &Model, service_ns: &[u64]) -> Result<Predicted, PredictError> {
    if model.chain.is_empty() {
        return Err(PredictError::EmptyChain);
    }
    if service_ns.is_empty() {
        return Err(PredictError::NoSamples);
    }
    let hops: Vec<(&str, &PlanWindows)> = model
        .chain
        .iter()
        .map(|p| plan_of(plans, p).map(|pl| (p.as_str(), pl)).ok_or_else(|| PredictError::NotPlanned(p.clone())))
        .collect::<Result<_, _>>()?;
    let least = model.switch_samples.iter().copied().min().unwrap_or(model.switch_ns);
    for (p, plan) in &hops {
        if plan.serve(p, 0, 1, least).is_none() {
            return Err(PredictError::NeverServed(p.to_string()));
        }
    }
    let samples = &model.switch_samples;
    let lost = |start: u64| if samples.is_empty() { model.switch_ns } else { samples[(mix(start) % samples.len() as u64) as usize] };
    let frame = hops.iter().map(|(_, p)| p.major_frame_ns).max().unwrap_or(1).max(1);
    let mut rng = Rng(0x5EED ^ service_ns.len() as u64);
    let n = model.requests.max(1);
    // Closed loop: the first requests find the loop's steady phase; they are not counted.
    let warmup = match model.arrivals {
        Arrivals::Closed { .. } => (n / 10).clamp(1, 1000),
        Arrivals::Open => 0,
    };
    let mut out: Vec<u64> = Vec::with_capacity(n);
    let mut t = rng.below(frame);
    for i in 0..n + warmup {
        let s = service_ns[rng.below(service_ns.len() as u64) as usize];
        if model.arrivals == Arrivals::Open {
            t = (t / frame + 1) * frame + rng.below(frame);
        }
        // A window lost whole a thousand times in a row (sampled switch costs longer than the window): as
        // good as never served.
        let Some(done) = walk(&hops, t, s, &lost, &model.background) else { return Err(PredictError::NeverServed(model.chain.join(" → "))) };
        if i >= warmup {
            out.push(done - t);
        }
        if let Arrivals::Closed { think_ns } = model.arrivals {
            t = done + think_ns;
        }
    }
    out.sort_unstable();
    Ok(Predicted {
        requests: out.len(),
        mean_us: out.iter().map(|&x| x as f64).sum::<f64>() / out.len() as f64 / 1e3,
        p50_us: rank_us(&out, 0.5),
        p99_us: rank_us(&out, 0.99),
        max_us: out[out.len() - 1] as f64 / 1e3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paper() -> PlanWindows {
        PlanWindows::new(0, 1_500_000, &[("recorder".into(), 0, 700_000), ("routing".into(), 700_000, 800_000)])
    }
    fn model(arrivals: Arrivals, switch_ns: u64) -> Model {
        Model { chain: vec!["routing".into(), "recorder".into(), "routing".into()], switch_ns, switch_samples: Vec::new(), arrivals, requests: 20_000, background: Vec::new() }
    }

    #[test]
    fn with_no_service_time_open_arrivals_give_the_window_delay() {
        let p = predict(&[paper()], &model(Arrivals::Open, 0), &[0]).unwrap();
        assert!((p.mean_us - 1450.0).abs() < 15.0, "{p:?}");
        assert!(p.max_us <= 2200.0 && p.max_us > 2150.0, "{p:?}");
    }

    #[test]
    fn a_closed_loop_request_leaves_in_the_routing_window_and_waits_a_frame() {
        // The answer leaves in the routing window; the next request is forwarded at once, waits for the
        // recorder's window (frame start), then for the routing window: 1500 µs minus what the answer's
        // routing visit already took, plus the visits.
        let p = predict(&[paper()], &model(Arrivals::Closed { think_ns: 0 }, 0), &[90_000]).unwrap();
        assert!((p.mean_us - 1500.0).abs() < 1.0, "{p:?}");
        assert_eq!(p.p50_us, p.max_us);
    }

    #[test]
    fn a_request_that_finds_the_partitions_own_job_running_waits_for_it() {
        // A 2 ms job every 100 ms in the recorder: spread over its 700 µs windows it takes three frames, and a
        // closed loop of quick requests meets it about 4.5 % of the time (4.5 ms of every 100).
        let mut m = model(Arrivals::Closed { think_ns: 0 }, 0);
        let quiet = predict(&[paper()], &m, &[30_000]).unwrap();
        m.background = vec![Background { partition: "recorder".into(), period_ns: 100_000_000, cost_ns: 2_000_000 }];
        let busy = predict(&[paper()], &m, &[30_000]).unwrap();
        assert_eq!(quiet.p99_us, quiet.p50_us);
        assert!(busy.p99_us >= quiet.p99_us + 1400.0, "{busy:?} against {quiet:?}");
        assert_eq!(busy.p50_us, quiet.p50_us);
    }

    #[test]
    fn bad_models_are_refused_with_what_to_do() {
        assert_eq!(predict(&[paper()], &model(Arrivals::Open, 0), &[]), Err(PredictError::NoSamples));
        let mut m = model(Arrivals::Open, 0);
        m.chain = vec!["nobody".into()];
        assert_eq!(predict(&[paper()], &m, &[1]), Err(PredictError::NotPlanned("nobody".into())));
        assert_eq!(predict(&[paper()], &model(Arrivals::Open, 900_000), &[1]), Err(PredictError::NeverServed("routing".into())));
        m.chain.clear();
        assert_eq!(predict(&[paper()], &m, &[1]), Err(PredictError::EmptyChain));
    }
}
