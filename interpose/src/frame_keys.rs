//! A profile's frame keys: return addresses as (module, offset).

use std::collections::HashMap;

use wmhcct_format::FrameKey;

/// Maps return addresses to (module, offset) using the module table.
///
/// Later entries win: a module loaded where an unloaded one was. The last
/// module found is tried first when no later entry overlaps it (then it is
/// the answer for any address it holds): a tree's neighbouring frames are
/// mostly in one module, and a program with dozens of libraries had each
/// of its frames compared with every later module's range.
///
/// A file loaded more than once (a library closed and opened again at
/// another address) is named by its first entry, as the job merge names a
/// file by (path, build id): the same code is the same frame whichever
/// load ran it. Then two return addresses can give one key, so two nodes
/// of the tracer's tree one path: [`Resolver::aliased`] tells the caller to
/// merge them (`wmhcct_collector::same_paths`).
pub struct Resolver<'a> {
    records: &'a [wmhcct_format::Module],
    shadowed: Vec<bool>,
    /// Per entry, the first entry of the same file.
    first: Vec<u32>,
    last: Option<usize>,
    aliased: bool,
}

pub fn resolver(records: &[wmhcct_format::Module]) -> Resolver<'_> {
    let shadowed: Vec<bool> = records
        .iter()
        .enumerate()
        .map(|(i, m)| {
            records[i + 1..]
                .iter()
                .any(|o| o.start < m.end && m.start < o.end)
        })
        .collect();
    let mut seen: HashMap<(&str, &str), u32> = HashMap::new();
    let first = records
        .iter()
        .enumerate()
        .map(|(i, m)| {
            if m.path.is_empty() {
                // No name to know the file by.
                i as u32
            } else {
                *seen
                    .entry((m.path.as_str(), m.build_id.as_str()))
                    .or_insert(i as u32)
            }
        })
        .collect();
    Resolver {
        records,
        shadowed,
        first,
        last: None,
        aliased: false,
    }
}

impl Resolver<'_> {
    pub fn key(&mut self, addr: u64) -> FrameKey {
        let records = self.records;
        let holds = |m: &wmhcct_format::Module| addr >= m.start && addr < m.end;
        let found = self
            .last
            .filter(|&i| !self.shadowed[i] && holds(&records[i]))
            .or_else(|| records.iter().rposition(holds));
        match found {
            Some(i) => {
                self.last = Some(i);
                let module = self.first[i];
                self.aliased |= module as usize != i;
                FrameKey::Addr {
                    module,
                    offset: addr - records[i].bias,
                }
            }
            None => FrameKey::Unknown(addr),
        }
    }

    /// Whether an address was named by an earlier load of its file: keys
    /// of the tree may then repeat under one parent.
    pub fn aliased(&self) -> bool {
        self.aliased
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wmhcct_format::Module;

    fn module(start: u64, end: u64, bias: u64) -> Module {
        Module {
            start,
            end,
            bias,
            ..Module::default()
        }
    }

    /// The module looked up by a scan of every entry from the last, for
    /// addresses in every order: the remembered module never changes an
    /// answer, where a later module overlaps it too.
    #[test]
    fn the_last_module_found_gives_the_scan_s_answers() {
        let records = vec![
            module(0x1000, 0x5000, 0x1000),
            module(0x8000, 0x9000, 0x7000),
            // Loaded over part of the first, after it was unloaded.
            module(0x3000, 0x4000, 0x2000),
            module(0xa000, 0xb000, 0x9000),
        ];
        let scan = |addr: u64| match records
            .iter()
            .enumerate()
            .rev()
            .find(|(_, m)| addr >= m.start && addr < m.end)
        {
            Some((i, m)) => FrameKey::Addr {
                module: i as u32,
                offset: addr - m.bias,
            },
            None => FrameKey::Unknown(addr),
        };
        let addrs: Vec<u64> = (0..0xc000u64).step_by(0x80).collect();
        for order in [addrs.clone(), addrs.iter().rev().copied().collect()] {
            let mut resolve = resolver(&records);
            for &a in &order {
                assert_eq!(resolve.key(a), scan(a), "{a:#x}");
            }
        }
        let mut resolve = resolver(&records);
        for &a in &[
            0x1000, 0x3100, 0x1200, 0x3fff, 0x4000, 0x8000, 0x3000, 0xc000,
        ] {
            assert_eq!(resolve.key(a), scan(a), "{a:#x}");
        }
        assert!(!resolve.aliased());
    }

    /// A library loaded twice, at two addresses: both loads' addresses are
    /// named by the first load's entry, with the same offsets; another file
    /// and a nameless module keep their own entries.
    #[test]
    fn a_file_loaded_twice_is_named_by_its_first_load() {
        let named = |path: &str, build_id: &str, start: u64, bias: u64| Module {
            path: path.into(),
            build_id: build_id.into(),
            start,
            end: start + 0x1000,
            bias,
        };
        let records = vec![
            named("/lib/a.so", "aa", 0x10_000, 0x10_000),
            named("/lib/b.so", "bb", 0x20_000, 0x20_000),
            named("", "", 0x30_000, 0x30_000),
            // a.so again, elsewhere; then a rebuilt a.so (another build id).
            named("/lib/a.so", "aa", 0x50_000, 0x50_000),
            named("/lib/a.so", "a2", 0x60_000, 0x60_000),
            named("", "", 0x70_000, 0x70_000),
        ];
        let mut r = resolver(&records);
        let at = |module, offset| FrameKey::Addr { module, offset };
        assert_eq!(r.key(0x10_123), at(0, 0x123));
        assert_eq!(r.key(0x20_123), at(1, 0x123));
        assert_eq!(r.key(0x70_123), at(5, 0x123));
        assert_eq!(r.key(0x60_123), at(4, 0x123));
        assert!(!r.aliased());
        assert_eq!(r.key(0x50_123), at(0, 0x123));
        assert!(r.aliased());
    }
}
