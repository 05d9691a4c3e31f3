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

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};
use tch::Device;

use crate::counters::{PhaseClock, TrainingCounters};
use crate::device;
use crate::env::rng::Rng;
use crate::env::{ActionSpace, Env};
use crate::error::{Error, Result};
use crate::model::{ActorCritic, LstmState, LstmTape, ModelSpec};
use crate::policy;
use crate::rollout::{LossConfig, RewardShaping, Rollout};
use crate::shared::{LocalModel, SharedModel};
use crate::stop::Stop;

/// A played rollout on its way to its update.
struct Played {
    rollout: Rollout,
    /// The critic's value after the last step; 0 if the episode ended.
    bootstrap: f64,
    /// The rollout's LSTM steps, which make the LSTM weights' gradients.
    lstm_tape: LstmTape,
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
        worker.train_one_rollout(&local, stop).map_err(|cause| Error::Thread {
            thread: format!("worker {rank}"),
            cause: Box::new(cause),
        })?;
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
    /// The shared model, with the optimizer this worker steps it with.
    pub shared: SharedModel,
    pub num_steps: u32,
    pub max_episode_length: u32,
    pub loss: LossConfig,
    pub rewards: RewardShaping,
    pub seed: u64,
    pub counters: Arc<TrainingCounters>,
    /// Wait for the device at each phase boundary, so phase times are exact on a GPU.
    pub profile_phases: bool,
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
    pub fn new(mut setup: WorkerSetup) -> Result<Self> {
        let action_space = setup.env.action_space().clone();
        let batch_shape = [&[1i64][..], setup.env.observation_shape()].concat();
        let observation = setup.env.reset(None)?;
        let frames_seen = setup.env.env_frames();
        let state = LstmState::zeros(&setup.spec, setup.device);
        let rng = Rng::new(setup.seed ^ 0x776f_726b);
        Ok(Worker {
            setup,
            action_space,
            batch_shape,
            rng,
            observation,
            state,
            episode_length: 0,
            done: false,
            frames_seen,
        })
    }

    /// Trains on one rollout, as the reference's `train.py` does: pull the shared
    /// weights, play the rollout, backpropagate its loss, bring the gradients to the host
    /// with their check (the update's one host sync) and step the shared model with
    /// them, or skip an update that is not finite. A stop request abandons the rollout
    /// at the next agent step, so that a stop is seen within one step however long
    /// rollouts are.
    fn train_one_rollout(&mut self, local: &LocalModel, stop: &Stop) -> Result<()> {
        let LocalModel { model, parameters, gradients, .. } = local;
        // A handle of its own, so the phase counters stay borrowed while the rollout
        // borrows the worker.
        let counters = Arc::clone(&self.setup.counters);
        let phases = &counters.phases;
        let mut clock = PhaseClock::start(self.setup.profile_phases.then_some(self.setup.device));
        clock.phase(&phases.pull, || self.setup.shared.pull(parameters));
        let played = clock
            .phase_unless_abandoned(&phases.rollout, || self.play_rollout(model, stop).transpose());
        let Some(Played { rollout, bootstrap, lstm_tape }) = played.transpose()? else {
            return Ok(());
        };
        let loss = rollout.loss(bootstrap, &self.setup.loss);
        clock.phase(&phases.backward, || {
            gradients.zero();
            loss.total.backward();
            lstm_tape.add_weight_gradients(model);
        });
        let checked = clock.phase(&phases.push, || gradients.transfer(&loss));
        if !checked.finite {
            // A diverged rollout leaves a state that may itself be non-finite.
            self.done = true;
            return counters.record_skip();
        }
        let agent_steps = counters.agent_steps.load(Ordering::Relaxed);
        clock.phase(&phases.step, || {
            self.setup.shared.step(gradients.host_gradients(), agent_steps)
        });
        counters.record_update(checked.terms, rollout.len());
        Ok(())
    }

