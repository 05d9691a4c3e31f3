//! Atari 2600 games: the ALE 0.6 emulator running the ROMs bundled with the `ale`
//! crate (driven through ale-sys' C interface), Gym's ids and their semantics, and the
//! environment the trainer sees, with the reference's wrapper stack on top.
//!
//! We bind ale-sys directly rather than the `ale` wrapper because the wrapper cannot
//! set integer or float options (the seed, sticky actions) and checks every action
//! against a vector on each step.

use std::ffi::{c_int, CString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::{Mutex, Once};

pub use ale::BundledRom;

pub mod crop;
pub mod wrappers;

use super::{Action, ActionSpace, Env, EnvOptions, Frame, Screen, Step};
use crate::env::rng::Rng;
use crate::error::{Error, Result};
use crop::Crop;
use wrappers::{
    preprocess, preprocess_universe, preprocess_universe84, preprocess_universe_max, EpisodicLife,
    FireReset, FrameEnv, FrameStep, MaxAndSkip, NoopReset, RunningNormalizer, OBSERVATION_SIDE,
};

/// ALE 0.6 fills static tables on first construction without synchronisation, so
/// emulators are created and their ROMs loaded one at a time, process-wide.
static CREATE_LOCK: Mutex<()> = Mutex::new(());
static SILENCE_LOGGER: Once = Once::new();

/// ALE's `Logger::Error` mode: only errors reach stderr, not the banner or the
/// "couldn't load settings file" warnings every instance would print.
const ALE_LOGGER_ERROR: c_int = 2;

/// Number of actions in ALE's full action set (PLAYER_A_NOOP..=PLAYER_A_DOWNLEFTFIRE).
pub const FULL_ACTION_COUNT: i32 = 18;

/// Settings fixed when an emulator is created.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EmulatorConfig {
    /// ALE's random seed; 0 is not allowed, since ALE reads it as "seed from the clock".
    pub seed: u32,
    /// Probability that ALE repeats the previous action instead of the new one.
    pub repeat_action_probability: f32,
}

/// An ALE emulator with a loaded game.
pub struct Emulator {
    ale: NonNull<ale_sys::ALEInterface>,
    minimal_actions: Vec<i32>,
    screen_width: usize,
    screen_height: usize,
}

// SAFETY: an ALEInterface owns all of its state and has no thread affinity; `&mut self`
// on every call keeps it used by one thread at a time.
unsafe impl Send for Emulator {}

impl Emulator {
    /// Creates an emulator running `rom`, seeded and configured by `config`.
    pub fn new(rom: BundledRom, config: EmulatorConfig) -> Result<Self> {
        assert!(config.seed != 0, "ALE seed 0 means a clock seed; callers must map it");
        let rom_path = cached_rom_file(&rom)?;
        let rom_path_c = CString::new(rom_path.as_os_str().as_bytes())
            .map_err(|_| Error::RomLoad { path: rom_path.clone() })?;
        let seed = c_int::try_from(config.seed & 0x7fff_ffff).unwrap_or(1).max(1);

        let _guard = CREATE_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        SILENCE_LOGGER.call_once(|| unsafe { ale_sys::setLoggerMode(ALE_LOGGER_ERROR) });
        // SAFETY: ALE_new has no preconditions; the pointer is checked before use.
        let ale = NonNull::new(unsafe { ale_sys::ALE_new() })
            .ok_or_else(|| Error::RomLoad { path: rom_path.clone() })?;
        let mut emulator =
            Emulator { ale, minimal_actions: Vec::new(), screen_width: 0, screen_height: 0 };
        let ptr = emulator.ale.as_ptr();
        // SAFETY: `ptr` is a live ALEInterface and the keys and path are NUL-terminated.
        unsafe {
            ale_sys::setInt(ptr, c"random_seed".as_ptr(), seed);
            ale_sys::setFloat(
                ptr,
                c"repeat_action_probability".as_ptr(),
                config.repeat_action_probability,
            );
            ale_sys::loadROM(ptr, rom_path_c.as_ptr());
        }
        // SAFETY: as above; the buffer is sized by ALE's own count.
        let minimal_actions = unsafe {
            let count = usize::try_from(ale_sys::getMinimalActionSize(ptr)).unwrap_or(0);
            let mut actions = vec![0; count];
            ale_sys::getMinimalActionSet(ptr, actions.as_mut_ptr());
            actions
        };
        if minimal_actions.is_empty() {
            return Err(Error::RomLoad { path: rom_path });
        }
        emulator.minimal_actions = minimal_actions;
        // SAFETY: `ptr` is a live ALEInterface with a loaded ROM.
        unsafe {
            emulator.screen_width = usize::try_from(ale_sys::getScreenWidth(ptr)).unwrap_or(0);
            emulator.screen_height = usize::try_from(ale_sys::getScreenHeight(ptr)).unwrap_or(0);
        }
        Ok(emulator)
    }

