//! Training workers. A worker is what the reference runs as one process: its own
//! environment, LSTM state, random stream and rollout length, trained by pulling the
//! shared weights, rolling out `num_steps` agent steps, backpropagating the A3C loss
//! and pushing the gradients into the shared model through the shared optimizer.
//!
//! Workers are not threads. A rollout's autograd graph holds the activations of every
//! step (about 2 MB per Atari screen), and 32 threads would each be mid-rollout at
//! once, holding 32 graphs, while glibc keeps a high-water mark in each thread's arena.
//! Instead a few training threads, about one per core, take the workers from a queue in
//! turn, one rollout each, so only that many graphs exist and only that many threads
//! allocate them. The reference pulls the shared weights into its local model before
//! every rollout, so the local model carries nothing from one rollout to the next and a
//! thread's one local model serves whichever worker it trains. Every worker's own
//! experience is what it would have been; a worker waiting in the queue is one that
//! would only have been waiting for a core.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};
use tch::{nn, Device, Kind, Tensor};

use crate::agent;
use crate::env::rng::Rng;
use crate::env::{ActionSpace, Env};
use crate::error::{Error, Result};
use crate::model::{ActorCritic, LstmState, ModelSpec};
use crate::rollout::{LossConfig, RewardShaping, Rollout};
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
    /// Updates skipped for a non-finite loss or gradient, or one too large to use.
    pub skipped_updates: AtomicU64,
    /// Skipped updates since the last good one, over all workers.
    pub consecutive_skips: AtomicU64,
    /// Loss terms per agent step summed over kept updates, as f64 bits: status lines
    /// show their mean since the previous line.
    pub policy_loss_sum: AtomicU64,
    pub value_loss_sum: AtomicU64,
    pub entropy_sum: AtomicU64,
    /// Time spent in each phase of an update, summed over workers.
    pub phases: PhaseTimes,
}

/// Nanoseconds spent in each phase of an update, summed over all updates (kept or
/// skipped) and workers: where a worker's time goes.
#[derive(Default)]
pub struct PhaseTimes {
    /// Copying the shared weights into the local model.
    pub pull: AtomicU64,
    /// Playing the rollout: forward passes, sampling, environment steps.
    pub rollout: AtomicU64,
    /// The loss and its backward pass.
    pub backward: AtomicU64,
    /// Bringing the gradients to the shared model's device and checking them.
    pub push: AtomicU64,
    /// The shared optimizer's step.
    pub step: AtomicU64,
}

impl PhaseTimes {
    /// The phases' names and totals in nanoseconds, in the order an update runs them.
    pub fn totals(&self) -> [(&'static str, u64); 5] {
        [
            ("pull", self.pull.load(Ordering::Relaxed)),
            ("rollout", self.rollout.load(Ordering::Relaxed)),
            ("backward", self.backward.load(Ordering::Relaxed)),
            ("push", self.push.load(Ordering::Relaxed)),
            ("step", self.step.load(Ordering::Relaxed)),
        ]
    }
}

/// Adds `value` to the f64 whose bits `counter` holds.
fn add_f64(counter: &AtomicU64, value: f64) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
        Some((f64::from_bits(bits) + value).to_bits())
    });
}

/// Adds the time since `*since` to `counter` and restarts the clock. On a GPU it
/// first waits for the device's queued work, so that a phase is charged with its own
/// kernels rather than with whichever later phase happens to wait for them.
fn lap(counter: &AtomicU64, since: &mut Instant, device: Device) {
    if let Device::Cuda(index) = device {
        tch::Cuda::synchronize(index as i64);
    }
    let now = Instant::now();
    counter.fetch_add((now - *since).as_nanos() as u64, Ordering::Relaxed);
    *since = now;
}

/// A thread's local copy of the model, with its own gradients.
struct LocalModel {
    // Owns the variables that `model` and `parameters` point into.
    _store: nn::VarStore,
    model: ActorCritic,
    /// The model's parameters in its parameter order (that of the shared handles).
    parameters: Vec<Tensor>,
}

impl LocalModel {
    fn new(spec: &ModelSpec, device: Device) -> Self {
        let store = nn::VarStore::new(device);
        let model = ActorCritic::new(&store, spec);
        let parameters =
            model.parameters().iter().map(|(_, tensor)| tensor.shallow_clone()).collect();
        LocalModel { _store: store, model, parameters }
    }
}

/// The workers waiting for a training thread, first in first out, so they take turns.
#[derive(Clone)]
pub struct WorkerQueue {
    next: Receiver<Worker>,
    requeue: Sender<Worker>,
}

impl WorkerQueue {
    pub fn new(workers: Vec<Worker>) -> Self {
        let (requeue, next) = crossbeam::channel::unbounded();
        for worker in workers {
            requeue.send(worker).expect("the queue holds its own receiver");
        }
        WorkerQueue { next, requeue }
    }

