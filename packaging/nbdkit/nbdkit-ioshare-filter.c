/* nbdkit-ioshare-filter: shares one nbdkit backend between NBD clients by weight, with IOCost
 * (libioshare) deciding when each request may go on.
 *
 * Each connection is a tenant of the group named by its export name (or, with
 * ioshare-group-by=address, by the client's IP address). Weights and limits come from
 * ioshare-filter-config=FILE, re-read when the file changes (a broken file is reported and the
 * running config kept). The controller's model and QoS are the kernel's io.cost.model and
 * io.cost.qos lines (ioshare-model=, ioshare-qos=).
 *
 * One controller serves every connection, guarded by one mutex (so it is made without
 * IOSHARE_LOCKED). A request submits its IO; if the controller holds it, the request's thread waits
 * on a futex of its own, outside the lock, until the IO is released: by a completion (which frees
 * budget or a device slot and releases what ioshare_dispatch() lets go at once), or by the
 * housekeeping thread, the controller's timer. Only the released request's thread wakes: with one
 * condition variable for all, every completion woke every held request (a dozen or more threads
 * per IO on a saturated export), and on two cores those wake-ups cost more throughput than the
 * controller held back. A futex rather than a condition variable per request: a thread woken from
 * pthread_cond_wait() first takes the mutex its waker still holds, and sleeps again on it. The
 * housekeeping thread has a resolution of KEEPER_SLACK_NS: it sleeps at least that long, then
 * releases everything due and runs the planner (completions release what is due whenever they
 * come); woken at every release time, it cost two more context switches per held request (at
 * 10 000 IOPS nbdkit's CPU per IO was 2.1x that without the filter, the thread woken 4 200 times
 * a second). The IO's id is the address of its waiter, so a released IO finds its thread without
 * a table. Completions go back with their latency. The housekeeping thread also reloads the config
 * and writes the stats file (Prometheus text format) every second. Zero and trim are charged as
 * the kernel's iocost charges discards: no cost, but they wait behind the group's held IO.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-filter.h>

#include <ioshare.h>

#include "config-file.h"

/* Parameters. */
static const char *model = "ssd_dfl";
static const char *qos;
static const char *config_path;
static const char *stats_path;
static uint32_t kind = IOSHARE_KIND_IOCOST;
static uint32_t depth_max;
static bool by_address;

/* Everything below is guarded by `lock`. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t keeper_cond;   /* wakes the housekeeping thread before keeper_at */
static uint64_t keeper_at;           /* when the housekeeping thread wakes next */
static ioshare_ctl *ctl;
static struct ioshare_config running; /* the last good config */
static unsigned *connections;         /* per group id */
static size_t nr_connections_slots;
static uint64_t refused, reloads, reload_errors, groups_removed;
static struct timespec config_mtime;

/* The housekeeping thread, and how long it sleeps at least (the release timer's resolution). */
#define KEEPER_SLACK_NS 500000u
static pthread_t keeper;
static bool keeper_running, keeper_stop;

/* One request held by the controller; its address is the IO's id. */
struct waiter {
  ioshare_io io;
  uint32_t released; /* the futex: 1 once released (`io` then holds the released IO) */
};

