//! The video-surveillance topics: monitors ask the recorder for frames, the recorder answers.
//!
//! Both topics are keyed by `monitor`, the requesting monitor's name. Each monitor is then its own instance:
//! a keep-last history holds the last few requests *of each monitor* and the last few replies *to each
//! monitor*, so a fast monitor never pushes a slow one's pending request or reply out of a history. Keying by
//! `monitor + seq` would instead create one instance per request, which no history depth bounds (every
//! instance keeps its last sample until it is disposed). Matching a reply to its request is by `seq`.
use partita_dds::qos::{Durability, Reliability};
use partita_dds::{Qos, TopicType};
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub const REQUEST_TOPIC: &str = "surveillance/request";
pub const REPLY_TOPIC: &str = "surveillance/reply";

/// Which recorded frame a monitor wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CaptureMode {
    /// The newest frame of the camera.
    Live,
    /// The recorded frame whose capture time is nearest `at_ns`.
    AtTime,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameRequest {
    /// The requesting monitor's name (the key).
    pub monitor: String,
    /// Per-monitor request number, echoed in the reply.
    pub seq: u64,
    pub camera: u32,
    pub mode: CaptureMode,
    /// For [`CaptureMode::AtTime`]: wall-clock time, ns since the Unix epoch; ignored for `Live`.
    pub at_ns: i64,
}

impl TopicType for FrameRequest {
    fn type_name() -> &'static str {
        "partita::surveillance::FrameRequest"
    }
    fn key_fields() -> &'static [&'static str] {
        &["monitor"]
    }
}

/// How the reply's `image` is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ImageEncoding {
    Png,
    /// No image: none was found, or it did not fit the reply size the recorder was told to keep.
    Omitted,
}

/// Whether a request could be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReplyStatus {
    Ok,
    /// The recorder has no camera with that number.
    NoSuchCamera,
    /// The camera has recorded nothing yet (or nothing readable).
    NoFrame,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameReply {
    /// The monitor the reply is for (the key).
    pub monitor: String,
    /// The request's `seq`.
    pub seq: u64,
    pub camera: u32,
    pub status: ReplyStatus,
    /// The camera's frame number (counts from 0 over the life of the ring, across restarts).
    pub frame: u64,
    /// Capture time, wall clock, ns since the Unix epoch.
    pub captured_ns: i64,
    pub width: u32,
    pub height: u32,
    pub encoding: ImageEncoding,
    #[serde(with = "serde_bytes")]
    pub image: Vec<u8>,
    /// Filler that brings the serialized reply to the size the recorder was asked for (`--reply-size`);
    /// empty otherwise. Last, so that its length is the only thing that changes the sample's size.
    #[serde(with = "serde_bytes")]
    pub padding: Vec<u8>,
}

impl TopicType for FrameReply {
    fn type_name() -> &'static str {
        "partita::surveillance::FrameReply"
    }
    fn key_fields() -> &'static [&'static str] {
        &["monitor"]
    }
}

/// Requests: reliable, keep-last 4 per monitor, volatile (a request is only meaningful to a recorder that is
/// there when it is made).
pub fn request_qos() -> Qos {
    Qos::new()
        .reliability(Reliability::Reliable { max_blocking: Duration::from_millis(100) })
        .keep_last(4)
        .durability(Durability::Volatile)
}

/// Replies: reliable, keep-last 4 per monitor, volatile. Keep-last means a monitor that stops reading never
/// makes the recorder's writes block.
pub fn reply_qos() -> Qos {
    Qos::new()
        .reliability(Reliability::Reliable { max_blocking: Duration::from_millis(100) })
        .keep_last(4)
        .durability(Durability::Volatile)
}

/// The serialized size of a sample as sent (CDR, encapsulation header included).
pub fn serialized_size<T: serde::Serialize>(value: &T) -> usize {
    partita_dds::cdr::to_vec(value).map(|v| v.len()).unwrap_or(0)
}

impl FrameReply {
    /// Sets `padding` so that the serialized reply is exactly `size` bytes. When the reply without padding is
    /// already larger, the image is dropped (encoding [`ImageEncoding::Omitted`]) and the reply padded from
    /// there; returns false when even that is larger than `size`.
    pub fn fit_to(&mut self, size: usize) -> bool {
        self.padding.clear();
        let mut base = serialized_size(self);
        if base > size {
            self.image = Vec::new();
            self.encoding = ImageEncoding::Omitted;
            base = serialized_size(self);
        }
        if base > size {
            return false;
        }
        // `padding` is the last member: its length word sits at the same aligned place whatever its length,
        // so each byte of padding adds exactly one byte to the sample.
        self.padding = vec![0u8; size - base];
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(image: usize) -> FrameReply {
        FrameReply {
            monitor: "monitor-a".into(),
            seq: 3,
            camera: 0,
            status: ReplyStatus::Ok,
            frame: 9,
            captured_ns: 1,
            width: 8,
            height: 8,
            encoding: ImageEncoding::Png,
            image: vec![7; image],
            padding: Vec::new(),
        }
    }

    #[test]
    fn fit_to_gives_the_exact_serialized_size() {
        let mut r = reply(100);
        assert!(r.fit_to(1024));
        assert_eq!(serialized_size(&r), 1024);
        assert_eq!(r.image.len(), 100, "an image that fits is kept");
        let back: FrameReply = partita_dds::cdr::from_slice(&partita_dds::cdr::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back, r);

        let mut big = reply(5000);
        assert!(big.fit_to(1024));
        assert_eq!(serialized_size(&big), 1024);
        assert_eq!(big.encoding, ImageEncoding::Omitted);
        assert!(big.image.is_empty());

        let mut tiny = reply(10);
        assert!(!tiny.fit_to(16), "a reply cannot be smaller than its fixed fields");
    }

    #[test]
    fn types_trace_as_dds_types() {
        for (shape, keys) in [
            (partita_dds::TypeShape::of::<FrameRequest>().unwrap(), vec!["monitor"]),
            (partita_dds::TypeShape::of::<FrameReply>().unwrap(), vec!["monitor"]),
        ] {
            assert_eq!(shape.keys, keys);
        }
    }
}
