//! Root tests against the real block layer: a loop device, processes in blkio cgroups doing direct
//! IO at offsets the test chose, and the observer's counts compared with what those offsets imply.
//! They skip with a printed reason when not root or when the kernel has no BTF.
//!
//! Each IO process is this test binary run again with `IOSHARE_OBSERVE_CHILD` set (see
//! [`child_io`]), so it can sit in its own cgroup from its first IO on.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::process::Command;

use ioshare_host::{BlkioCgroup, LoopDevice};
use ioshare_observe::{AttachMode, Entry, Histogram, Kind, Observer, Op, Snapshot, Stage, Stages};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const CHILD_ENV: &str = "IOSHARE_OBSERVE_CHILD";
const SECTOR: u64 = 512;

/// Skips (returns true, printing why) unless root on a kernel with BTF.
fn skip(test: &str) -> bool {
    ioshare_observe::skip_unless_traceable(test)
}

/// Not a test of its own: the IO process of the tests below. With `IOSHARE_OBSERVE_CHILD` =
/// `read|write DEVICE SIZE OFFSETS_FILE`, does one direct IO of SIZE bytes at each offset, in order.
#[test]
fn child_io() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let fields: Vec<&str> = spec.split(' ').collect();
    let [op, device, size, offsets] = fields[..] else { panic!("bad {CHILD_ENV}: {spec}") };
    let size: usize = size.parse().unwrap();
    let offsets: Vec<u64> = std::fs::read_to_string(offsets).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    let file = OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(device).unwrap();
    let layout = Layout::from_size_align(size, 4096).unwrap();
    // SAFETY: layout has a non-zero size; the buffer is freed below with the same layout.
    let buf = unsafe { alloc_zeroed(layout) };
    // SAFETY: `buf` points to `size` initialized (zeroed) bytes owned by this function.
    let slice = unsafe { std::slice::from_raw_parts_mut(buf, size) };
    for &offset in &offsets {
        let done = if op == "write" { file.write_at(slice, offset) } else { file.read_at(slice, offset) };
        assert_eq!(done.unwrap(), size, "{op} at {offset}");
    }
    // SAFETY: allocated above with this layout.
    unsafe { dealloc(buf, layout) };
}

/// A child process running IOs, killed and reaped if dropped before it finished (a failing test leaves
/// none behind), with the file that lists its offsets.
struct IoChild {
    child: std::process::Child,
    /// Kept until the child is done with it; removed on drop.
    _offsets: tempfile::NamedTempFile,
}

impl IoChild {
    fn wait(mut self) {
        assert!(self.child.wait().unwrap().success(), "IO child failed");
    }
}

impl Drop for IoChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `offsets` as direct IOs of `size` bytes from a child process in `cgroup`.
fn run_in(cgroup: &BlkioCgroup, op: &str, device: &Path, size: u64, offsets: &[u64]) -> IoChild {
    let mut list = tempfile::NamedTempFile::new().unwrap();
    for o in offsets {
        writeln!(list, "{o}").unwrap();
    }
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_io", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{op} {} {size} {}", device.display(), list.path().display()));
    IoChild { child: cgroup.spawn(cmd).unwrap(), _offsets: list }
}

/// The seek histogram the observer should show for one stream of IOs, in issue order: distance from
/// the end of each IO to the start of the next, in sectors; the first IO has no predecessor.
fn expected_seeks(offsets: &[u64], size: u64) -> Vec<u64> {
    let mut buckets = vec![0; 48];
    for pair in offsets.windows(2) {
        let end = (pair[0] + size) / SECTOR;
        let start = pair[1] / SECTOR;
        buckets[Kind::Seek.bucket(start.abs_diff(end))] += 1;
    }
    buckets
}

fn entry<'a>(snap: &'a Snapshot, cgroup: &BlkioCgroup, op: Op) -> &'a Entry {
    let id = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(cgroup.path()).unwrap());
    snap.entries
        .iter()
        .find(|e| e.cgroup_id == id && e.op == op)
        .unwrap_or_else(|| panic!("no {op:?} entry for {} in {snap:#?}", cgroup.path().display()))
}

/// A 64 MiB loop device of the test's own over a file in CARGO_TARGET_TMPDIR (detached, then the file
/// removed, when dropped).
struct TestDisk {
    dev: LoopDevice,
    _backing: tempfile::NamedTempFile,
}

impl TestDisk {
    fn new() -> TestDisk {
        let backing = tempfile::Builder::new()
            .prefix("ioshare-observe-test-")
            .tempfile_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("create a backing file in CARGO_TARGET_TMPDIR");
        backing.as_file().set_len(64 << 20).expect("size the backing file");
        TestDisk { dev: LoopDevice::attach(backing.path(), true).unwrap(), _backing: backing }
    }

