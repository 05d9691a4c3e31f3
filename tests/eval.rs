//! `a3g eval` and checkpoints exchanged with PyTorch: the reference's network
//! computes the same thing from a PyTorch-made fixture in all three file formats
//! (torch.save's zip and legacy formats, safetensors), a model a3g trained loads
//! strictly into PyTorch and computes the same there, saved and shipped models play,
//! games are recorded, and each bad input is one line.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use a3g::checkpoint;
use a3g::model::{ActorCritic, Body, Head, LstmState, ModelSpec, Policy};
use tch::{nn, Device, Kind, Tensor};

use crate::util::{assert_one_line_error, cartpole, pytorch_path, Scratch};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn tensor<'a>(tensors: &'a [(String, Tensor)], name: &str) -> &'a Tensor {
    &tensors.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name}")).1
}

fn max_difference(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.size(), b.size());
    (a - b).abs().max().double_value(&[])
}

/// What the `gif` crate's decoder, written independently of our encoder, finds in a
/// recording.
struct Recording {
    width: u16,
    height: u16,
    /// Images in the file.
    images: usize,
    /// Their display times added up, in hundredths of a second.
    centiseconds: u64,
}

/// Decodes a recording, checking on the way that every image lies inside the screen,
/// ends its LZW data properly, brings its own palette, stays under the next image,
/// and changes the screen (the first one covers all of it).
fn decode_recording(path: &Path) -> Recording {
    let mut options = gif::DecodeOptions::new();
    options.check_frame_consistency(true);
    options.check_lzw_end_code(true);
    let mut decoder = options.read_info(fs::File::open(path).unwrap()).unwrap();
    let (width, height) = (decoder.width(), decoder.height());
    let mut screen = vec![[0u8; 3]; usize::from(width) * usize::from(height)];
    let (mut images, mut centiseconds) = (0, 0);
    while let Some(image) = decoder.read_next_frame().unwrap() {
        if images == 0 {
            assert_eq!((image.left, image.top, image.width, image.height), (0, 0, width, height));
        }
        assert_eq!(image.dispose, gif::DisposalMethod::Keep, "image {images}");
        let palette = image.palette.as_deref().expect("each image has its own palette");
        let before = screen.clone();
        for (offset, &index) in image.buffer.iter().enumerate() {
            let x = usize::from(image.left) + offset % usize::from(image.width);
            let y = usize::from(image.top) + offset / usize::from(image.width);
            let colour = &palette[3 * usize::from(index)..][..3];
            screen[y * usize::from(width) + x] = colour.try_into().unwrap();
        }
        assert!(images == 0 || screen != before, "image {images} changes nothing");
        images += 1;
        centiseconds += u64::from(image.delay);
    }
    Recording { width, height, images, centiseconds }
}

/// Checks a recording of a game of `length` agent steps of `step_seconds` each: it
/// shows the `length + 1` screens played (the reset's and one per step) for their
/// time, in at most that many images (unchanged screens extend the one before).
fn assert_recording_shows(recording: &Recording, length: u64, step_seconds: f64) {
    let screens = length + 1;
    assert!((2..=screens as usize).contains(&recording.images), "{} images", recording.images);
    let expected = (screens as f64 * step_seconds * 100.0).round() as u64;
    assert_eq!(recording.centiseconds, expected, "{screens} screens of {step_seconds} s");
}

