//! TensorBoard event files for `a3g train --tensorboard-logger`, what the reference
//! writes with its SummaryWriter: the test agent's games with a histogram of every
//! parameter that played them, and training rates and losses at each status line.
//! Every scalar is indexed by agent steps.
//!
//! The events are written here, on the caller's thread, rather than by
//! tensorboard-rs's SummaryWriter: its writer thread panics on a failed write and its
//! `Drop` then panics again, so a disk that fills mid-run aborted training. Here a
//! failed write is reported once and turns the board off; training goes on.

use std::env;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use protobuf::Message;
use tch::{Kind, Tensor};
use tensorboard_proto::event::Event;
use tensorboard_proto::summary::Summary;
use tensorboard_rs::record_writer::RecordWriter;
use tensorboard_rs::summary::{histogram_raw, scalar};

use crate::error::{Error, Result};

/// Buckets of each parameter histogram.
const HISTOGRAM_BUCKETS: i64 = 30;

/// Makes every write to the event file past its first this many bytes fail as a full
/// disk would, so that tests can fill the disk mid-run without root.
const FAULT_AFTER_BYTES: &str = "A3G_FAULT_TENSORBOARD_AFTER_BYTES";

/// The run's event file writer. After its first failed write it says so once on
/// stderr and writes nothing more, so a full disk stops TensorBoard, not training.
pub struct Board {
    dir: PathBuf,
    /// TFRecord-framed events, until a write fails.
    records: Option<Records>,
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
    /// Starts a new event file in `<dir>/<env>_training/`. A folder or file that cannot
    /// be made is an error here, before training starts; a write that fails later only
    /// stops the board.
    pub fn create(dir: &Path, env: &str) -> Result<Self> {
        let dir = dir.join(format!("{}_training", env.replace('/', "_")));
        crate::files::create_dir_all(&dir).map_err(|source| Error::Io {
            action: "create the TensorBoard folder",
            path: dir.clone(),
            cause: source,
        })?;
        let path = dir.join(event_file_name());
        let io = |source| Error::Io {
            action: "write the TensorBoard event file",
            path: path.clone(),
            cause: source,
        };
        let file = File::create(&path).map_err(io)?;
        let room = env::var(FAULT_AFTER_BYTES).ok().and_then(|bytes| bytes.parse().ok());
        let mut records = RecordWriter::new(BufWriter::new(EventSink { file, room }));
        // Every TensorBoard writer opens its file with this event naming the format.
        let mut version = Event::new();
        version.set_wall_time(now());
        version.set_file_version("brain.Event:2".to_string());
        write_event(&mut records, &version).and_then(|()| records.flush()).map_err(io)?;
        Ok(Board { dir, records: Some(records) })
    }

    /// Where the event files go.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the board still writes: false once a write failed and stopped it.
    pub fn writing(&self) -> bool {
        self.records.is_some()
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
        if self.records.is_none() {
            return;
        }
        let mut summaries = vec![
            scalar("test/episode_reward", reward as f32),
            scalar("test/episode_length", length as f32),
            scalar("test/reward_mean", mean as f32),
        ];
        for (name, tensor) in parameters {
            let histogram = Histogram::of(tensor);
            summaries.push(histogram_raw(
                &format!("parameters/{name}"),
                histogram.min,
                histogram.max,
                histogram.count,
                histogram.sum,
                histogram.sum_squares,
                &histogram.bucket_limits,
                &histogram.bucket_counts,
            ));
        }
        self.write(agent_steps, summaries);
    }

    /// The figures of one status line.
    pub fn training(&mut self, agent_steps: u64, figures: &TrainingFigures) {
        let summaries = [
            ("train/agent_steps_per_second", figures.steps_per_second),
            ("train/frames_per_second", figures.frames_per_second),
            ("train/policy_loss", figures.policy_loss),
            ("train/value_loss", figures.value_loss),
            ("train/entropy", figures.entropy),
            ("train/learning_rate", figures.learning_rate),
        ]
        .into_iter()
        .filter(|(_, value)| value.is_finite())
        .map(|(tag, value)| scalar(tag, value as f32));
        self.write(agent_steps, summaries);
    }

    /// Writes what is buffered to disk (each call above already flushes its events).
    pub fn flush(&mut self) {
        if let Some(Err(err)) = self.records.as_mut().map(|records| records.flush()) {
            self.stop(err);
        }
    }

    /// Writes one event per summary, all at `agent_steps`, and flushes them, so that a
    /// TensorBoard watching the run sees each point as it comes.
    fn write(&mut self, agent_steps: u64, summaries: impl IntoIterator<Item = Summary>) {
        let Some(records) = self.records.as_mut() else { return };
        let wall_time = now();
        let written = summaries.into_iter().try_for_each(|summary| {
            let mut event = Event::new();
            event.set_wall_time(wall_time);
            event.set_step(agent_steps as i64);
            event.set_summary(summary);
            write_event(records, &event)
        });
        if let Err(err) = written.and_then(|()| records.flush()) {
            self.stop(err);
        }
    }

    /// Turns the board off for the rest of the run, saying so once.
    fn stop(&mut self, err: io::Error) {
        eprintln!(
            "warning: TensorBoard stopped: cannot write {}: {err}; training goes on without it, \
             free disk space and restart with --load to resume it",
            self.dir.display()
        );
        // Dropping the writer retries its buffered bytes once and ignores the outcome;
        // a torn last record is skipped by TensorBoard's reader.
        self.records = None;
    }
}

