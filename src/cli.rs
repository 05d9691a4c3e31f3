//! The command line: subcommands and their flags, which double as the documentation
//! of every hyperparameter (`a3g <subcommand> --help`).

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
}

/// Flags of `a3g train`.
#[derive(Debug, Args)]
pub struct TrainArgs {}

/// Flags of `a3g eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {}
