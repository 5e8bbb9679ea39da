//! The HDF5 report opens with the standard tools: h5py and h5dump.

use wmhcct_e2e::*;

#[test]
fn report_opens_with_h5py_and_h5dump() {
    let w = WorkDir::new("hdf5");
    let exe = compile("pattern.c", &w.path, Opt::Debug, &[]);
    let h5 = w.join("pattern.h5");
    let out = run_traced(&exe, &[] as &[&str], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());

    // h5py (never preloaded with the tracer here): walk every object.
    let script = format!(
        "import h5py\n\
         f = h5py.File({:?}, 'r')\n\
         names = []\n\
         f.visititems(lambda n, o: names.append(n))\n\
         n = sum(1 for n in names if isinstance(f[n], h5py.Dataset))\n\
         assert n > 0, names\n\
         for n in names:\n\
         \x20   o = f[n]\n\
         \x20   if isinstance(o, h5py.Dataset): o[()]\n\
         print('objects', len(names), 'datasets', n)\n",
        h5.to_str().unwrap()
    );
    let py = run_plain(PYTHON, &["-c", &script], &w.path);
    assert_eq!(py.code, 0, "h5py cannot read the report: {}", py.describe());
    assert!(py.stdout.starts_with("objects "), "{}", py.stdout);

    let dump = run_plain("h5dump", &["-H", h5.to_str().unwrap()], &w.path);
    assert_eq!(dump.code, 0, "h5dump -H: {}", dump.describe());
    assert!(dump.stdout.contains("HDF5"), "{}", dump.stdout);
    assert!(dump.stdout.contains("DATASET"), "{}", dump.stdout);
}

/// A report's large tables are stored compressed (shuffle + deflate, which
/// every HDF5 reader undoes by itself) and each name once (layout 2): h5py
/// reads every dataset, h5dump dumps the tree's nodes, the nodes take a
/// fraction of their size, and so does the file.
#[test]
fn large_tables_are_compressed_and_read_back() {
    let w = WorkDir::new("hdf5-compressed");
    // 10^5 contexts visited once each, then as many events again.
    let exe = compile("rel_contexts.c", &w.path, Opt::Release, &[]);
    let h5 = w.join("contexts.h5");
    let out = run_traced(&exe, &["400000"], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    let script = format!(
        "import h5py, os\n\
         f = h5py.File({path:?}, 'r')\n\
         nodes = f['trees/alloc/nodes']\n\
         assert nodes.compression == 'gzip' and nodes.shuffle, (nodes.compression, nodes.shuffle)\n\
         assert len(nodes) > 10000, len(nodes)\n\
         sizes = []\n\
         def visit(n, o):\n\
         \x20   if isinstance(o, h5py.Dataset):\n\
         \x20       o[()]\n\
         \x20       sizes.append(o.size * o.dtype.itemsize)\n\
         f.visititems(visit)\n\
         strings = f['trees/alloc/strings']\n\
         assert len(strings) * 100 < len(nodes), (len(strings), len(nodes))\n\
         assert os.path.getsize({path:?}) * 4 < sum(sizes), (os.path.getsize({path:?}), sum(sizes))\n\
         stored, size = nodes.id.get_storage_size(), nodes.size * nodes.dtype.itemsize\n\
         assert stored * 4 < size, (stored, size)\n\
         print('nodes', size, 'stored', stored, 'file', os.path.getsize({path:?}))\n",
        path = h5.to_str().unwrap()
    );
    let py = run_plain(PYTHON, &["-c", &script], &w.path);
    assert_eq!(py.code, 0, "{}", py.describe());
    let dump = run_plain(
        "h5dump",
        &["-d", "/trees/alloc/nodes", "-c", "4", h5.to_str().unwrap()],
        &w.path,
    );
    assert_eq!(dump.code, 0, "{}", dump.describe());
    // The root node: no parent.
    assert!(
        dump.stdout.contains("(0): {\n            4294967295,"),
        "{}",
        dump.stdout
    );
}

/// A profile converts to the same bytes every time: at the program's exit
/// and by `wmhcct convert` again, twice, and on one thread under a memory
/// limit. Until 2026-11-27 the tables' rows
/// were written as laid out in the converter's memory, padding included,
/// and every conversion gave another file (of another size, since the
/// padding's contents compressed differently).
#[test]
fn a_profile_converts_to_the_same_bytes_every_time() {
    use std::os::unix::fs::PermissionsExt;
    let w = WorkDir::new("hdf5-same-bytes");
    let exe = compile("pattern.c", &w.path, Opt::Release, &[]);
    let kept = w.join("kept.wmprof");
    // The converter the tracer starts: a copy of its profile is kept first.
    let keep = w.join("keep.sh");
    std::fs::write(
        &keep,
        format!(
            "#!/bin/sh\ncp \"$2\" '{}' && exec '{}' \"$@\"\n",
            kept.display(),
            bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&keep, std::fs::Permissions::from_mode(0o755)).unwrap();
    let h5 = w.join("pattern.h5");
    let out = run_traced(
        &exe,
        &[] as &[&str],
        &w.path,
        &h5,
        &[("WMHCCT_BIN", keep.to_str().unwrap())],
    );
    assert_eq!(out.code, 0, "{}", out.describe());
    let first = std::fs::read(&h5).unwrap();
    for i in 0..2 {
        let again = w.join(format!("again{i}.h5"));
        let conv = run_plain(
            bin(),
            &[
                "convert",
                kept.to_str().unwrap(),
                "-o",
                again.to_str().unwrap(),
            ],
            &w.path,
        );
        assert_eq!(conv.code, 0, "{}", conv.describe());
        let bytes = std::fs::read(&again).unwrap();
        let differ = first.iter().zip(&bytes).filter(|(a, b)| a != b).count();
        assert!(
            bytes == first,
            "conversion {i}: {} bytes against {}, {differ} of them differ",
            bytes.len(),
            first.len()
        );
    }
    // Under a memory limit the converter runs on one thread
    // (viz/src/workers.rs): the same file.
    let limited = w.join("limited.h5");
    let conv = run_plain(
        "sh",
        &[
            "-c",
            "ulimit -v 4000000 && exec \"$0\" convert \"$1\" -o \"$2\"",
            bin().to_str().unwrap(),
            kept.to_str().unwrap(),
            limited.to_str().unwrap(),
        ],
        &w.path,
    );
    assert_eq!(conv.code, 0, "{}", conv.describe());
    assert!(
        std::fs::read(&limited).unwrap() == first,
        "one thread and several give the same file"
    );
}
