//! A user's model is never lost, and no input panics: each scenario that once
//! destroyed a checkpoint or crashed a3g, run end to end.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{
    assert_one_line_error, cartpole, copy_shipped, one_rollout_past_saved, signal, small_cartpole,
    Lines, Scratch,
};

fn spawn(scratch: &Scratch, args: &[String]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_a3g"))
        .args(args)
        .current_dir(scratch.path("."))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a3g")
}

/// Waits (up to `limit`) until `path` exists.
fn wait_for(path: &Path, limit: Duration) {
    let started = Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn copy_shipped_cartpole(scratch: &Scratch) -> Vec<u8> {
    copy_shipped(scratch, "CartPole-v1");
    std::fs::read(scratch.path("trained_models/CartPole-v1.safetensors")).unwrap()
}

/// README's CartPole example run where a trained model already is: a fresh run is
/// refused, names --load, --save-model-dir and --overwrite, and the model is kept (as
/// it is from a run resuming another folder's model, told what it resumes);
/// --overwrite replaces it on purpose.
#[test]
fn fresh_run_never_replaces_a_trained_model() {
    let scratch = Scratch::new("no-overwrite");
    let shipped = copy_shipped_cartpole(&scratch);
    let line = assert_one_line_error(&scratch.a3g_owned(&small_cartpole(&["--max-steps", "10"])));
    assert!(
        line.contains("already holds a trained model of CartPole-v1")
            && line.contains("--load")
            && line.contains("--save-model-dir")
            && line.contains("--overwrite"),
        "{line}"
    );
    assert_eq!(
        std::fs::read(scratch.path("trained_models/CartPole-v1.safetensors")).unwrap(),
        shipped
    );
    // A run that resumes another folder's model is told so, not to pass --load.
    let other =
        scratch.a3g_owned(&small_cartpole(&["--max-steps", "10", "--save-model-dir", "other"]));
    assert!(other.status.success(), "{}", other.stderr);
    let line = assert_one_line_error(&scratch.a3g_owned(&small_cartpole(&[
        "--load",
        "--load-model-dir",
        "other",
        "--max-steps",
        "100",
    ])));
    assert!(
        line.contains("already holds a trained model of CartPole-v1")
            && line.contains("this run resumes other/CartPole-v1.safetensors instead")
            && !line.contains("pass --load"),
        "{line}"
    );
    assert_eq!(
        std::fs::read(scratch.path("trained_models/CartPole-v1.safetensors")).unwrap(),
        shipped
    );

    let replaced = scratch.a3g_owned(&small_cartpole(&["--max-steps", "10", "--overwrite"]));
    assert!(replaced.status.success(), "{}", replaced.stderr);
    assert_ne!(
        std::fs::read(scratch.path("trained_models/CartPole-v1.safetensors")).unwrap(),
        shipped
    );
}

/// Hyperparameters outside their range are refused by name before anything runs
/// (they once replaced a good model with NaN weights), and nothing is written.
#[test]
fn out_of_range_hyperparameters_are_refused() {
    let scratch = Scratch::new("bad-hyperparameters");
    for (flag, value) in [
        ("--lr", "nan"),
        ("--lr", "inf"),
        ("--lr", "-1"),
        ("--lr", "0"),
        ("--lr", "1e30"),
        ("--gamma", "1.5"),
        ("--gamma", "-1"),
        ("--tau", "2"),
        ("--entropy-coef", "-0.01"),
        ("--value-coef", "nan"),
        ("--stop-at-mean", "nan"),
        ("--max-time", "1e20s"),
        ("--status-interval", "inf"),
        ("--save-interval", "-1"),
        ("--save-interval", "nan"),
        ("--test-share", "1e-300"),
        ("--max-steps", "0"),
        ("--workers", "-1"),
        ("--hidden-size", "-1"),
        ("--test-share", "-1"),
        ("--max-steps", "-5"),
        ("--sync-timeout", "0.5"),
        ("--sync-interval", "0"),
    ] {
        let result = scratch.a3g_owned(&small_cartpole(&[flag, value]));
        assert_eq!(result.status.code(), Some(2), "{flag} {value}: {}", result.stderr);
        assert!(!result.stderr.contains("panicked"), "{flag} {value}: {}", result.stderr);
        let first = result.stderr.lines().next().unwrap_or_default();
        assert!(first.starts_with("error: ") && first.contains(flag), "{flag} {value}: {first}");
    }
    assert!(!scratch.path("trained_models").exists());
}

/// A second run on a folder in use, fresh or resuming it, is refused with the first
/// run's PID, and the first run's checkpoint stays whole.
#[test]
fn two_runs_never_share_a_folder() {
    let scratch = Scratch::new("two-runs");
    // The budget only ends the run if the test fails before signalling it; it is
    // long enough that a slow start of the second run cannot outlast the first.
    let first = spawn(&scratch, &small_cartpole(&["--max-time", "120s"]));
    wait_for(&scratch.path("trained_models/.a3g.lock"), Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(500));
    // A resume of the folder is refused before it reads a set the first run may be
    // writing, even one that would find its budget spent and write nothing.
    for second in [&["--overwrite"][..], &["--load"], &["--resume", "auto"]] {
        let line = assert_one_line_error(
            &scratch.a3g_owned(&small_cartpole(&[&["--max-steps", "1"], second].concat())),
        );
        assert!(
            line.contains("trained_models is in use by another a3g run")
                && line.contains(&format!("PID {}", first.id())),
            "{second:?}: {line}"
        );
    }
    signal(&first, "INT");
    let output = first.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let budget = one_rollout_past_saved(&scratch, "CartPole-v1");
    let resumed = scratch.a3g_owned(&small_cartpole(&["--load", "--max-steps", &budget]));
    assert!(resumed.status.success(), "{}", resumed.stderr);
}

/// SIGKILL at moments spread over a run that saves often: every time, the next run
/// resumes from a whole checkpoint, and the killed run's temporaries are removed.
#[test]
fn a_kill_at_any_moment_leaves_a_whole_checkpoint() {
    let scratch = Scratch::new("sigkill");
    let first = scratch.a3g_owned(&small_cartpole(&["--max-steps", "200"]));
    assert!(first.status.success(), "{}", first.stderr);
    for delay_ms in [700, 1130, 1570, 1990, 2410, 2830] {
        let child = spawn(
            &scratch,
            &small_cartpole(&["--load", "--max-time", "20s", "--save-interval", "0"]),
        );
        std::thread::sleep(Duration::from_millis(delay_ms));
        signal(&child, "KILL");
        let _ = child.wait_with_output();
        let budget = one_rollout_past_saved(&scratch, "CartPole-v1");
        let resumed = scratch.a3g_owned(&small_cartpole(&["--load", "--max-steps", &budget]));
        assert!(resumed.status.success(), "after a kill at {delay_ms} ms: {}", resumed.stderr);
        let leftovers: Vec<String> = std::fs::read_dir(scratch.path("trained_models"))
            .unwrap()
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "after a kill at {delay_ms} ms: {leftovers:?}");
    }
}

