//! An update's gradients on their way from a training thread's local model to the
//! shared model on the CPU: checked for NaN and infinity where they were computed, and
//! brought to the host with the loss terms the status line shows, in one host sync.

use tch::{Device, Kind, Tensor};

use crate::device;
use crate::rollout::Loss;

/// What an update's one read brings back besides the gradients.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpdateCheck {
    /// Whether the loss and every gradient are finite; if not, the update is skipped.
    pub finite: bool,
    /// The loss terms, summed over the rollout: policy loss, value loss, entropy.
    pub terms: [f64; 3],
}

/// Checks the loss and every gradient for NaN and infinity and reads the loss terms,
/// in one host sync. A NaN or infinity anywhere in a tensor shows in its minimum or
/// maximum, so one pass over each gradient, with no temporary copy, decides it.
pub fn check(loss: &Loss, gradients: &[Tensor]) -> UpdateCheck {
    let mut extremes = Vec::with_capacity(2 * gradients.len() + 1);
    extremes.push(loss.total.detach().to_kind(Kind::Double).view([1]));
    for gradient in gradients {
        let (minimum, maximum) = gradient.aminmax(None, false);
        extremes.push(minimum.to_kind(Kind::Double).view([1]));
        extremes.push(maximum.to_kind(Kind::Double).view([1]));
    }
    // Summed in double precision, so that large finite extremes cannot overflow.
    let sum = Tensor::cat(&extremes, 0).sum(Kind::Double).view([1]);
    let terms = [&loss.policy, &loss.value, &loss.entropy]
        .map(|term| term.detach().to_kind(Kind::Double).view([1]));
    let values = device::read(&Tensor::cat(&[&sum, &terms[0], &terms[1], &terms[2]], 0));
    UpdateCheck { finite: values[0].is_finite(), terms: [values[1], values[2], values[3]] }
}

/// The gradients on the CPU, for the shared optimizer: the tensors themselves when
/// they are there already, otherwise one copy (and one host sync) per tensor.
pub fn to_host(gradients: Vec<Tensor>, device: Device) -> Vec<Tensor> {
    if device == Device::Cpu {
        return gradients;
    }
    gradients
        .iter()
        .map(|gradient| {
            let host = Tensor::empty(gradient.size(), (gradient.kind(), Device::Cpu));
            device::copy_to_host(gradient, &host);
            host
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loss(total: f32) -> Loss {
        Loss {
            policy: Tensor::from(1.5f32),
            value: Tensor::from(-2.0f32),
            entropy: Tensor::from(0.25f32),
            total: Tensor::from(total),
        }
    }

    /// A NaN or an infinity of either sign in the loss or any gradient is caught;
    /// large finite values are not mistaken for one; the loss terms come back with the
    /// verdict, in one read.
    #[test]
    fn check_catches_every_non_finite_value() {
        let gradients =
            || vec![Tensor::from_slice(&[1.0f32, -2.0]), Tensor::from_slice(&[3e38f32, -3e38])];
        let before = device::host_syncs();
        let checked = check(&loss(0.5), &gradients());
        assert_eq!(device::host_syncs() - before, 1);
        assert_eq!(checked, UpdateCheck { finite: true, terms: [1.5, -2.0, 0.25] });
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut poisoned = gradients();
            poisoned[1] = Tensor::from_slice(&[0.0f32, bad, 1.0]);
            assert!(!check(&loss(0.5), &poisoned).finite, "{bad} in a gradient");
            assert!(!check(&loss(bad), &gradients()).finite, "{bad} as the loss");
        }
    }
}
