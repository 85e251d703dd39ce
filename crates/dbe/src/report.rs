//! The report of a results tree: paper 002's Figs. 7–10 as tables and plots (round-trip latency and jitter
//! against payload, one node and two nodes), the architectures, 1-to-n, QoS variants, throughput, what each
//! agent cost and how long discovery took, the interoperability matrix, and what could not be measured.
use crate::agent::args::history_key;
use crate::agent::channel::{Durability, History, Reliability};
use crate::interop::InteropResult;
use crate::matrix::{Architecture, Group, Implementation, Matrix, Metric};
use crate::store::CellResult;
use partita_lab::plot::{self, Line};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::Path;

fn f1(v: f64) -> String {
    format!("{v:.1}")
}

fn qos_text(g: &Group) -> String {
    format!(
        "{}, {}, {}",
        match g.reliability {
            Reliability::Reliable => "reliable",
            Reliability::BestEffort => "best-effort",
        },
        history_key(g.history),
        match g.durability {
            Durability::Volatile => "volatile",
            Durability::TransientLocal => "transient-local",
        }
    )
}

/// The cells of the paper's figures: decentralized, one subscriber, the paper's QoS (reliable keep-last 1
/// volatile; best-effort for raw UDP, which has nothing else).
fn is_figure_cell(c: &CellResult, nodes: u32) -> bool {
    let g = &c.group;
    g.metric == Metric::Latency
        && g.architecture == Architecture::Decentralized
        && g.nodes == nodes
        && g.subscribers == 1
        && g.history == History::KeepLast(1)
        && g.durability == Durability::Volatile
        && (g.reliability == Reliability::Reliable || (g.implementation == Implementation::Udp && g.reliability == Reliability::BestEffort))
}

fn stats(c: &CellResult) -> Option<&partita_lab::stats::Stats> {
    c.latency.as_ref()?.stats.as_ref()
}

/// One table of `text` per size (rows) × implementation (columns); `align` is the columns' Markdown
/// alignment (`---:` for numbers, `---` for composite cells).
fn size_table(o: &mut String, cells: &[&CellResult], align: &str, text: impl Fn(&CellResult) -> Option<String>) {
    let imps: BTreeSet<Implementation> = cells.iter().map(|c| c.group.implementation).collect();
    let sizes: BTreeSet<usize> = cells.iter().map(|c| c.size).collect();
    let _ = writeln!(o, "| size B | {} |", imps.iter().map(|i| i.title()).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(o, "|---:|{}", imps.iter().map(|_| format!("{align}|")).collect::<String>());
    for s in sizes {
        let row: Vec<String> = imps
            .iter()
            .map(|i| cells.iter().find(|c| c.size == s && c.group.implementation == *i).and_then(|c| text(c)).unwrap_or_else(|| "—".into()))
            .collect();
        let _ = writeln!(o, "| {s} | {} |", row.join(" | "));
    }
    o.push('\n');
}

fn figure(out_dir: &Path, file: &str, title: &str, cells: &[&CellResult], value: impl Fn(&CellResult) -> Option<f64>, notes: &mut Vec<String>) {
    let imps: BTreeSet<Implementation> = cells.iter().map(|c| c.group.implementation).collect();
    let lines: Vec<Line> = imps
        .iter()
        .map(|i| {
            let mut points: Vec<(f64, f64)> =
                cells.iter().filter(|c| c.group.implementation == *i).filter_map(|c| Some(((c.size as f64).log2(), value(c)?))).collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Line { name: i.title().into(), points, dashed: !i.is_dds() }
        })
        .collect();
    let svg = plot::lines(title, "payload, log2 of bytes (2 = 4 B … 14 = 16 KiB)", &lines);
    match plot::write_svg_and_png(&out_dir.join(file), &svg) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => notes.push(format!("{file}: {e}")),
        Err(e) => notes.push(format!("{file}: {e}")),
    }
}

