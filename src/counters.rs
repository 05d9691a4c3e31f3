//! The live counters of a run, which every training thread adds to and the monitor,
//! the ranks' syncs and the checkpoints read: agent steps, frames, updates, the loss
//! terms and where an update's time goes. A module of its own, below the trainers,
//! the monitor and the ranks, so that each of them can count without depending on
//! another.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tch::Device;

use crate::checkpoint::SavedCounters;
use crate::device;
use crate::error::{Error, Result};
use crate::stop::{Stop, StopReason};

/// Non-finite updates in a row after which training stops: by then the shared model
/// itself has diverged and more updates will not bring it back.
pub const MAX_CONSECUTIVE_SKIPS: u64 = 100;

/// Live progress, summed over all training threads, which add to it; the monitor
/// reads it for status lines, budgets and checkpoints (the checkpoint's own record
/// is [`SavedCounters`]).
#[derive(Default)]
pub struct TrainingCounters {
    pub agent_steps: AtomicU64,
    pub env_frames: AtomicU64,
    pub updates: AtomicU64,
    /// Updates skipped for a non-finite loss or gradient, or one too large to use.
    pub skipped_updates: AtomicU64,
    /// Skipped updates since the last good one, over all threads.
    pub consecutive_skips: AtomicU64,
    /// Loss terms per agent step summed over kept updates, as f64 bits: status lines
    /// show their mean since the previous line.
    pub policy_loss_sum: AtomicU64,
    pub value_loss_sum: AtomicU64,
    pub entropy_sum: AtomicU64,
    /// Time spent in each phase of an update, summed over threads.
    pub phases: PhaseTimes,
    /// --max-steps, spent by whichever thread counts its last step (see
    /// [`TrainingCounters::count_agent_step`]).
    pub step_budget: Option<u64>,
}

impl TrainingCounters {
    /// Counters that continue from a checkpoint's, up to a total of `step_budget`
    /// agent steps if given.
    pub fn resumed(saved: &SavedCounters, step_budget: Option<u64>) -> Self {
        let counters = TrainingCounters { step_budget, ..TrainingCounters::default() };
        counters.agent_steps.store(saved.agent_steps, Ordering::Relaxed);
        counters.env_frames.store(saved.env_frames, Ordering::Relaxed);
        counters.updates.store(saved.updates, Ordering::Relaxed);
        counters
    }

    /// Counts one agent step that took `frames` emulator frames, and asks for the stop
    /// if it spends the step budget. Asked here rather than by the monitor, which
    /// checks budgets between other work: a checkpoint's sync on a slow disk kept it
    /// busy long enough for workers to run hundreds of steps past --max-steps.
    pub fn count_agent_step(&self, frames: u64, stop: &Stop) {
        let steps = self.agent_steps.fetch_add(1, Ordering::Relaxed) + 1;
        self.env_frames.fetch_add(frames, Ordering::Relaxed);
        if self.step_budget.is_some_and(|budget| steps >= budget) {
            stop.request(StopReason::StepBudget);
        }
    }

    /// Records a kept update whose loss terms (summed over `steps` agent steps) were
    /// `terms`: policy loss, value loss, entropy.
    pub fn record_update(&self, terms: [f64; 3], steps: usize) {
        self.updates.fetch_add(1, Ordering::Relaxed);
        self.consecutive_skips.store(0, Ordering::Relaxed);
        for (counter, term) in
            [&self.policy_loss_sum, &self.value_loss_sum, &self.entropy_sum].into_iter().zip(terms)
        {
            add_f64(counter, term / steps as f64);
        }
    }

    /// Records a skipped update; an error once [`MAX_CONSECUTIVE_SKIPS`] came in a row.
    pub fn record_skip(&self) -> Result<()> {
        self.skipped_updates.fetch_add(1, Ordering::Relaxed);
        let in_a_row = self.consecutive_skips.fetch_add(1, Ordering::Relaxed) + 1;
        if in_a_row >= MAX_CONSECUTIVE_SKIPS {
            return Err(Error::Training(format!(
                "{in_a_row} updates in a row had a non-finite or overflowing loss or gradient, so training stopped \
                 (the last good checkpoint is kept); lower --lr, or check the environment's rewards and \
                 observations for NaN or infinite values"
            )));
        }
        Ok(())
    }
}

/// Nanoseconds spent in each phase of an update, summed over all updates (kept or
/// skipped) and threads: where training time goes.
#[derive(Default)]
pub struct PhaseTimes {
    /// Copying the shared weights into the local model.
    pub pull: AtomicU64,
    /// Playing the rollout: forward passes, sampling, environment steps (A3C only:
    /// GA3C's agents play apart from its updates).
    pub rollout: AtomicU64,
    /// The loss and its backward pass (GA3C: with the re-unrolled forward).
    pub backward: AtomicU64,
    /// Bringing the gradients to the shared model's device and checking them.
    pub push: AtomicU64,
    /// The shared optimizer's step.
    pub step: AtomicU64,
}

