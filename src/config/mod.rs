//! What the flags of `a3g train` and `a3g eval` come to once checked: owned, typed
//! settings made here, once, before any thread starts or any file is touched. Nothing
//! past this module reads the flags: the environments (one `make(rank)` for workers,
//! agents, the test agent and eval, seeds derived there), the model, the optimizer
//! and the loss, each trainer's own settings, and what the monitor watches for.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use tch::Device;

use crate::a3c::settings::A3cConfig;
pub use crate::checkpoint::record::{TrainedWith, TrainerConfig};
use crate::checkpoint::{self, Checkpoint, FolderLock, Sidecar};
use crate::cli::{
    EnvArgs, EvalArgs, ModelName, OptimizerName, PrecisionName, TrainArgs, TrainerName,
};
use crate::console;
use crate::device;
use crate::distributed::{c10d, Launch, ModelSum, SyncMerge};
use crate::env::{self, atari::AtariId, Crop, CropTable, Env, EnvOptions, Screen};
use crate::error::{Error, Result};
use crate::ga3c::settings::{ga3c_agents_per_core, Ga3cConfig};
use crate::model::{Body, Head, ModelSpec, MIN_STD_RANGE};
use crate::rollout::{LossConfig, RewardShaping};
use crate::shared_optim::OptimizerKind;

mod memory;

use memory::check_memory;
pub use memory::MemoryPlan;

/// The test agent's default share of one core on Atari: its games are long and
/// greedy play only measures progress, while every core it takes slows training.
const ATARI_TEST_SHARE: f64 = 0.1;

/// How a run's environments are made: one id and options, and a seed per rank.
#[derive(Clone, Debug)]
pub struct EnvConfig {
    pub id: String,
    /// Every option but the seed, which [`EnvConfig::make`] sets per rank.
    options: EnvOptions,
    /// `--seed`: rank r plays with seed + r.
    base_seed: u64,
    /// Agent steps after which a game is cut (`--max-episode-length`).
    pub max_episode_length: u32,
    /// Whether `--env-config` chose the crop rows; if not, those a checkpoint records
    /// for its game are played.
    crops_from_flag: bool,
}

impl EnvConfig {
    fn new(args: &EnvArgs, base_seed: u64, screen: Screen) -> Result<Self> {
        let crops = CropTable::from_flag(args.env_config.as_deref())?;
        Ok(EnvConfig {
            id: args.env.clone(),
            options: args.options(&crops, base_seed, screen),
            base_seed,
            max_episode_length: args.max_episode_length,
            crops_from_flag: args.env_config.is_some(),
        })
    }

    /// The seed of rank `rank`: `--seed + rank`.
    pub fn seed(&self, rank: usize) -> u64 {
        self.base_seed.wrapping_add(rank as u64)
    }

    /// The environment these options make with seed `seed`, whatever the ranks'.
    pub fn make_seeded(&self, seed: u64) -> Result<Box<dyn Env>> {
        env::make(&self.id, &EnvOptions { seed, ..self.options.clone() })
    }

    /// The environment of rank `rank`. Training gives workers (or agents) ranks from 0
    /// and the test agent rank `workers`; eval plays rank 0.
    pub fn make(&self, rank: usize) -> Result<Box<dyn Env>> {
        self.make_seeded(self.seed(rank))
    }

    /// The rows kept of the game's screens, when an Atari game is played on the
    /// reference's screen (the other screen crops by its own fixed rule).
    pub fn crop(&self) -> Option<Crop> {
        let game = AtariId::parse(&self.id)?.game;
        (self.options.screen == Screen::Gray80).then(|| self.options.crops.for_game(&game))
    }

