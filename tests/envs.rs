//! Environments through the library: seeding, threads, and each Atari id family's
//! frameskip, sticky actions and limits on the real emulator.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use a3g::env::atari::wrappers::FrameEnv;
use a3g::env::atari::{AtariGame, AtariId, Frameskip};
use a3g::env::{self, Action, EnvOptions};

/// A fingerprint of `steps` agent steps of `id` from seed `seed` under a fixed action
/// pattern: every observation, reward and flag goes into the hash.
fn trajectory(id: &str, seed: u64, steps: usize) -> u64 {
    let options = EnvOptions { seed, ..EnvOptions::default() };
    let mut env = env::make(id, &options).expect("make env");
    let actions = match env.action_space() {
        env::ActionSpace::Discrete { n } => *n,
        env::ActionSpace::Continuous { .. } => unreachable!("Atari ids only"),
    };
    let mut hasher = DefaultHasher::new();
    let hash_observation = |observation: &[f32], hasher: &mut DefaultHasher| {
        observation.iter().for_each(|value| value.to_bits().hash(hasher));
    };
    hash_observation(&env.reset(None).unwrap(), &mut hasher);
    for step in 0..steps {
        let result = env.step(&Action::Discrete((step * 7 / 5) % actions)).unwrap();
        hash_observation(&result.observation, &mut hasher);
        (result.reward.to_bits(), result.terminated, result.truncated, result.lives)
            .hash(&mut hasher);
        if result.done() {
            hash_observation(&env.reset(None).unwrap(), &mut hasher);
        }
    }
    hasher.finish()
}

/// Equal seeds give identical trajectories, in ids with every random element: random
/// frameskip, sticky actions and random no-op starts.
#[test]
fn same_seed_same_trajectory() {
    for id in ["Pong-v0", "BreakoutNoFrameskip-v0", "ALE/Seaquest-v5"] {
        assert_eq!(trajectory(id, 11, 300), trajectory(id, 11, 300), "{id}");
        assert_ne!(
            trajectory(id, 11, 300),
            trajectory(id, 12, 300),
            "{id}: the seed changes nothing"
        );
    }
}

/// Environments stepped in parallel threads give exactly the trajectories of the same
/// environments stepped one after another.
#[test]
fn threads_match_sequential_runs() {
    let cases: Vec<(&str, u64)> =
        vec![("Breakout-v0", 1), ("Breakout-v0", 2), ("MsPacmanNoFrameskip-v4", 3), ("Pong-v4", 4)];
    let sequential: Vec<u64> = cases.iter().map(|&(id, seed)| trajectory(id, seed, 200)).collect();
    let parallel: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .iter()
            .map(|&(id, seed)| scope.spawn(move || trajectory(id, seed, 200)))
            .collect();
        handles.into_iter().map(|handle| handle.join().expect("thread")).collect()
    });
    assert_eq!(sequential, parallel);
}

/// The game layer of `id` from `seed`.
fn game(id: &str, seed: u64, max_episode_steps: Option<u32>) -> AtariGame {
    AtariGame::new(&AtariId::parse(id).expect("known id"), seed, max_episode_steps)
        .expect("load game")
}

/// Emulator frames per agent step: 4 in Deterministic ids (3 in Space Invaders), 1 in
/// NoFrameskip ids, and 2, 3 or 4 drawn afresh each step in -v0/-v4.
#[test]
fn frameskip_per_family() {
    for (id, frames) in [
        ("PongDeterministic-v4", 4),
        ("SpaceInvadersDeterministic-v4", 3),
        ("PongNoFrameskip-v4", 1),
    ] {
        let mut game = game(id, 1, None);
        game.reset();
        let start = game.env_frames();
        for _ in 0..50 {
            game.step(0);
        }
        assert_eq!(game.env_frames() - start, 50 * frames, "{id}");
    }
    let mut game = game("Pong-v4", 1, None);
    game.reset();
    let mut seen = [0; 5];
    for _ in 0..300 {
        let before = game.env_frames();
        game.step(0);
        seen[(game.env_frames() - before) as usize] += 1;
    }
    assert_eq!(seen[0] + seen[1], 0, "{seen:?}");
    assert!(seen[2..].iter().all(|&count| count > 60), "skips 2..4 not uniform: {seen:?}");
}

