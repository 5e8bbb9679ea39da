//! Where the report goes.

use std::path::{Path, PathBuf};

/// Where this process's reports go: `WMHCCT_OUT` as the tracer found it
/// at start ([`destination`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    /// The report's path (`WMHCCT_OUT` made absolute, links resolved); `None`:
    /// the default names, in `dir`.
    pub out: Option<PathBuf>,
    /// Where default names and relative paths go: the working directory at
    /// start, or the directory `WMHCCT_OUT` names.
    pub dir: PathBuf,
    /// `out` is a stream (`/dev/null`, a FIFO, a terminal, a process's
    /// descriptor): the report is written into it, never replaced; the
    /// profile is made in `TMPDIR` and a spill directory goes beside the
    /// default name in `dir`.
    pub stream: bool,
    /// `out` is a null device (`/dev/null`, or any character device 1:3):
    /// it takes every process's report, the traced program's descendants'
    /// too.
    pub null: bool,
    /// `out` was one of this process's own descriptors (`/dev/stdout`):
    /// held from the start as a duplicate of its own, so the report goes
    /// where that descriptor led when the program started, even if the
    /// program closes it before it exits (coreutils close stdout at exit).
    /// `out` names the duplicate.
    pub pinned: Option<Pinned>,
    /// `dir` is a directory `WMHCCT_OUT` names with a trailing `/` that did
    /// not exist at start: made when the report is written.
    pub make_dir: bool,
}

/// A duplicate of one of this process's descriptors, and the file it
/// led to (device and inode) when it was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pinned {
    pub fd: i32,
    dev: u64,
    ino: u64,
}

/// Descriptors the tracer holds are made at or above this number, out of
/// the way of the ones a program counts on getting (the lowest free).
const PINNED_FROM: i32 = 100;

impl Destination {
    /// Whether `report` is the stream `WMHCCT_OUT` names (written into,
    /// never replaced, nothing beside it).
    pub fn is_stream(&self, report: &Path) -> bool {
        self.stream && self.out.as_deref() == Some(report)
    }

    /// Process `pid`'s report under the default name, `wmhcct-<pid>.h5` in
    /// `dir`.
    pub fn default_report(&self, pid: u32) -> PathBuf {
        self.dir.join(format!("wmhcct-{pid}.h5"))
    }

    /// Where `out` is one of this process's own descriptors
    /// (`/proc/<pid>/fd/<n>`, as `/dev/stdout` resolves), hold a duplicate
    /// of it (close-on-exec) and name that instead; the traced program
    /// itself only (a descendant does not write into streams).
    pub fn pin_own_descriptor(&mut self) {
        let Some(n) = self.out.as_deref().and_then(own_descriptor) else {
            return;
        };
        // SAFETY: fcntl on a descriptor number; a closed one fails (EBADF).
        let fd = unsafe { libc::fcntl(n, libc::F_DUPFD_CLOEXEC, PINNED_FROM) };
        if fd < 0 {
            return;
        }
        let Some((dev, ino)) = file_id(fd) else {
            // SAFETY: our own duplicate.
            unsafe { libc::close(fd) };
            return;
        };
        self.out = Some(PathBuf::from(format!(
            "/proc/{}/fd/{fd}",
            std::process::id()
        )));
        self.pinned = Some(Pinned { fd, dev, ino });
    }

    /// Whether the pinned descriptor still leads to the file it did (a
    /// program that closes every descriptor, or reuses the number, has
    /// taken it away); true when nothing is pinned.
    pub fn pinned_intact(&self) -> bool {
        self.pinned
            .is_none_or(|p| file_id(p.fd) == Some((p.dev, p.ino)))
    }
}

/// The descriptor number `p` names if it is one of this process's own
/// (`/proc/<this pid>/fd/<n>`, or a thread's `/proc/<pid>/task/<tid>/fd/<n>`).
fn own_descriptor(p: &Path) -> Option<i32> {
    wmhcct_format::process_descriptor(p)
        .filter(|&(pid, _)| pid == std::process::id())
        .map(|(_, n)| n)
}

