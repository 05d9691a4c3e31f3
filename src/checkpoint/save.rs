//! Writing a checkpoint set: its file names, the folder's lock, and the writer that
//! replaces a set atomically as a whole (the parent module says how).

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tch::{Kind, Tensor};

use super::{implausible_values, read_set, Checksums, Purpose, Sidecar};
use crate::error::{Error, Result};

/// File names of one environment's checkpoint in a folder.
#[derive(Clone, Debug)]
pub struct CheckpointFiles {
    pub model: PathBuf,
    pub optimizer: PathBuf,
    pub sidecar: PathBuf,
}

impl CheckpointFiles {
    /// The files for `env` in `dir`; `/` in ids (ALE/Pong-v5) becomes `_`.
    pub fn new(dir: &Path, env: &str) -> Self {
        Self::with_stem(dir, &env.replace('/', "_"))
    }

    /// The set the last save replaced, kept until the next save completes.
    pub fn previous(dir: &Path, env: &str) -> Self {
        Self::with_stem(dir, &format!("{}.prev", env.replace('/', "_")))
    }

    fn with_stem(dir: &Path, stem: &str) -> Self {
        CheckpointFiles {
            model: dir.join(format!("{stem}.safetensors")),
            optimizer: dir.join(format!("{stem}.optimizer.safetensors")),
            sidecar: dir.join(format!("{stem}.json")),
        }
    }

    /// In the order a save renames them: the sidecar, which vouches for the others,
    /// comes last.
    pub(super) fn all(&self) -> [&PathBuf; 3] {
        [&self.model, &self.optimizer, &self.sidecar]
    }

    /// Whether any file of the set is on disk.
    pub fn any_exists(&self) -> bool {
        self.all().iter().any(|path| path.exists())
    }
}

/// The temporary name a file is written under by this process.
fn temporary(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".tmp{}", std::process::id()));
    PathBuf::from(name)
}

/// Removes the checkpoint temporaries (`<file>.safetensors.tmp<PID>`,
/// `<file>.json.tmp<PID>`) that other processes left in `dir`, such as a killed run;
/// returns how many. The caller holds the folder's lock and every checkpoint write
/// happens under it, so no other process can be writing these. Whether the PID still
/// runs says nothing: a dead run's PID is soon reused, by a process or by a thread.
pub fn remove_stale_temporaries(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.filter_map(|entry| entry.ok()) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((file, pid)) = name.rsplit_once(".tmp") else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        let checkpoint_file = file.ends_with(".safetensors") || file.ends_with(".json");
        if checkpoint_file && pid != std::process::id() && fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// A checkpoint folder held by one run: an advisory lock on `<dir>/.a3g.lock`, which
/// the operating system releases when the run ends, however it ends. Two runs writing
/// one folder would interleave their sets.
pub struct FolderLock {
    _file: File,
}

/// Takes `dir` (creating it) for a run training `env`, or names the run holding it.
pub fn lock_folder(dir: &Path, env: &str) -> Result<FolderLock> {
    crate::files::create_dir_all(dir).map_err(|source| Error::Io {
        action: "create the checkpoint folder",
        path: dir.to_path_buf(),
        cause: source,
    })?;
    let path = dir.join(".a3g.lock");
    let io = |source| Error::Io { action: "lock", path: path.clone(), cause: source };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {
            // Only for the message another run shows; the lock itself is what counts.
            let holder = format!("PID {}, training {env}\n", std::process::id());
            file.set_len(0).and_then(|()| file.write_all(holder.as_bytes())).map_err(io)?;
            Ok(FolderLock { _file: file })
        }
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            Err(Error::FolderInUse {
                dir: dir.to_path_buf(),
                holder: if holder.is_empty() { "PID unknown".into() } else { holder.to_string() },
            })
        }
        Err(TryLockError::Error(source)) => Err(io(source)),
    }
}

/// Writes one environment's checkpoints into a folder, a whole set at a time.
pub struct CheckpointWriter {
    current: CheckpointFiles,
    previous: CheckpointFiles,
    /// Whether the set in place is complete and verified, and so worth keeping as the
    /// previous set when the next one replaces it. A damaged set is never kept.
    current_is_complete: bool,
}

impl CheckpointWriter {
    /// Prepares to write `env`'s checkpoints into `dir`, creating it.
    pub fn new(dir: &Path, env: &str) -> Result<Self> {
        crate::files::create_dir_all(dir).map_err(|source| Error::Io {
            action: "create the checkpoint folder",
            path: dir.to_path_buf(),
            cause: source,
        })?;
        let current = CheckpointFiles::new(dir, env);
        let current_is_complete = read_set(&current, Purpose::Resume).is_ok();
        Ok(CheckpointWriter {
            current,
            previous: CheckpointFiles::previous(dir, env),
            current_is_complete,
        })
    }

    /// The model file a save writes.
    pub fn model_file(&self) -> &Path {
        &self.current.model
    }

