//! A3C's own settings, made from its flags, and what a checkpoint records of them.

use serde::{Deserialize, Serialize};

use crate::cli::TrainArgs;
use crate::error::{Error, Result};
use crate::ga3c::settings::{Ga3cArgs, PrecisionName};

/// A3C's own settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct A3cConfig {
    /// Rollout lengths handed to workers round-robin (`--num-steps`, or
    /// `--distributed-step-size`'s list).
    pub(crate) rollout_lengths: Vec<u32>,
}

impl A3cConfig {
    /// Workers per core when --workers is left out: a training thread each, busy.
    pub const WORKERS_PER_CORE: usize = 1;

    /// A3C's settings from the flags: the rollout lengths, and a refusal of the
    /// batched trainer's flags where given: `--precision bf16` with why (A3C's passes
    /// of one observation it would only slow), the others as doing nothing here.
    pub fn from_flags(args: &TrainArgs) -> Result<Self> {
        if args.ga3c.precision == PrecisionName::Bf16 {
            return Err(Error::BadArguments(
                "--precision bf16 runs the batched passes of --trainer ga3c; A3C's workers step one \
                 observation at a time, where bf16 is slower than fp32: leave it out, or add --trainer ga3c"
                    .into(),
            ));
        }
        let batched_flags = args.given.among::<Ga3cArgs>();
        if !batched_flags.is_empty() {
            return Err(Error::idle_flags(
                &batched_flags,
                "for the batched trainer, and this run's trainer is a3c",
                Some("add --trainer ga3c"),
            ));
        }
        let rollout_lengths = if args.distributed_step_size.is_empty() {
            vec![args.num_steps]
        } else {
            args.distributed_step_size.clone()
        };
        Ok(A3cConfig { rollout_lengths })
    }

    /// Agent steps per rollout of worker `rank`.
    pub fn num_steps(&self, rank: usize) -> u32 {
        self.rollout_lengths[rank % self.rollout_lengths.len()]
    }
}
