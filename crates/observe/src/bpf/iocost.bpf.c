// SPDX-License-Identifier: Apache-2.0
/*
 * ioshare observe --iocost: the kernel's IOCost controller (block/blk-iocost.c) seen from its own
 * tracepoints, without debug info, drgn or module parameters.
 *
 * The `iocost` tracepoints hand over the controller's own structures: `struct ioc` (one per device)
 * at `iocost_ioc_vrate_adj`, `struct ioc_gq` (one per device and cgroup) at `iocost_iocg_activate`,
 * `_idle`, `iocost_inuse_shortage`, `_transfer`, `_adjust` and `iocost_iocg_forgive_debt`. Each
 * program reads the fields it needs with CO-RE (offsets from the running kernel's BTF, so a kernel
 * whose structs moved still reads right, and one whose fields are gone refuses to load) and keeps the
 * latest state per device in `devices` and per (device, cgroup) in `groups`; user space reads the
 * maps when it wants a snapshot. For a reader that records the kernel's decisions, the vrate event
 * is also sent whole to the `periods` ring buffer, and each donation decision (`_transfer` for a
 * donor, `_shortage` for a candidate that keeps its weight) to `donations` with the cgroup state it
 * was decided on (at most one per active cgroup and period, never per IO).
 *
 * When it runs: `iocost_ioc_vrate_adj` fires in the period timer when vrate moves, when the busy level
 * changes, or when IOs lag; it carries that period's missed-latency ppm, request-wait %, lagging and
 * shortage counts, and, as it runs under the device's lock after the period's statistics were
 * flushed, the program also walks the device's active cgroups (`ioc->active_iocgs`, at most
 * MAX_WALK) and their ancestors, so a busy device has every active cgroup's figures refreshed each
 * such period. The cgroup events refresh their cgroup (and its ancestors) whenever they fire;
 * `iocost_iocg_idle` fires as a cgroup goes idle, when its statistics are final (the kernel's io.stat
 * shows the same `last_stat` from then on). So every figure is as of the last event that touched it,
 * and carries that time.
 *
 * The programs are raw_tp: every read goes through bpf_probe_read_kernel (BPF_CORE_READ) on plain
 * addresses, which the walks below need (a typed tp_btf pointer cannot be offset by a variable), and
 * these events come a few times per period (milliseconds apart), not per IO, so the helper calls cost
 * nothing that matters.
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "iocost.h"

/* Active cgroups walked per vrate event, and ancestor levels recorded per cgroup. */
#define MAX_WALK 64
#define MAX_LEVELS 8

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOC_MAX_DEVICES);
	__type(key, __u32);
	__type(value, struct ioc_device);
} devices SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOC_MAX_GROUPS);
	__type(key, struct ioc_group_key);
	__type(value, struct ioc_group);
} groups SEC(".maps");

/* Every vrate event, for a reader that records the kernel's decisions (see struct ioc_period). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} periods SEC(".maps");

/* Each cgroup's donation decision, for the same reader (see struct ioc_donation). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} donations SEC(".maps");

/* Events that could not be kept (a full map), for user space to report. */
__u64 dropped = 0;
/* Period and donation records lost to a full ring buffer (nobody reading, or reading too late). */
__u64 decisions_lost = 0;
/* Never written: they only make the skeleton carry the ring buffers' records. */
struct ioc_period period_layout = {};
struct ioc_donation donation_layout = {};

static __always_inline __u32 ioc_dev(struct ioc *ioc)
{
	struct gendisk *disk;

	/* Linux 6.2 moved the disk from the queue (rqos.q->disk) into the rq_qos itself (rqos.disk). */
	if (bpf_core_field_exists(ioc->rqos.disk))
		disk = BPF_CORE_READ(ioc, rqos.disk);
	else
		disk = BPF_CORE_READ(ioc, rqos.q, disk);
	int major = BPF_CORE_READ(disk, major);
	int minor = BPF_CORE_READ(disk, first_minor);
	return ((__u32)major << 20) | (__u32)minor;
}

/* The device-wide state every event can see: vrate, busy level, period. */
static __always_inline struct ioc_device *touch_device(struct ioc *ioc)
{
	__u32 dev = ioc_dev(ioc);
	struct ioc_device *d = bpf_map_lookup_elem(&devices, &dev);

	if (!d) {
		struct ioc_device fresh = {};
		bpf_map_update_elem(&devices, &dev, &fresh, BPF_NOEXIST);
		d = bpf_map_lookup_elem(&devices, &dev);
		if (!d) {
			__sync_fetch_and_add(&dropped, 1);
			return 0;
		}
	}
	d->at_ns = bpf_ktime_get_ns();
	d->vrate = BPF_CORE_READ(ioc, vtime_base_rate);
	d->busy_level = BPF_CORE_READ(ioc, busy_level);
	d->period = BPF_CORE_READ(ioc, cur_period.counter);
	d->period_us = BPF_CORE_READ(ioc, period_us);
	return d;
}

