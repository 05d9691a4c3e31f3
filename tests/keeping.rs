//! Never lose a model, rounds two and three: what a hostile user's probes found,
//! each run end to end: --save-max across resumes (its set consistent), --stop-at-mean's
//! saved weights, resumed dimensions and counters, every shipped model resumed without
//! its model flags, a sidecar's damaged record, a failing game log, and counts and
//! shares too big for the machine.

use crate::util::{
    assert_one_line_error, cartpole, copy_shipped, edit_sidecar, saved_agent_steps, sidecar_json,
    small_cartpole, Scratch,
};

/// A resumed --save-max run none of whose games matches the recorded best keeps the
/// best set it started from: the model and optimizer files are unchanged and its
/// sidecar still records that best and the counters it had (the best is raised beyond CartPole's 500, and the resumed run
/// trains at --lr 1, so nothing it plays can match it). It used to save its latest
/// weights over them.
#[test]
fn save_max_keeps_the_best_weights_across_a_resume() {
    let scratch = Scratch::new("save-max-resume");
    let run = scratch.a3g_owned(&small_cartpole(&["--save-max", "--max-steps", "2000"]));
    assert!(run.status.success(), "{}", run.stderr);
    edit_sidecar(&scratch, "CartPole-v1", |json| json["best_score"] = serde_json::json!(501.0));
    let model = scratch.path("trained_models/CartPole-v1.safetensors");
    let best = std::fs::read(&model).unwrap();
    let optimizer = scratch.path("trained_models/CartPole-v1.optimizer.safetensors");
    let statistics = std::fs::read(&optimizer).unwrap();
    let counters = sidecar_json(&scratch, "CartPole-v1")["counters"].clone();
    let resumed = scratch.a3g_owned(&small_cartpole(&[
        "--load",
        "--save-max",
        "--lr",
        "1",
        "--max-steps",
        "6000",
    ]));
    assert!(resumed.status.success(), "{}", resumed.stderr);
    assert!(
        resumed.stdout.contains("holds the best test game's weights (score 501)"),
        "{}",
        resumed.stdout
    );
    assert_eq!(std::fs::read(&model).unwrap(), best, "the best weights were replaced");
    let sidecar = sidecar_json(&scratch, "CartPole-v1");
    assert_eq!(sidecar["best_score"], 501.0);
    // The set stays whole: the best weights with the counters and optimizer
    // statistics of their own time, not the resumed run's end.
    assert_eq!(sidecar["counters"], counters, "the counters moved to the resumed run's end");
    assert_eq!(std::fs::read(&optimizer).unwrap(), statistics, "the statistics were replaced");
}

