//! The game logs `a3g train` (`<env>_log`) and `a3g eval` (`<env>_mon_log`) write:
//! the run's arguments, then one line per game in the reference's wording, so that
//! scripts written for the reference's logs read ours.

use std::fs::{self, File};
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
    /// Creates (or truncates) the log at `path`, starting with the run's arguments.
    pub fn create(path: &Path, args: &impl Serialize) -> Result<Self> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|source| Error::Io {
                action: "create the log folder for",
                path: path.to_path_buf(),
                source,
            })?;
        }
        let file = File::create(path).map_err(|source| Error::Io {
            action: "create the log",
            path: path.to_path_buf(),
            source,
        })?;
        let mut log = GameLog { file, path: path.to_path_buf() };
        let arguments = serde_json::to_value(args).expect("arguments serialise");
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
            source,
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
