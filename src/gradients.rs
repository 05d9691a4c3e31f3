//! An update's gradients on their way from a training thread's local model to the
//! shared model on the CPU, through one flat buffer: the local parameters' gradients
//! are views into it, so the backward pass writes them there; behind them go the
//! finiteness check and the loss terms; one copy, one host sync, brings it all to the
//! host, where the shared optimizer reads the gradients as views of that copy.
//!
//! Per-tensor copies from a GPU would wait for the device once per parameter (16 for
//! the Atari model) and pay a launch each; here there is one of each per update, into
//! pinned memory, which the GPU copies to faster than to ordinary memory. On the CPU the
//! host copy is the buffer itself and nothing is copied at all.

use tch::{Device, Kind, Tensor};

use crate::device;
use crate::rollout::Loss;

/// Values behind the gradients in the buffer: whether everything is finite (1 or 0),
/// then the policy loss, value loss and entropy.
const CHECK_VALUES: i64 = 4;

/// What an update's one read brings back besides the gradients.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpdateCheck {
    /// Whether the loss and every gradient are finite; if not, the update is skipped.
    pub finite: bool,
    /// The loss terms, summed over the rollout: policy loss, value loss, entropy.
    pub terms: [f64; 3],
}

/// One training thread's gradient buffer, on its local model's device, with its host
/// copy. Built once per thread; each update zeroes it, backpropagates into it and
/// calls [`GradientBuffer::transfer`].
pub struct GradientBuffer {
    /// The local model's parameters, whose gradients are `slots`.
    parameters: Vec<Tensor>,
    /// Every gradient, flattened in parameter order, then the check values.
    pub(crate) flat: Tensor,
    /// Views of `flat` shaped like each parameter: its gradient's place.
    slots: Vec<Tensor>,
    /// `flat` on the host: pinned memory when `flat` is on a GPU, `flat` itself on the
    /// CPU.
    host: Tensor,
    /// Views of `host` shaped like each parameter, for the shared optimizer.
    host_gradients: Vec<Tensor>,
    /// Elements of all the gradients together.
    gradients_len: i64,
}

impl GradientBuffer {
    /// A buffer for `parameters` (a local model's, all on `device`), made the home of
    /// their gradients.
    pub fn new(parameters: &[Tensor], device: Device) -> Self {
        let lengths: Vec<i64> =
            parameters.iter().map(|parameter| parameter.numel() as i64).collect();
        let gradients_len: i64 = lengths.iter().sum();
        let flat = Tensor::zeros([gradients_len + CHECK_VALUES], (Kind::Float, device));
        let host = match device {
            Device::Cpu => flat.shallow_clone(),
            _ => device::pinned(
                &Tensor::zeros([gradients_len + CHECK_VALUES], (Kind::Float, Device::Cpu)),
                device,
            ),
        };
        let views = |buffer: &Tensor| -> Vec<Tensor> {
            let mut start = 0;
            parameters
                .iter()
                .zip(&lengths)
                .map(|(parameter, &length)| {
                    // Laid out as the parameter is (channels-last conv weights on the
                    // CPU), so that adding a backward pass's gradient in is a plain copy.
                    let view = buffer.narrow(0, start, length).as_strided(
                        parameter.size().as_slice(),
                        parameter.stride().as_slice(),
                        None,
                    );
                    start += length;
                    view
                })
                .collect()
        };
        let buffer = GradientBuffer {
            parameters: parameters.iter().map(Tensor::shallow_clone).collect(),
            slots: views(&flat),
            host_gradients: views(&host),
            flat,
            host,
            gradients_len,
        };
        // A gradient exists only after a backward pass has made one; one pass through
        // every parameter makes them all, and then each is moved into its slot.
        let touch: Vec<Tensor> =
            parameters.iter().map(|parameter| parameter.sum(Kind::Float)).collect();
        Tensor::stack(&touch, 0).sum(Kind::Float).backward();
        buffer.gather();
        buffer.zero();
        buffer
    }

    /// Zeroes every gradient, ready for the next backward pass: one fill of the buffer.
    pub fn zero(&self) {
        let _ = self.flat.narrow(0, 0, self.gradients_len).zero_();
    }

