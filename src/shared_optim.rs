//! Optimizers whose statistics live beside the shared model and are updated by every
//! worker in place: the reference's SharedAdam and SharedRMSprop, same formulas and
//! defaults (Adam betas 0.9/0.999, eps 1e-3, optional AMSGrad; RMSprop alpha 0.99,
//! eps 0.1).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tch::{Device, Kind, Tensor};

/// Which optimizer, with its hyperparameters.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum OptimizerKind {
    Adam { amsgrad: bool },
    RmsProp,
}

/// As the flags name it: `Adam`, `Adam with --amsgrad`, `RMSprop`.
impl std::fmt::Display for OptimizerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptimizerKind::Adam { amsgrad: false } => write!(f, "Adam"),
            OptimizerKind::Adam { amsgrad: true } => write!(f, "Adam with --amsgrad"),
            OptimizerKind::RmsProp => write!(f, "RMSprop"),
        }
    }
}

impl OptimizerKind {
    const ADAM_BETAS: (f64, f64) = (0.9, 0.999);
    const ADAM_EPS: f64 = 1e-3;
    const RMSPROP_ALPHA: f64 = 0.99;
    const RMSPROP_EPS: f64 = 0.1;

    /// Names of the per-parameter statistics, in the order they are stored.
    fn statistic_names(self) -> &'static [&'static str] {
        match self {
            OptimizerKind::Adam { amsgrad: false } => &["exp_avg", "exp_avg_sq"],
            OptimizerKind::Adam { amsgrad: true } => &["exp_avg", "exp_avg_sq", "max_exp_avg_sq"],
            OptimizerKind::RmsProp => &["square_avg"],
        }
    }
}

/// The learning rate: constant, or annealed linearly from its initial value to 0 over
/// a run's budget, as the A3C paper anneals it over agent steps (Mnih et al., 2016).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LearningRate {
    pub initial: f64,
    /// Where the rate reaches 0; `None` keeps it at `initial`.
    pub anneal: Option<Anneal>,
}

/// The budget an annealed rate falls to 0 over.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Anneal {
    /// Agent steps, summed over workers and counted on across resumes (--max-steps).
    Steps(u64),
    /// Training time on this run's clock (--max-time without --max-steps), so the
    /// rate is spent by the end of a run bounded by time however fast its host plays.
    Time(Duration),
}

impl LearningRate {
    /// A rate that stays at `rate`.
    pub fn constant(rate: f64) -> Self {
        LearningRate { initial: rate, anneal: None }
    }

    /// The rate after `agent_steps` agent steps and `elapsed` of training.
    pub fn at(&self, agent_steps: u64, elapsed: Duration) -> f64 {
        let spent = match self.anneal {
            None => return self.initial,
            Some(Anneal::Steps(end)) => agent_steps as f64 / end as f64,
            Some(Anneal::Time(end)) => elapsed.as_secs_f64() / end.as_secs_f64(),
        };
        self.initial * (1.0 - spent).max(0.0)
    }
}

/// The statistics of one optimizer over a list of parameters, plus its step count.
///
/// Each worker holds its own `SharedOptimizer` value whose tensors are shallow clones
/// of the same storage (and whose step counter is the same atomic), so all workers
/// read and update one set of statistics without locks, like the weights themselves.
pub struct SharedOptimizer {
    kind: OptimizerKind,
    learning_rate: LearningRate,
    /// `statistics[i][j]`: statistic j of parameter i.
    statistics: Vec<Vec<Tensor>>,
    /// Updates applied so far, by all workers together.
    steps: Arc<AtomicU64>,
    /// When training began, for a rate annealed over time: the shared model is made a
    /// moment before the monitor starts --max-time's clock, so the rate reaches 0 just
    /// before the run stops.
    started: Instant,
}

