//! Benchmark: environment steps/s of a3g's Box2D tasks on one core, replaying the
//! episodes of tests/fixtures/box2d_episodes.json (Gymnasium's seeds and actions), to
//! set beside benches/box2d_steps.py, which replays them in Gymnasium.
//!
//! Run: `benches/box2d_steps.sh`, which alternates the two on one core; the figures
//! go to docs/benchmarks.md. The one argument picks the ids starting with it.

use std::time::{Duration, Instant};

use a3g::env::{self, Action, EnvOptions};

const MEASURE: Duration = Duration::from_secs(5);

struct Episode {
    id: String,
    seed: u64,
    actions: Vec<Action>,
}

fn episodes() -> Vec<Episode> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/box2d_episodes.json");
    let text = std::fs::read_to_string(path).expect("read the fixture");
    let fixture: serde_json::Value = serde_json::from_str(&text).expect("parse the fixture");
    let as_action = |value: &serde_json::Value| match value {
        serde_json::Value::Array(values) => {
            Action::Continuous(values.iter().map(|v| v.as_f64().expect("float") as f32).collect())
        }
        index => Action::Discrete(index.as_u64().expect("index") as usize),
    };
    let list = fixture["episodes"].as_array().expect("episodes");
    let prefix = std::env::args().nth(1).expect("an id prefix: LunarLander or BipedalWalker");
    list.iter()
        .filter(|episode| episode["id"].as_str().is_some_and(|id| id.starts_with(&prefix)))
        .map(|episode| Episode {
            id: episode["id"].as_str().expect("id").to_string(),
            seed: episode["seed"].as_u64().expect("seed"),
            actions: episode["steps"]
                .as_array()
                .expect("steps")
                .iter()
                .map(|step| as_action(&step["action"]))
                .collect(),
        })
        .collect()
}

fn main() {
    let episodes = episodes();
    let mut envs: Vec<_> = episodes
        .iter()
        .map(|episode| env::make(&episode.id, &EnvOptions::default()).expect("make"))
        .collect();
    let start = Instant::now();
    let mut steps = 0u64;
    while start.elapsed() < MEASURE {
        for (episode, env) in episodes.iter().zip(envs.iter_mut()) {
            env.reset(Some(episode.seed)).unwrap();
            for action in &episode.actions {
                env.step(action).unwrap();
            }
            steps += episode.actions.len() as u64;
        }
    }
    let rate = steps as f64 / start.elapsed().as_secs_f64();
    let prefix = std::env::args().nth(1).unwrap_or_default();
    println!(
        "a3g {prefix}: {rate:.0} steps/s ({steps} steps of {} Gymnasium episodes)",
        episodes.len()
    );
}
