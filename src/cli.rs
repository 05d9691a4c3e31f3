//! The command line: subcommands and their flags, which double as the documentation
//! of every hyperparameter (`a3g <subcommand> --help`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    Train(TrainArgs),
    /// Evaluate a saved model over a number of greedy episodes.
    Eval(EvalArgs),
    /// List environment ids with their action space and observation shape.
    Envs(EnvsArgs),
}

/// Flags of `a3g train`.
#[derive(Debug, Args)]
pub struct TrainArgs {}

/// Flags of `a3g eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {}

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
