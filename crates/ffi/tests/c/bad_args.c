/* Every entry point with bad arguments: NULL pointers, unknown groups and kinds, out-of-range
 * values, malformed and non-UTF-8 strings, a freed controller, a pointer to something else. Each
 * call must return its error code and leave a one-line message; none may crash. Built with
 * -fsanitize=address,undefined by tests/c.rs, so a wild read or write fails the test too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ioshare.h"

static int failures;

/* The call returned `want`, and a failure left a non-empty one-line message. */
static void expect(int got, int want, const char *what, int line) {
  const char *msg = ioshare_last_error();
  if (got != want) {
    fprintf(stderr, "bad_args.c:%d: %s returned %d, expected %d (last error: %s)\n", line, what, got, want, msg);
    failures++;
  } else if (want < 0 && (msg == NULL || msg[0] == '\0' || strchr(msg, '\n') != NULL)) {
    fprintf(stderr, "bad_args.c:%d: %s: the message is not one line: '%s'\n", line, what, msg ? msg : "(null)");
    failures++;
  }
}
#define EXPECT(call, want) expect((call), (want), #call, __LINE__)

int main(void) {
  ioshare_ctl *ctl = NULL, *freed = NULL;
  uint32_t g = 0, id = 0;
  uint64_t at = 0, delay = 0;
  char buf[8];
  ioshare_io io = {.id = 1, .len = 4096, .op = IOSHARE_READ};
  ioshare_ctl_stats st;
  ioshare_group_stats gs;
  const char bad_utf8[] = {'s', 's', 'd', (char)0xff, 0};

  /* ioshare_new */
  EXPECT(ioshare_new(IOSHARE_KIND_IOCOST, "ssd_dfl", NULL, 0, 0, NULL), IOSHARE_E_NULL);
  EXPECT(ioshare_new(IOSHARE_KIND_IOCOST, NULL, NULL, 0, 0, &ctl), IOSHARE_E_NULL);
  EXPECT(ioshare_new(42, "ssd_dfl", NULL, 0, 0, &ctl), IOSHARE_E_INVALID);
  EXPECT(ioshare_new(IOSHARE_KIND_IOCOST, "ssd_dfl", NULL, 0, 0x80, &ctl), IOSHARE_E_INVALID);
  EXPECT(ioshare_new(IOSHARE_KIND_IOCOST, "ssd_dfl rbps=x", NULL, 0, 0, &ctl), IOSHARE_E_PARSE);
  EXPECT(ioshare_new(IOSHARE_KIND_IOCOST, "rbps=1 rseqiops=2", NULL, 0, 0, &ctl), IOSHARE_E_PARSE);
  EXPECT(ioshare_new(IOSHARE_KIND_IOCOST, "ssd_dfl model=quadratic", NULL, 0, 0, &ctl), IOSHARE_E_PARSE);
  EXPECT(ioshare_new(IOSHARE_KIND_IOCOST, bad_utf8, NULL, 0, 0, &ctl), IOSHARE_E_PARSE);
  EXPECT(ioshare_new(IOSHARE_KIND_IOCOST, "ssd_dfl", "rpct=200", 0, 0, &ctl), IOSHARE_E_PARSE);
  EXPECT(ioshare_new(IOSHARE_KIND_IOCOST, "ssd_dfl", "min=150 max=50", 0, 0, &ctl), IOSHARE_E_PARSE);
  EXPECT(ioshare_new(IOSHARE_KIND_TOKEN_BUCKET, "ssd_dfl", NULL, 0, 0, &ctl), IOSHARE_E_INVALID);
  EXPECT(ioshare_new(IOSHARE_KIND_LEAKY_BUCKET, NULL, NULL, 8, 0, &ctl), IOSHARE_E_INVALID);
  if (ctl != NULL) {
    fprintf(stderr, "a failed ioshare_new wrote *out\n");
    failures++;
  }

  /* The check functions */
  EXPECT(ioshare_check_model(NULL), IOSHARE_E_NULL);
  EXPECT(ioshare_check_model("ssd_dfl rbps=-1"), IOSHARE_E_PARSE);
  EXPECT(ioshare_check_model("ssd_dfl rbps=1000"), IOSHARE_OK);
  EXPECT(ioshare_check_qos(NULL), IOSHARE_E_NULL);
  EXPECT(ioshare_check_qos("rlat=abc"), IOSHARE_E_PARSE);
  EXPECT(ioshare_check_limits(NULL), IOSHARE_E_NULL);
  EXPECT(ioshare_check_limits("iops-read"), IOSHARE_E_PARSE);
  EXPECT(ioshare_check_limits("iops-reed=5"), IOSHARE_E_PARSE);
  EXPECT(ioshare_check_limits("iops-total=1000,iops-total-max=500"), IOSHARE_E_INVALID);
  EXPECT(ioshare_check_limits("iops-read=5000"), IOSHARE_OK);

  /* Every controller call with a NULL controller */
  EXPECT(ioshare_configure(NULL, 0, "a", 100, NULL, &g), IOSHARE_E_NULL);
  EXPECT(ioshare_configure_child(NULL, 0, 0, "a", 100, NULL, &g), IOSHARE_E_NULL);
  EXPECT(ioshare_group_find(NULL, "a", &g), IOSHARE_E_NULL);
  EXPECT(ioshare_group_path(NULL, 0, buf, sizeof buf), IOSHARE_E_NULL);
  EXPECT(ioshare_submit(NULL, 0, &io, &delay), IOSHARE_E_NULL);
  EXPECT(ioshare_dispatch(NULL, 0, &io, &at), IOSHARE_E_NULL);
  EXPECT(ioshare_complete(NULL, 0, &io, 0, 0), IOSHARE_E_NULL);
  EXPECT(ioshare_next_tick(NULL, &at), IOSHARE_E_NULL);
  EXPECT(ioshare_tick(NULL, 0), IOSHARE_E_NULL);
  EXPECT(ioshare_stats(NULL, 0, &st, NULL, 0), IOSHARE_E_NULL);
  EXPECT(ioshare_stats_group(NULL, 0, 0, &gs), IOSHARE_E_NULL);
  EXPECT(ioshare_free(NULL), IOSHARE_E_NULL);
  EXPECT(ioshare_free(&ctl), IOSHARE_OK); /* *ctl NULL: nothing to free */

  /* A pointer to something that is not a controller */
  uint64_t *junk = calloc(16, sizeof *junk);
  ioshare_ctl *fake = (ioshare_ctl *)junk;
  EXPECT(ioshare_tick(fake, 0), IOSHARE_E_NOT_CONTROLLER);
  EXPECT(ioshare_submit(fake, 0, &io, NULL), IOSHARE_E_NOT_CONTROLLER);
  EXPECT(ioshare_free(&fake), IOSHARE_E_NOT_CONTROLLER);
  if (fake != (ioshare_ctl *)junk) {
    fprintf(stderr, "ioshare_free cleared a pointer it refused\n");
    failures++;
  }
  free(junk);

  /* A real controller, with bad arguments to each call */
  EXPECT(ioshare_new(IOSHARE_KIND_IOCOST, "ssd_dfl", "rpct=95 rlat=5000", 16, 0, &ctl), IOSHARE_OK);
  EXPECT(ioshare_configure(ctl, 0, NULL, 100, NULL, &g), IOSHARE_E_NULL);
  EXPECT(ioshare_configure(ctl, 0, "", 100, NULL, &g), IOSHARE_E_PARSE);
  EXPECT(ioshare_configure(ctl, 0, "a//b", 100, NULL, &g), IOSHARE_E_PARSE);
  EXPECT(ioshare_configure(ctl, 0, bad_utf8, 100, NULL, &g), IOSHARE_E_PARSE);
  EXPECT(ioshare_configure(ctl, 0, "a", 0, NULL, &g), IOSHARE_E_INVALID);
  EXPECT(ioshare_configure(ctl, 0, "a", 10001, NULL, &g), IOSHARE_E_INVALID);
  EXPECT(ioshare_configure(ctl, 0, "a", 100, "iops=", &g), IOSHARE_E_PARSE);
  EXPECT(ioshare_configure(ctl, 0, "a", 100, "iops-read=10,iops_rd=20", &g), IOSHARE_E_PARSE);
  EXPECT(ioshare_configure(ctl, 0, "a", 100, "bps-read=1,bps-read-max=0,bps-read-max-length=3", &g), IOSHARE_E_INVALID);
  EXPECT(ioshare_configure(ctl, 0, "a", 100, NULL, NULL), IOSHARE_OK); /* the id is optional */
  EXPECT(ioshare_configure(ctl, 0, "a", 100, NULL, &g), IOSHARE_OK);
  EXPECT(ioshare_configure_child(ctl, 0, 77, "b", 100, NULL, &id), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_configure_child(ctl, 0, g, "b/c", 100, NULL, &id), IOSHARE_E_INVALID);
  EXPECT(ioshare_configure_child(ctl, 0, g, "", 100, NULL, &id), IOSHARE_E_INVALID);
  EXPECT(ioshare_configure_child(ctl, 0, g, NULL, 100, NULL, &id), IOSHARE_E_NULL);
  EXPECT(ioshare_group_find(ctl, "nope", &id), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_group_find(ctl, NULL, &id), IOSHARE_E_NULL);
  EXPECT(ioshare_group_find(ctl, "a", NULL), IOSHARE_E_NULL);
  EXPECT(ioshare_group_path(ctl, 77, buf, sizeof buf), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_group_path(ctl, g, NULL, 8), IOSHARE_E_NULL);
  EXPECT(ioshare_group_path(ctl, g, buf, 1), IOSHARE_E_RANGE);
  EXPECT(ioshare_group_path(ctl, g, buf, 0), IOSHARE_E_RANGE);

  ioshare_io unknown = {.id = 2, .group = 77, .len = 4096};
  ioshare_io bad_op = {.id = 3, .group = g, .len = 4096, .op = 9};
  ioshare_io bad_flags = {.id = 4, .group = g, .len = 4096, .flags = 0x100};
  EXPECT(ioshare_submit(ctl, 0, NULL, &delay), IOSHARE_E_NULL);
  EXPECT(ioshare_submit(ctl, 0, &unknown, &delay), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_submit(ctl, 0, &bad_op, &delay), IOSHARE_E_INVALID);
  EXPECT(ioshare_submit(ctl, 0, &bad_flags, &delay), IOSHARE_E_INVALID);
  EXPECT(ioshare_dispatch(ctl, 0, NULL, &at), IOSHARE_E_NULL);
  EXPECT(ioshare_dispatch(ctl, 0, &io, NULL), IOSHARE_E_NULL);
  EXPECT(ioshare_complete(ctl, 0, NULL, 0, 0), IOSHARE_E_NULL);
  EXPECT(ioshare_complete(ctl, 0, &unknown, 0, 0), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_complete(ctl, 0, &bad_op, 0, 0), IOSHARE_E_INVALID);
  EXPECT(ioshare_next_tick(ctl, NULL), IOSHARE_E_NULL);
  EXPECT(ioshare_stats(ctl, 0, NULL, NULL, 0), IOSHARE_E_NULL);
  EXPECT(ioshare_stats(ctl, 0, &st, NULL, 4), IOSHARE_E_NULL);
  EXPECT(ioshare_stats_group(ctl, 0, 77, &gs), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_stats_group(ctl, 0, g, NULL), IOSHARE_E_NULL);

  /* The good calls still work after all that, and time may go backwards without harm. */
  io.group = g;
  EXPECT(ioshare_submit(ctl, 5 * 1000000, &io, &delay), IOSHARE_ISSUE);
  EXPECT(ioshare_complete(ctl, 6 * 1000000, &io, 5 * 1000000, 5 * 1000000), IOSHARE_OK);
  io.charge = 0;
  EXPECT(ioshare_submit(ctl, 1000000, &io, &delay), IOSHARE_ISSUE);
  EXPECT(ioshare_tick(ctl, 0), IOSHARE_OK);
  EXPECT(ioshare_stats(ctl, 0, &st, NULL, 0), IOSHARE_OK);

  /* Removal: refused while an IO is in flight or a child exists, then the id is unknown. */
  EXPECT(ioshare_remove(NULL, 0, g), IOSHARE_E_NULL);
  EXPECT(ioshare_remove(ctl, 0, 77), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_remove(ctl, 0, g), IOSHARE_E_BUSY); /* the IO submitted above is in flight */
  EXPECT(ioshare_complete(ctl, 2000000, &io, 1000000, 1000000), IOSHARE_OK);
  EXPECT(ioshare_configure_child(ctl, 0, g, "kid", 100, NULL, &id), IOSHARE_OK);
  EXPECT(ioshare_remove(ctl, 0, g), IOSHARE_E_BUSY); /* a child group */
  EXPECT(ioshare_remove(ctl, 0, id), IOSHARE_OK);
  EXPECT(ioshare_remove(ctl, 0, g), IOSHARE_OK);
  EXPECT(ioshare_remove(ctl, 0, g), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_submit(ctl, 3000000, &io, &delay), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_stats_group(ctl, 0, g, &gs), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_group_path(ctl, g, buf, sizeof buf), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_group_find(ctl, "a", &id), IOSHARE_E_UNKNOWN_GROUP);
  EXPECT(ioshare_configure(ctl, 0, "b", 100, NULL, &id), IOSHARE_OK); /* takes a freed id */
  io.group = id;
  EXPECT(ioshare_submit(ctl, 3000000, &io, &delay), IOSHARE_ISSUE);

  /* A freed controller: ioshare_free cleared the pointer, so every call sees NULL. */
  freed = ctl;
  EXPECT(ioshare_free(&ctl), IOSHARE_OK);
  if (ctl != NULL) {
    fprintf(stderr, "ioshare_free left the pointer set\n");
    failures++;
  }
  (void)freed; /* the stale copy is not used: that would be a use after free, by contract */
  EXPECT(ioshare_submit(ctl, 0, &io, &delay), IOSHARE_E_NULL);
  EXPECT(ioshare_free(&ctl), IOSHARE_OK);

  if (failures) {
    fprintf(stderr, "bad_args: %d failures\n", failures);
    return 1;
  }
  printf("bad_args: ok\n");
  return 0;
}
