//! The error type of the library: each variant names something the user has or did,
//! and its message says what to do about it.

use std::path::PathBuf;

/// Everything `a3g` can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An environment id that a3g does not know.
    #[error("unknown environment id {id:?}; did you mean {}? `a3g envs` lists every id", suggestions.join(", "))]
    UnknownEnv {
        /// The id as given.
        id: String,
        /// The nearest known ids.
        suggestions: Vec<String>,
    },
    /// A bundled game that the emulator cannot run.
    #[error("{id} cannot run: {reason}; pick another game (`a3g envs` lists the playable ids)")]
    UnsupportedGame {
        /// The id as given.
        id: String,
        /// Why the emulator cannot run it.
        reason: &'static str,
    },
    /// A crop file (`--env-config`) that is not valid.
    #[error("bad crop file {}: {reason}; fix it or pass another with --env-config", path.display())]
    CropFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line and column where JSON parsing stopped.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("cannot {action} {}", path.display())]
    Io {
        /// What was being done, as a verb phrase ("write the ROM to").
        action: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// A game ROM that ALE could not load.
    #[error("ALE could not load the ROM {}; the file may be damaged, delete it and run again", path.display())]
    RomLoad {
        /// The ROM file handed to ALE.
        path: PathBuf,
    },
    /// No checkpoint for the environment in the folder.
    #[error("no checkpoint for {env} in {}{}; train first or pass --load-model-dir", dir.display(), list_found(dir, found))]
    NoCheckpoint {
        /// The folder searched.
        dir: PathBuf,
        /// The environment id.
        env: String,
        /// Checkpoint files the folder holds.
        found: Vec<String>,
    },
    /// A checkpoint file that cannot be read.
    #[error("cannot read checkpoint {}: {reason}; the file is damaged or not a checkpoint, train again or restore it", path.display())]
    CorruptCheckpoint {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A checkpoint made for another model or environment.
    #[error("checkpoint {} does not fit this model: {detail}; {advice}", path.display())]
    CheckpointMismatch {
        /// The file.
        path: PathBuf,
        /// What differs (tensor name and both shapes, or both env ids).
        detail: String,
        /// What to do.
        advice: &'static str,
    },
    /// A flag value or combination that cannot work.
    #[error("{0}")]
    BadArguments(String),
    /// A training thread failed.
    #[error("{0}")]
    Training(String),
    /// libtorch reported an error.
    #[error("libtorch failed")]
    Torch(#[from] tch::TchError),
}

fn list_found(dir: &std::path::Path, found: &[String]) -> String {
    if !dir.is_dir() {
        " (no such folder)".to_string()
    } else if found.is_empty() {
        " (it holds no checkpoints)".to_string()
    } else {
        format!(" (it holds: {})", found.join(", "))
    }
}

impl Error {
    /// The message with its chain of causes, joined on one line for the terminal.
    pub fn report(&self) -> String {
        let mut line = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            line.push_str(": ");
            line.push_str(&cause.to_string());
            source = cause.source();
        }
        line.replace('\n', " ")
    }
}

/// The result type of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;
