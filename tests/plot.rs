//! `a3g plot`: learning curves drawn from hand-written game logs, read back as PNGs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{assert_one_line_error, Run, Scratch};

/// The colours of the first two series (Matplotlib's tab10 blue and orange).
const FIRST: [u8; 3] = [31, 119, 180];
const SECOND: [u8; 3] = [255, 127, 14];

/// A log as `a3g train` writes it: a run with status lines, then a part resumed with
/// --load whose clock restarts at 0, then a fresh run.
const TRAIN_LOG: &str = "\
env: \"PongDeterministic-v4\"
load: false
[00h 00m 05s] agent steps 2000, emulator frames 8000, 400 steps/s, 1600 frames/s
Time 00h 00m 08s, episode reward -21, episode length 812, reward mean -21.0000
[00h 00m 10s] agent steps 4000, emulator frames 16000, 400 steps/s, 1600 frames/s
Time 00h 00m 14s, episode reward -20, episode length 900, reward mean -20.5000
[00h 00m 15s] agent steps 6000, emulator frames 24000, 400 steps/s, 1600 frames/s
Time 00h 00m 19s, episode reward -18, episode length 950, reward mean -19.6667
--- a3g train resumed here, at 5500 agent steps ---
env: \"PongDeterministic-v4\"
load: true
[00h 00m 05s] agent steps 7500, emulator frames 30000, 400 steps/s, 1600 frames/s
Time 00h 00m 07s, episode reward -15, episode length 1000, reward mean -15.0000
[00h 00m 10s] agent steps 9500, emulator frames 38000, 400 steps/s, 1600 frames/s
Time 00h 00m 12s, episode reward -10, episode length 1200, reward mean -12.5000
--- a3g train started a new run here ---
env: \"PongDeterministic-v4\"
load: false
[00h 00m 05s] agent steps 2000, emulator frames 8000, 400 steps/s, 1600 frames/s
Time 00h 00m 06s, episode reward -21, episode length 700, reward mean -21.0000
Time 00h 00m 09s, episode reward -19, episode length 760, reward mean -20.0000
";

/// An `a3g eval` log: game lines, no status lines.
const EVAL_LOG: &str = "\
env: \"PongDeterministic-v4\"
Time 00h 00m 21s, episode reward 21, episode length 1700, reward mean 21.0000
Time 00h 00m 43s, episode reward 19, episode length 1800, reward mean 20.0000
";

/// A decoded PNG: width, height and RGB rows.
struct Image {
    width: u32,
    height: u32,
    pixels: Vec<u8>,
}

impl Image {
    fn read(path: &Path) -> Image {
        let file = std::fs::File::open(path).expect("the PNG was written");
        let (info, mut reader) = png::Decoder::new(file).read_info().expect("a PNG header");
        assert_eq!(info.color_type, png::ColorType::RGB);
        let mut pixels = vec![0; info.buffer_size()];
        reader.next_frame(&mut pixels).expect("the PNG decodes");
        Image { width: info.width, height: info.height, pixels }
    }

    /// Pixels of exactly `color` in the top half and in the bottom half (a panel each).
    fn count_by_half(&self, color: [u8; 3]) -> (usize, usize) {
        let half = (self.width * (self.height / 2)) as usize;
        let (mut top, mut bottom) = (0, 0);
        for (index, pixel) in self.pixels.chunks_exact(3).enumerate() {
            if pixel == color {
                if index < half {
                    top += 1;
                } else {
                    bottom += 1;
                }
            }
        }
        (top, bottom)
    }
}

