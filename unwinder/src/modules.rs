//! The loaded objects an unwind may meet, with their unwind tables.

use std::ops::Range;

use framehop::x86_64::UnwinderX86_64;
use framehop::{ExplicitModuleSectionInfo, Module, MustNotAllocateDuringUnwind, Unwinder};

use crate::cfi_rows::ModuleCfi;

/// The framehop unwinder type used for every DWARF step.
pub(crate) type DwarfUnwinder = UnwinderX86_64<Section, MustNotAllocateDuringUnwind>;

/// A copied unwind section. Shared, so that module tables built again as
/// objects come and go (MPI loads its plugins one by one) reuse the copies
/// of the objects still loaded instead of copying every table again.
pub type Section = std::sync::Arc<[u8]>;

/// What the interposer hands in for one loaded object.
///
/// Addresses are runtime addresses (AVMAs); the section bytes are owned copies, so unloading
/// the object can never leave the unwinder reading unmapped memory.
#[derive(Clone, Debug, Default)]
pub struct ModuleData {
    pub name: String,
    /// Load bias (`dlpi_addr`): runtime address minus the address stated in the ELF file.
    pub base_avma: u64,
    /// Runtime range covering the executable segments.
    pub text: Range<u64>,
    /// `.eh_frame_hdr`: runtime address and contents.
    pub eh_frame_hdr: Option<(u64, Section)>,
    /// `.eh_frame`: runtime address and contents.
    pub eh_frame: Option<(u64, Section)>,
}

#[derive(Clone, Debug)]
struct Entry {
    name: String,
    base_avma: u64,
    text: Range<u64>,
    /// The sections framehop unwinds it with, when it has both.
    cfi: Option<Box<ModuleCfi>>,
}

/// The set of loaded objects. Shared by all threads and read-only during unwinds (the
/// caller wraps it in a lock and takes the write side only for `add`/`remove`).
#[derive(Clone, Default)]
pub struct Modules {
    /// Sorted by `text.start`, non-empty text ranges only.
    entries: Vec<Entry>,
    unwinder: DwarfUnwinder,
    /// Changes with every change of the table, unique across tables (0: empty, never
    /// changed): keys the rules learned on it.
    id: u64,
    /// See [`Modules::set_stack_root`] (0: none).
    stack_root: u64,
}

/// Source of [`Modules::id`].
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl std::fmt::Debug for Modules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Modules")
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}

/// Section runtime range → file-relative range (framehop's SVMA, with ELF base SVMA 0).
fn svma_range(avma: u64, len: usize, base_avma: u64) -> Option<Range<u64>> {
    let start = avma.checked_sub(base_avma)?;
    let end = start.checked_add(u64::try_from(len).ok()?)?;
    Some(start..end)
}

impl Modules {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a module, replacing any module with the same load bias or the same text start.
    /// A module with an empty text range is ignored. Section addresses below `base_avma`
    /// make that section unusable (it is dropped; the module then unwinds by frame pointer).
    pub fn add(&mut self, m: ModuleData) {
        let ModuleData {
            name,
            base_avma,
            text,
            eh_frame_hdr,
            eh_frame,
        } = m;
        self.remove_where(|e| e.base_avma == base_avma || e.text.start == text.start);
        if text.start >= text.end {
            return;
        }

        let mut cfi_parts = (None, None);
        let mut info = ExplicitModuleSectionInfo::<Section> {
            base_svma: 0,
            text_svma: svma_range(text.start, 0, base_avma)
                .and_then(|s| Some(s.start..text.end.checked_sub(base_avma)?)),
            ..Default::default()
        };
        if let Some((avma, bytes)) = eh_frame {
            if let Some(r) = svma_range(avma, bytes.len(), base_avma) {
                info.eh_frame_svma = Some(r);
                cfi_parts.1 = Some((avma, bytes.clone()));
                info.eh_frame = Some(bytes);
            }
        }
        // The header is only usable together with `.eh_frame`; without it framehop builds
        // its own index from `.eh_frame`.
        if let (Some((avma, bytes)), Some(_)) = (eh_frame_hdr, info.eh_frame.as_ref()) {
            if let Some(r) = svma_range(avma, bytes.len(), base_avma) {
                info.eh_frame_hdr_svma = Some(r);
                cfi_parts.0 = Some((avma, bytes.clone()));
                info.eh_frame_hdr = Some(bytes);
            }
        }
        let module = Module::new(name.clone(), text.clone(), base_avma, info);
        self.unwinder.add_module(module);

        self.changed();
        let at = self.entries.partition_point(|e| e.text.start < text.start);
        self.entries.insert(
            at,
            Entry {
                name,
                base_avma,
                cfi: match cfi_parts {
                    (Some(eh_frame_hdr), Some(eh_frame)) => Some(Box::new(ModuleCfi {
                        base_avma,
                        text_avma: if text.start >= base_avma {
                            text.start
                        } else {
                            base_avma
                        },
                        eh_frame_hdr,
                        eh_frame,
                    })),
                    _ => None,
                },
                text,
            },
        );
    }