/// The device and inode descriptor `fd` leads to.
fn file_id(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: fstat fills a local stat; a closed descriptor fails.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some((st.st_dev, st.st_ino))
    }
}

/// Resolve `WMHCCT_OUT` (`out`, relative to `cwd`) at start; the message
/// for a path no report may go to (a block device, a socket), in which case
/// the default is used. A directory (existing, or named with a trailing
/// `/`) takes the reports under their default names.
pub fn destination(out: Option<&Path>, cwd: &Path) -> (Destination, Option<String>) {
    let mut d = Destination {
        out: None,
        dir: cwd.to_path_buf(),
        stream: false,
        null: false,
        pinned: None,
        make_dir: false,
    };
    let Some(o) = out else {
        return (d, None);
    };
    let abs = cwd.join(o);
    let as_dir = o.as_os_str().as_encoded_bytes().ends_with(b"/");
    match wmhcct_format::resolve(&abs) {
        Ok(wmhcct_format::Target::Directory(dir)) => d.dir = dir,
        Ok(wmhcct_format::Target::File(p)) if as_dir => {
            d.dir = p;
            d.make_dir = true;
        }
        Ok(wmhcct_format::Target::File(p)) => d.out = Some(p),
        Ok(wmhcct_format::Target::Stream(p)) => {
            d.null = is_null_device(&p);
            d.out = Some(p);
            d.stream = true;
        }
        Err(e) => {
            let msg = format!(
                "WMHCCT_OUT={:?} {e}: expected a file path, a directory, or a character \
                 device or FIFO to write into; using the default",
                o.as_os_str()
            );
            return (d, Some(msg));
        }
    }
    (d, None)
}

/// The default report name of a launch inside Slurm job `job`, in `dir`:
/// `wmhcct-<job>.h5`, or, where an earlier launch of the job took that
/// name (its report or its spill directory is there: a second `srun` or
/// `mpirun` in the batch script), the first free of `wmhcct-<job>-2.h5`,
/// `wmhcct-<job>-3.h5`, …
pub fn slurm_report_name(dir: &Path, job: &str) -> PathBuf {
    let taken = |name: &str| {
        dir.join(name).symlink_metadata().is_ok()
            || dir.join(format!("{name}.spill")).symlink_metadata().is_ok()
    };
    let first = format!("wmhcct-{job}.h5");
    if !taken(&first) {
        return PathBuf::from(first);
    }
    (2..10_000)
        .map(|n| format!("wmhcct-{job}-{n}.h5"))
        .find(|name| !taken(name))
        .map_or_else(|| PathBuf::from(first), PathBuf::from)
}

/// The report path of process `pid`.
///
/// `WMHCCT_OUT` names the report of the traced program itself. A forked
/// child, or a program started by a traced process (fork+exec, `system()`),
/// inserts its pid before the extension, so it never overwrites the parent's
/// report. A null device takes every process's report. Another stream (a
/// FIFO, a terminal, `/dev/stdout`) is the traced program's alone: a
/// descendant writes `wmhcct-<pid>.h5` in its working directory, as without
/// `WMHCCT_OUT`. (It used to write into the stream too: a FIFO's reader got
/// whichever process ended first, the next writer then waited for a reader
/// that never came, and under `WMHCCT_OUT=/dev/stdout` a child whose
/// stdout the program had redirected into a file appended its report to
/// that file.) Without `WMHCCT_OUT` (or with a directory)
/// every process writes `wmhcct-<pid>.h5` in the destination's directory.
pub fn report_path(dest: &Destination, pid: u32, descendant: bool) -> PathBuf {
    let p = match dest.out.as_deref() {
        Some(o) if descendant && !dest.stream => {
            let (before, after) = around_pid(o);
            o.with_file_name(format!("{before}{pid}{after}"))
        }
        Some(o) if !descendant || dest.null => o.to_path_buf(),
        _ => return dest.default_report(pid),
    };
    dest.dir.join(p)
}

