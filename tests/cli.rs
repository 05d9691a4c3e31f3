//! The command line's surface: version, help, subcommands and usage errors.

use crate::util::{assert_one_line_error, Scratch};

/// `a3g --version` prints the package name and version and exits 0.
#[test]
fn version_names_the_package() {
    let run = Scratch::new("version").a3g(&["--version"]);
    assert!(run.status.success());
    assert_eq!(run.stdout.trim(), format!("a3g {}", env!("CARGO_PKG_VERSION")));
}

/// `a3g --help` lists both subcommands.
#[test]
fn help_lists_subcommands() {
    let run = Scratch::new("help").a3g(&["--help"]);
    assert!(run.status.success());
    for expected in ["Usage: a3g", "train", "eval", "--version"] {
        assert!(run.stdout.contains(expected), "--help lacks {expected:?}: {}", run.stdout);
    }
}

/// Each subcommand has its own help.
#[test]
fn subcommands_have_help() {
    let scratch = Scratch::new("subhelp");
    for subcommand in ["train", "eval"] {
        let run = scratch.a3g(&[subcommand, "--help"]);
        assert!(run.status.success(), "{subcommand} --help failed: {}", run.stderr);
        assert!(run.stdout.contains(&format!("Usage: a3g {subcommand}")), "{}", run.stdout);
    }
}

/// A subcommand this version cannot run yet says so on one line and exits non-zero.
#[test]
fn unavailable_subcommand_is_one_line_error() {
    let scratch = Scratch::new("unavailable");
    for subcommand in ["train", "eval"] {
        let line = assert_one_line_error(&scratch.a3g(&[subcommand]));
        assert!(line.contains(&format!("a3g {subcommand}")), "{line}");
    }
}

/// An unknown flag is a usage error from clap: exit code 2, the flag named, no panic.
#[test]
fn unknown_flag_is_usage_error() {
    let run = Scratch::new("badflag").a3g(&["--no-such-flag"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(run.stderr.contains("--no-such-flag"), "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

/// No subcommand at all is a usage error, not a panic.
#[test]
fn missing_subcommand_is_usage_error() {
    let run = Scratch::new("nosub").a3g(&[]);
    assert_eq!(run.status.code(), Some(2));
    assert!(run.stderr.contains("Usage: a3g"), "{}", run.stderr);
}
