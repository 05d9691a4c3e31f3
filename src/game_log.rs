//! The game logs `a3g train` (`<env>_log`) and `a3g eval` (`<env>_mon_log`) write:
//! the run's arguments, then one line per game in the reference's wording, so that
//! scripts written for the reference's logs read ours. Every kind of line (games,
//! status lines, the separators between runs) is written and read here only: the
//! monitor and eval write them, `a3g plot` reads them.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};

/// Test games a game line's `reward mean` is taken over (the reference's 100).
pub const MEAN_WINDOW: usize = 100;

/// An open game log.
pub struct GameLog {
    file: File,
    path: PathBuf,
}

impl GameLog {
    /// Opens the log at `path` for appending, creating it if needed, and starts this
    /// run's part with its arguments. A log that already holds lines (an earlier run's,
    /// or the one `--load` resumes) is never truncated: `separator` is written first to
    /// mark where this run begins.
    pub fn append(path: &Path, args: &impl Serialize, separator: &str) -> Result<Self> {
        if let Some(dir) = path.parent() {
            crate::files::create_dir_all(dir).map_err(|source| Error::Io {
                action: "create the log folder for",
                path: path.to_path_buf(),
                cause: source,
            })?;
        }
        let file = OpenOptions::new().create(true).append(true).read(true).open(path).map_err(
            |source| Error::Io { action: "open the log", path: path.to_path_buf(), cause: source },
        )?;
        let has_lines = file.metadata().map(|meta| meta.len() > 0).unwrap_or(false);
        let mut log = GameLog { file, path: path.to_path_buf() };
        if has_lines {
            log.write_line(separator)?;
        }
        // Arguments are plain data; a failure here is a bug, reported rather than panicking.
        let arguments = serde_json::to_value(args).unwrap_or_default();
        if let Some(map) = arguments.as_object() {
            for (key, value) in map {
                log.write_line(&format!("{key}: {value}"))?;
            }
        }
        Ok(log)
    }

    /// Appends one line, whole. Two runs may share a log (one --log-dir, two save
    /// folders): `writeln!` writes the text and its newline in separate calls, between
    /// which the other run's line landed, fusing the two. One `write` of the line with
    /// its newline, on a file opened for appending, goes to the end of the file in one
    /// piece on local file systems, so lines of several runs interleave but stay whole.
    ///
    /// A write that fails part way (a full disk) leaves no part of the line behind:
    /// what it wrote is cut off again, unless another run's line landed after it.
    pub fn write_line(&mut self, line: &str) -> Result<()> {
        let whole = format!("{line}\n");
        let length_before = self.file.metadata().map(|meta| meta.len());
        self.file.write_all(whole.as_bytes()).map_err(|source| {
            if let Ok(length_before) = length_before {
                self.cut_torn_line(length_before);
            }
            Error::Io { action: "write the log", path: self.path.clone(), cause: source }
        })
    }

    /// Cuts the file back to `length_before` when all it gained since is a piece of a
    /// line, which can only be the failed write's. With a newline in it, another run's
    /// line came in between, and the file is left as it is: cutting would lose that.
    fn cut_torn_line(&self, length_before: u64) {
        use std::os::unix::fs::FileExt;
        let Ok(length) = self.file.metadata().map(|meta| meta.len()) else { return };
        if length <= length_before {
            return;
        }
        let mut gained = vec![0; (length - length_before) as usize];
        if self.file.read_exact_at(&mut gained, length_before).is_err() || gained.contains(&b'\n') {
            return;
        }
        let _ = self.file.set_len(length_before);
    }
}

/// One game's line: `Time 00h 01m 23s, episode reward R, episode length N, reward mean M`.
pub fn game_line(finished_at: Duration, reward: f64, length: u64, mean: f64) -> String {
    format!(
        "Time {}, episode reward {reward}, episode length {length}, reward mean {mean:.4}",
        clock(finished_at)
    )
}

/// `00h 01m 23s`, as the reference prints elapsed time.
pub fn clock(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    format!("{:02}h {:02}m {:02}s", seconds / 3600, seconds / 60 % 60, seconds % 60)
}

/// The separator `a3g train` writes before a fresh run's lines in a log that has some.
pub const NEW_RUN: &str = "--- a3g train started a new run here ---";
/// The start of the separator before a resumed (`--load`) run's lines.
const RESUMED_AT: &str = "--- a3g train resumed here, at ";
/// The separator `a3g eval` writes before its games.
pub const EVAL_STARTED: &str = "--- a3g eval started here ---";

/// The separator before a resumed run's lines, which says where its counters start.
pub fn resumed_separator(agent_steps: u64) -> String {
    format!("{RESUMED_AT}{agent_steps} agent steps ---")
}

