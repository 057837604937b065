//! Loop devices for real (root only): attach, direct IO, device number, scheduler, and that nothing
//! stays attached after drop, a panic, or the holding process being killed.

mod common;

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{backing_file, backing_of};
use ioshare_host::{Error, LoopDevice};
use ioshare_testkit::{skip_unless_root, KillOnDrop};

#[test]
fn attach_with_direct_io_serves_the_file_and_detaches_on_drop() {
    if skip_unless_root("attach_with_direct_io_serves_the_file_and_detaches_on_drop") {
        return;
    }
    let file = backing_file(16);
    let dev = LoopDevice::attach(file.path(), true).unwrap();
    assert_eq!(backing_of(dev.path()).as_deref(), Some(file.path()));
    let name = dev.path().file_name().unwrap().to_str().unwrap().to_string();
    let dio = std::fs::read_to_string(format!("/sys/block/{name}/loop/dio")).unwrap();
    assert_eq!(dio.trim(), "1", "direct IO on");
    let rdev = std::fs::metadata(dev.path()).unwrap().rdev();
    assert_eq!((libc::major(rdev), libc::minor(rdev)), (dev.dev().major, dev.dev().minor));

    // A block written through the device lands in the file at the same offset.
    let block: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut through = OpenOptions::new().write(true).open(dev.path()).unwrap();
    through.seek(SeekFrom::Start(1 << 20)).unwrap();
    through.write_all(&block).unwrap();
    through.sync_all().unwrap();
    drop(through);
    let mut back = vec![0u8; 4096];
    let mut plain = File::open(file.path()).unwrap();
    plain.seek(SeekFrom::Start(1 << 20)).unwrap();
    plain.read_exact(&mut back).unwrap();
    assert_eq!(back, block);

    let path = dev.path().to_path_buf();
    drop(dev);
    assert_ne!(backing_of(&path).as_deref(), Some(file.path()), "{} still attached after drop", path.display());
}

#[test]
fn a_panic_detaches_the_device() {
    if skip_unless_root("a_panic_detaches_the_device") {
        return;
    }
    let file = backing_file(4);
    let mut seen: Option<PathBuf> = None;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let dev = LoopDevice::attach(file.path(), false).unwrap();
        seen = Some(dev.path().to_path_buf());
        panic!("test panic while {} is attached", dev.path().display());
    }));
    assert!(result.is_err());
    let path = seen.expect("the device was attached before the panic");
    assert_ne!(backing_of(&path).as_deref(), Some(file.path()), "{} still attached after a panic", path.display());
}

/// Set by [`killed_holder_leaves_no_device`] for the child that runs [`loop_holder_child`].
const HOLDER_ENV: &str = "IOSHARE_HOST_TEST_LOOP_HOLDER";

/// Not a test by itself: the child process of [`killed_holder_leaves_no_device`]. It attaches the file
/// named in `HOLDER_ENV`, prints the device and waits to be killed.
#[test]
#[ignore = "helper: run in a child process by killed_holder_leaves_no_device"]
fn loop_holder_child() {
    let Ok(file) = std::env::var(HOLDER_ENV) else { return };
    let dev = LoopDevice::attach(Path::new(&file), true).unwrap();
    println!("{}", dev.path().display());
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn killed_holder_leaves_no_device() {
    if skip_unless_root("killed_holder_leaves_no_device") {
        return;
    }
    let file = backing_file(4);
    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "loop_holder_child", "--nocapture", "--test-threads=1"])
            .env(HOLDER_ENV, file.path())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = BufReader::new(child.0.stdout.take().unwrap());
    let path = stdout
        .lines()
        .map(Result::unwrap)
        // The harness prints "test loop_holder_child ... " and then the child's own output on that line.
        .find_map(|line| line.split_whitespace().find(|w| w.starts_with("/dev/loop")).map(PathBuf::from));
    let path = path.expect("the child printed its loop device");
    assert_eq!(backing_of(&path).as_deref(), Some(file.path()));

    child.0.kill().unwrap(); // SIGKILL: no destructor runs in the child
    child.0.wait().unwrap();
    // The kernel detaches an autoclear device when its last opener closes it, which happens while the
    // killed process exits; allow 2 s for that to finish rather than assuming it is instantaneous.
    let deadline = Instant::now() + Duration::from_secs(2);
    while backing_of(&path).as_deref() == Some(file.path()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_ne!(backing_of(&path).as_deref(), Some(file.path()), "{} outlived its killed holder", path.display());
}

#[test]
fn scheduler_is_switched_on_the_loop_device_and_restored() {
    if skip_unless_root("scheduler_is_switched_on_the_loop_device_and_restored") {
        return;
    }
    let file = backing_file(4);
    let dev = LoopDevice::attach(file.path(), true).unwrap();
    let before = dev.scheduler().unwrap();
    dev.set_scheduler("bfq").unwrap();
    assert_eq!(dev.scheduler().unwrap(), "bfq");
    let err = dev.set_scheduler("no-such-scheduler").unwrap_err();
    assert!(matches!(err, Error::SchedulerUnavailable { .. }), "{err}");
    assert!(err.to_string().contains("bfq"), "the message lists what is available: {err}");
    assert_eq!(dev.scheduler().unwrap(), "bfq", "a refused switch changes nothing");

    let scheduler_file = Path::new("/sys/block").join(dev.path().file_name().unwrap()).join("queue/scheduler");
    drop(dev);
    // The device node may be gone (removed on drop when this test created it); if it is still there,
    // it has its original scheduler back.
    if let Ok(text) = std::fs::read_to_string(&scheduler_file) {
        assert!(text.contains(&format!("[{before}]")), "scheduler not restored: {text}");
    }
}

#[test]
fn unusable_backing_files_are_refused_with_the_reason() {
    if skip_unless_root("unusable_backing_files_are_refused_with_the_reason") {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let empty = dir.path().join("empty");
    File::create(&empty).unwrap();
    for (path, reason) in [
        (dir.path().join("missing"), "no such file"),
        (dir.path().to_path_buf(), "directory"),
        (empty, "the file is empty"),
    ] {
        let err = LoopDevice::attach(&path, true).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("cannot attach loop device over") && text.contains(reason), "{text}");
    }
}

#[test]
fn loop_devices_created_on_demand_are_removed_again() {
    if skip_unless_root("loop_devices_created_on_demand_are_removed_again") {
        return;
    }
    let existing = || -> Vec<PathBuf> {
        let entries = std::fs::read_dir("/sys/block").unwrap().flatten();
        entries.filter(|e| e.file_name().to_string_lossy().starts_with("loop")).map(|e| e.path()).collect()
    };
    let before = existing();
    // Take every free loop device, and one more: the kernel creates that one for us.
    let file = backing_file(1);
    let mut held = Vec::new();
    while held.len() <= before.len() {
        held.push(LoopDevice::attach(file.path(), false).unwrap());
    }
    let sys = |dev: &LoopDevice| Path::new("/sys/block").join(dev.path().file_name().unwrap());
    let created: Vec<PathBuf> = held.iter().map(sys).filter(|p| !before.contains(p)).collect();
    assert!(!created.is_empty(), "{} attachments over {} loop devices created none", held.len(), before.len());
    drop(held);
    for path in &created {
        assert!(!path.exists(), "{} was created for this test and is still there", path.display());
    }
}
