//! Whether the process runs under valgrind, asked the way `valgrind.h`'s
//! `RUNNING_ON_VALGRIND` asks: a "client request", an instruction sequence
//! that does nothing on a processor and that valgrind's translator
//! recognises and answers. Valgrind does not support every way of creating
//! a process (`quiet_child.rs`): under it the tracer does without those.

/// valgrind.h's `VG_USERREQ__RUNNING_ON_VALGRIND`.
const RUNNING_ON_VALGRIND: u64 = 0x1001;

/// True under valgrind (any tool), false on the processor.
#[cfg(target_arch = "x86_64")]
pub fn running() -> bool {
    let request: [u64; 6] = [RUNNING_ON_VALGRIND, 0, 0, 0, 0, 0];
    let mut answer: u64 = 0;
    // SAFETY: valgrind.h's amd64 client request. On a processor the four
    // rotations of rdi add up to 128 bits (rdi unchanged, declared
    // clobbered anyway), `xchg rbx, rbx` changes nothing, and rdx keeps
    // the default answer 0; under valgrind, rdx receives the answer to the
    // request that rax points to (six words, read only).
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") request.as_ptr(),
            inout("rdx") answer,
            out("rdi") _,
            options(nostack, readonly),
        );
    }
    answer != 0
}

#[cfg(not(target_arch = "x86_64"))]
pub fn running() -> bool {
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn not_under_valgrind_on_the_processor() {
        // The test binary runs natively; the e2e test under valgrind
        // (tests/tests/valgrind.rs) covers the other answer.
        assert!(!super::running());
    }
}
