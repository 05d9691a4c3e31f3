//! `a3g train` end to end: an Atari smoke run that resumes, a clean stop on SIGINT,
//! and each bad input. Learning itself is tested in tests/learning.rs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{
    assert_one_line_error, cartpole, copy_shipped, edit_sidecar, one_rollout_past_saved,
    saved_agent_steps, sidecar_json, signal, small_cartpole, Lines, Run, Scratch,
};

/// A few hundred Atari steps with two workers write the log (starting with the
/// arguments) and a checkpoint, and a second run resumes from it with its counters.
#[test]
fn atari_smoke_run_writes_and_resumes() {
    let scratch = Scratch::new("atari-smoke");
    let common =
        ["train", "--env", "PongDeterministic-v4", "--workers", "2", "--hidden-size", "32"];
    let run = scratch.a3g(&[&common[..], &["--max-steps", "200"]].concat());
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.stdout.contains("reached --max-steps"), "{}", run.stdout);
    for file in [
        "PongDeterministic-v4.safetensors",
        "PongDeterministic-v4.optimizer.safetensors",
        "PongDeterministic-v4.json",
    ] {
        assert!(scratch.path("trained_models").join(file).exists(), "{file} missing");
    }
    let log = std::fs::read_to_string(scratch.path("logs/PongDeterministic-v4_log"))
        .expect("log written");
    assert!(
        log.starts_with("amsgrad: false\n") && log.contains("env: \"PongDeterministic-v4\""),
        "{log}"
    );
    let steps_saved = saved_agent_steps(&scratch.path("trained_models/PongDeterministic-v4.json"));
    assert!(steps_saved >= 200, "{steps_saved}");
    // The run's last status line is in the log, so a curve drawn from the log alone
    // reaches the run's end (this run is too short for any other status line).
    let last_status_steps: u64 = log
        .lines()
        .filter_map(|line| line.split_once("] agent steps ")?.1.split(',').next()?.parse().ok())
        .next_back()
        .expect("a status line in the log");
    assert!(last_status_steps >= 200, "{log}");

    let run = scratch
        .a3g(&[&common[..], &["--load", "--max-steps", &(steps_saved + 100).to_string()]].concat());
    assert!(run.status.success(), "{}", run.stderr);
    assert!(
        run.stdout.contains(&format!(
            "resumed trained_models/PongDeterministic-v4.safetensors at {steps_saved} agent steps"
        )),
        "{}",
        run.stdout
    );
    assert!(
        saved_agent_steps(&scratch.path("trained_models/PongDeterministic-v4.json"))
            >= steps_saved + 100
    );
}

/// A checkpoint records the run's checked settings, and the crop rows a run trained
/// on are played again by eval and by `--load` when --env-config is left out (with a
/// note saying so); a model fed rows it never learned from would play blind.
#[test]
fn a_checkpoint_records_its_settings_and_its_crop_is_played_again() {
    let scratch = Scratch::new("trained-with");
    scratch.write(
        "crop.json",
        r#"{"Default": {"crop1": 34, "crop2": 34}, "Pong": {"crop1": 10, "crop2": 10}}"#,
    );
    let pong = ["--env", "PongDeterministic-v4", "--hidden-size", "32"];
    let train = ["train", "--workers", "1", "--lr", "0.0002", "--max-steps", "20"];
    let run = scratch.a3g(&[&train[..], &pong[..], &["--env-config", "crop.json"]].concat());
    assert!(run.status.success(), "{}", run.stderr);
    let sidecar = scratch.path("trained_models/PongDeterministic-v4.json");
    let recorded = |sidecar: &std::path::Path| -> serde_json::Value {
        let text = std::fs::read_to_string(sidecar).expect("sidecar");
        serde_json::from_str::<serde_json::Value>(&text).expect("sidecar is JSON")["trained_with"]
            .clone()
    };
    let trained_with = recorded(&sidecar);
    assert_eq!(trained_with["crop"], serde_json::json!({"crop1": 10, "crop2": 10}));
    assert_eq!(trained_with["lr"], serde_json::json!(0.0002));
    assert_eq!(trained_with["workers"], serde_json::json!(1));
    assert_eq!(trained_with["trainer"]["a3c"]["rollout_lengths"], serde_json::json!([20]));

    let note = "note: playing rows 10..170 of the screen, as the checkpoint was trained";
    let eval = ["eval", "--num-episodes", "1", "--max-episode-length", "20"];
    let run = scratch.a3g(&[&eval[..], &pong[..2]].concat());
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.stderr.matches(note).count(), 1, "{}", run.stderr);
    let run = scratch.a3g(&[&eval[..], &pong[..2], &["--env-config", "crop.json"]].concat());
    assert!(run.status.success() && !run.stderr.contains(note), "{}", run.stderr);

    let resumed = ["--load", "--max-steps", "40"];
    let run = scratch.a3g(&[&train[..5], &pong[..], &resumed[..]].concat());
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.stderr.matches(note).count(), 1, "{}", run.stderr);
    assert_eq!(recorded(&sidecar)["crop"], serde_json::json!({"crop1": 10, "crop2": 10}));
}

