//! Checkpoints: the model as safetensors under the reference's parameter names, the
//! optimizer statistics beside it, and a JSON sidecar with the env id, the model's
//! dimensions, the run's checked settings, the counters and the SHA-256 of the other two files.
//!
//! A checkpoint is three files, and a kill can land between any two renames, so the
//! set is made atomic as a whole rather than file by file: every file is written to a
//! temporary name and synced first; the complete set in place is then linked to
//! `<env>.prev.*`, and only after that are the new files renamed over the old ones,
//! sidecar last. Whatever instant a kill lands on, one of the two sets is complete,
//! and the sidecar's checksums tell which. Loading takes the current set when its
//! checksums hold and the previous one, with a warning, when they do not.

mod open;
pub mod record;
mod save;
pub mod torch_file;

pub use open::{
    open_model, ModelEnvironments, ModelSource, OpenedModel, PlayedModel, PLAY_MISMATCH,
};
use save::sha256;
pub use save::{
    lock_folder, remove_stale_temporaries, CheckpointFiles, CheckpointWriter, FolderLock,
};

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::error::{Error, Result};
use crate::model::ModelSpec;
use crate::shared_optim::OptimizerKind;
use record::TrainedWith;

/// The largest counter a checkpoint may hold: 2^53, the largest integer every JSON
/// reader keeps exactly; a run would need centuries to reach it, so more means damage.
pub const MAX_COUNTER: u64 = 1 << 53;

/// What to do about a checkpoint set whose tensors are not the model its sidecar
/// describes (`--load`): the set was damaged or made up.
pub const SIDECAR_MISMATCH: &str =
    "its sidecar does not describe its tensors; restore the set or start without --load or --resume auto";

/// The largest counter `--load` resumes from, 2^50: a run of a million agent steps a
/// second would need 35 years to reach it, and room is left below [`MAX_COUNTER`] for
/// everything a resumed run adds, so what it writes can be resumed in turn.
pub const RESUMABLE_COUNTER: u64 = 1 << 50;

/// Agent steps at which any run stops, whatever --max-steps says: below
/// [`RESUMABLE_COUNTER`] by more than the steps threads finish after a stop.
pub const RUN_STEP_LIMIT: u64 = RESUMABLE_COUNTER - (1 << 40);

/// The progress a checkpoint records and a resumed run continues from (the live,
/// atomic counterpart is [`crate::counters::TrainingCounters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedCounters {
    pub agent_steps: u64,
    pub env_frames: u64,
    pub updates: u64,
    pub test_games: u64,
}

impl SavedCounters {
    /// The first counter beyond [`MAX_COUNTER`], by name.
    fn out_of_range(&self) -> Option<(&'static str, u64)> {
        self.first_above(MAX_COUNTER)
    }

    /// The first counter above `limit`, by name.
    fn first_above(&self, limit: u64) -> Option<(&'static str, u64)> {
        [
            ("agent_steps", self.agent_steps),
            ("env_frames", self.env_frames),
            ("updates", self.updates),
            ("test_games", self.test_games),
        ]
        .into_iter()
        .find(|(_, value)| *value > limit)
    }
}

/// SHA-256 digests (hex) of a checkpoint's tensor files, as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checksums {
    pub model: String,
    pub optimizer: String,
}

/// The JSON file beside the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sidecar {
    pub a3g_version: String,
    pub env: String,
    pub model: ModelSpec,
    pub optimizer: OptimizerKind,
    pub counters: SavedCounters,
    /// The best test-game score of the run so far, so that a resumed --save-max run
    /// does not replace the saved weights with worse ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_score: Option<f64>,
    /// Set when the checkpoint is written; absent in checkpoints of a3g 0.1 before
    /// checksums, which are then taken as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksums: Option<Checksums>,
    /// The checked settings of the run that wrote it; absent in checkpoints of a3g
    /// 0.1, whose sidecars held the flags' text (`args`, no longer read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trained_with: Option<TrainedWith>,
}

impl Sidecar {
    /// Reads the sidecar at `path`, which must exist.
    pub fn read(path: &Path) -> Result<Self> {
        let corrupt =
            |reason: String| Error::CorruptCheckpoint { path: path.to_path_buf(), reason };
        let text = crate::files::read_to_string(path).map_err(|err| corrupt(err.to_string()))?;
        let sidecar: Sidecar =
            serde_json::from_str(&text).map_err(|err| corrupt(err.to_string()))?;
        if let Some((name, value)) = sidecar.counters.out_of_range() {
            return Err(corrupt(format!("its counter {name} is {value}, beyond any real run")));
        }
        if sidecar.best_score.is_some_and(|score| !score.is_finite()) {
            return Err(corrupt("its best score is not a finite number".into()));
        }
        let recorded_crop = sidecar.trained_with.as_ref().and_then(|trained| trained.crop);
        if let Some(problem) = recorded_crop.and_then(|crop| crop.problem()) {
            return Err(corrupt(format!(
                "the crop rows it records for the game are impossible: {problem}"
            )));
        }
        Ok(sidecar)
    }

