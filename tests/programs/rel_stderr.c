/* A program that gives fd 2 to a file of its own (tests/tests/reliability_process.rs).
 *
 * reopen: close(2), then open the data file, which gets fd 2.
 * dup2:   open the data file and dup2 it onto fd 2 (what freopen(stderr) does).
 * keep:   open the data file as a new descriptor; fd 2 stays stderr.
 * Then it allocates 1000 times in rel_stderr_work and writes one line to
 * the file through that descriptor, and prints the fd it used on stdout. The
 * tracer's closing line must not end up in the file.
 * Usage: rel_stderr reopen|dup2|keep FILE
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))

NOIPA long rel_stderr_work(int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
        char *p = malloc(100 + i);
        p[0] = (char)i;
        sum += p[0];
        free(p);
    }
    return sum;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int fd;
    if (!strcmp(argv[1], "reopen")) {
        close(2);
        fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    } else if (!strcmp(argv[1], "keep")) {
        fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    } else {
        int f = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        fd = dup2(f, 2);
        close(f);
    }
    long sum = rel_stderr_work(1000);
    const char *line = "the program's own data\n";
    if (write(fd, line, strlen(line)) != (ssize_t)strlen(line)) return 3;
    printf("data on fd %d, sum %ld\n", fd, sum);
    return 0;
}
