//! `index.html` beside the plots: the text report and every picture on one
//! page. The plots directory is what a job leaves to copy back from a
//! cluster; the page opens in any browser, with nothing to fetch.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::markup::escape;

/// The file name.
pub const NAME: &str = "index.html";

/// Each picture's heading, by file stem, in page order.
const PICTURES: [(&str, &str); 6] = [
    ("memory", "Live heap over time"),
    ("events", "Allocation and MPI call rates"),
    ("contexts", "Hottest contexts"),
    ("ranks", "Peak heap per rank"),
    ("sizes", "Allocations by size"),
    ("flame", "Flame graph of the allocation tree, by bytes"),
];

/// The page: `title`, the report `text`, then each picture of `written`
/// (SVG where both formats were written; the flame graph as an object, so
/// its tooltips work).
pub fn html(title: &str, text: &str, written: &[PathBuf]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{t}</title>\n<style>\n\
         body {{ font-family: sans-serif; margin: 1.5em; }}\n\
         pre {{ font-size: 13px; background: #f6f6f6; padding: 1em; overflow-x: auto; }}\n\
         img, object {{ max-width: 100%; border: 1px solid #ddd; }}\n\
         </style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = escape(title, true)
    );
    let name_of = |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let files: Vec<String> = written.iter().filter_map(name_of).collect();
    let mut contents = Vec::new();
    for (stem, heading) in PICTURES {
        let svg = format!("{stem}.svg");
        let png = format!("{stem}.png");
        let file = if files.contains(&svg) {
            svg
        } else if files.contains(&png) {
            png
        } else {
            continue;
        };
        contents.push((stem, heading, file));
    }
    let _ = writeln!(s, "<p>");
    for (stem, heading, _) in &contents {
        let _ = writeln!(s, "<a href=\"#{stem}\">{}</a> ·", escape(heading, true));
    }
    let _ = writeln!(s, "<a href=\"#report\">Report</a>\n</p>");
    for (stem, heading, file) in &contents {
        let f = escape(file, true);
        let _ = writeln!(s, "<h2 id=\"{stem}\">{}</h2>", escape(heading, true));
        if *stem == "flame" {
            let _ = writeln!(
                s,
                "<p><object data=\"{f}\" type=\"image/svg+xml\">\
                 <a href=\"{f}\">{f}</a></object></p>"
            );
        } else {
            let _ = writeln!(
                s,
                "<p><a href=\"{f}\"><img src=\"{f}\" alt=\"{}\"></a></p>",
                escape(heading, true)
            );
        }
    }
    let _ = writeln!(
        s,
        "<h2 id=\"report\">Report</h2>\n<pre>{}</pre>\n</body>\n</html>",
        escape(text, false)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_each_picture_once_and_the_report() {
        let written: Vec<PathBuf> = [
            "d/memory.png",
            "d/memory.svg",
            "d/contexts.png",
            "d/ranks.svg",
            "d/flame.svg",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let page = html(
            "Heap — a<b>, 1 rank",
            "#1 std::vector<int> & co\n",
            &written,
        );
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(
            page.contains("<title>Heap — a&lt;b&gt;, 1 rank</title>"),
            "{page}"
        );
        // SVG where there is one, PNG otherwise, nothing for a missing plot.
        assert!(page.contains("<img src=\"memory.svg\""), "{page}");
        assert!(!page.contains("memory.png"), "{page}");
        assert!(page.contains("<img src=\"contexts.png\""), "{page}");
        assert!(page.contains("<img src=\"ranks.svg\""), "{page}");
        assert!(
            !page.contains("events") && !page.contains("sizes"),
            "{page}"
        );
        assert!(page.contains("<object data=\"flame.svg\""), "{page}");
        // In page order, each with its anchor.
        let at = |s: &str| page.find(s).unwrap();
        assert!(at("id=\"memory\"") < at("id=\"contexts\""));
        assert!(at("id=\"ranks\"") < at("id=\"flame\""));
        assert!(at("id=\"flame\"") < at("id=\"report\""));
        assert!(
            page.contains("<pre>#1 std::vector&lt;int&gt; &amp; co\n</pre>"),
            "{page}"
        );
        assert!(page.trim_end().ends_with("</html>"));
    }
}
