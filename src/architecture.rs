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
            let code = text.split("#[cfg(test)]").next().unwrap_or_default().to_string();
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
/// it and keeps its failure. The exceptions: the signal watcher (stop.rs), which
/// lives as long as the process, and a rank's join of the other ranks
/// (distributed/c10d.rs), which c10d may block for ever and which nothing may wait
/// for past its timeout.
#[test]
fn every_thread_starts_through_the_supervisor() {
    let exceptions = ["supervisor.rs", "stop.rs", "distributed/c10d.rs"];
    for (file, code) in sources() {
        if exceptions.contains(&file.as_str()) {
            continue;
        }
        for spawn in ["thread::spawn", "thread::Builder", "thread::scope"] {
            assert!(
                !code.contains(spawn),
                "{file} starts a thread ({spawn}) outside supervisor.rs"
            );
        }
    }
}
