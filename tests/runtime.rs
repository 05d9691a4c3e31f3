//! The native runtimes a3g stands on: libtorch and the ALE emulator.

use std::process::Command;

use a3g::env::atari::{BundledRom, Emulator, EmulatorConfig};
use tch::{Kind, Tensor};

/// libtorch computes a matrix product and the gradient of a loss through it:
/// for y = sum((W x)^2), dy/dW = 2 (W x) x^T.
#[test]
fn libtorch_runs_forward_and_backward() {
    let weight = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).view([2, 2]).set_requires_grad(true);
    let input = Tensor::from_slice(&[1.0f32, -1.0]).view([2, 1]);
    let output = weight.matmul(&input); // [[-1], [-1]]
    let loss = output.square().sum(Kind::Float);
    assert_eq!(loss.double_value(&[]), 2.0);
    loss.backward();
    let gradient: Vec<f32> = weight.grad().flatten(0, -1).try_into().unwrap();
    assert_eq!(gradient, vec![-2.0, 2.0, -2.0, 2.0]);
}

/// Two Pong emulators with the same seed and sticky actions play the same frames:
/// the seed reaches ALE (a clock seed would make the sticky actions diverge).
#[test]
fn ale_same_seed_same_game() {
    let play = |seed| {
        let config = EmulatorConfig { seed, repeat_action_probability: 0.25 };
        let mut emulator = Emulator::new(BundledRom::Pong, config).unwrap();
        let actions = emulator.minimal_actions().to_vec();
        let mut rgb = vec![0u8; 210 * 160 * 3];
        let mut trace = Vec::new();
        for frame in 0..600 {
            let reward = emulator.act(actions[(frame / 7) % actions.len()]);
            emulator.screen_rgb(&mut rgb);
            let checksum = rgb.iter().enumerate().map(|(i, &b)| i as u64 * b as u64).sum::<u64>();
            trace.push((reward, checksum));
        }
        trace
    };
    assert_eq!(play(7), play(7));
}

/// ALE prints a banner and settings-file warnings on creation unless silenced; running
/// the emulator test in a child process must leave its output free of them.
#[test]
fn ale_is_silent() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["runtime::ale_same_seed_same_game", "--exact", "--nocapture", "--test-threads=1"])
        .output()
        .expect("rerun this test binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "child failed: {stdout}{stderr}");
    assert!(stdout.contains("1 passed"), "the child ran no emulator test: {stdout}");
    for noise in ["A.L.E", "Arcade Learning Environment", "Warning", "Game console created"] {
        assert!(
            !stdout.contains(noise) && !stderr.contains(noise),
            "ALE printed {noise:?}: {stdout}{stderr}"
        );
    }
}
