//! Opening the model a command works on, for `train` (fresh, `--load`, or a rank
//! taking rank 0's record) and `a3g eval` alike: one sequence from the flags' request
//! and a checkpoint's files to a checked spec and the environment made for it.
//!
//! The environment is made first, so that an unknown id is reported as such rather
//! than as a missing checkpoint (but for a trained model of an environment from outside
//! a3g, made once its record has said how: its recorded imports may be what registers
//! the id, and flags that differ from the record are refused as such); the checkpoint
//! is read next; the environment is
//! remade only when the model was trained on other screens or crop rows than the
//! flags imply; and the spec is built for that environment with the checkpoint's
//! sizes, the tensors' shapes checked before any model exists (the shapes a damaged
//! file implies could ask for terabytes), then given what the sidecar records beyond
//! them (input scaling, the Gaussian's floor).

use std::path::{Path, PathBuf};

use tch::Tensor;

use super::record::TrainedWith;
use super::{
    check_shapes, find_model, implied_architecture, implied_screen, load, load_for, read_model,
    Checkpoint, CheckpointFiles, Purpose, Sidecar, SIDECAR_MISMATCH,
};
use crate::env::{Env, Screen};
use crate::error::{Error, Result};
use crate::model::{parameter_shapes, Body, Head, ModelRequest, ModelSpec, MIN_STD_RANGE};
use crate::shared_optim::OptimizerKind;

/// The environments of the model being opened: as the flags describe them, until the
/// model says it was trained on others.
pub trait ModelEnvironments {
    /// The environment, as described so far.
    fn make(&mut self) -> Result<Box<dyn Env>>;

    /// The id of the environment, which names the checkpoint.
    fn id(&self) -> &str;

    /// Whether a trained model's environment is made only once its record is read: one
    /// from outside a3g, whose recorded imports may register the id and whose
    /// recorded wrappers give its spaces.
    fn made_as_recorded(&self) -> bool;

    /// Switches to the environments the model was trained on: Atari screens prepared
    /// as `screen`, and the crop rows `trained` records. Returns whether they differ
    /// from those described before, so that an environment made then must be remade.
    /// Refuses what the flags ask that contradicts how the model was trained.
    fn adopt(&mut self, screen: Screen, trained: Option<&TrainedWith>) -> Result<bool>;
}

