//! `--focus TEXT`: only the contexts whose stack passes through a frame
//! that names TEXT, in its function, its source file or its module's file
//! name, ignoring ASCII case (Fortran compilers lower-case names). Several
//! texts: any of them. So `wmhcct report r.h5 --focus solver` lists what
//! the solver allocates, through whatever it calls, the MPI library
//! included.

use crate::contexts::{Context, ContextList, StackFrame};

/// The texts of `--focus`.
#[derive(Clone, Debug)]
pub struct Focus {
    /// As given, for messages.
    texts: Vec<String>,
    /// Lower-cased, for matching.
    lower: Vec<String>,
}

impl Focus {
    /// `None` without texts (no focus).
    pub fn new(texts: &[String]) -> Option<Focus> {
        (!texts.is_empty()).then(|| Focus {
            texts: texts.to_vec(),
            lower: texts.iter().map(|t| t.to_ascii_lowercase()).collect(),
        })
    }

    /// The texts as given.
    pub fn texts(&self) -> &[String] {
        &self.texts
    }

    /// Does a frame of `stack` name one of the texts?
    pub fn matches(&self, stack: &[StackFrame]) -> bool {
        stack.iter().any(|f| self.names(f))
    }

    fn names(&self, f: &StackFrame) -> bool {
        let module = f.module.rsplit('/').next().unwrap_or(&f.module);
        [f.function.as_str(), f.file.as_str(), module]
            .iter()
            .any(|field| self.lower.iter().any(|t| contains_any_case(field, t)))
    }

    /// The contexts through the focus, in `list`'s order; untraced
    /// events have no stack.
    pub fn of(&self, list: &ContextList) -> ContextList {
        let through = |v: &[Context]| -> Vec<Context> {
            v.iter()
                .filter(|c| self.matches(&c.stack))
                .cloned()
                .collect()
        };
        ContextList {
            contexts: through(&list.contexts),
            untraced: Vec::new(),
            mpi: through(&list.mpi),
        }
    }

    /// `"solve"` or `"solve" or "halo"`.
    pub fn quoted(&self) -> String {
        self.texts
            .iter()
            .map(|t| format!("{t:?}"))
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

/// Whether `hay` contains `lower` (lower-case), ignoring ASCII case,
/// without a lower-cased copy of `hay` (every frame of every context).
fn contains_any_case(hay: &str, lower: &str) -> bool {
    let (hay, lower) = (hay.as_bytes(), lower.as_bytes());
    lower.is_empty()
        || hay
            .windows(lower.len())
            .any(|w| w.eq_ignore_ascii_case(lower))
}

/// Longest [`Focus::brief`] in characters.
const BRIEF_CHARS: usize = 40;

impl Focus {
    /// [`Focus::quoted`] in at most about 40 characters, for a plot's
    /// title: `"solve" or 2 more`, a long text cut with `…`.
    pub fn brief(&self) -> String {
        let all = self.quoted();
        if all.chars().count() <= BRIEF_CHARS {
            return all;
        }
        let first = &self.texts[0];
        let first = if first.chars().count() > BRIEF_CHARS - 12 {
            let cut: String = first.chars().take(BRIEF_CHARS - 13).collect();
            format!("\"{cut}…\"")
        } else {
            format!("{first:?}")
        };
        match self.texts.len() {
            1 => first,
            n => format!("{first} or {} more", n - 1),
        }
    }
}

/// What the focused allocation contexts add up to; `*_err` bound how far
/// the Space-Saving counts may be above the true ones (0 in exact mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FocusSums {
    pub contexts: usize,
    pub count: u64,
    pub count_err: u64,
    pub bytes: u64,
    pub bytes_err: u64,
    pub leaked_bytes: u64,
    pub peak_live_bytes: u64,
}

impl FocusSums {
    pub fn of(contexts: &[Context]) -> FocusSums {
        contexts.iter().fold(
            FocusSums {
                contexts: contexts.len(),
                ..FocusSums::default()
            },
            |s, c| FocusSums {
                count: s.count.saturating_add(c.count),
                count_err: s.count_err.saturating_add(c.count_err),
                bytes: s.bytes.saturating_add(c.bytes),
                bytes_err: s.bytes_err.saturating_add(c.bytes_err),
                leaked_bytes: s.leaked_bytes.saturating_add(c.leaked_bytes),
                peak_live_bytes: s.peak_live_bytes.saturating_add(c.peak_live_bytes),
                ..s
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: &str, module: &str) -> StackFrame {
        StackFrame {
            function: function.into(),
            file: file.into(),
            line: 1,
            module: module.into(),
            address: 0,
        }
    }

    #[test]
    fn a_frame_matches_by_function_file_or_module_name_in_any_case() {
        let stack = [
            frame("solver_mod::jacobi", "/src/solver.f90", "/opt/app/bin/app"),
            frame("main", "/src/main.c", "/opt/app/bin/app"),
        ];
        for text in ["JACOBI", "solver", "main.c", "bin/app", "APP"] {
            let f = Focus::new(&[text.to_string()]).unwrap();
            // The module's directory is not its name.
            assert_eq!(f.matches(&stack), text != "bin/app", "{text}");
        }
        let f = Focus::new(&["nothing".into(), "jacobi".into()]).unwrap();
        assert!(f.matches(&stack), "any of the texts");
        assert_eq!(f.quoted(), "\"nothing\" or \"jacobi\"");
        assert!(!Focus::new(&["nothing".into()]).unwrap().matches(&stack));
        assert!(Focus::new(&[]).is_none());
    }

    #[test]
    fn a_brief_focus_is_short() {
        let f = |t: &[&str]| Focus::new(&t.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            f(&["solve", "halo"]).unwrap().brief(),
            "\"solve\" or \"halo\""
        );
        let many = f(&["exchange_halos", "checkpoint", "relax", "solve"]).unwrap();
        assert_eq!(many.brief(), "\"exchange_halos\" or 3 more");
        let long = f(&["a_very_long_fortran_module_name_mod::a_procedure"]).unwrap();
        assert_eq!(long.brief(), "\"a_very_long_fortran_module_…\"");
        assert!(long.brief().chars().count() <= BRIEF_CHARS);
    }

    #[test]
    fn the_contexts_through_the_focus_and_their_sums() {
        let mut a = Context::of_stack("malloc", vec![frame("halo", "", "/app")]);
        a.count = 3;
        a.count_err = 1;
        a.bytes = 30;
        a.leaked_bytes = 10;
        let mut b = Context::of_stack("malloc", vec![frame("io", "", "/app")]);
        b.count = 5;
        let all = ContextList {
            contexts: vec![a.clone(), b.clone()],
            untraced: vec![Context::of_stack("malloc", vec![])],
            mpi: vec![b, a],
        };
        let list = Focus::new(&["halo".into()]).unwrap().of(&all);
        assert_eq!(list.contexts.len(), 1);
        assert_eq!(list.mpi.len(), 1);
        assert!(list.untraced.is_empty());
        assert_eq!(
            FocusSums::of(&list.contexts),
            FocusSums {
                contexts: 1,
                count: 3,
                count_err: 1,
                bytes: 30,
                bytes_err: 0,
                leaked_bytes: 10,
                peak_live_bytes: 0
            }
        );
    }
}
