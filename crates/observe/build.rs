//! Compiles the BPF programs (src/bpf/observe.bpf.c) with clang and generates their libbpf-rs
//! skeleton. The kernel types come from the hand-written CO-RE header src/bpf/kernel_types.h, so the
//! build needs clang but neither bpftool nor the build machine's kernel BTF.

use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SOURCE: &str = "src/bpf/observe.bpf.c";
/// `-mcpu=v3`: the BPF ISA with atomic fetch-and-add (the programs take series indices with it);
/// kernels from 5.12 on accept it.
const CLANG_ARGS: [&str; 4] = ["-Wall", "-Werror", "-mcpu=v3", "-Isrc/bpf"];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("observe.skel.rs");
    let result = SkeletonBuilder::new().source(SOURCE).clang_args(CLANG_ARGS).build_and_generate(&out);
    if let Err(e) = result {
        panic!(
            "building the BPF programs failed: {e:#}\n\
             (they need clang; on Debian run ./scripts/setup.sh or `apt-get install clang libelf-dev zlib1g-dev pkg-config`)"
        );
    }
    for file in [SOURCE, "src/bpf/observe.h", "src/bpf/kernel_types.h"] {
        println!("cargo:rerun-if-changed={file}");
    }
}