/* A connection: its group, and when its producer delay (IOCost debt) ends. */
struct handle {
  uint32_t group;
  uint64_t resume_at;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct timespec timespec_of(uint64_t t) {
  return (struct timespec){.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};
}

static void sleep_until(uint64_t t) {
  struct timespec ts = timespec_of(t);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* Lock held. Releases every IO the controller lets go at `now` to its waiter, runs the planner
 * when due, and returns when to look again (UINT64_MAX: nothing pending). */
static uint64_t pump(uint64_t now) {
  uint64_t wake = UINT64_MAX, tick, at;
  if (ioshare_next_tick(ctl, &tick) == IOSHARE_OK && tick <= now) ioshare_tick(ctl, now);
  if (ioshare_next_tick(ctl, &tick) == IOSHARE_OK) wake = tick;
  for (;;) {
    ioshare_io io;
    int r = ioshare_dispatch(ctl, now, &io, &at);
    if (r != IOSHARE_ISSUE) {
      if (r == IOSHARE_WAIT && at < wake) wake = at;
      break;
    }
    struct waiter *w = (struct waiter *)(uintptr_t)io.id;
    w->io = io;
    __atomic_store_n(&w->released, 1, __ATOMIC_RELEASE);
    /* The waiter may see the flag and return before this wake: waking a futex no one waits on is
     * harmless (its memory, a stack, stays mapped). */
    syscall(SYS_futex, &w->released, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  }
  return wake;
}

/* Lock held. Has the housekeeping thread wake by `wake` (within its resolution) if it would sleep
 * past that. */
static void keeper_wake_by(uint64_t wake) {
  if (wake + KEEPER_SLACK_NS < keeper_at) {
    keeper_at = wake;
    pthread_cond_signal(&keeper_cond);
  }
}

/* Waits as the controller says, then returns the released IO in `*io` and its release time. */
static uint64_t admit(struct handle *h, uint32_t op, uint32_t count, uint64_t offset, ioshare_io *io) {
  if (h->resume_at > now_ns()) sleep_until(h->resume_at);
  struct waiter w = {.io = {.id = 0, .offset = offset, .group = h->group, .len = count, .op = op}};
  w.io.id = (uint64_t)(uintptr_t)&w;
  uint64_t delay = 0, now;
  pthread_mutex_lock(&lock);
  now = now_ns();
  int r = ioshare_submit(ctl, now, &w.io, &delay);
  if (r == IOSHARE_QUEUED) {
    keeper_wake_by(pump(now));
    pthread_mutex_unlock(&lock);
    /* Released by a completion or the housekeeping thread; the bound (pumping itself) only
     * matters should a wake-up be lost. */
    const struct timespec bound = {.tv_sec = 0, .tv_nsec = 100000000};
    while (!__atomic_load_n(&w.released, __ATOMIC_ACQUIRE)) {
      if (syscall(SYS_futex, &w.released, FUTEX_WAIT_PRIVATE, 0, &bound, NULL, 0) == -1 && errno == ETIMEDOUT) {
        pthread_mutex_lock(&lock);
        if (!w.released) keeper_wake_by(pump(now_ns()));
        pthread_mutex_unlock(&lock);
      }
    }
    now = now_ns();
  } else {
    pthread_mutex_unlock(&lock);
    /* Other than IOSHARE_ISSUE cannot happen with a group id from open(); let the IO through
     * rather than fail it. */
    if (r != IOSHARE_ISSUE) nbdkit_debug("ioshare: submit: %s", ioshare_last_error());
  }
  if (delay) h->resume_at = now + delay;
  *io = w.io;
  return now;
}

/* Reports a finished IO; a freed device slot may release others. */
static void finish(const ioshare_io *io, uint64_t released) {
  pthread_mutex_lock(&lock);
  uint64_t now = now_ns();
  ioshare_complete(ctl, now, io, released, released);
  keeper_wake_by(pump(now));
  pthread_mutex_unlock(&lock);
}

/* Lock held. Applies a validated config: every entry's group configured, connections counted. */
static int apply(const struct ioshare_config *cfg) {
  uint64_t now = now_ns();
  for (size_t i = 0; i < cfg->nr; i++) {
    const struct ioshare_entry *e = &cfg->entries[i];
    uint32_t g;
    if (ioshare_configure(ctl, now, e->group_path, e->weight, e->limits, &g) != IOSHARE_OK) {
      nbdkit_error("ioshare: %s:%d: %s", config_path, e->line, ioshare_last_error());
      return -1;
    }
    if (g >= nr_connections_slots) {
      size_t n = (size_t)g * 2 + 16;
      unsigned *grown = realloc(connections, n * sizeof *grown);
      if (!grown) {
        nbdkit_error("ioshare: out of memory");
        return -1;
      }
      memset(grown + nr_connections_slots, 0, (n - nr_connections_slots) * sizeof *grown);
      connections = grown;
      nr_connections_slots = n;
    }
  }
  return 0;
}

/* Lock held. Whether the running config still names the controller's group `g`. */
static bool configured(uint32_t g) {
  char path[IOSHARE_NAME_MAX];
  if (ioshare_group_path(ctl, g, path, sizeof path) < 0) return false;
  for (size_t i = 0; i < running.nr; i++)
    if (strcmp(running.entries[i].group_path, path) == 0) return true;
  return false;
}

/* Lock held. Removes group `g` from the controller once the config no longer names it and its
 * last connection has gone (nbdkit closes a connection after its requests finished, so nothing of
 * it is queued or in flight). */
static void remove_if_dropped(uint32_t g) {
  if (connections[g] != 0 || configured(g)) return;
  if (ioshare_remove(ctl, now_ns(), g) == IOSHARE_OK) groups_removed++;
  else nbdkit_debug("ioshare: group %u stays: %s", g, ioshare_last_error());
}

/* Lock held. Makes `fresh` the running config and removes the groups it dropped that have no
 * connection (the others go with their last connection). */
static void replace_running(const struct ioshare_config *fresh) {
  static struct ioshare_config old; /* ~100 KiB: not on the stack; the lock guards it */
  old = running;
  running = *fresh;
  for (size_t i = 0; i < old.nr; i++) {
    uint32_t g;
    if (ioshare_group_find(ctl, old.entries[i].group_path, &g) == IOSHARE_OK) remove_if_dropped(g);
  }
}

/* Re-reads the config file when its modification time changed; a broken file changes nothing. */
static void reload_if_changed(void) {
  struct stat st;
  if (stat(config_path, &st) == -1) return;
  pthread_mutex_lock(&lock);
  bool changed = st.st_mtim.tv_sec != config_mtime.tv_sec || st.st_mtim.tv_nsec != config_mtime.tv_nsec;
  if (changed) config_mtime = st.st_mtim;
  pthread_mutex_unlock(&lock);
  if (!changed) return;
  struct ioshare_config fresh;
  char err[512];
  if (ioshare_config_read(config_path, by_address, &fresh, err, sizeof err) == -1) {
    nbdkit_error("ioshare: %s; keeping the running config", err);
    pthread_mutex_lock(&lock);
    reload_errors++;
    pthread_mutex_unlock(&lock);
    return;
  }
  pthread_mutex_lock(&lock);
  if (apply(&fresh) == 0) {
    replace_running(&fresh);
    reloads++;
    nbdkit_debug("ioshare: reloaded %s (%zu groups)", config_path, fresh.nr);
  } else {
    reload_errors++;
  }
  pthread_mutex_unlock(&lock);
}

/* Writes the stats file (Prometheus text format) atomically: a temporary file, then a rename. */
static void write_stats(void) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", stats_path);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    nbdkit_debug("ioshare: %s: %m", tmp);
    return;
  }
  pthread_mutex_lock(&lock);
  uint64_t now = now_ns();
  ioshare_ctl_stats st;
  ioshare_stats(ctl, now, &st, NULL, 0);
  fprintf(f, "# HELP ioshare_nbd_vrate_pct Virtual-time rate, percent of the cost model.\n"
             "# TYPE ioshare_nbd_vrate_pct gauge\nioshare_nbd_vrate_pct %.3f\n", st.vrate_pct);
  fprintf(f, "# TYPE ioshare_nbd_busy_level gauge\nioshare_nbd_busy_level %d\n", st.busy_level);
  fprintf(f, "# TYPE ioshare_nbd_depth_limit gauge\nioshare_nbd_depth_limit %u\n", st.depth_limit);
  fprintf(f, "# TYPE ioshare_nbd_refused_connections_total counter\nioshare_nbd_refused_connections_total %" PRIu64 "\n", refused);
  fprintf(f, "# TYPE ioshare_nbd_config_reloads_total counter\nioshare_nbd_config_reloads_total %" PRIu64 "\n", reloads);
  fprintf(f, "# TYPE ioshare_nbd_config_errors_total counter\nioshare_nbd_config_errors_total %" PRIu64 "\n", reload_errors);
  fprintf(f, "# HELP ioshare_nbd_groups_removed_total Groups removed after the config dropped them and their last connection left.\n"
             "# TYPE ioshare_nbd_groups_removed_total counter\nioshare_nbd_groups_removed_total %" PRIu64 "\n", groups_removed);
  static const char *const names[] = {"weight", "connections", "active", "issued_total", "queued", "usage_us_total", "wait_us_total", "debt_us", "delay_us", "hweight_active", "hweight_inuse"};
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    fprintf(f, "# TYPE ioshare_nbd_group_%s %s\n", names[k], strstr(names[k], "_total") ? "counter" : "gauge");
    for (size_t i = 0; i < running.nr; i++) {
      const struct ioshare_entry *e = &running.entries[i];
      uint32_t g;
      ioshare_group_stats gs;
      if (ioshare_group_find(ctl, e->group_path, &g) != IOSHARE_OK || ioshare_stats_group(ctl, now, g, &gs) != IOSHARE_OK) continue;
      double v[] = {gs.weight, g < nr_connections_slots ? connections[g] : 0, gs.active, (double)gs.issued, (double)gs.queued,
                    (double)gs.usage_us, (double)gs.wait_us, (double)gs.debt_us, (double)gs.delay_us, gs.hweight_active, gs.hweight_inuse};
      fprintf(f, "ioshare_nbd_group_%s{group=\"%s\"} %.6g\n", names[k], e->name, v[k]);
    }
  }
  pthread_mutex_unlock(&lock);
  if (fclose(f) == 0) rename(tmp, stats_path);
}

