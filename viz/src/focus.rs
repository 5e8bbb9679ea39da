//! `--focus TEXT` and `--ignore TEXT`: only the contexts whose stack passes
//! through a frame that names a focus text, and through none that names an
//! ignored one. A frame names a text in its function, its source file or
//! its module's file name, ignoring ASCII case (Fortran compilers
//! lower-case names). Several texts of a kind: any of them. So
//! `wmhcct report r.h5 --focus solver` lists what the solver allocates,
//! through whatever it calls, the MPI library included, and
//! `--focus solver --ignore mpi_` the same without what it allocates
//! through MPI calls.

use crate::contexts::{Context, ContextList, StackFrame};

/// The texts of one of the two options.
#[derive(Clone, Debug)]
struct Texts {
    /// As given, for messages.
    given: Vec<String>,
    /// Lower-cased, for matching.
    lower: Vec<String>,
}

impl Texts {
    fn new(texts: &[String]) -> Texts {
        Texts {
            given: texts.to_vec(),
            lower: texts.iter().map(|t| t.to_ascii_lowercase()).collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.given.is_empty()
    }

    /// Does a frame of `stack` name one of the texts?
    fn in_stack(&self, stack: &[StackFrame]) -> bool {
        stack.iter().any(|f| self.names(f))
    }

    fn names(&self, f: &StackFrame) -> bool {
        let module = f.module.rsplit('/').next().unwrap_or(&f.module);
        [f.function.as_str(), f.file.as_str(), module]
            .iter()
            .any(|field| self.lower.iter().any(|t| contains_any_case(field, t)))
    }

    /// `"solve"` or `"solve" or "halo"`.
    fn quoted(&self) -> String {
        self.given
            .iter()
            .map(|t| format!("{t:?}"))
            .collect::<Vec<_>>()
            .join(" or ")
    }

    /// [`Texts::quoted`] in at most about `chars` characters: `"solve" or
    /// 2 more`, a long text cut with `…`.
    fn brief(&self, chars: usize) -> String {
        let all = self.quoted();
        if all.chars().count() <= chars {
            return all;
        }
        let first = &self.given[0];
        let first = if first.chars().count() > chars - 12 {
            let cut: String = first.chars().take(chars - 13).collect();
            format!("\"{cut}…\"")
        } else {
            format!("{first:?}")
        };
        match self.given.len() {
            1 => first,
            n => format!("{first} or {} more", n - 1),
        }
    }
}

/// The texts of `--focus` and `--ignore`.
#[derive(Clone, Debug)]
pub struct Focus {
    through: Texts,
    ignore: Texts,
}

impl Focus {
    /// `None` without texts (no focus, nothing ignored).
    pub fn new(through: &[String], ignore: &[String]) -> Option<Focus> {
        (!through.is_empty() || !ignore.is_empty()).then(|| Focus {
            through: Texts::new(through),
            ignore: Texts::new(ignore),
        })
    }

    /// The texts of `--focus` as given.
    pub fn texts(&self) -> &[String] {
        &self.through.given
    }

    /// The texts of `--ignore` as given.
    pub fn ignored(&self) -> &[String] {
        &self.ignore.given
    }

    /// Does `stack` pass through a frame naming a focus text (when there
    /// are any) and through none naming an ignored text?
    pub fn matches(&self, stack: &[StackFrame]) -> bool {
        (self.through.is_empty() || self.through.in_stack(stack)) && !self.ignore.in_stack(stack)
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
            // Kept without stacks: outside any focus.
            cold: Vec::new(),
            mpi: through(&list.mpi),
        }
    }

    /// What a context passes through, after "contexts": `through "solve"`,
    /// `not through "mpi_"`, `through "solve", not through "mpi_"`.
    pub fn short(&self) -> String {
        self.joined(self.through.quoted(), self.ignore.quoted(), "not through")
    }

    /// As [`Focus::short`], spelt out: `through a frame naming "solve"`,
    /// `through no frame naming "mpi_"`, `through a frame naming "solve"
    /// and none naming "mpi_"`.
    pub fn long(&self) -> String {
        match (self.through.is_empty(), self.ignore.is_empty()) {
            (false, true) => format!("through a frame naming {}", self.through.quoted()),
            (true, _) => format!("through no frame naming {}", self.ignore.quoted()),
            (false, false) => format!(
                "through a frame naming {} and none naming {}",
                self.through.quoted(),
                self.ignore.quoted()
            ),
        }
    }

    /// [`Focus::short`] in at most about 40 characters per option, for a
    /// plot's title: `through "solve" or 2 more, not "mpi_"`.
    pub fn brief(&self) -> String {
        let (through, ignore) = (
            self.through.brief(BRIEF_CHARS),
            self.ignore.brief(BRIEF_CHARS),
        );
        self.joined(through, ignore, "not")
    }