/// Whether `p` is a null device (character device 1:3, as `/dev/null`).
fn is_null_device(p: &Path) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    std::fs::metadata(p).is_ok_and(|m| {
        m.file_type().is_char_device() && libc::major(m.rdev()) == 1 && libc::minor(m.rdev()) == 3
    })
}

/// A descendant's report name beside `report`, around its pid: the
/// report's stem and a dash before, the report's extension after.
fn around_pid(report: &Path) -> (String, String) {
    let stem = report
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = report
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    (format!("{stem}-"), ext)
}

/// The name of descendants' reports beside `report`, with `<pid>` for the
/// pid (`run-<pid>.h5`), for messages.
pub fn descendant_report_pattern(report: &Path) -> String {
    let (before, after) = around_pid(report);
    format!("{before}<pid>{after}")
}

/// The pid in `name`, if it is the report name a descendant of the process
/// whose report is `report` would choose (`report_path` with `descendant`).
fn descendant_pid(report: &Path, name: &str) -> Option<u64> {
    let (before, after) = around_pid(report);
    name.strip_prefix(&before)
        .and_then(|r| r.strip_suffix(&after))
        .filter(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        .map(|pid| pid.parse().unwrap_or(u64::MAX))
}

/// When the process whose report is counted started, to tell its
/// descendants' reports from those of an earlier run.
#[derive(Clone, Copy, Debug)]
pub struct Since {
    /// The tracer's start in this process (exact): a report written since
    /// is one of this run's.
    pub tracer: std::time::SystemTime,
    /// The process's start ([`process_start`]: its fork, which an `exec`
    /// keeps, rounded down to a clock tick), at or before `tracer`.
    pub process: std::time::SystemTime,
    /// This process's pid.
    pub pid: u32,
}

impl Since {
    /// Is a descendant's report written at `written`, by `pid`, one of
    /// this run's? Between the process's start and the tracer's, it is
    /// either from a program a shell ran before it `exec`ed the traced one
    /// (a child of this process: a higher pid) or, within the clock tick
    /// the start was rounded down by, from an earlier run's process (a
    /// lower pid, pids being handed out in increasing order).
    fn counts(&self, written: std::time::SystemTime, pid: u64) -> bool {
        written >= self.tracer || (written >= self.process && pid > u64::from(self.pid))
    }
}

/// How many reports of descendants (`descendant_pid`) of the process
/// whose report is `report` lie beside it, written since it started
/// ([`Since`]).
pub fn descendant_reports_since(report: &Path, since: Since) -> usize {
    let Some(dir) = report.parent() else {
        return 0;
    };
    // Not `read_dir`: this runs in the SIGTERM handler too (`dir_entries`).
    crate::dir_entries::names(dir)
        .into_iter()
        .filter_map(|name| {
            let pid = name.to_str().and_then(|n| descendant_pid(report, n))?;
            let written = std::fs::symlink_metadata(dir.join(&name))
                .and_then(|m| m.modified())
                .ok()?;
            since.counts(written, pid).then_some(())
        })
        .count()
}

/// When this process started (its fork, which an `exec` keeps), from
/// `/proc`: a shell that runs its last command with `exec` has started the
/// programs before it, though the tracer in the exec'd image started later.
pub fn process_start() -> Option<std::time::SystemTime> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = u64::try_from(ticks).ok().filter(|&t| t > 0)?;
    let secs = boot_time(&boot)?;
    let since_boot = start_ticks(&stat)?;
    let ns = since_boot.checked_mul(1_000_000_000)? / ticks;
    Some(
        std::time::UNIX_EPOCH
            + std::time::Duration::from_secs(secs)
            + std::time::Duration::from_nanos(ns),
    )
}

/// Field `n` (numbered from 1, as in proc(5); 3 or later) of the text of
/// `/proc/<pid>/stat`: the command name, field 2, is in parentheses and
/// may hold spaces and parentheses, so fields are counted after the last
/// `)`.
pub fn stat_field(stat: &str, n: usize) -> Option<&str> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_ascii_whitespace().nth(n.checked_sub(3)?)
}

