//! A named, cooperative stop: the step or time budget, Ctrl-C / SIGTERM, a target
//! score or a failed worker all end a run the same way, by workers polling at every
//! agent step.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::console;

/// Set by the signal thread; polled by [`Stop::requested`].
static SIGNALLED: AtomicBool = AtomicBool::new(false);

/// Routes Ctrl-C and SIGTERM to a stop request instead of killing the process, so a
/// run interrupted by the user still writes its final checkpoint. A second signal
/// quits at once: the user may not want to wait for that checkpoint, and the one on
/// disk is whole whatever moment the process dies at (see `checkpoint`). `stopping`
/// says what the first signal does, `kept` what is left on disk after the second.
pub fn catch_signals(stopping: &'static str, kept: String) {
    let mut signals = match Signals::new([SIGINT, SIGTERM]) {
        Ok(signals) => signals,
        Err(err) => {
            console::warn(&format!(
                "warning: cannot catch Ctrl-C ({err}); stopping with it will skip the final checkpoint"
            ));
            return;
        }
    };
    let watcher = std::thread::Builder::new().name("signals".into()).spawn(move || {
        for (count, _) in signals.forever().enumerate() {
            if count == 0 {
                SIGNALLED.store(true, Ordering::SeqCst);
                console::warn(stopping);
            } else {
                console::warn(&format!("quitting at once; {kept}"));
                // _exit: other threads may be mid-write, and running exit handlers
                // (libtorch's among them) under them could crash instead of exiting.
                signal_hook::low_level::exit(130);
            }
        }
    });
    if let Err(err) = watcher {
        console::warn(&format!("warning: cannot watch for Ctrl-C ({err})"));
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
