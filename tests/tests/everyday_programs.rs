//! Everyday programs of a Debian system, each run through `bash -c` without
//! the tracer and under it in the default (`second`) and `full` unwind
//! modes: Python (threads, `multiprocessing`, `subprocess`, a SIGTERM to
//! itself), Perl, GNU sort's threads, gcc and g++ building and running a
//! program that throws, git, tar with gzip, multi-threaded xz, find | xargs,
//! awk, a deep bash recursion, exit codes, a compiler's stderr read through
//! a pipe, make, clang, gfortran, C++ and Perl threads, a fork with a pipe,
//! a MemoryError under `ulimit -v`, deep Python recursion, sqlite, timeout
//! and a signal trap. Standard output, exit code
//! and the program's own stderr must be identical; the tracer may add only
//! its closing line naming the report, and every process started (bash
//! and what it runs) leaves a report that `wmhcct report` reads.

use std::path::Path;

use wmhcct_e2e::*;

/// The modes each command runs under, besides natively.
const MODES: [&str; 2] = ["second", "full"];

/// Whether the traced process's stderr is still open when it exits.
#[derive(Clone, Copy, PartialEq)]
enum Stderr {
    /// The tracer prints its closing line.
    Open,
    /// The program closes fd 2 before it exits (mawk, Debian's awk, does):
    /// no line.
    ClosedAtExit,
}

fn same_output_traced(name: &str, script: &str, stderr: Stderr) {
    let w = WorkDir::new(&format!("everyday-{name}"));
    let native_dir = w.join("native");
    std::fs::create_dir(&native_dir).unwrap();
    let plain = run_plain("/bin/bash", &["-c", script], &native_dir);
    // Every command prints to stdout when its programs are there: a missing
    // one would make both runs fail alike and the comparison empty.
    assert!(
        !plain.stdout.is_empty() && !plain.stderr.contains("not found"),
        "the native run does its work (scripts/setup.sh installs the programs): {}",
        plain.describe()
    );
    for mode in MODES {
        let cwd = w.join(format!("cwd-{mode}"));
        let reports = w.join(format!("reports-{mode}"));
        std::fs::create_dir(&cwd).unwrap();
        std::fs::create_dir(&reports).unwrap();
        let h5 = reports.join("run.h5");
        let traced = run_traced(
            "/bin/bash",
            &["-c", script],
            &cwd,
            &h5,
            &[("WMHCCT_UNWIND", mode)],
        );
        let what = format!("[{mode}] bash -c {script:?}");
        assert_eq!(
            traced.code,
            plain.code,
            "{what}: exit code; traced: {}",
            traced.describe()
        );
        assert_eq!(traced.stdout, plain.stdout, "{what}: stdout");
        assert_eq!(
            without_closing_line(&traced.stderr, &h5),
            plain.stderr,
            "{what}: the program's own stderr"
        );
        // One closing line, the shell's: the programs it started wrote
        // their reports silently, and it counts them.
        let kids = check_reports(&reports, &h5, &what);
        let closing = match kids {
            0 => format!("wmhcct: report written to {}", h5.display()),
            1 => format!(
                "wmhcct: report written to {}; 1 process it started wrote its own beside it as run-<pid>.h5",
                h5.display()
            ),
            n => format!(
                "wmhcct: report written to {}; {n} processes it started wrote their own beside it as run-<pid>.h5",
                h5.display()
            ),
        };
        let expected = match stderr {
            Stderr::Open => vec![closing.as_str()],
            Stderr::ClosedAtExit => vec![],
        };
        assert_eq!(
            tracer_lines(&traced.stderr),
            expected,
            "{what}: the tracer's only line"
        );
    }
}

/// The shell's report and every started program's `run-<pid>.h5` are
/// readable reports of distinct processes; the shell allocated. Returns
/// how many the started programs wrote.
fn check_reports(dir: &Path, h5: &Path, what: &str) -> usize {
    let top = report_json(h5);
    assert!(
        total_count(&top, "malloc") > 0,
        "{what}: bash allocates: {}",
        alloc_totals(&top)
    );
    let mut pids = vec![top["pid"].clone()];
    let kids = child_reports(dir, "run");
    for kid in &kids {
        let r = report_json(kid);
        assert!(
            r["program"].is_string() && !r["totals"].is_null(),
            "{what}: {} names its program and has totals",
            kid.display()
        );
        assert!(
            !pids.contains(&r["pid"]),
            "{what}: {} is another process's report (pid {})",
            kid.display(),
            r["pid"]
        );
        pids.push(r["pid"].clone());
    }
    kids.len()
}

macro_rules! everyday {
    ($($name:ident $(($stderr:ident))?: $script:expr;)*) => {$(
        #[test]
        fn $name() {
            #[allow(unused_mut, unused_assignments)]
            let mut stderr = Stderr::Open;
            $(stderr = Stderr::$stderr;)?
            same_output_traced(stringify!($name), $script, stderr);
        }
    )*};
}

