//! A function's name made short enough for a line of the text report.
//!
//! C++ names spelt out by the demangler run to thousands of characters
//! (`std::_Rb_tree<std::__cxx11::basic_string<char, …>, …>::_M_insert_…`):
//! one frame was a screen. A name longer than the limit loses, in turn,
//! the contents of its template argument lists (`std::map<…>::find`), then
//! its parameter list (`f(…)`), then its middle. The JSON and the exports
//! keep every name whole.

use std::borrow::Cow;

/// Longest function name the text report prints whole, in characters.
pub const TEXT_NAME_MAX: usize = 120;

/// `name`, or a form of it of at most `max` characters.
pub fn shortened(name: &str, max: usize) -> Cow<'_, str> {
    if fits(name, max) {
        return Cow::Borrowed(name);
    }
    let collapsed = collapse_templates(name);
    if fits(&collapsed, max) {
        return Cow::Owned(collapsed);
    }
    let no_params = collapse_params(&collapsed);
    if fits(&no_params, max) {
        return Cow::Owned(no_params);
    }
    Cow::Owned(middle_out(&no_params, max))
}

fn fits(s: &str, max: usize) -> bool {
    s.chars().count() <= max
}

/// Every outermost `<…>` emptied to `<…>`; `operator<`, `operator<<`,
/// `operator<=>`, `operator->` and the like stay operators.
fn collapse_templates(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(256));
    let mut depth = 0usize;
    let mut rest = name;
    // Whether the character before `rest` belongs to an identifier.
    let mut in_word = false;
    while let Some(c) = rest.chars().next() {
        if let Some(op) = operator_at(rest).filter(|_| !in_word) {
            if depth == 0 {
                out.push_str(op);
            }
            rest = &rest[op.len()..];
            in_word = false;
            continue;
        }
        in_word = c.is_alphanumeric() || c == '_';
        match c {
            '<' => {
                if depth == 0 {
                    out.push_str("<…");
                }
                depth += 1;
            }
            '>' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    out.push('>');
                }
            }
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The operator whose name starts `s` (`operator<<=`), if `s` starts with
/// the word `operator` followed by one made of `<`, `>`, `=` or `-`.
fn operator_at(s: &str) -> Option<&str> {
    let after = s.strip_prefix("operator")?;
    let n = after
        .bytes()
        .take_while(|b| matches!(b, b'<' | b'>' | b'=' | b'-'))
        .count()
        .min(3);
    (n > 0).then(|| &s[.."operator".len() + n])
}

/// The final parameter list, `f(int, char const*) const`, emptied to
/// `f(…) const`.
fn collapse_params(name: &str) -> String {
    let trimmed = name.trim_end_matches(" const");
    let Some(close) = trimmed.strip_suffix(')').map(str::len) else {
        return name.to_string();
    };
    let bytes = trimmed.as_bytes();
    let mut depth = 0i32;
    for i in (0..=close).rev() {
        match bytes[i] {
            b')' => depth += 1,
            b'(' => {
                depth -= 1;
                if depth == 0 {
                    if i == 0 || i + 1 == close {
                        return name.to_string();
                    }
                    return format!("{}(…){}", &name[..i], &name[close + 1..]);
                }
            }
            _ => {}
        }
    }
    name.to_string()
}

/// `max` characters of `s`: its start and its end around `…`.
fn middle_out(s: &str, max: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    let keep = max.saturating_sub(1);
    let head = keep - keep / 2;
    let tail = keep / 2;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP_INSERT: &str = "std::_Rb_tree<std::__cxx11::basic_string<char, std::char_traits<char>, \
         std::allocator<char> >, std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, \
         std::allocator<char> > const, int>, std::_Select1st<std::pair<std::__cxx11::basic_string<char, \
         std::char_traits<char>, std::allocator<char> > const, int> > >::_M_insert_unique<std::pair<int, \
         int> >(std::pair<int, int>&&)";

    #[test]
    fn short_names_stay_whole() {
        for n in [
            "main",
            "std::vector<int>::push_back(int const&)",
            "operator new(unsigned long)",
        ] {
            assert!(matches!(shortened(n, TEXT_NAME_MAX), Cow::Borrowed(s) if s == n));
        }
    }

    #[test]
    fn templates_collapse_first() {
        assert_eq!(
            shortened(MAP_INSERT, 80),
            "std::_Rb_tree<…>::_M_insert_unique<…>(std::pair<…>&&)"
        );
    }

    #[test]
    fn then_the_parameters_then_the_middle() {
        let params = format!("ns::solve<…>({})", ["double*"; 20].join(", "));
        let name = format!(
            "ns::solve<{}>({})",
            "int, ".repeat(40),
            ["double*"; 20].join(", ")
        );
        assert!(params.chars().count() > 60);
        assert_eq!(shortened(&name, 60), "ns::solve<…>(…)");
        assert_eq!(
            shortened(&format!("{name} const"), 60),
            "ns::solve<…>(…) const"
        );
        let long = format!("ns::{}::f", "x".repeat(200));
        let s = shortened(&long, 40);
        assert_eq!(s.chars().count(), 40);
        assert!(
            s.starts_with("ns::xxx") && s.ends_with("xx::f") && s.contains('…'),
            "{s}"
        );
    }

    #[test]
    fn operators_are_not_templates() {
        let shift = format!(
            "std::basic_ostream<char, std::char_traits<char> >& std::operator<< <std::char_traits<char> >({})",
            "std::basic_ostream<char, std::char_traits<char> >&, char const*".repeat(3)
        );
        assert_eq!(
            collapse_templates(&shift),
            format!(
                "std::basic_ostream<…>& std::operator<< <…>({})",
                "std::basic_ostream<…>&, char const*".repeat(3)
            )
        );
        assert_eq!(
            collapse_templates("a::operator<(a const&)"),
            "a::operator<(a const&)"
        );
        assert_eq!(
            collapse_templates("a::operator<=>(a const&)"),
            "a::operator<=>(a const&)"
        );
        assert_eq!(
            collapse_templates("it<int>::operator->()"),
            "it<…>::operator->()"
        );
        assert_eq!(
            collapse_templates("f<int>::operator>>=(int)"),
            "f<…>::operator>>=(int)"
        );
        assert_eq!(
            collapse_templates("my_operator<int>::f()"),
            "my_operator<…>::f()"
        );
    }

    #[test]
    fn anonymous_namespaces_and_lambdas_keep_their_parentheses() {
        assert_eq!(
            collapse_params("(anonymous namespace)::run()"),
            "(anonymous namespace)::run()"
        );
        assert_eq!(
            collapse_params("(anonymous namespace)::run(int, int)"),
            "(anonymous namespace)::run(…)"
        );
        assert_eq!(
            collapse_params("f(int)::{lambda(int)#1}::operator()(int) const"),
            "f(int)::{lambda(int)#1}::operator()(…) const"
        );
        assert_eq!(collapse_params("no_params"), "no_params");
    }
}