impl SharedOptimizer {
    /// Zeroed statistics for parameters shaped like `parameters`, on the CPU.
    pub fn new(kind: OptimizerKind, learning_rate: LearningRate, parameters: &[Tensor]) -> Self {
        let statistics = parameters
            .iter()
            .map(|parameter| {
                kind.statistic_names()
                    .iter()
                    .map(|_| Tensor::zeros(parameter.size(), (Kind::Float, Device::Cpu)))
                    .collect()
            })
            .collect();
        SharedOptimizer {
            kind,
            learning_rate,
            statistics,
            steps: Arc::new(AtomicU64::new(0)),
            started: Instant::now(),
        }
    }

    /// Another handle on the same statistics and step count, for another worker.
    pub fn share(&self) -> Self {
        self.with_statistics(Tensor::shallow_clone, Arc::clone(&self.steps))
    }

    /// An optimizer of its own, starting from copies of these statistics and this
    /// step count (--shared-optimizer false: each worker steps its own).
    pub fn duplicate(&self) -> Self {
        self.with_statistics(Tensor::copy, Arc::new(AtomicU64::new(self.steps())))
    }

    /// This optimizer with each statistic passed through `take` and `steps` as its
    /// step count.
    fn with_statistics(&self, take: fn(&Tensor) -> Tensor, steps: Arc<AtomicU64>) -> Self {
        SharedOptimizer {
            kind: self.kind,
            learning_rate: self.learning_rate,
            statistics: self.statistics.iter().map(|row| row.iter().map(take).collect()).collect(),
            steps,
            started: self.started,
        }
    }

    /// The rate this optimizer steps at after `agent_steps` agent steps, now.
    pub fn learning_rate(&self, agent_steps: u64) -> f64 {
        self.learning_rate.at(agent_steps, self.started.elapsed())
    }

