//! What the flags of `a3g train` and `a3g eval` come to once checked: owned, typed
//! settings made here, once, before any thread starts. Training's are made in three
//! steps: [`TrainPlan::new`] checks the flags without reading a file or making an
//! environment; [`TrainPlan::open_model`] opens the model through
//! [`checkpoint::open_model`] (the one step that reads and plays); and
//! [`TrainPlan::into_config`] completes what follows the network. Nothing past this
//! module reads the flags: the environments (one `make(rank)` for workers, agents, the
//! test agent and eval, seeds derived there), the model, the optimizer and the loss,
//! each trainer's own settings, and what the monitor watches for.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use tch::Device;

use crate::a3c::settings::A3cConfig;
pub use crate::checkpoint::record::{OutsideEnv, TrainedWith, TrainerConfig};
use crate::checkpoint::{
    self, Checkpoint, FolderLock, ModelEnvironments, ModelSource, OpenedModel, Sidecar,
};
use crate::cli::{
    EnvArgs, EvalArgs, GivenFlags, ModelName, OptimizerName, PrecisionName, ResumeMode, TrainArgs,
    TrainerName,
};
use crate::console;
use crate::device;
use crate::distributed::{c10d, Launch, ModelSum, SyncInterval, SyncMerge};
use crate::env::{self, atari::AtariId, Crop, CropTable, Env, EnvOptions, Screen};
use crate::error::{Error, Result};
use crate::ga3c::settings::{ga3c_agents_per_core, Ga3cConfig};
use crate::model::{Body, ModelRequest, ModelSpec, MIN_STD_RANGE};
use crate::rollout::{LossConfig, RewardShaping};
use crate::shared_optim::{Anneal, LearningRate, OptimizerKind};

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
    /// `--env-config`: the crop file, read by [`EnvConfig::read_crop_file`]; if none,
    /// the crop rows a checkpoint records for its game are played.
    crop_file: Option<PathBuf>,
}

impl EnvConfig {
    /// The environments the flags describe, with the built-in crop rows until
    /// [`EnvConfig::read_crop_file`] reads `--env-config`'s.
    fn new(args: &EnvArgs, given: &GivenFlags, base_seed: u64, screen: Screen) -> Result<Self> {
        let env = EnvConfig {
            id: args.env.clone(),
            options: args.options(given, &CropTable::built_in(), base_seed, screen)?,
            base_seed,
            max_episode_length: args.max_episode_length,
            crop_file: args.env_config.clone(),
        };
        env.check_crop_file_is_read(screen)?;
        Ok(env)
    }

    /// Refuses `--env-config` where the game is played on `screen` of the universe
    /// networks, whose crop is the same for every game, so the file would do nothing.
    fn check_crop_file_is_read(&self, screen: Screen) -> Result<()> {
        if self.crop_file.is_some()
            && screen != Screen::Gray80
            && env::built_in_atari(&self.id).is_some()
        {
            return Err(Error::idle_flags(
                &["--env-config".to_string()],
                &format!(
                    "for the crop rows of the a3clstm network's screens, and this model's network, {}, \
                     keeps rows 34..194 of every game",
                    Body::reading(screen).network_name()
                ),
                None,
            ));
        }
        Ok(())
    }

