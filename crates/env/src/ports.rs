//! `PARTITA_PORTS`: the ARINC 653 ports the supervisor gave a partition, one entry per port, `;` between
//! entries, `,` between fields:
//!
//! ```text
//! name,kind,direction,max_message,depth_or_refresh,data_fd,status_fd[,ack_fd]
//! frames,queuing,source,65536,16,3,4,5;position,sampling,destination,64,10000000,6,7
//! ```
//!
//! - `kind` is `sampling` or `queuing`; `direction` is `source` or `destination`;
//! - `max_message` is in bytes; `depth_or_refresh` is a queuing channel's depth in messages, or a sampling
//!   channel's refresh period in nanoseconds;
//! - `data_fd` is the channel's message memory (writable at the source, read-only at a destination),
//!   `status_fd` the port's own counters (writable by the partition, read by the supervisor's health monitor),
//!   and `ack_fd`, queuing channels only, the receiver's consumed count (writable at the destination, read-only
//!   at the source).
//!
//! The geometry is the supervisor's word, not read from the shared memory: a hostile writer can change what is
//! in the memory, not what a reader believes its size is.
use std::fmt;
use std::str::FromStr;

/// The variable that lists a partition's ports.
pub const PORTS: &str = "PARTITA_PORTS";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortKind {
    Sampling,
    Queuing,
}

impl PortKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PortKind::Sampling => "sampling",
            PortKind::Queuing => "queuing",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Source,
    Destination,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Source => "source",
            Direction::Destination => "destination",
        }
    }
}

/// One port as the supervisor hands it to a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortEntry {
    pub name: String,
    pub kind: PortKind,
    pub direction: Direction,
    pub max_message: u32,
    /// Queuing: depth in messages. Sampling: refresh period in nanoseconds.
    pub depth_or_refresh: u64,
    pub data_fd: i32,
    pub status_fd: i32,
    pub ack_fd: Option<i32>,
}

/// An entry of `PARTITA_PORTS` that is not what the supervisor writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{PORTS} entry {entry:?}: {problem}; the supervisor writes name,kind,direction,max_message,depth_or_refresh,data_fd,status_fd[,ack_fd]")]
pub struct BadPorts {
    pub entry: String,
    pub problem: &'static str,
}

impl fmt::Display for PortEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{},{},{},{},{},{}", self.name, self.kind.as_str(), self.direction.as_str(), self.max_message, self.depth_or_refresh, self.data_fd, self.status_fd)?;
        if let Some(a) = self.ack_fd {
            write!(f, ",{a}")?;
        }
        Ok(())
    }
}

impl FromStr for PortEntry {
    type Err = BadPorts;
    fn from_str(s: &str) -> Result<PortEntry, BadPorts> {
        let bad = |problem| BadPorts { entry: s.to_string(), problem };
        let f: Vec<&str> = s.split(',').collect();
        if f.len() != 7 && f.len() != 8 {
            return Err(bad("not 7 or 8 fields"));
        }
        if f[0].is_empty() {
            return Err(bad("an empty port name"));
        }
        let kind = match f[1] {
            "sampling" => PortKind::Sampling,
            "queuing" => PortKind::Queuing,
            _ => return Err(bad("kind is neither sampling nor queuing")),
        };
        let direction = match f[2] {
            "source" => Direction::Source,
            "destination" => Direction::Destination,
            _ => return Err(bad("direction is neither source nor destination")),
        };
        let fd = |t: &str| t.parse::<i32>().ok().filter(|n| *n > 2);
        let entry = PortEntry {
            name: f[0].to_string(),
            kind,
            direction,
            max_message: f[3].parse().ok().filter(|n| *n > 0).ok_or_else(|| bad("max_message is not a positive number"))?,
            depth_or_refresh: f[4].parse().ok().filter(|n| *n > 0).ok_or_else(|| bad("depth_or_refresh is not a positive number"))?,
            data_fd: fd(f[5]).ok_or_else(|| bad("data_fd is not a descriptor above 2"))?,
            status_fd: fd(f[6]).ok_or_else(|| bad("status_fd is not a descriptor above 2"))?,
            ack_fd: match f.get(7) {
                Some(t) => Some(fd(t).ok_or_else(|| bad("ack_fd is not a descriptor above 2"))?),
                None => None,
            },
        };
        if (entry.kind == PortKind::Queuing) != entry.ack_fd.is_some() {
            return Err(bad("a queuing port has an ack_fd and a sampling port has none"));
        }
        Ok(entry)
    }
}

/// The whole value of `PARTITA_PORTS`.
pub fn format_ports(entries: &[PortEntry]) -> String {
    entries.iter().map(ToString::to_string).collect::<Vec<_>>().join(";")
}

/// Reads a value of `PARTITA_PORTS`.
pub fn parse_ports(text: &str) -> Result<Vec<PortEntry>, BadPorts> {
    text.split(';').filter(|e| !e.is_empty()).map(str::parse).collect()
}

/// The ports the supervisor gave this process; `None` when it gave none (or it runs outside a partition).
pub fn ports() -> Option<Result<Vec<PortEntry>, BadPorts>> {
    std::env::var(PORTS).ok().map(|t| parse_ports(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_back_as_written() {
        let e = vec![
            PortEntry { name: "frames".into(), kind: PortKind::Queuing, direction: Direction::Source, max_message: 65536, depth_or_refresh: 16, data_fd: 3, status_fd: 4, ack_fd: Some(5) },
            PortEntry { name: "pos".into(), kind: PortKind::Sampling, direction: Direction::Destination, max_message: 64, depth_or_refresh: 10_000_000, data_fd: 6, status_fd: 7, ack_fd: None },
        ];
        let text = format_ports(&e);
        assert_eq!(text, "frames,queuing,source,65536,16,3,4,5;pos,sampling,destination,64,10000000,6,7");
        assert_eq!(parse_ports(&text).unwrap(), e);
    }

    #[test]
    fn malformed_entries_are_refused_with_what_is_wrong() {
        for (text, problem) in [
            ("a,queuing,source,1,1,3,4", "ack_fd"),
            ("a,sampling,source,1,1,3,4,5", "ack_fd"),
            ("a,fifo,source,1,1,3,4", "kind"),
            ("a,sampling,up,1,1,3,4", "direction"),
            ("a,sampling,source,0,1,3,4", "max_message"),
            ("a,sampling,source,1,1,1,4", "data_fd"),
            ("a,sampling,source,1,1", "fields"),
        ] {
            let e = parse_ports(text).unwrap_err();
            assert!(e.to_string().contains(problem), "{text}: {e}");
        }
    }
}
