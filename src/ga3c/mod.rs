//! The batched trainer (`--trainer ga3c`), after NVlabs' GA3C (Babaeizadeh et al.,
//! arXiv:1611.06256): agents play their environments and ask predictors for actions;
//! predictors answer many agents with one forward pass; trainers merge the agents'
//! segments into one update of the shared model.
//!
//! ```text
//!  agents (--workers)        predictors (--predictors)       trainers (--trainers)
//!  env, action stream  --->  request queue --> one forward     segment queue --> [T, B]
//!  sample, step        <---  policy, value     per batch       re-unroll, one update
//!  segments of --num-steps  ---------------------------------> of the shared model
//!                            pull when the shared model moved  (Hogwild steps)
//! ```
//!
//! - [`segment`]: a stretch of one agent's experience, and the loss over a batch of
//!   them (no threads).
//! - [`predictor`]: batched acting, and the agents' LSTM states.
//! - [`agent`]: an agent's loop: predict, sample, step, send segments.
//! - [`trainer`]: a trainer's loop: gather segments, drop stale ones, update.
//! - [`tuner`]: --autotune, which adjusts the three thread counts as the run goes.

pub mod agent;
pub mod predictor;
pub mod segment;
pub mod settings;
pub mod trainer;
pub mod tuner;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam::channel::{self, Receiver, Sender};

use crate::config::{MemoryPlan, TrainConfig};
use crate::counters::TrainingCounters;
use crate::error::Result;
use crate::shared::SharedModel;
use crate::supervisor::Supervisor;
use crate::trainer::{own_optimizers, RunningTrainer, Trainer};
use agent::AgentSetup;
use predictor::{Batching, PredictorCounters, PredictorSetup, Request, SlotTable};
use segment::Segment;
pub use settings::Ga3cConfig;
use trainer::{TrainerCounters, TrainerSetup};
use tuner::{Counts, Tuner};

/// A thread that can be asked to end on its own.
struct Running {
    handle: JoinHandle<()>,
    retire: Arc<AtomicBool>,
    /// An agent's row in the slot table; none for predictors and trainers.
    slot: Option<usize>,
}

/// The three kinds of GA3C thread.
#[derive(Clone, Copy)]
enum Role {
    Agent,
    Predictor,
    Trainer,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Predictor => "predictor",
            Role::Trainer => "trainer",
        }
    }
}

/// The figures of the previous status line.
#[derive(Default)]
struct LastStatus {
    predictions: u64,
    batches: u64,
    updates: u64,
    segments: u64,
    lag_sum: u64,
}

/// The running GA3C trainer: its threads and the queues between them.
pub struct Ga3cTrainer<'a> {
    config: &'a TrainConfig,
    settings: &'a Ga3cConfig,
    shared: SharedModel,
    counters: Arc<TrainingCounters>,
    supervisor: Supervisor,
    requests: (Sender<Request>, Receiver<Request>),
    segments: (Sender<Segment>, Receiver<Segment>),
    slots: Arc<SlotTable>,
    predictor_counters: Arc<PredictorCounters>,
    trainer_counters: Arc<TrainerCounters>,
    agents: Vec<Running>,
    predictors: Vec<Running>,
    trainers: Vec<Running>,
    /// Threads asked to end, joined at the end.
    retired: Vec<JoinHandle<()>>,
    /// Agents asked to end that may still be finishing a segment in their slot.
    retiring_agents: Vec<Running>,
    /// Slot-table rows no running agent holds.
    free_slots: Vec<usize>,
    /// Threads started so far of each role (in `Role` order), for their names.
    started: [usize; 3],
    tuner: Option<Tuner>,
    last: LastStatus,
}

