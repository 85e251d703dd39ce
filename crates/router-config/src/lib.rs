//! partita-router-config: the routing service's configuration, in TOML, validated with errors that name the
//! file, the field and the fix.
//!
//! A crate of its own, without DDS: the system description (`partita-system`) validates an I/O partition's
//! `[module.partition.router]` table with it and so never builds Cyclone DDS. The routing service
//! (`partita-router`) starts from the validated form and gives each side the DDS domain its participant joins.
//!
//! ```toml
//! name = "io"                 # announced in statistics
//! max_topics = 64             # routed topics at most, over all routes (protection of the partitioned side)
//! stats_period = "1s"         # how often statistics are published and printed
//! stats_side = "network"      # side whose domain carries the statistics topic (default: the first side)
//! mirror_participants = true  # a proxy participant per application participant on the other sides
//! batch_delay = "100us"       # under a flood, forwarded samples share datagrams, waiting at most this long;
//!                             # "0s" sends every sample on its own
//!
//! [[side]]                    # one DDS participant per side
//! name = "module"
//! domain = 1
//! interface = "lo"            # the network interface the participant binds to
//! peers = ["127.0.0.1"]       # unicast discovery peers (multicast stays off unless `multicast = true`)
//!
//! [[side]]
//! name = "network"
//! domain = 2
//!
//! [[route]]
//! from = "module"
//! to = "network"
//! both_ways = true
//! allow = ["*"]               # topic-name patterns, or "type:PATTERN" for type names
//! block = ["secret/*"]        # the blocklist wins over the allowlist
//! partitions = ["*"]          # DDS partition patterns a writer must be in
//! trigger = "writer-and-reader"   # or "writer" (a writer on the source side is enough), "reader" (a reader
//!                                 # on the destination side is enough), "either"
//!
//! [[route.topic]]             # per-topic overrides (first matching pattern wins)
//! name = "video/*"
//! max_rate = 30.0             # samples/s forwarded at most; the rest is dropped and counted
//! max_rate_per_instance = 10.0 # samples/s per instance (key) at most: one flooding key cannot starve others
//! downsample = 2              # forward one sample in N
//! history = 8                 # bounded queue per route (keep-last N on the router's reader)
//! batch_delay = "0s"          # this topic's own batch_delay (here: never batched)
//! reliability = "best-effort" # or "reliable"; default: the discovered writer's
//! durability = "volatile"     # or "transient-local"; default: the discovered writer's
//! ```
#![forbid(unsafe_code)]
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A configuration problem: where, what, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{line}: {field}: {problem}; {fix}", line = .line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    pub file: String,
    pub line: Option<usize>,
    pub field: String,
    pub problem: String,
    pub fix: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// A route appears when a writer exists on the source side and a reader on the destination side.
    #[default]
    WriterAndReader,
    /// A route appears as soon as a writer exists on the source side.
    Writer,
    /// A route appears as soon as a reader exists on the destination side: the router's reader on the source
    /// side then stands for it, which is what applications need that create their writers only once they see
    /// a reader (request/reply tools such as ddsperf do).
    Reader,
    /// Either a writer on the source side or a reader on the destination side.
    Either,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReliabilityOverride {
    BestEffort,
    Reliable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DurabilityOverride {
    Volatile,
    TransientLocal,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SideConfig {
    pub name: String,
    pub domain: u32,
    #[serde(default = "default_interface")]
    pub interface: String,
    #[serde(default = "default_peers")]
    pub peers: Vec<String>,
    #[serde(default)]
    pub multicast: bool,
}

fn default_interface() -> String {
    "lo".into()
}
fn default_peers() -> Vec<String> {
    vec!["127.0.0.1".into()]
}
fn default_allow() -> Vec<String> {
    vec!["*".into()]
}
fn default_max_topics() -> usize {
    64
}
fn default_stats_period() -> String {
    "1s".into()
}
fn default_batch_delay() -> String {
    "100us".into()
}
fn default_true() -> bool {
    true
}
fn default_name() -> String {
    "router".into()
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TopicOverride {
    pub name: String,
    pub max_rate: Option<f64>,
    /// Samples per second forwarded at most per instance (per key value), so that one writer flooding its own
    /// key cannot use up a topic's whole `max_rate`.
    pub max_rate_per_instance: Option<f64>,
    pub downsample: Option<u32>,
    pub history: Option<u32>,
    pub reliability: Option<ReliabilityOverride>,
    pub durability: Option<DurabilityOverride>,
    /// The router's `batch_delay` for this topic.
    pub batch_delay: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub both_ways: bool,
    #[serde(default = "default_allow")]
    pub allow: Vec<String>,
    #[serde(default)]
    pub block: Vec<String>,
    #[serde(default = "default_allow")]
    pub partitions: Vec<String>,
    #[serde(default)]
    pub trigger: Trigger,
    #[serde(default, rename = "topic")]
    pub topics: Vec<TopicOverride>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default = "default_max_topics")]
    pub max_topics: usize,
    #[serde(default = "default_stats_period")]
    pub stats_period: String,
    pub stats_side: Option<String>,
    /// Mirror each application participant by a proxy participant on the other sides (same USER_DATA), and
    /// translate partition names that spell a participant's GUID.
    #[serde(default = "default_true")]
    pub mirror_participants: bool,
    /// The longest a forwarded sample waits to share a datagram with the samples that follow it in a burst;
    /// zero: no batching (see partita-router's `batch.rs`).
    #[serde(default = "default_batch_delay")]
    pub batch_delay: String,
    /// Whether DDS applications share the router's process (a router embedded in a program, or a test). Off
    /// (the default, and always so for `partita route`): the router's readers ignore every writer of its own
    /// process, so what it forwards is never delivered back to it. Within one process Cyclone delivers a
    /// write to the matching readers inside the write call: a forwarder's write delivered to the router's
    /// reader of the other direction runs that reader's callback inside its own, and should it forward the
    /// sample back, the delivery waits for the callback it runs in (docs/router.md, "No loops"). On: only the
    /// router's own participant's writers are ignored; the rest of its writers are registered as the router's
    /// when they are created (see partita-router's `forwarder.rs`). Not a key of the configuration file.
    #[serde(skip)]
    pub local_applications: bool,
    #[serde(rename = "side", default)]
    pub sides: Vec<SideConfig>,
    #[serde(rename = "route", default)]
    pub routes: Vec<RouteConfig>,
    /// Topics carried between a DDS side and the I/O partition's ARINC 653 ports, for partitions without a
    /// network (`[[port]]`, docs/ports.md).
    #[serde(rename = "port", default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortRouteConfig>,
}

/// A topic carried through a port (`[[port]]`): samples of `topic` on `side` go into the port `to_port` (a
/// source port of the I/O partition), or the DDS frames a partition writes into the channel whose destination
/// is `from_port` are published as `topic` on `side`. The samples pass as serialized CDR with their key hash,
/// instance life cycle and source timestamp (partita-ports' `dds_frame`), for any type.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PortRouteConfig {
    #[serde(default = "default_port_side")]
    pub side: String,
    pub topic: String,
    /// The DDS type name, as the applications on `side` announce it.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Whether the type has a key (the samples then carry its key hash).
    #[serde(default)]
    pub keyed: bool,
    pub to_port: Option<String>,
    pub from_port: Option<String>,
    /// Keep-last depth of the router's reader or writer of the topic (default 16).
    pub history: Option<u32>,
    pub reliability: Option<ReliabilityOverride>,
}