    /// The game's minimal action set, as ALE action numbers.
    pub fn minimal_actions(&self) -> &[i32] {
        &self.minimal_actions
    }

    /// Screen size as (height, width) in pixels.
    pub fn screen_shape(&self) -> (usize, usize) {
        (self.screen_height, self.screen_width)
    }

    /// Plays one emulator frame with ALE action `action` and returns its reward.
    pub fn act(&mut self, action: i32) -> i32 {
        assert!((0..FULL_ACTION_COUNT).contains(&action), "ALE action {action} out of range");
        // SAFETY: live ALEInterface; the action is one ALE knows.
        unsafe { ale_sys::act(self.ale.as_ptr(), action) }
    }

    /// Whether the game is over.
    pub fn game_over(&mut self) -> bool {
        // SAFETY: live ALEInterface.
        unsafe { ale_sys::game_over(self.ale.as_ptr()) }
    }

    /// Restarts the game (ALE also applies its own start-of-game no-ops and resets).
    pub fn reset_game(&mut self) {
        // SAFETY: live ALEInterface.
        unsafe { ale_sys::reset_game(self.ale.as_ptr()) }
    }

    /// Lives left, as the game reports them.
    pub fn lives(&mut self) -> i32 {
        // SAFETY: live ALEInterface.
        unsafe { ale_sys::lives(self.ale.as_ptr()) }
    }

    /// Emulator frames played since the emulator was created.
    pub fn frame_number(&mut self) -> i64 {
        // SAFETY: live ALEInterface.
        i64::from(unsafe { ale_sys::getFrameNumber(self.ale.as_ptr()) })
    }

    /// Emulator frames played since the game was last reset.
    pub fn episode_frame_number(&mut self) -> i64 {
        // SAFETY: live ALEInterface.
        i64::from(unsafe { ale_sys::getEpisodeFrameNumber(self.ale.as_ptr()) })
    }

    /// Copies the screen as RGB bytes, row-major, into `rgb` (height * width * 3).
    pub fn screen_rgb(&mut self, rgb: &mut [u8]) {
        assert_eq!(rgb.len(), self.screen_height * self.screen_width * 3, "RGB buffer size");
        // SAFETY: live ALEInterface; the buffer holds exactly the screen.
        unsafe { ale_sys::getScreenRGB(self.ale.as_ptr(), rgb.as_mut_ptr()) }
    }

    /// The screen as a new buffer of RGB bytes, row-major.
    pub fn screen_rgb_vec(&mut self) -> Vec<u8> {
        // Filling a fresh buffer straight from ALE skips zeroing 100 KB per agent step,
        // a few percent of the whole wrapper stack's time.
        let len = self.screen_height * self.screen_width * 3;
        let mut rgb = Vec::with_capacity(len);
        // SAFETY: getScreenRGB writes all height * width * 3 bytes of the screen into
        // the buffer, whose capacity is exactly that, before the length is set.
        unsafe {
            ale_sys::getScreenRGB(self.ale.as_ptr(), rgb.as_mut_ptr());
            rgb.set_len(len);
        }
        rgb
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        // SAFETY: the pointer came from ALE_new and is deleted once, here.
        unsafe { ale_sys::ALE_del(self.ale.as_ptr()) }
    }
}

