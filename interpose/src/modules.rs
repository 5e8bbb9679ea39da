//! Loaded objects, found with `dl_iterate_phdr`: their unwind tables (copied
//! out of memory, so a later `dlclose` can never leave the unwinder reading
//! unmapped pages) and their identity for the report.

use std::ffi::{c_int, c_void, CStr};
use std::ops::Range;

use wmhcct_format::Module;
use wmhcct_unwinder::{ModuleData, Section};

/// One loaded object as seen in memory.
pub struct Loaded {
    pub record: Module,
    pub unwind: ModuleData,
}

/// The loader's add/remove counters: a change means objects came or went.
pub fn generation() -> (u64, u64) {
    let mut gen = (0u64, 0u64);
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info and our `data` pointer.
        unsafe {
            let gen = &mut *(data as *mut (u64, u64));
            *gen = ((*info).dlpi_adds, (*info).dlpi_subs);
        }
        1
    }
    // SAFETY: the callback only reads the info it is handed.
    unsafe {
        libc::dl_iterate_phdr(Some(first), (&mut gen as *mut (u64, u64)).cast());
    }
    gen
}

/// Every object currently loaded.
pub fn scan() -> Vec<Loaded> {
    scan_reusing(&[])
}

/// Every object currently loaded; an object found in `previous` (the last
/// scan) at the same place with the same unwind tables shares that scan's
/// copies instead of being copied again.
pub fn scan_reusing(previous: &[ModuleData]) -> Vec<Loaded> {
    struct Scan<'a> {
        previous: &'a [ModuleData],
        out: Vec<Loaded>,
    }
    let mut scan = Scan {
        previous,
        out: Vec::new(),
    };
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info (with phdrs of a loaded
        // object, mapped while the callback runs) and our `data` pointer.
        unsafe {
            let scan = &mut *(data as *mut Scan<'_>);
            if let Some(m) = read_object(&*info, scan.previous) {
                scan.out.push(m);
            }
        }
        0
    }
    // SAFETY: the callback only reads memory of the objects it is handed.
    unsafe {
        libc::dl_iterate_phdr(Some(each), (&mut scan as *mut Scan<'_>).cast());
    }
    scan.out
}

/// The copies of `previous` for an object at `bias` named `name` whose
/// `.eh_frame_hdr` (at `hdr_avma`) holds `hdr` and whose `.eh_frame` is
/// `frame_len` bytes at `frame_avma`: the header compared byte for byte.
fn reusable(
    previous: &[ModuleData],
    name: &str,
    bias: u64,
    (hdr_avma, hdr): (u64, &[u8]),
    (frame_avma, room): (u64, usize),
) -> Option<(Section, Section)> {
    previous.iter().find_map(|p| {
        let (ha, h) = p.eh_frame_hdr.as_ref()?;
        let (fa, f) = p.eh_frame.as_ref()?;
        (p.name == name
            && p.base_avma == bias
            && (*ha, *fa) == (hdr_avma, frame_avma)
            && f.len() <= room
            && h[..] == hdr[..])
            .then(|| (h.clone(), f.clone()))
    })
}

/// # Safety
/// `info` must describe an object that stays mapped during the call.
unsafe fn read_object(info: &libc::dl_phdr_info, previous: &[ModuleData]) -> Option<Loaded> {
    let bias = info.dlpi_addr;
    // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let mut text: Option<Range<u64>> = None;
    let mut hdr: Option<(u64, u64)> = None;
    let mut loads: Vec<Range<u64>> = Vec::new();
    let mut build_id = String::new();
    for ph in phdrs {
        let start = bias.wrapping_add(ph.p_vaddr);
        let end = start.wrapping_add(ph.p_memsz);
        match ph.p_type {
            libc::PT_LOAD => {
                loads.push(start..end);
                if ph.p_flags & libc::PF_X != 0 {
                    text = Some(match text {
                        Some(t) => t.start.min(start)..t.end.max(end),
                        None => start..end,
                    });
                }
            }
            libc::PT_GNU_EH_FRAME => hdr = Some((start, ph.p_memsz)),
            libc::PT_NOTE if build_id.is_empty() => {
                // SAFETY: a PT_NOTE segment is mapped within a PT_LOAD.
                let notes =
                    unsafe { std::slice::from_raw_parts(start as *const u8, ph.p_memsz as usize) };
                build_id = gnu_build_id(notes).unwrap_or_default();
            }
            _ => {}
        }
    }
    let text = text?;
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: dlpi_name is a NUL-terminated string owned by the loader.
        unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    let path = if name.is_empty() {
        // Else this thread's entry: the process's is gone with a main
        // thread that ended before the others (`report::command_line`).
        std::fs::read_link("/proc/self/exe")
            .or_else(|_| std::fs::read_link("/proc/thread-self/exe"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    } else {
        name
    };
    let mut eh_frame_hdr = None;
    let mut eh_frame = None;
    if let Some((hdr_avma, hdr_len)) = hdr {
        // SAFETY: PT_GNU_EH_FRAME lies inside a mapped PT_LOAD.
        let hdr_bytes =
            unsafe { std::slice::from_raw_parts(hdr_avma as *const u8, hdr_len as usize) };
        if let Some(frame_avma) = eh_frame_address(hdr_bytes, hdr_avma) {
            if let Some(seg) = loads.iter().find(|r| r.contains(&frame_avma)) {
                let avail = (seg.end - frame_avma) as usize;
                // The object of the previous scan at the same place, with
                // the same search table: its copies, without walking the
                // `.eh_frame` records again to find their end (the walk of
                // a large program's tables took most of a rescan, and MPI
                // start-up rescans after each plugin it loads).
                let known = reusable(
                    previous,
                    &path,
                    bias,
                    (hdr_avma, hdr_bytes),
                    (frame_avma, avail),
                );
                if let Some((h, f)) = known {
                    eh_frame_hdr = Some((hdr_avma, h));
                    eh_frame = Some((frame_avma, f));
                } else {
                    // SAFETY: [frame_avma, seg.end) is inside a mapped PT_LOAD.
                    let region =
                        unsafe { std::slice::from_raw_parts(frame_avma as *const u8, avail) };
                    let frame = &region[..eh_frame_len(region)];
                    eh_frame = Some((frame_avma, Section::from(frame)));
                }
            }
        }
        if eh_frame_hdr.is_none() {
            eh_frame_hdr = Some((hdr_avma, Section::from(hdr_bytes)));
        }
    }
    Some(Loaded {
        record: Module {
            path: path.clone(),
            build_id,
            bias,
            start: text.start,
            end: text.end,
        },
        unwind: ModuleData {
            name: path,
            base_avma: bias,
            text,
            eh_frame_hdr,
            eh_frame,
        },
    })
}

/// The GNU build id from a PT_NOTE segment, as hex.
pub fn gnu_build_id(mut notes: &[u8]) -> Option<String> {
    let rd = |b: &[u8], at: usize| -> Option<u32> {
        b.get(at..at + 4)
            .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
    };
    let align4 = |x: usize| (x + 3) & !3;
    while notes.len() >= 12 {
        let namesz = rd(notes, 0)? as usize;
        let descsz = rd(notes, 4)? as usize;
        let ty = rd(notes, 8)?;
        let name_end = 12usize.checked_add(align4(namesz))?;
        let desc_end = name_end.checked_add(align4(descsz))?;
        if desc_end > notes.len() {
            return None;
        }
        if ty == 3 && namesz == 4 && &notes[12..16] == b"GNU\0" {
            let desc = &notes[name_end..name_end + descsz];
            return Some(desc.iter().map(|b| format!("{b:02x}")).collect());
        }
        notes = &notes[desc_end..];
    }
    None
}

/// Where `.eh_frame` starts, from the `eh_frame_ptr` field of `.eh_frame_hdr`.
pub fn eh_frame_address(hdr: &[u8], hdr_avma: u64) -> Option<u64> {
    if hdr.len() < 8 || hdr[0] != 1 {
        return None;
    }
    let enc = hdr[1];
    let field = &hdr[4..];
    let field_avma = hdr_avma + 4;
    let value: i64 = match enc & 0x0f {
        0x00 | 0x04 | 0x0c => i64::from_ne_bytes(field.get(..8)?.try_into().ok()?), // absptr/udata8/sdata8
        0x03 => u32::from_ne_bytes(field.get(..4)?.try_into().ok()?) as i64,        // udata4
        0x0b => i32::from_ne_bytes(field.get(..4)?.try_into().ok()?) as i64,        // sdata4
        _ => return None,
    };
    let base = match enc & 0x70 {
        0x00 => 0u64,
        0x10 => field_avma,
        0x30 => hdr_avma,
        _ => return None,
    };
    Some(base.wrapping_add(value as u64))
}

/// Length of `.eh_frame` up to and including its zero terminator (or the
/// region's end when there is none).
pub fn eh_frame_len(region: &[u8]) -> usize {
    let mut at = 0usize;
    while at + 4 <= region.len() {
        let len = u32::from_ne_bytes([region[at], region[at + 1], region[at + 2], region[at + 3]]);
        if len == 0 {
            return at + 4;
        }
        let next = if len == u32::MAX {
            match region.get(at + 4..at + 12) {
                Some(b) => (at + 12)
                    .saturating_add(u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])) as usize),
                None => return region.len(),
            }
        } else {
            at + 4 + len as usize
        };
        if next > region.len() {
            return region.len();
        }
        at = next;
    }
    region.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_this_process_modules_with_unwind_tables() {
        let mods = scan();
        assert!(mods.len() >= 2);
        let main = &mods[0];
        assert!(main.record.path.contains("wmhcct"), "{}", main.record.path);
        assert!(main.unwind.eh_frame.is_some() && main.unwind.eh_frame_hdr.is_some());
        let here = finds_this_process_modules_with_unwind_tables as *const () as usize as u64;
        assert!(mods
            .iter()
            .any(|m| (m.record.start..m.record.end).contains(&here)));
        let libc_mod = mods
            .iter()
            .find(|m| m.record.path.contains("libc.so"))
            .expect("libc");
        assert!(!libc_mod.record.build_id.is_empty());
    }

    #[test]
    fn a_second_scan_shares_the_first_ones_copies() {
        let first = scan();
        let previous: Vec<ModuleData> = first.iter().map(|m| m.unwind.clone()).collect();
        let second = scan_reusing(&previous);
        assert_eq!(first.len(), second.len());
        let mut shared = 0;
        for (a, b) in first.iter().zip(&second) {
            assert_eq!(a.record, b.record);
            match (&a.unwind.eh_frame, &b.unwind.eh_frame) {
                (Some((fa, a)), Some((fb, b))) => {
                    assert_eq!((fa, &a[..]), (fb, &b[..]));
                    assert!(Section::ptr_eq(a, b), "{:?}", first[0].record);
                    shared += 1;
                }
                (x, y) => assert_eq!(x.is_none(), y.is_none()),
            }
        }
        assert!(shared >= 2, "{shared}");
        // Another object's tables are never taken for this one's.
        let mut moved = previous.clone();
        for m in &mut moved {
            m.base_avma ^= 0x1000;
        }
        for (a, b) in first.iter().zip(&scan_reusing(&moved)) {
            if let (Some((_, a)), Some((_, b))) = (&a.unwind.eh_frame, &b.unwind.eh_frame) {
                assert!(!Section::ptr_eq(a, b));
                assert_eq!(&a[..], &b[..]);
            }
        }
    }

    /// An object whose search table differs from the previous scan's at
    /// the same place (another file loaded where one was unloaded) gets
    /// copies of its own.
    #[test]
    fn a_changed_search_table_is_copied_again() {
        let first = scan();
        let mut previous: Vec<ModuleData> = first.iter().map(|m| m.unwind.clone()).collect();
        for m in &mut previous {
            if let Some((at, h)) = &m.eh_frame_hdr {
                let mut bytes = h.to_vec();
                if let Some(b) = bytes.last_mut() {
                    *b ^= 1;
                }
                m.eh_frame_hdr = Some((*at, Section::from(&bytes[..])));
            }
        }
        let second = scan_reusing(&previous);
        let mut compared = 0;
        for ((a, b), p) in first.iter().zip(&second).zip(&previous) {
            if let (Some((_, a)), Some((_, b)), Some((_, p))) =
                (&a.unwind.eh_frame, &b.unwind.eh_frame, &p.eh_frame)
            {
                assert!(!Section::ptr_eq(p, b), "{}", a.len());
                assert_eq!(&a[..], &b[..]);
                compared += 1;
            }
        }
        assert!(compared >= 2, "{compared}");
    }

    #[test]
    fn eh_frame_len_stops_at_terminator() {
        let mut b = Vec::new();
        b.extend_from_slice(&8u32.to_ne_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&[0xff; 16]);
        assert_eq!(eh_frame_len(&b), 16);
        assert_eq!(eh_frame_len(&b[..10]), 10);
    }

    #[test]
    fn generation_counts_loads() {
        let (adds, _) = generation();
        assert!(adds >= 1);
    }
}