/* Housekeeping: the controller's timers — releases and the planner — at their time (at least
 * every 10 ms), the config and the stats file every second. */
static void *housekeeping(void *arg) {
  (void)arg;
  uint64_t chores_at = 0;
  pthread_mutex_lock(&lock);
  while (!keeper_stop) {
    uint64_t now = now_ns();
    if (now >= chores_at) {
      chores_at = now + 1000000000u;
      pthread_mutex_unlock(&lock);
      if (config_path) reload_if_changed();
      if (stats_path) write_stats();
      pthread_mutex_lock(&lock);
      now = now_ns();
    }
    uint64_t wake = pump(now);
    if (wake < now + KEEPER_SLACK_NS) wake = now + KEEPER_SLACK_NS;
    keeper_at = now + 10000000u;
    if (wake < keeper_at) keeper_at = wake;
    struct timespec ts = timespec_of(keeper_at);
    pthread_cond_timedwait(&keeper_cond, &lock, &ts);
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

static int ioshare_config(nbdkit_next_config *next, nbdkit_backend *nxdata, const char *key, const char *value) {
  if (strcmp(key, "ioshare-model") == 0) {
    model = value;
  } else if (strcmp(key, "ioshare-qos") == 0) {
    qos = value;
  } else if (strcmp(key, "ioshare-filter-config") == 0) {
    config_path = value;
  } else if (strcmp(key, "ioshare-stats-file") == 0) {
    stats_path = value;
  } else if (strcmp(key, "ioshare-depth") == 0) {
    if (nbdkit_parse_uint32_t("ioshare-depth", value, &depth_max) == -1) return -1;
  } else if (strcmp(key, "ioshare-group-by") == 0) {
    if (strcmp(value, "export") == 0) by_address = false;
    else if (strcmp(value, "address") == 0) by_address = true;
    else {
      nbdkit_error("ioshare-group-by=%s: use 'export' or 'address'", value);
      return -1;
    }
  } else if (strcmp(key, "ioshare-kind") == 0) {
    if (strcmp(value, "iocost") == 0) kind = IOSHARE_KIND_IOCOST;
    else if (strcmp(value, "token-bucket") == 0) kind = IOSHARE_KIND_TOKEN_BUCKET;
    else if (strcmp(value, "leaky-bucket") == 0) kind = IOSHARE_KIND_LEAKY_BUCKET;
    else {
      nbdkit_error("ioshare-kind=%s: use iocost, token-bucket or leaky-bucket", value);
      return -1;
    }
  } else {
    return next(nxdata, key, value);
  }
  return 0;
}

static int ioshare_config_complete(nbdkit_next_config_complete *next, nbdkit_backend *nxdata) {
  if (!config_path) {
    nbdkit_error("ioshare: ioshare-filter-config=FILE is required (lines: NAME WEIGHT [LIMITS])");
    return -1;
  }
  bool bucket = kind != IOSHARE_KIND_IOCOST;
  if (ioshare_new(kind, bucket ? NULL : model, bucket ? NULL : qos, bucket ? 0 : depth_max, 0, &ctl) != IOSHARE_OK) {
    nbdkit_error("ioshare: %s", ioshare_last_error());
    return -1;
  }
  char err[512];
  if (ioshare_config_read(config_path, by_address, &running, err, sizeof err) == -1) {
    nbdkit_error("ioshare: %s", err);
    return -1;
  }
  struct stat st;
  if (stat(config_path, &st) == 0) config_mtime = st.st_mtim;
  if (apply(&running) == -1) return -1;
  pthread_condattr_t monotonic;
  pthread_condattr_init(&monotonic);
  pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
  pthread_cond_init(&keeper_cond, &monotonic);
  pthread_condattr_destroy(&monotonic);
  return next(nxdata);
}

#define ioshare_config_help \
  "ioshare-filter-config=FILE  (required) groups: lines 'NAME WEIGHT [LIMITS]', reloaded on change.\n" \
  "ioshare-model=LINE          io.cost.model line or preset (default ssd_dfl).\n" \
  "ioshare-qos=LINE            io.cost.qos line (default: the kernel's).\n" \
  "ioshare-depth=N             device-depth option: at most N requests in the plugin (0: off).\n" \
  "ioshare-group-by=export|address  what names a connection's group (default export).\n" \
  "ioshare-kind=iocost|token-bucket|leaky-bucket  the controller (default iocost).\n" \
  "ioshare-stats-file=FILE     write Prometheus-format stats there every second."

static int ioshare_after_fork(nbdkit_backend *nxdata) {
  (void)nxdata;
  int e = pthread_create(&keeper, NULL, housekeeping, NULL);
  if (e) {
    nbdkit_error("ioshare: cannot start its housekeeping thread: %s", strerror(e));
    return -1;
  }
  keeper_running = true;
  return 0;
}

static void ioshare_unload(void) {
  if (keeper_running) {
    pthread_mutex_lock(&lock);
    keeper_stop = true;
    pthread_cond_signal(&keeper_cond);
    pthread_mutex_unlock(&lock);
    pthread_join(keeper, NULL);
  }
  ioshare_free(&ctl);
  free(connections);
}

/* The group name of this connection: its export name, or its peer's address. */
static int connection_name(const char *exportname, char *out, size_t len) {
  if (!by_address) {
    snprintf(out, len, "%s", exportname[0] ? exportname : "-");
    return 0;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (nbdkit_peer_name((struct sockaddr *)&ss, &sl) == -1) return -1;
  if (ss.ss_family == AF_INET) inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)len);
  else if (ss.ss_family == AF_INET6) inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out, (socklen_t)len);
  else snprintf(out, len, "unix");
  return 0;
}

