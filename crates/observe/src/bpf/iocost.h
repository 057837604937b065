/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The layout shared by the IOCost programs (iocost.bpf.c) and the Rust reader (src/iocost.rs reads it
 * through the generated skeleton's types, checking sizes, so a stale build fails clearly).
 */
#ifndef IOSHARE_IOCOST_H
#define IOSHARE_IOCOST_H

#define IOC_MAX_DEVICES 64
#define IOC_MAX_GROUPS 4096

/* Events counted per cgroup (`ioc_group.events`); IOC_EV_NONE counts nothing. */
#define IOC_EV_ACTIVATE 0
#define IOC_EV_IDLE 1
#define IOC_EV_SHORTAGE 2
#define IOC_EV_TRANSFER 3
#define IOC_EV_ADJUST 4
#define IOC_EV_FORGIVE 5
#define IOC_EVENTS 6
#define IOC_EV_NONE IOC_EVENTS

/* One device's controller, as of `at_ns`. */
struct ioc_device {
	__u64 at_ns;         /* bpf_ktime_get_ns() of the last event that touched it */
	__u64 vrate;         /* vtime_base_rate: VTIME_PER_USEC (2^37 / 10^6) = 100% */
	__u64 period;        /* the period counter (cur_period) */
	__u64 vrate_events;  /* iocost_ioc_vrate_adj events seen */
	__s32 busy_level;
	__u32 period_us;
	__u32 missed_ppm[2]; /* read, write: latency targets missed in the last vrate event's period */
	__u32 rq_wait_pct;   /* time requests waited for a tag in that period, % */
	__s32 nr_lagging;    /* cgroups with IOs in flight longer than a period */
	__s32 nr_shortages;  /* cgroups short of budget */
	__u32 nr_active;     /* active cgroups walked at the last vrate event */
	__u32 nr_surpluses;  /* of them, donating (inuse below active) */
	__u32 pad;
};

/* One `iocost_ioc_vrate_adj` event, for the decision replay (the `periods` ring buffer): the
 * period's inputs and what the kernel decided. The busy level before it is the previous period's
 * record's, or 0 when the previous period has none (the kernel emits the event whenever the level
 * is not 0, changed, or IOs lag) or ended with no active cgroup (the timer then resets it). */
struct ioc_period {
	__u64 at_ns;
	__u64 period;        /* cur_period */
	__u64 vrate;         /* vtime_base_rate before the decision */
	__u64 new_vrate;     /* the event's new_vrate: the decision when the level asks to adjust */
	__u64 vrate_min;     /* in vtime_base_rate's units */
	__u64 vrate_max;
	__u32 dev;
	__s32 busy_level;    /* after the decision */
	__u32 missed_ppm[2];
	__u32 rq_wait_pct;
	__s32 nr_lagging;
	__s32 nr_shortages;
	__u32 rppm;          /* qos[QOS_RPPM], qos[QOS_WPPM]: targets' share, ppm */
	__u32 wppm;
	__u32 nr_active;     /* active cgroups at the event: none left means the timer resets the level */
};

/* One cgroup's donation decision in a period, with the inputs the kernel decided on (the
 * `donations` ring buffer): `iocost_inuse_transfer` for a donor (new_hwi: its target hweight_inuse),
 * `iocost_inuse_shortage` for a candidate that keeps its full weight (new_hwi: what it computed).
 * Read at the event: the budget after the kernel threw away what was above the target margin, and
 * hwm as the cgroup tree stands then. */
struct ioc_donation {
	__u64 at_ns;
	__u64 period;
	__u64 cgroup;
	__u64 usage_us;        /* usage_delta_us: the period's usage at the base vrate */
	__u64 inflight_vtime;  /* vtime - done_vtime */
	__u64 usage_dur_us;    /* now - the later of activated_at and period_at */
	__u64 vtime_base_rate;
	__s64 budget_vtime;    /* vnow - vtime */
	__u64 period_vtime;    /* vnow - period_at_vtime */
	__u64 margin_min;
	__u64 margin_low;
	__u64 margin_target;
	__u64 new_hwi;         /* the event's new_hw_inuse */
	__u32 dev;
	__u32 donated;         /* 1: transfer, 0: shortage */
	__u32 hwa;             /* hweight_active */
	__u32 hwi;             /* hweight_inuse before the decision */
	__u32 hwm;             /* hweight with its inuse at its active weight */
	__u32 waiting;         /* IOs wait for budget */
	__u32 in_debt;
	__u32 pad;
};

struct ioc_group_key {
	__u64 cgroup; /* kernfs id of the cgroup */
	__u32 dev;    /* MAJOR << 20 | MINOR */
	__u32 pad;
};

/* One cgroup's state on one device, as of `at_ns` (weights in WEIGHT_ONE = 2^16 units). */
struct ioc_group {
	__u64 at_ns;
	__u64 period;        /* the device's period counter then */
	__u64 active_period; /* the last period the cgroup issued IO in */
	__u64 abs_vdebt;     /* debt, vtime */
	__u64 delay_ns;      /* the delay in force, ns */
	__u64 usage_delta_us;/* usage in the last flushed period, us */
	__u64 usage_us;      /* last_stat: what io.stat shows as cost.usage */
	__u64 wait_us;       /* cost.wait */
	__u64 indebt_us;     /* cost.indebt */
	__u64 indelay_us;    /* cost.indelay */
	__u64 events[IOC_EVENTS];
	__u32 level;
	__u32 weight;
	__u32 active;
	__u32 inuse;
	__u32 hweight_active;
	__u32 hweight_inuse;
};

#endif