/// Where the model comes from, which says what it is opened for.
pub enum ModelSource<'a> {
    /// A fresh training run: the model the flags ask for.
    Fresh,
    /// `train --load`: the checkpoint set in this folder (model, sidecar and
    /// optimizer statistics, with the previous set as the fallback).
    Resume(&'a Path),
    /// A rank other than 0 of a resumed run: the sidecar rank 0 read. The tensors are
    /// rank 0's, which gives every rank its weights.
    RankZero(&'a Sidecar),
    /// `a3g eval`: a3g's checkpoint in this folder, else a PyTorch `torch.save` file.
    Play(&'a Path),
}

/// The model `a3g eval` plays, as it was read.
pub struct PlayedModel {
    /// The model file.
    pub path: PathBuf,
    pub tensors: Vec<(String, Tensor)>,
    /// Its sidecar, read, and where it lies; `None` for a PyTorch file.
    pub sidecar: Option<(Sidecar, PathBuf)>,
}

/// A model opened: its checked spec, the environment made for it and what was read.
pub struct OpenedModel {
    pub spec: ModelSpec,
    /// Made on the screens and crop rows the model takes.
    pub env: Box<dyn Env>,
    /// With [`ModelSource::Resume`]: the checkpoint to go on from.
    pub resume: Option<Checkpoint>,
    /// With [`ModelSource::Play`]: the model to play.
    pub played: Option<PlayedModel>,
    /// Whether the spec still lacks the input scaling `--normalize-obs` asks for: a
    /// fresh run measures it where it starts (20,000 steps of play).
    pub lacks_input_norm: bool,
    /// The optimizer a resumed model trained with (rank 0's, on the other ranks),
    /// which a run that leaves out --optimizer and --amsgrad goes on with.
    pub trained_optimizer: Option<OptimizerKind>,
}

/// What to do about a played model whose tensors do not fit the environment.
pub const PLAY_MISMATCH: &str =
    "evaluate it with the --env it was trained on; if that is this one, the \
                             file is damaged: restore it or train again";

/// Opens the model that `source` names for the environments `envs` describes, as
/// `request` (the flags) asks: a fresh model is built as asked; a trained one is
/// checked against the request, whose every size left out is the checkpoint's and
/// whose every contradiction is refused on one line.
pub fn open_model(
    source: ModelSource,
    request: &ModelRequest,
    envs: &mut dyn ModelEnvironments,
) -> Result<OpenedModel> {
    let made_first = !envs.made_as_recorded() || matches!(source, ModelSource::Fresh);
    let mut env = if made_first { Some(envs.make()?) } else { None };
    if let Some(env) = &env {
        request.check_fits(env.as_ref())?;
    }
    let env_id = envs.id().to_string();
    let (mut resume, mut played, mut trained_optimizer) = (None, None, None);
    let spec = match source {
        ModelSource::Fresh => request.fresh_spec(made(&mut env, envs, false)?),
        ModelSource::Resume(dir) => {
            let checkpoint = load(dir, &env_id)?;
            checkpoint.sidecar.check_env(&checkpoint.files.sidecar, &env_id)?;
            checkpoint.sidecar.check_resumable(&checkpoint.files.sidecar)?;
            let Checkpoint { files, sidecar, model, .. } = &checkpoint;
            let tensors =
                TensorsToCheck { path: &files.model, tensors: model, advice: SIDECAR_MISMATCH };
            let spec =
                resumed_spec(request, envs, &mut env, sidecar, &files.sidecar, Some(tensors))?;
            trained_optimizer = Some(checkpoint.sidecar.optimizer);
            resume = Some(checkpoint);
            spec
        }
        ModelSource::RankZero(record) => {
            trained_optimizer = Some(record.optimizer);
            resumed_spec(request, envs, &mut env, record, Path::new("rank 0's checkpoint"), None)?
        }
        ModelSource::Play(dir) => {
            let model = read_played_model(dir, &env_id)?;
            let trained =
                model.sidecar.as_ref().and_then(|(sidecar, _)| sidecar.trained_with.as_ref());
            let screen = played_screen(&model);
            if let Some(note) = unrecorded_screen_note(&model, screen) {
                crate::console::warn(&note);
            }
            let differs = envs.adopt(screen, trained)?;
            let env = made(&mut env, envs, differs)?;
            let tensors = TensorsToCheck {
                path: &model.path,
                tensors: &model.tensors,
                advice: PLAY_MISMATCH,
            };
            let recorded = model.sidecar.as_ref().map(|(sidecar, path)| (sidecar, path.as_path()));
            let dimensions = implied_architecture(&model.path, &model.tensors)?;
            let spec = checked_spec(env, dimensions, Some(tensors), recorded)?;
            played = Some(model);
            spec
        }
    };
    let env = env.expect("every source makes the environment");
    if !made_first {
        request.check_fits(env.as_ref())?;
    }
    let lacks_input_norm = request.normalize_obs
        && matches!(spec.body, Body::Mlp { input_norm: None, .. })
        && matches!(source, ModelSource::Fresh);
    Ok(OpenedModel { spec, env, resume, played, lacks_input_norm, trained_optimizer })
}

/// The environment, made now if it is not yet or if the model's record made it
/// `differ` from the one made before.
fn made<'e>(
    env: &'e mut Option<Box<dyn Env>>,
    envs: &mut dyn ModelEnvironments,
    differs: bool,
) -> Result<&'e dyn Env> {
    if differs || env.is_none() {
        *env = Some(envs.make()?);
    }
    Ok(env.as_deref().expect("made just above"))
}

/// The spec of a resumed model, whose sidecar `record` (at `record_path`) describes
/// it: the request checked against it, the environment remade on its screens if they
/// differ, and its tensors' shapes checked where this process holds them.
fn resumed_spec(
    request: &ModelRequest,
    envs: &mut dyn ModelEnvironments,
    env: &mut Option<Box<dyn Env>>,
    record: &Sidecar,
    record_path: &Path,
    tensors: Option<TensorsToCheck>,
) -> Result<ModelSpec> {
    let screen = resumed_screen(request, record)?;
    let dimensions = resumed_dimensions(request, record)?;
    let differs = envs.adopt(screen, record.trained_with.as_ref())?;
    checked_spec(made(env, envs, differs)?, dimensions, tensors, Some((record, record_path)))
}

