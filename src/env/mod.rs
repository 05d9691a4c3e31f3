//! Environments the trainer runs, behind one interface: Atari games through the ALE
//! emulator with Gym's id semantics and the reference's wrapper stack, Gym's
//! classic-control tasks, Gymnasium's Box2D tasks, and environments from outside a3g
//! (any Gymnasium id, a user's own class) in Python processes a3g owns (`gym/`).

pub mod atari;
pub mod box2d;
pub mod classic;
pub mod draw;
pub mod gym;
pub mod numpy_rng;
pub mod rng;
mod time_limit;

pub use atari::crop::{Crop, CropTable};

use crate::error::{Error, Result};

/// What an agent may do in an environment.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionSpace {
    /// One of `n` actions, numbered from 0.
    Discrete { n: usize },
    /// A vector of reals, one per dimension, each within its bounds.
    Continuous { low: Vec<f32>, high: Vec<f32> },
}

impl ActionSpace {
    /// The lower and upper bounds of a continuous space; `None` for a discrete one.
    pub fn bounds(&self) -> Option<(&[f32], &[f32])> {
        match self {
            ActionSpace::Continuous { low, high } => Some((low, high)),
            ActionSpace::Discrete { .. } => None,
        }
    }
}

impl std::fmt::Display for ActionSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActionSpace::Discrete { n } => write!(f, "Discrete({n})"),
            ActionSpace::Continuous { low, high } => write!(f, "Box({low:?}, {high:?})"),
        }
    }
}

/// One action, matching the environment's [`ActionSpace`].
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Discrete(usize),
    Continuous(Vec<f32>),
}

/// What one agent step gives back.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The observation after the step, laid out as `observation_shape`.
    pub observation: Vec<f32>,
    /// The raw reward (for Atari, the game score summed over skipped frames).
    pub reward: f32,
    /// The episode ended by the task's own rules (for Atari, also at a lost life).
    pub terminated: bool,
    /// The episode was cut by a step or frame limit.
    pub truncated: bool,
    /// Lives left (Atari), 0 where the task has none.
    pub lives: i32,
    /// The episode ended at a lost life: the game goes on after the next reset.
    pub life_lost: bool,
}

impl Step {
    /// Whether the episode is over, by either rule.
    pub fn done(&self) -> bool {
        self.terminated || self.truncated
    }

    /// Whether the whole game is over: done, and not merely at a lost life.
    pub fn game_over(&self) -> bool {
        self.done() && !self.life_lost
    }
}

/// An environment an agent can play. a3g's own implement it; so can a program's,
/// registered with [`register`] to be trained by name (examples/corridor.rs). Each
/// worker, agent and the test agent owns one, made by rank with its own seed, and calls
/// it from one thread at a time.
pub trait Env: Send {
    /// The id it was made from.
    fn id(&self) -> &str;
    /// What the agent may do.
    fn action_space(&self) -> &ActionSpace;
    /// The shape of each observation (for Atari `[1, 80, 80]`).
    fn observation_shape(&self) -> &[i64];
    /// How its screens are prepared, for an environment whose observations are
    /// screens: what picks the network, where two ways of preparing them give one
    /// shape (an environment of a program's own that makes the screens
    /// `EnvOptions::screen` asks for says so here). `None` for observations that are
    /// not screens, and by default: the network then goes by their shape.
    fn screen(&self) -> Option<Screen> {
        None
    }
    /// Starts an episode, first reseeding when `seed` is given; returns the observation.
    /// Fails only for an environment outside a3g's own process whose code failed.
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>>;
    /// Plays one agent step; fails as [`Env::reset`] does.
    fn step(&mut self, action: &Action) -> Result<Step>;
    /// Emulator frames (Atari) or physics steps (classic control) since creation.
    fn env_frames(&self) -> u64;
    /// A picture of the current state: the game screen, or a drawn scene; fails as
    /// [`Env::reset`] does.
    fn render(&mut self) -> Result<Frame>;
    /// Game time one agent step stands for, in seconds, for recordings' pace.
    fn step_seconds(&self) -> f64;
}

/// A picture for recordings: palette indices row by row, at most 256 colours.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub width: u16,
    pub height: u16,
    pub palette: Vec<[u8; 3]>,
    pub pixels: Vec<u8>,
}