    /// An observer of this disk alone (`mode` `None`: tp_btf, else raw_tp), timing its programs.
    fn observer(&self, mode: Option<AttachMode>, stages: Stages) -> Observer {
        let device = Some((self.dev.dev().major, self.dev.dev().minor));
        let mut observer = Observer::start_with(device, mode, stages).unwrap();
        observer.measure_cost().unwrap();
        observer
    }
}

#[test]
fn counts_are_exact_per_cgroup_and_operation() {
    if skip("counts_are_exact_per_cgroup_and_operation") {
        return;
    }
    let disk = TestDisk::new();
    let dev = &disk.dev;
    let pid = std::process::id();
    let readers = BlkioCgroup::create(&format!("ioshare-observe-test-{pid}/readers")).unwrap();
    let writers = BlkioCgroup::create(&format!("ioshare-observe-test-{pid}/writers")).unwrap();
    let mut observer = disk.observer(None, Stages::All);

    // 1000 random 4 KiB reads in the first 32 MiB, 200 sequential 64 KiB writes from 32 MiB on.
    let mut rng = SmallRng::seed_from_u64(7);
    let reads: Vec<u64> = (0..1000).map(|_| rng.gen_range(0..(32u64 << 20) / 4096) * 4096).collect();
    let writes: Vec<u64> = (0..200).map(|i| (32u64 << 20) + i * 65536).collect();
    let reader = run_in(&readers, "read", dev.path(), 4096, &reads);
    let writer = run_in(&writers, "write", dev.path(), 65536, &writes);
    reader.wait();
    writer.wait();

    let snap = observer.snapshot().unwrap();
    let r = entry(&snap, &readers, Op::Read);
    let w = entry(&snap, &writers, Op::Write);
    let cost = snap.cost.unwrap();
    let skipped = |stage: Stage| cost.program(stage).skipped;
    if Stage::ALL.iter().all(|&s| skipped(s) == 0) {
        for stage in [Stage::Q, Stage::D, Stage::C] {
            assert_eq!((r.stage(stage).ios, r.stage(stage).bytes), (1000, 4_096_000), "reads at {stage:?}");
            assert_eq!((w.stage(stage).ios, w.stage(stage).bytes), (200, 13_107_200), "writes at {stage:?}");
            assert_eq!(r.stage(stage).seek.buckets, expected_seeks(&reads, 4096), "read seeks at {stage:?}");
            assert_eq!(w.stage(stage).seek.buckets, expected_seeks(&writes, 65536), "write seeks at {stage:?}");
            assert_eq!(r.stage(stage).size.buckets[Kind::Size.bucket(4096)], 1000);
            assert_eq!(w.stage(stage).size.buckets[Kind::Size.bucket(65536)], 200);
        }
    } else {
        // The kernel skipped a program that would have nested in itself on a CPU (a completion
        // interrupt inside a completion being counted, on any disk, so not all of them ours): at
        // most that many IOs may be missing at that stage, and none may be counted twice.
        for stage in [Stage::Q, Stage::D, Stage::C] {
            let (reads_seen, writes_seen) = (r.stage(stage).ios, w.stage(stage).ios);
            assert!(reads_seen <= 1000 && writes_seen <= 200, "{reads_seen} reads, {writes_seen} writes at {stage:?}");
            assert!(
                1200 - reads_seen - writes_seen <= skipped(stage),
                "{reads_seen} reads and {writes_seen} writes at {stage:?}, {} runs skipped",
                skipped(stage)
            );
        }
        eprintln!("programs skipped by the kernel (nested on a CPU): {:?}", Stage::ALL.map(skipped));
    }
    assert_eq!(w.stage(Stage::C).sequential_share(), Some(1.0));
    // Only the readers read and only the writers wrote.
    let ids = [r.cgroup_id, w.cgroup_id];
    let others: Vec<&Entry> = snap.entries.iter().filter(|e| ids.contains(&e.cgroup_id)).collect();
    assert_eq!(others.len(), 2, "unexpected entries for the test cgroups: {others:#?}");
    // Every completion had its issue time: D->C counts all of them, Q->C all but split bios.
    let lat: &Histogram = w.latency(ioshare_observe::Latency::DC);
    assert_eq!(lat.count(), 200);
    // The programs ran at least at Q, D and C of each of the 1200 IOs (and for other devices' IO,
    // which they filter out after running), and took time doing so.
    let cost = cost.total();
    assert!(cost.runs >= 3600 && cost.run_time_ns > 0, "{cost:?}");
    eprintln!(
        "exact counts: readers {} reads / {} B, writers {} writes / {} B at C; read seek buckets {:?}; {:.0} ns per program run",
        r.stage(Stage::C).ios,
        r.stage(Stage::C).bytes,
        w.stage(Stage::C).ios,
        w.stage(Stage::C).bytes,
        r.stage(Stage::C).seek.buckets,
        cost.ns_per_run().unwrap()
    );
}