/// TFRecord-framed events (length, masked CRC-32C of the length, event, masked
/// CRC-32C of the event), buffered between flushes.
type Records = RecordWriter<BufWriter<EventSink>>;

fn write_event(records: &mut Records, event: &Event) -> io::Result<()> {
    let bytes = event.write_to_bytes().map_err(io::Error::other)?;
    records.write(&bytes)
}

/// Seconds since the Unix epoch, TensorBoard's wall time.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

/// The name every TensorBoard writer gives its files, unique per second, host and process.
fn event_file_name() -> String {
    format!(
        "events.out.tfevents.{:010}.{}.{}.0",
        now() as u64,
        gethostname::gethostname().to_string_lossy(),
        std::process::id()
    )
}

/// The event file; with [`FAULT_AFTER_BYTES`] set it takes only that many bytes.
struct EventSink {
    file: File,
    /// Bytes the file may still take; `None` when no fault is injected.
    room: Option<u64>,
}

impl Write for EventSink {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let Some(room) = self.room else { return self.file.write(bytes) };
        if room == 0 && !bytes.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!("no space left on device (injected by {FAULT_AFTER_BYTES})"),
            ));
        }
        let fits = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let written = self.file.write(&bytes[..fits])?;
        self.room = Some(room - written as u64);
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
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
    use std::fs;

    use tensorboard_rs::masked_crc32c::masked_crc32c;

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

    fn figures() -> TrainingFigures {
        TrainingFigures {
            steps_per_second: 1.0,
            frames_per_second: 4.0,
            policy_loss: 0.5,
            value_loss: f64::NAN,
            entropy: 0.7,
            learning_rate: 1e-4,
        }
    }

    /// Splits an event file into its events, checking each record's length and both
    /// checksums.
    fn read_events(mut bytes: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        while !bytes.is_empty() {
            let length = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
            let checksum = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            assert_eq!(checksum(8), masked_crc32c(&bytes[..8]), "length checksum");
            let data = &bytes[12..12 + length];
            assert_eq!(checksum(12 + length), masked_crc32c(data), "event checksum");
            events.push(Event::parse_from_bytes(data).unwrap());
            bytes = &bytes[16 + length..];
        }
        events
    }

    /// The event file holds framed records: the format's name first, then one event
    /// per figure (non-finite ones left out) and per test-game value, at their steps.
    #[test]
    fn events_are_framed_records() {
        let root = std::env::temp_dir().join(format!("a3g-unit-board-{}", std::process::id()));
        let mut board = Board::create(&root, "ALE/Pong-v5").unwrap();
        assert_eq!(board.dir(), root.join("ALE_Pong-v5_training"));
        board.training(42, &figures());
        let bias = Tensor::from_slice(&[1.0f32, 2.0]);
        board.test_game(50, 3.0, 10, 2.5, &[("actor.bias".to_string(), bias)]);
        drop(board);
        let files: Vec<PathBuf> = fs::read_dir(root.join("ALE_Pong-v5_training"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1);
        let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("events.out.tfevents."), "{name}");
        let events = read_events(&fs::read(&files[0]).unwrap());
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(events[0].get_file_version(), "brain.Event:2");
        let points: Vec<(i64, String)> = events[1..]
            .iter()
            .map(|event| (event.get_step(), event.get_summary().get_value()[0].get_tag().into()))
            .collect();
        let expected = [
            (42, "train/agent_steps_per_second"),
            (42, "train/frames_per_second"),
            (42, "train/policy_loss"),
            (42, "train/entropy"),
            (42, "train/learning_rate"),
            (50, "test/episode_reward"),
            (50, "test/episode_length"),
            (50, "test/reward_mean"),
            (50, "parameters/actor.bias"),
        ];
        let expected: Vec<(i64, String)> =
            expected.iter().map(|(step, tag)| (*step, tag.to_string())).collect();
        assert_eq!(points, expected);
        let histogram = events.last().unwrap().get_summary().get_value()[0].get_histo();
        assert_eq!((histogram.get_num(), histogram.get_sum()), (2.0, 3.0));
    }

    /// A write the disk refuses (Linux's /dev/full answers every write with ENOSPC)
    /// turns the board off instead of panicking, and later calls do nothing.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_disk_turns_the_board_off() {
        let full = fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let sink = EventSink { file: full, room: None };
        let mut board = Board {
            dir: PathBuf::from("/dev"),
            records: Some(RecordWriter::new(BufWriter::new(sink))),
        };
        board.training(1, &figures());
        assert!(board.records.is_none(), "the failed write turned the board off");
        board.test_game(2, 1.0, 1, 1.0, &[("bias".to_string(), Tensor::from_slice(&[1.0f32]))]);
        board.flush();
    }

    /// The injected fault lets the file take its first bytes, then fails every write
    /// the way a full disk does.
    #[test]
    fn injected_fault_fills_the_file_then_fails() {
        let path = std::env::temp_dir().join(format!("a3g-unit-sink-{}.bin", std::process::id()));
        let mut sink = EventSink { file: File::create(&path).unwrap(), room: Some(10) };
        let err = sink.write_all(&[7; 25]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert!(err.to_string().contains(FAULT_AFTER_BYTES), "{err}");
        assert_eq!(fs::read(&path).unwrap(), [7; 10]);
        fs::remove_file(&path).unwrap();
    }
}
