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
 * user space reads the maps when it wants a snapshot.
 *
 * Cost (these programs run on every IO, so every map operation counts; measured per program with
 * `ioshare observe --cost`, see the README):
 * - At most one hash lookup per IO finds the series (at Q): `slots` maps (device, cgroup, operation)
 *   to an index in the per-CPU `stats` array and (device, cgroup) to an index in the shared
 *   `stream_end` array; a per-CPU cache of the last series Q found spares even that lookup while one
 *   cgroup's IO to one device streams through a CPU (Q, measured: 216-328 -> 187-292 ns per run). Array
 *   lookups are inlined by the verifier; per-CPU counters need no atomic instructions. Plain `+=` is
 *   safe: a program cannot nest in itself on one CPU (the kernel skips recursive runs), and programs
 *   of different stages that may nest (C in an interrupt during Q) write disjoint fields.
 * - One LRU entry per IO (`inflight`, keyed by the request's first bio, or the request itself when it
 *   has none) carries the Q/I/D times and the series' indices from Q to C: written at Q, looked up at
 *   I and D, marked done at C. I, D and C do not walk the bio's cgroup chain again. Entries are not
 *   deleted: bios are recycled, so Q mostly finds its bio's old entry and rewrites it in place (an
 *   LRU insert was measured at ~280 of Q's ~420 ns, and C deleted the entry again).
 *
 * The light mode (the default) attaches only the C program, in its light form: each completed request
 * is counted at C (IOs, bytes, size and seek histograms) through a per-CPU cache of the last series,
 * and its latencies are taken from the timestamps the block layer keeps in the request itself
 * (`start_time_ns`, set when the request is made, and `io_start_time_ns`, set at issue when the queue
 * keeps latency statistics) for one request in `latency_every` per CPU: one program run per IO, no
 * in-flight entry and, for the requests not sampled, no clock read.
 *
 * Bounds: `slots` and the arrays hold OBS_MAX_SLOTS series; IO of further series is counted in
 * `counters` and dropped. `inflight` is an LRU hash, so IOs that never complete as themselves (a bio
 * merged into another's request, a request failed before issue, the observer attached mid-flight) are
 * evicted instead of leaking; what is missing at completion is counted, not guessed.
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "observe.h"

/* Set by the loader before load: only this device (the kernel's MAJOR << 20 | MINOR), 0 = all. */
const volatile __u32 target_dev = 0;
/* Cleared by the loader when only Q is attached: no in-flight entries (nothing would complete them). */
const volatile bool track_inflight = true;
/* Light mode: latencies of one completed request in this many per CPU (a power of two; 1 = all). */
const volatile __u32 latency_every = 1;

/* Next free index in `stats` and in `stream_end`. */
__u32 next_stats = 0;
__u32 next_stream = 0;
/*
 * Bumped by user space each time the programs are attached again after a pause: an in-flight entry is
 * live only in the generation that made it, so an IO caught by a pause, whose bio is then reused by an
 * IO queued while detached, does not lend it its stage times.
 */
__u64 generation = 1;

#define REQ_OP_MASK 0xff

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OBS_MAX_SLOTS);
	__type(key, struct obs_key);
	__type(value, struct obs_slot);
} slots SEC(".maps");

struct stream_key {
	__u64 cgroup;
	__u32 dev;
	__u32 pad;
};

/* Index in `stream_end` of each (device, cgroup), used only when a series is created. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OBS_MAX_SLOTS);
	__type(key, struct stream_key);
	__type(value, __u32);
} streams SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OBS_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct obs_value);
} stats SEC(".maps");

/* Per stream and stage: 1 + the end sector of the previous IO (0 = none yet). */
struct stream_state {
	__u64 end[OBS_STAGES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OBS_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct stream_state);
} stream_end SEC(".maps");

/*
 * An IO from Q to C: its stage times and its series. `live` (the generation that made it) until C,
 * then 0: the entry of a completed IO stays
 * in the map, so that the next IO of a recycled bio (the block layer reuses bios from per-CPU caches)
 * finds it and rewrites it in place, a lookup instead of an LRU insert and delete.
 */
struct io_state {
	__u64 queued;
	__u64 inserted;
	__u64 issued;
	struct obs_slot slot;
	__u64 live;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, OBS_MAX_INFLIGHT);
	__type(key, __u64);
	__type(value, struct io_state);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OBS_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/*
 * The last series a program found on each CPU (see slot_for), and (light C only) how many requests it
 * completed there, which picks the ones whose latencies are sampled.
 */
struct series_cache {
	struct obs_key key;
	struct obs_slot slot;
	__u64 valid;
	__u64 completed;
};

/* Q's cache and the light C program's: one each, as C may run in an interrupt in the middle of Q. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct series_cache);
} q_last_series SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct series_cache);
} c_last_series SEC(".maps");

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
#define HIST_INC(hist, b, n)               \
	do {                               \
		__u32 __b = (b);           \
		barrier_var(__b);          \
		if (__b < (n))             \
			(hist)[__b] += 1;  \
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

/*
 * Finds or makes the index in `table` for `key`, taking a fresh one from `next` (bounded by `max`).
 * BPF_NOEXIST: when another CPU made it meanwhile, its index is used (the one taken here stays unused).
 */
