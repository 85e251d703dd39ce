//! The agents' arguments (PROTOCOL.md), parsed by hand so that the same words reach partita's agents and the
//! Fast DDS one unchanged.
use crate::agent::channel::{Durability, History, QosChoice, Reliability, MAX_DATA};
use crate::agent::AgentError;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Ping,
    Pong,
    Pub,
    Sub,
    /// Fast DDS's discovery server.
    Server,
}

impl Role {
    pub fn key(self) -> &'static str {
        match self {
            Role::Ping => "ping",
            Role::Pong => "pong",
            Role::Pub => "pub",
            Role::Sub => "sub",
            Role::Server => "server",
        }
    }
}

/// `--idle-s` by default (PROTOCOL.md).
pub const IDLE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct AgentArgs {
    pub implementation: String,
    pub role: Role,
    pub domain: Option<u32>,
    pub topic: String,
    pub sizes: Vec<usize>,
    pub count: u64,
    pub warmup: u64,
    pub subscribers: u32,
    pub qos: QosChoice,
    pub seconds: f64,
    pub timeout: Duration,
    pub match_timeout: Duration,
    /// A sub ends this long after its last sample when no end marker came; a reliable writer waits as long
    /// at most for its readers to acknowledge the end markers.
    pub idle: Duration,
    pub transport: String,
    pub discovery_server: Option<String>,
    pub listen: Option<String>,
    pub peers: Vec<String>,
    pub cpu: Option<usize>,
}

fn bad(flag: &str, message: impl Into<String>) -> AgentError {
    AgentError::Argument { flag: flag.into(), message: message.into() }
}

fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, AgentError> {
    v.parse().map_err(|_| bad(flag, format!("{v:?} is not a number")))
}

/// `keep-last:N` or `keep-all`.
pub fn parse_history(v: &str) -> Option<History> {
    if v == "keep-all" {
        return Some(History::KeepAll);
    }
    let depth: u32 = v.strip_prefix("keep-last:")?.parse().ok()?;
    (depth >= 1).then_some(History::KeepLast(depth))
}

pub fn history_key(h: History) -> String {
    match h {
        History::KeepAll => "keep-all".into(),
        History::KeepLast(n) => format!("keep-last:{n}"),
    }
}

impl AgentArgs {
    /// An agent of `implementation` in `role` with every other argument at its default (PROTOCOL.md).
    pub fn new(implementation: &str, role: Role) -> AgentArgs {
        AgentArgs {
            implementation: implementation.into(),
            role,
            domain: None,
            topic: "dbe".into(),
            sizes: vec![4],
            count: 10_000,
            warmup: 1_000,
            subscribers: 1,
            qos: QosChoice { reliability: Reliability::Reliable, history: History::KeepLast(1), durability: Durability::Volatile },
            seconds: 2.0,
            timeout: Duration::from_millis(1000),
            match_timeout: Duration::from_secs(30),
            idle: IDLE,
            transport: "udp".into(),
            discovery_server: None,
            listen: None,
            peers: Vec::new(),
            cpu: None,
        }
    }