    /// Plays one rollout with `model` from where the worker's game stands: one host
    /// sync per agent step (the action's probabilities with the critic's value) and one
    /// for the bootstrap value. `None` if a stop came first. The bootstrap value is 0
    /// after a terminal step and the critic's value of the last observation otherwise,
    /// a time limit's cut included: as Gymnasium means `truncated`, the return goes on
    /// past it.
    fn play_rollout(&mut self, model: &ActorCritic, stop: &Stop) -> Result<Option<Played>> {
        let setup = &mut self.setup;
        let device = setup.device;
        let batch_shape = self.batch_shape.as_slice();
        let mut state =
            if self.done { LstmState::zeros(&setup.spec, device) } else { self.state.detached() };
        let (mut done, mut terminated) = (false, false);
        let mut rollout = Rollout::default();
        let mut lstm_tape = LstmTape::default();
        for _ in 0..setup.num_steps {
            if stop.requested() {
                return Ok(None);
            }
            let input = device::upload(&self.observation, batch_shape, device);
            let output = model.forward_recorded(&input, &state, &mut lstm_tape);
            let sampled = policy::sample(
                &output.policy,
                &output.value,
                &mut self.rng,
                self.action_space.bounds(),
            );
            let step = setup.env.step(&sampled.action)?;
            self.episode_length += 1;
            terminated = step.terminated;
            done = step.done() || self.episode_length >= setup.max_episode_length;
            rollout.values.push(output.value);
            rollout.value_estimates.push(sampled.value);
            rollout.log_probs.push(sampled.log_prob);
            rollout.entropies.push(sampled.entropy);
            // Shaped for learning only; scores stay raw.
            rollout.rewards.push(setup.rewards.apply(step.reward));
            state = output.state;
            self.observation = step.observation;
            let frames = setup.env.env_frames();
            setup.counters.count_agent_step(frames - self.frames_seen, stop);
            self.frames_seen = frames;
            if done {
                break;
            }
        }
        let bootstrap = if terminated {
            0.0
        } else {
            let input = device::upload(&self.observation, batch_shape, device);
            tch::no_grad(|| device::read(&model.forward(&input, &state).value)[0])
        };
        if done {
            self.episode_length = 0;
            self.observation = setup.env.reset(None)?;
        }
        self.state = state.detached();
        self.done = done;
        Ok(Some(Played { rollout, bootstrap, lstm_tape }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::env::{self, EnvOptions};
    use crate::shared_optim::{LearningRate, OptimizerKind, SharedOptimizer};
    use tch::{nn, Tensor};

    /// A worker of `env_id` on `device`, and a training thread's local model there, over
    /// a shared model and optimizer on the CPU, as `a3g train` builds them.
    fn worker(env_id: &str, device: Device, profile_phases: bool) -> (Worker, LocalModel) {
        let env = env::make(env_id, &EnvOptions { seed: 1, ..EnvOptions::default() }).unwrap();
        let spec = ModelSpec::for_env(env.as_ref(), 32, true);
        let shared = ActorCritic::new(&nn::VarStore::new(Device::Cpu), &spec);
        let shared_parameters: Vec<Tensor> =
            shared.parameters().iter().map(|(_, tensor)| tensor.shallow_clone()).collect();
        let optimizer = SharedOptimizer::new(
            OptimizerKind::Adam { amsgrad: false },
            LearningRate::constant(1e-4),
            &shared_parameters,
        );
        let setup = WorkerSetup {
            rank: 0,
            device,
            env,
            spec: spec.clone(),
            shared: SharedModel::new(&shared_parameters, optimizer),
            num_steps: 5,
            max_episode_length: 10_000,
            loss: LossConfig { gamma: 0.99, tau: 1.0, entropy_coef: 0.01, value_coef: 0.5 },
            rewards: RewardShaping { scale: 1.0, clip: Some(1.0) },
            seed: 1,
            counters: Arc::default(),
            profile_phases,
        };
        (Worker::new(setup).unwrap(), LocalModel::new(&spec, device))
    }

    /// Training on a rollout syncs with the host once per agent step (the action's
    /// probabilities with the critic's value), once for the bootstrap value and once for
    /// the update (loss, backward pass, check, push, optimizer step): the read that
    /// checks the gradients and brings back the loss terms. Playing a rollout alone
    /// makes the first two, so the rest of the update makes one. With --profile-phases
    /// each of the five phase boundaries adds one. Counted on the CPU, where the same
    /// calls would each be a sync on a GPU, and on cuda:0 where CUDA sees one.
    #[test]
    fn an_update_syncs_with_the_host_once() {
        let mut devices = vec![Device::Cpu];
        devices.extend(tch::Cuda::is_available().then_some(Device::Cuda(0)));
        let cases = devices.iter().flat_map(|&device| {
            [("CartPole-v1", false), ("PongDeterministic-v4", false), ("CartPole-v1", true)]
                .map(|(env_id, profile)| (env_id, device, profile))
        });
        for (env_id, device, profile) in cases {
            let (mut worker, local) = worker(env_id, device, profile);
            let counters = Arc::clone(&worker.setup.counters);
            let stop = Stop::default();
            for rollout in 0..3 {
                let before = device::host_syncs();
                let played = worker.play_rollout(&local.model, &stop).unwrap().expect("no stop");
                let steps = played.rollout.len() as u64;
                let bootstrap = u64::from(!worker.done);
                let synced = device::host_syncs() - before;
                assert_eq!(synced, steps + bootstrap, "{env_id} rollout {rollout}");
                let before = device::host_syncs();
                let steps_before = counters.agent_steps.load(Ordering::Relaxed);
                worker.train_one_rollout(&local, &stop).unwrap();
                let synced = device::host_syncs() - before;
                // Kept, so `done` is the episode's end and not a skip's.
                assert_eq!(counters.updates.load(Ordering::Relaxed), rollout + 1, "{env_id}");
                let steps = counters.agent_steps.load(Ordering::Relaxed) - steps_before;
                let bootstrap = u64::from(!worker.done);
                let laps = if profile { 5 } else { 0 };
                assert_eq!(synced, steps + bootstrap + 1 + laps, "{env_id} update {rollout}");
            }
        }
    }

    /// An update gives the LSTM's weights their gradients: a rollout runs its LSTM
    /// steps with those weights detached, and only the tape's products, added after
    /// the backward pass, reach them (model/lstm.rs and the model tests check their values against autograd).
    #[test]
    fn an_update_gives_the_lstm_weights_gradients() {
        let (mut worker, local) = worker("CartPole-v1", Device::Cpu, false);
        worker.train_one_rollout(&local, &Stop::default()).unwrap();
        assert_eq!(worker.setup.counters.updates.load(Ordering::Relaxed), 1, "a kept update");
        let names = crate::model::parameter_names(&worker.setup.spec);
        let lstm_weights: Vec<_> = names
            .iter()
            .zip(local.gradients.host_gradients())
            .filter(|(name, _)| name.starts_with("lstm.weight"))
            .collect();
        assert_eq!(lstm_weights.len(), 2);
        for (name, gradient) in lstm_weights {
            assert!(gradient.abs().max().double_value(&[]) > 0.0, "{name} has no gradient");
        }
    }

    /// Every tensor of a worker lives on the device it was assigned (worker i on
    /// devices[i mod n]): the local model's parameters and gradients, the LSTM state
    /// and the rollout's values, log-probabilities and entropies, before and after an
    /// update; the shared model and the optimizer statistics stay on the CPU. Checked
    /// on the CPU here and, where CUDA sees devices, on every GPU with two workers each.
    #[test]
    fn every_worker_tensor_is_on_its_device() {
        let devices: Vec<Device> = match tch::Cuda::device_count() {
            0 => vec![Device::Cpu],
            count => (0..count as usize).map(Device::Cuda).collect(),
        };
        for rank in 0..2 * devices.len() {
            let device = device::for_worker(&devices, rank);
            for env_id in ["CartPole-v1", "PongDeterministic-v4"] {
                let (mut worker, local) = worker(env_id, device, false);
                let on = |what: &str, tensor: &Tensor| {
                    assert_eq!(tensor.device(), device, "{what} of worker {rank} on {env_id}");
                };
                on("the gradient buffer", &local.gradients.flat);
                for host in local.gradients.host_gradients() {
                    assert_eq!(host.device(), Device::Cpu, "a gradient's host copy");
                    // Pinned from a GPU, for a faster copy. (tch's is_pinned always passes
                    // a device, which libtorch warns is deprecated: only here, in a test.)
                    assert!(device == Device::Cpu || host.is_pinned(device), "not pinned");
                }
                let walk_model_and_state = |worker: &Worker| {
                    for parameter in &local.parameters {
                        on("a local parameter", parameter);
                        let gradient = parameter.grad();
                        if gradient.defined() {
                            on("a local gradient", &gradient);
                        }
                    }
                    on("the LSTM hidden state", &worker.state.hidden);
                    on("the LSTM cell state", &worker.state.cell);
                };
                walk_model_and_state(&worker);
                let played = worker.play_rollout(&local.model, &Stop::default()).unwrap().unwrap();
                let rollout = &played.rollout;
                assert!(!rollout.is_empty());
                for (what, tensors) in [
                    ("a rollout value", &rollout.values),
                    ("a rollout log-probability", &rollout.log_probs),
                    ("a rollout entropy", &rollout.entropies),
                ] {
                    tensors.iter().for_each(|tensor| on(what, tensor));
                }
                walk_model_and_state(&worker);
                worker.train_one_rollout(&local, &Stop::default()).unwrap();
                walk_model_and_state(&worker);
                assert!(local.parameters.iter().all(|parameter| parameter.grad().defined()));
                let names: Vec<String> =
                    (0..local.parameters.len()).map(|index| index.to_string()).collect();
                let shared = worker.setup.shared.parameters().iter();
                let statistics = worker.setup.shared.optimizer().named_statistics(&names);
                for tensor in shared.chain(statistics.iter().map(|(_, tensor)| *tensor)) {
                    assert_eq!(tensor.device(), Device::Cpu, "shared state of {env_id}");
                }
            }
        }
    }
}
