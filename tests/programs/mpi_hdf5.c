/* An MPI program that writes its own file with parallel HDF5 (see
 * tests/tests/mpi_hdf5.rs): every rank writes its ROWS rows of the dataset
 * /field (P·ROWS × COLS doubles) collectively, and one column of /owner
 * (ints, a strided hyperslab); /field carries an attribute "ranks". The file
 * is then reopened, every rank reads all of /field back collectively, checks
 * it and rank 0 prints the sum. Build with h5pcc, or mpicc against
 * libhdf5-openmpi-dev. Usage: mpi_hdf5 <file> */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define ROWS 64
#define COLS 128

#define CHECK(x)                                                               \
    do {                                                                       \
        if ((x) < 0) {                                                         \
            fprintf(stderr, "mpi_hdf5: rank %d: %s failed\n", rank, #x);       \
            MPI_Abort(MPI_COMM_WORLD, 4);                                      \
        }                                                                      \
    } while (0)

static double value(int row, int col) { return row * 1000.0 + col + 0.25; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *name = argc > 1 ? argv[1] : "mpi_hdf5.h5";

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
    hid_t file = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(file);
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    CHECK(H5Pset_dxpl_mpio(xfer, H5FD_MPIO_COLLECTIVE));

    /* /field: row block per rank. */
    hsize_t dims[2] = {(hsize_t)size * ROWS, COLS};
    hid_t fspace = H5Screate_simple(2, dims, NULL);
    hid_t dset = H5Dcreate2(file, "field", H5T_NATIVE_DOUBLE, fspace, H5P_DEFAULT, H5P_DEFAULT,
                            H5P_DEFAULT);
    CHECK(dset);
    double *block = malloc(sizeof(double) * ROWS * COLS);
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++) block[i * COLS + j] = value(rank * ROWS + i, j);
    hsize_t start[2] = {(hsize_t)rank * ROWS, 0}, count[2] = {ROWS, COLS};
    CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
    hid_t mspace = H5Screate_simple(2, count, NULL);
    CHECK(H5Dwrite(dset, H5T_NATIVE_DOUBLE, mspace, fspace, xfer, block));
    int nr = size;
    hid_t aspace = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(dset, "ranks", H5T_NATIVE_INT, aspace, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(H5Awrite(attr, H5T_NATIVE_INT, &nr));
    H5Aclose(attr);
    H5Sclose(aspace);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(dset);

    /* /owner: COLS × P ints, rank r writes column r (stride P). */
    hsize_t odims[2] = {COLS, (hsize_t)size};
    hid_t ospace = H5Screate_simple(2, odims, NULL);
    hid_t oset = H5Dcreate2(file, "owner", H5T_NATIVE_INT, ospace, H5P_DEFAULT, H5P_DEFAULT,
                            H5P_DEFAULT);
    CHECK(oset);
    int col[COLS];
    for (int i = 0; i < COLS; i++) col[i] = rank * 10000 + i;
    hsize_t ostart[2] = {0, (hsize_t)rank}, ocount[2] = {COLS, 1};
    CHECK(H5Sselect_hyperslab(ospace, H5S_SELECT_SET, ostart, NULL, ocount, NULL));
    hsize_t mdim = COLS;
    hid_t omspace = H5Screate_simple(1, &mdim, NULL);
    CHECK(H5Dwrite(oset, H5T_NATIVE_INT, omspace, ospace, xfer, col));
    H5Sclose(omspace);
    H5Sclose(ospace);
    H5Dclose(oset);
    CHECK(H5Fclose(file));

    /* Read everything back, collectively. */
    file = H5Fopen(name, H5F_ACC_RDONLY, fapl);
    CHECK(file);
    dset = H5Dopen2(file, "field", H5P_DEFAULT);
    CHECK(dset);
    double *all = malloc(sizeof(double) * size * ROWS * COLS);
    CHECK(H5Dread(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, xfer, all));
    double sum = 0;
    for (int i = 0; i < size * ROWS; i++)
        for (int j = 0; j < COLS; j++) {
            if (all[i * COLS + j] != value(i, j)) {
                fprintf(stderr, "mpi_hdf5: rank %d: wrong value at (%d, %d)\n", rank, i, j);
                MPI_Abort(MPI_COMM_WORLD, 5);
            }
            sum += all[i * COLS + j];
        }
    H5Dclose(dset);
    CHECK(H5Fclose(file));
    H5Pclose(xfer);
    H5Pclose(fapl);
    free(all);
    free(block);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("mpi_hdf5: %d ranks wrote %s, sum %.2f\n", size, name, sum);
    MPI_Finalize();
    return 0;
}