    /// Reads the crop file `--env-config` names, if any.
    pub fn read_crop_file(&mut self) -> Result<()> {
        if let Some(path) = &self.crop_file {
            self.options.crops = CropTable::load(path)?;
        }
        Ok(())
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
    fn as_trained(&self, screen: Screen, trained: Option<&TrainedWith>) -> Result<Self> {
        let mut env =
            EnvConfig { options: EnvOptions { screen, ..self.options.clone() }, ..self.clone() };
        self.check_crop_file_is_read(screen)?;
        if let Some(recorded) = trained.and_then(|trained| trained.outside_env.as_ref()) {
            let python = &mut env.options.python;
            let asked = OutsideEnv {
                kwargs: python.kwargs.clone(),
                imports: python.imports.clone(),
                wrappers: python.wrappers.clone(),
            };
            if asked == OutsideEnv::default() {
                python.kwargs = recorded.kwargs.clone();
                python.imports = recorded.imports.clone();
                python.wrappers = recorded.wrappers.clone();
            } else if asked != *recorded {
                return Err(Error::BadArguments(format!(
                    "{} is not how the model's {} was made ({}); leave these flags out to make it as it was",
                    asked.as_flags(),
                    self.id,
                    recorded.as_flags(),
                )));
            }
        }
        let recorded = trained.and_then(|trained| trained.crop);
        if let (Some(recorded), None) = (recorded, &self.crop_file) {
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
        Ok(env)
    }

    /// How an environment from outside a3g is made beside its id, for the sidecar;
    /// `None` for a built-in one.
    fn outside_env(&self) -> Option<OutsideEnv> {
        crate::env::gym::Target::parse(&self.id).map(|_| OutsideEnv {
            kwargs: self.options.python.kwargs.clone(),
            imports: self.options.python.imports.clone(),
            wrappers: self.options.python.wrappers.clone(),
        })
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
    pub sync_interval: SyncInterval,
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
    pub lr: LearningRate,
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

/// The first pass over `a3g train`'s flags: what they say, checked, with no file read
/// and no environment made. [`TrainPlan::open_model`] then opens the model (the one
/// step that reads and plays), and [`TrainPlan::into_config`] completes the settings
/// from it: what follows the network (GA3C's defaults, the workers per core, the test
/// agent's share) is known only then.
pub struct TrainPlan<'a> {
    args: &'a TrainArgs,
    /// The environments, on the screen the flags imply until the model says otherwise.
    pub env: EnvConfig,
    /// The model the flags ask for.
    pub model: ModelRequest,
    devices: Vec<Device>,
    cores: usize,
    launch: Option<Launch>,
}

impl<'a> TrainPlan<'a> {
    /// Checks the flags that need nothing but themselves (and the launcher's
    /// variables, and the GPUs' count).
    pub fn new(args: &'a TrainArgs) -> Result<Self> {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        if args.workers == Some(0) {
            return Err(Error::BadArguments(
                "--workers must be at least 1; leave it out for one per core".into(),
            ));
        }
        let devices = device::select_list(&args.gpu_ids)?;
        let launched = Launch::from_env(crate::distributed::process_variable)?;
        let sync_flags = args.given.flags(&["sync_interval", "sync_merge", "sync_timeout"]);
        if launched.is_none() && !sync_flags.is_empty() {
            return Err(Error::idle_flags(
                &sync_flags,
                "for training across machines, and this run is no launcher's rank (RANK, WORLD_SIZE and \
                 MASTER_ADDR, or Slurm's or Open MPI's pair and MASTER_ADDR, are not all set)",
                Some("start it with one (docs/distributed.md)"),
            ));
        }
        let launch = launched.filter(|launch| launch.world_size > 1);
        if let Some(launch) = &launch {
            let interval =
                SyncInterval::new(args.sync_interval, launch.world_size).shortest().as_secs_f64();
            // A rank that stops enters the next sync up to an interval before the
            // others, and must not give up on them meanwhile.
            if interval * 2.0 > args.sync_timeout {
                let whose = match args.sync_interval {
                    Some(_) => String::new(),
                    None => format!(" (the default at {} ranks)", launch.world_size),
                };
                return Err(Error::BadArguments(format!(
                    "--sync-interval {interval}{whose} is more than half of --sync-timeout {}; a stopping rank \
                     would give up on the others before they sync: lower the interval or raise the timeout",
                    args.sync_timeout
                )));
            }
        }
        let rollout_flag = args.given.flags(&["num_steps"]);
        let rollouts_per_worker =
            args.trainer == TrainerName::A3c && !args.distributed_step_size.is_empty();
        if rollouts_per_worker && !rollout_flag.is_empty() {
            return Err(Error::idle_flags(
                &rollout_flag,
                "every worker's rollout length, and --distributed-step-size gives each worker its own",
                None,
            ));
        }
        let profile_flag = args.given.flags(&["profile_phases"]);
        if devices.iter().all(|device| *device == Device::Cpu) && !profile_flag.is_empty() {
            return Err(Error::idle_flags(
                &profile_flag,
                "for a GPU, whose kernels run ahead of the phase they were queued in, and this run has none \
                 (--gpu-ids -1)",
                Some("add --gpu-ids"),
            ));
        }
        let confirm_flag = args.given.flags(&["confirm_games"]);
        if args.stop_at_mean.is_none() && !confirm_flag.is_empty() {
            return Err(Error::idle_flags(
                &confirm_flag,
                "how many games confirm the weights --stop-at-mean saves, and this run has no --stop-at-mean",
                Some("add --stop-at-mean"),
            ));
        }
        if args.amsgrad && args.optimizer == OptimizerName::RmsProp {
            return Err(Error::idle_flags(
                &["--amsgrad".to_string()],
                "Adam's, and this run's --optimizer is RMSprop",
                Some("use --optimizer Adam"),
            ));
        }
        if args.lr_anneal && args.max_steps.is_none() && args.max_time.is_none() {
            return Err(Error::BadArguments(
                "--lr-anneal needs a budget to fall to 0 over; add --max-steps (agent steps) or --max-time".into(),
            ));
        }
        if let Some(min_std) = args.min_std {
            if !MIN_STD_RANGE.contains(&min_std) {
                let (low, high) = MIN_STD_RANGE.into_inner();
                return Err(Error::BadArguments(format!(
                    "--min-std {min_std} is outside [{low}, {high}]; a3c_continuous's floor is 0.24"
                )));
            }
        }
        let network = args.model.unwrap_or(ModelName::A3cLstm);
        let model = ModelRequest {
            network: args.model.map(ModelName::body),
            hidden_size: args.hidden_size,
            default_hidden_size: network.default_hidden_size(),
            lstm: args.lstm,
            min_std: args.min_std,
            normalize_obs: args.normalize_obs,
        };
        // Every network --model names is an Atari one, with screens of its own.
        let screen = network.body().screen().unwrap_or_default();
        let env = EnvConfig::new(&args.environment, &args.given, args.seed, screen)?;
        Ok(TrainPlan { args, env, model, devices, cores, launch })
    }

    fn leads(&self) -> bool {
        self.launch.as_ref().is_none_or(|launch| launch.rank == 0)
    }

    /// The rank of the environment the model is opened with, before the number of
    /// workers (which may follow the network) is known.
    fn provisional_rank(&self) -> usize {
        self.args.workers.unwrap_or(self.cores)
    }

    /// Holds the save folder before its checkpoint is read, where this run resumes
    /// the one there (`--resume auto`, or `--load` from the same folder): a run saving
    /// into it meanwhile could be read halfway through a set. `None` elsewhere, where
    /// [`TrainConfig::claim_save_dir`] takes the folder once the run is known to start.
    pub fn hold_resumed_folder(&self) -> Result<Option<FolderLock>> {
        let (args, dir) = (self.args, &self.args.save_model_dir);
        let resumes_there = args.resume == Some(ResumeMode::Auto)
            || (args.load && same_folder(&args.load_model_dir, dir));
        if !(self.leads() && resumes_there && dir.is_dir()) {
            return Ok(None);
        }
        checkpoint::lock_folder(dir, &self.env.id).map(Some)
    }

    /// Opens the model this run trains: a fresh one, the checkpoint `--load` resumes
    /// (rank 0 reads it and gives its weights to the other ranks, which may not see
    /// its disk), or, on a rank other than 0 of a resumed run, the one
    /// `rank_zero_record` (rank 0's sidecar) describes. Reads `--env-config`'s file.
    pub fn open_model(&mut self, rank_zero_record: Option<&Sidecar>) -> Result<OpenedModel> {
        self.env.read_crop_file()?;
        let leads = self.leads();
        let save_dir = &self.args.save_model_dir;
        let own_checkpoint = self.args.resume == Some(ResumeMode::Auto)
            && leads
            && (checkpoint::CheckpointFiles::new(save_dir, &self.env.id).any_exists()
                || checkpoint::CheckpointFiles::previous(save_dir, &self.env.id).any_exists());
        let source = match rank_zero_record {
            _ if self.args.load && leads => ModelSource::Resume(&self.args.load_model_dir),
            _ if own_checkpoint => ModelSource::Resume(save_dir),
            Some(record) => ModelSource::RankZero(record),
            None => ModelSource::Fresh,
        };
        let rank = self.provisional_rank();
        checkpoint::open_model(source, &self.model, &mut EnvsOfRank { env: &mut self.env, rank })
    }

    /// The run's settings, complete, for the model opened, and the test agent's
    /// environment (the one the model was opened with, remade when the test agent's
    /// rank is not the one it was made for).
    pub fn into_config(self, model: OpenedModel) -> Result<(TrainConfig, Box<dyn Env>)> {
        let (provisional_rank, leads) = (self.provisional_rank(), self.leads());
        let TrainPlan { args, mut env, devices, cores, launch, .. } = self;
        let OpenedModel {
            spec,
            env: mut test_env,
            resume,
            lacks_input_norm,
            trained_optimizer,
            ..
        } = model;
        let asked_optimizer = match args.optimizer {
            OptimizerName::Adam => OptimizerKind::Adam { amsgrad: args.amsgrad },
            OptimizerName::RmsProp => OptimizerKind::RmsProp,
        };
        // A resumed model goes on with its optimizer, statistics and all, unless the
        // flags ask for another, as with the network's sizes.
        let optimizer_given = args.given.contains("optimizer") || args.given.contains("amsgrad");
        let optimizer = match trained_optimizer {
            Some(trained) if !optimizer_given => trained,
            _ => asked_optimizer,
        };
        // With --resume auto, rank 0 resumes when the save folder held a checkpoint.
        let resumed_own = args.resume.is_some() && resume.is_some();
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
            Body::AtariLstm | Body::Universe | Body::Universe84 | Body::UniverseMax => {
                ATARI_TEST_SHARE
            }
            Body::Mlp { .. } => 1.0,
        });
        let mut notes: Vec<String> =
            Launch::ignored(crate::distributed::process_variable).into_iter().collect();
        if args.load && !leads {
            notes.push(
                "note: rank 0 reads the checkpoint --load resumes and gives its weights to every rank; \
                 this rank's --load-model-dir is not read"
                    .to_string(),
            );
        }
        if let (true, Some(checkpoint)) = (resumed_own, &resume) {
            notes.push(format!(
                "note: resuming {} after {} agent steps (--resume auto)",
                checkpoint.files.model.display(),
                checkpoint.sidecar.counters.agent_steps
            ));
        }
        if spec.body == Body::AtariLstm
            && args.model.is_none()
            && !args.load
            && args.resume.is_none()
            && devices.iter().all(|device| *device == Device::Cpu)
        {
            notes.push(
                "note: on CPU cores the default network (the reference's a3clstm) is slow: two cores trained \
                 Pong with it at 236 agent steps/s, and with --model universe at 1,313 (A3C) to 2,274 (--trainer \
                 ga3c), whose first 18+ game came 7.7-13.8 minutes in (docs/benchmarks.md); pass --model to choose"
                    .to_string(),
            );
        }
        notes.extend(a3c_on_gpu_note(args.trainer, &devices));
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
        let resuming_here =
            resumed_own || (args.load && same_folder(&args.load_model_dir, &args.save_model_dir));
        let run = RunConfig {
            resumed: (args.load && leads) || resumed_own,
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
        let lr = LearningRate {
            initial: args.lr,
            anneal: match (args.lr_anneal, args.max_steps, run.max_time) {
                (false, _, _) => None,
                (true, Some(_), _) => Some(Anneal::Steps(run.step_budget)),
                (true, None, max_time) => max_time.map(Anneal::Time),
            },
        };
        if matches!(lr.anneal, Some(Anneal::Time(_))) && (args.load || resumed_own) {
            notes.push(
                "note: --lr-anneal over --max-time starts again from --lr on this run's clock; give --max-steps \
                 to anneal over agent steps, which a resumed run goes on from"
                    .to_string(),
            );
        }
        let config = TrainConfig {
            workers,
            devices,
            cores,
            seed: args.seed.wrapping_add(launch.as_ref().map_or(0, |launch| launch.rank as u64)),
            spec,
            observation_shape: test_env.observation_shape().to_vec(),
            optimizer,
            lr,
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
            measure_input_norm: lacks_input_norm,
            notes,
            distributed: launch.map(|launch| DistributedConfig {
                sync_interval: SyncInterval::new(args.sync_interval, launch.world_size),
                launch,
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
}

/// The environments of one rank as [`checkpoint::open_model`] makes and adapts them.
struct EnvsOfRank<'a> {
    env: &'a mut EnvConfig,
    rank: usize,
}

impl ModelEnvironments for EnvsOfRank<'_> {
    fn make(&mut self) -> Result<Box<dyn Env>> {
        self.env.make(self.rank)
    }

    fn id(&self) -> &str {
        &self.env.id
    }

    fn made_as_recorded(&self) -> bool {
        self.env.outside_env().is_some()
    }

    fn adopt(&mut self, screen: Screen, trained: Option<&TrainedWith>) -> Result<bool> {
        let adopted = self.env.as_trained(screen, trained)?;
        let differs = adopted.options.screen != self.env.options.screen
            || adopted.options.crops != self.env.options.crops;
        let differs = differs || adopted.options.python != self.env.options.python;
        *self.env = adopted;
        Ok(differs)
    }
}

impl TrainConfig {
    /// What a checkpoint of this run records of its settings.
    pub fn trained_with(&self) -> TrainedWith {
        TrainedWith {
            trainer: self.trainer.clone(),
            workers: self.workers,
            seed: self.seed,
            max_episode_length: self.env.max_episode_length,
            skip_rate: self.env.options.skip_rate,
            crop: self.env.crop(),
            lr: self.lr.initial,
            lr_anneal_steps: match self.lr.anneal {
                Some(Anneal::Steps(steps)) => Some(steps),
                _ => None,
            },
            lr_anneal_seconds: match self.lr.anneal {
                Some(Anneal::Time(time)) => Some(time.as_secs_f64()),
                _ => None,
            },
            shared_optimizer: self.shared_optimizer,
            loss: self.loss,
            rewards: self.rewards,
            outside_env: self.env.outside_env(),
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
        let network = spec.body.network_name();
        let (lstm, scaling) = match &spec.body {
            Body::Mlp { lstm, input_norm, .. } => (*lstm, input_norm.as_ref()),
            Body::AtariLstm | Body::Universe | Body::Universe84 | Body::UniverseMax => (true, None),
        };
        let mut settings = vec![
            json!(["a3g's version", env!("CARGO_PKG_VERSION")]),
            // Builds of one version may still gather different values at a sync.
            json!(["the values a sync gathers", crate::distributed::rank::SYNC_GATHER]),
            json!(["--env", self.env.id]),
            json!(["--env-kwargs, --env-import and --env-wrapper", self.env.outside_env()]),
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
            json!(["--lr", self.lr.initial]),
            json!([
                "--lr-anneal (over --max-steps, or over --max-time without it)",
                match self.lr.anneal {
                    None => json!(null),
                    Some(Anneal::Steps(steps)) => json!({ "agent steps": steps }),
                    Some(Anneal::Time(time)) => json!({ "seconds": time.as_secs_f64() }),
                }
            ]),
            json!(["--shared-optimizer", self.shared_optimizer]),
            json!(["--gamma", self.loss.gamma]),
            json!(["--tau", self.loss.tau]),
            json!(["--entropy-coef", self.loss.entropy_coef]),
            json!(["--value-coef", self.loss.value_coef]),
            json!(["--reward-scale", self.rewards.scale]),
            json!(["--reward-clip", self.rewards.clip]),
            // So that a resumed model's counters spend every rank's budget or none.
            json!(["--max-steps", self.run.step_budget]),
            json!(["--max-episode-length", self.env.max_episode_length]),
            json!(["--skip-rate", self.env.options.skip_rate]),
            json!(["the crop rows (--env-config)", self.env.crop()]),
        ];
        if let Some(distributed) = &self.distributed {
            settings.push(json!(["--sync-interval", distributed.sync_interval.setting()]));
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
    /// `resumed_from` is the model `--load` resumes, once taken from the config;
    /// `held`, the folder's lock when [`TrainPlan::hold_resumed_folder`] took it.
    pub fn claim_save_dir(
        &self,
        plan: MemoryPlan,
        resumed_from: Option<&Path>,
        held: Option<FolderLock>,
    ) -> Result<Option<FolderLock>> {
        check_memory(&self.spec, plan, self.workers)?;
        if !self.leads() {
            return Ok(None);
        }
        let dir = &self.run.save_model_dir;
        // The folder is held before anything in it is written.
        let lock = match held {
            Some(lock) => lock,
            None => checkpoint::lock_folder(dir, &self.env.id)?,
        };
        if !self.may_replace {
            refuse_to_replace(dir, &self.env.id, resumed_from)?;
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
    /// says which network it holds ([`EvalConfig::open_model`]).
    pub fn new(args: &EvalArgs) -> Result<Self> {
        let recording_flags = args.given.flags(&["render_freq", "record_dir"]);
        if !args.render && !recording_flags.is_empty() {
            return Err(Error::idle_flags(
                &recording_flags,
                "for recording games, and --render is off",
                Some("add --render"),
            ));
        }
        let device = device::select(args.gpu_id)?;
        let mut env = EnvConfig::new(&args.environment, &args.given, args.seed, Screen::Gray80)?;
        env.options.python.render = args.render;
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

    /// Opens the model evaluated (a3g's checkpoint or a PyTorch file in
    /// `--load-model-dir`), with the environment it plays: on its network's screens
    /// and the crop rows its sidecar records, unless --env-config names others.
    pub fn open_model(&mut self) -> Result<OpenedModel> {
        self.env.read_crop_file()?;
        let source = ModelSource::Play(&self.load_model_dir);
        let mut envs = EnvsOfRank { env: &mut self.env, rank: 0 };
        checkpoint::open_model(source, &ModelRequest::default(), &mut envs)
    }
}

/// A3C's workers on a GPU each run batch-of-one passes, whose small kernels queue on
/// it: the first GPU run (docs/gpu.md) measured them slower than CPU cores.
fn a3c_on_gpu_note(trainer: TrainerName, devices: &[Device]) -> Option<String> {
    (trainer == TrainerName::A3c && devices.iter().any(|device| device.is_cuda())).then(|| {
        "note: A3C's workers on a GPU each run batch-of-one passes that queue on it: on an H200, 32 of \
         them stepped Pong's reference network at 434 agent steps/s, the 16 CPU cores of a machine of the \
         same kind at 1,343, and --trainer ga3c on the GPU at 7,007 (docs/gpu.md)"
            .to_string()
    })
}

/// Refuses a run that would replace a model it did not start from: a fresh run, or
/// one resumed from another folder, aimed at a folder that already holds a checkpoint
/// of its env (called unless --overwrite says so).
fn refuse_to_replace(dir: &Path, env: &str, resumed_from: Option<&Path>) -> Result<()> {
    let files = checkpoint::CheckpointFiles::new(dir, env);
    let previous = checkpoint::CheckpointFiles::previous(dir, env);
    if files.any_exists() || previous.any_exists() {
        return Err(Error::ExistingCheckpoint {
            path: files.model,
            env: env.to_string(),
            resumed_from: resumed_from.map(Path::to_path_buf),
        });
    }
    Ok(())
}

fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only A3C with a GPU among its devices is told that GA3C suits a GPU better.
    #[test]
    fn a3c_on_a_gpu_is_pointed_to_ga3c() {
        let note = a3c_on_gpu_note(TrainerName::A3c, &[Device::Cuda(0)]).expect("a note");
        assert!(note.contains("--trainer ga3c"), "{note}");
        assert_eq!(a3c_on_gpu_note(TrainerName::A3c, &[Device::Cpu]), None);
        assert_eq!(a3c_on_gpu_note(TrainerName::Ga3c, &[Device::Cuda(0), Device::Cuda(1)]), None);
    }
}
