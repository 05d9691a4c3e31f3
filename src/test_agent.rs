//! The test agent: a thread like the reference's test process, playing whole games
//! greedily with the latest shared weights and reporting each one.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam::channel::Sender;
use tch::{nn, Device, Tensor};

use crate::env::Env;
use crate::error::Result;
use crate::model::{ActorCritic, LstmState, ModelSpec};
use crate::policy;
use crate::shared::{self, SharedModel};
use crate::stop::Stop;

/// One finished test game.
#[derive(Debug)]
pub struct EpisodeStats {
    /// Raw game score (unclipped, summed over all lives).
    pub reward: f64,
    /// Agent steps.
    pub length: u64,
    /// When the game ended, since training started.
    pub finished_at: std::time::Duration,
    /// Copies of the weights that played it, in the model's parameter order: what a
    /// checkpoint saved for this game holds, as in the reference, whose test agent
    /// saves its own model rather than the shared one that has moved on since.
    pub weights: Vec<Tensor>,
    /// The [`PinnedWeights`] pin it was played with, if one was set.
    pub pin: Option<u64>,
}

/// Weights the monitor asks the test agent to keep playing instead of the latest,
/// to confirm what they score before a run stops on them (`--confirm-games`).
#[derive(Clone, Default)]
pub struct PinnedWeights {
    state: Arc<Mutex<PinState>>,
}

#[derive(Default)]
struct PinState {
    /// Pins given so far: numbers are never reused, so a game started under an
    /// earlier pin is not counted for a later one.
    pins: u64,
    /// The current pin's number and its weights on the CPU.
    current: Option<(u64, Vec<Tensor>)>,
}

impl PinnedWeights {
    fn state(&self) -> std::sync::MutexGuard<'_, PinState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Asks for the coming games to be played with `weights`; returns the pin's number.
    pub fn pin(&self, weights: Vec<Tensor>) -> u64 {
        let mut state = self.state();
        state.pins += 1;
        state.current = Some((state.pins, weights));
        state.pins
    }

    /// Lets the coming games be played with the latest weights again.
    pub fn release(&self) {
        self.state().current = None;
    }

    /// Copies the pinned weights into `local` and returns the pin's number, if a pin
    /// is set.
    fn copy_into(&self, local: &[Tensor]) -> Option<u64> {
        let state = self.state();
        let (number, weights) = state.current.as_ref()?;
        shared::copy_weights(weights, local);
        Some(*number)
    }
}

/// Plays one greedy game with `model` (on `device`), as the reference's test agent
/// does: a lost life resets the environment and the LSTM state and play goes on,
/// so the score and length are the whole game's. `after_each_step` sees the
/// environment after the reset and after every step (to record it). Returns `None`
/// if a stop came first.
pub fn play_greedy_game(
    env: &mut dyn Env,
    model: &ActorCritic,
    device: Device,
    max_episode_length: u32,
    stop: Option<&Stop>,
    mut after_each_step: impl FnMut(&mut dyn Env) -> Result<()>,
) -> Result<Option<(f64, u64)>> {
    let spec = model.spec().clone();
    // A copy, so its bounds stay borrowable while the environment is stepped.
    let action_space = env.action_space().clone();
    let mut batch_shape = vec![1i64];
    batch_shape.extend_from_slice(env.observation_shape());
    let mut observation = env.reset(None)?;
    after_each_step(env)?;
    let mut state = LstmState::zeros(&spec, device);
    let (mut reward, mut length) = (0.0, 0u64);
    tch::no_grad(|| loop {
        if stop.is_some_and(|stop| length % 64 == 0 && stop.requested()) {
            return Ok(None);
        }
        let input = crate::device::upload(&observation, &batch_shape, device);
        let output = model.forward(&input, &state);
        let step = env.step(&policy::greedy(&output.policy, action_space.bounds()))?;
        reward += f64::from(step.reward);
        length += 1;
        state = output.state;
        let game_over = step.game_over();
        observation = step.observation;
        if step.life_lost {
            observation = env.reset(None)?;
            state = LstmState::zeros(&spec, device);
        }
        after_each_step(env)?;
        if game_over || length >= u64::from(max_episode_length) {
            return Ok(Some((reward, length)));
        }
    })
}