static void *ioshare_open(nbdkit_next_open *next, nbdkit_context *nxdata, int readonly, const char *exportname, int is_tls) {
  (void)is_tls;
  char name[IOSHARE_NAME_MAX];
  if (connection_name(exportname, name, sizeof name) == -1) return NULL;
  pthread_mutex_lock(&lock);
  const struct ioshare_entry *e = ioshare_config_find(&running, name);
  uint32_t g = 0;
  if (!e || ioshare_group_find(ctl, e->group_path, &g) != IOSHARE_OK) {
    refused++;
    pthread_mutex_unlock(&lock);
    nbdkit_error("ioshare: %s '%s' is not in %s: add a line '%s WEIGHT' for it", by_address ? "client" : "export", name, config_path, name);
    return NULL;
  }
  connections[g]++;
  pthread_mutex_unlock(&lock);
  if (next(nxdata, readonly, exportname) == -1) {
    pthread_mutex_lock(&lock);
    connections[g]--;
    pthread_mutex_unlock(&lock);
    return NULL;
  }
  struct handle *h = calloc(1, sizeof *h);
  if (!h) {
    nbdkit_error("ioshare: out of memory");
    pthread_mutex_lock(&lock);
    connections[g]--;
    pthread_mutex_unlock(&lock);
    return NULL;
  }
  h->group = g;
  return h;
}

