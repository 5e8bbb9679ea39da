//! Stack capture for wmhcct.
//!
//! Everything here is safe Rust and knows nothing about how it is loaded: stack memory is
//! read through a caller-supplied [`ReadStack`] (any `FnMut(u64) -> Result<u64, ()>` is one;
//! the caller bounds-checks), and module unwind tables are handed in as owned bytes
//! ([`ModuleData`]).
//!
//! Four ways to get a stack, chosen per thread with [`Mode`]:
//!
//! * [`Mode::Full`]: DWARF CFI unwinding with framehop, one frame at a time.
//! * [`Mode::Fp`]: a frame-pointer walk.
//! * [`Mode::First`] / [`Mode::Second`]: the heuristic traversal of the WMTools paper
//!   (Perks et al.): unwind from the leaf until a frame with the same return address *and* the
//!   same stack pointer as in the previous capture is found (once, or twice in a row), then
//!   take the root-side remainder from the previous capture.
//!
//! A capture never allocates: results go into buffers reserved when the [`ThreadUnwinder`]
//! is created, and framehop runs with [`framehop::MustNotAllocateDuringUnwind`]. The rule
//! cache, which starts small, grows in [`ThreadUnwinder::grow_caches`], called between
//! captures.
//!
//! ```
//! use std::collections::HashMap;
//! use wmhcct_unwinder::{HeuristicConfig, Mode, ModuleData, Modules, Regs, ThreadUnwinder};
//!
//! // One module (no unwind tables here, so framehop falls back to frame pointers).
//! let mut modules = Modules::new();
//! modules.add(ModuleData { name: "app".into(), base_avma: 0, text: 0x1000..0x9000, ..Default::default() });
//!
//! // A frame-pointer stack: leaf record at 0x7000 -> caller record at 0x7040 -> end.
//! let mem: HashMap<u64, u64> =
//!     [(0x7000, 0x7040), (0x7008, 0x2345), (0x7040, 0), (0x7048, 0)].into();
//! let mut read = |a: u64| mem.get(&a).copied().ok_or(());
//! let regs = Regs { pc: 0x1010, sp: 0x6ff0, bp: 0x7000, pc_is_return: false };
//!
//! let mut t = ThreadUnwinder::new(Mode::Second, HeuristicConfig::default());
//! let tracer = 0x1000..0x1100; // the tracer's own code: skipped
//! let c = t.capture(&modules, regs, tracer, &mut read, 0, true);
//! assert_eq!(c.depth, 1);
//! assert_eq!(t.frames()[0].ra, 0x2345);
//! assert_eq!(t.frames()[0].sp, 0x7010);
//! assert_eq!(c.validated, Some(true));
//! ```
#![forbid(unsafe_code)]

mod capture;
mod cfi_rows;
mod dwarf;
mod fp;
mod frame;
mod heuristic;
mod mode;
mod modules;
mod root_anchored;
mod rule_cache;
#[cfg(test)]
mod self_image;
mod stats;
mod step;
#[cfg(test)]
mod synthetic;

pub use capture::{StepKind, ThreadUnwinder};
pub use frame::{Frame, Regs};
pub use heuristic::HeuristicConfig;
pub use mode::{Mode, ParseModeError};
pub use modules::{ModuleData, Modules, Section};
pub use root_anchored::RootAnchored;
pub use stats::{Capture, UnwindStats};
pub use step::{ReadStack, StepError, Stop};