/// With sticky actions off (-v4) the seed cannot change what a fixed action sequence
/// does; with them on (-v0, 0.25) it does.
#[test]
fn sticky_actions_per_family() {
    let play = |id: &str, seed: u64| -> Vec<Vec<u8>> {
        let mut game = game(id, seed, None);
        game.reset();
        (0..400).map(|step| game.step(if step % 20 < 10 { 2 } else { 3 }).frame).collect()
    };
    assert_eq!(play("PongDeterministic-v4", 1), play("PongDeterministic-v4", 2));
    assert_ne!(play("PongDeterministic-v0", 1), play("PongDeterministic-v0", 2));
}

/// A step limit truncates exactly at that step, and a frame limit (-v5) at the step
/// that reaches it. --max-episode-length counts agent steps above max-and-skip; as in
/// Gym, whose TimeLimit sits below the whole stack, the frames played by no-op and
/// fire reset count too.
#[test]
fn step_and_frame_limits_truncate() {
    let mut limited = game("PongDeterministic-v4", 1, Some(50));
    limited.reset();
    for step in 1..=50 {
        assert_eq!(limited.step(0).truncated, step == 50, "step {step}");
    }
    limited.reset();
    assert!(!limited.step(0).truncated, "reset restarts the count");

    let mut id = AtariId::parse("ALE/Pong-v5").unwrap();
    assert_eq!(id.family.frameskip, Frameskip::Fixed(4));
    id.family.max_episode_frames = Some(400);
    let mut framed = AtariGame::new(&id, 1, None).unwrap();
    framed.reset();
    for step in 1..=100 {
        assert_eq!(framed.step(0).truncated, step == 100, "step {step}");
    }

    let options = EnvOptions { seed: 1, max_episode_length: Some(20), ..EnvOptions::default() };
    let mut agent = env::make("PongNoFrameskip-v4", &options).unwrap();
    agent.reset(None).unwrap();
    // 1..=30 no-ops, then fire reset's FIRE and UP, 4 frames each.
    let reset_frames = agent.env_frames();
    assert!((9..=38).contains(&reset_frames), "{reset_frames} frames at reset");
    let last_step = (20 * 4 - reset_frames).div_ceil(4);
    for step in 1..=last_step {
        assert_eq!(
            agent.step(&Action::Discrete(0)).unwrap().truncated,
            step == last_step,
            "agent step {step}"
        );
    }
}

/// The full stack: observations are 1x80x80 normalised floats, Pong's score comes
/// through unclipped, and a NoFrameskip step plays skip-rate frames.
#[test]
fn atari_stack_observations_and_frames() {
    let options = EnvOptions { seed: 3, skip_rate: 4, ..EnvOptions::default() };
    let mut env = env::make("PongNoFrameskip-v4", &options).unwrap();
    assert_eq!(env.observation_shape(), &[1, 80, 80]);
    let observation = env.reset(None).unwrap();
    assert_eq!(observation.len(), 80 * 80);
    assert!(observation.iter().all(|value| value.is_finite()));
    let frames_after_reset = env.env_frames();
    let mut rewards = 0.0;
    for _ in 0..200 {
        rewards += env.step(&Action::Discrete(0)).unwrap().reward;
    }
    assert_eq!(env.env_frames() - frames_after_reset, 800);
    // Standing still loses points in Pong; each is a raw -1.
    assert!(rewards <= -1.0 && rewards.fract() == 0.0, "rewards {rewards}");
}

