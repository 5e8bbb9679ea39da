//! Human-readable function names from linkage names: Rust (legacy and v0),
//! C++ (Itanium ABI) and gfortran module procedures.

use cpp_demangle::{DemangleOptions, Symbol};

/// Demangle one linkage name; names that are not mangled come back unchanged.
///
/// - Rust `_R…` and legacy `_ZN…17h<hash>E` names via `rustc-demangle`
///   (without the hash),
/// - other `_Z…` names via `cpp_demangle`,
/// - gfortran module procedures `__mod_MOD_fn` become `mod::fn`,
/// - Fortran externals such as `fn_` and plain C names are kept.
pub fn demangle(name: &str) -> String {
    if name.starts_with("_R") || is_legacy_rust(name) {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            return format!("{d:#}");
        }
    }
    if name.starts_with("_Z") {
        if let Some(s) = demangle_cpp(name) {
            return s;
        }
        // The demangler gives up on some template arguments (expressions
        // such as `!std::is_array<T>::value` in an enable_if): the name
        // itself, qualified, and `<…>` for its arguments, rather than the
        // mangled name (until 2026-11-27), so that `std::make_shared<…>` is
        // still known for the C++ library's.
        if let Some(s) = qualified_name(name) {
            return s;
        }
    }
    if let Some(rest) = name.strip_prefix("__") {
        if let Some((module, func)) = rest.split_once("_MOD_") {
            if !module.is_empty() && !func.is_empty() {
                return format!("{module}::{func}");
            }
        }
    }
    name.to_string()
}

/// A C++ (Itanium) name demangled in full, if the demangler can.
pub fn demangle_cpp(name: &str) -> Option<String> {
    Symbol::new(name)
        .ok()?
        .demangle(&DemangleOptions::default())
        .ok()
}

/// The function's qualified name from the start of an Itanium mangled name
/// (`_ZSt11make_sharedI…` is `std::make_shared<…>`,
/// `_ZNSt6vectorIiSaIiEE9push_backEOi` `std::vector<…>::push_back`):
/// namespaces, classes and the name, each source name read by its length,
/// template arguments shown as `<…>` (skipped to their matching `E`).
/// `None` where the start is anything else (substitutions, operators,
/// local names): the caller keeps the mangled name.
pub fn qualified_name(name: &str) -> Option<String> {
    let b = name.as_bytes();
    let mut i = 2; // past "_Z"
    let nested = b.get(i) == Some(&b'N');
    if nested {
        i += 1;
        while matches!(b.get(i), Some(b'r' | b'V' | b'K' | b'R' | b'O')) {
            i += 1;
        }
    }
    let mut parts: Vec<String> = Vec::new();
    loop {
        match b.get(i) {
            Some(b'S') if b.get(i + 1) == Some(&b't') && parts.is_empty() => {
                parts.push("std".into());
                i += 2;
                continue;
            }
            Some(c) if c.is_ascii_digit() => {
                let start = i;
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
                let len: usize = name[start..i].parse().ok()?;
                let end = i.checked_add(len)?;
                parts.push(name.get(i..end)?.to_string());
                i = end;
            }
            _ => return None,
        }
        if b.get(i) == Some(&b'I') {
            i = skip_template_args(b, i)?;
            parts.last_mut()?.push_str("<…>");
        }
        if !nested || b.get(i) == Some(&b'E') {
            break;
        }
        if matches!(b.get(i), Some(b'C' | b'D')) {
            // A constructor or destructor: named by its class.
            let class = parts.last()?.trim_end_matches("<…>").to_string();
            let tilde = if b[i] == b'D' { "~" } else { "" };
            parts.push(format!("{tilde}{class}"));
            break;
        }
    }
    (parts.len() > usize::from(parts.first().is_some_and(|p| p == "std"))).then(|| parts.join("::"))
}

