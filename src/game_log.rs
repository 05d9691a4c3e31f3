//! The game logs `a3g train` (`<env>_log`) and `a3g eval` (`<env>_mon_log`) write:
//! the run's arguments, then one line per game in the reference's wording, so that
//! scripts written for the reference's logs read ours.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};

/// Creates (or truncates) the log at `path`, starting with the run's arguments.
pub fn create(path: &Path, args: &impl Serialize) -> Result<File> {
    let io = |action, source| Error::Io { action, path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|source| io("create the log folder for", source))?;
    }
    let mut file = File::create(path).map_err(|source| io("create the log", source))?;
    let arguments = serde_json::to_value(args).expect("arguments serialise");
    if let Some(map) = arguments.as_object() {
        for (key, value) in map {
            writeln!(file, "{key}: {value}").map_err(|source| io("write the log", source))?;
        }
    }
    Ok(file)
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
