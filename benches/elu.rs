//! Benchmark: a3g's ELU kernel (src/model/elu.cpp) against libtorch's ELU on the universe
//! network's first conv output, channels-last, for a GA3C trainer's batch (8 segments
//! of 20 steps), a predictor's (about 10 agents) and an A3C worker's single screen:
//! ns per element, forward alone and forward with the backward pass.
//!
//! Run: `taskset -c 0 cargo bench --bench elu` (after the set-up of `./scripts/test`).

use std::time::Instant;

use a3g::model::elu::elu;
use tch::{Device, Kind, Tensor};

/// An ELU implementation under test.
type Activation = fn(&Tensor) -> Tensor;

/// The least of several timings of `repeats` calls, in ns per element.
fn best_ns_per_element(elements: i64, repeats: u32, mut body: impl FnMut()) -> f64 {
    body();
    (0..15)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..repeats {
                body();
            }
            start.elapsed().as_secs_f64() * 1e9 / f64::from(repeats) / elements as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    tch::set_num_threads(1);
    for (screens, repeats) in [(160, 5), (10, 100), (1, 1000)] {
        // conv1's output, [screens, 32, 21, 21], laid out channels-last as a3g's are.
        let conv_output = Tensor::randn([screens, 21, 21, 32], (Kind::Float, Device::Cpu))
            .permute([0, 3, 1, 2])
            .set_requires_grad(true);
        let elements = conv_output.numel() as i64;
        let upstream = Tensor::randn_like(&conv_output);
        let activations: [(&str, Activation); 2] = [("libtorch", |x| x.elu()), ("a3g", elu)];
        for (name, activation) in activations {
            let forward = best_ns_per_element(elements, repeats, || {
                let _ = tch::no_grad(|| activation(&conv_output));
            });
            let both = best_ns_per_element(elements, repeats, || {
                let output = activation(&conv_output);
                let _ = Tensor::run_backward(
                    &[(output * &upstream).sum(Kind::Float)],
                    &[&conv_output],
                    false,
                    false,
                );
            });
            println!(
                "{screens} screens, {name:8}: forward {forward:.2} ns/element, forward and backward {both:.2}"
            );
        }
    }
}
