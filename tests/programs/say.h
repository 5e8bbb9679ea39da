/* Output without stdio streams for the allocator test programs
 * (allocators.c, rel_nextalloc.c): say() formats with vsnprintf into a
 * static buffer and say_flush() writes it with write(2), so the program's
 * output makes no allocation of its own and its allocation counts are
 * exactly the calls it makes. */
#ifndef WMHCCT_SAY_H
#define WMHCCT_SAY_H
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static char out[16384];
static size_t out_len;

static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + out_len, sizeof out - out_len, fmt, ap);
    va_end(ap);
    if (n > 0) out_len += (size_t)n;
}

/* Write what was said to stdout; 0 on success. */
static int say_flush(void) {
    return write(1, out, out_len) == (ssize_t)out_len ? 0 : -1;
}
#endif