/// The reference's Atari network, loaded from PyTorch's own files (torch.save's
/// pickle and safetensors), gives PyTorch's value, logits and LSTM state for the
/// fixture's screen within 1e-5 (tests/fixtures/make_reference_fixture.py).
/// The reference's Atari network, loaded from PyTorch's own files (torch.save's zip
/// and legacy formats, and safetensors), holds exactly the same tensors from each and
/// gives PyTorch's value, logits and LSTM state for the fixture's screen within 1e-5
/// (tests/fixtures/make_reference_fixture.py, make_legacy_fixture.py).
#[test]
fn reference_fixture_forward_matches_pytorch() {
    let io = Tensor::read_safetensors(fixture("reference_hidden16_io.safetensors")).unwrap();
    let spec =
        ModelSpec { body: Body::AtariLstm, hidden_size: 16, head: Head::Discrete { actions: 6 } };
    let from_pickle = checkpoint::read_model(&fixture("reference_hidden16.dat")).unwrap();
    let from_legacy = checkpoint::read_model(&fixture("reference_hidden16_legacy.dat")).unwrap();
    let from_safetensors =
        checkpoint::read_model(&fixture("reference_hidden16.safetensors")).unwrap();
    assert_eq!(from_pickle.len(), 16);
    assert_eq!(from_legacy.len(), 16);
    for (name, value) in &from_pickle {
        assert_eq!(max_difference(value, tensor(&from_safetensors, name)), 0.0, "{name}");
        assert_eq!(max_difference(value, tensor(&from_legacy, name)), 0.0, "{name}");
    }
    for tensors in [from_pickle, from_legacy, from_safetensors] {
        let path = Path::new("fixture");
        assert_eq!(checkpoint::implied_architecture(path, &tensors).unwrap(), (16, true));
        let vs = nn::VarStore::new(Device::Cpu);
        let model = ActorCritic::new(&vs, &spec);
        checkpoint::copy_matching(path, &tensors, model.parameters(), "").unwrap();
        let state = LstmState {
            hidden: tensor(&io, "hx").shallow_clone(),
            cell: tensor(&io, "cx").shallow_clone(),
        };
        let output = tch::no_grad(|| model.forward(tensor(&io, "screen"), &state));
        assert!(max_difference(&output.value, tensor(&io, "value")) < 1e-5);
        let Policy::Logits(logits) = &output.policy else { panic!("discrete head expected") };
        assert!(max_difference(logits, tensor(&io, "logits")) < 1e-5);
        assert!(max_difference(&output.state.hidden, tensor(&io, "hx_next")) < 1e-5);
        assert!(max_difference(&output.state.cell, tensor(&io, "cx_next")) < 1e-5);
        // The fixture's weights are random, so a forward pass that ignored a layer
        // would not land this close by chance.
        assert!(tensor(&io, "logits").abs().max().double_value(&[]) > 0.05);
    }
}

/// The values of a tensor, as f64s.
fn values(tensor: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(tensor.flatten(0, -1).to_kind(Kind::Double)).unwrap()
}

/// The values of a JSON array of numbers.
fn json_values(array: &serde_json::Value) -> Vec<f64> {
    array.as_array().expect("an array").iter().map(|value| value.as_f64().unwrap()).collect()
}

/// The largest difference between two equally long lists of values.
fn max_gap(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max)
}

/// A model a3g has just trained on Pong loads into the reference's A3Clstm in
/// PyTorch with `load_state_dict(strict=True)` (the same names and shapes, nothing
/// missing, nothing extra), and over two steps of a fixed screen from a zero LSTM
/// state PyTorch's action probabilities, value and LSTM state are a3g's within 1e-5
/// (tests/fixtures/check_in_pytorch.py, run with python3 and the set-up's torch).
#[test]
fn trained_atari_model_loads_strictly_into_pytorch() {
    check_strict_load_into_pytorch("a3clstm", Body::AtariLstm, 80);
}

/// The same for --model universe: its checkpoint loads strictly into ikostrikov's
/// network in PyTorch (benches/model_step.py's UniverseModel) and computes the same.
#[test]
fn trained_universe_model_loads_strictly_into_pytorch() {
    check_strict_load_into_pytorch("universe", Body::Universe, 42);
}

/// The same for --model universe84: ikostrikov's network over 84x84 screens, whose
/// LSTM reads 32 maps of 6x6 instead of 3x3.
#[test]
fn trained_universe84_model_loads_strictly_into_pytorch() {
    check_strict_load_into_pytorch("universe84", Body::Universe84, 84);
}

