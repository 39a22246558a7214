//! The timeline drawn as an SVG picture, for a machine without a trace viewer: one lane per
//! stream (and one for the host's calls), spans coloured by kind, gaps left blank, the memory
//! curve of each device below.

use super::summary::{Span, Trace};
use std::collections::BTreeMap;
use std::fmt::Write as _;

const WIDTH: f64 = 1200.0;
const LABEL_WIDTH: f64 = 230.0;
const LANE_HEIGHT: f64 = 26.0;
const MEMORY_HEIGHT: f64 = 90.0;

fn colour(category: &str) -> &'static str {
    match category {
        "kernel" => "#3b7dd8",
        "copy" => "#e08a2c",
        "fill" => "#c9a227",
        "wait" => "#c94c4c",
        "sync" => "#7a7a7a",
        "compile" => "#8e5bc5",
        _ => "#5aa469",
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Draws `trace`.
pub fn render(trace: &Trace) -> String {
    let first = trace.spans.iter().map(|span| span.start).fold(f64::INFINITY, f64::min);
    let last = trace.spans.iter().map(Span::end).fold(f64::NEG_INFINITY, f64::max);
    let (first, last) = if first < last { (first, last) } else { (0.0, 1.0) };
    // Room on the right for the last tick's label.
    let plot = WIDTH - LABEL_WIDTH - 50.0;
    let x = |time: f64| LABEL_WIDTH + (time - first) / (last - first) * plot;

    // Lanes: the host's threads first, then each device's streams.
    let mut lanes: BTreeMap<(u64, u64), Vec<&Span>> = BTreeMap::new();
    for span in &trace.spans {
        if span.category != "region" {
            lanes.entry((span.pid, span.tid)).or_default().push(span);
        }
    }
    let devices: Vec<u64> = {
        let mut pids: Vec<u64> = trace
            .samples
            .iter()
            .filter(|s| s.name == "memory")
            .map(|s| s.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    };
    let top = 40.0;
    let lanes_bottom = top + lanes.len() as f64 * LANE_HEIGHT;
    let height = lanes_bottom + 30.0 + devices.len() as f64 * (MEMORY_HEIGHT + 20.0) + 40.0;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="10" y="18" font-size="13" font-weight="bold">xhal trace: {:.3} ms</text>"#,
        (last - first) / 1e3
    );
    // Legend.
    let mut legend_x = LABEL_WIDTH;
    for category in ["kernel", "copy", "fill", "wait", "sync", "api", "compile"] {
        let _ = writeln!(
            out,
            r#"<rect x="{legend_x}" y="8" width="10" height="10" fill="{}"/><text x="{}" y="17">{category}</text>"#,
            colour(category),
            legend_x + 14.0
        );
        legend_x += 75.0;
    }
    for (lane, ((pid, tid), spans)) in lanes.iter().enumerate() {
        let y = top + lane as f64 * LANE_HEIGHT;
        let fill = if lane % 2 == 0 { "#f4f4f4" } else { "#ffffff" };
        let _ = writeln!(
            out,
            r#"<rect x="0" y="{y}" width="{WIDTH}" height="{LANE_HEIGHT}" fill="{fill}"/>"#
        );
        let _ = writeln!(
            out,
            r#"<text x="6" y="{:.1}">{}</text>"#,
            y + LANE_HEIGHT * 0.65,
            escape(&trace.track_name(*pid, *tid))
        );
        for span in spans {
            let (left, right) = (x(span.start), x(span.end()));
            let _ = writeln!(
                out,
                r#"<rect x="{left:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}"><title>{} ({:.1} µs)</title></rect>"#,
                y + 4.0,
                (right - left).max(0.6),
                LANE_HEIGHT - 8.0,
                colour(&span.category),
                escape(&span.name),
                span.duration
            );
        }
    }
    // Time axis.
    let axis_y = lanes_bottom + 14.0;
    for tick in 0..=5 {
        let time = first + (last - first) * f64::from(tick) / 5.0;
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{lanes_bottom}" stroke="#cccccc" stroke-dasharray="2,3"/><text x="{0:.1}" y="{axis_y}" text-anchor="middle">{1:.2} ms</text>"##,
            x(time),
            (time - first) / 1e3
        );
    }
    // Memory curves.
    for (index, pid) in devices.iter().enumerate() {
        let base = lanes_bottom + 30.0 + index as f64 * (MEMORY_HEIGHT + 20.0);
        let samples: Vec<_> = trace
            .samples
            .iter()
            .filter(|s| s.name == "memory" && s.pid == *pid)
            .collect();
        let peak = samples
            .iter()
            .filter_map(|sample| sample.values.get("reserved").or(sample.values.get("allocated")))
            .fold(1.0f64, |a, b| a.max(*b));
        let name = trace
            .process_names
            .get(pid)
            .cloned()
            .unwrap_or_else(|| format!("process {pid}"));
        let _ = writeln!(
            out,
            r#"<text x="6" y="{:.1}">{} memory (peak {:.1} MiB)</text>"#,
            base + 14.0,
            escape(&name),
            peak / f64::from(1u32 << 20)
        );
        for (key, stroke) in [("allocated", "#3b7dd8"), ("reserved", "#999999")] {
            let mut points = String::new();
            let mut previous = 0.0;
            for sample in &samples {
                let Some(value) = sample.values.get(key) else { continue };
                let at = x(sample.at.clamp(first, last));
                let y_of = |value: f64| base + MEMORY_HEIGHT - value / peak * (MEMORY_HEIGHT - 10.0);
                // A step: the value holds until the next sample.
                let _ = write!(points, "{at:.1},{:.1} {at:.1},{:.1} ", y_of(previous), y_of(*value));
                previous = *value;
            }
            let _ = write!(
                points,
                "{:.1},{:.1}",
                x(last),
                base + MEMORY_HEIGHT - previous / peak * (MEMORY_HEIGHT - 10.0)
            );
            let _ = writeln!(
                out,
                r#"<polyline points="{points}" fill="none" stroke="{stroke}" stroke-width="1.5"/>"#
            );
        }
        let _ = writeln!(
            out,
            r##"<line x1="{LABEL_WIDTH}" y1="{0}" x2="{1}" y2="{0}" stroke="#444444"/>"##,
            base + MEMORY_HEIGHT,
            WIDTH - 20.0
        );
    }
    out.push_str("</svg>\n");
    out
}
