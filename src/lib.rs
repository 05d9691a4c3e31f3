//! a3g: asynchronous advantage actor-critic (A3C, arXiv:1602.01783) and its GPU-hybrid
//! form A3G, trained with threads that share one model.
//!
//! # Layout
//!
//! - [`cli`]: the command line, whose flags document every hyperparameter.
//! - [`error`]: the library's error type; `main` prints it on one line.
//! - [`env`](mod@env): the environments: Atari games (`env/atari/`: the ALE emulator with
//!   Gym's id semantics, the reference's wrapper stack and screen preprocessing, the
//!   crop rows), classic control, and Gymnasium's
//!   Box2D tasks (`env/box2d/`, on Box2D 2.3.1, seeded through NumPy's generator in
//!   `env/numpy_rng.rs`); the simulated ones run under one time limit
//!   (`env/time_limit.rs`); environments from outside a3g (`env/gym/`: any Gymnasium
//!   id or a user's class, each in a Python process a3g owns, the Python side in
//!   `env/gym/host.py`); and those a program registers ([`env::register`]).
//! - [`envs`]: the `a3g envs` subcommand.
//! - [`model`]: the actor-critic networks, one file a body (`a3clstm`, `universe`
//!   with its ELU in [`model::elu`], a CPU kernel of a3g's own, `mlp`), the LSTM cell
//!   and its tape (`model/lstm.rs`); [`precision`]: their bf16 passes; [`policy`]:
//!   choosing actions from them.
//! - [`rollout`]: returns, GAE and the loss; [`gradients`]: an update's gradients on
//!   their way to the shared model; [`shared_optim`]: the shared optimizers;
//!   [`shared`]: the shared model and the one way threads read and update it.
//! - [`config`]: the flags of `a3g train` and `a3g eval`, checked once into owned
//!   settings (environments made by rank, each trainer's own settings): a pure pass
//!   over the flags, the model opened through checkpoint/, then the settings that
//!   follow the network; nothing past it reads the flags.
//! - [`train`]: `a3g train`, which starts a trainer and the test agent;
//!   [`trainer`]: the contract every trainer meets (what it starts, reports and
//!   times) and the one table of trainers; [`supervisor`]: starts, names and joins
//!   every thread of a run, keeping the first failure typed; [`counters`]: the live
//!   counts every thread adds to and the monitor and ranks read; [`monitor`]: status
//!   lines, test games, checkpoints and budgets for any trainer; [`stop`]: how a run
//!   stops; [`tensorboard`]: its event files.
//! - The trainers: [`a3c`], workers (environment, LSTM state, rollouts) taken in turn
//!   by training threads; [`ga3c`], agents, predictors that batch their forward
//!   passes and trainers that batch their updates. A third trainer goes in a folder
//!   of its own, its flags and settings in its settings.rs (as `a3c/settings.rs` and
//!   `ga3c/settings.rs`), those settings implementing [`trainer::Trainer`], with a row
//!   in [`trainer::chosen`], a variant of [`config::TrainerConfig`] (an arm in each of
//!   its methods) and a value of `--trainer`.
//!   [`test_agent`]: the test agent's thread, which every trainer runs.
//! - [`checkpoint`]: the checkpoint set (the sidecar with the run's checked settings,
//!   one open for a fresh run, `train --load`, a rank taking rank 0's record and eval
//!   in `checkpoint/open.rs`, the previous-set fallback; its atomic
//!   writer and folder lock in `checkpoint/save.rs`), and beside it
//!   [`checkpoint::torch_file`], reading PyTorch's `torch.save` state dicts (zip and
//!   legacy layouts; the unpickler in `torch_file/pickle.rs`).
//! - [`eval`]: `a3g eval`, the evaluation over many games; [`gif`]: its recordings;
//!   [`game_log`]: the per-game logs of train and eval, every kind of line written
//!   and read there only; [`device`]: `--gpu-id`, `--gpu-ids` and the host syncs;
//!   [`devices`]: `a3g devices`;
//!   [`console`]: stdout for a command's output, stderr for the rest, neither fatal;
//!   [`files`]: reading the files a user names, never a device.
//! - [`distributed`]: training across machines: a launcher's variables, c10d's process
//!   group through a C++ shim (built when set-up found gloo's headers), and each rank's
//!   sync thread, which the supervisor runs beside the trainer's threads.
//! - [`plot`]: `a3g plot`, learning curves from game logs drawn into a PNG.
//!
//! The modules form layers, and a file imports only from its own layer or lower ones
//! (the architecture tests check it, with their table of which file is where): the
//! foundation (errors, the console, stops, precision); environments and networks
//! (env/, model/, the loss, devices, the logs' formats); state and settings (the
//! shared model, checkpoints, counters, the command line, each trainer's
//! settings.rs, distributed/); config/; the running trainers, monitor and test agent;
//! and the commands. No flag is read past config/ (each trainer's settings.rs and
//! distributed/'s own flag type aside), and every thread starts through the
//! supervisor (the signal watcher and a rank's join aside).
//!
//! # Terminology
//!
//! - *emulator frame*: one frame of the Atari console.
//! - *agent step*: one action chosen by the agent; with frame skip it spans several
//!   emulator frames. Counters carry their unit (`env_frames`, `agent_steps`).

pub mod a3c;
#[cfg(test)]
mod architecture;
pub mod checkpoint;
pub mod cli;
pub mod config;
pub mod console;
pub mod counters;
pub mod device;
pub mod devices;
pub mod distributed;
pub mod env;
pub mod envs;
pub mod error;
pub mod eval;
pub mod files;
#[cfg(test)]
mod fuzz;
pub mod ga3c;
pub mod game_log;
pub mod gif;
pub mod gradients;
pub mod input_norm;
pub mod model;
pub mod monitor;
pub mod plot;
pub mod policy;
pub mod precision;
pub mod rollout;
pub mod shared;
pub mod shared_optim;
pub mod stop;
pub mod supervisor;
pub mod tensorboard;
pub mod test_agent;
pub mod train;
pub mod trainer;

pub use error::{Error, Result};

use cli::{Cli, Command};

/// Runs the subcommand the user asked for.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Train(args) => train::run(&args),
        Command::Eval(args) => {
            console::note_when_stdout_closes(
                "the evaluation goes on, and its game log and recordings are still written",
            );
            eval::run(&args)
        }
        Command::Envs(args) => envs::run(&args),
        Command::Devices => devices::run(),
        Command::Plot(args) => plot::run(&args),
    }
}
