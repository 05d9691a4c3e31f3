//! The command line: subcommands and their flags, which double as the documentation
//! of every hyperparameter (`a3g <subcommand> --help`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::distributed::SyncMerge;
use crate::env::gym::PythonOptions;
use crate::env::{CropTable, EnvOptions, Screen};
use crate::error::Error;
pub use crate::ga3c::settings::{Ga3cArgs, PrecisionName};
use crate::model::Body;

/// Asynchronous advantage actor-critic (A3C) and its GPU-hybrid form A3G.
///
/// Many workers, each with its own environment and a local copy of an LSTM
/// actor-critic, train one shared model without locks (Hogwild); a test agent plays
/// greedily with the latest weights, logs its games and saves checkpoints.
#[derive(Debug, Parser)]
#[command(name = "a3g", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The process's command line, parsed as `Cli::parse` does (help, version and a bad
    /// flag print and exit), with the flags it gave recorded in `train`'s and `eval`'s
    /// arguments.
    pub fn from_command_line() -> Self {
        Self::try_from_arguments(std::env::args_os()).unwrap_or_else(|err| {
            // Help or usage text lost to a full disk is said, as a command's output is.
            let printed = err.print().and_then(|()| std::io::Write::flush(&mut std::io::stdout()));
            match printed {
                Err(cause) if crate::error::is_disk_full(&cause) => {
                    let lost =
                        Error::Io { action: "write a3g's output to", path: "stdout".into(), cause };
                    eprintln!("error: {}", lost.report());
                    std::process::exit(1)
                }
                _ => std::process::exit(err.exit_code()),
            }
        })
    }

    /// `arguments` (the program's name first) parsed, with the flags they gave
    /// recorded, so that a flag with a default can be told apart from one written out.
    pub fn try_from_arguments<I, T>(arguments: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let matches = Self::command().try_get_matches_from(arguments)?;
        let mut cli =
            Self::from_arg_matches(&matches).map_err(|err| err.format(&mut Self::command()))?;
        if let Some((name, subcommand)) = matches.subcommand() {
            let command = Self::command();
            let flags = command.find_subcommand(name).expect("clap matched this subcommand");
            let given = GivenFlags::of(subcommand, flags);
            match &mut cli.command {
                Command::Train(args) => args.given = given,
                Command::Eval(args) => args.given = given,
                Command::Envs(_) | Command::Devices | Command::Plot(_) => {}
            }
        }
        Ok(cli)
    }
}

/// The flags a command line wrote out, by their ids (the field names) with their long
/// names, as opposed to those left at their defaults: a flag that does nothing in the
/// run asked for is refused only when given.
#[derive(Clone, Debug, Default)]
pub struct GivenFlags(BTreeMap<String, String>);

impl GivenFlags {
    /// The flags of `command` whose values `matches` took from the command line.
    fn of(matches: &ArgMatches, command: &clap::Command) -> Self {
        let given = command.get_arguments().filter_map(|arg| {
            let id = arg.get_id().as_str();
            let written = matches.value_source(id) == Some(ValueSource::CommandLine);
            written.then(|| Some((id.to_owned(), format!("--{}", arg.get_long()?))))?
        });
        GivenFlags(given.collect())
    }

    /// Whether the flag with this id was given.
    pub fn contains(&self, id: &str) -> bool {
        self.0.contains_key(id)
    }

    /// The long names (`--sync-merge`) of the given flags among those with `ids`, in
    /// that order.
    pub fn flags(&self, ids: &[&str]) -> Vec<String> {
        ids.iter().filter_map(|id| self.0.get(*id).cloned()).collect()
    }

    /// The long names of the given flags among `args`'s, in their order there.
    pub fn among<A: Args>(&self) -> Vec<String> {
        let group = A::augment_args(clap::Command::new("flags"));
        let ids: Vec<&str> = group.get_arguments().map(|arg| arg.get_id().as_str()).collect();
        self.flags(&ids)
    }
}

/// The subcommands of `a3g`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a model with asynchronous workers, a test agent and checkpoints.
    Train(Box<TrainArgs>),
    /// Evaluate a saved model over a number of greedy episodes.
    Eval(EvalArgs),
    /// List environment ids with their action space and observation shape.
    Envs(EnvsArgs),
    /// Show libtorch's version, whether its CUDA libraries are loaded, the CUDA version
    /// they were built for, and the devices --gpu-ids can name.
    Devices,
    /// Draw learning curves from game logs into a PNG: score against wall time and
    /// against agent steps.
    Plot(PlotArgs),
}

/// The Atari network (`--model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum ModelName {
    /// The reference's A3Clstm.
    #[value(name = "a3clstm")]
    A3cLstm,
    /// ikostrikov's universe-starter-agent network.
    #[value(name = "universe")]
    Universe,
    /// The universe network over 84x84 screens.
    #[value(name = "universe84")]
    Universe84,
    /// The universe network over 42x42 screens of block maxima.
    #[value(name = "universe-max")]
    UniverseMax,
}

