! OpenMP in Fortran (tests/tests/openmp.rs): allocatable arrays allocated
! and deallocated in every iteration of a `parallel do`, by gfortran's
! runtime calls to malloc/free from each thread of libgomp's pool.
!
!   omp_fortran_work: ITERS x allocate(a(8 + mod(i, 16))) (integer*8), freed
! The loop's chunks of 64 go to the threads in turn (static schedule), so
! every thread, the master too, runs some (see omp_work.c).
! Prints an integer checksum (the same in any order).
! Usage: omp_work_f ITERS
module omp_fortran_mod
  implicit none
contains
  integer(8) function omp_fortran_work(i)
    integer(8), intent(in) :: i
    integer(8), allocatable :: a(:)
    integer(8) :: k, n
    n = 8 + mod(i, 16_8)
    allocate(a(n))
    do k = 1, n
      a(k) = i + k
    end do
    omp_fortran_work = a(n)
    deallocate(a)
  end function omp_fortran_work
end module omp_fortran_mod

program omp_work_f
  use omp_fortran_mod
  implicit none
  integer(8) :: i, iters, total
  character(len=32) :: arg
  call get_command_argument(1, arg)
  read (arg, *) iters
  total = 0
  !$omp parallel do reduction(+:total) schedule(static, 64)
  do i = 1, iters
    total = total + omp_fortran_work(i)
  end do
  !$omp end parallel do
  print '(a, i0)', 'fortran total ', total
end program omp_work_f
