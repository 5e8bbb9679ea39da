//! A short name for a context: its innermost *meaningful* function (not an
//! allocator wrapper, C++ allocator internals or the C library) and module.

use crate::contexts::StackFrame;

/// Function names (before any argument list) that only pass an allocation on.
const WRAPPERS: [&str; 24] = [
    "malloc",
    "calloc",
    "realloc",
    "free",
    "reallocarray",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "xmalloc",
    "xcalloc",
    "xrealloc",
    "g_malloc",
    "g_malloc0",
    "g_realloc",
    "g_try_malloc",
    "_mm_malloc",
    "strdup",
    "strndup",
    "__strdup",
    "PyMem_Malloc",
    "PyObject_Malloc",
    "operator new",
];

/// Module file names of libraries whose frames are never the answer.
const SYSTEM_MODULES: [&str; 5] = ["libc.so", "libc-", "libstdc++", "libgfortran", LOADER];

/// The dynamic loader's file name: its frames (`call_init`, `_dl_init`)
/// are under every allocation a library's constructor makes, and name
/// none of them.
const LOADER: &str = "ld-linux";

pub fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Is this frame an allocator wrapper or library internals?
pub fn is_wrapper(f: &StackFrame) -> bool {
    let name = qualified_name(f.function.split('(').next().unwrap_or("").trim());
    let module = base(&f.module);
    name.is_empty()
        || name == "??"
        || WRAPPERS.contains(&name)
        || name.starts_with("operator new")
        || name.starts_with("operator delete")
        || name.starts_with("std::")
        || name.starts_with("__gnu_cxx::")
        || name.starts_with("__libc_")
        || name.starts_with("_gfortran")
        || SYSTEM_MODULES.iter().any(|m| module.starts_with(m))
}

/// A demangled name without the return type a function template's name
/// starts with (`void std::vector<long>::_M_realloc_insert<long>` is
/// `std::vector<long>::_M_realloc_insert<long>`): what follows the last
/// space outside `<…>`, unless that space is an operator's (`operator
/// new`).
fn qualified_name(name: &str) -> &str {
    let mut depth = 0i32;
    let mut start = 0;
    for (i, ch) in name.char_indices() {
        match ch {
            '<' => depth += 1,
            '>' => depth -= 1,
            ' ' if depth == 0 && !name[start..i].ends_with("operator") => start = i + 1,
            _ => {}
        }
    }
    &name[start..]
}

/// Index of the frame that names a context: the innermost that is not an
/// allocator wrapper, else the innermost with a name outside the dynamic
/// loader, else the innermost.
pub fn labelled_frame(innermost_first: &[StackFrame]) -> Option<usize> {
    innermost_first
        .iter()
        .position(|f| !is_wrapper(f))
        .or_else(|| {
            innermost_first
                .iter()
                .position(|f| f.function != "??" && !base(&f.module).starts_with(LOADER))
        })
        .or_else(|| (!innermost_first.is_empty()).then_some(0))
}

/// (function, module) naming a context whose stack is `innermost_first`.
pub fn label(innermost_first: &[StackFrame], kind: &str) -> (String, String) {
    match labelled_frame(innermost_first).map(|k| &innermost_first[k]) {
        Some(f) => (crate::stacks::frame_name(f), base(&f.module).to_string()),
        None => (format!("[{kind}]"), String::new()),
    }
}

/// `function (module)`, shortened to `max` characters.
pub fn short_label(innermost_first: &[StackFrame], kind: &str, max: usize) -> String {
    let (f, m) = label(innermost_first, kind);
    ellipsize(&join(&strip_args(&f), &m), max)
}

