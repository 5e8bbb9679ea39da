/* MPI merge benchmark program (benches/mpi_merge.py): every rank makes
 * `events` allocations over 2^DEPTH call paths (a recursion through s0/s1
 * chosen by the code's bits), Zipf(1.0) with the hot spot shifted by 13·rank
 * so that ranks share most contexts but not all, then an MPI_Barrier and the
 * timed MPI_Finalize (where the tracer's reduction runs).
 *
 * Rank 0 prints one line of key=value figures: the wall clock (CLOCK_REALTIME,
 * ns) just before and after MPI_Finalize, and its VmHWM/VmRSS (KiB) before
 * and after. Usage: mpi_merge [events per rank] */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEPTH 10
#define LEAF_SIZES 128
#include "../tests/programs/zipf_paths.h"
#include "../tests/programs/proc_status.h"

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long events = argc > 1 ? atol(argv[1]) : 20000;
    run_zipf_paths(events, 777 + rank, 13u * rank);
    MPI_Barrier(MPI_COMM_WORLD);
    long hwm0 = status_kib("VmHWM"), rss0 = status_kib("VmRSS");
    long long t0 = now_ns();
    MPI_Finalize();
    long long t1 = now_ns();
    long hwm1 = status_kib("VmHWM"), rss1 = status_kib("VmRSS");
    if (rank == 0)
        printf("mpi_merge ranks=%d finalize_start_ns=%lld finalize_end_ns=%lld "
               "hwm_before_kib=%ld hwm_after_kib=%ld rss_before_kib=%ld rss_after_kib=%ld\n",
               size, t0, t1, hwm0, hwm1, rss0, rss1);
    return 0;
}
