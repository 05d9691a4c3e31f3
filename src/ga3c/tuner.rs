//! --autotune: GA3C's dynamic adjustment of its thread counts, done as a hill climb
//! that keeps only what measures faster. Each window it measures agent steps/s; it
//! then tries one count one higher or lower (agents, predictors, trainers in turn),
//! measures a window with it, keeps it if the rate rose by more than the noise margin
//! and otherwise goes back at once. It only ever decides: the trainer starts and
//! retires the threads, and training goes on throughout.

use std::time::{Duration, Instant};

/// The thread counts the tuner adjusts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub agents: usize,
    pub predictors: usize,
    pub trainers: usize,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        write!(
            f,
            "{}, {}, {}",
            count(self.agents, "agent"),
            count(self.predictors, "predictor"),
            count(self.trainers, "trainer")
        )
    }
}

/// A change the trainer is to make, and the line that says why.
#[derive(Debug, PartialEq)]
pub struct Change {
    pub counts: Counts,
    pub reason: String,
}

/// The six moves, tried in turn: each count one up, then one down.
const MOVES: [(usize, isize); 6] = [(0, 1), (1, 1), (2, 1), (0, -1), (1, -1), (2, -1)];

/// What the tuner is measuring.
enum Phase {
    /// The current counts, to compare a trial against.
    Baseline,
    /// A trial of `counts`, against `baseline` agent steps/s measured with `previous`.
    Trial { previous: Counts, baseline: f64, step: (usize, isize) },
}

pub struct Tuner {
    /// How long each measurement lasts, after `settle`.
    window: Duration,
    /// Time left to a change to take effect (threads starting, queues refilling)
    /// before its window starts.
    settle: Duration,
    /// Relative gain a trial must show to be kept: below it, the difference is noise.
    margin: f64,
    /// Largest counts it may reach; each count stays at least 1.
    ceiling: Counts,
    counts: Counts,
    phase: Phase,
    next_move: usize,
    /// When the current window started counting, and the agent steps then; `None`
    /// while settling.
    window_start: Option<(Instant, u64)>,
    changed_at: Instant,
}

impl Tuner {
    pub fn new(counts: Counts, ceiling: Counts, window: Duration, now: Instant) -> Self {
        Tuner {
            window,
            settle: window / 4,
            margin: 0.03,
            ceiling,
            counts,
            phase: Phase::Baseline,
            next_move: 0,
            window_start: None,
            changed_at: now,
        }
    }

    /// The counts in force.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Looks at the run's agent steps at `now`; returns the change to make, if any.
    pub fn observe(&mut self, now: Instant, agent_steps: u64) -> Option<Change> {
        let Some((started, steps_then)) = self.window_start else {
            if now.duration_since(self.changed_at) >= self.settle {
                self.window_start = Some((now, agent_steps));
            }
            return None;
        };
        let elapsed = now.duration_since(started);
        if elapsed < self.window {
            return None;
        }
        let rate = agent_steps.saturating_sub(steps_then) as f64 / elapsed.as_secs_f64();
        match self.phase {
            Phase::Baseline => self.try_next(rate, now),
            Phase::Trial { previous, baseline, step } => {
                if rate > baseline * (1.0 + self.margin) {
                    // Kept: the same move again, while it keeps paying.
                    let reason = format!(
                        "autotune: kept {} ({rate:.0} agent steps/s against {baseline:.0})",
                        self.counts
                    );
                    match self.apply(step) {
                        Some(next) => {
                            let current = self.counts;
                            self.start_trial(current, rate, step, next, now);
                            Some(Change {
                                counts: next,
                                reason: format!("{reason}; trying {next}"),
                            })
                        }
                        None => {
                            self.phase = Phase::Baseline;
                            self.restart(now);
                            Some(Change { counts: self.counts, reason })
                        }
                    }
                } else {
                    let reason = format!(
                        "autotune: back to {previous} ({} gave {rate:.0} agent steps/s against {baseline:.0})",
                        self.counts
                    );
                    self.counts = previous;
                    self.phase = Phase::Baseline;
                    self.restart(now);
                    Some(Change { counts: previous, reason })
                }
            }
        }
    }

