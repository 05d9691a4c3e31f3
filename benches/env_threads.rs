//! Benchmark: agent steps/s of PongDeterministic-v4 through the full wrapper stack on
//! several threads at once, each with its own emulator, as GA3C's agents step theirs.
//! What a trainer's agent steps/s is held against: the same machine doing nothing but
//! the environment.
//!
//! Run: `cargo bench --bench env_threads -- THREADS SECONDS [gray80|mean42|mean84|max42]`
//! (defaults: one thread per core, 20 s, mean42: the universe network's screen).
//! Prints one line: threads, screen, the summed agent steps/s and the per-thread spread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use a3g::env::{self, Action, EnvOptions, Screen};

/// Steps before the clock starts, so every emulator is past its reset.
const WARM_UP_STEPS: u64 = 200;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|arg| arg != "--bench").collect();
    let threads: usize = match args.first() {
        Some(count) => count.parse().expect("THREADS: a whole number"),
        None => std::thread::available_parallelism().map_or(1, |cores| cores.get()),
    };
    let seconds: f64 = args.get(1).map_or(20.0, |s| s.parse().expect("SECONDS: a number"));
    let screen = match args.get(2).map(String::as_str) {
        None | Some("mean42") => Screen::Mean42,
        Some("gray80") => Screen::Gray80,
        Some("mean84") => Screen::Mean84,
        Some("max42") => Screen::Max42,
        Some(other) => panic!("unknown screen {other}: gray80, mean42, mean84 or max42"),
    };

    let stop = Arc::new(AtomicBool::new(false));
    // Every thread warms up before any starts its clock, so that all count the same
    // stretch of time and the summed rates hold for the machine as a whole.
    let warmed_up = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            let (stop, warmed_up) = (Arc::clone(&stop), Arc::clone(&warmed_up));
            std::thread::spawn(move || {
                let options =
                    EnvOptions { seed: 1 + thread as u64, screen, ..EnvOptions::default() };
                let mut stack = env::make("PongDeterministic-v4", &options).expect("make Pong");
                stack.reset(None).unwrap();
                // A cheap deterministic action sequence that keeps the game moving;
                // the spread of actions, not a policy, is what the emulator sees.
                let mut step = |count: u64| {
                    let action = Action::Discrete([0, 2, 3][(count / 8 % 3) as usize]);
                    if stack.step(&action).unwrap().done() {
                        stack.reset(None).unwrap();
                    }
                };
                for count in 0..WARM_UP_STEPS {
                    step(count);
                }
                warmed_up.wait();
                let start = Instant::now();
                let mut steps = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    step(steps);
                    steps += 1;
                }
                steps as f64 / start.elapsed().as_secs_f64()
            })
        })
        .collect();
    warmed_up.wait();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let rates: Vec<f64> =
        handles.into_iter().map(|h| h.join().expect("a stepping thread")).collect();
    let total: f64 = rates.iter().sum();
    let (low, high) = rates.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    println!(
        "{threads} threads, {screen:?}: {total:.0} agent steps/s in all ({low:.0}-{high:.0} per thread)"
    );
}
