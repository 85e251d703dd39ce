//! The test topic type, shared by the in-process and interoperability tests.
#![allow(dead_code)]
use partita_dds::TopicType;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Mode {
    Idle,
    Recording,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Position {
    pub x: f64,
    pub y: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Camera {
    pub id: u32,
    pub name: String,
    pub mode: Mode,
    pub at: Position,
    pub frame: Vec<u8>,
    pub tags: Vec<String>,
}

impl TopicType for Camera {
    fn type_name() -> &'static str {
        "partita::test::Camera"
    }
    fn key_fields() -> &'static [&'static str] {
        &["id"]
    }
}

pub fn cameras(prefix: &str) -> Vec<Camera> {
    (0..3)
        .map(|i| Camera {
            id: i,
            name: format!("{prefix}-{i}"),
            mode: if i % 2 == 0 { Mode::Idle } else { Mode::Recording },
            at: Position { x: i as f64 * 1.5, y: -2.0 },
            frame: vec![i as u8; 100 + i as usize],
            tags: vec!["north".into(), format!("t{i}")],
        })
        .collect()
}

/// A domain id distinct per test process, so concurrent runs do not meet.
pub fn domain(offset: u32) -> u32 {
    assert!(offset < 25);
    (std::process::id() % 9) * 25 + offset
}