impl ModelName {
    /// The network this name builds, which knows its screens.
    pub fn body(self) -> Body {
        match self {
            ModelName::A3cLstm => Body::AtariLstm,
            ModelName::Universe => Body::Universe,
            ModelName::Universe84 => Body::Universe84,
            ModelName::UniverseMax => Body::UniverseMax,
        }
    }

    /// --hidden-size when not given.
    pub fn default_hidden_size(self) -> i64 {
        match self {
            ModelName::A3cLstm => 512,
            ModelName::Universe | ModelName::Universe84 | ModelName::UniverseMax => 256,
        }
    }
}

/// When a run resumes its own checkpoint (`--resume`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResumeMode {
    /// When --save-model-dir holds a checkpoint of the env.
    Auto,
}

/// Which trainer runs the workers (`--trainer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum TrainerName {
    /// Workers that each act and update alone, as the reference runs them.
    #[value(name = "a3c")]
    A3c,
    /// GA3C: agents whose forward passes predictor threads batch, and trainer threads
    /// that merge the agents' segments into one update.
    #[value(name = "ga3c")]
    Ga3c,
}

/// The shared optimizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum OptimizerName {
    #[value(name = "Adam")]
    Adam,
    #[value(name = "RMSprop")]
    RmsProp,
}

/// The environment flags `a3g train` and `a3g eval` share.
#[derive(Clone, Debug, Args, Serialize, Deserialize)]
pub struct EnvArgs {
    /// Environment id (`a3g envs` lists them).
    #[arg(long, default_value = "PongNoFrameskip-v4", help_heading = "Environment")]
    pub env: String,
    /// Per-game crop rows for Atari preprocessing (default: the built-in
    /// configs/atari_crop.json).
    #[arg(long, value_name = "FILE", help_heading = "Environment")]
    #[serde(serialize_with = "lossy_optional_path")]
    pub env_config: Option<PathBuf>,
    /// Emulator frames per agent step for NoFrameskip ids.
    #[arg(long, allow_negative_numbers = true, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Environment")]
    pub skip_rate: u32,
    /// Agent steps after which an episode is cut.
    #[arg(long, allow_negative_numbers = true, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Environment")]
    pub max_episode_length: u32,
    /// A module to import before an outside environment (`gym:<id>`, a class) is
    /// made, for packages that register their Gymnasium ids on import (for example
    /// minigrid); may be given more than once.
    #[arg(long = "env-import", value_name = "MODULE", help_heading = "Environment")]
    #[serde(default)]
    pub env_imports: Vec<String>,
    /// A wrapper class, `module:Class` or `file.py:Class`, put around an outside
    /// environment once it is made (for example
    /// minigrid.wrappers:ImgObsWrapper); given more than once, applied in order.
    #[arg(long = "env-wrapper", value_name = "MODULE:CLASS", help_heading = "Environment")]
    #[serde(default)]
    pub env_wrappers: Vec<String>,
    /// Keyword arguments for an outside environment, as a JSON object: passed to
    /// gymnasium.make or to the class (for example '{"size": 8}').
    #[arg(long, value_name = "JSON", help_heading = "Environment")]
    pub env_kwargs: Option<String>,
    /// The Python that runs outside environments (default: $A3G_PYTHON, else python3).
    #[arg(long, value_name = "PATH", help_heading = "Environment")]
    pub python: Option<String>,
    /// Seconds an outside environment may take to answer one step or reset before it
    /// counts as hung and is stopped (its start may take this or 120 s, the longer).
    #[arg(long, default_value_t = 60.0, value_parser = parse_env_timeout, allow_negative_numbers = true, help_heading = "Environment")]
    #[serde(default = "default_env_timeout")]
    pub env_timeout: f64,
}