    /// Makes sure each parameter's gradient is its slot. libtorch adds a backward
    /// pass's gradients into an existing gradient in place, so after the first update
    /// this finds nothing to do; should it ever have replaced one, the new gradient is
    /// copied into the slot, which becomes the gradient again.
    fn gather(&self) {
        for (parameter, slot) in self.parameters.iter().zip(&self.slots) {
            let mut gradient = parameter.grad();
            if gradient.data_ptr() != slot.data_ptr() {
                let mut slot = slot.shallow_clone();
                tch::no_grad(|| slot.copy_(&gradient));
                gradient.set_data(&slot);
            }
        }
    }

    /// After the backward pass of `loss`: checks the loss and every gradient for NaN,
    /// infinity and values too large to use, and brings the gradients and the loss terms to the host, in one
    /// host sync. A NaN or infinity anywhere shows in the minimum or maximum, so one
    /// pass over the buffer, with no temporary copy, decides it. The gradients are then
    /// in [`GradientBuffer::host_gradients`], until the next transfer.
    pub fn transfer(&self, loss: &Loss) -> UpdateCheck {
        self.gather();
        let (minimum, maximum) = self.flat.narrow(0, 0, self.gradients_len).aminmax(None, false);
        let extremes = [&loss.total.detach(), &minimum, &maximum]
            .map(|value| value.to_kind(Kind::Double).view([1]));
        // The largest magnitude, in double precision (max propagates NaN), must stay
        // below LARGEST_USABLE_GRADIENT.
        let largest = Tensor::cat(&extremes, 0).abs().max();
        let finite = largest.lt(LARGEST_USABLE_GRADIENT).to_kind(Kind::Float).view([1]);
        let terms = [&loss.policy, &loss.value, &loss.entropy]
            .map(|term| term.detach().to_kind(Kind::Float).view([1]));
        let mut check = self.flat.narrow(0, self.gradients_len, CHECK_VALUES);
        tch::no_grad(|| check.copy_(&Tensor::cat(&[&finite, &terms[0], &terms[1], &terms[2]], 0)));
        device::copy_to_host(&self.flat, &self.host);
        let values = device::host_values(&self.host.narrow(0, self.gradients_len, CHECK_VALUES));
        UpdateCheck { finite: values[0] == 1.0, terms: [values[1], values[2], values[3]] }
    }

    /// The gradients of the last transfer on the host, in parameter order.
    pub fn host_gradients(&self) -> &[Tensor] {
        &self.host_gradients
    }
}

