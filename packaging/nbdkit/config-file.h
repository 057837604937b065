/* The filter's group file: one group per line, 'NAME WEIGHT [LIMITS]'; '#' starts a comment.
 * NAME is an export name ('-' for the default export "") or a client address; WEIGHT 1..10000;
 * LIMITS in ioshare's syntax (iops-read=5000,bps-write=104857600). Read whole and checked whole:
 * a file with any bad line is refused, naming the line. */
#ifndef IOSHARE_CONFIG_FILE_H
#define IOSHARE_CONFIG_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IOSHARE_NAME_MAX 64
#define IOSHARE_LIMITS_MAX 256
#define IOSHARE_ENTRIES_MAX 256

struct ioshare_entry {
  char name[IOSHARE_NAME_MAX];       /* as written */
  char group_path[IOSHARE_NAME_MAX]; /* the controller's group ("-" becomes "default") */
  uint32_t weight;
  char limits[IOSHARE_LIMITS_MAX];
  int line;
};

struct ioshare_config {
  size_t nr;
  struct ioshare_entry entries[IOSHARE_ENTRIES_MAX];
};

/* Reads and checks `path` into `*out`: 0, or -1 with one line in `err` ("FILE:LINE: what; how"). */
int ioshare_config_read(const char *path, bool by_address, struct ioshare_config *out, char *err, size_t errlen);

/* The entry called `name`, or NULL. */
const struct ioshare_entry *ioshare_config_find(const struct ioshare_config *cfg, const char *name);

#endif