impl EnvArgs {
    /// The environment settings these flags give, for an environment seeded `seed`
    /// whose Atari screens are prepared as `screen`; `given` are the command line's
    /// flags, of which those for outside environments are refused on a built-in one.
    pub fn options(
        &self,
        given: &GivenFlags,
        crops: &CropTable,
        seed: u64,
        screen: Screen,
    ) -> crate::error::Result<EnvOptions> {
        let kwargs = match &self.env_kwargs {
            None => serde_json::Map::new(),
            Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
                Ok(serde_json::Value::Object(kwargs)) => kwargs,
                Ok(_) => {
                    return Err(Error::BadArguments(format!(
                        "--env-kwargs {text} is not a JSON object; give keyword arguments as '{{\"name\": value}}'"
                    )))
                }
                Err(err) => {
                    return Err(Error::BadArguments(format!(
                        "--env-kwargs is not valid JSON ({err}); give keyword arguments as '{{\"name\": value}}'"
                    )))
                }
            },
        };
        let outside = crate::env::gym::Target::parse(&self.env).is_some();
        let outside_flags: Vec<String> = [
            ("--env-kwargs", self.env_kwargs.is_some()),
            ("--env-import", !self.env_imports.is_empty()),
            ("--env-wrapper", !self.env_wrappers.is_empty()),
            ("--python", self.python.is_some()),
            ("--env-timeout", given.contains("env_timeout")),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then(|| flag.to_string()))
        .collect();
        if !outside && !outside_flags.is_empty() {
            return Err(Error::idle_flags(
                &outside_flags,
                &format!(
                    "for environments from outside a3g (gym:<id>, <file.py>:<Class>), and {} is built in",
                    self.env
                ),
                None,
            ));
        }
        let atari_flags = given.flags(&["skip_rate", "env_config"]);
        if crate::env::is_known_non_atari(&self.env) && !atari_flags.is_empty() {
            return Err(Error::idle_flags(
                &atari_flags,
                &format!("for a3g's own Atari games, and {} is not one", self.env),
                outside.then_some("give the environment's own settings through --env-kwargs"),
            ));
        }
        if let Some(atari) = crate::env::built_in_atari(&self.env) {
            if !atari.family.is_no_frameskip() && given.contains("skip_rate") {
                return Err(Error::idle_flags(
                    &given.flags(&["skip_rate"]),
                    &format!(
                        "the emulator frames per agent step of NoFrameskip ids, and {} skips frames its own way",
                        self.env
                    ),
                    Some(&format!("play {}NoFrameskip-v4 with it", atari.game)),
                ));
            }
        }
        if let Some(wrapper) = self.env_wrappers.iter().find(|wrapper| {
            !matches!(wrapper.rsplit_once(':'), Some((place, class)) if !place.is_empty() && !class.is_empty())
        }) {
            return Err(Error::BadArguments(format!(
                "--env-wrapper {wrapper} names no class; give it as <module>:<Class> or <file.py>:<Class> \
                 (for example minigrid.wrappers:ImgObsWrapper)"
            )));
        }
        let python = self
            .python
            .clone()
            .or_else(|| std::env::var("A3G_PYTHON").ok().filter(|python| !python.is_empty()))
            .unwrap_or_else(|| "python3".into());
        Ok(EnvOptions {
            seed,
            max_episode_length: Some(self.max_episode_length),
            skip_rate: self.skip_rate,
            crops: crops.clone(),
            screen,
            python: PythonOptions {
                python,
                imports: self.env_imports.clone(),
                wrappers: self.env_wrappers.clone(),
                kwargs,
                timeout: Duration::from_secs_f64(self.env_timeout),
                render: false,
            },
        })
    }
}

/// --confirm-games' default: evidence about one set of weights beyond the mean, few
/// enough games not to hold up an Atari run for long.
pub const DEFAULT_CONFIRM_GAMES: u32 = 10;

fn default_confirm_games() -> u32 {
    DEFAULT_CONFIRM_GAMES
}

fn default_sync_merge() -> SyncMerge {
    SyncMerge::Sum
}

fn default_sync_timeout() -> f64 {
    60.0
}