    /// Refuses to resume a checkpoint (at `path`) whose counters leave a run no room
    /// below [`MAX_COUNTER`]: checked at the first `--load`, rather than by the one
    /// after a run has written counters beyond what can be read back. The weights
    /// beside such counters are whole, so the set is refused rather than passed over
    /// for the previous one, which the run would then save over it.
    pub fn check_resumable(&self, path: &Path) -> Result<()> {
        match self.counters.first_above(RESUMABLE_COUNTER) {
            None => Ok(()),
            Some((name, value)) => Err(Error::CorruptCheckpoint {
                path: path.to_path_buf(),
                reason: format!(
                    "its counter {name} is {value}, beyond any real run (a resumed run can start from at most {RESUMABLE_COUNTER})"
                ),
            }),
        }
    }

    /// Refuses a checkpoint (at `path`) trained on another environment than `env`,
    /// such as a renamed file.
    pub fn check_env(&self, path: &Path, env: &str) -> Result<()> {
        if self.env == env {
            return Ok(());
        }
        Err(Error::CheckpointMismatch {
            path: path.to_path_buf(),
            detail: format!("it was trained on {}, not {env}", self.env),
            advice: "pass the --env it was trained on",
        })
    }
}

/// What is wrong with the values of tensor `name`, if anything. Weights and first
/// moments must be finite. Second moments (`*square_avg`, `*_sq`) are averages of
/// squares: never NaN or negative, but +infinity is a state training really reaches
/// (a finite gradient above ~1.8e19 squares to infinity in f32), in which the
/// parameter stops moving while the weights stay finite, as in PyTorch's optimizers.
fn implausible_values(name: &str, tensor: &Tensor) -> Option<&'static str> {
    if tensor.numel() == 0 || !tensor.is_floating_point() {
        return None;
    }
    let any = |mask: Tensor| tch::no_grad(|| mask.any().int64_value(&[]) != 0);
    if name.ends_with("square_avg") || name.ends_with("_sq") {
        if any(tensor.isnan()) {
            return Some("NaN values");
        }
        if any(tensor.lt(0.0)) {
            return Some("negative values, which an average of squares cannot");
        }
        return None;
    }
    (!all_finite(tensor)).then_some("NaN or infinite values")
}

/// Whether every value of a floating-point tensor is finite.
pub fn all_finite(tensor: &Tensor) -> bool {
    if tensor.numel() == 0 || !tensor.is_floating_point() {
        return true;
    }
    tch::no_grad(|| tensor.isfinite().all().int64_value(&[]) != 0)
}

/// A checkpoint read from disk and verified, not yet checked against a model.
pub struct Checkpoint {
    /// The set it was read from: the current one, or the previous one when the
    /// current one was torn or damaged.
    pub files: CheckpointFiles,
    pub sidecar: Sidecar,
    pub model: Vec<(String, Tensor)>,
    /// Optimizer statistics; `None` only for a checkpoint of a3g 0.1 before checksums
    /// whose statistics file is missing.
    pub optimizer: Option<Vec<(String, Tensor)>>,
}

/// What a checkpoint is read for, which decides the files it needs.
#[derive(Clone, Copy, PartialEq)]
enum Purpose {
    /// `--load`: the model, its sidecar and its optimizer statistics.
    Resume,
    /// `a3g eval`: the model alone, checked against its sidecar when there is one.
    Play,
}

/// Reads the checkpoint of `env` in `dir` to resume training from: the current set
/// if it is complete and sound, else the previous set (saying so on stderr), else the
/// current set's error.
pub fn load(dir: &Path, env: &str) -> Result<Checkpoint> {
    load_for(dir, env, Purpose::Resume)
}

fn load_for(dir: &Path, env: &str, purpose: Purpose) -> Result<Checkpoint> {
    let current = CheckpointFiles::new(dir, env);
    let previous = CheckpointFiles::previous(dir, env);
    if !current.model.exists() && !previous.model.exists() {
        return Err(Error::NoCheckpoint {
            dir: dir.to_path_buf(),
            env: env.to_string(),
            found: checkpoints_in(dir),
        });
    }
    let problem = match read_set(&current, purpose) {
        Ok(checkpoint) => return Ok(checkpoint),
        Err(problem) => problem,
    };
    match read_set(&previous, purpose) {
        Ok(checkpoint) => {
            crate::console::warn(&format!(
                "warning: {}; using the previous complete checkpoint {} instead",
                problem.report(),
                previous.model.display()
            ));
            Ok(checkpoint)
        }
        Err(_) => Err(problem),
    }
}