fn default_port_side() -> String {
    EMBEDDED_SIDES[1].to_string()
}

/// The two sides of a router embedded in a system file.
pub const EMBEDDED_SIDES: [&str; 2] = ["module", "network"];
/// The third side of a router embedded in a system file whose I/O partition owns an uplink: the uplink's DDS
/// domain (docs/deployment.md).
pub const UPLINK_SIDE: &str = "uplink";
/// The `batch_delay` of a router whose file sets none.
pub const DEFAULT_BATCH_DELAY: Duration = Duration::from_micros(100);

/// The longest `stats_period`: statistics published less often than hourly tell nothing of a running router,
/// and a period this bound keeps the printing loop's deadlines (`now + period`) far from `Instant`'s range.
pub const MAX_STATS_PERIOD: Duration = Duration::from_secs(3600);
/// The longest `batch_delay`: a forwarded sample may wait this long at most.
pub const MAX_BATCH_DELAY: Duration = Duration::from_millis(100);
/// The deepest `history`: Cyclone's keep-last depth is a signed 32-bit number.
pub const MAX_HISTORY: u32 = i32::MAX as u32;

/// Why a text is not a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("has no unit (ns, us, µs, ms or s)")]
    NoUnit,
    #[error("has an unknown unit (not ns, us, µs, ms or s)")]
    UnknownUnit,
    #[error("does not start with a decimal number")]
    NotANumber,
    #[error("is negative")]
    Negative,
    #[error("is longer than any duration this program can wait (about 584 years)")]
    TooLong,
}

/// Parses a duration with a unit: `500us`, `250µs`, `20ms`, `1.5s`. Checked: a number too large for a
/// [`Duration`] is an error, never a panic.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_alphabetic()).ok_or(DurationError::NoUnit)?;
    let (num, unit) = s.split_at(split);
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return Err(DurationError::UnknownUnit),
    };
    let num = num.trim();
    // Plain decimals only: `f64::from_str` would also take "inf", "NaN" and exponents.
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.' || c == '-' || c == '+') {
        return Err(DurationError::NotANumber);
    }
    let v: f64 = num.parse().map_err(|_| DurationError::NotANumber)?;
    if v.is_sign_negative() && v != 0.0 {
        return Err(DurationError::Negative);
    }
    Duration::try_from_secs_f64(v.abs() * scale).map_err(|_| DurationError::TooLong)
}