/// A checkpoint's tensors, for [`checked_spec`] to check against the model they imply.
struct TensorsToCheck<'a> {
    /// The model file they were read from.
    path: &'a Path,
    tensors: &'a [(String, Tensor)],
    /// What to do if they do not fit.
    advice: &'static str,
}

/// The model a checkpoint holds, checked: built for `env`'s observations and actions
/// with the checkpoint's `(hidden size, LSTM)`, its tensors' shapes checked against it
/// where this process holds them, then given what its sidecar records beyond them,
/// when it has one.
fn checked_spec(
    env: &dyn Env,
    (hidden_size, lstm): (i64, bool),
    tensors: Option<TensorsToCheck>,
    sidecar: Option<(&Sidecar, &Path)>,
) -> Result<ModelSpec> {
    let mut spec = ModelSpec::for_env(env, hidden_size, lstm);
    if let Some((sidecar, _)) = sidecar {
        check_same_spaces(env, &spec, &sidecar.model)?;
    }
    if let Some(TensorsToCheck { path, tensors, advice }) = tensors {
        check_shapes(path, tensors, &parameter_shapes(&spec), advice)?;
    }
    if let Some((sidecar, sidecar_path)) = sidecar {
        adopt_trained_model(&mut spec, &sidecar.model, sidecar_path)?;
    }
    Ok(spec)
}

/// Refuses an environment whose observations or actions are not those the model was
/// trained on (`trained`, as its sidecar describes it): an outside environment's id made
/// with other keyword arguments may be another task, and screens of one shape may be
/// made two ways (universe's and universe-max's).
fn check_same_spaces(env: &dyn Env, spec: &ModelSpec, trained: &ModelSpec) -> Result<()> {
    let inputs = |spec: &ModelSpec| match &spec.body {
        Body::Mlp { inputs, .. } => format!("observations of {inputs} values"),
        screens => format!("the {} network's screens", screens.network_name()),
    };
    let actions = |head: &Head| match head {
        Head::Discrete { actions } => format!("{actions} discrete actions"),
        Head::Gaussian { low, .. } => format!("{} continuous action dimensions", low.len()),
    };
    let same_head = match (&spec.head, &trained.head) {
        (Head::Discrete { actions }, Head::Discrete { actions: trained }) => actions == trained,
        (Head::Gaussian { low, high, .. }, Head::Gaussian { low: l, high: h, .. }) => {
            low == l && high == h
        }
        _ => false,
    };
    if inputs(spec) == inputs(trained) && same_head {
        return Ok(());
    }
    let bounds = if inputs(spec) == inputs(trained) && actions(&spec.head) == actions(&trained.head)
    {
        " (within other bounds)"
    } else {
        ""
    };
    Err(Error::BadArguments(format!(
        "{} gives {} and takes {}{bounds}, but the model was trained on {} and {}; make the \
         environment as it was trained (the same --env, --env-kwargs and --env-import)",
        env.id(),
        inputs(spec),
        actions(&spec.head),
        inputs(trained),
        actions(&trained.head)
    )))
}

/// Gives `spec`, built for the environment played, what else `trained`, the model a
/// checkpoint's sidecar (`sidecar`) describes, has: its input scaling and its
/// Gaussian's floor. Either out of range, or a scaling that does not fit `spec`'s
/// inputs, means a damaged or made-up sidecar, and is refused.
fn adopt_trained_model(spec: &mut ModelSpec, trained: &ModelSpec, sidecar: &Path) -> Result<()> {
    let corrupt = |reason: String| Error::CorruptCheckpoint { path: sidecar.to_path_buf(), reason };
    if let (Head::Gaussian { min_std, .. }, Head::Gaussian { min_std: trained_min_std, .. }) =
        (&mut spec.head, &trained.head)
    {
        if !MIN_STD_RANGE.contains(trained_min_std) {
            let (low, high) = MIN_STD_RANGE.into_inner();
            return Err(corrupt(format!(
                "its Gaussian's min_std {trained_min_std} is outside [{low}, {high}]"
            )));
        }
        *min_std = *trained_min_std;
    }
    let Body::Mlp { input_norm: Some(norm), .. } = &trained.body else { return Ok(()) };
    let Body::Mlp { inputs, input_norm, .. } = &mut spec.body else {
        return Err(corrupt("it gives input scaling to a network of screens".into()));
    };
    if let Some(reason) = norm.problem(*inputs) {
        return Err(corrupt(reason));
    }
    *input_norm = Some(norm.clone());
    Ok(())
}

