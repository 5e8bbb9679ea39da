/* The bundled demo: a 1-D decomposed 2-D Jacobi heat solver with halo
 * exchange. Each rank owns a slab whose size grows with the rank (imbalance),
 * allocates halo and scratch buffers every iteration, keeps a checkpoint every
 * 50 iterations (growing memory) and frees them in the end, except one
 * deliberately leaked diagnostics buffer.
 *   mpi_stencil [iterations] [columns]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { int rows, cols; double *u, *v; } slab_t;

__attribute__((noinline)) static double *alloc_grid(int rows, int cols) {
    return calloc((size_t)(rows + 2) * cols, sizeof(double));
}

__attribute__((noinline)) static void exchange_halos(slab_t *s, int rank, int size) {
    double *send = malloc(sizeof(double) * s->cols);
    double *recv = malloc(sizeof(double) * s->cols);
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    memcpy(send, s->u + (size_t)s->cols, sizeof(double) * s->cols);
    MPI_Sendrecv(send, s->cols, MPI_DOUBLE, up, 1, recv, s->cols, MPI_DOUBLE, down, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (down != MPI_PROC_NULL)
        memcpy(s->u + (size_t)(s->rows + 1) * s->cols, recv, sizeof(double) * s->cols);
    memcpy(send, s->u + (size_t)s->rows * s->cols, sizeof(double) * s->cols);
    MPI_Sendrecv(send, s->cols, MPI_DOUBLE, down, 2, recv, s->cols, MPI_DOUBLE, up, 2,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (up != MPI_PROC_NULL) memcpy(s->u, recv, sizeof(double) * s->cols);
    free(send);
    free(recv);
}

__attribute__((noinline)) static double relax(slab_t *s) {
    double *scratch = malloc(sizeof(double) * s->cols);
    double diff = 0;
    for (int i = 1; i <= s->rows; i++) {
        for (int j = 1; j < s->cols - 1; j++) {
            size_t k = (size_t)i * s->cols + j;
            double nv = 0.25 * (s->u[k - 1] + s->u[k + 1] + s->u[k - s->cols] + s->u[k + s->cols]);
            scratch[j] = nv;
            diff += (nv - s->u[k]) * (nv - s->u[k]);
        }
        memcpy(s->v + (size_t)i * s->cols + 1, scratch + 1, sizeof(double) * (s->cols - 2));
    }
    double *t = s->u; s->u = s->v; s->v = t;
    free(scratch);
    return diff;
}

__attribute__((noinline)) static double *checkpoint(slab_t *s) {
    double *c = malloc(sizeof(double) * (size_t)(s->rows + 2) * s->cols);
    memcpy(c, s->u, sizeof(double) * (size_t)(s->rows + 2) * s->cols);
    return c;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 400;
    int cols = argc > 2 ? atoi(argv[2]) : 256;
    slab_t s = { 32 * (rank + 1), cols, NULL, NULL };
    s.u = alloc_grid(s.rows, s.cols);
    s.v = alloc_grid(s.rows, s.cols);
    if (rank == 0) for (int j = 0; j < cols; j++) s.u[j] = s.v[j] = 100.0;
    double *checkpoints[64];
    int nchk = 0;
    char *diagnostics = malloc(4096); /* leaked on purpose */
    double res = 0;
    for (int it = 0; it < iters; it++) {
        exchange_halos(&s, rank, size);
        double local = relax(&s);
        MPI_Allreduce(&local, &res, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (it % 50 == 49 && nchk < 64) checkpoints[nchk++] = checkpoint(&s);
    }
    snprintf(diagnostics, 4096, "residual %g", res);
    for (int i = 0; i < nchk; i++) free(checkpoints[i]);
    free(s.u);
    free(s.v);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("mpi_stencil: %d ranks, %d iterations, %s\n", size, iters, diagnostics);
    MPI_Finalize();
    return 0;
}