/// Field 22 of `/proc/<pid>/stat`: start time in clock ticks after boot.
fn start_ticks(stat: &str) -> Option<u64> {
    stat_field(stat, 22)?.parse().ok()
}

/// The `btime` line of `/proc/stat`: boot time in seconds since the epoch.
fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The profile written next to the report before conversion; in `TMPDIR`
/// for a stream, which has nothing beside it to write into.
pub fn profile_path(report: &Path, stream: bool) -> PathBuf {
    if stream {
        return std::env::temp_dir().join(format!("wmhcct-{}.wmprof", std::process::id()));
    }
    profile_beside(report, "", std::process::id())
}

/// The profile of process `pid` beside `report` when
/// [`profile_path`]'s name is taken: `<report>.<pid>.wmprof`.
pub fn profile_path_of(report: &Path, pid: u32) -> PathBuf {
    profile_beside(report, &format!(".{pid}"), pid)
}

/// `<report><middle>.wmprof`, or `wmhcct-<pid>.wmprof` beside it when that
/// name is too long.
fn profile_beside(report: &Path, middle: &str, pid: u32) -> PathBuf {
    let mut name = report.file_name().unwrap_or_default().to_owned();
    name.push(middle);
    name.push(".wmprof");
    wmhcct_format::named_beside(report, name, format!("wmhcct-{pid}.wmprof"))
}

/// Is our parent process traced too (we were started by a traced program)?
/// An MPI launcher or daemon with the tracer loaded is not traced
/// (`launcher::is_launcher_program`): its children are the job's ranks. A
/// command wrapper (`timeout`, `time`: `launcher::is_command_wrapper`) is
/// not traced either and stands for its own parent: the command it runs is
/// a traced program's child only if the wrapper is.
pub fn parent_is_traced() -> bool {
    // SAFETY: getppid has no preconditions.
    let mut parent = unsafe { libc::getppid() }.to_string();
    for _ in 0..16 {
        if !crate::launcher::runs_a_command_wrapper(&parent) {
            break;
        }
        let Some(up) = std::fs::read_to_string(format!("/proc/{parent}/stat"))
            .ok()
            .and_then(|stat| parent_pid(&stat))
        else {
            return false;
        };
        parent = up.to_string();
    }
    std::fs::read_to_string(format!("/proc/{parent}/maps"))
        .map(|maps| maps.contains("libwmhcct"))
        .unwrap_or(false)
        && !crate::launcher::runs_a_launcher(&parent)
        && !crate::launcher::runs_a_command_wrapper(&parent)
}

