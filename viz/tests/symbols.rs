//! Symbolisation through the binary: C++ (demangled DWARF linkage names) and
//! a system library without line information (ELF symbol table fallback).

use std::path::Path;
use std::process::Command;

use object::{Object, ObjectSymbol};
use wmhcct_format::{FrameKey, Module, Node, Profile, Tree};

/// A profile whose only context is `malloc` called from `offset` in `module`.
fn one_frame(module: &Path, offset: u64) -> Profile {
    let mut frame = Node::root();
    frame.parent = 0;
    frame.key = FrameKey::Addr { module: 0, offset };
    let mut kind = Node::root();
    kind.parent = 1;
    kind.key = FrameKey::Kind(0);
    kind.count = 1;
    kind.bytes = 8;
    let mut p = Profile::default();
    p.config.exact = true;
    p.modules.push(Module {
        path: module.to_string_lossy().into_owned(),
        ..Module::default()
    });
    p.trees.push(Tree {
        name: "alloc".into(),
        total_count: 1,
        total_bytes: 8,
        nodes: vec![Node::root(), frame, kind],
        ..Tree::default()
    });
    p
}

/// The first stack frame of the first context, via convert + report --json.
fn top_frame(dir: &Path, p: &Profile) -> serde_json::Value {
    let prof = dir.join("p.wmhcct");
    std::fs::write(&prof, wmhcct_format::encode(p).unwrap()).unwrap();
    let out = dir.join("r.h5");
    let bin = env!("CARGO_BIN_EXE_wmhcct");
    let o = Command::new(bin)
        .arg("convert")
        .arg(&prof)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(bin)
        .arg("report")
        .arg(&out)
        .arg("--json")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["contexts"][0]["stack"][0].clone()
}

fn symbol_address(path: &Path, pred: impl Fn(&str) -> bool) -> Option<u64> {
    let data = std::fs::read(path).ok()?;
    let obj = object::File::parse(&*data).ok()?;
    obj.symbols()
        .chain(obj.dynamic_symbols())
        .find(|s| s.address() != 0 && s.name().map(&pred).unwrap_or(false))
        .map(|s| s.address())
}

#[test]
fn cpp_names_are_demangled() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("w.cpp");
    std::fs::write(
        &src,
        "#include <vector>\nnamespace grid {\nstd::vector<double> *make(int n)\n{\n  return new std::vector<double>(n);\n}\n}\nint main() { delete grid::make(3); }\n",
    )
    .unwrap();
    let exe = dir.path().join("w");
    let ok = Command::new("g++")
        .args(["-g", "-O0", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("g++ unavailable: skipped");
        return;
    }
    let addr = symbol_address(&exe, |n| n.starts_with("_ZN4grid4make")).unwrap();
    let f = top_frame(dir.path(), &one_frame(&exe, addr + 1));
    assert_eq!(f["function"], "grid::make(int)");
    assert!(f["file"].as_str().unwrap().ends_with("w.cpp"), "{f}");
    assert_eq!(f["line"], 4);
}

#[test]
fn library_without_dwarf_uses_symbol_table() {
    let libc = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
    ]
    .into_iter()
    .map(Path::new)
    .find(|p| p.is_file());
    let Some(libc) = libc else {
        eprintln!("libc.so.6 not found: skipped");
        return;
    };
    let Some(addr) = symbol_address(libc, |n| n == "qsort") else {
        eprintln!("no qsort symbol: skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = top_frame(dir.path(), &one_frame(libc, addr + 8));
    let name = f["function"].as_str().unwrap();
    assert!(name.contains("qsort"), "{f}");
    assert_eq!(f["module"], libc.to_string_lossy().as_ref());
}
