//! Interoperability in the same run: each DDS implementation's writer of the benchmark's `PubMessage` topic,
//! read by each implementation's reader (itself included), in one node: a matrix of works / fails.
use crate::agent::args::{AgentArgs, Role};
use crate::agent::channel::{Durability, History, QosChoice, Reliability};
use crate::agent::output::{self, Line};
use crate::matrix::Implementation;
use crate::system::{agent_for, argv, network, shell_line, Programs, ADDRESS_A};
use partita_system::spec::{NodeSpec, SystemSpec};
use partita_system::ByteSize;
use partita_lab::setup::Setup;
use partita_lab::run::run_until_exit;
use partita_supervisor::UpOptions;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The implementations whose writers and readers are crossed.
pub const IMPLEMENTATIONS: [Implementation; 3] = [Implementation::Cyclone, Implementation::Fastdds, Implementation::Rustdds];
const SIZE: usize = 1024;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pair {
    pub writer: Implementation,
    pub reader: Implementation,
    pub written: u64,
    pub received: u64,
    /// Whether the reader received samples of the size written, and how it failed otherwise.
    pub works: bool,
    pub note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InteropResult {
    pub measured_at: String,
    pub machine: String,
    pub pairs: Vec<Pair>,
}

/// How long a pair's agents wait to discover each other before the pair is judged not to work, by default.
pub const MATCH_TIMEOUT: Duration = Duration::from_secs(20);
/// A pair's reader ends this long after its last sample when the end marker did not reach it (from a writer
/// that left first, whose last samples never came), and a reliable Fast DDS writer waits as long at most for
/// acknowledgements of a reader that has gone: each writer writes only 0.5 s, at full speed.
pub const IDLE: Duration = Duration::from_secs(2);

fn agent(imp: Implementation, role: Role, topic: &str, match_timeout: Duration) -> AgentArgs {
    let mut a = agent_for(imp, role);
    a.domain = Some(0);
    a.topic = topic.into();
    a.sizes = vec![SIZE];
    a.seconds = 0.5;
    a.match_timeout = match_timeout;
    a.idle = IDLE;
    a.qos = QosChoice { reliability: Reliability::Reliable, history: History::KeepLast(1), durability: Durability::Volatile };
    a
}

/// The system of one pair: one node running the reader, then the writer.
pub fn system_spec(writer: Implementation, reader: Implementation, name: &str, topic: &str, programs: &Programs, setup: &Setup, match_timeout: Duration) -> SystemSpec {
    let sub = shell_line(&argv(reader, programs, setup, agent(reader, Role::Sub, topic, match_timeout), true));
    let publ = shell_line(&argv(writer, programs, setup, agent(writer, Role::Pub, topic, match_timeout), true));
    // The reader starts first, except opposite a RustDDS writer: RustDDS 0.15 has no unicast discovery peers, so
    // in the node's multicast-free setting a Cyclone (or Fast DDS) participant learns of it only from its own SPDP
    // reaching RustDDS (it answers); Cyclone pings its peers at start and then every 30 s, and drops the copies
    // RustDDS sends to 127.0.0.1 (they arrive on `lo`, not on its V-NIC). So the RustDDS participant starts first.
    let script = if writer == Implementation::Rustdds && reader != Implementation::Rustdds {
        format!("{publ} & sleep 0.2; {sub}; status=$?; wait; exit $status")
    } else {
        format!("{sub} & sleep 0.2; {publ}; status=$?; wait; exit $status")
    };
    SystemSpec::new(name).network(network()).node(
        NodeSpec::new("node", ["sh".to_string(), "-c".into(), script]).cpus([0, 1]).memory(ByteSize::gib(1)).pids(512).address(ADDRESS_A),
    )
}

/// Runs every pair, each pair's agents waiting `match_timeout` at most to discover each other; `log` gets a
/// line per pair.
pub fn run(programs: &Programs, setup: &Setup, state_root: &Path, machine: &str, match_timeout: Duration, mut log: impl FnMut(&str)) -> InteropResult {
    let mut pairs = Vec::new();
    for (k, &writer) in IMPLEMENTATIONS.iter().enumerate() {
        for (j, &reader) in IMPLEMENTATIONS.iter().enumerate() {
            let name = format!("dbe-{}-interop-{k}{j}", std::process::id());
            let topic = format!("dbeinterop{}_{k}{j}", std::process::id());
            let spec = system_spec(writer, reader, &name, &topic, programs, setup, match_timeout);
            let pair = match spec.build(&partita_system::Host::this_machine(), "<bench dbe interop>") {
                Err(e) => Pair { writer, reader, written: 0, received: 0, works: false, note: format!("the generated system does not validate: {e}") },
                Ok(system) => {
                    let options = UpOptions { partita: Some(PathBuf::from(&programs.partita)), ..UpOptions::new(state_root) };
                    let state = state_root.join(&system.name);
                    let _ = std::fs::remove_dir_all(&state);
                    let done = run_until_exit(&system, &options, "node", Duration::from_secs(60));
                    let text = std::fs::read_to_string(state.join("node.log")).unwrap_or_default();
                    let _ = std::fs::remove_dir_all(&state);
                    judge(writer, reader, done.map_err(|e| e.to_string()).map(|e| e.timed_out), &text)
                }
            };
            log(&format!(
                "interop {} → {}: {} ({} written, {} received{})",
                writer.key(),
                reader.key(),
                if pair.works { "works" } else { "fails" },
                pair.written,
                pair.received,
                if pair.note.is_empty() { String::new() } else { format!("; {}", pair.note) }
            ));
            pairs.push(pair);
        }
    }
    InteropResult { measured_at: partita_lab::machine::now_rfc3339(), machine: machine.into(), pairs }
}

/// Reads a pair's outcome from its node's output.
pub fn judge(writer: Implementation, reader: Implementation, done: Result<bool, String>, log: &str) -> Pair {
    let mut p = Pair { writer, reader, written: 0, received: 0, works: false, note: String::new() };
    let lines = match output::parse(log) {
        Ok(l) => l,
        Err(e) => {
            p.note = format!("unreadable output: {e}");
            return p;
        }
    };
    for l in &lines {
        match l {
            Line::Sent { size, sent, .. } if *size == SIZE => p.written = *sent,
            Line::Received { size, received, .. } if *size == SIZE => p.received = *received,
            Line::Error { message } => p.note = message.clone(),
            _ => {}
        }
    }
    match done {
        Err(e) => p.note = e,
        Ok(true) => p.note = format!("still running after 60 s; {}", p.note),
        Ok(false) => {}
    }
    p.works = p.received > 0 && p.written > 0 && p.note.is_empty();
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_works_only_when_the_reader_got_samples_of_the_size_written() {
        let ok = format!("DBE {{\"kind\":\"sent\",\"size\":{SIZE},\"sent\":100,\"elapsed_ns\":1}}\nDBE {{\"kind\":\"received\",\"size\":{SIZE},\"received\":90,\"bytes\":1,\"first_ns\":1,\"last_ns\":2}}\n");
        assert!(judge(Implementation::Cyclone, Implementation::Rustdds, Ok(false), &ok).works);
        let none = format!("DBE {{\"kind\":\"sent\",\"size\":{SIZE},\"sent\":100,\"elapsed_ns\":1}}\n");
        assert!(!judge(Implementation::Cyclone, Implementation::Rustdds, Ok(false), &none).works);
        let wrong_size = "DBE {\"kind\":\"sent\",\"size\":1024,\"sent\":100,\"elapsed_ns\":1}\nDBE {\"kind\":\"received\",\"size\":7,\"received\":90,\"bytes\":1,\"first_ns\":1,\"last_ns\":2}\n";
        assert!(!judge(Implementation::Cyclone, Implementation::Rustdds, Ok(false), wrong_size).works);
        assert!(!judge(Implementation::Cyclone, Implementation::Rustdds, Ok(true), &ok).works);
    }

    #[test]
    fn every_pair_is_a_valid_system() {
        let host = partita_system::Host { cpus: vec![0, 1], path: None };
        let programs = Programs { partita: "/usr/bin/partita".into(), fastdds: "/usr/lib/dbe-fastdds".into() };
        for w in IMPLEMENTATIONS {
            for r in IMPLEMENTATIONS {
                let spec = system_spec(w, r, "dbe-i", "t", &programs, &Setup::Normal, MATCH_TIMEOUT);
                spec.build(&host, "pair").unwrap_or_else(|e| panic!("{e}\n{}", spec.to_toml()));
            }
        }
    }
}
