//! `a3g eval`: the reference's 100-episode evaluation. Loads a saved model (a3g's
//! safetensors or a PyTorch `torch.save` state dict), plays greedy games, logs each
//! one, records some as GIFs if asked, and ends with a summary.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use tch::nn;

use crate::checkpoint::{self, OpenedModel};
use crate::cli::EvalArgs;
use crate::config::EvalConfig;
use crate::console;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::game_log::{self, GameLog};
use crate::gif::{self, GifWriter};
use crate::model::ActorCritic;
use crate::test_agent::play_greedy_game;

/// What `--json` prints: the evaluation's summary and every game's score.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub env: String,
    /// Paths as text (lossy where not UTF-8), so the summary always serialises.
    pub checkpoint: String,
    pub episodes: usize,
    pub mean: f64,
    /// Population standard deviation of the scores.
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub mean_length: f64,
    pub wall_seconds: f64,
    pub rewards: Vec<f64>,
    pub lengths: Vec<u64>,
    /// GIFs written by --render.
    pub recordings: Vec<String>,
}

/// Runs `a3g eval`.
pub fn run(args: &EvalArgs) -> Result<()> {
    let mut config = EvalConfig::new(args)?;
    let OpenedModel { spec, mut env, played, .. } = config.open_model()?;
    let checkpoint::PlayedModel { path, tensors, .. } =
        played.expect("a model opened to play holds what it plays");
    let env_id = config.env.id.clone();
    tch::set_num_threads(1);
    let device = config.device;
    let vs = nn::VarStore::new(device);
    let model = ActorCritic::new(&vs, &spec);
    checkpoint::copy_matching(&path, &tensors, model.parameters(), checkpoint::PLAY_MISMATCH)?;

    let stem = env_id.replace('/', "_");
    let mut log = GameLog::append(&config.log_path, &config.arguments, game_log::EVAL_STARTED)?;
    if let Some(record_dir) = &config.record_dir {
        crate::files::create_dir_all(record_dir).map_err(|source| Error::Io {
            action: "create the recording folder",
            path: record_dir.clone(),
            cause: source,
        })?;
        let removed = gif::remove_stale_recordings(record_dir);
        if removed > 0 {
            console::warn(&format!(
                "note: removed {removed} unfinished recordings that an interrupted evaluation left in {}",
                record_dir.display()
            ));
        }
    }
    // With --json, stdout carries only the summary object.
    let say = |line: &str| {
        if config.json {
            console::warn(line);
        } else {
            console::say(line);
        }
    };
    say(&format!("evaluating {} on {env_id} over {} games", path.display(), config.num_episodes));

    let started = Instant::now();
    let (mut rewards, mut lengths, mut recordings) = (Vec::new(), Vec::new(), Vec::new());
    for episode in 0..config.num_episodes {
        let recording = match &config.record_dir {
            Some(record_dir) if episode % config.render_freq == 0 => {
                Some(record_dir.join(format!("{stem}_game{:04}.gif", episode + 1)))
            }
            _ => None,
        };
        let mut recorder: Option<GifWriter> = None;
        // The recording starts with the game's first frame, after its reset: a
        // Gymnasium environment renders nothing before one.
        let (reward, length) = play_greedy_game(
            env.as_mut(),
            &model,
            device,
            config.env.max_episode_length,
            None,
            |env: &mut dyn Env| {
                let Some(file) = &recording else { return Ok(()) };
                let frame = env.render()?;
                let recorder = match &mut recorder {
                    Some(recorder) if recorder.size() != (frame.width, frame.height) => {
                        let (width, height) = recorder.size();
                        return Err(Error::EnvProcess {
                            env: env_id.clone(),
                            problem: format!(
                                "render() changed its picture from {height}x{width} to {}x{} during a \
                                 game, and a recording keeps one size; make render() return one size, \
                                 or leave out --render",
                                frame.height, frame.width
                            ),
                        });
                    }
                    Some(recorder) => recorder,
                    None => recorder.insert(GifWriter::create(
                        file,
                        frame.width,
                        frame.height,
                        env.step_seconds(),
                    )?),
                };
                recorder.add(&frame)
            },
        )?
        .expect("no stop is passed, so every game finishes");
        rewards.push(reward);
        lengths.push(length);
        let mean = rewards.iter().sum::<f64>() / rewards.len() as f64;
        let line = game_log::game_line(started.elapsed(), reward, length, mean);
        say(&line);
        log.write_line(&line)?;
        if let Some(recorder) = recorder {
            let file = recorder.finish()?;
            say(&format!("recorded game {} in {}", episode + 1, file.display()));
            recordings.push(file);
        }
    }

    let summary = summarize(&env_id, &path, rewards, lengths, started.elapsed(), recordings);
    let line = summary_line(&summary);
    if config.json {
        // Numbers, strings and lossily written paths: nothing here can fail to serialise.
        console::say(&serde_json::to_string(&summary).unwrap_or_default());
    } else {
        console::say(&line);
    }
    log.write_line(&line)
}

fn summarize(
    env: &str,
    checkpoint: &Path,
    rewards: Vec<f64>,
    lengths: Vec<u64>,
    wall: Duration,
    recordings: Vec<PathBuf>,
) -> Summary {
    let count = rewards.len() as f64;
    let mean = rewards.iter().sum::<f64>() / count;
    let variance = rewards.iter().map(|reward| (reward - mean).powi(2)).sum::<f64>() / count;
    Summary {
        env: env.to_string(),
        checkpoint: checkpoint.to_string_lossy().into_owned(),
        episodes: rewards.len(),
        mean,
        std: variance.sqrt(),
        min: rewards.iter().copied().fold(f64::INFINITY, f64::min),
        max: rewards.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        mean_length: lengths.iter().sum::<u64>() as f64 / count,
        wall_seconds: wall.as_secs_f64(),
        rewards,
        lengths,
        recordings: recordings.iter().map(|path| path.to_string_lossy().into_owned()).collect(),
    }
}

fn summary_line(summary: &Summary) -> String {
    format!(
        "{} episodes: reward mean {:.2} ± {:.2} (std), min {:.2}, max {:.2}, mean length {:.1}, wall time {}",
        summary.episodes,
        summary.mean,
        summary.std,
        summary.min,
        summary.max,
        summary.mean_length,
        game_log::clock(Duration::from_secs_f64(summary.wall_seconds)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary's statistics: population standard deviation, extremes, lengths.
    #[test]
    fn summary_statistics() {
        let summary = summarize(
            "CartPole-v1",
            Path::new("m.safetensors"),
            vec![2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0],
            vec![10, 20, 30, 40, 50, 60, 70, 80],
            Duration::from_secs(3),
            Vec::new(),
        );
        assert_eq!((summary.mean, summary.std), (5.0, 2.0));
        assert_eq!((summary.min, summary.max, summary.mean_length), (2.0, 9.0, 45.0));
        assert_eq!(
            summary_line(&summary),
            "8 episodes: reward mean 5.00 ± 2.00 (std), min 2.00, max 9.00, mean length 45.0, wall time 00h 00m 03s"
        );
    }
}
