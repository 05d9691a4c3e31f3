//! The LSTM cell every network but the MLP without `--lstm` ends its body with: its
//! state, its parameters and their initialisations, and the tape that records a
//! training rollout's steps so that each LSTM weight gets its gradient in one product.

use tch::nn::{self, Init};
use tch::{Device, Kind, Tensor};

use super::{ActorCritic, ModelSpec};

/// The LSTM's hidden and cell state, each `[batch, hidden_size]`; empty tensors for a
/// network without an LSTM.
pub struct LstmState {
    pub hidden: Tensor,
    pub cell: Tensor,
}

impl LstmState {
    /// The state at the start of an episode: zeros.
    pub fn zeros(spec: &ModelSpec, device: Device) -> Self {
        let size = if spec.has_lstm() { spec.hidden_size } else { 0 };
        LstmState {
            hidden: Tensor::zeros([1, size], (Kind::Float, device)),
            cell: Tensor::zeros([1, size], (Kind::Float, device)),
        }
    }

    /// The same values, cut from the graph of the steps that produced them, so the
    /// next rollout's backward pass stops here (truncated backpropagation).
    pub fn detached(&self) -> Self {
        LstmState { hidden: self.hidden.detach(), cell: self.cell.detach() }
    }
}

/// An LSTM cell's parameters, under the reference's names.
pub(super) struct LstmCell {
    pub(super) weight_ih: Tensor,
    pub(super) weight_hh: Tensor,
    pub(super) bias_ih: Tensor,
    pub(super) bias_hh: Tensor,
}

impl LstmCell {
    /// The cell's step from its input gates (`features W_ih^T + b_ih`), as libtorch's
    /// `lstm_cell` computes it (gates in PyTorch's order: input, forget, cell,
    /// output), with `W_hh` detached and the step recorded on `tape`.
    pub(super) fn recorded_step(
        &self,
        input_gates: Tensor,
        state: &LstmState,
        tape: &mut LstmTape,
    ) -> (Tensor, LstmState) {
        let probe = input_gates.zeros_like().detach().set_requires_grad(true);
        let gates = input_gates
            + state.hidden.matmul(&self.weight_hh.detach().tr())
            + &self.bias_hh
            + &probe;
        tape.hiddens.push(state.hidden.detach());
        tape.probes.push(probe);
        let gates = gates.chunk(4, 1);
        let cell = gates[1].sigmoid() * &state.cell + gates[0].sigmoid() * gates[2].tanh();
        let hidden = gates[3].sigmoid() * cell.tanh();
        (hidden.shallow_clone(), LstmState { hidden, cell })
    }
}

/// A training rollout's LSTM steps, recorded so that each LSTM weight gets its
/// gradient from one matrix product over the whole rollout.
///
/// Left to autograd, every step of a rollout makes its own share of each weight's
/// gradient, a fresh `[4 hidden, inputs]` product (8 MB for the reference model's
/// `W_ih`), and adds it to the rest: at batch 1 that is memory traffic and allocation,
/// not arithmetic, and it was a third of the cost of the reference model's LSTM in
/// training. A recorded step uses the weights detached and adds to its gates a zero
/// "probe" whose gradient, after the backward pass, is the gates' gradient `dG_t`;
/// [`LstmTape::add_weight_gradients`] then adds `dG^T X` and `dG^T H` for all steps at
/// once. The gradients are the same, summed in another order.
#[derive(Default)]
#[must_use = "without add_weight_gradients after the backward pass, the LSTM weights get no gradient"]
pub struct LstmTape {
    /// Each step's input features; empty when the caller made the input gates with
    /// [`ActorCritic::input_gates`], whose product autograd differentiates in one go.
    pub(super) inputs: Vec<Tensor>,
    /// Each step's incoming hidden state.
    pub(super) hiddens: Vec<Tensor>,
    /// Each step's zero probe on its gates.
    pub(super) probes: Vec<Tensor>,
}

impl LstmTape {
    /// After the backward pass: adds the recorded steps' shares of the LSTM weights'
    /// gradients into `model`'s gradients, where the backward pass put the rest.
    pub fn add_weight_gradients(self, model: &ActorCritic) {
        let Some(cell) = &model.lstm else { return };
        if self.probes.is_empty() {
            return;
        }
        debug_assert!(
            self.inputs.is_empty() || self.inputs.len() == self.probes.len(),
            "one tape records either its steps' inputs or none of them"
        );
        tch::no_grad(|| {
            // A step whose output the loss did not use has no gradient: zero.
            let gate_gradients: Vec<Tensor> = self
                .probes
                .iter()
                .map(|probe| {
                    let gradient = probe.grad();
                    if gradient.defined() {
                        gradient
                    } else {
                        probe.zeros_like()
                    }
                })
                .collect();
            let gate_gradients = Tensor::cat(&gate_gradients, 0).tr();
            add_product(&cell.weight_hh, &gate_gradients, &Tensor::cat(&self.hiddens, 0));
            if !self.inputs.is_empty() {
                add_product(&cell.weight_ih, &gate_gradients, &Tensor::cat(&self.inputs, 0));
            }
        });
    }
}

/// Adds `left @ right` into `weight`'s gradient in place, making the gradient first
/// (zeros, through a backward pass, the one way to create it) if it has none.
fn add_product(weight: &Tensor, left: &Tensor, right: &Tensor) {
    let mut gradient = weight.grad();
    if !gradient.defined() {
        tch::with_grad(|| (weight.sum(Kind::Float) * 0.0).backward());
        gradient = weight.grad();
    }
    let _ = gradient.addmm_(left, right);
}

/// The reference's LSTM initialisation: input weights Xavier-uniform, hidden weights
/// orthogonal, biases zero except the forget gate's input bias, set to 1 so the cell
/// starts by remembering.
pub(super) fn lstm_cell(path: &nn::Path, inputs: i64, hidden: i64) -> LstmCell {
    let xavier = (6.0 / (inputs + 4 * hidden) as f64).sqrt();
    let weight_ih =
        path.var("weight_ih", &[4 * hidden, inputs], Init::Uniform { lo: -xavier, up: xavier });
    let weight_hh = path.var("weight_hh", &[4 * hidden, hidden], Init::Orthogonal { gain: 1.0 });
    let bias_ih = path.var("bias_ih", &[4 * hidden], Init::Const(0.0));
    let bias_hh = path.var("bias_hh", &[4 * hidden], Init::Const(0.0));
    tch::no_grad(|| {
        // PyTorch orders the gates input, forget, cell, output.
        let _ = bias_ih.narrow(0, hidden, hidden).fill_(1.0);
    });
    LstmCell { weight_ih, weight_hh, bias_ih, bias_hh }
}
