//! The monitoring nodes' live figures and last frames, for the paper's system: a monitor prints one line a
//! second on its output (`monitor: 12.0 s  8400 answered  0 timed out  last second p50 1201.3 µs  p99 …`), which
//! the supervisor keeps in the node's log (`<state dir>/<node>.log`); with `--save-frame <state dir>/<node>.frame.png
//! --live-frame` it also saves the last frame there once a second. Both files are read as they are, bounded.
use crate::routes::valid_name;
use serde_json::{json, Value};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// How much of the end of a log is read for its last monitor line.
const LOG_TAIL: u64 = 64 * 1024;
/// The largest frame served.
const MAX_FRAME: u64 = 8 << 20;

/// A monitor line's figures: `answered`, `timed_out`, `p50_us`, `p99_us`, `max_us`, `seconds`.
pub fn parse_line(line: &str) -> Option<Value> {
    let rest = line.strip_prefix("monitor: ")?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    let after = |key: &str| words.iter().position(|w| *w == key).and_then(|i| words.get(i + 1)).and_then(|v| v.parse::<f64>().ok());
    let before = |key: &str| words.iter().position(|w| *w == key).and_then(|i| i.checked_sub(1)).and_then(|i| words[i].parse::<f64>().ok());
    Some(json!({
        "seconds": words.first()?.parse::<f64>().ok()?,
        "answered": before("answered")?,
        "timed_out": words.iter().position(|w| *w == "timed").and_then(|i| i.checked_sub(1)).and_then(|i| words[i].parse::<f64>().ok())?,
        "p50_us": after("p50")?,
        "p99_us": after("p99")?,
        "max_us": after("max")?,
    }))
}

/// Each node or partition whose log ends with monitor lines: its name and its last line's figures.
pub fn monitors(dir: &Path) -> Value {
    let mut out = Vec::new();
    let mut logs: Vec<_> = std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    logs.sort();
    for path in logs {
        let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".log")).filter(|n| valid_name(n)) else { continue };
        let Some(last) = tail(&path).lines().rev().find_map(parse_line) else { continue };
        let frame = dir.join(format!("{name}.frame.png")).is_file();
        out.push(json!({ "node": name, "last_second": last, "frame": frame }));
    }
    Value::Array(out)
}

fn tail(path: &Path) -> String {
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL)));
    let mut bytes = Vec::new();
    let _ = f.take(LOG_TAIL).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The node's last saved frame, when there is one of a plausible size.
pub fn frame(dir: &Path, node: &str) -> Option<Vec<u8>> {
    if !valid_name(node) {
        return None;
    }
    let f = std::fs::File::open(dir.join(format!("{node}.frame.png"))).ok()?;
    if f.metadata().ok()?.len() > MAX_FRAME {
        return None;
    }
    let mut bytes = Vec::new();
    f.take(MAX_FRAME).read_to_end(&mut bytes).ok()?;
    bytes.starts_with(b"\x89PNG").then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_monitors_live_line_is_read_and_anything_else_is_not() {
        let v = parse_line("monitor:  12.0 s     8400 answered     0 timed out  last second p50 1201.3 µs  p99 2250.0 µs  max 2301.9 µs").unwrap();
        assert_eq!(v["seconds"], 12.0);
        assert_eq!(v["answered"], 8400.0);
        assert_eq!(v["timed_out"], 0.0);
        assert_eq!((v["p50_us"].as_f64(), v["p99_us"].as_f64(), v["max_us"].as_f64()), (Some(1201.3), Some(2250.0), Some(2301.9)));
        assert_eq!(parse_line("monitor samples: 3 1 2 3"), None);
        assert_eq!(parse_line("recorder: started"), None);
        assert_eq!(parse_line("monitor: garbage"), None);
    }

    #[test]
    fn monitors_are_found_by_their_logs_and_frames_must_be_png() {
        let dir = std::env::temp_dir().join(format!("partita-web-monitors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("monitor.log"), "starting\nmonitor:   1.0 s  10 answered  1 timed out  last second p50 5.0 µs  p99 9.0 µs  max 9.5 µs\n").unwrap();
        std::fs::write(dir.join("recorder.log"), "recording\n").unwrap();
        std::fs::write(dir.join("monitor.frame.png"), b"\x89PNG....").unwrap();
        std::fs::write(dir.join("other.frame.png"), b"not a png").unwrap();
        let m = monitors(&dir);
        assert_eq!(m.as_array().unwrap().len(), 1, "{m}");
        assert_eq!(m[0]["node"], "monitor");
        assert_eq!(m[0]["last_second"]["p99_us"], 9.0);
        assert_eq!(m[0]["frame"], true);
        assert!(frame(&dir, "monitor").is_some());
        assert!(frame(&dir, "other").is_none());
        assert!(frame(&dir, "../monitor").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