/// [`short_label`] for each of several contexts, made distinct where they
/// would read the same: colliding labels get the call site in the labelled
/// frame (`f:88 (module)`, or `f@0x1a2b` without line information), and if
/// that is not enough the next meaningful caller (`f:88 ← g (module)`), so
/// that a plot does not show two bars under one name.
pub fn distinct_labels(contexts: &[(&[StackFrame], &str)], max: usize) -> Vec<String> {
    // Per context: the labelled frame's name and module, its call site (the
    // source line, else its module-relative address) and the next
    // meaningful caller.
    let parts: Vec<(String, String, Option<String>, Option<String>)> = contexts
        .iter()
        .map(|(st, kind)| {
            let (f, m) = label(st, kind);
            let pick = labelled_frame(st);
            let line = pick.map(|k| match st[k].line {
                0 => format!("@{:#x}", st[k].address),
                l => format!(":{l}"),
            });
            let caller = pick
                .and_then(|k| st[k + 1..].iter().find(|fr| !is_wrapper(fr)))
                .map(|fr| strip_args(&crate::stacks::frame_name(fr)));
            (strip_args(&f), m, line, caller)
        })
        .collect();
    // As `short_label` without shortening.
    let plain: Vec<String> = parts.iter().map(|(f, m, _, _)| join(f, m)).collect();
    let collides = |v: &[String], i: usize| v.iter().filter(|x| **x == v[i]).count() > 1;
    let with_line: Vec<String> = (0..contexts.len())
        .map(|i| {
            let (f, m, line, _) = &parts[i];
            match line {
                Some(l) if collides(&plain, i) => join(&format!("{f}{l}"), m),
                _ => plain[i].clone(),
            }
        })
        .collect();
    let out: Vec<String> = (0..contexts.len())
        .map(|i| {
            let (f, m, line, caller) = &parts[i];
            match caller {
                Some(c) if collides(&with_line, i) => {
                    let f = line.as_ref().map_or(f.clone(), |l| format!("{f}{l}"));
                    join(&format!("{f} ← {c}"), m)
                }
                _ => with_line[i].clone(),
            }
        })
        .collect();
    // Still alike: calls on one source line (written there, or made so by
    // the compiler, one per branch): the labelled frame's return address.
    let addresses: Vec<Option<u64>> = contexts
        .iter()
        .map(|(st, _)| labelled_frame(st).map(|k| st[k].address))
        .collect();
    let out: Vec<String> = (0..contexts.len())
        .map(|i| {
            let (f, m, line, caller) = &parts[i];
            let other_site =
                (0..contexts.len()).any(|j| out[j] == out[i] && addresses[j] != addresses[i]);
            match (line, addresses[i]) {
                (Some(l), Some(a)) if other_site && l.starts_with(':') => {
                    let f = format!("{f}{l}@{a:#x}");
                    match caller {
                        Some(c) => join(&format!("{f} ← {c}"), m),
                        None => join(&f, m),
                    }
                }
                _ => out[i].clone(),
            }
        })
        .collect();
    out.iter().map(|s| ellipsize(s, max)).collect()
}

pub fn join(f: &str, m: &str) -> String {
    if m.is_empty() {
        f.to_string()
    } else {
        format!("{f} ({m})")
    }
}

