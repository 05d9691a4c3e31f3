//! `a3g train`: checks everything, builds the shared model and optimizer, starts the
//! chosen trainer and the test agent under one supervisor, lets the monitor watch
//! them, then stops them all and writes the final checkpoint.

use std::time::Duration;

use crossbeam::channel;
use tch::{nn, Device};

use crate::checkpoint::SavedCounters;
use crate::cli::TrainArgs;
use crate::config::TrainPlan;
use crate::console;
use crate::distributed::c10d::Group;
use crate::distributed::rank::{self, RankSync};
use crate::distributed::{Launch, ModelSum};
use crate::error::{Error, Result};
use crate::input_norm::{InputNorm, MEASURE_SEED, MEASURE_STEPS};
use crate::model::{ActorCritic, Body};
use crate::monitor::Monitor;
use crate::shared::SharedModel;
use crate::supervisor::Supervisor;
use crate::test_agent::{EpisodeStats, TestAgent};
use crate::trainer;

/// A resumed model that has already trained --max-steps agent steps, which count over
/// resumes: training it further would rewrite its checkpoint past the budget asked for.
struct SpentBudget {
    /// The model file, on the rank that reads it.
    model: Option<String>,
    agent_steps: u64,
    /// The run's step budget, --max-steps or a3g's limit.
    budget: u64,
}

impl SpentBudget {
    /// `--resume auto` is a command run again until its run is done, and that run is
    /// done; `--load` asked for more training than --max-steps allows, so it is told
    /// how to get it. Neither writes anything. A rank other than 0 says what it found
    /// and leaves the verdict to rank 0, whose flags chose the checkpoint.
    fn end(&self, args: &TrainArgs) -> Result<()> {
        let &SpentBudget { ref model, agent_steps, budget } = self;
        let limit = match args.max_steps {
            Some(asked) if asked <= budget => format!("--max-steps {asked}"),
            _ => format!("a3g's limit for one run, {budget}"),
        };
        let Some(model) = model else {
            console::say(&format!(
                "rank 0's model has trained {agent_steps} agent steps, {limit}: nothing is left to train"
            ));
            return Ok(());
        };
        if args.resume.is_some() {
            console::say(&format!(
                "{model} has trained {agent_steps} agent steps, {limit}: nothing is left to train"
            ));
            return Ok(());
        }
        Err(Error::BadArguments(format!(
            "{model} has already trained {agent_steps} agent steps, at or past {limit}, which counts \
             them over resumes; pass a larger --max-steps to train it further (a3g eval plays it as it is)"
        )))
    }
}

