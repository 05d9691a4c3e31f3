//! Watching a training run, whichever trainer runs it: the live counters every
//! training thread adds to, status lines (stdout, the game log, TensorBoard), the test
//! agent's games (log, TensorBoard, checkpoints, --save-max, --stop-at-mean), the
//! budgets (--max-steps, --max-time) and the final checkpoint.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, RecvTimeoutError};
use tch::Tensor;

use crate::checkpoint::{self, CheckpointWriter, SavedCounters, Sidecar};
use crate::config::TrainConfig;
use crate::console;
use crate::counters::TrainingCounters;
use crate::distributed::rank::PeerCounters;
use crate::error::{os_reason, Error, Result};
use crate::game_log::{self, GameLog, MEAN_WINDOW};
use crate::shared::SharedModel;
use crate::stop::{self, Stop, StopReason};
use crate::tensorboard::{Board, TrainingFigures};
use crate::test_agent::{EpisodeStats, PinnedWeights};
use crate::trainer::RunningTrainer;

/// A test game's weights worth a checkpoint, with what its sidecar records.
struct Keep {
    test_games: u64,
    best: f64,
    weights: Vec<(String, Tensor)>,
    /// For --save-max, the counters and optimizer statistics of the moment the game
    /// was recorded, which the set keeps with its weights; otherwise the set takes
    /// those of the moment it is written.
    moment: Option<Moment>,
}

/// The counters and optimizer statistics of one moment of a run, kept with the best
/// game's weights so that a --save-max set resumes as of its own time, not the run's
/// end.
struct Moment {
    counters: SavedCounters,
    statistics: Vec<(String, Tensor)>,
}

/// What the final checkpoint holds when it is not the latest weights.
enum Kept {
    /// --save-max's best game's weights, still to be written.
    Best(Keep),
    /// --save-max's best game's weights, written during the run.
    AlreadySaved,
    /// Weights that met --stop-at-mean and its confirmation.
    Confirmed(Vec<(String, Tensor)>),
}

/// Weights that met --stop-at-mean, being played by the test agent for
/// --confirm-games more games before the run stops on them.
struct Confirmation {
    pin: u64,
    weights: Vec<(String, Tensor)>,
    scores: Vec<f64>,
}

/// Everything the monitor writes to and reads from.
pub struct Monitor<'a> {
    config: &'a TrainConfig,
    /// Checkpoint names of the parameters, in the shared model's order.
    names: Vec<String>,
    /// The handle whose optimizer statistics are saved.
    shared: SharedModel,
    /// The checkpoint writer, the game log and TensorBoard are rank 0's alone in a
    /// run across machines.
    checkpoints: Option<CheckpointWriter>,
    /// The game log, until a write to it fails.
    log: Option<GameLog>,
    board: Option<Board>,
    pub counters: Arc<TrainingCounters>,
    /// What the other ranks of a run across machines counted, as of the last sync.
    pub peers: Option<Arc<PeerCounters>>,
    pub stop: Stop,
    pub started: Instant,
    /// The counters as of the previous status line.
    status: StatusClock,
    /// Test games played over the whole run, resumed ones included.
    test_games: u64,
    recent: VecDeque<f64>,
    best: f64,
    /// Whether this run found weights for a --save-max checkpoint (written, or
    /// waiting in `unsaved`).
    saved_best: bool,
    /// A resumed --save-max run's starting set (weights, counters and statistics),
    /// whose weights scored the recorded best: what the final checkpoint keeps if no
    /// game of this run matches it.
    resumed_best: Option<Keep>,
    /// Where the test agent is told to play weights being confirmed.
    pub pinned: PinnedWeights,
    confirmation: Option<Confirmation>,
    /// Weights that met --stop-at-mean and were confirmed: what the run ends with.
    confirmed: Option<Vec<(String, Tensor)>>,
    /// The latest test game's weights worth keeping, waiting for --save-interval.
    unsaved: Option<Keep>,
    /// When the last checkpoint after a test game was written.
    last_save: Option<Instant>,
    /// The first error of the monitor's own (log, checkpoint), ended with.
    error: Option<Error>,
    /// Updates the model had when this run started (resumed ones, or 0).
    updates_at_start: u64,
}

