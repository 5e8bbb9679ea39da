// MPI test program (C++) with the pattern of mpi_pattern.c, allocating with new.
#include <mpi.h>
#include <cstdio>
#include <vector>

static volatile int sink;

__attribute__((noinline)) void ctx_a(int n) {
    for (int i = 0; i < n; i++) {
        char *p = new char[64];
        p[0] = static_cast<char>(i);
        sink += p[0];
        delete[] p;
    }
}

__attribute__((noinline)) void ctx_b(int n) {
    for (int i = 0; i < n; i++) {
        char *p = new char[256];
        p[0] = static_cast<char>(i);
        sink += p[0];
        delete[] p;
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int k = 100;
    ctx_a((rank + 1) * k);
    ctx_b(k);
    std::vector<double> out(1000, rank), in(1000);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Sendrecv(out.data(), 1000, MPI_DOUBLE, right, 7, in.data(), 1000, MPI_DOUBLE, left, 7,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int b[100] = {0};
    MPI_Bcast(b, 100, MPI_INT, 0, MPI_COMM_WORLD);
    double x = rank, sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) std::printf("mpi_pattern_cpp done on %d ranks\n", size);
    return 0;
}
