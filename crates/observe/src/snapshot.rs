//! What the observer saw: per (device, cgroup, operation) counters and histograms, per stage, as read
//! from the kernel's `stats` map, plus the counters of what it could not see. Snapshots are
//! cumulative since the programs were attached; [`Snapshot::since`] gives an interval.

use serde::Serialize;

use crate::histogram::Histogram;

/// A point of the block layer where IOs are counted (the blktrace letters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Stage {
    /// A bio enters the block layer (`block_bio_queue`).
    Q,
    /// A request enters the IO scheduler (`block_rq_insert`); absent when the scheduler is `none` and
    /// the driver takes the request directly.
    I,
    /// The driver takes the request (`block_rq_issue`).
    D,
    /// The request completes (`block_rq_complete`).
    C,
}

impl Stage {
    /// All stages, in the kernel's order (index = the BPF side's stage number).
    pub const ALL: [Stage; 4] = [Stage::Q, Stage::I, Stage::D, Stage::C];

    /// The stage's letter, used as the Prometheus `stage` label.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Q => "Q",
            Stage::I => "I",
            Stage::D => "D",
            Stage::C => "C",
        }
    }
}

/// A latency between two stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Latency {
    /// Bio queued to request completed: what the submitter waited in total.
    QC,
    /// Request inserted to issued: time spent in the IO scheduler.
    ID,
    /// Request issued to completed: the device (and driver).
    DC,
}

impl Latency {
    /// All latencies (index = the BPF side's latency number).
    pub const ALL: [Latency; 3] = [Latency::QC, Latency::ID, Latency::DC];

    /// `Q2C`, `I2D` or `D2C`, used as the Prometheus `stage` label.
    pub fn label(self) -> &'static str {
        match self {
            Latency::QC => "Q2C",
            Latency::ID => "I2D",
            Latency::DC => "D2C",
        }
    }
}

/// The operation of an IO.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Reads.
    Read,
    /// Writes.
    Write,
    /// Flushes, discards, write-zeroes and other operations.
    Other,
}

impl Op {
    /// The BPF side's operation number.
    pub(crate) fn from_raw(raw: u32) -> Op {
        match raw {
            0 => Op::Read,
            1 => Op::Write,
            _ => Op::Other,
        }
    }

    /// `read`, `write` or `other`.
    pub fn label(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Other => "other",
        }
    }
}

/// Counters of one stage.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StageStats {
    /// IOs seen (bios at Q, requests at I, D, C).
    pub ios: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Log2 histogram of IO sizes (bytes), see [`crate::Kind::Size`].
    pub size: Histogram,
    /// Log2 histogram of the distance (sectors) from the end of the previous IO of the same
    /// (device, cgroup) at this stage; bucket 0 = sequential. The first IO of a stream has no
    /// predecessor and is not counted here. See [`crate::Kind::Seek`].
    pub seek: Histogram,
}

impl StageStats {
    /// The share of IOs that continued where the previous one ended (0..=1), `None` before any seek
    /// distance was measured.
    pub fn sequential_share(&self) -> Option<f64> {
        let total = self.seek.count();
        (total > 0).then(|| self.seek.buckets.first().copied().unwrap_or(0) as f64 / total as f64)
    }

    fn since(&self, earlier: &StageStats) -> StageStats {
        StageStats {
            ios: self.ios.saturating_sub(earlier.ios),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            size: self.size.since(&earlier.size),
            seek: self.seek.since(&earlier.seek),
        }
    }
}

/// Everything counted for one (device, cgroup, operation).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Entry {
    /// The whole disk, `MAJ:MIN`.
    pub device: String,
    /// Its kernel name (`loop0`, `sda`), or `MAJ:MIN` when sysfs does not say.
    pub device_name: String,
    /// Kernel id of the cgroup the IO was charged to (its blkcg's cgroup; the inode number of the
    /// cgroup's directory in the hierarchy that carries `blkio`/`io`); 0 = none.
    pub cgroup_id: u64,
    /// That cgroup's path in its hierarchy (`/` for the root), or `#<id>` once it was removed.
    pub cgroup: String,
    /// The operation.
    pub op: Op,
    /// Counters per stage, in [`Stage::ALL`] order.
    pub stages: Vec<StageStats>,
    /// Latency histograms (sum in nanoseconds), in [`Latency::ALL`] order.
    pub latencies: Vec<Histogram>,
}

