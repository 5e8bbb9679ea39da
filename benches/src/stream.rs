//! Synthetic capture streams: the stacks `benches/alloc_stress.c` produces,
//! generated in-process so the collector can be timed on its own.
//!
//! A stack has `depth` frames below a fixed root part. The last
//! `var_levels` levels each pick one of `BRANCH` call sites from one digit of
//! the context number (the leaf-most level takes the lowest digit), so
//! contexts `c` and `c + 1` share all but the leaf-side frames. Contexts are
//! drawn from a Zipf distribution whose ranks are scattered over the tree.

/// Call sites per variable level.
pub const BRANCH: u64 = 10;
/// Frames above the generated levels (main, libc start, thread start, …).
const ROOT_FRAMES: usize = 5;

/// Deterministic xorshift64* generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Zipf distribution over `0..n` with exponent `s`.
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let weights: Vec<f64> = (1..=n.max(1)).map(|r| 1.0 / (r as f64).powf(s)).collect();
        let sum: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = weights
            .iter()
            .map(|w| {
                acc += w / sum;
                acc
            })
            .collect();
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Zipf { cdf }
    }

    /// A rank, 0 the most frequent.
    pub fn draw(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// Event order in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Every event draws a fresh context.
    Random,
    /// Bursts of 1–64 events that start at a drawn context and step to the
    /// neighbouring context with probability 1/4 per event.
    Bursts,
}

/// Shape of a stream.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub depth: usize,
    pub contexts: usize,
    pub zipf: f64,
    pub order: Order,
    pub seed: u64,
}

/// One generated event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub context: usize,
    /// Root-side frames identical to the previous event's stack.
    pub unchanged: usize,
    pub size: u64,
}

/// An endless stream of stacks (return addresses, leaf first).
#[derive(Clone, Debug)]
pub struct StackStream {
    shape: Shape,
    var_levels: usize,
    zipf: Zipf,
    rng: Rng,
    context: usize,
    burst_left: u32,
    prev: Vec<u64>,
}

impl StackStream {
    pub fn new(shape: Shape) -> StackStream {
        let mut var_levels = 1;
        let mut c = BRANCH as usize;
        while c < shape.contexts {
            c *= BRANCH as usize;
            var_levels += 1;
        }
        let shape = Shape {
            depth: shape.depth.max(var_levels + 1),
            ..shape
        };
        StackStream {
            shape,
            var_levels,
            zipf: Zipf::new(shape.contexts, shape.zipf),
            rng: Rng::new(shape.seed),
            context: 0,
            burst_left: 0,
            prev: Vec::new(),
        }
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Frames of every stack: generated levels, leaf frame, root part.
    pub fn frames_per_stack(&self) -> usize {
        self.shape.depth + 1 + ROOT_FRAMES
    }

    fn draw_context(&mut self) -> usize {
        let rank = self.zipf.draw(&mut self.rng) as u64;
        let n = self.shape.contexts as u64;
        if n.is_multiple_of(7919) {
            rank as usize
        } else {
            (rank * 7919 % n) as usize
        }
    }

    fn next_context(&mut self) -> usize {
        match self.shape.order {
            Order::Random => self.draw_context(),
            Order::Bursts => {
                if self.burst_left == 0 {
                    self.context = self.draw_context();
                    self.burst_left = 1 + (self.rng.next_u64() % 64) as u32;
                } else if self.rng.next_u64().is_multiple_of(4) {
                    self.context = (self.context + 1) % self.shape.contexts;
                }
                self.burst_left -= 1;
                self.context
            }
        }
    }

    /// The digit that selects the call site at generated level `d`.
    fn digit(&self, context: usize, d: usize) -> u64 {
        let var_from = self.shape.depth - self.var_levels;
        if d < var_from {
            return 0;
        }
        let mut c = context as u64;
        for _ in 0..(self.shape.depth - 1 - d) {
            c /= BRANCH;
        }
        c % BRANCH
    }

    /// Writes the stack of `context` (leaf first) into `out`.
    pub fn stack_of(&self, context: usize, out: &mut Vec<u64>) {
        out.clear();
        // Leaf frame: the return address into the allocating function.
        out.push(0x40_0000);
        for d in (0..self.shape.depth).rev() {
            // Return address of level d: its caller's function and call site.
            let caller = if d == 0 {
                0
            } else {
                self.digit(context, d - 1)
            };
            out.push(
                0x50_0000 + ((d as u64) << 12) + (caller << 8) + (self.digit(context, d) << 4),
            );
        }
        for r in 0..ROOT_FRAMES as u64 {
            out.push(0x7f00_0000_0000 + r * 0x100);
        }
    }

    /// The next event's stack into `out`.
    pub fn next_event(&mut self, out: &mut Vec<u64>) -> Event {
        let context = self.next_context();
        self.stack_of(context, out);
        let unchanged = out
            .iter()
            .rev()
            .zip(self.prev.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        self.prev.clear();
        self.prev.extend_from_slice(out);
        let size = 16 + (context as u64 * 2_654_435_761) % 2048;
        Event {
            context,
            unchanged,
            size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(order: Order) -> Shape {
        Shape {
            depth: 30,
            contexts: 10_000,
            zipf: 1.0,
            order,
            seed: 7,
        }
    }

    #[test]
    fn contexts_have_distinct_stacks_and_neighbours_share_prefixes() {
        let s = StackStream::new(shape(Order::Random));
        let mut a = Vec::new();
        let mut b = Vec::new();
        s.stack_of(1234, &mut a);
        s.stack_of(1235, &mut b);
        assert_eq!(a.len(), s.frames_per_stack());
        assert_ne!(a, b);
        let common = a
            .iter()
            .rev()
            .zip(b.iter().rev())
            .take_while(|(x, y)| x == y)
            .count();
        assert!(common >= a.len() - 3, "{common} of {}", a.len());
        let mut seen = std::collections::HashSet::new();
        for c in 0..10_000 {
            s.stack_of(c, &mut a);
            assert!(seen.insert(a.clone()), "context {c} repeats a stack");
        }
    }

    #[test]
    fn bursts_reuse_more_frames_than_random_order() {
        let mean_unchanged = |order| {
            let mut s = StackStream::new(shape(order));
            let mut f = Vec::new();
            let n = 20_000;
            (0..n)
                .map(|_| s.next_event(&mut f).unchanged)
                .sum::<usize>() as f64
                / n as f64
        };
        assert!(mean_unchanged(Order::Bursts) > mean_unchanged(Order::Random));
    }

    #[test]
    fn zipf_rank_zero_is_the_most_frequent() {
        let z = Zipf::new(100, 1.0);
        let mut rng = Rng::new(1);
        let mut counts = [0u32; 100];
        for _ in 0..100_000 {
            counts[z.draw(&mut rng)] += 1;
        }
        assert!(counts[0] > counts[1] && counts[1] > counts[50]);
    }
}