    /// The environments a checkpoint's model was trained on: Atari screens prepared as
    /// `screen`, and the crop rows `trained` records (checked when its sidecar was
    /// read) unless `--env-config` names others, since a model fed other rows than it
    /// learned from plays blind. Says so on stderr when the recorded rows replace the
    /// ones the flags gave.
    fn as_trained(&self, screen: Screen, trained: Option<&TrainedWith>) -> Self {
        let mut env =
            EnvConfig { options: EnvOptions { screen, ..self.options.clone() }, ..self.clone() };
        let recorded = trained.and_then(|trained| trained.crop);
        if let (Some(recorded), false) = (recorded, self.crops_from_flag) {
            if env.crop().is_some_and(|crop| crop != recorded) {
                console::warn(&format!(
                    "note: playing rows {}..{} of the screen, as the checkpoint was trained; --env-config \
                     chooses others",
                    recorded.crop1,
                    recorded.rows_end()
                ));
                env.options.crops = CropTable::only(recorded);
            }
        }
        env
    }
}

impl TrainerConfig {
    /// The settings of the trainer `--trainer` names, from the flags, for `workers`
    /// workers or agents of a network with `body`.
    fn from_flags(
        args: &TrainArgs,
        body: &Body,
        workers: usize,
        cores: usize,
        devices: &[Device],
    ) -> Result<Self> {
        Ok(match args.trainer {
            TrainerName::A3c => TrainerConfig::A3c(A3cConfig::from_flags(args)?),
            TrainerName::Ga3c => {
                TrainerConfig::Ga3c(Ga3cConfig::new(args, body, workers, cores, devices)?)
            }
        })
    }

    /// Workers or agents per core when --workers is left out.
    fn agents_per_core(trainer: TrainerName, body: &Body) -> usize {
        match trainer {
            TrainerName::A3c => A3cConfig::WORKERS_PER_CORE,
            TrainerName::Ga3c => ga3c_agents_per_core(body),
        }
    }

    /// `--trainer`'s name for it.
    pub fn name(&self) -> &'static str {
        match self {
            TrainerConfig::A3c(_) => "a3c",
            TrainerConfig::Ga3c(_) => "ga3c",
        }
    }

    /// The lengths of the rollouts or segments its updates learn from.
    pub fn rollout_lengths(&self) -> Vec<u32> {
        match self {
            TrainerConfig::A3c(a3c) => a3c.rollout_lengths.clone(),
            TrainerConfig::Ga3c(ga3c) => vec![ga3c.num_steps],
        }
    }
}

/// Where a run's checkpoints and logs go, and what ends it: what the monitor needs.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Whether the run goes on from a checkpoint (`--load`).
    pub resumed: bool,
    pub save_model_dir: PathBuf,
    /// Keep the best test game's weights (`--save-max`).
    pub save_max: bool,
    /// Least time between checkpoints after test games.
    pub save_interval: Duration,
    /// The test agent's game log, `<log-dir>/<env>_log`.
    pub log_path: PathBuf,
    /// TensorBoard's runs folder, when it is on.
    pub tensorboard_dir: Option<PathBuf>,
    /// Agent steps at which the run stops: --max-steps, and never past
    /// [`checkpoint::RUN_STEP_LIMIT`].
    pub step_budget: u64,
    pub max_time: Option<Duration>,
    pub stop_at_mean: Option<f64>,
    pub confirm_games: usize,
    pub status_interval: Duration,
}

/// A run across machines, as a launcher started it: this rank's place, and how the
/// ranks sync.
#[derive(Clone, Debug)]
pub struct DistributedConfig {
    pub launch: Launch,
    pub sync_interval: Duration,
    pub sync_merge: SyncMerge,
    pub sync_timeout: Duration,
    pub model_sum: ModelSum,
}

impl DistributedConfig {
    /// Whether this rank writes the run's files and runs its test agent: rank 0 does,
    /// for all of them.
    pub fn leads(&self) -> bool {
        self.launch.rank == 0
    }
}