impl Entry {
    /// The counters of `stage`.
    pub fn stage(&self, stage: Stage) -> &StageStats {
        &self.stages[stage as usize]
    }

    /// The histogram of `latency`.
    pub fn latency(&self, latency: Latency) -> &Histogram {
        &self.latencies[latency as usize]
    }

    fn same_series(&self, other: &Entry) -> bool {
        self.device == other.device && self.cgroup_id == other.cgroup_id && self.op == other.op
    }
}

/// What the observer could not see or keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// IOs not counted because the stats map was full (more (device, cgroup, op) series than it holds).
    pub dropped_stats_full: u64,
    /// Requests first seen without their bio's queue time (split bios, or queued before attaching):
    /// no Q->C latency for them.
    pub missing_queue_time: u64,
    /// Completions without a recorded issue (issued before attaching, or evicted from the bounded
    /// in-flight table): no D->C latency for them.
    pub missing_issue_time: u64,
}

impl Counters {
    fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            dropped_stats_full: self.dropped_stats_full.saturating_sub(earlier.dropped_stats_full),
            missing_queue_time: self.missing_queue_time.saturating_sub(earlier.missing_queue_time),
            missing_issue_time: self.missing_issue_time.saturating_sub(earlier.missing_issue_time),
        }
    }
}

/// The observer's own CPU time in the kernel, when measured ([`crate::Observer::measure_cost`]): per
/// program, in [`Stage::ALL`] order (the program of stage Q, I, D, C).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cost {
    /// Runs and run time of each stage's program.
    pub programs: [ProgramCost; 4],
}

/// Runs and run time of one BPF program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProgramCost {
    /// Program runs (one per tracepoint hit, on every device, before the device filter).
    pub runs: u64,
    /// Their total run time in nanoseconds.
    pub run_time_ns: u64,
    /// Hits the kernel skipped because the program was already running on that CPU (an interrupt's
    /// block completion inside a completion being counted): those IOs go uncounted at this stage.
    pub skipped: u64,
}

impl ProgramCost {
    /// Average nanoseconds per run, `None` before any run.
    pub fn ns_per_run(&self) -> Option<f64> {
        (self.runs > 0).then(|| self.run_time_ns as f64 / self.runs as f64)
    }
}

impl Cost {
    /// All programs together.
    pub fn total(&self) -> ProgramCost {
        ProgramCost {
            runs: self.programs.iter().map(|p| p.runs).sum(),
            run_time_ns: self.programs.iter().map(|p| p.run_time_ns).sum(),
            skipped: self.programs.iter().map(|p| p.skipped).sum(),
        }
    }

    /// The program of `stage`.
    pub fn program(&self, stage: Stage) -> ProgramCost {
        self.programs[stage as usize]
    }

    /// Nanoseconds of all programs per IO completed (`completions`: IOs counted at C), `None` without
    /// completions.
    pub fn ns_per_io(&self, completions: u64) -> Option<f64> {
        (completions > 0).then(|| self.total().run_time_ns as f64 / completions as f64)
    }

    fn since(&self, earlier: &Cost) -> Cost {
        let mut programs = self.programs;
        for (p, e) in programs.iter_mut().zip(&earlier.programs) {
            p.runs = p.runs.saturating_sub(e.runs);
            p.run_time_ns = p.run_time_ns.saturating_sub(e.run_time_ns);
            p.skipped = p.skipped.saturating_sub(e.skipped);
        }
        Cost { programs }
    }
}

/// One reading of the kernel's maps.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Snapshot {
    /// Seconds since the observer was attached, when this was read.
    pub elapsed_s: f64,
    /// One entry per (device, cgroup, operation), sorted by device, cgroup, operation.
    pub entries: Vec<Entry>,
    /// What could not be seen.
    pub counters: Counters,
    /// The observer's own cost, when measured.
    pub cost: Option<Cost>,
}

