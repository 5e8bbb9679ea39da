//! The binomial reduction tree: O(log P) rounds, each rank receiving from
//! its children in order and then sending once to its parent.

/// Children (in the order their messages are merged) and parent of `rank`.
pub fn schedule(rank: u32, size: u32) -> (Vec<u32>, Option<u32>) {
    let mut children = Vec::new();
    let mut mask = 1u64;
    while mask < size as u64 {
        if rank as u64 & mask != 0 {
            return (children, Some((rank as u64 - mask) as u32));
        }
        let child = rank as u64 + mask;
        if child < size as u64 {
            children.push(child as u32);
        }
        mask <<= 1;
    }
    (children, None)
}

/// Number of rounds (tree depth) for `size` ranks.
pub fn depth(size: u32) -> u32 {
    if size <= 1 {
        0
    } else {
        32 - (size - 1).leading_zeros()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_but_root_sends_once_and_is_received_once() {
        for size in 1..200u32 {
            let mut received = vec![0u32; size as usize];
            for r in 0..size {
                let (children, parent) = schedule(r, size);
                assert_eq!(parent.is_none(), r == 0, "size {size} rank {r}");
                if let Some(p) = parent {
                    assert!(p < r);
                    assert!(schedule(p, size).0.contains(&r));
                }
                assert!(children.len() as u32 <= depth(size));
                for c in children {
                    received[c as usize] += 1;
                }
            }
            assert_eq!(received[0], 0);
            assert!(received[1..].iter().all(|&n| n == 1));
        }
    }

    #[test]
    fn depth_is_logarithmic() {
        assert_eq!(depth(1), 0);
        assert_eq!(depth(2), 1);
        assert_eq!(depth(64), 6);
        assert_eq!(depth(65), 7);
        assert_eq!(depth(100_000), 17);
    }
}
