//! No router configuration text makes the parser panic: thousands of generated and mutated router files, and
//! system-file router tables, each either accepted or refused with errors, never a panic. The texts come from
//! a seeded generator (the same texts on every run), built from the schema's keys with values at and beyond
//! every limit (huge, negative, not-a-number, wrong type, odd units and characters), and from valid files with
//! characters cut out, repeated and inserted. Every valid one, written back as a file, reads back equal.
use partita_router_config::{RouterConfig, SideConfig, TopicOverride};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// xorshift64*: small, seeded, good enough to pick from lists.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const DURATIONS: &[&str] = &[
    "1s", "0s", "100us", "250µs", "1.5ms", "20ms", "100ms", "101ms", "3600s", "3601s", "1e300s", "99999999999999999999s",
    "18446744073709551615s", "18446744073709551616s", "18446744073709551615999999999ns", "1e-400s", "0.0000000001ns",
    "-1s", "-0s", "nans", "infs", "inf s", "NaNms", "s", "ms", "", " ", "5", "5 parsecs", "1h", "1min", "5µ", "+5s",
    "1_000s", "0x10s", "1.s", ".5s", "1..5s",
    "999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999s",
];

const INTEGERS: &[&str] = &[
    "0", "1", "-1", "8", "232", "233", "4096", "2147483647", "2147483648", "4294967295", "4294967296",
    "9223372036854775807", "-9223372036854775808",
];

const FLOATS: &[&str] =
    &["0.0", "-0.0", "30.0", "1e300", "-1e300", "5e-324", "1.7976931348623157e308", "nan", "+inf", "-inf", "0.5", "1e-300"];

const OTHERS: &[&str] = &[
    "true", "false", "\"\"", "\"*\"", "[]", "[\"*\"]", "[\"secret/*\", \"type:*Frame\"]", "[1, 2]", "{}", "{ a = 1 }",
    "\"lo\"", "\"veth-io-0123456789\"", "\"ü\"", "\"\\u0000\"", "\"module\"", "\"network\"", "\"a\"", "\"b\"",
    "\"writer\"", "\"reader\"", "\"either\"", "\"writer-and-reader\"", "\"reliable\"", "\"best-effort\"",
    "\"volatile\"", "\"transient-local\"", "\"🦀\"", "1979-05-27T07:32:00Z", "'''multi\nline'''",
];

// Unknown keys are errors: `bogus` now and then.
const TOP: &[&str] = &["name", "max_topics", "stats_period", "stats_side", "mirror_participants", "batch_delay", "stats_period", "batch_delay", "name", "max_topics", "stats_period", "batch_delay", "bogus"];
const SIDE: &[&str] = &["interface", "peers", "multicast"];
const ROUTE: &[&str] = &["both_ways", "allow", "block", "partitions", "trigger"];
const TOPIC: &[&str] = &["max_rate", "max_rate_per_instance", "downsample", "history", "batch_delay", "reliability", "durability"];

fn value(rng: &mut Rng) -> String {
    match rng.below(3) {
        0 => format!("{:?}", rng.pick(DURATIONS)),
        1 if rng.chance(50) => rng.pick(INTEGERS).to_string(),
        1 => rng.pick(FLOATS).to_string(),
        _ => rng.pick(OTHERS).to_string(),
    }
}

const NAMES: &[&str] = &["\"module\"", "\"network\"", "\"module\"", "\"network\"", "\"a\"", "\"\"", "\"video/*\"", "\"ü\""];
const PATTERNS: &[&str] = &["[\"*\"]", "[]", "[\"video/*\", \"type:*\"]", "[\"\"]"];

