//! A named, cooperative stop: the step or time budget, Ctrl-C / SIGTERM, a target
//! score or a failed worker all end a run the same way, by workers polling between
//! rollouts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Set by the signal handler; polled by [`Stop::requested`].
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_signal: i32) {
    // Only an atomic store: the one thing a signal handler may safely do here.
    SIGNALLED.store(true, Ordering::SeqCst);
}

extern "C" {
    fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
}

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

/// Routes Ctrl-C and SIGTERM to a stop request instead of killing the process, so a
/// run interrupted by the user still writes its final checkpoint.
pub fn catch_signals() {
    // SAFETY: `on_signal` is async-signal-safe (one atomic store) and lives forever.
    unsafe {
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
    }
}

/// Why a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum StopReason {
    /// --max-steps reached.
    StepBudget,
    /// --max-time reached.
    TimeBudget,
    /// --stop-at-mean reached.
    TargetScore,
    /// Ctrl-C or SIGTERM.
    Signal,
    /// A worker or the test agent failed; the message says which and why.
    Failure(String),
}

/// The stop flag every thread holds a clone of. Workers and the test agent read it
/// between rollouts and games; the monitor loop and failing threads set it.
#[derive(Clone, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    reason: Arc<Mutex<Option<StopReason>>>,
}

impl Stop {
    /// Asks every thread to stop; the first reason given is kept.
    pub fn request(&self, reason: StopReason) {
        let mut kept = self.reason.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if kept.is_none() {
            *kept = Some(reason);
        }
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for (a caught signal counts).
    pub fn requested(&self) -> bool {
        if SIGNALLED.load(Ordering::SeqCst) {
            self.request(StopReason::Signal);
        }
        self.flag.load(Ordering::SeqCst)
    }

    /// The first reason given, if any.
    pub fn reason(&self) -> Option<StopReason> {
        self.reason.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first reason wins and every clone sees the stop.
    #[test]
    fn first_reason_is_kept() {
        let stop = Stop::default();
        let clone = stop.clone();
        assert!(!clone.requested());
        stop.request(StopReason::StepBudget);
        stop.request(StopReason::TimeBudget);
        assert!(clone.requested());
        assert_eq!(clone.reason(), Some(StopReason::StepBudget));
    }
}
