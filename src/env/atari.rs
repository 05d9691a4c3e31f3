//! One Atari 2600 emulator: an ALE 0.6 instance running a ROM bundled with the `ale`
//! crate, driven through ale-sys' C interface.
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

use crate::error::{Error, Result};

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

    /// Copies the screen as RGB bytes, row-major, into `rgb` (height * width * 3).
    pub fn screen_rgb(&mut self, rgb: &mut [u8]) {
        assert_eq!(rgb.len(), self.screen_height * self.screen_width * 3, "RGB buffer size");
        // SAFETY: live ALEInterface; the buffer holds exactly the screen.
        unsafe { ale_sys::getScreenRGB(self.ale.as_ptr(), rgb.as_mut_ptr()) }
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
    fs::create_dir_all(&dir).map_err(|source| Error::Io {
        action: "create the ROM folder",
        path: dir.clone(),
        source,
    })?;
    write_atomically(&path, rom.data())?;
    Ok(path)
}

/// Writes `bytes` to a temporary file beside `path` and renames it into place, so no
/// reader (another a3g process included) ever sees a partial file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let file_name = path.file_name().map(|name| name.to_string_lossy()).unwrap_or_default();
    let temporary = path.with_file_name(format!(
        ".{file_name}.{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    ));
    fs::write(&temporary, bytes).map_err(|source| Error::Io {
        action: "write",
        path: temporary.clone(),
        source,
    })?;
    fs::rename(&temporary, path).map_err(|source| Error::Io {
        action: "rename into place",
        path: path.to_path_buf(),
        source,
    })
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
