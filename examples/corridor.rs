//! An environment written in Rust, trained by a3g used as a library: register it under
//! an id, then run `a3g train` and `a3g eval` on that id as on a built-in one.
//!
//! Run: `cargo run --release --example corridor` (trains until the test agent's
//! 100-game mean is 0.95, then evaluates the saved model); extra arguments go to
//! `a3g train`, for example `-- --max-steps 50000`.

use a3g::cli::Cli;
use a3g::env::{self, Action, ActionSpace, Env, EnvOptions, Frame, Step};
use a3g::error::Result;
use clap::Parser;

/// A corridor of `LENGTH` cells with a goal at one end, drawn afresh each episode: the
/// agent starts in the middle, walks left or right, and scores 1 for reaching the goal,
/// 0 for the other end or for running out of steps. It sees its position (from -1 to 1)
/// and which end the goal is at (-1 or 1), so always walking one way scores 0.5.
struct Corridor {
    position: i32,
    goal_right: bool,
    /// The episodes' random stream (a 64-bit LCG), seeded per worker.
    random: u64,
    steps: u32,
    frames: u64,
    observation_shape: Vec<i64>,
    action_space: ActionSpace,
}

const LENGTH: i32 = 9;
const STEP_LIMIT: u32 = 50;

impl Corridor {
    fn new(seed: u64) -> Self {
        Corridor {
            position: LENGTH / 2,
            goal_right: true,
            random: seed,
            steps: 0,
            frames: 0,
            observation_shape: vec![2],
            action_space: ActionSpace::Discrete { n: 2 },
        }
    }

    fn observation(&self) -> Vec<f32> {
        let side = if self.goal_right { 1.0 } else { -1.0 };
        vec![2.0 * self.position as f32 / (LENGTH - 1) as f32 - 1.0, side]
    }
}

impl Env for Corridor {
    fn id(&self) -> &str {
        "Corridor-v0"
    }

    fn action_space(&self) -> &ActionSpace {
        &self.action_space
    }

    fn observation_shape(&self) -> &[i64] {
        &self.observation_shape
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>> {
        if let Some(seed) = seed {
            self.random = seed;
        }
        self.random =
            self.random.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.goal_right = self.random >> 63 == 1;
        self.position = LENGTH / 2;
        self.steps = 0;
        Ok(self.observation())
    }

    fn step(&mut self, action: &Action) -> Result<Step> {
        self.position += if *action == Action::Discrete(1) { 1 } else { -1 };
        self.steps += 1;
        self.frames += 1;
        let (left, right) = (self.position == 0, self.position == LENGTH - 1);
        let reached = if self.goal_right { right } else { left };
        Ok(Step {
            observation: self.observation(),
            reward: if reached { 1.0 } else { 0.0 },
            terminated: left || right,
            truncated: self.steps >= STEP_LIMIT,
            lives: 0,
            life_lost: false,
        })
    }

    fn env_frames(&self) -> u64 {
        self.frames
    }

    fn render(&mut self) -> Result<Frame> {
        let goal = if self.goal_right { LENGTH - 1 } else { 0 };
        let pixels = (0..LENGTH)
            .map(|cell| if cell == self.position { 1 } else { 2 * u8::from(cell == goal) })
            .collect();
        let palette = vec![[0, 0, 0], [255, 255, 255], [0, 160, 0]];
        Ok(Frame { width: LENGTH as u16, height: 1, palette, pixels })
    }

    fn step_seconds(&self) -> f64 {
        0.1
    }
}

/// Registers the corridor (once per process), then runs `a3g` with `arguments`.
fn a3g(arguments: &[&str]) -> Result<()> {
    static REGISTER: std::sync::Once = std::sync::Once::new();
    REGISTER.call_once(|| {
        let made: fn(&EnvOptions) -> Result<Box<dyn Env>> =
            |options| Ok(Box::new(Corridor::new(options.seed)));
        env::register("Corridor-v0", made).expect("Corridor-v0 is not a built-in id");
    });
    a3g::run(Cli::parse_from([&["a3g"][..], arguments].concat()))
}

/// Trains the corridor into `dir` and evaluates what it saved over 20 games.
fn train_and_evaluate(dir: &str, extra: &[&str]) -> Result<()> {
    let models = format!("{dir}/models");
    let logs = format!("{dir}/logs");
    let train = [
        "train",
        "--env",
        "Corridor-v0",
        "--workers",
        "2",
        "--hidden-size",
        "16",
        "--lr",
        "1e-3",
        "--stop-at-mean",
        "0.95",
        "--max-steps",
        "200000",
        "--save-model-dir",
        &models,
        "--log-dir",
        &logs,
    ];
    a3g(&[&train[..], extra].concat())?;
    let eval = [
        "eval",
        "--env",
        "Corridor-v0",
        "--num-episodes",
        "20",
        "--load-model-dir",
        &models,
        "--log-dir",
        &logs,
    ];
    a3g(&eval)
}

fn main() {
    let extra: Vec<String> = std::env::args().skip(1).collect();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    if let Err(err) = train_and_evaluate("corridor-run", &extra) {
        eprintln!("error: {}", err.report());
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The corridor, registered from Rust, trains to a 100-game mean of 0.95 (walking
    /// one way scores about 0.5: the agent must read which end the goal is at) and is
    /// saved, and evaluated under its id at 0.95 or more; a built-in id cannot be
    /// registered over.
    #[test]
    fn a_rust_environment_trains_through_the_library() {
        let dir = std::env::temp_dir().join(format!("a3g-example-corridor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        train_and_evaluate(dir.to_str().unwrap(), &["--status-interval", "60"]).unwrap();
        assert!(dir.join("models/Corridor-v0.safetensors").is_file());
        let log = std::fs::read_to_string(dir.join("logs/Corridor-v0_mon_log")).unwrap();
        let summary = log.lines().last().expect("the evaluation's summary");
        let mean: f64 = summary
            .split("reward mean ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|mean| mean.parse().ok())
            .unwrap_or_else(|| panic!("no mean in {summary:?}"));
        assert!(mean >= 0.95, "{summary}");
        let _ = std::fs::remove_dir_all(&dir);
        let built_in: fn(&EnvOptions) -> Result<Box<dyn Env>> = |_| Ok(Box::new(Corridor::new(1)));
        assert!(env::register("CartPole-v1", built_in).is_err());
    }
}
