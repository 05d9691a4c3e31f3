//! GA3C's own settings: its flag group, its defaults (which follow the network and
//! the agents, as measured fastest on two cores) and the checked settings made from
//! them, which a checkpoint records.

use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use tch::Device;

use crate::cli::{parse_status_interval, TrainArgs};
use crate::error::{Error, Result};
use crate::model::Body;
use crate::precision::Precision;

/// Flags of the batched trainer (`--trainer ga3c`), refused under A3C when given.
#[derive(Clone, Debug, Args, Serialize, Deserialize)]
pub struct Ga3cArgs {
    /// Predictor threads, each gathering the agents' observations into one forward pass.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64), help_heading = "Batched trainer (--trainer ga3c)")]
    pub predictors: u32,
    /// Trainer threads, each merging segments into one update of the shared model
    /// (default: 2 for the a3clstm network on two or more cores, else 1).
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=64), help_heading = "Batched trainer (--trainer ga3c)")]
    pub trainers: Option<u32>,
    /// Most observations in one forward pass.
    #[arg(long, allow_negative_numbers = true, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096), help_heading = "Batched trainer (--trainer ga3c)")]
    pub predict_batch: u32,
    /// A predictor waits for this many observations before its forward pass... (default
    /// for Atari: a quarter of the agents with the universe networks, half with a3clstm,
    /// at most 16;
    /// 1 for classic control)
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=4096), help_heading = "Batched trainer (--trainer ga3c)")]
    pub predict_min_batch: Option<u32>,
    /// ...or for this many microseconds after the first, whichever comes first
    /// (default: 2000 where the minimum batch is above 1, else 0).
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(u64).range(0..=1_000_000), help_heading = "Batched trainer (--trainer ga3c)")]
    pub predict_timeout_us: Option<u64>,
    /// Segments (of up to --num-steps agent steps) merged into one update (default for
    /// Atari: as --predict-min-batch; 4 for classic control).
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=1024), help_heading = "Batched trainer (--trainer ga3c)")]
    pub train_batch: Option<u32>,
    /// Updates a segment's acting weights may trail the shared model by; older
    /// segments are dropped.
    #[arg(long, allow_negative_numbers = true, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=1_000_000), help_heading = "Batched trainer (--trainer ga3c)")]
    pub max_policy_lag: u64,
    /// Segments that may wait for a trainer (default: as many as the agents, at least
    /// two batches). When the trainers are the bottleneck the queue stays full, so a
    /// segment waits about queue / --train-batch updates: a shorter queue keeps the
    /// policy lag down and drops fewer segments, and makes agents wait instead.
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=65536), help_heading = "Batched trainer (--trainer ga3c)")]
    pub segment_queue: Option<u32>,
    /// Change the counts of agents, predictors and trainers by one at a time while
    /// training, keeping a change only when agent steps/s improve over a window.
    #[arg(long, help_heading = "Batched trainer (--trainer ga3c)")]
    pub autotune: bool,
    /// Seconds --autotune measures each setting for.
    #[arg(long, allow_negative_numbers = true, default_value_t = 20.0, value_parser = parse_status_interval, help_heading = "Batched trainer (--trainer ga3c)")]
    pub autotune_window: f64,
    /// Precision of the batched passes (the trainers', and the predictors' of 8 or
    /// more observations): bf16 runs the network's body in bfloat16 on fp32 weights;
    /// auto takes bf16 where the CPU (avx512_bf16, amx_bf16) or GPU (compute
    /// capability 8.0 on) computes it natively, as `a3g devices` says. Weights,
    /// optimizer statistics and checkpoints stay fp32.
    #[arg(long, value_enum, default_value_t = PrecisionName::Fp32, help_heading = "Batched trainer (--trainer ga3c)")]
    pub precision: PrecisionName,
}

/// `--precision`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrecisionName {
    #[value(name = "fp32")]
    Fp32,
    #[value(name = "bf16")]
    Bf16,
    #[value(name = "auto")]
    Auto,
}

