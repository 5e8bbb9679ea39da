//! `report --group function|line|module`: the contexts summed by where
//! they allocate. A context's site is the frame that names it in the plots
//! (`label.rs`): its innermost frame that is not an allocator wrapper
//! (`xmalloc`, `operator new`, `strdup` …), C++ allocator internals
//! (`std::`) or the C library. So a helper that every part of a program
//! calls to allocate is not the answer; the functions, or source lines,
//! that call it are, whatever called them.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::cli::{Group, SortKey};
use crate::contexts::{Context, StackFrame};
use crate::label::{base, ellipsize, join, labelled_frame, strip_args};
use crate::report_text::{human_bytes, over_by};
use crate::stacks::frame_name;
use crate::sums::ContextSums;

/// One allocating function, source line or module, with its contexts'
/// sums.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub group: Group,
    /// Where: the function (as [`frame_name`]; with [`Group::Module`],
    /// the module's file name), its module and source file; with
    /// [`Group::Line`] the line, or without line information the
    /// module-relative address of the call (both 0 otherwise).
    pub frame: StackFrame,
    pub sums: ContextSums,
}

impl Site {
    /// The site of a context with the frames `stack` (innermost first)
    /// and allocator `kind`, with nothing summed yet.
    fn of_stack(stack: &[StackFrame], kind: &str, group: Group) -> Site {
        let Some(f) = labelled_frame(stack).map(|k| &stack[k]) else {
            // No frames: under its allocator's name.
            return Site {
                group,
                frame: StackFrame {
                    function: format!("[{kind}]"),
                    file: String::new(),
                    line: 0,
                    module: String::new(),
                    address: 0,
                },
                sums: ContextSums::default(),
            };
        };
        let (by_line, by_module) = (group == Group::Line, group == Group::Module);
        Site {
            group,
            frame: StackFrame {
                function: match (by_module, base(&f.module)) {
                    (true, "") => "?".to_string(),
                    (true, m) => m.to_string(),
                    (false, _) => frame_name(f),
                },
                file: if by_module {
                    String::new()
                } else {
                    f.file.clone()
                },
                line: if by_line { f.line } else { 0 },
                module: f.module.clone(),
                address: if by_line && f.line == 0 { f.address } else { 0 },
            },
            sums: ContextSums::default(),
        }
    }

    /// What tells sites apart across builds (`diff`): the function, with
    /// `:line` or `@0x…` for a line; a module's file name.
    fn name(&self) -> String {
        let f = &self.frame;
        match (self.group, f.line, f.address) {
            (Group::Line, 0, a) if a != 0 => format!("{}@{a:#x}", f.function),
            (Group::Line, l, _) if l != 0 => format!("{}:{l}", f.function),
            _ => f.function.clone(),
        }
    }

    /// The site as a context of one frame, for the hottest-contexts plot
    /// (`plot --group`): its label is the site's, made distinct by line
    /// where a function has several.
    pub fn as_context(&self) -> Context {
        let m = &self.sums;
        let mut frame = self.frame.clone();
        if self.group == Group::Module {
            // A module is its own name.
            frame.module.clear();
        }
        Context {
            kind: String::new(),
            count: m.count,
            count_err: m.count_err,
            bytes: m.bytes,
            bytes_err: m.bytes_err,
            leaked_bytes: m.leaked_bytes,
            peak_live_bytes: m.peak_live_bytes,
            temporary: m.temporary,
            spread: Default::default(),
            stack: vec![frame],
            cut: false,
            inside_mpi: None,
            hot: true,
        }
    }
}

/// The sites of `contexts` summed, ordered by `by` (then count, bytes and
/// name). `group` is `Function`, `Line` or `Module` ([`Group::Context`]
/// groups nothing: each context is its own site at its innermost frame).
pub fn of<'a>(
    contexts: impl IntoIterator<Item = &'a Context>,
    group: Group,
    by: SortKey,
) -> Vec<Site> {
    let mut index: HashMap<(String, String, String, u32, u64), usize> = HashMap::new();
    let mut sites: Vec<Site> = Vec::new();
    for c in contexts {
        let site = Site::of_stack(&c.stack, &c.kind, group);
        let f = &site.frame;
        // A function's file is what its first context's frame says.
        let file = if group == Group::Line {
            f.file.clone()
        } else {
            String::new()
        };
        let key = (
            f.function.clone(),
            f.module.clone(),
            file,
            f.line,
            match group {
                Group::Context => sites.len() as u64,
                _ => f.address,
            },
        );
        let i = *index.entry(key).or_insert_with(|| {
            sites.push(site);
            sites.len() - 1
        });
        sites[i].sums.add(c);
    }
    sites.sort_by(|a, b| {
        b.sums
            .value(by)
            .cmp(&a.sums.value(by))
            .then(b.sums.count.cmp(&a.sums.count))
            .then(b.sums.bytes.cmp(&a.sums.bytes))
            .then(a.frame.function.cmp(&b.frame.function))
            .then(a.frame.line.cmp(&b.frame.line))
    });
    sites
}