/// `ns::f(int, double)` → `ns::f`; leaves `operator()` and templates alone.
pub fn strip_args(f: &str) -> String {
    match f.rfind(')') {
        Some(end) if f.ends_with(')') || f.ends_with("const") => {
            // Find the '(' matching the final ')'.
            let bytes = f.as_bytes();
            let mut depth = 0i32;
            let mut i = end;
            loop {
                match bytes[i] {
                    b')' => depth += 1,
                    b'(' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                if i == 0 {
                    return f.to_string();
                }
                i -= 1;
            }
            let head = &f[..i];
            if head.is_empty() || head.ends_with("operator") {
                f.to_string()
            } else {
                head.to_string()
            }
        }
        _ => f.to_string(),
    }
}

pub fn ellipsize(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(function: &str, module: &str) -> StackFrame {
        StackFrame::named(function, module)
    }

    #[test]
    fn skips_wrappers_and_std_internals() {
        let stack = [
            f("operator new(unsigned long)", "/usr/lib/libstdc++.so.6"),
            f(
                "std::__new_allocator<double>::allocate(unsigned long, void const*)",
                "/app",
            ),
            f("std::vector<double>::_M_realloc_insert()", "/app"),
            f(
                "void std::vector<long, std::allocator<long> >::_M_realloc_insert<long const&>(long const&)",
                "/app",
            ),
            f("xmalloc", "/app"),
            f("solver::assemble(int)", "/home/u/app"),
            f("main", "/home/u/app"),
        ];
        assert_eq!(
            label(&stack, "malloc"),
            ("solver::assemble(int)".into(), "app".into())
        );
        assert_eq!(short_label(&stack, "malloc", 60), "solver::assemble (app)");
    }

    #[test]
    fn a_return_type_is_no_part_of_the_name() {
        for (name, is) in [
            (
                "std::vector<long>::push_back",
                "std::vector<long>::push_back",
            ),
            (
                "void std::vector<long, std::allocator<long> >::_M_realloc_insert<long const&>",
                "std::vector<long, std::allocator<long> >::_M_realloc_insert<long const&>",
            ),
            ("unsigned long solver::size<int>", "solver::size<int>"),
            ("operator new", "operator new"),
            ("foo::operator delete[]", "foo::operator delete[]"),
            ("void* operator new[]", "operator new[]"),
            ("main", "main"),
        ] {
            assert_eq!(qualified_name(name), is, "{name}");
        }
    }

    #[test]
    fn a_constructor_is_named_by_its_library_not_the_loader() {
        // libstdc++'s emergency pool, allocated from its (unnamed)
        // constructor, which the dynamic loader runs.
        let stack = [
            f("??", "/lib/x86_64-linux-gnu/libstdc++.so.6"),
            f("call_init", "/lib64/ld-linux-x86-64.so.2"),
            f("_dl_init", "/lib64/ld-linux-x86-64.so.2"),
        ];
        assert_eq!(label(&stack, "malloc").1, "libstdc++.so.6");
        // A library's own constructor with a name is that name.
        let named = [
            f("mylib_init", "/opt/lib/libmy.so"),
            f("call_init", "/lib64/ld-linux-x86-64.so.2"),
        ];
        assert_eq!(
            label(&named, "malloc"),
            ("mylib_init".into(), "libmy.so".into())
        );
    }

    #[test]
    fn falls_back_to_something() {
        assert_eq!(label(&[], "malloc"), ("[malloc]".into(), String::new()));
        let only = [f("malloc", "/lib/libc.so.6")];
        assert_eq!(label(&only, "malloc").0, "malloc");
        let unknown = [f("??", "")];
        assert!(label(&unknown, "malloc").0.starts_with("??"));
    }

    #[test]
    fn colliding_labels_get_line_then_caller() {
        let at = |function: &str, line: u32| StackFrame {
            line,
            ..f(function, "/app")
        };
        let a = [
            f("malloc", "/lib/libc.so.6"),
            at("halo", 10),
            at("relax", 5),
        ];
        let b = [
            f("malloc", "/lib/libc.so.6"),
            at("halo", 20),
            at("relax", 5),
        ];
        let c = [at("halo", 10), at("main", 7)];
        let d = [at("solve", 3)];
        let e = [f("init", "/lib/libx.so"), f("rte", "/lib/libx.so")];
        let g = [
            StackFrame {
                address: 0x1a2b,
                ..f("init", "/lib/libx.so")
            },
            f("rte", "/lib/libx.so"),
        ];
        let got = distinct_labels(
            &[
                (&a, "malloc"),
                (&b, "malloc"),
                (&c, "free"),
                (&d, "malloc"),
                (&e, "malloc"),
                (&g, "malloc"),
            ],
            80,
        );
        assert_eq!(
            got,
            [
                "halo:10 ← relax (app)",
                "halo:20 (app)",
                "halo:10 ← main (app)",
                "solve (app)",
                "init@0x0 (libx.so)",
                "init@0x1a2b (libx.so)"
            ]
        );
        // One line, several call sites (the compiler's copies of a call,
        // one per branch), the same caller: told apart by address.
        let site = |a: u64| {
            [
                StackFrame {
                    address: a,
                    ..at("halo", 25)
                },
                at("main", 7),
            ]
        };
        let (h1, h2, h3) = (site(0x1790), site(0x1902), site(0x1790));
        assert_eq!(
            distinct_labels(
                &[(&h1, "MPI_Sendrecv"), (&h2, "MPI_Sendrecv"), (&c, "free")],
                80
            ),
            [
                "halo:25@0x1790 ← main (app)",
                "halo:25@0x1902 ← main (app)",
                "halo:10 (app)"
            ]
        );
        // The same call site twice (other kinds): nothing tells them apart.
        assert_eq!(
            distinct_labels(&[(&h1, "malloc"), (&h3, "calloc")], 80),
            ["halo:25 ← main (app)", "halo:25 ← main (app)"]
        );
        // Nothing to tell apart: left as is.
        assert_eq!(
            distinct_labels(&[(&a, "malloc"), (&a, "malloc")], 80)[0],
            "halo:10 ← relax (app)"
        );
    }

    #[test]
    fn shortening() {
        assert_eq!(strip_args("a::b<int>(x, (y))"), "a::b<int>");
        assert_eq!(strip_args("plain"), "plain");
        assert_eq!(strip_args("S::operator()(int)"), "S::operator()");
        assert_eq!(ellipsize("abcdef", 4), "abc…");
    }
}
