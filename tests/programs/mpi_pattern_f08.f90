! MPI test program (use mpi_f08) with the pattern of mpi_pattern.c.
module pattern08
contains
  subroutine ctx_a(n)
    integer, intent(in) :: n
    real(8), allocatable :: a(:)
    integer :: i
    do i = 1, n
      allocate(a(8))
      a(1) = i
      deallocate(a)
    end do
  end subroutine ctx_a

  subroutine ctx_b(n)
    integer, intent(in) :: n
    real(8), allocatable :: b(:)
    integer :: i
    do i = 1, n
      allocate(b(32))
      b(1) = i
      deallocate(b)
    end do
  end subroutine ctx_b
end module pattern08

program mpi_pattern_f08
  use mpi_f08
  use pattern08
  implicit none
  integer :: rank, nprocs, k, right, left, i
  real(8) :: sbuf(1000), rbuf(1000), x, s
  integer :: b(100)
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  k = 100
  call ctx_a((rank + 1) * k)
  call ctx_b(k)
  sbuf = rank
  right = mod(rank + 1, nprocs)
  left = mod(rank + nprocs - 1, nprocs)
  call MPI_Sendrecv(sbuf, 1000, MPI_DOUBLE_PRECISION, right, 7, rbuf, 1000, &
       MPI_DOUBLE_PRECISION, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  do i = 1, 100
    b(i) = i
  end do
  call MPI_Bcast(b, 100, MPI_INTEGER, 0, MPI_COMM_WORLD)
  x = rank
  call MPI_Allreduce(x, s, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Barrier(MPI_COMM_WORLD)
  call MPI_Finalize()
  if (rank == 0) print '(a,i0,a)', 'mpi_pattern_f08 done on ', nprocs, ' ranks'
end program mpi_pattern_f08
