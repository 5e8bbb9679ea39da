//! Text in SVG and HTML: the characters markup gives a meaning, escaped.

/// `s` with `&`, `<`, `>` and `"` escaped. With `one_line`, as in a
/// tooltip or a label, control characters (newlines too) become spaces;
/// without, as in a `<pre>`, they stay.
pub fn escape(s: &str, one_line: bool) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c if one_line && (c as u32) < 0x20 => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup_and_keeps_lines_when_asked() {
        assert_eq!(
            escape("a<b>&\"c\"\n", true),
            "a&lt;b&gt;&amp;&quot;c&quot; "
        );
        assert_eq!(escape("a<b>\n\tc", false), "a&lt;b&gt;\n\tc");
        assert_eq!(escape("plain — text", false), "plain — text");
    }
}
