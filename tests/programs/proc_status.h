/* One field of /proc/self/status in KiB ("VmHWM", "VmRSS"), -1 if absent:
 * shared by the reliability test programs and the benchmark programs. */
#ifndef WMHCCT_PROC_STATUS_H
#define WMHCCT_PROC_STATUS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = atol(line + n + 1);
            break;
        }
    if (f) fclose(f);
    return v;
}
#endif
