//! CPython's `random.Random`, bit for bit, for the draws the matrix shapes use.
//!
//! Why: a layered matrix (`--dwell`) stores only its seed; every agent re-derives the
//! layers from it. Agents of the original Python tool share fleets and matrix files
//! with ours, so our draws must be CPython 3's exactly: MT19937 seeded through
//! `init_by_array` with the 32-bit words of |seed|, `_randbelow` by rejection on
//! `getrandbits(bit_length(n))`, and the `shuffle` and `sample` algorithms of
//! `Lib/random.py` (3.6 to 3.13 draw identically for these calls).
//! `tests/integration/cpython_vectors.rs` checks it against real CPython output.

use rand_mt::Mt;

/// A `random.Random(seed)` of CPython, for the methods mx needs.
pub(crate) struct PyRandom {
    mt: Mt,
}

impl PyRandom {
    /// `random.Random(seed)` for an integer seed. CPython seeds with |seed|, split
    /// into little-endian 32-bit words (at least one word, so 0 seeds as `[0]`).
    pub fn new(seed: i64) -> PyRandom {
        let magnitude = seed.unsigned_abs();
        let low = magnitude as u32;
        let high = (magnitude >> 32) as u32;
        let key: Vec<u32> = if high == 0 {
            vec![low]
        } else {
            vec![low, high]
        };
        PyRandom {
            mt: Mt::new_with_key(key),
        }
    }

    /// `getrandbits(k)` for 1 <= k <= 32: the top k bits of one 32-bit draw.
    fn getrandbits(&mut self, k: u32) -> u32 {
        debug_assert!((1..=32).contains(&k));
        self.mt.next_u32() >> (32 - k)
    }

    /// `_randbelow(n)`: uniform in [0, n), by rejection on `bit_length(n)` bits.
    pub(crate) fn randbelow(&mut self, n: u32) -> u32 {
        assert!(n > 0, "randbelow(0) has no values to draw");
        let k = u32::BITS - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `shuffle(x)`: Fisher-Yates from the end, as `Lib/random.py` does it.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.randbelow(i as u32 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// `sample(population, k)`, with `Lib/random.py`'s two strategies: a pool copy
    /// for small populations, set-based rejection for large ones. The switch point
    /// is computed with the same floating-point logarithm CPython uses.
    pub fn sample<T: Copy>(&mut self, population: &[T], k: usize) -> Vec<T> {
        let n = population.len();
        assert!(k <= n, "sample larger than population");
        let mut setsize = 21usize;
        if k > 5 {
            let exponent = ((k as f64 * 3.0).ln() / 4f64.ln()).ceil() as u32;
            setsize += 4usize.pow(exponent);
        }
        let mut result = Vec::with_capacity(k);
        if n <= setsize {
            let mut pool = population.to_vec();
            for i in 0..k {
                let j = self.randbelow((n - i) as u32) as usize;
                result.push(pool[j]);
                pool[j] = pool[n - i - 1];
            }
        } else {
            let mut selected = std::collections::HashSet::with_capacity(k);
            for _ in 0..k {
                let mut j = self.randbelow(n as u32) as usize;
                while !selected.insert(j) {
                    j = self.randbelow(n as u32) as usize;
                }
                result.push(population[j]);
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_draws_match_cpython() {
        // python3 -c "import random; r=random.Random(5); print([r.getrandbits(32) for _ in range(3)])"
        let mut r = PyRandom::new(5);
        let draws: Vec<u32> = (0..3).map(|_| r.getrandbits(32)).collect();
        assert_eq!(draws, [2675342405, 1097127993, 3185950873]);
        // Seeds of more than 32 bits seed with two words; 0 seeds with one.
        assert_eq!(PyRandom::new((1 << 40) + 3).getrandbits(32), 943978446);
        assert_eq!(PyRandom::new(0).getrandbits(32), 3626764237);
    }

    #[test]
    fn negative_seeds_seed_like_their_magnitude() {
        let mut a = PyRandom::new(-7);
        let mut b = PyRandom::new(7);
        assert_eq!(a.randbelow(1000), b.randbelow(1000));
    }
}