    pub fn parse(args: &[String]) -> Result<AgentArgs, AgentError> {
        let mut a = AgentArgs::new("", Role::Ping);
        let mut role = None;
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| bad(flag, "needs a value"));
            match flag.as_str() {
                "--impl" => a.implementation = value()?.clone(),
                "--role" => {
                    let v = value()?;
                    role = Some(match v.as_str() {
                        "ping" => Role::Ping,
                        "pong" => Role::Pong,
                        "pub" => Role::Pub,
                        "sub" => Role::Sub,
                        "server" => Role::Server,
                        _ => return Err(bad(flag, format!("{v:?}: one of ping, pong, pub, sub, server"))),
                    })
                }
                "--domain" => {
                    let d: u32 = number(flag, value()?)?;
                    if d > 232 {
                        return Err(bad(flag, format!("{d}: a DDS domain id is 0..=232")));
                    }
                    a.domain = Some(d)
                }
                "--topic" => {
                    let v = value()?;
                    if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        return Err(bad(flag, format!("{v:?}: letters, digits and _ only")));
                    }
                    a.topic = v.clone()
                }
                "--sizes" => {
                    let v = value()?;
                    a.sizes = v.split(',').map(|s| number::<usize>(flag, s.trim())).collect::<Result<_, _>>()?;
                    if let Some(s) = a.sizes.iter().find(|&&s| s == 0 || s > MAX_DATA) {
                        return Err(bad(flag, format!("{s}: sizes are 1..={MAX_DATA} bytes")));
                    }
                }
                "--count" => a.count = number(flag, value()?)?,
                "--warmup" => a.warmup = number(flag, value()?)?,
                "--subscribers" => {
                    a.subscribers = number(flag, value()?)?;
                    if a.subscribers == 0 {
                        return Err(bad(flag, "at least 1"));
                    }
                }
                "--reliability" => {
                    let v = value()?;
                    a.qos.reliability = match v.as_str() {
                        "reliable" => Reliability::Reliable,
                        "best-effort" => Reliability::BestEffort,
                        _ => return Err(bad(flag, format!("{v:?}: reliable or best-effort"))),
                    }
                }
                "--history" => {
                    let v = value()?;
                    a.qos.history = parse_history(v).ok_or_else(|| bad(flag, format!("{v:?}: keep-last:N (N ≥ 1) or keep-all")))?
                }
                "--durability" => {
                    let v = value()?;
                    a.qos.durability = match v.as_str() {
                        "volatile" => Durability::Volatile,
                        "transient-local" => Durability::TransientLocal,
                        _ => return Err(bad(flag, format!("{v:?}: volatile or transient-local"))),
                    }
                }
                "--seconds" => {
                    a.seconds = number(flag, value()?)?;
                    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
                        return Err(bad(flag, "more than 0 and at most 3600"));
                    }
                }
                "--timeout-ms" => a.timeout = Duration::from_millis(number(flag, value()?)?),
                "--match-timeout-s" => a.match_timeout = Duration::from_secs(number(flag, value()?)?),
                "--idle-s" => {
                    let s: f64 = number(flag, value()?)?;
                    if !(s > 0.0 && s <= 3600.0) {
                        return Err(bad(flag, "more than 0 and at most 3600"));
                    }
                    a.idle = Duration::from_secs_f64(s);
                }
                "--transport" => a.transport = value()?.clone(),
                "--discovery-server" => a.discovery_server = Some(value()?.clone()),
                "--listen" => a.listen = Some(value()?.clone()),
                "--peer" => a.peers.push(value()?.clone()),
                "--cpu" => a.cpu = Some(number(flag, value()?)?),
                other => return Err(bad(other, "unknown argument (see PROTOCOL.md of the DBE agents)")),
            }
        }
        if a.implementation.is_empty() {
            return Err(bad("--impl", "required"));
        }
        a.role = role.ok_or_else(|| bad("--role", "required: ping, pong, pub or sub"))?;
        if a.count == 0 && a.role == Role::Ping {
            return Err(bad("--count", "at least 1"));
        }
        Ok(a)
    }

    /// The arguments again, as words (what the runner passes to an agent).
    pub fn to_words(&self) -> Vec<String> {
        let mut w: Vec<String> = vec!["--impl".into(), self.implementation.clone(), "--role".into(), self.role.key().into()];
        if let Some(d) = self.domain {
            w.extend(["--domain".into(), d.to_string()]);
        }
        w.extend(["--topic".into(), self.topic.clone()]);
        w.extend(["--sizes".into(), self.sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(",")]);
        w.extend(["--count".into(), self.count.to_string(), "--warmup".into(), self.warmup.to_string()]);
        w.extend(["--subscribers".into(), self.subscribers.to_string()]);
        w.extend([
            "--reliability".into(),
            match self.qos.reliability {
                Reliability::Reliable => "reliable".into(),
                Reliability::BestEffort => "best-effort".into(),
            },
        ]);
        w.extend(["--history".into(), history_key(self.qos.history)]);
        w.extend([
            "--durability".into(),
            match self.qos.durability {
                Durability::Volatile => "volatile".into(),
                Durability::TransientLocal => "transient-local".into(),
            },
        ]);
        w.extend(["--seconds".into(), self.seconds.to_string()]);
        w.extend(["--timeout-ms".into(), self.timeout.as_millis().to_string()]);
        w.extend(["--match-timeout-s".into(), self.match_timeout.as_secs().to_string()]);
        if self.idle != IDLE {
            w.extend(["--idle-s".into(), self.idle.as_secs_f64().to_string()]);
        }
        w.extend(["--transport".into(), self.transport.clone()]);
        if let Some(s) = &self.discovery_server {
            w.extend(["--discovery-server".into(), s.clone()]);
        }
        if let Some(s) = &self.listen {
            w.extend(["--listen".into(), s.clone()]);
        }
        for p in &self.peers {
            w.extend(["--peer".into(), p.clone()]);
        }
        if let Some(c) = self.cpu {
            w.extend(["--cpu".into(), c.to_string()]);
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn arguments_round_trip_through_words() {
        let a = AgentArgs::parse(&words("--impl cyclone --role ping --sizes 4,16384 --history keep-all --reliability best-effort --durability transient-local --subscribers 2 --cpu 1 --peer 198.18.0.2:7000")).unwrap();
        let b = AgentArgs::parse(&a.to_words()).unwrap();
        assert_eq!(a.sizes, b.sizes);
        assert_eq!(a.qos, b.qos);
        assert_eq!(b.qos.history, History::KeepAll);
        assert_eq!(b.subscribers, 2);
        assert_eq!(b.peers, vec!["198.18.0.2:7000".to_string()]);
        assert_eq!(b.cpu, Some(1));
    }

    #[test]
    fn the_idle_time_is_passed_on_only_when_it_is_not_the_default() {
        let a = AgentArgs::parse(&words("--impl fastdds --role sub")).unwrap();
        assert_eq!(a.idle, IDLE);
        assert!(!a.to_words().contains(&"--idle-s".to_string()), "agents that predate it keep working");
        let b = AgentArgs::parse(&words("--impl fastdds --role sub --idle-s 1.5")).unwrap();
        assert_eq!(b.idle, Duration::from_millis(1500));
        assert_eq!(AgentArgs::parse(&b.to_words()).unwrap().idle, Duration::from_millis(1500));
    }

    #[test]
    fn bad_arguments_name_the_flag() {
        for (text, flag) in [
            ("--impl x --role ping --sizes 0", "--sizes"),
            ("--impl x --role ping --sizes 16385", "--sizes"),
            ("--impl x --role dance", "--role"),
            ("--impl x --role ping --history keep-last:0", "--history"),
            ("--impl x --role ping --domain 300", "--domain"),
            ("--impl x --role ping --bogus 1", "--bogus"),
            ("--role ping", "--impl"),
            ("--impl x --role ping --count", "--count"),
            ("--impl x --role sub --idle-s 0", "--idle-s"),
        ] {
            match AgentArgs::parse(&words(text)) {
                Err(AgentError::Argument { flag: f, .. }) => assert_eq!(f, flag, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
