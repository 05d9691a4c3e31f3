//! Per-game crop rows for Atari preprocessing, read from a JSON file
//! (configs/atari_crop.json or `--env-config`), in the reference's format: entries
//! keyed by a substring of the game name, each with `crop1` and `crop2`, plus `Default`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The crop file shipped in configs/, built in so the binary needs no files beside it.
/// Rows of an Atari screen.
const SCREEN_ROWS: usize = 210;

const BUILT_IN: &str = include_str!("../../../configs/atari_crop.json");

/// Screen rows kept for one game: `crop1 .. crop2 + 160`, i.e. 160 rows when they are
/// equal; columns 0..160 are always kept.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct Crop {
    /// First row kept.
    pub crop1: usize,
    /// The kept rows end at `crop2 + 160` (exclusive).
    pub crop2: usize,
}

impl Crop {
    /// Where the kept rows of a 210-row screen end (exclusive): `crop2 + 160`, at most
    /// the screen's last row.
    pub fn rows_end(&self) -> usize {
        (self.crop2 + 160).min(SCREEN_ROWS)
    }

    /// Why these rows cannot crop a screen, if they cannot.
    pub fn problem(&self) -> Option<String> {
        // The kept rows are crop1..min(crop2 + 160, 210) of the 210-row screen; bounding
        // crop2 first keeps that sum from wrapping around.
        if self.crop2 > SCREEN_ROWS {
            return Some(format!("crop2 {} is beyond the screen's {SCREEN_ROWS} rows", self.crop2));
        }
        (self.crop1 >= self.rows_end()).then(|| {
            format!(
                "they keep no rows (crop1 {} is not below min(crop2 + 160, {SCREEN_ROWS}))",
                self.crop1
            )
        })
    }

    /// Why the entry `key` cannot crop a screen, if it cannot.
    fn fault(&self, key: &str) -> Option<String> {
        self.problem().map(|problem| format!("entry {key:?}: {problem}"))
    }
}

/// A parsed crop file.
#[derive(Clone, Debug, PartialEq)]
pub struct CropTable {
    entries: BTreeMap<String, Crop>,
}

impl CropTable {
    /// The built-in table.
    pub fn built_in() -> Self {
        Self::parse(BUILT_IN, Path::new("configs/atari_crop.json"))
            .expect("the built-in crop file is valid")
    }

    /// The table a `--env-config` flag names: that file, or the built-in one.
    pub fn from_flag(path: Option<&Path>) -> Result<Self> {
        path.map_or_else(|| Ok(Self::built_in()), Self::load)
    }

    /// Reads a crop file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = crate::files::read_to_string(path).map_err(|source| Error::Io {
            action: "read the crop file",
            path: path.to_path_buf(),
            cause: source,
        })?;
        Self::parse(&text, path)
    }

    fn parse(text: &str, path: &Path) -> Result<Self> {
        let bad = |reason: String| Error::CropFile { path: path.to_path_buf(), reason };
        let entries: BTreeMap<String, Crop> =
            serde_json::from_str(text).map_err(|err| bad(err.to_string()))?;
        if !entries.contains_key("Default") {
            return Err(bad("it has no \"Default\" entry".into()));
        }
        if let Some(reason) = entries.iter().find_map(|(key, crop)| crop.fault(key)) {
            return Err(bad(reason));
        }
        Ok(CropTable { entries })
    }

    /// A table giving every game `crop`: the rows a checkpoint recorded for its game,
    /// checked when its sidecar was read.
    pub fn only(crop: Crop) -> Self {
        CropTable { entries: BTreeMap::from([("Default".to_string(), crop)]) }
    }

    /// The crop of the game whose Gym name is `game`: the first entry (in key order)
    /// whose key occurs in the name, as the reference matches keys against the env id,
    /// else `Default`.
    pub fn for_game(&self, game: &str) -> Crop {
        self.entries
            .iter()
            .find(|(key, _)| key.as_str() != "Default" && game.contains(key.as_str()))
            .map_or(self.entries["Default"], |(_, crop)| *crop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known games get their own rows; unknown ones fall back to Default.
    #[test]
    fn games_get_their_rows_or_default() {
        let table = CropTable::built_in();
        assert_eq!(table.for_game("MsPacman"), Crop { crop1: 2, crop2: 10 });
        assert_eq!(table.for_game("Pong"), Crop { crop1: 34, crop2: 34 });
        assert_eq!(table.for_game("Tennis"), Crop { crop1: 34, crop2: 34 });
    }

    /// A malformed file is refused with its path and the line and column of the error.
    #[test]
    fn malformed_file_names_position() {
        let error = CropTable::parse("{\n  \"Default\": {\"crop1\": 3,}\n}", Path::new("my.json"))
            .unwrap_err();
        let message = error.to_string();
        assert!(message.contains("my.json") && message.contains("line 2"), "{message}");
    }

    /// A file without Default is refused: unknown games would have no rows.
    #[test]
    fn missing_default_is_refused() {
        let error = CropTable::parse(r#"{"Pong": {"crop1": 1, "crop2": 1}}"#, Path::new("x.json"))
            .unwrap_err();
        assert!(error.to_string().contains("Default"), "{error}");
    }

    /// A crop that keeps no row, or whose rows would wrap past the screen's end, is
    /// refused with the entry named.
    #[test]
    fn crops_that_keep_no_rows_are_refused() {
        for (entry, reason) in [
            (r#"{"crop1": 200, "crop2": 30}"#, "keep no rows"),
            (r#"{"crop1": 210, "crop2": 50}"#, "keep no rows"),
            (r#"{"crop1": 0, "crop2": 18446744073709551615}"#, "beyond the screen"),
        ] {
            let text = format!(r#"{{"Default": {entry}}}"#);
            let message = CropTable::parse(&text, Path::new("x.json")).unwrap_err().to_string();
            assert!(message.contains("\"Default\"") && message.contains(reason), "{message}");
        }
    }
}
