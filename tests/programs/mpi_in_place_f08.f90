! Allgather and Gather with MPI_IN_PLACE and MPI_DATATYPE_NULL through the
! mpi_f08 bindings (which call the tracer's *_f08_ wrappers). Bytes per
! rank: Allgather 1 integer, Gather 1 integer.
program mpi_in_place_f08
  use mpi_f08
  implicit none
  integer :: rank, nprocs, buf(64), i, bad
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  bad = 0
  buf(rank + 1) = 10 * rank
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, 1, MPI_INTEGER, MPI_COMM_WORLD)
  do i = 1, nprocs
    if (buf(i) /= 10 * (i - 1)) bad = bad + 1
  end do
  buf(rank + 1) = 20 * rank
  if (rank == 0) then
    call MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
    do i = 1, nprocs
      if (buf(i) /= 20 * (i - 1)) bad = bad + 1
    end do
  else
    call MPI_Gather(buf(rank + 1), 1, MPI_INTEGER, buf, 0, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD)
  end if
  if (bad == 0) then
    print '(a,i0,a)', 'rank ', rank, ': ok'
  else
    print '(a,i0,a)', 'rank ', rank, ': WRONG'
  end if
  call MPI_Finalize()
end program
