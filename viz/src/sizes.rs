//! The text report's table of allocation sizes: the blocks allocated per
//! power-of-two size class (`wmhcct_format::size_class`), exact.

use std::fmt::Write as _;

use wmhcct_format::{size_class_range, HeapStats};

/// Width of the longest bar.
const BAR: u64 = 30;

/// A power of two in bytes in its unit: `16 B`, `4 KiB`, `2 GiB`.
pub fn power_of_two(x: u128) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = x;
    let mut u = 0;
    while v >= 1024 && u + 1 < UNITS.len() {
        v /= 1024;
        u += 1;
    }
    format!("{v} {}", UNITS[u])
}

/// `16 B – 32 B`: the sizes of class `k`, from the first up to (not
/// including) the second.
pub fn label(k: usize) -> String {
    let (min, max) = size_class_range(k);
    if max == 0 {
        return "0 B".into();
    }
    format!(
        "{} – {}",
        power_of_two(min as u128),
        power_of_two(max as u128 + 1)
    )
}

/// The table, when the report has the size classes (reports of layout 3
/// on): one row per class that has blocks, with its share and a bar.
pub fn write_text(s: &mut String, h: &HeapStats) {
    let all: u64 = h.size_classes.iter().sum();
    if all == 0 {
        return;
    }
    let most = h.size_classes.iter().copied().max().unwrap_or(1).max(1);
    let _ = writeln!(
        s,
        "\nsizes allocated (blocks by requested size, from – up to):"
    );
    for (k, &n) in h.size_classes.iter().enumerate().filter(|(_, &n)| n > 0) {
        let bar = "#".repeat(((n * BAR).div_ceil(most)) as usize);
        let _ = writeln!(
            s,
            "  {:<18} {n:>12} {:>6.1}%  {bar}",
            label(k),
            100.0 * n as f64 / all as f64
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_labelled_by_their_bounds() {
        assert_eq!(label(0), "0 B");
        assert_eq!(label(1), "1 B – 2 B");
        assert_eq!(label(5), "16 B – 32 B");
        assert_eq!(label(11), "1 KiB – 2 KiB");
        assert_eq!(label(13), "4 KiB – 8 KiB");
        assert_eq!(label(31), "1 GiB – 2 GiB");
        assert_eq!(label(64), "8 EiB – 16 EiB");
    }

    #[test]
    fn the_table_lists_the_classes_with_blocks() {
        let h = HeapStats {
            size_classes: vec![1, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4],
            ..HeapStats::default()
        };
        let mut s = String::new();
        write_text(&mut s, &h);
        let rows: Vec<&str> = s.lines().skip(2).collect();
        assert_eq!(rows.len(), 3, "{s}");
        assert!(rows[0].starts_with("  0 B ") && rows[0].contains(" 12.5%  ####"));
        assert!(rows[1].starts_with("  16 B – 32 B ") && rows[1].contains(" 37.5%"));
        assert!(rows[2].contains("4 KiB – 8 KiB") && rows[2].ends_with(&"#".repeat(30)));

        let mut none = String::new();
        write_text(&mut none, &HeapStats::default());
        assert!(none.is_empty(), "a report without size classes: no table");
    }
}
