//! Checkpoints: the model as safetensors under the reference's parameter names, the
//! optimizer statistics beside it, and a JSON sidecar with the env id, the model's
//! dimensions, the arguments and the counters. Every file is written to a temporary
//! name and renamed, so a crash mid-write never destroys the last good checkpoint.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::error::{Error, Result};
use crate::model::ModelSpec;
use crate::shared_optim::OptimizerKind;

/// Counters a run resumes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    pub agent_steps: u64,
    pub env_frames: u64,
    pub updates: u64,
    pub test_games: u64,
}

/// The JSON file beside the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sidecar {
    pub a3g_version: String,
    pub env: String,
    pub model: ModelSpec,
    pub optimizer: OptimizerKind,
    pub counters: Counters,
    /// The arguments of the run that wrote it.
    pub args: serde_json::Value,
}

impl Sidecar {
    /// Reads the sidecar at `path`.
    pub fn read(path: &Path) -> Result<Self> {
        let corrupt =
            |reason: String| Error::CorruptCheckpoint { path: path.to_path_buf(), reason };
        let text = fs::read_to_string(path).map_err(|err| corrupt(err.to_string()))?;
        serde_json::from_str(&text).map_err(|err| corrupt(err.to_string()))
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

/// File names of one environment's checkpoint in a folder.
pub struct CheckpointFiles {
    pub model: PathBuf,
    pub optimizer: PathBuf,
    pub sidecar: PathBuf,
}

impl CheckpointFiles {
    /// The files for `env` in `dir`; `/` in ids (ALE/Pong-v5) becomes `_`.
    pub fn new(dir: &Path, env: &str) -> Self {
        let stem = env.replace('/', "_");
        CheckpointFiles {
            model: dir.join(format!("{stem}.safetensors")),
            optimizer: dir.join(format!("{stem}.optimizer.safetensors")),
            sidecar: dir.join(format!("{stem}.json")),
        }
    }
}

/// Writes a checkpoint: all three files go to temporary names first, then each is
/// renamed over the old one.
pub fn save(
    dir: &Path,
    sidecar: &Sidecar,
    model: &[(String, Tensor)],
    optimizer: &[(String, &Tensor)],
) -> Result<()> {
    fs::create_dir_all(dir).map_err(|source| Error::Io {
        action: "create the checkpoint folder",
        path: dir.to_path_buf(),
        source,
    })?;
    let files = CheckpointFiles::new(dir, &sidecar.env);
    let temporary = |path: &Path| {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".tmp{}", std::process::id()));
        PathBuf::from(name)
    };
    let model_refs: Vec<(&str, &Tensor)> =
        model.iter().map(|(name, tensor)| (name.as_str(), tensor)).collect();
    write_tensors(&temporary(&files.model), &model_refs)?;
    let optimizer_refs: Vec<(&str, &Tensor)> =
        optimizer.iter().map(|(name, tensor)| (name.as_str(), *tensor)).collect();
    write_tensors(&temporary(&files.optimizer), &optimizer_refs)?;
    let json = serde_json::to_string_pretty(sidecar).expect("the sidecar serialises");
    fs::write(temporary(&files.sidecar), json + "\n").map_err(|source| Error::Io {
        action: "write",
        path: temporary(&files.sidecar),
        source,
    })?;
    for path in [&files.model, &files.optimizer, &files.sidecar] {
        fs::rename(temporary(path), path).map_err(|source| Error::Io {
            action: "rename into place",
            path: path.clone(),
            source,
        })?;
    }
    Ok(())
}

fn write_tensors(path: &Path, tensors: &[(&str, &Tensor)]) -> Result<()> {
    // Copies taken first: workers keep updating the shared weights while we write.
    let copies: Vec<(&str, Tensor)> = tch::no_grad(|| {
        tensors
            .iter()
            .map(|(name, tensor)| (*name, tensor.to_device(tch::Device::Cpu).copy()))
            .collect()
    });
    Tensor::write_safetensors(&copies, path).map_err(|err| Error::Io {
        action: "write",
        path: path.to_path_buf(),
        source: std::io::Error::other(err.to_string()),
    })
}

/// A checkpoint read from disk, not yet checked against a model.
pub struct Checkpoint {
    pub files: CheckpointFiles,
    pub sidecar: Sidecar,
    pub model: Vec<(String, Tensor)>,
    /// Optimizer statistics, if the file exists.
    pub optimizer: Option<Vec<(String, Tensor)>>,
}

/// Reads the checkpoint of `env` in `dir`.
pub fn load(dir: &Path, env: &str) -> Result<Checkpoint> {
    let files = CheckpointFiles::new(dir, env);
    if !files.model.exists() {
        return Err(Error::NoCheckpoint {
            dir: dir.to_path_buf(),
            env: env.to_string(),
            found: checkpoints_in(dir),
        });
    }
    let sidecar = Sidecar::read(&files.sidecar)?;
    let model = read_tensors(&files.model)?;
    let optimizer =
        if files.optimizer.exists() { Some(read_tensors(&files.optimizer)?) } else { None };
    Ok(Checkpoint { files, sidecar, model, optimizer })
}

