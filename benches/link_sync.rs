//! Benchmark: one rank's whole sync (the gather of the stop codes, counters and digest,
//! then the all-reduce of the model's changes) for each network, as a3g makes it, over
//! whatever network joins the ranks. One process is one rank, from a launcher's
//! variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so that each rank can live in
//! a network namespace of its own: benches/netns_links.sh starts them over emulated
//! links and compares rank 0's lines with the paper model in docs/distributed.md.
//!
//! Rank 0 prints one line a network, its syncs back to back:
//! `sync network=<name> parameters=<count> median_ms=<ms> min_ms=<ms>`.

use std::time::{Duration, Instant};

use a3g::distributed::c10d::{Group, BUILT_IN};
use a3g::distributed::Launch;
use a3g::env::ActionSpace;
use a3g::model::{Body, ModelSpec};

const WARM_UP: usize = 5;
const SYNCS: usize = 25;

/// This rank's median and least milliseconds of a whole sync over `length` floats.
fn sync_ms(group: &mut Group, length: usize) -> (f64, f64) {
    let mut changes = vec![0.5f32; length];
    let mut times = Vec::new();
    for sync in 0..WARM_UP + SYNCS {
        let started = Instant::now();
        group.all_gather_many(&[0, 1, 2, 3, 7]).expect("the counters and digest");
        group.all_reduce_sum(&mut changes).expect("the sum");
        if sync >= WARM_UP {
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
        // Keeps the sums finite however many syncs run.
        changes.iter_mut().for_each(|change| *change *= 0.5);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[0])
}

fn main() {
    if !BUILT_IN {
        eprintln!("this build has no c10d (set-up found no gloo headers); see docs/distributed.md");
        std::process::exit(1);
    }
    let launch = match Launch::from_env(|name| std::env::var(name).ok()) {
        Ok(Some(launch)) => launch,
        Ok(None) => {
            eprintln!("no rank to play; set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
            std::process::exit(2);
        }
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::exit(2);
        }
    };
    let pong = ActionSpace::Discrete { n: 6 };
    let networks = [
        (
            "cartpole",
            ModelSpec::with_body(
                Body::Mlp { inputs: 4, lstm: false, input_norm: None },
                &ActionSpace::Discrete { n: 2 },
                64,
            ),
        ),
        ("universe", ModelSpec::with_body(Body::Universe, &pong, 256)),
        ("reference", ModelSpec::with_body(Body::AtariLstm, &pong, 512)),
    ];
    let mut group = match Group::join(&launch, Duration::from_secs(60)) {
        Ok(group) => group,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::exit(1);
        }
    };
    for (name, spec) in &networks {
        let parameters = spec.parameter_count() as usize;
        let (median, least) = sync_ms(&mut group, parameters);
        if launch.rank == 0 {
            println!("sync network={name} parameters={parameters} median_ms={median:.3} min_ms={least:.3}");
        }
    }
}