impl RouterConfig {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Self, Vec<ConfigError>> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![ConfigError {
                file: path.display().to_string(),
                line: None,
                field: "(file)".into(),
                problem: format!("cannot read: {e}"),
                fix: "give the path of a readable TOML file".into(),
            }]
        })?;
        Self::parse(&text, path)
    }

    /// Parses and validates configuration text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, Vec<ConfigError>> {
        let file = path.display().to_string();
        let cfg: RouterConfig = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|sp| text.as_bytes()[..sp.start.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1);
            vec![ConfigError {
                file: file.clone(),
                line,
                field: "(syntax)".into(),
                problem: e.message().to_string(),
                fix: "see the configuration reference in docs/router.md".into(),
            }]
        })?;
        let errors = cfg.validate(&file, text);
        if errors.is_empty() {
            Ok(cfg)
        } else {
            Err(errors)
        }
    }

    /// A router configuration embedded in a system file's I/O partition (`[module.partition.router]`): the
    /// keys of a router file without `[[side]]`, whose two sides are implicit, `module` (the module's V-NETWORK)
    /// and `network` (the inter-module network). Errors name `origin`. The returned sides are placeholders;
    /// [`RouterConfig::for_io_partition`] replaces them with the partition's domains.
    pub fn parse_embedded(text: &str, origin: &str) -> Result<Self, Vec<ConfigError>> {
        Self::parse_embedded_with(text, origin, false)
    }

    /// [`RouterConfig::parse_embedded`] for an I/O partition that owns an uplink (`uplink`): a third side,
    /// `uplink`, may be named in routes; without routes, every topic goes both ways between the module and each
    /// of the other two sides.
    pub fn parse_embedded_with(text: &str, origin: &str, uplink: bool) -> Result<Self, Vec<ConfigError>> {
        let err = |field: &str, problem: String, fix: &str| ConfigError {
            file: origin.into(),
            line: None,
            field: field.into(),
            problem,
            fix: fix.into(),
        };
        let mut cfg: RouterConfig = toml::from_str(text)
            .map_err(|e| vec![err("(syntax)", e.message().to_string(), "see the configuration reference in docs/router.md")])?;
        if !cfg.sides.is_empty() {
            return Err(vec![err(
                "side",
                "an I/O partition's router has implicit sides, `module`, `network` and, with an uplink, `uplink`".into(),
                "remove the [[side]] tables and name the sides module, network or uplink in the routes",
            )]);
        }
        // A table that only sets limits or options keeps the default: every topic both ways.
        if cfg.routes.is_empty() {
            cfg.routes = default_routes(uplink);
        }
        cfg.sides = EMBEDDED_SIDES
            .iter()
            .chain(uplink.then_some(&UPLINK_SIDE))
            .enumerate()
            .map(|(i, n)| SideConfig {
                name: (*n).into(),
                domain: i as u32,
                interface: default_interface(),
                peers: default_peers(),
                multicast: false,
            })
            .collect();
        let errors: Vec<ConfigError> = cfg
            .validate(origin, text)
            .into_iter()
            .map(|mut e| {
                e.line = None;
                e
            })
            .collect();
        if errors.is_empty() {
            Ok(cfg)
        } else {
            Err(errors)
        }
    }

    /// The whole configuration of an I/O partition's routing service, which the supervisor writes into the
    /// partition's view ([`RouterConfig::to_file`]): `embedded`, the system file's `[module.partition.router]`
    /// as [`RouterConfig::parse_embedded_with`] validated it (`None`: no table, every topic both ways), with
    /// `sides`, the partition's V-NICs named `module`, `network` and, when it owns an uplink, `uplink`. The
    /// router is named after `partition` unless the table names it.
    pub fn for_io_partition(embedded: Option<&RouterConfig>, partition: &str, sides: Vec<SideConfig>) -> Self {
        let uplink = sides.iter().any(|s| s.name == UPLINK_SIDE);
        let mut cfg = match embedded {
            Some(e) => e.clone(),
            None => RouterConfig {
                name: default_name(),
                max_topics: default_max_topics(),
                stats_period: default_stats_period(),
                stats_side: None,
                mirror_participants: true,
                batch_delay: default_batch_delay(),
                local_applications: false,
                sides: Vec::new(),
                routes: default_routes(uplink),
                ports: Vec::new(),
            },
        };
        cfg.sides = sides;
        if cfg.name == default_name() {
            cfg.name = partition.to_string();
        }
        cfg
    }

    /// What differs between this configuration and `new` that a running router cannot take over (partita-router's
    /// `Router::reload`): its sides (name, domain, interface, peers, multicast), its name (every participant
    /// announces it), its port routes (the ports are opened at start), `stats_side` (the statistics writer lives
    /// on that side's participant), `mirror_participants` (it decides where every forwarder's endpoints live) and
    /// `local_applications`. Each as (field, what changed); empty when `new` can be reloaded.
    pub fn fixed_differences(&self, new: &RouterConfig) -> Vec<(String, String)> {
        let mut diff = Vec::new();
        let sides = |c: &RouterConfig| c.sides.iter().map(|s| s.name.clone()).collect::<Vec<_>>().join(", ");
        if self.sides.len() != new.sides.len() || self.sides.iter().zip(&new.sides).any(|(a, b)| a.name != b.name) {
            diff.push(("side".to_string(), format!("the sides were [{}] and would be [{}]", sides(self), sides(new))));
        } else {
            for (i, (a, b)) in self.sides.iter().zip(&new.sides).enumerate() {
                if a != b {
                    diff.push((format!("side[{i}]"), format!("side {:?} would change (domain, interface, peers or multicast)", a.name)));
                }
            }
        }
        if self.name != new.name {
            diff.push(("name".to_string(), format!("{:?} would become {:?}", self.name, new.name)));
        }
        if self.ports != new.ports {
            diff.push(("port".to_string(), "the port routes ([[port]]) would change".to_string()));
        }
        if self.stats_side != new.stats_side {
            diff.push(("stats_side".to_string(), format!("{:?} would become {:?}", self.stats_side, new.stats_side)));
        }
        if self.mirror_participants != new.mirror_participants {
            diff.push(("mirror_participants".to_string(), format!("{} would become {}", self.mirror_participants, new.mirror_participants)));
        }
        if self.local_applications != new.local_applications {
            diff.push(("local_applications".to_string(), format!("{} would become {}", self.local_applications, new.local_applications)));
        }
        diff
    }

    /// The configuration as a router file that [`RouterConfig::parse`] reads back to an equal value, after
    /// `header` (comment lines, each written with `# `).
    pub fn to_file(&self, header: &str) -> String {
        let mut out: String = header.lines().map(|l| format!("# {l}\n")).collect();
        out.push_str(&toml::to_string(self).expect("a router configuration is plain TOML: strings, numbers, booleans and tables"));
        out
    }

    /// How often statistics are published and printed (validated: above zero, at most [`MAX_STATS_PERIOD`]).
    pub fn stats_period(&self) -> Duration {
        stats_period(&self.stats_period).unwrap_or(Duration::from_secs(1))
    }

    /// The longest a forwarded sample of a topic with override `ov` may wait in a batch: the router's
    /// `batch_delay` unless the override has its own. Zero: the topic is never batched.
    pub fn batch_delay(&self, ov: &TopicOverride) -> Duration {
        let text = ov.batch_delay.as_deref().unwrap_or(&self.batch_delay);
        batch_delay(text).unwrap_or(DEFAULT_BATCH_DELAY)
    }

    fn validate(&self, file: &str, text: &str) -> Vec<ConfigError> {
        let mut errs = Vec::new();
        // Line of the first occurrence of `needle` after the `n`-th occurrence of `table` (best effort).
        let line_of = |table: &str, n: usize, needle: &str| -> Option<usize> {
            let mut start = 0;
            for _ in 0..=n {
                let i = text[start..].find(table)?;
                start += i + table.len();
            }
            let at = text[start..].find(needle).map(|i| start + i).unwrap_or(start);
            Some(text[..at].matches('\n').count() + 1)
        };
        let mut err = |line: Option<usize>, field: String, problem: String, fix: &str| {
            errs.push(ConfigError { file: file.into(), line, field, problem, fix: fix.into() })
        };
        if let Err((problem, fix)) = stats_period(&self.stats_period) {
            err(line_of("", 0, "stats_period"), "stats_period".into(), problem, fix);
        }
        if let Err((problem, fix)) = batch_delay(&self.batch_delay) {
            err(line_of("", 0, "batch_delay"), "batch_delay".into(), problem, fix);
        }
        if self.max_topics == 0 {
            err(line_of("", 0, "max_topics"), "max_topics".into(), "0 would route nothing".into(), "set max_topics to at least 1");
        }
        if self.sides.len() < 2 {
            err(None, "side".into(), format!("{} side(s) defined", self.sides.len()), "define at least two [[side]] tables (the domains to connect)");
        }
        let mut names = std::collections::HashSet::new();
        let mut domains = std::collections::HashMap::new();
        for (i, s) in self.sides.iter().enumerate() {
            let f = |k: &str| format!("side[{i}].{k}");
            let l = |k: &str| line_of("[[side]]", i, k);
            if s.name.is_empty() || !names.insert(s.name.clone()) {
                err(l("name"), f("name"), format!("side name {:?} is empty or used twice", s.name), "give every side a unique name");
            }
            if s.domain > 232 {
                err(l("domain"), f("domain"), format!("domain {} is out of range", s.domain), "use a DDS domain id from 0 to 232");
            }
            if let Some(other) = domains.insert(s.domain, s.name.clone()) {
                err(l("domain"), f("domain"), format!("domain {} is also side {other:?}'s", s.domain), "give each side its own domain id (one process holds one configuration per domain)");
            }
            let valid_if = !s.interface.is_empty()
                && s.interface.len() <= 15
                && s.interface.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c));
            if !valid_if {
                err(l("interface"), f("interface"), format!("{:?} is not a network interface name", s.interface), "name an interface of this network namespace, e.g. \"lo\" or a V-NIC");
            }
            if !s.multicast && s.peers.is_empty() {
                err(l("peers"), f("peers"), "no unicast peers and multicast off: nothing would be discovered".into(), "list the peers' addresses, e.g. peers = [\"127.0.0.1\"]");
            }
        }
        if let Some(ss) = &self.stats_side {
            if !self.sides.iter().any(|s| &s.name == ss) {
                err(line_of("", 0, "stats_side"), "stats_side".into(), format!("no side named {ss:?}"), "name one of the [[side]] tables");
            }
        }
        if self.routes.is_empty() {
            err(None, "route".into(), "no routes defined".into(), "add a [[route]] table with from and to");
        }
        for (i, r) in self.routes.iter().enumerate() {
            let f = |k: &str| format!("route[{i}].{k}");
            let l = |k: &str| line_of("[[route]]", i, k);
            for (key, side) in [("from", &r.from), ("to", &r.to)] {
                if !self.sides.iter().any(|s| &s.name == side) {
                    err(l(key), f(key), format!("no side named {side:?}"), "name one of the [[side]] tables");
                }
            }
            if r.from == r.to {
                err(l("to"), f("to"), format!("route from {:?} to itself", r.from), "route between two different sides");
            }
            if r.allow.is_empty() {
                err(l("allow"), f("allow"), "an empty allowlist routes nothing".into(), "allow at least one pattern, e.g. [\"*\"]");
            }
            for (j, t) in r.topics.iter().enumerate() {
                let f = |k: &str| format!("route[{i}].topic[{j}].{k}");
                let l = |k: &str| line_of("[[route.topic]]", j, k);
                if t.max_rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
                    err(l("max_rate"), f("max_rate"), format!("{:?} is not a positive rate", t.max_rate.unwrap()), "give samples per second above 0, or remove the key");
                }
                if t.max_rate_per_instance.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
                    err(l("max_rate_per_instance"), f("max_rate_per_instance"), format!("{:?} is not a positive rate", t.max_rate_per_instance.unwrap()), "give samples per second above 0, or remove the key");
                }
                if t.downsample == Some(0) {
                    err(l("downsample"), f("downsample"), "0".into(), "forward one sample in N with N >= 1");
                }
                if t.history == Some(0) {
                    err(l("history"), f("history"), "0".into(), "keep at least 1 sample per route");
                }
                if let Some(h) = t.history.filter(|h| *h > MAX_HISTORY) {
                    err(l("history"), f("history"), format!("{h} samples is deeper than DDS allows"), "keep at most 2147483647 samples per route (a few suffice: this is the router's queue)");
                }
                if let Some(Err((problem, fix))) = t.batch_delay.as_deref().map(batch_delay) {
                    err(l("batch_delay"), f("batch_delay"), problem, fix);
                }
            }
        }
        for (i, p) in self.ports.iter().enumerate() {
            let f = |k: &str| format!("port[{i}].{k}");
            let l = |k: &str| line_of("[[port]]", i, k);
            if !self.sides.iter().any(|s| s.name == p.side) {
                err(l("side"), f("side"), format!("no side named {:?}", p.side), "name one of the router's sides (an I/O partition's: module, network or uplink)");
            }
            if p.topic.is_empty() {
                err(l("topic"), f("topic"), "an empty topic name".into(), "name the DDS topic to carry, e.g. \"surveillance/request\"");
            }
            if p.type_name.is_empty() {
                err(l("type"), f("type"), "an empty type name".into(), "give the DDS type name the applications announce, e.g. \"partita::surveillance::FrameRequest\"");
            }
            if p.to_port.is_some() == p.from_port.is_some() {
                err(l("topic"), f("to_port"), "a port route names either to_port or from_port".into(), "to_port = a source port of the I/O partition (DDS → port), or from_port = a destination port (port → DDS)");
            }
            if p.history == Some(0) || p.history.is_some_and(|h| h > MAX_HISTORY) {
                err(l("history"), f("history"), format!("{} is not a keep-last depth", p.history.unwrap_or(0)), "keep 1 to 2147483647 samples (a few suffice)");
            }
        }
        errs
    }
}

