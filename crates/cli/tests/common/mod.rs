//! Helpers shared by the CLI tests: blkio cgroup lookup, and this build's `ioshare` in the cgroup-v2 lab
//! (`scripts/lab`, through `ioshare_testkit`). Each test binary uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Mutex;

use ioshare_testkit::lab_script;

/// Whether a blkio cgroup named `name` exists anywhere in the first levels of the hierarchy.
pub fn cgroup_exists(name: &str) -> bool {
    fn walk(dir: &Path, name: &str, depth: u32) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else { return false };
        entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .any(|e| e.file_name().to_string_lossy() == name || (depth > 0 && walk(&e.path(), name, depth - 1)))
    }
    walk(Path::new("/sys/fs/cgroup/blkio"), name, 3)
}

/// One guest at a time per test binary: two TCG guests on two shared cores would mostly measure each
/// other.
static ONE_GUEST: Mutex<()> = Mutex::new(());

/// Shell functions every guest script can call: `start_agent BACKEND [ARGS]` starts `ioshare agent
/// run --backend BACKEND` on `/tmp/agent.toml` (and ARGS) in the background (its pid in `$pid`, its
/// log in `/tmp/agent.log`), waits up to 10 s for its status file in `/tmp/state` and prints
/// `started yes` or `started no`; `start_kernel_agent` is `start_agent kernel`. `hi_lo_tenants`
/// makes `tenants/hi` and `tenants/lo` under the v2 root with `io` enabled (exit 20 if it cannot),
/// and `$HI_LO_GROUPS` is their `[[groups]]` lines for the agent's config, weights 200 and 100.
const GUEST_FUNCTIONS: &str = r#"
hi_lo_tenants() {
    t=/sys/fs/cgroup/tenants
    mkdir $t && echo +io > $t/cgroup.subtree_control && mkdir $t/hi $t/lo || exit 20
}
HI_LO_GROUPS='[[groups]]
cgroup = "tenants/hi"
weight = 200
[[groups]]
cgroup = "tenants/lo"
weight = 100'
start_agent() {
    backend=$1
    shift
    ioshare agent run --config /tmp/agent.toml --backend $backend --state-dir /tmp/state "$@" 2> /tmp/agent.log &
    pid=$!
    i=0
    while [ ! -f /tmp/state/status.json ] && [ $i -lt 200 ]; do usleep 50000; i=$((i + 1)); done
    echo "started $([ -f /tmp/state/status.json ] && echo yes || echo no)"
}
start_kernel_agent() { start_agent kernel; }
"#;

/// Runs `sh -c script` in a guest with this build's `ioshare` and `options` (the script may call
/// the [`GUEST_FUNCTIONS`]); returns the output (stderr, printed here, carries the lab's timing).
pub fn lab(options: &[&str], script: &str) -> Output {
    let _one = ONE_GUEST.lock().unwrap_or_else(|p| p.into_inner());
    let out = Command::new(lab_script())
        .args(["--ioshare", env!("CARGO_BIN_EXE_ioshare"), "--timeout", "300"])
        .args(options)
        .args(["--", "sh", "-c", &format!("{GUEST_FUNCTIONS}{script}")])
        .output()
        .expect("scripts/lab runs");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// The value after `key ` on the line that starts with it.
pub fn field<'a>(stdout: &'a str, key: &str) -> &'a str {
    let prefix = format!("{key} ");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no '{key}' line in:\n{stdout}"))
        .trim()
}
