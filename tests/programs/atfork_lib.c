/* A library whose constructor registers fork handlers that allocate, as
 * libraries that keep per-process state do. Its constructor runs before
 * the tracer starts, so its handlers are registered before the tracer's
 * unless the tracer sees the registration (tests/tests/reliability_process.rs). */
#include <pthread.h>
#include <stdlib.h>

static void *volatile keep;

__attribute__((noinline)) static void atfork_prepare(void) { keep = malloc(123); free(keep); }
__attribute__((noinline)) static void atfork_parent(void) { keep = malloc(124); free(keep); }
__attribute__((noinline)) static void atfork_child(void) { keep = malloc(125); free(keep); }

__attribute__((constructor)) static void register_handlers(void) {
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

void atfork_lib_linked(void) {}