/// ALE loads ROMs from files and recognises a game by the file's name, so each bundled
/// ROM is written once to a shared cache folder under its canonical name.
fn cached_rom_file(rom: &BundledRom) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join("a3g-roms");
    let path = dir.join(rom.filename());
    if fs::read(&path).is_ok_and(|bytes| bytes == rom.data()) {
        return Ok(path);
    }
    // The folder comes from TMPDIR, not from a flag, so the error's advice names it.
    fs::create_dir_all(&dir).and_then(|()| write_atomically(&path, rom.data())).map_err(
        |cause| Error::TempFolder { action: "cache the game's ROM in", path: dir, cause },
    )?;
    Ok(path)
}

/// Writes `bytes` to a temporary file beside `path` and renames it into place, so no
/// reader (another a3g process included) ever sees a partial file.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let file_name = path.file_name().map(|name| name.to_string_lossy()).unwrap_or_default();
    let temporary = path.with_file_name(format!(
        ".{file_name}.{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    ));
    fs::write(&temporary, bytes)?;
    fs::rename(&temporary, path)
}

/// Declares the bundled games once: the ROM file names (which Gym's game names are
/// the camel case of) and the `ale` crate's variant for each.
macro_rules! bundled_games {
    ($($variant:ident => $rom:literal),* $(,)?) => {
        /// ROM names (file names without `.bin`) of every bundled game.
        pub const ROM_NAMES: &[&str] = &[$($rom),*];

        fn bundled_rom(rom_name: &str) -> Option<BundledRom> {
            match rom_name {
                $($rom => Some(BundledRom::$variant),)*
                _ => None,
            }
        }
    };
}

bundled_games! {
    Adventure => "adventure", AirRaid => "air_raid", Alien => "alien", Amidar => "amidar",
    Assault => "assault", Asterix => "asterix", Asteroids => "asteroids", Atlantis => "atlantis",
    BankHeist => "bank_heist", BattleZone => "battle_zone", BeamRider => "beam_rider",
    Berzerk => "berzerk", Bowling => "bowling", Boxing => "boxing", Breakout => "breakout",
    Carnival => "carnival", Centipede => "centipede", ChopperCommand => "chopper_command",
    CrazyClimber => "crazy_climber", Defender => "defender", DemonAttack => "demon_attack",
    DoubleDunk => "double_dunk", ElevatorAction => "elevator_action", Enduro => "enduro",
    FishingDerby => "fishing_derby", Freeway => "freeway", Frostbite => "frostbite",
    Gopher => "gopher", Gravitar => "gravitar", Hero => "hero", IceHockey => "ice_hockey",
    JamesBond => "jamesbond", JourneyEscape => "journey_escape", Kaboom => "kaboom",
    Kangaroo => "kangaroo", Krull => "krull", KungFuMaster => "kung_fu_master",
    MontezumaRevenge => "montezuma_revenge", MsPacman => "ms_pacman",
    NameThisGame => "name_this_game", Phoenix => "phoenix", Pitfall => "pitfall", Pong => "pong",
    Pooyan => "pooyan", PrivateEye => "private_eye", QBert => "qbert", RiverRaid => "riverraid",
    RoadRunner => "road_runner", RoboTank => "robotank", Seaquest => "seaquest", Skiing => "skiing",
    SpaceInvaders => "space_invaders", StarGunner => "star_gunner", Tennis => "tennis",
    TimePilot => "time_pilot", Tutankham => "tutankham", UpNDown => "up_n_down", Venture => "venture",
    VideoPinball => "video_pinball", WizardOfWor => "wizard_of_wor", YarsRevenge => "yars_revenge",
    Zaxxon => "zaxxon",
}

/// Gym's name of a game: its ROM name in camel case (`ms_pacman` -> `MsPacman`).
pub fn gym_name(rom_name: &str) -> String {
    rom_name
        .split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// How an id family plays a game: Gym 0.17 / ale-py 0.7 registrations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IdFamily {
    /// The id's suffix after the game name.
    pub suffix: &'static str,
    /// Emulator frames per agent step.
    pub frameskip: Frameskip,
    /// ALE's sticky-action probability.
    pub repeat_action_probability: f32,
    /// Gym's TimeLimit, in agent steps, if any.
    pub max_episode_steps: Option<u32>,
    /// ALE's per-episode frame limit, if any.
    pub max_episode_frames: Option<u32>,
}

/// Emulator frames per agent step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frameskip {
    /// Always this many.
    Fixed(u32),
    /// Uniform in 2..=4, drawn each step.
    Random,
}