static __always_inline __u32 *index_for(void *table, void *key, __u32 *next, __u32 max)
{
	__u32 *found = bpf_map_lookup_elem(table, key);
	if (found)
		return found;
	__u32 fresh = __sync_fetch_and_add(next, 1);
	if (fresh >= max)
		return 0;
	bpf_map_update_elem(table, key, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(table, key);
}

/* The indices of series (dev, cgroup, op), made on first sight; 0 (and a counted drop) when full. */
static __always_inline struct obs_slot *slot_made(struct obs_key *key)
{
	struct obs_slot *slot = bpf_map_lookup_elem(&slots, key);

	if (slot)
		return slot;
	struct stream_key skey = { .cgroup = key->cgroup, .dev = key->dev };
	__u32 *stream = index_for(&streams, &skey, &next_stream, OBS_MAX_SLOTS);
	__u32 fresh = __sync_fetch_and_add(&next_stats, 1);
	if (!stream || fresh >= OBS_MAX_SLOTS) {
		count(OBS_DROP_STATS_FULL);
		return 0;
	}
	struct obs_slot made = { .stats = fresh, .stream = *stream };
	bpf_map_update_elem(&slots, key, &made, BPF_NOEXIST);
	slot = bpf_map_lookup_elem(&slots, key);
	if (!slot)
		count(OBS_DROP_STATS_FULL);
	return slot;
}

/*
 * The series of (dev, cgroup, op) into `*out`; false (a counted drop) when the table is full. With a
 * `cache` (Q's, or the light C program's), the last series this CPU's program found is tried before
 * the hash table: a stream of IO from one cgroup to one device hits it, sparing the `slots` hash
 * lookup (~40 ns). Each cache has one program, so nothing else writes it while that program runs (a
 * program never nests in itself on one CPU), and a series' indices never change once made, so a hit
 * is always right.
 */
static __always_inline bool slot_for(__u32 dev, __u64 cgroup, __u32 op, struct obs_slot *out,
				     struct series_cache *last)
{
	struct obs_key key = { .cgroup = cgroup, .dev = dev, .op = op };

	if (last && last->key.cgroup == cgroup && last->key.dev == dev && last->key.op == op && last->valid) {
		*out = last->slot;
		return true;
	}
	struct obs_slot *slot = slot_made(&key);
	if (!slot)
		return false;
	*out = *slot;
	if (last) {
		last->key = key;
		last->slot = *out;
		last->valid = 1;
	}
	return true;
}

/* Counts one IO of `bytes` at `sector` at `stage` of series `slot`; returns its counters. */
static __always_inline struct obs_value *account(struct obs_slot slot, __u32 stage, sector_t sector, __u64 bytes)
{
	__u32 si = slot.stats, ti = slot.stream;
	struct obs_value *v = bpf_map_lookup_elem(&stats, &si);
	struct stream_state *st = bpf_map_lookup_elem(&stream_end, &ti);

	if (!v || !st || stage >= OBS_STAGES)
		return 0;
	struct obs_stage *s = &v->stage[stage];
	s->ios += 1;
	s->bytes += bytes;
	HIST_INC(s->size_hist, size_bucket(bytes), OBS_SIZE_BUCKETS);

	__u64 last = st->end[stage];
	st->end[stage] = sector + (bytes >> 9) + 1;
	if (last) {
		last -= 1;
		__u64 distance = sector >= last ? sector - last : last - sector;
		HIST_INC(s->seek_hist, seek_bucket(distance), OBS_SEEK_BUCKETS);
		s->seek_sum += distance;
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
	l->sum_ns += ns;
}

/* This CPU's entry of a series cache map. */
static __always_inline struct series_cache *cache_of(void *map)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(map, &zero);
}

static __always_inline int on_queue(struct bio *bio, const bool btf)
{
	__u32 dev = disk_dev(READ(btf, bio->bi_bdev->bd_disk, bio, bi_bdev, bd_disk), btf);

	if (target_dev && dev != target_dev)
		return 0;
	struct io_state fresh = { .live = generation };
	if (!slot_for(dev, bio_cgroup(bio, btf), op_of(READ(btf, bio->bi_opf, bio, bi_opf)), &fresh.slot,
		      cache_of(&q_last_series)))
		return 0;
	account(fresh.slot, OBS_STAGE_Q, READ(btf, bio->bi_iter.bi_sector, bio, bi_iter.bi_sector),
		READ(btf, bio->bi_iter.bi_size, bio, bi_iter.bi_size));
	/* Only latencies need the queue time: Q alone (the agent) reads no clock. */
	if (!track_inflight)
		return 0;
	fresh.queued = bpf_ktime_get_ns();
	__u64 key = (__u64)bio;
	struct io_state *io = bpf_map_lookup_elem(&inflight, &key);
	if (io)
		*io = fresh;
	else
		bpf_map_update_elem(&inflight, &key, &fresh, BPF_ANY);
	return 0;
}

/* The key of a request's `inflight` entry: its first bio (the one queued at Q), or itself. */
static __always_inline __u64 io_key(struct request *rq, const bool btf)
{
	struct bio *bio = READ(btf, rq->bio, rq, bio);
	return bio ? (__u64)bio : (__u64)rq;
}

/* The request's `inflight` entry; made (without a queue time, counted) when Q was not seen. */
static __always_inline struct io_state *io_for(struct request *rq, __u32 dev, __u64 key, const bool btf)
{
	struct io_state *io = bpf_map_lookup_elem(&inflight, &key);

	if (io && io->live == generation)
		return io;
	count(OBS_MISS_QUEUE_TIME);
	struct io_state fresh = { .live = generation };
	if (!slot_for(dev, bio_cgroup(READ(btf, rq->bio, rq, bio), btf), op_of(READ(btf, rq->cmd_flags, rq, cmd_flags)),
		      &fresh.slot, 0))
		return 0;
	if (io) {
		*io = fresh;
		return io;
	}
	bpf_map_update_elem(&inflight, &key, &fresh, BPF_ANY);
	return bpf_map_lookup_elem(&inflight, &key);
}

static __always_inline int on_request(struct request *rq, __u32 stage, const bool btf)
{
	__u32 dev = disk_dev(READ(btf, rq->q->disk, rq, q, disk), btf);

	if (target_dev && dev != target_dev)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct io_state *io = io_for(rq, dev, io_key(rq, btf), btf);
	if (!io)
		return 0;
	struct obs_value *v = account(io->slot, stage, READ(btf, rq->__sector, rq, __sector),
				      READ(btf, rq->__data_len, rq, __data_len));
	if (stage == OBS_STAGE_I) {
		io->inserted = now;
	} else {
		io->issued = now;
		add_latency(v, OBS_LAT_ID, io->inserted, now);
	}
	return 0;
}

static __always_inline int on_complete(struct request *rq, unsigned int nr_bytes, const bool btf)
{
	__u32 dev = disk_dev(READ(btf, rq->q->disk, rq, q, disk), btf);

	if (target_dev && dev != target_dev)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 key = io_key(rq, btf);
	struct io_state *io = bpf_map_lookup_elem(&inflight, &key);
	struct obs_slot slot;
	if (io && io->live == generation) {
		slot = io->slot;
	} else {
		io = 0;
		count(OBS_MISS_ISSUE_TIME);
		if (!slot_for(dev, bio_cgroup(READ(btf, rq->bio, rq, bio), btf),
			      op_of(READ(btf, rq->cmd_flags, rq, cmd_flags)), &slot, 0))
			return 0;
	}
	struct obs_value *v = account(slot, OBS_STAGE_C, READ(btf, rq->__sector, rq, __sector), nr_bytes);
	if (io) {
		add_latency(v, OBS_LAT_QC, io->queued, now);
		add_latency(v, OBS_LAT_DC, io->issued, now);
		io->live = 0;
	}
	return 0;
}

/*
 * The light mode's only program: counts the request at C and, for one in `latency_every` per CPU, adds
 * its latencies from the request's own timestamps (Q->C from when the request was made, which for the
 * request's first bio is just after Q; D->C from its issue when the queue keeps that time, else
 * counted as missing).
 */
static __always_inline int on_complete_light(struct request *rq, unsigned int nr_bytes, const bool btf)
{
	__u32 dev = disk_dev(READ(btf, rq->q->disk, rq, q, disk), btf);

	if (target_dev && dev != target_dev)
		return 0;
	struct series_cache *last = cache_of(&c_last_series);
	struct obs_slot slot;
	if (!last || !slot_for(dev, bio_cgroup(READ(btf, rq->bio, rq, bio), btf),
			       op_of(READ(btf, rq->cmd_flags, rq, cmd_flags)), &slot, last))
		return 0;
	struct obs_value *v = account(slot, OBS_STAGE_C, READ(btf, rq->__sector, rq, __sector), nr_bytes);
	last->completed += 1;
	if (!v || (last->completed & (latency_every - 1)))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 made = READ(btf, rq->start_time_ns, rq, start_time_ns);
	__u64 issued = READ(btf, rq->io_start_time_ns, rq, io_start_time_ns);
	if (!made)
		count(OBS_MISS_QUEUE_TIME);
	if (!issued)
		count(OBS_MISS_ISSUE_TIME);
	add_latency(v, OBS_LAT_QC, made, now);
	add_latency(v, OBS_LAT_DC, issued, now);
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

SEC("tp_btf/block_rq_complete")
int BPF_PROG(btf_rq_complete_light, struct request *rq, int error, unsigned int nr_bytes)
{
	return on_complete_light(rq, nr_bytes, true);
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

SEC("raw_tp/block_rq_complete")
int BPF_PROG(raw_rq_complete_light, struct request *rq, int error, unsigned int nr_bytes)
{
	return on_complete_light(rq, nr_bytes, false);
}

char LICENSE[] SEC("license") = "GPL";
