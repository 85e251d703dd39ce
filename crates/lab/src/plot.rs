//! The studies' figures as SVG, and PNG copies made by `rsvg-convert` (Debian's librsvg2-bin, which
//! `scripts/setup.sh` installs).
use crate::boxstats::BoxStats;
use crate::stats::fmt_us;
use std::fmt::Write;
use std::path::Path;

pub const COLORS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

fn head(w: f64, h: f64, title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{:.1}\" y=\"18\" text-anchor=\"middle\" font-size=\"13\">{}</text>\n",
        w / 2.0,
        escape(title)
    )
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A log-scale axis over `[lo, hi]` (both > 0) in whole decades.
fn decades(lo: f64, hi: f64) -> (f64, f64) {
    let a = lo.max(1e-3).log10().floor();
    (a, hi.max(lo).max(1e-3).log10().ceil().max(a + 1.0))
}

/// One line of a chart: its name and (x, y) points.
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

/// Lines against a linear x axis and a log-scale y axis in µs.
pub fn lines(title: &str, x_label: &str, lines: &[Line]) -> String {
    let (w, h, left, right, top, bottom) = (860.0, 440.0, 70.0, 270.0, 34.0, 46.0);
    let mut o = head(w, h, title);
    let pts: Vec<(f64, f64)> = lines.iter().flat_map(|l| l.points.iter().copied()).filter(|p| p.1 > 0.0).collect();
    if pts.is_empty() {
        o.push_str("<text x=\"20\" y=\"60\">no data</text>\n</svg>\n");
        return o;
    }
    let (xmin, xmax) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let xmax = if xmax > xmin { xmax } else { xmin + 1.0 };
    let (ylo, yhi) = decades(pts.iter().map(|p| p.1).fold(f64::MAX, f64::min), pts.iter().map(|p| p.1).fold(0.0, f64::max));
    let px = |x: f64| left + (x - xmin) / (xmax - xmin) * (w - left - right);
    let py = |y: f64| top + (1.0 - (y.max(1e-3).log10() - ylo) / (yhi - ylo)) * (h - top - bottom);
    for d in ylo as i32..=yhi as i32 {
        let y = py(10f64.powi(d));
        let _ = writeln!(o, "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", w - right, left - 6.0, y + 4.0, fmt_us(10f64.powi(d)));
    }
    let mut xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    for x in xs {
        let _ = writeln!(o, "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{1:.1}\" stroke=\"#eee\"/><text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{x}</text>", px(x), h - bottom, h - bottom + 15.0);
    }
    let _ = writeln!(o, "<rect x=\"{left}\" y=\"{top}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#333\"/>", w - left - right, h - top - bottom);
    let _ = writeln!(o, "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>", (w - right + left) / 2.0, h - 8.0, escape(x_label));
    for (i, l) in lines.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let dash = if l.dashed { " stroke-dasharray=\"5,4\"" } else { "" };
        let p: Vec<String> = l.points.iter().filter(|p| p.1 > 0.0).map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1))).collect();
        let _ = writeln!(o, "<polyline points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"{dash}/>", p.join(" "));
        let ly = top + 8.0 + i as f64 * 18.0;
        let _ = writeln!(o, "<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{c}\" stroke-width=\"3\"{dash}/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{}</text>", w - right + 10.0, w - right + 34.0, w - right + 38.0, ly + 4.0, escape(&l.name));
    }
    o.push_str("</svg>\n");
    o
}