/// The most threads of each kind --autotune may run: twice the agents asked for (at
/// least 8 more) and up to 4 predictors and 4 trainers, more than two cores use.
pub fn ceiling(agents: usize, settings: &Ga3cConfig) -> Counts {
    if settings.autotune_window.is_none() {
        return Counts { agents, predictors: settings.predictors, trainers: settings.trainers };
    }
    Counts {
        agents: agents.saturating_mul(2).max(agents.saturating_add(8)),
        predictors: settings.predictors.max(4),
        trainers: settings.trainers.max(4),
    }
}

impl Trainer for Ga3cConfig {
    fn memory_plan(&self, config: &TrainConfig) -> MemoryPlan {
        let ceiling = ceiling(config.workers, self);
        MemoryPlan {
            model_copies: ceiling.predictors + ceiling.trainers,
            optimizer_copies: own_optimizers(config, ceiling.trainers),
            environments: ceiling.agents,
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

/// Starts the agents, predictors and trainers. `shared` is the handle whose optimizer
/// the checkpoints save; with --shared-optimizer false the other trainers step copies.
fn start<'a>(
    config: &'a TrainConfig,
    settings: &'a Ga3cConfig,
    shared: &SharedModel,
    counters: &Arc<TrainingCounters>,
    supervisor: &Supervisor,
) -> Result<Ga3cTrainer<'a>> {
    let ceiling = ceiling(config.workers, settings);
    let requests = channel::unbounded();
    // Bounded, so that agents wait rather than play segments the trainers would only
    // drop as stale.
    let segments = channel::bounded(settings.segment_queue_for(config.workers));
    let mut trainer = Ga3cTrainer {
        config,
        settings,
        shared: shared.handle(),
        counters: Arc::clone(counters),
        supervisor: supervisor.clone(),
        requests,
        segments,
        slots: Arc::new(SlotTable::new(ceiling.agents, &config.spec, config.devices[0])),
        predictor_counters: Arc::default(),
        trainer_counters: Arc::default(),
        agents: Vec::new(),
        predictors: Vec::new(),
        trainers: Vec::new(),
        retired: Vec::new(),
        retiring_agents: Vec::new(),
        free_slots: (0..ceiling.agents).rev().collect(),
        started: [0; 3],
        tuner: None,
        // A resumed run's updates start at the checkpoint's count: the first line's
        // rate counts from there, not from zero.
        last: LastStatus {
            updates: counters.updates.load(Ordering::Relaxed),
            ..LastStatus::default()
        },
    };
    let counts = Counts {
        agents: config.workers,
        predictors: settings.predictors,
        trainers: settings.trainers,
    };
    trainer.set_counts(counts)?;
    if let Some(window) = settings.autotune_window {
        trainer.tuner = Some(Tuner::new(counts, ceiling, window, Instant::now()));
    }
    crate::console::say(&format!(
        "devices: predictors and the agents' LSTM states on {}; trainers on {}; shared model and optimizer on cpu; \
         {counts}",
        crate::device::name(config.devices[0]),
        config.devices.iter().map(|&device| crate::device::name(device)).collect::<Vec<_>>().join(", "),
    ));
    Ok(trainer)
}

impl Ga3cTrainer<'_> {
    fn counts(&self) -> Counts {
        Counts {
            agents: self.agents.len(),
            predictors: self.predictors.len(),
            trainers: self.trainers.len(),
        }
    }

    /// Starts or retires threads until `counts` run.
    fn set_counts(&mut self, counts: Counts) -> Result<()> {
        while self.trainers.len() < counts.trainers {
            self.start_trainer()?;
        }
        while self.predictors.len() < counts.predictors {
            self.start_predictor()?;
        }
        while self.agents.len() < counts.agents {
            if self.start_agents(counts.agents - self.agents.len())? == 0 {
                // Every free row is held by agents still finishing their last segment:
                // the next window of the tuner tries again.
                break;
            }
        }
        while self.agents.len() > counts.agents {
            let agent = self.agents.pop().expect("more agents than wanted");
            // A retiring agent finishes its segment first: until it has, its slot is
            // still in use, so the slot is freed only once the thread has ended.
            agent.retire.store(true, Ordering::Relaxed);
            self.retiring_agents.push(agent);
        }
        for (running, wanted) in
            [(&mut self.predictors, counts.predictors), (&mut self.trainers, counts.trainers)]
        {
            while running.len() > wanted {
                let thread = running.pop().expect("more running than wanted");
                thread.retire.store(true, Ordering::Relaxed);
                self.retired.push(thread.handle);
            }
        }
        Ok(())
    }