/// Reads and verifies one set. To play, a lone model file (one made outside a3g) is
/// read by itself.
fn read_set(files: &CheckpointFiles, purpose: Purpose) -> Result<Checkpoint> {
    let missing = |missing: &Path| Error::IncompleteCheckpoint {
        path: files.model.clone(),
        missing: missing.to_path_buf(),
    };
    if !files.model.exists() {
        return Err(missing(&files.model));
    }
    if !files.sidecar.exists() {
        if purpose == Purpose::Resume {
            return Err(missing(&files.sidecar));
        }
        let model = read_tensors(&files.model, None)?;
        return Ok(Checkpoint {
            files: files.clone(),
            sidecar: lone_model_sidecar(),
            model,
            optimizer: None,
        });
    }
    let sidecar = Sidecar::read(&files.sidecar)?;
    let checksums = sidecar.checksums.as_ref();
    let model =
        read_tensors(&files.model, checksums.map(|sums| (sums.model.as_str(), &files.sidecar)))?;
    let optimizer = if purpose == Purpose::Play {
        None
    } else if files.optimizer.exists() {
        let checksum = checksums.map(|sums| (sums.optimizer.as_str(), &files.sidecar));
        Some(read_tensors(&files.optimizer, checksum)?)
    } else if checksums.is_some() {
        return Err(missing(&files.optimizer));
    } else {
        None
    };
    Ok(Checkpoint { files: files.clone(), sidecar, model, optimizer })
}

/// Stands in for the sidecar of a model file made outside a3g; eval needs none.
fn lone_model_sidecar() -> Sidecar {
    Sidecar {
        a3g_version: String::new(),
        env: String::new(),
        model: ModelSpec {
            body: crate::model::Body::AtariLstm,
            hidden_size: 0,
            head: crate::model::Head::Discrete { actions: 0 },
        },
        optimizer: OptimizerKind::RmsProp,
        counters: SavedCounters::default(),
        best_score: None,
        checksums: None,
        trained_with: None,
    }
}

/// Reads a safetensors file, checking it against `checksum` (the digest and the
/// sidecar that records it) when given, and refusing non-finite values.
fn read_tensors(path: &Path, checksum: Option<(&str, &PathBuf)>) -> Result<Vec<(String, Tensor)>> {
    let corrupt = |reason: String| Error::CorruptCheckpoint { path: path.to_path_buf(), reason };
    let bytes = crate::files::read(path).map_err(|source| Error::Io {
        action: "read",
        path: path.to_path_buf(),
        cause: source,
    })?;
    if let Some((expected, sidecar)) = checksum {
        if sha256(&bytes) != expected {
            return Err(corrupt(format!(
                "its contents do not match the checksum {} records (an interrupted save or a damaged disk)",
                sidecar.display()
            )));
        }
    }
    let file = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|err| corrupt(safetensors_problem(&err)))?;
    let mut tensors = Vec::new();
    for (name, view) in file.tensors() {
        let kind = match view.dtype() {
            safetensors::Dtype::F32 => Kind::Float,
            safetensors::Dtype::F64 => Kind::Double,
            safetensors::Dtype::F16 => Kind::Half,
            safetensors::Dtype::BF16 => Kind::BFloat16,
            other => {
                return Err(corrupt(format!("{name} has element type {other:?}, not a float type")))
            }
        };
        let shape: Vec<i64> = view.shape().iter().map(|&size| size as i64).collect();
        // safetensors checked that the data's length is the shape's byte count.
        let tensor = Tensor::f_from_data_size(view.data(), &shape, kind)?.to_kind(Kind::Float);
        if let Some(problem) = implausible_values(&name, &tensor) {
            return Err(corrupt(format!("{name} holds {problem}")));
        }
        tensors.push((name, tensor));
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(tensors)
}