impl<'a> Monitor<'a> {
    /// Opens the checkpoint writer, the game log (with a line saying where this run
    /// starts) and TensorBoard, and starts catching Ctrl-C.
    pub fn open(
        config: &'a TrainConfig,
        names: Vec<String>,
        shared: SharedModel,
        resumed: SavedCounters,
        resumed_best: Option<f64>,
    ) -> Result<Self> {
        let run = &config.run;
        let env_id = &config.env.id;
        let leads = config.leads();
        let checkpoints =
            leads.then(|| CheckpointWriter::new(&run.save_model_dir, env_id)).transpose()?;
        let separator = if run.resumed {
            game_log::resumed_separator(resumed.agent_steps)
        } else {
            game_log::NEW_RUN.to_string()
        };
        let log = leads
            .then(|| GameLog::append(&run.log_path, &config.arguments, &separator))
            .transpose()?;
        let board = match (&run.tensorboard_dir, leads) {
            (Some(dir), true) => Some(Board::create(dir, env_id)?),
            _ => None,
        };
        let peers = config.distributed.as_ref().map(|_| Arc::new(PeerCounters::default()));
        if leads {
            stop::catch_signals(
                "stopping: writing a final checkpoint; press Ctrl-C again to quit at once",
                format!("{} keeps the last complete checkpoint", run.save_model_dir.display()),
            );
        } else {
            stop::catch_signals(
                "stopping: the other ranks stop at the next sync, and rank 0 writes the final checkpoint; \
                 press Ctrl-C again to quit at once",
                "rank 0 keeps the last complete checkpoint".to_string(),
            );
        }
        let counters = Arc::new(TrainingCounters::resumed(&resumed, Some(run.step_budget)));
        let resumed_best = match resumed_best {
            Some(best) if run.save_max => Some(Keep {
                test_games: resumed.test_games,
                best,
                weights: names.iter().cloned().zip(shared.snapshot()).collect(),
                moment: Some(Moment { counters: resumed, statistics: shared.statistics(&names) }),
            }),
            _ => None,
        };
        let started = Instant::now();
        Ok(Monitor {
            status: StatusClock::new(started, &counters, None),
            config,
            names,
            shared,
            checkpoints,
            log,
            board,
            counters,
            peers,
            stop: Stop::default(),
            started,
            test_games: resumed.test_games,
            recent: VecDeque::with_capacity(MEAN_WINDOW),
            // A resumed --save-max run only saves weights that match the best it had.
            best: resumed_best.as_ref().map_or(f64::NEG_INFINITY, |keep| keep.best),
            saved_best: false,
            resumed_best,
            pinned: PinnedWeights::default(),
            confirmation: None,
            confirmed: None,
            unsaved: None,
            last_save: None,
            error: None,
            updates_at_start: resumed.updates,
        })
    }

    /// Starts the status lines' rates from the counts as they are now: called once
    /// the ranks of a run across machines have told each other their counts, so that
    /// a rank does not take another's resumed steps for steps made in its first
    /// interval.
    pub fn count_rates_from_now(&mut self) {
        self.status = StatusClock::new(self.started, &self.counters, self.peers.as_deref());
    }

