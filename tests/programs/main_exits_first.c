/* The main thread ends first, with pthread_exit, while two detached
 * workers go on; the process ends when the last of them returns, with
 * status 0, as glibc does for a last thread
 * (tests/tests/collector_thread.rs).
 *
 *   main:     100 x malloc(16) in main_blocks, kept;
 *   worker i: 1000 x malloc(32) + free in worker_loop, then sleeps
 *             (i + 1) * 100 ms, then 10 x malloc(2048) in worker_tail,
 *             kept, and says "worker i done".
 *
 * Totals from these: malloc 100 + 2 * 1010, free 2 * 1000 (plus what
 * glibc's own calls add: pthread_create's, none from stdio, which is
 * not used). Through a volatile pointer, so no malloc/free pair is
 * elided. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))

void *kept[100 + 2 * 10]; /* global: the blocks stay reachable, and kept */

static void say(const char *s) {
    if (write(1, s, strlen(s)) < 0) _exit(9);
}

NOIPA static void main_blocks(void) {
    for (int i = 0; i < 100; i++) kept[i] = malloc(16);
}

NOIPA static void worker_loop(void) {
    for (int i = 0; i < 1000; i++) {
        void *volatile block = malloc(32);
        free(block);
    }
}

NOIPA static void worker_tail(int id) {
    for (int i = 0; i < 10; i++) kept[100 + id * 10 + i] = malloc(2048);
}

static void *worker(void *arg) {
    int id = (int)(long)arg;
    worker_loop();
    usleep((useconds_t)(id + 1) * 100000);
    worker_tail(id);
    say(id == 0 ? "worker 0 done\n" : "worker 1 done\n");
    return NULL;
}

int main(void) {
    main_blocks();
    for (long id = 0; id < 2; id++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, (void *)id) != 0) return 2;
        pthread_detach(t);
    }
    say("main leaves\n");
    pthread_exit(NULL);
}
