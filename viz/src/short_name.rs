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
/// `operator<=>`, `operator->` and the like stay operators. A `<` opens a
/// list only after a name (or an operator's), so the demangler's
/// comparisons in template arguments, `(3)<(16)`, do not; a `->` in them
/// does not close one. A name whose lists do not balance that way is
/// returned as it is (its other steps still shorten it).
fn collapse_templates(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(256));
    let mut depth = 0usize;
    let mut rest = name;
    // The character before `rest`, and whether an operator's name ended
    // there (`operator< <T>`, `operator=<T>`).
    let mut prev = ' ';
    let mut after_operator = false;
    while let Some(c) = rest.chars().next() {
        if !is_word(prev) {
            if let Some(op) = operator_at(rest) {
                if depth == 0 {
                    out.push_str(op);
                }
                rest = &rest[op.len()..];
                prev = op.chars().last().unwrap_or(' ');
                after_operator = true;
                continue;
            }
        }
        match c {
            '<' if is_word(prev) || after_operator => {
                if depth == 0 {
                    out.push_str("<…");
                }
                depth += 1;
            }
            '>' if depth > 0 && prev != '-' => {
                depth -= 1;
                if depth == 0 {
                    out.push('>');
                }
            }
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        after_operator = after_operator && c == ' ';
        prev = c;
        rest = &rest[c.len_utf8()..];
    }
    if depth == 0 {
        out
    } else {
        name.to_string()
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The operator whose name starts `s` (`operator<<=`): the word `operator`
/// and one of the operators spelt with `<`, `>`, `=` or `-`.
fn operator_at(s: &str) -> Option<&str> {
    const OPS: [&str; 16] = [
        "<=>", "<<=", ">>=", "->*", "<<", ">>", "<=", ">=", "==", "->", "--", "-=", "<", ">", "=",
        "-",
    ];
    let after = s.strip_prefix("operator")?;
    let op = OPS.iter().find(|op| after.starts_with(*op))?;
    Some(&s[.."operator".len() + op.len()])
}

/// The final parameter list, `f(int, char const*) const`, emptied to
/// `f(…) const`.
fn collapse_params(name: &str) -> String {
    // GCC's clones (` [clone .cold]`, ` [clone .constprop.0]`) and `const`
    // follow the list.
    let mut trimmed = name;
    while let Some(at) = trimmed
        .strip_suffix(']')
        .and_then(|t| t.rfind(" [clone "))
        .or_else(|| trimmed.strip_suffix(" const").map(str::len))
    {
        trimmed = &trimmed[..at];
    }
    let Some(close) = trimmed.strip_suffix(')').map(str::len) else {
        return name.to_string();
    };
    match open_paren(trimmed, close) {
        Some(i) if i > 0 && i + 1 < close => format!("{}(…){}", &name[..i], &name[close + 1..]),
        _ => name.to_string(),
    }
}

/// Byte offset of the `(` that the `)` at byte `close` of `s` closes.
pub fn open_paren(s: &str, close: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, &b) in s.as_bytes()[..=close].iter().enumerate().rev() {
        match b {
            b')' => depth += 1,
            b'(' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
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

    /// The demangler's comparisons in template arguments, `->` in a
    /// `decltype`, and operators followed by their own template lists
    /// (cases a reviewing helper found: the first dropped the function's
    /// name, `std::enable_if<…`).
    #[test]
    fn comparisons_and_arrows_in_template_arguments() {
        assert_eq!(
            collapse_templates("ns::enable<(3)<(4), int>::bar(int, char)"),
            "ns::enable<…>::bar(int, char)"
        );
        assert_eq!(
            collapse_templates(
                "std::integral_constant<bool, (sizeof (T))<(16)>::value_type ns::f<int>(int)"
            ),
            "std::integral_constant<…>::value_type ns::f<…>(int)"
        );
        assert_eq!(
            collapse_templates(
                "ns::h<decltype((declval<T>)()->size()), std::vector<int> >::run(int)"
            ),
            "ns::h<…>::run(int)"
        );
        assert_eq!(
            collapse_templates("a::operator=<int>(int)"),
            "a::operator=<…>(int)"
        );
        assert_eq!(
            collapse_templates("a::operator><int>(int)"),
            "a::operator><…>(int)"
        );
        // Unbalanced however read: left whole for the later steps.
        assert_eq!(collapse_templates("f<a<b>::g(int)"), "f<a<b>::g(int)");
        let enable_if = format!(
            "std::enable_if<(sizeof (std::vector<int, std::allocator<int> >))<(64), {}>::type make_small<std::vector<int, std::allocator<int> > >(int)",
            "void".repeat(30)
        );
        assert_eq!(
            shortened(&enable_if, TEXT_NAME_MAX),
            "std::enable_if<…>::type make_small<…>(int)"
        );
    }

    #[test]
    fn clones_keep_their_suffix_after_the_parameters() {
        assert_eq!(
            collapse_params("solve(int, double) [clone .cold]"),
            "solve(…) [clone .cold]"
        );
        assert_eq!(
            collapse_params("a::b(int) const [clone .constprop.0] [clone .isra.0]"),
            "a::b(…) const [clone .constprop.0] [clone .isra.0]"
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