/// Field 4 of `/proc/<pid>/stat`, the parent's pid.
fn parent_pid(stat: &str) -> Option<u32> {
    stat_field(stat, 4)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(out: Option<&str>, cwd: &str) -> Destination {
        let (d, warning) = destination(out.map(Path::new), Path::new(cwd));
        assert_eq!(warning, None);
        d
    }

    #[test]
    fn names() {
        let cwd = Path::new("/w");
        let none = dest(None, "/w");
        assert_eq!(
            report_path(&none, 42, false),
            PathBuf::from("/w/wmhcct-42.h5")
        );
        assert_eq!(
            report_path(&none, 42, true),
            PathBuf::from("/w/wmhcct-42.h5")
        );
        let o = dest(Some("out/r.h5"), "/w");
        assert_eq!(report_path(&o, 42, false), PathBuf::from("/w/out/r.h5"));
        assert_eq!(report_path(&o, 42, true), PathBuf::from("/w/out/r-42.h5"));
        let rep = dest(Some("/a/rep"), "/w");
        assert_eq!(report_path(&rep, 7, true), PathBuf::from("/a/rep-7"));
        for (name, pid) in [
            ("r-42.h5", Some(42)),
            ("r-1.h5", Some(1)),
            ("r.h5", None),
            ("r-.h5", None),
            ("r-42.h5.wmprof", None),
            ("r-4x2.h5", None),
            ("rr-42.h5", None),
            ("r-42.h6", None),
            ("x-42.h5", None),
        ] {
            assert_eq!(descendant_pid(&cwd.join("out/r.h5"), name), pid, "{name}");
        }
        assert_eq!(
            descendant_report_pattern(Path::new("/a/r.h5")),
            "r-<pid>.h5"
        );
        assert_eq!(descendant_report_pattern(Path::new("/a/rep")), "rep-<pid>");
        assert_eq!(descendant_pid(Path::new("/a/rep"), "rep-7"), Some(7));
        assert_eq!(descendant_pid(Path::new("/a/rep"), "rep-7.h5"), None);
        assert_eq!(
            profile_path(Path::new("/a/r.h5"), false),
            PathBuf::from("/a/r.h5.wmprof")
        );
        let in_tmp = profile_path(Path::new("/dev/null"), true);
        assert_eq!(in_tmp.parent(), Some(std::env::temp_dir().as_path()));
    }

    #[test]
    fn destinations_of_directories_streams_and_links() {
        let base = std::env::temp_dir().join(format!("wmhcct-dest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("runs")).unwrap();
        let cwd = base.to_str().unwrap();
        // An existing directory, with or without the slash: default names in it.
        for out in ["runs", "runs/"] {
            let d = dest(Some(out), cwd);
            assert_eq!(
                (d.out.clone(), d.dir.clone()),
                (None, base.join("runs")),
                "{out}"
            );
            assert!(!d.make_dir && !d.stream);
            assert_eq!(report_path(&d, 9, false), base.join("runs/wmhcct-9.h5"));
        }
        // A directory to be: made when the report is written.
        let d = dest(Some("later/"), cwd);
        assert_eq!((d.out.clone(), d.make_dir), (None, true));
        assert_eq!(report_path(&d, 9, true), base.join("later/wmhcct-9.h5"));
        // /dev/null: a stream, every process's report goes into it.
        let d = dest(Some("/dev/null"), cwd);
        assert!(d.stream && d.null);
        assert_eq!(report_path(&d, 9, false), PathBuf::from("/dev/null"));
        assert_eq!(report_path(&d, 9, true), PathBuf::from("/dev/null"));
        assert_eq!(d.dir, base);
        // A FIFO: the traced program's; a descendant's report goes where it
        // would without WMHCCT_OUT.
        let fifo = base.join("r.fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let d = dest(Some("r.fifo"), cwd);
        assert!(d.stream && !d.null);
        assert_eq!(report_path(&d, 9, false), fifo);
        assert_eq!(report_path(&d, 9, true), base.join("wmhcct-9.h5"));
        // One of this process's descriptors: held as a duplicate, which the
        // report then names; it stays intact until its number is taken away.
        let file = std::fs::File::create(base.join("out.bin")).unwrap();
        let n = std::os::fd::AsRawFd::as_raw_fd(&file);
        let own = format!("/proc/self/fd/{n}");
        let mut d = dest(Some(&own), cwd);
        assert!(d.stream && !d.null && d.pinned.is_none());
        d.pin_own_descriptor();
        let pinned = d.pinned.unwrap();
        assert!(pinned.fd >= PINNED_FROM);
        assert_eq!(
            d.out,
            Some(PathBuf::from(format!(
                "/proc/{}/fd/{}",
                std::process::id(),
                pinned.fd
            )))
        );
        drop(file);
        assert!(
            d.pinned_intact(),
            "the program's close leaves the duplicate"
        );
        // SAFETY: the test's own duplicate.
        unsafe { libc::close(pinned.fd) };
        assert!(!d.pinned_intact());
        // A FIFO is no descriptor of ours: nothing pinned.
        let mut d = dest(Some("r.fifo"), cwd);
        d.pin_own_descriptor();
        assert!(d.pinned.is_none() && d.pinned_intact());
        // A link to a report: its target.
        std::os::unix::fs::symlink("runs/r.h5", base.join("link.h5")).unwrap();
        let d = dest(Some("link.h5"), cwd);
        assert_eq!(d.out, Some(base.join("runs/r.h5")));
        // A socket: refused, the default used, one line naming the variable.
        let _l = std::os::unix::net::UnixListener::bind(base.join("s")).unwrap();
        let (d, warning) = destination(Some(Path::new("s")), &base);
        assert_eq!(d, dest(None, cwd));
        let w = warning.unwrap();
        assert!(
            w.starts_with("WMHCCT_OUT=\"s\" is a socket: expected"),
            "{w}"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn process_start_from_proc() {
        let stat =
            "4242 (a b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(start_ticks(stat), Some(98765));
        assert_eq!(parent_pid(stat), Some(1));
        assert_eq!(parent_pid("4242 (x) S"), None);
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        // SAFETY: getppid has no preconditions.
        assert_eq!(parent_pid(&own), Some(unsafe { libc::getppid() } as u32));
        assert_eq!(start_ticks("4242 (x) S 1"), None);
        assert_eq!(start_ticks("no name"), None);
        let boot = "cpu  1 2 3\nintr 5\nbtime 1764000000\nprocesses 9\n";
        assert_eq!(boot_time(boot), Some(1_764_000_000));
        assert_eq!(boot_time("cpu 1\n"), None);
        // This process: after boot, before now, and not in the future.
        let start = process_start().expect("/proc is mounted");
        let now = std::time::SystemTime::now();
        assert!(start <= now, "{start:?} after {now:?}");
        assert!(
            now.duration_since(start).unwrap() < std::time::Duration::from_secs(24 * 3600),
            "the test process started today: {start:?}"
        );
    }

    #[test]
    fn counts_descendant_reports_written_since() {
        let dir = std::env::temp_dir().join(format!("wmhcct-out-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let report = dir.join("run.h5");
        let now = std::time::SystemTime::now();
        let secs = std::time::Duration::from_secs;
        // The process started 60 s ago as pid 100, its tracer 30 s ago
        // (a shell that ran programs, then exec'ed the traced one).
        let since = Since {
            tracer: now - secs(30),
            process: now - secs(60),
            pid: 100,
        };
        let write = |name: &str, ago: u64| {
            let f = std::fs::File::create(dir.join(name)).unwrap();
            f.set_modified(now - secs(ago)).unwrap();
        };
        for name in [
            "run.h5",
            "run-11.h5",
            "run-120.h5",
            "other-13.h5",
            "run-14.h5.wmprof",
        ] {
            write(name, 0);
        }
        assert_eq!(descendant_reports_since(&report, since), 2);
        // Written before the process started: an earlier run's.
        write("run-11.h5", 90);
        assert_eq!(descendant_reports_since(&report, since), 1);
        // Between the process's start and the tracer's: a program the shell
        // ran (a higher pid) counts, an earlier run's process (a lower pid,
        // its report written within the tick the start was rounded down by)
        // does not.
        write("run-130.h5", 45);
        write("run-99.h5", 45);
        assert_eq!(descendant_reports_since(&report, since), 2);
        assert_eq!(
            descendant_reports_since(&dir.join("nothing/run.h5"), since),
            0
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_later_launch_of_a_slurm_job_takes_the_next_free_name() {
        let dir = std::env::temp_dir().join(format!("wmhcct-slurm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let name = |d: &Path| slurm_report_name(d, "77").display().to_string();
        assert_eq!(name(&dir), "wmhcct-77.h5");
        // The first launch wrote its report; the next one's failed and left
        // its spill directory only.
        std::fs::File::create(dir.join("wmhcct-77.h5")).unwrap();
        assert_eq!(name(&dir), "wmhcct-77-2.h5");
        std::fs::create_dir(dir.join("wmhcct-77-2.h5.spill")).unwrap();
        assert_eq!(name(&dir), "wmhcct-77-3.h5");
        // Another job's report takes nothing of this one's.
        std::fs::File::create(dir.join("wmhcct-78.h5")).unwrap();
        assert_eq!(
            slurm_report_name(&dir, "78").display().to_string(),
            "wmhcct-78-2.h5"
        );
        assert_eq!(name(&dir.join("missing")), "wmhcct-77.h5");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
