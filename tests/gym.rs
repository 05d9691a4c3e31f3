//! Environments from outside a3g: Gymnasium's ids (`--env gym:<id>`) and a user's own
//! class (`--env <file.py>:<Class>`), each in a Python process a3g owns, with the
//! Gymnasium that scripts/test installs into .deps/gymnasium.

use std::path::Path;

use crate::util::{assert_no_env_host_left, assert_one_line_error, sidecar_json, Scratch};

/// A user's environment: observations of `size` values, two actions, a reward of 1 a
/// step; `fail` makes step `after` raise, crash, abort, exit (alone, or leaving a process
/// it forked), hang, or print to stdout (which must not disturb a3g's pipe).
const USER_ENV: &str = r#"
import os, sys, time
import numpy as np
import gymnasium as gym

class Corridor(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, size=3, fail="none", after=50, frames="fixed", render_mode=None):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (size,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.size, self.fail, self.after, self.steps = size, fail, after, 0
        self.frames = frames
        self.render_mode = render_mode

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 0
        return np.zeros(self.size, np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.steps >= self.after:
            if self.fail == "raise":
                raise ValueError("the simulator lost its state")
            if self.fail == "crash":
                os.kill(os.getpid(), 11)
            if self.fail == "abort":
                os.abort()
            if self.fail == "exit":
                os._exit(3)
            if self.fail == "fork-exit":
                # A process it started outlives it, holding its pipes open.
                if os.fork() == 0:
                    time.sleep(3600)
                    os._exit(0)
                os._exit(3)
            if self.fail == "hang":
                time.sleep(3600)
        print("a chatty environment writes to stdout")
        self.position += 1 if action == 1 else -1
        observation = np.full(self.size, self.position / 10, np.float32).clip(-1, 1)
        return observation, 1.0, abs(self.position) >= 10, False, {}

    def render(self):
        if self.frames == "empty":
            return np.zeros((0, 0, 3), np.uint8)
        taller = self.steps if self.frames == "growing" else 0
        return np.zeros((8 + taller, 8, 3), np.uint8)

class Pixels(Corridor):
    """The corridor seen as a 30x40 colour picture: a white column where the agent is."""

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Box(0, 255, (30, 40, 3), np.uint8)

    def picture(self):
        image = np.zeros((30, 40, 3), np.uint8)
        image[:, min(39, 20 + 2 * self.position)] = 255
        return image

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.picture(), {}

    def step(self, action):
        _, reward, terminated, truncated, info = super().step(action)
        return self.picture(), reward, terminated, truncated, info

class FloatPixels(Pixels):
    def step(self, action):
        picture, reward, terminated, truncated, info = super().step(action)
        return picture / 255.0, reward, terminated, truncated, info

class ChannelsFirst(Pixels):
    def step(self, action):
        picture, reward, terminated, truncated, info = super().step(action)
        return picture.transpose(2, 0, 1), reward, terminated, truncated, info

class Mapping(Corridor):
    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})

class ManyActions(Corridor):
    def __init__(self):
        super().__init__()
        self.action_space = gym.spaces.Discrete(10**12)

class HugeReward(Corridor):
    def step(self, action):
        observation, _, terminated, truncated, info = super().step(action)
        return observation, 1e300, terminated, truncated, info

class IntegerActions(Corridor):
    def __init__(self):
        super().__init__()
        self.action_space = gym.spaces.Box(0, 4, (1,), np.int64)

class OldGym(Corridor):
    """Gym's API before 0.26: reset() takes no seed and returns the observation alone."""

    def reset(self):
        return super().reset()[0]

    def step(self, action):
        observation, reward, terminated, _, info = super().step(action)
        return observation, reward, terminated, info

class OldGymSeeded(Corridor):
    """Gym 0.22 to 0.25: reset() takes a seed but returns the observation alone."""

    def reset(self, seed=None, options=None):
        return super().reset(seed=seed)[0]

class FourValueStep(Corridor):
    """A step of old Gym's four values after a Gymnasium reset."""

    def step(self, action):
        observation, reward, terminated, _, info = super().step(action)
        return observation, reward, terminated, info
"#;

fn train_user_env(scratch: &Scratch, kwargs: &str, extra: &[&str]) -> crate::util::Run {
    scratch.write("corridor.py", USER_ENV);
    let args = [
        &[
            "train",
            "--env",
            "corridor.py:Corridor",
            "--env-kwargs",
            kwargs,
            "--workers",
            "1",
            "--hidden-size",
            "16",
        ][..],
        extra,
    ]
    .concat();
    scratch.a3g_gym(&args)
}

