//! The reduction over MPI: each rank merges its children's profiles into its
//! own, in the binomial tree's order, and sends the result to its parent.

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use wmhcct_collector::job;
use wmhcct_format::{decode, encode, FormatError};

use crate::tree::schedule;

const TAG: i32 = 0x574d;

#[derive(Debug)]
pub struct ReduceError(pub String);

impl std::fmt::Display for ReduceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cross-rank reduction failed: {}", self.0)
    }
}

impl From<FormatError> for ReduceError {
    fn from(e: FormatError) -> Self {
        ReduceError(e.to_string())
    }
}

/// Returns the merged job profile (encoded) on rank 0, `None` elsewhere.
pub fn reduce(
    comm: &SimpleCommunicator,
    local: &[u8],
    capacity: usize,
) -> Result<Option<Vec<u8>>, ReduceError> {
    let rank = comm.rank() as u32;
    let size = comm.size() as u32;
    let mut acc = job::as_job_part(decode(local)?, rank);
    let (children, parent) = schedule(rank, size);
    for child in children {
        let (bytes, _status) = comm
            .process_at_rank(child as i32)
            .receive_vec_with_tag::<u8>(TAG);
        let part = decode(&bytes)?;
        drop(bytes);
        acc = job::merge(acc, part, capacity);
    }
    match parent {
        Some(p) => {
            let bytes = encode(&acc)?;
            comm.process_at_rank(p as i32)
                .send_with_tag(&bytes[..], TAG);
            Ok(None)
        }
        None => {
            job::finish(&mut acc, size);
            Ok(Some(encode(&acc)?))
        }
    }
}
