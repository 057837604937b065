/* The ABI used as a C service uses it: controllers of every kind, groups by path and by parent,
 * the issue path with a queue, the planner, statistics, and a locked controller shared by threads.
 * Each CHECK names what failed; the Rust test (tests/c.rs) compiles and runs this file. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ioshare.h"

#define CHECK(cond, ...)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "api.c:%d: %s: ", __LINE__, #cond);                            \
      fprintf(stderr, __VA_ARGS__);                                                   \
      fprintf(stderr, " (last error: %s)\n", ioshare_last_error());                  \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

#define MS 1000000ull
#define SEC 1000000000ull

/* Groups by path and by parent, ids, paths, finding. */
static void groups(void) {
  ioshare_ctl *ctl = NULL;
  CHECK(ioshare_new(IOSHARE_KIND_IOCOST, "ssd_dfl", "rpct=95 rlat=5000 min=50 max=150", 0, 0, &ctl) == IOSHARE_OK, "new");
  uint32_t gold = 99, silver = 99, child = 99, found = 99;
  CHECK(ioshare_configure(ctl, 0, "tenants/gold", 200, "iops-write=1000", &gold) == IOSHARE_OK, "gold");
  CHECK(ioshare_configure(ctl, 0, "tenants/silver", 100, NULL, &silver) == IOSHARE_OK, "silver");
  CHECK(ioshare_group_find(ctl, "tenants", &found) == IOSHARE_OK, "the parent was created");
  CHECK(gold != silver && found != gold && found != silver, "distinct ids %u %u %u", gold, silver, found);
  CHECK(ioshare_configure_child(ctl, 0, gold, "batch", 50, "", &child) == IOSHARE_OK, "child");
  char path[64];
  int n = ioshare_group_path(ctl, child, path, sizeof path);
  CHECK(n == (int)strlen("tenants/gold/batch") && strcmp(path, "tenants/gold/batch") == 0, "child path '%s'", path);
  CHECK(ioshare_group_find(ctl, "/tenants/gold/batch/", &found) == IOSHARE_OK && found == child, "found %u", found);
  /* Reconfiguring keeps the id. */
  uint32_t again = 99;
  CHECK(ioshare_configure(ctl, 0, "tenants/gold", 300, NULL, &again) == IOSHARE_OK && again == gold, "same id");
  ioshare_ctl_stats st;
  ioshare_group_stats gs[8];
  CHECK(ioshare_stats(ctl, 0, &st, gs, 8) == IOSHARE_OK, "stats");
  CHECK(st.nr_groups == 4 && gs[gold].weight == 300 && gs[child].weight == 50, "%u groups, weights %u %u", st.nr_groups,
        gs[gold].weight, gs[child].weight);
  CHECK(st.vrate_pct > 0.0 && st.period_us > 0, "vrate %f period %" PRIu64, st.vrate_pct, st.period_us);
  /* A tenant that leaves: its group removed, its id given to the next new group. */
  CHECK(ioshare_remove(ctl, 0, silver) == IOSHARE_OK, "remove silver: %s", ioshare_last_error());
  uint32_t bronze = 99;
  CHECK(ioshare_configure(ctl, 0, "tenants/bronze", 10, NULL, &bronze) == IOSHARE_OK && bronze == silver,
        "bronze took silver's id %u: %u", silver, bronze);
  n = ioshare_group_path(ctl, bronze, path, sizeof path);
  CHECK(n > 0 && strcmp(path, "tenants/bronze") == 0, "bronze's path '%s'", path);
  CHECK(ioshare_stats(ctl, 0, &st, gs, 8) == IOSHARE_OK && st.nr_groups == 4 && gs[bronze].weight == 10, "stats after");
  CHECK(ioshare_free(&ctl) == IOSHARE_OK && ctl == NULL, "free clears the pointer");
}

/* A token bucket at 1000 read IOPS, 4000 reads offered at t=0: what it releases in virtual time
 * follows the rate. librbd's bucket hands out tokens every 50 ms tick, so by 2 s it has released
 * 2 s of them, plus at most one tick's (50) and one IO of rounding. */
