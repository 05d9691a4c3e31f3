//! `a3g train`: checks everything, builds the shared model and optimizer, starts the
//! chosen trainer and the test agent, lets the monitor watch them, then stops them
//! all and writes the final checkpoint.

use std::path::PathBuf;
use std::thread;

use crossbeam::channel;
use tch::{nn, Device};

use crate::checkpoint::SavedCounters;
use crate::cli::{TrainArgs, TrainerName};
use crate::config::{MemoryPlan, TrainConfig};
use crate::console;
use crate::error::{Error, Result};
use crate::model::{ActorCritic, Body};
use crate::monitor::{Monitor, RunningTrainer};
use crate::shared::SharedModel;
use crate::test_agent::{EpisodeStats, TestAgent};
use crate::{a3c, ga3c};

/// Runs `a3g train`.
pub fn run(args: &TrainArgs) -> Result<()> {
    let (mut config, test_env) = TrainConfig::new(args)?;
    let resume = config.resume.take();
    // With --shared-optimizer false every worker (A3C) or trainer (GA3C) but the
    // first steps its own copy of the statistics.
    let own_optimizers = |steppers: usize| if args.shared_optimizer { 0 } else { steppers - 1 };
    let plan = match args.trainer {
        TrainerName::A3c => MemoryPlan {
            model_copies: a3c::training_threads(&config),
            optimizer_copies: own_optimizers(config.workers),
            environments: config.workers,
        },
        TrainerName::Ga3c => {
            ga3c::check_flags(&config)?;
            let ceiling = ga3c::ceiling(&config);
            MemoryPlan {
                model_copies: ceiling.predictors + ceiling.trainers,
                optimizer_copies: own_optimizers(ceiling.trainers),
                environments: ceiling.agents,
            }
        }
    };
    let _save_dir = config.claim_save_dir(plan)?;
    if config.spec.body == Body::AtariLstm
        && args.model.is_none()
        && !args.load
        && config.devices.iter().all(|device| *device == Device::Cpu)
    {
        console::warn(
            "note: on CPU cores the default network (the reference's a3clstm) is slow: two cores trained \
             Pong with it at 236 agent steps/s, and with --model universe at 1,313 (A3C) to 2,274 (--trainer \
             ga3c), whose first 18+ game came 7.7-13.8 minutes in (docs/benchmarks.md); pass --model to choose",
        );
    }

    tch::set_num_threads(1);
    tch::manual_seed(args.seed as i64);
    // Owns the shared variables that every handle points into.
    let shared_store = nn::VarStore::new(Device::Cpu);
    let shared_model = ActorCritic::new(&shared_store, &config.spec);
    let names: Vec<String> =
        shared_model.parameters().iter().map(|(name, _)| name.clone()).collect();
    let shared = SharedModel::over(&shared_model, config.optimizer, args.lr);
    let (resumed, resumed_best) = match &resume {
        Some(checkpoint) => shared.resume(checkpoint, &names, config.optimizer)?,
        None => (SavedCounters::default(), None),
    };
    drop(resume);
    let mut monitor = Monitor::open(&config, names, shared.handle(), resumed, resumed_best)?;

    let (counters, stop) = (&monitor.counters, &monitor.stop);
    let mut trainer: Box<dyn RunningTrainer + '_> = match args.trainer {
        TrainerName::A3c => Box::new(a3c::start(&config, &shared, counters, stop)?),
        TrainerName::Ga3c => Box::new(ga3c::start(&config, &shared, counters, stop)?),
    };
    let (games_tx, games) = channel::unbounded::<EpisodeStats>();
    let test_agent = TestAgent {
        env: test_env,
        spec: config.spec.clone(),
        // The reference's test agent runs on the last listed GPU.
        device: *config.devices.last().expect("at least one device"),
        shared: shared.handle(),
        max_episode_length: args.environment.max_episode_length,
        core_share: config.test_share,
        pinned: monitor.pinned.clone(),
    };
    let (stop, started) = (monitor.stop.clone(), monitor.started);
    let test_thread = thread::Builder::new()
        .name("test agent".into())
        .spawn(move || test_agent.run(stop, started, games_tx))
        .map_err(|cause| Error::Io {
            action: "start the test agent for",
            path: PathBuf::from(&args.environment.env),
            cause,
        });
    let test_thread = match test_thread {
        Ok(handle) => handle,
        Err(err) => {
            monitor.stop.request(crate::stop::StopReason::Failure("no test agent".into()));
            trainer.join();
            return Err(err);
        }
    };

    monitor.watch(&games, trainer.as_mut());
    trainer.join();
    let failure = test_thread.join().is_err().then(|| "the test agent panicked".to_string());
    monitor.finish(failure)
}
