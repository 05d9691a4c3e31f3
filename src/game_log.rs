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

    /// Appends one line.
    pub fn write_line(&mut self, line: &str) -> Result<()> {
        writeln!(self.file, "{line}").map_err(|source| Error::Io {
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