/// How a status line begins: `[00h 00m 05s] agent steps 1234`; the monitor adds
/// rates, losses and times after a comma.
pub fn status_line_start(elapsed: Duration, agent_steps: u64) -> String {
    format!("[{}{STATUS_MARK}{agent_steps}", clock(elapsed))
}

/// `--- a3g train resumed here, at N agent steps ---` gives N.
pub fn resumed_at(line: &str) -> Option<u64> {
    line.strip_prefix(RESUMED_AT)?.strip_suffix(" agent steps ---")?.parse().ok()
}

/// How a game line begins, wherever it starts in the line.
const GAME_MARK: &str = "Time ";
/// How a game line of a3c_continuous (the reference's sibling for continuous actions)
/// begins, after its logger's time of day.
const CONTINUOUS_GAME_MARK: &str = "Time: ";
/// What follows a status line's clock.
const STATUS_MARK: &str = "] agent steps ";

/// What one log line holds, for plotting.
#[derive(Debug, PartialEq)]
pub enum Record {
    /// A whole game line.
    Game { clock: Clock, reward: f64 },
    /// A whole status line.
    Status { seconds: f64, agent_steps: f64 },
    /// Begins like a game or status line but is not one whole: cut short, or two
    /// lines fused into one (whose first line's numbers would read as the whole).
    Broken,
    /// Anything else: arguments, notes, separators.
    Other,
}

/// A game line's clock.
#[derive(Debug, PartialEq)]
pub struct Clock {
    pub seconds: f64,
    /// Whether it is the Python reference's, which wraps after a day; a3g's runs on.
    pub wraps_daily: bool,
}

/// What `line` of a game log holds.
pub fn record(line: &str) -> Record {
    let marks = [GAME_MARK, CONTINUOUS_GAME_MARK, STATUS_MARK];
    match marks.iter().map(|mark| line.matches(mark).count()).sum::<usize>() {
        0 => Record::Other,
        1 => read_game_line(line)
            .or_else(|| read_continuous_game_line(line))
            .or_else(|| read_status_line(line))
            .unwrap_or(Record::Broken),
        _ => Record::Broken,
    }
}

/// a3c_continuous's game line, `<time of day>: Time: 00h 01m 23s, episode_reward: R,
/// episode_length: N, reward_mean: M`; its clock wraps after a day, as the reference's.
fn read_continuous_game_line(line: &str) -> Option<Record> {
    let (prefix, rest) = line.split_once(CONTINUOUS_GAME_MARK)?;
    if !prefix.ends_with(": ") {
        return None;
    }
    read_game_fields(rest, [", episode_reward: ", ", episode_length: ", ", reward_mean: "], true)
}

/// `Time 00h 01m 23s, episode reward R, episode length N, reward mean M` and nothing
/// after it. a3g writes nothing before `Time`; the Python reference's logger writes
/// `<date> : `.
fn read_game_line(line: &str) -> Option<Record> {
    let (prefix, rest) = line.split_once(GAME_MARK)?;
    let wraps_daily = match prefix {
        "" => false,
        _ if prefix.ends_with(" : ") => true,
        _ => return None,
    };
    read_game_fields(
        rest,
        [", episode reward ", ", episode length ", ", reward mean "],
        wraps_daily,
    )
}

/// A game line after its mark: the clock, then reward, length and mean, each after its
/// own separator (the formats differ only in those), and nothing after the mean.
fn read_game_fields(rest: &str, separators: [&str; 3], wraps_daily: bool) -> Option<Record> {
    let [before_reward, before_length, before_mean] = separators;
    let (clock, rest) = rest.split_once(before_reward)?;
    let (reward, rest) = rest.split_once(before_length)?;
    let (length, mean) = rest.split_once(before_mean)?;
    let reward = reward.parse::<f64>().ok().filter(|reward| reward.is_finite())?;
    digits(length)?;
    mean.parse::<f64>().ok()?;
    Some(Record::Game { clock: Clock { seconds: clock_seconds(clock)?, wraps_daily }, reward })
}

/// `[00h 00m 05s] agent steps 1234, ...` gives (5, 1234).
fn read_status_line(line: &str) -> Option<Record> {
    let (clock, rest) = line.strip_prefix('[')?.split_once(STATUS_MARK)?;
    let (agent_steps, _) = rest.split_once(", ").unwrap_or((rest, ""));
    let agent_steps = digits(agent_steps)? as f64;
    Some(Record::Status { seconds: clock_seconds(clock)?, agent_steps })
}

