"""An mpi4py program with a known pattern (tests/tests/mpi4py.rs): each
rank allocates BLOCKS buffers of MIB MiB (bytearray: the C heap), then one
MPI_Allreduce of 1000 doubles and one MPI_Barrier. Python loads the MPI
library with mpi4py's extension (RTLD_LOCAL), outside the global scope."""
from array import array

from mpi4py import MPI

BLOCKS, MIB = 10, 4

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
kept = [bytearray(MIB << 20) for _ in range(BLOCKS)]
send = array("d", [float(rank)] * 1000)
recv = array("d", [0.0] * 1000)
comm.Allreduce(send, recv, op=MPI.SUM)
comm.Barrier()
size = comm.Get_size()
assert recv[0] == size * (size - 1) / 2, recv[0]
del kept
if rank == 0:
    print(f"mpi_pattern.py done on {size} ranks")