    fn spawn(
        &mut self,
        role: Role,
        body: impl FnOnce() -> Result<()> + Send + 'static,
    ) -> Result<JoinHandle<()>> {
        let name = format!("{} {}", role.name(), self.started[role as usize]);
        self.started[role as usize] += 1;
        self.supervisor.spawn(name, body)
    }

    /// Starts up to `wanted` agents, as many as free slots allow, their environments
    /// made side by side; returns how many started. Slots whose agent did not start
    /// are free again.
    fn start_agents(&mut self, wanted: usize) -> Result<usize> {
        let config = self.config;
        let (ended, retiring): (Vec<Running>, Vec<Running>) =
            self.retiring_agents.drain(..).partition(|agent| agent.handle.is_finished());
        self.retiring_agents = retiring;
        for agent in ended {
            self.free_slots.extend(agent.slot);
            self.retired.push(agent.handle);
        }
        // When every row is held, some by agents still finishing their last segment,
        // none starts now.
        let slots: Vec<usize> = (0..wanted).map_while(|_| self.free_slots.pop()).collect();
        // The test agent's environment is rank `workers`, so agents beyond the first
        // `workers` skip it.
        let ranks: Vec<usize> =
            slots.iter().map(|&slot| if slot < config.workers { slot } else { slot + 1 }).collect();
        let envs = match crate::supervisor::make_envs(&config.env, &ranks) {
            Ok(envs) => envs,
            Err(err) => {
                self.free_slots.extend(slots.into_iter().rev());
                return Err(err);
            }
        };
        let mut unstarted = slots.into_iter().zip(ranks).zip(envs);
        let mut started = 0;
        while let Some(((slot, rank), env)) = unstarted.next() {
            let retire = Arc::new(AtomicBool::new(false));
            let setup = AgentSetup {
                index: slot,
                env,
                seed: config.env.seed(rank),
                rewards: config.rewards,
                num_steps: self.settings.num_steps,
                max_episode_length: config.env.max_episode_length,
                requests: self.requests.0.clone(),
                segments: self.segments.0.clone(),
                counters: Arc::clone(&self.counters),
                retire: Arc::clone(&retire),
            };
            let stop = self.supervisor.stop().clone();
            match self.spawn(Role::Agent, move || agent::run_agent(setup, &stop)) {
                Ok(handle) => self.agents.push(Running { handle, retire, slot: Some(slot) }),
                Err(err) => {
                    self.free_slots.push(slot);
                    self.free_slots.extend(unstarted.map(|((slot, _), _)| slot).rev());
                    return Err(err);
                }
            }
            started += 1;
        }
        Ok(started)
    }

    fn start_predictor(&mut self) -> Result<()> {
        let config = self.config;
        let retire = Arc::new(AtomicBool::new(false));
        let setup = PredictorSetup {
            spec: config.spec.clone(),
            observation_shape: self.observation_shape(),
            device: config.devices[0],
            shared: self.shared.handle(),
            training: Arc::clone(&self.counters),
            slots: Arc::clone(&self.slots),
            requests: self.requests.1.clone(),
            batching: Batching {
                min_batch: self.settings.predict_min_batch,
                max_batch: self.settings.predict_batch,
                timeout: self.settings.predict_timeout,
            },
            counters: Arc::clone(&self.predictor_counters),
            retire: Arc::clone(&retire),
            precision: self.settings.precision,
        };
        let stop = self.supervisor.stop().clone();
        let handle = self.spawn(Role::Predictor, move || {
            predictor::run_predictor(setup, &stop);
            Ok(())
        })?;
        self.predictors.push(Running { handle, retire, slot: None });
        Ok(())
    }

