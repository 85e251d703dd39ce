//! A seeded generator of system files for the no-panic tests (`crates/system/tests/generated.rs`, and
//! `crates/cli/tests/check_generated.rs`, which includes this file): the same texts on every run.
//!
//! Two kinds of text. Mutations of the project's own system files (`examples/*.toml`, the paper's scenarios,
//! [`partita_system::BUILTIN_DEFAULT`]): values replaced by others at and beyond every limit (huge, negative,
//! zero and odd numbers, durations such as `1e300s` or `18446744073709551616ns`, odd sizes, unicode, very long
//! strings, NULs, wrong types), keys and tables repeated, deleted or moved, names renamed everywhere, table
//! headers inserted, characters inserted and the text cut at any point. And random structured files built
//! from the schema's keys, mostly with values of the right type (so that validation, not only the TOML
//! reader, sees the extremes) and windows that name the file's own partitions.
#![allow(dead_code)]

/// xorshift64*, seeded: small, and good enough to pick from lists. `typed`: values are drawn of the type their
/// key wants (still at and beyond every limit), so that the file gets past the TOML reader to validation; one
/// wrong type anywhere stops a file there.
pub struct Rng {
    state: u64,
    pub typed: bool,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed.max(1), typed: false }
    }
    pub fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Durations, as TOML strings' contents: good ones, and every kind of bad one.
pub const DURATIONS: &[&str] = &[
    "0us", "1ns", "100us", "700us", "800us", "1500us", "1.5ms", "10ms", "1s", "10s", "60s", "0s", "0ns",
    "10000ms", "10000.000001ms", "10.000000001s", "1e300s", "1e3us", "18446744073709551616ns",
    "18446744073709551615ns", "18446744073709551615us", "18446744073.709551615s", "18446744073.709551616s",
    "18446744074s", "99999999999999999999999s", "18446744073709551616s", "184467440737095516160s",
    "100000000000000000000000000000000ns", "1e20s", "9223372036854775807ms", "-1us", "-0s", "1.00000000001ms",
    "0.5ns", "1.0000000000000000000000000001s", "0.0000000001s", ".5ms", "5.ms", "1..2ms", "+1ms", "5", "ms", "",
    " ", " 5ms ", "5 ms", "µs", "5µs", "٣ms", "1h", "nan s", "infs", "0x10ms", "1_000us", "1,5ms", "1\\u0000ms",
    "off", "on", "1000ms", "1000.1ms", "999999us",
];

/// Memory sizes.
pub const SIZES: &[&str] = &[
    "64MiB", "8MiB", "7MiB", "1MiB", "0", "0B", "1", "8388608", "8388607B", "64KiB", "1GiB", "1TiB", "16EiB",
    "18446744073709551615", "18446744073709551616", "17179869184GiB", "17179869183GiB", "99999999999999999999GiB",
    "64mib", "64 MiB", "-1MiB", "1.5MiB", "", "MiB", "٦٤MiB", "64MiB\\u0000",
];

/// TOML integers (and things that look like them).
pub const INTS: &[&str] = &[
    "0", "1", "2", "3", "-1", "7", "63", "64", "89", "90", "99", "100", "232", "233", "255", "256", "65535",
    "4194304", "4194305", "2147483647", "4294967295", "4294967296", "9223372036854775807",
    "-9223372036854775808", "18446744073709551615", "99999999999999999999", "0x7fffffff", "0o777", "0b1", "+5",
    "1_000", "1e3", "1.0", "-0",
];

/// Integers an unsigned 64-bit key takes (TOML integers are i64).
pub const U64S: &[&str] = &[
    "0", "1", "2", "3", "7", "63", "64", "89", "90", "99", "100", "232", "233", "255", "256", "65535", "4194304",
    "4194305", "2147483647", "4294967295", "4294967296", "9223372036854775807",
];

