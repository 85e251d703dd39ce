//! Rate limiting, the protection of the partitioned side: token buckets per topic and per instance, and
//! downsampling, applied by each forwarder to the valid data samples it receives (life-cycle notifications
//! always pass). Dropped samples are counted by the forwarder, by reason: `dropped_downsample`, `dropped_rate`.
use crate::config::TopicOverride;
use std::collections::HashMap;
use std::time::Instant;

/// A token bucket: `rate` per second, bursts of a tenth of a second (at least one sample).
#[derive(Debug, Clone)]
struct Bucket {
    rate: f64,
    tokens: f64,
    burst: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: f64, now: Instant) -> Self {
        let burst = (rate / 10.0).max(1.0);
        Bucket { rate, tokens: burst, burst, last: now }
    }

    fn take(&mut self, now: Instant) -> bool {
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.rate).min(self.burst);
        self.last = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// Instances with a bucket of their own at most; further instances share one bucket, so the limiter's memory
/// stays bounded whatever the number of keys.
const MAX_INSTANCE_BUCKETS: usize = 4096;

/// Rate limits (token buckets per topic and per instance) and downsampling of valid data samples; life-cycle
/// notifications always pass.
pub(crate) struct Limiter {
    topic: Option<Bucket>,
    /// Per instance: a bucket each (at most [`MAX_INSTANCE_BUCKETS`]), then this one shared by the rest; its
    /// rate is the per-instance rate.
    shared: Option<Bucket>,
    instances: HashMap<u64, Bucket>,
    downsample: u32,
    seen: u64,
}

impl Limiter {
    pub(crate) fn new(ov: &TopicOverride) -> Self {
        let now = Instant::now();
        Limiter {
            topic: ov.max_rate.map(|r| Bucket::new(r, now)),
            shared: ov.max_rate_per_instance.map(|r| Bucket::new(r, now)),
            instances: HashMap::new(),
            downsample: ov.downsample.unwrap_or(1).max(1),
            seen: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn admit(&mut self, instance: u64) -> bool {
        self.judge(instance) == Verdict::Pass
    }

    /// Whether a valid data sample of `instance` passes, or why not.
    pub(crate) fn judge(&mut self, instance: u64) -> Verdict {
        self.seen += 1;
        if !(self.seen - 1).is_multiple_of(self.downsample as u64) {
            return Verdict::Downsampled;
        }
        if self.topic.is_none() && self.shared.is_none() {
            return Verdict::Pass;
        }
        let now = Instant::now();
        if let Some(shared) = &mut self.shared {
            let full = self.instances.len() >= MAX_INSTANCE_BUCKETS;
            let bucket = match self.instances.get_mut(&instance) {
                Some(b) => b,
                None if !full => self.instances.entry(instance).or_insert_with(|| Bucket::new(shared.rate, now)),
                None => shared,
            };
            if !bucket.take(now) {
                return Verdict::RateLimited;
            }
        }
        if self.topic.as_mut().is_none_or(|b| b.take(now)) {
            Verdict::Pass
        } else {
            Verdict::RateLimited
        }
    }
}

/// What the limiter says of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    /// Not the one in N that `downsample` lets through.
    Downsampled,
    /// Over `max_rate` or `max_rate_per_instance`.
    RateLimited,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_says_why_a_sample_is_dropped() {
        let ov = TopicOverride { downsample: Some(2), max_rate: Some(1.0), ..Default::default() };
        let mut l = Limiter::new(&ov);
        assert_eq!(l.judge(1), Verdict::Pass, "the first of two, within the burst of one");
        assert_eq!(l.judge(1), Verdict::Downsampled);
        assert_eq!(l.judge(1), Verdict::RateLimited, "the next one of two passes downsampling but not the rate");
    }

    #[test]
    fn a_flooding_instance_uses_up_its_own_rate_not_the_others() {
        let ov = TopicOverride { name: "t".into(), max_rate_per_instance: Some(100.0), ..TopicOverride::default() };
        let mut l = Limiter::new(&ov);
        // Instance 1 floods: only its burst (a tenth of a second at 100/s) passes at once.
        let passed = (0..10_000).filter(|_| l.admit(1)).count();
        assert!((10..=12).contains(&passed), "{passed}");
        // Instance 2 is not held back by instance 1's flood.
        assert!(l.admit(2));
        // A topic-wide rate still caps the sum.
        let ov = TopicOverride { name: "t".into(), max_rate: Some(100.0), ..TopicOverride::default() };
        let mut l = Limiter::new(&ov);
        let passed = (0..10_000).filter(|i| l.admit(i % 2)).count();
        assert!((10..=12).contains(&passed), "{passed}");
        assert!(!l.admit(7), "the topic's burst is used up by the others");
    }

    #[test]
    fn the_limiters_memory_is_bounded_by_the_number_of_buckets() {
        let ov = TopicOverride { name: "t".into(), max_rate_per_instance: Some(1.0), ..TopicOverride::default() };
        let mut l = Limiter::new(&ov);
        for i in 0..(MAX_INSTANCE_BUCKETS as u64 + 1000) {
            l.admit(i);
        }
        assert_eq!(l.instances.len(), MAX_INSTANCE_BUCKETS);
    }
}