/// A training run's settings, checked.
pub struct TrainConfig {
    pub env: EnvConfig,
    /// Workers (A3C) or agents (GA3C): one environment each.
    pub workers: usize,
    pub devices: Vec<Device>,
    pub cores: usize,
    pub seed: u64,
    pub spec: ModelSpec,
    /// The shape of one observation, as the model takes it.
    pub observation_shape: Vec<i64>,
    pub optimizer: OptimizerKind,
    pub lr: f64,
    /// Whether workers (A3C) or trainers (GA3C) share the optimizer's statistics.
    pub shared_optimizer: bool,
    pub loss: LossConfig,
    pub rewards: RewardShaping,
    pub trainer: TrainerConfig,
    pub run: RunConfig,
    /// Share of one core the test agent may take.
    pub test_share: f64,
    /// Whether a GPU is waited for at each phase boundary (`--profile-phases`).
    pub profile_phases: bool,
    /// The checkpoint --load resumes, read and checked before anything starts; the
    /// model's dimensions are its.
    pub resume: Option<Checkpoint>,
    /// Whether the run starts by measuring the observations' scaling for the model's
    /// inputs (`--normalize-obs` on a fresh run), which `spec` then lacks.
    pub measure_input_norm: bool,
    /// What to tell the user once the run is known to start (stderr notes).
    pub notes: Vec<String>,
    /// Set when a launcher started this process as one rank of several.
    pub distributed: Option<DistributedConfig>,
    /// The flags as given, for the game log's header and the sidecar: a record of
    /// the run, which nothing reads back to decide anything.
    pub arguments: serde_json::Value,
    /// Whether a model already in the save folder may be replaced: by this run's own
    /// resumed model, or with --overwrite.
    may_replace: bool,
}

