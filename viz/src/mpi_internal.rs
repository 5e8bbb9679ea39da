//! Memory the MPI library allocated for itself: contexts whose stack runs
//! through an MPI routine (`MPI_Init`, `PMPI_Isend`, Fortran's `mpi_init_`)
//! with none of the program's own code between that routine and the
//! allocator, and contexts on the threads the library starts (Open MPI's
//! PMIx and event-loop threads), which run none of the program's code.
//!
//! An MPI job's report is taken in `MPI_Finalize`, before the library frees
//! its own state in the rest of `MPI_Finalize`, so without this distinction
//! that state would head every leak list. The MPI standard reserves the `MPI_` and `PMPI_`
//! prefixes in every language (case-insensitively in Fortran), so a frame
//! named so is the library's entry point, never the program's.

use std::collections::HashSet;

use crate::contexts::{Context, SortKey, StackFrame};

/// Whether `name` is an MPI routine of the C or Fortran bindings in any of
/// their manglings: `MPI_Send`, `PMPI_Send`, `mpi_send_`, `mpi_send__`,
/// `MPI_SEND`, `mpi_send_f08_`.
pub fn is_mpi_routine(name: &str) -> bool {
    let b = name.as_bytes();
    let rest = if b.len() > 4 && b[..4].eq_ignore_ascii_case(b"mpi_") {
        &b[4..]
    } else if b.len() > 5 && b[..5].eq_ignore_ascii_case(b"pmpi_") {
        &b[5..]
    } else {
        return false;
    };
    rest[0].is_ascii_alphabetic() && rest.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The MPI routine whose call made this allocation, for a stack innermost
/// first: the index of the outermost frame that is an MPI routine, when no
/// frame of the program's executable (`program`, a module path) lies between
/// it and the allocator. A callback of the program's run by MPI (a reduction
/// operator, an error handler) that allocates is the program's.
fn mpi_routine_at(stack: &[StackFrame], program: &str) -> Option<usize> {
    // A function of the program's own executable is never the MPI
    // library's entry point, whatever its name (C may name one `mpi_log`).
    let outer = stack
        .iter()
        .rposition(|f| is_mpi_routine(&f.function) && !in_program(f, program))?;
    let program_between = stack[..outer].iter().any(|f| in_program(f, program));
    (!program_between).then_some(outer)
}

fn in_program(f: &StackFrame, program: &str) -> bool {
    !program.is_empty() && f.module == program
}

/// How a context's owner is named: the MPI routine as the program called
/// it (`PMPI_Send`, which the tracer's wrapper may hand on to, is
/// `MPI_Send`). A routine of the Fortran bindings is named as the MPI
/// standard writes them, in capitals (`MPI_BCAST`): the library gives one
/// routine a dozen names at one address (Open MPI's `mpi_bcast`,
/// `mpi_bcast_`, `mpi_bcast__`, `MPI_BCAST`, `pmpi_bcast_`, `MPI_Bcast_f08`
/// …), and the symbol table names the frame by whichever it lists, so until
/// 2026-11-27 one job's owners read `mpi_init`, `mpi_comm_split__`,
/// `MPI_BCAST` and `MPI_Cart_sub_f08` (a probe on Quantum ESPRESSO and
/// CP2K).
fn routine_name(function: &str) -> String {
    let name = match function.get(..5) {
        Some(p) if p.eq_ignore_ascii_case("pmpi_") => &function[1..],
        _ => function,
    };
    match fortran_binding(name) {
        Some(base) => format!("MPI_{}", base.to_ascii_uppercase()),
        None => name.to_string(),
    }
}

/// The routine's name without `MPI_` when `name` (an MPI routine without
/// its `P`) is one of the Fortran bindings' names: all in small letters
/// or all in capitals, with any trailing underscores (`mpi_send_`,
/// `MPI_SEND`), or ending in `_f`, `_f08` or `_f08ts` (Open MPI's and
/// MPICH's names for the `mpi` and `mpi_f08` modules). The C bindings
/// mix the two (`MPI_Send`, `MPI_Type_create_f90_real`).
fn fortran_binding(name: &str) -> Option<&str> {
    let rest = name.get(4..)?.trim_end_matches('_');
    let base = ["_f08ts", "_f08", "_f"]
        .iter()
        .find_map(|s| rest.strip_suffix(s))
        .filter(|b| !b.is_empty());
    if let Some(base) = base {
        return Some(base);
    }
    let letters = rest.bytes().filter(u8::is_ascii_alphabetic);
    let lower = letters.clone().all(|c| c.is_ascii_lowercase());
    let upper = letters.clone().all(|c| c.is_ascii_uppercase());
    (lower || upper).then_some(rest)
}

/// Where a thread's own code begins: `start_thread` (glibc) calls it.
const THREAD_STARTS: [&str; 3] = ["start_thread", "clone3", "clone"];

/// Set each context's [`Context::inside_mpi`]: the MPI routine whose call
/// allocated it, or `thread of <module>` for a context on a thread the MPI
/// library started. Such a thread's stack holds no frame of the program's
/// and no MPI routine, and a frame of a module of the library's: one whose
/// code runs inside MPI calls (in the contexts allocated there) and never
/// in the program's own contexts (those with a frame of the program and no
/// MPI routine, so that libc or libstdc++ are not taken for the library).
#[cfg(test)]
pub fn classify(contexts: &mut [Context], program: &str) {
    let stacks: Vec<&[StackFrame]> = contexts.iter().map(|c| c.stack.as_slice()).collect();
    let owners = owners(&stacks, program);
    for (c, owner) in contexts.iter_mut().zip(owners) {
        c.inside_mpi = owner;
    }
}

/// [`classify`] over bare stacks, innermost frame first: for each, the MPI
/// routine or `thread of <module>` that owns it, or `None`.
#[cfg(test)]
pub fn owners(stacks: &[&[StackFrame]], program: &str) -> Vec<Option<String>> {
    let mut owners = Owners::new(program);
    for stack in stacks {
        owners.learn(stack);
    }
    stacks.iter().map(|stack| owners.of(stack)).collect()
}

/// [`owners`] in two passes, for stacks built one at a time: [`Owners::learn`]
/// every stack, then ask [`Owners::of`] for each (a thread the library
/// started is recognised by the modules its calls run through, so every
/// stack is learnt before any is answered).
pub struct Owners<'p> {
    program: &'p str,
    library: HashSet<String>,
    programs: HashSet<String>,
    settled: bool,
}