    /// Watches the run until a stop is requested: test games as they come, a status
    /// line every --status-interval, the budgets.
    pub fn watch(&mut self, games: &Receiver<EpisodeStats>, trainer: &mut dyn RunningTrainer) {
        let run = &self.config.run;
        self.status.updates_play = trainer.updates_play();
        while !self.stop.requested() {
            match games.recv_timeout(Duration::from_millis(50)) {
                Ok(first) => {
                    let waiting: Vec<EpisodeStats> =
                        std::iter::once(first).chain(games.try_iter()).collect();
                    self.record_games(waiting);
                }
                Err(RecvTimeoutError::Timeout) => {}
                // The test agent only hangs up when asked to stop; otherwise it died,
                // and the loop would spin on the closed channel with nothing to report.
                Err(RecvTimeoutError::Disconnected) => self
                    .stop
                    .request(StopReason::Failure("the test agent stopped unexpectedly".into())),
            }
            self.save_if_due();
            let steps = self.counters.agent_steps.load(Ordering::Relaxed);
            if let Some(line) = trainer.tick(steps) {
                self.write_line(&line);
            }
            if self.status.due(run.status_interval) {
                let seconds = self.status.seconds_since_last();
                let sample = self.status.sample(&self.counters, self.peers.as_deref());
                self.write_line(&join_status(sample.line(), trainer.status(seconds)));
                if let Some(board) = self.board.as_mut() {
                    board.training(
                        sample.agent_steps,
                        &TrainingFigures {
                            steps_per_second: sample.steps_per_second,
                            frames_per_second: sample.frames_per_second,
                            policy_loss: sample.policy_loss,
                            value_loss: sample.value_loss,
                            entropy: sample.entropy,
                            learning_rate: self.shared.optimizer().learning_rate(steps),
                        },
                    );
                }
            }
            // A run resumed at or past its budget counts no step to spend it.
            if self.counters.step_budget.is_some_and(|max| steps >= max) {
                self.stop.request(StopReason::StepBudget);
            }
            if run.max_time.is_some_and(|max| self.started.elapsed() >= max) {
                self.stop.request(StopReason::TimeBudget);
            }
        }
        // The run's last status line, over the time since the previous one; in the log
        // as well, so that a curve against agent steps reaches the run's end.
        let seconds = self.status.seconds_since_last();
        let sample = self.status.sample(&self.counters, self.peers.as_deref());
        let line = join_status(sample.line(), trainer.status(seconds));
        self.write_line(&line);
    }

    /// Logs the games that were waiting, up to one that meets --stop-at-mean, and keeps
    /// the weights of the last one worth keeping for the next checkpoint: a save syncs
    /// three files to disk, and short games (CartPole's first ones take milliseconds)
    /// would otherwise queue up faster than they are saved, delaying --stop-at-mean and
    /// the log.
    fn record_games(&mut self, games: Vec<EpisodeStats>) {
        let run = &self.config.run;
        for game in games {
            self.test_games += 1;
            if self.recent.len() == MEAN_WINDOW {
                self.recent.pop_front();
            }
            self.recent.push_back(game.reward);
            let mean = self.recent.iter().sum::<f64>() / self.recent.len() as f64;
            let played: Vec<(String, Tensor)> =
                self.names.iter().cloned().zip(game.weights).collect();
            if let Some(board) = self.board.as_mut() {
                let steps = self.counters.agent_steps.load(Ordering::Relaxed);
                board.test_game(steps, game.reward, game.length, mean, &played);
            }
            self.write_line(&game_log::game_line(game.finished_at, game.reward, game.length, mean));
            let new_best = self.best.max(game.reward);
            if !run.save_max || game.reward >= self.best {
                let weights = played.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
                let moment = run.save_max.then(|| Moment {
                    counters: self.world_counters(self.test_games),
                    statistics: self.shared.statistics(&self.names),
                });
                self.unsaved =
                    Some(Keep { test_games: self.test_games, best: new_best, weights, moment });
                self.saved_best = true;
            }
            self.best = new_best;
            let Some(target) = run.stop_at_mean else { continue };
            if self.confirmation.is_some() {
                if self.confirm(game.pin, game.reward, target) {
                    break;
                }
            } else if self.recent.len() == MEAN_WINDOW && mean >= target {
                if run.confirm_games == 0 {
                    // Games queued behind this one finished after the target was met,
                    // as games that finish once a stop is asked for do: left out, so
                    // that the log and the checkpoint end at the mean that met it.
                    self.stop.request(StopReason::TargetScore);
                    break;
                }
                let weights = played.iter().map(|(_, tensor)| tensor.shallow_clone()).collect();
                let pin = self.pinned.pin(weights);
                self.write_line(&format!(
                    "the 100-game mean reached --stop-at-mean {target}; the weights of this game now play {} \
                     more games to confirm it (training goes on meanwhile)",
                    run.confirm_games
                ));
                self.confirmation = Some(Confirmation { pin, weights: played, scores: Vec::new() });
            }
        }
    }