impl PhaseTimes {
    /// The phases' names and totals in nanoseconds, in the order an update runs them.
    pub fn totals(&self) -> [(&'static str, u64); 5] {
        [
            ("pull", self.pull.load(Ordering::Relaxed)),
            ("rollout", self.rollout.load(Ordering::Relaxed)),
            ("backward", self.backward.load(Ordering::Relaxed)),
            ("push", self.push.load(Ordering::Relaxed)),
            ("step", self.step.load(Ordering::Relaxed)),
        ]
    }
}

/// Times an update's phases one after another into [`PhaseTimes`], out of the way of
/// the lines that do the work. Each phase runs from the end of the one before, so work
/// between two phases is charged to the second. With --profile-phases (`wait_for` is
/// the trainer's device) a phase ends by waiting for the device's queued work, so that
/// it is charged with its own kernels rather than with whichever later phase happens to
/// wait for them; without it a GPU is not kept idle for the sake of the figures.
pub struct PhaseClock {
    since: Instant,
    wait_for: Option<Device>,
}

impl PhaseClock {
    /// A clock whose first phase starts now.
    pub fn start(wait_for: Option<Device>) -> Self {
        PhaseClock { since: Instant::now(), wait_for }
    }

    /// Runs `work` as the next phase and charges its time to `counter`.
    pub fn phase<T>(&mut self, counter: &AtomicU64, work: impl FnOnce() -> T) -> T {
        let output = work();
        self.end_phase(counter);
        output
    }

    /// Runs `work` as the next phase, which gives `None` if it was abandoned (a rollout
    /// cut short by a stop), and charges its time to `counter` unless it was: abandoned
    /// work is no update's phase.
    pub fn phase_unless_abandoned<T>(
        &mut self,
        counter: &AtomicU64,
        work: impl FnOnce() -> Option<T>,
    ) -> Option<T> {
        let output = work();
        if output.is_some() {
            self.end_phase(counter);
        }
        output
    }

    fn end_phase(&mut self, counter: &AtomicU64) {
        if let Some(device) = self.wait_for {
            device::synchronize(device);
        }
        let now = Instant::now();
        counter.fetch_add((now - self.since).as_nanos() as u64, Ordering::Relaxed);
        self.since = now;
    }
}

/// Adds `value` to the f64 whose bits `counter` holds.
fn add_f64(counter: &AtomicU64, value: f64) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
        Some((f64::from_bits(bits) + value).to_bits())
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A hundred skipped updates in a row end training; a kept one in between
    /// starts the count again.
    #[test]
    fn skips_in_a_row_end_training() {
        let counters = TrainingCounters::default();
        for _ in 0..MAX_CONSECUTIVE_SKIPS - 1 {
            counters.record_skip().unwrap();
        }
        counters.record_update([0.0; 3], 1);
        for _ in 0..MAX_CONSECUTIVE_SKIPS - 1 {
            counters.record_skip().unwrap();
        }
        assert!(counters.record_skip().is_err());
        assert_eq!(counters.skipped_updates.load(Ordering::Relaxed), 2 * MAX_CONSECUTIVE_SKIPS - 1);
    }

    /// A phase is charged its time and, with --profile-phases, waits for the device
    /// (one host sync); an abandoned phase is charged nothing and does not wait.
    #[test]
    fn a_phase_is_charged_unless_abandoned() {
        let pause = Duration::from_millis(2);
        let (kept, abandoned) = (AtomicU64::new(0), AtomicU64::new(0));
        let mut clock = PhaseClock::start(Some(Device::Cpu));
        let before = device::host_syncs();
        clock.phase(&kept, || std::thread::sleep(pause));
        assert!(kept.load(Ordering::Relaxed) >= pause.as_nanos() as u64);
        assert_eq!(device::host_syncs() - before, 1);
        let before = device::host_syncs();
        let none = clock.phase_unless_abandoned(&abandoned, || {
            std::thread::sleep(pause);
            None::<()>
        });
        assert!(none.is_none());
        assert_eq!(abandoned.load(Ordering::Relaxed), 0);
        assert_eq!(device::host_syncs() - before, 0);
    }

    /// The step that spends --max-steps asks for the stop, counting from where a
    /// resumed run left off; no step before it does.
    #[test]
    fn the_last_budgeted_step_asks_for_the_stop() {
        let saved = SavedCounters { agent_steps: 7, ..SavedCounters::default() };
        let counters = TrainingCounters::resumed(&saved, Some(10));
        let stop = Stop::default();
        for _ in 0..2 {
            counters.count_agent_step(4, &stop);
        }
        assert!(stop.reason().is_none());
        counters.count_agent_step(4, &stop);
        assert_eq!(stop.reason(), Some(StopReason::StepBudget));
        assert_eq!(counters.env_frames.load(Ordering::Relaxed), 12);
    }
}