/// How long to rest after a game of `played` to keep to `core_share` of a core: as long
/// as the machine can count, for a share so small that it never plays again.
fn rest_after(played: Duration, core_share: f64) -> Duration {
    Duration::try_from_secs_f64(played.as_secs_f64() * (1.0 / core_share - 1.0))
        .unwrap_or(Duration::MAX)
}

/// Sleeps for `duration`, waking early for a stop.
fn rest(stop: &Stop, duration: Duration) {
    let started = Instant::now();
    while !stop.requested() {
        let left = duration.saturating_sub(started.elapsed());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// The test agent's thread: what it plays with.
pub struct TestAgent {
    pub env: Box<dyn Env>,
    pub spec: ModelSpec,
    /// Where its model runs; the weights it reports are copies on the CPU.
    pub device: Device,
    /// The shared model, pulled before every game.
    pub shared: SharedModel,
    pub max_episode_length: u32,
    /// Share of one core it may take, in (0, 1]: it rests between games to keep to it.
    pub core_share: f64,
    /// Weights to play instead of the latest, while the monitor confirms them.
    pub pinned: PinnedWeights,
}

impl TestAgent {
    /// Plays test games until a stop is requested (or the monitor is gone), sending
    /// each result to the monitor; a game that cannot be played is its error.
    pub fn run(self, stop: Stop, started: Instant, results: Sender<EpisodeStats>) -> Result<()> {
        let TestAgent { mut env, spec, device, shared, max_episode_length, core_share, pinned } =
            self;
        tch::set_num_threads(1);
        let vs = nn::VarStore::new(device);
        let model = ActorCritic::new(&vs, &spec);
        let local: Vec<Tensor> =
            model.parameters().iter().map(|(_, tensor)| tensor.shallow_clone()).collect();
        while !stop.requested() {
            let game_started = Instant::now();
            let pin = pinned.copy_into(&local);
            if pin.is_none() {
                shared.pull(&local);
            }
            let played = play_greedy_game(
                env.as_mut(),
                &model,
                device,
                max_episode_length,
                Some(&stop),
                |_| Ok(()),
            );
            let Some((reward, length)) = played? else { break };
            // Copies, even on the CPU: the local model changes with the next pull.
            let weights = tch::no_grad(|| {
                local
                    .iter()
                    .map(|tensor| {
                        let host = Tensor::empty(tensor.size(), (tensor.kind(), Device::Cpu));
                        crate::device::copy_to_host(tensor, &host);
                        host
                    })
                    .collect()
            });
            let game =
                EpisodeStats { reward, length, finished_at: started.elapsed(), weights, pin };
            if results.send(game).is_err() {
                break;
            }
            rest(&stop, rest_after(game_started.elapsed(), core_share));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A share of a core rests in proportion; one too small to express in seconds
    /// rests "for ever" rather than panicking the test agent (`--test-share 1e-300`).
    #[test]
    fn rest_keeps_to_the_share_without_overflowing() {
        let game = Duration::from_secs(2);
        assert_eq!(rest_after(game, 1.0), Duration::ZERO);
        assert_eq!(rest_after(game, 0.25), Duration::from_secs(6));
        assert_eq!(rest_after(game, 1e-300), Duration::MAX);
        let stop = Stop::default();
        stop.request(crate::stop::StopReason::Signal);
        rest(&stop, Duration::MAX);
    }

    /// Pins are numbered in order; a pinned game copies the pinned weights, and after
    /// a release the latest weights are played again.
    #[test]
    fn pinned_weights_replace_the_latest_until_released() {
        let pinned = PinnedWeights::default();
        let local = [Tensor::zeros([2], (tch::Kind::Float, Device::Cpu))];
        assert_eq!(pinned.copy_into(&local), None);
        assert_eq!(pinned.pin(vec![Tensor::from_slice(&[1.0f32, 2.0])]), 1);
        assert_eq!(pinned.pin(vec![Tensor::from_slice(&[3.0f32, 4.0])]), 2);
        assert_eq!(pinned.copy_into(&local), Some(2));
        assert_eq!(Vec::<f32>::try_from(&local[0]).unwrap(), [3.0, 4.0]);
        pinned.release();
        assert_eq!(pinned.copy_into(&local), None);
        assert_eq!(pinned.pin(vec![Tensor::from_slice(&[5.0f32, 6.0])]), 3);
    }
}
