//! The reference's Atari wrapper stack, layer by layer, each exactly as its Gym
//! wrapper behaves, over any [`FrameEnv`] so each can be tested on scripted frames:
//! no-op reset, max-and-skip, episodic life and fire reset act on raw RGB frames;
//! [`preprocess`] and [`RunningNormalizer`] turn the final frame into the observation.

use std::collections::VecDeque;

use super::crop::Crop;
use crate::env::rng::Rng;

/// Width of an Atari screen. Its height is the game's: 210 rows for most, more (230,
/// 250) for games whose ROMs draw a taller frame, such as Amidar; Gym keeps them.
pub const SCREEN_WIDTH: usize = 160;
const CHANNELS: usize = 3;

/// Rows of an RGB screen `SCREEN_WIDTH` pixels wide held in `frame`.
fn screen_rows(frame: &[u8]) -> usize {
    let row_len = SCREEN_WIDTH * CHANNELS;
    assert_eq!(frame.len() % row_len, 0, "frame size {} is not whole rows", frame.len());
    frame.len() / row_len
}
/// Side of the square observation.
pub const OBSERVATION_SIDE: usize = 80;

/// Side of the universe network's observation.
pub const UNIVERSE_SIDE: usize = 42;
/// Side of `--model universe84`'s screen.
pub const UNIVERSE84_SIDE: usize = 84;

/// One step of a frame-level environment.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameStep {
    /// The screen after the step, RGB bytes, row-major.
    pub frame: Vec<u8>,
    /// Game score gained.
    pub reward: f32,
    /// Game over (or, above [`EpisodicLife`], a lost life).
    pub terminated: bool,
    /// A step or frame limit cut the episode.
    pub truncated: bool,
    /// Lives left after the step.
    pub lives: i32,
    /// [`EpisodicLife`] ended the episode at a lost life; the game goes on.
    pub life_lost: bool,
}

impl FrameStep {
    /// Gym's `done`: either way of ending.
    pub fn done(&self) -> bool {
        self.terminated || self.truncated
    }
}

/// A Gym-style environment over raw frames: the emulator, or a wrapper around one.
pub trait FrameEnv: Send {
    /// Starts an episode; returns the first frame.
    fn reset(&mut self) -> Vec<u8>;
    /// Plays `action`, an index into the game's minimal action set.
    fn step(&mut self, action: usize) -> FrameStep;
    /// Lives left now.
    fn lives(&mut self) -> i32;
    /// Replaces every random stream below with ones derived from `seed`.
    fn reseed(&mut self, seed: u64);
    /// Emulator frames played since creation.
    fn env_frames(&self) -> u64;
    /// The screen as the console shows it now, RGB, for recordings.
    fn screen(&mut self) -> Vec<u8>;
}

/// Forwards the queries that a wrapper leaves to the environment it wraps.
macro_rules! delegate_queries {
    () => {
        fn lives(&mut self) -> i32 {
            self.inner.lives()
        }
        fn env_frames(&self) -> u64 {
            self.inner.env_frames()
        }
        fn screen(&mut self) -> Vec<u8> {
            self.inner.screen()
        }
    };
}

/// On reset, plays between 1 and `noop_max` no-ops (action 0) drawn at random, so
/// episodes start from varied states (NoFrameskip ids only, as in the reference).
pub struct NoopReset {
    inner: Box<dyn FrameEnv>,
    noop_max: u32,
    rng: Rng,
}

impl NoopReset {
    /// Wraps `inner`, drawing no-op counts from a stream seeded by `seed`.
    pub fn new(inner: Box<dyn FrameEnv>, noop_max: u32, seed: u64) -> Self {
        NoopReset { inner, noop_max, rng: Rng::new(seed ^ NOOP_STREAM) }
    }
}

/// Keeps the no-op stream apart from the emulator's frame-skip stream of the same seed.
const NOOP_STREAM: u64 = 0x6e6f_6f70;

impl FrameEnv for NoopReset {
    fn reset(&mut self) -> Vec<u8> {
        let mut frame = self.inner.reset();
        for _ in 0..self.rng.integer(1, self.noop_max) {
            let step = self.inner.step(0);
            frame = if step.done() { self.inner.reset() } else { step.frame };
        }
        frame
    }

    fn step(&mut self, action: usize) -> FrameStep {
        self.inner.step(action)
    }

    fn reseed(&mut self, seed: u64) {
        self.rng = Rng::new(seed ^ NOOP_STREAM);
        self.inner.reseed(seed);
    }

    delegate_queries!();
}

/// Repeats each action for `skip` frames (stopping early at the end of an episode),
/// sums the rewards and returns the pixel-wise maximum of the last three frames, which
/// removes the flicker of sprites drawn every other frame. As in the reference, the
/// three-frame window runs on across steps and is cleared only on reset.
pub struct MaxAndSkip {
    inner: Box<dyn FrameEnv>,
    skip: u32,
    recent: VecDeque<Vec<u8>>,
}

impl MaxAndSkip {
    /// Frames the maximum is taken over.
    const WINDOW: usize = 3;

    /// Wraps `inner`, repeating each action `skip` times.
    pub fn new(inner: Box<dyn FrameEnv>, skip: u32) -> Self {
        assert!(skip >= 1, "skip must be at least 1");
        MaxAndSkip { inner, skip, recent: VecDeque::with_capacity(Self::WINDOW) }
    }

    fn remember(&mut self, frame: Vec<u8>) {
        if self.recent.len() == Self::WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(frame);
    }
}

impl FrameEnv for MaxAndSkip {
    fn reset(&mut self) -> Vec<u8> {
        self.recent.clear();
        let frame = self.inner.reset();
        self.remember(frame.clone());
        frame
    }