/// The largest gradient (or loss) an update may carry: the square root of f32's
/// largest value. A larger one squares to infinity in the optimizer's second moment,
/// and from there the weights go NaN, so such an update is skipped like a NaN one.
const LARGEST_USABLE_GRADIENT: f64 = 1.8e19;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ActorCritic, Body, LstmState, ModelSpec};
    use tch::nn;

    /// A loss with known terms whose backward pass gives `parameters` the gradients
    /// `gradients`: the loss is the sum of parameter * gradient, each held fixed.
    fn loss_with_gradients(parameters: &[Tensor], gradients: &[Tensor], total: f32) -> Loss {
        let linear: Vec<Tensor> = parameters
            .iter()
            .zip(gradients)
            .map(|(parameter, gradient)| (parameter * gradient).sum(Kind::Float))
            .collect();
        let linear = Tensor::stack(&linear, 0).sum(Kind::Float);
        // Adds `total` to the value without changing the gradients.
        let total = &linear - linear.detach() + f64::from(total);
        Loss {
            policy: Tensor::from(1.5f32),
            value: Tensor::from(-2.0f32),
            entropy: Tensor::from(0.25f32),
            total,
        }
    }

    /// A NaN or an infinity of either sign in the loss or any gradient is caught, and
    /// so is a finite gradient whose square overflows f32; large usable values are not
    /// mistaken for one, and the loss terms come back with the verdict: all in one
    /// host sync.
    #[test]
    fn transfer_checks_every_gradient_in_one_sync() {
        let parameters = [2, 3].map(|length| {
            Tensor::zeros([length], (Kind::Float, Device::Cpu)).set_requires_grad(true)
        });
        let buffer = GradientBuffer::new(&parameters, Device::Cpu);
        let fine =
            || [Tensor::from_slice(&[1.0f32, -2.0]), Tensor::from_slice(&[1e19f32, -1e19, 0.0])];
        let transfer = |gradients: &[Tensor], total: f32| {
            buffer.zero();
            let loss = loss_with_gradients(&parameters, gradients, total);
            loss.total.backward();
            let before = device::host_syncs();
            let checked = buffer.transfer(&loss);
            assert_eq!(device::host_syncs() - before, 1);
            checked
        };
        assert_eq!(transfer(&fine(), 0.5), UpdateCheck { finite: true, terms: [1.5, -2.0, 0.25] });
        assert_eq!(buffer.host_gradients()[1], fine()[1]);
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3e38, -3e38] {
            let mut poisoned = fine();
            poisoned[1] = Tensor::from_slice(&[0.0f32, bad, 1.0]);
            assert!(!transfer(&poisoned, 0.5).finite, "{bad} in a gradient");
            assert!(!transfer(&fine(), bad).finite, "{bad} as the loss");
        }
    }

    /// The gradients the buffer brings to the host equal, bit for bit, those of the
    /// per-tensor copy it replaced (zeroed gradients, a backward pass, each gradient
    /// copied to the CPU on its own), on two copies of the Atari model with its LSTM,
    /// update after update. Each gradient stays a view of the buffer, so the backward
    /// pass writes into it and on the CPU nothing is copied; a gradient libtorch
    /// replaced is put back into the buffer.
    #[test]
    fn flat_buffer_equals_per_tensor_copies() {
        let action_space = crate::env::ActionSpace::Discrete { n: 6 };
        let spec = ModelSpec::with_body(Body::AtariLstm, &action_space, 32);
        let stores = [nn::VarStore::new(Device::Cpu), nn::VarStore::new(Device::Cpu)];
        let [per_tensor_model, buffered_model] =
            [&stores[0], &stores[1]].map(|store| ActorCritic::new(store, &spec));
        let parameters = |model: &ActorCritic| -> Vec<Tensor> {
            model.parameters().iter().map(|(_, tensor)| tensor.shallow_clone()).collect()
        };
        let (per_tensor, buffered) = (parameters(&per_tensor_model), parameters(&buffered_model));
        crate::shared::copy_weights(&per_tensor, &buffered);
        let buffer = GradientBuffer::new(&buffered, Device::Cpu);
        let loss_of = |model: &ActorCritic, update: i64| {
            let screens =
                Tensor::arange(80 * 80, (Kind::Float, Device::Cpu)).view([1, 1, 80, 80]).sin()
                    * (update + 1) as f64;
            // A state that is not zero, so that the recurrent weights get gradients too.
            let state = || Tensor::full([1, 32], 0.1, (Kind::Float, Device::Cpu));
            let output = model.forward(&screens, &LstmState { hidden: state(), cell: state() });
            let crate::model::Policy::Logits(logits) = output.policy else { unreachable!() };
            let total = output.value.square().sum(Kind::Float)
                + logits.log_softmax(1, Kind::Float).sum(Kind::Float);
            Loss { policy: total.detach(), value: total.detach(), entropy: total.detach(), total }
        };
        for update in 0..3 {
            if update == 2 {
                // As if libtorch had replaced a gradient rather than added into it.
                buffered[3].grad().set_data(&Tensor::zeros_like(&buffered[3]));
            }
            for parameter in &per_tensor {
                parameter.shallow_clone().zero_grad();
            }
            loss_of(&per_tensor_model, update).total.backward();
            let copies: Vec<Tensor> = per_tensor
                .iter()
                .map(|parameter| parameter.grad().to_device(Device::Cpu).copy())
                .collect();
            buffer.zero();
            let loss = loss_of(&buffered_model, update);
            loss.total.backward();
            // The backward pass itself wrote into the buffer, except where a gradient
            // was replaced, which only the transfer puts back.
            for (index, (parameter, slot)) in buffered.iter().zip(&buffer.slots).enumerate() {
                let in_place = parameter.grad().data_ptr() == slot.data_ptr();
                assert_eq!(
                    in_place,
                    (update, index) != (2, 3),
                    "gradient {index}, update {update}"
                );
            }
            assert!(buffer.transfer(&loss).finite);
            let host = buffer.host_gradients();
            for (index, (host, copy)) in host.iter().zip(&copies).enumerate() {
                assert!(
                    copy.abs().sum(Kind::Float).double_value(&[]) > 0.0,
                    "gradient {index} is 0"
                );
                assert_eq!(host, copy, "gradient {index} of update {update}");
                let gradient = buffered[index].grad();
                assert_eq!(
                    gradient.data_ptr(),
                    host.data_ptr(),
                    "gradient {index} left the buffer"
                );
            }
        }
    }
}