/// Flags of `a3g train`.
#[derive(Clone, Debug, Args, Serialize, Deserialize)]
pub struct TrainArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub environment: EnvArgs,

    /// Workers (a3c) or agents (ga3c), each with its own environment (default: one per
    /// core; with --trainer ga3c on Atari, 16 per core with --model universe,
    /// universe84 or universe-max and 8 with a3clstm, the counts measured fastest on
    /// two cores).
    #[arg(long, allow_negative_numbers = true, help_heading = "Workers")]
    pub workers: Option<usize>,
    /// The trainer: asynchronous workers (a3c) or batched agents, predictors and
    /// trainers (ga3c).
    #[arg(long, value_enum, default_value_t = TrainerName::A3c, help_heading = "Workers")]
    pub trainer: TrainerName,
    /// Agent steps per rollout, between weight pulls and gradient pushes.
    #[arg(long, allow_negative_numbers = true, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Workers")]
    pub num_steps: u32,
    /// Rollout lengths handed to the workers round-robin, in place of --num-steps
    /// (for example 16 32 64).
    #[arg(long, allow_negative_numbers = true, num_args = 1.., value_parser = clap::value_parser!(u32).range(1..), help_heading = "Workers")]
    pub distributed_step_size: Vec<u32>,
    /// GPUs for the workers' models: worker i runs on GPU ids[i mod n] and the test
    /// agent on the last one, while the shared model and optimizer stay on the CPU.
    /// -1 (the default) runs everything on the CPU.
    #[arg(long, num_args = 1.., default_values_t = [-1], allow_negative_numbers = true, help_heading = "Workers")]
    pub gpu_ids: Vec<i64>,
    /// Random seed; worker i uses seed + i.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, help_heading = "Workers")]
    pub seed: u64,

    /// The Atari network. a3clstm: the reference's A3Clstm (four 5x5/4x4/3x3 convs with
    /// max-pooling over 80x80 gray screens, LSTM of 512); about 17-19 ms per agent step
    /// (forward and backward) on one core of a 2-core cloud machine. universe:
    /// ikostrikov/pytorch-a3c's (four 3x3 stride-2 convs with ELU over 42x42 screens,
    /// LSTM of 256); about 8-10 times cheaper, the size that learns Pong on a few CPU
    /// cores. universe84: the same network over 84x84 screens (the same crop, bilinear
    /// to 84x84), where Breakout's ball, two pixels wide, keeps at least half its
    /// contrast (at 42x42 as little as a tenth). universe-max: the same network and
    /// cost as universe, over 42x42 screens whose every cell is the brightest pixel of
    /// its block of the crop, so the ball keeps all its contrast. Classic control,
    /// Box2D and other tasks of a few values use a small MLP, and refuse --model.
    /// (default: a3clstm; with --load, the checkpoint's)
    #[arg(long, value_enum, help_heading = "Model")]
    pub model: Option<ModelName>,
    /// Units of the LSTM (and of the MLP layers for classic control and Box2D)
    /// (default: 512; 256 with --model universe, universe84 or universe-max; with --load,
    /// the checkpoint's).
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(i64).range(1..), help_heading = "Model")]
    pub hidden_size: Option<i64>,
    /// Give the classic-control and Box2D MLP an LSTM cell (Atari models always have
    /// one; with --load, the checkpoint's model decides).
    #[arg(long, help_heading = "Model")]
    pub lstm: bool,
    /// Scale each observation element of a classic-control or Box2D task by its mean
    /// and deviation, measured before training over 20,000 steps of random play and
    /// kept with the model (as a3c_continuous does for BipedalWalker, whose balance
    /// lies in inputs of a few hundredths). With --load, the checkpoint's model decides.
    #[arg(long, help_heading = "Model")]
    pub normalize_obs: bool,
    /// Floor of the Gaussian policy's standard deviation, for continuous actions, in
    /// [0.001, 10]: exploration never narrows below it, however the entropy bonus and
    /// the advantages pull. a3c_continuous keeps 0.24 (where a Gaussian's entropy is
    /// 0); BipedalWalker learns to walk with it and to stand still without it.
    /// (default: 0.001; with --load, the checkpoint's)
    #[arg(long, allow_negative_numbers = true, help_heading = "Model")]
    pub min_std: Option<f64>,

    /// Shared optimizer (with --load, the checkpoint's where this and --amsgrad are
    /// left out, so that its statistics go on).
    #[arg(long, value_enum, default_value_t = OptimizerName::Adam, help_heading = "Optimization")]
    pub optimizer: OptimizerName,
    /// Learning rate, in (0, 1].
    #[arg(long, default_value_t = 1e-4, value_parser = parse_learning_rate, allow_negative_numbers = true, help_heading = "Optimization")]
    pub lr: f64,
    /// Anneal the learning rate linearly from --lr to 0, as the A3C paper does, over
    /// --max-steps agent steps (a resumed run goes on from its checkpoint's), or else
    /// over this run's --max-time, whatever agent steps the host gives.
    #[arg(long, help_heading = "Optimization")]
    pub lr_anneal: bool,
    /// Use AMSGrad's maximum of second moments with Adam (refused with RMSprop).
    #[arg(long, help_heading = "Optimization")]
    pub amsgrad: bool,
    /// Share the optimizer's statistics between workers; false gives each worker
    /// statistics of its own over the shared weights.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, help_heading = "Optimization")]
    pub shared_optimizer: bool,
    /// Discount factor for rewards, in (0, 1].
    #[arg(long, default_value_t = 0.99, value_parser = parse_discount, allow_negative_numbers = true, help_heading = "Optimization")]
    pub gamma: f64,
    /// GAE parameter (lambda), in [0, 1].
    #[arg(long, default_value_t = 1.0, value_parser = parse_gae_lambda, allow_negative_numbers = true, help_heading = "Optimization")]
    pub tau: f64,
    /// Weight of the entropy bonus (0 or more).
    #[arg(long, default_value_t = 0.01, value_parser = parse_coefficient, allow_negative_numbers = true, help_heading = "Optimization")]
    pub entropy_coef: f64,
    /// Weight of the value loss (0 or more).
    #[arg(long, default_value_t = 0.5, value_parser = parse_coefficient, allow_negative_numbers = true, help_heading = "Optimization")]
    pub value_coef: f64,
    /// Multiply rewards by this before clipping; for learning only, scores stay raw.
    #[arg(long, default_value_t = 1.0, value_parser = parse_reward_scale, allow_negative_numbers = true, help_heading = "Optimization")]
    pub reward_scale: f64,
    /// Clip learning rewards to [-C, C], as the reference does for Atari; "off" keeps
    /// them whole (Pendulum's costs run to -16 a step).
    #[arg(long, default_value_t = RewardClip(Some(1.0)), value_parser = parse_reward_clip, allow_negative_numbers = true, help_heading = "Optimization")]
    pub reward_clip: RewardClip,

    /// Stop after this many agent steps, summed over workers and counted over resumes:
    /// a checkpoint that already holds them is not trained further (--load is refused,
    /// --resume auto ends as done). Workers (agents) in the middle of a step when the
    /// last one is counted finish it, so a run saves up to one step each past it.
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Run")]
    pub max_steps: Option<u64>,
    /// Stop after this long: 90s, 10m, 2h, or plain seconds.
    #[arg(long, value_parser = parse_duration, allow_negative_numbers = true, help_heading = "Run")]
    pub max_time: Option<HumanDuration>,
    /// Stop once the test agent's mean over its last 100 games reaches this score and
    /// the weights of the game that reached it score at least as much over
    /// --confirm-games more greedy games; those weights are saved.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_score, help_heading = "Run")]
    pub stop_at_mean: Option<f64>,
    /// Greedy games that confirm --stop-at-mean's weights before the run stops on them
    /// (0: stop on the 100-game mean alone, saving the latest weights). The mean spans
    /// many versions of the weights, and the latest can score far below it.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_CONFIRM_GAMES, help_heading = "Run")]
    #[serde(default = "default_confirm_games")]
    pub confirm_games: u32,
    /// Share of one core the test agent may take: after a game that took T seconds it
    /// rests T * (1 / share - 1), so that on a small machine it does not take a
    /// training thread's core (the reference's test agent rests 60 s after each game).
    /// Default: 0.1 for Atari, 1 (games back to back) for classic control, whose games
    /// are short and whose --stop-at-mean needs many of them.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_share, help_heading = "Run")]
    pub test_share: Option<f64>,
    /// Seconds between status lines (at most a day).
    #[arg(long, default_value_t = 5.0, value_parser = parse_status_interval, allow_negative_numbers = true, help_heading = "Run")]
    pub status_interval: f64,

    /// Resume model, optimizer statistics and counters from --load-model-dir.
    #[arg(long, help_heading = "Checkpoints")]
    pub load: bool,
    /// auto: resume the run's own checkpoint, in --save-model-dir, when there is one,
    /// else start afresh; one command that a launcher restarting failed ranks
    /// (torchrun --max-restarts) can run again as it is.
    #[arg(long, value_enum, conflicts_with = "load", help_heading = "Checkpoints")]
    #[serde(default)]
    pub resume: Option<ResumeMode>,
    /// Folder --load reads checkpoints from.
    #[arg(long, default_value = "trained_models", help_heading = "Checkpoints")]
    #[serde(serialize_with = "lossy_path")]
    pub load_model_dir: PathBuf,
    /// Folder checkpoints are written to. One run at a time may use a folder.
    #[arg(long, default_value = "trained_models", help_heading = "Checkpoints")]
    #[serde(serialize_with = "lossy_path")]
    pub save_model_dir: PathBuf,
    /// Let a run replace a model of the same env already in --save-model-dir when it
    /// starts afresh or from --load of another folder; without it the run is refused,
    /// so no trained model is lost by accident (resuming the folder's own model needs
    /// no leave).
    #[arg(long, help_heading = "Checkpoints")]
    #[serde(default)]
    pub overwrite: bool,
    /// Save after a test game only when it matches or beats the best score so far,
    /// and keep that checkpoint at the end rather than the final weights.
    #[arg(long, help_heading = "Checkpoints")]
    pub save_max: bool,
    /// Least seconds between checkpoints written after test games (0: after every
    /// game worth keeping). Classic control's test agent plays dozens of games a
    /// second, each save syncs three files, and a kill loses at most this much
    /// training; the final checkpoint is written whatever the interval.
    #[arg(long, default_value_t = 5.0, value_parser = parse_save_interval, allow_negative_numbers = true, help_heading = "Checkpoints")]
    pub save_interval: f64,
    /// Folder of the test agent's game log (`<env>_log`).
    #[arg(long, default_value = "logs", help_heading = "Checkpoints")]
    #[serde(serialize_with = "lossy_path")]
    pub log_dir: PathBuf,

    /// Write TensorBoard event files into <tensorboard-dir>/<env>_training/: test
    /// games, a histogram of every parameter per test game, rates, losses.
    #[arg(long, help_heading = "Monitoring")]
    pub tensorboard_logger: bool,
    /// Folder of the TensorBoard runs.
    #[arg(long, default_value = "runs", help_heading = "Monitoring")]
    #[serde(serialize_with = "lossy_path")]
    pub tensorboard_dir: PathBuf,
    /// Make the status line's milliseconds per phase exact on a GPU by waiting for the
    /// device at every phase boundary (five more host syncs per rollout); without it the
    /// GPU runs ahead and a phase can be charged with kernels queued before it.
    #[arg(long, help_heading = "Monitoring")]
    #[serde(default)]
    pub profile_phases: bool,

    /// Across machines (a launcher's RANK and WORLD_SIZE, or Slurm's or Open MPI's
    /// variables; docs/distributed.md): seconds between the ranks' syncs, each of
    /// which merges their changes to the model (--sync-merge) and sums their counters
    /// [default: 1 at two ranks, 0.05 at three or more, whose copies drift further
    /// apart between syncs; 20 times a sync's CPU time where that is longer, at most
    /// half of --sync-timeout; docs/distributed.md, "At N ranks"].
    #[arg(long, value_parser = parse_status_interval, allow_negative_numbers = true, help_heading = "Across machines")]
    #[serde(default)]
    pub sync_interval: Option<f64>,
    /// How each sync combines the ranks' changes since the last one (docs/distributed.md,
    /// "Sum or mean").
    #[arg(long, value_enum, default_value_t = default_sync_merge(), help_heading = "Across machines")]
    #[serde(default = "default_sync_merge")]
    pub sync_merge: SyncMerge,
    /// Seconds a rank waits for the others, at the start and at each sync, before it
    /// stops the run naming the rank that did not come.
    #[arg(long, default_value_t = 60.0, value_parser = parse_sync_timeout, allow_negative_numbers = true, help_heading = "Across machines")]
    #[serde(default = "default_sync_timeout")]
    pub sync_timeout: f64,
    #[command(flatten)]
    pub ga3c: Ga3cArgs,
    /// The flags the command line gave ([`Cli::from_command_line`]).
    #[arg(skip)]
    #[serde(skip)]
    pub given: GivenFlags,
}

