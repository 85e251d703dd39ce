//! The paper bench's outputs: Markdown report, CSV (one line per row, and one per run), JSON, and the Fig. 5
//! plot as SVG. Each says which measurement setup produced it.
use crate::bench::{Results, Row};
use crate::scenario::Scenario;
use partita_lab::repeat::{flag_note, FLAG_SPREAD};
use partita_lab::stats::fmt_us;
use std::fmt::Write as _;
use std::path::Path;

fn size_label(b: usize) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b.is_multiple_of(1024) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// A CSV field: quoted when it holds a comma or a quote.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

fn table(out: &mut String, rows: &[&Row]) {
    out.push_str("| scenario | MIN | AVG | MAX | STD | PER99 | P50 | P50 min–max | P50 spread | paper MIN | AVG | MAX | STD | PER99 | timed out | host |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for r in rows {
        let s = &r.summary;
        let p50 = r.p50();
        let paper = r.scenario.paper().map_or("| – | – | – | – | – ".to_string(), |p| {
            format!("| {:.0} | {:.0} | {:.0} | {:.0} | {:.0} ", p.min, p.avg, p.max, p.std, p.p99)
        });
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} {paper}| {} | {} |",
            r.title,
            s.min_us,
            s.mean_us,
            s.max_us,
            s.std_us,
            s.p99_us,
            s.p50_us,
            p50.range_cell(0),
            p50.spread_cell(),
            r.timeouts,
            r.disturbance.map_or("–".to_string(), |d| d.note())
        );
    }
    if rows.iter().any(|r| r.flagged) {
        let _ = writeln!(out, "\n{}", flag_note("The p50 of a row marked", "p50s"));
    }
    let _ = writeln!(out, "\n{}", partita_lab::machine::HOST_NOTE);
}