/// --save-interval holds back the checkpoints after test games: CartPole's test agent
/// plays its games in milliseconds each, and a run killed 50 games after its first
/// checkpoint (the first test game after the first update), with an hour's interval,
/// has on disk only that checkpoint.
#[test]
fn save_interval_holds_back_checkpoints() {
    let scratch = Scratch::new("save-interval");
    let mut child =
        spawn(&scratch, &small_cartpole(&["--max-time", "60s", "--save-interval", "3600"]));
    let mut stdout = Lines::stdout(&mut child);
    let games_logged = || {
        std::fs::read_to_string(scratch.path("logs/CartPole-v1_log"))
            .map(|log| log.matches("episode reward").count() as u64)
            .unwrap_or(0)
    };
    let saved_games = || {
        let sidecar =
            std::fs::read_to_string(scratch.path("trained_models/CartPole-v1.json")).ok()?;
        let sidecar: serde_json::Value = serde_json::from_str(&sidecar).ok()?;
        sidecar["counters"]["test_games"].as_u64()
    };
    stdout.wait_for("episode reward");
    let since = Instant::now();
    let first_saved = loop {
        if let Some(games) = saved_games() {
            break games;
        }
        assert!(since.elapsed() < Duration::from_secs(30), "no checkpoint after test games");
        std::thread::sleep(Duration::from_millis(20));
    };
    while games_logged() < first_saved + 50 {
        assert!(since.elapsed() < Duration::from_secs(50), "fewer than 50 more test games");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&child, "KILL");
    let _ = child.wait();
    drop(stdout);
    assert_eq!(saved_games(), Some(first_saved), "a checkpoint within --save-interval");
}

