/* Buffered output left for exit() to flush (tests/tests/exit_output.rs),
 * run with stdout and stderr in one pipe: the tracer's closing line must
 * follow all of it, and the program's bytes be those of an untraced run.
 *   lines    stdout lines, one stderr line between them
 *   streams  stdout, a second stream on fd 1, a wide one on fd 1, and a
 *            stream to the file streams.txt, all buffered
 *   stdin    a thread blocked in fgets(stdin) while main returns
 *   held     a thread that holds stdout's lock, blocked in fgets(stdin),
 *            while main returns
 *   partial  a last line without its newline
 *   order    three more streams on fd 1, the middle one held (with its
 *            line) by a thread when main exits */
#define _GNU_SOURCE /* fputs_unlocked */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

static sem_t ready;

static void *read_stdin(void *hold_stdout) {
    char line[64];
    if (hold_stdout) {
        flockfile(stdout);
        fputs_unlocked("written by a thread that holds stdout\n", stdout);
    }
    sem_post(&ready);
    if (fgets(line, sizeof line, stdin)) printf("read %s", line);
    return NULL;
}

/* Holds the stream it is given, with a line in it, until the end. */
static void *hold_stream(void *stream) {
    flockfile(stream);
    fputs_unlocked("second newest, held by a thread\n", stream);
    sem_post(&ready);
    for (;;) pause();
    return NULL;
}

static void *volatile sink;

static void work(int i) {
    sink = malloc(16 + i);
    free(sink);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "lines";
    if (!strcmp(mode, "lines")) {
        for (int i = 0; i < 3; i++) {
            printf("line %d\n", i);
            work(i);
            if (i == 1) fprintf(stderr, "to stderr after line 1\n");
        }
    } else if (!strcmp(mode, "streams")) {
        printf("stdout first\n");
        FILE *second = fdopen(dup(1), "w");
        FILE *wide = fdopen(dup(1), "w");
        FILE *file = fopen("streams.txt", "w");
        if (!second || !wide || !file) return 2;
        fprintf(second, "second stream on fd 1\n");
        fwprintf(wide, L"wide stream on fd 1\n");
        fprintf(file, "a buffered stream to a file\n");
        printf("stdout last\n");
        work(0);
    } else if (!strcmp(mode, "stdin") || !strcmp(mode, "held")) {
        pthread_t t;
        sem_init(&ready, 0, 0);
        if (!strcmp(mode, "stdin")) printf("main before the thread\n");
        pthread_create(&t, NULL, read_stdin, strcmp(mode, "held") ? NULL : stdout);
        sem_wait(&ready);
        usleep(100 * 1000); /* the thread in its read */
        fprintf(stderr, "main returns\n");
        work(1);
        return 3;
    } else if (!strcmp(mode, "order")) {
        pthread_t t;
        sem_init(&ready, 0, 0);
        printf("stdout\n");
        FILE *oldest = fdopen(dup(1), "w");
        FILE *held = fdopen(dup(1), "w");
        FILE *newest = fdopen(dup(1), "w");
        if (!oldest || !held || !newest) return 2;
        fprintf(oldest, "oldest of the three\n");
        fprintf(newest, "newest\n");
        pthread_create(&t, NULL, hold_stream, held);
        sem_wait(&ready);
        work(3);
        exit(0);
    } else if (!strcmp(mode, "partial")) {
        printf("a line\nno newline at the end");
        work(2);
    } else {
        return 2;
    }
    return 0;
}
