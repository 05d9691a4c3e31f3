//! What `a3g train`'s flags come to once checked, shared by both trainers: the
//! devices, the environments' options, the model, the optimizer and the loss; and the
//! checks that must pass before any thread starts or any file is touched.

use std::path::Path;
use std::thread;

use tch::Device;

use crate::checkpoint::{self, Checkpoint, FolderLock, Sidecar};
use crate::cli::{ModelName, OptimizerName, TrainArgs};
use crate::console;
use crate::device;
use crate::env::{self, CropTable, Env, Screen};
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
    /// The checkpoint --load resumes, read and checked before anything starts; the
    /// model's dimensions are its.
    pub resume: Option<Checkpoint>,
    /// How Atari screens become observations, as the model wants them.
    screen: Screen,
    crops: CropTable,
}

impl<'a> TrainConfig<'a> {
    /// Checks the flags and makes the test agent's environment (from which the model
    /// is sized), so that a bad id or crop file is reported before training begins.
    pub fn new(args: &'a TrainArgs) -> Result<(Self, Box<dyn Env>)> {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        let workers = args.workers.unwrap_or(cores);
        if workers == 0 {
            return Err(Error::BadArguments(
                "--workers must be at least 1; leave it out for one per core".into(),
            ));
        }
        let devices = device::select_list(&args.gpu_ids)?;
        let crops = CropTable::from_flag(args.environment.env_config.as_deref())?;
        let env_id = &args.environment.env;
        let test_seed = args.seed.wrapping_add(workers as u64);
        let flag_screen = args.model.unwrap_or(ModelName::A3cLstm).screen();
        // Made before the checkpoint is read, so that an unknown id is reported as such
        // rather than as a missing checkpoint; remade if the checkpoint's model wants
        // another screen.
        let mut test_env =
            env::make(env_id, &args.environment.options(&crops, test_seed, flag_screen))?;
        let resume = if args.load {
            let checkpoint = checkpoint::load(&args.load_model_dir, env_id)?;
            checkpoint.sidecar.check_env(&checkpoint.files.sidecar, env_id)?;
            checkpoint.sidecar.check_resumable(&checkpoint.files.sidecar)?;
            Some(checkpoint)
        } else {
            None
        };
        let screen = match &resume {
            Some(checkpoint) => resumed_screen(args, &checkpoint.sidecar)?,
            None => flag_screen,
        };
        if screen != flag_screen {
            test_env = env::make(env_id, &args.environment.options(&crops, test_seed, screen))?;
        }
        let spec = match &resume {
            Some(checkpoint) => resumed_spec(args, test_env.as_ref(), &checkpoint.sidecar)?,
            None => ModelSpec::for_env(
                test_env.observation_shape(),
                test_env.action_space(),
                args.hidden_size
                    .unwrap_or(args.model.unwrap_or(ModelName::A3cLstm).default_hidden_size()),
                args.lstm,
            ),
        };
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
            resume,
            screen,
            crops,
        };
        Ok((config, test_env))
    }

    /// The environment of worker (or agent) `rank`, seeded `--seed + rank`; the test
    /// agent's is rank `workers`.
    pub fn make_env(&self, rank: usize) -> Result<Box<dyn Env>> {
        let options = self.args.environment.options(
            &self.crops,
            self.args.seed.wrapping_add(rank as u64),
            self.screen,
        );
        env::make(&self.args.environment.env, &options)
    }

    /// Claims the save folder: checks that the run fits in memory as `plan` lays it
    /// out, locks the folder, refuses to replace a model the run did not start from,
    /// and removes what an interrupted run left. The lock is held as long as the
    /// returned value lives.
    pub fn claim_save_dir(&self, plan: MemoryPlan) -> Result<FolderLock> {
        check_memory(&self.spec, plan, self.workers)?;
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

/// The screen a resumed model was trained on; --model may not name another.
fn resumed_screen(args: &TrainArgs, sidecar: &Sidecar) -> Result<Screen> {
    let trained = match sidecar.model.body {
        Body::Universe => Some(ModelName::Universe),
        Body::AtariLstm => Some(ModelName::A3cLstm),
        Body::Mlp { .. } => None,
    };
    match (trained, args.model) {
        (Some(trained), Some(asked)) if trained != asked => Err(contradiction(
            sidecar,
            format!("--model {}", model_flag(asked)),
            format!("a {} model", model_flag(trained)),
            "--model",
        )),
        (Some(trained), _) => Ok(trained.screen()),
        (None, _) => Ok(Screen::default()),
    }
}

/// The model a resumed run trains: the checkpoint's dimensions on this environment's
/// observations and actions (a flag that contradicts them is refused).
fn resumed_spec(args: &TrainArgs, env: &dyn Env, sidecar: &Sidecar) -> Result<ModelSpec> {
    let trained = &sidecar.model;
    if let Some(asked) = args.hidden_size.filter(|asked| *asked != trained.hidden_size) {
        return Err(contradiction(
            sidecar,
            format!("--hidden-size {asked}"),
            format!("a hidden size of {}", trained.hidden_size),
            "--hidden-size",
        ));
    }
    let lstm = match trained.body {
        Body::Mlp { lstm, .. } => lstm,
        Body::AtariLstm | Body::Universe => true,
    };
    if args.lstm && !lstm {
        return Err(contradiction(sidecar, "--lstm".into(), "no LSTM cell".into(), "--lstm"));
    }
    Ok(ModelSpec::for_env(env.observation_shape(), env.action_space(), trained.hidden_size, lstm))
}

fn contradiction(sidecar: &Sidecar, asked: String, trained: String, flag: &str) -> Error {
    Error::BadArguments(format!(
        "{asked} contradicts the checkpoint --load resumes, which has {trained} (a3g {}); \
         leave out {flag} to resume it, or start a new run without --load",
        sidecar.a3g_version
    ))
}

fn model_flag(model: ModelName) -> String {
    use clap::ValueEnum;
    model.to_possible_value().map(|value| value.get_name().to_string()).unwrap_or_default()
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

/// Resident bytes one environment takes, with its worker's LSTM state and rollout: an
/// Atari worker measured 0.47 MB (64 Pong workers against 8 with --model universe, 6 s
/// runs, the difference in peak resident memory over 56), rounded up to 2 MB for the
/// reference network's larger screens; classic control's state is a few numbers.
fn environment_bytes(spec: &ModelSpec) -> f64 {
    match spec.body {
        Body::AtariLstm | Body::Universe => 2.0 * 1024.0 * 1024.0,
        Body::Mlp { .. } => 64.0 * 1024.0,
    }
}

/// What a run keeps in memory beyond the shared model, which the memory check counts.
#[derive(Clone, Copy, Debug)]
pub struct MemoryPlan {
    /// Working copies of the model (training threads, predictors, trainers).
    pub model_copies: usize,
    /// Optimizer statistics beside the shared ones (--shared-optimizer false).
    pub optimizer_copies: usize,
    /// Environments: workers or agents, at the most the run may start.
    pub environments: usize,
}

/// Refuses a run too big for the machine before any of it is allocated: libtorch
/// would otherwise abort with a C++ trace, and a billion workers would be built for
/// minutes before the allocator gave up. Counts the shared weights, up to three
/// optimizer statistics per optimizer, each working copy with its gradients, the test
/// agent's copy, a checkpoint's copies, and every environment.
fn check_memory(spec: &ModelSpec, plan: MemoryPlan, workers: usize) -> Result<()> {
    let Some(available) = available_memory() else { return Ok(()) };
    let parameter_bytes = spec.parameter_count() * 4.0;
    let model = parameter_bytes * (8.0 + 2.0 * plan.model_copies as f64);
    let optimizers = parameter_bytes * 3.0 * plan.optimizer_copies as f64;
    let environments = environment_bytes(spec) * plan.environments as f64;
    let gigabytes = |bytes: f64| bytes / 1e9;
    if model > available {
        return Err(Error::BadArguments(format!(
            "--hidden-size {} gives {:.3e} parameters, which need about {:.1} GB here (weights, optimizer \
             statistics and {} training copies) and {:.1} GB is available; pick a smaller --hidden-size",
            spec.hidden_size,
            spec.parameter_count(),
            gigabytes(model),
            plan.model_copies,
            gigabytes(available)
        )));
    }
    if model + optimizers > available {
        return Err(Error::BadArguments(format!(
            "--shared-optimizer false gives {} more copies of the optimizer statistics, which with the model \
             need about {:.1} GB here and {:.1} GB is available; share the optimizer, or pick fewer --workers \
             or a smaller --hidden-size",
            plan.optimizer_copies,
            gigabytes(model + optimizers),
            gigabytes(available)
        )));
    }
    if model + optimizers + environments > available {
        let fit = ((available - model - optimizers) / environment_bytes(spec)).floor().max(0.0);
        return Err(Error::BadArguments(format!(
            "--workers {workers} needs about {:.1} GB here for its environments and models, and {:.1} GB is \
             available; pick at most {fit} workers",
            gigabytes(model + optimizers + environments),
            gigabytes(available)
        )));
    }
    Ok(())
}

/// Bytes of memory available to new allocations: MemAvailable in /proc/meminfo, or
/// less under an address-space limit (`ulimit -v`), what is left of it.
fn available_memory() -> Option<f64> {
    let kilobytes = |text: &str, key: &str| -> Option<f64> {
        let value = text.lines().find_map(|line| line.strip_prefix(key))?;
        value.trim().trim_end_matches("kB").trim().parse().ok()
    };
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = kilobytes(&meminfo, "MemAvailable:")? * 1024.0;
    Some(available.min(address_space_left().unwrap_or(f64::INFINITY)))
}

/// Bytes of address space this process may still map under its soft limit, if it has
/// one: /proc/self/limits' "Max address space" less /proc/self/status' VmSize.
fn address_space_left() -> Option<f64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let limit: f64 = limits
        .lines()
        .find_map(|line| line.strip_prefix("Max address space"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mapped: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmSize:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some((limit - mapped * 1024.0).max(0.0))
}
