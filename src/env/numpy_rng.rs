//! NumPy's default generator, `Generator(PCG64(SeedSequence(seed)))`, as Gymnasium
//! seeds every environment: the Box2D tasks draw their terrain, their first push and
//! their engines' dispersion from it, so the same seed gives Gymnasium's episodes.
//!
//! Two parts, each following NumPy's published algorithm: SeedSequence hashes the seed
//! into the 128-bit state and increment (`generate_state(4, uint64)`), and PCG64 is the
//! 128-bit LCG with the XSL-RR output. Doubles take the top 53 bits, as NumPy's do;
//! bounded integers use Lemire's method on 32-bit draws, each 64-bit output giving
//! its low half first and keeping the high half for the next 32-bit draw.

const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL_SIZE: usize = 4;
const PCG_MULTIPLIER: u128 = 0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645;

/// A PCG64 stream seeded as NumPy seeds it from an integer.
#[derive(Clone, Debug)]
pub struct NumpyRng {
    state: u128,
    increment: u128,
    /// The high half of the last 64 bits a 32-bit draw split, not yet handed out.
    spare_u32: Option<u32>,
}

impl NumpyRng {
    /// `np.random.default_rng(seed)`, which is also what Gymnasium's `reset(seed=...)` makes.
    pub fn new(seed: u64) -> Self {
        let words = seed_sequence_state(seed);
        let wide = |high: u64, low: u64| (u128::from(high) << 64) | u128::from(low);
        let initial_state = wide(words[0], words[1]);
        let sequence = wide(words[2], words[3]);
        let mut rng = NumpyRng { state: 0, increment: (sequence << 1) | 1, spare_u32: None };
        rng.advance();
        rng.state = rng.state.wrapping_add(initial_state);
        rng.advance();
        rng
    }

    fn advance(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULTIPLIER).wrapping_add(self.increment);
    }

    /// The next 64 bits (`bit_generator.random_raw()`).
    pub fn next_u64(&mut self) -> u64 {
        self.advance();
        let folded = ((self.state >> 64) as u64) ^ (self.state as u64);
        folded.rotate_right((self.state >> 122) as u32)
    }

    /// A double uniform in [0, 1) (`random()`).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `uniform(low, high)`, with NumPy's arithmetic.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }

    fn next_u32(&mut self) -> u32 {
        if let Some(spare) = self.spare_u32.take() {
            return spare;
        }
        let bits = self.next_u64();
        self.spare_u32 = Some((bits >> 32) as u32);
        bits as u32
    }

    /// `integers(low, high)`: uniform in [low, high), for spans below 2^32.
    pub fn integers(&mut self, low: i64, high: i64) -> i64 {
        assert!(
            low < high && high - low <= 1 << 32,
            "integers({low}, {high}) is outside what the tasks draw"
        );
        let span = high - low;
        if span == 1 {
            return low;
        }
        if span == 1 << 32 {
            return low + i64::from(self.next_u32());
        }
        let span = span as u32;
        let mut product = u64::from(self.next_u32()) * u64::from(span);
        if (product as u32) < span {
            let threshold = span.wrapping_neg() % span;
            while (product as u32) < threshold {
                product = u64::from(self.next_u32()) * u64::from(span);
            }
        }
        low + (product >> 32) as i64
    }
}

/// SeedSequence(seed).generate_state(4, uint64): the seed's 32-bit words hashed into a
/// pool of four, then drawn out as eight words paired little-endian.
fn seed_sequence_state(seed: u64) -> [u64; 4] {
    let entropy: Vec<u32> =
        if seed >> 32 == 0 { vec![seed as u32] } else { vec![seed as u32, (seed >> 32) as u32] };
    let mut hash_const = INIT_A;
    let mut hashmix = |value: u32| {
        let mut value = value ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_A);
        value = value.wrapping_mul(hash_const);
        value ^ (value >> XSHIFT)
    };
    let mix = |x: u32, y: u32| {
        let result = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
        result ^ (result >> XSHIFT)
    };
    let mut pool = [0u32; POOL_SIZE];
    for (index, slot) in pool.iter_mut().enumerate() {
        *slot = hashmix(entropy.get(index).copied().unwrap_or(0));
    }
    for source in 0..POOL_SIZE {
        for destination in 0..POOL_SIZE {
            if source != destination {
                let hashed = hashmix(pool[source]);
                pool[destination] = mix(pool[destination], hashed);
            }
        }
    }
    // Seeds of at most 128 bits fit the pool: nothing is left over to mix in.
    let mut hash_const = INIT_B;
    let mut words = [0u32; 8];
    for (index, word) in words.iter_mut().enumerate() {
        let mut value = pool[index % POOL_SIZE] ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        value = value.wrapping_mul(hash_const);
        *word = value ^ (value >> XSHIFT);
    }
    std::array::from_fn(|i| u64::from(words[2 * i]) | (u64::from(words[2 * i + 1]) << 32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures printed by NumPy 2.4 for the same seeds.
    #[test]
    fn matches_numpy() {
        assert_eq!(
            seed_sequence_state(5),
            [
                12_631_478_326_263_854_183,
                4_464_650_224_815_488_352,
                6_320_729_261_375_576_658,
                2_846_562_751_307_321_766
            ]
        );
        let mut raw = NumpyRng::new(5);
        let raw: Vec<u64> = (0..3).map(|_| raw.next_u64()).collect();
        assert_eq!(raw, [0xce14_abee_abb8_e5a8, 0xced5_3525_05cc_99f5, 0x83ec_603f_7806_adc0]);
        let cases: [(u64, [f64; 3], f64); 4] = [
            (
                0,
                [0.636_961_687_321_454_3, 0.269_786_713_763_870_3, 0.040_973_523_936_194_69],
                -966.944_728_942_941_8,
            ),
            (
                1,
                [0.511_821_624_700_256_7, 0.950_463_696_325_935_3, 0.144_159_612_719_633_73],
                897.298_894_274_487_8,
            ),
            (
                42,
                [0.773_956_048_555_963_3, 0.438_878_439_752_052_3, 0.858_597_919_911_382_5],
                394.736_058_118_727_9,
            ),
            (
                (1 << 40) + 7,
                [0.829_812_891_829_413, 0.255_305_158_349_104_17, 0.153_790_715_852_987_54],
                349.009_091_735_217,
            ),
        ];
        for (seed, randoms, uniform) in cases {
            let mut rng = NumpyRng::new(seed);
            let drawn: Vec<f64> = (0..3).map(|_| rng.next_f64()).collect();
            assert_eq!(drawn, randoms, "seed {seed}");
            assert_eq!(rng.uniform(-1000.0, 1000.0), uniform, "seed {seed}");
        }
    }

    /// Integers interleaved with doubles, as BipedalWalker's terrain draws them; NumPy
    /// 2.4's figures for the same calls.
    #[test]
    fn integers_match_numpy() {
        let mut rng = NumpyRng::new(9);
        assert_eq!(rng.integers(3, 5), 3);
        assert_eq!(rng.uniform(-1.0, 1.0), -0.426_365_581_824_889_26);
        assert_eq!((rng.integers(1, 5), rng.integers(5, 10)), (4, 5));
        assert_eq!(rng.next_f64(), 0.777_534_082_920_178_8);
        assert_eq!((rng.integers(4, 5), rng.integers(-9999, 9999)), (4, 2062));
        let mut rng = NumpyRng::new(123);
        let drawn: Vec<i64> = (0..12).map(|_| rng.integers(1, 5)).collect();
        assert_eq!(drawn, [1, 3, 3, 1, 4, 1, 2, 1, 2, 1, 2, 4]);
    }
}