    fn step(&mut self, action: usize) -> FrameStep {
        let mut reward = 0.0;
        let mut last = None;
        for _ in 0..self.skip {
            let mut step = self.inner.step(action);
            reward += step.reward;
            self.remember(std::mem::take(&mut step.frame));
            let done = step.done();
            last = Some(step);
            if done {
                break;
            }
        }
        let mut step = last.expect("skip >= 1 plays a frame");
        let mut frames = self.recent.iter();
        let mut maximum = frames.next().expect("a frame was just stored").clone();
        for frame in frames {
            for (max, &pixel) in maximum.iter_mut().zip(frame) {
                *max = (*max).max(pixel);
            }
        }
        step.frame = maximum;
        step.reward = reward;
        step
    }

    fn reseed(&mut self, seed: u64) {
        self.inner.reseed(seed);
    }

    delegate_queries!();
}

/// Makes a lost life end the episode for the learner, while only a real game over
/// restarts the game: after a lost life, reset plays one no-op and carries on.
pub struct EpisodicLife {
    inner: Box<dyn FrameEnv>,
    lives: i32,
    was_real_done: bool,
}

impl EpisodicLife {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn FrameEnv>) -> Self {
        EpisodicLife { inner, lives: 0, was_real_done: true }
    }
}

impl FrameEnv for EpisodicLife {
    fn reset(&mut self) -> Vec<u8> {
        let frame = if self.was_real_done { self.inner.reset() } else { self.inner.step(0).frame };
        self.lives = self.inner.lives();
        frame
    }

    fn step(&mut self, action: usize) -> FrameStep {
        let mut step = self.inner.step(action);
        self.was_real_done = step.done();
        // Some games (Qbert) sit at zero lives for a few frames before game over; only
        // a drop to a positive count is a lost life, so the episode ends once.
        if step.lives < self.lives && step.lives > 0 && !self.was_real_done {
            step.terminated = true;
            step.life_lost = true;
        }
        self.lives = step.lives;
        step
    }

    fn reseed(&mut self, seed: u64) {
        self.was_real_done = true;
        self.inner.reseed(seed);
    }

    delegate_queries!();
}

/// For games that wait for FIRE: on reset presses action 1 (FIRE) then action 2,
/// restarting if either ends the episode.
pub struct FireReset {
    inner: Box<dyn FrameEnv>,
}

impl FireReset {
    /// Wraps `inner`, whose minimal action 1 must be FIRE.
    pub fn new(inner: Box<dyn FrameEnv>) -> Self {
        FireReset { inner }
    }
}

impl FrameEnv for FireReset {
    fn reset(&mut self) -> Vec<u8> {
        self.inner.reset();
        if self.inner.step(1).done() {
            self.inner.reset();
        }
        let step = self.inner.step(2);
        if step.done() {
            self.inner.reset();
        }
        step.frame
    }

    fn step(&mut self, action: usize) -> FrameStep {
        self.inner.step(action)
    }

    fn reseed(&mut self, seed: u64) {
        self.inner.reseed(seed);
    }

    delegate_queries!();
}

/// Crops rows `crop.crop1 .. crop.crop2 + 160` and columns 0..160 of an RGB screen,
/// shrinks them to 80x80 with OpenCV's INTER_AREA on bytes, and converts to gray
/// with weights 0.2989, 0.587, 0.114, as the reference's AtariRescale does.
pub fn preprocess(frame: &[u8], crop: Crop, observation: &mut [f32]) {
    let (height, width, channels) = (screen_rows(frame), SCREEN_WIDTH, CHANNELS);
    assert_eq!(observation.len(), OBSERVATION_SIDE * OBSERVATION_SIDE, "observation size");
    let top = crop.crop1.min(height);
    let bottom = (crop.crop2 + 160).min(height);
    let region = &frame[top * width * channels..bottom * width * channels];
    if bottom - top == 2 * OBSERVATION_SIDE && width == 2 * OBSERVATION_SIDE {
        halve_to_gray(region, observation);
        return;
    }
    let small = resize_area(region, bottom - top, width, OBSERVATION_SIDE, OBSERVATION_SIDE);
    for (gray, rgb) in observation.iter_mut().zip(small.chunks_exact(3)) {
        *gray = to_gray([rgb[0], rgb[1], rgb[2]]);
    }
}

/// The square both universe screens take from the RGB screen: rows 34..194, columns 0..160.
const CROP_TOP: usize = 34;
const CROP_SIDE: usize = 160;

/// ikostrikov's `_process_frame42`: rows 34..194 and columns 0..160 of the RGB
/// screen, `cv2.resize` to 80x80 and then to 42x42 (bilinear, on bytes), the mean of
/// the three channels, over 255. The first resize is an exact halving, which OpenCV
/// does by 2x2 averages; the second follows OpenCV's fixed-point bilinear resize of
/// bytes (11-bit weights, rounded sums), so observations are OpenCV's to the bit.
pub fn preprocess_universe(frame: &[u8]) -> Vec<f32> {
    let (width, channels) = (SCREEN_WIDTH, CHANNELS);
    assert!(screen_rows(frame) >= CROP_TOP + CROP_SIDE, "a screen of {} rows", screen_rows(frame));
    let mut half = vec![0u8; 80 * 80 * 3];
    for row in 0..80 {
        let upper = &frame[(CROP_TOP + 2 * row) * width * channels..][..CROP_SIDE * channels];
        let lower = &frame[(CROP_TOP + 2 * row + 1) * width * channels..][..CROP_SIDE * channels];
        for column in 0..80 {
            for channel in 0..3 {
                let at = |line: &[u8], offset: usize| {
                    u16::from(line[(2 * column + offset) * 3 + channel])
                };
                let sum = at(upper, 0) + at(upper, 1) + at(lower, 0) + at(lower, 1);
                half[(row * 80 + column) * 3 + channel] = ((sum + 2) >> 2) as u8;
            }
        }
    }
    let small = resize_linear(&half, 80, UNIVERSE_SIDE);
    small
        .chunks_exact(3)
        .map(|rgb| {
            // numpy's mean of bytes is taken in f64, then the frame becomes f32 and is
            // scaled by the f32 1/255.
            let mean = (f64::from(rgb[0]) + f64::from(rgb[1]) + f64::from(rgb[2])) / 3.0;
            mean as f32 * (1.0f32 / 255.0)
        })
        .collect()
}

