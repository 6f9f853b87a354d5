//! The picture of `dvcq bench events --plot FILE.svg`: latency percentiles per wait mode
//! (bars on a log scale, as the modes differ by orders of magnitude) beside the consumer's
//! CPU time per completion (linear), as one self-contained SVG file.

use super::events::EventsRow;
use std::fmt::Write;

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 440.0;
/// Top and bottom of both plot areas.
const TOP: f64 = 70.0;
const BOTTOM: f64 = 370.0;
/// Left and right edges of the latency and the CPU plot areas.
const LAT: (f64, f64) = (80.0, 500.0);
const CPU: (f64, f64) = (600.0, 830.0);
/// Bar colours: p50, p99, p99.9, and the CPU bars.
const COLOURS: [&str; 3] = ["#4c78a8", "#f58518", "#e45756"];
const CPU_COLOUR: &str = "#54a24b";

/// Text for an SVG text node or attribute.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A duration in ns as a short label in µs.
fn us(ns: f64) -> String {
    let u = ns / 1000.0;
    if u >= 100.0 {
        format!("{u:.0}")
    } else if u >= 10.0 {
        format!("{u:.1}")
    } else {
        format!("{u:.2}")
    }
}

/// The smallest 1, 2 or 5 times a power of ten at or above `x` (a linear axis' top).
fn nice_ceiling(x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|&v| v >= x).unwrap_or(10.0 * p)
}

/// The SVG document for `rows`, titled with the device and the completions per mode.
pub fn svg(device: &str, rows: &[EventsRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
    let n = rows.first().map_or(0, |r| r.completions);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16">dvcq event-mode latency on {}: {n} completions per mode</text>"#,
        WIDTH / 2.0,
        esc(device)
    );
    latency_panel(&mut s, rows);
    cpu_panel(&mut s, rows);
    s.push_str("</svg>\n");
    s
}

