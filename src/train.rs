//! `a3g train`: validate everything, build the shared model and optimizer, start the
//! workers and the test agent, watch them (status lines, test games, checkpoints,
//! budgets, signals), then stop them all and write the final checkpoint.

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam::channel::{self, RecvTimeoutError};
use tch::{nn, Device, Tensor};

use crate::checkpoint::{self, Counters as SavedCounters, Sidecar};
use crate::cli::{OptimizerName, TrainArgs};
use crate::console;
use crate::device;
use crate::env::{self, CropTable};
use crate::error::{Error, Result};
use crate::game_log::{self, GameLog};
use crate::model::{ActorCritic, ModelSpec};
use crate::rollout::{LossConfig, RewardShaping};
use crate::shared_optim::{OptimizerKind, SharedOptimizer};
use crate::stop::{self, Stop, StopReason};
use crate::tensorboard::{Board, TrainingFigures};
use crate::tester::{self, EpisodeStats};
use crate::worker::{self, Counters, Worker, WorkerQueue, WorkerSetup};

/// The test agent's default share of one core on Atari: its games are long and
/// greedy play only measures progress, while every core it takes slows training.
const ATARI_TEST_SHARE: f64 = 0.1;

/// Test games the running mean is taken over (`a3g plot` takes its own over as many).
pub(crate) const MEAN_WINDOW: usize = 100;

