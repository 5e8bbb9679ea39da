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
