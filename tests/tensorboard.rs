//! `a3g train --tensorboard-logger`: the event files read back in TensorBoard's own
//! loader (Python's tensorboard package, which scripts/test installs into .deps/).

use std::path::Path;
use std::process::Command;

use crate::util::{assert_one_line_error, cartpole, sidecar_json, small_cartpole, Scratch};

/// A small CartPole run's flags (lr 0.003, 4,000 agent steps) that write TensorBoard
/// event files, with `extra` after them.
fn small_board_run(extra: &[&str]) -> Vec<String> {
    let board = ["--lr", "0.003", "--max-steps", "4000", "--tensorboard-logger"];
    small_cartpole(&[&board, extra].concat())
}

/// What TensorBoard's own loader reads back from the run in `scratch`: its scalars and
/// histograms, as scripts/read_tensorboard.py prints them.
fn read_board(scratch: &Scratch) -> serde_json::Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let reader_path = root.join(".deps/tensorboard");
    assert!(
        reader_path.join("tensorboard").is_dir(),
        "Python's tensorboard package is missing from {}; ./scripts/test installs it",
        reader_path.display()
    );
    let output = Command::new("python3")
        .arg(root.join("scripts/read_tensorboard.py"))
        .arg(scratch.path("runs/CartPole-v1_training"))
        .env("PYTHONPATH", &reader_path)
        .output()
        .expect("run python3");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

/// A short CartPole run's event files hold the test games (the same scores as the
/// game log, indexed by agent steps), training rates and losses, the learning rate,
/// and a histogram of every parameter per test game.
#[test]
fn event_files_read_back_in_tensorboard() {
    let scratch = Scratch::new("tensorboard");
    let run = scratch.a3g_owned(&small_board_run(&["--status-interval", "0.2"]));
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.stdout.contains("TensorBoard event files are in runs/CartPole-v1_training"));
    let found = read_board(&scratch);
    let scalars = &found["scalars"];

    let logged: Vec<f64> = std::fs::read_to_string(scratch.path("logs/CartPole-v1_log"))
        .unwrap()
        .lines()
        .filter_map(|line| line.split("episode reward ").nth(1))
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .collect();
    let rewards: Vec<f64> = scalars["test/episode_reward"]
        .as_array()
        .expect("test/episode_reward")
        .iter()
        .map(|point| point[1].as_f64().unwrap())
        .collect();
    assert!(!rewards.is_empty());
    assert_eq!(rewards, logged, "the board's scores are the log's");
    let steps: Vec<u64> = scalars["test/episode_reward"]
        .as_array()
        .unwrap()
        .iter()
        .map(|point| point[0].as_u64().unwrap())
        .collect();
    // One worker stops at the step that spends the budget, whatever the monitor is
    // doing then (a checkpoint's sync on a slow disk once let it run 100+ steps past).
    assert!(steps.windows(2).all(|pair| pair[0] <= pair[1]) && *steps.last().unwrap() <= 4000);
    for tag in [
        "test/episode_length",
        "test/reward_mean",
        "train/agent_steps_per_second",
        "train/frames_per_second",
        "train/policy_loss",
        "train/value_loss",
        "train/entropy",
        "train/learning_rate",
    ] {
        assert!(scalars[tag].as_array().is_some_and(|points| !points.is_empty()), "no {tag}");
    }
    let learning_rate = scalars["train/learning_rate"][0][1].as_f64().unwrap();
    assert!((learning_rate - 0.003).abs() < 1e-9);
    let histograms = &found["histograms"];
    for (name, count) in [("fc1.weight", 64), ("fc2.weight", 256), ("actor_linear.bias", 2)] {
        let histogram = &histograms[format!("parameters/{name}")];
        assert_eq!(histogram["events"].as_u64(), Some(rewards.len() as u64), "{name}");
        assert_eq!(histogram["last_count"].as_f64(), Some(count as f64), "{name}");
    }
}

/// With --lr-anneal the board's learning rate falls linearly from --lr toward 0 at
/// --max-steps, point by point at its agent steps, and the checkpoint records where it
/// ends; with neither --max-steps nor --max-time the flag is refused on one line.
#[test]
fn annealed_learning_rate_falls_to_zero_at_the_budget() {
    let scratch = Scratch::new("tensorboard-anneal");
    let line = assert_one_line_error(&scratch.a3g_owned(&cartpole(&["--lr-anneal"])));
    assert!(line.contains("--lr-anneal needs a budget") && line.contains("--max-time"), "{line}");
    let (initial, budget) = (0.003, 4000.0);
    let run = scratch.a3g_owned(&small_board_run(&["--status-interval", "0.1", "--lr-anneal"]));
    assert!(run.status.success(), "{}", run.stderr);
    let points = learning_rates(&scratch);
    assert!(points.len() >= 3, "{points:?}");
    // The rate is read a moment before the point's step count, while the one worker
    // may play a few more steps.
    for &(steps, rate) in &points {
        let expected = initial * (1.0 - steps / budget).max(0.0);
        assert!((rate - expected).abs() <= initial * 20.0 / budget, "{points:?}");
    }
    assert!(points.windows(2).all(|pair| pair[1].1 <= pair[0].1), "{points:?}");
    assert!(points.last().unwrap().1 < initial / 2.0, "{points:?}");
    let recorded = &sidecar_json(&scratch, "CartPole-v1")["trained_with"];
    assert_eq!(recorded["lr_anneal_steps"], serde_json::json!(4000), "{recorded}");
}