static void ioshare_close(void *handle) {
  struct handle *h = handle;
  pthread_mutex_lock(&lock);
  connections[h->group]--;
  remove_if_dropped(h->group);
  pthread_mutex_unlock(&lock);
  free(h);
}

static int ioshare_pread(nbdkit_next *next, void *handle, void *buf, uint32_t count, uint64_t offset, uint32_t flags, int *err) {
  ioshare_io io;
  uint64_t released = admit(handle, IOSHARE_READ, count, offset, &io);
  int r = next->pread(next, buf, count, offset, flags, err);
  finish(&io, released);
  return r;
}

static int ioshare_pwrite(nbdkit_next *next, void *handle, const void *buf, uint32_t count, uint64_t offset, uint32_t flags, int *err) {
  ioshare_io io;
  uint64_t released = admit(handle, IOSHARE_WRITE, count, offset, &io);
  int r = next->pwrite(next, buf, count, offset, flags, err);
  finish(&io, released);
  return r;
}

static int ioshare_zero(nbdkit_next *next, void *handle, uint32_t count, uint64_t offset, uint32_t flags, int *err) {
  ioshare_io io;
  uint64_t released = admit(handle, IOSHARE_WRITE, 0, offset, &io);
  int r = next->zero(next, count, offset, flags, err);
  finish(&io, released);
  return r;
}

static int ioshare_trim(nbdkit_next *next, void *handle, uint32_t count, uint64_t offset, uint32_t flags, int *err) {
  ioshare_io io;
  uint64_t released = admit(handle, IOSHARE_WRITE, 0, offset, &io);
  int r = next->trim(next, count, offset, flags, err);
  finish(&io, released);
  return r;
}

static struct nbdkit_filter filter = {
    .name = "ioshare",
    .longname = "nbdkit ioshare filter (IOCost weights and limits per export)",
    .config = ioshare_config,
    .config_complete = ioshare_config_complete,
    .config_help = ioshare_config_help,
    .after_fork = ioshare_after_fork,
    .unload = ioshare_unload,
    .open = ioshare_open,
    .close = ioshare_close,
    .pread = ioshare_pread,
    .pwrite = ioshare_pwrite,
    .zero = ioshare_zero,
    .trim = ioshare_trim,
};

NBDKIT_REGISTER_FILTER(filter)
