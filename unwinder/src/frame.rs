//! One frame of a captured stack and the registers a capture starts from.

/// One frame of a captured stack.
///
/// `ra` is a code address in the frame's function: the return address for every frame but
/// the innermost one, which carries the program counter of the capture point. `sp` is the
/// caller-side stack pointer of that frame (the CFA of the frame below it); for the innermost
/// frame it is the stack pointer at the capture point. Within one stack the `sp` values are
/// strictly increasing from leaf to root, so `sp` identifies a height on the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Frame {
    pub ra: u64,
    pub sp: u64,
}

/// The x86_64 registers at the capture point.
#[derive(Clone, Copy, Debug)]
pub struct Regs {
    pub pc: u64,
    pub sp: u64,
    pub bp: u64,
    /// `pc` is a return address: the capture point is a caller at its call,
    /// as the callee's first instruction sees it (`sp` just above the return
    /// address, `bp` the caller's). Its unwind rule is then looked up as for
    /// any return address, at `pc - 1`: where the call is its function's
    /// last instruction, `pc` itself belongs to the next function.
    pub pc_is_return: bool,
}

/// Number of root-side frames two stacks (leaf first) have in common, comparing both the
/// return address and the stack pointer, from the root end.
pub(crate) fn common_root_len(a: &[Frame], b: &[Frame]) -> usize {
    a.iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// Whether two stacks have the same sequence of return addresses.
pub(crate) fn same_return_addresses(a: &[Frame], b: &[Frame]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.ra == y.ra)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(ra: u64, sp: u64) -> Frame {
        Frame { ra, sp }
    }

    #[test]
    fn common_root_counts_from_the_root_end() {
        let a = [f(1, 10), f(2, 20), f(3, 30)];
        let b = [f(9, 5), f(7, 15), f(2, 20), f(3, 30)];
        assert_eq!(common_root_len(&a, &b), 2);
        assert_eq!(common_root_len(&a, &a), 3);
        // With a known common tail left out, as a capture that reused it
        // counts: the tail plus the rest.
        assert_eq!(2 + common_root_len(&a[..1], &a[..1]), 3);
        assert_eq!(1 + common_root_len(&a[..2], &b[..3]), 2);
        assert_eq!(common_root_len(&a, &[]), 0);
        // Same ra at a different height is not common.
        assert_eq!(common_root_len(&[f(3, 31)], &[f(3, 30)]), 0);
    }

    #[test]
    fn return_address_equality_ignores_sp() {
        let a = [f(1, 10), f(2, 20)];
        let b = [f(1, 11), f(2, 21)];
        assert!(same_return_addresses(&a, &b));
        assert!(!same_return_addresses(&a, &b[..1]));
        assert!(!same_return_addresses(&a, &[f(1, 10), f(3, 20)]));
    }
}
