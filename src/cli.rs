//! The command line: subcommands and their flags, which double as the documentation
//! of every hyperparameter (`a3g <subcommand> --help`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::env::{CropTable, EnvOptions};

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

/// The subcommands of `a3g`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a model with asynchronous workers, a test agent and checkpoints.
    Train(Box<TrainArgs>),
    /// Evaluate a saved model over a number of greedy episodes.
    Eval(EvalArgs),
    /// List environment ids with their action space and observation shape.
    Envs(EnvsArgs),
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
    pub env_config: Option<PathBuf>,
    /// Emulator frames per agent step for NoFrameskip ids.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Environment")]
    pub skip_rate: u32,
    /// Agent steps after which an episode is cut.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Environment")]
    pub max_episode_length: u32,
}

impl EnvArgs {
    /// The environment settings these flags give, for an environment seeded `seed`.
    pub fn options(&self, crops: &CropTable, seed: u64) -> EnvOptions {
        EnvOptions {
            seed,
            max_episode_length: Some(self.max_episode_length),
            skip_rate: self.skip_rate,
            crops: crops.clone(),
        }
    }
}

/// Flags of `a3g train`.
#[derive(Clone, Debug, Args, Serialize, Deserialize)]
pub struct TrainArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub environment: EnvArgs,

    /// Training threads, each with its own environment and model copy (default: the
    /// number of cores).
    #[arg(long, help_heading = "Workers")]
    pub workers: Option<usize>,
    /// Agent steps per rollout, between weight pulls and gradient pushes.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Workers")]
    pub num_steps: u32,
    /// Rollout lengths handed to the workers round-robin, in place of --num-steps
    /// (for example 16 32 64).
    #[arg(long, num_args = 1.., value_parser = clap::value_parser!(u32).range(1..), help_heading = "Workers")]
    pub distributed_step_size: Vec<u32>,
    /// GPUs for the workers' models: worker i runs on GPU ids[i mod n] and the test
    /// agent on the last one, while the shared model and optimizer stay on the CPU.
    /// -1 (the default) runs everything on the CPU.
    #[arg(long, num_args = 1.., default_values_t = [-1], allow_negative_numbers = true, help_heading = "Workers")]
    pub gpu_ids: Vec<i64>,
    /// Random seed; worker i uses seed + i.
    #[arg(long, default_value_t = 1, help_heading = "Workers")]
    pub seed: u64,

    /// Units of the LSTM (and of the MLP layers for classic control).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(i64).range(1..), help_heading = "Model")]
    pub hidden_size: i64,
    /// Give the classic-control MLP an LSTM cell (Atari models always have one).
    #[arg(long, help_heading = "Model")]
    pub lstm: bool,

    /// Shared optimizer.
    #[arg(long, value_enum, default_value_t = OptimizerName::Adam, help_heading = "Optimization")]
    pub optimizer: OptimizerName,
    /// Learning rate.
    #[arg(long, default_value_t = 1e-4, help_heading = "Optimization")]
    pub lr: f64,
    /// Use AMSGrad's maximum of second moments with Adam.
    #[arg(long, help_heading = "Optimization")]
    pub amsgrad: bool,
    /// Share the optimizer's statistics between workers; false gives each worker
    /// statistics of its own over the shared weights.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, help_heading = "Optimization")]
    pub shared_optimizer: bool,
    /// Discount factor for rewards.
    #[arg(long, default_value_t = 0.99, help_heading = "Optimization")]
    pub gamma: f64,
    /// GAE parameter (lambda).
    #[arg(long, default_value_t = 1.0, help_heading = "Optimization")]
    pub tau: f64,
    /// Weight of the entropy bonus.
    #[arg(long, default_value_t = 0.01, help_heading = "Optimization")]
    pub entropy_coef: f64,
    /// Weight of the value loss.
    #[arg(long, default_value_t = 0.5, help_heading = "Optimization")]
    pub value_coef: f64,
    /// Multiply rewards by this before clipping; for learning only, scores stay raw.
    #[arg(long, default_value_t = 1.0, value_parser = parse_reward_scale, help_heading = "Optimization")]
    pub reward_scale: f64,
    /// Clip learning rewards to [-C, C], as the reference does for Atari; "off" keeps
    /// them whole (Pendulum's costs run to -16 a step).
    #[arg(long, default_value_t = RewardClip(Some(1.0)), value_parser = parse_reward_clip, help_heading = "Optimization")]
    pub reward_clip: RewardClip,

    /// Stop after this many agent steps, summed over workers.
    #[arg(long, help_heading = "Run")]
    pub max_steps: Option<u64>,
    /// Stop after this long: 90s, 10m, 2h, or plain seconds.
    #[arg(long, value_parser = parse_duration, help_heading = "Run")]
    pub max_time: Option<HumanDuration>,
    /// Stop once the test agent's mean over its last 100 games reaches this score.
    #[arg(long, allow_negative_numbers = true, help_heading = "Run")]
    pub stop_at_mean: Option<f64>,
    /// Seconds between status lines.
    #[arg(long, default_value_t = 5.0, help_heading = "Run")]
    pub status_interval: f64,

    /// Resume model, optimizer statistics and counters from --load-model-dir.
    #[arg(long, help_heading = "Checkpoints")]
    pub load: bool,
    /// Folder --load reads checkpoints from.
    #[arg(long, default_value = "trained_models", help_heading = "Checkpoints")]
    pub load_model_dir: PathBuf,
    /// Folder checkpoints are written to.
    #[arg(long, default_value = "trained_models", help_heading = "Checkpoints")]
    pub save_model_dir: PathBuf,
    /// Save after a test game only when it matches or beats the best score so far,
    /// and keep that checkpoint at the end rather than the final weights.
    #[arg(long, help_heading = "Checkpoints")]
    pub save_max: bool,
    /// Folder of the test agent's game log (`<env>_log`).
    #[arg(long, default_value = "logs", help_heading = "Checkpoints")]
    pub log_dir: PathBuf,

    /// Write TensorBoard event files into <tensorboard-dir>/<env>_training/: test
    /// games, a histogram of every parameter per test game, rates, losses.
    #[arg(long, help_heading = "Monitoring")]
    pub tensorboard_logger: bool,
    /// Folder of the TensorBoard runs.
    #[arg(long, default_value = "runs", help_heading = "Monitoring")]
    pub tensorboard_dir: PathBuf,
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