    /// Waits for the next worker; `None` once a stop is requested.
    fn next(&self, stop: &Stop) -> Option<Worker> {
        while !stop.requested() {
            match self.next.recv_timeout(Duration::from_millis(50)) {
                Ok(worker) => return Some(worker),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
        None
    }

    fn requeue(&self, worker: Worker) {
        // The queue holds its own receiver, so sending cannot fail.
        let _ = self.requeue.send(worker);
    }
}

/// One training thread: trains whichever worker is next for one rollout and queues it
/// again, until a stop is requested. Its local model lives on `device`, the device of
/// every worker in its queue. A worker's error ends the thread (and, through the
/// caller, the run), naming the worker.
pub fn run_training_thread(
    queue: WorkerQueue,
    spec: &ModelSpec,
    device: Device,
    stop: &Stop,
) -> Result<()> {
    // One intra-op thread each: the training threads are the parallelism, and more
    // threads each would only contend for the same cores.
    tch::set_num_threads(1);
    let local = LocalModel::new(spec, device);
    while let Some(mut worker) = queue.next(stop) {
        let rank = worker.setup.rank;
        worker
            .train_one_rollout(&local, stop)
            .map_err(|err| Error::Training(format!("worker {rank}: {}", err.report())))?;
        queue.requeue(worker);
    }
    Ok(())
}

/// What a worker is made from.
pub struct WorkerSetup {
    pub rank: usize,
    /// Where the worker's model, LSTM state and rollout graph live.
    pub device: Device,
    pub env: Box<dyn Env>,
    pub spec: ModelSpec,
    /// Handles on the shared (CPU) parameters, in the model's parameter order.
    pub shared_parameters: Vec<Tensor>,
    pub optimizer: SharedOptimizer,
    pub num_steps: u32,
    pub max_episode_length: u32,
    pub loss: LossConfig,
    pub rewards: RewardShaping,
    pub seed: u64,
    pub counters: Arc<Counters>,
}

/// One worker: its setup and where its game stands between rollouts.
pub struct Worker {
    setup: WorkerSetup,
    /// A copy of the environment's, so its bounds stay borrowable while the
    /// environment is stepped.
    action_space: ActionSpace,
    /// `[1, observation shape...]`: one observation as a batch.
    batch_shape: Vec<i64>,
    rng: Rng,
    observation: Vec<f32>,
    /// Detached between rollouts, so no graph outlives its update.
    state: LstmState,
    episode_length: u32,
    /// The episode ended with the last rollout; the LSTM state starts afresh.
    done: bool,
    /// The environment's frame count already added to the counters.
    frames_seen: u64,
}

impl Worker {
    /// Resets the worker's environment, ready for its first rollout.
    pub fn new(mut setup: WorkerSetup) -> Self {
        let action_space = setup.env.action_space().clone();
        let batch_shape = [&[1i64][..], setup.env.observation_shape()].concat();
        let observation = setup.env.reset(None);
        let frames_seen = setup.env.env_frames();
        let state = LstmState::zeros(&setup.spec, setup.device);
        let rng = Rng::new(setup.seed ^ 0x776f_726b);
        Worker {
            setup,
            action_space,
            batch_shape,
            rng,
            observation,
            state,
            episode_length: 0,
            done: false,
            frames_seen,
        }
    }

    /// Pulls the shared weights, plays one rollout and pushes its update. A stop
    /// request abandons the rollout at the next agent step, so that a stop is seen
    /// within one step however long rollouts are.
    fn train_one_rollout(&mut self, local: &LocalModel, stop: &Stop) -> Result<()> {
        let LocalModel { model, parameters: local_parameters, .. } = local;
        let setup = &mut self.setup;
        let device = setup.device;
        let batch_shape = self.batch_shape.as_slice();
        let phases = &setup.counters.phases;
        let mut clock = Instant::now();
        pull(&setup.shared_parameters, local_parameters);
        lap(&phases.pull, &mut clock, device);
        let mut state =
            if self.done { LstmState::zeros(&setup.spec, device) } else { self.state.detached() };
        let mut done = false;
        let mut rollout = Rollout::default();
        for _ in 0..setup.num_steps {
            if stop.requested() {
                return Ok(());
            }
            let input = Tensor::from_slice(&self.observation).view(batch_shape).to_device(device);
            let output = model.forward(&input, &state);
            let sampled = agent::sample(&output.policy, &mut self.rng, self.action_space.bounds());
            let step = setup.env.step(&sampled.action);
            self.episode_length += 1;
            done = step.done() || self.episode_length >= setup.max_episode_length;
            rollout.values.push(output.value);
            rollout.log_probs.push(sampled.log_prob);
            rollout.entropies.push(sampled.entropy);
            // Shaped for learning only; scores stay raw.
            rollout.rewards.push(setup.rewards.apply(step.reward));
            state = output.state;
            self.observation = step.observation;
            setup.counters.agent_steps.fetch_add(1, Ordering::Relaxed);
            let frames = setup.env.env_frames();
            setup.counters.env_frames.fetch_add(frames - self.frames_seen, Ordering::Relaxed);
            self.frames_seen = frames;
            if done {
                break;
            }
        }
        let bootstrap = if done {
            self.episode_length = 0;
            self.observation = setup.env.reset(None);
            0.0
        } else {
            let input = Tensor::from_slice(&self.observation).view(batch_shape).to_device(device);
            tch::no_grad(|| model.forward(&input, &state).value.double_value(&[0, 0]))
        };
        self.state = state.detached();
        self.done = done;
        lap(&phases.rollout, &mut clock, device);
        let loss = rollout.loss(bootstrap, &setup.loss);
        for parameter in local_parameters {
            let mut parameter = parameter.shallow_clone();
            parameter.zero_grad();
        }
        loss.total.backward();
        lap(&phases.backward, &mut clock, device);
        let mut gradients: Vec<Tensor> =
            local_parameters.iter().map(|parameter| parameter.grad()).collect();
        // Checked where they were computed, so a skipped update copies nothing.
        let finite = is_finite(&loss.total, &gradients);
        if finite && device != Device::Cpu {
            gradients = gradients.iter().map(|gradient| gradient.to_device(Device::Cpu)).collect();
        }
        lap(&phases.push, &mut clock, device);
        if finite {
            setup.optimizer.step(&setup.shared_parameters, &gradients);
            lap(&phases.step, &mut clock, device);
            setup.counters.updates.fetch_add(1, Ordering::Relaxed);
            setup.counters.consecutive_skips.store(0, Ordering::Relaxed);
            let steps = rollout.len() as f64;
            for (counter, term) in [
                (&setup.counters.policy_loss_sum, &loss.policy),
                (&setup.counters.value_loss_sum, &loss.value),
                (&setup.counters.entropy_sum, &loss.entropy),
            ] {
                add_f64(counter, term.double_value(&[]) / steps);
            }
        } else {
            setup.counters.skipped_updates.fetch_add(1, Ordering::Relaxed);
            let in_a_row = setup.counters.consecutive_skips.fetch_add(1, Ordering::Relaxed) + 1;
            if in_a_row >= MAX_CONSECUTIVE_SKIPS {
                return Err(Error::Training(format!(
                    "{in_a_row} updates in a row had a non-finite or overflowing loss or gradient, so training stopped \
                     (the last good checkpoint is kept); lower --lr or check the environment's rewards"
                )));
            }
            // A diverged rollout leaves a state that may itself be non-finite.
            self.done = true;
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

/// Whether the loss and every gradient are finite and small enough for the optimizer
/// (see [`LARGEST_USABLE_GRADIENT`]). A NaN, an infinity or a huge value anywhere in a
/// tensor shows in its minimum or maximum, so one pass over each gradient, with no
/// temporary copy, and one read-back decide it.
fn is_finite(loss: &Tensor, gradients: &[Tensor]) -> bool {
    let mut extremes = Vec::with_capacity(2 * gradients.len() + 1);
    extremes.push(loss.detach().view([1]));
    for gradient in gradients {
        let (minimum, maximum) = gradient.aminmax(None, false);
        extremes.push(minimum.view([1]));
        extremes.push(maximum.view([1]));
    }
    // The largest magnitude, in double precision; NaN propagates through max.
    let largest = Tensor::cat(&extremes, 0).to_kind(Kind::Double).abs().max().double_value(&[]);
    largest.is_finite() && largest < LARGEST_USABLE_GRADIENT
}

/// The largest gradient an update may carry: the square root of f32's largest value.
/// A larger one squares to infinity in the optimizer's second moment, and from there
/// the weights go NaN, so such an update is skipped like a NaN one.
const LARGEST_USABLE_GRADIENT: f64 = 1.8e19;

#[cfg(test)]
mod tests {
    use super::*;

    /// A NaN or an infinity of either sign in the loss or any gradient is caught, and
    /// so is a finite gradient whose square overflows f32; large usable ones pass.
    #[test]
    fn finiteness_check_catches_every_non_finite_value() {
        let loss = Tensor::from(0.5f32);
        let huge = vec![Tensor::from_slice(&[1.0f32]), Tensor::from_slice(&[3e38f32, -3e38])];
        assert!(!is_finite(&loss, &huge), "3e38 squares to infinity");
        let gradients =
            || vec![Tensor::from_slice(&[1.0f32, -2.0]), Tensor::from_slice(&[1e19f32, -1e19])];
        assert!(is_finite(&loss, &gradients()));
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut poisoned = gradients();
            poisoned[1] = Tensor::from_slice(&[0.0f32, bad, 1.0]);
            assert!(!is_finite(&loss, &poisoned), "{bad} in a gradient");
            assert!(!is_finite(&Tensor::from(bad), &gradients()), "{bad} as the loss");
        }
    }
}