/// What is wrong with a file the safetensors reader refused, in words (its own
/// messages are Rust debug text).
fn safetensors_problem(error: &safetensors::SafeTensorError) -> String {
    use safetensors::SafeTensorError as Problem;
    match error {
        Problem::HeaderTooSmall | Problem::HeaderTooLarge | Problem::InvalidHeaderLength => {
            "it is too short for its header, or not a safetensors file (truncated?)".into()
        }
        Problem::InvalidHeader
        | Problem::InvalidHeaderStart
        | Problem::InvalidHeaderDeserialization => {
            "its header is not the JSON a safetensors file starts with".into()
        }
        Problem::MetadataIncompleteBuffer => {
            "it is shorter than its header says (truncated?)".into()
        }
        Problem::InvalidOffset(name) => format!("the data of tensor {name} is misplaced"),
        Problem::TensorInvalidInfo | Problem::ValidationOverflow => {
            "a tensor's shape does not match the bytes it has".into()
        }
        other => format!("not valid safetensors data ({other})"),
    }
}

/// Model file extensions, in the order they are looked for: a3g's safetensors,
/// then the names PyTorch users give `torch.save` files (the reference writes .dat).
pub const MODEL_EXTENSIONS: [&str; 4] = ["safetensors", "dat", "pt", "pth"];

/// The model file for `env` in `dir`: the first of `<env>.safetensors`, `.dat`,
/// `.pt` and `.pth` that is a file or a device: a device is found so that reading it
/// says what it is rather than that there is no model (a named pipe, which may never
/// be written, is passed over as a folder is).
pub fn find_model(dir: &Path, env: &str) -> Result<PathBuf> {
    let stem = env.replace('/', "_");
    MODEL_EXTENSIONS
        .iter()
        .map(|extension| dir.join(format!("{stem}.{extension}")))
        .find(|path| {
            path.metadata().is_ok_and(|metadata| {
                metadata.is_file() || crate::files::is_device(metadata.file_type())
            })
        })
        .ok_or_else(|| Error::NoCheckpoint {
            dir: dir.to_path_buf(),
            env: env.to_string(),
            found: checkpoints_in(dir),
        })
}

/// Reads a model's tensors from safetensors or, by any other extension, from a
/// PyTorch `torch.save(state_dict)` file; either way non-finite values are refused.
pub fn read_model(path: &Path) -> Result<Vec<(String, Tensor)>> {
    if path.extension().is_some_and(|extension| extension == "safetensors") {
        return read_tensors(path, None);
    }
    let tensors = torch_file::read_state_dict(path)?;
    for (name, tensor) in &tensors {
        if let Some(problem) = implausible_values(name, tensor) {
            return Err(Error::CorruptCheckpoint {
                path: path.to_path_buf(),
                reason: format!("{name} holds {problem}"),
            });
        }
    }
    Ok(tensors)
}

/// The sizes a checkpoint's tensors imply: the width of the layer before the heads
/// (the LSTM's hidden size, or the MLP's), and whether the network has an LSTM.
///
/// Several tensors carry the width; the one most of them give is taken (the critic's
/// on a tie), so that a single damaged tensor is named by [`check_shapes`] instead of
/// sizing the model: a critic_linear.weight of [1, 1000000] once asked libtorch for a
/// 4 TB LSTM.
pub fn implied_architecture(path: &Path, tensors: &[(String, Tensor)]) -> Result<(i64, bool)> {
    let not_actor_critic = |detail: String| Error::CheckpointMismatch {
        path: path.to_path_buf(),
        detail,
        advice: "it is not an actor-critic of the reference's layout",
    };
    let size = |wanted: &str| {
        tensors.iter().find(|(name, _)| name == wanted).map(|(_, tensor)| tensor.size())
    };
    let Some(critic) = size("critic_linear.weight") else {
        return Err(not_actor_critic("it has no tensor critic_linear.weight".into()));
    };
    if critic.len() != 2 || critic[0] != 1 || critic[1] < 1 {
        return Err(not_actor_critic(format!(
            "critic_linear.weight is {critic:?} there and [1, hidden size] here"
        )));
    }
    let readings: Vec<i64> = [
        ("critic_linear.weight", 1),
        ("actor_linear.weight", 1),
        ("fc1.weight", 0),
        ("fc2.weight", 0),
        ("fc2.weight", 1),
        ("lstm.weight_hh", 1),
    ]
    .into_iter()
    .filter_map(|(name, dimension)| {
        size(name).filter(|size| size.len() == 2)?.get(dimension).copied()
    })
    .collect();
    let votes = |width: i64| readings.iter().filter(|&&reading| reading == width).count();
    let hidden =
        readings.iter().copied().rev().max_by_key(|&width| votes(width)).unwrap_or(critic[1]);
    let lstm = tensors.iter().any(|(name, _)| name == "lstm.weight_ih");
    Ok((hidden, lstm))
}