/// `00h 01m 23s` (hours of any length, minutes and seconds of two digits below 60) in
/// seconds.
fn clock_seconds(clock: &str) -> Option<f64> {
    let [hours, minutes, seconds] = clock.split(' ').collect::<Vec<_>>()[..] else {
        return None;
    };
    let hours = digits(hours.strip_suffix('h')?)?;
    let sixtieths = |field: &str, unit: char| {
        let field = field.strip_suffix(unit)?;
        digits(field).filter(|&value| field.len() == 2 && value < 60)
    };
    let (minutes, seconds) = (sixtieths(minutes, 'm')?, sixtieths(seconds, 's')?);
    // In floating point: hours near u64's limit would overflow as seconds in u64.
    Some(hours as f64 * 3600.0 + (minutes * 60 + seconds) as f64)
}

/// A number written in decimal digits alone (no sign, no spaces), as a3g writes counts.
fn digits(text: &str) -> Option<u64> {
    text.bytes().all(|byte| byte.is_ascii_digit()).then(|| text.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    /// Game lines must match the format whole: anything after the mean, a sign or a
    /// space in a count, minutes past 59, a non-finite score or a prefix that is not
    /// the reference logger's `<date> : ` makes a broken line; a lone line of absurd
    /// but well-formed numbers reads.
    #[test]
    fn game_lines_are_read_whole_or_not_at_all() {
        let line = "Time 00h 01m 02s, episode reward -1.5, episode length 7, reward mean -1.5000";
        assert_eq!(
            record(line),
            Record::Game { clock: Clock { seconds: 62.0, wraps_daily: false }, reward: -1.5 }
        );
        let reference = format!("2018-03-01 10:00:21,002 : {line}");
        assert!(matches!(
            record(&reference),
            Record::Game { clock: Clock { wraps_daily: true, .. }, .. }
        ));
        for broken in [
            format!("{line}x"),
            format!("{line} "),
            line.replace("length 7", "length +7"),
            line.replace("length 7", "length 7 "),
            line.replace("01m", "60m"),
            line.replace("02s", "2s"),
            line.replace("00h", "-1h"),
            line.replace("-1.5,", "NaN,"),
            line.replace("-1.5,", "inf,"),
            line.replace("-1.5,", "1e309,"),
            format!("{}Time", &line[..20]),
            format!("note{line}"),
            format!("[00h 00m 01s] agent steps 1, ms per update: x{line}"),
        ] {
            assert_eq!(record(&broken), Record::Broken, "{broken}");
        }
        let huge =
            "Time 100000000000000h 00m 00s, episode reward 1e308, episode length 1, reward mean 1";
        assert_eq!(
            record(huge),
            Record::Game { clock: Clock { seconds: 3.6e17, wraps_daily: false }, reward: 1e308 }
        );
    }

    /// a3c_continuous's game lines read after its logger's time of day, whole or not
    /// at all.
    #[test]
    fn continuous_reference_game_lines_read() {
        let line = "15:19:09.851423: Time: 00h 03m 44s, episode_reward: 285.43, episode_length: \
                    1062, reward_mean: 1.56";
        assert_eq!(
            record(line),
            Record::Game { clock: Clock { seconds: 224.0, wraps_daily: true }, reward: 285.43 }
        );
        for broken in [
            line.replace("15:19:09.851423: ", ""),
            line.replace("1062", "1062.5"),
            line.replace("285.43", "NaN"),
            format!("{line}, x"),
        ] {
            assert_eq!(record(&broken), Record::Broken, "{broken}");
        }
        let other = "15:15:25.700461: optimizer: Adam";
        assert_eq!(record(other), Record::Other);
    }

    /// Two logs open on one file, as two runs with one --log-dir have, each written
    /// from its own thread: every line in the file is one of the lines written, whole.
    #[test]
    fn lines_of_two_writers_stay_whole() {
        let path = std::env::temp_dir().join(format!("a3g-unit-shared-log-{}", std::process::id()));
        let _ = fs::remove_file(&path);
        let args = serde_json::json!({});
        let lines = 20_000;
        let writers: Vec<_> = ["a", "b"]
            .map(|run| {
                let mut log = GameLog::append(&path, &args, "").unwrap();
                std::thread::spawn(move || {
                    for game in 0..lines {
                        let line = game_line(Duration::from_secs(game), game as f64, 1, 0.0);
                        log.write_line(&format!("{run} {line}")).unwrap();
                    }
                })
            })
            .into();
        for writer in writers {
            writer.join().unwrap();
        }
        let text = fs::read_to_string(&path).unwrap();
        fs::remove_file(&path).unwrap();
        let written: Vec<&str> = text.lines().filter(|line| !line.is_empty()).collect();
        assert_eq!(written.len(), 2 * lines as usize, "lines fused");
        for line in written {
            let game_line = line.split_once(' ').map_or("", |(_, rest)| rest);
            assert!(
                line.matches("Time ").count() == 1 && game_line.starts_with("Time "),
                "fused: {line}"
            );
        }
    }
}
