/* OpenMP (tests/tests/openmp.rs): a parallel loop and explicit tasks that
 * allocate, on libgomp's thread pool.
 *
 *   omp_loop_alloc:  ITERS x malloc(64 + 8 * (i % 16)), from every thread
 *                    of a `parallel for`, each freed. The schedule hands out
 *                    chunks of 64 in turn (static), so every thread, the
 *                    master too, runs some: with a dynamic schedule a master
 *                    thread that a loaded machine kept off its CPU found
 *                    every chunk taken by the pool's threads
 *   omp_task_alloc:  TASKS x malloc(96), one per task, each freed
 * Prints integer checksums (the same in any order) and the team size.
 * Usage: omp_work ITERS TASKS */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define NOIPA __attribute__((noinline, noclone))

NOIPA static long omp_loop_alloc(long i) {
    size_t n = 8 + (size_t)(i % 16);
    long *a = malloc(n * sizeof *a);
    if (!a) return -1;
    for (size_t k = 0; k < n; k++) a[k] = i + (long)k;
    long s = a[n - 1];
    free(a);
    return s;
}

NOIPA static long omp_task_alloc(long t) {
    long *a = malloc(12 * sizeof *a);
    if (!a) return -1;
    for (int k = 0; k < 12; k++) a[k] = t * k;
    long s = a[11];
    free(a);
    return s;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    long iters = atol(argv[1]), tasks = atol(argv[2]);
    long loop = 0, task = 0;
    int team = 0;
#pragma omp parallel for reduction(+ : loop) schedule(static, 64)
    for (long i = 0; i < iters; i++) loop += omp_loop_alloc(i);
#pragma omp parallel
    {
#pragma omp single
        {
            team = omp_get_num_threads();
            for (long t = 0; t < tasks; t++) {
#pragma omp task firstprivate(t)
                {
                    long s = omp_task_alloc(t);
#pragma omp atomic
                    task += s;
                }
            }
        }
    }
    printf("loop %ld task %ld team %d\n", loop, task, team);
    return 0;
}