/// mq-deadline on the loop device (never the machine's disk) receives batches of 32 random reads at
/// once and hands them to the driver sorted by sector: the seek distances at D are shorter than at I.
/// Runs on the raw_tp programs, so the fallback is exercised too.
#[test]
fn scheduler_reordering_shows_between_insert_and_issue() {
    if skip("scheduler_reordering_shows_between_insert_and_issue") {
        return;
    }
    if !Path::new("/usr/bin/fio").exists() && Command::new("fio").arg("--version").output().is_err() {
        eprintln!(
            "skipping scheduler_reordering_shows_between_insert_and_issue: fio not installed (./scripts/setup.sh)"
        );
        return;
    }
    let disk = TestDisk::new();
    let dev = &disk.dev;
    if let Err(e) = dev.set_scheduler("mq-deadline") {
        eprintln!("skipping scheduler_reordering_shows_between_insert_and_issue: {e}");
        return;
    }
    let group = BlkioCgroup::create(&format!("ioshare-observe-reorder-{}/batch", std::process::id())).unwrap();
    let mut observer = disk.observer(Some(AttachMode::RawTp), Stages::All);
    assert_eq!(observer.mode(), AttachMode::RawTp);

    let mut fio = Command::new("fio");
    fio.args([
        "--name=reorder",
        "--ioengine=io_uring",
        "--direct=1",
        "--rw=randread",
        "--bs=4k",
        "--size=32M",
        "--io_size=8M",
        "--iodepth=32",
        "--iodepth_batch_submit=32",
        "--iodepth_batch_complete_min=32",
        "--randseed=11",
        "--output-format=terse",
    ])
    .arg(format!("--filename={}", dev.path().display()))
    .stdout(std::process::Stdio::null());
    let status = group.spawn(fio).unwrap().wait().unwrap();
    assert!(status.success(), "fio failed");

    let snap = observer.snapshot().unwrap();
    let e = entry(&snap, &group, Op::Read);
    let (inserted, issued) = (e.stage(Stage::I), e.stage(Stage::D));
    // Every request passes the scheduler, so I and D count the same requests; only their order differs.
    assert_eq!(inserted.ios, issued.ios);
    assert!(inserted.ios >= 1900, "expected ~2048 requests (a few bios may merge), got {}", inserted.ios);
    assert_ne!(inserted.seek.buckets, issued.seek.buckets, "no reordering visible between I and D");
    // Sorting a batch shortens the jumps: the mean seek distance at D is below that at I.
    let mean = |s: &ioshare_observe::StageStats| s.seek.sum as f64 / s.seek.count() as f64;
    assert!(mean(issued) < mean(inserted), "mean seek D {} >= I {}", mean(issued), mean(inserted));
    eprintln!(
        "reordering: mean seek I {:.0} sectors, D {:.0}; I buckets {:?}; D buckets {:?}",
        mean(inserted),
        mean(issued),
        &inserted.seek.buckets[..26],
        &issued.seek.buckets[..26]
    );
}

/// `Stages::QueueOnly` (what the agent uses): only Q is counted, exactly, with its seek histogram;
/// I, D and C stay empty, no latencies are kept, and only one program runs per IO.
#[test]
fn queue_only_counts_q_and_nothing_else() {
    if skip("queue_only_counts_q_and_nothing_else") {
        return;
    }
    let disk = TestDisk::new();
    let dev = &disk.dev;
    let group = BlkioCgroup::create(&format!("ioshare-observe-qonly-{}/reads", std::process::id())).unwrap();
    let mut observer = disk.observer(None, Stages::QueueOnly);
    let mut rng = SmallRng::seed_from_u64(11);
    let reads: Vec<u64> = (0..300).map(|_| rng.gen_range(0..(64u64 << 20) / 4096) * 4096).collect();
    run_in(&group, "read", dev.path(), 4096, &reads).wait();

    let snap = observer.snapshot().unwrap();
    let e = entry(&snap, &group, Op::Read);
    assert_eq!((e.stage(Stage::Q).ios, e.stage(Stage::Q).bytes), (300, 300 * 4096));
    assert_eq!(e.stage(Stage::Q).seek.buckets, expected_seeks(&reads, 4096));
    for stage in [Stage::I, Stage::D, Stage::C] {
        assert_eq!(e.stage(stage).ios, 0, "{stage:?} is not watched");
    }
    assert!(e.latencies.iter().all(|l| l.count() == 0), "no latencies without I, D, C");
    let cost = snap.cost.unwrap();
    assert!(cost.program(Stage::Q).runs >= 300, "{cost:?}");
    assert_eq!(cost.total().runs, cost.program(Stage::Q).runs, "only Q runs: {cost:?}");
}

