//! Benchmark: agent steps/s of PongDeterministic-v4 through the full wrapper stack,
//! against the raw emulator's frames/s measured in the same run on the same core.
//! Then the per-step screen transforms alone, the universe network's two included.
//!
//! Run: `taskset -c 0 cargo bench --bench env_steps` (after the set-up of
//! `./scripts/test`); the figures go to docs/benchmarks.md.

use std::time::{Duration, Instant};

use a3g::env::atari::crop::Crop;
use a3g::env::atari::wrappers::{
    preprocess, preprocess_universe, preprocess_universe_max, RunningNormalizer,
};
use a3g::env::atari::{BundledRom, Emulator, EmulatorConfig};
use a3g::env::{self, Action, EnvOptions};

/// How long each measurement runs.
const MEASURE: Duration = Duration::from_secs(5);

/// Runs `body` repeatedly for `MEASURE`; returns calls per second.
fn rate(mut body: impl FnMut()) -> f64 {
    for _ in 0..200 {
        body();
    }
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < MEASURE {
        for _ in 0..100 {
            body();
        }
        calls += 100;
    }
    calls as f64 / start.elapsed().as_secs_f64()
}

/// A Pong emulator configured as PongDeterministic-v4 configures it.
fn pong() -> Emulator {
    Emulator::new(BundledRom::Pong, EmulatorConfig { seed: 1, repeat_action_probability: 0.0 })
        .expect("load Pong")
}

fn main() {
    // The agent cycles through the actions so the game keeps moving and scoring.
    let mut emulator = pong();
    let mut frame = 0usize;
    let act_only = rate(|| {
        frame += 1;
        emulator.act([0, 3, 4][frame / 30 % 3]);
        if emulator.game_over() {
            emulator.reset_game();
        }
    });

    let mut emulator = pong();
    let mut screen = vec![0u8; 210 * 160 * 3];
    let with_screen = rate(|| {
        frame += 1;
        emulator.act([0, 3, 4][frame / 30 % 3]);
        emulator.screen_rgb(&mut screen);
        if emulator.game_over() {
            emulator.reset_game();
        }
    });

    let mut stack = env::make("PongDeterministic-v4", &EnvOptions::default())
        .expect("make PongDeterministic-v4");
    stack.reset(None).unwrap();
    let mut step = 0usize;
    let agent_steps = rate(|| {
        step += 1;
        if stack.step(&Action::Discrete([0, 2, 3][step / 8 % 3])).unwrap().done() {
            stack.reset(None).unwrap();
        }
    });

    // The two per-step transforms alone, on a real Pong screen.
    let mut observation = vec![0.0f32; 80 * 80];
    let crop = Crop { crop1: 34, crop2: 34 };
    let preprocess_rate = rate(|| preprocess(&screen, crop, &mut observation));
    let mut normalizer = RunningNormalizer::default();
    let normalize_rate = rate(|| normalizer.normalize(&mut observation));
    // The universe network's two 42x42 screens (`--model universe`, `universe-max`).
    let universe_rate = rate(|| drop(std::hint::black_box(preprocess_universe(&screen))));
    let universe_max_rate = rate(|| drop(std::hint::black_box(preprocess_universe_max(&screen))));

    // What the emulator itself must do per agent step: 4 frames and one screen fetch.
    let screen_seconds = 1.0 / with_screen - 1.0 / act_only;
    let emulator_seconds = 4.0 / act_only + screen_seconds;
    let step_seconds = 1.0 / agent_steps;
    println!("raw emulator, act only:            {act_only:>9.0} frames/s");
    println!("raw emulator, screen every frame:  {with_screen:>9.0} frames/s");
    println!("PongDeterministic-v4, full stack:  {agent_steps:>9.0} agent steps/s");
    println!(
        "per agent step: {:.1} us total, {:.1} us emulator (4 frames + 1 screen), {:.1} us wrappers ({:.1}% on top)",
        step_seconds * 1e6,
        emulator_seconds * 1e6,
        (step_seconds - emulator_seconds) * 1e6,
        100.0 * (step_seconds - emulator_seconds) / emulator_seconds
    );
    println!(
        "of which preprocess (crop, resize, gray) {:.1} us, normalize {:.1} us",
        1e6 / preprocess_rate,
        1e6 / normalize_rate
    );
    println!(
        "universe screens instead: bilinear 42x42 {:.1} us, block maximum 42x42 {:.1} us",
        1e6 / universe_rate,
        1e6 / universe_max_rate
    );
}
