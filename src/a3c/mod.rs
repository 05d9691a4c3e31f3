//! The A3C trainer (`--trainer a3c`, the default): workers as the reference runs them,
//! each its own environment, LSTM state and rollouts, taken in turn by about one
//! training thread per core (see [`worker`] for why workers are not threads).

pub mod settings;
pub mod worker;

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::config::{MemoryPlan, TrainConfig};
use crate::console;
use crate::counters::TrainingCounters;
use crate::device;
use crate::error::Result;
use crate::shared::SharedModel;
use crate::supervisor::Supervisor;
use crate::trainer::{own_optimizers, RunningTrainer, Trainer};
pub use settings::A3cConfig;
use worker::{Worker, WorkerQueue, WorkerSetup};

/// The running A3C trainer: its training threads.
pub struct A3cTrainer {
    threads: Vec<JoinHandle<()>>,
}

/// Training threads for `config.workers` workers: one more than the cores, since the
/// test agent takes a share of a core and the extra rollout keeps every core busy
/// meanwhile (measured: 167 against 145 agent steps/s for 32 workers on 2 cores);
/// each device with workers gets at least one.
pub fn training_threads(config: &TrainConfig) -> usize {
    let workers = config.workers;
    workers.min(config.cores + 1).max(workers.min(config.devices.len()))
}

impl Trainer for A3cConfig {
    fn memory_plan(&self, config: &TrainConfig) -> MemoryPlan {
        MemoryPlan {
            model_copies: training_threads(config),
            optimizer_copies: own_optimizers(config, config.workers),
            environments: config.workers,
        }
    }

    fn start<'a>(
        &'a self,
        config: &'a TrainConfig,
        shared: &SharedModel,
        counters: &Arc<TrainingCounters>,
        supervisor: &Supervisor,
    ) -> Result<Box<dyn RunningTrainer + 'a>> {
        Ok(Box::new(start(config, self, shared, counters, supervisor)?))
    }
}

/// Builds the workers (every environment before any thread starts) and starts the
/// training threads. `shared` is the handle the checkpoints save the optimizer of:
/// with --shared-optimizer false it is worker 0's, and every other worker steps a
/// copy of its (possibly resumed) statistics.
fn start(
    config: &TrainConfig,
    settings: &A3cConfig,
    shared: &SharedModel,
    counters: &Arc<TrainingCounters>,
    supervisor: &Supervisor,
) -> Result<A3cTrainer> {
    let devices = &config.devices;
    let threads = training_threads(config);
    if config.workers > threads {
        console::warn(&format!(
            "warning: {} workers on {} cores; they take turns, {threads} rollouts at a time, \
             so each collects experience more slowly",
            config.workers, config.cores
        ));
    }
    // One queue per device: a thread's local model serves only its device's workers.
    let mut queued: Vec<Vec<Worker>> = devices.iter().map(|_| Vec::new()).collect();
    let ranks: Vec<usize> = (0..config.workers).collect();
    let envs = crate::supervisor::make_envs(&config.env, &ranks)?;
    for (rank, env) in ranks.into_iter().zip(envs) {
        let handle = if config.shared_optimizer || rank == 0 {
            shared.handle()
        } else {
            shared.with_optimizer(shared.optimizer().duplicate())
        };
        queued[rank % devices.len()].push(Worker::new(WorkerSetup {
            rank,
            device: device::for_worker(devices, rank),
            env,
            spec: config.spec.clone(),
            shared: handle,
            num_steps: settings.num_steps(rank),
            max_episode_length: config.env.max_episode_length,
            loss: config.loss,
            rewards: config.rewards,
            seed: config.env.seed(rank),
            counters: Arc::clone(counters),
            profile_phases: config.profile_phases,
        })?);
    }
    console::say(&device::placement(devices, config.workers));
    let queues: Vec<WorkerQueue> = queued.into_iter().map(WorkerQueue::new).collect();
    let mut handles = Vec::new();
    for index in 0..threads {
        let queue = queues[index % devices.len()].clone();
        let device = devices[index % devices.len()];
        let (spec, thread_stop) = (config.spec.clone(), supervisor.stop().clone());
        let body = move || worker::run_training_thread(queue, &spec, device, &thread_stop);
        handles.push(supervisor.spawn(format!("training thread {index}"), body)?);
    }
    Ok(A3cTrainer { threads: handles })
}

/// A3C's status lines hold only the shared figures.
impl RunningTrainer for A3cTrainer {
    fn status(&mut self, _seconds: f64) -> String {
        String::new()
    }

    fn updates_play(&self) -> bool {
        true
    }

    fn into_threads(self: Box<Self>) -> Vec<JoinHandle<()>> {
        self.threads
    }
}
