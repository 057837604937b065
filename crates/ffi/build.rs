//! Links the shared library with its symbol version script (`ioshare.map`): every exported symbol is
//! versioned `IOSHARE_0`, everything else stays local.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=ioshare.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/ioshare.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libioshare.so.0");
}