/// `--model universe-max`'s screen: the rows and columns [`preprocess_universe`] takes,
/// cut into 42x42 blocks of 4 or 5 pixels a side, one every 3.8 pixels (most
/// neighbours share a row or column of pixels), each cell the brightest pixel of its
/// block by the mean of the three channels, over 255. The bilinear resizes keep under
/// 0.3 of the contrast of Breakout's ball (two pixels wide) where it falls between
/// their samples; a block's maximum keeps all of it wherever it stands, at the same
/// 42x42 the universe network reads.
pub fn preprocess_universe_max(frame: &[u8]) -> Vec<f32> {
    let (width, channels) = (SCREEN_WIDTH, CHANNELS);
    assert!(screen_rows(frame) >= CROP_TOP + CROP_SIDE, "a screen of {} rows", screen_rows(frame));
    let side = UNIVERSE_SIDE;
    let blocks: [std::ops::Range<usize>; UNIVERSE_SIDE] = std::array::from_fn(|cell| {
        cell * CROP_SIDE / side..((cell + 1) * CROP_SIDE).div_ceil(side)
    });
    // A maximum is separable: each row's block maxima first, then the maxima of those
    // down each block of rows. Along a row, the maxima of every four neighbours come
    // from those of every two, and a block of four or five is covered by the four at
    // its start and the four at its end, so each is two lookups and no loop.
    let mut row_maxima = vec![0u16; CROP_SIDE * side];
    let mut brightness = [0u16; CROP_SIDE];
    let (mut twos, mut fours) = ([0u16; CROP_SIDE - 1], [0u16; CROP_SIDE - 3]);
    for (row, maxima) in row_maxima.chunks_exact_mut(side).enumerate() {
        let line = &frame[(CROP_TOP + row) * width * channels..][..CROP_SIDE * channels];
        for (pixel, rgb) in brightness.iter_mut().zip(line.chunks_exact(channels)) {
            *pixel = u16::from(rgb[0]) + u16::from(rgb[1]) + u16::from(rgb[2]);
        }
        for (two, pair) in twos.iter_mut().zip(brightness.windows(2)) {
            *two = pair[0].max(pair[1]);
        }
        for (four, at) in fours.iter_mut().zip(0..) {
            *four = twos[at].max(twos[at + 2]);
        }
        for (maximum, columns) in maxima.iter_mut().zip(&blocks) {
            *maximum = fours[columns.start].max(fours[columns.end - 4]);
        }
    }
    let mut screen = Vec::with_capacity(side * side);
    let mut brightest = [0u16; UNIVERSE_SIDE];
    for rows in &blocks {
        brightest.fill(0);
        for maxima in row_maxima[rows.start * side..rows.end * side].chunks_exact(side) {
            for (cell, &maximum) in brightest.iter_mut().zip(maxima) {
                *cell = (*cell).max(maximum);
            }
        }
        screen.extend(brightest.iter().map(|&cell| f32::from(cell) / (3.0 * 255.0)));
    }
    screen
}

/// `--model universe84`'s screen: the rows and columns [`preprocess_universe`] takes,
/// bilinear from 160x160 to 84x84 in one resize, the mean of the three channels, over 255.
pub fn preprocess_universe84(frame: &[u8]) -> Vec<f32> {
    let (width, channels) = (SCREEN_WIDTH, CHANNELS);
    assert!(screen_rows(frame) >= CROP_TOP + CROP_SIDE, "a screen of {} rows", screen_rows(frame));
    let mut square = Vec::with_capacity(CROP_SIDE * CROP_SIDE * channels);
    for row in CROP_TOP..CROP_TOP + CROP_SIDE {
        square.extend_from_slice(&frame[row * width * channels..][..CROP_SIDE * channels]);
    }
    resize_linear(&square, CROP_SIDE, UNIVERSE84_SIDE)
        .chunks_exact(3)
        .map(|rgb| (f32::from(rgb[0]) + f32::from(rgb[1]) + f32::from(rgb[2])) / (3.0 * 255.0))
        .collect()
}