/// A duration given as 90s, 10m, 2h or plain seconds, kept as written for the logs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HumanDuration {
    pub text: String,
    pub seconds: f64,
}

impl HumanDuration {
    /// As a `Duration`.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.seconds)
    }
}

/// --reward-clip's bound; `None` when clipping is off.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct RewardClip(pub Option<f64>);

impl std::fmt::Display for RewardClip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(bound) => write!(f, "{bound}"),
            None => f.write_str("off"),
        }
    }
}

fn parse_reward_clip(text: &str) -> Result<RewardClip, String> {
    if text == "off" {
        return Ok(RewardClip(None));
    }
    positive_number(text)
        .map(|bound| RewardClip(Some(bound)))
        .ok_or_else(|| format!("{text:?} is not a clip bound; write a positive number, or off"))
}

fn parse_reward_scale(text: &str) -> Result<f64, String> {
    positive_number(text)
        .ok_or_else(|| format!("{text:?} is not a reward scale; write a positive number"))
}

/// The longest --max-time: a year, far beyond any run, and far below the ~5e11
/// years where a `Duration` overflows.
const MAX_DURATION_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

fn parse_duration(text: &str) -> Result<HumanDuration, String> {
    let (number, unit) = match text.char_indices().last() {
        Some((index, 's')) => (&text[..index], 1.0),
        Some((index, 'm')) => (&text[..index], 60.0),
        Some((index, 'h')) => (&text[..index], 3600.0),
        _ => (text, 1.0),
    };
    positive_number(number)
        .map(|value| value * unit)
        .filter(|seconds| *seconds <= MAX_DURATION_SECONDS)
        .map(|seconds| HumanDuration { text: text.to_string(), seconds })
        .ok_or_else(|| {
            format!(
                "{text:?} is not a duration; write 90s, 10m, 2h or plain seconds, at most 8760h"
            )
        })
}