/* Copies one cgroup's state into `groups`; counts `event` (IOC_EV_*) for it unless IOC_EV_NONE. */
static __noinline int record_group(struct ioc_gq *iocg, __u32 dev, __u64 period, __u32 event)
{
	if (!iocg)
		return 0;
	struct blkcg_gq *blkg = BPF_CORE_READ(iocg, pd.blkg);
	struct ioc_group_key key = { .cgroup = BPF_CORE_READ(blkg, blkcg, css.cgroup, kn, id), .dev = dev };
	struct ioc_group *g = bpf_map_lookup_elem(&groups, &key);

	if (!g) {
		struct ioc_group fresh = {};
		bpf_map_update_elem(&groups, &key, &fresh, BPF_NOEXIST);
		g = bpf_map_lookup_elem(&groups, &key);
		if (!g) {
			__sync_fetch_and_add(&dropped, 1);
			return 0;
		}
	}
	g->at_ns = bpf_ktime_get_ns();
	g->period = period;
	g->active_period = BPF_CORE_READ(iocg, active_period.counter);
	g->level = BPF_CORE_READ(iocg, level);
	g->weight = BPF_CORE_READ(iocg, weight);
	g->active = BPF_CORE_READ(iocg, active);
	g->inuse = BPF_CORE_READ(iocg, inuse);
	g->hweight_active = BPF_CORE_READ(iocg, hweight_active);
	g->hweight_inuse = BPF_CORE_READ(iocg, hweight_inuse);
	g->abs_vdebt = BPF_CORE_READ(iocg, abs_vdebt);
	g->delay_ns = BPF_CORE_READ(iocg, delay);
	g->usage_delta_us = BPF_CORE_READ(iocg, usage_delta_us);
	g->usage_us = BPF_CORE_READ(iocg, last_stat.usage_us);
	g->wait_us = BPF_CORE_READ(iocg, last_stat.wait_us);
	g->indebt_us = BPF_CORE_READ(iocg, last_stat.indebt_us);
	g->indelay_us = BPF_CORE_READ(iocg, last_stat.indelay_us);
	/* The idle event comes just before the kernel zeroes the cgroup's active and inuse weights. */
	if (event == IOC_EV_IDLE) {
		g->active = 0;
		g->inuse = 0;
	}
	if (event < IOC_EVENTS)
		g->events[event] += 1;
	return 0;
}

/* Records `iocg` and its ancestors (their statistics include its own). */
static __always_inline void record_with_ancestors(struct ioc_gq *iocg, __u32 dev, __u64 period, __u32 event)
{
	int level = BPF_CORE_READ(iocg, level);
	__u64 ancestors = (__u64)iocg + bpf_core_field_offset(struct ioc_gq, ancestors);

	record_group(iocg, dev, period, event);
	for (int i = 0; i < MAX_LEVELS; i++) {
		if (i >= level)
			break;
		struct ioc_gq *up = 0;
		bpf_probe_read_kernel(&up, sizeof(up), (void *)(ancestors + (__u64)i * sizeof(void *)));
		if (up)
			record_group(up, dev, period, IOC_EV_NONE);
	}
}

static __always_inline int on_group_event(struct ioc_gq *iocg, __u32 event)
{
	struct ioc *ioc = BPF_CORE_READ(iocg, ioc);
	struct ioc_device *d = touch_device(ioc);

	if (!d)
		return 0;
	record_with_ancestors(iocg, ioc_dev(ioc), d->period, event);
	return 0;
}

/* The walk of a device's active cgroups, one bpf_loop step per cgroup. */
struct walk {
	__u64 head;        /* &ioc->active_iocgs: the list's end */
	__u64 pos;         /* the current entry's list node */
	__u64 link_offset; /* offsetof(struct ioc_gq, active_list) */
	__u64 period;
	__u32 dev;
	__u32 active;
	__u32 surplus;
};

static long walk_one(__u32 index, struct walk *w)
{
	if (!w->pos || w->pos == w->head)
		return 1;
	struct ioc_gq *iocg = (struct ioc_gq *)(w->pos - w->link_offset);
	w->active += 1;
	if (BPF_CORE_READ(iocg, inuse) < BPF_CORE_READ(iocg, active))
		w->surplus += 1;
	record_with_ancestors(iocg, w->dev, w->period, IOC_EV_NONE);
	struct list_head *node = (struct list_head *)w->pos;
	w->pos = (__u64)BPF_CORE_READ(node, next);
	return 0;
}