/// Numbers a float key takes.
pub const FLOATS: &[&str] = &["0.0", "-0.0", "-1.0", "0.5", "30.0", "1e300", "-1e300", "5e-324", "1.7976931348623157e308", "nan", "+inf", "-inf", "0", "10000"];

/// Strings, TOML-quoted.
pub const STRINGS: &[&str] = &[
    "\"\"", "\"a\"", "\"recorder\"", "\"routing\"", "\"camera-node\"", "\"monitor\"", "\"partita\"", "\"ü\"",
    "\"🦀\"", "\"\\u0000\"", "\"a\\u0000b\"", "\"x y\"", "\"-a\"", "\"_a\"", "\"a.b\"", "\"../x\"", "\"/bin/sh\"",
    "\"/nonexistent/x\"", "\"/\"", "\"PATH\"", "\"CYCLONEDDS_URI\"", "\"PARTITA_X\"", "\"high\"", "\"low\"",
    "\"medium\"", "\"critical\"", "\"restart\"", "\"stop\"", "\"ignore\"", "\"reboot\"", "\"fifo\"", "\"normal\"",
    "\"rr\"", "\"off\"", "'literal'", "'''multi\nline'''", "\"\"\"multi\nline\"\"\"",
    "\"abcdefghijklmnopqrstuvwxy\"", "\"abcdefghijklmnopqrstuvwx\"",
];

/// Subnets and addresses, TOML-quoted.
pub const ADDRESSES: &[&str] = &[
    "\"198.18.0.0/15\"", "\"198.18.0.0/16\"", "\"198.18.0.0/24\"", "\"198.18.1.0/24\"", "\"198.18.1.0/30\"",
    "\"198.18.1.0/31\"", "\"198.18.1.0/32\"", "\"198.19.255.252/30\"", "\"198.19.255.0/24\"", "\"198.18.1.1/24\"",
    "\"198.18.0.0/33\"", "\"198.18.0.0/-1\"", "\"198.18.0.0/\"", "\"10.0.0.0/8\"", "\"0.0.0.0/0\"",
    "\"198.18.0.1\"", "\"198.18.0.0\"", "\"198.18.0.255\"", "\"198.18.1.10\"", "\"198.18.1.254\"",
    "\"198.18.1.255\"", "\"198.19.255.254\"", "\"256.1.1.1\"", "\"::1\"", "\"198.18.1\"", "\"\"",
];

/// Values of other types.
pub const OTHERS: &[&str] = &[
    "true", "false", "1.5", "nan", "inf", "-inf", "1e300", "[]", "[0]", "[1]", "[0, 1]", "[1, 0]", "[0, 0]", "[2]",
    "[0, 1, 2, 3]", "[4095]", "[-1]", "[18446744073709551615]", "[9223372036854775807]", "[\"partita\"]", "[\"\"]",
    "[\"partita\", \"app\", \"probe\"]", "[[]]", "[0, \"a\"]", "{}", "{ a = 1 }", "{ RUST_LOG = \"info\" }",
    "{ \"\" = \"x\" }", "{ \"A=B\" = \"x\" }", "{ PARTITA_MODULE = \"x\" }", "{ X = \"a\\u0000\" }",
    "1979-05-27T07:32:00Z", "07:32:00", "1979-05-27",
];

/// Table headers to insert.
pub const HEADERS: &[&str] = &[
    "[system]", "[network]", "[[module]]", "[[module.partition]]", "[[module.plan]]", "[[module.plan.window]]",
    "[[node]]", "[module.partition.router]", "[[module.partition.router.route]]",
    "[[module.partition.router.route.topic]]", "[module.partition.health]", "[module.partition.scheduling]",
    "[node.health]", "[module]", "[[system]]", "[[network]]", "[bogus]", "[module.partition.env]",
];

