//! The agents: one program interface for every implementation of the benchmark (`PROTOCOL.md` beside this file
//! is its specification). [`run`] parses an agent's arguments, opens the implementation's [`Channel`] and runs
//! one of the measuring loops of [`roles`]; the Fast DDS agent is a C++ program following the same protocol.
pub mod args;
pub mod channel;
pub mod cyclone;
mod error;
pub mod iceoryx;
pub mod output;
pub mod roles;
pub mod rustdds;
pub mod udp;

pub use args::{AgentArgs, Role};
pub use channel::{Channel, ChannelConfig, Durability, Ends, History, Matched, QosChoice, Reliability};
pub use error::AgentError;

/// An implementation partita's own binary carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltIn {
    Cyclone,
    RustDds,
    Iceoryx2,
    Udp,
}

impl BuiltIn {
    pub const ALL: [BuiltIn; 4] = [BuiltIn::Cyclone, BuiltIn::RustDds, BuiltIn::Iceoryx2, BuiltIn::Udp];

    pub fn key(self) -> &'static str {
        match self {
            BuiltIn::Cyclone => "cyclone",
            BuiltIn::RustDds => "rustdds",
            BuiltIn::Iceoryx2 => "iceoryx2",
            BuiltIn::Udp => "udp",
        }
    }

    pub fn from_key(k: &str) -> Option<BuiltIn> {
        BuiltIn::ALL.into_iter().find(|b| b.key() == k)
    }

    /// Opens this implementation's endpoints.
    pub fn open(self, cfg: &ChannelConfig) -> Result<Box<dyn Channel>, AgentError> {
        match self {
            BuiltIn::Cyclone => cyclone::open(cfg),
            BuiltIn::RustDds => rustdds::open(cfg),
            BuiltIn::Iceoryx2 => iceoryx::open(cfg),
            BuiltIn::Udp => udp::open(cfg),
        }
    }
}

/// Runs an agent of a built-in implementation with `args` (everything after `partita app dbe-agent`) and
/// returns the process exit status: 0 done, 1 failed (an `error` line was printed), 2 bad arguments.
pub fn run(args: &[String]) -> i32 {
    let started = std::time::Instant::now();
    let parsed = match AgentArgs::parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("partita app dbe-agent: {e}");
            return 2;
        }
    };
    let Some(implementation) = BuiltIn::from_key(&parsed.implementation) else {
        eprintln!(
            "partita app dbe-agent: --impl {}: not built into partita (built in: cyclone, rustdds, iceoryx2, udp; Fast DDS has its own agent)",
            parsed.implementation
        );
        return 2;
    };
    if let Some(cpu) = parsed.cpu {
        if let Err(e) = partita_os::sched::pin_current_thread(cpu) {
            output::error(&format!("--cpu {cpu}: {e}"));
            return 1;
        }
    }
    match roles::run(implementation, &parsed, started) {
        Ok(()) => 0,
        Err(e) => {
            output::error(&e.to_string());
            1
        }
    }
}