/// Grouped bars of p50, p99 and p99.9 per mode on a log axis in µs.
fn latency_panel(s: &mut String, rows: &[EventsRow]) {
    let values: Vec<[f64; 3]> =
        rows.iter().map(|r| [r.p50_ns as f64, r.p99_ns as f64, r.p999_ns as f64].map(|v| v.max(1.0))).collect();
    let lo = values.iter().flatten().copied().fold(f64::INFINITY, f64::min).max(1.0);
    let hi = values.iter().flatten().copied().fold(1.0, f64::max);
    // Decades of ns that hold every value.
    let (d0, d1) = (lo.log10().floor() as i32, (hi.log10().ceil() as i32).max(lo.log10().floor() as i32 + 1));
    let y = |v: f64| BOTTOM - (v.log10() - f64::from(d0)) / f64::from(d1 - d0) * (BOTTOM - TOP);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle" font-size="14">latency, post to the consumer's return [µs, log scale]</text>"#,
        (LAT.0 + LAT.1) / 2.0,
        TOP - 22.0
    );
    for d in d0..=d1 {
        let v = 10f64.powi(d);
        let yy = y(v);
        let _ = writeln!(s, r##"<line x1="{}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#ddd"/>"##, LAT.0, LAT.1);
        let _ = writeln!(s, r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#, LAT.0 - 6.0, yy + 4.0, us(v));
    }
    axes(s, LAT);
    let group = (LAT.1 - LAT.0) / rows.len().max(1) as f64;
    let bar = group / 4.5;
    for (i, (r, v)) in rows.iter().zip(&values).enumerate() {
        let x0 = LAT.0 + group * i as f64 + (group - 3.0 * bar) / 2.0;
        for (j, &val) in v.iter().enumerate() {
            let (x, top) = (x0 + bar * j as f64, y(val));
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                bar - 2.0,
                BOTTOM - top,
                COLOURS[j]
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                x + (bar - 2.0) / 2.0,
                top - 4.0,
                us(val)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle" font-size="13">{}</text>"#,
            LAT.0 + group * (i as f64 + 0.5),
            BOTTOM + 18.0,
            r.mode.name()
        );
    }
    for (j, name) in ["p50", "p99", "p99.9"].iter().enumerate() {
        let x = LAT.0 + 20.0 + 80.0 * j as f64;
        let _ = writeln!(s, r#"<rect x="{x}" y="{}" width="12" height="12" fill="{}"/>"#, BOTTOM + 36.0, COLOURS[j]);
        let _ = writeln!(s, r#"<text x="{}" y="{}">{name}</text>"#, x + 16.0, BOTTOM + 46.0);
    }
}

/// One bar per mode: the consumer's CPU time per completion, in µs.
fn cpu_panel(s: &mut String, rows: &[EventsRow]) {
    let top_value = nice_ceiling(rows.iter().map(|r| r.cpu_ns_per_completion).fold(0.0, f64::max));
    let y = |v: f64| BOTTOM - v / top_value * (BOTTOM - TOP);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle" font-size="14">consumer CPU per completion [µs]</text>"#,
        (CPU.0 + CPU.1) / 2.0,
        TOP - 22.0
    );
    for k in 0..=4 {
        let v = top_value * f64::from(k) / 4.0;
        let yy = y(v);
        let _ = writeln!(s, r##"<line x1="{}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#ddd"/>"##, CPU.0, CPU.1);
        let _ = writeln!(s, r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#, CPU.0 - 6.0, yy + 4.0, us(v));
    }
    axes(s, CPU);
    let group = (CPU.1 - CPU.0) / rows.len().max(1) as f64;
    for (i, r) in rows.iter().enumerate() {
        let v = r.cpu_ns_per_completion;
        let (x, top, w) = (CPU.0 + group * i as f64 + group * 0.2, y(v), group * 0.6);
        let _ = writeln!(
            s,
            r#"<rect x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{:.1}" fill="{CPU_COLOUR}"/>"#,
            BOTTOM - top
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
            x + w / 2.0,
            top - 4.0,
            us(v)
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle" font-size="13">{}</text>"#,
            x + w / 2.0,
            BOTTOM + 18.0,
            r.mode.name()
        );
    }
}

/// The x and y axis lines of a plot area.
fn axes(s: &mut String, (x0, x1): (f64, f64)) {
    let _ = writeln!(s, r#"<line x1="{x0}" y1="{BOTTOM}" x2="{x1}" y2="{BOTTOM}" stroke="black"/>"#);
    let _ = writeln!(s, r#"<line x1="{x0}" y1="{TOP}" x2="{x0}" y2="{BOTTOM}" stroke="black"/>"#);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::events::WaitMode;

    fn row(mode: WaitMode, p50: u64, cpu: f64) -> EventsRow {
        EventsRow {
            mode,
            completions: 1000,
            p50_ns: p50,
            p99_ns: p50 * 3,
            p999_ns: p50 * 10,
            max_ns: p50 * 20,
            mean_ns: p50 as f64,
            cpu_ns_per_completion: cpu,
            sleeps: 0,
        }
    }

    #[test]
    fn bars_scale_with_the_values_and_text_is_escaped() {
        let rows = [row(WaitMode::Busy, 800, 50_000.0), row(WaitMode::Events, 20_000, 3_000.0)];
        let svg = svg("a<b>&c", &rows);
        assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("on a&lt;b&gt;&amp;c: 1000 completions"), "{svg}");
        for label in ["busy", "events", "p50", "p99.9", "0.80", "20.0", "200", "50.0", "3.00"] {
            assert!(svg.contains(&format!(">{label}<")), "{label} missing");
        }
        // Bar heights: the events p50 bar (20 µs) is taller than the busy one (0.8 µs); the
        // busy CPU bar is the tallest of its panel (the axis tops out at 50 µs).
        let heights: Vec<f64> = svg
            .lines()
            .filter(|l| l.starts_with("<rect x=") && !l.contains("width=\"12\""))
            .map(|l| l.split("height=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(heights.len(), 8, "3 latency bars per mode, 1 CPU bar per mode");
        assert!(heights[3] > heights[0]);
        assert!((heights[6] - (BOTTOM - TOP)).abs() < 0.5 && heights[7] < heights[6]);
    }

    #[test]
    fn axis_tops_are_round() {
        assert_eq!(
            [nice_ceiling(0.0), nice_ceiling(3.0), nice_ceiling(1200.0), nice_ceiling(5000.0)],
            [1.0, 5.0, 2000.0, 5000.0]
        );
    }
}