/// Runs `a3g train`.
pub fn run(args: &TrainArgs) -> Result<()> {
    // A rank other than 0 meets rank 0 first: a resumed run's model is the one rank 0's
    // checkpoint records, which this rank's flags may leave out.
    let launch = Launch::of_this_process()?.filter(|launch| launch.rank != 0);
    let early = match &launch {
        Some(launch) => {
            let mut group = Group::join(launch, Duration::from_secs_f64(args.sync_timeout))?;
            let record = rank::resumed_record(&mut group, None)?;
            Some((group, record))
        }
        None => None,
    };
    let mut plan = TrainPlan::new(args)?;
    let held = plan.hold_resumed_folder()?;
    let model = plan.open_model(early.as_ref().and_then(|(_, record)| record.as_ref()))?;
    let (mut config, test_env) = plan.into_config(model)?;
    if config.measure_input_norm {
        // Before the ranks compare settings, which include the scaling.
        let mut measured = config.env.make_seeded(MEASURE_SEED)?;
        if let Body::Mlp { input_norm, .. } = &mut config.spec.body {
            *input_norm = Some(InputNorm::measure(measured.as_mut(), MEASURE_STEPS)?);
        }
    }
    let resume = config.resume.take();
    let budget = config.run.step_budget;
    let spent = match (&resume, &early) {
        (Some(checkpoint), _) => Some(SpentBudget {
            model: Some(checkpoint.files.model.display().to_string()),
            agent_steps: checkpoint.sidecar.counters.agent_steps,
            budget,
        }),
        (None, Some((_, Some(record)))) => {
            Some(SpentBudget { model: None, agent_steps: record.counters.agent_steps, budget })
        }
        _ => None,
    }
    .filter(|resumed| resumed.agent_steps >= budget);
    // Alone, before the save folder is claimed; across machines, once every rank
    // knows rank 0's counters and has agreed on --max-steps.
    if let (Some(spent), None) = (&spent, &config.distributed) {
        return spent.end(args);
    }
    let chosen = trainer::chosen(&config);
    let resumed_from = resume.as_ref().map(|checkpoint| checkpoint.files.model.as_path());
    let _save_dir = config.claim_save_dir(chosen.memory_plan(&config), resumed_from, held)?;
    for note in &config.notes {
        console::warn(note);
    }
    // Before any model is built: a rank that cannot meet the others, or trains
    // something else, ends here on one line.
    let group = match &config.distributed {
        Some(distributed) => {
            let mut group = match early {
                Some((group, _)) => group,
                None => {
                    let mut group = Group::join(&distributed.launch, distributed.sync_timeout)?;
                    let resumed = resume.as_ref().map(|checkpoint| &checkpoint.sidecar);
                    rank::resumed_record(&mut group, resumed)?;
                    group
                }
            };
            rank::agree_on_settings(&mut group, &config.shared_settings())?;
            if let ModelSum::Nccl { gpu } = distributed.model_sum {
                rank::refuse_shared_gpu(&mut group, gpu)?;
                group.sum_on_gpu(gpu, distributed.sync_timeout)?;
                console::say(&format!(
                    "rank {} of {}: the ranks sum the model through NCCL, this one on cuda:{gpu}",
                    group.rank, group.world_size
                ));
            }
            Some(group)
        }
        None => None,
    };
    if let Some(spent) = spent {
        return spent.end(args);
    }
    // Only now does training go on whatever becomes of stdout.
    console::note_when_stdout_closes(if config.leads() {
        "training goes on, and its game log and checkpoints are still written"
    } else {
        "training goes on, and rank 0 writes the run's game log and checkpoints"
    });

    tch::set_num_threads(1);
    tch::manual_seed(config.seed as i64);
    // Owns the shared variables that every handle points into.
    let shared_store = nn::VarStore::new(Device::Cpu);
    let shared_model = ActorCritic::new(&shared_store, &config.spec);
    let names: Vec<String> =
        shared_model.parameters().iter().map(|(name, _)| name.clone()).collect();
    let shared = SharedModel::over(&shared_model, config.optimizer, config.lr);
    let (resumed, resumed_best) = match &resume {
        Some(checkpoint) => shared.resume(checkpoint, &names, config.optimizer)?,
        None => (SavedCounters::default(), None),
    };
    drop(resume);
    let mut monitor = Monitor::open(&config, names, shared.handle(), resumed, resumed_best)?;
    let supervisor = Supervisor::new(monitor.stop.clone());

    let sync_thread = match (group, &config.distributed, &monitor.peers) {
        (Some(group), Some(distributed), Some(peers)) => {
            // Every rank starts from rank 0's weights before any of its threads trains.
            let sync = RankSync::start(
                group,
                shared.handle(),
                monitor.counters.clone(),
                peers.clone(),
                distributed.sync_interval,
                distributed.sync_merge,
                distributed.sync_timeout,
                config.run.step_budget,
            )?;
            monitor.count_rates_from_now();
            let stop = monitor.stop.clone();
            Some(supervisor.spawn("sync", move || sync.run(&stop))?)
        }
        _ => None,
    };
    let mut trainer = chosen.start(&config, &shared, &monitor.counters, &supervisor)?;
    let (games_tx, games) = channel::unbounded::<EpisodeStats>();
    // Rank 0 alone plays test games. The other ranks keep the sender, unused, so that
    // the monitor does not take a closed channel for a test agent that died.
    let (test_thread, _idle_sender) = if config.leads() {
        let test_agent = TestAgent {
            env: test_env,
            spec: config.spec.clone(),
            // The reference's test agent runs on the last listed GPU.
            device: *config.devices.last().expect("at least one device"),
            shared: shared.handle(),
            max_episode_length: config.env.max_episode_length,
            core_share: config.test_share,
            pinned: monitor.pinned.clone(),
        };
        let (stop, started) = (monitor.stop.clone(), monitor.started);
        match supervisor.spawn("test agent", move || test_agent.run(stop, started, games_tx)) {
            Ok(handle) => (Some(handle), None),
            Err(err) => {
                supervisor.fail(err);
                let failure =
                    supervisor.join(trainer.into_threads().into_iter().chain(sync_thread));
                return monitor.finish(failure);
            }
        }
    } else {
        (None, Some(games_tx))
    };

    monitor.watch(&games, trainer.as_mut());
    let threads = trainer.into_threads().into_iter().chain(test_thread).chain(sync_thread);
    let failure = supervisor.join(threads);
    monitor.finish(failure)
}