    /// Counts a test game towards the confirmation under way if the confirmed weights
    /// played it; once --confirm-games were played, stops the run on those weights if
    /// their mean met `target` (returning true), or goes back to training on.
    fn confirm(&mut self, pin: Option<u64>, reward: f64, target: f64) -> bool {
        let wanted = self.config.run.confirm_games;
        let Some(confirmation) = self.confirmation.as_mut() else { return false };
        if pin != Some(confirmation.pin) {
            return false;
        }
        confirmation.scores.push(reward);
        if confirmation.scores.len() < wanted {
            return false;
        }
        let Some(confirmation) = self.confirmation.take() else { return false };
        self.pinned.release();
        let mean = confirmation.scores.iter().sum::<f64>() / wanted as f64;
        if mean >= target {
            self.write_line(&format!(
                "confirmed: the weights scored a mean of {mean:.4} over {wanted} games, meeting --stop-at-mean {target}"
            ));
            self.confirmed = Some(confirmation.weights);
            self.stop.request(StopReason::TargetScore);
            return true;
        }
        self.write_line(&format!(
            "not confirmed: the weights scored a mean of {mean:.4} over {wanted} games, below --stop-at-mean {target}; \
             training goes on"
        ));
        false
    }

    /// Writes the waiting test game's weights once --save-interval has passed since
    /// the last such checkpoint.
    fn save_if_due(&mut self) {
        let interval = self.config.run.save_interval;
        if self.last_save.is_some_and(|last| last.elapsed() < interval) {
            return;
        }
        // Weights no update has changed are the fresh or resumed ones: not worth a
        // file, nor the rotation of the set before them.
        if !self.trained_this_run() {
            return;
        }
        let Some(keep) = self.unsaved.take() else { return };
        self.last_save = Some(Instant::now());
        if let Err(err) = self.save(&keep) {
            self.fail(err, "cannot write the checkpoint");
        }
    }

    /// A line on stdout and in the game log; status lines go in the log too, so that a
    /// learning curve can be drawn against agent steps from the log alone (scripts
    /// reading the reference's logs skip such lines).
    ///
    /// A log that cannot be written (a full disk) is given up with one note on stderr
    /// and training goes on, as with TensorBoard: the checkpoints are what must not be
    /// lost, and their own failure is what stops a run.
    fn write_line(&mut self, line: &str) {
        console::say(line);
        let Some(log) = self.log.as_mut() else { return };
        if let Err(err) = log.write_line(line) {
            // The problem without the error's remedy ("run again"): the run goes on.
            let problem = match &err {
                Error::Io { action, path, cause } => {
                    format!("cannot {action} {}: {}", path.display(), os_reason(cause))
                }
                other => other.report(),
            };
            console::warn(&format!(
                "warning: {problem}; training goes on without the game log (its lines still go to stdout)"
            ));
            self.log = None;
        }
    }

    fn fail(&mut self, err: Error, summary: &str) {
        self.error.get_or_insert(err);
        self.stop.request(StopReason::Failure(summary.into()));
    }

    /// Whether any update, of this rank or merged from the others, has changed the
    /// weights the run started from.
    fn trained_this_run(&self) -> bool {
        self.world_counters(0).updates > self.updates_at_start
    }