/// How `diff --group` names the site of a context (`innermost`: its
/// frames, innermost first) in either report ([`Site::name`]), and a short
/// label with the module's file name. The name leaves the module out, as
/// `diff` matches contexts by names: two builds of a program need not
/// share a file name.
pub fn site_name(innermost: &[StackFrame], kind: &str, group: Group) -> (String, String) {
    let site = Site::of_stack(innermost, kind, group);
    let name = site.name();
    let label = match group {
        Group::Module => name.clone(),
        _ => {
            let f = &site.frame;
            let at = &name[f.function.len()..];
            ellipsize(
                &join(&format!("{}{at}", strip_args(&f.function)), base(&f.module)),
                60,
            )
        }
    };
    (name, label)
}

/// "allocating functions", "allocating lines" or "allocating modules".
pub fn noun(group: Group) -> &'static str {
    match group {
        Group::Line => "allocating lines",
        Group::Module => "allocating modules",
        _ => "allocating functions",
    }
}

/// The text list: `sites` (those the list shows, already ordered) as
/// `#1 function (file:line) [module]` with their sums. `phi`: the report
/// keeps only the contexts above this hotness threshold (`None`: exact
/// mode, every context); `cold`: the figure of the heap (`bytes live at
/// end`) of which the list's contexts below it hold at least φ, when the
/// view lists those too.
pub fn write_text(
    s: &mut String,
    sites: &[Site],
    top: usize,
    phi: Option<f64>,
    cold: Option<&str>,
) {
    let over = match (phi, cold) {
        (None, _) => "its contexts".to_string(),
        (Some(phi), None) => format!(
            "its contexts above the hotness threshold (phi {phi}; WMHCCT_EXACT=1 keeps every \
             context)"
        ),
        (Some(phi), Some(figure)) => format!(
            "its contexts above the hotness threshold and those below it holding at least \
             phi of the heap's {figure} (phi {phi}; WMHCCT_EXACT=1 keeps every context)"
        ),
    };
    let _ = writeln!(
        s,
        "(a context's site: its innermost frame that is not an allocator wrapper or \
         library internals; sums over {over})"
    );
    for (i, site) in sites.iter().take(top).enumerate() {
        let f = &site.frame;
        let loc = match (f.file.is_empty(), f.line, f.address) {
            (true, _, 0) => String::new(),
            (true, _, a) => format!(" ({a:#x})"),
            (false, 0, _) => format!(" ({})", f.file),
            (false, l, _) => format!(" ({}:{l})", f.file),
        };
        let module = match (site.group, f.module.is_empty()) {
            // A module's heading is its path.
            (Group::Module, _) => String::new(),
            (_, true) => " [?]".to_string(),
            (_, false) => format!(" [{}]", f.module),
        };
        let name = match (site.group, f.module.is_empty()) {
            (Group::Module, false) => &f.module,
            _ => &f.function,
        };
        let m = &site.sums;
        let temporary = match m.temporary {
            0 => String::new(),
            n => format!("  temporary {n}"),
        };
        let _ = writeln!(
            s,
            "\n#{} {name}{loc}{module}\n    count {}{}  bytes {}{}  leaked {}  at-peak {}{temporary}  in {} context{}",
            i + 1,
            m.count,
            over_by(m.count_err, m.count_err.to_string()),
            human_bytes(m.bytes),
            over_by(m.bytes_err, human_bytes(m.bytes_err)),
            human_bytes(m.leaked_bytes),
            human_bytes(m.peak_live_bytes),
            m.contexts,
            if m.contexts == 1 { "" } else { "s" },
        );
    }
}