/// Runs `a3g train`.
pub fn run(args: &TrainArgs) -> Result<()> {
    let workers =
        args.workers.unwrap_or_else(|| thread::available_parallelism().map_or(1, |n| n.get()));
    if workers == 0 {
        return Err(Error::BadArguments("--workers must be at least 1".into()));
    }
    let devices = device::select_list(&args.gpu_ids)?;
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    // One thread more than the cores: the test agent takes a share of a core, and the
    // extra rollout keeps every core busy meanwhile (measured: 167 against 145 agent
    // steps/s for 32 workers on 2 cores). Each device with workers gets a thread.
    let training_threads = workers.min(cores + 1).max(workers.min(devices.len()));
    if workers > training_threads {
        console::warn(&format!(
            "warning: {workers} workers on {cores} cores; they take turns, {training_threads} rollouts at a time, \
             so each collects experience more slowly"
        ));
    }
    let crops = CropTable::from_flag(args.environment.env_config.as_deref())?;
    let env_options = |seed: u64| args.environment.options(&crops, seed, args.model.screen());
    // Every environment is made before any thread starts, so a bad id or crop file
    // is reported before training begins.
    let envs = (0..workers)
        .map(|rank| env::make(&args.environment.env, &env_options(args.seed + rank as u64)))
        .collect::<Result<Vec<_>>>()?;
    let test_env = env::make(&args.environment.env, &env_options(args.seed + workers as u64))?;
    let spec = ModelSpec::for_env(
        test_env.observation_shape(),
        test_env.action_space(),
        args.hidden_size.unwrap_or(args.model.default_hidden_size()),
        args.lstm,
    );
    check_memory(&spec, training_threads)?;
    let env_id = &args.environment.env;
    // The folder is held before anything in it is read or written.
    let _folder_lock = checkpoint::lock_folder(&args.save_model_dir, env_id)?;
    refuse_to_replace(args)?;
    let removed = checkpoint::remove_stale_temporaries(&args.save_model_dir);
    if removed > 0 {
        console::warn(&format!(
            "note: removed {removed} temporary files that an interrupted run left in {}",
            args.save_model_dir.display()
        ));
    }
    let optimizer_kind = match args.optimizer {
        OptimizerName::Adam => OptimizerKind::Adam { amsgrad: args.amsgrad },
        OptimizerName::RmsProp => OptimizerKind::RmsProp,
    };

    tch::set_num_threads(1);
    tch::manual_seed(args.seed as i64);
    let shared_vs = nn::VarStore::new(Device::Cpu);
    let shared_model = ActorCritic::new(&shared_vs, &spec);
    let parameter_names: Vec<String> =
        shared_model.parameters().iter().map(|(name, _)| name.clone()).collect();
    let shared_parameters = || -> Vec<Tensor> {
        shared_model.parameters().iter().map(|(_, t)| t.shallow_clone()).collect()
    };
    let optimizer = SharedOptimizer::new(optimizer_kind, args.lr, &shared_parameters());
    let (resumed, resumed_best) = if args.load {
        resume(args, optimizer_kind, &shared_model, &optimizer)?
    } else {
        (SavedCounters::default(), None)
    };
    let mut checkpoints = checkpoint::CheckpointWriter::new(&args.save_model_dir, env_id)?;

    let log_path = args.log_dir.join(format!("{}_log", env_id.replace('/', "_")));
    let separator = if args.load {
        format!("--- a3g train resumed here, at {} agent steps ---", resumed.agent_steps)
    } else {
        "--- a3g train started a new run here ---".to_string()
    };
    let mut log = GameLog::append(&log_path, args, &separator)?;
    let mut board = if args.tensorboard_logger {
        Some(Board::create(&args.tensorboard_dir, &args.environment.env)?)
    } else {
        None
    };
    stop::catch_signals(format!(
        "{} keeps the last complete checkpoint",
        args.save_model_dir.display()
    ));
    let stop = Stop::default();
    let counters = Arc::new(Counters::default());
    counters.agent_steps.store(resumed.agent_steps, Ordering::Relaxed);
    counters.env_frames.store(resumed.env_frames, Ordering::Relaxed);
    counters.updates.store(resumed.updates, Ordering::Relaxed);
    let started = Instant::now();
    let loss = LossConfig {
        gamma: args.gamma,
        tau: args.tau,
        entropy_coef: args.entropy_coef,
        value_coef: args.value_coef,
    };

    // One queue per device: a thread's local model serves only its device's workers.
    let mut queued: Vec<Vec<Worker>> = devices.iter().map(|_| Vec::new()).collect();
    for (rank, env) in envs.into_iter().enumerate() {
        let num_steps = if args.distributed_step_size.is_empty() {
            args.num_steps
        } else {
            args.distributed_step_size[rank % args.distributed_step_size.len()]
        };
        queued[rank % devices.len()].push(Worker::new(WorkerSetup {
            rank,
            device: device::for_worker(&devices, rank),
            env,
            spec: spec.clone(),
            shared_parameters: shared_parameters(),
            optimizer: if args.shared_optimizer {
                optimizer.share()
            } else {
                SharedOptimizer::new(optimizer_kind, args.lr, &shared_parameters())
            },
            num_steps,
            max_episode_length: args.environment.max_episode_length,
            loss,
            rewards: RewardShaping { scale: args.reward_scale, clip: args.reward_clip.0 },
            seed: args.seed + rank as u64,
            counters: Arc::clone(&counters),
            profile_phases: args.profile_phases,
        }));
    }
    console::say(&device::placement(&devices, workers));
    let queues: Vec<WorkerQueue> = queued.into_iter().map(WorkerQueue::new).collect();
    let (results_tx, results) = channel::unbounded::<EpisodeStats>();
    let mut handles = Vec::new();
    for index in 0..training_threads {
        let queue = queues[index % devices.len()].clone();
        let device = devices[index % devices.len()];
        let (spec, stop) = (spec.clone(), stop.clone());
        let handle = thread::Builder::new()
            .name(format!("training {index}"))
            .spawn(move || {
                // A panic would otherwise leave the run going one thread short until
                // its budget ran out.
                let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
                    worker::run_training_thread(queue, &spec, device, &stop)
                }));
                match outcome {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => stop.request(StopReason::Failure(err.report())),
                    Err(_) => stop
                        .request(StopReason::Failure(format!("training thread {index} panicked"))),
                }
            })
            .map_err(|source| Error::Io {
                action: "start a training thread for",
                path: PathBuf::from(&args.environment.env),
                cause: source,
            })?;
        handles.push(handle);
    }
    let tester_handle = {
        let test_agent = tester::TestAgent {
            env: test_env,
            spec: spec.clone(),
            // The reference's test agent runs on the last listed GPU.
            device: *devices.last().expect("at least one device"),
            shared_parameters: shared_parameters(),
            max_episode_length: args.environment.max_episode_length,
            core_share: args.test_share.unwrap_or(match spec.body {
                crate::model::Body::AtariLstm | crate::model::Body::Universe => ATARI_TEST_SHARE,
                crate::model::Body::Mlp { .. } => 1.0,
            }),
        };
        let stop = stop.clone();
        thread::Builder::new()
            .name("test agent".into())
            .spawn(move || test_agent.run(stop, started, results_tx))
            .map_err(|source| Error::Io {
                action: "start the test agent for",
                path: PathBuf::from(&args.environment.env),
                cause: source,
            })?
    };

    let checkpoint_for = |counters: &Counters, test_games: u64| Sidecar {
        a3g_version: env!("CARGO_PKG_VERSION").to_string(),
        env: args.environment.env.clone(),
        model: spec.clone(),
        optimizer: optimizer_kind,
        counters: SavedCounters {
            agent_steps: counters.agent_steps.load(Ordering::Relaxed),
            env_frames: counters.env_frames.load(Ordering::Relaxed),
            updates: counters.updates.load(Ordering::Relaxed),
            test_games,
        },
        best_score: None,
        checksums: None,
        // Plain data (paths are written lossily), so this cannot fail in practice.
        args: serde_json::to_value(args).unwrap_or_default(),
    };
    let mut save = |test_games: u64, best: f64, model: &[(String, Tensor)]| -> Result<()> {
        let sidecar = Sidecar {
            best_score: best.is_finite().then_some(best),
            ..checkpoint_for(&counters, test_games)
        };
        checkpoints.save(&sidecar, model, &optimizer.named_statistics(&parameter_names))
    };

    let mut recent: VecDeque<f64> = VecDeque::with_capacity(MEAN_WINDOW);
    // A resumed --save-max run only saves weights that match the best it had.
    let mut best = resumed_best.unwrap_or(f64::NEG_INFINITY);
    let mut saved_best = false;
    let mut test_games = resumed.test_games;
    let status_interval = Duration::from_secs_f64(args.status_interval.max(0.1));
    let mut status = StatusClock::new(started, &counters);
    let mut monitor_error = None;
    while !stop.requested() {
        match results.recv_timeout(Duration::from_millis(50)) {
            Ok(first) => {
                // Every game already waiting is logged, but only the last one worth
                // keeping is saved: a save syncs three files to disk, and short games
                // (CartPole's first ones take milliseconds) would otherwise queue up
                // faster than they are saved, delaying --stop-at-mean and the log.
                let mut to_save = None;
                for game in std::iter::once(first).chain(results.try_iter()) {
                    test_games += 1;
                    if recent.len() == MEAN_WINDOW {
                        recent.pop_front();
                    }
                    recent.push_back(game.reward);
                    let mean = recent.iter().sum::<f64>() / recent.len() as f64;
                    let played: Vec<(String, Tensor)> =
                        parameter_names.iter().cloned().zip(game.weights).collect();
                    if let Some(board) = board.as_mut() {
                        let steps = counters.agent_steps.load(Ordering::Relaxed);
                        board.test_game(steps, game.reward, game.length, mean, &played);
                    }
                    let line =
                        game_log::game_line(game.finished_at, game.reward, game.length, mean);
                    console::say(&line);
                    if let Err(err) = log.write_line(&line) {
                        monitor_error = Some(err);
                        stop.request(StopReason::Failure("cannot write the log".into()));
                    }
                    let new_best = best.max(game.reward);
                    if !args.save_max || game.reward >= best {
                        to_save = Some((test_games, new_best, played));
                    }
                    best = new_best;
                    if args
                        .stop_at_mean
                        .is_some_and(|target| recent.len() == MEAN_WINDOW && mean >= target)
                    {
                        stop.request(StopReason::TargetScore);
                    }
                }
                if let Some((games, best_so_far, played)) = to_save {
                    saved_best = true;
                    if let Err(err) = save(games, best_so_far, &played) {
                        monitor_error = Some(err);
                        stop.request(StopReason::Failure("cannot write the checkpoint".into()));
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            // The test agent only hangs up when asked to stop; otherwise it died, and
            // the loop would spin on the closed channel with nothing left to report.
            Err(RecvTimeoutError::Disconnected) => {
                stop.request(StopReason::Failure("the test agent stopped unexpectedly".into()))
            }
        }
        if status.due(status_interval) {
            let sample = status.sample(&counters);
            let line = sample.line();
            console::say(&line);
            // In the log too, so that a learning curve can be drawn against agent steps
            // from the log alone (scripts reading the reference's logs skip such lines).
            if let Err(err) = log.write_line(&line) {
                monitor_error = Some(err);
                stop.request(StopReason::Failure("cannot write the log".into()));
            }
            if let Some(board) = board.as_mut() {
                board.training(
                    sample.agent_steps,
                    &TrainingFigures {
                        steps_per_second: sample.steps_per_second,
                        frames_per_second: sample.frames_per_second,
                        policy_loss: sample.policy_loss,
                        value_loss: sample.value_loss,
                        entropy: sample.entropy,
                        learning_rate: args.lr,
                    },
                );
            }
        }
        let steps = counters.agent_steps.load(Ordering::Relaxed);
        if args.max_steps.is_some_and(|max| steps >= max) {
            stop.request(StopReason::StepBudget);
        }
        if args.max_time.as_ref().is_some_and(|max| started.elapsed() >= max.duration()) {
            stop.request(StopReason::TimeBudget);
        }
    }

    let mut failure = None;
    for handle in handles {
        // Panics were caught and reported through `stop`.
        let _ = handle.join();
    }
    if tester_handle.join().is_err() {
        failure.get_or_insert("the test agent panicked".to_string());
    }
    if let Some(err) = monitor_error {
        return Err(err);
    }
    if let Some(StopReason::Failure(message)) = stop.reason() {
        return Err(Error::Training(message));
    }
    if let Some(message) = failure {
        return Err(Error::Training(message));
    }
    // The latest weights are kept for --load to resume from, unless --save-max
    // already wrote the best game's weights, which they would overwrite.
    if !(args.save_max && saved_best) {
        save(test_games, best, shared_model.parameters())?;
    }
    let reason = match stop.reason() {
        Some(StopReason::StepBudget) => "reached --max-steps",
        Some(StopReason::TimeBudget) => "reached --max-time",
        Some(StopReason::TargetScore) => "reached --stop-at-mean",
        Some(StopReason::Signal) => "interrupted",
        _ => "stopped",
    };
    console::say(&status.sample(&counters).line());
    if let Some(board) = board.as_mut() {
        board.flush();
        console::say(&format!("TensorBoard event files are in {}", board.dir().display()));
    }
    let model_file = checkpoint::CheckpointFiles::new(&args.save_model_dir, env_id).model;
    let steps = counters.agent_steps.load(Ordering::Relaxed);
    if args.save_max && saved_best {
        console::say(&format!(
            "{reason} after {steps} agent steps: {} holds the best test game's weights (score {best})",
            model_file.display()
        ));
    } else {
        console::say(&format!(
            "{reason}: saved {} after {steps} agent steps",
            model_file.display()
        ));
    }
    Ok(())
}

/// Refuses a run that would replace a model it did not start from: a fresh run, or
/// one resumed from another folder, aimed at a folder that already holds a checkpoint
/// of its env, unless --overwrite says so.
fn refuse_to_replace(args: &TrainArgs) -> Result<()> {
    if args.overwrite {
        return Ok(());
    }
    let env = &args.environment.env;
    let resuming_here = args.load && same_folder(&args.load_model_dir, &args.save_model_dir);
    let files = checkpoint::CheckpointFiles::new(&args.save_model_dir, env);
    let previous = checkpoint::CheckpointFiles::previous(&args.save_model_dir, env);
    if !resuming_here && (files.any_exists() || previous.any_exists()) {
        return Err(Error::ExistingCheckpoint { path: files.model, env: env.clone() });
    }
    Ok(())
}

fn same_folder(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Refuses a model too big for the machine before any of it is allocated: libtorch
/// would otherwise abort with a C++ trace. Counts the shared weights, up to three
/// optimizer statistics, each training thread's copy and gradients, the test agent's
/// copy and a checkpoint's copies.
fn check_memory(spec: &ModelSpec, training_threads: usize) -> Result<()> {
    let copies = 8.0 + 2.0 * training_threads as f64;
    let needed = spec.parameter_count() * 4.0 * copies;
    let Some(available) = available_memory() else { return Ok(()) };
    if needed <= available {
        return Ok(());
    }
    Err(Error::BadArguments(format!(
        "--hidden-size {} gives {:.3e} parameters, which need about {:.1} GB here (weights, optimizer \
         statistics and {training_threads} training copies) and {:.1} GB is available; pick a smaller --hidden-size",
        spec.hidden_size,
        spec.parameter_count(),
        needed / 1e9,
        available / 1e9
    )))
}

/// Bytes of memory available to new allocations (MemAvailable in /proc/meminfo).
fn available_memory() -> Option<f64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kilobytes: f64 = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kilobytes * 1024.0)
}

/// Loads the checkpoint of `--env` from --load-model-dir into the shared model
/// and optimizer; returns the counters to continue from and the best test score.
fn resume(
    args: &TrainArgs,
    optimizer_kind: OptimizerKind,
    model: &ActorCritic,
    optimizer: &SharedOptimizer,
) -> Result<(SavedCounters, Option<f64>)> {
    let loaded = checkpoint::load(&args.load_model_dir, &args.environment.env)?;
    loaded.sidecar.check_env(&loaded.files.sidecar, &args.environment.env)?;
    let advice =
        "pass the flags it was trained with (its .json sidecar lists them) or start without --load";
    checkpoint::copy_matching(&loaded.files.model, &loaded.model, model.parameters(), advice)?;
    match &loaded.optimizer {
        Some(statistics) if loaded.sidecar.optimizer == optimizer_kind => {
            let names: Vec<String> =
                model.parameters().iter().map(|(name, _)| name.clone()).collect();
            let targets: Vec<(String, Tensor)> = optimizer
                .named_statistics(&names)
                .into_iter()
                .map(|(name, tensor)| (name, tensor.shallow_clone()))
                .collect();
            checkpoint::copy_matching(&loaded.files.optimizer, statistics, &targets, advice)?;
            optimizer.set_steps(loaded.sidecar.counters.updates);
        }
        Some(_) => console::warn(&format!(
            "note: the checkpoint's optimizer statistics are {:?}'s, not --optimizer's; starting them afresh",
            loaded.sidecar.optimizer
        )),
        None => console::warn(&format!(
            "note: {} is missing, so the optimizer statistics start afresh",
            loaded.files.optimizer.display()
        )),
    }
    console::say(&format!(
        "resumed {} at {} agent steps",
        loaded.files.model.display(),
        loaded.sidecar.counters.agent_steps
    ));
    Ok((loaded.sidecar.counters, loaded.sidecar.best_score))
}

/// What a status line reports: totals, and rates and means since the previous line.
struct Status {
    elapsed: Duration,
    agent_steps: u64,
    env_frames: u64,
    steps_per_second: f64,
    frames_per_second: f64,
    updates_per_second: f64,
    skipped_updates: u64,
    policy_loss: f64,
    value_loss: f64,
    entropy: f64,
    /// Milliseconds per update in each phase.
    phase_milliseconds: Vec<(&'static str, f64)>,
}

impl Status {
    fn line(&self) -> String {
        let phases: Vec<String> =
            self.phase_milliseconds.iter().map(|(name, ms)| format!("{name} {ms:.2}")).collect();
        format!(
            "[{}] agent steps {}, emulator frames {}, {:.0} steps/s, {:.0} frames/s, {:.1} updates/s, \
             skipped updates {}, policy loss {}, value loss {}, entropy {}, ms per update: {}",
            game_log::clock(self.elapsed),
            self.agent_steps,
            self.env_frames,
            self.steps_per_second,
            self.frames_per_second,
            self.updates_per_second,
            self.skipped_updates,
            loss(self.policy_loss),
            loss(self.value_loss),
            loss(self.entropy),
            phases.join(", "),
        )
    }
}

/// A mean loss term to four decimals, or "-" in an interval without any kept update,
/// where the mean is 0/0: no update is not a diverged one.
fn loss(mean: f64) -> String {
    if mean.is_nan() {
        "-".into()
    } else {
        format!("{mean:.4}")
    }
}

/// The counters as of the previous status line.
struct StatusClock {
    started: Instant,
    last: Instant,
    last_steps: u64,
    last_frames: u64,
    last_updates: u64,
    last_attempts: u64,
    last_losses: [f64; 3],
    last_phases: [(&'static str, u64); 5],
}

impl StatusClock {
    fn new(started: Instant, counters: &Counters) -> Self {
        StatusClock {
            started,
            last: started,
            last_steps: counters.agent_steps.load(Ordering::Relaxed),
            last_frames: counters.env_frames.load(Ordering::Relaxed),
            last_updates: counters.updates.load(Ordering::Relaxed),
            last_attempts: attempts(counters),
            last_losses: loss_sums(counters),
            last_phases: counters.phases.totals(),
        }
    }

    fn due(&self, interval: Duration) -> bool {
        self.last.elapsed() >= interval
    }

    /// Reads the counters for a status line and starts the next interval.
    fn sample(&mut self, counters: &Counters) -> Status {
        let seconds = self.last.elapsed().as_secs_f64().max(1e-9);
        let steps = counters.agent_steps.load(Ordering::Relaxed);
        let frames = counters.env_frames.load(Ordering::Relaxed);
        let updates = counters.updates.load(Ordering::Relaxed);
        let attempted = attempts(counters);
        let losses = loss_sums(counters);
        let phases = counters.phases.totals();
        let kept = (updates - self.last_updates) as f64;
        let mean_loss = |index: usize| (losses[index] - self.last_losses[index]) / kept;
        let status = Status {
            elapsed: self.started.elapsed(),
            agent_steps: steps,
            env_frames: frames,
            steps_per_second: (steps - self.last_steps) as f64 / seconds,
            frames_per_second: (frames - self.last_frames) as f64 / seconds,
            updates_per_second: kept / seconds,
            skipped_updates: counters.skipped_updates.load(Ordering::Relaxed),
            policy_loss: mean_loss(0),
            value_loss: mean_loss(1),
            entropy: mean_loss(2),
            phase_milliseconds: phases
                .iter()
                .zip(&self.last_phases)
                .map(|((name, total), (_, before))| {
                    let updates = (attempted - self.last_attempts).max(1) as f64;
                    (*name, (total - before) as f64 / 1e6 / updates)
                })
                .collect(),
        };
        (self.last, self.last_steps, self.last_frames, self.last_updates) =
            (Instant::now(), steps, frames, updates);
        (self.last_attempts, self.last_losses, self.last_phases) = (attempted, losses, phases);
        status
    }
}

/// Updates attempted so far, kept or skipped: what the phase times are summed over.
fn attempts(counters: &Counters) -> u64 {
    counters.updates.load(Ordering::Relaxed) + counters.skipped_updates.load(Ordering::Relaxed)
}

/// The summed policy loss, value loss and entropy.
fn loss_sums(counters: &Counters) -> [f64; 3] {
    [&counters.policy_loss_sum, &counters.value_loss_sum, &counters.entropy_sum]
        .map(|sum| f64::from_bits(sum.load(Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval without a kept update shows its loss terms as "-", not as the NaN
    /// of 0/0, which read as a diverged model; real means keep four decimals.
    #[test]
    fn loss_terms_without_updates_are_a_dash() {
        assert_eq!(loss(f64::NAN), "-");
        let no_updates = 0.0;
        assert_eq!(loss(no_updates / no_updates), "-");
        assert_eq!(loss(-0.123456), "-0.1235");
    }
}
