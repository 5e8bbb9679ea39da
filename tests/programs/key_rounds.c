/* Thread-exit destructors that allocate in several rounds
 * (tests/tests/threads.rs): each of N threads sets a pthread key whose
 * destructor mallocs and frees 64 bytes and sets the key again, R times in
 * all (glibc runs a key's destructor again while its value is set, as
 * per-thread caches do). Prints the calls it made.
 *
 *   key_rounds N R */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_key_t key;
static int rounds = 2;
static void *volatile sink;

__attribute__((noinline)) static void round_scratch(void) {
    void *q = malloc(64);
    sink = q;
    free(q);
}

static void destructor(void *p) {
    long n = (long)p;
    round_scratch();
    if (n < rounds) pthread_setspecific(key, (void *)(n + 1));
}

static void *worker(void *arg) {
    (void)arg;
    pthread_setspecific(key, (void *)1);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    rounds = argc > 2 ? atoi(argv[2]) : 2;
    pthread_key_create(&key, destructor);
    for (int i = 0; i < n; i++) {
        pthread_t t;
        pthread_create(&t, NULL, worker, NULL);
        pthread_join(t, NULL);
    }
    printf("%d threads, %d destructor rounds: %d mallocs of 64 bytes\n", n, rounds, n * rounds);
    return 0;
}
