//! The recorder under churn, on plain files standing in for cgroup files (no root needed): cgroups
//! that come and go by the thousand, and entries rewritten every period, leave a state file as large
//! as what it must restore — and a crash at any point still restores every live entry.

use std::path::{Path, PathBuf};

use ioshare_host::{DevNum, Entry, Recorder, STATE_FILE};

const DEV: DevNum = DevNum { major: 7, minor: 3 };

/// A stand-in cgroup directory with one throttle file.
fn cgroup(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("blkio.throttle.read_iops_device");
    std::fs::write(&file, "").unwrap();
    file
}

/// Distinct entries and lines of the state file in `state`.
fn state_lines(state: &Path) -> usize {
    std::fs::read_to_string(state.join(STATE_FILE)).unwrap().lines().count()
}

#[test]
fn entries_of_vanished_cgroups_are_forgotten_and_the_file_stays_small() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let roots = vec![root.path().to_path_buf()];
    let (mut rec, _) = Recorder::open(state.path(), roots.clone()).unwrap();
    let keep = cgroup(root.path(), "keep");
    let mut alive: Vec<PathBuf> = Vec::new();
    for i in 0..300 {
        // A cgroup appears and gets a limit; the oldest of 20 alive goes away.
        let file = cgroup(root.path(), &format!("c{i}"));
        rec.set(&file, Entry::Throttle(DEV), &format!("{DEV} {}", 100 + i)).unwrap();
        alive.push(file);
        if alive.len() > 20 {
            let gone = alive.remove(0);
            std::fs::remove_dir_all(gone.parent().unwrap()).unwrap();
            assert_eq!(rec.forget_vanished().unwrap(), 1);
        }
        // One entry rewritten every step (a limit moving every period).
        rec.set(&keep, Entry::Throttle(DEV), &format!("{DEV} {}", 1000 + i % 7)).unwrap();
    }
    assert_eq!(rec.changes().len(), 21, "the 20 cgroups alive and the one kept");
    assert_eq!(state_lines(state.path()), 1 + 21 + 1, "rewritten at the last removal, then one update");
    // Then a limit moving every period for a long time: the file is rewritten whole once the
    // superseded records outnumber 2 × entries + 1024, so it never holds many more.
    for i in 0..5000 {
        rec.set(&keep, Entry::Throttle(DEV), &format!("{DEV} {}", 2000 + i)).unwrap();
        if i % 50 == 0 {
            let lines = state_lines(state.path());
            assert!(lines <= 1 + 21 + 2 * 21 + 1024 + 1, "{lines} lines in the state file after {i} updates");
        }
    }

    // A crash now: the next open restores every live entry from the rewritten file.
    std::mem::forget(rec);
    let (rec, recovered) = Recorder::open(state.path(), roots).unwrap();
    let recovered = recovered.unwrap();
    assert_eq!((recovered.restored, recovered.vanished), (21, 0), "{recovered:?}");
    assert!(recovered.changed_by_others.is_empty(), "{recovered:?}");
    for f in alive.iter().chain([&keep]) {
        assert_eq!(std::fs::read_to_string(f).unwrap(), format!("{DEV} 0"), "{} restored", f.display());
    }
    rec.revert().unwrap();
}

#[test]
fn a_crash_right_after_a_rewrite_loses_nothing() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let roots = vec![root.path().to_path_buf()];
    let (mut rec, _) = Recorder::open(state.path(), roots.clone()).unwrap();
    let files: Vec<PathBuf> = (0..3).map(|i| cgroup(root.path(), &format!("g{i}"))).collect();
    let gone = cgroup(root.path(), "gone");
    rec.set(&gone, Entry::Throttle(DEV), &format!("{DEV} 5")).unwrap();
    for (i, f) in files.iter().enumerate() {
        rec.set(f, Entry::Throttle(DEV), &format!("{DEV} {}", 10 + i)).unwrap();
    }
    std::fs::remove_dir_all(gone.parent().unwrap()).unwrap();
    assert_eq!(rec.forget_vanished().unwrap(), 1);
    assert_eq!(state_lines(state.path()), 1 + 3, "rewritten: the header and the live entries");
    // Later values go on being appended to the rewritten file.
    rec.set(&files[0], Entry::Throttle(DEV), &format!("{DEV} 99")).unwrap();
    assert_eq!(state_lines(state.path()), 1 + 3 + 1);
    std::mem::forget(rec);
    let (rec, recovered) = Recorder::open(state.path(), roots).unwrap();
    let recovered = recovered.unwrap();
    assert_eq!(recovered.restored, 3);
    assert!(recovered.changed_by_others.is_empty(), "the last value written is the one recorded: {recovered:?}");
    rec.revert().unwrap();
}