impl<'p> Owners<'p> {
    pub fn new(program: &'p str) -> Self {
        Owners {
            program,
            library: HashSet::new(),
            programs: HashSet::new(),
            settled: false,
        }
    }

    /// Take in one stack (before any [`Owners::of`]).
    pub fn learn(&mut self, stack: &[StackFrame]) {
        debug_assert!(!self.settled, "learn after of");
        match mpi_routine_at(stack, self.program) {
            Some(i) => {
                for f in &stack[..i] {
                    if !self.library.contains(&f.module) {
                        self.library.insert(f.module.clone());
                    }
                }
            }
            None if stack.iter().any(|f| in_program(f, self.program)) => {
                for f in stack {
                    if !self.programs.contains(&f.module) {
                        self.programs.insert(f.module.clone());
                    }
                }
            }
            None => {}
        }
    }

    /// The MPI routine or `thread of <module>` that owns `stack`.
    pub fn of(&mut self, stack: &[StackFrame]) -> Option<String> {
        if !self.settled {
            let programs = std::mem::take(&mut self.programs);
            self.library
                .retain(|m| !m.is_empty() && !programs.contains(m.as_str()));
            self.settled = true;
        }
        mpi_routine_at(stack, self.program)
            .map(|i| routine_name(&stack[i].function))
            .or_else(|| library_thread(stack, self.program, &self.library))
    }
}

/// `thread of libpmix.so.2` for a stack of a thread the MPI library started
/// (see [`classify`]): named by the module of the thread's start routine,
/// else of its outermost frame in the library.
fn library_thread(
    stack: &[StackFrame],
    program: &str,
    library: &HashSet<String>,
) -> Option<String> {
    let start = stack
        .iter()
        .position(|f| THREAD_STARTS.contains(&f.function.as_str()))?;
    if stack.iter().any(|f| in_program(f, program)) {
        return None;
    }
    let owner = stack[..start]
        .last()
        .filter(|f| library.contains(&f.module))
        .or_else(|| {
            stack[..start]
                .iter()
                .rev()
                .find(|f| library.contains(&f.module))
        })?;
    let name = owner.module.rsplit('/').next().unwrap_or(&owner.module);
    Some(format!("thread of {name}"))
}

/// Contexts allocated inside MPI calls, by one measure ([`SortKey`]): how
/// many have some of it, its sum, and the routines they were allocated in
/// (largest sum first).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MpiOwn {
    pub contexts: usize,
    pub total: u64,
    pub routines: Vec<(String, u64)>,
}

