//! Benchmark: a3g's own passes in fp32 and in bf16 (`--precision bf16`, the body
//! under autocast) on one thread, same run, alternated: the forward pass of both Atari
//! networks at predictor batches, and GA3C's training pass (the batched loss's
//! forward and backward) over a train batch of 8 segments of 20 steps.
//!
//! Run: `cargo bench --locked --bench precision` (benches/precision.sh runs it after
//! its training rounds); the figures go to docs/benchmarks.md ("bf16").

use std::time::Instant;

use a3g::env::ActionSpace;
use a3g::model::{ActorCritic, Body, LstmState, ModelSpec};
use a3g::precision::{native_bf16_cpu, Precision};
use tch::{nn, Device, Kind, Tensor};

const REPEATS: usize = 9;

/// The median milliseconds of `pass` over REPEATS runs, after one to warm up.
fn median_ms(mut pass: impl FnMut()) -> f64 {
    pass();
    let mut times: Vec<f64> = (0..REPEATS)
        .map(|_| {
            let started = Instant::now();
            pass();
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[REPEATS / 2]
}

/// A training pass as GA3C's trainer makes it: the body over every step at once, the
/// LSTM step by step over `segments` rows, the heads, a loss and the backward pass.
fn training_pass(
    model: &ActorCritic,
    spec: &ModelSpec,
    screens: &Tensor,
    segments: i64,
    precision: Precision,
) {
    let steps = screens.size()[0] / segments;
    let features = model.features_in(precision, screens);
    let mut state = LstmState::zeros(spec, Device::Cpu);
    state = LstmState {
        hidden: state.hidden.repeat([segments, 1]),
        cell: state.cell.repeat([segments, 1]),
    };
    let mut outputs = Vec::new();
    for t in 0..steps {
        let (output, next) =
            model.recurrent_step(&features.narrow(0, t * segments, segments), &state);
        outputs.push(output);
        state = next;
    }
    let (values, _) = model.heads(&Tensor::cat(&outputs, 0));
    values.square().sum(Kind::Float).backward();
}

fn main() {
    tch::set_num_threads(1);
    tch::manual_seed(1);
    println!(
        "native bf16 on this CPU: {}",
        if native_bf16_cpu() { "yes" } else { "no (emulated: slow)" }
    );
    let actions = ActionSpace::Discrete { n: 6 };
    for (name, body, side, hidden) in
        [("universe", Body::Universe, 42, 256), ("a3clstm", Body::AtariLstm, 80, 512)]
    {
        let spec = ModelSpec::with_body(body, &actions, hidden);
        let model = ActorCritic::new(&nn::VarStore::new(Device::Cpu), &spec);
        let screens = |rows: i64| Tensor::randn([rows, 1, side, side], (Kind::Float, Device::Cpu));
        for rows in [1, 2, 4, 8, 16, 32] {
            let input = screens(rows);
            let state = LstmState {
                hidden: Tensor::zeros([rows, hidden], (Kind::Float, Device::Cpu)),
                cell: Tensor::zeros([rows, hidden], (Kind::Float, Device::Cpu)),
            };
            let forward = |precision| {
                median_ms(|| {
                    tch::no_grad(|| model.forward_in(precision, &input, &state));
                })
            };
            let (fp32, bf16) = (forward(Precision::Fp32), forward(Precision::Bf16));
            println!(
                "{name} forward, batch {rows}: fp32 {fp32:.3} ms, bf16 {bf16:.3} ms, bf16 {:.2}x",
                fp32 / bf16
            );
        }
        let batch = screens(160);
        let train = |precision| {
            median_ms(|| {
                for (_, parameter) in model.parameters() {
                    parameter.shallow_clone().zero_grad();
                }
                training_pass(&model, &spec, &batch, 8, precision);
            })
        };
        let (fp32, bf16) = (train(Precision::Fp32), train(Precision::Bf16));
        println!(
            "{name} training pass, 8 segments of 20 steps (forward + backward): fp32 {fp32:.1} ms, \
             bf16 {bf16:.1} ms, bf16 {:.2}x",
            fp32 / bf16
        );
    }
}