pub(crate) fn parse_status_interval(text: &str) -> Result<f64, String> {
    number_in(text, |value| value > 0.0 && value <= 86_400.0)
        .ok_or_else(|| format!("{text:?} is not an interval; write seconds above 0, at most 86400"))
}

fn parse_sync_timeout(text: &str) -> Result<f64, String> {
    // Below a second no rendezvous completes; and c10d reads 0 ms as no timeout.
    number_in(text, |value| (1.0..=86_400.0).contains(&value))
        .ok_or_else(|| format!("{text:?} is not a timeout; write seconds from 1 to 86400"))
}

fn parse_env_timeout(text: &str) -> Result<f64, String> {
    number_in(text, |value| (0.1..=86_400.0).contains(&value))
        .ok_or_else(|| format!("{text:?} is not a timeout; write seconds from 0.1 to 86400"))
}

fn default_env_timeout() -> f64 {
    60.0
}

fn parse_save_interval(text: &str) -> Result<f64, String> {
    number_in(text, |value| (0.0..=86_400.0).contains(&value))
        .ok_or_else(|| format!("{text:?} is not an interval; write seconds from 0 to 86400"))
}

fn parse_share(text: &str) -> Result<f64, String> {
    // Below a thousandth the test agent rests a thousand times each game's length,
    // which for Atari means no second game in a day's run.
    number_in(text, |value| (1e-3..=1.0).contains(&value))
        .ok_or_else(|| format!("{text:?} is not a share of a core; write a number from 0.001 to 1"))
}

