//! The contract every trainer meets, and the one table of trainers.
//!
//! A trainer (A3C's workers, GA3C's agents, predictors and trainers) is started from
//! the checked [`TrainConfig`] with the shared model, the live [`TrainingCounters`] it
//! adds to, and the [`Supervisor`] that runs its threads; while it runs the monitor
//! sees it only as a [`RunningTrainer`]. The monitor and the trainers depend on this
//! module, not on each other. A third trainer is a folder of its own, whose
//! settings.rs holds its flags and checked settings, which implement [`Trainer`]; a
//! row in [`chosen`], the one table of running trainers; a variant of
//! [`crate::config::TrainerConfig`], with an arm in each of its methods; and a value of
//! `--trainer`.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::config::{MemoryPlan, TrainConfig, TrainerConfig};
use crate::counters::TrainingCounters;
use crate::error::Result;
use crate::shared::SharedModel;
use crate::supervisor::Supervisor;

/// A running trainer, as the monitor and `a3g train` see it.
pub trait RunningTrainer {
    /// The trainer's own part of a status line, over the `seconds` since the
    /// previous one (empty if it has nothing to add).
    fn status(&mut self, seconds: f64) -> String;

    /// Runs on every pass of the monitor's loop, about 20 times a second, with the
    /// agent steps so far: where a trainer adjusts itself while it runs. A line it
    /// returns goes to stdout and the game log.
    fn tick(&mut self, _agent_steps: u64) -> Option<String> {
        None
    }

    /// Whether its updates play their own rollouts, so that the rollout phase's time
    /// means something (GA3C's agents play apart from its updates).
    fn updates_play(&self) -> bool;

    /// The trainer's threads, for the supervisor to join once a stop is requested.
    fn into_threads(self: Box<Self>) -> Vec<JoinHandle<()>>;
}

/// A trainer, as its checked settings: what it holds in memory, for the check made
/// before anything is built, and how it starts.
pub trait Trainer {
    /// What the run holds in memory with this trainer.
    fn memory_plan(&self, config: &TrainConfig) -> MemoryPlan;

    /// Starts the trainer. `shared` is the handle whose optimizer the checkpoints save.
    fn start<'a>(
        &'a self,
        config: &'a TrainConfig,
        shared: &SharedModel,
        counters: &Arc<TrainingCounters>,
        supervisor: &Supervisor,
    ) -> Result<Box<dyn RunningTrainer + 'a>>;
}

/// The one table of trainers: the trainer a run's config names.
pub fn chosen(config: &TrainConfig) -> &dyn Trainer {
    match &config.trainer {
        TrainerConfig::A3c(settings) => settings,
        TrainerConfig::Ga3c(settings) => settings,
    }
}

/// Optimizer statistics beside the shared ones when `steppers` threads step the
/// model: with --shared-optimizer false, every one but the first has its own copy.
pub fn own_optimizers(config: &TrainConfig, steppers: usize) -> usize {
    if config.shared_optimizer {
        0
    } else {
        steppers.saturating_sub(1)
    }
}
