//! One worker's rollout and the A3C loss over it: discounted returns for the critic
//! and generalised advantage estimates (GAE, arXiv:1506.02438) for the actor, computed
//! backwards from the bootstrap value as the reference does.

use tch::Tensor;

/// Hyperparameters of the loss.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LossConfig {
    /// Discount factor (gamma).
    pub gamma: f64,
    /// GAE's lambda (the reference's tau).
    pub tau: f64,
    /// Weight of the entropy bonus.
    pub entropy_coef: f64,
    /// Weight of the value loss.
    pub value_coef: f64,
}

/// How a raw reward becomes the reward the loss learns from.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RewardShaping {
    pub scale: f64,
    /// Rewards are clipped to [-clip, clip] after scaling; `None` keeps them whole.
    pub clip: Option<f64>,
}

impl RewardShaping {
    pub fn apply(&self, raw: f32) -> f64 {
        let scaled = f64::from(raw) * self.scale;
        match self.clip {
            Some(bound) => scaled.clamp(-bound, bound),
            None => scaled,
        }
    }
}

/// Steps of one rollout, as tensors that keep their autograd graphs.
#[derive(Default)]
pub struct Rollout {
    /// Critic values, each `[1, 1]`.
    pub values: Vec<Tensor>,
    /// The same values as read on the host with each step's action: what the returns
    /// and advantages are computed from, so the loss needs no read of its own.
    pub value_estimates: Vec<f64>,
    /// Log-probability of the action taken, each `[1]` (summed over dimensions for
    /// continuous actions).
    pub log_probs: Vec<Tensor>,
    /// Policy entropy, each `[1]`.
    pub entropies: Vec<Tensor>,
    /// Rewards after clipping to [-1, 1].
    pub rewards: Vec<f64>,
}

/// Returns and advantages of a rollout, newest last.
#[derive(Clone, Debug, PartialEq)]
pub struct Targets {
    /// Discounted returns R_t, bootstrapped from the last value.
    pub returns: Vec<f64>,
    /// GAE advantages.
    pub advantages: Vec<f64>,
}

/// Computes discounted returns and GAE backwards: R_t = r_t + gamma R_{t+1} with
/// R_T = `bootstrap` (the critic's value of the state after the rollout, 0 if the
/// episode ended); delta_t = r_t + gamma V_{t+1} - V_t with V_T = `bootstrap`;
/// A_t = delta_t + gamma tau A_{t+1}.
pub fn compute_targets(
    rewards: &[f64],
    values: &[f64],
    bootstrap: f64,
    gamma: f64,
    tau: f64,
) -> Targets {
    assert_eq!(rewards.len(), values.len(), "one value per reward");
    let steps = rewards.len();
    let mut returns = vec![0.0; steps];
    let mut advantages = vec![0.0; steps];
    let mut running_return = bootstrap;
    let mut advantage = 0.0;
    let mut next_value = bootstrap;
    for t in (0..steps).rev() {
        running_return = rewards[t] + gamma * running_return;
        let delta = rewards[t] + gamma * next_value - values[t];
        advantage = delta + gamma * tau * advantage;
        returns[t] = running_return;
        advantages[t] = advantage;
        next_value = values[t];
    }
    Targets { returns, advantages }
}

/// The three terms of the loss, each summed over the rollout.
pub struct Loss {
    /// -sum log pi(a_t) A_t.
    pub policy: Tensor,
    /// sum 0.5 (R_t - V_t)^2.
    pub value: Tensor,
    /// sum of entropies.
    pub entropy: Tensor,
    /// policy - entropy_coef entropy + value_coef value: what is differentiated.
    pub total: Tensor,
}