/// A train log with two runs, one of them resumed, and status lines plots beside the
/// log by default (its path printed on stdout, nothing on stderr), at 1200x900, with the
/// first run's colour in both the wall-time and the agent-steps panel.
#[test]
fn train_log_plots_both_panels() {
    let scratch = Scratch::new("plot-train");
    std::fs::create_dir(scratch.path("logs")).expect("create logs/");
    scratch.write("logs/PongDeterministic-v4_log", TRAIN_LOG);
    let run = scratch.a3g(&["plot", "logs/PongDeterministic-v4_log"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(
        run.stdout.trim(),
        Path::new("logs").join("PongDeterministic-v4_log.png").to_str().unwrap()
    );
    assert_eq!(run.stderr, "");
    let image = Image::read(&scratch.path("logs/PongDeterministic-v4_log.png"));
    assert_eq!((image.width, image.height), (1200, 900));
    assert!(image.pixels.chunks_exact(3).any(|pixel| *pixel != image.pixels[..3]), "uniform");
    let (top, bottom) = image.count_by_half(FIRST);
    assert!(top > 50 && bottom > 50, "first run's colour: {top} above, {bottom} below");
    let (top, bottom) = image.count_by_half(SECOND);
    assert!(top > 50 && bottom > 50, "second run's colour: {top} above, {bottom} below");
}

/// Two logs share the axes, each in its own colour, in a file and size of one's
/// choosing.
#[test]
fn several_logs_plot_to_the_chosen_file_and_size() {
    let scratch = Scratch::new("plot-several");
    scratch.write("a_log", &TRAIN_LOG[..TRAIN_LOG.find("--- a3g train started").unwrap()]);
    scratch.write("b_log", TRAIN_LOG.split("started a new run here ---\n").nth(1).unwrap());
    let run = scratch.a3g(&[
        "plot", "a_log", "b_log", "--output", "both.png", "--width", "800", "--height", "600",
        "--title", "two runs",
    ]);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.stdout.trim(), "both.png");
    let image = Image::read(&scratch.path("both.png"));
    assert_eq!((image.width, image.height), (800, 600));
    for color in [FIRST, SECOND] {
        let (top, bottom) = image.count_by_half(color);
        assert!(top > 30 && bottom > 30, "{color:?}: {top} above, {bottom} below");
    }
}

/// An eval log has no status lines: it plots against wall time only, and one note on
/// stderr says why the agent-steps panel leaves it out.
#[test]
fn eval_log_plots_wall_time_only() {
    let scratch = Scratch::new("plot-eval");
    scratch.write("Pong_mon_log", EVAL_LOG);
    let run = scratch.a3g(&["plot", "Pong_mon_log"]);
    assert!(run.status.success(), "{}", run.stderr);
    let notes: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(notes.len(), 1, "{}", run.stderr);
    assert!(notes[0].contains("Pong_mon_log has no status lines"), "{}", notes[0]);
    let (top, bottom) = Image::read(&scratch.path("Pong_mon_log.png")).count_by_half(FIRST);
    assert!(top > 30 && bottom == 0, "{top} above, {bottom} below");
}

/// A log with arguments but no test game yet is one error line naming it.
#[test]
fn log_without_games_is_one_error_line() {
    let scratch = Scratch::new("plot-empty");
    scratch.write("Pong_log", "env: \"PongDeterministic-v4\"\nload: false\n");
    let line = assert_one_line_error(&scratch.a3g(&["plot", "Pong_log"]));
    assert!(line.contains("Pong_log has no test games yet;"), "{line}");
    assert!(!scratch.path("Pong_log.png").exists());
}

/// A missing log is one error line naming it and what to check.
#[test]
fn missing_log_is_one_error_line() {
    let line = assert_one_line_error(&Scratch::new("plot-missing").a3g(&["plot", "absent_log"]));
    assert!(line.contains("absent_log") && line.contains("check that the path exists"), "{line}");
}

/// An output path in a folder that does not exist is one error line naming it.
#[test]
fn unwritable_output_is_one_error_line() {
    let scratch = Scratch::new("plot-unwritable");
    scratch.write("Pong_log", TRAIN_LOG);
    let line =
        assert_one_line_error(&scratch.a3g(&["plot", "Pong_log", "-o", "no/such/dir/plot.png"]));
    assert!(line.starts_with("error: cannot write the plot to no/such/dir/plot.png"), "{line}");
}

/// `-o` may replace an earlier plot or an empty file but no other file: naming one of
/// the logs being drawn, or any file that is not a PNG, is one error line that leaves
/// the file as it was.
#[test]
fn output_replaces_only_earlier_plots() {
    let scratch = Scratch::new("plot-replace");
    scratch.write("Pong_log", TRAIN_LOG);
    scratch.write("eval_log", EVAL_LOG);
    for target in ["Pong_log", "eval_log", "model.safetensors"] {
        if target == "model.safetensors" {
            scratch.write(target, "weights");
        }
        let before = std::fs::read(scratch.path(target)).unwrap();
        let line =
            assert_one_line_error(&scratch.a3g(&["plot", "Pong_log", "eval_log", "-o", target]));
        assert!(
            line.contains(target) && line.contains("not a PNG") && line.contains("-o"),
            "{line}"
        );
        assert_eq!(std::fs::read(scratch.path(target)).unwrap(), before, "{target} was changed");
    }
    // An empty file (mktemp's) holds nothing to lose; then the plot replaces itself.
    scratch.write("curve.png", "");
    for _ in 0..2 {
        let run = scratch.a3g(&["plot", "Pong_log", "-o", "curve.png"]);
        assert!(run.status.success(), "{}", run.stderr);
        assert!(Image::read(&scratch.path("curve.png")).width > 0);
    }
}

/// A log path that leads to a device is refused at once, not read without end.
#[test]
fn a_device_is_not_read_as_a_log() {
    let scratch = Scratch::new("plot-device");
    std::os::unix::fs::symlink("/dev/zero", scratch.path("zeros_log")).unwrap();
    let line = assert_one_line_error(&plot_in_time(&scratch, "zeros_log"));
    assert!(line.contains("zeros_log") && line.contains("a device, not a file"), "{line}");
}

/// Sizes outside what --width and --height allow are usage errors naming the flag.
#[test]
fn size_out_of_range_is_a_usage_error() {
    let scratch = Scratch::new("plot-size");
    scratch.write("Pong_log", EVAL_LOG);
    let run = scratch.a3g(&["plot", "Pong_log", "--width", "10"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(run.stderr.contains("--width"), "{}", run.stderr);
}

/// Runs `a3g plot log` in `scratch`, failing the test if it takes over 20 s (it once
/// looped for hours); the run is killed then.
fn plot_in_time(scratch: &Scratch, log: &str) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_a3g"))
        .args(["plot", log])
        .current_dir(scratch.path("."))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a3g");
    let started = Instant::now();
    while child.try_wait().expect("wait for a3g").is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a3g plot {log} ran for over 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("a3g ended").into()
}

/// A game line with a clock of 10^14 hours before an ordinary one, and scores of
/// ±1e308: plot finishes at once and draws (it looped a day at a time, then searched
/// forever for ticks on an infinite score axis).
#[test]
fn absurd_clocks_and_scores_plot_at_once() {
    let scratch = Scratch::new("plot-absurd");
    scratch.write(
        "clock_log",
        "Time 100000000000000h 00m 00s, episode reward 1, episode length 1, reward mean 1\n\
         Time 00h 00m 05s, episode reward 2, episode length 1, reward mean 1.5000\n",
    );
    scratch.write(
        "scores_log",
        "Time 00h 00m 01s, episode reward 1e308, episode length 1, reward mean 1e308\n\
         Time 00h 00m 02s, episode reward -1e308, episode length 1, reward mean 0\n",
    );
    for log in ["clock_log", "scores_log"] {
        let run = plot_in_time(&scratch, log);
        assert!(run.status.success(), "{log}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        let image = Image::read(&scratch.path(&format!("{log}.png")));
        assert!(image.count_by_half(FIRST).0 > 0, "{log}: nothing drawn");
    }
}

/// Lines two runs fused in one log, or wrote out of clock order, are left out and
/// counted in one note on stderr; the whole lines still plot.
#[test]
fn fused_and_out_of_order_lines_are_counted() {
    let scratch = Scratch::new("plot-fused");
    scratch.write(
        "Pong_log",
        "[00h 00m 01s] agent steps 100, emulator frames 400, 100 steps/s\n\
         Time 00h 00m 02s, episode reward -21, episode length 9, reward mean -21.0000\n\
         Time 00h 00m 03s, episode reward -20, episode length 9, reward mean -20.5000Time 00h 00m 01s, episode reward 3, episode length 9, reward mean 3.0000\n\
         [00h 00m 04s] agent steps 400, emulator frames 1600, 100 steps/s[00h 00m 02s] agent steps 50, emulator frames 200, 100 steps/s\n\
         Time 00h 00m 01s, episode reward 3, episode length 9, reward mean 3.0000\n\
         Time 00h 00m 06s, episode reward -19, episode length 9, reward mean -20.0000\n\
         [00h 00m 06s] agent steps 600, emulator frames 2400, 100 steps/s\n",
    );
    let run = plot_in_time(&scratch, "Pong_log");
    assert!(run.status.success(), "{}", run.stderr);
    let notes: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(notes.len(), 1, "{}", run.stderr);
    assert!(
        notes[0].starts_with("note: left out 3 game or status lines of Pong_log: 2 not whole")
            && notes[0].contains("1 whose clock runs back"),
        "{}",
        notes[0]
    );
    assert!(scratch.path("Pong_log.png").exists());
}