impl TrainConfig {
    /// Checks the flags and makes the test agent's environment (from which the model
    /// is sized), so that a bad id or crop file is reported before training begins.
    /// `rank_zero_record` is, on a rank other than 0 of a resumed run, the sidecar of
    /// the checkpoint rank 0 resumes: the model's settings are its, as on rank 0.
    pub fn new(
        args: &TrainArgs,
        rank_zero_record: Option<&Sidecar>,
    ) -> Result<(Self, Box<dyn Env>)> {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        if args.workers == Some(0) {
            return Err(Error::BadArguments(
                "--workers must be at least 1; leave it out for one per core".into(),
            ));
        }
        let devices = device::select_list(&args.gpu_ids)?;
        let launch = Launch::of_this_process()?;
        if launch.is_some() && args.sync_interval * 2.0 > args.sync_timeout {
            // A rank that stops enters the next sync up to an interval before the
            // others, and must not give up on them meanwhile.
            return Err(Error::BadArguments(format!(
                "--sync-interval {} is more than half of --sync-timeout {}; a stopping rank would give up \
                 on the others before they sync: lower the interval or raise the timeout",
                args.sync_interval, args.sync_timeout
            )));
        }
        let leads = launch.as_ref().is_none_or(|launch| launch.rank == 0);
        let flag_screen = args.model.unwrap_or(ModelName::A3cLstm).screen();
        let mut env = EnvConfig::new(&args.environment, args.seed, flag_screen)?;
        let flag_crops = env.options.crops.clone();
        // Made before the checkpoint is read, so that an unknown id is reported as such
        // rather than as a missing checkpoint; remade as rank `workers` once the
        // network, and so GA3C's default agent count and the screen, are known.
        let provisional_rank = args.workers.unwrap_or(cores);
        let mut test_env = env.make(provisional_rank)?;
        if let Some(min_std) = args.min_std {
            if !MIN_STD_RANGE.contains(&min_std) {
                let (low, high) = MIN_STD_RANGE.into_inner();
                return Err(Error::BadArguments(format!(
                    "--min-std {min_std} is outside [{low}, {high}]; a3c_continuous's floor is 0.24"
                )));
            }
            if test_env.action_space().bounds().is_none() {
                return Err(Error::BadArguments(format!(
                    "--min-std floors the Gaussian of continuous actions; {}'s actions are discrete: \
                     leave it out",
                    env.id
                )));
            }
        }
        if args.normalize_obs && test_env.observation_shape().len() != 1 {
            return Err(Error::BadArguments(format!(
                "--normalize-obs scales the observations of classic-control and Box2D tasks; {}'s \
                 screens are scaled already: leave it out",
                env.id
            )));
        }
        // Rank 0 reads the checkpoint and gives its weights to the other ranks, which
        // may not see its disk.
        let resume = if args.load && leads {
            let checkpoint = checkpoint::load(&args.load_model_dir, &env.id)?;
            checkpoint.sidecar.check_env(&checkpoint.files.sidecar, &env.id)?;
            checkpoint.sidecar.check_resumable(&checkpoint.files.sidecar)?;
            Some(checkpoint)
        } else {
            None
        };
        let resumed_record =
            resume.as_ref().map(|checkpoint| &checkpoint.sidecar).or(rank_zero_record);
        if let Some(record) = resumed_record {
            let screen = resumed_screen(args, record)?;
            env = env.as_trained(screen, record.trained_with.as_ref());
        }
        if env.options.screen != flag_screen || env.options.crops != flag_crops {
            // The model is sized from this environment's observations: they must be
            // the screens the checkpoint was trained on, not those the flags implied.
            test_env = env.make(provisional_rank)?;
        }
        let spec = match resumed_record {
            Some(record) => {
                // Rank 0 alone holds the tensors: it checks them, and gives the other
                // ranks its weights.
                let tensors = resume.as_ref().map(|checkpoint| checkpoint::TensorsToCheck {
                    path: &checkpoint.files.model,
                    tensors: &checkpoint.model,
                    advice: checkpoint::SIDECAR_MISMATCH,
                });
                let record_path =
                    resume.as_ref().map_or(Path::new("rank 0's checkpoint"), |checkpoint| {
                        checkpoint.files.sidecar.as_path()
                    });
                checkpoint::checked_spec(
                    test_env.as_ref(),
                    resumed_dimensions(args, record)?,
                    tensors,
                    Some((record, record_path)),
                )?
            }
            None => {
                let mut spec = ModelSpec::for_env(
                    test_env.observation_shape(),
                    test_env.action_space(),
                    args.hidden_size
                        .unwrap_or(args.model.unwrap_or(ModelName::A3cLstm).default_hidden_size()),
                    args.lstm,
                );
                if let (Some(floor), Head::Gaussian { min_std, .. }) =
                    (args.min_std, &mut spec.head)
                {
                    *min_std = floor;
                }
                spec
            }
        };
        // A fresh --normalize-obs run's scaling is measured where the run starts (20,000
        // steps of play), not here: settings are made without playing.
        let measure_input_norm =
            args.normalize_obs && resumed_record.is_none() && matches!(spec.body, Body::Mlp { .. });
        let workers = args.workers.unwrap_or_else(|| {
            cores.saturating_mul(TrainerConfig::agents_per_core(args.trainer, &spec.body))
        });
        if let Some(launch) = &launch {
            // Every rank's environments get seeds of their own, whatever each rank's
            // --workers: rank r's worker w plays seed + r * 2^20 + w.
            let offset = (launch.rank as u64) << 20;
            env.base_seed = args.seed.wrapping_add(offset);
        }
        if workers != provisional_rank || launch.is_some() {
            test_env = env.make(workers)?;
        }
        let trainer = TrainerConfig::from_flags(args, &spec.body, workers, cores, &devices)?;
        let test_share = args.test_share.unwrap_or(match spec.body {
            Body::AtariLstm | Body::Universe => ATARI_TEST_SHARE,
            Body::Mlp { .. } => 1.0,
        });
        let mut notes: Vec<String> =
            Launch::ignored(|name| std::env::var(name).ok()).into_iter().collect();
        if args.load && !leads {
            notes.push(
                "note: rank 0 reads the checkpoint --load resumes and gives its weights to every rank; \
                 this rank's --load-model-dir is not read"
                    .to_string(),
            );
        }
        if spec.body == Body::AtariLstm
            && args.model.is_none()
            && !args.load
            && devices.iter().all(|device| *device == Device::Cpu)
        {
            notes.push(
                "note: on CPU cores the default network (the reference's a3clstm) is slow: two cores trained \
                 Pong with it at 236 agent steps/s, and with --model universe at 1,313 (A3C) to 2,274 (--trainer \
                 ga3c), whose first 18+ game came 7.7-13.8 minutes in (docs/benchmarks.md); pass --model to choose"
                    .to_string(),
            );
        }
        if args.trainer == TrainerName::Ga3c
            && args.ga3c.precision == PrecisionName::Bf16
            && !devices.iter().all(|&device| crate::precision::native_bf16(device))
        {
            notes.push(
                "note: --precision bf16 on hardware without native bf16 (a CPU without avx512_bf16 or \
                 amx_bf16, or a GPU before compute capability 8.0): libtorch emulates it, several times \
                 slower than fp32"
                    .to_string(),
            );
        }
        let local_rank = launch.as_ref().map_or(0, |launch| launch.local_rank);
        let model_sum = ModelSum::for_devices(&devices, local_rank, c10d::NCCL_BUILT_IN);
        if launch.is_some() && !c10d::NCCL_BUILT_IN && devices.iter().any(|d| *d != Device::Cpu) {
            notes.push(
                "note: this a3g was built without NCCL (set-up found no CUDA headers: nvidia-cuda-crt and \
                 nvidia-cuda-cccl), so the ranks sum their models through Gloo on the CPU"
                    .to_string(),
            );
        }
        let resuming_here = args.load && same_folder(&args.load_model_dir, &args.save_model_dir);
        let run = RunConfig {
            resumed: args.load && leads,
            save_model_dir: args.save_model_dir.clone(),
            save_max: args.save_max,
            save_interval: Duration::from_secs_f64(args.save_interval),
            log_path: args.log_dir.join(format!("{}_log", env.id.replace('/', "_"))),
            tensorboard_dir: args.tensorboard_logger.then(|| args.tensorboard_dir.clone()),
            step_budget: args.max_steps.unwrap_or(u64::MAX).min(checkpoint::RUN_STEP_LIMIT),
            max_time: args.max_time.as_ref().map(|max| max.duration()),
            stop_at_mean: args.stop_at_mean,
            confirm_games: args.confirm_games as usize,
            status_interval: Duration::from_secs_f64(args.status_interval.max(0.1)),
        };
        let config = TrainConfig {
            workers,
            devices,
            cores,
            seed: args.seed.wrapping_add(launch.as_ref().map_or(0, |launch| launch.rank as u64)),
            spec,
            observation_shape: test_env.observation_shape().to_vec(),
            optimizer: match args.optimizer {
                OptimizerName::Adam => OptimizerKind::Adam { amsgrad: args.amsgrad },
                OptimizerName::RmsProp => OptimizerKind::RmsProp,
            },
            lr: args.lr,
            shared_optimizer: args.shared_optimizer,
            loss: LossConfig {
                gamma: args.gamma,
                tau: args.tau,
                entropy_coef: args.entropy_coef,
                value_coef: args.value_coef,
            },
            rewards: RewardShaping { scale: args.reward_scale, clip: args.reward_clip.0 },
            trainer,
            run,
            test_share,
            profile_phases: args.profile_phases,
            resume,
            measure_input_norm,
            notes,
            distributed: launch.map(|launch| DistributedConfig {
                launch,
                sync_interval: Duration::from_secs_f64(args.sync_interval),
                sync_merge: args.sync_merge,
                sync_timeout: Duration::from_secs_f64(args.sync_timeout),
                model_sum,
            }),
            // Plain data (paths are written lossily), so this cannot fail in practice.
            arguments: serde_json::to_value(args).unwrap_or_default(),
            may_replace: args.overwrite || resuming_here,
            env,
        };
        Ok((config, test_env))
    }