impl Rollout {
    /// Number of steps stored.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Whether no step is stored.
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// The loss of this rollout; `bootstrap` is the value after its last step. It
    /// reads nothing back from the device: the targets come from the values already
    /// on the host and go to the device without waiting on it.
    pub fn loss(&self, bootstrap: f64, config: &LossConfig) -> Loss {
        let values = Tensor::cat(&self.values, 0).view([-1]);
        let targets = compute_targets(
            &self.rewards,
            &self.value_estimates,
            bootstrap,
            config.gamma,
            config.tau,
        );
        let device = values.device();
        let to_tensor = |numbers: &[f64]| {
            let numbers: Vec<f32> = numbers.iter().map(|&x| x as f32).collect();
            crate::device::upload(&numbers, &[-1], device)
        };
        let returns = to_tensor(&targets.returns);
        let advantages = to_tensor(&targets.advantages);
        let log_probs = Tensor::cat(&self.log_probs, 0).view([-1]);
        let entropies = Tensor::cat(&self.entropies, 0).view([-1]);
        let policy = -(log_probs * advantages).sum(tch::Kind::Float);
        let value = ((returns - values).square() * 0.5).sum(tch::Kind::Float);
        let entropy = entropies.sum(tch::Kind::Float);
        let total = &policy - &entropy * config.entropy_coef + &value * config.value_coef;
        Loss { policy, value, entropy, total }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: &[f64], expected: &[f64]) {
        assert_eq!(actual.len(), expected.len());
        for (a, e) in actual.iter().zip(expected) {
            assert!((a - e).abs() < 1e-12, "{actual:?} != {expected:?}");
        }
    }

    /// Three steps, gamma 0.9, tau 0.5, bootstrap 2, worked by hand:
    /// R2 = 1 + 0.9*2 = 2.8, R1 = 0 + 0.9*2.8 = 2.52, R0 = -1 + 0.9*2.52 = 1.268;
    /// deltas: d2 = 1 + 1.8 - 0.5 = 2.3, d1 = 0 + 0.9*0.5 - 0.2 = 0.25,
    /// d0 = -1 + 0.9*0.2 - 0.1 = -0.92; A2 = 2.3, A1 = 0.25 + 0.45*2.3 = 1.285,
    /// A0 = -0.92 + 0.45*1.285 = -0.34175.
    #[test]
    fn returns_and_gae_by_hand() {
        let targets = compute_targets(&[-1.0, 0.0, 1.0], &[0.1, 0.2, 0.5], 2.0, 0.9, 0.5);
        close(&targets.returns, &[1.268, 2.52, 2.8]);
        close(&targets.advantages, &[-0.34175, 1.285, 2.3]);
    }

    /// Scaling comes before clipping, and "off" keeps the scaled reward whole.
    #[test]
    fn reward_shaping_scales_then_clips() {
        let reference = RewardShaping { scale: 1.0, clip: Some(1.0) };
        assert_eq!(reference.apply(3.0), 1.0);
        assert_eq!(reference.apply(-0.5), -0.5);
        let scaled = RewardShaping { scale: 0.125, clip: Some(1.0) };
        assert_eq!(scaled.apply(-4.0), -0.5);
        assert_eq!(scaled.apply(-16.0), -1.0);
        let whole = RewardShaping { scale: 0.125, clip: None };
        assert_eq!(whole.apply(-16.0), -2.0);
    }

    /// With tau 1 GAE is the return minus the value; an ended episode bootstraps 0.
    #[test]
    fn tau_one_gives_return_minus_value() {
        let values = [0.3, -0.2, 0.7, 0.1];
        let targets = compute_targets(&[1.0, 1.0, 0.0, 1.0], &values, 0.0, 0.99, 1.0);
        let expected: Vec<f64> = targets.returns.iter().zip(values).map(|(r, v)| r - v).collect();
        for (a, e) in targets.advantages.iter().zip(&expected) {
            assert!((a - e).abs() < 1e-12);
        }
        assert!((targets.returns[3] - 1.0).abs() < 1e-12);
    }

    /// The loss terms for a one-step rollout: policy -log p * A, value 0.5 (R - V)^2,
    /// total policy - c_e H + c_v value.
    #[test]
    fn loss_terms_by_hand() {
        let rollout = Rollout {
            values: vec![Tensor::from_slice(&[0.5f32]).view([1, 1])],
            value_estimates: vec![0.5],
            log_probs: vec![Tensor::from_slice(&[-0.7f32])],
            entropies: vec![Tensor::from_slice(&[1.2f32])],
            rewards: vec![1.0],
        };
        let config = LossConfig { gamma: 0.99, tau: 1.0, entropy_coef: 0.01, value_coef: 0.5 };
        let loss = rollout.loss(2.0, &config);
        let ret = 1.0 + 0.99 * 2.0; // 2.98, advantage 2.48
        let policy = 0.7 * (ret - 0.5);
        let value = 0.5 * (ret - 0.5) * (ret - 0.5);
        let total = policy - 0.01 * 1.2 + 0.5 * value;
        for (tensor, expected) in
            [(&loss.policy, policy), (&loss.value, value), (&loss.total, total)]
        {
            assert!((tensor.double_value(&[]) - expected).abs() < 1e-5);
        }
    }
}
