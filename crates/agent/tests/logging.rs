//! The agent's log in a process that runs it in-process (`ioshare bench`): this test binary
//! re-executed as the child, which installs the log with `init_in_process` (twice: the second call
//! keeps the first) and logs one warning and one info line; its stderr is read back.

use std::process::Command;

const CHILD_ENV: &str = "IOSHARE_LOGGING_CHILD";

/// The child, when [`stderr_of_child`] starts it; does nothing in a normal run.
#[test]
fn child_logs() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    ioshare_agent::report::logging::init_in_process().unwrap();
    ioshare_agent::report::logging::init_in_process().unwrap();
    tracing::warn!(rule = 2, "rule 2 loses cgroups");
    tracing::info!("weight set");
}

/// The child's stderr with `RUST_LOG` set to `rust_log` (unset: `None`).
fn stderr_of_child(rust_log: Option<&str>) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_logs", "--nocapture", "--test-threads=1"]).env(CHILD_ENV, "1");
    match rust_log {
        Some(v) => cmd.env(ioshare_agent::report::logging::LOG_ENV, v),
        None => cmd.env_remove(ioshare_agent::report::logging::LOG_ENV),
    };
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn in_process_users_get_the_agents_warnings_and_the_environments_filter() {
    let err = stderr_of_child(None);
    assert!(err.contains(" WARN rule 2 loses cgroups rule=2"), "{err}");
    assert!(!err.contains("weight set"), "info is below the in-process default: {err}");
    let err = stderr_of_child(Some("info"));
    assert!(err.contains("WARN rule 2 loses cgroups") && err.contains(" INFO weight set"), "{err}");
}
