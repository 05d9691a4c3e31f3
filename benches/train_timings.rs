//! Benchmark: the wall-clock figures the integration tests no longer assert, measured
//! by running the built binary as a user would. How long two workers take to learn
//! CartPole-v1 to a 100-game mean of 475 (the learning test's command, which now has a
//! step budget instead of a time limit), and how long a training run takes to see
//! Ctrl-C and to exit with its final checkpoint.
//!
//! Run: `cargo bench --locked --bench train_timings [-- RUNS]` (after the set-up of
//! `./scripts/test`; RUNS defaults to 3 CartPole runs and 5 signals per
//! configuration); the figures go to docs/benchmarks.md.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const A3G: &str = env!("CARGO_BIN_EXE_a3g");

/// A fresh, empty working folder for one run.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("a3g-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch folder");
    dir
}

/// The learning test's command (tests/learning.rs, cartpole_learns_to_475): wall time
/// from start to exit, and the agent steps at the stop.
fn cartpole_to_475(dir: &Path) -> (Duration, u64) {
    let started = Instant::now();
    let output = Command::new(A3G)
        .args(["train", "--env", "CartPole-v1", "--workers", "2", "--seed", "1"])
        .args(["--hidden-size", "64", "--lr", "1e-3", "--max-steps", "1000000"])
        .args(["--stop-at-mean", "475", "--status-interval", "60"])
        .current_dir(dir)
        .output()
        .expect("start a3g");
    let wall = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("reached --stop-at-mean"), "did not reach 475: {last}");
    let steps = last
        .split(" after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|steps| steps.parse().ok())
        .expect("agent steps in the last line");
    (wall, steps)
}

/// Lines of a stream as they come, each with the moment it was read.
fn timed_lines(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<(Instant, String)> {
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if sender.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    lines
}

/// Starts `args` in `dir`, sends SIGINT once the first status line shows training
/// under way, and returns how long a3g took to say it is stopping (the signal seen)
/// and to exit. The clock starts just before `kill` is started, so both include its
/// start-up, a millisecond or two.
fn ctrl_c_latency(dir: &Path, args: &[&str]) -> (Duration, Duration) {
    let mut child = Command::new(A3G)
        .args(args)
        .args(["--status-interval", "0.5"])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a3g");
    let stdout = timed_lines(child.stdout.take().unwrap());
    let stderr = timed_lines(child.stderr.take().unwrap());
    while !stdout.recv().expect("a status line").1.contains("steps/s") {}
    let signalled = Instant::now();
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    assert!(kill.expect("run kill").success());
    let (seen, _) = stderr
        .iter()
        .find(|(_, line)| line.starts_with("stopping:"))
        .expect("a3g says it is stopping");
    let status = child.wait().expect("wait for a3g");
    let exited = Instant::now();
    assert!(status.success(), "a3g exited with {status}");
    let _ = std::fs::remove_dir_all(dir.join("trained_models"));
    (seen - signalled, exited - signalled)
}

fn milliseconds(durations: &[Duration]) -> String {
    let values: Vec<String> =
        durations.iter().map(|d| format!("{:.0}", d.as_secs_f64() * 1e3)).collect();
    values.join(", ")
}

fn main() {
    // `cargo bench` passes --bench; a bare number is the run count.
    let runs: usize = std::env::args().skip(1).find_map(|arg| arg.parse().ok()).unwrap_or(3).max(1);

    println!("CartPole-v1 to a 100-game mean of 475, 2 workers, seed 1 ({runs} runs):");
    for run in 1..=runs {
        let dir = scratch("cartpole");
        let (wall, steps) = cartpole_to_475(&dir);
        println!("  run {run}: {:.1} s wall, {steps} agent steps", wall.as_secs_f64());
        let _ = std::fs::remove_dir_all(&dir);
    }

    let signals = runs.max(5);
    let configurations: [(&str, &[&str]); 3] = [
        (
            "CartPole-v1, 2 workers, hidden 16 (as in tests/train.rs)",
            &["--env", "CartPole-v1", "--workers", "2", "--hidden-size", "16"],
        ),
        (
            "Pendulum-v1, 1 worker, hidden 16, --num-steps 100000 (as in tests/safety.rs)",
            &[
                "--env",
                "Pendulum-v1",
                "--workers",
                "1",
                "--hidden-size",
                "16",
                "--num-steps",
                "100000",
                "--max-episode-length",
                "100000000",
            ],
        ),
        (
            "PongDeterministic-v4, 2 workers, the reference model",
            &["--env", "PongDeterministic-v4", "--workers", "2"],
        ),
    ];
    for (name, flags) in configurations {
        let dir = scratch("ctrl-c");
        let args = [&["train", "--max-time", "60s"], flags].concat();
        let (seen, exited): (Vec<_>, Vec<_>) =
            (0..signals).map(|_| ctrl_c_latency(&dir, &args)).unzip();
        println!("Ctrl-C, {name} ({signals} runs), milliseconds from the signal:");
        println!("  to \"stopping:\" on stderr: {}", milliseconds(&seen));
        println!("  to exit with the final checkpoint: {}", milliseconds(&exited));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