/// --stop-at-mean stops only on weights that met the target over --confirm-games
/// more games of their own, and says so; the last lines of the log are those games.
#[test]
fn stop_at_mean_confirms_the_weights_it_saves() {
    let scratch = Scratch::new("stop-confirmed");
    let run = scratch.a3g_owned(&small_cartpole(&[
        "--stop-at-mean",
        "9",
        "--confirm-games",
        "4",
        "--max-steps",
        "500000",
    ]));
    assert!(run.status.success(), "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let confirmed = lines
        .iter()
        .position(|line| line.starts_with("confirmed: the weights scored a mean of "))
        .unwrap_or_else(|| panic!("no confirmation: {}", run.stdout));
    let mean: f64 = lines[confirmed]["confirmed: the weights scored a mean of ".len()..]
        .split(' ')
        .next()
        .and_then(|mean| mean.parse().ok())
        .unwrap();
    assert!(mean >= 9.0, "{}", lines[confirmed]);
    assert!(lines[confirmed].contains("over 4 games"));
    let asked = lines[..confirmed]
        .iter()
        .rposition(|line| line.contains("now play 4 more games to confirm it"))
        .expect("the confirmation was announced");
    let games = lines[asked..confirmed].iter().filter(|line| line.starts_with("Time ")).count();
    assert!(games >= 4, "{games} games between the announcement and the confirmation");
    assert!(run.stdout.contains("reached --stop-at-mean: saved the confirmed weights"));
}

/// --load takes the model's dimensions from the checkpoint (trained here with
/// --hidden-size 64, not the default 512) and refuses a flag that contradicts them.
#[test]
fn a_resumed_run_takes_the_checkpoints_dimensions() {
    let scratch = Scratch::new("resume-dimensions");
    let train = ["--workers", "1"];
    let run = scratch.a3g_owned(&cartpole(
        &[&train[..], &["--hidden-size", "64", "--max-steps", "300"]].concat(),
    ));
    assert!(run.status.success(), "{}", run.stderr);
    let resumed =
        scratch.a3g_owned(&cartpole(&[&train[..], &["--load", "--max-steps", "600"]].concat()));
    assert!(resumed.status.success(), "{}", resumed.stderr);
    assert!(saved_agent_steps(&scratch.path("trained_models/CartPole-v1.json")) >= 600);
    let line = assert_one_line_error(
        &scratch.a3g_owned(&cartpole(&[&train[..], &["--load", "--hidden-size", "32"]].concat())),
    );
    assert!(line.contains("--hidden-size 32") && line.contains("hidden size of 64"), "{line}");
    let line = assert_one_line_error(
        &scratch.a3g_owned(&cartpole(&[&train[..], &["--load", "--lstm"]].concat())),
    );
    assert!(line.contains("--lstm") && line.contains("no LSTM cell"), "{line}");
}

/// `train --load` resumes every shipped model with no model flag: the network, its
/// hidden size, LSTM, head and input scaling come from the checkpoint (the universe
/// networks of Pong and Breakout, the latter under GA3C though A3C trained it), and a
/// --model that contradicts it is refused naming both.
#[test]
fn every_shipped_model_resumes_without_its_model_flags() {
    for (env, trainer) in [
        ("CartPole-v1", "a3c"),
        ("Pendulum-v1", "a3c"),
        ("PongDeterministic-v4", "a3c"),
        ("BreakoutDeterministic-v4", "ga3c"),
        ("LunarLander-v3", "a3c"),
        ("BipedalWalker-v3", "a3c"),
    ] {
        let scratch = Scratch::new("resume-shipped");
        copy_shipped(&scratch, env);
        let sidecar = scratch.path(&format!("trained_models/{env}.json"));
        let shipped_steps = saved_agent_steps(&sidecar);
        let budget = (shipped_steps + 200).to_string();
        let train = ["train", "--env", env, "--load", "--workers", "1", "--trainer", trainer];
        let run = scratch.a3g(&[&train[..], &["--max-steps", &budget]].concat());
        assert!(run.status.success(), "{env}: {}", run.stderr);
        assert!(saved_agent_steps(&sidecar) >= shipped_steps + 200, "{env}: {}", run.stdout);
        if env == "PongDeterministic-v4" {
            let line = assert_one_line_error(
                &scratch.a3g(&[&train[..], &["--model", "a3clstm"]].concat()),
            );
            assert!(
                line.contains("--model a3clstm") && line.contains("a universe model"),
                "{line}"
            );
        }
    }
}

/// A sidecar whose recorded crop rows are impossible is refused as the damaged
/// record of a checkpoint, by eval and by --load alike, before any rows are played.
#[test]
fn a_sidecar_with_impossible_crop_rows_is_named_as_damaged() {
    let scratch = Scratch::new("damaged-crop");
    // The reference network's screen is the one whose crop rows a sidecar records.
    let pong = ["--env", "PongDeterministic-v4", "--hidden-size", "32", "--workers", "1"];
    let run = scratch.a3g(&[&["train"][..], &pong[..], &["--max-steps", "20"]].concat());
    assert!(run.status.success(), "{}", run.stderr);
    edit_sidecar(&scratch, "PongDeterministic-v4", |json| {
        json["trained_with"]["crop"] = serde_json::json!({"crop1": 300, "crop2": 0});
    });
    let eval = ["eval", "--env", "PongDeterministic-v4", "--load-model-dir", "trained_models"];
    let train = [&["train"][..], &pong[..], &["--load", "--max-steps", "40"]].concat();
    for command in [&eval[..], &train[..]] {
        let line = assert_one_line_error(&scratch.a3g(command));
        assert!(
            line.contains("trained_models/PongDeterministic-v4.json")
                && line.contains("crop rows it records")
                && line.contains("crop1 300"),
            "{line}"
        );
        assert!(!line.contains("crop file") && !line.contains("Default"), "{line}");
    }
}

/// A sidecar that leads to a device (a symlink to /dev/zero), which was read without
/// end, is named as unreadable at once: eval falls back to the previous checkpoint as
/// for any damaged sidecar, and without one it is one error line; so is a model file
/// that leads to a device.
#[test]
fn a_sidecar_that_is_a_device_is_refused() {
    let scratch = Scratch::new("device-sidecar");
    let run = scratch.a3g_owned(&small_cartpole(&["--max-steps", "200"]));
    assert!(run.status.success(), "{}", run.stderr);
    let sidecar = scratch.path("trained_models/CartPole-v1.json");
    std::fs::remove_file(&sidecar).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &sidecar).unwrap();
    let eval = || {
        let run = std::process::Command::new("timeout")
            .args(["60", env!("CARGO_BIN_EXE_a3g"), "eval", "--env", "CartPole-v1"])
            .args(["--load-model-dir", "trained_models", "--num-episodes", "1"])
            .current_dir(scratch.path("."))
            .output()
            .expect("run a3g under timeout");
        assert_ne!(run.status.code(), Some(124), "eval was still reading after a minute");
        crate::util::Run::from(run)
    };
    let fallback = eval();
    assert!(fallback.status.success(), "{}", fallback.stderr);
    assert!(
        fallback.stderr.contains("CartPole-v1.json: it is a device, not a file")
            && fallback.stderr.contains("previous complete checkpoint"),
        "{}",
        fallback.stderr
    );
    for entry in std::fs::read_dir(scratch.path("trained_models")).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().contains(".prev.") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let line = assert_one_line_error(&eval());
    assert!(line.contains("CartPole-v1.json") && line.contains("a device, not a file"), "{line}");
    // A model file that is a device is named as one, not as a missing model.
    std::fs::remove_file(&sidecar).unwrap();
    let model = scratch.path("trained_models/CartPole-v1.safetensors");
    std::fs::remove_file(&model).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &model).unwrap();
    let line = assert_one_line_error(&eval());
    assert!(
        line.contains("CartPole-v1.safetensors") && line.contains("a device, not a file"),
        "{line}"
    );
}