    /// This run's counters as they are now, the other ranks' included, with
    /// `test_games`.
    fn world_counters(&self, test_games: u64) -> SavedCounters {
        let (counters, peers) = (&self.counters, self.peers.as_deref());
        SavedCounters {
            agent_steps: world(&counters.agent_steps, peers.map(|peers| &peers.agent_steps)),
            env_frames: world(&counters.env_frames, peers.map(|peers| &peers.env_frames)),
            updates: world(&counters.updates, peers.map(|peers| &peers.updates)),
            test_games,
        }
    }

    /// Writes `keep`'s weights as the checkpoint, with the counters and optimizer
    /// statistics of its moment when it has one, else of now.
    fn save(&mut self, keep: &Keep) -> Result<()> {
        if self.checkpoints.is_none() {
            return Ok(());
        }
        let now;
        let (counters, statistics) = match &keep.moment {
            Some(moment) => (moment.counters, &moment.statistics),
            None => {
                now = self.shared.statistics(&self.names);
                (self.world_counters(keep.test_games), &now)
            }
        };
        let sidecar = Sidecar {
            a3g_version: env!("CARGO_PKG_VERSION").to_string(),
            env: self.config.env.id.clone(),
            model: self.config.spec.clone(),
            optimizer: self.config.optimizer,
            counters,
            best_score: keep.best.is_finite().then_some(keep.best),
            checksums: None,
            trained_with: Some(self.config.trained_with()),
        };
        let statistics: Vec<(String, &Tensor)> =
            statistics.iter().map(|(name, tensor)| (name.clone(), tensor)).collect();
        let Some(checkpoints) = self.checkpoints.as_mut() else { return Ok(()) };
        checkpoints.save(&sidecar, &keep.weights, &statistics)
    }

    /// Ends the run once every thread has stopped: reports a failure, or writes the
    /// final checkpoint and says why the run ended. `thread_failure` is the first
    /// failure of the run's threads, as the supervisor kept it.
    pub fn finish(mut self, thread_failure: Option<Error>) -> Result<()> {
        if let Some(err) = self.error.take().or(thread_failure) {
            if err.is_environment_failure() {
                // The environment failed, not the model: what training reached is
                // kept, as after a stop. Weights no update has changed are not worth a
                // save: a fresh run's would stand in the way of the run that follows
                // the environment's fix, and a resumed run's would rotate out the set
                // before them for the same weights.
                if self.trained_this_run() {
                    self.keep_final("stopped by a failed environment")?;
                } else if self.config.leads() {
                    console::say(&format!(
                        "stopped by a failed environment before the first update: nothing saved in {}",
                        self.config.run.save_model_dir.display()
                    ));
                }
            }
            return Err(err);
        }
        if let Some(StopReason::Failure(message)) = self.stop.reason() {
            return Err(Error::Training(message));
        }
        let reason = match self.stop.reason() {
            Some(StopReason::StepBudget) => "reached --max-steps",
            Some(StopReason::TimeBudget) => "reached --max-time",
            Some(StopReason::TargetScore) => "reached --stop-at-mean",
            Some(StopReason::Signal) => "interrupted",
            _ => "stopped",
        };
        self.keep_final(reason)
    }