static void token_bucket_holds_its_rate(void) {
  ioshare_ctl *ctl = NULL;
  CHECK(ioshare_new(IOSHARE_KIND_TOKEN_BUCKET, NULL, NULL, 0, 0, &ctl) == IOSHARE_OK, "new");
  uint32_t g;
  CHECK(ioshare_configure(ctl, 0, "capped", 100, "iops-read=1000", &g) == IOSHARE_OK, "configure");
  uint64_t issued = 0;
  for (uint64_t i = 0; i < 4000; i++) {
    ioshare_io io = {.id = i, .offset = i * 4096, .group = g, .len = 4096, .op = IOSHARE_READ};
    int r = ioshare_submit(ctl, 0, &io, NULL);
    CHECK(r == IOSHARE_ISSUE || r == IOSHARE_QUEUED, "submit %d", r);
    if (r == IOSHARE_ISSUE) issued++;
  }
  uint64_t now = 0;
  for (;;) {
    ioshare_io io;
    uint64_t at = 0;
    int r = ioshare_dispatch(ctl, now, &io, &at);
    if (r == IOSHARE_ISSUE) {
      CHECK(io.group == g && io.op == IOSHARE_READ, "released io %" PRIu64, io.id);
      issued++;
      CHECK(ioshare_complete(ctl, now, &io, now, now) == IOSHARE_OK, "complete");
    } else if (r == IOSHARE_WAIT) {
      CHECK(at > now, "wait until %" PRIu64 " at %" PRIu64, at, now);
      if (at > 2 * SEC) break;
      now = at;
    } else {
      CHECK(r == IOSHARE_IDLE, "dispatch %d", r);
      break;
    }
  }
  CHECK(issued >= 2000 && issued <= 2051, "released %" PRIu64 " by 2 s at 1000 IOPS", issued);
  ioshare_group_stats gs;
  CHECK(ioshare_stats_group(ctl, now, g, &gs) == IOSHARE_OK, "group stats");
  CHECK(gs.queued == 4000 - issued && gs.issued == issued, "queued %" PRIu64 " issued %" PRIu64, gs.queued, gs.issued);
  ioshare_free(&ctl);
}

/* IOCost on a device that serves one IO at a time at the model's speed: two saturating groups at
 * weights 2:1 get device time 2:1. vrate is pinned at 90%, so the budget, not the device's FIFO,
 * is what binds; the split is judged within 5% (period edges, the half period of start budget). */
static void iocost_splits_by_weight(void) {
  ioshare_ctl *ctl = NULL;
  CHECK(ioshare_new(IOSHARE_KIND_IOCOST, "ssd_dfl", "rpct=95 rlat=2000 min=90 max=90", 0, 0, &ctl) == IOSHARE_OK, "new");
  uint32_t g[2];
  CHECK(ioshare_configure(ctl, 0, "hi", 200, NULL, &g[0]) == IOSHARE_OK, "hi");
  CHECK(ioshare_configure(ctl, 0, "lo", 100, NULL, &g[1]) == IOSHARE_OK, "lo");
  /* Each group keeps 8 IOs offered; the device runs one IO at a time, 117 us each (ssd_dfl's
   * 8518 random read IOPS). */
  enum { DEPTH = 8, FIFO = 64 };
  ioshare_io fifo[FIFO];
  unsigned head = 0, tail = 0;
  uint64_t done[2] = {0, 0}, id = 0, now = 0, busy_until = 0, outstanding[2] = {0, 0};
  const uint64_t service = 117400;
  while (now < 4 * SEC) {
    for (int k = 0; k < 2; k++) {
      while (outstanding[k] < DEPTH) {
        ioshare_io io = {.id = id++, .offset = (id * 7919u % 100000u) * 1048576u, .group = g[k], .len = 4096};
        outstanding[k]++;
        if (ioshare_submit(ctl, now, &io, NULL) == IOSHARE_ISSUE) fifo[tail++ % FIFO] = io;
      }
    }
    ioshare_io io;
    uint64_t at = UINT64_MAX;
    while (ioshare_dispatch(ctl, now, &io, &at) == IOSHARE_ISSUE) fifo[tail++ % FIFO] = io;
    uint64_t tick;
    if (ioshare_next_tick(ctl, &tick) == IOSHARE_OK && tick <= now) ioshare_tick(ctl, now);
    if (head != tail && busy_until <= now) {
      ioshare_io *d = &fifo[head++ % FIFO];
      busy_until = now + service;
      CHECK(ioshare_complete(ctl, busy_until, d, now, now) == IOSHARE_OK, "complete");
      int k = d->group == g[0] ? 0 : 1;
      done[k]++;
      outstanding[k]--;
      now = busy_until;
    } else {
      uint64_t next = at;
      if (ioshare_next_tick(ctl, &tick) == IOSHARE_OK && tick < next) next = tick;
      CHECK(next != UINT64_MAX && next > now, "nothing to do at %" PRIu64, now);
      now = next;
    }
  }
  double ratio = (double)done[0] / (double)done[1];
  CHECK(ratio > 1.9 && ratio < 2.1, "ratio %.3f (%" PRIu64 " / %" PRIu64 ")", ratio, done[0], done[1]);
  ioshare_free(&ctl);
}