/// Pieces of TOML syntax and odd characters to insert.
pub const TOKENS: &[&str] = &[
    "\"", "'", "[", "]", "[[", "]]", "=", "\n", "#", "\\", "{", "}", ",", ".", "e300", "99999999999999999999", "-",
    "µ", "\u{0}", "\r", "\t", "\u{feff}", "\u{202e}", "🦀", "\n[[module.partition]]\n", "\nname = \"x\"\n", "s",
    "ns", "0", "\"\"\"",
];

/// Each table's keys (the router's as in `crates/router-config`).
pub const TABLE_KEYS: &[(&str, &[&str])] = &[
    ("system", &["name", "cpu_dma_latency"]),
    ("network", &["domain", "subnet"]),
    ("module", &["name", "cpus", "domain", "subnet"]),
    ("module.partition", &["name", "command", "criticality", "memory", "pids", "cpus", "env", "health", "scheduling", "io", "domain", "address"]),
    ("module.partition.router", &["name", "max_topics", "stats_period", "stats_side", "mirror_participants", "batch_delay"]),
    ("module.partition.router.route", &["from", "to", "both_ways", "allow", "block", "partitions", "trigger"]),
    ("module.partition.router.route.topic", &["name", "max_rate", "max_rate_per_instance", "downsample", "history", "batch_delay", "reliability", "durability"]),
    ("module.partition.router.side", &["name", "domain", "interface", "peers", "multicast"]),
    ("module.partition.health", &["action", "max_restarts", "window"]),
    ("module.partition.scheduling", &["policy", "priority"]),
    ("module.plan", &["cpu", "major_frame"]),
    ("module.plan.window", &["partition", "start", "duration"]),
    ("node", &["name", "command", "env", "memory", "pids", "cpus", "health", "scheduling", "domain", "address"]),
    ("node.health", &["action", "max_restarts", "window"]),
];

fn duration(rng: &mut Rng) -> String {
    format!("\"{}\"", rng.pick(DURATIONS))
}

/// Any value at all.
fn any_value(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => duration(rng),
        1 => format!("\"{}\"", rng.pick(SIZES)),
        2 => rng.pick(INTS).to_string(),
        3 => rng.pick(STRINGS).to_string(),
        4 => rng.pick(ADDRESSES).to_string(),
        _ => rng.pick(OTHERS).to_string(),
    }
}

/// A list of CPUs, sometimes odd.
fn cpu_list(rng: &mut Rng) -> String {
    if rng.chance(25) {
        if rng.typed {
            return rng.pick(&["[]", "[0, 0]", "[4095]", "[9223372036854775807]", "[0, 1, 2]", "[1, 0]", "[2]"]).into();
        }
        return rng.pick(&["[]", "[0, 0]", "[4095]", "[-1]", "[18446744073709551615]", "[0, 1, 2]", "[1, 0]", "[\"0\"]"]).into();
    }
    let n = 1 + rng.below(2);
    let cpus: Vec<String> = (0..n).map(|i| if n == 1 { rng.below(3).to_string() } else { i.to_string() }).collect();
    format!("[{}]", cpus.join(", "))
}

/// A very long string: 10,000 characters, ASCII or not.
fn long_string(rng: &mut Rng) -> String {
    let c = rng.pick(&["a", "ü", "🦀", "\\u0000", "-"]);
    format!("\"{}\"", c.repeat(10_000))
}

