//! What a checkpoint's sidecar records of the run that wrote it: its checked settings,
//! typed, so that `--load` and eval read what the run trained on and with rather than
//! the flags' text. Here, below both, so that the checkpoint reads it and config/
//! writes it without either importing the other.

use serde::{Deserialize, Serialize};

use crate::a3c::settings::A3cConfig;
use crate::env::Crop;
use crate::ga3c::settings::Ga3cConfig;
use crate::rollout::{LossConfig, RewardShaping};

/// The checked settings of the run that wrote a checkpoint, recorded in its sidecar
/// (`trained_with`) so that `--load` and eval read typed values: what the run
/// trained on and with, not the flags' text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainedWith {
    pub trainer: TrainerConfig,
    /// Workers (A3C) or agents (GA3C).
    pub workers: usize,
    pub seed: u64,
    pub max_episode_length: u32,
    /// Frames per agent step, for NoFrameskip ids.
    pub skip_rate: u32,
    /// The rows kept of the game's screens (Atari on the reference's screen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crop: Option<Crop>,
    pub lr: f64,
    /// The agent steps over which `lr` fell to 0 (--lr-anneal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr_anneal_steps: Option<u64>,
    /// The seconds of training over which `lr` fell to 0 (--lr-anneal over --max-time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr_anneal_seconds: Option<f64>,
    pub shared_optimizer: bool,
    pub loss: LossConfig,
    pub rewards: RewardShaping,
    /// How an environment from outside a3g was made: `--env-kwargs`, `--env-import`
    /// and `--env-wrapper`, which `--load` and eval make it with again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_env: Option<OutsideEnv>,
}

/// What made an environment from outside a3g (`gym:<id>`, a user's class), beside its
/// id: the same id with other keyword arguments may be another task.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutsideEnv {
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub imports: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrappers: Vec<String>,
}

impl OutsideEnv {
    /// These settings as the flags that give them, for messages.
    pub fn as_flags(&self) -> String {
        let mut flags =
            vec![format!("--env-kwargs '{}'", serde_json::Value::Object(self.kwargs.clone()))];
        flags.extend(self.imports.iter().map(|module| format!("--env-import {module}")));
        flags.extend(self.wrappers.iter().map(|wrapper| format!("--env-wrapper {wrapper}")));
        if flags.is_empty() {
            return "no --env-kwargs, --env-import or --env-wrapper".into();
        }
        flags.join(" ")
    }
}

/// The trainer a run uses, with its own settings, which its folder makes from its
/// flags: this enum and its methods (in config/, which makes it) are the settings' one
/// table of trainers (a third trainer adds a variant and an arm to each), as
/// [`crate::trainer::chosen`] is the running trainers'.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrainerConfig {
    A3c(A3cConfig),
    Ga3c(Ga3cConfig),
}

#[cfg(test)]
mod tests {
    use super::OutsideEnv;

    /// A sidecar written before --env-wrapper existed reads as made without wrappers,
    /// and one made without wrappers is written as before, so older a3g reads it.
    #[test]
    fn outside_envs_without_wrappers_read_and_write_as_before() {
        let older: OutsideEnv =
            serde_json::from_str(r#"{"kwargs": {"size": 5}, "imports": ["minigrid"]}"#).unwrap();
        assert!(older.wrappers.is_empty());
        assert_eq!(older.as_flags(), r#"--env-kwargs '{"size":5}' --env-import minigrid"#);
        let written = serde_json::to_value(&older).unwrap();
        assert_eq!(written, serde_json::json!({"kwargs": {"size": 5}, "imports": ["minigrid"]}));
    }
}
