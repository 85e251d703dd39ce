//! Per-route, per-topic counters and the forwarding-latency histogram.
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Live counters of one forwarder, shared between its thread and readers of statistics.
pub struct ForwardStats {
    pub received: AtomicU64,
    pub forwarded: AtomicU64,
    /// Dropped by the rate limit (`max_rate`, `max_rate_per_instance`).
    pub dropped_rate: AtomicU64,
    /// Dropped by downsampling (`downsample`: one in N passes).
    pub dropped_downsample: AtomicU64,
    /// Dropped because the far side did not take them: the router's reliable writer had no room in its history
    /// (every reader's acknowledgements outstanding) within its max blocking time. The writer's history bounds
    /// the router's memory; the sample is not kept beyond it.
    pub dropped_backpressure: AtomicU64,
    /// Lost in transport or rejected for lack of room in the bounded queue (reader statuses).
    pub dropped_queue: AtomicU64,
    /// Samples written by routers (this one or another), not forwarded again.
    pub suppressed_loop: AtomicU64,
    /// Forwarding errors (a sample Cyclone refused to re-publish).
    pub errors: AtomicU64,
    /// Batches the router's writer sent (see `batch.rs`): `forwarded / batches` samples per batch.
    pub batches: AtomicU64,
    /// Panics of the forwarder's callback (each drops the sample it was forwarding), as its reader counts them.
    pub callback_panics: AtomicU64,
    /// Age of each forwarded sample when it left the router: now − its source timestamp, in ns.
    latency: Mutex<Histogram<u64>>,
}

impl Default for ForwardStats {
    fn default() -> Self {
        ForwardStats {
            received: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            dropped_rate: AtomicU64::new(0),
            dropped_downsample: AtomicU64::new(0),
            dropped_backpressure: AtomicU64::new(0),
            dropped_queue: AtomicU64::new(0),
            suppressed_loop: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            callback_panics: AtomicU64::new(0),
            latency: Mutex::new(Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")),
        }
    }
}

impl ForwardStats {
    /// Records the age of each forwarded sample (one lock per batch).
    pub fn record_latencies_ns(&self, ages: impl Iterator<Item = i64>) {
        let mut h = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        for ns in ages {
            h.saturating_record(ns.max(1) as u64);
        }
    }

    pub fn snapshot(&self, router: &str, route: &str, topic: &str, type_name: &str) -> RouteStats {
        let h = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        let us = |v: u64| v as f64 / 1000.0;
        let empty = h.is_empty();
        RouteStats {
            active: true,
            router: router.into(),
            route: route.into(),
            topic: topic.into(),
            type_name: type_name.into(),
            received: self.received.load(Ordering::Relaxed),
            forwarded: self.forwarded.load(Ordering::Relaxed),
            dropped_rate: self.dropped_rate.load(Ordering::Relaxed),
            dropped_downsample: self.dropped_downsample.load(Ordering::Relaxed),
            dropped_backpressure: self.dropped_backpressure.load(Ordering::Relaxed),
            dropped_queue: self.dropped_queue.load(Ordering::Relaxed),
            suppressed_loop: self.suppressed_loop.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            callback_panics: self.callback_panics.load(Ordering::Relaxed),
            latency_p50_us: if empty { 0.0 } else { us(h.value_at_quantile(0.5)) },
            latency_p99_us: if empty { 0.0 } else { us(h.value_at_quantile(0.99)) },
            latency_max_us: if empty { 0.0 } else { us(h.max()) },
        }
    }
}

/// A statistics record, as printed and as published on the DDS topic `partita/router/stats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteStats {
    /// False for a route that has ended (its last figures are kept).
    pub active: bool,
    pub router: String,
    pub route: String,
    pub topic: String,
    pub type_name: String,
    pub received: u64,
    pub forwarded: u64,
    /// Dropped by the rate limit.
    pub dropped_rate: u64,
    /// Dropped by downsampling.
    #[serde(default)]
    pub dropped_downsample: u64,
    /// Dropped because the far side did not take them in time (the router's writer's history was full).
    #[serde(default)]
    pub dropped_backpressure: u64,
    /// Lost on the way in, or rejected by the router's reader for want of room.
    pub dropped_queue: u64,
    pub suppressed_loop: u64,
    pub errors: u64,
    /// Batches of forwarded samples sent (one per sample when the route does not batch; Cyclone may split a
    /// batch in two when it adds a heartbeat).
    pub batches: u64,
    /// Panics of the forwarder's callback: each dropped the sample it was forwarding (the log has each one's
    /// message). Not a column of [`table`], which lists the routes with panics below the rows.
    pub callback_panics: u64,
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    pub latency_max_us: f64,
}

impl partita_dds::TopicType for RouteStats {
    fn type_name() -> &'static str {
        "partita::router::RouteStats"
    }
    fn key_fields() -> &'static [&'static str] {
        &["router", "route", "topic"]
    }
}

/// The statistics as a plain-text table; below it, when a forwarder's callback panicked, a line naming those
/// routes and topics with their count of panics.
pub fn table(rows: &[RouteStats]) -> String {
    let mut s = format!(
        "{:<22} {:<28} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>10} {:>10}\n",
        "ROUTE", "TOPIC", "RECEIVED", "FORWARDED", "DROP-RT", "DROP-DS", "DROP-Q", "DROP-BP", "LOOP", "PER-BATCH", "P50(us)", "P99(us)"
    );
    for r in rows {
        let per_batch = if r.batches == 0 { 0.0 } else { r.forwarded as f64 / r.batches as f64 };
        s.push_str(&format!(
            "{:<22} {:<28} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9.1} {:>10.1} {:>10.1}\n",
            r.route,
            r.topic,
            r.received,
            r.forwarded,
            r.dropped_rate,
            r.dropped_downsample,
            r.dropped_queue,
            r.dropped_backpressure,
            r.suppressed_loop,
            per_batch,
            r.latency_p50_us,
            r.latency_p99_us
        ));
    }
    let panicked: Vec<String> =
        rows.iter().filter(|r| r.callback_panics > 0).map(|r| format!("{} {} ({})", r.route, r.topic, r.callback_panics)).collect();
    if !panicked.is_empty() {
        s.push_str(&format!("callback panics (samples dropped, see the log): {}\n", panicked.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(topic: &str, panics: u64) -> RouteStats {
        let stats = ForwardStats::default();
        stats.forwarded.store(7, Ordering::Relaxed);
        stats.callback_panics.store(panics, Ordering::Relaxed);
        stats.snapshot("io", "a->b", topic, "T")
    }

    #[test]
    fn the_table_keeps_its_columns_and_names_the_routes_whose_callback_panicked() {
        let calm = table(&[row("ticks", 0)]);
        assert_eq!(calm.lines().count(), 2, "{calm}");
        assert_eq!(calm.lines().nth(1).unwrap().split_whitespace().count(), 12, "{calm}");
        assert_eq!(calm.lines().next().unwrap().split_whitespace().count(), 12, "{calm}");
        assert!(!calm.contains("panic"), "{calm}");
        let rows = [row("ticks", 0), row("frames", 3)];
        assert_eq!(rows[1].callback_panics, 3);
        let t = table(&rows);
        assert_eq!(t.lines().count(), 4, "{t}");
        assert_eq!(t.lines().last().unwrap(), "callback panics (samples dropped, see the log): a->b frames (3)");
    }
}
