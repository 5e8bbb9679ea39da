! Polling from Fortran (see tests/tests/mpi_polling.rs): the `mpif.h`
! bindings' MPI_TEST from two subroutines in turn, then MPI_TESTANY, on a
! self-addressed receive that stays pending; the tracer folds each run of
! calls into the record of its first and must count every call in its own
! context. Rank 0 prints one line.
subroutine poll_a(req, n)
  implicit none
  include 'mpif.h'
  integer :: req, n, i, ierr
  logical :: flag
  integer :: st(MPI_STATUS_SIZE)
  do i = 1, n
    call MPI_TEST(req, flag, st, ierr)
  end do
end subroutine poll_a

subroutine poll_b(req, n)
  implicit none
  include 'mpif.h'
  integer :: req, n, i, ierr
  logical :: flag
  integer :: st(MPI_STATUS_SIZE)
  do i = 1, n
    call MPI_TEST(req, flag, st, ierr)
  end do
end subroutine poll_b

subroutine poll_any(req, n)
  implicit none
  include 'mpif.h'
  integer :: req(1), n, i, idx, ierr
  logical :: flag
  integer :: st(MPI_STATUS_SIZE)
  do i = 1, n
    call MPI_TESTANY(1, req, idx, flag, st, ierr)
  end do
end subroutine poll_any

program mpi_polling_f
  implicit none
  include 'mpif.h'
  integer, parameter :: rounds = 30, na = 500, nb = 250, nt = 700
  integer :: rank, nprocs, ierr, k, req(1), buf, one
  integer :: st(MPI_STATUS_SIZE)
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  call MPI_IRECV(buf, 1, MPI_INTEGER, rank, 5, MPI_COMM_WORLD, req(1), ierr)
  do k = 1, rounds
    call poll_a(req(1), na)
    call poll_b(req(1), nb)
  end do
  call poll_any(req, nt)
  one = 1
  call MPI_SEND(one, 1, MPI_INTEGER, rank, 5, MPI_COMM_WORLD, ierr)
  call MPI_WAIT(req(1), st, ierr)
  if (rank == 0) print '(a,i0,a,i0,a)', 'mpi_polling_f: ', nprocs, ' ranks, ', &
       rounds * (na + nb) + nt, ' tests'
  call MPI_FINALIZE(ierr)
end program mpi_polling_f