/// 32 workers on the reference model stay far under the 2 GB the project targets:
/// workers take turns on a few training threads, so only a few rollout graphs exist
/// at once. (Before that design, 32 workers, one thread each, reached 3.7 GB within
/// these 20 s.)
#[test]
fn thirty_two_atari_workers_stay_under_one_gigabyte() {
    let scratch = Scratch::new("memory");
    let mut child = Command::new(env!("CARGO_BIN_EXE_a3g"))
        .args(["train", "--env", "PongDeterministic-v4", "--workers", "32", "--max-time", "20s"])
        .current_dir(scratch.path("."))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a3g");
    let status_file = format!("/proc/{}/status", child.id());
    // VmHWM only grows, so the last reading before exit is the run's peak.
    let mut peak_kb = 0u64;
    while child.try_wait().expect("poll a3g").is_none() {
        if let Ok(status) = std::fs::read_to_string(&status_file) {
            if let Some(kb) = status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|value| value.trim().trim_end_matches(" kB").trim().parse().ok())
            {
                peak_kb = kb;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let output = child.wait_with_output().expect("wait for a3g");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(peak_kb > 0, "never read {status_file}");
    assert!(peak_kb < 1024 * 1024, "peak resident memory {} MB", peak_kb / 1024);
}

/// SIGINT in mid-training stops every thread, writes a final checkpoint that loads
/// again, and exits 0. The signal goes once a status line shows training under way
/// (so a3g is catching it); "interrupted" in the last line shows the signal, not
/// the run's own 60 s budget, ended it. How quickly it stops is a benchmark
/// (docs/benchmarks.md); the bound here only catches a stop that waits for the budget.
#[test]
fn sigint_stops_cleanly_with_a_checkpoint() {
    let scratch = Scratch::new("sigint");
    let mut child = Command::new(env!("CARGO_BIN_EXE_a3g"))
        .args(cartpole(&[
            "--workers",
            "2",
            "--hidden-size",
            "16",
            "--max-time",
            "60s",
            "--status-interval",
            "0.2",
        ]))
        .current_dir(scratch.path("."))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a3g");
    let mut stdout = Lines::stdout(&mut child);
    stdout.wait_for("steps/s");
    let signalled = Instant::now();
    signal(&child, "INT");
    let output = child.wait_with_output().expect("wait for a3g");
    assert!(
        signalled.elapsed() < Duration::from_secs(30),
        "took {:?} to stop",
        signalled.elapsed()
    );
    let stdout = stdout.all();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("interrupted: saved"), "{stdout}");
    let budget = one_rollout_past_saved(&scratch, "CartPole-v1");
    let run = scratch.a3g_owned(&small_cartpole(&["--load", "--max-steps", &budget]));
    assert!(run.status.success(), "{}", run.stderr);
}

/// --max-steps counts agent steps over resumes: a model that has trained them all is
/// not trained a step further (which rewrote its set, the older one rotating out).
/// `--load` is told to raise the budget; `--resume auto`, a command run again until
/// its run is done, ends at once as done. Neither touches a file.
#[test]
fn a_spent_step_budget_trains_nothing() {
    let scratch = Scratch::new("spent-budget");
    let run = scratch.a3g_owned(&small_cartpole(&["--max-steps", "200"]));
    assert!(run.status.success(), "{}", run.stderr);
    let saved = saved_agent_steps(&scratch.path("trained_models/CartPole-v1.json"));
    let set = || {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(scratch.path("trained_models"))
            .unwrap()
            .map(|entry| entry.unwrap())
            .filter(|entry| entry.file_name() != ".a3g.lock")
            .map(|entry| {
                (
                    entry.file_name().to_string_lossy().into_owned(),
                    std::fs::read(entry.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        files
    };
    let before = set();
    for budget in [saved.to_string(), "1".to_string()] {
        let line = assert_one_line_error(&scratch.a3g_owned(&small_cartpole(&[
            "--load",
            "--max-steps",
            &budget,
        ])));
        assert!(
            line.contains(&format!("has already trained {saved} agent steps"))
                && line.contains(&format!("--max-steps {budget}"))
                && line.contains("pass a larger --max-steps"),
            "{line}"
        );
    }
    let done = scratch.a3g_owned(&small_cartpole(&[
        "--resume",
        "auto",
        "--max-steps",
        &saved.to_string(),
    ]));
    assert!(done.status.success(), "{}", done.stderr);
    assert!(done.stdout.contains("nothing is left to train"), "{}", done.stdout);
    assert!(set() == before, "a spent budget rewrote the checkpoint");
    let budget = one_rollout_past_saved(&scratch, "CartPole-v1");
    let more = scratch.a3g_owned(&small_cartpole(&["--load", "--max-steps", &budget]));
    assert!(more.status.success(), "{}", more.stderr);
    assert!(saved_agent_steps(&scratch.path("trained_models/CartPole-v1.json")) > saved);
}

/// A resumed model goes on with the optimizer it trained with when --optimizer and
/// --amsgrad are left out, statistics and all (they were thrown away, with a note in
/// Rust's debug text); asking for another one is told, in the flags' words, that its
/// statistics start afresh.
#[test]
fn a_resumed_model_keeps_its_optimizer() {
    let scratch = Scratch::new("resumed-optimizer");
    let run = scratch.a3g_owned(&small_cartpole(&["--amsgrad", "--max-steps", "200"]));
    assert!(run.status.success(), "{}", run.stderr);
    let resumed = scratch.a3g_owned(&small_cartpole(&["--load", "--max-steps", "400"]));
    assert!(resumed.status.success(), "{}", resumed.stderr);
    assert!(!resumed.stderr.contains("afresh"), "{}", resumed.stderr);
    let optimizer = sidecar_json(&scratch, "CartPole-v1")["optimizer"].clone();
    assert_eq!(optimizer, serde_json::json!({"Adam": {"amsgrad": true}}));
    let other = scratch.a3g_owned(&small_cartpole(&[
        "--load",
        "--max-steps",
        "600",
        "--optimizer",
        "RMSprop",
    ]));
    assert!(other.status.success(), "{}", other.stderr);
    assert!(
        other.stderr.contains(
            "are Adam with --amsgrad's, and this run asks for RMSprop; starting them afresh"
        ),
        "{}",
        other.stderr
    );
}

/// A flag that would do nothing in the run asked for (another trainer's, another kind
/// of environment's, another setting's, or for ranks that no launcher started) is
/// refused on one line naming it, when given; left at its default it is no one's
/// concern.
#[test]
fn flags_that_would_do_nothing_are_refused() {
    let scratch = Scratch::new("idle-flags");
    for (flags, expected) in [
        (
            &["--predictors", "2", "--train-batch", "4"][..],
            "--predictors and --train-batch are for the batched trainer, and this run's trainer is a3c: \
             add --trainer ga3c, or leave them out",
        ),
        (&["--precision", "fp32"][..], "--precision is for the batched trainer"),
        (
            &["--trainer", "ga3c", "--autotune-window", "5"][..],
            "--autotune-window is how long --autotune measures each setting, and --autotune is off",
        ),
        (&["--sync-merge", "mean"][..], "--sync-merge is for training across machines"),
        (
            &["--confirm-games", "3"][..],
            "--confirm-games is how many games confirm the weights --stop-at-mean saves",
        ),
        (
            &["--optimizer", "RMSprop", "--amsgrad"][..],
            "--amsgrad is Adam's, and this run's --optimizer is RMSprop: use --optimizer Adam",
        ),
        (
            &["--python", "python3", "--env-timeout", "5"][..],
            "--python and --env-timeout are for environments from outside a3g (gym:<id>, \
             <file.py>:<Class>), and CartPole-v1 is built in: leave them out",
        ),
        (
            &["--skip-rate", "2", "--env-config", "crops.json"][..],
            "--skip-rate and --env-config are for a3g's own Atari games, and CartPole-v1 is not one",
        ),
        (&["--profile-phases"][..], "--profile-phases is for a GPU"),
        (
            &["--num-steps", "5", "--distributed-step-size", "5", "10"][..],
            "--num-steps is every worker's rollout length, and --distributed-step-size gives each \
             worker its own",
        ),
        (
            &["--trainer", "ga3c", "--predict-timeout-us", "100"][..],
            "--predict-timeout-us is how long a predictor waits to fill --predict-min-batch, and \
             that is 1 (the default for a network of a few inputs), so it never waits: raise \
             --predict-min-batch",
        ),
    ] {
        let line = assert_one_line_error(&scratch.a3g_owned(&small_cartpole(flags)));
        assert!(line.contains(expected), "{flags:?}: {line}");
    }
    // Atari's own: frames per step an id fixes, a crop the universe screens ignore, an
    // LSTM the screen networks have.
    for (flags, expected) in [
        (
            &["--env", "BreakoutDeterministic-v4", "--skip-rate", "2"][..],
            "and BreakoutDeterministic-v4 skips frames its own way: play BreakoutNoFrameskip-v4 \
             with it, or leave it out",
        ),
        (
            &["--env", "PongDeterministic-v4", "--model", "universe", "--env-config", "crops.json"],
            "--env-config is for the crop rows of the a3clstm network's screens, and this model's \
             network, universe, keeps rows 34..194 of every game",
        ),
        (&["--env", "PongDeterministic-v4", "--lstm"], "--lstm gives the MLP"),
        (
            &["--env", "gym:CartPole-v1", "--skip-rate", "2"],
            "--skip-rate is for a3g's own Atari games, and gym:CartPole-v1 is not one: give the \
             environment's own settings through --env-kwargs",
        ),
    ] {
        let line = assert_one_line_error(&scratch.a3g(&[&["train"][..], flags].concat()));
        assert!(line.contains(expected), "{flags:?}: {line}");
    }
    // A checkpoint's network decides too: the shipped Breakout model reads block-maximum
    // screens.
    copy_shipped(&scratch, "BreakoutDeterministic-v4");
    scratch.write("crops.json", r#"{"Default": {"crop1": 34, "crop2": 34}}"#);
    let eval = ["eval", "--env", "BreakoutDeterministic-v4", "--env-config", "crops.json"];
    let line = assert_one_line_error(&scratch.a3g(&eval));
    assert!(line.contains("this model's network, universe-max, keeps rows 34..194"), "{line}");
    std::fs::remove_dir_all(scratch.path("trained_models")).unwrap();
    let eval = ["eval", "--env", "CartPole-v1", "--python", "python3"];
    let line = assert_one_line_error(&scratch.a3g(&eval));
    assert!(line.contains("--python is for environments from outside a3g"), "{line}");
    let eval = ["eval", "--env", "CartPole-v1", "--render-freq", "2", "--record-dir", "games"];
    let line = assert_one_line_error(&scratch.a3g(&eval));
    assert!(
        line.contains(
            "--render-freq and --record-dir are for recording games, and --render is off"
        ),
        "{line}"
    );
    assert!(!scratch.path("trained_models").exists());
    // The same settings at their defaults, not written out, train, and so does
    // --skip-rate where the id leaves the frames per step to it.
    let run = scratch.a3g_owned(&small_cartpole(&["--max-steps", "20"]));
    assert!(run.status.success(), "{}", run.stderr);
    let breakout = ["--env", "BreakoutNoFrameskip-v4", "--model", "universe", "--skip-rate", "3"];
    let run =
        scratch.a3g(&[&["train", "--workers", "1", "--max-steps", "20"][..], &breakout].concat());
    assert!(run.status.success(), "{}", run.stderr);
}

/// Bad input ends with one line and a non-zero exit, and never touches the
/// checkpoint already there.
#[test]
fn bad_train_input_is_one_line() {
    let scratch = Scratch::new("train-bad");
    let line = assert_one_line_error(&scratch.a3g(&["train", "--env", "Pongg-v4"]));
    assert!(line.contains("unknown environment id \"Pongg-v4\""), "{line}");
    let line = assert_one_line_error(&scratch.a3g_owned(&cartpole(&["--load"])));
    assert!(line.contains("no checkpoint for CartPole-v1 in trained_models"), "{line}");
    let line = assert_one_line_error(&scratch.a3g_owned(&cartpole(&["--workers", "0"])));
    assert!(line.contains("--workers") && line.contains("leave it out"), "{line}");
    // 99 is beyond any machine's GPUs, and no GPU at all where there is no CUDA.
    let line = assert_one_line_error(&scratch.a3g_owned(&cartpole(&["--gpu-ids", "99"])));
    assert!(line.contains("--gpu-ids 99") && line.contains("-1"), "{line}");

    let run = scratch.a3g_owned(&small_cartpole(&["--max-steps", "10"]));
    assert!(run.status.success(), "{}", run.stderr);
    // A second save, by a resumed run, keeps the first set as the previous one.
    let resumed = scratch.a3g_owned(&small_cartpole(&["--load", "--max-steps", "20"]));
    assert!(resumed.status.success(), "{}", resumed.stderr);
    let model = scratch.path("trained_models/CartPole-v1.safetensors");
    let line =
        assert_one_line_error(&scratch.a3g_owned(&cartpole(&["--hidden-size", "32", "--load"])));
    assert!(line.contains("--hidden-size 32") && line.contains("hidden size of 16"), "{line}");

    // A damaged model with a complete previous set beside it: that set is used, and
    // the warning names what is wrong with the newer one.
    let damaged = b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}".to_vec();
    let previous = scratch.path("trained_models/CartPole-v1.prev.safetensors");
    assert!(previous.exists(), "the resumed run's save leaves a previous set");
    std::fs::write(&model, &damaged).unwrap();
    let run = scratch.a3g_owned(&cartpole(&["--hidden-size", "16", "--load", "--max-steps", "30"]));
    assert!(run.status.success(), "{}", run.stderr);
    assert!(
        run.stderr.contains("CartPole-v1.safetensors")
            && run.stderr.contains("using the previous complete checkpoint"),
        "{}",
        run.stderr
    );

    // Both sets damaged: refused on one line, and neither file is overwritten.
    std::fs::write(&model, &damaged).unwrap();
    std::fs::write(&previous, &damaged).unwrap();
    let line =
        assert_one_line_error(&scratch.a3g_owned(&cartpole(&["--hidden-size", "16", "--load"])));
    assert!(
        line.contains("cannot read checkpoint") && line.contains("CartPole-v1.safetensors"),
        "{line}"
    );
    assert_eq!(std::fs::read(&model).unwrap(), damaged, "the damaged file was overwritten");
    assert_eq!(std::fs::read(&previous).unwrap(), damaged, "the previous set was overwritten");
}

/// With --shared-optimizer false each worker steps statistics of its own; the
/// checkpoint keeps worker 0's, which have stepped (the handle it saved before never
/// did, so --load restarted them at zero), and a resumed run starts from them.
#[test]
fn unshared_optimizer_statistics_are_saved_stepped() {
    let scratch = Scratch::new("unshared-optimizer");
    let flags = ["--workers", "2", "--hidden-size", "16", "--shared-optimizer", "false"];
    let run = scratch.a3g_owned(&cartpole(&[&flags[..], &["--max-steps", "2000"]].concat()));
    assert!(run.status.success(), "{}", run.stderr);
    let loaded = a3g::checkpoint::load(&scratch.path("trained_models"), "CartPole-v1").unwrap();
    let statistics = loaded.optimizer.expect("statistics saved");
    let (name, first_moment) =
        statistics.iter().find(|(name, _)| name == "fc1.weight.exp_avg").expect("exp_avg");
    assert!(first_moment.abs().sum(tch::Kind::Float).double_value(&[]) > 0.0, "{name} is zero");
    let run =
        scratch.a3g_owned(&cartpole(&[&flags[..], &["--load", "--max-steps", "2500"]].concat()));
    assert!(run.status.success(), "{}", run.stderr);
    assert!(!run.stderr.contains("start afresh"), "{}", run.stderr);
}

/// An Atari run on CPU cores with the default network is told, in one note on stderr,
/// that --model universe trains several times faster there; one that chose its
/// network is not.
#[test]
fn cpu_atari_runs_hear_about_the_universe_network() {
    let scratch = Scratch::new("universe-note");
    let pong = ["train", "--env", "PongDeterministic-v4", "--workers", "1", "--max-steps", "1"];
    let run = scratch.a3g(&[&pong[..], &["--save-model-dir", "default"]].concat());
    assert!(run.status.success(), "{}", run.stderr);
    let notes: Vec<&str> =
        run.stderr.lines().filter(|line| line.contains("--model universe")).collect();
    assert_eq!(notes.len(), 1, "{}", run.stderr);
    assert!(notes[0].starts_with("note: ") && notes[0].contains("agent steps/s"), "{}", notes[0]);
    let chosen = ["--model", "universe", "--save-model-dir", "chosen"];
    let run = scratch.a3g(&[&pong[..], &chosen[..]].concat());
    assert!(run.status.success(), "{}", run.stderr);
    assert!(!run.stderr.contains("--model universe"), "{}", run.stderr);
}

/// --model universe84 trains on 84x84 screens; its checkpoint resumes with no --model,
/// and its bare weights (no sidecar) play under `a3g eval`, which tells 84x84 from
/// 42x42 by the features the LSTM takes.
#[test]
fn universe84_trains_resumes_and_plays_from_bare_weights() {
    let scratch = Scratch::new("universe84");
    let train = |extra: &[&str]| train_small_breakout(&scratch, extra);
    let run = train(&["--model", "universe84", "--max-steps", "40"]);
    assert!(run.status.success(), "{}", run.stderr);
    let model = scratch.path("trained_models/BreakoutDeterministic-v4.safetensors");
    let conv1_and_lstm = tch::Tensor::read_safetensors(&model).unwrap();
    let lstm_inputs = conv1_and_lstm.iter().find(|(name, _)| name == "lstm.weight_ih").unwrap();
    assert_eq!(lstm_inputs.1.size(), [64, 1152]);

    let run = train(&["--load", "--max-steps", "80"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.stdout.contains("resumed"), "{}", run.stdout);

    std::fs::create_dir(scratch.path("bare")).unwrap();
    std::fs::copy(&model, scratch.path("bare/BreakoutDeterministic-v4.safetensors")).unwrap();
    plays_a_short_breakout_game(&scratch, "bare");
}

/// --model universe-max trains the universe network on block-maximum screens: its
/// sidecar names the network, so `--load` resumes it with no --model and refuses
/// `--model universe`, and `a3g eval` plays it.
#[test]
fn universe_max_trains_resumes_and_plays() {
    let scratch = Scratch::new("universe-max");
    let train = |extra: &[&str]| train_small_breakout(&scratch, extra);
    let run = train(&["--model", "universe-max", "--max-steps", "40"]);
    assert!(run.status.success(), "{}", run.stderr);
    let network_recorded = || {
        let path = scratch.path("trained_models/BreakoutDeterministic-v4.json");
        let sidecar = std::fs::read_to_string(path).expect("the sidecar");
        assert!(sidecar.contains("\"UniverseMax\""), "{sidecar}");
    };
    network_recorded();

    let run = train(&["--load", "--model", "universe", "--max-steps", "80"]);
    assert!(!run.status.success());
    assert!(run.stderr.contains("has a universe-max model"), "{}", run.stderr);
    let run = train(&["--load", "--max-steps", "80"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.stdout.contains("resumed"), "{}", run.stdout);
    network_recorded();

    plays_a_short_breakout_game(&scratch, "trained_models");
}

/// `a3g train` on Breakout with one worker and an LSTM of 16, and `extra`.
fn train_small_breakout(scratch: &Scratch, extra: &[&str]) -> Run {
    let breakout = ["--env", "BreakoutDeterministic-v4", "--workers", "1", "--hidden-size", "16"];
    scratch.a3g(&[&["train"], &breakout[..], extra].concat())
}

/// `a3g eval` plays one Breakout game of at most 200 agent steps with the model in
/// `model_dir`.
fn plays_a_short_breakout_game(scratch: &Scratch, model_dir: &str) {
    let eval = scratch.a3g(&[
        "eval",
        "--env",
        "BreakoutDeterministic-v4",
        "--num-episodes",
        "1",
        "--max-episode-length",
        "200",
        "--load-model-dir",
        model_dir,
    ]);
    assert!(eval.status.success(), "{}", eval.stderr);
    assert!(eval.stdout.contains("1 episodes: reward mean"), "{}", eval.stdout);
}

/// A fixed-seed single-worker CartPole run trains the same weights as it did when the
/// fixture was written (2026-11-26, before the redesign of configs, trainers and
/// threads): one worker's updates come in one order, so the same code gives the same
/// weights, and a refactor that changes what training does shows here. The tolerance
/// allows only rounding: a CPU with other vector units may sum in another order.
#[test]
fn a_fixed_seed_run_trains_the_recorded_weights() {
    let scratch = Scratch::new("recorded-weights");
    let run = scratch.a3g_owned(&small_cartpole(&["--seed", "3", "--max-steps", "3000"]));
    assert!(run.status.success(), "{}", run.stderr);
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/cartpole_seed3_3000_steps.safetensors"
    );
    let recorded = tch::Tensor::read_safetensors(fixture).expect("the fixture");
    let trained =
        tch::Tensor::read_safetensors(scratch.path("trained_models/CartPole-v1.safetensors"))
            .expect("the trained model");
    assert_eq!(recorded.len(), trained.len());
    for (name, expected) in &recorded {
        let (_, actual) = trained.iter().find(|(other, _)| other == name).expect(name);
        let gap = (actual - expected).abs().max().double_value(&[]);
        assert!(gap <= 1e-5, "{name} differs by {gap}");
    }
}

/// --normalize-obs measures the scaling once and keeps it with the model: the sidecar
/// holds CartPole's 4 means and deviations, a resumed run keeps them unchanged, eval
/// plays with them, and a sidecar whose scaling does not fit the network is refused
/// by both on one line. Atari screens and a resume that contradicts the checkpoint are
/// refused too.
#[test]
fn observation_scaling_is_kept_with_the_model() {
    let scratch = Scratch::new("normalize-obs");
    let scaling =
        || sidecar_json(&scratch, "CartPole-v1")["model"]["body"]["Mlp"]["input_norm"].clone();
    let run = scratch.a3g_owned(&small_cartpole(&["--normalize-obs", "--max-steps", "300"]));
    assert!(run.status.success(), "{}", run.stderr);
    let measured = scaling();
    assert_eq!(measured["mean"].as_array().map(Vec::len), Some(4), "{measured}");
    assert_eq!(measured["std"].as_array().map(Vec::len), Some(4), "{measured}");
    let resumed = scratch.a3g_owned(&small_cartpole(&["--load", "--max-steps", "600"]));
    assert!(resumed.status.success(), "{}", resumed.stderr);
    assert!(saved_agent_steps(&scratch.path("trained_models/CartPole-v1.json")) >= 600);
    assert_eq!(scaling(), measured);
    let eval = ["eval", "--env", "CartPole-v1", "--num-episodes", "1"];
    let played = scratch.a3g(&eval);
    assert!(played.status.success(), "{}", played.stderr);

    edit_sidecar(&scratch, "CartPole-v1", |json| {
        json["model"]["body"]["Mlp"]["input_norm"]["mean"].as_array_mut().unwrap().pop();
    });
    for refused in [scratch.a3g(&eval), scratch.a3g_owned(&small_cartpole(&["--load"]))] {
        let line = assert_one_line_error(&refused);
        assert!(line.contains("3 means and 4 deviations for 4 inputs"), "{line}");
    }

    let plain = Scratch::new("normalize-obs-plain");
    let run = plain.a3g_owned(&small_cartpole(&["--max-steps", "100"]));
    assert!(run.status.success(), "{}", run.stderr);
    let line = assert_one_line_error(&plain.a3g_owned(&small_cartpole(&[
        "--load",
        "--normalize-obs",
        "--max-steps",
        "200",
    ])));
    assert!(line.contains("--normalize-obs") && line.contains("unscaled inputs"), "{line}");
    let line = assert_one_line_error(&plain.a3g(&[
        "train",
        "--env",
        "PongDeterministic-v4",
        "--normalize-obs",
        "--max-steps",
        "10",
    ]));
    assert!(line.contains("screens are scaled already"), "{line}");
}

/// --model names a network for screens: on a task of a few values it is refused on
/// one line (it was ignored, but for the hidden size it chose), fresh or resumed.
#[test]
fn a_screen_network_for_a_vector_task_is_refused() {
    let scratch = Scratch::new("model-on-cartpole");
    for model in ["universe-max", "a3clstm"] {
        let line = assert_one_line_error(&scratch.a3g_owned(&small_cartpole(&[
            "--model",
            model,
            "--max-steps",
            "10",
        ])));
        assert!(
            line.contains("CartPole-v1 gives observations of 4 values")
                && line.contains("leave out --model"),
            "{line}"
        );
    }
    assert!(!scratch.path("trained_models").exists(), "a refused run saved a model");
    let run = scratch.a3g_owned(&small_cartpole(&["--max-steps", "10"]));
    assert!(run.status.success(), "{}", run.stderr);
    let line = assert_one_line_error(&scratch.a3g_owned(&small_cartpole(&[
        "--load",
        "--model",
        "universe",
        "--max-steps",
        "100",
    ])));
    assert!(line.contains("gives observations of 4 values"), "{line}");
}

/// --min-std sets the Gaussian's floor, which the sidecar keeps and a resume takes; a
/// resume asking for another floor, a floor out of range and a floor for discrete
/// actions are each refused on one line.
#[test]
fn the_gaussian_floor_is_kept_with_the_model() {
    let scratch = Scratch::new("min-std");
    let pendulum = |extra: &[&str]| -> Vec<String> {
        ["train", "--env", "Pendulum-v1", "--workers", "1", "--hidden-size", "16"]
            .iter()
            .chain(extra)
            .map(|flag| flag.to_string())
            .collect()
    };
    let run = scratch.a3g_owned(&pendulum(&["--min-std", "0.3", "--max-steps", "200"]));
    assert!(run.status.success(), "{}", run.stderr);
    let floor =
        || sidecar_json(&scratch, "Pendulum-v1")["model"]["head"]["Gaussian"]["min_std"].as_f64();
    assert_eq!(floor(), Some(0.3));
    let resumed = scratch.a3g_owned(&pendulum(&["--load", "--max-steps", "400"]));
    assert!(resumed.status.success(), "{}", resumed.stderr);
    assert_eq!(floor(), Some(0.3));
    let line =
        assert_one_line_error(&scratch.a3g_owned(&pendulum(&["--load", "--min-std", "0.5"])));
    assert!(line.contains("--min-std 0.5") && line.contains("a floor of 0.3"), "{line}");
    for bad in ["0", "-1", "11", "NaN"] {
        let line = assert_one_line_error(&scratch.a3g_owned(&pendulum(&["--min-std", bad])));
        assert!(line.contains("is outside [0.001, 10]"), "{bad}: {line}");
    }
    let line = assert_one_line_error(&scratch.a3g_owned(&small_cartpole(&["--min-std", "0.3"])));
    assert!(line.contains("CartPole-v1's actions are discrete"), "{line}");
}