/// The Markdown report (tables, ratios, prediction, sweep, plot).
pub fn markdown(res: &Results, command: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Paper 001 on this machine\n");
    let _ = writeln!(
        o,
        "Command: `{command}` ({:.1} minutes)  \nMachine: {}  \nSetup: {}; {}.\n",
        res.elapsed_s / 60.0,
        res.machine,
        res.setup.caption,
        res.setup.applied
    );
    let runs = if res.repeat > 1 {
        format!(
            "Every row was measured {} times, the scenarios interleaved (each scenario once, then each again): a \
             figure is the median of its runs' figures; P50 min–max and P50 spread ((max − min) / median of the \
             runs' p50s) show how far the runs agree, and a spread above {:.0} % is marked {}.",
            res.repeat,
            FLAG_SPREAD * 100.0,
            partita_lab::repeat::FLAG
        )
    } else {
        "Every row was measured once (no spread to report; the default is three runs).".to_string()
    };
    let _ = writeln!(
        o,
        "Response time of one request/response (request a frame, receive the answer) in µs, {} requests after {} \
         warm-up per run, answers of {}. {runs} Ours on the left, the paper's (2.8 GHz single-core nodes, Gigabit \
         switch, XtratuM, RTI Connext) on the right.\n",
        res.count,
        res.warmup,
        size_label(res.table_size)
    );
    for (n, title) in [(1u8, "Table 1: overhead test"), (2, "Table 2: performance test")] {
        let rows: Vec<&Row> = res.tables.iter().filter(|r| r.scenario.table() == n).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(o, "## {title}\n");
        table(&mut o, &rows);
        o.push('\n');
    }
    if !res.ratios.is_empty() {
        o.push_str("## Ratios of the mean response times\n\n| ratio | measured | per repeat | paper |\n|---|---:|---:|---:|\n");
        for r in &res.ratios {
            let paper = r.paper.map_or("–".into(), |p| format!("{p:.2}"));
            let per = r.per_repeat.map_or("–".into(), |s| s.range_cell(2));
            let _ = writeln!(o, "| {} | {:.2} | {per} | {paper} |", r.name, r.measured);
        }
        o.push_str("\n(measured: of the medians of the means; per repeat: the ratio of the k-th runs of both rows, lowest–highest.)\n\n");
    }
    if let Some(p) = &res.prediction {
        let _ = writeln!(
            o,
            "## The plan's prediction\n\nA request passes the routing partition, the recorder and the routing partition \
             again. With the 700/800 µs windows in the 1500 µs frame the windows alone delay it by {:.0} to {:.0} µs \
             (mean {:.0} µs over arrival instants); the worst case is a request arriving as the routing window closes. \
             Its answer waits for the last routing window, which opens later than planned by the window entry (p99 \
             {:.0} µs, measured under the plan) and, to the thread that carries the answer, by the thaw herd: the \
             partition's threads leaving the freezer one after the other ({}). Adding those and the unpartitioned \
             response time (TRADITIONAL DDS WITH ROUTING, p99 {:.0} µs) gives the bound **{:.0} µs** ({:.0} µs \
             without the herd). Measured p99: **{:.0} µs** ({}; within it in {} of {} runs), max {:.0} µs.\n",
            p.window_delay.min_us,
            p.window_delay.max_us,
            p.window_delay.mean_us,
            p.window_entry_p99_us,
            match (&p.thaw_herd, &p.thaw_herd_missing) {
                (Some(h), _) => format!(
                    "until the last of its {} threads had run, p50 {:.0} / p99 {:.0} / max {:.0} µs over {} window starts \
                     traced for {:.0} s with the monitor asking once a second",
                    h.threads, h.p50_us, h.p99_us, h.max_us, h.herds, h.traced_s
                ),
                (None, Some(why)) => format!("not measured, left out of the bound: {why}"),
                (None, None) => "not measured".into(),
            },
            p.unpartitioned_p99_us,
            p.bound_us,
            p.bound_without_herd_us,
            p.measured_p99_us,
            if p.p99_within_bound { "within the bound" } else { "OVER the bound" },
            p.runs_within_bound,
            p.runs,
            p.measured_max_us
        );
    }
    if let Some(sch) = &res.schedule {
        let _ = writeln!(
            o,
            "## The schedule model: predicted beside measured\n\nThe model (docs/schedule.md) walks each row's plan with \
             the recorder's own work ({}) and service times drawn from this run's {} raw TRADITIONAL DDS WITH ROUTING response times, spread evenly over \
             the path's {} visits ({}), each window entered from another partition losing {}; \
             closed-loop arrivals as the monitor asks; {} simulated requests.\n\n\
             | row | switches per ms | window entry p50 / p99 / max µs | predicted mean / p50 / p99 / max µs | measured mean / p50 / p99 / max µs | mean error | p99 error |\n|---|---:|---|---|---|---:|---:|",
            sch.model.background.iter().map(|b| format!("{:.2} ms of CPU every {} ms to capture a frame, measured here", b.cost_ns as f64 / 1e6, b.period_ns / 1_000_000)).collect::<Vec<_>>().join(", "),
            sch.service_samples,
            sch.model.chain.len(),
            sch.model.chain.join(" → "),
            if sch.switch_measured {
                format!("one of the {} window entries the executor measured under the paper's plan in this run, or under the row's own when the paper's did not run (median {:.1} µs; window entry below)", sch.switch_samples, sch.model.switch_ns as f64 / 1e3)
            } else {
                format!("{:.1} µs (given with --switch-cost)", sch.model.switch_ns as f64 / 1e3)
            },
            sch.model.requests
        );
        for r in res.tables.iter().filter(|r| r.predicted.is_some()) {
            let (p, m) = (r.predicted.expect("filtered"), &r.summary);
            let err = |a: f64, b: f64| format!("{:+.1}%", (a - b) / b * 100.0);
            let _ = writeln!(
                o,
                "| {} | {:.2} | {} | {:.0} / {:.0} / {:.0} / {:.0} | {:.0} / {:.0} / {:.0} / {:.0} | {} | {} |",
                r.title,
                r.switches_per_ms.unwrap_or(0.0),
                r.runs.iter().filter_map(|x| x.window_entry_us).next_back().map_or("–".into(), |e| format!("{:.1} / {:.1} / {:.1}", e[0], e[1], e[2])),
                p.mean_us,
                p.p50_us,
                p.p99_us,
                p.max_us,
                m.mean_us,
                m.p50_us,
                m.p99_us,
                m.max_us,
                err(p.mean_us, m.mean_us),
                err(p.p99_us, m.p99_us)
            );
        }
        o.push_str("\n(error: predicted against measured, the medians over the runs; window entry: how long after its planned start a window was open to its partition, the executor's lateness plus its freeze and thaw calls, over the last run's recorded window starts.) schedule.svg draws the prediction for every layout of the paper's plan with its shares against window switches per ms, and the measured rows.\n\n");
    }
    if let Some((mean, p99)) = res.multicore_penalty_removed {
        let _ = writeln!(
            o,
            "## Multicore: the routing partition on its own CPU\n\nOf the partitioning penalty (PARTITIONED minus \
             TRADITIONAL WITH ROUTING) the routing partition's own CPU removes {:.0}% of the mean and {:.0}% of the p99.\n",
            mean * 100.0,
            p99 * 100.0
        );
    }
    if !res.sweep.is_empty() {
        o.push_str("## Fig. 5: response time against image size\n\n![Fig. 5](fig5.svg)\n\n");
        o.push_str("One run per point; the table size's point is the table's row (medians over its runs).\n\n");
        o.push_str("| scenario | size | runs | measured | timed out | mean µs | p99 µs | max µs |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &res.sweep {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.0} |",
                r.title,
                size_label(r.reply_size),
                r.runs.len(),
                r.summary.count,
                r.timeouts,
                r.summary.mean_us,
                r.summary.p99_us,
                r.summary.max_us
            );
        }
        o.push('\n');
    }
    o.push_str("Raw response times of every run: `raw/<scenario>-<size>-r<run>.json` (`samples_ns`, in order); one line per run in `runs.csv`.\n");
    o
}

