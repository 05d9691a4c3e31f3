//! GA3C's trainer threads: each takes --train-batch segments from the agents, drops
//! those whose acting weights trail the shared model by more than --max-policy-lag
//! updates, re-unrolls the rest as one [T, B] batch with the shared weights and
//! applies one update, with the same loss as A3C.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam::channel::{Receiver, RecvTimeoutError};
use tch::Device;

use super::segment::{batched_loss, Segment, SegmentLoss};
use crate::counters::{PhaseClock, TrainingCounters};
use crate::error::Result;
use crate::model::ModelSpec;
use crate::precision::Precision;
use crate::rollout::LossConfig;
use crate::shared::{LocalModel, SharedModel};
use crate::stop::Stop;

/// What the trainers count beyond the shared counters, for GA3C's status line.
#[derive(Default)]
pub struct TrainerCounters {
    /// Segments trained on.
    pub segments: AtomicU64,
    /// Segments dropped for trailing by more than --max-policy-lag.
    pub dropped: AtomicU64,
    /// Summed lag of the trained segments, in updates.
    pub lag_sum: AtomicU64,
}

/// What a trainer thread is made from.
pub struct TrainerSetup {
    pub device: Device,
    pub spec: ModelSpec,
    /// The shape of one observation.
    pub observation_shape: Vec<i64>,
    pub shared: SharedModel,
    pub loss: LossConfig,
    pub train_batch: usize,
    pub max_policy_lag: u64,
    pub counters: Arc<TrainingCounters>,
    pub trainer_counters: Arc<TrainerCounters>,
    pub profile_phases: bool,
    /// The precision of the batch's body pass (--precision).
    pub precision: Precision,
}

/// One trainer thread, until a stop, its retirement or the agents' end.
pub fn run(
    setup: TrainerSetup,
    segments: Receiver<Segment>,
    stop: Stop,
    retire: Arc<AtomicBool>,
) -> Result<()> {
    tch::set_num_threads(1);
    let local = LocalModel::new(&setup.spec, setup.device);
    let profile = setup.profile_phases.then_some(setup.device);
    let phases = &setup.counters.phases;
    let mut batch = Vec::with_capacity(setup.train_batch);
    while gather(&segments, &mut batch, setup.train_batch, &stop, &retire) {
        let updates = setup.counters.updates.load(Ordering::Relaxed);
        batch.retain(|segment: &Segment| {
            let lag = updates.saturating_sub(segment.policy_version);
            if lag > setup.max_policy_lag {
                setup.trainer_counters.dropped.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            setup.trainer_counters.lag_sum.fetch_add(lag, Ordering::Relaxed);
            true
        });
        if batch.is_empty() {
            continue;
        }
        let mut clock = PhaseClock::start(profile);
        clock.phase(&phases.pull, || setup.shared.pull(&local.parameters));
        let SegmentLoss { loss, agent_steps, lstm_tape } = batched_loss(
            &local.model,
            &batch,
            &setup.observation_shape,
            &setup.loss,
            setup.device,
            setup.precision,
        );
        clock.phase(&phases.backward, || {
            local.gradients.zero();
            loss.total.backward();
            lstm_tape.add_weight_gradients(&local.model);
        });
        let checked = clock.phase(&phases.push, || local.gradients.transfer(&loss));
        if checked.finite {
            let run_steps = setup.counters.agent_steps.load(Ordering::Relaxed);
            clock.phase(&phases.step, || {
                setup.shared.step(local.gradients.host_gradients(), run_steps)
            });
            setup.counters.record_update(checked.terms, agent_steps);
            setup.trainer_counters.segments.fetch_add(batch.len() as u64, Ordering::Relaxed);
        } else {
            setup.counters.record_skip()?;
        }
        batch.clear();
    }
    Ok(())
}

/// Fills `batch` with `size` segments; false once the thread is to end.
fn gather(
    segments: &Receiver<Segment>,
    batch: &mut Vec<Segment>,
    size: usize,
    stop: &Stop,
    retire: &AtomicBool,
) -> bool {
    while batch.len() < size {
        if stop.requested() || retire.load(Ordering::Relaxed) {
            return false;
        }
        match segments.recv_timeout(Duration::from_millis(50)) {
            Ok(segment) => batch.push(segment),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return false,
        }
    }
    true
}