/// Mostly a value of the key's type (so that validation, not only the TOML reader, sees the extremes), else
/// anything.
fn value_for(rng: &mut Rng, key: &str) -> String {
    if rng.chance(4) {
        return value(rng);
    }
    match key {
        "stats_period" | "batch_delay" => format!("{:?}", rng.pick(DURATIONS)),
        "max_topics" | "domain" | "downsample" | "history" if rng.chance(30) => rng.pick(INTEGERS).into(),
        "max_topics" | "domain" | "downsample" | "history" => rng.below(300).to_string(),
        "max_rate" | "max_rate_per_instance" if rng.chance(70) => rng.pick(FLOATS).into(),
        "max_rate" | "max_rate_per_instance" => rng.pick(INTEGERS).into(),
        "mirror_participants" | "multicast" | "both_ways" => rng.pick(&["true", "false"]).into(),
        "allow" | "block" | "partitions" | "peers" => rng.pick(PATTERNS).into(),
        "trigger" => rng.pick(&["\"writer\"", "\"reader\"", "\"either\"", "\"writer-and-reader\"", "\"never\""]).into(),
        "reliability" => rng.pick(&["\"reliable\"", "\"best-effort\"", "\"volatile\""]).into(),
        "durability" => rng.pick(&["\"volatile\"", "\"transient-local\"", "\"reliable\""]).into(),
        "interface" => rng.pick(&["\"lo\"", "\"veth0\"", "\"\"", "\"a-name-longer-than-15\"", "\"ü\""]).into(),
        _ => rng.pick(NAMES).into(),
    }
}

/// A table's keys: `required` ones (nearly always), then a few of `names`.
fn keys(rng: &mut Rng, out: &mut String, required: &[&'static str], names: &[&'static str]) {
    let mut used = Vec::new();
    for key in required {
        if rng.chance(97) {
            used.push(*key);
            out.push_str(&format!("{key} = {}\n", value_for(rng, key)));
        }
    }
    for _ in 0..rng.below(6) {
        let key = rng.pick(names);
        // A key twice in one table is a syntax error; now and then, keep it.
        if used.contains(&key) && !rng.chance(1) {
            continue;
        }
        used.push(key);
        out.push_str(&format!("{key} = {}\n", value_for(rng, key)));
    }
}

/// A router file from the schema's keys with random values.
fn generated(rng: &mut Rng, embedded: bool) -> String {
    let mut t = String::new();
    keys(rng, &mut t, &[], TOP);
    if !embedded || rng.chance(10) {
        for _ in 0..rng.below(4) {
            t.push_str("[[side]]\n");
            keys(rng, &mut t, &["name", "domain"], SIDE);
        }
    }
    for _ in 0..rng.below(3) {
        t.push_str("[[route]]\n");
        keys(rng, &mut t, &["from", "to"], ROUTE);
        for _ in 0..rng.below(3) {
            t.push_str("[[route.topic]]\n");
            keys(rng, &mut t, &["name"], TOPIC);
        }
    }
    t
}

const VALID: &str = "name = \"io\"\nmax_topics = 8\nstats_period = \"500ms\"\nbatch_delay = \"100us\"\n\
[[side]]\nname = \"module\"\ndomain = 1\ninterface = \"lo\"\npeers = [\"127.0.0.1\"]\n\
[[side]]\nname = \"network\"\ndomain = 2\n\
[[route]]\nfrom = \"module\"\nto = \"network\"\nboth_ways = true\nallow = [\"*\"]\nblock = [\"secret/*\"]\n\
[[route.topic]]\nname = \"video/*\"\nmax_rate = 30.0\nmax_rate_per_instance = 10.0\ndownsample = 2\nhistory = 8\n\
batch_delay = \"0s\"\nreliability = \"best-effort\"\ndurability = \"volatile\"\n";

const TOKENS: &[&str] = &[
    "\"", "'", "[", "]", "[[", "]]", "=", "\n", "#", "\\", "{", "}", ",", ".", "e300", "9999999999999999999999", "-", "µ",
    "\u{0}", "\r", "\t", "[[route.topic]]\n", "[[side]]\n", "s", "ns",
];

