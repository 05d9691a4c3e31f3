//! Benchmark: the all-reduce at the heart of a sync between ranks, for each Atari
//! network's weights: two ranks as two threads of this process, joined through c10d's
//! store and Gloo on 127.0.0.1.
//!
//! Run: `cargo bench --locked --bench sync_cost` (a build with gloo's headers; see
//! docs/distributed.md); the figures go to docs/benchmarks.md.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use a3g::distributed::c10d::{Group, BUILT_IN};
use a3g::distributed::Launch;
use a3g::env::ActionSpace;
use a3g::model::ModelSpec;

const WARM_UP: usize = 5;
const SYNCS: usize = 50;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Median milliseconds of an all-reduce of `length` floats, as rank `rank` of two.
fn all_reduce_ms(rank: usize, port: u16, length: usize) -> f64 {
    let launch = Launch {
        rank,
        world_size: 2,
        store_host: "127.0.0.1".into(),
        store_port: port,
        serves_store: rank == 0,
        local_rank: 0,
    };
    let mut group = Group::join(&launch, Duration::from_secs(30)).expect("the ranks meet");
    let mut values = vec![0.5f32; length];
    let mut times = Vec::new();
    for sync in 0..WARM_UP + SYNCS {
        let started = Instant::now();
        group.all_reduce_sum(&mut values).expect("the sum");
        values.iter_mut().for_each(|value| *value *= 0.5);
        if sync >= WARM_UP {
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    median(times)
}

fn main() {
    if !BUILT_IN {
        eprintln!("this build has no c10d (set-up found no gloo headers); see docs/distributed.md");
        std::process::exit(1);
    }
    let pong = ActionSpace::Discrete { n: 6 };
    let networks = [
        ("a3clstm (reference), hidden 512", ModelSpec::for_env(&[1, 80, 80], &pong, 512, true)),
        ("universe, hidden 256", ModelSpec::for_env(&[1, 42, 42], &pong, 256, true)),
    ];
    println!("two ranks on 127.0.0.1, median of {SYNCS} all-reduces after {WARM_UP}");
    for (name, spec) in networks {
        let length = spec.parameter_count() as usize;
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let ranks: Vec<_> = (0..2)
            .map(|rank| std::thread::spawn(move || all_reduce_ms(rank, port, length)))
            .collect();
        let times: Vec<f64> = ranks.into_iter().map(|rank| rank.join().unwrap()).collect();
        println!(
            "{name}: {length} parameters ({:.1} MB), all-reduce {:.2} ms (rank 0), {:.2} ms (rank 1)",
            length as f64 * 4.0 / 1e6,
            times[0],
            times[1]
        );
    }
}