/// The index past the template arguments `I…E` that start at `i`: nested
/// constructs that end with `E` counted, source names skipped by length.
fn skip_template_args(b: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    while let Some(&c) = b.get(i) {
        match c {
            b'0'..=b'9' => {
                let start = i;
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
                let len: usize = std::str::from_utf8(&b[start..i]).ok()?.parse().ok()?;
                i = i.checked_add(len)?;
                continue;
            }
            // Template arguments, nested names, expressions, packs,
            // literals, local names (`Z…E`), lambdas (`Ul…E`), decltype.
            // (`L` before a source name marks internal linkage: no `E`.)
            b'L' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {}
            b'I' | b'N' | b'X' | b'J' | b'L' | b'Z' => depth += 1,
            b'U' if b.get(i + 1) == Some(&b'l') => depth += 1,
            b'D' if matches!(b.get(i + 1), Some(b't' | b'T')) => depth += 1,
            b'E' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `_ZN…17h<16 hex digits>E`, optionally followed by a `.llvm.…` style suffix.
fn is_legacy_rust(name: &str) -> bool {
    if !name.starts_with("_ZN") {
        return false;
    }
    let core = name.split('.').next().unwrap_or(name);
    let Some(body) = core.strip_suffix('E') else {
        return false;
    };
    body.len() > 19
        && body[body.len() - 19..].starts_with("17h")
        && body[body.len() - 16..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn rust_legacy_drops_hash() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
    }

    #[test]
    fn rust_v0() {
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
    }

    #[test]
    fn cpp() {
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(
            demangle("_Z5solveRSt6vectorIdSaIdEE"),
            "solve(std::vector<double, std::allocator<double> >&)"
        );
    }

    #[test]
    fn cpp_expressions_in_template_arguments() {
        // `!std::is_array<T>::value` in an enable_if: cpp_demangle 0.4
        // gave up on it, and the report showed the mangled name (until
        // 2026-11-27).
        assert_eq!(
            demangle(
                "_ZSt11make_sharedISt6vectorIcSaIcEEJRiEESt10shared_ptrINSt9enable_ifIXntsrSt8is_arrayIT_E5valueES7_E4typeEEDpOT0_"
            ),
            "std::make_shared<…>"
        );
        // What the demangler reads is demangled in full, as before.
        assert_eq!(
            demangle("_ZNSt6vectorIiSaIiEE9push_backEOi"),
            "std::vector<int, std::allocator<int> >::push_back(int&&)"
        );
    }

    #[test]
    fn qualified_names_of_what_the_demangler_cannot_read() {
        use super::qualified_name;
        assert_eq!(
            qualified_name("_ZNSt6vectorIiSaIiEE9push_backEOi").as_deref(),
            Some("std::vector<…>::push_back")
        );
        assert_eq!(
            qualified_name("_ZN3app4Mesh6refineEv").as_deref(),
            Some("app::Mesh::refine")
        );
        assert_eq!(
            qualified_name("_ZNSt6threadC2IZ4mainEUlvE_JEvEEOT_DpOT0_").as_deref(),
            Some("std::thread::thread")
        );
        assert_eq!(qualified_name("_Z5solvev").as_deref(), Some("solve"));
        // A lambda of main's among the template arguments.
        assert_eq!(
            qualified_name(
                "_ZNSt6vectorISt6threadSaIS0_EE17_M_realloc_insertIJZ4mainEUlvE_EEEvN9__gnu_cxx17__normal_iteratorIPS0_S2_EEDpOT_"
            )
            .as_deref(),
            Some("std::vector<…>::_M_realloc_insert<…>")
        );
        // … of a static function's (`L` marks internal linkage).
        assert_eq!(
            qualified_name(
                "_ZNSt15__new_allocatorISt6threadE9constructIS0_JZL13start_workersvEUlvE_EEEvPT_DpOT0_"
            )
            .as_deref(),
            Some("std::__new_allocator<…>::construct<…>")
        );
        // Nothing readable at the start, or cut: left to the caller.
        // A length that wraps around (a crafted symbol) ends the reading,
        // where it used to loop forever.
        for bad in [
            "_ZN3fooI18446744073709551596E3barEv",
            "_Z18446744073709551615x",
            "_ZSt",
            "_ZN",
            "_Z99x",
            "_ZNS_3fooEv",
            "_ZNK3fooIiE",
            "_Zplv",
        ] {
            assert_eq!(qualified_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn fortran() {
        assert_eq!(demangle("__grid_MOD_alloc_field"), "grid::alloc_field");
        assert_eq!(demangle("compute_"), "compute_");
        assert_eq!(demangle("__MOD_x"), "__MOD_x");
    }

    #[test]
    fn plain_c_and_garbage_unchanged() {
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
        assert_eq!(demangle(""), "");
    }
}
