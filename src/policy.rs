//! Acting: turning the policy head's output into an action, sampled while training
//! (with the log-probability and entropy the loss needs) or greedy when testing.

use tch::{Kind, Tensor};

use crate::device;
use crate::env::rng::Rng;
use crate::env::Action;
use crate::model::Policy;

/// A sampled action with the terms of the loss it contributes.
pub struct SampledAction {
    pub action: Action,
    /// log pi(action), shape `[1]`, in the graph.
    pub log_prob: Tensor,
    /// Entropy of the policy, shape `[1]`, in the graph.
    pub entropy: Tensor,
    /// The critic's value of the state, read along with what chose the action: the
    /// returns and advantages are computed from it on the host, and one read per step
    /// is one host sync instead of two.
    pub value: f64,
}

/// Samples an action from a batch-of-one policy, reading `value` (the critic's `[1, 1]`
/// output for the same state) in the same host sync. The draw is made on the CPU from
/// the worker's own generator, so each worker's choices follow its seed.
pub fn sample(
    policy: &Policy,
    value: &Tensor,
    rng: &mut Rng,
    bounds: Option<(&[f32], &[f32])>,
) -> SampledAction {
    // The values an action is chosen from, with the critic's value after them.
    let read_with_value = |chosen_from: &Tensor| {
        let mut host = device::read(&Tensor::cat(
            &[chosen_from.detach().view([-1]), value.detach().view([-1])],
            0,
        ));
        let value = host.pop().expect("the value comes last");
        (host, value)
    };
    match policy {
        Policy::Logits(logits) => {
            let log_probs = logits.log_softmax(1, Kind::Float);
            let probs = log_probs.exp();
            let entropy = -(&log_probs * &probs).sum_dim_intlist(1, false, Kind::Float);
            let (probabilities, value) = read_with_value(&probs);
            // f32 probabilities, read as f64: converting back is exact.
            let probabilities: Vec<f32> = probabilities.iter().map(|&p| p as f32).collect();
            let index = rng.categorical(&probabilities);
            let log_prob = log_probs.select(1, index as i64);
            SampledAction { action: Action::Discrete(index), log_prob, entropy, value }
        }
        Policy::Gaussian { mean, std } => {
            let dims = mean.size()[1] as usize;
            let noise: Vec<f32> = (0..dims).map(|_| rng.normal() as f32).collect();
            let noise = device::upload(&noise, &[1, -1], mean.device());
            let sample = (mean.detach() + std.detach() * noise).detach();
            let (log_prob, entropy) = action_terms(policy, &sample);
            let (values, value) = read_with_value(&sample);
            let values = values.iter().map(|&x| x as f32).collect();
            SampledAction {
                action: Action::Continuous(clip(values, bounds)),
                log_prob,
                entropy,
                value,
            }
        }
    }
}

/// The log-probability of each row's action (`[rows, 1]` indices or `[rows, dims]`
/// values, as drawn before any clipping) and the policy's entropy, each `[rows]`: the
/// terms of the loss, for the action a worker just sampled or for a whole batch of
/// replayed ones.
pub fn action_terms(policy: &Policy, actions: &Tensor) -> (Tensor, Tensor) {
    match policy {
        Policy::Logits(logits) => {
            let log_probs = logits.log_softmax(1, Kind::Float);
            let entropy = -(&log_probs * log_probs.exp()).sum_dim_intlist(1, false, Kind::Float);
            let taken = log_probs.gather(1, &actions.to_kind(Kind::Int64), false).view([-1]);
            (taken, entropy)
        }
        Policy::Gaussian { mean, std } => {
            let variance = std.square();
            let log_density = -(actions - mean).square() / (&variance * 2.0)
                - std.log()
                - 0.5 * (2.0 * std::f64::consts::PI).ln();
            let entropy = ((variance * (2.0 * std::f64::consts::PI)).log() * 0.5 + 0.5)
                .sum_dim_intlist(1, false, Kind::Float);
            (log_density.sum_dim_intlist(1, false, Kind::Float), entropy)
        }
    }
}

/// The most likely action: the largest logit, or the Gaussian's mean.
pub fn greedy(policy: &Policy, bounds: Option<(&[f32], &[f32])>) -> Action {
    match policy {
        Policy::Logits(logits) => {
            Action::Discrete(device::read(&logits.argmax(1, false))[0] as usize)
        }
        Policy::Gaussian { mean, .. } => {
            Action::Continuous(clip(device::read(mean).iter().map(|&x| x as f32).collect(), bounds))
        }
    }
}

/// Clips each dimension into its bounds, as the environment requires.
pub fn clip(mut values: Vec<f32>, bounds: Option<(&[f32], &[f32])>) -> Vec<f32> {
    if let Some((low, high)) = bounds {
        for ((value, &low), &high) in values.iter_mut().zip(low).zip(high) {
            *value = value.clamp(low, high);
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The discrete sample's log-probability and entropy match the softmax by hand, and
    /// the critic's value comes back with it.
    #[test]
    fn discrete_terms_match_softmax() {
        let logits = Tensor::from_slice(&[0.0f32, 1.0f32.ln(), 2.0f32.ln()]).view([1, 3]);
        // Probabilities 1/4, 1/4, 2/4.
        let value = Tensor::from_slice(&[0.25f32]).view([1, 1]);
        let sampled = sample(&Policy::Logits(logits), &value, &mut Rng::new(1), None);
        assert_eq!(sampled.value, 0.25);
        let Action::Discrete(index) = sampled.action else { panic!("discrete expected") };
        let expected = [0.25f64, 0.25, 0.5][index].ln();
        assert!((sampled.log_prob.double_value(&[0]) - expected).abs() < 1e-6);
        let entropy = -(2.0 * 0.25 * 0.25f64.ln() + 0.5 * 0.5f64.ln());
        assert!((sampled.entropy.double_value(&[0]) - entropy).abs() < 1e-6);
    }

    /// The Gaussian's log-density and entropy match the closed forms, and the critic's
    /// value comes back with the action; the action is clipped into the bounds; greedy
    /// takes the mean.
    #[test]
    fn gaussian_terms_match_closed_form() {
        let mean = Tensor::from_slice(&[0.5f32]).view([1, 1]);
        let std = Tensor::from_slice(&[2.0f32]).view([1, 1]);
        let policy = Policy::Gaussian { mean, std };
        let value = Tensor::from_slice(&[-1.5f32]).view([1, 1]);
        let sampled = sample(&policy, &value, &mut Rng::new(3), None);
        assert_eq!(sampled.value, -1.5);
        let Action::Continuous(values) = &sampled.action else { panic!("continuous expected") };
        let x = f64::from(values[0]);
        let expected =
            -(x - 0.5).powi(2) / 8.0 - 2f64.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln();
        assert!((sampled.log_prob.double_value(&[0]) - expected).abs() < 1e-5);
        let entropy = 0.5 + 0.5 * (2.0 * std::f64::consts::PI * 4.0).ln();
        assert!((sampled.entropy.double_value(&[0]) - entropy).abs() < 1e-5);
        assert_eq!(greedy(&policy, Some((&[-0.2], &[0.2]))), Action::Continuous(vec![0.2]));
    }
}