impl Frame {
    /// Indexes an RGB image (3 bytes a pixel); `None` if it has over 256 colours.
    pub fn from_rgb(width: u16, height: u16, rgb: &[u8]) -> Option<Frame> {
        let mut palette: Vec<[u8; 3]> = Vec::new();
        let mut indices: std::collections::HashMap<[u8; 3], u8> = Default::default();
        let mut pixels = Vec::with_capacity(rgb.len() / 3);
        for pixel in rgb.chunks_exact(3) {
            let color = [pixel[0], pixel[1], pixel[2]];
            let index = match indices.get(&color) {
                Some(&index) => index,
                None => {
                    let index = u8::try_from(palette.len()).ok()?;
                    palette.push(color);
                    indices.insert(color, index);
                    index
                }
            };
            pixels.push(index);
        }
        Some(Frame { width, height, palette, pixels })
    }
}

/// Settings for [`make`]; Atari ones are ignored by classic control.
#[derive(Clone, Debug)]
pub struct EnvOptions {
    /// Seeds everything random in the environment (never ALE's clock seed).
    pub seed: u64,
    /// Bounds each episode at this many agent steps in place of the id's own limit, as
    /// the reference does (`--max-episode-length`); `None` keeps the id's limit. For
    /// NoFrameskip ids the bound is `skip_rate` times as many frames, and, as in Gym,
    /// the frames that no-op and fire reset play count against it.
    pub max_episode_length: Option<u32>,
    /// Frames per agent step for NoFrameskip ids (`--skip-rate`).
    pub skip_rate: u32,
    /// Per-game crop rows (`--env-config`, read by `EnvConfig::read_crop_file`).
    pub crops: CropTable,
    /// How Atari screens become observations, which the network decides.
    pub screen: Screen,
    /// How an environment from outside a3g (`gym:<id>`, a user's class) is started.
    pub python: gym::PythonOptions,
}

/// How an Atari screen becomes an observation; each Atari network has its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Screen {
    /// The reference's: the game's crop rows, 80x80 by area averaging, gray by
    /// luminance weights (1x80x80).
    #[default]
    Gray80,
    /// ikostrikov's, from universe-starter-agent: rows 34..194 and the first 160
    /// columns, bilinear to 80x80 then 42x42, the mean of the colour channels over 255
    /// (1x42x42).
    Mean42,
    /// The same rows and columns, bilinear to 84x84 at once, the mean of the colour
    /// channels over 255 (1x84x84): the universe network at four times the pixels,
    /// for games whose ball is about one pixel at 42x42 (Breakout).
    Mean84,
    /// The same rows and columns in 42x42 blocks, each cell its block's brightest
    /// pixel by the mean of the colour channels, over 255 (1x42x42): a one-pixel ball
    /// at full contrast wherever it stands, at the universe network's cost.
    Max42,
}

impl Screen {
    /// The side of these square screens, as the network that reads them takes them.
    pub fn side(self) -> usize {
        match self {
            Screen::Gray80 => atari::wrappers::OBSERVATION_SIDE,
            Screen::Mean42 | Screen::Max42 => atari::wrappers::UNIVERSE_SIDE,
            Screen::Mean84 => atari::wrappers::UNIVERSE84_SIDE,
        }
    }
}

impl Default for EnvOptions {
    fn default() -> Self {
        EnvOptions {
            seed: 1,
            max_episode_length: None,
            skip_rate: 4,
            crops: CropTable::built_in(),
            screen: Screen::default(),
            python: gym::PythonOptions::default(),
        }
    }
}

/// How a registered environment is made: from the options every environment is made
/// with (its seed first).
pub type EnvMaker = dyn Fn(&EnvOptions) -> Result<Box<dyn Env>> + Send + Sync;

/// The environments registered by the program a3g runs in, by id.
static REGISTERED: std::sync::RwLock<Vec<(String, std::sync::Arc<EnvMaker>)>> =
    std::sync::RwLock::new(Vec::new());

