//! TensorBoard event files for `a3g train --tensorboard-logger`, what the reference
//! writes with its SummaryWriter: the test agent's games with a histogram of every
//! parameter that played them, and training rates and losses at each status line.
//! Every scalar is indexed by agent steps.

use std::fs;
use std::path::{Path, PathBuf};

use tch::{Kind, Tensor};
use tensorboard_rs::summary_writer::SummaryWriter;

use crate::error::{Error, Result};

/// Buckets of each parameter histogram.
const HISTOGRAM_BUCKETS: i64 = 30;

/// The run's event file writer.
pub struct Board {
    writer: SummaryWriter,
    dir: PathBuf,
}

/// Training figures between two status lines.
pub struct TrainingFigures {
    pub steps_per_second: f64,
    pub frames_per_second: f64,
    pub policy_loss: f64,
    pub value_loss: f64,
    pub entropy: f64,
    pub learning_rate: f64,
}

impl Board {
    /// Opens `<dir>/<env>_training/` for a new event file. The folder is checked
    /// first, because the event writer reports failures only by panicking.
    pub fn create(dir: &Path, env: &str) -> Result<Self> {
        let dir = dir.join(format!("{}_training", env.replace('/', "_")));
        let io = |action, source| Error::Io { action, path: dir.clone(), cause: source };
        fs::create_dir_all(&dir).map_err(|source| io("create the TensorBoard folder", source))?;
        let probe = dir.join(format!(".a3g-write-test-{}", std::process::id()));
        fs::write(&probe, b"").map_err(|source| io("write TensorBoard files into", source))?;
        let _ = fs::remove_file(&probe);
        Ok(Board { writer: SummaryWriter::new(&dir), dir })
    }

    /// Where the event files go.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One test game: its score, length and the running mean, and a histogram of each
    /// parameter of the weights that played it.
    pub fn test_game(
        &mut self,
        agent_steps: u64,
        reward: f64,
        length: u64,
        mean: f64,
        parameters: &[(String, Tensor)],
    ) {
        let step = agent_steps as usize;
        self.writer.add_scalar("test/episode_reward", reward as f32, step);
        self.writer.add_scalar("test/episode_length", length as f32, step);
        self.writer.add_scalar("test/reward_mean", mean as f32, step);
        for (name, tensor) in parameters {
            let histogram = Histogram::of(tensor);
            self.writer.add_histogram_raw(
                &format!("parameters/{name}"),
                histogram.min,
                histogram.max,
                histogram.count,
                histogram.sum,
                histogram.sum_squares,
                &histogram.bucket_limits,
                &histogram.bucket_counts,
                step,
            );
        }
    }

    /// The figures of one status line.
    pub fn training(&mut self, agent_steps: u64, figures: &TrainingFigures) {
        let step = agent_steps as usize;
        for (tag, value) in [
            ("train/agent_steps_per_second", figures.steps_per_second),
            ("train/frames_per_second", figures.frames_per_second),
            ("train/policy_loss", figures.policy_loss),
            ("train/value_loss", figures.value_loss),
            ("train/entropy", figures.entropy),
            ("train/learning_rate", figures.learning_rate),
        ] {
            if value.is_finite() {
                self.writer.add_scalar(tag, value as f32, step);
            }
        }
    }

    /// Writes what is buffered to disk.
    pub fn flush(&mut self) {
        self.writer.flush();
    }
}

/// A histogram in TensorBoard's form: equal-width buckets between the extremes, each
/// named by its upper edge.
struct Histogram {
    min: f64,
    max: f64,
    count: f64,
    sum: f64,
    sum_squares: f64,
    bucket_limits: Vec<f64>,
    bucket_counts: Vec<f64>,
}

impl Histogram {
    fn of(tensor: &Tensor) -> Self {
        let values =
            tensor.detach().to_device(tch::Device::Cpu).to_kind(Kind::Double).flatten(0, -1);
        let count = values.numel() as f64;
        if count == 0.0 {
            return Histogram {
                min: 0.0,
                max: 0.0,
                count,
                sum: 0.0,
                sum_squares: 0.0,
                bucket_limits: Vec::new(),
                bucket_counts: Vec::new(),
            };
        }
        let min = values.min().double_value(&[]);
        let max = values.max().double_value(&[]);
        let sum = values.sum(Kind::Double).double_value(&[]);
        let sum_squares = values.square().sum(Kind::Double).double_value(&[]);
        let (bucket_limits, bucket_counts) = if min == max {
            (vec![max], vec![count])
        } else {
            // With no range given, histc spans the values' own minimum and maximum.
            let counts = values.histc(HISTOGRAM_BUCKETS);
            let width = (max - min) / HISTOGRAM_BUCKETS as f64;
            let limits = (1..=HISTOGRAM_BUCKETS).map(|index| min + width * index as f64).collect();
            (limits, Vec::<f64>::try_from(counts).expect("f64 counts"))
        };
        Histogram { min, max, count, sum, sum_squares, bucket_limits, bucket_counts }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buckets cover every value once, with upper edges ending at the maximum.
    #[test]
    fn histogram_counts_every_value() {
        let values: Vec<f32> = (0..300).map(|index| index as f32 / 4.0).collect();
        let histogram = Histogram::of(&Tensor::from_slice(&values));
        assert_eq!((histogram.min, histogram.max, histogram.count), (0.0, 74.75, 300.0));
        assert_eq!(histogram.bucket_counts.iter().sum::<f64>(), 300.0);
        assert_eq!(histogram.bucket_limits.len(), HISTOGRAM_BUCKETS as usize);
        assert!((histogram.bucket_limits.last().unwrap() - 74.75).abs() < 1e-9);
        assert_eq!(histogram.sum, (0..300).map(|index| index as f64 / 4.0).sum::<f64>());
        let constant = Histogram::of(&Tensor::from_slice(&[2.0f32; 5]));
        assert_eq!((constant.bucket_limits, constant.bucket_counts), (vec![2.0], vec![5.0]));
    }
}
