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
        if let Ok(sym) = Symbol::new(name) {
            if let Ok(s) = sym.demangle(&DemangleOptions::default()) {
                return s;
            }
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
