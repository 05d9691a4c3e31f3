//! The command line's surface: version, help, subcommands and usage errors.

use std::process::{Command, Stdio};

use crate::util::{assert_one_line_error, cartpole, Scratch};

/// `a3g --version` prints the package name and version and exits 0.
#[test]
fn version_names_the_package() {
    let run = Scratch::new("version").a3g(&["--version"]);
    assert!(run.status.success());
    assert_eq!(run.stdout.trim(), format!("a3g {}", env!("CARGO_PKG_VERSION")));
}

/// `a3g --help` lists the subcommands.
#[test]
fn help_lists_subcommands() {
    let run = Scratch::new("help").a3g(&["--help"]);
    assert!(run.status.success());
    for expected in ["Usage: a3g", "train", "eval", "plot", "--version"] {
        assert!(run.stdout.contains(expected), "--help lacks {expected:?}: {}", run.stdout);
    }
}

/// Each subcommand has its own help.
#[test]
fn subcommands_have_help() {
    let scratch = Scratch::new("subhelp");
    for subcommand in ["train", "eval", "plot"] {
        let run = scratch.a3g(&[subcommand, "--help"]);
        assert!(run.status.success(), "{subcommand} --help failed: {}", run.stderr);
        assert!(run.stdout.contains(&format!("Usage: a3g {subcommand}")), "{}", run.stdout);
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

/// `a3g envs` lists every id with its action space and observation shape.
#[test]
fn envs_lists_every_id() {
    let run = Scratch::new("envs-all").a3g(&["envs"]);
    assert!(run.status.success(), "{}", run.stderr);
    let line = |id: &str| {
        run.stdout
            .lines()
            .find(|line| line.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("{id} not listed"))
            .to_string()
    };
    assert!(line("CartPole-v1").contains("Discrete(2)") && line("CartPole-v1").ends_with("[4]"));
    assert!(line("Pendulum-v1").contains("Box([-2.0], [2.0])"));
    assert!(line("PongDeterministic-v4").contains("Discrete(6)"));
    assert!(
        line("ALE/Breakout-v5").contains("Discrete(4)")
            && line("ALE/Breakout-v5").ends_with("[1, 80, 80]")
    );
    assert!(
        line("LunarLander-v3").contains("Discrete(4)") && line("LunarLander-v3").ends_with("[8]")
    );
    assert!(line("BipedalWalkerHardcore-v3").contains("Box([-1.0, -1.0, -1.0, -1.0]"));
    assert!(line("BipedalWalker-v3").ends_with("[24]"));
    // Classic control, Box2D, then each Atari game in its seven id families, then the
    // two ways to name an environment from outside a3g.
    assert_eq!(run.stdout.lines().count(), 6 + 4 + 61 * 7 + 3);
    assert!(run.stdout.contains("gym:<id>") && run.stdout.contains("<file.py>:<Class>"));
}

/// Named ids are described with the crop rows their game gets; a game the crop file
/// does not name gets the Default entry.
#[test]
fn envs_shows_crop_rows_from_env_config() {
    let scratch = Scratch::new("envs-crop");
    let run = scratch.a3g(&["envs", "MsPacmanNoFrameskip-v4", "Tennis-v4"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(
        run.stdout.contains("crop rows 2..170") && run.stdout.contains("crop rows 34..194"),
        "{}",
        run.stdout
    );
    scratch.write(
        "crops.json",
        r#"{"Default": {"crop1": 10, "crop2": 20}, "Tennis": {"crop1": 0, "crop2": 0}}"#,
    );
    let run = scratch.a3g(&["envs", "MsPacman-v4", "Tennis-v4", "--env-config", "crops.json"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(
        run.stdout.contains("crop rows 10..180") && run.stdout.contains("crop rows 0..160"),
        "{}",
        run.stdout
    );
}

/// An unknown id is named, with the closest real ids suggested.
#[test]
fn unknown_env_id_suggests_closest() {
    let line =
        assert_one_line_error(&Scratch::new("envs-unknown").a3g(&["envs", "PongDeterministic-v5"]));
    assert!(
        line.contains("\"PongDeterministic-v5\"") && line.contains("PongDeterministic-v4"),
        "{line}"
    );
}

/// Defender, whose loading never ends in ALE 0.6, is refused at once.
#[test]
fn defender_is_refused_not_hung() {
    let line = assert_one_line_error(&Scratch::new("envs-defender").a3g(&["envs", "Defender-v4"]));
    assert!(line.contains("Defender-v4 cannot run"), "{line}");
}

/// A malformed crop file is named with the position of the error; a missing one, or
/// one that is a device, is named too.
#[test]
fn bad_crop_file_is_named() {
    let scratch = Scratch::new("envs-bad-crop");
    scratch.write("crops.json", "{\n  \"Default\": {\"crop1\": 1, \"crop2\" 2}\n}\n");
    let line =
        assert_one_line_error(&scratch.a3g(&["envs", "Pong-v4", "--env-config", "crops.json"]));
    assert!(line.contains("crops.json") && line.contains("line 2 column"), "{line}");
    let line =
        assert_one_line_error(&scratch.a3g(&["envs", "Pong-v4", "--env-config", "absent.json"]));
    assert!(line.contains("absent.json"), "{line}");
    // A path to a device is refused at once (it was read without end).
    std::os::unix::fs::symlink("/dev/zero", scratch.path("zeros.json")).unwrap();
    let line =
        assert_one_line_error(&scratch.a3g(&["envs", "Pong-v4", "--env-config", "zeros.json"]));
    assert!(line.contains("zeros.json") && line.contains("a device, not a file"), "{line}");
}

/// A negative --reward-clip or --reward-scale reaches its parser, which says what is
/// allowed, rather than clap taking it for an unknown flag `-1`.
#[test]
fn negative_reward_flags_say_what_is_allowed() {
    let scratch = Scratch::new("negative-reward-flags");
    for (flag, allowed) in [
        ("--reward-clip", "write a positive number, or off"),
        ("--reward-scale", "write a positive number"),
    ] {
        let run = scratch.a3g_owned(&cartpole(&[flag, "-1"]));
        assert_eq!(run.status.code(), Some(2), "{}", run.stderr);
        assert!(run.stderr.contains(flag) && run.stderr.contains(allowed), "{}", run.stderr);
        assert!(!run.stderr.contains("unexpected argument"), "{}", run.stderr);
    }
}

/// `a3g envs | head -1`: a listing whose reader has gone ends quietly, without the
/// note about game logs and checkpoints that only train and eval have.
#[test]
fn envs_ends_quietly_when_stdout_closes() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_a3g"))
        .arg("envs")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a3g");
    // Closed before the listing (which loads every game) is written.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("a3g ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(stderr, "");
}

/// Stdout on a full disk (`a3g envs > /dev/full`) loses the listing: one error line
/// that says so and a failed exit, where a closed pipe ends quietly.
#[test]
fn envs_on_a_full_disk_is_an_error() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let output = Command::new(env!("CARGO_BIN_EXE_a3g"))
        .arg("envs")
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .expect("run a3g");
    let line = assert_one_line_error(&crate::util::Run::from(output));
    assert!(
        line.contains("stdout") && line.contains("No space left") && line.contains("disk space"),
        "{line}"
    );
}

/// A TMPDIR that is a file, where Atari ROMs are cached, is one error line that says
/// to set TMPDIR to a folder (no flag sets it).
#[test]
fn tmpdir_that_is_a_file_names_tmpdir() {
    let scratch = Scratch::new("tmpdir-file");
    scratch.write("not-a-folder", "");
    let tmpdir = scratch.path("not-a-folder");
    let run = scratch
        .a3g_with_env(&["envs", "PongDeterministic-v4"], &[("TMPDIR", tmpdir.to_str().unwrap())]);
    let line = assert_one_line_error(&run);
    assert!(line.contains("not-a-folder") && line.contains("set TMPDIR to a folder"), "{line}");
}
