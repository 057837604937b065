//! ioshare-testkit: what ioshare's tests share across crates, and nothing else.
//!
//! Design: test support only. Every crate that uses it lists it under `[dev-dependencies]`, never
//! under `[dependencies]`, so none of this reaches the `ioshare` binary or a library's API: it may
//! `expect` on a missing tool and print to stderr, as a test helper should. It depends on the library
//! crates it builds fixtures for (not the other way round), so a library's own unit tests cannot use
//! it; its integration tests and every downstream crate's tests can. Helpers one test crate alone
//! needs stay in that crate's `tests/common`.
//!
//! ```text
//! KillOnDrop(child)  .alive() .terminate()   // a test's child process, killed and reaped on drop
//! skip_unless_root(test) -> bool             // not root: prints why and skips
//! skip_unless_lab(test) -> bool              // the cgroup-v2 lab (scripts/lab) cannot run here: skip
//! lab_script() -> PathBuf                    // scripts/lab
//! run_tests_in_lab(test, filter, lab_args) -> Option<LabRun>; in_lab(); IN_LAB_ENV
//!                                            // a test binary's own tests run again in the lab guest
//! v1_host() -> Capabilities                  // a hybrid cgroup v1 host as root, written out
//! fuzz::{config, cases, text, lossy_text, number, token, mutated, lines, is_clear, EDGE_*}
//!                                            // the parsers' fuzz targets: cases, inputs, property
//! ```

mod child;
mod fixtures;
pub mod fuzz;
mod lab;
mod root;

pub use child::KillOnDrop;
pub use fixtures::v1_host;
pub use lab::{in_lab, lab_script, run_tests_in_lab, skip_unless_lab, LabRun, IN_LAB_ENV};
pub use root::skip_unless_root;