    fn start_trainer(&mut self) -> Result<()> {
        let config = self.config;
        let index = self.started[Role::Trainer as usize];
        let shared = if config.shared_optimizer || index == 0 {
            self.shared.handle()
        } else {
            self.shared.with_optimizer(self.shared.optimizer().duplicate())
        };
        let retire = Arc::new(AtomicBool::new(false));
        let setup = TrainerSetup {
            device: config.devices[index % config.devices.len()],
            spec: config.spec.clone(),
            observation_shape: self.observation_shape(),
            shared,
            loss: config.loss,
            train_batch: self.settings.train_batch,
            max_policy_lag: self.settings.max_policy_lag,
            counters: Arc::clone(&self.counters),
            trainer_counters: Arc::clone(&self.trainer_counters),
            profile_phases: config.profile_phases,
            precision: self.settings.precision,
        };
        let (segments, stop) = (self.segments.1.clone(), self.supervisor.stop().clone());
        let thread_retire = Arc::clone(&retire);
        let handle =
            self.spawn(Role::Trainer, move || trainer::run(setup, segments, stop, thread_retire))?;
        self.trainers.push(Running { handle, retire, slot: None });
        Ok(())
    }

    fn observation_shape(&self) -> Vec<i64> {
        self.config.observation_shape.clone()
    }
}

impl RunningTrainer for Ga3cTrainer<'_> {
    /// Predictions/s and trainings/s (updates, with the segments each merged), the mean
    /// predict batch, the queues' depths, the policy lag of the trained segments (in
    /// updates) and the segments dropped for lagging, all since the previous line.
    fn status(&mut self, seconds: f64) -> String {
        let predictions = self.predictor_counters.predictions.load(Ordering::Relaxed);
        let batches = self.predictor_counters.batches.load(Ordering::Relaxed);
        let updates = self.counters.updates.load(Ordering::Relaxed);
        let segments = self.trainer_counters.segments.load(Ordering::Relaxed);
        let lag_sum = self.trainer_counters.lag_sum.load(Ordering::Relaxed);
        let last = &self.last;
        let per = |now: u64, then: u64, over: u64| (now - then) as f64 / (over as f64).max(1.0);
        let line = format!(
            "{:.0} predictions/s, {:.1} trainings/s ({:.1} segments each), mean predict batch {:.1}, \
             queues: {} requests, {} segments, policy lag {:.2}, dropped segments {}{}",
            (predictions - last.predictions) as f64 / seconds,
            (updates - last.updates) as f64 / seconds,
            per(segments, last.segments, updates - last.updates),
            per(predictions, last.predictions, batches - last.batches),
            self.requests.0.len(),
            self.segments.0.len(),
            per(lag_sum, last.lag_sum, segments - last.segments),
            self.trainer_counters.dropped.load(Ordering::Relaxed),
            if self.tuner.is_some() { format!(", {}", self.counts()) } else { String::new() },
        );
        self.last = LastStatus { predictions, batches, updates, segments, lag_sum };
        line
    }

    fn tick(&mut self, agent_steps: u64) -> Option<String> {
        let change = self.tuner.as_mut()?.observe(Instant::now(), agent_steps)?;
        if let Err(err) = self.set_counts(change.counts) {
            // Training goes on with the threads it has; the tuner's count is then
            // ahead of them, which its next window measures as it is.
            return Some(format!("autotune: {}", err.report()));
        }
        Some(change.reason)
    }

    fn updates_play(&self) -> bool {
        false
    }

    fn into_threads(self: Box<Self>) -> Vec<JoinHandle<()>> {
        let Ga3cTrainer { agents, predictors, trainers, retired, retiring_agents, .. } = *self;
        let running = agents.into_iter().chain(retiring_agents).chain(predictors).chain(trainers);
        running.map(|thread| thread.handle).chain(retired).collect()
    }
}
