/* Reading the filter's group file (format: config-file.h). */
#include "config-file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ioshare.h>

/* Names are export names or addresses: letters, digits and . _ : - only, so that they are safe as
 * group paths and as Prometheus label values. */
static bool valid_name(const char *s) {
  if (!*s || strlen(s) >= IOSHARE_NAME_MAX) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("._:-", *s))) return false;
  return true;
}

int ioshare_config_read(const char *path, bool by_address, struct ioshare_config *out, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: %s: check ioshare-filter-config", path, strerror(errno));
    return -1;
  }
  memset(out, 0, sizeof *out);
  char buf[1024];
  int line = 0, rc = 0;
  while (rc == 0 && fgets(buf, sizeof buf, f)) {
    line++;
    char *hash = strchr(buf, '#');
    if (hash) *hash = '\0';
    char *save = NULL, *name = strtok_r(buf, " \t\r\n", &save);
    if (!name) continue;
    char *weight = strtok_r(NULL, " \t\r\n", &save), *limits = strtok_r(NULL, " \t\r\n", &save);
    char *extra = strtok_r(NULL, " \t\r\n", &save);
    char *end = NULL;
    unsigned long w = weight ? strtoul(weight, &end, 10) : 0;
    if (!valid_name(name)) {
      snprintf(err, errlen, "%s:%d: name '%.64s' must be 1-63 of letters, digits, '.', '_', ':', '-'", path, line, name);
      rc = -1;
    } else if (!by_address && strcmp(name, "-") != 0 && strchr(name, ':')) {
      snprintf(err, errlen, "%s:%d: export '%s': ':' is for addresses (ioshare-group-by=address)", path, line, name);
      rc = -1;
    } else if (!weight || *end || w < 1 || w > 10000) {
      snprintf(err, errlen, "%s:%d: weight '%s' for '%s' must be a whole number 1..10000 (NAME WEIGHT [LIMITS])", path, line,
               weight ? weight : "(missing)", name);
      rc = -1;
    } else if (extra) {
      snprintf(err, errlen, "%s:%d: '%.64s' is extra: write limits as one word, like iops-read=5000,bps-read=104857600", path, line, extra);
      rc = -1;
    } else if (limits && (strlen(limits) >= IOSHARE_LIMITS_MAX || ioshare_check_limits(limits) != IOSHARE_OK)) {
      snprintf(err, errlen, "%s:%d: %s", path, line, strlen(limits) >= IOSHARE_LIMITS_MAX ? "limits too long" : ioshare_last_error());
      rc = -1;
    } else if (ioshare_config_find(out, name)) {
      snprintf(err, errlen, "%s:%d: '%s' is listed twice: keep one line", path, line, name);
      rc = -1;
    } else if (out->nr == IOSHARE_ENTRIES_MAX) {
      snprintf(err, errlen, "%s:%d: more than %d groups", path, line, IOSHARE_ENTRIES_MAX);
      rc = -1;
    } else {
      struct ioshare_entry *e = &out->entries[out->nr++];
      snprintf(e->name, sizeof e->name, "%s", name);
      snprintf(e->group_path, sizeof e->group_path, "%s", strcmp(name, "-") == 0 ? "default" : name);
      e->weight = (uint32_t)w;
      snprintf(e->limits, sizeof e->limits, "%s", limits ? limits : "");
      e->line = line;
    }
  }
  fclose(f);
  if (rc == 0 && out->nr == 0) {
    snprintf(err, errlen, "%s: no groups: add lines 'NAME WEIGHT [LIMITS]'", path);
    rc = -1;
  }
  return rc;
}

const struct ioshare_entry *ioshare_config_find(const struct ioshare_config *cfg, const char *name) {
  for (size_t i = 0; i < cfg->nr; i++)
    if (strcmp(cfg->entries[i].name, name) == 0) return &cfg->entries[i];
  return NULL;
}