/// OpenCV's bilinear `resize` of a square RGB byte image from `src_side` to
/// `dst_side` (smaller, not by an integer factor): source position
/// `(d + 0.5) * scale - 0.5` in f32, weights `(1 - f, f)` each rounded to 11 bits, a
/// horizontal pass in integers, then a vertical one rounded back to bytes as
/// OpenCV's SIMD code rounds it (checked against OpenCV 5.0 by a fixture).
fn resize_linear(src: &[u8], src_side: usize, dst_side: usize) -> Vec<u8> {
    const CHANNELS: usize = 3;
    const ONE: f32 = 2048.0;
    let scale = src_side as f64 / dst_side as f64;
    let taps: Vec<(usize, i32, i32)> = (0..dst_side)
        .map(|d| {
            let position = ((d as f64 + 0.5) * scale - 0.5) as f32;
            let mut first = position.floor() as isize;
            let mut fraction = position - first as f32;
            if first < 0 {
                (first, fraction) = (0, 0.0);
            }
            if first as usize >= src_side - 1 {
                (first, fraction) = (src_side as isize - 1, 0.0);
            }
            let weight = |value: f32| (value * ONE).round_ties_even() as i32;
            (first as usize, weight(1.0 - fraction), weight(fraction))
        })
        .collect();
    let horizontal = |row: usize| -> Vec<i32> {
        let line = &src[row * src_side * CHANNELS..][..src_side * CHANNELS];
        let mut out = vec![0i32; dst_side * CHANNELS];
        for (d, &(first, left, right)) in taps.iter().enumerate() {
            let second = (first + 1).min(src_side - 1);
            for channel in 0..CHANNELS {
                out[d * CHANNELS + channel] = i32::from(line[first * CHANNELS + channel]) * left
                    + i32::from(line[second * CHANNELS + channel]) * right;
            }
        }
        out
    };
    let mut dst = vec![0u8; dst_side * dst_side * CHANNELS];
    for (d, &(first, top, bottom)) in taps.iter().enumerate() {
        let (upper, lower) = (horizontal(first), horizontal((first + 1).min(src_side - 1)));
        for (index, (a, b)) in upper.iter().zip(&lower).enumerate() {
            // OpenCV's vectorised rounding, which it applies to whole rows: each sum
            // drops 4 bits to fit 16-bit lanes, takes the high half of its product with
            // the weight, and the two halves are added and rounded off by 2 bits.
            let term = |sum: i32, weight: i32| ((sum >> 4) * weight) >> 16;
            let value = (term(*a, top) + term(*b, bottom) + 2) >> 2;
            dst[d * dst_side * CHANNELS + index] = value.clamp(0, 255) as u8;
        }
    }
    dst
}

/// The reference's gray level of one RGB pixel.
fn to_gray(rgb: [u8; 3]) -> f32 {
    let [r, g, b] = rgb.map(usize::from);
    (GRAY_RED[r] + GRAY_GREEN[g] + GRAY_BLUE[b]) as f32
}

/// Each channel's share of the gray level, tabulated per byte value: the products are
/// the f64 ones computed at compile time, so lookups give exactly the values of the
/// multiplications (and the same sum order) for less work per pixel.
const GRAY_RED: [f64; 256] = gray_table(0.2989);
const GRAY_GREEN: [f64; 256] = gray_table(0.587);
const GRAY_BLUE: [f64; 256] = gray_table(0.114);

const fn gray_table(weight: f64) -> [f64; 256] {
    let mut table = [0.0; 256];
    let mut value = 0;
    while value < 256 {
        table[value] = weight * value as f64;
        value += 1;
    }
    table
}

/// The common case of [`preprocess`] (160 rows kept, as for most games), fused: each
/// 2x2 block is averaged as OpenCV's exact halving does, `(a + b + c + d + 2) >> 2` per
/// channel, and turned to gray in one pass. Adding the two source rows first keeps the
/// inner loops simple enough to vectorise.
fn halve_to_gray(region: &[u8], observation: &mut [f32]) {
    const SRC_ROW_LEN: usize = 2 * OBSERVATION_SIDE * 3;
    let mut column_sums = [0u16; SRC_ROW_LEN];
    for (out_row, rows) in
        observation.chunks_exact_mut(OBSERVATION_SIDE).zip(region.chunks_exact(2 * SRC_ROW_LEN))
    {
        let (upper, lower) = rows.split_at(SRC_ROW_LEN);
        for ((sum, &top), &bottom) in column_sums.iter_mut().zip(upper).zip(lower) {
            *sum = u16::from(top) + u16::from(bottom);
        }
        for (gray, pair) in out_row.iter_mut().zip(column_sums.chunks_exact(6)) {
            let mean = |channel: usize| ((pair[channel] + pair[channel + 3] + 2) >> 2) as u8;
            *gray = to_gray([mean(0), mean(1), mean(2)]);
        }
    }
}

/// OpenCV's `resize(..., INTER_AREA)` of an RGB byte image to a smaller one, for
/// ratios other than exactly 2 (which OpenCV and [`halve_to_gray`] do in integers):
/// the average over each destination pixel's source area, weighting partly covered
/// pixels by their overlap, summed in f32 and rounded half to even.
fn resize_area(
    src: &[u8],
    src_rows: usize,
    src_cols: usize,
    dst_rows: usize,
    dst_cols: usize,
) -> Vec<u8> {
    const CHANNELS: usize = 3;
    let mut dst = vec![0u8; dst_rows * dst_cols * CHANNELS];
    let src_at =
        |row: usize, col: usize, channel: usize| src[(row * src_cols + col) * CHANNELS + channel];
    let row_weights = area_weights(src_rows, dst_rows);
    let col_weights = area_weights(src_cols, dst_cols);
    let mut sums = vec![0f32; dst_cols * CHANNELS];
    let mut row_buffer = vec![0f32; dst_cols * CHANNELS];
    let mut current_row = None;
    for &(dst_row, src_row, row_weight) in &row_weights {
        row_buffer.fill(0.0);
        for &(dst_col, src_col, col_weight) in &col_weights {
            for channel in 0..CHANNELS {
                row_buffer[dst_col * CHANNELS + channel] +=
                    col_weight * f32::from(src_at(src_row, src_col, channel));
            }
        }
        if current_row != Some(dst_row) {
            if let Some(done_row) = current_row {
                write_row(&mut dst, done_row, &sums);
            }
            current_row = Some(dst_row);
            for (sum, value) in sums.iter_mut().zip(&row_buffer) {
                *sum = row_weight * value;
            }
        } else {
            for (sum, value) in sums.iter_mut().zip(&row_buffer) {
                *sum += row_weight * value;
            }
        }
    }
    if let Some(done_row) = current_row {
        write_row(&mut dst, done_row, &sums);
    }
    dst
}

fn write_row(dst: &mut [u8], row: usize, sums: &[f32]) {
    for (out, sum) in dst[row * sums.len()..(row + 1) * sums.len()].iter_mut().zip(sums) {
        *out = sum.round_ties_even().clamp(0.0, 255.0) as u8;
    }
}

