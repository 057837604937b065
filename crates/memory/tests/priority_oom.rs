//! Priority OOM for real on cgroup v1 (root only): the source's tree — an ancestor with a limit,
//! children of different priorities and sizes — driven into OOM; the guard must kill in the group
//! the rule names, touch nothing else (inside or outside the ancestor), and leave the kernel's OOM
//! killer enabled again when it stops. Everything is removed on failure too (drop guards).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ioshare_host::{skip_unless_root, MemCgroup, Memcg};
use ioshare_memory::{Action, Guard, GuardedGroup, MemorySettings};

const MIB: u64 = 1 << 20;
/// Bounds every wait of the test; the kernel acts in milliseconds.
const WAIT: Duration = Duration::from_secs(20);

/// A child process killed and reaped when dropped.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
impl Proc {
    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

/// perl holding `mib` MiB of anonymous memory it wrote from user space (the size as an argument,
/// so perl does not fold and copy it), then sleeping.
fn holder(cg: &MemCgroup, mib: u64) -> Proc {
    let mut cmd = Command::new("perl");
    cmd.args(["-e", "my $x = 'a' x ($ARGV[0] << 20); sleep 120", &mib.to_string()]);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    Proc(cg.spawn(cmd).unwrap())
}

/// Waits until `cg` is charged at least `bytes`.
fn wait_usage(cg: &MemCgroup, bytes: u64) {
    let deadline = Instant::now() + WAIT;
    while cg.memcg().usage().unwrap() < bytes {
        assert!(Instant::now() < deadline, "{} never reached {bytes} bytes", cg.memcg().path().display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn settings(priority: u8) -> MemorySettings {
    MemorySettings { priority, ..MemorySettings::default() }
}

#[test]
fn the_lowest_priority_leaf_dies_and_nothing_else() {
    if skip_unless_root("the_lowest_priority_leaf_dies_and_nothing_else") {
        return;
    }
    let top = format!("ioshare-memory-test-{}", std::process::id());
    let name = |n: &str| format!("{top}/{n}");
    // Leaves are created (and removed on drop); A and A/offline come with them as their parents and
    // go with the last of their children.
    let outside = MemCgroup::create(&name("outside")).unwrap();
    let online = MemCgroup::create(&name("A/online")).unwrap();
    let etl = MemCgroup::create(&name("A/offline/etl")).unwrap();
    let batch = MemCgroup::create(&name("A/offline/batch")).unwrap();
    let offline = Memcg::at(etl.memcg().path().parent().unwrap()).unwrap();
    let a = Memcg::at(offline.path().parent().unwrap()).unwrap();

    const LIMIT: u64 = 100 * MIB;
    let mut a_settings = settings(0);
    a_settings.limit = Some(LIMIT);
    let guarded = [
        (a.clone(), a_settings),
        (online.memcg().clone(), settings(10)),
        (offline.clone(), settings(2)),
        (etl.memcg().clone(), settings(5)),
        (batch.memcg().clone(), settings(1)),
    ];
    let groups = guarded.iter().map(|(memcg, s)| GuardedGroup { memcg: memcg.clone(), settings: *s }).collect();
    let mut guard = Guard::start(groups, false).unwrap();
    assert!(a.oom_control().unwrap().oom_kill_disable, "the guard decides OOMs in A");

    let mut p_out = holder(&outside, 16);
    let mut p_online = holder(&online, 30);
    let mut p_etl = holder(&etl, 12);
    let mut p_batch = holder(&batch, 20);
    wait_usage(&outside, 16 * MIB);
    wait_usage(&online, 30 * MIB);
    wait_usage(&etl, 12 * MIB);
    wait_usage(&batch, 20 * MIB);
    // A hog in the important branch that overshoots A's limit by less than batch holds: the rule
    // says batch (offline at 2 < online at 10; then batch at 1 < etl at 5), and killing it suffices.
    let used = a.usage().unwrap();
    let hog_mib = (LIMIT - used) / MIB + 10;
    let mut p_hog = holder(&online, hog_mib);

    let deadline = Instant::now() + WAIT;
    let mut actions = Vec::new();
    while p_batch.alive() && Instant::now() < deadline {
        actions.extend(guard.poll(Duration::from_millis(200)).unwrap());
    }
    eprintln!("guard actions: {actions:?}");
    assert!(!p_batch.alive(), "batch (lowest priority in the lowest-priority branch) was not killed");
    let victims: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Killed { victim, .. } => Some(victim.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(victims, [batch.memcg().path().to_path_buf()], "exactly one kill, in batch");
    // The hog got its memory once batch's was freed; nobody else was touched, inside A or outside.
    wait_usage(&online, (30 + hog_mib) * MIB);
    assert!(p_hog.alive() && p_online.alive() && p_etl.alive() && p_out.alive());
    let state = a.oom_control().unwrap();
    assert!(!state.under_oom && state.oom_kill == 0, "the kernel killed nothing: {state:?}");
    assert_eq!(guard.kills, 1);

    drop(guard);
    for (memcg, _) in &guarded {
        let c = memcg.oom_control().unwrap();
        assert!(!c.oom_kill_disable, "{}: oom_kill_disable left set", memcg.path().display());
    }
    assert!(a.limit().unwrap() > LIMIT, "A's limit is restored to what it was (none)");
}