/// GA3C's own settings, checked against each other.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ga3cConfig {
    /// Agent steps per segment.
    pub num_steps: u32,
    pub predictors: usize,
    pub trainers: usize,
    pub predict_min_batch: usize,
    pub predict_batch: usize,
    pub predict_timeout: Duration,
    pub train_batch: usize,
    pub max_policy_lag: u64,
    /// `--segment-queue`; `None`, as many as the agents (at least two batches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_queue: Option<usize>,
    /// `--autotune`'s window, when it is on.
    pub autotune_window: Option<Duration>,
    /// The batched passes' precision, --precision resolved on this machine (absent
    /// from sidecars written before it, which trained in fp32).
    #[serde(default = "fp32")]
    pub precision: Precision,
}

fn fp32() -> Precision {
    Precision::Fp32
}

/// GA3C's batching and threads where the flags leave them out, for `agents` agents of
/// a network with `body`. On two cores (docs/benchmarks.md, "GA3C against A3C" and
/// "GA3C's defaults"), the universe network ran fastest with 32 agents batching 8, the
/// reference's with 16 agents batching 8 and 2 trainers; a batch grows with the agents
/// (16 at most), and classic control keeps single predictions (its learning tests'
/// settings).
struct Ga3cDefaults {
    trainers: usize,
    batch: usize,
}

impl Ga3cDefaults {
    fn new(body: &Body, agents: usize, cores: usize) -> Self {
        match body {
            Body::Universe | Body::Universe84 | Body::UniverseMax => {
                Ga3cDefaults { trainers: 1, batch: (agents / 4).clamp(1, 16) }
            }
            Body::AtariLstm => {
                Ga3cDefaults { trainers: cores.clamp(1, 2), batch: (agents / 2).clamp(1, 16) }
            }
            Body::Mlp { .. } => Ga3cDefaults { trainers: 1, batch: 1 },
        }
    }
}

/// GA3C's default agents per core, by network: the counts measured fastest on two
/// cores (see [`Ga3cDefaults`]); classic control keeps one per core.
pub(crate) fn ga3c_agents_per_core(body: &Body) -> usize {
    match body {
        Body::Universe | Body::Universe84 | Body::UniverseMax => 16,
        Body::AtariLstm => 8,
        Body::Mlp { .. } => 1,
    }
}

impl Ga3cConfig {
    /// How many segments may wait for a trainer, for `agents` agents.
    pub fn segment_queue_for(&self, agents: usize) -> usize {
        self.segment_queue.unwrap_or(agents.max(2 * self.train_batch))
    }