    /// Saves a checkpoint. Refuses non-finite weights or statistics, leaving the
    /// checkpoint in place untouched.
    pub fn save(
        &mut self,
        sidecar: &Sidecar,
        model: &[(String, Tensor)],
        optimizer: &[(String, &Tensor)],
    ) -> Result<()> {
        let model: Vec<(&str, &Tensor)> =
            model.iter().map(|(name, t)| (name.as_str(), t)).collect();
        let optimizer: Vec<(&str, &Tensor)> =
            optimizer.iter().map(|(name, t)| (name.as_str(), *t)).collect();
        let model_bytes = serialize(&self.current.model, &model)?;
        let optimizer_bytes = serialize(&self.current.optimizer, &optimizer)?;
        let mut sidecar = sidecar.clone();
        sidecar.checksums =
            Some(Checksums { model: sha256(&model_bytes), optimizer: sha256(&optimizer_bytes) });
        let json = serde_json::to_string_pretty(&sidecar).map_err(|err| Error::Io {
            action: "write",
            path: self.current.sidecar.clone(),
            cause: std::io::Error::other(err),
        })? + "\n";
        let contents = [model_bytes, optimizer_bytes, json.into_bytes()];
        let written = self
            .current
            .all()
            .into_iter()
            .zip(&contents)
            .try_for_each(|(path, bytes)| write_synced(&temporary(path), bytes));
        if let Err(err) = written {
            for path in self.current.all() {
                let _ = fs::remove_file(temporary(path));
            }
            return Err(err);
        }
        pause_for_fault_injection();
        if self.current_is_complete {
            for (current, previous) in self.current.all().into_iter().zip(self.previous.all()) {
                // A link, not a copy: the old set stays where it is until renamed over.
                let _ = fs::remove_file(temporary(previous));
                fs::hard_link(current, temporary(previous))
                    .and_then(|()| fs::rename(temporary(previous), previous))
                    .map_err(|source| Error::Io {
                        action: "keep the previous checkpoint as",
                        path: previous.clone(),
                        cause: source,
                    })?;
                // A kill between this loop and the renames below leaves the previous
                // set linked to the current one; renaming a link over another link
                // of the same file does nothing (POSIX), which left the temporary,
                // so it is removed here (where the rename moved it, nothing is).
                let _ = fs::remove_file(temporary(previous));
            }
        }
        for path in self.current.all() {
            fs::rename(temporary(path), path).map_err(|source| Error::Io {
                action: "rename into place",
                path: path.clone(),
                cause: source,
            })?;
        }
        if let Some(dir) = self.current.model.parent() {
            // The renames themselves are durable only once the folder is synced.
            let _ = File::open(dir).and_then(|dir| dir.sync_all());
        }
        self.current_is_complete = true;
        Ok(())
    }
}

/// Tests of kills and signals during a save set `A3G_FAULT_SAVE_DELAY_MS` to hold
/// each save between writing its temporaries and renaming them, the moment a kill
/// must not tear the set.
fn pause_for_fault_injection() {
    let delay = std::env::var("A3G_FAULT_SAVE_DELAY_MS").ok().and_then(|ms| ms.parse().ok());
    if let Some(milliseconds) = delay {
        std::thread::sleep(std::time::Duration::from_millis(milliseconds));
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |source| Error::Io { action: "write", path: path.to_path_buf(), cause: source };
    let mut file = File::create(path).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)
}

pub(super) fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A tensor's bytes as safetensors wants them.
struct TensorBytes {
    dtype: safetensors::Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl safetensors::View for &TensorBytes {
    fn dtype(&self) -> safetensors::Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        (&self.data).into()
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// The safetensors bytes of `tensors`, refused (naming the first) if any value is not
/// finite: such weights would replace a good checkpoint with one that cannot play.
fn serialize(path: &Path, tensors: &[(&str, &Tensor)]) -> Result<Vec<u8>> {
    let mut views = Vec::with_capacity(tensors.len());
    for (name, tensor) in tensors {
        // On the host and in f32; callers pass copies that training no longer changes
        // (for a CPU f32 tensor these conversions return the tensor itself).
        let copy =
            tch::no_grad(|| tensor.to_device(tch::Device::Cpu).to_kind(Kind::Float).contiguous());
        if let Some(problem) = implausible_values(name, &copy) {
            return Err(Error::NonFinite {
                path: path.to_path_buf(),
                tensor: name.to_string(),
                problem,
            });
        }
        let numel = copy.numel();
        let mut values = vec![0f32; numel];
        copy.f_copy_data(&mut values, numel)?;
        let data = values.iter().flat_map(|value| value.to_le_bytes()).collect();
        let shape = copy.size().iter().map(|&size| size as usize).collect();
        views.push((name.to_string(), TensorBytes { dtype: safetensors::Dtype::F32, shape, data }));
    }
    safetensors::serialize(views.iter().map(|(name, view)| (name.as_str(), view)), &None).map_err(
        |err| Error::Io {
            action: "encode",
            path: path.to_path_buf(),
            cause: std::io::Error::other(err.to_string()),
        },
    )
}