static __always_inline int on_vrate_adj(struct ioc *ioc, __u64 new_vrate, __u32 *missed_ppm, __u32 rq_wait_pct,
					int nr_lagging, int nr_shortages)
{
	struct ioc_device *d = touch_device(ioc);

	if (!d)
		return 0;
	/* The kernel adjusts vrate (to new_vrate, stored right after this event) unless the busy level is 0,
	 * or below 0 while IOs lag; then new_vrate is only the current effective rate. */
	bool adjusted = !(d->busy_level == 0 || (d->busy_level < 0 && nr_lagging));
	if (adjusted)
		d->vrate = new_vrate;
	bpf_probe_read_kernel(&d->missed_ppm, sizeof(d->missed_ppm), missed_ppm);
	d->rq_wait_pct = rq_wait_pct;
	d->nr_lagging = nr_lagging;
	d->nr_shortages = nr_shortages;
	d->vrate_events += 1;

	/* The list is stable here: the kernel holds the device's lock around this event. bpf_loop has the
	 * verifier check one step instead of every step of an unrolled walk. */
	struct walk w = {
		.head = (__u64)ioc + bpf_core_field_offset(struct ioc, active_iocgs),
		.pos = (__u64)BPF_CORE_READ(ioc, active_iocgs.next),
		.link_offset = bpf_core_field_offset(struct ioc_gq, active_list),
		.period = d->period,
		.dev = ioc_dev(ioc),
	};
	bpf_loop(MAX_WALK, walk_one, &w, 0);
	d->nr_active = w.active;
	d->nr_surpluses = w.surplus;

	struct ioc_period *p = bpf_ringbuf_reserve(&periods, sizeof(*p), 0);
	if (p) {
		p->at_ns = d->at_ns;
		p->period = d->period;
		/* touch_device read vtime_base_rate before the kernel stores the new rate. */
		p->vrate = BPF_CORE_READ(ioc, vtime_base_rate);
		p->new_vrate = new_vrate;
		p->vrate_min = BPF_CORE_READ(ioc, vrate_min);
		p->vrate_max = BPF_CORE_READ(ioc, vrate_max);
		p->dev = ioc_dev(ioc);
		p->busy_level = d->busy_level;
		p->missed_ppm[0] = d->missed_ppm[0];
		p->missed_ppm[1] = d->missed_ppm[1];
		p->rq_wait_pct = rq_wait_pct;
		p->nr_lagging = nr_lagging;
		p->nr_shortages = nr_shortages;
		p->rppm = BPF_CORE_READ(ioc, params.qos[0]);
		p->wppm = BPF_CORE_READ(ioc, params.qos[2]);
		p->nr_active = w.active;
		bpf_ringbuf_submit(p, 0);
	} else {
		__sync_fetch_and_add(&decisions_lost, 1);
	}
	return 0;
}

SEC("raw_tp/iocost_ioc_vrate_adj")
int BPF_PROG(iocost_ioc_vrate_adj, struct ioc *ioc, __u64 new_vrate, __u32 *missed_ppm, __u32 rq_wait_pct,
	     int nr_lagging, int nr_shortages)
{
	return on_vrate_adj(ioc, new_vrate, missed_ppm, rq_wait_pct, nr_lagging, nr_shortages);
}

/* The cgroup's hweight with its own inuse at its active weight (kernel current_hweight_max), from
 * the tree as it stands. */
static __always_inline __u32 hweight_max(struct ioc_gq *iocg)
{
	__u64 ancestors = (__u64)iocg + bpf_core_field_offset(struct ioc_gq, ancestors);
	int level = BPF_CORE_READ(iocg, level);
	__u64 hwm = 65536, inuse = BPF_CORE_READ(iocg, active);

	for (int i = 0; i < MAX_LEVELS; i++) {
		int lvl = level - 1 - i;
		if (lvl < 0)
			break;
		struct ioc_gq *parent = 0, *child = 0;
		bpf_probe_read_kernel(&parent, sizeof(parent), (void *)(ancestors + (__u64)lvl * sizeof(void *)));
		bpf_probe_read_kernel(&child, sizeof(child), (void *)(ancestors + (__u64)(lvl + 1) * sizeof(void *)));
		if (!parent || !child)
			return 0;
		__u64 child_inuse_sum = BPF_CORE_READ(parent, child_inuse_sum) + inuse - BPF_CORE_READ(child, inuse);
		__u64 child_active_sum = BPF_CORE_READ(parent, child_active_sum);
		if (!child_inuse_sum || !child_active_sum)
			return 0;
		hwm = hwm * inuse / child_inuse_sum;
		inuse = (BPF_CORE_READ(parent, active) * child_inuse_sum + child_active_sum - 1) / child_active_sum;
	}
	return hwm > 1 ? hwm : 1;
}