    /// Updates applied so far.
    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::Relaxed)
    }

    /// Sets the step count (when resuming from a checkpoint).
    pub fn set_steps(&self, steps: u64) {
        self.steps.store(steps, Ordering::Relaxed);
    }

    /// Every statistic with a checkpoint name (`<parameter>.<statistic>`).
    pub fn named_statistics<'a>(
        &'a self,
        parameter_names: &'a [String],
    ) -> Vec<(String, &'a Tensor)> {
        parameter_names
            .iter()
            .zip(&self.statistics)
            .flat_map(|(parameter, row)| {
                self.kind
                    .statistic_names()
                    .iter()
                    .zip(row)
                    .map(move |(statistic, tensor)| (format!("{parameter}.{statistic}"), tensor))
            })
            .collect()
    }

    /// Applies one update to `parameters` (the shared weights, on the CPU) from
    /// `gradients` (on the CPU, same order), at the learning rate of a run that has
    /// played `agent_steps` agent steps.
    ///
    /// Hogwild (Recht et al., 2011): workers run this concurrently on the same
    /// tensors without locks. Two updates may interleave element by element, so an
    /// update can be partly overwritten or applied to a mix of old and new values; with
    /// small learning rates such collisions act as a little extra noise, and taking no
    /// lock is what lets many workers update at once. The reference accepts the same race.
    pub fn step(&self, parameters: &[Tensor], gradients: &[Tensor], agent_steps: u64) {
        let step = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
        let learning_rate = self.learning_rate(agent_steps);
        tch::no_grad(|| {
            for ((parameter, gradient), statistics) in
                parameters.iter().zip(gradients).zip(&self.statistics)
            {
                let mut parameter = parameter.shallow_clone();
                match self.kind {
                    OptimizerKind::Adam { amsgrad } => {
                        let (beta1, beta2) = OptimizerKind::ADAM_BETAS;
                        let mut exp_avg = statistics[0].shallow_clone();
                        let mut exp_avg_sq = statistics[1].shallow_clone();
                        // In-place and fused where libtorch allows: the Atari model's
                        // LSTM weights are 13 MB, and each temporary is another pass.
                        let _ = exp_avg.lerp_(gradient, 1.0 - beta1);
                        // Scaled then accumulated, as PyTorch does, not lerped: a finite
                        // gradient above ~1.8e19 squares to infinity, and a lerp from an
                        // infinite average computes inf - inf = NaN, which would spread to
                        // the weights; an infinite average only stops the parameter.
                        let _ = exp_avg_sq
                            .g_mul_scalar_(beta2)
                            .addcmul_(gradient, &(gradient * (1.0 - beta2)));
                        let bias_correction1 = 1.0 - beta1.powf(step as f64);
                        let bias_correction2_sqrt = (1.0 - beta2.powf(step as f64)).sqrt();
                        let second_moment = if amsgrad {
                            let max_exp_avg_sq = statistics[2].shallow_clone();
                            let _ = max_exp_avg_sq.maximum_out(&max_exp_avg_sq, &exp_avg_sq);
                            max_exp_avg_sq
                        } else {
                            exp_avg_sq
                        };
                        let step_size = learning_rate / bias_correction1;
                        // parameter += exp_avg / (denominator / -step_size).
                        let mut denominator = second_moment.sqrt();
                        let _ = denominator
                            .g_div_scalar_(bias_correction2_sqrt)
                            .g_add_scalar_(OptimizerKind::ADAM_EPS)
                            .g_div_scalar_(-step_size);
                        let _ = parameter.addcdiv_(&exp_avg, &denominator);
                    }
                    OptimizerKind::RmsProp => {
                        let alpha = OptimizerKind::RMSPROP_ALPHA;
                        let mut square_avg = statistics[0].shallow_clone();
                        // As for Adam's second moment: never a lerp from infinity.
                        let _ = square_avg
                            .g_mul_scalar_(alpha)
                            .addcmul_(gradient, &(gradient * (1.0 - alpha)));
                        // parameter += gradient / (denominator / -learning rate).
                        let mut denominator = square_avg.sqrt();
                        let _ = denominator
                            .g_add_scalar_(OptimizerKind::RMSPROP_EPS)
                            .g_div_scalar_(-learning_rate);
                        let _ = parameter.addcdiv_(gradient, &denominator);
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(values: &[f32]) -> Tensor {
        Tensor::from_slice(values)
    }

    fn values(tensor: &Tensor) -> Vec<f64> {
        Vec::<f32>::try_from(tensor).unwrap().into_iter().map(f64::from).collect()
    }

    fn assert_close(actual: &[f64], expected: &[f64]) {
        for (a, e) in actual.iter().zip(expected) {
            assert!((a - e).abs() < 1e-6, "{actual:?} != {expected:?}");
        }
    }

    /// Two Adam steps against the closed form: m = 0.1 g (then 0.09 g1 + 0.1 g2),
    /// v likewise with 0.001, p -= lr / (1 - 0.9^t) * m / (sqrt(v) / sqrt(1 - 0.999^t) + 1e-3).
    #[test]
    fn adam_steps_match_closed_form() {
        let parameter = tensor(&[1.0, -2.0]);
        let optimizer = SharedOptimizer::new(
            OptimizerKind::Adam { amsgrad: false },
            LearningRate::constant(0.1),
            &[parameter.shallow_clone()],
        );
        let (g1, g2) = ([0.5, -4.0], [1.0, 2.0]);
        optimizer.step(&[parameter.shallow_clone()], &[tensor(&g1.map(|g: f64| g as f32))], 0);
        let mut expected = [1.0, -2.0];
        for i in 0..2 {
            let m = 0.1 * g1[i];
            let v = 0.001 * g1[i] * g1[i];
            expected[i] -= 0.1 / 0.1 * m / (v.sqrt() / 0.001f64.sqrt() + 1e-3);
        }
        assert_close(&values(&parameter), &expected);
        optimizer.step(&[parameter.shallow_clone()], &[tensor(&g2.map(|g: f64| g as f32))], 0);
        for i in 0..2 {
            let m = 0.9 * 0.1 * g1[i] + 0.1 * g2[i];
            let v = 0.999 * 0.001 * g1[i] * g1[i] + 0.001 * g2[i] * g2[i];
            let bc1 = 1.0 - 0.9f64.powi(2);
            let bc2 = 1.0 - 0.999f64.powi(2);
            expected[i] -= 0.1 / bc1 * m / (v.sqrt() / bc2.sqrt() + 1e-3);
        }
        assert_close(&values(&parameter), &expected);
        assert_eq!(optimizer.steps(), 2);
    }

    /// AMSGrad divides by the largest second moment seen: after a large gradient then a
    /// small one, the denominator still reflects the large one.
    #[test]
    fn amsgrad_keeps_the_maximum() {
        let parameter = tensor(&[0.0]);
        let optimizer = SharedOptimizer::new(
            OptimizerKind::Adam { amsgrad: true },
            LearningRate::constant(0.01),
            &[parameter.shallow_clone()],
        );
        optimizer.step(&[parameter.shallow_clone()], &[tensor(&[10.0])], 0);
        let after_first = values(&parameter)[0];
        optimizer.step(&[parameter.shallow_clone()], &[tensor(&[0.0])], 0);
        let m = 0.9 * 0.1 * 10.0;
        let v_max = 0.001 * 100.0; // v decays to 0.999 * 0.1 but the max keeps 0.1
        let expected = after_first
            - 0.01 / (1.0 - 0.81) * m / (f64::sqrt(v_max) / (1.0 - 0.999f64.powi(2)).sqrt() + 1e-3);
        assert_close(&values(&parameter), &[expected]);
    }

    /// One RMSprop step: s = 0.01 g^2, p -= lr g / (sqrt(s) + 0.1).
    #[test]
    fn rmsprop_step_matches_closed_form() {
        let parameter = tensor(&[1.0, 1.0]);
        let optimizer = SharedOptimizer::new(
            OptimizerKind::RmsProp,
            LearningRate::constant(0.01),
            &[parameter.shallow_clone()],
        );
        optimizer.step(&[parameter.shallow_clone()], &[tensor(&[3.0, -0.5])], 0);
        let expected: Vec<f64> =
            [3.0f64, -0.5].iter().map(|g| 1.0 - 0.01 * g / ((0.01 * g * g).sqrt() + 0.1)).collect();
        assert_close(&values(&parameter), &expected);
    }

    /// Handles made by `share` update one set of statistics and one step count.
    #[test]
    fn shared_handles_share_statistics() {
        let parameter = tensor(&[0.0]);
        let first = SharedOptimizer::new(
            OptimizerKind::RmsProp,
            LearningRate::constant(0.01),
            &[parameter.shallow_clone()],
        );
        let second = first.share();
        second.step(&[parameter.shallow_clone()], &[tensor(&[1.0])], 0);
        assert_eq!(first.steps(), 1);
        assert_close(&values(&first.statistics[0][0]), &[0.01]);
    }

    /// A gradient whose square overflows f32 leaves the second moment infinite and
    /// the parameter where it was, and later ordinary gradients keep both finite
    /// rather than turning them NaN.
    #[test]
    fn overflowing_squares_never_give_nan() {
        for kind in [OptimizerKind::Adam { amsgrad: false }, OptimizerKind::RmsProp] {
            let parameter = tensor(&[1.0]);
            let optimizer = SharedOptimizer::new(
                kind,
                LearningRate::constant(0.1),
                &[parameter.shallow_clone()],
            );
            optimizer.step(&[parameter.shallow_clone()], &[tensor(&[3e19])], 0);
            for _ in 0..3 {
                optimizer.step(&[parameter.shallow_clone()], &[tensor(&[0.5])], 0);
            }
            let value = values(&parameter)[0];
            assert!(value.is_finite(), "{kind:?}: parameter {value}");
            let names = ["p".to_string()];
            for (name, statistic) in optimizer.named_statistics(&names) {
                assert!(!values(statistic)[0].is_nan(), "{kind:?}: {name} is NaN");
            }
        }
    }

    /// An annealed rate falls linearly from its initial value to 0 at the end of its
    /// budget, of agent steps or of time, and stays there; it follows its own budget
    /// alone; a constant one never moves.
    #[test]
    fn annealed_rate_falls_linearly_to_zero() {
        let early = Duration::ZERO;
        let by_steps = LearningRate { initial: 4e-4, anneal: Some(Anneal::Steps(1_000)) };
        let rates = [0, 250, 500, 1_000, 5_000].map(|steps| by_steps.at(steps, early));
        assert_close(&rates, &[4e-4, 3e-4, 2e-4, 0.0, 0.0]);
        assert_close(&[by_steps.at(250, Duration::from_secs(1 << 20))], &[3e-4]);

        let by_time =
            LearningRate { initial: 4e-4, anneal: Some(Anneal::Time(Duration::from_secs(60))) };
        let rates = [0, 15, 30, 60, 300].map(|seconds| by_time.at(0, Duration::from_secs(seconds)));
        assert_close(&rates, &[4e-4, 3e-4, 2e-4, 0.0, 0.0]);
        assert_close(&[by_time.at(u64::MAX, Duration::from_secs(15))], &[3e-4]);

        assert_eq!(LearningRate::constant(4e-4).at(u64::MAX, Duration::MAX), 4e-4);
    }

    /// An optimizer annealed over time steps at the rate its own clock gives, and so
    /// do its shared and duplicated handles: once the time is spent the weights stay
    /// where they are, while an hour's budget has barely begun.
    #[test]
    fn steps_use_the_rate_of_the_time_spent() {
        let optimizer_over = |time| {
            let rate = LearningRate { initial: 0.01, anneal: Some(Anneal::Time(time)) };
            let parameter = tensor(&[1.0]);
            (
                SharedOptimizer::new(OptimizerKind::RmsProp, rate, &[parameter.shallow_clone()]),
                parameter,
            )
        };
        let (spent, spent_parameter) = optimizer_over(Duration::from_millis(1));
        let (fresh, fresh_parameter) = optimizer_over(Duration::from_secs(3600));
        std::thread::sleep(Duration::from_millis(5));
        for handle in [spent.share(), spent.duplicate()] {
            handle.step(&[spent_parameter.shallow_clone()], &[tensor(&[2.0])], 0);
        }
        assert_eq!(values(&spent_parameter)[0], 1.0);
        for handle in [fresh.share(), fresh.duplicate()] {
            handle.step(&[fresh_parameter.shallow_clone()], &[tensor(&[2.0])], 0);
        }
        assert!(values(&fresh_parameter)[0] < 1.0);
    }

    /// The optimizer takes its step at the rate the run's agent steps give: RMSprop's
    /// step is proportional to the rate, so halfway through an annealed run it is half
    /// a constant rate's, and at the end the weights stay where they are.
    #[test]
    fn steps_use_the_rate_at_the_runs_agent_steps() {
        let moved = |rate: LearningRate, agent_steps: u64| {
            let parameter = tensor(&[1.0]);
            let optimizer =
                SharedOptimizer::new(OptimizerKind::RmsProp, rate, &[parameter.shallow_clone()]);
            optimizer.step(&[parameter.shallow_clone()], &[tensor(&[2.0])], agent_steps);
            1.0 - values(&parameter)[0]
        };
        let annealed = LearningRate { initial: 0.01, anneal: Some(Anneal::Steps(100)) };
        let constant = moved(LearningRate::constant(0.01), 50);
        assert!(constant > 0.0);
        assert_close(&[moved(annealed, 50)], &[constant / 2.0]);
        assert_eq!(moved(annealed, 100), 0.0);
    }
}
