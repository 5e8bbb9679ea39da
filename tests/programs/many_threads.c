/* argv[1] threads, all alive at once (a barrier holds them until each has
 * allocated), each making 1000 malloc/free pairs from its own loop: what
 * the tracer holds per thread (tests/tests/thread_memory.rs). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define PAIRS 1000

static pthread_barrier_t all_in;
static char *volatile sink;

static void *worker(void *arg) {
    for (int i = 0; i < PAIRS; i++) {
        char *volatile p = malloc(64 + i % 512);
        p[0] = (char)i;
        free(p);
    }
    pthread_barrier_wait(&all_in);
    return arg;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    pthread_t *t = calloc((size_t)n, sizeof *t);
    pthread_barrier_init(&all_in, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0) return 1;
    pthread_barrier_wait(&all_in);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    free(t);
    printf("%d threads x %d pairs\n", n, PAIRS);
    return 0;
}
