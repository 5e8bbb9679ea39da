//! Plot 5: an icicle flame graph (root at the top) of the merged allocation
//! tree weighted by bytes, as a self-contained SVG (frames with the same
//! function under the same parent are merged; hover shows the full name).

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::markup::escape;
use crate::plot::Data;
use crate::plot_title::title;
use crate::stacks::stacks;

const WIDTH: f64 = 1200.0;
const ROW: f64 = 18.0;
const TOP: f64 = 56.0;
/// Narrower frames are not drawn.
const MIN_PX: f64 = 0.3;

#[derive(Default)]
struct Frame {
    name: String,
    bytes: u64,
    children: Vec<usize>,
    index: HashMap<String, usize>,
}

struct Tree {
    nodes: Vec<Frame>,
}

impl Tree {
    fn child(&mut self, parent: usize, name: &str) -> usize {
        if let Some(&c) = self.nodes[parent].index.get(name) {
            return c;
        }
        let c = self.nodes.len();
        self.nodes.push(Frame {
            name: name.to_string(),
            ..Frame::default()
        });
        self.nodes[parent].children.push(c);
        self.nodes[parent].index.insert(name.to_string(), c);
        c
    }
}

fn color(name: &str) -> String {
    let mut h: u32 = 2166136261;
    for b in name.bytes() {
        h = (h ^ b as u32).wrapping_mul(16777619);
    }
    format!(
        "rgb({},{},{})",
        205 + h % 50,
        90 + (h >> 8) % 140,
        40 + (h >> 16) % 50
    )
}

/// The flame graph of `d`'s allocation tree.
pub fn svg(d: &Data) -> String {
    let mut tree = Tree {
        nodes: vec![Frame {
            name: "all".into(),
            ..Frame::default()
        }],
    };
    let mut depth = 1usize;
    for s in stacks(&d.profile, &d.symbols) {
        if s.bytes == 0 {
            continue;
        }
        let names = s.names();
        depth = depth.max(names.len() + 1);
        tree.nodes[0].bytes += s.bytes;
        let mut cur = 0;
        for n in &names {
            cur = tree.child(cur, n);
            tree.nodes[cur].bytes += s.bytes;
        }
    }
    let height = TOP + depth as f64 * ROW + 30.0;
    let total = tree.nodes[0].bytes;
    let mut out = String::new();
    let heading = title(&d.profile, "Allocation flame graph (bytes)");
    let _ = write!(
        out,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12">
<title>{}</title>
<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="white"/>
<text x="{}" y="24" font-size="18" text-anchor="middle">{}</text>
<text x="{}" y="44" font-size="12" text-anchor="middle" fill="grey">{} allocated in all; width = bytes, root at the top; hover a frame for its name</text>
"#,
        escape(&heading, true),
        WIDTH / 2.0,
        escape(&heading, true),
        WIDTH / 2.0,
        crate::report_text::human_bytes(total),
    );
    if total == 0 {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">no allocations in this report</text>"#,
            WIDTH / 2.0,
            TOP + 20.0
        );
    } else {
        // (node, x, depth), children left to right by bytes.
        let mut stack = vec![(0usize, 0.0f64, 0usize)];
        while let Some((i, x, level)) = stack.pop() {
            let f = &tree.nodes[i];
            let w = f.bytes as f64 / total as f64 * WIDTH;
            if w < MIN_PX {
                continue;
            }
            let y = TOP + level as f64 * ROW;
            let pct = f.bytes as f64 * 100.0 / total as f64;
            let tip = format!(
                "{} — {} ({pct:.2}%)",
                f.name,
                crate::report_text::human_bytes(f.bytes)
            );
            let _ = write!(
                out,
                r#"<g><title>{}</title><rect x="{x:.2}" y="{y:.1}" width="{:.2}" height="{}" fill="{}" stroke="white" stroke-width="0.5"/>"#,
                escape(&tip, true),
                w,
                ROW - 1.0,
                color(&f.name)
            );
            let chars = ((w - 6.0) / 7.0).floor();
            if chars >= 3.0 {
                let label = crate::label::ellipsize(&f.name, chars as usize);
                let _ = write!(
                    out,
                    r#"<text x="{:.2}" y="{:.1}">{}</text>"#,
                    x + 3.0,
                    y + ROW - 5.0,
                    escape(&label, true)
                );
            }
            out.push_str("</g>\n");
            let mut kids = f.children.clone();
            kids.sort_by(|a, b| tree.nodes[*b].bytes.cmp(&tree.nodes[*a].bytes));
            let mut cx = x;
            let mut placed = Vec::with_capacity(kids.len());
            for k in kids {
                placed.push((k, cx, level + 1));
                cx += tree.nodes[k].bytes as f64 / total as f64 * WIDTH;
            }
            stack.extend(placed.into_iter().rev());
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_stable() {
        assert_eq!(color("main"), color("main"));
    }
}
