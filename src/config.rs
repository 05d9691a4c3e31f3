//! What `a3g train`'s flags come to once checked, shared by both trainers: the
//! devices, the environments' options, the model, the optimizer and the loss; and the
//! checks that must pass before any thread starts or any file is touched.

use std::path::Path;
use std::thread;

use tch::Device;

use crate::checkpoint::{self, FolderLock};
use crate::cli::{OptimizerName, TrainArgs};
use crate::console;
use crate::device;
use crate::env::{self, CropTable, Env};
use crate::error::{Error, Result};
use crate::model::{Body, ModelSpec};
use crate::rollout::{LossConfig, RewardShaping};
use crate::shared_optim::OptimizerKind;

/// The test agent's default share of one core on Atari: its games are long and
/// greedy play only measures progress, while every core it takes slows training.
const ATARI_TEST_SHARE: f64 = 0.1;

/// A training run's settings, validated.
pub struct TrainConfig<'a> {
    pub args: &'a TrainArgs,
    /// Workers (A3C) or agents (GA3C): one environment each.
    pub workers: usize,
    pub devices: Vec<Device>,
    pub cores: usize,
    pub spec: ModelSpec,
    /// The shape of one observation, as the model takes it.
    pub observation_shape: Vec<i64>,
    pub optimizer: OptimizerKind,
    pub loss: LossConfig,
    pub rewards: RewardShaping,
    /// Share of one core the test agent may take.
    pub test_share: f64,
    crops: CropTable,
}

impl<'a> TrainConfig<'a> {
    /// Checks the flags and makes the test agent's environment (from which the model
    /// is sized), so that a bad id or crop file is reported before training begins.
    pub fn new(args: &'a TrainArgs) -> Result<(Self, Box<dyn Env>)> {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        let workers = args.workers.unwrap_or(cores);
        if workers == 0 {
            return Err(Error::BadArguments("--workers must be at least 1".into()));
        }
        let devices = device::select_list(&args.gpu_ids)?;
        let crops = CropTable::from_flag(args.environment.env_config.as_deref())?;
        let test_env = env::make(
            &args.environment.env,
            &args.environment.options(&crops, args.seed + workers as u64, args.model.screen()),
        )?;
        let spec = ModelSpec::for_env(
            test_env.observation_shape(),
            test_env.action_space(),
            args.hidden_size.unwrap_or(args.model.default_hidden_size()),
            args.lstm,
        );
        let test_share = args.test_share.unwrap_or(match spec.body {
            Body::AtariLstm | Body::Universe => ATARI_TEST_SHARE,
            Body::Mlp { .. } => 1.0,
        });
        let config = TrainConfig {
            args,
            workers,
            devices,
            cores,
            spec,
            observation_shape: test_env.observation_shape().to_vec(),
            optimizer: match args.optimizer {
                OptimizerName::Adam => OptimizerKind::Adam { amsgrad: args.amsgrad },
                OptimizerName::RmsProp => OptimizerKind::RmsProp,
            },
            loss: LossConfig {
                gamma: args.gamma,
                tau: args.tau,
                entropy_coef: args.entropy_coef,
                value_coef: args.value_coef,
            },
            rewards: RewardShaping { scale: args.reward_scale, clip: args.reward_clip.0 },
            test_share,
            crops,
        };
        Ok((config, test_env))
    }

    /// The environment of worker (or agent) `rank`, seeded `--seed + rank`; the test
    /// agent's is rank `workers`.
    pub fn make_env(&self, rank: usize) -> Result<Box<dyn Env>> {
        let options = self.args.environment.options(
            &self.crops,
            self.args.seed + rank as u64,
            self.args.model.screen(),
        );
        env::make(&self.args.environment.env, &options)
    }

    /// Claims the save folder: checks that the model fits in memory with
    /// `model_copies` working copies besides the shared one, locks the folder, refuses
    /// to replace a model the run did not start from, and removes what an interrupted
    /// run left. The lock is held as long as the returned value lives.
    pub fn claim_save_dir(&self, model_copies: usize) -> Result<FolderLock> {
        check_memory(&self.spec, model_copies)?;
        let dir = &self.args.save_model_dir;
        // The folder is held before anything in it is read or written.
        let lock = checkpoint::lock_folder(dir, &self.args.environment.env)?;
        refuse_to_replace(self.args)?;
        let removed = checkpoint::remove_stale_temporaries(dir);
        if removed > 0 {
            console::warn(&format!(
                "note: removed {removed} temporary files that an interrupted run left in {}",
                dir.display()
            ));
        }
        Ok(lock)
    }
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

fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Refuses a model too big for the machine before any of it is allocated: libtorch
/// would otherwise abort with a C++ trace. Counts the shared weights, up to three
/// optimizer statistics, each working copy with its gradients, the test agent's copy
/// and a checkpoint's copies.
fn check_memory(spec: &ModelSpec, model_copies: usize) -> Result<()> {
    let copies = 8.0 + 2.0 * model_copies as f64;
    let needed = spec.parameter_count() * 4.0 * copies;
    let Some(available) = available_memory() else { return Ok(()) };
    if needed <= available {
        return Ok(());
    }
    Err(Error::BadArguments(format!(
        "--hidden-size {} gives {:.3e} parameters, which need about {:.1} GB here (weights, optimizer \
         statistics and {model_copies} training copies) and {:.1} GB is available; pick a smaller --hidden-size",
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
