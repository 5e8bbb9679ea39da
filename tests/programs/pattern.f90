! Fortran version of pattern.c (tests/tests/pattern.rs): ALLOCATE and
! DEALLOCATE in the subroutines of a module.
!
!   pattern -> path_a -> leaf_a : 1000 x 8 x integer(4)   = 32 bytes   (deallocated)
!   pattern -> path_b -> leaf_b :  100 x 512 x real(8)    = 4096 bytes (deallocated)
!   pattern -> path_c -> leaf_c :   10 x 131072 x real(8) = 1 MiB      (leaked)
!
! gfortran turns each ALLOCATE into one malloc of the array's size. Same
! order as pattern.c, so the program's own peak is 32000 + 10 MiB =
! 10517760 bytes, and 10485760 bytes leak. Nothing is written before the end.
module pattern_mod
  implicit none
  type blk_a
    integer(4), allocatable :: v(:)
  end type
  type blk_r
    real(8), allocatable :: v(:)
  end type
  type(blk_a), save :: blocks_a(1000)
  type(blk_r), save :: blocks_b(100)
  type(blk_r), save :: blocks_c(10)
  integer, save :: sink = 0
contains
  subroutine leaf_a()
    integer :: i
    do i = 1, 1000
      allocate(blocks_a(i)%v(8))
      blocks_a(i)%v(1) = i
    end do
  end subroutine
  subroutine leaf_b()
    integer :: i
    do i = 1, 100
      allocate(blocks_b(i)%v(512))
      blocks_b(i)%v(1) = i
    end do
  end subroutine
  subroutine leaf_c()
    integer :: i
    do i = 1, 10
      allocate(blocks_c(i)%v(131072))
      blocks_c(i)%v(131072) = i
    end do
  end subroutine
  subroutine path_a()
    call leaf_a()
    sink = sink + blocks_a(1)%v(1)
  end subroutine
  subroutine path_b()
    call leaf_b()
    sink = sink + int(blocks_b(1)%v(1))
  end subroutine
  subroutine path_c()
    call leaf_c()
    sink = sink + int(blocks_c(1)%v(131072))
  end subroutine
  subroutine free_b()
    integer :: i
    do i = 1, 100
      deallocate(blocks_b(i)%v)
    end do
  end subroutine
  subroutine free_a()
    integer :: i
    do i = 1, 1000
      deallocate(blocks_a(i)%v)
    end do
  end subroutine
end module

program pattern
  use pattern_mod
  implicit none
  call path_a()
  call path_b()
  call free_b()
  call path_c()
  call free_a()
  print '(a,i0)', 'pattern done: sink ', sink
end program