/// A valid file with one key's value replaced, then, often, a few characters cut, repeated or inserted (always
/// at character boundaries).
fn mutated(rng: &mut Rng) -> String {
    let mut lines: Vec<String> = VALID.lines().map(str::to_string).collect();
    let at = rng.below(lines.len());
    if let Some((key, _)) = lines[at].split_once(" = ") {
        lines[at] = format!("{key} = {}", value(rng));
    }
    let text = lines.join("\n");
    if rng.chance(40) {
        return text;
    }
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(chars.len() + 1);
        match rng.below(4) {
            0 if at < chars.len() => {
                let n = (1 + rng.below(12)).min(chars.len() - at);
                chars.drain(at..at + n);
            }
            1 if at < chars.len() => {
                let n = (1 + rng.below(12)).min(chars.len() - at);
                let piece: Vec<char> = chars[at..at + n].to_vec();
                chars.splice(at..at, piece);
            }
            2 => {
                let d: Vec<char> = rng.pick(DURATIONS).chars().collect();
                chars.splice(at..at, d);
            }
            _ => {
                let t: Vec<char> = rng.pick(TOKENS).chars().collect();
                chars.splice(at..at, t);
            }
        }
    }
    chars.into_iter().collect()
}

/// Parses `text` every way a router or a system file reads it, and uses what a valid one yields. A valid router
/// file, and the whole configuration an I/O partition's table gives, written as a file read back equal.
fn read_every_way(text: &str) {
    let file = RouterConfig::parse(text, Path::new("gen.toml"));
    let embedded = RouterConfig::parse_embedded(text, "gen");
    let side = |name: &str, domain: u32, interface: &str| SideConfig { name: name.into(), domain, interface: interface.into(), peers: vec!["198.18.0.2".into()], multicast: false };
    let io = embedded.as_ref().ok().map(|e| RouterConfig::for_io_partition(Some(e), "io", vec![side("module", 1, "vnic0"), side("network", 2, "vnic1")]));
    for cfg in file.iter().chain(&io) {
        let written = cfg.to_file("");
        match RouterConfig::parse(&written, Path::new("written.toml")) {
            Ok(back) => assert_eq!(&back, cfg, "written as:\n{written}"),
            Err(e) => panic!("a valid configuration written as a file is refused: {e:?}\n{written}"),
        }
    }
    for cfg in [file, embedded].into_iter().flatten().chain(io) {
        let _ = cfg.stats_period();
        let _ = cfg.batch_delay(&TopicOverride::default());
        for route in &cfg.routes {
            for ov in &route.topics {
                let _ = cfg.batch_delay(ov);
            }
        }
    }
}

fn no_panic(what: &str, texts: impl Iterator<Item = String>) -> usize {
    let mut n = 0;
    for text in texts {
        if catch_unwind(AssertUnwindSafe(|| read_every_way(&text))).is_err() {
            panic!("{what} text {n} made the parser panic:\n{text}");
        }
        n += 1;
    }
    n
}

#[test]
fn no_generated_router_file_or_table_makes_the_parser_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let n = no_panic("generated", (0..10_000).map(|i| generated(&mut rng, i % 2 == 1)));
    assert_eq!(n, 10_000);
}

#[test]
fn no_mutated_router_file_makes_the_parser_panic() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let n = no_panic("mutated", (0..10_000).map(|_| mutated(&mut rng)));
    assert_eq!(n, 10_000);
}

#[test]
fn the_generators_reach_both_valid_and_refused_files() {
    // A generator that only ever produced syntax errors would test nothing past the TOML parser.
    let mut rng = Rng(7);
    let (mut valid, mut refused_semantically, mut total) = (0, 0, 0);
    for _ in 0..2_000 {
        for text in [mutated(&mut rng), generated(&mut rng, false)] {
            total += 1;
            match RouterConfig::parse(&text, Path::new("gen.toml")) {
                Ok(_) => valid += 1,
                Err(e) if e.iter().all(|e| e.field != "(syntax)") => refused_semantically += 1,
                Err(_) => {}
            }
        }
    }
    eprintln!("{valid} valid, {refused_semantically} refused past the syntax check, of {total}");
    assert!(valid * 25 >= total, "only {valid} valid texts of {total}");
    assert!(refused_semantically * 10 >= total, "only {refused_semantically} of {total} texts refused past the syntax check");
}