impl Snapshot {
    /// What happened between `earlier` and `self` (entries that saw nothing in between are left out).
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let entries = self
            .entries
            .iter()
            .filter_map(|e| {
                let delta = match earlier.entries.iter().find(|p| p.same_series(e)) {
                    None => e.clone(),
                    Some(p) => Entry {
                        stages: e.stages.iter().zip(&p.stages).map(|(a, b)| a.since(b)).collect(),
                        latencies: e.latencies.iter().zip(&p.latencies).map(|(a, b)| a.since(b)).collect(),
                        ..e.clone()
                    },
                };
                delta.stages.iter().any(|s| s.ios > 0).then_some(delta)
            })
            .collect();
        let cost = self.cost.map(|now| now.since(&earlier.cost.unwrap_or_default()));
        Snapshot { elapsed_s: self.elapsed_s, entries, counters: self.counters.since(&earlier.counters), cost }
    }

    /// The seek histograms of all entries at `stage`, added up.
    pub fn merged_seek(&self, stage: Stage) -> Histogram {
        let mut total = Histogram::default();
        self.entries.iter().for_each(|e| total.add(&e.stage(stage).seek));
        total
    }

    /// The `latency` histograms of all entries, added up.
    pub fn merged_latency(&self, latency: Latency) -> Histogram {
        let mut total = Histogram::default();
        self.entries.iter().for_each(|e| total.add(e.latency(latency)));
        total
    }

    /// The entries whose cgroup path contains `pattern` (all of them for `None`).
    pub fn filtered(&self, pattern: Option<&str>) -> Snapshot {
        let entries = self.entries.iter().filter(|e| pattern.is_none_or(|p| e.cgroup.contains(p))).cloned().collect();
        Snapshot { entries, ..self.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(cgroup: &str, ios: u64) -> Entry {
        let stage = StageStats {
            ios,
            bytes: ios * 512,
            size: Histogram { buckets: vec![ios], sum: ios * 512 },
            seek: Histogram { buckets: vec![ios], sum: 0 },
        };
        Entry {
            device: "7:0".into(),
            device_name: "loop0".into(),
            cgroup_id: cgroup.len() as u64,
            cgroup: cgroup.into(),
            op: Op::Write,
            stages: vec![stage; 4],
            latencies: vec![Histogram { buckets: vec![ios], sum: ios }; 3],
        }
    }

    fn snapshot(entries: Vec<Entry>, runs: u64) -> Snapshot {
        Snapshot {
            elapsed_s: 1.0,
            entries,
            counters: Counters::default(),
            cost: Some(Cost { programs: [ProgramCost { runs, run_time_ns: runs, skipped: 0 }; 4] }),
        }
    }

    #[test]
    fn since_keeps_what_happened_in_between() {
        let before = snapshot(vec![entry("/a", 5), entry("/bb", 7)], 10);
        let after = snapshot(vec![entry("/a", 8), entry("/bb", 7), entry("/ccc", 2)], 25);
        let delta = after.since(&before);
        let ios: Vec<(&str, u64)> = delta.entries.iter().map(|e| (e.cgroup.as_str(), e.stage(Stage::C).ios)).collect();
        // /bb did nothing in between and is left out; /ccc is new and counts whole.
        assert_eq!(ios, [("/a", 3), ("/ccc", 2)]);
        assert_eq!(delta.entries[0].latency(Latency::DC).count(), 3);
        assert_eq!(delta.entries[0].stage(Stage::Q).sequential_share(), Some(1.0));
        assert_eq!(delta.cost.map(|c| c.total()), Some(ProgramCost { runs: 60, run_time_ns: 60, skipped: 0 }));
    }

    #[test]
    fn filtered_keeps_matching_cgroups() {
        let snap = snapshot(vec![entry("/a", 1), entry("/tenant-b", 1)], 0);
        assert_eq!(snap.filtered(Some("tenant")).entries.len(), 1);
        assert_eq!(snap.filtered(None).entries.len(), 2);
    }
}