fn read_tensors(path: &Path) -> Result<Vec<(String, Tensor)>> {
    // tch reports a damaged file through a panic in some versions; either way the
    // user gets one line naming the file.
    let result = std::panic::catch_unwind(|| Tensor::read_safetensors(path));
    match result {
        Ok(Ok(tensors)) => Ok(tensors),
        Ok(Err(err)) => Err(Error::CorruptCheckpoint {
            path: path.to_path_buf(),
            reason: first_line(&err.to_string()),
        }),
        Err(_) => Err(Error::CorruptCheckpoint {
            path: path.to_path_buf(),
            reason: "unreadable safetensors data".into(),
        }),
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").to_string()
}

/// Model file extensions, in the order they are looked for: a3g's safetensors,
/// then the names PyTorch users give `torch.save` files (the reference writes .dat).
pub const MODEL_EXTENSIONS: [&str; 4] = ["safetensors", "dat", "pt", "pth"];

/// The model file for `env` in `dir`: the first of `<env>.safetensors`, `.dat`,
/// `.pt` and `.pth` that exists.
pub fn find_model(dir: &Path, env: &str) -> Result<PathBuf> {
    let stem = env.replace('/', "_");
    MODEL_EXTENSIONS
        .iter()
        .map(|extension| dir.join(format!("{stem}.{extension}")))
        .find(|path| path.is_file())
        .ok_or_else(|| Error::NoCheckpoint {
            dir: dir.to_path_buf(),
            env: env.to_string(),
            found: checkpoints_in(dir),
        })
}

/// Reads a model's tensors from safetensors or, by any other extension, from a
/// PyTorch `torch.save(state_dict)` file.
pub fn read_model(path: &Path) -> Result<Vec<(String, Tensor)>> {
    if path.extension().is_some_and(|extension| extension == "safetensors") {
        read_tensors(path)
    } else {
        crate::torch_file::read_state_dict(path)
    }
}

/// The sizes a checkpoint's tensors imply: the width of the layer before the heads
/// (the LSTM's hidden size, or the MLP's), and whether the network has an LSTM.
pub fn implied_architecture(path: &Path, tensors: &[(String, Tensor)]) -> Result<(i64, bool)> {
    let critic = tensors.iter().find(|(name, _)| name == "critic_linear.weight");
    let Some((_, critic)) = critic else {
        return Err(Error::CheckpointMismatch {
            path: path.to_path_buf(),
            detail: "it has no tensor critic_linear.weight".into(),
            advice: "it is not an actor-critic of the reference's layout",
        });
    };
    let size = critic.size();
    if size.len() != 2 || size[0] != 1 {
        return Err(Error::CheckpointMismatch {
            path: path.to_path_buf(),
            detail: format!("critic_linear.weight is {size:?} there and [1, hidden size] here"),
            advice: "it is not an actor-critic of the reference's layout",
        });
    }
    let lstm = tensors.iter().any(|(name, _)| name == "lstm.weight_ih");
    Ok((size[1], lstm))
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
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Copies `source` tensors into `target` by name, after checking that the names and
/// shapes agree exactly; the error names the first tensor that differs.
pub fn copy_matching(
    path: &Path,
    source: &[(String, Tensor)],
    target: &[(String, Tensor)],
    advice: &'static str,
) -> Result<()> {
    let mismatch =
        |detail: String| Error::CheckpointMismatch { path: path.to_path_buf(), detail, advice };
    for (name, tensor) in target {
        let Some((_, stored)) = source.iter().find(|(stored_name, _)| stored_name == name) else {
            return Err(mismatch(format!("it has no tensor {name}")));
        };
        if stored.size() != tensor.size() {
            return Err(mismatch(format!(
                "{name} is {:?} there and {:?} here",
                stored.size(),
                tensor.size()
            )));
        }
    }
    if let Some((name, _)) =
        source.iter().find(|(name, _)| !target.iter().any(|(wanted, _)| wanted == name))
    {
        return Err(mismatch(format!("it has a tensor {name} this model lacks")));
    }
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

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("a3g-unit-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn sidecar(env: &str) -> Sidecar {
        Sidecar {
            a3g_version: "test".into(),
            env: env.into(),
            model: ModelSpec {
                body: Body::Mlp { inputs: 4, lstm: false },
                hidden_size: 8,
                head: Head::Discrete { actions: 2 },
            },
            optimizer: OptimizerKind::RmsProp,
            counters: Counters { agent_steps: 7, env_frames: 28, updates: 1, test_games: 0 },
            args: serde_json::json!({"lr": 0.1}),
        }
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
        save(
            &dir,
            &sidecar("ALE/Pong-v5"),
            &model,
            &[("a.weight.square_avg".to_string(), &statistic)],
        )
        .unwrap();
        let loaded = load(&dir, "ALE/Pong-v5").unwrap();
        assert_eq!(loaded.sidecar, sidecar("ALE/Pong-v5"));
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
        save(&dir, &sidecar("CartPole-v1"), &model, &[]).unwrap();
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
            ("[4294967296, 4294967296, 0]", "F32", 0, "ValidationOverflow"),
            ("[2]", "U16", 4, "unsupported dtype"),
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