/// How the Atari screens a checkpoint's network was trained on were prepared, by the
/// shape of its first convolution: the universe network's is 3x3, the reference's
/// 5x5; a universe network's LSTM then tells 42x42 screens from 84x84 by the features
/// it takes. Any other network (classic control has none) gets the default. A
/// universe-max network has universe's shapes, so only its sidecar can say so.
pub fn implied_screen(tensors: &[(String, Tensor)]) -> crate::env::Screen {
    let size_of = |wanted: &str| {
        tensors.iter().find(|(name, _)| name == wanted).map(|(_, tensor)| tensor.size())
    };
    match size_of("conv1.weight") {
        Some(size) if size.len() == 4 && size[2..] == [3, 3] => {
            let lstm_inputs = size_of("lstm.weight_ih").and_then(|size| size.get(1).copied());
            if lstm_inputs == Some(crate::model::UNIVERSE84_FEATURES) {
                crate::env::Screen::Mean84
            } else {
                crate::env::Screen::Mean42
            }
        }
        _ => crate::env::Screen::Gray80,
    }
}

/// Checkpoint files (by name) in `dir`, for the message when the wanted one is absent.
pub fn checkpoints_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| {
                    MODEL_EXTENSIONS
                        .iter()
                        .any(|extension| name.ends_with(&format!(".{extension}")))
                        && !name.ends_with(".optimizer.safetensors")
                        && !name.contains(".prev.")
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Checks that `source` holds exactly the tensors `expected` names, each of its shape;
/// the error names the first that differs, with both shapes. Nothing is allocated, so
/// this runs before a model of the expected shapes is built.
fn check_shapes(
    path: &Path,
    source: &[(String, Tensor)],
    expected: &[(String, Vec<i64>)],
    advice: &'static str,
) -> Result<()> {
    let mismatch =
        |detail: String| Error::CheckpointMismatch { path: path.to_path_buf(), detail, advice };
    for (name, shape) in expected {
        let Some((_, stored)) = source.iter().find(|(stored_name, _)| stored_name == name) else {
            return Err(mismatch(format!("it has no tensor {name}")));
        };
        if stored.size() != *shape {
            return Err(mismatch(format!(
                "{name} is {:?} there and {shape:?} here",
                stored.size()
            )));
        }
    }
    if let Some((name, _)) =
        source.iter().find(|(name, _)| !expected.iter().any(|(wanted, _)| wanted == name))
    {
        return Err(mismatch(format!("it has a tensor {name} this model lacks")));
    }
    Ok(())
}

/// Copies `source` tensors into `target` by name, after checking that the names and
/// shapes agree exactly; the error names the first tensor that differs.
pub fn copy_matching(
    path: &Path,
    source: &[(String, Tensor)],
    target: &[(String, Tensor)],
    advice: &'static str,
) -> Result<()> {
    let shapes: Vec<(String, Vec<i64>)> =
        target.iter().map(|(name, tensor)| (name.clone(), tensor.size())).collect();
    check_shapes(path, source, &shapes, advice)?;
    tch::no_grad(|| {
        for (name, tensor) in target {
            let (_, stored) =
                source.iter().find(|(stored_name, _)| stored_name == name).expect("checked above");
            let mut tensor = tensor.shallow_clone();
            tensor.copy_(&stored.to_kind(tensor.kind()));
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Body, Head};

    /// A folder of its own for one test, removed when the test is done with it.
    struct Scratch(PathBuf);

    impl std::ops::Deref for Scratch {
        type Target = PathBuf;
        fn deref(&self) -> &PathBuf {
            &self.0
        }
    }

    impl AsRef<Path> for Scratch {
        fn as_ref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("a3g-unit-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        Scratch(dir)
    }

    fn sidecar(env: &str) -> Sidecar {
        Sidecar {
            a3g_version: "test".into(),
            env: env.into(),
            model: ModelSpec {
                body: Body::Mlp { inputs: 4, lstm: false, input_norm: None },
                hidden_size: 8,
                head: Head::Discrete { actions: 2 },
            },
            optimizer: OptimizerKind::RmsProp,
            counters: SavedCounters { agent_steps: 7, env_frames: 28, updates: 1, test_games: 0 },
            best_score: Some(12.0),
            checksums: None,
            trained_with: Some(
                serde_json::from_value(serde_json::json!({
                    "trainer": {"a3c": {"rollout_lengths": [20]}},
                    "workers": 2, "seed": 1, "max_episode_length": 500, "skip_rate": 4,
                    "lr": 0.1, "shared_optimizer": true,
                    "loss": {"gamma": 0.99, "tau": 1.0, "entropy_coef": 0.01, "value_coef": 0.5},
                    "rewards": {"scale": 1.0, "clip": null},
                }))
                .expect("a sidecar's settings as a3g writes them"),
            ),
        }
    }

    /// A sidecar as a3g 0.1 wrote it, with the flags' text in `args` and no recorded
    /// settings, still reads; one a3g writes now carries no `args`.
    #[test]
    fn sidecars_with_the_flags_text_still_read() {
        let dir = scratch("flags-text");
        fs::create_dir_all(&dir.0).expect("scratch folder");
        let path = dir.0.join("old.json");
        let old = serde_json::json!({
            "a3g_version": "0.1.0", "env": "CartPole-v1",
            "model": serde_json::to_value(sidecar("CartPole-v1").model).expect("plain data"),
            "optimizer": "RmsProp",
            "counters": {"agent_steps": 7, "env_frames": 28, "updates": 1, "test_games": 0},
            "args": {"lr": 0.1, "workers": 2},
        });
        fs::write(&path, old.to_string()).expect("written");
        let read = Sidecar::read(&path).expect("an old sidecar reads");
        assert_eq!(read.trained_with, None);
        assert_eq!(read.counters.agent_steps, 7);
        let now = serde_json::to_value(sidecar("CartPole-v1")).expect("plain data");
        assert!(now.get("args").is_none() && now["trained_with"]["lr"] == 0.1, "{now}");
    }

    /// Saved tensors, statistics and sidecar load back equal, and no temporary file
    /// is left behind.
    #[test]
    fn round_trip() {
        let dir = scratch("round-trip");
        let model = vec![
            ("a.weight".to_string(), Tensor::from_slice(&[1.0f32, 2.0])),
            ("a.bias".to_string(), Tensor::from_slice(&[3.0f32])),
        ];
        let statistic = Tensor::from_slice(&[0.5f32, 0.25]);
        CheckpointWriter::new(&dir, "ALE/Pong-v5")
            .unwrap()
            .save(
                &sidecar("ALE/Pong-v5"),
                &model,
                &[("a.weight.square_avg".to_string(), &statistic)],
            )
            .unwrap();
        let loaded = load(&dir, "ALE/Pong-v5").unwrap();
        assert_eq!(Sidecar { checksums: None, ..loaded.sidecar }, sidecar("ALE/Pong-v5"));
        assert!(loaded.files.model.ends_with("ALE_Pong-v5.safetensors"));
        let target = vec![
            ("a.weight".to_string(), Tensor::zeros([2], (tch::Kind::Float, tch::Device::Cpu))),
            ("a.bias".to_string(), Tensor::zeros([1], (tch::Kind::Float, tch::Device::Cpu))),
        ];
        copy_matching(&loaded.files.model, &loaded.model, &target, "").unwrap();
        assert_eq!(Vec::<f32>::try_from(&target[0].1).unwrap(), [1.0, 2.0]);
        assert_eq!(Vec::<f32>::try_from(&target[1].1).unwrap(), [3.0]);
        let optimizer = loaded.optimizer.unwrap();
        assert_eq!(optimizer[0].0, "a.weight.square_avg");
        let leftovers: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("tmp"))
            .collect();
        assert!(leftovers.is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A shape mismatch names the tensor and both shapes; a damaged file is refused
    /// with its path; a missing one lists what the folder holds.
    #[test]
    fn bad_checkpoints_are_named() {
        let dir = scratch("bad");
        let model = vec![(
            "lstm.weight_ih".to_string(),
            Tensor::zeros([8, 4], (tch::Kind::Float, tch::Device::Cpu)),
        )];
        CheckpointWriter::new(&dir, "CartPole-v1")
            .unwrap()
            .save(&sidecar("CartPole-v1"), &model, &[])
            .unwrap();
        let loaded = load(&dir, "CartPole-v1").unwrap();
        let target = vec![(
            "lstm.weight_ih".to_string(),
            Tensor::zeros([16, 4], (tch::Kind::Float, tch::Device::Cpu)),
        )];
        let message = copy_matching(&loaded.files.model, &loaded.model, &target, "x")
            .unwrap_err()
            .to_string();
        assert!(message.contains("lstm.weight_ih is [8, 4] there and [16, 4] here"), "{message}");

        fs::write(&loaded.files.model, b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": broken").unwrap();
        let message = load(&dir, "CartPole-v1").err().unwrap().to_string();
        assert!(message.contains("CartPole-v1.safetensors"), "{message}");

        let message = load(&dir, "Pendulum-v1").err().unwrap().to_string();
        assert!(
            message.contains("no checkpoint for Pendulum-v1")
                && message.contains("CartPole-v1.safetensors"),
            "{message}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    fn weights(value: f32) -> Vec<(String, Tensor)> {
        vec![("fc1.weight".to_string(), Tensor::from_slice(&[value, value]))]
    }

    fn save_generation(writer: &mut CheckpointWriter, value: f32, statistic: f32) -> Result<()> {
        let statistic = Tensor::from_slice(&[statistic, statistic]);
        writer.save(
            &sidecar("CartPole-v1"),
            &weights(value),
            &[("fc1.weight.square_avg".to_string(), &statistic)],
        )
    }

    fn first_value(tensors: &[(String, Tensor)]) -> f64 {
        tensors[0].1.double_value(&[0])
    }

    /// A set torn by a kill between renames (a newer model beside an older sidecar)
    /// fails its checksum, and loading falls back to the previous complete set.
    #[test]
    fn torn_set_falls_back_to_the_previous_one() {
        let dir = scratch("torn");
        let mut writer = CheckpointWriter::new(&dir, "CartPole-v1").unwrap();
        save_generation(&mut writer, 1.0, 0.5).unwrap();
        save_generation(&mut writer, 2.0, 0.5).unwrap();
        assert_eq!(first_value(&load(&dir, "CartPole-v1").unwrap().model), 2.0);
        let current = CheckpointFiles::new(&dir, "CartPole-v1");
        let previous = CheckpointFiles::previous(&dir, "CartPole-v1");
        // Generation 3's model renamed into place, its sidecar not yet.
        let third_dir = scratch("torn-third");
        let mut third = CheckpointWriter::new(&third_dir, "CartPole-v1").unwrap();
        save_generation(&mut third, 3.0, 0.5).unwrap();
        fs::copy(third.model_file(), &current.model).unwrap();
        let loaded = load(&dir, "CartPole-v1").unwrap();
        assert_eq!(loaded.files.model, previous.model);
        assert_eq!(first_value(&loaded.model), 1.0);

        // The next save keeps the good previous set rather than the torn one.
        let mut writer = CheckpointWriter::new(&dir, "CartPole-v1").unwrap();
        save_generation(&mut writer, 4.0, 0.5).unwrap();
        let kept = read_set(&previous, Purpose::Resume).unwrap();
        assert_eq!(first_value(&kept.model), 1.0);
        assert_eq!(first_value(&load(&dir, "CartPole-v1").unwrap().model), 4.0);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A kill after the previous set was linked to the current one and before the new
    /// files were renamed leaves both names on the same files; the next save keeps the
    /// current set as the previous one and leaves no temporary behind (rename(2) of a
    /// link onto the same file does nothing, and the temporaries stayed).
    #[test]
    fn a_save_after_a_kill_between_renames_leaves_no_temporaries() {
        let dir = scratch("linked");
        let mut writer = CheckpointWriter::new(&dir, "CartPole-v1").unwrap();
        save_generation(&mut writer, 1.0, 0.5).unwrap();
        let current = CheckpointFiles::new(&dir, "CartPole-v1");
        let previous = CheckpointFiles::previous(&dir, "CartPole-v1");
        for (current, previous) in current.all().into_iter().zip(previous.all()) {
            let _ = fs::remove_file(previous);
            fs::hard_link(current, previous).unwrap();
        }
        let mut writer = CheckpointWriter::new(&dir, "CartPole-v1").unwrap();
        save_generation(&mut writer, 2.0, 0.5).unwrap();
        let names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|name| !name.contains(".tmp")), "{names:?}");
        assert_eq!(first_value(&read_set(&previous, Purpose::Resume).unwrap().model), 1.0);
        assert_eq!(first_value(&load(&dir, "CartPole-v1").unwrap().model), 2.0);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// NaN or infinite weights or statistics are refused, and the checkpoint already
    /// there is left as it was.
    #[test]
    fn non_finite_values_are_never_saved() {
        let dir = scratch("non-finite");
        let mut writer = CheckpointWriter::new(&dir, "CartPole-v1").unwrap();
        save_generation(&mut writer, 1.0, 0.5).unwrap();
        let files = CheckpointFiles::new(&dir, "CartPole-v1");
        let before: Vec<Vec<u8>> = files.all().iter().map(|path| fs::read(path).unwrap()).collect();
        for (value, statistic) in
            [(f32::NAN, 0.5), (f32::INFINITY, 0.5), (1.0, f32::NAN), (1.0, -1.0)]
        {
            let error = save_generation(&mut writer, value, statistic).unwrap_err();
            assert!(matches!(error, Error::NonFinite { .. }), "{error}");
            assert!(error.to_string().contains("checkpoint already there is kept"), "{error}");
        }
        let after: Vec<Vec<u8>> = files.all().iter().map(|path| fs::read(path).unwrap()).collect();
        assert_eq!(before, after);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A checkpoint whose counters, statistics or weights could not come from a real
    /// run is refused with a reason naming what is wrong.
    #[test]
    fn implausible_checkpoints_are_refused() {
        // An infinite second moment is a state training reaches: saved and loaded.
        let dir = scratch("infinite-second-moment");
        let mut writer = CheckpointWriter::new(&dir, "CartPole-v1").unwrap();
        save_generation(&mut writer, 1.0, f32::INFINITY).unwrap();
        let loaded = load(&dir, "CartPole-v1").unwrap();
        assert!(loaded.optimizer.unwrap()[0].1.double_value(&[0]).is_infinite());

        let dir = scratch("implausible-counters");
        let mut writer = CheckpointWriter::new(&dir, "CartPole-v1").unwrap();
        save_generation(&mut writer, 1.0, 0.5).unwrap();
        let files = CheckpointFiles::new(&dir, "CartPole-v1");
        let text = fs::read_to_string(&files.sidecar).unwrap();
        fs::write(
            &files.sidecar,
            text.replace("\"updates\": 1", "\"updates\": 18446744073709551615"),
        )
        .unwrap();
        let message = load(&dir, "CartPole-v1").err().unwrap().to_string();
        assert!(message.contains("counter updates is 18446744073709551615"), "{message}");

        // NaN weights in a file whose sidecar predates checksums.
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json.as_object_mut().unwrap().remove("checksums");
        fs::write(&files.sidecar, json.to_string()).unwrap();
        let negative =
            vec![("fc1.weight.square_avg".to_string(), Tensor::from_slice(&[-1.0f32, 1.0]))];
        Tensor::write_safetensors(&negative, &files.optimizer).unwrap();
        let message = load(&dir, "CartPole-v1").err().unwrap().to_string();
        assert!(message.contains("square_avg holds negative values"), "{message}");
        let nan = vec![("fc1.weight".to_string(), Tensor::from_slice(&[f32::NAN, 1.0]))];
        Tensor::write_safetensors(&nan, &files.model).unwrap();
        let message = load(&dir, "CartPole-v1").err().unwrap().to_string();
        assert!(message.contains("fc1.weight holds NaN or infinite values"), "{message}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Checkpoint temporaries of other processes are removed, a live one's too (PID 1
    /// always runs, as a reused PID would); this process's own and other files are not.
    #[test]
    fn stale_temporaries_are_removed() {
        let dir = scratch("stale");
        fs::create_dir_all(&dir).unwrap();
        let dead = dir.join("CartPole-v1.safetensors.tmp4000000000");
        let reused = dir.join("CartPole-v1.prev.json.tmp1");
        let own = dir.join(format!("CartPole-v1.json.tmp{}", std::process::id()));
        let others = [dir.join("notes.tmp.txt"), dir.join("notes.txt.tmp12")];
        for path in [&dead, &reused, &own].into_iter().chain(&others) {
            fs::write(path, b"x").unwrap();
        }
        assert_eq!(remove_stale_temporaries(&dir), 2);
        assert!(!dead.exists() && !reused.exists() && own.exists());
        assert!(others.iter().all(|path| path.exists()));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Safetensors headers whose shapes libtorch cannot make (a dimension of 2^63 or
    /// more beside a 0, a product past 64 bits) or whose dtype it lacks are refused on
    /// one line; libtorch throws rather than aborts, and tch returns that as an error.
    #[test]
    fn crafted_safetensors_shapes_are_refused() {
        let dir = scratch("crafted");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("model.safetensors");
        for (shape, dtype, bytes, reason) in [
            ("[18446744073709551615, 0]", "F32", 0, "non-negative"),
            ("[9223372036854775808, 0]", "F32", 0, "cannot be represented"),
            ("[4294967296, 4294967296, 0]", "F32", 0, "shape does not match"),
            ("[2]", "U16", 4, "not a float type"),
        ] {
            let header = format!(
                r#"{{"a":{{"dtype":"{dtype}","shape":{shape},"data_offsets":[0,{bytes}]}}}}"#
            );
            let file = [&(header.len() as u64).to_le_bytes()[..], header.as_bytes(), &[0; 4]];
            fs::write(&path, &file.concat()[..8 + header.len() + bytes]).unwrap();
            let message = read_model(&path).err().unwrap().report();
            assert!(message.contains(reason) && !message.contains('\n'), "{shape}: {message}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
