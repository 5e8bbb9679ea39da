//! A short name for a context: its innermost *meaningful* function (not an
//! allocator wrapper, C++ allocator internals or the C library) and module.

use std::collections::HashMap;

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
/// loader, else the innermost outside the system's libraries (a stripped
/// program's own code, unnamed), else the innermost; of the frames up to
/// `main`, never the C library's start-up below it, which calls `main` and
/// allocates nothing of its own. (Until 2026-11-27 every context of a
/// stripped program, whose frames have no names, was named by the C
/// library's `__libc_start_call_main`, and `--group function` summed them
/// all under it.)
pub fn labelled_frame(innermost_first: &[StackFrame]) -> Option<usize> {
    let innermost_first = crate::report_text::up_to_main(innermost_first, |f| &f.function);
    innermost_first
        .iter()
        .position(|f| !is_wrapper(f))
        .or_else(|| {
            innermost_first
                .iter()
                .position(|f| f.function != "??" && !base(&f.module).starts_with(LOADER))
        })
        .or_else(|| {
            innermost_first.iter().position(|f| {
                let module = base(&f.module);
                !module.is_empty() && !SYSTEM_MODULES.iter().any(|m| module.starts_with(m))
            })
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

/// A frame's call site: `:88`, or `@0x1a2b` without line information.
fn site(fr: &StackFrame) -> String {
    match fr.line {
        0 => format!("@{:#x}", fr.address),
        l => format!(":{l}"),
    }
}

/// What can tell one context's label from another's, most telling last.
struct Parts {
    /// The labelled frame's function (arguments stripped) and module.
    function: String,
    module: String,
    /// Its call site: `:88`, or `@0x1a2b` without line information.
    line: Option<String>,
    /// Frames of the same function in a row from it (a recursion's depth).
    run: usize,
    /// The next meaningful caller outside that run, and its call site
    /// (`:12`, or `@0x1a2b` without line information).
    caller: Option<(String, String)>,
    /// The labelled frame's return address.
    address: Option<u64>,
    /// The innermost frames where the stack differs from other contexts'
    /// whose labels are alike at every other level (`??@0xcd3d3`).
    differs: Vec<String>,
    /// The level of the details its label has.
    shown: usize,
}

impl Parts {
    fn of(st: &[StackFrame], kind: &str) -> Parts {
        let (f, m) = label(st, kind);
        let pick = labelled_frame(st);
        let line = pick.map(|k| site(&st[k]));
        let run = pick.map_or(1, |k| {
            st[k..]
                .iter()
                .take_while(|fr| fr.function == st[k].function)
                .count()
        });
        let caller = pick
            .and_then(|k| st[k + run..].iter().find(|fr| !is_wrapper(fr)))
            .map(|fr| (strip_args(&crate::stacks::frame_name(fr)), site(fr)));
        Parts {
            function: strip_args(&f),
            module: m,
            line,
            run,
            caller,
            address: pick.map(|k| st[k].address),
            differs: Vec::new(),
            shown: 0,
        }
    }

    /// The label with the details of `level` (0: `f (module)`; 1: and the
    /// call site; 2: and a recursion's depth and the caller; 3: and the
    /// caller's line; 4: instead of that, the return address; 5: and the
    /// frame where the stacks differ).
    fn render(&self, level: usize) -> String {
        // The frames where stacks differ come on top of the details the
        // label had (a caller's line that told it from others stays).
        let (level, differs) = match level {
            LEVELS.. => (self.shown, true),
            l => (l, false),
        };
        let mut f = self.function.clone();
        if level >= 1 {
            if let Some(l) = &self.line {
                f += l;
                if level >= 4 && l.starts_with(':') {
                    if let Some(a) = self.address {
                        f += &format!("@{a:#x}");
                    }
                }
            }
        }
        if level >= 2 {
            if self.run > 1 {
                f += &format!(" ×{}", self.run);
            }
            if let Some((c, at)) = &self.caller {
                f += &format!(" ← {c}");
                // At level 4 the callers' lines did not tell them apart.
                if level == 3 {
                    f += at;
                }
            }
        }
        if differs && !self.differs.is_empty() {
            f += &format!(" [{}]", self.differs.join(" … "));
        }
        join(&f, &self.module)
    }
}

/// Frames at most that a label names where its stack differs.
const MAX_DIFFERING_FRAMES: usize = 3;

/// Levels of [`Parts::render`] chosen by what differs in [`Parts`]; the
/// last, the differing frames, are found between the stacks alike.
const LEVELS: usize = 5;

/// [`short_label`] for each of several contexts, made distinct where they
/// would read the same: colliding labels get the call site in the labelled
/// frame (`f:88 (module)`, or `f@0x1a2b` without line information), then a
/// recursion's depth and the next meaningful caller (`f:88 ×3 ← g
/// (module)`), then the caller's line, then the return address (calls on
/// one source line), then up to [`MAX_DIFFERING_FRAMES`] frames where the
/// stacks differ (`[??@0xcd3d3]`), so that a plot does not show two bars
/// under one name. Shortened to `max` characters keeping the parts that
/// tell them apart. Each step works on the groups of labels alike, so a
/// label costs the size of its group, not of the list.
pub fn distinct_labels(contexts: &[(&[StackFrame], &str)], max: usize) -> Vec<String> {
    let mut parts: Vec<Parts> = contexts.iter().map(|(st, k)| Parts::of(st, k)).collect();
    // Each context's label gets the next level's details while it collides
    // with another's; the caller's line and the address only where they
    // differ within the labels alike. Each label is rendered once per level.
    let mut labels: Vec<String> = parts.iter().map(|p| p.render(0)).collect();
    for next in 1..LEVELS {
        for group in alike(&labels) {
            let raised: Vec<String> = group.iter().map(|&i| parts[i].render(next)).collect();
            if next < 3 || raised.iter().any(|r| *r != raised[0]) {
                for (&i, r) in group.iter().zip(raised) {
                    labels[i] = r;
                    parts[i].shown = next;
                }
            }
        }
    }
    // Still alike: stacks that differ only in frames no level shows (a
    // static function without a symbol under the labelled one), or further
    // out. Each round adds the frame where a label's stack first differs
    // from those of the labels still alike; stacks alike up to a frame
    // differ deeper in the next round.
    for _ in 0..MAX_DIFFERING_FRAMES {
        let groups = alike(&labels);
        if groups.is_empty() {
            break;
        }
        for group in groups {
            let mut told = Vec::new();
            for &i in &group {
                let st = contexts[i].0;
                let k = group
                    .iter()
                    .filter(|&&j| j != i)
                    .map(|&j| same_frames(st, contexts[j].0))
                    .filter(|&k| k < st.len())
                    .max();
                if let Some(k) = k {
                    let fr = &st[k];
                    let name = match fr.function.as_str() {
                        "" | "??" => "??".to_string(),
                        f => strip_args(f),
                    };
                    parts[i].differs.push(name + &site(fr));
                    told.push(i);
                }
            }
            for i in told {
                labels[i] = parts[i].render(LEVELS);
            }
        }
    }
    shorten_apart(&labels, max)
}

/// Each label shortened to `max` characters; where two different labels
/// would shorten alike, the part around their first difference is kept
/// (`very_long_name…<float>::solve (app)`).
fn shorten_apart(full: &[String], max: usize) -> Vec<String> {
    let mut out: Vec<String> = full.iter().map(|s| ellipsize(s, max)).collect();
    // Per label, the labels it must read apart from: those it shortened
    // alike with, then those its window made it read alike with.
    let mut rivals: Vec<Vec<usize>> = vec![Vec::new(); full.len()];
    for _ in 0..3 {
        let groups = alike(&out);
        if groups.is_empty() {
            break;
        }
        for group in &groups {
            for &i in group {
                rivals[i].extend(group.iter().filter(|&&j| full[j] != full[i]));
            }
        }
        for group in groups {
            for i in group {
                let differences: Vec<usize> = rivals[i]
                    .iter()
                    .map(|&j| common_prefix(&full[i], &full[j]))
                    .collect();
                if let (Some(&lo), Some(&hi)) = (differences.iter().min(), differences.iter().max())
                {
                    out[i] = around(&full[i], lo, hi, max);
                }
            }
        }
    }
    out
}

/// The indices of the labels that read alike, in groups of two or more.
fn alike(labels: &[String]) -> Vec<Vec<usize>> {
    let mut by_label: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, l) in labels.iter().enumerate() {
        by_label.entry(l.as_str()).or_default().push(i);
    }
    let mut groups: Vec<Vec<usize>> = by_label.into_values().filter(|g| g.len() > 1).collect();
    groups.sort_unstable();
    groups
}

/// Frames two stacks (innermost first) start with alike.
fn same_frames(a: &[StackFrame], b: &[StackFrame]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Characters two strings start with alike.
fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// `s` in `max` characters: its start, `…`, and a window from a little
/// before character `lo` through character `hi` (the first and the last of
/// the places where it differs from labels that shorten alike); where both
/// do not fit in one, a window at each (`physics::so…scheme<double>::…_stage<1>
/// (app)`); to its end, if that fits.
fn around(s: &str, lo: usize, hi: usize, max: usize) -> String {
    let c: Vec<char> = s.chars().collect();
    if c.len() <= max || max < 8 {
        return ellipsize(s, max);
    }
    let head = max / 3;
    // What follows the head and its `…`: a window to the end, or one cut
    // with a `…` of its own.
    let budget = max - head - 1;
    let mut out: String = c[..head].iter().collect();
    out.push('…');
    // From `start`, `room` characters (the last a `…` unless they reach the
    // end, then the last `room` from `floor` on).
    let window = |out: &mut String, start: usize, room: usize, floor: usize| {
        if start + room >= c.len() {
            out.extend(&c[c.len().saturating_sub(room).max(floor)..]);
        } else {
            out.extend(&c[start..start + room - 1]);
            out.push('…');
        }
    };
    let span = hi.saturating_sub(lo);
    if span + 2 <= budget {
        let start = lo
            .saturating_sub((budget / 4).min(budget - 2 - span))
            .max(head);
        window(&mut out, start, budget, head);
    } else {
        // Two windows: the first place's, cut with a `…`, then the last's.
        let first = (budget - 2) / 2;
        let start = lo.saturating_sub(3).max(head);
        let end = (start + first).min(c.len());
        out.extend(&c[start..end]);
        out.push('…');
        let room = budget - (end - start) - 1;
        window(&mut out, hi.saturating_sub(3).max(end), room, end);
    }
    out
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
            match crate::short_name::open_paren(f, end) {
                Some(i) if i > 0 && !f[..i].ends_with("operator") => f[..i].to_string(),
                _ => f.to_string(),
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
    fn a_stripped_programs_context_is_its_own_not_the_c_librarys_start_up() {
        // pw.x, stripped: the program's frames have no names.
        let stack = [
            f("??", "/usr/bin/pw.x"),
            f("??", "/usr/bin/pw.x"),
            f("__libc_start_call_main", "/lib/x86_64-linux-gnu/libc.so.6"),
            f("__libc_start_main_impl", "/lib/x86_64-linux-gnu/libc.so.6"),
            f("??", "/usr/bin/pw.x"),
        ];
        assert_eq!(labelled_frame(&stack), Some(0));
        assert_eq!(label(&stack, "malloc").1, "pw.x");
        // A named library function above the unnamed main still names it.
        let fftw = [
            f("fftw_malloc_plain", "/lib/x86_64-linux-gnu/libfftw3.so.3"),
            f("??", "/usr/bin/pw.x"),
            f("__libc_start_call_main", "/lib/x86_64-linux-gnu/libc.so.6"),
        ];
        assert_eq!(label(&fftw, "malloc").0, "fftw_malloc_plain");
        // Unnamed code of libgfortran above it: the program's frame.
        let gfortran = [
            f("??", "/lib/x86_64-linux-gnu/libgfortran.so.5"),
            f("??", "/usr/bin/pw.x"),
            f("__libc_start_call_main", "/lib/x86_64-linux-gnu/libc.so.6"),
        ];
        assert_eq!(labelled_frame(&gfortran), Some(1));
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
    fn callers_lines_recursion_and_long_names_tell_labels_apart() {
        let at = |function: &str, line: u32| StackFrame {
            line,
            ..f(function, "/app")
        };
        // One wrapper called from two lines of main.
        let a = [at("siteC", 9), at("main", 19)];
        let b = [at("siteC", 9), at("main", 20)];
        assert_eq!(
            distinct_labels(&[(&a, "realloc"), (&b, "realloc")], 80),
            ["siteC:9 ← main:19 (app)", "siteC:9 ← main:20 (app)"]
        );
        // A recursion at two depths: the depth, and the caller outside it.
        let deep = |n: usize| {
            let mut v = vec![at("rec", 2); n];
            v.push(at("main", 7));
            v
        };
        let (r2, r3) = (deep(2), deep(3));
        assert_eq!(
            distinct_labels(&[(&r2, "malloc"), (&r3, "malloc")], 80),
            ["rec:2 ×2 ← main (app)", "rec:2 ×3 ← main (app)"]
        );
        // Long names differing past the shortened length keep the part
        // that differs.
        let long = |t: &str| {
            [StackFrame {
                line: 5,
                ..f(
                    &format!("very_long_namespace_name_for_physics_solvers_of_all_kinds::solver<{t}>::assemble"),
                    "/app",
                )
            }]
        };
        let (d, s) = (long("double"), long("float"));
        let got = distinct_labels(&[(&d, "malloc"), (&s, "malloc")], 48);
        assert_ne!(got[0], got[1], "{got:?}");
        assert!(got.iter().all(|l| l.chars().count() <= 48), "{got:?}");
        assert!(
            got[0].contains("double") && got[1].contains("float"),
            "{got:?}"
        );
        // Callers that differ only at the end of a long label.
        let lib = |caller: &str| {
            [
                StackFrame {
                    address: 0xcea88,
                    ..f("pmix_register_client_attrs", "/lib/libpmix.so.2")
                },
                f(caller, "/lib/libpmix.so.2"),
            ]
        };
        let (p, q) = (
            lib("PMIx_Init_with_a_long_suffix_one"),
            lib("PMIx_Init_with_a_long_suffix_two"),
        );
        let got = distinct_labels(&[(&p, "malloc"), (&q, "malloc")], 48);
        assert_ne!(got[0], got[1], "{got:?}");
        assert!(got.iter().all(|l| l.chars().count() <= 48), "{got:?}");
    }

    #[test]
    fn stacks_alike_but_for_an_unnamed_callee_show_where_they_differ() {
        let lib = |a: u64| {
            [
                StackFrame {
                    address: a,
                    ..f("??", "/lib/libpmix.so.2")
                },
                StackFrame {
                    address: 0xcea88,
                    ..f("pmix_register_client_attrs", "/lib/libpmix.so.2")
                },
                f("PMIx_Init", "/lib/libpmix.so.2"),
            ]
        };
        let (a, b) = (lib(0xcd3d3), lib(0xcd4b8));
        assert_eq!(
            distinct_labels(&[(&a, "malloc"), (&b, "malloc")], 80),
            [
                "pmix_register_client_attrs@0xcea88 ← PMIx_Init [??@0xcd3d3] (libpmix.so.2)",
                "pmix_register_client_attrs@0xcea88 ← PMIx_Init [??@0xcd4b8] (libpmix.so.2)"
            ]
        );
        // At plot width the difference stays in view.
        let got = distinct_labels(&[(&a, "malloc"), (&b, "malloc")], 48);
        assert!(
            got[0].contains("cd3d3") && got[1].contains("cd4b8"),
            "{got:?}"
        );
    }

    #[test]
    fn a_callers_line_that_told_labels_apart_stays_with_the_differing_frames() {
        let at = |function: &str, line: u32| StackFrame {
            line,
            ..f(function, "/app")
        };
        let unnamed = |a: u64| StackFrame {
            address: a,
            ..f("??", "/app")
        };
        // Two calls from main:19 that differ only in an unnamed frame under
        // the wrapper, and one from main:20.
        let a = [unnamed(0x10), at("site", 9), at("main", 19)];
        let b = [unnamed(0x20), at("site", 9), at("main", 19)];
        let c = [unnamed(0x10), at("site", 9), at("main", 20)];
        assert_eq!(
            distinct_labels(&[(&a, "malloc"), (&b, "malloc"), (&c, "malloc")], 80),
            [
                "site:9 ← main:19 [??@0x10] (app)",
                "site:9 ← main:19 [??@0x20] (app)",
                "site:9 ← main:20 (app)"
            ]
        );
    }

    #[test]
    fn labels_differing_in_two_far_places_keep_both() {
        let mk = |t: &str, n: &str| {
            [StackFrame {
                line: 5,
                ..f(
                    &format!(
                        "physics::solvers::implicit_scheme<{t}>::assemble_block_matrix_for_stage<{n}>"
                    ),
                    "/app",
                )
            }]
        };
        let v = [
            mk("double", "1"),
            mk("float", "1"),
            mk("double", "2"),
            mk("float", "2"),
        ];
        let got = distinct_labels(
            &v.iter().map(|s| (&s[..], "malloc")).collect::<Vec<_>>(),
            48,
        );
        let mut unique = got.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 4, "{got:#?}");
        assert!(got.iter().all(|l| l.chars().count() <= 48), "{got:#?}");
    }

    #[test]
    fn around_keeps_the_difference() {
        let s = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        // A difference near the end: the end is kept.
        let t = around(s, 60, 60, 30);
        assert_eq!(t.chars().count(), 30);
        assert!(t.ends_with("XYZ") && t.starts_with("abcdefghij…"), "{t}");
        // In the middle: the part from a little before it.
        let t = around(s, 35, 35, 30);
        assert_eq!(t.chars().count(), 30);
        assert!(t.contains('9') && t.ends_with('…'), "{t}");
        // Two places that fit in one window: both kept.
        let t = around(s, 30, 45, 30);
        assert!(t.contains('4') && t.contains('J'), "{t}");
        // Too far apart: a window at each.
        let t = around(s, 12, 50, 30);
        assert_eq!(t.chars().count(), 30, "{t}");
        assert!(t.contains('m') && t.contains('O'), "{t}");
        // Any places, any lengths: never longer than asked.
        let alpha: Vec<char> = "ab×←…éz".chars().collect();
        let mut x: u64 = 12345;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20000 {
            let len = (rnd() % 90) as usize;
            let s: String = (0..len)
                .map(|_| alpha[(rnd() % alpha.len() as u64) as usize])
                .collect();
            let max = (rnd() % 70) as usize;
            let lo = (rnd() % (len as u64 + 1)) as usize;
            let hi = lo + (rnd() % ((len - lo) as u64 + 1)) as usize;
            let t = around(&s, lo, hi, max);
            assert!(
                t.chars().count() <= max.max(1),
                "{s:?} {lo} {hi} {max} -> {t:?}"
            );
        }
    }

    #[test]
    fn shortening() {
        assert_eq!(strip_args("a::b<int>(x, (y))"), "a::b<int>");
        assert_eq!(strip_args("plain"), "plain");
        assert_eq!(strip_args("S::operator()(int)"), "S::operator()");
        assert_eq!(ellipsize("abcdef", 4), "abc…");
    }
}