fn parse_learning_rate(text: &str) -> Result<f64, String> {
    number_in(text, |value| value > 0.0 && value <= 1.0).ok_or_else(|| {
        format!("{text:?} is not a learning rate; write a number above 0, at most 1 (such as 1e-4)")
    })
}

fn parse_discount(text: &str) -> Result<f64, String> {
    number_in(text, |value| value > 0.0 && value <= 1.0).ok_or_else(|| {
        format!(
            "{text:?} is not a discount factor; write a number above 0, at most 1 (such as 0.99)"
        )
    })
}

fn parse_gae_lambda(text: &str) -> Result<f64, String> {
    number_in(text, |value| (0.0..=1.0).contains(&value))
        .ok_or_else(|| format!("{text:?} is not a GAE parameter; write a number from 0 to 1"))
}

fn parse_coefficient(text: &str) -> Result<f64, String> {
    number_in(text, |value| value >= 0.0)
        .ok_or_else(|| format!("{text:?} is not a loss weight; write a finite number, 0 or more"))
}

fn parse_score(text: &str) -> Result<f64, String> {
    number_in(text, |_| true)
        .ok_or_else(|| format!("{text:?} is not a score; write a finite number"))
}

/// A finite number that `accept` accepts, or `None`.
fn number_in(text: &str, accept: impl Fn(f64) -> bool) -> Option<f64> {
    text.parse::<f64>().ok().filter(|value| value.is_finite() && accept(*value))
}

/// Paths go into logs and sidecars as text; one that is not UTF-8 is written with
/// U+FFFD in place of the bytes that are not, rather than failing the run.
fn lossy_path<S: serde::Serializer>(
    path: &std::path::Path,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&path.to_string_lossy())
}

fn lossy_optional_path<S: serde::Serializer>(
    path: &Option<PathBuf>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match path {
        Some(path) => lossy_path(path, serializer),
        None => serializer.serialize_none(),
    }
}

/// A finite number above zero, or `None`.
fn positive_number(text: &str) -> Option<f64> {
    number_in(text, |value| value > 0.0)
}

/// Flags of `a3g eval`.
#[derive(Clone, Debug, Args, Serialize)]
pub struct EvalArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub environment: EnvArgs,
    /// Games to play.
    #[arg(long, allow_negative_numbers = true, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub num_episodes: u32,
    /// Random seed of the environment.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1)]
    pub seed: u64,
    /// GPU to run the model on; -1 runs it on the CPU.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub gpu_id: i64,
    /// Folder holding <env>.safetensors (a3g) or <env>.dat, .pt, .pth (PyTorch).
    #[arg(long, default_value = "trained_models")]
    #[serde(serialize_with = "lossy_path")]
    pub load_model_dir: PathBuf,
    /// Folder of the evaluation log (`<env>_mon_log`).
    #[arg(long, default_value = "logs")]
    #[serde(serialize_with = "lossy_path")]
    pub log_dir: PathBuf,
    /// Record games as animated GIFs (headless: the file is the render).
    #[arg(long, help_heading = "Recording")]
    pub render: bool,
    /// With --render, record every K-th game, starting with the first.
    #[arg(long, allow_negative_numbers = true, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Recording")]
    pub render_freq: u32,
    /// Folder for the GIFs (default: <log-dir>/<env>_games).
    #[arg(long, value_name = "DIR", help_heading = "Recording")]
    #[serde(serialize_with = "lossy_optional_path")]
    pub record_dir: Option<PathBuf>,
    /// Print the summary as one JSON object on stdout (the per-game lines go to stderr).
    #[arg(long)]
    pub json: bool,
    /// The flags the command line gave ([`Cli::from_command_line`]).
    #[arg(skip)]
    #[serde(skip)]
    pub given: GivenFlags,
}

/// Flags of `a3g envs`.
#[derive(Debug, Args)]
pub struct EnvsArgs {
    /// Ids to describe (default: every id); Atari ids also show their crop rows.
    pub ids: Vec<String>,
    /// Per-game crop rows for Atari preprocessing (default: the built-in
    /// configs/atari_crop.json).
    #[arg(long, value_name = "FILE")]
    pub env_config: Option<PathBuf>,
}