fn check_strict_load_into_pytorch(model_name: &str, body: Body, side: i64) {
    let scratch = Scratch::new(&format!("pytorch-strict-{model_name}"));
    let train = scratch.a3g(&[
        "train",
        "--env",
        "PongDeterministic-v4",
        "--model",
        model_name,
        "--workers",
        "1",
        "--hidden-size",
        "32",
        "--max-steps",
        "50",
    ]);
    assert!(train.status.success(), "{}", train.stderr);
    let model_path = scratch.path("trained_models/PongDeterministic-v4.safetensors");

    let script = fixture("check_in_pytorch.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg(&model_path)
        .env("PYTHONPATH", pytorch_path())
        .output()
        .unwrap_or_else(|error| panic!("cannot run python3 ({error}); this test needs Python 3"));
    assert!(
        output.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let pytorch: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON object");

    let tensors = checkpoint::read_model(&model_path).unwrap();
    assert_eq!(pytorch["tensors"], tensors.len(), "PyTorch read every tensor a3g wrote");
    let (hidden_size, lstm) = checkpoint::implied_architecture(&model_path, &tensors).unwrap();
    assert_eq!((hidden_size, lstm), (32, true));
    let spec = ModelSpec { body, hidden_size, head: Head::Discrete { actions: 6 } };
    let vs = nn::VarStore::new(Device::Cpu);
    let model = ActorCritic::new(&vs, &spec);
    checkpoint::copy_matching(&model_path, &tensors, model.parameters(), "").unwrap();

    // The same two screens as the script's fixed_screens, made by the same libtorch calls.
    let ramp = |end: f64| Tensor::linspace(0.0, end, side * side, (Kind::Float, Device::Cpu));
    let screens = [ramp(40.0).sin() * 2.0, ramp(25.0).cos() * 2.0];
    let mut state = LstmState::zeros(&spec, Device::Cpu);
    for (step, screen) in screens.iter().enumerate() {
        let output = tch::no_grad(|| model.forward(&screen.view([1, 1, side, side]), &state));
        let Policy::Logits(logits) = &output.policy else { panic!("discrete head expected") };
        let probabilities = values(&logits.softmax(1, Kind::Float));
        // The actor starts near uniform; a spread well over the tolerance means a
        // swapped or ignored row of it would show.
        let spread = probabilities.iter().fold(0.0, |a: f64, &b| a.max(b))
            - probabilities.iter().fold(1.0, |a: f64, &b| a.min(b));
        assert!(spread > 1e-4, "step {step}: probabilities {probabilities:?}");
        let expected = &pytorch["steps"][step];
        for (what, ours) in [
            ("value", values(&output.value)),
            ("probabilities", probabilities),
            ("hx", values(&output.state.hidden)),
            ("cx", values(&output.state.cell)),
        ] {
            let gap = max_gap(&ours, &json_values(&expected[what]));
            assert!(gap < 1e-5, "step {step}: {what} differs by {gap} from PyTorch's");
        }
        state = output.state;
    }
}

/// A PyTorch .dat checkpoint evaluates from the command line: a line per game on
/// stdout and in <env>_mon_log, a JSON summary, and a GIF of the recorded game that
/// an independent decoder reads as the game's 160x210 screens for the game's time.
#[test]
fn eval_plays_a_pytorch_checkpoint_and_records_it() {
    let scratch = Scratch::new("eval-dat");
    fs::create_dir_all(scratch.path("trained_models")).unwrap();
    fs::copy(
        fixture("reference_hidden16.dat"),
        scratch.path("trained_models/PongNoFrameskip-v4.dat"),
    )
    .unwrap();
    let run = scratch.a3g(&[
        "eval",
        "--num-episodes",
        "2",
        "--max-episode-length",
        "40",
        "--render",
        "--render-freq",
        "2",
        "--json",
    ]);
    assert!(run.status.success(), "{}", run.stderr);
    let summary: serde_json::Value =
        serde_json::from_str(run.stdout.trim()).expect("one JSON object");
    assert_eq!(summary["env"], "PongNoFrameskip-v4");
    assert_eq!(summary["episodes"], 2);
    // NoFrameskip's limit is 4 x 40 frames, and the 1..30 no-ops at reset count
    // against it, as in Gym: each game lasts 32 to 40 agent steps.
    for length in summary["lengths"].as_array().unwrap() {
        assert!((32..=40).contains(&length.as_u64().unwrap()), "{summary}");
    }
    assert!(summary["checkpoint"].as_str().unwrap().ends_with("PongNoFrameskip-v4.dat"));
    let recordings = summary["recordings"].as_array().unwrap();
    assert_eq!(recordings.len(), 1, "--render-freq 2 records game 1 of 2");
    let path = scratch.path(recordings[0].as_str().unwrap());
    assert_eq!(&fs::read(&path).unwrap()[..6], b"GIF89a");
    let recording = decode_recording(&path);
    assert_eq!((recording.width, recording.height), (160, 210), "the full Atari screen");
    // Four emulator frames at 60 Hz per agent step.
    assert_recording_shows(&recording, summary["lengths"][0].as_u64().unwrap(), 4.0 / 60.0);
    assert_eq!(run.stderr.matches(", reward mean ").count(), 2, "{}", run.stderr);
    let log = fs::read_to_string(scratch.path("logs/PongNoFrameskip-v4_mon_log")).unwrap();
    assert_eq!(log.matches("episode reward").count(), 2, "{log}");
    assert!(log.contains("2 episodes: reward mean"), "{log}");
}

/// A checkpoint in torch.save's legacy format, as rl_a3c_pytorch wrote before PyTorch
/// 1.6, evaluates from the command line like a zip-format one.
#[test]
fn eval_plays_a_legacy_pytorch_checkpoint() {
    let scratch = Scratch::new("eval-legacy");
    fs::create_dir_all(scratch.path("trained_models")).unwrap();
    fs::copy(
        fixture("reference_hidden16_legacy.dat"),
        scratch.path("trained_models/PongNoFrameskip-v4.dat"),
    )
    .unwrap();
    let run = scratch.a3g(&["eval", "--num-episodes", "1", "--max-episode-length", "20", "--json"]);
    assert!(run.status.success(), "{}", run.stderr);
    let summary: serde_json::Value =
        serde_json::from_str(run.stdout.trim()).expect("one JSON object");
    assert_eq!(summary["env"], "PongNoFrameskip-v4");
    assert_eq!(summary["episodes"], 1);
    assert!(summary["checkpoint"].as_str().unwrap().ends_with("PongNoFrameskip-v4.dat"));
}

/// A model trained by a3g evaluates with its dimensions taken from the checkpoint,
/// not from flags; each classic-control game is recorded as a drawn 300x200 scene
/// that an independent decoder reads as the game's screens for the game's time.
#[test]
fn eval_reads_dimensions_from_the_checkpoint() {
    let scratch = Scratch::new("eval-roundtrip");
    let train = scratch.a3g_owned(&cartpole(&[
        "--workers",
        "1",
        "--hidden-size",
        "24",
        "--max-steps",
        "300",
    ]));
    assert!(train.status.success(), "{}", train.stderr);
    let run = scratch.a3g(&[
        "eval",
        "--env",
        "CartPole-v1",
        "--num-episodes",
        "3",
        "--render",
        "--record-dir",
        "games",
    ]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.stdout.contains("3 episodes: reward mean"), "{}", run.stdout);
    let games: Vec<_> = fs::read_dir(scratch.path("games")).unwrap().collect();
    assert_eq!(games.len(), 3);
    let lengths: Vec<u64> = run
        .stdout
        .lines()
        .filter_map(|line| line.split("episode length ").nth(1))
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(lengths.len(), 3, "{}", run.stdout);
    for (game, length) in lengths.into_iter().enumerate() {
        let path = scratch.path(&format!("games/CartPole-v1_game{:04}.gif", game + 1));
        let recording = decode_recording(&path);
        assert_eq!((recording.width, recording.height), (300, 200), "a 300x200 scene");
        // Gym's CartPole steps 0.02 s.
        assert_recording_shows(&recording, length, 0.02);
    }

    // A renamed checkpoint is caught by its sidecar.
    for extension in ["safetensors", "json"] {
        fs::copy(
            scratch.path(&format!("trained_models/CartPole-v1.{extension}")),
            scratch.path(&format!("trained_models/CartPole-v0.{extension}")),
        )
        .unwrap();
    }
    let line = assert_one_line_error(&scratch.a3g(&["eval", "--env", "CartPole-v0"]));
    assert!(line.contains("trained on CartPole-v1, not CartPole-v0"), "{line}");
}

/// `a3g eval --json`'s summary of the model shipped in trained_models/ for `env`,
/// over `episodes` games with `seed`.
fn evaluate_shipped(scratch: &Scratch, env: &str, episodes: &str, seed: &str) -> serde_json::Value {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("trained_models");
    let run = scratch.a3g(&[
        "eval",
        "--env",
        env,
        "--num-episodes",
        episodes,
        "--seed",
        seed,
        "--load-model-dir",
        models.to_str().unwrap(),
        "--json",
    ]);
    assert!(run.status.success(), "{}", run.stderr);
    serde_json::from_str(run.stdout.trim()).unwrap()
}

/// The CartPole-v1 model shipped in trained_models/ still plays perfect games.
#[test]
fn shipped_cartpole_model_scores_500() {
    let scratch = Scratch::new("eval-shipped");
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("trained_models");
    let run = scratch.a3g(&[
        "eval",
        "--env",
        "CartPole-v1",
        "--num-episodes",
        "20",
        "--load-model-dir",
        models.to_str().unwrap(),
        "--json",
    ]);
    assert!(run.status.success(), "{}", run.stderr);
    let summary: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(summary["mean"], 500.0, "{summary}");
}

/// The PongDeterministic-v4 model shipped in trained_models/ (--model universe,
/// recognised by its 3x3 first convolution) still wins its games 21-0, with both
/// seeds README's Results name.
#[test]
fn shipped_pong_model_wins_21_0() {
    let scratch = Scratch::new("eval-shipped-pong");
    for seed in ["1", "2"] {
        let summary = evaluate_shipped(&scratch, "PongDeterministic-v4", "2", seed);
        assert_eq!(summary["mean"], 21.0, "seed {seed}: {summary}");
    }
}

/// The BreakoutDeterministic-v4 model shipped in trained_models/ (--model universe-max,
/// whose sidecar says so: played on any other screens its games would differ; batched
/// trainer, annealed rate) still plays its first two games as when it was shipped (423
/// and 403 points), with both seeds README's Results name.
#[test]
fn shipped_breakout_model_plays_as_shipped() {
    assert_first_games_as_shipped("BreakoutDeterministic-v4", [423.0, 403.0]);
}

/// The SpaceInvadersDeterministic-v4 model shipped in trained_models/ (--model
/// universe, batched trainer) still plays its first two games as when it was shipped
/// (680 and 1,015 points); Deterministic-v4 has no random no-ops and no sticky actions,
/// so both seeds README's Results name play the same games.
#[test]
fn shipped_spaceinvaders_model_plays_as_shipped() {
    assert_first_games_as_shipped("SpaceInvadersDeterministic-v4", [680.0, 1015.0]);
}

/// The MsPacmanDeterministic-v4 model shipped in trained_models/ (--model universe,
/// batched trainer) still plays its first two games as when it was shipped (810 and
/// 1,110 points), with both seeds README's Results name.
#[test]
fn shipped_mspacman_model_plays_as_shipped() {
    assert_first_games_as_shipped("MsPacmanDeterministic-v4", [810.0, 1110.0]);
}

/// The SeaquestDeterministic-v4 model shipped in trained_models/ (--model universe,
/// batched trainer) still plays its first two games as when it was shipped (1,840
/// points each), with both seeds README's Results name.
#[test]
fn shipped_seaquest_model_plays_as_shipped() {
    assert_first_games_as_shipped("SeaquestDeterministic-v4", [1840.0, 1840.0]);
}

/// The BeamRiderDeterministic-v4 model shipped in trained_models/ (--model universe,
/// batched trainer) still plays its first two games as when it was shipped (6,262 and
/// 3,600 points), with both seeds README's Results name.
#[test]
fn shipped_beamrider_model_plays_as_shipped() {
    assert_first_games_as_shipped("BeamRiderDeterministic-v4", [6262.0, 3600.0]);
}

/// The Pendulum-v1 model shipped in trained_models/ still plays as README's Results
/// row says: evaluated as there (100 games, seed 1) it scored -218.89 ± 161.26. The
/// bound is that mean less two standard errors of a 100-game mean (161 / √100 ≈ 16),
/// room for floating-point differences between CPUs to change a few games; a random
/// policy scores about -1,200 to -1,450.
#[test]
fn shipped_pendulum_model_scores_as_in_the_readme() {
    let scratch = Scratch::new("eval-shipped-pendulum");
    let summary = evaluate_shipped(&scratch, "Pendulum-v1", "100", "1");
    assert_eq!(summary["episodes"], 100);
    let mean = summary["mean"].as_f64().unwrap();
    assert!(mean >= -218.89 - 2.0 * 16.1, "{summary}");
}

/// `env`'s model shipped in trained_models/ plays its first two games for `scores`
/// with both seeds README's Results name.
fn assert_first_games_as_shipped(env: &str, scores: [f64; 2]) {
    let scratch = Scratch::new(&format!("eval-shipped-{env}"));
    for seed in ["1", "2"] {
        let summary = evaluate_shipped(&scratch, env, "2", seed);
        assert_eq!(summary["rewards"], serde_json::json!(scores), "seed {seed}: {summary}");
    }
}

/// 100 games with seed 1 of `env`'s model shipped in trained_models/ score at least
/// `mean`, the figure README's Results row gives, less two standard errors.
fn assert_shipped_mean_holds(env: &str, mean: f64, standard_error: f64) {
    let scratch = Scratch::new(&format!("eval-shipped-{env}"));
    let summary = evaluate_shipped(&scratch, env, "100", "1");
    assert_eq!(summary["episodes"], 100);
    let played = summary["mean"].as_f64().unwrap();
    assert!(played >= mean - 2.0 * standard_error, "{summary}");
}

/// The LunarLander-v3 model shipped in trained_models/ still lands as README's Results
/// row says: 100 games with seed 1 scored 222.31 ± 60.45. The bound is that mean less
/// two standard errors (60 / √100 = 6), 210, which is still above Gymnasium's bar for
/// solved, 200; a random policy scores about -190 (Gymnasium, 100 games).
#[test]
fn shipped_lunar_lander_model_is_solved() {
    assert_shipped_mean_holds("LunarLander-v3", 222.31, 6.05);
}

/// The BipedalWalker-v3 model shipped in trained_models/ still walks as README's
/// Results row says: 100 games with seed 1 scored 308.82 ± 49.01 (a game in ten or so
/// stumbles). The bound is that mean less two standard errors (49 / √100 = 4.9), 299;
/// Gymnasium's bar for solved is 300, and standing still until the limit scores about
/// -60 to -20.
#[test]
fn shipped_bipedal_walker_model_walks() {
    assert_shipped_mean_holds("BipedalWalker-v3", 308.82, 4.9);
}

/// Each bad input is refused on one line that names it, and no file is changed.
#[test]
fn bad_eval_input_is_one_line() {
    let scratch = Scratch::new("eval-bad");
    let models = scratch.path("trained_models");
    fs::create_dir_all(&models).unwrap();
    let dat = fs::read(fixture("reference_hidden16.dat")).unwrap();
    let eval = |env: &str, extra: &[&str]| {
        let mut args = vec!["eval", "--env", env];
        args.extend_from_slice(extra);
        scratch.a3g(&args)
    };

    let line = assert_one_line_error(&eval("Pendulum-v1", &[]));
    assert!(
        line.contains("no checkpoint for Pendulum-v1") && line.contains("holds no checkpoints"),
        "{line}"
    );

    let line = assert_one_line_error(&eval("Pendulum-v1", &["--load-model-dir", "absent"]));
    assert!(line.contains("in absent (no such folder)"), "{line}");
    scratch.write("a-file", "");
    let line = assert_one_line_error(&eval("Pendulum-v1", &["--load-model-dir", "a-file"]));
    assert!(line.contains("in a-file (it is not a folder)"), "{line}");

    fs::write(models.join("BreakoutNoFrameskip-v4.dat"), &dat).unwrap();
    let line = assert_one_line_error(&eval("BreakoutNoFrameskip-v4", &[]));
    assert!(line.contains("actor_linear.weight is [6, 16] there and [4, 16] here"), "{line}");

    fs::write(models.join("CartPole-v1.pth"), &dat).unwrap();
    let line = assert_one_line_error(&eval("CartPole-v1", &[]));
    assert!(line.contains("CartPole-v1.pth") && line.contains("fc1.weight"), "{line}");

    let line = assert_one_line_error(&eval("Pendulum-v1", &[]));
    assert!(
        line.contains("BreakoutNoFrameskip-v4.dat") && line.contains("CartPole-v1.pth"),
        "the folder's checkpoints are listed: {line}"
    );

    fs::write(models.join("PongNoFrameskip-v4.dat"), &dat[..dat.len() / 2]).unwrap();
    let line = assert_one_line_error(&eval("PongNoFrameskip-v4", &[]));
    assert!(line.contains("PongNoFrameskip-v4.dat") && line.contains("cut short"), "{line}");

    let mut damaged = dat.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x40;
    fs::write(models.join("PongNoFrameskip-v4.dat"), &damaged).unwrap();
    let line = assert_one_line_error(&eval("PongNoFrameskip-v4", &[]));
    assert!(line.contains("checksum"), "{line}");

    let legacy = fs::read(fixture("reference_hidden16_legacy.dat")).unwrap();
    fs::write(models.join("PongNoFrameskip-v4.dat"), &legacy[..legacy.len() / 2]).unwrap();
    let line = assert_one_line_error(&eval("PongNoFrameskip-v4", &[]));
    assert!(line.contains("PongNoFrameskip-v4.dat") && line.contains("cut short"), "{line}");

    fs::write(
        models.join("PongNoFrameskip-v4.safetensors"),
        b"\x10\x00\x00\x00\x00\x00\x00\x00{broken",
    )
    .unwrap();
    let line = assert_one_line_error(&eval("PongNoFrameskip-v4", &[]));
    assert!(
        line.contains("PongNoFrameskip-v4.safetensors"),
        "safetensors is looked for first: {line}"
    );
    fs::remove_file(models.join("PongNoFrameskip-v4.safetensors")).unwrap();

    fs::write(models.join("PongNoFrameskip-v4.dat"), &dat).unwrap();
    let line = assert_one_line_error(&eval("PongNoFrameskip-v4", &["--gpu-id", "99"]));
    assert!(line.contains("--gpu-id 99") && line.contains("-1"), "{line}");

    let run = eval("PongNoFrameskip-v4", &["--num-episodes", "0"]);
    assert_eq!(run.status.code(), Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("--num-episodes"), "{}", run.stderr);

    assert_eq!(
        fs::read(models.join("BreakoutNoFrameskip-v4.dat")).unwrap(),
        dat,
        "nothing written over"
    );
    assert!(!scratch.path("logs").exists(), "no log for a refused run");
}

/// A model file holding one tensor of an absurd shape (a 4 MB critic_linear.weight of
/// [1, 1000000] in the shipped CartPole model, which once asked libtorch for a 4 TB
/// LSTM and aborted) is refused on one line naming the file, the tensor, both shapes
/// and what to do, before any model is built.
#[test]
fn absurd_tensor_shape_is_one_line() {
    let scratch = Scratch::new("eval-absurd-shape");
    let models = scratch.path("trained_models");
    fs::create_dir_all(&models).unwrap();
    let shipped =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("trained_models/CartPole-v1.safetensors");
    let mut tensors = checkpoint::read_model(&shipped).unwrap();
    let critic = tensors.iter_mut().find(|(name, _)| name == "critic_linear.weight").unwrap();
    let hidden = critic.1.size()[1];
    critic.1 = Tensor::zeros([1, 1_000_000], (Kind::Float, Device::Cpu));
    Tensor::write_safetensors(&tensors, models.join("CartPole-v1.safetensors")).unwrap();
    let line = assert_one_line_error(&scratch.a3g(&["eval", "--env", "CartPole-v1"]));
    let shapes = format!("critic_linear.weight is [1, 1000000] there and [1, {hidden}] here");
    assert!(line.contains("CartPole-v1.safetensors") && line.contains(&shapes), "{line}");
    assert!(line.contains("restore it or train again"), "{line}");
}
