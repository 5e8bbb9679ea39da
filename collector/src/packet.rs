//! Heap events as runs of 64-bit words, so that the thread that captured an
//! event can hand it to a collector thread (`WMHCCT_COLLECTOR=thread`, the
//! parallel-CCT paper's packets). Applied in the order they were written,
//! the records leave a [`Collector`] exactly as the direct calls would.
//!
//! Layout (word 0 is the header: tag in bits 0–7, kind in bits 8–23, frame
//! count in bits 32–63):
//!
//! | tag | words after the header |
//! |---|---|
//! | `PAD` | none: the rest of the buffer up to its end is unused |
//! | `ALLOC` | cursor, stamp, unchanged, kept, ptr, size, t_ns, then the frames |
//! | `FREE` | ptr, t_ns |
//! | `TEMP_FREE` | ptr, t_ns: a free of a temporary allocation |
//! | `REALLOC` | cursor, stamp, unchanged, kept, old, size, new, t_ns, then the frames |
//!
//! `cursor` is the producer's token for its thread's [`Replay`] (cursor and
//! last stack); the applier turns it back into the replay (see
//! [`Event::cursor`]). A record carries only the leaf side of its stack:
//! the other `kept` frames are the root side of the thread's previous
//! record's stack, which the replay holds. Most stacks share a long root
//! side with the one before, so a record is a few cache lines at most.

use thiserror::Error;

use crate::collector::Collector;
use crate::cursor::Cursor;

const PAD: u64 = 0;
const ALLOC: u64 = 1;
const FREE: u64 = 2;
const REALLOC: u64 = 3;
const TEMP_FREE: u64 = 4;

const ALLOC_WORDS: usize = 8;
const FREE_WORDS: usize = 3;
const REALLOC_WORDS: usize = 9;

/// A thread's state on the applying side: its cursor, and the stack of its
/// latest record (leaf first), to which the next record's frames are the
/// new leaf side.
#[derive(Clone, Debug, Default)]
pub struct Replay {
    pub cursor: Cursor,
    pub frames: Vec<u64>,
}

impl Replay {
    /// Make `frames` the stack of a record that carries `leaf` and keeps
    /// `kept` root-side frames of the previous one.
    fn rebuild(&mut self, leaf: &[u64], kept: usize) {
        let old = self.frames.len();
        let kept = kept.min(old);
        let from = old - kept;
        let len = leaf.len() + kept;
        if len > old {
            self.frames.resize(len, 0);
        }
        self.frames.copy_within(from..from + kept, leaf.len());
        self.frames.truncate(len);
        self.frames[..leaf.len()].copy_from_slice(leaf);
    }
}

/// Most frames a record can carry.
pub const MAX_FRAMES: usize = u32::MAX as usize;

/// One heap event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// [`Collector::on_alloc`] with the cursor `cursor`, its frames numbered
    /// `stamp` ([`Cursor::stamp_next`]).
    Alloc {
        cursor: u64,
        stamp: u64,
        kind: u16,
        unchanged: usize,
        /// Root-side frames kept from the thread's previous record.
        kept: usize,
        ptr: u64,
        size: u64,
        t_ns: u64,
        frames: &'a [u64],
    },
    /// [`Collector::on_free`].
    Free {
        kind: u16,
        ptr: u64,
        t_ns: u64,
        temporary: bool,
    },
    /// [`Collector::on_realloc`] with a captured stack.
    Realloc {
        cursor: u64,
        stamp: u64,
        kind: u16,
        unchanged: usize,
        kept: usize,
        old: u64,
        size: u64,
        new: u64,
        t_ns: u64,
        frames: &'a [u64],
    },
}

