/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The layout shared by the BPF programs and the Rust reader (the generated skeleton's types mirror it;
 * the loader checks the sizes of what it reads against them, so a stale build fails with a clear
 * error instead of producing garbage).
 */
#ifndef IOSHARE_OBSERVE_H
#define IOSHARE_OBSERVE_H

/* Series (device, cgroup, operation) the `stats` array holds, and (device, cgroup) streams. */
#define OBS_MAX_SLOTS 1024
#define OBS_MAX_INFLIGHT 16384

#define OBS_STAGE_Q 0
#define OBS_STAGE_I 1
#define OBS_STAGE_D 2
#define OBS_STAGE_C 3
#define OBS_STAGES 4

#define OBS_LAT_QC 0
#define OBS_LAT_ID 1
#define OBS_LAT_DC 2
#define OBS_LATENCIES 3

#define OBS_OP_READ 0
#define OBS_OP_WRITE 1
#define OBS_OP_OTHER 2

#define OBS_SIZE_BUCKETS 32
#define OBS_SEEK_BUCKETS 48
#define OBS_LATENCY_BUCKETS 32

/* Indices of the `counters` map. */
#define OBS_DROP_STATS_FULL 0
#define OBS_MISS_QUEUE_TIME 1
#define OBS_MISS_ISSUE_TIME 2
#define OBS_COUNTERS 3

/* Key of the `slots` map: one series. */
struct obs_key {
	__u64 cgroup; /* kernfs id of the blkcg's cgroup = inode number of its directory */
	__u32 dev;    /* MAJOR << 20 | MINOR of the whole disk */
	__u32 op;     /* OBS_OP_* */
};

struct obs_stage {
	__u64 ios;
	__u64 bytes;
	__u64 seek_sum; /* sectors */
	__u64 size_hist[OBS_SIZE_BUCKETS];
	__u64 seek_hist[OBS_SEEK_BUCKETS];
};

struct obs_latency {
	__u64 sum_ns;
	__u64 hist[OBS_LATENCY_BUCKETS];
};

/* One series' counters: an element of the per-CPU `stats` array (user space adds up the CPUs). */
struct obs_value {
	struct obs_stage stage[OBS_STAGES];
	struct obs_latency latency[OBS_LATENCIES];
};

/* Value of the `slots` map: where a series' counters and its stream's state live. */
struct obs_slot {
	__u32 stats;  /* index in `stats` */
	__u32 stream; /* index in `stream_end` (shared by the operations of one (device, cgroup)) */
};

#endif