impl IdFamily {
    /// Every family, in the order `a3g envs` lists them.
    pub const ALL: [&'static str; 7] = [
        "-v0",
        "-v4",
        "Deterministic-v0",
        "Deterministic-v4",
        "NoFrameskip-v0",
        "NoFrameskip-v4",
        "-v5",
    ];

    fn new(suffix: &'static str, rom_name: &str) -> Option<Self> {
        // Space Invaders' lasers blink at a period of 4 frames, so Gym skips 3.
        let skip = if rom_name == "space_invaders" { 3 } else { 4 };
        let (frameskip, repeat_action_probability, max_episode_steps, max_episode_frames) =
            match suffix {
                "-v0" => (Frameskip::Random, 0.25, Some(10_000), None),
                "-v4" => (Frameskip::Random, 0.0, Some(100_000), None),
                "Deterministic-v0" => (Frameskip::Fixed(skip), 0.25, Some(100_000), None),
                "Deterministic-v4" => (Frameskip::Fixed(skip), 0.0, Some(100_000), None),
                "NoFrameskip-v0" => (Frameskip::Fixed(1), 0.25, Some(skip * 100_000), None),
                "NoFrameskip-v4" => (Frameskip::Fixed(1), 0.0, Some(skip * 100_000), None),
                "-v5" => (Frameskip::Fixed(4), 0.25, None, Some(108_000)),
                _ => return None,
            };
        let suffix = Self::ALL.into_iter().find(|known| *known == suffix)?;
        Some(IdFamily {
            suffix,
            frameskip,
            repeat_action_probability,
            max_episode_steps,
            max_episode_frames,
        })
    }

    /// Whether the reference adds no-op reset and max-and-skip (NoFrameskip ids).
    pub fn is_no_frameskip(&self) -> bool {
        self.suffix.starts_with("NoFrameskip")
    }
}

/// A parsed Atari id: which game, played how.
#[derive(Clone, Debug, PartialEq)]
pub struct AtariId {
    /// The id as written.
    pub id: String,
    /// Gym's game name (`MsPacman`).
    pub game: String,
    /// The ROM name (`ms_pacman`).
    pub rom_name: &'static str,
    /// How the id plays it.
    pub family: IdFamily,
}

impl AtariId {
    /// Whether the emulator can run the game (`a3g envs` lists it).
    pub fn runs(&self) -> bool {
        unrunnable_reason(self.rom_name).is_none()
    }

    /// Parses `Game-v0`, `GameDeterministic-v4`, `GameNoFrameskip-v4`, `ALE/Game-v5`...;
    /// `None` if the id names no bundled game or no known family.
    pub fn parse(id: &str) -> Option<Self> {
        let (name, suffix) = match id.strip_prefix("ALE/") {
            Some(rest) => (rest.strip_suffix("-v5")?, "-v5"),
            None => IdFamily::ALL[..6]
                .iter()
                .filter_map(|suffix| id.strip_suffix(suffix).map(|name| (name, *suffix)))
                .max_by_key(|(_, suffix)| suffix.len())?,
        };
        let rom_name = ROM_NAMES.iter().find(|rom| gym_name(rom) == name)?;
        Some(AtariId {
            id: id.to_string(),
            game: name.to_string(),
            rom_name,
            family: IdFamily::new(suffix, rom_name)?,
        })
    }
}

/// Bundled games ALE 0.6 cannot run, with the reason.
///
/// Defender: loading runs ALE's DefenderSettings::setMode, which presses SELECT until
/// RAM 0x9B reads the wanted mode (1). With the ROM the `ale` crate bundles that byte
/// never reads 1, so ALE loops inside loadROM forever (seen under gdb: the stack sits
/// in setMode -> pressSelect). ALE's C API offers no way around reset's setMode call,
/// so these games are refused before an emulator is made.
const UNRUNNABLE: &[(&str, &str)] = &[(
    "defender",
    "ALE 0.6 never finishes loading the bundled Defender ROM (its mode-select loop waits for a RAM value this ROM never shows)",
)];

