//! Observation scaling for the MLP networks of classic control and Box2D
//! (`--normalize-obs`): each element of an observation less its mean, over its
//! deviation, clipped to ±[`INPUT_NORM_CLIP`].
//!
//! BipedalWalker's balance lives in its smallest inputs (the hull's angle is a few
//! hundredths of a radian, its angular speed a few thousandths), which an unscaled
//! network barely sees; a3c_continuous normalizes them, and learns the walker with it.
//! Here mean and deviation are measured once, before training, over random-action
//! play from a fixed seed, and kept with the model in its sidecar: the weights are
//! learned against one scaling, so statistics that drifted while training (or
//! differed between Hogwild workers) would move every input under the network, and a
//! checkpoint must play as it was trained. The fixed seed makes every rank of a
//! distributed run, and every resume, measure the same numbers.

use serde::{Deserialize, Serialize};
use tch::{Device, Tensor};

use crate::env::rng::Rng;
use crate::env::{Action, ActionSpace, Env};
use crate::error::Result;

/// Bound on a scaled input: a state far outside random play (a walker at full speed)
/// stays within the range the network was initialised for.
pub const INPUT_NORM_CLIP: f64 = 10.0;

/// Agent steps of random play the statistics are measured over: about two seconds of
/// BipedalWalker on one core, and dozens of its episodes.
pub const MEASURE_STEPS: usize = 20_000;

/// The seed of the environment and of the random actions that measure.
pub const MEASURE_SEED: u64 = 0;

/// Smallest deviation an element is divided by: an element that random play barely
/// moves (a contact flag that seldom fires) is not blown up a thousandfold.
pub const MIN_DEVIATION: f32 = 1e-2;

/// Per-element mean and deviation of a flat observation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputNorm {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
}

impl InputNorm {
    /// Plays `steps` agent steps of uniformly random actions in `env` (reset with
    /// [`MEASURE_SEED`], then onward), and takes the mean and deviation of every
    /// observation seen, the resets' included.
    pub fn measure(env: &mut dyn Env, steps: usize) -> Result<InputNorm> {
        let mut rng = Rng::new(MEASURE_SEED);
        let mut observation = env.reset(Some(MEASURE_SEED))?;
        let mut count = 0.0f64;
        let mut mean = vec![0.0f64; observation.len()];
        let mut squares = vec![0.0f64; observation.len()];
        for _ in 0..steps {
            // Welford's update: exact enough in f64 over any number of steps.
            count += 1.0;
            for ((mean, squares), &value) in mean.iter_mut().zip(&mut squares).zip(&observation) {
                let delta = f64::from(value) - *mean;
                *mean += delta / count;
                *squares += delta * (f64::from(value) - *mean);
            }
            let step = env.step(&random_action(env.action_space(), &mut rng))?;
            observation = if step.done() { env.reset(None)? } else { step.observation };
        }
        let std =
            squares.iter().map(|&squares| ((squares / count).sqrt() as f32).max(MIN_DEVIATION));
        Ok(InputNorm { mean: mean.iter().map(|&mean| mean as f32).collect(), std: std.collect() })
    }

    /// What is wrong with it as the scaling of `inputs` elements (read from a sidecar,
    /// which may be damaged), if anything.
    pub fn problem(&self, inputs: i64) -> Option<String> {
        let length = usize::try_from(inputs).ok()?;
        if self.mean.len() != length || self.std.len() != length {
            return Some(format!(
                "its input scaling has {} means and {} deviations for {inputs} inputs",
                self.mean.len(),
                self.std.len()
            ));
        }
        if self.mean.iter().any(|mean| !mean.is_finite()) {
            return Some("its input scaling has a mean that is not finite".into());
        }
        if self.std.iter().any(|std| !std.is_finite() || *std < MIN_DEVIATION) {
            return Some(format!(
                "its input scaling has a deviation below {MIN_DEVIATION} or not finite"
            ));
        }
        None
    }

    /// The means as a `[1, inputs]` tensor on `device`.
    pub fn mean_tensor(&self, device: Device) -> Tensor {
        Tensor::from_slice(&self.mean).view([1, -1]).to(device)
    }

    /// The deviations as a `[1, inputs]` tensor on `device`.
    pub fn std_tensor(&self, device: Device) -> Tensor {
        Tensor::from_slice(&self.std).view([1, -1]).to(device)
    }
}

fn random_action(space: &ActionSpace, rng: &mut Rng) -> Action {
    match space {
        ActionSpace::Discrete { n } => Action::Discrete(rng.integer(0, *n as u32 - 1) as usize),
        ActionSpace::Continuous { low, high } => Action::Continuous(
            low.iter()
                .zip(high)
                .map(|(&low, &high)| rng.uniform(f64::from(low), f64::from(high)) as f32)
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{self, EnvOptions};

    fn measure(id: &str, steps: usize) -> InputNorm {
        let mut env = env::make(id, &EnvOptions::default()).expect("a known id");
        InputNorm::measure(env.as_mut(), steps).unwrap()
    }

    /// The walker's statistics: the hull angle and angular speed are small and get
    /// deviations to match, the lidar readings lie in [0, 1], and nothing is below
    /// the floor or not finite; measuring again gives the same numbers.
    #[test]
    fn walker_statistics_scale_its_small_inputs() {
        let norm = measure("BipedalWalker-v3", 3_000);
        assert_eq!(norm.problem(24), None);
        assert!(norm.std[0] < 0.5 && norm.std[1] < 0.2, "hull {:?}", &norm.std[..2]);
        assert!(norm.mean[14..].iter().all(|mean| (0.0..=1.0).contains(mean)), "{:?}", norm.mean);
        assert!(norm.std.iter().any(|&std| std > MIN_DEVIATION * 10.0), "{:?}", norm.std);
        assert_eq!(norm, measure("BipedalWalker-v3", 3_000));
    }

    /// CartPole's observations average near 0 under random play (its resets lie within
    /// ±0.05 and episodes are short), with deviations of the size its states take.
    #[test]
    fn cartpole_statistics_match_its_states() {
        let norm = measure("CartPole-v1", 5_000);
        assert!(norm.mean.iter().all(|mean| mean.abs() < 0.1), "{:?}", norm.mean);
        assert!(norm.std.iter().all(|std| (0.01..2.0).contains(std)), "{:?}", norm.std);
    }

    /// A damaged sidecar's scaling is named: wrong lengths, a NaN, a zero deviation.
    #[test]
    fn damaged_scaling_is_refused() {
        let good = InputNorm { mean: vec![0.0, 1.0], std: vec![1.0, 0.5] };
        assert_eq!(good.problem(2), None);
        assert!(good.problem(3).unwrap().contains("2 means and 2 deviations for 3 inputs"));
        let nan = InputNorm { mean: vec![f32::NAN, 1.0], ..good.clone() };
        assert!(nan.problem(2).unwrap().contains("not finite"));
        let zero = InputNorm { std: vec![0.0, 1.0], ..good };
        assert!(zero.problem(2).unwrap().contains("deviation below"));
    }
}