    /// Starts a trial of the next move that stays within bounds, from a baseline of
    /// `rate`.
    fn try_next(&mut self, rate: f64, now: Instant) -> Option<Change> {
        for _ in 0..MOVES.len() {
            let step = MOVES[self.next_move];
            self.next_move = (self.next_move + 1) % MOVES.len();
            if let Some(next) = self.apply(step) {
                let current = self.counts;
                self.start_trial(current, rate, step, next, now);
                return Some(Change {
                    counts: next,
                    reason: format!(
                        "autotune: {current} give {rate:.0} agent steps/s; trying {next}"
                    ),
                });
            }
        }
        // Every count is pinned at 1 and at its ceiling: nothing to try.
        self.restart(now);
        None
    }

    fn start_trial(
        &mut self,
        previous: Counts,
        baseline: f64,
        step: (usize, isize),
        next: Counts,
        now: Instant,
    ) {
        self.phase = Phase::Trial { previous, baseline, step };
        self.counts = next;
        self.restart(now);
    }

    fn restart(&mut self, now: Instant) {
        self.window_start = None;
        self.changed_at = now;
    }

    /// The counts after `step`, if they stay within 1 and the ceiling.
    fn apply(&self, (which, delta): (usize, isize)) -> Option<Counts> {
        let mut next = self.counts;
        let (count, ceiling) = match which {
            0 => (&mut next.agents, self.ceiling.agents),
            1 => (&mut next.predictors, self.ceiling.predictors),
            _ => (&mut next.trainers, self.ceiling.trainers),
        };
        let moved = count.checked_add_signed(delta)?;
        if !(1..=ceiling).contains(&moved) {
            return None;
        }
        *count = moved;
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulated throughput peaking at 6 agents, 2 predictors, 1 trainer.
    fn throughput(counts: Counts) -> f64 {
        let peak = |count: usize, best: usize, slope: f64| {
            1.0 - slope * (count as f64 - best as f64).abs()
        };
        1000.0
            * peak(counts.agents, 6, 0.08)
            * peak(counts.predictors, 2, 0.15)
            * peak(counts.trainers, 1, 0.2)
    }

    /// Runs the tuner against `throughput` for `seconds`, in steps of 100 ms; returns
    /// its counts and every change it made.
    fn run(start: Counts, seconds: u64) -> (Counts, Vec<Change>) {
        let ceiling = Counts { agents: 32, predictors: 4, trainers: 4 };
        let begin = Instant::now();
        let mut tuner = Tuner::new(start, ceiling, Duration::from_secs(4), begin);
        let (mut steps, mut changes) = (0.0, Vec::new());
        for tick in 1..=seconds * 10 {
            steps += throughput(tuner.counts()) / 10.0;
            let now = begin + Duration::from_millis(100 * tick);
            if let Some(change) = tuner.observe(now, steps as u64) {
                assert_eq!(change.counts, tuner.counts());
                changes.push(change);
            }
        }
        (tuner.counts(), changes)
    }

    /// From 2 agents, 1 predictor, 2 trainers it climbs to the simulated peak and
    /// stays there, only trying moves and going back from them.
    #[test]
    fn climbs_to_the_peak() {
        let start = Counts { agents: 2, predictors: 1, trainers: 2 };
        let peak = Counts { agents: 6, predictors: 2, trainers: 1 };
        let (_, changes) = run(start, 600);
        let kept = changes.iter().filter(|change| change.reason.contains("kept")).count();
        assert!(kept >= 5, "{changes:#?}");
        let reached =
            changes.iter().position(|change| change.reason.contains(&format!("kept {peak}")));
        let reached = reached.expect("the peak was reached");
        // From then on, every trial goes back to the peak.
        for change in &changes[reached + 1..] {
            assert!(change.counts == peak || change.reason.contains("trying"), "{change:?}");
            assert!(!change.reason.contains("kept"), "{change:?}");
        }
    }

    /// A change that measures slower is reverted at the end of its own window, and
    /// the counts never leave [1, ceiling].
    #[test]
    fn a_worse_change_is_reverted_at_once() {
        let peak = Counts { agents: 6, predictors: 2, trainers: 1 };
        let (end, changes) = run(peak, 120);
        assert_eq!(end, peak);
        for pair in changes.windows(2) {
            if pair[0].reason.contains("trying") {
                assert!(pair[1].reason.contains("back to"), "{changes:#?}");
                assert_eq!(pair[1].counts, peak);
            }
        }
        assert!(changes.iter().all(|change| change.counts.trainers >= 1));
    }
}