everyday! {
    python_json: "/usr/bin/python3 -c 'import json; d=[{\"a\":i,\"b\":str(i)*3} for i in range(200000)]; s=json.dumps(d); print(len(s), len(json.loads(s)))'";
    python_threads: "/usr/bin/python3 -c 'import threading; r=[]; ts=[threading.Thread(target=lambda: r.append(sum(len(str(i)) for i in range(200000)))) for _ in range(4)]; [t.start() for t in ts]; [t.join() for t in ts]; print(sorted(r))'";
    python_subprocess: "/usr/bin/python3 -c 'import subprocess; print(subprocess.run([\"echo\",\"child\"],capture_output=True).stdout)'";
    python_multiprocessing_pool: "/usr/bin/python3 -c 'import multiprocessing as m; p=m.Pool(2); print(sum(p.map(abs, range(-1000,1000)))); p.close(); p.join()'";
    python_exit_code: "/usr/bin/python3 -c 'import sys; print(\"bye\"); sys.exit(5)'";
    python_sigterm_to_itself: "/usr/bin/python3 -c 'import os; print(\"x\", flush=True); os.kill(os.getpid(), 15)'";
    perl_hash: "perl -e 'my %h; for my $i (1..300000) { $h{$i} = \"x\" x ($i % 50) } print scalar(keys %h), \"\\n\"'";
    sort_threads: "seq 1 200000 | sort -R --random-source=/dev/zero --parallel=2 -S 8M | sort -n | md5sum";
    gcc_build_and_run: "printf 'int main(){return 0;}\\n' > a.c && gcc -O2 a.c -o a && ./a && echo built";
    gxx_exception: "printf '#include <vector>\\n#include <stdexcept>\\n#include <cstdio>\\nint main(){std::vector<int> v; try { for(int i=0;i<1000;i++){v.push_back(i); if(i==999) throw std::runtime_error(\"x\");} } catch(std::exception&e){printf(\"caught %%s %%zu\\\\n\", e.what(), v.size());} return 3;}\\n' > e.cc && g++ -O2 e.cc -o e && ./e";
    git_commits: "git -c init.defaultBranch=main init -q g && cd g && for i in 1 2 3; do echo $i > f$i; git add f$i; git -c user.email=a@b -c user.name=n commit -qm c$i; done; git log --oneline | wc -l";
    tar_gzip: "tar czf t.tgz -C /usr/include linux 2>&1; tar tzf t.tgz | wc -l";
    xz_threads: "xz -T2 -3 -k -c /usr/bin/gcc-12 | xz -d | md5sum; md5sum < /usr/bin/gcc-12";
    find_xargs: "find /usr/lib -name '*.so*' | sort | head -2000 | xargs -n 200 ls -l | wc -l";
    bash_recursion: "f(){ local n=$1; [ $n -le 0 ] && echo done || f $((n-1)); }; f 500";
    awk_array(ClosedAtExit): "mawk 'BEGIN{for(i=0;i<300000;i++) a[i]=i*2; s=0; for(k in a) s+=a[k]; print s}'";
    sh_exit_code: "sh -c 'echo out; echo err >&2; exit 7'";
    // A compiler's stderr read by its caller: the last line must be gcc's.
    gcc_verbose_into_a_pipe: "gcc -v 2>&1 | tail -1";
    make_build: "printf 'all: a\\na: a.c\\n\\tgcc -O1 a.c -o a\\n' > Makefile; printf 'int main(){return 0;}\\n' > a.c; make -s 2>&1; ./a; echo $?";
    clang_build: "printf 'int main(){return 0;}\\n' > c.c && clang -O2 c.c -o c && ./c && echo clang-built";
    gfortran_allocate: "printf 'program p\\ninteger, allocatable :: a(:)\\nallocate(a(1000))\\na=1\\nprint *, sum(a)\\ndeallocate(a)\\nend program\\n' > p.f90 && gfortran p.f90 -o p && ./p";
    cxx_threads: "printf '#include <thread>\\n#include <vector>\\n#include <cstdio>\\nint main(){std::vector<std::thread> t; for(int i=0;i<8;i++) t.emplace_back([]{std::vector<int> v; for(int j=0;j<10000;j++) v.push_back(j);}); for(auto&x:t) x.join(); puts(\"joined\");}\\n' > t.cc && g++ -O2 -pthread t.cc -o t && ./t";
    perl_threads: "perl -e 'use threads; my @t = map { threads->create(sub { my $s=0; $s+=$_ for 1..100000; $s }) } 1..3; print join(\",\", map { $_->join } @t), \"\\n\"'";
    python_fork_pipe: "/usr/bin/python3 -c 'import os; r,w=os.pipe(); pid=os.fork()\nif pid==0: os.write(w,b\"hi\"); os._exit(3)\nelse: print(os.read(r,2), os.waitpid(pid,0)[1]>>8)'";
    python_memory_error_under_rlimit: "/usr/bin/python3 -c 'import resource; resource.setrlimit(resource.RLIMIT_AS,(2<<30,2<<30))\ntry: x=bytearray(4<<30)\nexcept MemoryError: print(\"MemoryError\")'";
    python_deep_recursion: "/usr/bin/python3 -c 'import sys; sys.setrecursionlimit(100000); f=lambda n: 0 if n==0 else 1+f(n-1); print(f(20000))'";
    python_sqlite: "/usr/bin/python3 -c 'import sqlite3; c=sqlite3.connect(\":memory:\"); c.execute(\"create table t(a)\"); c.executemany(\"insert into t values(?)\", [(i,) for i in range(100000)]); print(c.execute(\"select sum(a) from t\").fetchone())'";
    timeout_kills_sleep: "timeout 1 sleep 5; echo $?";
    signal_trap: "bash -c 'trap \"echo trapped\" USR1; kill -USR1 $$; echo after'";
}
