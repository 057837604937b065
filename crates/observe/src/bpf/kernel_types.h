/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The few kernel types the observer reads, declared by hand instead of a generated vmlinux.h.
 *
 * Every struct carries `preserve_access_index`, so clang emits CO-RE relocations by field *name*:
 * libbpf rewrites each offset at load time from the running kernel's BTF (/sys/kernel/btf/vmlinux).
 * Only the fields used are declared, and their order here means nothing. Why not a generated
 * vmlinux.h: it would need bpftool and a BTF-enabled kernel on the *build* machine (CI containers
 * may have neither) and ~100k lines per build, while these structs compile in milliseconds and
 * still relocate against whatever kernel loads them (checked: 6.18 here, 6.1 in the lab guest).
 */
#ifndef IOSHARE_KERNEL_TYPES_H
#define IOSHARE_KERNEL_TYPES_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed int __s32;
typedef signed long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u64 sector_t;
typedef __u32 dev_t;
typedef __u32 blk_opf_t;
typedef _Bool bool;
#define true 1
#define false 0

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct kernfs_node {
	__u64 id;
};

struct cgroup {
	struct kernfs_node *kn;
};

struct cgroup_subsys_state {
	struct cgroup *cgroup;
};

struct blkcg {
	struct cgroup_subsys_state css;
};

struct blkcg_gq {
	struct blkcg *blkcg;
};

struct gendisk {
	int major;
	int first_minor;
};

struct block_device {
	struct gendisk *bd_disk;
};

struct bvec_iter {
	sector_t bi_sector;
	unsigned int bi_size;
};

struct bio {
	struct block_device *bi_bdev;
	blk_opf_t bi_opf;
	struct bvec_iter bi_iter;
	struct blkcg_gq *bi_blkg;
};

struct request_queue {
	struct gendisk *disk;
};

struct request {
	struct request_queue *q;
	blk_opf_t cmd_flags;
	sector_t __sector;
	unsigned int __data_len;
	struct bio *bio;
	__u64 start_time_ns;    /* set when the request is made, if the queue keeps IO statistics or has a scheduler */
	__u64 io_start_time_ns; /* set at issue, if the queue keeps latency statistics (wbt, blk-iolatency) */
};

/* blk-iocost.c's own structs (in the kernel's BTF although private to that file). */
typedef struct {
	__s64 counter;
} atomic64_t;

struct list_head {
	struct list_head *next;
	struct list_head *prev;
};

struct rq_qos {
	struct request_queue *q; /* up to Linux 6.1 */
	struct gendisk *disk;    /* from Linux 6.2 */
};

/* The QoS parameters in force (QOS_RPPM = 0, QOS_WPPM = 2: the share of IOs that must meet the
 * latency targets, ppm). */
struct ioc_params {
	__u32 qos[6];
};

/* Budget margins, vtime: below `min` no donation, above `low` a full-weight cgroup may donate,
 * `target` what a donor keeps. */
struct ioc_margins {
	__s64 min;
	__s64 low;
	__s64 target;
};

/* The period timer's clock: wall time in µs and the device's vtime. */
struct ioc_now {
	__u64 now;
	__u64 vnow;
};

struct ioc {
	struct rq_qos rqos;
	struct ioc_params params;
	struct ioc_margins margins;
	__u64 period_at;       /* the period's start, µs */
	__u64 period_at_vtime; /* and in vtime */
	__u32 period_us;
	__u64 vrate_min;
	__u64 vrate_max;
	struct list_head active_iocgs;
	__u64 vtime_base_rate;
	atomic64_t cur_period;
	int busy_level;
};

struct blkg_policy_data {
	struct blkcg_gq *blkg;
};

struct iocg_stat {
	__u64 usage_us;
	__u64 wait_us;
	__u64 indebt_us;
	__u64 indelay_us;
};

struct wait_queue_head {
	struct list_head head;
};

struct ioc_gq {
	struct blkg_policy_data pd;
	struct ioc *ioc;
	atomic64_t vtime;
	atomic64_t done_vtime;
	__u64 activated_at; /* µs */
	__u64 child_active_sum;
	__u64 child_inuse_sum;
	struct wait_queue_head waitq;
	__u32 weight;
	__u32 active;
	__u32 inuse;
	__u64 abs_vdebt;
	__u64 delay;
	atomic64_t active_period;
	struct list_head active_list;
	__u32 hweight_active;
	__u32 hweight_inuse;
	struct iocg_stat last_stat;
	__u64 usage_delta_us;
	int level;
	struct ioc_gq *ancestors[];
};

#pragma clang attribute pop

#endif
