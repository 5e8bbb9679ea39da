//! A profile's frame keys: return addresses as (module, offset).

use wmhcct_format::FrameKey;

/// Map a return address to (module, offset) using the module table.
///
/// Later entries win: a module loaded where an unloaded one was. The last
/// module found is tried first when no later entry overlaps it (then it is
/// the answer for any address it holds): a tree's neighbouring frames are
/// mostly in one module, and a program with dozens of libraries had each
/// of its frames compared with every later module's range.
pub fn resolver(records: &[wmhcct_format::Module]) -> impl FnMut(u64) -> FrameKey + '_ {
    let shadowed: Vec<bool> = records
        .iter()
        .enumerate()
        .map(|(i, m)| {
            records[i + 1..]
                .iter()
                .any(|o| o.start < m.end && m.start < o.end)
        })
        .collect();
    let mut last: Option<usize> = None;
    move |addr| {
        let holds = |m: &wmhcct_format::Module| addr >= m.start && addr < m.end;
        let found = last
            .filter(|&i| !shadowed[i] && holds(&records[i]))
            .or_else(|| records.iter().rposition(holds));
        match found {
            Some(i) => {
                last = Some(i);
                FrameKey::Addr {
                    module: i as u32,
                    offset: addr - records[i].bias,
                }
            }
            None => FrameKey::Unknown(addr),
        }
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
                assert_eq!(resolve(a), scan(a), "{a:#x}");
            }
        }
        let mut resolve = resolver(&records);
        for &a in &[
            0x1000, 0x3100, 0x1200, 0x3fff, 0x4000, 0x8000, 0x3000, 0xc000,
        ] {
            assert_eq!(resolve(a), scan(a), "{a:#x}");
        }
    }
}
