//! Compiles the BPF programs (src/bpf/observe.bpf.c, the block-layer observer, and
//! src/bpf/iocost.bpf.c, the kernel IOCost reader) with clang and generates their libbpf-rs skeletons.
//! The kernel types come from the hand-written CO-RE header src/bpf/kernel_types.h, so the build needs
//! clang but neither bpftool nor the build machine's kernel BTF.

use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

/// Each program source and the skeleton it becomes in OUT_DIR.
const PROGRAMS: [(&str, &str); 2] =
    [("src/bpf/observe.bpf.c", "observe.skel.rs"), ("src/bpf/iocost.bpf.c", "iocost.skel.rs")];
/// `-mcpu=v3`: the BPF ISA with atomic fetch-and-add (the programs take series indices with it);
/// kernels from 5.12 on accept it.
const CLANG_ARGS: [&str; 4] = ["-Wall", "-Werror", "-mcpu=v3", "-Isrc/bpf"];

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (source, skeleton) in PROGRAMS {
        let result =
            SkeletonBuilder::new().source(source).clang_args(CLANG_ARGS).build_and_generate(out_dir.join(skeleton));
        if let Err(e) = result {
            panic!(
                "building the BPF programs of {source} failed: {e:#}\n\
                 (they need clang; on Debian run ./scripts/setup.sh or `apt-get install clang libelf-dev zlib1g-dev pkg-config`)"
            );
        }
        println!("cargo:rerun-if-changed={source}");
    }
    for header in ["src/bpf/observe.h", "src/bpf/iocost.h", "src/bpf/kernel_types.h"] {
        println!("cargo:rerun-if-changed={header}");
    }
}