/* A donation decision: the cgroup's state and the event's verdict into `donations`, and the cgroup
 * counted as any event. */
static __always_inline int on_donation(struct ioc_gq *iocg, struct ioc_now *now, __u64 new_hwi, bool donated,
				       __u32 event)
{
	struct ioc *ioc = BPF_CORE_READ(iocg, ioc);
	struct ioc_device *d = touch_device(ioc);

	if (!d)
		return 0;
	record_with_ancestors(iocg, ioc_dev(ioc), d->period, event);
	struct ioc_donation *r = bpf_ringbuf_reserve(&donations, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&decisions_lost, 1);
		return 0;
	}
	__u64 now_us = BPF_CORE_READ(now, now), vnow = BPF_CORE_READ(now, vnow);
	__u64 vtime = BPF_CORE_READ(iocg, vtime.counter), done = BPF_CORE_READ(iocg, done_vtime.counter);
	__u64 activated_at = BPF_CORE_READ(iocg, activated_at), period_at = BPF_CORE_READ(ioc, period_at);
	__u64 waitq = (__u64)iocg + bpf_core_field_offset(struct ioc_gq, waitq) +
		      bpf_core_field_offset(struct wait_queue_head, head);
	struct blkcg_gq *blkg = BPF_CORE_READ(iocg, pd.blkg);

	r->at_ns = d->at_ns;
	r->period = d->period;
	r->cgroup = BPF_CORE_READ(blkg, blkcg, css.cgroup, kn, id);
	r->usage_us = BPF_CORE_READ(iocg, usage_delta_us);
	r->inflight_vtime = vtime - done;
	r->usage_dur_us = now_us - (activated_at > period_at ? activated_at : period_at);
	r->vtime_base_rate = BPF_CORE_READ(ioc, vtime_base_rate);
	r->budget_vtime = (__s64)(vnow - vtime);
	r->period_vtime = vnow - BPF_CORE_READ(ioc, period_at_vtime);
	r->margin_min = BPF_CORE_READ(ioc, margins.min);
	r->margin_low = BPF_CORE_READ(ioc, margins.low);
	r->margin_target = BPF_CORE_READ(ioc, margins.target);
	r->new_hwi = new_hwi;
	r->dev = ioc_dev(ioc);
	r->donated = donated;
	r->hwa = BPF_CORE_READ(iocg, hweight_active);
	r->hwi = BPF_CORE_READ(iocg, hweight_inuse);
	r->hwm = hweight_max(iocg);
	r->waiting = (__u64)BPF_CORE_READ(iocg, waitq.head.next) != waitq;
	r->in_debt = BPF_CORE_READ(iocg, abs_vdebt) != 0;
	r->pad = 0;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* The donation events: iocg, its path, the timer's clock, inuse and hweight_inuse before and after. */
#define DONATION_EVENT(tp, donated, event)                                                              \
	SEC("raw_tp/" #tp)                                                                              \
	int BPF_PROG(tp, struct ioc_gq *iocg, const char *path, struct ioc_now *now, __u32 old_inuse,   \
		     __u32 new_inuse, __u64 old_hwi, __u64 new_hwi)                                     \
	{                                                                                               \
		return on_donation(iocg, now, new_hwi, donated, event);                                 \
	}

DONATION_EVENT(iocost_inuse_shortage, false, IOC_EV_SHORTAGE)
DONATION_EVENT(iocost_inuse_transfer, true, IOC_EV_TRANSFER)

/* The program of one cgroup event: the iocg is the first argument of each. */
#define GROUP_EVENT(tp, event)                          \
	SEC("raw_tp/" #tp)                              \
	int BPF_PROG(tp, struct ioc_gq *iocg)           \
	{                                               \
		return on_group_event(iocg, event);     \
	}

GROUP_EVENT(iocost_iocg_activate, IOC_EV_ACTIVATE)
GROUP_EVENT(iocost_iocg_idle, IOC_EV_IDLE)
GROUP_EVENT(iocost_inuse_adjust, IOC_EV_ADJUST)
GROUP_EVENT(iocost_iocg_forgive_debt, IOC_EV_FORGIVE)

char LICENSE[] SEC("license") = "GPL";