/// Mostly a value of the key's type, else anything.
pub fn value_for(rng: &mut Rng, key: &str) -> String {
    if !rng.typed && rng.chance(8) {
        return any_value(rng);
    }
    let string_key = matches!(key, "name" | "partition" | "criticality" | "action" | "policy" | "from" | "to" | "stats_side" | "interface");
    if (string_key || !rng.typed) && rng.chance(1) {
        return long_string(rng);
    }
    // Often a plausible value, so that a file with several keys still gets past the TOML reader.
    let plausible = rng.chance(60);
    match key {
        "major_frame" | "start" | "duration" | "window" | "cpu_dma_latency" | "stats_period" | "batch_delay"
            if plausible =>
        {
            format!("\"{}{}\"", rng.below(2000), rng.pick(&["us", "ms", "ns", "s"]))
        }
        "major_frame" | "start" | "duration" | "window" | "cpu_dma_latency" | "stats_period" | "batch_delay" => {
            duration(rng)
        }
        "memory" if plausible => format!("\"{}{}\"", rng.below(200), rng.pick(&["MiB", "KiB", "GiB"])),
        "memory" => format!("\"{}\"", rng.pick(SIZES)),
        "pids" | "domain" | "cpu" | "max_restarts" | "priority" | "max_topics" | "max_rate"
        | "max_rate_per_instance" | "downsample" | "history"
            if plausible =>
        {
            rng.below(if key == "cpu" { 3 } else { 300 }).to_string()
        }
        "max_rate" | "max_rate_per_instance" => rng.pick(FLOATS).into(),
        "max_restarts" | "downsample" | "history" if rng.typed => {
            let v = rng.pick(U64S);
            if v.parse::<u64>().is_ok_and(|v| v <= u32::MAX as u64) { v.into() } else { "4294967295".into() }
        }
        "pids" | "domain" | "cpu" | "max_restarts" | "priority" | "max_topics" | "downsample" | "history"
            if rng.typed =>
        {
            rng.pick(U64S).into()
        }
        "pids" | "domain" | "cpu" | "max_restarts" | "priority" | "max_topics" | "downsample" | "history" => {
            rng.pick(INTS).into()
        }
        "cpus" => cpu_list(rng),
        "command" => rng
            .pick(&[
                "[\"partita\", \"app\", \"recorder\"]", "[\"partita\", \"route\"]", "[\"partita\"]", "[]", "[\"\"]",
                "[\" \"]", "[\"/bin/sh\", \"-c\", \"true\"]", "[\"/nonexistent/prog\"]", "[\"ddsperf\"]",
                "[\"partita\", \"a\\u0000b\"]", "[\"\\u0000\"]", "[\"./rel\"]", "[\"/\"]", "[\"/dev/null\"]",
            ])
            .into(),
        "subnet" | "address" => rng.pick(ADDRESSES).into(),
        "io" | "both_ways" | "multicast" | "mirror_participants" => rng.pick(&["true", "false"]).into(),
        "from" | "to" | "stats_side" => rng.pick(&["\"module\"", "\"network\"", "\"other\"", "\"\""]).into(),
        "allow" | "block" | "partitions" | "peers" => rng.pick(&["[\"*\"]", "[]", "[\"surveillance/*\", \"type:*\"]", "[\"\"]", "[\"a\"]"]).into(),
        "trigger" => rng.pick(&["\"writer\"", "\"reader\"", "\"either\"", "\"never\""]).into(),
        "reliability" => rng.pick(&["\"reliable\"", "\"best-effort\"", "\"volatile\""]).into(),
        "durability" => rng.pick(&["\"volatile\"", "\"transient-local\"", "\"reliable\""]).into(),
        "interface" => rng.pick(&["\"lo\"", "\"vnic0\"", "\"\"", "\"a-name-longer-than-15\""]).into(),
        "criticality" => rng.pick(&["\"high\"", "\"medium\"", "\"low\"", "\"critical\"", "\"\""]).into(),
        "action" => rng.pick(&["\"restart\"", "\"stop\"", "\"ignore\"", "\"reboot\""]).into(),
        "policy" => rng.pick(&["\"normal\"", "\"fifo\"", "\"rr\""]).into(),
        "health" => health(rng),
        "scheduling" => scheduling(rng),
        "env" => rng.pick(&["{ RUST_LOG = \"info\" }", "{}", "{ \"\" = \"x\" }", "{ \"A=B\" = \"x\" }", "{ PARTITA_MODULE = \"x\" }", "{ X = \"a\\u0000\" }", "{ \"\\u0000\" = \"x\" }"]).into(),
        _ => rng.pick(STRINGS).into(),
    }
}

