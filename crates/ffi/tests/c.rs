//! The C tests (`tests/c/*.c`) compiled against the library cargo just built and run: `api.c`
//! against the shared library (as a service links it), `bad_args.c` against the static library
//! under AddressSanitizer and UndefinedBehaviorSanitizer.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>/deps`, where cargo builds `libioshare.so` and `libioshare.a` for the tests
/// (the test runs from there too).
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
    let dir = lib_dir();
    // The library's soname is libioshare.so.0, as installed; here it is cargo's libioshare.so.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let soname = tmp.join("libioshare.so.0");
    let _ = std::fs::remove_file(&soname);
    std::os::unix::fs::symlink(dir.join("libioshare.so"), &soname).expect("the soname link is made");
    let (l, rpath) = (format!("-L{}", dir.display()), format!("-Wl,-rpath,{}", tmp.display()));
    if let Some(exe) = compile("api.c", "api", &[&l, &rpath, "-lioshare", "-lpthread"]) {
        run(&exe, &[]);
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