/// Why the emulator cannot run `rom_name`, if it cannot.
fn unrunnable_reason(rom_name: &str) -> Option<&'static str> {
    UNRUNNABLE.iter().find(|(name, _)| *name == rom_name).map(|(_, reason)| *reason)
}

/// Every Atari id a3g can run, game by game.
pub fn all_ids() -> Vec<String> {
    ROM_NAMES
        .iter()
        .filter(|rom| unrunnable_reason(rom).is_none())
        .flat_map(|rom| {
            let game = gym_name(rom);
            IdFamily::ALL.map(|suffix| match suffix {
                "-v5" => format!("ALE/{game}-v5"),
                _ => format!("{game}{suffix}"),
            })
        })
        .collect()
}

/// The ALE seed for our seed: hashed, and never 0 (ALE's "seed from the clock").
fn ale_seed(seed: u64) -> u32 {
    (Rng::new(seed).next_u64() % 0x7fff_fffe) as u32 + 1
}

/// Gym's AtariEnv for one id, under its TimeLimit: frame skip (fixed or random),
/// sticky actions inside ALE, the reward summed over the skipped frames, one screen
/// per agent step, and the step and frame limits.
pub struct AtariGame {
    rom_name: &'static str,
    family: IdFamily,
    emulator: Emulator,
    rng: Rng,
    /// TimeLimit in agent steps of this layer.
    max_episode_steps: Option<u32>,
    elapsed_steps: u32,
    env_frames: u64,
}

impl AtariGame {
    /// Creates the emulator for `id` seeded from `seed`, with a step limit of
    /// `max_episode_steps` agent steps of this layer (`None`: the id's own limit).
    pub fn new(id: &AtariId, seed: u64, max_episode_steps: Option<u32>) -> Result<Self> {
        let emulator = Self::emulator(id.rom_name, id.family, seed)?;
        Ok(AtariGame {
            rom_name: id.rom_name,
            family: id.family,
            emulator,
            rng: Rng::new(seed),
            max_episode_steps: max_episode_steps.or(id.family.max_episode_steps),
            elapsed_steps: 0,
            env_frames: 0,
        })
    }

    fn emulator(rom_name: &str, family: IdFamily, seed: u64) -> Result<Emulator> {
        let rom = bundled_rom(rom_name).expect("ids are parsed against ROM_NAMES");
        let config = EmulatorConfig {
            seed: ale_seed(seed),
            repeat_action_probability: family.repeat_action_probability,
        };
        Emulator::new(rom, config)
    }

    /// The game's minimal action set, as ALE action numbers.
    pub fn minimal_actions(&self) -> &[i32] {
        self.emulator.minimal_actions()
    }
}

impl FrameEnv for AtariGame {
    fn reset(&mut self) -> Vec<u8> {
        self.emulator.reset_game();
        self.elapsed_steps = 0;
        self.emulator.screen_rgb_vec()
    }

    fn step(&mut self, action: usize) -> FrameStep {
        let ale_action = self.emulator.minimal_actions()[action];
        let frames = match self.family.frameskip {
            Frameskip::Fixed(frames) => frames,
            Frameskip::Random => self.rng.integer(2, 4),
        };
        let mut reward = 0;
        for _ in 0..frames {
            reward += self.emulator.act(ale_action);
        }
        self.env_frames += u64::from(frames);
        self.elapsed_steps += 1;
        let terminated = self.emulator.game_over();
        let frame_limit_hit = self
            .family
            .max_episode_frames
            .is_some_and(|limit| self.emulator.episode_frame_number() >= i64::from(limit));
        let step_limit_hit =
            self.max_episode_steps.is_some_and(|limit| self.elapsed_steps >= limit);
        FrameStep {
            frame: self.emulator.screen_rgb_vec(),
            reward: reward as f32,
            terminated,
            truncated: frame_limit_hit || step_limit_hit,
            lives: self.emulator.lives(),
            life_lost: false,
        }
    }