/* A locked controller shared by four threads: every IO is released exactly once. */
enum { THREADS = 4, PER_THREAD = 20000 };
static ioshare_ctl *shared;
static uint32_t shared_group;
static _Atomic uint64_t shared_clock; /* one clock for all threads, as a service has */

static void *hammer(void *arg) {
  uint64_t base = (uint64_t)(uintptr_t)arg * PER_THREAD, released = 0;
  for (uint64_t i = 0; i < PER_THREAD; i++) {
    uint64_t now = atomic_fetch_add(&shared_clock, 1000) + 1000;
    ioshare_io io = {.id = base + i, .offset = (base + i) * 4096, .group = shared_group, .len = 4096};
    int r = ioshare_submit(shared, now, &io, NULL);
    if (r == IOSHARE_ISSUE) {
      released++;
      ioshare_complete(shared, now, &io, now, now);
    } else if (r != IOSHARE_QUEUED) {
      return NULL;
    }
    ioshare_io out;
    uint64_t at;
    while (ioshare_dispatch(shared, now, &out, &at) == IOSHARE_ISSUE) {
      released++;
      ioshare_complete(shared, now, &out, now, now);
    }
  }
  return (void *)(uintptr_t)released;
}

static void locked_controller_is_shared(void) {
  CHECK(ioshare_new(IOSHARE_KIND_IOCOST, "ssd_fast", NULL, 32, IOSHARE_LOCKED, &shared) == IOSHARE_OK, "new locked");
  CHECK(ioshare_configure(shared, 0, "all", 100, NULL, &shared_group) == IOSHARE_OK, "configure");
  pthread_t t[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, hammer, (void *)i);
  uint64_t released = 0;
  for (int i = 0; i < THREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    released += (uint64_t)(uintptr_t)r;
  }
  ioshare_io out;
  uint64_t at, now = atomic_load(&shared_clock);
  for (int r; (r = ioshare_dispatch(shared, now, &out, &at)) != IOSHARE_IDLE;) {
    if (r == IOSHARE_ISSUE) {
      released++;
      ioshare_complete(shared, now, &out, now, now);
    } else {
      now = at;
    }
  }
  CHECK(released == (uint64_t)THREADS * PER_THREAD, "released %" PRIu64 " of %d", released, THREADS * PER_THREAD);
  ioshare_free(&shared);
}

int main(void) {
  printf("libioshare %s\n", ioshare_version());
  groups();
  token_bucket_holds_its_rate();
  iocost_splits_by_weight();
  locked_controller_is_shared();
  printf("api: ok\n");
  return 0;
}