/// One line per row (tables first, then the sweep's other sizes): the medians over its runs, the p50's range
/// and spread, and the setup.
pub fn csv(res: &Results) -> String {
    let mut o = String::from(
        "part,scenario,reply_size,reply_bytes,runs,requests,answered,timeouts,min_us,mean_us,std_us,p50_us,p90_us,p99_us,max_us,p50_min_us,p50_max_us,p50_spread,flagged,steal_pct,host_moved,setup\n",
    );
    let setup = field(&res.setup.caption);
    let mut line = |part: &str, r: &Row| {
        let s = &r.summary;
        let _ = writeln!(
            o,
            "{part},{},{},{},{},{},{},{},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{},{},{},{},{setup}",
            r.key,
            r.reply_size,
            r.reply_bytes,
            r.runs.len(),
            r.requests,
            r.answered,
            r.timeouts,
            s.min_us,
            s.mean_us,
            s.std_us,
            s.p50_us,
            s.p90_us,
            s.p99_us,
            s.max_us,
            r.low.p50_us,
            r.high.p50_us,
            r.p50_spread.map(|x| format!("{x:.4}")).unwrap_or_default(),
            r.flagged,
            r.disturbance.map(|d| format!("{:.2}", d.steal_pct)).unwrap_or_default(),
            r.disturbance.is_some_and(|d| d.moved())
        );
    };
    for r in &res.tables {
        line("table", r);
    }
    for r in res.sweep.iter().filter(|r| r.reply_size != res.table_size) {
        line("sweep", r);
    }
    o
}

/// One line per run, in the order of the rows, then of their runs.
pub fn runs_csv(res: &Results) -> String {
    let mut o = String::from("part,scenario,reply_size,repeat,reply_bytes,requests,answered,timeouts,min_us,mean_us,std_us,p50_us,p90_us,p99_us,max_us,raw,setup\n");
    let setup = field(&res.setup.caption);
    let rows = res.tables.iter().map(|r| ("table", r)).chain(res.sweep.iter().filter(|r| r.reply_size != res.table_size).map(|r| ("sweep", r)));
    for (part, r) in rows {
        for run in &r.runs {
            let s = &run.summary;
            let _ = writeln!(
                o,
                "{part},{},{},{},{},{},{},{},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{},{setup}",
                r.key, r.reply_size, run.repeat, run.reply_bytes, run.requests, run.answered, run.timeouts, s.min_us, s.mean_us, s.std_us, s.p50_us, s.p90_us, s.p99_us, s.max_us, run.raw
            );
        }
    }
    o
}

const COLORS: [&str; 6] = ["#555555", "#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#9467bd"];

