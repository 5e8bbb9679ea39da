//! Synthetic inputs and timing for the collector benchmarks in `src/bin/`.
//!
//! - [`stream`]: deep call stacks like the ones the tracer captures, drawn
//!   from a Zipf distribution over contexts, in random order or in bursts of
//!   neighbouring contexts (the WMTools paper's temporal clustering);
//! - [`recorded`]: such a stream recorded ahead of a timed run;
//! - [`clock`]: wall-clock timing and medians.

pub mod clock;
pub mod recorded;
pub mod stream;
