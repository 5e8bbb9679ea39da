/* Collectives with MPI_IN_PLACE, the arguments the standard then ignores
 * set to 0 and MPI_DATATYPE_NULL (the standard's own idiom), and a failing
 * MPI_Alloc_mem. Each rank checks the data it got and prints one line:
 * the tracer must neither end the job (asking MPI the size of the null
 * type is fatal) nor change a result. Bytes per rank r of P (ints):
 *   Gather 2, Scatter 3, Gatherv r+1, Scatterv r+1, Allgather 2,
 *   Allgatherv r+1, Alltoall 2P, Alltoallv 3P;
 *   MPI_Alloc_mem: 1 call of 4096 bytes, and with an argument one more
 *   that fails. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#define MAXP 16

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, p, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (p > MAXP) MPI_Abort(MPI_COMM_WORLD, 2);
    int buf[MAXP * MAXP], cnt[MAXP], dsp[MAXP];
    for (int i = 0; i < p; i++) { cnt[i] = i + 1; dsp[i] = MAXP * i; }

    /* Gather, the root in place. */
    for (int i = 0; i < 2; i++) buf[2 * r + i] = 100 * r + i;
    if (r == 0)
        MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, 2, MPI_INT, 0, MPI_COMM_WORLD);
    else
        MPI_Gather(buf + 2 * r, 2, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD);
    if (r == 0)
        for (int i = 0; i < 2 * p; i++) bad += buf[i] != 100 * (i / 2) + i % 2;

    /* Scatter, the root in place. */
    if (r == 0) for (int i = 0; i < 3 * p; i++) buf[i] = 7 * i;
    if (r == 0)
        MPI_Scatter(buf, 3, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD);
    else
        MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, buf, 3, MPI_INT, 0, MPI_COMM_WORLD);
    for (int i = 0; i < 3; i++) bad += buf[i] != 7 * (3 * r + i);

    /* Gatherv and Scatterv, the root in place. */
    for (int i = 0; i <= r; i++) buf[dsp[r] + i] = 1000 + 10 * r + i;
    if (r == 0)
        MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, dsp, MPI_INT, 0, MPI_COMM_WORLD);
    else
        MPI_Gatherv(buf + dsp[r], r + 1, MPI_INT, NULL, NULL, NULL, MPI_DATATYPE_NULL, 0,
                    MPI_COMM_WORLD);
    if (r == 0)
        for (int k = 0; k < p; k++)
            for (int i = 0; i <= k; i++) bad += buf[dsp[k] + i] != 1000 + 10 * k + i;
    if (r == 0)
        MPI_Scatterv(buf, cnt, dsp, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, 0,
                     MPI_COMM_WORLD);
    else
        MPI_Scatterv(NULL, NULL, NULL, MPI_DATATYPE_NULL, buf + dsp[r], r + 1, MPI_INT, 0,
                     MPI_COMM_WORLD);
    for (int i = 0; i <= r; i++) bad += buf[dsp[r] + i] != 1000 + 10 * r + i;

    /* Allgather, Allgatherv, Alltoall, Alltoallv in place. */
    for (int i = 0; i < 2; i++) buf[2 * r + i] = 50 * r + i;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, 2, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < 2 * p; i++) bad += buf[i] != 50 * (i / 2) + i % 2;
    for (int i = 0; i <= r; i++) buf[dsp[r] + i] = 300 + 10 * r + i;
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, dsp, MPI_INT, MPI_COMM_WORLD);
    for (int k = 0; k < p; k++)
        for (int i = 0; i <= k; i++) bad += buf[dsp[k] + i] != 300 + 10 * k + i;
    for (int k = 0; k < p; k++)
        for (int i = 0; i < 2; i++) buf[2 * k + i] = 1000 * r + 10 * k + i;
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, 2, MPI_INT, MPI_COMM_WORLD);
    for (int k = 0; k < p; k++)
        for (int i = 0; i < 2; i++) bad += buf[2 * k + i] != 1000 * k + 10 * r + i;
    /* In place, the counts must be symmetric: 3 ints with every rank. */
    int three[MAXP], at[MAXP];
    for (int k = 0; k < p; k++) {
        three[k] = 3;
        at[k] = 4 * k;
        for (int i = 0; i < 3; i++) buf[at[k] + i] = 1000 * r + 10 * k + i;
    }
    MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, buf, three, at, MPI_INT,
                  MPI_COMM_WORLD);
    for (int k = 0; k < p; k++)
        for (int i = 0; i < 3; i++) bad += buf[at[k] + i] != 1000 * k + 10 * r + i;

    /* With an argument, an MPI_Alloc_mem that fails (errors returned;
     * Open MPI's fails, MPICH's succeeds), then one that works. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    void *huge = NULL, *page = NULL;
    if (argc > 1) bad += MPI_Alloc_mem((MPI_Aint)1 << 50, MPI_INFO_NULL, &huge) == MPI_SUCCESS;
    bad += MPI_Alloc_mem(4096, MPI_INFO_NULL, &page) != MPI_SUCCESS;
    MPI_Free_mem(page);

    printf("rank %d of %d: %s\n", r, p, bad ? "WRONG" : "ok");
    MPI_Finalize();
    return 0;
}