/// --load appends to the game log: the first run's games are still there, followed by
/// a line marking where the resumed run starts.
#[test]
fn resuming_appends_to_the_game_log() {
    let scratch = Scratch::new("log-append");
    let first = scratch.a3g_owned(&small_cartpole(&["--max-steps", "300"]));
    assert!(first.status.success(), "{}", first.stderr);
    let log_path = scratch.path("logs/CartPole-v1_log");
    let before = std::fs::read_to_string(&log_path).unwrap();
    assert!(before.contains("episode reward"), "{before}");
    let resumed = scratch.a3g_owned(&small_cartpole(&["--load", "--max-steps", "600"]));
    assert!(resumed.status.success(), "{}", resumed.stderr);
    let after = std::fs::read_to_string(&log_path).unwrap();
    assert!(after.starts_with(&before), "the earlier lines were changed");
    assert!(after[before.len()..].starts_with("--- a3g train resumed here, at "), "{after}");
}

/// A closed stdout (`a3g train | head -1`) neither panics nor stops training: the run
/// goes on to its budget and writes its final checkpoint, and says so.
#[test]
fn closed_stdout_does_not_stop_training() {
    let scratch = Scratch::new("closed-pipe");
    let mut child =
        spawn(&scratch, &small_cartpole(&["--max-steps", "3000", "--status-interval", "0.1"]));
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("note: stdout was closed; training goes on"), "{stderr}");
    let sidecar = std::fs::read_to_string(scratch.path("trained_models/CartPole-v1.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&sidecar).unwrap();
    assert!(json["counters"]["agent_steps"].as_u64().unwrap() >= 3000, "{sidecar}");
}

/// A network too big for the machine's memory is refused on one line before any of
/// it is allocated.
#[test]
fn oversized_model_is_refused() {
    let scratch = Scratch::new("huge-model");
    let line =
        assert_one_line_error(&scratch.a3g_owned(&cartpole(&["--hidden-size", "4000000000"])));
    assert!(line.contains("--hidden-size 4000000000") && line.contains("smaller"), "{line}");
}

/// Folders whose names are not UTF-8 work like any other.
#[test]
fn non_utf8_folders_work() {
    let scratch = Scratch::new("non-utf8");
    let odd = OsStr::from_bytes(b"models-\xff");
    let logs = OsStr::from_bytes(b"logs-\xfe");
    let output = Command::new(env!("CARGO_BIN_EXE_a3g"))
        .args(small_cartpole(&["--max-steps", "10"]))
        .arg("--save-model-dir")
        .arg(odd)
        .arg("--log-dir")
        .arg(logs)
        .current_dir(scratch.path("."))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(scratch.path(".").join(odd).join("CartPole-v1.safetensors").exists());
    assert!(scratch.path(".").join(logs).join("CartPole-v1_log").exists());
}

/// Ctrl-C during rollouts ends the run with a checkpoint, well before its 60 s
/// budget; a second Ctrl-C quits at once, saying what is kept. Each signal goes once
/// a status line shows training under way (so a3g is catching it); how quickly a3g
/// stops is a benchmark (docs/benchmarks.md). `--num-steps 100000` does not make a
/// rollout longer than Pendulum's 200-step episode, which ends it: the signal lands
/// in a rollout most of the time, but not always, and not in a long one.
#[test]
fn ctrl_c_is_seen_mid_rollout_and_twice_quits_at_once() {
    let scratch = Scratch::new("ctrl-c");
    let long_rollouts = [
        "train",
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
        "--max-time",
        "60s",
        "--status-interval",
        "0.5",
    ]
    .map(String::from);
    let mut child = spawn(&scratch, &long_rollouts);
    let mut stdout = Lines::stdout(&mut child);
    stdout.wait_for("steps/s");
    let signalled = Instant::now();
    signal(&child, "INT");
    let output = child.wait_with_output().unwrap();
    // Half the budget: only a stop that waited for the budget can fail this, not a
    // slow machine.
    assert!(signalled.elapsed() < Duration::from_secs(30), "took {:?}", signalled.elapsed());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.all().contains("interrupted: saved"));

    // Each save pauses 3 s before its renames, so the second Ctrl-C lands while the
    // final checkpoint is being written: the worst moment to quit.
    let mut child = Command::new(env!("CARGO_BIN_EXE_a3g"))
        .args([&long_rollouts[..], &["--load".to_string()]].concat())
        .env("A3G_FAULT_SAVE_DELAY_MS", "3000")
        .current_dir(scratch.path("."))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a3g");
    let mut stdout = Lines::stdout(&mut child);
    let mut stderr = Lines::stderr(&mut child);
    stdout.wait_for("steps/s");
    signal(&child, "INT");
    // The second signal waits until a3g has taken the first: two that arrive before
    // its signal thread runs are one signal (POSIX does not queue them), and under
    // load that thread can take hundreds of milliseconds to run.
    stderr.wait_for("stopping: writing a final checkpoint");
    signal(&child, "INT");
    let status = child.wait().unwrap();
    drop(stdout);
    let stderr = stderr.all();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("quitting at once; trained_models keeps the last complete checkpoint"),
        "{stderr}"
    );
    let resumed = scratch.a3g(
        &[
            &long_rollouts[..7].iter().map(String::as_str).collect::<Vec<_>>()[..],
            &["--load", "--max-steps", &one_rollout_past_saved(&scratch, "Pendulum-v1")],
        ]
        .concat(),
    );
    assert!(resumed.status.success(), "{}", resumed.stderr);
}

