//! Benchmark: the reference Atari model's cost per agent step on one core, as a
//! training worker pays it: a 20-step rollout of forward passes with autograd, then
//! one backward pass through the whole rollout.
//!
//! Run: `taskset -c 0 cargo bench --locked --bench model_step`, then the same protocol in
//! PyTorch with `taskset -c 0 python3 benches/model_step.py` (set-up of
//! `./scripts/test`, PYTHONPATH=.deps/torch); the figures go to docs/benchmarks.md.

use std::time::Instant;

use a3g::env::ActionSpace;
use a3g::model::{ActorCritic, Body, LstmState, LstmTape, ModelSpec, Policy};
use tch::{nn, Device, Kind, Tensor};

const ROLLOUT: usize = 20;
const WARM_UP_ROLLOUTS: usize = 5;
const ROLLOUTS: usize = 40;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Median forward and backward milliseconds per agent step over the rollouts;
/// `recorded` runs a3g's worker protocol (the LSTM recorded on a tape), otherwise
/// PyTorch's (autograd through `lstm_cell` at every step).
fn measure(
    model: &ActorCritic,
    spec: &ModelSpec,
    screens: &[Tensor],
    recorded: bool,
) -> (f64, f64) {
    let (mut forward_ms, mut backward_ms) = (Vec::new(), Vec::new());
    for rollout in 0..WARM_UP_ROLLOUTS + ROLLOUTS {
        let started = Instant::now();
        let mut state = LstmState::zeros(spec, Device::Cpu);
        let mut loss = Tensor::zeros([], (Kind::Float, Device::Cpu));
        let mut tape = LstmTape::default();
        for screen in screens {
            let output = if recorded {
                model.forward_recorded(screen, &state, &mut tape)
            } else {
                model.forward(screen, &state)
            };
            let Policy::Logits(logits) = output.policy else { unreachable!("a discrete head") };
            loss = loss + output.value.sum(Kind::Float)
                - logits.log_softmax(-1, Kind::Float).select(1, 0).sum(Kind::Float);
            state = output.state;
        }
        let forward = started.elapsed();
        loss.backward();
        tape.add_weight_gradients(model);
        let total = started.elapsed();
        if rollout >= WARM_UP_ROLLOUTS {
            forward_ms.push(forward.as_secs_f64() * 1e3 / ROLLOUT as f64);
            backward_ms.push((total - forward).as_secs_f64() * 1e3 / ROLLOUT as f64);
        }
    }
    (median(forward_ms), median(backward_ms))
}

fn main() {
    tch::set_num_threads(1);
    tch::manual_seed(1);
    let spec = ModelSpec::with_body(Body::AtariLstm, &ActionSpace::Discrete { n: 6 }, 512);
    let store = nn::VarStore::new(Device::Cpu);
    let model = ActorCritic::new(&store, &spec);
    let screens: Vec<Tensor> =
        (0..ROLLOUT).map(|_| Tensor::randn([1, 1, 80, 80], (Kind::Float, Device::Cpu))).collect();
    // Alternated, so that a change in the machine's speed shows in both.
    for round in 1..=2 {
        for (protocol, recorded) in [("autograd", false), ("recorded LSTM", true)] {
            let (forward, backward) = measure(&model, &spec, &screens, recorded);
            println!(
                "a3g, {protocol} (round {round}), one thread, median per agent step over \
                 {ROLLOUTS} rollouts of {ROLLOUT}: forward {forward:.2} ms, backward \
                 {backward:.2} ms, total {:.2} ms",
                forward + backward
            );
        }
    }
}
