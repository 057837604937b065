//! The C tests (`tests/c/*.c`) compiled against the library cargo just built and run: `api.c`
//! against the shared library linked as `scripts/install-libioshare` links it (`link-shared`, with
//! its symbol versions, which this test checks), `bad_args.c` against the static library under
//! AddressSanitizer and UndefinedBehaviorSanitizer.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>/deps`, where cargo builds `libioshare.a` for the tests (the test runs from
/// there too).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its path");
    exe.parent().expect("tests run from target/<profile>/deps").to_path_buf()
}

/// Compiles `source` with `flags` into the test's temporary directory; `None` (with the reason
/// printed) when no C compiler is installed.
fn compile(source: &str, out: &str, flags: &[&str]) -> Option<PathBuf> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(out);
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-o"])
        .arg(&exe)
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c").join(source))
        .args(flags);
    match cc.output() {
        Err(e) => {
            println!("skipped: no C compiler (cc: {e}); install gcc");
            None
        }
        Ok(o) => {
            assert!(o.status.success(), "cc {source} failed:\n{}", String::from_utf8_lossy(&o.stderr));
            Some(exe)
        }
    }
}

/// Runs a compiled test and fails with its output unless it exits 0.
fn run(exe: &Path, envs: &[(&str, &str)]) {
    let out = Command::new(exe).envs(envs.iter().copied()).output().expect("the compiled test runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    print!("{text}");
    assert!(out.status.success(), "{} failed ({}):\n{text}", exe.display(), out.status);
}

#[test]
fn api_through_the_shared_library() {
    // Linked under its soname, as installed, with a development link beside it.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("shared-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("the test's directory is made");
    let so = tmp.join("libioshare.so.0");
    let linked = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("link-shared"))
        .arg(lib_dir().join("libioshare.a"))
        .arg(&so)
        .output();
    match linked {
        Err(e) => {
            println!("skipped: link-shared cannot run ({e}); install gcc");
            return;
        }
        Ok(o) => assert!(o.status.success(), "link-shared failed:\n{}", String::from_utf8_lossy(&o.stderr)),
    }
    std::os::unix::fs::symlink("libioshare.so.0", tmp.join("libioshare.so")).expect("the link is made");
    assert_symbols_versioned(&so);
    let (l, rpath) = (format!("-L{}", tmp.display()), format!("-Wl,-rpath,{}", tmp.display()));
    if let Some(exe) = compile("api.c", "api", &[&l, &rpath, "-lioshare", "-lpthread"]) {
        run(&exe, &[]);
    }
    std::fs::remove_dir_all(&tmp).expect("the test's directory is removed");
}

/// Every symbol `so` exports is an `ioshare_` entry point of version `IOSHARE_0` (`readelf
/// --dyn-syms`), and the header's entry points are all there.
fn assert_symbols_versioned(so: &Path) {
    let out = Command::new("readelf").args(["--dyn-syms", "-W"]).arg(so).output().expect("readelf runs (binutils)");
    let table = String::from_utf8_lossy(&out.stdout);
    // Defined symbols: a section index, neither UND nor ABS (the version's own symbol); the name is
    // the last column, `name@@VERSION`.
    let exported: Vec<&str> = table
        .lines()
        .filter(|l| l.contains(" GLOBAL ") && !l.contains(" UND ") && !l.contains(" ABS "))
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert!(!exported.is_empty(), "no symbol exported:\n{table}");
    for name in &exported {
        assert!(
            name.starts_with("ioshare_") && name.ends_with("@@IOSHARE_0"),
            "exported unversioned or foreign: {name}"
        );
    }
    // Declarations start a line with their return type: `int32_t ioshare_new(`, `const char *ioshare_version(`.
    let header = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/ioshare.h")).unwrap();
    let declared: Vec<String> = header
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_lowercase()))
        .filter_map(|l| l.split_once('(').map(|(head, _)| head))
        .filter_map(|head| head.rsplit([' ', '*']).next())
        .filter(|name| name.starts_with("ioshare_"))
        .map(str::to_string)
        .collect();
    assert!(declared.len() >= 10, "the header's entry points: {declared:?}");
    for name in &declared {
        assert!(exported.contains(&format!("{name}@@IOSHARE_0").as_str()), "{name} is in the header, not exported");
    }
}

#[test]
fn bad_arguments_under_address_and_undefined_behaviour_sanitizers() {
    let lib = lib_dir().join("libioshare.a");
    let lib = lib.to_str().expect("a UTF-8 target path");
    let flags = [
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
        lib,
        "-lpthread",
        "-ldl",
        "-lm",
    ];
    if let Some(exe) = compile("bad_args.c", "bad_args_asan", &flags) {
        // Leak checking needs ptrace, which containers often deny; the sanitizers' other checks stay.
        run(&exe, &[("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0"), ("UBSAN_OPTIONS", "print_stacktrace=1")]);
    }
}
