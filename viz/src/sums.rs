//! What a set of allocation contexts adds up to: a focus's, or an
//! allocation site's (`sites.rs`).

use crate::cli::SortKey;
use crate::contexts::Context;

/// Sums over contexts; `*_err` bound how far the Space-Saving counts may be
/// above the true ones (0 in exact mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextSums {
    pub contexts: usize,
    pub count: u64,
    pub count_err: u64,
    pub bytes: u64,
    pub bytes_err: u64,
    pub leaked_bytes: u64,
    pub peak_live_bytes: u64,
    pub temporary: u64,
}

impl ContextSums {
    pub fn of(contexts: &[Context]) -> ContextSums {
        let mut s = ContextSums::default();
        for c in contexts {
            s.add(c);
        }
        s
    }

    /// Count `c` in.
    pub fn add(&mut self, c: &Context) {
        self.contexts += 1;
        self.count = self.count.saturating_add(c.count);
        self.count_err = self.count_err.saturating_add(c.count_err);
        self.bytes = self.bytes.saturating_add(c.bytes);
        self.bytes_err = self.bytes_err.saturating_add(c.bytes_err);
        self.leaked_bytes = self.leaked_bytes.saturating_add(c.leaked_bytes);
        self.peak_live_bytes = self.peak_live_bytes.saturating_add(c.peak_live_bytes);
        self.temporary = self.temporary.saturating_add(c.temporary);
    }

    /// The sum `key` orders by, as [`SortKey::value`] for one context.
    pub fn value(&self, key: SortKey) -> u64 {
        match key {
            SortKey::Count => self.count,
            SortKey::Bytes => self.bytes,
            SortKey::Leaked => self.leaked_bytes,
            SortKey::Peak => self.peak_live_bytes,
            SortKey::Temporary => self.temporary,
        }
    }
}
