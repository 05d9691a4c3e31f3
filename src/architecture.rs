//! Tests of the tree's shape, read from the sources: the rules of lib.rs's Layout
//! that the compiler does not check.

use std::path::{Path, PathBuf};

/// Every `.rs` file under src/, by its path from src/, with its code outside its
/// `#[cfg(test)]` module (a3g's files keep their tests in one module at the end).
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("src/ is readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, files);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                files.push(path);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a source file");
            // A file's tests may start threads and name any layer.
            let tests =
                ["#[cfg(test)]", "#[cfg(all(test"].iter().filter_map(|mark| text.find(mark)).min();
            let code = text[..tests.unwrap_or(text.len())].to_string();
            let name = path.strip_prefix(&src).expect("under src/").to_string_lossy().into_owned();
            (name, code)
        })
        .collect()
}

/// No flag is read past config/: only the command line itself, the settings made from
/// it and the subcommands that hand their flags to them (or, for `envs` and `plot`,
/// which have no settings, read them) name clap's types; each trainer's settings.rs
/// holds its own flag group and reads it, and distributed/ derives its own flag type,
/// `--sync-merge`'s.
#[test]
fn no_clap_type_past_config() {
    let allowed = |file: &str| {
        ["cli.rs", "main.rs", "lib.rs", "train.rs", "eval.rs", "envs.rs", "plot.rs"].contains(&file)
            || file.starts_with("config/")
            || file == "distributed/sync.rs"
            || file.ends_with("/settings.rs")
    };
    for (file, code) in sources() {
        if allowed(&file) {
            continue;
        }
        for clap_type in ["crate::cli", "clap::"] {
            assert!(!code.contains(clap_type), "{file} names {clap_type} past config/");
        }
    }
}

/// Every long-lived thread is started through supervisor.rs, which names and joins
/// it and keeps its failure. The exceptions, one named thread each: the signal
/// watcher (stop.rs) and the thread that starts outside environments' processes
/// (env/gym/mod.rs), which live as long as the process, and a rank's join of the
/// other ranks (distributed/c10d.rs), which c10d may block for ever and which nothing
/// may wait for past its timeout.
#[test]
fn every_thread_starts_through_the_supervisor() {
    let exceptions = [
        ("stop.rs", "signals"),
        ("env/gym/mod.rs", "env spawner"),
        ("distributed/c10d.rs", "c10d join"),
    ];
    for (file, code) in sources() {
        if file == "supervisor.rs" {
            continue;
        }
        let starts: usize = ["thread::spawn", "thread::Builder", "thread::scope"]
            .iter()
            .map(|spawn| code.matches(spawn).count())
            .sum();
        match exceptions.iter().find(|(exempt, _)| *exempt == file) {
            Some((_, thread)) => {
                assert_eq!(starts, 1, "{file} starts threads beside its own {thread:?}");
                let named = format!(".name(\"{thread}\".into())");
                assert!(code.contains(&named), "{file}'s own thread is not named {thread:?}");
            }
            None => assert_eq!(starts, 0, "{file} starts a thread outside supervisor.rs"),
        }
    }
}

/// lib.rs's layers, lowest first, as paths under src/ (a folder ends in `/`; the
/// longest match names a file's layer, so a trainer's settings.rs sits below its
/// folder's threads).
const LAYERS: [(&str, &[&str]); 6] = [
    ("foundation", &["error.rs", "console.rs", "stop.rs", "precision.rs", "files.rs"]),
    (
        "environments and networks",
        &[
            "env/",
            "fuzz.rs",
            "input_norm.rs",
            "model/",
            "rollout.rs",
            "device.rs",
            "shared_optim.rs",
            "game_log.rs",
            "gif.rs",
            "tensorboard.rs",
            "policy.rs",
            "gradients.rs",
        ],
    ),
    (
        "state and settings",
        &[
            "a3c/settings.rs",
            "ga3c/settings.rs",
            "checkpoint/",
            "counters.rs",
            "shared.rs",
            "cli.rs",
            "distributed/",
        ],
    ),
    ("config", &["config/"]),
    ("running", &["supervisor.rs", "trainer.rs", "a3c/", "ga3c/", "test_agent.rs", "monitor.rs"]),
    (
        "commands",
        &[
            "train.rs",
            "eval.rs",
            "envs.rs",
            "devices.rs",
            "plot.rs",
            "lib.rs",
            "main.rs",
            "architecture.rs",
        ],
    ),
];

/// The layer of the file at `path` under src/, by the longest prefix that names it.
fn layer_of(path: &str) -> Option<usize> {
    LAYERS
        .iter()
        .enumerate()
        .flat_map(|(layer, (_, paths))| paths.iter().map(move |prefix| (layer, *prefix)))
        .filter(|(_, prefix)| {
            path == *prefix || (prefix.ends_with('/') && path.starts_with(prefix))
        })
        .max_by_key(|(_, prefix)| prefix.len())
        .map(|(layer, _)| layer)
}

/// The file under src/ that `crate::a::b::c` names: the longest of `a/b/c.rs`,
/// `a/b/c/mod.rs`, `a/b.rs`, ... that exists.
fn file_of(path: &str, files: &[String]) -> Option<String> {
    let segments: Vec<&str> = path.split("::").collect();
    (1..=segments.len()).rev().find_map(|count| {
        let stem = segments[..count].join("/");
        [format!("{stem}.rs"), format!("{stem}/mod.rs")]
            .into_iter()
            .find(|candidate| files.contains(candidate))
    })
}

/// No file imports from a higher layer than its own: the environments and networks
/// know nothing of checkpoints or settings, the settings nothing of the threads that
/// run them, the threads nothing of the commands (doc comments aside).
#[test]
fn no_import_from_a_lower_layer_to_a_higher_one() {
    let sources = sources();
    let files: Vec<String> = sources.iter().map(|(file, _)| file.clone()).collect();
    for (file, code) in &sources {
        let own = layer_of(file).unwrap_or_else(|| panic!("{file} is in none of LAYERS"));
        let code: String = code
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for (start, _) in code.match_indices("crate::") {
            let path: String = code[start + "crate::".len()..]
                .chars()
                .take_while(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == ':'
                })
                .collect();
            let path = path.trim_end_matches(':');
            let Some(target) = file_of(path, &files) else { continue };
            let theirs =
                layer_of(&target).unwrap_or_else(|| panic!("{target} is in none of LAYERS"));
            assert!(
                theirs <= own,
                "{file} ({}) imports crate::{path} from {target} ({})",
                LAYERS[own].0,
                LAYERS[theirs].0
            );
        }
    }
}