/// OpenCV's `computeResizeAreaTab`: for each destination index, the source indices it
/// covers and the share of each, as (destination, source, weight).
fn area_weights(src_len: usize, dst_len: usize) -> Vec<(usize, usize, f32)> {
    let scale = src_len as f64 / dst_len as f64;
    let mut weights = Vec::new();
    for dst in 0..dst_len {
        let start = dst as f64 * scale;
        let end = start + scale;
        let cell = scale.min(src_len as f64 - start);
        let last = (end.floor() as usize).min(src_len - 1);
        let first = (start.ceil() as usize).min(last);
        if first as f64 - start > 1e-3 {
            weights.push((dst, first - 1, ((first as f64 - start) / cell) as f32));
        }
        for src in first..last {
            weights.push((dst, src, (1.0 / cell) as f32));
        }
        if end - last as f64 > 1e-3 {
            weights.push((dst, last, ((end - last as f64).min(1.0).min(cell) / cell) as f32));
        }
    }
    weights
}

/// Normalises observations by running estimates of their mean and standard deviation
/// (exponential averages with alpha 0.9999, bias-corrected), as the reference's
/// NormalizedEnv does; the estimates persist across episodes.
#[derive(Clone, Debug, Default)]
pub struct RunningNormalizer {
    mean: f64,
    std: f64,
    steps: i32,
}

impl RunningNormalizer {
    const ALPHA: f64 = 0.9999;

