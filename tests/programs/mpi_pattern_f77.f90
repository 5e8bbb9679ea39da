! MPI test program (mpif.h bindings) with the pattern of mpi_pattern.c:
! rank r allocates (r+1)*K arrays of 8 doubles (64 bytes) in ctx_a and K arrays
! of 32 doubles (256 bytes) in ctx_b; then Sendrecv, Bcast, Allreduce, Barrier.
module pattern
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
end module pattern

program mpi_pattern_f77
  use pattern
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, nprocs, k, right, left, i
  integer :: status(MPI_STATUS_SIZE)
  real(8) :: sbuf(1000), rbuf(1000), x, s
  integer :: b(100)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  k = 100
  call ctx_a((rank + 1) * k)
  call ctx_b(k)
  sbuf = rank
  right = mod(rank + 1, nprocs)
  left = mod(rank + nprocs - 1, nprocs)
  call MPI_Sendrecv(sbuf, 1000, MPI_DOUBLE_PRECISION, right, 7, rbuf, 1000, &
       MPI_DOUBLE_PRECISION, left, 7, MPI_COMM_WORLD, status, ierr)
  do i = 1, 100
    b(i) = i
  end do
  call MPI_Bcast(b, 100, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  x = rank
  call MPI_Allreduce(x, s, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
  if (rank == 0) print '(a,i0,a)', 'mpi_pattern_f77 done on ', nprocs, ' ranks'
end program mpi_pattern_f77