    /// GA3C's settings from its flags, for `agents` agents of a network with `body`
    /// on `cores` cores and `devices`; what the flags leave out follows the network.
    pub fn new(
        args: &TrainArgs,
        body: &Body,
        agents: usize,
        cores: usize,
        devices: &[Device],
    ) -> Result<Self> {
        let Ga3cArgs {
            predictors,
            trainers,
            predict_batch,
            predict_min_batch,
            predict_timeout_us,
            train_batch,
            max_policy_lag,
            segment_queue,
            autotune,
            autotune_window,
            precision,
        } = args.ga3c;
        let window_flag = args.given.flags(&["autotune_window"]);
        if !autotune && !window_flag.is_empty() {
            return Err(Error::idle_flags(
                &window_flag,
                "how long --autotune measures each setting, and --autotune is off",
                Some("add --autotune"),
            ));
        }
        let defaults = Ga3cDefaults::new(body, agents, cores);
        let predict_batch = predict_batch as usize;
        let predict_min_batch = match predict_min_batch {
            Some(asked) => asked as usize,
            None => defaults.batch.min(predict_batch),
        };
        if predict_min_batch > predict_batch {
            return Err(Error::BadArguments(format!(
                "--predict-min-batch {predict_min_batch} is above --predict-batch {predict_batch}; a predictor could \
                 never fill it"
            )));
        }
        if !args.distributed_step_size.is_empty() {
            return Err(Error::BadArguments(
                "--distributed-step-size is A3C's; GA3C's agents all play segments of --num-steps"
                    .into(),
            ));
        }
        let classic_train_batch = 4;
        let train_batch = match (train_batch, body) {
            (Some(asked), _) => asked as usize,
            (None, Body::Mlp { .. }) => classic_train_batch,
            (None, _) => defaults.batch,
        };
        let timeout_flag = args.given.flags(&["predict_timeout_us"]);
        if predict_min_batch == 1 && !timeout_flag.is_empty() {
            let (whose, remedy) = if predict_batch == 1 {
                (" (--predict-batch is 1)", "raise --predict-batch and --predict-min-batch")
            } else if args.given.contains("predict_min_batch") {
                ("", "raise --predict-min-batch")
            } else if let Body::Mlp { .. } = body {
                (" (the default for a network of a few inputs)", "raise --predict-min-batch")
            } else {
                (" (the default for this network and --workers)", "raise --predict-min-batch")
            };
            return Err(Error::idle_flags(
                &timeout_flag,
                &format!(
                    "how long a predictor waits to fill --predict-min-batch, and that is 1{whose}, so it never waits"
                ),
                Some(remedy),
            ));
        }
        let predict_timeout_us =
            predict_timeout_us.unwrap_or(if predict_min_batch > 1 { 2000 } else { 0 });
        Ok(Ga3cConfig {
            num_steps: args.num_steps,
            predictors: predictors as usize,
            trainers: trainers.map_or(defaults.trainers, |asked| asked as usize),
            predict_min_batch,
            predict_batch,
            predict_timeout: Duration::from_micros(predict_timeout_us),
            train_batch,
            max_policy_lag,
            segment_queue: segment_queue.map(|asked| asked as usize),
            autotune_window: autotune.then(|| Duration::from_secs_f64(autotune_window)),
            precision: match precision {
                PrecisionName::Fp32 => Precision::Fp32,
                PrecisionName::Bf16 => Precision::Bf16,
                PrecisionName::Auto => Precision::auto(devices),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};
    use tch::Device;

    fn ga3c(flags: &[&str], body: Body, agents: usize, cores: usize) -> Ga3cConfig {
        let cli = Cli::try_parse_from([&["a3g", "train", "--trainer", "ga3c"], flags].concat())
            .expect("flags parse");
        let Command::Train(args) = cli.command else { panic!("not train") };
        Ga3cConfig::new(&args, &body, agents, cores, &[Device::Cpu]).expect("checked")
    }

    /// GA3C's batching follows the network and the agents where the flags leave it
    /// out: the universe network's 32 agents batch 8 (the row measured fastest on two
    /// cores), the reference network's 16 agents batch 8 on two trainers, classic
    /// control predicts one observation at a time; a flag given wins, and a derived
    /// minimum batch never exceeds --predict-batch.
    #[test]
    fn ga3c_defaults_follow_the_network() {
        let universe = ga3c(&[], Body::Universe, 32, 2);
        assert_eq!(
            (universe.predict_min_batch, universe.train_batch, universe.trainers),
            (8, 8, 1)
        );
        assert_eq!(universe.predict_timeout, Duration::from_micros(2000));
        let reference = ga3c(&[], Body::AtariLstm, 16, 2);
        assert_eq!(
            (reference.predict_min_batch, reference.train_batch, reference.trainers),
            (8, 8, 2)
        );
        let classic = ga3c(&[], Body::Mlp { inputs: 4, lstm: false, input_norm: None }, 8, 2);
        assert_eq!((classic.predict_min_batch, classic.train_batch, classic.trainers), (1, 4, 1));
        assert_eq!(classic.predict_timeout, Duration::ZERO);
        let asked =
            ga3c(&["--train-batch", "2", "--predict-timeout-us", "0"], Body::Universe, 64, 2);
        assert_eq!((asked.predict_min_batch, asked.train_batch), (16, 2));
        assert_eq!(asked.predict_timeout, Duration::ZERO);
        let capped = ga3c(&["--predict-batch", "4"], Body::Universe, 64, 2);
        assert_eq!(capped.predict_min_batch, 4);
        assert_eq!(capped.segment_queue, None);
        assert_eq!(ga3c(&["--segment-queue", "8"], Body::Universe, 32, 2).segment_queue, Some(8));
        assert_eq!(ga3c_agents_per_core(&Body::Universe) * 2, 32);
    }
}