impl MpiOwn {
    /// Bytes live at the end: the MPI library's own state.
    pub fn of<'a>(contexts: impl IntoIterator<Item = &'a Context>) -> MpiOwn {
        Self::by(contexts, SortKey::Leaked)
    }

    /// By `key`'s measure, over the contexts with some of it.
    pub fn by<'a>(contexts: impl IntoIterator<Item = &'a Context>, key: SortKey) -> MpiOwn {
        let mut own = MpiOwn::default();
        for c in contexts {
            let Some(r) = &c.inside_mpi else { continue };
            let v = key.value(c);
            if v == 0 {
                continue;
            }
            own.contexts += 1;
            own.total += v;
            match own.routines.iter_mut().find(|(n, _)| n == r) {
                Some((_, b)) => *b += v,
                None => own.routines.push((r.clone(), v)),
            }
        }
        own.routines
            .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        own
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, module: &str) -> StackFrame {
        StackFrame::named(function, module)
    }

    #[test]
    fn mpi_routines_in_every_binding_and_mangling() {
        for name in [
            "MPI_Init",
            "PMPI_Init",
            "MPI_Init_thread",
            "mpi_init_",
            "mpi_init__",
            "MPI_INIT",
            "mpi_init",
            "pmpi_init_",
            "mpi_init_f08_",
            "mpi_init_thread_f08",
            "MPI_File_open",
        ] {
            assert!(is_mpi_routine(name), "{name}");
        }
        for name in [
            "MPIR_Init_impl",
            "MPID_Finalize",
            "ompi_mpi_init",
            "ompi_init_f",
            "mca_btl_tcp_component_init",
            "MPI_",
            "mpi__x",
            "mpi_1x",
            "my_mpi_init",
            "MPI_Init.cold",
            "??",
            "",
        ] {
            assert!(!is_mpi_routine(name), "{name}");
        }
    }

    fn mpi_routine_of<'a>(stack: &'a [StackFrame], program: &str) -> Option<&'a str> {
        mpi_routine_at(stack, program).map(|i| stack[i].function.as_str())
    }

    #[test]
    fn the_outermost_mpi_routine_names_the_call_unless_the_program_runs_between() {
        let app = "/work/app";
        let lib = "/usr/lib/libmpi.so.40";
        // main → MPI_Init → PMPI_Init → … → malloc (the tracer's wrapper
        // between main and PMPI_Init is left out of the stacks it reads).
        let init = [
            frame("opal_hash_table_init", "/usr/lib/libopen-pal.so.40"),
            frame("ompi_mpi_init", lib),
            frame("PMPI_Init", lib),
            frame("MPI_Init", lib),
            frame("main", app),
            frame("_start", app),
        ];
        assert_eq!(mpi_routine_of(&init, app), Some("MPI_Init"));
        // A reduction operator of the program's, run by MPI_Allreduce.
        let op = [
            frame("my_op", app),
            frame("ompi_op_reduce", lib),
            frame("PMPI_Allreduce", lib),
            frame("main", app),
        ];
        assert_eq!(mpi_routine_of(&op, app), None);
        // … unless the program's path is unknown.
        assert_eq!(mpi_routine_of(&op, ""), Some("PMPI_Allreduce"));
        // The program's own allocation.
        let own = [frame("solve", app), frame("main", app)];
        assert_eq!(mpi_routine_of(&own, app), None);
        // A function of the program's named like an MPI routine is the
        // program's: C reserves only `MPI_` and `PMPI_`, case-sensitively.
        let named = [frame("mpi_log", app), frame("main", app)];
        assert_eq!(mpi_routine_of(&named, app), None);
        let under = [
            frame("strdup", "/lib/libc.so.6"),
            frame("mpi_log", app),
            frame("PMPI_Init", lib),
            frame("main", app),
        ];
        assert_eq!(mpi_routine_of(&under, app), None);
        // Fortran: MAIN__ → mpi_init_ → PMPI_Init.
        let f = [
            frame("opal_malloc", "/usr/lib/libopen-pal.so.40"),
            frame("PMPI_Init", lib),
            frame("mpi_init_", "/usr/lib/libmpi_mpifh.so.40"),
            frame("MAIN__", app),
        ];
        assert_eq!(mpi_routine_of(&f, app), Some("mpi_init_"));
    }

    #[test]
    fn a_routine_is_named_alike_in_every_mangling() {
        // Open MPI's names for one Fortran routine (one address).
        for name in [
            "mpi_bcast",
            "mpi_bcast_",
            "mpi_bcast__",
            "MPI_BCAST",
            "pmpi_bcast_",
            "PMPI_BCAST",
            "MPI_Bcast_f",
            "MPI_Bcast_f08",
            "PMPI_Bcast_f08",
            "mpi_bcast_f08_",
            "MPI_Bcast_f08ts",
        ] {
            assert_eq!(routine_name(name), "MPI_BCAST", "{name}");
        }
        assert_eq!(routine_name("mpi_comm_split__"), "MPI_COMM_SPLIT");
        assert_eq!(routine_name("MPI_Cart_sub_f08"), "MPI_CART_SUB");
        assert_eq!(routine_name("mpi_init_thread_f08_"), "MPI_INIT_THREAD");
        // The C bindings keep their names, the profiling one without its P.
        for (name, c) in [
            ("MPI_Send", "MPI_Send"),
            ("PMPI_Send", "MPI_Send"),
            ("MPI_Init_thread", "MPI_Init_thread"),
            ("MPI_Type_create_f90_real", "MPI_Type_create_f90_real"),
            ("MPI_Comm_f2c", "MPI_Comm_f2c"),
            ("MPI_T_init_thread", "MPI_T_init_thread"),
            ("MPI_Wtime", "MPI_Wtime"),
        ] {
            assert_eq!(routine_name(name), c, "{name}");
        }
    }

    fn context(stack: Vec<StackFrame>, leaked: u64) -> Context {
        Context {
            bytes: leaked,
            leaked_bytes: leaked,
            ..Context::of_stack("malloc", stack)
        }
    }

    /// Open MPI's stacks: MPI_Init, a PMIx thread, the program's thread, and
    /// a thread of the program that runs only library code (libgomp's pool).
    #[test]
    fn threads_the_mpi_library_started_are_its_own() {
        let app = "/work/app";
        let (libc, mpi) = ("/lib/libc.so.6", "/lib/libmpi.so.40");
        let (pmix, event) = ("/lib/libpmix.so.2", "/lib/libevent_core-2.1.so.7");
        let (gomp, pal) = ("/lib/libgomp.so.1", "/lib/libopen-pal.so.40");
        let mut cs = vec![
            // main → MPI_Init → … → pmix_rte_init → event_init → malloc
            context(
                vec![
                    frame("event_init", event),
                    frame("pmix_rte_init", pmix),
                    frame("PMPI_Init", mpi),
                    frame("main", app),
                    frame("__libc_start_main", libc),
                    frame("_start", app),
                ],
                100,
            ),
            // PMIx's progress thread.
            context(
                vec![
                    frame("pmix_hash_store", pmix),
                    frame("event_base_loop", event),
                    frame("progress_engine", pmix),
                    frame("start_thread", libc),
                    frame("clone3", libc),
                ],
                40,
            ),
            // A thread of the program's.
            context(
                vec![
                    frame("strdup", libc),
                    frame("worker", app),
                    frame("start_thread", libc),
                    frame("clone3", libc),
                ],
                7,
            ),
            // libgomp's pool thread, between two of the program's frames
            // elsewhere: libgomp never runs inside an MPI call here.
            context(
                vec![
                    frame("gomp_malloc", gomp),
                    frame("gomp_thread_start", gomp),
                    frame("start_thread", libc),
                    frame("clone3", libc),
                ],
                5,
            ),
            // A glibc helper thread: libc runs in the program's contexts too.
            context(
                vec![
                    frame("helper", libc),
                    frame("start_thread", libc),
                    frame("clone3", libc),
                ],
                3,
            ),
            // A library thread whose start routine is not the library's.
            context(
                vec![
                    frame("opal_malloc", pal),
                    frame("event_base_loop", event),
                    frame("thread_main", gomp),
                    frame("start_thread", libc),
                ],
                2,
            ),
        ];
        classify(&mut cs, app);
        let got: Vec<Option<&str>> = cs.iter().map(|c| c.inside_mpi.as_deref()).collect();
        assert_eq!(
            got,
            [
                Some("MPI_Init"),
                Some("thread of libpmix.so.2"),
                None,
                None,
                None,
                Some("thread of libevent_core-2.1.so.7"),
            ]
        );
        // Without any context inside an MPI call, no module is the library's.
        let mut threads = cs[1..].to_vec();
        classify(&mut threads, app);
        assert!(threads.iter().all(|c| c.inside_mpi.is_none()));
    }

    #[test]
    fn mpi_own_sums_a_measure_of_the_contexts_inside_mpi_by_routine() {
        let ctx = |inside: Option<&str>, leaked: u64| Context {
            bytes: leaked.max(1),
            leaked_bytes: leaked,
            inside_mpi: inside.map(String::from),
            ..Context::of_stack("malloc", Vec::new())
        };
        let list = [
            ctx(Some("MPI_Init"), 100),
            ctx(Some("MPI_Isend"), 300),
            ctx(Some("MPI_Init"), 250),
            ctx(Some("MPI_Init"), 0),
            ctx(None, 1000),
        ];
        assert_eq!(
            MpiOwn::of(&list),
            MpiOwn {
                contexts: 3,
                total: 650,
                routines: vec![("MPI_Init".into(), 350), ("MPI_Isend".into(), 300)],
            }
        );
        assert_eq!(MpiOwn::of(&list[4..]), MpiOwn::default());
        // By calls: every context inside MPI made some.
        assert_eq!(
            MpiOwn::by(&list, SortKey::Count),
            MpiOwn {
                contexts: 4,
                total: 4,
                routines: vec![("MPI_Init".into(), 3), ("MPI_Isend".into(), 1)],
            }
        );
    }
}