/// A `stats_period` value: a duration above zero and of at most an hour, or what is wrong with it and how to fix
/// it.
fn stats_period(text: &str) -> Result<Duration, (String, &'static str)> {
    const FIX: &str = "write a positive duration with a unit, at most an hour (\"3600s\"), e.g. \"1s\" or \"500ms\"";
    match parse_duration(text) {
        Err(e) => Err((format!("{text:?} is not a duration: it {e}"), FIX)),
        Ok(d) if d.is_zero() => Err((format!("{text:?} is zero: statistics would be published without a pause"), FIX)),
        Ok(d) if d > MAX_STATS_PERIOD => Err((
            format!("{text:?} is longer than an hour: the statistics would hardly ever be printed or published"),
            "use at most \"3600s\" (the default is \"1s\")",
        )),
        Ok(d) => Ok(d),
    }
}

/// A `batch_delay` value: a duration of at most [`MAX_BATCH_DELAY`], or what is wrong with it and how to fix it.
fn batch_delay(text: &str) -> Result<Duration, (String, &'static str)> {
    match parse_duration(text) {
        Err(e) => Err((
            format!("{text:?} is not a duration: it {e}"),
            "write a duration with a unit, e.g. \"100us\", or \"0s\" to send every sample on its own",
        )),
        Ok(d) if d > MAX_BATCH_DELAY => Err((
            format!("{text:?} would hold samples back for longer than 100 ms"),
            "use at most \"100ms\" (the default \"100us\" suits floods of small samples)",
        )),
        Ok(d) => Ok(d),
    }
}