/// Fig. 5: max (solid) and p99 (dashed) response time against answer size, log-log.
pub fn svg(res: &Results) -> String {
    let (w, h, left, right, top, bottom) = (820.0, 500.0, 70.0, 250.0, 30.0, 50.0);
    let sizes: Vec<usize> = {
        let mut v: Vec<usize> = res.sweep.iter().map(|r| r.reply_size).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let ys: Vec<f64> = res.sweep.iter().flat_map(|r| [r.summary.max_us, r.summary.p99_us]).filter(|v| *v > 0.0).collect();
    let mut o = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    if sizes.is_empty() || ys.is_empty() {
        o.push_str("<text x=\"20\" y=\"40\">no data</text>\n</svg>\n");
        return o;
    }
    let (xmin, xmax) = ((sizes[0] as f64).log10(), (*sizes.last().unwrap() as f64).log10().max((sizes[0] as f64).log10() + 1.0));
    let ymin = ys.iter().cloned().fold(f64::MAX, f64::min).log10().floor();
    let ymax = ys.iter().cloned().fold(0.0, f64::max).log10().ceil().max(ymin + 1.0);
    let px = |b: f64| left + (b.log10() - xmin) / (xmax - xmin) * (w - left - right);
    let py = |v: f64| top + (1.0 - (v.max(1e-3).log10() - ymin) / (ymax - ymin)) * (h - top - bottom);
    let _ = writeln!(o, "<text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">Fig. 5: response time against image size (max solid, p99 dashed)</text>", (w - right + left) / 2.0);
    // Axes and grid.
    let mut d = ymin as i32;
    while d as f64 <= ymax {
        let y = py(10f64.powi(d));
        let _ = writeln!(o, "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", w - right, left - 6.0, y + 4.0, fmt_us(10f64.powi(d)));
        d += 1;
    }
    for &s in &sizes {
        let x = px(s as f64);
        let _ = writeln!(o, "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>", h - bottom, h - bottom + 16.0, size_label(s));
    }
    let _ = writeln!(o, "<rect x=\"{left}\" y=\"{top}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#333\"/>", w - left - right, h - top - bottom);
    let _ = writeln!(o, "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">answer size</text>", (w - right + left) / 2.0, h - 10.0);
    let _ = writeln!(o, "<text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" text-anchor=\"middle\">response time</text>", (h - bottom + top) / 2.0, (h - bottom + top) / 2.0);
    for (i, s) in Scenario::ALL.iter().enumerate() {
        let mut rows: Vec<&Row> = res.sweep.iter().filter(|r| r.scenario == *s).collect();
        if rows.is_empty() {
            continue;
        }
        rows.sort_by_key(|r| r.reply_size);
        let c = COLORS[i % COLORS.len()];
        for (dash, f) in [("", (|r: &Row| r.summary.max_us) as fn(&Row) -> f64), (" stroke-dasharray=\"5,4\"", |r: &Row| r.summary.p99_us)] {
            let pts: Vec<String> = rows.iter().map(|r| format!("{:.1},{:.1}", px(r.reply_size as f64), py(f(r)))).collect();
            let _ = writeln!(o, "<polyline points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"{dash}/>", pts.join(" "));
        }
        let ly = top + 10.0 + i as f64 * 36.0;
        let _ = writeln!(o, "<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{c}\" stroke-width=\"3\"/>", w - right + 12.0, w - right + 36.0);
        let words: Vec<&str> = s.title().split(' ').collect();
        let (a, b) = words.split_at(words.len().min(3));
        let _ = writeln!(o, "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{}</text>", w - right + 40.0, ly + 4.0, a.join(" "));
        if !b.is_empty() {
            let _ = writeln!(o, "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{}</text>", w - right + 40.0, ly + 16.0, b.join(" "));
        }
    }
    o.push_str("</svg>\n");
    o
}


/// The trade-off figure: predicted layouts of the paper's plan, and the measured windowed rows.
pub fn schedule_svg(res: &Results) -> String {
    use partita_schedule::svg::{tradeoff, Kind, Point};
    let mut points: Vec<Point> = Vec::new();
    if let Some(sch) = &res.schedule {
        points.extend(sch.layouts.iter().map(|l| Point { switches_per_ms: l.switches_per_ms, mean_us: l.predicted.mean_us, p99_us: l.predicted.p99_us, kind: Kind::Predicted, label: None }));
    }
    for r in res.tables.iter().filter(|r| r.predicted.is_some()) {
        let x = r.switches_per_ms.unwrap_or(0.0);
        let p = r.predicted.expect("filtered");
        let label = match r.scenario {
            crate::scenario::Scenario::FilePlan => "--plan",
            _ => "paper's plan",
        };
        points.push(Point { switches_per_ms: x, mean_us: p.mean_us, p99_us: p.p99_us, kind: Kind::Front, label: None });
        points.push(Point { switches_per_ms: x, mean_us: r.summary.mean_us, p99_us: r.summary.p99_us, kind: Kind::Measured, label: Some(label.into()) });
    }
    tradeoff("Response time against window switches: layouts of the paper's plan (recorder 7/15, routing 8/15 of one CPU)", "the measured plans", &points)
}

/// Writes report.md, results.json, results.csv, runs.csv and fig5.svg into `out`.
pub fn write_all(res: &Results, out: &Path, command: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("report.md"), markdown(res, command))?;
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(res).map_err(std::io::Error::other)?)?;
    std::fs::write(out.join("results.csv"), csv(res))?;
    std::fs::write(out.join("runs.csv"), runs_csv(res))?;
    std::fs::write(out.join("fig5.svg"), svg(res))?;
    if res.schedule.is_some() {
        std::fs::write(out.join("schedule.svg"), schedule_svg(res))?;
    }
    Ok(())
}
