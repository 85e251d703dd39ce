//! The lines an agent prints for the runner (`DBE {json}`, PROTOCOL.md), and the process figures of its last
//! line, which both sides read with the types here.
use serde::{Deserialize, Serialize};
use std::io::Write;

/// The prefix of every line the runner reads.
pub const PREFIX: &str = "DBE ";

/// One line of an agent's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Line {
    Rtt { size: usize, rtt_ns: Vec<u64>, lost: u64, warmup: u64 },
    Sent { size: usize, sent: u64, elapsed_ns: u64 },
    Received { size: usize, received: u64, bytes: u64, first_ns: u64, last_ns: u64 },
    Process(ProcessFigures),
    Error { message: String },
}

/// What the agent's process cost, and how long discovery took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessFigures {
    #[serde(rename = "impl")]
    pub implementation: String,
    pub role: String,
    pub discovery_ns: Option<u64>,
    pub cpu_user_ns: u64,
    pub cpu_system_ns: u64,
    pub max_rss_kib: u64,
}

/// Prints one line and flushes, so the runner sees it even if the process is ended right after.
pub fn print(line: &Line) {
    let json = serde_json::to_string(line).expect("agent lines are plain data");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{PREFIX}{json}");
    let _ = out.flush();
}

pub fn error(message: &str) {
    print(&Line::Error { message: message.into() });
}

/// Every `DBE` line of an agent's output, in order; lines that are not the agent's are skipped, and a `DBE`
/// line that does not parse is returned as an error with its text.
pub fn parse(text: &str) -> Result<Vec<Line>, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(PREFIX))
        .map(|j| serde_json::from_str(j).map_err(|e| format!("{e}: {}", &j[..j.len().min(200)])))
        .collect()
}

/// This process's CPU time (user, system, ns) and peak resident memory (KiB).
pub fn own_figures() -> (u64, u64, u64) {
    let pid = std::process::id();
    let (user, system) = partita_os::process::cpu_times_ns(pid).unwrap_or((0, 0));
    (user, system, partita_os::process::peak_rss_kib(pid).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_back_and_foreign_lines_are_skipped() {
        let text = "log line\nDBE {\"kind\":\"rtt\",\"size\":4,\"rtt_ns\":[1,2],\"lost\":0,\"warmup\":10}\n\
                    DBE {\"kind\":\"process\",\"impl\":\"fastdds\",\"role\":\"ping\",\"discovery_ns\":null,\"cpu_user_ns\":1,\"cpu_system_ns\":2,\"max_rss_kib\":3}\n";
        let lines = parse(text).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], Line::Rtt { size: 4, rtt_ns: vec![1, 2], lost: 0, warmup: 10 });
        assert!(matches!(&lines[1], Line::Process(p) if p.implementation == "fastdds" && p.discovery_ns.is_none()));
        assert!(parse("DBE {\"kind\":\"nonsense\"}").is_err());
    }

    #[test]
    fn own_figures_are_read() {
        let (_, _, rss) = own_figures();
        assert!(rss > 0);
    }
}
