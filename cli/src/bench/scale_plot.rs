//! The picture of `dvcq bench scale --plot FILE.svg`: ns per completion against the number
//! of QPs sharing a CQ and of CQs one thread polls (log x axis, one line each), with the
//! target (1.5 times the first QP point) drawn across, as one self-contained SVG file.

use super::scale::{Axis, ScaleRow};
use std::fmt::Write;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 720.0;
const TOP: f64 = 70.0;
const BOTTOM: f64 = 360.0;
/// Line colours: the QP axis, the CQ axis, the target.
const QP_COLOUR: &str = "#4c78a8";
const CQ_COLOUR: &str = "#f58518";
const TARGET_COLOUR: &str = "#e45756";
/// rdma-core's `ibv_poll_cq` in the same harness (device runs).
const RDMA_CORE_COLOUR: &str = "#54a24b";
/// The issue's target: the cost at the largest QP count over the cost at one QP.
pub const TARGET_RATIO: f64 = 1.5;

/// Text for an SVG text node or attribute.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The smallest 1, 2 or 5 times a power of ten at or above `x` (the y axis' top).
fn nice_ceiling(x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|&v| v >= x).unwrap_or(10.0 * p)
}

/// The SVG document for `rows`, titled with the device.
pub fn svg(device: &str, rows: &[ScaleRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16">dvcq poll cost as QPs and CQs grow, {}</text>"#,
        WIDTH / 2.0,
        esc(device)
    );
    let qp_first = rows.iter().find(|r| r.axis == Axis::Qps).map(|r| r.ns_median);
    let target = qp_first.map(|v| v * TARGET_RATIO);
    let hi = rows
        .iter()
        .map(|r| r.ns_median)
        .chain(rows.iter().filter_map(|r| r.rdma_core_ns))
        .chain(target)
        .fold(0.0, f64::max);
    let top = nice_ceiling(hi * 1.1);
    let max_count = rows.iter().map(|r| r.count).max().unwrap_or(1).max(2);
    let decades = f64::from(max_count).log2().ceil().max(1.0);
    let x = |n: u32| LEFT + f64::from(n.max(1)).log2() / decades * (RIGHT - LEFT);
    let y = |v: f64| BOTTOM - v / top * (BOTTOM - TOP);
    for k in 0..=4 {
        let v = top * f64::from(k) / 4.0;
        let yy = y(v);
        let _ = writeln!(s, r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{RIGHT}" y2="{yy:.1}" stroke="#ddd"/>"##);
        let _ = writeln!(s, r#"<text x="{}" y="{:.1}" text-anchor="end">{v:.1}</text>"#, LEFT - 6.0, yy + 4.0);
    }
    // Ticks at powers of 4 (1, 4, 16, ...), as the default counts are.
    let mut n = 1u64;
    while n <= u64::from(max_count) {
        let xx = x(n as u32);
        let _ = writeln!(s, r##"<line x1="{xx:.1}" y1="{BOTTOM}" x2="{xx:.1}" y2="{}" stroke="#888"/>"##, BOTTOM + 5.0);
        let _ = writeln!(s, r#"<text x="{xx:.1}" y="{}" text-anchor="middle">{n}</text>"#, BOTTOM + 18.0);
        n *= 4;
    }
    let _ = writeln!(s, r#"<line x1="{LEFT}" y1="{BOTTOM}" x2="{RIGHT}" y2="{BOTTOM}" stroke="black"/>"#);
    let _ = writeln!(s, r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{BOTTOM}" stroke="black"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">QPs sharing one CQ, or CQs one thread polls [log scale]</text>"#,
        (LEFT + RIGHT) / 2.0,
        BOTTOM + 38.0
    );
    let _ = writeln!(
        s,
        r#"<text x="20" y="{}" transform="rotate(-90 20 {})" text-anchor="middle">ns per completion [median]</text>"#,
        (TOP + BOTTOM) / 2.0,
        (TOP + BOTTOM) / 2.0
    );
    if let Some(t) = target {
        let yy = y(t);
        let _ = writeln!(
            s,
            r#"<line x1="{LEFT}" y1="{yy:.1}" x2="{RIGHT}" y2="{yy:.1}" stroke="{TARGET_COLOUR}" stroke-dasharray="6 4"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end" fill="{TARGET_COLOUR}">target: {TARGET_RATIO}x the 1-QP cost</text>"#,
            RIGHT,
            yy - 5.0
        );
    }
    let series: [(Option<Axis>, &str, &str); 3] = [
        (Some(Axis::Qps), QP_COLOUR, "dvcq, QPs on one CQ"),
        (Some(Axis::Cqs), CQ_COLOUR, "dvcq, CQs of one QP each"),
        (None, RDMA_CORE_COLOUR, "rdma-core's ibv_poll_cq, QPs on one CQ"),
    ];
    for (k, (axis, colour, name)) in series.into_iter().enumerate() {
        let pts: Vec<(f64, f64, f64)> = match axis {
            Some(axis) => {
                rows.iter().filter(|r| r.axis == axis).map(|r| (x(r.count), y(r.ns_median), r.ns_median)).collect()
            }
            None => rows
                .iter()
                .filter(|r| r.axis == Axis::Qps)
                .filter_map(|r| r.rdma_core_ns.map(|v| (x(r.count), y(v), v)))
                .collect(),
        };
        if pts.is_empty() {
            continue;
        }
        let path: Vec<String> = pts.iter().map(|(a, b, _)| format!("{a:.1},{b:.1}")).collect();
        let _ =
            writeln!(s, r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#, path.join(" "));
        for (a, b, v) in &pts {
            let _ = writeln!(s, r#"<circle cx="{a:.1}" cy="{b:.1}" r="4" fill="{colour}"/>"#);
            let _ =
                writeln!(s, r#"<text x="{a:.1}" y="{:.1}" text-anchor="middle" font-size="10">{v:.1}</text>"#, b - 8.0);
        }
        let ly = BOTTOM + 56.0 + 16.0 * k as f64;
        let _ = writeln!(s, r#"<rect x="{}" y="{}" width="12" height="12" fill="{colour}"/>"#, LEFT, ly - 10.0);
        let _ = writeln!(s, r#"<text x="{}" y="{ly}">{name}</text>"#, LEFT + 16.0);
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::scale::{Device, Memory};

    fn row(axis: Axis, count: u32, ns: f64) -> ScaleRow {
        ScaleRow {
            device: Device::Mlx5.name().to_string(),
            axis,
            count,
            completions: 4096,
            ns_median: ns,
            ns_min: ns,
            instr: None,
            ratio: 1.0,
            memory: Some(Memory { per_qp: 0, per_cq: 0 }),
            rdma_core_ns: None,
        }
    }

    /// Points sit further right for more QPs (log axis) and higher for more ns; the
    /// target line is at 1.5 times the first QP point; text is escaped.
    #[test]
    fn points_follow_the_values_on_a_log_axis() {
        let rows =
            [row(Axis::Qps, 1, 10.0), row(Axis::Qps, 16, 12.0), row(Axis::Qps, 256, 20.0), row(Axis::Cqs, 4, 11.0)];
        let svg = svg("a<b>", &rows);
        assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a&lt;b&gt;"));
        let circles: Vec<(f64, f64)> = svg
            .lines()
            .filter(|l| l.starts_with("<circle"))
            .map(|l| {
                let attr =
                    |k: &str| l.split(&format!("{k}=\"")).nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
                (attr("cx"), attr("cy"))
            })
            .collect();
        assert_eq!(circles.len(), 4);
        // 1, 16, 256 are evenly spaced on the log axis.
        let (d1, d2) = (circles[1].0 - circles[0].0, circles[2].0 - circles[1].0);
        assert!((d1 - d2).abs() < 0.2, "{circles:?}");
        assert!(circles[2].1 < circles[1].1 && circles[1].1 < circles[0].1, "{circles:?}");
        assert!(svg.contains("target: 1.5x"));
        assert!(svg.contains(">20.0<") && svg.contains("CQs of one QP each"));
    }

    /// A device run's rdma-core figures are a line of their own, beside dvcq's, on the same
    /// scale (the taller of the two sets the axis).
    #[test]
    fn rdma_cores_figures_are_drawn_beside_dvcqs() {
        let mut rows = [row(Axis::Qps, 1, 10.0), row(Axis::Qps, 64, 12.0)];
        rows[0].rdma_core_ns = Some(30.0);
        rows[1].rdma_core_ns = Some(45.0);
        let svg = svg("mlx5_0", &rows);
        assert_eq!(svg.lines().filter(|l| l.starts_with("<circle")).count(), 4);
        assert!(svg.contains("rdma-core's ibv_poll_cq") && svg.contains(">45.0<"), "{svg}");
        assert_eq!(svg.matches(RDMA_CORE_COLOUR).count(), 4, "a line, two points and the key");
        let without = super::svg("model-mlx5", &[row(Axis::Qps, 1, 10.0)]);
        assert!(!without.contains("ibv_poll_cq"), "no rdma-core key without its figures");
    }
}
