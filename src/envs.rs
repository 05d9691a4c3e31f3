//! The `a3g envs` subcommand: which ids exist, and what each gives the agent.

use std::collections::HashMap;

use crate::cli::EnvsArgs;
use crate::env::{self, atari, ActionSpace, CropTable, EnvOptions};
use crate::error::Result;

/// How `--env` names an environment a3g does not build in, after the list of those
/// it does.
const OUTSIDE_ENVS: [&str; 3] = [
    "Environments from outside a3g, each run in a Python process a3g starts (docs/envs.md):",
    "  gym:<id>                         any id of your Gymnasium registry (gym:HalfCheetah-v5); --env-import <module> imports a package that registers its ids",
    "  <file.py>:<Class>                your own gymnasium.Env class (or <module>:<Class>), made with --env-kwargs '<json>'; --env-wrapper <module>:<Class> wraps either; --python picks the Python",
];

/// Prints one line per id: id, action space, observation shape, and for ids named on
/// the command line that are Atari games, the rows the crop keeps.
pub fn run(args: &EnvsArgs) -> Result<()> {
    let crops = CropTable::from_flag(args.env_config.as_deref())?;
    let options = EnvOptions { crops, ..EnvOptions::default() };
    let listing_all = args.ids.is_empty();
    let ids = if listing_all { env::all_ids() } else { args.ids.clone() };
    // Every id family of a game shares its minimal action set, so listing all ids
    // loads each ROM once rather than seven times.
    let mut spaces_by_game: HashMap<String, (ActionSpace, Vec<i64>)> = HashMap::new();
    let mut lines = Vec::with_capacity(ids.len());
    for id in &ids {
        let game = atari::AtariId::parse(id).map(|parsed| parsed.game);
        let cached =
            game.as_ref().filter(|_| listing_all).and_then(|game| spaces_by_game.get(game));
        let (action_space, shape) = match cached {
            Some(spaces) => spaces.clone(),
            None => {
                let made = env::make(id, &options)?;
                let spaces = (made.action_space().clone(), made.observation_shape().to_vec());
                if let Some(game) = game.clone() {
                    spaces_by_game.insert(game, spaces.clone());
                }
                spaces
            }
        };
        let mut line = format!("{id:<34} {:<24} {shape:?}", action_space.to_string());
        if let (false, Some(game)) = (listing_all, game) {
            let crop = options.crops.for_game(&game);
            line.push_str(&format!("  crop rows {}..{}", crop.crop1, crop.rows_end()));
        }
        lines.push(line);
    }
    if listing_all {
        lines.extend(OUTSIDE_ENVS.iter().map(|line| line.to_string()));
    }
    crate::console::say(lines.join("\n").trim_end());
    Ok(())
}