    fn lives(&mut self) -> i32 {
        self.emulator.lives()
    }

    fn reseed(&mut self, seed: u64) {
        match Self::emulator(self.rom_name, self.family, seed) {
            Ok(emulator) => self.emulator = emulator,
            // The ROM loaded moments ago with this configuration; failing now means the
            // ROM cache was deleted under us, which the next creation reports properly.
            Err(err) => panic!("reloading {} failed: {}", self.rom_name, err.report()),
        }
        self.rng = Rng::new(seed);
    }

    fn env_frames(&self) -> u64 {
        self.env_frames
    }

    fn screen(&mut self) -> Vec<u8> {
        self.emulator.screen_rgb_vec()
    }
}

/// An Atari id as the trainer sees it: the reference's wrapper stack over
/// [`AtariGame`], with 1x80x80 normalised gray observations.
pub struct AtariEnv {
    id: String,
    stack: Box<dyn FrameEnv>,
    crop: Crop,
    normalizer: RunningNormalizer,
    screen: Screen,
    action_space: ActionSpace,
    observation_shape: Vec<i64>,
    /// (width, height) of the console's screen.
    screen_size: (u16, u16),
    step_seconds: f64,
}

/// The console's frame rate (NTSC).
const FRAMES_PER_SECOND: f64 = 60.0;

/// Makes the environment for a parsed Atari id.
pub fn make(id: AtariId, options: &EnvOptions) -> Result<Box<dyn Env>> {
    if let Some(reason) = unrunnable_reason(id.rom_name) {
        return Err(Error::UnsupportedGame { id: id.id, reason });
    }
    let crop = options.crops.for_game(&id.game);
    let no_frameskip = id.family.is_no_frameskip();
    // The reference's --max-episode-length counts agent steps; below max-and-skip the
    // game layer steps once per frame.
    let layer_steps =
        |steps: u32| if no_frameskip { steps.saturating_mul(options.skip_rate) } else { steps };
    let game = AtariGame::new(&id, options.seed, options.max_episode_length.map(layer_steps))?;
    let action_count = game.minimal_actions().len();
    let (screen_height, screen_width) = game.emulator.screen_shape();
    let frames_per_step = match id.family.frameskip {
        _ if no_frameskip => f64::from(options.skip_rate),
        Frameskip::Fixed(frames) => f64::from(frames),
        // Gym's stochastic skip draws 2, 3 or 4 frames.
        Frameskip::Random => 3.0,
    };
    let has_fire = game.minimal_actions().get(1) == Some(&ALE_FIRE);
    let mut stack: Box<dyn FrameEnv> = Box::new(game);
    if no_frameskip {
        stack = Box::new(NoopReset::new(stack, 30, options.seed));
        stack = Box::new(MaxAndSkip::new(stack, options.skip_rate));
    }
    stack = Box::new(EpisodicLife::new(stack));
    if has_fire {
        stack = Box::new(FireReset::new(stack));
    }
    let side = options.screen.side() as i64;
    Ok(Box::new(AtariEnv {
        crop,
        id: id.id,
        stack,
        normalizer: RunningNormalizer::default(),
        screen: options.screen,
        action_space: ActionSpace::Discrete { n: action_count },
        observation_shape: vec![1, side, side],
        screen_size: (screen_width as u16, screen_height as u16),
        step_seconds: frames_per_step / FRAMES_PER_SECOND,
    }))
}

/// ALE's action number for FIRE.
const ALE_FIRE: i32 = 1;

impl AtariEnv {
    fn observe(&mut self, frame: &[u8]) -> Vec<f32> {
        let mut observation = match self.screen {
            Screen::Gray80 => {
                let mut observation = vec![0.0; OBSERVATION_SIDE * OBSERVATION_SIDE];
                preprocess(frame, self.crop, &mut observation);
                observation
            }
            Screen::Mean42 => preprocess_universe(frame),
            Screen::Mean84 => preprocess_universe84(frame),
            Screen::Max42 => preprocess_universe_max(frame),
        };
        self.normalizer.normalize(&mut observation);
        observation
    }
}