/// Gymnasium's Box2D episodes (tests/fixtures/make_box2d_fixture.py), replayed action by
/// action from the same seed: the lander's (landings flown by Gymnasium's heuristic
/// pilot, crashes under random actions, actions beyond [-1, 1] that Gymnasium clips)
/// and the walker's (random torques, and a crude gait that falls), normal and Hardcore;
/// then one environment of each reset three times (two seeds, then none).
///
/// The terrain and pushes (NumPy's generator), the flight on Box2D and the Python-side
/// arithmetic match exactly: until the lander first touches the ground every
/// observation is the same float and every reward the same up to a3g's f32. Contacts
/// are where the engines differ: PyPI's box2d carries Box2D 2.3.0 with patches and
/// wrapped2d 2.3.1, whose contact and time-of-impact code round differently. From the
/// lander's touchdown on they agree within 1e-4 (rewards, 100 times distances, within
/// 1e-2). The walker stands on the ground from its first step, and its legs' contacts
/// carry the differences on, growing as a chaotic system's do: within 2e-4 over the
/// first 80 steps (a random Hardcore episode passed 1e-3 at step 83 and drifted apart
/// later), so beyond 80 steps only the flags are compared. Every terminated and
/// truncated flag and every episode's length must be the same.
#[test]
fn box2d_tasks_match_gymnasium() {
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/box2d_episodes.json")).expect("fixture parses");
    let episodes = fixture["episodes"].as_array().expect("episodes");
    assert_eq!(episodes.len(), 15);
    let mut exact_steps = 0;
    for episode in episodes {
        let id = episode["id"].as_str().expect("id");
        let mut env =
            env::make(id, &EnvOptions { seed: 12345, ..EnvOptions::default() }).expect("make");
        let (exact, steps) = replay_gymnasium(env.as_mut(), id, episode);
        exact_steps += exact;
        let context = format!("{id} seed {}", episode["seed"]);
        let ended = episode["steps"][steps - 1]["terminated"].as_bool() == Some(true);
        let walker = id.starts_with("BipedalWalker");
        assert!(ended || (walker && steps == 250), "{context}: ends where Gymnasium's did");
    }
    assert!(exact_steps > 1000, "most lander steps are flight, compared exactly: {exact_steps}");
    // One environment reset again and again: the walker's world carries over from one
    // episode to the next, and a reset without a seed goes on with the same stream.
    for sequence in fixture["sequences"].as_array().expect("sequences") {
        let id = sequence["id"].as_str().expect("id");
        let mut env =
            env::make(id, &EnvOptions { seed: 12345, ..EnvOptions::default() }).expect("make");
        for part in sequence["parts"].as_array().expect("parts") {
            replay_gymnasium(env.as_mut(), id, part);
        }
    }
}

/// Resets `env` as the recorded episode was reset (its seed, or none) and replays its
/// actions, comparing as `box2d_tasks_match_gymnasium` says; returns the steps compared
/// exactly and the steps played.
fn replay_gymnasium(
    env: &mut dyn env::Env,
    id: &str,
    episode: &serde_json::Value,
) -> (usize, usize) {
    let floats = |value: &serde_json::Value| -> Vec<f32> {
        value
            .as_array()
            .expect("array")
            .iter()
            .map(|x| x.as_f64().expect("number") as f32)
            .collect()
    };
    let gap = |ours: &[f32], theirs: &[f32]| {
        ours.iter().zip(theirs).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max)
    };
    let seed = episode["seed"].as_u64();
    let walker = id.starts_with("BipedalWalker");
    let context = format!("{id} seed {seed:?}");
    let reset = env.reset(seed).unwrap();
    if walker {
        assert!(gap(&reset, &floats(&episode["reset"])) <= 2e-4, "{context}: reset");
    } else {
        assert_eq!(reset, floats(&episode["reset"]), "{context}: reset");
    }
    let steps = episode["steps"].as_array().expect("steps");
    let mut touched_ground = walker;
    let mut exact_steps = 0;
    for (index, expected) in steps.iter().enumerate() {
        let action = match &expected["action"] {
            serde_json::Value::Array(_) => Action::Continuous(floats(&expected["action"])),
            discrete => Action::Discrete(discrete.as_u64().expect("action") as usize),
        };
        let step = env.step(&action).unwrap();
        let context = format!("{context}, step {}", index + 1);
        let observation = floats(&expected["observation"]);
        let reward = expected["reward"].as_f64().expect("reward");
        let terminated = expected["terminated"].as_bool().expect("terminated");
        touched_ground |= terminated || observation[6] > 0.0 || observation[7] > 0.0;
        let reward_gap = (f64::from(step.reward) - reward).abs();
        let observation_gap = gap(&step.observation, &observation);
        let ours = &step.observation;
        if walker {
            if index < 80 {
                assert!(observation_gap <= 2e-4, "{context}: {ours:?} against {observation:?}");
                assert!(reward_gap <= 1e-3, "{context}: reward {} against {reward}", step.reward);
            }
        } else if touched_ground {
            assert!(observation_gap <= 1e-4, "{context}: {ours:?} against {observation:?}");
            assert!(reward_gap <= 1e-2, "{context}: reward {} against {reward}", step.reward);
        } else {
            assert_eq!(step.observation, observation, "{context}");
            assert_eq!(step.reward, reward as f32, "{context}: reward");
            exact_steps += 1;
        }
        assert_eq!(step.terminated, terminated, "{context}");
        let truncated = expected["truncated"].as_bool().expect("truncated");
        assert_eq!(step.truncated, truncated, "{context}");
    }
    (exact_steps, steps.len())
}
