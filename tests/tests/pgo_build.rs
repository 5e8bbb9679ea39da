//! The library the suite tests is the one `scripts/build.sh` ships: built
//! with profile-guided optimisation by `scripts/pgo.sh` (unless the build
//! was told not to with `WMHCCT_PGO=0`), and not replaced since by a plain
//! `cargo build` of changed sources.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use wmhcct_e2e::{lib, root};

/// `target/pgo/use/<host>/release/libwmhcct.so`, scripts/pgo.sh's build.
fn profile_guided_build() -> Option<PathBuf> {
    let dir = root().join("target/pgo/use");
    fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("release/libwmhcct.so"))
        .find(|p| p.is_file())
}

#[test]
fn the_tested_library_is_the_profile_guided_build() {
    if std::env::var_os("WMHCCT_LIB").is_some_and(|v| !v.is_empty()) {
        eprintln!("WMHCCT_LIB is set: the suite tests that library, not this build's");
        return;
    }
    let status_file = root().join("target/pgo/status");
    let status = fs::read_to_string(&status_file).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (scripts/build.sh writes it through scripts/pgo.sh)",
            status_file.display()
        )
    });
    let status = status.trim();
    if status == "plain: WMHCCT_PGO=0" {
        eprintln!("built with WMHCCT_PGO=0: no profile-guided build to compare");
        return;
    }
    assert!(
        status.starts_with("profile-guided: "),
        "libwmhcct.so was built without profile-guided optimisation ({status}); \
         scripts/setup.sh adds the rustup component llvm-tools it needs"
    );
    let built = profile_guided_build().expect("scripts/pgo.sh's library in target/pgo/use");
    let tested = lib();
    assert!(
        fs::read(&tested).unwrap() == fs::read(&built).unwrap(),
        "{} is not scripts/pgo.sh's build {}: cargo rebuilt it since; run scripts/build.sh",
        tested.display(),
        built.display()
    );
    // Cargo's plain build, kept beside it for benches/run.py, is another file.
    let plain = root().join("target/pgo/plain/libwmhcct.so");
    assert!(
        fs::read(&plain).unwrap() != fs::read(&built).unwrap(),
        "{} is the profile-guided build too",
        plain.display()
    );
}

#[test]
fn a_wrong_wmhcct_pgo_names_the_variable_and_the_accepted_values() {
    let out = Command::new("bash")
        .arg(root().join("scripts/pgo.sh"))
        .env("WMHCCT_PGO", "yes")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        "pgo.sh: WMHCCT_PGO=\"yes\" is not valid: expected 0 (skip) or 1 (default)"
    );
    assert!(out.stdout.is_empty());
}
