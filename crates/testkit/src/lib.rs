//! ioshare-testkit: support for ioshare's tests, used only as a dev-dependency.

mod lab;

pub use lab::{in_lab, run_tests_in_lab, LabRun, IN_LAB_ENV};
