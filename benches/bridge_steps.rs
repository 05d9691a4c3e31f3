//! Benchmark: what a step of an environment from outside a3g costs through the bridge
//! (a Python process per environment, spoken to over pipes), against Gymnasium's own
//! AsyncVectorEnv stepping the same environment in a subprocess (benches/bridge_steps.py),
//! and against a3g's built-in CartPole-v1. Random actions, one environment; the rounds
//! alternate, so drifting CPU speed falls on all three alike.
//!
//! Run: `benches/bridge_steps.sh` (after the set-up of `./scripts/test`); the figures go
//! to docs/benchmarks.md.

use std::process::Command;
use std::time::{Duration, Instant};

use a3g::env::{self, Action, Env, EnvOptions};

/// How long each measurement runs.
const MEASURE: Duration = Duration::from_secs(4);

/// Microseconds per step of `env`, random actions, resetting at each episode's end.
fn micros_per_step(env: &mut dyn Env) -> f64 {
    let mut action = 0usize;
    env.reset(Some(1)).expect("reset");
    let start = Instant::now();
    let mut steps = 0u64;
    while start.elapsed() < MEASURE {
        for _ in 0..100 {
            // A fixed mix of both actions: the rate, not the policy, is measured.
            action = (action * 7 + 3) % 5;
            let step = env.step(&Action::Discrete(action % 2)).expect("step");
            if step.done() {
                env.reset(None).expect("reset");
            }
        }
        steps += 100;
    }
    start.elapsed().as_secs_f64() * 1e6 / steps as f64
}

/// Microseconds per step of Gymnasium's AsyncVectorEnv with one CartPole-v1, from
/// benches/bridge_steps.py.
fn async_vector_env() -> f64 {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/bridge_steps.py");
    let output = Command::new("python3")
        .args([script, &MEASURE.as_secs_f64().to_string()])
        .output()
        .expect("run python3");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().parse().expect("microseconds")
}

fn main() {
    let options = EnvOptions::default();
    let mut built_in = env::make("CartPole-v1", &options).expect("CartPole-v1");
    let mut bridged = env::make("gym:CartPole-v1", &options)
        .expect("gym:CartPole-v1: python3 needs gymnasium (PYTHONPATH=.deps/gymnasium)");
    println!("microseconds per step, random actions, one environment:");
    println!("round  a3g built-in  bridge  AsyncVectorEnv  bridge/AsyncVectorEnv");
    for round in 1..=3 {
        let built_in = micros_per_step(built_in.as_mut());
        let bridge = micros_per_step(bridged.as_mut());
        let vector = async_vector_env();
        println!(
            "{round:>5}  {built_in:>12.2}  {bridge:>6.2}  {vector:>14.2}  {:>21.2}",
            bridge / vector
        );
    }
}