/// What a buffer holds at a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// An event of `len` words.
    Event(Event<'a>, usize),
    /// Padding: the rest of the buffer is unused.
    Pad,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PacketError {
    #[error("unknown record tag {0}")]
    Tag(u64),
    #[error("a record of {need} words, {have} left")]
    Short { need: usize, have: usize },
}

#[inline(always)]
fn header(tag: u64, kind: u16, frames: usize) -> u64 {
    tag | (kind as u64) << 8 | (frames as u64) << 32
}

impl Event<'_> {
    /// Words the record takes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        match self {
            Event::Alloc { frames, .. } => ALLOC_WORDS + frames.len(),
            Event::Free { .. } => FREE_WORDS,
            Event::Realloc { frames, .. } => REALLOC_WORDS + frames.len(),
        }
    }

    /// Never empty (a header at least); for clippy's `len` convention.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The cursor token of an event that has a stack.
    pub fn cursor(&self) -> Option<u64> {
        match self {
            Event::Alloc { cursor, .. } | Event::Realloc { cursor, .. } => Some(*cursor),
            Event::Free { .. } => None,
        }
    }

    /// Write the record into `out`, which must be [`Event::len`] words long
    /// (and frames at most [`MAX_FRAMES`]).
    #[inline(always)]
    pub fn encode(&self, out: &mut [u64]) {
        debug_assert_eq!(out.len(), self.len());
        match *self {
            Event::Alloc {
                cursor,
                stamp,
                kind,
                unchanged,
                kept,
                ptr,
                size,
                t_ns,
                frames,
            } => {
                let head = [cursor, stamp, unchanged as u64, kept as u64];
                put_stack(
                    out,
                    header(ALLOC, kind, frames.len()),
                    head,
                    &[ptr, size, t_ns],
                    frames,
                )
            }
            Event::Free {
                kind,
                ptr,
                t_ns,
                temporary,
            } => {
                let tag = if temporary { TEMP_FREE } else { FREE };
                out.copy_from_slice(&[header(tag, kind, 0), ptr, t_ns]);
            }
            Event::Realloc {
                cursor,
                stamp,
                kind,
                unchanged,
                kept,
                old,
                size,
                new,
                t_ns,
                frames,
            } => {
                let head = [cursor, stamp, unchanged as u64, kept as u64];
                let own = [old, size, new, t_ns];
                put_stack(out, header(REALLOC, kind, frames.len()), head, &own, frames)
            }
        }
    }

    /// Apply the event to `c`; `replay` is the event's thread state (from
    /// its token) when it has one.
    pub fn apply(&self, c: &mut Collector, replay: Option<&mut Replay>) {
        match (*self, replay) {
            (
                Event::Alloc {
                    stamp,
                    kind,
                    unchanged,
                    kept,
                    ptr,
                    size,
                    t_ns,
                    frames,
                    ..
                },
                Some(r),
            ) => {
                r.rebuild(frames, kept);
                r.cursor.stamp_next(stamp);
                c.on_alloc(&mut r.cursor, kind, &r.frames, unchanged, ptr, size, t_ns);
            }
            (
                Event::Alloc {
                    kind,
                    ptr,
                    size,
                    t_ns,
                    ..
                },
                None,
            ) => c.on_alloc_untraced(kind, ptr, size, t_ns),
            (
                Event::Free {
                    kind,
                    ptr,
                    t_ns,
                    temporary,
                },
                _,
            ) => {
                c.on_free(kind, ptr, t_ns, temporary);
            }
            (
                Event::Realloc {
                    stamp,
                    kind,
                    unchanged,
                    kept,
                    old,
                    size,
                    new,
                    t_ns,
                    frames,
                    ..
                },
                r,
            ) => {
                let stack = r.map(|r| {
                    r.rebuild(frames, kept);
                    r.cursor.stamp_next(stamp);
                    (&mut r.cursor, &r.frames[..], unchanged)
                });
                c.on_realloc(kind, old, size, new, stack, t_ns);
            }
        }
    }
}

/// A record with a stack: header, the words every such record has (cursor,
/// stamp, unchanged, kept), the event's own words, then the frames.
#[inline(always)]
fn put_stack(out: &mut [u64], header: u64, head: [u64; 4], own: &[u64], frames: &[u64]) {
    let (fixed, rest) = out.split_at_mut(1 + head.len() + own.len());
    fixed[0] = header;
    fixed[1..=head.len()].copy_from_slice(&head);
    fixed[1 + head.len()..].copy_from_slice(own);
    rest.copy_from_slice(frames);
}

/// The padding word: the rest of the buffer, from here to its end, is unused.
pub fn pad() -> u64 {
    header(PAD, 0, 0)
}