/// Registers an environment written in Rust under `id`, for a program that uses a3g as
/// a library: `--env <id>` then trains, evaluates and lists it like a built-in one
/// (examples/corridor.rs). Refused for an id a3g builds in or already registered, and
/// for one with a colon, which names environments from outside a3g.
pub fn register(
    id: &str,
    maker: impl Fn(&EnvOptions) -> Result<Box<dyn Env>> + Send + Sync + 'static,
) -> Result<()> {
    let taken = id.contains(':') || id.is_empty() || all_ids().iter().any(|known| known == id);
    if taken {
        return Err(Error::BadArguments(format!(
            "cannot register an environment as {id:?}: the id is empty, taken, or has a colon \
             (which names environments from outside a3g); choose another"
        )));
    }
    let mut registered = REGISTERED.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    registered.push((id.to_string(), std::sync::Arc::new(maker)));
    Ok(())
}

fn registered(id: &str) -> Option<std::sync::Arc<EnvMaker>> {
    let registered = REGISTERED.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    registered.iter().find(|(known, _)| known == id).map(|(_, maker)| maker.clone())
}

/// Makes the environment with Gym id `id`.
pub fn make(id: &str, options: &EnvOptions) -> Result<Box<dyn Env>> {
    if let Some(maker) = registered(id) {
        return maker(options);
    }
    if let Some(target) = gym::Target::parse(id) {
        let env = gym::PythonEnv::start(
            id,
            &target,
            &options.python,
            options.seed,
            options.max_episode_length,
            options.screen,
        )?;
        return Ok(Box::new(env));
    }
    if let Some(env) = classic::make(id, options.seed) {
        return Ok(env);
    }
    if let Some(env) = box2d::make(id, options.seed) {
        return Ok(env);
    }
    match atari::AtariId::parse(id) {
        Some(atari_id) => atari::make(atari_id, options),
        None => Err(Error::UnknownEnv { id: id.to_string(), suggestions: closest_ids(id, 3) }),
    }
}

/// Whether `id` is one of a3g's own environments or one from outside (through the
/// bridge) that is no Atari game, so that it reads none of the Atari options
/// (`skip_rate`, `crops`). Ids the program a3g runs in registered, and ids no one
/// knows, are neither.
pub fn is_known_non_atari(id: &str) -> bool {
    registered(id).is_none()
        && (gym::Target::parse(id).is_some()
            || classic::IDS.iter().chain(&box2d::IDS).any(|(known, _)| *known == id))
}

/// The Atari game a3g's emulator plays for `id`, where it can run it and the program
/// a3g runs in registered no environment of that id.
pub fn built_in_atari(id: &str) -> Option<atari::AtariId> {
    if registered(id).is_some() {
        return None;
    }
    atari::AtariId::parse(id).filter(atari::AtariId::runs)
}

/// Every id `make` accepts: classic control first, Box2D, each game in every id family,
/// then the environments registered by the program a3g runs in.
pub fn all_ids() -> Vec<String> {
    let mut ids: Vec<String> =
        classic::IDS.iter().chain(&box2d::IDS).map(|(id, _)| id.to_string()).collect();
    ids.extend(atari::all_ids());
    let registered = REGISTERED.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    ids.extend(registered.iter().map(|(id, _)| id.clone()));
    ids
}

/// The `count` known ids nearest to `id` by Levenshtein distance, ignoring case.
fn closest_ids(id: &str, count: usize) -> Vec<String> {
    let wanted = id.to_lowercase();
    let mut scored: Vec<(usize, String)> = all_ids()
        .into_iter()
        .map(|known| (strsim::levenshtein(&wanted, &known.to_lowercase()), known))
        .collect();
    scored.sort();
    scored.into_iter().take(count).map(|(_, known)| known).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Suggestions ignore case and come nearest first.
    #[test]
    fn closest_ids_ignore_case() {
        assert_eq!(closest_ids("cartpole-v1", 1), ["CartPole-v1"]);
        assert_eq!(closest_ids("PONGNOFRAMESKIP-V4", 1), ["PongNoFrameskip-v4"]);
        let near = closest_ids("CartPole-v2", 2);
        assert!(near.contains(&"CartPole-v1".to_string()), "{near:?}");
    }

    /// A misspelt id is refused with the nearest real ids as suggestions.
    #[test]
    fn unknown_id_suggests_close_ids() {
        let error = make("CartPol-v1", &EnvOptions::default()).err().expect("refused");
        match error {
            Error::UnknownEnv { id, suggestions } => {
                assert_eq!(id, "CartPol-v1");
                assert_eq!(suggestions[0], "CartPole-v1");
            }
            other => panic!("wrong error {other:?}"),
        }
    }
}