    /// Updates the estimates with `observation` and normalises it in place.
    pub fn normalize(&mut self, observation: &mut [f32]) {
        let n = observation.len() as f64;
        // One pass for both moments; in f64 the sum of squares of 6400 values under 256
        // loses nothing that matters.
        let (sum, sum_of_squares) =
            observation.iter().fold((0.0, 0.0), |(sum, squares), &value| {
                let value = f64::from(value);
                (sum + value, squares + value * value)
            });
        let mean = sum / n;
        let variance = (sum_of_squares / n - mean * mean).max(0.0);
        self.steps = self.steps.saturating_add(1);
        self.mean = self.mean * Self::ALPHA + mean * (1.0 - Self::ALPHA);
        self.std = self.std * Self::ALPHA + variance.sqrt() * (1.0 - Self::ALPHA);
        let correction = 1.0 - Self::ALPHA.powi(self.steps);
        // The reference applies the estimates to a float32 array, so in f32.
        let mean = (self.mean / correction) as f32;
        let std = (self.std / correction) as f32;
        for value in observation {
            *value = (*value - mean) / (std + 1e-8);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// ikostrikov's preprocessing, made by OpenCV itself on a noise screen and a ramp
    /// screen (tests/fixtures/make_universe_screen_fixture.py), is reproduced exactly.
    #[test]
    fn universe_screens_match_opencv() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/universe_screens.bin");
        let bytes = std::fs::read(path).expect("the fixture");
        let screen_len = 210 * 160 * 3;
        let observation_len = UNIVERSE_SIDE * UNIVERSE_SIDE;
        let record = screen_len + 4 * observation_len;
        assert_eq!(bytes.len(), 2 * record);
        for (index, record) in bytes.chunks_exact(record).enumerate() {
            let (screen, expected) = record.split_at(screen_len);
            let expected: Vec<f32> = expected
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let ours = preprocess_universe(screen);
            let differing = ours.iter().zip(&expected).filter(|(a, b)| a != b).count();
            let worst =
                ours.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert_eq!(differing, 0, "screen {index}: {differing} values differ, by up to {worst}");
        }
    }

    /// `--model universe84`'s screen and `--model universe-max`'s take the same rows as
    /// the universe screen and the mean of the colours, and keep an object two pixels
    /// wide (Breakout's ball) at half its contrast or more (84x84) or all of it (42x42
    /// by block maxima) wherever it stands, where the bilinear 42x42 can all but lose it.
    #[test]
    fn universe84_and_max_screens_keep_small_objects() {
        let (rows, width) = (210, 160);
        let background = 60.0 / 255.0;
        let object = 240.0 / 255.0;
        // The least contrast an object in columns `left` and `left + 1` keeps, over
        // every column it can stand in.
        let least_contrast = |preprocess: fn(&[u8]) -> Vec<f32>| {
            (0..width - 1)
                .map(|left| {
                    let mut frame = vec![0u8; rows * width * 3];
                    for (index, pixel) in frame.chunks_exact_mut(3).enumerate() {
                        let (row, column) = (index / width, index % width);
                        let colour = if !(34..194).contains(&row) {
                            [255, 255, 255]
                        } else if column == left || column == left + 1 {
                            [240, 240, 240]
                        } else {
                            [30, 60, 90]
                        };
                        pixel.copy_from_slice(&colour);
                    }
                    let screen = preprocess(&frame);
                    let side = (screen.len() as f64).sqrt() as usize;
                    let far_corner = screen[if left < width / 2 { side - 1 } else { 0 }];
                    assert!(
                        (far_corner - background).abs() < 1e-6,
                        "the rows outside the crop leak in"
                    );
                    let brightest = screen.iter().copied().fold(0.0f32, f32::max);
                    (brightest - background) / (object - background)
                })
                .fold(f32::INFINITY, f32::min)
        };
        let wide = least_contrast(preprocess_universe84);
        let narrow = least_contrast(preprocess_universe);
        let pooled = least_contrast(preprocess_universe_max);
        assert!(wide >= 0.5, "84x84 keeps {wide} of the contrast somewhere");
        assert!(narrow < 0.3, "42x42 keeps {narrow} of it at least");
        assert!(
            (pooled - 1.0).abs() < 1e-6,
            "42x42 by block maxima keeps as little as {pooled} of it"
        );
        assert_eq!(
            preprocess_universe84(&vec![0; rows * width * 3]).len(),
            UNIVERSE84_SIDE * UNIVERSE84_SIDE
        );
        assert_eq!(
            preprocess_universe_max(&vec![0; rows * width * 3]).len(),
            UNIVERSE_SIDE * UNIVERSE_SIDE
        );
    }

    /// Each cell of the block-maximum screen is the brightest pixel (by the sum of its
    /// channels) of its block: rows and columns `cell * 160 / 42` up to `((cell + 1) *
    /// 160).div_ceil(42)` of the crop, found here pixel by pixel over noise screens,
    /// whose maxima fall anywhere, including on the pixels two blocks share.
    #[test]
    fn block_maximum_screens_take_each_blocks_brightest_pixel() {
        let block = |cell: usize| cell * 160 / 42..((cell + 1) * 160).div_ceil(42);
        assert_eq!((block(0), block(1), block(41)), (0..4, 3..8, 156..160));
        let mut rng = Rng::new(7);
        for _ in 0..3 {
            let frame: Vec<u8> = (0..210 * 160 * 3).map(|_| rng.next_u64() as u8).collect();
            let expected: Vec<f32> = (0..42 * 42)
                .map(|cell| {
                    let brightest = block(cell / 42)
                        .flat_map(|row| block(cell % 42).map(move |column| (row, column)))
                        .map(|(row, column)| {
                            let at = ((34 + row) * 160 + column) * 3;
                            frame[at..at + 3].iter().map(|&byte| u16::from(byte)).sum::<u16>()
                        })
                        .max()
                        .expect("every block holds pixels");
                    f32::from(brightest) / (3.0 * 255.0)
                })
                .collect();
            assert_eq!(preprocess_universe_max(&frame), expected);
        }
    }

    /// What a scripted game was asked to do, in order.
    type Calls = Arc<Mutex<Vec<String>>>;

    /// A game that plays back a script: step `i` of an episode gives `frames[i]`,
    /// `rewards[i]` and `lives[i]`, and the episode ends after the last entry.
    struct ScriptedGame {
        frames: Vec<Vec<u8>>,
        rewards: Vec<f32>,
        lives: Vec<i32>,
        position: usize,
        calls: Calls,
    }

    impl ScriptedGame {
        fn boxed(
            frames: Vec<Vec<u8>>,
            rewards: Vec<f32>,
            lives: Vec<i32>,
        ) -> (Box<dyn FrameEnv>, Calls) {
            let calls = Calls::default();
            let game = ScriptedGame { frames, rewards, lives, position: 0, calls: calls.clone() };
            (Box::new(game), calls)
        }

        /// A long game with one life, whose frame at step i is [i + 1].
        fn endless() -> (Box<dyn FrameEnv>, Calls) {
            let steps = 1000;
            Self::boxed(
                (1..=steps).map(|i| vec![i as u8]).collect(),
                vec![0.0; steps],
                vec![1; steps],
            )
        }
    }

    impl FrameEnv for ScriptedGame {
        fn reset(&mut self) -> Vec<u8> {
            self.calls.lock().unwrap().push("reset".into());
            self.position = 0;
            vec![0; self.frames[0].len()]
        }

        fn step(&mut self, action: usize) -> FrameStep {
            self.calls.lock().unwrap().push(format!("step {action}"));
            let index = self.position.min(self.frames.len() - 1);
            self.position += 1;
            FrameStep {
                frame: self.frames[index].clone(),
                reward: self.rewards[index],
                terminated: self.position >= self.frames.len(),
                truncated: false,
                lives: self.lives[index],
                life_lost: false,
            }
        }

        fn lives(&mut self) -> i32 {
            let index = self.position.saturating_sub(1).min(self.lives.len() - 1);
            if self.position == 0 {
                self.lives[0]
            } else {
                self.lives[index]
            }
        }

        fn reseed(&mut self, _seed: u64) {
            self.calls.lock().unwrap().push("reseed".into());
        }

        fn env_frames(&self) -> u64 {
            self.position as u64
        }

        fn screen(&mut self) -> Vec<u8> {
            self.frames[self.position.saturating_sub(1).min(self.frames.len() - 1)].clone()
        }
    }

    fn taken(calls: &Calls) -> Vec<String> {
        std::mem::take(&mut *calls.lock().unwrap())
    }

    /// No-op reset plays 1..=30 no-ops (action 0) after the game's reset, a count drawn
    /// from its seed: every count in range occurs, and equal seeds draw equal counts.
    #[test]
    fn noop_reset_plays_between_1_and_30_noops() {
        let mut counts = Vec::new();
        for seed in 0..400 {
            let (game, calls) = ScriptedGame::endless();
            let mut env = NoopReset::new(game, 30, seed);
            let frame = env.reset();
            let calls = taken(&calls);
            assert_eq!(calls[0], "reset");
            assert!(calls[1..].iter().all(|call| call == "step 0"), "{calls:?}");
            let noops = calls.len() - 1;
            // The frame returned is the one after the last no-op.
            assert_eq!(frame, vec![noops as u8]);
            counts.push(noops);
        }
        assert_eq!(*counts.iter().min().unwrap(), 1);
        assert_eq!(*counts.iter().max().unwrap(), 30);
        assert!((1..=30).all(|count| counts.contains(&count)), "some count never drawn");
        let (game, calls) = ScriptedGame::endless();
        NoopReset::new(game, 30, 7).reset();
        assert_eq!(taken(&calls).len() - 1, counts[7], "seed 7 drew another count");
    }

    /// A no-op that ends the game makes no-op reset restart it.
    #[test]
    fn noop_reset_restarts_a_game_that_ends() {
        let (game, calls) = ScriptedGame::boxed(vec![vec![1], vec![2]], vec![0.0; 2], vec![1; 2]);
        let mut env = NoopReset::new(game, 30, 3);
        env.reset();
        let calls = taken(&calls);
        let noops = calls.iter().filter(|call| *call == "step 0").count();
        // Every second no-op ends the two-step game, which is then reset.
        assert_eq!(
            calls.iter().filter(|call| *call == "reset").count(),
            1 + noops / 2,
            "{calls:?}"
        );
    }

    /// Max-and-skip repeats the action `skip` times, sums the rewards and returns the
    /// pixel-wise maximum of the last three frames, a window that runs across steps.
    #[test]
    fn max_and_skip_sums_rewards_and_maxes_last_three_frames() {
        let frames = vec![
            vec![9, 0],
            vec![1, 5],
            vec![4, 2],
            vec![3, 3],
            vec![2, 1],
            vec![0, 0],
            vec![7, 7],
        ];
        let rewards = vec![1.0, 0.0, 2.0, 0.0, 5.0, 0.0, 0.0];
        let (game, calls) = ScriptedGame::boxed(frames, rewards, vec![1; 7]);
        let mut env = MaxAndSkip::new(game, 4);
        env.reset();
        let step = env.step(3);
        assert_eq!(taken(&calls), ["reset", "step 3", "step 3", "step 3", "step 3"]);
        assert_eq!(step.reward, 3.0);
        // max of [1,5], [4,2], [3,3]; [9,0] from the first frame has left the window.
        assert_eq!(step.frame, vec![4, 5]);
        assert!(!step.done());
        // The game ends on its 7th frame: the step stops there, after 3 frames.
        let step = env.step(1);
        assert_eq!(taken(&calls).len(), 3);
        assert_eq!(step.reward, 5.0);
        assert_eq!(step.frame, vec![7, 7]);
        assert!(step.terminated);
        // Reset clears the window: the frame after it is maxed with the reset frame only.
        env.reset();
        let mut single = MaxAndSkip::new(
            ScriptedGame::boxed(vec![vec![1, 2]; 3], vec![0.0; 3], vec![1; 3]).0,
            1,
        );
        single.reset();
        assert_eq!(single.step(0).frame, vec![1, 2]);
    }

    /// Episodic life: a lost life ends the learner's episode without resetting the
    /// game (reset then plays one no-op); only game over resets it. A drop to zero
    /// lives is no lost life, as in Qbert where game over follows a few frames later.
    #[test]
    fn episodic_life_ends_episodes_at_lost_lives() {
        let frames: Vec<Vec<u8>> = (1..=6).map(|i| vec![i]).collect();
        let lives = vec![3, 2, 2, 1, 0, 0];
        let (game, calls) = ScriptedGame::boxed(frames, vec![0.0; 6], lives);
        let mut env = EpisodicLife::new(game);
        env.reset();
        assert!(!env.step(4).terminated);
        let lost = env.step(4);
        assert!(lost.terminated && lost.life_lost, "3 -> 2 lives ends the episode");
        assert_eq!(env.reset(), vec![3], "reset after a lost life plays a no-op");
        assert!(env.step(4).life_lost, "2 -> 1 lives");
        env.reset();
        // Step 5: 1 -> 0 lives is not counted; step 6 is the real game over.
        let _ = env.step(4);
        let over = env.step(4);
        assert!(over.terminated && !over.life_lost);
        env.reset();
        assert_eq!(
            taken(&calls),
            [
                "reset", "step 4", "step 4", "step 0", "step 4", "step 0", "step 4", "step 4",
                "reset"
            ]
        );
    }

    /// The drop to zero lives alone does not end the learner's episode.
    #[test]
    fn episodic_life_ignores_the_drop_to_zero() {
        let (game, _) =
            ScriptedGame::boxed(vec![vec![1], vec![2], vec![3]], vec![0.0; 3], vec![1, 0, 0]);
        let mut env = EpisodicLife::new(game);
        env.reset();
        assert!(!env.step(0).terminated);
        assert!(!env.step(0).terminated);
    }

    /// Fire reset presses FIRE (action 1), then action 2, and returns the frame after.
    #[test]
    fn fire_reset_presses_fire_then_two() {
        let (game, calls) = ScriptedGame::endless();
        let mut env = FireReset::new(game);
        assert_eq!(env.reset(), vec![2]);
        assert_eq!(taken(&calls), ["reset", "step 1", "step 2"]);
        env.step(0);
        assert_eq!(taken(&calls), ["step 0"]);
    }

    /// A 210-row screen whose value at row r is r in every channel.
    fn row_numbered_screen() -> Vec<u8> {
        row_numbered_screen_of(210)
    }

    fn row_numbered_screen_of(height: usize) -> Vec<u8> {
        let row_len = SCREEN_WIDTH * CHANNELS;
        (0..height * row_len).map(|i| (i / row_len) as u8).collect()
    }

    /// Pong keeps rows 34..194, which halve exactly: output row i averages rows 34 + 2i
    /// and 35 + 2i, (2(34 + 2i) + 2(35 + 2i) + 2) >> 2 = 35 + 2i, and its gray value is
    /// that times 0.2989 + 0.587 + 0.114 = 0.9999.
    #[test]
    fn preprocess_halves_pong_rows() {
        let mut observation = vec![0.0; OBSERVATION_SIDE * OBSERVATION_SIDE];
        preprocess(&row_numbered_screen(), Crop { crop1: 34, crop2: 34 }, &mut observation);
        for row in [0, 1, 40, 79] {
            let expected = ((35.0 + 2.0 * row as f64) * 0.9999) as f32;
            for col in [0, 17, 79] {
                assert_eq!(
                    observation[row * OBSERVATION_SIDE + col],
                    expected,
                    "row {row} col {col}"
                );
            }
        }
    }

    /// A 250-row screen (Amidar's and 15 other games') is cropped by row as numpy
    /// slices it: the reference's rows 34..194 give the same observation as on a
    /// 210-row screen with the same rows, and a crop running past row 210 (VideoPinball's
    /// 42..220) keeps the rows a taller screen has.
    #[test]
    fn tall_screens_are_cropped_by_row() {
        let (short, tall) = (row_numbered_screen_of(210), row_numbered_screen_of(250));
        let observe = |screen: &[u8], crop| {
            let mut observation = vec![0.0; OBSERVATION_SIDE * OBSERVATION_SIDE];
            preprocess(screen, crop, &mut observation);
            observation
        };
        let pong = Crop { crop1: 34, crop2: 34 };
        assert_eq!(observe(&tall, pong), observe(&short, pong));
        assert_eq!(preprocess_universe(&tall), preprocess_universe(&short));
        assert_eq!(preprocess_universe_max(&tall), preprocess_universe_max(&short));
        let pinball = Crop { crop1: 42, crop2: 60 };
        let last_row = |observation: &[f32]| observation[(OBSERVATION_SIDE - 1) * OBSERVATION_SIDE];
        // 178 rows into 80: the last output row averages rows 217.55..219.775 of the tall
        // screen, where the short one has only rows up to 209.
        assert!(
            last_row(&observe(&tall, pinball)) > 217.0,
            "{}",
            last_row(&observe(&tall, pinball))
        );
        assert!(last_row(&observe(&short, pinball)) < 210.0);
    }

    /// MsPacman keeps rows 2..170, 168 rows into 80, 2.1 per output row: row 0 weighs
    /// rows 2, 3, 4 by 1, 1, 0.1 (5.4 / 2.1 = 2.57 -> 3); row 1 weighs rows 4, 5, 6 by
    /// 0.9, 1, 0.2 (9.8 / 2.1 = 4.67 -> 5).
    #[test]
    fn preprocess_weights_mspacman_rows_by_area() {
        let mut observation = vec![0.0; OBSERVATION_SIDE * OBSERVATION_SIDE];
        preprocess(&row_numbered_screen(), Crop { crop1: 2, crop2: 10 }, &mut observation);
        assert_eq!(observation[0], (3.0 * 0.9999f64) as f32);
        assert_eq!(observation[OBSERVATION_SIDE + 5], (5.0 * 0.9999f64) as f32);
    }

    /// Halving rounds quarter sums the way OpenCV does, (sum + 2) >> 2: a block of
    /// 1, 2, 1, 2 (6/4 = 1.5) gives 2, and 2, 3, 2, 3 (2.5) gives 3, before gray.
    #[test]
    fn halving_rounds_like_opencv() {
        let pixel = |block: [u8; 4]| -> f32 {
            let row_len = 160 * 3;
            let mut region = vec![0u8; 160 * row_len];
            region[..3].fill(block[0]);
            region[3..6].fill(block[1]);
            region[row_len..row_len + 3].fill(block[2]);
            region[row_len + 3..row_len + 6].fill(block[3]);
            let mut observation = vec![0.0; OBSERVATION_SIDE * OBSERVATION_SIDE];
            halve_to_gray(&region, &mut observation);
            observation[0]
        };
        assert_eq!(pixel([1, 2, 1, 2]), to_gray([2; 3]));
        assert_eq!(pixel([2, 3, 2, 3]), to_gray([3; 3]));
        assert_eq!(pixel([0, 0, 0, 1]), 0.0);
        assert_eq!(pixel([0, 0, 1, 2]), to_gray([1; 3]));
    }

    /// Area weights for 3 -> 2: each output covers 1.5 inputs, the middle one split
    /// half and half, weights normalised by the cell size.
    #[test]
    fn area_weights_split_partly_covered_pixels() {
        let weights = area_weights(3, 2);
        let expected = [(0, 0, 1.0 / 1.5), (0, 1, 0.5 / 1.5), (1, 1, 0.5 / 1.5), (1, 2, 1.0 / 1.5)];
        assert_eq!(weights.len(), expected.len(), "{weights:?}");
        for (got, want) in weights.iter().zip(expected) {
            assert_eq!((got.0, got.1), (want.0, want.1));
            assert!((got.2 - want.2 as f32).abs() < 1e-6, "{weights:?}");
        }
        // A 3x1 row [0, 90, 180] shrinks to [(0 + 45) / 1.5, (45 + 180) / 1.5] = [30, 150].
        let row: Vec<u8> = [0u8, 90, 180].iter().flat_map(|&v| [v; 3]).collect();
        assert_eq!(resize_area(&row, 1, 3, 1, 2), vec![30, 30, 30, 150, 150, 150]);
    }

    /// The normaliser's first observation: bias correction makes the running estimates
    /// equal that observation's own mean and (population) standard deviation.
    #[test]
    fn normalizer_bias_corrects_its_first_estimate() {
        let mut normalizer = RunningNormalizer::default();
        let mut observation = vec![1.0, 3.0];
        normalizer.normalize(&mut observation);
        // mean 2, std 1: (1 - 2) / 1 and (3 - 2) / 1.
        assert!(
            (observation[0] + 1.0).abs() < 1e-6 && (observation[1] - 1.0).abs() < 1e-6,
            "{observation:?}"
        );
        // Second observation [5, 9] (mean 7, std 2): running mean
        // (0.0001 * 0.9999 * 2 + 0.0001 * 7) / (1 - 0.9999^2), likewise the std.
        let mut observation = vec![5.0, 9.0];
        normalizer.normalize(&mut observation);
        let correction = 1.0 - 0.9999f64.powi(2);
        let mean = (0.9999 * 0.0001 * 2.0 + 0.0001 * 7.0) / correction;
        let std = (0.9999 * 0.0001 * 1.0 + 0.0001 * 2.0) / correction;
        let expected = ((5.0 - mean) / (std + 1e-8)) as f32;
        assert!((observation[0] - expected).abs() < 1e-5, "{} != {expected}", observation[0]);
    }
}