/// A sidecar whose counters leave no room to go on (edited to 2^53 agent steps) is
/// refused at the first --load, on one line naming the counter, instead of being
/// resumed into counters that no later --load accepts.
#[test]
fn counters_beyond_a_real_run_are_refused_at_the_first_load() {
    let scratch = Scratch::new("huge-counters");
    let run = scratch.a3g_owned(&small_cartpole(&["--max-steps", "200"]));
    assert!(run.status.success(), "{}", run.stderr);
    edit_sidecar(&scratch, "CartPole-v1", |json| {
        json["counters"]["agent_steps"] = serde_json::json!(1u64 << 53);
    });
    let line =
        assert_one_line_error(&scratch.a3g_owned(&small_cartpole(&["--load", "--max-steps", "1"])));
    assert!(line.contains("agent_steps") && line.contains("beyond any real run"), "{line}");
}

/// A game log that stops taking writes (a file-size limit, failing as a full disk
/// does) costs the log only: a3g warns once, trains on to --max-steps and writes the
/// final checkpoint (it used to stop with a few agent steps saved), and the line that
/// did not fit is not left torn at the log's end.
#[test]
fn a_failing_game_log_does_not_stop_training() {
    let mut cut_lines = 0;
    // The same run over two lengths of earlier lines, two bytes apart, so that the
    // limit falls inside a line at least once (a line may end exactly at it).
    for (round, extra) in ["", "x\n"].into_iter().enumerate() {
        let scratch = Scratch::new(&format!("log-full-{round}"));
        std::fs::create_dir_all(scratch.path("logs")).unwrap();
        // 60 KB of earlier lines under a 64 KB limit: the run's arguments fit, and its
        // game lines soon do not.
        let filler = "an earlier run's line\n".repeat(60 * 1024 / 22) + extra;
        std::fs::write(scratch.path("logs/CartPole-v1_log"), filler).unwrap();
        let flags = small_cartpole(&["--max-steps", "3000", "--save-interval", "0"]);
        let run = scratch.a3g_with_file_limit(64, &flags);
        let stderr = &run.stderr;
        assert!(run.status.success(), "{stderr}");
        let warnings: Vec<&str> =
            stderr.lines().filter(|line| line.contains("without the game log")).collect();
        assert_eq!(warnings.len(), 1, "{stderr}");
        assert!(warnings[0].contains("logs/CartPole-v1_log"), "{stderr}");
        assert!(!warnings[0].contains("run again"), "{stderr}");
        assert!(saved_agent_steps(&scratch.path("trained_models/CartPole-v1.json")) >= 3000);
        let log = std::fs::read_to_string(scratch.path("logs/CartPole-v1_log")).unwrap();
        assert!(log.ends_with('\n'), "the log ends {:?}", &log[log.len() - 80..]);
        if log.len() < 64 * 1024 {
            cut_lines += 1;
        }
    }
    assert!(cut_lines > 0, "no line crossed the limit, so none was cut back");
}

/// Worker counts and settings that the machine cannot hold are refused on one line
/// before anything is built: a trillion workers (either trainer) and unshared
/// optimizer statistics for hundreds of workers of a big model.
#[test]
fn runs_too_big_for_the_machine_are_refused() {
    let scratch = Scratch::new("too-big");
    for trainer in ["a3c", "ga3c"] {
        let started = std::time::Instant::now();
        let line = assert_one_line_error(&scratch.a3g(&[
            "train",
            "--env",
            "PongDeterministic-v4",
            "--trainer",
            trainer,
            "--workers",
            "1000000000000",
        ]));
        assert!(
            line.contains("--workers 1000000000000") && line.contains("pick at most"),
            "{line}"
        );
        assert!(started.elapsed().as_secs() < 20, "{trainer} took {:?}", started.elapsed());
    }
    let line = assert_one_line_error(&scratch.a3g_owned(&cartpole(&[
        "--workers",
        "200",
        "--hidden-size",
        "10000",
        "--shared-optimizer",
        "false",
    ])));
    assert!(
        line.contains("--shared-optimizer false") && line.contains("199 more copies"),
        "{line}"
    );
    assert!(!scratch.path("trained_models").exists(), "nothing written before the checks");
}