fn health(rng: &mut Rng) -> String {
    let mut parts = vec![format!("action = {}", value_for(rng, "action"))];
    if rng.chance(50) {
        parts.push(format!("max_restarts = {}", value_for(rng, "max_restarts")));
    }
    if rng.chance(50) {
        parts.push(format!("window = {}", value_for(rng, "window")));
    }
    format!("{{ {} }}", parts.join(", "))
}

fn scheduling(rng: &mut Rng) -> String {
    let mut parts = vec![format!("policy = {}", value_for(rng, "policy"))];
    if rng.chance(70) {
        parts.push(format!("priority = {}", value_for(rng, "priority")));
    }
    format!("{{ {} }}", parts.join(", "))
}

/// The project's system files: the examples, the paper's scenarios and the built-in default.
pub fn sources() -> Vec<(String, String)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut out = vec![("built-in".to_string(), partita_system::BUILTIN_DEFAULT.to_string())];
    for dir in ["examples", "crates/paper/scenarios"] {
        let mut files: Vec<_> = std::fs::read_dir(format!("{root}/{dir}"))
            .unwrap_or_else(|e| panic!("{root}/{dir}: {e}"))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            // Router files (examples/router-*.toml) are not system files.
            if !text.contains("[system]") {
                continue;
            }
            out.push((f.display().to_string(), fill_template(&text)));
        }
    }
    out
}

/// The paper's scenarios are templates (`crates/paper/src/scenario.rs` fills them in): plausible values.
fn fill_template(text: &str) -> String {
    let mut text = text.to_string();
    for (key, value) in [
        ("@SYSTEM@", "\"paper-gen\""),
        ("@RECORDER@", "[\"partita\", \"app\", \"recorder\", \"--reply-size\", \"1024\"]"),
        ("@MONITOR@", "[\"partita\", \"app\", \"monitor\", \"--count\", \"100\"]"),
        ("@UDP_ECHO@", "[\"partita\", \"app\", \"udp-echo\"]"),
        ("@UDP_ADDRESS@", "\"198.18.0.10\""),
        ("@RECORDER_CPU@", "0"),
        ("@ROUTING_CPU@", "1"),
        ("@MEMORY@", "\"64MiB\""),
    ] {
        text = text.replace(key, value);
    }
    text
}

/// The line ranges of tables: from a header line to the line before the next one.
fn blocks(lines: &[String]) -> Vec<(usize, usize)> {
    let starts: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].trim_start().starts_with('[')).collect();
    starts.iter().enumerate().map(|(k, &s)| (s, starts.get(k + 1).copied().unwrap_or(lines.len()))).collect()
}

/// `key = value` lines, as (line, key).
fn key_lines(lines: &[String]) -> Vec<(usize, String)> {
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let t = l.trim_start();
            if t.starts_with('#') || t.starts_with('[') {
                return None;
            }
            let (k, _) = t.split_once('=')?;
            let k = k.trim().trim_matches('"');
            (!k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')).then(|| (i, k.to_string()))
        })
        .collect()
}

/// Replaces one value on a `key = value` line; inside an inline table, often one of its values instead.
fn replace_value(rng: &mut Rng, line: &str, key: &str) -> String {
    let (left, right) = line.split_once('=').expect("a key line");
    let right = right.trim();
    if right.starts_with('{') && rng.chance(70) {
        let inner = right.trim_start_matches('{').split('}').next().unwrap_or("");
        let mut parts: Vec<String> = inner.split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect();
        if !parts.is_empty() {
            let at = rng.below(parts.len());
            if let Some((k, _)) = parts[at].split_once('=') {
                let k = k.trim().to_string();
                parts[at] = format!("{k} = {}", value_for(rng, &k));
            }
            return format!("{left}= {{ {} }}", parts.join(", "));
        }
    }
    format!("{left}= {}", value_for(rng, key))
}

