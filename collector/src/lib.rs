//! Hot calling context trees for wmhcct.
//!
//! Safe Rust with no knowledge of LD_PRELOAD: the tracer hands it calling
//! contexts (return addresses) and heap events, tests hand it synthetic streams.
//!
//! - [`Collector`]: one per process (allocation tree, heap accounting, totals);
//! - [`Hcct`]: the MCCT with weighted Space-Saving over (events, bytes),
//!   reusable for other event trees;
//! - [`merge_trees`]: the mergeable-summaries merge of two profile trees;
//! - [`query`]: the (φ, ε)-HCCT of a tree;
//! - [`series`], [`reservoir`], [`job_series`]: time series in bounded
//!   memory, sampled events, and their merge across the ranks of a job.
#![forbid(unsafe_code)]

pub mod child_index;
pub mod collector;
pub mod cursor;
pub mod hcct;
pub mod heap;
pub mod items;
pub mod job;
pub mod job_series;
pub mod mcct;
pub mod merge;
pub mod packet;
pub mod path_index;
pub mod ptr_table;
pub mod query;
pub mod rebin;
pub mod reservoir;
pub mod same_paths;
pub mod series;
pub mod space_saving;

pub use collector::{Collector, CollectorConfig, Repeatable, SeriesConfig};
pub use cursor::Cursor;
pub use hcct::Hcct;
pub use merge::merge_trees;