    /// Writes the run's final checkpoint and says what it holds, `reason` first.
    fn keep_final(&mut self, reason: &str) -> Result<()> {
        let run = &self.config.run;
        let steps = world(
            &self.counters.agent_steps,
            self.peers.as_deref().map(|peers| &peers.agent_steps),
        );
        if !self.config.leads() {
            console::say(&format!(
                "{reason} after {steps} agent steps over all ranks; rank 0 saved the model"
            ));
            return Ok(());
        }
        // With --save-max the best game's weights are kept: this run's, waiting or
        // written, or else the resumed ones, which scored the best recorded. Otherwise
        // weights confirmed for --stop-at-mean, or else the latest for --load to resume.
        let kept = if run.save_max {
            match (self.unsaved.take(), self.resumed_best.take()) {
                (Some(keep), _) => Some(Kept::Best(keep)),
                (None, _) if self.saved_best => Some(Kept::AlreadySaved),
                (None, Some(resumed)) => Some(Kept::Best(resumed)),
                (None, None) => None,
            }
        } else {
            self.confirmed.take().map(Kept::Confirmed)
        };
        match &kept {
            Some(Kept::Best(keep)) => self.save(keep)?,
            Some(Kept::Confirmed(weights)) => {
                let weights = weights.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
                self.save(&Keep {
                    test_games: self.test_games,
                    best: self.best,
                    weights,
                    moment: None,
                })?
            }
            Some(Kept::AlreadySaved) => {}
            None => {
                let weights = self.names.iter().cloned().zip(self.shared.snapshot()).collect();
                self.save(&Keep {
                    test_games: self.test_games,
                    best: self.best,
                    weights,
                    moment: None,
                })?;
            }
        }
        if let Some(board) = self.board.as_mut() {
            board.flush();
            let cut_short =
                if board.writing() { "" } else { ", cut short where its writes failed" };
            console::say(&format!(
                "TensorBoard event files are in {}{cut_short}",
                board.dir().display()
            ));
        }
        let model_file =
            checkpoint::CheckpointFiles::new(&run.save_model_dir, &self.config.env.id).model;
        if let Some(Kept::Best(_) | Kept::AlreadySaved) = kept {
            console::say(&format!(
                "{reason} after {steps} agent steps: {} holds the best test game's weights (score {})",
                model_file.display(),
                self.best
            ));
        } else if let Some(Kept::Confirmed(_)) = kept {
            console::say(&format!(
                "{reason}: saved the confirmed weights in {} after {steps} agent steps",
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
}

/// A status line with the trainer's own part, if it has one, after the shared part.
fn join_status(shared: String, trainer: String) -> String {
    if trainer.is_empty() {
        shared
    } else {
        format!("{shared}, {trainer}")
    }
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
    /// In a run across machines: this rank's syncs a second, the milliseconds a merge
    /// of the model took and the processor milliseconds a sync took the sync thread
    /// (none where it made no sync).
    syncs: Option<(f64, Option<(f64, f64)>)>,
}

impl Status {
    fn line(&self) -> String {
        let phases: Vec<String> =
            self.phase_milliseconds.iter().map(|(name, ms)| format!("{name} {ms:.2}")).collect();
        let mut line = format!(
            "{}, emulator frames {}, {:.0} steps/s, {:.0} frames/s, {:.1} updates/s, \
             skipped updates {}, policy loss {}, value loss {}, entropy {}, ms per update: {}",
            game_log::status_line_start(self.elapsed, self.agent_steps),
            self.env_frames,
            self.steps_per_second,
            self.frames_per_second,
            self.updates_per_second,
            self.skipped_updates,
            loss(self.policy_loss),
            loss(self.value_loss),
            loss(self.entropy),
            phases.join(", "),
        );
        if let Some((per_second, costs)) = self.syncs {
            line += &format!(", {per_second:.1} syncs/s");
            if let Some((wall, cpu)) = costs {
                line += &format!(" ({wall:.2} ms a merge, {cpu:.2} ms of CPU a sync)");
            }
        }
        line
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
    /// This rank's syncs, the nanoseconds their merges took and their processor
    /// nanoseconds, in a run across machines.
    last_syncs: (u64, u64, u64),
    /// Whether an update plays its own rollout: GA3C's agents play apart from its
    /// updates, so its status lines leave that phase out rather than show 0.
    updates_play: bool,
}

impl StatusClock {
    /// A clock whose first interval starts now, from the world's counts so far
    /// (resumed ones included, which the first rate must not count as made in it).
    fn new(started: Instant, counters: &TrainingCounters, peers: Option<&PeerCounters>) -> Self {
        StatusClock {
            updates_play: true,
            started,
            last: Instant::now(),
            last_steps: world(&counters.agent_steps, peers.map(|peers| &peers.agent_steps)),
            last_frames: world(&counters.env_frames, peers.map(|peers| &peers.env_frames)),
            last_updates: counters.updates.load(Ordering::Relaxed),
            last_attempts: attempts(counters),
            last_losses: loss_sums(counters),
            last_phases: counters.phases.totals(),
            last_syncs: syncs(peers),
        }
    }

    fn due(&self, interval: Duration) -> bool {
        self.last.elapsed() >= interval
    }

    fn seconds_since_last(&self) -> f64 {
        self.last.elapsed().as_secs_f64().max(1e-9)
    }

    /// Reads the counters for a status line and starts the next interval. Agent
    /// steps and frames are the world's in a run across machines (this rank's, and
    /// the others' as of the last sync); updates, losses and phases are this rank's.
    fn sample(&mut self, counters: &TrainingCounters, peers: Option<&PeerCounters>) -> Status {
        let seconds = self.seconds_since_last();
        let steps = world(&counters.agent_steps, peers.map(|peers| &peers.agent_steps));
        let frames = world(&counters.env_frames, peers.map(|peers| &peers.env_frames));
        let updates = counters.updates.load(Ordering::Relaxed);
        let attempted = attempts(counters);
        let losses = loss_sums(counters);
        let phases = counters.phases.totals();
        let kept = (updates - self.last_updates) as f64;
        let mean_loss = |index: usize| (losses[index] - self.last_losses[index]) / kept;
        let sync_totals = syncs(peers);
        let (synced, merge_nanos, sync_cpu_nanos) = (
            sync_totals.0 - self.last_syncs.0,
            sync_totals.1 - self.last_syncs.1,
            sync_totals.2 - self.last_syncs.2,
        );
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
                .filter(|((name, _), _)| self.updates_play || *name != "rollout")
                .map(|((name, total), (_, before))| {
                    let updates = (attempted - self.last_attempts).max(1) as f64;
                    (*name, (total - before) as f64 / 1e6 / updates)
                })
                .collect(),
            syncs: peers.map(|_| {
                let per_sync = |nanos: u64| nanos as f64 / 1e6 / synced as f64;
                let costs = (synced > 0).then(|| (per_sync(merge_nanos), per_sync(sync_cpu_nanos)));
                (synced as f64 / seconds, costs)
            }),
        };
        (self.last, self.last_steps, self.last_frames, self.last_updates) =
            (Instant::now(), steps, frames, updates);
        (self.last_attempts, self.last_losses, self.last_phases) = (attempted, losses, phases);
        self.last_syncs = sync_totals;
        status
    }
}

/// This rank's syncs so far, the nanoseconds their merges took and their processor
/// nanoseconds (none on one machine).
fn syncs(peers: Option<&PeerCounters>) -> (u64, u64, u64) {
    peers.map_or((0, 0, 0), |peers| {
        let load = |count: &AtomicU64| count.load(Ordering::Relaxed);
        (load(&peers.syncs), load(&peers.merge_nanos), load(&peers.sync_cpu_nanos))
    })
}

/// Updates attempted so far, kept or skipped: what the phase times are summed over.
/// A count of this rank's, with the other ranks' when there are any.
fn world(own: &AtomicU64, peers: Option<&AtomicU64>) -> u64 {
    own.load(Ordering::Relaxed) + peers.map_or(0, |peers| peers.load(Ordering::Relaxed))
}

fn attempts(counters: &TrainingCounters) -> u64 {
    counters.updates.load(Ordering::Relaxed) + counters.skipped_updates.load(Ordering::Relaxed)
}

/// The summed policy loss, value loss and entropy.
fn loss_sums(counters: &TrainingCounters) -> [f64; 3] {
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