/// Names that appear quoted in the text (what windows and routes refer to).
fn names_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for l in text.lines() {
        let t = l.trim_start();
        if let Some(rest) = t.strip_prefix("name = \"").or_else(|| t.strip_prefix("partition = \"")) {
            if let Some(end) = rest.find('"') {
                let n = rest[..end].to_string();
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
    }
    out
}

/// One mutation of `text`.
fn mutate_once(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let keys = key_lines(&lines);
    let tables = blocks(&lines);
    match rng.below(100) {
        // A value replaced (the most common, so most files get past the TOML reader).
        0..=37 if !keys.is_empty() => {
            let (i, k) = &keys[rng.below(keys.len())];
            lines[*i] = replace_value(rng, &lines[*i], k);
        }
        // A key of the table's own schema added to it (a duplicate now and then).
        38..=44 if !tables.is_empty() => {
            let (a, b) = tables[rng.below(tables.len())];
            let header = lines[a].trim().trim_matches(|c| c == '[' || c == ']').trim().to_string();
            if let Some((_, names)) = TABLE_KEYS.iter().find(|(t, _)| *t == header) {
                let key = rng.pick(names);
                let present = lines[a..b].iter().any(|l| l.split_once('=').is_some_and(|(k, _)| k.trim() == key));
                if !present || rng.chance(5) {
                    let line = format!("{key} = {}", value_for(rng, key));
                    lines.insert(a + 1, line);
                }
            }
        }
        // A key line repeated (a duplicate key), or deleted.
        45..=49 if !keys.is_empty() => {
            let (i, _) = keys[rng.below(keys.len())];
            let l = lines[i].clone();
            lines.insert(i, l);
        }
        50..=55 if !keys.is_empty() => {
            let (i, _) = keys[rng.below(keys.len())];
            lines.remove(i);
        }
        // A table repeated (right after itself or at the end), deleted or moved to the end.
        56..=63 if !tables.is_empty() => {
            let (a, b) = tables[rng.below(tables.len())];
            let copy: Vec<String> = lines[a..b].to_vec();
            let times = if rng.chance(5) { 100 + rng.below(30) } else { 1 };
            let at = if rng.chance(50) { b } else { lines.len() };
            for _ in 0..times {
                lines.splice(at..at, copy.iter().cloned());
            }
        }
        64..=69 if !tables.is_empty() => {
            let (a, b) = tables[rng.below(tables.len())];
            lines.drain(a..b);
        }
        70..=72 if !tables.is_empty() => {
            let (a, b) = tables[rng.below(tables.len())];
            let moved: Vec<String> = lines.drain(a..b).collect();
            lines.extend(moved);
        }
        // A table header where it does not belong.
        73..=76 => {
            let at = rng.below(lines.len() + 1);
            lines.insert(at, rng.pick(HEADERS).to_string());
        }
        // A name renamed everywhere (so references still match), to something odd.
        77..=81 => {
            let names = names_in(text);
            if !names.is_empty() {
                let old = format!("\"{}\"", names[rng.below(names.len())]);
                let new = match rng.below(4) {
                    0 => format!("\"{}\"", "n".repeat(1 + rng.below(40))),
                    1 => rng.pick(&["\"\"", "\"ü\"", "\"a b\"", "\"-x\"", "\"monitor\"", "\"recorder\"", "\"routing\"", "\"x\\u0000\""]).into(),
                    2 => format!("\"{}\"", "🦀".repeat(1 + rng.below(30))),
                    _ => long_string(rng),
                };
                return text.replace(&old, &new);
            }
        }
        // The text cut at any point.
        82..=87 => {
            let chars: Vec<char> = text.chars().collect();
            let at = rng.below(chars.len() + 1);
            return chars[..at].iter().collect();
        }
        // Characters inserted, deleted or repeated.
        _ => {
            let mut chars: Vec<char> = text.chars().collect();
            let at = rng.below(chars.len() + 1);
            match rng.below(3) {
                0 if at < chars.len() => {
                    let n = (1 + rng.below(16)).min(chars.len() - at);
                    chars.drain(at..at + n);
                }
                1 if at < chars.len() => {
                    let n = (1 + rng.below(16)).min(chars.len() - at);
                    let piece: Vec<char> = chars[at..at + n].to_vec();
                    chars.splice(at..at, piece);
                }
                _ => {
                    let t: Vec<char> = rng.pick(TOKENS).chars().collect();
                    chars.splice(at..at, t);
                }
            }
            return chars.into_iter().collect();
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// One of `sources` with one to four mutations.
pub fn mutated(rng: &mut Rng, sources: &[(String, String)]) -> String {
    let mut text = sources[rng.below(sources.len())].1.clone();
    for _ in 0..1 + rng.below(4) {
        rng.typed = rng.chance(60);
        text = mutate_once(rng, &text);
    }
    text
}

fn key(rng: &mut Rng, out: &mut String, key: &str, percent: u64) {
    if rng.chance(percent) {
        out.push_str(&format!("{key} = {}\n", value_for(rng, key)));
    }
}

/// A system file from the schema's keys: modules with partitions, plans and windows, nodes.
pub fn structured(rng: &mut Rng) -> String {
    rng.typed = rng.chance(75);
    // A tidy file has every required key, few optional ones, and windows that share out each frame among
    // all its partitions: many are valid, and the others have one or two things wrong.
    let tidy = rng.chance(50);
    let few = if tidy { 5 } else { 1 };
    let mut t = String::from("[system]\n");
    t.push_str(&format!("name = {}\n", if rng.chance(90) { format!("\"sys{}\"", rng.below(100)) } else { value_for(rng, "name") }));
    key(rng, &mut t, "cpu_dma_latency", 20 / few);
    if rng.chance(60) {
        t.push_str("[network]\n");
        key(rng, &mut t, "domain", 60 / few);
        key(rng, &mut t, "subnet", 40 / few);
    }
    let modules = if tidy { 1 + rng.below(2) } else if rng.chance(3) { 95 + rng.below(10) } else { rng.below(4) };
    let mut all_names: Vec<String> = Vec::new();
    for m in 0..modules {
        t.push_str("[[module]]\n");
        t.push_str(&format!("name = {}\n", if rng.chance(90) { format!("\"m{m}\"") } else { value_for(rng, "name") }));
        key(rng, &mut t, "cpus", 50 / few);
        key(rng, &mut t, "domain", 30 / few);
        key(rng, &mut t, "subnet", 30 / few);
        let partitions = if tidy { 1 + rng.below(4) } else if rng.chance(2) { 95 + rng.below(10) } else { rng.below(4) };
        let mut names = Vec::new();
        for p in 0..partitions {
            let name = if rng.chance(92) { format!("p{m}x{p}") } else { format!("p{}", rng.below(3)) };
            names.push(name.clone());
            all_names.push(name.clone());
            t.push_str("[[module.partition]]\n");
            t.push_str(&format!("name = \"{name}\"\n"));
            if tidy || rng.chance(95) {
                t.push_str(&format!("command = {}\n", if rng.chance(70) { "[\"partita\", \"app\", \"probe\"]".into() } else { value_for(rng, "command") }));
            }
            for (k, pc) in [("criticality", 30), ("memory", 40), ("pids", 40), ("cpus", 20), ("domain", 15), ("address", 15), ("env", 20), ("health", 30), ("scheduling", 25)] {
                key(rng, &mut t, k, pc / few);
            }
            let router = rng.chance(15);
            if router && rng.chance(85) {
                t.push_str("io = true\n");
            } else {
                key(rng, &mut t, "io", 30 / few);
            }
            if router {
                t.push_str("[module.partition.router]\n");
                key(rng, &mut t, "max_topics", 50);
                key(rng, &mut t, "stats_period", 50);
                key(rng, &mut t, "batch_delay", 50);
                key(rng, &mut t, "stats_side", 10);
                key(rng, &mut t, "mirror_participants", 10);
                if tidy || rng.chance(60) {
                    t.push_str("[[module.partition.router.route]]\n");
                    t.push_str(&format!("from = {}\nto = {}\n", rng.pick(&["\"module\"", "\"network\"", "\"x\""]), rng.pick(&["\"module\"", "\"network\"", "\"\""])));
                    key(rng, &mut t, "both_ways", 50);
                    if rng.chance(50) {
                        t.push_str("[[module.partition.router.route.topic]]\nname = \"a/*\"\n");
                        for k in ["max_rate", "max_rate_per_instance", "downsample", "history", "batch_delay", "reliability", "durability"] {
                            key(rng, &mut t, k, 30);
                        }
                    }
                }
            }
        }
        let plans = if tidy { 1 } else if rng.chance(20) { 0 } else { 1 + rng.below(2) };
        for pl in 0..plans {
            t.push_str("[[module.plan]]\n");
            if tidy {
                t.push_str(&format!("cpu = {m}\n"));
            } else if rng.chance(70) {
                t.push_str(&format!("cpu = {}\n", if rng.chance(80) { pl.to_string() } else { value_for(rng, "cpu") }));
            }
            let frame_us: u64 = if tidy { [1500, 1000, 3, 10_000, 10_000_000][rng.below(5)] } else { 1500 };
            if tidy || rng.chance(97) {
                t.push_str(&format!("major_frame = {}\n", if tidy || rng.chance(50) { format!("\"{frame_us}us\"") } else { value_for(rng, "major_frame") }));
            }
            let windows = if tidy { names.len() + rng.below(6) } else if rng.chance(2) { 200 + rng.below(100) } else { rng.below(4) };
            let share = frame_us / windows.max(1) as u64;
            let mut start = 0u64;
            for w in 0..windows {
                t.push_str("[[module.plan.window]]\n");
                let partition = match names.get(w % names.len().max(1)) {
                    Some(n) if tidy || rng.chance(90) => format!("\"{n}\""),
                    _ => value_for(rng, "partition"),
                };
                t.push_str(&format!("partition = {partition}\n"));
                let len = if tidy { share } else { 1 + rng.below(700) as u64 };
                if tidy || rng.chance(97) {
                    t.push_str(&format!("start = {}\n", if tidy || rng.chance(70) { format!("\"{start}us\"") } else { value_for(rng, "start") }));
                }
                if tidy || rng.chance(97) {
                    t.push_str(&format!("duration = {}\n", if tidy || rng.chance(70) { format!("\"{len}us\"") } else { value_for(rng, "duration") }));
                }
                start += len;
            }
        }
    }
    let nodes = if rng.chance(2) { 95 + rng.below(10) } else { rng.below(3) };
    for n in 0..nodes {
        t.push_str("[[node]]\n");
        let name = if rng.chance(90) { format!("n{n}") } else { all_names.get(rng.below(all_names.len().max(1))).cloned().unwrap_or_default() };
        t.push_str(&format!("name = \"{name}\"\n"));
        if tidy || rng.chance(95) {
            t.push_str(&format!("command = {}\n", if rng.chance(70) { "[\"partita\", \"app\", \"monitor\"]".into() } else { value_for(rng, "command") }));
        }
        for (k, pc) in [("memory", 30), ("pids", 30), ("cpus", 20), ("domain", 20), ("address", 20), ("env", 20), ("health", 20), ("scheduling", 20)] {
            key(rng, &mut t, k, pc / few);
        }
    }
    t
}

/// `n` texts, mutations and structured files alternating, from `seed`.
pub fn texts(seed: u64, n: usize) -> Vec<String> {
    let sources = sources();
    let mut rng = Rng::new(seed);
    (0..n).map(|i| if i % 3 == 2 { structured(&mut rng) } else { mutated(&mut rng, &sources) }).collect()
}