    /// What a checkpoint of this run records of its settings.
    pub fn trained_with(&self) -> TrainedWith {
        TrainedWith {
            trainer: self.trainer.clone(),
            workers: self.workers,
            seed: self.seed,
            max_episode_length: self.env.max_episode_length,
            skip_rate: self.env.options.skip_rate,
            crop: self.env.crop(),
            lr: self.lr,
            shared_optimizer: self.shared_optimizer,
            loss: self.loss,
            rewards: self.rewards,
        }
    }

    /// What every rank of a run across machines must share with rank 0, as pairs of a
    /// label (the flag a user types, where there is one) and a value: a3g's version,
    /// the environment, the trainer, the model and every training setting but the
    /// seed, the number of workers and GA3C's batching, which follow each machine's
    /// cores. In the order a mismatch is best told in: the trainer before what it
    /// shapes, and every value written alike on both sides (GA3C's one rollout length
    /// as a list, as A3C's lengths are).
    pub fn shared_settings(&self) -> serde_json::Value {
        use serde_json::json;
        let (trainer, rollout_lengths) = (self.trainer.name(), self.trainer.rollout_lengths());
        let spec = &self.spec;
        let (network, lstm, scaling) = match &spec.body {
            Body::AtariLstm => ("a3clstm", true, None),
            Body::Universe => ("universe", true, None),
            Body::Mlp { lstm, input_norm, .. } => ("mlp", *lstm, input_norm.as_ref()),
        };
        let mut settings = vec![
            json!(["a3g's version", env!("CARGO_PKG_VERSION")]),
            json!(["--env", self.env.id]),
            json!(["--trainer", trainer]),
            json!(["--model", network]),
            json!(["--lstm", lstm]),
            json!(["--normalize-obs", scaling.is_some()]),
            json!([
                "the network's inputs (their count, and the measured --normalize-obs scaling)",
                spec.body
            ]),
            json!(["--hidden-size", spec.hidden_size]),
            json!(["the action head (--min-std)", spec.head]),
            json!(["--num-steps (or --distributed-step-size)", rollout_lengths]),
            json!(["--optimizer (and --amsgrad)", self.optimizer]),
            json!(["--lr", self.lr]),
            json!(["--shared-optimizer", self.shared_optimizer]),
            json!(["--gamma", self.loss.gamma]),
            json!(["--tau", self.loss.tau]),
            json!(["--entropy-coef", self.loss.entropy_coef]),
            json!(["--value-coef", self.loss.value_coef]),
            json!(["--reward-scale", self.rewards.scale]),
            json!(["--reward-clip", self.rewards.clip]),
            json!(["--max-episode-length", self.env.max_episode_length]),
            json!(["--skip-rate", self.env.options.skip_rate]),
            json!(["the crop rows (--env-config)", self.env.crop()]),
        ];
        if let Some(distributed) = &self.distributed {
            settings.push(json!(["--sync-interval", distributed.sync_interval.as_secs_f64()]));
            settings.push(json!(["--sync-timeout", distributed.sync_timeout.as_secs_f64()]));
            settings.push(json!(["--sync-merge", distributed.sync_merge]));
            settings.push(json!([
                "the model's sum (NCCL with --gpu-ids, else Gloo)",
                distributed.model_sum.name()
            ]));
        }
        serde_json::Value::Array(settings)
    }