/// The JSON `sites` object: how they are grouped and the first `top`.
pub fn json(sites: &[Site], group: Group, top: usize) -> Value {
    let list: Vec<Value> = sites
        .iter()
        .take(top)
        .map(|site| {
            let (f, m) = (&site.frame, &site.sums);
            json!({
                "function": f.function,
                "file": f.file,
                "line": f.line,
                "module": f.module,
                "address": f.address,
                "contexts": m.contexts,
                "count": m.count,
                "count_err": m.count_err,
                "bytes": m.bytes,
                "bytes_err": m.bytes_err,
                "leaked_bytes": m.leaked_bytes,
                "peak_live_bytes": m.peak_live_bytes,
                "temporary": m.temporary,
            })
        })
        .collect();
    json!({
        "group": group.name(),
        "count": sites.len(),
        "list": list,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, line: u32, address: u64) -> StackFrame {
        StackFrame {
            function: function.into(),
            file: if line == 0 {
                String::new()
            } else {
                "/src/app.c".into()
            },
            line,
            module: "/bin/app".into(),
            address,
        }
    }

    fn context(count: u64, bytes: u64, leaked: u64, stack: Vec<StackFrame>) -> Context {
        Context {
            count,
            bytes,
            leaked_bytes: leaked,
            ..Context::of_stack("malloc", stack)
        }
    }

    /// grid() allocates through xmalloc on lines 10 and 20, from two
    /// callers on line 10; input() on line 30; helper() without line
    /// information at two addresses.
    fn program() -> Vec<Context> {
        let xmalloc = || frame("xmalloc", 3, 0x100);
        vec![
            context(
                4,
                400,
                0,
                vec![
                    xmalloc(),
                    frame("grid", 10, 0x200),
                    frame("setup", 5, 0x300),
                ],
            ),
            context(
                3,
                300,
                0,
                vec![xmalloc(), frame("grid", 10, 0x200), frame("main", 7, 0x400)],
            ),
            context(2, 2000, 0, vec![xmalloc(), frame("grid", 20, 0x210)]),
            context(5, 50, 50, vec![frame("input", 30, 0x500)]),
            context(1, 8, 0, vec![frame("helper", 0, 0x600)]),
            context(1, 8, 8, vec![frame("helper", 0, 0x608)]),
            context(1, 1, 0, vec![]),
        ]
    }

    fn names(sites: &[Site]) -> Vec<(String, u32, u64, usize, u64)> {
        sites
            .iter()
            .map(|s| {
                (
                    s.frame.function.clone(),
                    s.frame.line,
                    s.frame.address,
                    s.sums.contexts,
                    s.sums.count,
                )
            })
            .collect()
    }

    #[test]
    fn functions_sum_their_contexts_past_the_wrappers() {
        let p = program();
        let by_count = of(&p, Group::Function, SortKey::Count);
        assert_eq!(
            names(&by_count),
            [
                ("grid".to_string(), 0, 0, 3, 9),
                ("input".to_string(), 0, 0, 1, 5),
                ("helper".to_string(), 0, 0, 2, 2),
                ("[malloc]".to_string(), 0, 0, 1, 1),
            ]
        );
        assert_eq!(by_count[0].frame.file, "/src/app.c");
        assert_eq!(by_count[0].sums.bytes, 2700);
        let by_leaked = of(&p, Group::Function, SortKey::Leaked);
        assert_eq!(by_leaked[0].frame.function, "input");
        assert_eq!(by_leaked[1].frame.function, "helper");
    }

    #[test]
    fn lines_split_a_function_by_call_site() {
        let p = program();
        assert_eq!(
            names(&of(&p, Group::Line, SortKey::Count)),
            [
                ("grid".to_string(), 10, 0, 2, 7),
                ("input".to_string(), 30, 0, 1, 5),
                ("grid".to_string(), 20, 0, 1, 2),
                ("helper".to_string(), 0, 0x600, 1, 1),
                ("helper".to_string(), 0, 0x608, 1, 1),
                ("[malloc]".to_string(), 0, 0, 1, 1),
            ]
        );
        let by_bytes = of(&p, Group::Line, SortKey::Bytes);
        assert_eq!(
            (by_bytes[0].frame.function.as_str(), by_bytes[0].frame.line),
            ("grid", 20)
        );
        // As a one-frame context for the plot: the sums and the call site.
        let c = by_bytes[0].as_context();
        assert_eq!((c.count, c.bytes, c.stack.len()), (2, 2000, 1));
        assert_eq!(
            (c.stack[0].function.as_str(), c.stack[0].line),
            ("grid", 20)
        );
        // Context: every context its own site.
        assert_eq!(of(&p, Group::Context, SortKey::Count).len(), p.len());
    }

    #[test]
    fn modules_sum_their_functions() {
        let mut p = program();
        p.push(context(
            2,
            20,
            0,
            vec![StackFrame {
                module: "/usr/lib/libhdf5.so.103".into(),
                ..frame("H5MM_malloc", 0, 0x9000)
            }],
        ));
        let sites = of(&p, Group::Module, SortKey::Count);
        assert_eq!(
            names(&sites),
            [
                ("app".to_string(), 0, 0, 6, 16),
                ("libhdf5.so.103".to_string(), 0, 0, 1, 2),
                ("[malloc]".to_string(), 0, 0, 1, 1),
            ]
        );
        let mut s = String::new();
        write_text(&mut s, &sites, 5, None, None);
        assert!(
            s.contains("\n#1 /bin/app\n    count 16  bytes 2.7 KiB "),
            "{s}"
        );
        assert!(s.contains("\n#2 /usr/lib/libhdf5.so.103\n"), "{s}");
        // The plot's label: the module's name alone.
        let c = sites[1].as_context();
        assert_eq!(
            (c.stack[0].function.as_str(), c.stack[0].module.as_str()),
            ("libhdf5.so.103", "")
        );
        assert_eq!(
            site_name(&p[7].stack, "malloc", Group::Module),
            ("libhdf5.so.103".to_string(), "libhdf5.so.103".to_string())
        );
        assert_eq!(json(&sites, Group::Module, 1)["group"], "module");
    }

    #[test]
    fn a_site_is_named_without_its_module() {
        let stack = [frame("xmalloc", 3, 0x100), frame("grid(int)", 10, 0x200)];
        assert_eq!(
            site_name(&stack, "malloc", Group::Function),
            ("grid(int)".to_string(), "grid (app)".to_string())
        );
        assert_eq!(
            site_name(&stack, "malloc", Group::Line),
            ("grid(int):10".to_string(), "grid:10 (app)".to_string())
        );
        let no_lines = [frame("helper", 0, 0x600)];
        assert_eq!(
            site_name(&no_lines, "calloc", Group::Line).0,
            "helper@0x600"
        );
        assert_eq!(site_name(&[], "calloc", Group::Line).0, "[calloc]");
    }

    #[test]
    fn text_and_json_give_the_sums() {
        let p = program();
        let sites = of(&p, Group::Line, SortKey::Count);
        let mut s = String::new();
        write_text(&mut s, &sites, 5, None, None);
        assert!(
            s.contains("\n#1 grid (/src/app.c:10) [/bin/app]\n    count 7  bytes 700 B  leaked 0 B  at-peak 0 B  in 2 contexts\n"),
            "{s}"
        );
        assert!(s.contains("\n#4 helper (0x600) [/bin/app]\n"), "{s}");
        assert!(!s.contains("#6"), "top 5: {s}");
        let mut all = String::new();
        write_text(&mut all, &sites, 10, Some(1e-4), None);
        assert!(all.contains("\n#6 [malloc] [?]\n"), "{all}");
        assert!(
            !s.contains("threshold") && all.contains("above the hotness threshold (phi 0.0001;")
        );
        // A view by a heap figure sums the cold contexts it lists too.
        let mut leaks = String::new();
        write_text(
            &mut leaks,
            &sites,
            10,
            Some(1e-4),
            Some("bytes live at end"),
        );
        assert!(
            leaks.contains(
                "sums over its contexts above the hotness threshold and those below it holding \
                 at least phi of the heap's bytes live at end (phi 0.0001;"
            ),
            "{leaks}"
        );
        let v = json(&sites, Group::Line, 2);
        assert_eq!(v["group"], "line");
        assert_eq!(v["count"], 6);
        assert_eq!(v["list"].as_array().unwrap().len(), 2);
        assert_eq!(v["list"][0]["contexts"], 2);
        assert_eq!(v["list"][1]["leaked_bytes"], 50);
    }
}