/// Incomplete sets and I/O failures are each named for what they are, on one line
/// with what to do, with no Rust debug text.
#[test]
fn failures_are_named_for_what_they_are() {
    let scratch = Scratch::new("messages");
    let trained = scratch.a3g_owned(&small_cartpole(&["--max-steps", "10"]));
    assert!(trained.status.success(), "{}", trained.stderr);
    for name in ["CartPole-v1.prev.json", "CartPole-v1.prev.optimizer.safetensors"] {
        let _ = std::fs::remove_file(scratch.path("trained_models").join(name));
    }
    let sidecar = scratch.path("trained_models/CartPole-v1.json");
    let kept = std::fs::read(&sidecar).unwrap();
    std::fs::remove_file(&sidecar).unwrap();
    let line = assert_one_line_error(&scratch.a3g_owned(&small_cartpole(&["--load"])));
    assert!(
        line.contains("is incomplete") && line.contains("CartPole-v1.json is missing"),
        "{line}"
    );
    std::fs::write(&sidecar, kept).unwrap();
    std::fs::remove_file(scratch.path("trained_models/CartPole-v1.optimizer.safetensors")).unwrap();
    let line = assert_one_line_error(&scratch.a3g_owned(&small_cartpole(&["--load"])));
    assert!(line.contains("CartPole-v1.optimizer.safetensors is missing"), "{line}");

    scratch.write("a-file", "");
    let line = assert_one_line_error(&scratch.a3g_owned(&small_cartpole(&[
        "--max-steps",
        "10",
        "--save-model-dir",
        "a-file/models",
    ])));
    assert!(line.contains("a-file/models") && line.contains(';'), "{line}");
    assert!(
        !line.contains("os error") && !line.contains("Os {") && !line.contains("kind:"),
        "{line}"
    );
}

/// A checkpoint write that fails for lack of space (here a file-size limit, which
/// fails writes the way a full disk does) stops the run on one line naming the file
/// and what to do, and the checkpoint already there stays whole.
#[test]
fn a_failed_checkpoint_write_keeps_the_last_checkpoint() {
    let scratch = Scratch::new("full-disk");
    let flags = cartpole(&["--workers", "1", "--hidden-size", "256"]);
    let first =
        scratch.a3g_owned(&[&flags[..], &["--max-steps".to_string(), "50".to_string()]].concat());
    assert!(first.status.success(), "{}", first.stderr);
    let files =
        ["CartPole-v1.safetensors", "CartPole-v1.optimizer.safetensors", "CartPole-v1.json"];
    let read_all =
        || files.map(|name| std::fs::read(scratch.path("trained_models").join(name)).unwrap());
    let before = read_all();
    // The model alone is over 256 KB.
    let resumed = [
        "--load".to_string(),
        "--max-steps".to_string(),
        one_rollout_past_saved(&scratch, "CartPole-v1"),
    ];
    let run = scratch.a3g_with_file_limit(128, &[&flags[..], &resumed[..]].concat());
    let stderr = &run.stderr;
    assert!(!run.status.success(), "{stderr}");
    let error = stderr.lines().find(|line| line.starts_with("error: ")).unwrap_or_default();
    assert!(
        error.contains("cannot write trained_models/CartPole-v1")
            && error.contains("free some disk space"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(read_all(), before, "the checkpoint in place changed");
    let leftovers = std::fs::read_dir(scratch.path("trained_models"))
        .unwrap()
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().contains(".tmp"))
        .count();
    assert_eq!(leftovers, 0);
}
