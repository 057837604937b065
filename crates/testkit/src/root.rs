//! The skip rule of root-only tests: they run for real as root and otherwise print why they did
//! nothing.

/// For root-only tests: returns `true` (skip) and prints `skipping <test>: needs root (...)` when
/// not root; returns `false` as root.
pub fn skip_unless_root(test: &str) -> bool {
    if ioshare_host::is_root() {
        return false;
    }
    eprintln!("skipping {test}: needs root (loop devices and cgroup files are root-only); run the tests as root");
    true
}
