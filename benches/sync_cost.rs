//! Benchmark: the all-reduce at the heart of a sync between ranks, for each Atari
//! network's weights, and a whole sync's collectives as a3g made them before and after
//! they became two: two ranks as two threads of this process, one group joined through
//! c10d's store and Gloo on 127.0.0.1.
//!
//! Run: `cargo bench --locked --bench sync_cost` (a build with gloo's headers; see
//! docs/distributed.md); the figures go to docs/benchmarks.md.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use a3g::distributed::c10d::{Group, BUILT_IN};
use a3g::distributed::Launch;
use a3g::env::ActionSpace;
use a3g::model::{Body, ModelSpec};

const WARM_UP: usize = 5;
const SYNCS: usize = 50;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// What one timed round does.
#[derive(Clone, Copy)]
enum Round {
    /// The model's all-reduce alone.
    AllReduce,
    /// A whole sync's collectives as a3g made them until 2026-11-27: a gather of the
    /// stop code and three counters, the all-reduce, then a gather of the digest.
    ThreeCollectives,
    /// As a3g makes them now: one gather of the stop code, counters and the previous
    /// agreement's digest, then the all-reduce.
    TwoCollectives,
}

/// Median milliseconds of `round` over `length` floats in `group`.
fn round_ms(group: &mut Group, length: usize, round: Round) -> f64 {
    let mut values = vec![0.5f32; length];
    let mut times = Vec::new();
    for sync in 0..WARM_UP + SYNCS {
        let started = Instant::now();
        match round {
            Round::AllReduce => group.all_reduce_sum(&mut values).expect("the sum"),
            Round::ThreeCollectives => {
                group.all_gather_many(&[0, 1, 2, 3]).expect("the counters");
                group.all_reduce_sum(&mut values).expect("the sum");
                group.all_gather(7).expect("the digest");
            }
            Round::TwoCollectives => {
                group.all_gather_many(&[0, 1, 2, 3, 7]).expect("the counters and digest");
                group.all_reduce_sum(&mut values).expect("the sum");
            }
        }
        values.iter_mut().for_each(|value| *value *= 0.5);
        if sync >= WARM_UP {
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    median(times)
}

/// Both ranks of one group (one join, as a run makes) time every `(length, round)` of
/// `plan` in order; rank 0's medians.
fn rank_zero_times(plan: Vec<(usize, Round)>) -> Vec<f64> {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            let plan = plan.clone();
            std::thread::spawn(move || {
                let mut group =
                    Group::join(&Launch::loopback(rank, 2, port), Duration::from_secs(30))
                        .expect("the ranks meet");
                plan.iter().map(|&(length, round)| round_ms(&mut group, length, round)).collect()
            })
        })
        .collect();
    let mut times: Vec<Vec<f64>> = ranks.into_iter().map(|rank| rank.join().unwrap()).collect();
    times.swap_remove(0)
}

fn main() {
    if !BUILT_IN {
        eprintln!("this build has no c10d (set-up found no gloo headers); see docs/distributed.md");
        std::process::exit(1);
    }
    let pong = ActionSpace::Discrete { n: 6 };
    let networks = [
        ("a3clstm (reference), hidden 512", ModelSpec::with_body(Body::AtariLstm, &pong, 512)),
        ("universe, hidden 256", ModelSpec::with_body(Body::Universe, &pong, 256)),
    ];
    let cartpole = (
        "CartPole MLP, hidden 64",
        ModelSpec::with_body(
            Body::Mlp { inputs: 4, lstm: false, input_norm: None },
            &ActionSpace::Discrete { n: 2 },
            64,
        ),
    );
    let length = |spec: &ModelSpec| spec.parameter_count() as usize;
    let mut plan: Vec<(usize, Round)> =
        networks.iter().map(|(_, spec)| (length(spec), Round::AllReduce)).collect();
    for (_, spec) in [&cartpole, &networks[1]] {
        for _ in 0..3 {
            plan.push((length(spec), Round::ThreeCollectives));
            plan.push((length(spec), Round::TwoCollectives));
        }
    }
    let mut times = rank_zero_times(plan).into_iter();
    println!("two ranks on 127.0.0.1 in one group, rank 0's median of {SYNCS} after {WARM_UP}");
    for (name, spec) in &networks {
        let length = length(spec);
        println!(
            "{name}: {length} parameters ({:.1} MB), all-reduce {:.2} ms",
            length as f64 * 4.0 / 1e6,
            times.next().unwrap()
        );
    }
    println!("a whole sync's collectives, three rounds alternated:");
    for (name, _) in [&cartpole, &networks[1]] {
        for round in 1..=3 {
            let (three, two) = (times.next().unwrap(), times.next().unwrap());
            println!(
                "{name}, round {round}: three collectives {three:.3} ms, two {two:.3} ms ({:.2}x)",
                two / three
            );
        }
    }
}