    /// Whether this process writes the run's files and runs its test agent: a run on
    /// one machine, or rank 0 of several.
    pub fn leads(&self) -> bool {
        self.distributed.as_ref().is_none_or(DistributedConfig::leads)
    }

    /// Claims the save folder: checks that the run fits in memory as `plan` lays it
    /// out, locks the folder, refuses to replace a model the run did not start from,
    /// and removes what an interrupted run left. The lock is held as long as the
    /// returned value lives. A rank other than 0 writes nothing and claims nothing.
    pub fn claim_save_dir(&self, plan: MemoryPlan) -> Result<Option<FolderLock>> {
        check_memory(&self.spec, plan, self.workers)?;
        if !self.leads() {
            return Ok(None);
        }
        let dir = &self.run.save_model_dir;
        // The folder is held before anything in it is read or written.
        let lock = checkpoint::lock_folder(dir, &self.env.id)?;
        if !self.may_replace {
            refuse_to_replace(dir, &self.env.id)?;
        }
        let removed = checkpoint::remove_stale_temporaries(dir);
        if removed > 0 {
            console::warn(&format!(
                "note: removed {removed} temporary files that an interrupted run left in {}",
                dir.display()
            ));
        }
        Ok(Some(lock))
    }
}

/// `a3g eval`'s settings, checked.
pub struct EvalConfig {
    pub env: EnvConfig,
    pub device: Device,
    pub load_model_dir: PathBuf,
    pub num_episodes: u32,
    /// The evaluator's game log, `<log-dir>/<env>_mon_log`.
    pub log_path: PathBuf,
    /// Where recordings go, with `--render`.
    pub record_dir: Option<PathBuf>,
    /// Record every this many games.
    pub render_freq: u32,
    /// Print only a JSON summary on stdout.
    pub json: bool,
    /// The flags as given, for the game log's header.
    pub arguments: serde_json::Value,
}