impl Env for AtariEnv {
    fn id(&self) -> &str {
        &self.id
    }

    fn action_space(&self) -> &ActionSpace {
        &self.action_space
    }

    fn observation_shape(&self) -> &[i64] {
        &self.observation_shape
    }

    fn screen(&self) -> Option<Screen> {
        Some(self.screen)
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>> {
        if let Some(seed) = seed {
            self.stack.reseed(seed);
        }
        let frame = self.stack.reset();
        Ok(self.observe(&frame))
    }

    fn step(&mut self, action: &Action) -> Result<Step> {
        let index = match *action {
            Action::Discrete(index) => index,
            ref other => panic!("Atari takes discrete actions, got {other:?}"),
        };
        let step = self.stack.step(index);
        Ok(Step {
            observation: self.observe(&step.frame),
            reward: step.reward,
            terminated: step.terminated,
            truncated: step.truncated,
            lives: step.lives,
            life_lost: step.life_lost,
        })
    }

    fn env_frames(&self) -> u64 {
        self.stack.env_frames()
    }

    fn render(&mut self) -> Result<Frame> {
        let (width, height) = self.screen_size;
        Ok(Frame::from_rgb(width, height, &self.stack.screen())
            .expect("the console's NTSC palette has 128 colours"))
    }

    fn step_seconds(&self) -> f64 {
        self.step_seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pong loads from the bundled ROM, has its six minimal actions and a 210x160 screen,
    /// and its frame counter advances as frames are played.
    #[test]
    fn pong_loads_and_steps() {
        let config = EmulatorConfig { seed: 1, repeat_action_probability: 0.0 };
        let mut emulator = Emulator::new(BundledRom::Pong, config).unwrap();
        assert_eq!(emulator.minimal_actions(), &[0, 1, 3, 4, 11, 12]);
        assert_eq!(emulator.screen_shape(), (210, 160));
        let start = emulator.frame_number();
        let mut reward_sum = 0;
        for _ in 0..1000 {
            reward_sum += emulator.act(0);
        }
        assert_eq!(emulator.frame_number() - start, 1000);
        // Standing still, the agent misses the serves: the opponent scores.
        assert!(reward_sum < 0, "reward over 1000 idle frames: {reward_sum}");
        assert!(!emulator.game_over());
        let mut rgb = vec![0; 210 * 160 * 3];
        emulator.screen_rgb(&mut rgb);
        assert!(rgb.iter().any(|&byte| byte != 0), "the screen is blank");
    }
}

#[cfg(test)]
mod id_tests {
    use super::*;

    /// Each family's frameskip, sticky-action probability and limits, as Gym registers
    /// them, including Space Invaders' skip of 3.
    #[test]
    fn families_follow_gym_registrations() {
        let family = |id: &str| AtariId::parse(id).unwrap_or_else(|| panic!("{id} parses")).family;
        let expect = |id: &str, frameskip, sticky, steps: Option<u32>, frames: Option<u32>| {
            let family = family(id);
            assert_eq!(family.frameskip, frameskip, "{id}");
            assert_eq!(family.repeat_action_probability, sticky, "{id}");
            assert_eq!(family.max_episode_steps, steps, "{id}");
            assert_eq!(family.max_episode_frames, frames, "{id}");
        };
        expect("Pong-v0", Frameskip::Random, 0.25, Some(10_000), None);
        expect("Pong-v4", Frameskip::Random, 0.0, Some(100_000), None);
        expect("PongDeterministic-v0", Frameskip::Fixed(4), 0.25, Some(100_000), None);
        expect("PongDeterministic-v4", Frameskip::Fixed(4), 0.0, Some(100_000), None);
        expect("SpaceInvadersDeterministic-v4", Frameskip::Fixed(3), 0.0, Some(100_000), None);
        expect("PongNoFrameskip-v0", Frameskip::Fixed(1), 0.25, Some(400_000), None);
        expect("PongNoFrameskip-v4", Frameskip::Fixed(1), 0.0, Some(400_000), None);
        expect("SpaceInvadersNoFrameskip-v4", Frameskip::Fixed(1), 0.0, Some(300_000), None);
        expect("ALE/Pong-v5", Frameskip::Fixed(4), 0.25, None, Some(108_000));
        assert!(family("PongNoFrameskip-v4").is_no_frameskip());
        assert!(!family("PongDeterministic-v4").is_no_frameskip());
    }

    /// Every listed id parses back to its game; names are Gym's camel case.
    #[test]
    fn every_listed_id_parses() {
        let ids = all_ids();
        assert_eq!(ids.len(), (ROM_NAMES.len() - UNRUNNABLE.len()) * IdFamily::ALL.len());
        for id in &ids {
            let parsed = AtariId::parse(id).unwrap_or_else(|| panic!("{id} does not parse"));
            assert_eq!(&parsed.id, id);
        }
        assert_eq!(AtariId::parse("MsPacmanNoFrameskip-v4").unwrap().rom_name, "ms_pacman");
        assert_eq!(AtariId::parse("ALE/KungFuMaster-v5").unwrap().rom_name, "kung_fu_master");
        for bad in ["Pong", "Pong-v3", "PongDeterministic-v5", "ALE/Pong-v4", "pong-v4", "Pong-v4 "]
        {
            assert!(AtariId::parse(bad).is_none(), "{bad} parsed");
        }
    }

    /// Every listed game makes, resets, steps and renders on every screen path, with
    /// observations of the network's shape: 16 of them have taller screens (230 or 250
    /// rows), which panicked at their first step when the wrappers took every screen
    /// for 210 rows.
    /// Every id family of one such game plays too.
    #[test]
    fn every_listed_game_steps_on_every_screen() {
        let play = |id: &str, screen: Screen| {
            let parsed = AtariId::parse(id).unwrap_or_else(|| panic!("{id} parses"));
            let options = EnvOptions { screen, ..EnvOptions::default() };
            let mut env = make(parsed, &options).unwrap_or_else(|err| panic!("{id}: {err:?}"));
            let side = env.observation_shape()[1] as usize;
            let ActionSpace::Discrete { n } = *env.action_space() else { panic!("{id}") };
            let observation = env.reset(Some(7)).unwrap();
            assert_eq!(observation.len(), side * side, "{id} {screen:?}");
            for step in 0..4 {
                let step = env.step(&Action::Discrete(step % n)).unwrap();
                assert_eq!(step.observation.len(), side * side, "{id} {screen:?}");
                assert!(step.observation.iter().all(|value| value.is_finite()), "{id}");
            }
            let frame = env.render().unwrap();
            assert!(
                frame.width == 160 && frame.height >= 210,
                "{id}: {}x{}",
                frame.width,
                frame.height
            );
        };
        let mut tall = Vec::new();
        for rom in ROM_NAMES.iter().filter(|rom| unrunnable_reason(rom).is_none()) {
            let id = format!("{}NoFrameskip-v4", gym_name(rom));
            for screen in [Screen::Gray80, Screen::Mean42, Screen::Mean84, Screen::Max42] {
                play(&id, screen);
            }
            let config = EmulatorConfig { seed: 1, repeat_action_probability: 0.0 };
            let emulator = Emulator::new(bundled_rom(rom).expect("bundled"), config).unwrap();
            if emulator.screen_shape().0 != 210 {
                tall.push(*rom);
            }
        }
        assert!(tall.contains(&"amidar") && tall.len() >= 16, "tall screens: {tall:?}");
        for id in all_ids().iter().filter(|id| id.contains("Amidar")) {
            play(id, Screen::Gray80);
        }
    }

    /// Defender is refused with its reason instead of hanging in ALE's loader.
    #[test]
    fn defender_is_refused() {
        let id = AtariId::parse("DefenderNoFrameskip-v4").expect("Defender ids still parse");
        match make(id, &EnvOptions::default()) {
            Err(Error::UnsupportedGame { id, reason }) => {
                assert_eq!(id, "DefenderNoFrameskip-v4");
                assert!(reason.contains("Defender"));
            }
            Err(other) => panic!("wrong error: {other:?}"),
            Ok(_) => panic!("Defender was made"),
        }
        assert!(!all_ids().iter().any(|id| id.contains("Defender")));
    }
}