    fn joined(&self, through: String, ignore: String, not: &str) -> String {
        match (self.through.is_empty(), self.ignore.is_empty()) {
            (false, true) => format!("through {through}"),
            (true, _) => format!("not through {ignore}"),
            (false, false) => format!("through {through}, {not} {ignore}"),
        }
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

/// Longest brief of one option's texts, in characters.
const BRIEF_CHARS: usize = 40;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sums::ContextSums;

    fn frame(function: &str, file: &str, module: &str) -> StackFrame {
        StackFrame {
            function: function.into(),
            file: file.into(),
            line: 1,
            module: module.into(),
            address: 0,
        }
    }

    fn strings(t: &[&str]) -> Vec<String> {
        t.iter().map(|s| s.to_string()).collect()
    }

    fn focus(t: &[&str]) -> Focus {
        Focus::new(&strings(t), &[]).unwrap()
    }

    fn ignoring(t: &[&str]) -> Focus {
        Focus::new(&[], &strings(t)).unwrap()
    }

    #[test]
    fn a_frame_matches_by_function_file_or_module_name_in_any_case() {
        let stack = [
            frame("solver_mod::jacobi", "/src/solver.f90", "/opt/app/bin/app"),
            frame("main", "/src/main.c", "/opt/app/bin/app"),
        ];
        for text in ["JACOBI", "solver", "main.c", "bin/app", "APP"] {
            // The module's directory is not its name.
            let names = text != "bin/app";
            assert_eq!(focus(&[text]).matches(&stack), names, "{text}");
            assert_eq!(ignoring(&[text]).matches(&stack), !names, "{text}");
        }
        let f = focus(&["nothing", "jacobi"]);
        assert!(f.matches(&stack), "any of the texts");
        assert_eq!(f.short(), "through \"nothing\" or \"jacobi\"");
        assert!(!focus(&["nothing"]).matches(&stack));
        assert!(
            !ignoring(&["nothing", "MAIN"]).matches(&stack),
            "any of them"
        );
        assert!(Focus::new(&[], &[]).is_none());
    }

    #[test]
    fn ignored_texts_leave_out_what_the_focus_keeps() {
        let solve_mpi = [
            frame("PMPI_Allreduce", "", "/usr/lib/libmpi.so.40"),
            frame("solve", "/src/solve.c", "/app"),
            frame("main", "/src/main.c", "/app"),
        ];
        let solve = [
            frame("malloc_grid", "/src/grid.c", "/app"),
            frame("solve", "/src/solve.c", "/app"),
        ];
        let io = [frame("write_out", "/src/io.c", "/app")];
        let both = Focus::new(&strings(&["solve"]), &strings(&["libmpi"])).unwrap();
        assert!(!both.matches(&solve_mpi));
        assert!(both.matches(&solve));
        assert!(!both.matches(&io), "not through the focus");
        let out = ignoring(&["libmpi"]);
        assert!(!out.matches(&solve_mpi) && out.matches(&solve) && out.matches(&io));
        assert_eq!(both.texts(), ["solve"]);
        assert_eq!(both.ignored(), ["libmpi"]);
        assert_eq!(both.short(), "through \"solve\", not through \"libmpi\"");
        assert_eq!(
            both.long(),
            "through a frame naming \"solve\" and none naming \"libmpi\""
        );
        assert_eq!(out.short(), "not through \"libmpi\"");
        assert_eq!(out.long(), "through no frame naming \"libmpi\"");
        assert_eq!(focus(&["solve"]).long(), "through a frame naming \"solve\"");
    }

    #[test]
    fn a_brief_focus_is_short() {
        assert_eq!(
            focus(&["solve", "halo"]).brief(),
            "through \"solve\" or \"halo\""
        );
        let many = focus(&["exchange_halos", "checkpoint", "relax", "solve"]);
        assert_eq!(many.brief(), "through \"exchange_halos\" or 3 more");
        let long = focus(&["a_very_long_fortran_module_name_mod::a_procedure"]);
        assert_eq!(long.brief(), "through \"a_very_long_fortran_module_…\"");
        assert!(long.brief().chars().count() <= "through ".len() + BRIEF_CHARS);
        let both = Focus::new(&strings(&["solve"]), &strings(&["mpi", "pmix", "ucx"])).unwrap();
        assert_eq!(
            both.brief(),
            "through \"solve\", not \"mpi\" or \"pmix\" or \"ucx\""
        );
        assert_eq!(ignoring(&["mpi"]).brief(), "not through \"mpi\"");
    }

    #[test]
    fn the_contexts_through_the_focus_and_their_sums() {
        let mut a = Context::of_stack("malloc", vec![frame("halo", "", "/app")]);
        a.count = 3;
        a.count_err = 1;
        a.bytes = 30;
        a.leaked_bytes = 10;
        a.temporary = 2;
        let mut b = Context::of_stack("malloc", vec![frame("io", "", "/app")]);
        b.count = 5;
        let all = ContextList {
            contexts: vec![a.clone(), b.clone()],
            untraced: vec![Context::of_stack("malloc", vec![])],
            cold: Vec::new(),
            mpi: vec![b, a],
        };
        let list = focus(&["halo"]).of(&all);
        assert_eq!(list.contexts.len(), 1);
        assert_eq!(list.mpi.len(), 1);
        assert!(list.untraced.is_empty());
        assert_eq!(
            ContextSums::of(&list.contexts),
            ContextSums {
                contexts: 1,
                count: 3,
                count_err: 1,
                bytes: 30,
                bytes_err: 0,
                leaked_bytes: 10,
                peak_live_bytes: 0,
                temporary: 2,
            }
        );
    }
}
