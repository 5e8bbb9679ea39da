/* Threads with the smallest stack glibc allows (PTHREAD_STACK_MIN, 16 KiB),
 * as helper threads of some runtimes have, each using 4 KiB of it and then
 * allocating: the tracer must not need more of the program's stack than
 * the program leaves. Prints "CALLS <function> <calls> <bytes>" (say.h).
 * With argument "exit", a last such thread ends the process with exit(3)
 * (the report is then written on its stack's side). */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "say.h"

#define THREADS 4
#define CALLS 2000

/* One slot per thread: a shared one let a thread free another's block
 * (and both free it: glibc's "double free detected", natively too). */
void *volatile keep[THREADS];
static unsigned long bytes[THREADS];

__attribute__((noinline)) void small_thread_alloc(int id) {
    for (int i = 0; i < CALLS; i++) {
        size_t n = 16 + (size_t)(i % 7) * 8;
        keep[id] = malloc(n);
        if (!keep[id]) abort();
        bytes[id] += n;
        free(keep[id]);
    }
}

/* 4 KiB of this thread's stack in use below the allocations. */
__attribute__((noinline)) void use_stack(int id, int kib) {
    volatile char buf[1024];
    memset((char *)buf, id, sizeof buf);
    if (kib > 1)
        use_stack(id, kib - 1);
    else
        small_thread_alloc(id);
    buf[0] = 0;
}

static void *run(void *arg) {
    int id = (int)(long)arg;
    use_stack(id, 4);
    return NULL;
}

static void *exit_from_thread(void *arg) {
    (void)arg;
    say_flush();
    exit(3);
}

int main(int argc, char **argv) {
    pthread_attr_t at;
    pthread_attr_init(&at);
    if (pthread_attr_setstacksize(&at, PTHREAD_STACK_MIN) != 0) return 2;
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], &at, run, (void *)i) != 0) return 3;
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    unsigned long total = 0;
    for (int i = 0; i < THREADS; i++) total += bytes[i];
    say("CALLS malloc %d %lu\n", THREADS * CALLS, total);
    say("CALLS free %d 0\n", THREADS * CALLS);
    if (argc > 1 && strcmp(argv[1], "exit") == 0) {
        pthread_t e;
        if (pthread_create(&e, &at, exit_from_thread, NULL) != 0) return 4;
        pthread_join(e, NULL);
        return 5; /* not reached */
    }
    return say_flush() == 0 ? 0 : 1;
}
