//! The game logs `a3g train` (`<env>_log`) and `a3g eval` (`<env>_mon_log`) write:
//! the run's arguments, then one line per game in the reference's wording, so that
//! scripts written for the reference's logs read ours.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};

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
            fs::create_dir_all(dir).map_err(|source| Error::Io {
                action: "create the log folder for",
                path: path.to_path_buf(),
                cause: source,
            })?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path).map_err(|source| {
            Error::Io { action: "open the log", path: path.to_path_buf(), cause: source }
        })?;
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
    pub fn write_line(&mut self, line: &str) -> Result<()> {
        let whole = format!("{line}\n");
        self.file.write_all(whole.as_bytes()).map_err(|source| Error::Io {
            action: "write the log",
            path: self.path.clone(),
            cause: source,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

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
