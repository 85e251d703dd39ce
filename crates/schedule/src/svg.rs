//! The trade-off figure: window switches per millisecond against response time, predicted for every candidate
//! and, where a benchmark ran a plan, measured.
use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Predicted,
    /// A predicted point on the trade-off's front (no candidate is better in both).
    Front,
    Measured,
}

#[derive(Debug, Clone)]
pub struct Point {
    pub switches_per_ms: f64,
    pub mean_us: f64,
    pub p99_us: f64,
    pub kind: Kind,
    pub label: Option<String>,
}

/// An SVG of `points`: mean (circles) and p99 (squares) against switches per ms.
/// `front` names the emphasised predicted points (the trade-off's front, or the plans that were measured).
pub fn tradeoff(title: &str, front: &str, points: &[Point]) -> String {
    let (w, h, l, r, t, b) = (760.0, 460.0, 70.0, 20.0, 40.0, 60.0);
    let xmax = points.iter().map(|p| p.switches_per_ms).fold(0.0f64, f64::max).max(1.0) * 1.05;
    let ymax = points.iter().map(|p| p.p99_us.max(p.mean_us)).fold(0.0f64, f64::max).max(1.0) * 1.05;
    let x = |v: f64| l + v / xmax * (w - l - r);
    let y = |v: f64| h - b - v / ymax * (h - t - b);
    let mut s = String::new();
    let _ = write!(s, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#);
    let _ = write!(s, r#"<rect width="{w}" height="{h}" fill="white"/><text x="{l}" y="22" font-size="14">{}</text>"#, escape(title));
    let _ = write!(s, r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>"#, h - b, w - r, h - b, h - b);
    for i in 0..=5 {
        let (xv, yv) = (xmax * i as f64 / 5.0, ymax * i as f64 / 5.0);
        let _ = write!(s, r#"<text x="{:.1}" y="{}" text-anchor="middle">{xv:.1}</text>"#, x(xv), h - b + 16.0);
        let _ = write!(s, r##"<text x="{}" y="{:.1}" text-anchor="end">{yv:.0}</text><line x1="{l}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#ddd"/>"##, l - 6.0, y(yv) + 4.0, y(yv), w - r, y(yv));
    }
    let _ = write!(s, r#"<text x="{}" y="{}" text-anchor="middle">window switches per ms (more, shorter windows →)</text>"#, (l + w - r) / 2.0, h - 18.0);
    let _ = write!(s, r#"<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">response time, µs</text>"#, (t + h - b) / 2.0, (t + h - b) / 2.0);
    for p in points {
        let (fill, op, size) = match p.kind {
            Kind::Predicted => ("#9ab", "0.5", 3.0),
            Kind::Front => ("#1565c0", "1", 4.0),
            Kind::Measured => ("#c62828", "1", 6.0),
        };
        let (px, pm, pp) = (x(p.switches_per_ms), y(p.mean_us), y(p.p99_us));
        let _ = write!(s, r#"<circle cx="{px:.1}" cy="{pm:.1}" r="{size}" fill="{fill}" fill-opacity="{op}"/>"#);
        let _ = write!(s, r#"<rect x="{:.1}" y="{:.1}" width="{}" height="{}" fill="none" stroke="{fill}" stroke-opacity="{op}"/>"#, px - size, pp - size, 2.0 * size, 2.0 * size);
        if let Some(label) = &p.label {
            let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" fill="{fill}">{}</text>"#, px + 8.0, pp - 6.0, escape(label));
        }
    }
    let front = format!("predicted, {front}");
    let legend = [("#9ab", "predicted, a candidate plan"), ("#1565c0", front.as_str()), ("#c62828", "measured")];
    for (i, (c, text)) in legend.iter().enumerate() {
        let ly = t + 14.0 + 16.0 * i as f64;
        let _ = write!(s, r#"<circle cx="{}" cy="{}" r="4" fill="{c}"/><text x="{}" y="{}">{text}</text>"#, w - 250.0, ly - 4.0, w - 240.0, ly);
    }
    let _ = write!(s, r#"<text x="{}" y="{}">● mean   □ p99</text></svg>"#, w - 250.0, t + 62.0);
    s
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