/// Box plots on a log-scale µs axis, one per label: the box from quartile to quartile with the median, the
/// whiskers of [`BoxStats`], the mean as a dot and the max as a cross.
pub fn boxes(title: &str, items: &[(String, BoxStats)]) -> String {
    let (left, right, top, bottom) = (70.0, 20.0, 34.0, 80.0);
    let slot = 46.0;
    let w = (left + right + slot * items.len().max(1) as f64).max(460.0);
    let h = 440.0;
    let mut o = head(w, h, title);
    if items.is_empty() {
        o.push_str("<text x=\"20\" y=\"60\">no data</text>\n</svg>\n");
        return o;
    }
    let lo = items.iter().map(|(_, s)| s.lower_whisker.min(s.median)).fold(f64::MAX, f64::min);
    let hi = items.iter().map(|(_, s)| s.max).fold(0.0, f64::max);
    let (ylo, yhi) = decades(lo.max(0.1), hi.max(1.0));
    let py = |y: f64| top + (1.0 - (y.max(10f64.powf(ylo)).log10() - ylo) / (yhi - ylo)) * (h - top - bottom);
    for d in ylo as i32..=yhi as i32 {
        let y = py(10f64.powi(d));
        let _ = writeln!(o, "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", w - right, left - 6.0, y + 4.0, fmt_us(10f64.powi(d)));
    }
    for (i, (label, s)) in items.iter().enumerate() {
        let cx = left + slot * (i as f64 + 0.5);
        let c = COLORS[i % COLORS.len()];
        let (q1, q3, md) = (py(s.lower_quartile), py(s.upper_quartile), py(s.median));
        let _ = writeln!(o, "<line x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" stroke=\"{c}\"/>", py(s.lower_whisker), py(s.upper_whisker));
        for wy in [py(s.lower_whisker), py(s.upper_whisker)] {
            let _ = writeln!(o, "<line x1=\"{:.1}\" y1=\"{wy:.1}\" x2=\"{:.1}\" y2=\"{wy:.1}\" stroke=\"{c}\"/>", cx - 8.0, cx + 8.0);
        }
        let _ = writeln!(o, "<rect x=\"{:.1}\" y=\"{q3:.1}\" width=\"28\" height=\"{:.1}\" fill=\"{c}\" fill-opacity=\"0.25\" stroke=\"{c}\"/>", cx - 14.0, (q1 - q3).max(1.0));
        let _ = writeln!(o, "<line x1=\"{:.1}\" y1=\"{md:.1}\" x2=\"{:.1}\" y2=\"{md:.1}\" stroke=\"{c}\" stroke-width=\"2\"/>", cx - 14.0, cx + 14.0);
        let _ = writeln!(o, "<circle cx=\"{cx:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{c}\"/>", py(s.mean));
        let mx = py(s.max);
        let _ = writeln!(o, "<path d=\"M{:.1},{:.1} l8,8 m0,-8 l-8,8\" stroke=\"{c}\"/>", cx - 4.0, mx - 4.0);
        let _ = writeln!(o, "<text x=\"{cx:.1}\" y=\"{:.1}\" transform=\"rotate(60 {cx:.1} {:.1})\" font-size=\"10\">{}</text>", h - bottom + 12.0, h - bottom + 12.0, escape(label));
    }
    let _ = writeln!(o, "<text x=\"10\" y=\"{:.1}\" font-size=\"10\">box: quartiles and median; whiskers: 2.5th and 97.5th percentiles;</text>", h - 20.0);
    let _ = writeln!(o, "<text x=\"10\" y=\"{:.1}\" font-size=\"10\">dot: mean; cross: max</text>", h - 7.0);
    o.push_str("</svg>\n");
    o
}

/// Writes `svg` to `path` and a PNG beside it (same name, `.png`) with `rsvg-convert`; the PNG's outcome in
/// words when it could not be made (the SVG is written either way).
pub fn write_svg_and_png(path: &Path, svg: &str) -> std::io::Result<Result<(), String>> {
    std::fs::write(path, svg)?;
    let png = path.with_extension("png");
    Ok(match std::process::Command::new("rsvg-convert").arg("-o").arg(&png).arg(path).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("rsvg-convert failed: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(format!("no PNG: rsvg-convert: {e} (Debian package librsvg2-bin; scripts/setup.sh installs it)")),
    })
}