/// Writes `report.md` and the figures into `out_dir`; returns the report's text.
pub fn write(
    out_dir: &Path,
    machine: &str,
    cells: &[CellResult],
    matrix: Option<&Matrix>,
    interop: Option<&InteropResult>,
) -> std::io::Result<String> {
    std::fs::create_dir_all(out_dir)?;
    let mut o = String::new();
    let mut notes = Vec::new();
    let ok: Vec<&CellResult> = cells.iter().filter(|c| c.error.is_none()).collect();
    let _ = writeln!(o, "# partita bench dbe: paper 002's DDS Benchmark Environment\n");
    let _ = writeln!(o, "Machine `{machine}`; {} cells measured, {} failed.", ok.len(), cells.len() - ok.len());
    let setups: BTreeSet<&str> = ok.iter().map(|c| c.setup.as_str()).collect();
    for s in setups {
        let _ = writeln!(o, "Setup: {s}.");
    }
    let when: BTreeSet<&str> = ok.iter().map(|c| &c.measured_at[..c.measured_at.len().min(10)]).collect();
    let _ = writeln!(o, "Measured on {}. Round trips are `PubMessage` → `AckMessage` (paper 002's IDL), timed by the writer with CLOCK_MONOTONIC; jitter is their standard deviation, as the paper defines it.\n", when.into_iter().collect::<Vec<_>>().join(", "));

    for (nodes, figs, what) in [(1, ("fig7-latency-one-node.svg", "fig8-jitter-one-node.svg", 7, 8), "one node"), (2, ("fig9-latency-two-nodes.svg", "fig10-jitter-two-nodes.svg", 9, 10), "two nodes")] {
        let cells: Vec<&CellResult> = ok.iter().copied().filter(|c| is_figure_cell(c, nodes)).collect();
        if cells.is_empty() {
            continue;
        }
        let _ = writeln!(o, "## Figs. {} and {}: {what}\n", figs.2, figs.3);
        let _ = writeln!(
            o,
            "Decentralized, one subscriber, reliable keep-last 1 volatile (raw UDP best-effort). {}\n",
            if nodes == 1 { "Both agents in one node (one network namespace): ping on CPU 0, pong on CPU 1." } else { "Two nodes (network namespaces) joined by partita's bridge: ping on CPU 0, pong on CPU 1." }
        );
        let _ = writeln!(o, "Mean round trip, µs (Fig. {}, `{}`):\n", figs.2, figs.0);
        size_table(&mut o, &cells, "---:", |c| stats(c).map(|s| f1(s.mean_us)));
        let _ = writeln!(o, "Jitter (σ of the round trips), µs (Fig. {}, `{}`):\n", figs.3, figs.1);
        size_table(&mut o, &cells, "---:", |c| stats(c).map(|s| f1(s.std_us)));
        let _ = writeln!(o, "p50 / p99 / p99.9 / max, µs:\n");
        size_table(&mut o, &cells, "---", |c| stats(c).map(|s| format!("{} / {} / {} / {}", f1(s.p50_us), f1(s.p99_us), f1(s.p99_9_us), f1(s.max_us))));
        figure(out_dir, figs.0, &format!("Fig. {}: round-trip latency, {what} (mean, µs)", figs.2), &cells, |c| stats(c).map(|s| s.mean_us), &mut notes);
        figure(out_dir, figs.1, &format!("Fig. {}: jitter, {what} (σ, µs)", figs.3), &cells, |c| stats(c).map(|s| s.std_us), &mut notes);
    }

    // Latency tables of the other dimensions: one row per group, one column per size.
    let latency_rows = |o: &mut String, title: &str, intro: &str, pick: &dyn Fn(&Group) -> bool, label: &dyn Fn(&Group) -> String| {
        let cells: Vec<&CellResult> = ok.iter().copied().filter(|c| c.group.metric == Metric::Latency && pick(&c.group)).collect();
        if cells.is_empty() {
            return;
        }
        let groups: BTreeSet<&Group> = cells.iter().map(|c| &c.group).collect();
        let sizes: BTreeSet<usize> = cells.iter().map(|c| c.size).collect();
        let _ = writeln!(o, "## {title}\n\n{intro}\n");
        let _ = writeln!(o, "| implementation | {} | {} |", "configuration", sizes.iter().map(|s| format!("{s} B mean / σ / p99 µs (lost)")).collect::<Vec<_>>().join(" | "));
        let _ = writeln!(o, "|---|---|{}", sizes.iter().map(|_| "---|").collect::<String>());
        for g in groups {
            let row: Vec<String> = sizes
                .iter()
                .map(|s| {
                    cells
                        .iter()
                        .find(|c| &c.group == g && c.size == *s)
                        .and_then(|c| Some((stats(c)?, c.latency.as_ref()?.lost)))
                        .map(|(st, lost)| format!("{} / {} / {}{}", f1(st.mean_us), f1(st.std_us), f1(st.p99_us), if lost > 0 { format!(" ({lost})") } else { String::new() }))
                        .unwrap_or_else(|| "—".into())
                })
                .collect();
            let _ = writeln!(o, "| {} | {} | {} |", g.implementation.title(), label(g), row.join(" | "));
        }
        o.push('\n');
    };
    let paper_qos = |g: &Group| g.reliability == Reliability::Reliable && g.history == History::KeepLast(1) && g.durability == Durability::Volatile;
    latency_rows(
        &mut o,
        "Architectures",
        "Decentralized: the applications talk directly. Federated: each node's application runs in a partition on its node's own domain and talks to a daemon on its node, partita's routing service in the node's I/O partition; the daemons meet on the inter-node network (two hops more each way). Centralized: Fast DDS's discovery server holds the discovery information (in the pong's node); data still flows directly. Cyclone and RustDDS have no discovery server; raw UDP and iceoryx2 are not DDS. Reliable keep-last 1 volatile, one subscriber.",
        &|g| g.subscribers == 1 && paper_qos(g) && g.implementation.is_dds(),
        &|g| format!("{}, {} node{}", g.architecture.key(), g.nodes, if g.nodes > 1 { "s" } else { "" }),
    );
    latency_rows(
        &mut o,
        "1-to-n latency",
        "The ping waits for the acks of all n subscribers before the next message: the round trip to the slowest of n. One node, decentralized, reliable keep-all volatile (the n acks share the ack topic's one instance, so keep-last 1 would let one replace another); the subscribers share CPU 1.",
        &|g| {
            g.architecture == Architecture::Decentralized
                && g.nodes == 1
                && g.reliability == Reliability::Reliable
                && g.history == History::KeepAll
                && g.durability == Durability::Volatile
                && g.implementation.is_dds()
        },
        &|g| format!("n = {}", g.subscribers),
    );
    latency_rows(
        &mut o,
        "QoS variants",
        "The latency test under each reliability × history × durability (one node, decentralized, one subscriber). A best-effort round trip that loses a sample counts as lost after the time-out.",
        &|g| g.architecture == Architecture::Decentralized && g.nodes == 1 && g.subscribers == 1 && g.implementation.is_dds(),
        &|g| qos_text(g),
    );

    let tp: Vec<&CellResult> = ok.iter().copied().filter(|c| c.group.metric == Metric::Throughput).collect();
    if !tp.is_empty() {
        let _ = writeln!(o, "## Throughput\n\nOne writer writes as fast as its writer accepts for the test's seconds per size; one reader counts. Reliable keep-all holds the writer back to what the reader takes; best-effort lets it outrun the reader, and the difference is lost.\n");
        let _ = writeln!(o, "| implementation | configuration | nodes | size B | written/s | received/s | MB/s | loss |");
        let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|");
        for c in &tp {
            if let Some(t) = &c.throughput {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {:.0} | {:.0} | {:.1} | {:.1} % |",
                    c.group.implementation.title(),
                    qos_text(&c.group),
                    c.group.nodes,
                    c.size,
                    t.sent as f64 / t.seconds.max(1e-9),
                    t.samples_per_s,
                    t.mb_per_s,
                    t.loss * 100.0
                );
            }
        }
        o.push('\n');
    }

    // What each agent cost, once per group.
    let mut seen = BTreeSet::new();
    let mut rows = Vec::new();
    for c in &ok {
        if c.processes.is_empty() || !seen.insert(c.group.id()) {
            continue;
        }
        rows.push(*c);
    }
    if !rows.is_empty() {
        let _ = writeln!(o, "## CPU, memory and discovery\n\nPer run of a group (all its sizes): each agent's CPU time (user + system) and peak resident memory (`VmHWM`), and the leading agent's discovery time (from its process start to all its endpoints matched). Under the real-time setup partita's agents in native nodes lock their memory, so their resident memory counts everything they map; Fast DDS's agent does not lock.\n");
        let _ = writeln!(o, "| group | discovery ms | agents: CPU ms, peak RSS MiB | host |");
        let _ = writeln!(o, "|---|---:|---|---|");
        for c in rows {
            let lead = c.processes.iter().find(|p| p.role == "ping" || p.role == "pub");
            let agents: Vec<String> = c
                .processes
                .iter()
                .map(|p| format!("{} {}: {:.0} ms, {:.1} MiB", p.implementation, p.role, (p.cpu_user_ns + p.cpu_system_ns) as f64 / 1e6, p.max_rss_kib as f64 / 1024.0))
                .collect();
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {} |",
                c.group.id(),
                lead.and_then(|p| p.discovery_ns).map(|d| format!("{:.1}", d as f64 / 1e6)).unwrap_or_else(|| "—".into()),
                agents.join("; "),
                c.disturbance.map_or("—".to_string(), |d| d.note())
            );
        }
        let _ = writeln!(o, "\n{} Here per run of a group, from its system's start to its end.", partita_lab::machine::HOST_NOTE);
        o.push('\n');
    }

    if let Some(i) = interop {
        let _ = writeln!(o, "## Interoperability\n\nEach implementation's writer of `PubMessage` (1024 B, reliable, 0.5 s) read by each implementation's reader in one node, measured {}: ✓ the reader received samples of the size written.\n", i.measured_at);
        let imps: Vec<Implementation> = {
            let mut v: Vec<Implementation> = i.pairs.iter().map(|p| p.writer).collect();
            v.dedup();
            v
        };
        let _ = writeln!(o, "| writer ↓ reader → | {} |", imps.iter().map(|i| i.key()).collect::<Vec<_>>().join(" | "));
        let _ = writeln!(o, "|---|{}", imps.iter().map(|_| "---|").collect::<String>());
        for w in &imps {
            let row: Vec<String> = imps
                .iter()
                .map(|r| match i.pairs.iter().find(|p| p.writer == *w && p.reader == *r) {
                    Some(p) if p.works => format!("✓ {}/{}", p.received, p.written),
                    Some(p) => format!("✗ {}", p.note.replace('|', "/").chars().take(120).collect::<String>()),
                    None => "—".into(),
                })
                .collect();
            let _ = writeln!(o, "| {} | {} |", w.key(), row.join(" | "));
        }
        o.push('\n');
    }

    if let Some(m) = matrix {
        if !m.not_applicable.is_empty() {
            let _ = writeln!(o, "## Not applicable\n");
            let mut why: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for n in &m.not_applicable {
                why.entry(format!("{}: {}", n.group.implementation.key(), n.why)).or_default().push(format!("{} {}n", n.group.architecture.key(), n.group.nodes));
            }
            for (k, v) in why {
                let mut v = v;
                v.sort();
                v.dedup();
                let _ = writeln!(o, "- {k} ({})", v.join(", "));
            }
            o.push('\n');
        }
    }
    let failed: Vec<&CellResult> = cells.iter().filter(|c| c.error.is_some()).collect();
    if !failed.is_empty() {
        let _ = writeln!(o, "## Failed cells\n");
        let mut by_group: BTreeMap<String, (Vec<usize>, String)> = BTreeMap::new();
        for c in failed {
            let e = by_group.entry(c.group.id()).or_insert_with(|| (Vec::new(), c.error.clone().unwrap_or_default()));
            e.0.push(c.size);
        }
        for (g, (sizes, e)) in by_group {
            let first = e.lines().next().unwrap_or("");
            let _ = writeln!(o, "- `{g}` ({} sizes): {}", sizes.len(), first.chars().take(300).collect::<String>());
        }
        o.push('\n');
    }
    for n in notes {
        let _ = writeln!(o, "Note: {n}");
    }
    std::fs::write(out_dir.join("report.md"), &o)?;
    Ok(o)
}