fn parse_duration(text: &str) -> Result<HumanDuration, String> {
    let (number, unit) = match text.char_indices().last() {
        Some((index, 's')) => (&text[..index], 1.0),
        Some((index, 'm')) => (&text[..index], 60.0),
        Some((index, 'h')) => (&text[..index], 3600.0),
        _ => (text, 1.0),
    };
    positive_number(number)
        .map(|value| HumanDuration { text: text.to_string(), seconds: value * unit })
        .ok_or_else(|| format!("{text:?} is not a duration; write 90s, 10m, 2h or plain seconds"))
}

/// A finite number above zero, or `None`.
fn positive_number(text: &str) -> Option<f64> {
    text.parse::<f64>().ok().filter(|value| *value > 0.0 && value.is_finite())
}

/// Flags of `a3g eval`.
#[derive(Clone, Debug, Args, Serialize)]
pub struct EvalArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub environment: EnvArgs,
    /// Games to play.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub num_episodes: u32,
    /// Random seed of the environment.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// GPU to run the model on; -1 runs it on the CPU.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub gpu_id: i64,
    /// Folder holding <env>.safetensors (a3g) or <env>.dat, .pt, .pth (PyTorch).
    #[arg(long, default_value = "trained_models")]
    pub load_model_dir: PathBuf,
    /// Folder of the evaluation log (`<env>_mon_log`).
    #[arg(long, default_value = "logs")]
    pub log_dir: PathBuf,
    /// Record games as animated GIFs (headless: the file is the render).
    #[arg(long, help_heading = "Recording")]
    pub render: bool,
    /// With --render, record every K-th game, starting with the first.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Recording")]
    pub render_freq: u32,
    /// Folder for the GIFs (default: <log-dir>/<env>_games).
    #[arg(long, value_name = "DIR", help_heading = "Recording")]
    pub record_dir: Option<PathBuf>,
    /// Print the summary as one JSON object on stdout (the per-game lines go to stderr).
    #[arg(long)]
    pub json: bool,
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
        for bad in ["", "m", "ten", "-5s", "0", "5d"] {
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
        for bad in [["--reward-clip", "0"], ["--reward-clip", "none"], ["--reward-scale", "-1"]] {
            assert!(
                Cli::try_parse_from([&["a3g", "train"], &bad[..]].concat()).is_err(),
                "{bad:?} parsed"
            );
        }
    }
}