    /// Removes the module with this load bias (`dlclose`). Unknown biases are ignored.
    pub fn remove(&mut self, base_avma: u64) {
        self.remove_where(|e| e.base_avma == base_avma);
    }

    fn remove_where(&mut self, mut pred: impl FnMut(&Entry) -> bool) {
        self.changed();
        let unwinder = &mut self.unwinder;
        self.entries.retain(|e| {
            let gone = pred(e);
            if gone {
                unwinder.remove_module(e.text.start);
            }
            !gone
        });
    }

    fn entry_for(&self, addr: u64) -> Option<&Entry> {
        let i = self.entries.partition_point(|e| e.text.start <= addr);
        let e = self.entries.get(i.checked_sub(1)?)?;
        (addr < e.text.end).then_some(e)
    }

    fn changed(&mut self) {
        self.id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Identity of the table's current contents (see the field).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Text range of the module containing `addr`.
    pub fn text_of(&self, addr: u64) -> Option<Range<u64>> {
        self.entry_for(addr).map(|e| e.text.clone())
    }

    /// The unwind sections framehop uses for `addr`, if its module has both
    /// (`cfi_rows.rs`).
    pub(crate) fn cfi_for(&self, addr: u64) -> Option<&ModuleCfi> {
        self.entry_for(addr)?.cfi.as_deref()
    }

    /// Whether `addr` lies inside some module's text.
    pub fn contains(&self, addr: u64) -> bool {
        self.entry_for(addr).is_some()
    }

    /// Name of the module whose text contains `addr`.
    pub fn name_of(&self, addr: u64) -> Option<&str> {
        self.entry_for(addr).map(|e| e.name.as_str())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A return address that marks the bottom of a stack, such as the
    /// trampoline glibc's `makecontext` plants under a coroutine's entry
    /// function (`__start_context`): the frame it would start is not a
    /// caller, and the CFI looked up at `ra - 1` (padding before the
    /// trampoline) would unwind into garbage. A walk that reaches it ends
    /// there, complete, without that frame. `None` (the default): no such
    /// address.
    pub fn set_stack_root(&mut self, ra: Option<u64>) {
        self.stack_root = ra.unwrap_or(0);
    }

    /// Whether `ra` is the stack-root return address.
    #[inline(always)]
    pub(crate) fn is_stack_root(&self, ra: u64) -> bool {
        ra == self.stack_root && ra != 0
    }

    pub(crate) fn unwinder(&self) -> &DwarfUnwinder {
        &self.unwinder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str, base: u64, text: Range<u64>) -> ModuleData {
        ModuleData {
            name: name.into(),
            base_avma: base,
            text,
            ..Default::default()
        }
    }

    #[test]
    fn contains_and_names() {
        let mut m = Modules::new();
        assert!(m.is_empty());
        m.add(data("b", 0x20000, 0x21000..0x22000));
        m.add(data("a", 0x10000, 0x11000..0x12000));
        assert_eq!(m.len(), 2);
        assert!(m.contains(0x11000));
        assert!(m.contains(0x11fff));
        assert!(!m.contains(0x12000));
        assert!(!m.contains(0x10fff));
        assert!(!m.contains(0));
        assert!(!m.contains(u64::MAX));
        assert_eq!(m.name_of(0x21500), Some("b"));
        assert_eq!(m.name_of(0x11500), Some("a"));
        assert_eq!(m.name_of(0x20500), None);
    }

    #[test]
    fn add_replaces_and_remove_forgets() {
        let mut m = Modules::new();
        m.add(data("a", 0x10000, 0x11000..0x12000));
        m.add(data("a2", 0x10000, 0x11000..0x13000));
        assert_eq!(m.len(), 1);
        assert!(m.contains(0x12500));
        // Same text start, other base: also a replacement.
        m.add(data("a3", 0x0, 0x11000..0x11800));
        assert_eq!(m.len(), 1);
        assert!(!m.contains(0x12500));
        m.remove(0x1234); // unknown: ignored
        assert_eq!(m.len(), 1);
        m.remove(0);
        assert!(m.is_empty());
        assert!(!m.contains(0x11000));
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        let mut m = Modules::new();
        m.add(data("empty", 0x1000, 0x2000..0x2000));
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 0x5000..0x4000;
        m.add(data("reversed", 0x3000, reversed));
        assert!(m.is_empty());
        m.add(ModuleData {
            name: "garbage".into(),
            base_avma: 0x9000,
            text: 0x1000..0x2000, // below the bias
            eh_frame_hdr: Some((0x100, vec![0xff; 13].into())),
            eh_frame: Some((u64::MAX, vec![1, 2, 3, 4, 5, 6, 7].into())),
        });
        m.add(ModuleData {
            name: "garbage2".into(),
            base_avma: 0,
            text: 0x8000..0x9000,
            eh_frame_hdr: Some((0x100, vec![0xff; 13].into())),
            eh_frame: Some((0x200, vec![0x10, 0, 0, 0, 0, 0, 0, 0, 9, 9].into())),
        });
        assert_eq!(m.len(), 2);
    }
}