/// Reads the model `a3g eval` plays: a3g's own checkpoint (verified as `--load`
/// does, with the same fallback), else the first PyTorch file of `find_model`.
fn read_played_model(dir: &Path, env: &str) -> Result<PlayedModel> {
    let current = CheckpointFiles::new(dir, env);
    let previous = CheckpointFiles::previous(dir, env);
    if current.sidecar.exists() || previous.sidecar.exists() {
        let checkpoint = load_for(dir, env, Purpose::Play)?;
        checkpoint.sidecar.check_env(&checkpoint.files.model, env)?;
        return Ok(PlayedModel {
            path: checkpoint.files.model,
            tensors: checkpoint.model,
            sidecar: Some((checkpoint.sidecar, checkpoint.files.sidecar)),
        });
    }
    let path = find_model(dir, env)?;
    let tensors = read_model(&path)?;
    Ok(PlayedModel { path, tensors, sidecar: None })
}

/// The screens a played model reads: those its sidecar's network reads, else those
/// its tensors imply. Weights alone cannot tell block maxima from the bilinear
/// screen (the universe network reads both at 42x42); a sidecar can.
fn played_screen(model: &PlayedModel) -> Screen {
    let recorded = model.sidecar.as_ref().and_then(|(sidecar, _)| sidecar.model.body.screen());
    recorded.unwrap_or_else(|| implied_screen(&model.tensors))
}

/// The note for a model of a3g's own whose sidecar is gone and whose weights fit the
/// universe network: they cannot say whether it learned on the bilinear screens or on
/// block maxima (`--model universe-max`), so it plays on the first, which may be wrong.
/// The Python references' files (`.dat`, `.pth`) only ever mean the bilinear ones.
fn unrecorded_screen_note(model: &PlayedModel, screen: Screen) -> Option<String> {
    let own_format = model.path.extension().is_some_and(|extension| extension == "safetensors");
    (model.sidecar.is_none() && own_format && screen == Screen::Mean42).then(|| {
        format!(
            "note: {} has no sidecar (.json) beside it to say which screens it learned on; its \
             weights fit the universe network, so it plays on that network's bilinear 42x42 \
             screens, wrong for a --model universe-max model: put its sidecar back for those",
            model.path.display()
        )
    })
}

/// The screen a resumed model was trained on; `--model` may not name another.
fn resumed_screen(request: &ModelRequest, sidecar: &Sidecar) -> Result<Screen> {
    let trained = &sidecar.model.body;
    match (trained.screen(), &request.network) {
        (Some(_), Some(asked)) if asked != trained => Err(contradiction(
            sidecar,
            format!("--model {}", asked.network_name()),
            format!("a {} model", trained.network_name()),
            "--model",
        )),
        (Some(screen), _) => Ok(screen),
        (None, _) => Ok(Screen::default()),
    }
}

/// The hidden size and LSTM of the model a resumed run trains: the checkpoint's (a
/// flag that contradicts them, or its Gaussian floor or input scaling, is refused).
fn resumed_dimensions(request: &ModelRequest, sidecar: &Sidecar) -> Result<(i64, bool)> {
    let trained = &sidecar.model;
    if let Some(asked) = request.hidden_size.filter(|asked| *asked != trained.hidden_size) {
        return Err(contradiction(
            sidecar,
            format!("--hidden-size {asked}"),
            format!("a hidden size of {}", trained.hidden_size),
            "--hidden-size",
        ));
    }
    let (lstm, scaled) = match &trained.body {
        Body::Mlp { lstm, input_norm, .. } => (*lstm, input_norm.is_some()),
        Body::AtariLstm | Body::Universe | Body::Universe84 | Body::UniverseMax => (true, false),
    };
    if request.lstm && !lstm {
        return Err(contradiction(sidecar, "--lstm".into(), "no LSTM cell".into(), "--lstm"));
    }
    if let (Some(asked), Head::Gaussian { min_std, .. }) = (request.min_std, &trained.head) {
        if asked != *min_std {
            return Err(contradiction(
                sidecar,
                format!("--min-std {asked}"),
                format!("a floor of {min_std}"),
                "--min-std",
            ));
        }
    }
    if request.normalize_obs && !scaled {
        return Err(contradiction(
            sidecar,
            "--normalize-obs".into(),
            "unscaled inputs".into(),
            "--normalize-obs",
        ));
    }
    Ok((trained.hidden_size, lstm))
}

