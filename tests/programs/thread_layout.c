/* The program's blocks around a thread's creation (tests/tests/own_heap.rs):
 * a first block, ten more with every other one freed, then one thread
 * created and joined, then twelve blocks: prints each of those twelve's
 * offset from the first block. glibc's pthread_create callocs the new
 * thread's TLS vector from the creating thread's heap, one 16-byte entry
 * per loaded object with thread-local storage: a preloaded library with
 * TLS (the tracer's) makes it 16 bytes longer. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *thread_main(void *arg) { return arg; }

int main(void) {
    char *first = malloc(10);
    void *b[10];
    for (int i = 0; i < 10; i++) b[i] = malloc(100);
    for (int i = 0; i < 10; i += 2) free(b[i]);
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, NULL);
    for (int i = 0; i < 12; i++) printf("%ld ", (long)((char *)malloc(100) - first));
    printf("\n");
    return 0;
}