impl EvalConfig {
    /// Checks the flags; the environment is made, screen and all, once the checkpoint
    /// says which network it holds.
    pub fn new(args: &EvalArgs) -> Result<Self> {
        let device = device::select(args.gpu_id)?;
        let env = EnvConfig::new(&args.environment, args.seed, Screen::Gray80)?;
        let stem = env.id.replace('/', "_");
        let record_dir = args.render.then(|| {
            args.record_dir.clone().unwrap_or_else(|| args.log_dir.join(format!("{stem}_games")))
        });
        Ok(EvalConfig {
            device,
            load_model_dir: args.load_model_dir.clone(),
            num_episodes: args.num_episodes,
            log_path: args.log_dir.join(format!("{stem}_mon_log")),
            record_dir,
            render_freq: args.render_freq,
            json: args.json,
            arguments: serde_json::to_value(args).unwrap_or_default(),
            env,
        })
    }

    /// The environments a checkpoint's model was trained on: Atari screens prepared
    /// as its network wants, and the crop rows its sidecar records, unless
    /// --env-config names others.
    pub fn as_trained(self, screen: Screen, trained: Option<&TrainedWith>) -> Self {
        EvalConfig { env: self.env.as_trained(screen, trained), ..self }
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

/// The hidden size and LSTM of the model a resumed run trains: the checkpoint's (a
/// flag that contradicts them, or its Gaussian floor or input scaling, is refused).
fn resumed_dimensions(args: &TrainArgs, sidecar: &Sidecar) -> Result<(i64, bool)> {
    let trained = &sidecar.model;
    if let Some(asked) = args.hidden_size.filter(|asked| *asked != trained.hidden_size) {
        return Err(contradiction(
            sidecar,
            format!("--hidden-size {asked}"),
            format!("a hidden size of {}", trained.hidden_size),
            "--hidden-size",
        ));
    }
    let (lstm, scaled) = match &trained.body {
        Body::Mlp { lstm, input_norm, .. } => (*lstm, input_norm.is_some()),
        Body::AtariLstm | Body::Universe => (true, false),
    };
    if args.lstm && !lstm {
        return Err(contradiction(sidecar, "--lstm".into(), "no LSTM cell".into(), "--lstm"));
    }
    if let (Some(asked), Head::Gaussian { min_std, .. }) = (args.min_std, &trained.head) {
        if asked != *min_std {
            return Err(contradiction(
                sidecar,
                format!("--min-std {asked}"),
                format!("a floor of {min_std}"),
                "--min-std",
            ));
        }
    }
    if args.normalize_obs && !scaled {
        return Err(contradiction(
            sidecar,
            "--normalize-obs".into(),
            "unscaled inputs".into(),
            "--normalize-obs",
        ));
    }
    Ok((trained.hidden_size, lstm))
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
/// of its env (called unless --overwrite says so).
fn refuse_to_replace(dir: &Path, env: &str) -> Result<()> {
    let files = checkpoint::CheckpointFiles::new(dir, env);
    let previous = checkpoint::CheckpointFiles::previous(dir, env);
    if files.any_exists() || previous.any_exists() {
        return Err(Error::ExistingCheckpoint { path: files.model, env: env.to_string() });
    }
    Ok(())
}

fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