fn contradiction(sidecar: &Sidecar, asked: String, trained: String, flag: &str) -> Error {
    Error::BadArguments(format!(
        "{asked} contradicts the checkpoint this run resumes, which has {trained} (a3g {}); \
         leave out {flag} to resume it, or start a new run without --load or --resume auto",
        sidecar.a3g_version
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::SavedCounters;
    use crate::shared_optim::OptimizerKind;
    use tch::{Kind, Tensor};

    /// A universe network's tensors as far as the screen they imply goes.
    fn universe_tensors() -> Vec<(String, Tensor)> {
        vec![
            ("conv1.weight".into(), Tensor::zeros([32, 1, 3, 3], (Kind::Float, tch::Device::Cpu))),
            ("lstm.weight_ih".into(), Tensor::zeros([64, 288], (Kind::Float, tch::Device::Cpu))),
        ]
    }

    fn sidecar_of(body: Body) -> Sidecar {
        Sidecar {
            a3g_version: "test".into(),
            env: "BreakoutDeterministic-v4".into(),
            model: ModelSpec { body, hidden_size: 16, head: Head::Discrete { actions: 4 } },
            optimizer: OptimizerKind::RmsProp,
            counters: SavedCounters::default(),
            best_score: None,
            checksums: None,
            trained_with: None,
        }
    }

    /// A checkpoint's network is built for the screens the environment makes, and a
    /// sidecar naming another network that reads screens of the same shape is refused
    /// rather than played on the wrong screens.
    #[test]
    fn the_environments_screens_must_be_the_checkpoints() {
        let breakout = |screen| {
            let options = crate::env::EnvOptions { screen, ..Default::default() };
            crate::env::make("BreakoutDeterministic-v4", &options).unwrap()
        };
        let sidecar = sidecar_of(Body::UniverseMax);
        let recorded = Some((&sidecar, Path::new("model.json")));
        let spec = checked_spec(breakout(Screen::Max42).as_ref(), (16, true), None, recorded);
        assert_eq!(spec.unwrap().body, Body::UniverseMax);
        let fresh = ModelSpec::for_env(breakout(Screen::Mean42).as_ref(), 16, true);
        assert_eq!(fresh.body, Body::Universe);
        let Err(error) =
            checked_spec(breakout(Screen::Mean42).as_ref(), (16, true), None, recorded)
        else {
            panic!("universe-max weights were given universe's screens");
        };
        let message = error.to_string();
        assert!(message.contains("the universe-max network's screens"), "{message}");
    }

    /// `a3g eval` plays a universe-max checkpoint on block maxima, as its sidecar says,
    /// and the same weights alone on the bilinear screen their shapes imply, with a note
    /// that says so when they are a3g's own (a reference's file never means block maxima).
    #[test]
    fn played_screens_follow_the_sidecar_before_the_weights() {
        let played = |body: Option<Body>| PlayedModel {
            path: PathBuf::from("model.safetensors"),
            tensors: universe_tensors(),
            sidecar: body.map(|body| (sidecar_of(body), PathBuf::from("model.json"))),
        };
        assert_eq!(played_screen(&played(Some(Body::UniverseMax))), Screen::Max42);
        assert_eq!(played_screen(&played(None)), Screen::Mean42);
        let note = unrecorded_screen_note(&played(None), Screen::Mean42).expect("a note");
        assert!(note.contains("model.safetensors") && note.contains("universe-max"), "{note}");
        assert_eq!(unrecorded_screen_note(&played(Some(Body::UniverseMax)), Screen::Max42), None);
        let mut reference = played(None);
        reference.path = PathBuf::from("Pong.dat");
        assert_eq!(unrecorded_screen_note(&reference, Screen::Mean42), None);
        // A sidecar is believed over the shapes even where they disagree; the shapes
        // are checked against the network later.
        assert_eq!(played_screen(&played(Some(Body::Universe84))), Screen::Mean84);
    }
}
