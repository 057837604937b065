//! `ioshare agent` on good and bad input: a bad configuration is one line naming file, line and key,
//! exit 1, and nothing applied; `check --json` is JSON; `status` without an agent says so.

use std::process::{Command, Output};

fn ioshare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioshare")).args(args).output().expect("the binary runs")
}

/// A whole block device of this host.
fn some_device() -> String {
    let entry = std::fs::read_dir("/sys/block").unwrap().flatten().next().expect("a block device");
    std::fs::read_to_string(entry.path().join("dev")).unwrap().trim().to_string()
}

#[test]
fn a_bad_config_is_one_line_exit_1_and_nothing_applied() {
    let dir = std::env::temp_dir().join(format!("ioshare-agent-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("agent.toml");
    let text = format!(
        "[[devices]]\npath = \"{}\"\nmodel = \"ssd_dfl\"\n[[groups]]\ncgroup = \"a\"\nweight = 20000\n",
        some_device()
    );
    std::fs::write(&config, text).unwrap();
    let state = dir.join("state");
    let out = ioshare(&["agent", "run", "--config", config.to_str().unwrap(), "--state-dir", state.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("agent.toml:6: weight: 20000 is out of range"), "{err}");
    assert!(!state.exists(), "nothing applied, not even the state directory");
}

#[test]
fn check_json_names_the_backend_and_the_caveat() {
    let out = ioshare(&["agent", "check", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["buffered_writes"].as_str().unwrap().contains("controlled"));
    assert!(v["capabilities"]["v1_mounts"].is_array());
    assert!(v.get("backend").is_some() && v.get("why").is_some());
}

#[test]
fn status_without_an_agent_says_so() {
    let out = ioshare(&["agent", "status", "--state-dir", "/nonexistent/ioshare"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("is `ioshare agent run` running"), "{err}");
}
