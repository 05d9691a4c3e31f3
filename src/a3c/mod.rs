//! The A3C trainer (`--trainer a3c`, the default): workers as the reference runs them,
//! each its own environment, LSTM state and rollouts, taken in turn by about one
//! training thread per core (see [`worker`] for why workers are not threads).

pub mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::config::TrainConfig;
use crate::console;
use crate::device;
use crate::error::{Error, Result};
use crate::monitor::{RunningTrainer, TrainingCounters};
use crate::shared::SharedModel;
use crate::stop::{self, Stop};
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

/// Builds the workers (every environment before any thread starts) and starts the
/// training threads. `shared` is the handle the checkpoints save the optimizer of:
/// with --shared-optimizer false it is worker 0's, and every other worker steps a
/// copy of its (possibly resumed) statistics.
pub fn start(
    config: &TrainConfig,
    shared: &SharedModel,
    counters: &Arc<TrainingCounters>,
    stop: &Stop,
) -> Result<A3cTrainer> {
    let args = config.args;
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
    for rank in 0..config.workers {
        let num_steps = if args.distributed_step_size.is_empty() {
            args.num_steps
        } else {
            args.distributed_step_size[rank % args.distributed_step_size.len()]
        };
        let handle = if args.shared_optimizer || rank == 0 {
            shared.handle()
        } else {
            shared.with_optimizer(shared.optimizer().duplicate())
        };
        queued[rank % devices.len()].push(Worker::new(WorkerSetup {
            rank,
            device: device::for_worker(devices, rank),
            env: config.make_env(rank)?,
            spec: config.spec.clone(),
            shared: handle,
            num_steps,
            max_episode_length: args.environment.max_episode_length,
            loss: config.loss,
            rewards: config.rewards,
            seed: args.seed.wrapping_add(rank as u64),
            counters: Arc::clone(counters),
            profile_phases: args.profile_phases,
        }));
    }
    console::say(&device::placement(devices, config.workers));
    let queues: Vec<WorkerQueue> = queued.into_iter().map(WorkerQueue::new).collect();
    let mut handles = Vec::new();
    for index in 0..threads {
        let queue = queues[index % devices.len()].clone();
        let device = devices[index % devices.len()];
        let (spec, thread_stop) = (config.spec.clone(), stop.clone());
        let name = format!("training thread {index}");
        let body = move || worker::run_training_thread(queue, &spec, device, &thread_stop);
        let handle = stop::spawn_guarded(name, stop, body).map_err(|cause| Error::Io {
            action: "start a training thread for",
            path: PathBuf::from(&args.environment.env),
            cause,
        })?;
        handles.push(handle);
    }
    Ok(A3cTrainer { threads: handles })
}

/// A3C's status lines hold only the shared figures.
impl RunningTrainer for A3cTrainer {
    fn status(&mut self, _seconds: f64) -> String {
        String::new()
    }

    fn join(self: Box<Self>) {
        for handle in self.threads {
            let _ = handle.join();
        }
    }
}
