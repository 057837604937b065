// SPDX-License-Identifier: Apache-2.0
/*
 * ioshare observe: block-layer statistics per (device, cgroup, operation), aggregated in the kernel.
 *
 * Stages (the blktrace letters): Q = block_bio_queue (a bio enters the block layer), I =
 * block_rq_insert (a request enters the IO scheduler), D = block_rq_issue (the driver takes it),
 * C = block_rq_complete. Each stage counts IOs and bytes and keeps a log2 histogram of IO size and of
 * the seek distance from the end of the previous IO of the same (device, cgroup) stream at that
 * stage; 0 means sequential. Latencies Q->C (total), I->D (scheduler wait) and D->C (device) are log2
 * histograms of microseconds. The cgroup is the one the bio is charged to (bio->bi_blkg->blkcg), so
 * both v1 blkio groups and v2 cgroups are named, also when the completion runs in interrupt context.
 *
 * Each program exists twice: tp_btf (typed arguments, cheapest) and raw_tp (for kernels whose BTF
 * lacks the tracepoint); the loader enables one set. Nothing is copied to user space per event:
 * user space reads the `stats` map when it wants a snapshot.
 *
 * Bounds: `stats` is a preallocated hash; when full, new keys are counted in `counters` and dropped.
 * Per-IO state (queue time per bio, stage times per request) lives in LRU hashes, so IOs that never
 * complete (merged bios, a request failed before issue, the observer attached mid-flight) are evicted
 * instead of leaking; what is missing at completion is counted, not guessed.
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "observe.h"

/* Set by the loader before load: only this device (the kernel's MAJOR << 20 | MINOR), 0 = all. */
const volatile __u32 target_dev = 0;

#define REQ_OP_MASK 0xff

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OBS_MAX_KEYS);
	__type(key, struct obs_key);
	__type(value, struct obs_value);
} stats SEC(".maps");

/* A zeroed value to create `stats` entries from (too large for the 512-byte BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct obs_value);
} zero_value SEC(".maps");

struct stream_key {
	__u64 cgroup;
	__u32 dev;
	__u32 stage;
};

/* End sector of the previous IO of each (device, cgroup) stream at each stage. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, OBS_MAX_KEYS * OBS_STAGES);
	__type(key, struct stream_key);
	__type(value, __u64);
} stream_end SEC(".maps");

/* Queue time of each bio, until its request is inserted or issued. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, OBS_MAX_INFLIGHT);
	__type(key, __u64);
	__type(value, __u64);
} bio_queued SEC(".maps");

struct rq_times {
	__u64 queued;
	__u64 inserted;
	__u64 issued;
};

/* Stage times of each request in flight, keyed by the request's address. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, OBS_MAX_INFLIGHT);
	__type(key, __u64);
	__type(value, struct rq_times);
} rq_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OBS_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);
	if (c)
		*c += 1;
}

/*
 * Adds one to hist[b] for b < n. barrier_var stops clang from checking a copy of b and indexing with
 * the original, which the verifier could not prove in bounds.
 */
#define HIST_INC(hist, b, n)                                      \
	do {                                                      \
		__u32 __b = (b);                                  \
		barrier_var(__b);                                 \
		if (__b < (n))                                    \
			__sync_fetch_and_add(&(hist)[__b], 1);    \
	} while (0)

static __always_inline __u32 floor_log2(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xffffffffULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xffff) << 4; v >>= shift; r |= shift;
	shift = (v > 0xff) << 3; v >>= shift; r |= shift;
	shift = (v > 0xf) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

/* Bucket k holds values in (2^(k-1), 2^k]; bucket 0 holds 0 and 1. */
static __always_inline __u32 size_bucket(__u64 bytes)
{
	__u32 b = bytes <= 1 ? 0 : floor_log2(bytes - 1) + 1;
	return b < OBS_SIZE_BUCKETS ? b : OBS_SIZE_BUCKETS - 1;
}

/* Bucket 0 holds 0 (sequential); bucket k >= 1 holds (2^(k-2), 2^(k-1)] sectors. */
static __always_inline __u32 seek_bucket(__u64 sectors)
{
	__u32 b = sectors == 0 ? 0 : (sectors == 1 ? 1 : floor_log2(sectors - 1) + 2);
	return b < OBS_SEEK_BUCKETS ? b : OBS_SEEK_BUCKETS - 1;
}