/// `Stages::Light` (the default detail): only the light C program runs, one per IO; every request is
/// counted exactly at C with its seek histogram (one IO at a time, so completion order is issue
/// order), nothing at Q, I or D, and the latencies of one request in `LATENCY_EVERY` per CPU come from
/// the request's own timestamps.
#[test]
fn light_counts_every_completion_and_samples_latencies() {
    if skip("light_counts_every_completion_and_samples_latencies") {
        return;
    }
    let disk = TestDisk::new();
    let dev = &disk.dev;
    let group = BlkioCgroup::create(&format!("ioshare-observe-light-{}/reads", std::process::id())).unwrap();
    let mut observer = disk.observer(None, Stages::Light);
    assert_eq!(observer.stages(), Stages::Light);
    let before = observer.snapshot().unwrap();
    let mut rng = SmallRng::seed_from_u64(13);
    let reads: Vec<u64> = (0..400).map(|_| rng.gen_range(0..(64u64 << 20) / 4096) * 4096).collect();
    run_in(&group, "read", dev.path(), 4096, &reads).wait();

    let snap = observer.snapshot().unwrap();
    let e = entry(&snap, &group, Op::Read);
    let c = e.stage(Stage::C);
    assert_eq!((c.ios, c.bytes), (400, 400 * 4096));
    assert_eq!(c.seek.buckets, expected_seeks(&reads, 4096));
    for stage in [Stage::Q, Stage::I, Stage::D] {
        assert_eq!(e.stage(stage).ios, 0, "{stage:?} is not watched");
    }
    // Each CPU samples every LATENCY_EVERY-th of its completions (its count starts wherever earlier
    // IO on that CPU left it), so the sample is 400 / LATENCY_EVERY give or take one per CPU.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let every = u64::from(ioshare_observe::LATENCY_EVERY);
    let sampled = e.latency(ioshare_observe::Latency::QC).count();
    assert!(sampled.abs_diff(400 / every) <= cpus, "{sampled} sampled of 400, 1 in {every}, {cpus} CPUs");
    // D->C needs the issue time the queue may not keep: each sampled request has it or is counted.
    let missing = snap.counters.missing_issue_time - before.counters.missing_issue_time;
    let dc = e.latency(ioshare_observe::Latency::DC);
    assert_eq!(dc.count() + missing, sampled, "every sampled request has a D2C or a counted miss");
    assert_eq!(e.latency(ioshare_observe::Latency::ID).count(), 0, "no I2D in light detail");
    if missing == 0 {
        // Issue comes after the request is made: a request's D->C is at most its Q->C.
        assert!(dc.sum <= e.latency(ioshare_observe::Latency::QC).sum, "D2C sum {} > Q2C sum", dc.sum);
    }
    let cost = snap.cost.unwrap();
    assert!(cost.program(Stage::C).runs >= 400, "{cost:?}");
    assert_eq!(cost.total().runs, cost.program(Stage::C).runs, "only C runs: {cost:?}");
    eprintln!(
        "light: {} reads at C, {sampled} latencies sampled ({} with D2C), {:.0} ns per run",
        c.ios,
        dc.count(),
        cost.total().ns_per_run().unwrap()
    );
}

/// `pause` detaches every program (IO meanwhile is not counted and no program runs) and `resume`
/// attaches them again, keeping what was counted before: the bench toggles the observer this way to
/// measure what it costs the IO path.
#[test]
fn pause_detaches_and_resume_counts_again() {
    if skip("pause_detaches_and_resume_counts_again") {
        return;
    }
    let disk = TestDisk::new();
    let dev = &disk.dev;
    let group = BlkioCgroup::create(&format!("ioshare-observe-pause-{}/reads", std::process::id())).unwrap();
    let mut observer = disk.observer(None, Stages::All);
    let reads = |n: u64, from: u64| -> Vec<u64> { (0..n).map(|i| (from + i * 8) * 4096).collect() };
    run_in(&group, "read", dev.path(), 4096, &reads(100, 0)).wait();
    observer.pause();
    let paused = observer.snapshot().unwrap();
    run_in(&group, "read", dev.path(), 4096, &reads(70, 1000)).wait();
    let after_pause = observer.snapshot().unwrap();
    observer.resume().unwrap();
    observer.resume().unwrap();
    run_in(&group, "read", dev.path(), 4096, &reads(50, 2000)).wait();
    let resumed = observer.snapshot().unwrap();

    let c = |snap: &Snapshot| entry(snap, &group, Op::Read).stage(Stage::C).ios;
    assert_eq!(c(&paused), 100);
    assert_eq!(c(&after_pause), 100, "nothing counted while paused");
    assert_eq!(after_pause.cost.unwrap().total().runs, paused.cost.unwrap().total().runs, "no program ran");
    assert_eq!(c(&resumed), 150, "counted again after resume (a second resume attaches nothing twice)");
}