/// Gymnasium's own CartPole-v1 trains through the bridge, is saved under its id, and
/// `eval` plays it again; the sidecar records how it was made.
#[test]
fn a_gymnasium_id_trains_saves_and_evaluates() {
    let scratch = Scratch::new("gym-cartpole");
    let run = scratch.a3g_gym(&[
        "train",
        "--env",
        "gym:CartPole-v1",
        "--workers",
        "2",
        "--hidden-size",
        "16",
        "--max-steps",
        "3000",
    ]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(
        run.stdout.contains("saved trained_models/gym:CartPole-v1.safetensors"),
        "{}",
        run.stdout
    );
    let sidecar = sidecar_json(&scratch, "gym:CartPole-v1");
    assert_eq!(sidecar["env"], "gym:CartPole-v1");
    assert_eq!(sidecar["trained_with"]["outside_env"]["kwargs"], serde_json::json!({}));
    let run =
        scratch.a3g_gym(&["eval", "--env", "gym:CartPole-v1", "--num-episodes", "3", "--json"]);
    assert!(run.status.success(), "{}", run.stderr);
    let summary: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("JSON");
    assert_eq!(summary["episodes"], 3);
    assert!(summary["mean"].as_f64().unwrap() >= 8.0, "{summary}");
}

/// A user's class is made with --env-kwargs, which the sidecar records: `eval` and
/// `train --load` without them make it as it was trained, and other kwargs that change
/// its spaces are refused on one line. Its prints to stdout do not disturb a3g, and
/// `eval --render` records its frames.
#[test]
fn a_users_class_is_made_again_as_it_was_trained() {
    let scratch = Scratch::new("gym-user-class");
    let run = train_user_env(&scratch, r#"{"size": 5}"#, &["--max-steps", "1500"]);
    assert!(run.status.success(), "{}", run.stderr);
    let env = "corridor.py:Corridor";
    assert_eq!(
        sidecar_json(&scratch, env)["trained_with"]["outside_env"]["kwargs"],
        serde_json::json!({"size": 5})
    );
    let run = scratch.a3g_gym(&["eval", "--env", env, "--num-episodes", "2", "--render"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(scratch
        .path("logs/corridor.py:Corridor_games/corridor.py:Corridor_game0001.gif")
        .is_file());
    let run = scratch.a3g_gym(&["train", "--env", env, "--load", "--max-steps", "2000"]);
    assert!(run.status.success(), "{}", run.stderr);

    let run = scratch.a3g_gym(&["eval", "--env", env, "--env-kwargs", r#"{"size": 7}"#]);
    let line = assert_one_line_error(&run);
    assert!(line.contains(r#"{"size":7}"#) && line.contains(r#"{"size":5}"#), "{line}");
    assert_no_env_host_left(&scratch);
}

/// `eval --render` of a class whose pictures it cannot record (one of no pixels, or
/// one that changes size within a game) ends on one line saying so.
#[test]
fn pictures_a_recording_cannot_hold_are_refused_on_one_line() {
    let cases = [
        ("empty", "render() gave a 0x0 picture a3g cannot record"),
        ("growing", "render() changed its picture from 8x8 to 9x8 during a game"),
    ];
    for (frames, expected) in cases {
        let scratch = Scratch::new(&format!("gym-frames-{frames}"));
        let kwargs = format!(r#"{{"frames": "{frames}"}}"#);
        let run = train_user_env(&scratch, &kwargs, &["--max-steps", "100"]);
        assert!(run.status.success(), "{}", run.stderr);
        let env = "corridor.py:Corridor";
        let run = scratch.a3g_gym(&["eval", "--env", env, "--num-episodes", "1", "--render"]);
        let line = assert_one_line_error(&run);
        assert!(line.contains(expected), "{frames}: {line}");
        assert_no_env_host_left(&scratch);
    }
}

/// Image observations go to the convolutional networks: a user's class that shows a
/// 30x40 colour picture trains with the universe network on 42x42 grey screens, which
/// the sidecar records and `eval` plays again.
#[test]
fn images_from_a_users_class_feed_the_universe_network() {
    let scratch = Scratch::new("gym-images");
    scratch.write("corridor.py", USER_ENV);
    let env = "corridor.py:Pixels";
    let train =
        ["train", "--env", env, "--model", "universe", "--workers", "1", "--max-steps", "600"];
    let run = scratch.a3g_gym(&train);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(sidecar_json(&scratch, env)["model"]["body"], "Universe");
    let run = scratch.a3g_gym(&["eval", "--env", env, "--num-episodes", "2"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.stdout.contains("2 episodes: reward mean"), "{}", run.stdout);
}

/// An environment that raises, crashes, aborts, exits or hangs mid-run ends the run on one
/// line naming it, the thread and what happened, keeps what training reached in a
/// checkpoint, and leaves no Python process behind, nor one it started; a host that
/// ended is told from a slow one though a process it forked holds its pipe.
#[test]
fn a_failing_environment_ends_the_run_on_one_line() {
    let cases = [
        ("raise", "raised ValueError: the simulator lost its state in step()"),
        ("crash", "killed by signal 11 (SIGSEGV, a crash) during step(), its last words: Fatal Python error: Segmentation fault"),
        ("abort", "killed by signal 6 (SIGABRT) during step(), its last words: Fatal Python error: Aborted"),
        ("exit", "exited with status 3 during step(), its last words: a chatty environment writes to stdout"),
        ("fork-exit", "exited with status 3 during step()"),
        ("hang", "no reply to step() within 2 s, so its Python process was stopped"),
    ];
    for (fail, expected) in cases {
        let scratch = Scratch::new(&format!("gym-fail-{fail}"));
        let kwargs = format!(r#"{{"fail": "{fail}", "after": 400}}"#);
        let run =
            train_user_env(&scratch, &kwargs, &["--max-steps", "100000", "--env-timeout", "2"]);
        let line = assert_one_line_error(&run);
        assert!(
            line.contains("corridor.py:Corridor: ") && line.contains(expected),
            "{fail}: {line}"
        );
        assert!(
            line.starts_with("error: worker 0: ") || line.starts_with("error: test agent: "),
            "{line}"
        );
        assert!(
            run.stdout.contains("stopped by a failed environment: saved"),
            "{fail}: {}",
            run.stdout
        );
        assert!(
            Path::new(&scratch.path("trained_models/corridor.py:Corridor.safetensors")).is_file()
        );
        assert_no_env_host_left(&scratch);
    }
}

/// An environment that fails before the first update leaves no checkpoint, which would
/// be untrained weights standing in the way of the next run once the environment is
/// mended.
#[test]
fn an_environment_that_fails_at_once_leaves_no_checkpoint() {
    let scratch = Scratch::new("gym-fail-at-once");
    let model = scratch.path("trained_models/corridor.py:Corridor.safetensors");
    let run = train_user_env(&scratch, r#"{"fail": "exit", "after": 1}"#, &["--max-steps", "1000"]);
    let line = assert_one_line_error(&run);
    assert!(line.contains("exited with status 3 during step()"), "{line}");
    assert!(
        run.stdout
            .contains("stopped by a failed environment before the first update: nothing saved"),
        "{}",
        run.stdout
    );
    assert!(!Path::new(&model).exists());
    let mended = train_user_env(&scratch, r#"{"fail": "none"}"#, &["--max-steps", "200"]);
    assert!(mended.status.success(), "{}", mended.stderr);
    assert!(Path::new(&model).is_file());
    assert_no_env_host_left(&scratch);
}

/// What a3g cannot play or start is refused on one line: a space it has no network for
/// (naming it), one too large for memory at any hidden size, pictures not of the type
/// and shape their space says, a reward past 32-bit floats, kwargs that are not a JSON
/// object, kwargs for a built-in id, a Python that does not exist, a class that is not
/// there, kwargs the class does not take, and old Gym's API (with what to do about it).
#[test]
fn what_the_bridge_cannot_play_is_refused_on_one_line() {
    let scratch = Scratch::new("gym-refused");
    scratch.write("corridor.py", USER_ENV);
    let cases: [(&[&str], &str); 16] = [
        (
            &["--env", "corridor.py:Corridor:Extra"],
            "corridor.py:Corridor:Extra has a colon too many",
        ),
        (
            &["--env", "corridor.py:HugeReward"],
            "step() gave the reward 1e300, beyond the 3.4028235e38",
        ),
        (&["--env", "corridor.py:IntegerActions"], "its action space is a Box of int64"),
        (
            &["--env", "corridor.py:FloatPixels", "--model", "universe"],
            "the observation is an array of float64 shaped (30, 40, 3), not the uint8 (30, 40, 3)",
        ),
        (
            &["--env", "corridor.py:ChannelsFirst", "--model", "universe"],
            "the observation is an array of uint8 shaped (3, 30, 40), not the uint8 (30, 40, 3)",
        ),
        (&["--env", "corridor.py:Mapping"], "its observation space Dict"),
        (
            &["--env", "corridor.py:ManyActions"],
            "the environment's observations of 3 values and 1000000000000 actions give",
        ),
        (&["--env", "corridor.py:Corridor", "--env-kwargs", "[1]"], "is not a JSON object"),
        (&["--env", "CartPole-v1", "--env-kwargs", "{}"], "CartPole-v1 is built in"),
        (
            &["--env", "gym:CartPole-v1", "--python", "/no/such/python"],
            "cannot start Python \"/no/such/python\"",
        ),
        (
            &["--env", "corridor.py:Nowhere"],
            "raised AttributeError: corridor.py has no Nowhere while being made",
        ),
        (
            &["--env", "corridor.py:Corridor", "--env-kwargs", r#"{"colour": 1}"#],
            "got an unexpected keyword argument 'colour' while being made",
        ),
        (
            &["--env", "corridor.py:OldGym"],
            "takes no seed, as in old Gym in reset(); a3g plays Gymnasium's API",
        ),
        (
            &["--env", "corridor.py:OldGymSeeded"],
            "returned ndarray, not (observation, info), as in old Gym in reset(); a3g plays",
        ),
        (
            &["--env", "corridor.py:FourValueStep"],
            "step() returned 4 values, not 5, as in old Gym in step(); a3g plays",
        ),
        (
            &["--env", "corridor.py:Corridor", "--env-wrapper", "ImgObsWrapper"],
            "--env-wrapper ImgObsWrapper names no class",
        ),
    ];
    for (flags, expected) in cases {
        let run = scratch.a3g_gym(&[&["train", "--max-steps", "100"][..], flags].concat());
        let line = assert_one_line_error(&run);
        assert!(line.contains(expected), "{flags:?}: {line}");
    }
}

/// A package of environments outside Gymnasium, imported to register its ids: MiniGrid's
/// Dict observations are refused, pointing at --env-wrapper; with its own wrapper and
/// Gymnasium's FlattenObservation it trains, the sidecar records both and the import,
/// and `eval` makes it again from them and refuses other wrappers.
#[test]
fn a_package_outside_gymnasium_trains_through_its_wrappers() {
    let scratch = Scratch::new("gym-minigrid");
    let env = "gym:MiniGrid-Empty-5x5-v0";
    let made = ["--env", env, "--env-import", "minigrid"];
    let run = scratch.a3g_gym(&[&["train", "--max-steps", "100"][..], &made].concat());
    let line = assert_one_line_error(&run);
    assert!(
        line.contains("its observation space Dict") && line.contains("--env-wrapper"),
        "{line}"
    );

    let wrappers = [
        "--env-wrapper",
        "minigrid.wrappers:ImgObsWrapper",
        "--env-wrapper",
        "gymnasium.wrappers:FlattenObservation",
    ];
    let small = ["--workers", "1", "--hidden-size", "16", "--max-steps", "1000"];
    let run = scratch.a3g_gym(&[&["train"][..], &made, &wrappers, &small].concat());
    assert!(run.status.success(), "{}", run.stderr);
    let made_with = &sidecar_json(&scratch, env)["trained_with"]["outside_env"];
    assert_eq!(made_with["imports"], serde_json::json!(["minigrid"]));
    assert_eq!(
        made_with["wrappers"],
        serde_json::json!([
            "minigrid.wrappers:ImgObsWrapper",
            "gymnasium.wrappers:FlattenObservation"
        ])
    );
    let run = scratch.a3g_gym(&["eval", "--env", env, "--num-episodes", "2"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.stdout.contains("2 episodes: reward mean"), "{}", run.stdout);

    let one_wrapper = ["--env-wrapper", "minigrid.wrappers:FlatObsWrapper"];
    let run = scratch.a3g_gym(&[&["eval", "--env", env][..], &made[2..], &one_wrapper].concat());
    let line = assert_one_line_error(&run);
    assert!(line.contains("FlatObsWrapper") && line.contains("ImgObsWrapper"), "{line}");
    assert_no_env_host_left(&scratch);
}

/// The other spaces a3g plays, through Gymnasium's own tasks: FrozenLake's Discrete
/// observations become one-hot inputs of the MLP, and Pendulum's Box of torques goes
/// to the Gaussian head with the space's bounds; each trains and plays again.
#[test]
fn discrete_observations_and_box_actions_train_through_the_bridge() {
    let cases = [
        ("gym:FrozenLake-v1", "/body/Mlp/inputs", serde_json::json!(16)),
        ("gym:Pendulum-v1", "/head/Gaussian/high", serde_json::json!([2.0])),
    ];
    for (env, part, expected) in cases {
        let scratch = Scratch::new("gym-spaces");
        let train = ["train", "--env", env, "--workers", "1", "--hidden-size", "16"];
        let run = scratch.a3g_gym(&[&train[..], &["--max-steps", "600"]].concat());
        assert!(run.status.success(), "{env}: {}", run.stderr);
        let model = &sidecar_json(&scratch, env)["model"];
        assert_eq!(model.pointer(part), Some(&expected), "{env}: {model}");
        let run = scratch.a3g_gym(&["eval", "--env", env, "--num-episodes", "2"]);
        assert!(run.status.success(), "{env}: {}", run.stderr);
        assert_no_env_host_left(&scratch);
    }
}