/* Bucket k holds latencies below 2^k microseconds (and at least 2^(k-1) for k >= 1). */
static __always_inline __u32 latency_bucket(__u64 ns)
{
	__u64 us = ns / 1000;
	__u32 b = us == 0 ? 0 : floor_log2(us) + 1;
	return b < OBS_LATENCY_BUCKETS ? b : OBS_LATENCY_BUCKETS - 1;
}

/*
 * Reads a kernel field. tp_btf programs get BTF-typed pointers and may dereference them directly (a
 * plain load, CO-RE-relocated); raw_tp programs must go through bpf_probe_read_kernel, a helper call
 * per field. `btf` is a compile-time constant in every caller, so each program keeps one branch.
 */
#define READ(btf, direct, ...) ((btf) ? (direct) : BPF_CORE_READ(__VA_ARGS__))

static __always_inline __u32 disk_dev(struct gendisk *disk, const bool btf)
{
	int major = READ(btf, disk->major, disk, major);
	int minor = READ(btf, disk->first_minor, disk, first_minor);
	return ((__u32)major << 20) | (__u32)minor;
}

static __always_inline __u64 bio_cgroup(struct bio *bio, const bool btf)
{
	struct blkcg_gq *blkg;

	if (!bio)
		return 0;
	blkg = READ(btf, bio->bi_blkg, bio, bi_blkg);
	if (!blkg)
		return 0;
	return READ(btf, blkg->blkcg->css.cgroup->kn->id, blkg, blkcg, css.cgroup, kn, id);
}

static __always_inline __u32 op_of(blk_opf_t opf)
{
	__u32 op = opf & REQ_OP_MASK;
	return op == 0 ? OBS_OP_READ : (op == 1 ? OBS_OP_WRITE : OBS_OP_OTHER);
}

static __always_inline struct obs_value *value_for(struct obs_key *key)
{
	struct obs_value *v = bpf_map_lookup_elem(&stats, key);
	__u32 zero = 0;

	if (v)
		return v;
	struct obs_value *z = bpf_map_lookup_elem(&zero_value, &zero);
	if (!z)
		return 0;
	/* BPF_NOEXIST: another CPU may have created it meanwhile; then just look it up again. */
	if (bpf_map_update_elem(&stats, key, z, BPF_NOEXIST) && !bpf_map_lookup_elem(&stats, key)) {
		count(OBS_DROP_STATS_FULL);
		return 0;
	}
	return bpf_map_lookup_elem(&stats, key);
}

/* Counts one IO of `bytes` at `sector` at `stage`, and its seek distance within its stream. */
static __always_inline struct obs_value *account(__u32 dev, __u64 cgroup, blk_opf_t opf, __u32 stage,
						 sector_t sector, __u64 bytes)
{
	struct obs_key key = { .cgroup = cgroup, .dev = dev, .op = op_of(opf) };
	struct stream_key skey = { .cgroup = cgroup, .dev = dev, .stage = stage };
	struct obs_value *v = value_for(&key);
	__u64 end = sector + (bytes >> 9);
	__u64 *prev;

	if (!v || stage >= OBS_STAGES)
		return v;
	struct obs_stage *s = &v->stage[stage];
	__sync_fetch_and_add(&s->ios, 1);
	__sync_fetch_and_add(&s->bytes, bytes);
	HIST_INC(s->size_hist, size_bucket(bytes), OBS_SIZE_BUCKETS);

	prev = bpf_map_lookup_elem(&stream_end, &skey);
	if (prev) {
		__u64 last = *prev;
		__u64 distance = sector >= last ? sector - last : last - sector;
		HIST_INC(s->seek_hist, seek_bucket(distance), OBS_SEEK_BUCKETS);
		__sync_fetch_and_add(&s->seek_sum, distance);
		*prev = end;
	} else {
		bpf_map_update_elem(&stream_end, &skey, &end, BPF_ANY);
	}
	return v;
}

static __always_inline void add_latency(struct obs_value *v, __u32 which, __u64 start, __u64 now)
{
	if (!v || which >= OBS_LATENCIES || !start || now < start)
		return;
	__u64 ns = now - start;
	struct obs_latency *l = &v->latency[which];
	HIST_INC(l->hist, latency_bucket(ns), OBS_LATENCY_BUCKETS);
	__sync_fetch_and_add(&l->sum_ns, ns);
}