/// Without --max-steps, --lr-anneal spends the rate over --max-time: it falls from
/// about --lr at the first point to near 0 at the last, a tenth of a second before the
/// run stops, and the checkpoint records the seconds; a resumed run is told that its
/// rate starts again.
#[test]
fn annealed_learning_rate_falls_to_zero_at_the_time_limit() {
    let scratch = Scratch::new("tensorboard-anneal-time");
    let initial = 0.003;
    let run = scratch.a3g_owned(&small_cartpole(&[
        "--lr",
        "0.003",
        "--lr-anneal",
        "--max-time",
        "3s",
        "--tensorboard-logger",
        "--status-interval",
        "0.1",
    ]));
    assert!(run.status.success(), "{}", run.stderr);
    let points = learning_rates(&scratch);
    assert!(points.len() >= 10, "{points:?}");
    assert!(points.windows(2).all(|pair| pair[1].1 <= pair[0].1), "{points:?}");
    assert!(points[0].1 > initial * 0.8, "{points:?}");
    assert!(points.last().unwrap().1 < initial * 0.15, "{points:?}");
    let recorded = &sidecar_json(&scratch, "CartPole-v1")["trained_with"];
    assert_eq!(recorded["lr_anneal_seconds"], serde_json::json!(3.0), "{recorded}");
    assert!(recorded.get("lr_anneal_steps").is_none(), "{recorded}");

    // Resumed, the rate starts again, and the run says so.
    let resumed =
        scratch.a3g_owned(&small_cartpole(&["--load", "--lr-anneal", "--max-time", "1s"]));
    assert!(resumed.status.success(), "{}", resumed.stderr);
    assert!(
        resumed.stderr.contains("--lr-anneal over --max-time starts again from --lr"),
        "{}",
        resumed.stderr
    );
}

/// The board's learning rates, as (agent steps, rate) pairs.
fn learning_rates(scratch: &Scratch) -> Vec<(f64, f64)> {
    read_board(scratch)["scalars"]["train/learning_rate"]
        .as_array()
        .expect("train/learning_rate")
        .iter()
        .map(|point| (point[0].as_f64().unwrap(), point[1].as_f64().unwrap()))
        .collect()
}

/// A TensorBoard folder that cannot be written is one line naming it.
#[test]
fn unwritable_tensorboard_dir_is_one_line() {
    let scratch = Scratch::new("tensorboard-bad");
    scratch.write("runs", "a file where the folder should be");
    let line = assert_one_line_error(&scratch.a3g_owned(&cartpole(&[
        "--max-steps",
        "10",
        "--tensorboard-logger",
    ])));
    assert!(line.contains("TensorBoard folder") && line.contains("runs"), "{line}");
}

/// A disk that fills mid-run stops TensorBoard, not training: with the event file
/// taking only its first 100 bytes (A3G_FAULT_TENSORBOARD_AFTER_BYTES, then "no space
/// left on device"), the run ends normally with its checkpoint, after one warning
/// line that names the folder and says what to do, and its last word on the board
/// says the files were cut short.
#[test]
fn full_disk_stops_tensorboard_not_training() {
    let scratch = Scratch::new("tensorboard-full");
    let run = scratch.a3g_with_env(
        &cartpole(&[
            "--workers",
            "1",
            "--max-steps",
            "3000",
            "--status-interval",
            "0.2",
            "--tensorboard-logger",
        ]),
        &[("A3G_FAULT_TENSORBOARD_AFTER_BYTES", "100")],
    );
    assert!(run.status.success(), "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    let warnings: Vec<&str> =
        run.stderr.lines().filter(|line| line.contains("TensorBoard")).collect();
    assert_eq!(warnings.len(), 1, "one warning: {}", run.stderr);
    assert!(
        warnings[0].starts_with(
            "warning: TensorBoard stopped: cannot write runs/CartPole-v1_training: no space left on device"
        ) && warnings[0].ends_with("free disk space and restart with --load to resume it"),
        "{}",
        warnings[0]
    );
    assert!(run.stdout.contains("reached --max-steps"), "{}", run.stdout);
    assert!(
        run.stdout.contains(
            "TensorBoard event files are in runs/CartPole-v1_training, cut short where its writes failed"
        ),
        "{}",
        run.stdout
    );
    assert!(scratch.path("trained_models/CartPole-v1.safetensors").is_file());
    let events: Vec<_> = std::fs::read_dir(scratch.path("runs/CartPole-v1_training"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    let size = std::fs::metadata(&events[0]).unwrap().len();
    assert_eq!(size, 100, "writes went on until the disk was full, then stopped");
}
