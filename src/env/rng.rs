//! The environments' seeded random source (xoshiro256++ seeded through SplitMix64):
//! the same seed gives the same stream on every machine and in every thread.

/// A small, fast, seedable generator; not for cryptography.
#[derive(Clone, Debug)]
pub struct Rng {
    state: [u64; 4],
}

impl Rng {
    /// A generator whose whole stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut mix = seed;
        let mut next = || {
            mix = mix.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = mix;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng { state: [next(), next(), next(), next()] }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A float uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A float uniform in [low, high).
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }

    /// A standard normal sample (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let radius = (-2.0 * (1.0 - self.next_f64()).ln()).sqrt();
        radius * (std::f64::consts::TAU * self.next_f64()).cos()
    }

    /// An index drawn with the given probabilities (which should sum to about 1; any
    /// shortfall goes to the last index).
    pub fn categorical(&mut self, probabilities: &[f32]) -> usize {
        let mut threshold = self.next_f64();
        for (index, &probability) in probabilities.iter().enumerate() {
            threshold -= f64::from(probability);
            if threshold < 0.0 {
                return index;
            }
        }
        probabilities.len() - 1
    }

    /// An integer uniform in the inclusive range [low, high].
    pub fn integer(&mut self, low: u32, high: u32) -> u32 {
        assert!(low <= high, "empty range {low}..={high}");
        let span = u64::from(high - low) + 1;
        // Lemire's multiply-shift: unbiased enough for spans this small (< 2^32).
        low + ((u128::from(self.next_u64()) * u128::from(span)) >> 64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Normal samples have mean 0 and variance 1; categorical draws follow their
    /// probabilities.
    #[test]
    fn normal_and_categorical_follow_their_laws() {
        let mut rng = Rng::new(5);
        let samples: Vec<f64> = (0..100_000).map(|_| rng.normal()).collect();
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let variance =
            samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / samples.len() as f64;
        assert!(
            mean.abs() < 0.02 && (variance - 1.0).abs() < 0.02,
            "mean {mean} variance {variance}"
        );
        let mut counts = [0usize; 3];
        for _ in 0..100_000 {
            counts[rng.categorical(&[0.2, 0.5, 0.3])] += 1;
        }
        for (count, expected) in counts.iter().zip([20_000.0, 50_000.0, 30_000.0]) {
            assert!((*count as f64 - expected).abs() < 1_000.0, "{counts:?}");
        }
        assert_eq!(rng.categorical(&[0.0, 0.0, 1.0]), 2);
    }

    /// Equal seeds give equal streams, different seeds different ones.
    #[test]
    fn seed_fixes_the_stream() {
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..8).map(|_| rng.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    /// Integers cover their inclusive range evenly and never leave it.
    #[test]
    fn integers_cover_the_range() {
        let mut rng = Rng::new(11);
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            let value = rng.integer(2, 4);
            counts[(value - 2) as usize] += 1;
        }
        for count in counts {
            assert!((9_000..11_000).contains(&count), "{counts:?}");
        }
    }

    /// Uniform floats stay in [low, high) and average to the middle.
    #[test]
    fn uniform_floats_stay_in_range() {
        let mut rng = Rng::new(5);
        let samples: Vec<f64> = (0..10_000).map(|_| rng.uniform(-0.05, 0.05)).collect();
        assert!(samples.iter().all(|x| (-0.05..0.05).contains(x)));
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        assert!(mean.abs() < 0.002, "mean {mean}");
    }
}