/// Flags of `a3g plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Game logs to draw on the same axes: `a3g train`'s logs/<env>_log, `a3g eval`'s
    /// <env>_mon_log (no agent steps), or the Python references' logs
    /// (rl_a3c_pytorch's and a3c_continuous's).
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// PNG file to write (default: the first log's path with .png added).
    #[arg(long, short, value_name = "FILE.png")]
    pub output: Option<PathBuf>,
    /// Width of the image in pixels.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1200, value_parser = clap::value_parser!(u32).range(400..=8192))]
    pub width: u32,
    /// Height of the image in pixels; the two panels share it.
    #[arg(long, allow_negative_numbers = true, default_value_t = 900, value_parser = clap::value_parser!(u32).range(300..=8192))]
    pub height: u32,
    /// Title above the panels (default: the environment ids the logs name).
    #[arg(long)]
    pub title: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Durations take s, m, h or no unit, and refuse anything else.
    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("90s").unwrap().seconds, 90.0);
        assert_eq!(parse_duration("10m").unwrap().seconds, 600.0);
        assert_eq!(parse_duration("2h").unwrap().seconds, 7200.0);
        assert_eq!(parse_duration("1.5").unwrap().seconds, 1.5);
        for bad in ["", "m", "ten", "-5s", "0", "5d", "1e20s", "inf", "nan", "8761h"] {
            assert!(parse_duration(bad).is_err(), "{bad} parsed");
        }
    }

    fn train_args(flags: &[&str]) -> TrainArgs {
        let cli = Cli::try_parse_from([&["a3g", "train"], flags].concat()).expect("flags parse");
        match cli.command {
            Command::Train(args) => *args,
            _ => unreachable!("a train command"),
        }
    }

    /// The ranks sum their changes unless told to average them, and nothing else is
    /// taken for a merge.
    #[test]
    fn sync_merge_parses() {
        assert_eq!(train_args(&[]).sync_merge, SyncMerge::Sum);
        assert_eq!(train_args(&["--sync-merge", "mean"]).sync_merge, SyncMerge::Mean);
        for bad in ["median", "Sum", ""] {
            assert!(
                Cli::try_parse_from(["a3g", "train", "--sync-merge", bad]).is_err(),
                "{bad} parsed"
            );
        }
    }

    /// Rewards are clipped to [-1, 1] by default as in the reference; --reward-clip off
    /// and a scale change that; a negative --stop-at-mean is a number, not a flag.
    #[test]
    fn reward_and_target_flags_parse() {
        let defaults = train_args(&[]);
        assert_eq!((defaults.reward_scale, defaults.reward_clip), (1.0, RewardClip(Some(1.0))));
        let args = train_args(&[
            "--reward-scale",
            "0.125",
            "--reward-clip",
            "off",
            "--stop-at-mean",
            "-200",
        ]);
        assert_eq!((args.reward_scale, args.reward_clip), (0.125, RewardClip(None)));
        assert_eq!(args.stop_at_mean, Some(-200.0));
        for bad in [
            ["--reward-clip", "0"],
            ["--reward-clip", "none"],
            ["--reward-scale", "-1"],
            ["--stop-at-mean", "nan"],
            ["--stop-at-mean", "inf"],
        ] {
            assert!(
                Cli::try_parse_from([&["a3g", "train"], &bad[..]].concat()).is_err(),
                "{bad:?} parsed"
            );
        }
    }

    /// Every hyperparameter is checked when parsed, and the refusal names the flag;
    /// values at the edges of each range are accepted.
    #[test]
    fn hyperparameters_out_of_range_are_refused() {
        let refused = [
            ("--lr", ["nan", "inf", "-1", "0", "1e30", "x"].as_slice()),
            ("--gamma", &["1.5", "-1", "0", "nan"]),
            ("--tau", &["2", "-0.1", "nan"]),
            ("--entropy-coef", &["-0.01", "inf", "nan"]),
            ("--value-coef", &["-1", "inf"]),
            ("--status-interval", &["inf", "0", "-1", "nan", "1e20"]),
            ("--max-time", &["1e20s", "inf"]),
        ];
        for (flag, values) in refused {
            for value in values {
                let error = Cli::try_parse_from(["a3g", "train", flag, value])
                    .err()
                    .unwrap_or_else(|| panic!("{flag} {value} accepted"));
                assert!(error.to_string().contains(flag), "{flag} {value}: {error}");
            }
        }
        let edges = train_args(&[
            "--lr",
            "1",
            "--gamma",
            "1",
            "--tau",
            "0",
            "--entropy-coef",
            "0",
            "--value-coef",
            "0",
        ]);
        assert_eq!((edges.lr, edges.gamma, edges.tau, edges.entropy_coef), (1.0, 1.0, 0.0, 0.0));
    }
}