static __always_inline int on_queue(struct bio *bio, const bool btf)
{
	__u32 dev = disk_dev(READ(btf, bio->bi_bdev->bd_disk, bio, bi_bdev, bd_disk), btf);
	__u64 addr = (__u64)bio;

	if (target_dev && dev != target_dev)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	account(dev, bio_cgroup(bio, btf), READ(btf, bio->bi_opf, bio, bi_opf), OBS_STAGE_Q,
		READ(btf, bio->bi_iter.bi_sector, bio, bi_iter.bi_sector), READ(btf, bio->bi_iter.bi_size, bio, bi_iter.bi_size));
	bpf_map_update_elem(&bio_queued, &addr, &now, BPF_ANY);
	return 0;
}

/* The stage times of `rq`, created on first sight with its first bio's queue time. */
static __always_inline struct rq_times *times_for(struct request *rq, struct bio *bio)
{
	__u64 addr = (__u64)rq;
	struct rq_times *t = bpf_map_lookup_elem(&rq_inflight, &addr);

	if (t)
		return t;
	struct rq_times fresh = {};
	__u64 baddr = (__u64)bio;
	__u64 *queued = bpf_map_lookup_elem(&bio_queued, &baddr);
	if (queued) {
		fresh.queued = *queued;
		bpf_map_delete_elem(&bio_queued, &baddr);
	} else {
		count(OBS_MISS_QUEUE_TIME);
	}
	bpf_map_update_elem(&rq_inflight, &addr, &fresh, BPF_ANY);
	return bpf_map_lookup_elem(&rq_inflight, &addr);
}

static __always_inline int on_request(struct request *rq, __u32 stage, const bool btf)
{
	__u32 dev = disk_dev(READ(btf, rq->q->disk, rq, q, disk), btf);

	if (target_dev && dev != target_dev)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct bio *bio = READ(btf, rq->bio, rq, bio);
	struct obs_value *v = account(dev, bio_cgroup(bio, btf), READ(btf, rq->cmd_flags, rq, cmd_flags), stage,
				      READ(btf, rq->__sector, rq, __sector), READ(btf, rq->__data_len, rq, __data_len));
	struct rq_times *t = times_for(rq, bio);
	if (!t)
		return 0;
	if (stage == OBS_STAGE_I) {
		t->inserted = now;
	} else {
		t->issued = now;
		add_latency(v, OBS_LAT_ID, t->inserted, now);
	}
	return 0;
}

static __always_inline int on_complete(struct request *rq, unsigned int nr_bytes, const bool btf)
{
	__u32 dev = disk_dev(READ(btf, rq->q->disk, rq, q, disk), btf);
	__u64 addr = (__u64)rq;

	if (target_dev && dev != target_dev)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct obs_value *v = account(dev, bio_cgroup(READ(btf, rq->bio, rq, bio), btf), READ(btf, rq->cmd_flags, rq, cmd_flags),
				      OBS_STAGE_C, READ(btf, rq->__sector, rq, __sector), nr_bytes);
	struct rq_times *t = bpf_map_lookup_elem(&rq_inflight, &addr);
	if (!t) {
		count(OBS_MISS_ISSUE_TIME);
		return 0;
	}
	add_latency(v, OBS_LAT_QC, t->queued, now);
	add_latency(v, OBS_LAT_DC, t->issued, now);
	bpf_map_delete_elem(&rq_inflight, &addr);
	return 0;
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(btf_bio_queue, struct bio *bio)
{
	return on_queue(bio, true);
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(btf_rq_insert, struct request *rq)
{
	return on_request(rq, OBS_STAGE_I, true);
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(btf_rq_issue, struct request *rq)
{
	return on_request(rq, OBS_STAGE_D, true);
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(btf_rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	return on_complete(rq, nr_bytes, true);
}

SEC("raw_tp/block_bio_queue")
int BPF_PROG(raw_bio_queue, struct bio *bio)
{
	return on_queue(bio, false);
}

SEC("raw_tp/block_rq_insert")
int BPF_PROG(raw_rq_insert, struct request *rq)
{
	return on_request(rq, OBS_STAGE_I, false);
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(raw_rq_issue, struct request *rq)
{
	return on_request(rq, OBS_STAGE_D, false);
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(raw_rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	return on_complete(rq, nr_bytes, false);
}

char LICENSE[] SEC("license") = "GPL";