/// Where a configuration came from, for messages.
pub fn describe(path: Option<&PathBuf>) -> String {
    path.map(|p| p.display().to_string()).unwrap_or_else(|| "(built-in)".into())
}

/// The default routes of an I/O partition: every topic, both ways, between its module and the network, and
/// between its module and its uplink when it owns one.
fn default_routes(uplink: bool) -> Vec<RouteConfig> {
    let mut routes = vec![every_topic_both_ways(EMBEDDED_SIDES[1])];
    if uplink {
        routes.push(every_topic_both_ways(UPLINK_SIDE));
    }
    routes
}

/// Every topic, both ways, between the module and `other`.
fn every_topic_both_ways(other: &str) -> RouteConfig {
    RouteConfig {
        from: EMBEDDED_SIDES[0].into(),
        to: other.into(),
        both_ways: true,
        allow: default_allow(),
        block: Vec::new(),
        partitions: default_allow(),
        trigger: Trigger::default(),
        topics: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[side]]
name = "module"
domain = 1

[[side]]
name = "network"
domain = 2

[[route]]
from = "module"
to = "network"
both_ways = true
block = ["secret/*"]

[[route.topic]]
name = "video/*"
max_rate = 30.0
"#;

    fn errs(text: &str) -> Vec<ConfigError> {
        RouterConfig::parse(text, Path::new("r.toml")).err().unwrap_or_default()
    }

    #[test]
    fn good_config_parses() {
        let c = RouterConfig::parse(GOOD, Path::new("r.toml")).unwrap();
        assert_eq!(c.sides.len(), 2);
        assert_eq!(c.routes[0].topics[0].max_rate, Some(30.0));
        assert_eq!(c.routes[0].allow, vec!["*"]);
        assert_eq!(c.stats_period(), Duration::from_secs(1));
    }

    #[test]
    fn unknown_key_names_file_and_line() {
        let e = errs(&GOOD.replace("both_ways = true", "both_way = true"));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].line, Some(13), "{e:?}");
        assert!(e[0].to_string().starts_with("r.toml:13:"), "{}", e[0]);
        assert!(e[0].problem.contains("both_way"), "{}", e[0]);
    }

    #[test]
    fn semantic_errors_are_all_reported() {
        let bad = GOOD.replace("domain = 2", "domain = 1").replace("to = \"network\"", "to = \"nowhere\"").replace("max_rate = 30.0", "max_rate = -1.0");
        let e = errs(&bad);
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert!(fields.contains(&"side[1].domain"), "{e:?}");
        assert!(fields.contains(&"route[0].to"), "{e:?}");
        assert!(fields.contains(&"route[0].topic[0].max_rate"), "{e:?}");
        let dom = e.iter().find(|e| e.field == "side[1].domain").unwrap();
        assert_eq!(dom.line, Some(8));
    }

    #[test]
    fn batch_delay_is_a_bounded_duration_and_zero_turns_batching_off() {
        let c = RouterConfig::parse(GOOD, Path::new("r.toml")).unwrap();
        let (video, other) = (c.routes[0].topics[0].clone(), TopicOverride::default());
        assert_eq!(c.batch_delay(&other), DEFAULT_BATCH_DELAY, "batching is on by default");
        let with = |v: &str| format!("batch_delay = \"{v}\"\n{GOOD}");
        let c = RouterConfig::parse(&with("0s"), Path::new("r.toml")).unwrap();
        assert_eq!(c.batch_delay(&other), Duration::ZERO);
        let c = RouterConfig::parse(&with("250us"), Path::new("r.toml")).unwrap();
        assert_eq!(c.batch_delay(&other), Duration::from_micros(250));
        assert_eq!(c.batch_delay(&video), Duration::from_micros(250), "no override: the router's");
        for bad in ["soon", "1s"] {
            let e = errs(&with(bad));
            assert_eq!(e.len(), 1, "{bad}: {e:?}");
            assert_eq!(e[0].field, "batch_delay");
            assert_eq!(e[0].line, Some(1), "{e:?}");
            assert!(e[0].fix.contains("0s") || e[0].fix.contains("100ms"), "{e:?}");
        }
        // A topic's own delay wins over the router's, and is checked the same way.
        let topic = |v: &str| GOOD.replace("max_rate = 30.0", &format!("max_rate = 30.0\nbatch_delay = \"{v}\""));
        let c = RouterConfig::parse(&topic("0s"), Path::new("r.toml")).unwrap();
        assert_eq!(c.batch_delay(&c.routes[0].topics[0]), Duration::ZERO);
        assert_eq!(c.batch_delay(&other), DEFAULT_BATCH_DELAY);
        let e = errs(&topic("later"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].field, "route[0].topic[0].batch_delay");
        assert_eq!(e[0].line, Some(19), "{e:?}");
    }

    /// A side on a V-NIC, as the supervisor fills an I/O partition's sides.
    fn vnic(name: &str, domain: u32, interface: &str) -> SideConfig {
        SideConfig { name: name.into(), domain, interface: interface.into(), peers: vec!["198.18.0.2".into(), "198.18.0.3".into()], multicast: false }
    }

    /// An I/O partition's whole router configuration from its table (`None`: none), on V-NICs of domains 3 and
    /// 7 and, with `uplink`, a third side of domain 9; the table's errors as the system file's validation gives them.
    fn io(table: Option<&str>, partition: &str, uplink: bool) -> Result<RouterConfig, Vec<ConfigError>> {
        let embedded = table.map(|t| RouterConfig::parse_embedded_with(t, "system.toml", uplink)).transpose()?;
        let mut sides = vec![vnic("module", 3, "vnic0"), vnic("network", 7, "vnic1")];
        if uplink {
            sides.push(vnic("uplink", 9, "uplink0"));
        }
        Ok(RouterConfig::for_io_partition(embedded.as_ref(), partition, sides))
    }

    #[test]
    fn an_io_partition_without_a_table_routes_everything_both_ways_between_its_two_domains() {
        let c = io(None, "routing", false).unwrap();
        assert_eq!(c.name, "routing");
        let sides: Vec<(&str, u32, &str)> = c.sides.iter().map(|s| (s.name.as_str(), s.domain, s.interface.as_str())).collect();
        assert_eq!(sides, [("module", 3, "vnic0"), ("network", 7, "vnic1")]);
        assert_eq!(c.routes.len(), 1);
        let r = &c.routes[0];
        assert!(r.both_ways && r.allow == ["*"] && r.block.is_empty() && r.trigger == Trigger::WriterAndReader);
    }

    #[test]
    fn an_io_partitions_table_gives_the_routes_and_may_name_the_router() {
        let table = "[[route]]\nfrom = \"network\"\nto = \"module\"\nallow = [\"camera/*\"]\n";
        let c = io(Some(table), "routing", false).unwrap();
        assert_eq!((c.name.as_str(), c.sides[0].domain, c.sides[1].domain), ("routing", 3, 7));
        assert_eq!(c.routes[0].allow, ["camera/*"]);
        assert!(!c.routes[0].both_ways);
        let named = io(Some(&format!("name = \"io\"\n{table}")), "routing", false).unwrap();
        assert_eq!(named.name, "io");
        let e = io(Some("max_topics = 0\n"), "routing", false).unwrap_err();
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["max_topics"], "{e:?}");
        assert!(e.iter().all(|e| e.file == "system.toml"), "{e:?}");
    }

    #[test]
    fn a_table_that_only_sets_limits_keeps_every_topic_both_ways() {
        let c = io(Some("max_topics = 8\n"), "routing", false).unwrap();
        assert_eq!(c.max_topics, 8);
        assert_eq!(c.routes.len(), 1);
        let r = &c.routes[0];
        assert!(r.both_ways && r.allow == ["*"] && (r.from.as_str(), r.to.as_str()) == ("module", "network"), "{r:?}");
    }

    #[test]
    fn an_io_partition_with_an_uplink_has_a_third_side_and_routes_to_it_by_default() {
        let c = io(None, "routing", true).unwrap();
        let sides: Vec<(&str, u32)> = c.sides.iter().map(|s| (s.name.as_str(), s.domain)).collect();
        assert_eq!(sides, [("module", 3), ("network", 7), ("uplink", 9)]);
        let pairs: Vec<(&str, &str, bool)> = c.routes.iter().map(|r| (r.from.as_str(), r.to.as_str(), r.both_ways)).collect();
        assert_eq!(pairs, [("module", "network", true), ("module", "uplink", true)]);
        // a table may route the uplink, and only where there is one
        let table = "[[route]]\nfrom = \"uplink\"\nto = \"module\"\n";
        let c = io(Some(table), "routing", true).unwrap();
        assert_eq!((c.routes.len(), c.routes[0].from.as_str()), (1, "uplink"));
        let e = io(Some(table), "routing", false).unwrap_err();
        assert!(e.iter().any(|e| e.field == "route[0].from" && e.problem.contains("uplink")), "{e:?}");
    }

    #[test]
    fn an_io_partitions_file_reads_back_as_the_value_it_was_written_from() {
        let table = concat!(
            "name = \"io\"\nmax_topics = 9\nstats_period = \"250ms\"\nstats_side = \"module\"\nbatch_delay = \"0s\"\n",
            "mirror_participants = false\n\n[[route]]\nfrom = \"uplink\"\nto = \"module\"\nblock = [\"secret/*\"]\n",
            "trigger = \"reader\"\n\n[[route.topic]]\nname = \"video/*\"\nmax_rate = 29.97\ndownsample = 2\nhistory = 8\n",
            "reliability = \"best-effort\"\ndurability = \"transient-local\"\nbatch_delay = \"20us\"\n",
        );
        for (table, uplink) in [(None, false), (None, true), (Some(table), true)] {
            let c = io(table, "routing", uplink).unwrap();
            let text = c.to_file("written by a test\nsecond line");
            assert!(text.starts_with("# written by a test\n# second line\n"), "{text}");
            let back = RouterConfig::parse(&text, Path::new("router.toml")).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
            assert_eq!(back, c, "{text}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1.5ms"), Ok(Duration::from_micros(1500)));
        assert_eq!(parse_duration(" 2 s "), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("2"), Err(DurationError::NoUnit));
        assert_eq!(parse_duration("-1s"), Err(DurationError::Negative));
        assert_eq!(parse_duration("3 parsecs"), Err(DurationError::UnknownUnit));
        assert_eq!(parse_duration("1e300s"), Err(DurationError::UnknownUnit), "no exponents: \"e300s\" is the unit");
        assert_eq!(parse_duration("infs"), Err(DurationError::UnknownUnit));
        assert_eq!(parse_duration("ms"), Err(DurationError::NotANumber));
        assert_eq!(parse_duration("1..5s"), Err(DurationError::NotANumber));
        assert_eq!(parse_duration("99999999999999999999s"), Err(DurationError::TooLong));
        assert_eq!(parse_duration(&format!("{}ns", "9".repeat(400))), Err(DurationError::TooLong));
    }

    #[test]
    fn durations_too_long_for_the_clock_are_refused_with_the_field_and_the_fix() {
        for (key, value) in [("stats_period", "99999999999999999999s"), ("batch_delay", "99999999999999999999s"), ("stats_period", "1e300s")] {
            let e = errs(&format!("{key} = \"{value}\"\n{GOOD}"));
            assert_eq!(e.len(), 1, "{key} = {value}: {e:?}");
            assert_eq!((e[0].field.as_str(), e[0].line), (key, Some(1)), "{e:?}");
            assert!(e[0].problem.contains("is not a duration") && e[0].problem.contains(value), "{e:?}");
            assert!(e[0].to_string().starts_with("r.toml:1: "), "{}", e[0]);
            assert!(e[0].fix.contains("with a unit"), "{e:?}");
        }
        let e = errs(&GOOD.replace("max_rate = 30.0", "batch_delay = \"99999999999999999999s\""));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].field, "route[0].topic[0].batch_delay");
        assert!(e[0].problem.contains("longer than any duration"), "{e:?}");
    }

    #[test]
    fn stats_period_is_at_most_an_hour() {
        let with = |v: &str| format!("stats_period = \"{v}\"\n{GOOD}");
        let c = RouterConfig::parse(&with("3600s"), Path::new("r.toml")).unwrap();
        assert_eq!(c.stats_period(), MAX_STATS_PERIOD);
        for (bad, says) in [("3601s", "longer than an hour"), ("0s", "is zero"), ("0ns", "is zero"), ("soon", "not a duration")] {
            let e = errs(&with(bad));
            assert_eq!(e.len(), 1, "{bad}: {e:?}");
            assert_eq!(e[0].field, "stats_period");
            assert!(e[0].problem.contains(says), "{bad}: {e:?}");
            assert!(e[0].fix.contains("3600s"), "{bad}: {e:?}");
        }
    }

    #[test]
    fn numbers_beyond_what_dds_or_the_type_holds_are_refused() {
        let e = errs(&GOOD.replace("max_rate = 30.0", "history = 2147483648"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].field, "route[0].topic[0].history");
        assert!(e[0].fix.contains("2147483647"), "{e:?}");
        assert!(RouterConfig::parse(&GOOD.replace("max_rate = 30.0", "history = 2147483647"), Path::new("r.toml")).is_ok());
        for bad in ["max_rate = nan", "max_rate = inf", "max_rate = -0.0", "max_rate_per_instance = -inf"] {
            let e = errs(&GOOD.replace("max_rate = 30.0", bad));
            assert_eq!(e.len(), 1, "{bad}: {e:?}");
            assert!(e[0].problem.contains("not a positive rate"), "{bad}: {e:?}");
        }
        // Out of the type's range: refused by the TOML reader, with the line.
        for bad in ["history = 4294967296", "downsample = -1", "domain = 99999999999"] {
            let text = if bad.starts_with("domain") { GOOD.replace("domain = 2", bad) } else { GOOD.replace("max_rate = 30.0", bad) };
            let e = errs(&text);
            assert_eq!(e.len(), 1, "{bad}: {e:?}");
            assert_eq!(e[0].field, "(syntax)", "{bad}: {e:?}");
            assert!(e[0].line.is_some(), "{bad}: {e:?}");
        }
    }
}
