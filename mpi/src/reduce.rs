//! The reduction over MPI: each rank merges its children's profiles into its
//! own, in the binomial tree's order, and sends the result to its parent.
//!
//! **A rank that never comes.** A rank that leaves without `MPI_Finalize`
//! (it returned from `main`, called `exit`, or was ended by a signal the
//! tracer saw) leaves its profile in the spill directory, and says so
//! (`left`). Its parent would wait for its message forever, and its
//! children would wait forever for their sends to be taken: under `srun`,
//! which lets the other ranks finish, the job was then killed at the time
//! limit instead of ending as it would without the tracer (until
//! 2026-11-27). So every wait polls, and asks `left` now and then: a
//! parent goes on without a child that left (that child's subtree is
//! missing from the job's report, and the report says how many ranks it
//! holds), and a child whose parent left keeps its profile
//! ([`Reduced::Orphaned`]: the tracer spills it). Polling with short
//! sleeps also keeps a rank that waits in `MPI_Finalize` for a slower one
//! from spinning on a core, which MPI's blocking receive did.

use std::time::{Duration, Instant};

use mpi::point_to_point::MatchedReceiveVec as _;
use mpi::request::StaticScope;
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

/// What the reduction gave this rank.
#[derive(Debug, PartialEq)]
pub enum Reduced {
    /// Rank 0: the job's profile (encoded), and how many ranks it holds
    /// (fewer than the job's when some left without `MPI_Finalize`).
    Root(Vec<u8>, u32),
    /// Its subtree's profile went to its parent.
    Sent,
    /// Its parent left without taking it: the caller keeps it, this
    /// rank's subtree (encoded), in the spill directory.
    Orphaned(&'static [u8]),
}

/// Merge the job's profiles; `left(rank)` says whether a rank has left
/// without `MPI_Finalize`.
pub fn reduce(
    comm: &SimpleCommunicator,
    local: &[u8],
    capacity: usize,
    left: &dyn Fn(u32) -> bool,
) -> Result<Reduced, ReduceError> {
    let rank = comm.rank() as u32;
    let size = comm.size() as u32;
    let mut acc = job::as_job_part(decode(local)?, rank);
    let (children, parent) = schedule(rank, size);
    for child in children {
        let Some(bytes) = receive(comm, child, left) else {
            continue;
        };
        let part = decode(&bytes)?;
        drop(bytes);
        acc = job::merge(acc, part, capacity);
    }
    match parent {
        Some(p) => {
            // Kept for the rest of the process: a send whose receiver left
            // never completes, and its buffer must outlive it (the
            // reduction runs once, in `MPI_Finalize`).
            let bytes: &'static [u8] = Box::leak(encode(&acc)?.into_boxed_slice());
            Ok(if send(comm, p, bytes, left) {
                Reduced::Sent
            } else {
                Reduced::Orphaned(bytes)
            })
        }
        None => {
            job::finish(&mut acc, size);
            let ranks = acc.ranks.len() as u32;
            Ok(Reduced::Root(encode(&acc)?, ranks))
        }
    }
}

/// The message `child` sends, or `None` once it has left without sending.
fn receive(comm: &SimpleCommunicator, child: u32, left: &dyn Fn(u32) -> bool) -> Option<Vec<u8>> {
    let from = comm.process_at_rank(child as i32);
    let mut wait = Wait::new();
    loop {
        if let Some(probed) = from.immediate_matched_probe_with_tag(TAG) {
            return Some(probed.matched_receive_vec::<u8>().0);
        }
        if wait.pause() && left(child) {
            return None;
        }
    }
}

/// Send `bytes` to `parent`; false once it has left without taking them
/// (the request is then abandoned, its buffer kept).
fn send(
    comm: &SimpleCommunicator,
    parent: u32,
    bytes: &'static [u8],
    left: &dyn Fn(u32) -> bool,
) -> bool {
    let mut request =
        comm.process_at_rank(parent as i32)
            .immediate_send_with_tag(StaticScope, bytes, TAG);
    let mut wait = Wait::new();
    loop {
        match request.test() {
            Ok(_) => return true,
            Err(pending) => request = pending,
        }
        if wait.pause() && left(parent) {
            // Never completed: dropping it would be an error of rsmpi's.
            std::mem::forget(request);
            return false;
        }
    }
}

/// Polling: at once for a while (the message is usually there), then with
/// sleeps up to a millisecond. Whether the peer left is asked every
/// [`Wait::SOON`] for the first [`Wait::QUICK`] of the wait, then at
/// intervals that double up to [`Wait::LONGEST`]. Soon, because a launcher
/// that lets the other ranks finish when one leaves (`srun`) still cancels
/// the step a few seconds later if they have not; then seldom, because each
/// ask is a look-up in the spill directory, on a shared file system's
/// metadata server, which thousands of ranks waiting for a slow one must
/// not flood.
struct Wait {
    polls: u32,
    started: Instant,
    asked: Instant,
    interval: Duration,
}

impl Wait {
    const SPIN: u32 = 2_000;
    const SOON: Duration = Duration::from_millis(250);
    const QUICK: Duration = Duration::from_secs(10);
    const LONGEST: Duration = Duration::from_secs(10);

    fn new() -> Wait {
        let now = Instant::now();
        Wait {
            polls: 0,
            started: now,
            asked: now,
            interval: Self::SOON,
        }
    }

    /// Pause before the next poll; whether it is time to ask `left`.
    fn pause(&mut self) -> bool {
        self.polls = self.polls.saturating_add(1);
        if self.polls > Self::SPIN {
            let us = (self.polls - Self::SPIN).min(1_000);
            std::thread::sleep(Duration::from_micros(u64::from(us)));
        }
        if self.asked.elapsed() < self.interval {
            return false;
        }
        self.asked = Instant::now();
        if self.started.elapsed() >= Self::QUICK {
            self.interval = (self.interval * 2).min(Self::LONGEST);
        }
        true
    }
}