/// The record at the start of `words`.
pub fn decode(words: &[u64]) -> Result<Decoded<'_>, PacketError> {
    let Some(&h) = words.first() else {
        return Err(PacketError::Short { need: 1, have: 0 });
    };
    let (tag, kind, n) = (h & 0xff, (h >> 8) as u16, (h >> 32) as usize);
    let need = match tag {
        PAD => return Ok(Decoded::Pad),
        ALLOC => ALLOC_WORDS + n,
        FREE | TEMP_FREE => FREE_WORDS,
        REALLOC => REALLOC_WORDS + n,
        other => return Err(PacketError::Tag(other)),
    };
    let w = words.get(..need).ok_or(PacketError::Short {
        need,
        have: words.len(),
    })?;
    let ev = match tag {
        ALLOC => Event::Alloc {
            cursor: w[1],
            stamp: w[2],
            kind,
            unchanged: w[3] as usize,
            kept: w[4] as usize,
            ptr: w[5],
            size: w[6],
            t_ns: w[7],
            frames: &w[ALLOC_WORDS..],
        },
        FREE | TEMP_FREE => Event::Free {
            kind,
            ptr: w[1],
            t_ns: w[2],
            temporary: tag == TEMP_FREE,
        },
        _ => Event::Realloc {
            cursor: w[1],
            stamp: w[2],
            kind,
            unchanged: w[3] as usize,
            kept: w[4] as usize,
            old: w[5],
            size: w[6],
            new: w[7],
            t_ns: w[8],
            frames: &w[REALLOC_WORDS..],
        },
    };
    Ok(Decoded::Event(ev, need))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::{CollectorConfig, SeriesConfig};
    use proptest::prelude::*;

    fn collector() -> Collector {
        Collector::with_series(
            CollectorConfig {
                phi: 0.01,
                epsilon: 0.002,
                exact: false,
                n_kinds: 8,
            },
            SeriesConfig {
                bins: 64,
                event_samples: 50,
            },
        )
    }

    #[test]
    fn every_event_round_trips() {
        let frames = [0x40_1000, 0x40_2000, 0x40_3000];
        let events = [
            Event::Alloc {
                cursor: 0xdead_beef,
                stamp: 7,
                kind: 1,
                unchanged: 2,
                kept: 1,
                ptr: 0x1000,
                size: 48,
                t_ns: 99,
                frames: &frames,
            },
            Event::Free {
                kind: 4,
                ptr: 0x1000,
                t_ns: 100,
                temporary: false,
            },
            Event::Free {
                kind: 4,
                ptr: 0x2000,
                t_ns: 100,
                temporary: true,
            },
            Event::Realloc {
                cursor: 3,
                stamp: u64::MAX,
                kind: 2,
                unchanged: 0,
                kept: 9,
                old: 0x1000,
                size: 0,
                new: 0,
                t_ns: 101,
                frames: &[],
            },
        ];
        let mut buf = Vec::new();
        for e in &events {
            let at = buf.len();
            buf.resize(at + e.len(), 0);
            e.encode(&mut buf[at..]);
        }
        buf.push(pad());
        let mut at = 0;
        for e in &events {
            assert_eq!(decode(&buf[at..]), Ok(Decoded::Event(*e, e.len())));
            at += e.len();
        }
        assert_eq!(decode(&buf[at..]), Ok(Decoded::Pad));
    }

    #[test]
    fn foreign_and_cut_records_are_errors() {
        assert_eq!(decode(&[]), Err(PacketError::Short { need: 1, have: 0 }));
        assert_eq!(decode(&[9]), Err(PacketError::Tag(9)));
        let e = Event::Free {
            kind: 1,
            ptr: 8,
            t_ns: 1,
            temporary: false,
        };
        let mut buf = vec![0; e.len()];
        e.encode(&mut buf);
        assert_eq!(
            decode(&buf[..2]),
            Err(PacketError::Short { need: 3, have: 2 })
        );
        let mut alloc = [0u64; ALLOC_WORDS];
        alloc[0] = header(ALLOC, 1, 5);
        assert_eq!(
            decode(&alloc),
            Err(PacketError::Short {
                need: ALLOC_WORDS + 5,
                have: ALLOC_WORDS
            })
        );
    }

    #[test]
    fn a_replay_keeps_the_root_side_and_takes_the_new_leaf_side() {
        let mut r = Replay::default();
        r.rebuild(&[3, 2, 1], 0);
        assert_eq!(r.frames, [3, 2, 1]);
        r.rebuild(&[5, 4], 2); // grows
        assert_eq!(r.frames, [5, 4, 2, 1]);
        r.rebuild(&[6], 1); // shrinks
        assert_eq!(r.frames, [6, 1]);
        r.rebuild(&[], 2); // the same stack
        assert_eq!(r.frames, [6, 1]);
        r.rebuild(&[7], 9); // more kept than held: all of it
        assert_eq!(r.frames, [7, 6, 1]);
        r.rebuild(&[], 0);
        assert!(r.frames.is_empty());
    }

    /// One operation of a generated workload, on one of two threads.
    #[derive(Clone, Debug)]
    enum Op {
        Alloc {
            thread: usize,
            ctx: u8,
            size: u64,
        },
        Free {
            slot: usize,
            temporary: bool,
        },
        Realloc {
            thread: usize,
            slot: usize,
            ctx: u8,
            size: u64,
        },
        /// A capture that is not handed over as a record (an MPI call):
        /// the next record cannot keep frames of the one before.
        Skip {
            thread: usize,
            ctx: u8,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..2usize, 0..24u8, 0..200u64).prop_map(|(thread, ctx, size)| Op::Alloc { thread, ctx, size }),
            2 => (0..64usize, any::<bool>()).prop_map(|(slot, temporary)| Op::Free { slot, temporary }),
            1 => (0..2usize, 0..64usize, 0..24u8, 0..200u64)
                .prop_map(|(thread, slot, ctx, size)| Op::Realloc { thread, slot, ctx, size }),
            1 => (0..2usize, 0..24u8).prop_map(|(thread, ctx)| Op::Skip { thread, ctx }),
        ]
    }

    /// Frames of context `ctx` (leaf first): a shared root side and a
    /// context-specific leaf side, 3 to 7 frames.
    fn frames(ctx: u8) -> Vec<u64> {
        let c = ctx as u64;
        let mut f = vec![0x6000 + c, 0x5000 + c % 5, 0x4000 + c % 3, 0x3000 + c % 2];
        f.truncate((c % 5) as usize);
        f.extend([0x2000, 0x1000]);
        f.insert(0, 0x7000 + c);
        f
    }

    proptest! {
        /// Encoding every event, then applying the records in order,
        /// leaves the collector exactly as calling its methods at once does.
        #[test]
        fn records_applied_later_equal_direct_calls(ops in prop::collection::vec(op(), 1..300)) {
            let mut direct = collector();
            let mut later = collector();
            let mut cursors_direct = [Cursor::new(), Cursor::new()];
            let mut replays = [Replay::default(), Replay::default()];
            let mut prev: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
            let mut stamps = [0u64; 2];
            // The capture whose frames each thread's replay holds.
            let mut pushed = [0u64; 2];
            let mut live: Vec<u64> = Vec::new();
            let mut next_ptr = 0x10_0000u64;
            let mut buf: Vec<u64> = Vec::new();
            let push = |e: &Event, buf: &mut Vec<u64>| {
                let at = buf.len();
                buf.resize(at + e.len(), 0);
                e.encode(&mut buf[at..]);
            };
            for (t_ns, op) in ops.iter().enumerate() {
                let t_ns = t_ns as u64;
                match *op {
                    Op::Alloc { thread, ctx, size } | Op::Realloc { thread, ctx, size, .. } => {
                        let f = frames(ctx);
                        let unchanged = f.iter().rev().zip(prev[thread].iter().rev())
                            .take_while(|(a, b)| a == b).count();
                        stamps[thread] += 1;
                        let stamp = stamps[thread];
                        next_ptr += 64;
                        let (kind, old, new) = match *op {
                            Op::Realloc { slot, .. } if !live.is_empty() => {
                                let i = slot % live.len();
                                let old = live.swap_remove(i);
                                let new = if size == 0 { 0 } else { next_ptr };
                                (2u16, old, new)
                            }
                            Op::Realloc { .. } => (2, 0, next_ptr),
                            _ => (1, 0, next_ptr),
                        };
                        if new != 0 {
                            live.push(new);
                        }
                        let kept = if pushed[thread] + 1 == stamp { unchanged } else { 0 };
                        pushed[thread] = stamp;
                        let leaf = &f[..f.len() - kept];
                        let cursor = thread as u64;
                        let ev = if kind == 1 {
                            Event::Alloc { cursor, stamp, kind, unchanged, kept, ptr: new, size, t_ns, frames: leaf }
                        } else {
                            Event::Realloc { cursor, stamp, kind, unchanged, kept, old, size, new, t_ns, frames: leaf }
                        };
                        let cur = &mut cursors_direct[thread];
                        cur.stamp_next(stamp);
                        if kind == 1 {
                            direct.on_alloc(cur, kind, &f, unchanged, new, size, t_ns);
                        } else {
                            direct.on_realloc(kind, old, size, new, Some((cur, &f, unchanged)), t_ns);
                        }
                        push(&ev, &mut buf);
                        prev[thread] = f;
                    }
                    Op::Skip { thread, ctx } => {
                        stamps[thread] += 1;
                        prev[thread] = frames(ctx);
                    }
                    Op::Free { slot, temporary } => {
                        let ptr = if live.is_empty() { 0 } else { live.swap_remove(slot % live.len()) };
                        let ev = Event::Free { kind: 4, ptr, t_ns, temporary };
                        direct.on_free(4, ptr, t_ns, temporary);
                        push(&ev, &mut buf);
                    }
                }
            }
            let mut at = 0;
            while at < buf.len() {
                match decode(&buf[at..]).unwrap() {
                    Decoded::Event(e, len) => {
                        let r = e.cursor().map(|c| &mut replays[c as usize]);
                        e.apply(&mut later, r);
                        at += len;
                    }
                    Decoded::Pad => unreachable!(),
                }
            }
            prop_assert_eq!(direct.totals(), later.totals());
            prop_assert_eq!(direct.heap_stats(), later.heap_stats());
            let key = |a: u64| wmhcct_format::FrameKey::Unknown(a);
            prop_assert_eq!(
                direct.snapshot_tree("alloc", &mut |a| key(a)),
                later.snapshot_tree("alloc", &mut |a| key(a))
            );
        }
    }
}
