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
    #[error("cannot {action} {}: {}; {}", path.display(), os_reason(cause), io_remedy(cause))]
    Io {
        /// What was being done, as a verb phrase ("write the ROM to").
        action: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The operating system's reason, part of the message (so not a `source`,
        /// which the one-line report would repeat).
        cause: std::io::Error,
    },
    /// A file in the temporary folder (TMPDIR, else /tmp) could not be written.
    #[error("cannot {action} {}: {}; set TMPDIR to a folder you can write to", path.display(), os_reason(cause))]
    TempFolder {
        /// What was being done, as a verb phrase ("cache the game's ROM in").
        action: &'static str,
        /// The folder or file involved.
        path: PathBuf,
        /// The operating system's reason.
        cause: std::io::Error,
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
    /// A checkpoint whose set lacks a file.
    #[error("checkpoint {} is incomplete: {} is missing; restore it, or start afresh without --load or --resume auto (a3g eval can still play the model)", path.display(), missing.display())]
    IncompleteCheckpoint {
        /// The model file.
        path: PathBuf,
        /// The file of the set that is not there.
        missing: PathBuf,
    },
    /// Weights or statistics that are NaN or infinite, refused rather than saved.
    #[error("not saving {}: {tensor} holds {problem}, so training has diverged; the checkpoint already there is kept, lower --lr and resume from it with --load", path.display())]
    NonFinite {
        /// The file that would have been written.
        path: PathBuf,
        /// The first tensor with an impossible value.
        tensor: String,
        /// What is wrong with its values.
        problem: &'static str,
    },
    /// A fresh run, or one resumed from another folder, aimed at a folder that already
    /// holds a model of its environment.
    #[error("{} already holds a trained model of {env}; {}", path.display(), replace_remedy(resumed_from.as_deref()))]
    ExistingCheckpoint {
        /// The model file there.
        path: PathBuf,
        /// The environment id.
        env: String,
        /// The model `--load` resumes from another folder, if it does.
        resumed_from: Option<PathBuf>,
    },
    /// A checkpoint folder that another run is writing to.
    #[error("{} is in use by another a3g run ({holder}); wait for it to finish, or pass another --save-model-dir", dir.display())]
    FolderInUse {
        /// The checkpoint folder.
        dir: PathBuf,
        /// Who holds it: the other run's PID and env, as its lock file says.
        holder: String,
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
    /// A game log without a test game to plot.
    #[error("{} has no test games yet; plot it once the test agent has finished a game, or pass a game log that a3g train or a3g eval wrote", path.display())]
    NoGames {
        /// The log.
        path: PathBuf,
    },
    /// The plot could not be drawn or encoded.
    #[error("cannot draw the plot: {0}; try another --width and --height")]
    Drawing(String),
    /// A flag value or combination that cannot work.
    #[error("{0}")]
    BadArguments(String),
    /// An environment played in a Python process of its own (`gym:<id>`, a user's
    /// class) failed: it raised, crashed, hung or could not start.
    #[error("{env}: {problem}")]
    EnvProcess {
        /// `--env` as given.
        env: String,
        /// What went wrong and what to do, on one line.
        problem: String,
    },
    /// Training cannot go on (a diverged model).
    #[error("{0}")]
    Training(String),
    /// A thread of the run failed: its name, and why.
    #[error("{thread}: {cause}")]
    Thread {
        /// The thread's name ("test agent", "predictor 0", "worker 3").
        thread: String,
        /// Its error, reported as part of this one.
        cause: Box<Error>,
    },
    /// A thread of the run panicked: a bug, not the user's doing.
    #[error("{thread} panicked ({message}); this is a bug in a3g, please report it with the command that ran")]
    Panic {
        /// The thread's name.
        thread: String,
        /// The panic's message.
        message: String,
    },
    /// libtorch reported an error; its first line is kept (the rest is a C++ trace).
    #[error("libtorch failed: {}", .0.to_string().lines().next().unwrap_or_default())]
    Torch(tch::TchError),
    /// The ranks of a run across machines could not meet or exchange a tensor.
    #[error("rank {rank} of {world_size}: could not {action} ({reason}); {advice}")]
    Peers {
        rank: usize,
        world_size: usize,
        /// What the rank was doing ("join the other ranks", "sum the ranks' changes").
        action: &'static str,
        /// c10d's reason, its first line.
        reason: String,
        advice: &'static str,
    },
}

/// The operating system's reason without Rust's "(os error N)" suffix.
pub(crate) fn os_reason(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(end) => text[..end].to_string(),
        None => text,
    }
}

/// Whether a write failed for want of disk space.
pub fn is_disk_full(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::FileTooLarge
    )
}

/// What to do about an I/O error, by its kind.
fn io_remedy(error: &std::io::Error) -> &'static str {
    use std::io::ErrorKind;
    if is_disk_full(error) {
        return "free some disk space (or pass a folder on another disk) and run again";
    }
    match error.kind() {
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => {
            "check the permissions, or pass a folder you can write to"
        }
        ErrorKind::NotFound => "check that the path exists",
        // Said of the path itself (files::create_dir_all) or of a part of it (the OS).
        ErrorKind::NotADirectory => "pass a path that is a folder or can be made one",
        ErrorKind::IsADirectory => "it is a folder; pass a file path",
        _ => "check the path and the disk, then run again",
    }
}

/// What to do about a save folder that holds a model the run did not start from.
fn replace_remedy(resumed_from: Option<&std::path::Path>) -> String {
    match resumed_from {
        None => "pass --load to resume it, --save-model-dir to save this run elsewhere, or \
                 --overwrite to replace it"
            .to_string(),
        Some(resumed) => format!(
            "this run resumes {} instead; pass --save-model-dir to save it elsewhere, the same folder \
             to --load-model-dir to resume the model there, or --overwrite to replace it",
            resumed.display()
        ),
    }
}

fn list_found(dir: &std::path::Path, found: &[String]) -> String {
    match std::fs::metadata(dir) {
        Ok(metadata) if !metadata.is_dir() => return " (it is not a folder)".to_string(),
        Err(_) => return " (no such folder)".to_string(),
        Ok(_) => {}
    }
    if found.is_empty() {
        " (it holds no checkpoints)".to_string()
    } else {
        format!(" (it holds: {})", found.join(", "))
    }
}

impl Error {
    /// Flags given (their long names) that do nothing in this run: what they are
    /// `for` and why that is not this run, then `remedy` beside leaving them out.
    pub fn idle_flags(flags: &[String], purpose: &str, remedy: Option<&str>) -> Self {
        let (verb, pronoun) = if flags.len() == 1 { ("is", "it") } else { ("are", "them") };
        let named = match flags {
            [] => String::new(),
            [only] => only.clone(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        };
        let remedy = match remedy {
            Some(remedy) => format!("{remedy}, or leave {pronoun} out"),
            None => format!("leave {pronoun} out"),
        };
        Error::BadArguments(format!("{named} {verb} {purpose}: {remedy}"))
    }

    /// Whether an environment from outside a3g failed (raised, crashed, hung): the
    /// model is not at fault, so a run keeps what it learned.
    pub fn is_environment_failure(&self) -> bool {
        match self {
            Error::EnvProcess { .. } => true,
            Error::Thread { cause, .. } => cause.is_environment_failure(),
            _ => false,
        }
    }
}

impl From<tch::TchError> for Error {
    fn from(error: tch::TchError) -> Self {
        Error::Torch(error)
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
