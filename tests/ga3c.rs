//! `a3g train --trainer ga3c` end to end: its checkpoints evaluate and resume with
//! either trainer, and its flags are checked. That it learns what A3C learns is
//! tested in tests/learning.rs.

use crate::util::{assert_one_line_error, cartpole, saved_agent_steps, small_cartpole, Scratch};

/// A short GA3C Atari run (--model universe) writes a checkpoint that `a3g eval`
/// plays, that A3C resumes, and that GA3C resumes from A3C's, counters carried on.
#[test]
fn ga3c_checkpoint_evaluates_and_resumes_with_either_trainer() {
    let scratch = Scratch::new("ga3c-atari");
    let common = [
        "train",
        "--env",
        "PongDeterministic-v4",
        "--model",
        "universe",
        "--hidden-size",
        "32",
        "--workers",
        "4",
    ];
    let run = scratch.a3g(&[&common[..], &["--trainer", "ga3c", "--max-steps", "300"]].concat());
    assert!(run.status.success(), "{}", run.stderr);
    let sidecar = scratch.path("trained_models/PongDeterministic-v4.json");
    let steps = saved_agent_steps(&sidecar);
    assert!(steps >= 300, "{steps}");

    let run = scratch.a3g(&[
        "eval",
        "--env",
        "PongDeterministic-v4",
        "--num-episodes",
        "1",
        "--max-episode-length",
        "50",
        "--json",
    ]);
    assert!(run.status.success(), "{}", run.stderr);
    let summary: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("JSON");
    assert_eq!(summary["episodes"], 1);

    for trainer in ["a3c", "ga3c"] {
        let before = saved_agent_steps(&sidecar);
        let budget = (before + 200).to_string();
        let run = scratch.a3g(
            &[&common[..], &["--trainer", trainer, "--load", "--max-steps", &budget]].concat(),
        );
        assert!(run.status.success(), "{trainer}: {}", run.stderr);
        assert!(
            run.stdout.contains(&format!("at {before} agent steps")),
            "{trainer}: {}",
            run.stdout
        );
        assert!(saved_agent_steps(&sidecar) >= before + 200, "{trainer}");
    }
}

/// GA3C's flags are checked before anything starts, each on one line.
#[test]
fn bad_ga3c_flags_are_one_line() {
    let scratch = Scratch::new("ga3c-bad");
    let ga3c = ["--trainer", "ga3c"];
    let line = assert_one_line_error(&scratch.a3g_owned(&cartpole(
        &[&ga3c[..], &["--predict-batch", "4", "--predict-min-batch", "8"]].concat(),
    )));
    assert!(line.contains("--predict-min-batch 8 is above --predict-batch 4"), "{line}");
    let line = assert_one_line_error(
        &scratch
            .a3g_owned(&cartpole(&[&ga3c[..], &["--distributed-step-size", "5", "10"]].concat())),
    );
    assert!(line.contains("--distributed-step-size is A3C's"), "{line}");
    // Ranges and names are clap's to check: its report's first line names the flag.
    for flags in [&["--predictors", "0"][..], &["--trainer", "ga4c"]] {
        let run = scratch.a3g_owned(&cartpole(flags));
        assert!(!run.status.success());
        let first = run.stderr.lines().next().unwrap_or_default();
        assert!(first.contains(flags[0]) && first.contains(flags[1]), "{}", run.stderr);
    }
    assert!(!scratch.path("trained_models").exists(), "nothing written before the checks");
}

/// --autotune changes the thread counts while training goes on: with one-second
/// windows, its trials and decisions show on stdout and in the game log, and the run
/// ends cleanly at --max-time. (Which counts it keeps is the tuner's unit tests'.)
#[test]
fn ga3c_autotune_changes_counts_while_training() {
    let scratch = Scratch::new("ga3c-autotune");
    let run = scratch.a3g_owned(&cartpole(&[
        "--trainer",
        "ga3c",
        "--autotune",
        "--workers",
        "4",
        "--hidden-size",
        "16",
        "--autotune-window",
        "1",
        "--max-time",
        "8s",
        "--status-interval",
        "1",
    ]));
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.stdout.contains("reached --max-time"), "{}", run.stdout);
    let trials: Vec<&str> =
        run.stdout.lines().filter(|line| line.starts_with("autotune: ")).collect();
    assert!(trials.len() >= 2, "{}", run.stdout);
    assert!(trials[0].contains("4 agents, 1 predictor, 1 trainer give"), "{}", trials[0]);
    assert!(trials[1].contains("kept") || trials[1].contains("back to"), "{}", trials[1]);
    let log = std::fs::read_to_string(scratch.path("logs/CartPole-v1_log")).expect("log");
    assert!(log.contains(trials[0]), "the tuner's lines are logged");
}

/// After --load, the first status line's trainings/s counts from the resumed update
/// count, as updates/s does: it once showed every update of the earlier run as this
/// interval's (1109.1 trainings/s beside 19.9 updates/s).
#[test]
fn resumed_ga3c_rates_count_from_the_resume() {
    let scratch = Scratch::new("ga3c-resume-rates");
    let ga3c = ["--trainer", "ga3c", "--workers", "2"];
    let small = ["--hidden-size", "16", "--status-interval", "1"];
    let run =
        scratch.a3g_owned(&cartpole(&[&ga3c[..], &small[..], &["--max-steps", "20000"]].concat()));
    assert!(run.status.success(), "{}", run.stderr);
    let resumed = scratch
        .a3g_owned(&cartpole(&[&ga3c[..], &small[..], &["--load", "--max-time", "2s"]].concat()));
    assert!(resumed.status.success(), "{}", resumed.stderr);
    let status = resumed.stdout.lines().find(|line| line.starts_with('[')).expect("a status line");
    let rate = |unit: &str| -> f64 {
        let before = status.split(unit).next().unwrap_or_default();
        before.rsplit(' ').next().and_then(|number| number.parse().ok()).unwrap_or(f64::NAN)
    };
    let (updates, trainings) = (rate(" updates/s"), rate(" trainings/s"));
    assert!((trainings - updates).abs() <= 0.1 * updates + 2.0, "{status}");
}

/// `--precision bf16` is GA3C's: asked of A3C, whose passes are batch-1 where bf16 is
/// slower, it is refused on one line before anything is written; a precision a3g
/// does not have is refused by the parser.
#[test]
fn bf16_is_refused_for_a3c() {
    let scratch = Scratch::new("a3c-bf16");
    let line = assert_one_line_error(&scratch.a3g_owned(&small_cartpole(&["--precision", "bf16"])));
    assert!(line.contains("--precision bf16") && line.contains("--trainer ga3c"), "{line}");
    assert!(!scratch.path("trained_models").exists());
    let run = scratch.a3g_owned(&small_cartpole(&["--trainer", "ga3c", "--precision", "fp16"]));
    assert_eq!(run.status.code(), Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("fp16"), "{}", run.stderr);
}
