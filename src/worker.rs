//! One training thread: pull the shared weights, roll out `num_steps` agent steps,
//! backpropagate the A3C loss through the rollout, and push the gradients into the
//! shared model through the shared optimizer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tch::{nn, Device, Kind, Tensor};

use crate::agent;
use crate::env::rng::Rng;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::model::{ActorCritic, LstmState, ModelSpec};
use crate::rollout::{LossConfig, Rollout};
use crate::shared_optim::SharedOptimizer;
use crate::stop::Stop;

/// Non-finite updates in a row after which training stops: by then the shared model
/// itself has diverged and more updates will not bring it back.
pub const MAX_CONSECUTIVE_SKIPS: u64 = 100;

/// Progress counters, summed over all workers. Workers add to them; the monitor loop
/// reads them for status lines, budgets and checkpoints.
#[derive(Default)]
pub struct Counters {
    pub agent_steps: AtomicU64,
    pub env_frames: AtomicU64,
    pub updates: AtomicU64,
    /// Updates skipped for a non-finite loss or gradient.
    pub skipped_updates: AtomicU64,
    /// Skipped updates since the last good one, over all workers.
    pub consecutive_skips: AtomicU64,
    /// Loss terms of the latest update, as f64 bits, for status lines.
    pub last_policy_loss: AtomicU64,
    pub last_value_loss: AtomicU64,
    pub last_entropy: AtomicU64,
}

/// Everything one worker owns.
pub struct Worker {
    pub rank: usize,
    pub env: Box<dyn Env>,
    pub spec: ModelSpec,
    /// Handles on the shared (CPU) parameters, in the model's parameter order.
    pub shared_parameters: Vec<Tensor>,
    pub optimizer: SharedOptimizer,
    pub num_steps: u32,
    pub max_episode_length: u32,
    pub loss: LossConfig,
    pub seed: u64,
    pub counters: Arc<Counters>,
    pub stop: Stop,
}

impl Worker {
    /// Trains until a stop is requested; an error ends this worker (and, through the
    /// caller, the run).
    pub fn run(mut self) -> Result<()> {
        // One intra-op thread per worker: the workers are the parallelism, and more
        // threads each would only contend for the same cores.
        tch::set_num_threads(1);
        tch::manual_seed(self.seed as i64);
        let device = Device::Cpu;
        let vs = nn::VarStore::new(device);
        let model = ActorCritic::new(&vs, &self.spec);
        let local_parameters: Vec<Tensor> =
            model.parameters().iter().map(|(_, tensor)| tensor.shallow_clone()).collect();
        // A copy, so its bounds stay borrowable while the environment is stepped.
        let action_space = self.env.action_space().clone();
        let mut batch_shape = vec![1i64];
        batch_shape.extend_from_slice(self.env.observation_shape());
        let mut rng = Rng::new(self.seed ^ 0x776f_726b);
        let mut observation = self.env.reset(None);
        let mut frames_seen = self.env.env_frames();
        let mut state = LstmState::zeros(&self.spec, device);
        let mut episode_length = 0u32;
        let mut done = false;

        while !self.stop.requested() {
            pull(&self.shared_parameters, &local_parameters);
            state = if done { LstmState::zeros(&self.spec, device) } else { state.detached() };
            done = false;
            let mut rollout = Rollout::default();
            for _ in 0..self.num_steps {
                let input = Tensor::from_slice(&observation).view(batch_shape.as_slice());
                let output = model.forward(&input, &state);
                let sampled = agent::sample(&output.policy, &mut rng, action_space.bounds());
                let step = self.env.step(&sampled.action);
                episode_length += 1;
                done = step.done() || episode_length >= self.max_episode_length;
                rollout.values.push(output.value);
                rollout.log_probs.push(sampled.log_prob);
                rollout.entropies.push(sampled.entropy);
                // The reference clips rewards for learning only; scores stay raw.
                rollout.rewards.push(f64::from(step.reward).clamp(-1.0, 1.0));
                state = output.state;
                observation = step.observation;
                self.counters.agent_steps.fetch_add(1, Ordering::Relaxed);
                let frames = self.env.env_frames();
                self.counters.env_frames.fetch_add(frames - frames_seen, Ordering::Relaxed);
                frames_seen = frames;
                if done {
                    break;
                }
            }
            let bootstrap = if done {
                episode_length = 0;
                observation = self.env.reset(None);
                0.0
            } else {
                let input = Tensor::from_slice(&observation).view(batch_shape.as_slice());
                tch::no_grad(|| model.forward(&input, &state).value.double_value(&[0, 0]))
            };
            let loss = rollout.loss(bootstrap, &self.loss);
            for parameter in &local_parameters {
                let mut parameter = parameter.shallow_clone();
                parameter.zero_grad();
            }
            loss.total.backward();
            let gradients: Vec<Tensor> =
                local_parameters.iter().map(|parameter| parameter.grad()).collect();
            if is_finite(&loss.total, &gradients) {
                self.optimizer.step(&self.shared_parameters, &gradients);
                self.counters.updates.fetch_add(1, Ordering::Relaxed);
                self.counters.consecutive_skips.store(0, Ordering::Relaxed);
                let steps = rollout.len() as f64;
                for (counter, term) in [
                    (&self.counters.last_policy_loss, &loss.policy),
                    (&self.counters.last_value_loss, &loss.value),
                    (&self.counters.last_entropy, &loss.entropy),
                ] {
                    counter.store((term.double_value(&[]) / steps).to_bits(), Ordering::Relaxed);
                }
            } else {
                self.counters.skipped_updates.fetch_add(1, Ordering::Relaxed);
                let in_a_row = self.counters.consecutive_skips.fetch_add(1, Ordering::Relaxed) + 1;
                if in_a_row >= MAX_CONSECUTIVE_SKIPS {
                    return Err(Error::Training(format!(
                        "{in_a_row} updates in a row had a non-finite loss or gradient, so training stopped \
                         (the last good checkpoint is kept); lower --lr or check the environment's rewards"
                    )));
                }
                // A diverged rollout leaves a state that may itself be non-finite.
                done = true;
            }
        }
        Ok(())
    }
}

/// Copies the shared weights into the local model, so the whole rollout and its
/// gradient see one consistent set of weights even while other workers update them.
pub fn pull(shared: &[Tensor], local: &[Tensor]) {
    tch::no_grad(|| {
        for (shared, local) in shared.iter().zip(local) {
            let mut local = local.shallow_clone();
            local.copy_(shared);
        }
    });
}

/// Whether the loss and every gradient are finite: one reduction per tensor, read
/// back once.
fn is_finite(loss: &Tensor, gradients: &[Tensor]) -> bool {
    let mut total = loss.detach().to_kind(Kind::Double).view([1]);
    for gradient in gradients {
        total += gradient.to_kind(Kind::Double).square().sum(Kind::Double).view([1]);
    }
    total.double_value(&[0]).is_finite()
}
